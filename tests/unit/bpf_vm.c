/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * bpf_vm.c — the filter VM's interpreter (bpf/bpf_vm.c) against RFC 9669:
 * every ALU/ALU64 op with K and X sources, byte swaps, every JMP/JMP32
 * condition on both sides of its boundary, loads and stores of every size,
 * atomics, lddw, bpf-to-bpf calls, helpers; then run-time faults, each of
 * which must fail with the right error and instruction index, never crash.
 * Expected values are written out by hand, not computed with the expression
 * under test. Assumes a little-endian host (x86_64, aarch64).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "bpf_asm.h"

/* ---- harness --------------------------------------------------------------- */

static uint64_t helper_sum5(struct vm_run *run, uint64_t r1, uint64_t r2, uint64_t r3, uint64_t r4,
                            uint64_t r5);
static uint64_t helper_value(struct vm_run *run, uint64_t r1, uint64_t r2, uint64_t r3, uint64_t r4,
                             uint64_t r5);
static uint64_t helper_peek(struct vm_run *run, uint64_t r1, uint64_t r2, uint64_t r3, uint64_t r4,
                            uint64_t r5);
static uint64_t helper_fault(struct vm_run *run, uint64_t r1, uint64_t r2, uint64_t r3, uint64_t r4,
                             uint64_t r5);

static const vm_helper_fn helpers[] = {NULL, helper_sum5, helper_value, helper_peek, helper_fault};
static const struct vm_env env = {helpers, sizeof(helpers) / sizeof(helpers[0])};

static uint8_t ctx[16];   /* r1 at entry */
static bool ctx_writable; /* set per test */
static struct vm_error err;

/* Verify (must pass), run with ctx, return the run's status; r0 in *ret. */
static int run_rc(const struct vm_insn *insns, size_t n, uint64_t budget, uint64_t *ret)
{
    struct vm_prog prog;
    struct vm_args args = {.ctx = ctx, .ctx_size = sizeof(ctx), .ctx_writable = ctx_writable};
    int rc = vm_prog_init(&prog, insns, n, &env, &err);

    cr_assert_eq(rc, 0, "verifier refused: %s", err.msg);
    if (budget) {
        prog.budget = budget;
    }
    memset(&err, 0, sizeof(err));
    return vm_run(&prog, &args, ret, &err);
}

/* Verify, run, expect a normal exit, return r0. */
static uint64_t run(const struct vm_insn *insns, size_t n)
{
    uint64_t r0 = 0xdead;
    int rc = run_rc(insns, n, 0, &r0);

    cr_assert_eq(rc, 0, "run failed (%d): %s", rc, err.msg);
    return r0;
}

/* r0 = a; r0 = r0 op b (register source); exit. */
static uint64_t alu_x(uint8_t cls, uint8_t op, uint64_t a, uint64_t b)
{
    return run(PROG(LDDW(0, a), LDDW(2, b), INSN(cls | BPF_X | op, 0, 2, 0, 0), EXIT));
}

/* r0 = a; r0 = r0 op k (immediate source); exit. */
static uint64_t alu_k(uint8_t cls, uint8_t op, uint64_t a, int32_t k)
{
    return run(PROG(LDDW(0, a), INSN(cls | BPF_K | op, 0, 0, 0, k), EXIT));
}

#define A64 BPF_ALU64
#define A32 BPF_ALU

/* ---- ALU ------------------------------------------------------------------- */

Test(alu, add)
{
    cr_assert_eq(alu_x(A64, BPF_ADD, 0xffffffffffffffff, 2), 1);
    cr_assert_eq(alu_k(A64, BPF_ADD, 5, -1), 4); /* imm sign-extended */
    cr_assert_eq(alu_x(A32, BPF_ADD, 0xffffffffffffffff, 1), 0);
    cr_assert_eq(alu_k(A32, BPF_ADD, 0x100000005, 1), 6); /* upper half zeroed */
    cr_assert_eq(alu_k(A32, BPF_ADD, 5, -1), 4);
}

Test(alu, sub)
{
    cr_assert_eq(alu_x(A64, BPF_SUB, 1, 2), 0xffffffffffffffff);
    cr_assert_eq(alu_k(A64, BPF_SUB, 1, -1), 2);
    cr_assert_eq(alu_x(A32, BPF_SUB, 1, 2), 0xffffffff);
    cr_assert_eq(alu_k(A32, BPF_SUB, 0xaa00000010, 6), 10);
}

Test(alu, mul)
{
    cr_assert_eq(alu_x(A64, BPF_MUL, 0x100000000, 0x100000000), 0);
    cr_assert_eq(alu_x(A64, BPF_MUL, 0x100000000, 3), 0x300000000);
    cr_assert_eq(alu_k(A64, BPF_MUL, 3, -2), 0xfffffffffffffffa);
    cr_assert_eq(alu_x(A32, BPF_MUL, 0x10000, 0x10000), 0);
    cr_assert_eq(alu_k(A32, BPF_MUL, 0xffffffff, 2), 0xfffffffe);
}

