/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * prandom.bpf.c — bpf_get_prandom_u32: hook_inst records the next four
 * values in `out`.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <sluice/filter.h>

#include "results.h"

struct results out;

SEC("sluice/inst") int hook_inst(struct sluice_inst_ctx *ctx)
{
    out.v[0] = bpf_get_prandom_u32();
    out.v[1] = bpf_get_prandom_u32();
    out.v[2] = bpf_get_prandom_u32();
    out.v[3] = bpf_get_prandom_u32();
    return SLUICE_NEVER;
}

char LICENSE[] SEC("license") = "GPL";
