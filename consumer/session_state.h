/* SPDX-License-Identifier: GPL-2.0-or-later */
/**
 * @file session_state.h
 * @brief A session's state, shared by its two sources: the live rings
 *        (ring_source.c) and a trace file (file_source.c), and the stages
 *        (session.c).
 *
 * Private to libsluice. Which thread owns which field is said at each; the
 * stages (chunk pool, work queue, ordering thread) are the same whatever
 * the source, and a source only makes ring states and pushes their chunks
 * (numbered per ring from 0) and end markers.
 */
#ifndef SLUICE_SESSION_STATE_H
#define SLUICE_SESSION_STATE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "block_table.h"
#include "chunk.h"
#include "order.h"
#include "reader_pool.h"
#include "ring_reader.h"
#include "sluice/consumer.h"
#include "sluice/trace_file.h"
#include "workq.h"

#define container_of(p, type, member) ((type *)((char *)(p)-offsetof(type, member)))

struct tf_writer;

/** One guest thread's ring, read live or from a trace file. */
struct ring_state {
    struct order_ring ord;  /* ordering state; order_ring pointers map back here */
    struct order_entry end; /* the end-of-ring marker, pushed once by the reader */
    struct sluice_session *s;
    struct ring_reader rd;  /* unmapped once the ring has ended (on_end), under rings_lock */
    struct block_table *bt; /* its process's block table, or NULL; put when rd is unmapped */
    struct sluice_thread_info info;
    char arch[16];
    char comm[16];
    uint64_t seq;                /* reader thread: next chunk number */
    int failed;                  /* atomic: a worker found a bad span; the reader stops */
    int stopped;                 /* ordering thread: a bad span was reached; deliver no more */
    uint64_t released;           /* atomic, ordering thread: end of the spans given back */
    uint64_t taken;              /* reader thread: end of the last span queued as a chunk */
    struct sluice_counts counts; /* ordering thread adds; read after it stopped */
    uint64_t hdr_lost;           /* hdr->lost once the ring is drained */
    int64_t salvaged;            /* reader thread: -1, or bytes recovered from a dead producer */
    uint64_t stop;               /* reader thread: after a detach, read up to here (else ~0) */
    int lossy;                   /* the jitter does not wait for us on this ring (take_lossy) */
    int discarding;              /* reader thread: an error stopped the reading; discarding */
    uint64_t lost_seen;          /* reader thread, lossy: lost_events already put in the stream */
    /* Recording (ordering thread), or read from a trace file (main thread). */
    uint32_t file_no;     /* its number in the file */
    uint64_t file_chunks; /* chunks written, or read */
    uint64_t file_insns;  /* exec events of the chunks written */
    int file_done;        /* read: 0, FILE_ENDED (its RING_END came) or FILE_STOPPED */
    /* Read with an instruction window: chunks passed over before it, the module log
     * position of the last of them, and the map its first chunk delivered showed. */
    int file_passed;
    uint64_t file_maps_pos;
    int file_snap_own;
    uint64_t file_snap_at;
    uint64_t file_start_map; /* read: the module log position its stream starts in, or UINT64_MAX */
    struct ring_state *next;
};

/** A file a trace file's FILES frame names: what it was, and whether it is still that. */
struct session_file {
    char *path;
    struct sluice_tf_file then;
    int state; /* 0 not compared yet, 1 the same (or unreadable now), 2 changed; release-stored
                  under files_lock after why, so a reader that sees 1 or 2 needs no lock */
    char why[96];
};

/** A file a live session was asked about (sluice_file__changed()). */
struct live_file {
    const struct maps *maps; /* the process's module log it was asked about in */
    char *path;
    /* The mapped file asked about (as its module log entry says); all 0: the newest of path. */
    uint64_t dev, ino, size;
    int64_t mtime_ns, ctime_ns;
    int changed;
    char why[96];
};

/** Order of session files by path, for qsort() and bsearch() of s->files. */
static inline int session_file_cmp(const void *a, const void *b)
{
    return strcmp(((const struct session_file *)a)->path, ((const struct session_file *)b)->path);
}

/** A session (sluice/consumer.h). */
/* Errors a session keeps after its first (sluice_session__errors()). */
#define SESSION_MORE_ERRORS 15

/* A recording's END frame message (sluice/trace_file.h): every error kept, one per line,
 * then "N" SESSION_NOT_KEPT if more came; at most SESSION_ERRORS_TEXT bytes. */
#define SESSION_NOT_KEPT " more errors, not kept"
#define SESSION_ERRORS_TEXT                                                                        \
    ((SESSION_MORE_ERRORS + 1) * (sizeof(((struct sluice_session *)0)->err) + 1) + 64)

