/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * launch.c — starting QEMU for `sluice run` (see launch.h).
 *
 * Main thread of the `sluice` command only; launch_spawn() must be called
 * while the process is still single-threaded (the child calls setenv()
 * between fork and exec). Reads only the program's ELF header, never more:
 * the program may be any file.
 */
#include "launch.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sluice/consumer.h"
#include "sluice/ctl.h"

static int is_exec_file(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

int launch_find_program(const char *prog, char *path, size_t n, char *err, size_t errn)
{
    const char *dirs = getenv("PATH");

    if (strchr(prog, '/')) {
        snprintf(path, n, "%s", prog);
        if (!is_exec_file(path)) {
            snprintf(err, errn, "%s: %s", prog,
                     access(path, F_OK) ? strerror(errno) : "not an executable file");
            return -1;
        }
        return 0;
    }
    for (dirs = dirs ? dirs : "/usr/local/bin:/usr/bin:/bin"; *dirs;) {
        size_t len = strcspn(dirs, ":");

        /* An empty entry is the current directory, as for execvp(). */
        snprintf(path, n, "%.*s/%s", len ? (int)len : 1, len ? dirs : ".", prog);
        if (is_exec_file(path)) {
            return 0;
        }
        dirs += len + (dirs[len] == ':');
    }
    snprintf(err, errn, "%s: not found in PATH", prog);
    return -1;
}

/* Names of common machines we do not run, for the error message. */
static const char *machine_name(unsigned m)
{
    switch (m) {
    case EM_386:
        return "EM_386";
    case EM_ARM:
        return "EM_ARM";
    case EM_PPC:
        return "EM_PPC";
    case EM_PPC64:
        return "EM_PPC64";
    case EM_S390:
        return "EM_S390";
    case EM_SPARC:
        return "EM_SPARC";
    case EM_SPARCV9:
        return "EM_SPARCV9";
    case EM_MIPS:
        return "EM_MIPS";
    case EM_X86_64:
        return "EM_X86_64";
    case EM_AARCH64:
        return "EM_AARCH64";
    case EM_RISCV:
        return "EM_RISCV";
    case EM_LOONGARCH:
        return "EM_LOONGARCH";
    default:
        return "unknown";
    }
}

/* Our QEMU target for (machine, class, data), or NULL. */
static const char *target_of(unsigned machine, int cls, int data)
{
    if (data != ELFDATA2LSB) {
        return NULL; /* every supported target is little-endian */
    }
    if (machine == EM_X86_64 && cls == ELFCLASS64) {
        return "x86_64";
    }
    if (machine == EM_AARCH64 && cls == ELFCLASS64) {
        return "aarch64";
    }
    if (machine == EM_RISCV && cls == ELFCLASS64) {
        return "riscv64";
    }
    if (machine == EM_MIPS && cls == ELFCLASS32) {
        return "mipsel";
    }
    return NULL;
}

const char *launch_elf_arch(const char *path, char *err, size_t errn)
{
    /* e_ident, e_type, e_machine: same in both classes; up to ELF32's e_flags */
    unsigned char e[40];
    unsigned machine;
    const char *arch;
    ssize_t n;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd < 0) {
        snprintf(err, errn, "%s: %s", path, strerror(errno));
        return NULL;
    }
    n = read(fd, e, sizeof(e));
    close(fd);
    if (n < 0) {
        snprintf(err, errn, "%s: %s", path, strerror(errno));
        return NULL;
    }
    if (n >= 2 && e[0] == '#' && e[1] == '!') {
        /* QEMU runs ELF programs only: the kernel's #! handling is not emulated. */
        snprintf(err, errn,
                 "%s: a script (#!), not an ELF program: trace its interpreter "
                 "(sluice run -- INTERPRETER %s)",
                 path, path);
        return NULL;
    }
    if (n < (ssize_t)sizeof(e) || memcmp(e, ELFMAG, SELFMAG) != 0) {
        snprintf(err, errn, "%s: not an ELF file", path);
        return NULL;
    }
    machine =
        e[EI_DATA] == ELFDATA2MSB ? (unsigned)e[18] << 8 | e[19] : (unsigned)e[19] << 8 | e[18];
    arch = target_of(machine, e[EI_CLASS], e[EI_DATA]);
    if (!arch) {
        snprintf(err, errn, "%s: unsupported ELF machine %u (%s, %d-bit, %s-endian)", path, machine,
                 machine_name(machine), e[EI_CLASS] == ELFCLASS64 ? 64 : 32,
                 e[EI_DATA] == ELFDATA2MSB ? "big" : "little");
    } else if (machine == EM_MIPS && (e[36] & EF_MIPS_ABI2)) { /* e_flags, little-endian */
        snprintf(err, errn, "%s: a MIPS n32 program (EF_MIPS_ABI2): sluice's mipsel runs o32 ones",
                 path);
        arch = NULL;
    }
    return arch;
}

