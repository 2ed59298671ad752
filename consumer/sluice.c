/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * sluice.c — the `sluice` command.
 *
 *   sluice run [--filter F] [--set NAME=VALUE]... [--tool T] [DUMP OPTIONS] [--json]
 *              [-o FILE] [--workers N] [--wait-attach N] [--syscalls] -- PROGRAM [ARGS]
 *   sluice attach PID [--tool T] [DUMP OPTIONS] [--json] [-o FILE] [--workers N] [--lossy]
 *   sluice report TRACE [--tool T] [DUMP OPTIONS] [--json] [-o FILE] [--workers N]
 *   sluice ls [--json]
 * (run and attach also take --record TRACE, or --tool record -o TRACE).
 *
 * Main thread: parses arguments, finds qemu-<arch> and the jitter, checks
 * what QEMU would fail on (precheck.h), attaches a libsluice session to one
 * end of a socketpair, starts QEMU with the other end, runs the session, then
 * ends the way the guest ended. Setup errors are one line on stderr and exit
 * status 2, and so is a QEMU that dies before tracing starts (no report); the
 * guest's stdin/stdout/stderr are never touched (tool output goes to -o FILE,
 * else stderr).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "filter_arg.h"
#include "jitter_arg.h"
#include "launch.h"
#include "precheck.h"
#include "sluice/ctl.h"
#include "sluice/record.h"
#include "progress.h"
#include "say.h"
#include "sluice/consumer.h"
#include "tools/tools.h"

#ifndef SLUICE_QEMU_DIR_DEFAULT
#define SLUICE_QEMU_DIR_DEFAULT ""
#endif
#ifndef SLUICE_JITTER_DEFAULT
#define SLUICE_JITTER_DEFAULT ""
#endif

struct run_args {
    const struct tool *tool;
    int json;
    unsigned dump; /* enum tool_dump_flags: --raw, --maps, --no-symbols, --no-disasm, --lines */
    const char *out;
    unsigned workers;
    unsigned wait_attach; /* run --wait-attach N */
    int lossy;            /* attach --lossy */
    int syscalls;         /* run --syscalls */
    const char *record;   /* run, attach: --record TRACE (or --tool record -o TRACE) */
    int uncompressed;     /* run, attach: --uncompressed (the recording's chunks as they are) */
    const char *trace;    /* report TRACE */
    uint32_t tids[64];    /* report --tid LIST */
    size_t n_tids;
    uint64_t skip, count; /* report --skip N --count M */
    int skip_given, count_given;
    uint32_t pid; /* attach PID */
    char **prog;  /* PROGRAM ARGS..., NULL-terminated (argv's tail) */
    struct filter_arg filter;
};

static void usage(FILE *f)
{
    fprintf(f, "usage: sluice run [--filter F] [--set NAME=VALUE]... [--tool T] [DUMP OPTIONS]\n"
               "                  [--json] [-o FILE] [--record TRACE] [--uncompressed]\n"
               "                  [--workers N] [--wait-attach N] [--syscalls] -- PROGRAM ...\n"
               "       sluice attach PID [--tool T] [DUMP OPTIONS] [--json] [-o FILE]\n"
               "                  [--record TRACE] [--uncompressed] [--workers N] [--lossy]\n"
               "       sluice report TRACE [--tool T] [DUMP OPTIONS] [--json] [-o FILE]\n"
               "                  [--workers N] [--tid TID[,TID...]] [--skip N] [--count N]\n"
               "       sluice ls [--json]\n"
               "  --filter F   decide what to trace with a BPF filter: F.bpf.o (clang -O2 -g\n"
               "               -target bpf), or F.c, compiled with clang (see filters/)\n"
               "  --set N=V    set the filter's global N (a const volatile knob) to V\n"
               "  --tool T     analysis: stats (default; counts per thread), dump (each\n"
               "               instruction as it ran: pc, module!symbol+offset, disassembly,\n"
               "               its memory accesses under it, the guest's mapping changes),\n"
               "               pcsum (an order-sensitive checksum of each thread's PCs, one\n"
               "               callback per PC), pcsum-batch (the same sum, PCs taken in\n"
               "               runs) or cov (the blocks that ran, as a drcov file for\n"
               "               Lighthouse: -o FILE), or record (-o TRACE: keep the trace in a\n"
               "               file for `sluice report`)\n"
               "  --record TRACE  also keep the trace in file TRACE (zstd-compressed chunks),\n"
               "               for `sluice report TRACE --tool T` to analyse again\n"
               "  --uncompressed  record the chunks as the rings held them: about 6 times\n"
               "               larger on full traces, but written faster\n"
               "  --json       stats or pcsum as one JSON object on one line\n"
               "  --syscalls   also record each syscall's entry (number, arguments) and\n"
               "               return (its value): dump prints them\n"
               "  dump options: --no-symbols, --no-disasm (faster), --lines (file:line from\n"
               "               DWARF); --raw: one line per event for scripts (documented in\n"
               "               the README), with --maps its mapping changes and each\n"
               "               instruction's file and file offset\n"
               "  -o FILE      write the tool's output to FILE (default: stderr; -: stdout)\n"
               "  --workers N  decoding threads (default: online CPUs)\n"
               "  --wait-attach N  hold the guest before its first instruction until N more\n"
               "               consumers attached with `sluice attach` (0 to 15)\n"
               "attach: run the tool on a traced process (one that `sluice run` or QEMU's\n"
               "  -jitter started) from now until it ends, or until SIGINT/SIGTERM/SIGHUP\n"
               "  detach it (a second one ends sluice at once); the guest waits for it as\n"
               "  for `run`'s own tool (lossless), or, with --lossy, never: what it misses\n"
               "  is counted exactly (LOST events)\n"
               "report: run the tool on a recorded trace file as it ran live: the same\n"
               "  events in the same per-thread order (symbols and disassembly are read from\n"
               "  the files now at the recorded paths); --tid: only those threads (the\n"
               "  others' chunks are not read); --skip N, --count N: of each thread, only\n"
               "  instructions N.. (0 is its first) and their events; the file's index\n"
               "  finds where, so what comes before is not read\n"
               "ls: this user's traced processes, one line each: pid, arch, program, threads,\n"
               "  consumers (lossless among them), events lost by lossy ones\n"
               "environment: SLUICE_QEMU_DIR (holds bin/qemu-<arch>), SLUICE_JITTER (the jitter\n"
               "  library), SLUICE_RING_BYTES (ring per guest thread: a power of two, 256 KiB to\n"
               "  1 GiB, default 16 MiB), SLUICE_ENCODING (block, the default: one record per\n"
               "  translated block; insn: one per instruction; the same events either way)\n");
}

/* One line: the cause, and where the usage is (it would push the cause off the screen). */
static int usage_error(const char *fmt, const char *arg)
{
    char line[512]; /* @p fmt is one of ours */

    snprintf(line, sizeof(line), "sluice: %s (sluice --help shows the usage)\n", fmt);
    say(line, arg);
    return 2;
}

