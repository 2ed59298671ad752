/* SPDX-License-Identifier: GPL-2.0-or-later */
/**
 * @file ctl.h
 * @brief Control protocol between the jitter (inside QEMU) and consumers.
 *
 * Transport: a unix SOCK_SEQPACKET socket, so each message is one datagram
 * and several processes (a guest and its forked children) can send on the
 * same socket without interleaving bytes. All integers are host byte order
 * (both ends run on the same host).
 *
 * Sequence:
 *   consumer -> jitter  SLUICE_CTL_HELLO   (version, lossless)
 *   jitter -> consumer  SLUICE_CTL_WELCOME (slot assigned to the consumer,
 *                                          its tail file attached: SCM_RIGHTS)
 *   jitter -> consumer  SLUICE_CTL_RING    one per guest thread, the ring's
 *                                          memfd attached (SCM_RIGHTS), for
 *                                          threads alive now and started later,
 *                                          in every process forked from the guest
 *   end of stream: the socket reaches EOF when every guest process that held
 *   it has exited or exec'd (the jitter's end is close-on-exec); by then every
 *   ring's last record is published. A consumer detaches by closing its end
 *   (its slot is freed in every ring; the producer no longer waits for it).
 * Or, to ask without attaching:
 *   consumer -> jitter  SLUICE_CTL_QUERY
 *   jitter -> consumer  SLUICE_CTL_INFO    (pid, arch, comm, threads,
 *                                          consumers, lossless_consumers,
 *                                          waiting, lost), then it closes
 *
 * Two ways in:
 * - `sluice run` hands one end of a socketpair to QEMU, named in the jitter's
 *   options (`-jitter PATH,consumer_fd=N,...`, keys SLUICE_OPT_* below; never
 *   in the environment, which the guest can read), and sends HELLO before
 *   QEMU starts, so the consumer is attached before the first guest
 *   instruction.
 * - Any process of the same user connects to the socket every traced guest
 *   process listens on (sluice_ctl_socket_path()), at any time. A ring it is
 *   given mid-run starts where the producer had last published (a record
 *   boundary): its stream of each thread is a contiguous part of the whole.
 *   A peer of another uid (SO_PEERCRED) gets REFUSED; so does one that
 *   sends anything else, or nothing within a few seconds.
 *
 * Rings: all rings of one guest process live in one memfd, the process's
 * arena (so the jitter holds a constant number of descriptors whatever the
 * thread count). Each RING message carries a read-only descriptor of the
 * arena and the file offset of that ring's header; a consumer maps the ring
 * from there, read-only (layout in record.h). Its own words for the ring
 * (tail, futex words) are line `line` of the tail file that came with
 * WELCOME: a memfd for this consumer alone, shared with the jitter and
 * every process forked from the guest, which grows up to SLUICE_TAIL_BYTES
 * as rings are given (it holds line `line` before RING names it) and is
 * sealed against shrinking. A consumer must
 * check that the header it maps matches the message (pid, tid, sizes) and
 * refuse a ring it already has, or a line past the tail file.
 */
