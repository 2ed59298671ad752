/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * filter_btf.c — part of stage 1: the object's BTF, checked before
 * bpf_object__open_mem() sees it.
 *
 * libbpf 1.1 parses BTF type records safely (btf__new() checks that each one
 * fits) but then follows the type IDs and string offsets inside them without
 * checking them (1.2 added btf_sanity_check()): a hostile object crashes it
 * (found by tests/fuzz: a DATASEC variable naming a type that does not
 * exist). So the BTF is parsed here with btf__new() alone, and every
 * reference checked as later libbpf does: names are strings, referenced
 * types exist, functions point at prototypes. Chains of modifiers and
 * typedefs are bounded too: libbpf walks them without a limit.
 *
 * Runs on the loading thread; allocates libbpf's copy of the BTF, freed
 * before it returns.
 */
#include "filter_internal.h"

#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <errno.h>

/* Longest chain of const/volatile/restrict/typedef/type tags accepted (libbpf's own bound). */
#define BTF_MOD_CHAIN_MAX 32

struct btf_check {
    struct filter_load *ld;
    const struct btf *btf;
    uint32_t n; /* types, void included */
};

static int bad(const struct btf_check *c, uint32_t id, const char *what, uint32_t value)
{
    return filter_fail(c->ld, -EINVAL, "BTF type [%u]: %s %u", id, what, value);
}

static int check_str(const struct btf_check *c, uint32_t id, uint32_t off)
{
    return btf__str_by_offset(c->btf, off) ? 0 : bad(c, id, "invalid string offset", off);
}

static int check_id(const struct btf_check *c, uint32_t id, uint32_t ref)
{
    return ref < c->n ? 0 : bad(c, id, "refers to a type that does not exist:", ref);
}

static bool is_mod_or_typedef(const struct btf_type *t)
{
    return btf_is_mod(t) || btf_is_typedef(t);
}

/* A chain of modifiers and typedefs from @t must end within BTF_MOD_CHAIN_MAX steps. */
static int check_chain(const struct btf_check *c, uint32_t id, const struct btf_type *t)
{
    int steps;

    for (steps = 0; t && is_mod_or_typedef(t); steps++) {
        if (steps == BTF_MOD_CHAIN_MAX) {
            return bad(c, id, "starts a cyclic or too long typedef/modifier chain; at most",
                       BTF_MOD_CHAIN_MAX);
        }
        t = btf__type_by_id(c->btf, t->type);
    }
    return 0;
}

static int check_members(const struct btf_check *c, uint32_t id, const struct btf_type *t)
{
    const struct btf_member *m = btf_members(t);
    unsigned i;
    int rc;

    for (i = 0; i < btf_vlen(t); i++) {
        if ((rc = check_str(c, id, m[i].name_off)) || (rc = check_id(c, id, m[i].type))) {
            return rc;
        }
    }
    return 0;
}

static int check_enum(const struct btf_check *c, uint32_t id, const struct btf_type *t)
{
    unsigned i;
    int rc;

    for (i = 0; i < btf_vlen(t); i++) {
        uint32_t off = btf_is_enum(t) ? btf_enum(t)[i].name_off : btf_enum64(t)[i].name_off;

        if ((rc = check_str(c, id, off))) {
            return rc;
        }
    }
    return 0;
}

static int check_proto(const struct btf_check *c, uint32_t id, const struct btf_type *t)
{
    const struct btf_param *p = btf_params(t);
    unsigned i;
    int rc;

    if ((rc = check_id(c, id, t->type))) {
        return rc;
    }
    for (i = 0; i < btf_vlen(t); i++) {
        if ((rc = check_str(c, id, p[i].name_off)) || (rc = check_id(c, id, p[i].type))) {
            return rc;
        }
    }
    return 0;
}

static int check_func(const struct btf_check *c, uint32_t id, const struct btf_type *t)
{
    int rc = check_id(c, id, t->type);

    if (rc) {
        return rc;
    }
    return btf_is_func_proto(btf__type_by_id(c->btf, t->type))
               ? 0
               : bad(c, id, "is a function whose prototype is not one: type", t->type);
}

static int check_datasec(const struct btf_check *c, uint32_t id, const struct btf_type *t)
{
    const struct btf_var_secinfo *v = btf_var_secinfos(t);
    unsigned i;
    int rc;

    for (i = 0; i < btf_vlen(t); i++) {
        if ((rc = check_id(c, id, v[i].type))) {
            return rc;
        }
        if (!btf_is_var(btf__type_by_id(c->btf, v[i].type))) {
            return bad(c, id, "is a section listing a type that is not a variable:", v[i].type);
        }
    }
    return 0;
}

static int check_type(const struct btf_check *c, uint32_t id, const struct btf_type *t)
{
    int rc = check_str(c, id, t->name_off);

    if (rc) {
        return rc;
    }
    switch (btf_kind(t)) {
    case BTF_KIND_INT:
    case BTF_KIND_FWD:
    case BTF_KIND_FLOAT:
        return 0;
    case BTF_KIND_PTR:
    case BTF_KIND_VAR:
    case BTF_KIND_DECL_TAG:
        return check_id(c, id, t->type);
    case BTF_KIND_TYPEDEF:
    case BTF_KIND_VOLATILE:
    case BTF_KIND_CONST:
    case BTF_KIND_RESTRICT:
    case BTF_KIND_TYPE_TAG:
        return (rc = check_id(c, id, t->type)) ? rc : check_chain(c, id, t);
    case BTF_KIND_ARRAY:
        return (rc = check_id(c, id, btf_array(t)->type))
                   ? rc
                   : check_id(c, id, btf_array(t)->index_type);
    case BTF_KIND_STRUCT:
    case BTF_KIND_UNION:
        return check_members(c, id, t);
    case BTF_KIND_ENUM:
    case BTF_KIND_ENUM64:
        return check_enum(c, id, t);
    case BTF_KIND_FUNC:
        return check_func(c, id, t);
    case BTF_KIND_FUNC_PROTO:
        return check_proto(c, id, t);
    case BTF_KIND_DATASEC:
        return check_datasec(c, id, t);
    }
    return bad(c, id, "has an unknown kind", btf_kind(t));
}

int filter_btf_check(struct filter_load *ld, const void *data, size_t size)
{
    struct btf_check c = {.ld = ld};
    char warning[160], why[320];
    struct btf *btf;
    uint32_t id;
    int rc = 0;

    if (size > UINT32_MAX) {
        return filter_fail(ld, -EINVAL, "section '.BTF': %zu bytes", size);
    }
    filter_libbpf_capture_begin(warning, sizeof(warning));
    btf = btf__new(data, (uint32_t)size);
    filter_libbpf_capture_end();
    if (!btf) {
        int err = errno == ENOMEM ? -ENOMEM : -EINVAL;

        return filter_fail(ld, err, "section '.BTF': %s",
                           warning[0] ? filter_libbpf_reason(warning, err, why, sizeof(why))
                                      : "malformed");
    }
    c.btf = btf;
    c.n = btf__type_cnt(btf);
    for (id = 1; id < c.n && !rc; id++) {
        rc = check_type(&c, id, btf__type_by_id(btf, id));
    }
    btf__free(btf);
    return rc;
}
