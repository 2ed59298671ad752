/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * progress.c — progress lines for `sluice run` (see progress.h).
 *
 * Owns one thread that sleeps on a condition variable, so stopping it is
 * immediate. It only reads the session's atomic event counter; it must
 * never touch anything else of the session.
 */
#include "progress.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *progress_thread(void *arg)
{
    struct progress *p = arg;
    double t0 = now(), last_t = t0;
    unsigned long long last = 0;
    int period = p->period_s;

    pthread_mutex_lock(&p->lock);
    while (!p->stop) {
        struct timespec until;

        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += period;
        if (pthread_cond_timedwait(&p->cond, &p->lock, &until) == 0 || p->stop) {
            continue;
        }
        {
            unsigned long long ev = sluice_session__events(p->s);
            double t = now();

            fprintf(stderr, "sluice: %llu events in %.0f s, %.1f M events/s\n", ev, t - t0,
                    t > last_t ? (double)(ev - last) / (t - last_t) / 1e6 : 0.0);
            last = ev;
            last_t = t;
        }
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

void progress_start(struct progress *p, const struct sluice_session *s, int period_s)
{
    memset(p, 0, sizeof(*p));
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->cond, NULL);
    p->s = s;
    p->period_s = period_s > 0 ? period_s : 2;
    p->running = pthread_create(&p->thread, NULL, progress_thread, p) == 0;
}

void progress_stop(struct progress *p)
{
    if (!p->running) {
        return;
    }
    pthread_mutex_lock(&p->lock);
    p->stop = 1;
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->thread, NULL);
    p->running = 0;
    pthread_cond_destroy(&p->cond);
    pthread_mutex_destroy(&p->lock);
}
