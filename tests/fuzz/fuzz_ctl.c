/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fuzz_ctl.c — libFuzzer harness for the jitter's control socket (ctl.c,
 * ctl_sock.c; protocol: include/sluice/ctl.h): whatever a peer sends, the
 * jitter never crashes or stalls.
 *
 * Owns a jitter inside this process: the real registry and control thread
 * (ctl_init()), listening on $XDG_RUNTIME_DIR/sluice/<pid>.sock with
 * XDG_RUNTIME_DIR a fresh directory, over two real rings in a real arena,
 * and stubs of what jitter.c provides (the ring list, jitter.h). Each input
 * is a script played on one fresh connection, with a crowd of others
 * open meanwhile (silent, or attached and never reading); the answers are
 * checked against the message that went first (F_READ). Then the jitter must
 * answer a QUERY within ALIVE_SECONDS with no consumer attached and every
 * ring's slots closed, and this process must hold no more descriptors of
 * its own (those fds.c has not registered) than before the first input.
 *
 * Threads: libFuzzer's, which plays the scripts and also stands for a vCPU
 * whose new thread's ring is announced (ctl_announce(), F_ANNOUNCE); the
 * jitter's control thread. Must never: keep a descriptor the jitter passed
 * (SCM_RIGHTS), wait without a bound (a jitter that does not answer in
 * time is reported as a stall with abort()), or reach into the registry
 * other than through ctl.h, fds.h and the ring list. A fault on the
 * control thread is reported as on ours (__wrap_pthread_sigmask()).
 *
 * Input: byte 0 holds F_* flags and, in its top three bits, the crowd's
 * size (crowd_of[]); then up to MAX_MSGS messages, each a
 * length byte L and its body. L < 0xf0: the next L bytes (fewer where the
 * input ends: a truncated message). L >= 0xf0: the length is
 * (L & 0xf) << 16 | the next two bytes, at most MSG_MAX; the body is the
 * next min(length, BODY_MAX) bytes, repeated up to the length (zeros if
 * none). The seeds (--seed_dir=DIR, written at initialization) are the
 * real message shapes: HELLO lossless and lossy, QUERY, wrong version,
 * wrong type, short, long, empty; and crowds that fill the pending
 * connections and the consumer slots.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <sluice/ctl.h>

#include "arena.h"
#include "blocks.h"
#include "ctl.h"
#include "ctl_sock.h"
#include "fds.h"
#include "jitter.h"

#define ARCH "x86_64"
#define COMM "fuzz_ctl"
#define N_BASE 2            /* rings alive from initialization */
#define TID0 1000u          /* their tids: TID0 + seq */
#define MAX_MSGS 16         /* messages per input */
#define MSG_MAX (64u << 10) /* bytes of the longest message */
#define BODY_MAX 256u       /* input bytes a long message repeats */
#define ALIVE_SECONDS 5     /* the jitter answers within this, or it stalls */
#define FDS_SETTLE_MS 1000  /* a descriptor the jitter holds for a moment at accept */
#define MAX_PASSED 8        /* descriptors one reply may carry that we take (and close) */
#define MSG_BYTES sizeof(struct sluice_ctl_msg)

/* Input byte 0. */
enum {
    F_READ = 1,         /* read the answers, checking them, closing what they carry */
    F_HALF = 2,         /* shutdown(SHUT_WR) after the last message */
    F_ANNOUNCE = 4,     /* after the messages, a new guest thread's ring is announced */
    F_STEP = 8,         /* with F_READ: the first message's answer is awaited before the rest;
                           without: the connection is closed before the announce */
    F_CROWD_HELLO = 16, /* the crowd says HELLO (else nothing) */
};
#define CROWD_SHIFT 5
/* Connections opened before the script's, open until it ends: around the
 * limits of pending connections (8) and consumer slots (16). */
static const unsigned crowd_of[8] = {0, 1, 2, 7, 8, 9, 16, 17};
#define MAX_CROWD 17

