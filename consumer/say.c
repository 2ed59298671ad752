/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * say.c — one-line messages (say.h), of the sluice command and of the
 * jitter. Any thread; writes only stderr (say) or the caller's buffer
 * (say_shown); allocates nothing.
 */
#include "say.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int is_control(char c)
{
    return (unsigned char)c < 0x20 || c == 0x7f;
}

const char *say_shown(const char *s, char *buf, size_t size)
{
    size_t i = 0;

    for (; s && *s && i + 1 < size; s++) {
        buf[i++] = is_control(*s) ? '?' : *s;
    }
    buf[i] = 0;
    return buf;
}

void say(const char *fmt, ...)
{
    char buf[4096];
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
        if (is_control(buf[i]) && !(buf[i] == '\n' && i + 1 == n)) {
            buf[i] = '?';
        }
    }
    if ((size_t)len >= sizeof(buf) && *fmt && fmt[strlen(fmt) - 1] == '\n') {
        buf[n - 1] = '\n'; /* cut: still a whole line */
    }
    fputs(buf, stderr);
}
