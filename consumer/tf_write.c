/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * tf_write.c — writing a trace file (layout: sluice/trace_file.h).
 *
 * Threads: tf_pack__span() runs on the worker that holds a chunk; the
 * writer's other functions on the ordering thread, one at a time, except
 * open and close (main thread, before and after it runs). A failed write
 * stops the recording at a frame boundary (the file is cut back to it) and
 * never the session: it must never fail the trace being read (a slow disk
 * slows it, as a slow callback does). The file is emptied and its FILE
 * frame written with the first frame of the trace, so a session that
 * traced nothing (refused, interrupted before the guest started) leaves a
 * file that was there as it was.
 */
#include "tf_write.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "file_id.h"
#include "maps.h"
#include "sluice/trace_file.h"

/* A fast zstd level: the recorder must keep up with the stream, and on
 * traces -1 is as small as 1 within 4% and up to 14% faster (zstd -b on
 * the chunks of a gzip -9 trace); faster levels lose more than they gain. */
#define PACK_LEVEL (-1)

/* One process's table as written so far. */
struct tf_table {
    uint64_t serial; /* block_table.serial */
    uint32_t number; /* its number in the file */
    uint64_t words;  /* descriptor bytes written */
    uint64_t log;    /* module log bytes written */
};

struct tf_writer {
    int fd;
    char path[256];
    uint64_t off; /* bytes written (whole frames) */
    int err;      /* first failed write's -errno; nothing is written after it */
    char why[160];
    struct tf_table *tables;
    size_t n_tables, cap_tables;
    struct sluice_tf_index *index;
    size_t n_index, cap_index;
    void *seen; /* paths named by a FILES frame (a tsearch() tree of strings) */
    int begun;  /* emptied, and the FILE frame (file_frame) written */
    struct sluice_tf_frame file_frame;
};

int tf_pack__span(struct tf_pack **pp, const uint64_t *words, size_t len, int compress)
{
    struct tf_pack *p = *pp;
    size_t need = ZSTD_compressBound(len), n;

    if (!p && !(p = *pp = calloc(1, sizeof(*p)))) {
        return -ENOMEM;
    }
    p->ok = 0;
    p->raw = len;
    if (!compress) {
        /* zlib's crc32 runs at several GB/s where zstd's fastest level
         * does 0.3-0.7 on records (bench/RESULTS.md, uncompressed). */
        p->payload = words;
        p->len = len;
        p->zstd = 0;
        p->crc = (uint32_t)crc32(0, (const Bytef *)words, (uInt)len);
        p->ok = 1;
        return 0;
    }
    if (!p->cctx && !(p->cctx = ZSTD_createCCtx())) {
        return -ENOMEM;
    }
    if (p->cap < need) {
        uint8_t *b = realloc(p->buf, need);

        if (!b) {
            return -ENOMEM;
        }
        p->buf = b;
        p->cap = need;
    }
    ZSTD_CCtx_setParameter(p->cctx, ZSTD_c_compressionLevel, PACK_LEVEL);
    ZSTD_CCtx_setParameter(p->cctx, ZSTD_c_checksumFlag, 1);
    n = ZSTD_compress2(p->cctx, p->buf, p->cap, words, len);
    if (ZSTD_isError(n)) {
        return -ENOMEM; /* only a bound too small or no memory can fail here */
    }
    p->payload = p->buf;
    p->len = n;
    p->zstd = 1;
    p->crc = (uint32_t)crc32(0, p->buf, (uInt)n);
    p->ok = 1;
    return 0;
}

void tf_pack__free(struct tf_pack *p)
{
    if (p) {
        ZSTD_freeCCtx(p->cctx);
        free(p->buf);
        free(p);
    }
}

/* Stop recording: the first failure is the one to report. */
static void stop(struct tf_writer *w, int err, const char *what)
{
    if (w->err) {
        return;
    }
    __atomic_store_n(&w->err, err, __ATOMIC_RELAXED); /* workers read it (tf_writer__stopped) */
    snprintf(w->why, sizeof(w->why), "%s: %s", what, strerror(-err));
    /* Cut back to the last whole frame, so a reader finds no half frame (if the
     * file cannot be cut, the reader names the half frame it ends with). */
    if (ftruncate(w->fd, (off_t)w->off) < 0) {
        return;
    }
}

