/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * reader_pool.c — the threads that step a live session's rings.
 *
 * Owns the pool threads and which rings each serves; what a step does is
 * the source's (ring_source.c). Threads: the control thread adds rings and
 * stops the pool; each pool thread owns its rings' reading state. A pool
 * thread must never sleep while one of its rings has something published:
 * it arms every idle ring (ring_reader__arm: the producer then wakes its
 * head_futex) before it sleeps on all of them at once.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "reader_pool.h"
#include "session_state.h"

/*
 * How long a pool thread sleeps before it steps its rings again, though
 * nothing woke it: producers wake it when they publish or close, the
 * control thread at the end of stream, so this only bounds a missed
 * wake-up (a worker that found a bad span does not wake it).
 */
#define WAIT_MS 1000
/* ... and while a ring waits on the workers (READER_RETRY). */
#define RETRY_MS 1

struct reader_thread {
    struct reader_pool *pool;
    pthread_t th;
    uint32_t doorbell; /* bumped and woken: new rings in the inbox, or stop */
    int stop;          /* under the pool's lock */
    unsigned n;        /* under the pool's lock: rings given and not done */
    struct ring_state *inbox[READER_POOL_RINGS]; /* under the pool's lock */
    size_t n_inbox;
    /* The thread's own: */
    struct ring_state *rings[READER_POOL_RINGS];
    enum reader_step last[READER_POOL_RINGS];
    size_t n_rings;
};

static void ring_doorbell(struct reader_thread *t)
{
    __atomic_add_fetch(&t->doorbell, 1, __ATOMIC_RELEASE);
    syscall(SYS_futex, &t->doorbell, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* Move the rings given since the last look into our own. Whether to stop. */
static int take_inbox(struct reader_thread *t)
{
    int stop;

    pthread_mutex_lock(&t->pool->lock);
    for (size_t k = 0; k < t->n_inbox; k++) {
        t->last[t->n_rings] = READER_WORK;
        t->rings[t->n_rings++] = t->inbox[k];
    }
    t->n_inbox = 0;
    stop = t->stop && t->n_rings == 0;
    pthread_mutex_unlock(&t->pool->lock);
    return stop;
}

/* Step every ring once; a ring done is dropped. Whether any did something. */
static int step_all(struct reader_thread *t, int *retry)
{
    int work = 0;

    *retry = 0;
    for (size_t k = 0; k < t->n_rings;) {
        enum reader_step st = t->pool->step(t->rings[k]);

        if (st == READER_DONE) {
            t->rings[k] = t->rings[--t->n_rings];
            pthread_mutex_lock(&t->pool->lock);
            t->n--;
            pthread_mutex_unlock(&t->pool->lock);
            work = 1;
            continue;
        }
        t->last[k++] = st;
        work |= st == READER_WORK;
        *retry |= st == READER_RETRY;
    }
    return work;
}

/*
 * Sleep until a ring publishes, the doorbell rings (its value is no longer
 * @p bell), or @p ms pass. Idle rings are armed first; one found to have
 * something after all means no sleep.
 */
static void wait_all(struct reader_thread *t, uint32_t bell, int ms)
{
    struct futex_waitv w[FUTEX_WAITV_MAX];
    struct timespec ts;
    size_t n = 0, armed[READER_POOL_RINGS], n_armed = 0;
    int ready = 0;

    w[n++] = (struct futex_waitv){
        .val = bell, .uaddr = (uintptr_t)&t->doorbell, .flags = FUTEX_32 | FUTEX_PRIVATE_FLAG};
    for (size_t k = 0; k < t->n_rings && !ready; k++) {
        uint32_t seen;

        if (t->last[k] != READER_IDLE) {
            continue; /* READER_RETRY: its timeout, not its head, says when */
        }
        if (!ring_reader__arm(&t->rings[k]->rd, &seen)) {
            ready = 1;
            break;
        }
        armed[n_armed++] = k;
        /* Shared (no private flag): the producer is another process. */
        w[n++] = (struct futex_waitv){.val = seen,
                                      .uaddr = (uintptr_t)ring_reader__head_futex(&t->rings[k]->rd),
                                      .flags = FUTEX_32};
    }
    if (!ready) {
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += ms / 1000;
        ts.tv_nsec += (long)(ms % 1000) * 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        if (syscall(SYS_futex_waitv, w, n, 0, &ts, CLOCK_MONOTONIC) < 0 && errno == ENOSYS) {
            usleep(RETRY_MS * 1000); /* before Linux 5.16: look again soon */
        }
    }
    for (size_t k = 0; k < n_armed; k++) {
        ring_reader__disarm(&t->rings[armed[k]]->rd);
    }
}

static void *reader_main(void *arg)
{
    struct reader_thread *t = arg;

    pthread_setname_np(pthread_self(), "sluice-reader"); /* for top -H, perf, gdb */
    for (;;) {
        /* Read before the inbox: a ring given after it rings the bell anew. */
        uint32_t bell = __atomic_load_n(&t->doorbell, __ATOMIC_ACQUIRE);
        int retry;

        if (take_inbox(t)) {
            return NULL;
        }
        if (!step_all(t, &retry)) {
            wait_all(t, bell, retry ? RETRY_MS : WAIT_MS);
        }
    }
}

void reader_pool__init(struct reader_pool *p, reader_step_fn *step)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);

    *p = (struct reader_pool){.step = step, .spread = cpus < 1 ? 1 : (unsigned)cpus};
    pthread_mutex_init(&p->lock, NULL);
}

