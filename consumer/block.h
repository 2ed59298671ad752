/* SPDX-License-Identifier: GPL-2.0-or-later */
/**
 * @file block.h
 * @brief Reading block descriptors while a chunk is decoded: checking a
 *        BLOCK record against its table, finding a record's instruction in
 *        its block, and which instructions' exec events are recorded.
 *
 * Worker threads only, one chunk at a time (the state lives on the
 * decoder's stack). The decoder (decode.c) owns delivery; this only reads.
 */
#ifndef SLUICE_BLOCK_H
#define SLUICE_BLOCK_H

#include <endian.h>
#include <stddef.h>
#include <stdint.h>

#include "block_table.h"

/** Descriptors a chunk's decoder remembers as checked (direct-mapped by id). */
#define BLOCK_VIEW_CACHE 64

/** A checked descriptor: its id + 1 (0: empty), n and recorded count as first loaded. */
struct block_seen {
    uint64_t id1;
    unsigned n, recorded;
};

/**
 * A chunk's view of its ring's block table. Zero-initialise it; the cache
 * saves re-checking the descriptors a loop names over and over (its copy
 * of n stays what was checked, so a producer changing the table later
 * changes no bound).
 */
struct block_view {
    const struct block_table *bt; /**< NULL: the ring has no table */
    uint64_t used;                /**< used_words last loaded (0: not yet), <= capacity */
    struct block_seen seen[BLOCK_VIEW_CACHE];
};

/** The block being decoded: one BLOCK record's part of a descriptor. */
struct block {
    const uint64_t *pcs;   /**< the descriptor's n PCs, in the table */
    const uint64_t *flags; /**< its ceil(n / 8) words of per-instruction bytes */
    uint64_t id;           /**< the BLOCK record's id */
    unsigned n;            /**< instructions in the descriptor (loaded once) */
    unsigned recorded;     /**< word 0's count of recorded instructions, at most n */
    unsigned from;         /**< the record's first instruction */
    unsigned next;         /**< first instruction whose exec event is not yet delivered */
    unsigned end;          /**< the record's `to` */
    int last;              /**< instruction of the last MEM or EXEC record, or -1 */
};

/** Word @p i at @p w of a shared area, loaded once. */
static inline uint64_t block__word(const uint64_t *w, size_t i)
{
    return le64toh(__atomic_load_n(&w[i], __ATOMIC_RELAXED));
}

/**
 * Start block @p b from the BLOCK header word @p hdr: check that its
 * descriptor is whole in the table (id + sluice_block_words(n) <= used_words
 * <= capacity_words, loading used_words again only when the id is past what
 * @p v saw), that 1 <= n <= SLUICE_BLOCK_MAX_INSNS, from <= to <= n, and
 * from < n if it continues (SLUICE_BLOCK_CONT: instruction from's exec event
 * is not delivered again, its records still belong here).
 * @param[out] why on failure, the reason (for the decode error)
 * @return 0, or -1 with @p why filled; nothing outside the table is read.
 */
int block__start(struct block *b, struct block_view *v, uint64_t hdr, char *why, size_t whylen);

/**
 * block__start() for a descriptor @p v has checked already, a plain part
 * (not continued), inline: the common case of a loop. 0, or -1 to call
 * block__start() instead.
 */
static inline int block__restart(struct block *b, const struct block_view *v, uint64_t hdr)
{
    uint64_t id = sluice_block_id(hdr);
    const struct block_seen *seen = &v->seen[id % BLOCK_VIEW_CACHE];
    unsigned from = sluice_block_from(hdr), to = sluice_block_to(hdr);

    if (seen->id1 != id + 1 || from > to || to > seen->n || sluice_block_cont(hdr)) {
        return -1;
    }
    b->pcs = v->bt->data + id + 1;
    b->flags = b->pcs + seen->n;
    b->id = id;
    b->n = seen->n;
    b->recorded = seen->recorded;
    b->from = b->next = from;
    b->end = to;
    b->last = -1;
    return 0;
}

/**
 * The instruction of @p b whose PC is @p pc for a MEM or EXEC record: the
 * last record's if its PC matches, else the first in [next, end) that does.
 * @return its index, or -1 if the record's PC is not in its block.
 */
int block__find(const struct block *b, uint64_t pc);

/** Whether instruction @p i (< n) of @p b is marked recorded. */
static inline int block__recorded(const struct block *b, unsigned i)
{
    return (block__word(b->flags, i / 8) >> (i % 8 * 8) & SLUICE_BLOCK_RECORDED) != 0;
}

/**
 * How many instructions in [@p a, @p e) of @p b are marked recorded
 * (e <= n); word 0's count for the whole descriptor.
 */
unsigned block__count(const struct block *b, unsigned a, unsigned e);

#endif /* SLUICE_BLOCK_H */
