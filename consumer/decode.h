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
 * exec events (EXEC records and the recorded instructions of BLOCK
 * records, expanded through c->blocks), MEM and LOST records into
 * c->counts, call the worker callbacks of @p cb, and append each item they
 * fill to c->items (c->n_items, growing the area if blocks need it). A
 * record with an invalid header, one that does not end inside the span, a
 * BLOCK record its table does not hold, or a MEM or EXEC record whose PC is
 * not in its block ends the decode: c->bad is set with its position and
 * header word, and c->bad_why for the last two (what came before it is
 * decoded; a block ended by an invalid or crossing record is delivered
 * whole first). Runs on a worker thread; touches only @p c and calls into
 * @p cb; never reads outside the span and the table's capacity.
 *
 * The item area never grows past c->items_max: when a block's events would
 * go past it, the decode stops between two events (a pending exec_batch
 * run handed over first) and sets c->partial, saving where in c->resume.
 * The caller then delivers c->items and c->counts (this slice's), empties
 * them (n_items and counts zero) and calls again, which goes on exactly
 * there; c->bad is only ever set by the last call. A chunk that makes at
 * most one item per word (no BLOCK records) is never sliced.
 * @return the number of events decoded by this call: exec events plus the
 *         other records (PAD and BLOCK records not counted).
 */
uint64_t decode_chunk(struct chunk *c, const struct sluice_callbacks *cb,
                      const struct sluice_thread_info *t);

/**
 * The chunk this worker thread is decoding for thread @p t now (from a
 * callback decode_chunk() made), or NULL: what a public call made from a
 * worker callback finds its session by.
 */
const struct chunk *decode_current(const struct sluice_thread_info *t);

/**
 * sluice_map__at(), and also the module log entry that mapped the file
 * there (@p file: its identity, format 10; valid while the process's block
 * table lives) and that table's serial (@p table, unique per table).
 * Worker thread, inside a callback for @p t. Returns as sluice_map__at().
 */
int decode_map_at(const struct sluice_thread_info *t, uint64_t addr, struct sluice_module *out,
                  const struct sluice_map_entry **file, uint64_t *table);

#endif /* SLUICE_DECODE_H */
