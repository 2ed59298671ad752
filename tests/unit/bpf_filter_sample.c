/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * bpf_filter_sample.c — a small filter compiled twice by the tests: with
 * `clang -O2 -target bpf -mcpu=v3` (the VM runs its sluice/inst section) and
 * natively into tests/unit/bpf_clang.c, so the two results can be compared.
 * No loops, no calls to other functions (the ELF loader resolves those).
 */
#ifndef SEC
#define SEC(name) __attribute__((section(name), used))
#endif

struct sample_ctx {
    unsigned long long pc;
    unsigned int len;
    unsigned int flags;
    unsigned char bytes[8];
};

SEC("sluice/inst") int hook_inst(struct sample_ctx *c)
{
    unsigned int w =
        c->bytes[0] | c->bytes[1] << 8 | c->bytes[2] << 16 | (unsigned)c->bytes[3] << 24;
    unsigned long long q = c->pc / (c->len | 1) + (c->pc % 13);
    int h = (int)(w * 2654435761u) >> 28;

    if (c->pc < 0x400000 || c->pc >= 0x500000) {
        return 0;
    }
    if (c->len == 1 && c->bytes[0] == 0xc3) {
        return 2;
    }
    if (h < -3 && (q & 0xff) > 0x40) {
        return 2;
    }
    return (__builtin_bswap32(w) % 7 == 3) || (c->flags & 4) || (long long)q < 0 ? 1 : 0;
}
