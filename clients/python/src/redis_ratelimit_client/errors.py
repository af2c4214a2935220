"""The package's exceptions. Every refusal of bad input and every error the server answers a
limiter command with is a RateLimitError, so one ``except`` covers both; connection errors stay the
client library's own (redis.ConnectionError, valkey.ConnectionError)."""

from __future__ import annotations

from typing import Any


class RateLimitError(Exception):
    """Bad input refused before a round trip (the message names the argument), or the server's own
    error for the command, word for word (``ERR limit must be an integer >= 1``). Nothing was written."""


class LibraryNotLoaded(RateLimitError):
    """The server has neither the module nor the Functions library, and loading it was not allowed."""


class NotReplicated(Exception):
    """A limiter waiting for replicas (``wait_for_replicas``) made its write on the primary, which
    answered ``answer``, but only ``acknowledged`` of the ``wanted`` replicas confirmed it within
    the timeout. The write stands on the primary; a failover before the replicas catch up would
    lose it, and the limit would admit that many calls again. Not a RateLimitError: something
    was written."""

    def __init__(self, answer: Any, acknowledged: int, wanted: int) -> None:
        super().__init__(f"{acknowledged} of {wanted} replicas acknowledged the write in time")
        self.answer = answer
        self.acknowledged = acknowledged
        self.wanted = wanted


class PermitUnavailable(Exception):
    """``permit()`` found every permit in use. ``retry_after`` is the seconds until the earliest lease
    in use ends, the soonest a permit frees itself (a holder that releases earlier frees one sooner)."""

    def __init__(self, key: str, limit: int, retry_after: float) -> None:
        super().__init__(f"all {limit} permits of {key!r} are in use; the earliest frees itself in {retry_after:.3f} s")
        self.key = key
        self.limit = limit
        self.retry_after = retry_after


class RateLimited(Exception):
    """An adaptive limit's wrapper waited ``max_wait`` seconds and the fleet's limit still had no
    room: ``retry_after`` is the seconds until it would have."""

    def __init__(self, key: str, retry_after: float) -> None:
        super().__init__(f"{key!r} has no room for {retry_after:.3f} s")
        self.key = key
        self.retry_after = retry_after
