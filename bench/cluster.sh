#!/usr/bin/env bash
# Cluster benchmark (issue 6), one run, two figures:
#
#  1. happy-path throughput of a small chat-completion POST with the Redis
#     mirror on (node A, linked to a local redis-server, a second node B
#     on the same Redis) and off (node C, same configuration without
#     omniroute_redis), wrk rounds alternating A/C (the order swapped
#     every round), best and median round of each compared: ratio on/off
#     (target >= 0.97);
#  2. propagation delay A -> B over CHANGES state changes: each change is
#     made on A (a connection cooldown through omniroute_redis_debug, the
#     same store update the request path makes); the delay is from A's
#     response to the first poll of B that sees it (polls are ~0.1 ms
#     apart, so the figure includes up to one poll); p50/p99/max.
#
#   bench/cluster.sh          (after make)
#   DURATION=10 CONNS=64 ROUNDS=3 WORKERS=2 CHANGES=500 bench/cluster.sh

set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
prefix="$root/build/bench-cluster"
DURATION=${DURATION:-8}
CONNS=${CONNS:-50}
THREADS=${THREADS:-1}
ROUNDS=${ROUNDS:-5}
WORKERS=${WORKERS:-1}
CHANGES=${CHANGES:-200}
BASE=${BASE_PORT:-18230}

redis_port=$((BASE + 1))
mock_port=$((BASE + 2))
declare -A port=([a]=$((BASE + 3)) [b]=$((BASE + 4)) [c]=$((BASE + 5)))
# the test build: omniroute_redis_debug changes records on A
so="$root/build/nginx-test/ngx_http_omniroute_module.so"

[ -f "$so" ] || { echo "build the module first (make test-build)" >&2; exit 1; }
command -v wrk >/dev/null || { echo "wrk is not installed (make deps)" >&2; exit 1; }
redis=$(command -v redis-server || echo /usr/bin/redis-server)

rm -rf "$prefix"
mkdir -p "$prefix/redis"
printf 'sk-bench\n' > "$prefix/key"

# the mock provider, a nginx of its own
mkdir -p "$prefix/mock/tmp"
cat > "$prefix/mock/nginx.conf" <<EOF
worker_processes 1;
error_log $prefix/mock/error.log warn;
pid $prefix/mock/nginx.pid;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $prefix/mock/tmp;
    server {
        listen 127.0.0.1:$mock_port reuseport;
        keepalive_requests 100000;
        default_type application/json;
        location /v1/chat/completions {
            return 200 '{"id":"chatcmpl-bench","object":"chat.completion","model":"bench","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}';
        }
    }
}
EOF

node_conf() {
    local n=$1 mirror=$2
    mkdir -p "$prefix/$n/tmp"
    cat > "$prefix/$n/nginx.conf" <<EOF
load_module $so;
worker_processes $WORKERS;
error_log $prefix/$n/error.log notice;
pid $prefix/$n/nginx.pid;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $prefix/$n/tmp/body;
    proxy_temp_path       $prefix/$n/tmp/proxy;

    upstream mock_provider {
        server 127.0.0.1:$mock_port;
        keepalive 64;
    }

    omniroute_zone zone=omniroute:16m;
    $mirror
    omniroute_provider mock url=http://mock_provider/v1 auth=bearer;
    omniroute_connection c1 provider=mock key_file=$prefix/key;
    omniroute_model bench mock/bench;

    server {
        listen 127.0.0.1:${port[$n]} reuseport;
        location /omni/ { omniroute_pass; }
        location /_omniroute {
            internal;
            include $root/conf.d/omniroute_params;
        }
        location /debug { omniroute_redis_debug; }
        location /link { return 200 "\$omniroute_redis_link"; }
    }
}
EOF
}

node_conf a "omniroute_redis 127.0.0.1:$redis_port node=bench-a prefix=bench:;"
node_conf b "omniroute_redis 127.0.0.1:$redis_port node=bench-b prefix=bench:;"
node_conf c ""

ngx() { nginx -p "$prefix/$1/" -c "$prefix/$1/nginx.conf" -e "$prefix/$1/error.log" "${@:2}"; }

cleanup() {
    for n in a b c mock; do ngx "$n" -s quit 2>/dev/null || true; done
    if [ -f "$prefix/redis/redis.pid" ]; then
        kill "$(cat "$prefix/redis/redis.pid")" 2>/dev/null || true
    fi
}
trap cleanup EXIT

"$redis" --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no \
    --dir "$prefix/redis" --logfile "$prefix/redis/redis.log" \
    --pidfile "$prefix/redis/redis.pid" --daemonize yes
for n in mock a b c; do ngx "$n"; done

