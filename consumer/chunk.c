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
 * (chunk__reserve()); it keeps that room from then on.
 */
#include "chunk.h"

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
        free(c->items);
        free(c);
    }
}

static struct chunk *chunk_alloc(size_t item_size)
{
    struct chunk *c = calloc(1, sizeof(*c));

    if (!c) {
        return NULL;
    }
    c->items = item_size ? malloc(SLUICE_CHUNK_BYTES / 8 * item_size) : NULL;
    if (item_size && !c->items) {
        chunk_free(c);
        return NULL;
    }
    c->items_cap = item_size ? SLUICE_CHUNK_BYTES / 8 : 0;
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
    while (cap < n) {
        cap = cap ? cap * 2 : SLUICE_CHUNK_BYTES / 8;
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
    return c;
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
