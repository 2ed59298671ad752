/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * results.h — what the test programs of filter_good/ leave in their .bss for
 * tests/unit/filter_load.c to read: each program has this as its only .bss
 * variable, so it sits at offset 0 of the section.
 */
#ifndef SLUICE_TESTS_FILTER_GOOD_RESULTS_H
#define SLUICE_TESTS_FILTER_GOOD_RESULTS_H

#include <linux/types.h>

/** Values a test program recorded, in the order its test expects them. */
struct results {
    __s64 v[32];  /**< return codes and values */
    __u8 tag[16]; /**< a string (globals.bpf.c) */
};

#endif /* SLUICE_TESTS_FILTER_GOOD_RESULTS_H */
