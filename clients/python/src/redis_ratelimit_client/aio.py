"""The asyncio client: AsyncRateLimiter over ``redis.asyncio`` or ``valkey.asyncio`` (standalone,
a Sentinel master, or a cluster), the same commands, answers and errors as RateLimiter."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

from . import _backend, commands
from ._backend import Backend
from .commands import Call, Seconds
from .permits import PermitBase
from .results import Reservation
from .settling import SettlingBase

P = ParamSpec("P")
T = TypeVar("T")


def _sent(build: Callable[P, Call[T]]) -> Callable[Concatenate[AsyncRateLimiter, P], Awaitable[T]]:
    @functools.wraps(build)
    async def method(self: AsyncRateLimiter, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self.run(build(*args, **kwargs))

    return method


def _queued(build: Callable[P, Call[Any]]) -> Callable[Concatenate[AsyncPipeline, P], AsyncPipeline]:
    @functools.wraps(build)
    def method(self: AsyncPipeline, /, *args: P.args, **kwargs: P.kwargs) -> AsyncPipeline:
        return self.queue(build(*args, **kwargs))

    return method


class AsyncRateLimiter:
    """RateLimiter on an asyncio client: every method is a coroutine, ``permit`` an ``async with``."""

    def __init__(self, client: Any, *, load_library: bool = True) -> None:
        self.client = client
        self.load_library = load_library
        self._errors = _backend.exceptions(client)

    hit = _sent(commands.hit)
    peek = _sent(commands.peek)
    slide = _sent(commands.slide)
    hit_all = _sent(commands.hit_all)
    gcra = _sent(commands.gcra)
    refund = _sent(commands.refund)
    reserve_hit = _sent(commands.reserve_hit)
    reserve_slide = _sent(commands.reserve_slide)
    reserve_gcra = _sent(commands.reserve_gcra)
    settle = _sent(commands.settle)
    acquire = _sent(commands.acquire)
    release = _sent(commands.release)
    renew = _sent(commands.renew)
    top = _sent(commands.top)

    @property
    def backend(self) -> Backend | None:
        """``"module"`` or ``"library"`` once known (after the first call, or ``await detect()``)."""
        return _backend.remembered(self.client)

    async def detect(self) -> Backend:
        """``"module"`` or ``"library"``: found out once per connection pool."""
        return _backend.remembered(self.client) or await self._detect()

    async def _detect(self) -> Backend:
        if _backend.is_cluster(self.client):
            await self.client.initialize()  # an asyncio cluster client knows its nodes from then on
        steps = _backend.detection(self.client, self.load_library)
        answer: Any = None
        try:
            while True:
                args, routing = steps.send(answer)
                try:
                    answer = await self.client.execute_command(*args, **routing)
                except self._errors.ResponseError as e:
                    answer = e
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    async def run(self, call: Call[T]) -> T:
        """Sends one Call (from redis_ratelimit_client.commands) and reads its reply."""
        _backend.check_slots(self.client, call)
        try:
            try:
                return call.parse(await self._send(call))
            except self._errors.ResponseError as e:
                if self.backend != "library" or not _backend.library_missing(e):
                    raise
                _backend.forget(self.client)  # the server lost the library (a restart, a flush)
                return call.parse(await self._send(call))
        except self._errors.ResponseError as e:
            raise _backend.server_error(e) from e

    async def _send(self, call: Call[Any]) -> Any:
        backend = await self.detect()
        return await self.client.execute_command(
            *_backend.command_args(call, backend), **_backend.routing(self.client, call.keys)
        )

    def settling(self, reservation: Reservation) -> AsyncSettling:
        """Settles ``reservation`` when the ``async with`` block ends, with what the block set as
        ``used`` (see RateLimiter.settling)."""
        return AsyncSettling(self, reservation)

    async def pipeline(self) -> AsyncPipeline:
        """Several decisions in one round trip: ``p = await rl.pipeline(); p.hit(...); await p.execute()``."""
        return AsyncPipeline(self, await self.detect())

    def permit(
        self,
        key: str,
        limit: int,
        lease: Seconds,
        *,
        wait: bool = False,
        timeout: float | None = None,
        poll: float = 0.05,
    ) -> AsyncPermit:
        """RateLimiter.permit for ``async with``: renewed by a task while the block runs."""
        commands.acquire(key, limit, lease)
        return AsyncPermit(self, key, limit, lease, wait, timeout, poll)


class AsyncPipeline:
    """Pipeline on an asyncio client."""

    def __init__(self, limiter: AsyncRateLimiter, backend: Backend) -> None:
        self.limiter = limiter
        self.backend = backend
        self._pipe = limiter.client.pipeline(transaction=False)
        self._calls: list[Call[Any]] = []

    hit = _queued(commands.hit)
    peek = _queued(commands.peek)
    slide = _queued(commands.slide)
    hit_all = _queued(commands.hit_all)
    gcra = _queued(commands.gcra)
    refund = _queued(commands.refund)
    reserve_hit = _queued(commands.reserve_hit)
    reserve_slide = _queued(commands.reserve_slide)
    reserve_gcra = _queued(commands.reserve_gcra)
    settle = _queued(commands.settle)
    acquire = _queued(commands.acquire)
    release = _queued(commands.release)
    renew = _queued(commands.renew)

    def queue(self, call: Call[Any]) -> AsyncPipeline:
        _backend.check_slots(self.limiter.client, call)
        self._pipe.execute_command(*_backend.command_args(call, self.backend))
        self._calls.append(call)
        return self

    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        calls, self._calls = self._calls, []
        return _backend.answers(calls, await self._pipe.execute(raise_on_error=False), raise_on_error)


class AsyncPermit(PermitBase):
    """Permit for ``async with`` (see RateLimiter.permit), renewed by a task."""

    limiter: AsyncRateLimiter

    async def __aenter__(self) -> AsyncPermit:
        deadline = self.deadline()
        while not (got := await self.limiter.acquire(self.key, self.limit, self.lease)).acquired:
            await asyncio.sleep(self.pause(got, deadline))
        self._renewer = asyncio.create_task(self._renew_until_done(*self.held(got)))
        return self

    async def _renew_until_done(self, lease_id: str, every: float) -> None:
        while True:
            await asyncio.sleep(every)
            try:
                if await self.limiter.renew(self.key, lease_id, self.lease) is None and not self.taken_again(
                    await self.limiter.acquire(self.key, self.limit, self.lease, id=lease_id)
                ):
                    return
            except Exception:
                self.renewal_failed()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.acquisition is None:
            return
        self._renewer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._renewer
        try:
            await self.limiter.release(self.key, self.held_id)
        except Exception:
            self.release_failed()


class AsyncSettling(SettlingBase):
    """A reservation settled when an ``async with`` block ends (see AsyncRateLimiter.settling)."""

    limiter: AsyncRateLimiter

    async def __aenter__(self) -> AsyncSettling:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        call = self.to_send()
        if call is None:
            return
        try:
            self.settlement = await self.limiter.run(call)
        except Exception:
            if exc_type is None:
                raise
            self.failed()
