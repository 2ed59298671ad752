/* SPDX-License-Identifier: GPL-2.0-or-later */
/**
 * @file ring_reader.h
 * @brief Consumer side of one ring: map it, validate it, cut the published
 *        records into spans that are decoded in place, give them back.
 *
 * A ring_reader belongs to one thread (the session's reader thread for that
 * ring), except ring_reader__release() and ring_reader__intact(), which any
 * thread may call. The producer (jitter/ring.c) runs concurrently in another
 * process; every value read from the shared header is checked before use,
 * so a corrupt or hostile ring yields an error message, never an
 * out-of-bounds access.
 */
#ifndef SLUICE_RING_READER_H
#define SLUICE_RING_READER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sluice/record.h"

/** One mapped ring, read through consumer slot `slot`. */
struct ring_reader {
    const struct sluice_ring_hdr *hdr; /**< shared header page, read-only */
    struct sluice_ring_tail *tail;     /**< our words for this ring, in our tail file */
    const uint8_t *data;               /**< data area, mapped twice back to back */
    uint64_t size;                     /**< data_size in bytes, a power of two */
    uint64_t pos;                      /**< reader thread: end of the spans taken (a position) */
    unsigned slot;                     /**< consumer slot index in hdr->slot[] */
    void *map;                         /**< whole reservation, for munmap */
    size_t map_len;                    /**< bytes of the reservation */
    uint64_t salvaged;      /**< end of the records ring_reader__salvage() found (0: none) */
    uint64_t ino;           /**< inode of the memfd, with the offset: which ring this is */
    uint64_t offset;        /**< file offset of the ring's header */
    uint64_t blocks_offset; /**< the header's blocks_offset, as validated (block_table.h) */
    uint64_t blocks_bytes;  /**< the header's blocks_bytes, as validated (0: no table) */
    uint64_t maps_at_start; /**< the header's maps_at_start (record.h): the map its ring began in */
    uint64_t start;         /**< the position this reader started at (0: the ring's beginning) */
    char err[192];          /**< last error, NUL-terminated ("" if none) */
};

/**
 * Map the ring at file offset @p offset of the arena memfd @p fd, read-only,
 * and validate its header (magic, version, hdr_bytes, data_size a power of
 * two no smaller than a page, file size, the file sealed against
 * shrinking), and copy where it says the process's block table is
 * (blocks_offset, blocks_bytes: checked and mapped by block_tables__get()).
 * Does not take ownership of @p fd (the mapping stays valid after close).
 * The reader starts at the tail in @p tail.
 * @param[out] r      reader to fill (zeroed first)
 * @param      offset of the ring's header, a multiple of SLUICE_RING_HDR_BYTES
 * @param      slot   consumer slot given by the jitter, < SLUICE_MAX_CONSUMERS
 * @param      tail   our words for this ring (a line of our tail file, record.h),
 *                    mapped for as long as the reader lives
 * @return 0; -EINVAL (bad header or offset, an arena that can shrink:
 *         r->err names the field), -errno from fstat/mmap. On error nothing
 *         stays mapped.
 */
int ring_reader__open(struct ring_reader *r, int fd, uint64_t offset, unsigned slot,
                      struct sluice_ring_tail *tail);

/**
 * The producer died without closing the ring (SIGKILL, or a sibling
 * thread's execve): take the whole records it wrote after its last publish
 * as published too, up to the cursor its translated code stored at its
 * last TB start (record.h, written_addr), stopping early at an invalid
 * header, and never more than a ring's worth past the tail. Call only once
 * the producer can write no more (its process is gone).
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

/** The position the producer has published up to now (acquire load of head; unchecked). */
uint64_t ring_reader__head(const struct ring_reader *r);

/**
 * Whether the jitter still has our slot open (its `active` word, which it
 * clears when it drops or forgets us; informative only: a consumer could
 * write it). Any thread.
 */
int ring_reader__slot_open(const struct ring_reader *r);

/** Whether the producer has marked the ring closed (acquire: head is then final). */
int ring_reader__closed(const struct ring_reader *r);

/**
 * Take the next span of published records, without copying or reading it:
 * from the reader's position to head or to the next chunk boundary
 * (SLUICE_CHUNK_BYTES, record.h), whichever comes first, so at most
 * SLUICE_CHUNK_BYTES bytes. Both ends are record boundaries if the
 * producer keeps record.h's rule; the decoder checks that it did. The span
 * stays the consumer's (the producer does not reuse it) until released.
 * @param[out] words the span's first word, in the mapping (contiguous: the
 *                   data area is mapped twice)
 * @param[out] at    the span's position (bytes since the ring began)
 * @return bytes in the span (0: nothing published), or -EPROTO as
 *         ring_reader__avail().
 */
