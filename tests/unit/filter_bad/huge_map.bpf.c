/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Refused: a hash map that would need far more than the 256 MiB a filter may have. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <sluice/filter.h>

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 100000000);
    __type(key, __u64);
    __type(value, __u64);
} seen SEC(".maps");

SEC("sluice/inst") int hook_inst(struct sluice_inst_ctx *ctx)
{
    return SLUICE_ALWAYS;
}

char LICENSE[] SEC("license") = "GPL";