int launch_qemu_path(const char *arch, const char *default_dir, char *path, size_t n, char *err,
                     size_t errn)
{
    const char *dir = getenv("SLUICE_QEMU_DIR");

    if (!dir || !*dir) {
        dir = default_dir;
    }
    if (!dir || !*dir) {
        snprintf(err, errn,
                 "no patched QEMU: set SLUICE_QEMU_DIR or configure with -Dqemu_dir=DIR");
        return -1;
    }
    snprintf(path, n, "%s/bin/qemu-%s", dir, arch);
    if (!is_exec_file(path)) {
        snprintf(err, errn, "%s: %s", path,
                 access(path, F_OK) ? strerror(errno) : "not executable");
        return -1;
    }
    return 0;
}

int launch_jitter_path(const char *default_path, char *path, size_t n, char *err, size_t errn)
{
    const char *p = getenv("SLUICE_JITTER");

    if (!p || !*p) {
        p = default_path;
    }
    if (!p || !*p) {
        snprintf(err, errn, "no jitter library: set SLUICE_JITTER to libsluice-jitter.so");
        return -1;
    }
    snprintf(path, n, "%s", p);
    if (access(path, R_OK) != 0) {
        snprintf(err, errn, "%s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/*
 * SLUICE_* variables configure the sluice command, not the guest: QEMU (and
 * so the guest's environment and /proc/self/environ) never sees them. The
 * jitter gets its configuration in -jitter's argument.
 */
static void hide_sluice_env(void)
{
    extern char **environ;
    char name[256], **e;

    for (e = environ; *e;) {
        size_t len = strcspn(*e, "=");
        if (strncmp(*e, "SLUICE_", 7) == 0 && len < sizeof(name)) {
            memcpy(name, *e, len);
            name[len] = '\0';
            unsetenv(name); /* shifts environ down: look at *e again */
        } else {
            e++;
        }
    }
}

/* SIGPIPE and SIGXFSZ as sluice was started with them (launch_ignore_sigpipe()): the guest's. */
static struct sigaction first_pipe = {.sa_handler = SIG_DFL}, first_xfsz = {.sa_handler = SIG_DFL};

/* Bit k: descriptor k was closed when sluice started (launch_hold_stdio()). */
static unsigned closed_stdio;

int launch_hold_stdio(void)
{
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF) {
            continue;
        }
        /* The lowest free number: fd itself, those below being open. */
        if (open("/dev/null", O_RDWR) != fd) {
            return -1;
        }
        closed_stdio |= 1u << fd;
    }
    return 0;
}

int launch_stdio_closed(int fd)
{
    return fd >= 0 && fd <= 2 && (closed_stdio >> fd & 1);
}

void launch_ignore_sigpipe(void)
{
    struct sigaction ign;

    memset(&ign, 0, sizeof(ign));
    ign.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ign, &first_pipe);
    sigaction(SIGXFSZ, &ign, &first_xfsz);
}

static void child(const char *qemu, const char *jitter, const char *prog, const char *argv0,
                  char *const args[], int consumer_fd, const struct sigaction *old_int,
                  const struct sigaction *old_quit)
{
    size_t n = 0, i;
    char **argv;
    int flags = fcntl(consumer_fd, F_GETFD);

    sigaction(SIGINT, old_int, NULL);
    sigaction(SIGQUIT, old_quit, NULL);
    sigaction(SIGPIPE, &first_pipe, NULL);
    sigaction(SIGXFSZ, &first_xfsz, NULL);
    /* The one descriptor QEMU must inherit; all of ours are close-on-exec. */
    fcntl(consumer_fd, F_SETFD, flags & ~FD_CLOEXEC);
    /* The guest's standard descriptors as sluice got them: closed ones closed. */
    for (int fd = 0; fd <= 2; fd++) {
        if (launch_stdio_closed(fd)) {
            close(fd);
        }
    }
    hide_sluice_env();
    while (args[n]) {
        n++;
    }
    argv = calloc(n + 7, sizeof(*argv));
    if (argv) {
        argv[0] = (char *)qemu;
        argv[1] = "-jitter";
        argv[2] = (char *)jitter;
        /* The guest's argv[0] as typed, as execvp() gives it: QEMU's would be @p prog's path. */
        argv[3] = "-0";
        argv[4] = (char *)argv0;
        argv[5] = (char *)prog;
        for (i = 0; i < n; i++) {
            argv[6 + i] = args[i];
        }
        execv(qemu, argv);
    }
    dprintf(2, "sluice: %s: %s\n", qemu, strerror(errno));
    _exit(127);
}

/* The guest's QEMU, for forwarding termination requests to it. */
static volatile pid_t guest_pid;

/* The session tracing it (launch_watch()), and whether we left the guest's
 * other processes to run on untraced (launch_left_others()). */
static struct sluice_session *volatile watched;
static volatile sig_atomic_t left_others;

/* A termination request was passed on to the guest's QEMU. */
static volatile sig_atomic_t passed_on;

/* Whether the guest's QEMU has ended (not reaped: launch_wait() does that).
 * Async-signal-safe. */
static int guest_ended(void)
{
    siginfo_t si;

    memset(&si, 0, sizeof(si));
    if (waitid(P_PID, (id_t)guest_pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0) {
        return errno == ECHILD; /* reaped already */
    }
    return si.si_pid == guest_pid;
}

/*
 * The guest's own process has ended and a termination request came: stop
 * tracing the processes it forked that outlive it (a daemon, a background
 * job). Untraced, such a request would never reach them and the caller
 * would not wait for them: they run on untraced, the report is written.
 */
static void leave_the_others(void)
{
    if (watched) {
        left_others = 1;
        sluice_session__detach(watched); /* async-signal-safe */
    }
}

/* SIGTERM/SIGHUP to sluice are meant for the guest: pass them on, then let
 * the trace end normally so the report of what ran is still written. */
static void forward_to_guest(int sig)
{
    int saved = errno;

    if (guest_pid > 0 && guest_ended()) {
        leave_the_others();
    } else if (guest_pid > 0) {
        passed_on = 1;
        kill(guest_pid, sig);
    }
    errno = saved;
}

/* The guest's QEMU ended after a termination request was passed on to it:
 * the processes it forked are not waited for either. */
static void on_child(int sig)
{
    int saved = errno;

    (void)sig;
    if (passed_on && guest_pid > 0 && guest_ended()) {
        leave_the_others();
    }
    errno = saved;
}

/*
 * SIGINT/SIGQUIT typed at the terminal reach the guest by themselves (its
 * process group is ours): those, sent by the kernel, are ignored here. One
 * sent to sluice alone by a process (kill, timeout -s INT) is meant for the
 * guest as SIGTERM is: pass it on.
 */
static void forward_if_sent(int sig, siginfo_t *info, void *ctx)
{
    (void)ctx;
    if (info->si_code <= 0) { /* SI_USER, SI_QUEUE, SI_TKILL: a process sent it */
        forward_to_guest(sig);
    } else if (guest_pid > 0 && guest_ended()) {
        leave_the_others(); /* ^C once the guest ended: what is left is not the guest */
    }
}

/* @p old_int, @p old_quit: what sluice started with (an ignored one stays ignored). */
static void forward_signals(const struct sigaction *old_int, const struct sigaction *old_quit)
{
    struct sigaction fwd, sent;

    memset(&fwd, 0, sizeof(fwd));
    fwd.sa_handler = forward_to_guest;
    fwd.sa_flags = SA_RESTART;
    sigaction(SIGTERM, &fwd, NULL);
    sigaction(SIGHUP, &fwd, NULL);
    memset(&sent, 0, sizeof(sent));
    sent.sa_sigaction = forward_if_sent;
    sent.sa_flags = SA_RESTART | SA_SIGINFO;
    if (old_int->sa_handler != SIG_IGN) {
        sigaction(SIGINT, &sent, NULL);
    }
    if (old_quit->sa_handler != SIG_IGN) {
        sigaction(SIGQUIT, &sent, NULL);
    }
    memset(&fwd, 0, sizeof(fwd));
    fwd.sa_handler = on_child;
    fwd.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigaction(SIGCHLD, &fwd, NULL);
}

void launch_watch(struct sluice_session *s)
{
    watched = s;
    if (s && passed_on && guest_pid > 0 && guest_ended()) {
        leave_the_others(); /* it ended before we watched */
    }
}

int launch_left_others(void)
{
    return left_others;
}

pid_t launch_spawn(const char *qemu, const char *jitter_arg, const char *prog, const char *argv0,
                   char *const args[], int consumer_fd, char *err, size_t errn)
{
    struct sigaction ign, old_int, old_quit;
    pid_t pid;

    /* Ignore before fork so no ^C can kill sluice between fork and here;
     * the child restores what we started with. */
    memset(&ign, 0, sizeof(ign));
    ign.sa_handler = SIG_IGN;
    sigaction(SIGINT, &ign, &old_int);
    sigaction(SIGQUIT, &ign, &old_quit);
    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        child(qemu, jitter_arg, prog, argv0, args, consumer_fd, &old_int, &old_quit);
    }
    if (pid < 0) {
        snprintf(err, errn, "fork: %s%s", strerror(errno),
                 errno == EAGAIN ? " (RLIMIT_NPROC: the user's processes and threads)" : "");
        sigaction(SIGINT, &old_int, NULL);
        sigaction(SIGQUIT, &old_quit, NULL);
        return pid;
    }
    guest_pid = pid;
    forward_signals(&old_int, &old_quit);
    return pid;
}

/*
 * Remove the control socket files of process @p pid (ended, not yet reaped:
 * no other process can have its pid) from both places a jitter may have
 * made them (sluice_ctl_dir()). A jitter removes its own when QEMU exits;
 * one killed (a fuzzer's timeout, SIGKILL) cannot, and a campaign of such
 * runs would fill the directory that `sluice ls` reads with dead sockets.
 */
static void forget_socket(pid_t pid)
{
    char dir[108], path[112];
    struct stat st;

    for (int xdg = 1; xdg >= 0; xdg--) {
        if (sluice_ctl_dir(dir, sizeof(dir), xdg) < 0 ||
            sluice_ctl_socket_path(path, sizeof(path) - 4, dir, (uint32_t)pid) < 0) {
            continue;
        }
        if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode)) {
            (void)unlink(path);
        }
        strcat(path, ".new"); /* bound, not yet renamed: killed in between */
        if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode)) {
            (void)unlink(path);
        }
    }
}

