/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * bpf_verify.c — the filter VM's verifier (bpf/bpf_verify.c): one test
 * per kind of bad program, each asserting the refusal, the instruction index
 * blamed and a substring of the reason; then good programs that must pass and
 * compute the right value.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bpf_asm.h"

static uint64_t helper_add(struct vm_run *run, uint64_t r1, uint64_t r2, uint64_t r3, uint64_t r4,
                           uint64_t r5)
{
    (void)run, (void)r3, (void)r4, (void)r5;
    return r1 + r2;
}

/* Helpers 1 and 7 exist; 2 is a hole in the table. */
static const vm_helper_fn helpers[8] = {[1] = helper_add, [7] = helper_add};
static const struct vm_env env = {helpers, 8};

/* The program must be refused, blaming slot @p insn, with @p what in the message. */
static void reject(const struct vm_insn *insns, size_t n, size_t insn, const char *what)
{
    struct vm_error err = {0};
    int rc = vm_verify(insns, n, &env, &err);

    cr_assert_eq(rc, -EINVAL, "accepted, expected \"%s\"", what);
    cr_assert_eq(err.insn, insn, "blames %zu, not %zu: %s", err.insn, insn, err.msg);
    cr_assert(strstr(err.msg, what), "\"%s\" lacks \"%s\"", err.msg, what);
}

static void accept(const struct vm_insn *insns, size_t n)
{
    struct vm_error err = {0};

    cr_assert_eq(vm_verify(insns, n, &env, &err), 0, "%s", err.msg);
}

/* ---- size ----------------------------------------------------------------------- */

Test(size, empty)
{
    struct vm_error err;
    const struct vm_insn one = EXIT;

    cr_assert_eq(vm_verify(&one, 0, &env, &err), -EINVAL);
    cr_assert_eq(err.insn, SIZE_MAX);
    cr_assert_str_eq(err.msg, "empty program");
}

Test(size, too_many)
{
    struct vm_insn *p = calloc(VM_MAX_INSNS + 1, sizeof(*p));
    struct vm_error err;

    cr_assert(p);
    for (size_t i = 0; i <= VM_MAX_INSNS; i++) {
        p[i] = MOV64_K(0, 0);
    }
    p[VM_MAX_INSNS] = EXIT;
    cr_assert_eq(vm_verify(p, VM_MAX_INSNS + 1, &env, &err), -EINVAL);
    cr_assert(strstr(err.msg, "65537 insns (at most 65536)"), "%s", err.msg);
    /* The largest allowed program passes. */
    p[VM_MAX_INSNS - 1] = EXIT;
    accept(p, VM_MAX_INSNS);
    free(p);
}

/* ---- jumps ----------------------------------------------------------------------- */

Test(jump, out_of_range_forward)
{
    struct vm_error err;

    cr_assert_eq(vm_verify(PROG(MOV64_K(0, 0), JA(5), EXIT), &env, &err), -EINVAL);
    cr_assert_str_eq(err.msg, "insn 1: jump out of range (target 7, program has 3 insns)");
    reject(PROG(MOV64_K(0, 0), JMP_K(BPF_JEQ, 0, 0, 1), EXIT), 1, "target 3, program has 3");
    reject(PROG(MOV64_K(0, 0), JMP32_X(BPF_JGT, 0, 1, 0x7fff), EXIT), 1, "jump out of range");
}

Test(jump, out_of_range_backward)
{
    reject(PROG(MOV64_K(0, 0), JA(-10), EXIT), 1, "jump out of range (target -8");
    reject(PROG(MOV64_K(0, 0), JMP_K(BPF_JSGT, 0, 1, -3), EXIT), 1, "target -1");
    reject(PROG(MOV64_K(0, 0), JMP_K(BPF_JSGT, 0, 1, -32768), EXIT), 1, "out of range");
}

