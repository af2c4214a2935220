"""Each builder in redis_ratelimit_client.commands against the module's own COMMAND DOCS: the arguments
it takes are the command's (under the same names, but for the folds below), and every token it
sends is one the command documents. A new option in the module, or a renamed one, fails here."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from servers import Server

from redis_ratelimit_client import commands

# A command's documented arguments that a builder takes in another form.
FOLDED = {
    "ms": "a duration in seconds (int, float or timedelta), sent in ms where needed",
    "numkeys": "len(keys)",
    "reserve": "the reserve_* builders send it",
    "partial": "gcra_up_to and the reserve_*_up_to builders send it",
}
# Builders that send a command for one of its uses, and the documented arguments they leave to
# the command's main builder.
VARIANTS: dict[str, tuple[str, Any, set[str], dict[str, Any]]] = {
    "reserve_hit": (
        "ratelimit.hit",
        commands.reserve_hit,
        set(),
        {"key": "k", "limit": 5, "window": "month", "cost": 2, "align": True, "tz": "+05:30"},
    ),
    "reserve_hit_up_to": (
        "ratelimit.hit",
        commands.reserve_hit_up_to,
        set(),
        {"key": "k", "limit": 5, "window": "month", "cost": 9, "align": True, "tz": "+05:30"},
    ),
    "reserve_slide": (
        "ratelimit.slide",
        commands.reserve_slide,
        {"peek"},
        {"key": "k", "limit": 5, "window": 1.5, "cost": 2},
    ),
    "reserve_slide_up_to": (
        "ratelimit.slide",
        commands.reserve_slide_up_to,
        {"peek"},
        {"key": "k", "limit": 5, "window": 1.5, "cost": 9},
    ),
    "reserve_all": (
        "ratelimit.hitall",
        commands.reserve_all,
        set(),
        {"keys": ["a", "b"], "limits": [(1, 2), (2, "day")], "cost": 2, "align": True, "tz": "+01:00", "tokens": 40},
    ),
    "adapt_up_to": (
        "ratelimit.adapt",
        commands.adapt_up_to,
        set(),
        {"key": "k", "floor": 1, "start": 2, "ceiling": 3, "window": 60, "cost": 9},
    ),
    "reserve_adapt": (
        "ratelimit.adapt",
        commands.reserve_adapt,
        set(),
        {"key": "k", "floor": 1, "start": 2, "ceiling": 3, "window": 60, "cost": 2},
    ),
    "reserve_adapt_up_to": (
        "ratelimit.adapt",
        commands.reserve_adapt_up_to,
        set(),
        {"key": "k", "floor": 1, "start": 2, "ceiling": 3, "window": 60, "cost": 9},
    ),
    "gcra_up_to": (
        "ratelimit.gcra",
        commands.gcra_up_to,
        set(),
        {"key": "k", "max_burst": 1, "tokens_per_period": 2, "period": 0.5, "tokens": 2, "align": True},
    ),
    "reserve_gcra": (
        "ratelimit.gcra",
        commands.reserve_gcra,
        {"align"},
        {"key": "k", "max_burst": 1, "tokens_per_period": 2, "period": 0.5, "tokens": 2},
    ),
}
BUILDERS: dict[str, tuple[Any, dict[str, str], dict[str, Any]]] = {
    # command: (builder, {documented name: parameter}, a call with every option set)
    "ratelimit.settle": (commands.settle, {}, {"key": "k", "reservation": "h:1:1:1:1:01234567", "used": 3}),
    "ratelimit.hit": (
        commands.hit,
        {"zone": "tz"},
        {"key": "k", "limit": 5, "window": "month", "cost": 2, "align": True, "tz": "Europe/Paris"},
    ),
    "ratelimit.peek": (commands.peek, {}, {"key": "k", "limit": 5, "cost": 2}),
    "ratelimit.adapt": (
        commands.adapt,
        {},
        {"key": "k", "floor": 1, "start": 2, "ceiling": 3, "window": 1.5, "cost": 2},
    ),
    "ratelimit.report": (
        commands.report,
        {"ok": "outcome", "throttled": "outcome", "retry": "retry_after", "reset": "reset_after"},
        {"key": "k", "outcome": "throttled", "retry_after": 1, "limit": 5, "remaining": 2, "reset_after": 3, "age": 4},
    ),
    "ratelimit.slide": (commands.slide, {}, {"key": "k", "limit": 5, "window": 1.5, "cost": 2, "peek": True}),
    "ratelimit.hitall": (
        commands.hit_all,
        {"key": "keys", "limit": "limits", "window": "limits", "zone": "tz", "numtokenkeys": "token_keys"},
        {
            "keys": ["a", "b"],
            "limits": [(1, 2), (2, "day")],
            "cost": 2,
            "align": True,
            "tz": "Europe/Paris",
            "tokens": 40,
            "token_keys": 1,
        },
    ),
    "ratelimit.gcra": (
        commands.gcra,
        {"count": "tokens"},
        {"key": "k", "max_burst": 1, "tokens_per_period": 2, "period": 0.5, "tokens": 2, "align": True},
    ),
    "ratelimit.acquire": (commands.acquire, {}, {"key": "k", "limit": 2, "lease": 1.5, "id": "i"}),
    "ratelimit.release": (commands.release, {}, {"key": "k", "id": "i"}),
    "ratelimit.renew": (commands.renew, {}, {"key": "k", "id": "i", "lease": 1.5}),
    "ratelimit.top": (
        commands.top,
        {"denied": "view", "admitted": "view", "shadowed": "view"},
        {"view": "admitted", "count": 3, "reset": True},
    ),
}


def documented(server: Server, name: str) -> list[dict[str, Any]]:
    """COMMAND DOCS' arguments for one command, read off the connection (redis-py's reply parser
    for COMMAND DOCS does not read a module's)."""
    connection = redis.Connection(port=server.port, decode_responses=True)
    try:
        connection.send_command("COMMAND", "DOCS", name)
        reply = connection.read_response()
    finally:
        connection.disconnect()
    return [as_dict(argument) for argument in pairs(pairs(reply)[name])["arguments"]]


