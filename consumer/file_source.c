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
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "decode.h"
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
    uint8_t *skip;        /* by ring number: a thread the session does not deliver (s->tids) */
    uint64_t *ring_table; /* by ring number: its table (UINT64_MAX: none) */
    uint8_t *need;        /* by table number: a delivered thread's process has it */
    uint8_t *snap_due;    /* by table number: its map snapshot was in a thread not delivered */
    uint64_t *table_pos;  /* by table number: the module log position of its last chunk so far */
    uint64_t *next_insns; /* by frame (with a window): the INDEX's count of the ring's next chunk */
    int ended;            /* END came */
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

/* Whether the session delivers thread @p tid (s->tids, or all). */
static int file_wants(const struct file_read *f, uint32_t tid)
{
    size_t k;

    for (k = 0; k < f->s->n_tids; k++) {
        if (f->s->tids[k] == tid) {
            return 1;
        }
    }
    return f->s->n_tids == 0;
}

/*
 * Mark the rings of threads the session does not deliver (f->skip), and
 * the tables its threads need (f->need, for @p n_tables tables). Every
 * tid asked for must be in the file: else the error names it and the
 * file's threads, before anything is delivered. 0 or the error.
 */
static int file_select(struct file_read *f, size_t n_tables)
{
    char have[200] = "";
    size_t i, k, len = 0;

    for (i = 0; i < f->rd.n; i++) {
        const struct sluice_tf_frame *h = &f->rd.ref[i].h;
        uint32_t tid = (uint32_t)(h->arg[0] >> 32); /* (a damaged header's: the index's word) */

        if (h->type != SLUICE_TF_RING || h->stream >= f->n_rings) {
            continue;
        }
        f->ring_table[h->stream] = f->rd.ref[i].bad ? UINT64_MAX : h->arg[2];
        if (len < sizeof(have) - 16) {
            len += (size_t)snprintf(have + len, sizeof(have) - len, "%s%u", len ? ", " : "", tid);
        }
        if (!file_wants(f, tid)) {
            f->skip[h->stream] = 1;
        } else if (!f->rd.ref[i].bad && h->arg[2] < n_tables) {
            f->need[h->arg[2]] = 1;
        }
    }
    for (k = 0; k < f->s->n_tids; k++) {
        for (i = 0; i < f->rd.n; i++) {
            const struct sluice_tf_frame *h = &f->rd.ref[i].h;

            if (h->type == SLUICE_TF_RING && (uint32_t)(h->arg[0] >> 32) == f->s->tids[k]) {
                break;
            }
        }
        if (i == f->rd.n) {
            return session_error(f->s, -ENOENT, "%s has no thread %u (its threads: %s%s)",
                                 f->rd.path, f->s->tids[k], len ? have : "none",
                                 len >= sizeof(have) - 16 ? "..." : "");
        }
    }
    return 0;
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
    f->need = calloc(n + 1, 1);
    f->snap_due = calloc(n + 1, 1);
    f->table_pos = malloc((n + 1) * sizeof(*f->table_pos));
    if (!f->tables || !f->need || !f->snap_due || !f->table_pos) {
        return session_error(f->s, -ENOMEM, "out of memory for %zu tables", n);
    }
    memset(f->table_pos, 0xff, (n + 1) * sizeof(*f->table_pos)); /* none yet */
    if (file_select(f, n) < 0) {
        return f->s->err_code;
    }
    /* A bad piece ends its table there (the error names it): the chunks that need no
     * more of it still decode, the ones that do are named as they fail. */
    for (i = 0; i < f->rd.n; i++) {
        const struct sluice_tf_frame *h = &f->rd.ref[i].h;

        if (h->type == SLUICE_TF_TABLE && h->stream < n && f->need[h->stream] &&
            !f->tables[h->stream].bad && (f->rd.ref[i].bad || file_piece(f, i) < 0)) {
            f->tables[h->stream].bad = 1;
            if (f->rd.ref[i].bad) {
                file_error(f, i, -EPROTO, "its header is damaged");
            }
        }
    }
    for (i = 0; i < n; i++) {
        if (f->need[i] && file_image(f, &f->tables[i]) < 0) {
            return f->s->err_code;
        }
        free(f->tables[i].words);
        free(f->tables[i].log);
        f->tables[i].words = f->tables[i].log = NULL;
    }
    return 0;
}

