/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * printk.bpf.c — bpf_trace_printk: ctx->flags picks a format, out.v[0]
 * gets the helper's return value.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <sluice/filter.h>

#include "results.h"

struct results out;

static __noinline long print(struct sluice_inst_ctx *ctx)
{
    char s[] = "hello";

    switch (ctx->flags) {
    case 0:
        return bpf_printk("pc %llx len %u", ctx->pc, ctx->length);
    case 1:
        return bpf_printk("%d %i %u", ctx->image_id, -5, 42);
    case 2:
        return bpf_printk("%x %X %lx", 0xbeef, 0xbeef, ctx->pc);
    case 3:
        return bpf_printk("[%s] [%c] 100%%", s, 'z');
    case 4:
        return bpf_printk("[%5d] [%-5d] [%05x]", 42, 42, 42);
    case 5:
        return bpf_printk("%p", ctx->pc);
    case 6:
        return bpf_printk("%lld %llu", -1LL, -1LL);
    case 7:
        return bpf_printk("bad %q");
    case 8:
        return bpf_printk("%s", ctx->pc);
    case 9:
        return bpf_printk("tick");
    }
    return -1;
}

SEC("sluice/inst") int hook_inst(struct sluice_inst_ctx *ctx)
{
    out.v[0] = print(ctx);
    return SLUICE_NEVER;
}

char LICENSE[] SEC("license") = "GPL";
