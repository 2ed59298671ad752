/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * maps.c — reading a process's module log (see maps.h).
 *
 * Owns the parsed copies of the entries. Lookups walk the entries below a
 * position backwards, to the newest that says something about the address:
 * processes change their mappings tens or hundreds of times, not millions
 * (the log holds at most 16 MiB of them). Never writes the shared log,
 * never reads it outside [log, log + capacity), never trusts a field of an
 * entry before checking it.
 */
#include "maps.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void maps__init(struct maps *m, const uint8_t *log, uint64_t capacity, const uint64_t *used,
                const uint64_t *dropped)
{
    memset(m, 0, sizeof(*m));
    m->log = log;
    m->capacity = capacity;
    m->used = used;
    m->dropped = dropped;
    pthread_mutex_init(&m->lock, NULL);
}

void maps__destroy(struct maps *m)
{
    for (uint64_t i = 0; i < m->size_regions; i++) {
        free(m->regions[i].idx);
    }
    free(m->regions);
    free(m->big.idx);
    for (uint64_t i = 0; i < m->n; i++) {
        free(m->block[i / MAPS_BLOCK][i % MAPS_BLOCK].path);
    }
    for (unsigned b = 0; b < MAPS_BLOCKS; b++) {
        free(m->block[b]);
    }
    pthread_mutex_destroy(&m->lock);
}

uint64_t maps__used(const struct maps *m)
{
    uint64_t used = m->used ? __atomic_load_n(m->used, __ATOMIC_ACQUIRE) : 0;

    return used > m->capacity ? m->capacity : used;
}

int maps__full(const struct maps *m)
{
    return m->dropped && __atomic_load_n(m->dropped, __ATOMIC_RELAXED) != 0;
}

static struct maps_entry *entry(const struct maps *m, uint64_t i)
{
    return &m->block[i / MAPS_BLOCK][i % MAPS_BLOCK];
}

/* Check the copy @p e of the entry at @p at (@p room bytes before maps_used). */
static int check(struct maps *m, const struct sluice_map_entry *e, uint64_t at, uint64_t room)
{
    const char *why = NULL;

    if (e->bytes < sizeof(*e) || e->bytes % 8 || e->bytes > room) {
        why = "bytes";
    } else if (e->path_len > e->bytes - sizeof(*e)) {
        why = "path_len";
    } else if (e->kind < SLUICE_MAP_MMAP || e->kind > SLUICE_MAP_MREMAP) {
        why = "kind";
    } else if (e->start + e->len < e->start || e->old_start + e->old_len < e->old_start ||
               e->len > UINT64_MAX - 4095 || e->old_len > UINT64_MAX - 4095) {
        why = "start + len";
    }
    if (why) {
        snprintf(m->bad, sizeof(m->bad),
                 "module log: entry at byte %" PRIu64 ": bad %s (bytes %" PRIu32 ", kind %u)", at,
                 why, e->bytes, e->kind);
        return -1;
    }
    return 0;
}

/* ---- the index by region (lock held) ------------------------------------------- */

static uint64_t mix(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    return k ^ (k >> 33);
}

/* The list of region @p key, made if @p make (NULL when absent, or without memory). */
static struct maps_region *region(struct maps *m, uint64_t key, int make)
{
    uint64_t i;

    key++;
    if (make && 2 * (m->n_regions + 1) > m->size_regions) {
        uint64_t size = m->size_regions ? 2 * m->size_regions : 256;
        struct maps_region *t = calloc(size, sizeof(*t));

        if (!t) {
            return NULL;
        }
        for (uint64_t k = 0; k < m->size_regions; k++) {
            if (m->regions[k].key) {
                for (i = mix(m->regions[k].key) & (size - 1); t[i].key; i = (i + 1) & (size - 1)) {
                }
                t[i] = m->regions[k];
            }
        }
        free(m->regions);
        m->regions = t;
        m->size_regions = size;
    }
    for (i = m->size_regions ? mix(key) & (m->size_regions - 1) : 0;
         m->size_regions && m->regions[i].key; i = (i + 1) & (m->size_regions - 1)) {
        if (m->regions[i].key == key) {
            return &m->regions[i];
        }
    }
    if (!make || !m->size_regions) {
        return NULL;
    }
    m->regions[i].key = key;
    m->n_regions++;
    return &m->regions[i];
}

