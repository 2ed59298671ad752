#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Capacity checks inside a TB, against the guest's own arithmetic:
tests/guests/replong.S runs rep stosb and rep movsb of 1 MiB, four times,
and touches memory nowhere else. QEMU lifts a REP instruction as a loop
inside its TB, so only the capacity check after the loop's label keeps
its records within the ring (qemu-patch 0038 drops the checks after
labels that no record follows: this guards the ones it must keep). With
a 256 KiB ring, each encoding must count exactly 8 Mi stores and 4 Mi
loads, lose nothing, and end without an error.
"""

import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

SIZE, ROUNDS = 1 << 20, 4  # as in replong.S


def check(sluice, prog, enc, tmp):
    out = os.path.join(tmp, "stats-%s.json" % enc)
    rc, _, stderr = common.run(
        [sluice, "run", "--tool", "stats", "--json", "-o", out, "--", prog], timeout=120,
        extra_env={"SLUICE_ENCODING": enc, "SLUICE_RING_BYTES": "256K"})
    err = stderr.decode(errors="replace")
    if rc != 0 or "sluice:" in err:
        common.fail("%s: exit %d: %s" % (enc, rc, err.strip()[-400:]))
    total = json.load(open(out))["total"]
    want = {"stores": 2 * ROUNDS * SIZE, "loads": ROUNDS * SIZE, "lost": 0}
    got = {k: total[k] for k in want}
    if got != want:
        common.fail("%s: the trace counts %s, the guest made %s" % (enc, got, want))
    print("rep loop, %s encoding: ok (%d stores, %d loads)" % (enc, got["stores"], got["loads"]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sluice", required=True)
    ap.add_argument("--guests", required=True)
    a = ap.parse_args()
    common.qemu_dir()
    prog = common.need_file(os.path.join(a.guests, "replong-x86_64"), "guest replong-x86_64")
    with tempfile.TemporaryDirectory(prefix="sluice-rep-") as tmp:
        for enc in ("block", "insn"):
            check(a.sluice, prog, enc, tmp)


if __name__ == "__main__":
    main()
