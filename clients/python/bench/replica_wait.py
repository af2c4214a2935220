"""`make bench`'s rows for waiting for replicas: what ``wait_for_replicas=1`` costs a decision,
against the same decisions without it, on a primary (with the module) and its replica, on each
server binary given, both on this machine's loopback.

One client making HIT decisions one after another gives the time per decision (the round trip,
and with the wait the replica's acknowledgement); THREADS threads sharing one client give the
decisions per second; the primary's CPU clock gives its server CPU per decision (WAIT, and the
REPLCONF GETACK it sends the replica). Repetitions interleave the two modes; medians. Informative:
the trade an operator makes for a failover that loses no acknowledged decision, no target.
``--quick`` is the smoke run `make test` makes so that this cannot rot."""

from __future__ import annotations

import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import redis
from measuring import arguments, cpu_ns, progress, server_name, write_report
from servers import Server

from redis_ratelimit_client import RateLimiter

THREADS = 8
IDENTITIES = 50
MODES = {"no wait": 0, "wait_for_replicas=1": 1}


def run(primary: Server, replicas: int, decisions: int, threads: int) -> tuple[float, float]:
    """Wall µs per decision (one thread) or decisions per second (several), and the primary's
    server CPU µs per decision."""
    primary.client().flushall()
    rl = RateLimiter(primary.client(), wait_for_replicas=replicas, replica_timeout=5)
    rl.hit("warm-up", 10, 60)  # connected, the backend found out: not counted
    assert primary.process is not None
    each = decisions // threads

    def decide(offset: int) -> None:
        for i in range(each):
            rl.hit(f"id:{(offset + i) % IDENTITIES}", 100, 60)

    workers = [threading.Thread(target=decide, args=(t,)) for t in range(threads)]
    cpu, start = cpu_ns(primary.process.pid), time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    wall, cpu = time.perf_counter() - start, cpu_ns(primary.process.pid) - cpu
    made = each * threads
    speed = wall / made * 1e6 if threads == 1 else made / wall
    return speed, cpu / made / 1000


def bench(binary: str, module: str, decisions: int, reps: int) -> list[str]:
    primary = Server(module=True, binary=binary, module_path=module)
    replica = Server(module=False, binary=binary, replica_of=primary)
    try:
        name = server_name(primary.client())
        latency: dict[str, list[float]] = {m: [] for m in MODES}
        rate: dict[str, list[float]] = {m: [] for m in MODES}
        cpu: dict[str, list[float]] = {m: [] for m in MODES}
        for rep in range(1, reps + 1):
            for row, (mode, replicas) in enumerate(MODES.items(), 1):
                progress(f"the replica wait, {name}: row {row}/{len(MODES)} {mode}, rep {rep}/{reps}")
                one, cpu_one = run(primary, replicas, decisions, 1)
                many, cpu_many = run(primary, replicas, decisions, THREADS)
                latency[mode].append(one)
                rate[mode].append(many)
                cpu[mode] += [cpu_one, cpu_many]
        base = {
            m: (statistics.median(latency[m]), statistics.median(rate[m]), statistics.median(cpu[m])) for m in MODES
        }
        first = base["no wait"]
        return [
            f"| {name} | {mode} | {lat:.1f} | {lat / first[0]:.2f} | {per_s:,.0f} | {per_s / first[1]:.2f} | "
            f"{server:.2f} | {server / first[2]:.2f} |"
            for mode, (lat, per_s, server) in base.items()
        ]
    finally:
        replica.close()
        primary.close()


def main() -> None:
    args = arguments(__doc__ or "")
    decisions, reps = (160, 1) if args.quick else (10_000, 3)
    lines = [
        "# What waiting for a replica costs a decision",
        "",
        f"Measured {time.strftime('%Y-%m-%d')} by `make bench` (clients/python/bench/replica_wait.py): "
        f"redis-py {redis.__version__}; a primary with the module and its replica on loopback; HIT "
        f"decisions over {IDENTITIES} identities, {decisions} a run, by one client (µs per decision) "
        f"and by {THREADS} threads sharing it (decisions/s); {reps} repetitions interleaved, medians. "
        "Server CPU is the primary's CPU clock, over both runs.",
        "",
        "| server | mode | µs/decision, one client | × | decisions/s, "
        f"{THREADS} threads | × | primary CPU µs/decision | × |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for binary in args.servers:
        lines += bench(binary, args.module, decisions, reps)
    lines.append("")
    write_report(lines, args.out, args.quick, "replica wait")


if __name__ == "__main__":
    main()
