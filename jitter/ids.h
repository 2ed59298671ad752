/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ids.h — this process's and thread's ids as consumers know them.
 *
 * A guest may move its children into a new PID namespace (unshare,
 * clone(CLONE_NEWPID)), where getpid() says 1 in each of them: named so,
 * their rings and sockets were taken for one another's. The ids here are
 * those of the PID namespace QEMU started in, which `sluice` and `ps` see.
 */
#ifndef SLUICE_JITTER_IDS_H
#define SLUICE_JITTER_IDS_H

#include <stdint.h>

/**
 * The calling thread's process id, and in @p tid (unless NULL) its thread
 * id, in the PID namespace QEMU started in: /proc/thread-self of the /proc
 * the jitter keeps (fds_readlink()). If /proc cannot tell, getpid(), and
 * @p tid left as it is. Any thread; slow paths only. The process id is kept
 * once known, so a caller holding fds_lock() may ask for it (not for @p tid:
 * that is a readlink under the lock) once jitter_init() or
 * ids_fork_child() learnt it.
 */
uint32_t ids_pid(uint32_t *tid);

/** The only thread of a forked child, after fds_after_fork_child(): learn its id anew. */
void ids_fork_child(void);

#endif /* SLUICE_JITTER_IDS_H */
