/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * tools/symbolize.c — a guest pc as people read it: module!symbol+offset,
 * file:line and the disassembled instruction (see symbolize.h).
 *
 * Owns the files the trace named (one `struct module` per path: the whole
 * file read into memory once, a libdw session over that copy for its symbols
 * and lines, its PT_LOADs) and one capstone handle per guest architecture,
 * all behind one lock; and, per worker thread, a cache of described pcs, so
 * that a loop's pcs take the lock once each. Runs on worker threads. Never
 * trusts the files: only regular files are read (a FIFO put at a path would
 * block), nothing stays mapped or open (a file truncated later cannot fault
 * us), separate debug files are found by build id only (a .gnu_debuglink
 * could name /dev/zero), names are cut and cleaned like paths, and files and
 * bytes read are bounded.
 */
#include <errno.h>
#include <capstone/capstone.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <gelf.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capstone_lib.h"
#include "symbolize.h"
#include "tools.h"

/* Files held open at most; those past it are named, not read. */
#define MAX_MODULES 4096u
#define MAX_LOADS 64u
#define HASH_SLOTS 1024u
/* A file larger than this is named, not read; nor are files past MAX_IMAGES_BYTES in all. */
#define MAX_IMAGE_BYTES (512ull << 20)
#define MAX_IMAGES_BYTES (4ull << 30)
/* Per worker: described pcs (a hot loop of sha256 has 20 000), their texts in an arena that
 * starts over when full; and the longest text one holds. */
#define CACHE_SLOTS 65536u
#define CACHE_ARENA_BYTES (8u << 20)
#define TEXT_BYTES 400u
/* The longest module name (its tail), symbol name and source file (its tail) printed, so that a
 * line of 256 bytes keeps the instruction. */
#define MODULE_MAX_BYTES 48u
#define NAME_MAX_BYTES 80u
#define FILE_MAX_BYTES 60u

struct load {
    uint64_t offset, filesz, vaddr; /* a PT_LOAD: file bytes [offset, +filesz) at vaddr */
};

/* A code symbol, at its link-time address. */
struct symbol {
    uint64_t addr, size;
    uint64_t max_end; /* the highest addr + size of this and every symbol before it */
    uint64_t sec_end; /* the end of its section (a size-0 symbol holds nothing past it) */
    const char *name; /* libdw's: valid while the module's Dwfl is */
    int rank; /* lower wins a tie: global, weak, local; a default version before a compat one */
};

struct module {
    struct module *next; /* hash chain */
    uint64_t hash;
    char *path;
    uint64_t ident; /* the mapped file's (sym_file_ident()): one module per file a path held */
    char *image;    /* the whole file as read once; NULL: not read (not regular, too big) */
    size_t image_len;
    Dwfl *dwfl; /* NULL: not ELF (or libdw could not read it) */
    Dwfl_Module *mod;
    GElf_Addr bias; /* libdw's address = link-time address + bias */
    unsigned n_loads;
    struct load loads[MAX_LOADS];
    struct symbol *syms; /* by address; NULL when none */
    size_t n_syms;
};

/* The capstone handle of one guest architecture. */
struct disasm {
    const char *arch;
    cs_arch cs_arch;
    int cs_mode;
    int state; /* 0 not opened yet, 1 open, -1 failed */
    csh handle;
    const struct capstone_lib *cs; /* the library it was opened with, while open */
};

static struct {
    pthread_mutex_t lock;
    unsigned flags;
    struct module *slots[HASH_SLOTS];
    unsigned n_modules;
    uint64_t image_bytes; /* read into images, in all */
    int said_no_disasm, said_full;
    unsigned said_unreadable; /* files said unreadable (unreadable()) */
    uint64_t unknown;         /* atomic */
    pthread_key_t key;
    int key_made;
} sym = {.lock = PTHREAD_MUTEX_INITIALIZER};

