/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * tools/record.c — `sluice run --tool record -o TRACE`: keep the trace in a
 * file and analyse nothing now (libsluice writes it: sluice_consumer_opts
 * .record). Main thread only; its one line goes to stderr, so that the
 * guest's stdout stays the guest's.
 */
#include <sys/stat.h>

#include "tools.h"

typedef unsigned long long ull;

static void setup(struct tool_env *env, struct sluice_callbacks *cb)
{
    cb->user = env;
    env->tool_out_none = 1; /* its one line comes after the trace */
}

static int report(struct tool_env *env, struct sluice_session *s, double seconds)
{
    struct sluice_counts total;
    size_t n = sluice_session__counts(s, &total, NULL, NULL, 0);
    struct stat st;

    if (!env->record || stat(env->record, &st) < 0) {
        return 0; /* the session said why already */
    }
    if (sluice_session__record_error(s)) {
        /* Not "recorded": the file holds only the part before the stop. */
        say("sluice: traced %llu instructions of %zu thread%s in %.2f s; %s holds the part "
            "recorded before it stopped (%.1f MiB, said above)\n",
            (ull)total.insns, n, n == 1 ? "" : "s", seconds, env->record,
            (double)st.st_size / (1 << 20));
        return 0;
    }
    say("sluice: recorded %llu instructions, %llu loads, %llu stores of %zu thread%s in "
        "%.2f s into %s (%.1f MiB)\n",
        (ull)total.insns, (ull)total.loads, (ull)total.stores, n, n == 1 ? "" : "s", seconds,
        env->record, (double)st.st_size / (1 << 20));
    return 0;
}

const struct tool tool_record = {"record", setup, report, 0};
