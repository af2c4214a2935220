"""A hot limit's decisions, with no I/O and no clock of its own: every instant is seconds on the
process's monotonic clock, given by the caller. ``HotLimit`` and ``AsyncHotLimit`` (hot.py) run
it, and tests/test_hot_simulation.py runs it against a model of the server."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .results import Reservation


@dataclass
class Block:
    """One grant: tokens left, usable before ``deadline``, and the reservation that settles what
    was not used."""

    left: int
    deadline: float
    grant: Reservation


@dataclass(frozen=True)
class Step:
    """What to do for a take: admit or deny it; send a request (for ``send`` tokens); wait for the
    answer in flight (``wait``), or until ``sleep_until``; then step again."""

    admitted: bool = False
    denied: bool = False
    send: int = 0
    wait: bool = False
    sleep_until: float = 0.0


class HotState:
    """A hot limit's decisions: the blocks held, the local demand, the deny until the window
    resets. The same rules as the Go client's hotState."""

    def __init__(self, limit: int, horizon: float, guard: float, now: float) -> None:
        self.limit, self.horizon, self.guard = limit, horizon, guard
        self.blocks: list[Block] = []
        self.asking = False
        self.waiting = 0
        self.denied_until = -math.inf
        self.paused_until = -math.inf
        self.taken, self.since, self.rate = 0, now, 0.0
        self.remaining, self.window_end = -1, -math.inf

    def held(self, now: float) -> int:
        return sum(b.left for b in self.blocks if now < b.deadline)

    def _drop(self, now: float) -> None:
        self.blocks = [b for b in self.blocks if b.left > 0 and now < b.deadline]

    def _take(self, now: float, n: int) -> bool:
        self._drop(now)
        if self.held(now) < n:
            return False
        for b in self.blocks:
            spent = min(n, b.left)
            b.left -= spent
            n -= spent
        self._drop(now)
        return True

    def denied(self, now: float) -> bool:
        return now < self.denied_until

    def _ask(self, now: float, need: int) -> int:
        """How many tokens to ask for now (0: no request): a horizon of demand (measured over a
        horizon at least: none before), at least ``need``, no more than the demand spends before
        the window ends nor an eighth of what the server had left (of the limit, in a window not
        seen yet); only with none in flight, no deny, and less than half a horizon (or ``need``)
        held."""
        if self.asking or self.denied(now) or now < self.paused_until:
            return 0
        held = self.held(now)
        elapsed = now - self.since
        if elapsed >= self.horizon:
            self.rate = self.taken / elapsed
            self.taken, self.since = 0, now
        want = math.ceil(self.rate * self.horizon)
        if held >= need and (held > want / 2 or want == 0):
            return 0
        left = self.limit
        if now < self.window_end:
            want = min(want, math.ceil(self.rate * (self.window_end - now)))
            left = self.remaining
        want = min(want, max(1, left // 8))
        self.asking = True
        return max(want, need - held, 1)

    def step(self, now: float, n: int, tries: int, waited: bool) -> Step:
        """A take of ``n`` at ``now``, its ``tries``th step (a step after an answer is a try;
        ``waited``: it was counted among those waiting). Denied only when the server said the
        window has none left: a take whose tokens others spent first waits for the next answer,
        however often (each grant spends the window, so the server says so within the limit's
        count of answers)."""
        if waited:
            self.waiting -= n
        if tries == 0:
            self.taken += n
        if self._take(now, n):
            return Step(admitted=True, send=self._ask(now, self.waiting))
        if self.denied(now):
            return Step(denied=True)
        want = self._ask(now, n + self.waiting)
        if want or self.asking:
            self.waiting += n
            return Step(send=want, wait=True)
        return Step(sleep_until=self.paused_until)

    def gave_up(self, n: int) -> None:
        """A take that stopped waiting (its timeout)."""
        self.waiting -= n

    def granted(self, sent: float, received: float, r: Reservation) -> None:
        """The answer to the request sent at ``sent``: a block usable until the window's end as the
        server saw it, less the guard, counted from the send. A grant of 0, or one that left none,
        makes the window denied until it resets; one too late to use waits for the next."""
        self.asking = False
        # The guard, and a thousandth of the time the window had left for the clocks' rates.
        guard = self.guard + r.decision.reset_after / 1000
        reset = received + r.decision.reset_after + guard
        deadline = sent + r.decision.reset_after - guard
        if r.amount > 0 and received < deadline:
            self.blocks.append(Block(r.amount, deadline, r))
            self.remaining, self.window_end = r.decision.remaining, deadline
        elif r.amount > 0:
            self.paused_until = reset
            return
        if r.amount == 0 or r.decision.remaining == 0:
            self.denied_until = reset

    def failed(self) -> None:
        self.asking = False

    def unused(self, now: float) -> list[Block]:
        """The live blocks, to settle at the end (what of each was used: amount - left)."""
        self._drop(now)
        live, self.blocks = self.blocks, []
        return live


__all__ = ["Block", "HotState", "Step"]
