/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * filter_run.c — filters that load (tests/unit/filter_good/) do what their
 * C says: map helpers with the kernel's semantics, globals set with --set
 * and kept across runs, bpf-to-bpf calls, bpf_trace_printk's formatting and
 * rate limit, the image helpers; and helper misuse stops a run with an
 * error, never a crash. Expected values are written out by hand.
 */
#include <criterion/criterion.h>
#include <errno.h>

#include "filter_test.h"

#define GOOD "FILTER_GOOD_DIR"

static const struct sluice_inst_ctx ctx0 = {.pc = 0x401000, .length = 4, .image_id = -1};

static struct sluice_inst_ctx inst_ctx(uint64_t pc, uint32_t length, uint32_t flags)
{
    struct sluice_inst_ctx c = ctx0;

    c.pc = pc;
    c.length = length;
    c.flags = flags;
    return c;
}

/* ---- maps ----------------------------------------------------------------------- */

Test(run, map_helpers_follow_the_kernel)
{
    static const int64_t want[] = {/* array, 4 entries */
                                   0, -EEXIST, 0, -E2BIG, -EINVAL, -EINVAL, 13, 0, -1,
                                   /* hash, 2 entries */
                                   -ENOENT, 0, -EEXIST, 0, -E2BIG, 0, -ENOENT, 0, 0, 6, -1, 7,
                                   -EINVAL};
    struct filter *f = test_load(GOOD, "maps", NULL, 0, NULL);
    const struct results *r = test_results(f);

    cr_assert_eq(test_inst(f, inst_ctx(0x1000, 4, 0)), SLUICE_NEVER);
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        cr_assert_eq(r->v[i], want[i], "step %zu: got %lld, want %lld", i, (long long)r->v[i],
                     (long long)want[i]);
    }
    filter_free(f);
}

Test(run, map_values_persist_across_runs)
{
    struct filter *f = test_load(GOOD, "maps", NULL, 0, NULL);
    uint32_t zero = 0;
    uint64_t *runs;

    for (int i = 0; i < 3; i++) {
        cr_assert_eq(test_inst(f, inst_ctx(0x1000, 4, 1)), SLUICE_ALWAYS);
    }
    runs = filter_map_lookup(test_map(f, "arr"), &zero);
    cr_assert_eq(*runs, 3);
    filter_free(f);
}

/* ---- globals ------------------------------------------------------------------------ */

Test(run, globals_defaults_and_counters)
{
    struct filter *f = test_load(GOOD, "globals", NULL, 0, NULL);
    const struct results *r = test_results(f);

    cr_assert_not(test_global(f, ".rodata")->writable);
    cr_assert(test_global(f, ".data")->writable);
    cr_assert(test_global(f, ".bss")->writable);
    cr_assert_eq(test_inst(f, ctx0), SLUICE_ALWAYS);
    cr_assert_eq(r->v[0], 8);
    cr_assert_eq(r->v[1], -1);
    cr_assert_eq(r->v[2], 0);
    cr_assert_eq(r->v[3], 0);
    cr_assert_eq(r->v[4], -100);
    cr_assert_eq(r->v[5], 0);
    cr_assert_eq(r->v[6], 1000); /* .data, initialised */
    cr_assert_eq(r->v[7], 1);    /* .bss counter */
    cr_assert_str_eq((const char *)r->tag, "none");
    cr_assert_eq(test_inst(f, ctx0), SLUICE_ALWAYS);
    cr_assert_eq(r->v[6], 1001);
    cr_assert_eq(r->v[7], 2);
    filter_free(f);
}

Test(run, globals_set_from_the_command_line)
{
    static const struct filter_set sets[] = {
        {"width", "1"},
        {"width", "255"}, /* the last one wins */
        {"delta", "-32768"},
        {"verbose", "true"},
        {"mode", "MODE_SLOW"},
        {"offset", "-0x10"},
        {"big", "0xffffffffffffffff"},
        {"tag", "abcdefg"},
        {"lifts", "7"}, /* .data can be set too */
    };
    struct filter *f = test_load(GOOD, "globals", sets, sizeof(sets) / sizeof(sets[0]), NULL);
    const struct results *r = test_results(f);

    cr_assert_eq(test_inst(f, ctx0), SLUICE_ALWAYS);
    cr_assert_eq(r->v[0], 255);
    cr_assert_eq(r->v[1], -32768);
    cr_assert_eq(r->v[2], 1);
    cr_assert_eq(r->v[3], 9);
    cr_assert_eq(r->v[4], -16);
    cr_assert_eq(r->v[5], -1);
    cr_assert_eq(r->v[6], 7);
    cr_assert_str_eq((const char *)r->tag, "abcdefg");
    filter_free(f);
}

