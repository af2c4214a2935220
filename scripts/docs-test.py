#!/usr/bin/env python3
"""Every example of the README and the docs, run as written (`make docs-test`, part of `make test`).

    scripts/docs-test.py --server SERVER --python PYTHON --node-dir NODE_DIR --litellm-bin BIN [--jobs N] [PAGE...]

SERVER is the server binary; PYTHON the interpreter of an environment with the Python package and
the frameworks its pages name (make's `latest` set); NODE_DIR the folder where the Node package is
installed beside its frameworks (target/node/installed); BIN the bin folder of an environment made
with the Python package's `litellm` extra. Go comes from the PATH. PAGE: only these pages. N: pages
run at a time (1).

Each page is tried as a reader would: one terminal and one server for the page, its code blocks in
the order they come. The server is `make run`'s (redis.conf.example, the built module), on a free
port of its own: every `6380` of a block (the port `make run` serves on, the one the docs name) is
sent there instead, and a block that names Redis's default port, or makes a client with no
address, fails the check before it runs (it would reach a server this test did not start).

- `console`: each `$ ` line (with its `\\` continuations) runs in the page's bash, under a
  terminal as in a shell (redis-cli prints as it does for a person), and what it prints is held to
  the lines after it up to the next `$ `. A ` # ...` at a line's end is the page's comment and
  not compared; a line `...` stands for any lines, a `...` in a line for any characters. A
  command must succeed.
- `sh`: each line runs in the page's bash and must succeed; nothing is compared.
- `python`: in one interpreter per page (the latest requirements set's environment), the blocks
  sharing their names as in a session; top-level `await` runs on one event loop.
- `js`: each block is an ES module run by Node beside the clients the Node tests install.
- a `text` block right after a python or js block is what that block prints.
- `go`, `go.mod`, `java`, `rust`, `xml`, `yaml` and the like are files: `<!-- docs-test: file NAME -->` before the block
  writes it into the terminal's current folder, where the next commands find it.

The terminal starts in the clone; its `~` is a folder of the page's own.

The server's wall clock stands still (testkit/clock, preloaded), so times and reservations print
as the page shows them: at 2026-12-01 12:00:00 UTC unless `<!-- docs-test: clock ISO-TIME -->`
stands it elsewhere before a block; a `$ ` line whose comment says `(N s later)` or `(N ms
later)` moves it on by that much first, and one that says `(at HH:MM:SS.mmm)` stands it at that
time (UTC) of its day. One whose comment says `(within N s)` tells of something that happens
after a moment (a write another process makes): it runs again until it prints what the page
shows, for N seconds at most. `<!-- docs-test: module-args ARGS -->` anywhere on a page loads the
module with ARGS there.

A block that is not meant to run says so and why, before it: `<!-- docs-test: not run: WHY -->`;
one that would install on the machine (`apt`, `dpkg`, `sudo`, `systemctl`, `docker`, `install
-D`) must. Every other block in those languages runs; blocks without a language (syntax, formats,
output) are text. The count of blocks run and not run is printed, and the run fails on any failure.
"""

import argparse
import datetime
import json
import os
import pty
import random
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import maven_repository

ROOT = Path(__file__).resolve().parent.parent
# The pages a user reads.
PAGE_GLOBS = [
    "README.md",
    "docs/**/*.md",
    "clients/*/README.md",
    "packaging/README.md",
    "packaging/debian/README.md",
    "monitoring/README.md",
]
# What pages name, and what the test serves instead.
DOC_PORT = "6380"
PROXY_PORT = "4000"
DEFAULT_CLOCK = "2026-12-01T12:00:00Z"
# Languages a block runs in, or is a file of; any other tagged block must say why it does not run.
RUN = {"console", "sh", "python", "js"}
FILES = {"go", "go.mod", "java", "rust", "xml", "yaml", "json", "toml", "ini", "conf"}
CODE = RUN | FILES | {"bash", "shell", "ts", "typescript", "lua", "dockerfile"}
# A block that would connect to a server this test did not start.
DEFAULT_SERVER = re.compile(
    r"6379|Redis\(\)|Valkey\(\)|createClient\(\)|Redis\.from_url\(\)|Addr:\s*\"\"|redis://localhost[/\"']"
)
# A command that would change the machine itself (the test runs as root): a page marks it not run.
SYSTEM_WIDE = re.compile(r"(^|[;&|(]\s*|\$ )(sudo|apt|apt-get|dpkg|systemctl|docker|install\s+-D)\b", re.M)
# A redis-cli that does not name `make run`'s port.
DEFAULT_CLI = re.compile(rf"redis-cli(?! -p {DOC_PORT}\b)")
DIRECTIVE = re.compile(r"<!--\s*docs-test:\s*(.*?)\s*-->", re.S)
COMMENT = re.compile(r"\s+#(\s.*)?$")
LATER = re.compile(r"\((\d+(?:\.\d+)?)\s*(s|ms) later\)")
AT = re.compile(r"\(at (\d\d):(\d\d):(\d\d(?:\.\d+)?)\)")
WITHIN = re.compile(r"\(within (\d+) s\)")
MARK = "\x1e"


