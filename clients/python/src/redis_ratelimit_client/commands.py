"""One builder per command: it checks the arguments (raising RateLimitError before any round trip
where the client can tell), and returns a Call: the module's command, the library's function, the
same arguments for both, and how to read the reply. No I/O here: the sync and async clients and
their pipelines send the Calls.

Each builder's parameters are the command's arguments as ``COMMAND DOCS`` names them, except for
``MS`` (a window, lease or period is given in seconds, as an int, a float or a timedelta, and sent
in milliseconds where it is not whole seconds) and ``numkeys`` (the length of ``keys``)."""

from __future__ import annotations

import math
import uuid
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Generic, Literal, TypeVar, overload

from .errors import RateLimitError
from .results import (
    Acquisition,
    Decision,
    Grant,
    Learned,
    MultiDecision,
    MultiReservation,
    Reservation,
    Settlement,
    TopEntry,
)

T = TypeVar("T")
Seconds = int | float | timedelta
"""A duration in seconds: an int, a float, or a timedelta."""
CalendarUnit = Literal["day", "week", "month", "year"]
"""A calendar window: a day, an ISO week (from Monday), a month or a year, in the call's ``tz``."""
CALENDAR_UNITS: tuple[CalendarUnit, ...] = ("day", "week", "month", "year")
Arg = str | bytes | int


@dataclass(frozen=True)
class Call(Generic[T]):
    """A command ready to send, to the module or to the Functions library."""

    command: str
    function: str
    keys: tuple[str, ...]
    args: tuple[Arg, ...]
    parse: Callable[[Any], T]
    readonly: bool = False
    """Sent as a read (FCALL_RO): PEEK, TOP."""
    writes: bool = True
    """Whether it may write (a replica-waiting limiter waits only then): not PEEK, TOP, SLIDE ... PEEK."""
    module_only: bool = False
    numkeys: bool = False
    """The module's command takes ``numkeys`` before its keys (HITALL)."""

    def module_args(self) -> tuple[Arg, ...]:
        count: tuple[Arg, ...] = (len(self.keys),) if self.numkeys else ()
        return (self.command, *count, *self.keys, *self.args)

    def library_args(self) -> tuple[Arg, ...]:
        if self.module_only:
            raise RateLimitError(f"{self.command} needs the module: the Functions library cannot do it")
        return ("FCALL_RO" if self.readonly else "FCALL", self.function, len(self.keys), *self.keys, *self.args)


# Argument checks, worded as the module words its errors.


