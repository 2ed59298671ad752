/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Refused: two arrays of 150 MiB each, over the 256 MiB all of a filter's maps may take. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <sluice/filter.h>

struct big {
    __u8 bytes[1 << 20];
};

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 150);
    __type(key, __u32);
    __type(value, struct big);
} first SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 150);
    __type(key, __u32);
    __type(value, struct big);
} second SEC(".maps");

SEC("sluice/inst") int hook_inst(struct sluice_inst_ctx *ctx)
{
    return SLUICE_ALWAYS;
}

char LICENSE[] SEC("license") = "GPL";
