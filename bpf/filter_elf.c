/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * filter_elf.c — stage 1 of loading a filter: the raw ELF object, checked
 * with libelf's gelf API before libbpf parses it.
 *
 * libbpf is written for trusted objects; a filter may be hostile. What libbpf
 * 1.1 reads without (or with too little) checking is checked here first:
 * section headers and data inside the buffer, symbol names and section
 * indices that exist, relocations whose offsets and symbols are in range,
 * program sections that hold whole instructions, calls that have their
 * relocation, lddw pairs that no function boundary splits (the last three
 * after crashes tests/fuzz found in libbpf 1.1). Objects sluice does not
 * support are refused here too, where the message can be precise: a legacy
 * `maps` section, struct_ops, extern symbols (.kconfig, .ksyms), CO-RE
 * relocations in .BTF.ext, duplicate section names. The BTF itself is
 * checked by filter_btf.c.
 *
 * Runs on the loading thread; what it allocates (libelf's state, sorted
 * offset tables) is freed before it returns. The buffer is never written
 * (libelf converts nothing for a little-endian object on a little-endian
 * host, and big-endian ones are refused before libelf sees them).
 */
#include "filter_internal.h"

#include <errno.h>
#include <gelf.h>
#include <linux/bpf.h>
#include <linux/btf.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Most sections an object may have: clang emits about 35. */
#define ELF_MAX_SECTIONS 1024
/* R_BPF_64_ABS64: 8 bytes of data (LLVM's numbering; <elf.h> lacks it). */
#define R_BPF_ABS64 2
/* struct btf_ext_header up to core_relo_len (libbpf's own definition is private). */
#define BTF_EXT_HDR_CORE 32

struct elf_view {
    struct filter_load *ld;
    Elf *e;
    const uint8_t *buf;
    size_t size;
    size_t shnum;    /* sections, index 0 included */
    size_t shstrndx; /* section names */
    size_t symtab;   /* index of the symbol table */
    size_t strtab;   /* its string table */
    size_t n_syms;
    Elf_Data *syms; /* the symbol table's data, once check_symbols() accepted it */
};

static bool span_ok(uint64_t off, uint64_t len, uint64_t size)
{
    return off <= size && len <= size - off;
}

static const char *sec_name(const struct elf_view *v, const GElf_Shdr *sh)
{
    const char *name = elf_strptr(v->e, v->shstrndx, sh->sh_name);

    return name ? name : "?";
}

static int get_shdr(const struct elf_view *v, size_t i, GElf_Shdr *sh)
{
    Elf_Scn *scn = elf_getscn(v->e, i);

    if (!scn || !gelf_getshdr(scn, sh)) {
        return filter_fail(v->ld, -EINVAL, "section %zu: unreadable header (%s)", i,
                           elf_errmsg(-1));
    }
    return 0;
}

/* Bytes of section @sh inside the buffer (checked by check_sections). */
static const uint8_t *sec_bytes(const struct elf_view *v, const GElf_Shdr *sh)
{
    return v->buf + sh->sh_offset;
}

/* ---- the header ------------------------------------------------------------------- */

static int check_ident(struct filter_load *ld, const uint8_t *buf, size_t size)
{
    if (size < EI_NIDENT || memcmp(buf, ELFMAG, SELFMAG) != 0) {
        return filter_fail(ld, -EINVAL, "not an ELF object");
    }
    if (buf[EI_CLASS] != ELFCLASS64 || buf[EI_DATA] != ELFDATA2LSB) {
        return filter_fail(ld, -EINVAL,
                           "not a 64-bit little-endian ELF object (clang -target bpf "
                           "or bpfel)");
    }
    return 0;
}

/* Why the section header table cannot be read, for a person: a cut file is the likely one. */
static int bad_shdrs(struct elf_view *v, const GElf_Ehdr *eh)
{
    uint64_t end = eh->e_shoff + (uint64_t)eh->e_shnum * eh->e_shentsize;
    size_t size = 0;
    int err = elf_errno();

    if (elf_rawfile(v->e, &size) && end > size) {
        return filter_fail(v->ld, -EINVAL,
                           "cut short: its section header table ends at byte %llu, past the "
                           "file's end (%zu bytes)",
                           (unsigned long long)end, size);
    }
    if (err) {
        return filter_fail(v->ld, -EINVAL, "bad section header table (%s)", elf_errmsg(err));
    }
    return filter_fail(v->ld, -EINVAL, "bad section header table: name table index %zu of %zu",
                       v->shstrndx, v->shnum);
}

