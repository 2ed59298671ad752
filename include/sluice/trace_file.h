/* SPDX-License-Identifier: GPL-2.0-or-later */
/**
 * @file trace_file.h
 * @brief The trace file (`sluice run --record FILE`, `sluice report FILE`):
 *        a recorded session's records, exactly as the rings held them, with
 *        what decoding them needs.
 *
 * A file is a sequence of frames, each a 64-byte header (struct
 * sluice_tf_frame, little-endian) and `stored_bytes` of payload. The first
 * frame is FILE; then, in the order a session took them: RING before a
 * ring's first CHUNK, the TABLE pieces a CHUNK needs before it, RING_END
 * after a ring's last CHUNK; then END, INDEX and TRAILER, which close a
 * complete file. A file cut short (a full disk, a killed recorder) has no
 * END: every whole frame before the cut still reads. Payloads marked
 * SLUICE_TF_ZSTD are one zstd frame each (RFC 8878) with its content
 * checksum; `crc` (zlib's crc32(), ISO-HDLC) covers the header, with crc
 * zero, then the stored payload, so a damaged frame is found and named.
 *
 * The records are record.h's, of the format version FILE names: a CHUNK is
 * one span a session took from a ring (at most SLUICE_CHUNK_BYTES, plus one
 * LOST word in front for a lossy session), TABLE pieces rebuild each
 * process's block table and module log as far as the recorded chunks read
 * them, so decoding the file gives the events the live session had, in the
 * same order.
 */
#ifndef SLUICE_TRACE_FILE_H
#define SLUICE_TRACE_FILE_H

#include <stdint.h>

/** struct sluice_tf_frame.magic: "SLFR". */
#define SLUICE_TF_FRAME_MAGIC 0x52464c53u
/** FILE frame arg[0]: this layout's version (2 added FILES; version 1 files still read). */
#define SLUICE_TF_VERSION 2u
/** Most payload bytes a frame but INDEX may claim once decompressed (a CHUNK: 256 KiB + 8). */
#define SLUICE_TF_MAX_RAW (64ull << 20)
/** Most bytes of an INDEX (33 M frames); a file with more frames has no INDEX and TRAILER. */
#define SLUICE_TF_MAX_INDEX (1ull << 30)
/** struct sluice_tf_frame.flags: the payload is zstd-compressed. */
#define SLUICE_TF_ZSTD 1u
/** No table: RING arg[2] of a ring whose producer has none. */
#define SLUICE_TF_NO_TABLE UINT64_MAX

