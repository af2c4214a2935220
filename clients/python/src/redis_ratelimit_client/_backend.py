"""What the sync and async clients share about the server: which backend answers (the module, or
the Functions library), how a Call goes to it, the library's source, and the client library's
exception types. The I/O itself is each client's."""

from __future__ import annotations

import importlib
import math
import weakref
from collections.abc import Generator
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal, TypeVar

from .commands import Arg, Call
from .errors import LibraryNotLoaded, NotReplicated, RateLimitError

Backend = Literal["module", "library"]
T = TypeVar("T")

# Asked with no arguments, a loaded module answers its arity error; a server without it, "unknown
# command". Neither touches a key, and it needs no MODULE LIST (which managed services refuse).
PROBE = ("RATELIMIT.PEEK",)
LIBRARY_NAME = "ratelimit"
LIBRARY_PROBE = ("FUNCTION", "LIST", "LIBRARYNAME", LIBRARY_NAME)

_backends: weakref.WeakKeyDictionary[Any, Backend] = weakref.WeakKeyDictionary()


Command = tuple[tuple[Arg, ...], dict[str, Any]]
"""A command of the detection, and its routing options."""


def detection(client: Any, load_library: bool) -> Generator[Command, Any, Backend]:
    """Finds out the backend, as commands for a client to send: it sends back each one's reply,
    or the ResponseError it got. Without the module, the library is looked for and, if missing
    and allowed, loaded (on every primary of a cluster; never REPLACE)."""
    probe = yield PROBE, routing(client)
    if module_answered(probe if isinstance(probe, Exception) else None):
        return remember(client, "module")
    listing = yield LIBRARY_PROBE, routing(client)
    if isinstance(listing, Exception):
        raise server_error(listing)
    if not has_library(listing):
        if not load_library:
            raise not_loaded()
        source = library_source()
        for node in client.get_primaries() if is_cluster(client) else [None]:
            loaded = yield ("FUNCTION", "LOAD", source), ({"target_nodes": node} if node else {})
            if isinstance(loaded, Exception) and not already_loaded(loaded):
                raise server_error(loaded)
    return remember(client, "library")


def library_source() -> str:
    """The Functions library shipped with the package (functions/ratelimit.lua)."""
    return resources.files(__package__).joinpath("ratelimit.lua").read_text(encoding="utf-8")


def cache_owner(client: Any) -> Any:
    """What the backend is remembered for: the connection pool (a cluster client: itself)."""
    return getattr(client, "connection_pool", None) or client


def remembered(client: Any) -> Backend | None:
    return _backends.get(cache_owner(client))


def remember(client: Any, backend: Backend) -> Backend:
    _backends[cache_owner(client)] = backend
    return backend


def forget(client: Any) -> None:
    _backends.pop(cache_owner(client), None)


def is_cluster(client: Any) -> bool:
    return hasattr(client, "get_primaries") and hasattr(client, "keyslot")


def exceptions(client: Any) -> Any:
    """The client library's exceptions module (redis.exceptions or valkey.exceptions)."""
    for cls in type(client).__mro__:
        root = cls.__module__.split(".")[0]
        if root in ("redis", "valkey"):
            return importlib.import_module(f"{root}.exceptions")
    raise TypeError(f"not a redis-py or valkey-py client: {type(client).__name__}")


def module_answered(error: Exception | None) -> bool:
    """Whether the probe's answer says the module is loaded."""
    return error is None or "unknown command" not in str(error).lower()


def has_library(reply: Any) -> bool:
    """Whether FUNCTION LIST's reply (RESP2 flat pairs or RESP3 maps) names the library."""
    for entry in reply or ():
        fields = entry if isinstance(entry, dict) else dict(zip(entry[::2], entry[1::2], strict=False))
        for name, value in fields.items():
            if _text(name) == "library_name" and _text(value) == LIBRARY_NAME:
                return True
    return False


def already_loaded(error: Exception) -> bool:
    """FUNCTION LOAD's answer when another client loaded the library first."""
    return "already exists" in str(error)


def library_missing(error: Exception) -> bool:
    """FCALL's answer on a server that no longer has the library (restarted, FUNCTION FLUSH)."""
    return "function not found" in str(error).lower()


def not_loaded() -> LibraryNotLoaded:
    return LibraryNotLoaded(
        "the server has neither the ratelimit module nor its Functions library: load the module "
        "(loadmodule .../libredis_ratelimit.so), or the library (FUNCTION LOAD with "
        "redis_ratelimit_client's ratelimit.lua, or RateLimiter(client, load_library=True))"
    )


def command_args(call: Call[Any], backend: Backend) -> tuple[Arg, ...]:
    return call.module_args() if backend == "module" else call.library_args()


