/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * filters.c — the shipped filters (filters/NAME.bpf.o, as built) decide what
 * their comments say, on synthetic contexts: exact boundaries for range,
 * exactly one site in n for sample, image 0 for main_image (through a fake
 * filter_host.image_of).
 */
#include <criterion/criterion.h>
#include <errno.h>

#include "filter_test.h"

#define SHIPPED "FILTERS_DIR"

static int inst(struct filter *f, uint64_t pc, uint32_t flags)
{
    return test_inst(
        f, (struct sluice_inst_ctx){.pc = pc, .length = 4, .image_id = -1, .flags = flags});
}

static int mem(struct filter *f, uint64_t pc, uint32_t is_write)
{
    return test_mem(
        f, (struct sluice_mem_ctx){.pc = pc, .size = 8, .image_id = -1, .is_write = is_write});
}

static void no_mem(struct filter *f)
{
    struct sluice_mem_ctx c = {0};
    int yes;

    cr_assert_not(filter_has_mem(f));
    cr_assert_eq(filter_run_mem(f, &c, &yes, NULL), -ENOENT);
}

Test(shipped, all)
{
    struct filter *f = test_load(SHIPPED, "all", NULL, 0, NULL);

    cr_assert(filter_has_inst(f) && filter_has_mem(f));
    cr_assert_eq(inst(f, 0, 0), SLUICE_ALWAYS);
    cr_assert_eq(inst(f, UINT64_MAX, SLUICE_INST_ENDS_TB), SLUICE_ALWAYS);
    cr_assert_eq(mem(f, 0x401000, 0), 1);
    cr_assert_eq(mem(f, 0x401000, 1), 1);
    filter_free(f);
}

Test(shipped, coverage)
{
    struct filter *f = test_load(SHIPPED, "coverage", NULL, 0, NULL);

    cr_assert_eq(inst(f, 0x401000, 0), SLUICE_ONCE);
    cr_assert_eq(inst(f, 0x7fff00001000, SLUICE_INST_ENDS_TB), SLUICE_ONCE);
    no_mem(f);
    filter_free(f);
}

Test(shipped, range_defaults_trace_nothing)
{
    struct filter *f = test_load(SHIPPED, "range", NULL, 0, NULL);

    cr_assert_eq(inst(f, 0, 0), SLUICE_NEVER);
    cr_assert_eq(inst(f, 0x401000, 0), SLUICE_NEVER);
    cr_assert_eq(inst(f, UINT64_MAX, 0), SLUICE_NEVER);
    cr_assert_eq(mem(f, 0, 1), 0);
    filter_free(f);
}

Test(shipped, range_boundaries)
{
    static const struct filter_set sets[] = {{"lo", "0x401000"}, {"hi", "0x402000"}};
    struct filter *f = test_load(SHIPPED, "range", sets, 2, NULL);

    cr_assert_eq(inst(f, 0x400fff, 0), SLUICE_NEVER);
    cr_assert_eq(inst(f, 0x401000, 0), SLUICE_ALWAYS);
    cr_assert_eq(inst(f, 0x401fff, 0), SLUICE_ALWAYS);
    cr_assert_eq(inst(f, 0x402000, 0), SLUICE_NEVER);
    cr_assert_eq(mem(f, 0x400fff, 0), 0);
    cr_assert_eq(mem(f, 0x401000, 0), 1);
    cr_assert_eq(mem(f, 0x401fff, 1), 1);
    cr_assert_eq(mem(f, 0x402000, 1), 0);
    filter_free(f);
}

Test(shipped, range_to_the_top_of_memory)
{
    static const struct filter_set sets[] = {{"lo", "0"}, {"hi", "18446744073709551615"}};
    struct filter *f = test_load(SHIPPED, "range", sets, 2, NULL);

    cr_assert_eq(inst(f, 0, 0), SLUICE_ALWAYS);
    cr_assert_eq(inst(f, UINT64_MAX - 1, 0), SLUICE_ALWAYS);
    cr_assert_eq(inst(f, UINT64_MAX, 0), SLUICE_NEVER);
    filter_free(f);
}