/* Whether --set values @p a and @p b set the same name (what comes before '='). */
static int same_set_name(const char *a, const char *b)
{
    size_t n = strcspn(a, "=");

    /* without '=' neither is a setting: filter_arg_prepare() says what is wrong */
    return a[n] && n == strcspn(b, "=") && b[n] && strncmp(a, b, n) == 0;
}

/* The value of option argv[*i] ("--opt V" or "--opt=V"), or NULL. */
static const char *opt_value(int argc, char **argv, int *i, const char *name)
{
    size_t n = strlen(name);

    if (strncmp(argv[*i], name, n) != 0) {
        return NULL;
    }
    if (argv[*i][n] == '=') {
        return argv[*i] + n + 1;
    }
    if (argv[*i][n] == '\0' && *i + 1 < argc) {
        return argv[++*i];
    }
    return NULL;
}

/* The enum tool_dump_flags bit of a dump option, or 0. */
static unsigned dump_flag(const char *arg)
{
    static const struct {
        const char *name;
        unsigned flag;
    } flags[] = {
        {"--raw", TOOL_DUMP_RAW},
        {"--maps", TOOL_DUMP_MAPS},
        {"--no-symbols", TOOL_DUMP_NO_SYMBOLS},
        {"--no-disasm", TOOL_DUMP_NO_DISASM},
        {"--lines", TOOL_DUMP_LINES},
    };
    size_t i;

    for (i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
        if (strcmp(arg, flags[i].name) == 0) {
            return flags[i].flag;
        }
    }
    return 0;
}

static const struct tool *find_tool(const char *name)
{
    if (strcmp(name, "dump") == 0) {
        return &tool_dump;
    }
    if (strcmp(name, "stats") == 0) {
        return &tool_stats;
    }
    if (strcmp(name, "pcsum") == 0) {
        return &tool_pcsum;
    }
    if (strcmp(name, "pcsum-batch") == 0) {
        return &tool_pcsum_batch;
    }
    if (strcmp(name, "cov") == 0) {
        return &tool_cov;
    }
    if (strcmp(name, "record") == 0) {
        return &tool_record;
    }
    return NULL;
}

/* A whole number from @p lo to @p hi in @p v, or -1. */
static long number(const char *v, long lo, long hi)
{
    char *end;
    long n;

    if (v[0] < '0' || v[0] > '9') {
        return -1; /* (strtol would take a sign or spaces: " 2" but not "2 ") */
    }
    errno = 0;
    n = strtol(v, &end, 10);
    return errno || *end || n < lo || n > hi ? -1 : n;
}

/* report --tid LIST: comma-separated tids into a->tids. 0, or the exit status (usage said). */
static int parse_tids(const char *v, struct run_args *a)
{
    char buf[1024], *tok, *save = NULL;
    long n;

    if (strlen(v) >= sizeof(buf) || !v[0]) {
        return usage_error("--tid wants thread ids, as 1234 or 1234,1240: not '%s'", v);
    }
    if (v[0] == ',' || v[strlen(v) - 1] == ',' || strstr(v, ",,")) {
        return usage_error("--tid wants thread ids, as 1234 or 1234,1240: not '%s'", v);
    }
    strcpy(buf, v);
    for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if ((n = number(tok, 1, UINT32_MAX)) < 0) {
            return usage_error("--tid wants thread ids, as 1234 or 1234,1240: not '%s'", v);
        }
        if (a->n_tids == sizeof(a->tids) / sizeof(a->tids[0])) {
            return usage_error("%s", "--tid takes at most 64 threads");
        }
        a->tids[a->n_tids++] = (uint32_t)n;
    }
    return 0;
}

/* A count of instructions: decimal digits, 0 to 2^63 - 1. -1 if @p v is none. */
static int insn_count(const char *v, uint64_t *out)
{
    char *end;

    if (v[0] < '0' || v[0] > '9') {
        return -1; /* (strtoull would take a sign or spaces) */
    }
    errno = 0;
    *out = strtoull(v, &end, 10);
    return errno || *end || *out > INT64_MAX ? -1 : 0;
}

/* Which command's arguments parse_args() reads. */
enum mode { MODE_RUN, MODE_ATTACH, MODE_REPORT };

/*
 * Parse the arguments of `run` (options, then PROGRAM ARGS), `attach`
 * (options and one PID, in any order; no filter: the process has its own)
 * or `report` (options and one TRACE). Returns -1 to go on, else an exit
 * status.
 */
