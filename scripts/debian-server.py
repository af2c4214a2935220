#!/usr/bin/env python3
"""Fetches a server binary from another Debian suite, to run on this machine beside its own.

    scripts/debian-server.py SUITE SOURCE DEST      e.g. trixie redis target/servers/redis-8.0
    scripts/debian-server.py SUITE PACKAGE DEST PROGRAM...
                                                    e.g. bookworm prometheus DEST prometheus promtool

Reads SUITE's signed package index from Debian's registry, downloads the `SOURCE-server` and
`SOURCE-tools` packages (the second holds the binary), or PACKAGE, and the shared libraries they
need, each checked against the index's SHA256, and unpacks them into DEST/root. DEST/SOURCE-server
(or DEST/PROGRAM, for each PROGRAM in PACKAGE's /usr/bin) then runs the binary with the suite's own
loader and libraries, so nothing of the machine's changes: the suite is never added to apt's
sources, and no service is started. Whatever point release the suite holds today is taken, and
said. Run again, it does nothing once those exist.

DEST/root/var/lib/dpkg/status lists what was unpacked, as installed: `dpkg --root DEST/root`
checks a package's dependencies against the suite's own libraries (scripts/package-test.py).
"""

import hashlib
import lzma
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request

MIRROR = "http://deb.debian.org/debian"
# Indexes and packages already fetched, by their SHA256 (the signed InRelease names the index's;
# the index, each package's): every fresh clone's `make test` asks for the same ones.
CACHE = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "redis-ratelimit", "debian")
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
INDEX = "main/binary-amd64/Packages.xz"


def fail(message):
    sys.exit(f"debian-server: {message}")


def download(url):
    try:
        with urllib.request.urlopen(url, timeout=120) as response:
            return response.read()
    except OSError as e:
        fail(f"cannot download {url}: {e}")


def verified_release(suite):
    """The suite's InRelease text, once gpgv has checked its signature with Debian's keyring."""
    signed = download(f"{MIRROR}/dists/{suite}/InRelease")
    with tempfile.NamedTemporaryFile(suffix=".InRelease") as f:
        f.write(signed)
        f.flush()
        check = subprocess.run(["gpgv", "--keyring", KEYRING, f.name], capture_output=True, text=True)
    if check.returncode != 0:
        fail(f"the signature of {suite}'s InRelease does not verify with {KEYRING}:\n{check.stderr}")
    return signed.decode()


def sha256_in_release(release, path):
    in_sha256 = False
    for line in release.splitlines():
        if not line.startswith(" "):
            in_sha256 = line.startswith("SHA256:")
        elif in_sha256 and line.split()[2:] == [path]:
            return line.split()[0]
    fail(f"the release file has no SHA256 for {path}")


def checked(data, sha256, what):
    if hashlib.sha256(data).hexdigest() != sha256:
        fail(f"{what}: SHA256 mismatch (a corrupt or tampered download)")
    return data


def fetched(path, sha256):
    """The file at MIRROR/path whose SHA256 the signed index gives: from the cache when it holds
    it (checked again), else downloaded, checked and kept there."""
    kept = os.path.join(CACHE, sha256)
    if os.path.exists(kept):
        with open(kept, "rb") as f:
            data = f.read()
        if hashlib.sha256(data).hexdigest() == sha256:
            return data
    data = checked(download(f"{MIRROR}/{path}"), sha256, path)
    os.makedirs(CACHE, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=CACHE, delete=False) as f:
        f.write(data)
    os.replace(f.name, kept)
    return data


def packages(suite):
    """Package name -> its stanza's fields, from the suite's verified index."""
    release = verified_release(suite)
    index = fetched(f"dists/{suite}/{INDEX}", sha256_in_release(release, INDEX))
    found = {}
    for stanza in lzma.decompress(index).decode().split("\n\n"):
        fields = dict(re.findall(r"^([\w-]+): (.*)$", stanza, re.M))
        if "Package" in fields:
            found[fields["Package"]] = fields
    return found


def is_library(name):
    # What a binary needs at run time; the rest of a package's dependencies (adduser, systemd,
    # init-system-helpers...) is install-time machinery, and libjs-* a web page's scripts.
    return (name.startswith("lib") and not name.startswith("libjs-")) or name == "zlib1g"


