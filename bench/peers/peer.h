/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * peer.h: what the QEMU-plugin peers of bench/ share. Each peer is one .c
 * file built alone into lib<name>.so, so everything here is static inline.
 *
 * Owns: the fold ("pcsum", below); the per-vCPU buffers of 64-bit words and
 * the per-vCPU sums they are folded into; the options out=FILE and
 * consumer=on|off; the out file; with consumer=on, the one consumer thread
 * and the bounded queue of full buffers that feeds it.
 *
 * The fold, over one vCPU's sequence of words v_0..v_{n-1}:
 *
 *   h = 0; for each v: h = h * PEER_K + v        (uint64_t, mod 2^64)
 *
 * reported with n. It composes, fold(A||B) = fold(A) * PEER_K^|B| + fold(B),
 * so a bench folding the same sequence in other pieces gets the same h.
 *
 * Hand-off (peer_submit, on the vCPU thread that filled the buffer):
 *   consumer=off: the vCPU folds its own buffer and reuses it: the trace
 *     never leaves QEMU's process, nor the vCPU thread.
 *   consumer=on: the buffer goes into a queue of PEER_QUEUE_LEN buffers
 *     (mutex + two condition variables) and the vCPU takes an empty one from
 *     the free list; when the queue is full the vCPU waits, so nothing is
 *     dropped. The consumer thread pops buffers in order and folds each into
 *     its vCPU's sum, then returns it to the free list. One consumer, a FIFO
 *     queue, and each vCPU submitting its own buffers in order: each vCPU's
 *     words are folded in the order it produced them.
 *
 * Threads: peer_parse and peer_start run in qemu_plugin_install (QEMU's
 * main thread, before any vCPU); peer_vcpu_init in QEMU's vCPU-init
 * callback; peer_submit on the vCPU thread owning the buffer; peer_finish on
 * the thread running the atexit callback, when QEMU has already removed
 * every other callback, so no vCPU touches a buffer again.
 *
 * Who writes a sum: with consumer=off the vCPU owning it (and, at exit, the
 * atexit thread); with consumer=on only the consumer thread. Sums are read
 * only after peer_finish (which joins the consumer).
 *
 * Never: drop or reorder a vCPU's words; block a vCPU for anything but a
 * full queue; let a signal be delivered on the consumer thread (it
 * blocks them all: QEMU's host signal handler expects a vCPU thread).
 *
 * Fork: with consumer=on the child restarts a consumer (pthread_atfork); the
 * child's counts continue from the parent's at the fork, queued buffers
 * included. Known gap: after a fork in a multi-threaded guest, the child
 * still reports the other threads' counts from before the fork.
 */
#ifndef SLUICE_BENCH_PEER_H
#define SLUICE_BENCH_PEER_H

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <qemu-plugin.h>

#define PEER_K 0x100000001b3ull
#define PEER_MAX_VCPUS 4096u        /* vCPU indices at once; above: an error */
#define PEER_BUF_WORDS (64u * 1024) /* 64-bit words per buffer (512 KiB) */
#define PEER_QUEUE_LEN 8u           /* full buffers waiting for the consumer */

/* A vCPU's buffer of words to fold. */
struct peer_buf {
    struct peer_buf *next; /* on the free list */
    unsigned int vcpu;
    size_t n; /* words used */
    uint64_t w[PEER_BUF_WORDS];
};

/* What one vCPU's words folded to so far. */
struct peer_sum {
    uint64_t n, h;
};

struct peer_state {
    const char *name;     /* the plugin's, for messages */
    const char *out_path; /* out=, or NULL: stderr */
    int out_fd;
    bool consumer;
    bool ran[PEER_MAX_VCPUS];              /* vCPU-init seen */
    struct peer_buf *bufs[PEER_MAX_VCPUS]; /* each vCPU's current buffer */
    struct peer_sum sums[PEER_MAX_VCPUS];  /* see "Who writes a sum" */

    /* consumer=on: the queue, the free list and stop, under lock */
    pthread_mutex_t lock;
    pthread_cond_t can_take; /* the queue is not empty, or stop */
    pthread_cond_t can_put;  /* the queue is not full */
    struct peer_buf *queue[PEER_QUEUE_LEN];
    unsigned int head, len;
    bool stop;
    struct peer_buf *free_bufs;
    pthread_t thread;
};

static struct peer_state peer_ctx = {
    .out_fd = 2,
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .can_take = PTHREAD_COND_INITIALIZER,
    .can_put = PTHREAD_COND_INITIALIZER,
};

/* Fatal: one line naming the plugin, then exit without QEMU's cleanup. */
static inline void peer_die(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "%s: ", peer_ctx.name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    _exit(EXIT_FAILURE);
}

/*
 * h folded over w[0..n). Four words per step: h*K^4 + w0*K^3 + w1*K^2 +
 * w2*K + w3 is the same sum, with one multiply on h's dependency chain.
 */
static inline uint64_t peer_fold(uint64_t h, const uint64_t *w, size_t n)
{
    const uint64_t k2 = PEER_K * PEER_K, k3 = k2 * PEER_K, k4 = k3 * PEER_K;
    size_t i = 0;

    for (; i + 4 <= n; i += 4) {
        h = h * k4 + w[i] * k3 + w[i + 1] * k2 + w[i + 2] * PEER_K + w[i + 3];
    }
    for (; i < n; i++) {
        h = h * PEER_K + w[i];
    }
    return h;
}

static inline void peer_sum_add(struct peer_sum *s, const struct peer_buf *b)
{
    s->h = peer_fold(s->h, b->w, b->n);
    s->n += b->n;
}

/*
 * Parses the plugin's arguments: out=FILE, and consumer=on|off when
 * @consumer_ok. Returns 0, or -1 after a one-line message naming the
 * argument.
 */
static inline int peer_parse(const char *name, bool consumer_ok, int argc, char **argv)
{
    const char *usage = consumer_ok ? "out=FILE, consumer=on|off" : "out=FILE";

    peer_ctx.name = name;
    for (int i = 0; i < argc; i++) {
        const char *eq = strchr(argv[i], '=');
        size_t klen = eq != NULL ? (size_t)(eq - argv[i]) : strlen(argv[i]);

        if (klen == 3 && strncmp(argv[i], "out", 3) == 0 && eq != NULL) {
            if (eq[1] == '\0') {
                fprintf(stderr, "%s: empty file name in '%s'\n", name, argv[i]);
                return -1;
            }
            peer_ctx.out_path = eq + 1; /* given twice: the last one */
            continue;
        }
        if (consumer_ok && klen == 8 && strncmp(argv[i], "consumer", 8) == 0 && eq != NULL) {
            if (!qemu_plugin_bool_parse("consumer", eq + 1, &peer_ctx.consumer)) {
                fprintf(stderr, "%s: bad value in '%s' (consumer=on|off)\n", name, argv[i]);
                return -1;
            }
            continue;
        }
        fprintf(stderr, "%s: unknown argument '%s' (%s)\n", name, argv[i], usage);
        return -1;
    }
    return 0;
}

/* consumer=on: pops full buffers in order and folds each into its vCPU's sum. */
static inline void *peer_consume(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&peer_ctx.lock);
    for (;;) {
        struct peer_buf *b;

        while (peer_ctx.len == 0 && !peer_ctx.stop) {
            pthread_cond_wait(&peer_ctx.can_take, &peer_ctx.lock);
        }
        if (peer_ctx.len == 0) {
            break; /* stop, and everything submitted is folded */
        }
        b = peer_ctx.queue[peer_ctx.head];
        peer_ctx.head = (peer_ctx.head + 1) % PEER_QUEUE_LEN;
        peer_ctx.len--;
        pthread_cond_signal(&peer_ctx.can_put);
        pthread_mutex_unlock(&peer_ctx.lock);

        peer_sum_add(&peer_ctx.sums[b->vcpu], b);

        pthread_mutex_lock(&peer_ctx.lock);
        b->next = peer_ctx.free_bufs;
        peer_ctx.free_bufs = b;
    }
    pthread_mutex_unlock(&peer_ctx.lock);
    return NULL;
}

