/* SPDX-License-Identifier: GPL-2.0-or-later */
/**
 * @file workq.h
 * @brief Worker pool: a FIFO of chunks and the threads that process them.
 *
 * Chunks are taken in push order by whichever worker is free; the function
 * runs on a worker thread, for many chunks in parallel, so it must only touch
 * the chunk it is given (and thread-safe shared state). The queue itself is
 * unbounded: the chunk pool bounds how many chunks exist.
 */
#ifndef SLUICE_WORKQ_H
#define SLUICE_WORKQ_H

#include <pthread.h>

#include "chunk.h"

/** Processes one chunk on a worker thread; owns @p c afterwards. */
typedef void workq_fn(void *ctx, struct chunk *c);

/** The pool. Fields are private. */
struct workq {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct chunk *head, *tail;
    int closing;
    pthread_t *threads;
    unsigned n_threads;
    workq_fn *fn;
    void *ctx;
};

/**
 * Start @p n (>= 1) worker threads running @p fn.
 * @return 0, or -errno (ENOMEM, or pthread_create's error; threads already
 *         started are stopped again).
 */
int workq__start(struct workq *q, unsigned n, workq_fn *fn, void *ctx);

/** Queue @p c for a worker. Any thread. */
void workq__push(struct workq *q, struct chunk *c);

/** Process everything queued, then stop and join the workers. Call once, after the last push. */
void workq__finish(struct workq *q);

#endif /* SLUICE_WORKQ_H */
