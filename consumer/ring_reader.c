/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ring_reader.c — the consumer's view of one ring (layout: sluice/record.h).
 *
 * Owns the read-only mapping of one ring; writes only this consumer's line
 * of its tail file (record.h). Runs on
 * the session's reader thread for that ring, except ring_reader__release()
 * and ring_reader__intact() (any thread). The producer is another process
 * that may be buggy or hostile: every header field is validated once at
 * open and copied (data_size is never re-read), and head is checked against
 * our position before any span is taken. Spans are read in place by the
 * decoder, which validates every record it reads (decode.c). Nothing here
 * may crash on bad input or read outside the mapping; errors go to r->err
 * with the thread id and byte position.
 */
#include "ring_reader.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

/* Largest data area we accept: keeps hdr + 2 * size far from overflow. */
#define RING_MAX_DATA (1ull << 40)

static int fail(struct ring_reader *r, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(struct ring_reader *r, int err, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(r->err, sizeof(r->err), fmt, ap);
    va_end(ap);
    return -err;
}

static long futex(uint32_t *word, int op, uint32_t val, const struct timespec *ts)
{
    /* Shared futexes (no FUTEX_PRIVATE_FLAG): the producer is another process. */
    return syscall(SYS_futex, word, op, val, ts, NULL, 0);
}

/* Check the header copy @p h; on success return 0 and leave r untouched. */
static int check_header(struct ring_reader *r, const struct sluice_ring_hdr *h, off_t file_size,
                        uint64_t offset, unsigned slot)
{
    long page = sysconf(_SC_PAGESIZE);

    if (h->magic != SLUICE_RING_MAGIC) {
        return fail(r, EINVAL, "ring: bad magic 0x%016" PRIx64 " (want 0x%016llx)", h->magic,
                    SLUICE_RING_MAGIC);
    }
    if (h->version != SLUICE_FORMAT_VERSION) {
        return fail(r, EINVAL, "ring: format version %" PRIu32 ", this consumer reads %u",
                    h->version, SLUICE_FORMAT_VERSION);
    }
    if (h->hdr_bytes != SLUICE_RING_HDR_BYTES) {
        return fail(r, EINVAL, "ring: hdr_bytes %" PRIu32 " (want %u)", h->hdr_bytes,
                    SLUICE_RING_HDR_BYTES);
    }
    if (h->data_size < (uint64_t)page || h->data_size > RING_MAX_DATA ||
        (h->data_size & (h->data_size - 1)) != 0) {
        return fail(r, EINVAL,
                    "ring: data_size %" PRIu64 " is not a power of two between %ld and %llu",
                    h->data_size, page, RING_MAX_DATA);
    }
    if ((uint64_t)file_size < offset ||
        (uint64_t)file_size - offset < SLUICE_RING_HDR_BYTES + h->data_size) {
        return fail(r, EINVAL,
                    "ring: file size %lld < offset %" PRIu64 " + header + data_size %" PRIu64,
                    (long long)file_size, offset, SLUICE_RING_HDR_BYTES + h->data_size);
    }
    if (slot >= SLUICE_MAX_CONSUMERS) {
        return fail(r, EINVAL, "ring: consumer slot %u out of range (max %d)", slot,
                    SLUICE_MAX_CONSUMERS - 1);
    }
    return 0;
}

/* Map [hdr][data][data] into a fresh reservation (the producer's layout). */
static int map_ring(struct ring_reader *r, int fd, uint64_t offset, uint64_t size)
{
    size_t len = SLUICE_RING_HDR_BYTES + 2 * size;
    uint8_t *base = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    int flags = MAP_SHARED | MAP_FIXED, err = errno;
    uint8_t *data;

    if (base == MAP_FAILED) {
        return fail(r, err, "ring: reserving %zu bytes: %s", len, strerror(err));
    }
    data = base + SLUICE_RING_HDR_BYTES; /* (not before: MAP_FAILED plus an offset is UB) */
    /* All of it read-only: our words are in our tail file. */
    off_t hdr = (off_t)offset, first = hdr + SLUICE_RING_HDR_BYTES;

    if (mmap(base, SLUICE_RING_HDR_BYTES, PROT_READ, flags, fd, hdr) == MAP_FAILED ||
        mmap(data, size, PROT_READ, flags, fd, first) == MAP_FAILED ||
        mmap(data + size, size, PROT_READ, flags, fd, first) == MAP_FAILED) {
        int err = errno;

        munmap(base, len);
        return fail(r, err, "ring: mapping %" PRIu64 "-byte ring: %s", size, strerror(err));
    }
    r->map = base;
    r->map_len = len;
    r->hdr = (struct sluice_ring_hdr *)base;
    r->data = data;
    r->size = size;
    return 0;
}

int ring_reader__open(struct ring_reader *r, int fd, uint64_t offset, unsigned slot,
                      struct sluice_ring_tail *tail)
{
    struct sluice_ring_hdr h;
    struct stat st;
    int err, seals;

    memset(r, 0, sizeof(*r));
    if (fstat(fd, &st) < 0) {
        return fail(r, errno, "ring: fstat: %s", strerror(errno));
    }
    /* A file that can shrink under our mapping could make us die of SIGBUS. */
    seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
        return fail(r, EINVAL, "ring: the arena is not sealed against shrinking (F_SEAL_SHRINK)");
    }
    /* Validate a private copy, so the producer cannot change what we checked. */
    if (offset % SLUICE_RING_HDR_BYTES != 0 || offset > (uint64_t)INT64_MAX ||
        pread(fd, &h, sizeof(h), (off_t)offset) != (ssize_t)sizeof(h)) {
        return fail(r, EINVAL, "ring: no %zu-byte header at offset %" PRIu64, sizeof(h), offset);
    }
    err = check_header(r, &h, st.st_size, offset, slot);
    if (err == 0) {
        err = map_ring(r, fd, offset, h.data_size);
    }
    if (err == 0) {
        r->ino = (uint64_t)st.st_ino;
        r->offset = offset;
        r->blocks_offset = h.blocks_offset;
        r->blocks_bytes = h.blocks_bytes;
        r->maps_at_start = h.maps_at_start;
        r->slot = slot;
        r->tail = tail;
        r->pos = __atomic_load_n(&tail->tail, __ATOMIC_ACQUIRE);
        r->start = r->pos;
    }
    return err;
}

