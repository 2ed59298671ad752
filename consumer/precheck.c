/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * precheck.c — what `sluice run` checks before it starts QEMU (see precheck.h).
 *
 * The program and the jitter are read with libelf, never loaded. So is QEMU:
 * a sluice-patched one holds a struct sluice_qemu_mark (sluice/jitter_abi.h)
 * with its jitter ABI and the QEMU_LD_PREFIX it defaults to. A QEMU without
 * the mark is run once with -h instead: without the sluice patch it lists
 * no -jitter option, and its usage also shows the QEMU_LD_PREFIX default.
 * The interpreter lookup copies QEMU's path() (util/path.c): the prefixed
 * file if it exists, else the path itself, for every guest architecture (a
 * multiarch host may hold a foreign ld.so in /).
 */
#include "precheck.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sluice/jitter_abi.h>

extern char **environ;

#if defined(__x86_64__)
#define HOST_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define HOST_MACHINE EM_AARCH64
#elif defined(__riscv)
#define HOST_MACHINE EM_RISCV
#elif defined(__mips__)
#define HOST_MACHINE EM_MIPS
#endif
#define HOST_CLASS (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32)

/* How long `qemu -h` may take, and how much of its output is kept. */
#define QEMU_HELP_TIMEOUT_MS 10000
#define QEMU_HELP_MAX 65536

typedef unsigned long long ull;

static int libelf_ready(char *err, size_t errn)
{
    if (elf_version(EV_CURRENT) == EV_NONE) {
        snprintf(err, errn, "libelf: %s", elf_errmsg(-1));
        return -1;
    }
    return 0;
}

/* The file (@p size bytes) ends before the end of @p what, at byte @p end. */
static int cut_short(char *err, size_t errn, const char *path, const char *what, ull end,
                     long long size)
{
    snprintf(err, errn,
             "%s: truncated or corrupt ELF file: it ends at byte %lld, before the end of %s "
             "(byte %llu)",
             path, size, what, end);
    return -1;
}

/* Whether [off, off + len) lies inside a file of @p size bytes; the end in @p end. */
static int inside(ull off, ull len, long long size, ull *end)
{
    if (__builtin_add_overflow(off, len, end)) {
        *end = ~0ull;
        return 0;
    }
    return *end <= (ull)size;
}

/* The PT_INTERP segment @p ph of the program @p fd: its path into @p interp. */
static int read_interp(const char *path, int fd, const GElf_Phdr *ph, char *interp, size_t interpn,
                       char *err, size_t errn)
{
    if (ph->p_filesz == 0 || ph->p_filesz > PATH_MAX || ph->p_filesz > interpn) {
        snprintf(err, errn, "%s: invalid PT_INTERP entry (%llu bytes)", path, (ull)ph->p_filesz);
        return -1;
    }
    errno = 0;
    if (pread(fd, interp, ph->p_filesz, (off_t)ph->p_offset) != (ssize_t)ph->p_filesz) {
        snprintf(err, errn, "%s: reading its PT_INTERP: %s", path, strerror(errno ? errno : EIO));
        return -1;
    }
    if (interp[ph->p_filesz - 1] != '\0' || !interp[0]) {
        interp[0] = '\0';
        snprintf(err, errn, "%s: invalid PT_INTERP entry (not a NUL-terminated path)", path);
        return -1;
    }
    return 0;
}

