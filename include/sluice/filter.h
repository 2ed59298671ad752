/* SPDX-License-Identifier: GPL-2.0-or-later */
/**
 * @file filter.h
 * @brief The filter ABI: what a sluice filter program sees and may call.
 *
 * A filter is restricted C compiled with `clang -O2 -g -target bpf`
 * (`-mcpu=v1` to `v3`) into an ELF object, given to `sluice run --filter
 * F.bpf.o` (or `F.bpf.c`, which sluice compiles). The jitter runs its
 * programs in its own verified interpreter (RFC 9669 semantics) while QEMU
 * lifts guest code, never while the guest runs: the decision is baked into
 * the translated code.
 *
 * Sections (at least one, each at most once):
 * - `SEC("sluice/inst") int hook_inst(struct sluice_inst_ctx *ctx)`: runs once
 *   per instruction lifted, after QEMU has decoded it (so length and bytes are
 *   known), and returns #SLUICE_NEVER, #SLUICE_ALWAYS or #SLUICE_ONCE. When the
 *   object has no such section, no exec record is made.
 * - `SEC("sluice/mem") int hook_mem(struct sluice_mem_ctx *ctx)`: runs once per
 *   guest memory access site lifted and returns 1 (record it) or 0 (emit
 *   nothing). It runs while QEMU lifts the access, so for one instruction
 *   hook_mem runs before hook_inst. When the object has no such section, no
 *   memory record is made.
 *
 * A lift is repeated whenever QEMU re-translates code (self-modifying code,
 * `tb_flush`, a TB invalidated by #SLUICE_ONCE): a program must give the same
 * answer for the same context unless it means to change its mind.
 *
 * Maps (`SEC(".maps")`, BTF-defined, `BPF_MAP_TYPE_ARRAY` or
 * `BPF_MAP_TYPE_HASH`) and global variables (`.rodata`, `.data`, `.bss`) are
 * supported; `const volatile` globals are set with `sluice run --set
 * NAME=VALUE` before the first lift, like a libbpf skeleton's knobs.
 *
 * Run-time faults (out-of-bounds access, instruction budget, a helper
 * refusing its arguments, a return value out of range) never reach QEMU: the
 * lift then uses the fallback (#SLUICE_ALWAYS, record the access), so nothing
 * is lost silently; the fault is counted and the first one is reported on
 * stderr with the guest pc and the instruction index.
 *
 * When compiling for BPF, include `<linux/bpf.h>` (the `__u64` types
 * `<bpf/bpf_helpers.h>` needs, map types, update flags), then
 * `<bpf/bpf_helpers.h>`, then this header (sluice compiles `.bpf.c` files
 * with `-I/usr/include/$(gcc -print-multiarch)` so that `<linux/types.h>`
 * resolves). The host side (the jitter) includes it too.
 */
#ifndef SLUICE_FILTER_H
#define SLUICE_FILTER_H

#include <linux/types.h>

/** hook_inst: make no exec record for this instruction. */
#define SLUICE_NEVER 0
/** hook_inst: one exec record every time the instruction executes. */
#define SLUICE_ALWAYS 1
/**
 * hook_inst: one exec record the first time any thread of this process
 * executes this pc, then none, even after re-translation; the inline cost
 * disappears after that first hit (the TB is re-translated without it). A
 * forked child inherits the set of pcs already hit; an execve starts afresh.
 */
#define SLUICE_ONCE 2

/** sluice_inst_ctx.flags: the instruction ends its translation block. */
#define SLUICE_INST_ENDS_TB 0x1u

/** sluice_image.flags: the image is the main executable (the file given to QEMU). */
#define SLUICE_IMAGE_MAIN 0x1u

/** Most instruction bytes a sluice_inst_ctx carries. */
#define SLUICE_INST_BYTES 16

/**
 * Context of hook_inst (48 bytes, read-only to the program).
 *
 * "Image": a file the guest mapped with mmap(2) (the main executable, the
 * dynamic loader, shared libraries). Image ids are per process: 0 is the main
 * executable, the others are numbered from 1 in the order their first mapping
 * appeared; anonymous memory (JIT code, the vDSO) belongs to no image.
 */
struct sluice_inst_ctx {
    __u64 pc;         /**< guest virtual address of the instruction */
    __u64 image_base; /**< guest address where pc's load of the image puts its file offset 0
                           (its lowest mapping, for a file loaded whole: record.h's MAP base);
                           0 if none */
    __s32 image_id;   /**< image holding pc, or -1 if none */
    __u32 length;     /**< bytes of the instruction (as QEMU decoded it) */
    __u32 flags;      /**< SLUICE_INST_* bits */
    __u32 reserved;   /**< 0 */
    __u8 bytes[SLUICE_INST_BYTES]; /**< first min(length, 16) bytes of the instruction; rest 0 */
};

