/* SPDX-License-Identifier: GPL-2.0-or-later */
/**
 * @file say.h
 * @brief The jitter's one-line messages on QEMU's stderr.
 *
 * They name paths (a filter's, from `-jitter ...,filter=`) and text made
 * from them (the filter loader's errors): a newline or a terminal escape
 * there would break a line in two or reach the terminal.
 */
#ifndef SLUICE_JITTER_SAY_H
#define SLUICE_JITTER_SAY_H

/**
 * Write printf(@p fmt, ...) to stderr with each control character (bytes
 * 0x01..0x1f and 0x7f) but a final newline shown as '?', in one stdio
 * call; cut at 2 KiB. Any thread, also a forked child's; allocates nothing.
 */
void jitter_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
