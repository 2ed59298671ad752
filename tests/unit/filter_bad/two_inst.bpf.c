/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Refused: two programs in the sluice/inst section. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <sluice/filter.h>

SEC("sluice/inst") int first(struct sluice_inst_ctx *ctx)
{
    return SLUICE_ALWAYS;
}

SEC("sluice/inst") int second(struct sluice_inst_ctx *ctx)
{
    return SLUICE_NEVER;
}

char LICENSE[] SEC("license") = "GPL";
