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

/** Descriptors a chunk remembers as checked (direct-mapped by a hash of the id). */
#define BLOCK_VIEW_CACHE 1024

/**
 * A checked descriptor: its id + 1 (0: empty), n and recorded count as
 * first loaded, and what its slots were then: how many, their records'
 * words, loads and stores among them, the last one's instruction.
 */
struct block_seen {
    uint64_t id1;
    unsigned n, recorded;
    unsigned n_slots, slot_words, loads, stores, last_slot;
};

/**
 * A chunk's view of a block table, kept from one span to the next while
 * they are of the same table (block__view()). Zero-initialise it; the cache
 * saves re-checking the descriptors a loop names over and over (its copy
 * of n and the slots' sums stay what was checked, so a producer changing
 * the table later changes no bound).
 */
struct block_view {
    const struct block_table *bt; /**< NULL: the ring has no table */
    uint64_t serial;              /**< bt->serial (0: none yet) */
    uint64_t used;                /**< used_words last loaded (0: not yet), <= capacity */
    struct block_seen seen[BLOCK_VIEW_CACHE];
};

/** The cache entry of descriptor @p id in @p v. */
static inline struct block_seen *block__seen(struct block_view *v, uint64_t id)
{
    return &v->seen[(id * 0x9e3779b97f4a7c15ull) >> 54 & (BLOCK_VIEW_CACHE - 1)];
}

/** Make @p v a view of @p bt (NULL: none), forgetting what it saw if it was another table's. */
static inline void block__view(struct block_view *v, const struct block_table *bt)
{
    uint64_t serial = bt ? bt->serial : 0;

    if (v->serial != serial || v->bt != bt) {
        for (unsigned k = 0; k < BLOCK_VIEW_CACHE; k++) {
            v->seen[k].id1 = 0;
        }
        v->bt = bt;
        v->serial = serial;
        v->used = 0;
    }
}

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
    /* A BLOCK_SLOTS record's slot records (n_slots 0 for a BLOCK record). */
    const uint16_t *slots;  /**< the descriptor's slots, in the table */
    unsigned n_slots;       /**< how many follow the record (as checked) */
    unsigned slot;          /**< the next one to decode */
    unsigned loads, stores; /**< loads and stores among them (as checked) */
    unsigned slot_words;    /**< words of their records (as checked) */
    size_t slot_end;        /**< the word after them, in the chunk */
};

/** Word @p i at @p w of a shared area, loaded once. */
static inline uint64_t block__word(const uint64_t *w, size_t i)
{
    return le64toh(__atomic_load_n(&w[i], __ATOMIC_RELAXED));
}

/** Slot @p k at @p s of a shared table, loaded once. */
static inline uint16_t block__slot(const uint16_t *s, unsigned k)
{
    return le16toh(__atomic_load_n(&s[k], __ATOMIC_RELAXED));
}

/* The record-level fields of a block from a checked descriptor @p seen. */
static inline void block__slots_of(struct block *b, const struct block_seen *seen, uint64_t hdr)
{
    if (sluice_rec_tag(hdr) == SLUICE_TAG_BLOCK_SLOTS) {
        b->slots = (const uint16_t *)(b->pcs + seen->n + (seen->n + 7) / 8);
        b->n_slots = seen->n_slots;
        b->loads = seen->loads;
        b->stores = seen->stores;
        b->slot_words = seen->slot_words;
    } else {
        b->n_slots = 0;
    }
    b->slot = 0;
}

/**
 * Start block @p b from the BLOCK or BLOCK_SLOTS header word @p hdr: check that its
 * descriptor is whole in the table (id + sluice_block_words(n) <= used_words
 * <= capacity_words, loading used_words again only when the id is past what
 * @p v saw), that 1 <= n <= SLUICE_BLOCK_MAX_INSNS, from <= to <= n, and
 * from < n if it continues (SLUICE_BLOCK_CONT: instruction from's exec event
 * is not delivered again, its records still belong here); that its slots
 * (at most SLUICE_BLOCK_MAX_SLOTS) name instructions below n, in order,
 * with sizes up to 16; and for BLOCK_SLOTS, that from is 0, it does not
 * continue, and its last slot's instruction is below to. b->slot_end is
 * the caller's to set.
 * @param[out] why on failure, the reason (for the decode error)
 * @return 0, or -1 with @p why filled; nothing outside the table is read.
 */
int block__start(struct block *b, struct block_view *v, uint64_t hdr, char *why, size_t whylen);

/**
 * block__start() for a descriptor @p v has checked already, a plain part
 * (not continued), inline: the common case of a loop. 0, or -1 to call
 * block__start() instead.
 */
static inline int block__restart(struct block *b, struct block_view *v, uint64_t hdr)
{
    uint64_t id = sluice_block_id(hdr);
    const struct block_seen *seen = block__seen(v, id);
    unsigned from = sluice_block_from(hdr), to = sluice_block_to(hdr);

    if (seen->id1 != id + 1 || from > to || to > seen->n || sluice_block_cont(hdr) ||
        (sluice_rec_tag(hdr) == SLUICE_TAG_BLOCK_SLOTS &&
         (from != 0 || (seen->n_slots && seen->last_slot >= to)))) {
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
    block__slots_of(b, seen, hdr);
    return 0;
}

/**
 * The instruction of @p b whose PC is @p pc for a MEM or EXEC record: the
 * last record's if its PC matches, else the first in [next, end) that does.
 * @return its index, or -1 if the record's PC is not in its block.
 */
int block__find(const struct block *b, uint64_t pc);

/**
 * The module log position the descriptor at @p id (one block__start()
 * accepted) was lifted at (record.h, format 8), or 0 if the table does
 * not cover its last word.
 */
uint64_t block__maps_pos(struct block_view *v, uint64_t id);

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
