/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The worst-case guest (Cannoli's unrolled-nop loop), x86_64: ITERS times a
 * block of 100 nops, a decrement and a taken branch, then exit(0). Nearly
 * every instruction is a one-byte nop, so a tracer pays its per-instruction
 * cost with almost no guest work to hide it.
 *
 * Freestanding: no libc, no data, no memory access. Build with
 * -nostdlib -static -no-pie -DITERS=N. bench/pcsum.py reads the layout back
 * with nm and objdump: it executes [_start, loop) once, [loop, loop_end)
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
        mov     $ITERS, %ecx            /* zero-extends into %rcx */
loop:
        .rept   100
        nop
        .endr
        dec     %ecx
        jnz     loop
loop_end:
        mov     $60, %eax               /* exit */
        xor     %edi, %edi
        syscall
done:

        .section .note.GNU-stack, "", @progbits
