/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * all.bpf.c — trace everything: an exec record for every instruction each
 * time it runs, and every memory access.
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
    return 1;
}

char LICENSE[] SEC("license") = "GPL";
