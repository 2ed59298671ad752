/* SPDX-License-Identifier: GPL-2.0-or-later */
/**
 * @file record.h
 * @brief sluice trace records, the shared ring layout and the block table with its module log
 * (format version 9).
 *
 * This header is shared by the QEMU patch (which emits records inline), the
 * jitter (which owns the rings) and the consumer library (which reads them).
 * It has no dependencies beyond <stdint.h> so all three can include it.
 *
 * Records
 * -------
 * A record is a sequence of little-endian 64-bit words, 8-byte aligned. The
 * first word of every record is its header: bits 63..56 hold the tag, bits
 * 55..0 the guest PC (guest virtual address). Linux-user guests of all
 * supported architectures have user address spaces below 2^48, so the PC
 * always fits; a PC at or above 2^56 is refused at lift time.
 *
 *   EXEC          [hdr]                               1 word
 *   MEM (size<16) [hdr][guest vaddr][value]           3 words
 *   MEM (size 16) [hdr][guest vaddr][value lo][value hi] 4 words
 *   LOST          [hdr: count in bits 55..0]          1 word: that many events
 *                 (executed instructions and memory accesses) were lost
 *                 here, exactly (a lossy consumer's library puts it in the
 *                 stream where the producer overwrote what it had not read)
 *   PAD           [hdr: words to skip in bits 55..0, including the header]
 *   BLOCK         [hdr: to (55..46), from (45..36), cont (35), block id (34..0)]
 *                 1 word
 *                 (format 4: instructions from..to-1 of a block, see below)
 *   BLOCK_SLOTS   a BLOCK record (same header fields) whose descriptor's
 *                 slot records follow it (format 5, see below)
 *   slot record   [guest vaddr][value] or, size 16, [vaddr][value lo][value hi]:
 *                 a MEM record without its header, only right after a
 *                 BLOCK_SLOTS record
 *   TEXT          [hdr: byte count n in bits 15..0][n bytes, zero-padded to
 *                 whole words]  1 + ceil(n / 8) words (a filter's
 *                 bpf_trace_printk message, in the lifting thread's ring)
 *   MAP           [hdr: byte offset of an entry in the module log]  1 word
 *                 (format 8): this thread's mmap, munmap, mprotect or
 *                 mremap made that entry here (see "Module log" below)
 *   SYSCALL       [hdr: syscall number in bits 31..0][arg 1]..[arg 6]  7 words
 *                 (format 9): this thread entered a syscall with these
 *                 argument registers (zero-extended from the guest's width),
 *                 as QEMU's linux-user do_syscall() got them; only when the
 *                 jitter was asked for syscalls (option syscalls=1)
 *   SYSRET        [hdr: syscall number in bits 31..0][return value]  2 words
 *                 (format 9): ... and it returned this value (signed, a
 *                 negative errno on failure, as the guest's register holds
 *                 it, sign-extended); exit, exit_group and an execve that
 *                 succeeds have none
 *
 * A MEM record's tag encodes direction and size: tag = 0x10 | W<<3 | log2(size),
 * W = 1 for a store. The value holds the access's value in its low `size`
 * bytes: the bytes it read or wrote, in the guest's byte order (what a plain
 * load of that size puts in a register; for a byte-swapping access, x86
 * movbe, memory's bytes, not the instruction's register; for an atomic
 * read-modify-write, what memory held, then what it holds after; a
 * compare-and-swap or store-conditional, as QEMU runs both, is a load of what
 * memory held and, if it took, a store of the new value; one that failed
 * stores nothing but on x86, whose cmpxchg writes back what it read); the
 * upper bytes are unspecified and the consumer library masks them. Records made by
 * QEMU helpers (atomics under CF_PARALLEL, target helpers that access memory
 * one access at a time, such as SVE loads and stores) carry their
 * instruction's PC like inline ones. Known gaps: helpers that write guest
 * memory through a host pointer from probe_access() (x86 fxsave/xsave/fnsave
 * and their restores, aarch64 DC ZVA) make no records, under QEMU's plugin
 * API neither.
 * (Format 1 wrote PC 0 for "the preceding EXEC record's"; since format 3 a
 * MEM record's PC is always its instruction's, 0 included.)
 *
 * With a filter, any record may be absent: an instruction's MEM records
 * need not follow an EXEC record of the same PC.
 *
 * Blocks (format 4)
 * -----------------
 * When QEMU has lifted a translation block, the jitter may append its
 * descriptor to the process's block table (below) and have the TB write one
 * BLOCK record at its start instead of an EXEC record per instruction. A
 * BLOCK record says: instructions `from` .. `to - 1` of descriptor `id` ran,
 * in that order (from <= to <= n, at most SLUICE_BLOCK_MAX_INSNS). The
 * records that follow it, up to the next record that is not MEM or EXEC
 * (or the end of its span), are those instructions' own, in program order,
 * and each names its instruction's PC, which is in the descriptor (a TB
 * never holds the same PC twice). So a consumer delivers the exec events
 * of the instructions the descriptor marks recorded, in order: that of
 * instruction j before the first record naming j or a later one, those
 * left when the block ends.
 * An EXEC record inside a block (a SLUICE_HOOK_ONCE instruction's first
 * hit) is that instruction's exec event; the descriptor does not mark it.
 * A TB without a BLOCK record that writes records starts with a PAD of one
 * word, which ends the block before.
 *
 * Slots (format 5): the memory accesses a TB makes before its first branch,
 * label or call that may touch guest memory always run, in order, unless
 * the TB is left early. The descriptor lists them (its slots: instruction,
 * size, direction), and such a TB starts with a BLOCK_SLOTS record (from 0,
 * not cont) followed by one slot record per slot, in the descriptor's
 * order, without headers; its other records follow with headers, as after
 * a BLOCK record. A TB left before its last slot has its slot records
 * given their headers and its record made a BLOCK one before it is
 * published, so a BLOCK_SLOTS record is always followed by all its slots,
 * and every slot's instruction is below its `to`.
 *
 * A TB left early (a fault, an exception) has its record rewritten before
 * it is published, so `to` counts the instructions that started, the one
 * that faulted included, as EXEC records would. A block whose records reach
 * a chunk boundary is cut there: its first part ends at the boundary and a
 * second BLOCK record of the same id starts the next chunk (each chunk
 * decodes alone). When the instruction running at the cut has records on
 * both sides, the second part starts at it with `cont` set: its exec event
 * was delivered by the first part, and is not delivered again.
 *
 * Loads are recorded after the access (the value is the loaded one); stores
 * are recorded after the access too, so an access that faults (SIGSEGV) is
 * never recorded: it did not happen. Known gap: QEMU makes some 16-byte
 * stores (an aarch64 `stp` of two X registers) as two 8-byte host stores, and
 * when the second faults (the store crosses into a page it may not write),
 * the first has changed memory but nothing is recorded, under QEMU's plugin
 * API neither.
 *
 * Ring layout (one per guest thread, a memfd shared with consumers)
 * -----------------------------------------------------------------
 *
 *   file offset 0            SLUICE_RING_HDR_BYTES    + data_size
 *   +------------------------+------------------------+
 *   | struct sluice_ring_hdr | data (power of two)    |
 *   +------------------------+------------------------+
 *
 *   mapping:  [hdr][data][data again]
 *
 * Both producer and consumers map the data pages twice, back to back, so a
 * record that crosses the end of the data area is contiguous in memory and
 * neither side needs a wrap-around case (the idea of the Linux BPF ring
 * buffer, kernel/bpf/ringbuf.c).
 *
 * Positions (`head`, `tail`) are byte counts since the ring was created; they
 * never wrap; the byte at position p lives at data + (p & (data_size - 1)).
 *
 * Chunk boundaries (format 3): every position that is a multiple of
 * SLUICE_CHUNK_BYTES is a record boundary. A producer whose next records
 * would cross one first fills the bytes up to it with one PAD record.
 * Every published head is a record boundary too. So a consumer cuts the
 * stream into spans [tail, min(head, next boundary)) of whole records
 * without reading them, and decodes each span once, in place. A producer
 * that breaks this rule is caught by the decoder (a record crossing its
 * span's end), never by an out-of-bounds read.
 */
