/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * tools/dump.c — `sluice run --tool dump`: one line per event.
 *
 * For people (the default), each instruction as it ran, its memory accesses
 * under it, and the mapping changes as --raw --maps prints them:
 *
 *   <tid> 0x<pc> <module>!<symbol>+0x<off> [(<file>:<line>)]  <mnemonic> <operands>
 *   <tid>   READ<size> addr=0x<addr> val=0x<val>
 *   <tid>   WRITE<size> addr=0x<addr> val=0x<val>
 *
 * (symbolize.h says what the part after the pc can be), and with run --syscalls
 *
 *   <tid> SYSCALL <name>(0x<arg1>, ..., 0x<arg6>)
 *   <tid> SYSRET <name> = <value>[ <errno name>]   (values above 0xffff in hex)
 *
 * With --raw, for scripts and the tests:
 *
 *   <tid> EXEC 0x<pc>
 *   <tid> READ<size> 0x<pc> addr=0x<addr> val=0x<val>
 *   <tid> WRITE<size> 0x<pc> addr=0x<addr> val=0x<val>     (size 16: val=0x<hi>:0x<lo>)
 *   <tid> LOST <count>
 *   <tid> SYSCALL <nr> 0x<arg1> ... 0x<arg6>   (run --syscalls; the guest's number, signed)
 *   <tid> SYSRET <nr> <return value, signed decimal>
 *   <tid> PRINTK <text>        (a filter's message; non-printable bytes as '.',
 *                               cut at 96 bytes with "...")
 *
 * With --raw --maps, EXEC lines end in " <file>@0x<file offset>" (the file's last
 * path component, whole; "[anon]" for anonymous memory, "[?]" if no mapping
 * is known) and the guest's mapping changes are lines of their own:
 *   <tid> MAPPED 0x<start> len=0x<len> prot=<rwx> off=0x<off> base=0x<base> <path>
 *                               (the snapshot: the map when the stream starts)
 *   <tid> MMAP 0x<start> len=0x<len> prot=<rwx> off=0x<off> base=0x<base> <path>
 *   <tid> MUNMAP 0x<start> len=0x<len>
 *   <tid> MPROTECT 0x<start> len=0x<len> prot=<rwx>
 *   <tid> MREMAP 0x<start> len=0x<len> from=0x<old start> old_len=0x<old len> off=0x<off> <path>
 * (<path> "[anon]" for anonymous memory; whole, control characters in it
 * as '?').
 *
 * Hex is lowercase and unpadded, sizes are in bytes, values are masked to
 * the access size. Other tests parse this format: change it only with them.
 *
 * The formatting is the expensive part, so it runs in the worker callbacks
 * (in parallel, into fixed-size items); `trace` on the ordering thread only
 * appends the ready line to a large buffer, written with write(2) when full
 * (and, for a line that names a file, the path: an item keeps a pointer to
 * it, valid until its thread's stream ends, not a copy cut to fit).
 *
 * A failed write (full disk, file size limit) is reported at once, on the
 * ordering thread; the file is cut back to its last whole line, and from
 * then on lines are neither formatted nor written, but the trace is still
 * drained to its end, so the guest runs on as if nothing happened.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "symbolize.h"
#include "syscall_names.h"
#include "tools.h"

/* The output: one per process (one `sluice run`). Only the ordering thread
 * writes it, except `failed`, which the workers read. */
static struct {
    struct tool_env *env;
    int fd;
    int truncatable;      /* -o FILE, a regular file: cut back after a partial write */
    off_t written;        /* bytes written so far, all whole lines */
    size_t used;          /* bytes in buf */
    int failed;           /* a write failed: drop the rest (atomic) */
    uint64_t since_check; /* lines since the clock was last read */
    time_t flushed_at;    /* CLOCK_MONOTONIC_COARSE seconds of the last write */
    uint64_t unknown;     /* --raw --maps: EXEC lines of no known mapping (atomic) */
    char buf[4 << 20];
} out;

/* The longest line is about 140 bytes ("4294967295 SYSCALL 4294967295" and six " 0x<16>");
 * with --maps, about 140 before its path and 20 after (an MREMAP line). */
struct line {
    uint32_t len : 29;
    uint32_t path : 1;  /* a file's path goes after text (struct path_tail) */
    uint32_t flush : 1; /* a syscall entry: the thread may now block in it, so write it out */
    uint32_t tick : 1;  /* no line: a chunk ended (on_chunk_end), look at the clock */
    char text[];        /* LINE_BYTES, LINE_MAPS_BYTES or LINE_PEOPLE_BYTES in all */
};

/* What follows a line's text when it names a file: the path, then the rest of the line. */
struct path_tail {
    const char *path; /* sluice_map.path or sluice_module.path: valid in `trace` */
    uint32_t last;    /* write only its last component (0: all of it) */
    char after[24];   /* the rest of the line, newline included, NUL-terminated */
};
#define LINE_BYTES 160u
#define LINE_MAPS_BYTES 256u
/* For people: tid, pc and what symbolize.h describes, cut at 256 bytes (it cuts names to keep
 * the instruction). */
#define LINE_PEOPLE_BYTES 256u

static char *put_str(char *p, const char *s)
{
    size_t n = strlen(s);

    memcpy(p, s, n);
    return p + n;
}

/* Lowercase hex digits of @p v, no padding, no prefix. */
static char *put_xdigits(char *p, uint64_t v)
{
    char tmp[16];
    int n = 0;

    do {
        tmp[n++] = "0123456789abcdef"[v & 15];
        v >>= 4;
    } while (v);
    while (n) {
        *p++ = tmp[--n];
    }
    return p;
}

static char *put_hex(char *p, uint64_t v)
{
    *p++ = '0';
    *p++ = 'x';
    return put_xdigits(p, v);
}

/* @p key, then @p v in hex: " len=0x1000". */
static char *put_field(char *p, const char *key, uint64_t v)
{
    return put_hex(put_str(p, key), v);
}

static char *put_dec(char *p, uint64_t v)
{
    char tmp[20];
    int n = 0;

    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n) {
        *p++ = tmp[--n];
    }
    return p;
}

static int finish(struct line *l, char *p)
{
    *p++ = '\n';
    l->len = (uint32_t)(p - l->text) & 0x1fffffff;
    l->path = 0;
    l->flush = 0;
    l->tick = 0;
    return 1;
}

/* --raw: the lines for scripts. */
static int raw(void)
{
    return (out.env->dump & TOOL_DUMP_RAW) != 0;
}

/* Whether the output failed: then no more lines are made. */
static int dropping(void)
{
    return __atomic_load_n(&out.failed, __ATOMIC_RELAXED);
}

/* A line's "<tid>", returning where the rest goes; NULL once the output failed. */
static char *line_start(struct line *l, const struct sluice_thread_info *t)
{
    return dropping() ? NULL : put_dec(l->text, t->tid);
}

static int on_exec(void *user, const struct sluice_thread_info *t, uint64_t pc, void *item)
{
    struct line *l = item;
    char *p;

    (void)user;
    if (!(p = line_start(l, t))) {
        return 0;
    }
    p = put_str(p, " EXEC ");
    return finish(l, put_hex(p, pc));
}

/* Where line @p l's path_tail is: past its text, aligned. */
static struct path_tail *path_tail_of(const struct line *l)
{
    return (struct path_tail *)(((uintptr_t)(l->text + l->len) + 7) & ~(uintptr_t)7);
}

/*
 * End line @p l, whose text runs to @p p, with @p path (its last component
 * alone if @p last) written whole by `trace`, then @p after (a newline
 * added). Returns 1 (an item made).
 */
static int finish_path(struct line *l, char *p, const char *path, int last, const char *after)
{
    struct path_tail *pt;
    size_t n = strlen(after);

    l->len = (uint32_t)(p - l->text) & 0x1fffffff;
    pt = path_tail_of(l);
    pt->path = path;
    pt->last = (uint32_t)last;
    memcpy(pt->after, after, n);
    pt->after[n] = '\n';
    pt->after[n + 1] = 0;
    l->path = 1;
    l->flush = 0;
    l->tick = 0;
    return 1;
}

static char *put_prot(char *p, uint32_t prot)
{
    *p++ = prot & 1 ? 'r' : '-';
    *p++ = prot & 2 ? 'w' : '-';
    *p++ = prot & 4 ? 'x' : '-';
    return p;
}

/* --maps: EXEC lines name the file and file offset of their pc. */
static int on_exec_maps(void *user, const struct sluice_thread_info *t, uint64_t pc, void *item)
{
    struct line *l = item;
    struct sluice_module m;
    char *p;

    if (!on_exec(user, t, pc, item)) {
        return 0;
    }
    p = l->text + l->len - 1; /* over the newline */
    *p++ = ' ';
    if (sluice_map__at(t, pc, &m) < 0) {
        __atomic_fetch_add(&out.unknown, 1, __ATOMIC_RELAXED);
        p = put_str(p, "[?]");
    } else if (!m.path) {
        p = put_str(p, "[anon]");
    } else {
        char at[21] = "@";

        *put_hex(at + 1, m.offset) = 0;
        return finish_path(l, p, m.path, 1, at);
    }
    return finish(l, p);
}

/* For people: "<tid> 0x<pc> <module>!<symbol>+0x<off>  <instruction>". */
static int on_exec_people(void *user, const struct sluice_thread_info *t, uint64_t pc, void *item)
{
    struct line *l = item;
    char *p, *end = l->text + LINE_PEOPLE_BYTES - sizeof(*l) - 1; /* room for the newline */
    size_t n;

    (void)user;
    if (!(p = line_start(l, t))) {
        return 0;
    }
    *p++ = ' ';
    p = put_hex(p, pc);
    n = sym_describe(t, pc, p + 1, (size_t)(end - p - 1));
    if (n) {
        *p = ' ';
        p += 1 + n;
    }
    return finish(l, p);
}

static int on_mmap(void *user, const struct sluice_thread_info *t, const struct sluice_map *m,
                   void *item)
{
    static const char *const kind[] = {"?", " MMAP ", " MUNMAP ", " MPROTECT ", " MREMAP "};
    struct line *l = item;
    char *p;

    (void)user;
    if (!(p = line_start(l, t))) {
        return 0;
    }
    p = put_str(p, m->snapshot ? " MAPPED " : kind[m->kind <= 4 ? m->kind : 0]);
    p = put_field(put_hex(p, m->start), " len=", m->len);
    if (m->kind == SLUICE_MAP_MMAP || m->kind == SLUICE_MAP_MPROTECT) {
        p = put_prot(put_str(p, " prot="), m->prot);
    }
    if (m->kind == SLUICE_MAP_MREMAP) {
        p = put_field(put_field(p, " from=", m->old_start), " old_len=", m->old_len);
    }
    if (m->kind == SLUICE_MAP_MMAP || m->kind == SLUICE_MAP_MREMAP) {
        p = put_field(p, " off=", m->offset);
        if (m->kind == SLUICE_MAP_MMAP) {
            p = put_field(p, " base=", m->base);
        }
        *p++ = ' ';
        if (m->path) {
            return finish_path(l, p, m->path, 0, "");
        }
        p = put_str(p, "[anon]");
    }
    return finish(l, p);
}

/* "<tid> READ8 0x<pc> addr=..." (--raw), or "<tid>   READ8 addr=..." under its instruction. */
static int on_mem(const struct sluice_thread_info *t, const struct sluice_mem *m, void *item)
{
    struct line *l = item;
    char *p;

    if (!(p = line_start(l, t))) {
        return 0;
    }
    p = put_str(p, m->is_write ? (raw() ? " WRITE" : "   WRITE") : (raw() ? " READ" : "   READ"));
    p = put_dec(p, m->size);
    p = raw() ? put_hex(put_str(p, " "), m->pc) : p;
    p = put_field(p, " addr=", m->addr);
    p = put_str(p, " val=");
    if (m->size == 16) {
        p = put_hex(p, m->value_hi);
        *p++ = ':';
        return finish(l, put_hex(p, m->value));
    }
    return finish(l, put_hex(p, m->value));
}

static int on_read(void *user, const struct sluice_thread_info *t, const struct sluice_mem *m,
                   void *item)
{
    (void)user;
    return on_mem(t, m, item);
}

/* A signed decimal. */
static char *put_sdec(char *p, int64_t v)
{
    if (v < 0) {
        *p++ = '-';
        return put_dec(p, 0 - (uint64_t)v);
    }
    return put_dec(p, (uint64_t)v);
}

/*
 * --raw: "<tid> SYSCALL <nr> 0x<a1> ... 0x<a6>", "<tid> SYSRET <nr> <ret>".
 * For people: "<tid> SYSCALL write(0x1, 0x..., ...)", "<tid> SYSRET write = -2 ENOENT"
 * (errno names for the architectures whose numbers are the host's, not mips).
 */
static int on_syscall(void *user, const struct sluice_thread_info *t,
                      const struct sluice_syscall *sc, void *item)
{
    const char *name = raw() ? NULL : syscall_name(t->arch, sc->nr);
    const char *err;
    struct line *l = item;
    char *p;
    int i;

    (void)user;
    if (!(p = line_start(l, t))) {
        return 0;
    }
    p = put_str(p, sc->returned ? " SYSRET " : " SYSCALL ");
    /* Signed: QEMU's do_syscall takes an int, and a guest may pass -1 (the plugin API's -1). */
    p = name ? put_str(p, name) : put_sdec(raw() ? p : put_str(p, "syscall_"), (int32_t)sc->nr);
    if (sc->returned) {
        /* For people, what is likely an address (mmap, brk) in hex, like the pcs */
        p = put_str(p, raw() ? " " : " = ");
        p = !raw() && sc->ret > 0xffff ? put_hex(p, (uint64_t)sc->ret) : put_sdec(p, sc->ret);
        if (!raw() && sc->ret < 0 && sc->ret > -4096 && strncmp(t->arch, "mips", 4) != 0 &&
            (err = strerrorname_np((int)-sc->ret))) {
            p = put_str(put_str(p, " "), err);
        }
        return finish(l, p);
    }
    for (i = 0; i < 6; i++) {
        p = put_str(p, raw() ? " " : i ? ", " : "(");
        p = put_hex(p, sc->args[i]);
    }
    finish(l, raw() ? p : put_str(p, ")"));
    l->flush = 1;
    return 1;
}

static int on_lost(void *user, const struct sluice_thread_info *t, uint64_t count, void *item)
{
    struct line *l = item;
    char *p;

    (void)user;
    if (!(p = line_start(l, t))) {
        return 0;
    }
    p = put_str(p, " LOST ");
    return finish(l, put_dec(p, count));
}

static int on_message(void *user, const struct sluice_thread_info *t, const char *text, size_t len,
                      void *item)
{
    struct line *l = item;
    char *p;
    size_t i, n;

    (void)user;
    if (!(p = line_start(l, t))) {
        return 0;
    }
    len -= len && text[len - 1] == '\n'; /* trace_printk messages often end in one */
    n = len > 96 ? 96 : len;
    p = put_str(p, " PRINTK ");
    for (i = 0; i < n; i++) {
        *p++ = text[i] >= 0x20 && text[i] < 0x7f ? text[i] : '.';
    }
    if (n < len) {
        p = put_str(p, "...");
    }
    return finish(l, p);
}

/* The write of buf failed with @p err after @p done bytes: say so now, cut
 * the file back to its last whole line, and drop the rest of the trace. */
static void write_failed(int err, size_t done)
{
    size_t keep = done;

    while (keep && out.buf[keep - 1] != '\n') {
        keep--;
    }
    if (out.truncatable && keep != done) {
        (void)!ftruncate(out.fd, out.written + (off_t)keep);
    }
    out.written += (off_t)keep;
    say("sluice: %s: %s; the dump ends at its last whole line and the rest of the trace is "
        "dropped\n",
        out.env->name, strerror(err));
    __atomic_store_n(&out.failed, 1, __ATOMIC_RELAXED);
    out.env->out_failed_said = 1;
}

static time_t now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return ts.tv_sec;
}