Test(run, globals_set_by_number_and_bool_digits)
{
    static const struct filter_set sets[] = {
        {"mode", "5"}, {"verbose", "0"}, {"delta", "32767"}, {"tag", ""}};
    struct filter *f = test_load(GOOD, "globals", sets, sizeof(sets) / sizeof(sets[0]), NULL);
    const struct results *r = test_results(f);

    cr_assert_eq(test_inst(f, ctx0), SLUICE_ALWAYS);
    cr_assert_eq(r->v[3], 5);
    cr_assert_eq(r->v[2], 0);
    cr_assert_eq(r->v[1], 32767);
    cr_assert_str_eq((const char *)r->tag, "");
    filter_free(f);
}

/* ---- bpf-to-bpf calls ---------------------------------------------------------------- */

Test(run, subprograms)
{
    struct filter *f = test_load(GOOD, "calls", NULL, 0, NULL);

    cr_assert_gt(f->inst.n, f->inst.main_n, "subprograms appended after the section's code");
    cr_assert_eq(test_inst(f, inst_ctx(0x1000, 4, 0)), SLUICE_ALWAYS);
    cr_assert_eq(test_inst(f, inst_ctx(0x1000, 5, 0)), SLUICE_ONCE);
    cr_assert_eq(test_inst(f, inst_ctx(0x1000, 3, 0)), SLUICE_NEVER);
    cr_assert_eq(test_mem(f, (struct sluice_mem_ctx){.pc = 1, .size = 4}), 1);
    cr_assert_eq(test_mem(f, (struct sluice_mem_ctx){.pc = 1, .size = 8}), 0);
    filter_free(f);
}

/* ---- bpf_trace_printk ------------------------------------------------------------------- */

static char msgs[256][PRINTK_MSG_MAX];
static unsigned n_msgs;
static uint64_t now_ns;

static void print_cb(void *user, const char *msg, size_t len)
{
    cr_assert_eq(user, &n_msgs);
    cr_assert_eq(strlen(msg), len, "NUL after len bytes");
    if (n_msgs < 256) {
        memcpy(msgs[n_msgs], msg, len + 1);
    }
    n_msgs++;
}

static uint64_t fake_clock(void)
{
    return now_ns;
}

static struct filter *printk_filter(void)
{
    const struct filter_host host = {.print = print_cb, .user = &n_msgs};
    struct filter *f = test_load(GOOD, "printk", NULL, 0, &host);

    n_msgs = 0;
    now_ns = 5000000000ull;
    f->clock_ns = fake_clock;
    return f;
}

/* Run the printk program with format @flags; return what bpf_trace_printk returned. */
static int64_t print(struct filter *f, uint32_t flags, uint64_t pc)
{
    struct sluice_inst_ctx c = inst_ctx(pc, 4, flags);

    c.image_id = -3;
    cr_assert_eq(test_inst(f, c), SLUICE_NEVER);
    return test_results(f)->v[0];
}

Test(printk, formats)
{
    static const char *const want[] = {
        "pc 401000 len 4",         "-3 -5 42", "beef BEEF 401000",        "[hello] [z] 100%",
        "[   42] [42   ] [0002a]", "0x401000", "-1 18446744073709551615",
    };
    struct filter *f = printk_filter();

    for (uint32_t i = 0; i < 7; i++) {
        cr_assert_eq(print(f, i, 0x401000), (int64_t)strlen(want[i]), "format %u", i);
        cr_assert_eq(n_msgs, i + 1);
        cr_assert_str_eq(msgs[i], want[i]);
    }
    cr_assert_eq(print(f, 7, 0x401000), -EINVAL, "%%q is refused");
    cr_assert_eq(n_msgs, 7, "no message for a bad format");
    cr_assert_eq(filter_prints_dropped(f), 0);
    filter_free(f);
}

