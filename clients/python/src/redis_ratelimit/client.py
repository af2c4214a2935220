"""The synchronous client: RateLimiter over a redis-py or valkey-py client (standalone, a Sentinel
master, or a cluster), its pipelines, and permits held for a block."""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

from . import _backend, commands
from ._backend import Backend
from .commands import Call, Seconds
from .errors import PermitUnavailable, RateLimitError
from .results import Acquisition

P = ParamSpec("P")
T = TypeVar("T")
log = logging.getLogger("redis_ratelimit")


def _sent(build: Callable[P, Call[T]]) -> Callable[Concatenate[RateLimiter, P], T]:
    @functools.wraps(build)
    def method(self: RateLimiter, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self.run(build(*args, **kwargs))

    return method


def _queued(build: Callable[P, Call[Any]]) -> Callable[Concatenate[Pipeline, P], Pipeline]:
    @functools.wraps(build)
    def method(self: Pipeline, /, *args: P.args, **kwargs: P.kwargs) -> Pipeline:
        return self.queue(build(*args, **kwargs))

    return method


class RateLimiter:
    """The limiter commands on ``client`` (``redis.Redis``, ``valkey.Valkey``, ``RedisCluster``,
    a Sentinel master), answered by the module where the server has it, else by the Functions
    library (loaded when missing, unless ``load_library`` is False)."""

    def __init__(self, client: Any, *, load_library: bool = True) -> None:
        self.client = client
        self.load_library = load_library
        self._errors = _backend.exceptions(client)

    hit = _sent(commands.hit)
    peek = _sent(commands.peek)
    slide = _sent(commands.slide)
    hit_all = _sent(commands.hit_all)
    gcra = _sent(commands.gcra)
    acquire = _sent(commands.acquire)
    release = _sent(commands.release)
    renew = _sent(commands.renew)
    top = _sent(commands.top)

    @property
    def backend(self) -> Backend:
        """``"module"`` or ``"library"``: found out once per connection pool."""
        return self.detect()

    def detect(self) -> Backend:
        """``"module"`` or ``"library"``: found out once per connection pool."""
        return _backend.remembered(self.client) or self._detect()

    def _detect(self) -> Backend:
        try:
            self.client.execute_command(*_backend.PROBE, **_backend.routing(self.client))
            error = None
        except self._errors.ResponseError as e:
            error = e
        if _backend.module_answered(error):
            return _backend.remember(self.client, "module")
        listing = self.client.execute_command(*_backend.LIBRARY_PROBE, **_backend.routing(self.client))
        if not _backend.has_library(listing):
            if not self.load_library:
                raise _backend.not_loaded()
            self._load_library()
        return _backend.remember(self.client, "library")

    def _load_library(self) -> None:
        source = _backend.library_source()
        nodes = self.client.get_primaries() if _backend.is_cluster(self.client) else [None]
        for node in nodes:
            try:
                self.client.execute_command("FUNCTION", "LOAD", source, **({"target_nodes": node} if node else {}))
            except self._errors.ResponseError as e:
                if not _backend.already_loaded(e):
                    raise _backend.server_error(e) from e

    def run(self, call: Call[T]) -> T:
        """Sends one Call (from redis_ratelimit.commands) and reads its reply."""
        _backend.check_slots(self.client, call)
        try:
            try:
                return call.parse(self._send(call))
            except self._errors.ResponseError as e:
                if self.backend != "library" or not _backend.library_missing(e):
                    raise
                _backend.forget(self.client)  # the server lost the library (a restart, a flush)
                return call.parse(self._send(call))
        except self._errors.ResponseError as e:
            raise _backend.server_error(e) from e

    def _send(self, call: Call[Any]) -> Any:
        backend = self.detect()
        return self.client.execute_command(
            *_backend.command_args(call, backend), **_backend.routing(self.client, call.keys)
        )

    def pipeline(self) -> Pipeline:
        """Several decisions in one round trip: ``with rl.pipeline() as p: p.hit(...); p.slide(...)``,
        then ``p.execute()`` answers each in order."""
        return Pipeline(self)

    def permit(
        self,
        key: str,
        limit: int,
        lease: Seconds,
        *,
        wait: bool = False,
        timeout: float | None = None,
        poll: float = 0.05,
    ) -> Permit:
        """A permit held for a ``with`` block: acquired on entry (raising PermitUnavailable when all
        are in use; with ``wait``, retried until ``timeout`` seconds, every ``poll`` seconds at most),
        renewed in the background while the block outlasts a third of ``lease``, released on exit,
        also when the block raises. A process that dies gives it back when its lease ends."""
        commands.acquire(key, limit, lease)  # the arguments are checked now, not on entry
        return Permit(self, key, limit, lease, wait, timeout, poll)


class Pipeline:
    """Calls queued to go in one round trip (no transaction: each is atomic on its own). In a
    cluster, redis-py's cluster pipeline sends each call to its key's node."""

    def __init__(self, limiter: RateLimiter) -> None:
        self.limiter = limiter
        self._pipe = limiter.client.pipeline(transaction=False)
        self._calls: list[Call[Any]] = []

    hit = _queued(commands.hit)
    peek = _queued(commands.peek)
    slide = _queued(commands.slide)
    hit_all = _queued(commands.hit_all)
    gcra = _queued(commands.gcra)
    acquire = _queued(commands.acquire)
    release = _queued(commands.release)
    renew = _queued(commands.renew)

    def queue(self, call: Call[Any]) -> Pipeline:
        _backend.check_slots(self.limiter.client, call)
        self._pipe.execute_command(*_backend.command_args(call, self.limiter.backend))
        self._calls.append(call)
        return self

    def execute(self, raise_on_error: bool = True) -> list[Any]:
        """Every queued call's answer, in order. A call the server refused raises RateLimitError
        after all have run; with ``raise_on_error=False`` its RateLimitError takes its place."""
        calls, self._calls = self._calls, []
        replies = self._pipe.execute(raise_on_error=False)
        results = [
            _backend.server_error(reply) if isinstance(reply, Exception) else call.parse(reply)
            for call, reply in zip(calls, replies, strict=True)
        ]
        errors = [r for r in results if isinstance(r, RateLimitError)]
        if errors and raise_on_error:
            raise errors[0]
        return results

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self._pipe.reset()


class Permit:
    """A permit held by a ``with`` block (see RateLimiter.permit). ``lost`` turns True if the lease
    ended while the block ran and no permit could be taken again (the server was unreachable for
    longer than the lease, say): others may then hold it."""

    def __init__(
        self, limiter: RateLimiter, key: str, limit: int, lease: Seconds, wait: bool, timeout: float | None, poll: float
    ) -> None:
        self.limiter, self.key, self.limit, self.lease = limiter, key, limit, lease
        self.wait, self.timeout, self.poll = wait, timeout, poll
        self.acquisition: Acquisition | None = None
        self.lost = False
        self._done = threading.Event()
        self._renewer: threading.Thread | None = None

    @property
    def id(self) -> str | None:
        return self.acquisition.id if self.acquisition else None

    def __enter__(self) -> Permit:
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        while True:
            got = self.limiter.acquire(self.key, self.limit, self.lease)
            if got.acquired:
                break
            left = None if deadline is None else deadline - time.monotonic()
            if not self.wait or (left is not None and left <= 0):
                raise PermitUnavailable(self.key, self.limit, got.expires_after)
            time.sleep(min(got.expires_after, self.poll, *(() if left is None else (left,))))
        self.acquisition = got
        self._done.clear()
        self._renewer = threading.Thread(target=self._renew_until_done, name=f"permit {self.key}", daemon=True)
        self._renewer.start()
        return self

    def _renew_until_done(self) -> None:
        assert self.acquisition is not None and self.acquisition.id is not None
        lease_id = self.acquisition.id
        every = self.acquisition.expires_after / 3
        while not self._done.wait(every):
            try:
                if self.limiter.renew(self.key, lease_id, self.lease) is None:
                    # The lease ended (the server was out of reach, or paused): take it again if free.
                    self.lost = not self.limiter.acquire(self.key, self.limit, self.lease, id=lease_id).acquired
                    if self.lost:
                        log.warning(
                            "permit %s of %r lost: its lease ended and all permits are in use", lease_id, self.key
                        )
                        return
            except Exception:  # the next renewal tries again; the lease covers two more tries
                log.warning("renewing permit %s of %r failed", lease_id, self.key, exc_info=True)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._done.set()
        if self._renewer is not None:
            self._renewer.join()
        if self.acquisition is not None and self.acquisition.id is not None:
            try:
                self.limiter.release(self.key, self.acquisition.id)
            except Exception:  # not raised over the block's own outcome: the lease ends by itself
                log.warning("releasing permit %s of %r failed", self.acquisition.id, self.key, exc_info=True)
