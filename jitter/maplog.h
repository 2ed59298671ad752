/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * maplog.h — the module log (format in <sluice/record.h>): every change of
 * the guest's mappings, appended to the block table's mapping, so consumers
 * can tell which file held a pc when it ran.
 *
 * Threads: the maplog_* hooks from QEMU's mmap, munmap, mprotect and mremap
 * notifications (any vCPU, or the main thread while QEMU loads the
 * program; mmap_lock held), after image.c has heard of the same change;
 * maplog_position() at lift time (mmap_lock held too). Never from translated code; never blocks but
 * on its own lock.
 */
#ifndef SLUICE_JITTER_MAPLOG_H
#define SLUICE_JITTER_MAPLOG_H

#include <stdint.h>

#include <sluice/record.h>

/** An entry's position when none was made (the log is full or absent). */
#define MAPLOG_NONE UINT64_MAX

/**
 * The guest mapped [start, start + len) with protection @p prot, from a
 * file when @p file is non-zero (image.c knows which, and where).
 * @return the entry's position (byte offset in the log), or MAPLOG_NONE.
 */
uint64_t maplog_mmap(uint64_t start, uint64_t len, int prot, int file);

/** The guest unmapped [start, start + len). @return as maplog_mmap(). */
uint64_t maplog_munmap(uint64_t start, uint64_t len);

/** [start, start + len) now has protection @p prot. @return as maplog_mmap(). */
uint64_t maplog_mprotect(uint64_t start, uint64_t len, int prot);

/**
 * The mapping at [old_start, old_start + old_len) moved to
 * [start, start + len) (image.c already moved it). @return as maplog_mmap().
 */
uint64_t maplog_mremap(uint64_t old_start, uint64_t old_len, uint64_t start, uint64_t len);

/**
 * Bytes of whole entries now: the position a TB lifted now records; once
 * a change could not be logged (the log is full), SLUICE_MAPS_UNLOGGED, so
 * no consumer names a file from a map it knows is incomplete.
 */
uint64_t maplog_position(void);

/**
 * In a forked child, before blocks.c makes the child's table: the bytes of
 * the log this process had at the fork (the parent may have appended since:
 * those are not the child's), or 0 if they are more than @p capacity (the
 * child's log then starts empty).
 */
uint64_t maplog_fork_bytes(uint64_t capacity);

/**
 * In a forked child, once blocks.c made the child's table with the
 * maplog_fork_bytes() bytes of the parent's log copied in: they are the
 * child's log.
 */
void maplog_after_fork_child(void);

/** At process exit: one line on stderr if changes were not logged (the log filled up). */
void maplog_report(void);

#endif /* SLUICE_JITTER_MAPLOG_H */
