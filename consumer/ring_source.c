/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ring_source.c — a session's live source: the control socket and the
 * reading of each guest thread's ring.
 *
 * Threads: the session's main thread reads the control socket (WELCOME,
 * then a RING message per guest thread) and maps each ring; a reader pool
 * thread (reader_pool.c) steps each ring (ring_step): it cuts the published
 * records into spans (chunks), numbered per ring, without reading them, and
 * pushes them to the workers (session.c). A reader must never wait on
 * analysis except through the bounded chunk pool (which also bounds the
 * ring bytes held), and must never trust the producer: every value it
 * reads from a ring is checked (ring_reader.c), a bad ring is skipped to
 * its end and the others go on.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "block_table.h"
#include "chunk.h"
#include "ctl_io.h"
#include "reader_pool.h"
#include "ring_reader.h"
#include "session_state.h"
#include "workq.h"

/* What ctl_recv()'s @p n < 0 means, for a person. */
static const char *recv_error(int n)
{
    return n == -EMFILE ? "a descriptor the jitter sent was dropped: too many open files here "
                          "(ulimit -n)"
                        : strerror(-n);
}

/* --- reader threads ------------------------------------------------------ */

/* Whether the ring has ended: closed by its thread, or the whole trace
 * ended. Both are checked before head so the head we then see is final. */
static int ring_ended(struct ring_state *r)
{
    return ring_reader__closed(&r->rd) || __atomic_load_n(&r->s->eof, __ATOMIC_ACQUIRE);
}

/*
 * Whether @p r is still the ring we were given, our slot in it open: when
 * the jitter drops us it closes our slots, then may give the ring's pages
 * back (they read as zeros: no head, never closed) or its place to
 * another thread's ring.
 */
static int ring_still_ours(const struct ring_state *r)
{
    const struct sluice_ring_hdr *h = r->rd.hdr;

    return ring_reader__slot_open(&r->rd) &&
           __atomic_load_n(&h->magic, __ATOMIC_RELAXED) == SLUICE_RING_MAGIC &&
           __atomic_load_n(&h->pid, __ATOMIC_RELAXED) == r->info.pid &&
           __atomic_load_n(&h->tid, __ATOMIC_RELAXED) == r->info.tid &&
           __atomic_load_n(&h->seq, __ATOMIC_RELAXED) == r->info.seq;
}

/*
 * After an error: once every span taken is out of the workers' hands (the
 * producer must not overwrite a span being decoded), keep releasing the
 * ring until it ends, so a lossless producer is never blocked by a reader
 * that gave up on it. (Not until rd.pos: on a lossy ring the producer moves
 * it past spans we never took, which are never released.) A ring no longer
 * ours (we were dropped) has no producer waiting for us and may never end:
 * done.
 */
static enum reader_step discard_step(struct ring_state *r)
{
    int ended;

    if (__atomic_load_n(&r->released, __ATOMIC_ACQUIRE) < r->taken) {
        return READER_RETRY;
    }
    if (!ring_still_ours(r)) {
        return READER_DONE;
    }
    ended = ring_ended(r); /* before the discard: then its head is the last */
    ring_reader__discard(&r->rd);
    return ended ? READER_DONE : READER_IDLE;
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
        ring_reader__evict(words, (size_t)n);
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
    chunk_maps(r, c);
    session_queue_chunk(r, c);
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

static void dropped(struct ring_state *r);

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
        if (n < 0 && !ring_reader__slot_open(&r->rd)) {
            dropped(r); /* what we read was no longer ours: the place may be reused */
            return (int)n;
        }
        return n < 0 ? session_error(s, (int)n, "%s", r->rd.err) : 0;
    }
    if (!r->lossy) {
        c->len = (size_t)n;
    }
    r->taken = c->at + c->len;
    chunk_maps(r, c);
    session_queue_chunk(r, c);
    return 0;
}