/* The checks of precheck_program() once the file is open as @p e. */
static int check_program(const char *path, int fd, Elf *e, long long size, char *interp,
                         size_t interpn, char *err, size_t errn)
{
    GElf_Ehdr eh;
    size_t phnum, phsz, i, loads = 0;
    ull end;

    if (!gelf_getehdr(e, &eh)) {
        snprintf(err, errn, "%s: corrupt ELF header: %s", path, elf_errmsg(-1));
        return -1;
    }
    if (eh.e_type != ET_EXEC && eh.e_type != ET_DYN) {
        snprintf(err, errn, "%s: not an executable ELF file (e_type %u)", path, eh.e_type);
        return -1;
    }
    phsz = gelf_fsize(e, ELF_T_PHDR, 1, EV_CURRENT);
    if (eh.e_phentsize != phsz) {
        snprintf(err, errn, "%s: corrupt ELF header: program headers of %u bytes, not %zu", path,
                 eh.e_phentsize, phsz);
        return -1;
    }
    /* e_phnum, as QEMU reads it (elf_getphdrnum() would cut it to the file's size). */
    phnum = eh.e_phnum;
    if (phnum == PN_XNUM) {
        snprintf(err, errn, "%s: unsupported ELF file: more than %u program headers", path,
                 PN_XNUM - 1);
        return -1;
    }
    if (phnum == 0) {
        snprintf(err, errn, "%s: not an executable ELF file (no program headers)", path);
        return -1;
    }
    if (!inside(eh.e_phoff, (ull)phnum * phsz, size, &end)) {
        return cut_short(err, errn, path, "its program headers", end, size);
    }
    for (i = 0; i < phnum; i++) {
        GElf_Phdr ph;
        char what[64];

        if (!gelf_getphdr(e, (int)i, &ph)) {
            snprintf(err, errn, "%s: corrupt program header %zu: %s", path, i, elf_errmsg(-1));
            return -1;
        }
        if (ph.p_type != PT_LOAD && ph.p_type != PT_INTERP) {
            continue;
        }
        if (!inside(ph.p_offset, ph.p_filesz, size, &end)) {
            snprintf(what, sizeof(what), "its %s segment %zu",
                     ph.p_type == PT_LOAD ? "PT_LOAD" : "PT_INTERP", i);
            return cut_short(err, errn, path, what, end, size);
        }
        if (ph.p_type == PT_LOAD) {
            loads++;
        } else if (interp[0]) {
            snprintf(err, errn, "%s: invalid ELF file: more than one PT_INTERP", path);
            return -1;
        } else if (read_interp(path, fd, &ph, interp, interpn, err, errn)) {
            return -1;
        }
    }
    if (!loads) {
        snprintf(err, errn, "%s: not an executable ELF file (no PT_LOAD segment)", path);
        return -1;
    }
    return 0;
}

int precheck_program(const char *path, char *interp, size_t interpn, char *err, size_t errn)
{
    unsigned char ident[EI_NIDENT];
    struct stat st;
    size_t ehsz;
    Elf *e;
    int fd, rc;

    interp[0] = '\0';
    if (libelf_ready(err, errn)) {
        return -1;
    }
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(err, errn, "%s: %s", path, strerror(errno));
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    if (pread(fd, ident, sizeof(ident), 0) != (ssize_t)sizeof(ident) ||
        memcmp(ident, ELFMAG, SELFMAG) != 0) {
        close(fd);
        snprintf(err, errn, "%s: not an ELF file", path);
        return -1;
    }
    ehsz = ident[EI_CLASS] == ELFCLASS64 ? sizeof(Elf64_Ehdr) : sizeof(Elf32_Ehdr);
    if ((ull)st.st_size < ehsz) {
        close(fd);
        return cut_short(err, errn, path, "its ELF header", ehsz, (long long)st.st_size);
    }
    e = elf_begin(fd, ELF_C_READ, NULL);
    if (!e || elf_kind(e) != ELF_K_ELF) {
        snprintf(err, errn, "%s: corrupt ELF file: %s", path, e ? "not ELF" : elf_errmsg(-1));
        rc = -1;
    } else {
        rc = check_program(path, fd, e, (long long)st.st_size, interp, interpn, err, errn);
    }
    elf_end(e);
    close(fd);
    return rc;
}

/* The Debian cross toolchain's directory for a QEMU target, for a hint. */
static const char *cross_root(const char *arch)
{
    if (strcmp(arch, "x86_64") == 0) {
        return "/usr/x86_64-linux-gnu";
    }
    if (strcmp(arch, "aarch64") == 0) {
        return "/usr/aarch64-linux-gnu";
    }
    if (strcmp(arch, "riscv64") == 0) {
        return "/usr/riscv64-linux-gnu";
    }
    if (strcmp(arch, "mipsel") == 0) {
        return "/usr/mipsel-linux-gnu";
    }
    return NULL;
}

