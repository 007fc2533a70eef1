#!/usr/bin/env bash
# Gateway benchmark: requests/s of plain nginx proxy_pass and of
# omniroute_pass to the same mock provider, with real coding-agent bodies
# (fixtures/agent_body.py), in one run.  Each case measures its sides in
# ROUNDS alternating rounds (the order rotates every round) and compares
# the best and the median round: ratio module/plain.
#
#   case          body                           sides
#   tiny          81 B, same model               plain, module
#   tiny-limit    the same through a client key with six limits (issue
#                 29: admission, settlement, the x-ratelimit-* headers)
#                                                plain, module
#   rewrite-8k    8 KiB, alias smart -> upstream-model-name
#                                                plain (body already names
#                                                upstream-model-name), module
#   same-8k       8 KiB, same model (bench)      plain, module
#   same-150k     150 KiB, same model            plain, module
#   rewrite-150k  150 KiB, model rewritten       plain, module
#   sse           8 KiB "stream":true; the mock answers
#                 fixtures/streams/openai-chat.sse as text/event-stream;
#                 2 connections, so the stream is probed
#                                                plain, module
#   sse-400       the same with a 400-event Chat stream of the fixture's
#                 shape (bench/streams.py) sent in one burst
#                                                plain, module
#   sse-paced     a 40-event Chat stream of that shape from bench/paced.py,
#                 one event per write, PACED_GAP_MS (2) ms apart (as real
#                 providers send: one event per read); wrk -c PACED_CONNS
#                 (8)                            plain, module
#   pool          POOL_KIB KiB, same model; a model of 1 connection and one
#                 of POOL connections, POOL_COOLING of them cooling down,
#                 with breaker/cooldown/lockout records of other providers
#                 in the zone                    plain, module 1, module POOL
#                 (ratio POOL/1 on the module side)
#   memory        MEM_CONNS concurrent MEM_KIB KiB bodies, model rewritten;
#                 a fresh gateway worker per side and round: VmRSS before,
#                 peak (VmHWM, and the highest sampled VmRSS), after
#                                                plain, module
#
#   bench/run.sh                       (or: make bench, after make)
#   CASES="tiny sse" DURATION=10 ROUNDS=5 bench/run.sh
#   MEASURE=instr bench/run.sh         instructions per request instead
#
# Each two-sided case (wrk mode) ends with LAT_DURATION (6) s of wrk -c1
# per side, in LAT_ROUNDS (3) rounds, the order rotating: the latency the
# module adds at concurrency 1 (medians of the rounds' p50 and p99), in
# the summary.
#
# MEASURE=instr runs the gateway under valgrind's callgrind (one process,
# no master) and counts the instructions it executes per request, in its
# own code, nginx's, the libraries' (not the kernel's): the same figure on
# every run, however busy the machine, so it shows what a change moved
# where req/s swing by 15 %.  Each side is warmed up for 1 s, then counted
# over DURATION (3) seconds of wrk -c CONNS (4); ROUNDS is 1, and the
# memory case is not run.
#
# Knobs (environment): DURATION (5 s per side and round), ROUNDS (3),
# CONNS (50), THREADS (1), CASES (all, in the order above), POOL (500),
# POOL_COOLING (50), POOL_KIB (8; 0: the tiny body), STATE_CONNS (20 per state provider),
# MEM_CONNS (32), MEM_KIB (1024), BODY_BUFFER (client_body_buffer_size of
# the gateway, 2m: every body in memory; with nginx's default 16k larger
# bodies go through a temp file, and a warn line per request, on both
# sides), BASE_PORT (18210: gateway +1, mock +2, admin API +3),
# FIXTURES (the fixtures directory; default ../shared/fixtures next to the
# repository).
#
# The gateway has one worker, the mock provider (bench/mock.conf) is a
# second nginx with one worker.  Everything is under build/bench; the
# summary is also written to build/bench/summary.md.

set -euo pipefail

MEASURE=${MEASURE:-wrk}
if [ "$MEASURE" = instr ]; then
    DURATION=${DURATION:-3}
    ROUNDS=${ROUNDS:-1}
    CONNS=${CONNS:-4}
    CASES=${CASES:-tiny tiny-limit rewrite-8k same-8k same-150k rewrite-150k sse sse-400 sse-paced pool}
fi

