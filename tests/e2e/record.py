#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""record: `sluice report TRACE` gives what the live session gave, for the same run.

Each run is traced live with a tool and recorded at once (`sluice run --tool T
--record TRACE`); `sluice report TRACE --tool T` must then give:

  dump    the same raw lines (--raw --maps, and --syscalls in the run), thread by
          thread in the same order (threads interleave as they please)
  stats   the same counts per thread and in total (--json)
  cov     the same drcov module table and blocks (as sets: their order follows
          the threads' interleaving)

on the host's sha256sum (x86_64 PIE, ld.so, libc), Debian's arm64 busybox
sha256sum, and the threads and forkexec guests. Then a recording is damaged
as a disk or a copy would damage it, and report must say so in one line that
names the file and the frame (the chunk and its thread, or the byte offset),
exit non-zero, and still deliver every chunk before the damage, in order:

  cut       the file cut inside a chunk (no index, no end): each thread's
            lines are a prefix of the full dump, all chunks before the cut read,
            and the threads the file started but did not end named
  payload   one byte of a chunk's payload changed: that thread's lines stop
            exactly where the chunk starts (its exec events are the index's
            count before it), the other threads are whole
  header    one bit of a chunk's header changed (its size): the same, the
            frames after it found through the index
  ringend, end, file   one bit of a frame that is a header alone (a lost count,
            the result, the version): its crc names it, exit non-zero
  droplast  a ring's last chunk frame cut out whole: named (its RING_END counts them)
  dropend   a ring's RING_END frame cut out whole: named (the thread's end is missing)
  appended  a second trace after the first: the first whole, the rest named
  index     the trailer damaged: the frames are found by reading them from the
            start, and the dump is whole (exit 0)
  unknown   a chunk's type changed to one no sluice writes (and the trailer damaged, so
            the frames are scanned): named with the type it claims
  garbage   random bytes, an empty file: "not a sluice trace file"

A recording made with --uncompressed (chunks stored as the rings held them) must
report the same dump, store every chunk as is (flags 0, stored bytes = raw
bytes), and name the same damage; --uncompressed without a recording, or given
twice, is a usage error (exit 2).

And where a recording cannot be written: a character device, the file -o
writes, an option as the file name are refused in one line (exit 2) before the
guest starts, and so is report's -o naming the trace it reads, -o or --record
naming the program or where stdout goes, and a second recording into a file
being recorded; under `ulimit -f` the recording stops at the limit, the guest
and the live report are whole (exit 1, saying so), and the file reads up to
where it stopped.

A recording that begins (an attach) after a library the guest mapped was renamed
over by a file of its size and time but not it (the `replaced` guest, `renamed`)
must not keep that file as the path's: report names the code as path@offset.

  record.py --sluice build/consumer/sluice --guests build/tests/e2e
"""

import argparse
import collections
import json
import os
import re
import shutil
import struct
import subprocess
import tempfile
import time
import zlib

import common

FRAME = struct.Struct("<IHHIIQQ4Q")
RING, CHUNK, RING_END, INDEX_T, TRAILER = 2, 4, 5, 7, 8


def per_thread(path):
    """{tid: [line]} of a raw dump, each thread's lines in order."""
    d = collections.defaultdict(list)
    with open(path, errors="replace") as f:
        for line in f:
            d[line.split(" ", 1)[0]].append(line)
    return d


def sluice(args, cmd, want_rc=0, what=""):
    rc, out, err = common.run([args.sluice] + cmd, timeout=900)
    if want_rc is not None and rc != want_rc:
        common.fail("%s: sluice %s exited %d, not %d: %r" % (what, " ".join(cmd[:2]), rc, want_rc,
                                                             err[-600:]))
    return rc, out.decode(errors="replace"), err.decode(errors="replace")


def live_and_report(args, tmp, name, tool, prog, pargs, extra=(), rextra=()):
    """(live output path, report output path, trace path) of one recorded run."""
    trace = common.fresh(os.path.join(tmp, "%s-%s.sltr" % (name, tool)))
    live = common.fresh(os.path.join(tmp, "%s-%s.live" % (name, tool)))
    rep = common.fresh(os.path.join(tmp, "%s-%s.rep" % (name, tool)))
    sluice(args, ["run", "--tool", tool] + list(extra) + ["--record", trace, "-o", live, "--",
                                                          prog] + list(pargs), what=name)
    sluice(args, ["report", trace, "--tool", tool] + list(rextra) + ["-o", rep], what=name)
    return live, rep, trace


def check_dump(args, tmp, name, prog, pargs, problems):
    opts = ["--raw", "--maps"]
    live, rep, trace = live_and_report(args, tmp, name, "dump", prog, pargs,
                                       extra=opts + ["--syscalls"], rextra=opts)
    a, b = per_thread(live), per_thread(rep)
    if a != b:
        problems.append("%s dump: report differs from live: threads %s vs %s, lines %s vs %s"
                        % (name, sorted(a), sorted(b), [len(v) for v in a.values()],
                           [len(v) for v in b.values()]))
    print("%s dump: %d threads, %d lines, trace %d bytes" % (
        name, len(a), sum(len(v) for v in a.values()), os.path.getsize(trace)))
    return trace, a


def check_stats(args, tmp, name, prog, pargs, problems):
    live, rep, _ = live_and_report(args, tmp, name, "stats", prog, pargs, extra=["--json"],
                                   rextra=["--json"])

    def counts(path):
        with open(path) as f:
            j = json.loads(f.readline())
        return j["total"], sorted((t["pid"], t["tid"], t["insns"], t["loads"], t["stores"],
                                   t["lost"]) for t in j["threads"])
    if counts(live) != counts(rep):
        problems.append("%s stats: live %r, report %r" % (name, counts(live), counts(rep)))
    print("%s stats: %r" % (name, counts(live)[0]))


def check_cov(args, tmp, name, prog, pargs, problems):
    live, rep, _ = live_and_report(args, tmp, name, "cov", prog, pargs)

    def blocks(path):
        with open(path, "rb") as f:
            data = f.read()
        head, _, table = data.partition(b"BB Table: ")
        n = int(table.split(b" ", 1)[0])
        body = table[table.index(b"\n") + 1:]
        return head, sorted(struct.unpack_from("<IHH", body, 8 * k) for k in range(n))
    if blocks(live) != blocks(rep):
        problems.append("%s cov: the report's drcov file differs from the live one" % name)