/*
 * Whether a detach stops this ring now: the first time the reader sees
 * the detach it notes where the producer had published (what was written
 * before the call is read), and it stops once it got there, or once the
 * ring is no longer ours (the jitter dropped us meanwhile: its head may
 * never get there again). Never salvage then: the producer is alive.
 */
static int detached_here(struct ring_state *r)
{
    if (!__atomic_load_n(&r->s->detaching, __ATOMIC_ACQUIRE)) {
        return 0;
    }
    if (r->stop == UINT64_MAX) {
        r->stop = ring_reader__head(&r->rd);
    }
    if (r->rd.pos < r->stop && !ring_still_ours(r)) {
        dropped(r);
        return 1;
    }
    return r->rd.pos >= r->stop;
}

/* Why the jitter drops a consumer, until it tells us (name_drop()). */
#define DROPPED_WHY                                                                                \
    "it did not read its control socket in time, held ended threads' rings the guest's ulimit "    \
    "-f needed, or, lossy, too many ended threads' rings unread; the guest's stderr says which"
#define DROPPED_START "the jitter dropped this consumer ("
#define DROPPED DROPPED_START DROPPED_WHY ")"

/* The jitter closed our slot of @p r while its producer ran on: say so, once for all the
 * rings the drop cut (name_drop() adds how many, and where the first stops). */
static void dropped(struct ring_state *r)
{
    struct sluice_session *s = r->s;

    __atomic_store_n(&s->cut_off, 1, __ATOMIC_RELEASE);
    pthread_mutex_lock(&s->err_lock);
    if (s->drop_cuts++ == 0) {
        s->drop_tid = r->info.tid;
        s->drop_pos = r->rd.pos;
    }
    pthread_mutex_unlock(&s->err_lock);
    session_error(s, -ECONNRESET, DROPPED);
}

/* Add to @p msg (sizeof(s->err) bytes), the drop's error, the traces it cut; err_lock held. */
static void name_cuts_in(char *msg, size_t size, const struct sluice_session *s)
{
    size_t len = strlen(msg);

    if (s->drop_cuts == 1) {
        snprintf(msg + len, size - len, ": the trace of tid %u stops at position %llu", s->drop_tid,
                 (unsigned long long)s->drop_pos);
    } else if (s->drop_cuts > 1) {
        snprintf(msg + len, size - len,
                 ": the traces of %lu threads stop there (tid %u at position %llu, ...)",
                 s->drop_cuts, s->drop_tid, (unsigned long long)s->drop_pos);
    }
}

/* Put @p why in place of DROPPED_WHY in @p msg (sizeof(s->err) bytes). */
static void name_drop_in(char *msg, size_t size, const char *why)
{
    char was[sizeof(((struct sluice_session *)0)->err)];
    char *at = strstr(msg, DROPPED_WHY);

    if (at && size == sizeof(was)) {
        memcpy(was, msg, sizeof(was));
        snprintf(msg, size, "%.*s%s%s", (int)(at - msg), was, why,
                 was + (at - msg) + strlen(DROPPED_WHY));
    }
}

/*
 * Once the control socket and every reader have ended: put the reason the
 * jitter sent (drop_notice(), read after the slots it closed may have been
 * seen) in place of DROPPED_WHY in every error kept, keep one of those
 * that then say the same, and add to the first the traces the drop cut.
 */
