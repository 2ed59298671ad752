/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Guest: a process that forks children one after another while two threads
 * spin, for consumers attached and detached while it runs
 * (tests/e2e/attach.py, case forks).
 *
 *   forkloop SECONDS
 *
 * For SECONDS of wall time the main thread forks a child, which runs the
 * same fixed loop (so the same instruction count in every child) and
 * _exits, and waits for it; two threads keep the parent in translated code
 * meanwhile. A child forked while a consumer attaches (the jitter's flush
 * not yet done) must still be traced whole. Prints how many children ran.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;
static volatile int stop;

static void work(long n)
{
    for (long i = 0; i < n; i++) {
        sink += (unsigned long)i;
    }
}

static void *spin(void *arg)
{
    (void)arg;
    while (!stop) {
        work(1000);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    pthread_t t[2];
    time_t end;
    long n = 0;

    if (argc != 2) {
        fprintf(stderr, "usage: forkloop SECONDS\n");
        return 2;
    }
    end = time(NULL) + atoi(argv[1]);
    for (int i = 0; i < 2; i++) {
        pthread_create(&t[i], NULL, spin, NULL);
    }
    while (time(NULL) < end) {
        pid_t p = fork();

        if (p == 0) {
            work(30000);
            _exit(0);
        }
        if (p < 0) {
            perror("fork");
            return 1;
        }
        waitpid(p, NULL, 0);
        n++;
    }
    stop = 1;
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
    }
    printf("forkloop: %s children\n", n > 0 ? "some" : "no");
    return 0;
}
