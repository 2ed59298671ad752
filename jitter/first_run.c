/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * first_run.c — Once records made by a TB's first run (see first_run.h).
 *
 * A TB whose records are all Once ones is lifted with none at all, so it
 * costs one translation, not a helper call per instruction and then a
 * second translation. In user mode a TB runs right after it is lifted, on
 * the vCPU that lifted it: as it is entered, its pcs are claimed and its
 * BLOCK record (the descriptor marks its Once instructions recorded) is
 * appended as the block in flight; as that run ends, the block is cut
 * where the run got, as for any TB left early, and the pcs it did not
 * reach are given back, for QEMU to translate the TB again.
 *
 * vCPU threads only, between two TBs (cpu_tb_exec, cpu_exec's longjmp
 * cleanup). Never blocks but in ring_reserve().
 */
#include "first_run.h"

#include <stddef.h>

#include <sluice/record.h>

#include "blocks.h"
#include "once.h"
#include "ring.h"

/* The BLOCK record of this vCPU's first run going on, or NULL. */
static __thread uint64_t *running_at;

/*
 * Start pcs (+ 1, so 0 is empty) of TBs whose first run was cut short with
 * instructions not reached: a signal's exit request before it began, a
 * fault midway. Their next translations take the once helper, whose TB
 * stays cached: else a guest that takes signals at a steady rate, or
 * faults in the same place again and again, would have such a TB
 * translated anew each time, and a TB translated more slowly than the
 * signals come would never run (a livelock the hostile round found).
 * Direct-mapped by pc: a pc lost to a collision costs one more cut run.
 */
#define REFUSED_SLOTS 1024
static uint64_t refused[REFUSED_SLOTS];

static uint64_t *refused_slot(uint64_t pc)
{
    return &refused[(pc ^ pc >> 10 ^ pc >> 20) % REFUSED_SLOTS];
}

int first_run_refused(uint64_t pc)
{
    return __atomic_load_n(refused_slot(pc), __ATOMIC_RELAXED) == pc + 1;
}

void first_run_start(struct sluice_thread_slot *slot, uint64_t word)
{
    const uint8_t *flags;
    const uint64_t *pc;
    unsigned n, i;

    running_at = NULL;
    if (!slot->ring) {
        return; /* not traced: nothing claimed, nothing to give back */
    }
    pc = blocks_insns(sluice_block_id(word), &n, &flags);
    for (i = 0; i < n; i++) {
        /*
         * The process has one vCPU (the TB was lifted without
         * CF_PARALLEL), which found the pc unclaimed as it lifted the TB:
         * the claim is won.
         */
        if (flags[i] & SLUICE_BLOCK_RECORDED) {
            once_claim(pc[i]);
        }
    }
    /* Between TBs: no block is in flight, so reserve() may publish all. */
    slot->block_at = NULL;
    if (slot->cursor + 1 > slot->limit) {
        ring_reserve(slot->ring, 8);
    }
    *slot->cursor = word;
    slot->block_at = running_at = slot->cursor++;
}

/* Give back the claims of instructions [@p to, n) of block @p id. */
static int give_back(uint64_t id, unsigned to)
{
    const uint8_t *flags;
    const uint64_t *pc;
    unsigned n, i;
    int any = 0;

    pc = blocks_insns(id, &n, &flags);
    for (i = to; i < n; i++) {
        if (flags[i] & SLUICE_BLOCK_RECORDED) {
            once_unclaim(pc[i]);
            any = 1;
        }
    }
    if (any) {
        __atomic_store_n(refused_slot(pc[0]), pc[0] + 1, __ATOMIC_RELAXED);
    }
    return any;
}

int first_run_end(struct sluice_thread_slot *slot, uint64_t pc, int how)
{
    uint64_t *at = running_at, hdr;
    unsigned to;

    running_at = NULL;
    if (!slot->ring || !at || slot->block_at != at) {
        slot->block_at = NULL;
        return 0;
    }
    hdr = *at;
    if (how == SLUICE_RUN_LEFT || how == SLUICE_RUN_AGAIN) {
        /* As any TB left by a longjmp: the block ends at pc (record.h); the TB is left. */
        ring_tb_exit(slot->ring, pc, how == SLUICE_RUN_AGAIN);
        return give_back(sluice_block_id(hdr), sluice_block_to(*at));
    }
    if (how == SLUICE_RUN_NONE) {
        /* Nothing ran: the record goes (it is the last word written). */
        if (slot->cursor == at + 1) {
            slot->cursor = at;
        } else {
            *at = sluice_pad_hdr(1);
        }
        to = 0;
    } else {
        to = sluice_block_to(hdr);
    }
    ring_tb_left(slot->ring);
    return give_back(sluice_block_id(hdr), to);
}
