/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * restart.c — a blocking read interrupted by signals whose handler asks
 * for restarts (SA_RESTART): the kernel (QEMU here) runs the read again
 * after each handler, so the guest sees one return only, and no sigreturn
 * returns anything. Prints what the guest saw and counted itself:
 *   read returned R after N signals in pid P
 * (exact.py checks a --syscalls trace against it.)
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile int handled;

static void on_alarm(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)si, (void)uc;
    handled++;
}

int main(void)
{
    struct itimerval every = {{0, 50000}, {0, 50000}}, stop = {{0, 0}, {0, 0}};
    struct sigaction sa;
    int p[2], n;
    ssize_t r;
    char c;

    if (pipe(p) != 0) {
        return 1;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_alarm;
    sa.sa_flags = SA_RESTART | SA_SIGINFO; /* SA_SIGINFO: rt_sigreturn on every arch */
    sigaction(SIGALRM, &sa, NULL);
    if (fork() == 0) {
        usleep(400000);
        (void)write(p[1], "x", 1);
        _exit(0);
    }
    setitimer(ITIMER_REAL, &every, NULL);
    r = read(p[0], &c, 1);
    setitimer(ITIMER_REAL, &stop, NULL);
    n = handled;
    wait(NULL);
    printf("read returned %zd after %d signals in pid %d\n", r, n, (int)getpid());
    return 0;
}