static int push(struct maps_region *r, uint32_t idx)
{
    if (r->n && r->idx[r->n - 1] == idx) {
        return 0; /* both ranges of an mremap in one region */
    }
    if (r->n == r->cap) {
        uint32_t cap = r->cap ? 2 * r->cap : 8, *p = realloc(r->idx, cap * sizeof(*p));

        if (!p) {
            return -1;
        }
        r->idx = p;
        r->cap = cap;
    }
    r->idx[r->n++] = idx;
    return 0;
}

/* Index entry @p idx under each region of [start, start + len). */
static int index_range(struct maps *m, uint32_t idx, uint64_t start, uint64_t len)
{
    uint64_t first = start >> MAPS_REGION_SHIFT, last;

    if (len == 0) {
        return 0;
    }
    last = (start + len - 1) >> MAPS_REGION_SHIFT;
    if (last - first >= MAPS_REGION_MAX) {
        return push(&m->big, idx);
    }
    for (uint64_t k = first; k <= last; k++) {
        struct maps_region *r = region(m, k, 1);

        if (!r || push(r, idx) < 0) {
            return -1;
        }
    }
    return 0;
}

/* Parse the entry at m->parsed (lock held); 0, or -1 (bad, or no memory). */
static int parse_one(struct maps *m, uint64_t used)
{
    struct maps_entry x = {.at = m->parsed};
    uint64_t b = m->n / MAPS_BLOCK;

    if (used - m->parsed < sizeof(x.e)) {
        snprintf(m->bad, sizeof(m->bad), "module log: entry at byte %" PRIu64 " is cut short",
                 m->parsed);
        return -1;
    }
    memcpy(&x.e, m->log + m->parsed, sizeof(x.e));
    if (check(m, &x.e, m->parsed, used - m->parsed) < 0) {
        return -1;
    }
    /* The kernel maps and unmaps whole pages: a guest's munmap(p, 1) unmaps p's page. */
    x.e.len = (x.e.len + 4095) & ~4095ull;
    x.e.old_len = (x.e.old_len + 4095) & ~4095ull;
    if (b >= MAPS_BLOCKS || (!m->block[b] && !(m->block[b] = calloc(MAPS_BLOCK, sizeof(x))))) {
        snprintf(m->bad, sizeof(m->bad), "module log: out of memory at entry %" PRIu64, m->n);
        return -1;
    }
    if (x.e.path_len) {
        x.path = malloc(x.e.path_len + 1u);
        if (!x.path) {
            snprintf(m->bad, sizeof(m->bad), "module log: out of memory at entry %" PRIu64, m->n);
            return -1;
        }
        memcpy(x.path, m->log + m->parsed + sizeof(x.e), x.e.path_len);
        x.path[x.e.path_len] = '\0';
    }
    x.end = m->parsed + x.e.bytes;
    if (index_range(m, (uint32_t)m->n, x.e.start, x.e.len) < 0 ||
        (x.e.kind == SLUICE_MAP_MREMAP &&
         index_range(m, (uint32_t)m->n, x.e.old_start, x.e.old_len) < 0)) {
        free(x.path);
        snprintf(m->bad, sizeof(m->bad), "module log: out of memory at entry %" PRIu64, m->n);
        return -1;
    }
    *entry(m, m->n) = x;
    m->parsed = x.end;
    __atomic_store_n(&m->n, m->n + 1, __ATOMIC_RELEASE);
    return 0;
}

uint64_t maps__sync(struct maps *m, uint64_t upto)
{
    uint64_t used = maps__used(m), n = __atomic_load_n(&m->n, __ATOMIC_ACQUIRE);

    upto = upto < used ? upto : used;
    if (n > 0 && entry(m, n - 1)->end >= upto) {
        return n;
    }
    pthread_mutex_lock(&m->lock);
    while (m->parsed < upto && !m->bad[0] && parse_one(m, used) == 0) {
    }
    n = m->n;
    pthread_mutex_unlock(&m->lock);
    return n;
}

