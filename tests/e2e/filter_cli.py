#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""filter_cli: `sluice run --filter` as a user meets it.

Filters written here as C and given to sluice as .c files (so sluice
compiles them with clang), run on the x86_64 loops guest:

  printk   bpf_trace_printk from hook_inst for the first three instructions
           lifted: exactly three `PRINTK lift 0x<pc>` lines in the dump, in
           band, before the exec records of those pcs
  fault    hook_inst reads past its context: every run faults, so every
           instruction is traced (the exact reference exec trace), and stderr
           reports the first fault once (guest pc, "insn N") and the count
  broken   a C syntax error: exit 2 before the guest starts, clang's message shown
  unknown  --set of a name the filter does not have: exit 2, one line naming it
  twice    one name --set twice: exit 2 (the last one won, silently)
  clobber  --record naming the filter's source: exit 2 (-o naming it replaced it by the
           tool's output, exit 0)

  filter_cli.py --sluice build/consumer/sluice --plugin build/tests/e2e/libreftrace.so
                --guests build/tests/e2e
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import common

HEAD = """#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <sluice/filter.h>
char LICENSE[] SEC("license") = "GPL";
"""

SOURCES = {
    "printk": HEAD + """
__u32 lifted;
SEC("sluice/inst") int hook_inst(struct sluice_inst_ctx *ctx)
{
    if (lifted++ < 3)
        bpf_printk("lift %llx", ctx->pc);
    return SLUICE_ALWAYS;
}
""",
    "fault": HEAD + """
SEC("sluice/inst") int hook_inst(struct sluice_inst_ctx *ctx)
{
    return *(volatile __u32 *)((char *)ctx + 4096) ? SLUICE_NEVER : SLUICE_NEVER;
}
""",
    "broken": HEAD + """
SEC("sluice/inst") int hook_inst(struct sluice_inst_ctx *ctx)
{
    return SLUICE_ALWAYS   /* missing semicolon */
}
""",
    "unknown": HEAD + """
const volatile __u64 lo;
SEC("sluice/inst") int hook_inst(struct sluice_inst_ctx *ctx)
{
    return ctx->pc >= lo;
}
""",
}


def sluice(args, tmp, name, extra=()):
    os.makedirs(tmp, exist_ok=True)
    src = os.path.join(tmp, name + ".c")
    with open(src, "w") as f:
        f.write(SOURCES[name])
    prog = common.need_file(os.path.join(args.guests, "loops-x86_64"), "guest loops-x86_64")
    ref = common.fresh(os.path.join(tmp, name + ".ref"))
    act = common.fresh(os.path.join(tmp, name + ".act"))
    env = {"QEMU_PLUGIN": "%s,out=%s,mode=dump" % (args.plugin, ref)}
    rc, out, err = common.run(common.cmd_sluice(args.sluice, "dump", act, prog, [],
                                                extra=["--filter", src] + list(extra)),
                              extra_env=env)
    return rc, err.decode(errors="replace"), ref, act


def check_printk(args, tmp):
    rc, err, ref, act = sluice(args, tmp, "printk")
    if rc != 0:
        return ["exit %d, stderr %r" % (rc, err[-300:])]
    with open(act) as f:
        lines = [ln.split(" ", 1)[1].rstrip("\n") for ln in f]
    msgs = [(i, ln) for i, ln in enumerate(lines) if ln.startswith("PRINTK ")]
    execs = [ln for ln in lines if ln.startswith("EXEC ")]
    problems = []
    if len(msgs) != 3:
        problems.append("want 3 PRINTK lines, got %d: %r" % (len(msgs), msgs[:5]))
    for i, ln in msgs:
        m = re.fullmatch(r"PRINTK lift ([0-9a-f]+)", ln)
        if not m:
            problems.append("line %d: %r is not 'PRINTK lift <hex>'" % (i, ln))
            continue
        pc = "EXEC 0x" + m.group(1)
        if pc not in lines[i:]:
            problems.append("line %d: %s is never executed after its message" % (i, pc))
    _, rt, _ = common.read_trace(ref)
    want = [ev for evs in rt.values() for ev in evs if ev.startswith("EXEC ")]
    if execs != want:
        problems.append("exec records differ from the reference (%d vs %d)"
                        % (len(execs), len(want)))
    return problems