static struct disasm disasms[] = {
    {"x86_64", CS_ARCH_X86, CS_MODE_64, 0, 0, NULL},
    {"aarch64", CS_ARCH_ARM64, CS_MODE_ARM, 0, 0, NULL},
    {"mipsel", CS_ARCH_MIPS, CS_MODE_MIPS32 | CS_MODE_LITTLE_ENDIAN, 0, 0, NULL},
    {"mips", CS_ARCH_MIPS, CS_MODE_MIPS32 | CS_MODE_BIG_ENDIAN, 0, 0, NULL},
};

struct cached {
    uint64_t pc, offset, start, path_hash; /* the key: the same pc of the same mapping ... */
    uint64_t ident;                        /* ... of the same file (sym_file_ident()) */
    uint32_t pid, len;                     /* len 0: empty slot */
    uint32_t at, gen;                      /* text at arena + at, of arena generation gen */
};

/* One worker's cache: slots, and the arena their texts are in. */
struct cache {
    struct cached slots[CACHE_SLOTS];
    uint32_t used, gen; /* arena bytes used; bumped when it starts over */
    char arena[CACHE_ARENA_BYTES];
};

static __thread struct cache *cache;

/* FNV-1a of a path. */
static uint64_t hash_str(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;

    while (*s) {
        h = (h ^ (unsigned char)*s++) * 0x100000001b3ull;
    }
    return h;
}

/* (A path that held two files during the run gives two modules by it, never one file's
 * symbols for the other.) */
uint64_t sym_file_ident(const struct sluice_thread_info *t, uint64_t addr)
{
    struct sluice_file_id id;
    uint64_t h;

    if (sluice_map__file_at(t, addr, &id) != 0) {
        return 0;
    }
    h = id.dev * 0x9e3779b97f4a7c15ull ^ id.ino;
    h = (h * 0xff51afd7ed558ccdull) ^ id.size;
    h = (h * 0xc4ceb9fe1a85ec53ull) ^ (uint64_t)id.mtime_ns;
    h = (h * 0xc4ceb9fe1a85ec53ull) ^ (uint64_t)id.ctime_ns;
    return h ? h : 1;
}

/* Append @p s, at most @p max bytes of it (its tail when @p tail), control
 * characters and non-ASCII as '?', not past @p end. */
static char *put_clean(char *p, char *end, const char *s, size_t max, int tail)
{
    size_t n = strlen(s);

    if (n > max) {
        s += tail ? n - max : 0;
        n = max;
    }
    for (; n && p < end; n--, s++) {
        unsigned char c = (unsigned char)*s;

        *p++ = c < 0x20 || c >= 0x7f ? '?' : (char)c;
    }
    return p;
}

/* A file's or symbol's name: as put_clean(), spaces as '?' too (a name
 * "f+0x0  nop" must not pass for a symbol and an instruction). */
static char *put_name(char *p, char *end, const char *s, size_t max, int tail)
{
    char *from = p;

    for (p = put_clean(p, end, s, max, tail); from < p; from++) {
        *from = *from == ' ' ? '?' : *from;
    }
    return p;
}

static char *put_hex(char *p, char *end, uint64_t v)
{
    char tmp[24];

    return put_clean(p, end, tmp,
                     (size_t)snprintf(tmp, sizeof(tmp), "0x%llx", (unsigned long long)v), 0);
}

/* libdw's search for separate debug info, by build id only: a .gnu_debuglink
 * names any path (/dev/zero, a FIFO beside the file) and libdw would read it. */
static int find_debuginfo(Dwfl_Module *mod, void **user, const char *name, Dwarf_Addr base,
                          const char *file, const char *debuglink, GElf_Word crc, char **found)
{
    (void)debuglink;
    return dwfl_standard_find_debuginfo(mod, user, name, base, file, NULL, crc, found);
}

static const Dwfl_Callbacks dwfl_callbacks = {
    .find_elf = NULL,
    .find_debuginfo = find_debuginfo,
    .section_address = dwfl_offline_section_address,
};

/* 1 for a versioned name of a compat version ("pthread_once@GLIBC_2.2.5", where the same
 * address is also "pthread_once@@GLIBC_2.34", the default one), else 0. */
