/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * jitter.c — the entry points QEMU calls (struct sluice_jitter_ops) and the
 * process's list of rings.
 *
 * Threads: see include/sluice/jitter_abi.h for which QEMU thread calls what.
 * The ring list lock is taken only on slow paths (thread start/exit, process
 * exit, exec, fork), never by translated code.
 */
#include "arena.h"
#include "../consumer/say.h"
#include "blocks.h"
#include "ctl.h"
#include "fds.h"
#include "first_run.h"
#include "ids.h"
#include "image.h"
#include "jitter.h"
#include "lift.h"
#include "lossy.h"
#include "maplog.h"
#include "once.h"
#include "opts.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <sluice/ctl.h>
#include <sluice/jitter_abi.h>

static struct {
    pthread_mutex_t lock; /* guards rings, ended and seq */
    struct ring *rings;   /* this process's rings */
    struct ring *ended;   /* rings of exited threads that consumers still read (jitter_reap) */
    uint32_t seq;         /* rings made by this process so far */
    uint64_t ring_bytes;
    void (*request_flush)(void); /* QEMU's (host_info), NULL until the guest starts */
    int started;                 /* the guest's first thread has started */
    int exiting;                 /* the process is ending (j_process_exit ran) */
    char arch[16];
    char comm[16];
    int big_endian;
    int syscalls; /* syscalls=1: SYSCALL and SYSRET records */
} J = {.lock = PTHREAD_MUTEX_INITIALIZER};

void jitter_rings_lock(void)
{
    pthread_mutex_lock(&J.lock);
}

void jitter_rings_unlock(void)
{
    pthread_mutex_unlock(&J.lock);
}

struct ring *jitter_rings(void)
{
    return J.rings;
}

struct ring *jitter_ended_rings(void)
{
    return J.ended;
}

/* Give back the rings of J.ended every consumer is done with; J.lock held. */
static void reap_locked(void)
{
    struct ring **p, *r;

    for (p = &J.ended; (r = *p);) {
        if (ring_done(r)) {
            *p = r->next;
            ring_destroy(r, 1); /* its pages go back to the kernel, its range to the arena */
        } else {
            p = &r->next;
        }
    }
}

void jitter_reap(void)
{
    pthread_mutex_lock(&J.lock);
    reap_locked();
    pthread_mutex_unlock(&J.lock);
}

/* How long a thread start waits for lossless consumers to finish ended rings (arena full). */
#define ARENA_WAIT_MS 10000

/*
 * A ring for thread @p tid; J.lock held (dropped while waiting). Past the
 * file size limit (ulimit -f), ended threads' rings that consumers have not
 * finished hold the room: lossy consumers that hold any are dropped at once
 * (the guest never waits for them), lossless ones after ARENA_WAIT_MS (as a
 * consumer that stops reading its socket is: ctl.c).
 */
static struct ring *new_ring(struct sluice_thread_slot *slot, uint32_t tid)
{
    static const char why[] = "it holds rings of ended threads unread, and they fill the ring "
                              "file (ulimit -f)";
    int waited = 0, dropped = 0; /* 1: lossy holders, 2: all */
    struct ring *r;

    for (;;) {
        reap_locked();
        r = ring_create(J.ring_bytes, ids_pid(NULL), tid, J.seq, J.arch, J.comm, J.big_endian,
                        slot);
        if (r || errno != EFBIG || !J.ended || dropped == 2) {
            break;
        }
        if (dropped == 0 || waited >= ARENA_WAIT_MS) {
            (void)ctl_drop_holders(dropped == 0, why);
            dropped++;
            continue;
        }
        pthread_mutex_unlock(&J.lock);
        usleep(10000);
        pthread_mutex_lock(&J.lock);
        waited += 10;
    }
    if (r) {
        J.seq++;
    }
    return r;
}

void jitter_consumers_changed(void)
{
    void (*flush)(void) = __atomic_load_n(&J.request_flush, __ATOMIC_ACQUIRE);

    if (flush) {
        flush(); /* j_flushed() then sets what the hooks answer */
    }
}

