/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Unit tests of where the jitter puts its descriptors (jitter/fds.c): the
 * highest free numbers below min(SLUICE_FDS_TOP, RLIMIT_NOFILE), never above
 * (a number above would grow QEMU's descriptor table, and the kernel waits
 * for an RCU grace period to grow the table of a threaded process).
 * Criterion runs each test in a process of its own: the limits stay there.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "fds.h"
#include "sluice/ctl.h"

/* Sets the soft RLIMIT_NOFILE to @p n; skips the test if the hard limit is lower. */
static void soft_limit(rlim_t n)
{
    struct rlimit rl;

    cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < n) {
        cr_skip_test("hard RLIMIT_NOFILE %llu < %llu", (unsigned long long)rl.rlim_max,
                     (unsigned long long)n);
    }
    rl.rlim_cur = n;
    cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0, "%s", strerror(errno));
}

/* Adopts @p n descriptors of /dev/null; their numbers into @p homes. */
static void adopt(int *homes, int n)
{
    for (int i = 0; i < n; i++) {
        int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

        cr_assert_geq(fd, 0);
        cr_assert_geq(fds_adopt(fd, &homes[i]), 0);
    }
}

Test(fds, high_limit_stays_below_the_top)
{
    int home[3];

    soft_limit(SLUICE_FDS_TOP * 4);
    adopt(home, 3);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(home[i], SLUICE_FDS_TOP - 1 - i, "descriptor %d at %d, want %d", i, home[i],
                     SLUICE_FDS_TOP - 1 - i);
    }
}

Test(fds, low_limit_is_the_top)
{
    int home[2];

    soft_limit(1024);
    adopt(home, 2);
    cr_assert_eq(home[0], 1023);
    cr_assert_eq(home[1], 1022);
}

Test(fds, taken_numbers_are_skipped)
{
    int home[2];

    soft_limit(SLUICE_FDS_TOP * 4);
    cr_assert_eq(dup2(0, SLUICE_FDS_TOP - 1), SLUICE_FDS_TOP - 1);
    adopt(home, 2);
    cr_assert_eq(home[0], SLUICE_FDS_TOP - 2);
    cr_assert_eq(home[1], SLUICE_FDS_TOP - 3);
}
