"""The shared argument cases (testkit/conformance/arguments.json, the module's own answers): each
case the client can send as a typed call is built by redis_ratelimit_client.commands, with no
server, and the client must refuse exactly what the module refuses. A case with no typed call
(an unknown option, a missing value) or with a value the signature does not take (a limit of
"x") is not the client's to send; a refusal by the module's own data (`server_data`, its time
zone database) the client may leave to the server."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from redis_ratelimit_client import commands
from redis_ratelimit_client.errors import RateLimitError
from redis_ratelimit_client.results import Decision, Grant

CONFORMANCE = Path(__file__).parents[3] / "testkit/conformance"
CASES = json.loads((CONFORMANCE / "arguments.json").read_text())
REPLIES = json.loads((CONFORMANCE / "replies.json").read_text())


class NotTyped(Exception):
    """The case has a value the client's signature does not take."""


def integer(v: Any) -> int:
    if not isinstance(v, int):
        raise NotTyped(v)
    return v


def length(v: Any, ms: bool) -> Any:
    """A window or lease: seconds, or with MS a timedelta of milliseconds."""
    if isinstance(v, str):
        if ms:
            raise NotTyped(v)  # MS says how a length is sent, not a calendar unit
        return v  # a calendar unit, or a word that is none
    try:
        return timedelta(milliseconds=v) if ms else v
    except OverflowError:  # beyond timedelta's 999,999,999 days
        raise NotTyped(v) from None


def period(v: Any) -> float | int:
    try:
        return v if isinstance(v, int) else float(v)
    except ValueError:
        raise NotTyped(v) from None


def builder(command: str, c: dict[str, Any]) -> Callable[[], object] | None:
    """The client's call for a case, or None where the client has no such call."""
    cost = integer(c.get("COST", 1))
    partial, reserve = bool(c.get("PARTIAL")), bool(c.get("RESERVE"))
    if command == "ratelimit.hit":
        w = length(c["window"], bool(c.get("MS")))
        key, limit, kw = c["key"], integer(c["limit"]), {"align": bool(c.get("ALIGN")), "tz": c.get("TZ")}
        by_flags = {
            (False, False): lambda: commands.hit(key, limit, w, cost=cost, **kw),
            (True, False): lambda: commands.hit_up_to(key, limit, w, cost=cost, **kw),
            (False, True): lambda: commands.reserve_hit(key, limit, w, cost=cost, **kw),
            (True, True): lambda: commands.reserve_hit_up_to(key, limit, w, cost=cost, **kw),
        }
        return by_flags.get((partial, reserve))
    if command == "ratelimit.peek":
        return lambda: commands.peek(c["key"], integer(c["limit"]), cost=cost)
    if command == "ratelimit.slide":
        key, limit, w = c["key"], integer(c["limit"]), length(c["window"], bool(c.get("MS")))
        by_flags = {
            (False, False, False): lambda: commands.slide(key, limit, w, cost=cost),
            (False, False, True): lambda: commands.slide(key, limit, w, cost=cost, peek=True),
            (True, False, False): lambda: commands.slide_up_to(key, limit, w, cost=cost),
            (False, True, False): lambda: commands.reserve_slide(key, limit, w, cost=cost),
            (True, True, False): lambda: commands.reserve_slide_up_to(key, limit, w, cost=cost),
        }
        return by_flags.get((partial, reserve, bool(c.get("PEEK"))))
    if command == "ratelimit.gcra":
        key, burst, rate, p = c["key"], integer(c["max_burst"]), integer(c["tokens_per_period"]), period(c["period"])
        tokens, align = integer(c.get("TOKENS", 1)), bool(c.get("ALIGN"))
        by_flags = {
            (False, False): lambda: commands.gcra(key, burst, rate, p, tokens=tokens, align=align),
            (True, False): lambda: commands.gcra_up_to(key, burst, rate, p, tokens=tokens, align=align),
            (False, True): None if align else lambda: commands.reserve_gcra(key, burst, rate, p, tokens=tokens),
            (True, True): None if align else lambda: commands.reserve_gcra_up_to(key, burst, rate, p, tokens=tokens),
        }
        return by_flags.get((partial, reserve))
    if command == "ratelimit.hitall":
        ms = bool(c.get("MS"))
        limits = [(integer(limit), length(w, ms)) for limit, w in c["limits"]]
        kw: dict[str, Any] = {"cost": cost, "slide": bool(c.get("SLIDE")), "align": bool(c.get("ALIGN"))}
        kw["tz"] = c.get("TZ")
        if "TOKENS" in c:
            kw["tokens"], kw["token_keys"] = (integer(v) for v in c["TOKENS"])
        if reserve:
            return None if "TOKENS" not in c else lambda: commands.reserve_all(c["keys"], limits, **kw)
        return lambda: commands.hit_all(c["keys"], limits, **kw)
    if command == "ratelimit.acquire":
        lease = length(c["lease"], bool(c.get("MS")))
        return lambda: commands.acquire(c["key"], integer(c["limit"]), lease, id=c.get("ID"))
    if command == "ratelimit.release":
        return lambda: commands.release(c["key"], str(c["id"]))
    if command == "ratelimit.renew":
        return lambda: commands.renew(c["key"], str(c["id"]), length(c["lease"], bool(c.get("MS"))))
    if command == "ratelimit.top":
        views = [v for v in ("DENIED", "ADMITTED", "SHADOWED") if v in c]
        if len(views) > 1:
            return None
        view = views[0].lower() if views else "denied"
        count = integer(c["COUNT"]) if "COUNT" in c else None
        return lambda: commands.top(view, count=count, reset=bool(c.get("RESET")))  # type: ignore[arg-type]
    if command == "ratelimit.adapt":
        key, w = c["key"], length(c["window"], bool(c.get("MS")))
        bounds = (integer(c["floor"]), integer(c["start"]), integer(c["ceiling"]))
        adapting = {
            (False, False): lambda: commands.adapt(key, *bounds, w, cost=cost),
            (True, False): lambda: commands.adapt_up_to(key, *bounds, w, cost=cost),
            (False, True): lambda: commands.reserve_adapt(key, *bounds, w, cost=cost),
            (True, True): lambda: commands.reserve_adapt_up_to(key, *bounds, w, cost=cost),
        }
        return adapting[(partial, reserve)]
    if command == "ratelimit.report":
        if ("OK" in c) == ("THROTTLED" in c):
            return None  # a typed report has one outcome
        remaining = integer(c["REMAINING"]) if "REMAINING" in c else None
        reset = integer(c["RESET"]) / 1000 if "RESET" in c else None
        retry = integer(c["RETRY"]) / 1000 if "RETRY" in c else None
        limit = integer(c["LIMIT"]) if "LIMIT" in c else None
        age = integer(c["AGE"]) / 1000 if "AGE" in c else None
        outcome = "ok" if "OK" in c else "throttled"
        return lambda: commands.report(
            c["key"], outcome, retry_after=retry, limit=limit, remaining=remaining, reset_after=reset, age=age
        )
    raise AssertionError(f"a case of {command}, which this test does not know")


