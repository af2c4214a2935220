"""LiteLLM: a callback that holds the proxy's request and token limits exactly, across every proxy
replica sharing the server. Adding one line to the proxy's config.yaml is the whole switch::

    litellm_settings:
      callbacks: ["redis_ratelimit_client.litellm_callback.token_limits"]

The limits are those LiteLLM's users already write: a model group's ``tpm`` / ``rpm`` (the sum
of its deployments' in ``model_list``), and where the proxy has keys, a key's and its team's
``tpm_limit`` / ``rpm_limit``, a key's ``model_tpm_limit`` / ``model_rpm_limit``, and an end
user's (``tpd`` too); and budgets of tokens a calendar day or month, in a deployment's
``model_info`` (``tokens_per_day``, ``tokens_per_month``; in ``RATELIMIT_LITELLM_TZ``, UTC by
default). Before the call, one HITALL decides every limit that applies, all or nothing: the
requests count 1, the tokens the call's estimate (its prompt as LiteLLM counts it, plus its
``max_tokens``), reserved. After it, one SETTLE gives each token limit what was used (a stream's
usage when it ends, what was streamed when the client went away, 0 for a failed call). A denied
call gets HTTP 429 with ``Retry-After`` and the RateLimit fields (``RateLimit`` naming the limit
that refused it), and nothing is counted; a call whose estimate is above a whole window's limit
can never fit, and gets HTTP 400 without ``Retry-After``.

The server is found as LiteLLM finds its own Redis: ``REDIS_URL``, or ``REDIS_HOST``,
``REDIS_PORT``, ``REDIS_PASSWORD`` (``RATELIMIT_REDIS_URL`` takes precedence). The window is a
minute, ``RATELIMIT_LITELLM_WINDOW`` seconds if set. Out of reach, calls go through
(``RATELIMIT_LITELLM_FAIL_OPEN=false``: refused with 503), logged either way; there is no
per-process fallback."""

from __future__ import annotations

import logging
import math
import os
import time
from collections import OrderedDict
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass
from typing import Any

import litellm
import redis.asyncio
from litellm.integrations.custom_logger import CustomLogger

from .aio import AsyncRateLimiter
from .commands import CalendarUnit, Seconds
from .errors import RateLimitError
from .litellm_policy import (
    CHAT_CALLS,
    Limit,
    delta_text,
    given,
    max_tokens,
    model_limits,
    own_limits,
    prompt_tokens,
    scoped_limits,
    total_tokens,
)
from .results import MultiDecision, MultiReservation

log = logging.getLogger("redis_ratelimit_client")


@dataclass
class Held:
    """A call's reservation, until it is settled (once), or until its windows have ended."""

    reservation: MultiReservation
    prompt_tokens: int
    # time.monotonic() when the last of its windows ends: past it, a settle would give nothing back.
    until: float
    streamed_characters: int = 0


