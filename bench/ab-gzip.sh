#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Two sluice builds side by side on `gzip -9` of the 50 MB text of text-input.sh
# (x86_64 guest, the host's /bin/gzip): the full trace (`--tool stats`,
# every instruction and access) and `--filter coverage`, runs alternating
# A B A B ... so both see the same machine; prints the median and min-max
# wall seconds of each, and the ratio B/A of the medians.
#
#   bench/ab-gzip.sh A_BUILD A_QEMU_DIR B_BUILD B_QEMU_DIR [RUNS]
#
# A_BUILD/B_BUILD are meson build directories (release builds: -Dbuildtype=
# release) holding consumer/sluice, jitter/libsluice-jitter.so and
# filters/coverage.bpf.o; A_QEMU_DIR/B_QEMU_DIR the patched QEMU each was
# built for (qemu-patch/build-qemu.sh prints it; give an older build its own
# SLUICE_CACHE, since build-qemu.sh keeps only its newest build). RUNS
# defaults to 3. Made to compare a change with the main it comes from.
set -euo pipefail
[ $# -ge 4 ] || { sed -n '3,17p' "$0" >&2; exit 2; }
a_build=$1 a_qemu=$2 b_build=$3 b_qemu=$4 runs=${5:-3}
input=$("$(dirname "${BASH_SOURCE[0]}")/text-input.sh")
tfile=$(mktemp)
trap 'rm -f "$tfile"' EXIT

# Wall seconds of one run: sluice run from build $1 with QEMU dir $2, then sluice options.
one() {
    local build=$1 qemu=$2
    shift 2
    SLUICE_QEMU_DIR="$qemu" SLUICE_JITTER="$build/jitter/libsluice-jitter.so" \
        /usr/bin/time -f %e -o "$tfile" "$build/consumer/sluice" run "$@" -o /dev/null \
        -- /bin/gzip -9 -c <"$input" >/dev/null 2>/dev/null
    tail -1 "$tfile"
}

# "median min max" of the numbers on stdin.
summary() {
    sort -g | awk '{ v[NR] = $1 } END { printf "%s %s %s\n", v[int((NR + 1) / 2)], v[1], v[NR] }'
}

echo "| configuration | A median s (min-max) | B median s (min-max) | B/A |"
echo "| --- | --- | --- | --- |"
for config in full coverage; do
    if [ $config = full ]; then
        a_opts=(--tool stats) b_opts=(--tool stats)
    else
        a_opts=(--filter "$a_build/filters/coverage.bpf.o" --tool stats)
        b_opts=(--filter "$b_build/filters/coverage.bpf.o" --tool stats)
    fi
    a_times=() b_times=()
    for _ in $(seq "$runs"); do
        a_times+=("$(one "$a_build" "$a_qemu" "${a_opts[@]}")")
        b_times+=("$(one "$b_build" "$b_qemu" "${b_opts[@]}")")
    done
    read -r am amin amax < <(printf '%s\n' "${a_times[@]}" | summary)
    read -r bm bmin bmax < <(printf '%s\n' "${b_times[@]}" | summary)
    printf '| %s | %s (%s-%s) | %s (%s-%s) | %.3f |\n' "$config" "$am" "$amin" "$amax" \
        "$bm" "$bmin" "$bmax" "$(python3 -c "print($bm / $am)")"
done