def check_uncompressed(args, tmp, name, prog, pargs, problems):
    """A recording with --uncompressed: the same report, chunks stored as is, damage named."""
    opts = ["--raw", "--maps"]
    live, rep, trace = live_and_report(args, tmp, name + "-raw", "dump", prog, pargs,
                                       extra=opts + ["--syscalls", "--uncompressed"], rextra=opts)
    a, b = per_thread(live), per_thread(rep)
    if a != b:
        problems.append("%s --uncompressed dump: report differs from live: lines %s vs %s"
                        % (name, [len(v) for v in a.values()], [len(v) for v in b.values()]))
    with open(trace, "rb") as f:
        data = f.read()
    n = 0
    for at, typ, _, _, _ in frames(trace):
        _, _, flags, _, _, stored, raw = FRAME.unpack_from(data, at)[:7]
        if typ == CHUNK:
            n += 1
            if flags != 0 or stored != raw:
                problems.append("%s --uncompressed: the chunk at byte %d has flags %d, %d bytes "
                                "stored for %d" % (name, at, flags, stored, raw))
    print("%s --uncompressed: %d chunks, trace %d bytes" % (name, n, len(data)))
    if n == 0:
        problems.append("%s --uncompressed: no chunk in the trace" % name)
    check_damage(args, tmp, name + "-raw", trace, a, problems)
    for bad in (["--uncompressed"], ["--record", os.path.join(tmp, "twice.sltr"),
                                     "--uncompressed", "--uncompressed"]):
        rc, _, err = sluice(args, ["run"] + bad + ["--", prog] + list(pargs), want_rc=None)
        if rc != 2 or len(err.strip().splitlines()) != 1 or "--uncompressed" not in err:
            problems.append("run %s: exit %d, %r: want exit 2 and one line naming "
                            "--uncompressed" % (" ".join(bad), rc, err[-300:]))


def frames(path):
    """[(offset, type, stream, args)] of a trace file, read from its start (trace_file.h)."""
    with open(path, "rb") as f:
        data = f.read()
    out, at = [], 0
    while at + FRAME.size <= len(data):
        magic, typ, _, stream, _, stored, _, a0, a1, a2, a3 = FRAME.unpack_from(data, at)
        if magic != 0x52464c53:
            common.fail("%s: no frame at byte %d" % (path, at))
        out.append((at, typ, stream, (a0, a1, a2, a3), stored))
        at += FRAME.size + stored
    return out


def index_insns(path):
    """{frame offset: exec events of its ring before it} from the file's INDEX (stored as is,
    trace_file.h), found through its trailer."""
    with open(path, "rb") as f:
        data = f.read()
    t = FRAME.unpack_from(data, len(data) - FRAME.size)
    if t[1] != TRAILER:
        common.fail("%s: no trailer" % path)
    h = FRAME.unpack_from(data, t[7])
    if h[1] != INDEX_T or h[2] != 0:
        common.fail("%s: the trailer names no plain INDEX frame" % path)
    body = data[t[7] + FRAME.size:t[7] + FRAME.size + h[5]]
    return {off: insns for off, _, _, _, _, insns in struct.iter_unpack("<QHHIQQ", body)}


def damaged(args, tmp, name, trace, whole, how, edit, problems, maps_move=False):
    """Report a copy of trace changed by edit(bytearray); returns (rc, err, {tid: lines}).

    maps_move: a process's map snapshot may come with another thread's first chunk (the
    thread that carried it is not delivered): map lines are left out of the prefix check."""
    copy = os.path.join(tmp, "%s-%s.sltr" % (name, how))
    with open(trace, "rb") as f:
        data = bytearray(f.read())
    edit(data)
    with open(copy, "wb") as f:
        f.write(data)
    out = common.fresh(os.path.join(tmp, "%s-%s.rep" % (name, how)))
    rc, _, err = sluice(args, ["report", copy, "--tool", "dump", "--raw", "--maps", "-o", out],
                        want_rc=None)
    got = per_thread(out) if os.path.exists(out) else {}

    def code(lines):
        return [l for l in lines if not maps_move or l.split()[1] not in MAP_LINES]
    for tid, lines in got.items():
        if code(lines) != code(whole.get(tid, []))[:len(code(lines))]:
            problems.append("%s %s: thread %s's lines are not a prefix of the whole dump"
                            % (name, how, tid))
    lines = [l for l in err.splitlines() if l.startswith("sluice: report:")]
    print("%s %s: exit %d, %s" % (name, how, rc, "\n  ".join(lines) if lines
                                   else err.strip()[-200:]))
    return rc, "\n".join(lines), got


def cut_out(frame):
    """An edit for damaged(): frame (as frames() lists it) cut out of the file whole."""
    return lambda d: d.__delitem__(slice(frame[0], frame[0] + FRAME.size + frame[4]))