Test(alu, div)
{
    cr_assert_eq(alu_x(A64, BPF_DIV, 100, 7), 14);
    cr_assert_eq(alu_x(A64, BPF_DIV, 100, 0), 0);
    cr_assert_eq(alu_k(A64, BPF_DIV, 100, 0), 0);
    cr_assert_eq(alu_k(A64, BPF_DIV, 100, -1), 0); /* unsigned by 0xffff...ffff */
    cr_assert_eq(alu_k(A64, BPF_DIV, 0xffffffffffffffff, -1), 1);
    cr_assert_eq(alu_x(A32, BPF_DIV, 0x100000064, 7), 14);
    cr_assert_eq(alu_x(A32, BPF_DIV, 0x1234567800000064, 0), 0);
    cr_assert_eq(alu_x(A32, BPF_DIV, 100, 0x100000000), 0); /* divisor's low half is 0 */
    cr_assert_eq(alu_k(A32, BPF_DIV, 0xffffffff, -1), 1);   /* unsigned 32-bit */
}

Test(alu, mod)
{
    cr_assert_eq(alu_x(A64, BPF_MOD, 100, 7), 2);
    cr_assert_eq(alu_x(A64, BPF_MOD, 0x123456789abcdef0, 0), 0x123456789abcdef0);
    cr_assert_eq(alu_k(A64, BPF_MOD, 0x123456789abcdef0, 0), 0x123456789abcdef0);
    cr_assert_eq(alu_k(A64, BPF_MOD, 100, -1), 100);
    cr_assert_eq(alu_x(A32, BPF_MOD, 0x100000064, 7), 2);
    cr_assert_eq(alu_x(A32, BPF_MOD, 0x123456789abcdef0, 0), 0x9abcdef0); /* upper zeroed */
    cr_assert_eq(alu_k(A32, BPF_MOD, 0x123456789abcdef0, 0), 0x9abcdef0);
}

Test(alu, or_and_xor)
{
    cr_assert_eq(alu_x(A64, BPF_OR, 0xf0f0000000000000, 0x0f), 0xf0f000000000000f);
    cr_assert_eq(alu_k(A64, BPF_OR, 0x1, (int32_t)0x80000000), 0xffffffff80000001);
    cr_assert_eq(alu_x(A32, BPF_OR, 0xf0f0000000000000, 0x0f), 0x0f);
    cr_assert_eq(alu_x(A64, BPF_AND, 0xff00ff00ff00ff00, 0x0ff00ff00ff00ff0), 0x0f000f000f000f00);
    cr_assert_eq(alu_k(A64, BPF_AND, 0x123456789abcdef0, -1), 0x123456789abcdef0);
    cr_assert_eq(alu_k(A32, BPF_AND, 0x123456789abcdef0, -1), 0x9abcdef0);
    cr_assert_eq(alu_x(A64, BPF_XOR, 0xffff0000ffff0000, 0xff00ff00ff00ff00), 0x00ffff0000ffff00);
    cr_assert_eq(alu_k(A64, BPF_XOR, 0, -1), 0xffffffffffffffff);
    cr_assert_eq(alu_k(A32, BPF_XOR, 0, -1), 0xffffffff);
}

Test(alu, lsh)
{
    cr_assert_eq(alu_x(A64, BPF_LSH, 1, 63), 0x8000000000000000);
    cr_assert_eq(alu_x(A64, BPF_LSH, 1, 64), 1); /* amount & 63 */
    cr_assert_eq(alu_k(A64, BPF_LSH, 1, 65), 2);
    cr_assert_eq(alu_x(A32, BPF_LSH, 1, 31), 0x80000000);
    cr_assert_eq(alu_x(A32, BPF_LSH, 1, 32), 1); /* amount & 31 */
    cr_assert_eq(alu_k(A32, BPF_LSH, 1, 33), 2);
    cr_assert_eq(alu_k(A32, BPF_LSH, 0xffffffff00000001, 1), 2);
    cr_assert_eq(alu_k(A32, BPF_LSH, 0xc0000000, 1), 0x80000000); /* no carry into bit 32 */
}

Test(alu, rsh)
{
    cr_assert_eq(alu_x(A64, BPF_RSH, 0x8000000000000000, 63), 1);
    cr_assert_eq(alu_x(A64, BPF_RSH, 0x8000000000000000, 64), 0x8000000000000000);
    cr_assert_eq(alu_k(A64, BPF_RSH, 0xf0, 68), 0xf);
    cr_assert_eq(alu_x(A32, BPF_RSH, 0xffffffff80000000, 31), 1);
    cr_assert_eq(alu_k(A32, BPF_RSH, 0x80000000, 32), 0x80000000);
    cr_assert_eq(alu_k(A32, BPF_RSH, 0x0000000180000000, 4), 0x08000000);
}

