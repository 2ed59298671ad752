/* SPDX-License-Identifier: GPL-2.0-or-later */
/**
 * @file tf_write.h
 * @brief Recording a session into a trace file (sluice/trace_file.h).
 *
 * Workers compress each chunk's span as they take it (tf_pack__span(), one
 * zstd context per chunk, kept with it), or only checksum it when the
 * recording is uncompressed (the span is then written from where it lies,
 * before it is released); the ordering thread, the only
 * writer, appends frames in stream order (tf_writer__*). A failed write
 * (a full disk) stops the recording, never the session: the frames already
 * written stay whole and readable, and tf_writer__close() says where it
 * stopped.
 */
#ifndef SLUICE_TF_WRITE_H
#define SLUICE_TF_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "block_table.h"
#include "sluice/consumer.h"

/** A chunk's span as it is to be stored, made by its worker. Fields are private. */
struct tf_pack {
    void *cctx;          /**< the zstd context, kept across spans */
    uint8_t *buf;        /**< the compressed span */
    size_t cap;          /**< room in buf */
    const void *payload; /**< what is stored: buf, or the span itself (uncompressed) */
    size_t len;          /**< bytes at payload */
    size_t raw;          /**< the span's bytes */
    uint32_t crc;        /**< crc32 of payload[0..len) */
    int zstd;            /**< payload is buf, a zstd frame */
    int ok;              /**< payload holds this chunk's span */
};

/**
 * Pack the span @p words (@p len bytes) into @p *p (allocated at the first
 * call): zstd-compressed into a buffer of its own if @p compress, else
 * only checksummed, the payload then being @p words itself, which must
 * stay as they are until tf_writer__chunk() wrote them. Worker thread
 * holding the chunk.
 * @return 0, or -ENOMEM (p->ok stays 0: the writer then says the
 *         recording stopped).
 */
int tf_pack__span(struct tf_pack **p, const uint64_t *words, size_t len, int compress);

/** Free what tf_pack__span() made. NULL is ignored. */
void tf_pack__free(struct tf_pack *p);

/** A trace file being written. Fields are private. */
struct tf_writer;

/**
 * Create @p path (or open a regular file there), lock it (flock, held
 * until tf_writer__close()); it is emptied and its FILE frame written with
 * the trace's first frame, so a session that traces nothing leaves it as
 * it was. Main thread, before the session starts.
 * @return the writer, or NULL with a one-line reason naming @p path in @p err
 *         and errno set (EBUSY: another writer holds the lock).
 */
struct tf_writer *tf_writer__open(const char *path, char *err, size_t errlen);

/**
 * Whether the recording has stopped (a failed write): nothing more is
 * written, so workers need not compress. Any thread; a worker that reads 0
 * just before the stop compresses a span that is then not written.
 */
int tf_writer__stopped(const struct tf_writer *w);

/**
 * Ring @p ring (numbered by the caller from 0) of thread @p t starts; its
 * process's table is @p bt (or NULL), whose snapshot_at is final by now
 * (ring_source.c add_ring); its stream starts in module log position
 * @p start_map (UINT64_MAX: unknown). Ordering thread.
 */
void tf_writer__ring(struct tf_writer *w, uint32_t ring, const struct sluice_thread_info *t,
                     const struct block_table *bt, uint64_t start_map);

/**
 * Chunk @p seq of ring @p ring: its span at ring position @p at, packed in
 * @p p, read against module log position @p maps_pos, carrying its
 * process's snapshot if @p snapshot; @p insns exec events of the ring came
 * before it. First the pieces of @p bt (the ring's table, or NULL)
 * published since the last call. Ordering thread.
 */
void tf_writer__chunk(struct tf_writer *w, uint32_t ring, const struct block_table *bt,
                      uint64_t seq, uint64_t at, uint64_t maps_pos, int snapshot,
                      const struct tf_pack *p, uint64_t insns);

/** Ring @p ring ended after @p chunks chunks (see SLUICE_TF_RING_END). Ordering thread. */
void tf_writer__ring_end(struct tf_writer *w, uint32_t ring, uint64_t chunks, uint64_t hdr_lost,
                         int64_t salvaged);

/**
 * Write END (@p result, @p detached, @p msg), the index and the trailer
 * (nothing, if no frame of the trace came: the file is as it was), close
 * the file and free @p w. Main thread, after the ordering thread stopped.
 * @return 0, or -errno of the first failed write, with a one-line reason
 *         in @p err naming the file and how much of it is whole.
 */
int tf_writer__close(struct tf_writer *w, int result, int detached, const char *msg, char *err,
                     size_t errlen);

#endif /* SLUICE_TF_WRITE_H */
