#!/usr/bin/env bash
# Builds redis-cell, pinned to the crates.io release its users run, into target/redis-cell/, for
# the tests and the benchmark to compare CL.THROTTLE with. Its source comes from crates.io through
# cargo and is never committed here.
set -euo pipefail
VERSION=0.2.2
OUT=target/redis-cell
SO="$OUT/libredis_cell.so"
[ -f "$SO" ] && exit 0
mkdir -p "$OUT/fetch/src"
cat > "$OUT/fetch/Cargo.toml" <<TOML
[package]
name = "fetch-redis-cell"
version = "0.0.0"
edition = "2021"
[dependencies]
redis-cell = "=$VERSION"
# A workspace of its own, not the project's.
[workspace]
TOML
touch "$OUT/fetch/src/lib.rs"
# cargo metadata downloads the crate and says where its source is.
manifest=$(cargo metadata --quiet --format-version 1 --manifest-path "$OUT/fetch/Cargo.toml" |
    python3 -c 'import json, sys; print(next(p["manifest_path"] for p in json.load(sys.stdin)["packages"] if p["name"] == "redis-cell"))')
rm -rf "$OUT/src"
cp -r "$(dirname "$manifest")" "$OUT/src"
chmod -R u+w "$OUT/src"
grep -q '^\[workspace\]' "$OUT/src/Cargo.toml" || printf '\n[workspace]\n' >> "$OUT/src/Cargo.toml"
cargo build --quiet --release --manifest-path "$OUT/src/Cargo.toml" --target-dir "$OUT/build" 2>/dev/null
cp "$OUT/build/release/libredis_cell.so" "$SO"
echo "built redis-cell $VERSION: $SO"