int launch_wait(pid_t pid, struct rusage *usage)
{
    struct rusage unused;
    siginfo_t ended;
    int status;

    /* Its end first, unreaped (WNOWAIT): its pid stays taken while its socket goes. */
    while (waitid(P_PID, (id_t)pid, &ended, WEXITED | WNOWAIT) < 0) {
        if (errno != EINTR) {
            return -1;
        }
    }
    forget_socket(pid);
    while (wait4(pid, &status, 0, usage ? usage : &unused) < 0) {
        if (errno != EINTR) {
            return -1;
        }
    }
    return status;
}

void launch_exit_like(int status, int trace_failed)
{
    fflush(NULL);
    if (status != -1 && WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        struct rlimit no_core = {0, 0};
        sigset_t set;

        setrlimit(RLIMIT_CORE, &no_core); /* QEMU already dumped (or not) */
        signal(sig, SIG_DFL);
        sigemptyset(&set);
        sigaddset(&set, sig);
        sigprocmask(SIG_UNBLOCK, &set, NULL);
        kill(getpid(), sig);
        exit(128 + sig); /* a signal that does not kill by default */
    }
    if (status == -1) {
        exit(1);
    }
    if (WEXITSTATUS(status) == 0 && trace_failed) {
        exit(1);
    }
    exit(WEXITSTATUS(status));
}
