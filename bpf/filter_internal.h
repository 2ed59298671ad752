/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * filter_internal.h — what the files of the filter loader share: the layout
 * of struct filter, the load context that carries error messages, and each
 * stage's entry point. Not an API: only bpf/filter*.c and the unit tests
 * include it.
 *
 * Stages of filter_open_mem() (filter.c), in order:
 *   1. filter_elf_check()      (filter_elf.c)  the raw ELF, with libelf, before libbpf sees it,
 *                                              and its BTF (filter_btf.c);
 *   2. filter_libbpf_open()    (filter_load.c) libbpf parses it; programs and maps are checked;
 *   3. filter_build_data()     (filter_load.c) our maps and global sections are made;
 *   4. filter_apply_sets()     (filter_set.c)  --set values, through BTF, into the globals;
 *   5. filter_build_progs()    (filter_load.c) libbpf's gen-loader relocates; we rewrite
 *                                              lddw references to host pointers and verify.
 */
#ifndef SLUICE_JITTER_FILTER_INTERNAL_H
#define SLUICE_JITTER_FILTER_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bpf_vm.h"
#include "filter.h"
#include "filter_maps.h"
#include "filter_printk.h"

struct bpf_object;
struct bpf_program;

/** Most maps (BTF-defined, in .maps) one object may define. */
#define FILTER_MAX_MAPS 64
/** Most global sections (.rodata, .data, .bss, .rodata.str1.1, ...) one object may have. */
#define FILTER_MAX_GLOBALS 16
/** Largest object file accepted, in bytes. */
#define FILTER_FILE_MAX (64u << 20)
/** Seed of bpf_get_prandom_u32's generator: runs are repeatable. */
#define FILTER_PRANDOM_SEED 0x9e3779b97f4a7c15ull

/** A hook program, ready to run. */
struct filter_prog {
    const char *section;   /**< "sluice/inst" or "sluice/mem" (static string) */
    struct vm_insn *insns; /**< owned; NULL when the object has no such program */
    size_t n;              /**< slots, subprograms included */
    size_t main_n;         /**< slots of the section itself; subprograms follow */
    struct vm_prog vm;     /**< verified, over insns */
};

/** A global data section, copied out of the object: the program's .rodata, .data, .bss. */
struct filter_global {
    char name[32]; /**< the ELF section (".rodata", ".bss", ...; truncated) */
    uint8_t *data; /**< owned; size bytes (at least 1 allocated) */
    size_t size;   /**< bytes */
    bool writable; /**< false for .rodata* (BPF_F_RDONLY_PROG) */
};

/** What a libbpf map index stands for, once our copies exist. */
struct filter_ref {
    struct filter_map *map;       /**< a map, or NULL */
    struct filter_global *global; /**< a global section, or NULL */
};

struct filter {
    struct filter_prog inst; /**< sluice/inst */
    struct filter_prog mem;  /**< sluice/mem */
    struct filter_map *maps; /**< n_maps maps */
    size_t n_maps;
    struct filter_global *globals; /**< n_globals sections */
    size_t n_globals;
    struct vm_region regions[FILTER_MAX_GLOBALS]; /**< the globals, for every run */
    size_t n_regions;
    struct filter_host host;    /**< copied from the caller; zeroed if none */
    pthread_mutex_t lock;       /**< one run at a time: maps, globals, state below */
    uint64_t prandom;           /**< xorshift64 state */
    struct printk_limit printk; /**< rate limit of bpf_trace_printk */
    uint64_t (*clock_ns)(void); /**< monotonic nanoseconds (tests replace it) */
};

/** One load: where messages go and what is being loaded. */
struct filter_load {
    const char *name;         /**< the object's name in messages (file path) */
    char *err;                /**< one line, on failure; may be NULL */
    size_t err_size;          /**< bytes of err */
    struct bpf_object *obj;   /**< libbpf's view, between stages 2 and 5 */
    struct bpf_program *inst; /**< the sluice/inst program in obj, or NULL */
    struct bpf_program *mem;  /**< the sluice/mem program in obj, or NULL */
    struct filter_ref *refs;  /**< per libbpf map index */
    size_t n_refs;
    struct filter *f; /**< being built */
};