static int check_ehdr(struct elf_view *v)
{
    GElf_Ehdr eh;

    if (elf_kind(v->e) != ELF_K_ELF || !gelf_getehdr(v->e, &eh)) {
        return filter_fail(v->ld, -EINVAL, "not an ELF object (%s)", elf_errmsg(-1));
    }
    if (eh.e_machine != EM_BPF || eh.e_type != ET_REL) {
        return filter_fail(v->ld, -EINVAL,
                           "not a BPF relocatable object (e_machine %u, e_type %u; want %u, %u)",
                           eh.e_machine, eh.e_type, EM_BPF, ET_REL);
    }
    if (elf_getshdrnum(v->e, &v->shnum) < 0 || elf_getshdrstrndx(v->e, &v->shstrndx) < 0 ||
        v->shstrndx >= v->shnum) {
        return bad_shdrs(v, &eh);
    }
    if (v->shnum > ELF_MAX_SECTIONS) {
        return filter_fail(v->ld, -EINVAL, "%zu sections (at most %d)", v->shnum, ELF_MAX_SECTIONS);
    }
    return 0;
}

/* ---- sections ------------------------------------------------------------------------ */

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int check_duplicates(struct elf_view *v, const char **names, size_t n)
{
    size_t i;

    qsort(names, n, sizeof(*names), cmp_names);
    for (i = 1; i < n; i++) {
        if (names[i][0] && strcmp(names[i - 1], names[i]) == 0) {
            return filter_fail(v->ld, -EINVAL, "duplicate section '%s'", names[i]);
        }
    }
    return 0;
}

/* What sluice refuses by section name, with the reason. */
static int check_name(struct elf_view *v, const char *name)
{
    if (strcmp(name, "maps") == 0) {
        return filter_fail(v->ld, -EINVAL,
                           "section 'maps': legacy map definitions are not supported "
                           "(use BTF-defined maps in SEC(\".maps\"))");
    }
    if (strncmp(name, ".struct_ops", 11) == 0) {
        return filter_fail(v->ld, -EINVAL, "section '%s': struct_ops are not supported", name);
    }
    return 0;
}

static int check_one_section(struct elf_view *v, size_t i, const GElf_Shdr *sh, const char **name)
{
    int rc;

    if (!(*name = elf_strptr(v->e, v->shstrndx, sh->sh_name))) {
        return filter_fail(v->ld, -EINVAL, "section %zu: name out of range", i);
    }
    if (sh->sh_type != SHT_NOBITS && !span_ok(sh->sh_offset, sh->sh_size, v->size)) {
        return filter_fail(v->ld, -EINVAL, "section '%s': data past the end of the file", *name);
    }
    if ((sh->sh_flags & SHF_EXECINSTR) &&
        (sh->sh_type != SHT_PROGBITS || sh->sh_size % sizeof(struct vm_insn) ||
         sh->sh_size / sizeof(struct vm_insn) > VM_MAX_INSNS)) {
        return filter_fail(v->ld, -EINVAL,
                           "section '%s': code must be whole instructions, at most %d", *name,
                           VM_MAX_INSNS);
    }
    /* libbpf reads every other section's data: only .bss may have none in the file. */
    if (sh->sh_type == SHT_NOBITS && strncmp(*name, ".bss", 4) != 0) {
        return filter_fail(v->ld, -EINVAL, "section '%s': no data (SHT_NOBITS)", *name);
    }
    if (sh->sh_type == SHT_RELA) {
        return filter_fail(v->ld, -EINVAL, "section '%s': RELA relocations are not supported",
                           *name);
    }
    if ((rc = check_name(v, *name))) {
        return rc;
    }
    if (sh->sh_type == SHT_SYMTAB) {
        if (v->symtab) {
            return filter_fail(v->ld, -EINVAL, "more than one symbol table");
        }
        v->symtab = i;
    }
    return 0;
}

