"""The limits storages (``ratelimit+...://``) through limits' own strategies, sync and async,
with the module and with the library, on every kind of URI."""

from __future__ import annotations

import inspect
import time
from typing import Any

import limits
import limits.aio.strategies
import pytest
import redis
import redis.asyncio
import valkey
import valkey.asyncio
from limits import parse, strategies
from limits.storage import storage_from_string
from servers import Sentinel, Server

from redis_ratelimit_client import RateLimitError  # the package registers the schemes
from redis_ratelimit_client.storage import AsyncRateLimitStorage, RateLimitStorage

LIMITS_VERSION = tuple(int(x) for x in limits.__version__.split(".")[:2])
has_sliding = pytest.mark.skipif(
    not hasattr(strategies, "SlidingWindowCounterRateLimiter"), reason="limits < 4.1 has no sliding-window counter"
)


def keys_all_expire(server: Server, prefix: str = "LIMITS") -> None:
    client = server.client()
    names = list(client.scan_iter(f"{prefix}:*"))
    assert names, "the storage wrote no key"
    assert all(client.pttl(name) > 0 for name in names), "a key without TTL"


@pytest.mark.parametrize("scheme", ["ratelimit+redis", "ratelimit+valkey"])
def test_fixed_window_counts_as_limits_expects(server: Server, scheme: str) -> None:
    storage = storage_from_string(server.url(scheme))
    assert isinstance(storage, RateLimitStorage) and storage.check()
    limiter = strategies.FixedWindowRateLimiter(storage)
    item = parse("3/minute")
    assert [limiter.hit(item, "u") for _ in range(5)] == [True, True, True, False, False]
    assert not limiter.test(item, "u")
    # limits decides by itself, so the storage counts denied hits too (as limits' own does).
    assert storage.get(item.key_for("u")) == 5
    stats = limiter.get_window_stats(item, "u")
    assert stats.remaining == 0 and time.time() + 58 < stats.reset_time <= time.time() + 60.1
    keys_all_expire(server)
    limiter.clear(item, "u")
    assert limiter.test(item, "u") and limiter.get_window_stats(item, "u").remaining == 3
    assert limiter.hit(item, "u", cost=3) and not limiter.hit(item, "u")


def test_fixed_window_runs_on_ratelimit_hit(server: Server, backend: str) -> None:
    storage = storage_from_string(server.url("ratelimit+redis"))
    assert strategies.FixedWindowRateLimiter(storage).hit(parse("1/second"), "x")
    assert storage.limiter.backend == backend
    client = server.client()
    command = "cmdstat_ratelimit.hit" if backend == "module" else "cmdstat_fcall"
    assert command in client.info("commandstats")


@has_sliding
def test_sliding_window_counter_decides_with_slide(server: Server) -> None:
    storage = storage_from_string(server.url("ratelimit+redis"))
    limiter = strategies.SlidingWindowCounterRateLimiter(storage)
    item = parse("4/minute")
    assert [limiter.hit(item, "s") for _ in range(5)] == [True] * 4 + [False]
    assert not limiter.test(item, "s")
    previous, previous_ttl, current, current_ttl = storage.get_sliding_window(item.key_for("s"), 60)
    assert (previous, previous_ttl, current) == (0, 0.0, 4) and 60 <= current_ttl <= 120
    stats = limiter.get_window_stats(item, "s")
    assert stats.remaining == 0 and time.time() < stats.reset_time <= time.time() + 60.1
    value = server.client().get(f"LIMITS:{item.key_for('s')}/sliding")
    assert value is not None and value.startswith(b"slide:60000:")
    keys_all_expire(server)
    limiter.clear(item, "s")
    assert limiter.get_window_stats(item, "s").remaining == 4


