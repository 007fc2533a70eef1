#!/usr/bin/env bash
# pkg/mkroot.sh SUITE DIR: a minimal Debian root of SUITE (bookworm, trixie,
# sid) at DIR, made once with debootstrap and kept (DIR/.omniroute-root
# marks a finished one; a half-made root is removed and made again).
# The mirror is the one the host's apt uses. Any failure (network,
# mirror, keyring) exits non-zero: a root that is not there must fail
# the step that needs it, never skip it.
set -euo pipefail

suite=${1:?suite}; dir=${2:?dir}
[ "$(id -u)" = 0 ] || { echo "mkroot: needs root (debootstrap, chroot)" >&2; exit 1; }

if [ -e "$dir/.omniroute-root" ]; then
    exit 0
fi

# the host's Debian mirror: the first deb.debian.org-style URI apt reads
mirror=${DEBIAN_MIRROR:-}
if [ -z "$mirror" ]; then
    mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
                 /etc/apt/sources.list.d/*.sources 2>/dev/null \
             | awk '/^URIs:/ { u = $2 } /^deb / { u = ($2 ~ /^\[/) ? $3 : $2 }
                    u != "" && u !~ /security|cloud.google|nodesource/ { print u; exit }
                    { u = "" }' || true)
fi
[ -n "$mirror" ] || { echo "mkroot: no Debian mirror in /etc/apt/sources.list*" >&2; exit 1; }
command -v debootstrap >/dev/null || {
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap \
        || { echo "mkroot: cannot install debootstrap" >&2; exit 1; }
}

tmp="$dir.tmp"
rm -rf "$tmp"
mkdir -p "$(dirname "$dir")"
echo "mkroot: debootstrap --variant=minbase $suite from $mirror (log: $tmp.log)"
if ! debootstrap --variant=minbase "$suite" "$tmp" "$mirror" >"$tmp.log" 2>&1; then
    tail -20 "$tmp.log" >&2
    echo "mkroot: debootstrap $suite failed" >&2
    rm -rf "$tmp"
    exit 1
fi

# what apt and npm need inside: name resolution, the host's CAs, and
# unstable's Release may be past its Valid-Until
cp /etc/resolv.conf "$tmp/etc/resolv.conf"
mkdir -p "$tmp/etc/ssl/certs" "$tmp/usr/local/share/ca-certificates"
cp -a /etc/ssl/certs/. "$tmp/etc/ssl/certs/"
cp -a /usr/local/share/ca-certificates/. "$tmp/usr/local/share/ca-certificates/" 2>/dev/null || true
cat > "$tmp/etc/apt/apt.conf.d/90omniroute" <<'CONF'
Acquire::Check-Valid-Until "false";
Acquire::Retries "3";
APT::Install-Recommends "false";
CONF
# no daemon starts inside the root while packages install
printf '#!/bin/sh\nexit 101\n' > "$tmp/usr/sbin/policy-rc.d"
chmod 755 "$tmp/usr/sbin/policy-rc.d"

rm -f "$tmp.log"
touch "$tmp/.omniroute-root"
mv "$tmp" "$dir"
echo "mkroot: $suite ready at $dir"
