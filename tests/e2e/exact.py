#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""exact: sluice's trace equals the reference plugin's, event for event.

For each guest program (tests/guests) on each architecture, one QEMU process
runs the guest with BOTH tracers: sluice (`sluice run --tool dump`) and the
reference plugin (tests/plugin/reftrace.c, built only on QEMU's plugin API,
loaded through QEMU_PLUGIN). Both observe the very same execution, so there
is nothing to tolerate: thread ids, addresses and values, even of the racing
threads guest, must be byte-identical, per thread, in order. The test fails
on the first difference, printing guest, arch, thread, event index and the
two lines with context. It also checks that sluice lost nothing and that the
guest's stdout and exit status equal those of an untraced run.

With --syscalls, sluice runs with `--syscalls` and the plugin with
`syscalls=on` (its syscall and syscall-return callbacks): every syscall's
number, arguments and return value must be in both traces at the same place.
Both see QEMU's do_syscall, so the restart guest is checked against what it
saw itself: its read that SA_RESTART signals interrupt returns once, with the
value it printed, and no sigreturn returns (check_restart); the nosys guest's
syscalls that no architecture has are traced with the errno it got (check_nosys).

  exact.py --sluice build/consumer/sluice --plugin build/tests/e2e/libreftrace.so
           --guests build/tests/e2e [--arch A]... [--guest G]... [--syscalls]
"""

import argparse
import os
import re
import sys
import tempfile

import common

# (guest, arguments): every exit path of a process is covered — normal
# exit, exit(3), a fatal SIGSEGV and abort() — plus fork, exec and threads.
GUESTS = [("loops", []), ("memops", []), ("segv", []), ("threads", []), ("forkexec", []),
          ("exitcode", ["3"]), ("exitcode", ["segv"]), ("exitcode", ["abort"]),
          ("exitcode", ["nosys"]), ("smc", [])]


def compare(where, ref, act):
    """True when every thread's events are identical; prints the first difference."""
    eo, et, elost = common.read_trace(ref)
    ao, at, alost = common.read_trace(act)
    ok = True
    if alost or elost:
        print("%s: LOST events: sluice %d, reference %d" % (where, alost, elost))
        ok = False
    if sorted(eo) != sorted(ao):
        print("%s: threads: reference %s, sluice %s" % (where, sorted(eo), sorted(ao)))
        ok = False
    for tid in eo:
        i = common.first_difference(et[tid], at.get(tid, []))
        if i is not None:
            common.show_difference("%s thread %s" % (where, tid), et[tid], at.get(tid, []), i)
            ok = False
    return ok, len(eo), sum(len(s) for s in et.values())


def check_one(args, tmp, guest, gargs, arch):
    where = "%s/%s" % (" ".join([guest] + gargs), arch)
    prog = common.need_file(os.path.join(args.guests, "%s-%s" % (guest, arch)), "guest " + where)
    rc0, out0, _ = common.run(common.cmd_plain(arch, prog, gargs))
    name = "-".join([guest] + gargs + [arch])
    ref = common.fresh(os.path.join(tmp, name + ".ref"))
    act = common.fresh(os.path.join(tmp, name + ".act"))
    plugin = {"QEMU_PLUGIN": "%s,out=%s,mode=dump%s" % (args.plugin, ref,
                                                         ",syscalls=on" if args.syscalls else "")}
    rc, out, err = common.run(common.cmd_sluice(args.sluice, "dump", act, prog, gargs,
                                                ["--syscalls"] if args.syscalls else []),
                              extra_env=plugin)
    ok = True
    if rc != rc0 or out != out0:
        print("%s: traced: exit %d stdout %r; untraced: exit %d stdout %r"
              % (where, rc, out[:300], rc0, out0[:300]))
        ok = False
    for path, name in ((act, "sluice"), (ref, "the reference plugin")):
        if not os.path.exists(path):
            print("%s: %s wrote no trace (exit %d, stderr %r)" % (where, name, rc, err[-500:]))
            return False
    same, nthreads, nev = compare(where, ref, act)
    ok = same and ok
    if args.syscalls:
        with open(act) as f:
            calls = sum(" SYSCALL " in line for line in f)
        if not calls:
            print("%s: no SYSCALL event in sluice's trace" % where)
            ok = False
    print("%s: %s (%d threads, %d events)" % (where, "ok" if ok else "FAILED", nthreads, nev))
    sys.stdout.flush()
    return ok


