/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * lift.h — the jitter's lift-time decisions: hook_inst and hook_mem answer
 * QEMU by running the user's filter (or "trace everything" without one),
 * and once_hit claims first hits of SLUICE_ONCE instructions.
 *
 * Threads: lift_hook_* run on the vCPU that translates (mmap_lock held);
 * lift_once_hit on any vCPU from translated code; lift_init and
 * lift_report on the main thread / under the exclusive section.
 */
#ifndef SLUICE_JITTER_LIFT_H
#define SLUICE_JITTER_LIFT_H

#include <stdint.h>

#include <sluice/jitter_abi.h>

struct jitter_opts;

/**
 * Load the filter named in the jitter's options @p o with its set= values;
 * no filter means trace everything.
 * @return 0, or a negative errno after one line on stderr.
 */
int lift_init(const struct jitter_opts *o);

/**
 * Instrument (@p on 1) or not (0: every instruction NEVER, no access
 * recorded, the filter not run): with no consumer attached the jitter
 * has nothing instrumented. Main thread before the guest starts, or
 * exclusive after a flush (ops->flushed), so every TB made from then on
 * follows it and none made before remains.
 */
void lift_enable(int on);

/** QEMU's instrumenting (see jitter_abi.h): what lift_enable() set last. */
int lift_instrumenting(void);
/** QEMU's hook_inst (see jitter_abi.h). */
int lift_hook_inst(struct sluice_thread_slot *slot, const struct sluice_lift_insn *insn);
/** QEMU's hook_mem (see jitter_abi.h). */
int lift_hook_mem(struct sluice_thread_slot *slot, uint64_t pc, uint32_t size, int is_write);
/** QEMU's once_hit (see jitter_abi.h). */
int lift_once_hit(uint64_t pc);

/** Say on stderr how many filter runs faulted and how many messages were dropped, if any. */
void lift_report(void);

#endif /* SLUICE_JITTER_LIFT_H */
