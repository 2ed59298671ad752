/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Guest (x86_64 only, dynamic): a library replaced on disk after the guest
 * mapped it and before any of its code ran. Copies library FIRST to PATH,
 * dlopen()s it, puts library SECOND at PATH by a rename (as a package
 * upgrade or a rebuild does), then calls FIRST's replaced_sum(). The code
 * that runs is FIRST's; the file at PATH when a tool reads it is SECOND,
 * whose symbols at those offsets are others (zz_*). A tool that names
 * that code from the file must say it is not the file the trace ran.
 *
 * With `twice`, the path holds both files in turn: FIRST is loaded from
 * PATH and its replaced_sum() runs, it is unloaded (dlclose), SECOND is
 * renamed over PATH, loaded from there and its own replaced_sum() runs (at
 * another offset, likely at the same address). Each call's code must be
 * named from its own file, or shown as path@offset: never one file's code
 * with the other's symbols.
 *
 * With `unlinked`, PATH is unlinked once FIRST is loaded from it (a
 * temporary plugin's pattern) and SECOND is not used: a recording may not
 * find the file to read; what is put at PATH after the run is not FIRST.
 *
 * With `moved`, FIRST is loaded from PATH twice at two addresses: once,
 * its replaced_sum() runs, it is unloaded, the pages where it was are
 * taken (an anonymous mapping), and it is loaded and run again, elsewhere.
 * Each load prints "loaded at 0x<base>" (dladdr's, where file offset 0
 * is): a tool that lists modules must list each at its own base.
 *
 * With `inplace`, FIRST is loaded from PATH, then PATH is rewritten in
 * place before its code runs (one byte of its ELF header's padding,
 * EI_PAD, which nothing reads) and its modification time set back, as
 * `cp -p` or `rsync -t` into the same file leave it: the same inode, size
 * and modification time; only the change time says it is not the file the
 * guest mapped.
 *
 * With `renamed`, FIRST is loaded from PATH, SECOND (a file of FIRST's size)
 * given PATH's modification time and renamed over PATH, and the guest prints
 * "renamed <pid>" and waits (up to a minute) for a file PATH.go to exist
 * before FIRST's code runs: a consumer that attaches meanwhile finds at the
 * path a file of the mapped one's size and time that is not it.
 *
 * With `linked`, FIRST is put at PATH and linked (a hard link) as
 * PATH.2.so, loaded from PATH, run and unloaded, then loaded from PATH.2.so
 * and run: each load's code must be named by the name it was loaded by.
 *
 * Usage: replaced FIRST SECOND PATH [twice|unlinked|moved|inplace|renamed|linked].
 * Prints "sum N" per call; exit 0, else 1 with the reason.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Copy file @p from to @p to (created or truncated). */
static int copy(const char *from, const char *to)
{
    char buf[65536];
    int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0755);
    ssize_t n = 0;

    while (in >= 0 && out >= 0 && (n = read(in, buf, sizeof(buf))) > 0) {
        if (write(out, buf, (size_t)n) != n) {
            n = -1;
            break;
        }
    }
    if (in >= 0) {
        close(in);
    }
    if (out >= 0) {
        close(out);
    }
    return in < 0 || out < 0 || n < 0 ? -1 : 0;
}

/* Load @p path and run its replaced_sum(); unload it if @p unload. Prints where it was. */
static void *load_and_run(const char *path, int unload)
{
    void *h = dlopen(path, RTLD_NOW), *base = NULL;
    int (*sum)(int) = h ? (int (*)(int))dlsym(h, "replaced_sum") : NULL;
    Dl_info info;

    if (!sum || !dladdr((void *)sum, &info)) {
        fprintf(stderr, "replaced: loading %s: %s\n", path, dlerror());
        return NULL;
    }
    base = info.dli_fbase;
    printf("loaded at %p\nsum %d\n", base, sum(100));
    if (unload && dlclose(h) != 0) {
        fprintf(stderr, "replaced: dlclose: %s\n", dlerror());
        return NULL;
    }
    return base;
}

/* `moved`: FIRST loaded from @p path twice, the second time where the first was not. */
static int moved(const char *first, const char *path)
{
    void *base;

    if (copy(first, path) != 0 || !(base = load_and_run(path, 1))) {
        return 1;
    }
    /* Hold the page where it started: it cannot go there again (what follows may be taken). */
    if (mmap(base, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0) !=
        base) {
        perror("replaced: holding the first load's place");
        return 1;
    }
    return load_and_run(path, 0) ? 0 : 1;
}

/* `inplace`: FIRST loaded from @p path, which is then rewritten in place, its times kept. */
static int inplace(const char *first, const char *path)
{
    const unsigned char pad = 0x5a; /* at offset 9, EI_PAD: 0 in every ELF file */
    struct timespec times[2];
    struct stat st;
    int (*sum)(int);
    void *h;
    int fd;

    if (copy(first, path) != 0 || !(h = dlopen(path, RTLD_NOW)) ||
        !(sum = (int (*)(int))dlsym(h, "replaced_sum"))) {
        fprintf(stderr, "replaced: loading %s: %s\n", path, dlerror());
        return 1;
    }
    fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) != 0 || pwrite(fd, &pad, 1, 9) != 1) {
        perror("replaced: rewriting in place");
        return 1;
    }
    times[0] = st.st_atim;
    times[1] = st.st_mtim;
    if (futimens(fd, times) != 0 || close(fd) != 0) {
        perror("replaced: setting the modification time back");
        return 1;
    }
    printf("sum %d\n", sum(100));
    return 0;
}

