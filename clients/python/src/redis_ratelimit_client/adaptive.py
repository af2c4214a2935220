"""One limit a whole fleet learns from its provider's answers (RATELIMIT.ADAPT and
RATELIMIT.REPORT): decide before calling the provider, report how it answered, or let ``call``
do both around the call. The rules are the module's (docs/adaptive.md); this only reads the
provider's answer (``provider_answers``) and sends it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, Literal, TypeVar

from . import commands
from .commands import Call, Seconds
from .errors import RateLimited, RateLimitError
from .provider_answers import ProviderAnswer, read_answer
from .results import Decision, Learned, Reservation, Settlement

R = TypeVar("R")
Measure = Literal["requests", "tokens"]
Headers = Mapping[str, str] | Iterable[tuple[str, str]]


def answer_of(outcome: object) -> tuple[int | None, Headers]:
    """The status and headers of what a provider call returned or raised: an HTTP response
    (httpx's, requests', aiohttp's, urllib's) or an error carrying one (openai's and anthropic's
    ``APIStatusError``, httpx's ``HTTPStatusError``) or being one (urllib's ``HTTPError``);
    ``(None, ())`` for anything else, as a timeout."""
    response = getattr(outcome, "response", outcome) if isinstance(outcome, BaseException) else outcome
    status = getattr(response, "status_code", None) or getattr(response, "status", None)
    headers = getattr(response, "headers", None)
    return (status if isinstance(status, int) else None), (headers if headers is not None else ())


class _Terms:
    """A limit per ``window`` seconds (``measure``: requests, or tokens with each call's cost)
    that every process using ``key`` learns together, between ``floor`` and ``ceiling``,
    starting at ``start``, on ``limiter``; a provider's Retry-After holds the fleet at most
    ``max_hold`` seconds."""

    def __init__(
        self,
        limiter: Any,
        key: str,
        *,
        floor: int,
        start: int,
        ceiling: int,
        window: Seconds = 60,
        measure: Measure = "requests",
        max_hold: float = 60.0,
    ) -> None:
        self.limiter, self.key, self.floor, self.start, self.ceiling = limiter, key, floor, start, ceiling
        self.window, self.measure, self.max_hold = window, measure, max_hold
        commands.adapt(key, floor, start, ceiling, window)  # checks the terms once, here

    def decision(self, cost: int, turn: bool) -> Call[Decision]:
        return commands.adapt(self.key, self.floor, self.start, self.ceiling, self.window, cost=cost, turn=turn)

    def reservation(self, estimate: int, turn: bool) -> Call[Reservation]:
        terms = (self.key, self.floor, self.start, self.ceiling, self.window)
        return commands.reserve_adapt(*terms, cost=estimate, turn=turn)

    def settlement(self, reservation: Reservation, used: int) -> Call[Settlement]:
        if reservation.token is None:
            raise RateLimitError("a denied call has no reservation to settle")
        return commands.settle(self.key, reservation.token, used)

    def learned(self, answer: ProviderAnswer, throttled: bool | None, age: float | None) -> Call[Learned | None]:
        """The report of ``answer`` for this limit's measure; ``throttled`` overrides its status
        (a timeout counted as a throttle); ``age``, the seconds since the call was decided. A
        Retry-After longer than ``max_hold`` holds the fleet ``max_hold`` seconds (as the SDKs
        honour at most 60 s)."""
        stated = answer.requests if self.measure == "requests" else answer.tokens
        hit = answer.throttled if throttled is None else throttled
        retry = min(answer.retry_after, self.max_hold) if hit and answer.retry_after else None
        both = stated.remaining is not None and stated.reset_after is not None
        return commands.report(
            self.key,
            "throttled" if hit else "ok",
            retry_after=retry,
            limit=stated.limit,
            remaining=stated.remaining if both else None,
            reset_after=stated.reset_after if both else None,
            age=age,
        )


class AdaptiveLimit(_Terms):
    """An adaptive limit on the synchronous client (a RateLimiter)."""

    def decide(self, cost: int = 1, *, turn: bool = False) -> Decision:
        """Whether a call of ``cost`` may go to the provider now. ``turn``: asked again at the
        ``retry_after`` a denial told (TURN: admitted on a bucket not in debt)."""
        return self.limiter.run(self.decision(cost, turn))  # type: ignore[no-any-return]

    def reserve(self, estimate: int, *, turn: bool = False) -> Reservation:
        """Whether a call estimated at ``estimate`` (tokens, say) may go now, and if so its
        reservation: ``settle`` it with what the call used once the answer says."""
        return self.limiter.run(self.reservation(estimate, turn))  # type: ignore[no-any-return]

    def settle(self, reservation: Reservation, used: int) -> Settlement:
        """The reservation settled with ``used``: the unused part back to the fleet (at most once)."""
        return self.limiter.run(self.settlement(reservation, used))  # type: ignore[no-any-return]

    def report(
        self,
        status: int | None,
        headers: Headers = (),
        *,
        throttled: bool | None = None,
        now: datetime | None = None,
        age: float | None = None,
    ) -> Learned | None:
        """How the provider answered (``status`` None: no answer). ``age``: the seconds since the
        call was decided: a throttle on a call decided after the epoch's cut cuts again, where the
        provider states no remaining."""
        answer = read_answer(status, headers, now=now)
        return self.limiter.run(self.learned(answer, throttled, age))  # type: ignore[no-any-return]

    def call(self, send: Callable[[], R], *, cost: int = 1, max_wait: float = 30.0) -> R:
        """``send()`` once the fleet's limit has room (waiting up to ``max_wait`` seconds, else
        RateLimited), its answer reported whether it returns or raises."""
        deadline = time.monotonic() + max_wait
        turn = False
        while not (d := self.decide(cost, turn=turn)).allowed:
            wait = d.retry_after or 0.0
            if time.monotonic() + wait > deadline:
                raise RateLimited(self.key, wait)
            time.sleep(wait)
            turn = True
        decided = time.monotonic()
        try:
            result = send()
        except BaseException as error:
            self.report(*answer_of(error), age=time.monotonic() - decided)
            raise
        self.report(*answer_of(result), age=time.monotonic() - decided)
        return result


class AsyncAdaptiveLimit(_Terms):
    """An adaptive limit on the asyncio client (an AsyncRateLimiter)."""

    async def decide(self, cost: int = 1, *, turn: bool = False) -> Decision:
        return await self.limiter.run(self.decision(cost, turn))  # type: ignore[no-any-return]

    async def reserve(self, estimate: int, *, turn: bool = False) -> Reservation:
        return await self.limiter.run(self.reservation(estimate, turn))  # type: ignore[no-any-return]

    async def settle(self, reservation: Reservation, used: int) -> Settlement:
        return await self.limiter.run(self.settlement(reservation, used))  # type: ignore[no-any-return]

    async def report(
        self,
        status: int | None,
        headers: Headers = (),
        *,
        throttled: bool | None = None,
        now: datetime | None = None,
        age: float | None = None,
    ) -> Learned | None:
        answer = read_answer(status, headers, now=now)
        return await self.limiter.run(self.learned(answer, throttled, age))  # type: ignore[no-any-return]

    async def call(self, send: Callable[[], Awaitable[R]], *, cost: int = 1, max_wait: float = 30.0) -> R:
        deadline = time.monotonic() + max_wait
        turn = False
        while not (d := await self.decide(cost, turn=turn)).allowed:
            wait = d.retry_after or 0.0
            if time.monotonic() + wait > deadline:
                raise RateLimited(self.key, wait)
            await asyncio.sleep(wait)
            turn = True
        decided = time.monotonic()
        try:
            result = await send()
        except BaseException as error:
            await self.report(*answer_of(error), age=time.monotonic() - decided)
            raise
        await self.report(*answer_of(result), age=time.monotonic() - decided)
        return result