static int parse_args(int argc, char **argv, struct run_args *a, enum mode mode)
{
    int attach = mode != MODE_RUN, report = mode == MODE_REPORT;
    const char *pid = NULL, *tool = NULL;
    int i;

    memset(a, 0, sizeof(*a));
    a->tool = &tool_stats;
    for (i = 2; i < argc; i++) {
        unsigned flag;
        const char *v;
        long n;

        if (!attach && (strcmp(argv[i], "--") == 0 || argv[i][0] != '-')) {
            i += strcmp(argv[i], "--") == 0;
            break;
        } else if (attach && argv[i][0] != '-' && !pid) {
            pid = argv[i]; /* report: the trace file */
        } else if (attach && argv[i][0] != '-') {
            return usage_error(report ? "report reads one trace file: what is '%s'?"
                                      : "attach takes one pid: what is '%s'?",
                               argv[i]);
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--json") == 0) {
            a->json = 1;
        } else if ((flag = dump_flag(argv[i]))) {
            a->dump |= flag;
        } else if (mode == MODE_ATTACH && strcmp(argv[i], "--lossy") == 0) {
            a->lossy = 1;
        } else if (!report && (v = opt_value(argc, argv, &i, "--record"))) {
            if (v[0] == '-' || !v[0]) {
                return usage_error("--record wants a file name, not '%s'", v);
            }
            if (a->record) {
                return usage_error("--record given twice (the second: '%s')", v);
            }
            a->record = v;
        } else if (!report && strcmp(argv[i], "--uncompressed") == 0) {
            if (a->uncompressed) {
                return usage_error("%s", "--uncompressed given twice");
            }
            a->uncompressed = 1;
        } else if (strcmp(argv[i], "--syscalls") == 0) {
            if (report) {
                return usage_error("%s", "--syscalls goes with run: report has them when the "
                                         "recorded run had it");
            }
            if (attach) {
                return usage_error("%s",
                                   "--syscalls goes with run (the guest records them from its "
                                   "start): attach gets them when run had it");
            }
            a->syscalls = 1;
        } else if ((v = opt_value(argc, argv, &i, "--tool"))) {
            if (tool) {
                return usage_error("--tool given twice (the second: '%s')", v);
            }
            tool = v;
            if (!(a->tool = find_tool(v)) || (report && a->tool == &tool_record)) {
                return usage_error(a->tool ? "'%s' goes with run and attach: report reads a "
                                             "recording"
                                           : "unknown tool '%s'",
                                   v);
            }
        } else if (!attach && (v = opt_value(argc, argv, &i, "--filter"))) {
            if (a->filter.path) {
                return usage_error("--filter given twice (the second: '%s')", v);
            }
            a->filter.path = v;
        } else if (!attach && (v = opt_value(argc, argv, &i, "--set"))) {
            if (a->filter.n_sets == sizeof(a->filter.sets) / sizeof(a->filter.sets[0])) {
                return usage_error("%s", "at most 64 --set options");
            }
            for (size_t k = 0; k < a->filter.n_sets; k++) {
                if (same_set_name(a->filter.sets[k], v)) {
                    char twice[512];

                    snprintf(twice, sizeof(twice), "--set %.*s given twice ('%s', then '%s')",
                             (int)strcspn(v, "="), v, a->filter.sets[k], v);
                    return usage_error("%s", twice);
                }
            }
            a->filter.sets[a->filter.n_sets++] = v;
        } else if ((v = opt_value(argc, argv, &i, "-o"))) {
            if (a->out) {
                return usage_error("-o given twice (the second: '%s')", v);
            }
            a->out = v;
        } else if (report && (v = opt_value(argc, argv, &i, "--skip"))) {
            if (a->skip_given++) {
                return usage_error("--skip given twice (the second: '%s')", v);
            }
            if (insn_count(v, &a->skip) < 0) {
                return usage_error("--skip wants a number of instructions (0 to 2^63 - 1), "
                                   "not '%s'",
                                   v);
            }
        } else if (report && (v = opt_value(argc, argv, &i, "--count"))) {
            if (a->count_given++) {
                return usage_error("--count given twice (the second: '%s')", v);
            }
            if (insn_count(v, &a->count) < 0 || a->count == 0) {
                return usage_error("--count wants a number of instructions (1 to 2^63 - 1), "
                                   "not '%s'",
                                   v);
            }
        } else if (!report && (!strcmp(argv[i], "--skip") || !strcmp(argv[i], "--count") ||
                               !strcmp(argv[i], "--tid"))) {
            return usage_error("%s goes with report (a recorded trace)", argv[i]);
        } else if (report && (v = opt_value(argc, argv, &i, "--tid"))) {
            if (parse_tids(v, a) != 0) {
                return 2;
            }
        } else if ((v = opt_value(argc, argv, &i, "--workers"))) {
            if (a->workers) {
                return usage_error("--workers given twice (the second: '%s')", v);
            }
            if ((n = number(v, 1, 1024)) < 0) {
                return usage_error("--workers wants a number from 1 to 1024, not '%s'", v);
            }
            a->workers = (unsigned)n;
        } else if (!attach && (v = opt_value(argc, argv, &i, "--wait-attach"))) {
            if ((n = number(v, 0, SLUICE_MAX_CONSUMERS - 1)) < 0) {
                return usage_error("--wait-attach wants a number from 0 to 15, not '%s'", v);
            }
            a->wait_attach = (unsigned)n;
        } else {
            return usage_error("unknown or incomplete option '%s'", argv[i]);
        }
    }
    if (a->json && (a->tool == &tool_dump || a->tool == &tool_cov || a->tool == &tool_record)) {
        return usage_error("%s", "--json goes with --tool stats, pcsum or pcsum-batch");
    }
    if (a->dump && a->tool != &tool_dump) {
        return usage_error("%s", "--raw, --maps, --no-symbols, --no-disasm and --lines go with "
                                 "--tool dump");
    }
    if ((a->dump & TOOL_DUMP_MAPS) && !(a->dump & TOOL_DUMP_RAW)) {
        return usage_error("%s", "--maps goes with --raw (dump for people shows the mappings "
                                 "anyway)");
    }
    if ((a->dump & TOOL_DUMP_RAW) &&
        (a->dump & (TOOL_DUMP_NO_SYMBOLS | TOOL_DUMP_NO_DISASM | TOOL_DUMP_LINES))) {
        return usage_error("%s", "--no-symbols, --no-disasm and --lines go with dump for people, "
                                 "not --raw");
    }
    if (a->tool == &tool_cov && !a->out) {
        return usage_error("%s", "--tool cov writes a binary drcov file: give it -o FILE");
    }
    if (a->tool == &tool_record) {
        if (!a->out || a->record || strcmp(a->out, "-") == 0) {
            return usage_error("%s", "--tool record writes the trace file -o TRACE (or give "
                                     "another tool --record TRACE)");
        }
        a->record = a->out; /* the trace file, not the tool's text output */
        a->out = NULL;
    }
    if (a->uncompressed && !a->record) {
        return usage_error("%s", "--uncompressed goes with --record TRACE or --tool record");
    }
    if (report) {
        if (!pid) {
            return usage_error("%s", "report wants a trace file (made by --record)");
        }
        a->trace = pid;
        return -1;
    }
    if (attach) {
        long n = pid ? number(pid, 1, INT32_MAX) : -1;

        if (n < 0) {
            return usage_error("attach wants the pid of a traced process, not '%s'",
                               pid ? pid : "nothing");
        }
        a->pid = (uint32_t)n;
        return -1;
    }
    if (i >= argc) {
        return usage_error("%s", "run: no PROGRAM given");
    }
    a->prog = argv + i;
    return -1;
}

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Everything `sluice run` needs to know before it starts anything. */
struct run_paths {
    char prog[PATH_MAX];
    char qemu[PATH_MAX];
    char jitter[PATH_MAX];
    uint64_t ring_bytes;
    const char *encoding; /* SLUICE_ENCODING, or NULL */
};

static int resolve(const struct run_args *a, struct run_paths *p)
{
    char err[4 * PATH_MAX], interp[PATH_MAX], ld_prefix[PATH_MAX];
    const char *arch;

    const char *ring_bytes = getenv(SLUICE_RING_BYTES_ENV);

    if (sluice_ring_bytes_parse(ring_bytes, &p->ring_bytes) < 0) {
        fprintf(
            stderr,
            "sluice: %s=%s: need a power of two from %llu to %llu bytes (or with K, M, G: 16M)\n",
            SLUICE_RING_BYTES_ENV, ring_bytes, SLUICE_RING_BYTES_MIN, SLUICE_RING_BYTES_MAX);
        return -1;
    }
    p->encoding = getenv(SLUICE_ENCODING_ENV);
    if (p->encoding && !*p->encoding) {
        p->encoding = NULL; /* set empty: unset, as an empty SLUICE_RING_BYTES is */
    }
    if (p->encoding && strcmp(p->encoding, "block") != 0 && strcmp(p->encoding, "insn") != 0) {
        say("sluice: %s=%s: want block (the default) or insn\n", SLUICE_ENCODING_ENV, p->encoding);
        return -1;
    }
    /* What QEMU would fail on once started is checked here, so that it fails
     * first, in one line: the program, QEMU, the interpreter, the jitter. */
    if (launch_find_program(a->prog[0], p->prog, sizeof(p->prog), err, sizeof(err)) ||
        !(arch = launch_elf_arch(p->prog, err, sizeof(err))) ||
        precheck_program(p->prog, interp, sizeof(interp), err, sizeof(err)) ||
        launch_qemu_path(arch, SLUICE_QEMU_DIR_DEFAULT, p->qemu, sizeof(p->qemu), err,
                         sizeof(err)) ||
        precheck_qemu(p->qemu, ld_prefix, sizeof(ld_prefix), err, sizeof(err)) ||
        precheck_interp(p->prog, arch, interp, ld_prefix, err, sizeof(err)) ||
        launch_jitter_path(SLUICE_JITTER_DEFAULT, p->jitter, sizeof(p->jitter), err, sizeof(err)) ||
        precheck_jitter(p->jitter, err, sizeof(err))) {
        say("sluice: %s\n", err);
        return -1;
    }
    return 0;
}

