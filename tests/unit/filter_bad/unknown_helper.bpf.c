/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Refused by the verifier: bpf_ktime_get_ns (helper 5) is not a sluice helper. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <sluice/filter.h>

SEC("sluice/mem") int hook_mem(struct sluice_mem_ctx *ctx)
{
    return bpf_ktime_get_ns() & 1;
}

char LICENSE[] SEC("license") = "GPL";
