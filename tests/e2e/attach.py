#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""attach: consumers attached to and detached from a running traced guest.

The guest (tests/guests/attachloop.c, x86_64: 8 threads for a given time and
short-lived ones) runs under `sluice run --tool stats --json`, the reference
plugin (tests/plugin/reftrace.c) in the same QEMU; in every case that run must
exit 0 with an untraced run's stdout and count exactly what the reference does.

  windows  `--wait-attach 1`: the guest waits for a `sluice attach --tool dump`
           whose dump must equal the reference's; meanwhile 14 workers attach
           and detach (SIGINT after 20-300 ms) 200-320 times: each exits 0 and
           each thread's events in each window are contiguous in the reference
           (or, in at most 1 of 20, exits 2: interrupted before QEMU took it in)
  kill     attaches SIGKILLed mid-handshake and mid-stream are dropped (QUERY);
           a QEMU whose `sluice run --wait-attach 1` was SIGKILLed starts its guest
  uid      the jitter refuses a peer of another uid (SO_PEERCRED)
  garbage  malformed datagrams and silent connections are refused or closed;
           `sluice attach` out of descriptors (ulimit -n 5..7) says so; QUERY
           and `sluice attach` work afterwards
  ls       `sluice ls [--json]` lists traced guests, a stopped one as not
           answering, not SIGKILLed or exited ones, nor ones that ended as they
           were asked; `sluice attach` of a gone or untraced pid exits 2
  lossy    lossy consumers: delivered + lost equals the reference, per thread
  rogue    a consumer scribbling on its own tail words stalls nobody
  zero     QEMU -jitter, attached to one consumer at a time: every window is
           contiguous in the reference (re-translation at each attach/detach)
  bare     QEMU -jitter with no consumer lifts QEMU's own TCG ops (-d op)
  forks    QEMU -jitter running forkloop, 30 attach windows on x86_64 and
           aarch64: every child forked inside a window is traced whole
  once     QEMU -jitter with the coverage filter, one consumer at a time: no
           window records a pc twice, and none is left empty by those before it;
           one attached while another is says how many pcs it will not see
  stopped  two lossy consumers, one SIGSTOPped: the jitter drops it alone (it holds
           too many ended threads' rings), it exits once continued and says why (also
           when it is told to detach first);
           the other's delivered + lost equals the reference, per thread; the
           guest's rings hold a bounded amount of memory meanwhile
  slowlossy a lossy dump slower than a guest that ends many busy threads is not
           dropped: what it could not read in time is counted lost, exactly; the
           guest's rings hold a bounded amount of memory meanwhile
  laggy    the same for one whose output is read slowly: it lags far behind (more
           than 128 taken rings unread) but reads, and is not dropped
  detachlag one that lags told to detach: it reads its control socket on while it
           delivers what came before, is not dropped, and exits 0

  execsock a traced shell's commands (fork, exec) leave no socket file behind; a
           process whose execve failed is listed again

windows, kill, uid and execsock use a private XDG_RUNTIME_DIR, garbage and ls none.

  attach.py CASE --sluice build/consumer/sluice --plugin build/tests/e2e/libreftrace.so
            --guests build/tests/e2e [--keep DIR]
"""

import argparse
import collections
import itertools
import json
import os
import random
import re
import resource
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

import common

CTL = struct.Struct("=IIIIIIQQ16s96s16sIIIIQQII")  # include/sluice/ctl.h, version 4
FIELDS = ("type version pid tid slot lossless ring_bytes offset arch error comm threads "
          "consumers lossless_consumers waiting lost tail_bytes line once_before").split()
HELLO, WELCOME, RING, REFUSED, QUERY, INFO = 1, 2, 3, 4, 5, 6
NOBODY = 65534
# 14 workers: 16 consumer slots (record.h) less sluice run's own and the whole-run attach.
# A window's time is mostly its dump's CPU (ASan, 14 at once on two cores), which grows with the
# guest's speed: 20 s of guest made 132 and 154 windows on a faster host, 30 s 187 to 248 on
# this one (a fresh-clone CI failed at 187); 45 s leaves room.
WIN_SECONDS, WORKERS, MIN_WINDOWS, MAX_WINDOWS = 45, 14, 200, 320
PROCS = []


def msg(kind, version=4, lossless=0):
    return CTL.pack(kind, version, 0, 0, 0, lossless, 0, 0, b"", b"", b"", 0, 0, 0, 0, 0, 0, 0, 0)


def answer(s, timeout=10):
    """(what the jitter answered, the message or None)."""
    s.settimeout(timeout)
    try:
        d = s.recv(1 << 17)
    except TimeoutError:
        return "no answer in %d s" % timeout, None
    except OSError as e:
        return "reset (%s)" % e.strerror, None
    if len(d) != CTL.size:
        return "a %d-byte reply" % len(d) if d else "closed", None
    m = dict(zip(FIELDS, CTL.unpack(d)))
    for k in ("arch", "error", "comm"):
        m[k] = m[k].split(b"\0")[0].decode(errors="replace")
    return ("refused: %s" % m["error"] if m["type"] == REFUSED else "type %d" % m["type"]), m


def connect(path):
    """A connection to path; retried for 10 s while the listen backlog is full (EAGAIN)."""
    s, end = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET), time.monotonic() + 10
    s.settimeout(10)
    while True:
        try:
            s.connect(path)
            return s
        except BlockingIOError:
            if time.monotonic() > end:
                raise
            time.sleep(0.01)


def query(path):
    with connect(path) as s:
        s.send(msg(QUERY))
        what, m = answer(s)
    if not m or m["type"] != INFO:
        common.fail("QUERY to %s: %s, not INFO" % (path, what))
    return m


def start(c, cmd, name, xdg, extra=None, **kw):
    """Starts cmd in a session of its own, stdout and stderr to files NAME.out, NAME.err."""
    env = common.guest_env(sluice=True)
    env.pop("XDG_RUNTIME_DIR", None)
    env.update(extra or {}, **({"XDG_RUNTIME_DIR": xdg} if xdg else {}))
    files = [os.path.join(c.tmp, name + s) for s in (".out", ".err")]
    with open(files[0], "wb") as out, open(files[1], "wb") as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, start_new_session=True, **kw)
    p.name, p.files = name, files
    PROCS.append(p)
    return p


def finish(p, timeout):
    """(returncode, stdout, stderr); returncode None if p ran over timeout (then killed)."""
    try:
        rc = p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        rc = None
    return (rc,) + tuple(slurp(f) for f in p.files)


def slurp(path):
    with open(path, "rb") as f:
        return f.read()


def sigint_ready(pid, timeout=20):
    """Waits until pid catches or blocks SIGINT (so that a SIGINT means: detach, not die)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            st = slurp("/proc/%d/status" % pid)
        except OSError:
            return False
        masks = re.findall(rb"Sig(?:Blk|Cgt):\s*(\w+)", st)
        if any(int(v, 16) & 1 << signal.SIGINT - 1 for v in masks):
            return True
        time.sleep(0.005)
    return False


