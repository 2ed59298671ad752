/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * decode.c — record decoding, on worker threads (see decode.h).
 *
 * This is the hot loop of the consumer: one pass over the words, in place
 * in the ring, no allocation, no locks. Callbacks that are NULL cost one
 * branch. Counting never depends on callbacks, so `sluice stats` needs none.
 *
 * The words are shared with a producer that may be buggy or hostile and
 * may even be writing them: each word is loaded once (a relaxed atomic
 * load, so the compiler cannot load it twice), a record's length comes
 * from its header as loaded, and a record that does not end inside the
 * span is an error, never a read past it.
 */
#include "decode.h"

#include <endian.h>

#include "sluice/record.h"

/* Word @p i of the span, loaded once. */
static inline uint64_t word(const uint64_t *w, size_t i)
{
    return le64toh(__atomic_load_n(&w[i], __ATOMIC_RELAXED));
}

/* Value mask for an access of @p size bytes (1..8). */
static uint64_t size_mask(unsigned size)
{
    return size >= 8 ? ~0ull : (1ull << (size * 8)) - 1;
}

/* PCs an exec_batch run holds at most (consumer.h promises 1024). */
#define RUN_MAX 1024

/* A run of EXEC PCs waiting for cb->exec_batch. */
struct run {
    size_t n;
    uint64_t pcs[RUN_MAX];
};

/* Where the next item goes; @p scratch when the callbacks make no items. */
static void *next_item(struct chunk *c, size_t isz, uint64_t *scratch)
{
    return isz ? (void *)(c->items + c->n_items * isz) : (void *)scratch;
}

/* Hand the pending run (if any) to cb->exec_batch. */
static void run_flush(struct run *r, struct chunk *c, const struct sluice_callbacks *cb,
                      const struct sluice_thread_info *t, uint64_t *scratch)
{
    size_t isz = cb->item_size;

    if (r->n == 0) {
        return;
    }
    if (cb->exec_batch(cb->user, t, r->pcs, r->n, next_item(c, isz, scratch)) && isz) {
        c->n_items++;
    }
    r->n = 0;
}

/* Stop at the record at word @p i: invalid, or not ending inside the span. */
static void bad_record(struct chunk *c, size_t i, uint64_t hdr, int why)
{
    c->bad = why;
    c->bad_at = c->at + (uint64_t)i * 8;
    c->bad_hdr = hdr;
}

/* The MEM record at @p w (header @p hdr, tag @p tag) as the consumer sees it. */
static void mem_of(const uint64_t *w, uint64_t hdr, unsigned tag, struct sluice_mem *m)
{
    m->size = 1u << (tag & 7);
    m->is_write = (tag & SLUICE_MEM_WRITE) != 0;
    m->pc = sluice_rec_payload(hdr);
    m->addr = word(w, 1);
    m->value = word(w, 2) & size_mask(m->size);
    m->value_hi = m->size == 16 ? word(w, 3) : 0;
}

/* A record other than EXEC; returns whether the callback made an item. */
static int decode_other(struct chunk *c, const struct sluice_callbacks *cb,
                        const struct sluice_thread_info *t, const uint64_t *w, uint64_t hdr,
                        void *item)
{
    unsigned tag = sluice_rec_tag(hdr);
    struct sluice_mem m;

    if (sluice_tag_is_mem(tag)) {
        mem_of(w, hdr, tag, &m);
        if (m.is_write) {
            c->counts.stores++;
            return cb->write ? cb->write(cb->user, t, &m, item) : 0;
        }
        c->counts.loads++;
        return cb->read ? cb->read(cb->user, t, &m, item) : 0;
    }
    if (tag == SLUICE_TAG_TEXT) {
        /* The message stays in the ring; it is the callback's only for the call. */
        return cb->message ? cb->message(cb->user, t, (const char *)&w[1],
                                         (size_t)sluice_rec_payload(hdr), item)
                           : 0;
    }
    if (tag == SLUICE_TAG_LOST) {
        c->counts.lost += sluice_rec_payload(hdr);
        return cb->lost ? cb->lost(cb->user, t, sluice_rec_payload(hdr), item) : 0;
    }
    return 0; /* PAD */
}

uint64_t decode_chunk(struct chunk *c, const struct sluice_callbacks *cb,
                      const struct sluice_thread_info *t)
{
    const uint64_t *w = c->words;
    size_t nw = c->len / 8, i = 0;
    size_t isz = cb->item_size;
    /* Locals, not loads through cb and stores to c->counts per record: the
     * compiler cannot know callbacks leave those alone. */
    int (*exec)(void *, const struct sluice_thread_info *, uint64_t, void *) = cb->exec;
    int batch = cb->exec_batch != NULL;
    uint64_t records = 0, insns = 0;
    uint64_t scratch[4]; /* item target when item_size is 0: callbacks may still run */
    struct run run;      /* only used with cb->exec_batch */

    run.n = 0;
    while (i < nw) {
        uint64_t hdr = word(w, i);
        unsigned tag = sluice_rec_tag(hdr), len;
        int made;

        if (tag == SLUICE_TAG_EXEC) {
            uint64_t pc = sluice_rec_payload(hdr);

            insns++;
            i++;
            if (batch) {
                run.pcs[run.n++] = pc;
                if (run.n == RUN_MAX) {
                    run_flush(&run, c, cb, t, scratch);
                }
            } else if (exec && exec(cb->user, t, pc, next_item(c, isz, scratch)) && isz) {
                c->n_items++;
            }
            continue;
        }
        len = sluice_rec_words(hdr);
        if (len == 0 || len > nw - i) {
            bad_record(c, i, hdr, len == 0 ? CHUNK_BAD_HEADER : CHUNK_BAD_CROSSING);
            break;
        }
        if (tag == SLUICE_TAG_PAD) {
            i += len;
            continue;
        }
        if (batch) {
            run_flush(&run, c, cb, t, scratch); /* the run precedes this record */
        }
        made = decode_other(c, cb, t, &w[i], hdr, next_item(c, isz, scratch));
        if (made && isz) {
            c->n_items++;
        }
        records++;
        i += len;
    }
    if (batch) {
        run_flush(&run, c, cb, t, scratch);
    }
    c->counts.insns += insns;
    return records + insns;
}
