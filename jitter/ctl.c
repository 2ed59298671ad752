/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ctl.c — the jitter's consumer registry and its control thread
 * (protocol: include/sluice/ctl.h).
 *
 * A consumer holds one slot, the same index in every ring header of the
 * process. Slots are FREE, GOING (hung up: being taken out of the rings)
 * or LIVE (every ring is announced to it). A connection that has not yet
 * said HELLO or QUERY waits in one of PENDING_MAX entries past the slots
 * (PENDING), so connections that say nothing never keep a consumer out.
 * When the first consumer comes or the last one leaves, the jitter has
 * QEMU flush its translation cache (jitter_consumers_changed()).
 *
 * Threads: ctl_init() and ctl_wait_attach() on QEMU's main thread before
 * any guest code; ctl_announce() on a vCPU thread starting, under the
 * ring-list lock; the fork and exit hooks as jitter_abi.h says; all the
 * rest on the control thread, which accepts consumers, answers HELLO and
 * QUERY, and notices hang-ups. Nothing here runs on the fast path; a vCPU
 * waits here only to send a new ring to consumers that do not read their
 * sockets, SEND_SECONDS at most in all, after which they are dropped.
 *
 * Lock order: the ring-list lock (jitter.c), then reg.lock, then
 * fds_lock(). Attaching takes the ring-list lock so that a consumer is
 * given every ring exactly once: the rings alive when it attaches here,
 * the later ones by ctl_announce().
 */
#include "ctl.h"
#include "../consumer/say.h"
#include "arena.h"
#include "ctl_sock.h"
#include "fds.h"
#include "ids.h"
#include "jitter.h"
#include "once.h"
#include "tails.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <sluice/ctl.h>

/* How long a new connection may take to say HELLO or QUERY. */
#define HELLO_SECONDS 3
/* How long a send to a consumer that does not read may block. */
#define SEND_SECONDS 10
/* The control thread's poll period (a moved descriptor is picked up by then). */
#define POLL_MS 200
/* Connections that may wait for their first message at once; more are refused. */
#define PENDING_MAX 8
/* Slots, then the entries of pending connections. */
#define ENTRIES (SLUICE_MAX_CONSUMERS + PENDING_MAX)

enum slot_state { FREE, PENDING, GOING, LIVE };

struct consumer {
    int fd; /* SOCK_SEQPACKET, registered in fds.c; -1 when FREE */
    enum slot_state state;
    int lossless;    /* as asked in HELLO */
    int via_socket;  /* attached through the socket (counts for wait_attach) */
    time_t deadline; /* PENDING: HELLO or QUERY by then (CLOCK_MONOTONIC seconds) */
};

static struct {
    pthread_mutex_t lock;
    pthread_cond_t attached; /* signalled when `waiting` drops */
    struct consumer c[ENTRIES];
    int listen_fd;    /* registered in fds.c; -1: not listening */
    unsigned waiting; /* socket consumers still awaited before the guest starts */
    unsigned live;    /* LIVE slots (atomic: ctl_consumers() reads it without the lock) */
    int said_uid;     /* a peer of another uid was reported once */
    /* /dev/null, registered, or -1: given up to accept a connection when the
     * guest holds every other descriptor (RLIMIT_NOFILE), so that peer is
     * answered (INFO) or refused with the reason instead of left waiting;
     * taken again when a descriptor of ours is closed. */
    int spare_fd;
    /* The thread whose execve (or SIGKILL of itself) took the socket's file away, 0 if
     * none: its next syscall return is that syscall failing (ctl_exec_failed()). */
    pid_t exec_tid;
    char arch[16];
    char comm[16];
} reg = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .attached = PTHREAD_COND_INITIALIZER,
    .c = {[0 ... ENTRIES - 1] = {.fd = -1, .state = FREE}},
    .listen_fd = -1,
    .spare_fd = -1,
};

/* Orders ctl_exec_start() and ctl_exec_failed() of different threads: one thread's failed
 * execve must not put the file back after another's (that then succeeds) took it. */
static pthread_mutex_t exec_lock = PTHREAD_MUTEX_INITIALIZER;

/* What a message carries (SCM_RIGHTS). */
enum pass { PASS_NONE, PASS_ARENA, PASS_TAIL };

/* Change slot @p i's state, counting LIVE ones; caller holds reg.lock. */
static void set_state(unsigned i, enum slot_state st)
{
    if (reg.c[i].state == LIVE && st != LIVE) {
        __atomic_sub_fetch(&reg.live, 1, __ATOMIC_RELEASE);
    } else if (reg.c[i].state != LIVE && st == LIVE) {
        __atomic_add_fetch(&reg.live, 1, __ATOMIC_RELEASE);
    }
    reg.c[i].state = st;
}

