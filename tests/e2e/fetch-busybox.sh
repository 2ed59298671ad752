#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# Fetches Debian's static busybox for arm64 and mipsel, the foreign-arch real
# programs of the `real` e2e test, and unpacks each under
#   ${SLUICE_CACHE:-$HOME/.cache/sluice}/busybox/<debian arch>/bin/busybox
# Does nothing for an arch already there. Needs apt with the arch enabled;
# run as root it enables it (dpkg --add-architecture, apt-get update) itself.
# .ci/run calls this before the tests.
set -eu

cache="${SLUICE_CACHE:-$HOME/.cache/sluice}/busybox"
for arch in arm64 mipsel; do
    if [ -x "$cache/$arch/bin/busybox" ]; then
        continue
    fi
    if ! dpkg --print-foreign-architectures | grep -qx "$arch"; then
        if [ "$(id -u)" != 0 ]; then
            echo "fetch-busybox: dpkg arch $arch not enabled; as root: dpkg --add-architecture $arch && apt-get update" >&2
            exit 1
        fi
        dpkg --add-architecture "$arch"
        apt-get update -qq
    fi
    tmp=$(mktemp -d)
    chmod 755 "$tmp" # readable by apt's _apt user
    (cd "$tmp" && apt-get download -qq "busybox-static:$arch")
    mkdir -p "$cache/$arch.new"
    dpkg -x "$tmp"/busybox-static_*_"$arch".deb "$cache/$arch.new"
    rm -rf "$tmp" "$cache/$arch"
    mv "$cache/$arch.new" "$cache/$arch"
    echo "fetch-busybox: $cache/$arch/bin/busybox"
done
