/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * tools/pcsum.c — `sluice run --tool pcsum` and `--tool pcsum-batch`: an
 * order-sensitive checksum of each guest thread's PC sequence.
 *
 * Folds p_0..p_{n-1} into h = (...((0·K + p_0)·K + p_1)...)·K + p_{n-1}
 * mod 2^64, K = 0x100000001b3: a dropped, repeated or reordered PC changes
 * h (but for a 2^-64 chance). Two runs of a deterministic guest, or a run and
 * a checksum computed from the program's structure (bench/pcsum.py), can be
 * compared in one line without writing the trace anywhere. bench/run uses it
 * as the consumer of its worst case.
 *
 *  - pcsum: one `exec` call per PC on the workers, folded into the worker
 *    thread's own (h, n); `chunk_end` hands it over as the chunk's one item,
 *    and `trace` composes them in order as below.
 *  - pcsum-batch: `exec_batch` folds a run of PCs on a worker into (h, n),
 *    `trace` composes the runs: fold(A‖B) = fold(A)·K^|B| + fold(B).
 *
 * Per-thread sums live in a hash table touched only by the ordering thread
 * (`thread`, `trace`) and, after the session, by `report` on the main thread.
 * Output: one line per thread `pid=P tid=T seq=S n=N h=0x...`, or with
 * --json one object {"threads": [{"pid", "tid", "seq", "n", "h"}...],
 * "insns": N, "lost": N, "seconds": F, "rusage": {...} (tool_json_rusage),
 * "error": null or the session's first error (then the sums are not of the whole trace)}.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tools.h"

typedef unsigned long long ull;

#define PCSUM_K 0x100000001b3ull

/* One guest thread ring's sum. */
struct pcsum {
    uint32_t pid, tid, seq;
    int used;
    uint64_t n, h;
};

/* The tool's state: an open-addressing table of sums, its size a power of two. */
struct pcsum_state {
    struct tool_env *env;
    struct pcsum *slots;
    size_t cap, used;
    struct pcsum *last; /* the previous trace call's thread: most calls repeat it */
    int oom;
};

/* A worker's run of PCs, folded. */
struct pcsum_run {
    uint64_t h, n;
};

static struct pcsum_state state;

static uint64_t k_pow(uint64_t e)
{
    uint64_t r = 1, b = PCSUM_K;

    for (; e; e >>= 1, b *= b) {
        if (e & 1) {
            r *= b;
        }
    }
    return r;
}

/* The last k_pow() asked on this thread: runs are mostly blocks of one length. */
static __thread uint64_t k_pow_e = 0, k_pow_r = 1;

/* k_pow(@p e), remembered: its squarings took a fifth of pcsum-batch's fold (perf). */
static uint64_t k_pow_last(uint64_t e)
{
    if (e != k_pow_e) {
        k_pow_e = e;
        k_pow_r = k_pow(e);
    }
    return k_pow_r;
}

static int same_thread(const struct pcsum *p, uint32_t pid, uint32_t tid, uint32_t seq)
{
    return p->pid == pid && p->tid == tid && p->seq == seq;
}

/* The slot of (pid, tid, seq) in st->slots: its sum, or the empty slot where it goes. */
static struct pcsum *probe(const struct pcsum_state *st, uint32_t pid, uint32_t tid, uint32_t seq)
{
    uint64_t key = ((uint64_t)pid << 32 | tid) ^ ((uint64_t)seq << 48);
    size_t i = (size_t)((key * 0x9e3779b97f4a7c15ull) >> 20) & (st->cap - 1);

    while (st->slots[i].used && !same_thread(&st->slots[i], pid, tid, seq)) {
        i = (i + 1) & (st->cap - 1);
    }
    return &st->slots[i];
}

/* Double the table (64 slots at first). Returns 0, or -1 with the table unchanged. */
static int grow(struct pcsum_state *st)
{
    struct pcsum_state bigger = *st;
    size_t i;

    bigger.cap = st->cap ? st->cap * 2 : 64;
    bigger.slots = calloc(bigger.cap, sizeof(*bigger.slots));
    if (!bigger.slots) {
        return -1;
    }
    for (i = 0; i < st->cap; i++) {
        if (st->slots[i].used) {
            *probe(&bigger, st->slots[i].pid, st->slots[i].tid, st->slots[i].seq) = st->slots[i];
        }
    }
    free(st->slots);
    bigger.last = NULL;
    *st = bigger;
    return 0;
}

/* The sum of thread @p t, created if @p create; NULL if absent or out of memory. */
static struct pcsum *find(struct pcsum_state *st, const struct sluice_thread_info *t, int create)
{
    struct pcsum *p = st->last;

    if (p && same_thread(p, t->pid, t->tid, t->seq)) {
        return p;
    }
    if (create && (st->used + 1) * 2 > st->cap && grow(st) != 0) {
        return NULL;
    }
    if (!st->cap) {
        return NULL;
    }
    p = probe(st, t->pid, t->tid, t->seq);
    if (!p->used) {
        if (!create) {
            return NULL;
        }
        *p = (struct pcsum){t->pid, t->tid, t->seq, 1, 0, 0};
        st->used++;
    }
    st->last = p;
    return p;
}

/* The chunk this worker thread decodes, folded so far (pcsum). */
static __thread struct pcsum_run chunk_run;

static int on_exec(void *user, const struct sluice_thread_info *t, uint64_t pc, void *item)
{
    (void)user, (void)t, (void)item;
    chunk_run.h = chunk_run.h * PCSUM_K + pc;
    chunk_run.n++;
    return 0;
}

static int on_chunk_end(void *user, const struct sluice_thread_info *t, void *item)
{
    (void)user, (void)t;
    if (chunk_run.n == 0) {
        return 0;
    }
    memcpy(item, &chunk_run, sizeof(chunk_run));
    chunk_run = (struct pcsum_run){0, 0};
    return 1;
}

/* K^2, K^3, K^4 mod 2^64: the four-lane fold's steps. */
#define PCSUM_K2 (PCSUM_K * PCSUM_K)
#define PCSUM_K3 (PCSUM_K2 * PCSUM_K)
#define PCSUM_K4 (PCSUM_K2 * PCSUM_K2)

static int on_exec_batch(void *user, const struct sluice_thread_info *t, const uint64_t *pcs,
                         size_t n, void *item)
{
    struct pcsum_run run = {0, n};
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    size_t i, head = n % 4;

    (void)user, (void)t;
    /*
     * The same fold, h = sum p_i K^(n-1-i), in four independent chains of
     * step K^4 (lane j holds the PCs i = head + 4m + j), so the multiplies
     * overlap instead of waiting on each other: a block of 100 PCs is a run.
     */
    for (i = 0; i < head; i++) {
        run.h = run.h * PCSUM_K + pcs[i];
    }
    for (; i < n; i += 4) {
        a0 = a0 * PCSUM_K4 + pcs[i];
        a1 = a1 * PCSUM_K4 + pcs[i + 1];
        a2 = a2 * PCSUM_K4 + pcs[i + 2];
        a3 = a3 * PCSUM_K4 + pcs[i + 3];
    }
    if (n > head) {
        run.h = run.h * k_pow_last(n - head) + a0 * PCSUM_K3 + a1 * PCSUM_K2 + a2 * PCSUM_K + a3;
    }
    memcpy(item, &run, sizeof(run));
    return 1;
}

static void on_thread(void *user, const struct sluice_thread_info *t, int started)
{
    struct pcsum_state *st = user;

    if (started && !find(st, t, 1)) {
        st->oom = 1;
    }
}

static void on_trace_run(void *user, const struct sluice_thread_info *t, void *item)
{
    struct pcsum_state *st = user;
    struct pcsum *p = find(st, t, 0);
    struct pcsum_run run;

    if (p) {
        memcpy(&run, item, sizeof(run));
        p->h = p->h * k_pow_last(run.n) + run.h;
        p->n += run.n;
    }
}

static void setup_common(struct tool_env *env, struct sluice_callbacks *cb)
{
    memset(&state, 0, sizeof(state));
    state.env = env;
    cb->user = &state;
    cb->thread = on_thread;
}

static void setup_pc(struct tool_env *env, struct sluice_callbacks *cb)
{
    setup_common(env, cb);
    cb->item_size = sizeof(struct pcsum_run);
    cb->exec = on_exec;
    cb->chunk_end = on_chunk_end;
    cb->trace = on_trace_run;
}

static void setup_batch(struct tool_env *env, struct sluice_callbacks *cb)
{
    setup_common(env, cb);
    cb->item_size = sizeof(struct pcsum_run);
    cb->exec_batch = on_exec_batch;
    cb->trace = on_trace_run;
}

static void print(FILE *f, const struct sluice_counts *total, const struct sluice_thread_info *t,
                  size_t n, int json, double seconds, const char *error)
{
    size_t i;

    if (json) {
        fprintf(f, "{\"threads\": [");
    }
    for (i = 0; i < n; i++) {
        struct pcsum *p = find(&state, &t[i], 0);
        ull sum_n = p ? (ull)p->n : 0, sum_h = p ? (ull)p->h : 0;

        if (json) {
            fprintf(f,
                    "%s{\"pid\": %u, \"tid\": %u, \"seq\": %u, \"n\": %llu, \"h\": \"0x%016llx\"}",
                    i ? ", " : "", t[i].pid, t[i].tid, t[i].seq, sum_n, sum_h);
        } else {
            fprintf(f, "pid=%u tid=%u seq=%u n=%llu h=0x%016llx\n", t[i].pid, t[i].tid, t[i].seq,
                    sum_n, sum_h);
        }
    }
    if (json) {
        fprintf(f, "], \"insns\": %llu, \"lost\": %llu, \"seconds\": %.6f, ", (ull)total->insns,
                (ull)total->lost, seconds);
        tool_json_rusage(f, state.env);
        fprintf(f, ", ");
        tool_json_error(f, error);
        fprintf(f, "}\n");
    }
}

static int report(struct tool_env *env, struct sluice_session *s, double seconds)
{
    struct sluice_counts total;
    size_t n = sluice_session__counts(s, &total, NULL, NULL, 0);
    struct sluice_thread_info *t = calloc(n + 1, sizeof(*t));
    int rc = 0;

    if (!t || state.oom) {
        say("sluice: pcsum: out of memory\n");
        free(t);
        return -1;
    }
    n = sluice_session__counts(s, &total, NULL, t, n);
    errno = 0; /* a failed write sets it */
    print(env->out, &total, t, n, env->json, seconds, sluice_session__error(s));
    if (total.lost) {
        say("sluice: warning: %llu events lost: the sums are not of the whole trace\n",
            (ull)total.lost);
    }
    if (fflush(env->out) != 0 || ferror(env->out)) {
        say("sluice: pcsum: writing %s: %s\n", env->name, strerror(errno ? errno : EIO));
        rc = -1;
    }
    free(t);
    free(state.slots);
    memset(&state, 0, sizeof(state));
    return rc;
}

const struct tool tool_pcsum = {"pcsum", setup_pc, report, 0};
const struct tool tool_pcsum_batch = {"pcsum-batch", setup_batch, report, 0};
