/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Guest: ends the way its argument says, for the exit-status e2e test.
 *
 *   exitcode N      exit(N)
 *   exitcode segv   unhandled SIGSEGV (store through a null pointer)
 *   exitcode abort  abort() (SIGABRT)
 *   exitcode kill   raise(SIGKILL)
 *   exitcode fd     print the descriptor open() returns (tracing must not shift it)
 *   exitcode nosys  syscalls numbered -1 and -4096 (none has them: ENOSYS), prints what each
 *                   returned and its errno, then exit(0)
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: exitcode N|segv|abort|kill|fd|nosys\n");
        return 2;
    }
    printf("exitcode %s\n", argv[1]);
    fflush(stdout);
    if (strcmp(argv[1], "segv") == 0) {
        volatile int *volatile null = NULL;

        *null = 1;
    } else if (strcmp(argv[1], "abort") == 0) {
        abort();
    } else if (strcmp(argv[1], "kill") == 0) {
        raise(SIGKILL);
    } else if (strcmp(argv[1], "fd") == 0) {
        printf("open() returned %d\n", open("/proc/self/exe", O_RDONLY));
        return 0;
    } else if (strcmp(argv[1], "nosys") == 0) {
        /* QEMU's do_syscall gets an int: the trace must say -1, as the plugin API does. */
        long a = syscall(-1, 1, 2, 3, 4, 5, 6);
        int ea = errno;
        long b = syscall(-4096, 1, 2, 3, 4, 5, 6);
        int eb = errno;

        printf("syscall(-1) = %ld errno %d, syscall(-4096) = %ld errno %d\n", a, ea, b, eb);
        return 0;
    }
    exit(atoi(argv[1]));
}
