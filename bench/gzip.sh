#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Wall time of `gzip -9` on a 50 MB text file (x86_64 guest, the host's
# /bin/gzip), side by side: native, untraced QEMU, QEMU with the reference
# plugin counting (tests/plugin/reftrace.c, mode=count: inline counters, the
# cheapest plugin tracer), and sluice (`sluice run --tool stats`: every
# instruction and memory access streamed and counted, lossless); then sluice
# with filters: `coverage` (each pc once) and `range` with its defaults, which
# instruments nothing (the cost of the machinery alone).
#
#   bench/gzip.sh [RUNS]     (default 3; the best of RUNS is reported)
#
# Uses a release build of sluice in build-bench/ (made if missing) and the
# cached patched QEMU. Prints a Markdown table row per configuration.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
runs=${1:-3}
qemu_dir=$(qemu-patch/build-qemu.sh 2>/dev/null)
if [ ! -f build-bench/build.ninja ]; then
    meson setup build-bench -Dbuildtype=release -Dqemu_dir="$qemu_dir" >/dev/null
fi
ninja -C build-bench >/dev/null
input=$(bench/text-input.sh)
q="$qemu_dir/bin/qemu-x86_64"
tfile=$(mktemp)
best() { # best wall seconds of $runs runs of "$@", output discarded
    local b= t
    for _ in $(seq "$runs"); do
        /usr/bin/time -f %e -o "$tfile" "$@" <"$input" >/dev/null 2>/dev/null
        t=$(tail -1 "$tfile")
        b=$(printf '%s\n%s\n' "$t" "${b:-$t}" | sort -g | head -1)
    done
    echo "$b"
}
native=$(best /bin/gzip -9 -c)
untraced=$(best "$q" /bin/gzip -9 -c)
plugin=$(best "$q" -plugin build-bench/tests/e2e/libreftrace.so,out=/dev/null,mode=count /bin/gzip -9 -c)
stats=$(mktemp)
SLUICE_QEMU_DIR="$qemu_dir" build-bench/consumer/sluice run --tool stats --json -o "$stats" -- /bin/gzip -9 -c <"$input" >/dev/null
events=$(python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["total"]; print(t["insns"]+t["loads"]+t["stores"], t["insns"], t["lost"])' "$stats")
traced=$(SLUICE_QEMU_DIR="$qemu_dir" best build-bench/consumer/sluice run --tool stats -o /dev/null -- /bin/gzip -9 -c)
cov=$(SLUICE_QEMU_DIR="$qemu_dir" best build-bench/consumer/sluice run --filter build-bench/filters/coverage.bpf.o --tool stats -o /dev/null -- /bin/gzip -9 -c)
none=$(SLUICE_QEMU_DIR="$qemu_dir" best build-bench/consumer/sluice run --filter build-bench/filters/range.bpf.o --tool stats -o /dev/null -- /bin/gzip -9 -c)
read -r ev insns lost <<<"$events"
echo "| configuration | wall s (best of $runs) | vs untraced QEMU |"
echo "| --- | --- | --- |"
for row in "native gzip:$native" "QEMU untraced:$untraced" "QEMU + reference plugin (count):$plugin" "QEMU + sluice (stats, lossless):$traced" \
    "QEMU + sluice --filter coverage:$cov" "QEMU + sluice --filter range (instruments nothing):$none"; do
    printf '| %s | %s | %.2fx |\n' "${row%%:*}" "${row##*:}" "$(python3 -c "print(${row##*:} / $untraced)")"
done
printf '\nsluice saw %s events (%s instructions), %s lost: %.0f M events/s traced.\n' \
    "$ev" "$insns" "$lost" "$(python3 -c "print($ev / $traced / 1e6)")"
rm -f "$stats" "$tfile"
