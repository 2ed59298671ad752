/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * filter_maps.c — bpf/filter_maps.c against the kernel's map semantics:
 * array values preallocated and zeroed, updates with BPF_ANY / BPF_NOEXIST /
 * BPF_EXIST, -E2BIG for an index out of range or a full hash, delete
 * (-EINVAL on arrays), slot reuse after delete, chains within one bucket,
 * and the definition checks.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <linux/bpf.h>

#include "filter_maps.h"

static struct filter_map m;

static void make(uint32_t type, uint32_t key, uint32_t value, uint32_t max)
{
    cr_assert_eq(filter_map_init(&m, "m", type, key, value, max), 0);
}

static uint64_t get(uint64_t key)
{
    const uint64_t *v = filter_map_lookup(&m, &key);

    cr_assert_not_null(v, "key %llu present", (unsigned long long)key);
    return *v;
}

static int put(uint64_t key, uint64_t value, uint64_t flags)
{
    return filter_map_update(&m, &key, &value, flags);
}

static int del(uint64_t key)
{
    return filter_map_delete(&m, &key);
}

Test(array, preallocated_and_zeroed)
{
    uint32_t i;

    make(BPF_MAP_TYPE_ARRAY, 4, 8, 3);
    for (i = 0; i < 3; i++) {
        uint64_t *v = filter_map_lookup(&m, &i);

        cr_assert_not_null(v);
        cr_assert_eq(*v, 0);
    }
    i = 3;
    cr_assert_null(filter_map_lookup(&m, &i));
    i = UINT32_MAX;
    cr_assert_null(filter_map_lookup(&m, &i));
    filter_map_destroy(&m);
}

Test(array, update_flags_and_delete)
{
    uint32_t i = 2;
    uint64_t v = 7;

    make(BPF_MAP_TYPE_ARRAY, 4, 8, 3);
    cr_assert_eq(filter_map_update(&m, &i, &v, BPF_ANY), 0);
    cr_assert_eq(*(uint64_t *)filter_map_lookup(&m, &i), 7);
    v = 8;
    cr_assert_eq(filter_map_update(&m, &i, &v, BPF_NOEXIST), -EEXIST);
    cr_assert_eq(filter_map_update(&m, &i, &v, BPF_EXIST), 0);
    cr_assert_eq(*(uint64_t *)filter_map_lookup(&m, &i), 8);
    cr_assert_eq(filter_map_update(&m, &i, &v, BPF_EXIST + 1), -EINVAL);
    i = 3;
    cr_assert_eq(filter_map_update(&m, &i, &v, BPF_ANY), -E2BIG);
    cr_assert_eq(filter_map_delete(&m, &i), -EINVAL);
    i = 0;
    cr_assert_eq(filter_map_delete(&m, &i), -EINVAL);
    filter_map_destroy(&m);
}

Test(array, odd_value_size_is_8_aligned)
{
    uint32_t i = 1;
    uint8_t v[5] = {1, 2, 3, 4, 5};
    uint8_t *p0, *p1;

    make(BPF_MAP_TYPE_ARRAY, 4, 5, 2);
    cr_assert_eq(filter_map_update(&m, &i, v, BPF_ANY), 0);
    i = 0;
    p0 = filter_map_lookup(&m, &i);
    i = 1;
    p1 = filter_map_lookup(&m, &i);
    cr_assert_eq(p1 - p0, 8);
    cr_assert_arr_eq(p1, v, 5);
    filter_map_destroy(&m);
}

Test(hash, flags_full_and_reuse)
{
    make(BPF_MAP_TYPE_HASH, 8, 8, 2);
    cr_assert_null(filter_map_lookup(&m, &(uint64_t){1}));
    cr_assert_eq(put(1, 10, BPF_EXIST), -ENOENT);
    cr_assert_eq(put(1, 10, BPF_NOEXIST), 0);
    cr_assert_eq(put(1, 11, BPF_NOEXIST), -EEXIST);
    cr_assert_eq(get(1), 10);
    cr_assert_eq(put(2, 20, BPF_ANY), 0);
    cr_assert_eq(put(3, 30, BPF_ANY), -E2BIG, "full");
    cr_assert_eq(put(1, 12, BPF_ANY), 0, "replacing works when full");
    cr_assert_eq(put(2, 21, BPF_EXIST), 0);
    cr_assert_eq(get(1), 12);
    cr_assert_eq(get(2), 21);
    cr_assert_eq(m.count, 2);
    cr_assert_eq(del(3), -ENOENT);
    cr_assert_eq(del(1), 0);
    cr_assert_eq(del(1), -ENOENT);
    cr_assert_null(filter_map_lookup(&m, &(uint64_t){1}));
    cr_assert_eq(put(3, 30, BPF_NOEXIST), 0, "the freed slot is reused");
    cr_assert_eq(get(3), 30);
    cr_assert_eq(get(2), 21);
    cr_assert_eq(put(4, 40, 4), -EINVAL);
    filter_map_destroy(&m);
}

