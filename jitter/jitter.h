/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * jitter.h — what the jitter's parts share: the process's list of rings.
 */
#ifndef SLUICE_JITTER_JITTER_H
#define SLUICE_JITTER_JITTER_H

#include "ring.h"

/** Call @p fn on every ring of this process, under the ring list lock. */
void jitter_for_each_ring(void (*fn)(struct ring *r, void *arg), void *arg);

#endif /* SLUICE_JITTER_JITTER_H */