static void name_drop(struct sluice_session *s)
{
    size_t kept, out = 0;

    pthread_mutex_lock(&s->err_lock);
    kept = s->n_errors < 1 + SESSION_MORE_ERRORS ? s->n_errors : 1 + SESSION_MORE_ERRORS;
    for (size_t k = 0; s->drop_why[0] && k < kept; k++) {
        char *msg = k ? s->more_err[k - 1] : s->err;
        int seen = 0;

        name_drop_in(msg, sizeof(s->err), s->drop_why);
        for (size_t j = 0; j < out && !seen; j++) {
            seen = strcmp(msg, j ? s->more_err[j - 1] : s->err) == 0;
        }
        if (!seen && out++ != k) {
            memmove(s->more_err[out - 2], msg, sizeof(s->err)); /* out - 1 >= 1 here */
        }
    }
    if (s->drop_why[0]) {
        s->n_errors -= kept - out;
        kept = out;
    }
    for (size_t k = 0; k < kept; k++) {
        char *msg = k ? s->more_err[k - 1] : s->err;

        if (strncmp(msg, DROPPED_START, strlen(DROPPED_START)) == 0) {
            name_cuts_in(msg, sizeof(s->err), s);
            break;
        }
    }
    pthread_mutex_unlock(&s->err_lock);
}

/* A REFUSED after WELCOME: the jitter says why it drops us (then closes our
 * slots and our socket). Control thread. */
static void drop_notice(struct sluice_session *s, const struct sluice_ctl_msg *m)
{
    pthread_mutex_lock(&s->err_lock);
    snprintf(s->drop_why, sizeof(s->drop_why), "%.*s", (int)sizeof(m->error) - 1, m->error);
    pthread_mutex_unlock(&s->err_lock);
}

/* Whether the jitter has told us why it dropped us (drop_notice()). */
static int drop_noticed(struct sluice_session *s)
{
    int noticed;

    pthread_mutex_lock(&s->err_lock);
    noticed = s->drop_why[0] != 0;
    pthread_mutex_unlock(&s->err_lock);
    return noticed;
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
    closed = closed && !__atomic_load_n(&s->detaching, __ATOMIC_ACQUIRE);
    if (closed) {
        __atomic_store_n(&s->cut_off, 1, __ATOMIC_RELEASE);
    }
    return closed;
}

/* @p r has ended: its last LOST, its end marker; from then on it is the ordering thread's. */
static void finish_ring(struct ring_state *r)
{
    struct sluice_session *s = r->s;

    lost_at_end(r);
    r->hdr_lost = __atomic_load_n(&r->rd.hdr->lost, __ATOMIC_ACQUIRE);
    r->end.ring = &r->ord;
    r->end.seq = r->seq;
    r->end.last = 1;
    order__push(&s->ord, &r->end);
    pthread_mutex_lock(&s->rings_lock);
    if (__atomic_sub_fetch(&s->readers_live, 1, __ATOMIC_RELAXED) == 0) {
        pthread_cond_signal(&s->readers_done);
    }
    pthread_mutex_unlock(&s->rings_lock);
}

/* An error stopped the reading of @p r: discard the rest (discard_step). */
static enum reader_step stop_reading(struct ring_state *r)
{
    r->discarding = 1;
    return discard_step(r);
}

/* The step after the ring's producer ended, with nothing published past us. */
static enum reader_step ended_step(struct ring_state *r)
{
    /* Ended without closing: its process died mid-flight, or the jitter
     * dropped us (it closed our slot first). */
    if (ring_reader__closed(&r->rd) || r->salvaged >= 0) {
        return READER_DONE;
    }
    if (!ring_reader__slot_open(&r->rd)) {
        dropped(r);
        return READER_DONE;
    }
    r->salvaged = ring_reader__salvage(&r->rd);
    if (r->salvaged < 0) {
        session_error(r->s, -EPROTO, "%s", r->rd.err);
        return READER_DONE;
    }
    return READER_WORK;
}

/* One step of @p r's reading (reader_pool.h). Its pool thread. */
static enum reader_step ring_step(struct ring_state *r)
{
    enum reader_step st;
    int64_t avail;

