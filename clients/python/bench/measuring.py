"""What `make bench`'s Python scripts share: a process's CPU clock, a server's name as the reports
write it, the command line every script takes, and writing its report."""

from __future__ import annotations

import argparse
import ctypes
import sys
import time
from pathlib import Path
from typing import Any


def cpu_ns(pid: int) -> int:
    """The process's CPU time (every thread's, ended ones included), from its CPU clock."""
    clock = ctypes.c_int()
    if ctypes.CDLL(None, use_errno=True).clock_getcpuclockid(pid, ctypes.byref(clock)) != 0:
        raise OSError(ctypes.get_errno(), f"no CPU clock for process {pid}")
    return time.clock_gettime_ns(clock.value)


def server_name(client: Any) -> str:
    """ "Redis 7.0.15" or "Valkey 8.1.8", from the server's INFO."""
    version = client.info("server")
    return f"{'Valkey' if 'valkey_version' in version else 'Redis'} " + str(
        version.get("valkey_version") or version["redis_version"]
    )


def arguments(doc: str) -> argparse.Namespace:
    """--servers, --module, --out and --quick, described by the script's docstring."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--servers", nargs="+", required=True, help="server binaries")
    parser.add_argument("--module", required=True, help="the built module")
    parser.add_argument("--out", required=True, help="the markdown report to write")
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    return parser.parse_args()


_STARTED = time.monotonic()


def progress(what: str) -> None:
    """A line on stderr as each row runs, with the time since the bench began."""
    elapsed = int(time.monotonic() - _STARTED)
    print(f"bench [{elapsed // 60:02}:{elapsed % 60:02}] {what}", file=sys.stderr, flush=True)


def write_report(lines: list[str], out: str, quick: bool, what: str) -> None:
    """The report to `out`, and on stdout (a smoke run says only that it passed)."""
    report = "\n".join(lines)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(report, encoding="utf-8")
    print(report if not quick else f"{what} bench smoke run passed; report in {out}")