# A terminal's colour and style codes.
ANSI = re.compile(r"\x1b\[[0-9;]*m")


class Failure(Exception):
    pass


def go_caches():
    """Go's caches where they are for the caller: the pages' `~` is another folder."""
    if not shutil.which("go"):
        return {}
    names = ["GOPATH", "GOMODCACHE", "GOCACHE"]
    values = subprocess.run(["go", "env", *names], capture_output=True, text=True, check=True).stdout.split("\n")
    return dict(zip(names, values, strict=False))


GO_CACHES = go_caches()
# Rust's toolchains and crates where they are for the caller (rustup and cargo find them under
# `~` by default); the build folder and profile are the caller's environment's (make's rust phase).
RUST_HOMES = {
    "CARGO_HOME": os.environ.get("CARGO_HOME", str(Path.home() / ".cargo")),
    "RUSTUP_HOME": os.environ.get("RUSTUP_HOME", str(Path.home() / ".rustup")),
}
# Maven's repository, the clone's own: what a page installs there (this clone's jars) stays for the
# next run, and a `make test` of another clone beside never reads it half-written.
MAVEN_REPOSITORY = str(ROOT / "target" / "docs-test-maven")


def free_port():
    """A free loopback port below those the kernel hands out to outgoing connections
    (ip_local_port_range): a page's server binds it long after (a build may come first), and a
    port from bind(0) is one of those, which any connection could take meanwhile."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    while True:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", random.randrange(10_000, low) if low > 11_000 else 0))
            except OSError:
                continue
            return str(s.getsockname()[1])


class Block:
    def __init__(self, page, line, lang, text, directives):
        self.page, self.line, self.lang, self.text, self.directives = page, line, lang, text, directives
        self.output = None  # a `text` block after it: what it prints

    @property
    def where(self):
        return f"{self.page}:{self.line}"

    def directive(self, name):
        for d in self.directives:
            if d == name or d.startswith(name + " ") or d.startswith(name + ":"):
                return d[len(name) :].lstrip(" :")
        return None


def blocks_of(page, text):
    """The page's fenced blocks, each with the directives in the lines just before it."""
    lines = text.split("\n")
    found, pending, i = [], [], 0
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith("```"):
            # A fence may be indented (a block in a list item): its lines lose that indent.
            indent = len(line) - len(line.lstrip())
            lang = line.strip()[3:].strip().split(" ")[0].lower()
            j = i + 1
            while j < len(lines) and not lines[j].lstrip().startswith("```"):
                j += 1
            body = "\n".join(row[indent:] if row[:indent].isspace() else row for row in lines[i + 1 : j])
            block = Block(page, i + 1, lang, body + "\n", pending)
            if lang == "text" and found and found[-1].lang in ("python", "js") and not pending:
                found[-1].output = block
            else:
                found.append(block)
            pending, i = [], j + 1
            continue
        directives = DIRECTIVE.findall(line)
        if directives:
            pending = pending + directives
        elif line.strip():
            pending = []
        i += 1
    return found


class Clock:
    """The server's frozen wall clock (testkit/clock/clock.c), in Unix ms."""

    def __init__(self, folder):
        self.file = folder / "clock"
        self.ms = 0

    def stand(self, ms):
        self.ms = int(ms)
        nxt = self.file.with_suffix(".next")
        nxt.write_text(str(self.ms))
        nxt.rename(self.file)

    def at(self, iso):
        self.stand(datetime.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)


