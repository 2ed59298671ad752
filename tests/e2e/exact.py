#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""exact: sluice's dump equals the reference plugin's, event for event.

For each guest program (tests/guests) on each architecture, runs it untraced,
under the reference plugin (tests/plugin/reftrace.c, built only on QEMU's
plugin API) and under `sluice run --tool dump`, and checks:
  - the guest's stdout and exit status are the same in all three runs;
  - sluice lost nothing (no LOST lines) and saw as many threads;
  - each thread's event sequence (EXEC, READ, WRITE with address and value)
    is identical, up to thread ids and host-chosen mapping addresses (see
    common.TraceMatcher).
The threads guest races by design, so for it only what is deterministic is
compared exactly: every event in its functions det_* and main, per thread,
threads matched by content; in race_* the events with values masked (on
mipsel, whose ll/sc loops retry under contention, only the set of distinct
masked events). On the first difference it prints guest, arch, thread, event
index, expected and actual lines with context.

  exact.py --sluice build/consumer/sluice --plugin build/tests/e2e/libreftrace.so
           --guests build/tests/e2e [--arch A]... [--guest G]... [--self-check]

--self-check compares two reference runs instead (no sluice needed): it
checks the guests, the plugin and this comparison.
"""

import argparse
import copy
import os
import re
import sys
import tempfile

import common

GUESTS = ["loops", "memops", "segv", "threads", "forkexec"]
VAL_RE = re.compile(r" val=\S+")


def pair_by_first_event(exp_order, exp, act_order, act):
    """Pairs threads by their first event, ties by order of first appearance."""
    pairs, used = [], set()
    for et in exp_order:
        for at in act_order:
            if at not in used and act[at][:1] == exp[et][:1]:
                pairs.append((et, at))
                used.add(at)
                break
        else:
            pairs.append((et, None))
    return pairs


def in_ranges(ev, ranges):
    pc = int(ev.split(" ", 2)[1], 16)
    return any(lo <= pc < hi for lo, hi in ranges)


def compare_plain(where, exp_order, exp, act_order, act):
    pairs = pair_by_first_event(exp_order, exp, act_order, act)
    tid_map = {int(e): int(a) for e, a in pairs if a is not None}
    matcher = common.TraceMatcher(tid_map)
    ok = True
    for n, (et, at) in enumerate(pairs):
        if at is None:
            print("%s: reference thread #%d (tid %s, %d events, first %r) has no sluice "
                  "thread starting the same way" % (where, n, et, len(exp[et]), exp[et][:1]))
            ok = False
            continue
        i = common.first_difference(matcher, exp[et], act[at])
        if i is not None:
            common.show_difference("%s thread #%d (ref tid %s, sluice tid %s)" % (where, n, et, at),
                                   exp[et], act[at], i)
            ok = False
    if matcher.mangled:
        print("%s: note: %d values accepted as mangled pointers" % (where, matcher.mangled))
    return ok


def split_threads_guest(seq, det, race):
    d = [ev for ev in seq if in_ranges(ev, det)]
    r = [VAL_RE.sub(" val=*", ev) for ev in seq if in_ranges(ev, race)]
    return d, r


def compare_threads(where, guest_path, arch, exp, act):
    funcs = common.elf_functions(guest_path)
    det = [r for n, r in funcs.items() if n.startswith("det_") or n == "main"]
    race = [r for n, r in funcs.items() if n.startswith("race_")]
    if len(det) < 4 or len(race) < 1:
        common.fail("%s: det_*/race_* symbols not found in %s" % (where, guest_path))
    es = {t: split_threads_guest(s, det, race) for t, s in exp.items()}
    as_ = {t: split_threads_guest(s, det, race) for t, s in act.items()}
    matcher = common.TraceMatcher({})
    ok, unpaired = True, list(as_)
    for n, (et, (ed, er)) in enumerate(sorted(es.items(), key=lambda kv: kv[1][0][:1])):
        best = None  # (prefix length, tid, index)
        for at in unpaired:
            trial = copy.deepcopy(matcher)
            trial.tid_map[int(et)] = int(at)
            i = common.first_difference(trial, ed, as_[at][0])
            if i is None:
                matcher = trial
                best = None
                unpaired.remove(at)
                break
            if best is None or i > best[0]:
                best = (i, at)
        else:
            ok = False
            if best is None:
                print("%s: reference thread %s has no sluice counterpart" % (where, et))
            else:
                common.show_difference("%s det_*/main events of ref tid %s vs closest sluice tid %s"
                                       % (where, et, best[1]), ed, as_[best[1]][0], best[0])
            continue
        ar = as_[at][1]
        if arch == "mipsel":
            er, ar = sorted(set(er)), sorted(set(ar))
        i = common.first_difference(matcher, er, ar)
        if i is not None:
            common.show_difference("%s race_* events (values masked) of ref tid %s / sluice tid %s"
                                   % (where, et, at), er, ar, i)
            ok = False
    return ok


def check_one(args, tmp, guest, arch):
    where = "%s/%s" % (guest, arch)
    prog = common.need_file(os.path.join(args.guests, "%s-%s" % (guest, arch)), "guest " + where)
    prog_args = []
    rc0, out0, err0 = common.run(common.cmd_plain(arch, prog, prog_args))
    ref = common.fresh(os.path.join(tmp, "%s-%s.ref" % (guest, arch)))
    rc1, out1, _ = common.run(common.cmd_ref(arch, args.plugin, ref, prog, prog_args))
    act = common.fresh(os.path.join(tmp, "%s-%s.act" % (guest, arch)))
    if args.self_check:
        rc2, out2, err2 = common.run(common.cmd_ref(arch, args.plugin, act, prog, prog_args))
    else:
        rc2, out2, err2 = common.run(common.cmd_sluice(args.sluice, "dump", act, prog, prog_args))
    ok = True
    for name, rc, out in (("reference", rc1, out1), ("sluice", rc2, out2)):
        if rc != rc0 or out != out0:
            print("%s: under %s: exit %d stdout %r; untraced: exit %d stdout %r"
                  % (where, name, rc, out[:300], rc0, out0[:300]))
            ok = False
    if not os.path.exists(act):
        print("%s: sluice wrote no dump (exit %d, stderr %r)" % (where, rc2, err2[-500:]))
        return False
    eo, et, elost = common.read_trace(ref)
    ao, at, alost = common.read_trace(act)
    if alost or elost:
        print("%s: LOST events: sluice %d, reference %d" % (where, alost, elost))
        ok = False
    if len(eo) != len(ao):
        print("%s: %d threads in the reference, %d under sluice" % (where, len(eo), len(ao)))
        ok = False
    if guest == "threads":
        ok = compare_threads(where, prog, arch, et, at) and ok
    else:
        ok = compare_plain(where, eo, et, ao, at) and ok
    nev = sum(len(s) for s in et.values())
    print("%s: %s (%d threads, %d reference events)" % (where, "ok" if ok else "FAILED", len(eo), nev))
    sys.stdout.flush()
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sluice")
    ap.add_argument("--plugin", required=True)
    ap.add_argument("--guests", required=True)
    ap.add_argument("--arch", action="append")
    ap.add_argument("--guest", action="append")
    ap.add_argument("--self-check", action="store_true")
    ap.add_argument("--keep", help="keep traces in this directory")
    args = ap.parse_args()
    common.qemu_dir()
    common.need_file(args.plugin, "reference plugin (configure meson with -Dqemu_dir)")
    if not args.self_check:
        common.need_file(args.sluice or "", "sluice")
    failed = []
    with tempfile.TemporaryDirectory(prefix="sluice-exact-") as tmp:
        tmp = args.keep or tmp
        for arch in args.arch or common.ARCHES:
            for guest in args.guest or GUESTS:
                if not check_one(args, tmp, guest, arch):
                    failed.append("%s/%s" % (guest, arch))
    if failed:
        common.fail("exact: %d of %d differ: %s" % (
            len(failed), len(args.arch or common.ARCHES) * len(args.guest or GUESTS),
            " ".join(failed)))
    print("exact: all identical")


if __name__ == "__main__":
    main()
