"""Storages for ``limits`` (the engine of flask-limiter and slowapi) on the ratelimit commands.

Imported with the package, they register the URI schemes ``ratelimit+redis://``,
``ratelimit+rediss://``, ``ratelimit+valkey://``, ``ratelimit+valkeys://``,
``ratelimit+redis+cluster://``, ``ratelimit+valkey+cluster://`` and
``ratelimit+redis+sentinel://`` (and each with ``async+`` before it, for ``limits.aio``):

- the fixed window counts with RATELIMIT.HIT, so a counter always expires (limits' strategy
  decides, and counts denied hits too, as its contract says: HIT is asked with a limit no count
  reaches);
- the sliding-window counter decides with RATELIMIT.SLIDE (exact, in one key, windows aligned to
  the epoch on the server's clock);
- the moving window is limits' own implementation, on limits' own storage for the same URI
  (without ``ratelimit+``), made on first use.
"""

from __future__ import annotations

import importlib
import inspect
import time
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

import limits.aio.storage
import limits.storage
from limits.storage import storage_from_string

from ._backend import is_cluster
from .aio import AsyncRateLimiter
from .client import RateLimiter
from .errors import RateLimitError

try:
    from limits.storage.base import TimestampedSlidingWindow
except ImportError:  # limits < 5: its strategies do not ask

    class TimestampedSlidingWindow:  # type: ignore[no-redef]
        """Says the sliding windows are aligned to the epoch (limits 5)."""


try:
    from limits.aio.storage import SlidingWindowCounterSupport as AsyncSlidingWindowCounterSupport
    from limits.storage import SlidingWindowCounterSupport
except ImportError:  # limits 3: no sliding-window counter

    class SlidingWindowCounterSupport:  # type: ignore[no-redef]
        """limits 3 has no sliding-window counter."""

    class AsyncSlidingWindowCounterSupport:  # type: ignore[no-redef]
        """limits 3 has no sliding-window counter."""


SCHEMES = [
    "ratelimit+redis",
    "ratelimit+rediss",
    "ratelimit+valkey",
    "ratelimit+valkeys",
    "ratelimit+redis+cluster",
    "ratelimit+valkey+cluster",
    "ratelimit+redis+sentinel",
]
# HIT with a limit no counter reaches counts every hit (limits decides by itself); it stays below
# 2^53, where the Functions library computes exactly.
UNREACHABLE = 2**53 - 1
PREFIX = "LIMITS"
# What limits' own Redis storages take beside the client's options (limits.storage's RedisStorage,
# RedisClusterStorage, RedisSentinelStorage and limits.aio's), taken here with their meaning, so
# that storage options written for them work unchanged: the client library, a pool, Sentinel's.
IMPLEMENTATIONS = ("redispy", "valkey", "coredis")
LIMITS_OPTIONS = ("connection_pool", "service_name", "use_replicas", "sentinel_kwargs")


