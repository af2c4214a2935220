"""What a permit held for a block is, the same on both clients: its terms, what it holds, how long
to wait before asking again, and what is logged. Acquiring, renewing and releasing are each
client's (a thread on one, a task on the other)."""

from __future__ import annotations

import logging
import time
from typing import Any

from .commands import Seconds
from .errors import PermitUnavailable
from .results import Acquisition

log = logging.getLogger("redis_ratelimit_client")


class PermitBase:
    def __init__(
        self, limiter: Any, key: str, limit: int, lease: Seconds, wait: bool, timeout: float | None, poll: float
    ) -> None:
        self.limiter, self.key, self.limit, self.lease = limiter, key, limit, lease
        self.wait, self.timeout, self.poll = wait, timeout, poll
        self.acquisition: Acquisition | None = None
        self.lost = False
        """True if the lease ended while the block ran and no permit could be taken again (the
        server out of reach for longer than the lease, say): others may then hold it."""

    @property
    def id(self) -> str | None:
        return self.acquisition.id if self.acquisition else None

    @property
    def held_id(self) -> str:
        """The id of the lease held (only once acquired)."""
        assert self.acquisition is not None and self.acquisition.id is not None
        return self.acquisition.id

    def deadline(self) -> float | None:
        return None if self.timeout is None else time.monotonic() + self.timeout

    def pause(self, denied: Acquisition, deadline: float | None) -> float:
        """How long to wait before asking again; PermitUnavailable when not waiting, or no longer."""
        left = None if deadline is None else deadline - time.monotonic()
        if not self.wait or (left is not None and left <= 0):
            raise PermitUnavailable(self.key, self.limit, denied.expires_after)
        return min(denied.expires_after, self.poll, *(() if left is None else (left,)))

    def held(self, got: Acquisition) -> tuple[str, float]:
        """Remembers what was acquired; answers its id and how often to renew it (a third of the lease)."""
        assert got.id is not None
        self.acquisition = got
        return got.id, got.expires_after / 3

    def taken_again(self, again: Acquisition) -> bool:
        """After a renewal found the lease over: whether the permit was taken again."""
        self.lost = not again.acquired
        if self.lost:
            log.warning("permit %s of %r lost: its lease ended and all permits are in use", self.id, self.key)
        return again.acquired

    def renewal_failed(self) -> None:
        # The next renewal tries again; the lease covers two more tries.
        log.warning("renewing permit %s of %r failed", self.id, self.key, exc_info=True)

    def release_failed(self) -> None:
        # Not raised over the block's own outcome: the lease ends by itself.
        log.warning("releasing permit %s of %r failed", self.id, self.key, exc_info=True)