/* " (ulimit -n)" after an error that means this process is out of descriptors. */
static const char *nofile_hint(int err)
{
    return err == EMFILE ? " (ulimit -n)" : "";
}

/*
 * -o FILE is opened without emptying it, and emptied when output may first
 * come: the session's first `thread` call (the tools write in their
 * ordering-thread callbacks and their report), or the report. So a command
 * refused once the file is open (no such process, not a trace file, a guest
 * that never started) leaves it as it was, or removes it if it made it.
 * Main thread; the ordering thread's `thread` callback while the session
 * runs (never both at once: the session's run returns after its last call).
 */
static struct {
    int fd;                  /* -o FILE's descriptor, or -1 */
    int pending;             /* not emptied yet */
    int created;             /* made by this command */
    const char *path;        /* -o FILE */
    const char *record_made; /* the trace file (--record), if this command made it */
    void (*thread)(void *, const struct sluice_thread_info *, int); /* the tool's */
} out_file = {.fd = -1};

/* Empty -o FILE if it is not yet (a regular file: a FIFO or a device has nothing to empty). */
static void output_begin(void)
{
    struct stat st;

    if (!out_file.pending) {
        return;
    }
    out_file.pending = 0;
    if (fstat(out_file.fd, &st) == 0 && S_ISREG(st.st_mode) && ftruncate(out_file.fd, 0) != 0) {
        say("sluice: %s: cannot empty it: %s\n", out_file.path, strerror(errno));
    }
}

/* The tool's `thread` callback, behind output_begin(). Ordering thread. */
static void output_thread(void *user, const struct sluice_thread_info *t, int started)
{
    output_begin();
    if (out_file.thread) {
        out_file.thread(user, t, started);
    }
}

/* Have -o FILE emptied at the session's first `thread` call (after the tool's setup). */
static void output_watch(struct sluice_callbacks *cb)
{
    if (out_file.pending) {
        out_file.thread = cb->thread;
        cb->thread = output_thread;
    }
}

/* A command refused after the tool's output was opened: close it, -o FILE as it was (or
 * removed, if this command made it and wrote nothing), and a trace file it made removed. */
static void output_abandon(struct tool_env *env)
{
    if (env->out != stderr) {
        fclose(env->out);
        env->out = stderr;
    }
    if (out_file.pending && out_file.created) {
        unlink(out_file.path);
    }
    if (out_file.record_made) {
        unlink(out_file.record_made); /* nothing was traced into it */
    }
    out_file.pending = 0;
}

/* Create the session on sv[0] and start QEMU on sv[1]. Returns the pid or -1. */
static pid_t start(const struct run_args *a, const struct run_paths *p, struct tool_env *env,
                   struct sluice_session **sp)
{
    struct sluice_callbacks cb = {.sz = sizeof(cb)};
    struct sluice_consumer_opts opts = {.sz = sizeof(opts),
                                        .workers = a->workers,
                                        .record = a->record,
                                        .record_uncompressed = a->uncompressed};
    char err[256], *jarg;
    int sv[2];
    pid_t pid;

    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        say("sluice: socketpair: %s%s\n", strerror(errno), nofile_hint(errno));
        return -1;
    }
    a->tool->setup(env, &cb);
    output_watch(&cb);
    *sp = sluice_session__new(sv[0], &cb, &opts); /* sends HELLO now */
    if (!*sp && a->record) {
        say("sluice: starting the consumer, recording to %s: %s%s\n", a->record,
            errno == EBUSY ? "another sluice is recording into it" : strerror(errno),
            nofile_hint(errno));
    } else if (!*sp) {
        say("sluice: starting the consumer: %s%s\n", strerror(errno), nofile_hint(errno));
    }
    if (!*sp) {
        close(sv[1]);
        return -1;
    }
    jarg = jitter_arg_format(&(struct jitter_arg){
        .jitter = p->jitter,
        .consumer_fd = sv[1],
        .ring_bytes = p->ring_bytes,
        .filter = a->filter.object[0] ? a->filter.object : NULL,
        .filter_name = a->filter.path,
        .sets = a->filter.sets,
        .n_sets = a->filter.n_sets,
        .encoding = p->encoding,
        .wait_attach = a->wait_attach,
        .syscalls = a->syscalls,
    });
    if (!jarg) {
        say("sluice: %s: %s\n", p->jitter,
            errno == EINVAL ? "a jitter path cannot hold ','" : strerror(errno));
        close(sv[1]);
        return -1;
    }
    pid = launch_spawn(p->qemu, jarg, p->prog, a->prog[0], a->prog + 1, sv[1], err, sizeof(err));
    free(jarg);
    close(sv[1]); /* QEMU's end: its EOF must come from QEMU alone */
    if (pid < 0) {
        say("sluice: %s\n", err);
    }
    return pid;
}

/* Every error of session @p s, one line each after @p prefix: each thread a
 * damaged trace file stopped, say, is named, not only the first. */
static void say_errors(const char *prefix, const struct sluice_session *s)
{
    const char *msgs[16];
    size_t n = sluice_session__errors(s, msgs, 16);

    if (n == 0) {
        say("%s%s\n", prefix, sluice_session__error(s));
    }
    for (size_t i = 0; i < n && i < 16; i++) {
        say("%s%s\n", prefix, msgs[i]);
    }
    if (n > 16) {
        say("%s%zu more errors\n", prefix, n - 16);
    }
}

/* Say so when the guest did not end by itself: the report covers what ran until then. */
static void report_unclosed(FILE *out, const struct sluice_session *s, int status)
{
    /* On stderr the note shares a stream with the guest's own messages. */
    const char *who = out == stderr ? "sluice: " : "";
    uint64_t bytes;
    size_t n = sluice_session__salvaged(s, &bytes);

    if (n > 0 && status != -1 && WIFSIGNALED(status)) {
        /* Killed in the kernel, unseen by QEMU (SIGKILL, SIGTERM...): no thread exited. */
        fprintf(out,
                "%sguest killed by SIG%s: %zu thread%s did not exit (killed by it, or ended "
                "earlier by an execve); %llu bytes of records written after their last publish "
                "were recovered\n",
                who, sigabbrev_np(WTERMSIG(status)) ? sigabbrev_np(WTERMSIG(status)) : "?", n,
                n == 1 ? "" : "s", (unsigned long long)bytes);
    } else if (n > 0) { /* (a trace file or an attach has no wait status: killed or not) */
        fprintf(out,
                "%s%zu thread%s ended without exiting (killed, or ended by an execve); %llu bytes "
                "of records written after their last publish were recovered\n",
                who, n, n == 1 ? "" : "s", (unsigned long long)bytes);
    }
}

