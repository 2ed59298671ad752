#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The pc checksum ("pcsum") of the worst-case guests, computed from binutils only.

The bench folds the sequence of guest pcs a thread executes, p_0 .. p_{n-1},
into an order-sensitive checksum:

    h = 0;  for each pc:  h = (h * K + pc) mod 2^64,   K = 0x100000001b3

It composes: fold(A || B) = fold(A) * K^|B| + fold(B). So ITERS passes over a
loop body are one affine map applied ITERS times, computed here by squaring
(log2(ITERS) steps, not 500 M), and the expected (n, h) of a guest follows
from its layout alone, read with the objdump and nm of its architecture:

    [_start, loop)      once
    [loop, loop_end)    ITERS times (on mips loop_end is after the delay slot)
    [loop_end, done)    once; done is right after the exit syscall

ITERS is the absolute symbol `iterations` that the guest carries
(bench/guests/nops-<arch>.S: `.set iterations, ITERS`), so nothing but the
binary is needed. A missing label, or a layout other than the above, is an
error that names the guest and the label.

    pcsum.py expect GUEST          n=<n> h=0x<016x>
    pcsum.py fold [FILE]           tid=<t> n=<n> h=0x<016x>, per thread, of the
                                   `<tid> EXEC 0x<pc>` lines of a dump (sluice
                                   --tool dump, or the reference plugin's
                                   mode=dump); other lines are ignored
    pcsum.py selftest GUEST DUMP   the dump's checksum equals expect, and a copy
                                   with one EXEC line dropped, and one with two
                                   adjacent distinct EXEC lines swapped, do not;
                                   one line per case, exit status 1 if any fails

Python 3.11, standard library only.
"""

import argparse
import re
import subprocess
import sys

K = 0x100000001B3
MASK = (1 << 64) - 1

# e_machine -> binutils prefix of the architecture's objdump and nm.
BINUTILS = {
    62: "",                        # EM_X86_64
    183: "aarch64-linux-gnu-",     # EM_AARCH64
    243: "riscv64-linux-gnu-",     # EM_RISCV
    8: "mipsel-linux-gnu-",        # EM_MIPS
}
SYSCALLS = {"syscall", "svc", "ecall"}
LABELS = ("_start", "loop", "loop_end", "done")


class PcsumError(Exception):
    """A guest the checker cannot read; the message is one line naming it."""


# --- the checksum ------------------------------------------------------------

def fold(pcs, h=0):
    """The checksum of the pcs, continuing from state h (0: the empty sequence)."""
    for pc in pcs:
        h = (h * K + pc) & MASK
    return h


def compose(h_a, h_b, n_b):
    """fold(A || B) from h_a = fold(A), h_b = fold(B) and n_b = |B|."""
    return (h_a * pow(K, n_b, 1 << 64) + h_b) & MASK


def repeat(h_body, n_body, times):
    """(n, h) of a body of n_body pcs with checksum h_body, executed `times` times.

    Binary powering over concatenation: (bn, bh) is the body repeated 2^i
    times; all pieces are copies of one body, so the order they are joined
    in does not matter.
    """
    n, h = 0, 0
    bn, bh = n_body, h_body
    while times:
        if times & 1:
            h = compose(h, bh, bn)
            n += bn
        bh = compose(bh, bh, bn)
        bn *= 2
        times >>= 1
    return n, h


# --- the guest's layout ------------------------------------------------------

def binutils_prefix(guest):
    """The binutils prefix for the guest's architecture, from its ELF e_machine."""
    try:
        with open(guest, "rb") as f:
            ident = f.read(20)
    except OSError as e:
        raise PcsumError("%s: %s" % (guest, e.strerror))
    if len(ident) < 20 or ident[:4] != b"\x7fELF":
        raise PcsumError("%s: not an ELF file" % guest)
    machine = int.from_bytes(ident[18:20], "little" if ident[5] == 1 else "big")
    if machine not in BINUTILS:
        raise PcsumError("%s: e_machine %d is none of x86_64, aarch64, riscv64, mips"
                         % (guest, machine))
    return BINUTILS[machine]


