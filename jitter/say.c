/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * say.c — the jitter's one-line messages (say.h). Any thread; writes only
 * stderr, from a buffer on the caller's stack; never on the fast path.
 */
#include "say.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void jitter_say(const char *fmt, ...)
{
    char buf[2048];
    va_list ap;
    size_t n;
    int len;

    va_start(ap, fmt);
    len = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (len < 0) {
        return;
    }
    n = strlen(buf);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)buf[i];

        if ((c < 0x20 || c == 0x7f) && !(c == '\n' && i + 1 == n)) {
            buf[i] = '?';
        }
    }
    if ((size_t)len >= sizeof(buf) && *fmt && fmt[strlen(fmt) - 1] == '\n') {
        buf[n - 1] = '\n'; /* cut: still a whole line */
    }
    fputs(buf, stderr);
}
