"""Hot limits: one process's share of a limit many processes share (a partner's requests a second
across a fleet), as the Go client's HotLimit. The process takes blocks of tokens from the server
(HIT ... PARTIAL RESERVE) and decides locally, with no round trip, until a block is spent or its
deadline: the instant its request was sent, plus the time the server said its window had left,
less a guard. A token is never used after its deadline, so every admission falls in the window
that granted it, whatever the offset between the hosts' clocks: never over the limit.

``HotState`` (hot_state.py) is the decisions; ``HotLimit`` (threads) and ``AsyncHotLimit``
(asyncio) run them over a limiter's ``run``: anything that sends a Call and answers its reply."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Concatenate, ParamSpec, Protocol, TypeVar

from .commands import CalendarUnit, Call, Seconds, reserve_hit_up_to, settle
from .errors import RateLimitError
from .hot_state import Block, HotState, Step
from .results import Reservation, Settlement

T = TypeVar("T")


class Transport(Protocol):
    """What a hot limit sends its requests by: ``RateLimiter``, or a limiter of its own."""

    def run(self, call: Call[T]) -> T: ...


class AsyncTransport(Protocol):
    """What an asyncio hot limit sends its requests by: ``AsyncRateLimiter``, or a limiter of its own."""

    async def run(self, call: Call[T]) -> T: ...


class HotLimitClosed(RateLimitError):
    """``take`` after ``close``."""


@dataclass(frozen=True)
class HotTerms:
    """A hot limit's key, window and tuning, as ``RateLimiter.hot`` takes them."""

    key: str
    limit: int
    window: Seconds | CalendarUnit
    align: bool
    tz: str | None
    horizon: float
    guard: float
    fail_open: bool


def hot_terms(
    key: str,
    limit: int,
    window: Seconds | CalendarUnit,
    *,
    align: bool = False,
    tz: str | None = None,
    horizon: float = 0.01,
    guard: float | None = None,
    fail_open: bool = False,
) -> HotTerms:
    """This process's share of ``limit`` per ``window`` on ``key``, which many processes share
    the same way: blocks of tokens taken from the server (up to ``horizon`` seconds of this
    process's demand) and spent locally before their deadline (less ``guard``, 2 ms by default,
    and a thousandth of the time the window had left). See docs/hot-keys.md."""
    if not horizon > 0:
        raise RateLimitError("horizon must be a number of seconds > 0")
    # Refused now if HIT would refuse it, not at the first take.
    reserve_hit_up_to(key, limit, window, cost=1, align=align, tz=tz)
    if guard is None:
        guard = 0.002
    return HotTerms(key, limit, window, align, tz, float(horizon), float(guard), fail_open)


P = ParamSpec("P")
L = TypeVar("L")
H = TypeVar("H")


def hot_method(terms: Callable[P, HotTerms], kind: Callable[[L, HotTerms], H]) -> Callable[Concatenate[L, P], H]:
    """A limiter's ``hot``: ``terms``' arguments (``hot_terms``), making a ``kind`` on the limiter."""

    @functools.wraps(terms)
    def hot(self: L, /, *args: P.args, **kwargs: P.kwargs) -> H:
        return kind(self, terms(*args, **kwargs))

    return hot


def _unreachable(error: BaseException) -> bool:
    """Whether a request's error says Redis could not be reached (or a replica did not acknowledge
    in time: NotReplicated), not that it refused the call: only then does ``fail_open`` admit."""
    return not isinstance(error, RateLimitError)


class _HotLimit:
    """What the threaded and the asyncio hot limits share: the state, the answers counted (a
    take waits for the next one), the last request's error, and the steps of a take around the
    waiting, which each does its own way (under its own lock)."""

    def __init__(self, terms: HotTerms, clock: Callable[[], float]) -> None:
        self._t, self._clock = terms, clock
        self._state = HotState(terms.limit, terms.horizon, terms.guard, clock())
        self._answers = 0
        self._error: BaseException | None = None
        self._closed = False

    def _step(self, n: int, tries: int, waited: bool) -> tuple[float, Step]:
        """The take's next step at now (HotLimitClosed once closed)."""
        if self._closed:
            if waited:
                self._state.gave_up(n)
            raise HotLimitClosed("the hot limit is closed")
        now = self._clock()
        return now, self._state.step(now, n, tries, waited)

    def _answered(self, sent: float, received: float, answer: Reservation | BaseException) -> None:
        """A request's answer, a grant or the error it met, into the state."""
        if isinstance(answer, BaseException):
            self._state.failed()
            self._error = answer
        else:
            self._state.granted(sent, received, answer)
            self._error = None
        self._answers += 1

    def _answered_since(self, seen: int) -> bool:
        return self._answers != seen or self._closed

    def _failed(self, n: int) -> bool | None:
        """After an answer: None to step again, or, when the request failed, True where
        ``fail_open`` admits (the error raised otherwise)."""
        if self._error is None or self._closed:
            return None
        self._state.gave_up(n)
        if self._t.fail_open and _unreachable(self._error):
            return True
        raise self._error

    def _timed_out(self, n: int, timeout: float | None) -> TimeoutError:
        self._state.gave_up(n)
        return TimeoutError(f"no block of {self._t.key} within {timeout} s")


def _given_back(key: str, b: Block) -> Call[Settlement]:
    """The SETTLE that gives back what a block left unused."""
    return settle(key, b.grant.token or "", b.grant.amount - b.left)


def _count(n: int) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise RateLimitError("take needs n >= 1")
    return n


