#!/usr/bin/env python3
"""Instructions a call costs the server, counted by callgrind (repeatable where timings are not).

Starts a redis-server (or valkey-server) under `valgrind --tool=callgrind` on a free loopback port,
optionally with the module and the Functions library loaded, pipes CALLS iterations of the given
commands into it with `redis-cli --pipe`, and prints the instructions per iteration above a run of
as many PINGs (what parsing and answering any command costs). The per-function profile of the last
run is left in callgrind.out for callgrind_annotate.

  scripts/callgrind.py --module target/release/libredis_ratelimit.so -- RATELIMIT.HIT {key} 100 60
  scripts/callgrind.py --module target/release/libredis_ratelimit.so --config ratelimit.top-keys 0 -- \\
      RATELIMIT.HIT {key} 100 60
  scripts/callgrind.py --library -- FCALL ratelimit_hit 1 {key} 100 60
  scripts/callgrind.py --script bench.lua -- EVALSHA {sha} 1 {key} 1 60000
  scripts/callgrind.py --module target/release/libredis_ratelimit.so -- \\
      RATELIMIT.ACQUIRE {key} 10 30 ID {i} \\; RATELIMIT.RELEASE {key} {i}

In the commands, {key} is one of --keys keys (round robin), {i} the iteration's number and {sha}
the --script's SHA1 ({sha2} a second --script's); `;` separates the commands of one iteration.
With --reserve, each key is first reserved on by that command (with RESERVE: the reservation ends
its reply), in both runs alike, and {reservation} is that key's reservation; {terms} is it without
its id (its last 16 hex digits), and {id} the iteration's own id, so that {terms}{id} is another
reservation on the same terms at each iteration (each settled once):

  scripts/callgrind.py --module target/release/libredis_ratelimit.so \
      --reserve "RATELIMIT.HIT {key} 1000000 3600 COST 1000 RESERVE" -- RATELIMIT.SETTLE {key} {terms}{id} 999
With --cache-sim, callgrind also simulates the caches (the machine's sizes) and the branch
predictor, and the whole cost of an iteration is printed with its misses, its mispredicted
branches and the cycles KCachegrind would estimate from them: where a change adds few
instructions but evicts the server's own code or data, this is the figure that moves.
"""

import argparse
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def resp(words):
    out = [f"*{len(words)}\r\n".encode()]
    for word in words:
        data = word.encode() if isinstance(word, str) else word
        out.append(f"${len(data)}\r\n".encode() + data + b"\r\n")
    return b"".join(out)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cli(port, *args, stdin=None):
    return subprocess.run(["redis-cli", "-p", str(port), *args], input=stdin, capture_output=True, check=True)


def loader_line(server):
    """The command that runs `server`: the servers unpacked from other Debian suites are shell
    wrappers around their own loader (scripts/debian-server.py), which valgrind must run itself."""
    with open(shutil.which(server) or server, "rb") as f:
        if f.read(2) != b"#!":
            return [server]
    here = os.path.dirname(os.path.realpath(shutil.which(server) or server))
    root = os.path.join(here, "root")
    name = os.path.basename(server)
    return [os.path.join(root, "usr/lib64/ld-linux-x86-64.so.2"), "--library-path",
            os.path.join(root, "usr/lib/x86_64-linux-gnu"), os.path.join(root, "usr/bin", name)]


def last_bulk_strings(sock, replies):
    """The last bulk string of each of `replies` array replies read from `sock` (None for a nil)."""
    data = b""

    def line():
        nonlocal data
        while b"\r\n" not in data:
            data += sock.recv(65536)
        head, data = data.split(b"\r\n", 1)
        return head

    def value():
        nonlocal data
        head = line()
        if head[:1] == b"*":
            return [value() for _ in range(int(head[1:]))][-1]
        if head[:1] == b"$":
            size = int(head[1:])
            if size < 0:
                return None
            while len(data) < size + 2:
                data += sock.recv(65536)
            text, data = data[:size], data[size + 2:]
            return text
        if head[:1] == b"-":
            sys.exit(f"the --reserve command failed: {head.decode()}")
        return head

    return [value() for _ in range(replies)]