/* Entries whose end is at or below @p pos (parsing up to it). */
static uint64_t below(struct maps *m, uint64_t pos)
{
    uint64_t n = maps__sync(m, pos), lo = 0, hi = n;

    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;

        if (entry(m, mid)->end <= pos) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

const struct maps_entry *maps__entry_at(struct maps *m, uint64_t at)
{
    uint64_t n = maps__sync(m, at + 1); /* the entry starting at `at`, if any, is parsed */

    for (uint64_t lo = 0, hi = n; lo < hi;) {
        uint64_t mid = lo + (hi - lo) / 2;
        const struct maps_entry *x = entry(m, mid);

        if (x->at == at) {
            return x;
        }
        if (x->at < at) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return NULL;
}

static int in(uint64_t addr, uint64_t start, uint64_t len)
{
    return addr - start < len;
}

/* The largest index below @p bound in @p r's list, or -1. */
static int64_t last_below(const struct maps_region *r, uint64_t bound)
{
    uint32_t lo = 0, hi = r ? r->n : 0;

    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;

        if (r->idx[mid] < bound) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo ? (int64_t)r->idx[lo - 1] : -1;
}

/* The newest entry below @p bound that may touch @p addr, or -1 (lock held). */
static int64_t previous(struct maps *m, uint64_t addr, uint64_t bound)
{
    int64_t a = last_below(region(m, addr >> MAPS_REGION_SHIFT, 0), bound);
    int64_t b = last_below(&m->big, bound);

    return a > b ? a : b;
}

/* maps__lookup() over the first @p n entries (lock held). */
static int walk(struct maps *m, uint64_t n, uint64_t addr, struct sluice_module *out,
                const struct sluice_map_entry **file)
{
    int need_file = 1, need_prot = 1;

    for (int64_t j = previous(m, addr, n); j >= 0; j = previous(m, addr, (uint64_t)j)) {
        uint64_t i = (uint64_t)j;
        const struct sluice_map_entry *e = &entry(m, i)->e;

        if (e->kind == SLUICE_MAP_MPROTECT) {
            if (need_prot && in(addr, e->start, e->len)) {
                out->prot = e->prot;
                need_prot = 0;
            }
            continue;
        }
        if (!in(addr, e->start, e->len)) {
            /* Moved away from here: nothing is mapped at the old address since. */
            if (e->kind == SLUICE_MAP_MREMAP && need_file && in(addr, e->old_start, e->old_len)) {
                return -ENOENT;
            }
            continue;
        }
        if (e->kind == SLUICE_MAP_MUNMAP) {
            return need_file ? -ENOENT : 0; /* (a moved mapping's old range: its prot is lost) */
        }
        if (need_file) {
            out->start = e->start;
            out->end = e->start + e->len;
            out->image = e->image;
            out->path = entry(m, i)->path;
            out->base = e->image == SLUICE_MAP_ANON ? 0 : e->base;
            out->offset = e->image == SLUICE_MAP_ANON ? 0 : e->offset + (addr - e->start);
            if (file) {
                *file = e;
            }
            need_file = 0;
        }
        if (e->kind == SLUICE_MAP_MMAP) {
            if (need_prot) {
                out->prot = e->prot;
            }
            return 0;
        }
        /* MREMAP: the protection is the moved mapping's, at its old address. */
        if (!need_prot) {
            return 0;
        }
        addr = e->old_start + (addr - e->start);
    }
    if (!need_file) {
        out->prot = 0; /* moved from where the log does not reach */
        return 0;
    }
    return -ENOENT;
}

int maps__lookup(struct maps *m, uint64_t pos, uint64_t addr, struct sluice_module *out,
                 const struct sluice_map_entry **file)
{
    uint64_t n = below(m, pos);
    int rc;

    pthread_mutex_lock(&m->lock);
    rc = walk(m, n, addr, out, file);
    pthread_mutex_unlock(&m->lock);
    return rc;
}

/* ---- snapshot ------------------------------------------------------------------ */

/* A piece of the map: [start, end) from entry `src` (file offset at start), protection prot. */
struct piece {
    uint64_t start, end, offset;
    uint32_t prot;
    const struct maps_entry *src;
};

struct pieces {
    struct piece *p;
    size_t n, cap;
};

static int add(struct pieces *ps, struct piece x)
{
    if (ps->n == ps->cap) {
        size_t cap = ps->cap ? 2 * ps->cap : 64;
        struct piece *p = realloc(ps->p, cap * sizeof(*p));

        if (!p) {
            return -ENOMEM;
        }
        ps->p = p;
        ps->cap = cap;
    }
    ps->p[ps->n++] = x;
    return 0;
}

/* Cut pieces at @p a and @p b so none straddles either. */
static int cut(struct pieces *ps, uint64_t a, uint64_t b)
{
    for (size_t i = 0; i < ps->n; i++) {
        uint64_t at[2] = {a, b};

        for (int k = 0; k < 2; k++) {
            struct piece *x = &ps->p[i];

            if (at[k] > x->start && at[k] < x->end) {
                struct piece tail = *x;

                tail.offset += at[k] - x->start;
                tail.start = at[k];
                x->end = at[k];
                if (add(ps, tail) < 0) {
                    return -ENOMEM;
                }
            }
        }
    }
    return 0;
}

/* Remove what lies in [a, b) (pieces were cut at a and b). */
static void drop(struct pieces *ps, uint64_t a, uint64_t b)
{
    for (size_t i = 0; i < ps->n;) {
        if (ps->p[i].start >= a && ps->p[i].end <= b) {
            ps->p[i] = ps->p[--ps->n];
        } else {
            i++;
        }
    }
}

static int apply(struct pieces *ps, const struct maps_entry *x)
{
    const struct sluice_map_entry *e = &x->e;
    uint64_t end = e->start + e->len;
    uint32_t prot = 0;

    if (cut(ps, e->start, end) < 0) {
        return -ENOMEM;
    }
    if (e->kind == SLUICE_MAP_MPROTECT) {
        for (size_t i = 0; i < ps->n; i++) {
            if (ps->p[i].start >= e->start && ps->p[i].end <= end) {
                ps->p[i].prot = e->prot;
            }
        }
        return 0;
    }
    if (e->kind == SLUICE_MAP_MREMAP) {
        for (size_t i = 0; i < ps->n; i++) {
            if (in(e->old_start, ps->p[i].start, ps->p[i].end - ps->p[i].start)) {
                prot = ps->p[i].prot;
            }
        }
        if (cut(ps, e->old_start, e->old_start + e->old_len) < 0) {
            return -ENOMEM;
        }
        drop(ps, e->old_start, e->old_start + e->old_len);
    }
    drop(ps, e->start, end);
    if (e->kind == SLUICE_MAP_MUNMAP || e->len == 0) {
        return 0;
    }
    return add(ps, (struct piece){e->start, end, e->offset,
                                  e->kind == SLUICE_MAP_MMAP ? e->prot : prot, x});
}

static int by_start(const void *a, const void *b)
{
    const struct piece *x = a, *y = b;

    return x->start < y->start ? -1 : x->start > y->start;
}

int maps__snapshot(struct maps *m, uint64_t pos, void (*fn)(void *arg, const struct sluice_map *e),
                   void *arg)
{
    struct pieces ps = {0};
    uint64_t n = below(m, pos);
    int rc = 0;

    for (uint64_t i = 0; i < n && rc == 0; i++) {
        rc = apply(&ps, entry(m, i));
    }
    if (rc == 0 && ps.n > 0) { /* (qsort of no array: undefined, says C) */
        qsort(ps.p, ps.n, sizeof(*ps.p), by_start);
        for (size_t i = 0; i < ps.n; i++) {
            struct sluice_map ev;

            maps__event(ps.p[i].src, &ev);
            ev.kind = SLUICE_MAP_MMAP;
            ev.start = ps.p[i].start;
            ev.len = ps.p[i].end - ps.p[i].start;
            ev.offset = ev.image == SLUICE_MAP_ANON ? 0 : ps.p[i].offset;
            ev.prot = ps.p[i].prot;
            ev.old_start = ev.old_len = 0;
            ev.snapshot = 1;
            fn(arg, &ev);
        }
    }
    free(ps.p);
    return rc;
}

const struct sluice_map_entry *maps__mapped(struct maps *m, uint64_t pos, const char *path)
{
    for (uint64_t i = below(m, pos); i-- > 0;) {
        const struct maps_entry *x = entry(m, i);

        if ((x->e.kind == SLUICE_MAP_MMAP || x->e.kind == SLUICE_MAP_MREMAP) && x->e.ino &&
            x->path && strcmp(x->path, path) == 0) {
            return &x->e;
        }
    }
    return NULL;
}

void maps__event(const struct maps_entry *x, struct sluice_map *out)
{
    const struct sluice_map_entry *e = &x->e;

    *out = (struct sluice_map){
        .kind = e->kind,
        .prot = e->kind == SLUICE_MAP_MMAP || e->kind == SLUICE_MAP_MPROTECT ? e->prot : 0,
        .start = e->start,
        .len = e->len,
        .offset = e->image == SLUICE_MAP_ANON ? 0 : e->offset,
        .base = e->image == SLUICE_MAP_ANON ? 0 : e->base,
        .old_start = e->kind == SLUICE_MAP_MREMAP ? e->old_start : 0,
        .old_len = e->kind == SLUICE_MAP_MREMAP ? e->old_len : 0,
        .image = e->image,
        .path = x->path,
    };
}

const char *maps__bad(const struct maps *m)
{
    return m->bad;
}
