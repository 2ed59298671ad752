#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""errors: what would fail inside QEMU fails first, in one line; output errors are not lost.

Each of these must print exactly one line on stderr naming the cause (and the
fix), exit 2 and print no stats table (the table would go to stderr: no -o):
a truncated ELF (cut in its program headers, in a PT_LOAD segment; 64- and
32-bit), a dynamically linked aarch64 program whose interpreter is not found
(QEMU_LD_PREFIX unset, or naming a directory without it), SLUICE_JITTER naming
another library or a text file, and a QEMU without the sluice patch (a stand-in
script: no unpatched QEMU is installed), and one whose -h never answers (sluice
must give up after 10 s; it blocked in read() for good). When QEMU dies before
tracing starts anyway (stand-ins that fail, exit 0 or are killed; a real QEMU
given an interpreter it cannot load), sluice waits for it and adds one line
naming its status, exit 2, no table. Under `ulimit -n 8` (the jitter's
descriptors leave QEMU none for the program) the jitter says so in one line,
and sluice adds QEMU's status.

A patched QEMU marks itself (section .sluice_mark): each built QEMU's mark, as
binutils' readelf dumps it, must say what its -h says (QEMU_LD_PREFIX) and the
jitter ABI of include/sluice/jitter_abi.h; a marked stand-in (marked_qemu.c)
must be started without being run with -h, and one marked with another ABI is
refused in one line.

Writing the report: `stats` to a stderr that fails (2>/dev/full) must exit 1; a
dump whose pipe's reader leaves says so in one line and exits 1, the guest whole.
A dump that hits the file size limit (RLIMIT_FSIZE, SIGXFSZ ignored: writes
fail with EFBIG) must say so in one line at once, before the guest ends (its
stdout and sluice's stderr share one pipe here, so their order is the order of
events), cut the file back to its last whole line, let the guest run to its
end with its normal output, and exit 1 (guest exit 0) or the guest's status.
Started with stdout closed, `-o -` (and `ls`) is refused in one line; with stdout
or stdin closed, the guest finds it closed as a native run does. A #! script is
named as one, with its interpreter to trace instead.

  errors.py --sluice build/consumer/sluice --guests build/tests/e2e
"""

import argparse
import os
import re
import resource
import signal
import struct
import subprocess
import sys
import tempfile
import time

import common

AARCH64_INTERP = "/lib/ld-linux-aarch64.so.1"
FSIZE_LIMIT = 1 << 20
LONGEST_DUMP_LINE = 124

# A stand-in for a QEMU built without the sluice patch (there is none on the
# test machine): its usage, like QEMU 10.0's, has no -jitter line, and it
# refuses -jitter the way QEMU's parse_args() refuses an unknown option.
UNPATCHED_QEMU = """#!/bin/sh
# Stand-in for an unpatched qemu-x86_64 (see tests/e2e/errors.py).
case "$1" in
-h|-help|--help)
    cat <<'EOF'
usage: qemu-x86_64 [options] program [arguments...]
Linux CPU emulator (compiled for x86_64 emulation)

Options and associated environment variables:

Argument             Env-variable      Description
-h                                     print this help
-help
-g port              QEMU_GDB          wait gdb connection to 'port'
-L path              QEMU_LD_PREFIX    set the elf interpreter prefix to 'path'
-s size              QEMU_STACK_SIZE   set the stack size to 'size' bytes
-cpu model           QEMU_CPU          select CPU (-cpu help for list)
-version             QEMU_VERSION      display version information and exit

Defaults:
QEMU_LD_PREFIX  = /usr/gnemul/qemu-x86_64
QEMU_STACK_SIZE = 8388608 byte
EOF
    exit 0 ;;
-*)
    opt=${1#-}
    echo "qemu: unknown option '$opt'" >&2
    exit 1 ;;
esac
exec /bin/false
"""

# Stand-ins for a patched QEMU that dies before tracing starts: -h lists
# -jitter, but running a program fails (STANDIN_FAIL) or is killed (STANDIN_KILLED).
PATCHED_HELP = """case "$1" in
-h)
    echo "usage: qemu-x86_64 [options] program [arguments...]"
    echo "-jitter path         QEMU_JITTER          load the sluice tracing jitter from 'path'"
    exit 0 ;;
