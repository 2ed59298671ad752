# SPDX-License-Identifier: GPL-2.0-or-later
"""Shared helpers of the e2e tests: find QEMU and sluice, run a guest under
sluice, under the reference plugin (tests/plugin/reftrace.c) or untraced, and
read and compare dump traces.
"""

import os
import re
import signal
import subprocess
import sys
import time

ARCHES = ["x86_64", "aarch64", "riscv64", "mipsel"]
# Each architecture's binutils (the references for disassembly and ELF headers).
BINUTILS = {"x86_64": "", "aarch64": "aarch64-linux-gnu-", "riscv64": "riscv64-linux-gnu-",
            "mipsel": "mipsel-linux-gnu-"}


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def conclude(name, problems, ok):
    """Print each problem and fail, or print the test's ok line."""
    for p in problems:
        print("FAILED: " + p)
    if problems:
        fail("%s: %d problems" % (name, len(problems)))
    print("%s: %s" % (name, ok))


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
    every run. SLUICE_QEMU_DIR and SLUICE_ENCODING (the meson tests
    named *-insn set it) go to sluice only: sluice removes SLUICE_*
    variables from QEMU's environment, so giving it to the other runs would
    change the guest's environment, hence its stack.
    """
    env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C", "QEMU_RAND_SEED": "1"}
    for k in ("HOME", "XDG_RUNTIME_DIR", "TMPDIR") + (
            ("SLUICE_QEMU_DIR", "SLUICE_ENCODING") if sluice else ()):
        if k in os.environ:
            env[k] = os.environ[k]
    return env


def run(cmd, timeout=600, stdin=None, extra_env=None, preexec_fn=None):
    """Runs cmd; returns (returncode, stdout bytes, stderr bytes).

    preexec_fn runs in the child before the exec (resource limits).
    """
    env = guest_env(sluice=any(os.path.basename(c) == "sluice" for c in cmd[:3]))
    env.update(extra_env or {})
    # A session of its own, so a timeout also ends what cmd started (sluice's QEMU).
    p = subprocess.Popen(cmd, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=env, preexec_fn=preexec_fn, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        fail("timed out after %ds: %s" % (timeout, " ".join(cmd)))
    return p.returncode, out, err


def ctl_dirs(env):
    """The directories a jitter with environment env may put its control socket in (README:
    $XDG_RUNTIME_DIR/sluice, else /tmp/sluice-UID)."""
    xdg = env.get("XDG_RUNTIME_DIR", "")
    return ([os.path.join(xdg, "sluice")] if xdg.startswith("/") else []) + \
        ["/tmp/sluice-%d" % os.getuid()]


def jitter_path(sluice):
    """The jitter library: $SLUICE_JITTER, else the one built beside the sluice command."""
    return os.environ.get("SLUICE_JITTER") or os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(sluice))), "jitter",
        "libsluice-jitter.so")


def traced_qemu(run_pid, env, timeout=20):
    """(QEMU's pid, its control socket's path) for the `sluice run` of pid run_pid started with
    environment env, once both are there (README: $XDG_RUNTIME_DIR/sluice/PID.sock, else
    /tmp/sluice-UID/PID.sock); (pid or None, None) after timeout seconds without them."""
    qemu, end = None, time.monotonic() + timeout
    dirs = ctl_dirs(env)
    while time.monotonic() < end:
        try:
            with open("/proc/%d/task/%d/children" % (run_pid, run_pid)) as f:
                qemu = next((int(k) for k in f.read().split()), None)
        except OSError:
            break
        sock = next((p for p in (os.path.join(d, "%d.sock" % qemu) for d in dirs)
                     if os.path.exists(p)), None) if qemu else None
        if sock:
            return qemu, sock
        time.sleep(0.05)
    return qemu, None


def cmd_plain(arch, prog, args):
    return [qemu_bin(arch), prog] + list(args)


def cmd_ref(arch, plugin, out, prog, args, mode="dump"):
    return [qemu_bin(arch), "-plugin", "%s,out=%s,mode=%s" % (plugin, out, mode), prog] + list(args)


def raw(tool):
    """The options that make `tool` print for scripts: dump's --raw lines (README), the
    format every test here reads."""
    return ["--raw"] if tool == "dump" else []


def cmd_sluice(sluice, tool, out, prog, args, extra=()):
    return [sluice, "run", "--tool", tool] + raw(tool) + list(extra) + ["-o", out, "--", prog] \
        + list(args)


def fresh(path):
    if os.path.exists(path):
        os.unlink(path)
    return path


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


def first_difference(exp, act):
    """Index of the first event where two sequences differ, or None."""
    for i, (e, a) in enumerate(zip(exp, act)):
        if e != a:
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


# --- binutils, the references for instructions and ELF headers -------------------

def disassemble(arch, prog):
    """{pc: (bytes, "mnemonic operands")} for every instruction objdump -d shows in prog."""
    out = subprocess.run([BINUTILS[arch] + "objdump", "-d", "--insn-width=16", prog],
                         stdout=subprocess.PIPE, check=True, text=True).stdout
    insns = {}
    for line in out.splitlines():
        m = re.match(r"^\s*([0-9a-f]+):\t([0-9a-f ]+?)\s*\t(.*)", line)
        if not m:
            continue
        toks = m.group(2).split()
        if arch == "x86_64":
            code = bytes(int(t, 16) for t in toks)
        else:  # words, most significant digit first: little-endian in memory
            code = b"".join(int(t, 16).to_bytes(len(t) // 2, "little") for t in toks)
        insns[int(m.group(1), 16)] = (code, m.group(3).strip())
    return insns


def elf_loads(arch, prog):
    """[(vaddr, memsz, offset, executable)] of prog's PT_LOAD headers, as readelf says."""
    out = subprocess.run([BINUTILS[arch] + "readelf", "-lW", prog], stdout=subprocess.PIPE,
                         check=True, text=True).stdout
    loads = []
    for m in re.finditer(r"^\s*LOAD\s+0x([0-9a-f]+) 0x([0-9a-f]+) 0x[0-9a-f]+ 0x[0-9a-f]+ "
                         r"0x([0-9a-f]+) ([RWE ]+?)\s+0x", out, re.M):
        loads.append((int(m.group(2), 16), int(m.group(3), 16), int(m.group(1), 16),
                      "E" in m.group(4)))
    if not loads:
        fail("%s: readelf shows no LOAD header" % prog)
    return loads


def arena_bytes(pid):
    """Bytes the kernel holds for process pid's ring arena (the allocated blocks of its memfd,
    as stat(2) counts them), or None if it has none."""
    for fd in os.listdir("/proc/%d/fd" % pid):
        path = "/proc/%d/fd/%s" % (pid, fd)
        try:
            if os.readlink(path).startswith("/memfd:sluice-rings"):
                return os.stat(path).st_blocks * 512
        except OSError:
            pass
    return None