def descends(pid, ancestor):
    for _ in range(4):
        try:
            pid = int(slurp("/proc/%d/stat" % pid).rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
        if pid == ancestor:
            return True
    return False


def is_qemu(pid, ancestor):
    """Whether pid is a QEMU with a jitter below ancestor. A stale <pid>.sock (a QEMU
    killed earlier) may bear the number of a thread or of the `qemu -h` precheck now."""
    try:
        tgid = re.search(rb"^Tgid:\s*(\d+)", slurp("/proc/%d/status" % pid), re.M)
        argv = slurp("/proc/%d/cmdline" % pid).split(b"\0")
    except OSError:
        return False
    return (tgid is not None and int(tgid.group(1)) == pid and b"-jitter" in argv
            and descends(pid, ancestor))


def split_dump(path, other=None):
    """A dump as {tid: b"\\n" + that thread's events, one per line, each ending in "\\n"}.

    Lines that are no event fail, or are appended to the list other.
    """
    chunks = collections.defaultdict(list)
    with open(path, "rb") as f:
        while lines := f.readlines(1 << 22):
            per = collections.defaultdict(list)
            for line in lines:
                tid, _, ev = line.partition(b" ")
                if not tid.isdigit() or len(ev) < 2 or not ev.endswith(b"\n"):
                    if other is None:
                        common.fail("%s: not a dump line: %r" % (path, line[:200]))
                    other.append(line)
                else:
                    per[tid].append(ev)
            for tid, evs in per.items():
                chunks[tid].append(b"".join(evs))
    return {tid: b"\n" + b"".join(c) for tid, c in chunks.items()}


class Ctx:
    def __init__(self, args, tmp):
        self.args, self.tmp, self.problems = args, tmp, []
        self.prog = common.need_file(os.path.join(args.guests, "attachloop-x86_64"),
                                     "guest attachloop-x86_64")
        self.xdg = os.path.join(tmp, "xdg")
        os.makedirs(self.xdg, 0o700, exist_ok=True)

    def path(self, name):
        return common.fresh(os.path.join(self.tmp, name))

    def jitter(self):
        return common.jitter_path(self.args.sluice)

    def check(self, ok, what):
        if not ok:
            self.problems.append(what)
            print("  PROBLEM: " + what)
        sys.stdout.flush()
        return ok

    def attach(self, pid, name, xdg, tool="dump", extra=(), **kw):
        out = self.path(name + "." + tool)
        return start(self, [self.args.sluice, "attach", str(pid), "--tool", tool, "-o", out]
                     + common.raw(tool) + list(extra), name, xdg, **kw), out

    def stats_window(self, run, name, seconds):
        """`sluice attach --tool stats --json` for seconds: (exit, insns or why not, stderr)."""
        p, out = self.attach(run.pid, name, run.xdg, "stats", ["--json"])
        sigint_ready(p.pid)
        time.sleep(seconds)
        p.send_signal(signal.SIGINT)
        rc, _, err = finish(p, 60)
        try:
            return rc, json.loads(slurp(out))["total"]["insns"], err
        except (OSError, ValueError, KeyError, TypeError) as e:
            return rc, "no report (%s)" % e, err


class Run:
    """attachloop SECONDS (or cmd) under `sluice run --tool stats --json`, the plugin (mode)
    alongside; env: more of sluice's environment; plain: the untraced run's command, if
    not cmd."""

    def __init__(self, c, name, seconds, xdg, mode="count", wait=0, cmd=None, env=None,
                 plain=None):
        self.c, self.name, self.mode, self.xdg = c, name, mode, xdg
        self.dir = os.path.join(xdg, "sluice") if xdg else "/tmp/sluice-%d" % os.getuid()
        self.stats, self.ref = c.path(name + ".json"), c.path(name + ".ref")
        plugin = {"QEMU_PLUGIN": "%s,out=%s,mode=%s" % (c.args.plugin, self.ref, mode)}
        cmd = cmd or [c.prog, str(seconds)]
        plain = plain or cmd
        self.plain = start(c, common.cmd_plain("x86_64", plain[0], plain[1:]), name + "-0", xdg)
        self.p = start(c, [c.args.sluice, "run"] + (["--wait-attach", str(wait)] if wait else [])
                       + ["--tool", "stats", "--json", "-o", self.stats, "--"] + cmd, name, xdg,
                       dict(plugin if mode else {}, **(env or {})))
        end = time.monotonic() + 30
        while time.monotonic() < end and self.p.poll() is None:
            for f in os.listdir(self.dir) if os.path.isdir(self.dir) else []:
                if re.fullmatch(r"\d+\.sock", f) and is_qemu(int(f[:-5]), self.p.pid):
                    self.pid, self.sock = int(f[:-5]), os.path.join(self.dir, f)
                    st = os.stat(self.dir)
                    c.check(st.st_mode & 0o777 == 0o700 and st.st_uid == os.getuid(),
                            "%s: mode %o, owner %d" % (self.dir, st.st_mode & 0o777, st.st_uid))
                    print("%s: QEMU pid %d, socket %s" % (name, self.pid, self.sock))
                    return
            time.sleep(0.02)
        rc, _, err = finish(self.p, 5)
        common.fail("%s: no %s/<pid>.sock of sluice run's QEMU (sluice %s, stderr %r)"
                    % (name, self.dir, rc, err[-400:]))

    def finish(self, timeout, ref_rows=None):
        c = self.c
        rc, out, err = finish(self.p, timeout)
        rc0, out0, _ = finish(self.plain, 60)
        c.check(rc == 0 and rc0 == 0 and out == out0, "%s: sluice run exit %s stdout %r, untraced "
                "exit %s stdout %r; stderr %r" % (self.name, rc, out, rc0, out0, err[-600:]))
        if not self.mode:
            return
        if ref_rows is None:  # count mode: "<pid> <tid> insns=N loads=N stores=N"
            ref_rows = [tuple(int(kv.split(b"=")[1]) for kv in line.split()[2:5])
                        for line in slurp(self.ref).splitlines()]
        try:
            st = json.loads(slurp(self.stats))
            rows = sorted((t["insns"], t["loads"], t["stores"]) for t in st["threads"])
            total = tuple(st["total"][k] for k in ("insns", "loads", "stores"))
            lost = st["total"]["lost"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            return c.check(False, "%s: no stats JSON (%s)" % (self.name, e))
        want = tuple(map(sum, zip(*ref_rows)))
        c.check(total == want and rows == sorted(ref_rows) and lost == 0,
                "%s: stats total %s (%d threads, %d lost), reference %s (%d threads)"
                % (self.name, total, len(rows), lost, want, len(ref_rows)))
        print("%s: sluice run exit %s, stats total (insns, loads, stores) %s, reference %s, "
              "%d threads" % (self.name, rc, total, want, len(rows)))


class ArenaPeak(threading.Thread):
    """Samples, every 20 ms until stop(), the bytes of memory the rings of QEMU process pid
    hold: the allocated blocks of its ring file (the jitter's memfd "sluice-rings"); peak
    is the most seen."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.peak, self.done = pid, 0, threading.Event()
        self.start()

    def run(self):
        while not self.done.wait(0.02):
            try:
                self.peak = max(self.peak, common.arena_bytes(self.pid) or 0)
            except OSError:
                return  # the process ended

    def stop(self):
        self.done.set()
        self.join()
        return self.peak


def case_windows(c):
    run = Run(c, "windows", WIN_SECONDS, c.xdg, mode="dump", wait=1)
    info = query(run.sock)
    time.sleep(0.5)
    size = os.path.getsize(run.ref) if os.path.exists(run.ref) else 0
    c.check(info["waiting"] and size == 0 and info["pid"] == run.pid, "before the attach: INFO "
            "%s, the reference dump has %d bytes (the guest ran?)" % (info, size))
    line = re.search(rb"pid (\d+) waits for 1 consumer.*sluice attach (\d+)", slurp(run.p.files[1]))
    c.check(line and int(line.group(1)) == run.pid == int(line.group(2)),
            "--wait-attach 1: stderr has %r, QEMU pid %d" % (line and line.group(0), run.pid))
    full, full_out = c.attach(run.pid, "full", c.xdg)
    stop_at = time.monotonic() + WIN_SECONDS - 3
    lock, seq, results, live = threading.Lock(), itertools.count(), [], [0, 0]

    def worker(rnd):
        while True:
            time.sleep(rnd.uniform(0, 0.2))
            with lock:
                k = next(seq)
                if k >= MAX_WINDOWS or time.monotonic() > stop_at:
                    return
                live[0] += 1
                live[1] = max(live)
            # Every third window lossy: it must still be contiguous, or tell its gaps exactly.
            p, out = c.attach(run.pid, "win-%d" % k, c.xdg, extra=["--lossy"] if k % 3 == 2 else [])
            ready = sigint_ready(p.pid)
            time.sleep(rnd.uniform(0.02, 0.3))
            p.send_signal(signal.SIGINT)
            rc, _, err = finish(p, 60)
            with lock:
                live[0] -= 1
                results.append((k, rc, ready, err, out))

    threads = [threading.Thread(target=worker, args=(random.Random(n),)) for n in range(WORKERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rc, _, err = finish(full, WIN_SECONDS + 120)
    c.check(rc == 0, "the waited-for attach: exit %s, stderr %r" % (rc, err[-400:]))
    ref = split_dump(run.ref)
    run.finish(120, [(t.count(b"\nEXEC "), t.count(b"\nREAD"), t.count(b"\nWRITE"))
                     for t in ref.values()])
    other = []  # lines in the attaches' dumps that are no event
    got = split_dump(full_out, other) if os.path.exists(full_out) else {}
    if c.check(got == ref, "the waited-for attach's dump (%d threads) differs from the "
               "reference (%d threads)" % (len(got), len(ref))):
        print("waited-for attach: its dump equals the reference: %d threads, %d events"
              % (len(ref), sum(ref[t].count(b"\n") - 1 for t in ref)))
    for tid in [t for t in ref if got.get(t) != ref[t]][:2]:
        e, a = ref[tid][1:-1].split(b"\n"), got.get(tid, b"\n")[1:-1].split(b"\n")
        common.show_difference("thread %s" % tid.decode(), e, a, common.first_difference(e, a))
    del got
    c.check(len(results) >= MIN_WINDOWS, "%d attach windows, want %d" % (len(results), MIN_WINDOWS))
    bad, nonempty, events, lossy_gaps, early = [], 0, 0, 0, 0
    for k, rc, ready, err, out in sorted(results):
        # A window of 20 ms may end before QEMU takes it in (14 attaches at once under ASan on
        # two cores): then exit 2 saying so and nothing traced is the right answer, if rare.
        if rc == 2 and err.endswith(b"before the traced process took this consumer in "
                                    b"(stopped, or out of descriptors?): nothing was traced\n"):
            early += 1
            continue
        if rc != 0 or not os.path.exists(out):
            bad.append("window %d: exit %s (SIGINT %s), stderr %r"
                       % (k, rc, "caught" if ready else "not caught", err[-300:]))
            continue
        win = split_dump(out, other)
        nonempty += bool(win)
        for tid, text in win.items():
            events += text.count(b"\n") - 1
            if b"\nLOST " in text and tid in ref and k % 3 == 2:
                why = gaps_ok(ref[tid], text)
                lossy_gaps += 1
                if why:
                    bad.append("lossy window %d thread %s: %s" % (k, tid.decode(), why))
                continue
            if b"\nLOST " in text or tid not in ref or ref[tid].find(text) < 0:
                lines, r, lo = text[1:-1].split(b"\n"), ref.get(tid, b"\n"), 0
                hi = len(lines)
                while lo < hi:  # the longest prefix that is contiguous in the reference
                    mid = (lo + hi + 1) // 2
                    found = r.find(b"\n" + b"\n".join(lines[:mid]) + b"\n") >= 0
                    lo, hi = (mid, hi) if found else (lo, mid - 1)
                bad.append("window %d thread %s: %d events, the first %d are contiguous in the "
                           "reference, then %r" % (k, tid.decode(), len(lines), lo,
                                                   (lines + [b"<end>"])[lo][:120]))
    if other:
        bad.insert(0, "%d lines of the attaches' dumps are no event, e.g. %r"
                   % (len(other), other[0]))
    for b in bad[:5] + (["... %d problems in all" % len(bad)] if len(bad) > 5 else []):
        c.check(False, b)
    c.check(nonempty * 2 >= len(results), "only %d of %d windows saw events"
            % (nonempty, len(results)))
    c.check(early * 20 <= len(results), "%d of %d windows were interrupted before QEMU took "
            "them in" % (early, len(results)))
    print("windows: %d attach/detach cycles (every third lossy; %d lossy threads had gaps), at "
          "most %d at once, %d saw events (%d events in all), %d interrupted before taken in, "
          "%d problems" % (len(results), lossy_gaps, live[1], nonempty, events, early, len(bad)))


def gaps_ok(ref, text):
    """Why the lossy window text is not the reference's events in order with a gap of exactly
    n events at each LOST n, or None. Both are b"\n" + events, one per line."""
    lines = text[1:-1].split(b"\n")
    segs, gaps, cur = [], [], []
    for line in lines:
        if line.startswith(b"LOST "):
            segs.append(cur)
            gaps.append(int(line[5:]))
            cur = []
        else:
            cur.append(line)
    segs.append(cur)
    k = next((i for i, seg in enumerate(segs) if seg), None)
    if k is None:
        return None  # only LOST: nothing to place
    off = ref.find(b"\n" + b"\n".join(segs[k]) + b"\n")
    if off < 0:
        return "its events before the first LOST are not contiguous in the reference"
    at = ref.count(b"\n", 0, off + 1) - 1  # line index of segs[k][0]
    at -= sum(len(s) for s in segs[:k]) + sum(gaps[:k])
    rl = ref[1:-1].split(b"\n")
    for i, seg in enumerate(segs):
        if rl[at:at + len(seg)] != seg:
            return "segment %d (%d events) is not the reference's at event %d" % (i, len(seg), at)
        at += len(seg) + (gaps[i] if i < len(gaps) else 0)
    return None


# record.h, format 7: a consumer's words for a ring are a 64-byte line of its tail file
# (WELCOME's descriptor; RING's `line`): tail u64 @0, tail_futex u32 @8, head_waiting u32 @12.
# The ring header (the arena, read-only for consumers) has the slots at byte 384, 64 bytes
# each: active u32 @0, lossless u32 @4, producer_waiting u32 @8, lost_seq u32 @12.
SLOTS_AT, SLOT_BYTES, LINE_BYTES = 384, 64, 64


def rogue(path, seconds):
    """A lossy consumer that writes garbage into its own tail file for every ring it is given
    (tail 0: a whole ring unread; random futex words; head_waiting set), and tries what it must
    not be able to do: map a ring header writable (to mark itself lossless, or a ghost
    lossless slot), truncate the arena or its tail file. In a loop, for seconds; run as a
    child (case_rogue). Prints what it did and what it could do."""
    import mmap
    s = connect(path)
    s.send(msg(HELLO, lossless=0))
    lines, tails, tail_fd = [], None, -1
    end, rnd, could = time.monotonic() + seconds, random.Random(7), set()
    s.settimeout(0.01)
    while time.monotonic() < end:
        try:
            data, fds, _, _ = socket.recv_fds(s, CTL.size, 4)
        except (TimeoutError, BlockingIOError):
            data, fds = None, []
        if data:
            m = dict(zip(FIELDS, CTL.unpack(data)))
            for fd in fds:
                if m["type"] == WELCOME and tail_fd < 0:
                    tail_fd = os.dup(fd)
                if m["type"] == RING:
                    lines.append(m["line"])
                    try:  # it has grown to hold the line
                        os.ftruncate(tail_fd, 0)
                        could.add("shrink its tail file")
                    except OSError:
                        pass
                    try:
                        hdr = mmap.mmap(fd, 4096, offset=m["offset"])  # read-write, shared
                        could.add("map a ring header writable")
                        at = SLOTS_AT + SLOT_BYTES * m["slot"]
                        hdr[at:at + 8] = struct.pack("<II", 1, 1)  # "lossless"
                        ghost = SLOTS_AT + SLOT_BYTES * (15 if m["slot"] != 15 else 14)
                        hdr[ghost:ghost + 8] = struct.pack("<II", 1, 1)
                    except (OSError, ValueError):
                        pass
                    try:
                        os.ftruncate(fd, 0)
                        could.add("truncate the arena")
                    except OSError:
                        pass
                os.close(fd)
            if lines and LINE_BYTES * (max(lines) + 1) > (len(tails) if tails else 0):
                tails = mmap.mmap(tail_fd, os.fstat(tail_fd).st_size)  # it grew
        for line in lines:
            at = LINE_BYTES * line
            tails[at:at + 8] = struct.pack("<Q", 0)  # a whole ring unread, were it lossless
            tails[at + 8:at + 16] = struct.pack("<II", rnd.getrandbits(32), rnd.getrandbits(32))
    print("rogue: scribbled on %d rings' lines; could %s" % (
        len(lines), ", ".join(sorted(could)) if could else "do nothing else"))


def case_rogue(c):
    """A lossy consumer scribbling on its own tail and futex words for the whole run must
    neither stall the guest nor change what the others get (sluice run's own counts and a
    lossless attach's equal the reference's); and it can neither map a ring header writable
    (to claim to be lossless, or mark a ghost lossless slot) nor resize the shared files."""
    run = Run(c, "rogue", 8, c.xdg, wait=2, env={"SLUICE_RING_BYTES": "256K"})  # rings lap
    bad = start(c, ["/usr/bin/python3", "-BEs", os.path.abspath(__file__), "scribble", run.sock,
                    "30"], "scribbler", c.xdg)
    good, good_out = c.attach(run.pid, "rogue-good", c.xdg, "stats", ["--json"])
    t0 = time.monotonic()
    run.finish(60)
    # 8 s of guest; the rogue scribbles for 30 s: a producer that took it for lossless would
    # wait for it until it leaves.
    c.check(time.monotonic() - t0 < 20, "the guest took %.0f s" % (time.monotonic() - t0))
    rc, _, err = finish(good, 60)
    want = sum(sum(int(kv.split(b"=")[1]) for kv in line.split()[2:5])
               for line in slurp(run.ref).splitlines())
    try:
        t = json.loads(slurp(good_out))["total"]
        have = (t["insns"] + t["loads"] + t["stores"], t["lost"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        have = "no report (%s)" % e
    c.check(rc == 0 and have == (want, 0), "the lossless attach beside the rogue: exit %s, "
            "(events, lost) %s, reference %d; stderr %r" % (rc, have, want, err[-300:]))
    rc, out, err = finish(bad, 60)
    c.check(rc == 0, "the rogue: exit %s %r" % (rc, (out + err)[-300:]))
    c.check(b"could do nothing else" in out, "the rogue: %r" % out.strip()[-300:])
    print("%s; beside it a lossless attach got %s events (reference %d) and the guest finished"
          % (out.decode().strip(), have, want))


def case_zero(c):
    """A guest run by QEMU -jitter with nobody attached is not instrumented; each attach (one at
    a time, so every one is the first) has every TB re-translated before its stream starts and
    each detach has them re-translated without records. So every window must still be a
    contiguous run of the reference's events, per thread: a TB left from before a flush would
    leave a gap (or none would be recorded at all)."""
    jitter = c.jitter()
    ref_path = c.path("zero.ref")
    plain = start(c, common.cmd_plain("x86_64", c.prog, ["12"]), "zero-0", c.xdg)
    g = start(c, [common.qemu_bin("x86_64"), "-jitter", jitter, c.prog, "12"], "zero", c.xdg,
              {"QEMU_PLUGIN": "%s,out=%s,mode=dump" % (c.args.plugin, ref_path)})
    sock, end = os.path.join(c.xdg, "sluice", "%d.sock" % g.pid), time.monotonic() + 20
    while not os.path.exists(sock) and time.monotonic() < end:
        time.sleep(0.02)
    rnd, wins = random.Random(3), []
    for k in range(25):
        # nobody attached meanwhile; the first comes at once, maybe before the guest's first
        # thread (whose start must then turn instrumenting on: no vCPU took the flush yet)
        time.sleep(rnd.uniform(0.05, 0.3) if k else 0)
        if g.poll() is not None or time.monotonic() > end - 9:
            break
        p, out = c.attach(g.pid, "zero-%d" % k, c.xdg)
        sigint_ready(p.pid)
        time.sleep(rnd.uniform(0.1, 0.4))
        p.send_signal(signal.SIGINT)
        rc, _, err = finish(p, 60)
        c.check(rc == 0, "window %d: exit %s, stderr %r" % (k, rc, err[-300:]))
        wins.append(out)
    rc, out, err = finish(g, 60)
    rc0, out0, _ = finish(plain, 60)
    c.check(rc == 0 and out == out0, "QEMU -jitter: exit %s stdout %r, untraced exit %s stdout %r"
            "; stderr %r" % (rc, out, rc0, out0, err[-300:]))
    ref, nonempty, events = split_dump(ref_path), 0, 0
    for k, out in enumerate(wins):
        win = split_dump(out) if os.path.exists(out) else {}
        nonempty += bool(win)
        for tid, text in win.items():
            events += text.count(b"\n") - 1
            c.check(tid in ref and ref[tid].find(text) >= 0, "window %d thread %s: %d events, "
                    "not contiguous in the reference" % (k, tid.decode(), text.count(b"\n") - 1))
    c.check(len(wins) >= 10 and nonempty == len(wins), "%d of %d windows saw events"
            % (nonempty, len(wins)))
    print("zero: %d attaches to a process nobody else traced, each contiguous in the reference "
          "(%d events in all)" % (len(wins), events))


def window_pcs(path):
    """The pcs of a raw dump's EXEC lines, in order."""
    return re.findall(rb"^\d+ EXEC (0x[0-9a-f]+)$", slurp(path), re.M) if os.path.exists(path) \
        else []


def case_once(c):
    """QEMU -jitter with a Once filter (coverage) and one consumer at a time: each window records
    each pc at most once, and a window after a time with nobody attached is told of the pcs
    that still run (the guest's threads loop the whole time), not left empty because earlier
    windows had them. Before the fix, every window after the first was empty."""
    cov = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(c.args.sluice))),
                       "filters", "coverage.bpf.o")
    g = start(c, [common.qemu_bin("x86_64"), "-jitter", c.jitter() + ",filter=" + cov, c.prog,
                  "8"], "once", c.xdg)
    sock, end = os.path.join(c.xdg, "sluice", "%d.sock" % g.pid), time.monotonic() + 20
    while not os.path.exists(sock) and time.monotonic() < end:
        time.sleep(0.02)
    wins = []
    for k in range(4):
        time.sleep(0.3)  # nobody attached meanwhile
        if g.poll() is not None:
            break
        p, out = c.attach(g.pid, "once-%d" % k, c.xdg)
        sigint_ready(p.pid)
        time.sleep(0.5)
        p.send_signal(signal.SIGINT)
        rc, _, err = finish(p, 60)
        c.check(rc == 0 and b"Once" not in err, "window %d: exit %s, stderr %r"
                % (k, rc, err[-300:]))
        wins.append(window_pcs(out))
    # One attached while another is: it is told how many pcs it will not see.
    first, _ = c.attach(g.pid, "once-first", c.xdg)
    sigint_ready(first.pid)
    time.sleep(0.4)
    late, late_out = c.attach(g.pid, "once-late", c.xdg)
    sigint_ready(late.pid)
    time.sleep(0.3)
    for p in (late, first):
        p.send_signal(signal.SIGINT)
    (rc1, _, err1), (rc2, _, err2) = finish(first, 60), finish(late, 60)
    m = re.search(rb"attach \d+: (\d+) pcs of its filter's Once instructions had been recorded",
                  err2)
    c.check(rc1 == 0 and rc2 == 0 and m and int(m.group(1)) > 0,
            "overlapping consumers: exits %s, %s; the late one's stderr %r"
            % (rc1, rc2, err2[-300:]))
    late_pcs = window_pcs(late_out)
    c.check(len(late_pcs) == len(set(late_pcs)), "the late consumer got pcs twice")
    rc, _, err = finish(g, 60)
    c.check(rc == 0, "QEMU -jitter: exit %s, stderr %r" % (rc, err[-300:]))
    c.check(len(wins) == 4, "%d windows of 4 ran before the guest ended" % len(wins))
    for k, pcs in enumerate(wins):
        c.check(len(pcs) == len(set(pcs)), "window %d: %d pcs recorded more than once"
                % (k, len(pcs) - len(set(pcs))))
        c.check(k == 0 or len(set(pcs) & set(wins[0])) > 0,
                "window %d: %d pcs, none of the %d of window 0 though the same loops ran"
                % (k, len(pcs), len(set(wins[0]))))
    print("once: %d windows, %s pcs each" % (len(wins), "/".join(str(len(w)) for w in wins)))