def _integer(value: object, name: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum or value >= 2**63:
        raise RateLimitError(f"{name} must be an integer >= {minimum}")
    return value


# The longest window or lease the module takes, in ms; GCRA's products stay within half of i64.
MAX_MS = 2**62
MAX_SPAN_NS = (2**63 - 1) // 2


def _duration(value: object, name: str) -> tuple[Arg, bool]:
    """A window or lease as the command takes it: (whole seconds, False) or (milliseconds, True),
    at most 2^62 ms."""
    value, in_ms = _duration_of(value, name)
    if (value if in_ms else value * 1000) > MAX_MS:
        raise RateLimitError(f"{name} is too large")
    return value, in_ms


def _duration_of(value: object, name: str) -> tuple[int, bool]:
    if isinstance(value, timedelta):
        ms, rest = divmod(value, timedelta(milliseconds=1))
        if rest or ms < 1:
            raise RateLimitError(f"{name} must be a whole number of milliseconds >= 1")
        return (ms // 1000, False) if ms % 1000 == 0 else (ms, True)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RateLimitError(f"{name} must be a number of seconds (int, float or timedelta)")
    if isinstance(value, int):
        return _integer(value, name), False
    if not math.isfinite(value) or value <= 0:
        raise RateLimitError(f"{name} must be an integer >= 1")
    if value.is_integer():
        return _integer(int(value), name), False
    in_ms = value * 1000
    if abs(in_ms - round(in_ms)) > 1e-6 * max(1.0, in_ms) or round(in_ms) < 1:
        raise RateLimitError(f"{name} must be a whole number of milliseconds >= 1")
    return round(in_ms), True


def _seconds(value: Arg, in_ms: bool) -> float:
    return int(value) / 1000 if in_ms else float(value)


def _period(value: object) -> tuple[str, float]:
    """GCRA's period as its decimal text, and in seconds (whole nanoseconds below 2^63)."""
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RateLimitError("period is not a valid float")
    if isinstance(value, float) and not math.isfinite(value):
        raise RateLimitError("period is not a valid float")
    if value <= 0:
        raise RateLimitError("period must be > 0")
    text = str(value) if isinstance(value, int) else repr(value)
    # As the module reads the text: a double, rounded to the nanosecond.
    if not round(float(text) * 1e9, 0) < 2.0**63:
        raise RateLimitError("period would cause an overflow")
    return text, float(value)


def _gcra_spans(max_burst: int, tokens_per_period: int, seconds: float, tokens: int) -> None:
    """Refuses a bucket whose spans in ns would pass half of i64, as the module does."""
    emission_ns = max(round(seconds * 1e9) // tokens_per_period, 1)
    if emission_ns * (max_burst + 1) > MAX_SPAN_NS:
        raise RateLimitError("(max_burst + 1) * period / tokens_per_period would cause an overflow")
    if emission_ns * abs(tokens) > MAX_SPAN_NS:
        raise RateLimitError("TOKENS * period / tokens_per_period would cause an overflow")


def _lease_id(value: str | bytes | None) -> str:
    if value is None:
        return uuid.uuid4().hex
    raw = value.encode() if isinstance(value, str) else value
    if not isinstance(raw, bytes) or not 1 <= len(raw) <= 256:
        raise RateLimitError("ID must be 1 to 256 bytes")
    return value if isinstance(value, str) else value.decode(errors="surrogateescape")


def _key(value: object) -> str:
    if not isinstance(value, str):
        raise RateLimitError(f"a key must be a str, not {type(value).__name__}")
    return value


def _cost_args(cost: int, token: str = "COST") -> tuple[Arg, ...]:
    return () if _integer(cost, token) == 1 else (token, cost)


def _signed_cost_args(cost: int, token: str = "COST") -> tuple[Arg, ...]:
    """A cost (or tokens) that may be negative, to give back; never 0."""
    if isinstance(cost, bool) or not isinstance(cost, int) or cost == 0 or not -(2**63) <= cost < 2**63:
        raise RateLimitError(f"{token} must be a nonzero integer")
    return () if cost == 1 else (token, cost)


def _reserved(amount: int, token: str) -> int:
    if isinstance(amount, bool) or not isinstance(amount, int) or not 1 <= amount < 2**63:
        raise RateLimitError(f"RESERVE needs {token} >= 1")
    return amount


def _text(value: object) -> str:
    return value.decode(errors="backslashreplace") if isinstance(value, bytes) else str(value)


def _ms(value: int) -> float:
    return value / 1000


# Reading the replies.


def _fixed(limit: int, window: float | None, cost: int) -> Callable[[Any], Decision]:
    """HIT's and PEEK's [allowed, count, remaining, reset_ms]."""

    def parse(reply: Any) -> Decision:
        allowed, count, remaining, reset_ms = reply
        reset = math.inf if reset_ms < 0 else _ms(reset_ms)
        retry = None if allowed else (math.inf if cost > limit else reset)
        return Decision(bool(allowed), count, remaining, reset, retry, limit, window)

    return parse


def _sliding(limit: int, window: float | None) -> Callable[[Any], Decision]:
    """SLIDE's [allowed, count, remaining, retry_after_ms, reset_ms]."""

    def parse(reply: Any) -> Decision:
        allowed, count, remaining, retry_ms, reset_ms = reply
        reset = math.inf if reset_ms < 0 else _ms(reset_ms)
        retry = None if allowed else (math.inf if retry_ms < 0 else _ms(retry_ms))
        return Decision(bool(allowed), count, remaining, reset, retry, limit, window)

    return parse


# The commands.


def _fixed_window(window: Seconds | CalendarUnit) -> tuple[Arg, bool, float | None]:
    """A fixed window as sent (a calendar unit, or a length in s or ms), whether in ms, and its
    length in seconds (None for a calendar window, whose length varies)."""
    if isinstance(window, str):
        if window not in CALENDAR_UNITS:
            raise RateLimitError("window must be a number of seconds or day, week, month or year")
        return window, False, None
    value, in_ms = _duration(window, "window")
    return value, in_ms, _seconds(value, in_ms)


def _laid_on_clock(calendar: bool, align: bool, tz: str | None) -> tuple[Arg, ...]:
    """ALIGN and TZ as sent; TZ needs a calendar window among the call's."""
    if not isinstance(align, bool):
        raise RateLimitError("align must be a bool")
    if tz is not None and not isinstance(tz, str):
        raise RateLimitError(f"tz must be a str, not {type(tz).__name__}")
    if tz is not None and not calendar:
        raise RateLimitError("TZ needs a calendar window (day, week, month or year)")
    return (*(("ALIGN",) if align else ()), *(("TZ", tz) if tz is not None else ()))


def hit(
    key: str, limit: int, window: Seconds | CalendarUnit, *, cost: int = 1, align: bool = False, tz: str | None = None
) -> Call[Decision]:
    """RATELIMIT.HIT: counts ``cost`` against ``limit`` per fixed window of ``window`` seconds,
    started by the first hit, or with ``align`` at multiples of ``window`` since the Unix epoch; a
    ``window`` of "day", "week", "month" or "year" is a calendar window in ``tz`` (UTC, "+05:30",
    or an IANA name such as "America/New_York"). A denied hit counts nothing. A negative ``cost``
    gives that much back (never below 0, never denied, the window's end kept)."""
    value, in_ms, seconds = _fixed_window(window)
    args = (
        _integer(limit, "limit"),
        value,
        *_signed_cost_args(cost),
        *(("MS",) if in_ms else ()),
        *_laid_on_clock(seconds is None, align, tz),
    )
    return Call("RATELIMIT.HIT", "ratelimit_hit", (_key(key),), args, _fixed(limit, seconds, cost))


def peek(key: str, limit: int, *, cost: int = 1) -> Call[Decision]:
    """RATELIMIT.PEEK: what HIT would answer, without counting (read-only: replicas too)."""
    args = (_integer(limit, "limit"), *_cost_args(cost))
    return Call(
        "RATELIMIT.PEEK", "ratelimit_peek", (_key(key),), args, _fixed(limit, None, cost), readonly=True, writes=False
    )


def slide(key: str, limit: int, window: Seconds, *, cost: int = 1, peek: bool = False) -> Call[Decision]:
    """RATELIMIT.SLIDE: ``limit`` per sliding window of ``window`` seconds, in one key; with
    ``peek``, what the call would get, writing nothing. A negative ``cost`` gives that much back to
    the current window."""
    value, in_ms = _duration(window, "window")
    args = (
        _integer(limit, "limit"),
        value,
        *_signed_cost_args(cost),
        *(("MS",) if in_ms else ()),
        *(("PEEK",) if peek else ()),
    )
    parse = _sliding(limit, _seconds(value, in_ms))
    return Call("RATELIMIT.SLIDE", "ratelimit_slide", (_key(key),), args, parse, writes=not peek)


def hit_all(
    keys: Sequence[str],
    limits: Sequence[tuple[int, Seconds | CalendarUnit]],
    *,
    cost: int = 1,
    slide: bool = False,
    align: bool = False,
    tz: str | None = None,
    tokens: int | None = None,
    token_keys: int = 1,
) -> Call[MultiDecision]:
    """RATELIMIT.HITALL: one hit against several limits, all or nothing: ``keys[i]`` counts
    ``limits[i]`` (a ``(limit, window)`` pair); with ``slide``, sliding windows. ``align`` and
    calendar windows in ``tz`` as ``hit``'s (not with ``slide``). With ``tokens``, the last
    ``token_keys`` keys count that many (a request's tokens) and the others ``cost``."""
    keys = tuple(_key(k) for k in keys)
    pairs = list(limits)
    if not all(isinstance(pair, tuple | list) and len(pair) == 2 for pair in pairs):
        raise RateLimitError("limits must be (limit, window) pairs, one per key")
    if not keys:
        raise RateLimitError("numkeys must be an integer >= 1")
    if len(pairs) != len(keys):
        raise RateLimitError(f"{len(keys)} keys need {len(keys)} (limit, window) pairs, not {len(pairs)}")
    if len(set(keys)) != len(keys):
        raise RateLimitError("each key may be given only once")
    checked = [(_integer(limit, "limit"), _fixed_window(window)) for limit, window in pairs]
    calendar = any(seconds is None for _, (_, _, seconds) in checked)
    if slide and (align or calendar):
        other = "ALIGN" if align else "a calendar window"
        raise RateLimitError(f"syntax error: SLIDE and {other} cannot be given together")
    in_ms = any(ms for _, (_, ms, _) in checked)
    if in_ms and calendar:
        # MS would apply to the calendar window too.
        raise RateLimitError("beside a calendar window, every window must be whole seconds")
    # MS applies to every window: all go in milliseconds when one needs them (a calendar unit
    # stays a unit).
    windows = [int(v) * 1000 if in_ms and not ms and s is not None else v for _, (v, ms, s) in checked]
    args: list[Arg] = [x for (limit, _), w in zip(checked, windows, strict=True) for x in (limit, w)]
    args += [*_cost_args(cost), *(("MS",) if in_ms else ()), *(("SLIDE",) if slide else ())]
    args += _laid_on_clock(calendar, align, tz)
    costs = [cost] * len(keys)
    if tokens is not None:
        tokens = _integer(tokens, "TOKENS")
        if isinstance(token_keys, bool) or not isinstance(token_keys, int) or not 1 <= token_keys <= len(keys):
            raise RateLimitError("TOKENS' key count must be between 1 and numkeys")
        costs[len(keys) - token_keys :] = [tokens] * token_keys
        args += ["TOKENS", tokens, token_keys]
    specs = [(limit, seconds) for limit, (_, _, seconds) in checked]

    def parse(reply: Any) -> MultiDecision:
        allowed, *rows = reply
        decisions = []
        for (limit, window), spent, row in zip(specs, costs, rows, strict=True):
            if slide:
                decision = _sliding(limit, window)([1 if row[2] < 0 else 0, *row])
            else:
                count, remaining, reset_ms = row
                fits = bool(allowed) or count + spent <= limit
                decision = _fixed(limit, window, spent)([int(fits), count, remaining, reset_ms])
            decisions.append(decision)
        return MultiDecision(bool(allowed), tuple(decisions))

    return Call("RATELIMIT.HITALL", "ratelimit_hitall", keys, tuple(args), parse, numkeys=True)


def _bucket(period: float | None) -> Callable[[Any], Decision]:
    """GCRA's [limited, capacity, remaining, retry_after_ms, full_after_ms]."""

    def parse(reply: Any) -> Decision:
        limited, capacity, remaining, retry_ms, full_ms = reply
        retry = None if not limited else (math.inf if retry_ms < 0 else _ms(retry_ms))
        return Decision(not limited, capacity - remaining, remaining, _ms(full_ms), retry, capacity, period)

    return parse


def gcra(
    key: str, max_burst: int, tokens_per_period: int, period: Seconds, *, tokens: int = 1, align: bool = False
) -> Call[Decision]:
    """RATELIMIT.GCRA: a burst of ``max_burst + 1``, then ``tokens_per_period`` per ``period``
    seconds; ``tokens`` is what this call takes (negative ones are given back). With ``align``,
    the tokens come back ``tokens_per_period`` at once, at each multiple of ``period`` since the
    Unix epoch (Spring Cloud Gateway's bucket, with ``period`` 1)."""
    text, seconds = _period(period)
    burst = _integer(max_burst, "max_burst", minimum=0)
    rate = _integer(tokens_per_period, "tokens_per_period")
    args = (burst, rate, text, *_signed_cost_args(tokens, "TOKENS"))
    args += _laid_on_clock(False, align, None)
    _gcra_spans(burst, rate, seconds, tokens)
    return Call("RATELIMIT.GCRA", "ratelimit_gcra", (_key(key),), args, _bucket(seconds))


def gcra_up_to(
    key: str, max_burst: int, tokens_per_period: int, period: Seconds, *, tokens: int, align: bool = False
) -> Call[Grant]:
    """RATELIMIT.GCRA with PARTIAL: as many of ``tokens`` as the bucket has whole, at least one.
    Granted fewer than asked, the bucket is left empty (the part of the next token goes with
    them); none, it is denied until one comes back."""
    call = gcra(key, max_burst, tokens_per_period, period, tokens=_integer(tokens, "TOKENS"), align=align)
    return _granting(call, call.parse)


def _granting(call: Call[Decision], decided: Callable[[Any], Decision]) -> Call[Grant]:
    """``call`` with PARTIAL: its decision (``decided`` reads it), then the count granted."""

    def parse(reply: Any) -> Grant:
        *numbers, granted = reply
        return Grant(decided(numbers), granted)

    return Call(call.command, call.function, call.keys, (*call.args, "PARTIAL"), parse)


def hit_up_to(
    key: str, limit: int, window: Seconds | CalendarUnit, *, cost: int, align: bool = False, tz: str | None = None
) -> Call[Grant]:
    """RATELIMIT.HIT with PARTIAL: as many of ``cost`` as the window has left, at least one; none
    left, it is denied (until the window ends, whatever the cost)."""
    call = hit(key, limit, window, cost=_up_to(cost), align=align, tz=tz)
    return _granting(call, _fixed(limit, _fixed_window(window)[2], 1))


def slide_up_to(key: str, limit: int, window: Seconds, *, cost: int) -> Call[Grant]:
    """RATELIMIT.SLIDE with PARTIAL: as many of ``cost`` as the sliding window's estimate has room
    for, at least one (a denial's retry is for one)."""
    call = slide(key, limit, window, cost=_up_to(cost))
    return _granting(call, call.parse)


def refund_hit(
    key: str, limit: int, window: Seconds | CalendarUnit, *, amount: int, align: bool = False, tz: str | None = None
) -> Call[Decision]:
    """``amount`` given back to the fixed window running now: ``hit`` with a negative cost (never
    below 0, the window's end kept). A call counted in an earlier window is refunded there only
    by settling its reservation."""
    return hit(key, limit, window, cost=-_integer(amount, "amount"), align=align, tz=tz)


def refund_slide(key: str, limit: int, window: Seconds, *, amount: int) -> Call[Decision]:
    """``amount`` given back to the sliding window's current window: ``slide`` with a negative cost."""
    return slide(key, limit, window, cost=-_integer(amount, "amount"))


def refund_gcra(key: str, max_burst: int, tokens_per_period: int, period: Seconds, *, amount: int) -> Call[Decision]:
    """``amount`` tokens given back to the bucket: ``gcra`` with negative tokens (its TAT moves
    back, never before now)."""
    return gcra(key, max_burst, tokens_per_period, period, tokens=-_integer(amount, "amount"))


def refund(key: str, amount: int, *, limit: int, window: Seconds, sliding: bool = False) -> Call[Decision]:
    """Deprecated: ``refund_hit`` (``refund_slide`` with ``sliding``)."""
    warnings.warn("refund() is refund_hit() or refund_slide()", DeprecationWarning, stacklevel=2)
    if sliding:
        return refund_slide(key, limit, window, amount=amount)
    return refund_hit(key, limit, window, amount=amount)


def _reserving(call: Call[Decision], amount: int) -> Call[Reservation]:
    """``call`` with RESERVE: its decision, and the reservation the reply ends with."""

    def parse(reply: Any) -> Reservation:
        *numbers, token = reply
        return Reservation(call.keys[0], call.parse(numbers), None if token is None else _text(token), amount)

    return Call(call.command, call.function, call.keys, (*call.args, "RESERVE"), parse)


def reserve_hit(
    key: str, limit: int, window: Seconds | CalendarUnit, *, cost: int, align: bool = False, tz: str | None = None
) -> Call[Reservation]:
    """RATELIMIT.HIT with RESERVE: ``cost`` (the estimate) decided and counted as by ``hit``, and
    a reservation to settle with what was used. A window laid on the clock (``align``, a calendar
    one) is carried in the reservation: an overage settled after it ended counts in the next."""
    return _reserving(hit(key, limit, window, cost=_reserved(cost, "COST"), align=align, tz=tz), cost)


def _up_to(cost: int, name: str = "COST") -> int:
    """PARTIAL's cost (or tokens): at least one."""
    if isinstance(cost, bool) or not isinstance(cost, int) or not 1 <= cost < 2**63:
        raise RateLimitError(f"PARTIAL needs {name} >= 1")
    return cost


def _reserving_up_to(call: Call[Decision], decided: Callable[[Any], Decision]) -> Call[Reservation]:
    """``call`` with PARTIAL and RESERVE: its decision (``decided`` reads it), then the count
    granted and a reservation of that count."""

    def parse(reply: Any) -> Reservation:
        *numbers, granted, token = reply
        return Reservation(call.keys[0], decided(numbers), None if token is None else _text(token), granted)

    return Call(call.command, call.function, call.keys, (*call.args, "PARTIAL", "RESERVE"), parse)


def reserve_hit_up_to(
    key: str, limit: int, window: Seconds | CalendarUnit, *, cost: int, align: bool = False, tz: str | None = None
) -> Call[Reservation]:
    """RATELIMIT.HIT with PARTIAL and RESERVE: as many of ``cost`` as the window has left, at least
    one, counted now, and a reservation of what was granted (its ``amount``; 0, and no token,
    when none was left): a block of hits to spend locally, whose unused part ``settle`` gives
    back while the window runs."""
    call = hit(key, limit, window, cost=_up_to(cost), align=align, tz=tz)
    # Denied only with none left: then again when the window ends, whatever the cost.
    return _reserving_up_to(call, _fixed(limit, _fixed_window(window)[2], 1))


def reserve_slide_up_to(key: str, limit: int, window: Seconds, *, cost: int) -> Call[Reservation]:
    """RATELIMIT.SLIDE with PARTIAL and RESERVE: as many of ``cost`` as the sliding window's
    estimate has room for, at least one, and a reservation of what was granted (its ``amount``;
    0, and no token, when there was no room; a denial's retry is for one)."""
    call = slide(key, limit, window, cost=_up_to(cost))
    return _reserving_up_to(call, call.parse)


def reserve_all(
    keys: Sequence[str],
    limits: Sequence[tuple[int, Seconds | CalendarUnit]],
    *,
    tokens: int,
    token_keys: int = 1,
    cost: int = 1,
    slide: bool = False,
    align: bool = False,
    tz: str | None = None,
) -> Call[MultiReservation]:
    """RATELIMIT.HITALL with TOKENS and RESERVE: a request's limits decided together (the last
    ``token_keys`` keys count ``tokens``, its estimate; the others ``cost``), and one reservation
    of the token keys, settled with the tokens used on all of them: ``settle(r.keys, r.token, used)``."""
    call = hit_all(
        keys,
        limits,
        cost=cost,
        slide=slide,
        align=align,
        tz=tz,
        tokens=tokens,
        token_keys=token_keys,
    )
    token_keys_named = call.keys[len(call.keys) - token_keys :]

    def parse(reply: Any) -> MultiReservation:
        *decided, token = reply
        return MultiReservation(token_keys_named, call.parse(decided), None if token is None else _text(token), tokens)

    return Call(call.command, call.function, call.keys, (*call.args, "RESERVE"), parse, numkeys=True)


def reserve_slide(key: str, limit: int, window: Seconds, *, cost: int) -> Call[Reservation]:
    """RATELIMIT.SLIDE with RESERVE: as ``slide``, and a reservation to settle."""
    return _reserving(slide(key, limit, window, cost=_reserved(cost, "COST")), cost)


def reserve_gcra(
    key: str, max_burst: int, tokens_per_period: int, period: Seconds, *, tokens: int
) -> Call[Reservation]:
    """RATELIMIT.GCRA with RESERVE: as ``gcra``, and a reservation to settle."""
    return _reserving(gcra(key, max_burst, tokens_per_period, period, tokens=_reserved(tokens, "TOKENS")), tokens)


def reserve_gcra_up_to(
    key: str, max_burst: int, tokens_per_period: int, period: Seconds, *, tokens: int
) -> Call[Reservation]:
    """RATELIMIT.GCRA with PARTIAL and RESERVE: as many of ``tokens`` as the bucket has whole, at
    least one, and a reservation of what was granted (its ``amount``; 0, and no token, when none
    was whole)."""
    call = gcra(key, max_burst, tokens_per_period, period, tokens=_up_to(tokens, "TOKENS"))
    return _reserving_up_to(call, call.parse)


def _settlement(reply: Any) -> Settlement:
    """One key's SETTLE reply: the reserving command's numbers, what was applied, then what the
    reservation was of (its limiter, its limit, its window in ms: -1 for none), so that the
    reservation itself stays opaque."""
    *numbers, applied, kind, limit, window_ms = reply
    window = None if window_ms < 0 else window_ms / 1000
    readers = {"fixed": _fixed(limit, window, 1), "sliding": _sliding(limit, window), "adaptive": _adaptive(window)}
    decision = readers.get(_text(kind), _bucket(None))
    return Settlement(decision(numbers), applied)


@overload
def settle(key: str, reservation: str, used: int) -> Call[Settlement]: ...
@overload
def settle(key: list[str] | tuple[str, ...], reservation: str, used: int) -> Call[tuple[Settlement, ...]]: ...
def settle(key: str | list[str] | tuple[str, ...], reservation: str, used: int) -> Call[Any]:
    """RATELIMIT.SETTLE: the reservation made on ``key`` settled with ``used``: the unused part
    back to the window it was counted in while that still counts, more than reserved charged to
    the current one. At most once: settled again (a retry), it changes nothing and answers what
    the first applied. A ``reserve_all`` reservation is settled on its token keys (a list), one
    Settlement each."""
    if not isinstance(reservation, str):
        raise RateLimitError(f"a reservation must be a str, not {type(reservation).__name__}")
    used = _integer(used, "used", minimum=0)
    keys = (_key(key),) if isinstance(key, str) else tuple(_key(k) for k in key)
    if not keys:
        raise RateLimitError("settle needs a key")
    if len(set(keys)) != len(keys):
        raise RateLimitError("each key may be given only once")
    if isinstance(key, str):
        return Call("RATELIMIT.SETTLE", "ratelimit_settle", keys, (reservation, used), _settlement)

    def parse_all(reply: Any) -> tuple[Settlement, ...]:
        # One key's reply is flat, several keys' one per key.
        if len(keys) == 1:
            return (_settlement(reply),)
        return tuple(_settlement(r) for r in reply)

    return Call("RATELIMIT.SETTLE", "ratelimit_settle", keys, (reservation, used), parse_all)


def acquire(key: str, limit: int, lease: Seconds, *, id: str | bytes | None = None) -> Call[Acquisition]:
    """RATELIMIT.ACQUIRE: one of at most ``limit`` permits in flight, a lease of ``lease`` seconds
    under ``id`` (default: a new UUID); a retry with the same id is counted once."""
    value, in_ms = _duration(lease, "lease")
    lease_id = _lease_id(id)
    args = (_integer(limit, "limit"), value, *(("MS",) if in_ms else ()), "ID", lease_id)

    def parse(reply: Any) -> Acquisition:
        acquired, in_use, remaining, ms, held = reply
        return Acquisition(bool(acquired), in_use, remaining, _ms(ms), None if held is None else _text(held))

    return Call("RATELIMIT.ACQUIRE", "ratelimit_acquire", (_key(key),), args, parse)


def release(key: str, id: str | bytes) -> Call[bool]:
    """RATELIMIT.RELEASE: gives back the permit held under ``id``; False if it was not live."""
    return Call("RATELIMIT.RELEASE", "ratelimit_release", (_key(key),), (_lease_id(id),), lambda r: r == 1)


def renew(key: str, id: str | bytes, lease: Seconds) -> Call[float | None]:
    """RATELIMIT.RENEW: extends the live lease under ``id`` to ``lease`` seconds from now; answers
    the seconds it now has, or None when it was lost (ended: stop, or acquire again)."""
    value, in_ms = _duration(lease, "lease")
    args = (_lease_id(id), value, *(("MS",) if in_ms else ()))
    return Call("RATELIMIT.RENEW", "ratelimit_renew", (_key(key),), args, lambda r: None if r < 0 else _ms(r))


def top(
    view: Literal["denied", "admitted", "shadowed"] = "denied", *, count: int | None = None, reset: bool = False
) -> Call[list[TopEntry]]:
    """RATELIMIT.TOP (the module only): the keys this node denied most (or admitted the most cost
    for, or would have denied most in shadow mode) over the last minute or two, each count with its
    error bound."""
    if view not in ("denied", "admitted", "shadowed"):
        raise RateLimitError("view must be 'denied', 'admitted' or 'shadowed'")
    args: list[Arg] = [view.upper()]
    if count is not None:
        args += ["COUNT", _integer(count, "COUNT")]
    if reset:
        args.append("RESET")

    def parse(reply: Any) -> list[TopEntry]:
        entries = []
        for row in reply:
            fields = row if isinstance(row, dict) else dict(zip(row[::2], row[1::2], strict=True))
            named = {_text(k): v for k, v in fields.items()}
            entries.append(TopEntry(_text(named["key"]), named["count"], named["error"]))
        return entries

    return Call("RATELIMIT.TOP", "", (), tuple(args), parse, readonly=True, writes=False, module_only=True)


# The adaptive limit: every scaled quantity of the module's stays within 2^50.
MAX_SCALED = 2**50
MAX_SPAN_MS = 2**40
Outcome = Literal["ok", "throttled"]
"""How the provider answered: ``"throttled"`` for a 429, a 503, or a timeout counted as one."""


def _adaptive(limit_window: float | None) -> Callable[[Any], Decision]:
    """ADAPT's [allowed, limit, remaining, retry_after_ms, reset_ms]."""

    def parse(reply: Any) -> Decision:
        allowed, limit, remaining, retry_ms, reset_ms = reply
        retry = None if allowed else _ms(retry_ms)
        return Decision(bool(allowed), max(limit - remaining, 0), remaining, _ms(reset_ms), retry, limit, limit_window)

    return parse


def adapt(
    key: str, floor: int, start: int, ceiling: int, window: Seconds, *, cost: int = 1, turn: bool = False
) -> Call[Decision]:
    """RATELIMIT.ADAPT: ``cost`` decided against the limit the fleet learns at ``key`` (per
    ``window`` seconds, between ``floor`` and ``ceiling``, starting at ``start``), paced: at most a
    sixth of a window's limit at once. ``limit`` in the decision is the learned limit. ``turn``:
    the caller is back at the ``retry_after`` a denial told it (TURN): it is then admitted on a
    bucket not in debt, so that no one who was not waiting takes its turn."""
    low, first, high = _integer(floor, "floor"), _integer(start, "start"), _integer(ceiling, "ceiling")
    value, in_ms = _duration(window, "window")
    ms = int(value) if in_ms else int(value) * 1000
    if ms > MAX_SPAN_MS:
        raise RateLimitError("window is too large")
    if not low <= first <= high:
        raise RateLimitError("floor <= start <= ceiling must hold")
    if high * ms > MAX_SCALED:
        raise RateLimitError("ceiling * window is too large")
    if _integer(cost, "COST") * ms > MAX_SCALED:
        raise RateLimitError("COST * window is too large")
    args = (low, first, high, value, *_cost_args(cost), *(("MS",) if in_ms else ()), *(("TURN",) if turn else ()))
    return Call("RATELIMIT.ADAPT", "ratelimit_adapt", (_key(key),), args, _adaptive(ms / 1000))


def adapt_up_to(
    key: str, floor: int, start: int, ceiling: int, window: Seconds, *, cost: int, turn: bool = False
) -> Call[Grant]:
    """RATELIMIT.ADAPT with PARTIAL: as many of ``cost`` as the bucket has whole, at least one."""
    call = adapt(key, floor, start, ceiling, window, cost=_up_to(cost), turn=turn)
    return _granting(call, call.parse)


def reserve_adapt(
    key: str, floor: int, start: int, ceiling: int, window: Seconds, *, cost: int, turn: bool = False
) -> Call[Reservation]:
    """RATELIMIT.ADAPT with RESERVE: ``cost`` (the estimate: an LLM call's tokens before the answer)
    decided and taken as by ``adapt``, and a reservation to ``settle`` with what was used: the
    unused part goes back to the fleet's bucket, and never counts as use that earns growth."""
    return _reserving(adapt(key, floor, start, ceiling, window, cost=_reserved(cost, "COST"), turn=turn), cost)


def reserve_adapt_up_to(
    key: str, floor: int, start: int, ceiling: int, window: Seconds, *, cost: int, turn: bool = False
) -> Call[Reservation]:
    """RATELIMIT.ADAPT with PARTIAL and RESERVE: as many of ``cost`` as the bucket has whole, at
    least one, and a reservation of what was granted (its ``amount``; 0, and no token, when none
    was)."""
    call = adapt(key, floor, start, ceiling, window, cost=_up_to(cost), turn=turn)
    return _reserving_up_to(call, call.parse)


def _span_ms(seconds: float | None, name: str) -> int | None:
    """A provider's wait in whole ms, rounded up (waiting that long is enough)."""
    if seconds is None:
        return None
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds >= 0:
        raise RateLimitError(f"{name} must be an integer >= 0")
    ms = math.ceil(seconds * 1000 - 1e-9)
    if ms > MAX_SPAN_MS:
        raise RateLimitError(f"{name} is too large")
    return ms


def report(
    key: str,
    outcome: Outcome,
    *,
    retry_after: float | None = None,
    limit: int | None = None,
    remaining: int | None = None,
    reset_after: float | None = None,
    age: float | None = None,
) -> Call[Learned | None]:
    """RATELIMIT.REPORT: how the provider answered a call decided at ``key``. ``"throttled"`` cuts
    the fleet's limit (once per epoch, however many callers report the same burst) and with
    ``retry_after`` (seconds) holds every caller until then; the provider's stated ``limit`` caps
    the learned one, its ``remaining`` bounds the fleet for ``reset_after`` seconds. ``age``: the
    seconds since the call was decided (AGE): throttled though decided after the epoch's cut, it
    cuts again (with no ``remaining`` stated). None where no limit is learned at ``key``."""
    if outcome not in ("ok", "throttled"):
        raise RateLimitError("outcome must be OK or THROTTLED")
    if (remaining is None) != (reset_after is None):
        raise RateLimitError(
            "syntax error: REMAINING needs RESET" if reset_after is None else "syntax error: RESET needs REMAINING"
        )
    if retry_after is not None and outcome == "ok":
        raise RateLimitError("syntax error: RETRY needs THROTTLED")
    args: tuple[Arg, ...] = (outcome.upper(),)
    retry_ms = _span_ms(retry_after, "RETRY")
    if retry_ms is not None:
        args += ("RETRY", retry_ms)
    if limit is not None:
        if _integer(limit, "LIMIT") > MAX_SCALED:
            raise RateLimitError("LIMIT is too large")
        args += ("LIMIT", limit)
    if remaining is not None:
        if _integer(remaining, "REMAINING", minimum=0) > MAX_SCALED:
            raise RateLimitError("REMAINING is too large")
        args += ("REMAINING", remaining, "RESET", _span_ms(reset_after, "RESET") or 0)
    age_ms = _span_ms(age, "AGE")
    if age_ms is not None:
        args += ("AGE", age_ms)

    def parse(reply: Any) -> Learned | None:
        if reply is None:
            return None
        learned, decreased, hold_ms = reply
        return Learned(learned, bool(decreased), _ms(hold_ms))

    return Call("RATELIMIT.REPORT", "ratelimit_report", (_key(key),), args, parse)
