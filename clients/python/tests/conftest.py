"""The servers the tests share (see servers.py): one with the module loaded, one without it (the
client then loads and calls the Functions library), each also as a one-node cluster, and a
Sentinel. Every test that takes ``backend`` runs twice, against the module and against the
library."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from servers import Sentinel, Server


@pytest.fixture(scope="session")
def servers() -> Iterator[dict[str, Server]]:
    made = {"module": Server(module=True), "library": Server(module=False)}
    yield made
    for server in made.values():
        server.close()


@pytest.fixture(scope="session")
def cluster_servers() -> Iterator[dict[str, Server]]:
    made = {"module": Server(module=True, cluster=True), "library": Server(module=False, cluster=True)}
    yield made
    for server in made.values():
        server.close()


@pytest.fixture(params=["module", "library"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def server(servers: dict[str, Server], backend: str) -> Server:
    chosen = servers[backend]
    chosen.reset()
    return chosen


@pytest.fixture
def cluster(cluster_servers: dict[str, Server], backend: str) -> Server:
    chosen = cluster_servers[backend]
    chosen.reset()
    return chosen


@pytest.fixture
def own_server(backend: str) -> Iterator[Server]:
    """A server for one test alone (it may stop it)."""
    made = Server(module=backend == "module")
    yield made
    made.close()


@pytest.fixture
def sentinel(server: Server) -> Iterator[Sentinel]:
    made = Sentinel(server)
    yield made
    made.close()