struct sluice_session {
    int fd;
    struct sluice_callbacks cb;
    unsigned workers;
    int lossless;
    int ran;
    int eof;        /* atomic: control socket at EOF, every head is final */
    int detaching;  /* atomic: sluice_session__detach() was called */
    int wake[2];    /* pipe: detach writes a byte, the control thread's poll wakes */
    int welcome_ms; /* how long to wait for WELCOME; -1: as long as it takes */
    /* WELCOME's once_before: Once pcs recorded before we came (sluice/ctl.h). */
    uint32_t once_before;
    uint64_t events; /* atomic: records decoded */
    uint64_t gseq;   /* atomic: the next chunk's or end's number over all rings (order.h) */
    uint64_t lost;   /* atomic: events LOST records delivered said were lost */
    struct ring_state *rings, **rings_tail;
    size_t n_rings;
    struct block_tables tables; /* one per arena, shared by its rings */
    /* Our tail file (WELCOME's; record.h), mapped as far as it may grow,
     * or NULL; and its descriptor, to see how far it has grown (add_ring). */
    struct sluice_ring_tail *tails;
    int tails_fd;
    struct chunk_pool pool;
    struct workq wq;
    struct order ord;
    pthread_mutex_t err_lock;
    /* A live session's reader threads (a few, each stepping many rings). */
    struct reader_pool readers;
    /* Ended rings are unmapped by the ordering thread while the control
     * thread may look at the others: rings_lock orders the two. It also
     * guards readers_live, the rings (or a trace file's reader) not yet
     * read to their end. */
    pthread_mutex_t rings_lock;
    pthread_cond_t readers_done;
    unsigned readers_live; /* changed under rings_lock, atomically: progress() reads it */
    int err_code;          /* first error, negative errno */
    char err[512];
    /* The errors after the first, distinct ones, as they came (a damaged
     * trace file can stop several threads, each for its own reason). */
    char more_err[SESSION_MORE_ERRORS][512];
    size_t n_errors;   /* every distinct error so far, the first included */
    char drop_why[96]; /* under err_lock: why the jitter said it dropped us, or "" */
    int welcomed;      /* the jitter's WELCOME was read (sluice_session__welcomed()) */
    /* Control thread: rings refused for what their place held (a header that is not
     * their announcement, no ring at all): errors unless a drop notice follows (after a
     * drop the jitter reuses the places of rings it announced before: ring_source__run()).
     * The first SESSION_MORE_ERRORS + 1, and how many. */
    char refused[SESSION_MORE_ERRORS + 1][256];
    size_t n_refused;
    int cut_off; /* atomic: a slot of ours was seen closed while its producer ran (dropped) */
    /* Under err_lock: rings whose trace a drop cut (said in the drop's one error at the
     * end, name_drop()), and the first of them: its tid and where it stops. */
    unsigned long drop_cuts;
    uint32_t drop_tid;
    uint64_t drop_pos;
    struct tf_writer *rec; /* recording into a trace file (opts->record), or NULL */
    int rec_uncompressed;  /* opts->record_uncompressed: chunks stored as they are */
    int rec_err;           /* main thread, once it is closed: why it stopped (-errno), or 0 */
    uint32_t rec_rings;    /* ordering thread: rings numbered in it so far */
    char *file_path;       /* a session of a trace file (sluice_session__open_file()), or NULL */
    uint32_t *tids;        /* and the threads it delivers (opts->tids), or NULL: all */
    size_t n_tids;
    int windowed;              /* and an instruction window (opts->skip_insns, count_insns): */
    uint64_t win_from, win_to; /* each thread's exec events [from, to) */
    /* and the files its FILES frames name, by path (read before the stages start), each
     * compared with the file at its path now at the first question (under files_lock). */
    struct session_file *files;
    size_t n_files;
    pthread_mutex_t files_lock;
    /* A live session: the files asked about, per process, each compared at the first
     * question with the file its module log says the guest mapped (under files_lock). */
    struct live_file *live_files;
    size_t n_live_files, cap_live_files;
};

/**
 * Record the first error of @p s (later ones are usually consequences):
 * @p code, a negative errno, and a one-line message. Any thread.
 * @return @p code.
 */
int session_error(struct sluice_session *s, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/**
 * Count @p n errors more whose messages are not kept (a recording's END
 * frame says how many it did not keep). Any thread.
 */
void session_more_errors(struct sluice_session *s, size_t n);

/**
 * Start the stages: the chunk pool, the ordering thread and the workers.
 * Main thread, once.
 * @return 0, or a negative errno (the session's error set).
 */
int session_start_stages(struct sluice_session *s);

/**
 * After the source's last push: let the workers and the ordering thread
 * deliver everything, stop them, free the pool, and add each ring's
 * header-counted lost events to its counts. Main thread.
 */
void session_finish_stages(struct sluice_session *s);

/**
 * Queue @p c, a span of ring @p r filled by a source (words, len, at, and
 * its module log position), as the ring's next chunk: its table, its ring
 * and its number, then the work queue. The source's thread (a ring's
 * reader, or the file's).
 */
void session_queue_chunk(struct ring_state *r, struct chunk *c);

/** Copy at most @p n - 1 bytes of a fixed-size, maybe unterminated, field. */
static inline void session_copy_name(char *dst, const char *src, size_t n)
{
    memcpy(dst, src, n - 1);
    dst[n - 1] = '\0';
}

/**
 * The live source (ring_source.c): read the WELCOME (or the jitter's
 * refusal) and map the tail file it brings. Main thread, before the stages
 * start.
 * @return 0, or a negative errno (the session's error set).
 */
int ring_source__welcome(struct sluice_session *s);

/**
 * The live source: receive RING messages and read each ring on its own
 * thread, pushing its chunks and then its end marker, until the trace
 * ends (or a detach) and every reader thread is done. Main thread, with
 * the stages started.
 */
void ring_source__run(struct sluice_session *s);

/**
 * The trace file source (file_source.c): read s->file_path to its end
 * through the stages, as sluice_session__open_file() says. Main thread.
 * @return 0, or the session's first error.
 */
int file_source__run(struct sluice_session *s);

#endif /* SLUICE_SESSION_STATE_H */
