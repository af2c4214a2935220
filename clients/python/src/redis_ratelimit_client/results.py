"""What the limiter commands answer, as typed values, and the HTTP headers each answer gives.

Times are seconds as floats (the server's milliseconds / 1000). ``math.inf`` stands for "never":
a call that can never be admitted (a cost above the limit), or a counter without TTL (PEEK)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


def whole_seconds(seconds: float) -> int:
    """Seconds rounded up, as the headers carry them (a client that waits that long is admitted)."""
    return math.ceil(seconds - 1e-9) if seconds > 0 else 0


def _tightness(decision: Decision) -> tuple[int, float]:
    return decision.remaining, -decision.reset_after


def _policy(name: str, quota: int, window: float | None) -> str:
    return f'"{name}";q={quota}' + ("" if window is None else f";w={max(whole_seconds(window), 1)}")


@dataclass(frozen=True)
class Decision:
    """One limit's answer (HIT, SLIDE, PEEK, GCRA, and each limit of HITALL)."""

    allowed: bool
    """Admitted (with PEEK or SLIDE's ``peek``: would be)."""
    count: int
    """The counter after the call (SLIDE: the estimate, rounded up; GCRA: tokens in use)."""
    remaining: int
    """What is left before the limit: ``max(limit - count, 0)``."""
    reset_after: float
    """Seconds until the window ends (SLIDE: until the estimate reaches 0; GCRA: until the bucket
    is full); 0 when nothing is counted; ``inf`` for a counter without TTL (PEEK)."""
    retry_after: float | None
    """None when allowed; else the seconds after which the same call would be admitted if
    nothing else happened (``inf``: never, the cost is above the limit)."""
    limit: int
    """The quota: ``limit`` (GCRA: the capacity, ``max_burst + 1``)."""
    window: float | None
    """The window in seconds (GCRA: the period); None where the call names none (PEEK) or it varies
    (a calendar window)."""

    def headers(self, name: str = "default") -> dict[str, str]:
        """``RateLimit-Policy`` and ``RateLimit`` (the IETF draft's fields), and ``Retry-After``
        when denied (RFC 9110), in whole seconds rounded up."""
        return combined_headers([(name, self)])


@dataclass(frozen=True)
class MultiDecision:
    """HITALL's answer: one decision for several limits, all or nothing."""

    allowed: bool
    decisions: tuple[Decision, ...]
    """Each limit's own answer, in the order given (``allowed`` there: whether that limit alone
    would admit the call)."""

    @property
    def retry_after(self) -> float | None:
        """None when allowed; else when every limit that said no admits the call again."""
        if self.allowed:
            return None
        return max(d.retry_after for d in self.decisions if d.retry_after is not None)

    @property
    def tightest(self) -> Decision:
        """The most restrictive limit (the fewest remaining; among those, the latest reset)."""
        return min(self.decisions, key=_tightness)

    def headers(self, names: Sequence[str] | None = None) -> dict[str, str]:
        """Every limit in ``RateLimit-Policy``, the tightest in ``RateLimit``; ``Retry-After``
        when denied. ``names`` name the limits in order (default ``limit0``, ``limit1``...)."""
        labels = list(names) if names is not None else [f"limit{i}" for i in range(len(self.decisions))]
        if len(labels) != len(self.decisions):
            raise ValueError(f"{len(self.decisions)} names needed, {len(labels)} given")
        return combined_headers(list(zip(labels, self.decisions, strict=True)), self.retry_after)


def combined_headers(named: Sequence[tuple[str, Decision]], retry_after: float | None = None) -> dict[str, str]:
    """The headers for several limits on one request: each in ``RateLimit-Policy``, the tightest
    (fewest remaining; of those that refused, when one did: a refusal names a limit that refused
    it) in ``RateLimit``, and ``Retry-After`` (by default the largest of the denied limits': when
    all of them admit again)."""
    refusing = [pair for pair in named if not pair[1].allowed]
    current, decision = min(refusing or named, key=lambda pair: _tightness(pair[1]))
    denied = [d.retry_after for _, d in named if d.retry_after is not None]
    retry = retry_after if retry_after is not None else (max(denied) if denied else None)
    headers = {
        "RateLimit-Policy": ", ".join(_policy(name, d.limit, d.window) for name, d in named),
        "RateLimit": f'"{current}";r={decision.remaining};t={whole_seconds(min(decision.reset_after, 2**31))}',
    }
    if retry is not None and not math.isinf(retry):
        headers["Retry-After"] = str(whole_seconds(retry))
    return headers


class _Decided:
    """A reservation's answer read off its decision."""

    decision: Decision | MultiDecision

    @property
    def allowed(self) -> bool:
        return self.decision.allowed

    @property
    def retry_after(self) -> float | None:
        return self.decision.retry_after


@dataclass(frozen=True)
class Grant(_Decided):
    """GCRA's answer with PARTIAL: the decision, and how many of the tokens asked were taken (at
    least one when allowed, 0 when not)."""

    decision: Decision
    granted: int


@dataclass(frozen=True)
class Reservation(_Decided):
    """HIT's, SLIDE's or GCRA's answer with RESERVE: the decision, and the reservation to settle
    with what was used (None when denied)."""

    key: str
    decision: Decision
    token: str | None
    """The reservation as the server made it: opaque, valid for ``key`` only, settled once."""
    amount: int
    """What was reserved: the call's cost, or its tokens."""


@dataclass(frozen=True)
class MultiReservation(_Decided):
    """HITALL's answer with TOKENS and RESERVE: the decision on every limit, all or nothing, and
    one reservation of the token keys to settle with what was used (None when denied)."""

    keys: tuple[str, ...]
    """The token keys, in order: what the reservation is settled on."""
    decision: MultiDecision
    token: str | None
    """The reservation as the server made it: opaque, valid for ``keys`` only, settled once."""
    amount: int
    """The tokens reserved on each token key."""


@dataclass(frozen=True)
class Settlement:
    """SETTLE's answer: the limit as it stands after the adjustment, as for an admitted call, and
    what was applied (negative: given back; positive: an overage charged; 0: nothing, as when the
    reserved window had ended)."""

    decision: Decision
    applied: int


@dataclass(frozen=True)
class Acquisition:
    """ACQUIRE's answer."""

    acquired: bool
    """A permit is held under ``id`` (new, or renewed when ``id`` held a live one)."""
    in_use: int
    """Live leases after the call."""
    remaining: int
    """``max(limit - in_use, 0)``."""
    expires_after: float
    """Acquired: seconds until this lease ends. Denied: until the earliest live lease ends, the
    soonest a permit frees itself."""
    id: str | None
    """The lease's id (None when denied)."""

    @property
    def retry_after(self) -> float | None:
        """None when acquired; else ``expires_after``."""
        return None if self.acquired else self.expires_after


@dataclass(frozen=True)
class TopEntry:
    """One key of RATELIMIT.TOP: denied calls (or admitted cost), at most ``error`` too many."""

    key: str
    count: int
    error: int


@dataclass(frozen=True)
class Learned:
    """What a report taught an adaptive limit (RATELIMIT.REPORT's answer)."""

    limit: int
    """The fleet's limit per window now."""
    decreased: bool
    """This report cut it (the first throttle of its window)."""
    hold: float
    """Seconds until any caller is admitted again (a provider's Retry-After); 0 when not held."""
