/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * session.c — libsluice's public API (sluice/consumer.h): wiring of the
 * control socket, one reader thread per ring, the worker pool and the
 * ordering stage.
 *
 * Threads: sluice_session__run() runs on the caller's thread and reads the
 * control socket; each ring gets a reader thread (ring_thread) that cuts the
 * published records into spans (chunks) without reading them; workers
 * decode them in place (decode.c); one ordering thread gives each span back
 * to the producer, in order, and calls `thread` and `trace` (order.c). A
 * worker waits, besides on the work queue, only for the ordering thread to
 * deliver a slice of the chunk it holds (work(): why it cannot deadlock). A
 * process's block table is mapped once, with its first ring, and unmapped
 * after its last ends (block_table.c). The
 * reader threads must never wait on analysis except through the bounded
 * chunk pool (which also bounds the ring bytes held), and no user callback
 * is ever called with a session lock held. A recording session
 * (sluice_consumer_opts.record) has each worker compress its span and the
 * ordering thread write it (tf_write.c); a session of a trace file takes
 * its chunks from file_source.c instead of the rings, through the same
 * workers and ordering stage (the state both share: session_state.h).
 */
#include "sluice/consumer.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "block_table.h"
#include "chunk.h"
#include "ctl_io.h"
#include "decode.h"
#include "order.h"
#include "ring_reader.h"
#include "session.h"
#include "session_state.h"
#include "tf_read.h"
#include "tf_write.h"
#include "workq.h"

/*
 * How long a reader sleeps on the futex before it looks again. Producers
 * wake it when they publish or close, and the control thread when the
 * stream ends, so this only bounds a missed wake-up; it is long because a
 * guest with 10 000 threads has 10 000 readers (50 ms made them burn both
 * cores waking up).
 */
#define WAIT_MS 1000
/* Chunks in flight per worker: enough to keep workers busy while the
 * ordering thread catches up, small enough to bound memory. */
#define CHUNKS_PER_WORKER 4