/* Most bytes of FILES frames a file may hold (about 200 000 files). */
#define FILE_FILES_MAX (64ull << 20)

/* The entries of one FILES frame's payload @p p (@p len bytes) into s->files. 0 or an error. */
static int file_files_of(struct file_read *f, size_t i, const uint8_t *p, size_t len, size_t *cap)
{
    struct sluice_session *s = f->s;
    struct sluice_tf_file e;
    size_t at = 0, bytes;

    while (len - at >= sizeof(e)) {
        memcpy(&e, p + at, sizeof(e));
        bytes = sizeof(e) + ((size_t)e.path_len + 7) / 8 * 8;
        if (e.path_len == 0 || e.path_len > 4095 || bytes > len - at || e.id_len > sizeof(e.id) ||
            memchr(p + at + sizeof(e), 0, e.path_len)) {
            return file_error(f, i, -EPROTO,
                              "an entry that is not one (its files are not "
                              "checked)");
        }
        if (s->n_files == *cap) {
            size_t c = *cap ? 2 * *cap : 64;
            struct session_file *nf = realloc(s->files, c * sizeof(*nf));

            if (!nf) {
                return file_error(f, i, -ENOMEM, "out of memory");
            }
            s->files = nf;
            *cap = c;
        }
        s->files[s->n_files] = (struct session_file){.then = e};
        if (!(s->files[s->n_files].path = strndup((const char *)p + at + sizeof(e), e.path_len))) {
            return file_error(f, i, -ENOMEM, "out of memory");
        }
        s->n_files++;
        at += bytes;
    }
    return at == len ? 0 : file_error(f, i, -EPROTO, "ends inside an entry");
}

/*
 * What the files the guest mapped were when recorded (FILES frames), into
 * s->files sorted by path, for sluice_file__changed(). A damaged frame is
 * said and passed over: only its files go unchecked.
 */
static void file_files(struct file_read *f)
{
    uint64_t total = 0;
    size_t i, cap = 0, len;
    uint8_t *p;
    char why[320];
    int rc;

    for (i = 0; i < f->rd.n; i++) {
        const struct sluice_tf_frame *h = &f->rd.ref[i].h;

        if (h->type != SLUICE_TF_FILES || f->rd.ref[i].bad) {
            continue;
        }
        if ((total += h->raw_bytes) > FILE_FILES_MAX) {
            file_error(f, i, -EPROTO, "past 64 MiB of FILES frames (the rest are not checked)");
            break;
        }
        if (!(p = malloc(h->raw_bytes + 1))) {
            file_error(f, i, -ENOMEM, "out of memory");
            break;
        }
        rc = tf_reader__payload(&f->rd, i, p, h->raw_bytes, &len, why, sizeof(why));
        if (rc < 0) {
            file_error(f, i, rc, why);
        } else {
            file_files_of(f, i, p, len, &cap);
        }
        free(p);
    }
    if (f->s->n_files) {
        qsort(f->s->files, f->s->n_files, sizeof(*f->s->files), session_file_cmp);
    }
}

/*
 * A thread whose start (RING frame @p i, stream number in range, not yet
 * begun) cannot be read: said once, here; its chunks and end are then
 * passed over like an unselected thread's, not each said again (they
 * crowded out the errors of other threads).
 */
static int file_ring_failed(struct file_read *f, size_t i, int code, const char *why)
{
    char full[400];

    snprintf(full, sizeof(full), "%s; that thread is not delivered", why);
    f->skip[f->rd.ref[i].h.stream] = 1;
    return file_error(f, i, code, full);
}

