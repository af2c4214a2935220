#!/usr/bin/env python3
"""Proves the release files on real installs (`make package-test`, part of `make test`).

    scripts/package-test.py PACKAGE_DIR SERVER_DIR...

PACKAGE_DIR is what scripts/package.py made. Each SERVER_DIR holds a Debian suite's own
redis-server or valkey-server package, unpacked by scripts/debian-server.py into SERVER_DIR/root
with the suite's libraries and a dpkg database listing them. For each, a copy of that root is a
throwaway system (the machine's own is never touched) where:

- dpkg installs the .deb, checking its Depends against the suite's own libc6 and libgcc-s1;
- the module is at its path with its execute bit, and every path the installed README names is there;
- the suite's server is started in that root (chroot) from the suite's own config file, with the
  packaged loadmodule line added to it as the docs say, and answers RATELIMIT.HIT; the packaged
  Functions library loads and answers FCALL ratelimit_hit; redis_exporter's packaged script
  gives the module's counters;
- after CONFIG SET and CONFIG REWRITE, the server starts again from the rewritten file, with the
  module loaded once and the config kept;
- dpkg removes the package and leaves none of its files.

Then the tarball: its SHA256SUMS and its own .sha256 verify, and its module loads into the first
suite's server, its exporter script answering there; PACKAGE_DIR's SHA256SUMS verifies too. Last,
the clients' packages: every release file README.md tells users to install is one of these, and
the Python wheel and the npm tarball install (offline, each in a fresh place) and import under the
names the docs give; the Java repository holds each published artifact (every module of
clients/java but its tests) with its sources, Javadoc and pom, beside the parent pom, as Java 17
bytecode, the core's jar carrying functions/ratelimit.lua as it is; and the gateway of
docs/clients/java.md builds offline from that repository (Spring's jars from a cache filled
online first) and limits on the tarball's module.
"""

import glob
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import time
import tomllib
import urllib.error
import urllib.request
import zipfile

import maven_repository

from package import fail, read, run, sha256

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORK = os.path.join(ROOT, "target", "package-test")
MODULE_PATH = "/usr/lib/redis/modules/libredis_ratelimit.so"
SHARE = "/usr/share/redis-ratelimit"
# What a systemd service gets: no locale of the caller's, which the root may not have (Redis 8
# refuses to start on a locale it cannot load).
SERVICE_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
# A first hit on a new key: admitted, count 1, 9 left, the window's 60 s to go.
FIRST_HIT = ["1", "1", "9", "60000"]


def expect(what, got, want):
    if got != want:
        fail(f"{what}: got {got!r}, want {want!r}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_sums(folder, sums="SHA256SUMS"):
    with open(os.path.join(folder, sums)) as f:
        lines = [line.split() for line in f if line.strip()]
    if not lines:
        fail(f"{folder}/{sums} lists nothing")
    for digest, name in lines:
        expect(f"the SHA256 of {folder}/{name}", sha256(os.path.join(folder, name)), digest)
    return [name for _, name in lines]


class Server:
    """A server process, started by `command` (a list ending in its own arguments), on a port."""

    def __init__(self, command, cli, log):
        self.command, self.cli, self.log = command, cli, log
        self.process = None

    def start(self, *args):
        for _ in range(3):  # a port found free may be taken before the server binds it
            self.port = free_port()
            with open(self.log, "a") as log:
                self.process = subprocess.Popen(
                    [*self.command, "--port", str(self.port), *args], stdout=log, stderr=log, env=SERVICE_ENV
                )
            deadline = time.monotonic() + 30
            while self.process.poll() is None and time.monotonic() < deadline:
                answer = subprocess.run(
                    [*self.cli, "-p", str(self.port), "INFO", "server"], capture_output=True, text=True
                )
                if f"process_id:{self.process.pid}" in answer.stdout.split():
                    return self
                time.sleep(0.1)
            self.stop()
        with open(self.log) as f:
            fail(f"{' '.join(self.command)} did not start; its log:\n{f.read()[-3000:]}")

    def call(self, *args, stdin=None):
        return run(*self.cli, "-p", str(self.port), *args, stdin=stdin).split()

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)


