/* SPDX-License-Identifier: GPL-2.0-or-later */
/**
 * @file launch.h
 * @brief `sluice run`'s process side: pick qemu-<arch> from the program's
 *        ELF header, start QEMU with the jitter, and pass its exit status on.
 *
 * Runs on the main thread of the `sluice` command. Errors are returned as a
 * one-line message in a caller buffer (the caller prints it and exits 2).
 */
#ifndef SLUICE_LAUNCH_H
#define SLUICE_LAUNCH_H

#include <stddef.h>
#include <sys/resource.h>
#include <sys/types.h>

struct sluice_session;

/**
 * Find @p prog like execvp() would (in $PATH when it has no '/').
 * @param[out] path the program's path, @p n bytes
 * @return 0, or -1 with a message in @p err (@p errn bytes).
 */
int launch_find_program(const char *prog, char *path, size_t n, char *err, size_t errn);

/**
 * The QEMU target of the ELF program at @p path (its ELF header only):
 * "x86_64", "aarch64", "riscv64" or "mipsel".
 * @return the name (static), or NULL with a message in @p err naming the
 *         file and the reason (unreadable, not ELF, unsupported machine, a
 *         MIPS n32 program).
 */
const char *launch_elf_arch(const char *path, char *err, size_t errn);

/**
 * Path of qemu-@p arch: $SLUICE_QEMU_DIR/bin/qemu-<arch>, else
 * @p default_dir/bin/qemu-<arch>; it must be executable.
 * @return 0, or -1 with a message in @p err.
 */
int launch_qemu_path(const char *arch, const char *default_dir, char *path, size_t n, char *err,
                     size_t errn);

/**
 * Path of the jitter: $SLUICE_JITTER, else @p default_path; it must be readable.
 * @return 0, or -1 with a message in @p err.
 */
int launch_jitter_path(const char *default_path, char *path, size_t n, char *err, size_t errn);

/**
 * Main thread, first thing: ignore SIGPIPE and SIGXFSZ from now on (a
 * write to a pipe or socket whose reader left fails with EPIPE, a write
 * past `ulimit -f` with EFBIG, which the tools and the trace file writer
 * report, instead of killing sluice in silence), keeping the dispositions
 * sluice was started with for the guest's QEMU (launch_spawn() restores
 * them there).
 */
void launch_ignore_sigpipe(void);

/**
 * Main thread, before any descriptor is made: open /dev/null on each of
 * descriptors 0, 1 and 2 that sluice was started without, so that no
 * socket, ring or file of ours takes its number (a dump meant for a closed
 * stdout went into the jitter's control socket). The guest's QEMU gets
 * them closed again, as sluice was started (launch_spawn()).
 * @return 0, or -1 if /dev/null cannot be opened (errno set).
 */
int launch_hold_stdio(void);

/** Whether descriptor @p fd (0, 1 or 2) was closed when sluice started (launch_hold_stdio()). */
int launch_stdio_closed(int fd);

/**
 * fork+exec `qemu -jitter JITTER_ARG prog args...` with @p consumer_fd
 * inherited (@p jitter_arg names it, see jitter_arg.h) and every SLUICE_*
 * variable removed from QEMU's environment. Ignores SIGINT and SIGQUIT
 * in the calling process from here on (the guest gets them from the tty),
 * and forwards SIGTERM and SIGHUP to the child (so `timeout` or a closed
 * terminal ends the guest and sluice still reports); the child keeps the
 * dispositions sluice started with.
 * @param prog the program's path (launch_find_program())
 * @param argv0 the guest's argv[0]: the program as the user named it, as a
 *        shell or execvp() would pass it (QEMU's -0)
 * @param args NULL-terminated guest arguments after the program (argv[1..])
 * @return the child's pid, or -1 with a message in @p err.
 */
pid_t launch_spawn(const char *qemu, const char *jitter_arg, const char *prog, const char *argv0,
                   char *const args[], int consumer_fd, char *err, size_t errn);

/**
 * Let a termination request end session @p s (sluice_session__detach())
 * once the guest's QEMU has ended: SIGTERM, SIGHUP or a SIGINT/SIGQUIT sent
 * to sluice after it ended, or the end of a QEMU such a request was passed
 * on to. Processes the guest forked that outlive it then run on untraced
 * (the request would not have reached them untraced either). NULL: no
 * session (before freeing it). Main thread, after launch_spawn().
 */
void launch_watch(struct sluice_session *s);

/** Whether launch_watch()'s session was detached so (the guest's other processes left). */
int launch_left_others(void);

/**
 * Wait for @p pid (retrying on EINTR), then, before reaping it, remove
 * the control socket files it left with its pid (a QEMU killed by a
 * signal cannot remove its own).
 * @param[out] usage if not NULL, its resource use (wait4), children it reaped included
 * @return its wait status, or -1.
 */
int launch_wait(pid_t pid, struct rusage *usage);

/**
 * End sluice the way the guest ended (wait status @p status): exit with its
 * exit code, or die of the same signal (without a core dump of our own).
 * When @p trace_failed and the guest exited 0, exit 1 instead. Flushes
 * stdio first. Never returns.
 */
void launch_exit_like(int status, int trace_failed) __attribute__((noreturn));

#endif /* SLUICE_LAUNCH_H */
