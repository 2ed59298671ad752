/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * image.h — the guest's mapped images (files it mmap'ed: the main
 * executable, the dynamic loader, shared libraries), for filters that ask
 * "which image holds this pc".
 *
 * Fed by QEMU's mmap/munmap notifications (mmap_lock held), read at lift
 * time (mmap_lock held too); a mutex all the same, so helpers called from
 * any thread are safe. Image ids are stable for the life of the process: 0
 * is the main executable (matched by device and inode with the path QEMU
 * was given), others are numbered from 1 in the order they first appear.
 */
#ifndef SLUICE_JITTER_IMAGE_H
#define SLUICE_JITTER_IMAGE_H

#include <stdint.h>

#include <sluice/filter.h>

/**
 * Remember the main executable: the image whose file has the same device
 * and inode as @p exe_path. Main thread, at init, before any mmap.
 * @return 0, or a negative errno if @p exe_path cannot be stat'ed (then no
 *         image is the main executable).
 */
int image_init(const char *exe_path);

/**
 * The guest mapped [start, start + len) (bytes) from @p fd at @p offset
 * (bytes), or anonymous memory when @p fd < 0: forget what was there, then
 * remember the file mapping. @p fd must be open during the call.
 */
void image_mmap(uint64_t start, uint64_t len, int fd, uint64_t offset);

/** The guest unmapped [start, start + len). */
void image_munmap(uint64_t start, uint64_t len);

/**
 * The image holding guest address @p pc.
 * @param[out] out  id, base (lowest mapped address of that file), offset
 *                  (pc - base) and flags (SLUICE_IMAGE_MAIN)
 * @param[out] path the file's path (borrowed until the next image_* call);
 *                  may be NULL
 * @return 0, or -ENOENT if no image holds pc.
 */
int image_of(uint64_t pc, struct sluice_image *out, const char **path);

#endif /* SLUICE_JITTER_IMAGE_H */