def check_fault(args, tmp):
    rc, err, ref, act = sluice(args, tmp, "fault")
    if rc != 0:
        return ["exit %d, stderr %r" % (rc, err[-300:])]
    problems = []
    first = [ln for ln in err.splitlines() if "hook_inst failed at guest pc" in ln]
    if len(first) != 1 or not re.search(r"insn \d+", first[0]):
        problems.append("want one first-fault line naming pc and insn, got %r" % first)
    total = re.findall(r"(\d+) hook_inst and 0 hook_mem runs failed", err)
    _, at, _ = common.read_trace(act)
    _, rt, _ = common.read_trace(ref)
    want = {t: [ev for ev in evs if ev.startswith("EXEC ")] for t, evs in rt.items()}
    if at != want:
        problems.append("the trace is not the reference's exec trace")
    lifted = len({ev for evs in want.values() for ev in evs})
    if len(total) != 1 or int(total[0]) < lifted:
        problems.append("want a fault count >= %d distinct pcs, got %r" % (lifted, total))
    return problems


def check_fault_odd_path(args, tmp):
    """The fault filter in a directory whose name holds a newline and a terminal escape: the
    jitter's lines naming it are one line each, those bytes as '?' (the first-fault line
    broke in three, the escape raw: hostile round 8)."""
    rc, err, _, _ = sluice(args, os.path.join(tmp, "n\nl\x1b[31m"), "fault")
    named = [ln for ln in err.splitlines() if "fault.c" in ln]
    if rc != 0 or "\x1b" in err or len(named) != 2 or \
            not all("n?l?[31m/fault.c" in ln for ln in named):
        return ["exit %d; want 2 lines naming n?l?[31m/fault.c, no escape: %r" % (rc, err[-400:])]
    return []


def check_usage(args, tmp, name, extra, pattern):
    rc, err, _, act = sluice(args, tmp, name, extra)
    problems = []
    if rc != 2 or os.path.exists(act):
        problems.append("want exit 2 before the guest starts, got exit %d" % rc)
    if not re.search(pattern, err, re.S):
        problems.append("stderr lacks %r: %r" % (pattern, err[-400:]))
    return problems


def check_fifo(args, tmp):
    """A FIFO given as the filter, source or object: refused at once, exit 2 (clang and the
    loader's open() waited on it forever)."""
    prog = common.need_file(os.path.join(args.guests, "loops-x86_64"), "guest loops-x86_64")
    problems = []
    for name in ("fifo.c", "fifo.bpf.o"):
        path = os.path.join(tmp, name)
        os.mkfifo(path)
        rc, _, err = common.run([args.sluice, "run", "--filter", path, "--", prog], timeout=30)
        err = err.decode(errors="replace")
        if rc != 2 or "%s: not a regular file" % path not in err:
            problems.append("%s: exit %d, stderr %r: want exit 2 and 'not a regular file'"
                            % (name, rc, err[-300:]))
    return problems


