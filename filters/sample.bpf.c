/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * sample.bpf.c — record one memory access site in n (`--set n=N`, default
 * 100): the 1st, the (n+1)th, the (2n+1)th... site lifted, counted in an
 * array map so the choice is deterministic. No exec records. n = 0 records
 * nothing.
 *
 * A "site" is one lift of a guest load or store: code QEMU translates again
 * (tb_flush, self-modifying code) is counted again.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <sluice/filter.h>

/* Record one site in n. */
const volatile __u32 n = 100;

/* Sites lifted so far. */
struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, __u64);
} sites SEC(".maps");

SEC("sluice/inst") int hook_inst(struct sluice_inst_ctx *ctx)
{
    return SLUICE_NEVER;
}

SEC("sluice/mem") int hook_mem(struct sluice_mem_ctx *ctx)
{
    __u32 key = 0;
    __u64 *count = bpf_map_lookup_elem(&sites, &key);
    __u64 seen;

    if (!count || n == 0) {
        return 0;
    }
    seen = (*count)++;
    return seen % n == 0;
}

char LICENSE[] SEC("license") = "GPL";
