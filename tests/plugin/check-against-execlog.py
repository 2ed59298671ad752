#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Checks the reference plugin itself against QEMU's own execlog plugin.

Runs a single-threaded guest once under QEMU with both plugins loaded (so
both see the same execution, same addresses) and checks that reftrace's
per-instruction PCs and memory accesses (direction and address, in order)
equal execlog's. (10.0.2's execlog crashes on multi-threaded linux-user
guests, and it interleaves vCPUs in one log anyway.) execlog
prints no values, so values are checked elsewhere: the guests print sums of
what they load, and the exact test's two reference runs must agree. Needs a
QEMU build tree with contrib plugins (execlog is not in the sluice QEMU
cache); a development check, not a meson test:

  check-against-execlog.py QEMU LIBREFTRACE LIBEXECLOG GUEST [ARGS...]
"""
import os
import re
import subprocess
import sys
import tempfile

qemu, reftrace, execlog, guest = sys.argv[1:5]
with tempfile.TemporaryDirectory() as tmp:
    ref, log = os.path.join(tmp, "ref"), os.path.join(tmp, "log")
    subprocess.run([qemu, "-plugin", reftrace + ",out=" + ref, "-plugin", execlog,
                    "-d", "plugin", "-D", log, guest] + sys.argv[5:],
                   stdout=subprocess.DEVNULL, check=False, env={"QEMU_RAND_SEED": "1"})
    want = []  # (pc, [(kind, addr)]) from execlog
    for line in open(log):
        m = re.match(r"\d+, (0x[0-9a-f]+), ", line)
        if not m:
            continue
        accesses = re.findall(r", (load|store), (0x[0-9a-f]+)", line)
        want.append((int(m.group(1), 16), [(k, int(a, 16)) for k, a in accesses]))
    got = []
    for line in open(ref):
        f = line.split()
        if f[1] == "EXEC":
            got.append((int(f[2], 16), []))
        else:
            kind = "store" if f[1].startswith("WRITE") else "load"
            assert int(f[2], 16) == got[-1][0], line
            got[-1][1].append((kind, int(f[3][5:], 16)))
for i, (w, g) in enumerate(zip(want, got)):
    if w != g:
        sys.exit("instruction %d differs: execlog %s, reftrace %s" % (i, w, g))
if len(want) != len(got):
    sys.exit("execlog saw %d instructions, reftrace %d" % (len(want), len(got)))
print("reftrace agrees with execlog: %d instructions, %d memory accesses"
      % (len(got), sum(len(a) for _, a in got)))
