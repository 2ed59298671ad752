/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * once.h — the set of guest pcs whose SLUICE_ONCE exec record was made.
 *
 * Per process: a forked child inherits it (its code cache already lost the
 * once calls), an execve starts with a new jitter and an empty set.
 * Thread-safe (a mutex): once_claim() runs on vCPU threads from translated
 * code, but only on a first hit, so rarely, or as a TB's first run begins;
 * once_seen() at lift time; once_unclaim() as a first run is cut short.
 */
#ifndef SLUICE_JITTER_ONCE_H
#define SLUICE_JITTER_ONCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** Whether @p pc was claimed already (lift time: answer Never instead of Once). */
bool once_seen(uint64_t pc);

/**
 * Claim the first hit of @p pc.
 * @return true for exactly one caller per pc (it makes the record), false
 *         for the others; when memory runs out, true (a pc recorded twice
 *         beats a pc never recorded).
 */
bool once_claim(uint64_t pc);

/**
 * Give back the claim of @p pc (a first run that did not reach it,
 * first_run.c): the next claim of it wins again. No-op if unclaimed.
 */
void once_unclaim(uint64_t pc);

/**
 * Forget every claim: each pc's next hit is a first one again. For a time
 * with no consumer attached (its records went to nobody); only while no
 * vCPU runs translated code (exclusive, after a flush), so no TB lifted
 * with a Once answer is left to claim after it.
 */
void once_reset(void);

/** How many pcs are claimed now (any thread). */
size_t once_claimed(void);

#endif /* SLUICE_JITTER_ONCE_H */
