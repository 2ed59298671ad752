/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fds.h — the jitter's descriptors: where they sit, and keeping them out of
 * the guest's way.
 *
 * The guest and the jitter share one descriptor table (QEMU's). The
 * jitter's few descriptors (the ring arena, consumer sockets) sit at the
 * top of the guest's RLIMIT_NOFILE, so the guest's own open() returns what
 * it would untraced; QEMU asks fds_next() before a guest syscall that names
 * a descriptor and makes it fail as for one that is not open, and calls
 * fds_claim() before a dup2/dup3 onto one of ours, which then moves.
 *
 * Threads: any. One lock guards the registry; a user that passes one of
 * its descriptors to a syscall while another thread might move it (a
 * guest's dup2) holds fds_lock() around the call.
 */
#ifndef SLUICE_JITTER_FDS_H
#define SLUICE_JITTER_FDS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/**
 * Most descriptors the jitter holds at once: the arena (read-write and
 * read-only), the root directory, the listening socket and its spare (ctl.c), 16
 * consumers and their tail files, 8 pending connections, and room.
 */
#define FDS_MAX 48

/**
 * Move the new descriptor @p fd to a free number at the top of the guest's
 * range (close-on-exec), register @p home as holding it and store the
 * number there. @p fd is closed if it moved.
 * @return the number (also in *home), or -errno (registry full): then @p fd
 *         stays as it is, registered nowhere.
 */
int fds_adopt(int fd, int *home);

/**
 * open(2) absolute @p path with @p flags, from the root directory the jitter
 * started in. It keeps that directory open from the first call (arena_open()
 * at init, before the guest runs), so after the guest chroot()s into a tree
 * without /proc or /tmp, "/proc/self/fd/3" and the socket directory are still
 * found, and "/proc/self" is the caller's process (a forked child's too) with
 * its pid as seen from QEMU's PID namespace, whatever namespaces the guest
 * entered since. If the root could not be opened, @p path is looked up as
 * usual. Any thread.
 * @return a descriptor, or -errno.
 */
int fds_open(const char *path, int flags);

/**
 * readlink(2) absolute @p path as fds_open() finds it, into @p buf (@p n
 * bytes, no NUL added). Any thread.
 * @return the link's length, or -errno.
 */
ssize_t fds_readlink(const char *path, char *buf, size_t n);

/**
 * unlink(2) absolute @p path as fds_open() finds it. Any thread.
 * @return 0, or -errno.
 */
int fds_unlink(const char *path);

/** The descriptor registered at @p from now lives at @p to (its number is copied there). */
void fds_move(int *from, int *to);

/** Unregister @p home (before its holder closes the descriptor). */
void fds_drop(int *home);

/** The lowest registered descriptor >= @p from, or -1 (QEMU's fd_next). */
int fds_next(int from);

/**
 * The guest is about to make @p fd its own (QEMU's fd_claim): if it is one
 * of ours, move ours to another number first.
 * @return 0, or -EMFILE when no number is free.
 */
int fds_claim(int fd);

/**
 * Set the size of our file @p fd to @p bytes (ftruncate), under fds_lock()
 * once @p fd is registered.
 * Past the file size limit (RLIMIT_FSIZE, ulimit -f) it fails with -EFBIG
 * and the SIGXFSZ the kernel sends is taken back: the guest never sees it.
 * @return 0 or -errno.
 */
int fds_grow(int fd, uint64_t bytes);

/**
 * Whether one more descriptor can be opened now (tried with /dev/null,
 * closed again): QEMU still needs one beside ours.
 * @return 0, or -errno of the open (-EMFILE: RLIMIT_NOFILE).
 */
int fds_spare(void);

/** Hold the registry still (see the file comment). */
void fds_lock(void);
/** Release fds_lock(). */
void fds_unlock(void);

/** Child after fork: the registry's lock may have been held by a thread that is gone. */
void fds_after_fork_child(void);

#endif /* SLUICE_JITTER_FDS_H */