/* Where the command's notes on the run go: with the tool's report if that is for people (and
 * it can still be written). */
static FILE *notes_out(const struct run_args *a, const struct tool_env *env)
{
    return a->tool->for_people && !env->json && !(env->dump & TOOL_DUMP_RAW) &&
                   !env->out_failed_said
               ? env->out
               : stderr;
}

/* Whether the guest's QEMU (wait status @p status) ended well. */
static int exited_0(int status)
{
    return status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* A whole run in which the filter selected no instruction and no access: most
 * often a knob set wrong (an address range the code is not in), so say so;
 * not when threads went untraced (session @p s's errors say why). */
static void report_nothing_selected(const struct run_args *a, const struct sluice_counts *t,
                                    const struct sluice_session *s)
{
    if (a->filter.path && t->insns == 0 && t->loads == 0 && t->stores == 0 && t->lost == 0 &&
        sluice_session__errors(s, NULL, 0) == 0) {
        say("sluice: the filter %s selected nothing: no instruction and no access of the "
            "guest was traced (are its --set values right?)\n",
            a->filter.path);
    }
}

/* No guest thread was ever traced and something failed: say what, in one
 * line (QEMU's own message, if any, is above it). */
static void report_not_started(int status, const struct sluice_session *s)
{
    struct rlimit as;
    char hint[128] = "";

    /* QEMU's own "Cannot allocate memory" does not say why: the jitter's 1.1 GiB. */
    if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
        snprintf(hint, sizeof(hint),
                 "; under ulimit -v of %llu MiB: the jitter needs about 1.1 GiB of address "
                 "space beside QEMU's",
                 (unsigned long long)(as.rlim_cur >> 20));
    }
    if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) != 0) {
        say("sluice: QEMU exited with status %d before tracing started (its message is "
            "above%s)\n",
            WEXITSTATUS(status), hint);
    } else if (status != -1 && WIFSIGNALED(status)) {
        say("sluice: QEMU was killed by SIG%s before tracing started\n",
            sigabbrev_np(WTERMSIG(status)) ? sigabbrev_np(WTERMSIG(status)) : "?");
    } else if (status == -1) {
        say("sluice: QEMU ended before tracing started (its status is unknown)\n");
    } else { /* exited 0, yet the jitter never took us in (or failed us first) */
        say("sluice: nothing was traced: %s; QEMU exited with status 0 (the "
            "guest, if it ran, ran untraced)\n",
            sluice_session__error(s));
    }
}

/* Whether @p path and @p st (a stat() of another path) name one file. */
static int same_file(const char *path, const struct stat *st)
{
    struct stat o;

    return path && stat(path, &o) == 0 && o.st_dev == st->st_dev && o.st_ino == st->st_ino;
}

/* Whether process @p pid has the file @p st mapped (/proc/PID/maps: its device and inode). */
static int mapped_by(uint32_t pid, const struct stat *st)
{
    char path[64], line[4352];
    unsigned major, minor;
    unsigned long long ino;
    int found = 0;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%u/maps", pid);
    if (!(f = fopen(path, "re"))) {
        return 0;
    }
    while (!found && fgets(line, sizeof(line), f)) {
        found = sscanf(line, "%*s %*s %*s %x:%x %llu", &major, &minor, &ino) == 3 && ino &&
                makedev(major, minor) == st->st_dev && ino == (unsigned long long)st->st_ino;
    }
    fclose(f);
    return found;
}

/* Whether a recording holds the lock on the regular file at @p path (tf_writer__open's). */
static int being_recorded(const char *path)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC), busy;

    if (fd < 0) {
        return 0;
    }
    busy = flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK;
    close(fd);
    return busy;
}

/*
 * What the existing regular file at @p path is that sluice must not write:
 * a file the run needs (@p paths: the program, QEMU, the jitter; NULL for
 * attach and report), one the attached process @p pid maps (0: none), the
 * filter (object or source), the trace report reads, a trace another
 * sluice is recording, or where stdout or stderr go (the guest's too: both
 * would write it); NULL if none of them, or no file is there.
 */
static const char *output_clobbers(const char *path, const struct run_args *a,
                                   const struct run_paths *paths, uint32_t pid)
{
    struct stat st, fd_st;

    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
        return NULL; /* a new file, or a device or FIFO: nothing there to destroy */
    }
    if (paths && same_file(paths->prog, &st)) {
        return "is the program to trace";
    }
    if (paths && (same_file(paths->qemu, &st) || same_file(paths->jitter, &st))) {
        return "is the QEMU or the jitter the trace runs";
    }
    if (pid && mapped_by(pid, &st)) {
        return "is mapped by the traced process (its program, a library, QEMU or the jitter)";
    }
    if (same_file(a->filter.path, &st)) {
        return "is the filter";
    }
    if (same_file(a->trace, &st)) {
        return "is the trace file report reads";
    }
    if (being_recorded(path)) {
        return "another sluice is recording into it";
    }
    for (int fd = 1; fd <= 2; fd++) {
        if (fstat(fd, &fd_st) == 0 && fd_st.st_dev == st.st_dev && fd_st.st_ino == st.st_ino) {
            return fd == 1 ? "is where stdout goes (the guest writes there too)"
                           : "is where stderr goes (the guest and sluice write there too)";
        }
    }
    return NULL;
}

/* Refuse (one line, 1) an output @p path that output_clobbers(); 0 if it may be written. */
static int refuse_clobber(const char *opt, const char *path, const struct run_args *a,
                          const struct run_paths *paths)
{
    const char *why = path ? output_clobbers(path, a, paths, a->pid) : NULL;

    if (why) {
        say("sluice: %s %s: %s; give another file\n", opt, path, why);
    }
    return why != NULL;
}

/*
 * Open the tool's output (-o FILE, else stderr) and check the trace file
 * (--record) can be written, before anything starts and before either is
 * emptied: neither may name an input (output_clobbers(); @p paths: run's,
 * or NULL) nor the other. Returns 0, or 2 after one line on stderr.
 */
