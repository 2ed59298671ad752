/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * once.c — the set of pcs already hit by SLUICE_ONCE instructions (see
 * once.h): an open-addressing hash set of guest pcs, doubled when half
 * full. PC 0 marks an empty slot; a guest pc of 0 is stored as a flag.
 */
#include "once.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static struct {
    pthread_mutex_t lock;
    uint64_t *slots; /* 0 = empty */
    size_t cap;      /* power of two, or 0 */
    size_t n;
    bool zero; /* pc 0 claimed */
} S = {.lock = PTHREAD_MUTEX_INITIALIZER};

static size_t hash(uint64_t pc, size_t cap)
{
    pc ^= pc >> 33;
    pc *= 0xff51afd7ed558ccdull; /* MurmurHash3's fmix64 multiplier */
    pc ^= pc >> 33;
    return (size_t)pc & (cap - 1);
}

/* Slot holding @p pc, or the empty slot where it would go. */
static uint64_t *find(uint64_t *slots, size_t cap, uint64_t pc)
{
    size_t i = hash(pc, cap);

    while (slots[i] != 0 && slots[i] != pc) {
        i = (i + 1) & (cap - 1);
    }
    return &slots[i];
}

static int grow(void)
{
    size_t ncap = S.cap ? S.cap * 2 : 1024, i;
    uint64_t *ns = calloc(ncap, sizeof(*ns));

    if (!ns) {
        return -1;
    }
    for (i = 0; i < S.cap; i++) {
        if (S.slots[i]) {
            *find(ns, ncap, S.slots[i]) = S.slots[i];
        }
    }
    free(S.slots);
    S.slots = ns;
    S.cap = ncap;
    return 0;
}

bool once_seen(uint64_t pc)
{
    bool seen;

    pthread_mutex_lock(&S.lock);
    seen = pc == 0 ? S.zero : S.cap && *find(S.slots, S.cap, pc) == pc;
    pthread_mutex_unlock(&S.lock);
    return seen;
}

void once_unclaim(uint64_t pc)
{
    size_t i, j, home;
    uint64_t *slot;

    pthread_mutex_lock(&S.lock);
    if (pc == 0) {
        S.zero = false;
    } else if (S.cap && *(slot = find(S.slots, S.cap, pc)) == pc) {
        /* Backward-shift deletion: no tombstones, so find() stays exact. */
        i = (size_t)(slot - S.slots);
        for (j = (i + 1) & (S.cap - 1); S.slots[j] != 0; j = (j + 1) & (S.cap - 1)) {
            home = hash(S.slots[j], S.cap);
            /* S.slots[j] may fill the hole at i unless its home lies in (i, j]. */
            if (((j - home) & (S.cap - 1)) >= ((j - i) & (S.cap - 1))) {
                S.slots[i] = S.slots[j];
                i = j;
            }
        }
        S.slots[i] = 0;
        S.n--;
    }
    pthread_mutex_unlock(&S.lock);
}

bool once_claim(uint64_t pc)
{
    bool won = false;
    uint64_t *slot;

    pthread_mutex_lock(&S.lock);
    if (pc == 0) {
        won = !S.zero;
        S.zero = true;
    } else if ((S.n + 1) * 2 <= S.cap || grow() == 0) {
        slot = find(S.slots, S.cap, pc);
        if (*slot == 0) {
            *slot = pc;
            S.n++;
            won = true;
        }
    } else {
        won = true; /* out of memory: a second record beats a lost one */
    }
    pthread_mutex_unlock(&S.lock);
    return won;
}

void once_reset(void)
{
    pthread_mutex_lock(&S.lock);
    if (S.cap) {
        memset(S.slots, 0, S.cap * sizeof(*S.slots));
    }
    S.n = 0;
    S.zero = false;
    pthread_mutex_unlock(&S.lock);
}

size_t once_claimed(void)
{
    size_t n;

    pthread_mutex_lock(&S.lock);
    n = S.n + S.zero;
    pthread_mutex_unlock(&S.lock);
    return n;
}
