/* SPDX-License-Identifier: GPL-2.0-or-later */
/**
 * @file decode.h
 * @brief Turn a chunk's records into callback calls, items and counts.
 */
#ifndef SLUICE_DECODE_H
#define SLUICE_DECODE_H

#include "chunk.h"
#include "sluice/consumer.h"

/**
 * Decode @p c (records of guest thread @p t): count EXEC, MEM and LOST
 * records into c->counts, call the worker callbacks of @p cb, and append
 * each item they fill to c->items (c->n_items). A MEM record with PC 0 gets
 * the PC of the preceding EXEC record (c->start_pc before the first one).
 * Runs on a worker thread; touches only @p c and calls into @p cb.
 * Returns the number of records decoded. Records were validated by the
 * reader; an invalid header (impossible unless memory is corrupt) ends the
 * decode early.
 */
uint64_t decode_chunk(struct chunk *c, const struct sluice_callbacks *cb,
                      const struct sluice_thread_info *t);

#endif /* SLUICE_DECODE_H */
