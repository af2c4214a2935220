"""A reservation settled when a block ends, the same on both clients: what to send, and what is
logged. Sending it is each client's."""

from __future__ import annotations

import logging
from typing import Any

from . import commands
from .commands import Call
from .results import Reservation, Settlement

log = logging.getLogger("redis_ratelimit_client")


class SettlingBase:
    def __init__(self, limiter: Any, reservation: Reservation) -> None:
        self.limiter, self.reservation = limiter, reservation
        self.used: int | None = None
        """What the work cost, set in the block; the reservation is settled with it on exit. Left
        None, nothing is sent and the reservation keeps its estimate counted (the safe side)."""
        self.settlement: Settlement | None = None
        """SETTLE's answer, once settled."""

    def to_send(self) -> Call[Settlement] | None:
        """The settle to send on exit: none for a denied reservation, or with ``used`` unset."""
        if self.reservation.token is None or self.used is None:
            return None
        return commands.settle(self.reservation.key, self.reservation.token, self.used)

    def failed(self) -> None:
        # Not raised over the block's own exception: the reservation keeps its estimate counted.
        log.warning("settling the reservation of %r failed", self.reservation.key, exc_info=True)