    if (r->discarding) {
        st = discard_step(r);
    } else if (detached_here(r)) {
        st = READER_DONE;
    } else if ((avail = avail_of(r)) < 0 || (avail > 0 && read_chunk(r) < 0) ||
               __atomic_load_n(&r->failed, __ATOMIC_RELAXED)) {
        if (avail < 0 && !ring_reader__slot_open(&r->rd)) {
            dropped(r); /* the producer overran us because it no longer waits for us */
        } else if (avail < 0) {
            session_error(r->s, -EPROTO, "%s", r->rd.err);
        }
        st = stop_reading(r);
    } else if (avail > 0) {
        st = READER_WORK;
    } else if (!ring_ended(r)) {
        st = READER_IDLE;
    } else {
        st = avail_of(r) != 0 ? READER_WORK : ended_step(r);
    }
    if (st == READER_DONE) {
        finish_ring(r);
    }
    return st;
}

/* --- control socket ------------------------------------------------------ */

/*
 * A ring this session knows: the same place while we still map it, or the
 * same thread of the same process ever: its pid, ring number and arena (a
 * memfd per process; the kernel gives a pid to another process once it is
 * free, also within one session). (The jitter reuses the place of a ring
 * every consumer has closed and said done to: on_end().) Control thread.
 */
static int known_ring(struct sluice_session *s, const struct ring_reader *rd)
{
    const struct ring_state *r;
    int known = 0;

    pthread_mutex_lock(&s->rings_lock); /* on_end() unmaps under it */
    for (r = s->rings; r && !known; r = r->next) {
        known =
            (r->rd.map && r->rd.ino == rd->ino && r->rd.offset == rd->offset) ||
            (r->info.pid == rd->hdr->pid && r->info.seq == rd->hdr->seq && r->rd.ino == rd->ino);
    }
    pthread_mutex_unlock(&s->rings_lock);
    return known;
}

/*
 * A ring refused for what its place holds: said at the end, unless the
 * jitter tells us it dropped us meanwhile (then the place may have been
 * reused since it was announced, and the drop is why). Control thread.
 */