/* A RING frame: the ring's state, its table mapped (one more reference). */
static int file_ring(struct file_read *f, size_t i)
{
    const struct sluice_tf_frame *h = &f->rd.ref[i].h;
    struct ring_state *r;
    char names[41] = {0}, why[320];
    uint64_t start_map;
    size_t len;
    int rc;

    if (h->stream < f->n_rings && f->skip[h->stream]) {
        return 0; /* a thread not delivered: its frames are passed over */
    }
    if (h->stream >= f->n_rings || f->rings[h->stream]) {
        return file_error(f, i, -EPROTO, "a ring number past the file's frames, or used twice");
    }
    rc = tf_reader__payload(&f->rd, i, names, 40, &len, why, sizeof(why));
    if (rc < 0) {
        return file_ring_failed(f, i, rc, why);
    }
    if (h->arg[2] != SLUICE_TF_NO_TABLE && (h->arg[2] >= f->n_tables || !f->tables[h->arg[2]].bt)) {
        return file_ring_failed(f, i, -EPROTO, "names no table of the file");
    }
    r = calloc(1, sizeof(*r));
    if (!r) {
        return file_error(f, i, -ENOMEM, "out of memory");
    }
    if (h->arg[2] != SLUICE_TF_NO_TABLE) {
        r->bt = f->tables[h->arg[2]].bt;
        block_tables__ref(&f->s->tables, r->bt); /* the ring's, put when it ends */
        r->bt->snapshot_taken = 1;               /* the file says which chunk carries it */
        if (!r->bt->snapshot_fixed) {
            /* Once, at the table's first ring, before any of its chunks: workers read it
             * (tf_write.c writes the process's one in each; another, in a file made
             * otherwise, is not written under the workers' feet). */
            r->bt->snapshot_at = h->arg[3];
            r->bt->snapshot_fixed = 1;
        }
    }
    r->s = f->s;
    r->salvaged = -1;
    r->file_no = h->stream;
    memcpy(&start_map, names + 32, 8);
    r->file_start_map = len >= 40 ? le64toh(start_map) : UINT64_MAX; /* older files: 32 bytes */
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

    if (n < f->n_rings && f->skip[n]) {
        return NULL; /* a thread not delivered */
    }
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
    r->end.gseq = __atomic_fetch_add(&r->s->gseq, 1, __ATOMIC_RELAXED);
    r->end.last = 1;
    order__push(&r->s->ord, &r->end);
}

/*
 * Where CHUNK frame @p i lies against the session's instruction window,
 * from the INDEX's counts of exec events before it and before the ring's
 * next chunk: FILE_PASS_BEFORE or _AFTER (no event of it is the window's:
 * not read),
 * FILE_WHOLE (all of them are) or FILE_EDGE (decode it through the
 * window). A chunk's first records may belong to the instruction before
 * it (a span may end between an instruction and its accesses), hence the
 * strict comparisons.
 */
enum { FILE_PASS_BEFORE, FILE_PASS_AFTER, FILE_WHOLE, FILE_EDGE };

static int file_window(const struct file_read *f, size_t i)
{
    const struct sluice_session *s = f->s;
    uint64_t before, next;

    if (!s->windowed) {
        return FILE_WHOLE;
    }
    before = f->rd.ref[i].insns;
    next = f->next_insns[i]; /* UINT64_MAX for the ring's last */
    if (before == UINT64_MAX) {
        return FILE_PASS_AFTER; /* uncounted: after a chunk that does not read (file_count_insns) */
    }
    if (s->win_from > 0 && next <= s->win_from) {
        return FILE_PASS_BEFORE;
    }
    if (before > s->win_to) {
        return FILE_PASS_AFTER;
    }
    return (s->win_from == 0 || before > s->win_from) && next <= s->win_to ? FILE_WHOLE : FILE_EDGE;
}

