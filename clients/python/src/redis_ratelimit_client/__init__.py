"""Atomic rate limiters for Redis and Valkey: the redis-ratelimit module's commands (or, where the
server cannot load modules, its Functions library, with the same answers) as a typed client.

    from redis_ratelimit_client import RateLimiter
    rl = RateLimiter(redis.Redis())
    d = rl.hit("user:1", limit=10, window=60)
    d.allowed, d.remaining, d.retry_after, d.headers()

Importing the package also registers its ``limits`` storages (``ratelimit+redis://`` and the
others) where ``limits`` is installed."""

from __future__ import annotations

import importlib.util

from .adaptive import AdaptiveLimit, AsyncAdaptiveLimit
from .aio import AsyncPermit, AsyncPipeline, AsyncRateLimiter, AsyncSettling
from .client import Permit, Pipeline, RateLimiter, Settling
from .commands import CalendarUnit, Call, Seconds
from .errors import LibraryNotLoaded, NotReplicated, PermitUnavailable, RateLimited, RateLimitError
from .hot import AsyncHotLimit, HotLimit, HotLimitClosed
from .provider_answers import ProviderAnswer, Stated, read_answer
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

__version__ = "1.0.0"

if importlib.util.find_spec("limits") is not None:
    from . import storage  # noqa: F401  (registers the URI schemes with limits)

__all__ = [
    "Acquisition",
    "AdaptiveLimit",
    "AsyncAdaptiveLimit",
    "AsyncHotLimit",
    "AsyncPermit",
    "AsyncPipeline",
    "AsyncRateLimiter",
    "AsyncSettling",
    "CalendarUnit",
    "Call",
    "Decision",
    "Grant",
    "HotLimit",
    "HotLimitClosed",
    "Learned",
    "LibraryNotLoaded",
    "MultiDecision",
    "MultiReservation",
    "NotReplicated",
    "Permit",
    "PermitUnavailable",
    "Pipeline",
    "ProviderAnswer",
    "RateLimitError",
    "RateLimited",
    "RateLimiter",
    "Reservation",
    "Seconds",
    "Settlement",
    "Settling",
    "Stated",
    "TopEntry",
    "read_answer",
]
