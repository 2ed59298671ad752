/* SPDX-License-Identifier: GPL-2.0-or-later */
/**
 * @file chunk.h
 * @brief A chunk (one ring's span of whole records, in place in the ring,
 *        plus the items made from them) and the bounded pool chunks come from.
 *
 * A chunk travels reader thread -> work queue -> worker -> ordering stage ->
 * back to the pool; exactly one thread holds it at a time. The pool is the
 * session's backpressure: readers block in chunk_pool__get() when every
 * chunk is in flight, so a slow `trace` callback slows the readers (and, in
 * lossless mode, the guest) instead of growing memory.
 *
 * The item area is bounded too (chunk_items_max()): a span whose events
 * would make more items is decoded in slices. Its worker hands each full
 * slice to the ordering stage (the chunk marked `partial`), waits in
 * chunk__slice_wait() until the ordering thread has delivered it
 * (chunk__slice_done()), and goes on from `resume` with an empty area.
 * While it waits, the ordering thread holds the chunk.
 */
#ifndef SLUICE_CHUNK_H
#define SLUICE_CHUNK_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "block.h"
#include "order.h"
#include "sluice/consumer.h"
#include "sluice/record.h"
#include "window.h"

/** Why a chunk's decode ended early (chunk.bad). */
enum chunk_bad {
    CHUNK_BAD_HEADER = 1,   /**< a header word that is no valid record */
    CHUNK_BAD_CROSSING = 2, /**< a record that does not end inside the span */
    CHUNK_BAD_LAPPED = 3,   /**< the producer overwrote the span while it was decoded */
    CHUNK_BAD_BLOCK = 4,    /**< a BLOCK record its table does not hold (bad_why says why) */
    CHUNK_BAD_PC = 5,       /**< a MEM or EXEC record whose PC is not in its block (bad_why) */
    CHUNK_BAD_NOMEM = 6,    /**< no memory to grow the item area for a block's events */
    CHUNK_BAD_MAP = 7,      /**< a MAP record naming no module log entry, or no memory (bad_why) */
    CHUNK_BAD_FILE = 8,     /**< a trace file's chunk that does not decompress (bad_why) */
};

/**
 * Items a chunk's area holds at most, for items of @p item_size bytes (0 for
 * none): SLUICE_CHUNK_ITEMS_BYTES worth (consumer.h), but never fewer than
 * one per word of a span (SLUICE_CHUNK_BYTES / 8), so that plain records,
 * which make at most one item per word, always fit and are never sliced.
 */
static inline size_t chunk_items_max(size_t item_size)
{
    size_t n = item_size ? SLUICE_CHUNK_ITEMS_BYTES / item_size : 0;

    return item_size && n < SLUICE_CHUNK_BYTES / 8 ? SLUICE_CHUNK_BYTES / 8 : n;
}

/** Where the decode of a chunk that stopped at a full item area goes on. */
struct chunk_resume {
    size_t word;      /**< the next word to decode: a record's header, or the span's end */
    struct block blk; /**< the block being expanded, if in_block (blk.next: where) */
    int in_block;     /**< the decode stopped inside blk */
    int careful;      /**< blk's events may fill the area: room is checked per event */
    uint64_t marked;  /**< the decoder's module log position from MAP records (decode.c) */
    size_t snap_done; /**< snapshot events delivered by earlier slices */
};

/** A partial chunk's hand-off (chunk.slice), under chunk.slice_lock. */
enum chunk_slice {
    CHUNK_SLICE_OUT = 0,     /**< with the ordering stage (or no slice pending) */
    CHUNK_SLICE_RESUME = 1,  /**< delivered: decode on */
    CHUNK_SLICE_ABANDON = 2, /**< delivered nothing (the ring stopped): decode no more */
};

struct tf_pack;
struct tf_packed;

