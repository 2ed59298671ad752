/* SPDX-License-Identifier: GPL-2.0-or-later */
/**
 * @file ring_reader.h
 * @brief Consumer side of one ring: map it, validate it, copy records out.
 *
 * A ring_reader belongs to one thread at a time (the session's reader thread
 * for that ring); none of its functions are thread-safe on the same reader.
 * The producer (jitter/ring.c) runs concurrently in another process; every
 * value read from the shared header is checked before use, so a corrupt or
 * hostile ring yields an error message, never an out-of-bounds access.
 */
#ifndef SLUICE_RING_READER_H
#define SLUICE_RING_READER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sluice/record.h"

/** One mapped ring, read through consumer slot `slot`. */
struct ring_reader {
    struct sluice_ring_hdr *hdr; /**< shared header page */
    const uint8_t *data;         /**< data area, mapped twice back to back */
    uint64_t size;               /**< data_size in bytes, a power of two */
    uint64_t tail;               /**< bytes consumed (our copy of the slot's tail) */
    unsigned slot;               /**< consumer slot index in hdr->consumer[] */
    void *map;                   /**< whole reservation, for munmap */
    size_t map_len;              /**< bytes of the reservation */
    uint64_t salvaged;           /**< end of the records ring_reader__salvage() found (0: none) */
    uint64_t ino;                /**< inode of the memfd, with the offset: which ring this is */
    uint64_t offset;             /**< file offset of the ring's header */
    char err[192];               /**< last error, NUL-terminated ("" if none) */
};

/**
 * Map the ring at file offset @p offset of the arena memfd @p fd and
 * validate its header (magic, version, hdr_bytes, data_size a power of two
 * no smaller than a page, file size). Does not take ownership of @p fd (the
 * mapping stays valid after close). The reader starts at the slot's
 * current tail.
 * @param[out] r      reader to fill (zeroed first)
 * @param      offset of the ring's header, a multiple of SLUICE_RING_HDR_BYTES
 * @param      slot   consumer slot given by the jitter, < SLUICE_MAX_CONSUMERS
 * @return 0; -EINVAL (bad header or offset, r->err names the field),
 *         -errno from fstat/mmap. On error nothing stays mapped.
 */
int ring_reader__open(struct ring_reader *r, int fd, uint64_t offset, unsigned slot);

/**
 * The producer died without closing the ring (SIGKILL, or a sibling
 * thread's execve): take the whole records it wrote after its last publish
 * as published too. They end at the first zero or invalid header word (the
 * jitter zeroes the ring ahead of its cursor and writes each header last),
 * and never more than a ring's worth past the tail. Call only once the
 * producer can write no more (its process is gone).
 * @return bytes found past head (>= 0), or -EPROTO as ring_reader__avail().
 */
int64_t ring_reader__salvage(struct ring_reader *r);

/** Unmap the ring. Safe on a zeroed or already closed reader. */
void ring_reader__close(struct ring_reader *r);

/**
 * Bytes published and not yet consumed (acquire load of head).
 * @return 0..size; -EPROTO if head went backwards, is unaligned, or is more
 *         than `size` ahead of the tail (an overrun: the bytes are gone);
 *         r->err says which.
 */
int64_t ring_reader__avail(struct ring_reader *r);

/** Whether the producer has marked the ring closed (acquire: head is then final). */
int ring_reader__closed(const struct ring_reader *r);

/**
 * Copy the next run of whole records into @p buf and consume them (the
 * tail is released at once, so the producer never waits on our analysis).
 * Copies at most @p cap bytes, ending on a record boundary; PAD records
 * that do not fit are skipped without copying.
 * @param[out]   buf     destination, 8-byte aligned, @p cap bytes
 * @param        cap     capacity in bytes, >= 32 (the largest non-PAD record)
 * @param[in,out] last_pc PC of the last EXEC record before the copied run;
 *                       updated to the last one inside it
 * @return bytes copied (0: nothing published); -EPROTO for an invalid record
 *         header (r->err gives tid and byte position), a record crossing
 *         head, or an overrun (see ring_reader__avail()).
 */
ssize_t ring_reader__read(struct ring_reader *r, void *buf, size_t cap, uint64_t *last_pc);

/**
 * Consume everything published without reading it (after an error, so a
 * lossless producer is never left waiting on a reader that gave up).
 */
void ring_reader__discard(struct ring_reader *r);

/**
 * Wake the thread sleeping in ring_reader__wait() on this ring, if any
 * (another thread of the consumer, e.g. at end of stream: a killed producer
 * never wakes it). Any thread.
 */
void ring_reader__wake(struct ring_reader *r);

/**
 * Wait until something is published, the ring is closed, or @p timeout_ms
 * milliseconds pass (a futex wait on head_futex; never spins).
 * @return 0 (check again in any case; wake-ups may be spurious).
 */
int ring_reader__wait(struct ring_reader *r, int timeout_ms);

#endif /* SLUICE_RING_READER_H */