static int compat(const char *name)
{
    const char *at = strchr(name, '@');

    return at && at[1] != '@';
}

static int by_address(const void *a, const void *b)
{
    const struct symbol *x = a, *y = b;

    if (x->addr != y->addr) {
        return x->addr < y->addr ? -1 : 1;
    }
    return x->rank - y->rank;
}

/* The link-time end of section @p shndx of @p elf; none known (an absolute
 * symbol): UINT64_MAX. So `_init` (size 0, in .init) does not lend its name
 * to the PLT stubs after it, which have no symbol (objdump's `name@plt` are
 * made up from relocations, not read from a symbol table). */
static uint64_t section_end(Elf *elf, GElf_Word shndx)
{
    Elf_Scn *scn =
        elf && shndx != SHN_UNDEF && shndx < SHN_LORESERVE ? elf_getscn(elf, shndx) : NULL;
    GElf_Shdr sh;

    if (!scn || !gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_ALLOC)) {
        return UINT64_MAX;
    }
    return sh.sh_addr + sh.sh_size;
}

/* m->syms: the code symbols (functions, ifuncs, untyped; not mapping symbols) of every symbol
 * table libdw found (.symtab, .dynsym, separate debug info), sorted, so a
 * lookup is a binary search (libdw's own walks every symbol). */
static void module_read_symbols(struct module *m)
{
    int n = dwfl_module_getsymtab(m->mod), i;
    size_t k = 0;

    if (n <= 0 || !(m->syms = calloc((size_t)n, sizeof(*m->syms)))) {
        return;
    }
    for (i = 1; i < n; i++) {
        GElf_Sym s;
        GElf_Addr addr;
        GElf_Word shndx;
        Elf *elf = NULL;
        const char *name = dwfl_module_getsym_info(m->mod, i, &s, &addr, &shndx, &elf, NULL);
        int type = GELF_ST_TYPE(s.st_info), bind = GELF_ST_BIND(s.st_info);

        /* '$x', '$d', '$a': ARM and RISC-V mapping symbols, which mark code and data */
        if (!name || !*name || *name == '$' || s.st_shndx == SHN_UNDEF ||
            (type != STT_FUNC && type != STT_GNU_IFUNC && type != STT_NOTYPE)) {
            continue;
        }
        m->syms[k++] = (struct symbol){
            .addr = addr - m->bias,
            .size = s.st_size,
            .sec_end = section_end(elf, shndx),
            .name = name,
            .rank = 2 * (bind == STB_GLOBAL ? 0
                         : bind == STB_WEAK ? 1
                                            : 2) +
                    compat(name),
        };
    }
    m->n_syms = k;
    qsort(m->syms, k, sizeof(*m->syms), by_address);
    for (k = 0; k < m->n_syms; k++) {
        uint64_t end = m->syms[k].addr + m->syms[k].size, before = k ? m->syms[k - 1].max_end : 0;

        m->syms[k].max_end = end > before ? end : before;
    }
}

/* The symbol holding link-time address @p addr: the sized symbol that
 * contains it and starts last (global before weak before local at one
 * address, a default symbol version before a compat one); else the nearest size-0 symbol before it,
 * if no sized one lies between, addr is in its section and it is at or above @p floor, the start of
 * addr's PT_LOAD (hand-written assembly often has no size; __ehdr_start is no function); else NULL.
 */
