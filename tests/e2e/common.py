# SPDX-License-Identifier: GPL-2.0-or-later
"""Shared helpers of the e2e tests: find QEMU and sluice, run a guest under
sluice, under the reference plugin (tests/plugin/reftrace.c) or untraced,
read ELF headers and symbols, and compare two dump traces.

Why the comparison is not a plain diff: the reference and sluice runs are two
different QEMU processes. Thread ids differ (and the guest stores them: glibc
keeps its tid, fork returns the child's pid), and on 64-bit guests QEMU places
the guest stack and other anonymous mappings where the host's mmap puts them,
which depends on the host process's own layout (sluice's jitter and rings vs.
the plugin and glib). So `TraceMatcher` accepts exactly these differences and
no others: a tid where the other run has the corresponding tid, and addresses
that differ by a consistent page mapping learned from the accesses themselves
(same offset in the page, one-to-one), plus pointers stored into memory that
follow the same mapping (glibc's x86_64/aarch64 pointer mangling of saved
stack pointers included). Everything else must be byte-identical.
"""

import os
import struct
import subprocess
import sys

ARCHES = ["x86_64", "aarch64", "riscv64", "mipsel"]
ELF_MACHINES = {62: "x86_64", 183: "aarch64", 243: "riscv64", 8: "mipsel"}


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def qemu_dir():
    """The patched QEMU's directory from SLUICE_QEMU_DIR; fails (not skips) without it."""
    d = os.environ.get("SLUICE_QEMU_DIR", "")
    if not d:
        fail("SLUICE_QEMU_DIR is not set: these tests need the patched QEMU "
             "(qemu-patch/build-qemu.sh builds it; pass -Dqemu_dir=DIR to meson)")
    missing = [a for a in ARCHES if not os.access(os.path.join(d, "bin", "qemu-" + a), os.X_OK)]
    if missing:
        fail("SLUICE_QEMU_DIR=%s has no bin/qemu-%s" % (d, ", bin/qemu-".join(missing)))
    return d


def qemu_bin(arch):
    return os.path.join(qemu_dir(), "bin", "qemu-" + arch)


def need_file(path, what):
    if not os.path.exists(path):
        fail("%s not found at %s" % (what, path))
    return path


def guest_env(sluice=False):
    """The environment of a run; the guest sees the same one in every run.

    QEMU_RAND_SEED makes AT_RANDOM (stack canary, pointer guard) the same in
    every run. SLUICE_QEMU_DIR goes to sluice only: sluice's QEMU hides
    SLUICE_* variables from the guest (qemu-patch 0004), so giving it to the
    other runs would change the guest's environment, hence its stack.
    """
    env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C", "QEMU_RAND_SEED": "1"}
    for k in ("HOME", "XDG_RUNTIME_DIR", "TMPDIR") + (("SLUICE_QEMU_DIR",) if sluice else ()):
        if k in os.environ:
            env[k] = os.environ[k]
    return env


def run(cmd, timeout=600, stdin=None):
    """Runs cmd; returns (returncode, stdout bytes, stderr bytes)."""
    try:
        p = subprocess.run(cmd, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           env=guest_env(sluice=cmd[1:2] == ["run"]), timeout=timeout)
    except subprocess.TimeoutExpired:
        fail("timed out after %ds: %s" % (timeout, " ".join(cmd)))
    return p.returncode, p.stdout, p.stderr


def cmd_plain(arch, prog, args):
    return [qemu_bin(arch), prog] + list(args)


def cmd_ref(arch, plugin, out, prog, args, mode="dump"):
    return [qemu_bin(arch), "-plugin", "%s,out=%s,mode=%s" % (plugin, out, mode), prog] + list(args)


def cmd_sluice(sluice, tool, out, prog, args, extra=()):
    return [sluice, "run", "--tool", tool] + list(extra) + ["-o", out, "--", prog] + list(args)


def fresh(path):
    if os.path.exists(path):
        os.unlink(path)
    return path


# --- ELF -------------------------------------------------------------------

def elf_machine(path):
    """QEMU arch name of an ELF executable, or None."""
    with open(path, "rb") as f:
        h = f.read(20)
    if len(h) < 20 or h[:4] != b"\x7fELF" or h[5] != 1:
        return None
    return ELF_MACHINES.get(struct.unpack_from("<H", h, 18)[0])


def elf_functions(path):
    """{name: (start, end)} of the FUNC symbols of a little-endian ELF file."""
    with open(path, "rb") as f:
        data = f.read()
    is64 = data[4] == 2
    if is64:
        shoff, = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", data, 0x3a)
    else:
        shoff, = struct.unpack_from("<I", data, 0x20)
        shentsize, shnum = struct.unpack_from("<HH", data, 0x2e)
    sections = []
    for i in range(shnum):
        o = shoff + i * shentsize
        if is64:
            _, typ, _, _, off, size, link, _, _, entsize = struct.unpack_from("<IIQQQQIIQQ", data, o)
        else:
            _, typ, _, _, off, size, link, _, _, entsize = struct.unpack_from("<IIIIIIIIII", data, o)
        sections.append((typ, off, size, link, entsize))
    funcs = {}
    for typ, off, size, link, entsize in sections:
        if typ != 2:  # SHT_SYMTAB
            continue
        stroff = sections[link][1]
        for o in range(off, off + size, entsize):
            if is64:
                name, info, _, _, value, sz = struct.unpack_from("<IBBHQQ", data, o)
            else:
                name, value, sz, info, _, _ = struct.unpack_from("<IIIBBH", data, o)
            if info & 0xf != 2 or sz == 0:  # STT_FUNC
                continue
            end = data.index(b"\0", stroff + name)
            funcs[data[stroff + name:end].decode()] = (value, value + sz)
    return funcs