#ifndef SLUICE_RECORD_H
#define SLUICE_RECORD_H

#include <stdint.h>

/** Format version of records, ring header and block table; bumped on any change. */
#define SLUICE_FORMAT_VERSION 11u
/** `magic` of a ring header: "SLUICERG" as little-endian bytes. */
#define SLUICE_RING_MAGIC 0x4752454349554c53ull

/** Record tags (bits 63..56 of a record's first word). */
enum sluice_tag {
    SLUICE_TAG_PAD = 0x00,   /**< skip (bits 55..0) words, header included */
    SLUICE_TAG_EXEC = 0x01,  /**< one executed instruction at the PC */
    SLUICE_TAG_LOST = 0x02,  /**< (bits 55..0) events were lost here */
    SLUICE_TAG_TEXT = 0x03,  /**< a message of (bits 15..0) bytes follows */
    SLUICE_TAG_BLOCK = 0x04, /**< instructions of a block descriptor, see sluice_block_hdr() */
    /** A BLOCK record followed by its descriptor's slot records (format 5). */
    SLUICE_TAG_BLOCK_SLOTS = 0x05,
    SLUICE_TAG_MAP = 0x06,     /**< this thread changed a mapping: the log entry at (bits 55..0) */
    SLUICE_TAG_SYSCALL = 0x07, /**< a syscall entered: number (bits 31..0), 6 argument words */
    SLUICE_TAG_SYSRET = 0x08,  /**< a syscall returned: number (bits 31..0), the return value */
    SLUICE_TAG_MEM = 0x10,     /**< base of the MEM tags, see sluice_mem_tag() */
};