unsigned ctl_consumers(void)
{
    return __atomic_load_n(&reg.live, __ATOMIC_ACQUIRE);
}

static time_t now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec;
}

static int send_on(int fd, const struct sluice_ctl_msg *m, int pass_fd, int flags)
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
    return sendmsg(fd, &mh, MSG_NOSIGNAL | flags) == (ssize_t)sizeof(*m) ? 0 : -errno;
}

/*
 * Send @p m to slot @p i (with the read-only arena or the tail file
 * attached, as @p pass says), caller holding reg.lock. The descriptors' numbers are read and used
 * under fds_lock() (a guest's dup2 may move them), which is never held while waiting: a full socket
 * is waited for with poll, until @p until at most (one deadline for all the consumers a ring goes
 * to, so consumers that do not read hold a new thread back SEND_SECONDS in all, not each).
 */
static int send_to(unsigned i, const struct sluice_ctl_msg *m, enum pass pass, time_t until)
{
    int fd, err;

    for (;;) {
        fds_lock();
        fd = reg.c[i].fd;
        err = send_on(fd, m,
                      pass == PASS_ARENA  ? arena_ro_fd()
                      : pass == PASS_TAIL ? tails_fd(i)
                                          : -1,
                      MSG_DONTWAIT);
        fds_unlock();
        if (err != -EAGAIN || now_s() > until) {
            return err;
        }
        /* Only a wait: if the number moved meanwhile, we try again under the lock. */
        poll(&(struct pollfd){.fd = fd, .events = POLLOUT}, 1, 100);
    }
}

/* Close slot @p i in every ring, live or ended; caller holds the ring-list lock. */
static void close_everywhere(unsigned i)
{
    for (struct ring *r = jitter_rings(); r; r = r->next) {
        ring_slot_close(r, i);
    }
    for (struct ring *r = jitter_ended_rings(); r; r = r->next) {
        ring_slot_close(r, i); /* else its pages would wait for this consumer forever */
    }
}

/* Tell slot @p i's consumer why it is dropped: a REFUSED after WELCOME,
 * queued before its slots close, if its socket has room (it may be full:
 * that can be why). A consumer ignores what it does not expect. */
static void tell_dropped(unsigned i, const char *why)
{
    struct sluice_ctl_msg m = {.type = SLUICE_CTL_REFUSED, .version = SLUICE_CTL_VERSION};

    m.pid = ids_pid(NULL);
    m.slot = i;
    snprintf(m.arch, sizeof(m.arch), "%s", reg.arch);
    snprintf(m.error, sizeof(m.error), "%s", why);
    fds_lock();
    (void)send_on(reg.c[i].fd, &m, -1, MSG_DONTWAIT);
    fds_unlock();
}

/*
 * Stop sending to slot @p i, caller holding the ring-list lock and
 * reg.lock: its slot is closed in every ring first (the consumer reads that
 * as "dropped", not as the end of the trace, when its socket then ends),
 * then its socket is shut down (the control thread reaps it). @p why is
 * said on stderr and to the consumer (NULL: it left, nothing to say).
 */
static void cut_off(unsigned i, const char *why)
{
    if (why) {
        say("sluice-jitter: consumer in slot %u dropped: %s\n", i, why);
        tell_dropped(i, why);
    }
    close_everywhere(i);
    fds_lock();
    shutdown(reg.c[i].fd, SHUT_RDWR);
    fds_unlock();
    set_state(i, GOING);
}

/* Why a send to a consumer failed, or NULL if it left (nothing to say). */
static const char *send_failed(int err, char *buf, size_t size)
{
    if (err == -EPIPE || err == -ECONNRESET) {
        return NULL;
    }
    snprintf(buf, size, "cannot send to it (%s)", strerror(-err));
    return buf;
}

static void ring_msg(const struct ring *r, unsigned slot, uint32_t line, struct sluice_ctl_msg *m)
{
    memset(m, 0, sizeof(*m));
    m->type = SLUICE_CTL_RING;
    m->version = SLUICE_CTL_VERSION;
    m->pid = r->hdr->pid;
    m->tid = r->hdr->tid;
    m->slot = slot;
    m->ring_bytes = r->size;
    m->offset = r->offset;
    m->line = line;
    snprintf(m->arch, sizeof(m->arch), "%s", reg.arch);
}