def check_slots(client: Any, call: Call[Any]) -> None:
    """In a cluster, a call's keys must share a slot: refused here, before anything is sent."""
    if len(call.keys) > 1 and is_cluster(client) and len({client.keyslot(k) for k in call.keys}) > 1:
        raise RateLimitError(
            "CROSSSLOT Keys in request don't hash to the same slot (give them one hash tag, e.g. rl:{user:42}:s)"
        )


def routing(client: Any, keys: tuple[str, ...] = ()) -> dict[str, Any]:
    """A keyless command in a cluster (the probes, TOP) goes to a node chosen here."""
    if is_cluster(client) and not keys:
        return {"target_nodes": client.get_random_node()}
    return {}


def answers(
    calls: list[Call[Any]], replies: list[Any], raise_on_error: bool, replicas: Replicas | None = None
) -> list[Any]:
    """A pipeline's answers, in order: each call's, or the RateLimitError the server gave it; the
    first of those raised, after all have run, if ``raise_on_error``. With ``replicas``, the last
    reply is the WAIT queued behind the calls: too few replicas raise NotReplicated with them all."""
    results = [
        server_error(reply) if isinstance(reply, Exception) else call.parse(reply)
        for call, reply in zip(calls, replies[: len(calls)], strict=True)
    ]
    errors = [r for r in results if isinstance(r, RateLimitError)]
    if errors and raise_on_error:
        raise errors[0]
    if replicas is None:
        return results
    acknowledged = replies[len(calls)]
    if isinstance(acknowledged, Exception):
        raise server_error(acknowledged)
    return replicas.checked(results, int(acknowledged))


def waits(calls: list[Call[Any]], replicas: Replicas) -> Replicas | None:
    """The replicas a pipeline of ``calls`` waits for, once after them all: None if none writes."""
    return replicas if any(replicas.applies(call) for call in calls) else None


def server_error(error: Exception) -> RateLimitError:
    return RateLimitError(str(error))


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass(frozen=True)
class Replicas:
    """How many replicas a limiter's writes wait for (0: none), and how long at most (seconds)."""

    wanted: int = 0
    timeout: float = 0.1

    def __post_init__(self) -> None:
        if isinstance(self.wanted, bool) or not isinstance(self.wanted, int) or self.wanted < 0:
            raise RateLimitError(f"wait_for_replicas must be an integer >= 0, got {self.wanted!r}")
        # WAIT's timeout 0 blocks for ever: never sent.
        if isinstance(self.timeout, bool) or not isinstance(self.timeout, int | float) or not self.timeout > 0:
            raise RateLimitError(f"replica_timeout must be a number of seconds > 0, got {self.timeout!r}")

    def applies(self, call: Call[Any]) -> bool:
        """Whether ``call`` waits: it writes, and replicas are wanted."""
        return self.wanted > 0 and call.writes

    def command(self) -> tuple[Arg, ...]:
        return ("WAIT", self.wanted, max(1, math.ceil(self.timeout * 1000)))

    def checked(self, answer: T, acknowledged: int) -> T:
        if acknowledged < self.wanted:
            raise NotReplicated(answer, acknowledged, self.wanted)
        return answer

    def refuse_in_cluster(self, client: Any) -> None:
        """A cluster pipeline spreads its calls over nodes and connections: one WAIT covers none."""
        if self.wanted and is_cluster(client):
            raise RateLimitError(
                "a pipeline on a cluster client cannot wait for replicas: send those calls one by one "
                "(each then waits on its key's primary)"
            )


Pipelined = tuple[Any, list[tuple[Arg, ...]]]
"""Commands to send together on one connection: to a cluster's node, or (None) the client's own.
No commands: the cluster client reads the cluster's topology again (its nodes_manager)."""


def sent_and_waited(
    client: Any, errors: Any, args: tuple[Arg, ...], key: str, replicas: Replicas
) -> Generator[Pipelined, list[Any], tuple[Any, int]]:
    """One write and WAIT behind it, on one connection: WAIT counts what that connection wrote.
    The client pipelines each yielded batch and sends back its replies. In a cluster the batch
    goes to the key's primary; after a MOVED, to its new primary once the topology is read again
    (as the client does on a MOVED of its own); after an ASK, to the node it names. Answers the
    write's reply and how many replicas acknowledged it; a server error is raised. ``errors``:
    the client library's exceptions module, as the limiter found it."""
    cluster = is_cluster(client)
    node = client.get_node_from_key(key) if cluster else None
    batch = [args, replicas.command()]
    for _ in range(3):
        *_, reply, acknowledged = yield node, batch
        if not cluster or not isinstance(reply, errors.AskError):
            break
        asked = not isinstance(reply, errors.MovedError)
        node = client.get_node(host=reply.host, port=reply.port) if asked else None
        if node is None:
            yield None, []
            node = client.get_node(host=reply.host, port=reply.port) if asked else client.get_node_from_key(key)
        batch = [("ASKING",), args, replicas.command()] if asked else [args, replicas.command()]
    if isinstance(reply, Exception):
        raise reply
    return reply, int(acknowledged)
