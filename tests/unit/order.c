/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * order.c — unit tests of the ordering stage (consumer/order.c): entries
 * pushed by several threads, out of order, come out in per-ring sequence
 * order, bracketed by start/end, from one thread at a time; a partial
 * entry (a chunk decoded in slices) is delivered in its turn, again and
 * again, without letting its successors pass; a global stage delivers by
 * gseq across rings.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>

#include "order.h"

#define RINGS 5
#define PER_RING 3000

struct log {
    struct order_ring rings[RINGS];
    struct order_entry *entries; /* RINGS * PER_RING */
    int started[RINGS], ended[RINGS];
    uint64_t delivered[RINGS]; /* next expected seq per ring */
    int in_callback;           /* non-zero while a callback runs */
    int errors;
};

static int ring_index(struct log *l, struct order_ring *r)
{
    return (int)(r - l->rings);
}

/* Checks run on the ordering thread; failures are counted, asserted after. */
static void enter(struct log *l)
{
    if (__atomic_fetch_add(&l->in_callback, 1, __ATOMIC_SEQ_CST) != 0) {
        l->errors++; /* two callbacks at once */
    }
}

static void leave(struct log *l)
{
    __atomic_fetch_sub(&l->in_callback, 1, __ATOMIC_SEQ_CST);
}

static void on_start(void *ctx, struct order_ring *r)
{
    struct log *l = ctx;
    int i = ring_index(l, r);

    enter(l);
    l->errors += l->started[i] || l->delivered[i] != 0;
    l->started[i]++;
    leave(l);
}

static void on_deliver(void *ctx, struct order_entry *e)
{
    struct log *l = ctx;
    int i = ring_index(l, e->ring);

    enter(l);
    l->errors += !l->started[i] || l->ended[i] || e->seq != l->delivered[i];
    l->delivered[i]++;
    leave(l);
}

static void on_end(void *ctx, struct order_ring *r)
{
    struct log *l = ctx;
    int i = ring_index(l, r);

    enter(l);
    l->errors += l->ended[i] || l->delivered[i] != PER_RING;
    l->ended[i]++;
    leave(l);
}

struct pusher {
    struct order *o;
    struct log *l;
    int id, n;
};

/* Push every n-th entry starting at id, in a locally shuffled order, so the
 * stage sees gaps and reordering both within and across threads. */
static void *push_thread(void *arg)
{
    struct pusher *p = arg;
    int total = RINGS * PER_RING, count = 0, i;
    struct order_entry **mine = malloc(sizeof(*mine) * (size_t)(total / p->n + 1));
    unsigned seed = 1234u + (unsigned)p->id;

    for (i = p->id; i < total; i += p->n) {
        mine[count++] = &p->l->entries[i];
    }
    for (i = count - 1; i > 0; i--) { /* Fisher-Yates within windows of 64 */
        int j = i - (int)(rand_r(&seed) % (unsigned)((i % 64) + 1));
        struct order_entry *t = mine[i];

        mine[i] = mine[j];
        mine[j] = t;
    }
    for (i = 0; i < count; i++) {
        order__push(p->o, mine[i]);
    }
    free(mine);
    return NULL;
}