def check_restart(args, tmp, arch):
    """--syscalls against the guest's own view: a read that SA_RESTART signals interrupt
    returns once (the value the guest printed), and no sigreturn returns at all (there was one
    SYSRET read = -512 per restart and a SYSRET rt_sigreturn = -513 per signal: QEMU's own
    codes, never the guest's); as many sigreturns as the guest counted signals."""
    prog = common.need_file(os.path.join(args.guests, "restart-" + arch), "guest restart")
    act = common.fresh(os.path.join(tmp, "restart-%s.dump" % arch))
    rc, out, err = common.run([args.sluice, "run", "--syscalls", "--tool", "dump", "--no-disasm",
                               "-o", act, "--", prog])  # (names, not --raw's numbers)
    said = re.match(rb"read returned (-?\d+) after (\d+) signals in pid (\d+)", out)
    problems = []
    if rc != 0 or not said or not os.path.exists(act):
        problems.append("sluice exit %d, stdout %r, stderr %r" % (rc, out[:200], err[-300:]))
    else:
        with open(act) as f:
            lines = f.read().splitlines()
        # (the guest's own pid: the child that writes to the pipe may come first in the dump)
        parent = said.group(3).decode()
        rets = [l.split(" = ")[1].split()[0] for l in lines
                if l.startswith(parent + " SYSRET read = ")]
        sigrets = sum(1 for l in lines if re.match(re.escape(parent) + r" SYSCALL (rt_)?sigreturn\(", l))
        internal = [l for l in lines if " SYSRET " in l and re.search(r" = -51[23]\b", l)]
        if rets != [said.group(1).decode()] or sigrets != int(said.group(2)) or internal:
            problems.append("the guest read %s after %s signals; the trace has SYSRET read = %s, "
                            "%d sigreturns, QEMU's own codes %r" % (
                                said.group(1).decode(), said.group(2).decode(), rets, sigrets,
                                internal[:2]))
        if int(said.group(2)) == 0:
            problems.append("no signal came during the read: nothing was tested")
    where = "restart/%s" % arch
    print("%s: %s" % (where, "; ".join(problems) + " FAILED" if problems else
                      "ok (%s)" % out.decode(errors="replace").strip()))
    return not problems


def check_nosys(args, tmp, arch):
    """--syscalls against the guest's own view: its syscalls numbered -1 and -4096 (no
    architecture has them) are each traced once, entry and return, with the errno the guest
    got (mipsel's QEMU answered them before do_syscall, where both tracers look: no event)."""
    prog = common.need_file(os.path.join(args.guests, "exitcode-" + arch), "guest exitcode")
    act = common.fresh(os.path.join(tmp, "nosys-%s.dump" % arch))
    rc, out, err = common.run([args.sluice, "run", "--syscalls", "--tool", "dump", "--raw",
                               "-o", act, "--", prog, "nosys"])
    said = re.search(rb"syscall\(-1\) = -1 errno (\d+), syscall\(-4096\) = -1 errno (\d+)", out)
    problems = []
    if rc != 0 or not said or not os.path.exists(act):
        problems.append("sluice exit %d, stdout %r, stderr %r" % (rc, out[:200], err[-300:]))
    else:
        with open(act) as f:
            events = [l.split()[1:] for l in f if re.match(r"\d+ SYS(CALL|RET) -(1|4096) ", l)]
        want = [["SYSCALL", "-1", "0x1", "0x2", "0x3", "0x4"], ["SYSRET", "-1", "-" + said.group(1).decode()],
                ["SYSCALL", "-4096", "0x1", "0x2", "0x3", "0x4"],
                ["SYSRET", "-4096", "-" + said.group(2).decode()]]
        got = [e[:len(w)] for e, w in zip(events, want)]
        if got != want or len(events) != len(want):
            problems.append("the guest got errno %s and %s; the trace has %r (want %r)"
                            % (said.group(1).decode(), said.group(2).decode(), events, want))
    where = "nosys/%s" % arch
    print("%s: %s" % (where, "; ".join(problems) + " FAILED" if problems else "ok"))
    return not problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sluice", required=True)
    ap.add_argument("--plugin", required=True)
    ap.add_argument("--guests", required=True)
    ap.add_argument("--arch", action="append")
    ap.add_argument("--guest", action="append")
    ap.add_argument("--keep", help="keep traces in this directory")
    ap.add_argument("--syscalls", action="store_true", help="syscall events too")
    args = ap.parse_args()
    common.qemu_dir()
    common.need_file(args.plugin, "reference plugin (configure meson with -Dqemu_dir)")
    common.need_file(args.sluice, "sluice")
    arches = args.arch or common.ARCHES
    guests = [g for g in GUESTS if not args.guest or g[0] in args.guest]
    failed = []
    with tempfile.TemporaryDirectory(prefix="sluice-exact-") as tmp:
        tmp = args.keep or tmp
        for arch in arches:
            for guest, gargs in guests:
                if not check_one(args, tmp, guest, gargs, arch):
                    failed.append("%s/%s" % ("-".join([guest] + gargs), arch))
            if args.syscalls and not args.guest and not check_restart(args, tmp, arch):
                failed.append("restart/%s" % arch)
            if args.syscalls and not args.guest and not check_nosys(args, tmp, arch):
                failed.append("nosys/%s" % arch)
    if failed:
        common.fail("exact: %d checks failed: %s" % (len(failed), " ".join(failed)))
    print("exact: all identical")


if __name__ == "__main__":
    main()
