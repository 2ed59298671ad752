/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * tf_read.c — reading a trace file (layout: sluice/trace_file.h).
 *
 * One thread. The file may be cut short, damaged or hostile: sizes are
 * checked against the file and against SLUICE_TF_MAX_RAW before any
 * allocation or read, and a payload is decompressed only into the caller's
 * room after its crc matched. Never writes to the file.
 */
#include "tf_read.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "sluice/record.h"

const char *tf_type_name(unsigned type)
{
    static const char *const names[] = {"?",        "file", "ring",  "table",   "chunk",
                                        "ring end", "end",  "index", "trailer", "files"};

    return type < sizeof(names) / sizeof(names[0]) ? names[type] : "?";
}

/* pread exactly @p n bytes at @p at: 0, -EIO if the file ends first, or -errno. */
static int read_at(int fd, void *dst, size_t n, uint64_t at)
{
    size_t done = 0;

    while (done < n) {
        ssize_t k = pread(fd, (char *)dst + done, n - done, (off_t)(at + done));

        if (k < 0 && errno == EINTR) {
            continue;
        }
        if (k <= 0) {
            return k < 0 ? -errno : -EIO;
        }
        done += (size_t)k;
    }
    return 0;
}

/* Whether @p h can be a frame at @p at of a file of @p size bytes; else why, in @p why. */
static int plausible(const struct sluice_tf_frame *h, uint64_t at, uint64_t size, char *why,
                     size_t n)
{
    uint64_t most = h->type == SLUICE_TF_INDEX ? SLUICE_TF_MAX_INDEX : SLUICE_TF_MAX_RAW;

    if (h->magic != SLUICE_TF_FRAME_MAGIC) {
        snprintf(why, n, "no frame header at byte %llu (damaged)", (unsigned long long)at);
        return 0;
    }
    if (h->type < SLUICE_TF_FILE || h->type > SLUICE_TF_FILES || (h->flags & ~SLUICE_TF_ZSTD)) {
        /* A frame's magic, but what it says is unknown here: damage, or a newer layout. */
        snprintf(why, n,
                 "the frame at byte %llu has type %u, flags 0x%x: unknown to this sluice "
                 "(damaged, or written by a newer one)",
                 (unsigned long long)at, h->type, h->flags);
        return 0;
    }
    if (h->raw_bytes > most || h->stored_bytes > ZSTD_compressBound(most) ||
        (!(h->flags & SLUICE_TF_ZSTD) && h->stored_bytes != h->raw_bytes)) {
        snprintf(why, n, "%s frame at byte %llu claims %llu bytes (%llu stored): damaged",
                 tf_type_name(h->type), (unsigned long long)at, (unsigned long long)h->raw_bytes,
                 (unsigned long long)h->stored_bytes);
        return 0;
    }
    if (size - at - sizeof(*h) < h->stored_bytes) {
        snprintf(why, n, "%s frame at byte %llu is cut short: %llu of its %llu bytes are there",
                 tf_type_name(h->type), (unsigned long long)at,
                 (unsigned long long)(size - at - sizeof(*h)), (unsigned long long)h->stored_bytes);
        return 0;
    }
    return 1;
}

/* Whether a frame with no payload (FILE, RING_END, END, TRAILER) has its crc:
 * its header is all it has, and its counts (lost, recovered, the result) are
 * used as they are. A frame with a payload is checked when it is read
 * (read_checked). */
static int header_whole(const struct sluice_tf_frame *h)
{
    struct sluice_tf_frame z = *h;

    if (h->stored_bytes != 0) {
        return 1;
    }
    z.crc = 0;
    return (uint32_t)crc32(0, (const Bytef *)&z, sizeof(z)) == h->crc;
}

/* Append a frame to the list. 0 or -ENOMEM. */
static int add_ref(struct tf_reader *r, size_t *cap, uint64_t at, const struct sluice_tf_frame *h)
{
    if (r->n == *cap) {
        size_t c = *cap ? 2 * *cap : 1024;
        struct tf_ref *p = realloc(r->ref, c * sizeof(*p));

        if (!p) {
            return -ENOMEM;
        }
        r->ref = p;
        *cap = c;
    }
    r->ref[r->n].offset = at;
    r->ref[r->n].bad = 0;
    r->ref[r->n].insns = UINT64_MAX;
    r->ref[r->n++].h = *h;
    return 0;
}

