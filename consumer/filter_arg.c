/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * filter_arg.c — the filter options of `sluice run` (see filter_arg.h).
 *
 * The jitter loads the object again inside QEMU (and inside every process
 * the guest forks); loading it here first means a bad filter is a usage
 * error with the loader's own message, not a QEMU that exits at start.
 */
#include "filter_arg.h"
#include "say.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sluice/ctl.h>

#include "filter.h"

#ifndef SLUICE_INCLUDE_DIR
#define SLUICE_INCLUDE_DIR ""
#endif
#ifndef SLUICE_MULTIARCH_INCLUDE
#define SLUICE_MULTIARCH_INCLUDE "/usr/include/x86_64-linux-gnu"
#endif

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);

    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Most bytes of clang's diagnostics shown (the rest is counted). */
#define DIAG_MAX (64u << 10)

/*
 * Copy clang's diagnostics from @p fd to stderr, each line through say(),
 * with @p src (its path, which may hold a newline or a terminal escape)
 * shown as say_shown() shows it wherever it is named; until the end of @p
 * fd, which it closes. Lines past DIAG_MAX bytes are counted, not shown.
 */
static void relay_diagnostics(int fd, const char *src)
{
    static char buf[DIAG_MAX + 1];
    char shown[4096], *line, *end, *at;
    size_t n = 0, skipped = 0, len = strlen(src);
    ssize_t got;

    while ((got = read(fd, buf + n, DIAG_MAX - n)) != 0) {
        if (got > 0) {
            n += (size_t)got;
        } else if (errno != EINTR) {
            break;
        }
        if (n == DIAG_MAX) { /* keep reading: clang must not block on a full pipe */
            char drop[4096];

            while ((got = read(fd, drop, sizeof(drop))) > 0 || (got < 0 && errno == EINTR)) {
                skipped += got > 0 ? (size_t)got : 0;
            }
            break;
        }
    }
    close(fd);
    buf[n] = '\0';
    say_shown(src, shown, sizeof(shown));
    /* The path's own newlines first, so that the rest splits into clang's lines. */
    for (at = len ? strstr(buf, src) : NULL; at; at = strstr(at + len, src)) {
        memcpy(at, shown, len < sizeof(shown) ? len : sizeof(shown) - 1);
    }
    for (line = buf; *line; line = end + (*end != '\0')) {
        end = strchrnul(line, '\n');
        say("%.*s\n", (int)(end - line), line);
    }
    if (skipped) {
        say("sluice: %zu more bytes of clang's messages not shown\n", skipped);
    }
}

/* Run clang on @p src into @p obj; clang's own diagnostics go to stderr, each line through
 * say(). */
static int compile(const char *src, const char *obj)
{
    const char *clang = getenv("SLUICE_CLANG");
    char inc[4200], multi[4200];
    int status, out[2];
    pid_t pid;

    clang = clang && *clang ? clang : "clang";
    snprintf(inc, sizeof(inc), "-I%s", SLUICE_INCLUDE_DIR);
    snprintf(multi, sizeof(multi), "-I%s", SLUICE_MULTIARCH_INCLUDE);
    if (pipe2(out, O_CLOEXEC) < 0) {
        say("sluice: %s: cannot start clang: %s\n", src, strerror(errno));
        return -1;
    }
    pid = fork();
    if (pid == 0) {
        dup2(out[1], STDERR_FILENO);
        execlp(clang, clang, "-O2", "-g", "-target", "bpf", "-mcpu=v3", inc, multi, "-c", src, "-o",
               obj, (char *)NULL);
        say("sluice: %s: cannot run %s: %s (set SLUICE_CLANG)\n", src, clang, strerror(errno));
        _exit(127);
    }
    close(out[1]);
    relay_diagnostics(out[0], src);
    if (pid < 0 || waitpid(pid, &status, 0) < 0) {
        say("sluice: %s: cannot start clang: %s\n", src, strerror(errno));
        return -1;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 127) {
            if (WIFEXITED(status)) {
                say("sluice: %s: %s exited with status %d (its messages, if any, are "
                    "above)\n",
                    src, clang, WEXITSTATUS(status));
            } else {
                say("sluice: %s: %s was killed by signal %d\n", src, clang, WTERMSIG(status));
            }
        }
        return -1;
    }
    return 0;
}

/* Most bytes of an object copied (the loader refuses bigger ones, naming the user's file). */
#define OBJECT_COPY_MAX (64u << 20)