void ring_reader__close(struct ring_reader *r)
{
    if (r->map) {
        munmap(r->map, r->map_len);
    }
    r->map = NULL;
    r->hdr = NULL;
    r->data = NULL;
}

/* Where the records end: the published head, or what salvage found past it. */
static uint64_t head_of(const struct ring_reader *r)
{
    /* Acquire pairs with the producer's release store of head: records below
     * head are fully written before we see head. */
    uint64_t head = __atomic_load_n(&r->hdr->head, __ATOMIC_ACQUIRE);

    return r->salvaged > head ? r->salvaged : head;
}

/*
 * The position the producer's written_addr names, or head if it names
 * none. What a producer wrote past head lies in its last grant, which
 * never crosses a chunk boundary (record.h): a position past the next
 * boundary is a stale or forged address, and names nothing.
 */
static uint64_t written_pos(const struct ring_reader *r, uint64_t head)
{
    uint64_t off = __atomic_load_n(&r->hdr->written_addr, __ATOMIC_ACQUIRE) - r->hdr->data_addr;
    uint64_t pos = head + ((off - head) & (r->size - 1));
    uint64_t boundary = (head | (SLUICE_CHUNK_BYTES - 1)) + 1;

    if (off >= 2 * r->size || (off & 7) != 0 || pos > boundary) {
        return head;
    }
    return pos;
}

int64_t ring_reader__salvage(struct ring_reader *r)
{
    uint64_t head = __atomic_load_n(&r->hdr->head, __ATOMIC_ACQUIRE), pos = head, end;
    int64_t avail = ring_reader__avail(r);

    if (avail < 0) {
        return avail;
    }
    /* Whole records up to the cursor the producer stored at its last TB
     * start or publish, never past a ring's worth beyond our tail. */
    end = written_pos(r, head);
    while (pos < end && pos + 8 - r->pos <= r->size) {
        uint64_t hdr = le64toh(*(const volatile uint64_t *)(r->data + (pos & (r->size - 1))));
        unsigned len = sluice_rec_words(hdr);

        if (sluice_rec_tag(hdr) == SLUICE_TAG_BLOCK_SLOTS) {
            /* Its slot records have no header to walk: the producer stored
             * `end` as it left a TB, after whole records (the decoder checks them). */
            pos = end;
            break;
        }
        if (len == 0 || pos + (uint64_t)len * 8 > end ||
            pos + (uint64_t)len * 8 - r->pos > r->size) {
            break;
        }
        pos += (uint64_t)len * 8;
    }
    r->salvaged = pos;
    return (int64_t)(pos - head);
}

