/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * arena.c — the process's ring arena (see arena.h): one memfd, rings laid
 * end to end. Slow paths only (thread start and exit, fork); never touches
 * ring contents.
 */
#include "arena.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fds.h"

static struct {
    int fd;        /* the memfd (registered with fds.c), -1 if none */
    uint64_t size; /* file bytes handed out so far */
} arena = {-1, 0};

int arena_open(void)
{
    int fd = memfd_create("sluice-rings", MFD_CLOEXEC);

    if (fd < 0) {
        return -errno;
    }
    if (fds_adopt(fd, &arena.fd) < 0) {
        close(fd);
        return -EMFILE;
    }
    arena.size = 0;
    return 0;
}

void arena_forget(void)
{
    if (arena.fd >= 0) {
        fds_drop(&arena.fd);
        close(arena.fd);
    }
    arena.fd = -1;
    arena.size = 0;
}

int arena_fd(void)
{
    return arena.fd;
}

int arena_alloc(uint64_t bytes, uint64_t *offset)
{
    int err = 0;

    fds_lock();
    if (ftruncate(arena.fd, (off_t)(arena.size + bytes)) < 0) {
        err = -errno;
    }
    fds_unlock();
    if (err) {
        return err;
    }
    *offset = arena.size;
    arena.size += bytes;
    return 0;
}

void arena_release(uint64_t offset, uint64_t bytes)
{
    fds_lock();
    (void)fallocate(arena.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)offset,
                    (off_t)bytes);
    fds_unlock();
}
