/* SPDX-License-Identifier: GPL-2.0-or-later */
/**
 * @file tools.h
 * @brief The analyses `sluice run --tool T` can run; each is also a small
 *        example of the libsluice API.
 */
#ifndef SLUICE_TOOLS_H
#define SLUICE_TOOLS_H

#include <stdio.h>
#include <sys/resource.h>

#include "sluice/consumer.h"
/* say(): the tools' messages on stderr, one line each whatever paths they name. */
#include "../say.h"

/** `--tool dump`'s options. */
enum tool_dump_flags {
    TOOL_DUMP_RAW = 1,  /**< --raw: one line per event for scripts */
    TOOL_DUMP_MAPS = 2, /**< --maps (with --raw): mapping events, each EXEC's file and offset */
    TOOL_DUMP_NO_SYMBOLS = 4, /**< --no-symbols: no module!symbol+offset */
    TOOL_DUMP_NO_DISASM = 8,  /**< --no-disasm: no disassembly */
    TOOL_DUMP_LINES = 16,     /**< --lines: file:line from DWARF line info */
};

/** What the command gives a tool. */
struct tool_env {
    FILE *out;           /**< where the tool writes (-o FILE, else stderr) */
    int json;            /**< --json */
    unsigned dump;       /**< dump's options: enum tool_dump_flags */
    const char *name;    /**< what out is, for messages: FILE, or "stderr" */
    const char *record;  /**< the trace file the session records into (--record), or NULL */
    int tool_out_none;   /**< the tool writes nothing while the trace runs (stderr is free for a
                            status line) */
    int out_failed_said; /**< the tool said a write to `out` failed (nothing more is said of it
                            when `out` is closed); set on the ordering thread, read after */
    struct rusage qemu_usage; /**< QEMU's resource use (and its reaped children's), set before
                                 report() */
    int qemu_known;           /**< qemu_usage is set: `run` (attach and report have no QEMU
                                 child to measure) */
};

/** Write @p s as a JSON string, quotes included; bytes outside printable ASCII as \\u00XX. */
void tool_json_str(FILE *f, const char *s);

/**
 * Write `"error": null`, or `"error": "..."` when @p error is a non-empty
 * string (the session's first error: the output is not the whole trace).
 */
void tool_json_error(FILE *f, const char *error);

/**
 * Write `"rusage": {"qemu": {...}, "consumer": {...}}` (no braces around
 * it) to @p f: user and system CPU seconds and peak RSS in KiB of the guest's
 * QEMU (env->qemu_usage; null unless env->qemu_known) and of this process
 * (getrusage RUSAGE_SELF). For
 * the tools' --json output; main thread, after the session.
 */
void tool_json_rusage(FILE *f, const struct tool_env *env);

/** One tool. Both functions run on the command's main thread. */
struct tool {
    const char *name;
    /** Fill @p cb (zeroed, sz set) before the session starts; @p env outlives the session. */
    void (*setup)(struct tool_env *env, struct sluice_callbacks *cb);
    /**
     * After the session ran: write the result.
     * @param seconds wall time of the trace
     * @return 0, or -1 after printing why on stderr.
     */
    int (*report)(struct tool_env *env, struct sluice_session *s, double seconds);
    /**
     * Its output (without --json or --raw) is a report for people, where the
     * command's notes on the run (a killed guest, say) belong; else they go
     * to stderr, not into a file or stream that scripts and other tools read.
     */
    int for_people;
};

/** `dump`: one text line per event, in per-thread program order. */
extern const struct tool tool_dump;
/** `cov`: the translated blocks that ran, as a drcov file (-o FILE). */
extern const struct tool tool_cov;
/** `stats`: per-thread counts and rates (table, or one JSON line). */
extern const struct tool tool_stats;
/** `pcsum`: an order-sensitive checksum of each thread's PCs, through `exec` (one item per PC). */
extern const struct tool tool_pcsum;
/** `record`: only the trace file (--tool record -o TRACE), and one line saying what it holds. */
extern const struct tool tool_record;
/** `pcsum-batch`: the same checksum, through `exec_batch` (one item per run of PCs). */
extern const struct tool tool_pcsum_batch;

#endif /* SLUICE_TOOLS_H */