@has_sliding
def test_sliding_window_reads_the_previous_window_as_limits_weights_it(server: Server) -> None:
    storage = storage_from_string(server.url("ratelimit+redis"))
    client = server.client()
    seconds, micros = client.time()
    now_ms = seconds * 1000 + micros // 1000
    start = now_ms // 60_000 * 60_000
    client.set("LIMITS:w/sliding", f"slide:60000:{start - 60_000}:0:30", px=120_000)
    previous, previous_ttl, current, current_ttl = storage.get_sliding_window("w", 60)
    elapsed = (now_ms - start) / 1000
    assert (previous, current) == (30, 0)
    assert previous_ttl == pytest.approx(60 - elapsed, abs=0.5)
    assert current_ttl == pytest.approx(120 - elapsed, abs=0.5)


def test_moving_window_is_limits_own(server: Server) -> None:
    storage = storage_from_string(server.url("ratelimit+redis"))
    limiter = strategies.MovingWindowRateLimiter(storage)
    item = parse("2/minute")
    assert [limiter.hit(item, "m") for _ in range(3)] == [True, True, False]
    assert limiter.get_window_stats(item, "m").remaining == 0
    assert server.client().type(f"LIMITS:{item.key_for('m')}") == b"list"  # limits' own log


def test_reset_deletes_only_the_storages_keys(server: Server) -> None:
    storage = storage_from_string(server.url("ratelimit+redis"))
    strategies.FixedWindowRateLimiter(storage).hit(parse("1/minute"), "r")
    server.client().set("other", 1)
    assert storage.reset() == 1
    assert server.client().keys("*") == [b"other"]


def test_key_prefix_option(server: Server) -> None:
    storage = storage_from_string(server.url("ratelimit+redis"), key_prefix="app1")
    strategies.FixedWindowRateLimiter(storage).hit(parse("1/minute"), "p")
    assert [k.decode() for k in server.client().keys("*")] == [f"app1:{parse('1/minute').key_for('p')}"]


def test_cluster_uri(cluster: Server) -> None:
    storage = storage_from_string(f"ratelimit+redis+cluster://127.0.0.1:{cluster.port}")
    item = parse("2/minute")
    limiter = strategies.FixedWindowRateLimiter(storage)
    assert [limiter.hit(item, "c") for _ in range(3)] == [True, True, False]
    assert isinstance(storage.client, redis.RedisCluster) and storage.reset() == 1
    if hasattr(strategies, "SlidingWindowCounterRateLimiter"):
        sliding = strategies.SlidingWindowCounterRateLimiter(storage)
        for attempt in range(3):
            # A minute's end between the hits and the stats makes the hits the previous window's,
            # weighed less (seen once on a busy machine): then again, on a new key.
            minute = time.time() // 60
            hits = [sliding.hit(item, f"s{attempt}") for _ in range(3)]
            stats = sliding.get_window_stats(item, f"s{attempt}")
            if time.time() // 60 == minute:
                break
        assert (hits, stats.remaining) == ([True, True, False], 0)


def test_sentinel_uri(sentinel: Sentinel, server: Server) -> None:
    storage = storage_from_string(f"ratelimit+redis+sentinel://127.0.0.1:{sentinel.port}/mymaster")
    limiter = strategies.FixedWindowRateLimiter(storage)
    assert [limiter.hit(parse("1/minute"), "s") for _ in range(2)] == [True, False]
    assert server.client().keys("LIMITS:*")


def test_unreachable_server_raises_the_clients_error_or_limits_one(servers: dict[str, Server]) -> None:
    from limits.errors import StorageError

    storage = storage_from_string("ratelimit+redis://127.0.0.1:1", socket_connect_timeout=0.2)
    assert not storage.check()
    with pytest.raises(redis.ConnectionError):
        strategies.FixedWindowRateLimiter(storage).hit(parse("1/minute"), "x")
    wrapped = storage_from_string("ratelimit+redis://127.0.0.1:1", wrap_exceptions=True, socket_connect_timeout=0.2)
    with pytest.raises(StorageError):
        strategies.FixedWindowRateLimiter(wrapped).hit(parse("1/minute"), "x")


