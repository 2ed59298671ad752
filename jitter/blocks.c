/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * blocks.c — the process's block table (see blocks.h): one descriptor per
 * distinct lifted TB, found again by a hash of its contents, so a TB that
 * QEMU flushes and lifts again keeps its id.
 *
 * Lift time only, but for blocks_index(), which reads descriptors a vCPU's
 * own TB named (so complete, and never rewritten). The table is shared with
 * consumers; the hash of descriptors is the jitter's own memory. Never
 * blocks a vCPU on anything but the lift-time lock. The same mapping holds
 * the module log (maplog.c writes it; this file only places it).
 */
#include "blocks.h"
#include "../consumer/say.h"

#include "arena.h"
#include "fds.h"
#include "image.h"
#include "maplog.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <sluice/record.h>

/*
 * Where a TB's code came from: the file, its base and the offset of the
 * first pc (image.c), or anonymous memory (image SLUICE_MAP_ANON). A
 * descriptor is reused only for a TB from the same place: then the map at
 * its old log position names what the map now would.
 */
struct source {
    uint64_t base, offset;
    uint32_t image;
};

struct slot {
    uint64_t id1; /* descriptor id + 1 */
    struct source src;
};

/* Where the module log starts in the table (record.h: maps_offset). */
#define MAPS_AT (BLOCKS_BYTES - BLOCKS_MAPS_BYTES)

static struct {
    pthread_mutex_t lock;          /* appends and the hash */
    struct sluice_blocks_hdr *hdr; /* our mapping of the table, NULL if none */
    uint64_t *data;                /* its descriptor words */
    uint64_t capacity;             /* data words */
    uint64_t used;                 /* data words appended (hdr->used_words is the published copy) */
    uint64_t offset;               /* of the table in the arena */
    struct slot *hash;             /* open addressing; id1 0 = empty slot */
    uint64_t hash_size;            /* slots, a power of two */
    uint64_t count;                /* descriptors */
    uint64_t refused;              /* TBs lifted without a block: the table was full */
    uint64_t refused_nomem;        /* of which for want of memory for the hash */
    int enabled;
} B = {.lock = PTHREAD_MUTEX_INITIALIZER};

/*
 * Map the table at B.offset in the (current) arena: anywhere (@p at NULL),
 * or in place of the mapping at @p at (MAP_FIXED). 0, or -errno.
 */
static int table_map(void *at)
{
    void *p;
    int err;

    fds_lock();
    p = mmap(at, BLOCKS_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED | (at ? MAP_FIXED : 0),
             arena_fd(), (off_t)B.offset);
    err = p == MAP_FAILED ? -errno : 0;
    fds_unlock();
    if (err < 0) {
        return err;
    }
    B.hdr = p;
    B.data = (uint64_t *)((uint8_t *)p + SLUICE_BLOCKS_HDR_BYTES);
    B.capacity = (BLOCKS_BYTES - SLUICE_BLOCKS_HDR_BYTES - BLOCKS_MAPS_BYTES) / 8;
    B.hdr->maps_offset = MAPS_AT;
    B.hdr->maps_capacity = BLOCKS_MAPS_BYTES;
    B.hdr->magic = SLUICE_BLOCKS_MAGIC;
    B.hdr->version = SLUICE_FORMAT_VERSION;
    B.hdr->hdr_bytes = SLUICE_BLOCKS_HDR_BYTES;
    B.hdr->capacity_words = B.capacity;
    return 0;
}

/* Allocate and map a fresh table in the (current) arena. */
static int table_new(void)
{
    int err = arena_alloc(BLOCKS_BYTES, &B.offset);

    return err < 0 ? err : table_map(NULL);
}

/*
 * Copy @p bytes from @p src to the arena at @p offset (page-aligned),
 * through a 1 MiB window mapped at a time. 0, or -errno.
 */
