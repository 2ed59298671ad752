#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""symbols: `sluice run --tool dump` for people against binutils.

Every distinct pc of a traced program is checked against what binutils says
of the same file at the same place (the file offset the dump's own mapping
lines give, turned into a link-time address with readelf's PT_LOADs):

  symbol       `module!symbol+0xoff`: nm (the file's .symtab and .dynsym, and
               the separate debug file libdw would find by build id) lists a
               code symbol of that name at address - off, and off is inside it
               when it has a size; where nm has a sized code symbol holding the
               address, the dump names one; `module!0xaddr` only where nm has
               none, with addr the link-time address
  line         `(file:line)` (--lines) equals addr2line -e FILE ADDR (file's last
               component and line), and is present exactly where addr2line
               knows the line (programs built with -g)
  targets      a direct branch's `<symbol+0xoff>` names a code symbol nm lists at
               the target's link-time address less off
  disassembly  mnemonic and operands equal objdump -d's (x86_64: -M intel),
               once both are written the same way (case, spaces, '$' and '#',
               numbers as values, a branch target as objdump's link-time
               address or the run-time one); riscv64 has none (capstone 4)
  syscalls     (run --syscalls) the names of the SYSCALL lines are, in order, the
               names QEMU's own -strace (QEMU_STRACE=1, the same QEMU process)
               prints, where it knows one

A library renamed over by another after the guest mapped it and before its
code ran (the `replaced` guest), or rewritten in place with its modification
time set back (`inplace`), is named as path@offset, with one line saying so,
never with the other file's symbols. A file loaded by two hard links in turn
(`linked`) is named by each name for the code loaded by it.

Capstone is not linked but loaded on the first disassembly (`no_capstone`:
readelf -d shows no NEEDED of it); where it cannot be loaded, `report`'s dump
says so in one line and equals its --no-disasm dump.

A size-0 symbol names only code of its own section (readelf -S): the PLT stubs
after `_init` (size 0, in .init) have no symbol, as objdump's table has none.

Programs: each architecture's static `loops` guest (built with -g), the host's
sha256sum (a PIE with ld.so and libc), the dynamic aarch64 `exitcode` guest (a
PIE with debug info and a PLT, run on the cross libc), and Debian's static busybox for arm64
and mipsel (stripped: no symbols; tests/e2e/fetch-busybox.sh puts it in the
cache) running its sha256sum.

  symbols.py --sluice build/consumer/sluice --guests build/tests/e2e [--arch A]...
"""

import argparse
import collections
import filecmp
import os
import re
import shutil
import subprocess
import tempfile

import common

EXEC_RE = re.compile(r"^(\d+) 0x([0-9a-f]+) (\S+)(?: \(([^()]*):(\d+)\))?(?:  (.*))?$")
MAP_RE = re.compile(r"^\d+ (?:MAPPED|MMAP) 0x([0-9a-f]+) len=0x([0-9a-f]+) prot=\S+ "
                    r"off=0x([0-9a-f]+) base=0x[0-9a-f]+ (.*)$")
CODE_TYPES = set("TtWwi")


def read_dump(path):
    """{(path, file offset): {"pc": a run-time pc, "where": ..., "line": ..., "insn": ...}}
    for every distinct instruction of a file the dump shows, placed by its mapping lines."""
    maps, insns, other = [], {}, collections.Counter()
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            m = MAP_RE.match(line)
            if m:
                maps.insert(0, (int(m.group(1), 16), int(m.group(2), 16), int(m.group(3), 16),
                                m.group(4)))
                continue
            m = EXEC_RE.match(line)
            if not m:
                continue
            pc = int(m.group(2), 16)
            hit = next((x for x in maps if x[0] <= pc < x[0] + x[1]), None)
            if not hit or hit[3] == "[anon]":
                other[m.group(3)] += 1
                continue
            key = (hit[3], hit[2] + pc - hit[0])
            rec = {"pc": pc, "where": m.group(3), "file": m.group(4),
                   "line": int(m.group(5)) if m.group(5) else None, "insn": m.group(6)}
            old = insns.setdefault(key, rec)
            if old["where"] != rec["where"] or old["line"] != rec["line"] or \
                    (old["pc"] == pc and old["insn"] != rec["insn"]):
                common.fail("%s: %s@0x%x described two ways: %r, %r" % (path, key[0], key[1],
                                                                        old, rec))
    return insns, other


def link_address(loads, off):
    """The link-time address of file offset off (readelf's PT_LOADs), or None."""
    for vaddr, memsz, offset, _ in loads:
        if offset <= off < offset + memsz:
            return vaddr + off - offset
    return None


def debug_file(arch, path):
    """The separate debug file of `path` by build id, as /usr/lib/debug holds it, or None."""
    out = subprocess.run([common.BINUTILS[arch] + "readelf", "-n", path], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True).stdout
    m = re.search(r"Build ID: ([0-9a-f]{2})([0-9a-f]+)", out)
    if not m:
        return None
    dbg = "/usr/lib/debug/.build-id/%s/%s.debug" % (m.group(1), m.group(2))
    return dbg if os.path.exists(dbg) else None


def code_symbols(arch, path):
    """[(address, size, name)] of the code symbols nm lists in path and its debug file."""
    syms = set()
    files = [path] + [d for d in [debug_file(arch, path)] if d]
    for f in files:
        for dyn in ([], ["-D"]):
            out = subprocess.run([common.BINUTILS[arch] + "nm", "-S", "--defined-only"] + dyn
                                 + [f], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                 text=True).stdout
            for line in out.splitlines():
                parts = line.split()
                if len(parts) == 4 and parts[2] in CODE_TYPES:
                    found = (int(parts[0], 16), int(parts[1], 16), parts[3])
                elif len(parts) == 3 and parts[1] in CODE_TYPES:
                    found = (int(parts[0], 16), 0, parts[2])
                else:
                    continue
                syms.add(found)
                if dyn:
                    # nm -D adds .gnu.version's name (`@@GLIBC_PRIVATE`); .dynsym's own
                    # name, which libdw gives where no .symtab spells it, has none.
                    syms.add(found[:2] + (found[2].split("@", 1)[0],))
    return syms


def sections(arch, path):
    """[(start, end)] of path's allocated sections at their link-time addresses, as readelf
    says."""
    out = subprocess.run([common.BINUTILS[arch] + "readelf", "-SW", path], stdout=subprocess.PIPE,
                         check=True, text=True).stdout
    secs = []
    for m in re.finditer(r"^\s*\[\s*\d+\]\s+\S+\s+\S+\s+([0-9a-f]+) [0-9a-f]+ ([0-9a-f]+) "
                         r"[0-9a-f]+\s+(\S*A\S*)\s", out, re.M):
        start = int(m.group(1), 16)
        if start:
            secs.append((start, start + int(m.group(2), 16)))
    return secs


def check_symbols(path, insns, arch, problems):
    """The where column of every instruction of file `path` against nm."""
    loads = common.elf_loads(arch, path)
    secs = sections(arch, path)
    syms = code_symbols(arch, path)
    by_name = collections.defaultdict(set)
    for addr, size, name in syms:
        by_name[name].add((addr, size))
    sized = sorted((a, s) for a, s, _ in syms if s)
    base = os.path.basename(path)
    named = 0
    for off, rec in sorted(insns.items()):
        addr = link_address(loads, off)
        where = rec["where"]
        holders = [a for a, s in sized if a <= addr < a + s] if addr is not None else []
        m = re.match(r"^(.*)!(.*)\+0x([0-9a-f]+)$", where)
        if not where.startswith(base + "!"):
            problems.append("%s@0x%x: %r does not name the module %s" % (path, off, where, base))
        elif m:
            named += 1
            sym, delta = m.group(2), int(m.group(3), 16)
            ok = [(a, s) for a, s in by_name.get(sym, ()) if a == addr - delta and
                  (s == 0 or delta < s)]
            if not ok or (holders and not any(s for _, s in ok)):
                problems.append("%s@0x%x (address 0x%x): dump says %s; nm has %s there" % (
                    path, off, addr, where, [n for a, s, n in syms if a <= addr < a + max(s, 1)]
                    or "no symbol holding it"))
            elif not any(s for _, s in ok) and any(lo <= addr - delta < hi and not lo <= addr < hi
                                                   for lo, hi in secs):
                problems.append("%s@0x%x (address 0x%x): dump says %s, a size-0 symbol of "
                                "another section (readelf -S)" % (path, off, addr, where))
        elif where != "%s!0x%x" % (base, addr) or holders:
            problems.append("%s@0x%x (address 0x%x): dump says %s; nm: %s" % (
                path, off, addr, where,
                ["%s" % n for a, s, n in syms if a <= addr < a + s] or "no symbol"))
    return named


def check_lines(arch, path, insns, problems):
    """(file:line) of every instruction of `path` against addr2line, both ways."""
    loads = common.elf_loads(arch, path)
    offs = sorted(insns)
    addrs = ["0x%x" % link_address(loads, off) for off in offs]
    out = subprocess.run([common.BINUTILS[arch] + "addr2line", "-e", path], input="\n".join(addrs),
                         stdout=subprocess.PIPE, text=True, check=True).stdout.splitlines()
    with_line = 0
    for off, addr, ref in zip(offs, addrs, out):
        rec = insns[off]
        m = re.match(r"^(.*):(\d+)(?: \(discriminator \d+\))?$", ref)
        want = (os.path.basename(m.group(1)), int(m.group(2))) if m and m.group(2) != "0" \
            and m.group(1) != "??" else None
        got = (os.path.basename(rec["file"]), rec["line"]) if rec["line"] is not None else None
        with_line += got is not None
        if got != want:
            problems.append("%s %s: dump says %s, addr2line %r" % (path, addr, got, ref))
    return with_line


# --- disassembly ------------------------------------------------------------------

def objdump_text(arch, path):
    """{link-time address: (its bytes or word as objdump prints them, "mnemonic operands")}
    of objdump -d (x86_64: Intel syntax)."""
    opts = ["-M", "intel"] if arch == "x86_64" else []
    out = subprocess.run([common.BINUTILS[arch] + "objdump", "-d", "-w"] + opts + [path],
                         stdout=subprocess.PIPE, check=True, text=True).stdout
    insns = {}
    for line in out.splitlines():
        m = re.match(r"^\s*([0-9a-f]+):\t((?:[0-9a-f]{2} ?)+)\s*\t(.*)$", line) if \
            arch == "x86_64" else re.match(r"^\s*([0-9a-f]+):\t([0-9a-f ]+)\t(.*)$", line)
        if m:
            insns[int(m.group(1), 16)] = (m.group(2).strip(), m.group(3))
    return insns


MASK = (1 << 64) - 1
# x86 prefixes objdump prints and capstone leaves out; those both print.
PREFIXES = ("addr32 ", "data16 ", "notrack ", "bnd ")
MNEMONIC_PREFIXES = {"lock", "rep", "repz", "repnz", "repe", "repne"}
SIZES = {"byte", "word", "dword", "qword", "tbyte", "xmmword", "ymmword", "zmmword"}
# objdump's names of an instruction capstone calls otherwise (66 90, a two-byte nop)
ALIASES = {"xchg ax,ax": "nop"}


def aarch64_aliases(text):
    """capstone 4's names of aarch64 instructions objdump writes by their preferred alias (Arm
    ARM: MOV (wide immediate), MOV (inverted wide immediate), MOV (bitmask immediate), BTI;
    HS is CS, LO is CC)."""
    m = re.match(r"^movz ([wx])(\d+|zr|sp), #(0x[0-9a-f]+|\d+)(?:, lsl #(\d+))?$", text)
    if m and (int(m.group(3), 0) or not m.group(4)):  # movz x4, #0, lsl #16 stays
        return "mov %s%s, #0x%x" % (m.group(1), m.group(2), int(m.group(3), 0) <<
                                    int(m.group(4) or 0))
    m = re.match(r"^movn ([wx])(\d+|zr), #(0x[0-9a-f]+|\d+)(?:, lsl #(\d+))?$", text)
    if m:
        mask = 0xffffffff if m.group(1) == "w" else MASK
        return "mov %s%s, #0x%x" % (m.group(1), m.group(2),
                                    ~(int(m.group(3), 0) << int(m.group(4) or 0)) & mask)
    text = re.sub(r"^orr ([wx]\d+), [wx]zr, #", r"mov \1, #", text)
    text = {"hint #0x22": "bti c", "hint #0x24": "bti j", "hint #0x26": "bti jc",
            "hint #0x20": "bti"}.get(text, text)
    return re.sub(r"\bhs\b", "cs", re.sub(r"\blo\b", "cc", text))


def mips_aliases(text):
    """capstone 4's $fp is objdump's s8 (register 30); its "($s0)" is "0($s0)"; its
    `addiu rt, $zero, imm` is objdump's li, its rotr (MIPS32r2) objdump's ror."""
    text = re.sub(r"(^|[ ,])\(", r"\g<1>0(", text.replace("$fp", "$s8"))
    return re.sub(r"^rotr ", "ror ", re.sub(r"^addiu (\$\w+), \$zero, ", r"li \1, ", text))


OUR_ALIASES = {"aarch64": aarch64_aliases, "mipsel": mips_aliases}


def tokens(text, arch, theirs):
    """A disassembly as comparable tokens: lowercase, without comments, symbol names,
    brackets, '$' and '#'; a number with the sign before it as a value mod 2^64 (objdump's
    bare numbers read as hex: same_insn also tries them as decimal)."""
    text = text.split("#", 1)[0] if arch == "x86_64" else text.split("//", 1)[0]
    text = re.sub(r"<[^>]*>", "", re.sub(r"\b([0-9a-f]+) <", r"0x\1 <", text)).lower()
    if not theirs and arch in OUR_ALIASES:
        text = OUR_ALIASES[arch](text)
    for junk in ("$", "#", "[", "]"):
        text = text.replace(junk, " ")
    text = text.strip()
    if theirs:
        text = re.sub(r"\*1\b", "", re.sub(r"\+0x0\b", "", text))
        while text.startswith(PREFIXES):
            text = text.split(" ", 1)[1].strip()
        text = ALIASES.get(re.sub(r"\s+", " ", text), text)
    else:  # string instructions: objdump gives the size by the operand alone
        text = re.sub(r"^((?:rep[a-z]* )?(?:stos|movs|lods|scas|cmps))[bwdq] ", r"\1 ", text)
    if arch == "x86_64":  # segment overrides that change nothing in 64-bit mode
        text = re.sub(r"\b[cdes]s:|^[cd]s ", " ", text).strip()
    words = text.split()
    mnem = []
    while words and (not mnem or mnem[-1] in MNEMONIC_PREFIXES):
        mnem.append(words.pop(0))
    ops = " ".join(words)
    out = [" ".join(mnem)]
    for tok in re.findall(r"0x[0-9a-f]+|\d[0-9a-f]*|[a-z_.][a-z0-9_.]*|\S", ops):
        if tok[0].isdigit():
            v = int(tok, 16) if tok.startswith("0x") or theirs else int(tok)
            sign = out.pop() if out[-1] in ("+", "-") else "+"
            out.append(("n", (-v if sign == "-" else v) & MASK, sign, tok))
        elif tok == "ptr" and out[-1] not in SIZES:
            continue  # capstone's "xsave ptr [rsp]": a size it does not name
        else:
            out.append(tok)
    if out[0] == "xchg":  # either order
        out = out[:1] + sorted(out[1:], key=str)
    return out


def same_insn(ours, theirs, arch, bias):
    """Whether the dump's instruction text is objdump's; the dump's numbers may be run-time
    addresses (bias from objdump's) or a number objdump writes in decimal."""
    a, b = tokens(ours, arch, False), tokens(theirs, arch, True)
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if isinstance(x, tuple) != isinstance(y, tuple):
            return False
        if not isinstance(x, tuple):
            if x != y:
                return False
            continue
        alts = {y[1], (y[1] + bias) & MASK}
        if y[3].isdigit():  # objdump's bare digits: decimal or hex, as it is
            alts.add((int(y[3]) if y[2] == "+" else -int(y[3])) & MASK)
        if not alts & {x[1], x[1] & 0xffffffff, x[1] & 0xffff, x[1] & 0xff}:
            return False
    return True


def check_disasm(arch, path, insns, problems):
    loads = common.elf_loads(arch, path)
    ref = objdump_text(arch, path)
    n = undecoded = 0
    for off, rec in sorted(insns.items()):
        addr = link_address(loads, off)
        if arch == "riscv64":
            if rec["insn"]:
                problems.append("%s 0x%x: a riscv64 disassembly %r (capstone 4 has none)"
                                % (path, addr, rec["insn"]))
            continue
        n += 1
        word, want = ref.get(addr, (None, None))
        m = re.match(r"^\.inst 0x([0-9a-f]{8}) \(not decoded\)$", rec["insn"] or "")
        if m and m.group(1) == word:
            undecoded += 1  # newer than capstone 4 (SVE, LSE atomics): its word, as objdump's
        elif want is None or not rec["insn"] or not same_insn(rec["insn"], want, arch,
                                                               rec["pc"] - addr):
            problems.append("%s 0x%x: dump %r, objdump %r" % (path, addr, rec["insn"], want))
    return n, undecoded


def check_targets(arch, path, insns, problems):
    """A direct branch's `<symbol+0xoff>` (a target in the same file) names a code symbol nm
    lists at the target's link-time address less off, inside its size."""
    loads = common.elf_loads(arch, path)
    by_name = collections.defaultdict(set)
    for a, size, name in code_symbols(arch, path):
        by_name[name].add((a, size))
    n = 0
    for off, rec in sorted(insns.items()):
        m = re.search(r"(0x[0-9a-f]+) <([^!<>]+)\+0x([0-9a-f]+)>$", rec["insn"] or "")
        if not m:
            continue
        n += 1
        target = int(m.group(1), 16) - (rec["pc"] - link_address(loads, off))  # link-time
        sym, delta = m.group(2), int(m.group(3), 16)
        if not any(a == target - delta and (s == 0 or delta < s) for a, s in by_name.get(sym, ())):
            problems.append("%s@0x%x: branch target %s: nm has no %s holding 0x%x"
                            % (path, off, m.group(0), sym, target))
    return n


def check_syscall_names(args, arch, tmp, argv, problems):
    """The SYSCALL lines' names of a --syscalls dump against QEMU's -strace of the same run."""
    name = "%s %s" % (os.path.basename(argv[0]), arch)
    out = os.path.join(tmp, "syscalls-%s-%s.dump" % (os.path.basename(argv[0]), arch))
    rc, _, err = common.run([args.sluice, "run", "--syscalls", "--tool", "dump", "--no-disasm",
                             "-o", out, "--"] + argv, extra_env={"QEMU_STRACE": "1"})
    if rc != 0:
        common.fail("syscalls %s: sluice exit %d: %s" % (name, rc, err[-400:]))
    ref = []
    for line in (err.decode(errors="replace") if isinstance(err, bytes) else err).splitlines():
        m = re.match(r"^\d+ (?:(\w+)\(|Unknown syscall (\d+))", line)
        if m:
            ref.append(m.group(1))  # None: QEMU has no name for it
    got = []
    with open(out) as f:
        for line in f:
            m = re.match(r"^\d+ SYSCALL (\w+)\(", line)
            if m:
                got.append(m.group(1))
    bad = [(i, g, r) for i, (g, r) in enumerate(zip(got, ref)) if r and g != r]
    # A guest that closes stderr (sha256sum does, at its end) ends QEMU's -strace there.
    cut = ref and ref[-1] == "close" and len(got) > len(ref)
    if (len(got) != len(ref) and not cut) or bad or not got:
        problems.append("syscalls %s: %d in the dump, %d in QEMU's -strace; differences "
                        "(index, dump, strace): %s" % (name, len(got), len(ref), bad[:5]))
    print("syscalls %s: %d names (%d distinct), as QEMU's -strace (%d it has no name for)"
          % (name, len(got), len(set(got)), ref.count(None)))


def trace(args, arch, tmp, name, prog, pargs, extra=(), env=None):
    out = os.path.join(tmp, name + ".dump")
    rc, _, err = common.run([args.sluice, "run", "--tool", "dump", "--lines"] + list(extra)
                            + ["-o", out, "--", prog] + list(pargs), extra_env=env)
    if rc != 0:
        common.fail("%s: sluice exit %d: %s" % (name, rc, err[-400:]))
    return read_dump(out)


def check_program(args, arch, tmp, name, prog, pargs, lines_of=(), env=None):
    """Trace prog; check every file it ran code from. Returns the problems."""
    insns, other = trace(args, arch, tmp, name, prog, pargs, env=env)
    files = collections.defaultdict(dict)
    for (path, off), rec in insns.items():
        files[path][off] = rec
    problems = []
    for path, recs in sorted(files.items()):
        named = check_symbols(path, recs, arch, problems)
        dis, undecoded = check_disasm(arch, path, recs, problems)
        targets = check_targets(arch, path, recs, problems)
        lines = check_lines(arch, path, recs, problems) if path in lines_of else None
        print("%s: %s: %d distinct pcs, %d with a symbol, %d disassembled (%d not decoded, %d "
              "branch targets named)%s" % (name, path, len(recs), named, dis, undecoded, targets,
            ", %d with a line" % lines if lines is not None else ""))
        if path in lines_of and not (named and lines):
            problems.append("%s: %s has symbols and DWARF, but the dump names %d pcs and gives "
                            "%d lines" % (name, path, named, lines))
    if other:
        print("%s: pcs in no file: %s" % (name, dict(other)))
    return problems


def check_replaced(args, tmp, problems):
    """The replaced guest: its library is renamed over by another before its code runs. The
    dump must not name that code with the other file's symbols (zz_*, at those offsets):
    it says, once, that the file is not the one the trace ran, and shows the code as
    path@offset. (It named it zz_scale+0x.. and said nothing.)"""
    lib = os.path.join(tmp, "libx.so")
    out = os.path.join(tmp, "replaced.dump")
    rc, stdout, err = common.run(
        [args.sluice, "run", "--tool", "dump", "-o", out, "--",
         os.path.join(args.guests, "replaced-x86_64"),
         os.path.join(args.guests, "replaced-first.so"),
         os.path.join(args.guests, "replaced-second.so"), lib])
    err = err.decode(errors="replace")
    if rc != 0 or stdout != b"sum 328350\n":
        problems.append("replaced: sluice exit %d, stdout %r: %s" % (rc, stdout, err[-300:]))
        return
    with open(out, errors="replace") as f:
        code = [l for l in f if re.match(r"^\d+ 0x[0-9a-f]+ libx\.so[!@]", l)]
    wrong = [l for l in code if "libx.so!zz_" in l]
    said = [l for l in err.splitlines() if lib in l and "not the file the trace ran (replaced" in l]
    shown = [l for l in code if " libx.so@0x" in l]
    print("replaced: %d instructions of libx.so, %d shown as path@offset, %d named with the "
          "other file's symbols; said: %s" % (len(code), len(shown), len(wrong), said))
    if not code or wrong or len(said) != 1 or len(shown) != len(code):
        problems.append("replaced: %d lines of libx.so's code, %d named with the replacing "
                        "file's symbols (%r), %d shown as path@offset; stderr %r: want every "
                        "line as path@offset and one line saying the file was replaced"
                        % (len(code), len(wrong), wrong[:2], len(shown), err[-300:]))


def check_twice(args, tmp, problems):
    """The replaced guest with `twice`: libx.so holds FIRST, whose replaced_sum runs, is
    unloaded, then SECOND is renamed over it, loaded and its replaced_sum runs. Live and
    from a recording, each line of libx.so's code must be replaced_sum+off within its size
    (the same code in both files) or path@offset; never the other file's symbols (the
    symbolizer kept one file per path: FIRST's code with SECOND's zz_* names, or SECOND's
    with names past FIRST's end)."""
    first = os.path.join(args.guests, "replaced-first.so")
    nm = subprocess.run(["nm", "-S", "--defined-only", first], capture_output=True, text=True)
    size = [int(f[1], 16) for f in (l.split() for l in nm.stdout.splitlines())
            if len(f) == 4 and f[3] == "replaced_sum"]
    if not size:
        problems.append("twice: no replaced_sum in nm -S of %s" % first)
        return
    for how in ("live", "recorded"):
        lib = os.path.join(tmp, "libx-%s.so" % how)
        out = os.path.join(tmp, "twice-%s.dump" % how)
        trace = os.path.join(tmp, "twice.sltr")
        guest = [os.path.join(args.guests, "replaced-x86_64"), first,
                 os.path.join(args.guests, "replaced-second.so"), lib, "twice"]
        opts = ["--tool", "dump", "-o", out] if how == "live" else \
            ["--record", common.fresh(trace), "-o", os.devnull]
        rc, stdout, err = common.run([args.sluice, "run"] + opts + ["--"] + guest)
        err = err.decode(errors="replace")
        if rc == 0 and how == "recorded":
            rc, _, more = common.run([args.sluice, "report", trace, "--tool", "dump", "-o", out])
            err += more.decode(errors="replace")
        if rc != 0 or stdout != b"sum 328350\nsum 328350\n":
            problems.append("twice %s: sluice exit %d, stdout %r: %s" % (how, rc, stdout,
                                                                          err[-300:]))
            continue
        name = re.escape(os.path.basename(lib))
        with open(out, errors="replace") as f:
            code = [m.group(1) for m in (re.match(r"^\d+ 0x[0-9a-f]+ %s([!@]\S+)" % name, l)
                                         for l in f) if m]
        named = [c for c in code if c.startswith("!")]
        right = [c for c in named
                 if re.fullmatch(r"!replaced_sum\+0x([0-9a-f]+)", c)
                 and int(c.split("+")[1], 16) < size[0]]
        print("twice %s: %d instructions of %s, %d named (%d as replaced_sum within its size), "
              "%d as path@offset" % (how, len(code), lib, len(named), len(right),
                                     len(code) - len(named)))
        if len(code) < 2 * 100 or len(right) != len(named):
            wrong = sorted(set(named) - set(right))
            problems.append("twice %s: %d lines of the two files' code, %d named with the other "
                            "file's symbols (%r): want replaced_sum+off or path@offset" % (
                                how, len(code), len(named) - len(right), wrong[:4]))


def check_twice_cov(args, tmp, problems):
    """The replaced guest with `twice`, live `--tool cov`: drcov names modules by path, so both
    files' blocks go under the one path; that must be said on stderr (it was not)."""
    lib = os.path.join(tmp, "libx-cov.so")
    rc, stdout, err = common.run(
        [args.sluice, "run", "--tool", "cov", "-o", os.path.join(tmp, "twice.drcov"), "--",
         os.path.join(args.guests, "replaced-x86_64"),
         os.path.join(args.guests, "replaced-first.so"),
         os.path.join(args.guests, "replaced-second.so"), lib, "twice"])
    err = err.decode(errors="replace")
    said = [l for l in err.splitlines() if lib in l and "held two different files" in l]
    print("twice cov: exit %d, said: %s" % (rc, said))
    if rc != 0 or len(said) != 1:
        problems.append("twice cov: exit %d, stderr %r: want one line saying %s held two files"
                        % (rc, err[-300:], lib))


def run_replaced(args, out, lib, mode, extra=()):
    """`sluice run --tool dump [extra] -o out -- replaced FIRST SECOND lib mode`: (exit,
    stdout, stderr as text)."""
    guest = [os.path.join(args.guests, f)
             for f in ("replaced-x86_64", "replaced-first.so", "replaced-second.so")]
    rc, stdout, err = common.run([args.sluice, "run", "--tool", "dump"] + list(extra) +
                                 ["-o", out, "--"] + guest + [lib, mode])
    return rc, stdout, err.decode(errors="replace")


def check_inplace(args, tmp, problems):
    """The replaced guest with `inplace`: the library it loaded is rewritten in place before its
    code runs, its modification time set back (same inode, size and time: `cp -p` into the same
    file). A live dump must say it is not the file the trace ran and show its code as
    path@offset (it named it from the rewritten file, in silence)."""
    lib = os.path.join(tmp, "libx-inplace.so")
    out = os.path.join(tmp, "inplace.dump")
    rc, stdout, err = run_replaced(args, out, lib, "inplace")
    said = [l for l in err.splitlines() if lib in l and "not the file the trace ran" in l]
    name = re.escape(os.path.basename(lib))
    with open(out, errors="replace") as f:
        code = [m.group(1) for m in (re.match(r"^\d+ 0x[0-9a-f]+ %s([!@]\S+)" % name, l)
                                     for l in f) if m]
    named = [c for c in code if c.startswith("!")]
    print("inplace: exit %d, %d instructions of %s, %d named; said: %s"
          % (rc, len(code), lib, len(named), said))
    if rc != 0 or stdout != b"sum 328350\n" or len(said) != 1 or not code or named:
        problems.append("inplace: exit %d, stdout %r, %d lines of the rewritten file's code, %d "
                        "named (%r), stderr %r: want one line saying it is not the file the "
                        "trace ran, and path@offset" % (rc, stdout, len(code), len(named),
                                                       sorted(set(named))[:3], err[-300:]))


def check_linked(args, tmp, problems):
    """The replaced guest with `linked`: a library loaded, run and unloaded, then loaded by a
    hard link's name and run again. Each run's code is named by the name it was loaded by
    (the second was named by the first: the jitter kept an inode's first path)."""
    lib = os.path.join(tmp, "libx-linked.so")
    out = os.path.join(tmp, "linked.dump")
    rc, stdout, err = run_replaced(args, out, lib, "linked", ["--no-disasm"])
    with open(out, errors="replace") as f:
        names = [m.group(1) for m in (re.match(r"^\d+ 0x[0-9a-f]+ (\S+)!replaced_sum\+0x0$", l)
                                      for l in f) if m]
    want = ["libx-linked.so", "libx-linked.so.2.so"]
    print("linked: exit %d, replaced_sum entered as %s" % (rc, names))
    if rc != 0 or names != want:
        problems.append("linked: exit %d (%r), replaced_sum entered as %s: want %s"
                        % (rc, err[-300:], names, want))


def check_unlinked(args, tmp, problems):
    """The replaced guest with `unlinked`: FIRST is loaded from libx.so, which is unlinked
    before its code runs, recorded (with a live dump beside, as slow as an analyst's, so the
    recorder often finds the file gone); SECOND is put at the path after the run. The report
    must not name FIRST's code from SECOND: with nothing recorded of the path, it named it
    zz_* (about 3 runs in 4), silently."""
    lib = os.path.join(tmp, "libx-unlinked.so")
    trace = common.fresh(os.path.join(tmp, "unlinked.sltr"))
    out = os.path.join(tmp, "unlinked.dump")
    rc, stdout, err = common.run(
        [args.sluice, "run", "--record", trace, "--tool", "dump", "-o", os.devnull, "--",
         os.path.join(args.guests, "replaced-x86_64"),
         os.path.join(args.guests, "replaced-first.so"),
         os.path.join(args.guests, "replaced-second.so"), lib, "unlinked"])
    if rc != 0 or stdout != b"sum 328350\n":
        problems.append("unlinked: sluice exit %d, stdout %r: %r" % (rc, stdout, err[-300:]))
        return
    shutil.copy(os.path.join(args.guests, "replaced-second.so"), lib)
    rc, _, err = common.run([args.sluice, "report", trace, "--tool", "dump", "-o", out])
    name = re.escape(os.path.basename(lib))
    with open(out, errors="replace") as f:
        code = [m.group(1) for m in (re.match(r"^\d+ 0x[0-9a-f]+ %s([!@]\S+)" % name, l)
                                     for l in f) if m]
    named = [c for c in code if c.startswith("!")]
    print("unlinked: %d instructions of %s reported, %d named" % (len(code), lib, len(named)))
    if rc != 0 or not code or named:
        problems.append("unlinked: report exit %d, %d lines of the unlinked file's code, %d named "
                        "from the file put there after the run (%r): want path@offset"
                        % (rc, len(code), len(named), sorted(set(named))[:3]))


def check_no_capstone(args, tmp, problems):
    """Capstone is loaded when dump first disassembles, not linked (its relocations were most of
    sluice's own start). `sluice` must not name it as NEEDED (readelf); and where it cannot be
    loaded (an empty file by its soname first in LD_LIBRARY_PATH, for `report` only: QEMU links
    it too), dump says so in one line and gives what `--no-disasm` gives, exit 0."""
    rc, dyn, _ = common.run(["readelf", "-d", args.sluice])
    needed = re.findall(rb"\(NEEDED\)\s+Shared library: \[(libcapstone[^]]*)\]", dyn)
    if rc != 0 or needed:
        problems.append("no_capstone: readelf -d %s exit %d: it needs %r" % (args.sluice, rc, needed))
    trace = common.fresh(os.path.join(tmp, "nocs.sltr"))
    prog = os.path.abspath(os.path.join(args.guests, "loops-x86_64"))
    rc, _, err = common.run([args.sluice, "run", "--record", trace, "--tool", "stats", "-o",
                             os.devnull, "--", prog])
    if rc != 0:
        problems.append("no_capstone: recording exit %d: %r" % (rc, err[-300:]))
        return
    lib = os.path.join(tmp, "nocs")
    os.makedirs(lib, exist_ok=True)
    for major in (4, 5, 6):  # (whichever the headers were of: an empty file for each)
        open(os.path.join(lib, "libcapstone.so.%d" % major), "wb").close()
    got, want = os.path.join(tmp, "nocs.dump"), os.path.join(tmp, "nocs-want.dump")
    rc, _, err = common.run([args.sluice, "report", trace, "--tool", "dump", "-o", got],
                            extra_env={"LD_LIBRARY_PATH": lib})
    rc2, _, err2 = common.run([args.sluice, "report", trace, "--tool", "dump", "--no-disasm",
                               "-o", want])
    said = err.decode(errors="replace").splitlines()
    same = rc2 == 0 and os.path.exists(got) and filecmp.cmp(got, want, shallow=False)
    print("no_capstone: NEEDED %r; report exit %d, said %r, the dump %s --no-disasm's"
          % (needed, rc, said, "is" if same else "is not"))
    if rc != 0 or len(said) != 1 or "libcapstone.so." not in said[0] or \
            "cannot be loaded" not in said[0] or not same:
        problems.append("no_capstone: report without capstone exit %d, stderr %r, dump %s "
                        "--no-disasm's (exit %d, %r): want exit 0, one line naming it, the same"
                        % (rc, said, "is" if same else "is not", rc2, err2[-200:]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sluice", required=True)
    ap.add_argument("--guests", required=True)
    ap.add_argument("--arch", action="append")
    args = ap.parse_args()
    problems = []
    with tempfile.TemporaryDirectory(prefix="sluice-symbols-") as tmp:
        for arch in args.arch or common.ARCHES:
            prog = os.path.abspath(os.path.join(args.guests, "loops-" + arch))
            problems += check_program(args, arch, tmp, "loops-" + arch, prog, [],
                                      lines_of=[prog])
            check_syscall_names(args, arch, tmp, [prog], problems)
        data = os.path.join(tmp, "input")
        with open(data, "wb") as f:
            f.write(bytes(range(256)) * 64)
        if not args.arch or "x86_64" in args.arch:
            problems += check_program(args, "x86_64", tmp, "sha256sum",
                                      "/usr/bin/sha256sum", [data])
            check_syscall_names(args, "x86_64", tmp, ["/usr/bin/sha256sum", data], problems)
        if not args.arch or "x86_64" in args.arch:
            check_replaced(args, tmp, problems)
            check_twice(args, tmp, problems)
            check_twice_cov(args, tmp, problems)
            check_inplace(args, tmp, problems)
            check_linked(args, tmp, problems)
            check_unlinked(args, tmp, problems)
            check_no_capstone(args, tmp, problems)
        if not args.arch or "aarch64" in args.arch:
            # A PIE with debug info and a PLT: its stubs follow .init's size-0 _init.
            dyn = os.path.abspath(os.path.join(args.guests, "exitcode-dynamic-aarch64"))
            problems += check_program(args, "aarch64", tmp, "exitcode-dynamic-aarch64", dyn,
                                      ["0"], lines_of=[dyn],
                                      env={"QEMU_LD_PREFIX": "/usr/aarch64-linux-gnu"})
        cache = os.path.join(os.environ.get("SLUICE_CACHE",
                                            os.path.expanduser("~/.cache/sluice")), "busybox")
        for deb, arch in (("arm64", "aarch64"), ("mipsel", "mipsel")):
            if not args.arch or arch in args.arch:
                bb = common.need_file(os.path.join(cache, deb, "bin", "busybox"),
                                      "busybox for %s (run tests/e2e/fetch-busybox.sh)" % deb)
                problems += check_program(args, arch, tmp, "busybox-" + deb, bb,
                                          ["sha256sum", data])
                check_syscall_names(args, arch, tmp, [bb, "sha256sum", data], problems)
    for p in problems[:20]:
        print("FAIL " + p)
    if problems:
        common.fail("%d differences from binutils" % len(problems))
    print("ok: symbols, lines and disassembly agree with binutils")


if __name__ == "__main__":
    main()