static const struct symbol *symbol_at(const struct module *m, uint64_t addr, uint64_t floor)
{
    size_t lo = 0, hi = m->n_syms, i;
    const struct symbol *sizeless = NULL;

    while (lo < hi) { /* lo: the first symbol past addr */
        size_t mid = lo + (hi - lo) / 2;

        if (m->syms[mid].addr <= addr) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    for (i = lo; i-- > 0 && m->syms[i].max_end > addr;) {
        const struct symbol *s = &m->syms[i];

        if (s->size && addr - s->addr < s->size) {
            while (i > 0 && m->syms[i - 1].addr == s->addr && m->syms[i - 1].size) {
                s = &m->syms[--i]; /* the best-ranked of those at that address */
            }
            return s;
        }
    }
    for (i = lo; i-- > 0 && m->syms[i].addr >= floor;) {
        if (m->syms[i].size) {
            return sizeless;
        }
        if (addr >= m->syms[i].sec_end) {
            return sizeless; /* past its section's end: another section's code */
        }
        if (!sizeless || m->syms[i].addr == sizeless->addr) {
            sizeless = &m->syms[i];
        } else {
            break;
        }
    }
    return sizeless;
}

/* Read @p m's symbols and PT_LOADs with libdw; leaves m->dwfl NULL when
 * the file is not ELF. */
static void module_read_elf(struct module *m)
{
    size_t n, i;
    Elf *elf;

    if (!m->image || m->image_len < SELFMAG || memcmp(m->image, ELFMAG, SELFMAG) != 0) {
        return;
    }
    m->dwfl = dwfl_begin(&dwfl_callbacks);
    if (!m->dwfl) {
        return;
    }
    dwfl_report_begin(m->dwfl);
    m->mod = dwfl_report_offline_memory(m->dwfl, "m", m->path, m->image, m->image_len);
    dwfl_report_end(m->dwfl, NULL, NULL);
    elf = m->mod ? dwfl_module_getelf(m->mod, &m->bias) : NULL;
    if (!elf || elf_getphdrnum(elf, &n) != 0) {
        dwfl_end(m->dwfl);
        m->dwfl = NULL;
        return;
    }
    for (i = 0; i < n && m->n_loads < MAX_LOADS; i++) {
        GElf_Phdr ph;

        if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD) {
            m->loads[m->n_loads++] =
                (struct load){.offset = ph.p_offset, .filesz = ph.p_filesz, .vaddr = ph.p_vaddr};
        }
    }
    module_read_symbols(m);
}

/* Most files said unreadable, one line each; then one line for the rest. */
#define MAX_SAID_UNREADABLE 16

/* Say that @p path cannot be read, so its code goes unnamed (once per file, up to a bound). */
static void unreadable(const char *path, const char *why)
{
    if (sym.said_unreadable < MAX_SAID_UNREADABLE) {
        say("sluice: dump: %s: %s: its code is shown as path@offset\n", path, why);
    } else if (sym.said_unreadable == MAX_SAID_UNREADABLE) {
        say("sluice: dump: more files cannot be read (not said one by one)\n");
    }
    sym.said_unreadable++;
}

int sym_is_memfd(const char *path)
{
    return path && strncmp(path, "/memfd:", 7) == 0;
}

/* Read @p m's file whole into m->image if it is a regular file now, opened
 * without blocking (a FIFO or device put at the path since the guest mapped
 * it is not read) and within the size bounds, and if it is the file the
 * mapping at @p addr of thread @p t's process was made from
 * (sluice_file__changed_at()); says once when a bound is hit. */
static void read_image(const struct sluice_thread_info *t, struct module *m, uint64_t addr)
{
    char why[128], msg[192];
    struct stat st;
    size_t got = 0;
    ssize_t n;
    int fd;

    if (sym_is_memfd(m->path)) {
        unreadable(m->path, "a memfd's code (a JIT's), in memory no file holds");
        return;
    }
    if (sluice_file__changed_at(t, addr, why, sizeof(why)) == 1) {
        snprintf(msg, sizeof(msg), "not the file the trace ran (%s)", why);
        unreadable(m->path, msg); /* its symbols would be another program's */
        return;
    }
    fd = open(m->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);

    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        unreadable(m->path, fd < 0 ? strerror(errno) : "not a regular file now");
        goto out;
    }
    if ((uint64_t)st.st_size > MAX_IMAGE_BYTES ||
        sym.image_bytes + (uint64_t)st.st_size > MAX_IMAGES_BYTES) {
        if (!sym.said_full) {
            sym.said_full = 1;
            say("sluice: dump: %s and files after it are named, not read (over "
                "%llu MiB each, %llu MiB in all)\n",
                m->path, MAX_IMAGE_BYTES >> 20, MAX_IMAGES_BYTES >> 20);
        }
        goto out;
    }
    m->image = malloc(st.st_size ? (size_t)st.st_size : 1);
    while (m->image && got < (size_t)st.st_size &&
           (n = read(fd, m->image + got, (size_t)st.st_size - got)) > 0) {
        got += (size_t)n;
    }
    m->image_len = got; /* (shorter if it shrank meanwhile) */
    sym.image_bytes += got;