class _Layout:
    """The options, sorted: the storage's own, limits' (see LIMITS_OPTIONS), the client's (passed to
    redis-py or valkey-py); and where the storage keeps its counters, and how a sliding window's
    value reads as limits wants it (previous count and TTL, current count and TTL, in seconds)."""

    def __init__(self, uri: str, options: dict[str, Any], asyncio: bool) -> None:
        self.key_prefix = str(options.pop("key_prefix", PREFIX))
        self.load_library = bool(options.pop("load_library", True))
        implementation = options.pop("implementation", None)
        if implementation not in (None, *IMPLEMENTATIONS):
            raise RateLimitError(f"implementation must be one of {', '.join(IMPLEMENTATIONS)}, not {implementation!r}")
        self.limits_options = {name: options.pop(name) for name in LIMITS_OPTIONS if name in options}
        self.options = dict(options)
        self.uri, self.asyncio = uri, asyncio
        # limits' own choice: a valkey URI or "valkey" takes valkey-py. This storage drives no
        # coredis: "coredis" (limits.aio's default) takes redis-py, which speaks to the same server.
        self.package = "valkey" if "+valkey" in uri or implementation == "valkey" else "redis"
        self.own_uri = uri.replace("ratelimit+", "", 1)  # limits' own storage, for the moving window
        self.own_options: dict[str, Any] = {**self.options, **self.limits_options}
        own = limits.aio.storage.RedisStorage if asyncio else limits.storage.RedisStorage
        takes = inspect.signature(own.__init__).parameters
        if "key_prefix" in takes:  # limits 3 keeps its keys under LIMITS
            self.own_options["key_prefix"] = self.key_prefix
        if "implementation" in takes:
            self.own_options["implementation"] = "valkey" if self.package == "valkey" else "redispy"

    def connect(self) -> tuple[Any, Any]:
        """A redis-py or valkey-py client (asyncio or not) for one of SCHEMES, and the one to read
        from: a Sentinel's replicas with ``use_replicas`` (True by default, as limits'), else the
        same client."""
        parsed = urlparse(self.uri.removeprefix("async+"))
        _, flavour, *kind = parsed.scheme.split("+")
        tls = flavour in ("rediss", "valkeys")
        flat, cluster = ("Valkey", "ValkeyCluster") if self.package == "valkey" else ("Redis", "RedisCluster")
        root = f"{self.package}.asyncio" if self.asyncio else self.package
        lib: Any = importlib.import_module(root)
        locations = [
            (host or "localhost", int(port or 6379))
            for host, _, port in (loc.rpartition("@")[2].partition(":") for loc in parsed.netloc.split(","))
        ]
        auth = {"username": unquote(parsed.username or "") or None, "password": unquote(parsed.password or "") or None}
        query = {k: v[-1] for k, v in parse_qs(parsed.query).items()}
        options = self.options
        if kind == ["cluster"]:
            nodes: Any = importlib.import_module(f"{root}.cluster")
            startup = [nodes.ClusterNode(host, port) for host, port in locations]
            client = getattr(nodes, cluster)(startup_nodes=startup, ssl=tls, **auth, **options)
            return client, client
        if kind == ["sentinel"]:
            sentinels: Any = importlib.import_module(f"{root}.sentinel")
            service = parsed.path.strip("/") or self.limits_options.get("service_name") or query.get("service_name")
            if not service:
                raise RateLimitError("a sentinel URI names its service: ratelimit+redis+sentinel://host:port/service")
            # As limits': the URI's credentials for the Sentinels too, unless sentinel_kwargs says.
            given = {k: v for k, v in auth.items() if v is not None}
            sentinel_options = {**given, **(self.limits_options.get("sentinel_kwargs") or {})}
            sentinel = sentinels.Sentinel(locations, sentinel_kwargs=sentinel_options)
            primary = sentinel.master_for(service, **auth, **options)
            if not self.limits_options.get("use_replicas", True):
                return primary, primary
            return primary, sentinel.slave_for(service, **auth, **options)
        pool = self.limits_options.get("connection_pool")
        if pool is not None:
            client = getattr(lib, flat)(connection_pool=pool, **options)
        else:
            rest = self.uri.removeprefix("async+").split("://", 1)[1]
            client = getattr(lib, flat).from_url(f"{'rediss' if tls else 'redis'}://{rest}", **options)
        return client, client

    def fixed(self, key: str) -> str:
        return f"{self.key_prefix}:{key}"

    def sliding(self, key: str) -> str:
        return f"{self.key_prefix}:{key}/sliding"

    @staticmethod
    def sliding_window(value: bytes | str | None, server_time: Any) -> tuple[int, float, int, float]:
        """RATELIMIT.SLIDE's stored ``slide:<window_ms>:<start_ms>:<prev>:<curr>`` at the server's
        TIME; the estimate limits computes from it, ``prev * prev_ttl / window + curr``, is
        SLIDE's own."""
        seconds, micros = (int(x) for x in server_time)
        now_ms = seconds * 1000 + micros / 1000
        if value is None:
            return 0, 0.0, 0, 0.0
        text = value.decode() if isinstance(value, bytes) else value
        window_ms, start_ms, prev, curr = (int(x) for x in text.split(":")[1:])
        current = now_ms // window_ms * window_ms
        if start_ms < current:  # the stored window is now the previous one, or older
            prev, curr = (curr, 0) if start_ms == current - window_ms else (0, 0)
        elapsed = max(now_ms - current, 0)
        prev_ttl = (window_ms - elapsed) / 1000 if prev else 0.0
        return prev, prev_ttl, curr, (2 * window_ms - elapsed) / 1000