esac
"""
STANDIN_FAIL = "#!/bin/sh\n# Stand-in: a patched QEMU that fails at once.\n" + PATCHED_HELP + \
    "echo 'qemu-x86_64: stand-in: cannot start' >&2\nexit 1\n"
STANDIN_KILLED = "#!/bin/sh\n# Stand-in: a patched QEMU that is killed at once.\n" + \
    PATCHED_HELP + "kill -KILL $$\n"
STANDIN_EXIT0 = "#!/bin/sh\n# Stand-in: a patched QEMU that exits 0 at once.\n" + \
    PATCHED_HELP + "exit 0\n"
# No mark, and -h never answers (sluice hung in read() past its 10 s deadline).
STANDIN_SILENT = "#!/bin/sh\n# Stand-in: a QEMU that never answers.\nexec sleep 60\n"


def sluice_cmd(args, prog, guest_args=(), tool="stats", extra=()):
    """No -o: a stats table would go to stderr, where the tests look."""
    return [args.sluice, "run", "--tool", tool] + common.raw(tool) + list(extra) + ["--", prog] \
        + list(guest_args)


def expect(what, cmd, want_lines, extra_env=None, want_rc=2, preexec_fn=None):
    """Runs cmd; stderr must be exactly want_lines (a str: that one line; a list: those,
    where a None entry matches any line) and the exit status want_rc."""
    rc, _, err = common.run(cmd, extra_env=extra_env, preexec_fn=preexec_fn)
    lines = err.decode(errors="replace").splitlines()
    want = [want_lines] if isinstance(want_lines, str) else want_lines
    good = rc == want_rc and len(lines) == len(want) and all(
        w is None or w == l for w, l in zip(want, lines))
    table = any("insns" in l for l in lines)
    if good:
        print("%s: ok: exit %d, %r" % (what, rc, lines[-1]))
    else:
        print("%s: FAILED: want exit %d and stderr %r;\n    got exit %d and %d line(s)%s: %r"
              % (what, want_rc, want, rc, len(lines), " with a stats table" if table else "",
                 lines[:8]))
    return good


def write_exe(path, text):
    with open(path, "wb" if isinstance(text, bytes) else "w") as f:
        f.write(text)
    os.chmod(path, 0o755)
    return path


def elf_layout(path):
    """(class 32 or 64, [(p_type, p_offset, p_filesz)], end of program headers) of a
    little-endian ELF file."""
    with open(path, "rb") as f:
        data = f.read()
    if data[4] == 2:
        phoff, = struct.unpack_from("<Q", data, 32)
        phentsize, phnum = struct.unpack_from("<HH", data, 54)
        phdrs = [struct.unpack_from("<IIQQQQ", data, phoff + i * phentsize)
                 for i in range(phnum)]
        segs = [(p[0], p[2], p[5]) for p in phdrs]
    else:
        phoff, = struct.unpack_from("<I", data, 28)
        phentsize, phnum = struct.unpack_from("<HH", data, 42)
        phdrs = [struct.unpack_from("<IIIIII", data, phoff + i * phentsize)
                 for i in range(phnum)]
        segs = [(p[0], p[1], p[4]) for p in phdrs]
    return segs, phoff + phnum * phentsize


def truncated(args, tmp):
    ok = True
    for arch in ("x86_64", "mipsel"):
        src = common.need_file(os.path.join(args.guests, "exitcode-" + arch), "exitcode-" + arch)
        segs, ph_end = elf_layout(src)
        loads = [(i, off, off + sz) for i, (t, off, sz) in enumerate(segs) if t == 1 and sz]
        # cut inside the program headers, then inside the second PT_LOAD segment
        cuts = [(ph_end - 8, "its program headers", ph_end)]
        i, off, end = loads[1]
        cut = off + 100
        first = next((j, e) for j, o, e in loads if e > cut)
        cuts.append((cut, "its PT_LOAD segment %d" % first[0], first[1]))
        for size, what, end in cuts:
            prog = os.path.join(tmp, "cut%d-%s" % (size, arch))
            with open(src, "rb") as f, open(prog, "wb") as g:
                g.write(f.read(size))
            os.chmod(prog, 0o755)
            want = ("sluice: %s: truncated or corrupt ELF file: it ends at byte %d, before the "
                    "end of %s (byte %d)" % (prog, size, what, end))
            ok = expect("truncated %s ELF (%d bytes, in %s)" % (arch, size, what),
                        sluice_cmd(args, prog, ["0"]), want) and ok
    return ok


def machines(args, tmp):
    """ELF headers sluice refuses before QEMU starts, one line each: an i386 program, and a
    MIPS n32 one (EF_MIPS_ABI2 in e_flags), which went on to QEMU's "Invalid ELF image"
    (hostile round 9)."""
    src = common.need_file(os.path.join(args.guests, "exitcode-mipsel"), "exitcode-mipsel")
    ok = True
    for name, at, value, want in (
            ("i386", 18, b"\x03\x00", "unsupported ELF machine 3 (EM_386, 32-bit, little-endian)"),
            ("n32", 36, None, "a MIPS n32 program (EF_MIPS_ABI2): sluice's mipsel runs o32 ones")):
        prog = os.path.join(tmp, "machine-" + name)
        with open(src, "rb") as f:
            data = bytearray(f.read())
        if value is None:
            data[at] |= 0x20
        else:
            data[at:at + len(value)] = value
        with open(prog, "wb") as g:
            g.write(data)
        os.chmod(prog, 0o755)
        ok = expect("%s program" % name, sluice_cmd(args, prog, ["0"]),
                    "sluice: %s: %s" % (prog, want)) and ok
    return ok


def dynamic(args, tmp):
    prog = common.need_file(os.path.join(args.guests, "exitcode-dynamic-aarch64"),
                            "exitcode-dynamic-aarch64")
    cross = "/usr/aarch64-linux-gnu"
    hint = " (%s has it)" % cross if os.path.exists(cross + AARCH64_INTERP) else ""
    ok = True
    if os.path.exists(AARCH64_INTERP):
        print("dynamic aarch64, no QEMU_LD_PREFIX: not checked: this host has %s"
              % AARCH64_INTERP)
    else:
        ok = expect("dynamic aarch64, no QEMU_LD_PREFIX", sluice_cmd(args, prog, ["0"]),
                    "sluice: %s: its ELF interpreter %s is not found (QEMU_LD_PREFIX is not "
                    "set): set QEMU_LD_PREFIX=DIR holding %s%s"
                    % (prog, AARCH64_INTERP, AARCH64_INTERP, hint)) and ok
        empty = os.path.join(tmp, "empty-prefix")
        os.makedirs(empty, exist_ok=True)
        ok = expect("dynamic aarch64, QEMU_LD_PREFIX without it", sluice_cmd(args, prog, ["0"]),
                    "sluice: %s: its ELF interpreter %s is not under QEMU_LD_PREFIX=%s nor in "
                    "/: set QEMU_LD_PREFIX=DIR holding %s%s"
                    % (prog, AARCH64_INTERP, empty, AARCH64_INTERP, hint),
                    extra_env={"QEMU_LD_PREFIX": empty}) and ok
    if hint:
        # the fix works: the guest runs, traced, and ends its own way
        rc, out, err = common.run(sluice_cmd(args, prog, ["3"]),
                                  extra_env={"QEMU_LD_PREFIX": cross})
        good = rc == 3 and out == b"exitcode 3\n" and b"insns" in err
        print("dynamic aarch64, QEMU_LD_PREFIX=%s: %s (exit %d, stdout %r)"
              % (cross, "ok" if good else "FAILED", rc, out))
        ok = ok and good
    # An interpreter QEMU finds but cannot load: QEMU itself fails, after WELCOME.
    bad = os.path.join(tmp, "bad-prefix")
    os.makedirs(os.path.join(bad, "lib"), exist_ok=True)
    write_exe(bad + AARCH64_INTERP, "not an ELF file\n")
    ok = expect("dynamic aarch64, an interpreter QEMU cannot load", sluice_cmd(args, prog, ["0"]),
                [None, "sluice: QEMU exited with status 255 before tracing started (its message "
                 "is above)"], extra_env={"QEMU_LD_PREFIX": bad}) and ok
    return ok


def jitter(args, tmp):
    prog = os.path.join(args.guests, "exitcode-x86_64")
    libz = common.need_file("/lib/x86_64-linux-gnu/libz.so.1", "libz")
    text = write_exe(os.path.join(tmp, "jitter.txt"), "not a library\n")
    ok = expect("SLUICE_JITTER=libz", sluice_cmd(args, prog, ["0"]),
                "sluice: %s is not a sluice jitter (it does not export sluice_jitter_ops): set "
                "SLUICE_JITTER to libsluice-jitter.so" % libz, extra_env={"SLUICE_JITTER": libz})
    ok = expect("SLUICE_JITTER=text file", sluice_cmd(args, prog, ["0"]),
                "sluice: %s is not a sluice jitter (not an ELF file): set SLUICE_JITTER to "
                "libsluice-jitter.so" % text, extra_env={"SLUICE_JITTER": text}) and ok
    # QEMU -jitter given knobs for no filter, or an empty filter=: refused (both ran in
    # silence, tracing everything: hostile round 5).
    for opt, line in (("set=lo=1", "sluice-jitter: option 'set=': sets a filter's knob: give "
                                   "filter= too"),
                      ("filter=", "sluice-jitter: option 'filter=': names no file")):
        qemu = os.path.join(common.qemu_dir(), "bin", "qemu-x86_64")
        ok = expect("-jitter ...,%s" % opt,
                    [qemu, "-jitter", common.jitter_path(args.sluice) + "," + opt, prog, "0"],
                    line, want_rc=1) and ok
    # Under `ulimit -v` of about 1 GB (plain QEMU runs the guest in less): the limit is named
    # (it said "cannot reserve the consumers' tail files: Cannot allocate memory": hostile
    # round 7). QEMU alone: the sanitized sluice cannot run under such a limit.
    kib = 1000000
    ok = expect("-jitter under ulimit -v", [qemu, "-jitter", common.jitter_path(args.sluice),
                                            prog, "0"],
                "sluice-jitter: cannot reserve the consumers' tail files (1024 MiB of address "
                "space) within the address-space limit of %d MiB with QEMU's own (ulimit -v): "
                "raise it" % (kib * 1024 >> 20), want_rc=1,
                preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS,
                                                      (kib * 1024, kib * 1024))) and ok
    return ok


def fake_qemu_dir(tmp, name, script):
    d = os.path.join(tmp, name)
    os.makedirs(os.path.join(d, "bin"), exist_ok=True)
    return d, write_exe(os.path.join(d, "bin", "qemu-x86_64"), script)


def marked_qemu_dir(args, tmp, name, abi=None):
    """A copy of marked-qemu as qemu-x86_64, its mark's ABI word made @p abi if given."""
    with open(os.path.join(args.guests, "marked-qemu"), "rb") as f:
        data = bytearray(f.read())
    if abi is not None:
        at = data.index(b"sluiceQ\0") + 8
        data[at:at + 4] = struct.pack("<I", abi)
    return fake_qemu_dir(tmp, name, bytes(data))