_Static_assert(SLUICE_BLOCKS_HDR_BYTES % 4096 == 0, "copy_in maps the data words at a page");
static int copy_in(const void *src, uint64_t bytes, uint64_t offset)
{
    const uint64_t window = 1u << 20;

    for (uint64_t at = 0; at < bytes; at += window) {
        uint64_t n = bytes - at < window ? bytes - at : window;
        void *w;
        int err;

        fds_lock();
        w = mmap(NULL, window, PROT_WRITE, MAP_SHARED, arena_fd(), (off_t)(offset + at));
        err = w == MAP_FAILED ? -errno : 0;
        fds_unlock();
        if (err < 0) {
            return err;
        }
        memcpy(w, (const uint8_t *)src + at, n);
        munmap(w, window);
    }
    return 0;
}

int blocks_open(int enabled)
{
    int err = table_new(); /* also without blocks: it holds the module log */

    B.enabled = enabled && err == 0;
    return err;
}

int blocks_after_fork_child(void)
{
    struct sluice_blocks_hdr *parent = B.hdr;
    const uint64_t *parent_data = B.data;
    int err;

    pthread_mutex_init(&B.lock, NULL);
    if (!parent) {
        return 0;
    }
    /*
     * The parent's descriptors and log as of the fork (it may append
     * meanwhile, past B.used and the log's fork bytes: what we copy never
     * changes) go to the child's place in its arena through a small window;
     * then the child's table is mapped over our view of the parent's, at
     * the same address. Both mapped at once took a second 80 MiB, which a
     * guest that used up its address space (mmap until ENOMEM) does not
     * leave: the child could not be traced, and was ended.
     */
    err = arena_alloc(BLOCKS_BYTES, &B.offset);
    if (err == 0) {
        err = copy_in(parent_data, B.used * 8, B.offset + SLUICE_BLOCKS_HDR_BYTES);
    }
    if (err == 0) {
        err = copy_in((const uint8_t *)parent + MAPS_AT, maplog_fork_bytes(BLOCKS_MAPS_BYTES),
                      B.offset + MAPS_AT);
    }
    if (err == 0) {
        err = table_map(parent);
    }
    if (err < 0) {
        B.hdr = NULL; /* a failed MAP_FIXED may have unmapped the parent's too */
        return err;
    }
    __atomic_store_n(&B.hdr->used_words, B.used, __ATOMIC_RELEASE);
    maplog_after_fork_child();
    return 0;
}

struct sluice_blocks_hdr *blocks_hdr(void)
{
    return B.hdr;
}

void blocks_where(uint64_t *offset, uint64_t *bytes)
{
    *offset = B.hdr ? B.offset : 0;
    *bytes = B.hdr ? BLOCKS_BYTES : 0;
}

/* FNV-1a over the descriptor's words. */
static uint64_t hash_words(const uint64_t *w, uint64_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    uint64_t i;

    for (i = 0; i < n; i++) {
        h = (h ^ w[i]) * 0x100000001b3ull;
    }
    return h;
}

static struct source source_of(uint64_t pc)
{
    struct source s = {.image = SLUICE_MAP_ANON};

    if (image_source_at(pc, &s.image, &s.base, &s.offset) < 0) {
        s.image = SLUICE_MAP_ANON;
    }
    return s;
}

static int same_source(const struct source *a, const struct source *b)
{
    return a->image == b->image && a->base == b->base && a->offset == b->offset;
}

/*
 * The id of a descriptor equal to @p w in its first @p n words (all but
 * the module log position) and lifted from the same place @p src, or -1.
 * (The same code unmapped and mapped again from another file at the same
 * address gets a descriptor of its own: its position names the new file.)
 */
static int64_t find(const uint64_t *w, uint64_t n, uint64_t h, const struct source *src)
{
    uint64_t i, id;

    for (i = h & (B.hash_size - 1); B.hash && B.hash[i].id1; i = (i + 1) & (B.hash_size - 1)) {
        id = B.hash[i].id1 - 1;
        if (B.data[id] == w[0] && memcmp(&B.data[id], w, n * 8) == 0 &&
            same_source(&B.hash[i].src, src)) {
            return (int64_t)id;
        }
    }
    return -1;
}

static void insert(struct slot *table, uint64_t size, uint64_t id, uint64_t h,
                   const struct source *src)
{
    uint64_t i = h & (size - 1);

    while (table[i].id1) {
        i = (i + 1) & (size - 1);
    }
    table[i] = (struct slot){id + 1, *src};
}