root=$(cd "$(dirname "$0")/.." && pwd)
prefix="$root/build/bench"
DURATION=${DURATION:-5}
ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-50}
THREADS=${THREADS:-1}
CASES=${CASES:-tiny tiny-limit rewrite-8k same-8k same-150k rewrite-150k sse sse-400 sse-paced pool memory}
PACED_GAP_MS=${PACED_GAP_MS:-2}
PACED_CONNS=${PACED_CONNS:-8}
LAT_DURATION=${LAT_DURATION:-6}
LAT_ROUNDS=${LAT_ROUNDS:-3}
POOL=${POOL:-500}
POOL_COOLING=${POOL_COOLING:-50}
POOL_KIB=${POOL_KIB:-8}
STATE_CONNS=${STATE_CONNS:-20}
MEM_CONNS=${MEM_CONNS:-32}
MEM_KIB=${MEM_KIB:-1024}
BODY_BUFFER=${BODY_BUFFER:-2m}
BASE=${BASE_PORT:-18210}

gw_port=$((BASE + 1))
mock_port=$((BASE + 2))
admin_port=$((BASE + 3))
paced_port=$((BASE + 4))
url=http://127.0.0.1:$gw_port
hz=$(getconf CLK_TCK)
admin=http://127.0.0.1:$admin_port/omniroute
so="$root/build/nginx/ngx_http_omniroute_module.so"

if [ -n "${FIXTURES:-}" ]; then
    fixtures=$FIXTURES
else
    fixtures=$root/../shared/fixtures
fi
agent_body=$fixtures/agent_body.py
sse_file=$fixtures/streams/openai-chat.sse

die() { echo "bench: $*" >&2; exit 1; }

[ -f "$so" ] || die "build the module first (make)"
command -v wrk >/dev/null || die "wrk is not installed (make test-deps)"
[ -f "$agent_body" ] && [ -f "$sse_file" ] \
    || die "fixtures not found in $fixtures (set FIXTURES)"
[ "$POOL_COOLING" -lt "$POOL" ] || die "POOL_COOLING must be below POOL"
case $MEASURE in
    wrk) ;;
    instr) command -v valgrind >/dev/null && command -v callgrind_control >/dev/null \
               || die "MEASURE=instr: valgrind is not installed (make test-deps)" ;;
    *) die "unknown MEASURE $MEASURE (wrk or instr)" ;;
esac
for c in $CASES; do
    case $c in
        tiny|tiny-limit|rewrite-8k|same-8k|same-150k|rewrite-150k|sse|sse-400|sse-paced|pool) ;;
        memory) [ "$MEASURE" = wrk ] || die "the memory case is measured with wrk only" ;;
        *) die "unknown case $c" ;;
    esac
done

# --- processes ---------------------------------------------------------------

ngx() { local p=$1; shift; nginx -p "$p/" -c "$p/nginx.conf" -e "$p/error.log" "$@"; }

# stop the nginx master of prefix P (its pid file, when that process is the
# nginx of P), wait until it is gone
stop_ngx() {
    local p=$1 pid
    [ -s "$p/nginx.pid" ] || return 0
    pid=$(cat "$p/nginx.pid") || return 0
    tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "-c $p/nginx.conf" \
        || return 0
    kill -TERM "$pid" 2>/dev/null || return 0
    for _ in $(seq 1 100); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.05
    done
    kill -KILL "$pid" 2>/dev/null || true
}

# wait_port PORT [TRIES]: every 0.05 s
wait_port() {
    for _ in $(seq 1 "${2:-100}"); do
        curl -s -o /dev/null "http://127.0.0.1:$1/" && return 0
        sleep 0.05
    done
    die "nothing listens on port $1"
}

# the gateway and the pid of its worker (MEASURE=instr: the one process,
# under callgrind)
start_gw() {
    if [ "$MEASURE" = instr ]; then
        rm -f "$prefix"/callgrind.out.*
        valgrind --tool=callgrind --callgrind-out-file="$prefix/callgrind.out.%p" \
            nginx -p "$prefix/" -c "$prefix/nginx.conf" -e "$prefix/error.log" \
            -g 'daemon off; master_process off;' > "$prefix/valgrind.log" 2>&1 &
        gw_worker=$!
        wait_port "$gw_port" 1200
        return
    fi
    ngx "$prefix"
    wait_port "$gw_port"
    gw_worker=$(pgrep -P "$(cat "$prefix/nginx.pid")" | head -1)
    [ -n "$gw_worker" ] || die "no gateway worker"
}

alive() {
    [ -d "/proc/$gw_worker" ] \
        || die "the gateway worker $gw_worker is gone (see $prefix/error.log)"
}

# CPU time of a process so far, in clock ticks (utime + stime)
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