def jitter_abi():
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "..", "include", "sluice", "jitter_abi.h")) as f:
        return int(re.search(r"#define SLUICE_JITTER_ABI_VERSION (\d+)u", f.read()).group(1))


def read_mark(qemu):
    """The .sluice_mark section of @p qemu as binutils' readelf dumps it: (abi, prefix)."""
    out = subprocess.run(["readelf", "-x", ".sluice_mark", qemu], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, check=True).stdout.decode()
    data = b"".join(bytes.fromhex("".join(m.group(1).split()))
                    for m in re.finditer(r"^\s+0x[0-9a-f]+ ((?:[0-9a-f]{2,8} ){1,4})", out, re.M))
    if len(data) != 256 or not data.startswith(b"sluiceQ\0"):
        return None
    return struct.unpack_from("<I", data, 8)[0], data[12:].split(b"\0")[0].decode()


def help_prefix(qemu):
    """QEMU_LD_PREFIX's default as `qemu -h` shows it."""
    out = subprocess.run([qemu, "-h"], stdout=subprocess.PIPE, env={}, check=True).stdout.decode()
    return re.search(r"^QEMU_LD_PREFIX\s+= (\S*)", out, re.M).group(1)


def marks(args, tmp):
    """sluice reads a patched QEMU's mark instead of running `-h` (a few ms on every run): each
    built QEMU's mark, read by readelf, says what its -h says; a marked stand-in whose -h fails
    is started without it; one built for another jitter ABI is refused in one line."""
    ok = True
    bindir = os.path.join(common.qemu_dir(), "bin")
    for q in sorted(os.listdir(bindir)):
        path = os.path.join(bindir, q)
        got, want = read_mark(path), (jitter_abi(), help_prefix(path))
        good = got == want
        print("%s's mark: %s: %r, -h and jitter_abi.h say %r" % (q, "ok" if good else "FAILED",
                                                                   got, want))
        ok = ok and good
    prog = os.path.join(args.guests, "exitcode-x86_64")
    d, q = marked_qemu_dir(args, tmp, "marked")
    ok = expect("a marked QEMU (stand-in) is not run with -h", sluice_cmd(args, prog, ["0"]),
                ["qemu-x86_64: stand-in: started",
                 "sluice: QEMU exited with status 3 before tracing started (its message is "
                 "above)"], extra_env={"SLUICE_QEMU_DIR": d}) and ok
    d, q = marked_qemu_dir(args, tmp, "abi0", abi=0)
    ok = expect("a QEMU marked with another jitter ABI (stand-in)", sluice_cmd(args, prog, ["0"]),
                "sluice: %s was built for jitter ABI 0, this sluice's is %d: rebuild it "
                "(scripts/setup.sh), or set SLUICE_QEMU_DIR to a QEMU built with these sources"
                % (q, jitter_abi()), extra_env={"SLUICE_QEMU_DIR": d}) and ok
    return ok