out:
    if (fd >= 0) {
        close(fd);
    }
}

/* The module of @p path and mapped file @p ident, the one mapped at @p addr of thread @p t's
 * process, opened on first use; NULL past MAX_MODULES or out of memory. Under sym.lock. */
static struct module *module_get(const struct sluice_thread_info *t, const char *path,
                                 uint64_t hash, uint64_t ident, uint64_t addr)
{
    struct module **slot = &sym.slots[hash % HASH_SLOTS], *m;

    for (m = *slot; m; m = m->next) {
        if (m->hash == hash && m->ident == ident && strcmp(m->path, path) == 0) {
            return m;
        }
    }
    if (sym.n_modules >= MAX_MODULES || !(m = calloc(1, sizeof(*m)))) {
        if (!sym.said_full) {
            sym.said_full = 1;
            say("sluice: dump: more than %u files ran code: the others are named "
                "by path only\n",
                MAX_MODULES);
        }
        return NULL;
    }
    m->path = strdup(path);
    if (!m->path) {
        free(m);
        return NULL;
    }
    m->hash = hash;
    m->ident = ident;
    read_image(t, m, addr);
    if (sym.flags & (SYM_SYMBOLS | SYM_LINES)) {
        module_read_elf(m);
    }
    m->next = *slot;
    *slot = m;
    sym.n_modules++;
    return m;
}

/* The PT_LOAD that maps file offset @p off, or NULL. */
static const struct load *load_of(const struct module *m, uint64_t off)
{
    unsigned i;

    for (i = 0; i < m->n_loads; i++) {
        const struct load *l = &m->loads[i];

        if (off >= l->offset && off - l->offset < l->filesz) {
            return l;
        }
    }
    return NULL;
}

/* The PT_LOAD of ELF module @p m (NULL: none) that holds file offset @p offset, with the
 * link-time address there in *addr; NULL if @p m is no ELF or no PT_LOAD maps the offset. */
static const struct load *link_of(const struct module *m, uint64_t offset, uint64_t *addr)
{
    const struct load *l = m && m->dwfl ? load_of(m, offset) : NULL;

    *addr = l ? l->vaddr + (offset - l->offset) : 0;
    return l;
}

/* "symbol+0xoff" of link-time address @p addr in symbol @p s. */
static char *put_sym_off(char *p, char *end, const struct symbol *s, uint64_t addr)
{
    p = put_name(p, end, s->name, NAME_MAX_BYTES, 0);
    return put_hex(put_clean(p, end, "+", 1, 0), end, addr - s->addr);
}

/* The last component of @p path, as a name; a memfd's without the kernel's " (deleted)". */
static char *put_module(char *p, char *end, const char *path)
{
    const char *base = strrchr(path, '/');
    static const char deleted[] = " (deleted)";
    size_t len = strlen(path), cut = sizeof(deleted) - 1;

    if (sym_is_memfd(path) && len > cut && strcmp(path + len - cut, deleted) == 0) {
        char name[320]; /* "memfd:" and at most 249 bytes (memfd_create(2)) */

        snprintf(name, sizeof(name), "%.*s", (int)(len - cut - 1), path + 1);
        return put_name(p, end, name, MODULE_MAX_BYTES, 1);
    }
    return put_name(p, end, base ? base + 1 : path, MODULE_MAX_BYTES, 1);
}

