/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fds.c — the jitter's descriptors (see fds.h).
 *
 * Any thread; never on the fast path (descriptors are made at init, at
 * fork and at attach; QEMU asks about them only at guest syscalls that name
 * a descriptor). Nothing here may close a descriptor that is not ours.
 */
#include "fds.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "sluice/jitter_abi.h"

/*
 * Descriptors go below sluice_fds_top() (jitter_abi.h), whatever RLIMIT_NOFILE
 * says: a descriptor near a limit of 2^20 would make the kernel grow the
 * process's descriptor table to that size (and copy it at every fork).
 */
/* How far below the top we look for a free number before giving up. */
#define FDS_SEARCH 256

static struct {
    pthread_mutex_t lock;
    int *home[FDS_MAX]; /* where each registered descriptor's number lives */
} fdreg = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* A close-on-exec duplicate of @p fd at the highest free number, or -1. */
static int dup_high(int fd)
{
    long top = sluice_fds_top(), n;
    int high;

    for (n = top - 1; n >= 3 && n >= top - FDS_SEARCH; n--) {
        /* Taken: look lower without a dup, whose result past the table's end
         * would make the kernel grow it (synchronize_rcu: ~8 ms each time). */
        if (fcntl((int)n, F_GETFD) >= 0) {
            continue;
        }
        high = fcntl(fd, F_DUPFD_CLOEXEC, (int)n);
        if (high >= top) {
            close(high); /* n..top-1 are taken, and the limit is above SLUICE_FDS_TOP: lower */
            continue;
        }
        if (high >= 0) {
            return high; /* the lowest free >= n: the highest free, going down */
        }
        if (errno != EMFILE && errno != EINVAL) {
            return -1;
        }
    }
    errno = EMFILE;
    return -1;
}

int fds_adopt(int fd, int *home)
{
    int i, high;

    pthread_mutex_lock(&fdreg.lock);
    for (i = 0; i < FDS_MAX && fdreg.home[i]; i++) {
    }
    if (i == FDS_MAX) {
        pthread_mutex_unlock(&fdreg.lock);
        return -EMFILE;
    }
    high = dup_high(fd);
    if (high >= 0 && high > fd) {
        close(fd);
        fd = high;
    } else if (high >= 0) {
        close(high); /* no higher number is free: keep the one we have */
    }
    *home = fd;
    fdreg.home[i] = home;
    pthread_mutex_unlock(&fdreg.lock);
    return fd;
}

void fds_move(int *from, int *to)
{
    int i;

    pthread_mutex_lock(&fdreg.lock);
    for (i = 0; i < FDS_MAX; i++) {
        if (fdreg.home[i] == from) {
            fdreg.home[i] = to;
            *to = *from;
        }
    }
    pthread_mutex_unlock(&fdreg.lock);
}

void fds_drop(int *home)
{
    int i;

    pthread_mutex_lock(&fdreg.lock);
    for (i = 0; i < FDS_MAX; i++) {
        if (fdreg.home[i] == home) {
            fdreg.home[i] = NULL;
        }
    }
    pthread_mutex_unlock(&fdreg.lock);
}

int fds_next(int from)
{
    int i, best = -1;

    pthread_mutex_lock(&fdreg.lock);
    for (i = 0; i < FDS_MAX; i++) {
        int fd = fdreg.home[i] ? *fdreg.home[i] : -1;
        if (fd >= from && (best < 0 || fd < best)) {
            best = fd;
        }
    }
    pthread_mutex_unlock(&fdreg.lock);
    return best;
}

int fds_claim(int fd)
{
    int i, moved, err = 0;

    pthread_mutex_lock(&fdreg.lock);
    for (i = 0; i < FDS_MAX; i++) {
        if (fdreg.home[i] && *fdreg.home[i] == fd) {
            moved = dup_high(fd);
            if (moved < 0) {
                err = -EMFILE;
                break;
            }
            *fdreg.home[i] = moved;
            close(fd);
            break;
        }
    }
    pthread_mutex_unlock(&fdreg.lock);
    return err;
}

int fds_grow(int fd, uint64_t bytes)
{
    const struct timespec now = {0, 0};
    sigset_t xfsz, was, pending;
    int err = 0, had;

    /* Past RLIMIT_FSIZE the kernel sends this thread SIGXFSZ, which QEMU
     * would hand the guest as its own (by default: killed, core dumped). */
    sigemptyset(&xfsz);
    sigaddset(&xfsz, SIGXFSZ);
    pthread_sigmask(SIG_BLOCK, &xfsz, &was);
    had = sigpending(&pending) == 0 && sigismember(&pending, SIGXFSZ);
    if (ftruncate(fd, (off_t)bytes) < 0) {
        err = -errno;
        if (err == -EFBIG && !had) {
            (void)sigtimedwait(&xfsz, NULL, &now); /* ours: take it back */
        }
    }
    pthread_sigmask(SIG_SETMASK, &was, NULL);
    return err;
}

int fds_spare(void)
{
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

    if (fd < 0) {
        return -errno;
    }
    close(fd);
    return 0;
}

/* The root directory the jitter started in, opened once (root_open()), registered; -1 if it
 * could not be. */
static int root_fd = -1;
static pthread_once_t root_once = PTHREAD_ONCE_INIT;

static void root_open(void)
{
    int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);

    if (fd >= 0 && fds_adopt(fd, &root_fd) < 0) {
        close(fd);
    }
}

/* The directory to resolve absolute @p path from, and in *@p rel the name to give it;
 * called with the lock held (a guest's dup2 moves root_fd). */
static int from_root(const char *path, const char **rel)
{
    if (root_fd < 0 || path[0] != '/') {
        *rel = path;
        return AT_FDCWD;
    }
    *rel = path[1] ? path + 1 : ".";
    return root_fd;
}

int fds_open(const char *path, int flags)
{
    const char *rel;
    int dir, fd;

    pthread_once(&root_once, root_open);
    pthread_mutex_lock(&fdreg.lock);
    dir = from_root(path, &rel);
    fd = openat(dir, rel, flags);
    if (fd < 0) {
        fd = -errno;
    }
    pthread_mutex_unlock(&fdreg.lock);
    return fd;
}

ssize_t fds_readlink(const char *path, char *buf, size_t n)
{
    const char *rel;
    ssize_t len;
    int dir;

    pthread_once(&root_once, root_open);
    pthread_mutex_lock(&fdreg.lock);
    dir = from_root(path, &rel);
    len = readlinkat(dir, rel, buf, n);
    if (len < 0) {
        len = -errno;
    }
    pthread_mutex_unlock(&fdreg.lock);
    return len;
}

int fds_unlink(const char *path)
{
    const char *rel;
    int dir, err;

    pthread_once(&root_once, root_open);
    pthread_mutex_lock(&fdreg.lock);
    dir = from_root(path, &rel);
    err = unlinkat(dir, rel, 0) < 0 ? -errno : 0;
    pthread_mutex_unlock(&fdreg.lock);
    return err;
}

void fds_lock(void)
{
    pthread_mutex_lock(&fdreg.lock);
}

void fds_unlock(void)
{
    pthread_mutex_unlock(&fdreg.lock);
}

void fds_after_fork_child(void)
{
    pthread_mutex_init(&fdreg.lock, NULL);
}
