/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * bpf_clang.c — the filter VM runs what clang emits: bpf_filter_sample.c,
 * compiled with `clang -O2 -target bpf -mcpu=v3` and cut out of the object
 * with `llvm-objcopy -O binary --only-section=sluice/inst` (path in
 * $BPF_SAMPLE, built by meson), must pass the verifier and agree with the
 * same source compiled natively on thousands of contexts.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include "bpf_vm.h"

#define SEC(name)
#include "bpf_filter_sample.c"

static struct vm_insn insns[4096];
static size_t n_insns;

static void load_sample(void)
{
    const char *path = getenv("BPF_SAMPLE");
    FILE *f;

    cr_assert(path, "BPF_SAMPLE not set (run through meson test)");
    f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    n_insns = fread(insns, sizeof(insns[0]), sizeof(insns) / sizeof(insns[0]), f);
    fclose(f);
    cr_assert_gt(n_insns, 10);
}

static uint64_t next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

Test(clang, sample_filter_matches_native)
{
    static const vm_helper_fn none[1];
    const struct vm_env env = {none, 0};
    struct vm_prog prog;
    struct vm_error err;
    unsigned seen[3] = {0};
    uint64_t seed = 0x9e3779b97f4a7c15;

    load_sample();
    cr_assert_eq(vm_prog_init(&prog, insns, n_insns, &env, &err), 0, "%s", err.msg);
    for (unsigned i = 0; i < 20000; i++) {
        struct sample_ctx c = {.pc = 0x3f0000 + next(&seed) % 0x120000,
                               .len = 1 + next(&seed) % 15,
                               .flags = (unsigned)next(&seed)};
        struct vm_args args = {.ctx = &c, .ctx_size = sizeof(c)};
        uint64_t got;
        int want;

        for (unsigned b = 0; b < sizeof(c.bytes); b++) {
            c.bytes[b] = (uint8_t)next(&seed);
        }
        if (i % 50 == 0) {
            c.len = 1;
            c.bytes[0] = 0xc3;
        }
        if (i % 7 == 0) {
            c.flags &= ~4u;
        }
        want = hook_inst(&c);
        cr_assert_eq(vm_run(&prog, &args, &got, &err), 0, "%s", err.msg);
        cr_assert_eq(got, (uint64_t)want, "ctx %u: pc %#llx len %u: VM %lu, native %d", i, c.pc,
                     c.len, (unsigned long)got, want);
        seen[want]++;
    }
    cr_assert(seen[0] && seen[1] && seen[2], "every outcome exercised: %u %u %u", seen[0], seen[1],
              seen[2]);
}
