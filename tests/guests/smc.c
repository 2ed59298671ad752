/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Guest: self-modifying code. Writes a tiny function "return K" into an
 * executable page, calls it 100 times, rewrites K in place (QEMU must
 * invalidate and re-translate the page's TBs), calls it 100 times more, and
 * repeats with three values. Prints the sums, which prove every version ran.
 *
 * The e2e filter test runs it with the coverage filter (Once everywhere):
 * each pc of the page must be recorded exactly once although QEMU lifted it
 * three times.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

/* Machine code of "return k" (k < 2048) for this architecture; returns its bytes. */
static size_t emit_return(uint8_t *p, unsigned k)
{
#if defined(__x86_64__)
    uint8_t code[] = {0xb8, (uint8_t)k, (uint8_t)(k >> 8), 0, 0, 0xc3}; /* mov eax, k; ret */
#elif defined(__aarch64__)
    uint32_t code[] = {0x52800000u | k << 5, 0xd65f03c0u}; /* mov w0, #k; ret */
#elif defined(__riscv)
    uint32_t code[] = {k << 20 | 0x513u, 0x00008067u}; /* addi a0, zero, k; ret */
#elif defined(__mips__)
    uint32_t code[] = {0x03e00008u, 0x24020000u | k}; /* jr ra; addiu v0, zero, k (delay slot) */
#else
#error "unsupported architecture"
#endif
    memcpy(p, code, sizeof(code));
    __builtin___clear_cache((char *)p, (char *)p + sizeof(code));
    return sizeof(code);
}

int main(void)
{
    static const unsigned ks[] = {7, 300, 1234};
    uint8_t *page =
        mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    unsigned (*fn)(void) = (unsigned (*)(void))(uintptr_t)page;
    unsigned i, v;

    if (page == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    for (v = 0; v < 3; v++) {
        unsigned long sum = 0;

        emit_return(page, ks[v]);
        for (i = 0; i < 100; i++) {
            sum += fn();
        }
        printf("version %u: sum %lu\n", v, sum);
    }
    return 0;
}
