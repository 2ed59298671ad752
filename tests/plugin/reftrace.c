/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * reftrace: the independent reference tracer for sluice's e2e tests.
 *
 * A QEMU TCG plugin, built only on QEMU's public plugin API, so it shares no
 * code with sluice's patch or jitter. It writes what sluice's `dump` tool
 * writes, one line per event, in the same format:
 *
 *   <tid> EXEC 0x<pc>
 *   <tid> READ<size> 0x<pc> addr=0x<addr> val=0x<val>     (size in bytes)
 *   <tid> WRITE<size> 0x<pc> addr=0x<addr> val=0x<val>    (16 bytes: val=0x<hi>:<lo>)
 *
 * EXEC comes from an instruction-exec callback (before the instruction runs),
 * READ/WRITE from a memory callback (after the access, so a faulting access
 * is never reported); helper-made accesses (atomics under CF_PARALLEL) reach
 * the memory callback of the instruction that made them, whose PC we pass as
 * udata. With mode=count it only counts instructions, loads and stores per
 * thread, with inline scoreboard adds, fast enough for real programs, and
 * writes one line per thread: `<pid> <tid> insns=N loads=N stores=N`.
 *
 * With syscalls=on (dump mode), also each syscall from the plugin API's
 * syscall callbacks, as `dump --raw` prints sluice's syscall events:
 *
 *   <tid> SYSCALL <number> 0x<arg1> ... 0x<arg6>   (a 32-bit guest's arguments: low 32 bits)
 *   <tid> SYSRET <number> <return value, signed decimal>
 *
 * (none for a syscall QEMU runs again, or a sigreturn: the guest gets no return)
 *
 * Arguments: out=FILE (appended to, O_APPEND, so several processes may share
 * it), mode=dump|count (default dump), syscalls=on|off (default off).
 *
 * Threads and processes: each guest thread appends to its own buffer and
 * writes whole lines with write(2). A thread flushes its buffer on each of
 * its syscalls (so events before fork, execve or exit are on disk before the
 * syscall runs) and when it exits; all buffers are flushed at exit_group.
 * After fork the child drops its copies of the other threads' buffers, which
 * the parent still owns and will write, so nothing is written twice. Known
 * gap: an execve in a multi-threaded guest loses the other threads' unflushed
 * events (no guest here does that).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <qemu-plugin.h>

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

#define BUF_BYTES (1u << 16)
#define LINE_MAX_BYTES 200u
#define MAX_VCPUS 4096u

/* One guest thread's pending output. */
struct tbuf {
    struct tbuf *next;
    size_t len;
    char prefix[24]; /* "<tid> " */
    size_t prefix_len;
    char data[BUF_BYTES];
};

static int out_fd = 2;
static int count_mode;
static int syscalls;              /* syscalls=on */
static uint64_t arg_mask = ~0ull; /* 32-bit guests: their registers' width */
static pthread_mutex_t bufs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tbuf *bufs; /* all live buffers of this process */
static __thread struct tbuf *my_buf;

/* count mode: per-vCPU counters; a vCPU index is reused after its thread exits */
struct counts {
    uint64_t insns, loads, stores;
};
static struct qemu_plugin_scoreboard *score;
static qemu_plugin_u64 sc_insns, sc_loads, sc_stores;
static pid_t vcpu_tid[MAX_VCPUS];

static pid_t gettid_raw(void)
{
    return (pid_t)syscall(SYS_gettid);
}

static void write_all(const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(out_fd, p, n);

        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            perror("reftrace: write");
            return;
        }
        p += w;
        n -= (size_t)w;
    }
}

static void buf_set_tid(struct tbuf *b)
{
    b->prefix_len = (size_t)snprintf(b->prefix, sizeof(b->prefix), "%d ", (int)gettid_raw());
}

static void buf_flush(struct tbuf *b)
{
    if (b->len > 0) {
        write_all(b->data, b->len);
        b->len = 0;
    }
}

/* The calling thread's buffer, created on first use. */
static struct tbuf *buf_get(void)
{
    struct tbuf *b = my_buf;

