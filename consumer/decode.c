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
 * and checks the descriptors. A BLOCK_SLOTS record's slot records (format
 * 5: no header, the descriptor says what each is) come first, each a MEM
 * event of its slot's instruction (block_slots()). Consumers that take no
 * record at all (`sluice stats`) get decode_count() instead: a block is
 * counted from its descriptor, its slot records skipped unread. The one
 * allocation: a chunk's item area grows at a BLOCK whose events could
 * overflow it (chunk__reserve()).
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
 * next, the block, its next instruction and slot) with c->partial set; the
 * caller delivers the items and calls again with an empty area. Since the
 * area holds one item per word and a block is entered after its record's
 * word, every slice makes at least one event. A resumed decode loads the
 * header of the record it stopped at again; it is checked as the first
 * time, so a producer changing it meanwhile gives wrong events, never a
 * read outside the span (and the caller's lapped check covers each slice).
 */
#include "decode.h"

#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "block.h"
#include "maps.h"
#include "sluice/record.h"

/* Word @p i of the span, loaded once. */
static inline uint64_t word(const uint64_t *w, size_t i)
{
    return le64toh(__atomic_load_n(&w[i], __ATOMIC_RELAXED));
}

/*
 * How far ahead of the record being decoded its loop prefetches: 2 KiB. The
 * records were just written by QEMU on another core, and each header says
 * where the next one is, so without it the loop waits out one cache miss
 * per record (a block's slots are skipped unread when only counted). On
 * gzip -9 traced in full, --tool stats (decode_count()) took 11-17% less
 * wall time (medians of 8 pairs, farm-bench); 2 KiB ahead beat 256 and 512
 * bytes, 4 and 8 KiB did no better. decode_chunk()'s loop, which reads
 * every word, gained 0-2% (--tool pcsum on gzip; on the nop loop, nothing).
 */
#define PREFETCH_WORDS 256

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
    struct block_view *view; /* the chunk's */
    struct block blk;
    int in_block;    /* blk is current */
    int fills;       /* a block's exec events may make items (item_size and exec or exec_batch) */
    int careful;     /* blk's events may fill the item area: room is checked per event */
    size_t i, nw;    /* the record at hand and the span's words, for the room check */
    uint64_t marked; /* the module log position past this thread's last MAP record, or 0 */
    size_t next_map; /* word of the next MAP record at or past i (nw: none), if next_map_ok */
    int next_map_ok;
};

/* The decode this worker thread runs now, for sluice_map__at(). */
static __thread struct decoder *current;

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
    if ((tag == SLUICE_TAG_SYSCALL || tag == SLUICE_TAG_SYSRET) && cb->syscall) {
        struct sluice_syscall sc = {.nr = (uint32_t)hdr, .returned = tag == SLUICE_TAG_SYSRET};
        unsigned k;

        if (sc.returned) {
            sc.ret = (int64_t)word(w, 1);
        }
        for (k = 0; !sc.returned && k < 6; k++) {
            sc.args[k] = word(w, 1 + k);
        }
        return cb->syscall(cb->user, t, &sc, item);
    }
    return 0; /* PAD */
}

/*
 * The MAP record at word @p i: its log entry's event, unless the
 * process's snapshot holds it. Returns whether the callback made an item;
 * -1 (c->bad set) if the record names no entry.
 */
static int decode_map(struct decoder *d, size_t i, uint64_t hdr, void *item)
{
    struct chunk *c = d->c;
    struct maps *m = c->blocks ? c->blocks->maps : NULL;
    const struct maps_entry *x = m ? maps__entry_at(m, sluice_rec_payload(hdr)) : NULL;
    struct sluice_map ev;

    if (!x) {
        snprintf(c->bad_why, sizeof(c->bad_why), "MAP record: no module log entry at byte %llu%s%s",
                 (unsigned long long)sluice_rec_payload(hdr), m && *maps__bad(m) ? ": " : "",
                 m ? maps__bad(m) : "");
        bad_record(c, i, hdr, CHUNK_BAD_MAP);
        return -1;
    }
    d->marked = x->end;
    if (x->at < (c->snap_own ? c->snap_at : c->blocks->snapshot_at) || !d->cb->mmap) {
        return 0;
    }
    maps__event(x, &ev);
    return d->cb->mmap(d->cb->user, d->t, &ev, item);
}

