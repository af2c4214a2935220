"""What an LLM provider's answer says about its limits, read from its status and headers with no
I/O: OpenAI's (and Azure OpenAI's) ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}``, the
resets Go durations (``6m0s``); Anthropic's ``anthropic-ratelimit-{requests,tokens}-*``, the resets
RFC 3339 instants; and the wait: ``retry-after-ms``, then ``retry-after`` in seconds or as an HTTP
date. A figure that does not parse is left out, never guessed; a wait of 0 or less (Azure has sent
-1) is none. testkit/conformance/provider_answers.json holds every client to the same readings."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime

THROTTLED_STATUSES = frozenset({429, 503})
"""The answers that say the provider is over its limit (or shedding load)."""

_GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_GO_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_WHOLE = re.compile(r"\d+")


@dataclass(frozen=True)
class Stated:
    """One measure's figures as the provider stated them (None: not stated)."""

    limit: int | None = None
    remaining: int | None = None
    reset_after: float | None = None
    """Seconds until the provider's window resets."""


@dataclass(frozen=True)
class ProviderAnswer:
    throttled: bool
    """A 429 or a 503."""
    retry_after: float | None
    """Seconds the provider asks callers to wait; None when it asks nothing."""
    requests: Stated
    tokens: Stated


def go_duration(text: str) -> float | None:
    """A Go duration (``1s``, ``6m0s``, ``12ms``, ``1h2m3.5s``, ``0``) in seconds; None if not one."""
    text = text.strip()
    if text in ("0", "+0", "-0"):
        return 0.0
    body = text.lstrip("+")
    if not body or body.startswith("-"):
        return None
    total, at = 0.0, 0
    while at < len(body):
        part = _GO_PART.match(body, at)
        if part is None:
            return None
        total += float(part.group(1)) * _GO_UNITS[part.group(2)]
        at = part.end()
    return total


def _instant_after(text: str, now: datetime) -> float | None:
    """Seconds from ``now`` to an RFC 3339 instant (0 if past)."""
    try:
        at = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    if at.tzinfo is None:
        return None
    return max((at - now).total_seconds(), 0.0)


def _count(text: str | None) -> int | None:
    if text is None or not _WHOLE.fullmatch(text.strip()):
        return None
    return int(text.strip())


def _wait(headers: Mapping[str, str], now: datetime) -> float | None:
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            value = float(ms)
        except ValueError:
            value = math.nan
        if math.isfinite(value):
            return value / 1000 if value > 0 else None
    text = headers.get("retry-after")
    if text is None:
        return None
    text = text.strip()
    if _WHOLE.fullmatch(text) or re.fullmatch(r"\d*\.\d+", text):
        seconds = float(text)
        return seconds if seconds > 0 else None
    try:
        at = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if at.tzinfo is None:
        at = at.replace(tzinfo=timezone.utc)
    seconds = (at - now).total_seconds()
    return seconds if seconds > 0 else None


def _stated(headers: Mapping[str, str], measure: str, now: datetime) -> Stated:
    openai = [headers.get(f"x-ratelimit-{field}-{measure}") for field in ("limit", "remaining", "reset")]
    if any(v is not None for v in openai):
        limit, remaining, reset = openai
        return Stated(_count(limit), _count(remaining), None if reset is None else go_duration(reset))
    names = [measure] if measure == "requests" else ["tokens", "input-tokens"]
    for name in names:
        anthropic = [headers.get(f"anthropic-ratelimit-{name}-{field}") for field in ("limit", "remaining", "reset")]
        if any(v is not None for v in anthropic):
            limit, remaining, reset = anthropic
            return Stated(_count(limit), _count(remaining), None if reset is None else _instant_after(reset, now))
    return Stated()


def read_answer(
    status: int | None,
    headers: Mapping[str, str] | Iterable[tuple[str, str]] = (),
    *,
    now: datetime | None = None,
) -> ProviderAnswer:
    """The provider's answer: ``status`` its HTTP status (None: no answer, as a timeout), the
    headers in any case (a mapping, a message, or pairs). ``now`` dates Anthropic's resets and
    an HTTP-date Retry-After (default: the clock)."""
    # A mapping, or a message with items() (urllib's, aiohttp's multidict): every (name, value).
    items = getattr(headers, "items", None)
    pairs: Iterable[tuple[str, str]] = items() if callable(items) else headers  # type: ignore[assignment]
    lower = {str(k).lower(): str(v) for k, v in pairs}
    now = now or datetime.now(timezone.utc)
    return ProviderAnswer(
        throttled=status in THROTTLED_STATUSES,
        retry_after=_wait(lower, now),
        requests=_stated(lower, "requests", now),
        tokens=_stated(lower, "tokens", now),
    )