class RateLimitStorage(
    limits.storage.Storage,
    limits.storage.MovingWindowSupport,
    SlidingWindowCounterSupport,
    TimestampedSlidingWindow,
):
    """limits' storage on the ratelimit commands (module or library, as RateLimiter finds out).
    Options: ``key_prefix`` (default ``LIMITS``), ``load_library`` (default True); those of limits'
    own Redis storages, as they mean there (``wrap_exceptions``, ``implementation``,
    ``connection_pool``, ``service_name``, ``use_replicas``, ``sentinel_kwargs``); and the client's
    (passed to redis-py or valkey-py)."""

    STORAGE_SCHEME = SCHEMES

    def __init__(self, uri: str, wrap_exceptions: bool = False, **options: Any) -> None:
        super().__init__(uri, wrap_exceptions=wrap_exceptions)
        self.layout = _Layout(uri, options, asyncio=False)
        self.client, self.reader = self.layout.connect()
        self.limiter = RateLimiter(self.client, load_library=self.layout.load_library)
        self._moving: Any = None

    @property
    def base_exceptions(self) -> type[Exception] | tuple[type[Exception], ...]:
        return (self.limiter._errors.RedisError, RateLimitError)

    def incr(self, key: str, expiry: int, amount: int = 1, elastic_expiry: bool = False) -> int:
        if elastic_expiry:  # limits 3 and 4's elastic window: every hit restarts it, in one step
            pipe = self.client.pipeline(transaction=True)
            pipe.incrby(self.layout.fixed(key), amount).expire(self.layout.fixed(key), int(expiry))
            return int(pipe.execute()[0])
        return self.limiter.hit(self.layout.fixed(key), UNREACHABLE, expiry, cost=amount).count

    def get(self, key: str) -> int:
        return int(self.reader.get(self.layout.fixed(key)) or 0)

    def get_expiry(self, key: str) -> float:
        return max(int(self.reader.pttl(self.layout.fixed(key))), 0) / 1000 + time.time()

    def clear(self, key: str) -> None:
        # limits before 5.2 clears a sliding window by this too.
        self.client.delete(self.layout.fixed(key), self.layout.sliding(key))

    def check(self) -> bool:
        try:
            return bool(self.client.ping())
        except Exception:
            return False

    def reset(self) -> int | None:
        """Deletes every key under the prefix (a SCAN, in batches: the server is never blocked)."""
        deleted = 0
        batch: list[Any] = []
        for key in self.client.scan_iter(match=f"{self.layout.key_prefix}:*", count=1000):
            batch.append(key)
            if len(batch) == 500:
                deleted += self._unlink(batch)
                batch = []
        return deleted + self._unlink(batch)

    def _unlink(self, keys: list[Any]) -> int:
        pipe = self.client.pipeline(transaction=False)
        for key in keys:
            pipe.execute_command("UNLINK", key)  # a cluster pipeline's unlink() is a multi-key coroutine
        return sum(pipe.execute()) if keys else 0

    def acquire_sliding_window_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        return self.limiter.slide(self.layout.sliding(key), limit, expiry, cost=amount).allowed

    def get_sliding_window(self, key: str, expiry: int) -> tuple[int, float, int, float]:
        name = self.layout.sliding(key)
        if is_cluster(self.client):  # TIME from the key's node
            value = self.client.get(name)
            server_time = self.client.time(target_nodes=self.client.get_node_from_key(name))
        else:
            value, server_time = self.reader.pipeline(transaction=False).get(name).time().execute()
        return self.layout.sliding_window(value, server_time)

    def clear_sliding_window(self, key: str, expiry: int) -> None:
        self.client.delete(self.layout.sliding(key))

    def _own(self) -> Any:
        if self._moving is None:
            self._moving = storage_from_string(self.layout.own_uri, **self.layout.own_options)
        return self._moving

    def acquire_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        return bool(self._own().acquire_entry(key, limit, expiry, amount))

    def get_moving_window(self, key: str, limit: int, expiry: int) -> tuple[float, int]:
        return tuple(self._own().get_moving_window(key, limit, expiry))


