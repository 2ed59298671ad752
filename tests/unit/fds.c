/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fds.c — unit tests of the jitter's descriptor placement (jitter/fds.c):
 * its descriptors sit just below FDS_TOP (4096) whatever RLIMIT_NOFILE
 * says, never above it (a descriptor near a high limit grows the kernel's
 * table for the whole process).
 */
#include <criterion/criterion.h>
#include <sys/resource.h>
#include <unistd.h>

#include "fds.h"

Test(fds, never_above_4096_with_a_higher_limit)
{
    struct rlimit rl = {20000, 20000};
    int a, b, c, home[3];

    cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
    a = fds_adopt(dup(0), &home[0]);
    b = fds_adopt(dup(0), &home[1]);
    cr_assert_eq(a, 4095, "the first goes to the top");
    cr_assert_eq(b, 4094, "the next below it, not at 4096");
    cr_assert_eq(dup2(0, 4093), 4093); /* taken by someone else */
    c = fds_adopt(dup(0), &home[2]);
    cr_assert_eq(c, 4092);
}