void jitter_for_each_ring(void (*fn)(struct ring *r, void *arg), void *arg)
{
    struct ring *r;

    pthread_mutex_lock(&J.lock);
    for (r = J.rings; r; r = r->next) {
        fn(r, arg);
    }
    pthread_mutex_unlock(&J.lock);
}

/*
 * Whether the block table (BLOCKS_BYTES of the arena) leaves room under the
 * file size limit (ulimit -f) for the rings of four threads beside it: a
 * limit just above the table left none for even the first thread's ring,
 * and nothing was traced. Without the table, records are per instruction.
 */
static int table_leaves_room(uint64_t ring_bytes)
{
    struct rlimit rl;

    return getrlimit(RLIMIT_FSIZE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY ||
           rl.rlim_cur / 4 >= BLOCKS_BYTES / 4 + SLUICE_RING_HDR_BYTES + ring_bytes;
}

static int j_init(const struct sluice_host_info *info)
{
    const char *base = strrchr(info->exe, '/');
    static struct jitter_opts o; /* its strings live for the process */
    int err;

    snprintf(J.arch, sizeof(J.arch), "%s", info->arch);
    snprintf(J.comm, sizeof(J.comm), "%s", base ? base + 1 : info->exe);
    J.big_endian = (int)info->big_endian;
    if (info->size < sizeof(*info) || opts_parse(info->args, &o) < 0) {
        return -EINVAL;
    }
    J.ring_bytes = o.ring_bytes;
    J.syscalls = o.syscalls;
    err = arena_open();
    if (err < 0) {
        say("sluice-jitter: cannot create the ring arena: %s\n", strerror(-err));
        return err;
    }
    (void)ids_pid(NULL); /* known before anyone asks under fds_lock() (ids.h) */
    /* A table that does not fit (ulimit -f) leaves one record per instruction and no module
     * map; the tools that need them say so (cov, dump --maps). */
    if (table_leaves_room(o.ring_bytes)) {
        (void)blocks_open(!o.per_insn);
    }
    /* Without it no image is "main"; filters still see the others. */
    (void)image_init(info->exe);
    if (lift_init(&o) < 0) {
        return -EINVAL;
    }
    err = ctl_init(J.arch, J.comm, o.consumer_fd, o.listen, o.wait_attach);
    if (err == 0 && fds_spare() < 0) {
        /* QEMU needs one to open the program (it closes it after); without, it
         * fails saying so on a stdout it never flushes. */
        say("sluice-jitter: ulimit -n leaves QEMU no descriptor beside the jitter's: "
            "raise it\n");
        return -EMFILE;
    }
    if (err == 0) {
        ctl_wait_attach(); /* before the guest's first instruction */
        __atomic_store_n(&J.request_flush, info->request_flush, __ATOMIC_RELEASE);
        lift_enable(ctl_consumers() > 0); /* nothing is translated yet: no flush */
    }
    return err;
}

/*
 * End this process because thread @p tid cannot be traced (@p what, errno
 * @p err): said on stderr (with a hint for the file size or address-space limit) and to every
 * consumer (ABORT), never run untraced in silence. @p forked_child as
 * ctl_abort()'s.
 */
static void __attribute__((noreturn))
end_untraced(uint32_t tid, const char *what, int err, int forked_child)
{
    char why[96], as[96] = "";
    struct rlimit rl;

    snprintf(why, sizeof(why), "%s %u: %s", what, tid, strerror(err));
    if (err == ENOMEM && getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        snprintf(as, sizeof(as), " (the address-space limit, ulimit -v, is %llu MiB: raise it)",
                 (unsigned long long)(rl.rlim_cur >> 20));
    }
    say("sluice-jitter: %s%s\n", why,
        err == EFBIG ? " (the rings share one file, which the file size limit leaves no"
                       " room to grow: ulimit -f, or the guest's own setrlimit; smaller"
                       " rings: SLUICE_RING_BYTES, or ring_bytes= after -jitter)"
                     : as);
    ctl_abort(tid, why, forked_child);
    exit(1);
}

/* This vCPU thread's slot, from thread_start to thread_exit: where its MAP records go. */
static __thread struct sluice_thread_slot *self;

static void j_thread_start(struct sluice_thread_slot *slot, uint32_t tid)
{
    struct ring *r;

    (void)ids_pid(&tid); /* as consumers see it, also inside a PID namespace (ids.h) */
    pthread_mutex_lock(&J.lock);
    if (J.exiting) {
        /* Created just as another thread ended the process (its rings are
         * closed): the kernel ends this one too. A ring made now would never
         * be closed, and the consumer would say the thread was killed. */
        pthread_mutex_unlock(&J.lock);
        for (;;) {
            pause();
        }
    }
    if (!J.started) {
        /* The guest's first thread, before anything is translated: a
         * consumer that attached since init asked for a flush that may
         * have found no vCPU to run it yet. (A forked child's first thread
         * inherits the parent's translations and answers: not this.) */
        lift_enable(ctl_consumers() > 0);
        J.started = 1;
    }
    r = new_ring(slot, tid);
    if (!r) {
        /* No ring means records would go nowhere: refuse to run untraced silently. */
        int err = errno;

        end_untraced(tid, "cannot create the trace ring of thread", err, 0);
    }
    r->next = J.rings;
    J.rings = r;
    ctl_announce(r);
    pthread_mutex_unlock(&J.lock);
    self = slot;
}

static void j_reserve(struct sluice_thread_slot *slot, uint64_t need)
{
    ring_reserve(slot->ring, need);
}

static void j_publish(struct sluice_thread_slot *slot)
{
    ring_publish_all(slot->ring);
}

/* Rings' worth of ended threads' records lossy consumers may hold unread (bound_lossy_held). */
#define LOSSY_HELD_RINGS 16

/*
 * Ended threads' rings a lossy consumer may hold unread: past the first,
 * taken or not, if it does not read its control socket either
 * (ctl_backlogged()), it stopped, and is dropped before that socket fills
 * with the announcements of new threads (which would hold the guest's
 * thread starts back: ctl.c); past the second, of rings whose rest was
 * taken (a header page each: 16 MiB), whatever it does. One that reads but
 * lags finishes a taken ring once the chunks before it are delivered, in
 * its time.
 */
#define LOSSY_HELD_QUIET 128
#define LOSSY_TAKEN_RINGS 4096

/* What lossy consumers hold of ended threads' rings unread (lossy_tally). */
struct lossy_held {
    uint64_t total;                         /* bytes, all consumers together */
    uint64_t bytes[SLUICE_MAX_CONSUMERS];   /* bytes, per slot */
    unsigned taken[SLUICE_MAX_CONSUMERS];   /* rings whose rest was taken, per slot */
    unsigned untaken[SLUICE_MAX_CONSUMERS]; /* rings whose rest was not, per slot */
};

/*
 * Tally, in one walk of J.ended, what lossy consumers hold unread: a
 * header per ring, and what was written, unless its rest was taken (from
 * each of them, for the total). J.lock held.
 */
static void lossy_tally(struct lossy_held *h)
{
    memset(h, 0, sizeof(*h));
    for (struct ring *r = J.ended; r; r = r->next) {
        uint32_t holds = ring_lossy_unread(r);

        if (!holds) {
            continue;
        }
        h->total += holds & ~r->rest_taken ? ring_held_bytes(r) : SLUICE_RING_HDR_BYTES;
        for (; holds; holds &= holds - 1) {
            unsigned i = (unsigned)__builtin_ctz(holds);
            int taken = r->rest_taken >> i & 1;

            h->bytes[i] += taken ? SLUICE_RING_HDR_BYTES : ring_held_bytes(r);
            (taken ? h->taken : h->untaken)[i]++;
        }
    }
}

/* Why lossy consumer @p i is to be dropped for the rings @p h says it holds, into @p why
 * (@p n bytes), or 0 if it is not. */
static int held_too_many(unsigned i, const struct lossy_held *h, char *why, size_t n)
{
    unsigned held = h->taken[i] + h->untaken[i];

    if (h->taken[i] > LOSSY_TAKEN_RINGS) {
        snprintf(why, n, "lossy, it held %u ended threads' rings unread (bound: %d rings)",
                 h->taken[i], LOSSY_TAKEN_RINGS);
        return 1;
    }
    if (held > LOSSY_HELD_QUIET && ctl_backlogged(i)) {
        snprintf(why, n,
                 "lossy, it held %u ended threads' rings unread (bound: %d, its socket unread)",
                 held, LOSSY_HELD_QUIET);
        return 1;
    }
    return 0;
}

/*
 * Take from lossy consumer @p i the rest of every ended thread's ring it
 * holds unread, counted lost (lossy_take_rest): it reads their ends at
 * once and says done. A ring no consumer will read again then gives its
 * data pages back at once. J.lock held.
 */
static void take_rests(unsigned i)
{
    for (struct ring *r = J.ended; r; r = r->next) {
        if ((ring_lossy_unread(r) & ~r->rest_taken) >> i & 1) {
            lossy_take_rest(r, i);
            r->rest_taken |= 1u << i;
        }
        if (!(ring_unread(r) & ~r->rest_taken)) {
            ring_punch_data(r);
        }
    }
}

/*
 * A lossy consumer slower than the guest, or one that stopped reading
 * (SIGSTOP), would hold the pages of every thread that ends meanwhile: the
 * guest's memory would grow without bound while lossy promises never to
 * slow it. Past LOSSY_HELD_RINGS rings' worth in all, the lossy consumer
 * that holds the most has the rest of those rings taken, counted lost (a
 * slow one then reads their ends at once and goes on; their pages go
 * back); one that holds too many rings (held_too_many: a stopped one)
 * is dropped, as is the one holding the most when all that is left past
 * the bound was taken already (their headers). J.lock held.
 */
static void bound_lossy_held(void)
{
    const uint64_t bound = LOSSY_HELD_RINGS * (SLUICE_RING_HDR_BYTES + J.ring_bytes);
    struct lossy_held h;
    char why[96];

    for (unsigned n = 0; n < 4 * SLUICE_MAX_CONSUMERS; n++) {
        unsigned i, worst = 0;

        lossy_tally(&h);
        for (i = 1; i < SLUICE_MAX_CONSUMERS; i++) {
            worst = h.bytes[i] > h.bytes[worst] ? i : worst;
        }
        if (h.total > bound && h.untaken[worst]) {
            take_rests(worst);
            continue;
        }
        if (h.total > bound && h.bytes[worst]) {
            snprintf(why, sizeof(why),
                     "lossy, it held %llu KiB of ended threads' rings unread (bound: %d rings)",
                     (unsigned long long)(h.bytes[worst] >> 10), LOSSY_HELD_RINGS);
        } else {
            i = 0;
            while (i < SLUICE_MAX_CONSUMERS && !held_too_many(i, &h, why, sizeof(why))) {
                i++;
            }
            if (i == SLUICE_MAX_CONSUMERS) {
                return;
            }
            worst = i;
        }
        if (!ctl_drop(worst, why)) {
            return;
        }
        reap_locked();
    }
}

static void j_thread_exit(struct sluice_thread_slot *slot)
{
    struct ring *r = slot->ring, **p;

    self = NULL;
    pthread_mutex_lock(&J.lock);
    for (p = &J.rings; *p; p = &(*p)->next) {
        if (*p == r) {
            *p = r->next;
            break;
        }
    }
    ring_close(r);
    if (ring_done(r)) {
        ring_destroy(r, 1);
    } else {
        /* Consumers read on: its pages go back once they are done (jitter_reap). */
        ring_retire(r);
        r->next = J.ended;
        J.ended = r;
        bound_lossy_held();
    }
    pthread_mutex_unlock(&J.lock);
}

static void close_ring(struct ring *r, void *arg)
{
    (void)arg;
    ring_close_final(r);
}

static void publish_ring(struct ring *r, void *arg)
{
    (void)arg;
    ring_publish_all(r);
}

static void j_process_exit(int status)
{
    (void)status;
    lift_report();
    blocks_report();
    maplog_report();
    pthread_mutex_lock(&J.lock);
    J.exiting = 1; /* before the rings are closed: no thread starts after */
    pthread_mutex_unlock(&J.lock);
    jitter_for_each_ring(close_ring, NULL);
    ctl_process_exit();
}

static void j_publish_all(void)
{
    jitter_for_each_ring(publish_ring, NULL);
    ctl_exec_start();
}

/* Held across fork so the child never inherits it locked mid-update. */
static void j_fork_start(void)
{
    jitter_for_each_ring(publish_ring, NULL);
    pthread_mutex_lock(&J.lock);
    ctl_fork_prepare();
}

/* The child's copy of the parent's rings: unmap them, never write them again. */
static void forget_parent_rings(void)
{
    struct ring *r = J.rings, *next;

    for (; r; r = next) {
        next = r->next;
        r->slot = NULL; /* other threads' CPU state is gone in the child */
        ring_destroy(r, 0);
    }
    for (r = J.ended; r; r = next) {
        next = r->next;
        ring_destroy(r, 0);
    }
    J.rings = NULL;
    J.ended = NULL;
    J.seq = 0;
}

static void j_fork_end(int child, struct sluice_thread_slot *slot, uint32_t tid)
{
    int err;

    if (!child) {
        ctl_fork_parent();
        pthread_mutex_unlock(&J.lock);
        return;
    }
    pthread_mutex_init(&J.lock, NULL);
    fds_after_fork_child();
    ids_fork_child();
    forget_parent_rings();
    slot->ring = NULL;
    /* The parent's arena is the parent's: the child's rings go in a new one. */
    arena_forget();
    err = arena_open();
    if (err == 0) {
        err = blocks_after_fork_child();
    }
    if (err < 0) {
        end_untraced(tid, "cannot create the ring arena of forked child", -err, 1);
    }
    ctl_fork_child();
    j_thread_start(slot, tid);
    /* A consumer came (or went) while the parent's flush was still to come:
     * the child has the parent's old TBs and answers, and a request of the
     * parent's that may never run here (it waited on another vCPU). Ask
     * again: QEMU's request kicks this vCPU, which then takes the flush
     * before it runs any TB. (A child traced as 0 instructions, without.) */
    if ((ctl_consumers() > 0) != lift_instrumenting()) {
        jitter_consumers_changed();
    }
}

static uint64_t j_lift_block(struct sluice_thread_slot *slot, const struct sluice_lift_block *b)
{
    (void)slot;
    /* A TB whose first run was cut short before takes the once helper (first_run.c). */
    if (b->first_run && b->n > 0 && first_run_refused(b->pc[0])) {
        return 0;
    }
    return blocks_lift(b);
}

/*
 * Exclusive, after the flush jitter_consumers_changed() asked for: from
 * now on TBs are instrumented only if some consumer is attached. With
 * none, Once claims are forgotten: what they recorded went to consumers
 * that have all gone, so the next one to attach is told of each pc's next
 * hit (else it would get nothing for every pc that ran before it).
 */
static void j_flushed(void)
{
    int on = ctl_consumers() > 0;

    if (!on) {
        once_reset();
    }
    lift_enable(on);
}

/* A longjmp left the TB at @p pc: its block ran up to that instruction,
 * included unless it runs @p again. */
static void j_tb_exit(struct sluice_thread_slot *slot, uint64_t pc, int again)
{
    if (slot->ring) {
        ring_tb_exit(slot->ring, pc, again);
    } else {
        slot->block_at = NULL;
    }
}

/* Append @p n words to @p slot's ring, after its last block's records. */
static void put_words(struct sluice_thread_slot *slot, const uint64_t *w, unsigned n)
{
    if (slot->cursor + n > slot->limit) {
        ring_reserve(slot->ring, 8ull * n);
    }
    memcpy(slot->cursor, w, 8ull * n);
    slot->cursor += n;
    /* No block is in flight at a syscall: a consumer draining a killed process may take it. */
    __atomic_store_n(slot->written, (uint64_t)(uintptr_t)slot->cursor, __ATOMIC_RELEASE);
}

/*
 * A MAP record for the module log entry at @p at, in the stream of the
 * thread whose syscall made it, at that point (between TBs, as a
 * trace_printk message at lift). Changes QEMU makes before the first
 * thread runs (the ELF loader's) have none: consumers find them in the log.
 */
static void note_map(uint64_t at)
{
    struct sluice_thread_slot *slot = self;
    uint64_t w = (uint64_t)SLUICE_TAG_MAP << SLUICE_TAG_SHIFT | (at & SLUICE_PAYLOAD_MASK);

    if (at == MAPLOG_NONE || !slot || !slot->ring) {
        return;
    }
    if (ring_final(slot->ring)) {
        /* The process is exiting and its streams are closed. ring_reserve()
         * would park this thread here, holding QEMU's mmap lock, which the
         * exiting thread takes next (preexit_cleanup: the plugins' exit
         * flushes TBs): it parks at its next TB instead, holding nothing. */
        return;
    }
    put_words(slot, &w, 1);
}

static void j_syscall(struct sluice_thread_slot *slot, int num, const uint64_t args[6])
{
    uint64_t w[7];

    if (!J.syscalls || !slot->ring) {
        return;
    }
    w[0] = (uint64_t)SLUICE_TAG_SYSCALL << SLUICE_TAG_SHIFT | (uint32_t)num;
    memcpy(w + 1, args, sizeof(uint64_t) * 6);
    put_words(slot, w, 7);
}

/*
 * QEMU's own codes that do_syscall returns, never a value the guest gets
 * (QEMU linux-user/special-errno.h): the syscall is run again after the
 * signal handler (its restart is a new SYSCALL record), or a sigreturn set
 * every register. Such a syscall has no SYSRET, as exit has none.
 */
#define QEMU_ERESTARTSYS 512
#define QEMU_ESIGRETURN 513

static void j_syscall_return(struct sluice_thread_slot *slot, int num, int64_t ret)
{
    uint64_t w[2] = {(uint64_t)SLUICE_TAG_SYSRET << SLUICE_TAG_SHIFT | (uint32_t)num,
                     (uint64_t)ret};

    ctl_exec_failed(); /* if it was an execve that failed (or will be run again) */
    if (J.syscalls && slot->ring && ret != -QEMU_ERESTARTSYS && ret != -QEMU_ESIGRETURN) {
        put_words(slot, w, 2);
    }
}

static void j_mmap(uint64_t start, uint64_t len, int prot, int flags, int fd, uint64_t offset)
{
    (void)flags;
    image_mmap(start, len, fd, offset);
    note_map(maplog_mmap(start, len, prot, fd >= 0));
}

static void j_munmap(uint64_t start, uint64_t len)
{
    image_munmap(start, len);
    note_map(maplog_munmap(start, len));
}

static void j_mprotect(uint64_t start, uint64_t len, int prot)
{
    note_map(maplog_mprotect(start, len, prot));
}

static void j_mremap(uint64_t old_start, uint64_t old_len, uint64_t start, uint64_t len)
{
    image_mremap(old_start, old_len, start, len);
    note_map(maplog_mremap(old_start, old_len, start, len));
}

__attribute__((visibility("default"))) const struct sluice_jitter_ops sluice_jitter_ops = {
    .abi_version = SLUICE_JITTER_ABI_VERSION,
    .size = sizeof(struct sluice_jitter_ops),
    .init = j_init,
    .thread_start = j_thread_start,
    .reserve = j_reserve,
    .publish = j_publish,
    .thread_exit = j_thread_exit,
    .process_exit = j_process_exit,
    .publish_all = j_publish_all,
    .fork_start = j_fork_start,
    .fork_end = j_fork_end,
    .hook_inst = lift_hook_inst,
    .hook_mem = lift_hook_mem,
    .once_hit = lift_once_hit,
    .lift_block = j_lift_block,
    .tb_exit = j_tb_exit,
    .first_run = first_run_start,
    .first_run_end = first_run_end,
    .mmap = j_mmap,
    .munmap = j_munmap,
    .mprotect = j_mprotect,
    .mremap = j_mremap,
    .fd_next = fds_next,
    .fd_claim = fds_claim,
    .instrumenting = lift_instrumenting,
    .flushed = j_flushed,
    .syscall = j_syscall,
    .syscall_return = j_syscall_return,
};
