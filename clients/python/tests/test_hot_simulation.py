"""A deterministic simulation of a fleet's hot limit, as the Go client's hot_sim_test.go: the
decisions of HotLimit (HotState's step and granted, as take runs them) for each of 1,000
processes, with their clocks and transport injected, against a model of the server's HIT PARTIAL
RESERVE on one key (a window started by its first grant, expiring at the first millisecond it
counts, reset as the module answers it). Each scenario checks every window: admissions at most
the limit, each inside the window that granted it; in steady windows with demand >= 1.2x the
limit, at least 99% of the limit admitted; with demand below 0.9x, at least 99.9% of requests
admitted."""

from __future__ import annotations

import bisect
import heapq
import math
import random
from dataclasses import dataclass, field

import pytest

from redis_ratelimit_client.hot_state import HotState
from redis_ratelimit_client.results import Decision, Reservation

CLIENTS = 1000
LIMIT = 20_000
WINDOW = 1.0
WINDOWS = 4


@dataclass
class Scenario:
    name: str
    demand: float  # per window, in limits
    rtt: float  # the most a round trip takes (uniform from 0)
    skew: float = 0.0  # each process's clock runs at 1 + a rate within +-skew
    kill: float = 0.0  # a tenth of the processes die then (0: none)
    pause: float = 0.0  # the server answers nothing for 100 ms from then (0: never)
    # the primary fails then and its replica, 1 ms behind, takes over (0: never); each grant is
    # answered once the replica has it (WAIT 1), so the grants the failure loses were never answered
    promote: float = 0.0


REPLICA_LAG = 0.001


@dataclass
class Grant:
    """A grant made at ``at``, for the promotion to take back if the replica lacked it."""

    at: float
    window: Window | None
    amount: int


@dataclass
class Window:
    start: float
    end: float
    admitted: int = 0
    requests: int = 0


@dataclass
class Waiting:
    tries: int = 0
    waited: bool = False


@dataclass
class Process:
    state: HotState
    rate: float
    offset: float
    dead: bool = False
    waiting: list[Waiting] = field(default_factory=list)

    def local(self, t: float) -> float:
        return self.offset + t * self.rate

    def true_at(self, local: float) -> float:
        return (local - self.offset) / self.rate


class Server:
    """The module's HIT key LIMIT window COST want PARTIAL RESERVE, at true time t."""

    def __init__(self) -> None:
        self.count = 0
        self.current: Window | None = None
        self.windows: list[Window] = []
        self.ends: list[float] = []

    def reserve(self, t: float, want: int) -> Reservation:
        if self.current is not None and t >= self.current.end:
            self.current, self.count = None, 0
        now_ms = math.floor(t * 1000) / 1000
        grant = min(want, max(0, LIMIT - self.count))
        if grant > 0 and self.current is None:
            self.current = Window(t, now_ms + WINDOW)
            self.windows.append(self.current)
            self.ends.append(self.current.end)
        reset = 0.0 if self.current is None else self.current.end - now_ms
        self.count += grant
        d = Decision(grant > 0, self.count, LIMIT - self.count, reset, None, LIMIT, WINDOW)
        return Reservation("hot", d, str(len(self.windows)), grant)

    def window_at(self, t: float) -> Window | None:
        i = bisect.bisect_right(self.ends, t)
        if i < len(self.windows) and self.windows[i].start <= t:
            return self.windows[i]
        return None


