/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * jitter.h — what the jitter's parts share: the process's list of rings.
 */
#ifndef SLUICE_JITTER_JITTER_H
#define SLUICE_JITTER_JITTER_H

#include "ring.h"

/** Take the ring list lock (the registry's attach: every ring exactly once). */
void jitter_rings_lock(void);
/** Release it. */
void jitter_rings_unlock(void);
/** The first ring of the process's list (linked by ring->next); only under the lock. */
struct ring *jitter_rings(void);

/**
 * The first ring of an exited thread that some consumer has not read to
 * its end (linked by ring->next; retired: ring_retire()); only under the lock.
 */
struct ring *jitter_ended_rings(void);

/**
 * Give the pages of ended rings that every consumer is done with back to
 * the kernel (ring_done()). Control thread, now and then; takes the ring
 * list lock.
 */
void jitter_reap(void);

/**
 * The first consumer attached, or the last one left: have QEMU flush its
 * translation cache, after which TBs are instrumented or not (lift_enable).
 * Nothing before the guest starts (init decides then). Any thread.
 */
void jitter_consumers_changed(void);

/** Call @p fn on every ring of this process, under the ring list lock. */
void jitter_for_each_ring(void (*fn)(struct ring *r, void *arg), void *arg);

#endif /* SLUICE_JITTER_JITTER_H */
