/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * maps.c — unit tests of reading the module log (consumer/maps.c): which
 * mapping held an address at a position (mmap, munmap, mprotect, mremap,
 * the same address mapped again, huge ranges, many changes elsewhere), the
 * snapshot's pieces, and entries a
 * hostile producer may write (refused, naming the field, never read past).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "maps.h"
#include "sluice/record.h"

/* A log being written, as the jitter lays it out. */
static uint8_t log_area[16 << 20]; /* the jitter's size: 100 000 entries of 104 bytes fit */
static uint64_t used, dropped;

/* Append an entry; returns its position. */
static uint64_t add(uint16_t kind, uint64_t start, uint64_t len, uint32_t prot, uint64_t offset,
                    const char *path)
{
    struct sluice_map_entry e = {.kind = kind,
                                 .prot = prot,
                                 .image = path ? 1 : SLUICE_MAP_ANON,
                                 .start = start,
                                 .len = len,
                                 .offset = offset,
                                 .base = path ? 0x10000 : 0};
    size_t n = path ? strlen(path) : 0;
    uint64_t at = used;

    e.path_len = (uint16_t)n;
    e.bytes = (uint32_t)((sizeof(e) + n + 7) & ~7u);
    memcpy(log_area + at, &e, sizeof(e));
    memcpy(log_area + at + sizeof(e), path ? path : "", n);
    used += e.bytes;
    return at;
}

static uint64_t add_remap(uint64_t old_start, uint64_t old_len, uint64_t start, uint64_t len,
                          uint64_t offset, const char *path)
{
    uint64_t at = add(SLUICE_MAP_MREMAP, start, len, 0, offset, path);
    struct sluice_map_entry *e = (struct sluice_map_entry *)(log_area + at);

    e->old_start = old_start;
    e->old_len = old_len;
    return at;
}

static struct maps m;

static void setup(void)
{
    memset(log_area, 0, sizeof(log_area));
    used = dropped = 0;
    maps__init(&m, log_area, sizeof(log_area), &used, &dropped);
}

static void teardown(void)
{
    maps__destroy(&m);
}

TestSuite(maps, .init = setup, .fini = teardown);

Test(maps, lookup_at_positions)
{
    struct sluice_module mod;
    uint64_t p1, p2, p3, p4;

    add(SLUICE_MAP_MMAP, 0x10000, 0x3000, 5, 0, "/lib/a.so");
    p1 = used;
    add(SLUICE_MAP_MPROTECT, 0x11000, 0x1000, 1, 0, NULL);
    p2 = used;
    add(SLUICE_MAP_MUNMAP, 0x10000, 0x3000, 0, 0, NULL);
    p3 = used;
    add(SLUICE_MAP_MMAP, 0x10000, 0x1000, 5, 0x2000, "/lib/b.so");
    p4 = used;

    cr_assert_eq(maps__lookup(&m, 0, 0x10000, &mod, NULL), -ENOENT,
                 "nothing before the first entry");
    cr_assert_eq(maps__lookup(&m, p1, 0x11004, &mod, NULL), 0);
    cr_assert_str_eq(mod.path, "/lib/a.so");
    cr_assert_eq(mod.offset, 0x1004);
    cr_assert_eq(mod.prot, 5);
    cr_assert_eq(maps__lookup(&m, p2, 0x11004, &mod, NULL), 0);
    cr_assert_eq(mod.prot, 1, "the mprotect after the mmap");
    cr_assert_eq(maps__lookup(&m, p2, 0x10004, &mod, NULL), 0);
    cr_assert_eq(mod.prot, 5, "outside the mprotect's range");
    cr_assert_eq(maps__lookup(&m, p3, 0x10004, &mod, NULL), -ENOENT, "unmapped");
    cr_assert_eq(maps__lookup(&m, p4, 0x10004, &mod, NULL), 0);
    cr_assert_str_eq(mod.path, "/lib/b.so", "the same address, mapped again");
    cr_assert_eq(mod.offset, 0x2004);
    cr_assert_eq(maps__lookup(&m, p4, 0x11004, &mod, NULL), -ENOENT);
    cr_assert_eq(maps__lookup(&m, p1 - 1, 0x10000, &mod, NULL), -ENOENT, "inside the first entry");
}