Test(alu, arsh)
{
    cr_assert_eq(alu_x(A64, BPF_ARSH, 0xfffffffffffffff0, 2), 0xfffffffffffffffc); /* -16 >> 2 */
    cr_assert_eq(alu_x(A64, BPF_ARSH, 0x8000000000000000, 63), 0xffffffffffffffff);
    cr_assert_eq(alu_k(A64, BPF_ARSH, 0xfffffffffffffff0, 64), 0xfffffffffffffff0);
    cr_assert_eq(alu_k(A64, BPF_ARSH, 0x7000000000000000, 60), 7);
    cr_assert_eq(alu_x(A32, BPF_ARSH, 0x80000000, 31), 0xffffffff);
    cr_assert_eq(alu_k(A32, BPF_ARSH, 0xfffffffffffffff0, 2), 0xfffffffc);
    cr_assert_eq(alu_k(A32, BPF_ARSH, 0x80000000, 33), 0xc0000000);
    cr_assert_eq(alu_k(A32, BPF_ARSH, 0xffffffff70000000, 28), 7); /* sign is bit 31 */
}

Test(alu, neg)
{
    cr_assert_eq(alu_k(A64, BPF_NEG, 1, 0), 0xffffffffffffffff);
    cr_assert_eq(alu_k(A64, BPF_NEG, 0, 0), 0);
    cr_assert_eq(alu_k(A64, BPF_NEG, 0x8000000000000000, 0), 0x8000000000000000);
    cr_assert_eq(alu_k(A32, BPF_NEG, 1, 0), 0xffffffff);
    cr_assert_eq(alu_k(A32, BPF_NEG, 0x100000000, 0), 0);
    cr_assert_eq(alu_k(A32, BPF_NEG, 0xffffffff00000002, 0), 0xfffffffe);
}

Test(alu, mov)
{
    cr_assert_eq(alu_k(A64, BPF_MOV, 5, -1), 0xffffffffffffffff);
    cr_assert_eq(alu_k(A64, BPF_MOV, 5, 0x7fffffff), 0x7fffffff);
    cr_assert_eq(alu_x(A64, BPF_MOV, 5, 0xdeadbeef12345678), 0xdeadbeef12345678);
    cr_assert_eq(alu_k(A32, BPF_MOV, 5, -1), 0xffffffff);
    cr_assert_eq(alu_x(A32, BPF_MOV, 5, 0xdeadbeef12345678), 0x12345678);
}

/* r0 = 0x1122334455667788; byte swap; exit. */
static uint64_t endian(int to, int bits)
{
    return run(PROG(LDDW(0, 0x1122334455667788), ENDIAN(to, 0, bits), EXIT));
}

Test(alu, endian)
{
    cr_assert_eq(endian(BPF_TO_LE, 16), 0x7788);
    cr_assert_eq(endian(BPF_TO_LE, 32), 0x55667788);
    cr_assert_eq(endian(BPF_TO_LE, 64), 0x1122334455667788);
    cr_assert_eq(endian(BPF_TO_BE, 16), 0x8877);
    cr_assert_eq(endian(BPF_TO_BE, 32), 0x88776655);
    cr_assert_eq(endian(BPF_TO_BE, 64), 0x8877665544332211);
}

Test(alu, lddw)
{
    cr_assert_eq(run(PROG(LDDW(0, 0x123456789abcdef0), EXIT)), 0x123456789abcdef0);
    cr_assert_eq(run(PROG(LDDW(0, 0xffffffff80000000), EXIT)), 0xffffffff80000000);
    cr_assert_eq(run(PROG(LDDW(0, 0x00000000ffffffff), EXIT)), 0x00000000ffffffff);
}

/* ---- jumps ------------------------------------------------------------------- */

/* 1 if "if a op b goto" is taken with a register source. */
static uint64_t taken_x(uint8_t cls, uint8_t op, uint64_t a, uint64_t b)
{
    return run(PROG(LDDW(1, a), LDDW(2, b), MOV64_K(0, 0), INSN(cls | BPF_X | op, 1, 2, 1, 0), EXIT,
                    MOV64_K(0, 1), EXIT));
}

/* 1 if "if a op k goto" is taken with an immediate. */
static uint64_t taken_k(uint8_t cls, uint8_t op, uint64_t a, int32_t k)
{
    return run(PROG(LDDW(1, a), MOV64_K(0, 0), INSN(cls | BPF_K | op, 1, 0, 1, k), EXIT,
                    MOV64_K(0, 1), EXIT));
}

#define J64 BPF_JMP
#define J32 BPF_JMP32

Test(jmp, jeq_jne)
{
    cr_assert_eq(taken_x(J64, BPF_JEQ, 5, 5), 1);
    cr_assert_eq(taken_x(J64, BPF_JEQ, 5, 6), 0);
    cr_assert_eq(taken_x(J64, BPF_JEQ, 0x100000005, 5), 0);
    cr_assert_eq(taken_x(J32, BPF_JEQ, 0x100000005, 5), 1); /* low halves only */
    cr_assert_eq(taken_k(J64, BPF_JEQ, 0xffffffffffffffff, -1), 1);
    cr_assert_eq(taken_k(J64, BPF_JEQ, 0xffffffff, -1), 0);
    cr_assert_eq(taken_k(J32, BPF_JEQ, 0xffffffff, -1), 1);
    cr_assert_eq(taken_x(J64, BPF_JNE, 5, 6), 1);
    cr_assert_eq(taken_x(J64, BPF_JNE, 5, 5), 0);
    cr_assert_eq(taken_x(J32, BPF_JNE, 0x100000005, 5), 0);
    cr_assert_eq(taken_k(J64, BPF_JNE, 0xffffffff, -1), 1);
}

