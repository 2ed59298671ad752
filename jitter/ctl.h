/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ctl.h — the jitter's consumer registry and control socket (protocol: ctl.h
 * in include/sluice).
 *
 * Today one consumer attaches, through the socket inherited from `sluice run`
 * (the jitter's consumer_fd option). The registry is an array of SLUICE_MAX_CONSUMERS
 * slots, matching the per-consumer tail slots of every ring header, so more
 * consumers (and runtime attach/detach) slot in without a format change.
 */
#ifndef SLUICE_JITTER_CTL_H
#define SLUICE_JITTER_CTL_H

#include "ring.h"

/**
 * Main thread, at jitter init: attach the consumer on the inherited socket
 * @p fd, if >= 0 (move it out of the guest's way, read its HELLO, answer
 * WELCOME), and start the monitor thread that notices its death.
 * @return 0, or -errno after one line on stderr.
 */
int ctl_init(const char *arch, int fd);

/** vCPU, new ring: enable its consumer slots and send the arena and its offset to each consumer. */
void ctl_announce(struct ring *r);

/** Child after fork: the monitor thread did not survive fork; start a new one. */
void ctl_after_fork_child(void);

#endif /* SLUICE_JITTER_CTL_H */