int precheck_interp(const char *prog, const char *arch, const char *interp,
                    const char *default_prefix, char *err, size_t errn)
{
    const char *prefix = getenv("QEMU_LD_PREFIX"), *cross = cross_root(arch);
    int from_env = prefix != NULL;
    char full[PATH_MAX * 2 + 2], hint[PATH_MAX + 32] = "";

    if (!interp[0]) {
        return 0;
    }
    if (!prefix) {
        prefix = default_prefix;
    }
    /* QEMU's init_paths() ignores "" and "/"; a relative prefix is under the cwd. */
    if (interp[0] == '/' && prefix && prefix[0] && strcmp(prefix, "/") != 0) {
        snprintf(full, sizeof(full), "%s%s", prefix, interp);
        if (access(full, F_OK) == 0) {
            return 0;
        }
    }
    if (access(interp, F_OK) == 0) {
        return 0;
    }
    if (cross && interp[0] == '/') {
        snprintf(full, sizeof(full), "%s%s", cross, interp);
        if (access(full, F_OK) == 0) {
            snprintf(hint, sizeof(hint), " (%s has it)", cross);
        }
    }
    if (from_env && prefix[0]) {
        snprintf(err, errn,
                 "%s: its ELF interpreter %s is not under QEMU_LD_PREFIX=%s nor in /: set "
                 "QEMU_LD_PREFIX=DIR holding %s%s",
                 prog, interp, prefix, interp, hint);
    } else {
        snprintf(err, errn,
                 "%s: its ELF interpreter %s is not found (QEMU_LD_PREFIX is not set): set "
                 "QEMU_LD_PREFIX=DIR holding %s%s",
                 prog, interp, interp, hint);
    }
    return -1;
}

/* Our environment without QEMU_* (QEMU_CPU=help, QEMU_LOG=... would change what -h does). */
static char **env_without_qemu(void)
{
    size_t n = 0, i, j = 0;
    char **env;

    while (environ[n]) {
        n++;
    }
    env = calloc(n + 1, sizeof(*env));
    if (!env) {
        return NULL;
    }
    for (i = 0; i < n; i++) {
        if (strncmp(environ[i], "QEMU_", 5) != 0) {
            env[j++] = environ[i];
        }
    }
    return env;
}

static long long ms_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Read @p fd to EOF (or the deadline) into @p buf, keeping the first @p n - 1 bytes.
 * Returns 0, or -1 on timeout. */
static int read_all(int fd, char *buf, size_t n, size_t *len)
{
    long long deadline = ms_now() + QEMU_HELP_TIMEOUT_MS;
    char sink[4096];

    *len = 0;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        long long left = deadline - ms_now();
        int ready;
        ssize_t r;

        if (left <= 0) {
            return -1;
        }
        ready = poll(&p, 1, (int)left);
        if (ready < 0 && errno == EINTR) {
            continue;
        }
        if (ready <= 0) {
            return -1; /* the deadline passed (or poll failed): never block in read */
        }
        if (*len + 1 < n) {
            r = read(fd, buf + *len, n - 1 - *len);
        } else {
            r = read(fd, sink, sizeof(sink));
        }
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            break;
        }
        if (*len + 1 < n) {
            *len += (size_t)r;
        }
    }
    buf[*len] = '\0';
    return 0;
}

/* The line of @p text that starts with @p start, or NULL. */
static const char *line_starting(const char *text, const char *start)
{
    size_t n = strlen(start);
    const char *l;

    for (l = text; l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
        if (strncmp(l, start, n) == 0) {
            return l;
        }
    }
    return NULL;
}