class Shell:
    """One bash for a page that runs one command at a time, its output a terminal (as a person's
    is: redis-cli prints for a person there), its input the commands."""

    def __init__(self, cwd, env):
        master, slave = pty.openpty()
        self.process = subprocess.Popen(
            ["bash", "--noprofile", "--norc"],
            stdin=subprocess.PIPE,
            stdout=slave,
            stderr=slave,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
        os.close(slave)
        self.master = master

    def run(self, command, timeout):
        self.process.stdin.write((command + "\nprintf '\\036%d\\036' $?\n").encode())
        self.process.stdin.flush()
        out, deadline = b"", time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Failure(f"still running after {timeout} s: {command}\n{out.decode(errors='replace')}")
            ready, _, _ = select.select([self.master], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.master, 65536)
                except OSError:
                    chunk = b""
                if not chunk:
                    raise Failure(f"the shell ended during: {command}\n{out.decode(errors='replace')}")
                out += chunk
                text = out.decode(errors="replace")
                found = re.search(f"{MARK}(\\d+){MARK}", text)
                if found:
                    # What a person sees: no colour codes (Maven writes them even with nothing to colour).
                    return int(found.group(1)), ANSI.sub("", text[: found.start()]).replace("\r\n", "\n")

    def close(self):
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()
        os.close(self.master)


def matches(want, got):
    """Whether the lines `got` are `want`, where a `...` line stands for any lines."""
    if not want:
        return not got
    if want[0] == "...":
        return any(matches(want[1:], got[i:]) for i in range(len(got) + 1))
    return bool(got) and same_line(want[0], got[0]) and matches(want[1:], got[1:])


def same_line(want, got):
    """Whether `got` is the line `want`, where a `...` in it stands for any characters."""
    if "..." not in want:
        return want == got
    return re.fullmatch(".*".join(re.escape(part) for part in want.split("...")), got) is not None


def mismatch(what, got, want):
    return Failure(f"{what} printed\n" + "\n".join(got) + "\n-- where the page shows --\n" + "\n".join(want))


def clean(lines):
    """Lines as compared: no page comments, no trailing blanks."""
    out = [COMMENT.sub("", line).rstrip() for line in lines]
    while out and not out[-1]:
        out.pop()
    return out


def commands_of(block):
    """A console block's commands, each with the lines it prints."""
    lines = block.text.rstrip("\n").split("\n")
    commands, i = [], 0
    while i < len(lines):
        line = lines[i]
        if not line.startswith("$ "):
            raise Failure(f"{block.where}: a line before any `$ ` command: {line!r}")
        command = line[2:]
        while command.rstrip().endswith("\\") and i + 1 < len(lines):
            i += 1
            command = command.rstrip()[:-1] + " " + lines[i].strip()
        i += 1
        printed = []
        while i < len(lines) and not lines[i].startswith("$ "):
            printed.append(lines[i])
            i += 1
        commands.append((command, printed))
    return commands


class Page:
    """One page's run: its folder, its server, its terminal."""

    def __init__(self, path, args, work):
        self.args = args
        self.name = str(path.relative_to(ROOT))
        self.folder = work / re.sub(r"[^A-Za-z0-9]+", "-", self.name)
        self.folder.mkdir(parents=True)
        # The terminal starts in the clone, as a reader does (through a link, so that `~`, the
        # page's folder, holds what the page makes elsewhere).
        (self.folder / "redis-ratelimit").symlink_to(ROOT)
        self.ports = {DOC_PORT: free_port(), PROXY_PORT: free_port()}
        self.clock = Clock(self.folder)
        self.clock.at(DEFAULT_CLOCK)
        self.server = self.shell = self.session = None
        self.ran = self.skipped = 0

    def local(self, text):
        """`text` with the docs' ports made this page's (an HTTP server's where it is one:
        `localhost:4000`, `127.0.0.1:4000`, `--port 4000`, `--server.port=4000`; 4000 is also a count)."""
        text = re.sub(rf"(?<![0-9]){DOC_PORT}(?![0-9])", self.ports[DOC_PORT], text)
        return re.sub(rf"(localhost:|127\.0\.0\.1:|--port |--server\.port=){PROXY_PORT}(?![0-9])", rf"\g<1>{self.ports[PROXY_PORT]}", text)

    def env(self):
        env = dict(os.environ)
        env["PATH"] = os.pathsep.join([str(self.args.litellm_bin), env["PATH"]])
        env.update({"TERM": "dumb", "LC_ALL": "C.UTF-8", "HOME": str(self.folder)})
        env.update(GO_CACHES)
        env.update(RUST_HOMES)
        env["MAVEN_OPTS"] = f"-Dmaven.repo.local={self.args.maven_repository}"
        env.pop("REDIS_URL", None)
        return env

    def start_server(self, module_args):
        conf = (ROOT / "redis.conf.example").read_text()
        if module_args:
            conf = re.sub(r"^(loadmodule \S+)$", rf"\1 {module_args}", conf, flags=re.M)
        (self.folder / "redis.conf").write_text(conf)
        env = dict(os.environ, LD_PRELOAD=str(self.args.clock_lib), RATELIMIT_TEST_CLOCK=str(self.clock.file))
        with open(self.folder / "server.log", "w") as log:
            self.server = subprocess.Popen(
                [self.args.server, str(self.folder / "redis.conf"), "--port", self.ports[DOC_PORT]],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.server.poll() is None:
            try:
                with socket.create_connection(("127.0.0.1", int(self.ports[DOC_PORT])), timeout=1) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.05)
        raise Failure(f"{self.name}: the server did not start:\n{(self.folder / 'server.log').read_text()}")

    def run(self, text, blocks):
        directives = DIRECTIVE.findall(text)
        module_args = next((d.split(" ", 1)[1] for d in directives if d.startswith("module-args ")), None)
        self.start_server(module_args)
        self.shell = Shell(self.folder / "redis-ratelimit", self.env())
        try:
            for block in blocks:
                self.block(block)
        finally:
            self.close()

    def block(self, block):
        why = block.directive("not run")
        if why is not None:
            if not why:
                raise Failure(f"{block.where}: `not run` says no reason")
            self.skipped += 1
            return
        if block.lang not in CODE:
            return
        clock = block.directive("clock")
        if clock:
            self.clock.at(clock)
        name = block.directive("file")
        if name:
            _, cwd = self.shell.run("pwd", timeout=10)
            path = Path(cwd.strip()) / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(self.local(block.text))
            self.ran += 1
            return
        if block.lang not in RUN:
            raise Failure(f"{block.where}: a {block.lang} block that neither runs, nor is a file, nor says why not")
        if DEFAULT_SERVER.search(block.text) or (block.lang in ("console", "sh") and DEFAULT_CLI.search(block.text)):
            raise Failure(f"{block.where}: connects to the default port, not to `make run`'s {DOC_PORT}")
        if block.lang in ("console", "sh") and SYSTEM_WIDE.search(block.text):
            raise Failure(f"{block.where}: installs on the machine itself: mark it not run, and say why")
        getattr(self, block.lang)(block)
        self.ran += 1

    def console(self, block):
        for command, printed in commands_of(block):
            later, at = LATER.search(command), AT.search(command)
            if later:
                self.clock.stand(self.clock.ms + float(later.group(1)) * (1000 if later.group(2) == "s" else 1))
            elif at:
                day = self.clock.ms - self.clock.ms % 86_400_000
                hours, minutes, seconds = int(at.group(1)), int(at.group(2)), float(at.group(3))
                self.clock.stand(day + round(((hours * 60 + minutes) * 60 + seconds) * 1000))
            want = [self.local(line) for line in clean(printed)]
            within = WITHIN.search(command)
            deadline = time.monotonic() + (int(within.group(1)) if within else 0)
            while True:
                rc, out = self.shell.run(self.local(command), timeout=300)
                got = clean(out.split("\n"))
                if rc == 0 and matches(want, got) or time.monotonic() >= deadline:
                    break
                time.sleep(0.2)
            if rc != 0:
                raise Failure(f"{block.where}: `{command}` exited {rc}:\n{out}")
            if not matches(want, got):
                raise mismatch(f"{block.where}: `{command}`", got, want)

    def sh(self, block):
        for line in block.text.split("\n"):
            command = COMMENT.sub("", line).strip()
            if command and not command.startswith("#"):
                rc, out = self.shell.run(self.local(command), timeout=300)
                if rc != 0:
                    raise Failure(f"{block.where}: `{command}` exited {rc}:\n{out}")

    def python(self, block):
        errors = self.folder / "python.log"
        if self.session is None:
            # Its stdout carries the answers; what the code prints is caught apart, its stderr
            # (warnings, logs) goes to a file.
            with open(errors, "w") as log:
                self.session = subprocess.Popen(
                    [self.args.python, "-u", "-c", PYTHON_SESSION],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=log,
                    cwd=self.folder,
                    env=self.env(),
                    text=True,
                )
        request = {"code": self.local(block.text), "where": block.where}
        self.session.stdin.write(json.dumps(request) + "\n")
        self.session.stdin.flush()
        ready, _, _ = select.select([self.session.stdout], [], [], 300)
        reply = self.session.stdout.readline() if ready else ""
        if not reply:
            raise Failure(f"{block.where}: the Python session ended or hung:\n{errors.read_text()}")
        answer = json.loads(reply)
        if answer["error"]:
            raise Failure(f"{block.where}: raised\n{answer['error']}")
        self.held_to_output(block, answer["printed"])

    def js(self, block):
        # Beside the installed clients (Node resolves them from the script's folder); named for the
        # process and the page, as pages run side by side.
        script = Path(self.args.node_dir) / f"docs-test-{os.getpid()}-{self.folder.name}.mjs"
        script.write_text(self.local(block.text))
        try:
            done = subprocess.run(
                ["node", script.name],
                cwd=self.args.node_dir,
                env=self.env(),
                capture_output=True,
                text=True,
                timeout=300,
            )
        except subprocess.TimeoutExpired as e:
            raise Failure(f"{block.where}: node still running after {e.timeout} s") from e
        finally:
            script.unlink()
        if done.returncode != 0:
            raise Failure(f"{block.where}: node exited {done.returncode}:\n{done.stdout}{done.stderr}")
        self.held_to_output(block, done.stdout)

    def held_to_output(self, block, printed):
        if block.output is None:
            return
        want, got = [self.local(line) for line in clean(block.output.text.split("\n"))], clean(printed.split("\n"))
        if not matches(want, got):
            raise mismatch(block.where, got, want)

    def close(self):
        if self.shell is not None:
            self.shell.close()
        if self.session is not None:
            self.session.kill()
            self.session.wait()
        if self.server is not None:
            self.server.kill()
            self.server.wait()


# The Python session: a block a line of JSON in, its printed text (or its error) a line out.
PYTHON_SESSION = r"""
import ast, asyncio, contextlib, io, json, sys, traceback
names = {"__name__": "__main__"}
loop = asyncio.new_event_loop()
for request in sys.stdin:
    request = json.loads(request)
    printed, error = io.StringIO(), None
    try:
        with contextlib.redirect_stdout(printed):
            code = compile(request["code"], request["where"], "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
            result = eval(code, names)
            if asyncio.iscoroutine(result):
                loop.run_until_complete(result)
    except BaseException:
        error = traceback.format_exc()
    sys.__stdout__.write(json.dumps({"printed": printed.getvalue(), "error": error}) + "\n")
    sys.__stdout__.flush()
"""


def pages(chosen):
    if chosen:
        return [ROOT / p for p in chosen]
    found = []
    for pattern in PAGE_GLOBS:
        found += sorted(ROOT.glob(pattern))
    return [p for p in found if p.is_file()]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--server", required=True)
    parser.add_argument("--python", required=True)
    parser.add_argument("--node-dir", required=True)
    parser.add_argument("--litellm-bin", required=True)
    parser.add_argument("--jobs", type=int, default=1, help="pages run at a time")
    parser.add_argument("pages", nargs="*")
    args = parser.parse_args()
    for name in ("python", "node_dir", "litellm_bin"):
        setattr(args, name, os.path.abspath(getattr(args, name)))
    # Outside the clone, as a reader's home is: a project a page makes there is not the clone's
    # (cargo new would join the clone's workspace).
    work = Path(tempfile.mkdtemp(prefix="docs-test-"))
    args.clock_lib = work / "libclock.so"
    # Seeded once, before the pages run side by side (two copies at once would collide).
    args.maven_repository = maven_repository.seeded(MAVEN_REPOSITORY)
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", args.clock_lib, ROOT / "testkit/clock/clock.c"], check=True)
    started = time.monotonic()

    def run(path):
        text = path.read_text()
        blocks = blocks_of(str(path.relative_to(ROOT)), text)
        if not any(b.lang in CODE for b in blocks):
            return None
        page, began = Page(path, args, work), time.monotonic()
        try:
            page.run(text, blocks)
            failure = None
        except Failure as e:
            failure = str(e)
        return page, failure, time.monotonic() - began

    # Each page has its own folder, server, ports and clock, and mostly waits (on servers, builds,
    # proxies): a few at a time, each one's line printed in the pages' order.
    ran = skipped = 0
    failures = []
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for done in pool.map(run, pages(args.pages)):
            if done is None:
                continue
            page, failure, seconds = done
            if failure:
                failures.append(failure)
            ran += page.ran
            skipped += page.skipped
            print(f"{page.name}: {page.ran} run, {page.skipped} not run, in {seconds:.0f} s", flush=True)
    print(f"docs: {ran} blocks run, {skipped} marked not run, in {time.monotonic() - started:.0f} s")
    for failure in failures:
        print(f"\nFAILED {failure}", file=sys.stderr)
    if not failures:
        shutil.rmtree(work)
    print(f"{ran} passed, {len(failures)} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
