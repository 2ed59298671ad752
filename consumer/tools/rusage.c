/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * tools/rusage.c — the CPU time and peak memory of QEMU and of the consumer,
 * for the tools' --json output (bench/run reads them to say where the time
 * goes). Main thread, after the session; never fails: a getrusage error
 * leaves the consumer's figures at zero.
 */
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "tools.h"

static double seconds(struct timeval tv)
{
    return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

static void usage_json(FILE *f, const char *name, const struct rusage *ru)
{
    fprintf(f, "\"%s\": {\"user_s\": %.3f, \"sys_s\": %.3f, \"maxrss_kib\": %ld}", name,
            seconds(ru->ru_utime), seconds(ru->ru_stime), ru->ru_maxrss);
}

/*
 * sluice's own peak RSS in KiB: VmHWM of /proc/self/status, the high-water
 * mark of this program's memory. ru_maxrss also keeps that of the memory the
 * process had before it exec'd us (fs/exec.c, exec_mmap): a sluice started by
 * a 300 MiB Python harness said it peaked at 300 MiB. @p fallback
 * (ru_maxrss) where /proc is not mounted.
 */
static long own_peak_kib(long fallback)
{
    FILE *st = fopen("/proc/self/status", "re");
    char line[128];
    long kib = -1;

    if (!st) {
        return fallback;
    }
    while (kib < 0 && fgets(line, sizeof(line), st)) {
        if (sscanf(line, "VmHWM: %ld kB", &kib) != 1) {
            kib = -1;
        }
    }
    fclose(st);
    return kib < 0 ? fallback : kib;
}

void tool_json_rusage(FILE *f, const struct tool_env *env)
{
    struct rusage self;

    if (getrusage(RUSAGE_SELF, &self) != 0) {
        memset(&self, 0, sizeof(self));
    }
    self.ru_maxrss = own_peak_kib(self.ru_maxrss);
    fprintf(f, "\"rusage\": {");
    if (env->qemu_known) {
        usage_json(f, "qemu", &env->qemu_usage);
    } else {
        fprintf(f, "\"qemu\": null"); /* (attach, report: no QEMU of ours to measure) */
    }
    fprintf(f, ", ");
    usage_json(f, "consumer", &self);
    fprintf(f, "}");
}
