/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * pcs.bpf.c — trace every instruction each time it runs, and no memory
 * access: the executed-PC stream alone.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <sluice/filter.h>

SEC("sluice/inst") int hook_inst(struct sluice_inst_ctx *ctx)
{
    return SLUICE_ALWAYS;
}

SEC("sluice/mem") int hook_mem(struct sluice_mem_ctx *ctx)
{
    return 0;
}

char LICENSE[] SEC("license") = "GPL";
