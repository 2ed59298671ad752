/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * faults.bpf.c — programs that misuse helpers or memory, picked by
 * ctx->flags: each must stop the run with an error, never crash the host.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <sluice/filter.h>

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 4);
    __type(key, __u64);
    __type(value, __u32);
} hash SEC(".maps");

const volatile __u64 knob = 1;

SEC("sluice/inst") int hook_inst(struct sluice_inst_ctx *ctx)
{
    __u64 key = 1;
    __u32 value = 2;
    __u32 *v;
    struct sluice_image img;

    switch (ctx->flags) {
    case 1: /* a map pointer that is not one of ours */
        return bpf_map_lookup_elem((void *)ctx->pc, &key) ? 1 : 0;
    case 2: /* an 8-byte key at the last 4 bytes of the 48-byte ctx */
        return bpf_map_lookup_elem(&hash, (char *)ctx + 44) ? 1 : 0;
    case 3: /* a value pointer from nowhere */
        return bpf_map_update_elem(&hash, &key, (void *)ctx->pc, BPF_ANY) ? 1 : 0;
    case 4: /* a 4-byte value stored through 8 bytes */
        bpf_map_update_elem(&hash, &key, &value, BPF_ANY);
        v = bpf_map_lookup_elem(&hash, &key);
        if (v) {
            *(volatile __u64 *)v = 1;
        }
        return 0;
    case 5: /* sluice_image_of writing into the read-only ctx */
        return sluice_image_of(ctx->pc, (struct sluice_image *)ctx, sizeof(img)) > 0;
    case 6: /* a format that is not where it says */
        return bpf_trace_printk((const char *)ctx->pc, 8) > 0;
    case 7: /* a return value hook_inst may not give */
        return (int)ctx->length;
    case 8: /* a store into the context */
        *(volatile __u32 *)&ctx->reserved = 1;
        return 0;
    case 9: /* a load past the context's 48 bytes */
        return *(volatile __u64 *)((char *)ctx + sizeof(*ctx)) ? 1 : 0;
    case 10: /* a store into .rodata */
        *(volatile __u64 *)&knob = 2;
        return 0;
    }
    return SLUICE_NEVER;
}

char LICENSE[] SEC("license") = "GPL";