static int check_sections(struct elf_view *v)
{
    const char **names = calloc(v->shnum ? v->shnum : 1, sizeof(*names));
    size_t i;
    int rc = 0;

    if (!names) {
        return filter_fail(v->ld, -ENOMEM, "out of memory");
    }
    for (i = 1; i < v->shnum && !rc; i++) {
        GElf_Shdr sh;

        if (!(rc = get_shdr(v, i, &sh))) {
            rc = check_one_section(v, i, &sh, &names[i - 1]);
        }
    }
    if (!rc) {
        rc = check_duplicates(v, names, v->shnum ? v->shnum - 1 : 0);
    }
    free(names);
    if (!rc && !v->symtab) {
        rc = filter_fail(v->ld, -EINVAL, "no symbol table (not a clang -target bpf object?)");
    }
    return rc;
}

/* ---- symbols ---------------------------------------------------------------------------- */

static int check_symtab_header(struct elf_view *v, GElf_Shdr *sh)
{
    GElf_Shdr str;
    int rc;

    if ((rc = get_shdr(v, v->symtab, sh))) {
        return rc;
    }
    if (sh->sh_entsize != sizeof(Elf64_Sym) || sh->sh_size % sizeof(Elf64_Sym) ||
        sh->sh_link == 0 || sh->sh_link >= v->shnum) {
        return filter_fail(v->ld, -EINVAL, "malformed symbol table");
    }
    if ((rc = get_shdr(v, sh->sh_link, &str))) {
        return rc;
    }
    if (str.sh_type != SHT_STRTAB) {
        return filter_fail(v->ld, -EINVAL, "symbol table's strings are not a string table");
    }
    v->strtab = sh->sh_link;
    v->n_syms = sh->sh_size / sizeof(Elf64_Sym);
    return 0;
}

static int check_symbol(struct elf_view *v, size_t i, const GElf_Sym *s)
{
    const char *name = elf_strptr(v->e, v->strtab, s->st_name);
    unsigned bind = GELF_ST_BIND(s->st_info);
    GElf_Shdr sh;

    if (!name) {
        return filter_fail(v->ld, -EINVAL, "symbol %zu: name out of range", i);
    }
    if (s->st_shndx == SHN_UNDEF && i && (bind == STB_GLOBAL || bind == STB_WEAK)) {
        return filter_fail(v->ld, -EINVAL,
                           "extern '%s': externs (__kconfig, __ksym) are not supported", name);
    }
    if (s->st_shndx == SHN_UNDEF || s->st_shndx == SHN_ABS) {
        return 0;
    }
    if (s->st_shndx >= SHN_LORESERVE || s->st_shndx >= v->shnum) {
        return filter_fail(v->ld, -EINVAL, "symbol '%s': section index %u out of range", name,
                           s->st_shndx);
    }
    if (get_shdr(v, s->st_shndx, &sh) < 0) {
        return -EINVAL;
    }
    if (GELF_ST_TYPE(s->st_info) == STT_FUNC && (sh.sh_flags & SHF_EXECINSTR) &&
        (s->st_value % 8 || s->st_size % 8 || !span_ok(s->st_value, s->st_size, sh.sh_size))) {
        return filter_fail(v->ld, -EINVAL, "function '%s' lies outside its section '%s'", name,
                           sec_name(v, &sh));
    }
    return 0;
}

static int check_symbols(struct elf_view *v)
{
    Elf_Data *data;
    GElf_Shdr sh;
    size_t i;
    int rc;

    if ((rc = check_symtab_header(v, &sh))) {
        return rc;
    }
    data = elf_getdata(elf_getscn(v->e, v->symtab), NULL);
    if (!data || data->d_size < v->n_syms * sizeof(Elf64_Sym)) {
        return filter_fail(v->ld, -EINVAL, "unreadable symbol table (%s)", elf_errmsg(-1));
    }
    for (i = 0; i < v->n_syms; i++) {
        GElf_Sym s;

        if (!gelf_getsym(data, (int)i, &s)) {
            return filter_fail(v->ld, -EINVAL, "symbol %zu unreadable", i);
        }
        if ((rc = check_symbol(v, i, &s))) {
            return rc;
        }
    }
    v->syms = data;
    return 0;
}

/* ---- relocations ---------------------------------------------------------------------------- */

