/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * coverage.bpf.c — code coverage: one exec record the first time each pc
 * runs (SLUICE_ONCE), then none; no memory records. The cheapest input for
 * coverage tools (a drcov writer, `--tool cov`, is not built yet).
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <sluice/filter.h>

SEC("sluice/inst") int hook_inst(struct sluice_inst_ctx *ctx)
{
    return SLUICE_ONCE;
}

char LICENSE[] SEC("license") = "GPL";
