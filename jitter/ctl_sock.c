/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ctl_sock.c — the socket a traced process listens on for consumers
 * (include/sluice/ctl.h: sluice_ctl_dir(), sluice_ctl_socket_path()).
 *
 * Owns the socket's file: it is made in a directory private to this user
 * (mode 0700, ours, checked, never followed through a link), appears
 * only once it listens (bound under a temporary name, then renamed),
 * replaces a stale file of the same pid (a process of that pid that was
 * killed or exec'd: only one live process has our pid), and is unlinked
 * when this process ends. Threads: ctl_sock_listen() and ctl_sock_unlink() at init,
 * fork and exit; ctl_sock_accept() on the control thread. Never on the fast
 * path; never blocks (the socket is non-blocking).
 */
#include "ctl_sock.h"

#include "fds.h"
#include "ids.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <sluice/ctl.h>
#include <sluice/record.h>

/* The socket file this process made, "" if none. */
static char sock_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
static uint32_t sock_pid;

/* Make (or check) the directory: ours, a directory, nobody else's to enter. */
static int private_dir(const char *dir, char *why, size_t n)
{
    struct stat st;

    if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
        snprintf(why, n, "cannot create %s: %s", dir, strerror(errno));
        return -1;
    }
    if (lstat(dir, &st) < 0) {
        snprintf(why, n, "%s: %s", dir, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077)) {
        snprintf(why, n, "%s is not a directory of uid %u that only it may enter (mode 0700)", dir,
                 (unsigned)geteuid());
        return -1;
    }
    return 0;
}

int ctl_sock_listen(char *why, size_t n)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    char dir[sizeof(a.sun_path)], path[sizeof(a.sun_path)];
    int fd;

    /* Bound as PATH.new, renamed to PATH once listening (see below): room for ".new". An
     * XDG_RUNTIME_DIR too long for that: the /tmp place, where consumers look next. */
    for (int xdg = 1;; xdg--) {
        if (sluice_ctl_dir(dir, sizeof(dir), xdg) == 0 &&
            sluice_ctl_socket_path(path, sizeof(path) - 4, dir, ids_pid(NULL)) == 0) {
            break;
        }
        if (xdg == 0) {
            snprintf(why, n, "the socket's path is longer than %zu bytes", sizeof(a.sun_path) - 5);
            return -1;
        }
    }
    memcpy(a.sun_path, path, strlen(path));
    memcpy(a.sun_path + strlen(path), ".new", 5); /* fits: path is at most 103 bytes long */
    if (private_dir(dir, why, n) < 0) {
        return -1;
    }
    fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        snprintf(why, n, "socket: %s", strerror(errno));
        return -1;
    }
    /*
     * PATH appears only once it listens: a consumer that connects as soon
     * as it sees the file (sluice attach, a script polling for it) must not
     * find it refusing, as a stale socket does. A PATH or PATH.new there
     * already is stale: its process had our pid, so it is gone.
     */
    (void)unlink(a.sun_path);
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, SLUICE_MAX_CONSUMERS) < 0 ||
        rename(a.sun_path, path) < 0) {
        snprintf(why, n, "%s: %s", a.sun_path, strerror(errno));
        (void)unlink(a.sun_path);
        close(fd);
        return -1;
    }
    memcpy(sock_path, path, sizeof(sock_path));
    sock_pid = ids_pid(NULL);
    return fd;
}

int ctl_sock_accept(int listen_fd, uint32_t *uid)
{
    struct ucred cred;
    socklen_t len = sizeof(cred);
    int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);

    if (fd < 0) {
        return -1;
    }
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || len != sizeof(cred)) {
        close(fd);
        return -1;
    }
    *uid = (uint32_t)cred.uid;
    return fd;
}

void ctl_sock_unlink(void)
{
    /* Only the process that made it: a forked child made its own. */
    if (sock_path[0] && sock_pid == ids_pid(NULL)) {
        (void)fds_unlink(sock_path); /* from the root QEMU started in: the guest may chroot */
    }
    sock_path[0] = '\0';
}