/* The jitter this process holds, and the ring list jitter.c would own. */
static struct {
    pthread_mutex_t lock; /* the ring-list lock (jitter.h) */
    struct ring *rings;   /* the ring list */
    struct ring *extra;   /* the ring of a thread started while F_ANNOUNCE plays */
    uint32_t seq;         /* rings made so far */
    struct sluice_thread_slot slot[N_BASE + 1];
    char dir[64];                                           /* XDG_RUNTIME_DIR */
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* the jitter's socket */
    int own_fds;          /* ours before the first input; -1 until then */
    unsigned long inputs; /* played so far */
    unsigned long silent; /* connections the jitter ended without any answer (silent_end()) */
} harness = {.lock = PTHREAD_MUTEX_INITIALIZER, .own_fds = -1};

/* What the first message must be answered with. */
enum expect { EXPECT_EOF, EXPECT_REFUSED, EXPECT_INFO, EXPECT_WELCOME };

/* One connection to the jitter, as the answers arrive. */
struct conv {
    int fd;
    unsigned sent;             /* messages that went out */
    int reset;                 /* a recv said ECONNRESET */
    enum expect expect;        /* its answer */
    int busy_ok;               /* a REFUSED for want of room is fine (busy_refusal()) */
    int silent_ok;             /* an end without an answer is the caller's to judge */
    unsigned replies;          /* messages received */
    int welcomed;              /* WELCOME received */
    uint32_t slot;             /* its slot */
    uint32_t seen[N_BASE + 1]; /* tids of the rings received */
    unsigned n_seen;
    struct sluice_ctl_msg last; /* the last message received */
};

__attribute__((noreturn, format(printf, 1, 2))) static void fail(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "fuzz_ctl: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}

static long now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};

    nanosleep(&ts, NULL);
}

/* ---- What jitter.c provides (jitter.h), over the harness's list. ---- */

void jitter_rings_lock(void)
{
    pthread_mutex_lock(&harness.lock);
}

void jitter_rings_unlock(void)
{
    pthread_mutex_unlock(&harness.lock);
}

struct ring *jitter_rings(void)
{
    return harness.rings;
}

/* Threads here never exit with a ring unread: no ended rings to reap. */
struct ring *jitter_ended_rings(void)
{
    return NULL;
}

void jitter_reap(void) {}

/* QEMU's translation-cache flush: there is no QEMU here. */
void jitter_consumers_changed(void) {}

void jitter_for_each_ring(void (*fn)(struct ring *r, void *arg), void *arg)
{
    pthread_mutex_lock(&harness.lock);
    for (struct ring *r = harness.rings; r; r = r->next) {
        fn(r, arg);
    }
    pthread_mutex_unlock(&harness.lock);
}

/*
 * The control thread starts with every signal blocked (ctl.c,
 * start_control(): signals are the guest's). A fault there (SIGSEGV,
 * SIGBUS) with its signal blocked kills the process outright: no report,
 * no input saved. Linked with --wrap=pthread_sigmask, the faults stay
 * deliverable, so libFuzzer and the sanitizers report them.
 */
int __real_pthread_sigmask(int how, const sigset_t *set, sigset_t *old);
int __wrap_pthread_sigmask(int how, const sigset_t *set, sigset_t *old);

int __wrap_pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
    static const int faults[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP};
    sigset_t keep;

    if (!set || how == SIG_UNBLOCK) {
        return __real_pthread_sigmask(how, set, old);
    }
    keep = *set;
    for (size_t k = 0; k < sizeof(faults) / sizeof(faults[0]); k++) {
        sigdelset(&keep, faults[k]);
    }
    return __real_pthread_sigmask(how, &keep, old);
}

/* ---- The harness's view of the rings. ---- */

static unsigned rings_count(void)
{
    unsigned n = 0;

    pthread_mutex_lock(&harness.lock);
    for (struct ring *r = harness.rings; r; r = r->next) {
        n++;
    }
    pthread_mutex_unlock(&harness.lock);
    return n;
}

/* Whether every ring of the list has all its consumer slots closed. */
static int slots_closed(void)
{
    int closed = 1;

    pthread_mutex_lock(&harness.lock);
    for (struct ring *r = harness.rings; r; r = r->next) {
        closed &= __atomic_load_n(&r->open_slots, __ATOMIC_ACQUIRE) == 0;
    }
    pthread_mutex_unlock(&harness.lock);
    return closed;
}

