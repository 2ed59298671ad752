#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""status: the status line of `sluice run` on a terminal, and nothing elsewhere.

attachloop 3 (x86_64, 8 threads for 3 s) under `sluice run --tool stats -o FILE`:
  tty      stderr a pseudo-terminal, stdout a pipe: the line is rewritten in
           place ("\\r", erase to end of line) at least twice, says elapsed
           seconds, events/s, events, threads and lost, and is erased at the
           end (nothing of it left on the last line); the guest's stdout and
           the stats file are as without a terminal
  notty    stderr a pipe: no status line, no escape sequence
  guesttty stdout and stderr the same terminal (the guest writes there): none
  outtty   -o /dev/stderr, the terminal itself: none (it landed in the report)

and a dump whose lines trickle in (trickle 4: tick() 10 times a second, the range
filter over tick()): `-o FILE` holds lines within 2 s of the start, not only at the
end (it was written every 4096 lines or at the end).

  status.py --sluice build/consumer/sluice --guests build/tests/e2e
"""

import argparse
import os
import pty
import re
import subprocess
import sys
import tempfile
import time

import common

ERASE = b"\r\x1b[K"
LINE = re.compile(rb"sluice: (\d+) s, [\d.]+ M events/s, [\d.]+ M events, (\d+) threads?, lost 0")


def run(args, tmp, name, tty_err, tty_out, out=None):
    """(exit, guest stdout, stderr bytes as the terminal or pipe got them, stats file text)."""
    report = out
    out = out or os.path.join(tmp, name + ".stats")
    cmd = [args.sluice, "run", "--tool", "stats", "-o", out, "--",
           os.path.join(args.guests, "attachloop-x86_64"), "3"]
    master = slave = None
    if tty_err:
        master, slave = pty.openpty()
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                         stdout=slave if tty_out else subprocess.PIPE,
                         stderr=slave if tty_err else subprocess.PIPE,
                         env=common.guest_env(sluice=True), start_new_session=True)
    got = b""
    if tty_err:
        os.close(slave)
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every holder of the slave closed it
                break
            if not data:
                break
            got += data
        os.close(master)
        stdout = b"" if tty_out else p.stdout.read()
    else:
        stdout, got = p.communicate(timeout=120)
    rc = p.wait(timeout=120)
    if report:
        return rc, stdout, got, b""
    with open(out, "rb") as f:
        return rc, stdout, got, f.read()


def trickle(args, tmp):
    """Lines in a dump file while a guest's few lines a second come. Problems, or []."""
    prog = os.path.join(args.guests, "trickle-x86_64")
    nm = subprocess.run(["nm", "-S", prog], capture_output=True, text=True).stdout
    lo, size = next((int(f[0], 16), int(f[1], 16)) for f in (l.split() for l in nm.splitlines())
                    if len(f) == 4 and f[3] == "tick")
    out = os.path.join(tmp, "trickle.dump")
    p = subprocess.Popen([args.sluice, "run", "--filter", os.path.join(args.filters, "range.bpf.o"),
                          "--set", "lo=%#x" % lo, "--set", "hi=%#x" % (lo + size), "--tool", "dump",
                          "--raw", "-o", out, "--", prog, "4"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=common.guest_env(sluice=True), start_new_session=True)
    time.sleep(2.5)
    early = os.path.getsize(out) if os.path.exists(out) else 0
    stdout, err = p.communicate(timeout=60)
    final = os.path.getsize(out) if os.path.exists(out) else 0
    print("trickle: %d bytes in the dump after 2.5 s, %d at the end (exit %s)"
          % (early, final, p.returncode))
    if p.returncode != 0 or b"tick calls 40" not in stdout or not final:
        return ["trickle: exit %s, stdout %r, stderr %r" % (p.returncode, stdout, err[-300:])]
    return [] if early else ["trickle: nothing in the dump file 2.5 s into a 4 s run"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sluice", required=True)
    ap.add_argument("--guests", required=True)
    ap.add_argument("--filters", required=True)
    args = ap.parse_args()
    common.qemu_dir()
    problems = []
    with tempfile.TemporaryDirectory(prefix="sluice-status-") as tmp:
        rc, out, err, stats = run(args, tmp, "tty", True, False)
        shown = [m for m in LINE.finditer(err) if err[:m.start()].endswith(ERASE)]
        secs = [int(m.group(1)) for m in shown]
        erased = bool(shown) and err.rfind(ERASE) > shown[-1].start()
        if rc != 0 or b"attachloop:" not in out or not stats:
            problems.append("tty: exit %s, stdout %r, stats %r" % (rc, out[-200:], stats[-200:]))
        if len(shown) < 2 or secs != sorted(secs) or max(int(m.group(2)) for m in shown) < 8:
            problems.append("tty: %d status lines (seconds %s), want 2 or more rewritten in place"
                            " with 8+ threads; stderr %r" % (len(shown), secs, err[-300:]))
        if not erased:
            problems.append("tty: the last status line was left on the terminal: %r" % err[-200:])
        print("tty: %d status lines, seconds %s, erased at the end: %s" % (len(shown), secs, erased))
        for name, tty_out in (("notty", None), ("guesttty", True)):
            rc, _, err, _ = run(args, tmp, name, tty_out is not None, bool(tty_out))
            if rc != 0 or b"\x1b" in err or b"events/s" in err:
                problems.append("%s: exit %s, a status line where none belongs: %r"
                                % (name, rc, err[-300:]))
            print("%s: exit %s, no status line: %s" % (name, rc, b"events/s" not in err))
        # -o naming the terminal itself: the line would end up inside the report (it did).
        rc, _, err, _ = run(args, tmp, "outtty", True, False, out="/dev/stderr")
        if rc != 0 or b"\x1b" in err or b"thread" not in err:
            problems.append("outtty: exit %s, a status line in the report, or no report: %r"
                            % (rc, err[-300:]))
        print("outtty: exit %s, no status line: %s" % (rc, b"\x1b" not in err))
        problems += trickle(args, tmp)
    if problems:
        common.fail("status: " + "; ".join(problems))
    print("status: ok")


if __name__ == "__main__":
    main()
