/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ringbw.c — the machine's own ceiling for sluice's data path: how fast one
 * core can stream 8-byte words to another through a shared ring, with
 * nothing else done (no QEMU, no records, no decoding). bench/run prints it
 * beside the figures so a target can be weighed against the physical limit.
 *
 * One producer thread writes words into a ring of RING bytes and publishes
 * its position every CHUNK bytes (release store); one consumer thread waits
 * for it (spinning: this measures bandwidth, not idling), sums the words and
 * gives the space back; then again with the consumer flushing what it summed
 * from the caches (CLFLUSH), as consumer/ring_reader.c does: a line the reader
 * kept a copy of must be taken back before the writer's next lap writes it.
 * On this project's 2-vCPU host the flush made the ring 1.5-2.5x faster in
 * most runs, and in a few (the vCPUs placed apparently sharing caches) the
 * plain ring was the faster one: bench/run runs it three times. Also
 * measured: one core reading a buffer much larger than the caches, and
 * writing one (memset), for scale; and the
 * floor of a per-event callback API: one core calling a function through
 * a pointer once per PC of a 512-PC block (pcsum's fold, h = h*K + pc, a
 * plain count, an empty function), as the consumer's `exec` path does at
 * the least; and for scale the same fold called directly (compiled in) and
 * written in the loop with no call.
 *
 * Usage: ringbw [GIB] (default 4 GiB streamed). Output, one line each:
 *   ring <ring bytes> <GB/s> <G words/s>
 *   ring-evict <ring bytes> <GB/s> <G words/s>
 *   read <GB/s>
 *   memset <GB/s>
 *   call fold|count|empty <G calls/s>
 *   direct fold <G calls/s>
 *   inline fold <G pcs/s>
 * Never run it beside other measurements: it keeps both cores busy.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#else
#define _mm_clflush(p) ((void)(p)) /* no flush measured elsewhere */
#endif

#define CHUNK (256u * 1024)

struct ring {
    uint64_t *data;
    uint64_t words; /* ring size in words, a power of two */
    uint64_t total; /* words to stream */
    int evict;      /* the consumer flushes each chunk from the caches once summed */
    _Alignas(64) uint64_t head;
    _Alignas(64) uint64_t tail;
    _Alignas(64) uint64_t sum;
};

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *produce(void *arg)
{
    struct ring *r = arg;
    uint64_t pos = 0, chunk = CHUNK / 8;

    while (pos < r->total) {
        while (pos + chunk - __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE) > r->words) {
            /* wait for room */
        }
        for (uint64_t i = 0; i < chunk; i++) {
            r->data[(pos + i) & (r->words - 1)] = pos + i;
        }
        pos += chunk;
        __atomic_store_n(&r->head, pos, __ATOMIC_RELEASE);
    }
    return NULL;
}

static void *consume(void *arg)
{
    struct ring *r = arg;
    uint64_t pos = 0, sum = 0;

    while (pos < r->total) {
        uint64_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE), from = pos;

        for (; pos < head; pos++) {
            sum += r->data[pos & (r->words - 1)];
        }
        for (uint64_t w = from & ~7ull; r->evict && w < pos; w += 8) {
            _mm_clflush(&r->data[w & (r->words - 1)]); /* as consumer/ring_reader.c does */
        }
        __atomic_store_n(&r->tail, pos, __ATOMIC_RELEASE);
    }
    r->sum = sum;
    return NULL;
}

/* Stream @p total words through a ring of @p bytes; returns seconds. */
static double ring_run(uint64_t bytes, uint64_t total, int evict)
{
    struct ring r = {0};
    pthread_t p, c;
    double t0, t;

    r.words = bytes / 8;
    r.total = total;
    r.evict = evict;
    r.data = aligned_alloc(4096, bytes);
    if (!r.data) {
        perror("ringbw: aligned_alloc");
        exit(1);
    }
    memset(r.data, 0, bytes);
    t0 = now();
    pthread_create(&c, NULL, consume, &r);
    pthread_create(&p, NULL, produce, &r);
    pthread_join(p, NULL);
    pthread_join(c, NULL);
    t = now() - t0;
    if (r.sum != total * (total - 1) / 2) {
        fprintf(stderr, "ringbw: wrong sum\n");
        exit(1);
    }
    free(r.data);
    return t;
}

static uint64_t call_h, call_n;

/* pcsum's exec callback, in shape: the fold of consumer/tools/pcsum.c. */
__attribute__((noinline)) static int call_fold(void *user, const void *t, uint64_t pc, void *item)
{
    (void)user, (void)t, (void)item;
    call_h = call_h * 0x100000001b3ull + pc;
    call_n++;
    return 0;
}

