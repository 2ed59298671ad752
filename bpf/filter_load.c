/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * filter_load.c — the libbpf stages of loading a filter (2, 3 and 5 in
 * filter_internal.h): open the object, check its programs and maps, make our
 * copies of maps and global sections, relocate the programs and turn their
 * references into host pointers.
 *
 * Relocation uses libbpf's gen-loader path: bpf_object__gen_loader() then
 * bpf_object__load() makes no bpf() syscall; it records a loader program we
 * throw away and, on the way, rewrites each program in place: map references
 * become `lddw` with src BPF_PSEUDO_MAP_IDX (imm = map index), global data
 * references src BPF_PSEUDO_MAP_IDX_VALUE (imm = map index, second imm =
 * offset), and .text subprograms are appended with their call offsets fixed.
 * bpf_program__insns() returns that final code, which is copied here; then
 * each reference becomes a plain 64-bit constant: the address of our struct
 * filter_map (helpers check it against the filter's table) or of the byte in
 * our copy of the global section (a vm_region of every run).
 *
 * libbpf's messages never reach stderr: a print callback keeps the first
 * warning of the current load (per thread) for our error message and drops
 * the rest. Runs on the loading thread; libbpf's objects are freed by
 * filter.c after stage 5.
 */
#include "filter_internal.h"

#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <linux/bpf.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(struct bpf_insn) == sizeof(struct vm_insn), "bpf_insn and vm_insn differ");

/* ---- libbpf's messages ---------------------------------------------------------- */

static __thread char *capture_buf;
static __thread size_t capture_size;
static __thread int capture_warned; /* capture_buf holds a warning, not a debug message */

/* The first warning, or until one comes, the last other message (libbpf says some failures
 * only at debug level: a section whose size it cannot read, ENOENT). */
static int print_cb(enum libbpf_print_level level, const char *fmt, va_list ap)
{
    size_t len;

    if (!capture_buf || capture_warned) {
        return 0;
    }
    capture_warned = level == LIBBPF_WARN;
    vsnprintf(capture_buf, capture_size, fmt, ap);
    len = strlen(capture_buf);
    while (len && (capture_buf[len - 1] == '\n' || capture_buf[len - 1] == ' ')) {
        capture_buf[--len] = 0;
    }
    if (strncmp(capture_buf, "libbpf: ", 8) == 0) {
        memmove(capture_buf, capture_buf + 8, len - 8 + 1);
    }
    return 0;
}

static void set_print_once(void)
{
    libbpf_set_print(print_cb);
}

void filter_libbpf_capture_begin(char *buf, size_t size)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;

    pthread_once(&once, set_print_once);
    buf[0] = 0;
    capture_buf = buf;
    capture_size = size;
    capture_warned = 0;
}

void filter_libbpf_capture_end(void)
{
    capture_buf = NULL;
}

const char *filter_libbpf_reason(const char *captured, int rc, char *out, size_t size)
{
    const char *what =
        rc == -ENOENT ? "a part of the object it needs is missing or malformed" : strerror(-rc);

    if (capture_warned) {
        return captured;
    }
    snprintf(out, size, captured[0] ? "%s (libbpf's last words: %s)" : "%s", what, captured);
    return out;
}

/* ---- stage 2: open and check ------------------------------------------------------ */

static int check_program(struct filter_load *ld, struct bpf_program *p)
{
    const char *sec = bpf_program__section_name(p);
    struct bpf_program **slot = NULL;

    if (strcmp(sec, ".text") == 0) {
        /* A non-static function: libbpf lists it as a program too, but for us it is only a
         * subprogram (appended to the hooks that call it). */
        return bpf_program__set_autoload(p, false) < 0
                   ? filter_fail(ld, -EINVAL, "function '%s': libbpf refused it",
                                 bpf_program__name(p))
                   : 0;
    }
    if (strcmp(sec, "sluice/inst") == 0) {
        slot = &ld->inst;
    } else if (strcmp(sec, "sluice/mem") == 0) {
        slot = &ld->mem;
    } else {
        return filter_fail(ld, -EINVAL,
                           "section '%s': program '%s': sluice runs only sluice/inst and "
                           "sluice/mem programs",
                           sec, bpf_program__name(p));
    }
    if (*slot) {
        return filter_fail(ld, -EINVAL, "section '%s': more than one program ('%s' and '%s')", sec,
                           bpf_program__name(*slot), bpf_program__name(p));
    }
    *slot = p;
    /* Any type will do: the gen-loader only records it. It refuses to go on without one. */
    return bpf_program__set_type(p, BPF_PROG_TYPE_SOCKET_FILTER) < 0
               ? filter_fail(ld, -EINVAL, "section '%s': libbpf refused a program type", sec)
               : 0;
}

