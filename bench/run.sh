#!/usr/bin/env bash
# Happy-path benchmark: requests/s and p50/p99 latency of a small
# chat-completion POST through plain nginx proxy_pass and through
# omniroute_pass, to the same local mock provider, in one run; prints the
# ratio.  Each side is measured ROUNDS times, alternating, and the best
# round of each is compared.
#
#   bench/run.sh            (or: make bench)
#   DURATION=10 CONNS=64 ROUNDS=3 bench/run.sh

set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
prefix="$root/build/bench"
DURATION=${DURATION:-8}
CONNS=${CONNS:-50}
THREADS=${THREADS:-1}
ROUNDS=${ROUNDS:-3}

mkdir -p "$prefix/tmp"
printf 'sk-bench\n' > "$prefix/key"
sed -e "s|%%ROOT%%|$root|g" -e "s|%%PREFIX%%|$prefix|g" \
    "$root/bench/bench.conf" > "$prefix/nginx.conf"

nginx -p "$prefix/" -c "$prefix/nginx.conf" -e "$prefix/error.log"
trap 'nginx -p "$prefix/" -c "$prefix/nginx.conf" -e "$prefix/error.log" -s quit' EXIT
sleep 0.5

url=http://127.0.0.1:18201

# sanity: both paths answer 200 with the provider's body
for p in plain omni; do
    code=$(curl -s -o /dev/null -w '%{http_code}' -X POST \
           -d '{"model":"bench"}' "$url/$p/chat/completions")
    [ "$code" = 200 ] || { echo "$p answered $code" >&2; exit 1; }
done

run() {
    wrk -t"$THREADS" -c"$CONNS" -d"${DURATION}s" --latency \
        -s "$root/bench/post.lua" "$url/$1/chat/completions" \
        > "$prefix/wrk-$1.txt"
    awk '
        /Requests\/sec/ { rps = $2 }
        /^ +50%/ { p50 = $2 }
        /^ +99%/ { p99 = $2 }
        / [0-9]+ requests in/ { }
        /Non-2xx/ { bad = $NF }
        END { printf "%s %s %s %s\n", rps, p50, p99, bad + 0 }
    ' "$prefix/wrk-$1.txt"
}

best_plain=0; best_omni=0
for i in $(seq 1 "$ROUNDS"); do
    read -r rps p50 p99 bad <<<"$(run plain)"
    printf 'round %d  plain proxy_pass : %10.0f req/s  p50 %-8s p99 %-8s non-2xx %s\n' \
        "$i" "$rps" "$p50" "$p99" "$bad"
    if awk "BEGIN{exit !($rps > $best_plain)}"; then
        best_plain=$rps; plain_line="$p50 $p99"
    fi

    read -r rps p50 p99 bad <<<"$(run omni)"
    printf 'round %d  omniroute_pass   : %10.0f req/s  p50 %-8s p99 %-8s non-2xx %s\n' \
        "$i" "$rps" "$p50" "$p99" "$bad"
    if awk "BEGIN{exit !($rps > $best_omni)}"; then
        best_omni=$rps; omni_line="$p50 $p99"
    fi
done

echo
printf 'best plain proxy_pass : %.0f req/s (p50/p99 %s)\n' "$best_plain" "$plain_line"
printf 'best omniroute_pass   : %.0f req/s (p50/p99 %s)\n' "$best_omni" "$omni_line"
awk -v a="$best_omni" -v b="$best_plain" \
    'BEGIN { printf "ratio omniroute/plain : %.3f (target >= 0.85)\n", a / b }'
