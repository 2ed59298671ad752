/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * session.h — what the library's other files may set on a session beyond
 * the public API (sluice/consumer.h).
 */
#ifndef SLUICE_SESSION_H
#define SLUICE_SESSION_H

#include "sluice/consumer.h"

/**
 * sluice_session__run() gives up with -ETIMEDOUT if no WELCOME (or refusal)
 * comes within @p ms milliseconds (default: it waits as long as it takes:
 * `sluice run`'s QEMU may start slowly). For attaching to a running process,
 * which answers at once unless it cannot (no descriptor left). Before run.
 */
void session__welcome_timeout(struct sluice_session *s, int ms);

#endif /* SLUICE_SESSION_H */