static int check_programs(struct filter_load *ld)
{
    struct bpf_program *p;
    int rc;

    bpf_object__for_each_program(p, ld->obj)
    {
        if ((rc = check_program(ld, p))) {
            return rc;
        }
    }
    if (!ld->inst && !ld->mem) {
        return filter_fail(ld, -EINVAL, "no sluice/inst or sluice/mem program");
    }
    ld->f->inst.main_n = ld->inst ? bpf_program__insn_cnt(ld->inst) : 0;
    ld->f->mem.main_n = ld->mem ? bpf_program__insn_cnt(ld->mem) : 0;
    return 0;
}

static int check_user_map(struct filter_load *ld, struct bpf_map *m, uint64_t *bytes)
{
    const char *name = bpf_map__name(m);
    char why[128];

    if (bpf_map__pin_path(m)) {
        return filter_fail(ld, -EINVAL, "map '%s': pinned maps are not supported", name);
    }
    if (bpf_map__map_flags(m) & ~(uint32_t)BPF_F_NO_PREALLOC) {
        return filter_fail(ld, -EINVAL, "map '%s': map flags 0x%x are not supported", name,
                           bpf_map__map_flags(m));
    }
    if (filter_map_check(bpf_map__type(m), bpf_map__key_size(m), bpf_map__value_size(m),
                         bpf_map__max_entries(m), bytes, why, sizeof(why)) < 0) {
        return filter_fail(ld, -EINVAL, "map '%s': %s", name, why);
    }
    return 0;
}

static int check_maps(struct filter_load *ld)
{
    size_t n_user = 0, n_global = 0;
    uint64_t total = 0, bytes = 0;
    struct bpf_map *m;
    int rc;

    bpf_object__for_each_map(m, ld->obj)
    {
        if (bpf_map__is_internal(m)) {
            n_global++;
            bytes = bpf_map__value_size(m);
        } else if ((rc = check_user_map(ld, m, &bytes))) {
            return rc;
        } else {
            n_user++;
        }
        total += bytes;
        if (n_user > FILTER_MAX_MAPS || n_global > FILTER_MAX_GLOBALS) {
            return filter_fail(ld, -EINVAL, "more than %d maps or %d global sections",
                               FILTER_MAX_MAPS, FILTER_MAX_GLOBALS);
        }
        if (total > FILTER_MEMORY_MAX) {
            return filter_fail(ld, -EINVAL,
                               "maps and global sections need more than %llu bytes in all",
                               (unsigned long long)FILTER_MEMORY_MAX);
        }
        ld->n_refs++;
    }
    return 0;
}

int filter_libbpf_open(struct filter_load *ld, const void *buf, size_t size)
{
    LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = "sluice");
    char warning[160], why[320];
    int rc;

    filter_libbpf_capture_begin(warning, sizeof(warning));
    ld->obj = bpf_object__open_mem(buf, size, &opts);
    rc = ld->obj ? 0 : -errno;
    filter_libbpf_capture_end();
    if (!ld->obj) {
        rc = rc < 0 ? rc : -EINVAL;
        return filter_fail(ld, rc == -ENOMEM ? rc : -EINVAL, "libbpf cannot open it: %s",
                           filter_libbpf_reason(warning, rc, why, sizeof(why)));
    }
    if ((rc = check_programs(ld))) {
        return rc;
    }
    return check_maps(ld);
}

/* ---- stage 3: our maps and globals ------------------------------------------------- */