#define SLUICE_TAG_SHIFT 56
#define SLUICE_PAYLOAD_MASK ((1ull << SLUICE_TAG_SHIFT) - 1)
/** MEM tag bit: the access is a store. */
#define SLUICE_MEM_WRITE 0x08u

/** Tag of a record header word. */
static inline unsigned sluice_rec_tag(uint64_t hdr)
{
    return (unsigned)(hdr >> SLUICE_TAG_SHIFT);
}

/** Payload of a record header word: PC, count or word count (56 bits). */
static inline uint64_t sluice_rec_payload(uint64_t hdr)
{
    return hdr & SLUICE_PAYLOAD_MASK;
}

/** Header word of a PAD record that skips @p words words (>= 1), itself included. */
static inline uint64_t sluice_pad_hdr(uint64_t words)
{
    return ((uint64_t)SLUICE_TAG_PAD << SLUICE_TAG_SHIFT) | (words & SLUICE_PAYLOAD_MASK);
}

/** Header word of an EXEC record for guest PC @p pc (< 2^56). */
static inline uint64_t sluice_exec_hdr(uint64_t pc)
{
    return ((uint64_t)SLUICE_TAG_EXEC << SLUICE_TAG_SHIFT) | (pc & SLUICE_PAYLOAD_MASK);
}

/**
 * MEM tag for an access of 2^@p log2_size bytes (log2_size 0..4).
 * @param is_write non-zero for a store.
 */
static inline unsigned sluice_mem_tag(unsigned log2_size, int is_write)
{
    return SLUICE_TAG_MEM | (is_write ? SLUICE_MEM_WRITE : 0) | (log2_size & 7);
}

/** Header word of a MEM record: see sluice_mem_tag(); @p pc is its instruction's. */
static inline uint64_t sluice_mem_hdr(uint64_t pc, unsigned log2_size, int is_write)
{
    return ((uint64_t)sluice_mem_tag(log2_size, is_write) << SLUICE_TAG_SHIFT) |
           (pc & SLUICE_PAYLOAD_MASK);
}

/** Most bytes of a TEXT record's message. */
#define SLUICE_TEXT_MAX 1024u

/** Header word of a TEXT record carrying @p len bytes (1..SLUICE_TEXT_MAX). */
static inline uint64_t sluice_text_hdr(uint64_t len)
{
    return ((uint64_t)SLUICE_TAG_TEXT << SLUICE_TAG_SHIFT) | len;
}

