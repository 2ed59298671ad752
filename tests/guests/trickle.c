/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * trickle.c — a guest whose traced lines come slowly: tick() 10 times a
 * second for S seconds (argv[1], default 4), so a filter over tick() keeps
 * a few lines a second (status.py: a dump -o FILE must be written as they
 * come, not only at the end). Prints how many calls it made.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

volatile long sink;

__attribute__((noinline)) void tick(long i)
{
    sink += i;
}

int main(int argc, char **argv)
{
    struct timespec tenth = {0, 100000000};
    int n = 10 * (argc > 1 ? atoi(argv[1]) : 4), k;

    for (k = 0; k < n; k++) {
        tick(k);
        nanosleep(&tenth, NULL);
    }
    printf("tick calls %d\n", k);
    return 0;
}