    if (b == NULL) {
        b = calloc(1, sizeof(*b));
        if (b == NULL) {
            abort();
        }
        buf_set_tid(b);
        pthread_mutex_lock(&bufs_lock);
        b->next = bufs;
        bufs = b;
        pthread_mutex_unlock(&bufs_lock);
        my_buf = b;
    }
    return b;
}

/* Start a line: make room, write the tid prefix; returns where the rest goes. */
static char *line_begin(struct tbuf *b)
{
    if (b->len + LINE_MAX_BYTES > BUF_BYTES) {
        buf_flush(b);
    }
    memcpy(b->data + b->len, b->prefix, b->prefix_len);
    return b->data + b->len + b->prefix_len;
}

static void line_end(struct tbuf *b, char *end)
{
    *end++ = '\n';
    b->len = (size_t)(end - b->data);
}

static char *put_str(char *p, const char *s)
{
    while (*s) {
        *p++ = *s++;
    }
    return p;
}

/* Lowercase hex without zero padding, "0x" included. */
static char *put_hex(char *p, uint64_t v)
{
    char tmp[16];
    int n = 0;

    *p++ = '0';
    *p++ = 'x';
    do {
        tmp[n++] = "0123456789abcdef"[v & 15];
        v >>= 4;
    } while (v != 0);
    while (n > 0) {
        *p++ = tmp[--n];
    }
    return p;
}

static void insn_exec(unsigned int vcpu_index, void *udata)
{
    struct tbuf *b = buf_get();
    char *p = line_begin(b);

    (void)vcpu_index;
    p = put_str(p, "EXEC ");
    p = put_hex(p, (uint64_t)(uintptr_t)udata);
    line_end(b, p);
}

static void mem_access(unsigned int vcpu_index, qemu_plugin_meminfo_t info, uint64_t vaddr,
                       void *udata)
{
    static const char *const sizes[] = {"1 ", "2 ", "4 ", "8 ", "16 "};
    unsigned shift = qemu_plugin_mem_size_shift(info);
    qemu_plugin_mem_value v = qemu_plugin_mem_get_value(info);
    struct tbuf *b = buf_get();
    char *p = line_begin(b);
    uint64_t val;

    (void)vcpu_index;
    p = put_str(p, qemu_plugin_mem_is_store(info) ? "WRITE" : "READ");
    p = put_str(p, shift <= 4 ? sizes[shift] : "? ");
    p = put_hex(p, (uint64_t)(uintptr_t)udata);
    p = put_str(p, " addr=");
    p = put_hex(p, vaddr);
    p = put_str(p, " val=");
    switch (v.type) {
    case QEMU_PLUGIN_MEM_VALUE_U8:
        val = v.data.u8;
        break;
    case QEMU_PLUGIN_MEM_VALUE_U16:
        val = v.data.u16;
        break;
    case QEMU_PLUGIN_MEM_VALUE_U32:
        val = v.data.u32;
        break;
    case QEMU_PLUGIN_MEM_VALUE_U64:
        val = v.data.u64;
        break;
    case QEMU_PLUGIN_MEM_VALUE_U128:
    default:
        p = put_hex(p, v.data.u128.high);
        *p++ = ':';
        val = v.data.u128.low;
        break;
    }
    if (shift < 3) {
        val &= (1ull << (8u << shift)) - 1;
    }
    p = put_hex(p, val);
    line_end(b, p);
}

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    size_t n = qemu_plugin_tb_n_insns(tb);

    (void)id;
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        void *pc = (void *)(uintptr_t)qemu_plugin_insn_vaddr(insn);

        if (count_mode) {
            qemu_plugin_register_vcpu_insn_exec_inline_per_vcpu(insn, QEMU_PLUGIN_INLINE_ADD_U64,
                                                                sc_insns, 1);
            qemu_plugin_register_vcpu_mem_inline_per_vcpu(insn, QEMU_PLUGIN_MEM_R,
                                                          QEMU_PLUGIN_INLINE_ADD_U64, sc_loads, 1);
            qemu_plugin_register_vcpu_mem_inline_per_vcpu(insn, QEMU_PLUGIN_MEM_W,
                                                          QEMU_PLUGIN_INLINE_ADD_U64, sc_stores, 1);
        } else {
            qemu_plugin_register_vcpu_insn_exec_cb(insn, insn_exec, QEMU_PLUGIN_CB_NO_REGS, pc);
            qemu_plugin_register_vcpu_mem_cb(insn, mem_access, QEMU_PLUGIN_CB_NO_REGS,
                                             QEMU_PLUGIN_MEM_RW, pc);
        }
    }
}