int64_t ring_reader__avail(struct ring_reader *r)
{
    uint64_t head = head_of(r);

    if (head < r->pos) {
        return fail(r, EPROTO, "ring of tid %" PRIu32 ": head %" PRIu64 " behind tail %" PRIu64,
                    r->hdr->tid, head, r->pos);
    }
    if ((head & 7) != 0) {
        return fail(r, EPROTO, "ring of tid %" PRIu32 ": head %" PRIu64 " not 8-byte aligned",
                    r->hdr->tid, head);
    }
    if (head - r->pos > r->size) {
        return fail(r, EPROTO,
                    "ring of tid %" PRIu32 ": overrun, head %" PRIu64 " is %" PRIu64
                    " bytes past tail, ring holds %" PRIu64,
                    r->hdr->tid, head, head - r->pos, r->size);
    }
    return (int64_t)(head - r->pos);
}

uint64_t ring_reader__head(const struct ring_reader *r)
{
    return head_of(r);
}

int ring_reader__slot_open(const struct ring_reader *r)
{
    return __atomic_load_n(&r->hdr->slot[r->slot].active, __ATOMIC_ACQUIRE) != 0;
}

int ring_reader__closed(const struct ring_reader *r)
{
    /* Acquire pairs with the producer's release store of flags after its last publish. */
    return (__atomic_load_n(&r->hdr->flags, __ATOMIC_ACQUIRE) & SLUICE_RING_CLOSED) != 0;
}

ssize_t ring_reader__take(struct ring_reader *r, const uint64_t **words, uint64_t *at)
{
    int64_t avail = ring_reader__avail(r);
    uint64_t room = SLUICE_CHUNK_BYTES - (r->pos & (SLUICE_CHUNK_BYTES - 1));
    uint64_t n;

    if (avail <= 0) {
        return avail;
    }
    /* Head and chunk boundaries are record boundaries (record.h): no walk. */
    n = (uint64_t)avail < room ? (uint64_t)avail : room;
    /* The data area is mapped twice, so n <= size bytes are contiguous. */
    *words = (const uint64_t *)(r->data + (r->pos & (r->size - 1)));
    *at = r->pos;
    r->pos += n;
    return (ssize_t)n;
}

int ring_reader__intact(const struct ring_reader *r, uint64_t at)
{
    uint64_t head;

    /* The span's loads come before this load of head. Salvaged bytes past
     * head are a dead producer's: nothing overwrites them. */
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    head = __atomic_load_n(&r->hdr->head, __ATOMIC_ACQUIRE);
    return head <= at || head - at <= r->size;
}

void ring_reader__evict(const void *words, size_t len)
{
#if defined(__x86_64__)
    const char *line = (const char *)((uintptr_t)words & ~(uintptr_t)63);
    const char *end = (const char *)words + len;

    /* CLFLUSH, not CLFLUSHOPT: as fast here, and in every x86-64 CPU. */
    for (; line < end; line += 64) {
        _mm_clflush(line);
    }
#else
    (void)words; /* not measured on other hosts: their flush may cost more than it saves */
    (void)len;
#endif
}

