/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * bytes.bpf.c — trace the instructions whose encoding is exactly the given
 * bytes (every execution), and no memory access. For tests/e2e/trust.py.
 *
 *   sluice run --filter bytes.bpf.o --set pat=0f05 --set patlen=2 -- PROG
 *
 * `--set` writes a char array from a C string, which cannot hold a 0 byte,
 * so the pattern is given in hex: pat holds 2 * patlen hex digits (the bytes
 * in memory order). An instruction is selected when its length is patlen and
 * its first patlen bytes equal the pattern. A pattern that is not
 * 2 * patlen hex digits (or patlen 0 or over 16) selects nothing and says so
 * once with bpf_trace_printk.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <sluice/filter.h>

const volatile char pat[2 * SLUICE_INST_BYTES + 1] = "";
const volatile __u32 patlen = 0;

__u32 complained;

static __always_inline int nibble(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

SEC("sluice/inst") int hook_inst(struct sluice_inst_ctx *ctx)
{
    __u32 n = patlen;
    int i, differ = 0;

    if (n == 0 || n > SLUICE_INST_BYTES || pat[2 * n] != 0) {
        goto bad;
    }
    if (ctx->length != n) {
        return SLUICE_NEVER;
    }
    /* no loops in the filter VM: clang unrolls this one (no early exit) */
#pragma clang loop unroll(full)
    for (i = 0; i < SLUICE_INST_BYTES; i++) {
        int hi = nibble(pat[2 * i]), lo = nibble(pat[2 * i + 1]);

        if ((__u32)i < n && (hi < 0 || lo < 0)) {
            goto bad;
        }
        if ((__u32)i < n && ctx->bytes[i] != (__u8)(hi << 4 | lo)) {
            differ = 1;
        }
    }
    if (differ) {
        return SLUICE_NEVER;
    }
    return SLUICE_ALWAYS;
bad:
    if (!complained) {
        complained = 1;
        bpf_printk("bytes: pat is not 2 * patlen (%u, 1..16) hex digits", n);
    }
    return SLUICE_NEVER;
}

SEC("sluice/mem") int hook_mem(struct sluice_mem_ctx *ctx)
{
    return 0;
}

char LICENSE[] SEC("license") = "GPL";
