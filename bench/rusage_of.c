/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * rusage_of.c — run one command and write its own resource use, for bench/run.
 *
 * A process bench/run (Python) spawns reports Python's peak RSS as its own:
 * Linux keeps, in ru_maxrss, the high-water mark of the memory a process had
 * before it exec'd (fs/exec.c, exec_mmap), and a child of Python starts out
 * in Python's memory. So every untraced and plugin row's "QEMU peak RSS" was
 * Python's (19 MiB). This program is small: the command it forks starts in
 * its memory, and the figures it writes are the command's alone.
 *
 * Usage: rusage_of FILE PROGRAM [ARG...]
 * Runs PROGRAM with ARGs (stdin, stdout and stderr inherited), waits for it,
 * writes "MAXRSS_KIB USER_S SYS_S\n" of it to FILE, then exits as it did: its
 * exit status, or killed by the same signal (no core file). 127 if PROGRAM
 * cannot run, 126 if this program fails before it does (a message on stderr).
 * Single-threaded; never touches the command's descriptors.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static double seconds(struct timeval tv)
{
    return (double)tv.tv_sec + (double)tv.tv_usec * 1e-6;
}

int main(int argc, char **argv)
{
    struct rlimit no_core = {0, 0};
    struct rusage ru;
    FILE *out;
    int status;
    pid_t pid;

    if (argc < 3) {
        fprintf(stderr, "usage: rusage_of FILE PROGRAM [ARG...]\n");
        return 126;
    }
    pid = fork();
    if (pid < 0) {
        fprintf(stderr, "rusage_of: fork: %s\n", strerror(errno));
        return 126;
    }
    if (pid == 0) {
        execvp(argv[2], argv + 2);
        fprintf(stderr, "rusage_of: %s: %s\n", argv[2], strerror(errno));
        _exit(127);
    }
    while (wait4(pid, &status, 0, &ru) < 0) {
        if (errno != EINTR) {
            fprintf(stderr, "rusage_of: wait4: %s\n", strerror(errno));
            return 126;
        }
    }
    out = fopen(argv[1], "w");
    if (!out ||
        fprintf(out, "%ld %.6f %.6f\n", ru.ru_maxrss, seconds(ru.ru_utime), seconds(ru.ru_stime)) <
            0 ||
        fclose(out) != 0) {
        fprintf(stderr, "rusage_of: %s: %s\n", argv[1], strerror(errno));
        return 126;
    }
    if (WIFSIGNALED(status)) {
        /* The same wait status for bench/run: die of the same signal. */
        setrlimit(RLIMIT_CORE, &no_core);
        signal(WTERMSIG(status), SIG_DFL);
        raise(WTERMSIG(status));
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 126;
}
