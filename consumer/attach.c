/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * attach.c — finding traced processes: connect to one's control socket
 * (sluice_session__attach), ask one what it is (sluice_process__query),
 * list this user's (sluice_process__list).
 *
 * Any thread; nothing here touches a session's state. Only a directory
 * that is ours and private (mode 0700, as the jitter makes it) is trusted,
 * and only a listener of our own uid (SO_PEERCRED): another user could
 * have made /tmp/sluice-<uid> first and listen there. A socket whose
 * process is gone (ECONNREFUSED: killed, or exec'd; or one that broke the
 * connection while asked and no longer exists) is stale: skipped,
 * never removed here (its pid may be listening anew by the time we would;
 * the jitter replaces it when it binds). A listing asks every process at
 * once and gives them QUERY_MS in all; one that does not answer in time, or
 * that cannot be asked (a directory not private, a listener of another uid,
 * no descriptor left), is listed with why, never left out in silence.
 */
#include "sluice/consumer.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "ctl_io.h"
#include "session.h"
#include "sluice/ctl.h"

/* How long a traced process may take to answer QUERY. */
#define QUERY_MS 2000

/* Whether @p dir is a directory of ours that only we may enter; else -EPERM. */
static int private_dir(const char *dir)
{
    struct stat st;

    if (lstat(dir, &st) < 0) {
        return -errno;
    }
    return S_ISDIR(st.st_mode) && st.st_uid == geteuid() && !(st.st_mode & 077) ? 0 : -EPERM;
}

/*
 * Connect to @p path, in a private directory @p dir, and check that the
 * listener runs as us; the fd, or -errno (EPERM: a directory or listener
 * not ours).
 */
static int connect_path(const char *dir, const char *path)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    struct ucred cred;
    socklen_t len = sizeof(cred);
    int fd, err = private_dir(dir);

    if (err < 0) {
        return err;
    }
    if (strlen(path) >= sizeof(a.sun_path)) {
        return -ENAMETOOLONG;
    }
    strcpy(a.sun_path, path);
    fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -errno;
    }
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        err = -errno;
        close(fd);
        return err;
    }
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || len != sizeof(cred) ||
        cred.uid != geteuid()) {
        close(fd);
        return -EPERM;
    }
    return fd;
}

/* Connect to @p pid's socket, in the XDG place first, then the /tmp one. */
static int connect_pid(uint32_t pid)
{
    char dir[108], path[108];
    int xdg, fd = -ENOENT, err;

    for (xdg = 1; xdg >= 0; xdg--) {
        if (sluice_ctl_dir(dir, sizeof(dir), xdg) < 0 ||
            sluice_ctl_socket_path(path, sizeof(path), dir, pid) < 0) {
            continue;
        }
        err = connect_path(dir, path);
        if (err >= 0) {
            return err;
        }
        if (fd == -ENOENT) {
            fd = err; /* the most telling error: refused beats missing */
        }
    }
    return fd;
}

struct sluice_session *sluice_session__attach(uint32_t pid, const struct sluice_callbacks *cb,
                                              const struct sluice_consumer_opts *opts)
{
    int fd = connect_pid(pid);

    struct sluice_session *s;

    if (fd < 0) {
        errno = -fd;
        return NULL;
    }
    s = sluice_session__new(fd, cb, opts);
    if (s) {
        session__welcome_timeout(s, QUERY_MS * 5);
    }
    return s;
}

/* Send QUERY on @p fd; 0 or -errno. */
static int send_query(int fd)
{
    struct sluice_ctl_msg m = {.type = SLUICE_CTL_QUERY, .version = SLUICE_CTL_VERSION};

    return send(fd, &m, sizeof(m), MSG_NOSIGNAL) == (ssize_t)sizeof(m) ? 0 : -errno;
}

/* Read the INFO that answers a QUERY on @p fd into @p info; 0 or -errno. */
static int read_info(int fd, struct sluice_process_info *info)
{
    struct sluice_ctl_msg m;
    int ring_fd = -1, n = ctl_recv(fd, &m, &ring_fd);

    if (ring_fd >= 0) {
        close(ring_fd);
    }
    if (n <= 0) {
        return n == 0 ? -EPROTO : n;
    }
    if (m.type != SLUICE_CTL_INFO || m.version != SLUICE_CTL_VERSION) {
        return m.type == SLUICE_CTL_REFUSED ? -EACCES : -EPROTO;
    }
    memset(info, 0, sizeof(*info));
    info->pid = m.pid;
    memcpy(info->arch, m.arch, sizeof(info->arch) - 1);
    memcpy(info->comm, m.comm, sizeof(info->comm) - 1);
    info->threads = m.threads;
    info->consumers = m.consumers;
    info->lossless = m.lossless_consumers;
    info->waiting = m.waiting;
    info->lost = m.lost;
    return 0;
}

/*
 * Whether process @p pid, whose connection broke with @p err while it was
 * asked (a reset, a broken pipe, or an end of stream: -EPROTO), has ended
 * meanwhile: then it is as stale as a socket nobody listens on.
 */
static int ended_while_asked(uint32_t pid, int err)
{
    if (err != -EPIPE && err != -ECONNRESET && err != -EPROTO) {
        return 0;
    }
    return kill((pid_t)pid, 0) < 0 && errno == ESRCH;
}