def tcg_ops(c, name, cmd):
    """The TCG ops QEMU lifted for cmd (-d op), host pointers (exit_tb's) left out."""
    log = c.path(name + ".ops")
    rc, _, err = common.run(cmd[:1] + ["-d", "op", "-D", log] + cmd[1:], timeout=120)
    c.check(rc == 0, "%s: exit %s, stderr %r" % (name, rc, err[-300:]))
    with open(log, "rb") as f:
        return re.sub(rb"exit_tb \$0x[0-9a-f]+", b"exit_tb $host", f.read())


def case_bare(c):
    """A QEMU -jitter nobody attaches to lifts exactly the TCG ops QEMU alone lifts: no cursor,
    no store, nothing (the zero-consumer cost is QEMU's own). memops makes helpers' accesses."""
    for arch in ("x86_64", "aarch64", "riscv64", "mipsel"):
        prog = common.need_file(os.path.join(c.args.guests, "memops-" + arch), "guest memops")
        plain = tcg_ops(c, "bare-plain-" + arch, common.cmd_plain(arch, prog, []))
        bare = tcg_ops(c, "bare-jitter-" + arch,
                       [common.qemu_bin(arch), "-jitter", c.jitter(), prog])
        a, b = plain.split(b"\n"), bare.split(b"\n")
        i = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        c.check(plain == bare and len(a) > 1000, "%s: QEMU -jitter with no consumer lifted other "
                "ops than QEMU alone (%d and %d lines), first at line %d: %r, not %r"
                % (arch, len(b), len(a), i + 1, b[i:i + 1], a[i:i + 1]))
        print("bare %s: %d lines of TCG ops, %s" % (arch, len(a), "the same" if plain == bare
                                                    else "different"))


