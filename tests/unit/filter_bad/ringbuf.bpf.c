/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Refused: a ring buffer map (BPF_MAP_TYPE_RINGBUF, 27). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <sluice/filter.h>

struct {
    __uint(type, BPF_MAP_TYPE_RINGBUF);
    __uint(max_entries, 4096);
} events SEC(".maps");

SEC("sluice/inst") int hook_inst(struct sluice_inst_ctx *ctx)
{
    return SLUICE_ALWAYS;
}

char LICENSE[] SEC("license") = "GPL";
