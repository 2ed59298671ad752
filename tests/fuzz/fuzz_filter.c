/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fuzz_filter.c — libFuzzer harness for the filter loader and the filter VM:
 * the input is an object for filter_open_mem() (the seeds are the BPF
 * objects built by meson); when it loads, each hook runs on a few contexts
 * made from the input's last bytes, with a fake filter_host. Then it loads
 * again with --set values the shipped filters know (lo, hi, n), so the BTF
 * path sees mutated objects too.
 *
 * Anything the sanitizers catch (built with -fsanitize=fuzzer,address,
 * undefined), a crash, a leak, or a load result outside the documented
 * errors, is a bug. libbpf itself is not instrumented: its crashes show as
 * SEGVs, its out-of-bounds reads do not.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "filter.h"

#define N_CTX 3

static int fake_image_of(void *user, uint64_t pc, struct sluice_image *out, const char **path)
{
    (void)user;
    if (pc >> 40) {
        return -ENOENT;
    }
    *out = (struct sluice_image){pc & ~0xfffffull, pc & 0xfffff, (int32_t)(pc >> 20) & 3,
                                 (pc >> 20) & 3 ? 0 : SLUICE_IMAGE_MAIN};
    *path = (pc >> 20) & 1 ? "/usr/lib/libc.so.6" : "/bin/prog";
    return 0;
}

static void fake_print(void *user, const char *msg, size_t len)
{
    (void)user;
    if (strlen(msg) != len) {
        abort(); /* the contract: len bytes, then a NUL */
    }
}

static const struct filter_host host = {fake_image_of, fake_print, NULL};

/* Bytes [off, off + n) of the input's tail (zero past its start). */
static void tail_bytes(const uint8_t *data, size_t size, size_t from_end, void *out, size_t n)
{
    memset(out, 0, n);
    if (from_end <= size) {
        size_t take = from_end < n ? from_end : n;

        memcpy(out, data + size - from_end, take);
    }
}

static void run_all(struct filter *f, const uint8_t *data, size_t size)
{
    for (size_t i = 0; i < N_CTX; i++) {
        struct sluice_inst_ctx ic;
        struct sluice_mem_ctx mc;
        struct vm_error err;
        int rc, out = -1;

        tail_bytes(data, size, (i + 1) * sizeof(ic), &ic, sizeof(ic));
        tail_bytes(data, size, (i + 1) * sizeof(mc), &mc, sizeof(mc));
        rc = filter_run_inst(f, &ic, &out, &err);
        if ((rc == 0 && (out < 0 || out > SLUICE_ONCE)) || (rc != 0 && out != -1)) {
            abort();
        }
        out = -1;
        rc = filter_run_mem(f, &mc, &out, &err);
        if ((rc == 0 && out != 0 && out != 1) || (rc != 0 && out != -1)) {
            abort();
        }
    }
    (void)filter_prints_dropped(f);
}

static void load_and_run(const uint8_t *data, size_t size, const struct filter_set *sets,
                         size_t n_sets)
{
    struct filter *f = NULL;
    char err[256];
    int rc = filter_open_mem(data, size, "fuzz.o", sets, n_sets, &host, &f, err, sizeof(err));

    if (rc != 0 && rc != -EINVAL && rc != -ENOMEM) {
        abort(); /* not a documented error */
    }
    if ((rc == 0) != (f != NULL) || (rc != 0 && !err[0])) {
        abort();
    }
    if (f) {
        run_all(f, data, size);
        filter_free(f);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const struct filter_set sets[] = {{"lo", "0x1000"}, {"hi", "-0x1"}, {"n", "3"}};

    load_and_run(data, size, NULL, 0);
    for (size_t i = 0; i < sizeof(sets) / sizeof(sets[0]); i++) {
        load_and_run(data, size, &sets[i], 1);
    }
    return 0;
}
