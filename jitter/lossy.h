/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * lossy.h — taking from lossy consumers what the producer overwrites, and
 * counting it (lossy.c).
 */
#ifndef SLUICE_JITTER_LOSSY_H
#define SLUICE_JITTER_LOSSY_H

#include <stdint.h>

#include "ring.h"

/**
 * The producer of @p r is about to write into the chunk that starts at ring
 * position @p chunk (a multiple of SLUICE_CHUNK_BYTES): take the bytes of
 * the chunk a lap back from every active lossy consumer that has not taken
 * them (tail moved past, their events added to its lost_events). Nothing
 * to do in the first lap. vCPU of @p r, slow path; never blocks.
 */
void lossy_take(struct ring *r, uint64_t chunk);

/**
 * Ring @p r's thread has ended and lossy consumer slot @p i reads it too
 * slowly: take all it has not taken, up to the ring's final head, counting
 * its events lost, so the consumer reaches the ring's end at once and says
 * done. Its data pages may then go (ring_punch_data()). J.lock held
 * (jitter.c); never blocks.
 */
void lossy_take_rest(struct ring *r, unsigned i);

#endif /* SLUICE_JITTER_LOSSY_H */
