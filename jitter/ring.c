/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ring.c — producer side of a trace ring: create, publish, reserve, close.
 *
 * Runs on the ring's vCPU thread (or, for process-wide exits, on a thread
 * holding QEMU's exclusive section). Nothing here may block except
 * ring_reserve() waiting for a lossless consumer to make room; an idle guest
 * never spins.
 *
 * Memory ordering: records are plain stores by translated code; the release
 * store of hdr->head in ring_publish() pairs with the consumer's acquire load
 * of head, so a consumer that sees a head sees every record before it. The
 * consumers' release stores of their tails (in their tail files, record.h)
 * pair with the acquire loads in free_bytes(): we never reuse bytes a
 * consumer may still be copying.
 */
#include "ring.h"

#include "arena.h"
#include "blocks.h"
#include "fds.h"
#include "lossy.h"
#include "maplog.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Where a slot whose ring is gone stores its cursor (nobody reads it). */
static uint64_t dead_written;

static long futex(uint32_t *uaddr, int op, uint32_t val, const struct timespec *ts)
{
    return syscall(SYS_futex, uaddr, op, val, ts, NULL, 0);
}

/*
 * Map [hdr][data][data] from the arena: a record crossing the end stays
 * contiguous. The arena's number is held still while we use it.
 */
static int map_ring(struct ring *r)
{
    int prot = PROT_READ | PROT_WRITE, flags = MAP_SHARED | MAP_FIXED, fd, err = 0;
    off_t hdr = (off_t)r->offset, data = hdr + SLUICE_RING_HDR_BYTES;
    uint8_t *base = mmap(NULL, r->map_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    if (base == MAP_FAILED) {
        return -1;
    }
    fds_lock();
    fd = arena_fd();
    if (mmap(base, SLUICE_RING_HDR_BYTES, prot, flags, fd, hdr) == MAP_FAILED ||
        mmap(base + SLUICE_RING_HDR_BYTES, r->size, prot, flags, fd, data) == MAP_FAILED ||
        mmap(base + SLUICE_RING_HDR_BYTES + r->size, r->size, prot, flags, fd, data) ==
            MAP_FAILED) {
        err = errno;
    }
    fds_unlock();
    if (err) {
        munmap(base, r->map_bytes);
        errno = err;
        return -1;
    }
    r->hdr = (struct sluice_ring_hdr *)base;
    r->data = base + SLUICE_RING_HDR_BYTES;
    return 0;
}

static void fill_hdr(struct sluice_ring_hdr *h, uint64_t size, uint32_t pid, uint32_t tid,
                     uint32_t seq, const char *arch, const char *comm, int big_endian)
{
    h->magic = SLUICE_RING_MAGIC;
    h->version = SLUICE_FORMAT_VERSION;
    h->hdr_bytes = SLUICE_RING_HDR_BYTES;
    h->data_size = size;
    h->pid = pid;
    h->tid = tid;
    h->seq = seq;
    h->big_endian = big_endian != 0;
    snprintf(h->arch, sizeof(h->arch), "%s", arch);
    snprintf(h->comm, sizeof(h->comm), "%s", comm);
}

struct ring *ring_create(uint64_t size, uint32_t pid, uint32_t tid, uint32_t seq, const char *arch,
                         const char *comm, int big_endian, struct sluice_thread_slot *slot)
{
    struct ring *r;
    int err;

    if (size < 4 * (uint64_t)SLUICE_RESERVE_MAX || (size & (size - 1)) ||
        size % (uint64_t)sysconf(_SC_PAGESIZE)) {
        errno = EINVAL;
        return NULL;
    }
    r = calloc(1, sizeof(*r));
    if (!r) {
        return NULL;
    }
    r->size = size;
    r->map_bytes = SLUICE_RING_HDR_BYTES + 2 * size;
    err = arena_alloc(SLUICE_RING_HDR_BYTES + size, &r->offset);
    if (err == 0 && map_ring(r) < 0) {
        err = -errno;
        arena_release(r->offset, SLUICE_RING_HDR_BYTES + size);
    }
    if (err < 0) {
        err = -err;
        free(r);
        errno = err;
        return NULL;
    }
    fill_hdr(r->hdr, size, pid, tid, seq, arch, comm, big_endian);
    blocks_where(&r->hdr->blocks_offset, &r->hdr->blocks_bytes);
    r->hdr->maps_at_start = maplog_position();
    r->slot = slot;
    r->hdr->data_addr = (uint64_t)(uintptr_t)r->data;
    r->hdr->written_addr = (uint64_t)(uintptr_t)r->data;
    slot->written = &r->hdr->written_addr;
    slot->cursor = (uint64_t *)r->data;
    slot->limit = (uint64_t *)(r->data + SLUICE_CHUNK_BYTES - 8); /* up to the first boundary */
    slot->ring = r;
    r->entered = SLUICE_CHUNK_BYTES; /* the first chunk overwrites nothing */
    return r;
}

/*
 * The producer may have found the slot closed just before it opens, then
 * publish one more grant (up to a chunk boundary) without this consumer:
 * so after opening, a tail further behind head than a ring less a chunk
 * moves up to head (the consumer has not been told of the ring yet, so no
 * byte it reads is skipped).
 */
void ring_slot_open(struct ring *r, unsigned i, int lossless, struct sluice_ring_tail *tail)
{
    struct sluice_ring_slot *c = &r->hdr->slot[i];
    uint64_t head = __atomic_load_n(&r->hdr->head, __ATOMIC_ACQUIRE), now;
    uint32_t bit = 1u << i;

    __atomic_store_n(&tail->tail, head, __ATOMIC_RELAXED);
    __atomic_store_n(&r->tail[i], tail, __ATOMIC_RELAXED);
    c->lossless = (uint32_t)lossless; /* for consumers to read; we keep our own */
    c->producer_waiting = 0;
    c->lost_events = 0;
    c->lost_seq = 0;
    if (lossless) {
        __atomic_or_fetch(&r->lossless_slots, bit, __ATOMIC_RELAXED);
    } else {
        __atomic_and_fetch(&r->lossless_slots, ~bit, __ATOMIC_RELAXED);
    }
    /* Pairs with free_bytes()'s and lossy_take()'s acquire loads of open_slots. */
    __atomic_or_fetch(&r->open_slots, bit, __ATOMIC_SEQ_CST);
    __atomic_store_n(&c->active, 1, __ATOMIC_RELEASE);
    now = __atomic_load_n(&r->hdr->head, __ATOMIC_SEQ_CST);
    if (now - head > r->size - SLUICE_CHUNK_BYTES) {
        __atomic_store_n(&tail->tail, now, __ATOMIC_SEQ_CST);
    }
}

void ring_slot_close(struct ring *r, unsigned i)
{
    uint32_t was = __atomic_fetch_and(&r->open_slots, ~(1u << i), __ATOMIC_RELEASE);

    if (!(was >> i & 1)) {
        return; /* not open here: r->tail[i] may be a line of a file that is gone */
    }
    __atomic_store_n(&r->hdr->slot[i].active, 0, __ATOMIC_RELEASE);
    ring_wake_producer(r, i);
}

/* Which of @p slots (open ones) have not said done with @p r. */
static uint32_t unread_of(const struct ring *r, uint32_t slots)
{
    uint32_t unread = 0;

    for (uint32_t s = slots; s; s &= s - 1) {
        const struct sluice_ring_tail *t = r->tail[__builtin_ctz(s)];

        if (!__atomic_load_n(&t->done, __ATOMIC_ACQUIRE)) {
            unread |= s & -s;
        }
    }
    return unread;
}

int ring_slot_unread(const struct ring *r, unsigned i)
{
    return unread_of(r, __atomic_load_n(&r->open_slots, __ATOMIC_ACQUIRE) & 1u << i);
}

uint32_t ring_lossy_unread(const struct ring *r)
{
    return unread_of(r, __atomic_load_n(&r->open_slots, __ATOMIC_ACQUIRE) &
                            ~__atomic_load_n(&r->lossless_slots, __ATOMIC_RELAXED));
}

uint32_t ring_unread(const struct ring *r)
{
    return unread_of(r, __atomic_load_n(&r->open_slots, __ATOMIC_ACQUIRE));
}

void ring_punch_data(struct ring *r)
{
    if (!r->punched) {
        arena_punch(r->offset + SLUICE_RING_HDR_BYTES, r->size);
        /* Our two data mappings become one reserved range: a held ring costs QEMU two
         * mappings (vm.max_map_count), not three. Still reserved: ring_destroy unmaps it. */
        (void)mmap(r->data, 2 * r->size, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
        r->punched = 1;
    }
}

uint64_t ring_held_bytes(const struct ring *r)
{
    return SLUICE_RING_HDR_BYTES + (r->head < r->size ? r->head : r->size);
}

int ring_slot_lossy(const struct ring *r, unsigned i)
{
    uint32_t open = __atomic_load_n(&r->open_slots, __ATOMIC_ACQUIRE);

    return (open & ~__atomic_load_n(&r->lossless_slots, __ATOMIC_RELAXED)) >> i & 1;
}

void ring_retire(struct ring *r)
{
    if (r->slot && r->slot->ring == r) {
        r->slot->ring = NULL;
        r->slot->written = &dead_written; /* the header goes with the ring */
    }
    r->slot = NULL;
}

int ring_done(const struct ring *r)
{
    return !ring_unread(r);
}

void ring_destroy(struct ring *r, int give_back)
{
    int done = ring_done(r);

    ring_retire(r);
    munmap(r->hdr, r->map_bytes);
    if (give_back && done) {
        arena_release(r->offset, SLUICE_RING_HDR_BYTES + r->size);
    }
    free(r);
}

/* Bytes written since the last publish: from head's place to the cursor. */
static uint64_t written(const struct ring *r)
{
    const uint8_t *start = r->data + (r->head & (r->size - 1));

    return (uint64_t)((const uint8_t *)r->slot->cursor - start);
}

/*
 * Bytes at the end of what is written that belong to the block in flight
 * (from its BLOCK record to the cursor), or inside ring_reserve() to the
 * running instruction (r->insn_at): not published, since the records may
 * still be rewritten or taken back (tb_exit, or a cut at a chunk boundary).
 */
static uint64_t held(const struct ring *r)
{
    const uint8_t *b = sluice_block_in_flight(r->slot) ? (const uint8_t *)r->slot->block_at
                                                       : (const uint8_t *)r->insn_at;
    const uint8_t *start = r->data + (r->head & (r->size - 1));

    if (!b || b < start || b >= (const uint8_t *)r->slot->cursor) {
        return 0;
    }
    return (uint64_t)((const uint8_t *)r->slot->cursor - b);
}

/* Whether a consumer sleeps on head_futex (its head_waiting word). */
static int consumer_waits(const struct ring *r)
{
    uint32_t open = __atomic_load_n(&r->open_slots, __ATOMIC_ACQUIRE);

    for (; open; open &= open - 1) {
        const struct sluice_ring_tail *t = r->tail[__builtin_ctz(open)];

        if (__atomic_load_n(&t->head_waiting, __ATOMIC_RELAXED)) {
            return 1;
        }
    }
    return 0;
}

void ring_publish(struct ring *r)
{
    uint64_t keep = held(r), n = written(r) - keep;
    uint8_t *was;

    if (n == 0) {
        return;
    }
    if (n + keep > r->size) {
        /* Cannot happen unless translated code overran its reservation. */
        fprintf(stderr, "sluice: ring of tid %u overran (%llu bytes)\n", r->hdr->tid,
                (unsigned long long)n);
        abort();
    }
    r->head += n;
    /* written_addr goes first: it must never name a position behind head,
     * or a consumer draining us after a kill right here would take the
     * ring's older lap for new records (record.h). */
    __atomic_store_n(&r->hdr->written_addr,
                     (uint64_t)(uintptr_t)(r->data + (r->head & (r->size - 1))), __ATOMIC_RELAXED);
    /* Pairs with the consumer's acquire load of head (and orders the store above before it). */
    __atomic_store_n(&r->hdr->head, r->head, __ATOMIC_RELEASE);
    /* Seq-cst: order the head store before reading head_waiting (Dekker with the reader). */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (consumer_waits(r)) {
        __atomic_fetch_add(&r->hdr->head_futex, 1, __ATOMIC_RELEASE);
        futex(&r->hdr->head_futex, FUTEX_WAKE, INT_MAX, NULL);
    }
    /* Back into the first mapping; the limit and a held block move with the cursor. */
    was = (uint8_t *)r->slot->cursor;
    r->slot->cursor = (uint64_t *)(r->data + (r->head & (r->size - 1)) + keep);
    r->slot->limit = (uint64_t *)((uint8_t *)r->slot->limit - (was - (uint8_t *)r->slot->cursor));
    /* A block that is over may lie in the second mapping, past the new
     * written_addr: it would look in flight (sluice_block_in_flight). */
    if (r->insn_at) {
        r->insn_at = keep ? (uint64_t *)((uint8_t *)r->slot->cursor - keep) : NULL;
    } else {
        r->slot->block_at = keep ? (uint64_t *)((uint8_t *)r->slot->cursor - keep) : NULL;
    }
}

void ring_publish_all(struct ring *r)
{
    /* Outside translated code: the last block and instruction are over. */
    r->slot->block_at = NULL;
    r->insn_at = NULL;
    ring_publish(r);
}

/*
 * Bytes free for the producer: the ring size minus what the slowest lossless
 * consumer has not yet taken. Tails are the consumers' and are clamped, never
 * trusted: a tail ahead of head or more than a ring behind counts as caught up
 * or as a full ring. A lossless consumer that said done with this ring while
 * it is written gave it up (it could not read it: record.h's `done`): its
 * slot is closed here, as its detach would, and no longer waited for.
 */
static uint64_t free_bytes(struct ring *r, int *waiting_for)
{
    uint32_t lossless = __atomic_load_n(&r->open_slots, __ATOMIC_ACQUIRE) &
                        __atomic_load_n(&r->lossless_slots, __ATOMIC_RELAXED);
    uint64_t used = 0;
    unsigned i;

    *waiting_for = -1;
    for (i = 0; i < SLUICE_MAX_CONSUMERS; i++) {
        uint64_t tail, behind;

        if (!(lossless >> i & 1)) {
            continue;
        }
        if (__atomic_load_n(&r->tail[i]->done, __ATOMIC_ACQUIRE)) {
            ring_slot_close(r, i);
            continue;
        }
        tail = __atomic_load_n(&r->tail[i]->tail, __ATOMIC_ACQUIRE);
        behind = tail > r->head ? 0 : r->head - tail;
        if (behind > r->size) {
            behind = r->size;
        }
        if (behind >= used) {
            used = behind;
            *waiting_for = (int)i;
        }
    }
    return r->size - used;
}

/*
 * Sleep until consumer @p i moves its tail or leaves (bounded, so we
 * re-check). The consumer wakes us only while producer_waiting is set: we
 * set it, then read its tail; it stores its tail, then reads the flag (both
 * sequentially consistent), so one of us sees the other.
 */
static void wait_for_consumer(struct ring *r, unsigned i, uint64_t need)
{
    struct sluice_ring_slot *c = &r->hdr->slot[i];
    struct sluice_ring_tail *t = r->tail[i];
    uint32_t seen = __atomic_load_n(&t->tail_futex, __ATOMIC_ACQUIRE);
    struct timespec ts = {0, 50 * 1000 * 1000};
    int w;

    __atomic_store_n(&c->producer_waiting, 1, __ATOMIC_SEQ_CST);
    if (free_bytes(r, &w) < need) {
        futex(&t->tail_futex, FUTEX_WAIT, seen, &ts);
    }
    __atomic_store_n(&c->producer_waiting, 0, __ATOMIC_RELAXED);
}

/* Wait until @p need bytes are free; returns how many are (the whole ring
 * when no lossless consumer holds any: then we never block). */
static uint64_t wait_free(struct ring *r, uint64_t need)
{
    uint64_t avail;
    int w;

    for (;;) {
        avail = free_bytes(r, &w);
        if (w < 0) {
            return r->size;
        }
        if (avail >= need) {
            return avail;
        }
        wait_for_consumer(r, (unsigned)w, need);
    }
}

/* The ring position of the cursor. */
static uint64_t cursor_pos(const struct ring *r)
{
    return r->head + written(r);
}

/*
 * A chunk of the ring's first lap, entered after a whole one was written:
 * its pages are made in one call rather than by a page fault each as
 * translated code first writes them (64 traps a chunk, the largest part of
 * a busy thread's start here: a fault costs microseconds in a virtual
 * machine). The first chunk is left to faults, so that a thread that writes
 * little holds only the pages it wrote. Best effort: before Linux 5.14, or
 * short of memory, the pages fault in as before.
 */
static void populate_chunk(struct ring *r, uint64_t chunk)
{
    if (chunk >= SLUICE_CHUNK_BYTES && chunk < r->size) {
        (void)madvise(r->data + chunk, SLUICE_CHUNK_BYTES, MADV_POPULATE_WRITE);
    }
}

/*
 * Before the first byte of a chunk is written (here, or by translated code
 * after the grant we are making): lossy consumers lose what they had not
 * taken of the chunk a lap back (lossy.c).
 */
static void enter_chunk(struct ring *r)
{
    uint64_t chunk = cursor_pos(r) & ~(uint64_t)(SLUICE_CHUNK_BYTES - 1);

    if (chunk + SLUICE_CHUNK_BYTES > r->entered) {
        lossy_take(r, chunk);
        populate_chunk(r, chunk);
        r->entered = chunk + SLUICE_CHUNK_BYTES;
    }
}

/*
 * The next @p need bytes would cross a chunk boundary: fill the @p room
 * bytes up to it with one PAD record (its body is skipped unread) and
 * publish, so the boundary is a record boundary (record.h).
 */
static void pad_to_boundary(struct ring *r, uint64_t room, uint64_t need)
{
    wait_free(r, room + need);
    *(volatile uint64_t *)r->slot->cursor = sluice_pad_hdr(room / 8);
    r->slot->cursor += room / 8;
    ring_publish(r);
}

/*
 * Where the block in flight has got: one past the instruction of its last
 * record, or the block's start if none yet; *@p mid: that instruction
 * still runs and may add records (cut there, it continues, record.h).
 * A cut comes from a reserve() at a label or in a helper, so after the
 * TB's straight start: its slot records are all written, and the last
 * slot's instruction is the progress if no record with a header follows.
 */
static unsigned block_progress(const struct ring *r, uint64_t hdr, int *mid)
{
    const uint64_t *w = r->slot->block_at + 1, *end = r->slot->cursor, *pcs;
    unsigned from = sluice_block_from(hdr), to = sluice_block_to(hdr), n;
    const uint16_t *slot = blocks_slots(sluice_block_id(hdr), &n, &pcs);
    uint64_t pc = 0;
    int j, seen = 0;

    if (sluice_rec_tag(hdr) == SLUICE_TAG_BLOCK_SLOTS && n > 0) {
        for (unsigned k = 0; k < n; k++) {
            w += sluice_slot_record_words(slot[k]); /* past the slot records */
        }
        pc = pcs[sluice_slot_insn(slot[n - 1])];
        seen = 1;
    }
    while (w < end) {
        unsigned len = sluice_rec_words(*w), tag = sluice_rec_tag(*w);

        if (len == 0 || !(tag == SLUICE_TAG_EXEC || sluice_tag_is_mem(tag))) {
            break;
        }
        pc = sluice_rec_payload(*w);
        seen = 1;
        w += len;
    }
    j = seen ? blocks_index(sluice_block_id(hdr), from, to, pc) : -1;
    *mid = j >= 0;
    return j >= 0 ? (unsigned)j : from;
}

/*
 * The block in flight reaches a chunk boundary: end its record at what
 * ran so far, pad and publish up to the boundary, and start the rest of
 * the block with a new record of the same id right after it.
 */
static void cut_block(struct ring *r, uint64_t room, uint64_t need)
{
    uint64_t hdr = *r->slot->block_at, id = sluice_block_id(hdr);
    unsigned from = sluice_block_from(hdr), to = sluice_block_to(hdr), at;
    int mid, cont = sluice_block_cont(hdr);

    at = block_progress(r, hdr, &mid);
    /* The first part: up to the running instruction, included if it has records here
     * (a BLOCK_SLOTS record stays one: its slots are all before the cut). */
    *r->slot->block_at =
        (sluice_block_hdr(id, from, mid ? at + 1 : from, cont) & SLUICE_PAYLOAD_MASK) |
        (hdr & ~SLUICE_PAYLOAD_MASK);
    r->slot->block_at = NULL;
    ring_publish(r);
    pad_to_boundary(r, room, need);
    enter_chunk(r);
    *r->slot->cursor = sluice_block_hdr(id, at, to, mid ? 1 : cont);
    r->slot->block_at = r->slot->cursor++;
}

/*
 * Give the first @p k slot records after the BLOCK_SLOTS record at @p at
 * (@p words words of them) their headers, moving them up; returns the
 * new end of the block's records.
 */
static uint64_t *put_headers(uint64_t *at, uint64_t words, unsigned k)
{
    const uint64_t *pcs;
    unsigned n;
    const uint16_t *slot = blocks_slots(sluice_block_id(*at), &n, &pcs);
    uint64_t *src = at + 1 + words, *dst = src + k;
    uint64_t *end = dst;

    while (k-- > 0) {
        unsigned rw = sluice_slot_record_words(slot[k]);

        src -= rw;
        dst -= rw;
        memmove(dst, src, rw * 8);
        *--dst = sluice_mem_hdr(pcs[sluice_slot_insn(slot[k])], slot[k] & 7,
                                (slot[k] & SLUICE_MEM_WRITE) != 0);
    }
    return end;
}

void ring_tb_left(struct ring *r)
{
    r->slot->block_at = NULL;
    __atomic_store_n(r->slot->written, (uint64_t)(uintptr_t)r->slot->cursor, __ATOMIC_RELEASE);
}

/*
 * Where the records since the TB was entered begin: `written`, a record
 * boundary at or after the last publish (stored there, at each exit of a
 * TB that writes records, and by a helper's put), in the cursor's lap.
 */
static const uint64_t *since_exit(const struct ring *r)
{
    const uint8_t *start = r->data + (r->head & (r->size - 1));
    uint64_t ahead = (*r->slot->written - (uint64_t)(uintptr_t)start) & (r->size - 1);

    return ahead <= (uint64_t)((const uint8_t *)r->slot->cursor - start)
               ? (const uint64_t *)(start + ahead)
               : (const uint64_t *)start;
}

/*
 * The last record from @p w to the cursor (a block's slot records are part
 * of its BLOCK_SLOTS record), or NULL if there is none or a word there is
 * not a record's header (then nothing is taken back).
 */
static const uint64_t *last_record(const struct ring *r, const uint64_t *w)
{
    const uint64_t *last = NULL;

    while (w < r->slot->cursor) {
        uint64_t len = sluice_rec_words(*w);

        if (sluice_rec_tag(*w) == SLUICE_TAG_BLOCK_SLOTS) {
            const uint64_t *pcs;
            unsigned n;
            const uint16_t *slot = blocks_slots(sluice_block_id(*w), &n, &pcs);

            for (len = 1; n-- > 0;) {
                len += sluice_slot_record_words(slot[n]);
            }
        }
        if (len == 0) {
            return NULL;
        }
        last = w;
        w += len;
    }
    return w == r->slot->cursor ? last : NULL;
}

/* Whether @p rec is a record of the instruction at @p pc (EXEC or MEM). */
static int record_of(const uint64_t *rec, uint64_t pc)
{
    unsigned tag = rec ? sluice_rec_tag(*rec) : SLUICE_TAG_PAD;

    return (tag == SLUICE_TAG_EXEC || sluice_tag_is_mem(tag)) &&
           sluice_rec_payload(*rec) == (pc & SLUICE_PAYLOAD_MASK);
}

/* Whether @p rec is a load record of the instruction at @p pc. */
static int load_of(const uint64_t *rec, uint64_t pc)
{
    return record_of(rec, pc) && sluice_tag_is_mem(sluice_rec_tag(*rec)) &&
           !(sluice_rec_tag(*rec) & SLUICE_MEM_WRITE);
}

/*
 * The instruction at @p pc runs again: the loads its given-up attempt
 * recorded after its last store (records with headers, from @p from on)
 * are dropped, since it makes them again (a read-modify-write whose store
 * hit its own code page; a rep string instruction's last iteration: the
 * ones before it stay, they are done).
 */
static void drop_attempt_loads(struct ring *r, const uint64_t *from, uint64_t pc)
{
    const uint64_t *last;

    while ((last = last_record(r, from)) != NULL && load_of(last, pc)) {
        r->slot->cursor = (uint64_t *)last;
    }
}

/*
 * Whether the block in flight has records of its instruction @p j at
 * @p pc: the last record from @p rec on is one, or, if none, the last whole
 * slot record is (@p slots_last: its instruction, -1 if none).
 */
static int block_wrote(const struct ring *r, const uint64_t *rec, int slots_last, uint64_t pc,
                       int j)
{
    const uint64_t *last = last_record(r, rec);

    return last ? record_of(last, pc) : slots_last >= j;
}

/*
 * No block: the instruction at @p pc runs again. Its attempt's trailing
 * loads are dropped, and its EXEC record if nothing else of it is left.
 */
static void take_back_exec(struct ring *r, uint64_t pc)
{
    const uint64_t *from = since_exit(r), *last;

    drop_attempt_loads(r, from, pc);
    last = last_record(r, from);
    if (last && *last == sluice_exec_hdr(pc)) {
        r->slot->cursor = (uint64_t *)last;
    }
}

/*
 * How many of the @p n slot records after the BLOCK_SLOTS record at @p at
 * are whole; *@p words: their words.
 */
static unsigned whole_slots(const struct ring *r, const uint64_t *at, const uint16_t *slot,
                            unsigned n, uint64_t *words)
{
    uint64_t have = (uint64_t)(r->slot->cursor - (at + 1));
    unsigned k = 0;

    for (*words = 0; k < n && *words + sluice_slot_record_words(slot[k]) <= have; k++) {
        *words += sluice_slot_record_words(slot[k]);
    }
    return k;
}

void ring_tb_exit(struct ring *r, uint64_t pc, int again)
{
    uint64_t *at = r->slot->block_at, hdr, id, words;
    const uint64_t *pcs, *rec;
    const uint16_t *slot;
    unsigned n, k, to;
    int j, slots_last = -1;

    if (!sluice_block_in_flight(r->slot) || (uint8_t *)at < r->data ||
        (uint8_t *)at >= r->data + 2 * r->size || at >= r->slot->cursor ||
        !sluice_tag_is_block(sluice_rec_tag(*at))) {
        if (again) {
            take_back_exec(r, pc);
        }
        ring_tb_left(r);
        return;
    }
    hdr = *at;
    id = sluice_block_id(hdr);
    j = blocks_index(id, sluice_block_from(hdr), sluice_block_to(hdr), pc);
    rec = at + 1; /* the first record with a header */
    if (sluice_rec_tag(hdr) == SLUICE_TAG_BLOCK_SLOTS) {
        /* How many slot records are whole: the access after them faulted. */
        slot = blocks_slots(id, &n, &pcs);
        k = whole_slots(r, at, slot, n, &words);
        /* Run again: the attempt's loads are not done (no record follows the slots). */
        while (again && j >= 0 && k > 0 && at + 1 + words == r->slot->cursor &&
               sluice_slot_insn(slot[k - 1]) == (unsigned)j && !(slot[k - 1] & SLUICE_MEM_WRITE)) {
            words -= sluice_slot_record_words(slot[--k]);
            r->slot->cursor = at + 1 + words;
        }
        slots_last = k ? (int)sluice_slot_insn(slot[k - 1]) : -1;
        if (k < n) {
            /* Room: the TB's byte count counts the headers (jitter_abi.h). */
            r->slot->cursor = put_headers(at, words, k);
            hdr = sluice_block_hdr(id, 0, sluice_block_to(hdr), 0);
        } else {
            rec += words;
        }
    }
    if (j >= 0) {
        to = (unsigned)j + 1;
        /* Run again, and nothing of it done: its exec event is taken
         * back (unless it came with the part before a cut). */
        if (again) {
            drop_attempt_loads(r, rec, pc);
        }
        if (again && !block_wrote(r, rec, slots_last, pc, j) &&
            !(sluice_block_cont(hdr) && (unsigned)j == sluice_block_from(hdr))) {
            to = (unsigned)j;
        }
        hdr = (sluice_block_hdr(id, sluice_block_from(hdr), to, sluice_block_cont(hdr)) &
               SLUICE_PAYLOAD_MASK) |
              (hdr & ~SLUICE_PAYLOAD_MASK);
    }
    *at = hdr;
    ring_tb_left(r);
}

/*
 * With no block in flight (records per instruction): the last EXEC record
 * since the TB was entered, that of the instruction running (it may yet be
 * given up and taken back, ring_tb_exit), if its records are small enough
 * to move past a chunk boundary; else NULL. At most an eighth of a chunk:
 * move_insn() then waits for less than the room to the boundary, twice the
 * held bytes and a reserve, which stays below the smallest ring (a chunk).
 */
static uint64_t *running_insn(const struct ring *r)
{
    const uint64_t *w = since_exit(r), *exec = NULL;

    while (w < r->slot->cursor) {
        uint64_t len = sluice_rec_words(*w);

        if (len == 0 || sluice_tag_is_block(sluice_rec_tag(*w))) {
            return NULL; /* not records of one instruction */
        }
        if (sluice_rec_tag(*w) == SLUICE_TAG_EXEC) {
            exec = w;
        }
        w += len;
    }
    if (!exec || w != r->slot->cursor ||
        (uint64_t)((const uint8_t *)w - (const uint8_t *)exec) > SLUICE_CHUNK_BYTES / 8) {
        return NULL;
    }
    return (uint64_t *)exec;
}

/*
 * The running instruction's records (from r->insn_at to the cursor, which
 * is @p room bytes before a chunk boundary) go after a PAD up to the
 * boundary, unpublished, so they can still be taken back.
 */
static void move_insn(struct ring *r, uint64_t room, uint64_t need)
{
    uint64_t *from = r->insn_at, keep = (uint64_t)(r->slot->cursor - from), w0 = from[0];

    r->slot->cursor = from;
    r->insn_at = NULL;
    /* The PAD's header overwrites the first word; its body keeps the rest until copied. */
    pad_to_boundary(r, room + keep * 8, need + keep * 8);
    enter_chunk(r);
    r->slot->cursor[0] = w0;
    memcpy(r->slot->cursor + 1, from + 1, (keep - 1) * 8);
    r->insn_at = r->slot->cursor;
    r->slot->cursor += keep;
}

void ring_reserve(struct ring *r, uint64_t need)
{
    uint64_t avail, room, keep;

    while (__atomic_load_n(&r->final, __ATOMIC_ACQUIRE)) {
        pause(); /* the process is exiting: wait here to be ended with it */
    }
    r->insn_at = sluice_block_in_flight(r->slot) ? NULL : running_insn(r);
    ring_publish(r);
    /* Grants end a word short: the cursor stays less than a ring ahead of
     * head, so written_addr names one position (record.h). */
    need += 8;
    keep = held(r);
    /* Bytes from the cursor to the next chunk boundary, > 0. */
    room = SLUICE_CHUNK_BYTES - ((r->head + keep) & (SLUICE_CHUNK_BYTES - 1));
    if (need > room) {
        if (keep && !r->insn_at) {
            cut_block(r, room, need + 8); /* and the new record's word */
        } else if (keep) {
            move_insn(r, room, need);
        } else {
            pad_to_boundary(r, room, need);
        }
        keep = held(r);
        room = SLUICE_CHUNK_BYTES - keep;
    }
    avail = wait_free(r, need + keep) - keep;
    enter_chunk(r);
    if (avail > room) {
        /* A grant never crosses a boundary: we publish at least once a
         * chunk, and consumers decode chunks in parallel. */
        avail = room;
    }
    r->slot->limit = (uint64_t *)((uint8_t *)r->slot->cursor + avail - 8);
    r->insn_at = NULL;
}

void ring_close(struct ring *r)
{
    ring_publish_all(r);
    __atomic_fetch_or(&r->hdr->flags, SLUICE_RING_CLOSED, __ATOMIC_RELEASE);
    __atomic_fetch_add(&r->hdr->head_futex, 1, __ATOMIC_RELEASE);
    futex(&r->hdr->head_futex, FUTEX_WAKE, INT_MAX, NULL);
}

void ring_close_final(struct ring *r)
{
    ring_close(r);
    __atomic_store_n(&r->final, 1, __ATOMIC_RELEASE);
    /* Its next TB start (or helper record) finds no room and calls reserve. */
    r->slot->limit = r->slot->cursor;
}

int ring_final(const struct ring *r)
{
    return __atomic_load_n(&r->final, __ATOMIC_ACQUIRE);
}

void ring_wake_producer(struct ring *r, unsigned slot)
{
    struct sluice_ring_tail *t = __atomic_load_n(&r->tail[slot], __ATOMIC_ACQUIRE);

    if (t) {
        __atomic_fetch_add(&t->tail_futex, 1, __ATOMIC_RELEASE);
        futex(&t->tail_futex, FUTEX_WAKE, INT_MAX, NULL);
    }
}