/**
 * Context of hook_mem (32 bytes, read-only to the program).
 *
 * Accesses made inside QEMU helpers (atomics under parallel execution,
 * vector gathers, fxsave/xsave, ...) are decided per instruction, not per
 * access: hook_mem then sees size 0, once with is_write 0 for the helper's
 * loads and once with is_write 1 for its stores (read-modify-write atomics
 * are recorded as stores).
 */
struct sluice_mem_ctx {
    __u64 pc;         /**< guest virtual address of the accessing instruction */
    __u64 image_base; /**< as in sluice_inst_ctx */
    __s32 image_id;   /**< as in sluice_inst_ctx */
    __u32 size;       /**< bytes accessed: 1, 2, 4, 8 or 16; 0 for a helper's accesses */
    __u32 is_write;   /**< 1 for a store, 0 for a load */
    __u32 reserved;   /**< 0 */
};

/** What sluice_image_of() fills in (24 bytes). */
struct sluice_image {
    __u64 base;   /**< guest virtual address of the image's lowest mapping */
    __u64 offset; /**< pc - base, bytes */
    __s32 id;     /**< image id (0 = main executable) */
    __u32 flags;  /**< SLUICE_IMAGE_* bits */
};

/**
 * Helper IDs. Kernel numbering where a kernel helper fits (libbpf's
 * `<bpf/bpf_helpers.h>` declares those); sluice's own helpers live in
 * [SLUICE_HELPER_BASE, SLUICE_HELPER_BASE + 100).
 *
 * - 1 `bpf_map_lookup_elem(map, key)`: pointer to the value or NULL.
 * - 2 `bpf_map_update_elem(map, key, value, flags)`: 0, -E2BIG (hash full,
 *   or array index out of range, as in the kernel), -EEXIST (BPF_NOEXIST and
 *   present: always so in an array), -ENOENT (BPF_EXIST and absent),
 *   -EINVAL (bad flags).
 * - 3 `bpf_map_delete_elem(map, key)`: 0, -ENOENT, -EINVAL (array maps).
 * - 6 `bpf_trace_printk(fmt, fmt_size, a, b, c)`: fmt_size counts the
 *   format's NUL. The message goes in-band to the consumer; conversions
 *   %d %i %u %x %X with l/ll (none: 32 bits), %c, %s, %p (printed 0x and
 *   hex), %%, flags "0+- " and a width up to 64, as in the kernel; longer
 *   messages are cut at 511 bytes, %s strings at 255. Returns bytes written,
 *   or -EINVAL (bad format), -EBUSY (rate-limited: more than 100 messages
 *   in one second; the drops are counted).
 * - 7 `bpf_get_prandom_u32()`: a pseudo-random 32-bit value (the same
 *   sequence on every run of sluice).
 *
 * A map argument that is not one of the object's maps, or a pointer
 * argument (key, value, format, %s string, out, name) that does not cover
 * the bytes the helper needs in memory the program may access, is a
 * run-time fault (see above), not an error return.
 */
#define SLUICE_HELPER_BASE 1000
/** Helper ID of sluice_image_of(). */
#define SLUICE_HELPER_IMAGE_OF (SLUICE_HELPER_BASE + 1)
/** Helper ID of sluice_image_is(). */
#define SLUICE_HELPER_IMAGE_IS (SLUICE_HELPER_BASE + 2)

#ifdef __bpf__
/**
 * Which image holds guest address @p pc, at what offset.
 * @param pc   guest virtual address
 * @param out  filled when the return value is >= 0
 * @param size sizeof(*out)
 * @return the image id (>= 0), -ENOENT if no image holds pc, -EINVAL if
 *         @p size is not sizeof(struct sluice_image).
 */
static long (*const sluice_image_of)(__u64 pc, struct sluice_image *out,
                                     __u32 size) = (void *)SLUICE_HELPER_IMAGE_OF;

/**
 * Whether the image holding @p pc is the file @p name: equal to its full
 * path, or to its last path component ("libc.so.6"), as the guest mapped it
 * (one file loaded by two hard links is two images, each by its own name).
 * @param pc   guest virtual address
 * @param name the name, not necessarily NUL-terminated
 * @param size bytes of @p name to compare (a trailing NUL is ignored), 1..4096
 * @return 1 if it is, 0 if not (or no image holds pc), -EINVAL for a bad size.
 */
static long (*const sluice_image_is)(__u64 pc, const char *name,
                                     __u32 size) = (void *)SLUICE_HELPER_IMAGE_IS;
#endif /* __bpf__ */

#endif /* SLUICE_FILTER_H */
