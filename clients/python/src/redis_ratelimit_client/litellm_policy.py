"""The LiteLLM callback's policy, apart from its lifecycle (litellm_callback.py): which calls are
limited, the limits that apply to a call (a model group's, its deployments', a proxy key's, its
team's, its end user's, the calendar budgets), and what a call costs in tokens: its estimate
before it runs, its usage after."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import litellm

from .commands import CalendarUnit

CHAT_CALLS = ("completion", "acompletion", "text_completion", "atext_completion")

# A deployment's ``model_info`` budgets of tokens per calendar day and month (in ``tz``).
CALENDAR_BUDGETS: dict[str, CalendarUnit] = {"tokens_per_day": "day", "tokens_per_month": "month"}


@dataclass(frozen=True)
class Limit:
    """One limit a call is held to: whose (``scope``), what it counts, and how much a window (the
    callback's, or a calendar day or month)."""

    scope: str
    counts: str  # "requests" or "tokens"
    limit: int
    calendar: CalendarUnit | None = None

    @property
    def name(self) -> str:
        if self.calendar is not None:
            return f"{self.scope}:tokens-per-{self.calendar}"
        return f"{self.scope}:{'rpm' if self.counts == 'requests' else 'tpm'}"


def model_limits(model: str, deployments: list[dict[str, Any]], limits: Mapping[str, Mapping[str, int]]) -> list[Limit]:
    """A model group's ``tpm`` / ``rpm``: the sum of its ``deployments``' (the proxy's
    ``model_list``), and the ``limits`` given for it; and its budgets of tokens a day or a month
    (``model_info: {tokens_per_month: ...}``), the smallest its deployments give."""
    totals: dict[str, int] = {}
    budgets: dict[CalendarUnit, int] = {}
    for deployment in deployments:
        if deployment.get("model_name") != model:
            continue
        for counts, n in own_limits({**deployment.get("litellm_params", {}), **deployment}):
            totals[counts] = totals.get(counts, 0) + n
        for field, unit in CALENDAR_BUDGETS.items():
            budget = (deployment.get("model_info") or {}).get(field)
            if isinstance(budget, int) and budget > 0:
                budgets[unit] = min(budget, budgets.get(unit, budget))
    scope = f"model:{model}"
    windowed = [Limit(scope, counts, n) for counts, n in [*totals.items(), *given(limits, model)]]
    return windowed + [Limit(scope, "tokens", n, unit) for unit, n in budgets.items()]


def own_limits(params: Mapping[str, Any]) -> list[tuple[str, int]]:
    """A deployment's ``rpm`` and ``tpm``, where set."""
    found = [("requests", params.get("rpm")), ("tokens", params.get("tpm"))]
    return [(counts, int(n)) for counts, n in found if isinstance(n, int | float) and n > 0]


def given(limits: Mapping[str, Mapping[str, int]], model: str) -> list[tuple[str, int]]:
    return own_limits(limits.get(model, {}))


def scoped_limits(key: Any, data: Mapping[str, Any]) -> list[Limit]:
    """The proxy key's, its team's, its per-model and its end user's limits, where LiteLLM has them."""
    model = str(data.get("model", ""))
    found: list[Limit] = []

    def add(scope: str | None, counts: str, n: Any) -> None:
        if scope and isinstance(n, int) and n > 0:
            found.append(Limit(scope, counts, n))

    token, team, user = getattr(key, "token", None), getattr(key, "team_id", None), getattr(key, "end_user_id", None)
    add(f"key:{token}", "requests", getattr(key, "rpm_limit", None))
    add(f"key:{token}", "tokens", getattr(key, "tpm_limit", None))
    add(f"team:{team}" if team else None, "requests", getattr(key, "team_rpm_limit", None))
    add(f"team:{team}" if team else None, "tokens", getattr(key, "team_tpm_limit", None))
    per_model = getattr(key, "metadata", None) or {}
    add(f"key:{token}:model:{model}", "requests", (per_model.get("model_rpm_limit") or {}).get(model))
    add(f"key:{token}:model:{model}", "tokens", (per_model.get("model_tpm_limit") or {}).get(model))
    end_user = user or data.get("user")
    add(f"user:{end_user}" if end_user else None, "requests", getattr(key, "end_user_rpm_limit", None))
    add(f"user:{end_user}" if end_user else None, "tokens", getattr(key, "end_user_tpm_limit", None))
    tpd = getattr(key, "end_user_tpd_limit", None)
    if end_user and isinstance(tpd, int) and tpd > 0:
        found.append(Limit(f"user:{end_user}", "tokens", tpd, "day"))
    return found


def prompt_tokens(data: Mapping[str, Any]) -> int:
    """The prompt's tokens as LiteLLM counts them."""
    try:
        return int(litellm.token_counter(model=str(data.get("model", "")), messages=data.get("messages") or []))
    except Exception:
        return math.ceil(len(str(data.get("messages") or data.get("prompt") or "")) / 4)


def total_tokens(kwargs: Mapping[str, Any], response: Any) -> int | None:
    """The tokens LiteLLM reports the call used (a stream's, once it ended)."""
    logged = kwargs.get("standard_logging_object") or {}
    if isinstance(logged.get("total_tokens"), int):
        return int(logged["total_tokens"])
    usage = getattr(response, "usage", None)
    total = getattr(usage, "total_tokens", None)
    return total if isinstance(total, int) else None


def delta_text(chunk: Any) -> str:
    """The text a streamed chunk carries."""
    try:
        return str(chunk.choices[0].delta.content or "")
    except (AttributeError, IndexError, TypeError):
        return ""


def max_tokens(data: Mapping[str, Any], default: int) -> int:
    """What the call may use beyond its prompt: its ``max_tokens`` (or ``max_completion_tokens``),
    else ``default``."""
    return int(data.get("max_tokens") or data.get("max_completion_tokens") or default)