def inside(root, path):
    """An absolute path of the throwaway system, as seen from outside it."""
    return os.path.join(root, path.lstrip("/"))


def throwaway_root(server_dir, source):
    """A copy of the suite's unpacked root, with the merged-/usr links a Debian system has and the
    folders the server package's maintainer scripts create."""
    root = os.path.join(WORK, os.path.basename(server_dir))
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(os.path.join(server_dir, "root"), root, symlinks=True)
    for link in ("bin", "sbin", "lib", "lib64"):
        if not os.path.lexists(os.path.join(root, link)) and os.path.isdir(os.path.join(root, "usr", link)):
            os.symlink(f"usr/{link}", os.path.join(root, link))
    for folder in ("tmp", f"var/lib/{source}", f"var/log/{source}", f"run/{source}"):
        os.makedirs(os.path.join(root, folder), exist_ok=True)
    return root


def source_of(server_dir):
    for source in ("redis", "valkey"):
        if os.path.exists(os.path.join(server_dir, f"{source}-server")):
            return source
    fail(f"{server_dir} holds neither redis-server nor valkey-server (scripts/debian-server.py)")


def loadmodule_line(root):
    with open(os.path.join(inside(root, SHARE), "ratelimit.conf")) as f:
        lines = [line.strip() for line in f if line.startswith("loadmodule ")]
    expect("the packaged config's loadmodule lines", lines, [f"loadmodule {MODULE_PATH}"])
    return lines[0]


def on_a_suite(deb, server_dir):
    source = source_of(server_dir)
    root = throwaway_root(server_dir, source)
    label = f"{os.path.basename(server_dir)} ({source}-server)"
    run("dpkg", f"--root={root}", "--install", deb)
    status = run("dpkg", f"--root={root}", "--status", "redis-ratelimit")
    if "Status: install ok installed" not in status:
        fail(f"{label}: dpkg does not list the package as installed:\n{status}")
    mode = os.stat(inside(root, MODULE_PATH)).st_mode & 0o777
    expect(f"{label}: the module's mode", oct(mode), oct(0o755))
    # The README the package installs is written for what it installs: every path it names is there.
    with open(inside(root, "/usr/share/doc/redis-ratelimit/README.md")) as f:
        readme = f.read()
    named = set(re.findall(r"(/usr/[\w./-]*\w)", readme))
    missing = sorted(p for p in named if not os.path.exists(inside(root, p)))
    if len(named) < 5 or missing:
        fail(f"{label}: the installed README names {sorted(named)}; missing from the package: {missing}")

    # The suite's own config, with the one line the docs say to add.
    config = f"/etc/{source}/{source}.conf"
    with open(inside(root, config), "a") as f:
        f.write(f"\n{loadmodule_line(root)}\n")
    server = Server(
        ["chroot", root, f"/usr/bin/{source}-server", config],
        ["chroot", root, f"/usr/bin/{source}-cli"],
        os.path.join(WORK, os.path.basename(root) + ".log"),
    )
    # Debian's service starts it in the foreground too; its log comes to the test.
    overrides = ["--daemonize", "no", "--logfile", ""]
    server.start(*overrides)
    try:
        modules = server.call("MODULE", "LIST")
        if "ratelimit" not in modules or MODULE_PATH not in modules:
            fail(f"{label}: MODULE LIST does not show the module from {MODULE_PATH}: {modules}")
        expect(f"{label}: RATELIMIT.HIT", server.call("RATELIMIT.HIT", "pkg:hit", "10", "60"), FIRST_HIT)
        with open(os.path.join(inside(root, SHARE), "ratelimit.lua")) as f:
            expect(
                f"{label}: FUNCTION LOAD",
                server.call("-x", "FUNCTION", "LOAD", "REPLACE", stdin=f.read()),
                ["ratelimit"],
            )
        expect(
            f"{label}: FCALL ratelimit_hit",
            server.call("FCALL", "ratelimit_hit", "1", "pkg:lib", "10", "60"),
            FIRST_HIT,
        )
        metrics = server.call("--eval", f"{SHARE}/monitoring/exporter/ratelimit-metrics.lua")
        hits = metrics[metrics.index("ratelimit_hits") + 1]
        expect(f"{label}: the exporter's script gives ratelimit_hits", hits, "1")
        expect(f"{label}: CONFIG SET", server.call("CONFIG", "SET", "ratelimit.shadow", "pkg:"), ["OK"])
        expect(f"{label}: CONFIG REWRITE", server.call("CONFIG", "REWRITE"), ["OK"])
    finally:
        server.stop()
    with open(inside(root, config)) as f:
        loads = [line for line in f if line.startswith("loadmodule ")]
    expect(f"{label}: loadmodule lines after CONFIG REWRITE", len(loads), 1)
    server.start(*overrides)
    try:
        expect(
            f"{label}: ratelimit.shadow after a restart",
            server.call("CONFIG", "GET", "ratelimit.shadow"),
            ["ratelimit.shadow", "pkg:"],
        )
        expect(
            f"{label}: RATELIMIT.HIT after a restart", server.call("RATELIMIT.HIT", "pkg:again", "10", "60"), FIRST_HIT
        )
    finally:
        server.stop()

    run("dpkg", f"--root={root}", "--purge", "redis-ratelimit")
    for path in (MODULE_PATH, SHARE, "/usr/share/doc/redis-ratelimit"):
        if os.path.lexists(inside(root, path)):
            fail(f"{label}: {path} is still there after dpkg --purge")
    shutil.rmtree(root)
    print(
        f"package-test: {label}: installed, loaded from {MODULE_PATH} by the suite's config, answered, rewrote its config, restarted, purged"
    )


