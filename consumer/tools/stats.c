/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * tools/stats.c — `sluice run --tool stats`: counts per guest thread.
 *
 * Needs no callbacks at all: the library counts exec events, MEM and LOST
 * records on its workers whatever the callbacks are, so this is the
 * cheapest way to drain a trace (a BLOCK record with no record between its
 * instructions is counted in O(1), from its descriptor's recorded count). Output (to -o FILE, else
 * stderr): a table, or with --json exactly one JSON object on one line:
 *   {"total": {"insns": N, "loads": N, "stores": N, "lost": N},
 *    "threads": [{"pid": N, "tid": N, "arch": "x86_64", "comm": "...", "insns": N, ...}],
 *    "seconds": F, "rusage": {"qemu": {"user_s": F, "sys_s": F, "maxrss_kib": N},
 *                             "consumer": {...}},
 *    "error": null}
 * "error" is the session's error when the trace stopped on one (a consumer
 * the jitter dropped, say): the counts are then those of what was delivered
 * before it, and "lost" does not count what came after.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tools.h"

typedef unsigned long long ull;

static void json_counts(FILE *f, const struct sluice_counts *c)
{
    fprintf(f, "\"insns\": %llu, \"loads\": %llu, \"stores\": %llu, \"lost\": %llu", (ull)c->insns,
            (ull)c->loads, (ull)c->stores, (ull)c->lost);
}

static void print_json(FILE *f, const struct tool_env *env, const struct sluice_counts *total,
                       const struct sluice_counts *c, const struct sluice_thread_info *t, size_t n,
                       double seconds, const char *error)
{
    size_t i;

    fprintf(f, "{\"total\": {");
    json_counts(f, total);
    fprintf(f, "}, \"threads\": [");
    for (i = 0; i < n; i++) {
        fprintf(f, "%s{\"pid\": %u, \"tid\": %u, \"arch\": ", i ? ", " : "", t[i].pid, t[i].tid);
        tool_json_str(f, t[i].arch);
        fprintf(f, ", \"comm\": ");
        tool_json_str(f, t[i].comm);
        fprintf(f, ", ");
        json_counts(f, &c[i]);
        fprintf(f, "}");
    }
    fprintf(f, "], \"seconds\": %.6f, ", seconds);
    tool_json_rusage(f, env);
    fprintf(f, ", ");
    tool_json_error(f, error);
    fprintf(f, "}\n");
}

static void print_table(FILE *f, const struct sluice_counts *total, const struct sluice_counts *c,
                        const struct sluice_thread_info *t, size_t n, double seconds,
                        const struct sluice_session *s)
{
    size_t errors = sluice_session__errors(s, NULL, 0);
    uint64_t events = total->insns + total->loads + total->stores;
    size_t i;

    fprintf(f, "%8s %8s %-8s %-16s %14s %14s %14s %10s\n", "pid", "tid", "arch", "comm", "insns",
            "loads", "stores", "lost");
    for (i = 0; i < n; i++) {
        char comm[64];

        fprintf(f, "%8u %8u %-8s %-16s %14llu %14llu %14llu %10llu\n", t[i].pid, t[i].tid,
                t[i].arch, say_shown(t[i].comm, comm, sizeof(comm)), (ull)c[i].insns,
                (ull)c[i].loads, (ull)c[i].stores, (ull)c[i].lost);
    }
    fprintf(f, "%8s %8s %-8s %-16s %14llu %14llu %14llu %10llu\n", "total", "", "", "",
            (ull)total->insns, (ull)total->loads, (ull)total->stores, (ull)total->lost);
    fprintf(f, "%zu thread(s), %.3f s, %.1f M events/s\n", n, seconds,
            seconds > 0 ? (double)events / seconds / 1e6 : 0.0);
    /*
     * The counts are of what was delivered: a file read alone must not look
     * whole. A recording that stopped (a full disk, ulimit -f) is the one
     * error that leaves them whole: it lost nothing of the live trace.
     */
    if (errors) {
        char why[1024];

        fprintf(f, "%s%s%s\n",
                errors == 1 && sluice_session__record_error(s) ? "the counts are whole; "
                                                               : "not the whole trace: ",
                say_shown(sluice_session__error(s), why, sizeof(why)),
                errors > 1 ? " (and more: see stderr)" : "");
    }
}

static void setup(struct tool_env *env, struct sluice_callbacks *cb)
{
    cb->user = env;
}

static int report(struct tool_env *env, struct sluice_session *s, double seconds)
{
    struct sluice_counts total;
    size_t n = sluice_session__counts(s, &total, NULL, NULL, 0);
    struct sluice_counts *c = calloc(n + 1, sizeof(*c));
    struct sluice_thread_info *t = calloc(n + 1, sizeof(*t));

    if (!c || !t) {
        say("sluice: stats: out of memory\n");
        free(c);
        free(t);
        return -1;
    }
    n = sluice_session__counts(s, &total, c, t, n);
    errno = 0; /* a failed write sets it */
    if (env->json) {
        print_json(env->out, env, &total, c, t, n, seconds, sluice_session__error(s));
    } else {
        print_table(env->out, &total, c, t, n, seconds, s);
    }
    free(c);
    free(t);
    if (total.lost) {
        say("sluice: warning: %llu events lost\n", (ull)total.lost);
    }
    /* An unbuffered stderr flushes "successfully" after failed writes: ask ferror too. */
    if (fflush(env->out) != 0 || ferror(env->out)) {
        say("sluice: stats: writing %s: %s\n", env->name, strerror(errno ? errno : EIO));
        return -1;
    }
    return 0;
}

const struct tool tool_stats = {"stats", setup, report, 1};
