#!/usr/bin/env python3
"""Where `make test`'s minutes go: each phase's time, and its slowest tests.

  scripts/test-times.py start                     forget the last run's times
  scripts/test-times.py phase NAME -- CMD ...     run CMD as phase NAME, timed
  scripts/test-times.py tests LABEL -- CMD ...    run CMD, its output passed through, and keep the
                                                  time of each test it reports (pytest's --durations,
                                                  node --test's spec reporter, Maven Surefire's
                                                  classes), named with LABEL
  scripts/test-times.py suite LABEL JOBS -- MODS  run the modules MODS of the integration tests'
                                                  binary (tests/integration.rs), each in a process of
                                                  its own, JOBS at a time (they mostly wait on
                                                  windows, leases and servers), each one's output
                                                  printed whole when it is done, and keep their times
  scripts/test-times.py report                    print when each phase began, its time and CPU
                                                  (its processes' user and system time) against its
                                                  budget (docs/development.md's table), a warning
                                                  line for each phase over it and for the whole run
                                                  over its own (never a failure), the run's time
                                                  since start, and the 15 slowest tests

Times go to target/test-times/ (started, phases.tsv, tests.tsv). A command's exit status is the
script's.
"""

import json
import os
import re
import resource
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLDER = os.path.join(ROOT, "target", "test-times")
STARTED = os.path.join(FOLDER, "started")
PHASES = os.path.join(FOLDER, "phases.tsv")
# The budgets: the table of docs/development.md whose header's first cell is "phase", one row a
# phase: its name in backquotes, then its budget in seconds ("90 s").
PLAN = os.path.join(ROOT, "docs", "development.md")
BUDGET_ROW = re.compile(r"^\| `([^`]+)` \| ([0-9]+) s \|")
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


def cpu_of_children():
    """The CPU seconds (user and system) of every process this one has waited for, and theirs."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def phase(args):
    (name,), cmd = command(args)
    began, started, cpu = time.time(), time.monotonic(), cpu_of_children()
    # make's jobserver descriptors pass through, so that a make inside shares the one outside's.
    code = subprocess.call(cmd, close_fds=False)
    append(PHASES, name, f"{time.monotonic() - started:.1f}", code, f"{cpu_of_children() - cpu:.1f}", f"{began:.1f}")
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
    (label, jobs), modules = command(args)
    built = subprocess.run(
        ["cargo", "test", "--release", "--locked", "--no-run", "--message-format=json", "--test", "integration"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if built.returncode != 0:
        sys.stderr.write(built.stderr)
        return built.returncode
    artifacts = [json.loads(line) for line in built.stdout.splitlines()]
    (executable,) = [
        a["executable"]
        for a in artifacts
        if a.get("reason") == "compiler-artifact" and a.get("executable") and "test" in a["target"]["kind"]
    ]
    listed = subprocess.run([executable, "--list", "--format", "terse"], capture_output=True, text=True, check=True)
    tests = [line.removesuffix(": test") for line in listed.stdout.splitlines() if line.endswith(": test")]

    # In the order named (the slowest first, so that the last to start are short); each module's
    # tests by their exact names, as a filter would also take a module whose name holds another's.
    def run(module):
        names = [t for t in tests if t.startswith(module + "::")]
        started = time.monotonic()
        if not names:
            return module, 1, f"test-times: tests/integration.rs has no tests in a module {module}\n", 0.0
        done = subprocess.run(
            [executable, "--exact", *names],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
        return module, done.returncode, done.stdout, time.monotonic() - started

    failed = []
    with ThreadPoolExecutor(max_workers=int(jobs)) as pool:
        for module, code, output, seconds in pool.map(run, modules):
            name = f"tests/{module}.rs"
            sys.stdout.write(f"     Running {name} ({os.path.relpath(executable, ROOT)} {module}::)\n{output}")
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


def budgets():
    with open(PLAN) as f:
        return {m.group(1): float(m.group(2)) for line in f if (m := BUDGET_ROW.match(line))}


def report():
    phases, budget = rows(PHASES), budgets()
    start = min((float(p[4]) for p in phases), default=time.time())
    if os.path.exists(STARTED):
        with open(STARTED) as f:
            start = float(f.read())
    print("\n== make test: each phase against its budget (docs/development.md), in the order they began ==")
    print("  from     time      CPU   budget  phase")
    warnings = []
    for name, seconds, code, cpu, began in sorted(phases, key=lambda p: float(p[4])):
        failed = "" if code == "0" else f"  (exit {code})"
        limit = budget.get(name)
        shown = f"{limit:6.0f} s" if limit is not None else "    none"
        print(f"{float(began) - start:6.0f} {float(seconds):6.1f} s {float(cpu):6.1f} s {shown}  {name}{failed}")
        if limit is None:
            warnings.append(f"warning: the phase {name!r} has no budget in docs/development.md")
        elif float(seconds) > limit:
            warnings.append(f"warning: {name} took {float(seconds):.0f} s, over its budget of {limit:.0f} s")
    total, limit = time.time() - start, budget.get("in all")
    print(f"{'':6} {total:6.1f} s {sum(float(p[3]) for p in phases):6.1f} s {limit or 0:6.0f} s  in all")
    if limit is not None and total > limit:
        warnings.append(f"warning: the whole run took {total:.0f} s, over its budget of {limit:.0f} s")
    for line in warnings:
        print(line)
    slowest = sorted(rows(TESTS), key=lambda r: -float(r[2]))[:15]
    print("\n== the slowest tests (a test file for cargo; several run at a time) ==")
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
        os.makedirs(FOLDER, exist_ok=True)
        with open(STARTED, "w") as f:
            f.write(str(time.time()))
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
