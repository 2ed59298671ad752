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
 * Decode @p c (records of guest thread @p t, in place in the ring): count
 * EXEC, MEM and LOST records into c->counts, call the worker callbacks of
 * @p cb, and append each item they fill to c->items (c->n_items). A record
 * with an invalid header, or one that does not end inside the span, ends
 * the decode: c->bad is set with its position and header word (what came
 * before it is decoded). Runs on a worker thread; touches only @p c and
 * calls into @p cb; never reads outside the span.
 * @return the number of records decoded (PAD not counted).
 */
uint64_t decode_chunk(struct chunk *c, const struct sluice_callbacks *cb,
                      const struct sluice_thread_info *t);

#endif /* SLUICE_DECODE_H */