def the_tarball(package_dir, server_dir):
    tarballs = glob.glob(os.path.join(package_dir, "redis-ratelimit-*.tar.gz"))
    expect("the release tarballs", len(tarballs), 1)
    with open(tarballs[0] + ".sha256") as f:
        expect("the tarball's .sha256", f.read().split(), [sha256(tarballs[0]), os.path.basename(tarballs[0])])
    into = os.path.join(WORK, "tarball")
    shutil.rmtree(into, ignore_errors=True)
    with tarfile.open(tarballs[0]) as tar:
        tar.extractall(into, filter="data")
    (folder,) = glob.glob(os.path.join(into, "*"))
    names = check_sums(folder)
    unpacked = [os.path.relpath(os.path.join(d, f), folder) for d, _, fs in os.walk(folder) for f in fs]
    expect("the tarball's files", sorted(names + ["SHA256SUMS"]), sorted(unpacked))
    module = os.path.join(folder, "libredis_ratelimit.so")
    source = source_of(server_dir)
    launcher = os.path.join(server_dir, f"{source}-server")
    server = Server([launcher, "--save", "", "--loadmodule", module], ["redis-cli"], os.path.join(WORK, "tarball.log"))
    server.start()
    try:
        expect("the tarball's module: RATELIMIT.HIT", server.call("RATELIMIT.HIT", "pkg:tar", "10", "60"), FIRST_HIT)
        metrics = server.call("--eval", os.path.join(folder, "monitoring/exporter/ratelimit-metrics.lua"))
        expect("the tarball's exporter script: ratelimit_hits", metrics[metrics.index("ratelimit_hits") + 1], "1")
        the_gateway(package_dir, server.port)
    finally:
        server.stop()
    shutil.rmtree(into)
    print(f"package-test: {os.path.basename(tarballs[0])}: sums verified, its module answered on {source}-server")


MAVEN_SETTINGS = """<settings>
  <profiles>
    <profile>
      <id>release</id>
      <repositories>
        <repository><id>release</id><url>file://{release}</url></repository>
        <repository><id>cache</id><url>file://{cache}</url></repository>
      </repositories>
      <pluginRepositories>
        <pluginRepository><id>cache</id><url>file://{cache}</url></pluginRepository>
      </pluginRepositories>
    </profile>
  </profiles>
  <activeProfiles><activeProfile>release</activeProfile></activeProfiles>
</settings>
"""