Test(jmp, unsigned_gt_ge)
{
    cr_assert_eq(taken_x(J64, BPF_JGT, 6, 5), 1);
    cr_assert_eq(taken_x(J64, BPF_JGT, 5, 5), 0);
    cr_assert_eq(taken_x(J64, BPF_JGT, 0xffffffffffffffff, 1), 1); /* -1 is big unsigned */
    cr_assert_eq(taken_x(J32, BPF_JGT, 0x100000000, 1), 0);
    cr_assert_eq(taken_k(J64, BPF_JGT, 0xffffffff, -1), 0); /* k = 0xffff...ffff */
    cr_assert_eq(taken_k(J32, BPF_JGT, 0xfffffffe, -1), 0);
    cr_assert_eq(taken_x(J64, BPF_JGE, 5, 5), 1);
    cr_assert_eq(taken_x(J64, BPF_JGE, 4, 5), 0);
    cr_assert_eq(taken_k(J32, BPF_JGE, 0x1ffffffff, -1), 1);
    cr_assert_eq(taken_k(J64, BPF_JGE, 0x1ffffffff, -1), 0);
}

Test(jmp, unsigned_lt_le)
{
    cr_assert_eq(taken_x(J64, BPF_JLT, 4, 5), 1);
    cr_assert_eq(taken_x(J64, BPF_JLT, 5, 5), 0);
    cr_assert_eq(taken_x(J64, BPF_JLT, 0xffffffffffffffff, 1), 0);
    cr_assert_eq(taken_k(J64, BPF_JLT, 5, -1), 1);
    cr_assert_eq(taken_x(J32, BPF_JLT, 0x100000000, 1), 1); /* 0 < 1 */
    cr_assert_eq(taken_x(J64, BPF_JLE, 5, 5), 1);
    cr_assert_eq(taken_x(J64, BPF_JLE, 6, 5), 0);
    cr_assert_eq(taken_k(J32, BPF_JLE, 0x7fffffff00000006, 5), 0);
    cr_assert_eq(taken_k(J32, BPF_JLE, 0x7fffffff00000005, 5), 1);
}

Test(jmp, signed_gt_ge)
{
    cr_assert_eq(taken_x(J64, BPF_JSGT, -1, -2), 1);
    cr_assert_eq(taken_x(J64, BPF_JSGT, -1, 1), 0); /* unsigned would say yes */
    cr_assert_eq(taken_x(J64, BPF_JSGT, 1, -1), 1);
    cr_assert_eq(taken_x(J64, BPF_JSGT, 5, 5), 0);
    cr_assert_eq(taken_k(J64, BPF_JSGT, 0, -1), 1);
    cr_assert_eq(taken_x(J32, BPF_JSGT, 0xffffffff, 1), 0); /* -1 in 32 bits */
    cr_assert_eq(taken_x(J64, BPF_JSGT, 0xffffffff, 1), 1);
    cr_assert_eq(taken_x(J64, BPF_JSGE, -2, -2), 1);
    cr_assert_eq(taken_x(J64, BPF_JSGE, -3, -2), 0);
    cr_assert_eq(taken_k(J32, BPF_JSGE, 0x80000000, (int32_t)0x80000000), 1);
    cr_assert_eq(taken_k(J32, BPF_JSGE, 0x80000000, -0x7fffffff), 0);
}

Test(jmp, signed_lt_le)
{
    cr_assert_eq(taken_x(J64, BPF_JSLT, -1, 0), 1);
    cr_assert_eq(taken_x(J64, BPF_JSLT, 0, -1), 0);
    cr_assert_eq(taken_x(J64, BPF_JSLT, 0x8000000000000000, 0x7fffffffffffffff), 1);
    cr_assert_eq(taken_k(J32, BPF_JSLT, 0x80000000, 0), 1); /* INT32_MIN < 0 */
    cr_assert_eq(taken_k(J64, BPF_JSLT, 0x80000000, 0), 0);
    cr_assert_eq(taken_x(J64, BPF_JSLE, -1, -1), 1);
    cr_assert_eq(taken_x(J64, BPF_JSLE, 0, -1), 0);
    cr_assert_eq(taken_k(J64, BPF_JSLE, -2, -1), 1);
    cr_assert_eq(taken_k(J32, BPF_JSLE, 0x1ffffffff, -1), 1);
}

Test(jmp, jset)
{
    cr_assert_eq(taken_x(J64, BPF_JSET, 0xa, 0x4), 0);
    cr_assert_eq(taken_x(J64, BPF_JSET, 0xa, 0x2), 1);
    cr_assert_eq(taken_x(J64, BPF_JSET, 0x100000000, 0x100000000), 1);
    cr_assert_eq(taken_x(J32, BPF_JSET, 0x100000000, 0x100000000), 0);
    cr_assert_eq(taken_k(J64, BPF_JSET, 0x8000000000000000, (int32_t)0x80000000), 1);
    cr_assert_eq(taken_k(J32, BPF_JSET, 0x8000000000000000, (int32_t)0x80000000), 0);
}

