"""The adaptive limit in a deterministic simulation: a fleet of processes calling one provider
whose capacity changes, in simulated time. Ours runs the real client (AdaptiveLimit's decide and
report) against a real server with the module, its wall clock stood at the simulation's time;
the baselines (a static limit, each process backing off on its own, each process with its own
CUBIC as AWS's adaptive mode) run in the same simulation, on the same provider and demand.

    python adaptive_simulation.py        (needs REDIS_SERVER and RATELIMIT_MODULE, as the tests)

The provider is a token bucket: ``capacity`` calls a minute, refilled continuously, holding a
minute's worth (Azure's sub-minute window: ten seconds' worth). It answers OpenAI's headers
(``x-ratelimit-{limit,remaining,reset}-requests``, its stated limit the account's) or, loss only
as Gemini and Bedrock, none; a 429 when the bucket is empty; in an outage, 429 with a Retry-After
until it ends. 64 workers want to call it all the time (each call takes 200 to 800 ms), spread
over 1, 4, 16 or 64 processes."""

from __future__ import annotations

import bisect
import heapq
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import redis
from servers import Server

from redis_ratelimit_client import AdaptiveLimit, RateLimiter

START_MS = 1_800_000_000_000
MINUTE = 60_000
EPOCH = MINUTE // 6
CAPACITY = 120
"""The provider's starting capacity, calls a minute: ours starts there, as the static limit."""
WORKERS = 64
DURATION = 8 * MINUTE
CHANGE = 4 * MINUTE
OUTAGE = 30_000
FLEETS = (1, 4, 16, 64)


@dataclass(frozen=True)
class Scenario:
    name: str
    capacity: Callable[[int], float]
    """The provider's calls a minute at ms ``t`` since the start."""
    other: Callable[[int], float] = lambda t: 0.0
    """Calls a minute another consumer of the account takes first."""
    burst_minutes: float = 1.0
    """How much of a minute the provider's bucket holds (Azure: a sixth)."""
    outage: bool = False


def step(before: float, after: float) -> Callable[[int], float]:
    return lambda t: before if t < CHANGE else after


SCENARIOS = (
    Scenario("halved", step(CAPACITY, CAPACITY / 2)),
    Scenario("tripled", step(CAPACITY, CAPACITY * 3)),
    Scenario("outage", step(CAPACITY, CAPACITY), outage=True),
    Scenario("a third taken", step(CAPACITY, CAPACITY), other=step(0, CAPACITY / 3)),
    Scenario("sub-minute", step(CAPACITY, CAPACITY), burst_minutes=1 / 6),
)


def go_duration(ms: float) -> str:
    return f"{max(ms, 0) / 1000:.3f}s"


class Provider:
    def __init__(self, scenario: Scenario, headers: bool) -> None:
        self.scenario, self.headers = scenario, headers
        self.level = scenario.capacity(0) * scenario.burst_minutes
        self.at = 0

    def refill(self, t: int) -> None:
        s = self.scenario
        gained = (t - self.at) * (s.capacity(t) - s.other(t)) / MINUTE
        self.level = min(self.level + gained, s.capacity(t) * s.burst_minutes)
        self.at = t

    def answer(self, t: int) -> tuple[int, dict[str, str]]:
        self.refill(t)
        s = self.scenario
        if s.outage and CHANGE <= t < CHANGE + OUTAGE:
            return 429, {"retry-after": str(math.ceil((CHANGE + OUTAGE - t) / 1000))}
        status = 200 if self.level >= 1 else 429
        if status == 200:
            self.level -= 1
        if not self.headers:
            return status, {}
        full = s.capacity(t) * s.burst_minutes
        per_ms = max(s.capacity(t) - s.other(t), 1e-9) / MINUTE
        return status, {
            "x-ratelimit-limit-requests": str(round(s.capacity(t))),
            "x-ratelimit-remaining-requests": str(max(math.floor(self.level), 0)),
            "x-ratelimit-reset-requests": go_duration((full - self.level) / per_ms),
        }