/*
 * The map snapshot chunk @p c of ring @p r delivers first, if any: the one
 * the recorded session delivered there (@p carried, the frame's arg[3]);
 * or, for the first chunk delivered after chunks a window passed over, the
 * map where that chunk begins (the last passed chunk's position); or, when
 * a thread not delivered carried the process's (snap_due), the map its
 * stream starts in if this is its @p first chunk and the file says where
 * (RING payload), else the map as the process's chunks before this one in
 * the file left it. From then on, MAP records before the snapshot's
 * position are in it.
 */
static void file_snapshot(struct file_read *f, struct ring_state *r, struct chunk *c, int carried,
                          int first)
{
    uint64_t t = f->ring_table[r->file_no];
    int due = t < f->n_tables && f->snap_due[t];
    int maps = r->bt && r->bt->maps;

    if (r->file_passed && !r->file_snap_own) {
        r->file_snap_own = 1;
        r->file_snap_at = r->file_maps_pos;
        c->snapshot = maps;
    } else if (due && !carried && first && r->file_start_map != UINT64_MAX && !r->file_snap_own) {
        /* Its first chunk: the map its stream starts in. The process's chunks before it in
         * the file may not hold the mapping its stack is (another thread's mmap, delivered
         * after this thread's first chunk). */
        r->file_snap_own = 1;
        r->file_snap_at = r->file_start_map;
        c->snapshot = maps;
    } else if (due && !carried && f->table_pos[t] != UINT64_MAX && !r->file_snap_own) {
        r->file_snap_own = 1;
        r->file_snap_at = f->table_pos[t];
        c->snapshot = maps;
    } else {
        c->snapshot = (carried || due) && maps;
    }
    if (c->snapshot && due) {
        f->snap_due[t] = 0;
    }
    c->snap_own = r->file_snap_own;
    c->snap_at = r->file_snap_at;
}

/* CHUNK frame @p i was read against its process's module log up to its arg[2]. */
static void file_table_pos(struct file_read *f, size_t i)
{
    const struct sluice_tf_frame *h = &f->rd.ref[i].h;
    uint64_t t = h->stream < f->n_rings ? f->ring_table[h->stream] : UINT64_MAX;

    if (t < f->n_tables) {
        f->table_pos[t] = h->arg[2];
    }
}

/*
 * A CHUNK frame listed by the INDEX whose header is damaged: whether an
 * instruction window passes over it anyway (then it is not needed, and its
 * thread goes on), counting it among its ring's chunks.
 */
static int file_bad_passed(struct file_read *f, size_t i, struct ring_state *r)
{
    int where;

    if (!f->s->windowed || f->rd.ref[i].h.arg[0] != r->file_chunks) {
        return 0;
    }
    where = file_window(f, i);
    if (where != FILE_PASS_BEFORE && where != FILE_PASS_AFTER) {
        return 0;
    }
    r->file_chunks++;
    r->file_passed |= where == FILE_PASS_BEFORE; /* (its map position is unknown) */
    return 1;
}