def check_swap(args, tmp):
    """The object sluice verified is the one QEMU loads: pcs.bpf.o is renamed over by
    mem_writes.bpf.o while QEMU's execve is held 1.5 s (strace's delay injection). QEMU
    loaded the swapped file, by path (a trace of stores where pcs were asked, exit 0)."""
    strace = shutil.which("strace")
    if not strace:
        print("swap: skipped: no strace")
        return []
    filters = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(args.sluice))),
                           "filters")
    obj, other = os.path.join(tmp, "swap.bpf.o"), os.path.join(tmp, "swap-other.bpf.o")
    shutil.copy(os.path.join(filters, "pcs.bpf.o"), obj)
    shutil.copy(os.path.join(filters, "mem_writes.bpf.o"), other)
    out = common.fresh(os.path.join(tmp, "swap.json"))
    env = common.guest_env(sluice=True)
    env["ASAN_OPTIONS"] = "detect_leaks=0"  # (LeakSanitizer cannot run under ptrace)
    if "SLUICE_JITTER" in os.environ:
        env["SLUICE_JITTER"] = os.environ["SLUICE_JITTER"]
    p = subprocess.Popen([strace, "-f", "-qq", "-o", os.devnull, "-e", "trace=execve", "-e",
                          "inject=execve:delay_enter=1500000:when=1", args.sluice, "run",
                          "--tool", "stats", "--json", "-o", out, "--filter", obj, "--",
                          os.path.join(args.guests, "loops-x86_64")],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    time.sleep(0.7)
    os.rename(other, obj)
    _, err = p.communicate(timeout=120)
    if not os.path.exists(out):
        return ["exit %d, no output: %r" % (p.returncode, err[-300:])]
    with open(out) as f:
        total = json.load(f)["total"]
    if total["insns"] == 0 or total["stores"] != 0:
        return ["QEMU ran another filter than the one sluice verified: %r" % total]
    return []


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sluice", required=True)
    ap.add_argument("--plugin", required=True)
    ap.add_argument("--guests", required=True)
    args = ap.parse_args()
    common.qemu_dir()
    checks = [
        ("printk", lambda tmp: check_printk(args, tmp)),
        ("fault", lambda tmp: check_fault(args, tmp)),
        ("fault, odd path", lambda tmp: check_fault_odd_path(args, tmp)),
        ("fifo", lambda tmp: check_fifo(args, tmp)),
        ("swap", lambda tmp: check_swap(args, tmp)),
        ("broken", lambda tmp: check_usage(args, tmp, "broken", [],
                                            r"broken\.c:\d+:\d+: error:.*broken\.c: \S*clang "
                                            r"exited with status 1")),
        # clang's message names the source by its path: a newline and an escape in it as '?'
        # (clang's output was passed on raw: hostile round 8).
        ("broken, odd path", lambda tmp: check_usage(
            args, os.path.join(tmp, "n\nl\x1b[31m"), "broken", [],
            r"^[^\n]*n\?l\?\[31m/broken\.c:\d+:\d+: error:(?!.*\x1b)")),
        ("unknown", lambda tmp: check_usage(args, tmp, "unknown", ["--set", "hi=1"],
                                             r"'hi'")),
        ("twice", lambda tmp: check_usage(args, tmp, "unknown", ["--set", "x=1", "--set", "x=2"],
                                           r"--set x given twice")),
        # The second --tool, --filter silently won; both are usage errors now.
        ("tool twice", lambda tmp: check_usage(args, tmp, "unknown", ["--tool", "stats"],
                                                r"--tool given twice \(the second: 'stats'\)")),
        ("filter twice", lambda tmp: check_usage(args, tmp, "unknown", ["--filter", "x.c"],
                                                  r"--filter given twice \(the second: 'x\.c'\)")),
        ("workers twice", lambda tmp: check_usage(args, tmp, "unknown", ["--workers", "1",
                                                                         "--workers", "2"],
                                                   r"--workers given twice")),
        # " 2" passed (strtol skips spaces) where "2 " did not: both refused now.
        ("workers space", lambda tmp: check_usage(args, tmp, "unknown", ["--workers", " 2"],
                                                   r"--workers wants a number from 1 to 1024, "
                                                   r"not ' 2'")),
        ("clobber", lambda tmp: check_usage(args, tmp, "unknown", ["--record", os.path.join(
            tmp, "unknown.c")], r"unknown\.c: is the filter")),
    ]
    failed = []
    with tempfile.TemporaryDirectory(prefix="sluice-filter-cli-") as tmp:
        for name, check in checks:
            problems = check(tmp)
            for p in problems:
                print("%s: %s" % (name, p))
            print("%s: %s" % (name, "FAILED" if problems else "ok"))
            sys.stdout.flush()
            if problems:
                failed.append(name)
    if failed:
        common.fail("filter_cli: failed: %s" % " ".join(failed))
    print("filter_cli: all as expected")


if __name__ == "__main__":
    main()
