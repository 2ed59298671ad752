/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ctl.h — the jitter's consumer registry and control thread (protocol:
 * ctl.h in include/sluice).
 *
 * Consumers come through the socket inherited from `sluice run` (the
 * jitter's consumer_fd option) and, at any time, through the socket this
 * process listens on (ctl_sock.h). Each holds one of SLUICE_MAX_CONSUMERS
 * slots, the same index in every ring header of the process.
 */
#ifndef SLUICE_JITTER_CTL_H
#define SLUICE_JITTER_CTL_H

#include "ring.h"

/**
 * Main thread, at jitter init: attach the consumer on the inherited socket
 * @p fd, if >= 0 (move it out of the guest's way, read its HELLO, answer
 * WELCOME); listen on this process's socket if @p listen; start the control
 * thread. @p arch and @p comm are the process's, for messages.
 * @p wait_attach consumers are then awaited by ctl_wait_attach().
 * @return 0, or -errno after one line on stderr (a socket that cannot be
 *         made is said, and is no error unless @p wait_attach needs it).
 */
int ctl_init(const char *arch, const char *comm, int fd, int listen, unsigned wait_attach);

/** Consumers attached now (LIVE). Any thread, without a lock. */
unsigned ctl_consumers(void);

/** Main thread, after init: return once ctl_init()'s wait_attach consumers attached. */
void ctl_wait_attach(void);

/**
 * Drop every attached consumer (only the lossy ones if @p lossy_only) that
 * still holds a ring of an ended thread unread (ring_slot_unread()), saying
 * @p why on stderr: its slots close, so those rings can go. Any thread,
 * under the ring-list lock.
 * @return how many were dropped.
 */
unsigned ctl_drop_holders(int lossy_only, const char *why);

/**
 * Whether the consumer in slot @p i has left three quarters or more of its
 * control socket's buffer unread (the announcements of new threads: about
 * 120 of them here): it does not read it, as a stopped one does not (one
 * that reads takes each message within moments, unless it has no CPU),
 * and the socket is close to full (a full one holds thread starts back).
 * 0 if the slot holds no attached consumer.
 * Any thread, under the ring-list lock.
 */
int ctl_backlogged(unsigned i);

/**
 * Drop the consumer in slot @p i if it is attached, saying @p why on
 * stderr and to it. Any thread, under the ring-list lock.
 * @return 1 if it was dropped, 0 if the slot held no attached consumer.
 */
int ctl_drop(unsigned i, const char *why);

/**
 * vCPU, new ring, under the ring-list lock: open its slot of every attached
 * consumer and send them the arena and its offset.
 */
void ctl_announce(struct ring *r);

/**
 * Tell every attached consumer that this process ends now because thread
 * @p tid could not be traced (ABORT, sluice/ctl.h), saying @p why, and
 * remove the socket it listens on; the caller then ends the process. Waits for a full socket a few
 * seconds at most. vCPU, under the ring-list lock.
 * @param forked_child 1 in a forked child before ctl_fork_child() (the
 *        parent's connections are the child's too; the lock the parent held
 *        across fork is made anew), else 0
 */
void ctl_abort(uint32_t tid, const char *why, int forked_child);

/** Around fork(2), after the ring-list lock: hold the registry still. */
void ctl_fork_prepare(void);
/** Parent after fork(2). */
void ctl_fork_parent(void);
/**
 * Child after fork(2): the attached consumers stay (their sockets are
 * shared); the child listens on a socket of its own and starts its own
 * control thread (threads do not survive fork).
 */
void ctl_fork_child(void);

/** The process ends (exit, fatal signal): remove its socket file. */
void ctl_process_exit(void);

/**
 * Exclusive, before a syscall that ends the process if it succeeds (execve,
 * a SIGKILL of itself): remove its socket file now, as nothing of ours runs
 * after it (a forked child's exec left one stale file per command a traced
 * shell ran). Consumers already attached stay attached.
 */
void ctl_exec_start(void);

/**
 * Any vCPU thread, at each syscall return: if this thread's syscall was the
 * one ctl_exec_start() came before, it failed and the process goes on:
 * listen on a socket file again, on the same descriptor. Else nothing.
 */
void ctl_exec_failed(void);

#endif /* SLUICE_JITTER_CTL_H */
