#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""exit: `sluice run` ends the way its guest ends, and says why it cannot run one.

For each architecture, the exitcode guest exits with 0, 3 and 255, dies of an
unhandled SIGSEGV, of abort() (SIGABRT) and of raise(SIGKILL), and prints
the descriptor open() returns; `sluice run` must end with the same status
(the same signal, re-raised) and the same stdout as the guest run directly
under qemu-<arch>. SIGTERM and SIGINT sent to sluice must reach the guest,
and the report of what ran must still be written (also when a child the guest
forked outlives it: sluice then leaves it running untraced and names it, and
says nothing of the kind of a guest that forked nothing); a SIGTERM during
--wait-attach kills sluice as it kills QEMU. A QEMU killed by SIGKILL
leaves no control socket file behind (sluice removes it). Then sluice's own usage
errors: a program that is not an ELF file of a supported machine (a 32-bit
ARM ELF, a text file) and a missing program must exit 2 with exactly one
line on stderr.

  exit_status.py --sluice build/consumer/sluice --guests build/tests/e2e
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import common

CASES = ["0", "3", "255", "segv", "abort", "kill", "fd"]


def describe(rc):
    return "signal %s" % signal.Signals(-rc).name if rc < 0 else "exit %d" % rc


def usage_error(args, tmp, what, prog, tool="stats", extra=()):
    out = os.path.join(tmp, "usage.out")
    rc, _, err = common.run(common.cmd_sluice(args.sluice, tool, out, prog, [], extra))
    lines = err.decode(errors="replace").splitlines()
    if rc != 2 or len(lines) != 1:
        print("usage error (%s): want exit 2 and one line on stderr, got %s and %r"
              % (what, describe(rc), lines[:5]))
        return False
    print("usage error (%s): ok: %s" % (what, lines[0]))
    return True


def signal_reaches_guest(args, tmp, sig):
    """@p sig sent to sluice alone ends the guest (an endless loop) and the report is
    still written. (SIGINT too: one typed at a terminal reaches the guest by itself.)"""
    name = signal.Signals(sig).name
    out = os.path.join(tmp, "%s.json" % name)
    cmd = common.cmd_sluice(args.sluice, "stats", out, "/bin/sh", ["-c", "while :; do :; done"],
                            extra=["--json"])
    # Not ignored from the start (a test runner may ignore SIGINT; sluice keeps that).
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         env=common.guest_env(sluice=True),
                         preexec_fn=lambda: signal.signal(sig, signal.SIG_DFL),
                         start_new_session=True)  # so a failure ends its QEMU too
    time.sleep(2)
    p.send_signal(sig)
    try:
        _, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        print("%s: sluice still running 60 s after %s" % (name, name))
        return False
    try:
        with open(out) as f:
            insns = json.load(f)["total"]["insns"]
    except (OSError, ValueError, KeyError) as e:
        print("%s: no report (%s); stderr %r" % (name, e, err[-300:]))
        return False
    good = p.returncode == -sig and insns > 0
    print("%s: sluice %s, report of %d instructions%s" % (
        name, describe(p.returncode), insns,
        "" if good else " FAILED (want signal %s, insns > 0)" % name))
    return good