static int check_rel(struct elf_view *v, const GElf_Shdr *target, const char *tname,
                     const GElf_Rel *r, size_t k)
{
    size_t sym = GELF_R_SYM(r->r_info);
    unsigned type = GELF_R_TYPE(r->r_info);
    bool code = target->sh_flags & SHF_EXECINSTR;
    /* In code: an lddw (R_BPF_64_64) spans two slots, a call one. In data: 8 or 4 bytes. */
    uint64_t len = code ? (type == R_BPF_64_64 ? 16 : 8) : (type == R_BPF_ABS64 ? 8 : 4);

    if (sym == 0 || sym >= v->n_syms) {
        return filter_fail(v->ld, -EINVAL, "section '%s': relocation %zu: symbol %zu out of range",
                           tname, k, sym);
    }
    if (!span_ok(r->r_offset, len, target->sh_size) || (code && r->r_offset % 8)) {
        return filter_fail(v->ld, -EINVAL,
                           "section '%s': relocation %zu: offset %llu out of range or misaligned",
                           tname, k, (unsigned long long)r->r_offset);
    }
    return 0;
}

static int check_rel_section(struct elf_view *v, size_t i, const GElf_Shdr *sh)
{
    const char *name = sec_name(v, sh);
    GElf_Shdr target;
    Elf_Data *data;
    size_t k, n;
    int rc;

    if (sh->sh_entsize != sizeof(Elf64_Rel) || sh->sh_size % sizeof(Elf64_Rel) ||
        sh->sh_link != v->symtab || sh->sh_info == 0 || sh->sh_info >= v->shnum) {
        return filter_fail(v->ld, -EINVAL, "section '%s': malformed relocation section", name);
    }
    if ((rc = get_shdr(v, sh->sh_info, &target))) {
        return rc;
    }
    n = sh->sh_size / sizeof(Elf64_Rel);
    data = elf_getdata(elf_getscn(v->e, i), NULL);
    if (!data || data->d_size < n * sizeof(Elf64_Rel)) {
        return filter_fail(v->ld, -EINVAL, "section '%s': unreadable (%s)", name, elf_errmsg(-1));
    }
    for (k = 0; k < n; k++) {
        GElf_Rel r;

        if (!gelf_getrel(data, (int)k, &r)) {
            return filter_fail(v->ld, -EINVAL, "section '%s': relocation %zu unreadable", name, k);
        }
        if ((rc = check_rel(v, &target, sec_name(v, &target), &r, k))) {
            return rc;
        }
    }
    return 0;
}

static int check_relocations(struct elf_view *v)
{
    size_t i;
    int rc;

    for (i = 1; i < v->shnum; i++) {
        GElf_Shdr sh;

        if ((rc = get_shdr(v, i, &sh))) {
            return rc;
        }
        if (sh.sh_type == SHT_REL && (rc = check_rel_section(v, i, &sh))) {
            return rc;
        }
    }
    return 0;
}

/* ---- code: calls and lddw ------------------------------------------------------------------ */

/*
 * Two things in code that libbpf 1.1 gets wrong on hostile input (both found
 * by tests/fuzz):
 *  - it takes a call without a relocation for a call inside .text, even from
 *    another section, and can then free a relocation array twice
 *    (append_subprog_relos() calls realloc(p, 0) when neither program has
 *    relocations). Clang never emits one outside .text: there, every call
 *    must have its relocation;
 *  - it copies each function (STT_FUNC symbol) on its own and writes the
 *    second slot of a relocated lddw past the copy when a function ends
 *    between the two slots. No lddw may straddle a function boundary.
 */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

static bool in_sorted(uint64_t x, const uint64_t *arr, size_t n)
{
    return n && bsearch(&x, arr, n, sizeof(*arr), cmp_u64);
}

/* The sorted offsets of the relocations applying to section @target, malloc'ed in *out. */
static int rel_offsets(struct elf_view *v, size_t target, const char *tname, uint64_t **out,
                       size_t *n)
{
    size_t i, k;

    for (i = 1; i < v->shnum; i++) {
        GElf_Shdr sh;
        Elf_Data *data;

        if (get_shdr(v, i, &sh) < 0 || sh.sh_type != SHT_REL || sh.sh_info != target) {
            continue;
        }
        if (*out) {
            return filter_fail(v->ld, -EINVAL, "section '%s': more than one relocation section",
                               tname);
        }
        *n = sh.sh_size / sizeof(Elf64_Rel); /* whole entries: checked by check_rel_section() */
        data = elf_getdata(elf_getscn(v->e, i), NULL);
        if (!data || !(*out = malloc((*n ? *n : 1) * sizeof(**out)))) {
            return filter_fail(v->ld, -ENOMEM, "out of memory");
        }
        for (k = 0; k < *n; k++) {
            GElf_Rel r;

            (*out)[k] = gelf_getrel(data, (int)k, &r) ? r.r_offset : UINT64_MAX;
        }
        qsort(*out, *n, sizeof(**out), cmp_u64);
    }
    return 0;
}

