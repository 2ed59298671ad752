/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * filter_test.h — shared by the filter loader's unit tests: where meson put
 * the test objects ($FILTERS_DIR: filters/; $FILTER_GOOD_DIR, $FILTER_BAD_DIR:
 * tests/unit/filter_good, filter_bad), loading one, running its hooks, and
 * reading the `struct results` a test program leaves at the start of .bss.
 */
#ifndef SLUICE_TESTS_FILTER_TEST_H
#define SLUICE_TESTS_FILTER_TEST_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "filter_good/results.h"
#include "filter_internal.h"

/* Path of object @name (without .bpf.o) in the directory named by $@env. */
static inline void test_path(char *buf, size_t size, const char *env, const char *name)
{
    const char *dir = getenv(env);

    cr_assert(dir, "$%s is not set (run through meson test)", env);
    snprintf(buf, size, "%s/%s.bpf.o", dir, name);
}

/* Load an object that must load. */
static inline struct filter *test_load(const char *env, const char *name,
                                       const struct filter_set *sets, size_t n_sets,
                                       const struct filter_host *host)
{
    char path[4096], err[512];
    struct filter *f = NULL;
    int rc;

    test_path(path, sizeof(path), env, name);
    rc = filter_open_file(path, sets, n_sets, host, &f, err, sizeof(err));
    cr_assert_eq(rc, 0, "%s: rc %d: %s", name, rc, err);
    cr_assert_not_null(f);
    return f;
}

/* Load an object that must be refused with -EINVAL; its message goes to err. */
static inline void test_refuse(const char *env, const char *name, const struct filter_set *sets,
                               size_t n_sets, char *err, size_t err_size)
{
    char path[4096];
    struct filter *f = (struct filter *)1;
    int rc;

    test_path(path, sizeof(path), env, name);
    rc = filter_open_file(path, sets, n_sets, NULL, &f, err, err_size);
    cr_assert_eq(rc, -EINVAL, "%s: rc %d (%s)", name, rc, err);
    cr_assert_null(f, "%s: *out must be NULL on failure", name);
    cr_assert_eq(strncmp(err, path, strlen(path)), 0, "message names the file: %s", err);
    cr_assert_null(strchr(err, '\n'), "one line: %s", err);
}

/* hook_inst's decision on @c (the run must succeed). */
static inline int test_inst(struct filter *f, struct sluice_inst_ctx c)
{
    struct vm_error err = {0};
    int d = -1;
    int rc = filter_run_inst(f, &c, &d, &err);

    cr_assert_eq(rc, 0, "hook_inst on pc %#llx: rc %d: %s", (unsigned long long)c.pc, rc, err.msg);
    return d;
}

/* hook_mem's answer on @c (the run must succeed). */
static inline int test_mem(struct filter *f, struct sluice_mem_ctx c)
{
    struct vm_error err = {0};
    int yes = -1;
    int rc = filter_run_mem(f, &c, &yes, &err);

    cr_assert_eq(rc, 0, "hook_mem on pc %#llx: rc %d: %s", (unsigned long long)c.pc, rc, err.msg);
    return yes;
}

/* The global section called @name (".bss", ".rodata", ...). */
static inline struct filter_global *test_global(struct filter *f, const char *name)
{
    for (size_t i = 0; i < f->n_globals; i++) {
        if (strcmp(f->globals[i].name, name) == 0) {
            return &f->globals[i];
        }
    }
    cr_assert_fail("no global section %s", name);
    return NULL;
}

/* What the program left in `out`, its only .bss variable. */
static inline const struct results *test_results(struct filter *f)
{
    struct filter_global *bss = test_global(f, ".bss");

    cr_assert_geq(bss->size, sizeof(struct results));
    return (const struct results *)bss->data;
}

/* The map called @name. */
static inline struct filter_map *test_map(struct filter *f, const char *name)
{
    for (size_t i = 0; i < f->n_maps; i++) {
        if (strcmp(f->maps[i].name, name) == 0) {
            return &f->maps[i];
        }
    }
    cr_assert_fail("no map %s", name);
    return NULL;
}

#endif /* SLUICE_TESTS_FILTER_TEST_H */
