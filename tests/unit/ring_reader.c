/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ring_reader.c — unit tests of consumer/ring_reader.c against rings built
 * by test_producer.c: header validation, wrap-around, a full ring, chunk
 * splitting at record boundaries, invalid records, and a producer thread
 * streaming known records through a small lossless ring.
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
    return ring_reader__open(r, t->fd, 0, 0);
}

Test(ring_reader, opens_a_valid_ring)
{
    struct test_ring t;
    struct ring_reader r;

    cr_assert_eq(test_ring__create(&t, 2 * PAGE, 42, 0), 0);
    cr_assert_eq(open_reader(&r, &t), 0, "%s", r.err);
    cr_assert_eq(r.size, 2 * PAGE);
    cr_assert_eq(r.tail, 0);
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
    cr_assert_eq(ring_reader__open(&r, t.fd, 0, SLUICE_MAX_CONSUMERS), -EINVAL);
    cr_assert(strstr(r.err, "slot"), "%s", r.err);
    test_ring__destroy(&t);
}

Test(ring_reader, rejects_a_short_file)
{
    struct ring_reader r;
    int fd = memfd_create("short", MFD_CLOEXEC);

    cr_assert_eq(ftruncate(fd, 100), 0);
    cr_assert_eq(ring_reader__open(&r, fd, 0, 0), -EINVAL);
    close(fd);
}

