/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * maplog.c — the module log (see maplog.h): entries appended to the area
 * at the end of the block table's mapping, published by a release store of
 * maps_used after each whole entry.
 *
 * Owns: the log's entries and its counters. Threads: QEMU's mapping hooks
 * and lift (mmap_lock held); a lock of its own all the same, since fork
 * and exit paths read it too. Must never write past maps_capacity, nor
 * change an entry once maps_used covers it (consumers read it unlocked).
 */
#include "maplog.h"
#include "../consumer/say.h"

#include "blocks.h"
#include "image.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static struct {
    pthread_mutex_t lock;
    uint64_t used; /* bytes appended: this process's copy (a forked child's is the fork's) */
    int full;      /* a change was not logged: positions are SLUICE_MAPS_UNLOGGED from now on */
} M = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* The log area of the current table, or NULL. */
static uint8_t *area(struct sluice_blocks_hdr *h)
{
    return h ? (uint8_t *)h + h->maps_offset : NULL;
}

/*
 * Append @p e (its fixed part; bytes and path_len are set here) and
 * @p path_len bytes of @p path. Returns its position or MAPLOG_NONE.
 */
static uint64_t append(struct sluice_map_entry *e, const char *path, size_t path_len)
{
    struct sluice_blocks_hdr *h = blocks_hdr();
    uint64_t at, bytes;

    /* QEMU passes the guest's lengths; the kernel maps whole (4 KiB) pages. */
    e->len = e->len > UINT64_MAX - 4095 ? e->len : (e->len + 4095) & ~4095ull;
    e->old_len = e->old_len > UINT64_MAX - 4095 ? e->old_len : (e->old_len + 4095) & ~4095ull;
    if (!h) {
        return MAPLOG_NONE;
    }
    path_len = path_len > UINT16_MAX ? UINT16_MAX : path_len;
    bytes = (sizeof(*e) + path_len + 7) & ~7ull;
    pthread_mutex_lock(&M.lock);
    at = M.used;
    if (at + bytes > h->maps_capacity) {
        h->maps_dropped++;
        __atomic_store_n(&M.full, 1, __ATOMIC_RELAXED);
        pthread_mutex_unlock(&M.lock);
        return MAPLOG_NONE;
    }
    e->bytes = (uint32_t)bytes;
    e->path_len = (uint16_t)path_len;
    memcpy(area(h) + at, e, sizeof(*e));
    memset(area(h) + at + sizeof(*e), 0, bytes - sizeof(*e));
    memcpy(area(h) + at + sizeof(*e), path, path_len);
    M.used = at + bytes;
    __atomic_store_n(&h->maps_used, M.used, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&M.lock);
    return at;
}

/* An mmap or mremap entry for [start, start + len): the file there, if any. */
static uint64_t append_mapping(struct sluice_map_entry *e, int file)
{
    static __thread struct image_file f; /* PATH_MAX bytes: not on a vCPU's stack */

    e->image = SLUICE_MAP_ANON;
    if (file && image_file_at(e->start, &f) == 0) {
        e->image = f.id;
        e->offset = f.offset;
        e->base = f.base;
        e->dev = f.dev;
        e->ino = f.ino;
        e->size = f.size;
        e->mtime_ns = f.mtime_ns;
        e->ctime_ns = f.ctime_ns;
        return append(e, f.path, strlen(f.path));
    }
    return append(e, "", 0);
}

uint64_t maplog_mmap(uint64_t start, uint64_t len, int prot, int file)
{
    struct sluice_map_entry e = {
        .kind = SLUICE_MAP_MMAP, .prot = (uint32_t)prot & 7, .start = start, .len = len};

    return append_mapping(&e, file);
}

uint64_t maplog_munmap(uint64_t start, uint64_t len)
{
    struct sluice_map_entry e = {
        .kind = SLUICE_MAP_MUNMAP, .image = SLUICE_MAP_ANON, .start = start, .len = len};

    return append(&e, "", 0);
}

uint64_t maplog_mprotect(uint64_t start, uint64_t len, int prot)
{
    struct sluice_map_entry e = {.kind = SLUICE_MAP_MPROTECT,
                                 .prot = (uint32_t)prot & 7,
                                 .image = SLUICE_MAP_ANON,
                                 .start = start,
                                 .len = len};

    return append(&e, "", 0);
}

uint64_t maplog_mremap(uint64_t old_start, uint64_t old_len, uint64_t start, uint64_t len)
{
    struct sluice_map_entry e = {.kind = SLUICE_MAP_MREMAP,
                                 .start = start,
                                 .len = len,
                                 .old_start = old_start,
                                 .old_len = old_len};

    /* The protection moves with the mapping; the consumer finds it in the log. */
    return append_mapping(&e, 1);
}

uint64_t maplog_position(void)
{
    return __atomic_load_n(&M.full, __ATOMIC_RELAXED) ? SLUICE_MAPS_UNLOGGED
                                                      : __atomic_load_n(&M.used, __ATOMIC_RELAXED);
}

uint64_t maplog_fork_bytes(uint64_t capacity)
{
    /* The parent may append meanwhile, past M.used (ours is the fork's): those never change. */
    if (M.used > capacity) {
        M.used = 0;
    }
    return M.used;
}

void maplog_after_fork_child(void)
{
    struct sluice_blocks_hdr *h = blocks_hdr();

    pthread_mutex_init(&M.lock, NULL);
    if (!h) {
        M.used = 0;
        return;
    }
    __atomic_store_n(&h->maps_used, M.used, __ATOMIC_RELEASE);
}

void maplog_report(void)
{
    struct sluice_blocks_hdr *h = blocks_hdr();

    if (h && h->maps_dropped) {
        say("sluice-jitter: module log full (%llu bytes): %llu mapping changes not logged; "
            "consumers may not name the file of code mapped after that\n",
            (unsigned long long)h->maps_capacity, (unsigned long long)h->maps_dropped);
    }
}
