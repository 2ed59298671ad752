/* SPDX-License-Identifier: GPL-2.0-or-later */
/**
 * @file tf_read.h
 * @brief Reading a trace file (sluice/trace_file.h): its frames' places,
 *        then any frame's payload, checked.
 *
 * One thread at a time (the session's main thread, or `sluice report
 * --info`). A file is never trusted: every size is checked before it is
 * used, a damaged or cut frame yields a one-line reason naming it, and the
 * frames before it still read.
 */
#ifndef SLUICE_TF_READ_H
#define SLUICE_TF_READ_H

#include <stddef.h>
#include <stdint.h>

#include "sluice/trace_file.h"

/** One frame's place and header. */
struct tf_ref {
    uint64_t offset;          /**< where its header starts */
    struct sluice_tf_frame h; /**< its header as read; if bad, only type, stream and arg[0] */
    int bad; /**< the INDEX lists it but its header is damaged: h is the index's word */
    /** A CHUNK listed by the INDEX: its thread's exec events before it; else UINT64_MAX. */
    uint64_t insns;
};

/** An open trace file. Fields are private but for those documented. */
struct tf_reader {
    int fd;
    char path[256];
    uint64_t size;                /**< the file's bytes */
    struct tf_ref *ref;           /**< its frames, in file order (a scan stops at a bad one) */
    size_t n;                     /**< frames in ref */
    char cut[256];                /**< why the frames stop before the file's end, or "" */
    struct sluice_tf_frame cut_h; /**< the header where they stop, as read (maybe garbage) */
    void *dctx;                   /**< zstd decompression context */
    uint8_t *buf;                 /**< a stored payload */
    size_t buf_cap;
};

/**
 * Open @p path and list its frames: from its INDEX when the trailer and
 * index are whole and its frames tile the file (a frame whose header is
 * damaged is then listed `bad`, and the ones after it still are), else by
 * reading every header from the start (stopping at the first that is not
 * a frame, or that the file's end cuts short; r->cut says which). The
 * first frame must be FILE, of this version.
 * @return 0, or -errno with a one-line reason naming @p path in @p err.
 */
int tf_reader__open(struct tf_reader *r, const char *path, char *err, size_t errlen);

/**
 * Read frame @p i's payload into @p dst (room for @p cap bytes),
 * decompressed, after checking its crc.
 * @param[out] len the payload's bytes
 * @return 0, or -EPROTO (damaged: why in @p err, which the caller prefixes
 *         with the frame's name), -EMSGSIZE (larger than @p cap), -ENOMEM,
 *         -errno of pread.
 */
int tf_reader__payload(struct tf_reader *r, size_t i, void *dst, size_t cap, size_t *len, char *err,
                       size_t errlen);

/**
 * A frame's payload as stored, read and checked (crc) by the reading
 * thread and decompressed by a worker (tf_packed__unpack()): the
 * decompression, the costly part, runs on the workers in parallel.
 */
struct tf_packed {
    uint8_t *buf;    /**< the stored bytes */
    size_t len, cap; /**< bytes in buf (0: nothing held), room */
    uint64_t raw;    /**< bytes once decompressed */
    int zstd;        /**< compressed (SLUICE_TF_ZSTD) */
    void *dctx;      /**< the worker's zstd context, kept across chunks */
    char name[128];  /**< the frame, for a message: "chunk 3 of tid 1234 (frame at byte 5678)" */
};

/**
 * Read frame @p i's stored payload into @p *p (allocated at the first
 * call) and check its crc. Reading thread.
 * @return 0, or as tf_reader__payload() (nothing held then).
 */
int tf_reader__stored(struct tf_reader *r, size_t i, struct tf_packed **p, size_t cap, char *err,
                      size_t errlen);

/**
 * Decompress @p p into @p dst (room for @p cap bytes). Worker thread.
 * @param[out] len the bytes
 * @return 0, or -EPROTO with why in @p err (the payload does not
 *         decompress to what its header says), -ENOMEM.
 */
int tf_packed__unpack(struct tf_packed *p, void *dst, size_t cap, size_t *len, char *err,
                      size_t errlen);

/** Free what tf_reader__stored() made. NULL is ignored. */
void tf_packed__free(struct tf_packed *p);

/** Close and free what open made. */
void tf_reader__close(struct tf_reader *r);

/** The name of frame type @p type, for messages ("chunk", "ring", ...). */
const char *tf_type_name(unsigned type);

#endif /* SLUICE_TF_READ_H */
