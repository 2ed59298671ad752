#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Run every test (unit, exactness against the reference plugin, real programs,
# exit status) on the ASan/UBSan build that scripts/setup.sh made.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[ -f build/build.ninja ] || { echo "test: run scripts/setup.sh first" >&2; exit 2; }
ninja -C build >&2
exec meson test -C build --print-errorlogs "$@"
