/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * filter_refuse.c — the filter loader (bpf/filter*.c) refuses what it
 * does not support, each object in tests/unit/filter_bad/ for its own
 * reason, with one line naming the file, the section and instruction where
 * there are some, and the reason; truncated and garbage ELF never crash it;
 * bad --set names and values are refused for the right reason.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "filter_test.h"

static char err[512];

/* The object must be refused and the message contain @want. */
static void refused(const char *name, const char *want)
{
    test_refuse("FILTER_BAD_DIR", name, NULL, 0, err, sizeof(err));
    cr_assert(strstr(err, want), "%s: want \"%s\" in \"%s\"", name, want, err);
}

Test(refuse, no_hook_section)
{
    refused("no_hook", ": no sluice/inst or sluice/mem program");
}

Test(refuse, program_in_another_section)
{
    refused(
        "other_section",
        ": section 'xdp': program 'pass': sluice runs only sluice/inst and sluice/mem programs");
}

Test(refuse, two_programs_in_one_hook_section)
{
    refused("two_inst", ": section 'sluice/inst': more than one program ('first' and 'second')");
}

Test(refuse, duplicate_hook_section)
{
    char path[4096];

    test_path(path, sizeof(path), "FILTER_BAD_DIR", "dup_section");
    if (access(path, R_OK) != 0) {
        cr_skip_test("no llvm-objcopy: dup_section.bpf.o was not built");
    }
    refused("dup_section", ": duplicate section 'sluice/inst'");
}

Test(refuse, core_relocation)
{
    refused("core", ": section 'sluice/inst': insn 0: CO-RE relocations "
                    "(__builtin_preserve_access_index, BPF_CORE_READ) are not supported");
}

Test(refuse, legacy_maps_section)
{
    refused("legacy_maps", ": section 'maps': legacy map definitions are not supported");
}

Test(refuse, percpu_array_map)
{
    refused("percpu", ": map 'counts': unsupported map type 6 (only array (2) and hash (1))");
}

Test(refuse, ringbuf_map)
{
    refused("ringbuf", ": map 'events': unsupported map type 27 (only array (2) and hash (1))");
}

Test(refuse, map_over_the_memory_cap)
{
    refused("huge_map", ": map 'seen': needs 2800000000 bytes (100000000 entries; at most "
                        "268435456 bytes in all)");
}

Test(refuse, maps_over_the_memory_cap_together)
{
    refused("too_much_memory", ": maps and global sections need more than 268435456 bytes in all");
}

Test(refuse, verifier_unknown_helper)
{
    refused("unknown_helper", ": section 'sluice/mem': insn 0: unknown helper 5");
}

Test(refuse, extern_symbol)
{
    refused("extern",
            ": extern 'LINUX_KERNEL_VERSION': externs (__kconfig, __ksym) are not supported");
}

Test(refuse, missing_file)
{
    struct filter *f = NULL;
    int rc = filter_open_file("/nonexistent/x.bpf.o", NULL, 0, NULL, &f, err, sizeof(err));

    cr_assert_eq(rc, -ENOENT);
    cr_assert_str_eq(err, "/nonexistent/x.bpf.o: cannot open: No such file or directory");
}

/* ---- hostile bytes ------------------------------------------------------------- */

static uint8_t *read_obj(const char *env, const char *name, size_t *size)
{
    char path[4096];
    uint8_t *buf = malloc(1 << 20);
    int fd;
    ssize_t n;

    test_path(path, sizeof(path), env, name);
    fd = open(path, O_RDONLY);
    cr_assert_geq(fd, 0, "%s", path);
    n = read(fd, buf, 1 << 20);
    close(fd);
    cr_assert_gt(n, 0);
    *size = (size_t)n;
    return buf;
}

/* Load @size bytes from a copy of exactly that size (so ASan sees any overread). */
static int open_bytes(const uint8_t *bytes, size_t size)
{
    uint8_t *copy = malloc(size ? size : 1);
    struct filter *f = NULL;
    int rc;

    memcpy(copy, bytes, size);
    rc = filter_open_mem(copy, size, "mem.o", NULL, 0, NULL, &f, err, sizeof(err));
    filter_free(f);
    free(copy);
    return rc;
}

Test(refuse, every_truncation_of_a_good_object)
{
    size_t size, cut;
    uint8_t *obj = read_obj("FILTERS_DIR", "sample", &size);

    cr_assert_eq(open_bytes(obj, size), 0, "the whole object loads: %s", err);
    for (cut = 0; cut < size; cut++) {
        int rc = open_bytes(obj, cut);

        cr_assert_eq(rc, -EINVAL, "cut at %zu of %zu: rc %d (%s)", cut, size, rc, err);
        cr_assert_eq(strncmp(err, "mem.o: ", 7), 0, "%s", err);
        /* Past the ELF header, the section headers (clang puts them last) say what is wrong. */
        cr_assert(cut < 64 || strstr(err, ": cut short: its section header table ends at byte"),
                  "cut at %zu: %s", cut, err);
    }
    cr_assert_str_eq((open_bytes(obj, 10), err), "mem.o: not an ELF object");
    free(obj);
}