/* The snapshot's events, into the item area (grown for them), from event `skip` on. */
struct snap {
    struct decoder *d;
    size_t seen, skip;
    int full;
};

static void snapshot_one(void *arg, const struct sluice_map *e)
{
    struct snap *sn = arg;
    struct chunk *c = sn->d->c;
    size_t isz = sn->d->cb->item_size;

    if (sn->full || sn->seen++ < sn->skip) {
        return;
    }
    if (isz && chunk__reserve(c, c->n_items + 1) < 0) {
        sn->full = 1; /* the rest in the next slice */
        sn->seen--;
        return;
    }
    if (sn->d->cb->mmap(sn->d->cb->user, sn->d->t, e, next_item(c, isz, sn->d->scratch)) && isz) {
        c->n_items++;
    }
}

/*
 * Deliver the process's map at its snapshot position, first in the chunk.
 * 0; 1 if the area filled first, or the records then do not fit beside
 * its items (the caller stops: the rest comes in a slice of its own);
 * -1 (c->bad) out of memory.
 */
static int snapshot(struct decoder *d)
{
    struct chunk *c = d->c;
    struct snap sn = {d, 0, c->resume.snap_done, 0};

    if (!d->cb->mmap || !c->blocks || !c->blocks->maps) {
        c->snapshot = 0;
        return 0;
    }
    if (maps__snapshot(c->blocks->maps, c->snap_own ? c->snap_at : c->blocks->snapshot_at,
                       snapshot_one, &sn) < 0) {
        snprintf(c->bad_why, sizeof(c->bad_why), "the module map snapshot: out of memory");
        bad_record(c, 0, 0, CHUNK_BAD_MAP);
        return -1;
    }
    c->resume.snap_done = sn.seen;
    if (sn.full) {
        return 1; /* (a slice made at least one item: it began with an empty area) */
    }
    c->snapshot = 0;
    /* The invariant at a record boundary: one item per word left still fits. */
    return d->cb->item_size && chunk__reserve(c, c->n_items + 1 + d->nw) < 0;
}

/*
 * The map a record outside any block ran in, as far as this chunk tells:
 * the one before this thread's next MAP record in it (the records between
 * ran before that change), else the one when the chunk was read. The scan
 * stops at a BLOCK record (whose slot records have no headers); its result
 * holds until the decode passes that record.
 */
static uint64_t map_before_next_change(struct decoder *d)
{
    const uint64_t *w = d->c->words;
    size_t j = d->i;

    if (!d->next_map_ok || d->next_map < d->i) {
        while (j < d->nw) {
            uint64_t hdr = word(w, j);
            unsigned tag = sluice_rec_tag(hdr), len = sluice_rec_words(hdr);

            if (tag == SLUICE_TAG_MAP || len == 0 || sluice_tag_is_block(tag)) {
                break;
            }
            j += len;
        }
        d->next_map = j < d->nw && sluice_rec_tag(word(w, j)) == SLUICE_TAG_MAP ? j : d->nw;
        d->next_map_ok = 1;
    }
    return d->next_map < d->nw ? sluice_rec_payload(word(w, d->next_map)) : d->c->maps_pos;
}

/*
 * The answers of recent lookups, per worker thread, by table, position and
 * 4 KiB page: mappings change page by page, so an answer holds for the
 * whole page at that position (the offset moves with the address). Most
 * exec events of a block hit it.
 */
struct map_hit {
    uint64_t serial, pos, page, addr; /* serial 0: empty */
    int rc;
    struct sluice_module mod;
    const struct sluice_map_entry *file; /* the entry that mapped it (maps__lookup) */
};
#define MAP_HITS 64
static __thread struct map_hit map_hits[MAP_HITS];

