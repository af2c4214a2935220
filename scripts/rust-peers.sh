#!/bin/sh
# The Rust peers' own tests against the module's CL.THROTTLE (make rust-peers): redis-cell-rs
# 0.3.0's tests (testcontainers' redis-cell and valkey-cell images, here local servers started by
# the stand-in in clients/rust/peers/testcontainers) and tower-redis-cell 0.3.0's (its doctests),
# each as crates.io serves it (checked against its SHA-256), untouched but for the workspace that
# patches testcontainers.
#
#     scripts/rust-peers.sh OUT   (REDIS_SERVER, VALKEY_SERVER, RATELIMIT_MODULE in the environment)
set -eu
out=$1
root=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$out"
mkdir -p "$out"
fetch() { # name version sha256
	curl -sSfL "https://static.crates.io/crates/$1/$1-$2.crate" -o "$out/$1.crate"
	echo "$3  $out/$1.crate" | sha256sum -c --quiet
	tar xzf "$out/$1.crate" -C "$out"
	mv "$out/$1-$2" "$out/$1"
	# Their lock files pin testcontainers: resolved again, with the stand-in.
	rm -f "$out/$1/Cargo.lock"
}
fetch redis-cell-rs 0.3.0 49ad05bfadf73f8e162cedf90110364765b9c23c0d7f6018cc1268a0246379e5
fetch tower-redis-cell 0.3.0 fcf83a42f360e2037830f4bb241ba6c4c240b46b984da1201f76b5153787e1a5
cat > "$out/Cargo.toml" <<TOML
[workspace]
members = ["redis-cell-rs", "tower-redis-cell"]
resolver = "2"

[patch.crates-io]
testcontainers = { path = "$root/clients/rust/peers/testcontainers" }
redis-cell-rs = { path = "redis-cell-rs" }
TOML
cd "$out"
# As their Makefiles run them, every feature; both in one build (their dependencies built once).
cargo test -p redis-cell-rs -p tower-redis-cell --all-features