/* The sorted offsets where functions of section @idx start and end, malloc'ed in *out. */
static int func_bounds(struct elf_view *v, size_t idx, uint64_t **out, size_t *n)
{
    size_t i;

    if (!(*out = malloc((2 * v->n_syms + 1) * sizeof(**out)))) {
        return filter_fail(v->ld, -ENOMEM, "out of memory");
    }
    for (i = 0; i < v->n_syms; i++) {
        GElf_Sym s;

        if (gelf_getsym(v->syms, (int)i, &s) && s.st_shndx == idx &&
            GELF_ST_TYPE(s.st_info) == STT_FUNC) {
            (*out)[(*n)++] = s.st_value;
            (*out)[(*n)++] = s.st_value + s.st_size; /* in the section: check_symbol() */
        }
    }
    qsort(*out, *n, sizeof(**out), cmp_u64);
    return 0;
}

static int check_insn_refs(struct elf_view *v, const char *name, size_t i, const uint8_t *code,
                           bool text, const uint64_t *rels, size_t n_rels, const uint64_t *bounds,
                           size_t n_bounds)
{
    uint64_t off = i * sizeof(struct vm_insn);
    struct vm_insn in;

    memcpy(&in, code + off, sizeof(in));
    if (!text && in.code == (BPF_JMP | BPF_CALL) && in.src == BPF_PSEUDO_CALL &&
        !in_sorted(off, rels, n_rels)) {
        return filter_fail(v->ld, -EINVAL,
                           "section '%s': insn %zu: bpf-to-bpf call without a relocation", name, i);
    }
    if (in.code == (BPF_LD | BPF_IMM | BPF_DW) && in_sorted(off + sizeof(in), bounds, n_bounds)) {
        return filter_fail(v->ld, -EINVAL,
                           "section '%s': insn %zu: lddw split by a function "
                           "boundary",
                           name, i);
    }
    return 0;
}

static int check_section_code(struct elf_view *v, size_t idx, const GElf_Shdr *sh)
{
    const char *name = sec_name(v, sh);
    bool text = strcmp(name, ".text") == 0;
    uint64_t *rels = NULL, *bounds = NULL;
    size_t n_rels = 0, n_bounds = 0, i;
    int rc = rel_offsets(v, idx, name, &rels, &n_rels);

    if (!rc) {
        rc = func_bounds(v, idx, &bounds, &n_bounds);
    }
    for (i = 0; !rc && i < sh->sh_size / sizeof(struct vm_insn); i++) {
        rc = check_insn_refs(v, name, i, sec_bytes(v, sh), text, rels, n_rels, bounds, n_bounds);
    }
    free(rels);
    free(bounds);
    return rc;
}

static int check_code(struct elf_view *v)
{
    size_t i;
    int rc;

    for (i = 1; i < v->shnum; i++) {
        GElf_Shdr sh;

        if ((rc = get_shdr(v, i, &sh))) {
            return rc;
        }
        if ((sh.sh_flags & SHF_EXECINSTR) && (rc = check_section_code(v, i, &sh))) {
            return rc;
        }
    }
    return 0;
}

/* ---- CO-RE relocations (.BTF.ext) ---------------------------------------------------------- */

static uint32_t u32_at(const uint8_t *p)
{
    uint32_t v;

    memcpy(&v, p, sizeof(v));
    return v;
}