int session_error(struct sluice_session *s, int code, const char *fmt, ...)
{
    va_list ap;

    pthread_mutex_lock(&s->err_lock);
    if (s->err_code == 0) {
        s->err_code = code;
        va_start(ap, fmt);
        vsnprintf(s->err, sizeof(s->err), fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&s->err_lock);
    return code;
}

/* What ctl_recv()'s @p n < 0 means, for a person. */
static const char *recv_error(int n)
{
    return n == -EMFILE ? "a descriptor the jitter sent was dropped: too many open files here "
                          "(ulimit -n)"
                        : strerror(-n);
}

/* A session on @p ctl_fd; says HELLO on it if @p hello. */
static struct sluice_session *session_new(int ctl_fd, const struct sluice_callbacks *cb,
                                          const struct sluice_consumer_opts *opts, int hello)
{
    struct sluice_session *s;
    int err;

    if (ctl_fd < 0 || !cb || cb->sz == 0 || (opts && opts->sz == 0)) {
        if (ctl_fd >= 0) {
            close(ctl_fd);
        }
        errno = EINVAL;
        return NULL;
    }
    s = calloc(1, sizeof(*s));
    if (!s) {
        close(ctl_fd);
        errno = ENOMEM;
        return NULL;
    }
    /* Copy only what the caller's struct version has; the rest stays zero. */
    memcpy(&s->cb, cb, cb->sz < sizeof(s->cb) ? cb->sz : sizeof(s->cb));
    s->fd = ctl_fd;
    s->wake[0] = s->wake[1] = -1;
    s->tails_fd = -1;
    s->welcome_ms = -1;
    s->lossless = !(opts && opts->lossy);
    s->workers = opts ? opts->workers : 0;
    if (s->workers == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        s->workers = n > 0 ? (unsigned)n : 1;
    }
    s->rings_tail = &s->rings;
    if (opts && opts->sz >= offsetof(struct sluice_consumer_opts, record) + sizeof(opts->record) &&
        opts->record) {
        char why[320];

        s->rec = tf_writer__open(opts->record, why, sizeof(why));
        if (!s->rec) {
            err = errno ? errno : EIO;
            free(s);
            close(ctl_fd);
            errno = err;
            return NULL;
        }
    }
    pthread_mutex_init(&s->err_lock, NULL);
    pthread_mutex_init(&s->rings_lock, NULL);
    pthread_cond_init(&s->readers_done, NULL);
    block_tables__init(&s->tables);
    if (pipe2(s->wake, O_CLOEXEC | O_NONBLOCK) < 0) {
        err = -errno;
        sluice_session__free(s);
        errno = -err;
        return NULL;
    }
    err = hello ? ctl_send_hello(ctl_fd, s->lossless) : 0;
    /* A jitter that refused us at connect (another uid) has closed its end
     * after saying why: sluice_session__run() reads the reason. */
    if (err && err != -EPIPE && err != -ECONNRESET) {
        sluice_session__free(s);
        errno = -err;
        return NULL;
    }
    return s;
}

struct sluice_session *sluice_session__new(int ctl_fd, const struct sluice_callbacks *cb,
                                           const struct sluice_consumer_opts *opts)
{
    return session_new(ctl_fd, cb, opts, 1);
}

/* --- ordering thread ---------------------------------------------------- */

static void on_start(void *ctx, struct order_ring *o)
{
    struct sluice_session *s = ctx;
    struct ring_state *r = container_of(o, struct ring_state, ord);

    if (s->rec) {
        r->file_no = s->rec_rings++;
        tf_writer__ring(s->rec, r->file_no, &r->info, r->bt);
    }
    if (s->cb.thread) {
        s->cb.thread(s->cb.user, &r->info, 1);
    }
}

/*
 * A span the decoder refused (c->bad), or one a lapping producer overwrote
 * while it was decoded (then nothing decoded from it is delivered). Stream
 * order: a later span of the same ring may fail first in another worker
 * (one that starts in the middle of the bad record), and only the first is
 * the error to report.
 */
static void report_bad_span(struct sluice_session *s, struct ring_state *r, const struct chunk *c)
{
    unsigned long long at = c->bad_at, end = c->at + c->len;
    char where[400];

    /* Live: the ring. A trace file's: the file, and the chunk with its thread. */
    if (s->file_path) {
        snprintf(where, sizeof(where), "%s: chunk %llu of tid %u", s->file_path,
                 (unsigned long long)c->ord.seq, r->info.tid);
    } else {
        snprintf(where, sizeof(where), "ring of tid %u", r->info.tid);
    }

    if (c->bad == CHUNK_BAD_LAPPED) {
        session_error(s, -EPROTO,
                      "%s: overrun, the producer overwrote position %llu while it was read", where,
                      (unsigned long long)c->at);
    } else if (c->bad == CHUNK_BAD_BLOCK) {
        session_error(s, -EPROTO,
                      "%s: invalid BLOCK record 0x%016llx (block %llu) at position %llu: "
                      "%s",
                      where, (unsigned long long)c->bad_hdr,
                      (unsigned long long)sluice_block_id(c->bad_hdr), at, c->bad_why);
    } else if (c->bad == CHUNK_BAD_PC || c->bad == CHUNK_BAD_MAP) {
        session_error(s, -EPROTO, "%s: record 0x%016llx at position %llu: %s", where,
                      (unsigned long long)c->bad_hdr, at, c->bad_why);
    } else if (c->bad == CHUNK_BAD_FILE) {
        session_error(s, -EPROTO, "%s: %s", s->file_path, c->bad_why);
    } else if (c->bad == CHUNK_BAD_NOMEM) {
        session_error(s, -ENOMEM, "%s: out of memory for the events of the block at position %llu",
                      where, at);
    } else if (c->bad == CHUNK_BAD_HEADER) {
        session_error(s, -EPROTO, "%s: invalid record header 0x%016llx at position %llu", where,
                      (unsigned long long)c->bad_hdr, at);
    } else {
        session_error(s, -EPROTO,
                      "%s: record at position %llu (%u words) crosses the end of its "
                      "span at %llu (head or a chunk boundary)",
                      where, at, sluice_rec_words(c->bad_hdr), end);
    }
}

/*
 * A chunk's items in their turn: the whole chunk, or a slice of one whose
 * worker waits (work()) and gets it back here.
 */
static void on_deliver(void *ctx, struct order_entry *e)
{
    struct sluice_session *s = ctx;
    struct ring_state *r = container_of(e->ring, struct ring_state, ord);
    struct chunk *c;
    size_t i;
    int partial;

    if (e == &r->end) {
        return; /* on_end follows */
    }
    c = container_of(e, struct chunk, ord);
    partial = c->ord.partial;
    if (!partial && r->rd.hdr) {
        /* In order, the span decoded to its end: the producer may reuse it
         * (the items are copies). A slice's span is still being read. A
         * trace file's ring has no producer (rd.hdr NULL). */
        ring_reader__release(&r->rd, c->at + c->len);
        __atomic_store_n(&r->released, c->at + c->len, __ATOMIC_RELEASE);
    }
    if (!r->stopped && !partial && s->rec && c->bad != CHUNK_BAD_LAPPED) {
        /* Whole and in order; a bad record is kept, so the file fails where this did. */
        tf_writer__chunk(s->rec, r->file_no, r->bt, r->file_chunks++, c->at, c->maps_pos,
                         c->pack_snapshot, c->pack, r->file_insns);
    }
    if (!r->stopped) {
        r->counts.insns += c->counts.insns;
        r->counts.loads += c->counts.loads;
        r->counts.stores += c->counts.stores;
        r->counts.lost += c->counts.lost;
        __atomic_fetch_add(&s->lost, c->counts.lost, __ATOMIC_RELAXED);
        for (i = 0; s->cb.trace && i < c->n_items; i++) {
            s->cb.trace(s->cb.user, &r->info, c->items + i * s->cb.item_size);
        }
        if (c->bad) {
            report_bad_span(s, r, c);
            r->stopped = 1; /* what follows a bad record is not this thread's trace */
        }
        if (!partial) {
            r->file_insns = r->counts.insns; /* the next chunk's "before it" */
        }
    }
    if (partial) {
        chunk__slice_done(c, !r->stopped); /* back to its worker */
        return;
    }
    chunk_pool__put(&s->pool, c);
}

static void on_end(void *ctx, struct order_ring *o)
{
    struct sluice_session *s = ctx;
    struct ring_state *r = container_of(o, struct ring_state, ord);

    if (s->rec) {
        tf_writer__ring_end(s->rec, r->file_no, r->file_chunks, r->hdr_lost, r->salvaged);
    }
    if (s->cb.thread) {
        s->cb.thread(s->cb.user, &r->info, 0);
    }
    /* Every span was delivered and given back, and the reader is done:
     * the ring's pages go now, not when the session ends; and the jitter
     * may give them back to the kernel once every consumer has said so. */
    pthread_mutex_lock(&s->rings_lock);
    if (r->rd.hdr) { /* not a trace file's */
        ring_reader__close(&r->rd);
        ring_reader__done(&r->rd);
    }
    pthread_mutex_unlock(&s->rings_lock);
    block_tables__put(&s->tables, r->bt); /* the last ring of its arena unmaps it */
    r->bt = NULL;
}

/* --- workers ------------------------------------------------------------- */

/*
 * A trace file's chunk: decompress its stored span into its copy area.
 * Returns 1, or 0 with the chunk marked bad (nothing of it is decoded).
 */
static int unpack_chunk(struct chunk *c)
{
    char why[160];
    size_t len;
    int ok =
        tf_packed__unpack(c->packed, c->copy, SLUICE_CHUNK_BYTES + 8, &len, why, sizeof(why)) == 0;

    c->packed->len = 0; /* used */
    if (!ok) {
        c->bad = CHUNK_BAD_FILE;
        c->bad_at = c->at;
        c->partial = 0;
        c->ord.partial = 0;
        snprintf(c->bad_why, sizeof(c->bad_why), "%.120s: %.120s", c->packed->name, why);
    }
    return ok;
}

/*
 * A chunk whose items would pass the bound (chunk_items_max()) is decoded
 * in slices, and its worker waits for each to be delivered (design b),
 * rather than handing the rest of the decode to the ordering thread
 * (design a): worker callbacks stay on worker threads as consumer.h says,
 * and the one ordering thread, already the serial stage, does not take on
 * decoding, which for a nop loop is most of the work.
 *
 * It cannot deadlock, with any number of workers. A worker waiting on
 * chunk k of a ring waits for the ordering thread to reach chunk k, i.e.
 * for chunks 0..k-1 of that ring to be delivered whole. The ring's reader
 * numbers its chunks and pushes them to the FIFO work queue in that order
 * (read_chunk), and workers take from its head, so chunks 0..k-1 were all
 * taken before k: none is left waiting for a free worker. Take the first
 * of them not yet delivered, m: it is with the ordering stage (delivered
 * next: every chunk before it has been), or with a worker that is
 * decoding it (a slice ends after at most items_max events, as does the
 * decode) or waiting for its slice to be delivered (the same case). The
 * ordering thread waits for nothing but pushes, and calls only user
 * callbacks. So m is delivered, then m + 1, ... then k. Each slice makes
 * at least one event (decode.c), so a chunk takes finitely many.
 *
 * Per slice, as for a whole chunk: the lapped check follows its loads, so
 * nothing decoded from an overwritten span is ever delivered (earlier
 * slices were checked before theirs were); its events and counts are added
 * once it is decoded and delivered; a bad record can only end the last
 * slice, and is reported in stream order by on_deliver(); the span is
 * released only with the last slice.
 */
static void work(void *ctx, struct chunk *c)
{
    struct sluice_session *s = ctx;
    struct ring_state *r = c->ring;

    if (c->packed && c->packed->len && !unpack_chunk(c)) {
        order__push(&s->ord, &c->ord); /* bad: delivered as such, in its turn */
        return;
    }
    if (s->rec) {
        /* Before the decode: a lossless span is in place, and the producer may reuse it
         * once it is delivered. A failure (no memory) is the writer's to report. */
        tf_pack__span(&c->pack, c->words, c->len);
        c->pack_snapshot = c->snapshot;
    }
    for (;;) {
        uint64_t n = decode_chunk(c, &s->cb, &r->info);
        int partial;

        if (!c->copied && !ring_reader__intact(&r->rd, c->at)) {
            c->bad = CHUNK_BAD_LAPPED;
            c->partial = 0;
            n = 0;
            c->n_items = 0;
            memset(&c->counts, 0, sizeof(c->counts));
        }
        if (c->bad) {
            __atomic_store_n(&r->failed, 1, __ATOMIC_RELAXED); /* the reader stops taking spans */
        }
        __atomic_fetch_add(&s->events, n, __ATOMIC_RELAXED);
        /* Read before the push: a whole chunk is the ordering thread's from then on, and
         * may be back in the pool, refilled and sliced by another worker, before this one
         * looks at it again (which once made a worker wait for another's slice forever). */
        partial = c->partial;
        c->ord.partial = partial;
        order__push(&s->ord, &c->ord);
        if (!partial) {
            return; /* the ordering thread's now */
        }
        if (!chunk__slice_wait(c)) {
            /* An earlier chunk of the ring was bad: nothing more of it is
             * delivered. Finish the chunk undecoded, so it is released. */
            c->ord.partial = 0;
            order__push(&s->ord, &c->ord);
            return;
        }
    }
}

/* --- reader threads ------------------------------------------------------ */

/* Whether the ring has ended: closed by its thread, or the whole trace
 * ended. Both are checked before head so the head we then see is final. */
static int ring_ended(struct ring_state *r)
{
    return ring_reader__closed(&r->rd) || __atomic_load_n(&r->s->eof, __ATOMIC_ACQUIRE);
}

/* After an error: once every span taken is out of the workers' hands (the
 * producer must not overwrite a span being decoded), keep releasing the
 * ring until it ends, so a lossless producer is never blocked by a reader
 * that gave up on it. */
static void discard_until_end(struct ring_state *r)
{
    while (__atomic_load_n(&r->released, __ATOMIC_ACQUIRE) < r->rd.pos) {
        usleep(1000);
    }
    while (!ring_ended(r)) {
        ring_reader__discard(&r->rd);
        ring_reader__wait(&r->rd, WAIT_MS);
    }
    ring_reader__discard(&r->rd);
}

/*
 * Put a LOST record of what the producer took from us since the last one
 * (lost_events above lost_seen) in @p copy[0], if anything; returns 1 if
 * it did. Reader thread, lossy rings.
 */
static int lost_word(struct ring_state *r, uint64_t *copy, uint64_t lost)
{
    uint64_t n = lost - r->lost_seen;

    if (lost <= r->lost_seen) {
        return 0; /* nothing new (a count that went back is a broken producer's: ignored) */
    }
    r->lost_seen = lost;
    copy[0] = htole64((uint64_t)SLUICE_TAG_LOST << SLUICE_TAG_SHIFT |
                      (n > SLUICE_PAYLOAD_MASK ? SLUICE_PAYLOAD_MASK : n));
    return 1;
}

/*
 * A lossy ring: read (tail, lost) as one pair and go on from where the
 * producer left our tail if it took what lay before. 0 or -EPROTO.
 */
static int catch_up(struct ring_state *r, uint64_t *tail, uint64_t *lost)
{
    if (ring_reader__lost(&r->rd, tail, lost) < 0) {
        return -EPROTO;
    }
    if (*tail > r->rd.pos) {
        r->rd.pos = *tail; /* the producer took what lay before */
    }
    return 0;
}

/*
 * A lossy ring's next span, into @p c: copied out of the ring, then taken
 * by moving our tail from its start to its end (ring_reader__claim). If
 * the producer moved the tail first, it took the span (lossy.c) and we go
 * on from where it left the tail. What it took since the last span is put
 * in front of the copy as a LOST record, so the worker delivers it in its
 * place in the stream: the (tail, lost) pair is read before the claim, and
 * the claim succeeds only if no take came between.
 * Returns the span's bytes (0: nothing published), or a negative errno.
 */
static ssize_t take_lossy(struct ring_state *r, struct chunk *c)
{
    uint64_t *copy = chunk__copy_area(c);

    if (!copy) {
        return -ENOMEM;
    }
    for (int tries = 0;; tries++) {
        uint64_t tail, lost, at;
        const uint64_t *words;
        ssize_t n;
        int with_lost;

        if (catch_up(r, &tail, &lost) < 0) {
            return -EPROTO;
        }
        n = ring_reader__take(&r->rd, &words, &at);
        if (n <= 0 || at != tail) {
            if (n < 0 && tries < 1000) {
                continue; /* lapped between the two loads: the producer took it, look again */
            }
            if (n > 0) {
                r->rd.pos = at;
                return session_error(r->s, -EPROTO, "ring of tid %u: tail %llu behind our %llu",
                                     r->info.tid, (unsigned long long)tail, (unsigned long long)at);
            }
            return n;
        }
        memcpy(copy + 1, words, (size_t)n);
        if (!ring_reader__claim(&r->rd, at, at + (uint64_t)n)) {
            r->rd.pos = at; /* taken by the producer: start again from its tail */
            continue;
        }
        with_lost = lost_word(r, copy, lost);
        c->words = copy + 1 - with_lost;
        c->at = at - 8 * (uint64_t)with_lost;
        c->len = (size_t)n + 8 * (size_t)with_lost;
        c->copied = 1;
        return n;
    }
}

/*
 * The module log position the chunk's records are read against (after
 * its span was taken: every change made before they ran is below it), and
 * whether it carries its process's snapshot: the first chunk the session
 * reads of any ring of that process does.
 */
static void chunk_maps(struct ring_state *r, struct chunk *c)
{
    struct block_table *bt = r->bt;

    c->maps_pos = bt && bt->maps ? maps__used(bt->maps) : 0;
    c->snapshot = bt && bt->maps && !__atomic_exchange_n(&bt->snapshot_taken, 1, __ATOMIC_RELAXED);
}

/* A lossy ring ended: what the producer took after its last span, as a
 * chunk of one LOST record. Reader thread. */
static void lost_at_end(struct ring_state *r)
{
    struct sluice_session *s = r->s;
    uint64_t tail, lost;
    struct chunk *c;

    if (!r->lossy || ring_reader__lost(&r->rd, &tail, &lost) < 0 || lost == r->lost_seen ||
        !(c = chunk_pool__get(&s->pool)) || !chunk__copy_area(c)) {
        return;
    }
    if (!lost_word(r, c->copy, lost)) {
        chunk_pool__put(&s->pool, c);
        return;
    }
    c->words = c->copy;
    c->len = 8;
    c->at = r->rd.pos - 8;
    c->copied = 1;
    c->blocks = r->bt;
    c->ring = r;
    c->ord.ring = &r->ord;
    c->ord.seq = r->seq++;
    chunk_maps(r, c);
    workq__push(&s->wq, c);
}

/*
 * Bytes published past our position on a lossy ring: first on from where
 * the producer left our tail if it took what lay before (a ring behind is
 * no error then: lossy.c took those bytes before it overwrote them).
 */
static int64_t lossy_avail(struct ring_state *r)
{
    int64_t avail = -EPROTO;

    for (int tries = 0; tries < 1000 && avail < 0; tries++) {
        uint64_t tail, lost;

        if (catch_up(r, &tail, &lost) < 0) {
            return -EPROTO;
        }
        avail = ring_reader__avail(&r->rd);
    }
    return avail;
}

/* Bytes published past our position, lossy or not. */
static int64_t avail_of(struct ring_state *r)
{
    return r->lossy ? lossy_avail(r) : ring_reader__avail(&r->rd);
}

/* Take one span and queue it as a chunk. Returns 0 or a negative errno. */
static int read_chunk(struct ring_state *r)
{
    struct sluice_session *s = r->s;
    struct chunk *c = chunk_pool__get(&s->pool); /* backpressure: may block */
    ssize_t n;

    if (!c) {
        return session_error(s, -ENOMEM, "out of memory for chunks");
    }
    c->copied = 0;
    n = r->lossy ? take_lossy(r, c) : ring_reader__take(&r->rd, &c->words, &c->at);
    if (n <= 0) {
        chunk_pool__put(&s->pool, c);
        return n < 0 ? session_error(s, (int)n, "%s", r->rd.err) : 0;
    }
    if (!r->lossy) {
        c->len = (size_t)n;
    }
    c->blocks = r->bt;
    c->ring = r;
    c->ord.ring = &r->ord;
    c->ord.seq = r->seq++;
    chunk_maps(r, c);
    workq__push(&s->wq, c);
    return 0;
}

/*
 * Whether a detach stops this ring now: the first time the reader sees
 * the detach it notes where the producer had published (what was written
 * before the call is read), and it stops once it got there. Never salvage
 * then: the producer is alive.
 */
static int detached_here(struct ring_state *r)
{
    if (!__atomic_load_n(&r->s->detaching, __ATOMIC_ACQUIRE)) {
        return 0;
    }
    if (r->stop == UINT64_MAX) {
        r->stop = ring_reader__head(&r->rd);
    }
    return r->rd.pos >= r->stop;
}

/* Why the jitter drops a consumer; the guest's stderr says which. */
#define DROPPED                                                                                    \
    "the jitter dropped this consumer (it did not read its control socket in time, or held "       \
    "ended threads' rings the guest's ulimit -f needed; the guest's stderr says)"

/* The jitter closed our slot of @p r while its producer ran on: say so. */
static void dropped(struct ring_state *r)
{
    session_error(r->s, -ECONNRESET, DROPPED ": the trace of tid %u stops at position %llu",
                  r->info.tid, (unsigned long long)r->rd.pos);
}

/*
 * Whether the jitter has dropped us: it closes our slot in every ring
 * before it shuts our socket, and a ring it announced before may be gone
 * (its place reused) by the time we read the announcement. Control thread.
 */
static int was_dropped(struct sluice_session *s)
{
    const struct ring_state *r;
    int closed = 0;

    pthread_mutex_lock(&s->rings_lock); /* on_end() unmaps under it */
    for (r = s->rings; r && !closed; r = r->next) {
        closed = r->rd.map && !ring_reader__slot_open(&r->rd);
    }
    pthread_mutex_unlock(&s->rings_lock);
    return closed && !__atomic_load_n(&s->detaching, __ATOMIC_ACQUIRE);
}

static void *ring_thread(void *arg)
{
    struct ring_state *r = arg;

    for (;;) {
        if (detached_here(r)) {
            break;
        }
        int64_t avail = avail_of(r);

        if (avail < 0 || (avail > 0 && read_chunk(r) < 0) ||
            __atomic_load_n(&r->failed, __ATOMIC_RELAXED)) {
            if (avail < 0 && !ring_reader__slot_open(&r->rd)) {
                dropped(r); /* the producer overran us because it no longer waits for us */
            } else if (avail < 0) {
                session_error(r->s, -EPROTO, "%s", r->rd.err);
            }
            discard_until_end(r);
            break;
        }
        if (avail == 0) {
            if (ring_ended(r) && avail_of(r) == 0) {
                /* Ended without closing: its process died mid-flight, or
                 * the jitter dropped us (it closed our slot first). */
                if (ring_reader__closed(&r->rd) || r->salvaged >= 0) {
                    break;
                }
                if (!ring_reader__slot_open(&r->rd)) {
                    dropped(r);
                    break;
                }
                r->salvaged = ring_reader__salvage(&r->rd);
                if (r->salvaged < 0) {
                    session_error(r->s, -EPROTO, "%s", r->rd.err);
                    break;
                }
                continue;
            }
            ring_reader__wait(&r->rd, WAIT_MS);
        }
    }
    lost_at_end(r);
    r->hdr_lost = __atomic_load_n(&r->rd.hdr->lost, __ATOMIC_ACQUIRE);
    r->end.ring = &r->ord;
    r->end.seq = r->seq;
    r->end.last = 1;
    order__push(&r->s->ord, &r->end);
    pthread_mutex_lock(&r->s->rings_lock);
    if (__atomic_sub_fetch(&r->s->readers_live, 1, __ATOMIC_RELAXED) == 0) {
        pthread_cond_signal(&r->s->readers_done);
    }
    pthread_mutex_unlock(&r->s->rings_lock);
    return NULL;
}

/* --- control socket ------------------------------------------------------ */

/*
 * A ring this session knows: the same place while we still map it, or the
 * same thread ever. (The jitter reuses the place of a ring every consumer
 * has closed and said done to: on_end().) Control thread.
 */
static int known_ring(struct sluice_session *s, const struct ring_reader *rd)
{
    const struct ring_state *r;
    int known = 0;

    pthread_mutex_lock(&s->rings_lock); /* on_end() unmaps under it */
    for (r = s->rings; r && !known; r = r->next) {
        known = (r->rd.map && r->rd.ino == rd->ino && r->rd.offset == rd->offset) ||
                (r->info.pid == rd->hdr->pid && r->info.seq == rd->hdr->seq);
    }
    pthread_mutex_unlock(&s->rings_lock);
    return known;
}

/*
 * Whether the mapped header says what the announcement said, and is new;
 * a forged or repeated announcement is refused (named in the error), and
 * the trace of every other thread goes on.
 */
static int check_announced(struct sluice_session *s, struct ring_state *r,
                           const struct sluice_ctl_msg *m)
{
    const struct sluice_ring_hdr *h = r->rd.hdr;
    uint32_t pid = h->pid, tid = h->tid, seq = h->seq;

    /* The size as validated and mapped, not as the header says now. */
    if (pid != m->pid || tid != m->tid || r->rd.size != m->ring_bytes) {
        return session_error(s, -EPROTO,
                             "refused a ring announced as pid %u tid %u (%llu bytes) whose header "
                             "says pid %u tid %u (%llu bytes)",
                             m->pid, m->tid, (unsigned long long)m->ring_bytes, pid, tid,
                             (unsigned long long)r->rd.size);
    }
    if (known_ring(s, &r->rd)) {
        return session_error(s, -EPROTO,
                             "refused a second announcement of the ring of pid %u tid %u (seq %u)",
                             pid, tid, seq);
    }
    return 0;
}

/* Start @p r's reader thread, detached; 0 or a positive errno. */
static int start_reader(struct sluice_session *s, struct ring_state *r)
{
    pthread_attr_t attr;
    pthread_t th;
    int err;

    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_mutex_lock(&s->rings_lock);
    err = pthread_create(&th, &attr, ring_thread, r);
    /* Atomic: sluice_session__progress() reads it without the lock. */
    __atomic_add_fetch(&s->readers_live, err == 0, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&s->rings_lock);
    pthread_attr_destroy(&attr);
    return err;
}

/* Whether line @p line of our tail file is there to touch (the jitter grows
 * the file before it names a line; it can never shrink: map_tails()). */
static int tail_line_ok(const struct sluice_session *s, uint32_t line)
{
    struct stat st;

    return s->tails && line < SLUICE_TAIL_LINES && fstat(s->tails_fd, &st) == 0 &&
           (uint64_t)st.st_size >= ((uint64_t)line + 1) * sizeof(struct sluice_ring_tail);
}

static void add_ring(struct sluice_session *s, const struct sluice_ctl_msg *m, int fd)
{
    struct ring_state *r = calloc(1, sizeof(*r));
    int err;

    if (!r) {
        session_error(s, -ENOMEM, "out of memory for ring of tid %u", m->tid);
        close(fd);
        return;
    }
    if (!tail_line_ok(s, m->line)) {
        close(fd);
        session_error(s, -EPROTO,
                      "refused the ring of tid %u: line %u is past the end of the tail file",
                      m->tid, m->line);
        free(r);
        return;
    }
    err = ring_reader__open(&r->rd, fd, m->offset, m->slot, s->tails + m->line);
    if (err) {
        close(fd);
        if (was_dropped(s)) {
            session_error(s, -ECONNRESET, DROPPED);
        }
        session_error(s, err == -EINVAL ? -EPROTO : err, "tid %u: %s", m->tid, r->rd.err);
        free(r);
        return;
    }
    /* Dropped, the announcement may name a place reused since: say why, not what we found. */
    err = was_dropped(s) ? session_error(s, -ECONNRESET, DROPPED) : check_announced(s, r, m);
    if (err < 0) {
        close(fd);
        ring_reader__close(&r->rd);
        free(r);
        return;
    }
    err = block_tables__get(&s->tables, fd, r->rd.blocks_offset, r->rd.blocks_bytes, &r->bt,
                            r->rd.err, sizeof(r->rd.err));
    close(fd); /* the mappings keep the memfd alive */
    if (err) {
        session_error(s, err == -EINVAL ? -EPROTO : err, "pid %u tid %u: %s", m->pid, m->tid,
                      r->rd.err);
        ring_reader__close(&r->rd);
        free(r);
        return;
    }
    /* The process's snapshot: the map its first ring's stream starts in (where the ring
     * began, when read from there; else the map when the table was mapped). */
    if (r->bt && r->bt->maps && !r->bt->snapshot_fixed) {
        if (r->rd.start == 0) {
            r->bt->snapshot_at = r->rd.maps_at_start;
        }
        r->bt->snapshot_fixed = 1;
    }
    r->salvaged = -1;
    r->stop = UINT64_MAX;
    r->lossy = !s->lossless;
    r->released = r->rd.pos; /* nothing taken yet */
    r->s = s;
    session_copy_name(r->arch, r->rd.hdr->arch, sizeof(r->arch));
    session_copy_name(r->comm, r->rd.hdr->comm, sizeof(r->comm));
    r->info = (struct sluice_thread_info){r->rd.hdr->pid, r->rd.hdr->tid,
                                          r->rd.hdr->seq, r->rd.hdr->big_endian != 0,
                                          r->arch,        r->comm};
    err = start_reader(s, r);
    if (err) {
        session_error(s, -err, "tid %u: starting reader thread: %s", m->tid, strerror(err));
        ring_reader__close(&r->rd);
        block_tables__put(&s->tables, r->bt);
        free(r);
        return;
    }
    *s->rings_tail = r;
    s->rings_tail = &r->next;
    s->n_rings++;
}

/*
 * Map the tail file @p fd that came with WELCOME (record.h) whole, as far
 * as it may grow (SLUICE_TAIL_BYTES), and keep @p fd: a line is touched
 * only once the file holds it (tail_line_ok()), and the file must be
 * sealed against shrinking, so nobody can take it back from under us.
 * Returns 0 or a negative errno (the session's error set); @p fd is ours.
 */
static int map_tails(struct sluice_session *s, int fd, uint64_t bytes)
{
    void *p;
    int seals;

    if (fd < 0) {
        return session_error(s, -EPROTO, "control socket: WELCOME without a tail file");
    }
    seals = fcntl(fd, F_GET_SEALS);
    if (bytes != SLUICE_TAIL_BYTES || seals < 0 || !(seals & F_SEAL_SHRINK)) {
        close(fd);
        return session_error(s, -EPROTO,
                             "control socket: WELCOME's tail file is not sealed against shrinking, "
                             "or not of %llu bytes at most (it says %llu)",
                             (unsigned long long)SLUICE_TAIL_BYTES, (unsigned long long)bytes);
    }
    p = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    if (p == MAP_FAILED) {
        close(fd);
        return session_error(s, -errno, "mapping the tail file: %s", strerror(errno));
    }
    s->tails = p;
    s->tails_fd = fd;
    return 0;
}

/* Read the WELCOME (or REFUSED). Returns 0 or a negative errno. */
static int read_welcome(struct sluice_session *s)
{
    struct pollfd p[2] = {{.fd = s->fd, .events = POLLIN}, {.fd = s->wake[0], .events = POLLIN}};
    struct sluice_ctl_msg m;
    int fd, n;

    int ready;

    while ((ready = poll(p, 2, s->welcome_ms)) < 0 && errno == EINTR) {
    }
    if (__atomic_load_n(&s->detaching, __ATOMIC_ACQUIRE)) {
        return 0; /* detached at once: an empty trace, no error */
    }
    if (ready == 0) {
        return session_error(
            s, -ETIMEDOUT,
            "the traced process did not answer in %d s (stopped, or out of descriptors?)",
            s->welcome_ms / 1000);
    }
    n = ctl_recv(s->fd, &m, &fd);
    if (n > 0 && m.type == SLUICE_CTL_WELCOME && m.version == SLUICE_CTL_VERSION) {
        return map_tails(s, fd, m.tail_bytes);
    }
    if (fd >= 0) {
        close(fd);
    }
    if (n <= 0) {
        return session_error(s, n == 0 ? -EPROTO : n, "control socket: %s before WELCOME",
                             n == 0 ? "end of stream" : recv_error(n));
    }
    if (m.type == SLUICE_CTL_REFUSED) {
        session_copy_name(m.error, m.error, sizeof(m.error));
        return session_error(s, -EPROTO, "jitter refused the consumer: %s", m.error);
    }
    if (m.type != SLUICE_CTL_WELCOME || m.version != SLUICE_CTL_VERSION) {
        return session_error(s, -EPROTO,
                             "control socket: expected WELCOME version %u, got type %u version %u",
                             SLUICE_CTL_VERSION, m.type, m.version);
    }
    return 0;
}

/* Receive RING messages until end of stream (or a socket error). */
static void receive_rings(struct sluice_session *s)
{
    for (;;) {
        struct pollfd p[2] = {{.fd = s->fd, .events = POLLIN},
                              {.fd = s->wake[0], .events = POLLIN}};
        struct sluice_ctl_msg m;
        int fd, n;

        if (poll(p, 2, -1) < 0 && errno != EINTR) {
            session_error(s, -errno, "control socket: poll: %s", strerror(errno));
            break;
        }
        if (__atomic_load_n(&s->detaching, __ATOMIC_ACQUIRE)) {
            break; /* rings announced from now on are not ours to read */
        }
        if (!(p[0].revents)) {
            continue;
        }
        n = ctl_recv(s->fd, &m, &fd);

        if (n == 0) {
            break;
        }
        if (n < 0) {
            session_error(s, n, "control socket: %s", recv_error(n));
            if (n != -EPROTO) {
                break; /* a malformed datagram is skipped; a dead socket ends */
            }
            continue;
        }
        if (m.type == SLUICE_CTL_RING && fd >= 0) {
            add_ring(s, &m, fd);
        } else if (fd >= 0) {
            close(fd);
        }
        if (m.type == SLUICE_CTL_RING && fd < 0) {
            session_error(s, -EPROTO, "control socket: RING for tid %u without a descriptor",
                          m.tid);
        }
    }
    /* Release pairs with ring_ended(): readers that see eof see final heads.
     * Not after a detach: the producers are alive, their heads not final. */
    if (!__atomic_load_n(&s->detaching, __ATOMIC_ACQUIRE)) {
        __atomic_store_n(&s->eof, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_lock(&s->rings_lock);
    for (struct ring_state *r = s->rings; r; r = r->next) {
        if (r->rd.hdr) {
            ring_reader__wake(&r->rd); /* a killed producer will not */
        }
    }
    pthread_mutex_unlock(&s->rings_lock);
}

int session_start_stages(struct sluice_session *s)
{
    static const struct order_ops ops = {on_start, on_deliver, on_end};
    int err;

    chunk_pool__init(&s->pool, s->workers * CHUNKS_PER_WORKER, s->cb.item_size);
    err = order__start(&s->ord, &ops, s);
    if (err) {
        return session_error(s, err, "starting ordering thread: %s", strerror(-err));
    }
    err = workq__start(&s->wq, s->workers, work, s);
    if (err) {
        order__finish(&s->ord);
        return session_error(s, err, "starting %u workers: %s", s->workers, strerror(-err));
    }
    return 0;
}

void session_finish_stages(struct sluice_session *s)
{
    workq__finish(&s->wq);  /* every chunk decoded and pushed */
    order__finish(&s->ord); /* every chunk delivered and back in the pool */
    chunk_pool__destroy(&s->pool);
    /* Only now: the ordering thread wrote r->counts until it stopped. */
    for (struct ring_state *r = s->rings; r; r = r->next) {
        r->counts.lost += r->hdr_lost;
    }
}

/* Close the trace file being recorded, if any, with the session's result. Main thread. */
static void end_recording(struct sluice_session *s)
{
    char why[400];
    int err;

    if (!s->rec) {
        return;
    }
    err = tf_writer__close(s->rec, s->err_code, sluice_session__detached(s), s->err, why,
                           sizeof(why));
    s->rec = NULL;
    if (err) {
        session_error(s, err, "%s", why);
    }
}

int sluice_session__run(struct sluice_session *s)
{
    int err;

    if (s->ran) {
        return session_error(s, -EINVAL, "sluice_session__run called twice");
    }
    s->ran = 1;
    if (s->file_path) {
        return file_source__run(s);
    }
    err = read_welcome(s);
    if (err) {
        end_recording(s);
        return err;
    }
    err = session_start_stages(s);
    if (err) {
        chunk_pool__destroy(&s->pool);
        end_recording(s);
        return err;
    }
    receive_rings(s);
    pthread_mutex_lock(&s->rings_lock);
    while (s->readers_live > 0) {
        pthread_cond_wait(&s->readers_done, &s->rings_lock);
    }
    pthread_mutex_unlock(&s->rings_lock);
    session_finish_stages(s);
    /* Every span is given back: hang up now, so the jitter frees our slot and
     * no producer waits for us while the caller reports. */
    close(s->fd);
    s->fd = -1;
    end_recording(s);
    return s->err_code;
}

struct sluice_session *sluice_session__open_file(const char *path,
                                                 const struct sluice_callbacks *cb,
                                                 const struct sluice_consumer_opts *opts)
{
    struct sluice_consumer_opts o = {.sz = sizeof(o), .workers = opts ? opts->workers : 0};
    struct sluice_session *s;
    int fd;

    if (!path || !cb || cb->sz == 0 || (opts && opts->sz == 0)) {
        errno = EINVAL;
        return NULL;
    }
    /* A session needs a descriptor to own; this one is never read. */
    fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return NULL;
    }
    s = session_new(fd, cb, &o, 0);
    if (s && !(s->file_path = strdup(path))) {
        sluice_session__free(s);
        errno = ENOMEM;
        return NULL;
    }
    return s;
}

size_t sluice_session__salvaged(const struct sluice_session *s, uint64_t *bytes)
{
    const struct ring_state *r;
    uint64_t sum = 0;
    size_t n = 0;

    for (r = s->rings; r; r = r->next) {
        if (r->salvaged >= 0) {
            n++;
            sum += (uint64_t)r->salvaged;
        }
    }
    if (bytes) {
        *bytes = sum;
    }
    return n;
}

uint64_t sluice_session__events(const struct sluice_session *s)
{
    return __atomic_load_n(&s->events, __ATOMIC_RELAXED);
}

void sluice_session__progress(const struct sluice_session *s, struct sluice_progress *out)
{
    out->events = __atomic_load_n(&s->events, __ATOMIC_RELAXED);
    out->lost = __atomic_load_n(&s->lost, __ATOMIC_RELAXED);
    /* Changed under rings_lock; a status line can take it a moment stale. */
    out->threads = __atomic_load_n(&s->readers_live, __ATOMIC_RELAXED);
}

size_t sluice_session__counts(const struct sluice_session *s, struct sluice_counts *total,
                              struct sluice_counts *threads, struct sluice_thread_info *infos,
                              size_t max)
{
    struct sluice_counts sum = {0, 0, 0, 0};
    const struct ring_state *r;
    size_t i = 0;

    for (r = s->rings; r; r = r->next, i++) {
        sum.insns += r->counts.insns;
        sum.loads += r->counts.loads;
        sum.stores += r->counts.stores;
        sum.lost += r->counts.lost;
        if (i < max && threads) {
            threads[i] = r->counts;
        }
        if (i < max && infos) {
            infos[i] = r->info;
        }
    }
    if (total) {
        *total = sum;
    }
    return i;
}

void session__welcome_timeout(struct sluice_session *s, int ms)
{
    s->welcome_ms = ms;
}

void sluice_session__detach(struct sluice_session *s)
{
    ssize_t unused;

    if (!s || __atomic_exchange_n(&s->detaching, 1, __ATOMIC_ACQ_REL)) {
        return;
    }
    unused = write(s->wake[1], "", 1); /* a full pipe already wakes the poll */
    (void)unused;
}

int sluice_session__detached(const struct sluice_session *s)
{
    return __atomic_load_n(&s->detaching, __ATOMIC_ACQUIRE);
}

const char *sluice_session__error(const struct sluice_session *s)
{
    return s->err;
}

void sluice_session__free(struct sluice_session *s)
{
    struct ring_state *r, *next;

    if (!s) {
        return;
    }
    for (r = s->rings; r; r = next) {
        next = r->next;
        ring_reader__close(&r->rd);
        block_tables__put(&s->tables, r->bt);
        free(r);
    }
    if (s->fd >= 0) {
        close(s->fd);
    }
    for (int i = 0; i < 2; i++) {
        if (s->wake[i] >= 0) {
            close(s->wake[i]);
        }
    }
    if (s->tails) {
        munmap(s->tails, (size_t)SLUICE_TAIL_BYTES);
        close(s->tails_fd);
    }
    pthread_mutex_destroy(&s->err_lock);
    pthread_mutex_destroy(&s->rings_lock);
    pthread_cond_destroy(&s->readers_done);
    block_tables__destroy(&s->tables);
    if (s->rec) {
        char unused[8];

        tf_writer__close(s->rec, -ECANCELED, 0, "", unused, sizeof(unused)); /* never run */
    }
    free(s->file_path);
    free(s);
}
