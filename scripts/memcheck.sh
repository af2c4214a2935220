#!/usr/bin/env bash
# `make memcheck`: the module under valgrind memcheck for a short run of every command and
# error path. Runs on Valkey's binary, built with libc malloc, so that valgrind sees every
# allocation (Debian's redis-server uses jemalloc, which valgrind cannot follow).
set -euo pipefail
server=${VALKEY_SERVER:?set VALKEY_SERVER (make memcheck does)}
module=${MODULE:-target/release/libredis_ratelimit.so}
command -v valgrind >/dev/null || { echo "valgrind is missing: apt-get install valgrind"; exit 1; }
dir=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
trap 'rm -rf "$dir"' EXIT
valgrind --tool=memcheck --leak-check=full --show-leak-kinds=definite --errors-for-leak-kinds=definite \
    --log-file="$dir/valgrind.log" \
    "$server" --port "$port" --bind 127.0.0.1 --save "" --dir "$dir" --logfile server.log \
    --enable-debug-command yes --loadmodule "$(realpath "$module")" CL.THROTTLE &
cli() { redis-cli -p "$port" "$@"; }
for _ in $(seq 100); do cli ping >/dev/null 2>&1 && break; sleep 0.2; done
cli ping >/dev/null
for i in $(seq 200); do cli ratelimit.hit "k:$((i % 7))" 5 2 >/dev/null; done
cli ratelimit.hit k:1 5 2 cost 9 >/dev/null
cli ratelimit.hit k:ms 5 100 ms >/dev/null
cli set leaked 3 >/dev/null; cli ratelimit.hit leaked 1 60 >/dev/null
cli rpush list x >/dev/null; cli ratelimit.hit list 1 1 >/dev/null
cli set text abc >/dev/null; cli ratelimit.hit text 1 1 >/dev/null
for bad in "k 0 1" "k 1" "k 1 1 COST" "k 1 1 MS MS" "k 1 1 nope" "k 1 9223372036854775807"; do
    cli ratelimit.hit $bad >/dev/null || true
done
for i in $(seq 50); do cli ratelimit.hitall 2 "{u$((i % 5))}:s" "{u$((i % 5))}:h" 3 1 10 60 >/dev/null; done
cli ratelimit.hitall 2 a a 1 1 1 1 >/dev/null
cli ratelimit.hitall 2 list k:1 1 1 1 1 >/dev/null
cli ratelimit.hitall 0 >/dev/null
cli ratelimit.peek k:1 5 >/dev/null; cli ratelimit.peek missing 5 cost 2 >/dev/null; cli ratelimit.peek list 5 >/dev/null
for i in $(seq 100); do
    cli ratelimit.gcra "g:$((i % 7))" 3 10 1 >/dev/null; cli cl.throttle "c:$((i % 7))" 3 10 1 >/dev/null
done
cli ratelimit.gcra g:1 3 10 0.5 tokens 9 >/dev/null; cli cl.throttle c:1 3 10 1 0 >/dev/null
cli set gleak 4000000000000000000 >/dev/null; cli ratelimit.gcra gleak 1 1 1 >/dev/null
for bad in "g 1 1" "g -1 1 1" "g 1 0 1" "g 1 1 0" "g 1 1 x" "g 1 1 1 TOKENS" "g 200000000 1 86400" "list 1 1 1" "text 1 1 1"; do
    cli ratelimit.gcra $bad >/dev/null || true; cli cl.throttle $bad >/dev/null || true