/**
 * Fill ld->err with "NAME: " and the formatted reason (truncated to fit).
 * @param[in] ld  the load
 * @param[in] rc  returned as is
 * @param[in] fmt printf-style reason, then its arguments
 * @return @p rc.
 */
int filter_fail(const struct filter_load *ld, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/**
 * Stage 1: check the raw object with libelf before libbpf parses it: an ELF64
 * little-endian BPF relocatable whose sections, symbols and relocations lie
 * inside the buffer and point at things that exist; no legacy `maps`
 * section, no struct_ops, no extern symbols, no CO-RE relocations, no
 * duplicate section names. libbpf 1.1 trusts several of these.
 * @param[in] ld   the load (for messages)
 * @param[in] buf  the object, @p size bytes
 * @param[in] size bytes
 * @return 0; -EINVAL (ld->err says why); -ENOMEM.
 */
int filter_elf_check(struct filter_load *ld, const void *buf, size_t size);

/**
 * Part of stage 1 (called by filter_elf_check()): parse the object's .BTF
 * with libbpf's btf__new() alone and check every type ID and string offset
 * the types refer to, and that typedef/modifier chains end: libbpf 1.1
 * follows them unchecked when it opens an object.
 * @param[in] ld   the load (for messages)
 * @param[in] data the .BTF section, @p size bytes
 * @param[in] size bytes
 * @return 0; -EINVAL (ld->err says why); -ENOMEM.
 */
int filter_btf_check(struct filter_load *ld, const void *data, size_t size);

/**
 * Stage 2: open @p buf with libbpf (no bpf() syscall is made), then check
 * that its programs are sluice/inst and sluice/mem, once each, and that its
 * maps are supported. Sets ld->obj.
 * @return 0; -EINVAL with ld->err; -ENOMEM.
 */
int filter_libbpf_open(struct filter_load *ld, const void *buf, size_t size);

/**
 * Stage 3: make ld->f's maps and global sections (initial values copied from
 * the object) and ld->refs.
 * @return 0; -EINVAL with ld->err (over FILTER_MEMORY_MAX); -ENOMEM.
 */
int filter_build_data(struct filter_load *ld);

/**
 * Stage 4: apply --set values to ld->f's global sections, found through the
 * object's BTF (DATASEC variables).
 * @param[in] ld     the load (stage 3 done)
 * @param[in] sets   @p n_sets values, applied in order
 * @param[in] n_sets entries
 * @return 0; -EINVAL with ld->err (unknown name, bad value, unsupported type).
 */
int filter_apply_sets(struct filter_load *ld, const struct filter_set *sets, size_t n_sets);

/**
 * Stage 5: relocate the programs (libbpf's gen-loader, offline), copy them,
 * rewrite map and global references into host pointers and verify them.
 * @return 0; -EINVAL with ld->err (naming section and instruction); -ENOMEM.
 */
int filter_build_progs(struct filter_load *ld);

/**
 * Run libbpf's calls from here to filter_libbpf_capture_end() with its
 * messages kept instead of printed: the first warning, or lacking one the
 * last message of a lower level (filter_libbpf_reason() tells which). Per
 * thread.
 * @param[out] buf  where it goes, NUL-terminated
 * @param[in]  size bytes of @p buf
 */
void filter_libbpf_capture_begin(char *buf, size_t size);

/** End what filter_libbpf_capture_begin() started on this thread. */
void filter_libbpf_capture_end(void);

/**
 * Why a libbpf call made between filter_libbpf_capture_begin() and _end()
 * failed with @p rc (a negative errno): the warning it gave (in
 * @p captured, the capture's buffer), else the error and the last message
 * it gave at a lower level, written in @p out (@p size bytes). libbpf's
 * ENOENT is of a part of the object (a section, a type), not of a file:
 * said so. Returns @p captured or @p out. The same thread, after _end().
 */
const char *filter_libbpf_reason(const char *captured, int rc, char *out, size_t size);

/** The helpers filter programs may call, indexed by helper ID. */
extern const struct vm_env filter_vm_env;

#endif /* SLUICE_JITTER_FILTER_INTERNAL_H */
