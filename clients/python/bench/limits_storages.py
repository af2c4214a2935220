"""`make bench`'s rows for the limits storage: limits' own Redis storage (the installed package,
driven through limits' strategies) against this package's (``ratelimit+redis://``, on the module;
on the library too, informative), fixed window and sliding-window counter, server CPU per decision
(the server process's CPU clock), on each server binary given.

Each decision is made by limits' strategy through the storage, against the server, and the
commands the storage sent for it are recorded; the recorded commands are then sent again, on a
clean keyspace, in pipelines of PIPELINE, as many application processes would load a server, and
that replay's server CPU is the figure (one Python client waits a round trip per decision, and the
server's cost of waking for each, about 50 µs here, would hide what the storages cost). The first
run's own server CPU per decision is reported too. 50 identities at 100 a minute: most decisions
past the first are denials, as under a flood. Repetitions interleave the contenders; medians.
``--quick`` is the smoke run `make test` makes so that this cannot rot."""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import redis
from limits import parse, strategies
from limits.storage import storage_from_string
from measuring import arguments, cpu_ns, progress, server_name, write_report
from servers import Server

import redis_ratelimit_client  # noqa: F401  (registers the schemes)

STRATEGIES = {
    "fixed window": strategies.FixedWindowRateLimiter,
    "sliding-window counter": strategies.SlidingWindowCounterRateLimiter,
}
# The bound on this storage's server CPU per decision, as a multiple of limits' own.
TARGETS = {"fixed window": 0.75, "sliding-window counter": 0.5}
IDENTITIES = 50
LIMIT = parse("100/minute")


PIPELINE = 50


def measure(server: Server, uri: str, strategy: Any, decisions: int) -> tuple[float, float]:
    """Server CPU µs per decision: the commands limits' strategy sent through the storage, sent
    again pipelined (the figure), and as the strategy sent them, one round trip each."""
    server.client().flushall()
    limiter = strategy(storage_from_string(uri))
    limiter.hit(LIMIT, "warm-up")  # scripts loaded, the backend found out: not counted
    server.client().flushall()
    assert server.process is not None
    sent: list[tuple[Any, ...]] = []
    execute = redis.Redis.execute_command

    def recording(client: redis.Redis, *args: Any, **options: Any) -> Any:
        sent.append(args)
        return execute(client, *args, **options)

    redis.Redis.execute_command = recording  # type: ignore[method-assign]
    try:
        before = cpu_ns(server.process.pid)
        for i in range(decisions):
            limiter.hit(LIMIT, f"user:{i % IDENTITIES}")
        one_by_one = (cpu_ns(server.process.pid) - before) / decisions / 1000
    finally:
        redis.Redis.execute_command = execute  # type: ignore[method-assign]
    client = server.client()
    client.flushall()
    before = cpu_ns(server.process.pid)
    for start in range(0, len(sent), PIPELINE):
        pipe = client.pipeline(transaction=False)
        for args in sent[start : start + PIPELINE]:
            pipe.execute_command(*args)
        pipe.execute(raise_on_error=True)
    return (cpu_ns(server.process.pid) - before) / decisions / 1000, one_by_one


def bench(binary: str, module: str, decisions: int, reps: int) -> tuple[str, list[str], list[str]]:
    with_module = Server(module=True, binary=binary, module_path=module)
    without = Server(module=False, binary=binary)
    try:
        name = server_name(with_module.client())
        rows, targets = [], []
        for row, (label, strategy) in enumerate(STRATEGIES.items(), 1):
            progress(f"the limits storage, {name}: row {row}/{len(STRATEGIES)} {label}, {reps} reps")
            contenders = {
                "limits' own Redis storage": (with_module, with_module.url("redis")),
                "ratelimit+redis:// (the module)": (with_module, with_module.url("ratelimit+redis")),
                "ratelimit+redis:// (the library)": (without, without.url("ratelimit+redis")),
            }
            runs: dict[str, list[tuple[float, float]]] = {c: [] for c in contenders}
            for _ in range(reps):
                for contender, (server, uri) in contenders.items():
                    runs[contender].append(measure(server, uri, strategy, decisions))
            medians = {c: statistics.median(p for p, _ in r) for c, r in runs.items()}
            singles = {c: statistics.median(o for _, o in r) for c, r in runs.items()}
            own, own_single = medians["limits' own Redis storage"], singles["limits' own Redis storage"]
            for contender, cpu in medians.items():
                single = singles[contender]
                figures = f"{cpu:.2f} | {cpu / own:.2f} | {single:.1f} | {single / own_single:.2f}"
                rows.append(f"| {name} | {label} | {contender} | {figures} |")
            ratio = medians["ratelimit+redis:// (the module)"] / own
            bound = TARGETS[label]
            met = "yes" if ratio <= bound else "no"
            what = f"{name}: {label}, this storage's server CPU ≤ {bound}× limits' own"
            targets.append(f"| {what} | {ratio:.2f} | {met} |")
        return name, rows, targets
    finally:
        with_module.close()
        without.close()


def main() -> None:
    args = arguments(__doc__ or "")
    decisions, reps = (300, 1) if args.quick else (10_000, 3)
    import limits

    lines = [
        "# The limits storage against limits' own Redis storage",
        "",
        f"Measured {time.strftime('%Y-%m-%d')} by `make bench` (clients/python/bench/limits_storages.py): "
        f"limits {limits.__version__}, redis-py {redis.__version__}; {decisions} decisions a run through "
        f"limits' strategies, {IDENTITIES} identities at {LIMIT}, their commands recorded and sent again "
        f'in pipelines of {PIPELINE} ("one by one": as the strategy sent them, a round trip each), '
        f"{reps} repetitions interleaved, medians. Server CPU is the server process's CPU clock.",
        "",
        "| server | strategy | storage | server CPU µs/decision | × limits' own | one by one, µs | × |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: |",
    ]
    all_targets = []
    for binary in args.servers:
        _, rows, targets = bench(binary, args.module, decisions, reps)
        lines += rows
        all_targets += targets
    lines += ["", "## Targets", "", "| target | measured | met |", "| --- | ---: | :---: |", *all_targets, ""]
    write_report(lines, args.out, args.quick, "limits storage")


if __name__ == "__main__":
    main()