done
# The sliding window: counts, rotation, PEEK, a heal, errors.
for i in $(seq 100); do cli ratelimit.slide "s:$((i % 7))" 5 200 ms >/dev/null; done
cli ratelimit.slide s:1 5 1 peek >/dev/null; cli set sleak slide:1000:0:1:2 >/dev/null; cli ratelimit.slide sleak 5 1 >/dev/null
for bad in "s 0 1" "s 1 1 COST 0" "s 1 1 PEEK RESERVE" "list 1 1" "text 1 1"; do cli ratelimit.slide $bad >/dev/null || true; done
# Leases: acquire (with and without an id), renew, release, expiry, errors.
for i in $(seq 60); do cli ratelimit.acquire "l:$((i % 3))" 2 100 ms >/dev/null; done
cli ratelimit.acquire l:1 2 30 id me >/dev/null; cli ratelimit.renew l:1 me 60 >/dev/null; cli ratelimit.release l:1 me >/dev/null
cli ratelimit.renew l:1 gone 5 >/dev/null; cli ratelimit.release l:1 gone >/dev/null
for bad in "l 0 1" "l 1 1 ID" "list 1 1"; do cli ratelimit.acquire $bad >/dev/null || true; done
# Give-backs, reservations and settles on the three limiters, and bad settles.
cli ratelimit.hit k:1 5 2 cost -2 >/dev/null; cli ratelimit.slide s:1 5 200 ms cost -9223372036854775808 >/dev/null
cli ratelimit.gcra g:1 3 10 1 tokens -2 >/dev/null
for kind in "ratelimit.hit r:h 50 60 cost 9" "ratelimit.slide r:s 50 60 cost 9" "ratelimit.gcra r:g 9 1 60 tokens 5" \
    "ratelimit.hit r:a 50 60 align cost 9" "ratelimit.hit r:c 50 month tz +05:30 cost 9" \
    "ratelimit.hit r:n 50 day tz America/Sao_Paulo cost 9"; do
    key=$(echo "$kind" | cut -d' ' -f2)
    reservation=$(cli $kind reserve | tail -1)
    cli ratelimit.settle "$key" "$reservation" 3 >/dev/null; cli ratelimit.settle "$key" "$reservation" 30 >/dev/null
    cli ratelimit.settle other "$reservation" 3 >/dev/null || true
done
for bad in "k garbage 1" "k h:1:1:1:1:01234567 -1" "k" "list h:1:1:1:1:01234567 1" "k c:1:2:1:1:01234567:Nowhere/City 1" \
    "k c:1:2:1:1:01234567: 1" "k c:1:9:1:1:01234567 1" "k a:1:7:1:1:01234567 1"; do
    cli ratelimit.settle $bad >/dev/null || true
done
# Requests and tokens in one HITALL, reserved, then settled in one call (and refused ones).
for slide in "" "slide"; do
    all=$(cli ratelimit.hitall 3 "{t$slide}:r" "{t$slide}:m" "{t$slide}:d" 5 60 1000 60 9000 3600 $slide tokens 40 2 reserve | tail -1)
    cli ratelimit.settle "{t$slide}:m" "{t$slide}:d" "$all" 10 >/dev/null; cli ratelimit.settle "{t$slide}:m" "{t$slide}:d" "$all" 90 >/dev/null
    cli ratelimit.settle "{t$slide}:m" "$all" 10 >/dev/null || true; cli ratelimit.settle "{t$slide}:d" "{t$slide}:m" "$all" 10 >/dev/null || true
    cli ratelimit.settle "{t$slide}:m" "{t$slide}:m" "$all" 10 >/dev/null || true
done
cli ratelimit.hitall 2 "{t}:a" "{t}:b" 5 month 9 day tz +05:30 tokens 3 2 reserve >/dev/null
for bad in "1 a 5 60 tokens 0 1" "1 a 5 60 tokens 5 2" "1 a 5 60 tokens 5" "1 a 5 60 reserve"; do
    cli ratelimit.hitall $bad >/dev/null || true
done
# Windows laid on the clock: ALIGN, calendar windows in UTC, offsets and named zones (the zone
# database's lookups and the memo of windows seen before), HITALL's too, and their errors.
for i in $(seq 30); do
    cli ratelimit.hit "a:$((i % 3))" 5 60 align >/dev/null
    cli ratelimit.hit "cal:$((i % 4))" 5 day tz America/New_York >/dev/null
done
for window in "day" "week tz UTC" "month tz +05:30" "year tz Asia/Kolkata" "day tz Pacific/Chatham" \
    "week tz Europe/Paris" "month tz America/Sao_Paulo" "day tz America/Goose_Bay"; do
    cli ratelimit.hit "cal:$window" 5 $window >/dev/null
done
cli ratelimit.hitall 2 "{cal}:a" "{cal}:b" 3 month 10 day tz Australia/Lord_Howe >/dev/null
cli ratelimit.hitall 2 "{cal}:c" "{cal}:d" 3 60 10 3600 align >/dev/null
for bad in "a 1 60 align tz UTC" "a 1 day tz" "a 1 day tz Nowhere/City" "a 1 day tz +99:99" \
    "a 1 day tz ../../../etc/passwd" "a 1 60 tz UTC"; do
    cli ratelimit.hit $bad >/dev/null || true