Test(hash, many_keys_share_buckets)
{
    /* 1000 entries in 1024 buckets: chains form; every key must stay reachable. */
    make(BPF_MAP_TYPE_HASH, 8, 8, 1000);
    for (uint64_t k = 0; k < 1000; k++) {
        cr_assert_eq(put(k * 7919, k, BPF_NOEXIST), 0);
    }
    cr_assert_eq(put(1, 1, BPF_NOEXIST), -E2BIG);
    for (uint64_t k = 0; k < 1000; k += 2) {
        cr_assert_eq(del(k * 7919), 0);
    }
    for (uint64_t k = 0; k < 1000; k++) {
        const uint64_t key = k * 7919;
        const uint64_t *v = filter_map_lookup(&m, &key);

        if (k % 2) {
            cr_assert(v && *v == k, "key %llu", (unsigned long long)key);
        } else {
            cr_assert_null(v);
        }
    }
    cr_assert_eq(m.count, 500);
    filter_map_destroy(&m);
}

Test(hash, key_and_value_may_alias_the_map)
{
    uint64_t *v;

    make(BPF_MAP_TYPE_HASH, 8, 8, 4);
    cr_assert_eq(put(5, 5, BPF_ANY), 0);
    v = filter_map_lookup(&m, &(uint64_t){5});
    /* The value of key 5 is 5: use it as the key and as the value. */
    cr_assert_eq(filter_map_update(&m, v, v, BPF_EXIST), 0);
    cr_assert_eq(filter_map_update(&m, v, v, BPF_ANY), 0);
    cr_assert_eq(get(5), 5);
    cr_assert_eq(filter_map_delete(&m, v), 0);
    filter_map_destroy(&m);
}

Test(check, definitions)
{
    char why[128];
    uint64_t bytes = 0;

    cr_assert_eq(filter_map_check(BPF_MAP_TYPE_ARRAY, 4, 8, 10, &bytes, why, sizeof(why)), 0);
    cr_assert_eq(bytes, 80);
    cr_assert_eq(filter_map_check(BPF_MAP_TYPE_HASH, 8, 4, 10, &bytes, why, sizeof(why)), 0);
    cr_assert_eq(bytes, 10 * (8 + 8 + 12));
    cr_assert_eq(filter_map_check(BPF_MAP_TYPE_ARRAY, 8, 8, 1, &bytes, why, sizeof(why)), -EINVAL);
    cr_assert_str_eq(why, "key size 8 (array: 4; hash: 1 to 512)");
    cr_assert_eq(filter_map_check(BPF_MAP_TYPE_HASH, 0, 8, 1, &bytes, why, sizeof(why)), -EINVAL);
    cr_assert_eq(filter_map_check(BPF_MAP_TYPE_HASH, 513, 8, 1, &bytes, why, sizeof(why)), -EINVAL);
    cr_assert_eq(filter_map_check(BPF_MAP_TYPE_HASH, 4, 0, 1, &bytes, why, sizeof(why)), -EINVAL);
    cr_assert_str_eq(why, "value size 0 (1 to 1048576)");
    cr_assert_eq(filter_map_check(BPF_MAP_TYPE_HASH, 4, 4, 0, &bytes, why, sizeof(why)), -EINVAL);
    cr_assert_str_eq(why, "max_entries 0");
    cr_assert_eq(filter_map_check(BPF_MAP_TYPE_ARRAY, 4, 1 << 20, 257, &bytes, why, sizeof(why)),
                 -EINVAL);
    cr_assert_str_eq(why, "needs 269484032 bytes (257 entries; at most 268435456 bytes in all)");
    cr_assert_eq(filter_map_check(BPF_MAP_TYPE_ARRAY, 4, 1 << 20, 256, &bytes, why, sizeof(why)),
                 0);
    cr_assert_eq(filter_map_check(BPF_MAP_TYPE_LRU_HASH, 4, 4, 1, &bytes, why, sizeof(why)),
                 -EINVAL);
    cr_assert_str_eq(why, "unsupported map type 9 (only array (2) and hash (1))");
}
