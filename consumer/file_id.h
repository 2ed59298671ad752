/* SPDX-License-Identifier: GPL-2.0-or-later */
/**
 * @file file_id.h
 * @brief What a file is, to tell later whether the file at the same path is
 *        still it: its size, its modification time and its ELF build-id
 *        (NT_GNU_BUILD_ID, read with libelf), as a trace file's FILES frame
 *        keeps them (sluice/trace_file.h); or its inode, size and time, as
 *        the module log says the guest mapped it (sluice/record.h).
 *
 * Any thread; no state. Never reads more of a file than its program headers
 * and notes, and never blocks on one (a FIFO put at the path is not read).
 */
#ifndef SLUICE_FILE_ID_H
#define SLUICE_FILE_ID_H

#include <stddef.h>

#include "sluice/record.h"
#include "sluice/trace_file.h"

/**
 * The identity of the regular file at @p path now, into @p out (path_len
 * left 0: the caller sets it).
 * @return 0, or -errno (-ENOENT gone, -EACCES, -EINVAL not a regular file).
 */
int file_id__get(const char *path, struct sluice_tf_file *out);

/**
 * Whether @p now is not the file @p then was: their build-ids differ when
 * both have one; else their sizes or modification times differ.
 * @return 1 with the difference in @p why (@p n bytes: "its build-id
 *         differs", "its size was 1234 bytes, now 5678", "modified since"),
 *         else 0.
 */
int file_id__changed(const struct sluice_tf_file *then, const struct sluice_tf_file *now, char *why,
                     size_t n);

/**
 * Whether the file at @p path now is not the one a guest mapped, as its
 * module log entry @p then says (sluice/record.h, format 11: st_dev and
 * st_ino, st_size, st_mtim and st_ctim when it was mapped): replaced
 * (another file there, as a rename or a copy over a new file leaves),
 * rewritten in place (even with its modification time set back: the change
 * time says so; so does a chmod, a chown or a new hard link), or gone.
 * @return 1 with the difference in @p why (@p n bytes: "replaced since the
 *         guest mapped it", "rewritten or changed since ...", "gone: No such
 *         file or directory"), else 0.
 */
int file_id__mapped_changed(const struct sluice_map_entry *then, const char *path, char *why,
                            size_t n);

#endif /* SLUICE_FILE_ID_H */