/* Write buf out (whole lines only). Returns 0, or -1 once the output failed. */
static int flush_out(void)
{
    out.flushed_at = now_s();
    size_t done = 0;

    while (done < out.used && !out.failed) {
        ssize_t n = write(out.fd, out.buf + done, out.used - done);

        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            write_failed(n < 0 ? errno : EIO, done);
            break;
        }
        done += (size_t)n;
    }
    if (!out.failed) {
        out.written += (off_t)done;
    }
    out.used = 0;
    return out.failed ? -1 : 0;
}

/* A chunk's last item: so that lines trickling in (a filter that keeps little, a quiet
 * thread) are written within a second, not only every 4096 lines. Worker thread. */
static int on_chunk_end(void *user, const struct sluice_thread_info *t, void *item)
{
    struct line *l = item;

    (void)user, (void)t;
    l->len = 0;
    l->flush = 0;
    l->tick = 1;
    return 1;
}

/* Append line @p l, which names a file: its text, the path (control characters as '?', so a
 * file name cannot forge a line), the rest. Whole in buf (flushed first if it would not fit). */
static void append_path_line(const struct line *l)
{
    const struct path_tail *pt = path_tail_of(l);
    const char *path = pt->path, *slash = strrchr(path, '/');
    size_t n;

    if (pt->last && slash) {
        path = slash + 1;
    }
    n = strlen(path);
    if (out.used + l->len + n + sizeof(pt->after) > sizeof(out.buf) && flush_out() != 0) {
        return;
    }
    memcpy(out.buf + out.used, l->text, l->len);
    out.used += l->len;
    for (; *path; path++) {
        out.buf[out.used++] = (unsigned char)*path < 0x20 || *path == 0x7f ? '?' : *path;
    }
    n = strlen(pt->after);
    memcpy(out.buf + out.used, pt->after, n);
    out.used += n;
}

