"""The TTL-leak story, reproduced against a real server: the classic limiter (GET the counter, SET it
with an expiry if missing, INCR it) run by several clients with short windows, first as it is, then
with the module's guard on. Same clients, same code; only `ratelimit.guard` changes.

    python3 demo.py [--quick]

REDIS_SERVER and RATELIMIT_MODULE say which server and module to use (make demo sets them). Exits 1
if a counter is left without TTL while the guard is on.
"""

import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

import redis

CLIENTS = 8
KEYS = 50
WINDOW_S = 1


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def allow(r, key, limit):
    """The limiter from the story, unchanged: the key can expire between the GET and the INCR,
    and then INCR recreates it without a TTL."""
    if r.get(key) is None:
        r.set(key, 0, exat=int(time.time()) + WINDOW_S)
    return r.incr(key) <= limit


def traffic(port, seconds):
    """CLIENTS threads calling allow() on KEYS identities; returns how many calls they made."""
    calls = [0] * CLIENTS
    deadline = time.time() + seconds

    def client(i):
        r = redis.Redis(port=port)
        n = 0
        while time.time() < deadline:
            allow(r, f"rl:user:{(n * 7 + i) % KEYS}", limit=100)
            n += 1
        calls[i] = n

    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(calls)


def leaked(r):
    """Counters without TTL, as RATELIMIT.AUDIT finds them and as a client-side SCAN + TTL does."""
    audit = r.execute_command("RATELIMIT.AUDIT", "rl:", "LIMIT", "0")
    audit = dict(zip(audit[::2], audit[1::2])) if isinstance(audit, list) else audit
    no_ttl = sum(1 for key in r.scan_iter(match="rl:*", count=1000) if r.ttl(key) == -1)
    return audit[b"leaked"], no_ttl


def main():
    seconds = 3 if "--quick" in sys.argv else 10
    with tempfile.TemporaryDirectory() as workdir:
        port = free_port()
        server = subprocess.Popen(
            [
                os.environ.get("REDIS_SERVER", "redis-server"),
                "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", workdir,
                "--loadmodule", os.environ["RATELIMIT_MODULE"],
            ],
            stdout=subprocess.DEVNULL,
        )
        try:
            r = redis.Redis(port=port)
            for _ in range(100):
                try:
                    r.ping()
                    break
                except redis.ConnectionError:
                    time.sleep(0.05)
            rows = []
            for guard in ("", f"rl: {WINDOW_S}"):
                r.flushall()
                r.config_set("ratelimit.guard", guard)
                heals_before = int(r.info("ratelimit")["ratelimit_guard_heals"])
                calls = traffic(port, seconds)
                audit, no_ttl = leaked(r)
                heals = int(r.info("ratelimit")["ratelimit_guard_heals"]) - heals_before
                rows.append(("off" if not guard else "on", calls, audit, no_ttl, heals))
        finally:
            server.terminate()
            server.wait()

    print(f"{CLIENTS} clients, {KEYS} identities, {WINDOW_S} s windows, {seconds} s per run:\n")
    print("| guard | limiter calls | leaked (RATELIMIT.AUDIT) | TTL -1 (SCAN + TTL) | guard heals |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for guard, calls, audit, no_ttl, heals in rows:
        print(f"| {guard} | {calls} | {audit} | {no_ttl} | {heals} |")
    off, on = rows
    if on[2] or on[3]:
        print("\nthe guard left counters without TTL")
        return 1
    if not off[2]:
        print("\n(no counter leaked without the guard this time: the race is a matter of timing)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
