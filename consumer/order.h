/* SPDX-License-Identifier: GPL-2.0-or-later */
/**
 * @file order.h
 * @brief The ordering stage: per-ring entries, pushed in any order, delivered in sequence.
 *
 * Producers (worker threads, reader threads) push entries tagged with their
 * ring and a per-ring sequence number 0, 1, 2, ...; one ordering thread
 * delivers each ring's entries in sequence order, calling `start` before a
 * ring's first entry and `end` after the entry marked `last`; an entry
 * marked `partial` is delivered in its turn without ending it (it comes
 * again, with the same sequence number). Callbacks run
 * only on the ordering thread, one at a time, never with a lock held.
 * Entries of different rings are delivered in no particular order, unless
 * the stage is global (order__start_global()): then every entry also has a
 * number `gseq` over all rings (0, 1, 2, ... in push order of the source,
 * no gaps), and entries are delivered in that order, so a run over the same
 * input delivers the same sequence whatever the threads' timing.
 */
#ifndef SLUICE_ORDER_H
#define SLUICE_ORDER_H

#include <pthread.h>
#include <stdint.h>

/** Per-ring ordering state; embed it in the caller's ring and zero it. */
struct order_ring {
    uint64_t next_seq;           /**< private: next sequence number to deliver */
    struct order_entry *pending; /**< private: received early, sorted by seq */
    int started;                 /**< private: `start` was called */
};

/** One unit to deliver; embed it in the caller's payload (e.g. a chunk). */
struct order_entry {
    struct order_entry *next; /**< private: queue link */
    struct order_ring *ring;  /**< the ring it belongs to */
    uint64_t seq;             /**< 0, 1, 2, ... per ring, no gaps */
    int last;                 /**< the ring's final entry: `end` follows it */
    /**
     * Not the entry's last delivery: `deliver` is called in its turn but the
     * ring's sequence does not move on; the pusher pushes the entry again,
     * with the same seq, once `deliver` handed it back (a chunk decoded in
     * slices, chunk.h). Never together with `last`.
     */
    int partial;
    uint64_t gseq; /**< a global stage's number for it (see the file comment), else unused */
};

/** Callbacks, all on the ordering thread. */
struct order_ops {
    /** Before the ring's first entry. */
    void (*start)(void *ctx, struct order_ring *ring);
    /** The ring's next entry; the callee owns @p e from here on (may free it). */
    void (*deliver)(void *ctx, struct order_entry *e);
    /** After the ring's last entry was delivered. */
    void (*end)(void *ctx, struct order_ring *ring);
};

/** The stage. Fields are private. */
struct order {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct order_entry *incoming; /**< pushed, not yet sorted (LIFO) */
    int closing;                  /**< order__finish() was called */
    int running;                  /**< the thread was started */
    pthread_t thread;
    struct order_ops ops;
    void *ctx;
    int global;                  /**< order__start_global(): deliver by gseq */
    uint64_t next_gseq;          /**< ... the next to deliver */
    struct order_entry *pending; /**< ... received early, sorted by gseq */
};

/**
 * Start the ordering thread.
 * @return 0, or -errno from pthread_create (nothing to clean up then).
 */
int order__start(struct order *o, const struct order_ops *ops, void *ctx);

/**
 * As order__start(), for a stage that delivers every entry in gseq order
 * (see the file comment); each ring's entries must come in its seq order
 * within it.
 */
int order__start_global(struct order *o, const struct order_ops *ops, void *ctx);

/** Hand @p e to the stage. Any thread; never blocks for long. */
void order__push(struct order *o, struct order_entry *e);

/**
 * Deliver everything pushed so far, then stop and join the thread. Call
 * once, after the last push. Entries whose predecessors never arrived are
 * not delivered.
 */
void order__finish(struct order *o);

#endif /* SLUICE_ORDER_H */
