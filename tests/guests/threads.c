/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Guest: four pthreads doing plain work and atomics.
 *
 * Once a guest has a second thread, QEMU translates with CF_PARALLEL and
 * atomics go through helpers, which must still be traced. The threads race
 * on purpose (race_shared_atomics); the e2e test runs sluice and the
 * reference plugin in the same QEMU process, so even the racing part must
 * match exactly.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#define NTHREADS 4
#define ROUNDS 200

static volatile uint32_t shared_counter;
static uint32_t own_slot[NTHREADS * 16]; /* one cache line per thread */
static uint64_t results[NTHREADS];

static __attribute__((noinline)) uint64_t det_work(unsigned idx)
{
    volatile uint32_t local[64];
    uint64_t h = 1469598103934665603ull ^ idx;

    for (unsigned i = 0; i < 64; i++) {
        local[i] = i * 2654435761u + idx;
    }
    for (unsigned r = 0; r < 20; r++) {
        for (unsigned i = 0; i < 64; i++) {
            h = (h ^ local[(i + r) & 63]) * 1099511628211ull;
        }
    }
    return h;
}

static __attribute__((noinline)) void det_own_atomics(unsigned idx)
{
    for (unsigned i = 0; i < ROUNDS; i++) {
        __atomic_fetch_add(&own_slot[idx * 16], i + idx, __ATOMIC_SEQ_CST);
    }
}

static __attribute__((noinline)) void race_shared_atomics(void)
{
    for (unsigned i = 0; i < ROUNDS; i++) {
        __atomic_fetch_add(&shared_counter, 1, __ATOMIC_SEQ_CST);
    }
}

static __attribute__((noinline)) void *det_worker(void *arg)
{
    unsigned idx = (unsigned)(uintptr_t)arg;

    results[idx] = det_work(idx);
    det_own_atomics(idx);
    race_shared_atomics();
    return NULL;
}

static char stdout_buf[4096];

int main(void)
{
    pthread_t t[NTHREADS];

    /* fully buffered: glibc then never fstat()s stdout (inode, times differ per run) */
    setvbuf(stdout, stdout_buf, _IOFBF, sizeof(stdout_buf));

    for (unsigned i = 0; i < NTHREADS; i++) {
        if (pthread_create(&t[i], NULL, det_worker, (void *)(uintptr_t)i) != 0) {
            printf("pthread_create failed\n");
            return 1;
        }
    }
    for (unsigned i = 0; i < NTHREADS; i++) {
        pthread_join(t[i], NULL);
    }
    printf("shared=%u\n", (unsigned)shared_counter);
    for (unsigned i = 0; i < NTHREADS; i++) {
        printf("thread %u: work=%llx own=%llu\n", i, (unsigned long long)results[i],
               (unsigned long long)own_slot[i * 16]);
    }
    return 0;
}
