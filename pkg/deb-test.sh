#!/usr/bin/env bash
# pkg/deb-test.sh (make deb-test): build the package, install it with apt in
# a clean Debian 12 root (which pulls Debian's nginx), then check there what
# an operator gets: the files where Debian puts them, the module enabled by
# the postinst, `nginx -t` of Debian's own nginx.conf with the shipped
# example, and one fallback request through the installed nginx (a mock
# provider answering 503 on the first connection, 200 on the second).
# Removing the package disables the module again. Ends with "N passed,
# N failed"; exits non-zero on any failure, also when the root or apt fails.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/pkg/lib.sh"
[ "$(id -u)" = 0 ] || { echo "deb-test: needs root (debootstrap, chroot)" >&2; exit 1; }

SUITE=${SUITE:-bookworm}
base="$top/build/roots/$SUITE-base"
root="$top/build/roots/deb-test-$SUITE"
pkg=libnginx-mod-http-omniroute
passed=0 failed=0

ok()   { passed=$((passed + 1)); echo "ok - $*"; }
fail() { failed=$((failed + 1)); echo "not ok - $*"; }
check() { local what=$1; shift; if "$@"; then ok "$what"; else fail "$what"; fi; }
finish() {
    local rc=$?
    in_root "$root" sh -c '[ -f /run/nginx.pid ] && kill $(cat /run/nginx.pid)' \
        >/dev/null 2>&1 || true
    root_umount
    [ $rc = 0 ] || [ $failed -gt 0 ] || { failed=$((failed + 1)); echo "not ok - deb-test aborted (rc $rc)"; }
    echo "$passed passed, $failed failed"
    if [ $failed = 0 ] && [ $rc = 0 ]; then exit 0; else exit 1; fi
}
trap finish EXIT

[ -n "${NO_DEB_BUILD:-}" ] || bash "$top/pkg/deb.sh"
deb=$(ls "$top"/build/deb/${pkg}_*.deb)

bash "$top/pkg/mkroot.sh" "$SUITE" "$base"
root_copy "$base" "$root"
root_mount "$root"
cp "$deb" "$root/tmp/"

echo "deb-test: apt-get install ./$(basename "$deb") in a clean $SUITE root"
in_root "$root" apt-get update -qq --error-on=any \
    || { echo "deb-test: apt-get update failed in the root" >&2; exit 1; }
in_root "$root" apt-get install -y -qq "/tmp/$(basename "$deb")" curl \
    > "$top/build/deb/deb-test-install.log" 2>&1 \
    || { tail -20 "$top/build/deb/deb-test-install.log" >&2;
         echo "deb-test: apt-get install failed" >&2; exit 1; }
ok "apt-get install pulls nginx $(in_root "$root" dpkg-query -W -f='${Version}' nginx)"

r=$root
check "module in /usr/lib/nginx/modules" \
    test -f $r/usr/lib/nginx/modules/ngx_http_omniroute_module.so
check "modules-available/mod-http-omniroute.conf loads it" \
    grep -qx 'load_module modules/ngx_http_omniroute_module.so;' \
        $r/usr/share/nginx/modules-available/mod-http-omniroute.conf
check "postinst enabled it in modules-enabled" \
    test "$(readlink $r/etc/nginx/modules-enabled/50-mod-http-omniroute.conf)" \
         = /usr/share/nginx/modules-available/mod-http-omniroute.conf
check "/etc/nginx/omniroute_params is a conffile" \
    sh -c "chroot $r dpkg-query -W -f='\${Conffiles}' $pkg | grep -q ' /etc/nginx/omniroute_params '"
check "Depends names the nginx ABI" \
    sh -c "chroot $r dpkg-query -W -f='\${Depends}' $pkg | grep -q 'nginx-abi-'"
check "man page and examples" \
    test -f $r/usr/share/man/man5/ngx_omniroute.5.gz \
      -a -f $r/usr/share/doc/$pkg/examples/omniroute.conf \
      -a -f $r/usr/share/doc/$pkg/examples/demo.conf

# the man page names every directive of docs/directives.md
# (read once: grep -q on a pipe would SIGPIPE zcat, a failure under pipefail)
missing="" man=$(zcat $r/usr/share/man/man5/ngx_omniroute.5.gz | sed 's/\\_/_/g')
for d in $(sed -n 's/^### \(omniroute_[a-z_]*\)$/\1/p' "$top/docs/directives.md"); do
    grep -q "$d" <<<"$man" || missing="$missing $d"
done
check "ngx_omniroute(5) names every directive${missing:+ (missing:$missing)}" \
    test -z "$missing"

