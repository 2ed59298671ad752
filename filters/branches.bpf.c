/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * branches.bpf.c — the instructions that end a translation block (branches,
 * calls, returns, system calls, ...), each time they run; no memory records.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <sluice/filter.h>

SEC("sluice/inst") int hook_inst(struct sluice_inst_ctx *ctx)
{
    return ctx->flags & SLUICE_INST_ENDS_TB ? SLUICE_ALWAYS : SLUICE_NEVER;
}

char LICENSE[] SEC("license") = "GPL";
