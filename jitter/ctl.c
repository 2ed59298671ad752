/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ctl.c — consumer registry and control socket of the jitter.
 *
 * Threads: ctl_init() on QEMU's main thread before any guest code;
 * ctl_announce() on a vCPU thread starting (slow path); the monitor thread
 * waits for consumer hang-up. Nothing here runs on the fast path, and the
 * monitor thread never touches a ring except to deactivate a dead consumer's
 * slot and wake the producer that may be waiting for it.
 */
#include "ctl.h"
#include "arena.h"
#include "fds.h"
#include "jitter.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <sluice/ctl.h>

struct consumer {
    int fd;       /* connected SOCK_SEQPACKET, close-on-exec, in fds.c; -1 = free */
    int lossless; /* as asked in HELLO */
};

static struct consumer consumers[SLUICE_MAX_CONSUMERS] = {
    [0 ... SLUICE_MAX_CONSUMERS - 1] = {-1, 0}};
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char ctl_arch[16];

static int send_msg(int fd, const struct sluice_ctl_msg *m, int pass_fd)
{
    char cbuf[CMSG_SPACE(sizeof(int))] = {0};
    struct iovec iov = {(void *)m, sizeof(*m)};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};

    if (pass_fd >= 0) {
        struct cmsghdr *c;
        mh.msg_control = cbuf;
        mh.msg_controllen = sizeof(cbuf);
        c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
    }
    return sendmsg(fd, &mh, MSG_NOSIGNAL) == (ssize_t)sizeof(*m) ? 0 : -errno;
}

/* Read the consumer's HELLO (bounded wait) and answer WELCOME or REFUSED. */
static int handshake(int fd, unsigned slot)
{
    struct sluice_ctl_msg m = {0}, r = {0};
    struct timeval tv = {10, 0};
    ssize_t n;

    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    n = recv(fd, &m, sizeof(m), 0);
    tv.tv_sec = 0;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (n != (ssize_t)sizeof(m) || m.type != SLUICE_CTL_HELLO) {
        fprintf(stderr, "sluice-jitter: consumer sent no HELLO (%s)\n",
                n < 0 ? strerror(errno) : "short or wrong message");
        return -EPROTO;
    }
    r.version = SLUICE_CTL_VERSION;
    r.pid = (uint32_t)getpid();
    snprintf(r.arch, sizeof(r.arch), "%s", ctl_arch);
    if (m.version != SLUICE_CTL_VERSION) {
        r.type = SLUICE_CTL_REFUSED;
        snprintf(r.error, sizeof(r.error), "control protocol %u, jitter speaks %u", m.version,
                 SLUICE_CTL_VERSION);
        send_msg(fd, &r, -1);
        fprintf(stderr, "sluice-jitter: consumer refused: %s\n", r.error);
        return -EPROTO;
    }
    r.type = SLUICE_CTL_WELCOME;
    r.slot = slot;
    consumers[slot].lossless = m.lossless != 0;
    return send_msg(fd, &r, -1);
}

static void deactivate(struct ring *r, void *arg)
{
    unsigned slot = (unsigned)(uintptr_t)arg;

    __atomic_store_n(&r->hdr->consumer[slot].active, 0, __ATOMIC_RELEASE);
    ring_wake_producer(r, slot);
}

/* A consumer hung up (or died): stop waiting for it, free its slot. */
static void consumer_gone(unsigned slot)
{
    pthread_mutex_lock(&lock);
    fds_drop(&consumers[slot].fd);
    close(consumers[slot].fd);
    consumers[slot].fd = -1;
    pthread_mutex_unlock(&lock);
    jitter_for_each_ring(deactivate, (void *)(uintptr_t)slot);
}

/* The consumer's socket number now (a guest's dup2 onto it moves it). */
static int consumer_fd(unsigned slot)
{
    int fd;

    fds_lock();
    fd = consumers[slot].fd;
    fds_unlock();
    return fd;
}

/*
 * Monitor thread: wait for the consumer's hang-up. It sends nothing after
 * HELLO. The poll times out now and then so a moved socket is picked up;
 * what it reports is acted on only if the number is still ours.
 */
static void *monitor(void *arg)
{
    unsigned slot = (unsigned)(uintptr_t)arg;
    char buf[sizeof(struct sluice_ctl_msg)];
    int gone = 0;

    while (!gone) {
        struct pollfd p = {.fd = consumer_fd(slot), .events = POLLIN | POLLRDHUP};
        int n = poll(&p, 1, 500);

        if (n <= 0) {
            continue;
        }
        fds_lock();
        if (p.fd == consumers[slot].fd) {
            gone = (p.revents & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL)) ||
                   ((p.revents & POLLIN) && recv(p.fd, buf, sizeof(buf), MSG_DONTWAIT) == 0);
        }
        fds_unlock();
    }
    consumer_gone(slot);
    return NULL;
}

/* Start the monitor with every signal blocked: signals are the guest's, via QEMU. */
static void start_monitor(unsigned slot)
{
    sigset_t all, old;
    pthread_t t;

    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    if (pthread_create(&t, NULL, monitor, (void *)(uintptr_t)slot) == 0) {
        pthread_detach(t);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

int ctl_init(const char *arch, int fd)
{
    int own, err;

    snprintf(ctl_arch, sizeof(ctl_arch), "%s", arch);
    if (fd < 0) {
        return 0;
    }
    if (fcntl(fd, F_GETFD) < 0) {
        fprintf(stderr, "sluice-jitter: consumer_fd=%d is not an open file descriptor\n", fd);
        return -EBADF;
    }
    /* Out of the guest's way (fds.c); the inherited number is closed. */
    own = fds_adopt(fd, &consumers[0].fd);
    if (own < 0) {
        fprintf(stderr, "sluice-jitter: cannot keep the consumer socket: %s\n", strerror(-own));
        return own;
    }
    err = handshake(own, 0);
    if (err < 0) {
        fds_drop(&consumers[0].fd);
        close(own);
        consumers[0].fd = -1;
        return err;
    }
    start_monitor(0);
    return 0;
}

void ctl_announce(struct ring *r)
{
    struct sluice_ctl_msg m = {0};
    unsigned i;

    m.type = SLUICE_CTL_RING;
    m.version = SLUICE_CTL_VERSION;
    m.pid = r->hdr->pid;
    m.tid = r->hdr->tid;
    m.ring_bytes = r->size;
    m.offset = r->offset;
    snprintf(m.arch, sizeof(m.arch), "%s", ctl_arch);
    pthread_mutex_lock(&lock);
    fds_lock(); /* the socket's and the arena's numbers hold still */
    for (i = 0; i < SLUICE_MAX_CONSUMERS; i++) {
        if (consumers[i].fd < 0) {
            continue;
        }
        r->hdr->consumer[i].lossless = (uint32_t)consumers[i].lossless;
        __atomic_store_n(&r->hdr->consumer[i].active, 1, __ATOMIC_RELEASE);
        m.slot = i;
        if (send_msg(consumers[i].fd, &m, arena_fd()) < 0) {
            /* The consumer is going away; the monitor will notice. */
            __atomic_store_n(&r->hdr->consumer[i].active, 0, __ATOMIC_RELEASE);
        }
    }
    fds_unlock();
    pthread_mutex_unlock(&lock);
}

void ctl_after_fork_child(void)
{
    unsigned i;

    pthread_mutex_init(&lock, NULL);
    for (i = 0; i < SLUICE_MAX_CONSUMERS; i++) {
        if (consumers[i].fd >= 0) {
            start_monitor(i);
        }
    }
}
