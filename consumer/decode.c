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
 *
 * BLOCK records (format 4) are expanded here into the exec events of the
 * instructions their descriptor marks recorded, interleaved with the
 * block's MEM and EXEC records in program order (record.h); block.c reads
 * and checks the descriptors. The one allocation: a chunk's item area
 * grows at a BLOCK whose events could overflow it (chunk__reserve()).
 *
 * The item area is bounded (chunk_items_max()), and it always holds the
 * worst case of plain records (one item per word), so only blocks can fill
 * it. The invariant, at each record boundary: the items made, plus one for
 * a pending exec_batch run, plus one per word left in the span, fit in
 * items_cap. Each non-BLOCK record keeps it (it uses at least one word and
 * makes at most one item), so the plain path checks nothing. A BLOCK
 * record checks once whether its instructions' events fit as well (the
 * area grows up to the bound if needed); only a block that may not fit is
 * expanded `careful`ly, checking room before each event it makes (before
 * each run, with exec_batch). When there is none, the decode stops there,
 * between two events, and saves where (c->resume: the record to decode
 * next, the block and its next instruction) with c->partial set; the
 * caller delivers the items and calls again with an empty area. Since the
 * area holds one item per word and a block is entered after its record's
 * word, every slice makes at least one event. A resumed decode loads the
 * header of the record it stopped at again; it is checked as the first
 * time, so a producer changing it meanwhile gives wrong events, never a
 * read outside the span (and the caller's lapped check covers each slice).
 */
#include "decode.h"

#include <endian.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "block.h"
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

/* What the block expansion needs of the decode (decode_chunk's stack). */
struct decoder {
    struct chunk *c;
    const struct sluice_callbacks *cb;
    const struct sluice_thread_info *t;
    uint64_t *scratch;
    struct run *run;
    struct block_view view;
    struct block blk;
    int in_block; /* blk is current */
    int fills;    /* a block's exec events may make items (item_size and exec or exec_batch) */
    int careful;  /* blk's events may fill the item area: room is checked per event */
    size_t i, nw; /* the record at hand and the span's words, for the room check */
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

/* Whether one more item leaves room for the rest of the span (one per word
 * from the record at hand on, and one for a pending run). */
static int room_for_one(const struct decoder *d)
{
    return d->c->n_items + (d->run->n > 0) + (d->nw - d->i) < d->c->items_cap;
}

/* The area is full before instruction @p i of the block: stop there. Returns 1. */
static int block_stop(struct decoder *d, unsigned i)
{
    d->blk.next = i;
    return 1;
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

/* Hand @p n PCs at @p pcs (n <= RUN_MAX) to cb->exec_batch as one run. */
static void batch_call(struct decoder *d, const uint64_t *pcs, size_t n)
{
    const struct sluice_callbacks *cb = d->cb;
    size_t isz = cb->item_size;

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    /* Straight from the shared table (consumer.h says exec_batch may point there). */
    if (cb->exec_batch(cb->user, d->t, pcs, n, next_item(d->c, isz, d->scratch)) && isz) {
        d->c->n_items++;
    }
#else
    for (size_t k = 0; k < n; k++) {
        d->run->pcs[d->run->n++] = block__word(pcs, k);
    }
    run_flush(d->run, d->c, cb, d->t, d->scratch);
#endif
}

/*
 * block_deliver() through exec for a careful block: the same loop, with
 * room checked before each event (a loop of its own, so that blocks that
 * fit pay nothing per event).
 */
static int block_exec_careful(struct decoder *d, unsigned a, unsigned e, uint64_t *events)
{
    const struct sluice_callbacks *cb = d->cb;
    const struct block *b = &d->blk;

    for (unsigned i = a; i < e; i++) {
        if (block__recorded(b, i)) {
            if (!room_for_one(d)) {
                return block_stop(d, i);
            }
            ++*events;
            if (cb->exec(cb->user, d->t, block__word(b->pcs, i),
                         next_item(d->c, cb->item_size, d->scratch))) {
                d->c->n_items++; /* careful implies item_size */
            }
        }
    }
    return 0;
}

/*
 * Deliver the exec events of the instructions in [@p a, @p e) of the
 * current block that its descriptor marks recorded, in order: runs of
 * consecutive ones to exec_batch (after the pending run of EXEC records,
 * which precedes them), else one exec call each, else only counted.
 * Adds how many to @p events. Returns 0; in a careful block, 1 if it
 * stopped (at blk.next) before an event the item area has no room for.
 */
static int block_deliver(struct decoder *d, unsigned a, unsigned e, uint64_t *events)
{
    const struct sluice_callbacks *cb = d->cb;
    const struct block *b = &d->blk;
    size_t isz = cb->item_size;
    uint64_t count = 0;
    unsigned i = a, s;
    /* Word 0 as checked says every instruction is recorded (no filter): no bit to look at. */
    int all = b->recorded == b->n;

    if (a >= e) {
        return 0;
    }
    if (all && cb->exec_batch && !d->careful) {
        run_flush(d->run, d->c, cb, d->t, d->scratch);
        batch_call(d, b->pcs + a, e - a);
        *events += e - a;
        return 0;
    }
    if (all && !cb->exec_batch && !cb->exec) {
        *events += e - a;
        return 0;
    }
    if (cb->exec_batch) {
        while (i < e) {
            while (i < e && !block__recorded(b, i)) {
                i++;
            }
            for (s = i; i < e && block__recorded(b, i); i++) {
            }
            if (i > s) {
                if (count == 0) {
                    run_flush(d->run, d->c, cb, d->t, d->scratch);
                }
                if (d->careful && !room_for_one(d)) {
                    *events += count;
                    return block_stop(d, s);
                }
                batch_call(d, b->pcs + s, i - s);
                count += i - s;
            }
        }
        *events += count;
        return 0;
    }
    if (cb->exec) {
        if (d->careful) {
            return block_exec_careful(d, a, e, events);
        }
        /* Locals: the compiler cannot know the callback leaves cb and c alone. */
        int (*exec)(void *, const struct sluice_thread_info *, uint64_t, void *) = cb->exec;
        void *user = cb->user, *item = next_item(d->c, isz, d->scratch);
        const uint64_t *pcs = b->pcs;
        size_t made = 0;

        for (; i < e; i++) {
            if (all || block__recorded(b, i)) {
                count++;
                if (exec(user, d->t, block__word(pcs, i), item) && isz) {
                    made++;
                    item = (uint8_t *)item + isz;
                }
            }
        }
        d->c->n_items += made;
        *events += count;
        return 0;
    }
    *events += a < e ? block__count(b, a, e) : 0;
    return 0;
}

/*
 * The current block ends at word @p i (a record not of the block, or the
 * span's end): deliver what it has left, adding them to @p events.
 * Returns 0; 1 if the area filled first (the block stays current).
 */
static int block_end(struct decoder *d, size_t i, uint64_t *events)
{
    d->i = i;
    d->in_block = block_deliver(d, d->blk.next, d->blk.end, events);
    return d->in_block;
}

/*
 * The MEM or EXEC (@p is_exec) record at word @p i, of PC @p pc, inside the
 * current block: deliver the recorded instructions before its own, and its
 * own for MEM (an EXEC record is its instruction's exec event itself).
 * Adds the events to @p insns. Returns 0; 1 if the area filled first
 * (the record is decoded again on resume, and finds the same instruction,
 * the first match at or past blk.next); -1 if the PC is not in the block.
 */
static int block_record(struct decoder *d, size_t i, uint64_t pc, int is_exec, uint64_t *insns)
{
    struct block *b = &d->blk;
    int j = block__find(b, pc);

    if (j < 0) {
        return -1;
    }
    if ((unsigned)j >= b->next) {
        d->i = i;
        if (block_deliver(d, b->next, (unsigned)j + !is_exec, insns)) {
            return 1;
        }
        b->next = (unsigned)j + 1;
    }
    b->last = j;
    return 0;
}

/* Stop at the record at word @p i whose PC is not in the current block. */
static void bad_pc(struct decoder *d, size_t i, uint64_t hdr)
{
    const struct block *b = &d->blk;

    bad_record(d->c, i, hdr, CHUNK_BAD_PC);
    snprintf(d->c->bad_why, sizeof(d->c->bad_why),
             "its PC 0x%" PRIx64 " is not in block %" PRIu64 " (instructions %u..%u of %u)",
             sluice_rec_payload(hdr), b->id, b->next, b->end, b->n);
}

/*
 * The BLOCK record @p hdr at word @p i of @p nw: make it the current block,
 * with room for its events in the item area, or, past the area's bound,
 * the whole bound and the block careful. Returns 0, or -1 after marking the
 * chunk bad.
 */
static int block_begin(struct decoder *d, size_t i, size_t nw, uint64_t hdr)
{
    struct chunk *c = d->c;
    size_t need;

    if (block__restart(&d->blk, &d->view, hdr) < 0 &&
        block__start(&d->blk, &d->view, hdr, c->bad_why, sizeof(c->bad_why)) < 0) {
        bad_record(c, i, hdr, CHUNK_BAD_BLOCK);
        return -1;
    }
    d->careful = 0;
    if (d->fills) {
        /* The words left make at most one item each (the pending run one),
         * the block one per instruction. */
        need = c->n_items + (d->run->n > 0) + (nw - i) + (d->blk.end - d->blk.from);
        if (need > c->items_max) {
            need = c->items_max;
            d->careful = 1;
        }
        if (chunk__reserve(c, need) < 0) {
            bad_record(c, i, hdr, CHUNK_BAD_NOMEM);
            return -1;
        }
    }
    d->in_block = 1;
    return 0;
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
    int stopped = 0;     /* 1: the item area filled; -1: a record's PC is not in its block */
    uint64_t scratch[4]; /* item target when item_size is 0: callbacks may still run */
    struct run run;      /* only used with cb->exec_batch */
    struct decoder d;

    run.n = 0;
    d.c = c;
    d.cb = cb;
    d.t = t;
    d.scratch = scratch;
    d.run = &run;
    d.view.bt = c->blocks;
    /* Where a previous slice stopped (all zero for a fresh chunk). */
    i = c->resume.word;
    d.view.used = c->resume.view_used;
    if (c->blocks) {
        memset(d.view.seen, 0, sizeof(d.view.seen)); /* a cache: a slice may start cold */
    }
    d.in_block = c->resume.in_block;
    d.careful = c->resume.careful;
    if (d.in_block) {
        d.blk = c->resume.blk;
    }
    d.fills = isz && (exec || batch);
    d.i = i;
    d.nw = nw;
    c->partial = 0;
    while (i < nw) {
        uint64_t hdr = word(w, i);
        unsigned tag = sluice_rec_tag(hdr), len;
        int made;

        if (tag == SLUICE_TAG_EXEC) {
            uint64_t pc = sluice_rec_payload(hdr);

            if (d.in_block && (stopped = block_record(&d, i, pc, 1, &insns)) != 0) {
                if (stopped < 0) {
                    bad_pc(&d, i, hdr);
                }
                break;
            }
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
            if (d.in_block && (stopped = block_end(&d, i, &insns)) != 0) {
                break; /* the block ended before this record, which is refused on resume */
            }
            bad_record(c, i, hdr, len == 0 ? CHUNK_BAD_HEADER : CHUNK_BAD_CROSSING);
            break;
        }
        if (d.in_block) {
            if (!sluice_tag_is_mem(tag)) {
                if ((stopped = block_end(&d, i, &insns)) != 0) {
                    break;
                }
            } else if ((stopped = block_record(&d, i, sluice_rec_payload(hdr), 0, &insns)) != 0) {
                if (stopped < 0) {
                    bad_pc(&d, i, hdr);
                }
                break;
            }
        }
        if (tag == SLUICE_TAG_PAD) {
            i += len;
            continue;
        }
        if (tag == SLUICE_TAG_BLOCK) {
            if (block_begin(&d, i, nw, hdr) < 0) {
                break;
            }
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
    if (d.in_block && !c->bad && stopped == 0) {
        stopped = block_end(&d, nw, &insns); /* the span's end ends it */
    }
    if (batch) {
        run_flush(&run, c, cb, t, scratch); /* nothing is held outside the items */
    }
    if (stopped <= 0 && cb->chunk_end) {
        if (isz && chunk__reserve(c, c->n_items + 1) < 0) {
            stopped = c->bad ? stopped : 1; /* full: one more slice, for this item alone */
        } else if (cb->chunk_end(cb->user, t, next_item(c, isz, scratch)) && isz) {
            c->n_items++;
        }
    }
    if (stopped > 0) {
        c->partial = 1;
        c->resume.word = i;
        c->resume.view_used = d.view.used;
        c->resume.in_block = d.in_block;
        c->resume.careful = d.careful;
        c->resume.blk = d.blk;
    }
    c->counts.insns += insns;
    return records + insns;
}
