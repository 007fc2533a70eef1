#!/usr/bin/env bash
# pkg/deb.sh: build the Debian binary package libnginx-mod-http-omniroute
# into build/deb/ (make deb). The sources the module needs and pkg/debian
# are staged in build/deb/src, where dpkg-buildpackage runs, so the tree
# itself gets no debian/ directory and no build products.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
out="$top/build/deb"
src="$out/src"

rm -rf "$src" "$out"/*.deb "$out"/*.buildinfo "$out"/*.changes
mkdir -p "$src"
cd "$top"
tar -cf - config ngx_omniroute_module.c src conf.d docs README.md \
    | tar -xf - -C "$src"
cp -a pkg/debian "$src/debian"

# a native package whose version names the commit it was built from
if git rev-parse --git-dir >/dev/null 2>&1; then
    stamp=$(git log -1 --format='%cd.%h' --date=format:%Y%m%d)
    date=$(git log -1 --format=%aD)
    git diff --quiet HEAD -- config ngx_omniroute_module.c src conf.d docs \
        README.md pkg/debian || stamp="$stamp.dirty"
else
    stamp=$(date -u +%Y%m%d); date=$(date -R)
fi
version="${OMNIROUTE_VERSION:-0.1.0~git$stamp}"
cat > "$src/debian/changelog" <<CL
ngx-omniroute ($version) unstable; urgency=medium

  * Built from the ngx_omniroute tree (pkg/deb.sh).

 -- ngx_omniroute maintainers <maintainers@users.noreply.a-seed-9b70d231.example>  $date
CL

cd "$src"
echo "deb: dpkg-buildpackage ngx-omniroute $version (log: build/deb/build.log)"
if ! dpkg-buildpackage -us -uc -b > "$out/build.log" 2>&1; then
    tail -40 "$out/build.log" >&2
    echo "deb: dpkg-buildpackage failed" >&2
    exit 1
fi
deb=$(ls "$out"/libnginx-mod-http-omniroute_*.deb | grep -v dbgsym)
echo "deb: $deb"
dpkg-deb -f "$deb" Package Version Depends
