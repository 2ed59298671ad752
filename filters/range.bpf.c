/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * range.bpf.c — trace the pcs in [lo, hi): every instruction there each time
 * it runs, and the memory accesses it makes; nothing elsewhere.
 *
 *   sluice run --filter range.bpf.o --set lo=0x401000 --set hi=0x402000 -- PROG
 *
 * With the defaults (0, 0) the range is empty and nothing is traced.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <sluice/filter.h>

/* Guest virtual addresses; set with --set. */
const volatile __u64 lo = 0;
const volatile __u64 hi = 0;

static __always_inline int in_range(__u64 pc)
{
    return lo <= pc && pc < hi;
}

SEC("sluice/inst") int hook_inst(struct sluice_inst_ctx *ctx)
{
    return in_range(ctx->pc) ? SLUICE_ALWAYS : SLUICE_NEVER;
}

SEC("sluice/mem") int hook_mem(struct sluice_mem_ctx *ctx)
{
    return in_range(ctx->pc);
}

char LICENSE[] SEC("license") = "GPL";