/* A new pool thread, in p->threads; 0 or a positive errno. Under p->lock. */
static int new_thread(struct reader_pool *p, struct reader_thread **out)
{
    struct reader_thread *t;
    int err;

    if (p->n_threads == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 8;
        struct reader_thread **grown = realloc(p->threads, cap * sizeof(*grown));

        if (!grown) {
            return ENOMEM;
        }
        p->threads = grown;
        p->cap = cap;
    }
    t = calloc(1, sizeof(*t));
    if (!t) {
        return ENOMEM;
    }
    t->pool = p;
    err = pthread_create(&t->th, NULL, reader_main, t);
    if (err) {
        free(t);
        return err;
    }
    p->threads[p->n_threads++] = *out = t;
    return 0;
}

int reader_pool__add(struct reader_pool *p, struct ring_state *r)
{
    struct reader_thread *best = NULL;
    int err = 0;

    pthread_mutex_lock(&p->lock);
    for (size_t k = 0; k < p->n_threads; k++) {
        if (!best || p->threads[k]->n < best->n) {
            best = p->threads[k];
        }
    }
    if (!best || (best->n > 0 && p->n_threads < p->spread) || best->n >= READER_POOL_RINGS) {
        err = new_thread(p, &best);
    }
    if (!err) {
        best->inbox[best->n_inbox++] = r;
        best->n++;
    }
    pthread_mutex_unlock(&p->lock);
    if (!err) {
        ring_doorbell(best);
    }
    return err;
}

void reader_pool__kick(struct reader_pool *p)
{
    pthread_mutex_lock(&p->lock);
    for (size_t k = 0; k < p->n_threads; k++) {
        ring_doorbell(p->threads[k]);
    }
    pthread_mutex_unlock(&p->lock);
}

void reader_pool__stop(struct reader_pool *p)
{
    pthread_mutex_lock(&p->lock);
    for (size_t k = 0; k < p->n_threads; k++) {
        p->threads[k]->stop = 1;
    }
    pthread_mutex_unlock(&p->lock);
    reader_pool__kick(p);
    for (size_t k = 0; k < p->n_threads; k++) {
        pthread_join(p->threads[k]->th, NULL);
        free(p->threads[k]);
    }
    free(p->threads);
    pthread_mutex_destroy(&p->lock);
    *p = (struct reader_pool){0};
}
