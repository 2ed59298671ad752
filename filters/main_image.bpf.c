/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * main_image.bpf.c — trace the main executable only (image 0): every
 * instruction in it each time it runs, and the memory accesses it makes;
 * nothing in the dynamic loader, shared libraries, the vDSO or JIT code.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <sluice/filter.h>

static __always_inline int in_main_image(__u64 pc)
{
    struct sluice_image img;

    return sluice_image_of(pc, &img, sizeof(img)) == 0;
}

SEC("sluice/inst") int hook_inst(struct sluice_inst_ctx *ctx)
{
    return in_main_image(ctx->pc) ? SLUICE_ALWAYS : SLUICE_NEVER;
}

SEC("sluice/mem") int hook_mem(struct sluice_mem_ctx *ctx)
{
    return in_main_image(ctx->pc);
}

char LICENSE[] SEC("license") = "GPL";
