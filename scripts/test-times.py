#!/usr/bin/env python3
"""Where `make test`'s minutes go: each phase's time, and its slowest tests.

  scripts/test-times.py start                     forget the last run's times
  scripts/test-times.py phase NAME -- CMD ...     run CMD as phase NAME, timed
  scripts/test-times.py tests LABEL -- CMD ...    run CMD, its output passed through, and keep the
                                                  time of each test it reports (pytest's --durations,
                                                  node --test's spec reporter, Maven Surefire's
                                                  classes), named with LABEL
  scripts/test-times.py suite LABEL JOBS -- ARGS   run the test files `cargo test --release --locked
                                                  ARGS` builds, JOBS at a time (they mostly wait on
                                                  windows, leases and servers), each one's output
                                                  printed whole when it is done, and keep their times
  scripts/test-times.py report                    print the phases and the 15 slowest tests

Times go to target/test-times/ (phases.tsv, tests.tsv). A command's exit status is the script's.
"""

import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLDER = os.path.join(ROOT, "target", "test-times")
PHASES = os.path.join(FOLDER, "phases.tsv")
TESTS = os.path.join(FOLDER, "tests.tsv")

# What each runner prints about a test's time.
PYTEST = re.compile(r"^([0-9.]+)s (?:call|setup|teardown)\s+(\S+)")
NODE = re.compile(r"^\s*✔ (.+) \(([0-9.]+)ms\)$")
SUREFIRE = re.compile(r"Tests run: .*, Time elapsed: ([0-9.]+) s.* -- in (\S+)")


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
    for line in process.stdout:
        sys.stdout.write(line)
        if m := PYTEST.match(line):
            append(TESTS, label, m.group(2), m.group(1))
        elif m := NODE.match(line):
            append(TESTS, label, m.group(1), f"{float(m.group(2)) / 1000:.2f}")
        elif m := SUREFIRE.search(line):
            append(TESTS, label, m.group(2), m.group(1))
    sys.stdout.flush()
    return process.wait()


def suite(args):
    (label, jobs), cargo_args = command(args)
    built = subprocess.run(
        ["cargo", "test", "--release", "--locked", "--no-run", "--message-format=json", *cargo_args],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if built.returncode != 0:
        sys.stderr.write(built.stderr)
        return built.returncode
    files = []
    for line in built.stdout.splitlines():
        artifact = json.loads(line)
        if artifact.get("reason") != "compiler-artifact" or not artifact.get("executable"):
            continue
        if "test" in artifact["target"]["kind"]:
            files.append((os.path.relpath(artifact["target"]["src_path"], ROOT), artifact["executable"]))

    def run(file):
        name, executable = file
        started = time.monotonic()
        done = subprocess.run(
            [executable], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
        )
        return name, executable, done.returncode, done.stdout, time.monotonic() - started

    failed = []
    with ThreadPoolExecutor(max_workers=int(jobs)) as pool:
        for name, executable, code, output, seconds in pool.map(run, files):
            sys.stdout.write(f"     Running {name} ({os.path.relpath(executable, ROOT)})\n{output}")
            sys.stdout.flush()
            append(TESTS, label, name, f"{seconds:.2f}")
            if code != 0:
                failed.append(name)
    if failed:
        print(f"test-times: failed in {label}: {' '.join(failed)}")
        return 1
    return 0


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
    if what == "suite":
        return suite(args)
    if what == "report":
        return report()
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main())