/** Most instructions in one block descriptor (QEMU's TCG_MAX_INSNS). */
#define SLUICE_BLOCK_MAX_INSNS 512u
/** Block ids are word indexes into the block table's data, below 2^35. */
#define SLUICE_BLOCK_ID_MASK ((1ull << 35) - 1)
/** BLOCK header bit: instruction `from`'s exec event came with the part before. */
#define SLUICE_BLOCK_CONT (1ull << 35)

/**
 * Header word of a BLOCK record: instructions @p from .. @p to - 1 of the
 * descriptor at word @p id of the block table ran; @p cont: see above.
 */
static inline uint64_t sluice_block_hdr(uint64_t id, unsigned from, unsigned to, int cont)
{
    return ((uint64_t)SLUICE_TAG_BLOCK << SLUICE_TAG_SHIFT) | ((uint64_t)(to & 0x3ff) << 46) |
           ((uint64_t)(from & 0x3ff) << 36) | (cont ? SLUICE_BLOCK_CONT : 0) |
           (id & SLUICE_BLOCK_ID_MASK);
}

/** The BLOCK_SLOTS header word of a whole TB of @p n instructions whose descriptor is at @p id. */
static inline uint64_t sluice_block_slots_hdr(uint64_t id, unsigned n)
{
    return ((uint64_t)SLUICE_TAG_BLOCK_SLOTS << SLUICE_TAG_SHIFT) |
           (sluice_block_hdr(id, 0, n, 0) & SLUICE_PAYLOAD_MASK);
}

/** Whether @p tag is BLOCK or BLOCK_SLOTS (the same header fields). */
static inline int sluice_tag_is_block(unsigned tag)
{
    return tag == SLUICE_TAG_BLOCK || tag == SLUICE_TAG_BLOCK_SLOTS;
}

/** Whether a BLOCK header word continues a block cut at a chunk boundary mid-instruction. */
static inline int sluice_block_cont(uint64_t hdr)
{
    return (hdr & SLUICE_BLOCK_CONT) != 0;
}

/** The descriptor's word index in a BLOCK header word. */
static inline uint64_t sluice_block_id(uint64_t hdr)
{
    return hdr & SLUICE_BLOCK_ID_MASK;
}

/** The first instruction (index into the descriptor) a BLOCK header word covers. */
static inline unsigned sluice_block_from(uint64_t hdr)
{
    return (unsigned)(hdr >> 36) & 0x3ff;
}

/** One past the last instruction a BLOCK header word covers. */
static inline unsigned sluice_block_to(uint64_t hdr)
{
    return (unsigned)(hdr >> 46) & 0x3ff;
}

/** Whether @p tag is a MEM tag. */
static inline int sluice_tag_is_mem(unsigned tag)
{
    return (tag & 0xf0) == SLUICE_TAG_MEM && (tag & 7) <= 4;
}

/**
 * Length in 64-bit words of the record whose header is @p hdr, or 0 if the
 * header is not a valid record (unknown tag, PAD of length 0).
 */
static inline unsigned sluice_rec_words(uint64_t hdr)
{
    unsigned tag = sluice_rec_tag(hdr);

    if (tag == SLUICE_TAG_EXEC || tag == SLUICE_TAG_LOST || sluice_tag_is_block(tag) ||
        tag == SLUICE_TAG_MAP) {
        return 1; /* a BLOCK_SLOTS record's slot records are counted apart */
    }
    if (sluice_tag_is_mem(tag)) {
        return (tag & 7) == 4 ? 4 : 3;
    }
    if (tag == SLUICE_TAG_SYSCALL) {
        return 7;
    }
    if (tag == SLUICE_TAG_SYSRET) {
        return 2;
    }
    if (tag == SLUICE_TAG_TEXT) {
        uint64_t n = sluice_rec_payload(hdr);
        return n > 0 && n <= SLUICE_TEXT_MAX ? 1 + (unsigned)((n + 7) / 8) : 0;
    }
    if (tag == SLUICE_TAG_PAD) {
        uint64_t n = sluice_rec_payload(hdr);
        return n > 0 && n <= (1u << 20) ? (unsigned)n : 0;
    }
    return 0;
}