static void put_frame(struct tf_writer *w, struct sluice_tf_frame *h, const void *payload, size_t n,
                      uint32_t payload_crc);

/* Before the trace's first frame: empty the file and write its FILE frame. */
static void begin(struct tf_writer *w)
{
    w->begun = 1;
    if (ftruncate(w->fd, 0) < 0) {
        stop(w, -errno, "ftruncate");
        return;
    }
    w->file_frame.raw_bytes = 0;
    put_frame(w, &w->file_frame, NULL, 0, 0);
}

/* Append one frame: @p h (crc filled here) and @p n payload bytes. */
static void put_frame(struct tf_writer *w, struct sluice_tf_frame *h, const void *payload, size_t n,
                      uint32_t payload_crc)
{
    struct iovec iov[2] = {{h, sizeof(*h)}, {(void *)payload, n}};
    size_t left = sizeof(*h) + n;
    int cnt = n ? 2 : 1;
    struct iovec *v = iov;

    if (!w->begun) {
        begin(w);
    }
    if (w->err) {
        return;
    }
    h->magic = SLUICE_TF_FRAME_MAGIC;
    h->stored_bytes = n;
    h->crc = 0;
    h->crc =
        (uint32_t)crc32_combine(crc32(0, (const Bytef *)h, sizeof(*h)), payload_crc, (z_off_t)n);
    if (w->n_index == w->cap_index) {
        size_t cap = w->cap_index ? 2 * w->cap_index : 1024;
        struct sluice_tf_index *x = realloc(w->index, cap * sizeof(*x));

        if (!x) {
            stop(w, -ENOMEM, "index");
            return;
        }
        w->index = x;
        w->cap_index = cap;
    }
    while (left > 0) {
        ssize_t k = writev(w->fd, v, cnt);

        if (k < 0 && errno == EINTR) {
            continue;
        }
        if (k <= 0) {
            stop(w, k < 0 ? -errno : -EIO, "write");
            return;
        }
        left -= (size_t)k;
        while (cnt > 0 && (size_t)k >= v->iov_len) {
            k -= (ssize_t)v->iov_len;
            v++;
            cnt--;
        }
        if (cnt > 0) {
            v->iov_base = (char *)v->iov_base + k;
            v->iov_len -= (size_t)k;
        }
    }
    w->index[w->n_index++] = (struct sluice_tf_index){
        .offset = w->off, .type = h->type, .stream = h->stream, .arg0 = h->arg[0]};
    w->off += sizeof(*h) + n;
}

/* A frame whose payload is stored as is. */
static void put_plain(struct tf_writer *w, struct sluice_tf_frame *h, const void *payload, size_t n)
{
    h->raw_bytes = n;
    put_frame(w, h, payload, n, n ? (uint32_t)crc32(0, payload, (uInt)n) : 0);
}

struct tf_writer *tf_writer__open(const char *path, char *err, size_t errlen)
{
    struct tf_writer *w = calloc(1, sizeof(*w));
    struct sluice_tf_frame h = {.type = SLUICE_TF_FILE};
    struct timespec ts;
    struct stat st;
    int e;

    if (!w) {
        snprintf(err, errlen, "%s: out of memory", path);
        return NULL;
    }
    /* O_NONBLOCK: a FIFO there must not hang us before fstat says what it is. */
    w->fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0644);
    e = w->fd < 0 || fstat(w->fd, &st) < 0 ? errno : !S_ISREG(st.st_mode) ? EINVAL : 0;
    /* Held while it is written: a second recorder to the same path would
     * interleave its frames with ours (both damaged, both exit 0). */
    if (e == 0 && flock(w->fd, LOCK_EX | LOCK_NB) < 0) {
        e = errno == EWOULDBLOCK ? EBUSY : errno;
    }
    if (e) {
        snprintf(err, errlen, "%s: %s", path,
                 e == EINVAL  ? "not a regular file (a trace file is cut back after a failed "
                                "write)"
                 : e == EBUSY ? "another sluice is recording into it"
                              : strerror(e));
        if (w->fd >= 0) {
            close(w->fd);
        }
        free(w);
        errno = e;
        return NULL;
    }
    snprintf(w->path, sizeof(w->path), "%s", path);
    clock_gettime(CLOCK_REALTIME, &ts);
    h.arg[0] = SLUICE_TF_VERSION;
    h.arg[1] = SLUICE_FORMAT_VERSION;
    h.arg[2] = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    w->file_frame = h; /* written with the trace's first frame (begin()) */
    return w;
}

