"""The synchronous client: RateLimiter over a redis-py or valkey-py client (standalone, a Sentinel
master, or a cluster), its pipelines, and permits held for a block."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

from . import _backend, commands
from ._backend import Backend
from .commands import Call, Seconds
from .hot import HotLimit, hot_method, hot_terms
from .permits import PermitBase
from .results import MultiReservation, Reservation
from .settling import SettlingBase

P = ParamSpec("P")
T = TypeVar("T")


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
    library (loaded when missing, unless ``load_library`` is False).

    With ``wait_for_replicas=n``, every call that writes is followed by ``WAIT n`` on the
    connection that wrote, and answers once ``n`` replicas have acknowledged the write, or
    raises NotReplicated (carrying the answer) after ``replica_timeout`` seconds. PEEK and TOP
    never wait."""

    def __init__(
        self, client: Any, *, load_library: bool = True, wait_for_replicas: int = 0, replica_timeout: float = 0.1
    ) -> None:
        self.client = client
        self.load_library = load_library
        self.replicas = _backend.Replicas(wait_for_replicas, replica_timeout)
        self._errors = _backend.exceptions(client)

    def waiting_for_replicas(self, replicas: int, timeout: float = 0.1) -> RateLimiter:
        """This limiter on the same client, its writes waiting for ``replicas`` acknowledgements
        (0: none), for one call or a few: ``rl.waiting_for_replicas(1).settle(...)``."""
        return RateLimiter(
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
    def backend(self) -> Backend:
        """``"module"`` or ``"library"``: found out once per connection pool."""
        return self.detect()

    def detect(self) -> Backend:
        """``"module"`` or ``"library"``: found out once per connection pool."""
        return _backend.remembered(self.client) or self._detect()

    def _detect(self) -> Backend:
        steps = _backend.detection(self.client, self.load_library)
        answer: Any = None
        try:
            while True:
                args, routing = steps.send(answer)
                try:
                    answer = self.client.execute_command(*args, **routing)
                except self._errors.ResponseError as e:
                    answer = e
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    def run(self, call: Call[T]) -> T:
        """Sends one Call (from redis_ratelimit_client.commands) and reads its reply."""
        _backend.check_slots(self.client, call)
        try:
            try:
                reply, acknowledged = self._send(call)
            except self._errors.ResponseError as e:
                if self.backend != "library" or not _backend.library_missing(e):
                    raise
                _backend.forget(self.client)  # the server lost the library (a restart, a flush)
                reply, acknowledged = self._send(call)
        except self._errors.ResponseError as e:
            raise _backend.server_error(e) from e
        answer = call.parse(reply)
        return answer if acknowledged is None else self.replicas.checked(answer, acknowledged)

    def _send(self, call: Call[Any]) -> tuple[Any, int | None]:
        """The reply, and how many replicas acknowledged the write (None: not asked)."""
        args = _backend.command_args(call, self.detect())
        if not self.replicas.applies(call):
            return self.client.execute_command(*args, **_backend.routing(self.client, call.keys)), None
        steps = _backend.sent_and_waited(self.client, self._errors, args, call.keys[0], self.replicas)
        replies: Any = None
        try:
            while True:
                node, batch = steps.send(replies)
                if not batch:
                    self.client.nodes_manager.initialize()
                    replies = []
                    continue
                on = self.client if node is None else self.client.get_redis_connection(node)
                with on.pipeline(transaction=False) as pipe:
                    for command in batch:
                        pipe.execute_command(*command)
                    replies = pipe.execute(raise_on_error=False)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    def settling(self, reservation: Reservation | MultiReservation) -> Settling:
        """Settles ``reservation`` when the block ends, with what the block set as ``used``:
        ``with rl.settling(r) as s: ...; s.used = tokens``. Nothing is sent for a denied
        reservation, or when ``used`` was left unset (the estimate stays counted)."""
        return Settling(self, reservation)

    hot = hot_method(hot_terms, HotLimit)

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
        limiter.replicas.refuse_in_cluster(limiter.client)
        self.limiter = limiter
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

    def queue(self, call: Call[Any]) -> Pipeline:
        _backend.check_slots(self.limiter.client, call)
        self._pipe.execute_command(*_backend.command_args(call, self.limiter.backend))
        self._calls.append(call)
        return self

    def execute(self, raise_on_error: bool = True) -> list[Any]:
        """Every queued call's answer, in order. A call the server refused raises RateLimitError
        after all have run; with ``raise_on_error=False`` its RateLimitError takes its place. A
        limiter waiting for replicas sends one WAIT after the calls (NotReplicated carries them all)."""
        calls, self._calls = self._calls, []
        replicas = _backend.waits(calls, self.limiter.replicas)
        if replicas is not None:
            self._pipe.execute_command(*replicas.command())
        return _backend.answers(calls, self._pipe.execute(raise_on_error=False), raise_on_error, replicas)

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self._pipe.reset()


class Permit(PermitBase):
    """A permit held by a ``with`` block (see RateLimiter.permit), renewed by a thread."""

    limiter: RateLimiter

    def __enter__(self) -> Permit:
        deadline = self.deadline()
        while not (got := self.limiter.acquire(self.key, self.limit, self.lease)).acquired:
            time.sleep(self.pause(got, deadline))
        lease_id, every = self.held(got)
        self._done = threading.Event()
        self._renewer = threading.Thread(
            target=self._renew_until_done, args=(lease_id, every), name=f"permit {self.key}", daemon=True
        )
        self._renewer.start()
        return self

    def _renew_until_done(self, lease_id: str, every: float) -> None:
        while not self._done.wait(every):
            try:
                if self.limiter.renew(self.key, lease_id, self.lease) is None and not self.taken_again(
                    self.limiter.acquire(self.key, self.limit, self.lease, id=lease_id)
                ):
                    return
            except Exception:
                self.renewal_failed()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.acquisition is None:
            return
        self._done.set()
        self._renewer.join()
        try:
            self.limiter.release(self.key, self.held_id)
        except Exception:
            self.release_failed()


class Settling(SettlingBase):
    """A reservation settled when a ``with`` block ends (see RateLimiter.settling)."""

    limiter: RateLimiter

    def __enter__(self) -> Settling:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        call = self.to_send()
        if call is None:
            return
        try:
            self.settlement = self.limiter.run(call)
        except Exception:
            if exc_type is None:
                raise
            self.failed()
