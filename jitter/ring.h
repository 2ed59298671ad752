/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ring.h — the producer side of a per-thread trace ring (layout: record.h).
 *
 * A ring belongs to one guest thread. Only that thread's vCPU writes records
 * and calls ring_publish()/ring_reserve(); the process-wide paths (exit, exec,
 * fork) call them for other threads only while QEMU holds the exclusive
 * section, when those threads are stopped.
 */
#ifndef SLUICE_JITTER_RING_H
#define SLUICE_JITTER_RING_H

#include <stddef.h>
#include <stdint.h>

#include <sluice/jitter_abi.h>
#include <sluice/record.h>

struct ring {
    struct sluice_ring_hdr *hdr;     /* header page (shared) */
    uint8_t *data;                   /* first of the two data mappings */
    uint64_t size;                   /* data bytes, a power of two */
    uint64_t head;                   /* published position (our copy of hdr->head) */
    size_t map_bytes;                /* whole mapping: header + 2 * size */
    uint64_t offset;                 /* of the header in the process's arena (arena.h) */
    struct sluice_thread_slot *slot; /* the vCPU's cursor and limit */
    struct ring *next;               /* the process's list of rings (jitter.c) */
    int final;                       /* closed by ring_close_final: its thread writes no more */
    uint64_t entered;                /* end of the chunks lossy_take() has cleared for writing */
    /* Inside ring_reserve() with no block in flight: the running
     * instruction's EXEC record, held back like a block (it may still be
     * taken back, ring_tb_exit); NULL otherwise. */
    uint64_t *insn_at;
    /* Which consumer slots are open, and lossless (bit i: slot i), here in
     * our own memory: the header's copies are for consumers to read. */
    uint32_t open_slots, lossless_slots;
    /* Slot i's words for this ring, a line of its consumer's tail file
     * (record.h); set before the slot's bit opens. */
    struct sluice_ring_tail *tail[SLUICE_MAX_CONSUMERS];
    /* Ended: the lossy slots whose unread rest the jitter took (lossy_take_rest,
     * bit i: slot i), and whether the data pages went back (ring_punch_data). */
    uint32_t rest_taken;
    int punched;
};

/**
 * Create a ring of @p size data bytes (a power of two, >= 4 * SLUICE_RESERVE_MAX,
 * a multiple of the page size) for guest thread @p tid of process @p pid in
 * the process's arena, and point @p slot at it.
 * @return the ring, or NULL with errno set.
 */
struct ring *ring_create(uint64_t size, uint32_t pid, uint32_t tid, uint32_t seq, const char *arch,
                         const char *comm, int big_endian, struct sluice_thread_slot *slot);

/**
 * Unmap; the arena lives on in consumers that map it. With @p give_back
 * and every consumer done with it (ring_done()), the ring's pages go back
 * to the kernel (never in a forked child: the pages are the parent's).
 */
void ring_destroy(struct ring *r, int give_back);

/**
 * The ring's thread has exited (ring_close() done): forget its vCPU slot,
 * keep the mapping, so that ring_done() and ring_slot_close() still work
 * until ring_destroy(). Ring-list lock held.
 */
void ring_retire(struct ring *r);

/**
 * Whether no consumer will touch the ring any more: every open slot's
 * consumer has said it is done with it (its `done` word, record.h; a
 * consumer that says so too early only loses its own reads). Control
 * thread or the ring's own.
 */
int ring_done(const struct ring *r);

/**
 * Publish what is written up to the slot's cursor (release store of head),
 * but the block in flight (from slot->block_at): its record may still
 * change. vCPU, from reserve().
 */
void ring_publish(struct ring *r);

/** Publish everything: the ring's thread is outside translated code, its last block is over. */
void ring_publish_all(struct ring *r);

/**
 * Publish, then make `limit - cursor >= need` bytes writable, waiting for
 * lossless consumers while the ring is full. A grant never crosses a chunk
 * boundary (a PAD fills up to it first, record.h); it holds whatever the
 * last lap left there (consumers drain a dead producer up to the cursor it
 * stored at its last TB start, never up to a zero word).
 */
