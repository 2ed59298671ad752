/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * arena.c — the process's ring arena (see arena.h): one memfd, rings laid
 * end to end. Slow paths only (thread start and exit, fork); never touches
 * ring contents.
 */
#include "arena.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fds.h"

/* Released ranges kept for reuse; past this many, one is forgotten (the file grows instead). */
#define ARENA_FREE_MAX 256

/*
 * The file's size, set when it is made: memfd pages exist only once written,
 * so the rest costs nothing, and rings are then carved from it without
 * growing the file. A guest that lowers its own file size limit
 * (setrlimit(RLIMIT_FSIZE)) and then starts threads still gets their rings.
 * Under a lower limit from the start (ulimit -f) the file grows ring by ring.
 */
#define ARENA_RESERVE (1ull << 40)

static struct {
    int fd;        /* the memfd (registered with fds.c), -1 if none */
    int ro_fd;     /* the same file opened read-only, for consumers (registered), -1 if none */
    uint64_t size; /* file bytes handed out so far */
    uint64_t cap;  /* the file's size: ARENA_RESERVE if it could be set at open, else size */
    /* Ranges given back (arena_release), reused by an arena_alloc of the same
     * size: threads that come and go keep the file as long as the most that
     * lived at once, under a file size limit (ulimit -f) too. */
    unsigned n_free;
    struct {
        uint64_t offset, bytes;
    } free[ARENA_FREE_MAX];
} arena = {-1, -1, 0, 0, 0, {{0, 0}}};

/* A read-only descriptor of memfd @p fd (its /proc name opened O_RDONLY), or -errno. */
static int open_read_only(int fd)
{
    char name[32];

    snprintf(name, sizeof(name), "/proc/self/fd/%d", fd);
    return fds_open(name, O_RDONLY | O_CLOEXEC);
}

int arena_open(void)
{
    int fd = memfd_create("sluice-rings", MFD_CLOEXEC | MFD_ALLOW_SEALING), ro;

    if (fd < 0) {
        return -errno;
    }
    /* Nobody shrinks it under a mapping (a SIGBUS in QEMU or a consumer). */
    ro = fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_SEAL) < 0 ? -errno : open_read_only(fd);
    if (ro < 0) {
        close(fd);
        return ro;
    }
    if (fds_adopt(fd, &arena.fd) < 0) {
        close(fd);
        close(ro);
        return -EMFILE;
    }
    if (fds_adopt(ro, &arena.ro_fd) < 0) {
        close(ro);
        arena_forget();
        return -EMFILE;
    }
    arena.size = 0;
    arena.n_free = 0;
    fds_lock();
    arena.cap = fds_grow(arena.fd, ARENA_RESERVE) == 0 ? ARENA_RESERVE : 0;
    fds_unlock();
    return 0;
}

void arena_forget(void)
{
    int *fd[] = {&arena.fd, &arena.ro_fd};

    for (unsigned i = 0; i < 2; i++) {
        if (*fd[i] >= 0) {
            fds_drop(fd[i]);
            close(*fd[i]);
        }
        *fd[i] = -1;
    }
    arena.size = 0;
    arena.cap = 0;
    arena.n_free = 0;
}

int arena_fd(void)
{
    return arena.fd;
}

int arena_ro_fd(void)
{
    return arena.ro_fd;
}

int arena_alloc(uint64_t bytes, uint64_t *offset)
{
    int err;

    for (unsigned i = 0; i < arena.n_free; i++) {
        if (arena.free[i].bytes == bytes) {
            *offset = arena.free[i].offset;
            arena.free[i] = arena.free[--arena.n_free];
            return 0;
        }
    }
    if (arena.size + bytes > arena.cap) {
        fds_lock();
        err = fds_grow(arena.fd, arena.size + bytes);
        fds_unlock();
        if (err) {
            return err;
        }
        arena.cap = arena.size + bytes;
    }
    *offset = arena.size;
    arena.size += bytes;
    return 0;
}

void arena_punch(uint64_t offset, uint64_t bytes)
{
    fds_lock();
    (void)fallocate(arena.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)offset,
                    (off_t)bytes);
    fds_unlock();
}

void arena_release(uint64_t offset, uint64_t bytes)
{
    arena_punch(offset, bytes);
    if (arena.n_free < ARENA_FREE_MAX) {
        arena.free[arena.n_free].offset = offset;
        arena.free[arena.n_free].bytes = bytes;
        arena.n_free++;
    }
}