/* The file's record of table @p bt, made on first sight; NULL if out of memory. */
static struct tf_table *table_of(struct tf_writer *w, const struct block_table *bt)
{
    size_t i;

    for (i = 0; i < w->n_tables; i++) {
        if (w->tables[i].serial == bt->serial) {
            return &w->tables[i];
        }
    }
    if (w->n_tables == w->cap_tables) {
        size_t cap = w->cap_tables ? 2 * w->cap_tables : 16;
        struct tf_table *t = realloc(w->tables, cap * sizeof(*t));

        if (!t) {
            stop(w, -ENOMEM, "tables");
            return NULL;
        }
        w->tables = t;
        w->cap_tables = cap;
    }
    w->tables[w->n_tables] = (struct tf_table){.serial = bt->serial, .number = (uint32_t)i};
    return &w->tables[w->n_tables++];
}

int tf_writer__stopped(const struct tf_writer *w)
{
    return __atomic_load_n(&w->err, __ATOMIC_RELAXED) != 0;
}

void tf_writer__ring(struct tf_writer *w, uint32_t ring, const struct sluice_thread_info *t,
                     const struct block_table *bt, uint64_t start_map)
{
    struct sluice_tf_frame h = {.type = SLUICE_TF_RING, .stream = ring};
    const struct tf_table *tt = bt ? table_of(w, bt) : NULL;
    char names[40] = {0};
    uint64_t le = htole64(start_map);

    h.arg[0] = t->pid | (uint64_t)t->tid << 32;
    h.arg[1] = t->seq | (uint64_t)(t->big_endian != 0) << 32;
    h.arg[2] = tt ? tt->number : SLUICE_TF_NO_TABLE;
    h.arg[3] = bt ? bt->snapshot_at : 0;
    strncpy(names, t->arch, 15);
    strncpy(names + 16, t->comm, 15);
    memcpy(names + 32, &le, 8);
    put_plain(w, &h, names, sizeof(names));
}

/* A frame whose payload is compressed, unless it does not compress (then as is). */
static void put_packed(struct tf_writer *w, struct sluice_tf_frame *h, const void *bytes, size_t n)
{
    size_t bound = ZSTD_compressBound(n), k;
    void *z = malloc(bound);

    k = z ? ZSTD_compress(z, bound, bytes, n, PACK_LEVEL) : 0;
    if (!z || ZSTD_isError(k)) {
        free(z);
        put_plain(w, h, bytes, n);
        return;
    }
    h->flags = SLUICE_TF_ZSTD;
    h->raw_bytes = n;
    put_frame(w, h, z, k, (uint32_t)crc32(0, z, (uInt)k));
    free(z);
}

/* A piece of a table's part (0 descriptors, 1 module log). */
static void put_piece(struct tf_writer *w, uint32_t table, uint64_t part, uint64_t at,
                      uint64_t dropped, const void *bytes, size_t n)
{
    struct sluice_tf_frame h = {.type = SLUICE_TF_TABLE, .stream = table};

    h.arg[0] = part;
    h.arg[1] = at;
    h.arg[2] = dropped;
    put_packed(w, &h, bytes, n);
}

/* Most table bytes one piece holds. */
#define PIECE_MAX (16u << 20)

static int cmp_str(const void *a, const void *b)
{
    return strcmp(a, b);
}