struct chunk {
    struct order_entry ord; /**< ordering link; ord.seq is the ring's chunk number */
    struct chunk *qnext;    /**< work queue / free list link */
    void *ring;             /**< the session's ring state (opaque here) */
    const uint64_t *words;  /**< the span's records, in the ring's mapping (little-endian) */
    const struct block_table *blocks; /**< the ring's block table (block_table.h), or NULL */
    struct block_view *view;          /**< the chunk's view of a table, kept across spans */
    uint64_t at;                      /**< the span's ring position (bytes since the ring began) */
    size_t len;                       /**< bytes of records in `words` */
    int bad;                          /**< 0, or a CHUNK_BAD_* reason the decode ended early */
    uint64_t bad_at;                  /**< ... at this ring position */
    uint64_t bad_hdr;                 /**< ... with this header word */
    char bad_why[256];                /**< ... for CHUNK_BAD_BLOCK, _PC, _MAP and _FILE: why */
    uint8_t *items;                   /**< items made by the worker, item_size bytes each */
    size_t n_items;                   /**< items in `items` */
    size_t items_cap;                 /**< room in `items`, in items (grown by chunk__reserve()) */
    size_t items_max;                 /**< items_cap never grows past this (chunk_items_max()) */
    size_t item_size;                 /**< bytes of one item (the pool's) */
    struct sluice_counts counts;      /**< counted by the worker (this slice's, if sliced) */
    int partial;                      /**< the decode stopped at a full area; more to decode */
    struct chunk_resume resume;       /**< ... from here */
    pthread_mutex_t slice_lock;       /**< guards `slice` */
    pthread_cond_t slice_cond;        /**< signalled when `slice` leaves CHUNK_SLICE_OUT */
    int slice;                        /**< enum chunk_slice */
    uint64_t maps_pos; /**< the module log's maps_used once the span was taken (maps.h) */
    int snapshot;      /**< deliver the process's map at its table's snapshot_at first */
    /** With snap_own: the map the snapshot shows is this one, not the table's snapshot_at,
     *  and MAP records before it are in it (a trace file's thread whose first chunks a
     *  window passed over). */
    uint64_t snap_at;
    int snap_own;            /**< see snap_at */
    int windowed;            /**< decode through `win` (an instruction window's edge) */
    struct chunk_window win; /**< ... set up by its worker (window.h) */
    uint64_t win_before, win_from, win_to; /**< ... from these: window__start()'s */
    uint64_t *copy; /**< a lossy ring's copy of the span (chunk__copy_area()), or NULL */
    int copied;     /**< `words` points into `copy`: nothing can overwrite it (no lapped check) */
    struct tf_pack *pack;     /**< a recording session's compressed span (tf_write.h), or NULL */
    int pack_snapshot;        /**< ... and `snapshot` as it was before the decode cleared it */
    struct tf_packed *packed; /**< a trace file's chunk as stored, for its worker to unpack into
                                 `copy` (tf_read.h), or NULL / empty */
};

/**
 * Room for a copy of one span with a word in front (SLUICE_CHUNK_BYTES + 8
 * bytes), made at the first call and kept with the chunk. Reader thread.
 * @return the area, or NULL if out of memory.
 */
uint64_t *chunk__copy_area(struct chunk *c);

/** The pool. Fields are private. */
struct chunk_pool {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct chunk *free;
    unsigned allocated;
    unsigned max;
    size_t item_size;
};

/**
 * Make a pool of at most @p max chunks (allocated on demand), each with room
 * for SLUICE_CHUNK_BYTES / 8 items of @p item_size bytes (a span holds at
 * most SLUICE_CHUNK_BYTES of records: they end at chunk boundaries,
 * record.h), growing to at most chunk_items_max(@p item_size).
 */
void chunk_pool__init(struct chunk_pool *p, unsigned max, size_t item_size);

/**
 * A clean chunk (len, n_items, counts, partial, resume zero). Blocks while
 * @p max chunks are out. Any thread.
 * @return the chunk, or NULL if memory ran out.
 */
struct chunk *chunk_pool__get(struct chunk_pool *p);

/**
 * Make room for @p n items in @p c (its items and the ones to come), @p n
 * at most c->items_max. A span of plain records makes at most one item per
 * word, which the initial room holds; a BLOCK record may make one per
 * instruction of its block, so the decoder calls this at each BLOCK. The
 * room grows (doubling, capped at items_max) and stays with the chunk when
 * it is recycled. The thread holding @p c.
 * @return 0, -ENOMEM (the chunk is unchanged), or -ERANGE if @p n is past
 *         items_max.
 */
int chunk__reserve(struct chunk *c, size_t n);

/**
 * Worker, after pushing the partial chunk @p c to the ordering stage: wait
 * (condition variable) until the ordering thread has delivered its items
 * (chunk__slice_done()), then empty them (n_items and counts zero) for the
 * next slice.
 * @return 1: decode on; 0: the ring stopped before this chunk, decode no
 *         more (push it once more, not partial, so its span is released).
 */
int chunk__slice_wait(struct chunk *c);

/**
 * Ordering thread, after delivering the partial chunk @p c's items (or not,
 * if @p resume is 0): give it back to its waiting worker. @p c is the
 * worker's from here on.
 */
void chunk__slice_done(struct chunk *c, int resume);

/** Give @p c back and wake one waiter. Any thread. */
void chunk_pool__put(struct chunk_pool *p, struct chunk *c);

/** Free the pool; every chunk must have been put back. */
void chunk_pool__destroy(struct chunk_pool *p);

#endif /* SLUICE_CHUNK_H */
