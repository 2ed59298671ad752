/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Refused: no sluice/inst or sluice/mem program, only a function in .text and a map. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <sluice/filter.h>

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, __u64);
} counts SEC(".maps");

__noinline int twice(int x)
{
    return 2 * x;
}

char LICENSE[] SEC("license") = "GPL";
