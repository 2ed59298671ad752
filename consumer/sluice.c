/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * sluice.c — the `sluice` command.
 *
 *   sluice run [--filter F] [--set NAME=VALUE]... [--tool T] [--json] [-o FILE]
 *              [--workers N] -- PROGRAM [ARGS]
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
#include <signal.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "filter_arg.h"
#include "jitter_arg.h"
#include "launch.h"
#include "precheck.h"
#include "sluice/ctl.h"
#include "progress.h"
#include "sluice/consumer.h"
#include "tools.h"

#ifndef SLUICE_QEMU_DIR_DEFAULT
#define SLUICE_QEMU_DIR_DEFAULT ""
#endif
#ifndef SLUICE_JITTER_DEFAULT
#define SLUICE_JITTER_DEFAULT ""
#endif

struct run_args {
    const struct tool *tool;
    int json;
    const char *out;
    unsigned workers;
    char **prog; /* PROGRAM ARGS..., NULL-terminated (argv's tail) */
    struct filter_arg filter;
};

static void usage(FILE *f)
{
    fprintf(f, "usage: sluice run [--filter F] [--set NAME=VALUE]... [--tool T] [--json]\n"
               "                  [-o FILE] [--workers N] -- PROGRAM [ARGS...]\n"
               "  --filter F   decide what to trace with a BPF filter: F.bpf.o (clang -O2 -g\n"
               "               -target bpf), or F.c, compiled with clang (see filters/)\n"
               "  --set N=V    set the filter's global N (a const volatile knob) to V\n"
               "  --tool T     analysis: stats (default; counts per thread), dump (one line\n"
               "               per executed instruction and memory access), pcsum (an\n"
               "               order-sensitive checksum of each thread's PCs, one callback per\n"
               "               PC) or pcsum-batch (the same sum, PCs taken in runs)\n"
               "  --json       stats or pcsum as one JSON object on one line\n"
               "  -o FILE      write the tool's output to FILE (default: stderr)\n"
               "  --workers N  decoding threads (default: online CPUs)\n"
               "environment: SLUICE_QEMU_DIR (holds bin/qemu-<arch>), SLUICE_JITTER (the jitter\n"
               "  library), SLUICE_RING_BYTES (ring per guest thread: a power of two, 256 KiB to\n"
               "  1 GiB, default 16 MiB), SLUICE_ENCODING (block, the default: one record per\n"
               "  translated block; insn: one per instruction; the same events either way)\n");
}

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "sluice: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    usage(stderr);
    return 2;
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
    return NULL;
}

/* Parse `run`'s arguments. Returns -1 to go on, else an exit status. */
static int parse_run(int argc, char **argv, struct run_args *a)
{
    int i;

    memset(a, 0, sizeof(*a));
    a->tool = &tool_stats;
    for (i = 2; i < argc; i++) {
        const char *v;
        char *end;

        if (strcmp(argv[i], "--") == 0 || argv[i][0] != '-') {
            i += strcmp(argv[i], "--") == 0;
            break;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--json") == 0) {
            a->json = 1;
        } else if ((v = opt_value(argc, argv, &i, "--tool"))) {
            if (!(a->tool = find_tool(v))) {
                return usage_error("unknown tool '%s'", v);
            }
        } else if ((v = opt_value(argc, argv, &i, "--filter"))) {
            a->filter.path = v;
        } else if ((v = opt_value(argc, argv, &i, "--set"))) {
            if (a->filter.n_sets == sizeof(a->filter.sets) / sizeof(a->filter.sets[0])) {
                return usage_error("%s", "at most 64 --set options");
            }
            a->filter.sets[a->filter.n_sets++] = v;
        } else if ((v = opt_value(argc, argv, &i, "-o"))) {
            a->out = v;
        } else if ((v = opt_value(argc, argv, &i, "--workers"))) {
            unsigned long n;

            errno = 0;
            n = strtoul(v, &end, 10);
            if (errno || *end || !*v || n == 0 || n > 1024) {
                return usage_error("--workers wants a number from 1 to 1024, not '%s'", v);
            }
            a->workers = (unsigned)n;
        } else {
            return usage_error("unknown or incomplete option '%s'", argv[i]);
        }
    }
    if (i >= argc) {
        return usage_error("%s", "run: no PROGRAM given");
    }
    if (a->json && a->tool == &tool_dump) {
        return usage_error("%s", "--json goes with --tool stats, pcsum or pcsum-batch");
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
    if (p->encoding && strcmp(p->encoding, "block") != 0 && strcmp(p->encoding, "insn") != 0) {
        fprintf(stderr, "sluice: %s=%s: want block (the default) or insn\n", SLUICE_ENCODING_ENV,
                p->encoding);
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
        fprintf(stderr, "sluice: %s\n", err);
        return -1;
    }
    return 0;
}

/* Create the session on sv[0] and start QEMU on sv[1]. Returns the pid or -1. */
static pid_t start(const struct run_args *a, const struct run_paths *p, struct tool_env *env,
                   struct sluice_session **sp)
{
    struct sluice_callbacks cb = {.sz = sizeof(cb)};
    struct sluice_consumer_opts opts = {.sz = sizeof(opts), .workers = a->workers};
    char err[256], *jarg;
    int sv[2];
    pid_t pid;

    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        fprintf(stderr, "sluice: socketpair: %s\n", strerror(errno));
        return -1;
    }
    a->tool->setup(env, &cb);
    *sp = sluice_session__new(sv[0], &cb, &opts); /* sends HELLO now */
    if (!*sp) {
        fprintf(stderr, "sluice: starting the consumer: %s\n", strerror(errno));
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
    });
    if (!jarg) {
        fprintf(stderr, "sluice: %s: %s\n", p->jitter,
                errno == EINVAL ? "a jitter path cannot hold ','" : strerror(errno));
        close(sv[1]);
        return -1;
    }
    pid = launch_spawn(p->qemu, jarg, p->prog, a->prog + 1, sv[1], err, sizeof(err));
    free(jarg);
    close(sv[1]); /* QEMU's end: its EOF must come from QEMU alone */
    if (pid < 0) {
        fprintf(stderr, "sluice: %s\n", err);
    }
    return pid;
}