def qemus(args, tmp):
    prog = os.path.join(args.guests, "exitcode-x86_64")
    d, q = fake_qemu_dir(tmp, "unpatched", UNPATCHED_QEMU)
    ok = expect("QEMU without the sluice patch (stand-in)", sluice_cmd(args, prog, ["0"]),
                "sluice: %s is not a sluice-patched QEMU (its -h lists no -jitter option): set "
                "SLUICE_QEMU_DIR to the patched QEMU's directory (qemu-patch/build-qemu.sh "
                "prints it)" % q, extra_env={"SLUICE_QEMU_DIR": d})
    d, q = fake_qemu_dir(tmp, "fails", STANDIN_FAIL)
    ok = expect("QEMU exits before WELCOME (stand-in)", sluice_cmd(args, prog, ["0"]),
                ["qemu-x86_64: stand-in: cannot start",
                 "sluice: QEMU exited with status 1 before tracing started (its message is "
                 "above)"], extra_env={"SLUICE_QEMU_DIR": d}) and ok
    d, q = fake_qemu_dir(tmp, "exit0", STANDIN_EXIT0)
    rc, _, err = common.run(sluice_cmd(args, prog, ["0"]), extra_env={"SLUICE_QEMU_DIR": d})
    lines = err.decode(errors="replace").splitlines()
    good = rc == 2 and len(lines) == 1 and lines[0].startswith(
        "sluice: nothing was traced: control socket: ") and lines[0].endswith(
        "; QEMU exited with status 0 (the guest, if it ran, ran untraced)")
    print("QEMU exits 0 before WELCOME (stand-in): %s: exit %d, %r"
          % ("ok" if good else "FAILED (want exit 2 and one line naming status 0)", rc, lines))
    ok = good and ok
    d, q = fake_qemu_dir(tmp, "silent", STANDIN_SILENT)
    t0 = time.monotonic()
    ok = expect("QEMU whose -h never answers (stand-in)", sluice_cmd(args, prog, ["0"]),
                "sluice: %s: no answer to -h within 10 s: is it a QEMU linux-user binary?" % q,
                extra_env={"SLUICE_QEMU_DIR": d}) and ok
    took = time.monotonic() - t0
    if took > 20:
        print("QEMU whose -h never answers: FAILED: sluice took %.0f s" % took)
        ok = False
    d, q = fake_qemu_dir(tmp, "killed", STANDIN_KILLED)
    ok = expect("QEMU killed before WELCOME (stand-in)", sluice_cmd(args, prog, ["0"]),
                "sluice: QEMU was killed by SIGKILL before tracing started",
                extra_env={"SLUICE_QEMU_DIR": d}, want_rc=-signal.SIGKILL) and ok
    return ok


