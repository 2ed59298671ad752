#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""replay: every traced load reads what the traced stores before it left in memory.

An oracle that needs no reference tracer: for a one-thread guest, replay the
dump's stores, in order, into a shadow of memory (byte by byte), and check each
load's value against the shadow's bytes it covers. A value traced in another
convention than the rest (x86 movbe's register order), an atomic's store traced
with its operand, a store traced with the wrong size or address: each makes a
later load disagree. The kernel and QEMU write guest memory in system calls (and
signal frames: the guests here take none), so the shadow is emptied at each
system call's return (`--syscalls`); bytes never stored since are not checked.
Known gaps of the trace itself make false alarms here: stores QEMU's helpers
make through a host pointer (x86 fxsave/xsave, aarch64 dc zva) are not traced,
so a later load of those bytes would disagree (the guests here make none).

  replay.py --sluice build/consumer/sluice --guests build/tests/e2e [--arch A]...
"""

import argparse
import os
import re
import sys
import tempfile

import common

# (guest, arguments): one-thread guests of tests/guests, then real programs (x86_64).
GUESTS = [("loops", []), ("memops", []), ("smc", []), ("exitcode", ["3"])]
EVENT = re.compile(rb"^\d+ (?:(READ|WRITE)(\d+) 0x[0-9a-f]+ addr=0x([0-9a-f]+) "
                   rb"val=0x([0-9a-f]+)(?::0x([0-9a-f]+))?|(SYSRET) )", re.M)


def replay(dump):
    """(loads checked, bytes checked, [first mismatches]) of a dump's one thread."""
    shadow, loads, nbytes, bad = {}, 0, 0, []
    with open(dump, "rb") as f:
        text = f.read()
    for m in EVENT.finditer(text):
        kind, size, addr, val, lo = m.group(1), m.group(2), m.group(3), m.group(4), m.group(5)
        if m.group(6):
            shadow.clear()
            continue
        size, addr = int(size), int(addr, 16)
        # 16-byte values print as val=0x<high>:0x<low>
        v = (int(val, 16) << 64 | int(lo, 16)) if lo is not None else int(val, 16)
        data = v.to_bytes(size, "little")
        if kind == b"WRITE":
            for k in range(size):
                shadow[addr + k] = data[k]
            continue
        known = [k for k in range(size) if addr + k in shadow]
        if not known:
            continue
        loads += 1
        nbytes += len(known)
        if any(shadow[addr + k] != data[k] for k in known) and len(bad) < 5:
            want = bytes(shadow.get(addr + k, data[k]) for k in range(size))
            bad.append("line %d: %s, where the stores before left val=%#x%s"
                       % (text.count(b"\n", 0, m.start()) + 1, m.group(0).decode().strip(),
                          int.from_bytes(want, "little"),
                          "" if len(known) == size else " (bytes %s of it)" % known))
    return loads, nbytes, bad


def check(args, tmp, what, prog, pargs, problems):
    dump = os.path.join(tmp, "replay.dump")
    rc, _, err = common.run(common.cmd_sluice(args.sluice, "dump", dump, prog, pargs,
                                              extra=["--syscalls"]))
    if rc not in (0, 3):
        problems.append("%s: sluice exited %d: %r" % (what, rc, err[-300:]))
        return
    loads, nbytes, bad = replay(dump)
    os.unlink(dump)
    print("%s: %d loads (%d bytes) read what the traced stores left%s"
          % (what, loads, nbytes, "" if not bad else "; MISMATCHES: %d shown" % len(bad)))
    for b in bad:
        problems.append("%s: %s" % (what, b))
    if loads == 0:
        problems.append("%s: no load read a traced store: the check proves nothing" % what)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sluice", required=True)
    ap.add_argument("--guests", required=True)
    ap.add_argument("--arch", action="append")
    args = ap.parse_args()
    common.qemu_dir()
    problems = []
    with tempfile.TemporaryDirectory(prefix="sluice-replay-") as tmp:
        for arch in args.arch or common.ARCHES:
            for g, gargs in GUESTS + [("counters", ["movbe", os.path.join(tmp, "c")])] * (
                    arch == "x86_64"):
                prog = common.need_file(os.path.join(args.guests, "%s-%s" % (g, arch)), g)
                check(args, tmp, "%s %s %s" % (arch, g, " ".join(gargs[:1])), prog, gargs,
                      problems)
        if not args.arch or "x86_64" in args.arch:
            data = os.path.join(tmp, "input")
            with open(data, "wb") as f:
                f.write(os.urandom(1 << 14))
            for prog, pargs in (("/usr/bin/sha256sum", [data]), ("/usr/bin/gzip", ["-9c", data]),
                                ("/usr/bin/sort", [data])):
                check(args, tmp, "x86_64 " + os.path.basename(prog), prog, pargs, problems)
    common.conclude("replay", problems, "every checked load read what the traced stores left")


if __name__ == "__main__":
    sys.exit(main())