def case_forks(c):
    """QEMU -jitter running forkloop (children forked one after another, two threads spinning),
    nobody else attached; 30 `sluice attach --tool stats --json` windows of 0.1-0.3 s per
    architecture. A child forked between an attach and the flush it asks for inherited the
    parent's uninstrumented code and answers, and no flush of its own: traced as 0 instructions,
    exit 0 (3 and 7 in 40 windows). A child forked before an attach is not the consumer's (it
    sees the children of the processes it attached to, forked while it is attached); every
    child a window shows but its last (which may outlive it) must show the instruction count
    every child has."""
    rnd = random.Random(11)
    for arch in ("x86_64", "aarch64"):
        prog = common.need_file(os.path.join(c.args.guests, "forkloop-" + arch), "guest forkloop")
        g = start(c, [common.qemu_bin(arch), "-jitter", c.jitter(), prog, "15"], "forks-" + arch,
                  c.xdg)
        sock, end = os.path.join(c.xdg, "sluice", "%d.sock" % g.pid), time.monotonic() + 20
        while not os.path.exists(sock) and time.monotonic() < end:
            time.sleep(0.02)
        counts = []  # (window, child pid, insns)
        for k in range(30):
            if g.poll() is not None:
                break
            p, out = c.attach(g.pid, "forks-%s-%d" % (arch, k), c.xdg, "stats", ["--json"])
            sigint_ready(p.pid)
            # The window starts once QEMU took the consumer in (a loaded machine took longer
            # than 0.1 s, and the SIGINT came first: exit 2, nothing traced, which is right).
            taken = time.monotonic() + 20
            while query(sock)["consumers"] < 1 and time.monotonic() < taken:
                time.sleep(0.005)
            time.sleep(rnd.uniform(0.1, 0.3))
            p.send_signal(signal.SIGINT)
            rc, _, err = finish(p, 60)
            c.check(rc == 0, "%s window %d: exit %s, stderr %r" % (arch, k, rc, err[-300:]))
            try:
                threads = json.loads(slurp(out))["threads"]
            except (OSError, ValueError, KeyError) as e:
                c.check(False, "%s window %d: no stats JSON (%s)" % (arch, k, e))
                continue
            # In the order their rings came (sluice_session__counts), not by pid: pids wrap
            # around (pid_max is 32768 here), which once put the last child first.
            kids = [(t["pid"], t["insns"]) for t in threads
                    if t["pid"] == t["tid"] and t["pid"] != g.pid]
            counts += [(k, pid, n) for pid, n in kids[:-1]]  # the last may outlive the window
        rc, out, err = finish(g, 60)
        c.check(rc == 0 and out.startswith(b"forkloop: some"), "%s guest: exit %s, stdout %r, "
                "stderr %r" % (arch, rc, out, err[-300:]))
        usual = collections.Counter(n for _, _, n in counts).most_common(1)
        odd = [(k, pid, n) for k, pid, n in counts if n != usual[0][0]] if usual else []
        c.check(len(counts) >= 20 and usual and usual[0][0] > 100000 and not odd,
                "%s: %d children inside windows, usual count %s, others (window, pid, insns): %s"
                % (arch, len(counts), usual[0][0] if usual else None, odd[:10]))
        print("forks %s: %d children inside %d windows, each %s instructions%s"
              % (arch, len(counts), k + 1, usual[0][0] if usual else "?",
                 "" if not odd else "; %d not" % len(odd)))


def case_kill(c):
    run = Run(c, "kill", 10, c.xdg)
    for k, delay in enumerate((0, 0.05, 0.3, 0.8, 1.5)):
        p, _ = c.attach(run.pid, "kill-%d" % k, c.xdg)
        t0, n = time.monotonic(), None
        while delay and n != 2 and time.monotonic() < t0 + 15:  # attached: then mid-stream
            n = query(run.sock)["consumers"]
            time.sleep(0.01)
        c.check(not delay or n == 2, "attach %d: INFO says %s consumers, not 2" % (k, n))
        time.sleep(delay)
        p.kill()
        rc, _, err = finish(p, 20)
        c.check(rc == -signal.SIGKILL, "attach %d: %s after SIGKILL, stderr %r" % (k, rc, err))
        t0, n = time.monotonic(), None
        while n != 1 and time.monotonic() < t0 + 15:
            n = query(run.sock)["consumers"]
            time.sleep(0.05)
        c.check(n == 1, "15 s after attach %d was killed, INFO says %s consumers, not 1" % (k, n))
        print("attach %d SIGKILLed after %.2f s: consumers back to %s in %.2f s"
              % (k, delay, n, time.monotonic() - t0))
    rc, insns, err = c.stats_window(run, "after", 1.5)
    c.check(rc == 0 and isinstance(insns, int) and insns > 0, "attach after the kills: exit %s, "
            "insns %s, stderr %r" % (rc, insns, err[-300:]))
    print("attach after the kills: exit %s, %s instructions in 1.5 s" % (rc, insns))
    run.finish(60)
    orphan_waiting(c)