class TokenLimits(CustomLogger):
    """The callback. ``client``: a ``redis.asyncio`` client (default: from the environment, as
    LiteLLM finds its Redis). ``limits``: a model's own limits beside the config's, as
    ``{"gpt-4o": {"tpm": 100000, "rpm": 60}}``. ``window``: seconds (default 60).
    ``default_max_tokens``: a call without ``max_tokens`` may use this many (default 4096). All
    of a call's keys share one hash tag, ``{hash_tag}``, so that a cluster holds them in one slot.
    ``reservation_header``: send each admitted call's reservation to the model's provider in this
    header (the window each call counted in, and its estimate: an audit trail), off by default.
    ``max_open``: the most calls' reservations held until their calls end (default 100,000).

    A call's reservation is held from its admission to its end, and dropped unsettled (its
    estimate stays counted: the safe side) once its windows have ended, or when ``max_open`` are
    held (the oldest first): a call that never ends holds nothing for ever. ``open_reservations``
    and ``dropped_reservations`` say how many are held, and how many were dropped."""

    def __init__(
        self,
        client: Any = None,
        *,
        limits: Mapping[str, Mapping[str, int]] | None = None,
        window: float | None = None,
        default_max_tokens: int = 4096,
        fail_open: bool | None = None,
        prefix: str = "rl:llm:",
        hash_tag: str = "llm",
        reservation_header: str | None = None,
        tz: str | None = None,
        max_open: int = 100_000,
    ) -> None:
        super().__init__()
        self._client = client
        self._limiter: AsyncRateLimiter | None = None
        self.limits = dict(limits or {})
        self.window = window if window is not None else float(os.environ.get("RATELIMIT_LITELLM_WINDOW", "60"))
        self.default_max_tokens = default_max_tokens
        env_open = os.environ.get("RATELIMIT_LITELLM_FAIL_OPEN", "true").lower() not in ("0", "false", "no")
        self.fail_open = env_open if fail_open is None else fail_open
        self.prefix, self.hash_tag = prefix, hash_tag
        self.reservation_header = reservation_header or os.environ.get("RATELIMIT_LITELLM_RESERVATION_HEADER")
        self.tz = tz or os.environ.get("RATELIMIT_LITELLM_TZ") or None
        if max_open < 1:
            raise ValueError("max_open must be at least 1")
        self.max_open = max_open
        # In the order the calls were admitted: the oldest go first.
        self._held: OrderedDict[str, Held] = OrderedDict()
        self.dropped_reservations = 0

    @property
    def open_reservations(self) -> int:
        """The calls whose reservations are held, to be settled when they end."""
        return len(self._held)

    def _hold(self, call_id: str, held: Held) -> None:
        """Holds a call's reservation, after dropping those whose windows have ended (from the
        oldest, while they have) and the oldest past ``max_open``."""
        now = time.monotonic()
        while self._held:
            oldest = next(iter(self._held.values()))
            if oldest.until > now and len(self._held) < self.max_open:
                break
            self._held.popitem(last=False)
            self.dropped_reservations += 1
        self._held[call_id] = held

    @property
    def limiter(self) -> AsyncRateLimiter:
        if self._limiter is None:
            self._limiter = AsyncRateLimiter(self._client if self._client is not None else client_from_environment())
        return self._limiter

    # Before the call.

    async def async_pre_call_hook(
        self, user_api_key_dict: Any, cache: Any, data: dict[str, Any], call_type: Any
    ) -> dict[str, Any]:
        """The proxy's hook: the call decided on every limit that applies, before any model runs."""
        if str(call_type) not in CHAT_CALLS and getattr(call_type, "value", None) not in CHAT_CALLS:
            return data
        limits = [*self.model_limits(str(data.get("model", ""))), *scoped_limits(user_api_key_dict, data)]
        await self.reserve(str(data.get("litellm_call_id", "")), data, limits, proxied=True)
        return data

    async def async_pre_call_deployment_hook(self, kwargs: dict[str, Any], call_type: Any) -> dict[str, Any] | None:
        """The SDK's and the Router's hook (the proxy's calls pass here too, already decided): a
        deployment's own ``tpm`` / ``rpm``, and the ``limits`` given for its model."""
        call_id = str(kwargs.get("litellm_call_id", ""))
        if call_id in self._held or (kwargs.get("metadata") or {}).get("ratelimit_decided"):
            return None
        model = str(kwargs.get("model", ""))
        limits = [Limit(f"model:{model}", counts, n) for counts, n in own_limits(kwargs) + given(self.limits, model)]
        await self.reserve(call_id, kwargs, limits, proxied=False)
        return None

    async def reserve(self, call_id: str, data: dict[str, Any], limits: list[Limit], proxied: bool) -> None:
        """The call decided on `limits`: refused (the proxy's HTTP error, or LiteLLM's rate-limit
        error from the SDK), or let through and its reservation held until it is settled."""
        if not limits:
            return
        # The requests first, the tokens last: HITALL's TOKENS counts the last keys.
        limits.sort(key=lambda limit: limit.counts == "tokens")
        keys = [f"{self.prefix}{{{self.hash_tag}}}:{limit.name}" for limit in limits]
        pairs: list[tuple[int, Seconds | CalendarUnit]] = [
            (limit.limit, limit.calendar or self.window) for limit in limits
        ]
        token_keys = sum(limit.counts == "tokens" for limit in limits)
        prompt = prompt_tokens(data)
        estimate = prompt + max_tokens(data, self.default_max_tokens)
        try:
            tz = self.tz if any(limit.calendar for limit in limits) else None
            if token_keys:
                r = await self.limiter.reserve_all(keys, pairs, tokens=max(1, estimate), token_keys=token_keys, tz=tz)
                decision = r.decision
            else:
                decision, r = await self.limiter.hit_all(keys, pairs, tz=tz), None
        except RateLimitError:
            raise
        except Exception as e:
            if not self.fail_open:
                raise refusal(proxied, 503, "the rate limiter's server is out of reach", {}) from e
            log.warning("rate limits not applied: the server is out of reach (%s)", e)
            return
        if not decision.allowed:
            names = [limit.name for limit in limits]
            refused_by = [name for name, d in zip(names, decision.decisions, strict=True) if not d.allowed]
            if decision.retry_after is not None and math.isinf(decision.retry_after):
                # Above a whole window's limit: no wait helps, so the client's error, with no
                # Retry-After to invite a retry.
                message = (
                    f"the call can never fit {', '.join(refused_by)}: its {estimate} tokens (the prompt and"
                    " max_tokens) are above the limit of a whole window; ask for fewer max_tokens"
                )
                raise refusal(proxied, 400, message, decision.headers(names))
            headers = refusal_headers(decision, names)
            raise refusal(proxied, 429, f"rate limit exceeded: {', '.join(refused_by)}", headers)
        data.setdefault("metadata", {})["ratelimit_decided"] = True
        if r is not None and r.token is not None:
            windows = max(d.reset_after for d in r.decision.decisions[-token_keys:])
            self._hold(call_id, Held(r, prompt, until=time.monotonic() + windows))
            if self.reservation_header:
                # An audit trail at the provider: which window each call counted in, and how much.
                data["extra_headers"] = {**(data.get("extra_headers") or {}), self.reservation_header: r.token}

    # After it.

    async def async_log_success_event(
        self, kwargs: dict[str, Any], response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        held = self._held.pop(str(kwargs.get("litellm_call_id", "")), None)
        if held is not None:
            used = total_tokens(kwargs, response_obj)
            await self.settle(held, used if used is not None else held.reservation.amount)

    async def async_log_failure_event(
        self, kwargs: dict[str, Any], response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        held = self._held.pop(str(kwargs.get("litellm_call_id", "")), None)
        if held is not None:
            await self.settle(held, 0)

    async def async_post_call_streaming_iterator_hook(
        self, user_api_key_dict: Any, response: Any, request_data: dict[str, Any]
    ) -> AsyncGenerator[Any, None]:
        """A stream passed through, what it carries counted: a client that goes away before its
        end is settled with the prompt and what was streamed (an ended stream is settled with
        LiteLLM's usage, by the success event)."""
        call_id = str(request_data.get("litellm_call_id", ""))
        ended = False
        try:
            async for chunk in response:
                held = self._held.get(call_id)
                if held is not None:
                    held.streamed_characters += len(delta_text(chunk))
                yield chunk
            ended = True
        finally:
            held = None if ended else self._held.pop(call_id, None)
            if held is not None:
                await self.settle(held, held.prompt_tokens + math.ceil(held.streamed_characters / 4))

    def model_limits(self, model: str) -> list[Limit]:
        """The limits of ``model``'s group in the proxy's ``model_list`` (see ``litellm_policy.model_limits``)."""
        return model_limits(model, router_model_list(), self.limits)

    async def settle(self, held: Held, used: int) -> None:
        r = held.reservation
        try:
            await self.limiter.settle(list(r.keys), r.token or "", max(0, int(used)))
        except Exception:
            # The estimate stays counted: the safe side.
            log.warning("settling a LiteLLM call's tokens failed", exc_info=True)


def router_model_list() -> list[dict[str, Any]]:
    """The proxy's ``model_list``, as its router holds it (none outside the proxy)."""
    try:
        from litellm.proxy.proxy_server import llm_router
    except Exception:
        return []
    return list(getattr(llm_router, "model_list", None) or [])


def refusal_headers(decision: MultiDecision, names: list[str]) -> dict[str, str]:
    """The RateLimit fields, and ``Retry-After`` of at least a second (a window ending this very
    millisecond says 0, which would invite a client to ask again at once)."""
    headers = decision.headers(names)
    headers["Retry-After"] = str(max(1, int(headers.get("Retry-After", "1"))))
    return headers


def refusal(proxied: bool, status: int, message: str, headers: dict[str, str]) -> Exception:
    """The proxy's HTTP error (FastAPI's, which it answers as it is); from the SDK or a Router,
    LiteLLM's own errors, as a provider's 429 or 503 would be."""
    if proxied:
        from fastapi import HTTPException

        error: Exception = HTTPException(status_code=status, detail={"error": message}, headers=headers)
    elif status == 429:
        error = litellm.RateLimitError(message=message, llm_provider="redis-ratelimit", model="")
    elif status == 400:
        error = litellm.BadRequestError(message=message, llm_provider="redis-ratelimit", model="")
    else:
        error = litellm.ServiceUnavailableError(message=message, llm_provider="redis-ratelimit", model="")
    return error


def client_from_environment() -> Any:
    """A ``redis.asyncio`` client, found as LiteLLM finds its own Redis."""
    url = os.environ.get("RATELIMIT_REDIS_URL") or os.environ.get("REDIS_URL")
    if url:
        return redis.asyncio.Redis.from_url(url)
    return redis.asyncio.Redis(
        host=os.environ.get("REDIS_HOST", "localhost"),
        port=int(os.environ.get("REDIS_PORT", "6379")),
        password=os.environ.get("REDIS_PASSWORD") or None,
    )


token_limits = TokenLimits()
"""The instance a config.yaml names: ``redis_ratelimit_client.litellm_callback.token_limits``."""