/* Run `qemu -h`; its output into @p out (@p n bytes) and its wait status into @p status. */
static int run_help(const char *qemu, char *out, size_t n, int *status, char *err, size_t errn)
{
    char *argv[] = {(char *)qemu, "-h", NULL};
    posix_spawn_file_actions_t fa;
    char **env = env_without_qemu();
    int p[2], rc, timed_out;
    size_t len;
    pid_t pid;

    if (!env || pipe2(p, O_CLOEXEC) != 0) {
        snprintf(err, errn, "running %s -h: %s", qemu, strerror(errno));
        free(env);
        return -1;
    }
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, p[1], 1);
    posix_spawn_file_actions_adddup2(&fa, p[1], 2);
    rc = posix_spawn(&pid, qemu, &fa, NULL, argv, env);
    posix_spawn_file_actions_destroy(&fa);
    free(env);
    close(p[1]);
    if (rc != 0) {
        close(p[0]);
        snprintf(err, errn, "%s: cannot run it: %s", qemu, strerror(rc));
        return -1;
    }
    timed_out = read_all(p[0], out, n, &len) != 0;
    close(p[0]);
    if (timed_out) {
        kill(pid, SIGKILL);
    }
    while (waitpid(pid, status, 0) < 0 && errno == EINTR) {
    }
    if (timed_out) {
        snprintf(err, errn, "%s: no answer to -h within %d s: is it a QEMU linux-user binary?",
                 qemu, QEMU_HELP_TIMEOUT_MS / 1000);
        return -1;
    }
    return 0;
}

/* Whether ELF @p e holds a whole struct sluice_qemu_mark; if so, into @p m. */
static int mark_in(Elf *e, struct sluice_qemu_mark *m)
{
    Elf_Scn *scn = NULL;
    size_t shstrndx;

    if (elf_getshdrstrndx(e, &shstrndx) != 0) {
        return 0; /* no section names to find it by */
    }
    while ((scn = elf_nextscn(e, scn))) {
        GElf_Shdr sh;
        const char *name;
        Elf_Data *d;

        if (!gelf_getshdr(scn, &sh) || !(name = elf_strptr(e, shstrndx, sh.sh_name)) ||
            strcmp(name, SLUICE_QEMU_MARK_SECTION) != 0) {
            continue;
        }
        d = elf_getdata(scn, NULL);
        if (!d || !d->d_buf || d->d_size != sizeof(*m)) {
            return 0;
        }
        memcpy(m, d->d_buf, sizeof(*m));
        return memcmp(m->magic, SLUICE_QEMU_MARK_MAGIC, sizeof(m->magic)) == 0 &&
               memchr(m->interp_prefix, '\0', sizeof(m->interp_prefix));
    }
    return 0;
}

/*
 * Read @p qemu's struct sluice_qemu_mark into @p m. Returns 1 if it has a
 * whole one; 0 if not (no such section, not an ELF file libelf reads, or not
 * readable: then running -h decides and says why); -1 if libelf cannot work
 * (message in @p err).
 */
static int read_mark(const char *qemu, struct sluice_qemu_mark *m, char *err, size_t errn)
{
    int fd, found;
    Elf *e;

    if (libelf_ready(err, errn)) {
        return -1;
    }
    fd = open(qemu, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return 0;
    }
    e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    found = e ? mark_in(e, m) : 0;
    elf_end(e);
    close(fd);
    return found;
}

/* @p qemu's mark @p m, checked; the QEMU_LD_PREFIX default into @p ld_prefix. */
static int use_mark(const char *qemu, const struct sluice_qemu_mark *m, char *ld_prefix, size_t n,
                    char *err, size_t errn)
{
    if (m->abi_version != SLUICE_JITTER_ABI_VERSION) {
        snprintf(err, errn,
                 "%s was built for jitter ABI %u, this sluice's is %u: rebuild it "
                 "(scripts/setup.sh), or set SLUICE_QEMU_DIR to a QEMU built with these sources",
                 qemu, m->abi_version, SLUICE_JITTER_ABI_VERSION);
        return -1;
    }
    if (strlen(m->interp_prefix) >= n) {
        snprintf(err, errn, "%s: its QEMU_LD_PREFIX default is longer than %zu bytes", qemu, n - 1);
        return -1;
    }
    strcpy(ld_prefix, m->interp_prefix);
    return 0;
}

