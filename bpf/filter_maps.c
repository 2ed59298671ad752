/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * filter_maps.c — array and hash maps for filter programs (filter_maps.h).
 *
 * Owns each map's storage: one zeroed block of slots allocated at load, plus,
 * for hashes, a bucket array and a per-slot link array (chains and the free
 * list share it). Nothing is allocated or freed after filter_map_init(), so a
 * value pointer handed to a program can never dangle. Runs on whichever
 * thread runs the filter, under the filter's lock; never blocks.
 *
 * Hash keys are compared bytewise (FNV-1a picks the bucket), like the
 * kernel's: padding in a key struct is part of the key.
 */
#include "filter_maps.h"

#include <errno.h>
#include <linux/bpf.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t round8(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

static uint32_t buckets_for(uint32_t max_entries)
{
    uint32_t n = 1;

    while (n < max_entries && n < (1u << 31)) {
        n <<= 1;
    }
    return n;
}

int filter_map_check(uint32_t type, uint32_t key_size, uint32_t value_size, uint32_t max_entries,
                     uint64_t *bytes, char *why, size_t why_size)
{
    uint64_t per;

    if (type != BPF_MAP_TYPE_ARRAY && type != BPF_MAP_TYPE_HASH) {
        snprintf(why, why_size, "unsupported map type %u (only array (2) and hash (1))", type);
        return -EINVAL;
    }
    if (type == BPF_MAP_TYPE_ARRAY ? key_size != 4
                                   : key_size == 0 || key_size > FILTER_MAP_KEY_MAX) {
        snprintf(why, why_size, "key size %u (array: 4; hash: 1 to %u)", key_size,
                 FILTER_MAP_KEY_MAX);
        return -EINVAL;
    }
    if (value_size == 0 || value_size > FILTER_MAP_VALUE_MAX) {
        snprintf(why, why_size, "value size %u (1 to %u)", value_size, FILTER_MAP_VALUE_MAX);
        return -EINVAL;
    }
    if (max_entries == 0) {
        snprintf(why, why_size, "max_entries 0");
        return -EINVAL;
    }
    per = round8(value_size);
    if (type == BPF_MAP_TYPE_HASH) {
        /* key, the slot's link, and its share of the buckets (at most two: power-of-two rounding)
         */
        per += round8(key_size) + 2 * sizeof(uint32_t) + sizeof(uint32_t);
    }
    *bytes = per * max_entries; /* < 2^21 * 2^32: no overflow */
    if (*bytes > FILTER_MEMORY_MAX) {
        snprintf(why, why_size, "needs %llu bytes (%u entries; at most %llu bytes in all)",
                 (unsigned long long)*bytes, max_entries, (unsigned long long)FILTER_MEMORY_MAX);
        return -EINVAL;
    }
    return 0;
}

static int hash_init(struct filter_map *m)
{
    uint32_t i;

    m->n_buckets = buckets_for(m->max_entries);
    m->heads = malloc(sizeof(*m->heads) * m->n_buckets);
    m->next = malloc(sizeof(*m->next) * m->max_entries);
    if (!m->heads || !m->next) {
        return -ENOMEM;
    }
    memset(m->heads, 0xff, sizeof(*m->heads) * m->n_buckets); /* FILTER_MAP_NIL */
    for (i = 0; i < m->max_entries; i++) {
        m->next[i] = i + 1 < m->max_entries ? i + 1 : FILTER_MAP_NIL;
    }
    m->free_slot = 0;
    m->count = 0;
    return 0;
}

int filter_map_init(struct filter_map *m, const char *name, uint32_t type, uint32_t key_size,
                    uint32_t value_size, uint32_t max_entries)
{
    bool hash = type == BPF_MAP_TYPE_HASH;

    memset(m, 0, sizeof(*m));
    snprintf(m->name, sizeof(m->name), "%s", name);
    m->type = type;
    m->key_size = key_size;
    m->value_size = value_size;
    m->max_entries = max_entries;
    m->value_off = hash ? round8(key_size) : 0;
    m->stride = m->value_off + round8(value_size);
    m->slots = calloc(max_entries, m->stride);
    if (!m->slots || (hash && hash_init(m) < 0)) {
        filter_map_destroy(m);
        return -ENOMEM;
    }
    return 0;
}

