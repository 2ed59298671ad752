/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * image.c — the guest's mapped images (see image.h).
 *
 * Two small tables: the images (one per distinct file, by device and
 * inode; never removed, so ids stay stable) and the mappings (guest ranges
 * pointing at an image). Lookups are linear: they happen once per lifted
 * instruction with a filter, and processes map tens of files, not
 * thousands. Never called from translated code.
 */
#include "image.h"

#include "fds.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct image {
    dev_t dev;
    ino_t ino;
    char *path;
    int id;
};

struct mapping {
    uint64_t start, end; /* guest [start, end) */
    int image;           /* index into T.images */
    uint64_t offset;     /* file offset of start */
    uint64_t size;       /* the file's st_size when it was mapped */
    int64_t mtime_ns;    /* and its st_mtim, ns */
    int64_t ctime_ns;    /* and its st_ctim, ns */
};

static struct {
    pthread_mutex_t lock;
    struct image *images;
    size_t n_images, cap_images;
    struct mapping *maps;
    size_t n_maps, cap_maps;
    dev_t main_dev;
    ino_t main_ino;
    int have_main;
    int next_id; /* next id for a non-main image */
} T = {.lock = PTHREAD_MUTEX_INITIALIZER, .next_id = 1};

int image_init(const char *exe_path)
{
    struct stat st;

    if (stat(exe_path, &st) < 0) {
        return -errno;
    }
    T.main_dev = st.st_dev;
    T.main_ino = st.st_ino;
    T.have_main = 1;
    return 0;
}

/* Grow @p *arr (of @p size-byte elements) to hold one more; 0 or -ENOMEM. */
static int grow(void **arr, size_t *cap, size_t n, size_t size)
{
    size_t ncap = *cap ? *cap * 2 : 16;
    void *p;

    if (n < *cap) {
        return 0;
    }
    p = realloc(*arr, ncap * size);
    if (!p) {
        return -ENOMEM;
    }
    *arr = p;
    *cap = ncap;
    return 0;
}

/* Remove [start, end) from every mapping, splitting those that straddle it. */
static void punch(uint64_t start, uint64_t end)
{
    size_t i = 0;

    while (i < T.n_maps) {
        struct mapping *m = &T.maps[i];

        if (m->end <= start || m->start >= end) {
            i++;
        } else if (m->start < start && m->end > end) {
            struct mapping tail = *m; /* the same file, as it was when mapped */

            tail.start = end;
            tail.offset = m->offset + (end - m->start);

            m->end = start;
            if (grow((void **)&T.maps, &T.cap_maps, T.n_maps, sizeof(*T.maps)) == 0) {
                T.maps[T.n_maps++] = tail;
            }
            i++;
        } else if (m->start < start) {
            m->end = start;
            i++;
        } else if (m->end > end) {
            m->offset += end - m->start;
            m->start = end;
            i++;
        } else {
            T.maps[i] = T.maps[--T.n_maps];
        }
    }
}

/*
 * Index of the image for @p st opened as @p fd (added if new), or -1 when
 * out of memory. An image is a file by the path it was mapped from: two
 * hard links of one file are two images (a tool names, and a filter
 * chooses, code by the name the guest loaded it by).
 */
static int image_index(const struct stat *st, int fd)
{
    char link[64], path[PATH_MAX];
    ssize_t n;
    size_t i;
    int is_main;

    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    n = fds_readlink(link, path, sizeof(path) - 1);
    path[n > 0 ? n : 0] = '\0';
    for (i = 0; i < T.n_images; i++) {
        if (T.images[i].dev == st->st_dev && T.images[i].ino == st->st_ino &&
            strcmp(T.images[i].path ? T.images[i].path : "", path) == 0) {
            return (int)i;
        }
    }
    if (grow((void **)&T.images, &T.cap_images, T.n_images, sizeof(*T.images)) < 0) {
        return -1;
    }
    is_main = T.have_main && st->st_dev == T.main_dev && st->st_ino == T.main_ino;
    T.images[T.n_images] = (struct image){
        .dev = st->st_dev,
        .ino = st->st_ino,
        .path = strdup(path),
        .id = is_main ? 0 : T.next_id++,
    };
    return (int)T.n_images++;
}

void image_mmap(uint64_t start, uint64_t len, int fd, uint64_t offset)
{
    struct stat st;
    int idx;

    pthread_mutex_lock(&T.lock);
    punch(start, start + len);
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
        idx = image_index(&st, fd);
        if (idx >= 0 && grow((void **)&T.maps, &T.cap_maps, T.n_maps, sizeof(*T.maps)) == 0) {
            T.maps[T.n_maps++] = (struct mapping){
                .start = start,
                .end = start + len,
                .image = idx,
                .offset = offset,
                .size = (uint64_t)st.st_size,
                .mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec,
                .ctime_ns = (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec,
            };
        }
    }
    pthread_mutex_unlock(&T.lock);
}

void image_munmap(uint64_t start, uint64_t len)
{
    pthread_mutex_lock(&T.lock);
    punch(start, start + len);
    pthread_mutex_unlock(&T.lock);
}

