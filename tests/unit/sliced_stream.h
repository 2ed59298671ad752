/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * sliced_stream.h — a block-encoded record stream whose chunks expand far
 * past the consumer's item bound (consumer/chunk.h, chunk_items_max()), and
 * the event sequence a consumer must deliver for it, for unit-block (one
 * chunk, decode_chunk() called slice after slice) and unit-session (whole
 * sessions). Owns nothing: pure functions of the iteration number, callable
 * from any thread; it must never depend on how the consumer cuts chunks.
 *
 * Two descriptors of 512 instructions: A (all recorded) and B (instruction
 * i not recorded when i % 7 == 3). Iteration k, in words that one append
 * keeps inside one chunk:
 *   k % 4 == 0: A whole;
 *   k % 4 == 1: B whole, with a load record of instructions 50, 150, ... 450;
 *   k % 4 == 2: A cut in two parts inside instruction 299 (the second part
 *               continues it: cont), loads of 299 on both sides and of 400;
 *   k % 4 == 3: LOST 1 (ends the block before), an EXEC record outside any
 *               block, then B whole with an EXEC record for its unrecorded
 *               instruction 3 and a load of 3.
 * So one 8-byte word stands for about 70 exec events.
 */
#ifndef SLUICE_TEST_SLICED_STREAM_H
#define SLUICE_TEST_SLICED_STREAM_H

#include <stdint.h>

#include "sluice/record.h"

#define SLS_N 512          /* instructions per descriptor */
#define SLS_MAX_WORDS 32   /* words of one iteration, at most */
#define SLS_MAX_EVENTS 600 /* events of one iteration, at most */

enum { SLS_EXEC = 1, SLS_READ, SLS_LOST };

/** One expected event: kind, and the PC (the count for SLS_LOST). */
struct sls_ev {
    uint32_t kind;
    uint32_t pad;
    uint64_t pc;
};

static inline uint64_t sls_pc(int desc, unsigned i)
{
    return (desc ? 0x200000u : 0x100000u) + 4ull * i;
}

static inline int sls_recorded(int desc, unsigned i)
{
    return !desc || i % 7 != 3;
}

/* Words of a load record of PC @p pc. */
static inline unsigned sls_mem(uint64_t *w, uint64_t pc)
{
    w[0] = sluice_mem_hdr(pc, 3, 0);
    w[1] = 0x8000;
    w[2] = pc;
    return 3;
}

/* Part [from, to) of descriptor @p desc (table id @p id); loads of the
 * instructions in @p mem (ascending, @p nmem), an EXEC record for
 * instruction @p exec_rec (or -1). Appends words to @p w and events to @p ev. */
static inline unsigned sls_part(uint64_t id, int desc, unsigned from, unsigned to, int cont,
                                const unsigned *mem, unsigned nmem, int exec_rec, uint64_t *w,
                                struct sls_ev *ev, unsigned *nev)
{
    unsigned n = 0, m = 0;

    w[n++] = sluice_block_hdr(id, from, to, cont);
    for (unsigned i = from; i < to; i++) {
        if (!(cont && i == from) && sls_recorded(desc, i)) {
            ev[(*nev)++] = (struct sls_ev){SLS_EXEC, 0, sls_pc(desc, i)};
        }
        if ((int)i == exec_rec) {
            w[n++] = sluice_exec_hdr(sls_pc(desc, i));
            ev[(*nev)++] = (struct sls_ev){SLS_EXEC, 0, sls_pc(desc, i)};
        }
        for (; m < nmem && mem[m] == i; m++) {
            n += sls_mem(&w[n], sls_pc(desc, i));
            ev[(*nev)++] = (struct sls_ev){SLS_READ, 0, sls_pc(desc, i)};
        }
    }
    return n;
}

/* Iteration @p k (descriptors A and B at table ids @p ids): its words into
 * @p w (returned: how many), its events into @p ev (*nev of them). */
static inline unsigned sls_iter(uint64_t k, const uint64_t ids[2], uint64_t *w, struct sls_ev *ev,
                                unsigned *nev)
{
    static const unsigned b_mem[] = {50, 150, 250, 350, 450}, cut1[] = {299}, cut2[] = {299, 400},
                          three[] = {3};
    unsigned n = 0;

    *nev = 0;
    switch (k % 4) {
    case 0:
        return sls_part(ids[0], 0, 0, SLS_N, 0, NULL, 0, -1, w, ev, nev);
    case 1:
        return sls_part(ids[1], 1, 0, SLS_N, 0, b_mem, 5, -1, w, ev, nev);
    case 2:
        n = sls_part(ids[0], 0, 0, 300, 0, cut1, 1, -1, w, ev, nev);
        return n + sls_part(ids[0], 0, 299, SLS_N, 1, cut2, 2, -1, &w[n], ev, nev);
    default:
        w[n++] = ((uint64_t)SLUICE_TAG_LOST << SLUICE_TAG_SHIFT) | 1;
        ev[(*nev)++] = (struct sls_ev){SLS_LOST, 0, 1};
        w[n++] = sluice_exec_hdr(0x10);
        ev[(*nev)++] = (struct sls_ev){SLS_EXEC, 0, 0x10};
        return n + sls_part(ids[1], 1, 0, SLS_N, 0, three, 1, 3, &w[n], ev, nev);
    }
}

#endif /* SLUICE_TEST_SLICED_STREAM_H */