static void run_with(int n_threads)
{
    static const struct order_ops ops = {on_start, on_deliver, on_end};
    struct log *l = calloc(1, sizeof(*l));
    struct pusher p[8];
    pthread_t th[8];
    struct order o;
    int i;

    l->entries = calloc(RINGS * PER_RING, sizeof(*l->entries));
    /* Interleave rings: entry k belongs to ring k % RINGS, seq k / RINGS. */
    for (i = 0; i < RINGS * PER_RING; i++) {
        l->entries[i].ring = &l->rings[i % RINGS];
        l->entries[i].seq = (uint64_t)(i / RINGS);
        l->entries[i].last = i / RINGS == PER_RING - 1;
    }
    cr_assert_eq(order__start(&o, &ops, l), 0);
    for (i = 0; i < n_threads; i++) {
        p[i] = (struct pusher){&o, l, i, n_threads};
        cr_assert_eq(pthread_create(&th[i], NULL, push_thread, &p[i]), 0);
    }
    for (i = 0; i < n_threads; i++) {
        pthread_join(th[i], NULL);
    }
    order__finish(&o);
    cr_assert_eq(l->errors, 0, "%d ordering errors with %d pushers", l->errors, n_threads);
    for (i = 0; i < RINGS; i++) {
        cr_assert_eq(l->delivered[i], PER_RING, "ring %d: %llu delivered", i,
                     (unsigned long long)l->delivered[i]);
        cr_assert_eq(l->started[i], 1);
        cr_assert_eq(l->ended[i], 1);
    }
    free(l->entries);
    free(l);
}

Test(order, in_order_with_1_pusher)
{
    run_with(1);
}

Test(order, in_order_with_2_pushers)
{
    run_with(2);
}

Test(order, in_order_with_4_pushers)
{
    run_with(4);
}

Test(order, in_order_with_8_pushers)
{
    run_with(8);
}

/* Records the event sequence of one ring as a string. */
struct trail {
    struct order_ring ring;
    char s[64];
    size_t n;
};

static void t_start(void *ctx, struct order_ring *r)
{
    struct trail *t = ctx;

    (void)r;
    t->s[t->n++] = 'S';
}

static void t_deliver(void *ctx, struct order_entry *e)
{
    struct trail *t = ctx;

    t->s[t->n++] = (char)('0' + e->seq);
}

static void t_end(void *ctx, struct order_ring *r)
{
    struct trail *t = ctx;

    (void)r;
    t->s[t->n++] = 'E';
}

Test(order, reversed_entries_are_held_until_the_gap_fills)
{
    static const struct order_ops ops = {t_start, t_deliver, t_end};
    struct trail t = {0};
    struct order_entry e[4];
    struct order o;
    int i;

    for (i = 0; i < 4; i++) {
        e[i] = (struct order_entry){NULL, &t.ring, (uint64_t)i, i == 3, 0, 0};
    }
    cr_assert_eq(order__start(&o, &ops, &t), 0);
    for (i = 3; i >= 0; i--) {
        order__push(&o, &e[i]);
    }
    order__finish(&o);
    cr_assert_str_eq(t.s, "S0123E");
}

/* Two rings' events in one string, so the order across rings shows: start A or B,
 * entries a, b, c... (ring 0) or p, q, r... (ring 1) by seq, end Y or Z. */
struct two {
    struct order_ring ring[2];
    char s[64];
    size_t n;
};

static void g_start(void *ctx, struct order_ring *r)
{
    struct two *t = ctx;

    t->s[t->n++] = r == &t->ring[0] ? 'A' : 'B';
}

static void g_deliver(void *ctx, struct order_entry *e)
{
    struct two *t = ctx;

    t->s[t->n++] = (char)((e->ring == &t->ring[0] ? 'a' : 'p') + e->seq);
}

static void g_end(void *ctx, struct order_ring *r)
{
    struct two *t = ctx;

    t->s[t->n++] = r == &t->ring[0] ? 'Y' : 'Z';
}

Test(order, global_stage_delivers_in_gseq_order_whatever_the_push_order)
{
    static const struct order_ops ops = {g_start, g_deliver, g_end};
    struct two t = {0};
    /* gseq: a0 b0 a1 b1 b2(last) a2(last) */
    struct order_entry e[6] = {
        {NULL, &t.ring[0], 0, 0, 0, 0}, {NULL, &t.ring[1], 0, 0, 0, 1},
        {NULL, &t.ring[0], 1, 0, 0, 2}, {NULL, &t.ring[1], 1, 0, 0, 3},
        {NULL, &t.ring[1], 2, 1, 0, 4}, {NULL, &t.ring[0], 2, 1, 0, 5},
    };
    struct order o = {0};

    cr_assert_eq(order__start_global(&o, &ops, &t), 0);
    for (int i = 5; i >= 0; i--) {
        order__push(&o, &e[i]); /* newest first: nothing may pass gseq 0 */
    }
    order__finish(&o);
    cr_assert_str_eq(t.s, "AaBpbqrZcY");
}