@dataclass
class Tally:
    sent: list[int] = field(default_factory=list)
    """Each call's send time."""
    ok: list[tuple[int, int]] = field(default_factory=list)
    """Each call answered 200: its send time and process."""
    throttled: list[int] = field(default_factory=list)
    """Each call answered 429: its send time."""


# The strategies: how a process's worker decides to send, and hears the answer.


class Ours:
    """AdaptiveLimit, the real client, one per process, on the server at the simulation's time."""

    def __init__(self, server: Server, key: str, processes: int) -> None:
        assert server.clock is not None
        self.clock = server.clock
        self.client = redis.Redis(port=server.port)
        self.limits = [
            AdaptiveLimit(RateLimiter(self.client), key, floor=6, start=CAPACITY, ceiling=CAPACITY * 10)
            for _ in range(processes)
        ]

        self.denied: set[int] = set()
        """The workers a denial told to come back: they ask again for their turn."""
        self.decided: dict[int, int] = {}
        """When each worker's call in flight was admitted: its report says how long ago (AGE)."""
        self.worker = 0

    def wait(self, process: int, t: int) -> int:
        self.clock.stand(START_MS + t)
        d = self.limits[process].decide(turn=self.worker in self.denied)
        if d.allowed:
            self.denied.discard(self.worker)
            self.decided[self.worker] = t
            return 0
        self.denied.add(self.worker)
        return math.ceil((d.retry_after or 0) * 1000)

    def heard(self, process: int, t: int, status: int, headers: dict[str, str]) -> None:
        self.clock.stand(START_MS + t)
        now = datetime.fromtimestamp((START_MS + t) / 1000, timezone.utc)
        age = (t - self.decided.pop(self.worker)) / 1000
        self.limits[process].report(status, headers, now=now, age=age)


class Static:
    """A fleet-wide limit at the starting capacity, paced as ours (a sixth of a minute at once)."""

    def __init__(self) -> None:
        self.level, self.at = CAPACITY / 6, 0

    def wait(self, process: int, t: int) -> int:
        self.level = min(self.level + (t - self.at) * CAPACITY / MINUTE, CAPACITY / 6)
        self.at = t
        if self.level >= 1:
            self.level -= 1
            return 0
        return math.ceil((1 - self.level) * MINUTE / CAPACITY)

    def heard(self, process: int, t: int, status: int, headers: dict[str, str]) -> None:
        pass