/*
 * Block table (format 4), one per guest process, in the process's arena
 * (ctl.h) at the ring headers' `blocks_offset`; a consumer maps it
 * read-only. Append-only while the process lives: an id, once in a record,
 * always names the same descriptor, whatever QEMU later flushes or
 * re-translates (a forked child starts with a copy of its parent's table,
 * its code cache being a copy too).
 *
 *   blocks_offset  +SLUICE_BLOCKS_HDR_BYTES
 *   +--------------+------------------------------------------+
 *   | table header | data: 64-bit words, descriptors end to end |
 *   +--------------+------------------------------------------+
 *
 * The descriptor at data word `id`, for a TB of n instructions and s slots:
 *   word 0            n (bits 15..0), how many are marked recorded (31..16),
 *                     s (47..32, at most SLUICE_BLOCK_MAX_SLOTS)
 *   words 1 .. n      each instruction's guest PC, in program order
 *   ceil(n / 8) words one byte per instruction, in order: its length in
 *                     bytes (bits 6..0), 0x80 if its exec event is recorded
 *   ceil(s / 4) words one 16-bit slot per access, in program order (so
 *                     their instructions never decrease), see sluice_slot()
 *   1 word            the module log's `maps_used` when the TB was lifted
 *                     (format 8): its pcs' mapping is the one the log
 *                     says at that position, and stays so while the TB
 *                     runs (QEMU drops the TBs of a range it unmaps);
 *                     SLUICE_MAPS_UNLOGGED if the log had filled up
 * The jitter writes a descriptor whole, then release-stores `used_words`
 * past it, before QEMU publishes the TB to any vCPU: a consumer that sees a
 * BLOCK record (acquire load of head) and then loads `used_words`
 * (acquire) finds the descriptor complete.
 */
#define SLUICE_BLOCKS_MAGIC 0x5442454349554c53ull /**< "SLUICEBT" */
/** Bytes of the block table's header; the data starts at this offset. */
#define SLUICE_BLOCKS_HDR_BYTES 4096u
/** Recorded-exec bit of a descriptor's byte. */
#define SLUICE_BLOCK_RECORDED 0x80u

/** Header of a block table. */
struct sluice_blocks_hdr {
    uint64_t magic;          /**< SLUICE_BLOCKS_MAGIC */
    uint32_t version;        /**< SLUICE_FORMAT_VERSION */
    uint32_t hdr_bytes;      /**< SLUICE_BLOCKS_HDR_BYTES */
    uint64_t capacity_words; /**< data words the mapping holds */
    /** Data words holding whole descriptors; release-stored by the jitter. */
    uint64_t used_words;
    /** Byte offset of the module log from the table's start (format 8; see below). */
    uint64_t maps_offset;
    /** Bytes the module log may fill. */
    uint64_t maps_capacity;
    /** Bytes of whole log entries; release-stored by the jitter after each entry. */
    uint64_t maps_used;
    /** Mapping changes not logged because the log was full (counted, never silent). */
    uint64_t maps_dropped;
};

/*
 * Module log (format 8; entries carry the mapped file's identity since
 * format 10), in the block table's mapping at `maps_offset`: every change
 * the guest made to its mappings through mmap, munmap, mprotect and mremap
 * (shmat as an anonymous shared mmap, shmdt as a munmap; brk's as QEMU
 * makes them, mmap and munmap), appended in the order QEMU made them
 * (under its mmap_lock), entries end to end. A position is a byte offset into the log; "the map
 * at position P" is what the entries below P leave. The ELF loader's
 * mappings come first (entries made before any thread ran). A forked child
 * starts with a copy of its parent's log.
 *
 * Each entry is a struct sluice_map_entry followed by `path_len` bytes of
 * path (no NUL), zero-padded to a multiple of 8 bytes (`bytes` in all).
 * An entry is written whole before maps_used is release-stored past it, so
 * a consumer that acquire-loads maps_used reads whole entries below it.
 */

/** A descriptor's log position once the log filled up: its map is not known. */
#define SLUICE_MAPS_UNLOGGED UINT64_MAX

/** What a module log entry records. */
enum sluice_map_kind {
    SLUICE_MAP_MMAP = 1,     /**< [start, start + len) now maps the file (or anonymous memory) */
    SLUICE_MAP_MUNMAP = 2,   /**< [start, start + len) is unmapped */
    SLUICE_MAP_MPROTECT = 3, /**< [start, start + len) now has protection prot */
    SLUICE_MAP_MREMAP = 4,   /**< [old_start, +old_len) moved to [start, start + len) */
};