def nofile(args):
    """Under `ulimit -n 8` the jitter's descriptors leave QEMU none for the program: QEMU's
    own message went to a stdout it never flushed (nothing was said). Now the jitter says it."""
    prog = os.path.join(args.guests, "exitcode-x86_64")
    return expect("ulimit -n 8", sluice_cmd(args, prog, ["0"]),
                  ["sluice-jitter: ulimit -n leaves QEMU no descriptor beside the jitter's: "
                   "raise it",
                   "sluice: QEMU exited with status 1 before tracing started (its message is "
                   "above)"],
                  preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (8, 8)))


def broken_pipe(args):
    """A dump whose reader goes away (`| head`): one line naming the broken pipe, the guest runs
    to its end with its own output, exit 1. sluice died of SIGPIPE in silence, and QEMU ran on
    untraced, orphaned."""
    prog = os.path.join(args.guests, "loops-x86_64")
    r, w = os.pipe()
    p = subprocess.Popen(sluice_cmd(args, prog, (), "dump", ["-o", "/dev/fd/%d" % w]),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(w,),
                         env=common.guest_env(sluice=True))
    os.close(w)
    with os.fdopen(r, "rb") as f:
        f.readline()  # the dump has begun: go away
    out, err = p.communicate(timeout=600)
    lines = err.decode(errors="replace").splitlines()
    good = p.returncode == 1 and out.endswith(b"\n") and b"acc=" in out and len(lines) == 1 and \
        "Broken pipe" in lines[0]
    print("dump to a pipe closed early: %s (exit %d, stderr %r)"
          % ("ok" if good else "FAILED: want exit 1, one line naming the broken pipe, the "
             "guest's output whole", p.returncode, lines[:4]))
    return good