class Backoff:
    """Each call retried as the SDKs do: the Retry-After when 0 < it <= 60 s, else 0.5 s doubling
    to 8 s with up to 25% jitter; no limit before the first 429."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.attempts: dict[int, int] = {}
        self.until: dict[int, int] = {}
        self.worker = 0

    def wait(self, process: int, t: int) -> int:
        return max(self.until.pop(self.worker, t) - t, 0)

    def heard(self, process: int, t: int, status: int, headers: dict[str, str]) -> None:
        if status == 200:
            self.attempts[self.worker] = 0
            return
        attempt = self.attempts.get(self.worker, 0)
        self.attempts[self.worker] = attempt + 1
        retry = float(headers.get("retry-after", "0"))
        jittered = min(8_000.0, 500.0 * 2**attempt) * (1 - 0.25 * self.rng.random())
        pause = retry * 1000 if 0 < retry <= 60 else jittered
        self.until[self.worker] = t + math.ceil(pause)


class AwsCubic:
    """AWS's adaptive retry mode (botocore's retries/throttling.py and adaptive.py), one per
    process: a token bucket at a CUBIC rate, cut to 0.7 of the measured rate on a throttle."""

    BETA, SCALE, SMOOTH, BUCKET_S, MIN_RATE = 0.7, 0.4, 0.8, 0.5, 0.5

    def __init__(self) -> None:
        self.enabled = False
        self.fill_rate = self.MIN_RATE
        self.tokens, self.stamp = 0.0, 0.0
        self.last_max_rate, self.last_throttle = 0.0, 0.0
        self.measured, self.count, self.bucket = 0.0, 0, 0.0

    @staticmethod
    def k(last_max_rate: float) -> float:
        return (last_max_rate * (1 - AwsCubic.BETA) / AwsCubic.SCALE) ** (1 / 3)

    def cubic(self, now_s: float) -> float:
        return self.SCALE * (now_s - self.last_throttle - self.k(self.last_max_rate)) ** 3 + self.last_max_rate

    def wait(self, t: int) -> int:
        if not self.enabled:
            return 0
        now = t / 1000
        capacity = max(self.fill_rate, 1.0)
        self.tokens = min(self.tokens + (now - self.stamp) * self.fill_rate, capacity)
        self.stamp = now
        if self.tokens >= 1:
            self.tokens -= 1
            return 0
        return math.ceil((1 - self.tokens) / self.fill_rate * 1000)

    def heard(self, t: int, throttled: bool) -> None:
        now = t / 1000
        bucket = math.floor(now * 2) / 2
        self.count += 1
        if bucket > self.bucket:
            rate = self.count / (bucket - self.bucket)
            self.measured = rate * self.SMOOTH + self.measured * (1 - self.SMOOTH)
            self.count, self.bucket = 0, bucket
        if throttled:
            rate = min(self.measured, self.fill_rate) if self.enabled else self.measured
            self.last_max_rate, self.last_throttle = rate, now
            new = rate * self.BETA
            self.enabled = True
        else:
            new = min(self.cubic(now), 2 * self.measured)
        self.tokens = min(self.tokens, max(new, 1.0))
        self.fill_rate = max(new, self.MIN_RATE)


class PerProcessCubic:
    def __init__(self, processes: int) -> None:
        self.rates = [AwsCubic() for _ in range(processes)]

    def wait(self, process: int, t: int) -> int:
        return self.rates[process].wait(t)

    def heard(self, process: int, t: int, status: int, headers: dict[str, str]) -> None:
        self.rates[process].heard(t, status == 429)


def simulate(scenario: Scenario, processes: int, strategy: Any, headers: bool, seed: int) -> Tally:
    rng = random.Random(seed)
    provider = Provider(scenario, headers)
    tally = Tally()
    # (time, order, worker, kind, status, headers): kind 0 is ready to call, 1 an answer.
    events: list[tuple[int, int, int, int, int, dict[str, str]]] = []
    order = 0
    for w in range(WORKERS):
        heapq.heappush(events, (rng.randrange(1_000), w, w, 0, 0, {}))
    order = WORKERS
    while events:
        t, _, worker, kind, status, answer = heapq.heappop(events)
        if t >= DURATION:
            break
        process = worker % processes
        if isinstance(strategy, (Backoff, Ours)):
            strategy.worker = worker
        if kind == 0:
            pause = strategy.wait(process, t)
            if pause > 0:
                # Waited out, with a little jitter so that the workers do not call in step.
                following, kind_next, status_next, sent = t + pause + rng.randrange(20), 0, 0, {}
            else:
                tally.sent.append(t)
                status_next, sent = provider.answer(t)
                if status_next == 200:
                    tally.ok.append((t, process))
                else:
                    tally.throttled.append(t)
                following, kind_next = t + rng.randrange(200, 800), 1
        else:
            strategy.heard(process, t, status, answer)
            following, kind_next, status_next, sent = t, 0, 0, {}
        order += 1
        heapq.heappush(events, (following, order, worker, kind_next, status_next, sent))
    return tally


@dataclass(frozen=True)
class Figures:
    throttled_share: float
    """Of the calls sent, those answered 429."""
    steady_throttled: float
    """The same in the steady minutes (those of ``steady_use``)."""
    steady_use: float
    """Calls answered 200 over the capacity, in the two minutes before the change and the last
    two (above 100%: drawing on what the provider's bucket had stored)."""
    epochs_under: int | None
    """Halved: epochs (10 s) after the change until one sends no more than the new capacity's."""
    to_90_s: float | None
    """Tripled: seconds after the change until an epoch's calls answered 200 reach 90% of the
    new capacity's."""
    jain: float
    """Jain's index of the calls answered 200 per process: 1 is even."""
    after_hold: float | None
    """Outage: calls sent in the minute after the hold ends, over the capacity."""


def available(scenario: Scenario, start: int, end: int) -> float:
    return sum(scenario.capacity(t) - scenario.other(t) for t in range(start, end, 1_000)) / 60


def count(times: list[int], start: int, end: int) -> int:
    return bisect.bisect_left(times, end) - bisect.bisect_left(times, start)


def figures(scenario: Scenario, processes: int, tally: Tally) -> Figures:
    ok = sorted(t for t, _ in tally.ok)
    sent = sorted(tally.sent)
    steady = [(CHANGE - 2 * MINUTE, CHANGE), (DURATION - 2 * MINUTE, DURATION)]
    use = sum(count(ok, a, b) for a, b in steady) / sum(available(scenario, a, b) for a, b in steady)
    throttled = sorted(tally.throttled)
    steady_sent = sum(count(sent, a, b) for a, b in steady)
    steady_throttled = sum(count(throttled, a, b) for a, b in steady) / max(steady_sent, 1)
    after = scenario.capacity(DURATION) / 6
    epochs = range((DURATION - CHANGE) // EPOCH)
    starts = [CHANGE + k * EPOCH for k in epochs]
    epochs_under = to_90 = after_hold = None
    if scenario.name == "halved":
        under = (k for k, a in zip(epochs, starts, strict=True) if count(sent, a, a + EPOCH) <= after)
        epochs_under = next(under, None)
    if scenario.name == "tripled":
        reached = (a + EPOCH for a in starts if count(ok, a, a + EPOCH) >= 0.9 * after)
        to_90 = next(((t - CHANGE) / 1000 for t in reached), None)
    if scenario.outage:
        after_hold = count(sent, CHANGE + OUTAGE, CHANGE + OUTAGE + MINUTE) / scenario.capacity(DURATION)
    per_process = [0] * processes
    for _, p in tally.ok:
        per_process[p] += 1
    total = sum(per_process)
    jain = total**2 / (processes * sum(x * x for x in per_process)) if total else 0.0
    share = len(throttled) / max(len(sent), 1)
    return Figures(share, steady_throttled, use, epochs_under, to_90, jain, after_hold)


STRATEGIES = ("ours", "ours, loss only", "static", "backoff", "per-process CUBIC")
LOSS_ONLY_FLEET = 16
"""Loss only (no headers), run with one fleet size: what the headers are worth, in a third of the time."""


def strategy_for(name: str, server: Server, key: str, processes: int, seed: int) -> Any:
    if name.startswith("ours"):
        return Ours(server, key, processes)
    if name == "static":
        return Static()
    if name == "backoff":
        return Backoff(random.Random(seed))
    return PerProcessCubic(processes)


def run_all(server: Server) -> dict[tuple[str, int, str], Figures]:
    results: dict[tuple[str, int, str], Figures] = {}
    for s_index, scenario in enumerate(SCENARIOS):
        for processes in FLEETS:
            seed = s_index * 100 + processes
            for name in STRATEGIES:
                if name == "ours, loss only" and processes != LOSS_ONLY_FLEET:
                    continue
                strategy = strategy_for(name, server, f"sim:{scenario.name}:{processes}:{name}", processes, seed)
                tally = simulate(scenario, processes, strategy, name != "ours, loss only", seed)
                results[(scenario.name, processes, name)] = figures(scenario, processes, tally)
    return results


def table(results: dict[tuple[str, int, str], Figures]) -> str:
    def cell(v: float | int | None, fmt: str) -> str:
        return "-" if v is None else format(v, fmt)

    lines = [
        "| scenario | processes | strategy | 429s | 429s steady | use | epochs under | s to 90% | Jain | after hold |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for (scenario, processes, name), f in results.items():
        lines.append(
            f"| {scenario} | {processes} | {name} | {f.throttled_share:.1%} | {f.steady_throttled:.1%} | "
            f"{f.steady_use:.0%} | {cell(f.epochs_under, 'd')} | {cell(f.to_90_s, '.0f')} | {f.jain:.2f} | "
            f"{cell(f.after_hold, '.2f')} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    made = Server(module=True, stood_clock=True)
    try:
        print(table(run_all(made)))
    finally:
        made.close()
