/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * session.c — libsluice's public API (sluice/consumer.h) and the stages
 * every session runs, whatever its source: the chunk pool, the workers and
 * the ordering stage.
 *
 * Threads: sluice_session__run() runs on the caller's thread and drives a
 * source: the live rings (ring_source.c: the control socket, one reader
 * thread per ring) or a trace file (file_source.c). A source pushes each
 * ring's chunks, numbered, to the workers, who decode them (decode.c; in
 * place in the ring when lossless); one ordering thread gives each span
 * back to its producer, in order, and calls `thread` and `trace`
 * (order.c). A worker waits, besides on the work queue, only for the
 * ordering thread to deliver a slice of the chunk it holds (work(): why it
 * cannot deadlock). A recording session (sluice_consumer_opts.record) has
 * each worker compress its span and the ordering thread write it
 * (tf_write.c). No user callback is ever called with a session lock held.
 * The state the files share is in session_state.h.
 */
#include "sluice/consumer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "block_table.h"
#include "chunk.h"
#include "ctl_io.h"
#include "decode.h"
#include "file_id.h"
#include "order.h"
#include "ring_reader.h"
#include "session.h"
#include "session_state.h"
#include "tf_read.h"
#include "tf_write.h"
#include "workq.h"

/* Chunks in flight per worker: enough to keep workers busy while the
 * ordering thread catches up, small enough to bound memory. */
#define CHUNKS_PER_WORKER 4

int session_error(struct sluice_session *s, int code, const char *fmt, ...)
{
    va_list ap;

    char msg[sizeof(s->err)];
    int seen;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&s->err_lock);
    seen = s->n_errors > 0 && strcmp(msg, s->err) == 0;
    for (size_t i = 0; !seen && i + 1 < s->n_errors && i < SESSION_MORE_ERRORS; i++) {
        seen = strcmp(msg, s->more_err[i]) == 0;
    }
    if (s->n_errors == 0) {
        s->err_code = code;
        memcpy(s->err, msg, sizeof(msg));
    } else if (!seen && s->n_errors - 1 < SESSION_MORE_ERRORS) {
        memcpy(s->more_err[s->n_errors - 1], msg, sizeof(msg));
    }
    s->n_errors += !seen;
    pthread_mutex_unlock(&s->err_lock);
    return code;
}

void session_more_errors(struct sluice_session *s, size_t n)
{
    pthread_mutex_lock(&s->err_lock);
    s->n_errors += n;
    pthread_mutex_unlock(&s->err_lock);
}

