/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Guest (x86_64 only): a block that ran to its end must stay whole when
 * QEMU then faults before the next TB runs. Thread 1 calls a generated
 * loop whose body is one TB that jumps back to its own start; thread 2
 * keeps taking PROT_EXEC away from that page and giving it back. When the
 * page loses it while the loop runs, the jump back needs a new translation
 * of the loop's start, which faults: QEMU leaves through a longjmp with
 * the finished block still named in the vCPU's slot (the bug this guards:
 * it was cut at its first instruction, and the trace ended in an error).
 *
 * Prints "calls N": loops run to their end. Each runs exactly
 * 1 (call) + ITERS * (BODY + 2) + 1 (ret) instructions, a lower bound on
 * what the trace must hold for this thread.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define BODY 110 /* 100 x add %rax,%rdx (3 bytes), a load before every 10th (4 bytes) */
#define ITERS 50 /* loop trips per call */

static uint8_t *code;
static uint64_t data[2];
static sigjmp_buf env;
static volatile int stop;

static void on_segv(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)si, (void)uc;
    siglongjmp(env, 1);
}

static void *toggle(void *arg)
{
    struct timespec off = {0, 20000}, on = {0, 300000};

    (void)arg;
    while (!stop) {
        mprotect(code, 4096, PROT_READ | PROT_WRITE);
        nanosleep(&off, NULL);
        mprotect(code, 4096, PROT_READ | PROT_WRITE | PROT_EXEC);
        nanosleep(&on, NULL);
    }
    return NULL;
}

/* loop: 10 x (mov 8(%rdi),%rax; 10 x add %rax,%rdx); dec %rcx; jnz loop; ret */
static void generate(void)
{
    uint8_t *p = code;
    int32_t rel;

    for (int i = 0; i < 100; i++) {
        if (i % 10 == 0) {
            memcpy(p, "\x48\x8b\x47\x08", 4);
            p += 4;
        }
        memcpy(p, "\x48\x01\xc2", 3);
        p += 3;
    }
    memcpy(p, "\x48\xff\xc9", 3);
    p += 3;
    rel = (int32_t)(code - (p + 6));
    p[0] = 0x0f;
    p[1] = 0x85;
    memcpy(p + 2, &rel, 4);
    p[6] = 0xc3;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 20000, calls = 0;
    struct sigaction sa;
    pthread_t t;

    code = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (code == MAP_FAILED) {
        return 1;
    }
    generate();
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &sa, NULL);
    pthread_create(&t, NULL, toggle, NULL);
    for (long i = 0; i < n; i++) {
        if (sigsetjmp(env, 1) == 0) {
            __asm__ volatile("mov %0, %%rdi\n\tmov %2, %%rcx\n\tcall *%1"
                             :
                             : "r"(data), "r"(code), "i"(ITERS)
                             : "rax", "rcx", "rdx", "rdi", "memory", "cc");
            calls++;
        }
    }
    stop = 1;
    pthread_join(t, NULL);
    printf("calls %ld insns-per-call %d\n", calls, 2 + ITERS * (BODY + 2));
    return 0;
}
