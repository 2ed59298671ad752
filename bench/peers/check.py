#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Checks the plugin peers against the reference plugin, tests/plugin/reftrace.c.

Each peer runs in the same QEMU process as reftrace (two -plugin options), so
both see one execution, random stack addresses and thread races included; the
peer's lines are compared with reftrace's events folded here:

  insn_cb, tb_exact (consumer=off and on): pcsum n and h = the EXEC pcs' fold
  icount: n = the number of EXEC lines
  mem (consumer=off and on): loads, stores and h = the READ/WRITE fold
      (words addr, value [, value high for 16 bytes], size | is_store << 8),
      and loads, stores = reftrace's mode=count totals in another run

Per guest thread in reftrace, per vCPU in the peers: with several threads each
peer line must be one thread's, or, where QEMU gave a finished thread's vCPU
index to a later one, the fold of those threads one after the other
(fold(A||B) = fold(A) * K^|B| + fold(B)). forkexec: only the parent's line,
the last written, is compared; the forked child's continues the parent's fold
(see peer.h). Run from anywhere:

  bench/peers/check.py --qemu-dir ~/.cache/sluice/qemu-<hash> \\
      --peers BUILD/bench/peers --guests BUILD/tests/e2e \\
      [--reftrace BUILD/tests/e2e/libreftrace.so] [--arch A]... [--guest G]...
"""
import argparse
import collections
import itertools
import os
import subprocess
import sys
import tempfile

K = 0x100000001B3
MASK = (1 << 64) - 1
ARCHES = ["x86_64", "aarch64", "riscv64", "mipsel"]
GUESTS = [("loops", []), ("memops", []), ("segv", []), ("smc", []), ("exitcode", ["3"]),
          ("exitcode", ["segv"]), ("exitcode", ["abort"]), ("threads", []), ("forkexec", [])]
PEERS = [("insn_cb", "consumer=off"), ("insn_cb", "consumer=on"), ("tb_exact", "consumer=off"),
         ("tb_exact", "consumer=on"), ("icount", None), ("mem", "consumer=off"),
         ("mem", "consumer=on")]


def fold_ref(path):
    """Per tid, in first-seen order: [pcs, pc_h, loads, stores, mem_h, mem_words]."""
    per = collections.OrderedDict()
    with open(path) as f:
        for line in f:
            tid, kind, rest = line.split(" ", 2)
            t = per.setdefault(tid, [0, 0, 0, 0, 0, 0])
            if kind == "EXEC":
                t[0] += 1
                t[1] = (t[1] * K + int(rest, 16)) & MASK
                continue
            store = kind.startswith("WRITE")
            size = int(kind[5:] if store else kind[4:])
            fields = dict(kv.split("=") for kv in rest.split()[1:])
            words = [int(fields["addr"], 16)]
            if ":" in fields["val"]:
                hi, lo = fields["val"].split(":")
                words += [int(lo, 16), int(hi, 16)]
            else:
                words.append(int(fields["val"], 16))
            words.append(size | store << 8)
            for w in words:
                t[4] = (t[4] * K + w) & MASK
            t[5] += len(words)
            t[3 if store else 2] += 1
    return per


def parse_peer(path):
    """The peer's lines, in order, as dicts of their key=value fields."""
    rows = []
    with open(path) as f:
        for line in f:
            kv = dict(x.split("=") for x in line.split()[1:])
            rows.append({k: (int(v, 0)) for k, v in kv.items()})
    return rows


def run(cmd):
    r = subprocess.run(cmd, env={}, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, timeout=600)
    return r.returncode, r.stderr.decode(errors="replace")


def compose(seqs):
    """h of the sequences (length, h) folded one after the other."""
    h = 0
    for n, sh in seqs:
        h = (h * pow(K, n, 1 << 64) + sh) & MASK
    return h


def explain(row, refs):
    """Indices of the threads in refs that, folded in some order, make the peer's row; or None.

    row and refs are (length, h, counts): the length of the folded sequence, its h, and
    what the line counts (a tuple); row's length may be None (not reported)."""
    for r in range(1, min(len(refs), 4) + 1):
        for idx in itertools.permutations(range(len(refs)), r):
            sel = [refs[i] for i in idx]
            counts = tuple(map(sum, zip(*(x[2] for x in sel))))
            if counts == row[2] and compose((x[0], x[1]) for x in sel) == row[1] and \
                    row[0] in (None, sum(x[0] for x in sel)):
                return idx
    return None


