/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * opts.h — the jitter's configuration, from the options QEMU hands to init
 * (`-jitter PATH,key=value,...`; keys in <sluice/ctl.h>). Nothing comes
 * from the environment: the guest can read QEMU's environment
 * (/proc/self/environ), so configuration never travels there.
 *
 * Main thread, at init only.
 */
#ifndef SLUICE_JITTER_OPTS_H
#define SLUICE_JITTER_OPTS_H

#include <stddef.h>
#include <stdint.h>

#include "filter.h"

/** Most --set values a filter may get. */
#define OPTS_MAX_SETS 64

/** The jitter's configuration; strings point into opts_parse()'s copy. */
struct jitter_opts {
    int consumer_fd;                       /**< inherited consumer socket, -1 if none */
    uint64_t ring_bytes;                   /**< ring data bytes per guest thread */
    const char *filter;                    /**< filter object path, NULL = trace everything */
    const char *filter_name;               /**< the filter's name in messages (default: filter) */
    struct filter_set sets[OPTS_MAX_SETS]; /**< its --set values, in order */
    size_t n_sets;
    int per_insn; /**< encoding=insn: EXEC records only, no block table */
    int listen;   /**< listen=0: no socket for consumers to attach at run time (default 1) */
    unsigned wait_attach; /**< consumers to await on the socket before the guest starts */
    int syscalls;         /**< syscalls=1: SYSCALL and SYSRET records */
};

/**
 * Parse @p args ("key=value" items separated by ','; ",," is a literal
 * comma) into @p o. Unknown keys, bad numbers and too many sets are errors.
 * @return 0, or -EINVAL after one line on stderr naming the item.
 */
int opts_parse(const char *args, struct jitter_opts *o);

#endif /* SLUICE_JITTER_OPTS_H */