/* Note @p path as named: 1 if it was new, 0 if named before, -1 out of memory. */
static int seen_add(struct tf_writer *w, const char *path)
{
    char *copy = strdup(path), **at = copy ? tsearch(copy, &w->seen, cmp_str) : NULL;

    if (!at) {
        free(copy);
        return -1;
    }
    if (*at != copy) {
        free(copy); /* named before */
        return 0;
    }
    return 1;
}

/* Most bytes of one FILES frame (then another follows). */
#define FILES_MAX (1u << 20)

/* Append the identity of @p path, new to the file, to @p buf; 0, or -1 out of memory. */
static int add_file(uint8_t **buf, size_t *len, size_t *cap, const char *path)
{
    size_t n = strlen(path), bytes = sizeof(struct sluice_tf_file) + (n + 7) / 8 * 8;
    struct sluice_tf_file f;

    if (n == 0 || n > 4095 || file_id__get(path, &f) < 0) {
        return 0; /* nothing to compare with later: report reads the file as it finds it */
    }
    f.path_len = (uint16_t)n;
    if (*len + bytes > *cap) {
        size_t c = *cap * 2 > *len + bytes ? *cap * 2 : *len + bytes + 4096;
        uint8_t *p = realloc(*buf, c);

        if (!p) {
            return -1;
        }
        *buf = p;
        *cap = c;
    }
    memset(*buf + *len, 0, bytes);
    memcpy(*buf + *len, &f, sizeof(f));
    memcpy(*buf + *len + sizeof(f), path, n);
    *len += bytes;
    return 0;
}

static void put_files_frame(struct tf_writer *w, const uint8_t *buf, size_t len)
{
    struct sluice_tf_frame h = {.type = SLUICE_TF_FILES};

    put_packed(w, &h, buf, len);
}

/*
 * FILES frames for the files that the module log entries of @p bt in
 * [@p from, @p to) map and no FILES frame named yet: what they are now,
 * if they are still the files the guest mapped (inode, size, times), for
 * report to tell whether the file at the path later is still the one.
 */
static void put_files(struct tf_writer *w, const struct block_table *bt, uint64_t from, uint64_t to)
{
    const struct maps_entry *x;
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    int rc = 0;

    for (; from < to && rc == 0 && (x = maps__entry_at(bt->maps, from)); from = x->end) {
        if (x->path && (x->e.kind == SLUICE_MAP_MMAP || x->e.kind == SLUICE_MAP_MREMAP) &&
            !tfind(x->path, &w->seen, cmp_str) &&
            !(x->e.ino && file_id__mapped_changed(&x->e, x->path, NULL, 0)) &&
            (rc = seen_add(w, x->path)) == 1) {
            /* Only the file the guest mapped: another one at the path now (renamed over it
             * since) is not recorded as its file; report then checks the mapping's identity. */
            rc = add_file(&buf, &len, &cap, x->path);
        }
        if (len >= FILES_MAX) {
            put_files_frame(w, buf, len);
            len = 0;
        }
    }
    if (rc < 0) {
        stop(w, -ENOMEM, "the files mapped");
    } else if (len) {
        put_files_frame(w, buf, len);
    }
    free(buf);
}

/* The pieces of @p bt published since the last time: every descriptor and
 * log entry a chunk taken before now can name. */
static void put_tables(struct tf_writer *w, const struct block_table *bt)
{
    struct tf_table *t = table_of(w, bt);
    uint64_t words, log, dropped;

    if (!t) {
        return;
    }
    words = block_table__used(bt);
    words = (words > bt->capacity_words ? bt->capacity_words : words) * 8;
    while (t->words < words && !w->err) {
        size_t n = words - t->words > PIECE_MAX ? PIECE_MAX : (size_t)(words - t->words);

        put_piece(w, t->number, 0, t->words, 0, (const uint8_t *)bt->data + t->words, n);
        t->words += n;
    }
    if (!bt->maps) {
        return;
    }
    log = maps__used(bt->maps);
    dropped = __atomic_load_n(bt->maps->dropped, __ATOMIC_ACQUIRE);
    if (t->log < log && !w->err) {
        put_files(w, bt, t->log, log); /* before the pieces that name them */
    }
    while (t->log < log && !w->err) {
        size_t n = log - t->log > PIECE_MAX ? PIECE_MAX : (size_t)(log - t->log);

        put_piece(w, t->number, 1, t->log, dropped, bt->maps->log + t->log, n);
        t->log += n;
    }
}

