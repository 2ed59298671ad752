/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * block_table.c — mapping and checking the block tables (layout:
 * sluice/record.h, "Block table"), one per arena, refcounted by the rings
 * that name it.
 *
 * Runs on the control thread (a ring is announced) and the ordering thread
 * (a ring ended), under the registry's lock; workers read the mapped words
 * without it (block.c), and a table is unmapped only when no ring of its
 * arena has chunks left. A guest may have thousands of threads, so a table
 * is mapped once per arena, never per ring. The producer is another process
 * that may be buggy or hostile: the table is mapped PROT_READ, its header
 * is copied before it is checked, and its capacity is never re-read; the
 * one field read live (used_words) is checked against it at every use.
 */
#include "block_table.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -code;
}

/* The last table serial handed out. */
static uint64_t serials;

int block_table__check(struct block_table *bt, const void *base, uint64_t bytes, char *err,
                       size_t errlen)
{
    struct sluice_blocks_hdr h;

    memset(bt, 0, sizeof(*bt));
    if (bytes < SLUICE_BLOCKS_HDR_BYTES) {
        return fail(err, errlen, EINVAL, "block table: blocks_bytes %" PRIu64 " < header %u", bytes,
                    SLUICE_BLOCKS_HDR_BYTES);
    }
    /* A private copy: the producer cannot change what we checked. */
    memcpy(&h, base, sizeof(h));
    if (h.magic != SLUICE_BLOCKS_MAGIC) {
        return fail(err, errlen, EINVAL, "block table: bad magic 0x%016" PRIx64 " (want 0x%016llx)",
                    h.magic, SLUICE_BLOCKS_MAGIC);
    }
    if (h.version != SLUICE_FORMAT_VERSION) {
        return fail(err, errlen, EINVAL,
                    "block table: format version %" PRIu32 ", this consumer reads %u", h.version,
                    SLUICE_FORMAT_VERSION);
    }
    if (h.hdr_bytes != SLUICE_BLOCKS_HDR_BYTES) {
        return fail(err, errlen, EINVAL, "block table: hdr_bytes %" PRIu32 " (want %u)",
                    h.hdr_bytes, SLUICE_BLOCKS_HDR_BYTES);
    }
    if (h.capacity_words > (bytes - SLUICE_BLOCKS_HDR_BYTES) / 8) {
        return fail(err, errlen, EINVAL,
                    "block table: capacity_words %" PRIu64 " does not fit in blocks_bytes %" PRIu64,
                    h.capacity_words, bytes);
    }
    if (h.maps_capacity &&
        (h.maps_offset % 8 || h.maps_offset < SLUICE_BLOCKS_HDR_BYTES + h.capacity_words * 8 ||
         h.maps_offset > bytes || h.maps_capacity > bytes - h.maps_offset)) {
        return fail(err, errlen, EINVAL,
                    "block table: maps_offset %" PRIu64 " maps_capacity %" PRIu64
                    " do not fit after the descriptors in blocks_bytes %" PRIu64,
                    h.maps_offset, h.maps_capacity, bytes);
    }
    bt->hdr = base;
    bt->data = (const uint64_t *)((const uint8_t *)base + SLUICE_BLOCKS_HDR_BYTES);
    bt->capacity_words = h.capacity_words;
    bt->maps_offset_ = h.maps_offset;
    bt->maps_capacity_ = h.maps_capacity;
    /* Chunks' views tell tables apart by it, not by an address malloc may reuse. */
    bt->serial = __atomic_add_fetch(&serials, 1, __ATOMIC_RELAXED);
    return 0;
}

void block_tables__init(struct block_tables *ts)
{
    pthread_mutex_init(&ts->lock, NULL);
    ts->list = NULL;
}

/* Check where the ring says the table is, against the arena's size. */
static int check_place(const struct stat *st, uint64_t offset, uint64_t bytes, char *err,
                       size_t errlen)
{
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);

    if (offset % page != 0) {
        return fail(err, errlen, EINVAL,
                    "block table: blocks_offset %" PRIu64 " is not page-aligned", offset);
    }
    if (bytes % page != 0 || bytes > BLOCK_TABLE_MAX_BYTES) {
        return fail(err, errlen, EINVAL,
                    "block table: blocks_bytes %" PRIu64
                    " is not page-aligned or is larger than %llu",
                    bytes, BLOCK_TABLE_MAX_BYTES);
    }
    if ((uint64_t)st->st_size < offset || (uint64_t)st->st_size - offset < bytes) {
        return fail(err, errlen, EINVAL,
                    "block table: file size %lld < blocks_offset %" PRIu64
                    " + blocks_bytes %" PRIu64,
                    (long long)st->st_size, offset, bytes);
    }
    return 0;
}

