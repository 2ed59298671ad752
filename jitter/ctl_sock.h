/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ctl_sock.h — the socket this traced process listens on for consumers
 * (`<dir>/<pid>.sock`, include/sluice/ctl.h). The registry (ctl.c) decides
 * what to do with a connection; this file only makes, accepts and removes.
 */
#ifndef SLUICE_JITTER_CTL_SOCK_H
#define SLUICE_JITTER_CTL_SOCK_H

#include <stddef.h>
#include <stdint.h>

/**
 * Listen on this process's socket (directory made or checked: ours, mode
 * 0700; a stale file of our pid replaced). Main thread at init, or the
 * child after fork.
 * @param[out] why the reason on failure, NUL-terminated, @p n bytes
 * @return the listening descriptor (non-blocking, close-on-exec), or -1.
 */
int ctl_sock_listen(char *why, size_t n);

/**
 * Accept one connection on @p listen_fd (close-on-exec, blocking).
 * Control thread.
 * @param[out] uid the peer's uid (SO_PEERCRED, as it was at connect())
 * @return the connected descriptor, or -1 (none pending, or it went away).
 */
int ctl_sock_accept(int listen_fd, uint32_t *uid);

/** Remove the socket file if this process made it (a forked child never removes its parent's). */
void ctl_sock_unlink(void);

#endif /* SLUICE_JITTER_CTL_SOCK_H */