Test(printk, string_argument_must_be_readable)
{
    struct filter *f = printk_filter();
    struct sluice_inst_ctx c = inst_ctx(0x401000, 4, 8);
    struct vm_error err;
    int d;

    cr_assert_eq(filter_run_inst(f, &c, &d, &err), -ECANCELED);
    cr_assert(strstr(err.msg, "bpf_trace_printk: %s argument 0x401000 is not a readable string"),
              "%s", err.msg);
    cr_assert_eq(n_msgs, 0);
    filter_free(f);
}

Test(printk, rate_limit_is_100_per_second_window)
{
    struct filter *f = printk_filter();
    int busy = 0;

    for (int i = 0; i < 150; i++) {
        busy += print(f, 9, 0) == -EBUSY;
    }
    cr_assert_eq(n_msgs, 100);
    cr_assert_eq(busy, 50);
    cr_assert_eq(filter_prints_dropped(f), 50);
    cr_assert_str_eq(msgs[99], "tick");

    now_ns += 999999999; /* the first 100 are still less than a second old */
    cr_assert_eq(print(f, 9, 0), -EBUSY);
    cr_assert_eq(filter_prints_dropped(f), 51);

    now_ns = 6000000000ull; /* exactly one second later: they have left the window */
    for (int i = 0; i < 101; i++) {
        print(f, 9, 0);
    }
    cr_assert_eq(n_msgs, 200);
    cr_assert_eq(filter_prints_dropped(f), 52);
    filter_free(f);
}

Test(printk, no_host_still_formats_and_counts)
{
    struct filter *f = test_load(GOOD, "printk", NULL, 0, NULL);

    f->clock_ns = fake_clock;
    now_ns = 1;
    cr_assert_eq(print(f, 9, 0), 4);
    filter_free(f);
}

/* ---- faults ----------------------------------------------------------------------------- */

/* Run the faults program with @flags: must fail with @rc and a message containing @want. */
static void faults(uint32_t flags, int rc, const char *want)
{
    struct filter *f = test_load(GOOD, "faults", NULL, 0, NULL);
    struct sluice_inst_ctx c = inst_ctx(0x401000, 7, flags);
    struct vm_error err = {0};
    int d = -1;

    cr_assert_eq(filter_run_inst(f, &c, &d, &err), rc, "flags %u: %s", flags, err.msg);
    cr_assert(strstr(err.msg, want), "flags %u: want \"%s\" in \"%s\"", flags, want, err.msg);
    cr_assert_eq(d, -1, "no decision on failure");
    filter_free(f);
}

Test(faults, bogus_map_pointer)
{
    faults(1, -ECANCELED, "helper 1: bpf_map_lookup_elem: 0x401000 is not a map of this filter");
}

Test(faults, key_out_of_bounds)
{
    faults(2, -ECANCELED, "bpf_map_lookup_elem: map 'hash': key at 0x");
    faults(2, -ECANCELED, " is not 8 readable bytes");
}

Test(faults, value_pointer_from_nowhere)
{
    faults(3, -ECANCELED,
           "bpf_map_update_elem: map 'hash': value at 0x401000 is not 4 readable bytes");
}

Test(faults, store_past_a_map_value)
{
    faults(4, -EFAULT, "out-of-bounds write of 8 bytes at 0x");
}

Test(faults, image_of_into_read_only_ctx)
{
    faults(5, -ECANCELED, "sluice_image_of: out at 0x");
    faults(5, -ECANCELED, " is not 24 writable bytes");
}

Test(faults, printk_format_from_nowhere)
{
    faults(6, -ECANCELED, "bpf_trace_printk: format at 0x401000 is not 8 readable bytes");
}

Test(faults, return_value_out_of_range)
{
    faults(7, -ERANGE, "sluice/inst returned 7 (must be 0 to 2)");
}

Test(faults, context_is_read_only_and_exactly_its_size)
{
    faults(8, -EFAULT, "write of 4 bytes to read-only memory at 0x");
    faults(9, -EFAULT, "out-of-bounds read of 8 bytes at 0x");
}

Test(faults, rodata_is_read_only)
{
    faults(10, -EFAULT, "write of 8 bytes to read-only memory at 0x");
}

