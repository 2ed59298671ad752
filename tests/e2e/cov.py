#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""cov: `sluice run --tool cov` against DynamoRIO's drcov format and references.

The drcov file is read by a parser written here from the published format
(`DRCOV VERSION: 2`, a text module table, `BB Table: N bbs`, then N packed
little-endian {u32 start from the module base; u16 size; u16 module id}),
sharing no code with sluice. Checks:

  static    each architecture's static `loops` guest, traced in full and with
            the shipped coverage filter: the bytes the file's blocks cover in
            the program equal the bytes of the instructions the reference
            plugin saw run (its EXEC pcs in plain QEMU, each instruction's
            length from binutils' objdump), and the program's module base is
            its first PT_LOAD's page (readelf)
  dynamic   the host's sha256sum (a PIE with shared libraries) with the
            coverage filter: its modules are the program, ld.so and libc; every
            block starts on an instruction of its module as objdump shows the
            file (offset from the base = address for a PIE or a library), lies in
            an executable PT_LOAD, and the blocks of a full trace cover the same
            bytes
  moved     a library loaded, unloaded and loaded again elsewhere (the `replaced`
            guest, `moved`): one module per load, each at the base the guest's
            dladdr gave, each with a block at replaced_sum (nm) from its base
            (the table gave the first load's base alone, so base + start missed
            where the second load's blocks ran)

  cov.py --sluice build/consumer/sluice --plugin build/tests/e2e/libreftrace.so
         --guests build/tests/e2e --filters build/filters [--arch A]...
"""

import argparse
import os
import re
import struct
import subprocess
import tempfile

import common


def read_drcov(path):
    """({id: (base, end, path)}, [(module id, start, size)]) of a drcov file, checked."""
    with open(path, "rb") as f:
        data = f.read()
    pos = 0

    def line():
        nonlocal pos
        end = data.index(b"\n", pos)
        text, pos = data[pos:end].decode(), end + 1
        return text

    if line() != "DRCOV VERSION: 2" or not line().startswith("DRCOV FLAVOR: "):
        common.fail("%s: not a drcov version 2 file" % path)
    m = re.match(r"Module Table: version 2, count (\d+)$", line())
    cols = [c.strip() for c in line().split(":", 1)[1].split(",")]
    if not m or cols[:3] != ["id", "base", "end"] or cols[-1] != "path":
        common.fail("%s: bad module table header" % path)
    mods = {}
    for _ in range(int(m.group(1))):
        rec = dict(zip(cols, (x.strip() for x in line().split(",", len(cols) - 1))))
        mods[int(rec["id"])] = (int(rec["base"], 16), int(rec["end"], 16), rec["path"])
    m = re.match(r"BB Table: (\d+) bbs$", line())
    n = int(m.group(1))
    if pos + 8 * n != len(data):
        common.fail("%s: %d bbs announced, %d bytes of them" % (path, n, len(data) - pos))
    bbs = [struct.unpack_from("<IHH", data, pos + 8 * k) for k in range(n)]
    for start, size, mod in bbs:
        if mod not in mods:
            common.fail("%s: a block names module %d, which the table lacks" % (path, mod))
    return mods, [(mod, start, size) for start, size, mod in bbs]


def covered(mods, bbs, path):
    """Bytes (offsets from the module base) the blocks of module `path` cover."""
    ids = [i for i, (_, _, p) in mods.items() if p == path]
    return {start + k for mod, start, size in bbs if mod in ids for k in range(size)}


def lengths(arch, prog):
    """{address: length} of every instruction objdump -d shows in prog."""
    return {pc: len(code) for pc, (code, _) in common.disassemble(arch, prog).items()}


def cov_run(args, tmp, name, prog, pargs, filt):
    out = os.path.join(tmp, name + ".drcov")
    extra = ["--filter", os.path.join(args.filters, "coverage.bpf.o")] if filt else []
    rc, _, err = common.run(common.cmd_sluice(args.sluice, "cov", out, prog, pargs, extra=extra))
    if rc != 0:
        common.fail("%s: sluice exited %d: %r" % (name, rc, err[-400:]))
    return read_drcov(out)


def check_static(args, tmp, arch, problems):
    prog = os.path.realpath(common.need_file(os.path.join(args.guests, "loops-" + arch),
                                             "guest loops-" + arch))
    ref = os.path.join(tmp, "loops-%s.ref" % arch)
    rc, _, err = common.run(common.cmd_ref(arch, args.plugin, ref, prog, []))
    if rc != 0:
        common.fail("%s: the reference run exited %d: %r" % (prog, rc, err[-300:]))
    lens = lengths(arch, prog)
    base = min(v for v, _, _, _ in common.elf_loads(arch, prog)) & ~0xfff
    want = set()
    with open(ref) as f:
        for m in re.finditer(r"^\d+ EXEC 0x([0-9a-f]+)$", f.read(), re.M):
            pc = int(m.group(1), 16)
            want.update(pc - base + k for k in range(lens.get(pc, 1)))
    os.unlink(ref)
    for filt in (False, True):
        what = "%s loops%s" % (arch, " coverage filter" if filt else "")
        mods, bbs = cov_run(args, tmp, "loops-%s-%d" % (arch, filt), prog, [], filt)
        got = covered(mods, bbs, prog)
        bases = [b for b, _, p in mods.values() if p == prog]
        if bases != [base]:
            problems.append("%s: the program's module base is %s, readelf's first LOAD page 0x%x"
                            % (what, [hex(b) for b in bases], base))
        if got != want:
            problems.append("%s: %d bytes covered that the reference did not run (e.g. %s), "
                            "%d it ran not covered (e.g. %s)"
                            % (what, len(got - want), [hex(base + o) for o in sorted(got - want)[:4]],
                               len(want - got), [hex(base + o) for o in sorted(want - got)[:4]]))
        print("%s: %d blocks, %d bytes of the program covered, %d modules" % (
            what, len(bbs), len(got), len(mods)))


def check_dynamic(args, tmp, problems):
    prog = "/usr/bin/sha256sum"
    inp = os.path.join(tmp, "input")
    with open(inp, "wb") as f:
        f.write(os.urandom(1 << 16))
    mods, bbs = cov_run(args, tmp, "sha256sum", prog, [inp], True)
    fmods, full = cov_run(args, tmp, "sha256sum-full", prog, [inp], False)
    names = sorted(os.path.basename(p) for _, _, p in mods.values())
    if not any(n == "sha256sum" for n in names) or not any(n.startswith("libc.so") for n in names):
        problems.append("sha256sum: modules %s lack the program or libc" % names)
    for mid, (base, end, path) in mods.items():
        lens, segs = lengths("x86_64", path), common.elf_loads("x86_64", path)
        first = min(v for v, _, _, _ in segs) & ~0xfff
        bad = [(hex(s), n) for m, s, n in bbs if m == mid and
               (s + first not in lens or
                not any(ex and v <= s + first < v + size for v, size, _, ex in segs))]
        if bad:
            problems.append("sha256sum: %d blocks of %s start on no instruction of an executable "
                            "PT_LOAD (objdump, readelf), e.g. %s" % (len(bad), path, bad[:4]))
    for _, _, path in mods.values():
        a, b = covered(mods, bbs, path), covered(fmods, full, path)
        if a != b:
            problems.append("sha256sum: %s: the coverage filter covers %d bytes, a full trace %d"
                            % (path, len(a), len(b)))
    print("sha256sum: %d blocks in %d modules (%s)" % (len(bbs), len(mods), ", ".join(names)))


def check_moved(args, tmp, problems):
    lib = os.path.join(tmp, "libmoved.so")
    first = common.need_file(os.path.join(args.guests, "replaced-first.so"), "replaced-first.so")
    out = os.path.join(tmp, "moved.drcov")
    rc, stdout, err = common.run(common.cmd_sluice(
        args.sluice, "cov", out, os.path.join(args.guests, "replaced-x86_64"),
        [first, os.path.join(args.guests, "replaced-second.so"), lib, "moved"]))
    loads = sorted(int(b, 16) for b in re.findall(rb"loaded at (0x[0-9a-f]+)", stdout))
    if rc != 0 or len(loads) != 2 or loads[0] == loads[1]:
        problems.append("moved: exit %d, stdout %r, stderr %r: want two loads at two addresses"
                        % (rc, stdout, err[-300:]))
        return
    nm = subprocess.run(["nm", "--defined-only", first], capture_output=True, text=True).stdout
    sym = int(re.search(r"^([0-9a-f]+) T replaced_sum$", nm, re.M).group(1), 16)
    mods, bbs = read_drcov(out)
    ids = {mid: base for mid, (base, _, path) in mods.items() if path == lib}
    at_sum = sorted(ids[m] for m, start, _ in bbs if m in ids and start == sym)
    if sorted(ids.values()) != loads or at_sum != loads:
        problems.append("moved: the guest loaded %s at %s; the module table lists it at %s, "
                        "with a block at replaced_sum (0x%x from the base) in %s" % (
                            lib, [hex(b) for b in loads], [hex(b) for b in sorted(ids.values())],
                            sym, [hex(b) for b in at_sum]))
    print("moved: loads at %s, modules at %s" % ([hex(b) for b in loads],
                                                 [hex(b) for b in sorted(ids.values())]))


def check_codefiles(args, tmp, problems):
    """Code from a memfd (a JIT's) and from a file deleted once mapped: the memfd's blocks are
    anonymous memory, counted on stderr (it was a module "/memfd:... (deleted)", no file a
    viewer can open); the deleted file keeps its module and is said to be gone (both were said
    to be "rebuilt or replaced": hostile round 7). `dump` names the memfd's code by the
    memfd's name."""
    prog = common.need_file(os.path.join(args.guests, "counters-x86_64"), "counters-x86_64")
    base = os.path.join(tmp, "codefiles")
    out = base + ".drcov"
    rc, stdout, err = common.run(common.cmd_sluice(args.sluice, "cov", out, prog,
                                                   ["codefiles", base, "100"]))
    calls = dict((who, int(a, 16)) for a, who in
                 re.findall(rb"call ([0-9a-f]+) 64 0 (memfd|gone)", stdout))
    if rc != 0 or sorted(calls) != [b"gone", b"memfd"]:
        problems.append("codefiles: exit %d, stdout %r, stderr %r" % (rc, stdout, err[-300:]))
        return
    mods, bbs = read_drcov(out)
    gone = [(mid, b) for mid, (b, _, p) in mods.items() if p == base + ".gone"]
    memfd = [p for _, _, p in mods.values() if "memfd:" in p]
    said_gone = ("sluice: cov: %s.gone is gone (deleted since the guest mapped it)" % base).encode()
    if memfd or b"code in memory that no file maps ran" not in err:
        problems.append("codefiles: the memfd's code is a module %s, or not counted as "
                        "anonymous memory: stderr %r" % (memfd, err[-400:]))
    if [b for _, b in gone] != [calls[b"gone"]] or not any(m == gone[0][0] for m, _, _ in bbs):
        problems.append("codefiles: the deleted file's module %s, want one at %#x with blocks"
                        % (gone, calls[b"gone"]))
    if said_gone not in err or b"rebuilt or replaced" in err:
        problems.append("codefiles: want %r on stderr, and nothing of a replaced file: %r"
                        % (said_gone, err[-400:]))
    print("codefiles: modules %s; stderr %r" % (sorted(p for _, _, p in mods.values()),
                                                 err.strip().splitlines()))
    # dump names the memfd's code memfd:NAME@offset and says it is a memfd's, not a file
    # deleted ("memfd:sluice-jit?(deleted)@0x0", "not the file the trace ran": round 9).
    dump = base + ".dump"
    rc, stdout, err = common.run([args.sluice, "run", "--tool", "dump", "--no-disasm", "-o", dump,
                                  "--", prog, "codefiles", base + "2", "3"])
    at = re.search(rb"call ([0-9a-f]+) 3 0 memfd", stdout)
    with open(dump, "rb") as f:
        named = re.findall(rb"^\d+ 0x%s (\S+)$" % (at.group(1) if at else b"none"), f.read(), re.M)
    said = [l for l in err.decode(errors="replace").splitlines() if "memfd:" in l]
    if rc != 0 or set(named) != {b"memfd:sluice-jit@0x0"} or len(said) != 1 or \
            "a memfd's code" not in said[0] or "not the file the trace ran" in said[0]:
        problems.append("codefiles dump: exit %d, the memfd's code named %s, said %r: want "
                        "memfd:sluice-jit@0x0 and one line saying it is a memfd's"
                        % (rc, sorted(set(named)), said))
    print("codefiles dump: %s; %r" % (sorted(set(named)), said))


def check_remap(args, tmp, arch, problems):
    """The program's page holding leaf() mapped again 1 GiB above its load, which stays: a
    second module of the program, based where that mapping puts the file's offset 0, its
    blocks at the same offsets as the first load's (the first module's end was stretched to
    the copy and its blocks given offsets past 1 GiB: hostile round 9)."""
    prog = common.need_file(os.path.join(args.guests, "counters-" + arch), "counters-" + arch)
    base = os.path.join(tmp, "remap-" + arch)
    out = base + ".drcov"
    rc, stdout, err = common.run(common.cmd_sluice(args.sluice, "cov", out, prog,
                                                   ["remap", base, "50"]))
    calls = dict((who, (int(a, 16), int(o, 16))) for a, o, who in
                 re.findall(rb"call ([0-9a-f]+) 32 ([0-9a-f]+) (again|first)", stdout))
    if rc != 0 or sorted(calls) != [b"again", b"first"]:
        problems.append("remap %s: exit %d, stdout %r, stderr %r" % (arch, rc, stdout, err[-300:]))
        return
    mods, bbs = read_drcov(out)
    own = {mid: (b, e) for mid, (b, e, p) in mods.items() if p == prog}
    again, off = calls[b"again"]
    want = again - off
    starts = {mid: {s for m, s, _ in bbs if m == mid} for mid in own}
    second = [mid for mid, (b, _) in own.items() if b == want]
    first = [mid for mid, (b, _) in own.items() if b == calls[b"first"][0] - off]
    if len(own) != 2 or len(second) != 1 or len(first) != 1 or off not in starts[second[0]] \
            or not starts[second[0]] <= starts[first[0]] or own[first[0]][1] > want:
        problems.append("remap %s: modules of the program %s (want two: one based at %#x with "
                        "blocks at offsets the first one has, %#x among them); blocks %s"
                        % (arch, {m: (hex(b), hex(e)) for m, (b, e) in own.items()}, want, off,
                           {m: sorted(hex(x) for x in v)[:6] for m, v in starts.items()}))
        return
    print("remap %s: second module at %#x, offsets %s" % (arch, want,
                                                         sorted(hex(x) for x in starts[second[0]])))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sluice", required=True)
    ap.add_argument("--plugin", required=True)
    ap.add_argument("--guests", required=True)
    ap.add_argument("--filters", required=True)
    ap.add_argument("--arch", action="append")
    args = ap.parse_args()
    common.qemu_dir()
    common.need_file(args.sluice, "sluice")
    common.need_file(args.plugin, "reference plugin")
    problems = []
    with tempfile.TemporaryDirectory(prefix="sluice-cov-") as tmp:
        for arch in args.arch or common.ARCHES:
            check_static(args, tmp, arch, problems)
            check_remap(args, tmp, arch, problems)
        if not args.arch or "x86_64" in args.arch:
            check_dynamic(args, tmp, problems)
            check_moved(args, tmp, problems)
            check_codefiles(args, tmp, problems)
    common.conclude("cov", problems, "drcov files as the references say")


if __name__ == "__main__":
    main()
