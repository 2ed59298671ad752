/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * decode.c — record decoding, on worker threads (see decode.h).
 *
 * This is the hot loop of the consumer: one pass over the words, no
 * allocation, no locks. Callbacks that are NULL cost one branch. Counting
 * never depends on callbacks, so `sluice stats` needs none.
 */
#include "decode.h"

#include <endian.h>

#include "sluice/record.h"

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

uint64_t decode_chunk(struct chunk *c, const struct sluice_callbacks *cb,
                      const struct sluice_thread_info *t)
{
    const uint64_t *w = c->words;
    size_t nw = c->len / 8, i = 0;
    size_t isz = cb->item_size;
    uint64_t pc = c->start_pc, records = 0;
    uint64_t scratch[4]; /* item target when item_size is 0: callbacks may still run */
    struct run run;      /* only used with cb->exec_batch */

    run.n = 0;
    while (i < nw) {
        uint64_t hdr = le64toh(w[i]);
        unsigned tag = sluice_rec_tag(hdr), len = sluice_rec_words(hdr);
        void *item;
        int made = 0;

        if (len == 0 || i + len > nw) {
            break;
        }
        if (tag == SLUICE_TAG_EXEC && cb->exec_batch) {
            pc = sluice_rec_payload(hdr);
            c->counts.insns++;
            run.pcs[run.n++] = pc;
            if (run.n == RUN_MAX) {
                run_flush(&run, c, cb, t, scratch);
            }
            records++;
            i += len;
            continue;
        }
        if (cb->exec_batch && tag != SLUICE_TAG_PAD) {
            run_flush(&run, c, cb, t, scratch); /* the run precedes this record */
        }
        item = next_item(c, isz, scratch);
        if (tag == SLUICE_TAG_EXEC) {
            pc = sluice_rec_payload(hdr);
            c->counts.insns++;
            made = cb->exec ? cb->exec(cb->user, t, pc, item) : 0;
        } else if (sluice_tag_is_mem(tag)) {
            struct sluice_mem m;

            m.size = 1u << (tag & 7);
            m.is_write = (tag & SLUICE_MEM_WRITE) != 0;
            m.pc = sluice_rec_payload(hdr) ? sluice_rec_payload(hdr) : pc;
            m.addr = le64toh(w[i + 1]);
            m.value = le64toh(w[i + 2]) & size_mask(m.size);
            m.value_hi = m.size == 16 ? le64toh(w[i + 3]) : 0;
            if (m.is_write) {
                c->counts.stores++;
                made = cb->write ? cb->write(cb->user, t, &m, item) : 0;
            } else {
                c->counts.loads++;
                made = cb->read ? cb->read(cb->user, t, &m, item) : 0;
            }
        } else if (tag == SLUICE_TAG_TEXT) {
            made = cb->message ? cb->message(cb->user, t, (const char *)&w[i + 1],
                                             (size_t)sluice_rec_payload(hdr), item)
                               : 0;
        } else if (tag == SLUICE_TAG_LOST) {
            c->counts.lost += sluice_rec_payload(hdr);
            made = cb->lost ? cb->lost(cb->user, t, sluice_rec_payload(hdr), item) : 0;
        }
        if (made && isz) {
            c->n_items++;
        }
        records += tag != SLUICE_TAG_PAD;
        i += len;
    }
    if (cb->exec_batch) {
        run_flush(&run, c, cb, t, scratch);
    }
    return records;
}
