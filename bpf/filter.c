/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * filter.c — a loaded filter (bpf/filter.h): the load sequence, runs of
 * its hooks, and its end.
 *
 * Owns struct filter: its programs, maps and globals, and the lock that lets
 * one run at a time touch them. Loading runs on the caller's thread (the
 * jitter's init, or the sluice command validating a filter) and calls the
 * stages of filter_internal.h in order. Runs come from vCPU threads at lift
 * time; QEMU serializes them already, so the lock is uncontended in practice
 * and only makes the documented promise (safe from several threads) true.
 */
#include "filter_internal.h"

#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- errors --------------------------------------------------------------------- */

int filter_fail(const struct filter_load *ld, int rc, const char *fmt, ...)
{
    va_list ap;
    char *p;
    int n;

    if (!ld->err || !ld->err_size) {
        return rc;
    }
    n = snprintf(ld->err, ld->err_size, "%s: ", ld->name);
    if (n >= 0 && (size_t)n < ld->err_size) {
        va_start(ap, fmt);
        vsnprintf(ld->err + n, ld->err_size - (size_t)n, fmt, ap);
        va_end(ap);
    }
    /* One line, whatever names a hostile object carries. */
    for (p = ld->err; *p; p++) {
        if ((unsigned char)*p < 0x20 || *p == 0x7f) {
            *p = '?';
        }
    }
    return rc;
}

/* ---- loading ----------------------------------------------------------------------- */

static uint64_t monotonic_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct filter *filter_new(const struct filter_host *host)
{
    struct filter *f = calloc(1, sizeof(*f));

    if (!f) {
        return NULL;
    }
    f->inst.section = "sluice/inst";
    f->mem.section = "sluice/mem";
    if (host) {
        f->host = *host;
    }
    pthread_mutex_init(&f->lock, NULL);
    f->prandom = FILTER_PRANDOM_SEED;
    f->clock_ns = monotonic_ns;
    return f;
}

static int load_stages(struct filter_load *ld, const void *buf, size_t size,
                       const struct filter_set *sets, size_t n_sets)
{
    int rc;

    if ((rc = filter_elf_check(ld, buf, size)) || (rc = filter_libbpf_open(ld, buf, size)) ||
        (rc = filter_build_data(ld)) || (rc = filter_apply_sets(ld, sets, n_sets))) {
        return rc;
    }
    return filter_build_progs(ld);
}

int filter_open_mem(const void *buf, size_t size, const char *name, const struct filter_set *sets,
                    size_t n_sets, const struct filter_host *host, struct filter **out, char *err,
                    size_t err_size)
{
    struct filter_load ld = {.name = name ? name : "<memory>", .err = err, .err_size = err_size};
    int rc;

    if (err && err_size) {
        err[0] = 0;
    }
    if (!out || !buf || (n_sets && !sets)) {
        return filter_fail(&ld, -EINVAL, "bad arguments");
    }
    *out = NULL;
    if (!(ld.f = filter_new(host))) {
        return filter_fail(&ld, -ENOMEM, "out of memory");
    }
    rc = load_stages(&ld, buf, size, sets, n_sets);
    bpf_object__close(ld.obj); /* NULL-safe */
    free(ld.refs);
    if (rc) {
        filter_free(ld.f);
        return rc;
    }
    *out = ld.f;
    return 0;
}

/* Read all of @fd (a regular file of @size bytes) into a new buffer. */
static int read_all(int fd, size_t size, uint8_t **out)
{
    uint8_t *buf = malloc(size ? size : 1);
    size_t got = 0;

    if (!buf) {
        return -ENOMEM;
    }
    while (got < size) {
        ssize_t n = read(fd, buf + got, size - got);

        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            free(buf);
            return n < 0 ? -errno : -EIO;
        }
        got += (size_t)n;
    }
    *out = buf;
    return 0;
}

int filter_open_file(const char *path, const struct filter_set *sets, size_t n_sets,
                     const struct filter_host *host, struct filter **out, char *err,
                     size_t err_size)
{
    struct filter_load ld = {.name = path ? path : "(null)", .err = err, .err_size = err_size};
    uint8_t *buf = NULL;
    struct stat st;
    int fd, rc;

    if (out) {
        *out = NULL;
    }
    /* O_NONBLOCK: a FIFO at the path is refused below, not waited on forever. */
    if (!path || (fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)) < 0) {
        rc = path ? -errno : -EINVAL;
        return filter_fail(&ld, rc, "cannot open: %s", strerror(-rc));
    }
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > FILTER_FILE_MAX) {
        close(fd);
        return filter_fail(&ld, -EINVAL, "not a regular file of at most %u bytes", FILTER_FILE_MAX);
    }
    rc = read_all(fd, (size_t)st.st_size, &buf);
    close(fd);
    if (rc) {
        return filter_fail(&ld, rc, "cannot read: %s", strerror(-rc));
    }
    rc = filter_open_mem(buf, (size_t)st.st_size, path, sets, n_sets, host, out, err, err_size);
    free(buf);
    return rc;
}

/* ---- runs --------------------------------------------------------------------------- */

bool filter_has_inst(const struct filter *f)
{
    return f->inst.insns != NULL;
}

bool filter_has_mem(const struct filter *f)
{
    return f->mem.insns != NULL;
}

/* Run @fp on @ctx; its int result must lie in [0, max]. */
static int run_hook(struct filter *f, struct filter_prog *fp, const void *ctx, size_t ctx_size,
                    int max, int *result, struct vm_error *err)
{
    struct vm_args args = {(void *)(uintptr_t)ctx, ctx_size, false, f->regions, f->n_regions, f};
    struct vm_error scratch;
    uint64_t r0 = 0;
    int32_t v;
    int rc;

    err = err ? err : &scratch;
    if (!fp->insns) {
        vm_error_set(err, SIZE_MAX, "the filter has no %s program", fp->section);
        return -ENOENT;
    }
    pthread_mutex_lock(&f->lock);
    rc = vm_run(&fp->vm, &args, &r0, err);
    pthread_mutex_unlock(&f->lock);
    if (rc) {
        return rc;
    }
    /* The hooks return int: the low 32 bits of r0 are the value, as the C ABI has it. */
    v = (int32_t)(uint32_t)r0;
    if (v < 0 || v > max) {
        vm_error_set(err, SIZE_MAX, "%s returned %d (must be 0 to %d)", fp->section, (int)v, max);
        return -ERANGE;
    }
    *result = v;
    return 0;
}

int filter_run_inst(struct filter *f, const struct sluice_inst_ctx *ctx, int *decision,
                    struct vm_error *err)
{
    return run_hook(f, &f->inst, ctx, sizeof(*ctx), SLUICE_ONCE, decision, err);
}

int filter_run_mem(struct filter *f, const struct sluice_mem_ctx *ctx, int *yes,
                   struct vm_error *err)
{
    return run_hook(f, &f->mem, ctx, sizeof(*ctx), 1, yes, err);
}

uint64_t filter_prints_dropped(const struct filter *f)
{
    return __atomic_load_n(&f->printk.dropped, __ATOMIC_RELAXED);
}

/* ---- the end -------------------------------------------------------------------------- */

void filter_free(struct filter *f)
{
    size_t i;

    if (!f) {
        return;
    }
    for (i = 0; i < f->n_maps; i++) {
        filter_map_destroy(&f->maps[i]);
    }
    for (i = 0; i < f->n_globals; i++) {
        free(f->globals[i].data);
    }
    free(f->maps);
    free(f->globals);
    free(f->inst.insns);
    free(f->mem.insns);
    pthread_mutex_destroy(&f->lock);
    free(f);
}
