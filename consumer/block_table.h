/* SPDX-License-Identifier: GPL-2.0-or-later */
/**
 * @file block_table.h
 * @brief The consumer's read-only view of a process's block table
 *        (record.h, format 4), mapped once per arena and shared by the
 *        rings of that process.
 *
 * A block_tables registry belongs to a session; block_tables__get() runs on
 * the control thread (a RING message), block_tables__put() on the ordering
 * thread (a ring ended) or at session teardown, each under the registry's
 * lock. Workers read a table through block.h while a ring that holds a
 * reference has chunks in flight; they never take the lock.
 */
#ifndef SLUICE_BLOCK_TABLE_H
#define SLUICE_BLOCK_TABLE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "maps.h"
#include "sluice/record.h"

/** Largest block table accepted (header and data), in bytes. */
#define BLOCK_TABLE_MAX_BYTES (4ull << 30)

/** One mapped block table. */
struct block_table {
    const struct sluice_blocks_hdr *hdr; /**< shared header; only used_words is read after checks */
    const uint64_t *data;                /**< data words (little-endian), read-only */
    uint64_t capacity_words;             /**< validated copy: words readable at `data` */
    uint64_t serial;                     /**< unique to this table in the process (never 0) */
    struct maps *maps;                   /**< its module log, parsed as read; NULL if it has none */
    uint64_t snapshot_at;                /**< the map the snapshot shows (a source sets it) */
    int snapshot_fixed;                  /**< snapshot_at was set by the process's first ring */
    int snapshot_taken; /**< set by the first ring to deliver the snapshot (atomic) */
    /* Registry state, private to block_table.c. */
    void *map;              /**< the mapping, NULL for a table made by block_table__check() */
    size_t map_len;         /**< bytes mapped */
    uint64_t dev, ino;      /**< the arena's st_dev, st_ino */
    uint64_t offset, bytes; /**< where the rings say the table is */
    uint64_t maps_offset_, maps_capacity_; /**< the module log's, as checked */
    unsigned refs;                         /**< rings holding it */
    struct block_table *next;              /**< registry list */
};

/**
 * Validate the table header at @p base (@p bytes readable bytes, header
 * included) and point @p bt at it: magic, version, hdr_bytes, and
 * capacity_words fitting in @p bytes. The header is copied before it is
 * checked; capacity_words is never read again.
 * @param[out] bt  filled on success (registry fields zero)
 * @param[out] err one-line reason on failure, naming the field
 * @return 0, or -EINVAL.
 */
int block_table__check(struct block_table *bt, const void *base, uint64_t bytes, char *err,
                       size_t errlen);

/**
 * Data words holding whole descriptors (acquire load of used_words; pairs
 * with the jitter's release store after each descriptor). Not checked
 * against the capacity: the caller does. Any thread.
 */
static inline uint64_t block_table__used(const struct block_table *bt)
{
    return __atomic_load_n(&bt->hdr->used_words, __ATOMIC_ACQUIRE);
}

/** The tables of one session, by arena. Fields are private. */
struct block_tables {
    pthread_mutex_t lock;
    struct block_table *list;
};

/** Make an empty registry. */
void block_tables__init(struct block_tables *ts);

/**
 * The table a ring of arena @p fd names (its header's blocks_offset and
 * blocks_bytes, as validated and copied by the ring reader): mapped
 * read-only and checked the first time a ring of this arena (st_dev and
 * st_ino of @p fd) names it, shared afterwards with one more reference.
 * A ring whose arena already has a table at another offset or size is
 * refused. Does not take @p fd (the mapping outlives it).
 * @param[out] out the table, or NULL when @p bytes is 0 (no table: a
 *                 producer that writes only EXEC records)
 * @param[out] err one-line reason on failure, naming the field
 * @return 0; -EINVAL (bad offset, size or table header); -errno from
 *         fstat or mmap.
 */
int block_tables__get(struct block_tables *ts, int fd, uint64_t offset, uint64_t bytes,
                      struct block_table **out, char *err, size_t errlen);

/** One more reference to @p bt, which the caller holds one of. NULL is ignored. */
void block_tables__ref(struct block_tables *ts, struct block_table *bt);

/** Drop a reference from block_tables__get(); the last one unmaps. NULL is ignored. */
void block_tables__put(struct block_tables *ts, struct block_table *bt);

/** Free the registry; every table must have been put. */
void block_tables__destroy(struct block_tables *ts);

#endif /* SLUICE_BLOCK_TABLE_H */
