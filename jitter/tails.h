/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * tails.h — each attached consumer's tail file (record.h: struct
 * sluice_ring_tail): its tail and futex words for every ring it is given,
 * in a memfd that only it and this process tree map.
 *
 * The file grows as rings are given (a memfd counts against RLIMIT_FSIZE,
 * which a guest may have set low) and never shrinks (sealed). Slot i's file
 * is mapped at a place reserved for slot i for the process's life; the
 * next consumer of the slot gets a new file mapped over the last one
 * (MAP_FIXED, in one step), so a pointer the producer took from an older
 * consumer never points at unmapped memory. A forked child inherits the
 * mappings, the descriptors and the line counters (shared memory): the
 * rings of a process tree get distinct lines of each consumer's file.
 *
 * Threads: tails_init() once, before any consumer; the rest under the
 * registry's lock (ctl.c). Never blocks.
 */
#ifndef SLUICE_JITTER_TAILS_H
#define SLUICE_JITTER_TAILS_H

#include <sluice/record.h>

/** Reserve the address space of every slot's tail file. @return 0, or -errno. */
int tails_init(void);

/**
 * A new tail file for consumer slot @p i, zeroed and as long as the slot's
 * last one (a producer may still touch a line of that one), sealed against shrinking,
 * mapped at the slot's place, its descriptor registered with fds.c (the
 * last consumer's is closed), its line counter at 0.
 * @return 0, or -errno (the slot has no file then).
 */
int tails_new(unsigned i);

/**
 * Slot @p i's tail file descriptor (for WELCOME; under fds_lock() while
 * used), or -1 if it has none.
 */
int tails_fd(unsigned i);

/** Close slot @p i's tail file descriptor (the consumer left); the mapping stays. */
void tails_drop(unsigned i);

/**
 * The next unused line of slot @p i's tail file, the file grown to hold it.
 * @param[out] tail its words, in our mapping
 * @return the line number; -ENOSPC when all SLUICE_TAIL_LINES are used,
 *         -EFBIG (RLIMIT_FSIZE) or another -errno if the file cannot grow,
 *         -ENOENT if the slot has no file.
 */
long tails_line(unsigned i, struct sluice_ring_tail **tail);

#endif /* SLUICE_JITTER_TAILS_H */
