/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Refused: an extern (libbpf would resolve it from the kernel's configuration). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <sluice/filter.h>

extern int LINUX_KERNEL_VERSION __kconfig;

SEC("sluice/inst") int hook_inst(struct sluice_inst_ctx *ctx)
{
    return LINUX_KERNEL_VERSION > 0 ? SLUICE_ALWAYS : SLUICE_NEVER;
}

char LICENSE[] SEC("license") = "GPL";
