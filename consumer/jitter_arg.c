/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * jitter_arg.c — format QEMU's -jitter argument (see jitter_arg.h). Main
 * thread, before QEMU starts; pure string work.
 */
#include "jitter_arg.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/ctl.h"

/* Append ",key=value" to the stream, doubling each ',' of the value. */
static void put(FILE *f, const char *key, const char *value)
{
    fprintf(f, ",%s=", key);
    for (; *value; value++) {
        if (*value == ',') {
            fputc(',', f);
        }
        fputc(*value, f);
    }
}

char *jitter_arg_format(const struct jitter_arg *a)
{
    char num[32], *out = NULL;
    size_t len = 0, i;
    FILE *f;

    if (strchr(a->jitter, ',')) {
        errno = EINVAL;
        return NULL;
    }
    f = open_memstream(&out, &len);
    if (!f) {
        return NULL;
    }
    fputs(a->jitter, f);
    snprintf(num, sizeof(num), "%d", a->consumer_fd);
    put(f, SLUICE_OPT_CONSUMER_FD, num);
    snprintf(num, sizeof(num), "%" PRIu64, a->ring_bytes);
    put(f, SLUICE_OPT_RING_BYTES, num);
    if (a->filter) {
        put(f, SLUICE_OPT_FILTER, a->filter);
        put(f, SLUICE_OPT_FILTER_NAME, a->filter_name ? a->filter_name : a->filter);
    }
    for (i = 0; i < a->n_sets; i++) {
        put(f, SLUICE_OPT_SET, a->sets[i]);
    }
    if (a->encoding) {
        put(f, SLUICE_OPT_ENCODING, a->encoding);
    }
    if (a->syscalls) {
        put(f, SLUICE_OPT_SYSCALLS, "1");
    }
    if (a->wait_attach) {
        snprintf(num, sizeof(num), "%u", a->wait_attach);
        put(f, SLUICE_OPT_WAIT_ATTACH, num);
    }
    if (fclose(f) != 0) {
        free(out);
        return NULL;
    }
    return out;
}
