/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fuzz_trace.c — libFuzzer harness for reading trace files (tf_read.c and
 * the file source of session.c; layout: include/sluice/trace_file.h):
 * whatever a file holds, `sluice report` never crashes, hangs or leaks.
 *
 * Input: frames, each 64 header bytes then its payload. The harness makes
 * each one well formed where a damaged file would be caught at once, so the
 * fuzzer reaches the decoding behind it: magic set, flags cleared (the
 * payload stored as is), stored_bytes (and raw_bytes) cut to what the
 * input holds, at most 64 KiB, and the crc made right. Everything else (type,
 * stream, arg[], the payload: records, table pieces, names) is the
 * input's. The file is written to a memfd and read by a session of it
 * (sluice_session__open_file()) with every worker callback set, each
 * reading what it is given and asking sluice_map__at() about its pcs.
 * A window: when the first frame's arg[2] or arg[3] (unused by a FILE
 * frame) is not 0, the session reads an instruction window (skip_insns
 * arg[2] % 2^20, count_insns arg[3] % 2^20; consumer.h), takes runs of
 * pcs (exec_batch) instead of exec, and unless count_insns is odd (then
 * the session counts each chunk's instructions itself) the file ends in a
 * whole INDEX and TRAILER, each CHUNK's count of exec events before it
 * being the input's crc word of that frame (the harness makes the real crc).
 * The seeds (--seed_dir=DIR, written at initialization): a thread of EXEC
 * and MEM records, a lossy one, two threads, one cut short, and a process
 * with a block table, a module log and a FILES frame whose chunk has every
 * record type.
 *
 * Threads: libFuzzer's, and the session's workers and ordering thread.
 * Must never: keep a descriptor or memory from one input to the next.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <sluice/consumer.h>
#include <sluice/record.h>
#include <sluice/trace_file.h>

/* Most payload bytes of one frame (a chunk is at most 256 KiB; big enough for the decoder). */
#define PAYLOAD_MAX (64u << 10)

static volatile uint64_t sink; /* what the callbacks read, so nothing is optimised away */

static int on_exec(void *user, const struct sluice_thread_info *t, uint64_t pc, void *item)
{
    struct sluice_module m;

    (void)user;
    (void)item;
    if (sluice_map__at(t, pc, &m) == 0) {
        sink += m.start + m.offset + (m.path ? (uint64_t)strlen(m.path) : 0);
    }
    sink += pc + strlen(t->arch) + strlen(t->comm);
    return 0;
}

static int on_mem(void *user, const struct sluice_thread_info *t, const struct sluice_mem *m,
                  void *item)
{
    (void)user;
    (void)t;
    (void)item;
    sink += m->addr + m->value + m->size;
    return 0;
}

static int on_map(void *user, const struct sluice_thread_info *t, const struct sluice_map *m,
                  void *item)
{
    (void)user;
    (void)t;
    (void)item;
    sink += m->start + m->len + (m->path ? (uint64_t)strlen(m->path) : 0);
    return 0;
}

static int on_block(void *user, const struct sluice_thread_info *t, const struct sluice_block *b,
                    void *item)
{
    (void)user;
    (void)t;
    (void)item;
    for (uint32_t i = 0; i < b->n_insns; i++) {
        sink += b->pcs[i];
    }
    return 0;
}

static int on_syscall(void *user, const struct sluice_thread_info *t,
                      const struct sluice_syscall *sc, void *item)
{
    (void)user;
    (void)t;
    (void)item;
    sink += sc->nr + (uint64_t)sc->ret;
    return 0;
}

static int on_message(void *user, const struct sluice_thread_info *t, const char *text, size_t len,
                      void *item)
{
    (void)user;
    (void)t;
    (void)item;
    for (size_t i = 0; i < len; i++) {
        sink += (unsigned char)text[i];
    }
    return 0;
}

static int on_exec_batch(void *user, const struct sluice_thread_info *t, const uint64_t *pcs,
                         size_t n, void *item)
{
    for (size_t i = 0; i < n; i++) {
        on_exec(user, t, pcs[i], item);
    }
    return 0;
}

static void on_thread(void *user, const struct sluice_thread_info *t, int started)
{
    (void)user;
    sink += t->tid + (uint64_t)started;
}

/* Append one well-formed frame (see the input format above) to @p out. */
static size_t put_frame(uint8_t *out, const struct sluice_tf_frame *in, const uint8_t *payload,
                        size_t n)
{
    struct sluice_tf_frame h = *in;

    h.magic = SLUICE_TF_FRAME_MAGIC;
    h.flags = 0;
    h.stored_bytes = h.raw_bytes = n;
    h.crc = 0;
    h.crc = (uint32_t)crc32(crc32(0, (const Bytef *)&h, sizeof(h)), payload, (uInt)n);
    memcpy(out, &h, sizeof(h));
    memcpy(out + sizeof(h), payload, n);
    return sizeof(h) + n;
}

/* The window the input asks for (see the file comment). */
struct window {
    uint64_t skip, count;
};

/* The INDEX and TRAILER of the @p n frames listed at @p x, appended at @p out (@p len in). */
static size_t put_index(uint8_t *out, size_t len, const struct sluice_tf_index *x, size_t n)
{
    struct sluice_tf_frame h = {.type = SLUICE_TF_INDEX, .stored_bytes = n * sizeof(*x)};
    size_t at = len;

    len += put_frame(out + len, &h, (const uint8_t *)x, n * sizeof(*x));
    memset(&h, 0, sizeof(h));
    h.type = SLUICE_TF_TRAILER;
    h.arg[0] = at;
    h.arg[1] = n;
    return len + put_frame(out + len, &h, (const uint8_t *)"", 0);
}

/* The file the input stands for, in @p out (room for 3 × size + 256 bytes); its window. */
static size_t make_file(const uint8_t *data, size_t size, uint8_t *out, struct window *w)
{
    size_t at = 0, len = 0, n = 0;
    struct sluice_tf_index *x = calloc(size / sizeof(struct sluice_tf_frame) + 1, sizeof(*x));

    memset(w, 0, sizeof(*w));
    while (x && size - at >= sizeof(struct sluice_tf_frame)) {
        struct sluice_tf_frame h;
        size_t k;

        memcpy(&h, data + at, sizeof(h));
        at += sizeof(h);
        if (n == 0) {
            w->skip = h.arg[2] % (1u << 20);
            w->count = h.arg[3] % (1u << 20);
        }
        k = h.stored_bytes % (PAYLOAD_MAX + 1);
        k = k > size - at ? size - at : k;
        x[n] = (struct sluice_tf_index){len,      h.type,   0,
                                        h.stream, h.arg[0], h.type == SLUICE_TF_CHUNK ? h.crc : 0};
        n++;
        len += put_frame(out + len, &h, data + at, k);
        at += k;
    }
    if (x && n && (w->skip || w->count) && !(w->count & 1)) {
        len = put_index(out, len, x, n);
    }
    free(x);
    return len;
}

/* Read @p path as `sluice report` would. */
static void report(const char *path, const struct window *w)
{
    struct sluice_callbacks cb = {
        .sz = sizeof(cb),
        .exec = on_exec,
        .read = on_mem,
        .write = on_mem,
        .thread = on_thread,
        .message = on_message,
        .mmap = on_map,
        .block = on_block,
        .syscall = on_syscall,
    };
    struct sluice_consumer_opts opts = {
        .sz = sizeof(opts), .workers = 2, .skip_insns = w->skip, .count_insns = w->count};
    struct sluice_session *s;

    if (w->skip || w->count) {
        cb.exec = NULL;
        cb.exec_batch = on_exec_batch;
    }
    s = sluice_session__open_file(path, &cb, &opts);

    if (!s) {
        abort(); /* only bad arguments or no memory can fail here */
    }
    sluice_session__run(s);
    sink += strlen(sluice_session__error(s));
    sluice_session__free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *file = malloc(3 * size + 256);
    struct window w;
    char path[64];
    size_t len;
    int fd;

    if (!file) {
        return 0;
    }
    len = make_file(data, size, file, &w);
    fd = memfd_create("fuzz-trace", MFD_CLOEXEC);
    if (fd < 0 || write(fd, file, len) != (ssize_t)len) {
        abort();
    }
    free(file);
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    report(path, &w);
    close(fd);
    return 0;
}

/* --- seeds ---------------------------------------------------------------- */

/* A seed under construction: frames in the harness's input format. */
struct seed {
    uint8_t buf[8192];
    size_t len;
};

static void seed_frame(struct seed *sd, uint16_t type, uint32_t stream, uint64_t a0, uint64_t a1,
                       uint64_t a2, uint64_t a3, const void *payload, size_t n)
{
    struct sluice_tf_frame h = {.type = type, .stream = stream, .stored_bytes = n};

    h.arg[0] = a0;
    h.arg[1] = a1;
    h.arg[2] = a2;
    h.arg[3] = a3;
    memcpy(sd->buf + sd->len, &h, sizeof(h));
    memcpy(sd->buf + sd->len + sizeof(h), payload, n);
    sd->len += sizeof(h) + n;
}

static void seed_ring(struct seed *sd, uint32_t ring, uint32_t tid)
{
    char names[32] = "x86_64\0\0\0\0\0\0\0\0\0\0guest";

    seed_frame(sd, SLUICE_TF_RING, ring, 1000 | (uint64_t)tid << 32, 0, SLUICE_TF_NO_TABLE, 0,
               names, sizeof(names));
}

/* A chunk of EXEC and MEM records (and a LOST one if @p lossy) of ring @p ring. */
static void seed_chunk(struct seed *sd, uint32_t ring, uint64_t seq, int lossy)
{
    uint64_t w[16];
    size_t n = 0;

    if (lossy) {
        w[n++] = (uint64_t)SLUICE_TAG_LOST << SLUICE_TAG_SHIFT | 7;
    }
    w[n++] = sluice_exec_hdr(0x401000 + seq * 16);
    w[n++] = sluice_mem_hdr(0x401000 + seq * 16, 3, 0);
    w[n++] = 0x7ffc0000;
    w[n++] = 42;
    w[n++] = sluice_exec_hdr(0x401004 + seq * 16);
    w[n++] = sluice_mem_hdr(0x401004 + seq * 16, 2, 1);
    w[n++] = 0x7ffc0008;
    w[n++] = 7;
    seed_frame(sd, SLUICE_TF_CHUNK, ring, seq, seq * 4096, 0, 0, w, n * sizeof(w[0]));
    /* Its crc word: the INDEX's count of exec events before it, for a window (2 a chunk). */
    memcpy(sd->buf + sd->len - n * sizeof(w[0]) - sizeof(struct sluice_tf_frame) +
               offsetof(struct sluice_tf_frame, crc),
           &(uint32_t){(uint32_t)(2 * seq)}, sizeof(uint32_t));
}

/*
 * A process with a block table and a module log: one descriptor (three
 * instructions, two slots), one mapping of the program; a chunk that uses
 * both (the snapshot, BLOCK_SLOTS with its slot records, BLOCK, MAP,
 * SYSCALL, SYSRET, TEXT).
 */
static void seed_table(struct seed *sd)
{
    char names[32] = "aarch64\0\0\0\0\0\0\0\0\0guest";
    struct {
        struct sluice_map_entry e;
        char path[16];
    } log = {{.bytes = sizeof(log),
              .kind = SLUICE_MAP_MMAP,
              .path_len = 10,
              .prot = 5,
              .start = 0x400000,
              .len = 0x10000,
              .base = 0x400000},
             "/bin/guest"};
    uint64_t desc[] = {
        3 | 3u << 16 | 2ull << 32, /* n, recorded, slots */
        0x401000,
        0x401004,
        0x401008,                                                    /* pcs */
        0x848484,                                                    /* lengths, recorded */
        sluice_slot(0, 3, 0) | (uint64_t)sluice_slot(2, 2, 1) << 16, /* slots */
        sizeof(log), /* the log's position when it was lifted */
    };
    uint64_t w[] = {
        sluice_block_slots_hdr(0, 3),
        0x7ffc0000,
        1,
        0x7ffc0010,
        2,
        sluice_block_hdr(0, 0, 3, 0),
        (uint64_t)SLUICE_TAG_MAP << SLUICE_TAG_SHIFT,
        (uint64_t)SLUICE_TAG_SYSCALL << SLUICE_TAG_SHIFT | 64,
        1,
        2,
        3,
        4,
        5,
        6,
        (uint64_t)SLUICE_TAG_SYSRET << SLUICE_TAG_SHIFT | 64,
        (uint64_t)-2,
        sluice_text_hdr(5),
        0x6f6c6c6568,
    };

    struct {
        struct sluice_tf_file f;
        char path[16];
    } files = {{.size = 4096, .path_len = 10, .id_len = 4, .id = {1, 2, 3, 4}}, "/bin/guest"};

    seed_frame(sd, SLUICE_TF_RING, 0, 1000 | 1000ull << 32, 0, 0, sizeof(log), names,
               sizeof(names));
    seed_frame(sd, SLUICE_TF_FILES, 0, 0, 0, 0, 0, &files, sizeof(files));
    seed_frame(sd, SLUICE_TF_TABLE, 0, 0, 0, 0, 0, desc, sizeof(desc));
    seed_frame(sd, SLUICE_TF_TABLE, 0, 1, 0, 0, 0, &log, sizeof(log));
    seed_frame(sd, SLUICE_TF_CHUNK, 0, 0, 0, sizeof(log), 1, w, sizeof(w));
    seed_frame(sd, SLUICE_TF_RING_END, 0, 1, 0, 0, 0, "", 0);
    seed_frame(sd, SLUICE_TF_END, 0, 0, 0, 0, 0, "", 0);
}

static void write_seed(const char *dir, const char *name, const struct seed *sd)
{
    char path[4096];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "wb");
    if (f) {
        fwrite(sd->buf, 1, sd->len, f);
        fclose(f);
    }
}