/** `image` of an anonymous mapping. */
#define SLUICE_MAP_ANON 0xffffffffu

/** A module log entry's fixed part (104 bytes since format 11, little-endian). */
struct sluice_map_entry {
    uint32_t bytes; /**< the entry's bytes, path and padding included; a multiple of 8 */
    uint16_t kind;  /**< enum sluice_map_kind */
    uint16_t
        path_len;    /**< bytes of the file's path that follow (0: anonymous, or not mmap/mremap) */
    uint32_t prot;   /**< PROT_READ 1, PROT_WRITE 2, PROT_EXEC 4 (mmap, mprotect, mremap) */
    uint32_t image;  /**< the file's image id (0 the main executable), or SLUICE_MAP_ANON */
    uint64_t start;  /**< guest address, page-aligned */
    uint64_t len;    /**< bytes, a multiple of the guest page size */
    uint64_t offset; /**< file offset of start (mmap and mremap of a file), else 0 */
    uint64_t base;   /**< the load's base: its lowest address for a file loaded whole (a
                          load: the file's mapping of offset 0 and those that put the file's
                          offset 0, start - offset, at most 16 MiB above it); a file mapped
                          again apart, or loaded twice, has a base per load; a page of it
                          mapped alone, where it puts offset 0 */
    uint64_t old_start; /**< mremap: where the mapping was */
    uint64_t old_len;   /**< mremap: its bytes there */
    /*
     * Format 10, an mmap or mremap of a regular file: the file the guest
     * mapped as fstat() saw it then (`st_dev`, `st_ino`, `st_size`, `st_mtim`
     * and, since format 11, `st_ctim`, in ns since the epoch), so a consumer
     * that reads the file at `path` later knows whether it is still that one
     * (not replaced by a rename, not rewritten: a write sets the change
     * time, which, unlike the modification time, cannot be set back). All 0
     * otherwise.
     */
    uint64_t dev;     /**< st_dev of the mapped file */
    uint64_t ino;     /**< st_ino */
    uint64_t size;    /**< st_size, bytes */
    int64_t mtime_ns; /**< st_mtim, ns */
    int64_t ctime_ns; /**< st_ctim, ns (format 11) */
};

/** Words of a descriptor of @p n instructions, without its slots. */
static inline uint64_t sluice_block_words(unsigned n)
{
    return 1 + (uint64_t)n + ((uint64_t)n + 7) / 8;
}

/** Most slots in one descriptor. */
#define SLUICE_BLOCK_MAX_SLOTS 1024u

/**
 * A descriptor's slot: the access of 2^@p log2_size bytes (0..4) made by
 * its instruction @p insn (an index, < n), a store if @p is_write.
 * Bits 15..4 insn, bit 3 write, bits 2..0 log2 size (as a MEM tag's).
 */
static inline uint16_t sluice_slot(unsigned insn, unsigned log2_size, int is_write)
{
    return (uint16_t)(insn << 4 | (is_write ? SLUICE_MEM_WRITE : 0) | (log2_size & 7));
}

/** A slot's instruction index. */
static inline unsigned sluice_slot_insn(uint16_t slot)
{
    return slot >> 4;
}

/** Words a slot's record takes: 2, or 3 for 16 bytes. */
static inline unsigned sluice_slot_record_words(uint16_t slot)
{
    return (slot & 7) == 4 ? 3 : 2;
}

/** Words of a descriptor whose word 0 is @p w0 (n and s as it says), slots and log position
 * included. */
static inline uint64_t sluice_block_desc_words(uint64_t w0)
{
    return sluice_block_words((unsigned)(w0 & 0xffff)) + ((w0 >> 32 & 0xffff) + 3) / 4 + 1;
}

/** Positions that are multiples of this are record boundaries (see above). */
#define SLUICE_CHUNK_BYTES (256u * 1024)

