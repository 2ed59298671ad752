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

/* This process's getpid() (high half) and ids_pid() (low half) when last asked: a fork
 * changes the first. Callers under fds_lock() (ctl.c) then read it without taking it. */
static uint64_t cached;

/* From /proc/thread-self: the pid, and the tid in @p tid; 0 if /proc cannot tell. */
static uint32_t from_proc(uint32_t *tid)
{
    char link[64];
    ssize_t n = fds_proc_readlink("thread-self", link, sizeof(link) - 1);
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
    uint32_t local = (uint32_t)getpid(), pid, t;
    uint64_t c = __atomic_load_n(&cached, __ATOMIC_RELAXED);

    if (!tid && c >> 32 == local) {
        return (uint32_t)c;
    }
    pid = from_proc(&t);
    if (!pid) {
        return local;
    }
    if (tid) {
        *tid = t;
    }
    __atomic_store_n(&cached, (uint64_t)local << 32 | pid, __ATOMIC_RELAXED);
    return pid;
}