/* A session on @p ctl_fd; says HELLO on it if @p hello. */
/* Whether the caller's options struct @p o (maybe NULL) is recent enough to have field @p f. */
#define OPTS_HAVE(o, f)                                                                            \
    ((o) && (o)->sz >= offsetof(struct sluice_consumer_opts, f) + sizeof((o)->f))

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
    s->lossless = !(OPTS_HAVE(opts, lossy) && opts->lossy);
    s->workers = OPTS_HAVE(opts, workers) ? opts->workers : 0;
    if (s->workers == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        s->workers = n > 0 ? (unsigned)n : 1;
    }
    s->rings_tail = &s->rings;
    if (OPTS_HAVE(opts, record) && opts->record) {
        char why[320];

        s->rec = tf_writer__open(opts->record, why, sizeof(why));
        s->rec_uncompressed = OPTS_HAVE(opts, record_uncompressed) && opts->record_uncompressed;
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
    pthread_mutex_init(&s->files_lock, NULL);
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
        /* Where its stream starts in the module log, when read from its start: a report of
         * this thread alone (--tid) shows that map first (file_source.c). */
        tf_writer__ring(s->rec, r->file_no, &r->info, r->bt,
                        r->rd.start == 0 ? r->rd.maps_at_start : UINT64_MAX);
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
    if (!r->stopped && !partial && s->rec && c->bad != CHUNK_BAD_LAPPED) {
        /* Whole and in order; a bad record is kept, so the file fails where this did.
         * Before the release: an uncompressed span is written from the ring. */
        tf_writer__chunk(s->rec, r->file_no, r->bt, r->file_chunks++, c->at, c->maps_pos,
                         c->pack_snapshot, c->pack, r->file_insns);
    }
    if (!partial && r->rd.hdr) {
        /* In order, the span decoded to its end: the producer may reuse it
         * (the items are copies). A slice's span is still being read. A
         * trace file's ring has no producer (rd.hdr NULL). */
        ring_reader__release(&r->rd, c->at + c->len);
        __atomic_store_n(&r->released, c->at + c->len, __ATOMIC_RELEASE);
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
    if (s->rec && !tf_writer__stopped(s->rec)) {
        /* Before the decode: a lossless span is in place, and the producer may reuse it
         * once it is delivered. A failure (no memory) is the writer's to report. Once
         * the recording stopped, nothing more is written (tf_writer__chunk()). */
        tf_pack__span(&c->pack, c->words, c->len, !s->rec_uncompressed);
        c->pack_snapshot = c->snapshot;
    }
    if (c->windowed) {
        window__start(&c->win, &s->cb, c->win_before, c->win_from, c->win_to);
    }
    for (;;) {
        uint64_t n = decode_chunk(c, c->windowed ? &c->win.cb : &s->cb, &r->info);
        int partial;

        if (c->windowed) {
            window__take(&c->win, &c->counts, &n); /* only what the window let through */
        }
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
        if (!partial && !c->copied) {
            ring_reader__evict(c->words, c->len); /* read whole: see ring_reader.h */
        }
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

/* Why pthread_create() says EAGAIN, most often. */
#define NPROC_HINT " (sluice's threads count against its user's RLIMIT_NPROC)"

int session_start_stages(struct sluice_session *s)
{
    static const struct order_ops ops = {on_start, on_deliver, on_end};
    int err;

    chunk_pool__init(&s->pool, s->workers * CHUNKS_PER_WORKER, s->cb.item_size);
    /* A trace file's chunks are delivered in file order, so a report of the same file is
     * the same sequence every time (a live session's threads interleave as they run). */
    err = s->file_path ? order__start_global(&s->ord, &ops, s) : order__start(&s->ord, &ops, s);
    if (err) {
        return session_error(s, err, "starting ordering thread: %s%s", strerror(-err),
                             err == -EAGAIN ? NPROC_HINT : "");
    }
    err = workq__start(&s->wq, s->workers, work, s);
    if (err) {
        order__finish(&s->ord);
        return session_error(s, err, "starting %u workers: %s%s", s->workers, strerror(-err),
                             err == -EAGAIN ? NPROC_HINT : "");
    }
    return 0;
}

void session_queue_chunk(struct ring_state *r, struct chunk *c)
{
    c->blocks = r->bt;
    c->ring = r;
    c->ord.ring = &r->ord;
    c->ord.seq = r->seq++;
    c->ord.gseq = __atomic_fetch_add(&r->s->gseq, 1, __ATOMIC_RELAXED); /* (a file's: in order) */
    workq__push(&r->s->wq, c);
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

/*
 * The END frame's message: every error kept, one per line, the first first,
 * and how many more came (sluice/trace_file.h). NULL if out of memory.
 */
static char *errors_text(const struct sluice_session *s)
{
    const char *msgs[1 + SESSION_MORE_ERRORS];
    size_t n = sluice_session__errors(s, msgs, 1 + SESSION_MORE_ERRORS), len = 0;
    size_t kept = n < 1 + SESSION_MORE_ERRORS ? n : 1 + SESSION_MORE_ERRORS;
    size_t cap = SESSION_ERRORS_TEXT;
    char *text = malloc(cap);

    if (!text) {
        return NULL;
    }
    text[0] = '\0';
    for (size_t i = 0; i < kept; i++) {
        len += (size_t)snprintf(text + len, cap - len, "%s%s", i ? "\n" : "", msgs[i]);
    }
    if (n > kept) {
        snprintf(text + len, cap - len, "\n%zu" SESSION_NOT_KEPT, n - kept);
    }
    return text;
}

/* Close the trace file being recorded, if any, with the session's result. Main thread. */
static void end_recording(struct sluice_session *s)
{
    char why[400], *text;
    int err;

    if (!s->rec) {
        return;
    }
    text = errors_text(s);
    err = tf_writer__close(s->rec, s->err_code, sluice_session__detached(s), text ? text : s->err,
                           why, sizeof(why));
    free(text);
    s->rec = NULL;
    s->rec_err = err;
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
    err = ring_source__welcome(s);
    if (err) {
        end_recording(s);
        return err;
    }
    s->welcomed = 1;
    err = session_start_stages(s);
    if (err) {
        chunk_pool__destroy(&s->pool);
        end_recording(s);
        return err;
    }
    ring_source__run(s);
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
    struct sluice_consumer_opts o = {.sz = sizeof(o)};
    struct sluice_session *s;
    int has_tids = OPTS_HAVE(opts, n_tids);
    int fd;

    if (!path || !cb || cb->sz == 0 || (opts && opts->sz == 0) ||
        (has_tids && opts->n_tids && (!opts->tids || opts->n_tids > SIZE_MAX / 8))) {
        errno = EINVAL;
        return NULL;
    }
    if (OPTS_HAVE(opts, workers)) {
        o.workers = opts->workers;
    }
    /* A session needs a descriptor to own; this one is never read. */
    fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return NULL;
    }
    s = session_new(fd, cb, &o, 0);
    if (!s) {
        return NULL;
    }
    /* Copy only what the caller's struct version has (the tids came later). */
    if (has_tids && opts->n_tids) {
        s->n_tids = opts->n_tids;
        s->tids = malloc(s->n_tids * sizeof(*s->tids));
        if (s->tids) {
            memcpy(s->tids, opts->tids, s->n_tids * sizeof(*s->tids));
        }
    }
    if (OPTS_HAVE(opts, count_insns) && (opts->skip_insns || opts->count_insns)) {
        s->windowed = 1;
        s->win_from = opts->skip_insns;
        s->win_to = opts->count_insns && opts->count_insns <= UINT64_MAX - opts->skip_insns
                        ? opts->skip_insns + opts->count_insns
                        : UINT64_MAX;
    }
    if (!(s->file_path = strdup(path)) || (s->n_tids && !s->tids)) {
        sluice_session__free(s);
        errno = ENOMEM;
        return NULL;
    }
    return s;
}

/* Whether live file @p f is the one asked about: @p path as mapped by @p mapped (NULL: newest). */
static int live_file_is(const struct live_file *f, const struct maps *maps, const char *path,
                        const struct sluice_map_entry *mapped)
{
    if (f->maps != maps || strcmp(f->path, path) != 0) {
        return 0;
    }
    if (!mapped) {
        return !f->ino;
    }
    return f->dev == mapped->dev && f->ino == mapped->ino && f->size == mapped->size &&
           f->mtime_ns == mapped->mtime_ns && f->ctime_ns == mapped->ctime_ns;
}

/*
 * sluice_file__changed() and sluice_file__changed_at() in a live session:
 * the file at @p path now against the one the guest mapped, as module log
 * entry @p mapped says (NULL: the newest mapping of @p path in chunk
 * @p c's process map), compared once per process, path and mapped file.
 */
static int live_file_changed(struct sluice_session *s, const struct chunk *c, const char *path,
                             const struct sluice_map_entry *mapped, char *why, size_t n)
{
    struct maps *maps = c->blocks ? c->blocks->maps : NULL;
    const struct sluice_map_entry *then;
    struct live_file *f = NULL;
    int changed = 0;

    if (!maps) {
        return 0;
    }
    pthread_mutex_lock(&s->files_lock);
    for (size_t i = 0; i < s->n_live_files && !f; i++) {
        if (live_file_is(&s->live_files[i], maps, path, mapped)) {
            f = &s->live_files[i];
        }
    }
    if (!f && s->n_live_files == s->cap_live_files) {
        size_t cap = s->cap_live_files ? 2 * s->cap_live_files : 16;
        struct live_file *p = realloc(s->live_files, cap * sizeof(*p));

        if (p) {
            s->live_files = p;
            s->cap_live_files = cap;
        }
    }
    if (!f && s->n_live_files < s->cap_live_files) {
        f = &s->live_files[s->n_live_files];
        *f = (struct live_file){.maps = maps, .path = strdup(path)};
        if (mapped) {
            f->dev = mapped->dev;
            f->ino = mapped->ino;
            f->size = mapped->size;
            f->mtime_ns = mapped->mtime_ns;
            f->ctime_ns = mapped->ctime_ns;
        }
        if (f->path) {
            s->n_live_files++;
            then = mapped ? mapped : maps__mapped(maps, c->maps_pos, path);
            f->changed = then && file_id__mapped_changed(then, path, f->why, sizeof(f->why));
        } else {
            f = NULL; /* no memory: not said changed, as a file nothing is known of */
        }
    }
    if (f && f->changed) {
        changed = 1;
        if (n) {
            snprintf(why, n, "%s", f->why);
        }
    }
    pthread_mutex_unlock(&s->files_lock);
    return changed;
}

/* What a trace file session's FILES frames say of @p path, or NULL. */
static struct session_file *recorded_file(const struct sluice_session *s, const char *path)
{
    struct session_file key = {.path = (char *)path};

    return s->n_files ? bsearch(&key, s->files, s->n_files, sizeof(*s->files), session_file_cmp)
                      : NULL;
}

int sluice_file__changed(const struct sluice_thread_info *t, const char *path, char *why, size_t n)
{
    const struct chunk *c = decode_current(t);
    struct session_file *f;
    struct sluice_session *s;
    struct sluice_tf_file now;
    int state;

    if (!c || !path || (!why && n)) {
        return -EINVAL;
    }
    s = ((const struct ring_state *)c->ring)->s;
    if (!s->file_path) {
        return live_file_changed(s, c, path, NULL, why, n);
    }
    f = recorded_file(s, path);
    if (!f) {
        return 0; /* nothing recorded of it (a version 1 file) */
    }
    /* Compared once; later calls (cov asks at every change of module) take no lock. */
    if ((state = __atomic_load_n(&f->state, __ATOMIC_ACQUIRE)) == 0) {
        pthread_mutex_lock(&s->files_lock);
        if ((state = f->state) == 0) {
            /* A file that cannot be read now is not said changed: its reader says why. */
            state = file_id__get(path, &now) == 0 &&
                            file_id__changed(&f->then, &now, f->why, sizeof(f->why))
                        ? 2
                        : 1;
            __atomic_store_n(&f->state, state, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&s->files_lock);
    }
    if (state == 2 && n) {
        snprintf(why, n, "%s", f->why);
    }
    return state == 2;
}

/*
 * In a trace file session: whether the guest mapped, through module log
 * entry @p mapped, another file than the one recorded of @p path (a path
 * that held two files during the run: the recording read one of them) and
 * that file is not at the path now; with nothing recorded of @p path,
 * whether the file now is not the one mapped; else as
 * sluice_file__changed().
 */
static int recorded_mapped_changed(const struct sluice_thread_info *t,
                                   const struct sluice_session *s, const char *path,
                                   const struct sluice_map_entry *mapped, char *why, size_t n)
{
    struct session_file *f = recorded_file(s, path);

    if (!f) {
        /* The recording could not read it (gone already: a library unlinked once loaded):
         * only the mapping's identity says what it was; another machine's file never
         * matches it, and is not named. */
        return file_id__mapped_changed(mapped, path, why, n);
    }
    if (f->then.size != mapped->size || f->then.mtime_ns != mapped->mtime_ns) {
        /* Not the recorded file; the file at the path now may still be it (the same machine). */
        if (!file_id__mapped_changed(mapped, path, NULL, 0)) {
            return 0;
        }
        if (n) {
            snprintf(why, n,
                     "the guest mapped another file at that path than the one recorded (%llu "
                     "bytes then, %llu recorded)",
                     (unsigned long long)mapped->size, (unsigned long long)f->then.size);
        }
        return 1;
    }
    return sluice_file__changed(t, path, why, n);
}

int sluice_map__file_at(const struct sluice_thread_info *t, uint64_t addr,
                        struct sluice_file_id *out)
{
    const struct sluice_map_entry *mapped = NULL;
    struct sluice_module m;
    uint64_t table;
    int rc;

    if (!out) {
        return -EINVAL;
    }
    rc = decode_map_at(t, addr, &m, &mapped, &table);
    if (rc < 0) {
        return rc;
    }
    if (!m.path || !mapped || !mapped->ino) {
        return -ENOENT;
    }
    *out = (struct sluice_file_id){mapped->dev, mapped->ino, mapped->size, mapped->mtime_ns,
                                   mapped->ctime_ns};
    return 0;
}

/*
 * A worker thread's recent sluice_file__changed_at() answers, by mapping:
 * cov asks at every change of module, and code goes back and forth between
 * a program and its libraries; each answer is fixed once given.
 */
#define CHANGED_AT_SLOTS 16
static __thread struct changed_at {
    uint64_t table; /* block table serial; 0: empty */
    const struct sluice_map_entry *mapped;
    int changed;
    char why[128];
} changed_at[CHANGED_AT_SLOTS];

int sluice_file__changed_at(const struct sluice_thread_info *t, uint64_t addr, char *why, size_t n)
{
    const struct chunk *c = decode_current(t);
    const struct sluice_map_entry *mapped = NULL;
    const struct sluice_session *s;
    struct changed_at *a;
    struct sluice_module m;
    uint64_t table = 0;

    if (!c || (!why && n)) {
        return -EINVAL;
    }
    if (decode_map_at(t, addr, &m, &mapped, &table) != 0 || !m.path) {
        return 0; /* nothing mapped, or anonymous: no file to compare */
    }
    if (!mapped || !mapped->ino) {
        return sluice_file__changed(t, m.path, why, n); /* no identity logged (format < 10) */
    }
    a = &changed_at[((uintptr_t)mapped / sizeof(*mapped) ^ table) % CHANGED_AT_SLOTS];
    if (a->table != table || a->mapped != mapped) {
        s = ((const struct ring_state *)c->ring)->s;
        a->changed = s->file_path
                         ? recorded_mapped_changed(t, s, m.path, mapped, a->why, sizeof(a->why))
                         : live_file_changed((struct sluice_session *)s, c, m.path, mapped, a->why,
                                             sizeof(a->why));
        a->table = table;
        a->mapped = mapped;
    }
    if (a->changed == 1 && n) {
        snprintf(why, n, "%s", a->why);
    }
    return a->changed == 1;
}

int sluice_session__record_error(const struct sluice_session *s)
{
    return s->rec_err;
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

int sluice_session__welcomed(const struct sluice_session *s)
{
    return s->welcomed;
}

uint32_t sluice_session__once_before(const struct sluice_session *s)
{
    return s->once_before;
}

const char *sluice_session__error(const struct sluice_session *s)
{
    return s->err;
}

size_t sluice_session__errors(const struct sluice_session *s, const char **msgs, size_t max)
{
    size_t kept = s->n_errors < 1 + SESSION_MORE_ERRORS ? s->n_errors : 1 + SESSION_MORE_ERRORS;

    for (size_t i = 0; i < kept && i < max; i++) {
        msgs[i] = i == 0 ? s->err : s->more_err[i - 1];
    }
    return s->n_errors;
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
    pthread_mutex_destroy(&s->files_lock);
    for (size_t i = 0; i < s->n_files; i++) {
        free(s->files[i].path);
    }
    free(s->files);
    for (size_t i = 0; i < s->n_live_files; i++) {
        free(s->live_files[i].path);
    }
    free(s->live_files);
    pthread_cond_destroy(&s->readers_done);
    block_tables__destroy(&s->tables);
    if (s->rec) {
        char unused[8];

        tf_writer__close(s->rec, -ECANCELED, 0, "", unused, sizeof(unused)); /* never run */
    }
    free(s->file_path);
    free(s->tids);
    free(s);
}
