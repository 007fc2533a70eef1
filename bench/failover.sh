#!/usr/bin/env bash
# Failover benchmark: one of two providers always answers 503.  Reports the
# client success rate and how many requests the failing provider received
# in all and after its circuit breaker opened.
#
#   bench/failover.sh            (DURATION=10 CONNS=50)

set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
prefix="$root/build/bench-failover"
DURATION=${DURATION:-10}
CONNS=${CONNS:-50}

rm -rf "$prefix"
mkdir -p "$prefix/tmp"
printf 'sk-bench\n' > "$prefix/key"
sed -e "s|%%ROOT%%|$root|g" -e "s|%%PREFIX%%|$prefix|g" \
    "$root/bench/failover.conf" > "$prefix/nginx.conf"

nginx -p "$prefix/" -c "$prefix/nginx.conf" -e "$prefix/error.log"
trap 'nginx -p "$prefix/" -c "$prefix/nginx.conf" -e "$prefix/error.log" -s quit' EXIT
sleep 0.5

wrk -t1 -c"$CONNS" -d"${DURATION}s" --latency -s "$root/bench/post.lua" \
    http://127.0.0.1:18301/v1/chat/completions > "$prefix/wrk.txt"

total=$(awk '/requests in/ { print $1 }' "$prefix/wrk.txt")
bad=$(awk '/Non-2xx/ { print $NF }' "$prefix/wrk.txt")
bad=${bad:-0}
rps=$(awk '/Requests\/sec/ { print $2 }' "$prefix/wrk.txt")
down=$(wc -l < "$prefix/down.log")
opened=$(grep -c 'circuit breaker of provider "down" .* -> OPEN' \
         "$prefix/error.log" || true)

echo "requests                : $total in ${DURATION}s ($rps req/s, $CONNS connections)"
awk -v t="$total" -v b="$bad" \
    'BEGIN { printf "client success rate     : %.4f (%d non-2xx)\n", (t - b) / t, b }'
echo "failing provider hits   : $down in all (breaker opened $opened time(s))"
awk -v t="$total" -v d="$down" \
    'BEGIN { printf "share sent to it       : %.5f of client requests\n", d / t }'