void tf_writer__chunk(struct tf_writer *w, uint32_t ring, const struct block_table *bt,
                      uint64_t seq, uint64_t at, uint64_t maps_pos, int snapshot,
                      const struct tf_pack *p, uint64_t insns)
{
    struct sluice_tf_frame h = {.type = SLUICE_TF_CHUNK, .stream = ring};

    if (w->err) {
        return;
    }
    if (!p || !p->ok) {
        stop(w, -ENOMEM, "compressing a chunk");
        return;
    }
    if (bt) {
        put_tables(w, bt);
    }
    h.flags = p->zstd ? SLUICE_TF_ZSTD : 0;
    h.raw_bytes = p->raw;
    h.arg[0] = seq;
    h.arg[1] = at;
    h.arg[2] = maps_pos;
    h.arg[3] = snapshot != 0;
    put_frame(w, &h, p->payload, p->len, p->crc);
    if (!w->err) {
        w->index[w->n_index - 1].insns = insns;
    }
}

void tf_writer__ring_end(struct tf_writer *w, uint32_t ring, uint64_t chunks, uint64_t hdr_lost,
                         int64_t salvaged)
{
    struct sluice_tf_frame h = {.type = SLUICE_TF_RING_END, .stream = ring};

    h.arg[0] = chunks;
    h.arg[1] = hdr_lost;
    h.arg[2] = salvaged >= 0 ? (uint64_t)salvaged + 1 : 0;
    put_plain(w, &h, NULL, 0);
}

/* The file's last frames: END (@p result, @p detached, @p msg), the index and the trailer; then
 * whether the file is still ours whole. Only once the trace began (begin()). */
static void finish_file(struct tf_writer *w, int result, int detached, const char *msg)
{
    struct sluice_tf_frame end = {.type = SLUICE_TF_END}, index = {.type = SLUICE_TF_INDEX},
                           trailer = {.type = SLUICE_TF_TRAILER};
    struct stat st;
    uint64_t at;
    size_t frames;

    end.arg[0] = (uint64_t)(int64_t)result;
    end.arg[1] = detached != 0;
    put_plain(w, &end, msg, strlen(msg));
    at = w->off;
    frames = w->n_index;
    if (frames * sizeof(*w->index) <= SLUICE_TF_MAX_INDEX) {        /* else read from the start */
        put_plain(w, &index, w->index, frames * sizeof(*w->index)); /* plain: any tool seeks */
        trailer.arg[0] = at;
        trailer.arg[1] = frames;
        put_plain(w, &trailer, NULL, 0);
    }
    if (!w->err && fstat(w->fd, &st) == 0 && (st.st_nlink == 0 || (uint64_t)st.st_size < w->off)) {
        w->err = -EIO;
        snprintf(w->why, sizeof(w->why), "%s",
                 st.st_nlink == 0 ? "the file was removed while it was recorded"
                                  : "the file was cut by someone else while it was recorded");
    }
}

int tf_writer__close(struct tf_writer *w, int result, int detached, const char *msg, char *err,
                     size_t errlen)
{
    int rc;

    if (w->begun) { /* else nothing was traced: the file stays as it was */
        finish_file(w, result, detached, msg);
    }
    if (close(w->fd) < 0 && !w->err) {
        w->err = -errno;
        snprintf(w->why, sizeof(w->why), "close: %s", strerror(errno));
    }
    rc = w->err;
    if (rc) {
        snprintf(err, errlen,
                 "recording %s stopped: %s; its %llu bytes before are whole frames "
                 "(`sluice report` reads them)",
                 w->path, w->why, (unsigned long long)w->off);
    }
    free(w->tables);
    free(w->index);
    tdestroy(w->seen, free);
    free(w);
    return rc;
}
