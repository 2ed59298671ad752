/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * session_items.c — a synthetic session without QEMU, for the consumer's
 * peak memory and throughput on block-encoded streams: R producer threads
 * (tests/unit/test_producer.c) write BLOCK records to their rings while a
 * session with W workers decodes them through user callbacks that make one
 * item per exec event, like `sluice run --tool pcsum` (8-byte items) or
 * `--tool dump` (128-byte items). Prints events, seconds, events per
 * second and the process's peak RSS (ru_maxrss).
 *
 * Usage: session_items STREAM TOOL [RINGS [WORKERS [MEVENTS]]]
 *   STREAM nop:   BLOCK records of 512 recorded instructions, back to back
 *                 (a nop loop: each 256 KiB chunk expands to 16M exec events)
 *          mixed: blocks of 8 instructions with one load record each
 *                 (about 2.7 events per word: a chunk stays under the cap)
 *   TOOL   exec8, exec128 (one item per exec event), batch (exec_batch, one
 *          8-byte item per run), count (no callbacks, like `sluice stats`)
 *
 * A benchmark, not a test: its threads are the bench's own; it must never
 * be used as an oracle (the unit tests check the events).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "sluice/consumer.h"
#include "sluice/ctl.h"
#include "test_producer.h"

#define MAX_RINGS 16

struct producer {
    struct test_ring ring;
    uint64_t id; /* the loop's descriptor */
    unsigned n;  /* its instructions */
    int mixed;
    uint64_t events; /* to write */
};

static void *produce(void *arg)
{
    struct producer *p = arg;
    uint64_t w[4], done = 0;
    unsigned k = 0;

    while (done < p->events) {
        unsigned nw = 0;

        w[nw++] = sluice_block_hdr(p->id, 0, p->n, 0);
        if (p->mixed) {
            w[nw++] = sluice_mem_hdr(0x400000 + 4 * 3, 3, 0);
            w[nw++] = 0x8000;
            w[nw++] = k;
        }
        test_ring__append(&p->ring, w, nw);
        done += p->n + (p->mixed ? 1 : 0);
        if (++k % 256 == 0) {
            test_ring__publish(&p->ring);
        }
    }
    test_ring__close(&p->ring);
    return NULL;
}

static void send_fd(int fd, const struct sluice_ctl_msg *m, int pass_fd)
{
    if (test_ctl__send(fd, m, pass_fd) < 0) {
        perror("sendmsg");
        exit(1);
    }
}

struct jitter {
    int fd;
    int n;
    struct producer p[MAX_RINGS];
};

static void *fake_jitter(void *arg)
{
    struct jitter *j = arg;
    struct sluice_ctl_msg m = {0};
    pthread_t th[MAX_RINGS];

    int tails_fd;

    if (!test_tails(&tails_fd)) {
        perror("tail file");
        exit(1);
    }
    m.type = SLUICE_CTL_WELCOME;
    m.version = SLUICE_CTL_VERSION;
    m.pid = 1000;
    m.tail_bytes = SLUICE_TAIL_BYTES;
    send_fd(j->fd, &m, tails_fd);
    for (int i = 0; i < j->n; i++) {
        memset(&m, 0, sizeof(m));
        m.type = SLUICE_CTL_RING;
        m.version = SLUICE_CTL_VERSION;
        m.pid = j->p[i].ring.hdr->pid;
        m.tid = j->p[i].ring.hdr->tid;
        m.ring_bytes = j->p[i].ring.size;
        m.line = j->p[i].ring.line;
        send_fd(j->fd, &m, j->p[i].ring.fd);
        pthread_create(&th[i], NULL, produce, &j->p[i]);
    }
    for (int i = 0; i < j->n; i++) {
        pthread_join(th[i], NULL);
    }
    close(j->fd);
    return NULL;
}

static int exec_item(void *user, const struct sluice_thread_info *t, uint64_t pc, void *item)
{
    (void)user;
    (void)t;
    *(uint64_t *)item = pc;
    return 1;
}

static int batch_item(void *user, const struct sluice_thread_info *t, const uint64_t *pcs, size_t n,
                      void *item)
{
    uint64_t h = 0;

    (void)user;
    (void)t;
    for (size_t k = 0; k < n; k++) {
        h = h * 0x100000001b3ull + pcs[k];
    }
    *(uint64_t *)item = h;
    return 1;
}