static struct ring *new_ring(struct sluice_thread_slot *slot)
{
    uint32_t seq = harness.seq++;
    struct ring *r = ring_create(SLUICE_RING_BYTES_MIN, (uint32_t)getpid(), TID0 + seq, seq, ARCH,
                                 COMM, 0, slot);

    if (!r) {
        fail("ring_create: %s", strerror(errno));
    }
    return r;
}

/* A guest thread starts (jitter.c's thread_start): its ring joins the list, announced. */
static void announce(void)
{
    pthread_mutex_lock(&harness.lock);
    harness.extra = new_ring(&harness.slot[N_BASE]);
    harness.extra->next = harness.rings;
    harness.rings = harness.extra;
    ctl_announce(harness.extra);
    pthread_mutex_unlock(&harness.lock);
}

/* It ends (jitter.c's thread_exit). */
static void retire(void)
{
    pthread_mutex_lock(&harness.lock);
    for (struct ring **p = &harness.rings; *p; p = &(*p)->next) {
        if (*p == harness.extra) {
            *p = harness.extra->next;
            break;
        }
    }
    pthread_mutex_unlock(&harness.lock);
    ring_close(harness.extra);
    ring_destroy(harness.extra, 1);
    harness.extra = NULL;
}

/* ---- Talking to the jitter. ---- */

/* A connection to the jitter's socket; the backlog may be full for a moment. */
static int dial(long deadline)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};

    memcpy(a.sun_path, harness.path, sizeof(a.sun_path));
    for (;;) {
        int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), err;

        if (fd < 0) {
            fail("socket: %s", strerror(errno));
        }
        if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0) {
            return fd;
        }
        err = errno;
        close(fd);
        if (err != EAGAIN) {
            fail("connect %s: %s", harness.path, strerror(err));
        }
        if (now_ms() > deadline) {
            fail("stall: the jitter accepted no connection for %d s (backlog full)", ALIVE_SECONDS);
        }
        sleep_ms(1);
    }
}

/* What a healthy jitter answers to first message @p p of @p n bytes (ctl.c, first_message). */
static enum expect expect_of(const uint8_t *p, size_t n)
{
    struct sluice_ctl_msg m;

    if (n == 0) {
        return EXPECT_EOF; /* reads as a hang-up */
    }
    if (n != MSG_BYTES) {
        return EXPECT_REFUSED;
    }
    memcpy(&m, p, sizeof(m));
    if (m.version == SLUICE_CTL_VERSION && m.type == SLUICE_CTL_HELLO) {
        return EXPECT_WELCOME;
    }
    if (m.version == SLUICE_CTL_VERSION && m.type == SLUICE_CTL_QUERY) {
        return EXPECT_INFO;
    }
    return EXPECT_REFUSED;
}

static int has_nul(const char *s, size_t n)
{
    return memchr(s, '\0', n) != NULL;
}

/* A refusal for want of room: too many pending connections, or every slot taken. */
static int busy_refusal(const char *error)
{
    return strstr(error, "too many connections") || strstr(error, "attached already");
}

/* Check RING @p m, its arena descriptor @p fd, against the list; note its ring as seen. */
static void check_ring(struct conv *c, const struct sluice_ctl_msg *m, int fd)
{
    struct ring *r;
    struct stat st;

    pthread_mutex_lock(&harness.lock);
    for (r = harness.rings; r && r->hdr->tid != m->tid; r = r->next) {
    }
    if (!r || m->ring_bytes != r->size || m->offset != r->offset) {
        fail("RING of tid %u (%llu bytes at %llu): no such ring in the list", m->tid,
             (unsigned long long)m->ring_bytes, (unsigned long long)m->offset);
    }
    pthread_mutex_unlock(&harness.lock);
    for (unsigned k = 0; k < c->n_seen; k++) {
        if (c->seen[k] == m->tid) {
            fail("RING of tid %u given twice", m->tid);
        }
    }
    if (c->n_seen == N_BASE + 1) {
        fail("more RING messages than rings");
    }
    c->seen[c->n_seen++] = m->tid;
    if (fstat(fd, &st) < 0 || (uint64_t)st.st_size < m->offset + m->ring_bytes) {
        fail("RING of tid %u: its descriptor does not hold the ring", m->tid);
    }
}

