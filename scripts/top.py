#!/usr/bin/env python3
"""Who is being limited, refreshed in the terminal: RATELIMIT.TOP's denied and admitted views
side by side, with the decisions per second from INFO. Python's standard library only.

  scripts/top.py --port 6380            (make top PORT=6380)
  scripts/top.py --port 6380 --once     (print one screen and exit)

Ctrl-C stops it. --user/--password (or REDISCLI_AUTH) log in first: the view shows only the keys
that user may read.
"""

import argparse
import os
import shutil
import socket
import sys
import time


class Connection:
    """A RESP2 connection: commands out, replies in."""

    def __init__(self, host, port):
        self.sock = socket.create_connection((host, port), timeout=5)
        self.buf = b""

    def call(self, *words):
        out = [b"*%d\r\n" % len(words)]
        for w in words:
            w = w if isinstance(w, bytes) else str(w).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(w), w))
        self.sock.sendall(b"".join(out))
        return self.reply()

    def line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("the server closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def exactly(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("the server closed the connection")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def reply(self):
        line = self.line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            return None if int(rest) < 0 else self.exactly(int(rest))
        if kind == b"*":
            return None if int(rest) < 0 else [self.reply() for _ in range(int(rest))]
        raise RuntimeError(f"unexpected reply {line!r}")


def entries(con, view, count):
    """[(key, count, error)] of one view; each entry is a flat field/value array under RESP2."""
    out = []
    for flat in con.call("RATELIMIT.TOP", view, "COUNT", count):
        fields = {name.decode() if isinstance(name, bytes) else name: value for name, value in zip(flat[0::2], flat[1::2])}
        out.append((fields["key"].decode(errors="replace"), fields["count"], fields["error"]))
    return out


def decisions(con):
    """Admitted and denied decisions so far, over every limiter command."""
    admitted = denied = 0
    for line in con.call("INFO", "ratelimit").decode().splitlines():
        name, _, value = line.partition(":")
        # One numeric field per command and outcome: ratelimit_decisions_hit_admitted:5.
        if name.startswith("ratelimit_decisions_") and value.isdigit():
            if name.endswith("_shadow_denied"):
                continue
            if name.endswith("_admitted"):
                admitted += int(value)
            elif name.endswith("_denied"):
                denied += int(value)
    return admitted, denied


def column(title, rows, width):
    lines = [f"{title:<{width}}", "-" * width]
    key_width = max(width - 26, 8)
    for rank, (key, count, error) in enumerate(rows, 1):
        key = key if len(key) <= key_width else key[: key_width - 1] + "~"
        bound = f"+-{error}" if error else ""
        lines.append(f"{rank:>2} {key:<{key_width}} {count:>12} {bound:<9}"[:width].ljust(width))
    return lines


def screen(con, count, rates):
    width = max((shutil.get_terminal_size((120, 40)).columns - 3) // 2, 40)
    left = column("DENIED (calls)", entries(con, "DENIED", count), width)
    right = column("ADMITTED (cost)", entries(con, "ADMITTED", count), width)
    left += [" " * width] * (len(right) - len(left))
    right += [" " * width] * (len(left) - len(right))
    head = time.strftime("%H:%M:%S") + f"  admitted {rates[0]}  denied {rates[1]}"
    return "\n".join([head, ""] + [f"{a} | {b}" for a, b in zip(left, right)])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=6380)
    parser.add_argument("--user")
    parser.add_argument("--password", default=os.environ.get("REDISCLI_AUTH"))
    parser.add_argument("--count", type=int, default=20)
    parser.add_argument("--every", type=float, default=1.0, help="seconds between refreshes")
    parser.add_argument("--once", action="store_true", help="print one screen and exit")
    args = parser.parse_args()

    con = Connection(args.host, args.port)
    if args.password:
        con.call("AUTH", *([args.user] if args.user else []), args.password)
    before, at = decisions(con), time.monotonic()
    if args.once:
        print(screen(con, args.count, (f"{before[0]} so far", f"{before[1]} so far")))
        return
    try:
        while True:
            time.sleep(args.every)
            now, now_at = decisions(con), time.monotonic()
            per_s = [f"{(n - b) / (now_at - at):,.0f}/s" for n, b in zip(now, before)]
            before, at = now, now_at
            sys.stdout.write("\x1b[H\x1b[2J" + screen(con, args.count, per_s) + "\n")
            sys.stdout.flush()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