Test(faults, no_program_for_the_hook)
{
    struct filter *f = test_load(GOOD, "faults", NULL, 0, NULL);
    struct sluice_mem_ctx c = {0};
    struct vm_error err;
    int yes;

    cr_assert_not(filter_has_mem(f));
    cr_assert_eq(filter_run_mem(f, &c, &yes, &err), -ENOENT);
    cr_assert_str_eq(err.msg, "the filter has no sluice/mem program");
    filter_free(f);
}

/* ---- images ------------------------------------------------------------------------------ */

static int fake_image_of(void *user, uint64_t pc, struct sluice_image *out, const char **path)
{
    cr_assert_eq(user, &n_msgs);
    if (pc >= 0x400000 && pc < 0x500000) {
        *out = (struct sluice_image){0x400000, pc - 0x400000, 0, SLUICE_IMAGE_MAIN};
        *path = "/work/prog";
        return 0;
    }
    if (pc >= 0x7f0000000000 && pc < 0x7f0000200000) {
        *out = (struct sluice_image){0x7f0000000000, pc - 0x7f0000000000, 2, 0};
        *path = "/usr/lib/libc.so.6";
        return 0;
    }
    return -ENOENT;
}

static const struct results *images(struct filter *f, uint64_t pc)
{
    cr_assert_eq(test_inst(f, inst_ctx(pc, 4, 0)), SLUICE_NEVER);
    return test_results(f);
}

Test(images, of_and_is)
{
    const struct filter_host host = {.image_of = fake_image_of, .user = &n_msgs};
    struct filter *f = test_load(GOOD, "images", NULL, 0, &host);
    const struct results *r = images(f, 0x7f0000001234);

    cr_assert_eq(r->v[0], 2);
    cr_assert_eq(r->v[1], 0x7f0000000000);
    cr_assert_eq(r->v[2], 0x1234);
    cr_assert_eq(r->v[3], 2);
    cr_assert_eq(r->v[4], 0);
    cr_assert_eq(r->v[5], 1, "libc.so.6 (trailing NUL ignored) is its last component");
    cr_assert_eq(r->v[6], 1, "the full path, without NUL");
    cr_assert_eq(r->v[7], 0, "libc.so is neither");
    cr_assert_eq(r->v[8], -EINVAL, "size must be sizeof(struct sluice_image)");
    cr_assert_eq(r->v[9], -EINVAL, "size 0");

    r = images(f, 0x401000);
    cr_assert_eq(r->v[0], 0);
    cr_assert_eq(r->v[1], 0x400000);
    cr_assert_eq(r->v[2], 0x1000);
    cr_assert_eq(r->v[3], 0);
    cr_assert_eq(r->v[4], SLUICE_IMAGE_MAIN);
    cr_assert_eq(r->v[5] + r->v[6] + r->v[7], 0);

    r = images(f, 0x1000);
    cr_assert_eq(r->v[0], -ENOENT);
    cr_assert_eq(r->v[1] + r->v[2] + r->v[3] + r->v[4], 0, "out untouched");
    cr_assert_eq(r->v[5], 0);
    filter_free(f);
}

Test(images, without_a_host)
{
    struct filter *f = test_load(GOOD, "images", NULL, 0, NULL);
    const struct results *r = images(f, 0x401000);

    cr_assert_eq(r->v[0], -ENOENT);
    cr_assert_eq(r->v[5], 0);
    filter_free(f);
}

/* ---- bpf_get_prandom_u32 ---------------------------------------------------------------- */

Test(prandom, same_sequence_on_every_load)
{
    /* xorshift64* from FILTER_PRANDOM_SEED, high 32 bits of the product. */
    static const int64_t want[8] = {0xd83b3e2,  0x54c44c79, 0xa845f342, 0x7d6e0b87,
                                    0x90d8d6e5, 0x9de6cf0f, 0xd5664048, 0x674bfece};

    for (int load = 0; load < 2; load++) {
        struct filter *f = test_load(GOOD, "prandom", NULL, 0, NULL);
        const struct results *r = test_results(f);

        for (int run = 0; run < 2; run++) {
            cr_assert_eq(test_inst(f, ctx0), SLUICE_NEVER);
            for (int i = 0; i < 4; i++) {
                cr_assert_eq(r->v[i], want[4 * run + i], "load %d run %d value %d: %#llx", load,
                             run, i, (unsigned long long)r->v[i]);
            }
        }
        filter_free(f);
    }
}
