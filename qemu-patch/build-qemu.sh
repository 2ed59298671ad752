#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Build the patched QEMU (linux-user: x86_64, aarch64, riscv64, mipsel; with
# plugins, for the reference tracer) into a cache outside the checkout, and
# print the cache directory on stdout. It holds bin/qemu-<arch> and
# include/qemu-plugin.h.
#
# The series (NNNN-*.patch here, one hook point per patch, git am or patch -p1)
# adds a meson option: sluice is configured with --enable-sluice
# (-Dsluice=enabled) and --sluice-include=DIR (-Dsluice_include), DIR being
# this tree's include/, where QEMU finds <sluice/jitter_abi.h> and
# <sluice/record.h>. Without --enable-sluice the patched QEMU builds as
# upstream does, with no -jitter.
#
# The cache key is the hash of everything that shapes the binaries: the patch
# series, the sluice headers QEMU compiles against, the configure flags and
# this script. A changed patch always rebuilds; an unchanged one costs
# seconds. A build that fails leaves no cache entry behind.
#
# Source: $QEMU_SRC (an upstream QEMU 10.0.x tree, copied, never modified), or
# Debian's source package of QEMU 10.0.2 (bookworm-backports deb-src; only the
# .orig.tar.xz is used), downloaded once into the cache.
#
# Environment: SLUICE_CACHE (default ~/.cache/sluice), QEMU_SRC, JOBS.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/.." && pwd)
cache=${SLUICE_CACHE:-$HOME/.cache/sluice}
jobs=${JOBS:-$(nproc)}
targets="x86_64-linux-user,aarch64-linux-user,riscv64-linux-user,mipsel-linux-user"
deb_version='1:10.0.2+ds-2+deb13u1~bpo12+1'
orig=qemu_10.0.2+ds.orig.tar.xz

die() { echo "build-qemu: $*" >&2; exit 1; }
log() { echo "build-qemu: $*" >&2; }

patches=("$here"/[0-9][0-9][0-9][0-9]-*.patch)
[ -e "${patches[0]}" ] || die "no patches in $here"

configure_flags=(--disable-system --disable-tools --disable-docs --disable-install-blobs
    --disable-werror --enable-plugins --enable-sluice --target-list="$targets")

headers=$(cat "$top/include/sluice/jitter_abi.h" "$top/include/sluice/record.h" | sha256sum)
key=$( {
    cat "${patches[@]}" "$top/include/sluice/jitter_abi.h" "$top/include/sluice/record.h" "$0"
    echo "${configure_flags[*]}"
    if [ -n "${QEMU_SRC:-}" ]; then echo "src=$(realpath "$QEMU_SRC")"; fi
} | sha256sum | cut -c1-16)
out="$cache/qemu-$key"

if [ -f "$out/.complete" ]; then
    log "cached build $out"
    echo "$out"
    exit 0
fi

mkdir -p "$cache"
work="$out.tmp.$$"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work"

fetch_debian_source() {
    local dl="$cache/src"
    if [ ! -f "$dl/$orig" ]; then
        log "downloading Debian's qemu $deb_version source (orig tarball)"
        mkdir -p "$dl"
        # The .dsc and debian.tar are not always on the mirror; the orig tarball is all we use.
        (cd "$dl" && apt-get source --download-only "qemu=$deb_version" >&2) || true
        [ -f "$dl/$orig" ] || die "could not download $orig: is a deb-src entry for bookworm-backports configured? (see .ci/run)"
    fi
    tar -xf "$dl/$orig" -C "$work"
    mv "$work"/qemu-10.0.2* "$work/src"
}

if [ -n "${QEMU_SRC:-}" ]; then
    [ -f "$QEMU_SRC/VERSION" ] || die "QEMU_SRC=$QEMU_SRC is not a QEMU source tree"
    grep -q '^10\.0\.' "$QEMU_SRC/VERSION" || die "QEMU_SRC=$QEMU_SRC is QEMU $(cat "$QEMU_SRC/VERSION"), need 10.0.x"
    log "copying $QEMU_SRC"
    cp -a "$QEMU_SRC" "$work/src"
    rm -rf "$work/src/build"
else
    fetch_debian_source
fi

for p in "${patches[@]}"; do
    log "applying $(basename "$p")"
    patch -d "$work/src" -p1 --batch --forward --quiet < "$p" >&2 || die "$(basename "$p") does not apply"
done

# QEMU compiles against a copy of the headers the key was made of: an edit
# in the checkout during the build must not reach this cache entry.
mkdir -p "$work/include/sluice"
cp "$top/include/sluice/jitter_abi.h" "$top/include/sluice/record.h" "$work/include/sluice/"
[ "$(cat "$work/include/sluice/jitter_abi.h" "$work/include/sluice/record.h" | sha256sum)" = "$headers" ] ||
    die "include/sluice changed while the cache key was made: run again"

log "configuring (log: $work/build/config.log)"
mkdir -p "$work/build"
(cd "$work/build" && ../src/configure --python=/usr/bin/python3 "${configure_flags[@]}" \
    --sluice-include="$work/include" >"$work/configure.log" 2>&1) ||
    { tail -30 "$work/configure.log" >&2; die "configure failed"; }

log "building with $jobs jobs (a few minutes the first time)"
ninja -C "$work/build" -j "$jobs" qemu-x86_64 qemu-aarch64 qemu-riscv64 qemu-mipsel \
    >"$work/ninja.log" 2>&1 || { grep -A5 -m3 'FAILED\|error:' "$work/ninja.log" >&2; die "build failed"; }

mkdir -p "$work/result/bin" "$work/result/include"
for a in x86_64 aarch64 riscv64 mipsel; do
    cp "$work/build/qemu-$a" "$work/result/bin/"
done
cp "$work/src/include/qemu/qemu-plugin.h" "$work/result/include/"
"$work/result/bin/qemu-x86_64" -h | grep -q -- '-jitter' || die "built QEMU lacks -jitter: patch not effective"

rm -rf "$out"
mv "$work/result" "$out"
touch "$out/.complete"
# Older builds: keep the three newest (this one among them), since another
# checkout, a running test suite or bench may still use one; delete the rest.
# Builds under way (*.tmp.*) are their own script's.
find "$cache" -maxdepth 1 -name 'qemu-*' -type d ! -name '*.tmp.*' -printf '%T@ %p\n' |
    sort -rn | tail -n +4 | cut -d' ' -f2- | xargs -r rm -rf

log "built $out"
echo "$out"