Test(maps, mremap_moves_file_and_protection)
{
    struct sluice_module mod;

    add(SLUICE_MAP_MMAP, 0x20000, 0x2000, 5, 0x4000, "/f");
    add(SLUICE_MAP_MPROTECT, 0x20000, 0x2000, 7, 0, NULL);
    add_remap(0x20000, 0x2000, 0x90000, 0x3000, 0x4000, "/f");

    cr_assert_eq(maps__lookup(&m, used, 0x90010, &mod, NULL), 0);
    cr_assert_str_eq(mod.path, "/f");
    cr_assert_eq(mod.offset, 0x4010);
    cr_assert_eq(mod.prot, 7, "the protection it had where it was");
    cr_assert_eq(mod.start, 0x90000);
    cr_assert_eq(mod.end, 0x93000);
    cr_assert_eq(maps__lookup(&m, used, 0x20010, &mod, NULL), -ENOENT, "nothing left where it was");
}

static struct sluice_map got[16];
static int n_got;

static void collect(void *arg, const struct sluice_map *e)
{
    (void)arg;
    cr_assert_lt(n_got, 16);
    got[n_got++] = *e;
}

Test(maps, snapshot_pieces)
{
    n_got = 0;
    add(SLUICE_MAP_MMAP, 0x40000, 0x4000, 5, 0, "/lib/c.so");
    add(SLUICE_MAP_MMAP, 0x10000, 0x1000, 3, 0, NULL);
    add(SLUICE_MAP_MPROTECT, 0x41000, 0x1000, 1, 0, NULL);
    add(SLUICE_MAP_MUNMAP, 0x42000, 0x1000, 0, 0, NULL);

    cr_assert_eq(maps__snapshot(&m, used, collect, NULL), 0);
    cr_assert_eq(n_got, 4, "anon, then c.so cut in three by the mprotect and the munmap");
    cr_assert_eq(got[0].start, 0x10000);
    cr_assert_null(got[0].path);
    cr_assert_eq(got[1].start, 0x40000);
    cr_assert_eq(got[1].len, 0x1000);
    cr_assert_eq(got[1].prot, 5);
    cr_assert_eq(got[2].start, 0x41000);
    cr_assert_eq(got[2].prot, 1);
    cr_assert_eq(got[2].offset, 0x1000);
    cr_assert_eq(got[3].start, 0x43000);
    cr_assert_eq(got[3].offset, 0x3000);
    for (int i = 0; i < n_got; i++) {
        cr_assert(got[i].snapshot);
        cr_assert_eq(got[i].kind, SLUICE_MAP_MMAP);
    }
}

Test(maps, entry_at_and_events)
{
    uint64_t a = add(SLUICE_MAP_MMAP, 0x40000, 0x4000, 5, 0, "/lib/c.so");
    uint64_t b = add(SLUICE_MAP_MUNMAP, 0x40000, 0x4000, 0, 0, NULL);
    const struct maps_entry *x;
    struct sluice_map ev;

    cr_assert_not_null(x = maps__entry_at(&m, b));
    maps__event(x, &ev);
    cr_assert_eq(ev.kind, SLUICE_MAP_MUNMAP);
    cr_assert_null(ev.path);
    cr_assert_not_null(x = maps__entry_at(&m, a));
    cr_assert_str_eq(x->path, "/lib/c.so");
    cr_assert_null(maps__entry_at(&m, a + 8), "not where an entry starts");
    cr_assert_null(maps__entry_at(&m, used), "not yet written");
}

