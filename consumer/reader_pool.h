/* SPDX-License-Identifier: GPL-2.0-or-later */
/**
 * @file reader_pool.h
 * @brief The threads that read a live session's rings: a few, each serving
 *        up to READER_POOL_RINGS rings, not one per guest thread.
 *
 * A guest of thousands of threads must not cost the consumer a thread each:
 * they count against the user's RLIMIT_NPROC (a guest that makes threads
 * until EAGAIN would leave its last rings unread) and each has a stack. A
 * pool thread steps its rings in turn (the source's step function: take a
 * span, or notice the end) and, when none has anything, sleeps on all of
 * them at once (futex_waitv: every ring's head_futex and its own doorbell,
 * at most FUTEX_WAITV_MAX words). Rings are spread over one thread per
 * online CPU first (a busy ring keeps a thread to itself, as before), then
 * packed. Private to libsluice.
 */
#ifndef SLUICE_READER_POOL_H
#define SLUICE_READER_POOL_H

#include <linux/futex.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct ring_state;

/** Rings one thread serves: its futex_waitv has them and its doorbell. */
#define READER_POOL_RINGS (FUTEX_WAITV_MAX - 1)

/** What one step of a ring did (the source's step function says). */
enum reader_step {
    READER_WORK,  /* it did something: step the rings again before any wait */
    READER_IDLE,  /* nothing published: may sleep on its head_futex */
    READER_RETRY, /* waits on another thread of ours (the workers): look again soon */
    READER_DONE,  /* ended: its end was pushed, it is no longer the pool's to touch */
};

/** One step of @p r on its pool thread; never blocks except for the chunk pool. */
typedef enum reader_step reader_step_fn(struct ring_state *r);

struct reader_thread;

/** The pool. Fields are private (under lock, unless said). */
struct reader_pool {
    pthread_mutex_t lock;
    struct reader_thread **threads;
    size_t n_threads, cap;
    unsigned spread; /* threads made before one takes a second ring: online CPUs */
    reader_step_fn *step;
};

/** Set up an empty pool (no thread yet) stepping rings with @p step. Control thread. */
void reader_pool__init(struct reader_pool *p, reader_step_fn *step);

/**
 * Give ring @p r to a pool thread, starting one if every thread serves
 * READER_POOL_RINGS rings, or fewer threads than online CPUs run. Control
 * thread.
 * @return 0, or a positive errno (pthread_create's, or ENOMEM): @p r was
 *         not taken, and is still the caller's.
 */
int reader_pool__add(struct reader_pool *p, struct ring_state *r);

/** Make every pool thread step all its rings now (end of stream, detach). Any thread. */
void reader_pool__kick(struct reader_pool *p);

/**
 * Stop and join every pool thread and free the pool. Every ring given must
 * have reached READER_DONE. Control thread.
 */
void reader_pool__stop(struct reader_pool *p);

#endif