def broken_pipe_shared(args):
    """A dump for people to stdout (-o -), shared with the guest's, whose reader goes away: one
    line naming the broken pipe (a second, "sluice: stdout: Broken pipe", came as the output was
    closed), and the guest's death by SIGPIPE, if it came, said on stderr (the note went to the
    broken stdout, unsaid). Five runs: the guest's line or the dump's may come first."""
    prog = os.path.join(args.guests, "threads-x86_64")
    good = True
    for _ in range(5):
        r, w = os.pipe()
        p = subprocess.Popen([args.sluice, "run", "--tool", "dump", "-o", "-", "--", prog], stdout=w,
                             stderr=subprocess.PIPE, env=common.guest_env(sluice=True))
        os.close(w)
        with os.fdopen(r, "rb") as f:
            f.readline()
        _, err = p.communicate(timeout=600)
        lines = err.decode(errors="replace").splitlines()
        pipe = [l for l in lines if "Broken pipe" in l]
        killed = [l for l in lines if "guest killed by SIGPIPE" in l]
        ok = len(pipe) == 1 and (killed if p.returncode in (-13, 141) else p.returncode == 1)
        print("dump to stdout shared with the guest, closed early: %s (exit %d, stderr %r)"
              % ("ok" if ok else "FAILED: want one line naming the broken pipe, and the guest's "
                 "death by SIGPIPE said if it died of it", p.returncode, lines[:4]))
        good = good and ok
    return good