def compare(name, guest, ref, rows):
    """Returns a one-line problem, or None."""
    if guest == "forkexec":
        rows = rows[-1:]  # the parent's, written after the child's
        ref = collections.OrderedDict(list(ref.items())[:1])  # the parent's tid, first seen
    if name in ("insn_cb", "tb_exact"):
        refs = [(t[0], t[1], (t[0],)) for t in ref.values()]
        got = [(r["n"], r["h"], (r["n"],)) for r in rows]
    elif name == "icount":  # no h: any threads whose counts add up
        refs = [(0, 0, (t[0],)) for t in ref.values()]
        got = [(None, 0, (r["n"],)) for r in rows]
    else:
        refs = [(t[5], t[4], (t[2], t[3])) for t in ref.values()]
        got = [(None, r["h"], (r["loads"], r["stores"])) for r in rows]
    left = list(refs)
    for row in got:
        idx = explain(row, left)
        if idx is None:
            return "reference %s, peer %s" % (refs, got)
        left = [x for i, x in enumerate(left) if i not in idx]
    if left:
        return "threads with no peer line: %s" % left
    return None


def check(args, tmp, arch, guest, gargs):
    prog = os.path.join(args.guests, "%s-%s" % (guest, arch))
    qemu = os.path.join(args.qemu_dir, "bin", "qemu-" + arch)
    where = "%s/%s" % (" ".join([guest] + gargs), arch)
    ok = True
    for name, opt in PEERS:
        ref_out = os.path.join(tmp, "ref.txt")
        peer_out = os.path.join(tmp, "peer.txt")
        for p in (ref_out, peer_out):
            if os.path.exists(p):
                os.unlink(p)
        popt = "%s/lib%s.so,out=%s" % (args.peers, name, peer_out) + ("," + opt if opt else "")
        cmd = [qemu, "-plugin", "%s,out=%s,mode=dump" % (args.reftrace, ref_out), "-plugin",
               popt, prog] + gargs
        rc, err = run(cmd)
        dies = gargs in (["segv"], ["abort"])  # exitcode's fatal signals
        if (rc < 0) != dies or not os.path.exists(peer_out):
            print("%s: %s %s: qemu exit %d: %s" % (where, name, opt or "", rc, err.strip()))
            ok = False
            continue
        problem = compare(name, guest, fold_ref(ref_out), parse_peer(peer_out))
        if name == "mem" and problem is None and guest != "threads":
            # loads and stores against mode=count, in a run of its own
            os.unlink(ref_out)
            cmd[2] = "%s,out=%s,mode=count" % (args.reftrace, ref_out)
            run(cmd)
            with open(ref_out) as f:
                cnt = [dict(kv.split("=") for kv in l.split()[2:]) for l in f]
            rows = parse_peer(peer_out)
            if guest == "forkexec":
                cnt, rows = cnt[-1:], rows[-1:]
            want = sorted((int(c["loads"]), int(c["stores"])) for c in cnt)
            got = sorted((r["loads"], r["stores"]) for r in rows)
            if want != got:
                problem = "mode=count %s, peer %s" % (want, got)
        if problem:
            print("%s: %s %s: FAILED: %s" % (where, name, opt or "", problem))
            ok = False
    if ok:
        print("%s: ok" % where)
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--qemu-dir", required=True)
    ap.add_argument("--peers", required=True, help="the directory holding lib<peer>.so")
    ap.add_argument("--guests", required=True, help="the e2e build directory (guest programs)")
    ap.add_argument("--reftrace", help="default: GUESTS/libreftrace.so")
    ap.add_argument("--arch", action="append")
    ap.add_argument("--guest", action="append")
    args = ap.parse_args()
    args.reftrace = args.reftrace or os.path.join(args.guests, "libreftrace.so")
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        for arch in args.arch or ARCHES:
            for guest, gargs in GUESTS:
                if args.guest and guest not in args.guest:
                    continue
                if not check(args, tmp, arch, guest, gargs):
                    failed.append("%s/%s" % ("-".join([guest] + gargs), arch))
    print("FAILED: " + " ".join(failed) if failed else "all ok")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