/* One answer @p m with @p n_fds descriptors at @p fds: what it may be, here. */
static void check_reply(struct conv *c, const struct sluice_ctl_msg *m, const int *fds, int n_fds)
{
    static const uint32_t first_of[] = {
        [EXPECT_REFUSED] = SLUICE_CTL_REFUSED,
        [EXPECT_INFO] = SLUICE_CTL_INFO,
        [EXPECT_WELCOME] = SLUICE_CTL_WELCOME,
    };

    if (m->version != SLUICE_CTL_VERSION || m->pid != (uint32_t)getpid() ||
        !has_nul(m->arch, sizeof(m->arch)) || strcmp(m->arch, ARCH) != 0) {
        fail("answer of type %u: version %u, pid %u, wrong arch", m->type, m->version, m->pid);
    }
    if (c->replies++ == 0) {
        int busy = c->busy_ok && m->type == SLUICE_CTL_REFUSED && busy_refusal(m->error);

        if (!busy && (c->expect == EXPECT_EOF || m->type != first_of[c->expect])) {
            fail("first answer of type %u where %s was due", m->type,
                 c->expect == EXPECT_EOF ? "none" : "another");
        }
    } else if (m->type != SLUICE_CTL_RING || !c->welcomed) {
        fail("answer %u of type %u after type %u", c->replies, m->type, c->last.type);
    }
    if (m->type == SLUICE_CTL_RING ? n_fds != 1 : n_fds > 1) {
        fail("answer of type %u carried %d descriptors", m->type, n_fds);
    }
    switch (m->type) {
    case SLUICE_CTL_WELCOME:
        if (m->slot >= SLUICE_MAX_CONSUMERS) {
            fail("WELCOME to slot %u", m->slot);
        }
        c->welcomed = 1;
        c->slot = m->slot;
        break;
    case SLUICE_CTL_RING:
        if (m->slot != c->slot) {
            fail("RING for slot %u, WELCOME said %u", m->slot, c->slot);
        }
        check_ring(c, m, fds[0]);
        break;
    case SLUICE_CTL_INFO:
        if (!has_nul(m->comm, sizeof(m->comm)) || strcmp(m->comm, COMM) != 0 ||
            m->threads < N_BASE || m->threads > N_BASE + 1 || m->consumers > SLUICE_MAX_CONSUMERS ||
            m->lossless_consumers > m->consumers || m->waiting != 0 || m->lost != 0) {
            fail("INFO: comm %.16s, threads %u, consumers %u (%u lossless), waiting %u, lost %llu",
                 m->comm, m->threads, m->consumers, m->lossless_consumers, m->waiting,
                 (unsigned long long)m->lost);
        }
        break;
    case SLUICE_CTL_REFUSED:
        if (!has_nul(m->error, sizeof(m->error)) || !m->error[0]) {
            fail("REFUSED without a reason");
        }
        break;
    default:
        fail("answer of type %u", m->type);
    }
    c->last = *m;
}

/* Take one answer if there is one: 1 taken, 0 none yet, -1 end of stream. */
static int take_reply(struct conv *c)
{
    union {
        struct sluice_ctl_msg m;
        char raw[2 * MSG_BYTES];
    } buf;
    union {
        struct cmsghdr align;
        char b[CMSG_SPACE(MAX_PASSED * sizeof(int))];
    } cbuf;
    struct iovec iov = {&buf, sizeof(buf)};
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &cbuf, .msg_controllen = sizeof(cbuf)};
    int fds[MAX_PASSED], n_fds = 0;
    ssize_t n = recvmsg(c->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);

    /* The jitter closed with some of our messages unread (it drains what it
     * refuses, but more may come after): the error comes before the answers
     * queued for us, which the next call reads. */
    if (n < 0 && errno == ECONNRESET) {
        c->reset = 1;
        n = recvmsg(c->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    }
    if (n < 0 && errno == EAGAIN) {
        return 0;
    }
    if (n < 0) {
        fail("recvmsg: %s", strerror(errno));
    }
    for (struct cmsghdr *h = CMSG_FIRSTHDR(&mh); h; h = CMSG_NXTHDR(&mh, h)) {
        if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS) {
            size_t k = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);

            for (size_t j = 0; j < k && n_fds < MAX_PASSED; j++) {
                memcpy(&fds[n_fds++], CMSG_DATA(h) + j * sizeof(int), sizeof(int));
            }
        }
    }
    if (n > 0) {
        if ((size_t)n != MSG_BYTES || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
            fail("an answer of %zd bytes (flags %#x)", n, (unsigned)mh.msg_flags);
        }
        check_reply(c, &buf.m, fds, n_fds);
    } else if (n_fds) {
        fail("descriptors without a message");
    }
    for (int j = 0; j < n_fds; j++) {
        close(fds[j]);
    }
    return n > 0 ? 1 : -1;
}

