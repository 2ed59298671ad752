/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Refused: besides a good sluice/inst program, an XDP program sluice cannot run. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <sluice/filter.h>

SEC("sluice/inst") int hook_inst(struct sluice_inst_ctx *ctx)
{
    return SLUICE_ALWAYS;
}

SEC("xdp") int pass(struct xdp_md *ctx)
{
    return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
