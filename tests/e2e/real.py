#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""real: sluice's counts on real programs equal the reference plugin's.

Runs real programs on a few MB of generated input: the host's x86_64
sha256sum, gzip -9 -c and sort (dynamic; they run under qemu-x86_64 with the
host's libraries), and Debian's static busybox for arm64 and mipsel
(tests/e2e/fetch-busybox.sh puts it in the cache) doing the same three jobs.
For each it checks that the guest's stdout and exit status under
`sluice run --tool stats --json` are byte-identical to an untraced run, and
that sluice's instruction, load and store counts (in total and per thread,
as a multiset) equal those of the reference plugin in count mode, exactly,
with nothing lost. sort runs with --parallel=1 where it has the option: GNU
sort's worker threads race, and racing threads have no exact count to compare.

  real.py --sluice build/consumer/sluice --plugin build/tests/e2e/libreftrace.so
          [--self-check] [--size MB]

--self-check compares two reference runs instead (no sluice needed).
"""

import argparse
import json
import os
import random
import sys
import tempfile

import common


def make_input(path, size):
    rnd = random.Random(1234)
    words = ["".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rnd.randint(2, 9)))
             for _ in range(5000)]
    with open(path, "w") as f:
        n = 0
        while n < size:
            line = " ".join(rnd.choice(words) for _ in range(rnd.randint(1, 12))) + "\n"
            f.write(line)
            n += len(line)


def programs(inp):
    """(name, arch, argv) of each real program run."""
    cache = os.path.join(os.environ.get("SLUICE_CACHE", os.path.expanduser("~/.cache/sluice")),
                         "busybox")
    progs = [
        ("sha256sum", "x86_64", ["/usr/bin/sha256sum", inp]),
        ("gzip", "x86_64", ["/usr/bin/gzip", "-9", "-c", inp]),
        ("sort", "x86_64", ["/usr/bin/sort", "--parallel=1", inp]),
    ]
    for deb, arch in (("arm64", "aarch64"), ("mipsel", "mipsel")):
        bb = common.need_file(os.path.join(cache, deb, "bin", "busybox"),
                              "busybox for %s (run tests/e2e/fetch-busybox.sh)" % deb)
        progs += [
            ("busybox sha256sum", arch, [bb, "sha256sum", inp]),
            ("busybox gzip", arch, [bb, "gzip", "-9", "-c", inp]),
            ("busybox sort", arch, [bb, "sort", inp]),
        ]
    return progs


def ref_counts(path):
    """[(insns, loads, stores)] per thread from the plugin's count mode."""
    rows = []
    with open(path) as f:
        for line in f:
            kv = dict(p.split("=") for p in line.split()[2:])
            rows.append((int(kv["insns"]), int(kv["loads"]), int(kv["stores"])))
    return rows


def sluice_counts(path):
    """([(insns, loads, stores)] per thread, lost) from sluice's stats --json."""
    with open(path) as f:
        text = f.read()
    try:
        st = json.loads(text)
        rows = [(t["insns"], t["loads"], t["stores"]) for t in st["threads"]]
        total = st["total"]
        return rows, (total["insns"], total["loads"], total["stores"]), total.get("lost", 0)
    except (ValueError, KeyError, TypeError) as e:
        common.fail("sluice stats --json output is not as documented (%s): %r" % (e, text[:500]))


def check_one(args, tmp, name, arch, argv):
    where = "%s (%s)" % (name, arch)
    prog, pargs = argv[0], argv[1:]
    rc0, out0, _ = common.run(common.cmd_plain(arch, prog, pargs))
    ref = common.fresh(os.path.join(tmp, "ref.txt"))
    rc1, out1, _ = common.run(common.cmd_ref(arch, args.plugin, ref, prog, pargs, mode="count"))
    want = sorted(ref_counts(ref))
    act = common.fresh(os.path.join(tmp, "act.txt"))
    ok = True
    if args.self_check:
        rc2, out2, err2 = common.run(common.cmd_ref(arch, args.plugin, act, prog, pargs, mode="count"))
        got, lost = sorted(ref_counts(act)), 0
        total = tuple(map(sum, zip(*got)))
    else:
        rc2, out2, err2 = common.run(common.cmd_sluice(args.sluice, "stats", act, prog, pargs,
                                                       extra=["--json"]))
        if not os.path.exists(act):
            print("%s: sluice wrote no stats (exit %d, stderr %r)" % (where, rc2, err2[-500:]))
            return False
        got, total, lost = sluice_counts(act)
        got = sorted(got)
    for who, rc, out in (("reference", rc1, out1), ("sluice", rc2, out2)):
        if rc != rc0 or out != out0:
            print("%s: under %s: exit %d, %d stdout bytes; untraced: exit %d, %d bytes%s"
                  % (where, who, rc, len(out), rc0, len(out0),
                     "" if out == out0 else " (stdout differs)"))
            ok = False
    want_total = tuple(map(sum, zip(*want)))
    if lost:
        print("%s: sluice lost %d events" % (where, lost))
        ok = False
    if total != want_total or got != want:
        print("%s: counts differ (insns, loads, stores):\n  reference total %s threads %s\n"
              "  sluice    total %s threads %s" % (where, want_total, want, total, got))
        ok = False
    print("%s: %s (%d insns, %d loads, %d stores)"
          % (where, "ok" if ok else "FAILED", *(want_total or (0, 0, 0))))
    sys.stdout.flush()
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sluice")
    ap.add_argument("--plugin", required=True)
    ap.add_argument("--self-check", action="store_true")
    ap.add_argument("--size", type=float, default=3.0, help="input size in MB")
    args = ap.parse_args()
    common.qemu_dir()
    common.need_file(args.plugin, "reference plugin (configure meson with -Dqemu_dir)")
    if not args.self_check:
        common.need_file(args.sluice or "", "sluice")
    failed = []
    with tempfile.TemporaryDirectory(prefix="sluice-real-") as tmp:
        inp = os.path.join(tmp, "input.txt")
        make_input(inp, int(args.size * 1e6))
        progs = programs(inp)
        for name, arch, argv in progs:
            if not check_one(args, tmp, name, arch, argv):
                failed.append("%s/%s" % (name, arch))
    if failed:
        common.fail("real: %d of %d differ: %s" % (len(failed), len(progs), ", ".join(failed)))
    print("real: all counts equal")


if __name__ == "__main__":
    main()