Test(jump, back_edge)
{
    reject(PROG(MOV64_K(0, 0), JMP_K(BPF_JEQ, 0, 0, -2), EXIT), 1, "back-edge to insn 0");
    reject(PROG(MOV64_K(0, 0), JA(-1), EXIT), 1, "back-edge to insn 1"); /* to itself */
    reject(PROG(MOV64_K(0, 0), MOV64_K(1, 0), JMP32_X(BPF_JNE, 0, 1, -2), EXIT), 2,
           "loops are not supported");
}

Test(jump, into_lddw_second_slot)
{
    reject(PROG(JA(1), LDDW(0, 1), EXIT), 0, "second slot of the lddw at insn 1");
    reject(PROG(MOV64_K(0, 0), JMP_K(BPF_JEQ, 0, 0, 2), EXIT, LDDW(0, 1), EXIT), 1,
           "second slot of the lddw at insn 3");
}

Test(jump, leaves_its_function)
{
    /* main: 0 call f, 1 ja into f, 2 exit; f: 3, 4. */
    reject(PROG(CALL_LOCAL(2), JA(2), EXIT, MOV64_K(0, 1), EXIT), 1, "leaves its function");
}

Test(jump, falls_off_the_end)
{
    reject(PROG(MOV64_K(0, 0)), 0, "falls off the end of the program");
    reject(PROG(MOV64_K(0, 0), JMP_K(BPF_JEQ, 0, 0, 1), EXIT, MOV64_K(0, 1)), 3,
           "falls off the end");
    reject(PROG(MOV64_K(0, 0), LDDW(0, 1)), 1, "falls off the end"); /* ends mid-lddw */
    /* f's last slot is not an exit. */
    reject(PROG(CALL_LOCAL(1), EXIT, MOV64_K(0, 1), MOV64_K(0, 2)), 3,
           "falls off the end of the function");
}

/* ---- registers ------------------------------------------------------------------- */

Test(reg, out_of_range)
{
    reject(PROG(MOV64_K(11, 0), MOV64_K(0, 0), EXIT), 0, "bad register (dst r11, src r0");
    reject(PROG(MOV64_K(0, 0), MOV64_X(0, 12), EXIT), 1, "bad register (dst r0, src r12");
    reject(PROG(MOV64_K(0, 0), STX(BPF_W, 15, 0, 0), EXIT), 1, "bad register");
    reject(PROG(MOV64_K(0, 0), JMP_X(BPF_JEQ, 0, 11, 0), EXIT), 1, "bad register");
}

Test(reg, r10_read_only)
{
    reject(PROG(MOV64_K(10, 0), MOV64_K(0, 0), EXIT), 0, "r10 is read-only");
    reject(PROG(MOV64_K(0, 0), ADD64_K(10, -8), EXIT), 1, "r10 is read-only");
    reject(PROG(MOV64_K(0, 0), ALU32_X(BPF_MOV, 10, 0), EXIT), 1, "r10 is read-only");
    reject(PROG(MOV64_K(0, 0), LDX(BPF_DW, 10, 1, 0), EXIT), 1, "r10 is read-only");
    reject(PROG(MOV64_K(0, 0), LDDW(10, 1), EXIT), 1, "r10 is read-only");
    reject(PROG(MOV64_K(0, 0), ATOMIC(BPF_DW, 1, 10, 0, BPF_ADD | BPF_FETCH), EXIT), 1,
           "r10 is read-only");
    /* r10 as a base or a value to store is fine. */
    accept(PROG(STX(BPF_DW, 10, 10, -8), MOV64_X(0, 10), EXIT));
}

Test(reg, uninitialized_read)
{
    reject(PROG(MOV64_X(0, 2), EXIT), 0, "reads r2 before it is written");
    reject(PROG(ADD64_K(0, 1), EXIT), 0, "reads r0 before");
    reject(PROG(MOV64_K(0, 0), STX(BPF_DW, 10, 3, -8), EXIT), 1, "reads r3");
    reject(PROG(MOV64_K(0, 0), JMP_X(BPF_JEQ, 0, 4, 0), EXIT), 1, "reads r4");
    /* A helper call clobbers r1..r5. */
    reject(PROG(MOV64_K(1, 1), MOV64_K(2, 2), CALL(1), MOV64_X(0, 1), EXIT), 3, "reads r1");
    /* Written on one path only. */
    reject(PROG(JMP_K(BPF_JEQ, 1, 0, 1), MOV64_K(6, 1), MOV64_X(0, 6), EXIT), 2, "reads r6");
}

