"""The asyncio client: AsyncRateLimiter over ``redis.asyncio`` or ``valkey.asyncio`` (standalone,
a Sentinel master, or a cluster), the same commands, answers and errors as RateLimiter."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

from . import _backend, commands
from ._backend import Backend
from .commands import Call, Seconds
from .hot import AsyncHotLimit, hot_method, hot_terms
from .permits import PermitBase
from .results import MultiReservation, Reservation
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
    """RateLimiter on an asyncio client: every method is a coroutine, ``permit`` an ``async with``;
    ``wait_for_replicas`` and ``replica_timeout`` as there."""

    def __init__(
        self, client: Any, *, load_library: bool = True, wait_for_replicas: int = 0, replica_timeout: float = 0.1
    ) -> None:
        self.client = client
        self.load_library = load_library
        self.replicas = _backend.Replicas(wait_for_replicas, replica_timeout)
        self._errors = _backend.exceptions(client)

    def waiting_for_replicas(self, replicas: int, timeout: float = 0.1) -> AsyncRateLimiter:
        """See RateLimiter.waiting_for_replicas."""
        return AsyncRateLimiter(
            self.client, load_library=self.load_library, wait_for_replicas=replicas, replica_timeout=timeout
        )

    hit = _sent(commands.hit)
    peek = _sent(commands.peek)
    slide = _sent(commands.slide)
    hit_all = _sent(commands.hit_all)
    gcra = _sent(commands.gcra)
    gcra_up_to = _sent(commands.gcra_up_to)
    hit_up_to = _sent(commands.hit_up_to)
    slide_up_to = _sent(commands.slide_up_to)
    refund_hit = _sent(commands.refund_hit)
    refund_slide = _sent(commands.refund_slide)
    refund_gcra = _sent(commands.refund_gcra)
    refund = _sent(commands.refund)
    reserve_hit = _sent(commands.reserve_hit)
    reserve_hit_up_to = _sent(commands.reserve_hit_up_to)
    reserve_slide_up_to = _sent(commands.reserve_slide_up_to)
    reserve_slide = _sent(commands.reserve_slide)
    reserve_gcra = _sent(commands.reserve_gcra)
    reserve_gcra_up_to = _sent(commands.reserve_gcra_up_to)
    reserve_all = _sent(commands.reserve_all)
    settle = _sent(commands.settle)
    acquire = _sent(commands.acquire)
    release = _sent(commands.release)
    renew = _sent(commands.renew)
    top = _sent(commands.top)
    adapt = _sent(commands.adapt)
    adapt_up_to = _sent(commands.adapt_up_to)
    reserve_adapt = _sent(commands.reserve_adapt)
    reserve_adapt_up_to = _sent(commands.reserve_adapt_up_to)
    report = _sent(commands.report)

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
                reply, acknowledged = await self._send(call)
            except self._errors.ResponseError as e:
                if self.backend != "library" or not _backend.library_missing(e):
                    raise
                _backend.forget(self.client)  # the server lost the library (a restart, a flush)
                reply, acknowledged = await self._send(call)
        except self._errors.ResponseError as e:
            raise _backend.server_error(e) from e
        answer = call.parse(reply)
        return answer if acknowledged is None else self.replicas.checked(answer, acknowledged)

    async def _send(self, call: Call[Any]) -> tuple[Any, int | None]:
        args = _backend.command_args(call, await self.detect())
        if not self.replicas.applies(call):
            return await self.client.execute_command(*args, **_backend.routing(self.client, call.keys)), None
        steps = _backend.sent_and_waited(self.client, self._errors, args, call.keys[0], self.replicas)
        replies: Any = None
        try:
            while True:
                node, batch = steps.send(replies)
                if not batch:
                    await self.client.nodes_manager.initialize()
                    replies = []
                else:
                    replies = await (self._pipelined(batch) if node is None else _on_node(node, batch))
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    async def _pipelined(self, batch: list[tuple[Any, ...]]) -> list[Any]:
        async with self.client.pipeline(transaction=False) as pipe:
            for command in batch:
                pipe.execute_command(*command)
            return await pipe.execute(raise_on_error=False)  # type: ignore[no-any-return]

    def settling(self, reservation: Reservation | MultiReservation) -> AsyncSettling:
        """Settles ``reservation`` when the ``async with`` block ends, with what the block set as
        ``used`` (see RateLimiter.settling)."""
        return AsyncSettling(self, reservation)

    async def pipeline(self) -> AsyncPipeline:
        """Several decisions in one round trip: ``p = await rl.pipeline(); p.hit(...); await p.execute()``."""
        return AsyncPipeline(self, await self.detect())

    hot = hot_method(hot_terms, AsyncHotLimit)

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
        limiter.replicas.refuse_in_cluster(limiter.client)
        self.limiter = limiter
        self.backend = backend
        self._pipe = limiter.client.pipeline(transaction=False)
        self._calls: list[Call[Any]] = []

    hit = _queued(commands.hit)
    peek = _queued(commands.peek)
    slide = _queued(commands.slide)
    hit_all = _queued(commands.hit_all)
    gcra = _queued(commands.gcra)
    gcra_up_to = _queued(commands.gcra_up_to)
    hit_up_to = _queued(commands.hit_up_to)
    slide_up_to = _queued(commands.slide_up_to)
    refund_hit = _queued(commands.refund_hit)
    refund_slide = _queued(commands.refund_slide)
    refund_gcra = _queued(commands.refund_gcra)
    refund = _queued(commands.refund)
    reserve_hit = _queued(commands.reserve_hit)
    reserve_hit_up_to = _queued(commands.reserve_hit_up_to)
    reserve_slide_up_to = _queued(commands.reserve_slide_up_to)
    reserve_slide = _queued(commands.reserve_slide)
    reserve_gcra = _queued(commands.reserve_gcra)
    reserve_gcra_up_to = _queued(commands.reserve_gcra_up_to)
    reserve_all = _queued(commands.reserve_all)
    settle = _queued(commands.settle)
    acquire = _queued(commands.acquire)
    release = _queued(commands.release)
    renew = _queued(commands.renew)
    adapt = _queued(commands.adapt)
    adapt_up_to = _queued(commands.adapt_up_to)
    reserve_adapt = _queued(commands.reserve_adapt)
    reserve_adapt_up_to = _queued(commands.reserve_adapt_up_to)
    report = _queued(commands.report)

    def queue(self, call: Call[Any]) -> AsyncPipeline:
        _backend.check_slots(self.limiter.client, call)
        self._pipe.execute_command(*_backend.command_args(call, self.backend))
        self._calls.append(call)
        return self

    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        calls, self._calls = self._calls, []
        replicas = _backend.waits(calls, self.limiter.replicas)
        if replicas is not None:
            self._pipe.execute_command(*replicas.command())
        return _backend.answers(calls, await self._pipe.execute(raise_on_error=False), raise_on_error, replicas)


class AsyncPermit(PermitBase):
    """Permit for ``async with`` (see RateLimiter.permit), renewed by a task."""

    limiter: AsyncRateLimiter

    async def __aenter__(self) -> AsyncPermit:
        deadline = self.deadline()
        while not (got := await self.limiter.acquire(self.key, self.limit, self.lease)).acquired:
            await asyncio.sleep(self.pause(got, deadline))
        self._done = False
        self._renewer = asyncio.create_task(self._renew_until_done(*self.held(got)))
        return self

    async def _renew_until_done(self, lease_id: str, every: float) -> None:
        # Ended by the cancel, or by _done where a renewal in flight swallowed the cancel (a
        # client may turn it into a connection error): then the block's end would wait for ever.
        while not self._done:
            await asyncio.sleep(every)
            try:
                if await self.limiter.renew(self.key, lease_id, self.lease) is None and not self.taken_again(
                    await self.limiter.acquire(self.key, self.limit, self.lease, id=lease_id)
                ):
                    return
            except Exception:
                if not self._done:
                    self.renewal_failed()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.acquisition is None:
            return
        self._done = True
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


async def _on_node(node: Any, batch: list[tuple[Any, ...]]) -> list[Any]:
    """``batch`` on one connection of a cluster node: the asyncio cluster client has no per-node
    client, so this goes the way its own cluster pipeline sends a node's commands (the node's
    ``execute_pipeline``, the same from redis-py 5.0 to 8.1 and in valkey-py)."""
    from_cluster = importlib.import_module(type(node).__module__)
    queued = [from_cluster.PipelineCommand(i, *command) for i, command in enumerate(batch)]
    await node.execute_pipeline(queued)
    return [command.result for command in queued]