/* The section named by @off in .BTF's strings, or NULL. */
static const char *btf_string(const struct elf_view *v, const GElf_Shdr *btf, uint32_t off)
{
    const uint8_t *b = sec_bytes(v, btf);
    struct btf_header h;

    if (btf->sh_size < sizeof(h)) {
        return NULL;
    }
    memcpy(&h, b, sizeof(h));
    if (h.magic != BTF_MAGIC || h.hdr_len < sizeof(h) || !span_ok(h.hdr_len, 0, btf->sh_size) ||
        !span_ok(h.str_off, h.str_len, btf->sh_size - h.hdr_len) || off >= h.str_len ||
        !memchr(b + h.hdr_len + h.str_off + off, 0, h.str_len - off)) {
        return NULL;
    }
    return (const char *)b + h.hdr_len + h.str_off + off;
}

/* Refuse with the section and instruction of the first CO-RE relocation, if readable. */
static int refuse_core(struct elf_view *v, const uint8_t *core, uint32_t len, const GElf_Shdr *btf)
{
    const char *what = "CO-RE relocations (__builtin_preserve_access_index, BPF_CORE_READ) "
                       "are not supported: sluice has no kernel types to relocate against";
    const char *sec;

    /* u32 record size, then { u32 sec_name_off; u32 n; record[n] }, record = { u32 insn_off; ... }
     */
    if (len < 16 || !btf || !(sec = btf_string(v, btf, u32_at(core + 4))) || !u32_at(core + 8)) {
        return filter_fail(v->ld, -EINVAL, "%s", what);
    }
    return filter_fail(v->ld, -EINVAL, "section '%s': insn %u: %s", sec, u32_at(core + 12) / 8,
                       what);
}

static int find_section(const struct elf_view *v, const char *want, GElf_Shdr *out)
{
    size_t i;

    for (i = 1; i < v->shnum; i++) {
        if (gelf_getshdr(elf_getscn(v->e, i), out) && out->sh_type != SHT_NOBITS &&
            strcmp(sec_name(v, out), want) == 0) {
            return 0;
        }
    }
    return -ENOENT;
}

static int check_btf(struct elf_view *v)
{
    GElf_Shdr btf;

    if (find_section(v, ".BTF", &btf) < 0) {
        return 0;
    }
    return filter_btf_check(v->ld, sec_bytes(v, &btf), btf.sh_size);
}

static int check_core(struct elf_view *v)
{
    GElf_Shdr ext, btf;
    const uint8_t *b;
    uint32_t hdr_len, off, len;
    bool have_btf;

    if (find_section(v, ".BTF.ext", &ext) < 0 || ext.sh_size < 8) {
        return 0;
    }
    have_btf = find_section(v, ".BTF", &btf) == 0;
    b = sec_bytes(v, &ext);
    hdr_len = u32_at(b + 4);
    if (hdr_len < BTF_EXT_HDR_CORE || !span_ok(0, BTF_EXT_HDR_CORE, ext.sh_size) ||
        !span_ok(0, hdr_len, ext.sh_size)) {
        return 0; /* no CO-RE part (libbpf checks the rest) */
    }
    off = u32_at(b + 24);
    len = u32_at(b + 28);
    if (len == 0) {
        return 0;
    }
    if (!span_ok(off, len, ext.sh_size - hdr_len)) {
        return filter_fail(v->ld, -EINVAL, "section '.BTF.ext': CO-RE relocations out of range");
    }
    return refuse_core(v, b + hdr_len + off, len, have_btf ? &btf : NULL);
}

/* ---- entry ------------------------------------------------------------------------------------
 */

static void elf_init_once(void)
{
    elf_version(EV_CURRENT);
}

int filter_elf_check(struct filter_load *ld, const void *buf, size_t size)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    struct elf_view v = {.ld = ld, .buf = buf, .size = size};
    int rc;

    if ((rc = check_ident(ld, buf, size))) {
        return rc;
    }
    pthread_once(&once, elf_init_once);
    /* elf_memory() takes a non-const buffer; nothing writes it (see the top of this file). */
    if (!(v.e = elf_memory((char *)(uintptr_t)buf, size))) {
        return filter_fail(ld, -EINVAL, "not an ELF object (%s)", elf_errmsg(-1));
    }
    if (!(rc = check_ehdr(&v)) && !(rc = check_sections(&v)) && !(rc = check_symbols(&v)) &&
        !(rc = check_relocations(&v)) && !(rc = check_code(&v)) && !(rc = check_btf(&v))) {
        rc = check_core(&v);
    }
    elf_end(v.e);
    return rc;
}
