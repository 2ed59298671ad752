/* SPDX-License-Identifier: GPL-2.0-or-later */
/**
 * @file maps.h
 * @brief The consumer's reading of a process's module log (record.h,
 *        format 8): the entries parsed once, the map at any position, and
 *        which mapping held an address at a position.
 *
 * One per block table (block_table.h), made when the table is mapped, freed
 * with it. The log is shared with a producer that may be buggy or hostile:
 * each entry is copied out of it once, checked, and only the copy is read
 * (its path included). Parsed entries are never moved or freed while the
 * table lives, so workers read them without a lock once they see their
 * count (acquire); parsing more takes the lock. Any thread.
 */
#ifndef SLUICE_MAPS_H
#define SLUICE_MAPS_H

#include <pthread.h>
#include <stdint.h>

#include "sluice/consumer.h"
#include "sluice/record.h"

/** One parsed entry. */
struct maps_entry {
    uint64_t at;               /**< its position (byte offset in the log) */
    uint64_t end;              /**< the position after it */
    struct sluice_map_entry e; /**< the checked copy */
    char *path;                /**< NUL-terminated copy, NULL if path_len is 0 */
};

/** Entries per block of the parsed array. */
#define MAPS_BLOCK 4096u
/** Most blocks: enough for a 16 MiB log of 64-byte entries (104 since format 11). */
#define MAPS_BLOCKS 64u

/** Entries that touch one 2 MiB region of guest addresses, by index, ascending. */
struct maps_region {
    uint64_t key; /**< address >> MAPS_REGION_SHIFT, plus 1 (0: an empty slot) */
    uint32_t *idx;
    uint32_t n, cap;
};

/** log2 of a region's bytes. */
#define MAPS_REGION_SHIFT 21
/** An entry touching more regions than this goes in the `big` list, read by every lookup. */
#define MAPS_REGION_MAX 64

/** A process's module log, parsed as far as read. Fields are private. */
struct maps {
    const uint8_t *log;      /**< the shared log (read-only mapping) */
    uint64_t capacity;       /**< its checked capacity in bytes */
    const uint64_t *used;    /**< the producer's maps_used */
    const uint64_t *dropped; /**< the producer's maps_dropped */
    pthread_mutex_t lock;    /**< parsing */
    uint64_t parsed;         /**< bytes parsed (the end of the last entry) */
    uint64_t n;              /**< entries parsed (release-stored) */
    struct maps_entry *block[MAPS_BLOCKS];
    struct maps_region *regions; /**< open addressing by key, under the lock */
    uint64_t n_regions, size_regions;
    struct maps_region big; /**< entries over more than MAPS_REGION_MAX regions */
    char bad[160];          /**< set once: why parsing stopped */
};

/**
 * Start reading a log of @p capacity bytes at @p log whose used and
 * dropped counters are at @p used and @p dropped. @p m is zeroed first.
 */
void maps__init(struct maps *m, const uint8_t *log, uint64_t capacity, const uint64_t *used,
                const uint64_t *dropped);

/** Free what maps__init() and parsing made. */
void maps__destroy(struct maps *m);

/** The producer's maps_used now (acquire), clamped to the capacity. Any thread. */
uint64_t maps__used(const struct maps *m);

/** Whether the producer has dropped changes (its log filled up). Any thread. */
int maps__full(const struct maps *m);

/**
 * Parse the entries below position @p upto (clamped to what is published).
 * @return entries parsed in all (those below a bad entry, which stops it:
 *         maps__bad() says why).
 */
uint64_t maps__sync(struct maps *m, uint64_t upto);

/** The entry that starts at position @p at (parsing up to it), or NULL. */
const struct maps_entry *maps__entry_at(struct maps *m, uint64_t at);

/**
 * The mapping that held guest address @p addr in the map at position
 * @p pos (the entries below it), as sluice_map__at() describes it. Reads
 * only the entries that touch @p addr's region (and the few huge ones), so
 * its cost does not grow with the changes made elsewhere.
 * @param[out] file if not NULL, with 0: the mmap or mremap entry that put
 *             the mapping there (its file's identity, format 10; valid while
 *             @p m lives)
 * @return 0, or -ENOENT (nothing mapped there, or not logged).
 */
int maps__lookup(struct maps *m, uint64_t pos, uint64_t addr, struct sluice_module *out,
                 const struct sluice_map_entry **file);

/**
 * Call @p fn for each mapping of the map at position @p pos, by address:
 * a SLUICE_MAP_MMAP event with `snapshot` set (pieces of one mmap left by
 * later munmaps and mprotects come as pieces).
 * @return 0, or -ENOMEM.
 */
int maps__snapshot(struct maps *m, uint64_t pos, void (*fn)(void *arg, const struct sluice_map *e),
                   void *arg);

/**
 * The newest entry below position @p pos that mapped the file at @p path
 * (an mmap or mremap carrying the file's identity, format 10), or NULL.
 * Walks the entries backwards: call it once per file, not per address.
 */
const struct sluice_map_entry *maps__mapped(struct maps *m, uint64_t pos, const char *path);

/** Fill the public event for entry @p x. */
void maps__event(const struct maps_entry *x, struct sluice_map *out);

/** Why parsing stopped at a bad entry, or "" . */
const char *maps__bad(const struct maps *m);

#endif /* SLUICE_MAPS_H */