Test(order, empty_ring_gets_start_and_end)
{
    static const struct order_ops ops = {t_start, t_deliver, t_end};
    struct trail t = {0};
    struct order_entry e = {NULL, &t.ring, 0, 1, 0, 0};
    struct order o;

    cr_assert_eq(order__start(&o, &ops, &t), 0);
    order__push(&o, &e);
    order__finish(&o);
    cr_assert_str_eq(t.s, "S0E");
}

Test(order, missing_predecessor_blocks_delivery)
{
    static const struct order_ops ops = {t_start, t_deliver, t_end};
    struct trail t = {0};
    struct order_entry e = {NULL, &t.ring, 1, 1, 0, 0};
    struct order o;

    cr_assert_eq(order__start(&o, &ops, &t), 0);
    order__push(&o, &e);
    order__finish(&o);
    cr_assert_str_eq(t.s, "", "seq 1 must wait for seq 0");
}

/* A pusher that waits for each delivery of its partial entry, the way a
 * worker waits on a sliced chunk: it pushes the entry again, the last time
 * not partial. */
struct slicer {
    struct trail t;
    struct order *o;
    struct order_entry e[3];
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int delivered; /* deliveries of e[0] seen by the pusher */
    int slices;    /* partial deliveries e[0] makes before its last */
};

static void s_deliver(void *ctx, struct order_entry *e)
{
    struct slicer *sl = ctx;

    if (e->partial) {
        sl->t.s[sl->t.n++] = (char)('a' + e->seq);
        pthread_mutex_lock(&sl->lock);
        sl->delivered++;
        pthread_cond_signal(&sl->cond);
        pthread_mutex_unlock(&sl->lock);
        return;
    }
    t_deliver(&sl->t, e);
}

static void s_start(void *ctx, struct order_ring *r)
{
    t_start(&((struct slicer *)ctx)->t, r);
}

static void s_end(void *ctx, struct order_ring *r)
{
    t_end(&((struct slicer *)ctx)->t, r);
}

static void *slice_pusher(void *arg)
{
    struct slicer *sl = arg;

    for (int k = 0; k <= sl->slices; k++) {
        sl->e[0].partial = k < sl->slices;
        order__push(sl->o, &sl->e[0]);
        pthread_mutex_lock(&sl->lock);
        while (k < sl->slices && sl->delivered == k) {
            pthread_cond_wait(&sl->cond, &sl->lock);
        }
        pthread_mutex_unlock(&sl->lock);
    }
    return NULL;
}

Test(order, partial_entry_is_delivered_again_in_its_turn)
{
    static const struct order_ops ops = {s_start, s_deliver, s_end};
    struct slicer *sl = calloc(1, sizeof(*sl));
    struct order o;
    pthread_t th;

    pthread_mutex_init(&sl->lock, NULL);
    pthread_cond_init(&sl->cond, NULL);
    sl->o = &o;
    sl->slices = 3;
    for (int i = 0; i < 3; i++) {
        sl->e[i] = (struct order_entry){NULL, &sl->t.ring, (uint64_t)i, i == 2, 0, 0};
    }
    cr_assert_eq(order__start(&o, &ops, sl), 0);
    order__push(&o, &sl->e[2]); /* its successors first: they must wait for its last slice */
    order__push(&o, &sl->e[1]);
    cr_assert_eq(pthread_create(&th, NULL, slice_pusher, sl), 0);
    pthread_join(th, NULL);
    order__finish(&o);
    cr_assert_str_eq(sl->t.s, "Saaa012E");
    pthread_cond_destroy(&sl->cond);
    pthread_mutex_destroy(&sl->lock);
    free(sl);
}
