/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * calls.bpf.c — bpf-to-bpf calls: static __noinline subprograms, one
 * calling another, and a global (non-static) function in .text.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <sluice/filter.h>

static __noinline __u64 add(__u64 a, __u64 b)
{
    return a + b;
}

static __noinline __u64 twice_plus_one(__u64 x)
{
    return add(x, x) + 1;
}

__noinline int triple(int x)
{
    return 3 * x;
}

/* ALWAYS when 2 * length + 1 == 9 (length 4), ONCE when it is 11, else NEVER. */
SEC("sluice/inst") int hook_inst(struct sluice_inst_ctx *ctx)
{
    __u64 r = twice_plus_one(ctx->length);

    return r == 9 ? SLUICE_ALWAYS : r == 11 ? SLUICE_ONCE : SLUICE_NEVER;
}

/* 1 when 3 * size == 12 (size 4). */
SEC("sluice/mem") int hook_mem(struct sluice_mem_ctx *ctx)
{
    return triple((int)ctx->size) == 12;
}

char LICENSE[] SEC("license") = "GPL";
