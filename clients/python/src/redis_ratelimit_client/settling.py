"""A reservation settled when a block ends, the same on both clients: what to send, and what is
logged. Sending it is each client's."""

from __future__ import annotations

import logging
from typing import Any

from . import commands
from .commands import Call
from .results import MultiReservation, Reservation, Settlement

log = logging.getLogger("redis_ratelimit_client")


class SettlingBase:
    def __init__(self, limiter: Any, reservation: Reservation | MultiReservation) -> None:
        self.limiter, self.reservation = limiter, reservation
        self.used: int | None = None
        """What the work cost, set in the block; the reservation is settled with it on exit. Left
        None, nothing is sent and the reservation keeps its estimate counted (the safe side)."""
        self.settlement: Settlement | tuple[Settlement, ...] | None = None
        """SETTLE's answer, once settled (one per token key for a ``reserve_all`` reservation)."""

    def to_send(self) -> Call[Any] | None:
        """The settle to send on exit: none for a denied reservation, or with ``used`` unset."""
        r = self.reservation
        if r.token is None or self.used is None:
            return None
        if isinstance(r, MultiReservation):
            return commands.settle(list(r.keys), r.token, self.used)
        return commands.settle(r.key, r.token, self.used)

    def failed(self) -> None:
        # Not raised over the block's own exception: the reservation keeps its estimate counted.
        r = self.reservation
        keys = r.keys if isinstance(r, MultiReservation) else r.key
        log.warning("settling the reservation of %r failed", keys, exc_info=True)
