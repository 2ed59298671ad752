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

uint64_t decode_chunk(struct chunk *c, const struct sluice_callbacks *cb,
                      const struct sluice_thread_info *t)
{
    const uint64_t *w = c->words;
    size_t nw = c->len / 8, i = 0;
    size_t isz = cb->item_size;
    uint64_t pc = c->start_pc, records = 0;
    uint64_t scratch[4]; /* item target when item_size is 0: callbacks may still run */

    while (i < nw) {
        uint64_t hdr = le64toh(w[i]);
        unsigned tag = sluice_rec_tag(hdr), len = sluice_rec_words(hdr);
        void *item = isz ? (void *)(c->items + c->n_items * isz) : (void *)scratch;
        int made = 0;

        if (len == 0 || i + len > nw) {
            break;
        }
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
    return records;
}
