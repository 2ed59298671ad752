/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ids.c — this process's and thread's ids as consumers know them (see ids.h).
 *
 * Any thread; never on the fast path (thread start, fork, control
 * messages).
 */
#include "ids.h"

#include <stdio.h>
#include <unistd.h>

#include "fds.h"

/* This process's id once known (ids_pid()), 0 before: set at init, cleared in a forked
 * child (ids_fork_child()). Callers under fds_lock() (ctl.c) then read it without taking it. */
static uint32_t cached;

/* From /proc/thread-self: the pid, and the tid in @p tid; 0 if /proc cannot tell. */
static uint32_t from_proc(uint32_t *tid)
{
    char link[64];
    ssize_t n = fds_readlink("/proc/thread-self", link, sizeof(link) - 1);
    unsigned pid, t;

    if (n <= 0) {
        return 0;
    }
    link[n] = '\0'; /* "PID/task/TID" */
    if (sscanf(link, "%u/task/%u", &pid, &t) != 2) {
        return 0;
    }
    *tid = t;
    return pid;
}

uint32_t ids_pid(uint32_t *tid)
{
    uint32_t c = __atomic_load_n(&cached, __ATOMIC_RELAXED), pid, t;

    if (!tid && c) {
        return c;
    }
    pid = from_proc(&t);
    if (!pid) {
        return (uint32_t)getpid();
    }
    if (tid) {
        *tid = t;
    }
    __atomic_store_n(&cached, pid, __ATOMIC_RELAXED);
    return pid;
}

void ids_fork_child(void)
{
    /* Not keyed by getpid(): in nested PID namespaces a child and its parent are both pid 1
     * there (a child once named its socket by its parent's pid). */
    __atomic_store_n(&cached, 0, __ATOMIC_RELAXED);
    (void)ids_pid(NULL);
}
