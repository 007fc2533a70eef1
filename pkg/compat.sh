#!/usr/bin/env bash
# pkg/compat.sh [SUITE...] (make compat): the module against the nginx of
# other Debian releases. For each suite (default: trixie sid, i.e. nginx
# 1.26 and 1.30) in a Debian root of its own under build/roots/SUITE
# (debootstrap once, then kept with what `make test-deps` installed):
#
#   1. a fresh copy of the tree in the root (/src/omniroute; the npm SDKs of
#      the last run are kept when t/sdk is unchanged)
#   2. apt-get update (--error-on=any: an unreachable mirror fails the suite
#      even when the root has everything from the last run), then make
#      test-deps there (apt-get and npm; any failure fails the suite)
#   3. in a network namespace of its own (only loopback), as root, CI=true:
#      make build test-build unit (-Werror against that release's nginx-dev),
#      then prove of the unit tests and of COMPAT_TESTS
#
# Prints a line per suite and "N passed, N failed" (suites); non-zero exit
# when any suite fails or could not be set up. rm -rf build/roots/SUITE
# makes a root again from scratch (e.g. to follow unstable).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/pkg/lib.sh"
[ "$(id -u)" = 0 ] || { echo "compat: needs root (debootstrap, chroot)" >&2; exit 1; }

suites=("$@")
[ ${#suites[@]} -gt 0 ] || suites=(trixie sid)

# the integration subset: configuration checks, fallback, TLS to the
# provider, streams (with the real SDKs), client keys, the admin API,
# metrics, the status page in Chromium, reloads, the queue and the cluster
# tests with redis-server (TLS, a Sentinel failover with redis-sentinel,
# which make test-deps installs; some 2 minutes)
COMPAT_TESTS=${COMPAT_TESTS:-"t/config.t t/fallback.t t/fallback_transport.t
    t/upstream_tls.t t/stream.t t/stream_probe.t t/stream_cut.t
    t/stream_passthrough.t t/stream_sdk.t t/keys.t t/models.t t/api.t
    t/metrics.t t/status.t t/store_reload.t t/queue_fifo.t
    t/cluster_mirror.t t/cluster_leases.t t/cluster_untrusted.t t/cluster_tls.t
    t/cluster_sentinel.t t/harness_deps.t"}

passed=0 failed=0 summary=()
finish() {
    local rc=$?
    root_umount
    for s in "${summary[@]}"; do echo "$s"; done
    [ $rc = 0 ] || [ $failed -gt 0 ] || failed=$((failed + 1))
    echo "$passed passed, $failed failed"
    if [ $failed = 0 ] && [ $rc = 0 ]; then exit 0; else exit 1; fi
}
trap finish EXIT

run_suite() {
    local suite=$1 root="$top/build/roots/$1" log="$top/build/roots/$1.log"
    local t0=$SECONDS dst="$root/src/omniroute"

    if [ ! -e "$root/.omniroute-root" ]; then
        bash "$top/pkg/mkroot.sh" "$suite" "$root" || return 1
    fi
    root_mount "$root"

    # the tree, fresh; build/npm survives while t/sdk is the same
    if [ -d "$dst/build/npm" ] && cmp -s "$dst/t/sdk/package-lock.json" \
                                         "$top/t/sdk/package-lock.json"; then
        mv "$dst/build/npm" "$root/src/npm.keep"
    fi
    rm -rf "$dst"; mkdir -p "$dst/build"
    tar -C "$top" --exclude=./build --exclude=./t/tmp --exclude=./.git \
        -cf - . | tar -C "$dst" -xf - || return 1
    [ -d "$root/src/npm.keep" ] && mv "$root/src/npm.keep" "$dst/build/npm"

    echo "compat $suite: make test-deps (log: build/roots/$suite.log)"
    : > "$log"
    if ! ROOT_ENV="CI=true" in_root "$root" bash -c \
            'cd /src/omniroute && apt-get update -qq --error-on=any && apt-get install -y -qq make && make test-deps' \
            >> "$log" 2>&1; then
        tail -20 "$log" >&2
        echo "compat $suite: make test-deps failed in the root" >&2
        return 1
    fi
    local ver; ver=$(in_root "$root" nginx -v 2>&1 | sed 's|.*nginx/||')
    echo "compat $suite: nginx $ver; build, unit tests, integration subset"
    # one test file at a time: the host's 2 cores are shared
    if ! ROOT_ENV="CI=true" in_root_isolated "$root" bash -c '
            set -e
            cd /src/omniroute
            make -s build test-build unit
            prove build/unit/test_* build/unit-asan/test_* '"$(echo $COMPAT_TESTS)" \
            >> "$log" 2>&1; then
        tail -40 "$log" >&2
        echo "compat $suite: FAILED with nginx $ver ($((SECONDS - t0))s; log: build/roots/$suite.log)"
        summary+=("not ok - $suite (nginx $ver), $((SECONDS - t0))s")
        return 1
    fi
    tail -3 "$log"
    summary+=("ok - $suite (nginx $ver), $((SECONDS - t0))s")
}

for suite in "${suites[@]}"; do
    if run_suite "$suite"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        [ ${#summary[@]} -gt $((passed + failed - 1)) ] \
            || summary+=("not ok - $suite: could not be set up")
    fi
    root_umount
done
