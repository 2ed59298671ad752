#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""filters: the shipped filters (filters/*.bpf.o) on real programs, checked
against the reference plugin loaded in the same QEMU process.

One QEMU runs the program under `sluice run --filter F --tool dump` and under
the reference plugin (QEMU_PLUGIN, tests/plugin/reftrace.c), so both see the
very same execution. What sluice must have written, per filter:

  all         exactly the reference trace
  pcs         exactly the reference's EXEC events, and no memory access
  coverage    each pc the reference executed, exactly once, and nothing else
  range       the reference trace restricted to pcs in [lo, hi), in order (the window
              taken in the main executable from a run with lo = hi = 0, which must
              trace nothing and say so on stderr)
  range_main  the same window given as offsets from the main executable's base
              (--set in_main=1; base from QEMU's `-d page` start_code and readelf):
              the same events; for the PIE sha256sum the window's start is an
              instruction address in objdump -d (what nm and objdump print)
  mem_writes  exactly the reference's stores, in order
  main_image  the reference trace restricted to the main executable's code
              ([start_code, end_code) from QEMU's own `-d page` log)
  branches    only pcs that end a TB in QEMU's own `-d in_asm` log, and every
              execution of those pcs, in order
  sample      a strict, non-empty subsequence of the reference's accesses,
              and no exec records

Programs: x86_64 sha256sum (the host's) and arm64 busybox sha256sum. Then
`coverage` on the self-modifying guest (tests/guests/smc.c) on all four
architectures: QEMU's `-d in_asm` log must show a pc lifted three times, and
sluice must still record every pc once. And `coverage` on guests whose TBs
are left midway on their first run, on all four: faulting accesses and int3
(segv.c), a process killed by SIGSEGV (exitcode.c), threads (their TBs take
the once helper, not first runs), fork + exec (forkexec.c), and a timer
signal every 100 us during a long straight-line function (sigstorm.c: each
signal leaves the TB about to start). A first run cut short must record the
instructions it ran, and those it did not reach when they run later, never
before; and the guest must get through (in 120 s, not hang).

  filters.py --sluice build/consumer/sluice --plugin build/tests/e2e/libreftrace.so
             --filters build/filters --guests build/tests/e2e [--filter NAME]... [--keep DIR]
"""

import argparse
import os
import re
import sys
import tempfile

import common


def pc_of(ev):
    """Guest pc of a dump event ("EXEC 0x..", "READ8 0x.. addr=.."), or None."""
    parts = ev.split()
    if len(parts) >= 2 and parts[1].startswith("0x"):
        return int(parts[1], 16)
    return None


def programs(inp):
    cache = os.path.join(os.environ.get("SLUICE_CACHE", os.path.expanduser("~/.cache/sluice")),
                         "busybox")
    bb = common.need_file(os.path.join(cache, "arm64", "bin", "busybox"),
                          "busybox for arm64 (run tests/e2e/fetch-busybox.sh)")
    return [("sha256sum", "x86_64", ["/usr/bin/sha256sum", inp]),
            ("busybox sha256sum", "aarch64", [bb, "sha256sum", inp])]


class Run:
    """One traced run: the reference's and sluice's traces, and QEMU's log."""

    def __init__(self, args, tmp, arch, argv, filt, sets=(), qemu_log=None, timeout=600):
        prog, pargs = argv[0], argv[1:]
        self.ref = common.fresh(os.path.join(tmp, "%s-%s.ref" % (filt, arch)))
        self.act = common.fresh(os.path.join(tmp, "%s-%s.act" % (filt, arch)))
        self.log = common.fresh(os.path.join(tmp, "%s-%s.log" % (filt, arch)))
        env = {"QEMU_PLUGIN": "%s,out=%s,mode=dump" % (args.plugin, self.ref)}
        if qemu_log:
            env.update({"QEMU_LOG": qemu_log, "QEMU_LOG_FILENAME": self.log})
        extra = ["--filter", os.path.join(args.filters, filt + ".bpf.o")]
        for s in sets:
            extra += ["--set", s]
        # setarch -R: no address randomization in QEMU's own mmap()s, so the
        # main executable sits at the same address in every run (range picks
        # its window from an earlier run).
        rc0, out0, _ = common.run(["setarch", "-R"] + common.cmd_plain(arch, prog, pargs))
        rc, out, err = common.run(["setarch", "-R"] + common.cmd_sluice(
            args.sluice, "dump", self.act, prog, pargs, extra=extra), timeout, extra_env=env)
        self.problems = []
        self.err = err.decode(errors="replace")
        if rc != rc0 or out != out0:
            self.problems.append("traced: exit %d stdout %r; untraced: exit %d stdout %r; "
                                 "stderr %r" % (rc, out[:200], rc0, out0[:200], err[-400:]))
            return
        _, self.rt, rlost = common.read_trace(self.ref)
        _, self.at, alost = common.read_trace(self.act)
        if rlost or alost:
            self.problems.append("lost events: sluice %d, reference %d" % (alost, rlost))

    def expect(self, keep):
        """Fails unless every thread's sluice trace is the reference's events that keep() keeps."""
        for tid in sorted(set(self.rt) | set(self.at)):
            want = [ev for ev in self.rt.get(tid, []) if keep(ev)]
            got = self.at.get(tid, [])
            i = common.first_difference(want, got)
            if i is not None:
                common.show_difference("thread %s" % tid, want, got, i)
                self.problems.append("thread %s differs at event %d" % (tid, i))
        return sum(len(s) for s in self.at.values())


def check_all(args, tmp, arch, argv):
    r = Run(args, tmp, arch, argv, "all")
    return r, (0 if r.problems else r.expect(lambda ev: True))


def check_pcs(args, tmp, arch, argv):
    r = Run(args, tmp, arch, argv, "pcs")
    return r, (0 if r.problems else r.expect(lambda ev: ev.startswith("EXEC ")))


def check_coverage(args, tmp, arch, argv, qemu_log=None, per_thread=False, timeout=600):
    """Each pc once per process; with per_thread, once per thread (a process
    that execs records its pcs again: it is a new program)."""
    r = Run(args, tmp, arch, argv, "coverage", qemu_log=qemu_log, timeout=timeout)
    if r.problems:
        return r, 0
    got = [pc_of(ev) for evs in r.at.values() for ev in evs]
    other = [ev for evs in r.at.values() for ev in evs if not ev.startswith("EXEC ")]
    want = {pc_of(ev) for evs in r.rt.values() for ev in evs if ev.startswith("EXEC ")}
    if other:
        r.problems.append("non-exec records, first: %s" % other[0])
    for evs in r.at.values() if per_thread else [got]:
        pcs = [pc_of(ev) for ev in evs] if per_thread else evs
        if len(pcs) != len(set(pcs)):
            r.problems.append("%d pcs recorded more than once" % (len(pcs) - len(set(pcs))))
    if set(got) != want:
        r.problems.append("pc sets differ: %d only in the reference (e.g. %s), %d only in sluice"
                          % (len(want - set(got)), [hex(p) for p in list(want - set(got))[:3]],
                             len(set(got) - want)))
    return r, len(got)


def check_range(args, tmp, arch, argv):
    # The window: the second quarter of the distinct pcs the reference saw in
    # the main executable in the run before, one of the same filter with an
    # empty window (it must trace nothing). QEMU loads the executable before
    # anything else, so it sits at the same address in every run; the
    # libraries and ld.so do not (the jitter's own mmap()s can come between
    # the guest's), so a window there may catch nothing the next time.
    r = Run(args, tmp, arch, argv, "range", sets=("lo=0", "hi=0"), qemu_log="page")
    if r.problems or r.expect(lambda ev: False) != 0:
        return r, 0
    if "sluice: the filter %s selected nothing" % os.path.join(args.filters, "range.bpf.o") \
            not in r.err:
        r.problems.append("an empty window traced nothing and nothing said so: stderr %r"
                          % r.err[-300:])
        return r, 0
    code = main_code(r)
    if code is None:
        return r, 0
    pcs = sorted({pc_of(ev) for evs in r.rt.values() for ev in evs
                  if ev.startswith("EXEC ") and code[0] <= pc_of(ev) < code[1]})
    if len(pcs) < 4:
        r.problems.append("the reference ran %d pcs of the main executable" % len(pcs))
        return r, 0
    lo, hi = pcs[len(pcs) // 4], pcs[len(pcs) // 2]
    r = Run(args, tmp, arch, argv, "range", sets=("lo=%#x" % lo, "hi=%#x" % hi))
    if r.problems:
        return r, 0
    n = r.expect(lambda ev: lo <= pc_of(ev) < hi)
    if n == 0 and not r.problems:
        r.problems.append("window [%#x, %#x) caught nothing" % (lo, hi))
    return r, n


def check_range_main(args, tmp, arch, argv):
    # The same window as range's, given as offsets from the main executable's
    # base (--set in_main=1): the reference's events in it, in order. The base
    # is where QEMU loaded the program (its `-d page` start_code, less its
    # first executable LOAD's vaddr and page offset, per readelf). For the
    # PIE sha256sum the offsets are objdump's addresses: the window's first
    # pc must be an instruction objdump shows at that address.
    r = Run(args, tmp, arch, argv, "range", sets=("lo=0", "hi=0"), qemu_log="page")
    code = None if r.problems else main_code(r)
    if code is None:
        return r, 0
    segs = common.elf_loads(arch, argv[0])
    base = code[0] - min(v for v, _, _, ex in segs if ex) + (min(v for v, _, _, _ in segs) & ~0xfff)
    pcs = sorted({pc_of(ev) for evs in r.rt.values() for ev in evs
                  if ev.startswith("EXEC ") and code[0] <= pc_of(ev) < code[1]})
    lo, hi = pcs[len(pcs) // 4], pcs[len(pcs) // 2]
    if arch == "x86_64" and lo - base not in common.disassemble(arch, argv[0]):
        r.problems.append("offset %#x (pc %#x) is no instruction address in objdump -d %s"
                          % (lo - base, lo, argv[0]))
        return r, 0
    r = Run(args, tmp, arch, argv, "range",
            sets=("lo=%#x" % (lo - base), "hi=%#x" % (hi - base), "in_main=1"))
    if r.problems:
        return r, 0
    n = r.expect(lambda ev: lo <= pc_of(ev) < hi)
    if n == 0 and not r.problems:
        r.problems.append("window [%#x, %#x) caught nothing" % (lo - base, hi - base))
    return r, n


def check_mem_writes(args, tmp, arch, argv):
    r = Run(args, tmp, arch, argv, "mem_writes")
    return r, (0 if r.problems else r.expect(lambda ev: ev.startswith("WRITE")))


def main_code(r):
    """[start_code, end_code) of the main executable from QEMU's `-d page` log, or None."""
    with open(r.log) as f:
        log = f.read()
    m = [re.search(r"^%s\s+0x([0-9a-f]+)" % k, log, re.M) for k in ("start_code", "end_code")]
    if not all(m):
        r.problems.append("no start_code/end_code in QEMU's -d page log")
        return None
    return tuple(int(x.group(1), 16) for x in m)


def check_main_image(args, tmp, arch, argv):
    r = Run(args, tmp, arch, argv, "main_image", qemu_log="page")
    if r.problems:
        return r, 0
    code = main_code(r)
    if code is None:
        return r, 0
    start, end = code
    n = r.expect(lambda ev: start <= pc_of(ev) < end)
    if n == 0:
        r.problems.append("nothing traced in [%#x, %#x)" % (start, end))
    return r, n


def check_once_smc(args, tmp, arch, argv):
    r, n = check_coverage(args, tmp, arch, argv, qemu_log="in_asm")
    if r.problems:
        return r, n
    lifted = {}
    with open(r.log, errors="replace") as f:
        for line in f:
            m = re.match(r"^0x([0-9a-f]+):", line)
            if m:
                pc = int(m.group(1), 16)
                lifted[pc] = lifted.get(pc, 0) + 1
    again = [pc for pc, k in lifted.items() if k >= 3]
    if not again:
        r.problems.append("no pc was lifted three times: the code was not re-translated")
    return r, n


def tb_last_pcs(log):
    """Pcs of the last instruction of every TB in a `-d in_asm` log."""
    last, cur = set(), None
    with open(log, errors="replace") as f:
        for line in f:
            m = re.match(r"^0x([0-9a-f]+):(.*)", line)
            # x86 lines that only continue the previous instruction's bytes
            # ("0x...3001:  00", across a page boundary) are not instructions.
            if m and not re.fullmatch(r"(\s+[0-9a-f]{2})+\s*", m.group(2)):
                cur = int(m.group(1), 16)
            elif cur is not None and not line.strip():
                last.add(cur)
                cur = None
    if cur is not None:
        last.add(cur)
    return last


def check_branches(args, tmp, arch, argv):
    r = Run(args, tmp, arch, argv, "branches", qemu_log="in_asm")
    if r.problems:
        return r, 0
    got = {pc_of(ev) for evs in r.at.values() for ev in evs}
    stray = got - tb_last_pcs(r.log)
    if stray:
        r.problems.append("%d pcs do not end a TB, e.g. %s" % (len(stray),
                                                              [hex(p) for p in sorted(stray)[:3]]))
    n = r.expect(lambda ev: ev.startswith("EXEC ") and pc_of(ev) in got)
    if n == 0:
        r.problems.append("no branch traced")
    return r, n


def is_subsequence(small, big):
    it = iter(big)
    return all(any(x == y for y in it) for x in small)


def check_sample(args, tmp, arch, argv):
    r = Run(args, tmp, arch, argv, "sample", sets=("n=7",))
    if r.problems:
        return r, 0
    n = 0
    for tid, got in r.at.items():
        mem = [ev for ev in r.rt.get(tid, []) if not ev.startswith("EXEC ")]
        if any(ev.startswith("EXEC ") for ev in got) or not is_subsequence(got, mem):
            r.problems.append("thread %s: not a subsequence of the reference's accesses" % tid)
        if len(got) >= len(mem):
            r.problems.append("thread %s: %d of %d accesses kept" % (tid, len(got), len(mem)))
        n += len(got)
    if n == 0:
        r.problems.append("nothing sampled")
    return r, n


CHECKS = {"all": check_all, "pcs": check_pcs, "coverage": check_coverage, "range": check_range,
          "range_main": check_range_main,
          "mem_writes": check_mem_writes, "main_image": check_main_image,
          "branches": check_branches, "sample": check_sample}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sluice", required=True)
    ap.add_argument("--plugin", required=True)
    ap.add_argument("--filters", required=True)
    ap.add_argument("--guests", required=True)
    ap.add_argument("--filter", action="append")
    ap.add_argument("--keep", help="keep traces in this directory")
    args = ap.parse_args()
    common.qemu_dir()
    common.need_file(args.plugin, "reference plugin (configure meson with -Dqemu_dir)")
    failed = []
    with tempfile.TemporaryDirectory(prefix="sluice-filters-") as tmp:
        tmp = args.keep or tmp
        os.makedirs(tmp, exist_ok=True)
        inp = os.path.join(tmp, "input.txt")
        with open(inp, "w") as f:
            f.write("".join("line %d of the filters test input\n" % i for i in range(200)))
        runs = [(filt, name, arch, argv, CHECKS[filt]) for name, arch, argv in programs(inp)
                for filt in args.filter or CHECKS]
        if not args.filter or "coverage" in args.filter:
            runs += [("coverage", "smc", arch, [os.path.join(args.guests, "smc-" + arch)],
                      check_once_smc) for arch in common.ARCHES]
            runs += [("coverage", " ".join([guest] + gargs), arch,
                      [os.path.join(args.guests, "%s-%s" % (guest, arch))] + gargs, check)
                     for guest, gargs, check in [
                         ("segv", [], check_coverage), ("exitcode", ["segv"], check_coverage),
                         ("threads", [], check_coverage),
                         ("forkexec", [], lambda *a: check_coverage(*a, per_thread=True)),
                         # A livelock fails in 120 s; the run takes about 1.
                         ("sigstorm", ["100"], lambda *a: check_coverage(*a, timeout=120))]
                     for arch in common.ARCHES]
        for filt, name, arch, argv, check in runs:
            r, n = check(args, tmp, arch, argv)
            where = "%s on %s (%s)" % (filt, name, arch)
            for p in r.problems:
                print("%s: %s" % (where, p))
            print("%s: %s (%s records)" % (where, "FAILED" if r.problems else "ok", n))
            sys.stdout.flush()
            if r.problems:
                failed.append(where)
    if failed:
        common.fail("filters: %d failed: %s" % (len(failed), "; ".join(failed)))
    print("filters: all as expected")


if __name__ == "__main__":
    main()