/* The mapping holding guest address @p addr, or NULL. T.lock held. */
static const struct mapping *mapping_at(uint64_t addr)
{
    for (size_t i = 0; i < T.n_maps; i++) {
        if (addr >= T.maps[i].start && addr < T.maps[i].end) {
            return &T.maps[i];
        }
    }
    return NULL;
}

void image_mremap(uint64_t old_start, uint64_t old_len, uint64_t start, uint64_t len)
{
    struct mapping moved = {.start = start, .end = start + len, .image = -1};
    const struct mapping *m;

    pthread_mutex_lock(&T.lock);
    /* One mapping moves (the kernel's mremap takes one), so the file is the one at old_start. */
    if ((m = mapping_at(old_start))) {
        moved.image = m->image;
        moved.offset = m->offset + (old_start - m->start);
        moved.size = m->size;
        moved.mtime_ns = m->mtime_ns;
        moved.ctime_ns = m->ctime_ns;
    }
    punch(old_start, old_start + old_len);
    punch(start, start + len);
    if (moved.image >= 0 && grow((void **)&T.maps, &T.cap_maps, T.n_maps, sizeof(*T.maps)) == 0) {
        T.maps[T.n_maps++] = moved;
    }
    pthread_mutex_unlock(&T.lock);
}

/*
 * How far above the start of its load a mapping may place its file (start -
 * file offset) and be part of that load: a loader maps an ELF's segments
 * with the gaps their alignment leaves (pages to a few MiB); a second load
 * of the file, or a page of it mapped again elsewhere, lies further (as a
 * rule: closer, it is taken for a segment of the load).
 */
#define LOAD_SPREAD (16ull << 20)

/* Where mapping @p m puts its file's offset 0 (start - offset), or its start if that is
 * below address 0. */
static uint64_t origin_of(const struct mapping *m)
{
    return m->offset <= m->start ? m->start - m->offset : m->start;
}

/*
 * The base of the load mapping @p m is part of: the start of the nearest
 * mapping of offset 0 of its file (a load's first: an ELF's first segment
 * holds its header) at or below where @p m puts the file's offset 0, within
 * LOAD_SPREAD; else that place itself (a page of the file mapped alone).
 * For a file loaded whole that is its lowest address; a file mapped twice
 * at once (dlmopen, a page mapped again apart) has a base per load, so
 * pc - base is the offset in the file's layout in each. T.lock held.
 */
static uint64_t base_of(const struct mapping *m)
{
    uint64_t own = origin_of(m), base = own;
    int found = 0;

    for (size_t i = 0; i < T.n_maps; i++) {
        const struct mapping *n = &T.maps[i];

        if (n->image == m->image && n->offset == 0 && n->start <= own &&
            own - n->start < LOAD_SPREAD && (!found || n->start > base)) {
            base = n->start;
            found = 1;
        }
    }
    return base;
}

/* Image id, base and file offset of @p addr in mapping @p m. T.lock held. */
static void source_in(const struct mapping *m, uint64_t addr, uint32_t *id, uint64_t *base,
                      uint64_t *offset)
{
    *id = (uint32_t)T.images[m->image].id;
    *base = base_of(m);
    *offset = m->offset + (addr - m->start);
}

int image_source_at(uint64_t addr, uint32_t *id, uint64_t *base, uint64_t *offset)
{
    const struct mapping *m;

    pthread_mutex_lock(&T.lock);
    if ((m = mapping_at(addr))) {
        source_in(m, addr, id, base, offset);
    }
    pthread_mutex_unlock(&T.lock);
    return m ? 0 : -ENOENT;
}

int image_file_at(uint64_t addr, struct image_file *out)
{
    const struct mapping *m;

    pthread_mutex_lock(&T.lock);
    if ((m = mapping_at(addr))) {
        source_in(m, addr, &out->id, &out->base, &out->offset);
        out->dev = (uint64_t)T.images[m->image].dev;
        out->ino = (uint64_t)T.images[m->image].ino;
        out->size = m->size;
        out->mtime_ns = m->mtime_ns;
        out->ctime_ns = m->ctime_ns;
        snprintf(out->path, sizeof(out->path), "%s",
                 T.images[m->image].path ? T.images[m->image].path : "");
    }
    pthread_mutex_unlock(&T.lock);
    return m ? 0 : -ENOENT;
}

int image_of(uint64_t pc, struct sluice_image *out, const char **path)
{
    const struct mapping *m;
    int idx;

    pthread_mutex_lock(&T.lock);
    m = mapping_at(pc);
    idx = m ? m->image : -1;
    if (idx >= 0) {
        out->base = base_of(m);
        out->offset = pc - out->base;
        out->id = T.images[idx].id;
        out->flags = T.images[idx].id == 0 ? SLUICE_IMAGE_MAIN : 0;
        if (path) {
            *path = T.images[idx].path;
        }
    }
    pthread_mutex_unlock(&T.lock);
    return idx >= 0 ? 0 : -ENOENT;
}