/* Give ring @p r to LIVE slot @p i; caller holds the ring-list lock and reg.lock. */
static void give_ring(struct ring *r, unsigned i, time_t until)
{
    struct sluice_ring_tail *tail;
    struct sluice_ctl_msg m;
    long line = tails_line(i, &tail);
    char why[96];
    int err;

    if (line < 0) {
        snprintf(why, sizeof(why), "no line left in its tail file for tid %u (%s)", r->hdr->tid,
                 strerror((int)-line));
        cut_off(i, why);
        return;
    }
    ring_slot_open(r, i, reg.c[i].lossless, tail);
    ring_msg(r, i, (uint32_t)line, &m);
    err = send_to(i, &m, PASS_ARENA, until);
    if (err < 0) {
        ring_slot_close(r, i); /* not yet in the list when a new ring is announced */
        cut_off(i, send_failed(err, why, sizeof(why)));
    }
}

/* Whether slot @p i holds a ring of an ended thread unread; ring-list lock held. */
static int holds_ended(unsigned i)
{
    for (struct ring *r = jitter_ended_rings(); r; r = r->next) {
        if (ring_slot_unread(r, i)) {
            return 1;
        }
    }
    return 0;
}

unsigned ctl_drop_holders(int lossy_only, const char *why)
{
    unsigned i, n = 0;

    pthread_mutex_lock(&reg.lock);
    for (i = 0; i < SLUICE_MAX_CONSUMERS; i++) {
        if (reg.c[i].state == LIVE && !(lossy_only && reg.c[i].lossless) && holds_ended(i)) {
            cut_off(i, why);
            n++;
        }
    }
    pthread_mutex_unlock(&reg.lock);
    return n;
}

int ctl_backlogged(unsigned i)
{
    int queued = 0, buf = 0, backlogged = 0;
    socklen_t len = sizeof(buf);

    pthread_mutex_lock(&reg.lock);
    if (i < SLUICE_MAX_CONSUMERS && reg.c[i].state == LIVE) {
        fds_lock();
        /* SIOCOUTQ: bytes sent on it that the consumer has not read, as the buffer counts them. */
        backlogged = ioctl(reg.c[i].fd, SIOCOUTQ, &queued) == 0 &&
                     getsockopt(reg.c[i].fd, SOL_SOCKET, SO_SNDBUF, &buf, &len) == 0 &&
                     queued >= buf / 4 * 3;
        fds_unlock();
    }
    pthread_mutex_unlock(&reg.lock);
    return backlogged;
}

int ctl_drop(unsigned i, const char *why)
{
    int live;

    pthread_mutex_lock(&reg.lock);
    live = i < SLUICE_MAX_CONSUMERS && reg.c[i].state == LIVE;
    if (live) {
        cut_off(i, why);
    }
    pthread_mutex_unlock(&reg.lock);
    return live;
}

void ctl_announce(struct ring *r)
{
    time_t until = now_s() + SEND_SECONDS;
    unsigned i;

    pthread_mutex_lock(&reg.lock);
    for (i = 0; i < SLUICE_MAX_CONSUMERS; i++) {
        if (reg.c[i].state == LIVE) {
            give_ring(r, i, until);
        }
    }
    pthread_mutex_unlock(&reg.lock);
}

void ctl_abort(uint32_t tid, const char *why, int forked_child)
{
    struct sluice_ctl_msg m = {.type = SLUICE_CTL_ABORT, .version = SLUICE_CTL_VERSION};
    time_t until = now_s() + SEND_SECONDS;

    m.pid = ids_pid(NULL);
    m.tid = tid;
    snprintf(m.arch, sizeof(m.arch), "%s", reg.arch);
    snprintf(m.error, sizeof(m.error), "%s", why);
    if (forked_child) {
        pthread_mutex_init(&reg.lock, NULL); /* held across fork (ctl_fork_prepare) */
    }
    pthread_mutex_lock(&reg.lock);
    for (unsigned i = 0; i < SLUICE_MAX_CONSUMERS; i++) {
        if (reg.c[i].state == LIVE) {
            (void)send_to(i, &m, PASS_NONE, until);
        }
    }
    pthread_mutex_unlock(&reg.lock);
    ctl_sock_unlink(); /* the caller's exit() runs no QEMU exit hook */
}

/* Hold the spare descriptor again if it was given up and one is free (only with a
 * listening socket: it is for connections on it); caller holds reg.lock. */
static void keep_spare(void)
{
    /* From the root QEMU started in: also in a guest's chroot that has no /dev. */
    int fd =
        reg.spare_fd < 0 && reg.listen_fd >= 0 ? fds_open("/dev/null", O_RDONLY | O_CLOEXEC) : -1;

    if (fd >= 0 && fds_adopt(fd, &reg.spare_fd) < 0) {
        close(fd);
    }
}

/* Give the spare descriptor up (its number becomes the lowest free one); reg.lock held. */
static void give_up_spare(void)
{
    fds_drop(&reg.spare_fd);
    close(reg.spare_fd);
    reg.spare_fd = -1;
}