Test(reg, r0_at_exit)
{
    reject(PROG(EXIT), 0, "r0 is not set on every path to this exit");
    reject(PROG(JMP_K(BPF_JEQ, 1, 0, 1), MOV64_K(0, 1), EXIT), 2, "r0 is not set");
    reject(PROG(MOV64_K(0, 1), CALL_LOCAL(1), EXIT, EXIT), 3, "r0 is not set"); /* in f */
    accept(PROG(JMP_K(BPF_JEQ, 1, 0, 2), MOV64_K(0, 1), EXIT, MOV64_K(0, 2), EXIT));
}

/* ---- memory ---------------------------------------------------------------------- */

Test(stack, constant_offsets)
{
    reject(PROG(ST(BPF_DW, 10, -520, 0), MOV64_K(0, 0), EXIT), 0, "stack access r10-520 (8 bytes)");
    reject(PROG(LDX(BPF_DW, 0, 10, -4), EXIT), 0, "r10-4 (8 bytes) outside [-512, 0)");
    reject(PROG(MOV64_K(0, 0), STX(BPF_W, 10, 0, 0), EXIT), 1, "r10+0");
    reject(PROG(MOV64_K(0, 0), LDX(BPF_B, 0, 10, -513), EXIT), 1, "r10-513");
    reject(PROG(MOV64_K(0, 1), ATOMIC(BPF_W, 10, 0, 4, BPF_ADD), EXIT), 1, "r10+4");
    accept(PROG(ST(BPF_DW, 10, -512, 0), LDX(BPF_B, 0, 10, -1), EXIT));
}

/* ---- opcodes --------------------------------------------------------------------- */

Test(opcode, unknown)
{
    reject(PROG(INSN(0xff, 0, 0, 0, 0), EXIT), 0, "unknown opcode 0xff");
    reject(PROG(INSN(0x00, 0, 0, 0, 0), EXIT), 0, "unknown opcode 0x00"); /* lone lddw hi */
    reject(PROG(INSN(BPF_ALU64 | BPF_X | BPF_NEG, 0, 0, 0, 0), EXIT), 0, "unknown opcode 0x8f");
    reject(PROG(INSN(BPF_ALU64 | BPF_END, 0, 0, 0, 16), EXIT), 0, "unknown opcode 0xd7"); /* v4 */
    reject(PROG(INSN(BPF_JMP32 | BPF_JA, 0, 0, 0, 1), EXIT), 0, "unknown opcode 0x06");   /* v4 */
    reject(PROG(INSN(BPF_JMP32 | BPF_EXIT, 0, 0, 0, 0), EXIT), 0, "unknown opcode 0x96");
    reject(PROG(INSN(BPF_LD | BPF_ABS | BPF_W, 0, 0, 0, 0), EXIT), 0, "unknown opcode 0x20");
    reject(PROG(INSN(BPF_LDX | 0x80 | BPF_W, 0, 1, 0, 0), EXIT), 0,
           "unknown opcode 0x81"); /* MEMSX */
    reject(PROG(INSN(BPF_STX | BPF_ATOMIC | BPF_B, 1, 0, 0, 0), EXIT), 0, "unknown opcode 0xd3");
    reject(PROG(INSN(BPF_ALU | BPF_K | 0xe0, 0, 0, 0, 0), EXIT), 0, "unknown opcode 0xe4");
    reject(PROG(INSN(BPF_JMP | BPF_K | 0xe0, 0, 0, 0, 0), EXIT), 0, "unknown opcode 0xe5");
}