void filter_map_destroy(struct filter_map *m)
{
    free(m->slots);
    free(m->heads);
    free(m->next);
    m->slots = NULL;
    m->heads = NULL;
    m->next = NULL;
}

/* ---- array -------------------------------------------------------------------- */

static uint32_t array_index(const void *key)
{
    uint32_t i;

    memcpy(&i, key, sizeof(i));
    return i;
}

/* ---- hash --------------------------------------------------------------------- */

static uint32_t hash_bytes(const uint8_t *p, size_t n)
{
    uint32_t h = 2166136261u;

    while (n--) {
        h = (h ^ *p++) * 16777619u;
    }
    return h;
}

static uint8_t *slot(const struct filter_map *m, uint32_t i)
{
    return m->slots + (size_t)i * m->stride;
}

/* The link that points at the slot holding @key (a bucket head or a next entry), or NULL. */
static uint32_t *hash_find(struct filter_map *m, const void *key)
{
    uint32_t *link = &m->heads[hash_bytes(key, m->key_size) & (m->n_buckets - 1)];

    while (*link != FILTER_MAP_NIL) {
        if (memcmp(slot(m, *link), key, m->key_size) == 0) {
            return link;
        }
        link = &m->next[*link];
    }
    return NULL;
}

static int hash_insert(struct filter_map *m, const void *key, const void *value)
{
    uint32_t *head = &m->heads[hash_bytes(key, m->key_size) & (m->n_buckets - 1)];
    uint32_t i = m->free_slot;

    if (m->count == m->max_entries || i == FILTER_MAP_NIL) {
        return -E2BIG;
    }
    m->free_slot = m->next[i];
    /* memmove: key or value may lie in a slot of this map (never the free one, but be safe). */
    memmove(slot(m, i), key, m->key_size);
    memmove(slot(m, i) + m->value_off, value, m->value_size);
    m->next[i] = *head;
    *head = i;
    m->count++;
    return 0;
}

/* ---- operations ---------------------------------------------------------------- */

void *filter_map_lookup(struct filter_map *m, const void *key)
{
    uint32_t *link;

    if (m->type == BPF_MAP_TYPE_ARRAY) {
        uint32_t i = array_index(key);

        return i < m->max_entries ? slot(m, i) : NULL;
    }
    link = hash_find(m, key);
    return link ? slot(m, *link) + m->value_off : NULL;
}

int filter_map_update(struct filter_map *m, const void *key, const void *value, uint64_t flags)
{
    uint32_t *link;

    if (flags > BPF_EXIST) {
        return -EINVAL;
    }
    if (m->type == BPF_MAP_TYPE_ARRAY) {
        uint32_t i = array_index(key);

        if (i >= m->max_entries) {
            return -E2BIG;
        }
        if (flags == BPF_NOEXIST) {
            return -EEXIST; /* every element of an array exists */
        }
        memmove(slot(m, i), value, m->value_size);
        return 0;
    }
    link = hash_find(m, key);
    if (link) {
        if (flags == BPF_NOEXIST) {
            return -EEXIST;
        }
        memmove(slot(m, *link) + m->value_off, value, m->value_size);
        return 0;
    }
    return flags == BPF_EXIST ? -ENOENT : hash_insert(m, key, value);
}

int filter_map_delete(struct filter_map *m, const void *key)
{
    uint32_t *link;
    uint32_t i;

    if (m->type == BPF_MAP_TYPE_ARRAY) {
        return -EINVAL;
    }
    link = hash_find(m, key);
    if (!link) {
        return -ENOENT;
    }
    i = *link;
    *link = m->next[i];
    m->next[i] = m->free_slot;
    m->free_slot = i;
    m->count--;
    return 0;
}