sampler_pid=
paced_pid=
cleanup() {
    [ -z "$sampler_pid" ] || kill "$sampler_pid" 2>/dev/null || true
    [ -z "$paced_pid" ] || kill "$paced_pid" 2>/dev/null || true
    stop_ngx "$prefix"
    stop_ngx "$prefix/mock"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# a leftover of an interrupted run of this script
stop_ngx "$prefix"
stop_ngx "$prefix/mock"

# --- files -------------------------------------------------------------------

bodies=$prefix/bodies
res=$prefix/results
rm -rf "$prefix/tmp" "$prefix/mock/tmp" "$res"
mkdir -p "$prefix/tmp" "$prefix/mock/tmp" "$bodies" "$res"
rm -f "$prefix/error.log" "$prefix/mock/error.log" "$prefix/mock/probe.log"
printf 'sk-bench\n' > "$prefix/key"
printf 'sk-fail\n' > "$prefix/key-fail"

subst() {
    sed -e "s|%%ROOT%%|$root|g" -e "s|%%PREFIX%%|$prefix|g" \
        -e "s|%%GW_PORT%%|$gw_port|g" -e "s|%%MOCK_PORT%%|$mock_port|g" \
        -e "s|%%ADMIN_PORT%%|$admin_port|g" -e "s|%%PACED_PORT%%|$paced_port|g" \
        -e "s|%%BODY_BUFFER%%|$BODY_BUFFER|g" "$1"
}
subst "$root/bench/bench.conf" > "$prefix/nginx.conf"
subst "$root/bench/mock.conf" > "$prefix/mock/nginx.conf"

# the streams (mock/sse.conf, mock/sse400.conf, paced.sse)
python3 "$root/bench/streams.py" "$sse_file" "$prefix/mock" "$prefix/paced.sse"

{
    echo "# generated by bench/run.sh"
    for i in $(seq 1 "$POOL"); do
        if [ "$i" -le "$POOL_COOLING" ]; then
            echo "omniroute_connection pool-$i provider=pool key_file=$prefix/key-fail priority=0;"
        else
            echo "omniroute_connection pool-$i provider=pool key_file=$prefix/key priority=1;"
        fi
    done
    for i in $(seq 1 "$STATE_CONNS"); do
        echo "omniroute_connection down-$i provider=down key_file=$prefix/key;"
        echo "omniroute_connection lim-$i provider=lim key_file=$prefix/key;"
    done
} > "$prefix/conns.conf"

# body KIB MODEL [stream]: path of the generated body (kept while the
# generator is unchanged)
body() {
    local f="$bodies/$1k-$2${3:+-$3}.json"
    if [ ! -s "$f" ] || [ "$agent_body" -nt "$f" ]; then
        python3 "$agent_body" "$@" > "$f.tmp" || { rm -f "$f.tmp"; return 1; }
        mv "$f.tmp" "$f"
    fi
    echo "$f"
}

tiny() {
    local f="$bodies/tiny-$1.json"
    printf '{"model":"%s","messages":[{"role":"user","content":"Say hi"}],"max_tokens":16}' \
        "$1" > "$f"
    echo "$f"
}

size() { wc -c < "$1" | awk '{ n = $1; if (n >= 1048576) printf "%.2f MiB", n / 1048576;
                               else if (n >= 1024) printf "%.1f KiB", n / 1024;
                               else printf "%d B", n }'; }

# --- measuring ---------------------------------------------------------------

# post PATH BODY [PROBE]: status code; headers in $prefix/hdr, body in
# $prefix/resp; with PROBE, the mock logs what it received to probe.log
post() {
    curl -s -D "$prefix/hdr" -o "$prefix/resp" -w '%{http_code}' -X POST \
         -H 'Content-Type: application/json' \
         -H 'Authorization: Bearer client-gateway-key' \
         ${3:+-H "X-Bench-Probe: $3"} \
         --data-binary @"$2" "$url$1"
}

# received PROBE: the body size the mock provider got for that request
# (the mock logs after it answered: wait a little for the line)
received() {
    local n=
    for _ in $(seq 1 20); do
        [ -f "$prefix/mock/probe.log" ] \
            && n=$(awk -v p="$1" '$1 == p { n = $2 } END { print n }' "$prefix/mock/probe.log")
        [ -z "$n" ] || break
        sleep 0.05
    done
    echo "${n:-?}"
}

header() { tr -d '\r' < "$prefix/hdr" | awk -v h="$1" 'tolower($1) == tolower(h) ":" { print $2 }'; }

# sanity LABEL PATH BODY [PROBE]: a 200 with the provider's answer
sanity() {
    local code
    code=$(post "$2" "$3" "${4:-}") || true
    [ "$code" = 200 ] || { cat "$prefix/resp" >&2; echo >&2; die "$1: $2 answered $code"; }
    case $2 in
        /omni/*|/omni-limit/*) [ -n "$(header X-OmniRoute-Connection)" ] \
                     || die "$1: no X-OmniRoute-Connection" ;;
    esac
    case $3 in
        *-stream.json) grep -q '^data: \[DONE\]' "$prefix/resp" \
                  && header Content-Type | grep -q text/event-stream \
                  || die "$1: not the stream" ;;
        *)    grep -q chatcmpl-bench "$prefix/resp" \
                  || die "$1: not the provider's answer" ;;
    esac
}

# wrkrun PATH BODY CONNS: "rps p50 p99 errors cpu" (errors: non-2xx and
# socket errors; cpu: the gateway worker's CPU time per request, in us;
# MEASURE=instr: the instructions it executed per request)
wrkrun() {
    local t0 t1
    if [ "$MEASURE" = instr ]; then
        instrrun "$@"
        return
    fi
    t0=$(ticks "$gw_worker")
    wrk -t"$THREADS" -c"$3" -d"${DURATION}s" --timeout 30s --latency \
        -s "$root/bench/body.lua" "$url$1" -- "$2" > "$prefix/wrk.txt"
    t1=$(ticks "$gw_worker")
    awk -v t=$((t1 - t0)) -v hz="$hz" '
        /Requests\/sec/ { rps = $2 }
        / requests in / { n = $1 }
        /^ +50%/ { p50 = $2 }
        /^ +99%/ { p99 = $2 }
        /Non-2xx/ { bad += $NF }
        /Socket errors/ { gsub(",", ""); bad += $4 + $6 + $8 + $10 }
        END { printf "%s %s %s %d %.0f\n", rps + 0, p50 ? p50 : "-",
                     p99 ? p99 : "-", bad, n ? t * 1e6 / hz / n : 0 }
    ' "$prefix/wrk.txt"
}

# instrrun PATH BODY CONNS: wrkrun's line, instructions per request last
instrrun() {
    local dump n
    wrk -t"$THREADS" -c"$3" -d1s --timeout 30s -s "$root/bench/body.lua" \
        "$url$1" -- "$2" > /dev/null
    callgrind_control -z "$gw_worker" > /dev/null 2>&1
    wrk -t"$THREADS" -c"$3" -d"${DURATION}s" --timeout 30s --latency \
        -s "$root/bench/body.lua" "$url$1" -- "$2" > "$prefix/wrk.txt"
    n=$(ls "$prefix"/callgrind.out."$gw_worker".* 2>/dev/null | wc -l)
    callgrind_control -d "$gw_worker" > /dev/null 2>&1
    dump="$prefix/callgrind.out.$gw_worker.$((n + 1))"
    for _ in $(seq 1 200); do
        grep -q '^totals:' "$dump" 2>/dev/null && break
        sleep 0.05
    done
    grep -q '^totals:' "$dump" 2>/dev/null || die "no callgrind dump $dump"
    awk -v d="$dump" '
        /Requests\/sec/ { rps = $2 }
        / requests in / { n = $1 }
        /^ +50%/ { p50 = $2 }
        /^ +99%/ { p99 = $2 }
        /Non-2xx/ { bad += $NF }
        /Socket errors/ { gsub(",", ""); bad += $4 + $6 + $8 + $10 }
        END {
            while ((getline line < d) > 0) {
                if (line ~ /^summary: /) { split(line, f, " "); ir = f[2] }
            }
            printf "%s %s %s %d %.0f\n", rps + 0, p50 ? p50 : "-",
                   p99 ? p99 : "-", bad, n ? ir / n : 0
        }
    ' "$prefix/wrk.txt"
}

# stats FILE: "best median errors cpu" over the rounds (column 1 is req/s,
# 4 errors, 5 CPU us/request; cpu is the median)
stats() {
    local cpu
    cpu=$(sort -g -k5 "$1" | awk '{ c[NR] = $5 } END { print c[int((NR + 1) / 2)] }')
    sort -g -k1 "$1" | awk -v cpu="$cpu" '
        { r[NR] = $1; e += $4 }
        END { printf "%.0f %.0f %d %s\n", r[NR], r[int((NR + 1) / 2)], e, cpu }'
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "-" }'; }

table=$prefix/table.md
lat_table=$prefix/latency.md
: > "$table"
: > "$lat_table"
: > "$prefix/instr.txt"

# row NUM TITLE BASE_FILE MEASURED_FILE [BASE_LABEL MEASURED_LABEL]
row() {
    local b bm be bc m mm me mc bl=${5:-} ml=${6:-}
    read -r b bm be bc <<<"$(stats "$3")"
    read -r m mm me mc <<<"$(stats "$4")"
    if [ "$MEASURE" = instr ]; then
        printf '| %s | %s | %s%s | %s%s | %s | %s | %s |\n' "$1" "$2" \
            "${bl:+$bl: }" "$bc" "${ml:+$ml: }" "$mc" "$((mc - bc))" \
            "$(ratio "$bc" "$mc")" "$((be + me))" >> "$table"
        return
    fi
    printf '| %s | %s | %s%s / %s | %s%s / %s | %s | %s | %s / %s | %s | %s |\n' \
        "$1" "$2" "${bl:+$bl: }" "$b" "$bm" "${ml:+$ml: }" "$m" "$mm" \
        "$(ratio "$m" "$b")" "$(ratio "$mm" "$bm")" "$bc" "$mc" \
        "$(ratio "$bc" "$mc")" "$((be + me))" >> "$table"
}

# run_case ID CONNS "LABEL|PATH|BODY" ...: sanity, then ROUNDS rotating rounds
run_case() {
    local id=$1 conns=$2 i k j n rps p50 p99 bad cpu s label path file best med
    local -a got
    shift 2
    local sides=("$@")
    n=${#sides[@]}

    k=0
    for s in "${sides[@]}"; do
        IFS='|' read -r label path file <<<"$s"
        [ -s "$file" ] || die "$id: no body file for $label"
        sanity "$label" "$path" "$file" "$id.$k"
        got[$k]="$label $(received "$id.$k")"
        k=$((k + 1))
    done
    printf 'the provider received (bytes): %s' "${got[0]}"
    for k in $(seq 1 $((n - 1))); do printf ', %s' "${got[$k]}"; done
    echo

    for i in $(seq 1 "$ROUNDS"); do
        for k in $(seq 0 $((n - 1))); do
            j=$(( (k + i - 1) % n ))
            IFS='|' read -r label path file <<<"${sides[$j]}"
            read -r rps p50 p99 bad cpu <<<"$(wrkrun "$path" "$file" "$conns")"
            alive
            if [ "$MEASURE" = instr ]; then
                printf 'round %d  %-18s %9.0f req/s (under callgrind)  %8s instructions/req  errors %s\n' \
                    "$i" "$label" "$rps" "$cpu" "$bad"
            else
                printf 'round %d  %-18s %9.0f req/s  p50 %-9s p99 %-9s gw CPU %5s us/req  errors %s\n' \
                    "$i" "$label" "$rps" "$p50" "$p99" "$cpu" "$bad"
            fi
            echo "$rps $p50 $p99 $bad $cpu" >> "$res/$id.$j"
        done
    done

    for j in $(seq 0 $((n - 1))); do
        IFS='|' read -r label path file <<<"${sides[$j]}"
        if [ "$MEASURE" = instr ]; then
            read -r _ _ _ med <<<"$(stats "$res/$id.$j")"
            printf '%-26s %9s instructions/req' "$label" "$med"
            [ "$j" = 0 ] || printf '   %s / %s: %s' "${sides[0]%%|*}" "$label" \
                "$(ratio "$(stats "$res/$id.0" | cut -d' ' -f4)" "$med")"
            echo
            continue
        fi
        read -r best med bad <<<"$(stats "$res/$id.$j")"
        printf '%-26s best %9.0f  median %9.0f req/s' "$label" "$best" "$med"
        [ "$j" = 0 ] || printf '   ratio to %s: best %s, median %s' \
            "${sides[0]%%|*}" \
            "$(ratio "$best" "$(stats "$res/$id.0" | cut -d' ' -f1)")" \
            "$(ratio "$med" "$(stats "$res/$id.0" | cut -d' ' -f2)")"
        echo
    done
}

# us VALUE: a wrk latency (123.45us, 1.20ms, 1.00s) in microseconds
us() {
    awk -v v="$1" 'BEGIN {
        n = v + 0
        if (v ~ /us$/) f = 1; else if (v ~ /ms$/) f = 1000;
        else if (v ~ /m$/) f = 60e6; else if (v ~ /s$/) f = 1e6; else f = 0
        printf "%.0f", n * f }'
}

# latency ID NUM TITLE PLAIN_PATH PLAIN_BODY OMNI_BODY: wrk -c1 per side,
# LAT_ROUNDS (3) rounds of LAT_DURATION / LAT_ROUNDS s, the order rotating;
# the median p50 and p99 of each side in us; a row of latency.md: what the
# module adds at concurrency 1
latency() {
    local id=$1 num=$2 title=$3 pp50 pp99 mp50 mp99 p50 p99 rps bad cpu i k
    local save=$DURATION path file
    DURATION=$(awk -v d="$LAT_DURATION" -v r="$LAT_ROUNDS" 'BEGIN { d /= r; print d < 1 ? 1 : int(d) }')
    rm -f "$res/$id.lat.0" "$res/$id.lat.1"
    for i in $(seq 1 "$LAT_ROUNDS"); do
        for k in 0 1; do
            k=$(( (k + i - 1) % 2 ))
            if [ "$k" = 0 ]; then path=$4 file=$5; else path=/omni/chat/completions file=$6; fi
            read -r rps p50 p99 bad cpu <<<"$(wrkrun "$path" "$file" 1)"
            alive
            echo "$(us "$p50") $(us "$p99")" >> "$res/$id.lat.$k"
        done
    done
    DURATION=$save
    pp50=$(col 1 med "$res/$id.lat.0"); pp99=$(col 2 med "$res/$id.lat.0")
    mp50=$(col 1 med "$res/$id.lat.1"); mp99=$(col 2 med "$res/$id.lat.1")
    echo "added latency at concurrency 1: p50 +$((mp50 - pp50)) us" \
         "(plain $pp50, module $mp50), p99 +$((mp99 - pp99)) us (plain $pp99, module $mp99)"
    printf '| %s | %s | %s / %s | %s / %s | %+d | %+d |\n' "$num" "$title" \
        "$pp50" "$pp99" "$mp50" "$mp99" "$((mp50 - pp50))" "$((mp99 - pp99))" \
        >> "$lat_table"
}

# two-sided case: plain and module (CONNS connections, or the 7th argument)
pair() {
    local num=$1 id=$2 title=$3 plain=$4 omni=$5 ppath=${6:-/plain/chat/completions}
    local conns=${7:-$CONNS} mpath=${8:-/omni/chat/completions}
    echo
    echo "== $num. $title: plain $(size "$plain"), module $(size "$omni")"
    run_case "$id" "$conns" "plain|$ppath|$plain" \
             "module|$mpath|$omni"
    row "$num" "$title" "$res/$id.0" "$res/$id.1"
    if [ "$MEASURE" = instr ]; then
        echo "$id $(stats "$res/$id.0" | cut -d' ' -f4) $(stats "$res/$id.1" | cut -d' ' -f4)" \
            >> "$prefix/instr.txt"
    elif [ "$LAT_DURATION" != 0 ]; then
        latency "$id" "$num" "$title" "$ppath" "$plain" "$omni"
    fi
}

# the zone before the pool case: cooling pool connections, records of the
# other providers
pool_state() {
    local i code tb
    tb=$(tiny pool-many)
    for i in $(seq 1 $((POOL_COOLING + 2))); do
        code=$(post /omni/chat/completions "$tb") || true
        [ "$code" = 200 ] && break
    done
    [ "$code" = 200 ] || die "pool: still $code after cooling $POOL_COOLING connections"
    for i in $(seq 1 $((STATE_CONNS / 3 + 2))); do
        post /omni/chat/completions "$(tiny down-model)" > /dev/null || true
        post /omni/chat/completions "$(tiny lim-model)" > /dev/null || true
    done
    curl -s "$admin/api/resilience/cooldowns" > "$prefix/cooldowns.json"
    curl -s "$admin/api/monitoring/health" > "$prefix/health.json"
    python3 - "$prefix/cooldowns.json" "$prefix/health.json" <<'EOF'
import json, sys
from collections import Counter
cd = json.load(open(sys.argv[1]))
health = json.load(open(sys.argv[2]))
cool, lock = Counter(), Counter()
for c in cd["connections"]:
    if c["status"] != "active":
        cool[c["provider"]] += 1
    lock[c["provider"]] += len(c["lockouts"])
br = {p: v["state"] for p, v in health["providers"].items() if v["state"] != "CLOSED"}
print("zone state: connections not active:",
      ", ".join(f"{p} {n}" for p, n in cool.items()) or "none",
      "| model lockouts:", ", ".join(f"{p} {n}" for p, n in lock.items() if n) or "none",
      "| breakers:", ", ".join(f"{p} {s}" for p, s in br.items()) or "all CLOSED")
EOF
}

# --- memory ------------------------------------------------------------------

vm() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"; }
mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }

memory_case() {
    local plain omni i k j label path file warm worker
    local rps p50 p99 bad cpu before hwm sampled mean after
    plain=$(body "$MEM_KIB" upstream-model-name)
    omni=$(body "$MEM_KIB" smart)
    local sides=("plain|/plain/chat/completions|$plain|$(tiny upstream-model-name)"
                 "module|/omni/chat/completions|$omni|$(tiny smart)")
    echo
    echo "== 7. memory: $MEM_CONNS concurrent $(size "$omni") bodies, model rewritten;" \
         "a fresh gateway worker per run (RSS in MiB)"
    for i in $(seq 1 "$ROUNDS"); do
        for k in 0 1; do
            j=$(( (k + i - 1) % 2 ))
            IFS='|' read -r label path file warm <<<"${sides[$j]}"
            stop_ngx "$prefix"
            start_gw
            worker=$gw_worker
            sanity "$label" "$path" "$warm"
            before=$(vm "$worker" VmRSS)
            sanity "$label" "$path" "$file"
            rm -f "$prefix/rss.stop"
            python3 "$root/bench/rss.py" "$worker" "$prefix/rss.stop" \
                > "$prefix/rss.txt" &
            sampler_pid=$!
            read -r rps p50 p99 bad cpu <<<"$(wrkrun "$path" "$file" "$MEM_CONNS")"
            alive
            touch "$prefix/rss.stop"
            wait "$sampler_pid" || true
            sampler_pid=
            read -r sampled mean < "$prefix/rss.txt"
            hwm=$(vm "$worker" VmHWM)
            sleep 1
            after=$(vm "$worker" VmRSS)
            printf 'round %d  %-7s %7.0f req/s  p50 %-9s p99 %-9s gw CPU %6s us/req  errors %s\n' \
                "$i" "$label" "$rps" "$p50" "$p99" "$cpu" "$bad"
            printf '         RSS before %s MiB, peak %s MiB (sampled %s, mean %s), after %s MiB\n' \
                "$(mib "$before")" "$(mib "$hwm")" "$(mib "$sampled")" \
                "$(mib "$mean")" "$(mib "$after")"
            echo "$rps $p50 $p99 $bad $cpu $before $hwm $sampled $after" >> "$res/memory.$j"
        done
    done
    row 7 "memory: $MEM_CONNS x $(size "$omni"), rewrite" "$res/memory.0" "$res/memory.1"

    mem_table=$prefix/memory.md
    {
        echo "| side | RSS before | peak (VmHWM) | peak (sampled VmRSS) | after | r/s median |"
        echo "|---|---|---|---|---|---|"
        for j in 0 1; do
            printf '| %s | %s MiB | %s MiB | %s MiB | %s MiB | %s |\n' "${sides[$j]%%|*}" \
                "$(mib "$(col 6 med "$res/memory.$j")")" \
                "$(mib "$(col 7 max "$res/memory.$j")")" \
                "$(mib "$(col 8 max "$res/memory.$j")")" \
                "$(mib "$(col 9 med "$res/memory.$j")")" \
                "$(col 1 med "$res/memory.$j")"
        done
        echo
        echo "before/after: median over $ROUNDS rounds; peak: the highest of the rounds"
    } > "$mem_table"
}

# col N med|max FILE: the median or the maximum of column N
col() {
    sort -g -k"$1" "$3" | awk -v c="$1" -v f="$2" '
        { v[NR] = $c }
        END { printf "%.0f\n", f == "max" ? v[NR] : v[int((NR + 1) / 2)] }'
}

# --- the run -----------------------------------------------------------------

ngx "$prefix/mock"
wait_port "$mock_port"
case " $CASES " in
    *" sse-paced "*)
        python3 "$root/bench/paced.py" "$paced_port" "$prefix/paced.sse" "$PACED_GAP_MS" \
            "$prefix/mock/probe.log" \
            > "$prefix/paced.log" 2>&1 &
        paced_pid=$!
        wait_port "$paced_port" ;;
esac
start_gw

commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')
git -C "$root" diff --quiet HEAD 2>/dev/null || commit="$commit+dirty"
echo "ngx_omniroute bench at $commit, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores," \
     "$(nginx -v 2>&1 | sed 's/.*: //')"
[ "$MEASURE" = wrk ] || echo "MEASURE=instr: the gateway under callgrind; instructions per request"
echo "wrk -t$THREADS -c$CONNS -d${DURATION}s, $ROUNDS rounds per case (order rotating);" \
     "gateway 1 worker, client_body_buffer_size $BODY_BUFFER; mock provider: a second nginx;" \
     "load average $(cut -d' ' -f1-3 /proc/loadavg)"

for c in $CASES; do
    case $c in
    tiny)
        pair 1 tiny "tiny body, same model" "$(tiny bench)" "$(tiny bench)" ;;
    tiny-limit)
        pair 1b tiny-limit "tiny body, a client key with six limits" \
             "$(tiny bench)" "$(tiny bench)" /plain/chat/completions "$CONNS" \
             /omni-limit/chat/completions ;;
    rewrite-8k)
        pair 2 rewrite-8k "8 KiB, model rewritten" "$(body 8 upstream-model-name)" \
             "$(body 8 smart)" ;;
    same-8k)
        pair 3 same-8k "8 KiB, same model" "$(body 8 bench)" "$(body 8 bench)" ;;
    same-150k)
        pair 4a same-150k "150 KiB, same model" "$(body 150 bench)" "$(body 150 bench)" ;;
    rewrite-150k)
        pair 4b rewrite-150k "150 KiB, model rewritten" "$(body 150 upstream-model-name)" \
             "$(body 150 smart)" ;;
    sse)
        pair 5 sse "SSE stream, 8 KiB, same model" \
             "$(body 8 stream-bench stream)" "$(body 8 stream-bench stream)" \
             /plain-sse/chat/completions ;;
    sse-400)
        pair 5b sse-400 "SSE stream, 400 events in one burst, 8 KiB, same model" \
             "$(body 8 stream-400 stream)" "$(body 8 stream-400 stream)" \
             /plain-sse400/chat/completions ;;
    sse-paced)
        pair 5c sse-paced "SSE stream, 40 events ${PACED_GAP_MS} ms apart, 8 KiB, -c$PACED_CONNS" \
             "$(body 8 stream-paced stream)" "$(body 8 stream-paced stream)" \
             /plain-paced/chat/completions "$PACED_CONNS" ;;
    pool)
        echo
        if [ "$POOL_KIB" = 0 ]; then
            one=$(tiny pool-one); many=$(tiny pool-many)
        else
            one=$(body "$POOL_KIB" pool-one); many=$(body "$POOL_KIB" pool-many)
        fi
        echo "== 6. pool: 1 connection vs $POOL ($POOL_COOLING cooling down), $(size "$one"), same model"
        pool_state
        run_case pool "$CONNS" "plain|/plain-pool/chat/completions|$one" \
                 "module 1 conn|/omni/chat/completions|$one" \
                 "module $POOL conns|/omni/chat/completions|$many"
        [ "$MEASURE" = instr ] || echo "module $POOL conns / 1 conn: best" \
             "$(ratio "$(stats "$res/pool.2" | cut -d' ' -f1)" "$(stats "$res/pool.1" | cut -d' ' -f1)")," \
             "median $(ratio "$(stats "$res/pool.2" | cut -d' ' -f2)" "$(stats "$res/pool.1" | cut -d' ' -f2)")" \
             "(the $POOL-connection model answered from $(header X-OmniRoute-Connection))"
        row 6a "pool of 1 connection" "$res/pool.0" "$res/pool.1"
        row 6b "pool of $POOL connections" "$res/pool.0" "$res/pool.2"
        row 6 "pool: $POOL conns / 1 conn (module)" "$res/pool.1" "$res/pool.2" \
            "1 conn" "$POOL conns"
        ;;
    memory)
        memory_case ;;
    esac
done

if grep -E '\[(alert|crit|emerg)\]' "$prefix/error.log" "$prefix/mock/error.log"; then
    echo "bench: the error logs above have alerts" >&2
fi
n=$(grep -c '\[error\]' "$prefix/error.log" || true)
[ "$n" = 0 ] || echo "bench: $n [error] lines in $prefix/error.log" >&2

{
    echo
    echo "ngx_omniroute $commit, wrk -c$CONNS -d${DURATION}s x $ROUNDS rounds, $(nproc) cores," \
         "load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
    echo
    if [ "$MEASURE" = instr ]; then
        echo "| # | case | plain instructions/req | module instructions/req | module extra | ratio plain / module | errors |"
        echo "|---|---|---|---|---|---|---|"
    else
        echo "| # | case | plain r/s best / median | module r/s best / median | ratio best | ratio median | gw CPU us/req plain / module | CPU ratio | errors |"
        echo "|---|---|---|---|---|---|---|---|---|"
    fi
    cat "$table"
    if [ -s "$lat_table" ]; then
        echo
        echo "Added latency at concurrency 1 (wrk -c1, ${LAT_DURATION} s per side in $LAT_ROUNDS rounds; medians), in us:"
        echo
        echo "| # | case | plain p50 / p99 | module p50 / p99 | added p50 | added p99 |"
        echo "|---|---|---|---|---|---|"
        cat "$lat_table"
    fi
    if [ -s "${mem_table:-/nonexistent}" ]; then
        echo
        cat "$mem_table"
    fi
} | tee "$prefix/summary.md"
