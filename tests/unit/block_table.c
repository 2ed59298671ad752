/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * block_table.c — unit tests of block table checking and mapping
 * (consumer/block_table.c): every header field refused with its name, one
 * mapping per arena shared by its rings and unmapped with the last, a
 * table elsewhere in the same arena refused, and bad placements refused
 * with nothing left mapped.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "block_table.h"
#include "sluice/record.h"

/* --- the table header and its mapping ------------------------------------------ */

static void expect_check_error(void (*spoil)(struct sluice_blocks_hdr *), uint64_t bytes,
                               const char *want)
{
    uint8_t *mem = calloc(1, 8192);
    struct sluice_blocks_hdr *h = (struct sluice_blocks_hdr *)mem;
    struct block_table bt;
    char err[160] = "";

    h->magic = SLUICE_BLOCKS_MAGIC;
    h->version = SLUICE_FORMAT_VERSION;
    h->hdr_bytes = SLUICE_BLOCKS_HDR_BYTES;
    h->capacity_words = 512;
    if (spoil) {
        spoil(h);
    }
    cr_assert_eq(block_table__check(&bt, mem, bytes, err, sizeof(err)), want ? -EINVAL : 0, "%s",
                 err);
    if (want) {
        cr_assert(strstr(err, want), "\"%s\" lacks \"%s\"", err, want);
    } else {
        cr_assert_eq(bt.capacity_words, 512);
        cr_assert_eq((const uint8_t *)bt.data, mem + SLUICE_BLOCKS_HDR_BYTES);
    }
    free(mem);
}

static void bad_magic(struct sluice_blocks_hdr *h)
{
    h->magic = SLUICE_RING_MAGIC;
}

static void bad_version(struct sluice_blocks_hdr *h)
{
    h->version = 3;
}

static void bad_hdr_bytes(struct sluice_blocks_hdr *h)
{
    h->hdr_bytes = 64;
}

static void too_many_words(struct sluice_blocks_hdr *h)
{
    h->capacity_words = 513;
}

static void huge_capacity(struct sluice_blocks_hdr *h)
{
    h->capacity_words = UINT64_MAX / 4;
}

Test(block_table, header_checks)
{
    expect_check_error(NULL, 8192, NULL);
    expect_check_error(bad_magic, 8192, "magic");
    expect_check_error(bad_version, 8192, "version 3");
    expect_check_error(bad_hdr_bytes, 8192, "hdr_bytes 64");
    expect_check_error(too_many_words, 8192, "capacity_words 513");
    expect_check_error(huge_capacity, 8192, "capacity_words");
    expect_check_error(NULL, 4095, "blocks_bytes 4095");
}

/* An arena: a ring's worth of bytes, then a table of 2 pages at 64 KiB. */
static int make_arena(void)
{
    int fd = memfd_create("sluice-test-arena", MFD_CLOEXEC);
    struct sluice_blocks_hdr h = {.magic = SLUICE_BLOCKS_MAGIC,
                                  .version = SLUICE_FORMAT_VERSION,
                                  .hdr_bytes = SLUICE_BLOCKS_HDR_BYTES,
                                  .capacity_words = 512,
                                  .used_words = 7};

    cr_assert_geq(fd, 0);
    cr_assert_eq(ftruncate(fd, 65536 + 8192), 0);
    cr_assert_eq(pwrite(fd, &h, sizeof(h), 65536), (ssize_t)sizeof(h));
    return fd;
}

Test(block_table, one_mapping_per_arena)
{
    struct block_tables ts;
    struct block_table *a, *b, *c;
    char err[160];
    int fd = make_arena(), fd2 = make_arena(), dup_fd = dup(fd);

    block_tables__init(&ts);
    cr_assert_eq(block_tables__get(&ts, fd, 65536, 8192, &a, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(block_tables__get(&ts, dup_fd, 65536, 8192, &b, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(a, b, "the same arena (another descriptor of it) shares the mapping");
    cr_assert_eq(a->refs, 2);
    cr_assert_eq(block_table__used(a), 7);
    cr_assert_eq(a->capacity_words, 512);
    cr_assert_eq(block_tables__get(&ts, fd2, 65536, 8192, &c, err, sizeof(err)), 0, "%s", err);
    cr_assert_neq(a, c, "a forked child's arena has its own table");
    /* Another place in the same arena: refused. */
    cr_assert_eq(block_tables__get(&ts, fd, 65536, 4096, &b, err, sizeof(err)), -EINVAL);
    cr_assert(strstr(err, "other rings name 65536 and 8192"), "%s", err);
    cr_assert_null(b);
    block_tables__put(&ts, a);
    cr_assert_eq(a->refs, 1);
    block_tables__put(&ts, a);
    block_tables__put(&ts, c);
    cr_assert_null(ts.list, "the last put unmaps");
    block_tables__destroy(&ts);
    close(fd);
    close(fd2);
    close(dup_fd);
}

Test(block_table, placement_checks)
{
    struct block_tables ts;
    struct block_table *bt = (void *)1;
    char err[160];
    int fd = make_arena();

    block_tables__init(&ts);
    cr_assert_eq(block_tables__get(&ts, fd, 0, 0, &bt, err, sizeof(err)), 0);
    cr_assert_null(bt, "no table");
    cr_assert_eq(block_tables__get(&ts, fd, 4096, 0, &bt, err, sizeof(err)), -EINVAL);
    cr_assert(strstr(err, "blocks_offset 4096 with blocks_bytes 0"), "%s", err);
    cr_assert_eq(block_tables__get(&ts, fd, 65536 + 8, 8192, &bt, err, sizeof(err)), -EINVAL);
    cr_assert(strstr(err, "not page-aligned"), "%s", err);
    cr_assert_eq(block_tables__get(&ts, fd, 65536, 8000, &bt, err, sizeof(err)), -EINVAL);
    cr_assert(strstr(err, "blocks_bytes 8000"), "%s", err);
    cr_assert_eq(block_tables__get(&ts, fd, 65536, 8ull << 30, &bt, err, sizeof(err)), -EINVAL);
    cr_assert(strstr(err, "larger than"), "%s", err);
    cr_assert_eq(block_tables__get(&ts, fd, 65536, 3 * 4096, &bt, err, sizeof(err)), -EINVAL);
    cr_assert(strstr(err, "file size"), "%s", err);
    cr_assert_eq(block_tables__get(&ts, fd, 0, 8192, &bt, err, sizeof(err)), -EINVAL);
    cr_assert(strstr(err, "magic"), "a table where the ring is: %s", err);
    cr_assert_null(ts.list, "nothing stays mapped");
    block_tables__destroy(&ts);
    close(fd);
}