/* Release slot @p i (its descriptor closed); caller holds reg.lock. */
static void release(unsigned i)
{
    if (i < SLUICE_MAX_CONSUMERS) {
        tails_drop(i); /* the file lives on in the mappings that still hold it */
    }
    fds_drop(&reg.c[i].fd);
    close(reg.c[i].fd);
    reg.c[i] = (struct consumer){.fd = -1, .state = FREE};
    keep_spare();
}

static void refuse(int fd, const char *why)
{
    struct sluice_ctl_msg r = {.type = SLUICE_CTL_REFUSED, .version = SLUICE_CTL_VERSION};
    char drop[sizeof(r)];

    r.pid = ids_pid(NULL);
    snprintf(r.arch, sizeof(r.arch), "%s", reg.arch);
    snprintf(r.error, sizeof(r.error), "%s", why);
    (void)send_on(fd, &r, -1, MSG_DONTWAIT);
    /* Read what the peer sent already: a socket closed with unread data
     * resets the peer, which would then never read why it was refused. An
     * empty datagram reads as 0 too (as end of stream does): bounded. */
    for (int k = 0; k < 64 && recv(fd, drop, sizeof(drop), MSG_DONTWAIT) >= 0; k++) {
    }
}

/* The consumer in slot @p i hung up (or died): no ring waits for it any more, the slot is free. */
static void gone(unsigned i)
{
    pthread_mutex_lock(&reg.lock);
    set_state(i, GOING); /* no new ring goes to it; the slot is not yet reusable */
    if (!reg.c[i].via_socket && reg.waiting > 0) {
        /* `sluice run` (the consumer it was started with) is gone before the
         * guest started: nobody may be left to attach, so wait no longer. */
        say("sluice-jitter: the consumer that started pid %d left before %u more "
            "attached: the guest starts now\n",
            (int)ids_pid(NULL), reg.waiting);
        reg.waiting = 0;
        pthread_cond_broadcast(&reg.attached);
    }
    pthread_mutex_unlock(&reg.lock);
    jitter_rings_lock();
    close_everywhere(i);
    jitter_rings_unlock();
    pthread_mutex_lock(&reg.lock);
    release(i);
    pthread_mutex_unlock(&reg.lock);
    if (ctl_consumers() == 0) {
        jitter_consumers_changed(); /* the last one left: stop instrumenting */
    }
}

/*
 * A free slot for the pending connection in entry @p p, which moves
 * there (its descriptor's registration with it); caller holds reg.lock.
 * @return the slot, or -1 if all are taken.
 */
static int take_slot(unsigned p)
{
    unsigned i;

    for (i = 0; i < SLUICE_MAX_CONSUMERS && reg.c[i].state != FREE; i++) {
    }
    if (i == SLUICE_MAX_CONSUMERS) {
        return -1;
    }
    if (i != p) {
        reg.c[i] = reg.c[p];
        fds_move(&reg.c[p].fd, &reg.c[i].fd);
        reg.c[p] = (struct consumer){.fd = -1, .state = FREE};
    }
    return (int)i;
}

/*
 * Give slot @p i a new tail file and send WELCOME with it; caller holds
 * reg.lock. @return 0, or -1 after refusing the consumer (the slot is free).
 * The file's descriptor stays ours until the slot is released: it grows as
 * rings are given (tails.c).
 */
static int welcome(unsigned i, time_t until)
{
    struct sluice_ctl_msg w = {.type = SLUICE_CTL_WELCOME, .version = SLUICE_CTL_VERSION};
    char why[96];
    size_t once;
    int err;

    w.pid = ids_pid(NULL);
    w.slot = i;
    w.tail_bytes = SLUICE_TAIL_BYTES;
    once = once_claimed();
    w.once_before = once < UINT32_MAX ? (uint32_t)once : UINT32_MAX;
    snprintf(w.arch, sizeof(w.arch), "%s", reg.arch);
    err = tails_new(i);
    if (err < 0) {
        snprintf(why, sizeof(why), "no tail file for it (%s)",
                 err == -EMFILE ? "the guest holds every descriptor its RLIMIT_NOFILE allows"
                                : strerror(-err));
        say("sluice-jitter: consumer refused: %s\n", why);
        fds_lock();
        refuse(reg.c[i].fd, why);
        fds_unlock();
        release(i);
        return -1;
    }
    err = send_to(i, &w, PASS_TAIL, until);
    if (err < 0) {
        cut_off(i, send_failed(err, why, sizeof(why)));
    }
    return 0;
}

