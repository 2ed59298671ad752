/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * tools/cov.c — `sluice run --tool cov -o FILE`: the translated blocks that
 * ran, as a drcov file (DynamoRIO's format, which Lighthouse, bncov and
 * Lightkeeper load):
 *
 *   DRCOV VERSION: 2
 *   DRCOV FLAVOR: drcov-64
 *   Module Table: version 2, count N
 *   Columns: id, base, end, entry, checksum, timestamp, path
 *     0, 0x<base>, 0x<end>, 0x0000000000000000, 0x00000000, 0x00000000, <path>
 *   BB Table: M bbs
 *   <M packed little-endian entries: u32 start (from the module's base), u16 size, u16 module id>
 *
 * A module is one load of a file that held code that ran (its base: the
 * lowest address that load mapped, the module map's base; its end: past
 * the highest mapping code ran in): a file loaded twice at two addresses
 * is two modules of one path, as DynamoRIO lists them, so that base +
 * start is where each block ran. Each distinct block (module, start, size)
 * is listed once, in the order first seen. Blocks in anonymous memory (JIT
 * code) have no module: they are counted and left out, and the report says
 * so on stderr.
 *
 * Threads: `block` on workers resolves the block's module (sluice_map__at);
 * `trace` on the ordering thread keeps the tables; report on the main
 * thread writes the file. Never writes a partial file silently: a failed
 * write is reported and turns the exit status to 1.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "symbolize.h"
#include "tools.h"

/* How the file at a block's path differs from the one that ran. */
enum { CHANGED_OTHER = 1, CHANGED_GONE = 2 };

/* What a worker found for one block. */
struct cov_item {
    const char *path; /* NULL: anonymous, or no mapping */
    uint64_t base, end, start;
    uint32_t bytes;
    int changed;    /* the file at its path now is not the one that ran: CHANGED_* */
    uint64_t ident; /* its mapped file (sym_file_ident); 0: not known */
};

/* The last mapping this worker asked sluice_file__changed_at() about (by its path, which is
 * the module log entry's own copy: one per mapping), and the answer: blocks come in runs of
 * one module. */
static __thread const char *asked_path;
static __thread int asked_changed;
static __thread uint64_t asked_ident;

struct module {
    char *path;
    uint64_t base, end;
    int said_changed; /* a block of it said to be from another file than the one at path now */
    uint64_t ident;   /* the mapped file the path's first block came from (cov_item.ident) */
    int said_several; /* blocks of two different files came under its one path (said) */
};

/* Open addressing over (module, offset, size); 0 is an empty slot. */
static struct {
    struct module *mods;
    size_t n_mods, cap_mods;
    uint64_t *set; /* module id + 1 << 48 | size << 32 | offset */
    uint64_t *order;
    size_t n, size;
    uint64_t blocks, anon, too_far, nomem; /* blocks: every block event traced */
} C;

static int on_block(void *user, const struct sluice_thread_info *t, const struct sluice_block *b,
                    void *item)
{
    struct cov_item *it = item;
    struct sluice_module m;

    (void)user;
    it->start = b->pc;
    it->bytes = b->bytes;
    it->path = NULL;
    it->changed = 0;
    it->ident = 0;
    /* A memfd's code (a JIT's) is no file a coverage viewer can open: anonymous memory. */
    if (sluice_map__at(t, b->pc, &m) == 0 && m.path && !sym_is_memfd(m.path)) {
        it->path = m.path;
        it->base = m.base;
        it->end = m.end;
        if (m.path != asked_path) {
            char why[160];

            asked_path = m.path;
            /* consumer.h: a file no longer at its path is said "gone ..." */
            asked_changed = sluice_file__changed_at(t, b->pc, why, sizeof(why)) == 1
                                ? (strncmp(why, "gone", 4) == 0 ? CHANGED_GONE : CHANGED_OTHER)
                                : 0;
            asked_ident = sym_file_ident(t, b->pc);
        }
        it->changed = asked_changed;
        it->ident = asked_ident;
    }
    return 1;
}

/* The id of the module of @p it's load (its path at its base: added), or -1 without memory. */
static long module_find(const struct cov_item *it)
{
    for (size_t i = 0; i < C.n_mods; i++) {
        if (C.mods[i].base == it->base && strcmp(C.mods[i].path, it->path) == 0) {
            C.mods[i].end = it->end > C.mods[i].end ? it->end : C.mods[i].end;
            return (long)i;
        }
    }
    if (C.n_mods == C.cap_mods) {
        size_t cap = C.cap_mods ? 2 * C.cap_mods : 16;
        struct module *p = realloc(C.mods, cap * sizeof(*p));

        if (!p) {
            return -1;
        }
        C.mods = p;
        C.cap_mods = cap;
    }
    C.mods[C.n_mods] = (struct module){strdup(it->path), it->base, it->end, 0, it->ident, 0};
    for (size_t i = 0; i < C.n_mods; i++) {
        if (strcmp(C.mods[i].path, it->path) == 0) {
            /* Another load of the path: what was said of the path holds for this one. */
            C.mods[C.n_mods].ident = C.mods[i].ident;
            C.mods[C.n_mods].said_changed = C.mods[i].said_changed;
            C.mods[C.n_mods].said_several = C.mods[i].said_several;
            break;
        }
    }
    return C.mods[C.n_mods].path ? (long)C.n_mods++ : -1;
}

/* Note that a line was said (@p several: of two files; else of a changed file) for every
 * load of @p path. */
static void said_of_path(const char *path, int several)
{
    for (size_t i = 0; i < C.n_mods; i++) {
        if (strcmp(C.mods[i].path, path) == 0) {
            *(several ? &C.mods[i].said_several : &C.mods[i].said_changed) = 1;
        }
    }
}

/* module_find(), saying once per path when a block of it is not of the file at its path, or
 * not of the file its first block came from. */
static long module_of(const struct cov_item *it)
{
    long id = module_find(it);

    if (id >= 0 && it->ident && C.mods[id].ident && it->ident != C.mods[id].ident &&
        !C.mods[id].said_several) {
        said_of_path(it->path, 1);
        say("sluice: cov: %s held two different files during the run (a library replaced "
            "between two loads): both files' blocks are listed under that one path\n",
            it->path);
    }
    if (id >= 0 && it->changed && !C.mods[id].said_changed) {
        said_of_path(it->path, 0);
        /* drcov names modules by path: Lighthouse would read these blocks against that file. */
        if (it->changed == CHANGED_GONE) {
            say("sluice: cov: %s is gone (deleted since the guest mapped it): its blocks are "
                "listed under that path all the same\n",
                it->path);
        } else {
            say("sluice: cov: %s is not the file the trace ran (some or all of its blocks: "
                "rebuilt or replaced since): they are listed under that path all the same\n",
                it->path);
        }
    }
    return id;
}

static uint64_t mix(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    return k ^ (k >> 33);
}

/* Add @p key to the set unless there; 0, or -1 without memory. */
static int remember(uint64_t key)
{
    size_t i;

    if (2 * (C.n + 1) > C.size) {
        size_t size = C.size ? 2 * C.size : 4096;
        uint64_t *set = calloc(size, sizeof(*set)), *order;

        order = set ? realloc(C.order, size / 2 * sizeof(*order)) : NULL;
        if (!order) {
            free(set);
            return -1;
        }
        C.order = order;
        for (size_t k = 0; k < C.n; k++) {
            for (i = mix(C.order[k]) & (size - 1); set[i]; i = (i + 1) & (size - 1)) {
            }
            set[i] = C.order[k];
        }
        free(C.set);
        C.set = set;
        C.size = size;
    }
    for (i = mix(key) & (C.size - 1); C.set[i]; i = (i + 1) & (C.size - 1)) {
        if (C.set[i] == key) {
            return 0;
        }
    }
    C.set[i] = key;
    C.order[C.n++] = key;
    return 0;
}

static void on_trace(void *user, const struct sluice_thread_info *t, void *item)
{
    const struct cov_item *it = item;
    long mod;

    (void)user;
    (void)t;
    C.blocks++;
    if (!it->path) {
        C.anon++;
        return;
    }
    if (it->start - it->base > UINT32_MAX) {
        C.too_far++; /* drcov's offsets are 32 bits */
        return;
    }
    mod = module_of(it);
    if (mod < 0 || mod >= 0xffff ||
        remember((uint64_t)(mod + 1) << 48 | (uint64_t)(it->bytes & 0xffff) << 32 |
                 (it->start - it->base)) < 0) {
        C.nomem++;
    }
}

static void setup(struct tool_env *env, struct sluice_callbacks *cb)
{
    cb->user = env;
    cb->item_size = sizeof(struct cov_item);
    cb->block = on_block;
    cb->trace = on_trace;
}

static int write_drcov(FILE *f)
{
    fprintf(f, "DRCOV VERSION: 2\nDRCOV FLAVOR: drcov-64\n");
    fprintf(f, "Module Table: version 2, count %zu\n", C.n_mods);
    fprintf(f, "Columns: id, base, end, entry, checksum, timestamp, path\n");
    for (size_t i = 0; i < C.n_mods; i++) {
        fprintf(f, "%3zu, 0x%016llx, 0x%016llx, 0x%016llx, 0x%08x, 0x%08x, ", i,
                (unsigned long long)C.mods[i].base, (unsigned long long)C.mods[i].end, 0ull, 0u,
                0u);
        for (const char *p = C.mods[i].path; *p; p++) { /* a file name cannot forge a line */
            fputc((unsigned char)*p < 0x20 || *p == 0x7f ? '?' : *p, f);
        }
        fputc('\n', f);
    }
    fprintf(f, "BB Table: %zu bbs\n", C.n);
    for (size_t k = 0; k < C.n; k++) {
        uint64_t key = C.order[k];
        uint8_t e[8];
        uint32_t start = (uint32_t)key;
        uint16_t size = (uint16_t)(key >> 32), mod = (uint16_t)((key >> 48) - 1);

        e[0] = (uint8_t)start, e[1] = (uint8_t)(start >> 8), e[2] = (uint8_t)(start >> 16),
        e[3] = (uint8_t)(start >> 24);
        e[4] = (uint8_t)size, e[5] = (uint8_t)(size >> 8);
        e[6] = (uint8_t)mod, e[7] = (uint8_t)(mod >> 8);
        fwrite(e, 1, sizeof(e), f);
    }
    return fflush(f) == 0 && !ferror(f) ? 0 : -1;
}

static int report(struct tool_env *env, struct sluice_session *s, double seconds)
{
    struct sluice_counts total;
    int rc;

    (void)seconds;
    sluice_session__counts(s, &total, NULL, NULL, 0);
    rc = write_drcov(env->out);
    if (rc < 0) {
        say("sluice: %s: %s: the drcov file is incomplete\n", env->name, strerror(errno));
    }
    if (C.blocks == 0 && total.insns > 0) {
        say("sluice: cov: %llu instructions ran but the trace names no block "
            "(SLUICE_ENCODING=insn, or no block table: the guest's stderr says why): "
            "%s lists nothing\n",
            (unsigned long long)total.insns, env->name);
        rc = -1;
    }
    if (C.anon) {
        /* Runs, not distinct blocks: each block event counts (the coverage filter: one). */
        say("sluice: cov: code in memory that no file maps ran (%llu block runs, left out)\n",
            (unsigned long long)C.anon);
    }
    if (C.too_far || C.nomem) {
        say("sluice: cov: %llu blocks left out (%llu more than 4 GiB past their "
            "module's base, %llu out of memory)\n",
            (unsigned long long)(C.too_far + C.nomem), (unsigned long long)C.too_far,
            (unsigned long long)C.nomem);
        rc = -1;
    }
    if (total.lost) {
        say("sluice: warning: %llu events lost\n", (unsigned long long)total.lost);
    }
    for (size_t i = 0; i < C.n_mods; i++) {
        free(C.mods[i].path);
    }
    free(C.mods);
    free(C.set);
    free(C.order);
    return rc;
}

const struct tool tool_cov = {"cov", setup, report, 0};
