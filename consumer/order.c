/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * order.c — the ordering stage (see order.h).
 *
 * Owns one thread. Pushers only prepend to `incoming` under a mutex (O(1));
 * the ordering thread takes the whole list at once, files each entry into
 * its ring's sorted pending list, then delivers every ring's run of
 * consecutive sequence numbers. User callbacks run without the lock, so a
 * slow `trace` never blocks the workers (backpressure comes from the chunk
 * pool, not from here).
 */
#include "order.h"

#include <stddef.h>

/* Insert @p e into its ring's pending list, kept sorted by seq. Chunks
 * arrive nearly in order, so the walk is short. */
static void file_entry(struct order_entry *e)
{
    struct order_entry **p = &e->ring->pending;

    while (*p && (*p)->seq < e->seq) {
        p = &(*p)->next;
    }
    e->next = *p;
    *p = e;
}

/* Deliver @p ring's pending entries while they are next in sequence. */
static void drain_ring(struct order *o, struct order_ring *ring)
{
    struct order_entry *e;

    while ((e = ring->pending) != NULL && e->seq == ring->next_seq) {
        int last = e->last, partial = e->partial;

        ring->pending = e->next;
        /* A partial entry comes again with this seq; its pusher waits for
         * this delivery, so there is never a second one pending, and the
         * next pending entry (a later seq) is not next: the loop ends. */
        if (!partial) {
            ring->next_seq++;
        }
        if (!ring->started) {
            ring->started = 1;
            if (o->ops.start) {
                o->ops.start(o->ctx, ring);
            }
        }
        o->ops.deliver(o->ctx, e); /* e may be freed from here on */
        if (last && o->ops.end) {
            o->ops.end(o->ctx, ring);
        }
    }
}

/* Insert @p e into the stage's pending list, kept sorted by gseq (a global stage). */
static void file_global(struct order *o, struct order_entry *e)
{
    struct order_entry **p = &o->pending;

    while (*p && (*p)->gseq < e->gseq) {
        p = &(*p)->next;
    }
    e->next = *p;
    *p = e;
}

/* Deliver a global stage's pending entries while they are next; each one is next in its
 * ring too (its ring's earlier entries had smaller numbers). */
static void drain_global(struct order *o)
{
    struct order_entry *e;

    while ((e = o->pending) != NULL && e->gseq == o->next_gseq) {
        struct order_ring *ring = e->ring;

        o->pending = e->next;
        if (!e->partial) {
            o->next_gseq++; /* (a partial entry comes again with this gseq) */
        }
        e->next = NULL;
        ring->pending = e;
        drain_ring(o, ring);
    }
}

/* File and deliver a batch taken from `incoming` (newest first). */
static void process(struct order *o, struct order_entry *batch)
{
    struct order_entry *e, *next, *rev = NULL;

    for (e = batch; e; e = next) { /* reverse: oldest first, cheaper filing */
        next = e->next;
        e->next = rev;
        rev = e;
    }
    for (e = rev; e; e = next) {
        struct order_ring *ring = e->ring;

        next = e->next;
        if (o->global) {
            file_global(o, e);
            drain_global(o);
        } else {
            file_entry(e);
            drain_ring(o, ring);
        }
    }
}

static void *order_thread(void *arg)
{
    struct order *o = arg;

    pthread_setname_np(pthread_self(), "sluice-order"); /* for top -H, perf, gdb */
    pthread_mutex_lock(&o->lock);
    for (;;) {
        struct order_entry *batch = o->incoming;

        if (batch) {
            o->incoming = NULL;
            pthread_mutex_unlock(&o->lock);
            process(o, batch);
            pthread_mutex_lock(&o->lock);
            continue;
        }
        if (o->closing) {
            break;
        }
        pthread_cond_wait(&o->cond, &o->lock);
    }
    pthread_mutex_unlock(&o->lock);
    return NULL;
}

static int start(struct order *o, const struct order_ops *ops, void *ctx, int global)
{
    int err;

    o->global = global;
    pthread_mutex_init(&o->lock, NULL);
    pthread_cond_init(&o->cond, NULL);
    o->incoming = NULL;
    o->closing = 0;
    o->ops = *ops;
    o->ctx = ctx;
    o->next_gseq = 0;
    o->pending = NULL;
    err = pthread_create(&o->thread, NULL, order_thread, o);
    o->running = err == 0;
    if (err) {
        pthread_cond_destroy(&o->cond);
        pthread_mutex_destroy(&o->lock);
    }
    return -err;
}

int order__start(struct order *o, const struct order_ops *ops, void *ctx)
{
    return start(o, ops, ctx, 0);
}

int order__start_global(struct order *o, const struct order_ops *ops, void *ctx)
{
    return start(o, ops, ctx, 1);
}

void order__push(struct order *o, struct order_entry *e)
{
    pthread_mutex_lock(&o->lock);
    e->next = o->incoming;
    o->incoming = e;
    pthread_cond_signal(&o->cond);
    pthread_mutex_unlock(&o->lock);
}

void order__finish(struct order *o)
{
    if (!o->running) {
        return;
    }
    pthread_mutex_lock(&o->lock);
    o->closing = 1;
    pthread_cond_signal(&o->cond);
    pthread_mutex_unlock(&o->lock);
    pthread_join(o->thread, NULL);
    o->running = 0;
    pthread_cond_destroy(&o->cond);
    pthread_mutex_destroy(&o->lock);
}
