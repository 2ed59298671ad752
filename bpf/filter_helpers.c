/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * filter_helpers.c — the helpers filter programs may call (IDs in
 * include/sluice/filter.h) and the table the verifier checks calls against.
 *
 * Runs inside vm_run(), on the thread running the filter, with the filter's
 * lock held (filter.c): helpers may touch maps and the filter's state freely
 * but must not call back into filter_run_*(). Every argument is untrusted: a
 * map argument must be the address of one of this filter's maps (compared,
 * never dereferenced before that), and every pointer goes through
 * vm_run_check() before use; a bad one stops the run (vm_run_fault()).
 */
#include "filter_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <linux/bpf.h>
#include <string.h>

/* A helper's int result (a negative errno, or an id) sign-extended into r0. */
#define SX(v) ((uint64_t)(int64_t)(v))

static struct filter *filter_of(struct vm_run *run)
{
    return vm_run_user(run);
}

/* ---- maps (1, 2, 3) ------------------------------------------------------------ */

static struct filter_map *map_arg(struct vm_run *run, uint64_t addr, const char *helper)
{
    struct filter *f = filter_of(run);
    size_t i;

    for (i = 0; i < f->n_maps; i++) {
        if ((uint64_t)(uintptr_t)&f->maps[i] == addr) {
            return &f->maps[i];
        }
    }
    vm_run_fault(run, "%s: 0x%" PRIx64 " is not a map of this filter", helper, addr);
    return NULL;
}

/* The key (or value) at program address @addr, @size readable bytes, or NULL (run stopped). */
static const void *mem_arg(struct vm_run *run, const struct filter_map *m, uint64_t addr,
                           uint32_t size, const char *helper, const char *what)
{
    const void *p = vm_run_check(run, addr, size, false);

    if (!p) {
        vm_run_fault(run, "%s: map '%s': %s at 0x%" PRIx64 " is not %u readable bytes", helper,
                     m->name, what, addr, size);
    }
    return p;
}

static uint64_t h_map_lookup(struct vm_run *run, uint64_t r1, uint64_t r2, uint64_t r3, uint64_t r4,
                             uint64_t r5)
{
    const char *name = "bpf_map_lookup_elem";
    struct filter_map *m = map_arg(run, r1, name);
    const void *key = m ? mem_arg(run, m, r2, m->key_size, name, "key") : NULL;
    void *value;

    (void)r3, (void)r4, (void)r5;
    if (!key || !(value = filter_map_lookup(m, key))) {
        return 0;
    }
    if (vm_run_add_region(run, value, m->value_size, true) < 0) {
        vm_run_fault(run, "%s: more than %d map values and globals in one run", name,
                     VM_MAX_REGIONS);
        return 0;
    }
    return (uint64_t)(uintptr_t)value;
}

static uint64_t h_map_update(struct vm_run *run, uint64_t r1, uint64_t r2, uint64_t r3, uint64_t r4,
                             uint64_t r5)
{
    const char *name = "bpf_map_update_elem";
    struct filter_map *m = map_arg(run, r1, name);
    const void *key = m ? mem_arg(run, m, r2, m->key_size, name, "key") : NULL;
    const void *value = key ? mem_arg(run, m, r3, m->value_size, name, "value") : NULL;

    (void)r5;
    return value ? SX(filter_map_update(m, key, value, r4)) : SX(-EFAULT);
}

static uint64_t h_map_delete(struct vm_run *run, uint64_t r1, uint64_t r2, uint64_t r3, uint64_t r4,
                             uint64_t r5)
{
    const char *name = "bpf_map_delete_elem";
    struct filter_map *m = map_arg(run, r1, name);
    const void *key = m ? mem_arg(run, m, r2, m->key_size, name, "key") : NULL;

    (void)r3, (void)r4, (void)r5;
    return key ? SX(filter_map_delete(m, key)) : SX(-EFAULT);
}

/* ---- bpf_trace_printk (6) ---------------------------------------------------------- */

