/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * filter_arg.h — `sluice run --filter F --set NAME=VALUE`: compile a .c
 * filter with clang, load the object once here so every error shows before
 * QEMU starts, and hand it to the jitter through the environment.
 *
 * Main thread, before anything else is started (it calls setenv()).
 */
#ifndef SLUICE_CONSUMER_FILTER_ARG_H
#define SLUICE_CONSUMER_FILTER_ARG_H

#include <stddef.h>

/** What the command line said about the filter. */
struct filter_arg {
    const char *path;     /* --filter value, or NULL */
    const char *sets[64]; /* --set values, "NAME=VALUE" */
    size_t n_sets;
    char tmpdir[64];   /* our copy of the object, or the .c compiled ("" if none); removed by
                          filter_arg_cleanup */
    char object[4096]; /* the verified object's absolute path, for the jitter ("" if none) */
};

/**
 * Compile (a path ending in ".c": clang, its diagnostics on stderr) or copy
 * (an object) the filter into a directory of ours, load and verify it with
 * its --set values, and put that object's absolute path in fa->object for
 * the jitter: QEMU loads what was verified, whatever the user's path names
 * by then. Without --filter, only checks that no
 * --set was given.
 * @return 0, or -1 after one line on stderr naming the file and the reason.
 */
int filter_arg_prepare(struct filter_arg *fa);

/** Remove the compiled object, if any (after QEMU has exited). */
void filter_arg_cleanup(struct filter_arg *fa);

#endif /* SLUICE_CONSUMER_FILTER_ARG_H */