/* Map and check a new table; the caller links it. */
static int map_table(int fd, const struct stat *st, uint64_t offset, uint64_t bytes,
                     struct block_table **out, char *err, size_t errlen)
{
    struct block_table *bt;
    void *base;
    int rc = check_place(st, offset, bytes, err, errlen);

    if (rc) {
        return rc;
    }
    bt = malloc(sizeof(*bt));
    if (!bt) {
        return fail(err, errlen, ENOMEM, "block table: out of memory");
    }
    base = mmap(NULL, (size_t)bytes, PROT_READ, MAP_SHARED, fd, (off_t)offset);
    if (base == MAP_FAILED) {
        int e = errno;

        free(bt);
        return fail(err, errlen, e, "block table: mapping %" PRIu64 " bytes: %s", bytes,
                    strerror(e));
    }
    rc = block_table__check(bt, base, bytes, err, errlen);
    if (rc) {
        munmap(base, (size_t)bytes);
        free(bt);
        return rc;
    }
    if (bt->maps_capacity_) {
        bt->maps = malloc(sizeof(*bt->maps));
        if (!bt->maps) {
            munmap(base, (size_t)bytes);
            free(bt);
            return fail(err, errlen, ENOMEM, "block table: out of memory");
        }
        maps__init(bt->maps, (const uint8_t *)base + bt->maps_offset_, bt->maps_capacity_,
                   &bt->hdr->maps_used, &bt->hdr->maps_dropped);
        bt->snapshot_at = maps__used(bt->maps);
    }
    bt->map = base;
    bt->map_len = (size_t)bytes;
    bt->dev = (uint64_t)st->st_dev;
    bt->ino = (uint64_t)st->st_ino;
    bt->offset = offset;
    bt->bytes = bytes;
    bt->refs = 1;
    *out = bt;
    return 0;
}

int block_tables__get(struct block_tables *ts, int fd, uint64_t offset, uint64_t bytes,
                      struct block_table **out, char *err, size_t errlen)
{
    struct block_table *bt;
    struct stat st;
    int rc = 0;

    *out = NULL;
    if (bytes == 0) {
        return offset == 0
                   ? 0
                   : fail(err, errlen, EINVAL,
                          "block table: blocks_offset %" PRIu64 " with blocks_bytes 0", offset);
    }
    if (fstat(fd, &st) < 0) {
        return fail(err, errlen, errno, "block table: fstat: %s", strerror(errno));
    }
    pthread_mutex_lock(&ts->lock);
    for (bt = ts->list; bt; bt = bt->next) {
        if (bt->dev == (uint64_t)st.st_dev && bt->ino == (uint64_t)st.st_ino) {
            break;
        }
    }
    if (bt && (bt->offset != offset || bt->bytes != bytes)) {
        rc = fail(err, errlen, EINVAL,
                  "block table: blocks_offset %" PRIu64 " blocks_bytes %" PRIu64
                  ", but the arena's other rings name %" PRIu64 " and %" PRIu64,
                  offset, bytes, bt->offset, bt->bytes);
    } else if (bt) {
        bt->refs++;
        *out = bt;
    } else {
        rc = map_table(fd, &st, offset, bytes, out, err, errlen);
        if (rc == 0) {
            (*out)->next = ts->list;
            ts->list = *out;
        }
    }
    pthread_mutex_unlock(&ts->lock);
    return rc;
}

void block_tables__ref(struct block_tables *ts, struct block_table *bt)
{
    if (bt) {
        pthread_mutex_lock(&ts->lock);
        bt->refs++;
        pthread_mutex_unlock(&ts->lock);
    }
}

void block_tables__put(struct block_tables *ts, struct block_table *bt)
{
    struct block_table **p;

    if (!bt) {
        return;
    }
    pthread_mutex_lock(&ts->lock);
    if (--bt->refs > 0) {
        bt = NULL;
    } else {
        for (p = &ts->list; *p && *p != bt; p = &(*p)->next) {
        }
        if (*p) {
            *p = bt->next;
        }
    }
    pthread_mutex_unlock(&ts->lock);
    if (bt) {
        if (bt->maps) {
            maps__destroy(bt->maps);
            free(bt->maps);
        }
        munmap(bt->map, bt->map_len);
        free(bt);
    }
}

void block_tables__destroy(struct block_tables *ts)
{
    pthread_mutex_destroy(&ts->lock);
    ts->list = NULL;
}
