/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * mem_writes.bpf.c — every store the guest makes (helpers' stores included),
 * no loads and no exec records.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <sluice/filter.h>

SEC("sluice/inst") int hook_inst(struct sluice_inst_ctx *ctx)
{
    return SLUICE_NEVER;
}

SEC("sluice/mem") int hook_mem(struct sluice_mem_ctx *ctx)
{
    return ctx->is_write;
}

char LICENSE[] SEC("license") = "GPL";