def full_stderr(args):
    """The report to a stderr that fails: exit 1 (the guest exits 0)."""
    ok = True
    prog = os.path.join(args.guests, "exitcode-x86_64")
    for tool, extra in (("stats", []), ("stats", ["--json"]), ("dump", [])):
        with open("/dev/full", "wb") as full:
            p = subprocess.run(sluice_cmd(args, prog, ["0"], tool, extra), stdout=subprocess.PIPE,
                               stderr=full, env=common.guest_env(sluice=True), timeout=600)
        good = p.returncode == 1 and p.stdout == b"exitcode 0\n"
        print("%s%s 2>/dev/full: %s (exit %d)" % (tool, " --json" if extra else "",
                                                  "ok" if good else "FAILED: want exit 1",
                                                  p.returncode))
        ok = ok and good
    return ok


def limit_fsize():
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (FSIZE_LIMIT, FSIZE_LIMIT))


def file_size_limit(args, tmp, exit_code):
    """dump -o FILE under RLIMIT_FSIZE: one line at once, a whole-line file, the guest unharmed."""
    out = common.fresh(os.path.join(tmp, "limited.dump"))
    script = ("i=0; while [ $i -lt 400 ]; do i=$((i+1)); done; echo loop-done; sleep 2; "
              "echo guest-done; exit %d" % exit_code)
    cmd = [args.sluice, "run", "--tool", "dump", "--raw", "-o", out, "--", "/bin/sh", "-c", script]
    env = common.guest_env(sluice=True)
    # the rings are memfds, which the limit covers too: keep them well below it
    env["SLUICE_RING_BYTES"] = "262144"
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                       preexec_fn=limit_fsize, timeout=600)
    # `sleep` is exec'd by a forked shell: that child's thread ends without exiting, a true note
    lines = [l for l in p.stdout.decode(errors="replace").splitlines()
             if not l.startswith("sluice: 1 thread ended without exiting (killed, or ended by an "
                                 "execve); 0 bytes")]
    msg = ("sluice: %s: File too large; the dump ends at its last whole line and the rest of "
           "the trace is dropped" % out)
    want_rc = 1 if exit_code == 0 else exit_code
    problems = []
    if p.returncode != want_rc:
        problems.append("exit %d, want %d" % (p.returncode, want_rc))
    if [l for l in lines if not l.startswith("sluice:")] != ["loop-done", "guest-done"]:
        problems.append("the guest's output is not its own")
    if [l for l in lines if l.startswith("sluice:")] != [msg]:
        problems.append("want one sluice line %r" % msg)
    elif "guest-done" in lines and lines.index(msg) > lines.index("guest-done"):
        problems.append("the message came after the guest's end, not when the write failed")
    size = os.path.getsize(out) if os.path.exists(out) else -1
    with open(out, "rb") as f:
        data = f.read()
    if not FSIZE_LIMIT - LONGEST_DUMP_LINE < size <= FSIZE_LIMIT:
        problems.append("dump of %d bytes, want the whole lines below the limit %d"
                        % (size, FSIZE_LIMIT))
    if not data.endswith(b"\n"):
        problems.append("dump does not end at a whole line (last bytes %r)" % data[-40:])
    bad = [l for l in data.decode(errors="replace").splitlines()
           if not (l.partition(" ")[0].isdigit() and l.partition(" ")[2])]
    if bad:
        problems.append("%d malformed dump line(s), e.g. %r" % (len(bad), bad[0]))
    print("RLIMIT_FSIZE %d, guest exit %d: %s (exit %d, dump %d bytes); output %r"
          % (FSIZE_LIMIT, exit_code, "ok" if not problems else "FAILED: " + "; ".join(problems),
             p.returncode, size, lines[:6]))
    return not problems


