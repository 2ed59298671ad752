/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * range.bpf.c — trace the pcs in [lo, hi): every instruction there each time
 * it runs, and the memory accesses it makes; nothing elsewhere.
 *
 *   sluice run --filter range.bpf.o --set lo=0x401000 --set hi=0x402000 -- PROG
 *
 * With --set in_main=1, lo and hi are offsets from the main executable's
 * base (its lowest mapped address) and only its code is traced: for a PIE,
 * the addresses `nm` and `objdump -d` print, wherever it was loaded. A
 * program that is not a PIE (ET_EXEC) is linked at its addresses: `nm`'s
 * are then absolute, for in_main 0 (offsets would be nm's minus its base,
 * 0x400000 on x86_64). A run that selects nothing is said on stderr.
 *
 * With the defaults (0, 0) the range is empty and nothing is traced.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <sluice/filter.h>

/* Guest virtual addresses (or offsets, with in_main); set with --set. */
const volatile __u64 lo = 0;
const volatile __u64 hi = 0;
/* 1: lo and hi are offsets from the main executable's base. */
const volatile __u64 in_main = 0;

static __always_inline int in_range(__u64 pc)
{
    struct sluice_image im;

    if (in_main) {
        if (sluice_image_of(pc, &im, sizeof(im)) != 0 || im.id != 0) {
            return 0;
        }
        pc = im.offset;
    }
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
