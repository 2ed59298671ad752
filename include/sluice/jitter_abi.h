/* SPDX-License-Identifier: GPL-2.0-or-later */
/**
 * @file jitter_abi.h
 * @brief The interface between the patched QEMU (linux-user) and the jitter.
 *
 * The jitter is a shared library (`libsluice-jitter.so`) that QEMU loads with
 * dlopen() when given `-jitter PATH` or `QEMU_JITTER=PATH`. It exports one
 * symbol, `sluice_jitter_ops` (struct sluice_jitter_ops), whose `abi_version`
 * QEMU checks before calling anything: a mismatch is a load error. The QEMU
 * build compiles against this same header (`--extra-cflags=-I.../include`),
 * and the patched QEMU's cache key includes its hash.
 *
 * Threads and contexts: "vCPU" means the guest thread's own host thread
 * (linux-user runs one host thread per guest thread). "exclusive" means QEMU
 * holds start_exclusive(): every other vCPU is stopped outside translated
 * code, so its slot's cursor is up to date in memory.
 *
 * Changelog: 1 — first version.
 */
#ifndef SLUICE_JITTER_ABI_H
#define SLUICE_JITTER_ABI_H

#include <stdint.h>

#define SLUICE_JITTER_ABI_VERSION 1u

/**
 * Per-vCPU producer state. It lives in QEMU's CPUNegativeOffsetState
 * (include/hw/core/cpu.h) so translated code reaches it at a fixed negative
 * offset from env on every target and host.
 *
 * Translated code appends records at `cursor` and advances it; it calls
 * reserve() at TB start when `cursor + need > limit`. Between two reserve()
 * calls the producer may write up to `limit` without checking.
 */
struct sluice_thread_slot {
    uint64_t *cursor; /**< next record's address (host pointer into the ring's data mapping) */
    uint64_t *limit;  /**< end of the space granted by the last reserve() */
    void *ring;       /**< the jitter's ring for this thread; NULL = not tracing */
};

/** What QEMU tells the jitter at load. */
struct sluice_host_info {
    uint32_t size;       /**< sizeof(struct sluice_host_info) */
    uint32_t big_endian; /**< guest byte order */
    const char *arch;    /**< QEMU target name, e.g. "x86_64", "aarch64", "mipsel" */
    const char *exe;     /**< guest program path */
};

/**
 * Entry points of the jitter. Every function pointer is required. None of
 * them may call back into QEMU. Unless stated, they return nothing and never
 * fail: a jitter that cannot keep records counts them as lost.
 */
struct sluice_jitter_ops {
    uint32_t abi_version; /**< SLUICE_JITTER_ABI_VERSION */
    uint32_t size;        /**< sizeof(struct sluice_jitter_ops) */

    /**
     * Main thread, once, before any guest code is translated.
     * @return 0, or a negative errno after printing one line on stderr
     *         (QEMU then exits with status 1).
     */
    int (*init)(const struct sluice_host_info *info);
    /** vCPU, before the thread's first guest instruction: create its ring, fill @p slot. */
    void (*thread_start)(struct sluice_thread_slot *slot, uint32_t tid);
    /**
     * vCPU, from translated code (TB start, or after a label inside a TB) or
     * a memory helper: publish what is written and return once
     * `limit - cursor >= need` bytes (waiting for lossless consumers when the
     * ring is full). @p need <= SLUICE_RESERVE_MAX + 32 (a helper's record
     * plus room for the rest of its TB).
     */
    void (*reserve)(struct sluice_thread_slot *slot, uint64_t need);
    /** vCPU, when the thread leaves translated code for a syscall: publish. */
    void (*publish)(struct sluice_thread_slot *slot);
    /** vCPU, the thread is exiting (exit(2), not the last thread): publish and close its ring. */
    void (*thread_exit)(struct sluice_thread_slot *slot);
    /** Exclusive, the process exits (exit_group, last exit, fatal signal): publish and close all
     * rings. */
    void (*process_exit)(int status);
    /** Exclusive, before execve(2): publish all rings (the exec may fail and return). */
    void (*exec_start)(void);
    /** Exclusive, before fork(2) in the parent: publish all rings. */
    void (*fork_start)(void);
    /**
     * vCPU (the only thread left in a child), after fork(2).
     * In the parent, @p child is 0 and @p slot unchanged. In the child,
     * @p child is 1: forget the parent's rings and give @p slot a new ring for @p tid.
     */
    void (*fork_end)(int child, struct sluice_thread_slot *slot, uint32_t tid);
};

/** Room a translation block may need, in bytes (sizes TBs; reserve() gets at most this + 32). */
#define SLUICE_RESERVE_MAX (64u * 1024)

/** Name of the symbol the jitter exports. */
#define SLUICE_JITTER_OPS_SYMBOL "sluice_jitter_ops"

#endif /* SLUICE_JITTER_ABI_H */