__attribute__((noinline)) static int call_count(void *user, const void *t, uint64_t pc, void *item)
{
    (void)user, (void)t, (void)item, (void)pc;
    call_n++;
    return 0;
}

__attribute__((noinline)) static int call_empty(void *user, const void *t, uint64_t pc, void *item)
{
    (void)user, (void)t, (void)item, (void)pc;
    __asm__ volatile("");
    return 0;
}

/*
 * G runs/s of @p body, run once per pc of a 512-pc block (pc names the pc),
 * 2^30 runs in all. A GNU statement expression: the body is compiled in
 * place, so a direct call or inlined code costs what it costs there.
 */
#define PER_PC_RATE(body)                                                                          \
    ({                                                                                             \
        uint64_t pcs_[512];                                                                        \
        double t_;                                                                                 \
        for (unsigned i_ = 0; i_ < 512; i_++) {                                                    \
            pcs_[i_] = 0x400000 + 4 * i_;                                                          \
        }                                                                                          \
        t_ = now();                                                                                \
        for (unsigned r_ = 0; r_ < (1u << 21); r_++) {                                             \
            for (unsigned i_ = 0; i_ < 512; i_++) {                                                \
                uint64_t pc = pcs_[i_];                                                            \
                body;                                                                              \
            }                                                                                      \
        }                                                                                          \
        (double)(1u << 30) / (now() - t_) / 1e9;                                                   \
    })

/* G calls/s of @p fn (through a pointer the compiler cannot see through). */
static double call_rate(int (*volatile fn)(void *, const void *, uint64_t, void *))
{
    int (*f)(void *, const void *, uint64_t, void *) = fn;

    return PER_PC_RATE(f(NULL, NULL, pc, NULL));
}

/* G calls/s of call_fold called directly (its address known where it is called). */
static double direct_rate(void)
{
    return PER_PC_RATE(call_fold(NULL, NULL, pc, NULL));
}

/* G pcs/s of pcsum's fold written in the loop (no call). */
static double inline_rate(void)
{
    uint64_t h = 0;
    double rate;

    /* one pc at a time, as a callback sees them */
    rate = PER_PC_RATE(__asm__ volatile("" : : "r"(pc)); h = h * 0x100000001b3ull + pc);
    call_h += h;
    return rate;
}

int main(int argc, char **argv)
{
    uint64_t gib = argc > 1 ? strtoull(argv[1], NULL, 0) : 4;
    uint64_t bytes = gib << 30, big = 256u << 20, sum = 0;
    static const uint64_t rings[] = {1u << 20, 4u << 20, 16u << 20};
    uint64_t *buf;
    double t;

    if (gib == 0 || gib > 64) {
        fprintf(stderr, "usage: ringbw [GIB 1..64]\n");
        return 2;
    }
    for (unsigned i = 0; i < sizeof(rings) / sizeof(rings[0]); i++) {
        for (int evict = 0; evict < 2; evict++) {
            t = ring_run(rings[i], bytes / 8, evict);
            printf("%s %llu %.2f %.3f\n", evict ? "ring-evict" : "ring",
                   (unsigned long long)rings[i], (double)bytes / t / 1e9,
                   (double)bytes / 8 / t / 1e9);
        }
    }
    buf = malloc(big);
    if (!buf) {
        perror("ringbw: malloc");
        return 1;
    }
    memset(buf, 1, big);
    t = now();
    for (uint64_t k = 0; k < bytes / big; k++) {
        for (uint64_t i = 0; i < big / 8; i++) {
            sum += buf[i];
        }
    }
    t = now() - t;
    printf("read %.2f\n", (double)(bytes / big * big) / t / 1e9);
    t = now();
    for (uint64_t k = 0; k < bytes / big; k++) {
        memset(buf, (int)k, big);
        __asm__ volatile("" : : "r"(buf) : "memory"); /* the stores are not dead */
    }
    t = now() - t;
    printf("memset %.2f\n", (double)(bytes / big * big) / t / 1e9);
    free(buf);
    printf("call fold %.3f\n", call_rate(call_fold));
    printf("call count %.3f\n", call_rate(call_count));
    printf("call empty %.3f\n", call_rate(call_empty));
    printf("direct fold %.3f\n", direct_rate());
    printf("inline fold %.3f\n", inline_rate());
    return sum == 42; /* keep the read loop */
}
