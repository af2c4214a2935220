#!/usr/bin/env python3
"""Builds the release files under OUT (`make package`: target/package/).

    scripts/package.py --module SO --out OUT [--python DIST] [--node DIST] [--java REPOSITORY]

- redis-ratelimit_VERSION_ARCH.deb: the module in /usr/lib/redis/modules (mode 0755: Redis and
  Valkey refuse a module without an execute bit), the Functions library, the loadmodule line and
  the monitoring (redis_exporter's script, alert rules, dashboard) in /usr/share/redis-ratelimit,
  the docs in /usr/share/doc/redis-ratelimit; the Envoy rate limit service (clients/go/envoy) in
  /usr/bin, its systemd unit (not enabled), its /etc/default file and an example configuration
  in /usr/share/redis-ratelimit/envoy. Depends is computed by dpkg-shlibdeps from the
  module; the rest of the control file is packaging/debian/control.
  No maintainer script: the admin adds the loadmodule line (packaging/ratelimit.conf says why).
  lintian must find no error and no warning (overrides, each explained, in
  packaging/debian/lintian-overrides).
- redis-ratelimit-VERSION-TARGET.tar.gz: the module, the library, the loadmodule line, the
  Envoy service with its unit and example, the monitoring, the license, the third-party notices and a README page, with their SHA256SUMS
  inside and the archive's own .sha256 beside it.
- The Python wheel and sdist and the npm tarball, copied from where make built them; the Java
  jars (each with its sources, Javadoc and pom, and the parent pom) as the Maven repository
  `make java-dist` deployed them to, under maven/.
- SHA256SUMS of everything above.

Every file's time is the last commit's (SOURCE_DATE_EPOCH), so a rebuild gives the same bytes.
"""

import argparse
import functools
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGING = os.path.join(ROOT, "packaging")
NAME = "redis-ratelimit"
MODULE = "libredis_ratelimit.so"
MODULE_DIR = "usr/lib/redis/modules"
SHARE_DIR = f"usr/share/{NAME}"
DOC_DIR = f"usr/share/doc/{NAME}"
# monitoring/ as operators install it, its tests aside: redis_exporter's script, the alert and the
# recording rules, the Grafana dashboard and the README on them (docs/operations.md, Monitoring).
MONITORING = (
    "README.md",
    "exporter/ratelimit-metrics.lua",
    "alerts/ratelimit-alerts.yml",
    "rules/ratelimit-rules.yml",
    "dashboards/ratelimit-dashboard.json",
)
# The oldest glibc the module may need: what packaging/README.md and docs/operations.md promise
# (Debian 12, Ubuntu 22.04, RHEL 9). A build that needs a newer one fails here, not on a user's host.
GLIBC_FLOOR = (2, 34)
ENVOY = "redis-ratelimit-envoy"
ENVOY_PACKAGING = os.path.join(PACKAGING, "envoy")


def fail(message):
    """Ends the program (this one, or scripts/package-test.py, which shares these helpers)."""
    sys.exit(f"{os.path.basename(sys.argv[0]).removesuffix('.py')}: {message}")


