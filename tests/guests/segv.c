/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Guest: recovers from faulting loads and stores with a SIGSEGV handler.
 *
 * A load and a store through bad pointers fault; the handler returns to the
 * main loop with siglongjmp. A faulting access did not happen, so neither
 * sluice nor the reference may record it, and the signal frame setup and
 * sigreturn trampoline must be traced like any other guest code. Then a
 * load from a PROT_NONE page that the handler makes readable and returns:
 * the load runs again and the instructions after it, in the same TB, run
 * only then (sluice's coverage must record them, though the TB's first run
 * stopped before them).
 */
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

static sigjmp_buf env;
static volatile int faults;
static char *guard; /* PROT_NONE until the handler repairs it */
static volatile int repaired;

static void on_segv(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)uc;
    if (guard && (char *)si->si_addr >= guard && (char *)si->si_addr < guard + 4096) {
        mprotect(guard, 4096, PROT_READ);
        repaired++;
        return; /* the load runs again */
    }
    faults++;
    siglongjmp(env, (int)((uintptr_t)si->si_addr & 0xff) | 0x100);
}

static char stdout_buf[4096];

#ifdef __x86_64__
static volatile int traps;

/* int3: QEMU reads the emulated IDT to deliver it; that is no guest access. */
static void on_trap(int sig)
{
    (void)sig;
    traps++;
}
#endif

int main(void)
{
    struct sigaction sa;
    volatile uint32_t good = 0x1234;
    unsigned codes = 0;

    /* fully buffered: glibc then never fstat()s stdout (inode, times differ per run) */
    setvbuf(stdout, stdout_buf, _IOFBF, sizeof(stdout_buf));

    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, NULL);

    for (int i = 0; i < 3; i++) {
        int r = sigsetjmp(env, 1);

        if (r == 0) {
            volatile uint32_t *bad = (volatile uint32_t *)(uintptr_t)(0x10 + 8 * i);

            if (i == 1) {
                *bad = good;
            } else {
                good += *bad;
            }
            printf("not reached %d\n", i);
        } else {
            codes += (unsigned)r;
            good++;
        }
    }
    printf("faults=%d codes=%u good=%u\n", faults, codes, (unsigned)good);
    guard = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (guard != MAP_FAILED) {
        uint32_t v = *(volatile uint32_t *)(guard + 8);

        good = (good + v + 7) ^ 0x55;
        good = good * 3 + (uint32_t)repaired;
        printf("repaired=%d good=%u\n", repaired, (unsigned)good);
    }
#ifdef __x86_64__
    signal(SIGTRAP, on_trap);
    for (int i = 0; i < 3; i++) {
        __asm__ volatile("int3");
    }
    printf("traps=%d\n", traps);
#endif
    return 0;
}