Test(ring_reader, head_more_than_size_ahead_is_an_overrun)
{
    struct test_ring t;
    struct ring_reader r;
    uint64_t buf[8], pc = 0;

    cr_assert_eq(test_ring__create(&t, PAGE, 7, 0), 0);
    cr_assert_eq(open_reader(&r, &t), 0);
    t.hdr->head = PAGE + 8;
    cr_assert_eq(ring_reader__avail(&r), -EPROTO);
    cr_assert(strstr(r.err, "overrun") && strstr(r.err, "tid 7"), "%s", r.err);
    cr_assert_eq(ring_reader__read(&r, buf, sizeof(buf), &pc), -EPROTO);
    cr_assert_eq(r.tail, 0, "nothing consumed");
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

Test(ring_reader, record_straddling_the_end_reads_whole)
{
    struct test_ring t;
    struct ring_reader r;
    uint64_t buf[16], pc = 0;
    uint64_t start = 3 * PAGE - 16; /* position 3*4096-16: the data area ends 16 bytes on */

    cr_assert_eq(test_ring__create(&t, PAGE, 9, start), 0);
    cr_assert_eq(open_reader(&r, &t), 0);
    cr_assert_eq(r.tail, start);
    test_ring__append(&t, mem_rec(0x1000, 0xdead0, 0x11223344), 3); /* 24 bytes: 16 + 8 */
    {
        uint64_t e = sluice_exec_hdr(0x1004);
        test_ring__append(&t, &e, 1);
    }
    test_ring__publish(&t);
    cr_assert_eq(ring_reader__avail(&r), 32);
    cr_assert_eq(ring_reader__read(&r, buf, sizeof(buf), &pc), 32);
    cr_assert_eq(buf[0], sluice_mem_hdr(0x1000, 2, 0));
    cr_assert_eq(buf[1], 0xdead0);
    cr_assert_eq(buf[2], 0x11223344);
    cr_assert_eq(buf[3], sluice_exec_hdr(0x1004));
    cr_assert_eq(pc, 0x1004);
    cr_assert_eq(r.tail, start + 32);
    cr_assert_eq(t.hdr->consumer[0].tail, start + 32, "tail released to the producer");
    cr_assert_eq(t.hdr->consumer[0].tail_futex, 1, "tail futex bumped");
    ring_reader__close(&r);
    test_ring__destroy(&t);
}

Test(ring_reader, full_ring_reads_all)
{
    struct test_ring t;
    struct ring_reader r;
    static uint64_t buf[PAGE / 8];
    uint64_t pc = 0;
    unsigned i;

    cr_assert_eq(test_ring__create(&t, PAGE, 9, 100 * 8), 0);
    cr_assert_eq(open_reader(&r, &t), 0);
    for (i = 0; i < PAGE / 8; i++) {
        uint64_t e = sluice_exec_hdr(0x400000 + i);
        test_ring__append(&t, &e, 1);
    }
    test_ring__publish(&t);
    cr_assert_eq(ring_reader__avail(&r), PAGE, "exactly full");
    cr_assert_eq(ring_reader__read(&r, buf, sizeof(buf), &pc), PAGE);
    for (i = 0; i < PAGE / 8; i++) {
        cr_assert_eq(buf[i], sluice_exec_hdr(0x400000 + i), "record %u", i);
    }
    cr_assert_eq(pc, 0x400000 + PAGE / 8 - 1);
    cr_assert_eq(ring_reader__avail(&r), 0);
    ring_reader__close(&r);
    test_ring__destroy(&t);
}

Test(ring_reader, chunks_end_on_record_boundaries)
{
    struct test_ring t;
    struct ring_reader r;
    uint64_t buf[8], pc = 0x77;
    uint64_t e1 = sluice_exec_hdr(0x10), m16[4] = {sluice_mem_hdr(0, 4, 1), 0x2000, 1, 2};

    cr_assert_eq(test_ring__create(&t, PAGE, 3, 0), 0);
    cr_assert_eq(open_reader(&r, &t), 0);
    test_ring__append(&t, &e1, 1);                      /* 8 bytes */
    test_ring__append(&t, mem_rec(0x10, 0x3000, 5), 3); /* 24 bytes */
    test_ring__append(&t, m16, 4);                      /* 32 bytes */
    test_ring__publish(&t);
    /* cap 40: the 16-byte store (32 bytes) would end at 64 > 40 */
    cr_assert_eq(ring_reader__read(&r, buf, 40, &pc), 32);
    cr_assert_eq(pc, 0x10);
    cr_assert_eq(ring_reader__read(&r, buf, 40, &pc), 32);
    cr_assert_eq(buf[0], sluice_mem_hdr(0, 4, 1));
    cr_assert_eq(buf[3], 2);
    cr_assert_eq(pc, 0x10, "no EXEC in the second chunk: pc carried");
    cr_assert_eq(ring_reader__read(&r, buf, 40, &pc), 0, "nothing left");
    cr_assert_eq(ring_reader__read(&r, buf, 16, &pc), -EINVAL, "cap below 32");
    ring_reader__close(&r);
    test_ring__destroy(&t);
}

Test(ring_reader, long_pad_is_skipped_without_copy)
{
    struct test_ring t;
    struct ring_reader r;
    uint64_t buf[8], pc = 0, w[12] = {0};
    uint64_t e = sluice_exec_hdr(0x99);

    cr_assert_eq(test_ring__create(&t, PAGE, 3, 0), 0);
    cr_assert_eq(open_reader(&r, &t), 0);
    w[0] = 12; /* PAD of 12 words, longer than cap 64 bytes */
    test_ring__append(&t, w, 12);
    test_ring__append(&t, &e, 1);
    test_ring__publish(&t);
    cr_assert_eq(ring_reader__read(&r, buf, 64, &pc), 8);
    cr_assert_eq(buf[0], e);
    cr_assert_eq(r.tail, 13 * 8);
    ring_reader__close(&r);
    test_ring__destroy(&t);
}

Test(ring_reader, invalid_record_header_names_tid_and_position)
{
    struct test_ring t;
    struct ring_reader r;
    uint64_t buf[8], pc = 0;
    uint64_t w[2] = {sluice_exec_hdr(1), 0x3300000000000000ull};

    cr_assert_eq(test_ring__create(&t, PAGE, 4242, 0), 0);
    cr_assert_eq(open_reader(&r, &t), 0);
    test_ring__append(&t, w, 2);
    test_ring__publish(&t);
    cr_assert_eq(ring_reader__read(&r, buf, sizeof(buf), &pc), -EPROTO);
    cr_assert(strstr(r.err, "tid 4242"), "%s", r.err);
    cr_assert(strstr(r.err, "position 8"), "%s", r.err);
    cr_assert(strstr(r.err, "0x3300000000000000"), "%s", r.err);
    cr_assert_eq(r.tail, 0, "nothing consumed on error");
    ring_reader__discard(&r);
    cr_assert_eq(r.tail, 16);
    ring_reader__close(&r);
    test_ring__destroy(&t);
}

Test(ring_reader, record_crossing_head_is_an_error)
{
    struct test_ring t;
    struct ring_reader r;
    uint64_t buf[8], pc = 0;

    cr_assert_eq(test_ring__create(&t, PAGE, 5, 0), 0);
    cr_assert_eq(open_reader(&r, &t), 0);
    test_ring__append(&t, mem_rec(1, 2, 3), 3);
    t.pos -= 8; /* publish only 2 of its 3 words */
    test_ring__publish(&t);
    cr_assert_eq(ring_reader__read(&r, buf, sizeof(buf), &pc), -EPROTO);
    cr_assert(strstr(r.err, "crosses head"), "%s", r.err);
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

/* Check the next record(s) in @p buf against the producer's sequence. */
static uint64_t check_stream(const uint64_t *buf, size_t words, uint64_t i)
{
    size_t k = 0;

    while (k < words) {
        if (i % 3 == 2) {
            cr_assert_eq(buf[k], sluice_mem_hdr(stream_pc(i), 2, 0), "record %llu",
                         (unsigned long long)i);
            cr_assert_eq(buf[k + 1], i);
            cr_assert_eq(buf[k + 2], ~i);
            k += 3;
        } else {
            cr_assert_eq(buf[k], sluice_exec_hdr(stream_pc(i)), "record %llu",
                         (unsigned long long)i);
            k += 1;
        }
        i++;
    }
    cr_assert_eq(k, words, "chunk ends on a record boundary");
    return i;
}

Test(ring_reader, producer_thread_streams_all_records_in_order, .timeout = 60)
{
    struct test_ring t;
    struct ring_reader r;
    static uint64_t buf[1024];
    uint64_t next = 0, pc = 0;
    pthread_t th;

    cr_assert_eq(test_ring__create(&t, PAGE, 11, 0), 0);
    cr_assert_eq(open_reader(&r, &t), 0);
    cr_assert_eq(pthread_create(&th, NULL, producer, &t), 0);
    for (;;) {
        ssize_t n = ring_reader__read(&r, buf, 1000, &pc); /* odd cap: uneven splits */

        cr_assert_geq(n, 0, "%s", r.err);
        if (n > 0) {
            next = check_stream(buf, (size_t)n / 8, next);
            continue;
        }
        if (ring_reader__closed(&r) && ring_reader__avail(&r) == 0) {
            break;
        }
        ring_reader__wait(&r, 50);
    }
    pthread_join(th, NULL);
    cr_assert_eq(next, STREAM_RECORDS);
    /* record 299999 is a MEM (i % 3 == 2): the last EXEC is record 299998 */
    cr_assert_eq(pc, stream_pc(STREAM_RECORDS - 2));
    cr_assert_eq(t.hdr->consumer[0].tail, t.hdr->head);
    ring_reader__close(&r);
    test_ring__destroy(&t);
}
