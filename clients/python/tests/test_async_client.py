"""AsyncRateLimiter against real servers: the same answers as RateLimiter, on redis.asyncio and
valkey.asyncio, with the module and with the library."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator

import pytest
import redis.asyncio
import valkey.asyncio
from servers import Server

from redis_ratelimit_client import AsyncRateLimiter, PermitUnavailable, RateLimiter, RateLimitError


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
async def arl(server: Server, request: pytest.FixtureRequest) -> AsyncIterator[AsyncRateLimiter]:
    client = redis.asyncio.Redis(port=server.port, protocol=request.param)
    yield AsyncRateLimiter(client)
    await client.aclose()


async def test_every_command(arl: AsyncRateLimiter, backend: str) -> None:
    assert arl.backend is None and await arl.detect() == backend and arl.backend == backend
    assert [(await arl.hit("h", 1, 60)).allowed for _ in range(2)] == [True, False]
    assert (await arl.peek("h", 1)).count == 1
    assert (await arl.slide("s", 1, 60)).allowed and not (await arl.slide("s", 1, 60)).allowed
    assert (await arl.gcra("g", 0, 1, 60)).allowed
    assert 59 < ((await arl.gcra("g", 0, 1, 60)).retry_after or 0) <= 60
    assert (await arl.hit_all(["{a}1", "{a}2"], [(1, 1), (1, 2)])).allowed
    held = await arl.acquire("l", 1, 10, id="me")
    assert held.acquired and await arl.renew("l", "me", 20) == 20 and await arl.release("l", "me")
    if backend == "module":
        assert isinstance(await arl.top(), list)
    with pytest.raises(RateLimitError, match="limit must be an integer >= 1"):
        await arl.hit("h", 0, 60)
    never = await arl.hit("n", 1, 60, cost=2)
    assert never.retry_after == math.inf


async def test_reserve_settle_and_refund(arl: AsyncRateLimiter) -> None:
    r = await arl.reserve_hit("tpm", 10_000, 60, cost=4_000)
    async with arl.settling(r) as s:
        s.used = 500
    assert s.settlement is not None and s.settlement.applied == -3_500
    assert (await arl.refund_hit("tpm", 10_000, 60, amount=100)).count == 400
    g = await arl.reserve_gcra("g", 4, 1, 3600, tokens=2)
    assert (await arl.settle("g", g.token or "", 3)).applied == 1
    sr = await arl.reserve_slide("s", 10, 60, cost=3)
    async with arl.settling(sr) as settling:
        pass
    assert settling.settlement is None and (await arl.slide("s", 10, 60, peek=True)).count == 3
    pipe = await arl.pipeline()
    answers = await pipe.reserve_hit("p", 5, 60, cost=5).reserve_hit("p", 5, 60, cost=1).execute()
    assert [a.allowed for a in answers] == [True, False]


async def test_answers_as_the_sync_client(server: Server) -> None:
    sync = RateLimiter(server.client())
    client = redis.asyncio.Redis(port=server.port)
    arl = AsyncRateLimiter(client)
    pairs = [(sync.hit("x", 3, 60, cost=2), await arl.hit("y", 3, 60, cost=2)) for _ in range(2)]
    pairs += [(sync.slide("sx", 2, 60), await arl.slide("sy", 2, 60)) for _ in range(3)]
    fields = ("allowed", "count", "remaining", "limit", "window")
    for a, b in pairs:
        assert [getattr(a, f) for f in fields] == [getattr(b, f) for f in fields]
    await client.aclose()


async def test_pipeline(arl: AsyncRateLimiter) -> None:
    pipe = await arl.pipeline()
    answers = await pipe.hit("p", 1, 60).hit("p", 1, 60).gcra("q", 0, 1, 1).execute()
    assert [a.allowed for a in answers] == [True, False, True]


async def test_permit_renewed_and_released(arl: AsyncRateLimiter) -> None:
    async with arl.permit("jobs", 1, 0.3) as permit:
        await asyncio.sleep(1.0)
        assert not (await arl.acquire("jobs", 1, 10)).acquired and not permit.lost
    assert await arl.client.exists("jobs") == 0
    with pytest.raises(ValueError):
        async with arl.permit("jobs", 1, 30):
            raise ValueError("boom")
    assert await arl.client.exists("jobs") == 0


async def test_permit_unavailable_and_waiting(arl: AsyncRateLimiter) -> None:
    await arl.acquire("jobs", 1, 0.2, id="short")
    async with arl.permit("jobs", 1, 30, wait=True, timeout=5) as permit:
        assert permit.id != "short"
        with pytest.raises(PermitUnavailable):
            async with arl.permit("jobs", 1, 30, wait=True, timeout=0.2):
                pass


async def test_valkey_asyncio(server: Server, backend: str) -> None:
    client = valkey.asyncio.Valkey(port=server.port)
    arl = AsyncRateLimiter(client)
    assert (await arl.hit("v", 1, 60)).allowed and arl.backend == backend
    await client.aclose()


async def test_cluster(cluster: Server, backend: str) -> None:
    client = redis.asyncio.RedisCluster(host="127.0.0.1", port=cluster.port)
    arl = AsyncRateLimiter(client)
    assert (await arl.hit("c", 1, 60)).allowed and arl.backend == backend
    with pytest.raises(RateLimitError, match="CROSSSLOT"):
        await arl.hit_all(["a", "b"], [(1, 1), (1, 1)])
    assert (await arl.hit_all(["{t}a", "{t}b"], [(1, 1), (1, 1)])).allowed
    await client.aclose()