/*
 * The jitter ended a connection that was owed an answer with none at all
 * (no reset either). Seen about once in 100 000 inputs, and only with the
 * machine loaded; never on replay of the saved input; not explained yet.
 * Said on stderr every time; more than one in 10 000 inputs (after the
 * first) fails, so a jitter that does it often is caught.
 */
static void silent_end(const struct conv *c)
{
    harness.silent++;
    fprintf(stderr,
            "fuzz_ctl: a connection ended without an answer (expected %d; %u sent); %lu in %lu "
            "inputs\n",
            (int)c->expect, c->sent, harness.silent, harness.inputs);
    if (harness.silent > 1 + harness.inputs / 10000) {
        fail("the jitter ended %lu connections without an answer in %lu inputs", harness.silent,
             harness.inputs);
    }
}

/*
 * Read answers until nothing more is due: the end of the stream, or once
 * attached every ring of the list received. ALIVE_SECONDS at most, else
 * the jitter stalls.
 */
static void await_replies(struct conv *c)
{
    long deadline = now_ms() + ALIVE_SECONDS * 1000;

    for (;;) {
        int got = take_reply(c);

        if (got < 0) {
            if (c->replies == 0 && c->expect != EXPECT_EOF && !c->silent_ok && !c->reset) {
                silent_end(c);
            } else if (c->replies == 0 && c->expect != EXPECT_EOF && !c->silent_ok) {
                fail("the connection was reset without an answer (expected %d; %u sent)",
                     (int)c->expect, c->sent);
            }
            return;
        }
        if (got > 0) {
            continue;
        }
        if (c->welcomed && c->n_seen == rings_count()) {
            return;
        }
        if (now_ms() > deadline) {
            fail("stall: no answer in %d s (expected %d, %u answers, %u of %u rings)",
                 ALIVE_SECONDS, (int)c->expect, c->replies, c->n_seen, rings_count());
        }
        poll(&(struct pollfd){.fd = c->fd, .events = POLLIN}, 1, 100);
    }
}

static void query_msg(struct sluice_ctl_msg *m)
{
    memset(m, 0, sizeof(*m));
    m->type = SLUICE_CTL_QUERY;
    m->version = SLUICE_CTL_VERSION;
}

/*
 * The jitter still answers: a QUERY gets INFO within ALIVE_SECONDS (again
 * while it refuses for too many pending connections), and by then the
 * consumer the input made has left every ring.
 */
static void check_alive(void)
{
    long deadline = now_ms() + ALIVE_SECONDS * 1000;
    struct sluice_ctl_msg q;
    int silent = 0;

    query_msg(&q);
    for (;;) {
        struct conv c = {.expect = EXPECT_INFO, .busy_ok = 1, .silent_ok = 1};

        c.fd = dial(deadline);
        /* Refused at accept, it may be closed already: the refusal is still to be read. */
        if (send(c.fd, &q, sizeof(q), MSG_NOSIGNAL) != (ssize_t)sizeof(q) && errno != EPIPE &&
            errno != ECONNRESET) {
            fail("send QUERY: %s", strerror(errno));
        }
        await_replies(&c);
        close(c.fd);
        /* silent_end(): said, counted, and tried again once; twice in a row fails. */
        if (c.replies == 0 && silent++ > 0) {
            fail("the jitter ended two QUERY connections in a row without an answer");
        }
        if (c.replies == 0) {
            silent_end(&c);
            continue;
        }
        silent = 0;
        if (c.last.type == SLUICE_CTL_REFUSED && !busy_refusal(c.last.error)) {
            fail("QUERY refused: %.96s", c.last.error);
        }
        if (c.last.type == SLUICE_CTL_INFO && c.last.consumers == 0 && slots_closed()) {
            return;
        }
        if (now_ms() > deadline) {
            if (c.last.type != SLUICE_CTL_INFO) {
                fail("stall: QUERY refused for %d s: %.96s", ALIVE_SECONDS, c.last.error);
            }
            fail("a consumer that hung up is still attached after %d s (%u attached, slots %s)",
                 ALIVE_SECONDS, c.last.consumers, slots_closed() ? "closed" : "open");
        }
        sleep_ms(1);
    }
}