Test(refuse, a_section_name_changed)
{
    size_t size, i;
    uint8_t *obj = read_obj("FILTERS_DIR", "sample", &size);

    /* The first "license" (the string table's, which names the section) -> "licen~e": libbpf
     * cannot size the section its symbol is in and fails with ENOENT, said only at its debug
     * level. It read "libbpf cannot open it: No such file or directory" (hostile round 5). */
    for (i = 0; i + 7 <= size && memcmp(obj + i, "license", 7) != 0; i++) {
    }
    cr_assert_lt(i + 7, size + 1);
    obj[i + 5] = '~';
    cr_assert_eq(open_bytes(obj, size), -EINVAL, "%s", err);
    cr_assert(strstr(err, "libbpf cannot open it: a part of the object it needs is missing or "
                          "malformed (libbpf's last words: sec '") != NULL,
              "%s", err);
    cr_assert(strstr(err, "No such file") == NULL, "%s", err);
    free(obj);
}

Test(refuse, garbage_after_an_elf_header)
{
    size_t size;
    uint8_t *obj = read_obj("FILTERS_DIR", "range", &size);
    uint64_t s = 0x9e3779b97f4a7c15;

    /* Keep the ELF header, scramble one byte in 64 elsewhere: refused or loaded, never a crash. */
    for (int round = 0; round < 200; round++) {
        uint8_t *copy = malloc(size);

        memcpy(copy, obj, size);
        for (size_t i = 64; i < size; i++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            if (s % 64 == 0) {
                copy[i] = (uint8_t)(s >> 32);
            }
        }
        int rc = open_bytes(copy, size);

        cr_assert(rc == 0 || rc == -EINVAL, "round %d: rc %d (%s)", round, rc, err);
        free(copy);
    }
    free(obj);
}

/* Inputs tests/fuzz found that crashed libbpf 1.1 before the loader checked for them. */
static void regression(const char *file, const char *want)
{
    const char *dir = getenv("FUZZ_REGRESSIONS_DIR");
    char path[4096];
    struct filter *f = NULL;

    cr_assert(dir, "$FUZZ_REGRESSIONS_DIR is not set (run through meson test)");
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    cr_assert_eq(filter_open_file(path, NULL, 0, NULL, &f, err, sizeof(err)), -EINVAL, "%s", err);
    cr_assert(strstr(err, want), "%s: want \"%s\" in \"%s\"", file, want, err);
}

Test(refuse, btf_reference_to_a_missing_type)
{
    /* libbpf 1.1 dereferenced NULL for the variable of the .maps DATASEC. */
    regression("libbpf-btf-datasec-var-type.elf",
               ": BTF type [14]: refers to a type that does not exist: 196621");
}

Test(refuse, call_without_relocation)
{
    /* libbpf 1.1 freed a relocation array twice (realloc(p, 0) in append_subprog_relos). */
    regression("libbpf-call-without-relocation.elf",
               ": section 'sluice/inst': insn 1: bpf-to-bpf call without a relocation");
}

Test(refuse, lddw_split_by_a_function_end)
{
    /* libbpf 1.1 wrote the lddw's second slot past its copy of the function. */
    regression("libbpf-lddw-split-by-function-end.elf",
               ": section '.text': insn 81: lddw split by a function boundary");
}

Test(refuse, not_elf_at_all)
{
    static const uint8_t text[] = "#include <bpf/bpf_helpers.h>\n";

    cr_assert_eq(open_bytes(text, sizeof(text)), -EINVAL);
    cr_assert_str_eq(err, "mem.o: not an ELF object");
}

/* ---- --set ----------------------------------------------------------------------- */

static void set_refused(const char *name, const char *value, const char *want)
{
    const struct filter_set set = {name, value};

    test_refuse("FILTER_GOOD_DIR", "globals", &set, 1, err, sizeof(err));
    cr_assert(strstr(err, want), "--set %s=%s: want \"%s\" in \"%s\"", name, value, want, err);
}

Test(refuse, set_unknown_name)
{
    set_refused("nope", "1", ": --set nope: no global variable 'nope' in .rodata, .data or .bss");
}

Test(refuse, set_value_too_big)
{
    set_refused("width", "300", ": --set width=300: value 300 does not fit in u8 'width'");
    set_refused("width", "-1", ": --set width=-1: value -1 does not fit in u8 'width'");
    set_refused("delta", "32768", ": value 32768 does not fit in s16 'delta'");
    set_refused("delta", "-32769", ": value -32769 does not fit in s16 'delta'");
    set_refused("big", "0x10000000000000000", ": value 0x10000000000000000 does not fit in u64");
    set_refused("tag", "eightchr", ": value eightchr (with its NUL) does not fit in char[8] 'tag'");
}

Test(refuse, set_bad_value)
{
    set_refused("width", "8x", ": value 8x is not an integer (decimal, 0x hex, negative) for u8");
    set_refused("width", "", ": value  is not an integer");
    set_refused("width", "010a", ": value 010a is not an integer");
    set_refused("verbose", "yes", ": value yes is not true, false, 1 or 0 for bool 'verbose'");
    set_refused("mode", "MODE_NONE",
                ": value MODE_NONE is not an integer (decimal, 0x hex, "
                "negative) for enum mode 'mode'");
}

Test(refuse, set_unsupported_type)
{
    /* `out` (struct results) is a global, but not one --set can write. */
    set_refused("out", "1", ": --set out: its type is not an integer, bool, enum or char array");
}
