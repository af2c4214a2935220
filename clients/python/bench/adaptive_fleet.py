"""`make bench`'s real run of the adaptive limit: a fleet of 8 processes (4 threads each) calling a
fake provider over HTTP on loopback, each call through ``AdaptiveLimit.call`` on one server with
the module, against the same fleet backing off as the SDKs do (no shared limit), for comparison.

The provider is a real HTTP server, OpenAI-compatible in what it answers: a token bucket of
``capacity`` calls a minute holding ten seconds' worth, its capacity hidden and changing: 600 a
minute, then halved, then tripled (a phase each). It states the account's limit (1,200) in
``x-ratelimit-limit-requests`` and its bucket's level in ``x-ratelimit-remaining-requests`` (with
``x-ratelimit-reset-requests``), and answers 429 with a ``Retry-After`` of a second when empty.
Figures per phase: the share of calls answered 429, the calls answered 200 over the capacity
(after the phase's first 10 s), and Jain's index of the calls answered per process.
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


def provider(bucket: Bucket, phase_s: float) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            ok, level, capacity = bucket.take(phase_s)
            self.send_response(200 if ok else 429)
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


def table_rows(results: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Each fleet's phases as a table's rows: the phase, its capacity, 429s, use and Jain."""
    return [
        f"| {label} | {row['phase']} | {row['capacity']} | {row['throttled']:.1%} | {row['use']:.0%} "
        f"| {row['jain']:.2f} |"
        for label, rows in results.items()
        for row in rows
    ]


def worker(port: int, url: str, until: float, ours: bool, out: Any) -> None:
    """One process: THREADS callers until `until` (time.monotonic()), each call's (time, status)."""
    calls: list[tuple[float, int]] = []
    lock = threading.Lock()
    limit = AdaptiveLimit(RateLimiter(redis.Redis(port=port)), "fleet", floor=30, start=600, ceiling=STATED)

    def send() -> Any:
        request = urllib.request.Request(url, b'{"model": "fake"}', {"content-type": "application/json"})
        return urllib.request.urlopen(request, timeout=10)

    def caller() -> None:
        backoff = 0
        while time.monotonic() < until:
            sent = time.monotonic()
            try:
                (limit.call(send, max_wait=until - sent) if ours else send()).read()
                status, backoff = 200, 0
            except urllib.error.HTTPError as e:
                status = e.code
            except RateLimited:
                continue
            except OSError:
                status = 0  # no answer: counted as sent, neither answered nor throttled
            with lock:
                calls.append((sent, status))
            if status == 429 and not ours:
                time.sleep(sdk_backoff(sent, backoff))
                backoff += 1

    threads = [threading.Thread(target=caller) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out.put(json.dumps(calls))


def run(port: int, phase_s: float, ours: bool) -> list[dict[str, Any]]:
    redis.Redis(port=port).flushall()
    bucket = Bucket(time.monotonic())
    http = provider(bucket, phase_s)
    url = f"http://127.0.0.1:{http.server_address[1]}/v1/chat/completions"
    until = bucket.start + phase_s * len(PHASES)
    context = multiprocessing.get_context("spawn")
    out = context.Queue()
    processes = [context.Process(target=worker, args=(port, url, until, ours, out)) for _ in range(PROCESSES)]
    for p in processes:
        p.start()
    per_process = [[(t - bucket.start, s) for t, s in json.loads(out.get())] for _ in processes]
    for p in processes:
        p.join()
    http.shutdown()
    rows = []
    for i, (name, capacity) in enumerate(PHASES):
        start, end = i * phase_s, (i + 1) * phase_s
        calls = [(t, s) for calls in per_process for t, s in calls if start <= t < end]
        steady = [s for t, s in calls if t >= start + min(10.0, phase_s / 3)]
        minutes = (end - start - min(10.0, phase_s / 3)) / 60
        answered = [sum(1 for t, s in calls if s == 200 and start <= t < end) for calls in per_process]
        rows.append(
            {
                "phase": name,
                "capacity": capacity,
                "throttled": sum(1 for _, s in calls if s == 429) / max(len(calls), 1),
                "use": sum(1 for s in steady if s == 200) / (capacity * minutes),
                "jain": jain(answered),
            }
        )
    return rows


def main() -> None:
    args = arguments(__doc__ or "")
    phase_s = 3.0 if args.quick else 40.0
    server = Server(module=True, binary=args.servers[0], module_path=args.module)
    try:
        name = server_name(redis.Redis(port=server.port))
        results = {}
        for label, ours in (("ours (AdaptiveLimit)", True), ("per-process backoff", False)):
            progress(f"{label}: {len(PHASES)} phases of {phase_s:.0f} s")
            results[label] = run(server.port, phase_s, ours)
    finally:
        server.close()
    lines = [
        f"# The adaptive limit, a real run ({name}, {PROCESSES} processes of {THREADS} callers, "
        f"phases of {phase_s:.0f} s)",
        "",
        "| fleet | phase | capacity a minute | 429s | use (after 10 s) | Jain |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    write_report([*lines, *table_rows(results), ""], args.out, args.quick, "the adaptive limit's real run")


if __name__ == "__main__":
    main()
