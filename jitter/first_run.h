/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * first_run.h — the first run of a TB lifted with `first_run`
 * (jitter_abi.h): its Once instructions recorded from C, without a helper
 * call in the TB or a second translation.
 *
 * vCPU threads, between TBs; one first run at a time per vCPU.
 */
#ifndef SLUICE_JITTER_FIRST_RUN_H
#define SLUICE_JITTER_FIRST_RUN_H

#include <stdint.h>

#include <sluice/jitter_abi.h>

/**
 * The TB whose BLOCK header is @p word is entered: claim the pcs its
 * descriptor marks recorded, append @p word and make it the block in
 * flight (slot->block_at). Nothing if the slot has no ring.
 */
void first_run_start(struct sluice_thread_slot *slot, uint64_t word);

/**
 * That run ended as @p how says (enum sluice_run_end; @p pc: where a
 * longjmp left it): cut the block where the run got (ring_tb_exit for a
 * longjmp; dropped if nothing ran), give back the claims of the
 * instructions after that, clear block_at and store the cursor at
 * `written`.
 * @return 1 if some claim was given back (the TB must be translated
 *         again), else 0.
 */
int first_run_end(struct sluice_thread_slot *slot, uint64_t pc, int how);

/**
 * Whether a TB starting at guest @p pc had a first run cut short with
 * instructions not reached (first_run_end() returned 1): its next
 * translations take the once helper instead (lift time).
 */
int first_run_refused(uint64_t pc);

#endif /* SLUICE_JITTER_FIRST_RUN_H */