def test_the_client_refuses_what_the_module_refuses_and_no_more() -> None:
    sent, disagree = 0, []
    for case in CASES:
        if case["call"] is None:
            continue
        try:
            build = builder(case["command"], case["call"])
        except NotTyped:
            continue
        if build is None:
            continue
        try:
            build()
            refused = None
        except RateLimitError as e:
            refused = str(e)
        sent += 1
        if case["server_data"] and refused is None:
            continue
        if (refused is None) != (case["error"] is None):
            disagree.append(f"{case['command']} {' '.join(case['args'])}: module {case['error']}, client {refused}")
    assert not disagree, "\n".join(disagree)
    assert sent >= 100, sent


@pytest.mark.parametrize("command", sorted({c["command"] for c in CASES}))
def test_every_command_has_cases_the_client_sends(command: str) -> None:
    assert any(c["command"] == command and c["call"] is not None for c in CASES)


def read(d: Decision) -> dict[str, Any]:
    """A decision as the shared replies state it: ms, -1 for never, None for none."""

    def ms(seconds: float) -> int:
        return -1 if math.isinf(seconds) else round(seconds * 1000)

    return {
        "allowed": d.allowed,
        "count": d.count,
        "remaining": d.remaining,
        "limit": d.limit,
        "reset_after_ms": ms(d.reset_after),
        "retry_after_ms": None if d.retry_after is None else ms(d.retry_after),
        "window_ms": None if d.window is None else ms(d.window),
    }


@pytest.mark.parametrize("case", REPLIES, ids=[" ".join([c["command"], *c["args"]]) for c in REPLIES])
def test_the_client_reads_each_reply_as_the_module_means_it(case: dict[str, Any]) -> None:
    build = builder(case["command"], case["call"])
    assert build is not None
    answer = build().parse(case["reply"])  # type: ignore[attr-defined]
    got = read(answer.decision if isinstance(answer, Grant) else answer)
    if isinstance(answer, Grant):
        got["granted"] = answer.granted
    assert got == case["decision"]
