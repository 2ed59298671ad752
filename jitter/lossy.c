/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * lossy.c — what lossy consumers lose, counted exactly (record.h: the
 * tail of struct sluice_ring_tail, lost_events and lost_seq of struct
 * sluice_ring_slot).
 *
 * The producer never waits for a lossy consumer. Before it writes into a
 * chunk of its ring, it takes from every lossy consumer the bytes of the
 * chunk a lap back that the consumer has not taken: it moves the
 * consumer's tail past them with a compare-and-swap and adds the events of
 * their records to the consumer's lost_events. A consumer takes a span by
 * copying it and then moving its tail from the span's start to its end
 * with a compare-and-swap; whoever moves the tail first has the bytes, so
 * each event is either delivered or counted lost, once.
 *
 * Once a ring's thread has ended, a lossy consumer too slow to read it
 * before the bound on held rings (jitter.c) has the rest taken the same
 * way (lossy_take_rest), so its pages can go back without dropping it.
 *
 * Thread: the ring's vCPU, from ring.c on the slow path (once per chunk,
 * and only for slots that are active and lossy), or for an ended ring the
 * thread holding J.lock. Never blocks, never
 * waits for a consumer, never trusts a tail: one that is behind the chunk
 * counts from the chunk's start (the bytes before it were taken earlier),
 * one that is past it has taken it all.
 */
#include "lossy.h"

#include "blocks.h"

/*
 * Events of the records that start in [@p from, @p end), walking from @p pos,
 * the start of their chunk, as a consumer counts them (consumer/decode.c): an
 * EXEC, MEM, SYSCALL or SYSRET record is one; a BLOCK record, the
 * instructions it marks recorded from `from` (or the one after, for a part
 * that continues an instruction) to `to`; a BLOCK_SLOTS record, those and
 * one per slot. The chunk is ours and whole: we wrote it, and do not write
 * it again until this returns (or its thread has ended). A record we cannot
 * read ends the walk.
 */
static uint64_t events_walk(const struct ring *r, uint64_t pos, uint64_t from, uint64_t end)
{
    uint64_t events = 0;

    while (pos < end) {
        const uint64_t *w = (const uint64_t *)(r->data + (pos & (r->size - 1)));
        unsigned tag = sluice_rec_tag(*w), words = sluice_rec_words(*w);
        uint64_t n = 0;

        if (words == 0) {
            break;
        }
        if (tag == SLUICE_TAG_EXEC || sluice_tag_is_mem(tag) || tag == SLUICE_TAG_SYSCALL ||
            tag == SLUICE_TAG_SYSRET) {
            n = 1;
        } else if (sluice_tag_is_block(tag)) {
            uint64_t id = sluice_block_id(*w);
            unsigned from_i = sluice_block_from(*w), slots;
            const uint64_t *pcs;
            const uint16_t *slot = blocks_slots(id, &slots, &pcs);

            n = blocks_recorded(id, from_i + (sluice_block_cont(*w) ? 1 : 0), sluice_block_to(*w));
            if (tag == SLUICE_TAG_BLOCK_SLOTS) {
                n += slots;
                for (unsigned k = 0; k < slots; k++) {
                    words += sluice_slot_record_words(slot[k]);
                }
            }
        }
        if (pos >= from) {
            events += n;
        }
        pos += (uint64_t)words * 8;
    }
    return events;
}

/*
 * Events of the records in [@p from, @p to) of an ended ring, chunk by
 * chunk (each walked from its start: records start there). The chunk that
 * holds @p from is whole: had the producer written a lap past it, it would
 * have taken it from the consumer first (lossy_take), moving its tail past.
 */
static uint64_t events_between(const struct ring *r, uint64_t from, uint64_t to)
{
    uint64_t events = 0;

    for (uint64_t c = from & ~(uint64_t)(SLUICE_CHUNK_BYTES - 1); c < to; c += SLUICE_CHUNK_BYTES) {
        events +=
            events_walk(r, c, from, c + SLUICE_CHUNK_BYTES < to ? c + SLUICE_CHUNK_BYTES : to);
    }
    return events;
}

/* Take from lossy slot @p i what it has not taken of [@p start, @p end). */
static void take_from(struct ring *r, unsigned i, uint64_t start, uint64_t end)
{
    struct sluice_ring_slot *c = &r->hdr->slot[i];
    struct sluice_ring_tail *t = r->tail[i];
    uint64_t tail = __atomic_load_n(&t->tail, __ATOMIC_SEQ_CST);

    while (tail < end) {
        uint64_t lost = events_between(r, tail > start ? tail : start, end);
        uint32_t seq = __atomic_load_n(&c->lost_seq, __ATOMIC_RELAXED);
        int taken;

        __atomic_store_n(&c->lost_seq, seq | 1, __ATOMIC_SEQ_CST); /* odd: changing */
        taken = __atomic_compare_exchange_n(&t->tail, &tail, end, 0, __ATOMIC_SEQ_CST,
                                            __ATOMIC_SEQ_CST);
        if (taken) {
            __atomic_store_n(&c->lost_events, c->lost_events + lost, __ATOMIC_RELAXED);
        }
        /* Even again: pairs with the consumer's acquire loads of lost_seq. */
        __atomic_store_n(&c->lost_seq, (seq | 1) + 1, __ATOMIC_RELEASE);
        if (taken) {
            break;
        }
        /* The consumer moved its tail meanwhile (tail now holds the new value). */
    }
}

void lossy_take(struct ring *r, uint64_t chunk)
{
    uint64_t end;
    unsigned i;

    if (chunk < r->size) {
        return; /* the first lap overwrites nothing */
    }
    end = chunk - r->size + SLUICE_CHUNK_BYTES;
    for (i = 0; i < SLUICE_MAX_CONSUMERS; i++) {
        if (ring_slot_lossy(r, i)) {
            take_from(r, i, end - SLUICE_CHUNK_BYTES, end);
        }
    }
    /* The chunk's bytes are written after every take above (translated
     * code's plain stores follow this call). */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

void lossy_take_rest(struct ring *r, unsigned i)
{
    uint64_t head = __atomic_load_n(&r->hdr->head, __ATOMIC_ACQUIRE);

    if (ring_slot_lossy(r, i)) {
        take_from(r, i, head > r->size ? head - r->size : 0, head);
    }
}
