/* SPDX-License-Identifier: GPL-2.0-or-later */
/**
 * @file test_producer.h
 * @brief A minimal ring producer for the tests, written from record.h alone
 *        (the way jitter/ring.c must behave): memfd, header, data mapped twice,
 *        release-store of head, futex wake when consumers wait, and waiting
 *        for lossless consumers when full. One thread per ring.
 */
#ifndef SLUICE_TEST_PRODUCER_H
#define SLUICE_TEST_PRODUCER_H

#include <stddef.h>
#include <stdint.h>

#include "sluice/ctl.h"
#include "sluice/record.h"

struct test_ring {
    int fd;                      /**< the memfd */
    struct sluice_ring_hdr *hdr; /**< header page */
    uint8_t *data;               /**< data area, mapped twice */
    uint64_t size;               /**< data bytes */
    uint64_t pos;                /**< write position (published up to hdr->head) */
    int pad_boundaries;          /**< 1 (default): pad to chunk boundaries as record.h says */
    unsigned waits;              /**< times the producer slept waiting for room */
    void *map;
    size_t map_len;
    struct sluice_ring_tail *tail; /**< slot 0's words for this ring: line `line` of test_tails() */
    uint32_t line;                 /**< the ring's line in the tail file (RING's `line`) */
    struct sluice_blocks_hdr *blocks; /**< the block table, after test_ring__add_blocks() */
    uint64_t *blocks_data;            /**< its data words */
    size_t blocks_len;                /**< bytes of its mapping */
};

/**
 * The test process's tail file for consumer slot 0 (record.h): a sealed
 * memfd of SLUICE_TAIL_BYTES, made and mapped on first use; every ring
 * test_ring__create() makes gets a line of its own in it.
 * @param[out] fd its descriptor (for WELCOME), or NULL
 * @return the mapping, or NULL with errno set.
 */
struct sluice_ring_tail *test_tails(int *fd);

/**
 * Create a ring of @p size data bytes (power of two, >= 4096) for thread
 * @p tid in a memfd sealed against shrinking, with consumer slot 0 active
 * and lossless, both positions at @p start (so tests can begin near the
 * end of the data area); slot 0's tail is the ring's line of test_tails().
 * @return 0 or -errno.
 */
int test_ring__create(struct test_ring *t, uint64_t size, uint32_t tid, uint64_t start);

/**
 * Give the ring's process a block table of @p bytes (page multiple, header
 * included) in the same memfd, after the ring, and name it in the ring
 * header (blocks_offset, blocks_bytes). Call before announcing the ring.
 * @return 0 or -errno.
 */
int test_ring__add_blocks(struct test_ring *t, uint64_t bytes);

/**
 * Append a descriptor of @p n instructions at guest PCs @p pcs to the
 * table, instruction i recorded when @p recorded[i] is set, and
 * release-store used_words past it.
 * @return its id (word index), for sluice_block_hdr().
 */
uint64_t test_ring__add_block(struct test_ring *t, unsigned n, const uint64_t *pcs,
                              const uint8_t *recorded);

/** Unmap and close. */
void test_ring__destroy(struct test_ring *t);

/**
 * Append @p n words (one or more whole records), waiting while the ring is
 * full. A record that would cross a chunk boundary is preceded by a PAD up
 * to it (record.h), unless pad_boundaries was cleared (to test consumers
 * against a producer that breaks the rule).
 */
void test_ring__append(struct test_ring *t, const uint64_t *w, unsigned n);

/** Publish everything appended (release store of head) and wake waiting consumers. */
void test_ring__publish(struct test_ring *t);

/** Publish, then mark the ring closed (the thread exited) and wake consumers. */
void test_ring__close(struct test_ring *t);

/**
 * Send control message @p m on socket @p fd, with descriptor @p pass_fd
 * attached (SCM_RIGHTS) unless it is negative: the fake jitter's half of
 * ctl.h. Returns 0, or -1 with errno set (or EMSGSIZE for a short send).
 */
int test_ctl__send(int fd, const struct sluice_ctl_msg *m, int pass_fd);

#endif /* SLUICE_TEST_PRODUCER_H */
