/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * filter_printk.h — bpf_trace_printk (helper 6) for filters: formatting a
 * program's message safely, and the rate limit on messages.
 *
 * Threads: nothing here locks; the caller serializes (filter.c holds the
 * filter's lock for a whole run).
 */
#ifndef SLUICE_JITTER_FILTER_PRINTK_H
#define SLUICE_JITTER_FILTER_PRINTK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bpf_vm.h"

/** Conversions one message may use, as in the kernel. */
#define PRINTK_MAX_ARGS 3
/** Most messages delivered in any one-second window. */
#define PRINTK_RATE 100
/** The window, in nanoseconds of the monotonic clock. */
#define PRINTK_WINDOW_NS 1000000000ull
/** Bytes of a formatted message, NUL included; longer ones are truncated. */
#define PRINTK_MSG_MAX 512
/** Bytes of a %s argument, NUL included; longer strings are truncated. */
#define PRINTK_STR_MAX 256
/** Widest field width accepted (%64d), so a format cannot make huge output. */
#define PRINTK_WIDTH_MAX 64

/** Sliding-window rate limiter: when the last PRINTK_RATE messages went out. */
struct printk_limit {
    uint64_t stamps[PRINTK_RATE]; /**< delivery times, ns; a ring */
    unsigned next;                /**< slot of the oldest stamp once the ring is full */
    unsigned n;                   /**< stamps held, up to PRINTK_RATE */
    uint64_t dropped;             /**< messages refused so far (read atomically elsewhere) */
};

/**
 * Decide whether a message may go out at @p now_ns: yes if fewer than
 * PRINTK_RATE messages went out in the window (now - 1 s, now]. Counts a
 * refusal in @p l->dropped.
 * @param[in,out] l      the limiter
 * @param[in]     now_ns monotonic time, nanoseconds; never decreasing
 * @return true to deliver the message.
 */
bool printk_admit(struct printk_limit *l, uint64_t now_ns);

/**
 * Format a bpf_trace_printk message as the kernel does: %d %i %u %x %X with
 * an optional l or ll (none: 32 bits, l/ll: 64 bits), %c, %s, %p (printed
 * "0x" and hex), %%, with flags "0+- " and a width up to PRINTK_WIDTH_MAX;
 * printable ASCII and white space only.
 * @param[in]  run      the current run: %s arguments are read through vm_run_check()
 * @param[in]  fmt      the format, NUL-terminated (host memory the caller checked)
 * @param[in]  args     the PRINTK_MAX_ARGS arguments (r3, r4, r5)
 * @param[out] out      the message, NUL-terminated, truncated to @p out_size
 * @param[in]  out_size bytes of @p out (> 0)
 * @return the message's length in bytes; -EINVAL for a bad format (too many
 *         conversions, unknown ones, a character the kernel refuses); -EFAULT
 *         when a %s argument is not a readable string (vm_run_fault() has then
 *         been called: the run stops).
 */
int printk_format(struct vm_run *run, const char *fmt, const uint64_t args[PRINTK_MAX_ARGS],
                  char *out, size_t out_size);

#endif /* SLUICE_JITTER_FILTER_PRINTK_H */