/* HELLO from the connection in slot @p i: WELCOME, then every ring alive now, then LIVE. */
static void attach(unsigned i, const struct sluice_ctl_msg *hello)
{
    struct ring *r;
    time_t until;
    int first = 0;

    jitter_rings_lock();
    pthread_mutex_lock(&reg.lock);
    reg.c[i].lossless = hello->lossless != 0;
    until = now_s() + SEND_SECONDS;
    if (welcome(i, until) == 0 && reg.c[i].state != GOING) {
        set_state(i, LIVE);
        first = ctl_consumers() == 1;
        for (r = jitter_rings(); r && reg.c[i].state == LIVE; r = r->next) {
            give_ring(r, i, until);
        }
    }
    if (reg.c[i].state == LIVE && reg.c[i].via_socket && reg.waiting > 0) {
        reg.waiting--;
        pthread_cond_broadcast(&reg.attached);
    }
    pthread_mutex_unlock(&reg.lock);
    jitter_rings_unlock();
    if (first) {
        jitter_consumers_changed(); /* the first one came: instrument (outside our locks) */
    }
}

static void count_ring(struct ring *r, void *arg)
{
    struct sluice_ctl_msg *m = arg;

    m->threads++;
    m->lost += __atomic_load_n(&r->hdr->lost, __ATOMIC_RELAXED);
    for (unsigned i = 0; i < SLUICE_MAX_CONSUMERS; i++) {
        if (ring_slot_lossy(r, i)) {
            m->lost += __atomic_load_n(&r->hdr->slot[i].lost_events, __ATOMIC_RELAXED);
        }
    }
}

/* QUERY from pending entry @p i: answer INFO, then forget the connection. */
static void describe(unsigned i)
{
    struct sluice_ctl_msg m = {.type = SLUICE_CTL_INFO, .version = SLUICE_CTL_VERSION};
    unsigned k;

    m.pid = ids_pid(NULL);
    snprintf(m.arch, sizeof(m.arch), "%s", reg.arch);
    snprintf(m.comm, sizeof(m.comm), "%s", reg.comm);
    jitter_for_each_ring(count_ring, &m);
    pthread_mutex_lock(&reg.lock);
    for (k = 0; k < SLUICE_MAX_CONSUMERS; k++) {
        m.consumers += reg.c[k].state == LIVE;
        m.lossless_consumers += reg.c[k].state == LIVE && reg.c[k].lossless;
    }
    m.waiting = reg.waiting;
    (void)send_to(i, &m, 0, now_s() + 1);
    release(i);
    pthread_mutex_unlock(&reg.lock);
}

/* The first message of pending entry @p i (read from @p fd, still ours): act on it. */
static void first_message(unsigned i, int fd)
{
    struct sluice_ctl_msg m;
    ssize_t n = -1;
    char why[96];

    fds_lock();
    if (reg.c[i].fd == fd) { /* else it moved: the next round polls its new number */
        n = recv(fd, &m, sizeof(m), MSG_DONTWAIT | MSG_TRUNC);
    }
    fds_unlock();
    if (n < 0) {
        return; /* nothing yet (EAGAIN), or moved; a dead peer shows as a hang-up */
    }
    if (n == (ssize_t)sizeof(m) && m.version == SLUICE_CTL_VERSION && m.type == SLUICE_CTL_HELLO) {
        int slot;

        pthread_mutex_lock(&reg.lock);
        slot = take_slot(i);
        pthread_mutex_unlock(&reg.lock);
        if (slot >= 0) {
            attach((unsigned)slot, &m);
            return;
        }
        snprintf(why, sizeof(why), "%d consumers are attached already, the most there may be",
                 SLUICE_MAX_CONSUMERS);
    } else if (n == (ssize_t)sizeof(m) && m.version == SLUICE_CTL_VERSION &&
               m.type == SLUICE_CTL_QUERY) {
        describe(i);
        return;
    } else if (n == (ssize_t)sizeof(m) && m.version != SLUICE_CTL_VERSION) {
        snprintf(why, sizeof(why), "control protocol %u, jitter speaks %u", m.version,
                 SLUICE_CTL_VERSION);
    } else if (n == (ssize_t)sizeof(m)) {
        snprintf(why, sizeof(why), "message type %u where HELLO or QUERY was due", m.type);
    } else {
        snprintf(why, sizeof(why), "a %zd-byte message, not %zu", n, sizeof(m));
    }
    pthread_mutex_lock(&reg.lock);
    if (n > 0) {
        fds_lock();
        refuse(reg.c[i].fd, why);
        fds_unlock();
    }
    release(i);
    pthread_mutex_unlock(&reg.lock);
}

/* A connection from the listening socket, its peer's uid in @p uid; or -1, errno in @p err. */
static int accept_locked(uint32_t *uid, int *err)
{
    int fd;

    fds_lock();
    fd = reg.listen_fd >= 0 ? ctl_sock_accept(reg.listen_fd, uid) : -1;
    *err = fd < 0 ? errno : 0;
    fds_unlock();
    return fd;
}

