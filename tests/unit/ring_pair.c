/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ring_pair.c — the real producer (jitter/ring.c) against the consumer's
 * reader (consumer/ring_reader.c): a producer thread writes records through
 * the vCPU slot exactly as translated code does (reserve, write at cursor,
 * publish), the reader gets every one back, in order, through many
 * wrap-arounds of a lossless ring, in spans that end on record boundaries
 * (the producer pads up to each chunk boundary).
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "arena.h"
#include "ring.h"
#include "ring_reader.h"
#include "tails.h"

#define RING_SIZE (4u * SLUICE_RESERVE_MAX)
#define RECORDS 2000000ull

struct pair {
    struct sluice_thread_slot slot;
    struct ring *ring;
};

/* A new line of slot 0's tail file (jitter/tails.c), as the control thread takes one per ring. */
static struct sluice_ring_tail *tail_line(void)
{
    static int made;
    struct sluice_ring_tail *t = NULL;

    if (!made) {
        cr_assert_eq(tails_init(), 0);
        cr_assert_eq(tails_new(0), 0);
        made = 1;
    }
    cr_assert_geq(tails_line(0, &t), 0);
    return t;
}

/* Open @p r on @p ring with slot 0's words: its line if the slot is open, else a new one. */
static int open_reader(struct ring_reader *r, struct ring *ring)
{
    return ring_reader__open(r, arena_fd(), ring->offset, 0,
                             ring->tail[0] ? ring->tail[0] : tail_line());
}

static uint64_t pc_of(uint64_t i)
{
    return 0x400000 + i * 2;
}

/* Record i: an EXEC; every 4th a 8-byte store (3 words); of every 16, one
 * SYSCALL (7 words) and one SYSRET (2 words), each one event as well. */
static unsigned gen(uint64_t i, uint64_t *w)
{
    if (i % 16 == 5) {
        w[0] = (uint64_t)SLUICE_TAG_SYSCALL << SLUICE_TAG_SHIFT | 39;
        for (unsigned k = 1; k < 7; k++) {
            w[k] = i + k;
        }
        return 7;
    }
    if (i % 16 == 6) {
        w[0] = (uint64_t)SLUICE_TAG_SYSRET << SLUICE_TAG_SHIFT | 39;
        w[1] = i;
        return 2;
    }
    if (i % 4 == 3) {
        w[0] = sluice_mem_hdr(pc_of(i), 3, 1);
        w[1] = 0x7000 + i;
        w[2] = i * 3;
        return 3;
    }
    w[0] = sluice_exec_hdr(pc_of(i));
    return 1;
}

static void *produce(void *arg)
{
    struct pair *p = arg;
    uint64_t i;

    for (i = 0; i < RECORDS; i++) {
        uint64_t w[8];
        unsigned n = gen(i, w);

        /* Translated code checks capacity once per TB: 64 bytes per record here. */
        if ((uint8_t *)p->slot.limit - (uint8_t *)p->slot.cursor < 64) {
            ring_reserve(p->ring, 64);
        }
        memcpy(p->slot.cursor, w, n * 8);
        p->slot.cursor += n;
        if (i % 4096 == 0) {
            ring_publish(p->ring);
        }
    }
    ring_close(p->ring);
    return NULL;
}

/* Check the span @p w of @p words against gen() from record @p next on. */
static uint64_t check_span(const uint64_t *w, size_t words, uint64_t next)
{
    size_t k = 0;

    while (k < words) {
        uint64_t want[8];
        unsigned len;

        if (sluice_rec_tag(w[k]) == SLUICE_TAG_PAD) {
            cr_assert_gt(sluice_rec_words(w[k]), 0);
            k += sluice_rec_words(w[k]);
            continue;
        }
        len = gen(next, want);
        cr_assert_leq(k + len, words, "record %llu crosses its span's end",
                      (unsigned long long)next);
        cr_assert_eq(memcmp(&w[k], want, len * 8), 0, "record %llu", (unsigned long long)next);
        k += len;
        next++;
    }
    cr_assert_eq(k, words, "a PAD crosses its span's end");
    return next;
}