static int open_outputs(const struct run_args *a, struct tool_env *env,
                        const struct run_paths *paths)
{
    struct stat rec, out;
    int fd, created = 0;
    /* -o -: stdout, as for most tools (no file to check against the trace files). */
    const char *path = a->out && strcmp(a->out, "-") != 0 ? a->out : NULL;

    env->json = a->json;
    env->dump = a->dump;
    env->record = a->record;
    env->out = stderr;
    env->name = a->out ? a->out : "stderr";
    if (a->out && !path) {
        env->out = stdout;
        env->name = "stdout";
    }
    if (launch_stdio_closed(fileno(env->out))) {
        /* Written to /dev/null, the output would be lost in silence. */
        say("sluice: %s is closed: nowhere to write the output (give -o FILE)\n", env->name);
        return 2;
    }
    /* --tool record's trace is -o's (a->record set from it) */
    if (refuse_clobber("-o", path, a, paths) ||
        refuse_clobber(a->tool == &tool_record ? "-o" : "--record", a->record, a, paths)) {
        return 2;
    }
    if (a->record) {
        created = stat(a->record, &rec) != 0;
        fd = created || S_ISREG(rec.st_mode)
                 ? open(a->record, O_WRONLY | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0644)
                 : -2; /* (a FIFO is not even opened) */
        if (fd == -1 || (fd >= 0 && fstat(fd, &rec) < 0) || !S_ISREG(rec.st_mode)) {
            say("sluice: %s: %s\n", a->record,
                fd == -1 ? strerror(errno) : "a trace file must be a regular file");
            if (fd >= 0) {
                close(fd);
            }
            return 2;
        }
        close(fd);
        /* Before -o is opened: the two must not be one file. */
        if (path && stat(path, &out) == 0 && out.st_dev == rec.st_dev && out.st_ino == rec.st_ino) {
            say("sluice: %s: -o and --record name the same file\n", a->out);
            if (created) {
                unlink(a->record);
            }
            return 2;
        }
        if (created) {
            unlink(a->record); /* made to see it can be: the recorder makes it again */
        }
    }
    if (path) {
        int made = stat(path, &out) != 0, err;

        fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0666); /* not emptied: output_begin() */
        env->out = fd >= 0 ? fdopen(fd, "w") : NULL;
        if (!env->out) {
            err = errno;
            say("sluice: %s: %s\n", a->out, strerror(err));
            env->out = stderr;
            if (fd >= 0) {
                close(fd);
            }
            if (made && fd >= 0) {
                unlink(path);
            }
            return 2;
        }
        out_file.fd = fd;
        out_file.pending = 1;
        out_file.created = made;
        out_file.path = path;
    }
    out_file.record_made = a->record && created ? a->record : NULL;
    return 0;
}

/* Close the tool's output (-o FILE); 1 if that failed (said on stderr), else 0. */
static int close_output(struct tool_env *env)
{
    if (env->out != stderr && fclose(env->out) != 0) {
        if (!env->out_failed_said) { /* else the tool said it when it happened */
            say("sluice: %s: %s\n", env->name, strerror(errno));
        }
        return 1;
    }
    return 0;
}

/* Whether a status line may own stderr: a terminal, which the tool's output @p out is not. */
static int status_line_ok(const struct tool_env *env)
{
    return isatty(STDERR_FILENO) &&
           (env->out == stderr ? env->tool_out_none : !isatty(fileno(env->out)));
}

/*
 * The guest ended and a termination request detached the session
 * (launch_left_others()): say which processes it forked were left running,
 * untraced, if any is (a traced process other than the guest's own,
 * @p guest, still alive now). Nothing if none is: the request only ended
 * the guest.
 */
static void say_left_running(const struct sluice_session *s, pid_t guest)
{
    struct sluice_counts total;
    size_t n = sluice_session__counts(s, &total, NULL, NULL, 0), shown = 0, alive = 0;
    struct sluice_thread_info *infos = calloc(n ? n : 1, sizeof(*infos));
    char pids[128] = "";

    n = infos ? sluice_session__counts(s, &total, NULL, infos, n) : 0;
    for (size_t i = 0; i < n; i++) {
        pid_t pid = (pid_t)infos[i].pid;
        int seen = pid == guest;

        for (size_t j = 0; j < i && !seen; j++) {
            seen = (pid_t)infos[j].pid == pid;
        }
        if (seen || (kill(pid, 0) < 0 && errno != EPERM)) {
            continue;
        }
        if (strlen(pids) + 16 < sizeof(pids)) {
            snprintf(pids + strlen(pids), sizeof(pids) - strlen(pids), "%s%d", shown++ ? ", " : "",
                     (int)pid);
        }
        alive++;
    }
    free(infos);
    if (alive) {
        say("sluice: the guest (pid %d) ended and a termination request came: the processes "
            "it forked that outlived it (pid %s%s) were left running, untraced from then on\n",
            (int)guest, pids, alive > shown ? ", ..." : "");
    }
}

/*
 * Run session @p s to its end, with the status line if @p status_line;
 * *@p t0 is when it began. Returns whether it failed.
 */
static int run_traced(struct sluice_session *s, int status_line, double *t0)
{
    struct progress prog = {0};
    int failed;

    if (status_line) {
        progress_start(&prog, s);
    }
    *t0 = now();
    failed = sluice_session__run(s) != 0;
    progress_stop(&prog);
    return failed;
}

static int cmd_run(int argc, char **argv)
{
    struct tool_env env = {.out = stderr, .name = "stderr"};
    struct sluice_counts total;
    struct sluice_session *s = NULL;
    struct run_paths paths;
    struct run_args a;
    int rc = parse_args(argc, argv, &a, MODE_RUN), failed, started, status;
    double t0;
    pid_t pid;

    if (rc >= 0) {
        return rc;
    }
    if (resolve(&a, &paths) || filter_arg_prepare(&a.filter)) {
        filter_arg_cleanup(&a.filter);
        return 2;
    }
    if (open_outputs(&a, &env, &paths)) {
        filter_arg_cleanup(&a.filter);
        return 2;
    }
    pid = start(&a, &paths, &env, &s);
    if (pid < 0) {
        output_abandon(&env);
        sluice_session__free(s);
        filter_arg_cleanup(&a.filter);
        return 2;
    }
    /* The status line shares stderr with the guest's: only when the guest's
     * stdout is not the terminal. */
    launch_watch(s);
    failed = run_traced(s, status_line_ok(&env) && !isatty(STDOUT_FILENO), &t0);
    launch_watch(NULL);
    started = sluice_session__counts(s, &total, NULL, NULL, 0) > 0;
    if (failed && started) {
        say_errors("sluice: trace: ", s);
    }
    status = launch_wait(pid, &env.qemu_usage);
    if (launch_left_others()) {
        say_left_running(s, pid);
    }
    env.qemu_known = 1;
    if (!started && (failed || !exited_0(status))) {
        /* QEMU died before the guest's first thread (e.g. before WELCOME):
         * nothing ran traced, so there is nothing to report. */
        report_not_started(status, s);
        output_abandon(&env);
        sluice_session__free(s);
        filter_arg_cleanup(&a.filter);
        if (status != -1 && WIFSIGNALED(status)) {
            launch_exit_like(status, 1); /* as the guest would have: SIGTERM passed on, say */
        }
        return 2;
    }
    output_begin();
    failed |= a.tool->report(&env, s, now() - t0) != 0;
    /* Text inside a JSON, raw or drcov output would break it: notes_out() says where. */
    report_unclosed(notes_out(&a, &env), s, status);
    report_nothing_selected(&a, &total, s);
    failed |= close_output(&env);
    sluice_session__free(s);
    filter_arg_cleanup(&a.filter);
    launch_exit_like(status, failed);
}

/* The session `attach` runs, for its signal handler. */
static struct sluice_session *attached;