/* "!symbol+0xoff" / "!0xaddr" / "@0xoffset". Under sym.lock. */
static char *put_symbol(char *p, char *end, struct module *m, uint64_t offset)
{
    uint64_t addr;
    const struct load *l = link_of(m, offset, &addr);
    const struct symbol *s = l && (sym.flags & SYM_SYMBOLS) ? symbol_at(m, addr, l->vaddr) : NULL;

    if (!l) {
        return put_hex(put_clean(p, end, "@", 1, 0), end, offset);
    }
    p = put_clean(p, end, "!", 1, 0);
    return s ? put_sym_off(p, end, s, addr) : put_hex(p, end, addr);
}

/* "(file:line)" of the DWARF line table, or nothing. Under sym.lock. */
static char *put_line(char *p, char *end, const struct module *m, uint64_t offset)
{
    uint64_t addr;
    Dwfl_Line *line = link_of(m, offset, &addr) ? dwfl_module_getsrc(m->mod, addr + m->bias) : NULL;
    const char *file;
    int lineno = 0;
    char num[16];

    if (line && (file = dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL))) {
        p = put_name(put_clean(p, end, "(", 1, 0), end, file, FILE_MAX_BYTES, 1);
        snprintf(num, sizeof(num), ":%d)", lineno);
        p = put_clean(p, end, num, sizeof(num), 0);
    }
    return p;
}

/* The capstone handle for @p arch, or NULL (none, or it failed). Under sym.lock. */
static struct disasm *disasm_for(const char *arch)
{
    size_t i;

    for (i = 0; i < sizeof(disasms) / sizeof(disasms[0]); i++) {
        struct disasm *d = &disasms[i];

        if (strcmp(d->arch, arch) != 0) {
            continue;
        }
        if (d->state == 0) {
            const struct capstone_lib *cs = capstone_lib_get();

            d->state =
                cs && cs->open(d->cs_arch, (cs_mode)d->cs_mode, &d->handle) == CS_ERR_OK ? 1 : -1;
            /* operands and groups: a direct branch's target gets its symbol */
            if (d->state == 1) {
                d->cs = cs;
                cs->option(d->handle, CS_OPT_DETAIL, CS_OPT_ON);
            }
        }
        return d->state == 1 ? d : NULL;
    }
    if (!sym.said_no_disasm) {
        sym.said_no_disasm = 1;
        say("sluice: dump: no disassembler for %s guests (capstone %d.%d has none)\n", arch,
            CS_API_MAJOR, CS_API_MINOR);
    }
    return NULL;
}

/* An instruction capstone does not decode (newer than it, as SVE for
 * capstone 4, or invalid): a fixed-width one as its word, objdump's
 * ".inst 0x<word>"; an x86 one as "(not decoded)". */
static char *put_undecoded(char *p, char *end, const struct disasm *d, const uint8_t *bytes,
                           size_t n)
{
    int big = (d->cs_mode & CS_MODE_BIG_ENDIAN) != 0;
    char word[48];
    uint32_t w = 0;
    int i;

    if (d->cs_arch == CS_ARCH_X86 || n < 4) {
        return put_clean(p, end, "(not decoded)", 13, 0);
    }
    for (i = 0; i < 4; i++) {
        w = w << 8 | bytes[big ? i : 3 - i]; /* the word in the guest's byte order */
    }
    snprintf(word, sizeof(word), ".inst 0x%08x (not decoded)", w);
    return put_clean(p, end, word, sizeof(word), 0);
}

/* The target of direct branch or call @p insn (an immediate operand), or 0. */
static uint64_t branch_target(const struct disasm *d, const cs_insn *insn)
{
    const cs_detail *x = insn->detail;
    int i;

    if (!x || !(d->cs->insn_group(d->handle, insn, CS_GRP_JUMP) ||
                d->cs->insn_group(d->handle, insn, CS_GRP_CALL))) {
        return 0;
    }
    switch (d->cs_arch) {
    case CS_ARCH_X86:
        for (i = x->x86.op_count; i-- > 0;) {
            if (x->x86.operands[i].type == X86_OP_IMM) {
                return (uint64_t)x->x86.operands[i].imm;
            }
        }
        break;
    case CS_ARCH_ARM64:
        for (i = x->arm64.op_count; i-- > 0;) {
            if (x->arm64.operands[i].type == ARM64_OP_IMM) {
                return (uint64_t)x->arm64.operands[i].imm;
            }
        }
        break;
    case CS_ARCH_MIPS:
        for (i = x->mips.op_count; i-- > 0;) {
            if (x->mips.operands[i].type == MIPS_OP_IMM) {
                return (uint64_t)x->mips.operands[i].imm;
            }
        }
        break;
    default:
        break;
    }
    return 0;
}