static int lookup(const struct block_table *bt, uint64_t pos, uint64_t addr,
                  struct sluice_module *out, const struct sluice_map_entry **file)
{
    uint64_t page = addr >> 12;
    struct map_hit *h = &map_hits[(page ^ pos * 0x9e3779b97f4a7c15ull >> 58) % MAP_HITS];

    if (h->serial != bt->serial || h->pos != pos || h->page != page) {
        h->rc = maps__lookup(bt->maps, pos, addr, &h->mod, &h->file);
        h->serial = bt->serial;
        h->pos = pos;
        h->page = page;
        h->addr = addr;
    }
    if (h->rc == 0) {
        *out = h->mod;
        if (out->image != SLUICE_MAP_ANON) {
            out->offset += addr - h->addr;
        }
        *file = h->file;
    }
    return h->rc;
}

const struct chunk *decode_current(const struct sluice_thread_info *t)
{
    return current && current->t == t ? current->c : NULL;
}

int decode_map_at(const struct sluice_thread_info *t, uint64_t addr, struct sluice_module *out,
                  const struct sluice_map_entry **file, uint64_t *table)
{
    struct decoder *d = current;
    struct maps *m;
    uint64_t pos;

    if (!d || d->t != t || !out) {
        return -EINVAL;
    }
    m = d->c->blocks ? d->c->blocks->maps : NULL;
    if (!m) {
        return -ENOENT;
    }
    /* A block's PCs: the map it was lifted in, or later (this thread's own changes). */
    pos = d->in_block ? block__maps_pos(d->view, d->blk.id) : 0;
    if (pos == SLUICE_MAPS_UNLOGGED) {
        return -ENOENT; /* lifted after the log filled up: the map it knows is not the map */
    }
    *table = d->c->blocks->serial;
    if (pos && lookup(d->c->blocks, pos > d->marked ? pos : d->marked, addr, out, file) == 0) {
        return 0;
    }
    pos = d->in_block ? d->c->maps_pos : map_before_next_change(d);
    if (maps__full(m) && pos >= maps__used(m)) {
        return -ENOENT; /* (the changes since the log filled up are not in it) */
    }
    return lookup(d->c->blocks, pos, addr, out, file);
}