def tool(guest, cmd):
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except OSError as e:
        raise PcsumError("%s: cannot run %s: %s" % (guest, cmd[0], e.strerror))
    if p.returncode != 0:
        err = p.stderr.strip().splitlines()
        raise PcsumError("%s: %s failed: %s" % (guest, cmd[0], err[0] if err else p.returncode))
    return p.stdout


def symbols(guest, prefix):
    """{name: value} of the guest's symbols, from nm."""
    syms = {}
    for line in tool(guest, [prefix + "nm", guest]).splitlines():
        f = line.split()
        if len(f) == 3:
            syms[f[2]] = int(f[0], 16)
    return syms


# "  401000:\tb9 10 27 00 00       \tmov    $0x2710,%ecx"
INSN = re.compile(r"^\s*([0-9a-f]+):\t([0-9a-f ]+?)\s*(?:\t(.*))?$")


def instructions(guest, prefix):
    """[(address, size, text)] of the guest's code, in address order, from objdump.

    -z shows blocks of zero bytes (mips' nop is the word 0), and a wide
    --insn-width keeps each x86 instruction's bytes on one line, so the size
    is the count of its bytes.
    """
    out = tool(guest, [prefix + "objdump", "-d", "-z", "--insn-width=16", guest])
    insns = []
    for line in out.splitlines():
        m = INSN.match(line)
        if m:
            size = sum(len(t) // 2 for t in m.group(2).split())
            insns.append((int(m.group(1), 16), size, (m.group(3) or "").strip()))
    return insns


def layout(guest):
    """The three parts of the guest's pc sequence and ITERS: (pre, body, post, iters)."""
    prefix = binutils_prefix(guest)
    syms = symbols(guest, prefix)
    for name in LABELS + ("iterations",):
        if name not in syms:
            raise PcsumError("%s: no symbol %s" % (guest, name))
    for a, b in zip(LABELS, LABELS[1:]):
        if not syms[a] < syms[b]:
            raise PcsumError("%s: label %s (0x%x) is not after %s (0x%x)"
                             % (guest, b, syms[b], a, syms[a]))
    insns = instructions(guest, prefix)
    index = {addr: i for i, (addr, _, _) in enumerate(insns)}
    for name in LABELS[:3]:
        if syms[name] not in index:
            raise PcsumError("%s: label %s (0x%x) is not at an instruction"
                             % (guest, name, syms[name]))
    first = index[syms["_start"]]
    last = first
    while last < len(insns) and insns[last][0] < syms["done"]:
        if last > first and insns[last - 1][0] + insns[last - 1][1] != insns[last][0]:
            raise PcsumError("%s: a gap in the code before 0x%x, between _start and done"
                             % (guest, insns[last][0]))
        last += 1
    code = insns[first:last]
    end = code[-1][0] + code[-1][1]
    if end != syms["done"]:
        raise PcsumError("%s: label done (0x%x) is not right after an instruction (0x%x)"
                         % (guest, syms["done"], end))
    if (code[-1][2].split() or [""])[0] not in SYSCALLS:
        raise PcsumError("%s: label done is not right after a syscall instruction (%r)"
                         % (guest, code[-1][2]))
    pcs = [addr for addr, _, _ in code]
    pre = [pc for pc in pcs if pc < syms["loop"]]
    body = [pc for pc in pcs if syms["loop"] <= pc < syms["loop_end"]]
    post = [pc for pc in pcs if syms["loop_end"] <= pc]
    # The branch back to loop: the body's last instruction, or on mips the
    # one before its delay slot.
    branch = code[len(pre) + len(body) - (2 if prefix.startswith("mips") else 1)]
    if "<loop>" not in branch[2]:
        raise PcsumError("%s: label loop_end does not follow the branch back to loop "
                         "(0x%x: %s)" % (guest, branch[0], branch[2]))
    iters = syms["iterations"]
    if iters < 1:
        raise PcsumError("%s: symbol iterations is %d, not >= 1" % (guest, iters))
    return pre, body, post, iters


def expected(guest):
    """(n, h) that a trace of the guest must fold to (ITERS from its `iterations`)."""
    pre, body, post, iters = layout(guest)
    n_loop, h_loop = repeat(fold(body), len(body), iters)
    h = compose(fold(pre), h_loop, n_loop)
    h = compose(h, fold(post), len(post))
    return len(pre) + n_loop + len(post), h


# --- dumps -------------------------------------------------------------------

def exec_line(line):
    """(tid, pc) of a `<tid> EXEC 0x<pc>` line, or None for any other line."""
    f = line.split()
    if len(f) != 3 or f[1] != "EXEC" or not f[0].isdigit() or not f[2].startswith("0x"):
        return None
    return int(f[0]), int(f[2], 16)


def fold_dump(lines):
    """{tid: (n, h)} of the `<tid> EXEC 0x<pc>` lines; other lines are ignored."""
    state = {}
    for line in lines:
        ev = exec_line(line)
        if ev:
            n, h = state.get(ev[0], (0, 0))
            state[ev[0]] = (n + 1, (h * K + ev[1]) & MASK)
    return state


def fmt(n, h):
    return "n=%d h=0x%016x" % (n, h)


def selftest(guest, lines):
    """Checks the order check on a dump of a one-thread guest; returns True if all pass.

    The dump must fold to expected(guest); with its middle EXEC line dropped,
    and with its middle pair of adjacent distinct EXEC lines swapped, the
    checksum h itself must differ (n alone would catch the drop, not test h).
    """
    want = expected(guest)
    got = fold_dump(lines)
    ok = True

    def report(passed, msg):
        nonlocal ok
        ok = ok and passed
        print("%s %s" % ("ok  " if passed else "FAIL", msg))

    if len(got) != 1:
        report(False, "dump: %d threads with EXEC lines, not 1" % len(got))
        return False
    (tid, dump), = got.items()
    report(dump == want, "dump folds to expect: tid=%d %s, expect %s"
           % (tid, fmt(*dump), fmt(*want)))
    execs = [i for i, ln in enumerate(lines) if exec_line(ln)]
    if len(execs) < 2:
        report(False, "dump: fewer than 2 EXEC lines, nothing to drop or swap")
        return False
    mid = execs[len(execs) // 2]
    dropped = lines[:mid] + lines[mid + 1:]
    d = fold_dump(dropped).get(tid, (0, 0))
    report(d[1] != want[1], "line %d dropped: %s, differs from expect" % (mid + 1, fmt(*d)))
    pairs = [(a, b) for a, b in zip(execs, execs[1:]) if exec_line(lines[a]) != exec_line(lines[b])]
    if not pairs:
        report(False, "dump: no two adjacent EXEC lines with distinct pcs to swap")
        return False
    a, b = pairs[len(pairs) // 2]
    swapped = list(lines)
    swapped[a], swapped[b] = lines[b], lines[a]
    s = fold_dump(swapped).get(tid, (0, 0))
    report(s[1] != want[1], "lines %d and %d swapped: %s, differs from expect"
           % (a + 1, b + 1, fmt(*s)))
    return ok


def main():
    ap = argparse.ArgumentParser(description="The pc checksum of the bench's worst-case guests.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("expect", help="the (n, h) a trace of GUEST must fold to")
    p.add_argument("guest")
    p = sub.add_parser("fold", help="(n, h) per thread of a dump (default: stdin)")
    p.add_argument("file", nargs="?")
    p = sub.add_parser("selftest", help="check the order check on a dump of GUEST")
    p.add_argument("guest")
    p.add_argument("dump")
    args = ap.parse_args()
    try:
        if args.cmd == "expect":
            print(fmt(*expected(args.guest)))
        elif args.cmd == "fold":
            f = open(args.file, errors="replace") if args.file else sys.stdin
            with f:
                for tid, (n, h) in fold_dump(f).items():
                    print("tid=%d %s" % (tid, fmt(n, h)))
        else:
            with open(args.dump, errors="replace") as f:
                lines = f.read().splitlines()
            return 0 if selftest(args.guest, lines) else 1
    except PcsumError as e:
        print("pcsum: %s" % e, file=sys.stderr)
        return 1
    except OSError as e:
        print("pcsum: %s: %s" % (e.filename, e.strerror), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