int precheck_qemu(const char *qemu, char *ld_prefix, size_t n, char *err, size_t errn)
{
    struct sluice_qemu_mark mark;
    char *out;
    const char *l;
    int status, marked;

    ld_prefix[0] = '\0';
    marked = read_mark(qemu, &mark, err, errn);
    if (marked != 0) {
        return marked < 0 ? -1 : use_mark(qemu, &mark, ld_prefix, n, err, errn);
    }
    out = malloc(QEMU_HELP_MAX);
    if (!out) {
        snprintf(err, errn, "running %s -h: %s", qemu, strerror(errno));
        return -1;
    }
    if (run_help(qemu, out, QEMU_HELP_MAX, &status, err, errn)) {
        free(out);
        return -1;
    }
    if (WIFSIGNALED(status) || WEXITSTATUS(status) != 0) {
        if (WIFSIGNALED(status)) {
            snprintf(err, errn, "%s -h was killed by SIG%s: not a QEMU sluice can run", qemu,
                     sigabbrev_np(WTERMSIG(status)) ? sigabbrev_np(WTERMSIG(status)) : "?");
        } else {
            snprintf(err, errn, "%s -h exited with status %d: not a QEMU sluice can run", qemu,
                     WEXITSTATUS(status));
        }
        free(out);
        return -1;
    }
    if (!line_starting(out, "-jitter ")) {
        snprintf(err, errn,
                 "%s is not a sluice-patched QEMU (its -h lists no -jitter option): set "
                 "SLUICE_QEMU_DIR to the patched QEMU's directory (qemu-patch/build-qemu.sh "
                 "prints it)",
                 qemu);
        free(out);
        return -1;
    }
    /* "QEMU_LD_PREFIX  = /usr/gnemul/qemu-aarch64" under "Defaults:" */
    if ((l = line_starting(out, "QEMU_LD_PREFIX ")) && (l = strchr(l, '='))) {
        size_t len;

        l += strspn(l + 1, " ") + 1;
        len = strcspn(l, "\n");
        if (len < n) {
            memcpy(ld_prefix, l, len);
            ld_prefix[len] = '\0';
        }
    }
    free(out);
    return 0;
}

/* Whether @p e's .dynsym defines @p name. */
static int defines_dynsym(Elf *e, const char *name)
{
    Elf_Scn *scn = NULL;

    while ((scn = elf_nextscn(e, scn))) {
        GElf_Shdr sh;
        Elf_Data *d;
        size_t i, n;

        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || !sh.sh_entsize) {
            continue;
        }
        d = elf_getdata(scn, NULL);
        n = d ? d->d_size / sh.sh_entsize : 0;
        for (i = 0; i < n; i++) {
            GElf_Sym sym;
            const char *s;

            if (!gelf_getsym(d, (int)i, &sym) || sym.st_shndx == SHN_UNDEF ||
                GELF_ST_BIND(sym.st_info) == STB_LOCAL) {
                continue;
            }
            s = elf_strptr(e, sh.sh_link, sym.st_name);
            if (s && strcmp(s, name) == 0) {
                return 1;
            }
        }
    }
    return 0;
}

/* Why the ELF @p e is not a jitter, or NULL. */
static const char *not_jitter(Elf *e)
{
    GElf_Ehdr eh;

    if (elf_kind(e) != ELF_K_ELF) {
        return "not an ELF file";
    }
    if (!gelf_getehdr(e, &eh)) {
        return "a truncated or corrupt ELF file";
    }
#ifdef HOST_MACHINE
    if (eh.e_ident[EI_CLASS] != HOST_CLASS || eh.e_machine != HOST_MACHINE) {
        return "an ELF file for another machine";
    }
#endif
    if (eh.e_type != ET_DYN) {
        return "not a shared object";
    }
    if (!defines_dynsym(e, "sluice_jitter_ops")) {
        return "it does not export sluice_jitter_ops";
    }
    return NULL;
}

int precheck_jitter(const char *path, char *err, size_t errn)
{
    const char *why;
    Elf *e;
    int fd;

    if (libelf_ready(err, errn)) {
        return -1;
    }
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errn, "%s: %s", path, strerror(errno));
        return -1;
    }
    e = elf_begin(fd, ELF_C_READ, NULL);
    why = e ? not_jitter(e) : "not an ELF file";
    elf_end(e);
    close(fd);
    if (why) {
        snprintf(err, errn,
                 "%s is not a sluice jitter (%s): set SLUICE_JITTER to libsluice-jitter.so", path,
                 why);
        return -1;
    }
    return 0;
}
