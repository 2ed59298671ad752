#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Set up sluice on a fresh Debian bookworm machine, idempotently:
#   1. Debian packages (bookworm-backports for meson >= 1.5 and QEMU's source),
#   2. the patched QEMU, built once into ~/.cache/sluice keyed by the patch hash,
#   3. Debian's arm64 and mipsel busybox-static, for the real-program tests,
#   4. sluice itself, in ./build (with ASan/UBSan; the jitter, which lives in
#      QEMU's process, without).
# With --example, then trace a shipped example program with `sluice run`.
# JOBS (default: the number of CPUs) bounds the parallel jobs of both builds.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

example=0
[ "${1:-}" = "--example" ] && example=1

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
say() { echo "setup: $*" >&2; }

packages=(ninja-build pkgconf libglib2.0-dev zlib1g-dev python3-venv patch xz-utils dpkg-dev
    gcc clang clang-format llvm libclang-rt-14-dev libbpf-dev liburcu-dev libcriterion-dev libcapstone-dev
    libdw-dev libelf-dev libzstd-dev gcc-aarch64-linux-gnu gcc-riscv64-linux-gnu gcc-mipsel-linux-gnu
    libc6-dev-arm64-cross libc6-dev-riscv64-cross libc6-dev-mipsel-cross coreutils gzip
    gnuplot-nox linux-perf valgrind)
backports=(meson python3-pycotap)

missing() {
    local p
    for p in "$@"; do
        dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q 'install ok installed' || echo "$p"
    done
}

# The Debian archive this machine already uses for bookworm (a mirror or a proxy
# set up here included), as apt itself reads it from its sources; no host name
# is written in this project.
debian_archive() {
    apt-get indextargets --no-release-info --format '$(REPO_URI) $(RELEASE) $(TARGET_OF)' 2>/dev/null |
        awk '$2 == "bookworm" && $3 == "deb" { print $1; exit }'
}

# bookworm-backports (deb and deb-src) from that same archive, unless apt has it already.
add_backports() {
    local src=/etc/apt/sources.list.d/sluice-backports.sources uri
    if apt-get indextargets --no-release-info --format '$(RELEASE) $(TARGET_OF)' 2>/dev/null |
        grep -qx 'bookworm-backports deb-src' && [ ! -f "$src" ]; then
        return 0
    fi
    uri=$(debian_archive)
    [ -n "$uri" ] || { say "no apt source for Debian bookworm on this machine: cannot add bookworm-backports"; exit 1; }
    if [ -f "$src" ] && grep -qxF "URIs: $uri" "$src"; then
        return 0
    fi
    say "adding bookworm-backports (deb, deb-src) from $uri"
    as_root tee "$src" >/dev/null <<SRC
Types: deb deb-src
URIs: $uri
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
    as_root apt-get update -q >&2
}

install_packages() {
    add_backports
    local need=($(missing "${packages[@]}") $(missing "${backports[@]}"))
    local meson_ok=1
    dpkg --compare-versions "$(dpkg-query -W -f='${Version}' meson 2>/dev/null || echo 0)" ge 1.5 || meson_ok=0
    if [ ${#need[@]} -gt 0 ] || [ $meson_ok = 0 ]; then
        say "installing: ${need[*]:-meson from backports}"
        as_root apt-get update -q >&2
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${packages[@]}" >&2
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q -t bookworm-backports "${backports[@]}" >&2
    fi
}

install_packages
qemu_dir=$(qemu-patch/build-qemu.sh)
say "patched QEMU: $qemu_dir"
if [ -x tests/e2e/fetch-busybox.sh ]; then
    tests/e2e/fetch-busybox.sh >&2
fi

if [ ! -f build/build.ninja ]; then
    meson setup build -Db_sanitize=address,undefined -Db_lundef=false -Dqemu_dir="$qemu_dir" >&2
else
    meson configure build -Dqemu_dir="$qemu_dir" >&2
fi
ninja -C build -j "${JOBS:-$(nproc)}" >&2 # JOBS: as for the QEMU build
say "built sluice in ./build"

if [ $example = 1 ]; then
    say "tracing the shipped example: build/tests/e2e/loops-aarch64 (an aarch64 program)"
    build/consumer/sluice run --tool stats -- build/tests/e2e/loops-aarch64
fi
