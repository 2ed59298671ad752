#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Block encoding against the guest's own count, where the reference plugin
cannot follow: tests/guests/jitprot.c runs a generated loop (one TB that
jumps back to its own start) while another thread takes PROT_EXEC away from
its page and gives it back. A finished block must stay whole when QEMU then
faults translating the loop's start again. The guest prints how many calls
ran to their end and the instructions of each: its thread's trace holds at
least that many instructions, and 500 loads per call; the trace ends without
an error, in both encodings (SLUICE_ENCODING). Before the fix it guards
(qemu-patch 0020: sluice_tb_return), two runs in three failed.
"""

import argparse
import json
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

LOADS_PER_CALL = 500  # 10 loads per trip, 50 trips


def check(sluice, prog, enc, tmp):
    out = os.path.join(tmp, "stats-%s.json" % enc)
    rc, stdout, stderr = common.run(
        [sluice, "run", "--tool", "stats", "--json", "-o", out, "--", prog, "20000"],
        timeout=240, extra_env={"SLUICE_ENCODING": enc})
    err = stderr.decode(errors="replace")
    if rc != 0 or "sluice:" in err:
        common.fail("%s: exit %d: %s" % (enc, rc, err.strip()[-400:]))
    m = re.search(rb"calls (\d+) insns-per-call (\d+)", stdout)
    if not m:
        common.fail("%s: no count from the guest (%r)" % (enc, stdout[-200:]))
    calls, per_call = int(m.group(1)), int(m.group(2))
    rep = json.load(open(out))
    main = [t for t in rep["threads"] if t["tid"] == t["pid"]]
    if len(main) != 1:
        common.fail("%s: no main thread in %s" % (enc, rep["threads"]))
    insns, loads = main[0]["insns"], main[0]["loads"]
    if insns < calls * per_call or loads < calls * LOADS_PER_CALL:
        common.fail("%s: %d insns and %d loads traced, the guest ran at least %d and %d "
                    "(%d whole calls)" % (enc, insns, loads, calls * per_call,
                                          calls * LOADS_PER_CALL, calls))
    print("%s: ok: %d calls, %d insns traced >= %d" % (enc, calls, insns, calls * per_call))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sluice", required=True)
    ap.add_argument("--guests", required=True)
    a = ap.parse_args()
    common.qemu_dir()
    prog = common.need_file(os.path.join(a.guests, "jitprot-x86_64"), "guest jitprot-x86_64")
    with tempfile.TemporaryDirectory(prefix="sluice-blocks-") as tmp:
        # The race is the guest's: a run misses it now and then, four in a row hardly ever.
        for enc in ("block",) * 4 + ("insn",):
            check(a.sluice, prog, enc, tmp)


if __name__ == "__main__":
    main()
