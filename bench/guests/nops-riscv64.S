/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The worst-case guest (Cannoli's unrolled-nop loop), riscv64: ITERS times a
 * block of 100 nops, a decrement and a taken branch, then exit(0). Nearly
 * every instruction is a nop, so a tracer pays its per-instruction cost with
 * almost no guest work to hide it.
 *
 * Freestanding: no libc, no data, no memory access. Build with
 * -nostdlib -static -no-pie -DITERS=N. The toolchain's default rv64gc makes
 * the nops compressed (c.nop, 2 bytes), as in real code. `li` expands to one
 * or two instructions depending on ITERS; the checker reads what it became.
 * bench/pcsum.py reads the layout back with nm and objdump: it executes
 * [_start, loop) once, [loop, loop_end) ITERS times, then [loop_end, done);
 * `iterations` is the absolute symbol ITERS, so the checker needs nothing
 * but the binary.
 */
#ifndef ITERS
#error "build with -DITERS=N"
#endif
        .globl  iterations
        .set    iterations, ITERS

        .text
        .globl  _start
_start:
        li      t0, ITERS
loop:
        .rept   100
        nop
        .endr
        addi    t0, t0, -1
        bnez    t0, loop
loop_end:
        li      a0, 0
        li      a7, 93                  /* exit */
        ecall
done:

        .section .note.GNU-stack, "", @progbits