/* count mode: write one vCPU's totals as a line and clear them. */
static void counts_emit(unsigned int vcpu, pid_t tid)
{
    char line[LINE_MAX_BYTES];
    uint64_t i = qemu_plugin_u64_get(sc_insns, vcpu);
    uint64_t l = qemu_plugin_u64_get(sc_loads, vcpu);
    uint64_t s = qemu_plugin_u64_get(sc_stores, vcpu);
    int n;

    if (i == 0 && l == 0 && s == 0) {
        return;
    }
    n = snprintf(line, sizeof(line),
                 "%d %d insns=%" PRIu64 " loads=%" PRIu64 " stores=%" PRIu64 "\n", (int)getpid(),
                 (int)tid, i, l, s);
    write_all(line, (size_t)n);
    qemu_plugin_u64_set(sc_insns, vcpu, 0);
    qemu_plugin_u64_set(sc_loads, vcpu, 0);
    qemu_plugin_u64_set(sc_stores, vcpu, 0);
}

static void vcpu_syscall(qemu_plugin_id_t id, unsigned int vcpu_index, int64_t num, uint64_t a1,
                         uint64_t a2, uint64_t a3, uint64_t a4, uint64_t a5, uint64_t a6,
                         uint64_t a7, uint64_t a8)
{
    const uint64_t args[6] = {a1, a2, a3, a4, a5, a6};

    (void)id, (void)a7, (void)a8;
    if (count_mode) {
        if (vcpu_index < MAX_VCPUS) {
            vcpu_tid[vcpu_index] = gettid_raw();
        }
        return;
    }
    if (syscalls) {
        struct tbuf *b = buf_get();
        char *p = line_begin(b);

        p += sprintf(p, "SYSCALL %lld", (long long)num);
        for (int i = 0; i < 6; i++) {
            p = put_hex(put_str(p, " "), args[i] & arg_mask);
        }
        line_end(b, p);
    }
    if (my_buf != NULL) {
        buf_flush(my_buf);
    }
}

static void vcpu_syscall_ret(qemu_plugin_id_t id, unsigned int vcpu_index, int64_t num, int64_t ret)
{
    struct tbuf *b;
    char *p;

    (void)id, (void)vcpu_index;
    if (ret == -512 || ret == -513) {
        /* QEMU's QEMU_ERESTARTSYS and QEMU_ESIGRETURN (linux-user/special-errno.h), which the
         * plugin API passes on: the guest gets no return (the syscall runs again; a sigreturn
         * set its registers). exact.py's restart guest checks both against the guest. */
        return;
    }
    b = buf_get();
    p = line_begin(b);
    p += sprintf(p, "SYSRET %lld %lld", (long long)num, (long long)ret);
    line_end(b, p);
}

/* Runs on the exiting thread (cpu_common_unrealizefn from its exit syscall). */
static void vcpu_exit(qemu_plugin_id_t id, unsigned int vcpu_index)
{
    struct tbuf *b = my_buf, **pp;

    (void)id;
    if (count_mode) {
        counts_emit(vcpu_index, gettid_raw());
        if (vcpu_index < MAX_VCPUS) {
            vcpu_tid[vcpu_index] = 0;
        }
        return;
    }
    if (b == NULL) {
        return;
    }
    buf_flush(b);
    pthread_mutex_lock(&bufs_lock);
    for (pp = &bufs; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == b) {
            *pp = b->next;
            break;
        }
    }
    pthread_mutex_unlock(&bufs_lock);
    my_buf = NULL;
    free(b);
}

/*
 * exit_group or a fatal signal: QEMU has stopped the other vCPUs and removed
 * their callbacks (qemu_plugin_user_exit), so their buffers are ours to write.
 */
