/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * tools/shown.c — a guest's path as the tools' one-line messages show it
 * (tools.h: tool_shown). Any thread; writes only the caller's buffer.
 */
#include "tools.h"

const char *tool_shown(const char *s, char *buf, size_t size)
{
    size_t i = 0;

    for (; s && *s && i + 1 < size; s++) {
        buf[i++] = (unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s;
    }
    buf[size ? i : 0] = 0;
    return buf;
}
