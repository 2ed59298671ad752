#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""consumer-death: a lossless consumer holds the guest back; its death frees it.

This test is the consumer itself, speaking the control protocol
(include/sluice/ctl.h) over a socketpair handed to the patched QEMU in
the jitter's consumer_fd option. It sends HELLO (lossless), reads WELCOME, then never
reads the ring (256 KiB, SLUICE_RING_BYTES), so:
  1. the guest (gzip -9 of a few MB) must stop, waiting for the consumer,
     and not finish (nor spin a core: its CPU time must stay flat);
  2. once the consumer's socket closes (it died), the guest must run to
     the end: exit status 0 and output byte-identical to an untraced run.

  consumer_death.py --jitter build/jitter/libsluice-jitter.so
"""

import argparse
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time

import common

# struct sluice_ctl_msg: type, version, pid, tid, slot, lossless, ring_bytes, offset, arch,
# error, comm, threads, consumers, lossless_consumers, waiting, lost, tail_bytes, line, pad
CTL = struct.Struct("=IIIIIIQQ16s96s16sIIIIQQII")  # include/sluice/ctl.h, version 4
HELLO, WELCOME = 1, 2


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jitter", required=True)
    args = ap.parse_args()
    common.need_file(args.jitter, "jitter")
    qemu = common.qemu_bin("x86_64")
    with tempfile.TemporaryDirectory(prefix="sluice-death-") as tmp:
        data = os.path.join(tmp, "in.txt")
        with open(data, "w") as f:
            for i in range(200000):
                f.write("line %d of some text %x\n" % (i, i * 2654435761 % 2**32))
        rc0, want, _ = common.run([qemu, "/bin/gzip", "-9", "-c", data])
        if rc0 != 0:
            common.fail("untraced gzip failed: exit %d" % rc0)

        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        ours.send(CTL.pack(HELLO, 4, 0, 0, 0, 1, 0, 0, b"", b"", b"", 0, 0, 0, 0, 0, 0, 0, 0))
        env = common.guest_env()
        jitter = "%s,consumer_fd=%d,ring_bytes=262144" % (args.jitter, theirs.fileno())
        out = open(os.path.join(tmp, "out.gz"), "wb")
        p = subprocess.Popen([qemu, "-jitter", jitter, "/bin/gzip", "-9", "-c", data],
                             stdout=out, env=env, pass_fds=[theirs.fileno()])
        theirs.close()
        reply = CTL.unpack(ours.recv(CTL.size))
        if reply[0] != WELCOME:
            common.fail("jitter answered message type %d, not WELCOME" % reply[0])

        time.sleep(2)
        if p.poll() is not None:
            common.fail("guest finished (exit %d) although the lossless consumer read nothing"
                        % p.returncode)
        t0 = cpu_seconds(p.pid)
        time.sleep(1)
        spent = cpu_seconds(p.pid) - t0
        if spent > 0.2:
            common.fail("guest burnt %.2f s of CPU in 1 s while waiting for the consumer" % spent)
        print("guest waits for the consumer (%.2f s CPU in 1 s)" % spent)

        ours.close()
        try:
            rc = p.wait(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
            common.fail("guest still blocked 120 s after its consumer died")
        out.close()
        with open(os.path.join(tmp, "out.gz"), "rb") as f:
            got = f.read()
        if rc != 0 or got != want:
            common.fail("after the consumer died: exit %d, output %s" % (
                rc, "identical" if got == want else "differs (%d vs %d bytes)" % (len(got), len(want))))
    print("consumer-death: ok: the guest ran to the end, output identical")


if __name__ == "__main__":
    main()