static int mem_item(void *user, const struct sluice_thread_info *t, const struct sluice_mem *m,
                    void *item)
{
    (void)user;
    (void)t;
    *(uint64_t *)item = m->addr;
    return 1;
}

static uint64_t folded;

static void trace(void *user, const struct sluice_thread_info *t, void *item)
{
    (void)user;
    (void)t;
    folded = folded * 0x100000001b3ull + *(const uint64_t *)item;
}

int main(int argc, char **argv)
{
    struct sluice_consumer_opts opts = {.sz = sizeof(opts)};
    struct sluice_callbacks cb = {.sz = sizeof(cb)};
    struct jitter *j = calloc(1, sizeof(*j));
    uint64_t pcs[SLUICE_BLOCK_MAX_INSNS], mev;
    uint8_t rec[SLUICE_BLOCK_MAX_INSNS];
    struct sluice_session *s;
    struct timespec t0, t1;
    struct rusage ru;
    pthread_t jt;
    int sv[2], rc, mixed;
    double sec;

    if (argc < 3) {
        fprintf(stderr,
                "usage: %s nop|mixed exec8|exec128|batch|count [rings [workers [Mevents]]]\n",
                argv[0]);
        return 2;
    }
    mixed = strcmp(argv[1], "mixed") == 0;
    j->n = argc > 3 ? atoi(argv[3]) : 2;
    opts.workers = argc > 4 ? (unsigned)atoi(argv[4]) : 2;
    mev = argc > 5 ? strtoull(argv[5], NULL, 0) : 200;
    if (j->n < 1 || j->n > MAX_RINGS) {
        fprintf(stderr, "rings: 1 to %d\n", MAX_RINGS);
        return 2;
    }
    if (strncmp(argv[2], "exec", 4) == 0) {
        cb.item_size = strcmp(argv[2], "exec128") == 0 ? 128 : 8;
        cb.exec = exec_item;
    } else if (strcmp(argv[2], "batch") == 0) {
        cb.item_size = 8;
        cb.exec_batch = batch_item;
    }
    if (cb.item_size) {
        cb.read = mem_item;
        cb.trace = trace;
    }
    for (unsigned i = 0; i < SLUICE_BLOCK_MAX_INSNS; i++) {
        pcs[i] = 0x400000 + 4 * i;
        rec[i] = 1;
    }
    for (int i = 0; i < j->n; i++) {
        struct producer *p = &j->p[i];

        if (test_ring__create(&p->ring, 1 << 20, 100 + (uint32_t)i, 0) < 0 ||
            test_ring__add_blocks(&p->ring, 64 * 1024) < 0) {
            perror("test ring");
            return 1;
        }
        p->mixed = mixed;
        p->n = mixed ? 8 : SLUICE_BLOCK_MAX_INSNS;
        p->id = test_ring__add_block(&p->ring, p->n, pcs, rec);
        p->events = mev * 1000000 / (uint64_t)j->n;
    }
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        perror("socketpair");
        return 1;
    }
    s = sluice_session__new(sv[0], &cb, &opts);
    if (!s) {
        perror("sluice_session__new");
        return 1;
    }
    {
        struct sluice_ctl_msg hello;

        if (recv(sv[1], &hello, sizeof(hello), 0) != (ssize_t)sizeof(hello)) {
            perror("recv HELLO");
            return 1;
        }
    }
    j->fd = sv[1];
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pthread_create(&jt, NULL, fake_jitter, j);
    rc = sluice_session__run(s);
    pthread_join(jt, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    getrusage(RUSAGE_SELF, &ru);
    sec = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("%s %s rings=%d workers=%u events=%llu seconds=%.3f Mev/s=%.1f maxrss_kib=%ld rc=%d\n",
           argv[1], argv[2], j->n, opts.workers, (unsigned long long)sluice_session__events(s), sec,
           (double)sluice_session__events(s) / sec / 1e6, ru.ru_maxrss, rc);
    if (rc) {
        fprintf(stderr, "%s\n", sluice_session__error(s));
    }
    sluice_session__free(s);
    for (int i = 0; i < j->n; i++) {
        test_ring__destroy(&j->p[i].ring);
    }
    free(j);
    return rc ? 1 : 0;
}