/* A CHUNK frame: its records into a chunk, queued for the workers as a reader thread would. */
static void file_chunk(struct file_read *f, size_t i)
{
    const struct sluice_tf_frame *h = &f->rd.ref[i].h;
    struct ring_state *r;
    struct chunk *c;
    char why[320];
    int rc, where;

    if (h->stream < f->n_rings && f->skip[h->stream]) {
        /* A thread not delivered: the process's next thread delivered carries its snapshot. */
        if (h->arg[3] && f->ring_table[h->stream] < f->n_tables) {
            f->snap_due[f->ring_table[h->stream]] = 1;
        }
        file_table_pos(f, i);
        return;
    }
    if (!(r = file_ring_of(f, i))) {
        return;
    }
    if (h->arg[0] != r->file_chunks) {
        file_error(f, i, -EPROTO,
                   h->arg[0] < r->file_chunks ? "a repeat of a chunk read before"
                                              : "out of order: the chunks before it are missing");
        file_ring_end(r, FILE_STOPPED);
        return;
    }
    r->file_chunks++;
    if ((where = file_window(f, i)) == FILE_PASS_BEFORE) {
        r->file_passed = 1;
        r->file_maps_pos = h->arg[2];
    }
    if (where == FILE_PASS_BEFORE || where == FILE_PASS_AFTER) {
        file_table_pos(f, i);
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
    file_snapshot(f, r, c, h->arg[3] != 0, h->arg[0] == 0);
    file_table_pos(f, i);
    c->windowed = where == FILE_EDGE;
    c->win_before = f->rd.ref[i].insns;
    c->win_from = f->s->win_from;
    c->win_to = f->s->win_to;
    session_queue_chunk(r, c);
}

/*
 * The recorded session's errors (END frame @p i, header @p h), each an
 * error of ours: one per line, the first first (sluice/trace_file.h; a file
 * of before 2026-12 has one). Control bytes in a line are shown as '?'.
 */
static void recorded_errors(struct file_read *f, size_t i, const struct sluice_tf_frame *h)
{
    int code = h->arg[0] >= (uint64_t)INT32_MIN ? (int)(int64_t)h->arg[0] : -EPROTO;
    char *text = calloc(1, SESSION_ERRORS_TEXT + 1), why[320], *line, *next, *end;
    unsigned long long more;
    size_t len;

    if (!text) {
        session_error(f->s, code, "as recorded: (its message: out of memory)");
        return;
    }
    if (tf_reader__payload(&f->rd, i, text, SESSION_ERRORS_TEXT, &len, why, sizeof(why)) < 0) {
        snprintf(text, SESSION_ERRORS_TEXT, "(its message: %s)", why);
    }
    for (line = text; line; line = next) {
        next = strchr(line, '\n');
        if (next) {
            *next++ = '\0';
        }
        for (char *p = line; *p; p++) {
            *p = (unsigned char)*p < 0x20 || *p == 0x7f ? '?' : *p; /* one line */
        }
        more = line != text && *line >= '1' && *line <= '9' ? strtoull(line, &end, 10) : 0;
        if (more && strcmp(end, SESSION_NOT_KEPT) == 0) {
            session_more_errors(f->s, (size_t)more); /* counted, as the recording counted them */
        } else if (*line || line == text) {
            session_error(f->s, code, "as recorded: %s", line);
        }
    }
    free(text);
}

/* Every frame in file order, as the recorded session took them. */
static void file_frames(struct file_read *f)
{
    size_t i;

    for (i = 0; i < f->rd.n && !__atomic_load_n(&f->s->detaching, __ATOMIC_ACQUIRE); i++) {
        const struct sluice_tf_frame *h = &f->rd.ref[i].h;
        struct ring_state *r;

        if (f->rd.ref[i].bad && h->stream < f->n_rings && f->skip[h->stream] &&
            (h->type == SLUICE_TF_RING || h->type == SLUICE_TF_CHUNK ||
             h->type == SLUICE_TF_RING_END)) {
            continue; /* a thread not delivered: its damage is not this report's */
        } else if (f->rd.ref[i].bad && h->type == SLUICE_TF_CHUNK && (r = file_ring_of(f, i)) &&
                   file_bad_passed(f, i, r)) {
            continue; /* outside the window: not needed */
        } else if (f->rd.ref[i].bad && h->type == SLUICE_TF_RING && h->stream < f->n_rings &&
                   !f->rings[h->stream]) {
            file_ring_failed(f, i, -EPROTO, "its header is damaged");
        } else if (f->rd.ref[i].bad) {
            /* Listed by the index, its header damaged: its thread stops there. */
            r = h->type == SLUICE_TF_CHUNK || h->type == SLUICE_TF_RING_END ? file_ring_of(f, i)
                                                                            : NULL;
            if (r && h->type == SLUICE_TF_RING_END) {
                char why[96];

                snprintf(why, sizeof(why), "its header is damaged (the end of tid %u)",
                         r->info.tid);
                file_error(f, i, -EPROTO, why);
            } else {
                file_error(f, i, -EPROTO, "its header is damaged");
            }
            if (r) {
                file_ring_end(r, FILE_STOPPED);
            }
        } else if (h->type == SLUICE_TF_RING) {
            file_ring(f, i);
        } else if (h->type == SLUICE_TF_CHUNK) {
            file_chunk(f, i);
        } else if (h->type == SLUICE_TF_RING_END && (r = file_ring_of(f, i)) &&
                   h->arg[0] != r->file_chunks) {
            /* Its last chunks are not in the file (each frame whole: cut out, say). */
            char why[96];

            snprintf(why, sizeof(why), "its thread (tid %u) ended after %llu chunks, %llu came",
                     r->info.tid, (unsigned long long)h->arg[0],
                     (unsigned long long)r->file_chunks);
            file_error(f, i, -EPROTO, why);
            file_ring_end(r, FILE_STOPPED);
        } else if (h->type == SLUICE_TF_RING_END && (r = file_ring_of(f, i))) {
            r->hdr_lost = f->s->windowed ? 0 : h->arg[1]; /* (lost where? not the window's) */
            r->salvaged = h->arg[2] ? (int64_t)(h->arg[2] - 1) : -1;
            file_ring_end(r, FILE_ENDED);
        } else if (h->type == SLUICE_TF_END) {
            f->ended = 1;
            if ((int64_t)h->arg[0] < 0) {
                recorded_errors(f, i, h);
            }
        }
    }
}

/*
 * Name the threads whose end a cut recording does not reach: what a tool
 * says of each (stats' counts) is of its records before the cut alone.
 * Eight tids at most, then how many in all.
 */
static void say_cut_threads(struct file_read *f)
{
    char list[128] = "";
    size_t i, n = 0, used = 0;

    for (i = 0; i < f->n_rings; i++) {
        if (f->rings[i] && !f->rings[i]->file_done && n++ < 8) {
            used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%u", n > 1 ? ", " : "",
                                     f->rings[i]->info.tid);
        }
    }
    if (n > 0) {
        session_error(f->s, -EPROTO, "%s: the file ends before the end of %zu thread%s: tid %s%s",
                      f->rd.path, n, n == 1 ? "" : "s", list, n > 8 ? ", ..." : "");
    }
}