def needed(index, roots):
    """The roots and, transitively, the libraries they depend on (first alternative present)."""
    wanted, queue = [], list(roots)
    while queue:
        name = queue.pop()
        if name in wanted:
            continue
        if name not in index:
            fail(f"package {name} is not in the suite's index")
        wanted.append(name)
        fields = index[name]
        for relation in ", ".join(filter(None, [fields.get("Pre-Depends"), fields.get("Depends")])).split(","):
            alternatives = [a.split()[0].split(":")[0] for a in relation.split("|") if a.strip()]
            present = next((a for a in alternatives if a in index), None)
            if present and is_library(present):
                queue.append(present)
    return wanted


def write_status(root, stanzas):
    """dpkg's database in root: each unpacked package, installed."""
    admin = os.path.join(root, "var/lib/dpkg")
    for folder in ("info", "updates", "triggers"):
        os.makedirs(os.path.join(admin, folder), exist_ok=True)
    fields = ("Version", "Architecture", "Multi-Arch", "Provides")
    with open(os.path.join(admin, "status"), "w") as f:
        for stanza in stanzas:
            f.write(f"Package: {stanza['Package']}\nStatus: install ok installed\n")
            f.writelines(f"{name}: {stanza[name]}\n" for name in fields if name in stanza)
            f.write("\n")


def write_launcher(dest, root, loader, program, package, suite, version):
    """DEST/PROGRAM: runs root/usr/bin/PROGRAM with the suite's loader and libraries. A Redis or
    Valkey binary acts as a server when started under the server's name (a link to the tools')."""
    launcher = os.path.join(dest, program)
    with open(launcher + ".tmp", "w") as f:
        f.write(
            "#!/bin/sh\n"
            f"# {program} from {package} {version}, Debian {suite}, run with its own\n"
            "# loader and libraries (written by scripts/debian-server.py).\n"
            'here=$(dirname "$(readlink -f "$0")")\n'
            f'exec "$here/root/{loader}/ld-linux-x86-64.so.2" \\\n'
            '    --library-path "$here/root/usr/lib/x86_64-linux-gnu:$here/root/lib/x86_64-linux-gnu" \\\n'
            f'    "$here/root/usr/bin/{program}" "$@"\n'
        )
    os.chmod(launcher + ".tmp", 0o755)
    return launcher


def main():
    if len(sys.argv) < 4:
        fail("usage: debian-server.py SUITE SOURCE DEST  or  debian-server.py SUITE PACKAGE DEST PROGRAM...")
    suite, source, dest = sys.argv[1:4]
    # A server (redis, valkey): its -server and -tools packages; else the package's programs.
    is_server = len(sys.argv) == 4
    roots = [f"{source}-server", f"{source}-tools"] if is_server else [source]
    programs = [f"{source}-server"] if is_server else sys.argv[4:]
    if all(os.path.exists(os.path.join(dest, p)) for p in programs):
        return
    index = packages(suite)
    names = needed(index, roots)
    root = os.path.join(dest, "root")
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(root)
    with tempfile.TemporaryDirectory() as debs:
        for name in names:
            fields = index[name]
            deb = fetched(fields["Filename"], fields["SHA256"])
            path = os.path.join(debs, os.path.basename(fields["Filename"]))
            with open(path, "wb") as f:
                f.write(deb)
            subprocess.run(["dpkg-deb", "-x", path, root], check=True)
    write_status(root, [index[name] for name in names])
    # Debian 13 on ship the loader under /usr (merged /usr); Debian 12 under /lib64.
    loaders = [p for p in ("usr/lib64", "lib64") if os.path.exists(os.path.join(root, p, "ld-linux-x86-64.so.2"))]
    missing = [p for p in programs if not os.path.exists(os.path.join(root, "usr/bin", p))]
    if not loaders or missing:
        fail(f"the loader or {missing} is missing after unpacking {', '.join(names)}")
    version = index[roots[0]]["Version"]
    for program in programs:
        launcher = write_launcher(dest, root, loaders[0], program, roots[0], suite, version)
        ran = subprocess.run([launcher + ".tmp", "--version"], capture_output=True, text=True)
        if ran.returncode != 0 or (is_server and "v=" not in ran.stdout):
            fail(f"the unpacked {program} does not run here:\n{ran.stdout}{ran.stderr}")
        os.rename(launcher + ".tmp", launcher)
        said = (ran.stdout or ran.stderr).strip().splitlines()[0]
        print(f"debian-server: {suite}'s {roots[0]} {version}: {launcher}: {said}")


if __name__ == "__main__":
    main()
