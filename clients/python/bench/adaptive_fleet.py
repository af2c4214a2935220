"""`make bench`'s real run of the adaptive limit: fleets of 8 processes (4 threads each) calling a
fake provider over HTTP on loopback, each call through ``AdaptiveLimit.call`` on one server with
the module, against the same fleet backing off as the SDKs do (no shared limit), for comparison.
The fleets run at once, each against its own provider, from the instant every process is ready.

The provider is a real HTTP server, OpenAI-compatible in what it answers: a token bucket of
``capacity`` calls a minute holding ten seconds' worth, its capacity hidden and changing: 600 a
minute, then halved, then tripled (a phase each). It states the account's limit (1,200) in
``x-ratelimit-limit-requests`` and its bucket's level in ``x-ratelimit-remaining-requests`` (with
``x-ratelimit-reset-requests``), and answers 429 with a ``Retry-After`` of a second when empty.
The loss-only fleet's provider states nothing but the 429 and its ``Retry-After`` (as Gemini's and
Bedrock's). Figures per phase, at the provider: the share of the calls it was sent that it
answered 429 (in the whole phase, and after its first 10 s), the calls it answered over its
capacity (after the first 10 s), after a change the epochs (10 s) until one sends no more than a
lower capacity or the time until one's calls answered reach 90% of a higher one, and Jain's index
of the calls answered per process.
``--quick`` is the smoke run `make test` makes so that this cannot rot: phases of 3 s."""

from __future__ import annotations

import json
import math
import multiprocessing
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import redis
from measuring import arguments, progress, server_name, write_report
from servers import Server

from redis_ratelimit_client import AdaptiveLimit, RateLimited, RateLimiter