/* The section a global map stands for: its BTF DATASEC's name, else libbpf's name for it. */
static void global_name(struct filter_load *ld, const struct bpf_map *m, char *out, size_t size)
{
    const struct btf *btf = bpf_object__btf(ld->obj);
    const struct btf_type *t = btf ? btf__type_by_id(btf, bpf_map__btf_value_type_id(m)) : NULL;
    const char *name = bpf_map__name(m);

    if (t && btf_is_datasec(t)) {
        name = btf__name_by_offset(btf, t->name_off);
    } else if (strncmp(name, "sluice.", 7) == 0) {
        name += 6; /* "sluice.rodata" -> ".rodata": libbpf prefixes the object name */
    }
    snprintf(out, size, "%s", name ? name : "?");
}

static int make_global(struct filter_load *ld, struct bpf_map *m, struct filter_global *g)
{
    size_t init_size = 0;
    const void *init = bpf_map__initial_value(m, &init_size);

    global_name(ld, m, g->name, sizeof(g->name));
    g->size = bpf_map__value_size(m);
    g->writable = !(bpf_map__map_flags(m) & BPF_F_RDONLY_PROG);
    g->data = calloc(1, g->size ? g->size : 1);
    if (!g->data) {
        return filter_fail(ld, -ENOMEM, "out of memory");
    }
    if (init) {
        memcpy(g->data, init, init_size < g->size ? init_size : g->size);
    }
    return 0;
}

static int make_map(struct filter_load *ld, struct bpf_map *m, struct filter_map *fm)
{
    if (filter_map_init(fm, bpf_map__name(m), bpf_map__type(m), bpf_map__key_size(m),
                        bpf_map__value_size(m), bpf_map__max_entries(m)) < 0) {
        return filter_fail(ld, -ENOMEM, "map '%s': out of memory", bpf_map__name(m));
    }
    return 0;
}

static void add_regions(struct filter *f)
{
    size_t i;

    for (i = 0; i < f->n_globals; i++) {
        const struct filter_global *g = &f->globals[i];

        if (g->size) {
            f->regions[f->n_regions++] =
                (struct vm_region){(uint64_t)(uintptr_t)g->data, g->size, g->writable};
        }
    }
}

int filter_build_data(struct filter_load *ld)
{
    struct filter *f = ld->f;
    struct bpf_map *m;
    size_t i = 0;
    int rc;

    ld->refs = calloc(ld->n_refs ? ld->n_refs : 1, sizeof(*ld->refs));
    f->maps = calloc(ld->n_refs ? ld->n_refs : 1, sizeof(*f->maps));
    f->globals = calloc(ld->n_refs ? ld->n_refs : 1, sizeof(*f->globals));
    if (!ld->refs || !f->maps || !f->globals) {
        return filter_fail(ld, -ENOMEM, "out of memory");
    }
    bpf_object__for_each_map(m, ld->obj)
    {
        if (i == ld->n_refs) {
            break; /* as many as stage 2 counted */
        }
        if (bpf_map__is_internal(m)) {
            ld->refs[i].global = &f->globals[f->n_globals];
            rc = make_global(ld, m, &f->globals[f->n_globals++]);
        } else {
            ld->refs[i].map = &f->maps[f->n_maps];
            rc = make_map(ld, m, &f->maps[f->n_maps++]);
        }
        if (rc) {
            return rc;
        }
        i++;
    }
    add_regions(f);
    return 0;
}

/* ---- stage 5: relocate, rewrite, verify --------------------------------------------- */

static int fail_insn(struct filter_load *ld, const struct filter_prog *fp, size_t i,
                     const char *what)
{
    return filter_fail(ld, -EINVAL, "section '%s': insn %zu: %s", fp->section, i, what);
}