int sluice_map__at(const struct sluice_thread_info *t, uint64_t addr, struct sluice_module *out)
{
    const struct sluice_map_entry *file;
    uint64_t table;

    return decode_map_at(t, addr, out, &file, &table);
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

/* Stop at slot record @p k at word @p i (slot @p slot as loaded): not its block's. */
static void bad_slot(struct decoder *d, size_t i, unsigned k, uint16_t slot)
{
    const struct block *b = &d->blk;

    bad_record(d->c, i, 0, CHUNK_BAD_BLOCK); /* no header: the word may be past the span */
    snprintf(d->c->bad_why, sizeof(d->c->bad_why),
             "slot %u (0x%04x) of block %" PRIu64 " is not an access of its instructions %u..%u, "
             "in order, within the slot words its descriptor had",
             k, slot, b->id, b->from, b->end);
}

/*
 * The slot records of the current block (a BLOCK_SLOTS record's), from
 * blk.slot at word *@p pi: each is its slot's access, of its slot's
 * instruction, so it is delivered as a MEM record of that PC would be
 * (the exec events before it first). Without read, write or exec
 * callbacks they are only counted, from the descriptor as checked.
 * Moves *@p pi past them; adds to @p insns and @p records. Returns 0; 1
 * if the area filled first (blk.slot and *@p pi say where to go on); -1
 * after marking the chunk bad.
 */
static int block_slots(struct decoder *d, size_t *pi, uint64_t *insns, uint64_t *records)
{
    const struct sluice_callbacks *cb = d->cb;
    struct block *b = &d->blk;
    const uint64_t *w = d->c->words;
    size_t i = *pi, isz = cb->item_size;
    struct sluice_mem m;

    if (!cb->read && !cb->write && !cb->exec && !cb->exec_batch) {
        d->c->counts.loads += b->loads;
        d->c->counts.stores += b->stores;
        *records += b->n_slots - b->slot;
        b->slot = b->n_slots;
        *pi = b->slot_end;
        return 0;
    }
    for (; b->slot < b->n_slots; b->slot++) {
        uint16_t slot = block__slot(b->slots, b->slot);
        unsigned j = sluice_slot_insn(slot), rw = sluice_slot_record_words(slot);
        int made;

        if (j >= b->end || (int)j < b->last || (slot & 7) > 4 || i + rw > b->slot_end) {
            bad_slot(d, i, b->slot, slot);
            *pi = i;
            return -1;
        }
        if (j >= b->next) {
            d->i = i;
            if (block_deliver(d, b->next, j + 1, insns)) {
                *pi = i;
                return 1;
            }
            b->next = j + 1;
        }
        b->last = (int)j;
        if (cb->exec_batch) {
            run_flush(d->run, d->c, cb, d->t, d->scratch); /* the run precedes this access */
        }
        m.size = 1u << (slot & 7);
        m.is_write = (slot & SLUICE_MEM_WRITE) != 0;
        m.pc = block__word(b->pcs, j);
        m.addr = word(w, i);
        m.value = word(w, i + 1) & size_mask(m.size);
        m.value_hi = m.size == 16 ? word(w, i + 2) : 0;
        if (m.is_write) {
            d->c->counts.stores++;
            made = cb->write ? cb->write(cb->user, d->t, &m, next_item(d->c, isz, d->scratch)) : 0;
        } else {
            d->c->counts.loads++;
            made = cb->read ? cb->read(cb->user, d->t, &m, next_item(d->c, isz, d->scratch)) : 0;
        }
        if (made && isz) {
            d->c->n_items++;
        }
        ++*records;
        i += rw;
    }
    *pi = i;
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
 * The BLOCK or BLOCK_SLOTS record @p hdr at word @p i of @p nw: make it the current block,
 * with room for its events in the item area, or, past the area's bound,
 * the whole bound and the block careful. Returns 0, or -1 after marking the
 * chunk bad.
 */
static int block_begin(struct decoder *d, size_t i, size_t nw, uint64_t hdr)
{
    struct chunk *c = d->c;
    size_t need;

    if (block__restart(&d->blk, d->view, hdr) < 0 &&
        block__start(&d->blk, d->view, hdr, c->bad_why, sizeof(c->bad_why)) < 0) {
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
    d->blk.slot_end = i + 1;
    if (d->blk.n_slots) {
        d->blk.slot_end += d->blk.slot_words;
        if (d->blk.slot_end > nw) {
            bad_record(c, i, hdr, CHUNK_BAD_CROSSING);
            return -1;
        }
    }
    d->in_block = 1;
    return 0;
}

/* cb->block for the block just begun (its first instruction ran). */
static int block_entered(struct decoder *d, void *item)
{
    const struct block *b = &d->blk;
    struct sluice_block sb = {.pc = block__word(b->pcs, 0), .n_insns = b->n, .pcs = b->pcs};

    for (unsigned j = 0; j < b->n; j++) {
        sb.bytes += (unsigned)(block__word(b->flags, j / 8) >> (j % 8 * 8)) & 0x7f;
    }
    return d->cb->block(d->cb->user, d->t, &sb, item);
}

/* Whether @p pc is one of instructions [from, end) of @p b, or the one a part continues. */
static int in_block(const struct block *b, uint64_t pc)
{
    if (b->last >= 0 && block__word(b->pcs, (size_t)b->last) == pc) {
        return 1;
    }
    for (unsigned j = b->from; j < b->end; j++) {
        if (block__word(b->pcs, j) == pc) {
            return 1;
        }
    }
    return 0;
}

/* decode_count()'s bad_pc(). */
static void bad_pc_count(struct chunk *c, const struct block *b, size_t i, uint64_t hdr)
{
    bad_record(c, i, hdr, CHUNK_BAD_PC);
    snprintf(c->bad_why, sizeof(c->bad_why),
             "its PC 0x%" PRIx64 " is not in block %" PRIu64 " (instructions %u..%u of %u)",
             sluice_rec_payload(hdr), b->id, b->from, b->end, b->n);
}

/*
 * decode_chunk() for callbacks that take no record (only counts are
 * wanted, as by `sluice stats`): one pass, every bound checked as there,
 * a block's events counted from its descriptor at once. A record inside a
 * block must name one of its instructions, but their order is not checked
 * (nothing is delivered in that order). Never fills an item area, so never
 * partial.
 */
static uint64_t decode_count(struct chunk *c)
{
    const uint64_t *w = c->words;
    size_t nw = c->len / 8, i = 0;
    uint64_t records = 0, insns = 0;
    struct block_view *view = c->view;
    struct block blk; /* the current block's pcs, from and end (pcs NULL: none) */
    /* The last record if it was a whole checked TB without slots, else 0 (no
     * record's header): a TB that loops on itself repeats it word for word. */
    uint64_t again = 0, again_insns = 0;

    blk.pcs = NULL;
    block__view(view, c->blocks);
    while (i < nw) {
        uint64_t hdr;
        unsigned tag, len;

        __builtin_prefetch(w + i + PREFETCH_WORDS);
        hdr = word(w, i);

        if (hdr == again && hdr != 0) {
            insns += again_insns; /* blk is as that record left it */
            i++;
            continue;
        }
        again = 0;
        tag = sluice_rec_tag(hdr);
        if (tag == SLUICE_TAG_EXEC || sluice_tag_is_mem(tag)) {
            if (blk.pcs && !in_block(&blk, sluice_rec_payload(hdr))) {
                bad_pc_count(c, &blk, i, hdr);
                break;
            }
            if (tag == SLUICE_TAG_EXEC) {
                insns++;
                i++;
                continue;
            }
        } else {
            blk.pcs = NULL;
        }
        len = sluice_rec_words(hdr);
        if (len == 0 || len > nw - i) {
            bad_record(c, i, hdr, len == 0 ? CHUNK_BAD_HEADER : CHUNK_BAD_CROSSING);
            break;
        }
        if (sluice_tag_is_mem(tag)) {
            if (tag & SLUICE_MEM_WRITE) {
                c->counts.stores++;
            } else {
                c->counts.loads++;
            }
        } else if (sluice_tag_is_block(tag)) {
            uint64_t id = sluice_block_id(hdr);
            const struct block_seen *seen = block__seen(view, id);
            unsigned from = sluice_block_from(hdr), to = sluice_block_to(hdr);
            size_t end = i + 1;

            /* A whole TB whose descriptor was checked: the common case, from the cache. */
            if (seen->id1 == id + 1 && from == 0 && to == seen->n && !sluice_block_cont(hdr)) {
                blk.pcs = view->bt->data + id + 1;
                blk.id = id;
                blk.n = seen->n;
                blk.from = 0;
                blk.end = to;
                blk.last = -1;
                insns += seen->recorded;
                if (tag == SLUICE_TAG_BLOCK_SLOTS) {
                    end += seen->slot_words;
                    c->counts.loads += seen->loads;
                    c->counts.stores += seen->stores;
                    records += seen->n_slots;
                } else {
                    again = hdr;
                    again_insns = seen->recorded;
                }
            } else if (block__start(&blk, view, hdr, c->bad_why, sizeof(c->bad_why)) < 0) {
                bad_record(c, i, hdr, CHUNK_BAD_BLOCK);
                break;
            } else {
                insns += blk.next < blk.end ? block__count(&blk, blk.next, blk.end) : 0;
                if (blk.n_slots) {
                    end += blk.slot_words;
                    c->counts.loads += blk.loads;
                    c->counts.stores += blk.stores;
                    records += blk.n_slots;
                }
            }
            if (end > nw) {
                bad_record(c, i, hdr, CHUNK_BAD_CROSSING);
                break;
            }
            i = end;
            continue;
        } else if (tag == SLUICE_TAG_LOST) {
            c->counts.lost += sluice_rec_payload(hdr);
        } else if (tag == SLUICE_TAG_PAD || tag == SLUICE_TAG_MAP) {
            i += len; /* a MAP record is no event */
            continue;
        }
        records++;
        i += len;
    }
    c->partial = 0;
    c->counts.insns += insns;
    return records + insns;
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

    if (!cb->exec && !cb->exec_batch && !cb->read && !cb->write && !cb->lost && !cb->message &&
        !cb->chunk_end && !cb->mmap && !cb->block) {
        return decode_count(c);
    }
    run.n = 0;
    d.c = c;
    d.cb = cb;
    d.t = t;
    d.scratch = scratch;
    d.run = &run;
    /* Where a previous slice stopped (all zero for a fresh chunk). */
    i = c->resume.word;
    d.view = c->view;
    block__view(d.view, c->blocks);
    d.in_block = c->resume.in_block;
    d.careful = c->resume.careful;
    if (d.in_block) {
        d.blk = c->resume.blk;
    }
    d.fills = isz && (exec || batch);
    d.i = i;
    d.nw = nw;
    d.marked = c->resume.marked;
    d.next_map_ok = 0;
    c->partial = 0;
    current = &d;
    if (c->snapshot && (stopped = snapshot(&d)) != 0) {
        current = NULL;
        c->partial = stopped > 0; /* resume is the chunk's start (and snap_done) */
        return 0;
    }
    if (d.in_block && d.blk.slot < d.blk.n_slots) {
        stopped = block_slots(&d, &i, &insns, &records); /* a slice stopped among them */
    }
    while (i < nw && stopped == 0) {
        uint64_t hdr;
        unsigned tag, len;
        int made;

        __builtin_prefetch(w + i + PREFETCH_WORDS);
        hdr = word(w, i);
        tag = sluice_rec_tag(hdr);

        if (tag == SLUICE_TAG_EXEC) {
            uint64_t pc = sluice_rec_payload(hdr);

            if (d.in_block && (stopped = block_record(&d, i, pc, 1, &insns)) != 0) {
                if (stopped < 0) {
                    bad_pc(&d, i, hdr);
                }
                break;
            }
            insns++;
            d.i = i++; /* (for sluice_map__at) */
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
        if (sluice_tag_is_block(tag)) {
            if (block_begin(&d, i, nw, hdr) < 0) {
                break;
            }
            if (cb->block && d.blk.from == 0 && !sluice_block_cont(hdr) &&
                block_entered(&d, next_item(c, isz, scratch)) && isz) {
                c->n_items++; /* (one item for the record's own word) */
            }
            i += len;
            if (d.blk.n_slots && (stopped = block_slots(&d, &i, &insns, &records)) != 0) {
                break;
            }
            continue;
        }
        if (batch) {
            run_flush(&run, c, cb, t, scratch); /* the run precedes this record */
        }
        if (tag == SLUICE_TAG_MAP) {
            d.i = i;
            if ((made = decode_map(&d, i, hdr, next_item(c, isz, scratch))) < 0) {
                break;
            }
        } else {
            d.i = i;
            made = decode_other(c, cb, t, &w[i], hdr, next_item(c, isz, scratch));
            records++; /* a MAP record is no event */
        }
        if (made && isz) {
            c->n_items++;
        }
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
        c->resume.in_block = d.in_block;
        c->resume.careful = d.careful;
        c->resume.blk = d.blk;
        c->resume.marked = d.marked;
    }
    current = NULL;
    c->counts.insns += insns;
    return records + insns;
}