/* A hostile entry after a good one: refused, naming the field; the good one still reads. */
static void expect_bad(void (*spoil)(struct sluice_map_entry *), const char *field)
{
    struct sluice_module mod;
    uint64_t at;

    add(SLUICE_MAP_MMAP, 0x10000, 0x1000, 5, 0, "/ok");
    at = add(SLUICE_MAP_MMAP, 0x20000, 0x1000, 5, 0, "/spoilt");
    spoil((struct sluice_map_entry *)(log_area + at));
    cr_assert_eq(maps__sync(&m, used), 1);
    cr_assert(strstr(maps__bad(&m), field), "'%s' does not name %s", maps__bad(&m), field);
    cr_assert_eq(maps__lookup(&m, used, 0x10000, &mod, NULL), 0);
    cr_assert_eq(maps__lookup(&m, used, 0x20000, &mod, NULL), -ENOENT);
}

static void huge_bytes(struct sluice_map_entry *e)
{
    e->bytes = 1u << 30;
}
static void odd_bytes(struct sluice_map_entry *e)
{
    e->bytes = 65;
}
static void long_path(struct sluice_map_entry *e)
{
    e->path_len = 4000;
}
static void bad_kind(struct sluice_map_entry *e)
{
    e->kind = 9;
}
static void wrapping(struct sluice_map_entry *e)
{
    e->len = ~0ull;
}

Test(maps, hostile_entries)
{
    expect_bad(huge_bytes, "bytes");
}
Test(maps, hostile_odd_bytes)
{
    expect_bad(odd_bytes, "bytes");
}
Test(maps, hostile_path_len)
{
    expect_bad(long_path, "path_len");
}
Test(maps, hostile_kind)
{
    expect_bad(bad_kind, "kind");
}
Test(maps, hostile_wrapping_range)
{
    expect_bad(wrapping, "start + len");
}

Test(maps, used_past_capacity_is_clamped)
{
    struct sluice_module mod;

    add(SLUICE_MAP_MMAP, 0x10000, 0x1000, 5, 0, "/ok");
    used = ~0ull;
    cr_assert_eq(maps__used(&m), sizeof(log_area));
    cr_assert_eq(maps__lookup(&m, ~0ull, 0x10000, &mod, NULL), 0, "the zeros after it are refused");
    cr_assert(strstr(maps__bad(&m), "bytes"));
}

Test(maps, many_changes_elsewhere_and_huge_ranges)
{
    struct sluice_module mod;
    uint64_t lib_at;

    add(SLUICE_MAP_MMAP, 0x7f0000000000, 0x200000, 5, 0, "/lib/libc.so.6");
    lib_at = used;
    for (int i = 0; i < 50000; i++) { /* a malloc storm, far away */
        add(SLUICE_MAP_MMAP, 0x10000000 + (uint64_t)(i % 7) * 0x100000, 0x40000, 3, 0, NULL);
        add(SLUICE_MAP_MUNMAP, 0x10000000 + (uint64_t)(i % 7) * 0x100000, 0x40000, 0, 0, NULL);
    }
    cr_assert_eq(maps__lookup(&m, used, 0x7f0000001234, &mod, NULL), 0);
    cr_assert_str_eq(mod.path, "/lib/libc.so.6");
    cr_assert_eq(maps__lookup(&m, lib_at, 0x7f0000001234, &mod, NULL), 0);
    cr_assert_eq(maps__lookup(&m, used, 0x10000000, &mod, NULL), -ENOENT);
    /* A reservation over 64 regions (the `big` list), then a file inside it. */
    add(SLUICE_MAP_MMAP, 0x200000000, 1ull << 32, 0, 0, NULL);
    cr_assert_eq(maps__lookup(&m, used, 0x2deadbeef, &mod, NULL), 0);
    cr_assert_null(mod.path);
    cr_assert_eq(mod.prot, 0);
    add(SLUICE_MAP_MMAP, 0x2dea00000, 0x200000, 5, 0x1000, "/x");
    cr_assert_eq(maps__lookup(&m, used, 0x2deadbeef, &mod, NULL), 0);
    cr_assert_str_eq(mod.path, "/x");
    cr_assert_eq(mod.offset, 0x1000 + 0xdbeef);
    cr_assert_eq(maps__lookup(&m, used, 0x2ffffffff, &mod, NULL), 0);
    cr_assert_null(mod.path, "the rest of the reservation");
}