/* The host address an lddw at @i refers to, or an error. */
static int resolve_ref(struct filter_load *ld, const struct filter_prog *fp, size_t i,
                       const struct vm_insn *in, uint64_t *addr)
{
    const struct filter_ref *ref =
        in->imm >= 0 && (size_t)in->imm < ld->n_refs ? &ld->refs[in->imm] : NULL;
    uint32_t off = (uint32_t)in[1].imm;

    if (in->src == BPF_PSEUDO_MAP_IDX) {
        if (!ref || !ref->map || in[1].imm) {
            return fail_insn(ld, fp, i, "reference to a map that does not exist");
        }
        *addr = (uint64_t)(uintptr_t)ref->map;
        return 0;
    }
    if (in->src == BPF_PSEUDO_MAP_IDX_VALUE) {
        if (!ref || !ref->global || off > ref->global->size) {
            return fail_insn(ld, fp, i, "reference to global data that does not exist");
        }
        *addr = (uint64_t)(uintptr_t)ref->global->data + off;
        return 0;
    }
    return fail_insn(ld, fp, i, "lddw of an unsupported kind (only maps and global data)");
}

static int rewrite_refs(struct filter_load *ld, struct filter_prog *fp)
{
    size_t i;
    int rc;

    for (i = 0; i + 1 < fp->n; i++) {
        struct vm_insn *in = &fp->insns[i];
        uint64_t addr = 0;

        if (in->code != (BPF_LD | BPF_IMM | BPF_DW)) {
            continue;
        }
        if (in->src) {
            if ((rc = resolve_ref(ld, fp, i, in, &addr))) {
                return rc;
            }
            in[0].src = 0;
            in[0].imm = (int32_t)(uint32_t)addr;
            in[1].imm = (int32_t)(uint32_t)(addr >> 32);
        }
        i++; /* the second slot */
    }
    return 0;
}

static int verify(struct filter_load *ld, struct filter_prog *fp)
{
    struct vm_error err;
    int rc = vm_prog_init(&fp->vm, fp->insns, fp->n, &filter_vm_env, &err);

    if (rc == -ENOMEM) {
        return filter_fail(ld, rc, "out of memory");
    }
    if (rc) {
        bool sub = err.insn != SIZE_MAX && err.insn >= fp->main_n;

        return filter_fail(ld, -EINVAL, "section '%s': %s%s", fp->section, err.msg,
                           sub ? " (in a .text subprogram appended after the section's own "
                                 "instructions)"
                               : "");
    }
    return 0;
}

static int copy_prog(struct filter_load *ld, struct bpf_program *p, struct filter_prog *fp)
{
    const struct bpf_insn *insns = bpf_program__insns(p);
    size_t n = bpf_program__insn_cnt(p);
    int rc;

    if (!insns || n == 0 || n > VM_MAX_INSNS) {
        return filter_fail(ld, -EINVAL, "section '%s': %zu instructions (1 to %d)", fp->section, n,
                           VM_MAX_INSNS);
    }
    if (!(fp->insns = malloc(n * sizeof(*fp->insns)))) {
        return filter_fail(ld, -ENOMEM, "out of memory");
    }
    memcpy(fp->insns, insns, n * sizeof(*fp->insns));
    fp->n = n;
    if ((rc = rewrite_refs(ld, fp))) {
        return rc;
    }
    return verify(ld, fp);
}

static int relocate(struct filter_load *ld)
{
    LIBBPF_OPTS(gen_loader_opts, gen);
    char warning[160], why[320];
    int rc;

    filter_libbpf_capture_begin(warning, sizeof(warning));
    rc = bpf_object__gen_loader(ld->obj, &gen);
    if (!rc) {
        rc = bpf_object__load(ld->obj);
    }
    filter_libbpf_capture_end();
    if (rc) {
        return filter_fail(ld, rc == -ENOMEM ? rc : -EINVAL, "libbpf cannot relocate it: %s",
                           filter_libbpf_reason(warning, rc, why, sizeof(why)));
    }
    return 0;
}

int filter_build_progs(struct filter_load *ld)
{
    int rc;

    if ((rc = relocate(ld))) {
        return rc;
    }
    if (ld->inst && (rc = copy_prog(ld, ld->inst, &ld->f->inst))) {
        return rc;
    }
    if (ld->mem && (rc = copy_prog(ld, ld->mem, &ld->f->mem))) {
        return rc;
    }
    return 0;
}
