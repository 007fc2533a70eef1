# pkg/lib.sh: helpers for the scripts that work in Debian roots (sourced).
#
#   root_copy BASE DIR      DIR becomes a fresh copy of the cached root BASE
#   root_mount DIR          mount /proc (and /dev/pts, /dev/shm) in DIR; the
#                           EXIT trap root_umount unmounts them, also on
#                           failure or interrupt
#   in_root DIR CMD...      run CMD as root inside DIR (apt, npm: the network)
#   in_root_isolated DIR CMD...  the same in a network namespace of its own
#                           with only loopback up: the tests' fixed and
#                           "free" ports cannot meet the host's
#
# The mounted roots are listed in ROOT_MOUNTED; root_umount goes through it
# (lazily, so a busy mount cannot keep the trap from finishing).

ROOT_MOUNTED=()

root_umount() {
    local d m
    for d in "${ROOT_MOUNTED[@]}"; do
        for m in dev/shm dev/pts proc; do
            if mountpoint -q "$d/$m" 2>/dev/null; then
                umount "$d/$m" 2>/dev/null || umount -l "$d/$m" || true
            fi
        done
    done
    ROOT_MOUNTED=()
}

root_copy() {
    local base=$1 dir=$2
    [ -e "$base/.omniroute-root" ] || { echo "no root at $base" >&2; return 1; }
    if [ -d "$dir" ]; then
        for m in dev/shm dev/pts proc; do
            mountpoint -q "$dir/$m" 2>/dev/null && umount -l "$dir/$m"
        done
        rm -rf --one-file-system "$dir"
    fi
    cp -a "$base" "$dir"
}

root_mount() {
    local dir=$1
    ROOT_MOUNTED+=("$dir")
    mkdir -p "$dir/proc" "$dir/dev/pts" "$dir/dev/shm"
    mountpoint -q "$dir/proc" || mount -t proc proc "$dir/proc"
    mountpoint -q "$dir/dev/pts" || mount -t devpts -o newinstance,ptmxmode=0666 devpts "$dir/dev/pts"
    mountpoint -q "$dir/dev/shm" || mount -t tmpfs -o mode=1777 shm "$dir/dev/shm"
}

in_root() {
    local dir=$1; shift
    chroot "$dir" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        DEBIAN_FRONTEND=noninteractive ${ROOT_ENV:-} "$@"
}

in_root_isolated() {
    local dir=$1; shift
    unshare --net -- bash -c 'ip link set lo up && exec "$@"' isolated \
        chroot "$dir" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        ${ROOT_ENV:-} "$@"
}