Test(ring_pair, jitter_ring_to_reader_in_order, .timeout = 120)
{
    struct pair p = {0};
    struct ring_reader r;
    uint64_t next = 0, at;
    const uint64_t *w;
    pthread_t th;

    cr_assert_eq(arena_open(), 0);
    p.ring = ring_create(RING_SIZE, 1, 2, 0, "x86_64", "pair", 0, &p.slot);
    cr_assert_not_null(p.ring);
    /* What the jitter's control thread does when a lossless consumer attaches. */
    ring_slot_open(p.ring, 0, 1, tail_line());
    cr_assert_eq(open_reader(&r, p.ring), 0, "%s", r.err);
    cr_assert_eq(pthread_create(&th, NULL, produce, &p), 0);
    for (;;) {
        ssize_t n = ring_reader__take(&r, &w, &at);

        cr_assert_geq(n, 0, "%s", r.err);
        if (n > 0) {
            cr_assert_leq(n, SLUICE_CHUNK_BYTES);
            next = check_span(w, (size_t)n / 8, next);
            ring_reader__release(&r, at + (uint64_t)n);
            continue;
        }
        if (ring_reader__closed(&r) && ring_reader__avail(&r) == 0) {
            break;
        }
        ring_reader__wait(&r, 50);
    }
    pthread_join(th, NULL);
    cr_assert_eq(next, RECORDS);
    cr_assert_eq(r.hdr->lost, 0);
    ring_reader__close(&r);
    ring_destroy(p.ring, 1);
    arena_forget();
}

/*
 * A lossy consumer (jitter/lossy.c) that falls behind: the producer never
 * waits, and takes from it what it overwrites, counting its events. The
 * consumer copies each span and then takes it (ring_reader__claim), as
 * libsluice does. Every record it gets must be the next one the producer
 * wrote after the ones it was told it lost: records got plus records lost
 * (an EXEC, MEM, SYSCALL or SYSRET record is one event, as libsluice counts
 * them) equal records written, in order.
 */
Test(ring_pair, lossy_consumer_gets_or_is_told_of_every_record, .timeout = 120)
{
    static uint64_t copy[SLUICE_CHUNK_BYTES / 8];
    struct pair p = {0};
    struct ring_reader r;
    uint64_t next = 0, seen = 0, lost_total = 0, at, tail, lost, spans = 0, lapped = 0;
    const uint64_t *w;
    pthread_t th;

    cr_assert_eq(arena_open(), 0);
    p.ring = ring_create(RING_SIZE, 1, 2, 0, "x86_64", "pair", 0, &p.slot);
    cr_assert_not_null(p.ring);
    ring_slot_open(p.ring, 0, 0, tail_line()); /* lossy */
    cr_assert_eq(open_reader(&r, p.ring), 0, "%s", r.err);
    cr_assert_eq(pthread_create(&th, NULL, produce, &p), 0);
    for (;;) {
        ssize_t n;

        cr_assert_eq(ring_reader__lost(&r, &tail, &lost), 0, "%s", r.err);
        if (tail > r.pos) {
            r.pos = tail; /* the producer took what lay before */
        }
        n = ring_reader__take(&r, &w, &at);
        if (n < 0) {
            /* Lapped between the two loads: look again; a ring that stays
             * lapped was overwritten without its bytes taken from us. */
            cr_assert_lt(++lapped, 1000000, "%s, and the producer took nothing", r.err);
            continue;
        }
        lapped = 0;
        if (n > 0) {
            memcpy(copy, w, (size_t)n);
            if (!ring_reader__claim(&r, at, at + (uint64_t)n)) {
                r.pos = at;
                continue;
            }
            next += lost - seen; /* lost before this span */
            lost_total += lost - seen;
            seen = lost;
            next = check_span(copy, (size_t)n / 8, next);
            if (++spans % 8 == 0) {
                usleep(2000); /* fall behind now and then */
            }
            continue;
        }
        if (ring_reader__closed(&r) && ring_reader__avail(&r) == 0) {
            break;
        }
        ring_reader__wait(&r, 50);
    }
    pthread_join(th, NULL);
    cr_assert_eq(ring_reader__lost(&r, &tail, &lost), 0);
    next += lost - seen;
    lost_total += lost - seen;
    cr_assert_eq(next, RECORDS, "got or lost %llu records of %llu", (unsigned long long)next,
                 RECORDS);
    cr_assert_gt(lost_total, 0, "the consumer never fell behind: nothing tested");
    cr_assert_lt(lost_total, RECORDS);
    ring_reader__close(&r);
    ring_destroy(p.ring, 1);
    arena_forget();
}