/* libFuzzer calls this once; --seed_dir=DIR among the arguments writes the seeds there. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *dir = NULL;
    struct seed sd;

    for (int i = 1; i < *argc; i++) {
        if (strncmp((*argv)[i], "--seed_dir=", 11) == 0) {
            dir = (*argv)[i] + 11;
        }
    }
    if (!dir) {
        return 0;
    }
    mkdir(dir, 0755);
    for (int kind = 0; kind < 5; kind++) {
        static const char *const names[] = {"one", "lossy", "two", "cut", "two-window"};
        int shape = kind == 4 ? 2 : kind; /* two-window: "two" read for insns 3 and 4 */

        memset(&sd, 0, sizeof(sd));
        seed_frame(&sd, SLUICE_TF_FILE, 0, SLUICE_TF_VERSION, SLUICE_FORMAT_VERSION,
                   kind == 4 ? 3 : 0, kind == 4 ? 2 : 0, "", 0);
        seed_ring(&sd, 0, 1000);
        if (shape == 2) {
            seed_ring(&sd, 1, 1001);
        }
        for (uint64_t seq = 0; seq < 3; seq++) {
            seed_chunk(&sd, 0, seq, shape == 1);
            if (shape == 2) {
                seed_chunk(&sd, 1, seq, 0);
            }
        }
        if (shape != 3) {
            seed_frame(&sd, SLUICE_TF_RING_END, 0, 3, 0, 0, 0, "", 0);
            if (shape == 2) {
                seed_frame(&sd, SLUICE_TF_RING_END, 1, 3, 0, 0, 0, "", 0);
            }
            seed_frame(&sd, SLUICE_TF_END, 0, 0, 0, 0, 0, "", 0);
        }
        write_seed(dir, names[kind], &sd);
    }
    memset(&sd, 0, sizeof(sd));
    seed_frame(&sd, SLUICE_TF_FILE, 0, SLUICE_TF_VERSION, SLUICE_FORMAT_VERSION, 0, 0, "", 0);
    seed_table(&sd);
    write_seed(dir, "table", &sd);
    return 0;
}
