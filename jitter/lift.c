/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * lift.c — lift-time decisions (see lift.h).
 *
 * Everything here runs when QEMU translates, never while the guest runs,
 * except lift_once_hit (once per pc). A filter that faults never stops the
 * lift: the instruction or access is then traced (the fallback loses
 * nothing), the fault is counted, and the first one is reported with the
 * guest pc and the filter's instruction index.
 */
#include "lift.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sluice/ctl.h>
#include <sluice/filter.h>
#include <sluice/record.h>

#include "filter.h"
#include "image.h"
#include "once.h"
#include "ring.h"

static struct {
    struct filter *f; /* NULL: trace everything */
    const char *path;
    uint64_t faults[2]; /* hook_inst, hook_mem */
    char *sets_buf;     /* SLUICE_FILTER_SET, split in place */
} L;

/* The thread lifting now: where trace_printk messages go. */
static __thread struct sluice_thread_slot *lifting;

static int host_image_of(void *user, uint64_t pc, struct sluice_image *out, const char **path)
{
    (void)user;
    return image_of(pc, out, path);
}

/* A message goes in-band, in the lifting thread's ring, before the TB it is about. */
static void host_print(void *user, const char *msg, size_t len)
{
    struct sluice_thread_slot *slot = lifting;
    size_t words;

    (void)user;
    if (!slot || !slot->ring || len == 0) {
        return;
    }
    len = len > SLUICE_TEXT_MAX ? SLUICE_TEXT_MAX : len;
    words = 1 + (len + 7) / 8;
    if (slot->cursor + words > slot->limit) {
        ring_reserve(slot->ring, words * 8);
    }
    slot->cursor[words - 1] = 0; /* zero padding */
    slot->cursor[0] = sluice_text_hdr(len);
    memcpy(slot->cursor + 1, msg, len);
    slot->cursor += words;
}

/* Split "A=1\nB=2" into @p sets; returns how many, or -1 on a line without '='. */
static int parse_sets(char *buf, struct filter_set *sets, size_t max)
{
    size_t n = 0;
    char *line, *save = NULL, *eq;

    for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        eq = strchr(line, '=');
        if (!eq || n == max) {
            return -1;
        }
        *eq = '\0';
        sets[n++] = (struct filter_set){line, eq + 1};
    }
    return (int)n;
}

int lift_init(void)
{
    static const struct filter_host host = {.image_of = host_image_of, .print = host_print};
    const char *sets_env = getenv(SLUICE_FILTER_SET_ENV);
    struct filter_set sets[64];
    char err[512];
    int n = 0;

    const char *path = getenv(SLUICE_FILTER_ENV);

    if (!path || !*path) {
        return 0;
    }
    /* Messages name what the user gave (F.c), not the object compiled from it. */
    L.path = getenv(SLUICE_FILTER_NAME_ENV);
    L.path = L.path && *L.path ? L.path : path;
    if (sets_env && *sets_env) {
        L.sets_buf = strdup(sets_env);
        n = L.sets_buf ? parse_sets(L.sets_buf, sets, 64) : -1;
        if (n < 0) {
            fprintf(stderr, "sluice-jitter: %s: malformed (want NAME=VALUE lines, at most 64)\n",
                    SLUICE_FILTER_SET_ENV);
            return -EINVAL;
        }
    }
    if (filter_open_file(path, sets, (size_t)n, &host, &L.f, err, sizeof(err)) < 0) {
        fprintf(stderr, "sluice-jitter: %s\n", err);
        return -EINVAL;
    }
    return 0;
}

/* Count a fault; report the first of each hook. */
static void fault(int which, uint64_t pc, int rc, const struct vm_error *err)
{
    static const char *const hook[2] = {"hook_inst", "hook_mem"};

    if (L.faults[which]++ == 0) {
        fprintf(stderr,
                "sluice-jitter: filter %s: %s failed at guest pc 0x%llx: %s (%s); traced "
                "instead; later faults are counted\n",
                L.path, hook[which], (unsigned long long)pc, err->msg, strerror(-rc));
    }
}

static void fill_image(uint64_t pc, __u64 *base, __s32 *id)
{
    struct sluice_image img;

    if (image_of(pc, &img, NULL) == 0) {
        *base = img.base;
        *id = img.id;
    } else {
        *base = 0;
        *id = -1;
    }
}

int lift_hook_inst(struct sluice_thread_slot *slot, const struct sluice_lift_insn *insn)
{
    struct sluice_inst_ctx ctx = {0};
    struct vm_error err;
    int decision;
    int rc;

    if (!L.f) {
        return SLUICE_HOOK_ALWAYS;
    }
    if (!filter_has_inst(L.f)) {
        return SLUICE_HOOK_NEVER;
    }
    ctx.pc = insn->pc;
    ctx.length = insn->length;
    ctx.flags = insn->flags & SLUICE_LIFT_ENDS_TB ? SLUICE_INST_ENDS_TB : 0;
    memcpy(ctx.bytes, insn->bytes, sizeof(ctx.bytes));
    fill_image(insn->pc, &ctx.image_base, &ctx.image_id);
    lifting = slot;
    rc = filter_run_inst(L.f, &ctx, &decision, &err);
    lifting = NULL;
    if (rc < 0) {
        fault(0, insn->pc, rc, &err);
        return SLUICE_HOOK_ALWAYS;
    }
    if (decision == SLUICE_ONCE && once_seen(insn->pc)) {
        return SLUICE_HOOK_NEVER;
    }
    return decision;
}

int lift_hook_mem(struct sluice_thread_slot *slot, uint64_t pc, uint32_t size, int is_write)
{
    struct sluice_mem_ctx ctx = {0};
    struct vm_error err;
    int yes;
    int rc;

    if (!L.f) {
        return 1;
    }
    if (!filter_has_mem(L.f)) {
        return 0;
    }
    ctx.pc = pc;
    ctx.size = size;
    ctx.is_write = is_write != 0;
    fill_image(pc, &ctx.image_base, &ctx.image_id);
    lifting = slot;
    rc = filter_run_mem(L.f, &ctx, &yes, &err);
    lifting = NULL;
    if (rc < 0) {
        fault(1, pc, rc, &err);
        return 1;
    }
    return yes;
}

int lift_once_hit(uint64_t pc)
{
    return once_claim(pc);
}

void lift_report(void)
{
    uint64_t dropped;

    if (!L.f) {
        return;
    }
    if (L.faults[0] + L.faults[1]) {
        fprintf(stderr,
                "sluice-jitter: filter %s: %llu hook_inst and %llu hook_mem runs failed "
                "(those were traced)\n",
                L.path, (unsigned long long)L.faults[0], (unsigned long long)L.faults[1]);
    }
    dropped = filter_prints_dropped(L.f);
    if (dropped) {
        fprintf(stderr,
                "sluice-jitter: filter %s: %llu trace_printk messages dropped (rate limit)\n",
                L.path, (unsigned long long)dropped);
    }
}