def run(*args, cwd=None, stdin=None):
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, input=stdin)
    if done.returncode != 0:
        fail(f"{' '.join(args)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return done.stdout


@functools.cache
def version():
    with open(os.path.join(ROOT, "Cargo.toml"), "rb") as f:
        return tomllib.load(f)["package"]["version"]


def source_date_epoch():
    return int(os.environ.get("SOURCE_DATE_EPOCH") or run("git", "-C", ROOT, "log", "-1", "--format=%ct").strip())


def host_target():
    return re.search(r"^host: (\S+)$", run("rustc", "-vV"), re.M).group(1)


def glibc_needed(so):
    versions = re.findall(r"GLIBC_(\d+)\.(\d+)", run("objdump", "-T", so))
    return max((int(a), int(b)) for a, b in versions)


def linked_crates():
    """The crates linked into the module (no build scripts, no proc macros), with their license
    expression and folder, from cargo's lock file."""
    tree = run(
        "cargo", "tree", "--locked", "-e", "normal,no-proc-macro", "--prefix", "none", "-p", NAME, "--format", "{p}"
    )
    wanted = {tuple(line.split()[:2]) for line in tree.splitlines() if line.strip()}
    metadata = json.loads(run("cargo", "metadata", "--locked", "--format-version", "1", cwd=ROOT))
    crates = []
    for package in metadata["packages"]:
        if (package["name"], "v" + package["version"]) in wanted and package["name"] != NAME:
            crates.append(package)
    return sorted(crates, key=lambda p: (p["name"], p["version"]))


def license_texts(package):
    """The crate's own license files, but the Apache 2.0 text (Debian has it in common-licenses)."""
    folder = os.path.dirname(package["manifest_path"])
    texts = []
    for name in sorted(os.listdir(folder)):
        if not re.match(r"(LICEN[CS]E|COPYING|UNLICENSE|COPYRIGHT)", name, re.I) or "APACHE" in name.upper():
            continue
        with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as f:
            text = f.read().strip()
        if text and not text.startswith("Apache License"):
            texts.append((name, text))
    return texts


def indented(text):
    """Text as a field's continuation lines (an empty line is ' .')."""
    return "\n".join(" " + line.rstrip() if line.strip() else " ." for line in text.splitlines())


def copyright_text():
    """packaging/debian/copyright's header, the project's paragraph from LICENSE, then one per crate
    linked into the module, with the license files the crate ships."""
    with open(os.path.join(PACKAGING, "debian", "copyright")) as f:
        parts = [f.read().rstrip("\n")]
    with open(os.path.join(ROOT, "LICENSE")) as f:
        license = f.read()
    holder = re.search(r"^Copyright \(c\) (.*)$", license, re.M)
    terms = license[holder.end() :].strip()
    parts.append(f"Files: *\nCopyright: {holder.group(1)}\nLicense: MIT\n{indented(terms)}")
    for crate in linked_crates():
        texts = license_texts(crate)
        holders = ", ".join(crate["authors"]) or f"the {crate['name']} authors"
        body = "\n .\n".join(f" {name}:\n .\n{indented(text)}" for name, text in texts)
        parts.append(
            f"Files: crate {crate['name']} {crate['version']}\n"
            f"Copyright: {holders}\n"
            f"License: {crate['license']}\n"
            + (f"Comment: its license files:\n .\n{body}" if texts else "Comment: the crate ships no license file.")
        )
    return "\n\n".join(parts) + "\n"


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def write(path, data, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())
    os.chmod(path, mode)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def stripped_module(so, into):
    """The module without debug symbols (as dh_strip does), keeping what the server looks up."""
    shutil.copyfile(so, into)
    run("strip", "--remove-section=.comment", "--remove-section=.note", "--strip-unneeded", into)
    os.chmod(into, 0o755)


def shlib_depends(build, staged):
    """Depends for the module, by dpkg-shlibdeps (it reads debian/control for the package's name)."""
    write(os.path.join(build, "debian", "control"), f"Source: {NAME}\n\nPackage: {NAME}\nArchitecture: any\n")
    out = run("dpkg-shlibdeps", "-O", f"-T{os.devnull}", os.path.relpath(staged, build), cwd=build)
    return re.search(r"^shlibs:Depends=(.*)$", out, re.M).group(1)


def build_deb(module, envoy, notices, out, build, epoch):
    arch = run("dpkg", "--print-architecture").strip()
    tree = os.path.join(build, "debian", NAME)
    staged = os.path.join(tree, MODULE_DIR, MODULE)
    os.makedirs(os.path.dirname(staged))
    shutil.copyfile(module, staged)
    os.chmod(staged, 0o755)
    write(os.path.join(tree, SHARE_DIR, "ratelimit.lua"), read(os.path.join(ROOT, "functions", "ratelimit.lua")))
    write(os.path.join(tree, SHARE_DIR, "ratelimit.conf"), read(os.path.join(PACKAGING, "ratelimit.conf")))
    for name in MONITORING:
        write(os.path.join(tree, SHARE_DIR, "monitoring", name), read(os.path.join(ROOT, "monitoring", name)))
    write(os.path.join(tree, "usr/bin", ENVOY), read(envoy), mode=0o755)
    write(os.path.join(tree, "lib/systemd/system", ENVOY + ".service"), read(os.path.join(ENVOY_PACKAGING, ENVOY + ".service")))
    write(os.path.join(tree, "etc/default", ENVOY), read(os.path.join(ENVOY_PACKAGING, "default")))
    write(os.path.join(tree, SHARE_DIR, "envoy", "example.yaml"), read(os.path.join(ENVOY_PACKAGING, "example.yaml")))
    write(os.path.join(tree, DOC_DIR, "envoy.md"), read(os.path.join(ROOT, "docs", "envoy.md")))
    write(os.path.join(tree, DOC_DIR, "README.md"), read(os.path.join(PACKAGING, "debian", "README.md")))
    write(os.path.join(tree, DOC_DIR, "copyright"), notices)
    changelog = read(os.path.join(PACKAGING, "debian", "changelog"))
    top = re.match(rb"\S+ \(([^)]+)\)", changelog)
    if not top or top.group(1).decode() != version():
        fail(f"packaging/debian/changelog's newest entry is not for {version()} (Cargo.toml's version): add one")
    changelog = gzip.compress(changelog, compresslevel=9, mtime=0)
    write(os.path.join(tree, DOC_DIR, "changelog.gz"), changelog)
    overrides = os.path.join(PACKAGING, "debian", "lintian-overrides")
    if os.path.exists(overrides):
        write(os.path.join(tree, f"usr/share/lintian/overrides/{NAME}"), read(overrides))

    files = sorted(os.path.relpath(os.path.join(d, f), tree) for d, _, fs in os.walk(tree) for f in fs)
    size_kib = sum((os.path.getsize(os.path.join(tree, f)) + 1023) // 1024 for f in files)
    with open(os.path.join(PACKAGING, "debian", "control")) as f:
        fields = f.read().rstrip("\n")
    description = fields.index("\nDescription:")
    control = (
        fields[:description]
        + f"\nVersion: {version()}\nArchitecture: {arch}\nInstalled-Size: {size_kib}\n"
        + f"Depends: {shlib_depends(build, staged)}"
        + fields[description:]
        + "\n"
    )
    write(os.path.join(tree, "DEBIAN", "control"), control)
    md5sums = "".join(f"{hashlib.md5(read(os.path.join(tree, f))).hexdigest()}  {f}\n" for f in files)
    write(os.path.join(tree, "DEBIAN", "md5sums"), md5sums)
    write(os.path.join(tree, "DEBIAN", "conffiles"), "".join(f"/{f}\n" for f in files if f.startswith("etc/")))
    for folder, dirs, names in os.walk(tree):
        for name in dirs:
            os.chmod(os.path.join(folder, name), 0o755)
        for name in dirs + names:
            os.utime(os.path.join(folder, name), (epoch, epoch), follow_symlinks=False)
    deb = os.path.join(out, f"{NAME}_{version()}_{arch}.deb")
    run("dpkg-deb", "--root-owner-group", "-Zxz", "--build", tree, deb)
    return deb


def lintian(deb):
    """No error, no warning: what lintian keeps must be overridden, with the reason beside it."""
    done = subprocess.run(["lintian", "--fail-on", "error,warning", "--info", deb], capture_output=True, text=True)
    print(done.stdout + done.stderr, end="")
    if done.returncode != 0:
        fail(f"lintian finds fault with {deb} (above)")


def build_tarball(module, envoy, notices, out, epoch):
    """The module and what goes with it, in one folder named for the release and the target."""
    base = f"{NAME}-{version()}-{host_target()}"
    members = {
        MODULE: (read(module), 0o755),
        "ratelimit.lua": (read(os.path.join(ROOT, "functions", "ratelimit.lua")), 0o644),
        "ratelimit.conf": (read(os.path.join(PACKAGING, "ratelimit.conf")), 0o644),
        f"envoy/{ENVOY}": (read(envoy), 0o755),
        f"envoy/{ENVOY}.service": (read(os.path.join(ENVOY_PACKAGING, ENVOY + ".service")), 0o644),
        "envoy/example.yaml": (read(os.path.join(ENVOY_PACKAGING, "example.yaml")), 0o644),
        "envoy/envoy.md": (read(os.path.join(ROOT, "docs", "envoy.md")), 0o644),
        **{f"monitoring/{name}": (read(os.path.join(ROOT, "monitoring", name)), 0o644) for name in MONITORING},
        "LICENSE": (read(os.path.join(ROOT, "LICENSE")), 0o644),
        "COPYRIGHT": (notices.encode(), 0o644),
        "README.md": (read(os.path.join(PACKAGING, "README.md")), 0o644),
    }
    sums = "".join(f"{hashlib.sha256(data).hexdigest()}  {name}\n" for name, (data, _) in sorted(members.items()))
    members["SHA256SUMS"] = (sums.encode(), 0o644)
    path = os.path.join(out, base + ".tar.gz")
    raw = io.BytesIO()
    folders = sorted({os.path.dirname(name) for name in members} - {""})
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name in folders:
            info = tarfile.TarInfo(f"{base}/{name}")
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, epoch
            tar.addfile(info)
        for name, (data, mode) in sorted(members.items()):
            info = tarfile.TarInfo(f"{base}/{name}")
            info.size, info.mode, info.mtime = len(data), mode, epoch
            tar.addfile(info, io.BytesIO(data))
    write(path, gzip.compress(raw.getvalue(), compresslevel=9, mtime=epoch))
    write(path + ".sha256", f"{sha256(path)}  {os.path.basename(path)}\n")
    return path


def copy_dists(out, folders):
    copied = []
    for folder, patterns in folders:
        found = [f for f in sorted(os.listdir(folder)) if any(re.fullmatch(p, f) for p in patterns)] if folder else []
        if folder and len(found) != len(patterns):
            fail(f"{folder} holds {found}, not one file each for {patterns}: build it first")
        for name in found:
            shutil.copyfile(os.path.join(folder, name), os.path.join(out, name))
            copied.append(os.path.join(out, name))
    return copied


def copy_maven_repository(repository, out):
    """The Java artifacts: the repository's tree under OUT/maven/, and its jars and poms."""
    if not repository:
        return []
    if not os.path.isdir(repository):
        fail(f"{repository} is not there: make java-dist first")
    shutil.copytree(repository, os.path.join(out, "maven"))
    found = sorted(
        os.path.join(folder, name)
        for folder, _, names in os.walk(os.path.join(out, "maven"))
        for name in names
        if name.endswith((".jar", ".pom"))
    )
    if not found:
        fail(f"{repository} holds no jar or pom")
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--module", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--envoy", required=True, help="the Envoy rate limit service's binary")
    parser.add_argument("--python", help="the folder of the wheel and the sdist")
    parser.add_argument("--node", help="the folder of the npm tarball")
    parser.add_argument("--java", help="the Maven repository the Java jars were deployed to")
    args = parser.parse_args()
    needed = glibc_needed(args.module)
    if needed > GLIBC_FLOOR:
        fail(f"{args.module} needs glibc {'.'.join(map(str, needed))}, newer than the documented floor")
    epoch = source_date_epoch()
    os.environ["SOURCE_DATE_EPOCH"] = str(epoch)  # dpkg-deb's member times
    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(args.out)
    with tempfile.TemporaryDirectory() as build:
        module = os.path.join(build, MODULE)
        stripped_module(args.module, module)
        notices = copyright_text()
        deb = build_deb(module, args.envoy, notices, args.out, os.path.join(build, "deb"), epoch)
        lintian(deb)
        tarball = build_tarball(module, args.envoy, notices, args.out, epoch)
    dists = copy_dists(
        args.out,
        [
            (args.python, [r"redis_ratelimit_client-.*\.whl", r"redis_ratelimit_client-.*\.tar\.gz"]),
            (args.node, [r"redis-ratelimit-.*\.tgz"]),
        ],
    )
    artifacts = [deb, tarball, *dists, *copy_maven_repository(args.java, args.out)]
    write(os.path.join(args.out, "SHA256SUMS"), "".join(f"{sha256(p)}  {os.path.relpath(p, args.out)}\n" for p in artifacts))
    for path in artifacts:
        print(f"package: {os.path.relpath(path, ROOT)} ({os.path.getsize(path):,} bytes)")


if __name__ == "__main__":
    main()
