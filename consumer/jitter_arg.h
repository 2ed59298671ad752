/* SPDX-License-Identifier: GPL-2.0-or-later */
/**
 * @file jitter_arg.h
 * @brief The argument of QEMU's `-jitter`: the jitter's path and its options
 *        (keys SLUICE_OPT_* in sluice/ctl.h; parsed by jitter/opts.c).
 *
 * Main thread of the `sluice` command, before QEMU starts. The options go on
 * QEMU's command line, never in its environment: the guest reads QEMU's
 * environment (/proc/self/environ), but sees only its own argv.
 */
#ifndef SLUICE_JITTER_ARG_H
#define SLUICE_JITTER_ARG_H

#include <stddef.h>
#include <stdint.h>

/** What `sluice run` tells the jitter. */
struct jitter_arg {
    const char *jitter;      /**< the jitter library's path (no ',') */
    int consumer_fd;         /**< the consumer socket QEMU inherits */
    uint64_t ring_bytes;     /**< ring data bytes per guest thread */
    const char *filter;      /**< absolute path of the filter object, or NULL */
    const char *filter_name; /**< the filter as the user named it, or NULL */
    const char *const *sets; /**< its --set values, "NAME=VALUE" */
    size_t n_sets;
    const char *encoding; /**< SLUICE_OPT_ENCODING's value, or NULL for the jitter's default */
    unsigned wait_attach; /**< SLUICE_OPT_WAIT_ATTACH: consumers to await (0: none) */
    int syscalls;         /**< SLUICE_OPT_SYSCALLS=1: syscall events */
};

/**
 * Build "PATH,consumer_fd=N,ring_bytes=N[,filter=F,filter_name=F][,set=S]...",
 * each ',' inside a value doubled.
 * @return a malloc'ed string (the caller frees it), or NULL with errno set
 *         (EINVAL: the jitter's path holds a ',').
 */
char *jitter_arg_format(const struct jitter_arg *a);

#endif /* SLUICE_JITTER_ARG_H */