static void on_trace(void *user, const struct sluice_thread_info *t, void *item)
{
    struct line *l = item;

    (void)user;
    (void)t;
    if (out.failed) {
        return;
    }
    if (l->tick) {
        if (out.used && now_s() >= out.flushed_at + 1) {
            flush_out();
        }
        return;
    }
    if (l->path) {
        append_path_line(l);
    } else {
        if (out.used + l->len > sizeof(out.buf) && flush_out() != 0) {
            return;
        }
        memcpy(out.buf + out.used, l->text, l->len);
        out.used += l->len;
    }
    /* What a reader watching the file wants now: a syscall that may block, or a second's lines */
    if (l->flush || (++out.since_check % 4096 == 0 && now_s() >= out.flushed_at + 1)) {
        flush_out();
    }
}

static void setup(struct tool_env *env, struct sluice_callbacks *cb)
{
    struct stat st;

    /* A big buffer: the ordering thread should cost one memcpy per line. The
     * lines go around stdio, so that a partial write is known exactly. */
    fflush(env->out);
    out.env = env;
    out.fd = fileno(env->out);
    out.truncatable = env->out != stderr && fstat(out.fd, &st) == 0 && S_ISREG(st.st_mode);
    cb->user = env;
    if (!raw()) {
        sym_init((env->dump & TOOL_DUMP_NO_SYMBOLS ? 0u : SYM_SYMBOLS) |
                 (env->dump & TOOL_DUMP_NO_DISASM ? 0u : SYM_DISASM) |
                 (env->dump & TOOL_DUMP_LINES ? SYM_LINES : 0u));
        cb->item_size = LINE_PEOPLE_BYTES;
        cb->exec = on_exec_people;
        cb->mmap = on_mmap;
    } else if (env->dump & TOOL_DUMP_MAPS) {
        cb->item_size = LINE_MAPS_BYTES;
        cb->exec = on_exec_maps;
        cb->mmap = on_mmap;
    } else {
        cb->item_size = LINE_BYTES;
        cb->exec = on_exec;
    }
    cb->read = on_read;
    cb->write = on_read; /* on_mem tells loads from stores */
    cb->lost = on_lost;
    cb->syscall = on_syscall;
    cb->message = on_message;
    cb->chunk_end = on_chunk_end;
    cb->trace = on_trace;
}

