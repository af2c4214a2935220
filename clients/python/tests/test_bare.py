"""Installed with one extra and without limits, the package imports and works all the same (run in
the ``bare`` environment of `make python-test`; skipped where limits is installed)."""

from __future__ import annotations

import importlib.util

import pytest
from servers import Server

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("limits") is not None, reason="limits is installed here: see the bare environment"
)


def test_imports_without_limits_or_valkey(server: Server, backend: str) -> None:
    assert importlib.util.find_spec("valkey") is None
    import redis_ratelimit_client
    from redis_ratelimit_client import RateLimiter

    assert not hasattr(redis_ratelimit_client, "storage")
    rl = RateLimiter(server.client())
    assert rl.hit("bare", 1, 60).allowed and rl.backend == backend