/*
 * Copy the object at @p src to @p dst, so that what is verified here is what
 * QEMU loads (the path could name another file by then). Returns 0; 1 if
 * @p src is to be checked in place (too big: the loader says so); -1 after
 * saying why.
 */
static int copy_object(const char *src, const char *dst)
{
    char buf[65536];
    struct stat st;
    ssize_t n = 0;
    int in = open(src, O_RDONLY | O_CLOEXEC | O_NONBLOCK), out;

    if (in < 0 || fstat(in, &st) != 0) {
        say("sluice: %s: cannot open: %s\n", src, strerror(errno));
        if (in >= 0) {
            close(in);
        }
        return -1;
    }
    if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > OBJECT_COPY_MAX) {
        close(in);
        return 1;
    }
    out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    while (out >= 0 && (n = read(in, buf, sizeof(buf))) > 0) {
        if (write(out, buf, (size_t)n) != n) {
            n = -1;
            break;
        }
    }
    close(in);
    if (out < 0 || n < 0 || close(out) != 0) {
        say("sluice: %s: copying it to %s: %s\n", src, dst, strerror(errno));
        return -1;
    }
    return 0;
}

/* Split "NAME=VALUE" into @p set (pointing into @p buf, a copy). */
static int split_set(const char *arg, char *buf, size_t n, struct filter_set *set)
{
    char *eq;

    snprintf(buf, n, "%s", arg);
    eq = strchr(buf, '=');
    if (!eq || eq == buf || strchr(arg, '\n')) {
        say("sluice: --set %s: want NAME=VALUE (one line)\n", arg);
        return -1;
    }
    *eq = '\0';
    *set = (struct filter_set){buf, eq + 1};
    return 0;
}

/* Load the object once with the --set values; the loader's message on failure. */
static int check(const char *obj, const struct filter_arg *fa)
{
    static char bufs[64][512];
    struct filter_set sets[64];
    struct filter *f = NULL;
    char err[512];
    size_t i;

    for (i = 0; i < fa->n_sets; i++) {
        if (split_set(fa->sets[i], bufs[i], sizeof(bufs[i]), &sets[i]) < 0) {
            return -1;
        }
    }
    if (filter_open_file(obj, sets, fa->n_sets, NULL, &f, err, sizeof(err)) < 0) {
        /* Name the user's file, not our temporary object compiled from it. */
        size_t n = strlen(obj);
        int ours = strncmp(err, obj, n) == 0;

        say("sluice: %s%s\n", ours ? fa->path : "", ours ? err + n : err);
        return -1;
    }
    filter_free(f);
    return 0;
}

int filter_arg_prepare(struct filter_arg *fa)
{
    char obj[4200];
    struct stat st;
    int rc;

    if (!fa->path) {
        if (fa->n_sets) {
            say("sluice: --set needs --filter\n");
            return -1;
        }
        return 0;
    }
    /* A FIFO, say, is refused here: clang would wait on it forever. (A path that cannot be
     * read is named by what reads it.) */
    if (stat(fa->path, &st) == 0 && !S_ISREG(st.st_mode)) {
        say("sluice: %s: not a regular file\n", fa->path);
        return -1;
    }
    snprintf(fa->tmpdir, sizeof(fa->tmpdir), "/tmp/sluice-filter-XXXXXX");
    if (!mkdtemp(fa->tmpdir)) {
        say("sluice: mkdtemp: %s\n", strerror(errno));
        fa->tmpdir[0] = '\0';
        return -1;
    }
    snprintf(obj, sizeof(obj), "%s/filter.bpf.o", fa->tmpdir);
    if (ends_with(fa->path, ".c")) {
        if (compile(fa->path, obj) < 0) {
            return -1;
        }
    } else if ((rc = copy_object(fa->path, obj)) != 0) {
        if (rc < 0) {
            return -1;
        }
        snprintf(obj, sizeof(obj), "%s", fa->path); /* (refused by check(), below) */
    }
    if (check(obj, fa) < 0) {
        return -1;
    }
    /* QEMU may run from another directory (a guest chdir before fork). */
    if (!realpath(obj, fa->object)) {
        say("sluice: %s: %s\n", obj, strerror(errno));
        return -1;
    }
    return 0;
}

void filter_arg_cleanup(struct filter_arg *fa)
{
    char obj[4200];

    if (fa->tmpdir[0]) {
        snprintf(obj, sizeof(obj), "%s/filter.bpf.o", fa->tmpdir);
        unlink(obj);
        rmdir(fa->tmpdir);
        fa->tmpdir[0] = '\0';
    }
}
