/* SPDX-License-Identifier: GPL-2.0-or-later */
/**
 * @file progress.h
 * @brief A status line on a terminal during a long trace: one line on
 * stderr, rewritten in place every second (elapsed time, events/s, events,
 * live threads, lost events), erased when the trace ends.
 *
 * The caller decides whether stderr is a terminal the line may own
 * (sluice.c); nothing here checks.
 */
#ifndef SLUICE_PROGRESS_H
#define SLUICE_PROGRESS_H

#include <pthread.h>

#include "sluice/consumer.h"

/** A status line. Fields are private. */
struct progress {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int stop;
    int running;
    int shown; /* a line is on the terminal: erase it at the end */
    const struct sluice_session *s;
};

/**
 * Start a thread that rewrites the status line of @p s on stderr every
 * second (sluice_session__progress()). Failure to start is silent (the line
 * is optional). Call from the thread that will call progress_stop().
 */
void progress_start(struct progress *p, const struct sluice_session *s);

/**
 * Stop and join the thread (at once, not at the next second) and erase the
 * line, so what is printed next starts a clean line. Safe if it never started.
 */
void progress_stop(struct progress *p);

#endif /* SLUICE_PROGRESS_H */