/* Whether the frames listed so far end with the END frame: all that may follow is the
 * index and trailer, so a cut there loses no event. */
static int ended(const struct tf_reader *r)
{
    return r->n && r->ref[r->n - 1].h.type == SLUICE_TF_END;
}

/* List the frames by reading each header in turn, up to the first that is not one. */
static int scan(struct tf_reader *r)
{
    size_t cap = 0;
    uint64_t at = 0;

    r->n = 0;
    while (at < r->size) {
        struct sluice_tf_frame h;

        if (r->size - at < sizeof(h)) {
            snprintf(r->cut, sizeof(r->cut), "the file ends inside a frame header at byte %llu",
                     (unsigned long long)at);
            if (ended(r)) {
                r->cut[0] = '\0'; /* only the index or trailer: every event is there */
            }
            break;
        }
        if (read_at(r->fd, &h, sizeof(h), at) < 0) {
            snprintf(r->cut, sizeof(r->cut), "reading byte %llu: %s", (unsigned long long)at,
                     strerror(errno));
            break;
        }
        if (!plausible(&h, at, r->size, r->cut, sizeof(r->cut))) {
            r->cut_h = h; /* a frame whose end is cut off can still be named */
            if (ended(r)) {
                r->cut[0] = '\0'; /* only the index or trailer: every event is there */
            }
            break;
        }
        if (add_ref(r, &cap, at, &h) < 0) {
            return -ENOMEM;
        }
        r->ref[r->n - 1].bad = !header_whole(&h); /* its size is plausible: go on */
        at += sizeof(h) + h.stored_bytes;
        if (h.type == SLUICE_TF_INDEX) {
            /* The trailer follows; the index lists nothing after it. */
            if (r->size - at > sizeof(h)) {
                snprintf(r->cut, sizeof(r->cut),
                         "%llu bytes follow its trailer at byte %llu (a second trace "
                         "appended?): they are not read",
                         (unsigned long long)(r->size - at - sizeof(h)), (unsigned long long)at);
            }
            break;
        }
    }
    return 0;
}

static int payload_of(struct tf_reader *r, const struct tf_ref *f, void *dst, size_t cap,
                      size_t *len, char *err, size_t errlen);

/* List the frames from the trailer's index; 0 if it is whole, else -1 (then scan). */
static int from_index(struct tf_reader *r)
{
    struct sluice_tf_frame t;
    struct sluice_tf_index *x = NULL;
    struct tf_ref idx;
    size_t cap = 0, len, i, n;
    uint64_t at = 0, end = 0;
    char why[256];

    if (r->size < 3 * sizeof(t) || read_at(r->fd, &t, sizeof(t), r->size - sizeof(t)) < 0 ||
        !plausible(&t, r->size - sizeof(t), r->size, why, sizeof(why)) || !header_whole(&t) ||
        t.type != SLUICE_TF_TRAILER || t.arg[0] > r->size - 2 * sizeof(t) || t.arg[1] == 0 ||
        t.arg[1] > SLUICE_TF_MAX_INDEX / sizeof(*x)) {
        return -1;
    }
    idx.offset = t.arg[0];
    idx.bad = 0;
    n = (size_t)t.arg[1];
    /* The INDEX frame itself, read and checked like any other. */
    if (read_at(r->fd, &idx.h, sizeof(idx.h), idx.offset) < 0 ||
        !plausible(&idx.h, idx.offset, r->size, why, sizeof(why)) ||
        idx.h.type != SLUICE_TF_INDEX || (idx.h.flags & SLUICE_TF_ZSTD) ||
        /* the trailer right after it: nothing else (a second trace appended) */
        idx.offset + sizeof(idx.h) + idx.h.stored_bytes + sizeof(t) != r->size ||
        idx.h.raw_bytes != n * sizeof(*x) || /* (plain: no bigger than the file) */
        !(x = malloc(n * sizeof(*x))) ||
        payload_of(r, &idx, x, n * sizeof(*x), &len, why, sizeof(why)) < 0) {
        free(x);
        return -1;
    }
    for (i = 0; i < n; i++) {
        struct sluice_tf_frame h;
        int bad;

        /* Each header is read again: the index says where, the header what. Frames must
         * tile the file from 0 to the INDEX (an index that leaves one out is not used);
         * after a damaged header, only the order of offsets can be checked. */
        if (x[i].offset >= idx.offset || (i == 0 ? x[i].offset != 0 : x[i].offset <= at) ||
            (i > 0 && !r->ref[r->n - 1].bad && x[i].offset != end) ||
            read_at(r->fd, &h, sizeof(h), x[i].offset) < 0) {
            goto refuse;
        }
        bad = !plausible(&h, x[i].offset, idx.offset, why, sizeof(why)) || h.type != x[i].type ||
              h.stream != x[i].stream || !header_whole(&h);
        if (bad) {
            memset(&h, 0, sizeof(h));
            h.type = x[i].type;
            h.stream = x[i].stream;
            h.arg[0] = x[i].arg0;
        }
        if (add_ref(r, &cap, x[i].offset, &h) < 0) {
            goto refuse;
        }
        r->ref[r->n - 1].bad = bad;
        r->ref[r->n - 1].insns = x[i].type == SLUICE_TF_CHUNK ? x[i].insns : UINT64_MAX;
        at = x[i].offset;
        end = at + sizeof(h) + h.stored_bytes;
    }
    if (r->n && !r->ref[r->n - 1].bad && end != idx.offset) {
        goto refuse;
    }
    free(x);
    return 0;
refuse:
    free(x);
    free(r->ref);
    r->ref = NULL;
    r->n = 0;
    return -1;
}