def orphan_waiting(c):
    """`sluice run --wait-attach 1` SIGKILLed while its guest waits: the QEMU it left must not
    wait for ever (it did: found orphaned after 11 minutes). It says so and runs the guest."""
    env = dict(common.guest_env(sluice=True), XDG_RUNTIME_DIR=c.xdg)
    run = subprocess.Popen([c.args.sluice, "run", "--wait-attach", "1", "-o", c.path("orphan.stats"),
                            "--", c.prog, "1"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           env=env, start_new_session=True)
    PROCS.append(run)
    qemu = common.traced_qemu(run.pid, env)[0]
    run.kill()
    if not c.check(qemu is not None, "no QEMU under `sluice run --wait-attach 1` in 20 s"):
        return
    run.wait()
    t1, gone = time.monotonic(), False
    while not gone and time.monotonic() < t1 + 30:
        time.sleep(0.1)
        try:
            gone = open("/proc/%d/stat" % qemu).read().split(") ")[1][0] == "Z"
        except OSError:
            gone = True
    if not gone:
        os.kill(qemu, signal.SIGKILL)
    err = run.stderr.read()  # QEMU held the pipe too: it is closed now
    c.check(gone and b"left before 1 more attached: the guest starts now" in err,
            "QEMU %s of a SIGKILLed `sluice run --wait-attach 1`: %s 30 s later; stderr %r"
            % (qemu, "gone" if gone else "still there", err[-300:]))
    print("orphaned --wait-attach QEMU: ended %.1f s after sluice run was killed"
          % (time.monotonic() - t1))


def probe(path, kind):
    """As another uid (case_uid): one message, prints what the jitter answered."""
    try:
        s = connect(path)
    except OSError as e:
        sys.exit("connect: " + e.strerror)
    try:  # the jitter may refuse (and close) before this is sent
        s.send(msg(int(kind), lossless=1))
    except OSError:
        pass
    print(answer(s)[0])


def case_uid(c):
    # What it proves: a process of another uid that can reach the socket (with
    # CAP_DAC_OVERRIDE through the 0700 directory; or, where the kernel refuses
    # the ambient capability, through the directories opened to others for the
    # time of the test) is refused by the jitter, which can only tell it by the
    # peer's credentials (SO_PEERCRED).
    if os.getuid() != 0:
        print("SKIP: uid needs root (to run a process as uid %d)" % NOBODY)
        sys.exit(77)
    run = Run(c, "uid", 8, c.xdg)
    wrap = [shutil.which("setpriv") or "/usr/bin/setpriv", "--reuid=%d" % NOBODY,
            "--regid=%d" % NOBODY, "--clear-groups", "--inh-caps=+dac_override",
            "--ambient-caps=+dac_override", "--"]
    py, kw, modes = ["/usr/bin/python3", "-BEs", os.path.abspath(__file__), "probe"], {}, []
    py.append(run.sock)
    rc, out, err = (finish(start(c, wrap + py + [str(HELLO)], "uid-try", c.xdg), 30)
                    if os.path.exists(wrap[0]) else (None, b"", b"no setpriv"))
    if rc != 0 or not out:
        print("setpriv with CAP_DAC_OVERRIDE did not reach the socket (exit %s, %r): opening "
              "the directories to others instead" % (rc, (out + err)[-200:]))
        for d in (c.tmp, c.xdg, run.dir, run.sock):
            modes.append((d, os.stat(d).st_mode & 0o7777))
            os.chmod(d, 0o666 if d == run.sock else 0o711)
        wrap, kw = [], {"preexec_fn": lambda: (os.setgroups([]), os.setresgid(*[NOBODY] * 3),
                                               os.setresuid(*[NOBODY] * 3))}
    for what, kind in (("HELLO", HELLO), ("QUERY", QUERY)):
        rc, out, err = finish(start(c, wrap + py + [str(kind)], "uid-" + what, c.xdg, **kw), 30)
        text = (out + err).decode(errors="replace").strip()
        c.check(rc == 0 and text == "refused: another user's process",
                "%s as uid %d: exit %s, %r (want REFUSED, saying why)" % (what, NOBODY, rc, text))
        print("%s as uid %d: %s" % (what, NOBODY, text))
    p = start(c, wrap + [c.args.sluice, "attach", str(run.pid), "--tool", "stats"], "uid-attach",
              c.xdg, **kw)
    rc, _, err = finish(p, 30)
    err = err.decode(errors="replace").strip()
    # sluice refuses first (the directory is not its user's), else the jitter does.
    c.check(rc == 2 and (err.endswith("jitter refused the consumer: another user's process") or
                         err.endswith("its socket's directory or listener is not this user's "
                                      "alone")),
            "sluice attach as uid %d: exit %s, stderr %r (want exit 2 and the reason)"
            % (NOBODY, rc, err))
    print("sluice attach as uid %d: exit %s: %s" % (NOBODY, rc, err[-300:]))
    for d, mode in reversed(modes):
        os.chmod(d, mode)
    run.finish(60)


def case_garbage(c):
    run = Run(c, "garbage", 15, None)
    hello, rnd = msg(HELLO, lossless=1), random.Random(7)
    junk = bytes([rnd.randrange(7, 256)]) + rnd.randbytes(CTL.size - 1)  # type not 1..6
    for what, data in (("a 7-byte datagram", hello[:7]),
                       ("64 KiB starting with a valid HELLO", hello + bytes(65536 - CTL.size)),
                       ("HELLO version 99", msg(HELLO, version=99, lossless=1)),
                       ("unknown type 77", msg(77)), ("RING from a consumer", msg(RING)),
                       ("random bytes", junk), ("an empty datagram", b"")):
        with connect(run.sock) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 18)
            s.send(data)
            said, m = answer(s)
        c.check((not m or m["type"] == REFUSED) and not said.startswith("no answer"),
                "%s: the jitter answered %s" % (what, said))
        c.check(run.p.poll() is None, "sluice run ended (%s) after %s" % (run.p.returncode, what))
        print("%s: %s" % (what, said))
    # More silent connections than consumer slots (16, record.h): the jitter may
    # refuse the surplus at once, and the others when they have been silent too long.
    idle, t0 = [connect(run.sock) for _ in range(20)], time.monotonic()
    with connect(run.sock) as s:
        try:  # refused at once, it may be closed before it can send
            s.send(msg(QUERY))
        except (BrokenPipeError, ConnectionResetError) as e:
            said = "closed before QUERY went (%s)" % e.strerror
        else:
            said = answer(s)[0]
        print("QUERY with 20 silent connections open: %s" % said)
    closed = []
    while idle and time.monotonic() < t0 + 20:
        for s in select.select(idle, [], [], 0.5)[0]:
            said, m = answer(s, 0)
            c.check(not m or m["type"] == REFUSED, "a silent connection got %s" % said)
            idle.remove(s)
            s.close()
            closed.append(time.monotonic() - t0)
    c.check(not idle, "%d of 20 silent connections still open after 20 s" % len(idle))
    print("silent connections: %d closed by the jitter, the last after %.1f s"
          % (len(closed), max(closed, default=0)))
    info = query(run.sock)
    c.check(info["pid"] == run.pid and info["arch"] == "x86_64" and info["threads"] >= 1
            and info["consumers"] >= 1, "INFO %s (guest pid %d)" % (info, run.pid))
    print("QUERY: %s" % {k: info[k] for k in FIELDS[11:] + ["pid", "arch", "comm"]})
    # Out of descriptors (ulimit -n): the kernel drops the ring or tail file it passes. Said
    # in one line naming the limit (it was "Protocol error"), never a trace short of a thread.
    for n in (5, 6, 7):
        p, _ = c.attach(run.pid, "nofile%d" % n, run.xdg, "stats",
                        preexec_fn=lambda n=n: resource.setrlimit(resource.RLIMIT_NOFILE, (n, n)))
        rc, _, err = finish(p, 5)
        if rc is None:  # it got every descriptor after all: a clean detach is fine too
            p, rc = None, 0
        c.check(rc == 0 and not err or rc and (b"ulimit -n" in err or b"Too many open" in err),
                "sluice attach under ulimit -n %d: exit %s, stderr %r" % (n, rc, err[-300:]))
        print("sluice attach under ulimit -n %d: exit %s, %r" % (n, rc, err.strip()[-120:]))
    rc, insns, err = c.stats_window(run, "attach", 2)
    c.check(rc == 0 and isinstance(insns, int) and insns > 0, "sluice attach after all that: "
            "exit %s, insns %s, stderr %r" % (rc, insns, err[-300:]))
    print("sluice attach after all that: exit %s, %s instructions in 2 s" % (rc, insns))
    run.finish(60)


def ls(c, json_out):
    """{pid: entry} from `sluice ls --json`, or {pid: line} from `sluice ls`."""
    rc, out, err = common.run([c.args.sluice, "ls"] + (["--json"] if json_out else []), 60)
    c.check(rc == 0, "sluice ls: exit %s, stderr %r" % (rc, err))
    if json_out:
        try:
            return {e["pid"]: e for e in json.loads(out)}
        except (ValueError, KeyError, TypeError) as e:
            common.fail("sluice ls --json: %s: %r" % (e, out[:500]))
    lines = {int(line.split()[0]): line for line in out.decode(errors="replace").splitlines()
             if line[:1].isdigit()}
    pat = (r"(\d+) (\S+) (.*) threads=(\d+) consumers=(\d+) lossless=(\d+) lost=(\d+)"
           r"( \(it starts once \d+ more attach(es)?\))?|\d+ - - not answering \(stopped\?\)")
    for pid in c.pids & lines.keys():  # only ours: others may be waiting, starting...
        c.check(re.fullmatch(pat, lines[pid]), "sluice ls: %r is not %s" % (lines[pid], pat))
    return lines