/* Say so when the guest did not end by itself: the report covers what ran until then. */
static void report_unclosed(FILE *out, const struct sluice_session *s, int status)
{
    uint64_t bytes;
    size_t n = sluice_session__salvaged(s, &bytes);

    if (n > 0 && status != -1 && WIFSIGNALED(status)) {
        /* Killed in the kernel, unseen by QEMU (SIGKILL, SIGTERM...): no thread exited. */
        fprintf(out,
                "guest killed by SIG%s: %zu thread%s did not exit; %llu bytes of records "
                "written after their last publish were recovered\n",
                sigabbrev_np(WTERMSIG(status)) ? sigabbrev_np(WTERMSIG(status)) : "?", n,
                n == 1 ? "" : "s", (unsigned long long)bytes);
    } else if (bytes > 0) {
        fprintf(out,
                "%zu thread%s ended without exiting (killed, or ended by an execve); %llu bytes "
                "of records written after their last publish were recovered\n",
                n, n == 1 ? "" : "s", (unsigned long long)bytes);
    }
}

/* Whether the guest's QEMU (wait status @p status) ended well. */
static int exited_0(int status)
{
    return status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* No guest thread was ever traced and something failed: say what, in one
 * line (QEMU's own message, if any, is above it). */
static void report_not_started(int status, const struct sluice_session *s)
{
    if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) != 0) {
        fprintf(stderr,
                "sluice: QEMU exited with status %d before tracing started (its message is "
                "above)\n",
                WEXITSTATUS(status));
    } else if (status != -1 && WIFSIGNALED(status)) {
        fprintf(stderr, "sluice: QEMU was killed by SIG%s before tracing started\n",
                sigabbrev_np(WTERMSIG(status)) ? sigabbrev_np(WTERMSIG(status)) : "?");
    } else if (status == -1) {
        fprintf(stderr, "sluice: QEMU ended before tracing started (its status is unknown)\n");
    } else {
        fprintf(stderr, "sluice: tracing did not start: %s\n", sluice_session__error(s));
    }
}

static int cmd_run(int argc, char **argv)
{
    struct tool_env env = {.out = stderr, .name = "stderr"};
    struct sluice_counts unused;
    struct progress prog = {0};
    struct sluice_session *s = NULL;
    struct run_paths paths;
    struct run_args a;
    int rc = parse_run(argc, argv, &a), failed, started, status;
    double t0;
    pid_t pid;

    if (rc >= 0) {
        return rc;
    }
    if (resolve(&a, &paths) || filter_arg_prepare(&a.filter)) {
        filter_arg_cleanup(&a.filter);
        return 2;
    }
    env.json = a.json;
    if (a.out && !(env.out = fopen(a.out, "we"))) {
        fprintf(stderr, "sluice: %s: %s\n", a.out, strerror(errno));
        filter_arg_cleanup(&a.filter);
        return 2;
    }
    env.name = a.out ? a.out : "stderr";
    pid = start(&a, &paths, &env, &s);
    if (pid < 0) {
        sluice_session__free(s);
        filter_arg_cleanup(&a.filter);
        return 2;
    }
    /* Progress lines share the terminal with the guest: only when the guest
     * is not interactive (stdin not a tty) and the tool writes elsewhere. */
    if (isatty(STDERR_FILENO) && !isatty(STDIN_FILENO) && env.out != stderr) {
        progress_start(&prog, s, 2);
    }
    t0 = now();
    failed = sluice_session__run(s) != 0;
    progress_stop(&prog);
    started = sluice_session__counts(s, &unused, NULL, NULL, 0) > 0;
    if (failed && started) {
        fprintf(stderr, "sluice: trace: %s\n", sluice_session__error(s));
    }
    status = launch_wait(pid, &env.qemu_usage);
    if (!started && (failed || !exited_0(status))) {
        /* QEMU died before the guest's first thread (e.g. before WELCOME):
         * nothing ran traced, so there is nothing to report. */
        report_not_started(status, s);
        if (env.out != stderr) {
            fclose(env.out);
        }
        sluice_session__free(s);
        filter_arg_cleanup(&a.filter);
        return 2;
    }
    failed |= a.tool->report(&env, s, now() - t0) != 0;
    /* Text beside a JSON report would break it: then the line goes to stderr. */
    report_unclosed(env.json ? stderr : env.out, s, status);
    if (env.out != stderr && fclose(env.out) != 0) {
        fprintf(stderr, "sluice: %s: %s\n", a.out, strerror(errno));
        failed = 1;
    }
    sluice_session__free(s);
    filter_arg_cleanup(&a.filter);
    launch_exit_like(status, failed);
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "run") == 0) {
        return cmd_run(argc, argv);
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