def the_gateway(package_dir, redis_port):
    """The gateway of docs/clients/java.md (its files, as the page writes them), built offline from
    an empty local repository: the starter and its jars from the release's Maven repository alone,
    Spring's from a cache that an online build filled first (the release's jars taken out of it).
    Then it runs on the tarball's module: two reports, then 429."""
    page = read(os.path.join(ROOT, "docs", "clients", "java.md")).decode()
    section = page[page.index("## Spring Cloud Gateway") :]
    files = re.findall(r"<!-- docs-test: file (\S+) -->\n```\w+\n(.*?)```", section, re.S)
    expect("the gateway files of docs/clients/java.md", [name for name, _ in files],
           ["pom.xml", "src/main/java/gw/Gateway.java", "src/main/resources/application.yml"])
    app, cache, empty = (os.path.join(WORK, name) for name in ("gateway", "gateway-maven-cache", "gateway-maven-empty"))
    for folder in (app, empty):
        shutil.rmtree(folder, ignore_errors=True)
    for name, text in files:
        os.makedirs(os.path.dirname(os.path.join(app, name)), exist_ok=True)
        with open(os.path.join(app, name), "w") as f:
            f.write(text.replace("6380", str(redis_port)))
    settings = os.path.join(WORK, "gateway-settings.xml")
    with open(settings, "w") as f:
        f.write(MAVEN_SETTINGS.format(release=os.path.abspath(os.path.join(package_dir, "maven")), cache=cache))
    mvn = ["mvn", "-B", "-q", "--no-transfer-progress", "-s", settings, "package", "-DskipTests"]
    run(*mvn, f"-Dmaven.repo.local={maven_repository.seeded(cache)}", cwd=app)
    shutil.rmtree(os.path.join(cache, "io", "github", "redis-ratelimit"))
    shutil.rmtree(os.path.join(app, "target"))
    run(*mvn, "-o", "-Daether.offline.protocols=file", f"-Dmaven.repo.local={empty}", cwd=app)
    ours = sorted(os.listdir(os.path.join(empty, "io", "github", "redis-ratelimit")))
    expect("the release's artifacts the gateway took", ours,
           ["redis-ratelimit-core", "redis-ratelimit-lettuce", "redis-ratelimit-parent", "redis-ratelimit-spring-cloud-gateway"])
    port = free_port()
    with open(os.path.join(WORK, "gateway.log"), "w") as log:
        gateway = subprocess.Popen(["java", "-jar", "target/gateway-1.jar", f"--server.port={port}"], cwd=app,
                                   stdout=log, stderr=log)
    try:
        statuses = []
        deadline = time.monotonic() + 120
        while not statuses:
            if gateway.poll() is not None or time.monotonic() > deadline:
                with open(os.path.join(WORK, "gateway.log")) as f:
                    fail(f"the gateway did not start; its log:\n{f.read()[-3000:]}")
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/backend", timeout=5)
                statuses = [0]
            except OSError:
                time.sleep(0.5)
        statuses = []
        for _ in range(3):
            request = urllib.request.Request(f"http://127.0.0.1:{port}/reports/q3", headers={"X-User": "package-test"})
            try:
                statuses.append(urllib.request.urlopen(request, timeout=10).status)
            except urllib.error.HTTPError as e:
                statuses.append(e.code)
        expect("the gateway's answers to three reports (2 a minute)", statuses, [200, 200, 429])
    finally:
        gateway.terminate()
        gateway.wait(timeout=30)
    shutil.rmtree(empty)
    print("package-test: the docs' gateway, built offline from the release's Maven repository, limited on the tarball's module")


