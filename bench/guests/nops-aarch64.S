/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The worst-case guest (Cannoli's unrolled-nop loop), aarch64: ITERS times a
 * block of 100 nops, a decrement and a taken branch, then exit(0). Nearly
 * every instruction is a nop, so a tracer pays its per-instruction cost with
 * almost no guest work to hide it.
 *
 * Freestanding: no libc, no data, no memory access. Build with
 * -nostdlib -static -no-pie -DITERS=N (ITERS < 2^32: movz and one movk, so
 * the layout does not depend on the value). bench/pcsum.py reads the layout
 * back with nm and objdump: it executes [_start, loop) once, [loop, loop_end)
 * ITERS times, then [loop_end, done); `iterations` is the absolute symbol
 * ITERS, so the checker needs nothing but the binary.
 */
#ifndef ITERS
#error "build with -DITERS=N"
#endif
        .globl  iterations
        .set    iterations, ITERS

        .text
        .globl  _start
_start:
        movz    x19, #(ITERS & 0xffff)
        movk    x19, #((ITERS >> 16) & 0xffff), lsl #16
loop:
        .rept   100
        nop
        .endr
        subs    x19, x19, #1
        b.ne    loop
loop_end:
        mov     x0, #0
        mov     x8, #93                 /* exit */
        svc     #0
done:

        .section .note.GNU-stack, "", @progbits