PROCESSES, THREADS = 8, 4
STATED = 1_200
PHASES = (("600 a minute", 600), ("halved", 300), ("tripled", 900))
# A whole chat completion, as an OpenAI client (LiteLLM's) reads one.
ANSWER = json.dumps(
    {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": "fake",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }
).encode()


class Bucket:
    """The provider's hidden capacity: a token bucket of a sixth of a minute's worth."""

    def __init__(self, start: float) -> None:
        self.lock = threading.Lock()
        self.begin(start)

    def begin(self, start: float) -> None:
        """The first phase starts at `start` (time.monotonic()), the bucket full, no call made."""
        self.start = start
        self.level = PHASES[0][1] / 6
        self.at = start
        # Every call the provider was sent: when (time.monotonic()), and whether it was answered.
        self.calls: list[tuple[float, bool]] = []

    def capacity(self, now: float, phase_s: float) -> int:
        return PHASES[min(int((now - self.start) / phase_s), len(PHASES) - 1)][1]

    def take(self, phase_s: float) -> tuple[bool, float, int]:
        """Whether a call is answered, the bucket's level after, and the capacity now."""
        with self.lock:
            now = time.monotonic()
            capacity = self.capacity(now, phase_s)
            self.level = min(self.level + (now - self.at) * capacity / 60, capacity / 6)
            self.at = now
            ok = self.level >= 1
            if ok:
                self.level -= 1
            self.calls.append((now, ok))
            return ok, self.level, capacity


def provider(bucket: Bucket, phase_s: float, stated: bool = True) -> ThreadingHTTPServer:
    """The provider on a free loopback port; `stated`: whether it sends its x-ratelimit-* headers."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            ok, level, capacity = bucket.take(phase_s)
            self.send_response(200 if ok else 429)
            if stated:
                self.send_header("x-ratelimit-limit-requests", str(STATED))
                self.send_header("x-ratelimit-remaining-requests", str(max(math.floor(level), 0)))
                refill_s = (capacity / 6 - level) * 60 / capacity
                self.send_header("x-ratelimit-reset-requests", f"{max(refill_s, 0):.3f}s")
            if not ok:
                self.send_header("retry-after", "1")
            self.send_header("content-type", "application/json")
            self.end_headers()
            self.wfile.write(ANSWER)

        def log_message(self, *args: Any) -> None:
            pass

    # A backlog for a fleet's worth of connections at once (the standard library's is 5).
    ThreadingHTTPServer.request_queue_size = 256
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def sdk_backoff(sent: float, attempt: int) -> float:
    """As the SDKs back off after a 429: 0.5 s doubling to 8 s, up to 25% jitter off (the
    provider's Retry-After of 1 s honoured as the least)."""
    jitter = 1 - 0.25 * (hash((sent, attempt)) % 100) / 100
    return max(1.0, min(8.0, 0.5 * 2**attempt)) * jitter


def jain(counts: list[int]) -> float:
    """Jain's index of fairness of the counts (1: equal)."""
    total = sum(counts)
    return total**2 / (len(counts) * sum(x * x for x in counts)) if total else 0.0


EPOCH_S = 10.0  # the adaptive limit's epoch: a sixth of its minute


def changed(bucket: Bucket, start: float, end: float, before: int, after: int) -> str:
    """After a change of capacity at `start`, lower: the epochs until one sends no more than the
    new capacity's; higher: the seconds until an epoch's calls answered reach 90% of it."""
    per_epoch = after * EPOCH_S / 60
    epochs = int((end - start) // EPOCH_S)
    for k in range(epochs):
        a, b = start + k * EPOCH_S, start + (k + 1) * EPOCH_S
        calls = [ok for t, ok in bucket.calls if a <= t < b]
        if after < before and len(calls) <= per_epoch:
            return f"under in {k} epoch{'' if k == 1 else 's'}"
        if after > before and calls.count(True) >= 0.9 * per_epoch:
            return f"90% in {(k + 1) * EPOCH_S:.0f} s"
    return f"not in {epochs * EPOCH_S:.0f} s" if after != before else "-"


def phase_rows(bucket: Bucket, phase_s: float, answered: list[list[float]]) -> list[dict[str, Any]]:
    """Each phase's figures, from the calls the provider was sent and the times (time.monotonic())
    of the calls answered to each caller (a process, a proxy) whose fairness is measured."""
    rows = []
    settle = min(10.0, phase_s / 3)
    for i, (name, capacity) in enumerate(PHASES):
        start, end = bucket.start + i * phase_s, bucket.start + (i + 1) * phase_s
        calls = [ok for t, ok in bucket.calls if start <= t < end]
        steady = [ok for t, ok in bucket.calls if start + settle <= t < end]
        rows.append(
            {
                "phase": name,
                "capacity": capacity,
                "throttled": calls.count(False) / max(len(calls), 1),
                "steady": steady.count(False) / max(len(steady), 1),
                "use": steady.count(True) / (capacity * (end - start - settle) / 60),
                "change": changed(bucket, start, end, PHASES[i - 1][1], capacity) if i else "-",
                "jain": jain([sum(1 for t in times if start <= t < end) for times in answered]),
            }
        )
    return rows


TABLE_HEAD = "phase | capacity a minute | 429s at the provider | 429s after 10 s | use (after 10 s) | after the change"


def table_rows(results: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Each fleet's phases as a table's rows, in TABLE_HEAD's columns and then Jain's index."""
    return [
        f"| {label} | {row['phase']} | {row['capacity']} | {row['throttled']:.1%} | {row['steady']:.1%} "
        f"| {row['use']:.0%} | {row['change']} | {row['jain']:.2f} |"
        for label, rows in results.items()
        for row in rows
    ]


def worker(port: int, url: str, key: str, ours: bool, ready: Any, go: Any, until: Any, out: Any) -> None:
    """One process: THREADS callers from `go` until `until` (time.monotonic()); puts the times of
    the calls answered."""
    answered: list[float] = []
    lock = threading.Lock()
    limit = AdaptiveLimit(RateLimiter(redis.Redis(port=port)), key, floor=30, start=600, ceiling=STATED)

    def send() -> Any:
        request = urllib.request.Request(url, b'{"model": "fake"}', {"content-type": "application/json"})
        return urllib.request.urlopen(request, timeout=10)

    def caller() -> None:
        backoff = 0
        while time.monotonic() < until.value:
            sent = time.monotonic()
            try:
                (limit.call(send, max_wait=until.value - sent) if ours else send()).read()
            except urllib.error.HTTPError as e:
                if e.code == 429 and not ours:
                    time.sleep(sdk_backoff(sent, backoff))
                    backoff += 1
                continue
            except (RateLimited, OSError):
                continue
            backoff = 0
            with lock:
                answered.append(time.monotonic())

    ready.put(None)
    go.wait()
    threads = [threading.Thread(target=caller) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out.put(json.dumps(answered))


FLEETS = (
    ("ours (AdaptiveLimit)", True, True),
    ("ours, loss only", True, False),
    ("per-process backoff", False, True),
)


def run(port: int, phase_s: float) -> dict[str, list[dict[str, Any]]]:
    """Every fleet at once, each against its own provider, on its own key; each fleet's rows."""
    redis.Redis(port=port).flushall()
    context = multiprocessing.get_context("spawn")
    ready, go, until = context.Queue(), context.Event(), context.Value("d", math.inf)
    fleets = []
    for label, ours, stated in FLEETS:
        bucket = Bucket(time.monotonic())
        http = provider(bucket, phase_s, stated)
        url = f"http://127.0.0.1:{http.server_address[1]}/v1/chat/completions"
        out = context.Queue()
        args = (port, url, f"fleet:{len(fleets)}", ours, ready, go, until, out)
        processes = [context.Process(target=worker, args=args) for _ in range(PROCESSES)]
        fleets.append((label, bucket, http, out, processes))
    for *_, processes in fleets:
        for p in processes:
            p.start()
    for _ in range(len(fleets) * PROCESSES):
        ready.get()
    # The phases start once every process is ready to call: spawning 24 interpreters on a small
    # machine takes seconds, and a process that has not started yet is not treated unfairly.
    start = time.monotonic()
    for _, bucket, *_ in fleets:
        bucket.begin(start)
    until.value = start + phase_s * len(PHASES)
    go.set()
    results = {}
    for label, bucket, http, out, processes in fleets:
        answered = [json.loads(out.get()) for _ in processes]
        for p in processes:
            p.join()
        http.shutdown()
        results[label] = phase_rows(bucket, phase_s, answered)
    return results


def main() -> None:
    args = arguments(__doc__ or "")
    phase_s = 3.0 if args.quick else 60.0
    server = Server(module=True, binary=args.servers[0], module_path=args.module)
    try:
        name = server_name(redis.Redis(port=server.port))
        progress(f"{len(FLEETS)} fleets at once: {len(PHASES)} phases of {phase_s:.0f} s")
        results = run(server.port, phase_s)
    finally:
        server.close()
    lines = [
        f"# The adaptive limit, a real run ({name}, fleets of {PROCESSES} processes of {THREADS} callers "
        f"at once, phases of {phase_s:.0f} s)",
        "",
        f"| fleet | {TABLE_HEAD} | Jain (per process) |",
        "| --- | --- | ---: | ---: | ---: | ---: | --- | ---: |",
    ]
    write_report([*lines, *table_rows(results), ""], args.out, args.quick, "the adaptive limit's real run")


if __name__ == "__main__":
    main()