# the shipped example, as its comment says to use it
mkdir -p $r/etc/nginx/omniroute-keys
echo sk-example-1 > $r/etc/nginx/omniroute-keys/openai-1
echo sk-example-2 > $r/etc/nginx/omniroute-keys/openai-2
chmod 600 $r/etc/nginx/omniroute-keys/*
cp $r/usr/share/doc/$pkg/examples/omniroute.conf $r/etc/nginx/conf.d/
check "nginx -t: Debian's nginx.conf with the example in conf.d" \
    in_root_isolated "$r" nginx -t -q
rm $r/etc/nginx/conf.d/omniroute.conf

# a fallback through the installed nginx: "first" answers 503, "second" 200
rm -f $r/etc/nginx/sites-enabled/default
echo sk-first  > $r/etc/nginx/omniroute-keys/first
echo sk-second > $r/etc/nginx/omniroute-keys/second
cat > $r/etc/nginx/conf.d/omniroute-test.conf <<'CONF'
omniroute_zone zone=omniroute:4m;
omniroute_provider mock url=http://127.0.0.1:18091/v1 kind=apikey;
omniroute_provider mock2 url=http://127.0.0.1:18092/v1 kind=apikey;
omniroute_connection first  provider=mock
                     key_file=/etc/nginx/omniroute-keys/first priority=1;
omniroute_connection second provider=mock2
                     key_file=/etc/nginx/omniroute-keys/second priority=2;
omniroute_combo smart strategy=priority mock/gpt-4o mock2/gpt-4o;

server {
    listen 127.0.0.1:18080;
    location /v1/ { omniroute_pass; }
    location /_omniroute { internal; include /etc/nginx/omniroute_params; }
}
server {
    listen 127.0.0.1:18091;
    default_type application/json;
    return 503 '{"error":{"message":"overloaded","type":"server_error"}}\n';
}
server {
    listen 127.0.0.1:18092;
    default_type application/json;
    return 200 '{"id":"c1","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}\n';
}
CONF
check "nginx -t: Debian's nginx.conf with a gateway" in_root_isolated "$r" nginx -t -q

# nginx and curl in one network namespace of their own
hdrs=$(in_root_isolated "$r" sh -c '
    nginx || exit 1
    for i in 1 2 3 4 5 6 7 8 9 10; do
        curl -s -o /dev/null http://127.0.0.1:18092/ && break; sleep 0.2
    done
    curl -s -D - -o /tmp/body -H "Content-Type: application/json" \
        -d "{\"model\":\"smart\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}" \
        http://127.0.0.1:18080/v1/chat/completions
    kill $(cat /run/nginx.pid)' 2>&1 || true)
echo "$hdrs" | sed 's/^/# /'
check "fallback: the client gets 200" \
    grep -q '^HTTP/1.1 200' <<<"$hdrs"
check "fallback: X-OmniRoute-Connection names the second" \
    grep -qi '^X-OmniRoute-Connection: second' <<<"$hdrs"
check "no [alert]/[emerg]/[crit] in error.log" \
    sh -c "! grep -E '\[(alert|emerg|crit)\]' $r/var/log/nginx/error.log"

# the shipped demo (examples/run-demo.sh, the README's "make demo" for an
# installed package): the installed module and omniroute_params
demo=$(in_root_isolated "$r" sh -c "
    bash /usr/share/doc/$pkg/examples/run-demo.sh > /tmp/demo.out 2>&1 &
    for i in \$(seq 50); do
        curl -s -o /dev/null http://127.0.0.1:8080/ && break; sleep 0.2
    done
    curl -s -D - -H 'Content-Type: application/json' \
        -d '{\"model\":\"smart\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}' \
        http://127.0.0.1:8080/v1/chat/completions
    kill \$(cat /tmp/omniroute-demo/nginx.pid)" 2>&1 || true)
echo "$demo" | sed 's/^/# /'
check "the shipped demo: smart answers 200" grep -q '^HTTP/1.1 200' <<<"$demo"
check "the shipped demo: from steady-1 after flaky-1" \
    grep -qi '^X-OmniRoute-Trail: flaky-1;503;[0-9]*ms, steady-1;200' <<<"$demo"
check "the shipped demo: steady saw its own key" \
    grep -q 'Hello from steady (key Bearer sk-demo-steady)' <<<"$demo"

# removing the package disables the module (prerm), nginx -t still passes
rm $r/etc/nginx/conf.d/omniroute-test.conf
in_root "$r" apt-get remove -y -qq $pkg >/dev/null 2>&1 || fail "apt-get remove"
check "remove: modules-enabled link set aside, nginx -t passes" \
    sh -c "test ! -e $r/etc/nginx/modules-enabled/50-mod-http-omniroute.conf && chroot $r nginx -t -q"