def check_damage(args, tmp, name, trace, whole, problems):
    fr = frames(trace)
    chunks = [f for f in fr if f[1] == CHUNK]
    if len(chunks) < 4:
        common.fail("%s: only %d chunks: too few to damage" % (name, len(chunks)))
    # cut: inside the payload of the chunk in the middle.
    mid = chunks[len(chunks) // 2]
    rc, err, got = damaged(args, tmp, name, trace, whole, "cut",
                           lambda d: d.__delitem__(slice(mid[0] + FRAME.size + mid[4] // 2, None)),
                           problems)
    if rc == 0 or "cut short" not in err or "byte %d" % mid[0] not in err:
        problems.append("%s cut: exit %d, %r: want a non-zero exit naming the frame at byte %d"
                        % (name, rc, err, mid[0]))
    # Every thread the file starts before the cut and ends after it is named as cut short
    # (stats' counts of them are partial; nothing said which, before), and no other: the
    # count, and the first eight tids in the file's order.
    cut_at = mid[0] + FRAME.size + mid[4] // 2
    ended = {f[2] for f in fr if f[1] == RING_END and f[0] < cut_at}
    want = [f[3][0] >> 32 for f in sorted(fr, key=lambda f: f[2])
            if f[1] == RING and f[0] < cut_at and f[2] not in ended]
    said = re.search(r"the file ends before the end of (\d+) threads?: tid ([\d, ]+)", err)
    named = (int(said.group(1)), [int(t) for t in said.group(2).strip(", ").split(", ")]) \
        if said else (0, [])
    if named != (len(want), want[:8]):
        problems.append("%s cut: threads named as cut short %r, want %r (started before the "
                        "cut, ended after it): %r" % (name, named, want, err))
    before = collections.Counter(f[2] for f in chunks if f[0] < mid[0])
    if sum(len(v) for v in got.values()) == 0 or len(got) < len(before):
        problems.append("%s cut: the %d chunks before the cut were not delivered"
                        % (name, sum(before.values())))
    # payload: a byte in the middle of one chunk's compressed payload; header: a bit of one
    # chunk's stored size (the index still lists every frame after it).
    for how, victim, at, want_why in (
            ("payload", chunks[len(chunks) // 3], lambda v: v[0] + FRAME.size + v[4] // 2,
             "damaged"),
            ("header", chunks[len(chunks) // 4], lambda v: v[0] + 20, "header is damaged")):
        def flip(d, at=at(victim)):
            d[at] ^= 0x40
        rc, err, got = damaged(args, tmp, name, trace, whole, how, flip, problems)
        want = "chunk %d of tid" % victim[3][0]
        if rc == 0 or want not in err or want_why not in err:
            problems.append("%s %s: exit %d, %r: want a non-zero exit naming %r, %r"
                            % (name, how, rc, err, want, want_why))
        tids = [t for t in whole if t not in got or len(got[t]) != len(whole[t])]
        if len(tids) != 1:
            problems.append("%s %s: threads cut short %r: want exactly the damaged one" %
                            (name, how, tids))
        # The damaged thread has every chunk before the victim, and nothing after: as many
        # EXEC lines as the index counts exec events of its ring before that chunk.
        want_insns = index_insns(trace)[victim[0]]
        got_insns = sum(1 for l in got.get(tids[0] if tids else "", []) if " EXEC " in l)
        if got_insns != want_insns:
            problems.append("%s %s: %d exec events of the damaged thread delivered, %d come "
                            "before its chunk %d" % (name, how, got_insns, want_insns,
                                                     victim[3][0]))
    # two: a chunk of each of two threads damaged: each is named (only the first was: the
    # second thread was cut short in silence), and only those two threads are cut.
    streams = sorted({f[2] for f in chunks})
    if len(streams) >= 2:
        pair = [next(f for f in chunks[1:] if f[2] == st) for st in streams[:2]]

        def flip2(d):
            for v in pair:
                d[v[0] + FRAME.size + v[4] // 2] ^= 0x40
        rc, err, got = damaged(args, tmp, name, trace, whole, "two", flip2, problems)
        named = [l for l in err.splitlines() if "chunk %d of tid" % pair[0][3][0] in l
                 or "chunk %d of tid" % pair[1][3][0] in l]
        tids = [t for t in whole if t not in got or len(got[t]) != len(whole[t])]
        if rc == 0 or len(named) != 2 or len(tids) != 2:
            problems.append("%s two: exit %d, %r, threads cut short %r: want a non-zero exit "
                            "and a line for each damaged chunk, and two threads cut"
                            % (name, rc, err, tids))
    # start: one thread's RING frame damaged (its payload) and a chunk of another: each thread
    # named once (the first's chunks each said "names a thread whose start is not in the
    # file", crowding the second's damage out of the kept errors: it was cut in silence).
    rings = [f for f in fr if f[1] == RING and f[4] > 0]
    if len(streams) >= 2 and len(rings) >= 2:
        first = rings[0]
        other = next((f for f in chunks if f[2] != first[2]), None)

        def flip_start(d):
            d[first[0] + FRAME.size + first[4] // 2] ^= 0x40
            d[other[0] + FRAME.size + other[4] // 2] ^= 0x40
        rc, err, got = damaged(args, tmp, name, trace, whole, "start", flip_start, problems,
                               maps_move=True)
        lines = err.splitlines()
        tid = first[3][0] >> 32
        if rc == 0 or len(lines) != 2 or "start of tid %d" % tid not in lines[0] or \
                "chunk %d of tid" % other[3][0] not in err or str(tid) in got:
            problems.append("%s start: exit %d, %r, threads %r: want a non-zero exit, one line "
                            "for tid %d's start and one for the other thread's chunk"
                            % (name, rc, err, sorted(got), tid))
    # A frame with no payload is its header alone: a bit of a RING_END's lost count, of the
    # END's result or of the FILE frame's version must be found by its crc, not believed.
    for how, typ, field, want_why in (("ringend", 5, 40, "header is damaged"),
                                      ("end", 6, 32, "header is damaged"),
                                      ("file", 1, 32, "is damaged")):
        victim = next(f for f in fr if f[1] == typ)
        rc, err, _ = damaged(args, tmp, name, trace, whole, how,
                             lambda d, at=victim[0] + field: d.__setitem__(at, d[at] ^ 0x20),
                             problems)
        want = "at byte %d" % victim[0]
        if rc == 0 or want not in err or want_why not in err:
            problems.append("%s %s: exit %d, %r: want a non-zero exit naming %r, %r"
                            % (name, how, rc, err, want, want_why))
    # droplast: a ring's last CHUNK frame cut out whole (every crc still right): its
    # RING_END counts the chunks the thread had, so the loss must be named.
    ends = [k for k, f in enumerate(fr) if f[1] == 5 and k > 0 and fr[k - 1][1] == CHUNK
            and fr[k - 1][2] == f[2]]  # its own ring's chunk, not another thread's
    if ends:
        last = fr[ends[0] - 1]
        rc, err, _ = damaged(args, tmp, name, trace, whole, "droplast", cut_out(last),
                             problems)
        if rc == 0 or "ended after" not in err:
            problems.append("%s droplast: exit %d, %r: want a non-zero exit saying the thread's "
                            "last chunk is missing" % (name, rc, err))
    # dropend: a ring's RING_END frame cut out whole (every crc still right): the thread's
    # trace is whole but its end is not in the file, which must be named (it passed).
    end = next((f for f in fr if f[1] == 5), None)
    if end:
        rc, err, _ = damaged(args, tmp, name, trace, whole, "dropend", cut_out(end), problems)
        if rc == 0 or "no end" not in err:
            problems.append("%s dropend: exit %d, %r: want a non-zero exit saying a thread's "
                            "end is not in the file" % (name, rc, err))
    # appended: a second copy of the trace after the first: the first is read whole, the
    # rest is named, not skipped in silence.
    rc, err, got = damaged(args, tmp, name, trace, whole, "appended",
                           lambda d: d.extend(bytes(d)), problems)
    if rc == 0 or "follow its trailer" not in err or got != whole:
        problems.append("%s appended: exit %d, %r, %s: want the whole first trace and a "
                        "non-zero exit naming the bytes after it"
                        % (name, rc, err, "same" if got == whole else "different"))
    # index: the trailer's pointer damaged; the scan finds everything.
    rc, err, got = damaged(args, tmp, name, trace, whole, "index",
                           lambda d: d.__setitem__(slice(len(d) - 24, len(d) - 16),
                                                   b"\xff" * 8), problems)
    if rc != 0 or got != whole:
        problems.append("%s index: exit %d (%r), %s: want the whole dump from a scan" % (
            name, rc, err, "same" if got == whole else "different"))
    # indexcut: the file cut inside the INDEX frame's header, after END: nothing of the
    # trace is lost, as for a damaged index (it said the file was not the whole trace).
    with open(trace, "rb") as f:
        data = f.read()
    at = FRAME.unpack_from(data, len(data) - FRAME.size)[7] + 24
    rc, err, got = damaged(args, tmp, name, trace, whole, "indexcut",
                           lambda d: d.__delitem__(slice(at, len(d))), problems)
    if rc != 0 or got != whole:
        problems.append("%s indexcut: exit %d (%r), %s: want the whole dump, exit 0" % (
            name, rc, err, "same" if got == whole else "different"))
    # unknown: a chunk's type changed to one no sluice writes, read by a scan (the trailer
    # damaged too): the frame is named with the type it claims, not as "no frame header".
    odd = chunks[len(chunks) // 2]

    def retype(d):
        d[odd[0] + 4:odd[0] + 6] = struct.pack("<H", 77)
        d[len(d) - 24:len(d) - 16] = b"\xff" * 8
    rc, err, _ = damaged(args, tmp, name, trace, whole, "unknown", retype, problems)
    if rc == 0 or "byte %d has type 77" % odd[0] not in err:
        problems.append("%s unknown: exit %d, %r: want a non-zero exit naming the frame at "
                        "byte %d and its type 77" % (name, rc, err, odd[0]))
    for how, edit, why in (("garbage", lambda d: d.__setitem__(slice(0, None), os.urandom(100000)),
                            "its first bytes are no frame header"),
                           ("empty", lambda d: d.clear(), "it is empty")):
        rc, err, _ = damaged(args, tmp, name, trace, whole, how, edit, problems)
        if rc == 0 or "not a sluice trace file (%s)" % why not in err:
            problems.append("%s %s: exit %d, %r: want 'not a sluice trace file (%s)'"
                            % (name, how, rc, err, why))


MAP_LINES = ("MAPPED", "MMAP", "MUNMAP", "MPROTECT", "MREMAP")


def in_window(lines, frm, to):
    """The event lines of one thread's raw dump that an instruction window [frm, to) keeps
    (consumer.h, skip_insns): exec events frm..to-1, and the events after each of them before
    the next (with frm 0, also those before the first). Mapping lines are left out: a window
    gives the map from the chunk it starts in."""
    out, n = [], 0
    for line in lines:
        kind = line.split(" ", 2)[1]
        if kind in MAP_LINES:
            continue
        if kind == "EXEC":
            if frm <= n < to:
                out.append(line)
            n += 1
        elif (n > frm or frm == 0) and n <= to:
            out.append(line)
    return out


def check_select(args, tmp, name, trace, whole, problems):
    """report --tid and --skip/--count against the slices of the whole dump: windows on and
    across the chunk boundaries the INDEX gives, one past a thread's end, and --tid alone."""
    fr = frames(trace)
    tid_of = {f[2]: str(f[3][0] >> 32) for f in fr if f[1] == RING}
    before = index_insns(trace)
    main = min(whole, key=lambda t: int(t))
    bounds = sorted(before[f[0]] for f in fr if f[1] == CHUNK and tid_of[f[2]] == main)
    total = sum(1 for line in whole[main] if " EXEC " in line)
    if len(bounds) < 3:
        common.fail("%s: thread %s has %d chunks: too few to seek across" % (name, main,
                                                                            len(bounds)))
    b, c = bounds[1], bounds[2]
    windows = [(0, 1), (b, c - b), (b - 1, 3), (b + 1, c - b), (c - 7, None), (0, None),
               (total - 5, None), (total + 10, 4)]
    # Without its trailer (a recording cut short has none), the file has no INDEX to seek
    # with: report counts each chunk's instructions first, and the windows are the same.
    noindex = os.path.join(tmp, "%s-noindex.sltr" % name)
    with open(trace, "rb") as f, open(noindex, "wb") as g:
        g.write(f.read()[:-FRAME.size])
    for frm, count, path in [w + (trace,) for w in windows] + [(b + 1, c - b, noindex),
                                                                (total - 5, None, noindex)]:
        cmd = ["--skip", str(frm)] + (["--count", str(count)] if count else [])
        out = common.fresh(os.path.join(tmp, "%s-window.rep" % name))
        sluice(args, ["report", path, "--tool", "dump", "--raw", "--maps", "-o", out] + cmd,
               what="%s window %r" % (name, cmd))
        what = cmd + (["(no index)"] if path == noindex else [])
        got = per_thread(out)
        to = frm + count if count else float("inf")
        for tid, lines in whole.items():
            want = in_window(lines, frm, to)
            have = [l for l in got.get(tid, []) if l.split(" ", 2)[1] not in MAP_LINES]
            if have != want:
                problems.append("%s window %r: thread %s gives %d event lines, the whole dump's "
                                "slice %d" % (name, what, tid, len(have), len(want)))
        # Passed over chunks of the main thread: its map comes first, as a snapshot.
        if frm > bounds[1] and main in got and got[main] and \
                got[main][0].split(" ", 2)[1] != "MAPPED":
            problems.append("%s window %r: thread %s does not start with the map" % (name, what,
                                                                                    main))
        stats = common.fresh(os.path.join(tmp, "%s-window.json" % name))
        sluice(args, ["report", path, "--json", "-o", stats] + cmd, what=name)
        with open(stats) as f:
            j = json.loads(f.readline())
        for t in j["threads"]:
            want = in_window(whole.get(str(t["tid"]), []), frm, to)
            kinds = [line.split(" ", 2)[1][:4] for line in want]
            if (t["insns"], t["loads"], t["stores"]) != (kinds.count("EXEC"), kinds.count("READ"),
                                                         kinds.count("WRIT")):
                problems.append("%s window %r stats: thread %d counts %r, the slice %r" % (
                    name, what, t["tid"], (t["insns"], t["loads"], t["stores"]),
                    (kinds.count("EXEC"), kinds.count("READ"), kinds.count("WRIT"))))
    print("%s: %d windows of each thread (2 without the index) equal the whole dump's slices "
          "(chunk bounds %s...)" % (name, len(windows) + 2, bounds[:4]))
    # --tid: only those threads, each whole (but the map, which the first one delivered gets).
    for tids in ([main], sorted(whole)[-2:]):
        out = common.fresh(os.path.join(tmp, "%s-tid.rep" % name))
        sluice(args, ["report", trace, "--tool", "dump", "--raw", "--maps", "-o", out, "--tid",
                      ",".join(tids)], what=name)
        got = per_thread(out)
        if sorted(got) != sorted(set(tids)) or any(
                in_window(got[t], 0, float("inf")) != in_window(whole[t], 0, float("inf"))
                for t in got):
            problems.append("%s --tid %s: threads %s, not those threads whole" % (
                name, ",".join(tids), sorted(got)))
    # --tid of a thread that did not carry its process's map: the map it gets holds every
    # address its accesses touch (its stack, which another thread mapped, included).
    for tid in sorted(whole, key=int)[1:2]:
        out = common.fresh(os.path.join(tmp, "%s-tidmap.rep" % name))
        sluice(args, ["report", trace, "--tool", "dump", "--raw", "--maps", "-o", out, "--tid",
                      tid], what=name)
        maps, outside = [], 0
        for line in per_thread(out).get(tid, []):
            f = line.split()
            if f[1] in ("MAPPED", "MMAP"):
                maps.append((int(f[2], 16), int(f[2], 16) + int(f[3][4:], 16)))
            elif f[1].startswith(("READ", "WRITE")):
                addr = int(f[3][5:], 16)
                outside += not any(a <= addr < e for a, e in maps)
        if outside:
            problems.append("%s --tid %s: %d accesses outside every mapping it was shown"
                            % (name, tid, outside))
    # A chunk header damaged before a window: the INDEX still places the rest, exit 0.
    chunks = [f for f in fr if f[1] == CHUNK and tid_of[f[2]] == main]
    bad = os.path.join(tmp, "%s-badhdr.sltr" % name)
    with open(trace, "rb") as f:
        data = bytearray(f.read())
    data[chunks[1][0] + 20] ^= 0x40
    with open(bad, "wb") as f:
        f.write(data)
    out = common.fresh(os.path.join(tmp, "%s-badhdr.rep" % name))
    frm = before[chunks[2][0]] + 1
    rc, _, err = sluice(args, ["report", bad, "--tool", "dump", "--raw", "--maps", "-o", out,
                               "--tid", main, "--skip", str(frm), "--count", "50"], want_rc=None,
                        what=name)
    if rc != 0 or in_window(per_thread(out).get(main, []), 0, float("inf")) != \
            in_window(whole[main], frm, frm + 50):
        problems.append("%s: a window after a damaged chunk header: exit %d, %r" % (
            name, rc, err[-200:]))
    rc, _, err = sluice(args, ["report", trace, "--tid", "1"], want_rc=2, what=name)
    if "has no thread 1 " not in err:
        problems.append("%s --tid 1: %r: want 'has no thread 1'" % (name, err.strip()))
    # A report delivers in file order: the same bytes whatever the workers' timing.
    outs = []
    for workers in ("1", "4", "4"):
        out = common.fresh(os.path.join(tmp, "%s-w%s.rep" % (name, workers)))
        sluice(args, ["report", trace, "--tool", "dump", "--raw", "--maps", "--workers", workers,
                      "-o", out], what=name)
        with open(out, "rb") as f:
            outs.append(f.read())
    if len(set(outs)) != 1:
        problems.append("%s: reports with 1 and 4 workers differ (threads interleave as the "
                        "workers finish)" % name)


def check_files(args, tmp, data, problems):
    """A recorded program replaced by another before report: its code is not named from the
    new file (stderr says so once, the lines show path@offset); the same file touched, or put
    back, is named as live."""
    prog = os.path.join(tmp, "prog")
    trace = common.fresh(os.path.join(tmp, "files.sltr"))
    shutil.copy("/usr/bin/sha256sum", prog)
    small = os.path.join(tmp, "small")
    with open(data, "rb") as f, open(small, "wb") as g:
        g.write(f.read(64))
    sluice(args, ["run", "--record", trace, "-o", os.devnull, "--", prog, small], what="files")

    def report(how):
        out = common.fresh(os.path.join(tmp, "files-%s.dump" % how))
        _, _, err = sluice(args, ["report", trace, "--tool", "dump", "--no-disasm", "-o", out],
                           what="files %s" % how)
        with open(out, errors="replace") as f:
            text = f.read()
        said = [l for l in err.splitlines() if "not the file the trace ran" in l]
        print("files %s: %s, %d lines named prog!, %d prog@" % (
            how, said[0] if said else "nothing said", text.count(" prog!"), text.count(" prog@")))
        return said, text.count(" prog!"), text.count(" prog@")
    os.utime(prog, (1, 1))
    said, named, raw = report("touched")
    if said or named == 0 or raw:
        problems.append("files: the same file touched after recording is said changed or not "
                        "named")
    shutil.copy("/usr/bin/md5sum", prog)
    said, named, raw = report("replaced")
    if len(said) != 1 or prog not in said[0] or "build-id" not in said[0] or named or not raw:
        problems.append("files: a replaced program: %r, %d lines named from it: want one line "
                        "naming %s and its build-id, code as path@offset" % (said, named, prog))
    cov = common.fresh(os.path.join(tmp, "files.drcov"))
    _, _, err = sluice(args, ["report", trace, "--tool", "cov", "-o", cov], what="files cov")
    if "%s is not the file the trace ran" % prog not in err:
        problems.append("files: cov of a replaced program says nothing: %r" % err[-300:])


def check_renamed(args, tmp, problems):
    """A recording that begins (an attach) after the library the guest mapped was renamed over
    by another file of its size and modification time, and another build-id (the `replaced`
    guest, `renamed`): the file at the path is not the one the guest mapped (its inode says
    so), so the recording must not keep it as that path's file: report then names its code
    as path@offset, saying why (it named it from the other file, in silence)."""
    first = common.need_file(os.path.join(args.guests, "replaced-first.so"), "replaced-first.so")
    with open(first, "rb") as f:
        data = bytearray(f.read())
    note = subprocess.run(["readelf", "-n", first], capture_output=True, text=True).stdout
    build_id = bytes.fromhex(re.search(r"Build ID: ([0-9a-f]+)", note).group(1))
    at = data.find(build_id)
    data[at] ^= 0xff  # the same size, another build-id
    other = os.path.join(tmp, "renamed-other.so")
    with open(other, "wb") as f:
        f.write(data)
    lib = os.path.join(tmp, "libx-renamed.so")
    trace = common.fresh(os.path.join(tmp, "renamed.sltr"))
    run = subprocess.Popen([args.sluice, "run", "--tool", "stats", "-o", os.devnull, "--",
                            os.path.join(args.guests, "replaced-x86_64"), first, other, lib,
                            "renamed"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    m = re.match(rb"renamed (\d+)", run.stdout.readline())
    rec = None
    if m:
        pid = m.group(1).decode()
        rec = subprocess.Popen([args.sluice, "attach", pid, "--record", trace, "--tool", "stats",
                                "-o", os.devnull], stderr=subprocess.PIPE)
        end = time.monotonic() + 30
        while time.monotonic() < end and rec.poll() is None:
            ls = json.loads(subprocess.run([args.sluice, "ls", "--json"], capture_output=True,
                                           text=True).stdout or "[]")
            if any(str(p.get("pid")) == pid and p.get("consumers", 0) >= 2 for p in ls):
                break
            time.sleep(0.05)
    open(lib + ".go", "w").close()
    out, err = run.communicate(timeout=120)
    rec_err = rec.communicate(timeout=60)[1] if rec else b""
    if not m or run.returncode != 0 or rec.returncode != 0:
        problems.append("renamed: the guest said %r, exit %s (%r); the recording exit %s (%r)"
                        % (m and m.group(0), run.returncode, err[-300:],
                           rec and rec.returncode, rec_err[-300:]))
        return
    rep = common.fresh(os.path.join(tmp, "renamed.dump"))
    rc, _, err = sluice(args, ["report", trace, "--tool", "dump", "--no-disasm", "-o", rep],
                        want_rc=None, what="renamed")
    with open(rep, errors="replace") as f:
        text = f.read()
    said = [l for l in err.splitlines() if lib in l and "not the file the trace ran" in l]
    named, raw = text.count("libx-renamed.so!"), text.count("libx-renamed.so@")
    print("renamed: report exit %d, %d lines named, %d path@offset; said: %s"
          % (rc, named, raw, said))
    if len(said) != 1 or named or not raw:
        problems.append("renamed: report exit %d, %d lines of the library named, %d as "
                        "path@offset, said %r: want path@offset and one line saying it is not "
                        "the file the trace ran" % (rc, named, raw, said))


def check_clobber(args, tmp, data, problems):
    """-o or --record naming the program to trace, or the file sluice's stdout goes to (the
    guest's too): refused in one line before either is emptied (the program was emptied, or
    the guest's output and the trace overwrote each other, exit 0). Two recordings into one
    file: the second refused (both wrote it, exit 0, and the file was damaged)."""
    prog = os.path.join(tmp, "prog")
    shutil.copy("/usr/bin/sha256sum", prog)
    size = os.path.getsize(prog)
    for opt in ("-o", "--record"):
        rc, _, err = sluice(args, ["run", opt, prog, "--", prog, data], want_rc=None)
        print("%s naming the program: exit %d, %s" % (opt, rc, err.strip()))
        if rc != 2 or len(err.strip().splitlines()) != 1 or os.path.getsize(prog) != size:
            problems.append("%s naming the program: exit %d, %r, program %d of %d bytes: want "
                            "exit 2, one line, the program kept" % (opt, rc, err, os.path.getsize(prog),
                                                                   size))
    for opt in ("-o", "--record"):
        shared = os.path.join(tmp, "stdout.txt")
        env = common.guest_env(sluice=True)
        with open(shared, "w") as f:
            f.write("precious\n")
        with open(shared, "a") as out:
            p = subprocess.run([args.sluice, "run", opt, shared, "--", prog, data], stdout=out,
                               stderr=subprocess.PIPE, env=env, timeout=120)
        err = p.stderr.decode(errors="replace")
        print("%s naming where stdout goes: exit %d, %s" % (opt, p.returncode, err.strip()))
        if p.returncode != 2 or open(shared).read() != "precious\n":
            problems.append("%s naming where stdout goes: exit %d, %r, file %r: want exit 2 and "
                            "the file kept" % (opt, p.returncode, err, open(shared).read()[:80]))
    shared = os.path.join(tmp, "twice.sltr")
    first = subprocess.Popen([args.sluice, "run", "--record", shared, "--", "/bin/sleep", "2"],
                             stderr=subprocess.PIPE, env=common.guest_env(sluice=True))
    for _ in range(200):
        if os.path.exists(shared) and os.path.getsize(shared) > 0:
            break
        time.sleep(0.02)
    rc, _, err = sluice(args, ["run", "--record", shared, "--", prog, data], want_rc=None)
    # -o naming the file being recorded, and -o beside a --record that is refused: nothing
    # emptied (-o overwrote the recording, exit 0; -o was emptied before the refusal).
    kept = os.path.join(tmp, "kept-too.txt")
    with open(kept, "w") as f:
        f.write("precious\n")
    for what, cmd in (("-o naming it", ["-o", shared]),
                      ("-o beside it", ["--record", shared, "-o", kept])):
        rc3, _, err3 = sluice(args, ["run"] + cmd + ["--", prog, data], want_rc=None)
        print("%s while it is recorded: exit %d, %s" % (what, rc3, err3.strip()))
        if rc3 != 2 or "another sluice is recording into it" not in err3:
            problems.append("%s while it is recorded: exit %d, %r: want exit 2" % (what, rc3,
                                                                                  err3))
    if open(kept).read() != "precious\n":
        problems.append("-o beside a --record refused for its lock: -o was emptied")
    # report while it is recorded: the file has no end yet, and report says why.
    rc4, _, err4 = sluice(args, ["report", shared], want_rc=None)
    print("report while it is recorded: exit %d, %s" % (rc4, err4.strip()[-200:]))
    if rc4 == 0 or "still being recorded by another sluice" not in err4:
        problems.append("report while it is recorded: exit %d, %r: want a failure saying it is "
                        "still being recorded" % (rc4, err4[-300:]))
    rc1 = first.wait(timeout=120)
    rc2, _, err2 = sluice(args, ["report", shared], want_rc=None)
    print("a second recording into one file: exit %d, %s; the first: exit %d; report: exit %d"
          % (rc, err.strip(), rc1, rc2))
    if rc != 2 or "another sluice is recording into it" not in err or rc1 != 0 or rc2 != 0:
        problems.append("a second recording into one file: exit %d, %r; the first exit %d; "
                        "report of it exit %d, %r: want 2, 0, 0" % (rc, err, rc1, rc2, err2[-300:]))


def check_reused_tid(args, tmp, name, trace, problems):
    """A trace whose second thread has the first's tid (as when the kernel gives a dead
    thread's id to a later one: its RING frame's tid changed, its crc made right): a dump
    prefixes both threads' lines with that tid, interleaved, so it must say the tid has two
    streams (it said nothing: the lines read as one thread's)."""
    with open(trace, "rb") as f:
        data = bytearray(f.read())
    rings = [f for f in frames(trace) if f[1] == RING]
    if len(rings) < 2:
        common.fail("%s: fewer than two threads to give one tid" % name)
    tid = rings[0][3][0] >> 32
    at, stored = rings[1][0], rings[1][4]
    head = list(FRAME.unpack_from(data, at))
    head[7] = (head[7] & 0xffffffff) | tid << 32  # arg[0]: pid | tid << 32
    head[4] = 0  # crc, as computed
    FRAME.pack_into(data, at, *head)
    head[4] = zlib.crc32(bytes(data[at:at + FRAME.size + stored]))
    FRAME.pack_into(data, at, *head)
    copy = os.path.join(tmp, name + "-reused.sltr")
    with open(copy, "wb") as f:
        f.write(data)
    rc, _, err = sluice(args, ["report", copy, "--tool", "dump", "--raw", "-o", os.devnull],
                        want_rc=None)
    said = [l for l in err.splitlines() if "tid %d has 2 streams" % tid in l]
    print("%s, two threads given tid %d: exit %d, %s" % (name, tid, rc, said))
    if len(said) != 1:
        problems.append("%s: two threads of tid %d dumped: %r: want one line saying the tid "
                        "has two streams" % (name, tid, err[-300:]))


def check_odd_name(args, tmp, data, problems):
    """A recorded program whose name holds a newline, a tab and a terminal escape, replaced
    before report: the note that it is not the file the trace ran is one line, the name's
    control characters as '?' (the newline broke it in two, the escape reached the terminal:
    hostile round 6)."""
    prog = os.path.join(tmp, "p\nr\x1b[31mo\tg")
    trace = common.fresh(os.path.join(tmp, "odd.sltr"))
    shutil.copy("/usr/bin/sha256sum", prog)
    sluice(args, ["run", "--record", trace, "-o", os.devnull, "--", prog, data], what="odd name")
    shutil.copy("/usr/bin/md5sum", prog)
    _, _, err = sluice(args, ["report", trace, "--tool", "dump", "--no-disasm", "-o", os.devnull],
                       what="odd name report")
    said = [l for l in err.splitlines() if "not the file the trace ran" in l]
    print("odd name: %r" % said)
    if len(said) != 1 or "p?r?[31mo?g" not in said[0] or "\x1b" in err:
        problems.append("odd name: %r: want one line naming p?r?[31mo?g" % err[-300:])
    # The same trace cut, at an odd path: stats' footer repeats the error naming it, in one
    # line too (it printed the path raw: hostile round 8).
    cut = os.path.join(tmp, "c\nu\x1b[7mt.sltr")
    with open(trace, "rb") as f, open(cut, "wb") as g:
        g.write(f.read(4000))  # a frame cut short: an error that names the file
    _, _, err = sluice(args, ["report", cut], what="odd cut report", want_rc=None)
    foot = [l for l in err.splitlines() if l.startswith("not the whole trace: ")]
    print("odd cut: %r" % foot)
    if len(foot) != 1 or "c?u?[7mt.sltr" not in foot[0] or "\x1b" in err:
        problems.append("odd cut: %r: want a footer naming c?u?[7mt.sltr" % err[-300:])


def check_long_path(args, tmp, data, problems):
    """A program at a path of 400 bytes, its name 150: MAPPED lines name it whole, and EXEC
    lines by its whole name, live and from the recording (they gave its last 120 and 80
    bytes, unmarked: a relative path that is not there)."""
    where = os.path.join(tmp, *(["d" * 90] * 3))
    os.makedirs(where, exist_ok=True)
    prog = os.path.join(where, "p" * 150)
    shutil.copy("/usr/bin/sha256sum", prog)
    trace = common.fresh(os.path.join(tmp, "long.sltr"))
    live = common.fresh(os.path.join(tmp, "long.live"))
    rep = common.fresh(os.path.join(tmp, "long.rep"))
    sluice(args, ["run", "--tool", "dump", "--raw", "--maps", "-o", live, "--record", trace,
                  "--", prog, data], what="long path")
    sluice(args, ["report", trace, "--tool", "dump", "--raw", "--maps", "-o", rep],
           what="long path report")
    for how, path in (("live", live), ("report", rep)):
        with open(path, errors="replace") as f:
            lines = f.read().splitlines()
        mapped = [l.split()[-1] for l in lines if " MAPPED " in l and " prot=r-x " in l]
        execs = {l.split()[-1].split("@")[0] for l in lines if " EXEC " in l}
        print("long path, %s: MAPPED r-x paths of %s bytes; EXEC files %s" % (
            how, sorted(len(m) for m in mapped), sorted(len(e) for e in execs)))
        if prog not in mapped or "p" * 150 not in execs:
            problems.append("long path, %s: the program's MAPPED line %s, EXEC lines %s: want "
                            "its path whole (%d bytes) and its name whole" % (
                                how, [m[:40] + "..." for m in mapped],
                                sorted(e[:20] for e in execs), len(prog)))


def check_window_no_insns(args, tmp, data, problems):
    """A window (--skip/--count counts instructions) of a trace with none (a filter of stores
    alone): said on stderr, at --skip 5 and at --skip 0 (an empty report came, exit 0,
    nothing said why). Of a trace with instructions, the same window is named and not said
    to hold none."""
    filt = os.path.join(os.path.dirname(args.sluice), "..", "filters", "mem_writes.bpf.o")
    stores = common.fresh(os.path.join(tmp, "stores.sltr"))
    sluice(args, ["run", "--filter", filt, "--record", stores, "-o", os.devnull, "--",
                  "/usr/bin/sha256sum", data], what="stores only")
    whole = common.fresh(os.path.join(tmp, "whole.sltr"))
    sluice(args, ["run", "--record", whole, "-o", os.devnull, "--", "/usr/bin/sha256sum", data],
           what="whole trace")
    for trace, what, want_none in ((stores, "stores alone", True), (whole, "the whole run", False)):
        for skip in ("5", "0"):
            rc, _, err = sluice(args, ["report", trace, "--skip", skip, "--count", "10", "-o",
                                       os.devnull], want_rc=None)
            said = "no instruction in the window" in err
            named = "a window: instructions %s to %d of each thread" % (skip, int(skip) + 9) in err
            print("window %s+10 of a trace of %s: exit %d, said none: %s, named: %s"
                  % (skip, what, rc, said, named))
            if rc != 0 or said != want_none or not named:
                problems.append("window %s+10 of a trace of %s: exit %d, %r: want exit 0, the "
                                "window named, and %s" % (skip, what, rc, err, "a line saying it "
                                "holds no instruction" if want_none else "no line saying it "
                                "holds none"))


def check_refused_output(args, tmp, trace, problems):
    """attach and report refused (no such process, no such file, not a trace, no such thread):
    -o FILE kept as it was, and not made when it was not there (each was emptied, or made
    empty, before the refusal: hostile round 5). And a report that runs replaces it whole."""
    kept, made = os.path.join(tmp, "kept-out.txt"), os.path.join(tmp, "made-out.txt")
    for what, cmd in (("attach of no process", ["attach", "999999999"]),
                      ("report of no file", ["report", os.path.join(tmp, "none.sltr")]),
                      ("report of no trace", ["report", "/usr/bin/sha256sum"]),
                      ("report of no such thread", ["report", trace, "--tid", "1"])):
        for out in (kept, made):
            with open(kept, "w") as f:
                f.write("precious\n")
            if os.path.exists(made):
                os.unlink(made)
            rc, _, err = sluice(args, cmd + ["--tool", "dump", "-o", out], want_rc=None)
            left = open(kept).read() if out == kept else os.path.exists(made)
            print("%s, -o %s: exit %d, %s" % (what, "an existing file" if out == kept
                                               else "a new file", rc, err.strip()[-120:]))
            if rc != 2 or left != ("precious\n" if out == kept else False):
                problems.append("%s: exit %d, -o %s: %r: want exit 2 and the file %s" % (
                    what, rc, out, left, "kept" if out == kept else "not made"))
    # A run ended (SIGTERM) while it waits for an attach, before the guest starts: nothing
    # was traced, so -o and --record are as they were (the trace file was replaced by an
    # empty recording: hostile round 6).
    rec = os.path.join(tmp, "kept.sltr")
    for path in (kept, rec):
        with open(path, "w") as f:
            f.write("precious\n")
    env = common.guest_env(sluice=True)
    env["XDG_RUNTIME_DIR"] = tmp
    p = subprocess.Popen([args.sluice, "run", "--wait-attach", "1", "-o", kept, "--record", rec,
                          "--", "/bin/true"], stderr=subprocess.PIPE, env=env)
    time.sleep(1.5)
    p.terminate()
    _, err = p.communicate(timeout=60)
    left = [open(path).read() == "precious\n" for path in (kept, rec)]
    print("run ended before its guest started: exit %d, -o and --record kept: %s"
          % (p.returncode, left))
    if p.returncode == 0 or left != [True, True]:
        problems.append("run ended before its guest started: exit %d, -o kept %s, --record kept "
                        "%s: want both as they were" % (p.returncode, left[0], left[1]))
    # --record: a trace file it made is not left behind, empty (it was).
    made_rec = os.path.join(tmp, "made.sltr")
    rc, _, err = sluice(args, ["attach", "999999999", "--record", made_rec], want_rc=None)
    if rc != 2 or os.path.exists(made_rec):
        problems.append("attach of no process --record a new file: exit %d, file %s: want exit "
                        "2 and no file" % (rc, "left" if os.path.exists(made_rec) else "not made"))
    with open(kept, "w") as f:
        f.write("precious\n" * 10000)
    rc, _, err = sluice(args, ["report", trace, "--tool", "stats", "-o", kept], want_rc=None)
    text = open(kept).read()
    if rc != 0 or "precious" in text or "total" not in text:
        problems.append("report -o an existing file: exit %d, %d bytes, %s: want the report "
                        "alone" % (rc, len(text), "old text left" if "precious" in text
                                   else "no report"))


def check_writing(args, tmp, data, problems):
    """Where a recording cannot be written: refused before the guest starts, or stopped
    without harm to the live tool, and what was written still reads."""
    prog = ["--", "/usr/bin/sha256sum", data]
    same = os.path.join(tmp, "same.out")
    kept = os.path.join(tmp, "kept.out")
    with open(kept, "w") as f:
        f.write("precious\n")
    for what, cmd in (("a character device", ["--record", "/dev/full"]),
                      ("the -o file", ["-o", same, "--record", same]),
                      ("an existing -o file", ["-o", kept, "--record", kept]),
                      ("an option", ["--record", "--tool"])):
        rc, _, err = sluice(args, ["run"] + cmd + prog, want_rc=None)
        lines = err.strip().splitlines()
        print("record to %s: exit %d, %s" % (what, rc, lines[-1] if lines else ""))
        if rc != 2 or len(lines) != 1 or "sha256" in err:
            problems.append("record to %s: exit %d, %r: want exit 2 and one line, the guest "
                            "not started" % (what, rc, err))
    with open(kept) as f:
        if f.read() != "precious\n":
            problems.append("record to an existing -o file: refused, but the file was emptied")
    check_clobber(args, tmp, data, problems)
    # report -o naming the trace it reads: refused, the trace kept.
    probe = os.path.join(tmp, "probe.sltr")
    sluice(args, ["run", "--tool", "record", "-o", probe] + prog, what="record")
    size = os.path.getsize(probe)
    rc, _, err = sluice(args, ["report", probe, "-o", probe], want_rc=None)
    print("report -o the trace: exit %d, %s" % (rc, err.strip()))
    if rc != 2 or os.path.getsize(probe) != size:
        problems.append("report -o naming its trace: exit %d, %d of %d bytes left: want exit 2 "
                        "and the trace kept" % (rc, os.path.getsize(probe), size))
    check_refused_output(args, tmp, probe, problems)
    # ulimit -f: the file stops at the limit (SIGXFSZ ignored), the live report is whole.
    trace, live = os.path.join(tmp, "limited.sltr"), os.path.join(tmp, "limited.json")

    def limit():
        import resource
        resource.setrlimit(resource.RLIMIT_FSIZE, (600 << 10, 600 << 10))
    rc, out, err = common.run([args.sluice, "run", "--json", "-o", live, "--record", trace] +
                              prog, preexec_fn=limit, extra_env={"SLUICE_RING_BYTES": "256K"})
    err = err.decode(errors="replace")
    print("record under ulimit -f: exit %d, %s" % (rc, err.strip().splitlines()[-1:]))
    if rc != 1 or b"  " + data.encode() not in out or "recording %s stopped" % trace not in err:
        problems.append("record under ulimit -f: exit %d, %r: want the guest's output, exit 1 "
                        "and 'recording ... stopped'" % (rc, err[-300:]))
    try:
        with open(live) as f:
            insns = json.loads(f.readline())["total"]["insns"]
    except (OSError, ValueError, KeyError):
        insns = 0
        problems.append("record under ulimit -f: no live stats report")
    # The table's footer says the counts are whole (it said "not the whole trace": round 9).
    table = live + ".txt"
    common.run([args.sluice, "run", "-o", table, "--record", trace + ".t"] + prog,
               preexec_fn=limit, extra_env={"SLUICE_RING_BYTES": "256K"})
    with open(table, errors="replace") as f:
        foot = f.read().strip().splitlines()[-1:]
    print("stats under ulimit -f: %s" % foot)
    if not foot or not foot[0].startswith("the counts are whole; recording %s.t stopped" % trace):
        problems.append("stats under ulimit -f: footer %r: want 'the counts are whole; "
                        "recording ... stopped'" % foot)
    # --tool record's own line after the stop: not "recorded N instructions" (the live count).
    rc, _, err = common.run([args.sluice, "run", "--tool", "record", "-o", trace + ".2"] + prog,
                            preexec_fn=limit, extra_env={"SLUICE_RING_BYTES": "256K"})
    last = err.decode(errors="replace").strip().splitlines()[-1:]
    print("--tool record under ulimit -f: exit %d, %s" % (rc, last))
    if rc != 1 or not last or "holds the part recorded before it stopped" not in last[0]:
        problems.append("--tool record under ulimit -f: exit %d, last line %r: want exit 1 and "
                        "'holds the part recorded before it stopped'" % (rc, last))
    rc, _, err = sluice(args, ["report", trace, "--json", "-o", live + ".rep"], want_rc=None)
    try:
        with open(live + ".rep") as f:
            got = json.loads(f.readline())["total"]["insns"]
    except (OSError, ValueError, KeyError):
        got = None
    print("report of the stopped recording: exit %d, %d of %d instructions, %s" % (
        rc, got or 0, insns, err.strip().splitlines()[-1:]))
    if rc != 1 or not got or got >= insns or "no END frame" not in err:
        problems.append("report of a recording stopped at ulimit -f: exit %d, %r instructions "
                        "of %d, %r: want exit 1, some but not all, 'no END frame'"
                        % (rc, got, insns, err[-300:]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sluice", required=True)
    ap.add_argument("--guests", required=True)
    args = ap.parse_args()
    common.qemu_dir()
    problems = []
    cache = os.path.join(os.environ.get("SLUICE_CACHE", os.path.expanduser("~/.cache/sluice")),
                         "busybox")
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "input")
        with open(data, "wb") as f:
            f.write(bytes(range(256)) * 256)
        bb = common.need_file(os.path.join(cache, "arm64", "bin", "busybox"),
                              "busybox for arm64 (run tests/e2e/fetch-busybox.sh)")
        progs = [("sha256sum-x86_64", "/usr/bin/sha256sum", [data]),
                 ("busybox-arm64", bb, ["sha256sum", data]),
                 ("threads-x86_64", os.path.join(args.guests, "threads-x86_64"), []),
                 ("forkexec-aarch64", os.path.join(args.guests, "forkexec-aarch64"), [])]
        for name, prog, pargs in progs:
            trace, whole = check_dump(args, tmp, name, prog, pargs, problems)
            check_stats(args, tmp, name, prog, pargs, problems)
            check_cov(args, tmp, name, prog, pargs, problems)
            if name.startswith(("sha256sum", "threads")):
                check_damage(args, tmp, name, trace, whole, problems)
                check_select(args, tmp, name, trace, whole, problems)
            if name.startswith("threads"):
                check_reused_tid(args, tmp, name, trace, problems)
            if name.startswith(("threads", "busybox")):
                check_uncompressed(args, tmp, name, prog, pargs, problems)
        check_writing(args, tmp, data, problems)
        check_files(args, tmp, data, problems)
        check_long_path(args, tmp, data, problems)
        check_odd_name(args, tmp, data, problems)
        check_window_no_insns(args, tmp, data, problems)
        check_renamed(args, tmp, problems)
    for p in problems[:20]:
        print("FAIL " + p)
    if problems:
        common.fail("%d differences" % len(problems))
    print("ok: reports of recorded traces equal the live sessions; damage is named")


if __name__ == "__main__":
    main()
