"""What the ASGI and WSGI middlewares limit: rules, each a limiter on the requests it matches,
counted per identity (a key function over the request), and the responses they give.

    rules = [
        Rule(FixedWindow(100, 60)),                                   # every request
        Rule(SlidingWindow(10, 1), path="/api/*", name="api"),        # a glob over the path
        Rule(Gcra(9, 10, 60), methods={"POST"}, name="writes"),
        Rule(AllOf(FixedWindow(10, 1), FixedWindow(1000, 3600)), name="burst-and-hour"),
        Rule(InFlight(3, lease=30), path="/reports/*", name="reports"),
    ]

A request goes through the rules that match it, in order; the first that denies answers 429 (the
rules before it have counted the request: use AllOf for several limits all or nothing)."""

from __future__ import annotations

import fnmatch
import logging
import math
import time
from collections.abc import Callable, Collection, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from . import commands
from ._backend import exceptions
from .commands import CalendarUnit, Call, Seconds
from .results import Acquisition, Decision, MultiDecision, combined_headers, whole_seconds

log = logging.getLogger("redis_ratelimit_client")


@dataclass(frozen=True)
class Request:
    """What a key function sees of a request, the same from ASGI and from WSGI."""

    method: str
    path: str
    headers: Mapping[str, str]
    """Lower-case names."""
    client: str | None
    """The peer's address."""
    user: str | None
    """The authenticated user: ASGI's ``scope["user"]`` (its ``identity``, else its text, when
    authenticated), WSGI's ``REMOTE_USER``."""


KeyFunction = Callable[[Request], str | None]
"""A request's identity; None leaves the request unlimited by that rule."""


def client_address(request: Request) -> str | None:
    """The peer's address (behind a proxy, use ``header("x-forwarded-for")`` from a trusted one)."""
    return request.client or "unknown"


def header(name: str, fallback: KeyFunction = client_address) -> KeyFunction:
    """The value of a request header (``X-Api-Key``, say), else ``fallback``'s identity."""
    lowered = name.lower()

    def key(request: Request) -> str | None:
        return request.headers.get(lowered) or fallback(request)

    return key


def user(request: Request) -> str | None:
    """The authenticated user, else the peer's address."""
    return request.user or client_address(request)


@dataclass(frozen=True)
class FixedWindow:
    """RATELIMIT.HIT: ``limit`` per window of ``window`` seconds (with ``align``, windows at
    multiples of it since the epoch), or per calendar "day", "week", "month" or "year" in ``tz``."""

    limit: int
    window: Seconds | CalendarUnit
    cost: int = 1
    align: bool = False
    tz: str | None = None

    def call(self, key: str) -> Call[Decision]:
        return commands.hit(key, self.limit, self.window, cost=self.cost, align=self.align, tz=self.tz)


@dataclass(frozen=True)
class SlidingWindow:
    """RATELIMIT.SLIDE: ``limit`` per sliding window of ``window`` seconds."""

    limit: int
    window: Seconds
    cost: int = 1

    def call(self, key: str) -> Call[Decision]:
        return commands.slide(key, self.limit, self.window, cost=self.cost)


@dataclass(frozen=True)
class Gcra:
    """RATELIMIT.GCRA: a burst of ``max_burst + 1``, then ``tokens_per_period`` per ``period``."""

    max_burst: int
    tokens_per_period: int
    period: Seconds
    tokens: int = 1

    def call(self, key: str) -> Call[Decision]:
        return commands.gcra(key, self.max_burst, self.tokens_per_period, self.period, tokens=self.tokens)


@dataclass(frozen=True, init=False)
class AllOf:
    """RATELIMIT.HITALL: several windows (all fixed, or all sliding), all or nothing."""

    limits: tuple[FixedWindow | SlidingWindow, ...]

    def __init__(self, *limits: FixedWindow | SlidingWindow) -> None:
        kinds = {type(limit) for limit in limits}
        if not limits or len(kinds) != 1 or not kinds <= {FixedWindow, SlidingWindow}:
            raise ValueError("AllOf takes one or more FixedWindow, or one or more SlidingWindow")
        if len({limit.cost for limit in limits}) != 1:
            raise ValueError("AllOf's limits share one cost")
        fixed = [limit for limit in limits if isinstance(limit, FixedWindow)]
        if len({limit.align for limit in fixed if not isinstance(limit.window, str)}) > 1:
            raise ValueError("AllOf's windows in seconds are all aligned or none")
        if len({limit.tz for limit in fixed if limit.tz is not None}) > 1:
            raise ValueError("AllOf's calendar windows share one time zone")
        object.__setattr__(self, "limits", limits)

    def call(self, key: str) -> Call[MultiDecision]:
        keys = [f"{key}:{i}" for i in range(len(self.limits))]
        fixed = [limit for limit in self.limits if isinstance(limit, FixedWindow)]
        return commands.hit_all(
            keys,
            [(limit.limit, limit.window) for limit in self.limits],
            cost=self.limits[0].cost,
            slide=isinstance(self.limits[0], SlidingWindow),
            align=any(limit.align for limit in fixed),
            tz=next((limit.tz for limit in fixed if limit.tz is not None), None),
        )


@dataclass(frozen=True)
class InFlight:
    """RATELIMIT.ACQUIRE / RENEW / RELEASE: at most ``limit`` requests in flight, each holding a
    permit (a lease of ``lease`` seconds, renewed while its response runs) until it is done."""

    limit: int
    lease: Seconds = 30


Limiter = FixedWindow | SlidingWindow | Gcra | AllOf | InFlight


