/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Guest: fork, then exec /proc/self/exe in the child.
 *
 * Both processes must be traced from the fork on, and nothing buffered in
 * the parent may appear twice or go missing. Under QEMU without binfmt_misc
 * the exec of a foreign-arch binary fails (ENOEXEC) while an x86_64 one runs
 * natively, untraced; either way the child prints "child ok" and exits 0,
 * so the output does not depend on which happened.
 */
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char stdout_buf[4096];

int main(int argc, char **argv)
{
    pid_t pid;
    int status = 0;

    /* fully buffered: glibc then never fstat()s stdout (inode, times differ per run) */
    setvbuf(stdout, stdout_buf, _IOFBF, sizeof(stdout_buf));

    if (argc > 1 && strcmp(argv[1], "child") == 0) {
        printf("child ok\n");
        return 0;
    }
    printf("parent start\n");
    fflush(stdout);
    pid = fork();
    if (pid < 0) {
        printf("fork failed\n");
        return 1;
    }
    if (pid == 0) {
        char *args[] = {argv[0], "child", NULL};

        execv("/proc/self/exe", args);
        /* exec failed (foreign arch, no binfmt_misc): say the same thing */
        printf("child ok\n");
        fflush(stdout);
        _exit(0);
    }
    if (waitpid(pid, &status, 0) != pid) {
        printf("waitpid failed\n");
        return 1;
    }
    printf("child exited=%d status=%d\n", WIFEXITED(status), WEXITSTATUS(status));
    return 0;
}
