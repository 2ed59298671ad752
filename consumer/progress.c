/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * progress.c — the status line of `sluice run` and `sluice attach` (see
 * progress.h).
 *
 * Owns one thread that sleeps on a condition variable, so stopping it is
 * immediate. It only reads the session's live figures
 * (sluice_session__progress()); it must never touch anything else of the
 * session, nor write anything but its own line.
 */
#include "progress.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

/* Carriage return, then erase to the end of the line (ECMA-48 EL). */
#define LINE_START "\r\033[K"

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Columns of the terminal on stderr, or 80 if it does not say. */
static int columns(void)
{
    struct winsize ws;

    return ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 ? ws.ws_col : 80;
}

/*
 * One status line, rewritten over the last; no newline. Cut to the
 * terminal's width less one: a line that wrapped would leave a row behind
 * at every rewrite (\r goes back to the start of the last row only).
 */
static void show(const struct sluice_progress *f, double elapsed, double rate)
{
    char line[160];
    int n = snprintf(line, sizeof(line),
                     "sluice: %.0f s, %.1f M events/s, %.1f M events, %" PRIu32
                     " thread%s, lost %" PRIu64,
                     elapsed, rate / 1e6, (double)f->events / 1e6, f->threads,
                     f->threads == 1 ? "" : "s", f->lost);
    int width = columns() - 1;

    if (n > width) {
        n = width > 0 ? width : 0;
    }
    fprintf(stderr, LINE_START "%.*s", n, line);
    fflush(stderr);
}

static void *progress_thread(void *arg)
{
    struct progress *p = arg;
    double t0 = now(), last_t = t0;
    uint64_t last = 0;

    pthread_setname_np(pthread_self(), "sluice-progress"); /* for top -H, perf, gdb */
    pthread_mutex_lock(&p->lock);
    while (!p->stop) {
        struct sluice_progress f;
        struct timespec until;
        double t;

        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 1;
        if (pthread_cond_timedwait(&p->cond, &p->lock, &until) == 0 || p->stop) {
            continue;
        }
        sluice_session__progress(p->s, &f);
        t = now();
        show(&f, t - t0, t > last_t ? (double)(f.events - last) / (t - last_t) : 0.0);
        p->shown = 1;
        last = f.events;
        last_t = t;
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

void progress_start(struct progress *p, const struct sluice_session *s)
{
    memset(p, 0, sizeof(*p));
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->cond, NULL);
    p->s = s;
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
    if (p->shown) {
        fputs(LINE_START, stderr); /* the summary that follows starts a clean line */
        fflush(stderr);
    }
    p->running = 0;
    pthread_cond_destroy(&p->cond);
    pthread_mutex_destroy(&p->lock);
}
