#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""trust: what sluice traced against what the guest itself says it did.

The other suites compare sluice with the reference plugin, inside the same
QEMU: a blind spot they share (a record never written, a thread QEMU never
reports) goes unnoticed. Here the ground truth comes from the guest. In
tests/guests/counters.c every guest thread (or forked child) increments its
own counter in a file-backed MAP_SHARED page, one store instruction per
increment, in bump(); after the run the test reads the final counters from
the file and compares each with the stores sluice traced to its address.
sluice traces only bump() (the shipped range filter over bump's extent from
`nm -S`; the guests are static, non-PIE, so that is its run-time address).

Cases (one meson test each, on every architecture unless said otherwise):

  exec      6 threads bump forever, a 7th execs /bin/true after 100 ms:
            traced == counter for every thread; exit status as untraced (twice)
  exit      6 threads bump forever, main calls exit(0) after 100 ms (3 times),
            then abort() (once): the run ends within 60 s, exit 0 or SIGABRT,
            traced == counter for every thread
  kill      selfkill (bump N times, then kill(getpid(), SIGKILL)) and
            selfkill-threads (4 threads, main kills the process after 100 ms,
            twice): traced == counter exactly, sluice dies of SIGKILL. Then 3 times an
            external SIGKILL to the guest (wait mode, 4 threads bumping):
            0 <= counter - traced <= 1 per thread, sluice dies of SIGKILL; and
            once more with `--tool stats -o FILE`: FILE says the guest was killed; and
            4 threads that bumped 5000 times and then spin outside bump() (TBs that
            write no record): traced == counter exactly
  closefds  the guest closes 3..1023, close_range(3, ~0U), dup2s onto 900..1023;
            what it sees (stdout) equals an untraced run; then 4 threads and 2
            forked children bump N times: traced == counter for all 6
  nproc     (x86_64, as root) sluice runs as nobody under RLIMIT_NPROC, which its
            own threads count against, and the guest makes threads until
            pthread_create fails: sluice's readers are a pool of a few threads,
            so every thread the guest made is traced exactly, exit 0
  churn     N threads one after another, 100 bumps each (4000 on x86_64 and
            aarch64, 500 on the others): exact counts, and the consumer's peak
            RSS after N threads within 32 MiB of its peak after 50; x86_64: the
            ring arena's pages after 2000 threads, also with a lossy consumer
            that never reads (it must be dropped, not pin them all)
  threads   N threads all alive at once, 100 bumps each: 4096 threads under
            `ulimit -n 1024` (x86_64 and aarch64 only: 4096 emulated threads
            take long on the other two) and 200 under `ulimit -n 64`; exact
            counts, and stdout (the fd open() returns) and exit status equal
            an untraced run's under the same limit
  fsize     `ulimit -f` 8 MiB, 1 MiB rings: 150 threads one after another, exact
            counts (the block table does not fit, ended rings' room is reused);
            512 KiB: no ring fits, sluice fails with a line naming `ulimit -f`;
            8 MiB with a lossy consumer that never reads (as if stopped): it is
            dropped at once, the guest ends in time with exact counts
  environ   /proc/self/environ, environ and the signals ignored and blocked at
            start (sluice ignores SIGPIPE itself), as the guest prints them, equal an
            untraced run's (no SLUICE_* variable may show); a guest named without a
            '/' (found in PATH) gets that name as argv[0], as natively (it got the
            path sluice found)
  bytes     the bytes filter (tests/e2e/filters/bytes.bpf.c) selecting each
            architecture's syscall instruction in the loops guest: sluice's
            exec count must equal the number of executed syscall instructions
            found from a source sharing nothing with sluice: the reference
            plugin's pcs under plain QEMU, decoded with binutils' objdump.
            And an instruction crossing a 4 KiB page boundary (x86_64: a
            10-byte movabs 3 bytes before it; riscv64: a 4-byte lui 2 bytes
            before it; aarch64 and mipsel cannot have one), run 1000 times.
  retry     (x86_64, aarch64) instructions QEMU abandons and runs again: an atomic
            add to a misaligned word by 2 threads (EXCP_ATOMIC: QEMU leaves the TB
            and runs the instruction alone) and, on x86_64, a store, an add to memory
            (its load is recorded before its store gives up) and a rep movsb into
            their own code page (QEMU leaves the TB it modified and runs the
            instruction again alone).
            Traced through those functions only, in both encodings: every pc's
            exec count and each access's count equal the calls the guest made,
            and the atomic word ends at the number of adds. The reference plugin
            counts the abandoned try too, so no comparison with it could show this.
  helpers   (x86_64, aarch64) an instruction whose stores QEMU makes in a helper
            through a host pointer (fxsave; dc zva), traced alone by the range
            filter while an untraced copy of it runs right after: every byte the
            guest saw change is covered by a traced store of that instruction, every
            traced store lies in the span it may write (dc zva: covers it exactly),
            each call traces as much, and nothing traced touches the untraced copy's
            buffer. Both sluice and the plugin API missed them before (qemu-patch
            0028, 0029). aarch64: a traced MOPS copy that faults on a PROT_NONE
            page ends in the guest's SIGSEGV handler as untraced, and the bytes
            it saw arrive are exactly the traced stores.
  cas       (x86_64, aarch64) five tries in one thread that fail (a plain store
            changes the word first), then two threads add 1 to a word 20 000 times
            each with a compare-and-swap loop, both encodings: each try is traced as
            a load and, if it took, a store of the load plus 1; if it failed, on
            x86 a store of the load (cmpxchg writes back), on aarch64 no store (cas
            stores nothing); the tries that took and failed equal the guest's counts
            (a failed try in parallel mode was traced storing a value memory never
            held: qemu-patch 0031; a failed aarch64 cas as a store: 0048).
  sc        (aarch64, riscv64, mipsel) the same with load-linked/store-conditional
            (ldxr/stxr, lr.d/sc.d, ll/sc): a failed store-conditional is a load and
            no store (it was a store of the value memory kept: qemu-patch 0048).
  maps      the module map (`dump --maps`): the guest maps pages of a file it
            wrote (each starts with a copy of leaf()), runs the copy (and a second
            thread runs it), mprotects, unmaps, maps another page of the file at the
            same address, runs it, mremaps it elsewhere, runs it, runs a copy in
            anonymous memory, unmaps all, printing each change and each run of
            calls; between the last two, a System V segment attached over the moved
            mapping (SHM_REMAP) runs a copy too (not on mipsel: SHMLBA). Both
            encodings: its changes are, in order, among its thread's
            mapping events, with the guest's start, length, protection, file
            offset and file; the snapshot at the start maps every PT_LOAD of the
            program as binutils' readelf says; every executed pc of the program
            resolves to the file offset readelf's program headers give. Block
            encoding (exact by design, record.h): every pc resolves, and the runs
            of calls resolve to the file and offset the guest mapped there then,
            for both threads (the same code at the same address from pages 1 and
            3: a descriptor lifted before the unmap must not be reused after).

  trust.py CASE --sluice build/consumer/sluice --plugin build/tests/e2e/libreftrace.so
           --guests build/tests/e2e --filters build/filters
           --bytes-filter build/tests/e2e/filters/bytes.bpf.o [--arch A]... [--keep DIR]
"""

import argparse
import collections
import json
import mmap
import os
import platform
import re
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

import attach
import common

MAGIC = int.from_bytes(b"COUNTERS", "little")
# Each architecture's system call instruction, in memory order.
SYSCALL = {"x86_64": "0f05", "aarch64": "010000d4", "riscv64": "73000000", "mipsel": "0c000000"}
# A store instruction in objdump's listing (mnemonic and operands).
STORE = {"x86_64": r"\)\s*(#.*)?$", "aarch64": r"^st", "riscv64": r"^s[bhwd]\s",
         "mipsel": r"^s[bhw]\s"}
# The instruction of counters' pagecross_fn that crosses a page boundary.
PAGECROSS = {"x86_64": "48b88877665544332211", "riscv64": "37553412"}


def describe(rc):
    return "signal %s" % signal.Signals(-rc).name if rc < 0 else "exit %d" % rc


def symbol(arch, prog, name):
    """(address, size) of a symbol, from binutils' nm -S."""
    out = subprocess.run([common.BINUTILS[arch] + "nm", "-S", prog], stdout=subprocess.PIPE,
                         check=True, text=True).stdout
    for line in out.splitlines():
        f = line.split()
        if len(f) == 4 and f[3] == name:
            return int(f[0], 16), int(f[1], 16)
    common.fail("%s: no symbol %s (nm -S)" % (prog, name))


def range_filter(filters, lo, hi):
    """sluice's arguments for the shipped range filter over [lo, hi)."""
    return ["--filter", os.path.join(filters, "range.bpf.o"),
            "--set", "lo=%#x" % lo, "--set", "hi=%#x" % hi]


def nofile(n):
    """A preexec_fn: `ulimit -n n`."""
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))


