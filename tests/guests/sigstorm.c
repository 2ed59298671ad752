/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Guest: runs a long straight-line function once while a timer signal
 * (ITIMER_REAL, every PERIOD microseconds, argv[1], default 100) hits an
 * empty handler.
 *
 * Each host signal makes QEMU leave translated code at the next TB start,
 * so a TB that is new when one arrives is left before its first
 * instruction. Coverage must still make progress and record every pc: a
 * TB translated anew after each such exit, slower than the signals come,
 * would never run (the livelock of a first run given up and translated
 * again, jitter/first_run.c). Prints only the function's result, which
 * does not depend on the signals.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>

static volatile unsigned long handled;

static void on_alarm(int sig)
{
    (void)sig;
    handled++;
}

/* About 10 000 instructions without a branch: QEMU cuts them into many TBs. */
#define STEP x = x * 7 + 3, x ^= x >> 5;
#define STEP10 STEP STEP STEP STEP STEP STEP STEP STEP STEP STEP
#define STEP100 STEP10 STEP10 STEP10 STEP10 STEP10 STEP10 STEP10 STEP10 STEP10 STEP10
#define STEP1000 STEP100 STEP100 STEP100 STEP100 STEP100 STEP100 STEP100 STEP100 STEP100 STEP100

__attribute__((noinline)) static unsigned long straight(volatile unsigned long seed)
{
    unsigned long x = seed;

    STEP1000 STEP1000 return x;
}

int main(int argc, char **argv)
{
    long period = argc > 1 ? atol(argv[1]) : 100;
    struct itimerval on = {{0, period}, {0, period}}, off = {{0, 0}, {0, 0}};
    unsigned long r;

    signal(SIGALRM, on_alarm);
    setitimer(ITIMER_REAL, &on, NULL);
    r = straight(12345);
    setitimer(ITIMER_REAL, &off, NULL);
    printf("result %lu\n", r);
    return 0;
}
