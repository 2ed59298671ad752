/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Guest: loops, calls, indirect calls and data-dependent branches.
 *
 * Exercises control flow only (recursion, a switch that compiles to a jump
 * table, calls through function pointers, early loop exits) so the exact
 * e2e test can check that every executed PC is traced, in order, across TB
 * boundaries. Prints a deterministic summary.
 */
#include <stdio.h>

static __attribute__((noinline)) unsigned fib(unsigned n)
{
    return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

static __attribute__((noinline)) unsigned collatz_steps(unsigned long n)
{
    unsigned steps = 0;

    while (n != 1) {
        n = (n & 1) ? 3 * n + 1 : n / 2;
        steps++;
    }
    return steps;
}

static unsigned op_add(unsigned a, unsigned b)
{
    return a + b;
}
static unsigned op_xor(unsigned a, unsigned b)
{
    return a ^ b;
}
static unsigned op_mul(unsigned a, unsigned b)
{
    return a * b + 1;
}

static __attribute__((noinline)) unsigned dispatch(unsigned sel, unsigned a, unsigned b)
{
    switch (sel % 7) {
    case 0:
        return a + 1;
    case 1:
        return a - b;
    case 2:
        return a << (b & 7);
    case 3:
        return a >> (b & 7);
    case 4:
        return a | b;
    case 5:
        return a & ~b;
    default:
        return a * 3;
    }
}

static char stdout_buf[4096];

int main(void)
{
    unsigned (*ops[3])(unsigned, unsigned) = {op_add, op_xor, op_mul};
    unsigned acc = 1, total_steps = 0;
    unsigned long n;

    /* fully buffered: glibc then never fstat()s stdout (inode, times differ per run) */
    setvbuf(stdout, stdout_buf, _IOFBF, sizeof(stdout_buf));

    for (n = 1; n < 300; n++) {
        total_steps += collatz_steps(n);
    }
    for (unsigned i = 0; i < 2000; i++) {
        acc = ops[i % 3](acc, i);
        acc = dispatch(i * 2654435761u >> 7, acc, i);
        if (acc == 12345) {
            break;
        }
    }
    printf("fib(18)=%u\n", fib(18));
    printf("collatz steps=%u\n", total_steps);
    printf("acc=%u\n", acc);
    return 0;
}