void ring_reader__release(struct ring_reader *r, uint64_t end)
{
    struct sluice_ring_tail *c = r->tail;
    uint64_t old = __atomic_load_n(&c->tail, __ATOMIC_RELAXED);

    /* Monotonic whoever calls (the ordering thread in order, the reader
     * thread when it discards): the tail never moves back. Sequentially
     * consistent, paired with the producer's producer_waiting flag
     * (jitter/ring.c): either it sees our tail or we see it waiting. */
    do {
        if (end <= old) {
            return;
        }
    } while (
        !__atomic_compare_exchange_n(&c->tail, &old, end, 1, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
    if (__atomic_load_n(&r->hdr->slot[r->slot].producer_waiting, __ATOMIC_SEQ_CST)) {
        __atomic_fetch_add(&c->tail_futex, 1, __ATOMIC_RELEASE);
        futex(&c->tail_futex, FUTEX_WAKE, INT_MAX, NULL);
    }
}

int ring_reader__claim(struct ring_reader *r, uint64_t at, uint64_t end)
{
    /* Sequentially consistent: the copy's loads come before it, and the
     * producer's take (lossy.c) is a compare-and-swap of the same word
     * before it overwrites: if ours wins, the copy was whole. */
    return __atomic_compare_exchange_n(&r->tail->tail, &at, end, 0, __ATOMIC_SEQ_CST,
                                       __ATOMIC_SEQ_CST);
}

int ring_reader__lost(struct ring_reader *r, uint64_t *tail, uint64_t *lost)
{
    const struct sluice_ring_slot *c = &r->hdr->slot[r->slot];

    for (int k = 0; k < 100000; k++) {
        /* Acquire pairs with the producer's release store making it even. */
        uint32_t seq = __atomic_load_n(&c->lost_seq, __ATOMIC_ACQUIRE);

        *tail = __atomic_load_n(&r->tail->tail, __ATOMIC_ACQUIRE);
        *lost = __atomic_load_n(&c->lost_events, __ATOMIC_ACQUIRE);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (!(seq & 1) && __atomic_load_n(&c->lost_seq, __ATOMIC_RELAXED) == seq) {
            return 0;
        }
        if (k > 64) {
            sched_yield(); /* the producer is in the middle of a take */
        }
    }
    return fail(r, EPROTO, "ring of tid %" PRIu32 ": its lost count never holds still (lost_seq)",
                r->hdr->tid);
}

void ring_reader__discard(struct ring_reader *r)
{
    uint64_t head = head_of(r);

    if (head > r->pos) {
        r->pos = head;
    }
    ring_reader__release(r, r->pos);
}

void ring_reader__done(struct ring_reader *r)
{
    /* Release: every read of the mapping above comes before it. */
    __atomic_store_n(&r->tail->done, 1, __ATOMIC_RELEASE);
}

void ring_reader__give_up(struct sluice_ring_tail *tail)
{
    /* done first: the producer reads it once woken (or at its next wait). */
    __atomic_store_n(&tail->done, 1, __ATOMIC_SEQ_CST);
    __atomic_fetch_add(&tail->tail_futex, 1, __ATOMIC_RELEASE);
    futex(&tail->tail_futex, FUTEX_WAKE, INT_MAX, NULL);
}

int ring_reader__arm(struct ring_reader *r, uint32_t *seen)
{
    const struct sluice_ring_hdr *h = r->hdr;

    /* Announce ourselves before re-checking head (sequentially consistent):
     * the producer stores head, then reads our head_waiting, so either it
     * sees us and wakes the futex, or we see its new head here. One reader
     * thread per ring and session: a store, not a count. */
    __atomic_store_n(&r->tail->head_waiting, 1, __ATOMIC_SEQ_CST);
    *seen = __atomic_load_n(&h->head_futex, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&h->head, __ATOMIC_SEQ_CST) == r->pos && !ring_reader__closed(r)) {
        return 1;
    }
    ring_reader__disarm(r);
    return 0;
}

void ring_reader__disarm(struct ring_reader *r)
{
    __atomic_store_n(&r->tail->head_waiting, 0, __ATOMIC_SEQ_CST);
}

const uint32_t *ring_reader__head_futex(const struct ring_reader *r)
{
    return (const uint32_t *)&r->hdr->head_futex;
}

int ring_reader__wait(struct ring_reader *r, int timeout_ms)
{
    struct timespec ts = {timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000};
    uint32_t seen;

    if (ring_reader__arm(r, &seen)) {
        /* A wait needs only read access: the header is mapped read-only. */
        futex((uint32_t *)ring_reader__head_futex(r), FUTEX_WAIT, seen, &ts);
        ring_reader__disarm(r);
    }
    return 0;
}