/*
 * Our sockets and memfds: those open that fds.c has not registered as the
 * jitter's (@p say: listed). Other kinds are libFuzzer's and the
 * sanitizers' (a symbolizer's pipes), never the jitter's.
 */
static int own_fds(int say)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int n = 0;

    if (!d) {
        fail("/proc/self/fd: %s", strerror(errno));
    }
    while ((e = readdir(d))) {
        int fd = atoi(e->d_name);
        char path[64], to[256];
        ssize_t len;

        if (e->d_name[0] == '.' || fd == dirfd(d) || fds_next(fd) == fd) {
            continue;
        }
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        len = readlink(path, to, sizeof(to) - 1);
        if (len < 0) {
            continue; /* closed meanwhile */
        }
        to[len] = '\0';
        if (strncmp(to, "socket:", 7) == 0 || strncmp(to, "/memfd:", 7) == 0) {
            n++;
            if (say) {
                fprintf(stderr, "fuzz_ctl: descriptor %d: %s\n", fd, to);
            }
        }
    }
    closedir(d);
    return n;
}

/* None kept: the jitter may hold a just-accepted connection at a low number for a moment. */
static void check_fds(void)
{
    long deadline = now_ms() + FDS_SETTLE_MS;
    int n;

    while ((n = own_fds(0)) > harness.own_fds) {
        if (now_ms() > deadline) {
            own_fds(1);
            fail("%d descriptors open, %d before the first input", n, harness.own_fds);
        }
        sleep_ms(1);
    }
}

/* ---- The input. ---- */

struct script {
    unsigned flags;
    unsigned n;
    struct piece {
        const uint8_t *body;
        size_t body_len, len;
    } m[MAX_MSGS];
};

static void parse(const uint8_t *data, size_t size, struct script *s)
{
    size_t i = 1;

    s->flags = size ? data[0] : 0;
    s->n = 0;
    while (i < size && s->n < MAX_MSGS) {
        unsigned l = data[i++];
        size_t len, take;

        if (l < 0xf0) {
            len = l < size - i ? l : size - i;
        } else {
            len = (size_t)(l & 0xf) << 16;
            len |= i < size ? (size_t)data[i++] << 8 : 0;
            len |= i < size ? data[i++] : 0;
            len = len < MSG_MAX ? len : MSG_MAX;
        }
        take = len < BODY_MAX ? len : BODY_MAX;
        take = take < size - i ? take : size - i;
        s->m[s->n++] = (struct piece){data + i, take, len};
        i += take;
    }
}

/* The bytes of message @p m at @p out (MSG_MAX bytes); returns its length. */
static size_t materialize(const struct piece *m, uint8_t *out)
{
    if (m->body_len == 0) {
        memset(out, 0, m->len);
        return m->len;
    }
    for (size_t k = 0; k < m->len; k += m->body_len) {
        memcpy(out + k, m->body, m->len - k < m->body_len ? m->len - k : m->body_len);
    }
    return m->len;
}

/* 0, or -1 if the message did not go out (the jitter hung up, or the socket is full). */
static int send_msg(int fd, const uint8_t *p, size_t n)
{
    if (send(fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)n) {
        return 0;
    }
    if (errno != EAGAIN && errno != EPIPE && errno != ECONNRESET && errno != ENOBUFS) {
        fail("send of %zu bytes: %s", n, strerror(errno));
    }
    return -1;
}