static void at_exit(qemu_plugin_id_t id, void *udata)
{
    (void)id, (void)udata;
    if (count_mode) {
        int n = qemu_plugin_num_vcpus();

        for (int v = 0; v < n && v < (int)MAX_VCPUS; v++) {
            counts_emit((unsigned)v, vcpu_tid[v]);
        }
        return;
    }
    pthread_mutex_lock(&bufs_lock);
    for (struct tbuf *b = bufs; b != NULL; b = b->next) {
        buf_flush(b);
    }
    pthread_mutex_unlock(&bufs_lock);
}

static void fork_prepare(void)
{
    pthread_mutex_lock(&bufs_lock);
}

static void fork_parent(void)
{
    pthread_mutex_unlock(&bufs_lock);
}

/*
 * In the child, only the forking thread exists. The other buffers are the
 * parent's to write: drop them. The forking thread flushed its own at the
 * fork syscall, so whatever is left in it (nothing) is the parent's too.
 */
static void fork_child(void)
{
    struct tbuf *b = bufs;

    while (b != NULL) {
        struct tbuf *next = b->next;

        if (b != my_buf) {
            free(b);
        }
        b = next;
    }
    bufs = NULL;
    if (my_buf != NULL) {
        my_buf->len = 0;
        my_buf->next = NULL;
        buf_set_tid(my_buf);
        bufs = my_buf;
    }
    if (count_mode) {
        int n = qemu_plugin_num_vcpus();
        pid_t tid = gettid_raw();

        for (int v = 0; v < n && v < (int)MAX_VCPUS; v++) {
            qemu_plugin_u64_set(sc_insns, (unsigned)v, 0);
            qemu_plugin_u64_set(sc_loads, (unsigned)v, 0);
            qemu_plugin_u64_set(sc_stores, (unsigned)v, 0);
            vcpu_tid[v] = tid; /* the only vCPU left; the others never run again */
        }
    }
    pthread_mutex_unlock(&bufs_lock);
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
                                           char **argv)
{
    const char *out = NULL;

    if (info->system_emulation) {
        fprintf(stderr, "reftrace: linux-user only\n");
        return -1;
    }
    for (int i = 0; i < argc; i++) {
        if (strncmp(argv[i], "out=", 4) == 0) {
            out = argv[i] + 4;
        } else if (strcmp(argv[i], "mode=count") == 0) {
            count_mode = 1;
        } else if (strcmp(argv[i], "mode=dump") == 0) {
            count_mode = 0;
        } else if (strcmp(argv[i], "syscalls=on") == 0 || strcmp(argv[i], "syscalls=off") == 0) {
            syscalls = strcmp(argv[i], "syscalls=on") == 0;
        } else {
            fprintf(
                stderr,
                "reftrace: unknown argument '%s' (out=FILE, mode=dump|count, syscalls=on|off)\n",
                argv[i]);
            return -1;
        }
    }
    if (out != NULL) {
        out_fd = open(out, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (out_fd < 0) {
            fprintf(stderr, "reftrace: %s: %s\n", out, strerror(errno));
            return -1;
        }
    }
    if (count_mode) {
        score = qemu_plugin_scoreboard_new(sizeof(struct counts));
        sc_insns = qemu_plugin_scoreboard_u64_in_struct(score, struct counts, insns);
        sc_loads = qemu_plugin_scoreboard_u64_in_struct(score, struct counts, loads);
        sc_stores = qemu_plugin_scoreboard_u64_in_struct(score, struct counts, stores);
    }
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
    qemu_plugin_register_vcpu_syscall_cb(id, vcpu_syscall);
    if (syscalls && !count_mode) {
        qemu_plugin_register_vcpu_syscall_ret_cb(id, vcpu_syscall_ret);
        /* abi_long arguments reach us sign-extended; sluice gives the register */
        if (strcmp(info->target_name, "mipsel") == 0 || strcmp(info->target_name, "mips") == 0) {
            arg_mask = 0xffffffffull;
        }
    }
    qemu_plugin_register_vcpu_exit_cb(id, vcpu_exit);
    qemu_plugin_register_atexit_cb(id, at_exit, NULL);
    return 0;
}
