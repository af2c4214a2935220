#!/usr/bin/env bash
# The Functions library against its floors and the scripts it replaces, on each server given (the
# redis-server on PATH by default): instructions per call above a PING, counted by callgrind
# (scripts/callgrind.py, 20,000 calls over 1,000 keys; each row takes about half a minute).
#
#   scripts/library-floors.sh [server ...]
#
# library: functions/ratelimit.lua; floor: scripts/library-floors.lua (the same redis.calls and
# reply, no other Lua), loaded beside the library: the server's Lua collector works through every
# library loaded, so a function costs more beside a big one (Redis 7.0: floor_hit 27,200 alone,
# 28,800 beside this library); script: the bench's peer, as benches/ratelimit/main.rs defines it.
# A floor is called with the library's arguments (it ignores them): the server's parsing of them
# and their Lua strings cost some 1,000 instructions each, the library's cost, not its Lua's.
set -euo pipefail
cd "$(dirname "$0")/.."
shapes=$(mktemp -d)
trap 'rm -rf "$shapes"' EXIT
python3 - "$shapes" <<'PY'
import re, sys
source = open("benches/ratelimit/main.rs").read()
for name in ["EXPRESS_SHAPE", "HITALL_SHAPE", "TWO_KEY_SLIDING_WINDOW", "SEMAPHORE_ACQUIRE", "SEMAPHORE_RELEASE"]:
    body = re.search(r"const " + name + r': &str = "(.*?)";', source, re.S).group(1)
    open(f"{sys.argv[1]}/{name}.lua", "w").write(body)
PY
count() { python3 scripts/callgrind.py --calls 20000 --keys 1000 "$@" | tail -1 | cut -d' ' -f1; }
row() {  # name, the library's call, the floor's call, the script's call, its script(s)
    local name=$1 library=$2 floor=$3 peer=$4 scripts=()
    for script in "${@:5}"; do scripts+=(--script "$shapes/$script.lua"); done
    printf '  %-18s library %8s  floor %8s  script %8s\n' "$name" \
        "$(count --server "$server" --library -- $library)" \
        "$(count --server "$server" --library --functions scripts/library-floors.lua -- $floor)" \
        "$(count --server "$server" "${scripts[@]}" -- $peer)"
}
for server in "${@:-redis-server}"; do
    echo "$server"
    row hit "FCALL ratelimit_hit 1 {key} 1000000000 60" "FCALL floor_hit 1 {key} 1000000000 60" \
        "EVALSHA {sha} 1 {key} 1 60000" EXPRESS_SHAPE
    row "hitall, 2 limits" "FCALL ratelimit_hitall 2 {key}:m {key}:h 1000000000 60 1000000000 3600" \
        "FCALL floor_hitall 2 {key}:m {key}:h 1000000000 60 1000000000 3600" \
        "EVALSHA {sha} 2 {key}:m {key}:h 1000000000 60 1000000000 3600" HITALL_SHAPE
    row slide "FCALL ratelimit_slide 1 {key} 1000000000 60" "FCALL floor_slide 1 {key} 1000000000 60" \
        "EVALSHA {sha} 2 {key}:a {key}:b 1000000000 1764618000000 60000" TWO_KEY_SLIDING_WINDOW
    row "acquire + release" \
        "FCALL ratelimit_acquire 1 {key} 1000000 30 ID {i} ; FCALL ratelimit_release 1 {key} {i}" \
        "FCALL floor_acquire 1 {key} 1000000 30 ID {i} ; FCALL floor_release 1 {key} {i}" \
        "EVALSHA {sha} 1 {key} 1000000 30000 {i} ; EVALSHA {sha2} 1 {key} {i}" SEMAPHORE_ACQUIRE SEMAPHORE_RELEASE
done