def counts(server, module, setup, commands, configs=(), cache_sim=False, reserve=None):
    """The events of one server run fed `setup` (untimed but counted alike), then `reserve`'s
    commands (their reservations go into `commands`, a function of them), and `commands`: total
    instructions (`Ir`), and with `cache_sim` the simulated caches' misses and branch
    mispredictions too."""
    port = free_port()
    work = tempfile.mkdtemp(prefix="callgrind-")
    out = os.path.join(work, "callgrind.out")
    sim = "yes" if cache_sim else "no"
    argv = ["valgrind", "--tool=callgrind", f"--cache-sim={sim}", f"--branch-sim={sim}",
            f"--callgrind-out-file={out}", *loader_line(server),
            "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", work]
    if module:
        argv += ["--loadmodule", module]
    for name, value in configs:
        argv += [f"--{name}", value]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            if subprocess.run(["redis-cli", "-p", str(port), "PING"], capture_output=True).stdout.strip() == b"PONG":
                break
            time.sleep(0.1)
        else:
            sys.exit("the server under valgrind did not answer")
        if setup:
            cli(port, "--pipe", stdin=setup)
        if reserve:
            with socket.create_connection(("127.0.0.1", port)) as sock:
                sock.sendall(b"".join(reserve))
                commands = commands(last_bulk_strings(sock, len(reserve)))
        if commands:
            cli(port, "--pipe", stdin=commands)
        # The server exits on SHUTDOWN before it answers: no reply to check.
        subprocess.run(["redis-cli", "-p", str(port), "SHUTDOWN", "NOSAVE"], capture_output=True)
        proc.wait(timeout=120)
        with open(out) as f:
            lines = f.read().splitlines()
        events = next(line.split()[1:] for line in lines if line.startswith("events:"))
        totals = next(line.split()[1:] for line in lines if line.startswith(("summary:", "totals:")))
        shutil.copy(out, "callgrind.out")
        return dict(zip(events, map(int, totals)))
    finally:
        if proc.poll() is None:
            proc.kill()
        shutil.rmtree(work, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", default="redis-server")
    parser.add_argument("--module", help="a module to load (the built .so)")
    parser.add_argument("--library", action="store_true", help="load functions/ratelimit.lua first")
    parser.add_argument("--functions", help="another Functions library to load first (e.g. scripts/library-floors.lua)")
    parser.add_argument("--script", action="append", default=[],
                        help="a Lua file to SCRIPT LOAD first ({sha} in the commands; a second one {sha2})")
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--keys", type=int, default=1_000)
    parser.add_argument("--config", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                        help="a server or module config, e.g. --config ratelimit.top-keys 0")
    parser.add_argument("--cache-sim", action="store_true",
                        help="also simulate the caches: misses per iteration, and cycles estimated from them")
    parser.add_argument("--reserve", help="a command run once per key first; {reservation}: its reply's last string")
    parser.add_argument("command", nargs="+")
    args = parser.parse_args()

    setup = b""
    if args.library:
        with open(os.path.join(ROOT, "functions", "ratelimit.lua"), "rb") as f:
            setup += resp(["FUNCTION", "LOAD", "REPLACE", f.read()])
    if args.functions:
        with open(args.functions, "rb") as f:
            setup += resp(["FUNCTION", "LOAD", "REPLACE", f.read()])
    shas = {}
    for n, script in enumerate(args.script, 1):
        with open(script, "rb") as f:
            body = f.read()
        shas["sha" if n == 1 else f"sha{n}"] = hashlib.sha1(body).hexdigest()
        setup += resp(["SCRIPT", "LOAD", body])
    groups = [[]]
    for word in args.command:
        if word == ";":
            groups.append([])
        else:
            groups[-1].append(word)
    groups = [g for g in groups if g]
    reserve = args.reserve and [resp([w.format(key=f"cg:{k}") for w in args.reserve.split()]) for k in range(args.keys)]

    def calls(reservations=()):
        made = []
        for i in range(args.calls):
            fill = {"key": f"cg:{i % args.keys}", "i": str(i), **shas}
            if reservations:
                fill["reservation"] = reservations[i % args.keys].decode()
                fill["terms"], fill["id"] = fill["reservation"][:-16], f"{i:016x}"
            made += [resp([w.format(**fill) for w in group]) for group in groups]
        return b"".join(made)

    pings = resp(["PING"]) * (args.calls * len(groups))
    # The server changes into its --dir before it loads modules: a relative path would miss.
    module = args.module and os.path.abspath(args.module)
    run = lambda commands: counts(args.server, module, setup, commands, args.config, args.cache_sim, reserve)
    base = run((lambda _: pings) if reserve else pings)
    if args.cache_sim:
        # What starting, setting up and stopping cost, to take from the run's totals.
        idle = run((lambda _: b"") if reserve else b"")
    total = run(calls if reserve else calls())
    print(f"{(total['Ir'] - base['Ir']) / args.calls:,.0f} instructions an iteration above as many PINGs "
          f"({args.calls:,} iterations of {len(groups)} command(s) on {args.keys:,} keys; "
          f"profile in callgrind.out)")
    if args.cache_sim:
        each = {event: (total[event] - idle[event]) / args.calls for event in total}
        l1 = each["I1mr"] + each["D1mr"] + each["D1mw"]
        ll = each["ILmr"] + each["DLmr"] + each["DLmw"]
        mispredicted = each["Bcm"] + each["Bim"]
        # KCachegrind's estimate: a first-level miss costs about 10 cycles, a last-level one 100;
        # and a mispredicted branch about 10 (its own figure for them).
        print(f"an iteration, whole: {each['Ir']:,.0f} instructions, L1 misses {each['I1mr']:,.1f} "
              f"instruction + {each['D1mr'] + each['D1mw']:,.1f} data, last-level misses {ll:,.1f}, "
              f"branches mispredicted {mispredicted:,.1f}; "
              f"{each['Ir'] + 10 * l1 + 100 * ll + 10 * mispredicted:,.0f} cycles estimated")


if __name__ == "__main__":
    main()