@dataclass(frozen=True)
class Rule:
    """A limiter on the requests whose path matches ``path`` (a glob; None: all) and whose method is
    in ``methods`` (None: all), per identity (``key``, default the middleware's). ``name`` names the
    limit in the headers and in its Redis keys: ``<prefix>{<name>:<identity>}``."""

    limiter: Limiter
    path: str | None = None
    methods: Collection[str] | None = None
    key: KeyFunction | None = None
    name: str = "default"
    _methods: frozenset[str] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        methods = None if self.methods is None else frozenset(m.upper() for m in self.methods)
        object.__setattr__(self, "_methods", methods)
        # Checked now, so a bad rule fails at start-up, not on the first request.
        if isinstance(self.limiter, InFlight):
            commands.acquire("k", self.limiter.limit, self.limiter.lease)
        else:
            self.limiter.call("k")

    def matches(self, request: Request) -> bool:
        return (self._methods is None or request.method in self._methods) and (
            self.path is None or fnmatch.fnmatchcase(request.path, self.path)
        )


@dataclass(frozen=True)
class PermitRequest:
    """A step of ``decide``: hold a permit for the request's life (InFlight)."""

    key: str
    limit: int
    lease: Seconds


@dataclass
class Verdict:
    """What the rules decided for one request, and the headers its response carries."""

    named: list[tuple[str, Decision]] = field(default_factory=list)
    denied: bool = False
    retry_after: float | None = None

    def headers(self) -> list[tuple[str, str]]:
        headers = combined_headers(self.named) if self.named else {}
        retry = self.retry_after
        if self.denied and "Retry-After" not in headers and retry is not None and not math.isinf(retry):
            headers["Retry-After"] = str(whole_seconds(retry))
        return list(headers.items())


Step = Call[Any] | PermitRequest


def decide(rules: list[Rule], request: Request, default_key: KeyFunction, prefix: str) -> Generator[Step, Any, Verdict]:
    """The rules' decision for a request, as steps for a middleware to carry out: it sends back a
    Call's answer, and for a PermitRequest the Acquisition (held until the response is done)."""
    verdict = Verdict()
    for rule in rules:
        if not rule.matches(request):
            continue
        identity = (rule.key or default_key)(request)
        if identity is None:
            continue
        key = f"{prefix}{{{rule.name}:{identity}}}"
        if isinstance(rule.limiter, InFlight):
            held: Acquisition = yield PermitRequest(key, rule.limiter.limit, rule.limiter.lease)
            if not held.acquired:
                verdict.denied, verdict.retry_after = True, held.expires_after
                break
            continue
        answer: Decision | MultiDecision = yield rule.limiter.call(key)
        if isinstance(answer, MultiDecision):
            verdict.named += [(f"{rule.name}-{i}", d) for i, d in enumerate(answer.decisions)]
        else:
            verdict.named.append((rule.name, answer))
        if not answer.allowed:
            verdict.denied, verdict.retry_after = True, answer.retry_after
            break
    return verdict


TOO_MANY = b"Too Many Requests\n"
UNAVAILABLE = b"Service Unavailable: the rate limiter cannot be reached\n"


class Outage:
    """The limiter's server unreachable: requests skip it (admitted or refused at once, without
    waiting on the client's retries) until ``retry_interval`` seconds after the last failure, when
    one request tries it again. Logged when it starts and when it ends."""

    def __init__(self, fail_open: bool, retry_interval: float) -> None:
        self.fail_open = fail_open
        self.retry_interval = retry_interval
        self.down = False
        self._skip_until = 0.0

    def skipping(self) -> bool:
        return self.down and time.monotonic() < self._skip_until

    def failed(self, error: Exception) -> None:
        self._skip_until = time.monotonic() + self.retry_interval
        if not self.down:
            self.down = True
            action = "admitting" if self.fail_open else "refusing"
            log.warning("rate limiter unreachable (%s): %s requests until it answers", error, action)

    def retry_headers(self) -> list[tuple[str, str]]:
        return [("Retry-After", str(max(whole_seconds(self.retry_interval), 1)))]

    def answered(self) -> None:
        if self.down:
            self.down = False
            log.warning("rate limiter answers again")


App = TypeVar("App")
Limiter_ = TypeVar("Limiter_")


class Middleware(Generic[App, Limiter_]):
    """The middlewares' settings (see docs/clients/python.md): the rules; ``key``, the identity a
    rule counts by where it names none; keys under ``prefix``; when the server cannot be reached,
    requests admitted (``fail_open``) or refused with 503, and the server skipped for
    ``retry_interval`` seconds after a failure; ``load_library`` as for RateLimiter."""

    def __init__(
        self,
        app: App,
        client: Any,
        rules: Sequence[Rule],
        *,
        key: KeyFunction = client_address,
        prefix: str = "rl:",
        fail_open: bool = True,
        retry_interval: float = 1.0,
        load_library: bool = True,
    ) -> None:
        self.app = app
        self.limiter = self.limiter_for(client, load_library)
        self.rules = list(rules)
        self.key = key
        self.prefix = prefix
        self.outage = Outage(fail_open, retry_interval)
        self.unreachable = connection_errors(client)

    def limiter_for(self, client: Any, load_library: bool) -> Limiter_:
        raise NotImplementedError

    def steps(self, request: Request) -> Generator[Step, Any, Verdict]:
        return decide(self.rules, request, self.key, self.prefix)


def connection_errors(client: Any) -> tuple[type[Exception], ...]:
    """The client library's errors that mean the server could not be reached."""
    errors = exceptions(client)
    found = [errors.ConnectionError, errors.TimeoutError]
    if hasattr(errors, "ClusterDownError"):
        found.append(errors.ClusterDownError)
    return (*found, OSError)
