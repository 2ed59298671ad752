/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The worst-case guest (Cannoli's unrolled-nop loop), mipsel: ITERS times a
 * block of 100 nops, a decrement, a taken branch and its delay slot (a nop),
 * then exit(0). Nearly every instruction is a nop, so a tracer pays its
 * per-instruction cost with almost no guest work to hide it.
 *
 * Freestanding: no libc, no data, no memory access. Build with
 * -nostdlib -static -no-pie -DITERS=N (ITERS < 2^32: lui and ori, so the
 * layout does not depend on the value). .set noreorder: the assembler fills
 * no delay slot, the one below is explicit. bench/pcsum.py reads the layout
 * back with nm and objdump: it executes [_start, loop) once, [loop, loop_end)
 * ITERS times (loop_end is after the delay slot, which runs whether the
 * branch is taken or not), then [loop_end, done); `iterations` is the
 * absolute symbol ITERS, so the checker needs nothing but the binary.
 */
#ifndef ITERS
#error "build with -DITERS=N"
#endif
        .globl  iterations
        .set    iterations, ITERS

        .set    noreorder
        .text
        .globl  _start
        .globl  __start                 /* the MIPS linkers' default entry */
_start:
__start:
        lui     $t0, ((ITERS >> 16) & 0xffff)
        ori     $t0, $t0, (ITERS & 0xffff)
loop:
        .rept   100
        nop
        .endr
        addiu   $t0, $t0, -1
        bnez    $t0, loop
        nop                             /* delay slot */
loop_end:
        move    $a0, $zero
        li      $v0, 4001               /* exit */
        syscall
done:

        .section .note.GNU-stack, "", @progbits
