/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * images.bpf.c — sluice_image_of and sluice_image_is: hook_inst records
 * what they return for ctx->pc in `out`.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <sluice/filter.h>

#include "results.h"

struct results out;

SEC("sluice/inst") int hook_inst(struct sluice_inst_ctx *ctx)
{
    struct sluice_image img = {};
    char libc[] = "libc.so.6";
    char full[] = "/usr/lib/libc.so.6";
    char part[] = "libc.so";

    out.v[0] = sluice_image_of(ctx->pc, &img, sizeof(img));
    out.v[1] = (__s64)img.base;
    out.v[2] = (__s64)img.offset;
    out.v[3] = img.id;
    out.v[4] = img.flags;
    out.v[5] = sluice_image_is(ctx->pc, libc, sizeof(libc));
    out.v[6] = sluice_image_is(ctx->pc, full, sizeof(full) - 1);
    out.v[7] = sluice_image_is(ctx->pc, part, sizeof(part));
    out.v[8] = sluice_image_of(ctx->pc, &img, sizeof(img) - 1);
    out.v[9] = sluice_image_is(ctx->pc, libc, 0);
    return SLUICE_NEVER;
}

char LICENSE[] SEC("license") = "GPL";
