/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * filter_set.c — stage 4 of loading a filter: `--set NAME=VALUE` into the
 * filter's global sections, like a libbpf skeleton's `const volatile` knobs.
 *
 * NAME is looked up in the object's BTF: each global section's DATASEC lists
 * its variables with their offsets and sizes (libbpf fixed them up when it
 * opened the object). VALUE is parsed for the variable's type: integers
 * (decimal, 0x hex, negative) range-checked against the size and signedness,
 * bool, enums (by number or enumerator name), char arrays (a string that
 * fits with its NUL). The value is written into our copy of the section,
 * little-endian like the BPF object. BTF is untrusted: every offset and size
 * is checked against the section before a byte is written.
 *
 * Runs on the loading thread, before any run; allocates nothing.
 */
#include "filter_internal.h"

#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

/* A global variable found through BTF. */
struct var {
    const char *name;
    struct filter_global *g;
    size_t off;  /* in g, bytes */
    size_t size; /* bytes, per the DATASEC */
    const struct btf *btf;
    const struct btf_type *t; /* its type, typedefs and qualifiers skipped */
};

/* ---- finding the variable --------------------------------------------------------- */

static bool find_in_datasec(const struct btf *btf, uint32_t id, const char *name, struct var *v)
{
    const struct btf_type *sec = btf__type_by_id(btf, id);
    const struct btf_var_secinfo *vsi;
    unsigned i;

    if (!id || !sec || !btf_is_datasec(sec)) {
        return false;
    }
    vsi = btf_var_secinfos(sec);
    for (i = 0; i < btf_vlen(sec); i++) {
        const struct btf_type *var = btf__type_by_id(btf, vsi[i].type);
        const char *vname = var && btf_is_var(var) ? btf__name_by_offset(btf, var->name_off) : NULL;
        int tid;

        if (!vname || strcmp(vname, name) != 0) {
            continue;
        }
        tid = btf__resolve_type(btf, var->type);
        v->t = tid > 0 ? btf__type_by_id(btf, (uint32_t)tid) : NULL;
        v->off = vsi[i].offset;
        v->size = vsi[i].size;
        return true;
    }
    return false;
}

static int find_var(struct filter_load *ld, const char *name, struct var *v)
{
    const struct btf *btf = bpf_object__btf(ld->obj);
    struct bpf_map *m;
    size_t i = 0;

    memset(v, 0, sizeof(*v));
    v->name = name;
    v->btf = btf;
    bpf_object__for_each_map(m, ld->obj)
    {
        if (btf && i < ld->n_refs && ld->refs[i].global &&
            find_in_datasec(btf, bpf_map__btf_value_type_id(m), name, v)) {
            v->g = ld->refs[i].global;
            return 0;
        }
        i++;
    }
    return -ENOENT;
}

/* ---- values ------------------------------------------------------------------------- */

/* Parse decimal, 0x hex, with an optional leading '-', into sign and magnitude. */
static int parse_int(const char *s, bool *neg, uint64_t *mag)
{
    unsigned base = 10;

    *neg = *s == '-';
    s += *neg;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        base = 16;
        s += 2;
    }
    if (!*s) {
        return -EINVAL;
    }
    for (*mag = 0; *s; s++) {
        unsigned d = *s >= '0' && *s <= '9'   ? (unsigned)(*s - '0')
                     : *s >= 'a' && *s <= 'f' ? (unsigned)(*s - 'a' + 10)
                     : *s >= 'A' && *s <= 'F' ? (unsigned)(*s - 'A' + 10)
                                              : 99;

        if (d >= base) {
            return -EINVAL;
        }
        if (*mag > (UINT64_MAX - d) / base) {
            return -ERANGE;
        }
        *mag = *mag * base + d;
    }
    return 0;
}

static bool fits(bool neg, uint64_t mag, size_t bytes, bool is_signed)
{
    uint64_t umax = bytes >= 8 ? UINT64_MAX : (1ull << (8 * bytes)) - 1;

    if (neg && mag == 0) {
        return true;
    }
    if (!is_signed) {
        return !neg && mag <= umax;
    }
    return neg ? mag <= (umax >> 1) + 1 : mag <= umax >> 1;
}