for n in a b; do
    for i in $(seq 1 100); do
        [ "$(curl -s "http://127.0.0.1:${port[$n]}/link")" = up ] && break
        sleep 0.05
    done
    [ "$(curl -s "http://127.0.0.1:${port[$n]}/link")" = up ] \
        || { echo "node $n: Redis link not up" >&2; exit 1; }
done

for n in a c; do
    code=$(curl -s -o /dev/null -w '%{http_code}' -X POST \
           -d '{"model":"bench"}' "http://127.0.0.1:${port[$n]}/omni/chat/completions")
    [ "$code" = 200 ] || { echo "node $n answered $code" >&2; exit 1; }
done

echo "workers per node: $WORKERS; wrk -t$THREADS -c$CONNS -d${DURATION}s; redis-server $("$redis" --version | sed 's/.*v=\([^ ]*\).*/\1/')"
echo

run() {
    wrk -t"$THREADS" -c"$CONNS" -d"${DURATION}s" --latency \
        -s "$root/bench/post.lua" \
        "http://127.0.0.1:${port[$1]}/omni/chat/completions" \
        > "$prefix/wrk-$1.txt"
    awk '
        /Requests\/sec/ { rps = $2 }
        /^ +50%/ { p50 = $2 }
        /^ +99%/ { p99 = $2 }
        /Non-2xx/ { bad = $NF }
        END { printf "%s %s %s %s\n", rps, p50, p99, bad + 0 }
    ' "$prefix/wrk-$1.txt"
}

one() {
    local n=$1 label=$2 rps p50 p99 bad
    read -r rps p50 p99 bad <<<"$(run "$n")"
    printf 'round %d  %-15s: %10.0f req/s  p50 %-8s p99 %-8s non-2xx %s\n' \
        "$i" "$label" "$rps" "$p50" "$p99" "$bad"
    echo "$rps $p50 $p99" >> "$prefix/rounds-$n.txt"
}

for i in $(seq 1 "$ROUNDS"); do
    if [ $((i % 2)) = 1 ]; then
        one a 'mirror on  (A)'; one c 'mirror off (C)'
    else
        one c 'mirror off (C)'; one a 'mirror on  (A)'
    fi
done

summary() {
    sort -n -k1 "$prefix/rounds-$1.txt" | awk '
        { r[NR] = $1; l[NR] = $2 " " $3 }
        END { m = int((NR + 1) / 2); printf "%s %s %s\n", r[NR], r[m], l[NR] }'
}

read -r best_on med_on on_line1 on_line2 <<<"$(summary a)"
read -r best_off med_off off_line1 off_line2 <<<"$(summary c)"

echo
printf 'mirror on  : best %.0f req/s (p50/p99 %s %s), median %.0f\n' \
    "$best_on" "$on_line1" "$on_line2" "$med_on"
printf 'mirror off : best %.0f req/s (p50/p99 %s %s), median %.0f\n' \
    "$best_off" "$off_line1" "$off_line2" "$med_off"
awk -v a="$best_on" -v b="$best_off" -v c="$med_on" -v d="$med_off" \
    'BEGIN { printf "ratio on/off: best %.3f, median %.3f (target >= 0.97)\n",
             a / b, c / d }'
echo

# propagation A -> B
perl - "${port[a]}" "${port[b]}" "$CHANGES" <<'EOF'
use strict;
use warnings;
use IO::Socket::INET;
use Time::HiRes qw(time sleep);

my ($pa, $pb, $n) = @ARGV;

sub get {
    my ($port, $path) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$port")
        or die "connect $port: $!";
    print $s "GET $path HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n";
    local $/;
    my $r = <$s>;
    close $s;
    return $r;
}

my $run = int(time);
my @d;

for my $i (1 .. $n) {
    my $key = "prop-$run-$i";
    get($pa, "/debug?table=conn&key=$key&op=cooldown&ms=60000");
    my $t0 = time;
    my $seen;
    while (time - $t0 < 2) {
        if (get($pb, "/debug?table=conn&key=$key") =~ /"found":true/) {
            $seen = time;
            last;
        }
    }
    die "change $i never reached B\n" unless $seen;
    push @d, ($seen - $t0) * 1000;
    sleep(0.005);
}

@d = sort { $a <=> $b } @d;
my $pct = sub { $d[int($_[0] / 100 * $#d + 0.5)] };
printf "propagation A -> B over %d changes: p50 %.2f ms, p99 %.2f ms, "
       . "max %.2f ms\n", $n, $pct->(50), $pct->(99), $d[-1];
EOF

stats=$(curl -s "http://127.0.0.1:${port[a]}/debug")
echo "node A link: $stats"