# --- traces ----------------------------------------------------------------

def read_trace(path):
    """Reads a dump. Returns (tids in order of first appearance, {tid: [event]}, lost).

    An event is the line without its tid prefix.
    """
    order, threads, lost = [], {}, 0
    with open(path, "r", errors="replace") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            tid, _, ev = line.partition(" ")
            if not tid.isdigit() or not ev:
                fail("%s:%d: not a dump line: %r" % (path, n, line))
            if ev.startswith("LOST "):
                lost += int(ev[5:])
            if tid not in threads:
                threads[tid] = []
                order.append(tid)
            threads[tid].append(ev)
    return order, threads, lost


def parse_event(ev):
    """'READ4 0x10 addr=0x20 val=0x5' -> ('READ4', '0x10', addr int or None, [val ints])."""
    parts = ev.split(" ")
    if len(parts) == 2:
        return parts[0], parts[1], None, []
    if len(parts) != 4 or not parts[2].startswith("addr=") or not parts[3].startswith("val="):
        return None
    try:
        addr = int(parts[2][5:], 16)
        vals = [v if v == "*" else int(v, 16) for v in parts[3][4:].split(":")]
    except ValueError:
        return None
    return parts[0], parts[1], addr, vals


PAGE = 4096
ADDR_MIN = 1 << 20  # smaller values are never taken for pointers
NEAR = 16 << 20  # a pointer may follow a learned page mapping this far from it


def ror(x, n, bits=64):
    mask = (1 << bits) - 1
    return ((x >> n) | (x << (bits - n))) & mask


class TraceMatcher:
    """Compares events of two runs of the same program, see the module comment."""

    def __init__(self, tid_map):
        self.tid_map = dict(tid_map)  # expected tid (int) -> actual tid (int)
        self.fwd = {}  # expected page -> actual page
        self.back = {}
        self.mangled = 0

    def _map_addr(self, e, a):
        if e % PAGE != a % PAGE:
            return False
        pe, pa = e // PAGE, a // PAGE
        if self.fwd.get(pe, pa) != pa or self.back.get(pa, pe) != pe:
            return False
        self.fwd[pe], self.back[pa] = pa, pe
        return True

    def _follows_mapping(self, e, a):
        if e % PAGE != a % PAGE:
            return False
        pe, pa = e // PAGE, a // PAGE
        if pe in self.fwd:
            return self.fwd[pe] == pa
        return any(abs(p - pe) * PAGE <= NEAR and q - p == pa - pe for p, q in self.fwd.items())

    def _mangled(self, e, a):
        # glibc PTR_MANGLE: x86_64 rol(p ^ guard, 17), aarch64 p ^ guard; the
        # guard is the same in both runs, so ror(e ^ a) = p_e ^ p_a.
        x = e ^ a
        for r in (17, 0):
            y = ror(x, r)
            if y % PAGE == 0 and any((p ^ q) == y // PAGE for p, q in self.fwd.items() if p != q):
                self.mangled += 1
                return True
        return False

    def _val_ok(self, e, a):
        if e == a or self.tid_map.get(e) == a:
            return True
        if isinstance(e, str) or isinstance(a, str):
            return False
        for sh in (0, 32):  # a tid stored with its neighbour (aarch64 stp w1, w0)
            rest = ~(0xffffffff << sh)
            if e & rest == a & rest and self.tid_map.get((e >> sh) & 0xffffffff) == (a >> sh) & 0xffffffff:
                return True
        if self._follows_mapping(e, a) or self._mangled(e, a):
            return True
        # a pointer into a mapping not accessed yet (auxv's vdso address...)
        return e >= ADDR_MIN and a >= ADDR_MIN and self._map_addr(e, a)

    def same(self, ee, ae):
        if ee == ae:
            return True
        pe, pa = parse_event(ee), parse_event(ae)
        if not pe or not pa or pe[0] != pa[0] or pe[1] != pa[1] or len(pe[3]) != len(pa[3]):
            return False
        if pe[2] is None or not self._map_addr(pe[2], pa[2]):
            return False
        return all(self._val_ok(x, y) for x, y in zip(pe[3], pa[3]))


def first_difference(matcher, exp, act):
    """Index of the first event where two sequences differ, or None."""
    for i, (e, a) in enumerate(zip(exp, act)):
        if not matcher.same(e, a):
            return i
    if len(exp) != len(act):
        return min(len(exp), len(act))
    return None


def show_difference(title, exp, act, i, context=5):
    """Prints the first difference of two event sequences with context."""
    print("%s: first difference at event %d (expected %d events, got %d)"
          % (title, i, len(exp), len(act)))
    lo = max(0, i - context)
    for j in range(lo, min(max(len(exp), len(act)), i + context + 1)):
        e = exp[j] if j < len(exp) else "<end>"
        a = act[j] if j < len(act) else "<end>"
        mark = ">>" if j == i else "  "
        print("%s %7d  ref:    %s" % (mark, j, e))
        if e != a:
            print("%s %7d  sluice: %s" % (mark, j, a))