@pytest.mark.skipif(LIMITS_VERSION >= (5, 0), reason="limits 5 has no elastic expiry")
def test_elastic_expiry_restarts_the_window(server: Server) -> None:
    storage = storage_from_string(server.url("ratelimit+redis"))
    limiter = strategies.FixedWindowElasticExpiryRateLimiter(storage)  # type: ignore[attr-defined]
    item = parse("2/second")
    assert limiter.hit(item, "e")
    time.sleep(0.6)
    assert limiter.hit(item, "e") and not limiter.hit(item, "e")
    time.sleep(0.6)  # 1.2 s after the first hit, still within a second of the last one
    assert not limiter.hit(item, "e")
    keys_all_expire(server)


async def test_async_storage_every_strategy(server: Server, backend: str) -> None:
    storage = storage_from_string(server.url("async+ratelimit+redis"))
    assert isinstance(storage, AsyncRateLimitStorage) and await storage.check()
    item = parse("2/minute")
    fixed = limits.aio.strategies.FixedWindowRateLimiter(storage)
    assert [await fixed.hit(item, "a") for _ in range(3)] == [True, True, False]
    assert (await fixed.get_window_stats(item, "a")).remaining == 0
    assert storage.limiter.backend == backend
    if hasattr(limits.aio.strategies, "SlidingWindowCounterRateLimiter"):
        sliding = limits.aio.strategies.SlidingWindowCounterRateLimiter(storage)
        assert [await sliding.hit(item, "b") for _ in range(3)] == [True, True, False]
        assert (await sliding.get_window_stats(item, "b")).remaining == 0
        await sliding.clear(item, "b")
        assert await sliding.test(item, "b")
    keys_all_expire(server)
    assert await storage.reset() >= 1
    await storage.client.aclose()


async def test_async_cluster_uri(cluster: Server) -> None:
    storage = storage_from_string(f"async+ratelimit+redis+cluster://127.0.0.1:{cluster.port}")
    fixed = limits.aio.strategies.FixedWindowRateLimiter(storage)
    assert [await fixed.hit(parse("1/minute"), "c") for _ in range(2)] == [True, False]
    assert await storage.reset() == 1
    await storage.client.aclose()


def limits_options(storage: type) -> dict[str, Any]:
    """Options as written for limits' own Redis storage: its own (key_prefix where this limits has
    it), and the client's."""
    options: dict[str, Any] = {"wrap_exceptions": True, "socket_timeout": 5.0}
    if "key_prefix" in inspect.signature(storage.__init__).parameters:
        options["key_prefix"] = "opts"
    return options


AIO_TAKES_IMPLEMENTATION = "implementation" in inspect.signature(limits.aio.storage.RedisStorage.__init__).parameters


def test_limits_own_options_work_unchanged(server: Server) -> None:
    options = limits_options(limits.storage.RedisStorage)
    prefix = options.get("key_prefix", "LIMITS")
    assert storage_from_string(server.url("redis"), **options).check()  # limits' own storage takes them
    storage = storage_from_string(server.url("ratelimit+redis"), **options)
    assert isinstance(storage, RateLimitStorage) and storage.wrap_exceptions
    item = parse("2/minute")
    fixed, moving = strategies.FixedWindowRateLimiter(storage), strategies.MovingWindowRateLimiter(storage)
    assert [fixed.hit(item, "f") for _ in range(3)] == [True, True, False]
    assert [moving.hit(item, "m") for _ in range(3)] == [True, True, False]
    # Every key under the prefix, the moving window's (limits' own) too; reset finds them all.
    names = sorted(k.decode() for k in server.client().keys("*"))
    assert names == [f"{prefix}:{item.key_for('f')}", f"{prefix}:{item.key_for('m')}"]
    keys_all_expire(server, prefix)
    assert storage.reset() == 2


