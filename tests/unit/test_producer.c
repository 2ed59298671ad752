/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * test_producer.c — the tests' ring producer (see test_producer.h). It runs
 * on a test's producer thread; it is a model of the protocol, not of the
 * jitter's speed.
 */
#include "test_producer.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static long futex(uint32_t *w, int op, uint32_t val, const struct timespec *ts)
{
    return syscall(SYS_futex, w, op, val, ts, NULL, 0);
}

struct sluice_ring_tail *test_tails(int *fd)
{
    static struct sluice_ring_tail *tails;
    static int tails_fd = -1;

    if (!tails) {
        int f = memfd_create("sluice-test-tails", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        void *p;

        if (f < 0 || ftruncate(f, (off_t)SLUICE_TAIL_BYTES) < 0 ||
            fcntl(f, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) < 0) {
            return NULL;
        }
        p = mmap(NULL, SLUICE_TAIL_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
        if (p == MAP_FAILED) {
            return NULL;
        }
        tails = p;
        tails_fd = f;
    }
    if (fd) {
        *fd = tails_fd;
    }
    return tails;
}

int test_ring__create(struct test_ring *t, uint64_t size, uint32_t tid, uint64_t start)
{
    static uint32_t next_line;
    struct sluice_ring_tail *tails = test_tails(NULL);
    uint8_t *base;
    int flags = MAP_SHARED | MAP_FIXED;

    memset(t, 0, sizeof(*t));
    if (!tails) {
        return -errno;
    }
    t->fd = memfd_create("sluice-test-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (t->fd < 0 || ftruncate(t->fd, (off_t)(SLUICE_RING_HDR_BYTES + size)) < 0 ||
        fcntl(t->fd, F_ADD_SEALS, F_SEAL_SHRINK) < 0) {
        return -errno;
    }
    t->map_len = SLUICE_RING_HDR_BYTES + 2 * size;
    base = mmap(NULL, t->map_len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED ||
        mmap(base, SLUICE_RING_HDR_BYTES, PROT_READ | PROT_WRITE, flags, t->fd, 0) == MAP_FAILED ||
        mmap(base + SLUICE_RING_HDR_BYTES, size, PROT_READ | PROT_WRITE, flags, t->fd,
             SLUICE_RING_HDR_BYTES) == MAP_FAILED ||
        mmap(base + SLUICE_RING_HDR_BYTES + size, size, PROT_READ | PROT_WRITE, flags, t->fd,
             SLUICE_RING_HDR_BYTES) == MAP_FAILED) {
        return -errno;
    }
    t->map = base;
    t->hdr = (struct sluice_ring_hdr *)base;
    t->data = base + SLUICE_RING_HDR_BYTES;
    t->size = size;
    t->pos = start;
    t->pad_boundaries = 1;
    t->hdr->magic = SLUICE_RING_MAGIC;
    t->hdr->version = SLUICE_FORMAT_VERSION;
    t->hdr->hdr_bytes = SLUICE_RING_HDR_BYTES;
    t->hdr->data_size = size;
    t->hdr->pid = 1000;
    t->hdr->tid = tid;
    t->hdr->seq = tid; /* unique per ring, as the jitter numbers them */
    memcpy(t->hdr->arch, "x86_64", 7);
    memcpy(t->hdr->comm, "testprog", 9);
    t->hdr->head = start;
    t->line = next_line++;
    t->tail = tails + t->line;
    t->tail->tail = start;
    t->hdr->slot[0].active = 1;
    t->hdr->slot[0].lossless = 1;
    return 0;
}

int test_ring__add_blocks(struct test_ring *t, uint64_t bytes)
{
    uint64_t offset = SLUICE_RING_HDR_BYTES + t->size;
    void *base;

    if (ftruncate(t->fd, (off_t)(offset + bytes)) < 0) {
        return -errno;
    }
    base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, t->fd, (off_t)offset);
    if (base == MAP_FAILED) {
        return -errno;
    }
    t->blocks = base;
    t->blocks_data = (uint64_t *)((uint8_t *)base + SLUICE_BLOCKS_HDR_BYTES);
    t->blocks_len = bytes;
    t->blocks->magic = SLUICE_BLOCKS_MAGIC;
    t->blocks->version = SLUICE_FORMAT_VERSION;
    t->blocks->hdr_bytes = SLUICE_BLOCKS_HDR_BYTES;
    t->blocks->capacity_words = (bytes - SLUICE_BLOCKS_HDR_BYTES) / 8;
    t->hdr->blocks_offset = offset;
    t->hdr->blocks_bytes = bytes;
    return 0;
}

uint64_t test_ring__add_block(struct test_ring *t, unsigned n, const uint64_t *pcs,
                              const uint8_t *recorded)
{
    uint64_t id = t->blocks->used_words, count = 0;
    uint8_t *bytes = (uint8_t *)&t->blocks_data[id + 1 + n];

    memset(bytes, 0, (n + 7) / 8 * 8);
    for (unsigned i = 0; i < n; i++) {
        t->blocks_data[id + 1 + i] = pcs[i];
        bytes[i] = 4 | (recorded[i] ? SLUICE_BLOCK_RECORDED : 0);
        count += recorded[i] != 0;
    }
    t->blocks_data[id] = n | count << 16;
    /* Release: pairs with the consumer's acquire load of used_words. */
    __atomic_store_n(&t->blocks->used_words, id + sluice_block_words(n), __ATOMIC_RELEASE);
    return id;
}

void test_ring__destroy(struct test_ring *t)
{
    if (t->blocks) {
        munmap(t->blocks, t->blocks_len);
        t->blocks = NULL;
    }
    if (t->map) {
        munmap(t->map, t->map_len);
    }
    if (t->fd >= 0) {
        close(t->fd);
    }
    t->map = NULL;
    t->fd = -1;
}

void test_ring__publish(struct test_ring *t)
{
    /* Release pairs with the consumer's acquire load of head. */
    __atomic_store_n(&t->hdr->head, t->pos, __ATOMIC_RELEASE);
    /* Full fence: the store of head is visible before we read head_waiting
     * (the consumer sets it, then re-reads head). */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (__atomic_load_n(&t->tail->head_waiting, __ATOMIC_RELAXED)) {
        __atomic_fetch_add(&t->hdr->head_futex, 1, __ATOMIC_RELEASE);
        futex(&t->hdr->head_futex, FUTEX_WAKE, INT_MAX, NULL);
    }
}

/* Wait until @p bytes more fit in front of slot 0's tail. The consumer
 * wakes us only while producer_waiting is set (record.h). */
static void wait_space(struct test_ring *t, uint64_t bytes)
{
    struct sluice_ring_slot *c = &t->hdr->slot[0];
    struct sluice_ring_tail *tl = t->tail;
    struct timespec ts = {0, 10 * 1000 * 1000};

    for (;;) {
        uint32_t seen = __atomic_load_n(&tl->tail_futex, __ATOMIC_ACQUIRE);
        uint64_t tail;

        __atomic_store_n(&c->producer_waiting, 1, __ATOMIC_SEQ_CST);
        tail = __atomic_load_n(&tl->tail, __ATOMIC_SEQ_CST);
        if (t->pos + bytes - tail <= t->size) {
            __atomic_store_n(&c->producer_waiting, 0, __ATOMIC_RELAXED);
            return;
        }
        test_ring__publish(t); /* the consumer must see what is there to free space */
        futex(&tl->tail_futex, FUTEX_WAIT, seen, &ts);
        t->waits++;
    }
}

/* Copy @p n words at the write position (the data area is mapped twice:
 * no wrap-around case). */
static void put(struct test_ring *t, const uint64_t *w, unsigned n)
{
    wait_space(t, (uint64_t)n * 8);
    memcpy(t->data + (t->pos & (t->size - 1)), w, (size_t)n * 8);
    t->pos += (uint64_t)n * 8;
}

void test_ring__append(struct test_ring *t, const uint64_t *w, unsigned n)
{
    uint64_t room = SLUICE_CHUNK_BYTES - (t->pos & (SLUICE_CHUNK_BYTES - 1));

    /* record.h: a chunk boundary is a record boundary; pad up to it. The
     * PAD's body is left as it is (consumers skip it unread). */
    if (t->pad_boundaries && (uint64_t)n * 8 > room) {
        uint64_t pad = sluice_pad_hdr(room / 8);

        wait_space(t, room);
        put(t, &pad, 1);
        t->pos += room - 8;
    }
    put(t, w, n);
}

void test_ring__close(struct test_ring *t)
{
    test_ring__publish(t);
    __atomic_fetch_or(&t->hdr->flags, SLUICE_RING_CLOSED, __ATOMIC_RELEASE);
    __atomic_fetch_add(&t->hdr->head_futex, 1, __ATOMIC_RELEASE);
    futex(&t->hdr->head_futex, FUTEX_WAKE, INT_MAX, NULL);
}

int test_ctl__send(int fd, const struct sluice_ctl_msg *m, int pass_fd)
{
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctrl;
    struct iovec iov = {(void *)m, sizeof(*m)};
    struct msghdr mh = {0};
    struct cmsghdr *cm;
    ssize_t n;

    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    if (pass_fd >= 0) {
        mh.msg_control = ctrl.buf;
        mh.msg_controllen = sizeof(ctrl.buf);
        cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &pass_fd, sizeof(int));
    }
    n = sendmsg(fd, &mh, MSG_NOSIGNAL);
    if (n >= 0 && n != (ssize_t)sizeof(*m)) {
        errno = EMSGSIZE;
    }
    return n == (ssize_t)sizeof(*m) ? 0 : -1;
}
