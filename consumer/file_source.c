/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * file_source.c — a session's second source: a trace file (layout:
 * sluice/trace_file.h) read back into the same stages a live session uses.
 *
 * Thread: the session's main thread, in sluice_session__run(). It rebuilds
 * each process's block table and module log from the file first (as the
 * memfd images block_table.c maps), then reads the frames in file order:
 * a ring state per RING frame, each CHUNK's stored payload into a chunk
 * pushed to the workers (who decompress and decode it), an end marker per
 * RING_END. It must never trust the file: every number in it is checked
 * before it is used, a damaged frame stops only its thread (or its table),
 * and whatever came before it is delivered.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "session_state.h"
#include "sluice/trace_file.h"
#include "tf_read.h"

enum { FILE_ENDED = 1, FILE_STOPPED = 2 };

/*
 * The most a file's tables may rebuild: a few times what the jitter makes
 * (an 80 MiB table, its last 16 MiB the module log), so that a small file
 * of well-compressed zeros cannot make report take the machine's memory.
 */
#define FILE_WORDS_MAX (256ull << 20)
#define FILE_LOG_MAX (64ull << 20)
#define FILE_TABLES_MAX (1ull << 30)

/* One table of the file, rebuilt: its descriptors and module log as recorded. */
struct file_table {
    uint8_t *words, *log;
    uint64_t n_words, n_log; /* bytes */
    uint64_t dropped;
    int bad;                /* a piece was bad: it ends before it */
    struct block_table *bt; /* its image, mapped (the file's reference), or NULL */
};

/* The file being read, with what its frames build. Main thread. */
struct file_read {
    struct sluice_session *s;
    struct tf_reader rd;
    struct file_table *tables;
    size_t n_tables;
    uint64_t table_bytes;      /* all tables' bytes so far (FILE_TABLES_MAX) */
    struct ring_state **rings; /* by number */
    size_t n_rings;
    int ended; /* END came */
};

/* One frame, named for a message: "chunk 3 of tid 1234 (frame at byte 5678)". */
static const char *frame_name(const struct file_read *f, size_t i, char *buf, size_t n)
{
    const struct tf_ref *x = &f->rd.ref[i];

    if (x->h.type == SLUICE_TF_CHUNK && x->h.stream < f->n_rings && f->rings[x->h.stream]) {
        snprintf(buf, n, "chunk %llu of tid %u (frame at byte %llu)",
                 (unsigned long long)x->h.arg[0], f->rings[x->h.stream]->info.tid,
                 (unsigned long long)x->offset);
    } else if (x->h.type == SLUICE_TF_RING) {
        snprintf(buf, n, "the start of tid %u's ring %u (frame at byte %llu)",
                 (uint32_t)(x->h.arg[0] >> 32), x->h.stream, (unsigned long long)x->offset);
    } else {
        snprintf(buf, n, "%s frame at byte %llu", tf_type_name(x->h.type),
                 (unsigned long long)x->offset);
    }
    return buf;
}

static int file_error(struct file_read *f, size_t i, int code, const char *why)
{
    char name[128];

    return session_error(f->s, code, "%s: %s: %s", f->rd.path, frame_name(f, i, name, sizeof(name)),
                         why);
}

/* Append a TABLE piece to its part; pieces come in order. 0 or an error. */
static int file_piece(struct file_read *f, size_t i)
{
    const struct sluice_tf_frame *h = &f->rd.ref[i].h;
    struct file_table *t;
    uint8_t **part, *p;
    uint64_t *have;
    size_t len;
    char why[320];
    int rc;

    if (h->arg[0] > 1) {
        return file_error(f, i, -EPROTO, "names no part of a table (0 or 1)");
    }
    t = &f->tables[h->stream];
    part = h->arg[0] ? &t->log : &t->words;
    have = h->arg[0] ? &t->n_log : &t->n_words;
    if (h->arg[1] != *have) {
        return file_error(f, i, -EPROTO, "a table piece out of order");
    }
    if (*have + h->raw_bytes > (h->arg[0] ? FILE_LOG_MAX : FILE_WORDS_MAX) ||
        f->table_bytes + h->raw_bytes > FILE_TABLES_MAX) {
        return file_error(f, i, -EPROTO,
                          "a table past what a producer makes (256 MiB of descriptors, 64 MiB "
                          "of module log, 1 GiB in all)");
    }
    p = realloc(*part, *have + h->raw_bytes + 1);
    if (!p) {
        return file_error(f, i, -ENOMEM, "out of memory");
    }
    *part = p;
    rc = tf_reader__payload(&f->rd, i, p + *have, h->raw_bytes, &len, why, sizeof(why));
    if (rc < 0) {
        return file_error(f, i, rc, why);
    }
    *have += len;
    f->table_bytes += len;
    if (h->arg[0]) {
        t->dropped = h->arg[2];
    }
    return 0;
}