Test(opcode, v4_and_reserved_fields)
{
    reject(PROG(MOV64_K(0, 7), INSN(BPF_ALU64 | BPF_K | BPF_DIV, 0, 0, 1, 2), EXIT), 1,
           "signed division");
    reject(PROG(MOV64_K(0, 7), INSN(BPF_ALU | BPF_X | BPF_MOD, 0, 0, 1, 0), EXIT), 1,
           "signed division");
    reject(PROG(MOV64_K(1, 7), INSN(BPF_ALU64 | BPF_X | BPF_MOV, 0, 1, 8, 0), EXIT), 1,
           "sign-extending mov");
    reject(PROG(INSN(BPF_ALU64 | BPF_K | BPF_MOV, 0, 3, 0, 1), EXIT), 0, "reserved field");
    reject(PROG(MOV64_K(0, 1), ENDIAN(BPF_TO_BE, 0, 24), EXIT), 1, "byte swap width 24");
    reject(PROG(MOV64_K(0, 0), INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 1)), 1, "reserved field");
    reject(PROG(MOV64_K(0, 1), ATOMIC(BPF_DW, 10, 0, -8, BPF_SUB), EXIT), 1,
           "unknown atomic operation 0x10");
}

Test(opcode, lddw)
{
    reject(PROG(MOV64_K(0, 0), EXIT, INSN(BPF_LD | BPF_DW | BPF_IMM, 0, 0, 0, 1)), 2,
           "truncated lddw");
    reject(PROG(INSN(BPF_LD | BPF_DW | BPF_IMM, 0, 1, 0, 3), INSN(0, 0, 0, 0, 0), EXIT), 0,
           "map references must be resolved");
    reject(PROG(INSN(BPF_LD | BPF_DW | BPF_IMM, 0, 0, 0, 3), INSN(0x07, 0, 0, 0, 0), EXIT), 0,
           "malformed lddw second slot");
}

/* ---- calls --------------------------------------------------------------------- */

Test(call, unknown_helper)
{
    reject(PROG(CALL(99), EXIT), 0, "unknown helper 99");
    reject(PROG(CALL(-1), EXIT), 0, "unknown helper -1");
    reject(PROG(CALL(8), EXIT), 0, "unknown helper 8");
    reject(PROG(MOV64_K(0, 0), CALL(2), EXIT), 1, "unknown helper 2"); /* NULL entry */
    reject(PROG(INSN(BPF_JMP | BPF_CALL, 0, 2, 0, 1), EXIT), 0, "unsupported call"); /* kfunc */
    accept(PROG(CALL(1), CALL(7), EXIT));
}

Test(call, bad_target)
{
    reject(PROG(CALL_LOCAL(5), EXIT), 0, "call target 6 out of range");
    reject(PROG(CALL_LOCAL(-3), EXIT), 0, "call target -2 out of range");
    reject(PROG(CALL_LOCAL(2), EXIT, LDDW(0, 1), EXIT), 0, "call target 3 is the second slot");
}

Test(call, recursion)
{
    reject(PROG(CALL_LOCAL(-1), EXIT), 0, "recursive call to the function at insn 0");
    /* main -> f -> g -> f */
    reject(PROG(CALL_LOCAL(1), EXIT, CALL_LOCAL(1), EXIT, CALL_LOCAL(-3), EXIT), 4,
           "recursive call to the function at insn 2");
}

/* main, then a chain of @p funcs functions each calling the next. */
static struct vm_insn *chain(unsigned funcs, size_t *n)
{
    struct vm_insn *p = calloc(2 * funcs + 2, sizeof(*p));

    p[0] = CALL_LOCAL(1);
    p[1] = EXIT;
    for (unsigned f = 1; f < funcs; f++) {
        p[2 * f] = CALL_LOCAL(1);
        p[2 * f + 1] = EXIT;
    }
    p[2 * funcs] = MOV64_K(0, 1);
    p[2 * funcs + 1] = EXIT;
    *n = 2 * funcs + 2;
    return p;
}

Test(call, depth)
{
    size_t n;
    struct vm_insn *p = chain(7, &n); /* 8 frames */

    accept(p, n);
    free(p);
    p = chain(8, &n); /* 9 frames: the 8th function's call is one too many */
    reject(p, n, 14, "call depth exceeds 8 frames");
    free(p);
}