def the_client_packages(package_dir):
    for name in re.findall(r"\./target/package/([^\s\"\[]+)", read(os.path.join(ROOT, "README.md")).decode()):
        if not os.path.exists(os.path.join(package_dir, name)):
            fail(f"README.md names target/package/{name}, which make package did not make")
    with open(os.path.join(ROOT, "clients", "python", "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    (wheel,) = glob.glob(os.path.join(package_dir, "*.whl"))
    venv = os.path.join(WORK, "venv")
    shutil.rmtree(venv, ignore_errors=True)
    run(sys.executable, "-m", "venv", venv)
    python = os.path.join(venv, "bin", "python")
    run(python, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--disable-pip-version-check", wheel)
    imported = run(python, "-c", f"import importlib.metadata as m, {project['name'].replace('-', '_')} as p; "
                   f"print(m.version({project['name']!r}), p.RateLimiter.__name__)")
    expect("the wheel, installed and imported", imported.split(), [project["version"], "RateLimiter"])
    with open(os.path.join(ROOT, "clients", "node", "package.json")) as f:
        npm_name = json.load(f)["name"]
    (tgz,) = glob.glob(os.path.join(os.path.abspath(package_dir), "*.tgz"))
    folder = os.path.join(WORK, "npm")
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    run("npm", "install", "--offline", "--no-audit", "--no-fund", "--loglevel=error", tgz, cwd=folder)
    for kind, script in [
        ("CommonJS", f"console.log(typeof require('{npm_name}').RateLimiter)"),
        ("ESM", f"const m = await import('{npm_name}'); console.log(typeof m.RateLimiter)"),
    ]:
        loaded = run("node", *(["--input-type=module"] if kind == "ESM" else []), "-e", script, cwd=folder)
        expect(f"the npm tarball, installed and imported ({kind})", loaded.strip(), "function")
    shutil.rmtree(venv)
    shutil.rmtree(folder)
    print(f"package-test: {os.path.basename(wheel)} and {os.path.basename(tgz)}: installed and imported; "
          "every release file README.md names was made")


def the_java_artifacts(package_dir, listed):
    group = "maven/io/github/redis-ratelimit"
    modules = sorted(
        name
        for name in os.listdir(os.path.join(ROOT, "clients", "java"))
        if name != "tests" and os.path.exists(os.path.join(ROOT, "clients", "java", name, "pom.xml"))
    )
    with open(os.path.join(ROOT, "clients", "java", "pom.xml")) as f:
        version = re.search(r"<artifactId>redis-ratelimit-parent</artifactId>\s*<version>([^<]+)</version>", f.read()).group(1)
    expected = {f"{group}/redis-ratelimit-parent/{version}/redis-ratelimit-parent-{version}.pom"}
    for module in modules:
        base = f"{group}/{module}/{version}/{module}-{version}"
        expected |= {f"{base}.jar", f"{base}-sources.jar", f"{base}-javadoc.jar", f"{base}.pom"}
    expect("the Java artifacts listed in SHA256SUMS", sorted(n for n in listed if n.startswith("maven/")), sorted(expected))
    for module in modules:
        jar = os.path.join(package_dir, f"{group}/{module}/{version}/{module}-{version}.jar")
        with zipfile.ZipFile(jar) as z:
            classes = [n for n in z.namelist() if n.endswith(".class")]
            majors = {int.from_bytes(z.read(n)[6:8], "big") for n in classes}
            expect(f"{module}'s class files' Java version (61: Java 17)", majors, {61})
            if module == "redis-ratelimit-core":
                with open(os.path.join(ROOT, "functions", "ratelimit.lua"), "rb") as f:
                    same = z.read("io/github/redisratelimit/ratelimit.lua") == f.read()
                expect("the core jar's library is functions/ratelimit.lua, byte for byte", same, True)
    print(f"package-test: the Java artifacts {', '.join(modules)} {version}: jars, sources, Javadoc and poms")


def main():
    if len(sys.argv) < 3:
        fail("usage: package-test.py PACKAGE_DIR SERVER_DIR...")
    package_dir, server_dirs = sys.argv[1], [os.path.normpath(d) for d in sys.argv[2:]]
    os.makedirs(WORK, exist_ok=True)
    listed = check_sums(package_dir)
    debs = [name for name in listed if name.endswith(".deb")]
    expect("the packages listed in SHA256SUMS", len(debs), 1)
    for pattern in (r".whl", r".tar.gz", r".tgz"):
        if not any(name.endswith(pattern) for name in listed):
            fail(f"{package_dir}/SHA256SUMS lists no {pattern} file")
    for server_dir in server_dirs:
        on_a_suite(os.path.join(package_dir, debs[0]), server_dir)
    the_tarball(package_dir, server_dirs[0])
    the_client_packages(package_dir)
    the_java_artifacts(package_dir, listed)


if __name__ == "__main__":
    main()
