/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * file_id.c — a file's identity (file_id.h): stat, and its ELF build-id
 * from the PT_NOTE segments through libelf.
 *
 * Any thread. Must never block on a path that is not a regular file, nor
 * trust the file: libelf bounds every read.
 */
#include "file_id.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The build-id in the notes of @p elf, into @p out (id, id_len). */
static void build_id(Elf *elf, struct sluice_tf_file *out)
{
    size_t n = 0, i;

    if (elf_kind(elf) != ELF_K_ELF || elf_getphdrnum(elf, &n) != 0) {
        return;
    }
    for (i = 0; i < n && out->id_len == 0; i++) {
        GElf_Phdr ph;
        Elf_Data *d;
        GElf_Nhdr nh;
        size_t at = 0, name_at, desc_at;

        if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_NOTE ||
            !(d = elf_getdata_rawchunk(elf, (int64_t)ph.p_offset, ph.p_filesz, ELF_T_NHDR))) {
            continue;
        }
        while ((at = gelf_getnote(d, at, &nh, &name_at, &desc_at)) > 0) {
            if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
                memcmp((const char *)d->d_buf + name_at, "GNU", 4) == 0 && nh.n_descsz > 0 &&
                nh.n_descsz <= sizeof(out->id)) {
                memcpy(out->id, (const char *)d->d_buf + desc_at, nh.n_descsz);
                out->id_len = (uint8_t)nh.n_descsz;
                break;
            }
        }
    }
}

/* @p t in ns since the epoch, as struct sluice_tf_file and the module log keep times. */
static int64_t ns(struct timespec t)
{
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

int file_id__get(const char *path, struct sluice_tf_file *out)
{
    struct stat st;
    Elf *elf;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY), err;

    memset(out, 0, sizeof(*out));
    if (fd < 0) {
        return -errno;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        err = fstat(fd, &st) != 0 ? -errno : -EINVAL;
        close(fd);
        return err;
    }
    out->size = (uint64_t)st.st_size;
    out->mtime_ns = ns(st.st_mtim);
    if (elf_version(EV_CURRENT) != EV_NONE && (elf = elf_begin(fd, ELF_C_READ_MMAP, NULL))) {
        build_id(elf, out);
        elf_end(elf);
    }
    close(fd);
    return 0;
}

int file_id__changed(const struct sluice_tf_file *then, const struct sluice_tf_file *now, char *why,
                     size_t n)
{
    if (then->id_len && now->id_len) {
        if (then->id_len == now->id_len && memcmp(then->id, now->id, then->id_len) == 0) {
            return 0;
        }
        snprintf(why, n, "its ELF build-id differs from the recorded file's");
        return 1;
    }
    if (then->size != now->size) {
        snprintf(why, n, "it was %llu bytes when recorded, %llu now",
                 (unsigned long long)then->size, (unsigned long long)now->size);
        return 1;
    }
    if (then->mtime_ns != now->mtime_ns) {
        snprintf(why, n, "its modification time differs from the recorded file's");
        return 1;
    }
    return 0;
}

int file_id__mapped_changed(const struct sluice_map_entry *then, const char *path, char *why,
                            size_t n)
{
    struct stat st;

    if (stat(path, &st) != 0) {
        /* "gone" first: consumer.h promises it (cov tells gone from replaced by it) */
        snprintf(why, n, "gone since the guest mapped it: %s", strerror(errno));
        return 1;
    }
    if ((uint64_t)st.st_dev != then->dev || (uint64_t)st.st_ino != then->ino) {
        snprintf(why, n, "replaced since the guest mapped it: another file is at that path");
        return 1;
    }
    if ((uint64_t)st.st_size != then->size || ns(st.st_mtim) != then->mtime_ns ||
        ns(st.st_ctim) != then->ctime_ns) {
        /* A write sets the change time; a modification time set back (cp -p) does not undo it. */
        snprintf(why, n,
                 "rewritten or changed since the guest mapped it (its size, modification "
                 "or change time)");
        return 1;
    }
    return 0;
}
