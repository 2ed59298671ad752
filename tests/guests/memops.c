/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Guest: loads and stores of every size with known values.
 *
 * 1, 2, 4 and 8-byte loads and stores through volatile pointers (plain and
 * sign-extending), unaligned 2/4/8-byte accesses through a packed struct
 * (on mipsel these become lwl/lwr and friends, on the others plain unaligned
 * accesses or byte sequences, as the compiler chooses) and 16-byte vector
 * accesses on x86_64 (movdqu) and aarch64 (ldr/str q). The exact e2e test
 * compares every address and value with the reference plugin.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

struct __attribute__((packed)) unal {
    uint8_t pad1;
    uint16_t h;
    uint8_t pad2;
    uint32_t w;
    uint8_t pad3;
    uint64_t d;
};

static volatile uint8_t b8[64];
static volatile uint16_t b16[32];
static volatile uint32_t b32[16];
static volatile uint64_t b64[8];
static volatile struct unal un[4];
static uint8_t bytes[64] __attribute__((aligned(16)));

static __attribute__((noinline)) uint64_t vector_copy(void)
{
    uint64_t sum = 0;

#if defined(__x86_64__)
    __m128i v = _mm_loadu_si128((const __m128i *)(bytes + 3));
    _mm_storeu_si128((__m128i *)(bytes + 32), v);
    v = _mm_load_si128((const __m128i *)(bytes + 16));
    _mm_store_si128((__m128i *)(bytes + 48), v);
#elif defined(__aarch64__)
    uint8x16_t v = vld1q_u8(bytes + 3);
    vst1q_u8(bytes + 32, v);
    v = vld1q_u8(bytes + 16);
    vst1q_u8(bytes + 48, v);
#else
    memmove(bytes + 32, bytes + 3, 16);
    memmove(bytes + 48, bytes + 16, 16);
#endif
    for (int i = 32; i < 64; i++) {
        sum = sum * 31 + bytes[i];
    }
    return sum;
}

static char stdout_buf[4096];

int main(void)
{
    uint64_t sum = 0;
    int64_t ssum = 0;

    /* fully buffered: glibc then never fstat()s stdout (inode, times differ per run) */
    setvbuf(stdout, stdout_buf, _IOFBF, sizeof(stdout_buf));

    for (int i = 0; i < 64; i++) {
        b8[i] = (uint8_t)(0x80 + i * 3);
        bytes[i] = (uint8_t)(i * 7 + 1);
    }
    for (int i = 0; i < 32; i++) {
        b16[i] = (uint16_t)(0x8001u + i * 0x101u);
    }
    for (int i = 0; i < 16; i++) {
        b32[i] = 0x80000001u + (uint32_t)i * 0x01010101u;
    }
    for (int i = 0; i < 8; i++) {
        b64[i] = 0x8000000000000001ull + (uint64_t)i * 0x0101010101010101ull;
    }
    for (int i = 0; i < 4; i++) {
        un[i].pad1 = (uint8_t)i;
        un[i].h = (uint16_t)(0xbeef + i);
        un[i].pad2 = (uint8_t)~i;
        un[i].w = 0xdeadbeefu ^ (uint32_t)i;
        un[i].pad3 = 0x5a;
        un[i].d = 0x0123456789abcdefull + (uint64_t)i;
    }

    for (int i = 0; i < 64; i++) {
        sum += b8[i];
        ssum += (int8_t)b8[i];
    }
    for (int i = 0; i < 32; i++) {
        sum += b16[i];
        ssum += (int16_t)b16[i];
    }
    for (int i = 0; i < 16; i++) {
        sum += b32[i];
        ssum += (int32_t)b32[i];
    }
    for (int i = 0; i < 8; i++) {
        sum += b64[i];
    }
    for (int i = 0; i < 4; i++) {
        sum += un[i].h + un[i].w + un[i].d + un[i].pad3;
    }

    printf("sum=%llx\n", (unsigned long long)sum);
    printf("ssum=%lld\n", (long long)ssum);
    printf("vector=%llx\n", (unsigned long long)vector_copy());
    return 0;
}