/* The rings left open (a file cut short, or an end cut out), ended; and why they were. */
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
        session_error(f->s, -EPROTO, "%s: no END frame: the recording was cut short (%s)",
                      f->rd.path,
                      f->s->n_rings ? "what came before was read" : "before any guest thread");
    }
    if (f->rd.cut[0] || (!f->ended && !__atomic_load_n(&f->s->detaching, __ATOMIC_ACQUIRE))) {
        say_cut_threads(f);
    }
    for (i = 0; i < f->n_rings; i++) {
        if (f->rings[i] && !f->rings[i]->file_done) {
            if (!f->rd.cut[0] && f->ended && !__atomic_load_n(&f->s->detaching, __ATOMIC_ACQUIRE)) {
                /* A whole recording ends every ring it started: this end was cut out. */
                session_error(f->s, -EPROTO,
                              "%s: tid %u: no end frame (RING_END) in the file: its trace may "
                              "stop early (what came was read)",
                              f->rd.path, f->rings[i]->info.tid);
            }
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
    free(f->need);
    free(f->snap_due);
    free(f->table_pos);
    free(f->rings);
    free(f->skip);
    free(f->ring_table);
    free(f->next_insns);
    tf_reader__close(&f->rd);
}

/*
 * A file without a whole INDEX (a recording cut short) has no count of
 * exec events before each chunk, which a window needs: count them here,
 * into the chunks' refs, on the main thread in file order, each chunk of
 * a thread delivered read, decompressed and counted as `stats` counts
 * (no callback). A chunk that does not read or decode ends its thread's
 * counts: the thread stops there when its turn comes. 0, or -ENOMEM.
 */
static int file_count_insns(struct file_read *f)
{
    static const struct sluice_callbacks none = {.sz = sizeof(none)};
    uint64_t *sum = calloc(f->n_rings + 1, sizeof(*sum));
    uint8_t *dead = calloc(f->n_rings + 1, 1);
    char why[320];
    size_t i, len;
    int rc = sum && dead ? 0 : -ENOMEM;

    for (i = 0; i < f->rd.n && rc == 0; i++) {
        struct tf_ref *x = &f->rd.ref[i];
        uint32_t st = x->h.stream;
        uint64_t t = st < f->n_rings ? f->ring_table[st] : UINT64_MAX;
        struct chunk *c;

        if (x->h.type != SLUICE_TF_CHUNK || x->insns != UINT64_MAX || x->bad || st >= f->n_rings ||
            f->skip[st] || dead[st]) {
            continue;
        }
        x->insns = sum[st];
        if (!(c = chunk_pool__get(&f->s->pool)) || !chunk__copy_area(c)) {
            rc = -ENOMEM;
        } else if (tf_reader__stored(&f->rd, i, &c->packed, SLUICE_CHUNK_BYTES + 8, why,
                                     sizeof(why)) < 0 ||
                   tf_packed__unpack(c->packed, c->copy, SLUICE_CHUNK_BYTES + 8, &len, why,
                                     sizeof(why)) < 0 ||
                   len % 8) {
            dead[st] = 1;
        } else {
            c->words = c->copy;
            c->len = len;
            c->blocks = t < f->n_tables ? f->tables[t].bt : NULL;
            decode_chunk(c, &none, NULL);
            dead[st] = c->bad != 0;
            sum[st] += c->counts.insns;
        }
        if (c) {
            if (c->packed) {
                c->packed->len = 0;
            }
            chunk_pool__put(&f->s->pool, c);
        }
    }
    free(sum);
    free(dead);
    return rc;
}

/*
 * With an instruction window: each CHUNK's count of exec events before it
 * (from the INDEX, else counted: file_count_insns()), and f->next_insns,
 * its ring's next chunk's (UINT64_MAX for a ring's last, or unknown).
 * 0, or -ENOMEM.
 */
static int file_next_insns(struct file_read *f)
{
    uint64_t *last;
    size_t i;

    if (!f->s->windowed) {
        return 0;
    }
    if (file_count_insns(f) < 0) {
        return -ENOMEM;
    }
    last = malloc((f->n_rings + 1) * sizeof(*last));
    f->next_insns = malloc((f->rd.n + 1) * sizeof(*f->next_insns));
    if (!last || !f->next_insns) {
        free(last);
        return -ENOMEM;
    }
    memset(last, 0xff, (f->n_rings + 1) * sizeof(*last));
    for (i = f->rd.n; i-- > 0;) {
        const struct tf_ref *x = &f->rd.ref[i];

        f->next_insns[i] = UINT64_MAX;
        if (x->h.type == SLUICE_TF_CHUNK && x->h.stream < f->n_rings) {
            f->next_insns[i] = last[x->h.stream];
            last[x->h.stream] = x->insns;
        }
    }
    free(last);
    return 0;
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
    f.skip = calloc(f.n_rings + 1, 1);
    f.ring_table = malloc((f.n_rings + 1) * sizeof(*f.ring_table));
    if (!f.rings || !f.skip || !f.ring_table) {
        file_free(&f);
        return session_error(s, -ENOMEM, "out of memory for %zu rings", f.n_rings);
    }
    memset(f.ring_table, 0xff, (f.n_rings + 1) * sizeof(*f.ring_table));
    if (file_tables(&f) < 0) {
        file_free(&f);
        return s->err_code;
    }
    file_files(&f);
    if (session_start_stages(s) < 0) {
        file_free(&f);
        return s->err_code;
    }
    if (file_next_insns(&f) < 0) {
        session_error(s, -ENOMEM, "out of memory for an instruction window");
        session_finish_stages(s);
        file_free(&f);
        return s->err_code;
    }
    file_frames(&f);
    file_finish(&f);
    session_finish_stages(s);
    file_free(&f);
    return s->err_code;
}