/* Give the entry at @p at the identity of a mapped file (format 10). */
static void identity(uint64_t at, uint64_t ino)
{
    struct sluice_map_entry *e = (struct sluice_map_entry *)(log_area + at);

    e->dev = 8;
    e->ino = ino;
    e->size = 4096 * ino;
    e->mtime_ns = 1000 * (int64_t)ino;
}

/* The newest mapping of a path below a position, with its identity: what a live
 * session compares the file at that path with (sluice_file__changed()). */
Test(maps, mapped_finds_the_newest_mapping_of_a_path)
{
    uint64_t p1, p2;

    identity(add(SLUICE_MAP_MMAP, 0x10000, 0x1000, 5, 0, "/x"), 1);
    add(SLUICE_MAP_MMAP, 0x20000, 0x1000, 5, 0, "/y"); /* no identity (format 9's) */
    p1 = used;
    add(SLUICE_MAP_MUNMAP, 0x10000, 0x1000, 0, 0, NULL);
    identity(add_remap(0x30000, 0x1000, 0x40000, 0x1000, 0, "/x"), 2);
    p2 = used;
    identity(add(SLUICE_MAP_MMAP, 0x50000, 0x1000, 5, 0, "/x"), 3);

    cr_assert_eq(maps__mapped(&m, p1, "/x")->ino, 1);
    cr_assert_eq(maps__mapped(&m, p2, "/x")->ino, 2, "an mremap maps it too");
    cr_assert_eq(maps__mapped(&m, used, "/x")->ino, 3);
    cr_assert_eq(maps__mapped(&m, used, "/x")->size, 3 * 4096);
    cr_assert_null(maps__mapped(&m, used, "/y"), "no identity: nothing to compare with");
    cr_assert_null(maps__mapped(&m, used, "/z"));
    cr_assert_null(maps__mapped(&m, 0, "/x"), "nothing below position 0");
}

/* The entry that mapped an address, with its file's identity: two files mapped
 * in turn at one path and one address are told apart (sluice_file__changed_at()). */
Test(maps, lookup_gives_the_entry_that_mapped_the_address)
{
    const struct sluice_map_entry *file = NULL;
    struct sluice_module mod;
    uint64_t p1;

    identity(add(SLUICE_MAP_MMAP, 0x10000, 0x2000, 5, 0, "/x"), 1);
    add(SLUICE_MAP_MPROTECT, 0x11000, 0x1000, 1, 0, NULL);
    p1 = used;
    add(SLUICE_MAP_MUNMAP, 0x10000, 0x2000, 0, 0, NULL);
    identity(add(SLUICE_MAP_MMAP, 0x10000, 0x2000, 5, 0, "/x"), 2);
    identity(add_remap(0x10000, 0x2000, 0x40000, 0x2000, 0, "/x"), 3);

    cr_assert_eq(maps__lookup(&m, p1, 0x11004, &mod, &file), 0);
    cr_assert_eq(file->ino, 1, "the mmap's, not the mprotect's");
    cr_assert_eq(mod.prot, 1);
    cr_assert_eq(maps__lookup(&m, used, 0x40004, &mod, &file), 0);
    cr_assert_eq(file->ino, 3, "an mremap's own entry");
    cr_assert_eq(maps__lookup(&m, used - 1, 0x10004, &mod, &file), 0);
    cr_assert_eq(file->ino, 2, "the second file at the same path and address");
}