/* " <symbol+0xoff>" of branch target @p to (module!symbol+0xoff in another
 * module), or nothing where no symbol holds it. Under sym.lock. */
static char *put_target(char *p, char *end, const struct sluice_thread_info *t,
                        const struct module *from, uint64_t to)
{
    struct sluice_module tm;
    struct module *m;
    const struct load *l;
    const struct symbol *s;
    uint64_t addr;

    if (!to || sluice_map__at(t, to, &tm) < 0 || !tm.path ||
        !(m = module_get(t, tm.path, hash_str(tm.path), sym_file_ident(t, to), to)) ||
        !(l = link_of(m, tm.offset, &addr)) || !(s = symbol_at(m, addr, l->vaddr))) {
        return p;
    }
    p = put_clean(p, end, " <", 2, 0);
    if (m != from) {
        p = put_clean(put_module(p, end, m->path), end, "!", 1, 0);
    }
    return put_clean(put_sym_off(p, end, s, addr), end, ">", 1, 0);
}

/* "mnemonic operands" of the instruction at file offset @p offset, run at @p pc. Under sym.lock.
 */
static char *put_insn(char *p, char *end, const struct sluice_thread_info *t,
                      const struct module *m, uint64_t offset, uint64_t pc)
{
    struct disasm *d = disasm_for(t->arch);
    const uint8_t *bytes;
    cs_insn *insn = NULL;
    size_t n;

    if (!d || !m->image || offset >= m->image_len) {
        return p;
    }
    bytes = (const uint8_t *)m->image + offset;
    n = m->image_len - offset < 16 ? m->image_len - offset : 16;
    if (d->cs->disasm(d->handle, bytes, n, pc, 1, &insn) != 1) {
        return put_undecoded(p, end, d, bytes, n);
    }
    p = put_clean(p, end, insn->mnemonic, sizeof(insn->mnemonic), 0);
    if (insn->op_str[0]) {
        p = put_clean(put_clean(p, end, " ", 1, 0), end, insn->op_str, sizeof(insn->op_str), 0);
    }
    if (sym.flags & SYM_SYMBOLS) {
        p = put_target(p, end, t, m, branch_target(d, insn));
    }
    d->cs->free(insn, 1);
    return p;
}

/* Describe @p pc of mapping @p mm into [p, end): the slow path, under the lock. */
static char *describe(char *p, char *end, const struct sluice_thread_info *t, uint64_t pc,
                      const struct sluice_module *mm, uint64_t path_hash, uint64_t ident)
{
    char *start = p, *q;
    struct module *m;

    pthread_mutex_lock(&sym.lock);
    m = module_get(t, mm->path, path_hash, ident, pc);
    if (sym.flags & SYM_SYMBOLS) {
        p = put_module(p, end, mm->path);
        p = put_symbol(p, end, m, mm->offset);
    }
    /* Each part after a separator, which stays only if the part is there. */
    if ((sym.flags & SYM_LINES) && end - p > 1 &&
        (q = put_line(p + (p > start), end, m, mm->offset)) > p + (p > start)) {
        if (p > start) {
            *p = ' ';
        }
        p = q;
    }
    if ((sym.flags & SYM_DISASM) && m && end - p > 2 &&
        (q = put_insn(p + 2 * (p > start), end, t, m, mm->offset, pc)) > p + 2 * (p > start)) {
        if (p > start) {
            p[0] = p[1] = ' ';
        }
        p = q;
    }
    pthread_mutex_unlock(&sym.lock);
    return p;
}

