/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ctl_io.c — control socket I/O for the consumer (see ctl_io.h).
 *
 * Runs on the thread calling sluice_session__new()/__run(). Everything the
 * peer sends is checked for size; descriptors we did not ask for are closed
 * so a misbehaving jitter cannot make us leak fds.
 */
#include "ctl_io.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int ctl_send_hello(int fd, int lossless)
{
    struct sluice_ctl_msg m;

    memset(&m, 0, sizeof(m));
    m.type = SLUICE_CTL_HELLO;
    m.version = SLUICE_CTL_VERSION;
    m.lossless = lossless ? 1 : 0;
    while (send(fd, &m, sizeof(m), MSG_NOSIGNAL) < 0) {
        if (errno != EINTR) {
            return -errno;
        }
    }
    return 0;
}

/* Collect SCM_RIGHTS descriptors: keep the first in *ring_fd, close the rest. */
static void take_fds(struct msghdr *mh, int *ring_fd)
{
    struct cmsghdr *cm;

    for (cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
        size_t n, i;
        int fds[8];

        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) {
            continue;
        }
        n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        if (n > 8) {
            n = 8; /* cannot happen: the buffer holds 8 */
        }
        memcpy(fds, CMSG_DATA(cm), n * sizeof(int));
        for (i = 0; i < n; i++) {
            if (*ring_fd < 0) {
                *ring_fd = fds[i];
            } else {
                close(fds[i]);
            }
        }
    }
}

int ctl_recv(int fd, struct sluice_ctl_msg *msg, int *ring_fd)
{
    union {
        char buf[CMSG_SPACE(8 * sizeof(int))];
        struct cmsghdr align;
    } ctrl;
    struct iovec iov = {msg, sizeof(*msg)};
    struct msghdr mh;
    ssize_t n;

    *ring_fd = -1;
    memset(msg, 0, sizeof(*msg));
    memset(&mh, 0, sizeof(mh));
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = ctrl.buf;
    mh.msg_controllen = sizeof(ctrl.buf);
    do {
        n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
        return -errno;
    }
    take_fds(&mh, ring_fd);
    if (n == 0 && *ring_fd < 0) {
        return 0;
    }
    if ((size_t)n != sizeof(*msg) || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
        if (*ring_fd >= 0) {
            close(*ring_fd);
            *ring_fd = -1;
        }
        /* Our buffer holds 8 descriptors and the jitter sends 1: a cut
         * means the kernel could not install it here (out of descriptors). */
        return (mh.msg_flags & MSG_CTRUNC) && (size_t)n == sizeof(*msg) ? -EMFILE : -EPROTO;
    }
    return 1;
}
