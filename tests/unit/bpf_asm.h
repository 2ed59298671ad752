/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * bpf_asm.h — hand-assembly of BPF programs for the filter VM's unit tests:
 * one macro per instruction form, yielding struct vm_insn initialisers (LDDW
 * yields two). PROG(...) makes an array and its length from a list of them.
 */
#ifndef SLUICE_TESTS_BPF_ASM_H
#define SLUICE_TESTS_BPF_ASM_H

#include <linux/bpf.h>

#include "bpf_vm.h"

#define INSN(c, d, s, o, i)                                                                        \
    ((struct vm_insn){.code = (c), .dst = (d), .src = (s), .off = (o), .imm = (i)})

#define ALU64_K(op, d, k) INSN(BPF_ALU64 | BPF_K | (op), d, 0, 0, k)
#define ALU64_X(op, d, s) INSN(BPF_ALU64 | BPF_X | (op), d, s, 0, 0)
#define ALU32_K(op, d, k) INSN(BPF_ALU | BPF_K | (op), d, 0, 0, k)
#define ALU32_X(op, d, s) INSN(BPF_ALU | BPF_X | (op), d, s, 0, 0)
#define MOV64_K(d, k) ALU64_K(BPF_MOV, d, k)
#define MOV64_X(d, s) ALU64_X(BPF_MOV, d, s)
#define ADD64_K(d, k) ALU64_K(BPF_ADD, d, k)
#define ADD64_X(d, s) ALU64_X(BPF_ADD, d, s)
/* Byte swap: to = BPF_TO_LE or BPF_TO_BE, bits = 16, 32 or 64. */
#define ENDIAN(to, d, bits) INSN(BPF_ALU | BPF_END | (to), d, 0, 0, bits)

/* dst = 64-bit v (two slots). */
#define LDDW(d, v)                                                                                 \
    INSN(BPF_LD | BPF_DW | BPF_IMM, d, 0, 0, (int32_t)(uint32_t)(uint64_t)(v)),                    \
        INSN(0, 0, 0, 0, (int32_t)(uint32_t)((uint64_t)(v) >> 32))

/* size: BPF_B, BPF_H, BPF_W, BPF_DW. */
#define LDX(size, d, s, o) INSN(BPF_LDX | BPF_MEM | (size), d, s, o, 0)
#define STX(size, d, s, o) INSN(BPF_STX | BPF_MEM | (size), d, s, o, 0)
#define ST(size, d, o, k) INSN(BPF_ST | BPF_MEM | (size), d, 0, o, k)
/* op: BPF_ADD, BPF_OR, ... (| BPF_FETCH), BPF_XCHG, BPF_CMPXCHG. */
#define ATOMIC(size, d, s, o, op) INSN(BPF_STX | BPF_ATOMIC | (size), d, s, o, op)

#define JMP_K(op, d, k, o) INSN(BPF_JMP | BPF_K | (op), d, 0, o, k)
#define JMP_X(op, d, s, o) INSN(BPF_JMP | BPF_X | (op), d, s, o, 0)
#define JMP32_K(op, d, k, o) INSN(BPF_JMP32 | BPF_K | (op), d, 0, o, k)
#define JMP32_X(op, d, s, o) INSN(BPF_JMP32 | BPF_X | (op), d, s, o, 0)
#define JA(o) INSN(BPF_JMP | BPF_JA, 0, 0, o, 0)
#define CALL(id) INSN(BPF_JMP | BPF_CALL, 0, 0, 0, id)
/* bpf-to-bpf call of the function starting at this slot + 1 + rel. */
#define CALL_LOCAL(rel) INSN(BPF_JMP | BPF_CALL, 0, BPF_PSEUDO_CALL, 0, rel)
#define EXIT INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)

/* An array of instructions and its length, for f(PROG(...)) with f(insns, n). */
#define PROG(...)                                                                                  \
    ((const struct vm_insn[]){__VA_ARGS__}),                                                       \
        (sizeof((const struct vm_insn[]){__VA_ARGS__}) / sizeof(struct vm_insn))

#endif /* SLUICE_TESTS_BPF_ASM_H */