def simulate(sc: Scenario, seed: int) -> tuple[Server, int, int, int, int]:
    """The server's windows, the requests admitted, denied (those still waiting when the run ends
    are neither) and admitted outside any window, and the tokens a failover took back."""
    rng = random.Random(seed)
    server = Server()
    queue: list[tuple[float, int, str, int, object]] = []
    seq = 0

    def push(at: float, kind: str, client: int, payload: object = None) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(queue, (at, seq, kind, client, payload))

    per_client = sc.demand * LIMIT / CLIENTS / WINDOW
    processes = []
    for i in range(CLIENTS):
        rate = 1 + sc.skew * (2 * rng.random() - 1)
        p = Process(HotState(LIMIT, 0.01, 0.002, 0.0), rate, rng.random() * 3600)
        p.state = HotState(LIMIT, 0.01, 0.002, p.local(0))
        processes.append(p)
        push(rng.expovariate(per_client), "demand", i)
    admitted = denied = outside = 0
    server_free = 0.0
    killed = promoted = False
    grants: list[Grant] = []
    lost = 0

    def leg() -> float:
        return rng.random() * sc.rtt / 2

    def step(i: int, p: Process, t: float, w: Waiting) -> None:
        nonlocal admitted, denied, outside
        s = p.state.step(p.local(t), 1, w.tries, w.waited)
        w.waited = s.wait
        if s.send:
            push(t + leg(), "server", i, (s.send, p.local(t)))
        if s.admitted:
            admitted += 1
            window = server.window_at(t)
            if window is None:
                outside += 1
            else:
                window.admitted += 1
        elif s.denied:
            denied += 1
        elif s.wait:
            p.waiting.append(w)
        else:
            push(max(t + 1e-9, p.true_at(s.sleep_until)), "retry", i, w)

    end = WINDOWS * WINDOW
    while queue:
        t, _, kind, i, payload = heapq.heappop(queue)
        if t > end:
            break
        if sc.kill and t >= sc.kill and not killed:
            for _ in range(CLIENTS // 10):
                processes[rng.randrange(CLIENTS)].dead = True
            killed = True
        p = processes[i]
        if kind == "demand":
            if p.dead:
                continue
            window = server.window_at(t)
            if window is not None:
                window.requests += 1
            push(t + rng.expovariate(per_client), "demand", i)
            step(i, p, t, Waiting())
        elif kind == "retry":
            if not p.dead:
                assert isinstance(payload, Waiting)
                step(i, p, t, payload)
        elif kind == "server":
            assert isinstance(payload, tuple)
            want, sent = payload
            if sc.pause and sc.pause <= t < sc.pause + 0.1:
                t = sc.pause + 0.1
            t = max(t, server_free)
            server_free = t
            if sc.promote and t >= sc.promote and not promoted:
                # The replica has what the primary granted up to a lag before the failure.
                for g in grants:
                    if g.at > sc.promote - REPLICA_LAG and g.window is server.current:
                        server.count -= g.amount
                promoted = True
            r = server.reserve(t, want)
            made = Grant(t, server.current, r.amount)
            grants.append(made)
            push(t + leg() + (REPLICA_LAG if sc.promote else 0), "answer", i, (sent, r, made))
        elif kind == "answer":
            if p.dead:
                continue
            assert isinstance(payload, tuple)
            sent, grant, made = payload
            if sc.promote and sc.promote - REPLICA_LAG < made.at <= sc.promote:
                # The primary failed before the replica had it (and so before answering it): no
                # answer, the connection broke.
                lost += made.amount
                p.state.failed()
            else:
                p.state.granted(sent, p.local(t), grant)
            waiting, p.waiting = p.waiting, []
            for w in waiting:
                w.tries += 1
                step(i, p, t, w)
    return server, admitted, denied, outside, lost


SCENARIOS = [
    Scenario("half the limit", 0.5, 0.002),
    Scenario("0.85x, slow round trips, skewed clocks", 0.85, 0.005, skew=200e-6),
    Scenario("1.2x", 1.2, 0.002, skew=100e-6),
    Scenario("3x, slow round trips", 3, 0.005, skew=200e-6),
    Scenario("2x, a tenth killed mid-window", 2, 0.002, kill=1.5),
    Scenario("0.8x, the server paused 100 ms", 0.8, 0.002, pause=2.5),
    Scenario("1.5x, the server paused 100 ms", 1.5, 0.002, pause=2.5),
    Scenario("2x, a replica promoted (grants answered once replicated)", 2, 0.002, promote=2.2),
]


@pytest.mark.parametrize("sc", SCENARIOS, ids=[sc.name for sc in SCENARIOS])
def test_hot_limit_simulation(sc: Scenario) -> None:
    server, admitted, denied, outside, lost = simulate(sc, SCENARIOS.index(sc) + 1)
    if sc.promote:
        assert lost > 0, "the promotion took back no grant: the scenario tests nothing"
    assert outside == 0, f"{outside} admissions outside any window"
    checked = 0
    for n, w in enumerate(server.windows):
        assert w.admitted <= LIMIT, f"window {n}: {w.admitted} admitted, over the limit"
        disturbed = (
            (sc.kill and w.start <= sc.kill < w.end)
            or (sc.pause and w.start <= sc.pause + 0.1 and sc.pause < w.end)
            or (sc.promote and w.start <= sc.promote < w.end)
        )
        if n > 0 and w.end <= WINDOWS * WINDOW and not disturbed and sc.demand >= 1.2:
            checked += 1
            assert w.admitted >= 0.99 * LIMIT, f"window {n}: {w.admitted} admitted of {LIMIT}"
    if sc.demand >= 1.2:
        assert checked > 0, "no steady window to check"
    if sc.demand < 0.9:
        assert admitted >= 0.999 * (admitted + denied), f"{admitted} admitted, {denied} denied"
    over = max(w.admitted - LIMIT for w in server.windows)
    print(f"{sc.name}: {len(server.windows)} windows, worst over {over}; {admitted} admitted, {denied} denied")
    print(f"  {lost} tokens a failover took back")


def test_a_cold_start_asks_for_its_need() -> None:
    # One token a microsecond after the start is no rate (the Go load test's first run found a
    # process asking for 11,000 of 4,000).
    s = HotState(4000, 0.01, 0.003, 0.0)
    step = s.step(1e-6, 1, 0, False)
    assert (step.send, step.wait) == (1, True)
    s = HotState(4000, 0.01, 0.003, 0.0)
    s.taken = 1_000_000
    assert s.step(0.02, 1, 0, False).send == 500  # an eighth of the limit, in a window not seen yet


def test_a_take_outrun_by_others_waits_while_the_window_has_room() -> None:
    # Answer after answer, another take spends the tokens first (the Java load test on a busy
    # machine saw 2 of 1,219 denied at half the limit): only the server's "none left" denies it.
    def grant(amount: int, remaining: int) -> Reservation:
        return Reservation("k", Decision(amount > 0, 0, remaining, 1.0, None, 1000, 1.0), "t", amount)

    s = HotState(1000, 0.01, 0.003, 0.0)
    step = s.step(0.001, 1, 0, False)
    assert (step.send, step.wait) == (1, True)
    for tries in range(1, 11):
        s.granted(0.001, 0.001, grant(1, 500))
        assert s.step(0.001, 1, 0, False).admitted, "another take"
        step = s.step(0.001, 1, tries, True)
        assert (step.admitted, step.denied, step.wait) == (False, False, True), f"after {tries} answers"
    s.granted(0.001, 0.001, grant(1, 500))
    assert s.step(0.001, 1, 11, True).admitted, "an answer of its own"
    s.granted(0.001, 0.001, grant(0, 0))
    assert s.step(0.001, 1, 0, False).denied, "none left"