class AsyncRateLimitStorage(
    limits.aio.storage.Storage,
    limits.aio.storage.MovingWindowSupport,
    AsyncSlidingWindowCounterSupport,
    TimestampedSlidingWindow,
):
    """RateLimitStorage for ``limits.aio`` (``async+ratelimit+redis://`` ...), on redis.asyncio or
    valkey.asyncio, with the same options."""

    STORAGE_SCHEME = [f"async+{scheme}" for scheme in SCHEMES]  # noqa: RUF012 (limits' own declaration)

    def __init__(self, uri: str, wrap_exceptions: bool = False, **options: Any) -> None:
        super().__init__(uri, wrap_exceptions=wrap_exceptions)
        self.layout = _Layout(uri, options, asyncio=True)
        self.client, self.reader = self.layout.connect()
        self.limiter = AsyncRateLimiter(self.client, load_library=self.layout.load_library)
        self._moving: Any = None

    @property
    def base_exceptions(self) -> type[Exception] | tuple[type[Exception], ...]:
        return (self.limiter._errors.RedisError, RateLimitError)

    async def incr(self, key: str, expiry: int, amount: int = 1, elastic_expiry: bool = False) -> int:
        if elastic_expiry:
            pipe = self.client.pipeline(transaction=True)
            pipe.incrby(self.layout.fixed(key), amount).expire(self.layout.fixed(key), int(expiry))
            return int((await pipe.execute())[0])
        return (await self.limiter.hit(self.layout.fixed(key), UNREACHABLE, expiry, cost=amount)).count

    async def get(self, key: str) -> int:
        return int(await self.reader.get(self.layout.fixed(key)) or 0)

    async def get_expiry(self, key: str) -> float:
        return max(int(await self.reader.pttl(self.layout.fixed(key))), 0) / 1000 + time.time()

    async def clear(self, key: str) -> None:
        # limits before 5.2 clears a sliding window by this too.
        await self.client.delete(self.layout.fixed(key), self.layout.sliding(key))

    async def check(self) -> bool:
        try:
            return bool(await self.client.ping())
        except Exception:
            return False

    async def reset(self) -> int | None:
        deleted = 0
        batch: list[Any] = []
        async for key in self.client.scan_iter(match=f"{self.layout.key_prefix}:*", count=1000):
            batch.append(key)
            if len(batch) == 500:
                deleted += await self._unlink(batch)
                batch = []
        return deleted + await self._unlink(batch)

    async def _unlink(self, keys: list[Any]) -> int:
        pipe = self.client.pipeline(transaction=False)
        for key in keys:
            pipe.execute_command("UNLINK", key)  # a cluster pipeline's unlink() is a multi-key coroutine
        return sum(await pipe.execute()) if keys else 0

    async def acquire_sliding_window_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        return (await self.limiter.slide(self.layout.sliding(key), limit, expiry, cost=amount)).allowed

    async def get_sliding_window(self, key: str, expiry: int) -> tuple[int, float, int, float]:
        name = self.layout.sliding(key)
        if is_cluster(self.client):
            value = await self.client.get(name)
            server_time = await self.client.time(target_nodes=self.client.get_node_from_key(name))
        else:
            value, server_time = await self.reader.pipeline(transaction=False).get(name).time().execute()
        return self.layout.sliding_window(value, server_time)

    async def clear_sliding_window(self, key: str, expiry: int) -> None:
        await self.client.delete(self.layout.sliding(key))

    def _own(self) -> Any:
        if self._moving is None:
            self._moving = storage_from_string(self.layout.own_uri, **self.layout.own_options)
        return self._moving

    async def acquire_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        return bool(await self._own().acquire_entry(key, limit, expiry, amount))

    async def get_moving_window(self, key: str, limit: int, expiry: int) -> tuple[float, int]:
        return tuple(await self._own().get_moving_window(key, limit, expiry))


__all__ = ["SCHEMES", "AsyncRateLimitStorage", "RateLimitStorage"]
