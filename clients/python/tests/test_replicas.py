"""Limiters that wait for replicas (``wait_for_replicas``): each write answers once the replicas
hold it (read back from them at once), or raises NotReplicated with the answer; WAIT goes on the
connection that wrote (it counts what its own connection wrote), so a write made while the replica
is stopped is not acknowledged; PEEK never waits; a pipeline waits once; in a cluster the wait goes
to the key's primary, also after the slot moved.
Every limiter here waits up to 10 s for an acknowledgement that a free machine gives in a
millisecond: only the servers with no replica ever time out."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
import redis.asyncio
from servers import Server, wait_until

from redis_ratelimit_client import AsyncRateLimiter, Decision, NotReplicated, RateLimiter, RateLimitError

PATIENT = 10.0


@pytest.fixture(scope="module")
def pairs() -> Iterator[dict[tuple[str, bool], tuple[Server, Server]]]:
    """A primary and its replica (without the module: it applies what the primary replicates),
    per backend, standalone and as a cluster."""
    made: dict[tuple[str, bool], tuple[Server, Server]] = {}
    for backend in ("module", "library"):
        for cluster in (False, True):
            primary = Server(module=backend == "module", cluster=cluster)
            made[backend, cluster] = primary, Server(module=False, cluster=cluster, replica_of=primary)
    yield made
    for pair in made.values():
        for server in pair:
            server.close()


def pair(pairs: dict[tuple[str, bool], tuple[Server, Server]], backend: str, cluster: bool) -> tuple[Server, Server]:
    primary, replica = pairs[backend, cluster]
    primary.reset()
    return primary, replica


def sync_client(primary: Server, cluster: bool) -> Any:
    return redis.RedisCluster(host="127.0.0.1", port=primary.port) if cluster else primary.client()


def same_data(primary: Server, replica: Server) -> None:
    """Every key of the primary is on the replica with the same value, read at once."""
    with redis.Redis(port=primary.port) as p, redis.Redis(port=replica.port) as r:
        if replica.cluster:
            r.execute_command("READONLY")
        keys = sorted(p.keys("*"))
        assert keys, "the calls wrote nothing"
        assert sorted(r.keys("*")) == keys
        for key in keys:
            assert r.dump(key) == p.dump(key), key


def writes(rl: RateLimiter) -> list[Callable[[], Any]]:
    """A write of every kind, on keys of one slot."""
    return [
        lambda: rl.hit("{u}h", 10, 60),
        lambda: rl.slide("{u}s", 10, 60),
        lambda: rl.gcra("{u}g", 5, 10, 60),
        lambda: rl.hit_all(["{u}a", "{u}b"], [(5, 60), (50, 3600)]),
        lambda: rl.settle("{u}t", rl.reserve_hit("{u}t", 1000, 60, cost=400).token or "", 100),
        lambda: rl.acquire("{u}l", 2, 30, id="me"),
        lambda: rl.release("{u}l", "me"),
    ]


@pytest.mark.parametrize("cluster", [False, True], ids=["standalone", "cluster"])
def test_each_write_is_on_the_replica_when_it_answers(
    pairs: dict[tuple[str, bool], tuple[Server, Server]], backend: str, cluster: bool
) -> None:
    primary, replica = pair(pairs, backend, cluster)
    client = sync_client(primary, cluster)
    rl = RateLimiter(client, wait_for_replicas=1, replica_timeout=PATIENT)
    for write in writes(rl):
        write()
        same_data(primary, replica)
    client.close()


@contextlib.contextmanager
def stopped(server: Server) -> Iterator[None]:
    assert server.process is not None
    os.kill(server.process.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(server.process.pid, signal.SIGCONT)


@pytest.mark.parametrize("cluster", [False, True], ids=["standalone", "cluster"])
def test_a_write_the_stopped_replica_lacks_is_not_acknowledged(
    pairs: dict[tuple[str, bool], tuple[Server, Server]], backend: str, cluster: bool
) -> None:
    primary, replica = pair(pairs, backend, cluster)
    client = sync_client(primary, cluster)
    rl = RateLimiter(client, wait_for_replicas=1, replica_timeout=PATIENT)
    rl.hit("{u}h", 10, 60)
    with stopped(replica), pytest.raises(NotReplicated) as raised:
        rl.waiting_for_replicas(1, 0.05).hit("{u}h", 10, 60)
    assert raised.value.answer.count == 2 and raised.value.acknowledged == 0
    assert rl.hit("{u}h", 10, 60).count == 3  # acknowledged again once it runs
    client.close()


@pytest.mark.parametrize("cluster", [False, True], ids=["standalone", "cluster"])
async def test_async_writes_are_on_the_replica_when_they_answer(
    pairs: dict[tuple[str, bool], tuple[Server, Server]], backend: str, cluster: bool
) -> None:
    primary, replica = pair(pairs, backend, cluster)
    client: Any = (
        redis.asyncio.RedisCluster(host="127.0.0.1", port=primary.port)
        if cluster
        else redis.asyncio.Redis(port=primary.port)
    )
    rl = AsyncRateLimiter(client, wait_for_replicas=1, replica_timeout=PATIENT)
    assert (await rl.hit("{u}h", 10, 60)).count == 1
    same_data(primary, replica)
    r = await rl.reserve_gcra("{u}g", 5, 10, 60, tokens=4)
    same_data(primary, replica)
    assert (await rl.settle("{u}g", r.token or "", 1)).applied == -3
    same_data(primary, replica)
    with stopped(replica), pytest.raises(NotReplicated) as raised:
        await rl.waiting_for_replicas(1, 0.05).hit("{u}h", 10, 60)
    assert raised.value.answer.count == 2 and raised.value.acknowledged == 0
    await client.aclose()


def test_a_pipeline_waits_once_after_its_calls(
    pairs: dict[tuple[str, bool], tuple[Server, Server]], backend: str, server: Server
) -> None:
    primary, replica = pair(pairs, backend, False)
    with RateLimiter(primary.client(), wait_for_replicas=1, replica_timeout=PATIENT).pipeline() as p:
        assert [d.count for d in p.hit("a", 5, 60).hit("a", 5, 60).slide("b", 5, 60).execute()] == [1, 2, 1]
    same_data(primary, replica)
    # With no replica: the answers come with the error, all counted on the primary.
    waiting = RateLimiter(server.client(), wait_for_replicas=1, replica_timeout=0.05)
    with waiting.pipeline() as p, pytest.raises(NotReplicated) as raised:
        p.hit("a", 5, 60).peek("a", 5).execute()
    assert [d.count for d in raised.value.answer] == [1, 1]
    # Reads alone send no WAIT.
    with waiting.pipeline() as p:
        assert p.peek("a", 5).execute()[0].count == 1


def test_no_replica_in_time_raises_with_the_answer(server: Server) -> None:
    rl = RateLimiter(server.client(), wait_for_replicas=1, replica_timeout=0.05)
    with pytest.raises(NotReplicated) as raised:
        rl.hit("k", 10, 60)
    assert isinstance(raised.value.answer, Decision) and raised.value.answer.allowed
    assert (raised.value.acknowledged, raised.value.wanted) == (0, 1)
    assert str(raised.value) == "0 of 1 replicas acknowledged the write in time"
    # The write stands on the primary; reads never wait, so never raise.
    assert rl.peek("k", 10).count == 1
    assert RateLimiter(server.client()).hit("k", 10, 60).count == 2


async def test_async_no_replica_in_time_raises_with_the_answer(server: Server, cluster: Server) -> None:
    for client in (
        redis.asyncio.Redis(port=server.port),
        redis.asyncio.RedisCluster(host="127.0.0.1", port=cluster.port),
    ):
        rl = AsyncRateLimiter(client, wait_for_replicas=1, replica_timeout=0.05)
        with pytest.raises(NotReplicated) as raised:
            await rl.slide("k", 10, 60)
        assert raised.value.answer.count == 1 and raised.value.acknowledged == 0
        assert (await rl.slide("k", 10, 60, peek=True)).count == 1
        await client.aclose()


def test_a_cluster_waits_on_the_primary_the_slot_moved_to(backend: str) -> None:
    """The client still maps the key to its first node: the call is redirected (MOVED), and the
    write and its WAIT go to the node that holds the slot now, where no replica acknowledges."""
    first, second = (Server(module=backend == "module", cluster=True) for _ in range(2))
    try:
        client = redis.RedisCluster(host="127.0.0.1", port=first.port)
        rl = RateLimiter(client, wait_for_replicas=1, replica_timeout=0.05)
        assert rl.waiting_for_replicas(0).hit("{x}k", 10, 60).count == 1  # the backend found out
        with redis.Redis(port=second.port) as new, redis.Redis(port=first.port) as old:
            new.config_set("cluster-node-timeout", 1000)  # it waits that long (at most 5 s) to say "ok"
            new.execute_command("CLUSTER", "RESET", "HARD")  # no slots, a node of no cluster yet
            new.execute_command("CLUSTER", "MEET", "127.0.0.1", first.port)
            new_id = new.execute_command("CLUSTER", "MYID").decode()
            wait_until(lambda: new_id.encode() in old.execute_command("CLUSTER", "NODES"), "the meeting")
            slot = client.keyslot("{y}k")
            for node in (new, old):
                node.execute_command("CLUSTER", "SETSLOT", slot, "NODE", new_id)
            for node in (new, old):
                wait_until(lambda n=node: b"cluster_state:ok" in n.execute_command("CLUSTER", "INFO"), "the cluster")
            if backend == "library":
                new.execute_command("FUNCTION", "RESTORE", old.function_dump())
            with pytest.raises(NotReplicated) as raised:
                rl.hit("{y}k", 10, 60)
            assert raised.value.answer.count == 1
            assert new.exists("{y}k") == 1
            assert new.info("commandstats")["cmdstat_wait"]["calls"] == 1
            assert old.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) == 0
        client.close()
    finally:
        first.close()
        second.close()


def test_a_cluster_pipeline_cannot_wait(cluster: Server) -> None:
    rl = RateLimiter(redis.RedisCluster(host="127.0.0.1", port=cluster.port), wait_for_replicas=1)
    with pytest.raises(RateLimitError, match="cannot wait for replicas"):
        rl.pipeline()
    rl.waiting_for_replicas(0).pipeline()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"wait_for_replicas": -1}, "wait_for_replicas must be an integer >= 0, got -1"),
        ({"wait_for_replicas": "1"}, "wait_for_replicas must be an integer >= 0, got '1'"),
        ({"wait_for_replicas": True}, "wait_for_replicas must be an integer >= 0, got True"),
        ({"replica_timeout": 0}, "replica_timeout must be a number of seconds > 0, got 0"),
        ({"replica_timeout": float("nan")}, "replica_timeout must be a number of seconds > 0, got nan"),
    ],
)
def test_bad_options_are_refused(options: dict[str, Any], message: str) -> None:
    client = redis.Redis(port=1)  # never connected: refused before anything is sent
    with pytest.raises(RateLimitError, match=message):
        RateLimiter(client, **options)
    with pytest.raises(RateLimitError, match=message):
        AsyncRateLimiter(redis.asyncio.Redis(port=1), **options)