static uint64_t h_trace_printk(struct vm_run *run, uint64_t r1, uint64_t r2, uint64_t r3,
                               uint64_t r4, uint64_t r5)
{
    struct filter *f = filter_of(run);
    const uint64_t args[PRINTK_MAX_ARGS] = {r3, r4, r5};
    const char *fmt = r2 ? vm_run_check(run, r1, r2, false) : NULL;
    char msg[PRINTK_MSG_MAX];
    int len;

    if (r2 && !fmt) {
        vm_run_fault(run,
                     "bpf_trace_printk: format at 0x%" PRIx64 " is not %" PRIu64 " readable bytes",
                     r1, r2);
        return SX(-EFAULT);
    }
    if (!fmt || fmt[r2 - 1] != 0) {
        return SX(-EINVAL); /* the kernel's rule: fmt_size counts the format's NUL */
    }
    if ((len = printk_format(run, fmt, args, msg, sizeof(msg))) < 0) {
        return SX(len);
    }
    if (!printk_admit(&f->printk, f->clock_ns())) {
        return SX(-EBUSY);
    }
    if (f->host.print) {
        f->host.print(f->host.user, msg, (size_t)len);
    }
    return (uint64_t)len;
}

/* ---- bpf_get_prandom_u32 (7) ------------------------------------------------------- */

static uint64_t h_prandom(struct vm_run *run, uint64_t r1, uint64_t r2, uint64_t r3, uint64_t r4,
                          uint64_t r5)
{
    struct filter *f = filter_of(run);
    uint64_t x = f->prandom;

    (void)r1, (void)r2, (void)r3, (void)r4, (void)r5;
    /* xorshift64*: the high half of the product is the well-mixed part. */
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    f->prandom = x;
    return (x * 0x2545f4914f6cdd1dull) >> 32;
}

/* ---- sluice's own: images (1001, 1002) ----------------------------------------------- */

/* The image holding @pc through the host's callback: 0, or -ENOENT (also when there is no host). */
static int image_of(struct filter *f, uint64_t pc, struct sluice_image *img, const char **path)
{
    memset(img, 0, sizeof(*img));
    *path = NULL;
    if (!f->host.image_of || f->host.image_of(f->host.user, pc, img, path) < 0) {
        return -ENOENT;
    }
    return 0;
}

static uint64_t h_image_of(struct vm_run *run, uint64_t r1, uint64_t r2, uint64_t r3, uint64_t r4,
                           uint64_t r5)
{
    struct sluice_image img;
    const char *path;
    void *out;

    (void)r4, (void)r5;
    if (r3 != sizeof(img)) {
        return SX(-EINVAL);
    }
    if (!(out = vm_run_check(run, r2, sizeof(img), true))) {
        vm_run_fault(run, "sluice_image_of: out at 0x%" PRIx64 " is not %zu writable bytes", r2,
                     sizeof(img));
        return SX(-EFAULT);
    }
    if (image_of(filter_of(run), r1, &img, &path) < 0) {
        return SX(-ENOENT);
    }
    memcpy(out, &img, sizeof(img));
    return SX(img.id);
}

/* Whether @path is @name (@len bytes), in full or as its last component. */
static bool path_is(const char *path, const char *name, size_t len)
{
    const char *base = strrchr(path, '/');

    base = base ? base + 1 : path;
    return (strlen(path) == len && memcmp(path, name, len) == 0) ||
           (strlen(base) == len && memcmp(base, name, len) == 0);
}

static uint64_t h_image_is(struct vm_run *run, uint64_t r1, uint64_t r2, uint64_t r3, uint64_t r4,
                           uint64_t r5)
{
    struct sluice_image img;
    const char *path;
    const char *name;

    (void)r4, (void)r5;
    if (r3 == 0 || r3 > 4096) {
        return SX(-EINVAL);
    }
    if (!(name = vm_run_check(run, r2, r3, false))) {
        vm_run_fault(run,
                     "sluice_image_is: name at 0x%" PRIx64 " is not %" PRIu64 " readable bytes", r2,
                     r3);
        return SX(-EFAULT);
    }
    if (image_of(filter_of(run), r1, &img, &path) < 0 || !path) {
        return 0;
    }
    return path_is(path, name, strnlen(name, r3)) ? 1 : 0;
}

/* ---- the table ------------------------------------------------------------------------ */

static const vm_helper_fn helpers[SLUICE_HELPER_IMAGE_IS + 1] = {
    [BPF_FUNC_map_lookup_elem] = h_map_lookup, [BPF_FUNC_map_update_elem] = h_map_update,
    [BPF_FUNC_map_delete_elem] = h_map_delete, [BPF_FUNC_trace_printk] = h_trace_printk,
    [BPF_FUNC_get_prandom_u32] = h_prandom,    [SLUICE_HELPER_IMAGE_OF] = h_image_of,
    [SLUICE_HELPER_IMAGE_IS] = h_image_is,
};

const struct vm_env filter_vm_env = {helpers, sizeof(helpers) / sizeof(helpers[0])};
