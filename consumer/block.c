/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * block.c — reading block descriptors during a decode (see block.h).
 *
 * Runs on worker threads, inside decode_chunk(); no allocation, no locks,
 * no callbacks. The table is shared with a producer that may be buggy or
 * hostile and still appending: every word is loaded once (a relaxed
 * atomic), n is loaded once and every later index is checked against that
 * copy, and a descriptor is only read once used_words (acquire) covers it
 * and the capacity bounds used_words. So a descriptor whose words change
 * under us gives wrong PCs or counts, never a read outside
 * [data, data + capacity_words).
 */
#include "block.h"

#include <inttypes.h>
#include <stdio.h>

/* Whether the table's first @p end words hold whole descriptors, loading
 * used_words again if @p v has not seen that far. -1: used_words is past
 * the capacity (the view is then unusable). */
static int covered(struct block_view *v, uint64_t end)
{
    uint64_t used;

    if (end <= v->used) {
        return 1;
    }
    used = block_table__used(v->bt);
    if (used > v->bt->capacity_words) {
        return -1;
    }
    v->used = used;
    return end <= used;
}

/*
 * Check the @p n_slots slots of the descriptor at @p id (n instructions)
 * into @p seen, loading each once. 0, or -1 with @p why filled.
 */
static int check_slots(const struct block_view *v, uint64_t id, unsigned n, unsigned n_slots,
                       struct block_seen *seen, char *why, size_t whylen)
{
    const uint16_t *s = (const uint16_t *)(v->bt->data + id + sluice_block_words(n));
    unsigned k, prev = 0;

    seen->n_slots = n_slots;
    seen->slot_words = seen->loads = seen->stores = seen->last_slot = 0;
    for (k = 0; k < n_slots; k++) {
        uint16_t slot = block__slot(s, k);
        unsigned insn = sluice_slot_insn(slot);

        if (insn >= n || insn < prev || (slot & 7) > 4) {
            snprintf(why, whylen,
                     "its descriptor's slot %u (0x%04x) is not an access of one of "
                     "its %u instructions, in order",
                     k, slot, n);
            return -1;
        }
        prev = insn;
        seen->slot_words += sluice_slot_record_words(slot);
        if (slot & SLUICE_MEM_WRITE) {
            seen->stores++;
        } else {
            seen->loads++;
        }
        seen->last_slot = insn;
    }
    return 0;
}

int block__start(struct block *b, struct block_view *v, uint64_t hdr, char *why, size_t whylen)
{
    uint64_t id = sluice_block_id(hdr), w0;
    unsigned from = sluice_block_from(hdr), to = sluice_block_to(hdr), n, n_slots;
    struct block_seen *seen, fresh;
    int ok;

    if (!v->bt) {
        snprintf(why, whylen, "the ring has no block table");
        return -1;
    }
    seen = block__seen(v, id);
    if (seen->id1 == id + 1) {
        goto checked;
    }
    ok = covered(v, id + 1);
    if (ok <= 0) {
        goto not_covered;
    }
    w0 = block__word(v->bt->data, (size_t)id);
    n = (unsigned)(w0 & 0xffff);
    n_slots = (unsigned)(w0 >> 32 & 0xffff);
    if (n == 0 || n > SLUICE_BLOCK_MAX_INSNS || n_slots > SLUICE_BLOCK_MAX_SLOTS) {
        snprintf(why, whylen,
                 "its descriptor has %u instructions (1 to %u) and %u slots (at most %u)", n,
                 SLUICE_BLOCK_MAX_INSNS, n_slots, SLUICE_BLOCK_MAX_SLOTS);
        return -1;
    }
    ok = covered(v, id + sluice_block_words(n) + (n_slots + 3) / 4);
    if (ok <= 0) {
        goto not_covered;
    }
    fresh.id1 = id + 1;
    fresh.n = n;
    fresh.recorded = (unsigned)(w0 >> 16 & 0xffff) > n ? n : (unsigned)(w0 >> 16 & 0xffff);
    if (check_slots(v, id, n, n_slots, &fresh, why, whylen) < 0) {
        return -1;
    }
    *seen = fresh;
checked:
    n = seen->n;
    if (from > to || to > n) {
        snprintf(why, whylen, "instructions %u..%u of a descriptor of %u", from, to, n);
        return -1;
    }
    if (sluice_block_cont(hdr) && from >= n) {
        snprintf(why, whylen, "it continues instruction %u of a descriptor of %u", from, n);
        return -1;
    }
    if (sluice_rec_tag(hdr) == SLUICE_TAG_BLOCK_SLOTS &&
        (from != 0 || sluice_block_cont(hdr) || (seen->n_slots && seen->last_slot >= to))) {
        snprintf(why, whylen,
                 "its slots (the last in instruction %u) are not all in its "
                 "instructions %u..%u%s",
                 seen->last_slot, from, to, sluice_block_cont(hdr) ? ", a continued part" : "");
        return -1;
    }
    b->pcs = v->bt->data + id + 1;
    b->flags = b->pcs + n;
    b->id = id;
    b->n = n;
    b->recorded = seen->recorded;
    b->from = from;
    b->end = to;
    /* A part that continues an instruction cut at a chunk boundary: its
     * exec event came with the part before; its records still may follow. */
    b->next = sluice_block_cont(hdr) ? from + 1 : from;
    b->last = sluice_block_cont(hdr) ? (int)from : -1;
    block__slots_of(b, seen, hdr);
    return 0;

not_covered:
    if (ok < 0) {
        snprintf(why, whylen, "the table's used_words is past its capacity_words %" PRIu64,
                 v->bt->capacity_words);
    } else {
        snprintf(why, whylen, "its descriptor is not whole in the table's %" PRIu64 " used words",
                 v->used);
    }
    return -1;
}

int block__find(const struct block *b, uint64_t pc)
{
    unsigned j;

    if (b->last >= 0 && block__word(b->pcs, (size_t)b->last) == pc) {
        return b->last;
    }
    for (j = b->next; j < b->end; j++) {
        if (block__word(b->pcs, j) == pc) {
            return (int)j;
        }
    }
    return -1;
}

unsigned block__count(const struct block *b, unsigned a, unsigned e)
{
    const uint64_t marks = 0x8080808080808080ull;
    unsigned count = 0;

    if (a == 0 && e == b->n) {
        return b->recorded;
    }
    while (a < e) {
        unsigned g = a / 8, lo = a % 8, hi = e - g * 8 < 8 ? e - g * 8 : 8;
        uint64_t m = marks & (hi == 8 ? ~0ull : (1ull << (hi * 8)) - 1) & ~((1ull << (lo * 8)) - 1);

        count += (unsigned)__builtin_popcountll(block__word(b->flags, g) & m);
        a = g * 8 + hi;
    }
    return count;
}

uint64_t block__maps_pos(struct block_view *v, uint64_t id)
{
    uint64_t end;

    if (covered(v, id + 1) <= 0) {
        return 0;
    }
    end = id + sluice_block_desc_words(block__word(v->bt->data, (size_t)id));
    return covered(v, end) > 0 ? block__word(v->bt->data, (size_t)(end - 1)) : 0;
}
