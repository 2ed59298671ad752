/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * opts.c — parse the jitter's options (see opts.h).
 *
 * Main thread, at init. The parsed strings live in one heap copy of the
 * options that is kept for the life of the process (the filter's names and
 * values point into it).
 */
#include "opts.h"
#include "../consumer/say.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sluice/ctl.h>
#include <sluice/record.h>

static int bad(const char *item, const char *why)
{
    say("sluice-jitter: option '%s': %s\n", item, why);
    return -EINVAL;
}

/* Cut the next item off @p *p in place, turning ",," into ','; NULL at the end. */
static char *next_item(char **p)
{
    char *start = *p, *r = *p, *w = *p;

    if (!start || !*start) {
        return NULL;
    }
    for (; *r; r++) {
        if (*r == ',' && r[1] == ',') {
            *w++ = *r++;
        } else if (*r == ',') {
            r++;
            break;
        } else {
            *w++ = *r;
        }
    }
    *p = r;
    *w = '\0';
    return start;
}

static int set_item(struct jitter_opts *o, const char *key, char *val, const char *item)
{
    char *end;
    long fd;

    if (strcmp(key, SLUICE_OPT_CONSUMER_FD) == 0) {
        fd = strtol(val, &end, 10);
        if (!*val || *end || fd < 0 || fd > INT_MAX) {
            return bad(item, "not a descriptor number");
        }
        o->consumer_fd = (int)fd;
    } else if (strcmp(key, SLUICE_OPT_RING_BYTES) == 0) {
        if (sluice_ring_bytes_parse(val, &o->ring_bytes) < 0) {
            return bad(
                item, "need a power of two from 256 KiB to 1 GiB, in bytes (or with K, M, G: 16M)");
        }
    } else if (strcmp(key, SLUICE_OPT_FILTER) == 0) {
        o->filter = val;
    } else if (strcmp(key, SLUICE_OPT_FILTER_NAME) == 0) {
        o->filter_name = val;
    } else if (strcmp(key, SLUICE_OPT_ENCODING) == 0) {
        if (strcmp(val, "block") != 0 && strcmp(val, "insn") != 0) {
            return bad(item, "want encoding=block or encoding=insn");
        }
        o->per_insn = strcmp(val, "insn") == 0;
    } else if (strcmp(key, SLUICE_OPT_LISTEN) == 0) {
        if (strcmp(val, "0") != 0 && strcmp(val, "1") != 0) {
            return bad(item, "want listen=0 or listen=1");
        }
        o->listen = val[0] == '1';
    } else if (strcmp(key, SLUICE_OPT_SYSCALLS) == 0) {
        if (strcmp(val, "0") != 0 && strcmp(val, "1") != 0) {
            return bad(item, "want syscalls=0 or syscalls=1");
        }
        o->syscalls = val[0] == '1';
    } else if (strcmp(key, SLUICE_OPT_WAIT_ATTACH) == 0) {
        long v = strtol(val, &end, 10);
        if (!*val || *end || v < 0 || v > SLUICE_MAX_CONSUMERS) {
            return bad(item, "want a number of consumers from 0 to 16");
        }
        o->wait_attach = (unsigned)v;
    } else if (strcmp(key, SLUICE_OPT_SET) == 0) {
        char *eq = strchr(val, '=');
        if (!eq || eq == val) {
            return bad(item, "want set=NAME=VALUE");
        }
        if (o->n_sets == OPTS_MAX_SETS) {
            return bad(item, "too many set= values");
        }
        *eq = '\0';
        o->sets[o->n_sets++] = (struct filter_set){val, eq + 1};
    } else {
        return bad(item, "unknown key");
    }
    return 0;
}

int opts_parse(const char *args, struct jitter_opts *o)
{
    char *copy = strdup(args ? args : ""), *p = copy, *item, *eq;
    int err;

    memset(o, 0, sizeof(*o));
    o->consumer_fd = -1;
    o->listen = 1;
    o->ring_bytes = SLUICE_RING_BYTES_DEFAULT;
    if (!copy) {
        return -ENOMEM;
    }
    while ((item = next_item(&p)) != NULL) {
        eq = strchr(item, '=');
        if (!eq) {
            return bad(item, "want key=value");
        }
        *eq = '\0';
        err = set_item(o, item, eq + 1, item);
        if (err) {
            return err;
        }
    }
    if (o->filter && !o->filter[0]) {
        return bad("filter=", "names no file");
    }
    if (o->n_sets && !o->filter) {
        return bad("set=", "sets a filter's knob: give filter= too");
    }
    if (!o->filter_name) {
        o->filter_name = o->filter;
    }
    return 0; /* copy stays: o's strings point into it */
}