/* Room for one more entry at most half full; 0, or -1 without memory. */
static int hash_grow(void)
{
    uint64_t size = B.hash_size ? 2 * B.hash_size : 4096, i, id;
    struct slot *t;

    if (2 * (B.count + 1) <= B.hash_size) {
        return 0;
    }
    t = calloc(size, sizeof(*t));
    if (!t) {
        return -1;
    }
    for (i = 0; i < B.hash_size; i++) {
        if (B.hash[i].id1) {
            id = B.hash[i].id1 - 1;
            insert(t, size, id, hash_words(&B.data[id], sluice_block_desc_words(B.data[id]) - 1),
                   &B.hash[i].src);
        }
    }
    free(B.hash);
    B.hash = t;
    B.hash_size = size;
    return 0;
}

/* The slots of @p b to describe: all, or none if QEMU's are not well formed. */
static unsigned slots_of(const struct sluice_lift_block *b)
{
    unsigned k;

    if (!b->slot || b->n_slots > SLUICE_BLOCK_MAX_SLOTS) {
        return 0;
    }
    for (k = 0; k < b->n_slots; k++) {
        unsigned insn = sluice_slot_insn(b->slot[k]);

        if (insn >= b->n || (b->slot[k] & 7) > 4 ||
            (k > 0 && insn < sluice_slot_insn(b->slot[k - 1]))) {
            return 0;
        }
    }
    return b->n_slots;
}

/*
 * Lay out @p b with its @p slots slots as a descriptor in @p w; returns
 * how many of its instructions are recorded.
 */
static unsigned describe(const struct sluice_lift_block *b, unsigned slots, uint64_t *w)
{
    uint8_t *bytes = (uint8_t *)&w[1 + b->n];
    uint16_t *slot = (uint16_t *)&w[sluice_block_words(b->n)];
    unsigned i, recorded = 0;

    memset(bytes, 0, ((b->n + 7) / 8) * 8);
    for (i = 0; i < b->n; i++) {
        /* A first-run TB's Once instructions are recorded by that run. */
        int rec =
            b->hook[i] == SLUICE_HOOK_ALWAYS || (b->first_run && b->hook[i] == SLUICE_HOOK_ONCE);

        w[1 + i] = b->pc[i];
        bytes[i] = (uint8_t)((b->len[i] & 0x7f) | (rec ? SLUICE_BLOCK_RECORDED : 0));
        recorded += rec;
    }
    memset(slot, 0, ((slots + 3) / 4) * 8);
    for (i = 0; i < slots; i++) {
        slot[i] = b->slot[i]; /* little-endian hosts only, like the rest of the table */
    }
    w[0] = b->n | (uint64_t)recorded << 16 | (uint64_t)slots << 32;
    w[sluice_block_desc_words(w[0]) - 1] = maplog_position();
    return recorded;
}

/*
 * Whether an instruction of @p b records its first run (SLUICE_HOOK_ONCE):
 * then the TB gets a block record all the same, in place of the PAD it
 * would write, so consumers learn which block ran (`block` callback, drcov)
 * under a coverage filter too.
 */
static int has_once(const struct sluice_lift_block *b)
{
    for (unsigned i = 0; i < b->n; i++) {
        if (b->hook[i] == SLUICE_HOOK_ONCE) {
            return 1;
        }
    }
    return 0;
}

/* One word that ends the block before: what follows is not its records. */
#define END_OF_BLOCK sluice_pad_hdr(1)