/** Frame types (struct sluice_tf_frame.type); per type, what `stream` and `arg` hold. */
enum sluice_tf_type {
    /** First frame. arg: [0] SLUICE_TF_VERSION, [1] record.h's SLUICE_FORMAT_VERSION,
     *  [2] when the recording started (ns since the Unix epoch). No payload. */
    SLUICE_TF_FILE = 1,
    /** A guest thread's ring; `stream` numbers it in the file, from 0. arg: [0] pid | tid << 32,
     *  [1] ring seq (sluice_thread_info.seq) | big_endian << 32, [2] its table's number or
     *  SLUICE_TF_NO_TABLE, [3] the module log position of its process's map snapshot
     *  (sluice_callbacks.mmap; the same in every ring of the process). Payload: 40 bytes, the QEMU
     *  target name then the program name, 16 bytes each, NUL-padded, then the module log position
     *  this ring's stream starts in (record.h sluice_ring_hdr.maps_at_start; UINT64_MAX: not
     *  read from its start), little-endian. Files written before 2026-12-07 hold the names
     *  only (32 bytes). */
    SLUICE_TF_RING = 2,
    /** A piece of table `stream` (numbered from 0, one per guest process). arg: [0] 0 for
     *  block descriptors (record.h "Block table" data words), 1 for the module log;
     *  [1] the piece's byte offset in that part (pieces come in order, without gaps);
     *  [2] module log: maps_dropped then. Payload: the bytes. */
    SLUICE_TF_TABLE = 3,
    /** One span of ring `stream`'s records. arg: [0] the ring's chunk number (0, 1, 2...);
     *  [1] ring position of its first word (bytes); [2] the module log position it is read
     *  against (maps.h: maps_used once taken); [3] 1 if it carries its process's map snapshot
     *  (the first chunk the session took of any ring of the process), else 0. Payload: the records.
     */
    SLUICE_TF_CHUNK = 4,
    /** Ring `stream` ended. arg: [0] its chunks; [1] events its producer counted lost in the
     *  ring header; [2] 1 + bytes recovered from a producer that died, else 0. No payload. */
    SLUICE_TF_RING_END = 5,
    /** The recorded session ended. arg: [0] its result (0, or a negative errno, as int64_t);
     *  [1] 1 if it ended by a detach. Payload: its error messages (sluice_session__errors()),
     *  one per line (a newline between), the first first, then "N more errors, not kept" if
     *  more came than a session keeps; not NUL-terminated, maybe empty. (Files written before
     *  2026-12-07 hold the first message only.) */
    SLUICE_TF_END = 6,
    /** Where every frame before it starts. Payload, never compressed: one struct
     *  sluice_tf_index per frame, in file order, at most SLUICE_TF_MAX_INDEX bytes. */
    SLUICE_TF_INDEX = 7,
    /** Last frame. arg: [0] the INDEX frame's file offset, [1] frames before INDEX. */
    SLUICE_TF_TRAILER = 8,
    /** (Version 2.) What the files the guest mapped were when they were recorded: one struct
     *  sluice_tf_file per file new to the recording, each followed by its path, written before
     *  the module log pieces that first name them. No arg. A reader compares them with the
     *  files now at those paths before it names code from them (symbols, disassembly). */
    SLUICE_TF_FILES = 9,
};

/** A FILES entry (64 bytes, then path_len bytes of path, zero-padded to a multiple of 8). */
struct sluice_tf_file {
    uint64_t size;     /**< st_size when recorded */
    int64_t mtime_ns;  /**< st_mtime when recorded, ns since the Unix epoch */
    uint16_t path_len; /**< bytes of path that follow (no NUL), 1 to 4095 */
    uint8_t id_len;    /**< bytes of its ELF build-id (NT_GNU_BUILD_ID), 0 if none or not ELF */
    uint8_t pad[5];
    uint8_t id[32];    /**< the build-id, id_len bytes of it */
    uint64_t reserved; /**< 0 */
};

/** A frame's header, 64 bytes. */
struct sluice_tf_frame {
    uint32_t magic;        /**< SLUICE_TF_FRAME_MAGIC */
    uint16_t type;         /**< enum sluice_tf_type */
    uint16_t flags;        /**< SLUICE_TF_ZSTD, or 0 (the payload as is) */
    uint32_t stream;       /**< the ring or table number the type says, else 0 */
    uint32_t crc;          /**< crc32 of this header (crc 0) and the stored payload */
    uint64_t stored_bytes; /**< payload bytes after the header */
    uint64_t raw_bytes;    /**< payload bytes once decompressed: SLUICE_TF_MAX_RAW at most
                                (SLUICE_TF_MAX_INDEX for an INDEX) */
    uint64_t arg[4];       /**< per type: enum sluice_tf_type */
};

/** An INDEX entry: to seek to a ring's chunk, or to where a thread has run n instructions. */
struct sluice_tf_index {
    uint64_t offset; /**< the frame's file offset */
    uint16_t type;   /**< its type */
    uint16_t pad;
    uint32_t stream; /**< its stream */
    uint64_t arg0;   /**< its arg[0] (a CHUNK's number) */
    uint64_t insns;  /**< CHUNK: exec events of its ring before it; else 0 */
};

#endif /* SLUICE_TRACE_FILE_H */
