#!/usr/bin/env bash
# What a Lua table in a reply costs the server, timed, on each server given (the redis-server on
# PATH by default). Four functions make the same two calls (GET, then SET with PX: a limiter's
# read and write) and differ only in what they answer: one integer, a table of one, a table of
# five (SLIDE's and ACQUIRE's shape), a nested table (HITALL's, two limits). redis-benchmark
# drives each (4 connections, pipelined 16 deep, 100,000 keys; 300,000 calls to warm, 1,000,000
# measured) and the server's INFO commandstats gives usec_per_call: the time inside FCALL.
#
#   scripts/reply-cost.sh [server ...]
#
# The server answers a Lua table through a deferred length (the table's size is not known until
# it has been walked): the reply so far is trimmed and what follows goes into a fresh reply block,
# once per table. A module's reply, or a script answering one integer, does not pay it.
set -euo pipefail
dir=$(mktemp -d)
trap 'redis-cli -p "$port" SHUTDOWN NOSAVE >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$dir/reply_cost.lua" <<'LUA'
#!lua name=reply_cost
local function write(key)
    redis.pcall('GET', key)
    redis.call('SET', key, '1', 'PX', '60000')
end
redis.register_function('one_integer', function(keys) write(keys[1]) return 1 end)
redis.register_function('table_of_one', function(keys) write(keys[1]) return { 1 } end)
redis.register_function('table_of_five', function(keys) write(keys[1]) return { 1, 1, 5, -1, 60000 } end)
redis.register_function('nested', function(keys) write(keys[1]) return { 1, { 1, 5, 60000 }, { 1, 5, 3600000 } } end)
LUA
for server in "${@:-redis-server}"; do
    "$server" --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" --logfile "$dir/server.log" &
    for _ in $(seq 50); do redis-cli -p "$port" PING >/dev/null 2>&1 && break; sleep 0.1; done
    redis-cli -p "$port" -x FUNCTION LOAD <"$dir/reply_cost.lua" >/dev/null
    echo "$server ($(redis-cli -p "$port" INFO server | grep -E '^(redis|valkey)_version' | tail -1 | tr -d '\r'))"
    for function in one_integer table_of_one table_of_five nested; do
        bench() { redis-benchmark -p "$port" -c 4 -P 16 -r 100000 -q -n "$1" FCALL "$function" 1 'k:__rand_int__' >/dev/null; }
        bench 300000
        redis-cli -p "$port" CONFIG RESETSTAT >/dev/null
        bench 1000000
        printf '  %-14s %s µs a call\n' "$function" \
            "$(redis-cli -p "$port" INFO commandstats | grep '^cmdstat_fcall:' | grep -o 'usec_per_call=[0-9.]*' | cut -d= -f2)"
    done
    redis-cli -p "$port" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
    wait
done