void ring_reserve(struct ring *r, uint64_t need);

/**
 * The TB is over: no block is in flight (slot->block_at cleared), and every
 * record up to the cursor is whole: the cursor is stored at slot->written,
 * as the TB's exit ops would have (jitter_abi.h). vCPU.
 */
void ring_tb_left(struct ring *r);

/**
 * A longjmp left translated code at guest @p pc, with the block in flight
 * at slot->block_at (if any, in this ring: sluice_block_in_flight): end
 * its record at that instruction, included; left before its last slot,
 * give its slot records their headers first (record.h). @p again: the
 * instruction at @p pc did not run and runs next (jitter_abi.h tb_exit):
 * the loads it recorded after its last store are dropped, and if nothing
 * of it is left but its exec event, that is taken back too (the block
 * ends before it; an EXEC record is dropped). Clears block_at and
 * stores the cursor at slot->written, as the TB's exit would have.
 * vCPU (tb_exit).
 */
void ring_tb_exit(struct ring *r, uint64_t pc, int again);

/** Publish and mark the ring closed: its thread will write no more. */
void ring_close(struct ring *r);

/**
 * As ring_close(), for a thread that is stopped (exclusive section) in a
 * process that is exiting: the thread may run on for a moment after the
 * exclusive section ends and before the process is gone, so its next
 * reserve (at its next TB start or helper record) blocks until then instead
 * of writing records nobody will read while the guest's stores still happen.
 */
void ring_close_final(struct ring *r);

/** Whether ring_close_final() closed @p r (its process is exiting). Any thread. */
int ring_final(const struct ring *r);

/**
 * Open consumer slot @p i of @p r for a consumer that starts reading now,
 * its words for this ring at @p tail (a line of its tail file, mapped for
 * as long as the process lives): its tail at the last published head (a
 * record boundary), its lost count 0, then the slot open (lossless or not)
 * in the ring's private state, which alone the producer trusts. Control
 * thread, or a vCPU announcing its new ring; the consumer is told of the
 * ring only after this returns.
 */
void ring_slot_open(struct ring *r, unsigned i, int lossless, struct sluice_ring_tail *tail);

/** Close slot @p i: the producer no longer waits for it nor takes from it (woken if it waits). */
void ring_slot_close(struct ring *r, unsigned i);

/**
 * Whether slot @p i is open on @p r and its consumer has not said it is done
 * with it (ring_done()): it holds the ring's room in the arena. Any thread.
 */
int ring_slot_unread(const struct ring *r, unsigned i);

/**
 * The lossy slots that hold @p r unread (ring_slot_unread()), bit i for
 * slot i; 0 if none. Any thread.
 */
uint32_t ring_lossy_unread(const struct ring *r);

/** The slots, lossy or not, that hold @p r unread (bit i: slot i). Any thread. */
uint32_t ring_unread(const struct ring *r);

/**
 * @p r's thread has ended and no consumer will read its data area again
 * (each one that holds it unread had the rest taken: lossy_take_rest()):
 * give its pages back to the kernel (arena_punch()); the header stays, for
 * the consumers to read the ring's end and the count of what they lost.
 * A consumer's copy in flight reads zeros and then fails its claim (the
 * take moved its tail first), so nothing read from them is delivered.
 * Our own data mappings go too (r->data must not be read again).
 * Ring-list lock held (jitter.c). Once per ring; later calls do nothing.
 */
void ring_punch_data(struct ring *r);

/** Bytes of the arena @p r holds with records: its header and what was written, at most a lap. */
uint64_t ring_held_bytes(const struct ring *r);

/** Whether slot @p i is open, and lossy. Any thread. */
int ring_slot_lossy(const struct ring *r, unsigned i);

/** Wake the producer waiting on consumer slot @p slot (it left or advanced). */
void ring_wake_producer(struct ring *r, unsigned slot);

#endif /* SLUICE_JITTER_RING_H */
