/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * filter_maps.h — a filter's maps, BPF_MAP_TYPE_ARRAY and BPF_MAP_TYPE_HASH,
 * with the kernel's semantics for lookup, update (BPF_ANY, BPF_NOEXIST,
 * BPF_EXIST) and delete.
 *
 * Storage is plain process memory, allocated once when the filter is loaded
 * and never moved or freed before filter_free(): a pointer a lookup handed to
 * a program stays valid memory for the filter's life, even if the element is
 * deleted meanwhile (like the kernel's preallocated maps). Consumers cannot
 * read maps (yet): they are the filter's private state.
 *
 * Threads: nothing here locks. The caller serializes every call on one map
 * (filter.c holds the filter's lock for a whole run).
 */
#ifndef SLUICE_JITTER_FILTER_MAPS_H
#define SLUICE_JITTER_FILTER_MAPS_H

#include <stddef.h>
#include <stdint.h>

/** Largest key, in bytes: a key must fit on the program's 512-byte stack. */
#define FILTER_MAP_KEY_MAX 512u
/** Largest value, in bytes. */
#define FILTER_MAP_VALUE_MAX (1u << 20)
/** Most memory one filter's maps and global sections may take together, in bytes. */
#define FILTER_MEMORY_MAX (256ull << 20)

/** One map. Fill it with filter_map_init() only. */
struct filter_map {
    char name[64];        /**< as in the object, for messages (truncated) */
    uint32_t type;        /**< BPF_MAP_TYPE_ARRAY or BPF_MAP_TYPE_HASH */
    uint32_t key_size;    /**< bytes */
    uint32_t value_size;  /**< bytes */
    uint32_t max_entries; /**< elements */
    size_t stride;        /**< bytes per slot: the value (array), key then value (hash) */
    size_t value_off;     /**< offset of the value in a slot, 8-aligned */
    uint8_t *slots;       /**< max_entries slots, zeroed at creation */
    uint32_t *heads;      /**< hash: first slot of each bucket's chain, or FILTER_MAP_NIL */
    uint32_t *next;       /**< hash: per slot, the next slot in its chain or in the free list */
    uint32_t n_buckets;   /**< hash: a power of two */
    uint32_t free_slot;   /**< hash: first free slot, or FILTER_MAP_NIL */
    uint32_t count;       /**< hash: slots in use */
};

/** "No slot" in filter_map chains. */
#define FILTER_MAP_NIL UINT32_MAX

/**
 * Check a map's definition and say how much memory it needs.
 * @param[in]  type        map type from the object
 * @param[in]  key_size    bytes
 * @param[in]  value_size  bytes
 * @param[in]  max_entries elements
 * @param[out] bytes       memory filter_map_init() will allocate, on success
 * @param[out] why         the reason, on failure ("unsupported map type 6 ..."); NUL-terminated
 * @param[in]  why_size    bytes of @p why
 * @return 0 if supported; -EINVAL otherwise.
 */
int filter_map_check(uint32_t type, uint32_t key_size, uint32_t value_size, uint32_t max_entries,
                     uint64_t *bytes, char *why, size_t why_size);

/**
 * Create map @p m (zeroed values; an empty hash). The definition must have
 * passed filter_map_check().
 * @param[out] m           the map
 * @param[in]  name        copied (truncated to fit)
 * @param[in]  type        BPF_MAP_TYPE_ARRAY or BPF_MAP_TYPE_HASH
 * @param[in]  key_size    bytes
 * @param[in]  value_size  bytes
 * @param[in]  max_entries elements
 * @return 0, or -ENOMEM (then @p m holds nothing to free).
 */
int filter_map_init(struct filter_map *m, const char *name, uint32_t type, uint32_t key_size,
                    uint32_t value_size, uint32_t max_entries);

/**
 * Free what filter_map_init() allocated. Safe on a zeroed struct.
 * @param[in,out] m the map
 */
void filter_map_destroy(struct filter_map *m);

/**
 * The value stored under @p key.
 * @param[in] m   the map
 * @param[in] key key_size bytes (array: a little-endian u32 index)
 * @return a pointer to the value (value_size bytes, writable), or NULL if absent.
 */
void *filter_map_lookup(struct filter_map *m, const void *key);

/**
 * Store @p value under @p key. @p key and @p value may point into the map itself.
 * @param[in,out] m     the map
 * @param[in]     key   key_size bytes
 * @param[in]     value value_size bytes
 * @param[in]     flags BPF_ANY, BPF_NOEXIST or BPF_EXIST
 * @return 0; -EINVAL (unknown flags); -E2BIG (array index out of range, or
 *         the hash holds max_entries elements already); -EEXIST (BPF_NOEXIST
 *         and present: always so for arrays); -ENOENT (BPF_EXIST and absent).
 */
int filter_map_update(struct filter_map *m, const void *key, const void *value, uint64_t flags);

/**
 * Remove the element under @p key.
 * @param[in,out] m   the map
 * @param[in]     key key_size bytes
 * @return 0; -ENOENT if absent; -EINVAL for arrays (their elements always exist).
 */
int filter_map_delete(struct filter_map *m, const void *key);

#endif /* SLUICE_JITTER_FILTER_MAPS_H */
