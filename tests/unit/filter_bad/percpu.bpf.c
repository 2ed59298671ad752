/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Refused: a map type sluice does not have (BPF_MAP_TYPE_PERCPU_ARRAY, 6). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <sluice/filter.h>

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, __u64);
} counts SEC(".maps");

SEC("sluice/inst") int hook_inst(struct sluice_inst_ctx *ctx)
{
    __u32 key = 0;

    return bpf_map_lookup_elem(&counts, &key) ? SLUICE_ALWAYS : SLUICE_NEVER;
}

char LICENSE[] SEC("license") = "GPL";