Test(jmp, ja_skips)
{
    cr_assert_eq(run(PROG(MOV64_K(0, 1), JA(2), MOV64_K(0, 2), MOV64_K(0, 3), EXIT)), 1);
    cr_assert_eq(run(PROG(MOV64_K(0, 1), JA(0), MOV64_K(0, 2), EXIT)), 2);
}

/* ---- loads and stores ----------------------------------------------------------- */

static void fill_ctx(void)
{
    for (unsigned i = 0; i < sizeof(ctx); i++) {
        ctx[i] = 0x11 * (i % 8 + 1); /* 11 22 .. 88 11 22 .. 88 */
    }
}

Test(mem, ldx_every_size)
{
    fill_ctx();
    cr_assert_eq(run(PROG(LDX(BPF_B, 0, 1, 3), EXIT)), 0x44);
    cr_assert_eq(run(PROG(LDX(BPF_H, 0, 1, 6), EXIT)), 0x8877);
    cr_assert_eq(run(PROG(LDX(BPF_W, 0, 1, 1), EXIT)), 0x55443322);
    cr_assert_eq(run(PROG(LDX(BPF_DW, 0, 1, 8), EXIT)), 0x8877665544332211);
    cr_assert_eq(run(PROG(LDX(BPF_DW, 0, 1, 5), EXIT)), 0x5544332211887766); /* unaligned */
    cr_assert_eq(run(PROG(ADD64_K(1, 16), LDX(BPF_B, 0, 1, -1), EXIT)), 0x88);
}

Test(mem, stx_every_size)
{
    static const uint8_t want[16] = {0x44, 0x11, 0x44, 0x33, 0x44, 0x33, 0x22, 0x11,
                                     0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11};

    memset(ctx, 0x11, sizeof(ctx));
    ctx_writable = true;
    cr_assert_eq(run(PROG(LDDW(2, 0x1122334455667788), LDDW(3, 0xaabbccdd11223344),
                          STX(BPF_B, 1, 3, 0), STX(BPF_H, 1, 3, 2), STX(BPF_W, 1, 3, 4),
                          STX(BPF_DW, 1, 2, 8), MOV64_K(0, 0), EXIT)),
                 0);
    cr_assert_arr_eq(ctx, want, 16);
}