/*
 * Table @p t as a memfd laid out as the producer's (record.h), mapped by
 * block_table.c into t->bt (the file's reference, put by file_free()); the
 * descriptor is closed at once (the mapping keeps it), so a trace of
 * thousands of processes holds none.
 */
static int file_image(struct file_read *f, struct file_table *t)
{
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t words = t->n_words / 8 * 8, log_at = SLUICE_BLOCKS_HDR_BYTES + words;
    uint64_t bytes = (log_at + t->n_log + page - 1) / page * page;
    struct sluice_blocks_hdr h = {
        .magic = SLUICE_BLOCKS_MAGIC,
        .version = SLUICE_FORMAT_VERSION,
        .hdr_bytes = SLUICE_BLOCKS_HDR_BYTES,
        .capacity_words = words / 8,
        .used_words = words / 8,
        .maps_offset = t->n_log ? log_at : 0,
        .maps_capacity = t->n_log,
        .maps_used = t->n_log,
        .maps_dropped = t->dropped,
    };

    char why[160];
    int fd = memfd_create("sluice-table", MFD_CLOEXEC), rc;

    if (fd < 0 || ftruncate(fd, (off_t)bytes) < 0 ||
        pwrite(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
        (words && pwrite(fd, t->words, words, SLUICE_BLOCKS_HDR_BYTES) != (ssize_t)words) ||
        (t->n_log && pwrite(fd, t->log, t->n_log, (off_t)log_at) != (ssize_t)t->n_log)) {
        rc = -errno;
        snprintf(why, sizeof(why), "%s", strerror(errno));
    } else {
        rc = block_tables__get(&f->s->tables, fd, 0, bytes, &t->bt, why, sizeof(why));
    }
    if (fd >= 0) {
        close(fd);
    }
    return rc < 0 ? session_error(f->s, rc, "%s: rebuilding the table of its process %zu: %s",
                                  f->rd.path, (size_t)(t - f->tables), why)
                  : 0;
}

/* Every table of the file, read before any chunk is decoded (workers only read them). */
static int file_tables(struct file_read *f)
{
    size_t i, n = 0;

    /* Numbers past the frame count are a damaged header's: its frame is named when read. */
    for (i = 0; i < f->rd.n; i++) {
        const struct sluice_tf_frame *h = &f->rd.ref[i].h;
        uint64_t t = h->type == SLUICE_TF_TABLE  ? h->stream
                     : h->type == SLUICE_TF_RING ? h->arg[2]
                                                 : UINT64_MAX;

        if (t < f->rd.n && t + 1 > n) {
            n = (size_t)t + 1;
        }
    }
    f->n_tables = n;
    f->tables = calloc(n + 1, sizeof(*f->tables));
    if (!f->tables) {
        return session_error(f->s, -ENOMEM, "out of memory for %zu tables", n);
    }
    /* A bad piece ends its table there (the error names it): the chunks that need no
     * more of it still decode, the ones that do are named as they fail. */
    for (i = 0; i < f->rd.n; i++) {
        const struct sluice_tf_frame *h = &f->rd.ref[i].h;

        if (h->type == SLUICE_TF_TABLE && h->stream < n && !f->tables[h->stream].bad &&
            (f->rd.ref[i].bad || file_piece(f, i) < 0)) {
            f->tables[h->stream].bad = 1;
            if (f->rd.ref[i].bad) {
                file_error(f, i, -EPROTO, "its header is damaged");
            }
        }
    }
    for (i = 0; i < n; i++) {
        if (file_image(f, &f->tables[i]) < 0) {
            return f->s->err_code;
        }
        free(f->tables[i].words);
        free(f->tables[i].log);
        f->tables[i].words = f->tables[i].log = NULL;
    }
    return 0;
}

/* A RING frame: the ring's state, its table mapped (one more reference). */
static int file_ring(struct file_read *f, size_t i)
{
    const struct sluice_tf_frame *h = &f->rd.ref[i].h;
    struct ring_state *r;
    char names[33] = {0}, why[320];
    size_t len;
    int rc;

    if (h->stream >= f->n_rings || f->rings[h->stream]) {
        return file_error(f, i, -EPROTO, "a ring number past the file's frames, or used twice");
    }
    rc = tf_reader__payload(&f->rd, i, names, 32, &len, why, sizeof(why));
    if (rc < 0) {
        return file_error(f, i, rc, why);
    }
    if (h->arg[2] != SLUICE_TF_NO_TABLE && h->arg[2] >= f->n_tables) {
        return file_error(f, i, -EPROTO, "names no table of the file");
    }
    r = calloc(1, sizeof(*r));
    if (!r) {
        return file_error(f, i, -ENOMEM, "out of memory");
    }
    if (h->arg[2] != SLUICE_TF_NO_TABLE) {
        r->bt = f->tables[h->arg[2]].bt;
        block_tables__ref(&f->s->tables, r->bt); /* the ring's, put when it ends */
        r->bt->snapshot_taken = 1;               /* the file says which chunk carries it */
        r->bt->snapshot_at = h->arg[3];          /* before any chunk: workers read it */
    }
    r->s = f->s;
    r->salvaged = -1;
    r->file_no = h->stream;
    session_copy_name(r->arch, names, sizeof(r->arch));
    session_copy_name(r->comm, names + 16, sizeof(r->comm));
    r->info = (struct sluice_thread_info){(uint32_t)h->arg[0],
                                          (uint32_t)(h->arg[0] >> 32),
                                          (uint32_t)h->arg[1],
                                          (h->arg[1] >> 32) != 0,
                                          r->arch,
                                          r->comm};
    f->rings[h->stream] = r;
    __atomic_add_fetch(&f->s->readers_live, 1, __ATOMIC_RELAXED);
    *f->s->rings_tail = r;
    f->s->rings_tail = &r->next;
    f->s->n_rings++;
    return 0;
}

/* The ring a CHUNK or RING_END frame names, if it is still being read. */
static struct ring_state *file_ring_of(struct file_read *f, size_t i)
{
    uint32_t n = f->rd.ref[i].h.stream;

    if (n >= f->n_rings || !f->rings[n]) {
        file_error(f, i, -EPROTO, "names a thread whose start is not in the file");
        return NULL;
    }
    if (f->rings[n]->file_done == FILE_ENDED) {
        file_error(f, i, -EPROTO, "comes after its thread's end");
    }
    return f->rings[n]->file_done ? NULL : f->rings[n];
}

/* The ring's end, in its turn after its last chunk: its RING_END came (FILE_ENDED), or
 * its chunks stopped (FILE_STOPPED, the reason already said). */
static void file_ring_end(struct ring_state *r, int how)
{
    /* Threads "being read", for the status line: started and not ended in the file so far. */
    __atomic_sub_fetch(&r->s->readers_live, 1, __ATOMIC_RELAXED);
    r->file_done = how;
    r->end.ring = &r->ord;
    r->end.seq = r->seq;
    r->end.last = 1;
    order__push(&r->s->ord, &r->end);
}

/* A CHUNK frame: its records into a chunk, queued for the workers as a reader thread would. */
static void file_chunk(struct file_read *f, size_t i)
{
    const struct sluice_tf_frame *h = &f->rd.ref[i].h;
    struct ring_state *r = file_ring_of(f, i);
    struct chunk *c;
    char why[320];
    int rc;

    if (!r) {
        return;
    }
    if (h->arg[0] != r->seq) {
        file_error(f, i, -EPROTO,
                   h->arg[0] < r->seq ? "a repeat of a chunk read before"
                                      : "out of order: the chunks before it are missing");
        file_ring_end(r, FILE_STOPPED);
        return;
    }
    c = chunk_pool__get(&f->s->pool); /* backpressure, as for a ring */
    if (!c || !chunk__copy_area(c)) {
        file_error(f, i, -ENOMEM, "out of memory for chunks");
        if (c) {
            chunk_pool__put(&f->s->pool, c);
        }
        file_ring_end(r, FILE_STOPPED);
        return;
    }
    /* Read and checked here; decompressed by the worker (work()), in parallel. */
    rc = tf_reader__stored(&f->rd, i, &c->packed, SLUICE_CHUNK_BYTES + 8, why, sizeof(why));
    if (rc < 0 || c->packed->raw == 0 || c->packed->raw % 8) {
        file_error(f, i, rc < 0 ? rc : -EPROTO, rc < 0 ? why : "not whole records");
        if (c->packed) {
            c->packed->len = 0;
        }
        chunk_pool__put(&f->s->pool, c);
        file_ring_end(r, FILE_STOPPED); /* what follows a missing chunk is not its trace */
        return;
    }
    frame_name(f, i, c->packed->name, sizeof(c->packed->name));
    c->words = c->copy;
    c->len = (size_t)c->packed->raw;
    c->at = h->arg[1];
    c->copied = 1;
    c->maps_pos = h->arg[2];
    c->snapshot = h->arg[3] != 0 && r->bt && r->bt->maps;
    session_queue_chunk(r, c);
}

/* Every frame in file order, as the recorded session took them. */
static void file_frames(struct file_read *f)
{
    size_t i;

    for (i = 0; i < f->rd.n && !__atomic_load_n(&f->s->detaching, __ATOMIC_ACQUIRE); i++) {
        const struct sluice_tf_frame *h = &f->rd.ref[i].h;
        struct ring_state *r;

        if (f->rd.ref[i].bad) {
            /* Listed by the index, its header damaged: its thread stops there. */
            file_error(f, i, -EPROTO, "its header is damaged");
            if (h->type == SLUICE_TF_CHUNK && (r = file_ring_of(f, i))) {
                file_ring_end(r, FILE_STOPPED);
            }
        } else if (h->type == SLUICE_TF_RING) {
            file_ring(f, i);
        } else if (h->type == SLUICE_TF_CHUNK) {
            file_chunk(f, i);
        } else if (h->type == SLUICE_TF_RING_END && (r = file_ring_of(f, i))) {
            r->hdr_lost = h->arg[1];
            r->salvaged = h->arg[2] ? (int64_t)(h->arg[2] - 1) : -1;
            file_ring_end(r, FILE_ENDED);
        } else if (h->type == SLUICE_TF_END) {
            char msg[sizeof(f->s->err)] = {0}, why[320];
            size_t len;

            f->ended = 1;
            if ((int64_t)h->arg[0] < 0) {
                if (tf_reader__payload(&f->rd, i, msg, sizeof(msg) - 1, &len, why, sizeof(why)) <
                    0) {
                    snprintf(msg, sizeof(msg), "(its message: %s)", why);
                }
                for (char *p = msg; *p; p++) {
                    *p = (unsigned char)*p < 0x20 || *p == 0x7f ? '?' : *p; /* one line */
                }
                session_error(f->s,
                              h->arg[0] >= (uint64_t)INT32_MIN ? (int)(int64_t)h->arg[0] : -EPROTO,
                              "as recorded: %s", msg);
            }
        }
    }
}

/* The rings left open (a file cut short), ended; and why they were. */
static void file_finish(struct file_read *f)
{
    size_t i;

    if (f->rd.cut[0] && f->rd.cut_h.magic == SLUICE_TF_FRAME_MAGIC &&
        f->rd.cut_h.type == SLUICE_TF_CHUNK && f->rd.cut_h.stream < f->n_rings &&
        f->rings[f->rd.cut_h.stream]) {
        session_error(f->s, -EPROTO,
                      "%s: chunk %llu of tid %u: %s; the trace stops there (what came before was "
                      "read)",
                      f->rd.path, (unsigned long long)f->rd.cut_h.arg[0],
                      f->rings[f->rd.cut_h.stream]->info.tid, f->rd.cut);
    } else if (f->rd.cut[0]) {
        session_error(f->s, -EPROTO, "%s: %s; the trace stops there (what came before was read)",
                      f->rd.path, f->rd.cut);
    } else if (!f->ended && !__atomic_load_n(&f->s->detaching, __ATOMIC_ACQUIRE)) {
        session_error(f->s, -EPROTO,
                      "%s: no END frame: the recording was cut short (what came before was read)",
                      f->rd.path);
    }
    for (i = 0; i < f->n_rings; i++) {
        if (f->rings[i] && !f->rings[i]->file_done) {
            file_ring_end(f->rings[i], FILE_STOPPED);
        }
    }
}

static void file_free(struct file_read *f)
{
    for (size_t i = 0; i < f->n_tables; i++) {
        free(f->tables[i].words);
        free(f->tables[i].log);
        block_tables__put(&f->s->tables, f->tables[i].bt); /* rings hold their own */
    }
    free(f->tables);
    free(f->rings);
    tf_reader__close(&f->rd);
}

int file_source__run(struct sluice_session *s)
{
    struct file_read f = {.s = s};
    char why[400];
    int err = tf_reader__open(&f.rd, s->file_path, why, sizeof(why));

    if (err) {
        return session_error(s, err, "%s", why);
    }
    f.n_rings = f.rd.n; /* ring numbers above the frame count are a damaged file's */
    f.rings = calloc(f.n_rings + 1, sizeof(*f.rings));
    if (!f.rings) {
        file_free(&f);
        return session_error(s, -ENOMEM, "out of memory for %zu rings", f.n_rings);
    }
    if (file_tables(&f) < 0 || session_start_stages(s) < 0) {
        file_free(&f);
        return s->err_code;
    }
    file_frames(&f);
    file_finish(&f);
    session_finish_stages(s);
    file_free(&f);
    return s->err_code;
}
