/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * tails.c — unit tests of the consumers' tail files (jitter/tails.c): lines
 * are distinct across a fork, the file grows to hold each line it hands
 * out, never shrinks, and a file size limit is an error, not a SIGBUS.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tails.h"

static uint64_t file_bytes(unsigned i)
{
    struct stat st;

    cr_assert_eq(fstat(tails_fd(i), &st), 0);
    return (uint64_t)st.st_size;
}

Test(tails, lines_are_distinct_across_fork_and_the_file_holds_them)
{
    struct sluice_ring_tail *a, *b, *c;
    long la, lb, lc;
    int fds[2], status;
    pid_t pid;

    cr_assert_eq(tails_init(), 0);
    cr_assert_eq(tails_new(2), 0);
    cr_assert_eq(file_bytes(2), 0, "empty until a line is taken");
    la = tails_line(2, &a);
    cr_assert_eq(la, 0);
    cr_assert_geq(file_bytes(2), sizeof(*a));
    a->tail = 42;
    cr_assert_eq(pipe(fds), 0);
    pid = fork();
    if (pid == 0) {
        /* The child's rings go to the same consumer: the next line, and what
         * it writes there is what the parent sees (one file). */
        long l = tails_line(2, &c);

        c->tail = 4242;
        _exit(write(fds[1], &l, sizeof(l)) == sizeof(l) ? 0 : 1);
    }
    cr_assert_eq(read(fds[0], &lc, sizeof(lc)), (ssize_t)sizeof(lc));
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert_eq(lc, 1);
    lb = tails_line(2, &b);
    cr_assert_eq(lb, 2, "the parent counts on after its child");
    cr_assert_eq(b - a, 2);
    cr_assert_eq(a[1].tail, 4242, "the child's line, in the same file");
    cr_assert_eq(ftruncate(tails_fd(2), 0), -1, "sealed against shrinking");
    tails_drop(2);
    cr_assert_eq(tails_fd(2), -1);
    cr_assert_eq(a->tail, 42, "the mapping outlives the descriptor");
    cr_assert_eq(tails_line(2, &b), -ENOENT);
}

Test(tails, a_new_consumer_of_the_slot_gets_a_new_file_at_the_same_place)
{
    struct sluice_ring_tail *a, *b;

    cr_assert_eq(tails_init(), 0);
    cr_assert_eq(tails_new(5), 0);
    cr_assert_eq(tails_line(5, &a), 0);
    a->tail = 7;
    cr_assert_eq(tails_new(5), 0);
    cr_assert_geq(file_bytes(5), sizeof(*a), "a stale pointer to the last file's lines stays in");
    cr_assert_eq(tails_line(5, &b), 0, "the count starts again");
    cr_assert_eq(a, b);
    cr_assert_eq(b->tail, 0, "nothing of the last consumer's words");
}

Test(tails, a_file_size_limit_is_an_error)
{
    struct rlimit rl = {64 * 1024, 64 * 1024};
    struct sluice_ring_tail *t;
    long i, l = 0;

    signal(SIGXFSZ, SIG_IGN);
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
    cr_assert_eq(tails_init(), 0);
    cr_assert_eq(tails_new(0), 0);
    for (i = 0; i < 1024 && l >= 0; i++) {
        l = tails_line(0, &t); /* 1024 lines: 64 KiB, within the limit */
    }
    cr_assert_eq(l, 1023);
    cr_assert_eq(tails_line(0, &t), -EFBIG);
}
