/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Refused: a map defined the pre-BTF way, in SEC("maps"). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <sluice/filter.h>

struct legacy_map_def {
    unsigned int type, key_size, value_size, max_entries, map_flags;
};

struct legacy_map_def SEC("maps") counts = {BPF_MAP_TYPE_ARRAY, 4, 8, 1, 0};

SEC("sluice/inst") int hook_inst(struct sluice_inst_ctx *ctx)
{
    __u32 key = 0;

    return bpf_map_lookup_elem(&counts, &key) ? SLUICE_ALWAYS : SLUICE_NEVER;
}

char LICENSE[] SEC("license") = "GPL";