/*
 * Whatever a consumer writes into the shared header (here: a free slot
 * marked active and lossless, with its tail at 0, as any holder of the
 * arena could), the producer waits only for the slots the jitter opened:
 * with none open, it writes lap after lap and never blocks.
 */
Test(ring_pair, a_ghost_slot_in_the_header_never_stalls_the_producer, .timeout = 60)
{
    struct pair p = {0};

    cr_assert_eq(arena_open(), 0);
    p.ring = ring_create(RING_SIZE, 1, 2, 0, "x86_64", "pair", 0, &p.slot);
    cr_assert_not_null(p.ring);
    p.ring->hdr->slot[3].lossless = 1;
    __atomic_store_n(&p.ring->hdr->slot[3].active, 1, __ATOMIC_RELEASE);
    produce(&p); /* RECORDS records: many laps of the ring */
    cr_assert_gt(p.ring->hdr->head, 8 * (uint64_t)RING_SIZE);
    ring_destroy(p.ring, 1);
    arena_forget();
}

/*
 * A lossless consumer that gives up a ring it was given (it could not map it
 * or start its reader: ring_reader__give_up) after taking part of it: the
 * producer closes its slot there at its next wait and writes on, many laps,
 * instead of waiting for it forever (a guest thread hung so). Before the
 * give-up, the slot held the producer back: it was lossless.
 */
Test(ring_pair, a_consumer_that_gives_up_a_ring_never_stalls_the_producer, .timeout = 60)
{
    struct pair p = {0};
    struct sluice_ring_tail *t = tail_line();
    pthread_t th;

    cr_assert_eq(arena_open(), 0);
    p.ring = ring_create(RING_SIZE, 1, 2, 0, "x86_64", "pair", 0, &p.slot);
    cr_assert_not_null(p.ring);
    ring_slot_open(p.ring, 0, 1, t);
    cr_assert_eq(pthread_create(&th, NULL, produce, &p), 0);
    /* The producer fills the ring and waits for us (we read nothing). */
    for (int k = 0;
         k < 500 && !__atomic_load_n(&p.ring->hdr->slot[0].producer_waiting, __ATOMIC_ACQUIRE);
         k++) {
        usleep(2000);
    }
    cr_assert_leq(p.ring->hdr->head, (uint64_t)RING_SIZE, "it waited for the lossless slot");
    ring_reader__give_up(t);
    pthread_join(th, NULL); /* (hangs, timing out the test, if it keeps waiting) */
    cr_assert_gt(p.ring->hdr->head, 8 * (uint64_t)RING_SIZE);
    cr_assert_eq(__atomic_load_n(&p.ring->hdr->slot[0].active, __ATOMIC_ACQUIRE), 0,
                 "the slot is closed in this ring");
    ring_destroy(p.ring, 1);
    arena_forget();
}

/*
 * A producer killed between publishes (SIGKILL): what it wrote after its
 * last publish is recovered up to the cursor its last TB start stored
 * (slot->written); the records of the TB it was killed in are not taken,
 * whole or not, and neither is what an earlier lap left beyond them.
 */