def test_connection_pool_option(server: Server) -> None:
    pool = redis.ConnectionPool(port=server.port)
    storage = storage_from_string("ratelimit+redis://ignored:1", connection_pool=pool)
    assert storage.client.connection_pool is pool
    assert [strategies.FixedWindowRateLimiter(storage).hit(parse("1/minute"), "p") for _ in range(2)] == [True, False]
    pool.disconnect()


@pytest.mark.parametrize("implementation", ["redispy", "valkey", "coredis"])
async def test_limits_aio_options_work_unchanged(server: Server, implementation: str) -> None:
    if not AIO_TAKES_IMPLEMENTATION:
        pytest.skip("limits.aio before 4.2 takes no implementation")
    options = {**limits_options(limits.aio.storage.RedisStorage), "implementation": implementation}
    prefix = options.get("key_prefix", "LIMITS")
    if implementation != "coredis":  # limits' own storage takes them (coredis is not installed here)
        assert await storage_from_string(server.url("async+redis"), **options).check()
    storage = storage_from_string(server.url("async+ratelimit+redis"), **options)
    # valkey-py for "valkey", redis-py for the others: this storage drives no coredis.
    expected = valkey.asyncio.Valkey if implementation == "valkey" else redis.asyncio.Redis
    assert isinstance(storage.client, expected) and storage.wrap_exceptions
    item = parse("2/minute")
    fixed = limits.aio.strategies.FixedWindowRateLimiter(storage)
    moving = limits.aio.strategies.MovingWindowRateLimiter(storage)
    assert [await fixed.hit(item, "f") for _ in range(3)] == [True, True, False]
    assert [await moving.hit(item, "m") for _ in range(3)] == [True, True, False]
    if hasattr(limits.aio.strategies, "SlidingWindowCounterRateLimiter"):
        sliding = limits.aio.strategies.SlidingWindowCounterRateLimiter(storage)
        assert [await sliding.hit(item, "s") for _ in range(3)] == [True, True, False]
    keys_all_expire(server, prefix)
    assert len(server.client().keys("*")) == len(server.client().keys(f"{prefix}:*")) >= 2
    await storage.client.aclose()


def test_an_unknown_implementation_is_refused(server: Server) -> None:
    with pytest.raises(RateLimitError, match="implementation must be one of redispy, valkey, coredis"):
        storage_from_string(server.url("async+ratelimit+redis"), implementation="hiredis")


async def test_async_unreachable_server_raises_limits_error_when_wrapped(servers: dict[str, Server]) -> None:
    from limits.errors import StorageError

    uri = "async+ratelimit+redis://127.0.0.1:1"
    storage = storage_from_string(uri, socket_connect_timeout=0.2)
    with pytest.raises(redis.ConnectionError):
        await limits.aio.strategies.FixedWindowRateLimiter(storage).hit(parse("1/minute"), "x")
    wrapped = storage_from_string(uri, wrap_exceptions=True, socket_connect_timeout=0.2)
    with pytest.raises(StorageError):
        await limits.aio.strategies.FixedWindowRateLimiter(wrapped).hit(parse("1/minute"), "x")


def test_sentinel_options(sentinel: Sentinel, server: Server) -> None:
    # service_name beside a URI without one; sentinel_kwargs for the Sentinels; reads from replicas
    # (use_replicas, True by default as in limits: with none, redis-py reads from the primary).
    uri = f"ratelimit+redis+sentinel://127.0.0.1:{sentinel.port}"
    options = {"service_name": "mymaster", "sentinel_kwargs": {"socket_timeout": 5.0}}
    for use_replicas in (True, False):
        storage = storage_from_string(uri, use_replicas=use_replicas, **options)
        assert (storage.reader is storage.client) is not use_replicas
        item = parse("1/minute")
        assert [strategies.FixedWindowRateLimiter(storage).hit(item, "s") for _ in range(2)] == [True, False]
        assert storage.get(item.key_for("s")) == 2
        storage.reset()
