/* SPDX-License-Identifier: GPL-2.0-or-later */
/**
 * @file say.h
 * @brief One-line messages on stderr: the sluice command's, and the
 *        jitter's in QEMU (jitter/meson.build builds say.c into both).
 *
 * A message names user paths (the program, a filter, -o, --record, a trace
 * file) and text made from them (precheck.c's, the library's and the filter
 * loader's errors): a newline or a terminal escape in a path would break
 * the line in two or reach the terminal. say() shows every control
 * character of the message as '?', but for one newline that ends it.
 */
#ifndef SLUICE_SAY_H
#define SLUICE_SAY_H

#include <stddef.h>

/**
 * Write printf(@p fmt, ...) to stderr with each control character (bytes
 * 0x01..0x1f and 0x7f) but a final newline shown as '?', in one stdio call.
 * A message of more than 4 KiB is cut there. Any thread; also in a child
 * between fork and exec (it allocates nothing). Errors writing stderr are
 * ignored (there is nowhere left to say them).
 */
void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/**
 * @p s with each control character shown as '?', into @p buf (@p size
 * bytes, size > 0; cut to fit, NUL-terminated): for a name or message the
 * guest or a user chose (a program's name, a path in an error) written
 * where say() does not go, such as a report on stdout. @return @p buf.
 * Any thread.
 */
const char *say_shown(const char *s, char *buf, size_t size);

#endif
