/* SPDX-License-Identifier: GPL-2.0-or-later */
/**
 * @file ctl_io.h
 * @brief Sending and receiving control messages (sluice/ctl.h) on the consumer side.
 */
#ifndef SLUICE_CTL_IO_H
#define SLUICE_CTL_IO_H

#include "sluice/ctl.h"

/**
 * Send HELLO (this protocol version; @p lossless 1 or 0) on @p fd.
 * @return 0 or -errno (never raises SIGPIPE).
 */
int ctl_send_hello(int fd, int lossless);

/**
 * Receive one message from @p fd, blocking; retries on EINTR.
 * @param[out] msg   the message (zeroed on EOF)
 * @param[out] ring_fd the attached file descriptor (close-on-exec), or -1 if
 *                    none came; extra descriptors are closed
 * @return 1 message; 0 end of stream; -EPROTO for a datagram of the wrong
 *         size (its fds are closed); -EMFILE when the kernel dropped
 *         descriptors sent with it (MSG_CTRUNC: this process is at its
 *         RLIMIT_NOFILE); -errno.
 */
int ctl_recv(int fd, struct sluice_ctl_msg *msg, int *ring_fd);

#endif /* SLUICE_CTL_IO_H */
