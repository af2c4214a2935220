"""Real servers of their own for the package's tests and its benchmark: a server process on a free
loopback port in a folder of its own, with the module loaded or not, as a one-node cluster if
asked, and a Sentinel. REDIS_SERVER names the server binary (default ``redis-server``; Valkey's
works the same) and RATELIMIT_MODULE the built module; ``make test`` sets both."""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

SERVER = os.environ.get("REDIS_SERVER", "redis-server")
MODULE = os.environ.get("RATELIMIT_MODULE", "")


def free_port() -> int:
    """A free loopback port whose cluster bus port (+10000) is free too, both below the ports the
    kernel hands out to outgoing connections (ip_local_port_range): a port from bind(0) is one of
    those, and any connection could take it before a slow process (a LiteLLM proxy takes seconds to
    start) binds it. Where that range starts too low, a port from bind(0)."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    while True:
        with socket.socket() as s, socket.socket() as bus:
            try:
                s.bind(("127.0.0.1", random.randrange(10_000, low - 10_000) if low > 20_000 else 0))
                port = int(s.getsockname()[1])
                bus.bind(("127.0.0.1", port + 10_000))
            except (OSError, OverflowError):  # taken, or no bus port above it
                continue
        return port


def wait_until(condition: Any, what: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


class ServerExited(RuntimeError):
    pass


class StoodClock:
    """The wall clock a server reads, stood where a test puts it (testkit/clock/clock.c, built
    here with the C compiler and preloaded): Unix ms in a file, until the test writes another."""

    def __init__(self, folder: Path) -> None:
        self.file = folder / "clock"
        self.library = folder / "libclock.so"
        source = Path(__file__).parents[3] / "testkit/clock/clock.c"
        subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", str(self.library), str(source)], check=True)
        self.ms, self.fd = 0, -1
        self.stand(1_800_000_000_000)

    def environment(self) -> dict[str, str]:
        return {**os.environ, "LD_PRELOAD": str(self.library), "RATELIMIT_TEST_CLOCK": str(self.file)}

    def stand(self, unix_ms: int) -> None:
        """At ``unix_ms``: written whole and renamed the first time, then over the same digits
        in one write (a tenth of the time a rename takes; a read torn between two numbers this
        close is off by seconds at most, which only the server's cron could see)."""
        if unix_ms == self.ms:
            return
        text = str(unix_ms).encode()
        if len(text) != len(str(self.ms)):
            following = self.file.with_suffix(".next")
            following.write_bytes(text)
            following.replace(self.file)
            self.fd = os.open(self.file, os.O_WRONLY)
        else:
            os.pwrite(self.fd, text, 0)
        self.ms = unix_ms


class Server:
    """A server process of its own on a free loopback port, in a folder of its own."""

    def __init__(
        self,
        *,
        module: bool,
        cluster: bool = False,
        replica_of: Server | None = None,
        binary: str = SERVER,
        module_path: str = MODULE,
        stood_clock: bool = False,
    ) -> None:
        if module and not Path(module_path).is_file():
            raise RuntimeError(f"RATELIMIT_MODULE must name the built module (got {module_path!r})")
        self.binary = binary
        self.module_path = str(Path(module_path).resolve())
        self.module = module
        self.cluster = cluster
        self.replica_of = replica_of
        self.folder = tempfile.mkdtemp(prefix="ratelimit-py-")
        self.process: subprocess.Popen[bytes] | None = None
        self.clock = StoodClock(Path(self.folder)) if stood_clock else None
        # A port found free can be taken by another test's server before ours binds it: ours then
        # exits, and another port is tried.
        for _ in range(5):
            self.port = free_port()
            try:
                self.start()
                break
            except ServerExited:
                continue
        else:
            raise RuntimeError(f"{binary} did not start on 5 free ports; see {self.folder}/server.log")

    def start(self) -> None:
        command = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.folder]
        command += ["--save", "", "--appendonly", "no", "--logfile", "server.log"]
        command += ["--repl-diskless-sync-delay", "0"]  # a replica's first sync at once, not in 5 s
        if self.module:
            command += ["--loadmodule", self.module_path]
        if self.cluster:
            command += ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"]
            command += ["--cluster-node-timeout", "20000"]
        elif self.replica_of is not None:
            command += ["--replicaof", "127.0.0.1", str(self.replica_of.port)]
        env = self.clock.environment() if self.clock else None
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        wait_until(self._answers, f"{self.binary} on port {self.port}")
        if self.replica_of is not None:
            self._replicate()
        elif self.cluster:
            plain = redis.Redis(port=self.port)
            if plain.execute_command("CLUSTER", "INFO").decode().find("cluster_state:ok") < 0:
                plain.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
            wait_until(lambda: b"cluster_state:ok" in plain.execute_command("CLUSTER", "INFO"), "the cluster")
            plain.close()

    def _replicate(self) -> None:
        """Made a replica of ``replica_of`` (a cluster node: met, then CLUSTER REPLICATE), and
        waited for until the primary sees it online."""
        assert self.replica_of is not None
        primary = redis.Redis(port=self.replica_of.port)
        if self.cluster:
            with redis.Redis(port=self.port) as plain:
                plain.execute_command("CLUSTER", "MEET", "127.0.0.1", self.replica_of.port)
                primary_id = primary.execute_command("CLUSTER", "MYID").decode()

                def met() -> bool:
                    return primary_id.encode() in plain.execute_command("CLUSTER", "NODES")

                wait_until(met, "the cluster meeting")
                plain.execute_command("CLUSTER", "REPLICATE", primary_id)

        def online() -> bool:
            replicas = [v for k, v in primary.info("replication").items() if k.startswith("slave")]
            return any(r["port"] == self.port and r["state"] == "online" for r in replicas)

        wait_until(online, f"the replica on port {self.port}")
        primary.close()

    def _answers(self) -> bool:
        """Whether our process answers on the port (another test's server may, until ours exits)."""
        assert self.process is not None
        if self.process.poll() is not None:
            raise ServerExited(f"{self.binary} exited; see {self.folder}/server.log")
        try:
            with redis.Redis(port=self.port, socket_timeout=1) as client:
                return bool(client.info("server")["process_id"] == self.process.pid)
        except redis.ConnectionError:
            return False

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)

    def url(self, scheme: str = "redis") -> str:
        return f"{scheme}://127.0.0.1:{self.port}"

    def client(self, **options: Any) -> redis.Redis:
        return redis.Redis(port=self.port, **options)

    def reset(self) -> None:
        """Every key deleted; the library deleted too, so that each test finds out afresh."""
        with redis.Redis(port=self.port) as client:
            client.flushall()
            if not self.module:
                client.function_flush()

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


class Sentinel:
    """A Sentinel process watching ``master`` under the name ``mymaster``."""

    def __init__(self, master: Server) -> None:
        self.folder = tempfile.mkdtemp(prefix="ratelimit-sentinel-")
        self.port = free_port()
        config = Path(self.folder, "sentinel.conf")
        config.write_text(
            f"port {self.port}\nbind 127.0.0.1\ndir {self.folder}\nlogfile sentinel.log\n"
            f"sentinel monitor mymaster 127.0.0.1 {master.port} 1\n"
        )
        self.process = subprocess.Popen(
            [master.binary, str(config), "--sentinel"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

        def knows_master() -> bool:
            try:
                with redis.Redis(port=self.port, socket_timeout=1) as client:
                    return client.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster") is not None
            except redis.ConnectionError:
                return False

        wait_until(knows_master, "the sentinel")

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(10)
        shutil.rmtree(self.folder, ignore_errors=True)