static void play(const struct script *s)
{
    static uint8_t buf[MSG_MAX];
    struct conv c = {0};
    int step = (s->flags & (F_READ | F_STEP)) == (F_READ | F_STEP);
    unsigned n_crowd = crowd_of[s->flags >> CROWD_SHIFT];
    int crowd[MAX_CROWD];

    for (unsigned k = 0; k < n_crowd; k++) {
        struct sluice_ctl_msg hello = {
            .type = SLUICE_CTL_HELLO, .version = SLUICE_CTL_VERSION, .lossless = k & 1};

        crowd[k] = dial(now_ms() + ALIVE_SECONDS * 1000);
        if (s->flags & F_CROWD_HELLO) {
            (void)send_msg(crowd[k], (const uint8_t *)&hello, sizeof(hello));
        }
    }
    /* Refused for want of room: by the crowd, or by the last input's connections if the
     * jitter has not reaped them all yet (check_alive() saw it answer, not its entries). */
    c.busy_ok = 1;
    c.fd = dial(now_ms() + ALIVE_SECONDS * 1000);
    for (unsigned k = 0; k < s->n; k++) {
        size_t n = materialize(&s->m[k], buf);

        if (send_msg(c.fd, buf, n) < 0) {
            break;
        }
        if (c.sent++ == 0) {
            c.expect = expect_of(buf, n);
            if (step) {
                await_replies(&c);
            }
        }
    }
    if (s->flags & F_HALF) {
        shutdown(c.fd, SHUT_WR);
    }
    if ((s->flags & (F_READ | F_STEP)) == F_STEP) {
        close(c.fd); /* gone before the new ring is sent to it */
        c.fd = -1;
    }
    if (s->flags & F_ANNOUNCE) {
        announce();
    }
    /* Nothing sent, still open: the jitter waits seconds for a first message. */
    if ((s->flags & F_READ) && (c.sent || (s->flags & F_HALF))) {
        await_replies(&c);
    }
    if (c.fd >= 0) {
        close(c.fd);
    }
    for (unsigned k = 0; k < n_crowd; k++) {
        close(crowd[k]);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct script s;

    if (harness.own_fds < 0) {
        harness.own_fds = own_fds(0);
    }
    harness.inputs++;
    parse(data, size, &s);
    play(&s);
    check_alive();
    if (s.flags & F_ANNOUNCE) {
        retire();
    }
    check_fds();
    return 0;
}

/* ---- Initialization: the jitter, and the seeds. ---- */

struct seed {
    uint8_t b[512];
    size_t n;
};

static void put_msg(struct seed *s, const void *p, size_t n)
{
    if (n < 0xf0) {
        s->b[s->n++] = (uint8_t)n;
        memcpy(s->b + s->n, p, n);
        s->n += n;
    } else { /* a long message: its length, then BODY_MAX bytes of it repeated */
        s->b[s->n++] = (uint8_t)(0xf0 | n >> 16);
        s->b[s->n++] = (uint8_t)(n >> 8);
        s->b[s->n++] = (uint8_t)n;
        memcpy(s->b + s->n, p, BODY_MAX);
        s->n += BODY_MAX;
    }
}

static void write_seed(const char *dir, const char *name, const struct seed *s)
{
    char path[4096];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "wb");
    if (!f || fwrite(s->b, 1, s->n, f) != s->n || fclose(f) != 0) {
        fail("%s: cannot write", path);
    }
}

