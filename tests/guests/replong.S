/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Guest (x86_64 only, no libc): REP string instructions long enough to
 * overrun any ring within one TB. QEMU lifts a REP instruction as a loop
 * inside its TB (up to 65535 trips before it leaves the TB), so the TB's
 * capacity check at its start bounds only one trip: the check after the
 * loop's label must stay. ROUNDS times: rep stosb of SIZE bytes (SIZE
 * 1-byte stores), then rep movsb of SIZE bytes (SIZE loads, SIZE stores);
 * nothing else touches memory, so the trace holds exactly
 * 2 * ROUNDS * SIZE stores and ROUNDS * SIZE loads (rep_loop.py).
 */
#define SIZE 0x100000
#define ROUNDS 4

    .text
    .globl _start
_start:
    mov $ROUNDS, %r12d
1:  lea src(%rip), %rdi
    mov $SIZE, %ecx
    mov $0x5a, %eax
    rep stosb
    lea src(%rip), %rsi
    lea dst(%rip), %rdi
    mov $SIZE, %ecx
    rep movsb
    dec %r12d
    jnz 1b
    mov $60, %eax /* exit(0) */
    xor %edi, %edi
    syscall

    .bss
    .balign 4096
src: .skip SIZE
dst: .skip SIZE