ssize_t ring_reader__take(struct ring_reader *r, const uint64_t **words, uint64_t *at);

/**
 * Whether the span taken at position @p at still holds what the producer
 * wrote: false if a producer that does not wait for us (lossy, or broken)
 * has lapped it, and then what was decoded from it is garbage. Call after
 * decoding (the check follows the decoder's loads). Any thread.
 */
int ring_reader__intact(const struct ring_reader *r, uint64_t at);

/**
 * Done reading the @p len bytes at @p words, a span of the ring's mapping
 * (decoded, or copied): drop its cache lines from every cache, so they are
 * in memory only when the producer writes them a lap later. A line this
 * consumer read stays shared in its core's caches otherwise, and the
 * producer's next write of it waits for that copy to be taken back: on
 * this project's 2-core host (AMD EPYC), gzip -9 traced in full with 16
 * MiB rings cost its QEMU 2.7 s of CPU, 0.8 s with this (untraced: 0.5 s),
 * and rings larger than the cache (64 MiB) got only halfway. Only a hint:
 * nothing depends on it for correctness. x86-64 (CLFLUSH, in every
 * x86-64 CPU); elsewhere it does nothing. Any thread.
 */
void ring_reader__evict(const void *words, size_t len);

/**
 * Give the producer back every byte before position @p end (the end of a
 * span taken, spans released in order). Never moves the tail back, so
 * calls from two threads are safe. Wakes the producer only if it sleeps
 * waiting for room (its producer_waiting flag). Any thread.
 */
void ring_reader__release(struct ring_reader *r, uint64_t end);

/**
 * Lossy slots: take the span [@p at, @p end) the caller has copied, by
 * moving the tail from @p at to @p end (compare-and-swap). It fails if the
 * producer moved the tail first: it took the span, and counted it lost
 * (record.h, struct sluice_ring_tail). Reader thread.
 * @return 1 taken (the copy is what the producer wrote), 0 not.
 */
int ring_reader__claim(struct ring_reader *r, uint64_t at, uint64_t end);

/**
 * Lossy slots: read the tail and the events the producer took from us
 * (the slot's lost_events) as one consistent pair (lost_seq), so that @p lost counts
 * exactly the events it took below @p tail. Reader thread.
 * @return 0, or -EPROTO if no consistent pair came in many tries (a
 *         producer that keeps lost_seq odd), r->err says so.
 */
int ring_reader__lost(struct ring_reader *r, uint64_t *tail, uint64_t *lost);

/**
 * Take and release everything published without reading it (after an
 * error, so a lossless producer is never left waiting on a reader that
 * gave up).
 */
void ring_reader__discard(struct ring_reader *r);

/**
 * Tell the jitter we are done with the ring (its `done` word, record.h):
 * once every consumer of an ended ring is, its pages are given back, so
 * nothing of the mapping may be read after this: call it once every span
 * was decoded and delivered (after ring_reader__close(), say). Any thread,
 * once.
 */
void ring_reader__done(struct ring_reader *r);

/**
 * Give up a ring we were given and cannot read (its mapping or its reader
 * failed), through its line @p tail of our tail file: say done and wake
 * the producer, which then closes our slot in that ring instead of waiting
 * for a lossless consumer that will never read it (record.h: `done`). Its
 * thread is then not traced by us. Any thread, once per line.
 */
void ring_reader__give_up(struct sluice_ring_tail *tail);

/**
 * Before a wait on this ring's head_futex (alone, or among other rings'
 * with futex_waitv: reader_pool.c): tell the producer we wait (so it wakes
 * head_futex after it publishes), then check again. The ring's reader
 * thread only.
 * @return 1 if nothing was published past our position and the ring is
 *         not closed: wait on ring_reader__head_futex() while it holds
 *         @p *seen, then ring_reader__disarm(); 0 if there is something to
 *         read (not armed: no disarm needed).
 */
int ring_reader__arm(struct ring_reader *r, uint32_t *seen);

/** After a wait begun by ring_reader__arm(): no longer waiting. Reader thread. */
void ring_reader__disarm(struct ring_reader *r);

/** The futex word a reader waits on (record.h: head_futex; shared, read-only mapping). */
const uint32_t *ring_reader__head_futex(const struct ring_reader *r);

/**
 * Wait until something is published, the ring is closed, or @p timeout_ms
 * milliseconds pass (a futex wait on head_futex; never spins).
 * @return 0 (check again in any case; wake-ups may be spurious).
 */
int ring_reader__wait(struct ring_reader *r, int timeout_ms);

#endif /* SLUICE_RING_READER_H */