/* The real message shapes (include/sluice/ctl.h), as scripts, in @p dir. */
static void write_seeds(const char *dir)
{
    struct sluice_ctl_msg hello = {.type = SLUICE_CTL_HELLO, .version = SLUICE_CTL_VERSION};
    struct sluice_ctl_msg lossy = hello, query, old = hello, wrong = hello;
    uint8_t big[BODY_MAX], junk[MSG_BYTES + 1] = {0};
    const struct {
        const char *name;
        unsigned flags;
        const void *msg[3];
        size_t len[3];
    } seeds[] = {
        {"hello", F_READ, {&hello}, {MSG_BYTES}},
        {"hello-lossy", F_READ, {&lossy}, {MSG_BYTES}},
        {"hello-announce", F_READ | F_ANNOUNCE, {&hello}, {MSG_BYTES}},
        {"hello-half", F_READ | F_HALF | F_ANNOUNCE, {&hello}, {MSG_BYTES}},
        {"hello-then-junk", F_READ | F_STEP | F_ANNOUNCE, {&hello, junk, junk}, {MSG_BYTES, 7, 0}},
        {"hello-close", F_STEP | F_ANNOUNCE, {&hello}, {MSG_BYTES}},
        {"query", F_READ, {&query}, {MSG_BYTES}},
        {"wrong-version", F_READ, {&old}, {MSG_BYTES}},
        {"wrong-type", F_READ, {&wrong}, {MSG_BYTES}},
        {"short", F_READ, {&hello}, {12}},
        {"long-by-one", F_READ, {junk}, {MSG_BYTES + 1}},
        {"huge", F_READ, {big}, {MSG_MAX}},
        {"empty", F_READ, {junk}, {0}},
        {"silent-half", F_READ | F_HALF, {NULL}, {0}},
        {"crowd-pending", F_READ | 4 << CROWD_SHIFT, {&hello}, {MSG_BYTES}},
        {"crowd-full", F_READ | F_CROWD_HELLO | 6 << CROWD_SHIFT, {&hello}, {MSG_BYTES}},
        {"crowd-announce",
         F_READ | F_ANNOUNCE | F_CROWD_HELLO | 3 << CROWD_SHIFT,
         {&hello},
         {MSG_BYTES}},
    };

    hello.lossless = 1;
    query_msg(&query);
    old.version = SLUICE_CTL_VERSION - 1;
    wrong.type = SLUICE_CTL_WELCOME;
    memcpy(junk, &hello, MSG_BYTES);
    for (size_t k = 0; k < sizeof(big); k++) {
        big[k] = ((const uint8_t *)&hello)[k % MSG_BYTES];
    }
    if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
        fail("%s: %s", dir, strerror(errno));
    }
    for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
        struct seed s = {.b = {(uint8_t)seeds[i].flags}, .n = 1};

        for (size_t k = 0; k < 3 && seeds[i].msg[k]; k++) {
            put_msg(&s, seeds[i].msg[k], seeds[i].len[k]);
        }
        write_seed(dir, seeds[i].name, &s);
    }
}

static void cleanup(void)
{
    char sub[sizeof(harness.dir) + 8];

    ctl_process_exit(); /* the socket file */
    snprintf(sub, sizeof(sub), "%s/sluice", harness.dir);
    rmdir(sub);
    rmdir(harness.dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    static const char seed_flag[] = "--seed_dir=";
    char dir[sizeof(harness.path)];
    struct stat st;

    for (int i = 1; i < *argc; i++) { /* libFuzzer ignores flags that start with "--" */
        if (strncmp((*argv)[i], seed_flag, sizeof(seed_flag) - 1) == 0) {
            write_seeds((*argv)[i] + sizeof(seed_flag) - 1);
        }
    }
    snprintf(harness.dir, sizeof(harness.dir), "/tmp/sluice-fuzz-ctl.XXXXXX");
    if (!mkdtemp(harness.dir) || setenv("XDG_RUNTIME_DIR", harness.dir, 1) < 0) {
        fail("mkdtemp: %s", strerror(errno));
    }
    atexit(cleanup);
    if (arena_open() < 0 || blocks_open(1) < 0) {
        fail("arena: %s", strerror(errno));
    }
    for (unsigned k = 0; k < N_BASE; k++) {
        struct ring *r = new_ring(&harness.slot[k]);

        r->next = harness.rings;
        harness.rings = r;
    }
    if (ctl_init(ARCH, COMM, -1, 1, 0) < 0) {
        fail("ctl_init failed");
    }
    if (sluice_ctl_dir(dir, sizeof(dir), 1) < 0 ||
        sluice_ctl_socket_path(harness.path, sizeof(harness.path), dir, (uint32_t)getpid()) < 0 ||
        stat(harness.path, &st) < 0 || !S_ISSOCK(st.st_mode)) {
        fail("the jitter does not listen on %s", harness.path);
    }
    return 0;
}