def hang_up_listener(path):
    """A listener at @p path that takes each connection and closes it at once, as a process
    ending while asked does."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    if os.path.exists(path):
        os.unlink(path)  # a stale socket of a traced process that had this pid before
    srv.bind(path)
    srv.listen(8)

    def serve():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            conn.close()
    threading.Thread(target=serve, daemon=True).start()
    return srv


def ls_hang_ups(c, sock_dir):
    """Processes that close the connection while `sluice ls` asks them: one that has ended is
    left out like a stale socket (it was listed as 'Broken pipe', exit 0, as traced guests
    ended), one that still exists is listed with why."""
    gone = subprocess.Popen(["/bin/true"])
    gone.wait()
    alive = subprocess.Popen(["/bin/sleep", "30"])
    servers = [hang_up_listener(os.path.join(sock_dir, "%d.sock" % pid))
               for pid in (gone.pid, alive.pid)]
    try:
        entries = ls(c, True)
    finally:
        for srv, pid in zip(servers, (gone.pid, alive.pid)):
            srv.close()
            os.unlink(os.path.join(sock_dir, "%d.sock" % pid))
        alive.kill()
        alive.wait()
    c.check(gone.pid not in entries, "sluice ls --json lists %d, which had ended when it hung up: "
            "%s" % (gone.pid, entries.get(gone.pid)))
    c.check(entries.get(alive.pid, {}).get("answering") is False,
            "sluice ls --json: %d, alive, hung up: %s" % (alive.pid, entries.get(alive.pid)))
    print("hung up: ended %d listed as %s; alive %d listed as %s"
          % (gone.pid, entries.get(gone.pid), alive.pid, entries.get(alive.pid)))


def ls_fd_full(c):
    """A guest that holds every descriptor its RLIMIT_NOFILE allows (counters fdfull, under
    `ulimit -n 64`): `sluice ls` must list it as answering (it said 'not answering (stopped?)':
    the jitter could not accept the connection) and `sluice attach` must be refused in one line
    naming the limit, exit 2 (it was 'Connection reset by peer before WELCOME')."""
    prog = os.path.join(c.args.guests, "counters-x86_64")
    p = start(c, [c.args.sluice, "run", "-o", os.path.join(c.tmp, "fdfull.stats"), "--", prog,
                  "fdfull", os.path.join(c.tmp, "fdfull.ctr")], "fdfull", None,
              preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64)))
    try:
        qemu, sock = common.traced_qemu(p.pid, common.guest_env(sluice=True))
        t0 = time.monotonic()
        while time.monotonic() - t0 < 20 and not slurp(p.files[0]):
            time.sleep(0.2)
        c.check(sock and slurp(p.files[0]).startswith(b"full after"),
                "fdfull: no traced guest that filled its descriptors: %r" % slurp(p.files[0]))
        if not sock:
            return
        c.pids.add(qemu)
        e = ls(c, True).get(qemu, {})
        c.check(e.get("answering", True) and e.get("threads") == 1,
                "sluice ls --json, a guest with no descriptor free: %s" % e)
        rc, _, err = common.run([c.args.sluice, "attach", str(qemu)], 60)
        c.check(rc == 2 and len(err.splitlines()) == 1 and b"RLIMIT_NOFILE" in err,
                "sluice attach, a guest with no descriptor free: exit %s, stderr %r" % (rc, err))
        print("no descriptor free: listed as %s; attach exit %s: %s"
              % (e, rc, err.decode(errors="replace").strip()))
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()


def case_ls(c):
    os.environ.pop("XDG_RUNTIME_DIR", None)  # common.run's sluice ls: /tmp/sluice-<uid>
    a, b = Run(c, "ls-killed", 60, None, mode=None), Run(c, "ls-exits", 12, None, mode=None)
    c.pids = {a.pid, b.pid}
    time.sleep(1)
    entries, lines = ls(c, True), ls(c, False)
    for r in (a, b):
        e = entries.get(r.pid, {})
        c.check(e.get("arch") == "x86_64" and e.get("threads", 0) >= 1 and e.get("lost") == 0
                and e.get("consumers", 0) >= 1 and e.get("lossless", 0) >= 1,
                "sluice ls --json: pid %d is %s" % (r.pid, e or "not listed"))
        c.check(r.pid in lines, "sluice ls does not list pid %d" % r.pid)
        print("listed: %s | %s" % (e, lines.get(r.pid)))
    # Stopped processes cannot answer: listed as such (they were left out, exit 0, in silence),
    # asked at once (each cost 2 s, one after the other).
    for r in (a, b):
        os.kill(r.pid, signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        entries = ls(c, True)
        took = time.monotonic() - t0
        lines = ls(c, False)
        # An attach interrupted while the process cannot answer attached nothing: it said
        # "detached", exit 0, with an empty report.
        env = common.guest_env(sluice=True)
        env.pop("XDG_RUNTIME_DIR", None)
        att = subprocess.Popen([c.args.sluice, "attach", str(b.pid), "--json", "-o",
                                os.path.join(c.tmp, "interrupted.json")],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        time.sleep(2)
        att.send_signal(signal.SIGINT)
        _, att_err = att.communicate(timeout=30)
        c.check(att.returncode == 2 and b"interrupted before" in att_err,
                "sluice attach interrupted while the process was stopped: exit %s, stderr %r"
                % (att.returncode, att_err))
        print("attach interrupted while stopped: exit %s: %s"
              % (att.returncode, att_err.decode(errors="replace").strip()))
    finally:
        for r in (a, b):
            os.kill(r.pid, signal.SIGCONT)
    for r in (a, b):
        c.check(entries.get(r.pid) == {"pid": r.pid, "answering": False,
                                       "why": "not answering (stopped?)"} and
                "not answering" in lines.get(r.pid, ""),
                "sluice ls with %d stopped: %s | %s" % (r.pid, entries.get(r.pid), lines.get(r.pid)))
    c.check(took < 3.5, "sluice ls --json with two stopped processes took %.1f s" % took)
    print("stopped: %s | %s (%.1f s)" % (entries.get(b.pid), lines.get(b.pid), took))
    os.kill(a.pid, signal.SIGKILL)
    rc = finish(a.p, 30)[0]
    stale, entries, lines = os.path.exists(a.sock), ls(c, True), ls(c, False)
    c.check(a.pid not in entries and a.pid not in lines and b.pid in entries,
            "after the SIGKILL of %d: sluice ls %s" % (a.pid, list(lines.values())))
    print("after SIGKILL of %d (sluice %s, socket %s): not listed; %d still is"
          % (a.pid, rc, "left stale" if stale else "gone", b.pid))
    for pid, what in ((a.pid, "killed"), (os.getpid(), "untraced")):
        rc, _, err = common.run([c.args.sluice, "attach", str(pid)], 60)
        c.check(rc == 2 and len(err.splitlines()) == 1, "sluice attach of a %s pid: exit %s, "
                "stderr %r" % (what, rc, err))
        print("sluice attach %d (%s): exit %s: %s" % (pid, what, rc, err.decode().strip()))
    ls_hang_ups(c, os.path.dirname(b.sock))
    ls_fd_full(c)
    b.finish(60)
    c.check(b.pid not in ls(c, True), "sluice ls --json lists %d after it exited" % b.pid)
    print("after %d exited: not listed" % b.pid)
    if stale and os.path.exists(a.sock):
        os.unlink(a.sock)
    ls_waiting(c)
    ls_long_xdg(c)
    ls_odd_comm(c)


def ls_odd_comm(c):
    """A guest whose program's name holds a newline and a terminal escape: one line in `sluice
    ls` and in a stats table, those bytes as '?' (each split in two, the escape raw: hostile
    round 8)."""
    odd = os.path.join(c.tmp, "od\nd\x1b[7m")
    shutil.copy(c.prog, odd)
    shown = "od?d?[7m"
    r = Run(c, "ls-oddcomm", 3, None, mode=None, cmd=[odd, "3"], plain=[c.prog, "3"])
    c.pids = c.pids | {r.pid}
    line = ls(c, False).get(r.pid, "")
    c.check(" %s threads=" % shown in line, "sluice ls of a program named %r: %r" % (odd, line))
    r.finish(60)
    rc, _, err = common.run([c.args.sluice, "run", "--tool", "stats", "--", odd, "1"], 60)
    rows = [l for l in err.decode(errors="replace").splitlines() if " x86_64 " in l]
    c.check(rc == 0 and rows and all(shown in r for r in rows) and b"\x1b" not in err,
            "the stats table of a program named %r: exit %s, rows %r" % (odd, rc, rows))
    print("odd comm: ls %r; stats %r" % (line, rows[:1]))


def ls_long_xdg(c):
    """A guest run with an XDG_RUNTIME_DIR too long for a socket's path: its jitter listens in
    the /tmp place, where `sluice ls` and `attach` look next (it said "consumers cannot attach
    at run time", and ls listed nothing: hostile round 7)."""
    longdir = os.path.join(c.tmp, "x" * 100)
    os.makedirs(longdir, mode=0o700, exist_ok=True)
    r = Run(c, "ls-longxdg", 3, None, mode=None, env={"XDG_RUNTIME_DIR": longdir})
    c.pids = c.pids | {r.pid}
    c.check(r.pid in ls(c, False), "sluice ls does not list a guest run with a %d-byte "
            "XDG_RUNTIME_DIR" % len(longdir))
    p, out = c.attach(r.pid, "ls-longxdg-attach", longdir, "stats", ["--json"])
    rc, _, err = finish(p, 60)
    r.finish(60)
    guest_err = slurp(r.p.files[1])
    c.check(rc == 0 and b"cannot attach" not in guest_err,
            "a long XDG_RUNTIME_DIR: attach exit %s, stderr %r; sluice run's stderr %r"
            % (rc, err[-300:], guest_err[-300:]))
    print("long XDG_RUNTIME_DIR (%d bytes): listed, attached: exit %s" % (len(longdir), rc))


def ls_waiting(c):
    """A `--wait-attach 2` guest not started: listed with how many more attaches it waits for,
    in text and JSON (the text said "waiting to start", not how many: hostile round 5)."""
    w = Run(c, "ls-waiting", 1, None, mode=None, wait=2)
    c.pids = c.pids | {w.pid}
    seen = []
    for want in (2, 1):
        end = time.monotonic() + 20
        while time.monotonic() < end:
            e, line = ls(c, True).get(w.pid, {}), ls(c, False).get(w.pid, "")
            if e.get("waiting") == want:
                break
            time.sleep(0.1)
        seen.append((e.get("waiting"), line))
        c.check(e.get("waiting") == want and line.endswith(
            "(it starts once %d more attach%s)" % (want, "es" if want == 1 else "")),
            "sluice ls of a guest waiting for %d more attaches: %s | %s" % (want, e, line))
        c.attach(w.pid, "ls-waiting-%d" % want, None, "stats")
    w.finish(60)
    print("waiting: %s" % seen)


def ref_events(run):
    """{tid: events} of run's reference (count mode), tids as bytes."""
    return {line.split()[1]: sum(int(kv.split(b"=")[1]) for kv in line.split()[2:5])
            for line in slurp(run.ref).splitlines()}


def dump_events(path):
    """({tid: events delivered}, {tid: events lost}) of a raw dump, tids as bytes."""
    got, lost = collections.Counter(), collections.Counter()
    with open(path, "rb") as f:
        for line in f:
            tid, ev = line.split(b" ", 2)[:2]
            if ev == b"LOST":
                lost[tid] += int(line.split()[2])
            else:
                got[tid] += 1
    return got, lost


def case_lossy(c):
    """Two lossy consumers on a guest that outruns them (gzip -9, 256 KiB rings), attached
    before its first instruction: per thread, what each gets plus what it is told it lost
    equals what the reference plugin counts; the dump's records are the reference's in
    order but for its LOST gaps (checked by counts here, by records in unit-ring_pair)."""
    data = c.path("in.bin")
    with open(data, "wb") as f:
        x = 1
        for _ in range(3 << 18):  # 3 MiB, compressible but not trivially
            x = x * 6364136223846793005 + 1442695040888963407 & (1 << 64) - 1
            f.write(struct.pack("<I", (x >> 33) & 0x0f0f0f0f))
    run = Run(c, "lossy", 0, c.xdg, wait=2, cmd=["/bin/gzip", "-9", "-c", data],
              env={"SLUICE_RING_BYTES": "256K"})
    dump, dump_out = c.attach(run.pid, "lossy-dump", run.xdg, "dump", ["--lossy"])
    stats, stats_out = c.attach(run.pid, "lossy-stats", run.xdg, "stats", ["--lossy", "--json"])
    for p in (dump, stats):
        rc, _, err = finish(p, 240)
        c.check(rc == 0, "%s: exit %s, stderr %r" % (p.name, rc, err[-400:]))
    run.finish(240)
    ref = ref_events(run)
    got, lost = dump_events(dump_out)
    for tid, want in ref.items():
        c.check(got[tid] + lost[tid] == want, "lossy dump, tid %s: %d events + %d lost, reference "
                "%d" % (tid.decode(), got[tid], lost[tid], want))
    c.check(sum(lost.values()) > 0, "the lossy dump lost nothing: it kept up, nothing was tested")
    print("lossy dump: %d events delivered + %d lost = %d, the reference's"
          % (sum(got.values()), sum(lost.values()), sum(ref.values())))
    try:
        t = json.loads(slurp(stats_out))["total"]
        have = t["insns"] + t["loads"] + t["stores"] + t["lost"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        have, t = "no report (%s)" % e, {}
    c.check(have == sum(ref.values()), "lossy stats: %s, reference %d" % (have, sum(ref.values())))
    print("lossy stats: %s delivered + lost = %s" % (t, have))


def churn_run(c, name, threads, at_once, wait=1):
    """`sluice run` of counters churn: @p threads busy threads, @p at_once at a time, each
    overrunning its 256 KiB ring, held for @p wait attaches, the reference counting."""
    counters = common.need_file(os.path.join(c.args.guests, "counters-x86_64"),
                                "guest counters-x86_64")
    churn = ["churn", str(threads), "0", "20000", str(at_once)]
    return Run(c, name, 0, c.xdg, wait=wait, env={"SLUICE_RING_BYTES": "256K"},
               cmd=[counters] + churn[:1] + [c.path(name + ".counters")] + churn[1:],
               plain=[counters] + churn[:1] + [c.path("plain.counters")] + churn[1:])


def check_lossy_dump(c, name, run, dump_out):
    """Per thread, a lossy dump's events plus its lost count equal run's reference, and it
    lost something (else nothing was tested)."""
    ref = ref_events(run)
    got, lost = dump_events(dump_out)
    wrong = [(t, got[t], lost[t], want) for t, want in ref.items() if got[t] + lost[t] != want]
    c.check(not wrong, "%s: lossy dump, per thread (tid, events, lost, reference): %s of %d "
            "differ: %s" % (name, len(wrong), len(ref), wrong[:4]))
    c.check(sum(lost.values()) > 0, "%s: the lossy dump lost nothing: it kept up, nothing was "
            "tested" % name)
    print("%s: %d threads, %d events delivered + %d lost = the reference's %d"
          % (name, len(ref), sum(got.values()), sum(lost.values()), sum(ref.values())))


def case_slowlossy(c):
    """A lossy consumer that runs but is slower than the guest (a dump, `--raw`), on a guest
    that ends many busy threads (counters churn: 240 threads 16 at a time, each overrunning
    its 256 KiB ring), attached before the first instruction: it is not dropped (it was,
    for holding more than 16 rings of ended threads unread: exit 1, nothing after the
    drop); what it could not read in time is counted lost, so per thread its events plus
    its lost count equal the reference's."""
    run = churn_run(c, "slowlossy", 240, 16)
    arena = ArenaPeak(run.pid)
    dump, dump_out = c.attach(run.pid, "slowlossy-dump", run.xdg, "dump", ["--lossy"])
    rc, _, err = finish(dump, 240)
    c.check(rc == 0, "the slow lossy consumer: exit %s, stderr %r" % (rc, err[-400:]))
    run.finish(240)
    check_arena_peak(c, "slowlossy", arena.stop(), 17, 0)
    check_lossy_dump(c, "slowlossy", run, dump_out)


def fifo_dump(c, run, name):
    """A lossy `dump --raw` attached to run, writing into the FIFO NAME.fifo, which the
    caller reads (into NAME.dump, the third of what is returned, with the process and the
    FIFO's path)."""
    fifo, out = c.path(name + ".fifo"), c.path(name + ".dump")
    os.mkfifo(fifo)
    dump = start(c, [c.args.sluice, "attach", str(run.pid), "--tool", "dump", "--raw", "--lossy",
                     "-o", fifo], name + "-dump", run.xdg)
    return dump, fifo, out


def case_laggy(c):
    """A lossy dump that reads its rings and its control socket but lags far behind (its
    output, a FIFO, is read slowly by this test while the guest runs), on a guest that ends
    many busy threads (counters churn: 400 threads 4 at a time, each overrunning its 256 KiB
    ring): the rest of the ended rings it holds is taken from it, and it holds more than 128
    of them unread for a while (their ends wait behind its chunks). It must not be taken for
    a stopped consumer (it was dropped past 128); per thread, its events plus its lost count
    equal the reference's."""
    run = churn_run(c, "laggy", 400, 4)
    dump, fifo, out = fifo_dump(c, run, "laggy")
    guest_done = threading.Event()

    def drain():  # 64 KiB every 20 ms while the guest runs, then as fast as it comes
        with open(fifo, "rb") as f, open(out, "wb") as o:
            while True:
                data = f.read(65536)
                if not data:
                    return
                o.write(data)
                if not guest_done.is_set():
                    time.sleep(0.02)
    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        run.p.wait(timeout=240)  # sluice run ends with the guest
    finally:
        guest_done.set()
    rc, _, err = finish(dump, 240)
    reader.join(60)
    c.check(rc == 0, "the lagging lossy consumer: exit %s, stderr %r" % (rc, err[-400:]))
    run.finish(240)
    check_lossy_dump(c, "laggy", run, out)


def case_detachlag(c):
    """A lossy dump told to detach (SIGINT) while it lags behind a guest that ends many busy
    threads (counters churn: 600 threads 4 at a time), its output (a FIFO) then not read for
    3 s, so that delivering what was published before the detach takes that long: it must
    read its control socket on meanwhile (it read it no more, the jitter took it for a stopped
    consumer and dropped it: exit 1, or it spun forever on the rings the drop gave back), and
    exit 0, detached."""
    run = churn_run(c, "detachlag", 600, 4)
    dump, fifo, out = fifo_dump(c, run, "detachlag")
    go = threading.Event()

    def drain():  # the first 64 KiB, then nothing until go, then all
        with open(fifo, "rb") as f, open(out, "wb") as o:
            o.write(f.read(65536))
            go.wait()
            while True:
                data = f.read(65536)
                if not data:
                    return
                o.write(data)
    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    sigint_ready(dump.pid)
    time.sleep(1)
    dump.send_signal(signal.SIGINT)
    time.sleep(3)
    go.set()
    rc, _, err = finish(dump, 120)
    reader.join(60)
    c.check(rc == 0 and b"detached from" in err and b"dropped" not in err,
            "the lossy dump told to detach while it lagged: exit %s (None: still running 120 s "
            "after), stderr %r" % (rc, err[-400:]))
    run.finish(240)
    print("detachlag: the dump detached (exit %s), %s" % (rc, err.strip().splitlines()[-1:]))


def stats_rows(path):
    """{tid: delivered + lost} of a `stats --json` report."""
    threads = json.loads(slurp(path))["threads"]
    return {str(t["tid"]).encode(): t["insns"] + t["loads"] + t["stores"] + t["lost"]
            for t in threads}


def case_blocked(c):
    """An attached dump whose output is a FIFO nobody reads: it cannot deliver what was
    published, and the guest waits for it (lossless). A SIGINT detaches, which waits for that
    delivery too; a second SIGINT must end sluice at once, and the guest go on and end with
    every event counted by `run`'s own consumer. Before, the second SIGINT did nothing: the
    guest waited until the FIFO's reader went away."""
    run = Run(c, "blocked", 3, c.xdg)
    fifo = c.path("blocked.fifo")
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # held, never read
    try:
        p = start(c, [c.args.sluice, "attach", str(run.pid), "--tool", "dump", "--raw", "-o",
                      fifo], "blocked-dump", run.xdg)
        sigint_ready(p.pid)
        time.sleep(1)  # the FIFO fills, then the chunk pool, then the rings
        p.send_signal(signal.SIGINT)
        time.sleep(0.5)
        first = p.poll()
        t0 = time.monotonic()
        p.send_signal(signal.SIGINT)
        rc, _, err = finish(p, 10)
        c.check(rc == -signal.SIGINT, "attach with a blocked output, two SIGINTs: %s (None: "
                "still running 10 s after the second), first SIGINT: %s, stderr %r"
                % (rc, first, err[-300:]))
        print("blocked: after the first SIGINT %s; the second ended it (%s) in %.2f s"
              % ("running" if first is None else "exit %s" % first, rc, time.monotonic() - t0))
        run.finish(60)
    finally:
        os.close(reader)


def case_timeout(c):
    """Two SIGINTs from one process 5 ms apart, as `timeout -s INT 1 sluice attach` sends
    them (once to sluice, then to its own process group, sluice included; when the second
    came after sluice had handled the first, it ended sluice at once: exit 130, no report,
    nothing said). That is one request to detach: the report must be whole, exit 0, and the
    guest go on. (The real timeout's two often merge into one pending signal: not a test.)"""
    run = Run(c, "timeout", 3, c.xdg)
    out = c.path("timeout-attach.json")
    p = start(c, [c.args.sluice, "attach", str(run.pid), "--tool", "stats", "--json", "-o", out],
              "timeout-attach", run.xdg)
    sigint_ready(p.pid)
    time.sleep(1)
    p.send_signal(signal.SIGINT)
    time.sleep(0.005)
    p.send_signal(signal.SIGINT)
    rc, _, err = finish(p, 30)
    try:
        with open(out) as f:
            insns = json.loads(f.readline())["total"]["insns"]
    except (OSError, ValueError, KeyError, TypeError):
        insns = None
    c.check(rc == 0 and insns and b"detached from pid" in err,
            "two SIGINTs 5 ms apart to sluice attach: exit %s, %s instructions reported, "
            "stderr %r: want exit 0, a report and the detach line" % (rc, insns, err[-300:]))
    print("timeout: exit %s, %s instructions, %s" % (rc, insns, err.strip().decode(
        errors="replace")[-120:]))
    run.finish(60)


def case_clobber(c):
    """attach -o (or --record) naming the traced program, a file its QEMU maps: refused in one
    line, exit 2, the program whole. It was emptied and written with the report (attach exit
    0), and the guest died of SIGBUS when it next ran code from it."""
    prog = c.path("clobber-prog")
    shutil.copy(c.prog, prog)
    size = os.path.getsize(prog)
    run = Run(c, "clobber", 2, c.xdg, cmd=[prog, "2"])
    for opt in ("-o", "--record"):
        p = start(c, [c.args.sluice, "attach", str(run.pid), opt, prog], "clobber" + opt,
                  run.xdg)
        rc, _, err = finish(p, 20)
        c.check(rc == 2 and b"is mapped by the traced process" in err
                and os.path.getsize(prog) == size,
                "attach %s naming the traced program: exit %s, stderr %r, program %d of %d "
                "bytes" % (opt, rc, err[-300:], os.path.getsize(prog), size))
        print("attach %s naming the traced program: exit %s, %s" % (
            opt, rc, err.strip().decode(errors="replace")))
    run.finish(60)


def check_arena_peak(c, name, peak, live, stopped):
    """The guest's rings held at most what the jitter's bound lets them: 16 rings of 256 KiB
    (and headers) held for lossy consumers, the rings of `live` threads at once, 16 rings for
    the slack of ended ones the consumers are reading, 128 headers per `stopped` consumer."""
    most = (16 + live + 16) * (256 + 4) * 1024 + stopped * 128 * 4096
    c.check(0 < peak <= most, "%s: the guest's ring file held %.1f MiB at its peak (bound "
            "%.1f MiB; 0: never seen)" % (name, peak / 2**20, most / 2**20))
    print("%s: the guest's ring file held %.1f MiB at its peak (bound %.1f MiB)"
          % (name, peak / 2**20, most / 2**20))


def case_stopped(c):
    """Two lossy consumers attached before the guest's first instruction (counters churn:
    300 threads two at a time, each overrunning its 256 KiB ring), one stopped
    (SIGSTOP) half a second after it started: the jitter takes the rest of the ended threads'
    rings it holds once they pass the bound (their memory goes back: the guest's ring file
    stays within check_arena_peak's bound), and drops the stopped one alone once it holds more than
    128 of them; the other's events plus its lost count equal
    the reference's per thread; the stopped one, continued once the guest ended, exits 1
    within seconds and says why it was dropped. A third, stopped before the guest started,
    dropped too, then detached (SIGINT) and continued, must say it was dropped, in its --json
    report too, and exit 1."""
    run = churn_run(c, "stopped", 300, 2, wait=3)
    stopped, stopped_out = c.attach(run.pid, "stopped-stats", run.xdg, "stats",
                                    ["--lossy", "--json"])
    # (pcsum: its --json report must say so too; it had no "error" before)
    early, early_out = c.attach(run.pid, "early-pcsum", run.xdg, "pcsum", ["--lossy", "--json"])
    end = time.monotonic() + 20
    while query(run.sock)["consumers"] < 3 and time.monotonic() < end:
        time.sleep(0.01)
    early.send_signal(signal.SIGSTOP)  # before the guest's first instruction
    arena = ArenaPeak(run.pid)
    healthy, healthy_out = c.attach(run.pid, "healthy-stats", run.xdg, "stats",
                                    ["--lossy", "--json"])
    stopint, _ = c.attach(run.pid, "stopint-dump", run.xdg, "dump", ["--lossy", "--raw"])
    time.sleep(0.5)  # the guest runs (about 3 s): stopped now, its readers are mid-ring
    stopped.send_signal(signal.SIGSTOP)
    stopint.send_signal(signal.SIGSTOP)
    rc, _, err = finish(healthy, 240)
    c.check(rc == 0, "the consumer that kept up: exit %s, stderr %r" % (rc, err[-400:]))
    run.finish(240)
    check_arena_peak(c, "stopped", arena.stop(), 3, 3)
    # Dropped, then told to detach: that is no clean detach of an empty trace; and one
    # stopped mid-ring no endless spin on the rings its drop gave back.
    for p, when in ((stopint, "mid-ring"), (early, "before the guest started")):
        p.send_signal(signal.SIGINT)
        p.send_signal(signal.SIGCONT)
        rc, _, err = finish(p, 20)
        c.check(rc == 1 and b"lossy, it held" in err,
                "the consumer stopped %s, dropped, then detached: exit %s (None: still running "
                "20 s after), stderr %r" % (when, rc, err[-600:]))
    try:  # taken in, then dropped: a report all the same (it had none, exit 2)
        said = json.loads(slurp(early_out))["error"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        said = "no report (%s)" % e
    c.check(isinstance(said, str) and "lossy, it held" in said,
            "the consumer dropped before the guest started: its --json report does not say it "
            "was dropped: error %r" % said)
    stopped.send_signal(signal.SIGCONT)
    rc, _, err = finish(stopped, 20)
    c.check(rc == 1 and b"lossy, it held" in err and b"(bound: " in err,
            "the stopped consumer, continued after the guest ended: exit %s (None: still "
            "running 20 s after), stderr %r" % (rc, err[-600:]))
    # One line says the drop, however many threads' traces it cut (one per ring before).
    said_drop = [l for l in err.splitlines() if b"dropped this consumer" in l]
    c.check(len(said_drop) == 1,
            "the stopped consumer says its drop in %d lines, not one: %r"
            % (len(said_drop), said_drop[:3]))
    # Rings announced before the drop are reused after it: the drop is why they are not
    # traced, not what their places hold now ("bad magic" for each, before).
    c.check(b"not traced" not in err and b"bad magic" not in err and b"in time, held" not in err,
            "the stopped consumer names rings announced before its drop as not traced for what "
            "their reused places hold: %r" % err[:600])
    try:
        said = json.loads(slurp(stopped_out))["error"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        said = "no report (%s)" % e
    c.check(isinstance(said, str) and "dropped" in said,
            "the stopped consumer's --json report does not say it was dropped: error %r" % said)
    ref = ref_events(run)
    try:
        got = stats_rows(healthy_out)
    except (OSError, ValueError, KeyError, TypeError) as e:
        got = {"no report": str(e)}
    c.check(got == ref, "the consumer that kept up, per thread delivered + lost: %s; reference "
            "%s" % (sorted(got.items())[:8], sorted(ref.items())[:8]))
    print("stopped: the stopped consumer was dropped (%s); the other got %d threads' events "
          "+ lost = the reference's %d" % (err.strip().splitlines()[0][:160].decode(errors="replace")
                                            if err.strip() else "", len(got), sum(ref.values())))


def case_execsock(c):
    """A traced shell's children exec native programs: each child's socket file went with it
    only if it exited, so every command the shell ran left one behind (10 commands, 10 stale
    files in the directory `sluice ls` reads). And an execve that fails leaves the process
    traced: it must be listed again while it goes on, and its file gone once it ends."""
    sdir = os.path.join(c.xdg, "sluice")

    def left():
        return sorted(os.listdir(sdir)) if os.path.isdir(sdir) else []

    p = start(c, [c.args.sluice, "run", "-o", "/dev/null", "--", "/bin/sh", "-c",
                  "for i in 1 2 3 4 5 6 7 8 9 10; do /bin/true; done"], "execsock-sh", c.xdg)
    rc, _, err = finish(p, 120)
    c.check(rc == 0, "sh: sluice exit %s, stderr %r" % (rc, err[-300:]))
    after_sh = left()
    c.check(after_sh == [], "after a shell ran 10 commands, left in %s: %s" % (sdir, after_sh))
    fifo = os.path.join(c.tmp, "execsock.fifo")
    os.mkfifo(fifo)
    p = start(c, [c.args.sluice, "run", "-o", "/dev/null", "--", "/bin/bash", "-c",
                  "shopt -s execfail; exec /nonexistent; read -t 60 x <> %s; true" % fifo],
              "execsock-bash", c.xdg)
    listed, end = [], time.monotonic() + 30
    while not listed and time.monotonic() < end and p.poll() is None:
        time.sleep(0.2)
        rc, out, _ = common.run([c.args.sluice, "ls"], extra_env={"XDG_RUNTIME_DIR": c.xdg})
        listed = [l for l in out.decode(errors="replace").splitlines() if " bash " in l]
    c.check(listed != [], "bash after a failed execve: not listed by sluice ls")
    with open(fifo, "w") as f:
        f.write("go\n")
    rc, _, err = finish(p, 60)
    c.check(rc == 0, "bash: sluice exit %s, stderr %r" % (rc, err[-300:]))
    c.check(left() == [], "after bash ended, left in %s: %s" % (sdir, left()))
    print("execsock: %d socket files left after 10 commands; after a failed execve: %s"
          % (len(after_sh), listed[0].strip() if listed else "not listed"))
    execsock_more(c, sdir, left)


def execsock_more(c, sdir, left):
    """The same with threads, a chroot, no descriptor to spare, nested PID namespaces."""
    prog = common.need_file(os.path.join(c.args.guests, "counters-x86_64"), "guest counters")
    ctr = os.path.join(c.tmp, "execsock.ctr")

    def run_guest(name, margs, **kw):
        p = start(c, [c.args.sluice, "run", "-o", "/dev/null", "--", prog] + margs, name, c.xdg,
                  **kw)
        return p
    # A thread's execve fails while another's succeeds: the failed one put the file back
    # after the other took it away (18 of 40 children left a file behind).
    rc, out, err = finish(run_guest("execrace", ["execrace", ctr, "40"]), 120)
    c.check(rc == 0 and left() == [], "execrace: exit %s, stdout %r, left %s, stderr %r"
            % (rc, out, left(), err[-300:]))
    # chroot: the file was unlinked by its absolute path, which the chroot hides.
    if os.geteuid() == 0:
        rc, out, err = finish(run_guest("execsock-chroot", ["chroot", ctr, "100"]), 120)
        c.check(rc == 0 and left() == [], "chroot: exit %s, left %s, stderr %r"
                % (rc, left(), err[-300:]))
        # Nested PID namespaces: the grandchild, pid 1 like its parent, named its socket by
        # its parent's pid (cached by getpid()): one of them could not be found.
        p = run_guest("execsock-pidnest", ["pidnest", ctr, "6"])
        names, end = [], time.monotonic() + 5
        while time.monotonic() < end and p.poll() is None and len(names) < 3:
            time.sleep(0.3)
            _, out, _ = common.run([c.args.sluice, "ls"], extra_env={"XDG_RUNTIME_DIR": c.xdg})
            names = [l.split()[0] for l in out.decode(errors="replace").splitlines()
                     if "counters" in l]
        rc, _, err = finish(p, 60)
        c.check(rc == 0 and len(set(names)) == 3 and left() == [],
                "pidnest: exit %s, sluice ls listed %s (want three pids), left %s, stderr %r"
                % (rc, names, left(), err[-300:]))
    # A guest that holds every descriptor, then an execve that fails: its socket came back
    # only if a descriptor was free (none was: no socket, not listed, for good).
    p = run_guest("fdfullexec", ["fdfullexec", ctr],
                  preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64)))
    full, end = b"", time.monotonic() + 20
    while time.monotonic() < end and not full:
        time.sleep(0.2)
        full = slurp(p.files[0])
    _, out, _ = common.run([c.args.sluice, "ls"], extra_env={"XDG_RUNTIME_DIR": c.xdg})
    os.killpg(p.pid, signal.SIGKILL)
    finish(p, 60)
    c.check(b"execve: No such file" in full and b"counters" in out,
            "fdfullexec: stdout %r, sluice ls %r: want it listed after the failed execve"
            % (full, out))
    print("execsock: execrace, chroot, pidnest (%s), fdfullexec listed: %s"
          % (len(set(names)) if os.geteuid() == 0 else "skipped", b"counters" in out))


CASES = {"windows": case_windows, "kill": case_kill, "uid": case_uid, "garbage": case_garbage,
         "ls": case_ls, "lossy": case_lossy, "rogue": case_rogue, "zero": case_zero,
         "bare": case_bare, "forks": case_forks, "once": case_once, "stopped": case_stopped,
         "blocked": case_blocked, "clobber": case_clobber, "execsock": case_execsock,
         "timeout": case_timeout, "slowlossy": case_slowlossy, "laggy": case_laggy,
         "detachlag": case_detachlag}


def main():
    if sys.argv[1:2] == ["probe"]:
        return probe(*sys.argv[2:])
    if sys.argv[1:2] == ["scribble"]:
        return rogue(sys.argv[2], float(sys.argv[3]))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("case", choices=sorted(CASES))
    ap.add_argument("--sluice", required=True)
    ap.add_argument("--plugin", required=True)
    ap.add_argument("--guests", required=True)
    ap.add_argument("--keep", help="keep traces and outputs in this directory")
    args = ap.parse_args()
    common.qemu_dir()
    common.need_file(args.sluice, "sluice")
    common.need_file(args.plugin, "reference plugin (configure meson with -Dqemu_dir)")
    with tempfile.TemporaryDirectory(prefix="sluice-attach-") as tmp:
        c = Ctx(args, args.keep or tmp)
        try:
            CASES[args.case](c)
        finally:
            for p in PROCS:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
    if c.problems:
        common.fail("attach %s: %d problems: %s" % (args.case, len(c.problems),
                                                    "; ".join(c.problems)[:2000]))
    print("attach %s: ok" % args.case)


if __name__ == "__main__":
    main()