class HotLimit(_HotLimit):
    """This process's share of ``limit`` per ``window`` on ``key`` (``RateLimiter.hot``): ``take``
    admits from the blocks held, waiting for one when it holds too few; ``close`` (or the end of a
    ``with`` block) gives back what it holds. Thread-safe."""

    def __init__(self, limiter: Transport, terms: HotTerms, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(terms, clock)
        self._rl = limiter
        self._cond = threading.Condition()
        # The request the state asked for (tokens; 0: none), for the thread that sends them all,
        # one at a time, started at the first.
        self._wanted = 0
        self._sender: threading.Thread | None = None

    def take(self, n: int = 1, timeout: float | None = None) -> bool:
        """Admits ``n`` tokens, or not (the window has none left for them); waits up to ``timeout``
        seconds for a block (TimeoutError past it). Redis unreachable with too few held: its
        error, or True with ``fail_open`` (not where the server refused the call)."""
        n = _count(n)
        end = None if timeout is None else self._clock() + timeout
        tries, waited = 0, False
        with self._cond:
            while True:
                now, step = self._step(n, tries, waited)
                waited = step.wait
                if step.send:
                    self._send(step.send)
                if step.admitted or step.denied:
                    return step.admitted
                if not step.wait:
                    # The window is ending: the next one's tokens, when it starts.
                    self._cond.wait(max(0.0, step.sleep_until - now))
                    continue
                seen = self._answers
                while not self._answered_since(seen):
                    left = None if end is None else end - self._clock()
                    if left is not None and left <= 0:
                        raise self._timed_out(n, timeout)
                    self._cond.wait(left)
                tries += 1
                if (opened := self._failed(n)) is not None:
                    return opened

    def _send(self, want: int) -> None:
        """Hands a request for ``want`` tokens to the sending thread (under the lock)."""
        self._wanted = want
        if self._sender is None:
            self._sender = threading.Thread(target=self._sending, name=f"hot limit {self._t.key}", daemon=True)
            self._sender.start()
        self._cond.notify_all()

    def _sending(self) -> None:
        """The sending thread: each request handed to it, until the limit is closed (one asked
        before still goes: close waits for its answer)."""
        while True:
            with self._cond:
                while not self._wanted and not self._closed:
                    self._cond.wait()
                want, self._wanted = self._wanted, 0
            if not want:
                return
            self._request(want)

    def _request(self, want: int) -> None:
        """A request for ``want`` tokens, in the sending thread."""
        t = self._t
        sent = self._clock()
        answer: Reservation | BaseException
        try:
            answer = self._rl.run(reserve_hit_up_to(t.key, t.limit, t.window, cost=want, align=t.align, tz=t.tz))
        except Exception as e:  # any failure is this request's answer
            answer = e
        received = self._clock()
        with self._cond:
            self._answered(sent, received, answer)
            self._cond.notify_all()

    def close(self, timeout: float = 5.0) -> None:
        """Gives back the tokens held of windows still running (SETTLE), a request in flight's once
        it is answered (within ``timeout`` seconds); ``take`` refuses after."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            seen, end = self._answers, self._clock() + timeout
            while self._state.asking and self._answers == seen and self._clock() < end:
                self._cond.wait(end - self._clock())
            blocks = self._state.unused(self._clock())
        for b in blocks:
            self._rl.run(_given_back(self._t.key, b))

    def __enter__(self) -> HotLimit:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncHotLimit(_HotLimit):
    """``HotLimit`` for asyncio (``AsyncRateLimiter.hot``): ``await take(n)``, ``await aclose()``
    or ``async with``. For one event loop."""

    def __init__(self, limiter: AsyncTransport, terms: HotTerms, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(terms, clock)
        self._rl = limiter
        self._cond = asyncio.Condition()
        self._tasks: set[asyncio.Task[None]] = set()

    async def take(self, n: int = 1, timeout: float | None = None) -> bool:
        """As ``HotLimit.take``."""
        n = _count(n)
        end = None if timeout is None else self._clock() + timeout
        tries, waited = 0, False
        async with self._cond:
            while True:
                now, step = self._step(n, tries, waited)
                waited = step.wait
                if step.send:
                    task = asyncio.get_running_loop().create_task(self._request(step.send))
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)
                if step.admitted or step.denied:
                    return step.admitted
                if not step.wait:
                    self._cond.release()
                    try:
                        await asyncio.sleep(max(0.0, step.sleep_until - now))
                    finally:
                        await self._cond.acquire()
                    continue
                answered = functools.partial(self._answered_since, self._answers)
                try:
                    left = None if end is None else max(0.0, end - self._clock())
                    await asyncio.wait_for(self._cond.wait_for(answered), left)
                except asyncio.TimeoutError:  # TimeoutError itself from Python 3.11
                    raise self._timed_out(n, timeout) from None
                tries += 1
                if (opened := self._failed(n)) is not None:
                    return opened

    async def _request(self, want: int) -> None:
        t = self._t
        sent = self._clock()
        answer: Reservation | BaseException
        try:
            answer = await self._rl.run(reserve_hit_up_to(t.key, t.limit, t.window, cost=want, align=t.align, tz=t.tz))
        except Exception as e:  # any failure is this request's answer
            answer = e
        received = self._clock()
        async with self._cond:
            self._answered(sent, received, answer)
            self._cond.notify_all()

    async def aclose(self, timeout: float = 5.0) -> None:
        """As ``HotLimit.close``."""
        async with self._cond:
            self._closed = True
            self._cond.notify_all()
            if self._state.asking:
                # The answer itself, not _answered_since: that is true at once, closed.
                seen = self._answers
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._cond.wait_for(lambda: self._answers != seen), timeout)
            blocks = self._state.unused(self._clock())
        for b in blocks:
            await self._rl.run(_given_back(self._t.key, b))

    async def __aenter__(self) -> AsyncHotLimit:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


__all__ = ["AsyncHotLimit", "AsyncTransport", "HotLimit", "HotLimitClosed", "Transport", "hot_terms"]