Test(ring_pair, salvage_takes_records_up_to_the_last_tb_start)
{
    struct sluice_thread_slot slot = {0};
    struct ring_reader r;
    struct ring *ring;
    const uint64_t *w;
    uint64_t at, *c;
    ssize_t n;

    cr_assert_eq(arena_open(), 0);
    ring = ring_create(RING_SIZE, 1, 2, 0, "x86_64", "pair", 0, &slot);
    cr_assert_not_null(ring);
    ring_slot_open(ring, 0, 1, tail_line());
    cr_assert_eq(open_reader(&r, ring), 0, "%s", r.err);
    for (unsigned i = 0; i < 64; i++) {
        slot.cursor[i] = sluice_exec_hdr(0xdead000 + i); /* what "an earlier lap" left */
    }
    slot.cursor[0] = sluice_exec_hdr(0x1000);
    slot.cursor++;
    ring_publish(ring); /* one record published, then two TBs not */
    c = slot.cursor;
    *slot.written = (uint64_t)(uintptr_t)slot.cursor; /* TB start */
    c[0] = sluice_exec_hdr(0x1004);
    c[1] = sluice_mem_hdr(0x1004, 3, 1);
    c[2] = 0xa0;
    c[3] = 0x2a;
    slot.cursor += 4;
    *slot.written = (uint64_t)(uintptr_t)slot.cursor; /* the next TB starts, is killed in */
    slot.cursor[0] = sluice_exec_hdr(0x1008);
    slot.cursor++;
    cr_assert_eq(ring_reader__avail(&r), 8);
    cr_assert_eq(ring_reader__salvage(&r), 4 * 8, "%s", r.err);
    n = ring_reader__take(&r, &w, &at);
    cr_assert_eq(n, 5 * 8, "%s", r.err);
    cr_assert_eq(w[1], sluice_exec_hdr(0x1004));
    cr_assert_eq(w[2], sluice_mem_hdr(0x1004, 3, 1));
    cr_assert_eq(ring_reader__avail(&r), 0);
    ring_reader__close(&r);
    ring_destroy(ring, 1);
    arena_forget();
}

/* A written_addr that is no address of the data area recovers nothing. */
Test(ring_pair, salvage_ignores_a_bad_written_address)
{
    struct sluice_thread_slot slot = {0};
    struct ring_reader r;
    struct ring *ring;

    cr_assert_eq(arena_open(), 0);
    ring = ring_create(RING_SIZE, 1, 2, 0, "x86_64", "pair", 0, &slot);
    cr_assert_not_null(ring);
    cr_assert_eq(open_reader(&r, ring), 0, "%s", r.err);
    slot.cursor[0] = sluice_exec_hdr(0x1000);
    slot.cursor[1] = sluice_exec_hdr(0x1004);
    *slot.written = ring->hdr->data_addr + 2 * RING_SIZE; /* past the second mapping */
    cr_assert_eq(ring_reader__salvage(&r), 0);
    *slot.written = ring->hdr->data_addr + 12; /* unaligned */
    cr_assert_eq(ring_reader__salvage(&r), 0);
    *slot.written = ring->hdr->data_addr + 16;
    cr_assert_eq(ring_reader__salvage(&r), 16, "the same ring, a good address");
    ring_reader__close(&r);
    ring_destroy(ring, 1);
    arena_forget();
}

/*
 * A written_addr behind head (a producer killed inside a publish that
 * stored head first did leave one): taken at face value it names the
 * ring's older lap, nearly a ring of stale records. Past head, records
 * lie within one grant, never past the next chunk boundary: such a
 * position names nothing.
 */
Test(ring_pair, salvage_takes_nothing_from_a_written_address_behind_head)
{
    struct sluice_thread_slot slot = {0};
    struct ring_reader r;
    struct ring *ring;
    uint64_t *data;

    cr_assert_eq(arena_open(), 0);
    ring = ring_create(4 * RING_SIZE, 1, 2, 0, "x86_64", "pair", 0, &slot);
    cr_assert_not_null(ring);
    cr_assert_eq(open_reader(&r, ring), 0, "%s", r.err);
    data = slot.cursor;
    for (unsigned i = 0; i < 4 * RING_SIZE / 8; i++) {
        data[i] = sluice_exec_hdr(0xdead000 + i); /* what "an earlier lap" left */
    }
    slot.cursor += 3;
    ring_publish(ring);
    cr_assert_eq(ring->hdr->written_addr, (uint64_t)(uintptr_t)slot.cursor, "kept at the cursor");
    *slot.written = (uint64_t)(uintptr_t)(data + 1); /* two words behind head */
    cr_assert_eq(ring_reader__salvage(&r), 0, "%s", r.err);
    ring_reader__close(&r);
    ring_destroy(ring, 1);
    arena_forget();
}