static int by_tid(const void *a, const void *b)
{
    uint32_t x = ((const struct sluice_thread_info *)a)->tid;
    uint32_t y = ((const struct sluice_thread_info *)b)->tid;

    return x < y ? -1 : x > y;
}

/*
 * Say which tids have more than one stream (ring) in the trace: the kernel
 * gave a dead thread's id to a later one, or a failed execve gave a thread
 * a new ring. Their lines share the prefix, and interleave where their
 * deliveries overlapped.
 */
static void say_reused_tids(struct sluice_session *s)
{
    struct sluice_counts total;
    size_t n = sluice_session__counts(s, &total, NULL, NULL, 0), i, j, said = 0;
    struct sluice_thread_info *t = calloc(n ? n : 1, sizeof(*t));

    n = t ? sluice_session__counts(s, &total, NULL, t, n) : 0;
    qsort(t, n, sizeof(*t), by_tid);
    for (i = 0; i < n; i = j) {
        for (j = i + 1; j < n && t[j].tid == t[i].tid; j++) {
        }
        if (j - i > 1 && said++ < 8) {
            fprintf(
                stderr,
                "sluice: dump: tid %u has %zu streams (the kernel reused it, or a failed execve "
                "gave its thread a new ring): their lines share that prefix and may "
                "interleave (stats and pcsum tell them apart)\n",
                t[i].tid, j - i);
        }
    }
    if (said > 8) {
        say("sluice: dump: %zu more tids have more than one stream\n", said - 8);
    }
    free(t);
}

static int report(struct tool_env *env, struct sluice_session *s, double seconds)
{
    struct sluice_counts total;

    (void)seconds;
    (void)env;
    sluice_session__counts(s, &total, NULL, NULL, 0);
    if (!out.failed) {
        flush_out();
    }
    if (total.lost) {
        say("sluice: warning: %llu events lost\n", (unsigned long long)total.lost);
    }
    say_reused_tids(s);
    out.unknown += sym_unknown();
    if (!raw()) {
        sym_fini();
    }
    if (out.unknown) {
        say("sluice: dump: %llu instructions ran where no mapping is known ([?]: "
            "without a block table, or after the module log filled up)\n",
            (unsigned long long)out.unknown);
    }
    return out.failed ? -1 : 0; /* the failure was reported when it happened */
}

const struct tool tool_dump = {"dump", setup, report, 1};