/*
 * A connection on the listening socket: a pending entry, or refused. All
 * under reg.lock, which fork(2) waits for (ctl_fork_prepare): a child never
 * inherits a connection caught between accept and its registration.
 * Returns 0; -1 if none could be accepted for want of a descriptor, the
 * spare's too (the control thread then stops polling the socket for a
 * while, instead of spinning on a connection it cannot take); -2 if none
 * could be while the spare serves another connection (it polls again once
 * the spare is back).
 */
static int accept_one(void)
{
    uint32_t uid;
    int fd, err;
    unsigned i;

    pthread_mutex_lock(&reg.lock);
    fd = accept_locked(&uid, &err);
    if ((err == EMFILE || err == ENFILE) && reg.spare_fd >= 0) {
        give_up_spare(); /* the guest holds the rest: answer this peer with it */
        fd = accept_locked(&uid, &err);
        if (fd < 0) {
            keep_spare();
        }
    }
    if (fd < 0) {
        int spare_busy = reg.spare_fd < 0;

        pthread_mutex_unlock(&reg.lock);
        if (err != EMFILE && err != ENFILE && err != ENOBUFS && err != ENOMEM) {
            return 0;
        }
        return spare_busy ? -2 : -1;
    }
    for (i = SLUICE_MAX_CONSUMERS; i < ENTRIES && reg.c[i].state != FREE; i++) {
    }
    if (uid != (uint32_t)geteuid()) {
        if (!reg.said_uid) {
            say("sluice-jitter: refused a consumer of uid %u (this process runs as %u)\n", uid,
                (unsigned)geteuid());
            reg.said_uid = 1;
        }
        refuse(fd, "another user's process");
        close(fd);
        keep_spare();
    } else if (i == ENTRIES || fds_adopt(fd, &reg.c[i].fd) < 0) {
        refuse(fd, "too many connections have not said HELLO yet");
        close(fd);
        keep_spare();
    } else {
        reg.c[i].state = PENDING;
        reg.c[i].via_socket = 1;
        reg.c[i].deadline = now_s() + HELLO_SECONDS;
    }
    pthread_mutex_unlock(&reg.lock);
    return 0;
}

/* What the control thread's poll reported for slot @p i, polled as @p fd. */
static void on_slot(unsigned i, int fd, short revents)
{
    char buf[sizeof(struct sluice_ctl_msg)];
    enum slot_state st;
    int hung_up = 0;

    pthread_mutex_lock(&reg.lock);
    st = reg.c[i].fd == fd ? reg.c[i].state : FREE; /* moved meanwhile: next round */
    pthread_mutex_unlock(&reg.lock);
    if (st == PENDING && (revents & POLLIN)) {
        first_message(i, fd);
        return;
    }
    if (st == FREE) {
        return;
    }
    fds_lock();
    if (reg.c[i].fd == fd) {
        /* A LIVE consumer says nothing after HELLO: whatever it sends is dropped. */
        hung_up = (revents & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL)) ||
                  ((revents & POLLIN) && recv(fd, buf, sizeof(buf), MSG_DONTWAIT) == 0);
    }
    fds_unlock();
    if (hung_up && st == PENDING) {
        pthread_mutex_lock(&reg.lock);
        release(i);
        pthread_mutex_unlock(&reg.lock);
    } else if (hung_up) {
        gone(i);
    }
}

/* Pending connections past their time are refused. */
static void expire(void)
{
    time_t t = now_s();
    unsigned i;

    pthread_mutex_lock(&reg.lock);
    for (i = SLUICE_MAX_CONSUMERS; i < ENTRIES; i++) {
        if (reg.c[i].state == PENDING && t > reg.c[i].deadline) {
            fds_lock();
            refuse(reg.c[i].fd, "no HELLO or QUERY in time");
            fds_unlock();
            release(i);
        }
    }
    pthread_mutex_unlock(&reg.lock);
}

