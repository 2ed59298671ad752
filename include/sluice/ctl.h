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
 *   jitter -> consumer  SLUICE_CTL_WELCOME (slot assigned to the consumer)
 *   jitter -> consumer  SLUICE_CTL_RING    one per guest thread, the ring's
 *                                          memfd attached (SCM_RIGHTS), for
 *                                          threads alive now and started later,
 *                                          in every process forked from the guest
 *   end of stream: the socket reaches EOF when every guest process that held
 *   it has exited or exec'd (the jitter's end is close-on-exec); by then every
 *   ring's last record is published.
 *
 * `sluice run` hands one end of a socketpair to QEMU, named in the jitter's
 * options (`-jitter PATH,consumer_fd=N,...`, keys SLUICE_OPT_* below; never
 * in the environment, which the guest can read), and sends HELLO before
 * QEMU starts, so the consumer is attached before the first guest
 * instruction.
 *
 * Rings: all rings of one guest process live in one memfd, the process's
 * arena (so the jitter holds a constant number of descriptors whatever the
 * thread count). Each RING message carries the arena's descriptor and the
 * file offset of that ring's header; a consumer maps the ring from there
 * (layout in record.h). A consumer must check that the header it maps
 * matches the message (pid, tid, sizes) and refuse a ring it already has.
 */
#ifndef SLUICE_CTL_H
#define SLUICE_CTL_H

#include <stdint.h>

/** Version of this protocol; HELLO with another version is refused. 2: RING carries an offset. */
#define SLUICE_CTL_VERSION 2u

enum sluice_ctl_type {
    SLUICE_CTL_HELLO = 1,   /**< consumer -> jitter */
    SLUICE_CTL_WELCOME = 2, /**< jitter -> consumer */
    SLUICE_CTL_RING = 3,    /**< jitter -> consumer, memfd attached */
    SLUICE_CTL_REFUSED = 4, /**< jitter -> consumer, `error` says why */
};

/** Every control message is exactly this struct (fixed size datagram). */
struct sluice_ctl_msg {
    uint32_t type;       /**< enum sluice_ctl_type */
    uint32_t version;    /**< SLUICE_CTL_VERSION */
    uint32_t pid;        /**< guest process (RING, WELCOME) */
    uint32_t tid;        /**< guest thread (RING) */
    uint32_t slot;       /**< consumer slot index in every ring header (WELCOME, RING) */
    uint32_t lossless;   /**< HELLO: 1 lossless, 0 lossy */
    uint64_t ring_bytes; /**< RING: data area size in bytes (power of two) */
    uint64_t offset;     /**< RING: file offset of the ring's header in the arena memfd */
    char arch[16];       /**< QEMU target name (WELCOME, RING) */
    char error[96];      /**< REFUSED: reason, NUL-terminated */
};

/*
 * The jitter's options, after its path: `-jitter PATH,key=value,...`; a ','
 * inside a value is written ",,". Parsed by jitter/opts.c.
 */
/** Option: an inherited, connected consumer socket descriptor. */
#define SLUICE_OPT_CONSUMER_FD "consumer_fd"
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