static void store_le(uint8_t *p, size_t bytes, uint64_t v)
{
    size_t i;

    for (i = 0; i < bytes; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

/* "u8", "s32", "bool", "enum mode", "char[16]": the type as messages name it. */
static void type_name(const struct var *v, char *out, size_t size)
{
    const struct btf_type *t = v->t;
    const char *name = btf__name_by_offset(v->btf, t->name_off);

    if (btf_is_int(t) && (btf_int_encoding(t) & BTF_INT_BOOL)) {
        snprintf(out, size, "bool");
    } else if (btf_is_int(t)) {
        snprintf(out, size, "%c%u", btf_int_encoding(t) & BTF_INT_SIGNED ? 's' : 'u',
                 btf_int_bits(t));
    } else if (btf_is_any_enum(t)) {
        snprintf(out, size, "enum %s", name && *name ? name : "(anonymous)");
    } else {
        snprintf(out, size, "char[%zu]", v->size);
    }
}

static int bad_value(struct filter_load *ld, const struct var *v, const char *value,
                     const char *why)
{
    char tn[48];

    type_name(v, tn, sizeof(tn));
    return filter_fail(ld, -EINVAL, "--set %s=%.64s: value %.64s %s %s '%s'", v->name, value, value,
                       why, tn, v->name);
}

static int set_integer(struct filter_load *ld, const struct var *v, const char *value,
                       bool is_signed, bool either)
{
    uint64_t mag;
    bool neg;
    int rc = parse_int(value, &neg, &mag);

    if (rc == -EINVAL) {
        return bad_value(ld, v, value, "is not an integer (decimal, 0x hex, negative) for");
    }
    if (rc ||
        !(fits(neg, mag, v->size, is_signed) || (either && fits(neg, mag, v->size, !is_signed)))) {
        return bad_value(ld, v, value, "does not fit in");
    }
    store_le(v->g->data + v->off, v->size, neg ? 0 - mag : mag);
    return 0;
}

static int set_bool(struct filter_load *ld, const struct var *v, const char *value)
{
    int b = strcmp(value, "true") == 0 || strcmp(value, "1") == 0    ? 1
            : strcmp(value, "false") == 0 || strcmp(value, "0") == 0 ? 0
                                                                     : -1;

    if (b < 0) {
        return bad_value(ld, v, value, "is not true, false, 1 or 0 for");
    }
    store_le(v->g->data + v->off, v->size, (uint64_t)b);
    return 0;
}

static int set_enum(struct filter_load *ld, const struct var *v, const char *value)
{
    const struct btf_type *t = v->t;
    unsigned i;

    for (i = 0; i < btf_vlen(t); i++) {
        uint32_t off = btf_is_enum(t) ? btf_enum(t)[i].name_off : btf_enum64(t)[i].name_off;
        const char *name = btf__name_by_offset(v->btf, off);

        if (name && strcmp(name, value) == 0) {
            store_le(v->g->data + v->off, v->size,
                     btf_is_enum(t) ? (uint64_t)(int64_t)btf_enum(t)[i].val
                                    : btf_enum64_value(&btf_enum64(t)[i]));
            return 0;
        }
    }
    /* By number: signed or unsigned, whichever the size allows (clang 14 records no sign). */
    return set_integer(ld, v, value, true, true);
}

static int set_string(struct filter_load *ld, const struct var *v, const char *value)
{
    size_t len = strlen(value);

    if (len + 1 > v->size) {
        return bad_value(ld, v, value, "(with its NUL) does not fit in");
    }
    memset(v->g->data + v->off, 0, v->size);
    memcpy(v->g->data + v->off, value, len);
    return 0;
}

/* ---- one --set ---------------------------------------------------------------------- */

static bool is_char_array(const struct var *v)
{
    const struct btf_array *a;
    const struct btf_type *elem;
    int id;

    if (!btf_is_array(v->t)) {
        return false;
    }
    a = btf_array(v->t);
    id = btf__resolve_type(v->btf, a->type);
    elem = id > 0 ? btf__type_by_id(v->btf, (uint32_t)id) : NULL;
    return elem && btf_is_int(elem) && elem->size == 1 && a->nelems == v->size;
}

/* The variable's type is one --set handles, and its size matches the DATASEC's. */
static bool settable(const struct var *v)
{
    const struct btf_type *t = v->t;

    if (!t || !v->size) {
        return false;
    }
    if (btf_is_int(t)) {
        return btf_int_offset(t) == 0 && btf_int_bits(t) == 8 * t->size && t->size == v->size &&
               v->size <= 8;
    }
    if (btf_is_any_enum(t)) {
        return t->size == v->size && v->size <= 8;
    }
    return is_char_array(v);
}

static int apply_one(struct filter_load *ld, const struct filter_set *s)
{
    struct var v;

    if (!s->name || !s->value) {
        return filter_fail(ld, -EINVAL, "--set: a name and a value are needed");
    }
    if (find_var(ld, s->name, &v) < 0) {
        return filter_fail(ld, -EINVAL,
                           "--set %.64s: no global variable '%.64s' in .rodata, .data or .bss",
                           s->name, s->name);
    }
    if (v.off > v.g->size || v.size > v.g->size - v.off) {
        return filter_fail(ld, -EINVAL, "--set %.64s: BTF places it outside section '%s'", s->name,
                           v.g->name);
    }
    if (!settable(&v)) {
        return filter_fail(ld, -EINVAL,
                           "--set %.64s: its type is not an integer, bool, enum or char array",
                           s->name);
    }
    if (btf_is_int(v.t) && (btf_int_encoding(v.t) & BTF_INT_BOOL)) {
        return set_bool(ld, &v, s->value);
    }
    if (btf_is_int(v.t)) {
        return set_integer(ld, &v, s->value, btf_int_encoding(v.t) & BTF_INT_SIGNED, false);
    }
    return btf_is_any_enum(v.t) ? set_enum(ld, &v, s->value) : set_string(ld, &v, s->value);
}

int filter_apply_sets(struct filter_load *ld, const struct filter_set *sets, size_t n_sets)
{
    size_t i;
    int rc;

    for (i = 0; i < n_sets; i++) {
        if ((rc = apply_one(ld, &sets[i]))) {
            return rc;
        }
    }
    return 0;
}
