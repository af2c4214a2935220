"""LiteLLM: per deployment, a limit of requests and one of tokens that every proxy replica on the
same server learns from the provider's answers (RATELIMIT.ADAPT and RATELIMIT.REPORT; see
docs/adaptive.md). One line of the proxy's config.yaml turns it on::

    litellm_settings:
      callbacks: ["redis_ratelimit_client.litellm_adaptive.adaptive_limits"]

A deployment's configured ``rpm`` and ``tpm`` are its ceilings (a deployment without them is not
limited here): each limit starts there and learns down (and back up) from the provider's 429s,
503s, ``Retry-After`` and ``x-ratelimit-*`` / ``anthropic-ratelimit-*`` headers, never below a
twentieth of it. Once the Router has picked a deployment, the call is decided on its requests
(one) and then its tokens (the prompt as LiteLLM counts it, plus ``max_tokens``: reserved), paced;
a denied call is LiteLLM's rate-limit error (the Router then tries another deployment, or answers
429). After the call, its answer is reported: a success with the provider's headers, its tokens'
reservation settled with the usage; a failure with its status and headers, its tokens given back
(a timeout keeps them, and counts as a throttle with ``RATELIMIT_LITELLM_TIMEOUTS_THROTTLE``).

The server and the window are found as for ``litellm_callback`` (``RATELIMIT_REDIS_URL``,
``REDIS_URL`` or ``REDIS_HOST``/``REDIS_PORT``/``REDIS_PASSWORD``; a minute, or
``RATELIMIT_LITELLM_WINDOW`` seconds). Out of reach, calls go through, logged."""

from __future__ import annotations

import logging
import os
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import litellm
from litellm.integrations.custom_logger import CustomLogger

from .adaptive import AsyncAdaptiveLimit, Measure
from .aio import AsyncRateLimiter
from .errors import RateLimitError
from .litellm_callback import client_from_environment
from .litellm_policy import max_tokens, own_limits, prompt_tokens, total_tokens
from .results import Reservation

log = logging.getLogger("redis_ratelimit_client")

# The provider's headers as LiteLLM keeps them on a response, each name behind this prefix.
PROVIDER_HEADER = "llm_provider-"
# The most calls decided and not yet answered that are remembered.
MAX_PENDING = 100_000


def deployment_id(kwargs: Mapping[str, Any]) -> str | None:
    """The deployment the Router picked (its ``model_info.id``), as a call's kwargs carry it
    before the call and in its logging events after."""
    for holder in (kwargs, kwargs.get("litellm_params") or {}):
        for name in ("metadata", "litellm_metadata"):
            info = ((holder.get(name) or {}).get("model_info")) or {}
            if info.get("id"):
                return str(info["id"])
        info = holder.get("model_info") or {}
        if info.get("id"):
            return str(info["id"])
    return None


def provider_headers(response: Any) -> dict[str, str]:
    """The provider's own headers on a LiteLLM response or error."""
    found: dict[str, str] = {}
    hidden = getattr(response, "_hidden_params", None) or {}
    for name, value in (hidden.get("additional_headers") or {}).items():
        if str(name).startswith(PROVIDER_HEADER):
            found[str(name)[len(PROVIDER_HEADER) :]] = str(value)
    own = getattr(response, "litellm_response_headers", None)
    for source in (own, getattr(getattr(response, "response", None), "headers", None)):
        if source is not None:
            for name, value in source.items():
                found.setdefault(str(name).lower(), str(value))
    return found


