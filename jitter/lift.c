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
#include "../consumer/say.h"

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
#include "opts.h"
#include "ring.h"

static struct {
    struct filter *f; /* NULL: trace everything */
    const char *path;
    uint64_t faults[2]; /* hook_inst, hook_mem */
    int on;             /* 0: instrument nothing (no consumer attached); lift_enable() */
} L;

void lift_enable(int on)
{
    __atomic_store_n(&L.on, on, __ATOMIC_RELEASE);
}

int lift_instrumenting(void)
{
    return __atomic_load_n(&L.on, __ATOMIC_ACQUIRE);
}

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
    memcpy(slot->cursor + 1, msg, len);
    slot->cursor[0] = sluice_text_hdr(len);
    slot->cursor += words;
}

int lift_init(const struct jitter_opts *o)
{
    static const struct filter_host host = {.image_of = host_image_of, .print = host_print};
    char err[512];

    if (!o->filter || !*o->filter) {
        return 0;
    }
    /* Messages name what the user gave (F.c), not the object compiled from it. */
    L.path = o->filter_name && *o->filter_name ? o->filter_name : o->filter;
    if (filter_open_file(o->filter, o->sets, o->n_sets, &host, &L.f, err, sizeof(err)) < 0) {
        say("sluice-jitter: %s\n", err);
        return -EINVAL;
    }
    return 0;
}

/* Count a fault; report the first of each hook. */
static void fault(int which, uint64_t pc, int rc, const struct vm_error *err)
{
    static const char *const hook[2] = {"hook_inst", "hook_mem"};

    if (L.faults[which]++ == 0) {
        say("sluice-jitter: filter %s: %s failed at guest pc 0x%llx: %s (%s); traced "
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

    if (!__atomic_load_n(&L.on, __ATOMIC_ACQUIRE)) {
        return SLUICE_HOOK_NEVER;
    }
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

    if (!__atomic_load_n(&L.on, __ATOMIC_ACQUIRE)) {
        return 0;
    }
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
        say("sluice-jitter: filter %s: %llu hook_inst and %llu hook_mem runs failed "
            "(those were traced)\n",
            L.path, (unsigned long long)L.faults[0], (unsigned long long)L.faults[1]);
    }
    dropped = filter_prints_dropped(L.f);
    if (dropped) {
        say("sluice-jitter: filter %s: %llu trace_printk messages dropped (rate limit)\n", L.path,
            (unsigned long long)dropped);
    }
}