Test(call, depth_through_a_shared_callee)
{
    /* f2..f7 need 6 frames. main -> f2 fits (7); main -> g -> f2 fits (8); main -> g -> g2 -> f2
       does not (9), and f2's depth is already known (memoised) when g2 calls it. */
    struct vm_insn p[] = {CALL_LOCAL(6), CALL_LOCAL(1), EXIT, /* main 0..2 */
                          CALL_LOCAL(1), EXIT,                /* g 3..4 */
                          CALL_LOCAL(1), EXIT,                /* g2 5..6 */
                          CALL_LOCAL(1), EXIT,                /* f2 7..8 */
                          CALL_LOCAL(1), EXIT,                /* f3 */
                          CALL_LOCAL(1), EXIT,                /* f4 */
                          CALL_LOCAL(1), EXIT,                /* f5 */
                          CALL_LOCAL(1), EXIT,                /* f6 */
                          MOV64_K(0, 1), EXIT};               /* f7 17..18 */

    reject(p, 19, 5, "call depth exceeds 8 frames");
    p[3] = CALL_LOCAL(3); /* g calls f2 directly */
    accept(p, 19);
}

/* ---- good programs ---------------------------------------------------------------- */

struct inst_ctx {
    uint64_t pc;
    uint32_t len;
    uint32_t flags;
};

static uint64_t run_good(const struct vm_insn *insns, size_t n, struct inst_ctx *c)
{
    struct vm_prog prog;
    struct vm_error err = {0};
    struct vm_args args = {.ctx = c, .ctx_size = sizeof(*c)};
    uint64_t r0 = 0xdead;

    cr_assert_eq(vm_prog_init(&prog, insns, n, &env, &err), 0, "%s", err.msg);
    cr_assert_eq(vm_run(&prog, &args, &r0, &err), 0, "%s", err.msg);
    return r0;
}

Test(good, filter_by_pc_range_and_flags)
{
    /* 0 never, 1 always, 2 once: pc in [0x400000, 0x500000), once if flags & 1. */
    const struct vm_insn p[] = {LDX(BPF_DW, 2, 1, 0),
                                LDDW(3, 0x400000),
                                JMP_X(BPF_JLT, 2, 3, 7), /* -> never */
                                JMP_K(BPF_JGE, 2, 0x500000, 6),
                                LDX(BPF_W, 3, 1, 12),
                                JMP_K(BPF_JSET, 3, 1, 2), /* -> once */
                                MOV64_K(0, 1),
                                EXIT,
                                MOV64_K(0, 2), /* once */
                                EXIT,
                                MOV64_K(0, 0), /* never */
                                EXIT};
    struct inst_ctx c = {0x3fffff, 4, 0};

    cr_assert_eq(run_good(p, sizeof(p) / sizeof(p[0]), &c), 0);
    c.pc = 0x400000;
    cr_assert_eq(run_good(p, sizeof(p) / sizeof(p[0]), &c), 1);
    c.flags = 3;
    cr_assert_eq(run_good(p, sizeof(p) / sizeof(p[0]), &c), 2);
    c.pc = 0x500000;
    cr_assert_eq(run_good(p, sizeof(p) / sizeof(p[0]), &c), 0);
}

Test(good, helper_and_subprogram)
{
    /* main: r6 = len; r0 = twice(r6) + helper_add(r6, 0x100000000); f = twice. */
    const struct vm_insn p[] = {LDX(BPF_W, 6, 1, 8), MOV64_X(1, 6), CALL_LOCAL(7), MOV64_X(7, 0),
                                MOV64_X(1, 6), LDDW(2, 0x100000000), CALL(1), ADD64_X(0, 7), EXIT,
                                /* twice, slot 10 */
                                MOV64_X(0, 1), ADD64_X(0, 1), EXIT};
    struct inst_ctx c = {0, 21, 0};

    cr_assert_eq(run_good(p, sizeof(p) / sizeof(p[0]), &c), 0x100000000 + 21 + 42);
}