/* Send QUERY on @p fd and read INFO into @p info; 0 or -errno. Closes @p fd. */
static int query_fd(int fd, struct sluice_process_info *info)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int n = send_query(fd);

    if (n == 0) {
        n = poll(&p, 1, QUERY_MS) == 1 ? read_info(fd, info) : -ETIMEDOUT;
    }
    close(fd);
    return n;
}

int sluice_process__query(uint32_t pid, struct sluice_process_info *info)
{
    int fd = connect_pid(pid);

    return fd < 0 ? fd : query_fd(fd, info);
}

static int by_pid(const void *a, const void *b)
{
    const struct sluice_process_info *x = a, *y = b;

    return x->pid < y->pid ? -1 : x->pid > y->pid;
}

/* Whether @p pid is in @p list[0..n) already (both directories may name it). */
static int listed(const struct sluice_process_info *list, size_t n, uint32_t pid)
{
    for (size_t i = 0; i < n; i++) {
        if (list[i].pid == pid) {
            return 1;
        }
    }
    return 0;
}

/* Queries asked at once by a listing: their descriptors are ours meanwhile. */
#define LIST_BATCH 64

/* One process a listing asks about. */
struct asked {
    uint32_t pid;
    int fd; /* or -errno from connecting */
};

/*
 * Ask the @p n processes of @p a at once, and give each 2 s in all to
 * answer: into @p out from index @p at (up to @p max), one entry each but
 * for stale sockets (their process is gone). Closes every descriptor.
 * Returns the new count.
 */
static size_t ask_batch(struct asked *a, size_t n, struct sluice_process_info *out, size_t max,
                        size_t at)
{
    struct pollfd p[LIST_BATCH];
    int err[LIST_BATCH];
    size_t i, of[LIST_BATCH], np = 0, left;

    for (i = 0; i < n; i++) {
        err[i] = a[i].fd < 0 ? a[i].fd : send_query(a[i].fd);
        if (err[i] == 0) {
            /* Only open descriptors: poll() refuses more than RLIMIT_NOFILE entries. */
            of[np] = i;
            p[np++] = (struct pollfd){.fd = a[i].fd, .events = POLLIN};
        }
    }
    left = np;
    for (int waited = 0; left > 0 && waited < QUERY_MS; waited += 50) {
        if (poll(p, np, 50) <= 0) {
            continue;
        }
        for (size_t k = 0; k < np; k++) {
            if (p[k].fd >= 0 && p[k].revents) {
                i = of[k];
                err[i] = read_info(a[i].fd, at < max ? &out[at] : &(struct sluice_process_info){0});
                err[i] = err[i] == 0 ? 1 : err[i]; /* 1: answered, into out[at] */
                p[k].fd = -1;
                left--;
                at += err[i] == 1;
            }
        }
    }
    for (i = 0; i < n; i++) {
        if (a[i].fd >= 0) {
            close(a[i].fd);
        }
        if (err[i] == 1 || err[i] == -ECONNREFUSED || err[i] == -ENOENT ||
            ended_while_asked(a[i].pid, err[i])) {
            continue; /* answered, or stale (gone: killed, or exec'd) */
        }
        if (at < max) {
            memset(&out[at], 0, sizeof(out[at]));
            out[at].pid = a[i].pid;
            out[at].error = err[i] == 0 ? -ETIMEDOUT : err[i];
        }
        at++;
    }
    return at;
}

/* Ask the processes whose sockets are in directory @p dir into @p out (from index @p n). */
static size_t list_dir(const char *dir, struct sluice_process_info *out, size_t max, size_t n)
{
    DIR *d = opendir(dir);
    struct asked a[LIST_BATCH];
    size_t k = 0;
    struct dirent *e;

    while (d && (e = readdir(d)) != NULL) {
        char path[108], *end;
        unsigned long pid = strtoul(e->d_name, &end, 10);

        if (end == e->d_name || strcmp(end, ".sock") != 0 || pid == 0 || pid > UINT32_MAX ||
            sluice_ctl_socket_path(path, sizeof(path), dir, (uint32_t)pid) < 0 ||
            listed(out, n < max ? n : max, (uint32_t)pid)) {
            continue;
        }
        a[k].pid = (uint32_t)pid;
        a[k].fd = connect_path(dir, path);
        if (a[k].fd == -ECONNREFUSED || a[k].fd == -ENOENT) {
            continue; /* stale (its process is gone), or gone meanwhile: not listed */
        }
        if (++k == LIST_BATCH) {
            n = ask_batch(a, k, out, max, n);
            k = 0;
        }
    }
    if (d) {
        closedir(d);
    }
    return ask_batch(a, k, out, max, n);
}

int sluice_process__list(struct sluice_process_info *out, size_t max)
{
    char xdg_dir[108], tmp_dir[108];
    size_t n = 0;

    xdg_dir[0] = '\0';
    if (sluice_ctl_dir(xdg_dir, sizeof(xdg_dir), 1) == 0) {
        n = list_dir(xdg_dir, out, max, n);
    }
    if (sluice_ctl_dir(tmp_dir, sizeof(tmp_dir), 0) == 0 && strcmp(tmp_dir, xdg_dir) != 0) {
        n = list_dir(tmp_dir, out, max, n);
    }
    qsort(out, n < max ? n : max, sizeof(*out), by_pid);
    return n > INT32_MAX ? INT32_MAX : (int)n;
}
