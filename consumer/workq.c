/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * workq.c — the worker pool (see workq.h).
 *
 * A mutex and a condition variable around a singly linked FIFO. At 256 KiB
 * per chunk the lock is taken a few thousand times a second at most, so a
 * lock-free queue would buy nothing measurable.
 */
#include "workq.h"

#include <errno.h>
#include <stdlib.h>

static void *worker(void *arg)
{
    struct workq *q = arg;

    pthread_setname_np(pthread_self(), "sluice-worker"); /* for top -H, perf, gdb */
    for (;;) {
        struct chunk *c;

        pthread_mutex_lock(&q->lock);
        while (!q->head && !q->closing) {
            pthread_cond_wait(&q->cond, &q->lock);
        }
        c = q->head;
        if (c) {
            q->head = c->qnext;
            if (!q->head) {
                q->tail = NULL;
            }
        }
        pthread_mutex_unlock(&q->lock);
        if (!c) {
            return NULL; /* closing and drained */
        }
        c->qnext = NULL;
        q->fn(q->ctx, c);
    }
}

int workq__start(struct workq *q, unsigned n, workq_fn *fn, void *ctx)
{
    unsigned i;
    int err = 0;

    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->cond, NULL);
    q->head = q->tail = NULL;
    q->closing = 0;
    q->fn = fn;
    q->ctx = ctx;
    q->n_threads = 0;
    q->threads = calloc(n ? n : 1, sizeof(*q->threads));
    if (!q->threads) {
        err = ENOMEM;
    }
    for (i = 0; !err && i < (n ? n : 1); i++) {
        err = pthread_create(&q->threads[i], NULL, worker, q);
        if (!err) {
            q->n_threads++;
        }
    }
    if (err) {
        workq__finish(q);
    }
    return -err;
}

void workq__push(struct workq *q, struct chunk *c)
{
    c->qnext = NULL;
    pthread_mutex_lock(&q->lock);
    if (q->tail) {
        q->tail->qnext = c;
    } else {
        q->head = c;
    }
    q->tail = c;
    pthread_cond_signal(&q->cond);
    pthread_mutex_unlock(&q->lock);
}

void workq__finish(struct workq *q)
{
    unsigned i;

    pthread_mutex_lock(&q->lock);
    q->closing = 1;
    pthread_cond_broadcast(&q->cond);
    pthread_mutex_unlock(&q->lock);
    for (i = 0; i < q->n_threads; i++) {
        pthread_join(q->threads[i], NULL);
    }
    free(q->threads);
    q->threads = NULL;
    q->n_threads = 0;
    pthread_cond_destroy(&q->cond);
    pthread_mutex_destroy(&q->lock);
}
