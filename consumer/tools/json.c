/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * tools/json.c — JSON strings and the "error" field of the tools' --json
 * output (RFC 8259). Main thread, after the session; writes only to the
 * stream it is given.
 */
#include "tools.h"

void tool_json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;

        if (c == '"' || c == '\\') {
            fprintf(f, "\\%c", c);
        } else if (c < 0x20 || c >= 0x7f) {
            fprintf(f, "\\u%04x", c); /* comm is bytes, not UTF-8: escape them */
        } else {
            fputc(c, f);
        }
    }
    fputc('"', f);
}

void tool_json_error(FILE *f, const char *error)
{
    fprintf(f, "\"error\": ");
    if (error && error[0]) {
        tool_json_str(f, error);
    } else {
        fprintf(f, "null");
    }
}
