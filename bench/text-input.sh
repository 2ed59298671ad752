#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# The benchmarks' input: 50 MiB of deterministic pseudo-text (words drawn
# from a fixed seed), made once in $TMPDIR (default /tmp). Prints its path.
set -euo pipefail
input=${TMPDIR:-/tmp}/sluice-bench-text-50M
if [ ! -f "$input" ]; then
    awk 'BEGIN { srand(1); n = 0;
        while (n < 52428800) { w = ""; l = 1 + int(rand() * 9);
            for (i = 0; i < l; i++) w = w sprintf("%c", 97 + int(rand() * rand() * 26));
            s = w (rand() < 0.1 ? "\n" : " "); printf "%s", s; n += length(s) } }' >"$input.tmp"
    mv "$input.tmp" "$input"
fi
echo "$input"