/* A detaching signal that came before the session existed. */
static volatile sig_atomic_t detach_early;

/* The first detaching signal: its sender (kill(2)'s pid, or -1: the kernel's, as a
 * terminal's ^C) and when it came (CLOCK_MONOTONIC, ns; 0: none came yet). */
static volatile sig_atomic_t first_sender;
static int64_t first_ns;

/* Whether @p si repeats the first signal: sent by kill(2) from the same process
 * within 100 ms of it, as `timeout -s INT` does (once to its child, at once again to
 * its process group, which holds the child too); a second signal meant as one comes
 * later. Async-signal-safe. */
static int repeats_first(const siginfo_t *si, int64_t now_ns)
{
    return si->si_code == SI_USER && first_sender == (sig_atomic_t)si->si_pid &&
           now_ns - first_ns < 100000000;
}

static void on_detach_signal(int sig, siginfo_t *si, void *uc)
{
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    struct timespec ts;
    int64_t now_ns;

    (void)uc;
    clock_gettime(CLOCK_MONOTONIC, &ts); /* async-signal-safe (POSIX) */
    now_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    if (first_ns == 0) {
        first_sender = si->si_code == SI_USER ? (sig_atomic_t)si->si_pid : -1;
        first_ns = now_ns;
        detach_early = 1;
        sluice_session__detach(attached); /* async-signal-safe; nothing if NULL */
        return;
    }
    if (repeats_first(si, now_ns)) {
        return;
    }
    /* A second one ends sluice: the way out when what was published cannot be
     * delivered (an output nobody reads), while the guest waits for it. The
     * kernel then closes the socket and the jitter lets the guest go on. */
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGINT, &dfl, NULL);
    sigaction(SIGTERM, &dfl, NULL);
    sigaction(SIGHUP, &dfl, NULL);
    raise(sig); /* blocked in this handler: delivered, with the default action, on return */
}

/* The session, no longer reachable from the signal handler (which may then come again). */
static struct sluice_session *detach_none(void)
{
    struct sluice_session *s = attached;
    sigset_t block, old;

    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGHUP);
    sigprocmask(SIG_BLOCK, &block, &old);
    attached = NULL;
    sigprocmask(SIG_SETMASK, &old, NULL);
    return s;
}

/* SIGINT, SIGTERM (and SIGHUP if @p hup) detach the session from now on; a second ends
 * sluice, unless it is the first one again (repeats_first()). */
static void detach_on_signals(int hup)
{
    struct sigaction sa = {.sa_sigaction = on_detach_signal, .sa_flags = SA_SIGINFO};

    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGINT); /* one handler at a time: they share first_* */
    sigaddset(&sa.sa_mask, SIGTERM);
    sigaddset(&sa.sa_mask, SIGHUP);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    if (hup) {
        sigaction(SIGHUP, &sa, NULL);
    }
}

/* One line saying why attaching to @p pid failed (errno @p err). */
static void attach_failed(uint32_t pid, int err)
{
    if (err == ENOENT) {
        say("sluice: attach %u: no traced process %u of this user (no socket)\n", pid, pid);
    } else if (err == EPERM) {
        say("sluice: attach %u: refused to connect: its socket's directory or listener is "
            "not this user's alone\n",
            pid);
    } else if (err == EPROTOTYPE) {
        say("sluice: attach %u: its socket is not a sluice jitter's (not SOCK_SEQPACKET)\n", pid);
    } else if (err == ECONNREFUSED) {
        say("sluice: attach %u: process %u has ended (its socket is stale)\n", pid, pid);
    } else {
        say("sluice: attach %u: %s\n", pid, strerror(err));
    }
}

/*
 * What `attach` and `report` begin with: @p a parsed from the command line,
 * the tool's outputs open in @p env, @p opts->workers set. Returns -1 to go
 * on, else the exit code.
 */
static int begin_consumer(int argc, char **argv, enum mode mode, struct run_args *a,
                          struct tool_env *env, struct sluice_consumer_opts *opts)
{
    int rc = parse_args(argc, argv, a, mode);

    if (rc >= 0) {
        return rc;
    }
    if (open_outputs(a, env, NULL)) {
        return 2;
    }
    opts->workers = a->workers;
    return -1;
}

static int cmd_attach(int argc, char **argv)
{
    struct tool_env env = {.out = stderr, .name = "stderr"};
    struct sluice_callbacks cb = {.sz = sizeof(cb)};
    struct sluice_consumer_opts opts = {.sz = sizeof(opts)};
    struct run_args a;
    int rc = begin_consumer(argc, argv, MODE_ATTACH, &a, &env, &opts), failed;
    double t0;

    if (rc >= 0) {
        return rc;
    }
    opts.lossy = a.lossy;
    opts.record = a.record;
    opts.record_uncompressed = a.uncompressed;
    a.tool->setup(&env, &cb);
    output_watch(&cb);
    detach_on_signals(1);
    attached = sluice_session__attach(a.pid, &cb, &opts);
    if (!attached && errno == EBUSY && a.record) {
        say("sluice: attach %u: recording to %s: another sluice is recording into it\n", a.pid,
            a.record);
    } else if (!attached) {
        attach_failed(a.pid, errno);
    }
    if (!attached) {
        output_abandon(&env);
        return 2;
    }
    if (detach_early) {
        sluice_session__detach(attached);
    }
    failed = run_traced(attached, status_line_ok(&env), &t0);
    if (failed && !sluice_session__welcomed(attached)) {
        /* Refused (another user, a full registry) or gone before WELCOME. */
        say("sluice: attach %u: %s\n", a.pid, sluice_session__error(attached));
        output_abandon(&env);
        sluice_session__free(detach_none());
        return 2;
    }
    if (failed) {
        say_errors("sluice: trace: ", attached);
    }
    output_begin();
    failed |= a.tool->report(&env, attached, now() - t0) != 0;
    if (sluice_session__once_before(attached)) {
        say("sluice: attach %u: %u pcs of its filter's Once instructions had been recorded "
            "for consumers attached before this one: they are not recorded again, so this "
            "trace has none of them\n",
            a.pid, sluice_session__once_before(attached));
    }
    if (sluice_session__detached(attached) || !failed) {
        say("sluice: %s pid %u after %.2f s\n",
            sluice_session__detached(attached) ? "detached from" : "traced to the end of", a.pid,
            now() - t0);
    } else { /* the trace went on past most errors (a thread, a process): not said stopped */
        say("sluice: traced pid %u for %.2f s, with the errors above\n", a.pid, now() - t0);
    }
    failed |= close_output(&env);
    sluice_session__free(detach_none());
    return failed;
}

/* Say which instructions a windowed report covered, so its counts are not read as the run's;
 * and why, when the window held nothing (@p w: its counts). */
