/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * tails.c — the consumers' tail files (see tails.h). Slow paths only
 * (attach, thread start); never touches a ring.
 */
#include "tails.h"

#include "fds.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The file grows by this much at a time (1024 lines). */
#define GROW_BYTES (64u * 1024)

/* What the processes that share a tail file share about it. */
struct shared {
    uint32_t next; /* the next free line */
    uint32_t pad_;
    uint64_t bytes; /* the most it was grown to (it never shrinks) */
};

static struct {
    uint8_t *base; /* SLUICE_MAX_CONSUMERS reservations of SLUICE_TAIL_BYTES */
    int fd[SLUICE_MAX_CONSUMERS];
    struct shared *sh[SLUICE_MAX_CONSUMERS];
} T = {.fd = {[0 ... SLUICE_MAX_CONSUMERS - 1] = -1}};

int tails_init(void)
{
    size_t bytes = (size_t)SLUICE_TAIL_BYTES * SLUICE_MAX_CONSUMERS;
    void *p = mmap(NULL, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

    if (p == MAP_FAILED) {
        return -errno;
    }
    T.base = p;
    return 0;
}

static uint8_t *place(unsigned i)
{
    return T.base + (size_t)i * SLUICE_TAIL_BYTES;
}

int tails_new(unsigned i)
{
    struct shared *sh;
    uint64_t bytes;
    int fd, err = 0;

    if (!T.base || i >= SLUICE_MAX_CONSUMERS) {
        return -EINVAL;
    }
    sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) {
        return -errno;
    }
    /* As long as the last consumer's file: a producer that took a pointer to
     * one of its lines just before the slot closed may still touch it, in
     * the new file then, never past its end (a SIGBUS). */
    bytes = T.sh[i] ? __atomic_load_n(&T.sh[i]->bytes, __ATOMIC_RELAXED) : 0;
    sh->bytes = bytes;
    fd = memfd_create("sluice-tails", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    /* Never shrunk (a consumer that could would make our next access a SIGBUS);
     * mapped whole, touched only below its size. */
    if (fd < 0) {
        err = -errno;
    } else if ((err = fds_grow(fd, bytes)) == 0 &&
               (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_SEAL) < 0 ||
                mmap(place(i), SLUICE_TAIL_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                     fd, 0) == MAP_FAILED)) {
        err = -errno;
    }
    tails_drop(i);
    if (err == 0 && fds_adopt(fd, &T.fd[i]) < 0) {
        err = -EMFILE;
    }
    if (err < 0) {
        if (fd >= 0) {
            close(fd);
        }
        munmap(sh, sizeof(*sh));
        return err;
    }
    if (T.sh[i]) {
        munmap(T.sh[i], sizeof(*T.sh[i])); /* ours only: a parent keeps its mapping */
    }
    T.sh[i] = sh;
    return 0;
}

int tails_fd(unsigned i)
{
    return i < SLUICE_MAX_CONSUMERS ? T.fd[i] : -1;
}

void tails_drop(unsigned i)
{
    if (i < SLUICE_MAX_CONSUMERS && T.fd[i] >= 0) {
        fds_drop(&T.fd[i]);
        close(T.fd[i]);
        T.fd[i] = -1;
    }
}

/* Make slot @p i's file at least @p bytes long (another process of the tree may have). */
static int grow(unsigned i, uint64_t bytes)
{
    struct stat st;
    int err = 0;

    if (__atomic_load_n(&T.sh[i]->bytes, __ATOMIC_RELAXED) >= bytes) {
        return 0;
    }
    fds_lock();
    if (fstat(T.fd[i], &st) < 0) {
        err = -errno;
    } else if ((uint64_t)st.st_size < bytes && (err = fds_grow(T.fd[i], bytes)) < 0) {
        /* Sealed against shrinking: a sibling process that grew it further wins. */
        if (fstat(T.fd[i], &st) == 0 && (uint64_t)st.st_size >= bytes) {
            err = 0;
        }
    }
    fds_unlock();
    if (err == 0) {
        uint64_t was = __atomic_load_n(&T.sh[i]->bytes, __ATOMIC_RELAXED);

        while (was < bytes && !__atomic_compare_exchange_n(&T.sh[i]->bytes, &was, bytes, 1,
                                                           __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
        }
    }
    return err;
}

long tails_line(unsigned i, struct sluice_ring_tail **tail)
{
    uint64_t end;
    uint32_t line;
    int err;

    if (i >= SLUICE_MAX_CONSUMERS || !T.sh[i] || T.fd[i] < 0) {
        return -ENOENT;
    }
    line = __atomic_fetch_add(&T.sh[i]->next, 1, __ATOMIC_RELAXED);
    if (line >= SLUICE_TAIL_LINES) {
        __atomic_store_n(&T.sh[i]->next, SLUICE_TAIL_LINES, __ATOMIC_RELAXED); /* no wrap */
        return -ENOSPC;
    }
    end = ((uint64_t)line + 1) * sizeof(struct sluice_ring_tail);
    err = grow(i, (end + GROW_BYTES - 1) / GROW_BYTES * GROW_BYTES);
    if (err < 0) {
        return err;
    }
    *tail = (struct sluice_ring_tail *)place(i) + line;
    return (long)line;
}