static int fake_image_of(void *user, uint64_t pc, struct sluice_image *out, const char **path)
{
    (void)user;
    if (pc >= 0x400000 && pc < 0x480000) {
        *out = (struct sluice_image){0x400000, pc - 0x400000, 0, SLUICE_IMAGE_MAIN};
        *path = "/bin/prog";
        return 0;
    }
    if (pc >= 0x7f0000000000 && pc < 0x7f0000100000) {
        *out = (struct sluice_image){0x7f0000000000, pc - 0x7f0000000000, 1, 0};
        *path = "/lib/ld-linux.so.2";
        return 0;
    }
    return -ENOENT;
}

Test(shipped, main_image)
{
    const struct filter_host host = {.image_of = fake_image_of};
    struct filter *f = test_load(SHIPPED, "main_image", NULL, 0, &host);

    cr_assert_eq(inst(f, 0x3fffff, 0), SLUICE_NEVER);
    cr_assert_eq(inst(f, 0x400000, 0), SLUICE_ALWAYS);
    cr_assert_eq(inst(f, 0x47ffff, 0), SLUICE_ALWAYS);
    cr_assert_eq(inst(f, 0x480000, 0), SLUICE_NEVER);
    cr_assert_eq(inst(f, 0x7f0000000010, 0), SLUICE_NEVER, "image 1");
    cr_assert_eq(mem(f, 0x400010, 1), 1);
    cr_assert_eq(mem(f, 0x7f0000000010, 0), 0);
    cr_assert_eq(mem(f, 0x10, 0), 0, "no image");
    filter_free(f);
}

Test(shipped, main_image_without_host_traces_nothing)
{
    struct filter *f = test_load(SHIPPED, "main_image", NULL, 0, NULL);

    cr_assert_eq(inst(f, 0x400000, 0), SLUICE_NEVER);
    cr_assert_eq(mem(f, 0x400000, 0), 0);
    filter_free(f);
}

Test(shipped, mem_writes)
{
    struct filter *f = test_load(SHIPPED, "mem_writes", NULL, 0, NULL);

    cr_assert_eq(inst(f, 0x401000, 0), SLUICE_NEVER);
    cr_assert_eq(inst(f, 0x401000, SLUICE_INST_ENDS_TB), SLUICE_NEVER);
    cr_assert_eq(mem(f, 0x401000, 1), 1);
    cr_assert_eq(mem(f, 0x401000, 0), 0);
    filter_free(f);
}

Test(shipped, sample_every_third)
{
    static const struct filter_set n3 = {"n", "3"};
    static const int want[9] = {1, 0, 0, 1, 0, 0, 1, 0, 0};
    struct filter *f = test_load(SHIPPED, "sample", &n3, 1, NULL);

    cr_assert_eq(inst(f, 0x401000, 0), SLUICE_NEVER);
    for (int i = 0; i < 9; i++) {
        cr_assert_eq(mem(f, 0x401000 + 4 * (uint64_t)i, i % 2), want[i], "site %d", i);
    }
    filter_free(f);
}

Test(shipped, sample_default_one_in_100)
{
    struct filter *f = test_load(SHIPPED, "sample", NULL, 0, NULL);
    int recorded = 0;

    for (int i = 0; i < 1000; i++) {
        int yes = mem(f, 0x401000, 0);

        cr_assert_eq(yes, i % 100 == 0, "site %d", i);
        recorded += yes;
    }
    cr_assert_eq(recorded, 10);
    filter_free(f);
}

Test(shipped, sample_zero_records_nothing)
{
    static const struct filter_set n0 = {"n", "0"};
    struct filter *f = test_load(SHIPPED, "sample", &n0, 1, NULL);

    for (int i = 0; i < 10; i++) {
        cr_assert_eq(mem(f, 0x401000, 0), 0);
    }
    filter_free(f);
}

Test(shipped, branches)
{
    struct filter *f = test_load(SHIPPED, "branches", NULL, 0, NULL);

    cr_assert_eq(inst(f, 0x401000, 0), SLUICE_NEVER);
    cr_assert_eq(inst(f, 0x401000, SLUICE_INST_ENDS_TB), SLUICE_ALWAYS);
    cr_assert_eq(inst(f, 0x401000, SLUICE_INST_ENDS_TB | 0x100), SLUICE_ALWAYS);
    cr_assert_eq(inst(f, 0x401000, 0x100), SLUICE_NEVER);
    no_mem(f);
    filter_free(f);
}
