/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * blocks.h — the process's block table (format in <sluice/record.h>):
 * descriptors of lifted TBs, in the process's arena, append-only.
 *
 * Threads: blocks_lift() at lift time (the vCPU translating, mmap_lock
 * held); blocks_index() and blocks_slots() on a vCPU for its own block
 * (reserve, tb_exit);
 * blocks_open()/blocks_after_fork_child() on the slow paths of init and
 * fork. Never frees, moves or rewrites a descriptor.
 */
#ifndef SLUICE_JITTER_BLOCKS_H
#define SLUICE_JITTER_BLOCKS_H

#include <stdint.h>

#include <sluice/jitter_abi.h>
#include <sluice/record.h>

/**
 * Bytes of a process's block table (sparse: pages are made as descriptors
 * fill them), its last BLOCKS_MAPS_BYTES the module log (record.h).
 */
#define BLOCKS_BYTES (80ull << 20)
/** Bytes of the module log, at the end of the table. */
#define BLOCKS_MAPS_BYTES (16ull << 20)

/**
 * Allocate the table in the arena (arena_open() first) and map it.
 * @p enabled 0: lift nothing (per-instruction EXEC records only); the
 * table still holds the module log.
 * @return 0, or a negative errno (EFBIG past ulimit -f): then no table,
 *         as with @p enabled 0, and the arena is as it was.
 */
int blocks_open(int enabled);

/**
 * In a forked child, after its new arena is open: a new table holding
 * the parent's descriptors at the same ids (the child's code cache is a
 * copy of the parent's, and its TBs name them).
 * @return 0, or a negative errno.
 */
int blocks_after_fork_child(void);

/** Our mapping of the table's header (the module log is at its maps_offset), or NULL if none. */
struct sluice_blocks_hdr *blocks_hdr(void);

/** File offset of the table in the arena and its bytes (ring headers name them); 0, 0 if none. */
void blocks_where(uint64_t *offset, uint64_t *bytes);

/**
 * The word the TB @p b writes at its start (jitter_abi.h, lift_block): its
 * BLOCK header word (its descriptor appended, or found if an equal one
 * exists), a BLOCK_SLOTS one if it has slots (then all of QEMU's); else,
 * when it writes other records (no instruction recorded and no slot, or
 * the table full: counted, see blocks_report), a PAD of one word, so they
 * are not read as the block before's; else 0 (also with blocks disabled).
 */
uint64_t blocks_lift(const struct sluice_lift_block *b);

/**
 * Index of the instruction at @p pc among instructions [@p from, @p to)
 * of descriptor @p id, or -1.
 */
int blocks_index(uint64_t id, unsigned from, unsigned to, uint64_t pc);

/**
 * The slots of descriptor @p id (one its own TB named): *@p n_slots of
 * them (0 if none or no such id), and its instructions' PCs at *@p pcs.
 */
const uint16_t *blocks_slots(uint64_t id, unsigned *n_slots, const uint64_t **pcs);

/**
 * The instructions of descriptor @p id: their *@p n PCs (returned; NULL
 * and 0 for no such id) and their flag bytes at *@p flags
 * (SLUICE_BLOCK_RECORDED, length). Any thread (the table is append-only).
 */
const uint64_t *blocks_insns(uint64_t id, unsigned *n, const uint8_t **flags);

/**
 * Exec events of instructions [@p from, @p to) of descriptor @p id: those
 * it marks recorded (SLUICE_BLOCK_RECORDED), as a consumer counts them;
 * 0 for no such id. Any thread (the table is append-only).
 */
unsigned blocks_recorded(uint64_t id, unsigned from, unsigned to);

/** At process exit: one line on stderr if the table filled up. */
void blocks_report(void);

#endif /* SLUICE_JITTER_BLOCKS_H */