class AdaptiveLimits(CustomLogger):
    """The callback. ``client``: a ``redis.asyncio`` client (default: from the environment).
    ``window``: seconds (default 60). ``floor_fraction``: the lowest each limit goes, as a part of
    its ceiling (default a twentieth). ``default_max_tokens``: a call without ``max_tokens`` may
    use this many (default 4096)."""

    def __init__(
        self,
        client: Any = None,
        *,
        window: float | None = None,
        floor_fraction: float = 1 / 20,
        default_max_tokens: int = 4096,
        timeouts_throttle: bool | None = None,
        prefix: str = "rl:llm:adaptive:",
    ) -> None:
        super().__init__()
        self._client = client
        self._limiter: AsyncRateLimiter | None = None
        self.window = window if window is not None else float(os.environ.get("RATELIMIT_LITELLM_WINDOW", "60"))
        self.floor_fraction = floor_fraction
        self.default_max_tokens = default_max_tokens
        env = os.environ.get("RATELIMIT_LITELLM_TIMEOUTS_THROTTLE", "false").lower() in ("1", "true", "yes")
        self.timeouts_throttle = env if timeouts_throttle is None else timeouts_throttle
        self.prefix = prefix
        # Each deployment's limits, as its ceilings were when first seen.
        self._limits: dict[tuple[str, str, int], AsyncAdaptiveLimit] = {}
        # When each call was decided (time.monotonic()), and on which limits, with its reservation
        # of tokens, until its answer is reported (the oldest dropped past MAX_PENDING: a call that
        # never ends holds nothing for ever; its reservation keeps its estimate, the safe side).
        self._pending: OrderedDict[str, tuple[float, list[tuple[AsyncAdaptiveLimit, Reservation | None]]]] = (
            OrderedDict()
        )

    @property
    def limiter(self) -> AsyncRateLimiter:
        if self._limiter is None:
            self._limiter = AsyncRateLimiter(self._client if self._client is not None else client_from_environment())
        return self._limiter

    def limits(self, deployment: str, params: Mapping[str, Any]) -> list[AsyncAdaptiveLimit]:
        """The deployment's limits: of requests (ceiling: its ``rpm``), then of tokens (``tpm``)."""
        found = []
        for counts, ceiling in sorted(own_limits(params)):
            made = self._limits.get((deployment, counts, ceiling))
            if made is None:
                floor = max(1, int(ceiling * self.floor_fraction))
                # One hash tag per deployment: its two limits in one slot of a cluster.
                key = f"{self.prefix}{{{deployment}}}:{counts}"
                measure: Measure = "requests" if counts == "requests" else "tokens"
                made = AsyncAdaptiveLimit(
                    self.limiter, key, floor=floor, start=ceiling, ceiling=ceiling, window=self.window, measure=measure
                )
                self._limits[(deployment, counts, ceiling)] = made
            found.append(made)
        return found

    async def async_pre_call_deployment_hook(self, kwargs: dict[str, Any], call_type: Any) -> dict[str, Any] | None:
        """The Router's hook, the deployment picked: the call decided on its adaptive limits."""
        deployment = deployment_id(kwargs)
        if deployment is None:
            return None
        estimate = prompt_tokens(kwargs) + max_tokens(kwargs, self.default_max_tokens)
        limits = self.limits(deployment, kwargs)
        decided: list[tuple[AsyncAdaptiveLimit, Reservation | None]] = []
        for limit in limits:
            try:
                # Tokens are an estimate until the answer: reserved, then settled with the usage.
                if limit.measure == "requests":
                    decision, reserved = await limit.decide(1), None
                else:
                    reserved = await limit.reserve(max(1, estimate))
                    decision = reserved.decision
            except RateLimitError:
                raise
            except Exception as e:
                log.warning("adaptive limits not applied: the server is out of reach (%s)", e)
                return None
            if not decision.allowed:
                wait = decision.retry_after or 0.0
                raise litellm.RateLimitError(
                    message=f"adaptive limit of {limit.measure} for deployment {deployment}: retry in {wait:.3f} s",
                    llm_provider="redis-ratelimit",
                    model=str(kwargs.get("model", "")),
                )
            decided.append((limit, reserved))
        if decided:
            self._pending[str(kwargs.get("litellm_call_id", ""))] = (time.monotonic(), decided)
            while len(self._pending) > MAX_PENDING:
                self._pending.popitem(last=False)
        return None

    async def report(
        self,
        kwargs: Mapping[str, Any],
        status: int | None,
        headers: Mapping[str, str],
        throttled: bool | None,
        used: int | None,
    ) -> None:
        """The answer of the call, to the limits it was decided on, its tokens' reservation
        settled with ``used`` (None: as estimated)."""
        decided_at, decided = self._pending.pop(str(kwargs.get("litellm_call_id", "")), (0.0, []))
        for limit, reserved in decided:
            try:
                await limit.report(status, headers, throttled=throttled, age=time.monotonic() - decided_at)
                if reserved is not None and reserved.token is not None:
                    await limit.settle(reserved, reserved.amount if used is None else used)
            except Exception:
                log.warning("reporting a LiteLLM call's answer failed", exc_info=True)

    async def async_log_success_event(
        self, kwargs: dict[str, Any], response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        used = total_tokens(kwargs, response_obj)
        await self.report(kwargs, 200, provider_headers(response_obj), None, used)

    async def async_log_failure_event(
        self, kwargs: dict[str, Any], response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        error = kwargs.get("exception")
        status = getattr(error, "status_code", None)
        if getattr(error, "llm_provider", None) == "redis-ratelimit":
            return  # a refusal of ours (this callback's or litellm_callback's): the provider never saw the call
        timed_out = isinstance(error, litellm.Timeout)
        throttled = True if timed_out and self.timeouts_throttle else None
        # An error the provider answered used no tokens: they go back. A call with no answer (a
        # timeout) may have been counted: its estimate stays.
        answered = status if isinstance(status, int) else None
        await self.report(kwargs, answered, provider_headers(error), throttled, None if answered is None else 0)


adaptive_limits = AdaptiveLimits()
"""The instance a config.yaml names: ``redis_ratelimit_client.litellm_adaptive.adaptive_limits``."""
