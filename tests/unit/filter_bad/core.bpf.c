/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Refused: a CO-RE relocation (the field access is recorded in .BTF.ext). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <sluice/filter.h>

struct kernel_thing {
    int a;
    int b;
};

SEC("sluice/inst") int hook_inst(struct sluice_inst_ctx *ctx)
{
    struct kernel_thing *t = (void *)ctx;

    return __builtin_preserve_access_index(t->b) & 1;
}

char LICENSE[] SEC("license") = "GPL";
