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

#include <limits.h>
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
 * The guest moved the mapping at [old_start, old_start + old_len) to
 * [start, start + len) (mremap; the same start when it grew or shrank in
 * place): what was at either range is forgotten, then the file mapping
 * found at old_start, if any, is remembered at the new range.
 */
void image_mremap(uint64_t old_start, uint64_t old_len, uint64_t start, uint64_t len);

/** Where a guest address comes from in its file (image_file_at). */
struct image_file {
    uint32_t id;         /**< image id, as image_of() gives it */
    uint64_t base;       /**< its load's base (image_of()) */
    uint64_t offset;     /**< file offset of the address */
    uint64_t dev, ino;   /**< the file's st_dev and st_ino */
    uint64_t size;       /**< its st_size when this mapping was made */
    int64_t mtime_ns;    /**< its st_mtim then, ns */
    int64_t ctime_ns;    /**< its st_ctim then, ns */
    char path[PATH_MAX]; /**< the file's path as the host saw it when first mapped */
};

/**
 * Where guest address @p addr comes from: image id, the file's base and
 * the file offset of @p addr (image_file_at() without the path).
 * @return 0, or -ENOENT (anonymous or unmapped: the outputs are unchanged).
 */
int image_source_at(uint64_t addr, uint32_t *id, uint64_t *base, uint64_t *offset);

/**
 * The file mapping that holds guest address @p addr.
 * @return 0 with @p out filled, or -ENOENT (anonymous or unmapped).
 */
int image_file_at(uint64_t addr, struct image_file *out);

/**
 * The image holding guest address @p pc.
 * @param[out] out  id, base (of pc's load of the file: record.h's struct
 *                  sluice_map_entry), offset (pc - base) and flags
 *                  (SLUICE_IMAGE_MAIN)
 * @param[out] path the file's path (borrowed until the next image_* call);
 *                  may be NULL
 * @return 0, or -ENOENT if no image holds pc.
 */
int image_of(uint64_t pc, struct sluice_image *out, const char **path);

#endif /* SLUICE_JITTER_IMAGE_H */