def outlived(args, tmp, main_loops, sig):
    """A guest whose forked child outlives it (a background job: untraced, the caller does not
    wait for it): `sluice run` traces it on, but @p sig sent to sluice once the guest ended
    (or passed on to a guest that then dies of it: @p main_loops) must end sluice with the
    guest's status and the report, the child left running untraced (sluice waited for the
    child and ignored every signal: 5 of 5 runs)."""
    what = "%s %s" % (signal.Signals(sig).name,
                      "to a guest whose child outlives it" if main_loops
                      else "after the guest ended, its child running")
    out = os.path.join(tmp, "outlived.json")
    script = "while :; do :; done & echo $!; " + ("while :; do :; done" if main_loops else "exit 3")
    cmd = common.cmd_sluice(args.sluice, "stats", out, "/bin/sh", ["-c", script],
                            extra=["--json"])
    # Files, not pipes: the child left running holds them open.
    stdout, stderr = os.path.join(tmp, "outlived.stdout"), os.path.join(tmp, "outlived.stderr")
    with open(stdout, "wb") as o, open(stderr, "wb") as e:
        p = subprocess.Popen(cmd, stdout=o, stderr=e, env=common.guest_env(sluice=True),
                             preexec_fn=lambda: signal.signal(sig, signal.SIG_DFL),
                             start_new_session=True)
    time.sleep(3)
    with open(stdout, "rb") as f:
        child = int(f.readline().strip() or b"0")
    problems = [] if p.poll() is None else ["sluice ended before the signal: %s" % describe(
        p.returncode)]
    p.send_signal(sig)
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        problems.append("sluice still running 30 s after the signal")
    with open(stderr, "rb") as f:
        err = f.read()
    alive = child > 0 and os.path.exists("/proc/%d" % child)
    if alive:
        os.kill(child, signal.SIGKILL)
    else:
        problems.append("the child (pid %d) did not run on" % child)
    want = -sig if main_loops else 3
    if not problems and p.returncode != want:
        problems.append("sluice %s, want %s" % (describe(p.returncode), describe(want)))
    try:
        with open(out) as f:
            threads = len(json.load(f)["threads"])
    except (OSError, ValueError, KeyError) as e:
        threads = 0
        problems.append("no report (%s)" % e)
    if not problems and (threads != 2 or b"outlived it (pid %d)" % child not in err):
        problems.append("report of %d threads (want 2), stderr %r" % (threads, err[-300:]))
    print("%s: %s" % (what, "; ".join(problems) + " FAILED" if problems else
                      "sluice %s, report of both processes, the child left running" % describe(
                          p.returncode)))
    return not problems


def sigterm_after(cmd, seconds):
    """Run `sluice run` cmd, send it SIGTERM after @p seconds: (its status, stderr), or None
    if it still ran 60 s later (then killed)."""
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         env=common.guest_env(sluice=True),
                         preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL),
                         start_new_session=True)
    time.sleep(seconds)
    p.send_signal(signal.SIGTERM)
    try:
        _, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        return None
    return p.returncode, err


def term_no_fork(args, tmp):
    """SIGTERM to `sluice run` of a guest that forks nothing, passed on: the guest dies of it
    and sluice with it; it must not say that processes the guest forked were left running
    (it did, whenever a passed-on signal ended the guest)."""
    got = sigterm_after(common.cmd_sluice(args.sluice, "stats", os.path.join(tmp, "nofork.txt"),
                                          "/bin/sh", ["-c", "while :; do :; done"]), 2)
    if got is None:
        print("SIGTERM to a guest that forks nothing: sluice still running 60 s after FAILED")
        return False
    rc, err = got
    good = rc == -signal.SIGTERM and b"outlived" not in err
    print("SIGTERM to a guest that forks nothing: sluice %s, stderr %r%s" % (
        describe(rc), err.strip().splitlines()[-2:],
        "" if good else " FAILED (want signal SIGTERM and no word of processes left running)"))
    return good


def signal_while_waiting(args, tmp):
    """SIGTERM sent to `sluice run --wait-attach 1` before anyone attached: passed on, it
    kills QEMU before tracing started; sluice must say so and die of it (it exited 2)."""
    got = sigterm_after(common.cmd_sluice(args.sluice, "stats", os.path.join(tmp, "waiting.txt"),
                                          "/bin/true", [], extra=["--wait-attach", "1"]), 2)
    if got is None:
        print("SIGTERM while waiting for a consumer: sluice still running 60 s after")
        return False
    rc, err = got
    good = rc == -signal.SIGTERM and b"before tracing started" in err
    print("SIGTERM while waiting for a consumer: sluice %s, %r%s" % (
        describe(rc), err.strip().splitlines()[-1:],
        "" if good else " FAILED (want signal SIGTERM and the line)"))
    return good


def socket_files(pid):
    """The control socket files of process @p pid in both places a jitter makes them."""
    return [p for d in common.ctl_dirs(os.environ)
            for p in (os.path.join(d, "%d.sock" % pid), os.path.join(d, "%d.sock.new" % pid))
            if os.path.lexists(p)]