def pairs(reply: Any) -> dict[str, Any]:
    """A map as RESP3 gives it, or as RESP2's flat list of names and values."""
    return reply if isinstance(reply, dict) else dict(zip(reply[::2], reply[1::2], strict=True))


def as_dict(argument: Any) -> dict[str, Any]:
    fields = pairs(argument)
    if "arguments" in fields:
        fields["arguments"] = [as_dict(a) for a in fields["arguments"]]
    return fields


def walk(arguments: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for argument in arguments:
        yield argument
        yield from walk(argument.get("arguments", []))


CASES = [(name, name, *BUILDERS[name][:1], set(), *BUILDERS[name][1:]) for name in sorted(BUILDERS)] + [
    (variant, command, builder, left, BUILDERS[command][1], call)
    for variant, (command, builder, left, call) in sorted(VARIANTS.items())
]


@pytest.mark.parametrize(("case", "name", "builder", "left", "renamed", "full_call"), CASES, ids=[c[0] for c in CASES])
def test_builder_matches_command_docs(
    servers: dict[str, Server],
    case: str,
    name: str,
    builder: Any,
    left: set[str],
    renamed: dict[str, str],
    full_call: dict[str, Any],
) -> None:
    arguments = list(walk(documented(servers["module"], name)))
    leaves = [a for a in arguments if a["type"] != "block" and a["type"] != "oneof"]
    parameters = set(inspect.signature(builder).parameters)
    # Every documented argument is taken, under its name, a declared other name, or folded.
    for argument in leaves:
        taken = renamed.get(argument["name"], argument["name"])
        folded = argument["name"] in FOLDED or argument["name"] in left
        assert taken in parameters or folded, f"{case}: {argument['name']} is not taken"
    # Every parameter is a documented argument.
    names = {renamed.get(a["name"], a["name"]) for a in leaves}
    assert parameters <= names, f"{name}: {parameters - names} are not in COMMAND DOCS"
    # Every token sent is documented.
    tokens = {a["token"].upper() for a in arguments if "token" in a}
    call = builder(**full_call)
    sent = {a for a in call.module_args()[1:] if isinstance(a, str) and a.isupper() and a.isalpha()}
    assert sent <= tokens, f"{name}: sends {sent - tokens}, not in COMMAND DOCS"
    assert call.command.lower() == name
