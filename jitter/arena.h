/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * arena.h — the one memfd that holds every ring of this guest process.
 *
 * One descriptor for all rings, whatever the thread count (a descriptor per
 * thread ran the guest out of them at about a thousand threads). Rings are
 * laid end to end at offsets arena_alloc() hands out; the file is made
 * large and sparse (it grows further only under a file size limit set
 * before QEMU started) and never shrinks, but the data of a ring nobody
 * reads any more is given back to the kernel and its range reused
 * (arena_release()).
 *
 * Threads: arena_alloc/arena_release under the jitter's ring-list lock (or
 * exclusive); arena_fd() anywhere, under fds_lock() if the number is passed
 * to a syscall (a guest's dup2 may move it).
 */
#ifndef SLUICE_JITTER_ARENA_H
#define SLUICE_JITTER_ARENA_H

#include <stdint.h>

/**
 * Create this process's arena (at init, and in a child after fork), sealed
 * against shrinking, and its read-only descriptor (through /proc/self/fd).
 * @return 0 or -errno (nothing is left open).
 */
int arena_open(void);

/** Forget the parent's arena in a child after fork (close our copy of its memfd). */
void arena_forget(void);

/** The arena's descriptor, or -1 before arena_open(). */
int arena_fd(void);

/**
 * The arena opened read-only, the descriptor consumers are given (they map
 * rings PROT_READ: record.h), or -1 before arena_open().
 */
int arena_ro_fd(void);

/**
 * A range of @p bytes (a multiple of the page size): one released with the
 * same size if any, else the arena grows.
 * @param[out] offset file offset of the range
 * @return 0, or -errno (the arena is unchanged): -EFBIG past the file size
 *         limit (RLIMIT_FSIZE, ulimit -f; no SIGXFSZ is raised).
 */
int arena_alloc(uint64_t bytes, uint64_t *offset);

/**
 * Give the pages of [offset, offset + bytes) back to the kernel: they read
 * as zero afterwards, in every mapping (a consumer's too); the range stays
 * allocated. Only once nobody needs what they hold.
 */
void arena_punch(uint64_t offset, uint64_t bytes);

/**
 * Give the pages of [offset, offset + bytes) back (arena_punch()) and keep the range for an
 * arena_alloc() of the same size. Only once no consumer reads it any more.
 */
void arena_release(uint64_t offset, uint64_t bytes);

#endif /* SLUICE_JITTER_ARENA_H */