static void refused(struct sluice_session *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void refused(struct sluice_session *s, const char *fmt, ...)
{
    va_list ap;

    if (s->n_refused < sizeof(s->refused) / sizeof(s->refused[0])) {
        va_start(ap, fmt);
        vsnprintf(s->refused[s->n_refused], sizeof(s->refused[0]), fmt, ap);
        va_end(ap);
    }
    s->n_refused++;
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

    /* The size as validated and mapped, not as the header says now. Said
     * at the end, unless the jitter tells us it dropped us meanwhile. */
    if (pid != m->pid || tid != m->tid || r->rd.size != m->ring_bytes) {
        refused(s,
                "refused a ring announced as pid %u tid %u (%llu bytes) whose header says "
                "pid %u tid %u (%llu bytes)",
                m->pid, m->tid, (unsigned long long)m->ring_bytes, pid, tid,
                (unsigned long long)r->rd.size);
        return -EPROTO;
    }
    if (known_ring(s, &r->rd)) {
        return session_error(s, -EPROTO,
                             "refused a second announcement of the ring of pid %u tid %u (seq %u)",
                             pid, tid, seq);
    }
    return 0;
}

/* Give @p r to a reader pool thread; 0 or a positive errno. */
static int start_reader(struct sluice_session *s, struct ring_state *r)
{
    int err;

    pthread_mutex_lock(&s->rings_lock);
    err = reader_pool__add(&s->readers, r);
    /* Atomic: sluice_session__progress() reads it without the lock. */
    __atomic_add_fetch(&s->readers_live, err == 0, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&s->rings_lock);
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

/*
 * The ring on tail line @p line was announced to us and we cannot read it:
 * give it up (ring_reader__give_up()), so that its producer does not wait
 * for a lossless consumer that never reads (the guest thread would hang),
 * unless a ring we read has that line (a forged repeat: that one goes on).
 * The caller names the thread as not traced. Control thread.
 */
static void give_up_ring(struct sluice_session *s, uint32_t line)
{
    struct sluice_ring_tail *tail = s->tails + line;
    const struct ring_state *r;
    int ours = 0;

    pthread_mutex_lock(&s->rings_lock);
    for (r = s->rings; r && !ours; r = r->next) {
        ours = r->rd.tail == tail;
    }
    pthread_mutex_unlock(&s->rings_lock);
    if (!ours) {
        ring_reader__give_up(tail);
    }
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
        give_up_ring(s, m->line);
        if (err == -EINVAL || err == -EPROTO) {
            refused(s, "tid %u: not traced: %s", m->tid, r->rd.err); /* what its place holds */
        } else {
            session_error(s, err, "tid %u: not traced: %s", m->tid, r->rd.err);
        }
        free(r);
        return;
    }
    /* Dropped, the announcement may name a place reused since: say why, not what we found. */
    err = was_dropped(s) ? session_error(s, -ECONNRESET, DROPPED) : check_announced(s, r, m);
    if (err < 0) {
        close(fd);
        ring_reader__close(&r->rd);
        give_up_ring(s, m->line);
        free(r);
        return;
    }
    err = block_tables__get(&s->tables, fd, r->rd.blocks_offset, r->rd.blocks_bytes, &r->bt,
                            r->rd.err, sizeof(r->rd.err));
    close(fd); /* the mappings keep the memfd alive */
    if (err) {
        session_error(s, err == -EINVAL ? -EPROTO : err, "pid %u tid %u: not traced: %s", m->pid,
                      m->tid, r->rd.err);
        ring_reader__close(&r->rd);
        give_up_ring(s, m->line);
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
    r->released = r->taken = r->rd.pos; /* nothing taken yet */
    r->s = s;
    session_copy_name(r->arch, r->rd.hdr->arch, sizeof(r->arch));
    session_copy_name(r->comm, r->rd.hdr->comm, sizeof(r->comm));
    r->info = (struct sluice_thread_info){r->rd.hdr->pid, r->rd.hdr->tid,
                                          r->rd.hdr->seq, r->rd.hdr->big_endian != 0,
                                          r->arch,        r->comm};
    err = start_reader(s, r);
    if (err) {
        session_error(s, -err, "tid %u: not traced: starting a reader thread for it: %s%s", m->tid,
                      strerror(err),
                      err == EAGAIN ? " (sluice's threads count against its user's RLIMIT_NPROC)"
                                    : "");
        ring_reader__close(&r->rd);
        block_tables__put(&s->tables, r->bt);
        give_up_ring(s, m->line);
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
int ring_source__welcome(struct sluice_session *s)
{
    struct pollfd p[2] = {{.fd = s->fd, .events = POLLIN}, {.fd = s->wake[0], .events = POLLIN}};
    struct sluice_ctl_msg m;
    int fd, n;

    int ready;

    while ((ready = poll(p, 2, s->welcome_ms)) < 0 && errno == EINTR) {
    }
    if (__atomic_load_n(&s->detaching, __ATOMIC_ACQUIRE) && poll(p, 1, 0) != 1) {
        /* Told to detach before the process answered: never taken in, nothing traced (a
         * WELCOME already here is read: then an empty trace, no error). */
        return session_error(s, -ECANCELED,
                             "interrupted before the traced process took this consumer in "
                             "(stopped, or out of descriptors?): nothing was traced");
    }
    if (__atomic_load_n(&s->detaching, __ATOMIC_ACQUIRE)) {
        ready = 1;
    }
    if (ready == 0) {
        return session_error(
            s, -ETIMEDOUT,
            "the traced process did not answer in %d s (stopped, or out of descriptors?)",
            s->welcome_ms / 1000);
    }
    n = ctl_recv(s->fd, &m, &fd);
    if (n > 0 && m.type == SLUICE_CTL_WELCOME && m.version == SLUICE_CTL_VERSION) {
        s->once_before = m.once_before;
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

/*
 * Detaching: read what the jitter sent already, without waiting. A drop
 * notice in it means the trace was cut before the detach (a consumer
 * stopped while the jitter dropped it, then told to detach): an error,
 * not a clean detach. Rings announced are not ours to read. Control thread.
 */
static void drain_on_detach(struct sluice_session *s)
{
    struct pollfd p = {.fd = s->fd, .events = POLLIN};
    struct sluice_ctl_msg m;
    int fd;

    for (int k = 0; k < 4096 && poll(&p, 1, 0) == 1 && (p.revents & POLLIN); k++) {
        if (ctl_recv(s->fd, &m, &fd) <= 0) {
            break;
        }
        if (fd >= 0) {
            close(fd);
        }
        if (m.type == SLUICE_CTL_RING && tail_line_ok(s, m.line)) {
            give_up_ring(s, m.line); /* announced after the detach: not ours to read */
        }
        if (m.type == SLUICE_CTL_REFUSED) {
            drop_notice(s, &m);
            session_error(s, -ECONNRESET, DROPPED " before this consumer detached");
            break;
        }
    }
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
            drain_on_detach(s);
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
        if (m.type == SLUICE_CTL_REFUSED) {
            drop_notice(s, &m);
        }
        if (m.type == SLUICE_CTL_ABORT) {
            /* Its rings end as a killed process's; the others' trace goes on. */
            session_error(s, -ECANCELED,
                          "pid %u was ended by the jitter, which does not run a thread "
                          "untraced: %.*s",
                          m.pid, (int)sizeof(m.error) - 1, m.error);
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
    reader_pool__kick(&s->readers); /* a killed producer will not wake them */
}

/* @p ts set to @p ms milliseconds from now (CLOCK_REALTIME, as pthread_cond_timedwait). */
static void ms_from_now(struct timespec *ts, long ms)
{
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_nsec += ms * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

/*
 * Wait for every reader to finish. While a detach delivers what came
 * before it, read the control socket on (every 50 ms), or the jitter would
 * take us for a consumer that stopped (ctl.c) and drop us.
 */
static void wait_readers(struct sluice_session *s)
{
    for (;;) {
        int drain = __atomic_load_n(&s->detaching, __ATOMIC_ACQUIRE) && !drop_noticed(s);
        struct timespec until;

        ms_from_now(&until, 50);
        pthread_mutex_lock(&s->rings_lock);
        if (s->readers_live == 0) {
            pthread_mutex_unlock(&s->rings_lock);
            return;
        }
        if (drain) {
            pthread_cond_timedwait(&s->readers_done, &s->rings_lock, &until);
        } else {
            pthread_cond_wait(&s->readers_done, &s->rings_lock);
        }
        pthread_mutex_unlock(&s->rings_lock);
        if (drain) {
            drain_on_detach(s);
        }
    }
}

void ring_source__run(struct sluice_session *s)
{
    reader_pool__init(&s->readers, ring_step);
    receive_rings(s);
    wait_readers(s);
    reader_pool__stop(&s->readers);
    if (s->n_refused) {
        /* Dropped (a drop notice read after them, or a slot of ours seen
         * closed while its producer ran on): the jitter reused the rings'
         * places once it had dropped us, so they are the drop's, not lies. */
        size_t kept = s->n_refused < sizeof(s->refused) / sizeof(s->refused[0])
                          ? s->n_refused
                          : sizeof(s->refused) / sizeof(s->refused[0]);

        int cut = drop_noticed(s) || __atomic_load_n(&s->cut_off, __ATOMIC_ACQUIRE);

        if (cut) {
            session_error(s, -ECONNRESET, DROPPED);
        }
        for (size_t k = 0; k < kept && !cut; k++) {
            session_error(s, -EPROTO, "%s", s->refused[k]);
        }
        if (s->n_refused > kept && !cut) {
            session_error(s, -EPROTO, "%zu more rings refused for what their places held",
                          s->n_refused - kept);
        }
    }
    name_drop(s);
}