uint64_t blocks_lift(const struct sluice_lift_block *b)
{
    uint64_t w[sluice_block_words(SLUICE_BLOCK_MAX_INSNS) + SLUICE_BLOCK_MAX_SLOTS / 4 + 1];
    uint64_t words, h, hdr = END_OF_BLOCK;
    unsigned slots;
    struct source src;
    int64_t id;

    if (!B.enabled) {
        return 0; /* no block anywhere, so none to end */
    }
    if (b->n == 0 || b->n > SLUICE_BLOCK_MAX_INSNS) {
        return b->records ? END_OF_BLOCK : 0;
    }
    slots = slots_of(b);
    if (describe(b, slots, w) == 0 && slots == 0 && !(b->records && has_once(b))) {
        return b->records ? END_OF_BLOCK : 0;
    }
    words = sluice_block_desc_words(w[0]);
    h = hash_words(w, words - 1);
    src = source_of(b->pc[0]);
    pthread_mutex_lock(&B.lock);
    id = find(w, words - 1, h, &src);
    if (id < 0 && B.used + words <= B.capacity && hash_grow() < 0) {
        B.refused_nomem++;
    } else if (id < 0 && B.used + words <= B.capacity) {
        id = (int64_t)B.used;
        memcpy(&B.data[id], w, words * 8);
        __atomic_store_n(&B.used, B.used + words, __ATOMIC_RELAXED);
        /* Before QEMU hands the TB to any vCPU, so before any record names it. */
        __atomic_store_n(&B.hdr->used_words, B.used, __ATOMIC_RELEASE);
        insert(B.hash, B.hash_size, (uint64_t)id, h, &src);
        B.count++;
    }
    if (id >= 0) {
        hdr = slots ? sluice_block_slots_hdr((uint64_t)id, b->n)
                    : sluice_block_hdr((uint64_t)id, 0, b->n, 0);
    } else {
        B.refused++; /* its EXEC records stay, after END_OF_BLOCK */
    }
    pthread_mutex_unlock(&B.lock);
    return hdr;
}

int blocks_index(uint64_t id, unsigned from, unsigned to, uint64_t pc)
{
    unsigned n, j;

    if (!B.hdr || id >= __atomic_load_n(&B.used, __ATOMIC_RELAXED)) {
        return -1;
    }
    n = (unsigned)(B.data[id] & 0xffff);
    for (j = from; j < to && j < n; j++) {
        if (B.data[id + 1 + j] == pc) {
            return (int)j;
        }
    }
    return -1;
}

const uint16_t *blocks_slots(uint64_t id, unsigned *n_slots, const uint64_t **pcs)
{
    uint64_t w0;

    *n_slots = 0;
    if (!B.hdr || id >= __atomic_load_n(&B.used, __ATOMIC_RELAXED)) {
        return NULL;
    }
    w0 = B.data[id];
    *n_slots = (unsigned)(w0 >> 32 & 0xffff);
    *pcs = &B.data[id + 1];
    return (const uint16_t *)&B.data[id + sluice_block_words((unsigned)(w0 & 0xffff))];
}

const uint64_t *blocks_insns(uint64_t id, unsigned *n, const uint8_t **flags)
{
    *n = 0;
    if (!B.hdr || id >= __atomic_load_n(&B.used, __ATOMIC_RELAXED)) {
        return NULL;
    }
    *n = (unsigned)(B.data[id] & 0xffff);
    *flags = (const uint8_t *)&B.data[id + 1 + *n];
    return &B.data[id + 1];
}

unsigned blocks_recorded(uint64_t id, unsigned from, unsigned to)
{
    const uint8_t *flags;
    unsigned n, j, count = 0;

    if (!B.hdr || id >= __atomic_load_n(&B.used, __ATOMIC_RELAXED)) {
        return 0;
    }
    n = (unsigned)(B.data[id] & 0xffff);
    flags = (const uint8_t *)&B.data[id + 1 + n];
    for (j = from; j < to && j < n; j++) {
        count += (flags[j] & SLUICE_BLOCK_RECORDED) != 0;
    }
    return count;
}

void blocks_report(void)
{
    if (B.refused > B.refused_nomem) {
        say("sluice-jitter: block table full (%llu descriptors): %llu TBs wrote one record "
            "per instruction instead (exact, slower)\n",
            (unsigned long long)B.count, (unsigned long long)(B.refused - B.refused_nomem));
    }
    if (B.refused_nomem) {
        say("sluice-jitter: no memory to index the block table (%llu descriptors): %llu TBs "
            "wrote one record per instruction instead (exact, slower)\n",
            (unsigned long long)B.count, (unsigned long long)B.refused_nomem);
    }
}