/* `renamed`: FIRST loaded from @p path, @p second put there with its time, then a wait. */
static int renamed(const char *first, const char *second, const char *path, const char *tmp)
{
    char go[4096];
    struct timespec times[2];
    struct stat st;
    int (*sum)(int);
    void *h;

    if (copy(first, path) != 0 || !(h = dlopen(path, RTLD_NOW)) ||
        !(sum = (int (*)(int))dlsym(h, "replaced_sum"))) {
        fprintf(stderr, "replaced: loading %s: %s\n", path, dlerror());
        return 1;
    }
    if (stat(path, &st) != 0 || copy(second, tmp) != 0) {
        perror("replaced: copying the second file");
        return 1;
    }
    times[0] = st.st_atim;
    times[1] = st.st_mtim;
    if (utimensat(AT_FDCWD, tmp, times, 0) != 0 || rename(tmp, path) != 0) {
        perror("replaced: putting the second file in place");
        return 1;
    }
    printf("renamed %d\n", (int)getpid());
    fflush(stdout);
    snprintf(go, sizeof(go), "%s.go", path);
    for (int i = 0; i < 6000 && access(go, F_OK) != 0; i++) {
        usleep(10000);
    }
    printf("sum %d\n", sum(100));
    return 0;
}

/* `linked`: FIRST at @p path and a hard link @p link_path (made first: a new link changes
 * the file's change time), loaded from the one, run, unloaded; loaded from the other, run. */
static int linked(const char *first, const char *path, const char *link_path)
{
    if (copy(first, path) != 0 || link(path, link_path) != 0) {
        perror("replaced: copy and link");
        return 1;
    }
    return load_and_run(path, 1) && load_and_run(link_path, 0) ? 0 : 1;
}

int main(int argc, char **argv)
{
    char tmp[4096];
    void *h;
    int (*sum)(int);

    int twice = argc == 5 && strcmp(argv[4], "twice") == 0;
    int unlinked = argc == 5 && strcmp(argv[4], "unlinked") == 0;

    if (argc == 5 && strcmp(argv[4], "moved") == 0) {
        return moved(argv[1], argv[3]);
    }
    if (argc == 5 && strcmp(argv[4], "inplace") == 0) {
        return inplace(argv[1], argv[3]);
    }
    if (argc == 5 && strcmp(argv[4], "linked") == 0 &&
        snprintf(tmp, sizeof(tmp), "%s.2.so", argv[3]) < (int)sizeof(tmp)) {
        return linked(argv[1], argv[3], tmp);
    }
    if (argc == 5 && strcmp(argv[4], "renamed") == 0 &&
        snprintf(tmp, sizeof(tmp), "%s.new", argv[3]) < (int)sizeof(tmp)) {
        return renamed(argv[1], argv[2], argv[3], tmp);
    }

    if ((argc != 4 && !twice && !unlinked) ||
        snprintf(tmp, sizeof(tmp), "%s.new", argv[3]) >= (int)sizeof(tmp)) {
        fprintf(
            stderr,
            "usage: replaced FIRST SECOND PATH [twice|unlinked|moved|inplace|renamed|linked]\n");
        return 1;
    }
    if (copy(argv[1], argv[3]) != 0 || !(h = dlopen(argv[3], RTLD_NOW)) ||
        !(sum = (int (*)(int))dlsym(h, "replaced_sum"))) {
        fprintf(stderr, "replaced: loading %s as %s: %s\n", argv[1], argv[3], dlerror());
        return 1;
    }
    if (unlinked) {
        if (unlink(argv[3]) != 0) {
            perror("replaced: unlink");
            return 1;
        }
        printf("sum %d\n", sum(100));
        return 0;
    }
    if (twice) {
        printf("sum %d\n", sum(100));
        if (dlclose(h) != 0) {
            fprintf(stderr, "replaced: dlclose: %s\n", dlerror());
            return 1;
        }
    }
    if (copy(argv[2], tmp) != 0 || rename(tmp, argv[3]) != 0) {
        perror("replaced: putting the second library in place");
        return 1;
    }
    if (twice &&
        (!(h = dlopen(argv[3], RTLD_NOW)) || !(sum = (int (*)(int))dlsym(h, "replaced_sum")))) {
        fprintf(stderr, "replaced: loading %s again: %s\n", argv[3], dlerror());
        return 1;
    }
    printf("sum %d\n", sum(100));
    return 0;
}