#ifndef SLUICE_CTL_H
#define SLUICE_CTL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/**
 * Version of this protocol; HELLO with another version is refused.
 * 2: RING carries an offset. 3: attach at run time (QUERY, INFO, and the
 * fields after `error`). 4: a tail file per consumer (WELCOME's descriptor,
 * `tail_bytes`, RING's `line`), the arena read-only.
 */
#define SLUICE_CTL_VERSION 4u

enum sluice_ctl_type {
    SLUICE_CTL_HELLO = 1,   /**< consumer -> jitter */
    SLUICE_CTL_WELCOME = 2, /**< jitter -> consumer, tail file attached */
    SLUICE_CTL_RING = 3,    /**< jitter -> consumer, arena memfd attached (read-only) */
    SLUICE_CTL_REFUSED = 4, /**< jitter -> consumer, `error` says why: not attached (after
                               HELLO), or dropped (after WELCOME; its slots close, its
                               socket ends) */
    SLUICE_CTL_QUERY = 5,   /**< consumer -> jitter: describe the process, do not attach */
    SLUICE_CTL_INFO = 6,    /**< jitter -> consumer, the answer to QUERY */
    SLUICE_CTL_ABORT = 7,   /**< jitter -> consumer: process `pid` ends now, ended by the
                               jitter, which could not trace its thread `tid` and does not
                               run a thread untraced; `error` says why. Its rings end as a
                               killed process's do. (Consumers of version 4 ignore it.) */
};

/** Every control message is exactly this struct (fixed size datagram). */
struct sluice_ctl_msg {
    uint32_t type;               /**< enum sluice_ctl_type */
    uint32_t version;            /**< SLUICE_CTL_VERSION */
    uint32_t pid;                /**< guest process (RING, WELCOME) */
    uint32_t tid;                /**< guest thread (RING) */
    uint32_t slot;               /**< consumer slot index in every ring header (WELCOME, RING) */
    uint32_t lossless;           /**< HELLO: 1 lossless, 0 lossy */
    uint64_t ring_bytes;         /**< RING: data area size in bytes (power of two) */
    uint64_t offset;             /**< RING: file offset of the ring's header in the arena memfd */
    char arch[16];               /**< QEMU target name (WELCOME, RING) */
    char error[96];              /**< REFUSED, ABORT: reason, NUL-terminated */
    char comm[16];               /**< INFO: guest program name, NUL-terminated */
    uint32_t threads;            /**< INFO: live guest threads (rings) of the process */
    uint32_t consumers;          /**< INFO: consumers attached */
    uint32_t lossless_consumers; /**< INFO: of which lossless */
    uint32_t waiting; /**< INFO: consumers the process still waits for before it starts */
    uint64_t lost;    /**< INFO: events the lossy consumers attached now lost in the live rings */
    uint64_t
        tail_bytes; /**< WELCOME: bytes the tail file attached may grow to (SLUICE_TAIL_BYTES) */
    uint32_t line;  /**< RING: the ring's line in the consumer's tail file */
    /** WELCOME: pcs of the process's Once filter (SLUICE_ONCE) recorded before this consumer
     *  came, for consumers attached then (at least; saturates at UINT32_MAX): their next hits are
     *  not recorded, so this consumer never sees them. 0 for the first consumer after none. */
    uint32_t once_before;
};

/**
 * Directory of this user's control sockets: `$XDG_RUNTIME_DIR/sluice` if
 * @p xdg and XDG_RUNTIME_DIR is an absolute path, else `/tmp/sluice-<uid>`
 * (uid: the real uid). The jitter creates it with mode 0700 and listens on
 * `<dir>/<pid>.sock`, choosing with @p xdg = 1 from QEMU's environment (the
 * /tmp place when that path would not fit a socket's); a consumer whose
 * environment may differ looks in both.
 * @param[out] buf  the path, NUL-terminated
 * @param      size bytes at @p buf
 * @param      xdg  1: XDG_RUNTIME_DIR's place when it is set; 0: the /tmp place
 * @return 0, or -1 if the path does not fit in @p size bytes.
 */
static inline int sluice_ctl_dir(char *buf, size_t size, int xdg)
{
    const char *run = xdg ? getenv("XDG_RUNTIME_DIR") : NULL;
    int n;

    if (run && run[0] == '/') {
        n = snprintf(buf, size, "%s/sluice", run);
    } else {
        n = snprintf(buf, size, "/tmp/sluice-%u", (unsigned)getuid());
    }
    return n < 0 || (size_t)n >= size ? -1 : 0;
}

/**
 * Path of process @p pid's control socket in directory @p dir (from
 * sluice_ctl_dir()): `<dir>/<pid>.sock`.
 * @param[out] buf  the path, NUL-terminated (a sockaddr_un's sun_path holds 108 bytes)
 * @return 0, or -1 if it does not fit in @p size bytes.
 */
static inline int sluice_ctl_socket_path(char *buf, size_t size, const char *dir, uint32_t pid)
{
    int n = snprintf(buf, size, "%s/%u.sock", dir, (unsigned)pid);

    return n < 0 || (size_t)n >= size ? -1 : 0;
}

/*
 * The jitter's options, after its path: `-jitter PATH,key=value,...`; a ','
 * inside a value is written ",,". Parsed by jitter/opts.c.
 */
/** Option: an inherited, connected consumer socket descriptor. */
#define SLUICE_OPT_CONSUMER_FD "consumer_fd"
/**
 * Option: hold the guest before its first instruction until this many
 * consumers have attached through the socket (`sluice run --wait-attach N`).
 */
#define SLUICE_OPT_WAIT_ATTACH "wait_attach"
/** Option: "0" to listen on no socket (only consumer_fd can attach); default 1. */
#define SLUICE_OPT_LISTEN "listen"
/** Option: ring data bytes per guest thread (see sluice_ring_bytes_parse()). */
#define SLUICE_OPT_RING_BYTES "ring_bytes"
/** Option: path of the filter object (ELF, BPF) to load; absent = trace everything. */
#define SLUICE_OPT_FILTER "filter"
/** Option: the filter's name in the jitter's messages (default: its path). */
#define SLUICE_OPT_FILTER_NAME "filter_name"
/** Option, repeatable: one of the filter's --set values, "NAME=VALUE". */
#define SLUICE_OPT_SET "set"
/**
 * Option: how executed instructions are recorded, "block" (default: one
 * BLOCK record per translation block, record.h) or "insn" (one EXEC record
 * per instruction, as format 3 did). Both give consumers the same events.
 */
#define SLUICE_OPT_ENCODING "encoding"

/**
 * Option: "1" records each guest syscall's entry and return (SYSCALL and
 * SYSRET records, record.h); "0", the default, none.
 */
#define SLUICE_OPT_SYSCALLS "syscalls"

/** Environment variable of the `sluice` command: SLUICE_OPT_ENCODING's value. */
#define SLUICE_ENCODING_ENV "SLUICE_ENCODING"

/** Environment variable of the `sluice` command: ring data bytes per guest thread. */
#define SLUICE_RING_BYTES_ENV "SLUICE_RING_BYTES"
/** Default ring data size: 16 MiB per guest thread. */
#define SLUICE_RING_BYTES_DEFAULT (16ull << 20)
/** Smallest ring: 256 KiB, four times the most a translation block may reserve. */
#define SLUICE_RING_BYTES_MIN (256ull << 10)
/** Largest ring: 1 GiB per guest thread (it is mapped twice). */
#define SLUICE_RING_BYTES_MAX (1ull << 30)

/**
 * Parse a ring size given in bytes (decimal, or hex with 0x), a decimal
 * number may end in K, M or G (KiB, MiB, GiB: "16M"). NULL or "" means
 * SLUICE_RING_BYTES_DEFAULT.
 * @param[in] text the value of SLUICE_RING_BYTES, or NULL
 * @param[out] bytes the size, a power of two within [SLUICE_RING_BYTES_MIN, SLUICE_RING_BYTES_MAX]
 * @return 0, or -1 if @p text is not such a number (@p bytes untouched).
 */
static inline int sluice_ring_bytes_parse(const char *text, uint64_t *bytes)
{
    uint64_t v = 0;
    int base = 10;

    if (!text || !*text) {
        *bytes = SLUICE_RING_BYTES_DEFAULT;
        return 0;
    }
    if (text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
        base = 16;
        text += 2;
    }
    for (; *text; text++) {
        unsigned d = (unsigned)(*text >= '0' && *text <= '9'   ? *text - '0'
                                : *text >= 'a' && *text <= 'f' ? *text - 'a' + 10
                                : *text >= 'A' && *text <= 'F' ? *text - 'A' + 10
                                                               : 99);
        unsigned shift = (*text | 0x20) == 'k'   ? 10
                         : (*text | 0x20) == 'm' ? 20
                         : (*text | 0x20) == 'g' ? 30
                                                 : 0;

        if (base == 10 && shift && text[1] == '\0' && v <= SLUICE_RING_BYTES_MAX) {
            v <<= shift;
            break;
        }
        if (d >= (unsigned)base || v > SLUICE_RING_BYTES_MAX) {
            return -1;
        }
        v = v * (uint64_t)base + d;
    }
    if (v < SLUICE_RING_BYTES_MIN || v > SLUICE_RING_BYTES_MAX || (v & (v - 1))) {
        return -1;
    }
    *bytes = v;
    return 0;
}

#endif /* SLUICE_CTL_H */
