/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * filter.h — a loaded filter object: its programs (verified, ready for the
 * filter VM), its maps and global data, and the helpers they may call.
 *
 * Loading (filter_open_*) reads the ELF object with libbpf, resolves map
 * references, global data and bpf-to-bpf calls, applies --set values to
 * globals, and verifies each program; it refuses anything it does not
 * understand with one message naming the file, the section, the instruction
 * index when there is one, and the reason.
 *
 * Threads: runs (filter_run_*) happen at lift time, which QEMU serializes
 * (mmap_lock in linux-user); they are nonetheless safe from several threads
 * at once (maps lock). Nothing here writes to the trace ring: messages from
 * bpf_trace_printk go to filter_host.print.
 */
#ifndef SLUICE_JITTER_FILTER_H
#define SLUICE_JITTER_FILTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sluice/filter.h>

#include "bpf_vm.h"

/** A loaded, verified filter object; opaque. */
struct filter;

/** The jitter's services to helpers. Any callback may be NULL. */
struct filter_host {
    /**
     * Image holding guest address @p pc (helpers 1001, 1002): fill @p out and
     * @p path (borrowed, valid until the call returns).
     * @return 0, or -ENOENT if no image holds pc.
     */
    int (*image_of)(void *user, uint64_t pc, struct sluice_image *out, const char **path);
    /** One bpf_trace_printk message, formatted and rate-limited; @p len bytes, NUL after. */
    void (*print)(void *user, const char *msg, size_t len);
    void *user; /**< passed to the callbacks */
};

/** One --set NAME=VALUE. */
struct filter_set {
    const char *name; /**< a global variable of the object */
    const char
        *value; /**< integer (decimal, 0x hex, negative), true/false, or a string for char arrays */
};

/**
 * Load the filter object at @p path.
 * @param[in]  path    an ELF BPF object
 * @param[in]  sets    values for globals, applied in order; may be NULL if @p n_sets is 0
 * @param[in]  n_sets  entries in @p sets
 * @param[in]  host    callbacks for helpers; copied; may be NULL
 * @param[out] out     the filter, on success
 * @param[out] err     one line saying what is wrong and where, on failure
 * @param[in]  err_size bytes of @p err
 * @return 0; -ENOENT/-EACCES (cannot read), -EINVAL (malformed or refused
 *         object, unknown --set name, value that does not fit), -ENOMEM.
 */
int filter_open_file(const char *path, const struct filter_set *sets, size_t n_sets,
                     const struct filter_host *host, struct filter **out, char *err,
                     size_t err_size);

/** As filter_open_file(), from @p size bytes at @p buf; @p name is used in messages. */
int filter_open_mem(const void *buf, size_t size, const char *name, const struct filter_set *sets,
                    size_t n_sets, const struct filter_host *host, struct filter **out, char *err,
                    size_t err_size);

/** Whether the object has a `sluice/inst` program. */
bool filter_has_inst(const struct filter *f);
/** Whether the object has a `sluice/mem` program. */
bool filter_has_mem(const struct filter *f);

/**
 * Run hook_inst on @p ctx.
 * @param[out] decision SLUICE_NEVER, SLUICE_ALWAYS or SLUICE_ONCE, on success
 * @param[out] err      the fault, on failure; may be NULL
 * @return 0; -ENOENT if there is no sluice/inst program; a vm_run() error
 *         (-EFAULT, -E2BIG, -ECANCELED, -EINVAL); -ERANGE if r0 is not one of
 *         the three values (err says which value).
 */
int filter_run_inst(struct filter *f, const struct sluice_inst_ctx *ctx, int *decision,
                    struct vm_error *err);

/**
 * Run hook_mem on @p ctx.
 * @param[out] yes 1 to record the access, 0 not to, on success
 * @return as filter_run_inst(); -ERANGE unless r0 is 0 or 1.
 */
int filter_run_mem(struct filter *f, const struct sluice_mem_ctx *ctx, int *yes,
                   struct vm_error *err);

/** Messages bpf_trace_printk dropped by rate limiting so far. */
uint64_t filter_prints_dropped(const struct filter *f);

/** Free @p f and its maps. NULL is a no-op. */
void filter_free(struct filter *f);

#endif /* SLUICE_JITTER_FILTER_H */