def odd_paths(args, tmp):
    """A path holding a newline or a terminal escape is one line of its error, with those bytes
    as '?': the program, a filter, a trace to report, -o and --record (each broke the line in
    two before say.c)."""
    odd = os.path.join(tmp, "no\nsuch\x1b[31m")
    shown = odd.replace("\n", "?").replace("\x1b", "?")
    true = os.path.join(args.guests, "exitcode-x86_64")
    cases = [
        ("program", sluice_cmd(args, odd), "sluice: %s: No such file or directory" % shown),
        ("filter", sluice_cmd(args, true, extra=["--filter", odd]),
         "sluice: %s: cannot open: No such file or directory" % shown),
        ("report", [args.sluice, "report", odd],
         "sluice: report: %s: No such file or directory" % shown),
        ("-o", sluice_cmd(args, true, extra=["-o", odd + "/out"]),
         "sluice: %s/out: No such file or directory" % shown),
        ("--record", sluice_cmd(args, true, extra=["--record", odd + "/t"]),
         "sluice: %s/t: No such file or directory" % shown),
    ]
    ok = True
    for what, cmd, line in cases:
        ok = expect("odd path, " + what, cmd, line) and ok
    return ok


def closed_stdio(args, tmp):
    """Started with stdout closed, sluice's first descriptor took its number: a dump to -o -
    went into the jitter's control socket ("sluice: stdout: Message too long", exit 1). Now
    -o - (and ls) on a closed stdout is refused in one line, and the guest still finds a
    descriptor closed that sluice was started without, as a native run does (the same error
    and exit status: /bin/echo and /bin/cat, run natively beside; sluice's /dev/null in its
    place would make them succeed)."""
    close_out = lambda: os.close(1)  # noqa: E731
    close_in = lambda: os.close(0)  # noqa: E731
    true = os.path.join(args.guests, "exitcode-x86_64")
    ok = expect("-o - with stdout closed", sluice_cmd(args, true, ["0"], "dump", ["-o", "-"]),
                "sluice: stdout is closed: nowhere to write the output (give -o FILE)",
                preexec_fn=close_out)
    ok = expect("ls with stdout closed", [args.sluice, "ls"],
                "sluice: ls: stdout is closed: nowhere to list the processes",
                preexec_fn=close_out) and ok
    table = os.path.join(tmp, "closed.txt")
    for what, argv, close in (("stdout", ["/bin/echo", "hi"], close_out),
                              ("stdin", ["/bin/cat"], close_in)):
        nat = common.run(argv, preexec_fn=close)
        got = common.run([args.sluice, "run", "-o", table, "--"] + argv, preexec_fn=close)
        with open(table) as f:
            traced = any(l.split()[:1] == ["total"] for l in f)
        good = got[0] == nat[0] != 0 and got[2] == nat[2] and traced
        print("%s with %s closed: %s (native: exit %d, %r; traced: exit %d, %r)" % (
            argv[0], what, "ok" if good else "FAILED: want the native exit status and stderr, "
            "and a stats table in -o", nat[0], nat[2][:200], got[0], got[2][:200]))
        ok = ok and good
    script = write_exe(os.path.join(tmp, "script.sh"), "#!/bin/sh\necho hi\n")
    return expect("a #! script", sluice_cmd(args, script),
                  "sluice: %s: a script (#!), not an ELF program: trace its interpreter "
                  "(sluice run -- INTERPRETER %s)" % (script, script)) and ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sluice", required=True)
    ap.add_argument("--guests", required=True)
    args = ap.parse_args()
    common.qemu_dir()
    common.need_file(args.sluice, "sluice")
    ok = True
    with tempfile.TemporaryDirectory(prefix="sluice-errors-") as tmp:
        ok = truncated(args, tmp) and ok
        ok = machines(args, tmp) and ok
        ok = dynamic(args, tmp) and ok
        ok = jitter(args, tmp) and ok
        ok = qemus(args, tmp) and ok
        ok = marks(args, tmp) and ok
        ok = odd_paths(args, tmp) and ok
        ok = closed_stdio(args, tmp) and ok
        ok = nofile(args) and ok
        ok = full_stderr(args) and ok
        ok = broken_pipe(args) and ok
        ok = broken_pipe_shared(args) and ok
        ok = file_size_limit(args, tmp, 0) and ok
        ok = file_size_limit(args, tmp, 3) and ok
    if not ok:
        common.fail("errors: not every error is one clear line, or output errors are lost")
    print("errors: all ok")


if __name__ == "__main__":
    sys.exit(main())