/** Bytes of the ring header; the data area starts at this file offset. */
#define SLUICE_RING_HDR_BYTES 4096u
/** Consumer slots per ring, one consumer each (16 since format 6: consumers attach at run time). */
#define SLUICE_MAX_CONSUMERS 16
/** Ring header flag: the producer thread has exited; no more records. */
#define SLUICE_RING_CLOSED 1u

/*
 * Who writes what (format 7). A ring's words are split by writer, so that
 * no consumer can corrupt what the producer or another consumer relies on:
 *
 *   arena memfd (one per guest process; consumers get a read-only descriptor,
 *   sealed against shrinking, so they map it PROT_READ and cannot truncate it)
 *   +-------------------------------+  struct sluice_ring_hdr, 4 KiB
 *   | identity line    jitter, once |  magic .. blocks_bytes
 *   | producer line    producer     |  head, head_futex, flags, lost
 *   | TB-exit line     producer     |  written_addr, data_addr
 *   | slot[0..15]      producer     |  active, lossless, producer_waiting,
 *   |                               |  lost_seq, lost_events
 *   +-------------------------------+
 *   | data (size bytes)  producer   |  records; mapped twice back to back
 *   +-------------------------------+
 *
 *   tail file (one memfd per attached consumer, sent with WELCOME; read-write
 *   for that consumer and the jitter; grows as rings are given, sealed
 *   against shrinking)
 *   +-------------------------------+
 *   | line 0           consumer     |  struct sluice_ring_tail: tail,
 *   | line 1           consumer     |  tail_futex, head_waiting, done
 *   | ...  (RING's `line` says which ring's)
 *   +-------------------------------+
 *
 * The producer keeps which slots are open and lossless in its own memory
 * (the header's copies are for consumers to read) and clamps every tail it
 * reads: a tail ahead of head is caught up, one more than a ring behind is a
 * full ring. Its one store into a tail file is the compare-and-swap of a
 * lossy consumer's tail (struct sluice_ring_tail). So a consumer that writes
 * garbage into its tail file can only make the producer wait for it as a
 * lossless consumer that stopped reading would, or lose its own events.
 * The read-only arena guards against a consumer's mistakes, not against a
 * process of the same user set on harm: such a process may ptrace the
 * guest, or re-open the memfd through /proc.
 */

/** A producer-written consumer slot in a ring header, on its own cache line. */
struct sluice_ring_slot {
    /** 1 while the slot is in use (informative: consumers may read it to learn they were dropped).
     */
    uint32_t active;
    /** 1: lossless (the producer waits for this consumer); 0: lossy. Informative. */
    uint32_t lossless;
    /**
     * 1 while the producer sleeps on the consumer's tail_futex. The consumer
     * stores its tail, then reads this (both sequentially consistent) and
     * wakes the futex only when it is set.
     */
    uint32_t producer_waiting;
    /**
     * Seqlock over (tail, lost_events) for lossy slots: the producer makes
     * it odd, moves the tail and adds to lost_events, makes it even. A
     * consumer that read the same even value before and after reading both
     * has a pair in which lost_events counts exactly what lies below tail.
     */
    uint32_t lost_seq;
    /**
     * Lossy slots: events (instructions and memory accesses) of the records
     * the producer took from this consumer so far. It changes together with
     * the consumer's tail inside `lost_seq`'s odd phase.
     */
    uint64_t lost_events;
    uint32_t pad_[10];
};

/** Header page of a ring, written by the producer only (see the drawing above). */
struct sluice_ring_hdr {
    uint64_t magic;      /**< SLUICE_RING_MAGIC */
    uint32_t version;    /**< SLUICE_FORMAT_VERSION */
    uint32_t hdr_bytes;  /**< SLUICE_RING_HDR_BYTES */
    uint64_t data_size;  /**< bytes in the data area, a power of two */
    uint32_t pid;        /**< guest process id (host pid) */
    uint32_t tid;        /**< guest thread id (host tid) */
    char arch[16];       /**< QEMU target name, NUL-terminated ("x86_64") */
    char comm[16];       /**< guest program name, NUL-terminated */
    uint32_t big_endian; /**< guest byte order: 1 big, 0 little */
    uint32_t seq;        /**< per-process ring sequence number */
    /** File offset of the process's block table in the arena; 0 with blocks_bytes 0: none. */
    uint64_t blocks_offset;
    /** Bytes of the block table (header and data) to map. */
    uint64_t blocks_bytes;
    /**
     * The module log's maps_used when the ring was made (format 8): the map
     * its stream starts in; later changes by this thread come as MAP records.
     */
    uint64_t maps_at_start;
    uint8_t pad0_[128 - 96];

