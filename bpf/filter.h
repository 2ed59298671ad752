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
 * Threads: loading may happen on any thread, several at once. Runs
 * (filter_run_*) happen at lift time, which QEMU serializes (mmap_lock in
 * linux-user); they are nonetheless safe from several threads at once: one
 * lock per filter lets one run at a time touch its maps and globals. Nothing
 * here writes to the trace ring: messages from bpf_trace_printk go to
 * filter_host.print.
 *
 * Maps live in the jitter's memory only: consumers cannot read them (yet).
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

/**
 * The jitter's services to helpers. Any callback may be NULL. Both are called
 * during a run, on the running thread, with the filter's lock held: they must
 * not call filter_run_*() on the same filter.
 */
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
 * Load the filter object at @p path. Any thread; makes no bpf() syscall and
 * writes nothing to stderr (libbpf's messages end up in @p err).
 * @param[in]  path    an ELF BPF object
 * @param[in]  sets    values for globals, applied in order; may be NULL if @p n_sets is 0
 * @param[in]  n_sets  entries in @p sets
 * @param[in]  host    callbacks for helpers; copied; may be NULL
 * @param[out] out     the filter, on success; NULL on failure
 * @param[out] err     one line saying what is wrong and where, on failure
 * @param[in]  err_size bytes of @p err
 * @return 0; open(2)'s or read(2)'s negative errno (-ENOENT, -EACCES, ...);
 *         -EINVAL (not a regular file of at most 64 MiB, malformed or
 *         refused object, unknown --set name, value that does not fit);
 *         -ENOMEM.
 */
int filter_open_file(const char *path, const struct filter_set *sets, size_t n_sets,
                     const struct filter_host *host, struct filter **out, char *err,
                     size_t err_size);

/**
 * As filter_open_file(), from @p size bytes at @p buf (only read, and not
 * kept after the call); @p name stands for the file in messages.
 * @param[in]  buf      the object
 * @param[in]  size     bytes at @p buf
 * @param[in]  name     for messages; NULL for "<memory>"
 * @param[in]  sets     as in filter_open_file()
 * @param[in]  n_sets   entries in @p sets
 * @param[in]  host     as in filter_open_file()
 * @param[out] out      the filter, on success; NULL on failure
 * @param[out] err      as in filter_open_file()
 * @param[in]  err_size bytes of @p err
 * @return 0; -EINVAL (malformed or refused object, bad --set), -ENOMEM.
 */
int filter_open_mem(const void *buf, size_t size, const char *name, const struct filter_set *sets,
                    size_t n_sets, const struct filter_host *host, struct filter **out, char *err,
                    size_t err_size);

/**
 * Whether the object has a `sluice/inst` program. Any thread.
 * @param[in] f the filter
 * @return true if it has.
 */
bool filter_has_inst(const struct filter *f);
/**
 * Whether the object has a `sluice/mem` program. Any thread.
 * @param[in] f the filter
 * @return true if it has.
 */
bool filter_has_mem(const struct filter *f);

/**
 * Run hook_inst on @p ctx. The program reads @p ctx (exactly its size) and
 * cannot write it. Thread-safe; blocks while another run of @p f is on.
 * @param[in,out] f     the filter (its maps and globals may change)
 * @param[in]  ctx      the instruction
 * @param[out] decision SLUICE_NEVER, SLUICE_ALWAYS or SLUICE_ONCE, on success
 * @param[out] err      the fault, on failure; may be NULL
 * @return 0; -ENOENT if there is no sluice/inst program; a vm_run() error
 *         (-EFAULT, -E2BIG, -ECANCELED, -EINVAL); -ERANGE if the int the
 *         program returned (the low 32 bits of r0) is not one of the three
 *         values (err says which value).
 */
int filter_run_inst(struct filter *f, const struct sluice_inst_ctx *ctx, int *decision,
                    struct vm_error *err);

/**
 * Run hook_mem on @p ctx, as filter_run_inst() runs hook_inst.
 * @param[in,out] f   the filter
 * @param[in]  ctx    the access site
 * @param[out] yes    1 to record the access, 0 not to, on success
 * @param[out] err    the fault, on failure; may be NULL
 * @return as filter_run_inst(); -ERANGE unless the program returned 0 or 1.
 */
int filter_run_mem(struct filter *f, const struct sluice_mem_ctx *ctx, int *yes,
                   struct vm_error *err);

/**
 * Messages bpf_trace_printk dropped by rate limiting so far. Any thread, any
 * time (a relaxed atomic read), filter_host.print included.
 * @param[in] f the filter
 * @return the count since the filter was loaded.
 */
uint64_t filter_prints_dropped(const struct filter *f);

/**
 * Free @p f, its programs, maps and globals. No run may be in progress.
 * @param[in] f the filter; NULL is a no-op
 */
void filter_free(struct filter *f);

#endif /* SLUICE_JITTER_FILTER_H */
