/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Guest: threads that run for a given time, for consumers attached and
 * detached while it runs (tests/e2e/attach.py).
 *
 *   attachloop SECONDS
 *
 * NWORKERS threads run for SECONDS of wall time, each doing bursts of a
 * deterministic loop of loads and stores over its own array (BURST steps,
 * about 370 events with the clock and the sleep) and sleeping NAP_NS after
 * each: every thread makes events every 10 ms, so any attach window of a few
 * tens of milliseconds sees all of them, while the volume stays modest (on
 * x86_64 about 320 000 events/s in all: 6.3 M events, a 170 MB reference
 * dump, in 20 s). Meanwhile the main thread starts NSHORT short-lived
 * threads, two at a time at fixed fractions of the run, each doing
 * SHORT_BURSTS bursts (about 200 ms): rings announced while consumers are
 * attached. The line printed does not depend on timing, so it equals an
 * untraced run's.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define NWORKERS 8
#define NSHORT 16
#define SHORT_BURSTS 20
#define SLOTS 256
#define BURST 16
#define NAP_NS 10000000L

struct state {
    uint64_t a[SLOTS];
    uint64_t i;
} __attribute__((aligned(64)));

static struct state states[NWORKERS + NSHORT];
static double end_time;

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void nap(long ns)
{
    struct timespec ts = {ns / 1000000000L, ns % 1000000000L};

    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* BURST steps of plain work: one load and one store to s->a per step. */
static __attribute__((noinline)) void burst(struct state *s)
{
    uint64_t i = s->i;

    for (unsigned k = 0; k < BURST; k++, i++) {
        unsigned dst = (unsigned)(i & (SLOTS - 1));
        unsigned src = (unsigned)((i * 7 + 1) & (SLOTS - 1));

        s->a[dst] = s->a[src] * 6364136223846793005ull + i;
    }
    s->i = i;
}

static void *worker(void *arg)
{
    struct state *s = arg;

    while (now() < end_time) {
        burst(s);
        nap(NAP_NS);
    }
    return NULL;
}

static void *short_lived(void *arg)
{
    struct state *s = arg;

    for (unsigned n = 0; n < SHORT_BURSTS; n++) {
        burst(s);
        nap(NAP_NS);
    }
    return NULL;
}

static char stdout_buf[4096];

int main(int argc, char **argv)
{
    pthread_t w[NWORKERS], t[NSHORT];
    double seconds, start;

    /* fully buffered: glibc then never fstat()s stdout (inode, times differ per run) */
    setvbuf(stdout, stdout_buf, _IOFBF, sizeof(stdout_buf));
    if (argc != 2 || (seconds = strtod(argv[1], NULL)) <= 0) {
        fprintf(stderr, "usage: attachloop SECONDS\n");
        return 2;
    }
    start = now();
    end_time = start + seconds;
    for (unsigned i = 0; i < NWORKERS; i++) {
        if (pthread_create(&w[i], NULL, worker, &states[i]) != 0) {
            printf("pthread_create failed\n");
            return 1;
        }
    }
    /* pairs of short-lived threads at fixed fractions of the run */
    for (unsigned i = 0; i < NSHORT; i += 2) {
        double at = start + seconds * (i / 2 + 1) / (NSHORT / 2 + 1);
        double left = at - now();

        if (left > 0) {
            nap((long)(left * 1e9));
        }
        for (unsigned j = i; j < i + 2; j++) {
            states[NWORKERS + j].i = j * 1000u;
            if (pthread_create(&t[j], NULL, short_lived, &states[NWORKERS + j]) != 0) {
                printf("pthread_create failed\n");
                return 1;
            }
        }
    }
    for (unsigned i = 0; i < NSHORT; i++) {
        pthread_join(t[i], NULL);
    }
    for (unsigned i = 0; i < NWORKERS; i++) {
        pthread_join(w[i], NULL);
    }
    printf("attachloop: %d workers and %d short-lived threads done\n", NWORKERS, NSHORT);
    return 0;
}
