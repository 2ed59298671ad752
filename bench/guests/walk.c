/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * walk: an aperiodic pc stream, for bench/run's order check.
 *
 * The nop loops repeat every iteration, and chunk boundaries can fall on
 * iteration boundaries, so two chunks swapped (or one repeated in place of
 * the next) leave their pc sequence unchanged: no checksum can see it. Here
 * a xorshift generator picks one of eight paths per step, so no run of pcs
 * repeats at any period the pipeline could hide a reordering behind. The
 * sequence depends only on the argument (steps, default 1000000), not on
 * time, addresses or the environment: the bench compares sluice's sum with
 * the sums of QEMU plugins (bench/peers) in other runs.
 */
#include <stdint.h>
#include <stdlib.h>

static volatile uint64_t sink;

int main(int argc, char **argv)
{
    uint64_t x = 88172645463325252ull, acc = 0;
    long steps = argc > 1 ? atol(argv[1]) : 1000000;

    for (long i = 0; i < steps; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        switch (x & 7) {
        case 0:
            acc += x;
            break;
        case 1:
            acc ^= x >> 3;
            break;
        case 2:
            acc = acc * 3 + 1;
            break;
        case 3:
            acc -= x & 0xff;
            break;
        case 4:
            acc = (acc << 1) | (acc >> 63);
            break;
        case 5:
            if (acc & 1) {
                acc += 7;
            }
            break;
        case 6:
            acc ^= i;
            break;
        default:
            acc += i * x;
        }
    }
    sink = acc;
    return 0;
}
