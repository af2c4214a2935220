#!/usr/bin/env python3
"""Where `make test`'s minutes go: each phase's time, and its slowest tests.

  scripts/test-times.py start                     forget the last run's times
  scripts/test-times.py phase NAME -- CMD ...     run CMD as phase NAME, timed
  scripts/test-times.py tests LABEL -- CMD ...    run CMD, its output passed through, and keep the
                                                  time of each test it reports (cargo test's test
                                                  files, pytest's --durations, node --test's and
                                                  go test -v's tests), named with LABEL
  scripts/test-times.py report                    print the phases and the 15 slowest tests

Times go to target/test-times/ (phases.tsv, tests.tsv). A command's exit status is the script's.
"""

import os
import re
import subprocess
import sys
import time

FOLDER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "target", "test-times")
PHASES = os.path.join(FOLDER, "phases.tsv")
TESTS = os.path.join(FOLDER, "tests.tsv")

# What each runner prints about a test's time.
CARGO_FILE = re.compile(r"^\s+Running (?:unittests )?(\S+)")
CARGO_DONE = re.compile(r"^test result: .* finished in ([0-9.]+)s")
PYTEST = re.compile(r"^([0-9.]+)s (?:call|setup|teardown)\s+(\S+)")
NODE = re.compile(r"^\s*✔ (.+) \(([0-9.]+)ms\)$")
GO = re.compile(r"^\s*--- (?:PASS|FAIL): (\S+) \(([0-9.]+)s\)")


def append(path, *fields):
    os.makedirs(FOLDER, exist_ok=True)
    with open(path, "a") as f:
        f.write("\t".join(str(x) for x in fields) + "\n")


def command(args):
    if "--" not in args:
        sys.exit("test-times: the command goes after --")
    i = args.index("--")
    return args[:i], args[i + 1 :]


def phase(args):
    (name,), cmd = command(args)
    started = time.monotonic()
    code = subprocess.call(cmd)
    append(PHASES, name, f"{time.monotonic() - started:.1f}", code)
    return code


def tests(args):
    (label,), cmd = command(args)
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    running = None
    for line in process.stdout:
        sys.stdout.write(line)
        if m := CARGO_FILE.match(line):
            running = m.group(1)
        elif (m := CARGO_DONE.match(line)) and running:
            append(TESTS, label, running, m.group(1))
            running = None
        elif m := PYTEST.match(line):
            append(TESTS, label, m.group(2), m.group(1))
        elif m := NODE.match(line):
            append(TESTS, label, m.group(1), f"{float(m.group(2)) / 1000:.2f}")
        elif m := GO.match(line):
            append(TESTS, label, m.group(1), m.group(2))
    sys.stdout.flush()
    return process.wait()


def rows(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [line.rstrip("\n").split("\t") for line in f if line.strip()]


def report():
    phases = rows(PHASES)
    total = sum(float(p[1]) for p in phases)
    print("\n== make test: the time of each phase ==")
    for name, seconds, code in phases:
        failed = "" if code == "0" else f"  (exit {code})"
        print(f"{float(seconds):8.1f} s  {name}{failed}")
    print(f"{total:8.1f} s  in all")
    slowest = sorted(rows(TESTS), key=lambda r: -float(r[2]))[:15]
    print("\n== the slowest tests (a test file for cargo; phases run two at a time) ==")
    for label, name, seconds in slowest:
        print(f"{float(seconds):8.1f} s  {name}  [{label}]")
    return 0


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    what, args = sys.argv[1], sys.argv[2:]
    if what == "start":
        for path in (PHASES, TESTS):
            if os.path.exists(path):
                os.remove(path)
        return 0
    if what == "phase":
        return phase(args)
    if what == "tests":
        return tests(args)
    if what == "report":
        return report()
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main())