def no_socket_left(args, tmp):
    """A QEMU killed by SIGKILL (the guest's own raise(SIGKILL), or a fuzzer's timeout sent
    to QEMU) cannot remove its control socket; `sluice run`, its parent, must (they piled up
    in the directory `sluice ls` reads, one per killed run)."""
    ok = True
    prog = os.path.join(args.guests, "exitcode-x86_64")
    out = os.path.join(tmp, "kill.json")
    rc, _, err = common.run(common.cmd_sluice(args.sluice, "stats", out, prog, ["kill"],
                                              extra=["--json"]))
    try:
        with open(out) as f:
            pid = json.load(f)["threads"][0]["pid"]
    except (OSError, ValueError, KeyError, IndexError) as e:
        print("raise(SIGKILL): no report with the guest's pid (%s); stderr %r" % (e, err[-300:]))
        return False
    left = socket_files(pid)
    print("raise(SIGKILL): sluice %s, socket files left: %s%s" % (
        describe(rc), left or "none", " FAILED" if left else ""))
    ok = ok and not left

    cmd = common.cmd_sluice(args.sluice, "stats", os.path.join(tmp, "killed.txt"), "/bin/sh",
                            ["-c", "while :; do :; done"])
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         env=common.guest_env(sluice=True), start_new_session=True)
    qemu, t0 = None, time.time()
    while qemu is None and time.time() - t0 < 30:  # QEMU: sluice's child, listening
        time.sleep(0.2)
        try:
            with open("/proc/%d/task/%d/children" % (p.pid, p.pid)) as f:
                kids = [int(k) for k in f.read().split()]
        except OSError:
            kids = []
        qemu = next((k for k in kids if socket_files(k)), None)
    if qemu is None:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        print("SIGKILL to QEMU: no listening QEMU under sluice within 30 s FAILED")
        return False
    os.kill(qemu, signal.SIGKILL)
    try:
        p.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    left = socket_files(qemu)
    print("SIGKILL to QEMU: sluice %s, socket files left: %s%s" % (
        describe(p.returncode), left or "none", " FAILED" if left else ""))
    return ok and not left


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sluice", required=True)
    ap.add_argument("--guests", required=True)
    args = ap.parse_args()
    common.qemu_dir()
    common.need_file(args.sluice, "sluice")
    ok = True
    with tempfile.TemporaryDirectory(prefix="sluice-exit-") as tmp:
        for arch in common.ARCHES:
            prog = common.need_file(os.path.join(args.guests, "exitcode-" + arch),
                                    "guest exitcode-" + arch)
            for case in CASES:
                rc0, out0, _ = common.run(common.cmd_plain(arch, prog, [case]))
                out = os.path.join(tmp, "stats.out")
                rc1, out1, err1 = common.run(common.cmd_sluice(args.sluice, "stats", out, prog, [case]))
                good = rc1 == rc0 and out1 == out0
                print("%s %s: qemu %s, sluice %s%s%s" % (
                    arch, case, describe(rc0), describe(rc1),
                    "" if out1 == out0 else " (stdout %r, want %r)" % (out1, out0),
                    "" if good else " FAILED; sluice stderr: %r" % err1[-300:]))
                ok = ok and good

        # a 32-bit ARM ELF: the mipsel guest with e_machine set to EM_ARM (40)
        arm = os.path.join(tmp, "arm32")
        with open(os.path.join(args.guests, "exitcode-mipsel"), "rb") as f:
            data = bytearray(f.read())
        data[18:20] = (40).to_bytes(2, "little")
        with open(arm, "wb") as f:
            f.write(data)
        os.chmod(arm, 0o755)
        text = os.path.join(tmp, "text")
        with open(text, "w") as f:
            f.write("#!/bin/sh\necho not an ELF file\n")
        os.chmod(text, 0o755)
        ok = usage_error(args, tmp, "32-bit ARM ELF", arm) and ok
        ok = usage_error(args, tmp, "text file", text) and ok
        ok = usage_error(args, tmp, "missing program", os.path.join(tmp, "no-such-program")) and ok
        os.chmod(arm, 0o644)
        ok = usage_error(args, tmp, "not executable", arm) and ok
        ok = usage_error(args, tmp, "unknown tool", text, "bogus") and ok
        ok = usage_error(args, tmp, "dump option with stats", text, "stats", ["--lines"]) and ok
        ok = usage_error(args, tmp, "--raw with --no-disasm", text, "dump", ["--no-disasm"]) and ok
        for sig in (signal.SIGTERM, signal.SIGINT):
            ok = signal_reaches_guest(args, tmp, sig) and ok
        ok = outlived(args, tmp, False, signal.SIGTERM) and ok
        ok = outlived(args, tmp, False, signal.SIGINT) and ok
        ok = outlived(args, tmp, True, signal.SIGTERM) and ok
        ok = term_no_fork(args, tmp) and ok
        ok = signal_while_waiting(args, tmp) and ok
        ok = no_socket_left(args, tmp) and ok
    if not ok:
        common.fail("exit: sluice does not end like its guest")
    print("exit: all ok")


if __name__ == "__main__":
    sys.exit(main())