int tf_reader__open(struct tf_reader *r, const char *path, char *err, size_t errlen)
{
    struct stat st;

    memset(r, 0, sizeof(*r));
    snprintf(r->path, sizeof(r->path), "%s", path);
    /* O_NONBLOCK: a FIFO put in its place must not hang us before fstat says what it is. */
    r->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (r->fd < 0) {
        int e = errno;

        snprintf(err, errlen, "%s: %s", path, strerror(e));
        return -e;
    }
    if (fstat(r->fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: not a regular file", path);
        tf_reader__close(r);
        return -EINVAL;
    }
    r->size = (uint64_t)st.st_size;
    r->dctx = ZSTD_createDCtx();
    if (!r->dctx || (from_index(r) < 0 && scan(r) < 0)) {
        snprintf(err, errlen, "%s: out of memory", path);
        tf_reader__close(r);
        return -ENOMEM;
    }
    if (r->n == 0 || r->ref[0].h.type != SLUICE_TF_FILE || r->ref[0].offset != 0) {
        snprintf(err, errlen, "%s: not a sluice trace file (%s)", path,
                 r->size ? "its first bytes are no frame header" : "it is empty");
        tf_reader__close(r);
        return -EPROTO;
    }
    if (r->ref[0].bad) {
        snprintf(err, errlen, "%s: its first frame (file, at byte 0) is damaged", path);
        tf_reader__close(r);
        return -EPROTO;
    }
    if (r->ref[0].h.arg[0] < 1 || r->ref[0].h.arg[0] > SLUICE_TF_VERSION ||
        r->ref[0].h.arg[1] != SLUICE_FORMAT_VERSION) {
        snprintf(err, errlen,
                 "%s: trace file version %llu with record format %llu; this sluice reads "
                 "versions 1 to %u with format %u",
                 path, (unsigned long long)r->ref[0].h.arg[0],
                 (unsigned long long)r->ref[0].h.arg[1], SLUICE_TF_VERSION, SLUICE_FORMAT_VERSION);
        tf_reader__close(r);
        return -EPROTO;
    }
    return 0;
}

int tf_reader__payload(struct tf_reader *r, size_t i, void *dst, size_t cap, size_t *len, char *err,
                       size_t errlen)
{
    return payload_of(r, &r->ref[i], dst, cap, len, err, errlen);
}

/* Frame @p f's stored bytes into @p *buf (room @p *cap, grown), crc checked; room for
 * @p most bytes once decompressed. 0 or -errno with why in @p err. */
static int read_checked(struct tf_reader *r, const struct tf_ref *f, size_t most, uint8_t **buf,
                        size_t *cap, char *err, size_t errlen)
{
    struct sluice_tf_frame h = f->h;
    uint32_t crc;
    int rc;

    if (f->bad) {
        snprintf(err, errlen, "its header is damaged");
        return -EPROTO;
    }
    if (h.raw_bytes > most) {
        snprintf(err, errlen, "%llu bytes, more than such a frame holds (%zu)",
                 (unsigned long long)h.raw_bytes, most);
        return -EMSGSIZE;
    }
    if (*cap < h.stored_bytes || !*buf) {
        uint8_t *b = realloc(*buf, h.stored_bytes ? h.stored_bytes : 1);

        if (!b) {
            snprintf(err, errlen, "out of memory for %llu bytes",
                     (unsigned long long)h.stored_bytes);
            return -ENOMEM;
        }
        *buf = b;
        *cap = h.stored_bytes;
    }
    rc = read_at(r->fd, *buf, h.stored_bytes, f->offset + sizeof(h));
    if (rc < 0) {
        snprintf(err, errlen, "reading it: %s", rc == -EIO ? "the file ended" : strerror(-rc));
        return rc == -EIO ? -EPROTO : rc;
    }
    crc = h.crc;
    h.crc = 0;
    if ((uint32_t)crc32(crc32(0, (const Bytef *)&h, sizeof(h)), *buf, (uInt)h.stored_bytes) !=
        crc) {
        snprintf(err, errlen, "damaged (its crc does not match)");
        return -EPROTO;
    }
    return 0;
}

/* Decompress (or copy) @p n stored bytes into @p dst; 0 or -EPROTO with why in @p err. */
static int unpack(void *dctx, const uint8_t *src, size_t n, int zstd, uint64_t raw, void *dst,
                  size_t cap, size_t *len, char *err, size_t errlen)
{
    size_t k;

    if (!zstd) {
        memcpy(dst, src, n);
        *len = n;
        return 0;
    }
    k = ZSTD_decompressDCtx(dctx, dst, cap, src, n);
    if (ZSTD_isError(k) || k != raw) {
        snprintf(err, errlen, "damaged: it does not decompress (%s)",
                 ZSTD_isError(k) ? ZSTD_getErrorName(k) : "wrong size");
        return -EPROTO;
    }
    *len = k;
    return 0;
}

static int payload_of(struct tf_reader *r, const struct tf_ref *f, void *dst, size_t cap,
                      size_t *len, char *err, size_t errlen)
{
    int rc = read_checked(r, f, cap, &r->buf, &r->buf_cap, err, errlen);

    *len = 0;
    return rc ? rc
              : unpack(r->dctx, r->buf, f->h.stored_bytes, f->h.flags & SLUICE_TF_ZSTD,
                       f->h.raw_bytes, dst, cap, len, err, errlen);
}

int tf_reader__stored(struct tf_reader *r, size_t i, struct tf_packed **pp, size_t cap, char *err,
                      size_t errlen)
{
    struct tf_packed *p = *pp;
    int rc;

    if (!p && !(p = *pp = calloc(1, sizeof(*p)))) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    p->len = 0;
    rc = read_checked(r, &r->ref[i], cap, &p->buf, &p->cap, err, errlen);
    if (rc == 0) {
        p->len = r->ref[i].h.stored_bytes;
        p->raw = r->ref[i].h.raw_bytes;
        p->zstd = (r->ref[i].h.flags & SLUICE_TF_ZSTD) != 0;
    }
    return rc;
}

int tf_packed__unpack(struct tf_packed *p, void *dst, size_t cap, size_t *len, char *err,
                      size_t errlen)
{
    *len = 0;
    if (p->zstd && !p->dctx && !(p->dctx = ZSTD_createDCtx())) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    return unpack(p->dctx, p->buf, p->len, p->zstd, p->raw, dst, cap, len, err, errlen);
}

void tf_packed__free(struct tf_packed *p)
{
    if (p) {
        ZSTD_freeDCtx(p->dctx);
        free(p->buf);
        free(p);
    }
}

void tf_reader__close(struct tf_reader *r)
{
    if (r->fd >= 0) {
        close(r->fd);
    }
    r->fd = -1;
    free(r->ref);
    r->ref = NULL;
    ZSTD_freeDCtx(r->dctx);
    r->dctx = NULL;
    free(r->buf);
    r->buf = NULL;
}
