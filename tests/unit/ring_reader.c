/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ring_reader.c — unit tests of consumer/ring_reader.c against rings built
 * by test_producer.c: header validation, wrap-around, a full ring, spans
 * cut at head and at chunk boundaries, in-order release and waking the
 * producer only when it waits, and a producer thread streaming known
 * records through a small lossless ring. (Invalid records are the
 * decoder's to find: tests/unit/decode.c.)
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ring_reader.h"
#include "test_producer.h"

#define PAGE 4096u

static uint64_t mem3[3];

/* A 3-word MEM record (4-byte load) at @p pc. */
static const uint64_t *mem_rec(uint64_t pc, uint64_t addr, uint64_t val)
{
    mem3[0] = sluice_mem_hdr(pc, 2, 0);
    mem3[1] = addr;
    mem3[2] = val;
    return mem3;
}

static int open_reader(struct ring_reader *r, struct test_ring *t)
{
    return ring_reader__open(r, t->fd, 0, 0, t->tail);
}

Test(ring_reader, opens_a_valid_ring)
{
    struct test_ring t;
    struct ring_reader r;

    cr_assert_eq(test_ring__create(&t, 2 * PAGE, 42, 0), 0);
    cr_assert_eq(open_reader(&r, &t), 0, "%s", r.err);
    cr_assert_eq(r.size, 2 * PAGE);
    cr_assert_eq(r.pos, 0);
    cr_assert_eq(r.hdr->tid, 42);
    cr_assert_eq(ring_reader__avail(&r), 0);
    cr_assert_eq(ring_reader__closed(&r), 0);
    ring_reader__close(&r);
    test_ring__destroy(&t);
}

static void expect_open_error(void (*spoil)(struct test_ring *), const char *word)
{
    struct test_ring t;
    struct ring_reader r;

    cr_assert_eq(test_ring__create(&t, 2 * PAGE, 42, 0), 0);
    spoil(&t);
    cr_assert_eq(open_reader(&r, &t), -EINVAL);
    cr_assert(strstr(r.err, word), "error '%s' should name '%s'", r.err, word);
    cr_assert_null(r.map, "nothing stays mapped");
    test_ring__destroy(&t);
}

static void bad_magic(struct test_ring *t)
{
    t->hdr->magic ^= 1;
}

static void bad_version(struct test_ring *t)
{
    t->hdr->version = 99;
}

static void bad_hdr_bytes(struct test_ring *t)
{
    t->hdr->hdr_bytes = 8192;
}

static void size_not_pow2(struct test_ring *t)
{
    t->hdr->data_size = 3 * PAGE;
}

static void size_too_small(struct test_ring *t)
{
    t->hdr->data_size = 64;
}

static void size_past_file(struct test_ring *t)
{
    t->hdr->data_size = 1ull << 30;
}

Test(ring_reader, rejects_bad_magic)
{
    expect_open_error(bad_magic, "magic");
}

Test(ring_reader, rejects_bad_version)
{
    expect_open_error(bad_version, "version 99");
}

Test(ring_reader, rejects_bad_hdr_bytes)
{
    expect_open_error(bad_hdr_bytes, "hdr_bytes 8192");
}

Test(ring_reader, rejects_non_power_of_two_size)
{
    expect_open_error(size_not_pow2, "data_size 12288");
}

Test(ring_reader, rejects_tiny_size)
{
    expect_open_error(size_too_small, "data_size 64");
}

Test(ring_reader, rejects_size_past_end_of_file)
{
    expect_open_error(size_past_file, "file size");
}

Test(ring_reader, rejects_bad_slot)
{
    struct test_ring t;
    struct ring_reader r;

    cr_assert_eq(test_ring__create(&t, PAGE, 1, 0), 0);
    cr_assert_eq(ring_reader__open(&r, t.fd, 0, SLUICE_MAX_CONSUMERS, t.tail), -EINVAL);
    cr_assert(strstr(r.err, "slot"), "%s", r.err);
    test_ring__destroy(&t);
}

Test(ring_reader, rejects_a_short_file)
{
    struct ring_reader r;
    int fd = memfd_create("short", MFD_CLOEXEC);

    cr_assert_eq(ftruncate(fd, 100), 0);
    cr_assert_eq(ring_reader__open(&r, fd, 0, 0, test_tails(NULL)), -EINVAL);
    close(fd);
}

Test(ring_reader, head_more_than_size_ahead_is_an_overrun)
{
    struct test_ring t;
    struct ring_reader r;
    const uint64_t *w;
    uint64_t at;

    cr_assert_eq(test_ring__create(&t, PAGE, 7, 0), 0);
    cr_assert_eq(open_reader(&r, &t), 0);
    t.hdr->head = PAGE + 8;
    cr_assert_eq(ring_reader__avail(&r), -EPROTO);
    cr_assert(strstr(r.err, "overrun") && strstr(r.err, "tid 7"), "%s", r.err);
    cr_assert_eq(ring_reader__take(&r, &w, &at), -EPROTO);
    cr_assert_eq(r.pos, 0, "nothing taken");
    t.hdr->head = 4; /* unaligned */
    cr_assert_eq(ring_reader__avail(&r), -EPROTO);
    ring_reader__close(&r);
    test_ring__destroy(&t);
}

Test(ring_reader, head_behind_tail_is_an_error)
{
    struct test_ring t;
    struct ring_reader r;

    cr_assert_eq(test_ring__create(&t, PAGE, 7, 800), 0);
    cr_assert_eq(open_reader(&r, &t), 0);
    t.hdr->head = 400;
    cr_assert_eq(ring_reader__avail(&r), -EPROTO);
    cr_assert(strstr(r.err, "behind"), "%s", r.err);
    ring_reader__close(&r);
    test_ring__destroy(&t);
}

Test(ring_reader, record_straddling_the_end_is_taken_whole_in_place)
{
    struct test_ring t;
    struct ring_reader r;
    const uint64_t *w;
    uint64_t at, e = sluice_exec_hdr(0x1004);
    uint64_t start = 3 * PAGE - 16; /* position 3*4096-16: the data area ends 16 bytes on */

    cr_assert_eq(test_ring__create(&t, PAGE, 9, start), 0);
    cr_assert_eq(open_reader(&r, &t), 0);
    cr_assert_eq(r.pos, start);
    test_ring__append(&t, mem_rec(0x1000, 0xdead0, 0x11223344), 3); /* 24 bytes: 16 + 8 */
    test_ring__append(&t, &e, 1);
    test_ring__publish(&t);
    cr_assert_eq(ring_reader__avail(&r), 32);
    cr_assert_eq(ring_reader__take(&r, &w, &at), 32);
    cr_assert_eq(at, start);
    cr_assert_eq((const uint8_t *)w, r.data + (start & (PAGE - 1)), "in place, not copied");
    cr_assert_eq(w[0], sluice_mem_hdr(0x1000, 2, 0));
    cr_assert_eq(w[1], 0xdead0);
    cr_assert_eq(w[2], 0x11223344, "contiguous past the end of the data area");
    cr_assert_eq(w[3], sluice_exec_hdr(0x1004));
    cr_assert_eq(r.pos, start + 32);
    cr_assert_eq(ring_reader__avail(&r), 0);
    cr_assert_eq(t.tail->tail, start, "taken is not released");
    ring_reader__release(&r, at + 32);
    cr_assert_eq(t.tail->tail, start + 32, "tail released to the producer");
    cr_assert_eq(t.tail->tail_futex, 0, "no wake: the producer was not waiting");
    ring_reader__close(&r);
    test_ring__destroy(&t);
}

Test(ring_reader, release_wakes_only_a_waiting_producer_and_never_moves_back)
{
    struct test_ring t;
    struct ring_reader r;

    cr_assert_eq(test_ring__create(&t, PAGE, 9, 0), 0);
    cr_assert_eq(open_reader(&r, &t), 0);
    ring_reader__release(&r, 64);
    cr_assert_eq(t.tail->tail_futex, 0);
    t.hdr->slot[0].producer_waiting = 1;
    ring_reader__release(&r, 128);
    cr_assert_eq(t.tail->tail, 128);
    cr_assert_eq(t.tail->tail_futex, 1, "bumped and woken");
    ring_reader__release(&r, 96);
    cr_assert_eq(t.tail->tail, 128, "an older release does not move it back");
    cr_assert_eq(t.tail->tail_futex, 1);
    ring_reader__close(&r);
    test_ring__destroy(&t);
}

Test(ring_reader, full_ring_is_one_span)
{
    struct test_ring t;
    struct ring_reader r;
    const uint64_t *w;
    uint64_t at;
    unsigned i;

    cr_assert_eq(test_ring__create(&t, PAGE, 9, 100 * 8), 0);
    cr_assert_eq(open_reader(&r, &t), 0);
    for (i = 0; i < PAGE / 8; i++) {
        uint64_t e = sluice_exec_hdr(0x400000 + i);
        test_ring__append(&t, &e, 1);
    }
    test_ring__publish(&t);
    cr_assert_eq(ring_reader__avail(&r), PAGE, "exactly full");
    cr_assert_eq(ring_reader__take(&r, &w, &at), PAGE);
    for (i = 0; i < PAGE / 8; i++) {
        cr_assert_eq(w[i], sluice_exec_hdr(0x400000 + i), "record %u", i);
    }
    cr_assert_eq(ring_reader__avail(&r), 0);
    ring_reader__close(&r);
    test_ring__destroy(&t);
}

Test(ring_reader, spans_end_at_head_and_at_chunk_boundaries)
{
    struct test_ring t;
    struct ring_reader r;
    const uint64_t *w;
    uint64_t at, e = sluice_exec_hdr(0x10), start = 2 * SLUICE_CHUNK_BYTES - 16;

    cr_assert_eq(test_ring__create(&t, PAGE, 3, start), 0);
    cr_assert_eq(open_reader(&r, &t), 0);
    test_ring__append(&t, &e, 1);                       /* 8 bytes */
    test_ring__append(&t, mem_rec(0x10, 0x3000, 5), 3); /* 24: a PAD of 8 first */
    test_ring__append(&t, &e, 1);
    test_ring__publish(&t);
    cr_assert_eq(ring_reader__avail(&r), 48);
    cr_assert_eq(ring_reader__take(&r, &w, &at), 16, "up to the boundary");
    cr_assert_eq(at, start);
    cr_assert_eq(w[0], e);
    cr_assert_eq(w[1], sluice_pad_hdr(1), "the producer's PAD");
    cr_assert_eq(ring_reader__take(&r, &w, &at), 32, "from the boundary to head");
    cr_assert_eq(at, 2 * SLUICE_CHUNK_BYTES);
    cr_assert_eq(w[0], sluice_mem_hdr(0x10, 2, 0));
    cr_assert_eq(ring_reader__take(&r, &w, &at), 0, "nothing left");
    ring_reader__close(&r);
    test_ring__destroy(&t);
}

Test(ring_reader, discard_releases_everything_published)
{
    struct test_ring t;
    struct ring_reader r;
    uint64_t e = sluice_exec_hdr(0x10);

    cr_assert_eq(test_ring__create(&t, PAGE, 3, 0), 0);
    cr_assert_eq(open_reader(&r, &t), 0);
    test_ring__append(&t, &e, 1);
    test_ring__append(&t, &e, 1);
    test_ring__publish(&t);
    ring_reader__discard(&r);
    cr_assert_eq(r.pos, 16);
    cr_assert_eq(t.tail->tail, 16);
    ring_reader__close(&r);
    test_ring__destroy(&t);
}

Test(ring_reader, a_lapped_span_is_not_intact)
{
    struct test_ring t;
    struct ring_reader r;

    cr_assert_eq(test_ring__create(&t, PAGE, 3, 0), 0);
    cr_assert_eq(open_reader(&r, &t), 0);
    t.hdr->head = PAGE;
    cr_assert(ring_reader__intact(&r, 0), "a ring's worth ahead: not yet overwritten");
    t.hdr->head = PAGE + 8;
    cr_assert(!ring_reader__intact(&r, 0), "the producer is past it by more than the ring");
    cr_assert(ring_reader__intact(&r, 2 * PAGE), "salvaged bytes past head");
    ring_reader__close(&r);
    test_ring__destroy(&t);
}

/* --- a producer thread streaming through a small ring ---------------------- */

#define STREAM_RECORDS 300000

static uint64_t stream_pc(uint64_t i)
{
    return 0x10000 + i * 4;
}

static void *producer(void *arg)
{
    struct test_ring *t = arg;
    uint64_t i;

    for (i = 0; i < STREAM_RECORDS; i++) {
        uint64_t e = sluice_exec_hdr(stream_pc(i));
        uint64_t m[3] = {sluice_mem_hdr(stream_pc(i), 2, 0), i, ~i};

        if (i % 3 == 2) {
            test_ring__append(t, m, 3);
        } else {
            test_ring__append(t, &e, 1);
        }
        if (i % 97 == 0) {
            test_ring__publish(t); /* publish at odd, uneven points */
        }
    }
    test_ring__close(t);
    return NULL;
}

/* Check the records of a span against the producer's sequence from @p i. */
static uint64_t check_stream(const uint64_t *w, size_t words, uint64_t i)
{
    size_t k = 0;

    while (k < words) {
        if (sluice_rec_tag(w[k]) == SLUICE_TAG_PAD) {
            k += sluice_rec_words(w[k]);
            continue;
        }
        if (i % 3 == 2) {
            cr_assert_eq(w[k], sluice_mem_hdr(stream_pc(i), 2, 0), "record %llu",
                         (unsigned long long)i);
            cr_assert_eq(w[k + 1], i);
            cr_assert_eq(w[k + 2], ~i);
            k += 3;
        } else {
            cr_assert_eq(w[k], sluice_exec_hdr(stream_pc(i)), "record %llu", (unsigned long long)i);
            k += 1;
        }
        i++;
    }
    cr_assert_eq(k, words, "the span ends on a record boundary");
    return i;
}

Test(ring_reader, producer_thread_streams_all_records_in_order, .timeout = 60)
{
    struct test_ring t;
    struct ring_reader r;
    uint64_t next = 0, at, spans = 0;
    const uint64_t *w;
    pthread_t th;

    cr_assert_eq(test_ring__create(&t, PAGE, 11, 0), 0);
    cr_assert_eq(open_reader(&r, &t), 0);
    cr_assert_eq(pthread_create(&th, NULL, producer, &t), 0);
    for (;;) {
        ssize_t n = ring_reader__take(&r, &w, &at);

        cr_assert_geq(n, 0, "%s", r.err);
        if (n > 0) {
            next = check_stream(w, (size_t)n / 8, next);
            cr_assert(ring_reader__intact(&r, at));
            ring_reader__release(&r, at + (uint64_t)n);
            spans++;
            continue;
        }
        if (ring_reader__closed(&r) && ring_reader__avail(&r) == 0) {
            break;
        }
        ring_reader__wait(&r, 50);
    }
    pthread_join(th, NULL);
    cr_assert_eq(next, STREAM_RECORDS);
    cr_assert_eq(t.tail->tail, t.hdr->head);
    cr_assert_gt(t.hdr->head, 4 * SLUICE_CHUNK_BYTES, "the stream crossed chunk boundaries");
    ring_reader__close(&r);
    test_ring__destroy(&t);
}