static void report_window(const struct run_args *a, const struct sluice_counts *w)
{
    if ((a->skip || a->count) && !w->insns) {
        say("sluice: report: no instruction in the window: every thread ends before "
            "instruction %llu, or the trace records none (a filter of memory accesses "
            "alone: a window counts instructions)\n",
            (unsigned long long)a->skip);
    }
    /* A window past instruction 2^63 - 1 ends with each thread: none runs that many. */
    if (a->count && a->count - 1 <= (uint64_t)INT64_MAX - a->skip) {
        say("sluice: report: a window: instructions %llu to %llu of each thread "
            "(fewer where a thread ends first)\n",
            (unsigned long long)a->skip, (unsigned long long)(a->skip + a->count - 1));
    } else if (a->skip || a->count) {
        say("sluice: report: a window: instructions %llu to the end of each thread\n",
            (unsigned long long)a->skip);
    }
}

/*
 * `sluice report TRACE`: the tool on a recorded trace, as it ran live.
 * SIGINT stops it early (what was read is reported).
 */
static int cmd_report(int argc, char **argv)
{
    struct tool_env env = {.out = stderr, .name = "stderr"};
    struct sluice_callbacks cb = {.sz = sizeof(cb)};
    struct sluice_consumer_opts opts = {.sz = sizeof(opts)};
    struct sluice_counts total;
    struct run_args a;
    int rc = begin_consumer(argc, argv, MODE_REPORT, &a, &env, &opts), failed;
    double t0;

    if (rc >= 0) {
        return rc;
    }
    opts.tids = a.n_tids ? a.tids : NULL;
    opts.n_tids = a.n_tids;
    opts.skip_insns = a.skip;
    opts.count_insns = a.count;
    a.tool->setup(&env, &cb);
    output_watch(&cb);
    attached = sluice_session__open_file(a.trace, &cb, &opts);
    if (!attached) {
        say("sluice: report %s: %s\n", a.trace, strerror(errno));
        output_abandon(&env);
        return 2;
    }
    detach_on_signals(0);
    failed = run_traced(attached, status_line_ok(&env), &t0);
    if (failed && being_recorded(a.trace)) {
        say("sluice: report: %s is still being recorded by another sluice: what it "
            "held so far follows\n",
            a.trace);
    }
    if (sluice_session__counts(attached, &total, NULL, NULL, 0) == 0) {
        /* Not a trace file, or nothing in it: nothing to report. */
        say("sluice: report: %s\n",
            failed ? sluice_session__error(attached) : "no guest thread was recorded in it");
        output_abandon(&env);
        sluice_session__free(detach_none());
        return 2;
    }
    if (failed) {
        say_errors("sluice: report: ", attached);
    }
    output_begin();
    failed |= a.tool->report(&env, attached, now() - t0) != 0;
    report_unclosed(notes_out(&a, &env), attached, -1);
    report_window(&a, &total);
    failed |= close_output(&env);
    sluice_session__free(detach_none());
    return failed;
}

/* Why `sluice ls` could not describe a process (sluice_process_info.error). */
static const char *ls_why(int32_t err)
{
    switch (err) {
    case -ETIMEDOUT:
        return "not answering (stopped?)";
    case -EPERM:
        return "not asked: its socket's directory is not private (0700, ours) or another user "
               "listens there";
    case -EACCES:
    case -EPROTO:
        return "not asked: it refused, or speaks another protocol";
    case -EPIPE:
    case -ECONNRESET:
        return "ending (it closed the connection while asked)";
    default:
        return strerror(-err);
    }
}

static int cmd_ls(int argc, char **argv)
{
    static struct sluice_process_info p[4096];
    int json = argc == 3 && strcmp(argv[2], "--json") == 0, n, i, shown = 0, no_fd = 0;

    if (argc > 3 || (argc == 3 && !json)) {
        return usage_error("%s", "usage: sluice ls [--json]");
    }
    if (launch_stdio_closed(1)) {
        say("%s", "sluice: ls: stdout is closed: nowhere to list the processes\n");
        return 2;
    }
    n = sluice_process__list(p, sizeof(p) / sizeof(p[0]));
    if (json) {
        printf("[");
    }
    for (i = 0; i < n && i < (int)(sizeof(p) / sizeof(p[0])); i++) {
        if (p[i].error == -EMFILE || p[i].error == -ENFILE) {
            no_fd++; /* said once below: stale sockets among them cannot be told apart */
        } else if (p[i].error && json) {
            printf("%s{\"pid\": %u, \"answering\": false, \"why\": \"%s\"}", shown++ ? ", " : "",
                   p[i].pid, ls_why(p[i].error));
        } else if (p[i].error) {
            printf("%u - - %s\n", p[i].pid, ls_why(p[i].error));
        } else if (json) {
            /* arch and comm: printable names; a quote or backslash is replaced. */
            for (char *c = p[i].comm; *c; c++) {
                *c = (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20 || *c == 0x7f) ? '?' : *c;
            }
            printf("%s{\"pid\": %u, \"answering\": true, \"arch\": \"%s\", \"comm\": \"%s\", "
                   "\"threads\": %u, \"consumers\": %u, \"lossless\": %u, \"waiting\": %u, "
                   "\"lost\": %llu}",
                   shown++ ? ", " : "", p[i].pid, p[i].arch, p[i].comm, p[i].threads,
                   p[i].consumers, p[i].lossless, p[i].waiting, (unsigned long long)p[i].lost);
        } else {
            char comm[sizeof(p[i].comm)];

            /* One line per process, whatever the guest named itself. */
            printf("%u %s %s threads=%u consumers=%u lossless=%u lost=%llu", p[i].pid, p[i].arch,
                   say_shown(p[i].comm, comm, sizeof(comm)), p[i].threads, p[i].consumers,
                   p[i].lossless, (unsigned long long)p[i].lost);
            if (p[i].waiting) {
                printf(" (it starts once %u more attach%s)", p[i].waiting,
                       p[i].waiting == 1 ? "es" : "");
            }
            printf("\n");
        }
    }
    if (json) {
        printf("]\n");
    }
    if (fflush(stdout) != 0) {
        return 1;
    }
    if (n > i) {
        say("sluice ls: %d more traced processes not shown\n", n - i);
    }
    if (no_fd) {
        say("sluice ls: %d socket%s not asked: too many open files (ulimit -n)\n", no_fd,
            no_fd == 1 ? "" : "s");
    }
    return no_fd ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (launch_hold_stdio() < 0) {
        return 2; /* no /dev/null, and maybe no stderr to say so */
    }
    launch_ignore_sigpipe();
    if (argc >= 2 && strcmp(argv[1], "run") == 0) {
        return cmd_run(argc, argv);
    }
    if (argc >= 2 && strcmp(argv[1], "attach") == 0) {
        return cmd_attach(argc, argv);
    }
    if (argc >= 2 && strcmp(argv[1], "report") == 0) {
        return cmd_report(argc, argv);
    }
    if (argc >= 2 && strcmp(argv[1], "ls") == 0) {
        return cmd_ls(argc, argv);
    }
    if (argc >= 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        usage(stdout);
        return 0;
    }
    if (argc < 2) {
        return usage_error("%s", "no command given");
    }
    return usage_error("unknown command '%s'", argv[1]);
}