/* The control thread: the listening socket and every consumer's. */
static void *control(void *arg)
{
    struct pollfd p[1 + ENTRIES];
    int slot_of[1 + ENTRIES];

    time_t listen_again = 0; /* after a connection could not be accepted (no descriptor) */
    int wait_spare = 0;      /* ... while the spare served another: until it is back */

    (void)arg;
    for (;;) {
        nfds_t n = 0, k;

        pthread_mutex_lock(&reg.lock);
        keep_spare(); /* given up and not back (the guest took its number): try again */
        fds_lock();
        if (reg.listen_fd >= 0 && now_s() >= listen_again && !(wait_spare && reg.spare_fd < 0)) {
            p[n] = (struct pollfd){.fd = reg.listen_fd, .events = POLLIN};
            slot_of[n++] = -1;
        }
        for (unsigned i = 0; i < ENTRIES; i++) {
            if (reg.c[i].state != FREE) { /* GOING too: its hang-up reaps it */
                p[n] = (struct pollfd){.fd = reg.c[i].fd, .events = POLLIN | POLLRDHUP};
                slot_of[n++] = (int)i;
            }
        }
        fds_unlock();
        pthread_mutex_unlock(&reg.lock);
        if (poll(p, n, POLL_MS) > 0) {
            for (k = 0; k < n; k++) {
                if (p[k].revents && slot_of[k] < 0) {
                    int rc = accept_one();

                    listen_again = rc == -1 ? now_s() + 1 : 0;
                    wait_spare = rc == -2;
                } else if (p[k].revents) {
                    on_slot((unsigned)slot_of[k], p[k].fd, p[k].revents);
                }
            }
        }
        expire();
        jitter_reap(); /* ended rings every consumer is done with: their pages go back */
    }
    return NULL;
}

