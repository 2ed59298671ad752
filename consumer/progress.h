/* SPDX-License-Identifier: GPL-2.0-or-later */
/**
 * @file progress.h
 * @brief Periodic "N events, R events/s" lines on stderr during a long trace.
 */
#ifndef SLUICE_PROGRESS_H
#define SLUICE_PROGRESS_H

#include <pthread.h>

#include "sluice/consumer.h"

/** A progress reporter. Fields are private. */
struct progress {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int stop;
    int running;
    int period_s;
    const struct sluice_session *s;
};

/**
 * Start a thread printing sluice_session__events() of @p s to stderr every
 * @p period_s seconds. Failure to start is silent (progress is optional).
 */
void progress_start(struct progress *p, const struct sluice_session *s, int period_s);

/** Stop and join the thread (at once, not at the next period). Safe if it never started. */
void progress_stop(struct progress *p);

#endif /* SLUICE_PROGRESS_H */