Test(mem, st_every_size)
{
    static const uint8_t want[16] = {0xff, 0x00, 0x34, 0x12, 0x78, 0x56, 0x34, 0x12,
                                     0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

    memset(ctx, 0, sizeof(ctx));
    ctx_writable = true;
    cr_assert_eq(run(PROG(ST(BPF_B, 1, 0, 0x1ff), ST(BPF_H, 1, 2, 0x11234),
                          ST(BPF_W, 1, 4, 0x12345678), ST(BPF_DW, 1, 8, -2), MOV64_K(0, 0), EXIT)),
                 0);
    cr_assert_arr_eq(ctx, want, 16);
}

Test(mem, stack_round_trip)
{
    /* Fresh stack reads as zero; stores of each size come back zero-extended. */
    cr_assert_eq(run(PROG(LDX(BPF_DW, 0, 10, -512), EXIT)), 0);
    cr_assert_eq(
        run(PROG(LDDW(2, 0xfedcba9876543210), STX(BPF_DW, 10, 2, -8), STX(BPF_W, 10, 2, -16),
                 LDX(BPF_DW, 0, 10, -8), LDX(BPF_W, 3, 10, -16), ALU64_X(BPF_XOR, 0, 3), EXIT)),
        0xfedcba9800000000); /* 0xfedcba9876543210 ^ 0x76543210 */
    cr_assert_eq(run(PROG(ST(BPF_H, 10, -2, -1), LDX(BPF_H, 0, 10, -2), EXIT)), 0xffff);
}

/* ---- atomics ------------------------------------------------------------------- */

/* Memory at [r10-8] starts as m; r2 = s; r0 = r0in; one atomic op; returns memory, r2 and r0. */
struct atomic_out {
    uint64_t mem, src, r0;
};

static struct atomic_out atomic(uint8_t size, int32_t op, uint64_t m, uint64_t s, uint64_t r0in)
{
    struct atomic_out o;
    const struct vm_insn p[] = {LDDW(1, m), STX(BPF_DW, 10, 1, -8), LDDW(2, s), LDDW(0, r0in),
                                ATOMIC(size, 10, 2, -8, op),
                                /* ctx[0..8] = memory, ctx[8..16] = r2; r0 returned */
                                LDX(BPF_DW, 1, 10, -8), LDDW(3, (uint64_t)(uintptr_t)ctx),
                                STX(BPF_DW, 3, 1, 0), STX(BPF_DW, 3, 2, 8), EXIT};

    ctx_writable = true;
    o.r0 = run(p, sizeof(p) / sizeof(p[0]));
    memcpy(&o.mem, ctx, 8);
    memcpy(&o.src, ctx + 8, 8);
    return o;
}

#define ATOMIC_EQ(o, m, s, r)                                                                      \
    do {                                                                                           \
        struct atomic_out o_ = (o);                                                                \
        cr_assert_eq(o_.mem, (m), "memory %#lx", (unsigned long)o_.mem);                           \
        cr_assert_eq(o_.src, (s), "src %#lx", (unsigned long)o_.src);                              \
        cr_assert_eq(o_.r0, (r), "r0 %#lx", (unsigned long)o_.r0);                                 \
    } while (0)

Test(atomic, add)
{
    ATOMIC_EQ(atomic(BPF_DW, BPF_ADD, 40, 2, 7), 42, 2, 7);
    ATOMIC_EQ(atomic(BPF_DW, BPF_ADD | BPF_FETCH, 40, 2, 7), 42, 40, 7);
    /* W: only the low 4 bytes change, no carry out; the fetched value is zero-extended. */
    ATOMIC_EQ(atomic(BPF_W, BPF_ADD, 0x11111111ffffffff, 1, 7), 0x1111111100000000, 1, 7);
    ATOMIC_EQ(atomic(BPF_W, BPF_ADD | BPF_FETCH, 0x11111111fffffffe, 0xff00000001, 7),
              0x11111111ffffffff, 0xfffffffe, 7);
}

Test(atomic, or_and_xor)
{
    ATOMIC_EQ(atomic(BPF_DW, BPF_OR, 0xf0, 0x0f00000000000000, 0), 0x0f000000000000f0,
              0x0f00000000000000, 0);
    ATOMIC_EQ(atomic(BPF_DW, BPF_OR | BPF_FETCH, 0xf0, 0x0f, 0), 0xff, 0xf0, 0);
    ATOMIC_EQ(atomic(BPF_DW, BPF_AND, 0xff0, 0x0ff, 0), 0x0f0, 0x0ff, 0);
    ATOMIC_EQ(atomic(BPF_DW, BPF_AND | BPF_FETCH, 0xff0, 0x0ff, 0), 0x0f0, 0xff0, 0);
    ATOMIC_EQ(atomic(BPF_DW, BPF_XOR, 0xff0, 0x0ff, 0), 0xf0f, 0x0ff, 0);
    ATOMIC_EQ(atomic(BPF_DW, BPF_XOR | BPF_FETCH, 0xff0, 0x0ff, 0), 0xf0f, 0xff0, 0);
    ATOMIC_EQ(atomic(BPF_W, BPF_OR | BPF_FETCH, 0xaaaaaaaa00000001, 0xffffffff00000002, 0),
              0xaaaaaaaa00000003, 1, 0);
    ATOMIC_EQ(atomic(BPF_W, BPF_AND, 0xaaaaaaaa0000ffff, 0x00ff, 0), 0xaaaaaaaa000000ff, 0xff, 0);
    ATOMIC_EQ(atomic(BPF_W, BPF_XOR | BPF_FETCH, 0xaaaaaaaa0000ffff, 0xffffffff, 0),
              0xaaaaaaaaffff0000, 0xffff, 0);
}

Test(atomic, xchg)
{
    ATOMIC_EQ(atomic(BPF_DW, BPF_XCHG, 0x1111, 0x2222, 5), 0x2222, 0x1111, 5);
    ATOMIC_EQ(atomic(BPF_W, BPF_XCHG, 0x9999999911111111, 0x8888888822222222, 5),
              0x9999999922222222, 0x11111111, 5);
}

Test(atomic, cmpxchg)
{
    /* Equal: memory takes src, r0 gets the old value. */
    ATOMIC_EQ(atomic(BPF_DW, BPF_CMPXCHG, 10, 20, 10), 20, 20, 10);
    /* Different: memory unchanged, r0 still gets the old value. */
    ATOMIC_EQ(atomic(BPF_DW, BPF_CMPXCHG, 10, 20, 11), 10, 20, 10);
    /* W compares the low halves only; r0 gets the zero-extended old value. */
    ATOMIC_EQ(atomic(BPF_W, BPF_CMPXCHG, 0x7777777700000010, 0x20, 0xabcd000000000010),
              0x7777777700000020, 0x20, 0x10);
    ATOMIC_EQ(atomic(BPF_W, BPF_CMPXCHG, 0x7777777700000010, 0x20, 0x11), 0x7777777700000010, 0x20,
              0x10);
}

/* ---- calls ---------------------------------------------------------------------- */

Test(call, local_keeps_callee_saved_and_stacks_apart)
{
    /* main: r6 = 7, [r10-8] = 7, r1 = 3; call f; r0 += r6 + [r10-8] + r7; exit.
       f:    r6 = r7 = 100 (callee-saved: restored), r0 = [r10-8] (its own fresh stack: 0),
             [r10-8] = 55, r0 += r1 * 2. */
    cr_assert_eq(
        run(PROG(MOV64_K(6, 7), MOV64_K(7, 1), STX(BPF_DW, 10, 6, -8), MOV64_K(1, 3), CALL_LOCAL(5),
                 ADD64_X(0, 6), LDX(BPF_DW, 2, 10, -8), ADD64_X(0, 2), ADD64_X(0, 7), EXIT,
                 /* f, slot 10 */
                 MOV64_K(6, 100), MOV64_K(7, 100), LDX(BPF_DW, 0, 10, -8), ST(BPF_DW, 10, -8, 55),
                 ALU64_K(BPF_MUL, 1, 2), ADD64_X(0, 1), EXIT)),
        0 + 6 + 7 + 7 + 1);
}

Test(call, eight_frames_deep)
{
    /* Each function adds 1 and calls the next; the 8th returns 1. */
    cr_assert_eq(run(PROG(CALL_LOCAL(1), EXIT,                /* main: 0..1 */
                          CALL_LOCAL(2), ADD64_K(0, 1), EXIT, /* f1: 2..4 */
                          CALL_LOCAL(2), ADD64_K(0, 1), EXIT, /* f2: 5..7 */
                          CALL_LOCAL(2), ADD64_K(0, 1), EXIT, /* f3 */
                          CALL_LOCAL(2), ADD64_K(0, 1), EXIT, /* f4 */
                          CALL_LOCAL(2), ADD64_K(0, 1), EXIT, /* f5 */
                          CALL_LOCAL(2), ADD64_K(0, 1), EXIT, /* f6 */
                          MOV64_K(0, 1), EXIT)),              /* f7: the 8th frame */
                 7);
}

Test(call, callee_may_use_callers_stack_through_a_pointer)
{
    cr_assert_eq(
        run(PROG(ST(BPF_DW, 10, -16, 1234), MOV64_X(1, 10), ADD64_K(1, -16), CALL_LOCAL(1), EXIT,
                 /* f */
                 LDX(BPF_DW, 0, 1, 0), EXIT)),
        1234);
}

static uint64_t helper_sum5(struct vm_run *run, uint64_t r1, uint64_t r2, uint64_t r3, uint64_t r4,
                            uint64_t r5)
{
    (void)run;
    return r1 | r2 << 8 | r3 << 16 | r4 << 24 | r5 << 32;
}

static uint8_t value[8]; /* the "map value" helper 2 hands out */

static uint64_t helper_value(struct vm_run *run, uint64_t r1, uint64_t r2, uint64_t r3, uint64_t r4,
                             uint64_t r5)
{
    (void)r1, (void)r2, (void)r3, (void)r4, (void)r5;
    return vm_run_add_region(run, value, sizeof(value), true) ? 0 : (uint64_t)(uintptr_t)value;
}

/* Reads 8 bytes at r1 if the program may, else returns 0xbad. */
static uint64_t helper_peek(struct vm_run *run, uint64_t r1, uint64_t r2, uint64_t r3, uint64_t r4,
                            uint64_t r5)
{
    const void *p = vm_run_check(run, r1, 8, false);
    uint64_t v;

    (void)r2, (void)r3, (void)r4, (void)r5;
    if (!p) {
        return 0xbad;
    }
    memcpy(&v, p, 8);
    return v;
}

static uint64_t helper_fault(struct vm_run *run, uint64_t r1, uint64_t r2, uint64_t r3, uint64_t r4,
                             uint64_t r5)
{
    (void)r2, (void)r3, (void)r4, (void)r5;
    vm_run_fault(run, "bad argument %lu", (unsigned long)r1);
    return 0;
}

Test(call, helper_gets_five_args)
{
    cr_assert_eq(run(PROG(MOV64_K(1, 1), MOV64_K(2, 2), MOV64_K(3, 3), MOV64_K(4, 4), MOV64_K(5, 5),
                          CALL(1), EXIT)),
                 0x0504030201);
}

Test(call, helper_region_usable_for_the_rest_of_the_run)
{
    memset(value, 0, sizeof(value));
    cr_assert_eq(run(PROG(CALL(2), JMP_K(BPF_JEQ, 0, 0, 3), ST(BPF_W, 0, 4, 0x5a5a),
                          LDX(BPF_W, 0, 0, 4), EXIT, MOV64_K(0, 0), EXIT)),
                 0x5a5a);
    cr_assert_eq(value[4], 0x5a);
    cr_assert_eq(value[5], 0x5a);
    cr_assert_eq(value[6], 0);
}

Test(call, helper_checks_pointer_args)
{
    fill_ctx();
    cr_assert_eq(run(PROG(ST(BPF_DW, 10, -8, 99), MOV64_X(1, 10), ADD64_K(1, -8), CALL(3), EXIT)),
                 99);
    cr_assert_eq(run(PROG(ADD64_K(1, 8), CALL(3), EXIT)), 0x8877665544332211);
    cr_assert_eq(run(PROG(ADD64_K(1, 9), CALL(3), EXIT)), 0xbad); /* last byte past ctx */
    cr_assert_eq(run(PROG(LDDW(1, (uint64_t)(uintptr_t)&err), CALL(3), EXIT)), 0xbad);
}

Test(call, helper_fault_stops_the_run)
{
    uint64_t r0;

    cr_assert_eq(run_rc(PROG(MOV64_K(1, 42), CALL(4), MOV64_K(0, 0), EXIT), 0, &r0), -ECANCELED);
    cr_assert_eq(err.insn, 1);
    cr_assert_str_eq(err.msg, "insn 1: helper 4: bad argument 42");
}

/* ---- faults ------------------------------------------------------------------------ */

/* Run, expect failure rc at insn with msg containing what. */
static void fault(const struct vm_insn *insns, size_t n, uint64_t budget, int rc, size_t insn,
                  const char *what)
{
    uint64_t r0 = 0x5555;

    cr_assert_eq(run_rc(insns, n, budget, &r0), rc, "%s", err.msg);
    cr_assert_eq(err.insn, insn, "%s", err.msg);
    cr_assert(strstr(err.msg, what), "\"%s\" lacks \"%s\"", err.msg, what);
    cr_assert_eq(r0, 0x5555, "ret written on failure");
}

Test(fault, ctx_read_out_of_bounds)
{
    fault(PROG(LDX(BPF_W, 0, 1, 16), EXIT), 0, -EFAULT, 0, "out-of-bounds read of 4 bytes");
    fault(PROG(MOV64_K(0, 0), LDX(BPF_W, 0, 1, 13), EXIT), 0, -EFAULT, 1, "out-of-bounds read");
    fault(PROG(MOV64_K(0, 0), LDX(BPF_B, 0, 1, -1), EXIT), 0, -EFAULT, 1, "out-of-bounds read");
}

Test(fault, stack_below_frame)
{
    fault(PROG(MOV64_X(2, 10), ADD64_K(2, -520), LDX(BPF_DW, 0, 2, 0), EXIT), 0, -EFAULT, 2,
          "out-of-bounds read of 8 bytes");
    fault(PROG(MOV64_X(2, 10), LDX(BPF_B, 0, 2, 0), EXIT), 0, -EFAULT, 1, "out-of-bounds read");
}

Test(fault, write_to_read_only_ctx)
{
    ctx_writable = false;
    fault(PROG(MOV64_K(0, 0), ST(BPF_W, 1, 0, 1), EXIT), 0, -EFAULT, 1,
          "write of 4 bytes to read-only memory");
    fault(PROG(MOV64_K(2, 1), ATOMIC(BPF_DW, 1, 2, 0, BPF_ADD), MOV64_K(0, 0), EXIT), 0, -EFAULT, 1,
          "read-only");
}

Test(fault, forged_pointer)
{
    static uint64_t secret = 42;

    fault(PROG(LDDW(2, (uint64_t)(uintptr_t)&secret), LDX(BPF_DW, 0, 2, 0), EXIT), 0, -EFAULT, 2,
          "out-of-bounds read");
    fault(PROG(LDDW(2, 0x400000), ST(BPF_DW, 2, 0, 0), MOV64_K(0, 0), EXIT), 0, -EFAULT, 2,
          "out-of-bounds write");
    cr_assert_eq(secret, 42);
}

Test(fault, dead_callee_stack)
{
    /* f returns a pointer into its own stack; once it returned, that memory is gone. */
    fault(PROG(CALL_LOCAL(2), LDX(BPF_DW, 0, 0, 0), EXIT,
               /* f */
               MOV64_X(0, 10), ADD64_K(0, -8), EXIT),
          0, -EFAULT, 1, "out-of-bounds read");
}

Test(fault, budget_exhausted)
{
    struct vm_insn p[100];

    for (unsigned i = 0; i < 99; i++) {
        p[i] = MOV64_K(0, i);
    }
    p[99] = EXIT;
    fault(p, 100, 50, -E2BIG, 50, "instruction budget (50) exhausted");
    cr_assert_eq(run_rc(p, 100, 100, NULL), 0, "exactly enough budget: %s", err.msg);
}

Test(fault, unverified_program_refused)
{
    struct vm_prog prog;
    struct vm_args args = {0};
    uint64_t r0;
    const struct vm_insn insns[] = {MOV64_K(0, 1)}; /* falls off the end */

    cr_assert_eq(vm_prog_init(&prog, insns, 1, &env, &err), -EINVAL);
    cr_assert_eq(vm_run(&prog, &args, &r0, &err), -EINVAL);
    cr_assert(strstr(err.msg, "not verified"), "%s", err.msg);
}

Test(fault, region_table_full)
{
    static uint8_t bufs[VM_MAX_REGIONS + 1];
    struct vm_region r = {(uint64_t)(uintptr_t)bufs, 1, false};
    struct vm_region regions[VM_MAX_REGIONS];
    /* The program is borrowed by prog: it must outlive it (not a literal inside a macro). */
    const struct vm_insn insns[] = {CALL(2), MOV64_X(6, 0), CALL(2), ADD64_X(0, 6), EXIT};
    struct vm_prog prog;
    struct vm_args args = {.regions = regions, .n_regions = VM_MAX_REGIONS - 1};
    uint64_t r0;

    for (unsigned i = 0; i < VM_MAX_REGIONS; i++, r.start++) {
        regions[i] = r;
    }
    /* One free slot: the first call to helper 2 gets it, the same region again needs none. */
    cr_assert_eq(vm_prog_init(&prog, insns, 5, &env, &err), 0, "%s", err.msg);
    cr_assert_eq(vm_run(&prog, &args, &r0, &err), 0, "%s", err.msg);
    cr_assert_eq(r0, 2 * (uint64_t)(uintptr_t)value);
    args.n_regions = VM_MAX_REGIONS;
    cr_assert_eq(vm_run(&prog, &args, &r0, &err), 0, "%s", err.msg);
    cr_assert_eq(r0, 0, "helper 2 must fail once the table is full");
}
