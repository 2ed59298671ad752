/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * globals.bpf.c — global variables: `const volatile` knobs of every type
 * --set handles (.rodata), a counter in .data, and `out` in .bss, where
 * hook_inst copies the knobs and counts its runs.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <sluice/filter.h>

#include "results.h"

enum mode { MODE_OFF = 0, MODE_FAST = 5, MODE_SLOW = 9 };

const volatile __u8 width = 8;
const volatile __s16 delta = -1;
const volatile _Bool verbose = 0;
const volatile enum mode mode = MODE_OFF;
const volatile char tag[8] = "none";
const volatile __s64 offset = -100;
const volatile __u64 big = 0;

__u32 lifts = 1000;

struct results out;

SEC("sluice/inst") int hook_inst(struct sluice_inst_ctx *ctx)
{
    out.v[0] = width;
    out.v[1] = delta;
    out.v[2] = verbose;
    out.v[3] = mode;
    out.v[4] = offset;
    out.v[5] = (__s64)big;
    out.v[6] = lifts++;
    out.v[7] += 1;
    /* Byte by byte: __builtin_memcpy would drop volatile and copy the compile-time "none". */
#pragma unroll
    for (int i = 0; i < (int)sizeof(tag); i++) {
        out.tag[i] = tag[i];
    }
    return SLUICE_ALWAYS;
}

char LICENSE[] SEC("license") = "GPL";