/* Starts the consumer thread with every signal blocked. Returns 0 or an errno. */
static inline int peer_consumer_start(void)
{
    sigset_t all, old;
    int err;

    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    err = pthread_create(&peer_ctx.thread, NULL, peer_consume, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return err;
}

/* fork: keep the queue consistent across it; the child gets its own consumer. */
static inline void peer_fork_prepare(void)
{
    pthread_mutex_lock(&peer_ctx.lock);
}

static inline void peer_fork_parent(void)
{
    pthread_mutex_unlock(&peer_ctx.lock);
}

static inline void peer_fork_child(void)
{
    int err;

    /* the parent's consumer may have been waiting on can_take: not in this process */
    pthread_cond_init(&peer_ctx.can_take, NULL);
    pthread_cond_init(&peer_ctx.can_put, NULL);
    pthread_mutex_unlock(&peer_ctx.lock);
    err = peer_consumer_start();
    if (err != 0) {
        peer_die("consumer thread in the forked child: %s", strerror(err));
    }
}

/*
 * Opens out=FILE if given (truncated, then appended to, so a forked child's
 * lines follow the parent's), starts the consumer if consumer=on. Returns 0,
 * or -1 after a one-line message.
 */
static inline int peer_start(void)
{
    if (peer_ctx.out_path != NULL) {
        int fd = open(peer_ctx.out_path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);

        if (fd < 0) {
            fprintf(stderr, "%s: out=%s: %s\n", peer_ctx.name, peer_ctx.out_path, strerror(errno));
            return -1;
        }
        peer_ctx.out_fd = fd;
    }
    if (peer_ctx.consumer) {
        int err = peer_consumer_start();

        if (err != 0) {
            fprintf(stderr, "%s: consumer thread: %s\n", peer_ctx.name, strerror(err));
            return -1;
        }
        pthread_atfork(peer_fork_prepare, peer_fork_parent, peer_fork_child);
    }
    return 0;
}

static inline struct peer_buf *peer_buf_new(unsigned int vcpu)
{
    struct peer_buf *b = malloc(sizeof(*b));

    if (b == NULL) {
        peer_die("out of memory for a %zu-byte buffer", sizeof(*b));
    }
    b->next = NULL;
    b->vcpu = vcpu;
    b->n = 0;
    return b;
}

/*
 * vCPU-init callback's part: checks the index, marks the vCPU as run and,
 * with @with_buf, gives it a buffer. An index reused by a new guest thread
 * keeps its buffer and sum: that vCPU's sequence continues.
 */
static inline void peer_vcpu_init(unsigned int vcpu, bool with_buf)
{
    if (vcpu >= PEER_MAX_VCPUS) {
        peer_die("vCPU %u: more than %u vCPUs at once (PEER_MAX_VCPUS in peer.h)", vcpu,
                 PEER_MAX_VCPUS);
    }
    peer_ctx.ran[vcpu] = true;
    if (with_buf && peer_ctx.bufs[vcpu] == NULL) {
        peer_ctx.bufs[vcpu] = peer_buf_new(vcpu);
    }
}

/*
 * Hands a vCPU's buffer @b (full, or at exit partly full) off to be folded;
 * returns the empty buffer to go on with. consumer=off: folds here, returns
 * @b. consumer=on: queues @b, waiting while the queue is full.
 */
static inline struct peer_buf *peer_submit(struct peer_buf *b)
{
    struct peer_buf *fresh;

    if (!peer_ctx.consumer) {
        peer_sum_add(&peer_ctx.sums[b->vcpu], b);
        b->n = 0;
        return b;
    }
    pthread_mutex_lock(&peer_ctx.lock);
    while (peer_ctx.len == PEER_QUEUE_LEN) {
        pthread_cond_wait(&peer_ctx.can_put, &peer_ctx.lock);
    }
    peer_ctx.queue[(peer_ctx.head + peer_ctx.len) % PEER_QUEUE_LEN] = b;
    peer_ctx.len++;
    pthread_cond_signal(&peer_ctx.can_take);
    fresh = peer_ctx.free_bufs;
    if (fresh != NULL) {
        peer_ctx.free_bufs = fresh->next;
    }
    pthread_mutex_unlock(&peer_ctx.lock);
    if (fresh == NULL) {
        return peer_buf_new(b->vcpu);
    }
    fresh->vcpu = b->vcpu;
    fresh->n = 0;
    return fresh;
}

/*
 * At exit: submits every vCPU's pending words and, with consumer=on, stops
 * and joins the consumer. Afterwards the sums are final.
 */
static inline void peer_finish(void)
{
    for (unsigned int v = 0; v < PEER_MAX_VCPUS; v++) {
        if (peer_ctx.bufs[v] != NULL && peer_ctx.bufs[v]->n > 0) {
            peer_ctx.bufs[v] = peer_submit(peer_ctx.bufs[v]);
        }
    }
    if (peer_ctx.consumer) {
        pthread_mutex_lock(&peer_ctx.lock);
        peer_ctx.stop = true;
        pthread_cond_signal(&peer_ctx.can_take);
        pthread_mutex_unlock(&peer_ctx.lock);
        pthread_join(peer_ctx.thread, NULL);
    }
}

/* One result line to the out file (default stderr). */
static inline void peer_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void peer_printf(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vdprintf(peer_ctx.out_fd, fmt, ap);
    va_end(ap);
}

/* The pcsum lines of insn_cb and tb_exact, after peer_finish. */
static inline void peer_print_pcsums(void)
{
    for (unsigned int v = 0; v < PEER_MAX_VCPUS; v++) {
        if (peer_ctx.ran[v]) {
            peer_printf("pcsum vcpu=%u n=%" PRIu64 " h=0x%016" PRIx64 "\n", v, peer_ctx.sums[v].n,
                        peer_ctx.sums[v].h);
        }
    }
}

#endif /* SLUICE_BENCH_PEER_H */