    /* --- producer cache line --- */
    /** Bytes published; release-stored by the producer, acquire-loaded by consumers. */
    uint64_t head;
    /**
     * Futex word consumers wait on; the producer bumps it and wakes it after
     * publishing when some consumer's head_waiting is set, and on close.
     */
    uint32_t head_futex;
    /** SLUICE_RING_CLOSED once the thread has exited and published its last record. */
    uint32_t flags;
    /** Records lost in this ring (lossy consumers and overflow), exact. */
    uint64_t lost;
    uint8_t pad2_[128 - 24];

    /* --- the producer's TB-exit line --- */
    /**
     * The write cursor as the producer's own address, stored by translated
     * code as it leaves a translation block that wrote records, by the
     * producer when a helper appends outside a block and at every publish,
     * before head: every record before it is whole, and it
     * never names a position behind head. Read only to drain a producer
     * that died without publishing (SIGKILL): its position is the one in
     * [head, head + data_size) at that offset from data_addr, and one past
     * the chunk boundary after head (where no grant reaches) names none.
     */
    uint64_t written_addr;
    /** The producer's address of the data area (for written_addr). */
    uint64_t data_addr;
    uint8_t pad3_[128 - 16];

    /* --- one cache line per consumer slot --- */
    struct sluice_ring_slot slot[SLUICE_MAX_CONSUMERS];
};

/**
 * A consumer's words for one ring, a line of its tail file (the ring's
 * `line`, from its RING message). Written by that consumer; read, and
 * clamped, by the producer.
 */
struct sluice_ring_tail {
    /**
     * Bytes consumed (position). A lossy consumer moves it with a
     * compare-and-swap from the start of a span it has copied to its end
     * (it then owns the copy); the producer, before it overwrites a chunk a
     * lossy consumer has not taken, moves it past that chunk with a
     * compare-and-swap and adds what it held to the slot's lost_events. So
     * each byte is either taken or counted lost, never both: whoever moves
     * the tail first has it. Once the ring's thread has ended, the jitter
     * may take all the rest the same way (a lossy consumer that holds too
     * many ended rings unread) and then give the data pages back: they read
     * as zero, so a copy is the consumer's only once its compare-and-swap
     * succeeded.
     */
    uint64_t tail;
    /** Futex word the producer waits on when full; the consumer bumps it and wakes it. */
    uint32_t tail_futex;
    /**
     * Non-zero while this consumer sleeps on the ring's head_futex (so the
     * producer wakes it after publishing).
     */
    uint32_t head_waiting;
    /**
     * 1 once this consumer is done with the ring (it read its end, or gave
     * up) and will not touch its mapping again: when every consumer of an
     * ended ring is done (or gone), the jitter gives its pages back. A
     * lossless consumer that gives up a ring still being written (it could
     * not map it or start reading it) sets it, then bumps and wakes
     * tail_futex: the producer, when it next needs room, closes the
     * consumer's slot in that ring and no longer waits for it there.
     */
    uint32_t done;
    uint32_t pad_[11];
};

/** Lines in a tail file: rings one consumer can be given, over its whole attachment. */
#define SLUICE_TAIL_LINES (1u << 20)
/** Bytes a tail file may grow to (64 MiB; a page holds 64 rings' lines). */
#define SLUICE_TAIL_BYTES ((uint64_t)SLUICE_TAIL_LINES * sizeof(struct sluice_ring_tail))

_Static_assert(sizeof(struct sluice_ring_hdr) <= SLUICE_RING_HDR_BYTES, "ring header too big");
_Static_assert(sizeof(struct sluice_ring_slot) == 64, "a consumer slot is one cache line");
_Static_assert(sizeof(struct sluice_ring_tail) == 64, "a tail line is one cache line");

#endif /* SLUICE_RECORD_H */