done
# Shadow mode: calls under its prefixes that their limits would deny are admitted and counted.
cli config set ratelimit.shadow "sh: {sh} {mx}:s" >/dev/null
for i in $(seq 20); do
    cli ratelimit.hit sh:h 2 60 >/dev/null; cli ratelimit.slide sh:s 2 60 >/dev/null
    cli ratelimit.gcra sh:g 1 1 60 >/dev/null; cli cl.throttle sh:c 1 1 60 >/dev/null
    cli ratelimit.acquire sh:l 1 60 >/dev/null; cli ratelimit.hit sh:cal 2 day tz Europe/Paris >/dev/null
    cli ratelimit.hitall 2 "{sh}:a" "{sh}:b" 2 60 100 60 >/dev/null
    cli ratelimit.hitall 2 "{mx}:s" "{mx}:e" 1 60 5 60 >/dev/null  # one key shadowed, one enforced
done
cli config set ratelimit.shadow "sh: sh:" >/dev/null 2>&1 || true
cli ratelimit.top shadowed >/dev/null; cli info ratelimit >/dev/null
cli config set ratelimit.shadow "" >/dev/null
# RATELIMIT.TOP: both views, a count, a reset.
cli ratelimit.top >/dev/null; cli ratelimit.top admitted count 3 >/dev/null; cli ratelimit.top reset >/dev/null
cli ratelimit.top count 0 >/dev/null || true
cli config set ratelimit.audit-limit 3 >/dev/null; cli config set ratelimit.walk-slice-us 200 >/dev/null
# The guard: bad rules, rules, leaking writes of every kind, a transaction with its own expiry.
cli config set ratelimit.guard "gd: 0" >/dev/null 2>&1 || true
cli config set ratelimit.guard "gd: 60 gf: 500ms" >/dev/null
for i in $(seq 100); do cli incr "gd:$((i % 9))" >/dev/null; cli set "gf:$i" "$i" >/dev/null; done
cli set gd:text hello >/dev/null; cli persist gd:1 >/dev/null; cli rename gd:2 gd:renamed >/dev/null
printf 'MULTI\nINCR gd:multi\nEXPIRE gd:multi 5 NX\nEXEC\n' | cli >/dev/null
cli eval "return redis.call('INCR', KEYS[1])" 1 gd:lua >/dev/null
cli config set ratelimit.guard "" >/dev/null
cli info ratelimit >/dev/null; cli command docs >/dev/null
cli debug populate 20000 pop >/dev/null
for i in $(seq 50); do cli set "leak:$i" "$i" >/dev/null; done
cli ratelimit.audit leak: >/dev/null
cli ratelimit.audit "" limit 5 >/dev/null
cli ratelimit.repair leak: 60 >/dev/null
cli ratelimit.audit leak: limit -1 >/dev/null
cli acl setuser limited on nopass '~leak:1*' +ratelimit.audit >/dev/null
cli --user limited --pass x ratelimit.audit leak: >/dev/null 2>&1 || true
# A client that leaves in the middle of a walk; then more walks at once than ratelimit.max-walks.
timeout 0.05 redis-cli -p "$port" ratelimit.audit pop: >/dev/null 2>&1 || true
sleep 1
cli config set ratelimit.max-walks 4 >/dev/null
for _ in $(seq 8); do cli ratelimit.audit pop: limit 0 >/dev/null 2>&1 & done
wait_walks() { for _ in $(seq 300); do cli info ratelimit | grep -q "walks_running:0" && return; sleep 0.2; done; }
sleep 0.5; wait_walks
printf 'MULTI\nRATELIMIT.AUDIT leak:\nEXEC\n' | cli >/dev/null
# CONFIG RESETSTAT: alone, queued in a transaction (run, and discarded), refused by ACL; the
# category's listing.
cli config resetstat >/dev/null
printf 'MULTI\nRATELIMIT.HIT k:1 5 2\nCONFIG RESETSTAT\nEXEC\n' | cli >/dev/null
printf 'MULTI\nCONFIG RESETSTAT\nDISCARD\n' | cli >/dev/null
cli --user limited --pass x config resetstat >/dev/null 2>&1 || true
cli acl cat ratelimit >/dev/null; cli info ratelimit >/dev/null
cli shutdown nosave >/dev/null 2>&1 || true
wait
grep -E "ERROR SUMMARY|definitely lost" "$dir/valgrind.log"
if grep -q "ratelimit" "$dir/valgrind.log" && ! grep -q "ERROR SUMMARY: 0 errors" "$dir/valgrind.log"; then
    echo "memcheck: errors in the module, full log:"; cat "$dir/valgrind.log"; exit 1
fi
grep -q "ERROR SUMMARY: 0 errors" "$dir/valgrind.log" || { echo "memcheck: errors outside the module, see above"; cat "$dir/valgrind.log" | tail -60; exit 1; }
echo "memcheck: no errors, no definite leaks"