def nocore():
    """A preexec_fn: `ulimit -c 0` (QEMU would write the guest's core to the cwd)."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


class Counters:
    """The counters file a guest wrote: header, then one counter per thread."""

    def __init__(self, path):
        if not os.path.exists(path) or os.path.getsize(path) < 64:
            common.fail("%s: no counters file (the guest did not start?)" % path)
        with open(path, "rb") as f:
            data = f.read()
        magic, self.addr, self.n, self.pid, self.stride, self.width = struct.unpack_from(
            "<6Q", data)
        if magic != MAGIC:
            common.fail("%s: bad magic %#x" % (path, magic))
        fmt = {4: "<I", 8: "<Q"}[self.width]
        self.values = [struct.unpack_from(fmt, data, 64 + i * self.stride)[0]
                       for i in range(self.n)]

    def address(self, i):
        return self.addr + i * self.stride


def traced_stores(dump):
    """Reads a dump: ({(size, addr): stores}, records lost)."""
    if not os.path.exists(dump):
        return None, 0
    if os.path.getsize(dump) == 0:
        return {}, 0
    with open(dump, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        # (a leading literal keeps re fast on dumps of millions of lines)
        found = re.findall(rb" WRITE(\d+) 0x[0-9a-f]+ addr=0x([0-9a-f]+)", m)
        stores = collections.Counter((int(s), int(a, 16)) for s, a in found)
        lost = sum(int(n) for n in re.findall(rb" LOST (\d+)", m))
    return stores, lost


def compare(ctr, dump, slack=0):
    """Counters against traced stores: (problems, one-line figures).

    Each counter must have counter - slack <= traced <= counter.
    """
    stores, lost = traced_stores(dump)
    if stores is None:
        return ["sluice wrote no dump"], "no dump"
    problems, diffs = [], []
    for i in range(ctr.n):
        t = stores.pop((ctr.width, ctr.address(i)), 0)
        d = ctr.values[i] - t
        diffs.append(d)
        if not 0 <= d <= slack:
            problems.append("counter %d: the guest stored %d times, sluice traced %d (%+d)"
                            % (i, ctr.values[i], t, -d))
    if len(problems) > 8:
        problems[8:] = ["... %d counters in all differ" % len(problems)]
    other = sum(stores.values())
    if other:
        problems.append("%d traced stores to no counter, e.g. %s" % (other, list(stores)[:3]))
    if lost:
        problems.append("the dump reports %d lost records" % lost)
    if ctr.n <= 8:
        per = " ".join(str(d) for d in diffs)
    else:
        per = "%d counters off, max %d" % (sum(1 for d in diffs if d), max(diffs, default=0))
    figures = "%d counters, guest %d stores, traced %d (untraced per counter: %s)" % (
        ctr.n, sum(ctr.values), sum(ctr.values) - sum(diffs), per)
    return problems, figures


class Case:
    """The counters guest of one architecture, traced through bump() only."""

    def __init__(self, args, tmp, arch):
        self.args, self.tmp, self.arch = args, tmp, arch
        self.prog = common.need_file(os.path.join(args.guests, "counters-" + arch),
                                     "guest counters-" + arch)
        lo, size = symbol(arch, self.prog, "bump")
        # The ground truth needs one store per increment: check the compiler's code.
        body = [asm for pc, (_, asm) in common.disassemble(arch, self.prog).items() if lo <= pc < lo + size]
        stores = [asm for asm in body if re.search(STORE[arch], asm)]
        if len(stores) != 1:
            common.fail("%s: bump() has %d store instructions, not 1: %s"
                        % (self.prog, len(stores), body))
        self.filter = range_filter(args.filters, lo, lo + size)
        self.failed = []

    def path(self, name):
        return common.fresh(os.path.join(self.tmp, "%s-%s" % (self.arch, name)))

    def sluice(self, tool, out, margs, **kw):
        cmd = common.cmd_sluice(self.args.sluice, tool, out, self.prog, margs, extra=self.filter)
        return common.run(cmd, **kw)

    def plain(self, margs, **kw):
        return common.run(common.cmd_plain(self.arch, self.prog, margs), **kw)

    def dump_run(self, what, enc, margs, filt, pattern):
        """Runs MODE FILE ARGS (margs, FILE made here) under `sluice run --tool dump` with
        filt, in encoding enc; returns (pattern's match on the guest's stdout, the dump),
        or None after reporting the run failed (a non-zero exit, or no match)."""
        dump = self.path("%s-%s.dump" % (what, enc))
        rc, out, err = common.run(common.cmd_sluice(
            self.args.sluice, "dump", dump, self.prog,
            [margs[0], self.path(what + ".ctr")] + margs[1:], extra=filt),
            extra_env={"SLUICE_ENCODING": enc})
        m = re.match(pattern, out)
        if rc != 0 or not m:
            self.report("%s %s" % (what, enc), ["sluice %s, stdout %r, stderr %r"
                                                % (describe(rc), out[-200:], err[-400:])], "")
            return None
        return m, dump

    def report(self, what, problems, figures):
        where = "%s %s" % (self.arch, what)
        for p in problems:
            print("%s: %s" % (where, p))
        print("%s: %s: %s" % (where, "FAILED" if problems else "ok", figures))
        sys.stdout.flush()
        if problems:
            self.failed.append(where)

    def done(self, name):
        """Drops a dump once read, unless --keep (dumps of endless loops are large)."""
        if not self.args.keep:
            for p in os.listdir(self.tmp):
                if p.startswith("%s-%s" % (self.arch, name)) and p.endswith(".dump"):
                    os.unlink(os.path.join(self.tmp, p))

    def traced(self, what, margs, want_rc=None, each=None, show_out=False, **kw):
        """Runs MODE FILE ARGS untraced (unless want_rc is given) and traced; compares.

        each: the value every counter must end with (the guest did its job).
        show_out: put the guest's stdout in the summary line.
        """
        name = what.replace(" ", "-")
        problems = []
        if want_rc is None:
            plain_file = self.path(name + ".plain")
            rc0, out0, _ = self.plain([margs[0], plain_file] + margs[1:], **kw)
        else:
            rc0, out0 = want_rc, None
        ctr_file, dump = self.path(name + ".ctr"), self.path(name + ".dump")
        rc, out, err = self.sluice("dump", dump, [margs[0], ctr_file] + margs[1:], **kw)
        if rc != rc0:
            problems.append("sluice %s, untraced %s; sluice's stderr: %r"
                            % (describe(rc), describe(rc0), err[-400:]))
        if out0 is not None and out != out0:
            problems.append("stdout differs from the untraced run's:\n  untraced: %r\n"
                            "  sluice:   %r" % (out0[:600], out[:600]))
        if not os.path.exists(ctr_file):
            self.report(what, problems + ["the guest never started (no counters file)"],
                        describe(rc))
            return None, out
        ctr = Counters(ctr_file)
        p, figures = compare(ctr, dump)
        if each is not None and any(v != each for v in ctr.values):
            p.append("the guest's counters are not %d each: %s" % (each, ctr.values[:8]))
        if show_out:
            figures += "; stdout %r" % out.decode(errors="replace").strip()
        self.report(what, problems + p, "%s, %s" % (describe(rc), figures))
        self.done(name)
        return ctr, out


# --- cases ---------------------------------------------------------------------------

def case_exec(c):
    # The guest's own execve is a system call QEMU sees before the kernel tears
    # the other threads down: it can stop them at an instruction boundary and
    # publish their records first, so no store may be missing. Twice: a loss
    # here depends on where the threads are when the exec comes (today about
    # one run in two per architecture loses stores).
    for n in range(2):
        c.traced("exec %d" % (n + 1), ["exec"])


def external_kill(c, n, tool, mode=("wait",)):
    """wait mode (or @p mode: its name and arguments), SIGKILL to the guest (QEMU's pid, a
    child of sluice) once it said ready.

    Returns (sluice's returncode, Counters, the -o file, sluice's stderr).
    """
    ctr_file, out = c.path("wait%d.ctr" % n), c.path("wait%d.%s" % (n, tool))
    cmd = common.cmd_sluice(c.args.sluice, tool, out, c.prog,
                            [mode[0], ctr_file] + list(mode[1:]), extra=c.filter)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=common.guest_env(sluice=True))
    line = p.stdout.readline()
    if line != b"ready\n":
        p.kill()
        common.fail("%s wait: the guest said %r, not ready; stderr %r"
                    % (c.arch, line, p.stderr.read()[-400:]))
    time.sleep(0.2)  # the threads are bumping (and sluice tracing) by now
    ctr = Counters(ctr_file)
    with open("/proc/%d/stat" % ctr.pid) as f:
        ppid = int(f.read().rpartition(")")[2].split()[1])
    if ppid != p.pid:
        p.kill()
        common.fail("%s wait: the guest's pid %d is not sluice's child" % (c.arch, ctr.pid))
    os.kill(ctr.pid, signal.SIGKILL)
    try:
        _, err = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        p.kill()
        common.fail("%s wait: sluice still running 120 s after its guest was killed" % c.arch)
    return p.returncode, Counters(ctr_file), out, err


def killed_asleep(c):
    """A guest SIGKILLed while its only thread sleeps in a system call (its records all
    published: nothing to recover), recorded: the recording's report must say, as the live
    one does, that a thread did not exit (it said nothing when 0 bytes were recovered)."""
    trace, stats = c.path("asleep.sltr"), c.path("asleep.stats")
    cmd = common.cmd_sluice(c.args.sluice, "stats", stats, c.prog,
                            ["churn", c.path("asleep.ctr"), "2", "60"],
                            extra=c.filter + ["--record", trace])
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=common.guest_env(sluice=True))
    line = p.stdout.readline()
    time.sleep(0.2)
    with open("/proc/%d/task/%d/children" % (p.pid, p.pid)) as f:
        for kid in f.read().split():
            os.kill(int(kid), signal.SIGKILL)
    p.communicate(timeout=120)
    with open(stats, "rb") as f:
        live = f.read()  # stats is for people: the note is in it
    rep = subprocess.run([c.args.sluice, "report", trace, "--tool", "stats"],
                         capture_output=True, env=common.guest_env(sluice=True))
    problems = [] if line.startswith(b"2 threads") else ["the guest said %r" % line]
    if (b"guest killed by SIGKILL: 1 thread did not exit (killed by it, or ended earlier by "
            b"an execve); 0 bytes") not in live:
        problems.append("the live report does not say the guest was killed: %r" % live[-300:])
    if b"1 thread ended without exiting" not in rep.stderr:
        problems.append("the report of the recording does not say a thread did not exit: exit "
                        "%d, stderr %r" % (rep.returncode, rep.stderr[-300:]))
    c.report("external SIGKILL, asleep, recorded", problems, "the report says so")


def case_kill(c):
    # A guest that kills itself: as for exec, QEMU sees the kill() system call
    # before the signal exists, so it can stop the other threads at an
    # instruction boundary and publish their records first: the counts must be
    # exact.
    c.traced("selfkill", ["selfkill", "200000"], want_rc=-signal.SIGKILL, each=200000)
    for n in range(2):  # twice, as for exec
        c.traced("selfkill-threads %d" % (n + 1), ["selfkill-threads"], want_rc=-signal.SIGKILL)
    # An external SIGKILL lands at any host instruction of each vCPU thread:
    # between a guest store to the shared page and the completion of its
    # trace record, the store has happened (it is in the file) but its record
    # is not there to read. That is at most one store per thread, and never
    # the other way round: a store is recorded after it is made (record.h),
    # so there is no record of a store that did not happen.
    for n in range(3):
        rc, ctr, dump, err = external_kill(c, n, "dump")
        problems, figures = compare(ctr, dump, slack=1)
        if rc != -signal.SIGKILL:
            problems.append("sluice %s, want signal SIGKILL; stderr %r"
                            % (describe(rc), err[-400:]))
        # The raw dump is for scripts: the note on the kill goes to stderr, not into it.
        with open(dump, errors="replace") as f:
            notes = [line for line in f if "killed" in line]
        if notes or b"guest killed by SIGKILL" not in err:
            problems.append("the note on the kill is in the raw dump (%r), not on stderr (%r)"
                            % (notes[:1], err[-300:]))
        c.report("external SIGKILL %d" % (n + 1), problems, "%s, %s" % (describe(rc), figures))
        c.done("wait%d" % n)
    # Threads that bumped N times and then spin outside bump(), in TBs that
    # write no record: the kill lands long after their last store, whose
    # record must be there to read though no TB since said so (slack 0).
    rc, ctr, dump, err = external_kill(c, 4, "dump", mode=("idle", "5000"))
    problems, figures = compare(ctr, dump)
    if any(v != 5000 for v in ctr.values):
        problems.append("the guest's counters are not 5000 each: %s" % ctr.values)
    if rc != -signal.SIGKILL:
        problems.append("sluice %s, want signal SIGKILL; stderr %r" % (describe(rc), err[-400:]))
    c.report("external SIGKILL, idle threads", problems, "%s, %s" % (describe(rc), figures))
    c.done("wait4")
    killed_asleep(c)
    rc, ctr, report, err = external_kill(c, 3, "stats")
    problems = []
    text = open(report, errors="replace").read() if os.path.exists(report) else ""
    if "killed" not in text.lower():
        problems.append("the stats report does not say the guest was killed:\n%s\nstderr: %r"
                        % (text.rstrip(), err[-400:]))
    m = re.search(r"^\s*total\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)", text, re.M)
    stores = int(m.group(3)) if m else -1
    if not 0 <= sum(ctr.values) - stores <= ctr.n:
        problems.append("stats: %d stores, the guest made %d" % (stores, sum(ctr.values)))
    if rc != -signal.SIGKILL:
        problems.append("sluice %s, want signal SIGKILL" % describe(rc))
    c.report("external SIGKILL, stats", problems, "%s, stats %d stores, guest %d" % (
        describe(rc), stores, sum(ctr.values)))


def case_exit(c):
    # exit() while every other thread runs translated code (they are never in
    # a syscall): exit_group is a system call QEMU sees first, as for exec, so
    # the counts must be exact, and the process must end. It did not always:
    # QEMU waited forever for a thread the jitter had parked mid-TB (about one
    # run in two under sluice, 7 in 8 without a consumer, on x86_64 and
    # aarch64). Three runs, each given 60 s. Then abort(): a signal the guest
    # sends itself, then the same preexit path.
    for n in range(3):
        c.traced("exit %d" % (n + 1), ["exit"], want_rc=0, timeout=60)
    c.traced("abort", ["abort"], want_rc=-signal.SIGABRT, timeout=60, preexec_fn=nocore)


def case_closefds(c):
    c.traced("closefds", ["closefds", "10000"], each=10000)


def case_forkthreads(c):
    # A guest with three other threads forks and its child starts a thread: QEMU 10.0.2 built
    # with plugins (as the series builds it) aborted that child in qemu_plugin_vcpu_init__async,
    # with or without sluice (patch 0040). Every counter, the child's thread's too, must reach N.
    c.traced("forkthreads", ["forkthreads", "1000"], each=1000, show_out=True)


def case_forkrace(c):
    # A thread starts and joins threads one after another while main forks 200 children, each
    # starting a thread of its own. A fork while the other thread held QEMU's clone_lock
    # (creating or ending a thread) left the lock taken in the child, whose pthread_create()
    # then waited forever: every run of this guest under sluice had children hung (killed
    # after 10 s each), and a tree of such processes hung `sluice run` (patch 0042). Every
    # child must end, and each counter equal the stores traced to it.
    c.traced("forkrace", ["forkrace", "200"], show_out=True, timeout=300)


def case_forkstorm(c):
    # Four threads each fork 40 children, each starting a thread of its own, while two more
    # threads start and join threads. A fork while another thread held a lock of glib 2.74's
    # slice allocator (QEMU allocates a new vCPU's state through it) left the lock taken in
    # the child, whose first thread then waited forever: plain QEMU too, in about 1 run in 6
    # (patch 0043). Every child must end, and each counter equal the stores traced to it.
    c.traced("forkstorm", ["forkstorm", "40"], show_out=True, timeout=300)


def case_chroot(c):
    # The guest chroot()s into an empty directory, then forks. The jitter made a forked child's
    # ring arena read-only copy through /proc/self/fd, which the chroot hides: every child was
    # ended ("cannot create the ring arena of forked child"), exit 1. chroot needs root (or
    # CAP_SYS_CHROOT): skipped without it.
    if os.geteuid() != 0:
        print("trust chroot: skipped (chroot needs root)")
        return
    c.traced("chroot", ["chroot", "1000"], each=1000, show_out=True)


def case_pidns(c):
    # Three children each make a PID namespace and fork into it: three grandchildren, each
    # pid 1 of its own namespace. The jitter named rings and its socket by that pid: sluice
    # refused all but the first ("a second announcement of the ring of pid 1"), exit 1, and
    # the refused ones waited forever for it (a hang with three). Root only (CLONE_NEWPID).
    if os.geteuid() != 0:
        print("trust pidns: skipped (CLONE_NEWPID needs root)")
        return
    c.traced("pidns", ["pidns", "1000"], each=1000, show_out=True, timeout=120)
    # Named as `ps` names them (the namespace QEMU started in), not three times "pid 1".
    stats = c.path("pidns.stats")
    rc, out, err = c.sluice("stats", stats, ["pidns", c.path("pidns2.ctr"), "10"], timeout=120)
    text = open(stats, errors="replace").read() if os.path.exists(stats) else ""
    pids = re.findall(r"^\s*(\d+)\s+\d+\s+\S+\s+counters", text, re.M)
    problems = [] if rc == 0 and len(pids) == 7 and "1" not in pids else [
        "sluice %s, pids in the stats %s (want 7, none 1), stderr %r" % (describe(rc), pids,
                                                                         err[-300:])]
    c.report("pidns stats", problems, "pids %s" % " ".join(pids))


def case_spawnexit(c):
    # 60 children one after another, each ending (_exit) while a thread of it starts 64 more.
    # A thread that started after the exit began made a ring nobody closed: sluice said it
    # "ended without exiting (killed, ...)" after a clean exit. And a thread that mapped
    # memory then (QEMU maps a new thread's state) parked in the jitter holding QEMU's mmap
    # lock, which the exiting thread needs next: the child hung, and sluice with it (about
    # one run in three). Every child must exit 0 within the timeout, nothing said of kills.
    rc, out, err = c.sluice("stats", c.path("spawnexit.stats"),
                            ["spawnexit", c.path("spawnexit.ctr"), "60"], timeout=120)
    text = open(c.path("spawnexit.stats"), errors="replace").read() \
        if os.path.exists(c.path("spawnexit.stats")) else ""
    problems = []
    if rc != 0 or out != b"spawnexit: 60 of 60 children exited 0\n":
        problems.append("sluice %s, stdout %r, stderr %r" % (describe(rc), out, err[-400:]))
    if "without exiting" in text or "did not exit" in text:
        problems.append("the report says threads were killed: %r" % text.strip()[-300:])
    c.report("spawnexit", problems, "%s; stdout %r" % (describe(rc), out.decode(
        errors="replace").strip()))
    c.done("spawnexit")


def case_fullas(c):
    # A guest that uses up its address space (mmap PROT_NONE until ENOMEM) and then forks: its
    # child runs untraced, and must be traced too. The jitter mapped the child's block table
    # beside its copy of the parent's (a second 80 MiB) and, out of room, ended the child (the
    # parent saw exit 1; sluice said nothing: exit 0, lost 0).
    c.traced("fullas", ["fullas", "1000"], each=1000, show_out=True)


def case_lowerfsize(c):
    # A guest lowers its own file size limit (setrlimit(RLIMIT_FSIZE) to 1 MiB), then starts
    # threads and forks. Its threads must be traced: the ring arena's size is set when it is
    # made (before, the first new ring died "File too large" and the jitter ended the guest,
    # which sluice blamed on a kill or an execve). Its forked child cannot get an arena of its
    # own: the jitter ends it, and sluice must say so and exit 1 (a child ended so, of a
    # parent that does not look, was a silent exit 0 with lost 0).
    n = 1000
    rc0, out0, _ = c.plain(["lowerfsize", c.path("lowerfsize.plain"), str(n)])
    ctr_file, dump = c.path("lowerfsize.ctr"), c.path("lowerfsize.dump")
    rc, out, err = c.sluice("dump", dump, ["lowerfsize", ctr_file, str(n)])
    problems = []
    if rc0 != 0 or out0 != b"child: exit 0\n":
        problems.append("untraced: %s, stdout %r" % (describe(rc0), out0))
    if rc != 1 or not re.search(rb"sluice: trace: pid \d+ was ended by the jitter.*forked child",
                                err):
        problems.append("sluice %s, stderr %r (want exit 1 and a line saying the jitter ended "
                        "the child)" % (describe(rc), err[-400:]))
    figures = describe(rc)
    if not os.path.exists(ctr_file):
        problems.append("no counters file (the guest did not start?)")
    else:
        ctr = Counters(ctr_file)
        p, figures = compare(ctr, dump)
        problems += p
        if ctr.values[:4] != [n] * 4:
            problems.append("the guest's threads' counters are not %d each: %s"
                            % (n, ctr.values[:4]))
    c.report("lowerfsize", problems, "%s; stdout %r" % (figures, out.decode(errors="replace")
                                                        .strip()))
    c.done("lowerfsize")


def case_threads(c):
    big = c.arch in ("x86_64", "aarch64")
    for n, limit, env in ((4096, 1024, {"SLUICE_RING_BYTES": "262144"}), (200, 64, {})):
        if n == 4096 and not big:
            continue
        c.traced("threads %d, ulimit -n %d" % (n, limit), ["threads", str(n)], each=100,
                 show_out=True, extra_env=env, preexec_fn=nofile(limit))


def tasks_of(uid):
    """Threads of every process of user uid now (what RLIMIT_NPROC counts)."""
    n = 0
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and os.stat("/proc/" + pid).st_uid == uid:
                n += len(os.listdir("/proc/%s/task" % pid))
        except OSError:
            pass
    return n


def nobody(nproc):
    """preexec_fn: run as nobody (uid and gid 65534, no groups) under RLIMIT_NPROC nproc."""
    def f():
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)
    return f


def case_nproc(c):
    """(x86_64, as root) sluice runs as nobody under RLIMIT_NPROC, which its own threads
    count against: the guest makes threads until pthread_create fails, each bumping 20000
    times through 256 KiB rings. sluice's readers are a pool of a few threads (not one per
    ring), so the guest's threads take the limit, not sluice's: every thread the guest made
    is traced, each counter exact, exit 0. (Before the pool, sluice could not start the
    reader of some rings: it gave them up and named them, exit 1; before that, it hung.)"""
    if c.arch != "x86_64":
        return
    if os.geteuid() != 0:
        print("x86_64 nproc: skipped: needs root, to run sluice as nobody")
        return
    d = tempfile.mkdtemp(prefix="sluice-nproc-", dir="/tmp")
    try:
        os.chmod(d, 0o777)  # (nobody writes the counters, the dump and its socket here)
        os.makedirs(os.path.join(d, "qemu", "bin"))
        shutil.copy(os.path.join(common.qemu_dir(), "bin", "qemu-x86_64"),
                    os.path.join(d, "qemu", "bin"))
        jitter = common.jitter_path(c.args.sluice)
        for f in (c.args.sluice, jitter, c.prog, c.filter[1]):
            shutil.copy(f, d)
        filt = list(c.filter)
        filt[1] = os.path.join(d, os.path.basename(filt[1]))
        ctr_file, dump = os.path.join(d, "nproc.ctr"), os.path.join(d, "nproc.dump")
        cmd = common.cmd_sluice(os.path.join(d, "sluice"), "dump", dump,
                                os.path.join(d, os.path.basename(c.prog)),
                                ["nproc", ctr_file, "200", "20000"], extra=filt)
        env = {"SLUICE_QEMU_DIR": os.path.join(d, "qemu"), "XDG_RUNTIME_DIR": d,
               "SLUICE_JITTER": os.path.join(d, os.path.basename(jitter)),
               "SLUICE_RING_BYTES": "262144"}
        rc, out, err = common.run(cmd, timeout=300, extra_env=env,
                                  preexec_fn=nobody(tasks_of(65534) + 60))
        err = err.decode(errors="replace")
        made = re.search(rb"(\d+) threads made \((.*)\)", out)
        problems, figures = [], describe(rc)
        if not made or not os.path.exists(ctr_file):
            problems.append("the guest did not run: stdout %r, stderr %r" % (out, err[-400:]))
        elif made.group(2) == b"all":
            problems.append("the guest made all its threads (the limit did not bite: %s): "
                            "nothing was tested" % describe(rc))
        else:
            ctr = Counters(ctr_file)
            stores, lost = traced_stores(dump)
            stores = stores or {}
            traced = [stores.get((ctr.width, ctr.address(i)), 0) for i in range(ctr.n)]
            ran = [i for i in range(ctr.n) if ctr.values[i]]
            wrong = [i for i in ran if traced[i] != ctr.values[i]]
            if rc != 0 or "not traced" in err:
                problems.append("sluice %s, stderr %r" % (describe(rc), err[-300:]))
            if wrong or lost or len(ran) != int(made.group(1)):
                problems.append("%d threads made, %d ran; counters traced inexactly: %s "
                                "(counter, guest's count, traced), %d lost" % (
                                    int(made.group(1)), len(ran),
                                    [(i, ctr.values[i], traced[i]) for i in wrong[:4]], lost))
            figures = "%s; the guest made %d threads (then %s), each traced exactly" % (
                describe(rc), len(ran), made.group(2).decode())
        # The same with the threads all alive at once (a gate), counted by the stats table,
        # which must be whole.
        stats = os.path.join(d, "nproc.stats")
        rc2, out2, err2 = common.run(
            [os.path.join(d, "sluice"), "run", "--tool", "stats", "-o", stats] + filt +
            ["--", os.path.join(d, os.path.basename(c.prog)), "nproc", ctr_file, "200",
             "20000", "gate"], timeout=300, extra_env=env, preexec_fn=nobody(tasks_of(65534) + 60))
        with open(stats, errors="replace") as f:
            table = f.read()
        if rc2 != 0 or b"not traced" in err2 or "not the whole trace" in table:
            problems.append("stats, threads alive at once: sluice %s, stderr %r, table %r"
                            % (describe(rc2), err2[-300:], table[-300:]))
        c.report("nproc", problems, figures)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def case_churn(c):
    # Threads made and ended one after another by the thousand: exact counts,
    # and the consumer must not keep a reader thread or a ring mapping per
    # ended thread (it did: 176 MiB after 8000). Its peak RSS after 4000
    # threads must stay within CHURN_RSS_MIB of the peak after 50.
    n = 4000 if c.arch in ("x86_64", "aarch64") else 500
    c.traced("churn %d" % n, ["churn", str(n)], each=100, show_out=True)
    rss = []
    for k in (50, n):
        out = c.path("churn%d.json" % k)
        cmd = [c.args.sluice, "run", "--tool", "stats", "--json", "-o", out, "--", c.prog,
               "churn", c.path("churn%d.ctr" % k), str(k)]
        rc, _, err = common.run(cmd)
        try:
            with open(out) as f:
                rss.append(json.load(f)["rusage"]["consumer"]["maxrss_kib"] / 1024)
        except (OSError, ValueError, KeyError) as e:
            c.report("churn rss", ["no stats JSON (%s): rc %s, stderr %r" % (e, rc, err[-300:])],
                     "")
            return
    problems = []
    if rss[1] - rss[0] > CHURN_RSS_MIB:
        problems.append("consumer peak RSS %.0f MiB after %d threads, %.0f MiB after 50"
                        % (rss[1], n, rss[0]))
    if c.arch == "x86_64":
        problems += big_parent_rss(c)
    c.report("churn consumer memory", problems, "peak RSS %.0f MiB after 50 threads, %.0f after %d"
             % (rss[0], rss[1], n))
    if c.arch == "x86_64":
        churn_arena(c)
        churn_arena(c, silent=True)


CHURN_RSS_MIB = 32


def big_parent_rss(c):
    """sluice started by a process holding 256 MiB: its JSON's consumer peak RSS is its own
    (it gave the parent's, ru_maxrss keeping the memory before exec; so did every figure
    bench/run took, Python's 19 MiB). Problems, if any."""
    out = c.path("bigparent.json")
    ballast = bytearray(256 << 20)
    for i in range(0, len(ballast), 4096):
        ballast[i] = 1  # resident
    rc, _, err = common.run([c.args.sluice, "run", "--tool", "stats", "--json", "-o", out, "--",
                             c.prog, "churn", c.path("bigparent.ctr"), "2"])
    del ballast
    try:
        with open(out) as f:
            kib = json.load(f)["rusage"]["consumer"]["maxrss_kib"]
    except (OSError, ValueError, KeyError) as e:
        return ["started by a big parent: no stats JSON (%s): rc %s, stderr %r"
                % (e, rc, err[-300:])]
    return [] if kib < 128 << 10 else [
        "started by a process holding 256 MiB, sluice says it peaked at %d MiB" % (kib >> 10)]
CHURN_ARENA_MIB = 6


def churn_arena(c, silent=False):
    # An exited thread's ring goes back to the kernel once every consumer is done with it.
    # The jitter kept them all while any consumer was attached: 2000 small threads left
    # about 33 MiB with 1 MiB rings (a thread that fills its ring leaves all of it).
    # silent: a lossy consumer that never reads is attached too (as a stopped one), and 60
    # threads fill their rings (200 000 bumps each); it holds every ended ring unread: past 16
    # rings' worth, their rest is taken from it and their pages go back (it pinned all 60
    # MiB). (Not dropped: 60 rings and announcements are under the bounds that tell a stopped
    # consumer, e2e-attach-stopped's case.)
    n, what = (60, "silent") if silent else (2000, "")
    cmd = [c.args.sluice, "run", "--tool", "stats", "-o", c.path("arena%s.stats" % what)] + \
        (["--wait-attach", "1"] if silent else []) + \
        ["--", c.prog, "churn", c.path("arena%s.ctr" % what), str(n), "3"] + \
        (["200000"] if silent else [])
    env = dict(common.guest_env(sluice=True), SLUICE_RING_BYTES="1M")
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    sock = silent_lossy(p, env)[1] if silent else None
    line, held = p.stdout.readline(), None
    time.sleep(1)  # the guest sleeps 3 s after its last thread; the consumer has caught up
    try:
        with open("/proc/%d/task/%d/children" % (p.pid, p.pid)) as f:
            kids = [int(k) for k in f.read().split()]
        held = next((b for b in map(common.arena_bytes, kids) if b is not None), None)
    except OSError:
        pass
    out, err = p.communicate(timeout=600)
    if sock is not None:
        sock.close()
    problems, most = [], CHURN_ARENA_MIB + (16 if silent else 0)
    if p.returncode != 0 or not line.startswith(b"%d threads" % n):
        problems.append("sluice run: exit %d, guest said %r, stderr %r"
                        % (p.returncode, line, err[-300:]))
    if silent and sock is None:
        problems.append("the silent lossy consumer could not attach: stderr %r" % err[-300:])
    if held is None:
        problems.append("no ring arena found in sluice run's children")
    elif held > most << 20:
        problems.append("the ring arena holds %.1f MiB after %d threads ended, more than %d"
                        % (held / 2**20, n, most))
    c.report("churn ring pages" + (" with a silent lossy consumer" if silent else ""), problems,
             "arena holds %s after %d threads ended"
             % ("?" if held is None else "%.1f MiB" % (held / 2**20), n))


def case_environ(c):
    f = c.path("environ.ctr")
    rc0, out0, _ = c.plain(["environ", f])
    rc, out, err = c.sluice("stats", c.path("environ.stats"), ["environ", f])
    l0, l1 = out0.decode(errors="replace").splitlines(), out.decode(errors="replace").splitlines()
    extra = [x for x in l1 if x not in l0]
    missing = [x for x in l0 if x not in l1]
    problems = []
    if rc != rc0:
        problems.append("sluice %s, untraced %s; stderr %r"
                        % (describe(rc), describe(rc0), err[-400:]))
    if out != out0:
        problems.append("stdout differs: only traced: %r; only untraced: %r" % (extra, missing))
    c.report("environ", problems, "%d lines, %d only traced, %d only untraced" % (
        len(l0), len(extra), len(missing)))
    # Named without a '/', found in PATH: its argv[0] is the name, as execvp() gives it
    # (the x86_64 guest run natively says so too), not the path sluice found.
    bindir = c.path("environ-bin")
    os.makedirs(bindir, exist_ok=True)
    name = "sluice-environ-guest"
    shutil.copy(c.prog, os.path.join(bindir, name))
    path = {"PATH": bindir + ":" + os.environ.get("PATH", "/usr/bin:/bin")}
    cmd = common.cmd_sluice(c.args.sluice, "stats", c.path("environ-name.stats"), name,
                            ["environ", f])
    runs = [("sluice", cmd, path, None),
            # An empty entry of PATH is the current directory, as for execvp() (it was not
            # searched: hostile round 10).
            ("sluice, PATH ':/usr/bin' in its directory", cmd, {"PATH": ":/usr/bin"},
             lambda: os.chdir(bindir))]
    if c.arch == platform.machine():
        runs.append(("native", [name, "environ", f], path, None))
    problems = []
    for who, cmd, env, pre in runs:
        rc, out, err = common.run(cmd, extra_env=env, preexec_fn=pre)
        first = out.decode(errors="replace").partition("\n")[0]
        if rc != 0 or first != "argv[0]: " + name:
            problems.append("%s: %s, first line %r (want 'argv[0]: %s'); stderr %r"
                            % (who, describe(rc), first, name, err[-300:]))
    c.report("environ by name", problems, "argv[0] %s as typed (%s)"
             % (name, ", ".join(r[0] for r in runs)))


# --- bytes -----------------------------------------------------------------------------

def reference_count(args, tmp, arch, prog, pargs, pat):
    """Executions of instructions encoded as pat under plain QEMU.

    Returns (count, problems, stdout, returncode, instructions executed in all).
    """
    ref = common.fresh(os.path.join(tmp, "%s-%s.ref" % (arch, os.path.basename(prog))))
    rc, out, err = common.run(common.cmd_ref(arch, args.plugin, ref, prog, pargs))
    pcs = collections.Counter()
    with open(ref, "rb") as f:
        for line in f:
            ev = line.split()
            if len(ev) >= 3 and ev[1] == b"EXEC":
                pcs[int(ev[2], 16)] += 1
    insns = common.disassemble(arch, prog)
    unknown = [pc for pc in pcs if pc not in insns]
    problems = []
    if unknown:
        problems.append("%d executed pcs are not instructions in objdump's listing, e.g. %s"
                        % (len(unknown), [hex(pc) for pc in unknown[:3]]))
    n = sum(k for pc, k in pcs.items() if pc in insns and insns[pc][0] == pat)
    return n, problems, out, rc, sum(pcs.values())


def bytes_run(c, what, prog, pargs, pat):
    problems = []
    ref, p, out0, rc0, total = reference_count(c.args, c.tmp, c.arch, prog, pargs, pat)
    problems += p
    if ref == 0:
        problems.append("the reference saw no execution of %s: nothing to test" % pat.hex())
    stats = c.path(re.sub(r"\W+", "-", what) + ".json")
    rc, out, err = common.run(common.cmd_sluice(
        c.args.sluice, "stats", stats, prog, pargs,
        extra=["--filter", c.args.bytes_filter, "--set", "pat=" + pat.hex(),
               "--set", "patlen=%d" % len(pat), "--json"]))
    if rc != rc0 or out != out0:
        problems.append("sluice %s stdout %r; untraced %s stdout %r; stderr %r" % (
            describe(rc), out[:200], describe(rc0), out0[:200], err[-400:]))
    got = -1
    try:
        with open(stats) as f:
            got = json.load(f)["total"]["insns"]
    except (OSError, ValueError, KeyError) as e:
        problems.append("no stats report (%s); stderr %r" % (e, err[-400:]))
    if got != ref:
        problems.append("sluice selected %d executions of %s, the reference executed %d"
                        % (got, pat.hex(), ref))
    c.report(what, problems, "pattern %s: reference %d of %d executed instructions, sluice %d"
             % (pat.hex(), ref, total, got))


def case_bytes(c):
    loops = common.need_file(os.path.join(c.args.guests, "loops-" + c.arch),
                             "guest loops-" + c.arch)
    bytes_run(c, "syscall instructions in loops", loops, [], bytes.fromhex(SYSCALL[c.arch]))
    if c.arch not in PAGECROSS:
        return
    pat = bytes.fromhex(PAGECROSS[c.arch])
    addr, _ = symbol(c.arch, c.prog, "pagecross_fn")
    code = common.disassemble(c.arch, c.prog).get(addr, (b"", ""))[0]
    if code != pat or (addr & 0xfff) + len(pat) <= 0x1000:
        common.fail("%s: pagecross_fn at %#x is %s (%d bytes): not %s across a page boundary"
                    % (c.arch, addr, code.hex(), len(code), pat.hex()))
    bytes_run(c, "page-crossing instruction at %#x" % addr, c.prog,
              ["pagecross", c.path("pagecross.ctr"), "1000"], pat)


def count_events(dump):
    """{(kind, pc): count} of a dump's events (EXEC, READ8, WRITE1, ...), and records lost."""
    with open(dump, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        found = re.findall(rb" (EXEC|READ\d+|WRITE\d+|LOST) (0x[0-9a-f]+|\d+)", m)
    events = collections.Counter((k.decode(), int(v, 16)) for k, v in found if k != b"LOST")
    return events, sum(int(v) for k, v in found if k == b"LOST")


def case_retry(c):
    if c.arch not in ("x86_64", "aarch64"):
        print("%s retry: no instruction QEMU retries here (misaligned atomics fault, no "
              "precise self-modifying code)" % c.arch)
        return
    names = ["retry_atomic"] + (["retry_smc", "retry_rmw", "retry_rep"]
                                if c.arch == "x86_64" else [])
    extents = [symbol(c.arch, c.prog, n) for n in names]
    lo, hi = extents[0][0], max(a + n for a, n in extents)
    insns = common.disassemble(c.arch, c.prog)
    pcs = {n: [pc for pc in insns if a <= pc < a + size] for n, (a, size) in zip(names, extents)}
    filt = range_filter(c.args.filters, lo, hi)
    # aarch64: enough calls that chunk boundaries fall inside retried instructions
    # (one record per instruction counted some twice there: 146 in 400 000).
    calls_each = "50000" if c.arch == "aarch64" else "1000"
    for enc in ("block", "insn"):
        problems = []
        ran = c.dump_run("retry", enc, ["retry", calls_each], filt,
                         rb"retry atomic (\d+) smc (\d+) word (\d+)")
        if not ran:
            continue
        m, dump = ran
        calls = {"retry_atomic": int(m.group(1)), "retry_smc": int(m.group(2)),
                 "retry_rmw": int(m.group(2)), "retry_rep": int(m.group(2))}
        if int(m.group(3)) != calls["retry_atomic"]:
            problems.append("the word ended at %s after %d atomic adds"
                            % (m.group(3).decode(), calls["retry_atomic"]))
        events, lost = count_events(dump)
        want = collections.Counter()
        for n in names:
            for pc in pcs[n]:
                want[("EXEC", pc)] = calls[n]
        atomic = pcs["retry_atomic"][-2]
        want[("READ8", atomic)] = want[("WRITE8", atomic)] = calls["retry_atomic"]
        rep = None
        if c.arch == "x86_64":
            want[("WRITE1", pcs["retry_smc"][0])] = calls["retry_smc"]
            rmw = pcs["retry_rmw"][0]
            want[("READ8", rmw)] = want[("WRITE8", rmw)] = calls["retry_rmw"]
            rep = pcs["retry_rep"][-2]
            want[("READ1", rep)] = want[("WRITE1", rep)] = 16 * calls["retry_rep"]
            # QEMU runs a rep instruction in parts (TB by TB), each one exec event, as the
            # plugin API counts it: between once and twice per call here.
            n = events[("EXEC", rep)]
            if not calls["retry_rep"] <= n <= 2 * calls["retry_rep"]:
                problems.append("EXEC at %#x (rep movsb): traced %d for %d calls"
                                % (rep, n, calls["retry_rep"]))
        if c.arch == "x86_64":  # ret pops the return address
            for n in names:
                want[("READ8", pcs[n][-1])] = calls[n]
        for key in sorted(set(want) | set(events)):
            if key == ("EXEC", rep):
                continue
            if want[key] != events[key]:
                problems.append("%s at %#x: traced %d, the guest ran it %d times"
                                % (key[0], key[1], events[key], want[key]))
        if lost:
            problems.append("the dump reports %d lost records" % lost)
        c.report("retry %s" % enc, problems, "%d atomic adds, %d stores into the code page, "
                 "%d events traced" % (calls["retry_atomic"], calls["retry_smc"],
                                       sum(events.values())))
        c.done("retry-%s" % enc)


def case_helpers(c):
    if c.arch not in ("x86_64", "aarch64"):
        print("%s helpers: no such instruction in the guest here" % c.arch)
        return
    lo, size = symbol(c.arch, c.prog, "helper_in")
    pcs = [pc for pc in common.disassemble(c.arch, c.prog) if lo <= pc < lo + size]
    filt = range_filter(c.args.filters, lo, lo + size)
    n = 200
    for enc in ("block", "insn"):
        problems = []
        ran = c.dump_run("helpers", enc, ["helpers", str(n)], filt,
                         rb"helpers (\d+) in 0x([0-9a-f]+) out 0x([0-9a-f]+) span (\d+) "
                         rb"changed ([0-9a-f]+)")
        if not ran:
            continue
        m, dump = ran
        buf_in, buf_out, span = int(m.group(2), 16), int(m.group(3), 16), int(m.group(4))
        bits = bytes.fromhex(m.group(5).decode())
        changed = {j for j in range(span) if bits[j // 8] >> (j % 8) & 1}
        events, lost = count_events(dump)
        for pc in pcs:
            if events[("EXEC", pc)] != n:
                problems.append("EXEC at %#x: traced %d, the guest ran it %d times"
                                % (pc, events[("EXEC", pc)], n))
        with open(dump, "rb") as f:
            stores = re.findall(rb" WRITE(\d+) 0x([0-9a-f]+) addr=0x([0-9a-f]+)", f.read())
        covered, outside, total = set(), [], 0
        for sz, pc, addr in stores:
            sz, pc, addr = int(sz), int(pc, 16), int(addr, 16)
            total += sz
            if pc != pcs[0] or not buf_in <= addr < addr + sz <= buf_in + span:
                outside.append("%d bytes at %#x by pc %#x" % (sz, addr, pc))
            covered.update(range(addr - buf_in, addr - buf_in + sz))
        if outside:
            problems.append("%d traced stores outside [%#x, +%d) (buf_out at %#x), e.g. %s"
                            % (len(outside), buf_in, span, buf_out, outside[:3]))
        if not changed:
            problems.append("the guest saw no byte change: the test proves nothing")
        if changed - covered:
            problems.append("%d bytes the guest saw change were never traced, e.g. offset %d"
                            % (len(changed - covered), min(changed - covered)))
        if total != n * len(covered) or (c.arch == "aarch64" and covered != set(range(span))):
            problems.append("traced %d bytes in all over %d bytes of the span (%d calls): "
                            "not the same bytes each call%s"
                            % (total, len(covered), n,
                               ", nor the whole dc zva block" if c.arch == "aarch64" else ""))
        if lost:
            problems.append("the dump reports %d lost records" % lost)
        c.report("helpers %s" % enc, problems, "%d calls, %d bytes stored per call, %d of "
                 "them seen changing by the guest" % (n, len(covered), len(changed)))
        c.done("helpers-%s" % enc)
        if c.arch == "aarch64":
            mops_fault(c, enc)


def mops_fault(c, enc):
    """A traced MOPS copy that faults on a PROT_NONE page: the guest's handler runs, as
    untraced, and the bytes it saw arrive are the traced stores (QEMU died of its own
    SIGSEGV when one side of the copy took the per-access path and the other did not)."""
    out = subprocess.run([common.BINUTILS[c.arch] + "nm", c.prog], stdout=subprocess.PIPE,
                         check=True, text=True).stdout
    at = {f[2]: int(f[0], 16) for f in (line.split() for line in out.splitlines())
          if len(f) == 3}
    if "mops_copy" not in at or "mops_copy_end" not in at:
        common.fail("%s: no labels mops_copy, mops_copy_end (nm)" % c.prog)
    lo, hi = at["mops_copy"], at["mops_copy_end"]
    filt = range_filter(c.args.filters, lo, hi)
    rc0, out0, _ = c.plain(["mopsfault", c.path("mops-plain.ctr")])
    dump = c.path("mops-%s.dump" % enc)
    rc, out, err = common.run(common.cmd_sluice(c.args.sluice, "dump", dump, c.prog,
                                                ["mopsfault", c.path("mops.ctr")], extra=filt),
                              extra_env={"SLUICE_ENCODING": enc})
    problems = []
    m0 = re.search(rb"mops copied (\d+) then SIGSEGV", out0)
    m = re.search(rb"mops copied (\d+) then SIGSEGV", out)
    d = re.search(rb"mops dst 0x([0-9a-f]+)", out)
    if rc != rc0 or rc0 != 3 or not m or not m0 or not d:
        problems.append("sluice %s, stdout %r; untraced %s, stdout %r; stderr %r"
                        % (describe(rc), out[-200:], describe(rc0), out0[-200:], err[-300:]))
    else:
        dst, k = int(d.group(1), 16), int(m.group(1))
        with open(dump, "rb") as f:
            stores = re.findall(rb" WRITE(\d+) 0x[0-9a-f]+ addr=0x([0-9a-f]+)", f.read())
        got = sorted(int(a, 16) - dst for sz, a in stores if int(sz) == 1)
        if got != list(range(k)) or len(stores) != k:
            problems.append("the guest saw %d bytes arrive; traced stores at offsets %s"
                            % (k, got[:8] + (["..."] if len(got) > 8 else [])))
    c.report("helpers mops fault %s" % enc, problems, "%s, %s" % (describe(rc), out.strip()[-60:]))
    c.done("mops-%s" % enc)


def case_cas(c):
    if c.arch not in ("x86_64", "aarch64"):
        print("%s cas: no compare-and-swap instruction in the guest here" % c.arch)
        return
    check_tries(c, "cas", "cas_inc", r"(lock cmpxchg|cas\s)", c.arch == "x86_64")


def case_sc(c):
    if c.arch not in ("aarch64", "riscv64", "mipsel"):
        print("%s sc: no store-conditional instruction in the guest here" % c.arch)
        return
    check_tries(c, "sc", "sc_inc", r"(stxr|sc\.d|sc)\s", False)


def check_tries(c, mode, func, insn, writes_back):
    """Counters' mode `cas` or `sc`: each try of func's one instruction matching insn is
    traced as a load of what memory held, then, if it took, a store of that plus 1; if it
    failed, a store of what memory kept on x86 (writes_back: cmpxchg writes back), else
    none (a failed store-conditional or aarch64 cas stores nothing). The tries that took
    and failed equal the guest's counts, those of its first thread alone included."""
    lo, size = symbol(c.arch, c.prog, func)
    pcs = [pc for pc, (_, asm) in common.disassemble(c.arch, c.prog).items()
           if lo <= pc < lo + size and re.match(insn, asm)]
    if len(pcs) != 1:
        common.fail("%s: %s has %d instructions like %r, not 1" % (c.prog, func, len(pcs), insn))
    filt = range_filter(c.args.filters, lo, lo + size)
    for enc in ("block", "insn"):
        ran = c.dump_run(mode, enc, [mode, "20000"], filt,
                         rb"%s took (\d+) failed (\d+) word (\d+)" % mode.encode())
        if not ran:
            continue
        m, dump = ran
        took, failed = int(m.group(1)), int(m.group(2))
        pat = re.compile(rb"^(\d+) (READ|WRITE)[48] 0x%x addr=0x[0-9a-f]+ val=0x([0-9a-f]+)"
                         % pcs[0], re.M)
        last, ok, kept, unstored, bad = {}, 0, 0, 0, []
        with open(dump, "rb") as f:
            for tid, kind, val in pat.findall(f.read()):
                val = int(val, 16)
                if kind == b"READ":
                    unstored += tid in last
                    last[tid] = val
                    continue
                r = last.pop(tid, None)
                if r is not None and val == r + 1:
                    ok += 1
                elif r is not None and val == r:
                    kept += 1
                else:
                    bad.append((r, val))
        unstored += len(last)
        fails = kept if writes_back else unstored
        problems = []
        if ok != took or fails != failed or kept + unstored != fails or bad:
            problems.append("traced %d tries that took, %d that failed storing what memory "
                            "kept and %d that failed storing nothing (the guest: %d took, %d "
                            "failed, which %s); %d stores of a value memory never held after "
                            "the load, e.g. (read, stored) %s"
                            % (ok, kept, unstored, took, failed, "store on x86" if writes_back
                               else "store nothing here", len(bad), bad[:3]))
        c.report("%s %s" % (mode, enc), problems, "%d tries took, %d failed, traced as they ran"
                 % (ok, fails))
        c.done("%s-%s" % (mode, enc))


MEM_EVENT = re.compile(rb"^\d+ (READ|WRITE)(\d+) 0x([0-9a-f]+) addr=0x([0-9a-f]+) val=0x([0-9a-f]+)",
                       re.M)


def mem_events(dump, addrs):
    """[(kind, size, pc, addr, val)] of a dump's memory events at addresses in addrs (None:
    all), in order (one thread's: the guests here access them from one)."""
    with open(dump, "rb") as f:
        found = MEM_EVENT.findall(f.read())
    return [(k.decode(), int(sz), int(pc, 16), int(a, 16), int(v, 16))
            for k, sz, pc, a, v in found if addrs is None or int(a, 16) in addrs]


def case_rmw(c):
    """Atomic read-modify-writes beside an idle thread (QEMU's parallel helpers): each is a
    READ of what memory held and a WRITE of what it holds after, at its pc, as the guest's own
    plain loads saw them before and after (a store carried the instruction's operand, and
    x86's lock add read the new value: hostile round 7)."""
    lo, size = symbol(c.arch, c.prog, "rmw_ops")
    filt = range_filter(c.args.filters, lo, lo + size)
    for enc in ("block", "insn"):
        ran = c.dump_run("rmw", enc, ["rmw"], filt,
                         rb"rmw long 0x([0-9a-f]+) int 0x([0-9a-f]+) ops (\d+)\n"
                         rb"((?:rmw [0-9a-f]+ [0-9a-f]+\n)*)")
        if not ran:
            continue
        m, dump = ran
        want = [(int(b, 16), int(a, 16)) for b, a in
                re.findall(rb"rmw ([0-9a-f]+) ([0-9a-f]+)\n", m.group(4))]
        read, got = {}, []  # a WRITE after a READ at its pc: an op (plain stores set up)
        for kind, _, pc, _, val in mem_events(dump, {int(m.group(1), 16), int(m.group(2), 16)}):
            if kind == "READ":
                read[pc] = val
            elif pc in read:
                got.append((read.pop(pc), val))
        problems = []
        if len(want) != int(m.group(3)) or not want:
            problems.append("the guest printed %d ops of %s" % (len(want), m.group(3)))
        if got != want:
            bad = [(i, g, w) for i, (g, w) in enumerate(zip(got, want)) if g != w]
            problems.append("traced (read, write) of %d ops, the guest saw %d; first differences "
                            "(op, traced, seen): %s" % (len(got), len(want),
                                                        [(i, tuple(map(hex, g)), tuple(map(hex, w)))
                                                         for i, g, w in bad[:3]]))
        c.report("rmw %s" % enc, problems, "%d atomic ops traced as memory held them before "
                 "and after" % len(got))
        c.done("rmw-%s" % enc)


def case_firstfault(c):
    """First-fault and no-fault vector loads where nothing can fault (riscv64 vle*ff.v, SVE
    ldff1/ldnf1 contiguous and gather) load what they load untraced, every element a traced
    READ at its pc (traced, they stopped after the first element: a legal load, not the one
    the untraced program makes; hostile round 8)."""
    if c.arch not in ("riscv64", "aarch64"):
        print("%s firstfault: no first-fault load here" % c.arch)
        return
    rc, plain, err = common.run(common.cmd_plain(c.arch, c.prog, ["firstfault", c.path("ff")]))
    if rc != 0 or not plain.startswith(b"firstfault "):
        common.fail("%s firstfault untraced: exit %d, %r %r" % (c.arch, rc, plain, err[-300:]))
    want = [int(v) for v in plain.split()[1:]]
    lo, size = symbol(c.arch, c.prog, "firstfault_ops")
    ff = sorted(pc for pc, (_, asm) in common.disassemble(c.arch, c.prog).items()
                if lo <= pc < lo + size and re.match(r"(vle\d+ff\.v|ld[fn]f1)", asm))
    filt = range_filter(c.args.filters, lo, lo + size)
    for enc in ("block", "insn"):
        ran = c.dump_run("firstfault", enc, ["firstfault"], filt, rb"firstfault ([0-9 ]+)\n")
        if not ran:
            continue
        m, dump = ran
        got = [int(v) for v in m.group(1).split()]
        reads = [sum(1 for kind, _, pc, _, _ in mem_events(dump, None) if kind == "READ"
                     and pc == at) for at in ff]
        problems = []
        if got != want:
            problems.append("traced, the loads loaded %s elements; untraced %s" % (got, want))
        if reads != want:
            problems.append("traced READs at the loads' pcs %s: %s, want one per element %s"
                            % ([hex(p) for p in ff], reads, want))
        c.report("firstfault %s" % enc, problems, "elements loaded %s, as untraced" % got)
        c.done("firstfault-%s" % enc)


def case_movbe(c):
    if c.arch != "x86_64":
        print("%s movbe: no byte-swapping access here" % c.arch)
        return
    lo, size = symbol(c.arch, c.prog, "movbe_ops")
    movbe = sorted(pc for pc, (_, asm) in common.disassemble(c.arch, c.prog).items()
                   if lo <= pc < lo + size and asm.startswith("movbe"))
    if len(movbe) != 6:
        common.fail("%s: movbe_ops has %d movbe instructions, not 6" % (c.prog, len(movbe)))
    filt = range_filter(c.args.filters, lo, lo + size)
    for enc in ("block", "insn"):
        ran = c.dump_run("movbe", enc, ["movbe"], filt,
                         rb"movbe cell 0x([0-9a-f]+) seen ((?:[0-9a-f]+ ?){6})\n")
        if not ran:
            continue
        m, dump = ran
        seen = [int(v, 16) for v in m.group(2).split()]
        # Stores: memory's word after each, as a plain load saw it, cut to the store's size;
        # loads: the register the guest got, its bytes swapped back (memory's order).
        sizes = (2, 4, 8)
        want = [("WRITE", n, seen[k] & ((1 << 8 * n) - 1)) for k, n in enumerate(sizes)]
        want += [("READ", n, int.from_bytes((seen[3 + k] & ((1 << 8 * n) - 1)).to_bytes(n, "big"),
                                            "little")) for k, n in enumerate(sizes)]
        got = [(kind, sz, val) for kind, sz, pc, _, val in
               mem_events(dump, {int(m.group(1), 16)}) if pc in movbe]
        problems = []
        if got != want:
            problems.append("movbe traced %s; memory held %s"
                            % ([(k, n, hex(v)) for k, n, v in got],
                               [(k, n, hex(v)) for k, n, v in want]))
        c.report("movbe %s" % enc, problems, "6 movbe accesses traced as memory holds them")
        c.done("movbe-%s" % enc)


def fsize(n):
    """A preexec_fn: `ulimit -f` of n bytes (the jitter's ring arena is a file)."""
    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (n, n))


def case_fsize(c):
    # Under a file size limit the 64 MiB block table does not fit (records per instruction)
    # and each ring must reuse the range an ended thread's ring gave back: 150 threads of
    # 1 MiB rings in an 8 MiB limit. Before, the jitter's ftruncate raised SIGXFSZ and QEMU
    # died of it, handed to the guest as its own.
    ring = {"SLUICE_RING_BYTES": "1M"}
    c.traced("fsize churn", ["churn", "150"], each=100, show_out=True, preexec_fn=fsize(8 << 20),
             extra_env=ring)
    # A limit just above the 80 MiB block table: the table took the first ring's room and
    # nothing was traced (exit 2); it is now left out for records per instruction.
    c.traced("fsize 84 MiB", ["churn", "3"], each=100, preexec_fn=fsize(84 << 20))
    # A ring that cannot fit at all: one line that names the limit, and no signal.
    rc, _, err = c.sluice("stats", c.path("fsize-small.stats"),
                          ["churn", c.path("fsize-small.ctr"), "3"], preexec_fn=fsize(512 << 10),
                          extra_env=ring)
    problems = []
    if rc <= 0 or b"ulimit -f" not in err:
        problems.append("sluice %s, stderr %r" % (describe(rc), err[-400:]))
    c.report("fsize 512 KiB", problems, "%s, %r" % (describe(rc), err.strip().split(b"\n")[-1:]))
    fsize_bare(c)
    fsize_silent(c)


def fsize_bare(c):
    # The same under `qemu-<arch> -jitter` started by hand (no `sluice run` to clean up after
    # it): the jitter ends the process, and its control socket must go with it (exit() runs no
    # QEMU exit hook: it was left behind, one per such ending).
    env = common.guest_env()
    p = subprocess.Popen([common.qemu_bin(c.arch), "-jitter",
                          common.jitter_path(c.args.sluice) + ",ring_bytes=1M", c.prog,
                          "churn", c.path("fsize-bare.ctr"), "3"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                         preexec_fn=fsize(512 << 10), start_new_session=True)
    _, err = p.communicate(timeout=120)
    left = [os.path.join(d, "%d.sock" % p.pid) for d in common.ctl_dirs(env)
            if os.path.lexists(os.path.join(d, "%d.sock" % p.pid))]
    problems = []
    if p.returncode != 1 or b"cannot create the trace ring" not in err or left:
        problems.append("qemu -jitter: %s, socket files left %s, stderr %r"
                        % (describe(p.returncode), left, err[-300:]))
    for path in left:
        os.unlink(path)
    c.report("fsize 512 KiB, qemu -jitter", problems, "%s, socket files left: %s"
             % (describe(p.returncode), left or "none"))


def silent_lossy(run, env):
    """(QEMU's pid, a socket attached to it as a lossy consumer that never reads: HELLO, then
    nothing, as a stopped one), or (pid or None, None) if its socket did not show in 20 s.
    run: a `sluice run --wait-attach 1` Popen with environment env."""
    qemu, sock = common.traced_qemu(run.pid, env)
    if sock is None:
        return qemu, None
    silent = attach.connect(sock)
    silent.send(attach.msg(attach.HELLO, lossless=0))
    return qemu, silent


def fsize_silent(c):
    # A lossy consumer that never reads (HELLO, then nothing: a stopped one) holds the rings of
    # ended threads unread while threads churn under ulimit -f. It must be dropped at once, and
    # the guest run on with exact counts (it died after 10 s: "cannot create the trace ring ...
    # File too large"; a SIGSTOPped `sluice attach --lossy` did the same).
    ctr, dump = c.path("fsize-silent.ctr"), c.path("fsize-silent.dump")
    env = dict(common.guest_env(sluice=True), SLUICE_RING_BYTES="1M")
    run = subprocess.Popen(common.cmd_sluice(c.args.sluice, "dump", dump, c.prog,
                                             ["churn", ctr, "150"],
                                             extra=c.filter + ["--wait-attach", "1"]),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                           preexec_fn=fsize(8 << 20), start_new_session=True)
    problems, took = [], 0.0
    qemu, silent = silent_lossy(run, env)
    if silent is None:
        problems.append("no socket of the traced QEMU (pid %s) within 20 s" % qemu)
        os.killpg(run.pid, signal.SIGKILL)
    t1 = time.monotonic()
    try:
        out, err = run.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signal.SIGKILL)
        out, err = run.communicate()
    took = time.monotonic() - t1
    if silent is not None:
        silent.close()
    if run.returncode != 0 or not out.startswith(b"150 threads") or took > 8 or \
            b"dropped: it holds rings of ended threads unread" not in err:
        problems.append("sluice run: %s after %.1f s with a silent lossy consumer, stdout %r, "
                        "stderr %r" % (describe(run.returncode), took, out, err[-300:]))
    if os.path.exists(ctr):
        p, figures = compare(Counters(ctr), dump)
        problems += p
    else:
        figures = "no counters file"
    c.report("fsize silent lossy consumer", problems, "guest done in %.1f s, %s"
             % (took, figures))

MAP_LINE = re.compile(r"^(\d+) (MAPPED|MMAP|MUNMAP|MPROTECT|MREMAP) 0x([0-9a-f]+) len=0x([0-9a-f]+)"
                      r"(?: prot=([-r][-w][-x]))?(?: from=0x([0-9a-f]+) old_len=0x([0-9a-f]+))?"
                      r"(?: off=0x([0-9a-f]+))?(?: base=0x[0-9a-f]+)?(?: (.*))?$")
EXEC_LINE = re.compile(r"^(\d+) EXEC 0x([0-9a-f]+) (\S+)$")


def prot_bits(text):
    return sum(b for ch, b in zip(text, (1, 2, 4)) if ch != "-")


def guest_changes(out, code):
    """The guest's own changes and runs of calls, from its stdout."""
    changes, calls = [], []
    for line in out.decode().splitlines():
        f = line.split()
        if f[0] == "mmap":
            anon = int(f[4], 16) == (1 << 64) - 1 or int(f[4], 16) == (1 << 32) - 1
            changes.append(("MMAP", int(f[1], 16), int(f[2], 16), int(f[3]),
                            None if anon else int(f[4], 16), "[anon]" if anon else code))
        elif f[0] == "munmap":
            changes.append(("MUNMAP", int(f[1], 16), int(f[2], 16), None, None, None))
        elif f[0] == "mprotect":
            changes.append(("MPROTECT", int(f[1], 16), int(f[2], 16), int(f[3]), None, None))
        elif f[0] == "mremap":
            changes.append(("MREMAP", int(f[1], 16), int(f[2], 16), (int(f[3], 16), int(f[4], 16)),
                            None, code))
        elif f[0] == "call":
            off = int(f[3], 16)
            anon = off in ((1 << 64) - 1, (1 << 32) - 1)
            calls.append((int(f[1], 16), int(f[2], 16), None if anon else off, len(f) > 4))
    return changes, calls


def check_maps(c, enc, dump, out, code, loads):
    """The problems of one `dump --maps` run, and its figures."""
    changes, calls = guest_changes(out, code)
    prog = os.path.realpath(c.prog)
    problems, events, mapped, main = [], [], [], None
    execs = collections.Counter()  # (tid, pc, where)
    with open(dump, errors="replace") as f:
        for line in f:
            m = EXEC_LINE.match(line)
            if m:
                execs[(m.group(1), int(m.group(2), 16), m.group(3))] += 1
                continue
            m = MAP_LINE.match(line.rstrip("\n"))
            if not m:
                continue
            main = main or m.group(1)
            if m.group(1) != main:
                continue
            kind, start, size = m.group(2), int(m.group(3), 16), int(m.group(4), 16)
            prot = prot_bits(m.group(5)) if m.group(5) else None
            off = int(m.group(8), 16) if m.group(8) else None
            if kind == "MAPPED":
                mapped.append((start, size, prot, off, m.group(9)))
            elif kind == "MREMAP":
                events.append((kind, start, size, (int(m.group(6), 16), int(m.group(7), 16)),
                               None, m.group(9)))
            else:
                file_ = m.group(9) if kind == "MMAP" else None
                events.append((kind, start, size, prot,
                               off if file_ not in (None, "[anon]") else None, file_))
    # The guest's changes, in order, among its thread's events.
    j = 0
    for e in events:
        if j < len(changes) and e == changes[j]:
            j += 1
    if j < len(changes):
        problems.append("the guest's change %r is not among its thread's mapping events (after "
                        "%d of %d found); events were %r" % (changes[j], j, len(changes),
                                                             events[-12:]))
    # The snapshot maps the program as readelf says.
    for vaddr, memsz, offset, ex in loads:
        if not any(s <= vaddr < s + n and path == prog and o + (vaddr - s) == offset
                   and (not ex or p & 4) for s, n, p, o, path in mapped):
            problems.append("no MAPPED line maps %s's LOAD at 0x%x (file offset 0x%x%s): %r"
                            % (prog, vaddr, offset, ", executable" if ex else "", mapped[:6]))
    # Every executed pc of the program: the file offset readelf's headers give.
    name = os.path.basename(prog)
    wrong, unknown, seen = [], 0, 0
    for (tid, pc, where), n in execs.items():
        if where == "[?]":
            unknown += 1
        seg = [(v, o) for v, size, o, ex in loads if ex and v <= pc < v + size]
        if seg:
            seen += 1
            want = "%s@0x%x" % (name, seg[0][1] + pc - seg[0][0])
            if where != want:
                wrong.append((hex(pc), where, want))
    if wrong:
        problems.append("%d pcs of the program resolve wrongly, e.g. (pc, dump, readelf) %r"
                        % (len(wrong), wrong[:3]))
    if enc == "block":
        if unknown:
            problems.append("%d executed pcs resolve to no mapping" % unknown)
        # Each run of calls: its entry pc, in the file at the offset mapped there then.
        want = collections.Counter()
        for addr, n, off, thread in calls:
            where = "[anon]" if off is None else "%s@0x%x" % (os.path.basename(code), off)
            want[(thread, addr, where)] += n
        got = collections.Counter()
        for (tid, pc, where), n in execs.items():
            if any(pc == addr for addr, _, _, _ in calls):
                got[(tid != main, pc, where)] += n
        if got != want:
            problems.append("calls of the copies resolve as %r; the guest made %r"
                            % (sorted(got.items()), sorted(want.items())))
    return problems, "%d changes in order, %d MAPPED, %d program pcs at readelf's offsets" % (
        len(changes), len(mapped), seen)


def case_maps(c):
    loads = common.elf_loads(c.arch, c.prog)
    for enc in ("block", "insn"):
        dump = c.path("maps-%s.dump" % enc)
        ctr = c.path("maps-%s.ctr" % enc)
        rc, out, err = common.run(common.cmd_sluice(c.args.sluice, "dump", dump, c.prog,
                                                    ["maps", ctr, "200"], extra=["--maps"]),
                                  extra_env={"SLUICE_ENCODING": enc})
        if rc != 0:
            c.report("maps %s" % enc, ["sluice %s, stdout %r, stderr %r"
                                       % (describe(rc), out[-200:], err[-400:])], "")
            continue
        problems, figures = check_maps(c, enc, dump, out, os.path.realpath(ctr + ".code"), loads)
        c.report("maps %s" % enc, problems, figures)
        c.done("maps-%s" % enc)


CASES = {"nproc": case_nproc, "exec": case_exec, "exit": case_exit, "kill": case_kill, "closefds": case_closefds,
         "forkthreads": case_forkthreads, "forkrace": case_forkrace,
         "forkstorm": case_forkstorm, "chroot": case_chroot,
         "pidns": case_pidns,
         "spawnexit": case_spawnexit, "lowerfsize": case_lowerfsize, "fullas": case_fullas,
         "threads": case_threads, "churn": case_churn, "environ": case_environ,
         "bytes": case_bytes, "fsize": case_fsize, "retry": case_retry,
         "helpers": case_helpers, "cas": case_cas, "sc": case_sc, "maps": case_maps, "rmw": case_rmw,
         "movbe": case_movbe, "firstfault": case_firstfault}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("case", choices=sorted(CASES))
    ap.add_argument("--sluice", required=True)
    ap.add_argument("--plugin", required=True)
    ap.add_argument("--guests", required=True)
    ap.add_argument("--filters", required=True)
    ap.add_argument("--bytes-filter", required=True)
    ap.add_argument("--arch", action="append")
    ap.add_argument("--keep", help="keep counters and traces in this directory")
    args = ap.parse_args()
    common.qemu_dir()
    common.need_file(args.sluice, "sluice")
    common.need_file(args.plugin, "reference plugin (configure meson with -Dqemu_dir)")
    common.need_file(os.path.join(args.filters, "range.bpf.o"), "range filter")
    common.need_file(args.bytes_filter, "bytes filter")
    failed = []
    with tempfile.TemporaryDirectory(prefix="sluice-trust-") as tmp:
        tmp = args.keep or tmp
        os.makedirs(tmp, exist_ok=True)
        for arch in args.arch or common.ARCHES:
            c = Case(args, tmp, arch)
            CASES[args.case](c)
            failed += c.failed
    if failed:
        common.fail("trust %s: %d failed: %s" % (args.case, len(failed), "; ".join(failed)))
    print("trust %s: all as the guest says" % args.case)


if __name__ == "__main__":
    main()
