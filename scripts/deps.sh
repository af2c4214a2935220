#!/usr/bin/env bash
# Installs the Debian packages that `make` needs and are missing (as root; otherwise says what
# to install). `deps.sh build`: to build and run the module. `deps.sh package`: to build the
# release files too (`make package`). `deps.sh test`: to run the tests too.
set -euo pipefail
mode=${1:-build}
command -v cargo >/dev/null 2>&1 || { echo "cargo not found: install Rust (https://rustup.rs)"; exit 1; }
if [ "$mode" = test ]; then
    for tool in fmt clippy; do
        cargo "$tool" --version >/dev/null 2>&1 || { echo "cargo $tool not found: rustup component add ${tool/fmt/rustfmt}"; exit 1; }
    done
fi
missing=()
need() { command -v "$1" >/dev/null 2>&1 || missing+=("${@:2}"); }
need redis-server redis-server
need redis-cli redis-tools
# bindgen, in the redis-module crate, loads libclang at build time.
compgen -G '/usr/lib/llvm-*/lib/libclang.so' >/dev/null || compgen -G '/usr/lib/*/libclang.so' >/dev/null ||
    missing+=(libclang-dev)
if [ "$mode" != build ]; then
    # The clients' packages: the Python wheel and sdist, the npm tarball.
    python3 -m pip --version >/dev/null 2>&1 || missing+=(python3-pip)
    python3 -m venv --help >/dev/null 2>&1 || missing+=(python3-venv)
    need npm nodejs npm
    # The Java packages: a JDK (17 or newer) and Maven.
    need javac openjdk-17-jdk-headless
    need mvn maven
    # scripts/package.py: the module stripped, its Depends computed, the .deb checked.
    need strip binutils
    need dpkg-shlibdeps dpkg-dev
    need lintian lintian
fi
if [ "$mode" = test ]; then
    # scripts/debian-server.py: the signature of Debian's index, and unpacking its packages.
    need gpgv gpgv
    need dpkg-deb dpkg
    # testkit/clock: the test servers' clock, built with the C compiler.
    need cc gcc
fi
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
    echo "missing: ${missing[*]} -- run 'sudo apt-get install ${missing[*]}' or 'sudo make deps'"
    exit 1
fi
echo "installing: ${missing[*]}"
# Waiting for apt's locks rather than failing when another apt (another make) holds them.
apt-get update -qq -o DPkg::Lock::Timeout=600
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=600 "${missing[@]}" >/dev/null
