/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * maps.bpf.c — the map helpers from a program: hook_inst with ctx->flags 0
 * runs a fixed sequence of updates, lookups and deletes on an array and a
 * hash (2 entries) and records each return value in `out` (results.h);
 * with flags 1 it counts its runs in arr[0] through a looked-up pointer.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <sluice/filter.h>

#include "results.h"

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 4);
    __type(key, __u32);
    __type(value, __u64);
} arr SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 2);
    __type(key, __u64);
    __type(value, __u64);
} hash SEC(".maps");

struct results out;

static __always_inline __s64 lookup_arr(__u32 i)
{
    __u64 *v = bpf_map_lookup_elem(&arr, &i);

    return v ? (__s64)*v : -1;
}

static __always_inline __s64 lookup_hash(__u64 k)
{
    __u64 *v = bpf_map_lookup_elem(&hash, &k);

    return v ? (__s64)*v : -1;
}

static __always_inline __s64 update_arr(__u32 i, __u64 v, __u64 flags)
{
    return bpf_map_update_elem(&arr, &i, &v, flags);
}

static __always_inline __s64 update_hash(__u64 k, __u64 v, __u64 flags)
{
    return bpf_map_update_elem(&hash, &k, &v, flags);
}

static __always_inline __s64 delete_hash(__u64 k)
{
    return bpf_map_delete_elem(&hash, &k);
}

static __noinline int array_sequence(void)
{
    __u32 i = 1;

    out.v[0] = update_arr(1, 11, BPF_ANY);
    out.v[1] = update_arr(1, 12, BPF_NOEXIST);
    out.v[2] = update_arr(1, 13, BPF_EXIST);
    out.v[3] = update_arr(4, 14, BPF_ANY);
    out.v[4] = update_arr(2, 15, 3);
    out.v[5] = bpf_map_delete_elem(&arr, &i);
    out.v[6] = lookup_arr(1);
    out.v[7] = lookup_arr(0);
    out.v[8] = lookup_arr(4);
    return 0;
}

static __noinline int hash_sequence(void)
{
    out.v[9] = update_hash(100, 1, BPF_EXIST);
    out.v[10] = update_hash(100, 2, BPF_NOEXIST);
    out.v[11] = update_hash(100, 3, BPF_NOEXIST);
    out.v[12] = update_hash(200, 4, BPF_ANY);
    out.v[13] = update_hash(300, 5, BPF_ANY);
    out.v[14] = update_hash(100, 6, BPF_EXIST);
    out.v[15] = delete_hash(300);
    out.v[16] = delete_hash(200);
    out.v[17] = update_hash(300, 7, BPF_NOEXIST);
    out.v[18] = lookup_hash(100);
    out.v[19] = lookup_hash(200);
    out.v[20] = lookup_hash(300);
    out.v[21] = update_hash(400, 8, 4);
    return 0;
}

SEC("sluice/inst") int hook_inst(struct sluice_inst_ctx *ctx)
{
    __u32 zero = 0;
    __u64 *runs;

    if (ctx->flags == 0) {
        array_sequence();
        hash_sequence();
        return SLUICE_NEVER;
    }
    runs = bpf_map_lookup_elem(&arr, &zero);
    if (!runs) {
        return SLUICE_NEVER;
    }
    *runs += 1;
    return SLUICE_ALWAYS;
}

char LICENSE[] SEC("license") = "GPL";
