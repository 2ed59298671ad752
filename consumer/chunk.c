/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * chunk.c — the bounded chunk pool (see chunk.h).
 *
 * Any thread may get or put. Chunks are recycled, never freed before
 * chunk_pool__destroy(), so steady state does no allocation. A chunk holds
 * no copy of its records (they are decoded in place in the ring); its item
 * area starts sized for the worst case of plain records (one item per
 * 8-byte record) but malloc'd large buffers are untouched until used, so
 * unused room costs address space only. Block records expand to one event
 * per instruction, so a worker may grow a chunk's item area
 * (chunk__reserve()), up to its items_max; it keeps that room from then on.
 * Past items_max the decoder slices the chunk; the hand-off of a slice
 * between worker and ordering thread (chunk__slice_wait/_done) is the only
 * place here that may block besides chunk_pool__get().
 */
#include "chunk.h"
#include "tf_read.h"
#include "tf_write.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void chunk_pool__init(struct chunk_pool *p, unsigned max, size_t item_size)
{
    memset(p, 0, sizeof(*p));
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->cond, NULL);
    p->max = max ? max : 1;
    p->item_size = item_size;
}

static void chunk_free(struct chunk *c)
{
    if (c) {
        pthread_cond_destroy(&c->slice_cond);
        pthread_mutex_destroy(&c->slice_lock);
        free(c->items);
        free(c->view);
        free(c->copy);
        tf_pack__free(c->pack);
        tf_packed__free(c->packed);
        free(c);
    }
}

static struct chunk *chunk_alloc(size_t item_size)
{
    struct chunk *c = calloc(1, sizeof(*c));

    if (!c) {
        return NULL;
    }
    pthread_mutex_init(&c->slice_lock, NULL);
    pthread_cond_init(&c->slice_cond, NULL);
    c->items = item_size ? malloc(SLUICE_CHUNK_BYTES / 8 * item_size) : NULL;
    c->view = calloc(1, sizeof(*c->view)); /* 40 KiB, its pages touched as it fills */
    if ((item_size && !c->items) || !c->view) {
        chunk_free(c);
        return NULL;
    }
    c->items_cap = item_size ? SLUICE_CHUNK_BYTES / 8 : 0;
    c->items_max = chunk_items_max(item_size);
    c->item_size = item_size;
    return c;
}

int chunk__reserve(struct chunk *c, size_t n)
{
    size_t cap = c->items_cap;
    uint8_t *items;

    if (n <= cap || c->item_size == 0) {
        return 0;
    }
    if (n > c->items_max) {
        return -ERANGE;
    }
    while (cap < n) {
        cap = cap ? cap * 2 : SLUICE_CHUNK_BYTES / 8;
    }
    if (cap > c->items_max) {
        cap = c->items_max;
    }
    if (cap > SIZE_MAX / c->item_size) {
        return -ENOMEM;
    }
    items = realloc(c->items, cap * c->item_size);
    if (!items) {
        return -ENOMEM;
    }
    c->items = items;
    c->items_cap = cap;
    return 0;
}

uint64_t *chunk__copy_area(struct chunk *c)
{
    if (!c->copy) {
        c->copy = malloc(SLUICE_CHUNK_BYTES + 8);
    }
    return c->copy;
}

struct chunk *chunk_pool__get(struct chunk_pool *p)
{
    struct chunk *c = NULL;
    int make = 0;

    pthread_mutex_lock(&p->lock);
    while (!p->free && p->allocated >= p->max) {
        pthread_cond_wait(&p->cond, &p->lock);
    }
    if (p->free) {
        c = p->free;
        p->free = c->qnext;
    } else {
        p->allocated++;
        make = 1;
    }
    pthread_mutex_unlock(&p->lock);

    if (make) {
        c = chunk_alloc(p->item_size);
        if (!c) {
            pthread_mutex_lock(&p->lock);
            p->allocated--;
            pthread_cond_signal(&p->cond);
            pthread_mutex_unlock(&p->lock);
            return NULL;
        }
    }
    c->qnext = NULL;
    c->ring = NULL;
    c->words = NULL;
    c->blocks = NULL;
    c->at = 0;
    c->len = 0;
    c->bad_at = 0;
    c->bad_hdr = 0;
    c->bad = 0;
    c->bad_why[0] = '\0';
    c->n_items = 0;
    memset(&c->counts, 0, sizeof(c->counts));
    memset(&c->ord, 0, sizeof(c->ord));
    c->snap_own = 0;
    c->windowed = 0;
    c->partial = 0;
    memset(&c->resume, 0, sizeof(c->resume));
    c->slice = CHUNK_SLICE_OUT;
    return c;
}

int chunk__slice_wait(struct chunk *c)
{
    int resume;

    pthread_mutex_lock(&c->slice_lock);
    while (c->slice == CHUNK_SLICE_OUT) {
        pthread_cond_wait(&c->slice_cond, &c->slice_lock);
    }
    resume = c->slice == CHUNK_SLICE_RESUME;
    c->slice = CHUNK_SLICE_OUT; /* for the next slice, before the chunk is pushed again */
    pthread_mutex_unlock(&c->slice_lock);
    c->n_items = 0;
    memset(&c->counts, 0, sizeof(c->counts));
    return resume;
}

void chunk__slice_done(struct chunk *c, int resume)
{
    pthread_mutex_lock(&c->slice_lock);
    c->slice = resume ? CHUNK_SLICE_RESUME : CHUNK_SLICE_ABANDON;
    pthread_cond_signal(&c->slice_cond);
    pthread_mutex_unlock(&c->slice_lock);
}

void chunk_pool__put(struct chunk_pool *p, struct chunk *c)
{
    pthread_mutex_lock(&p->lock);
    c->qnext = p->free;
    p->free = c;
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->lock);
}

void chunk_pool__destroy(struct chunk_pool *p)
{
    struct chunk *c, *next;

    for (c = p->free; c; c = next) {
        next = c->qnext;
        chunk_free(c);
    }
    p->free = NULL;
    pthread_cond_destroy(&p->cond);
    pthread_mutex_destroy(&p->lock);
}