static struct cache *thread_cache(void)
{
    if (!cache && sym.key_made) {
        cache = calloc(1, sizeof(*cache));
        if (cache) {
            pthread_setspecific(sym.key, cache);
        }
    }
    return cache;
}

/* Keep @p n bytes of @p text for @p slot in @p c's arena, which starts over
 * (every older text then stale: another generation) when full. */
static void cache_put(struct cache *c, struct cached *slot, const struct cached *key,
                      const char *text, size_t n)
{
    if (c->used + n > CACHE_ARENA_BYTES) {
        c->used = 0;
        c->gen++;
    }
    *slot = *key;
    slot->len = (uint32_t)n;
    slot->at = c->used;
    slot->gen = c->gen;
    memcpy(c->arena + c->used, text, n);
    c->used += (uint32_t)n;
}

size_t sym_describe(const struct sluice_thread_info *t, uint64_t pc, char *buf, size_t cap)
{
    struct sluice_module mm;
    struct cached *slot, key;
    struct cache *c;
    char tmp[TEXT_BYTES], *p;
    uint64_t h;
    size_t n;
    int r;

    if (!(sym.flags & (SYM_SYMBOLS | SYM_DISASM | SYM_LINES))) {
        return 0;
    }
    r = sluice_map__at(t, pc, &mm);
    if (r < 0 || !mm.path) {
        const char *what = r < 0 ? "[?]" : "[anon]";

        if (r < 0) {
            __atomic_fetch_add(&sym.unknown, 1, __ATOMIC_RELAXED);
        }
        n = strlen(what) < cap ? strlen(what) : cap;
        memcpy(buf, what, n);
        return n;
    }
    h = hash_str(mm.path);
    key = (struct cached){.pc = pc,
                          .offset = mm.offset,
                          .start = mm.start,
                          .path_hash = h,
                          .ident = sym_file_ident(t, pc),
                          .pid = t->pid};
    c = thread_cache();
    slot = c ? &c->slots[(pc ^ (pc >> 16) ^ t->pid) % CACHE_SLOTS] : NULL;
    if (slot && slot->len && slot->gen == c->gen && slot->pc == pc && slot->pid == t->pid &&
        slot->offset == mm.offset && slot->start == mm.start && slot->path_hash == h &&
        slot->ident == key.ident) {
        n = slot->len < cap ? slot->len : cap;
        memcpy(buf, c->arena + slot->at, n);
        return n;
    }
    p = describe(tmp, tmp + sizeof(tmp), t, pc, &mm, h, key.ident);
    n = (size_t)(p - tmp);
    if (slot && n) {
        cache_put(c, slot, &key, tmp, n);
    }
    n = n < cap ? n : cap;
    memcpy(buf, tmp, n);
    return n;
}

uint64_t sym_unknown(void)
{
    return __atomic_load_n(&sym.unknown, __ATOMIC_RELAXED);
}

void sym_init(unsigned flags)
{
    sym.flags = flags;
    if (!sym.key_made) {
        sym.key_made = pthread_key_create(&sym.key, free) == 0; /* else: no cache, only slower */
    }
}

void sym_fini(void)
{
    size_t i;

    for (i = 0; i < HASH_SLOTS; i++) {
        struct module *m, *next;

        for (m = sym.slots[i]; m; m = next) {
            next = m->next;
            if (m->dwfl) {
                dwfl_end(m->dwfl);
            }
            free(m->image); /* (after dwfl_end: libdw read it in place) */
            free(m->syms);
            free(m->path);
            free(m);
        }
        sym.slots[i] = NULL;
    }
    sym.n_modules = 0;
    sym.image_bytes = 0;
    for (i = 0; i < sizeof(disasms) / sizeof(disasms[0]); i++) {
        if (disasms[i].state == 1) {
            disasms[i].cs->close(&disasms[i].handle);
        }
        disasms[i].state = 0;
    }
    if (sym.key_made) {
        pthread_setspecific(sym.key, NULL);
    }
    free(cache); /* the main thread's, if it described anything */
    cache = NULL;
}