/* Start the control thread with every signal blocked: signals are the guest's, via QEMU. */
static int start_control(void)
{
    sigset_t all, old;
    pthread_t t;
    int err;

    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    err = pthread_create(&t, NULL, control, NULL);
    if (err == 0) {
        pthread_detach(t);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return -err;
}

/*
 * Listen on this process's socket; a failure is said once and leaves consumer_fd the only
 * way. At @p init, not when no descriptor is left at all: jitter_init() then ends QEMU
 * with its own line (ulimit -n), which says it all.
 */
static void listen_here(int init)
{
    char why[256];
    int fd = ctl_sock_listen(why, sizeof(why));

    if (fd < 0) {
        if (!init || fds_spare() != -EMFILE) {
            say("sluice-jitter: consumers cannot attach at run time: %s\n", why);
        }
        return;
    }
    if (fds_adopt(fd, &reg.listen_fd) < 0) {
        ctl_sock_unlink();
        close(fd);
    }
}

/* Read the HELLO `sluice run` sent on the inherited socket (bounded wait). */
static int inherited_hello(unsigned i)
{
    struct sluice_ctl_msg m = {0};
    struct timeval tv = {SEND_SECONDS, 0};
    ssize_t n;

    setsockopt(reg.c[i].fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    n = recv(reg.c[i].fd, &m, sizeof(m), 0);
    tv.tv_sec = 0;
    setsockopt(reg.c[i].fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (n != (ssize_t)sizeof(m) || m.type != SLUICE_CTL_HELLO) {
        say("sluice-jitter: consumer sent no HELLO (%s)\n",
            n < 0 ? strerror(errno) : "short or wrong message");
        return -EPROTO;
    }
    if (m.version != SLUICE_CTL_VERSION) {
        char why[96];

        snprintf(why, sizeof(why), "control protocol %u, jitter speaks %u", m.version,
                 SLUICE_CTL_VERSION);
        refuse(reg.c[i].fd, why);
        say("sluice-jitter: consumer refused: %s\n", why);
        return -EPROTO;
    }
    attach(i, &m);
    return 0;
}

/* Say that @p bytes of address space for @p what could not be had (-errno @p err), naming
 * the address-space limit when one is set (ulimit -v: the usual cause). */
static void say_reserve_failed(const char *what, uint64_t bytes, int err)
{
    struct rlimit rl;

    if (err == -ENOMEM && getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        say("sluice-jitter: cannot reserve %s (%llu MiB of address space) within the "
            "address-space limit of %llu MiB with QEMU's own (ulimit -v): raise it\n",
            what, (unsigned long long)(bytes >> 20), (unsigned long long)(rl.rlim_cur >> 20));
    } else {
        say("sluice-jitter: cannot reserve %s: %s\n", what, strerror(-err));
    }
}

int ctl_init(const char *arch, const char *comm, int fd, int listen, unsigned wait_attach)
{
    int own, err;

    snprintf(reg.arch, sizeof(reg.arch), "%s", arch);
    snprintf(reg.comm, sizeof(reg.comm), "%s", comm);
    reg.waiting = wait_attach;
    err = tails_init();
    if (err < 0) {
        say_reserve_failed("the consumers' tail files", SLUICE_TAIL_BYTES * SLUICE_MAX_CONSUMERS,
                           err);
        return err;
    }
    if (fd >= 0) {
        if (fcntl(fd, F_GETFD) < 0) {
            say("sluice-jitter: consumer_fd=%d is not an open file descriptor\n", fd);
            return -EBADF;
        }
        /* Out of the guest's way (fds.c); the inherited number is closed. */
        own = fds_adopt(fd, &reg.c[0].fd);
        if (own < 0) {
            say("sluice-jitter: cannot keep the consumer socket: %s\n", strerror(-own));
            return own;
        }
        reg.c[0].state = PENDING;
        err = inherited_hello(0);
        if (err < 0) {
            release(0);
            return err;
        }
    }
    if (listen) {
        listen_here(1);
        keep_spare();
    }
    if (reg.listen_fd < 0 && reg.waiting > 0) {
        say("sluice-jitter: wait_attach=%u needs the socket, and there is none%s\n", reg.waiting,
            fds_spare() == -EMFILE ? " (no descriptor is left for it: raise ulimit -n)" : "");
        return -EINVAL;
    }
    err = start_control();
    if (err < 0) {
        say("sluice-jitter: cannot start the control thread: %s\n", strerror(-err));
    }
    return err;
}

void ctl_wait_attach(void)
{
    pthread_mutex_lock(&reg.lock);
    if (reg.waiting > 0) {
        say("sluice-jitter: pid %d waits for %u consumer%s to attach (sluice attach %d)\n",
            (int)ids_pid(NULL), reg.waiting, reg.waiting == 1 ? "" : "s", (int)ids_pid(NULL));
    }
    while (reg.waiting > 0) {
        pthread_cond_wait(&reg.attached, &reg.lock);
    }
    pthread_mutex_unlock(&reg.lock);
}

void ctl_fork_prepare(void)
{
    pthread_mutex_lock(&reg.lock);
}

void ctl_fork_parent(void)
{
    pthread_mutex_unlock(&reg.lock);
}

void ctl_fork_child(void)
{
    unsigned i;

    pthread_mutex_init(&reg.lock, NULL);
    pthread_cond_init(&reg.attached, NULL);
    /* A parent thread back from a failed execve may have held it at the fork. */
    pthread_mutex_init(&exec_lock, NULL);
    reg.exec_tid = 0;
    reg.waiting = 0;
    /* The parent's connections that had not attached are the parent's to answer. */
    for (i = SLUICE_MAX_CONSUMERS; i < ENTRIES; i++) {
        if (reg.c[i].state == PENDING) {
            release(i);
        }
    }
    /* Its listening socket too: the child listens on a socket of its own pid. */
    if (reg.listen_fd >= 0) {
        fds_drop(&reg.listen_fd);
        close(reg.listen_fd);
        reg.listen_fd = -1;
        listen_here(0);
    }
    if (start_control() < 0) {
        say("sluice-jitter: child %d has no control thread: its consumers' hang-ups "
            "go unnoticed\n",
            (int)ids_pid(NULL));
    }
}

void ctl_process_exit(void)
{
    ctl_sock_unlink();
}

void ctl_exec_start(void)
{
    pthread_mutex_lock(&exec_lock);
    if (reg.listen_fd >= 0) {
        ctl_sock_unlink();
        __atomic_store_n(&reg.exec_tid, (pid_t)gettid(), __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&exec_lock);
}

/* Listen on a new socket file, onto the listening descriptor's number (which fds.c protects
 * and the control thread polls); exec_lock and reg.lock held. 0, or -1 with @p why. */
static int listen_again(char *why, size_t n)
{
    int fd, err;

    /* The spare's number is for this too: a guest that holds every other descriptor kept
     * its socket before the failed execve, and keeps it after. */
    if (reg.spare_fd >= 0) {
        give_up_spare();
    }
    fd = ctl_sock_listen(why, n);
    if (fd < 0) {
        keep_spare();
        return -1;
    }
    fds_lock(); /* a guest's dup2 may move listen_fd */
    err = dup3(fd, reg.listen_fd, O_CLOEXEC) < 0 ? errno : 0;
    fds_unlock();
    close(fd);
    keep_spare();
    if (err) {
        ctl_sock_unlink();
        snprintf(why, n, "dup3: %s", strerror(err));
        return -1;
    }
    return 0;
}

void ctl_exec_failed(void)
{
    char why[256];
    pid_t t = __atomic_load_n(&reg.exec_tid, __ATOMIC_RELAXED);

    if (t == 0 || t != (pid_t)gettid()) {
        return; /* the common case (no gettid() then): no exec, or another thread's */
    }
    pthread_mutex_lock(&exec_lock);
    if (__atomic_load_n(&reg.exec_tid, __ATOMIC_RELAXED) == t) { /* not another's since */
        __atomic_store_n(&reg.exec_tid, 0, __ATOMIC_RELAXED);
        pthread_mutex_lock(&reg.lock);
        if (listen_again(why, sizeof(why)) < 0) {
            say("sluice-jitter: consumers cannot attach at run time any more: %s\n", why);
        }
        pthread_mutex_unlock(&reg.lock);
    }
    pthread_mutex_unlock(&exec_lock);
}
