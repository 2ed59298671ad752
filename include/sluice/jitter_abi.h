/* SPDX-License-Identifier: GPL-2.0-or-later */
/**
 * @file jitter_abi.h
 * @brief The interface between the patched QEMU (linux-user) and the jitter.
 *
 * The jitter is a shared library (`libsluice-jitter.so`) that QEMU loads with
 * dlopen() when given `-jitter PATH` or `QEMU_JITTER=PATH`. It exports one
 * symbol, `sluice_jitter_ops` (struct sluice_jitter_ops), whose `abi_version`
 * QEMU checks before calling anything: a mismatch is a load error. The QEMU
 * build compiles against this same header (configure's `--enable-sluice
 * --sluice-include=.../include`), and the patched QEMU's cache key includes
 * its hash.
 *
 * Threads and contexts: "vCPU" means the guest thread's own host thread
 * (linux-user runs one host thread per guest thread). "exclusive" means QEMU
 * holds start_exclusive(): every other vCPU is stopped outside translated
 * code, so its slot's cursor is up to date in memory.
 *
 * Changelog: 1 — first version. 2 — lift-time decisions (hook_inst, hook_mem,
 * once_hit), the helper_mem word, and guest mmap/munmap notifications.
 * 3 — options after the path (`-jitter PATH,key=value,...`, host_info.args)
 * instead of environment variables; publish_all (held across execve and a
 * SIGKILL the guest sends itself) replaces exec_start; fd_next and fd_claim
 * keep the jitter's descriptors out of the guest's reach.
 * 4 — the slot's `written`: translated code stores the cursor there at
 * every TB start (the jitter no longer zeroes the ring ahead of it); inside
 * a TB the cursor may be in a host register.
 * 5 — block encoding: lift_block (at TB end the jitter may replace the
 * TB's EXEC records by one BLOCK record), the slot's `block_at`, and
 * tb_exit (how far a TB left by a longjmp got).
 * 6 — slots: lift_block is told the TB's accesses that always run (before
 * its first branch, label or call that may touch guest memory); a
 * BLOCK_SLOTS word drops their records' headers too. The TB's byte count
 * still counts those headers, so tb_exit has room to put them back.
 * 7 — host_info.request_flush and ops->flushed: the jitter has QEMU
 * re-translate everything when it starts or stops instrumenting (a
 * process with no consumer attached runs uninstrumented).
 * 8 — ops->instrumenting: a TB lifted while it answers 0 is lifted as
 * without sluice (no cursor, no stores, no hook called), so a process
 * with no consumer runs the code QEMU alone makes; sluice_mem_enabled
 * (probe_access) sends helpers' accesses down the per-access path only
 * when helper_mem records them.
 * 9 — `written` is stored as a TB that wrote records is left (before
 * each goto_tb, exit_tb and goto_ptr), not at every TB start; a TB that
 * writes no record inline has no sluice op at all, so block_at may name
 * a block that is over (sluice_block_in_flight tells); tb_exit is called
 * after every longjmp and stores `written` itself.
 * 10 — tb_exit's @p again: the instruction that left did not run and QEMU
 * runs it again (EXCP_ATOMIC; a store into the TB's own code page), so
 * the jitter takes back its exec event instead of counting it twice.
 * 11 — mprotect and mremap: with mmap and munmap, every change of the
 * guest's mappings reaches the jitter (the module map in the stream).
 * 12 — syscall and syscall_return: each guest syscall's number, arguments
 * and return value (syscall events in the stream, opt-in).
 * 13 — first runs: a TB whose records are all Once ones (and that no other
 * vCPU may run) is lifted with none; lift_block gets it with `first_run`
 * set, and the jitter records its first run from C (first_run,
 * first_run_end) instead of through the once_hit helper and a second
 * translation.
 */
#ifndef SLUICE_JITTER_ABI_H
#define SLUICE_JITTER_ABI_H

#include <stdint.h>
#include <sys/resource.h>

#define SLUICE_JITTER_ABI_VERSION 13u

/**
 * Per-vCPU producer state. It lives in QEMU's CPUNegativeOffsetState
 * (include/hw/core/cpu.h) so translated code reaches it at a fixed negative
 * offset from env on every target and host.
 *
 * Translated code appends records at `cursor` and advances it. A TB that
 * writes records inline (need > 0) calls reserve() at its start when
 * `cursor + need > limit`, and stores `cursor` at `written` before each
 * op that leaves it. A TB that writes none has neither: the helpers that
 * append check for themselves, and store `cursor` at `written` when no
 * block is in flight. Between two reserve() calls the producer may write up to
 * `limit` without checking. Inside a TB the cursor may live in
 * a host register (a TCG global): it is in the slot whenever a helper or
 * the jitter runs.
 */
struct sluice_thread_slot {
    uint64_t *cursor; /**< next record's address (host pointer into the ring's data mapping) */
    uint64_t *limit;  /**< end of the space granted by the last reserve() */
    void *ring;       /**< the jitter's ring for this thread; NULL = not tracing */
    /**
     * Written by translated code before each guest instruction that calls
     * a helper whose memory accesses are recorded: which instruction that
     * is and which of its helpers' accesses are (SLUICE_HELPER_MEM_* bits |
     * pc); before a later instruction of the same TB that calls a helper,
     * its pc alone; cleared before each exit of a TB that stored bits, and
     * as QEMU's C code regains control. 0 or no bits = record nothing.
     */
    uint64_t helper_mem;
    /**
     * Where `cursor` is stored whenever every record before it is whole
     * (as a TB that wrote records is left, see above): a word of the
     * ring's shared header (record.h, written_addr), so a consumer can take
     * the whole records of a thread killed between two publishes. Never
     * NULL while translated code may run.
     */
    uint64_t *written;
    /**
     * The BLOCK record of the last TB that wrote one: translated code
     * stores its address here right after writing it at TB start, and
     * stores NULL before a TB-start reserve() (the block before is over).
     * The block is in flight only while it lies at or past `*written`
     * (sluice_block_in_flight): leaving the TB stores `written` past it.
     * The jitter reads it in reserve() (it holds a block in flight back
     * from consumers, and cuts it in two at a chunk boundary) and in
     * tb_exit(), and clears it once the block is over.
     */
    uint64_t *block_at;
};

/**
 * Whether @p slot's block_at names a block whose TB is still running:
 * one at or past the cursor stored at `written` (both are addresses in
 * the ring's data mapping, compared as numbers; whoever moves the cursor
 * back into the first mapping moves or clears block_at with it).
 * Any thread that owns the slot (its vCPU, or the jitter for it).
 */
static inline int sluice_block_in_flight(const struct sluice_thread_slot *slot)
{
    return slot->block_at != 0 && (uint64_t)(uintptr_t)slot->block_at >= *slot->written;
}

/** helper_mem: record the helpers' loads. */
#define SLUICE_HELPER_MEM_R (1ull << 62)
/** helper_mem: record the helpers' stores. */
#define SLUICE_HELPER_MEM_W (1ull << 63)
/** helper_mem: the guest pc, in the low 56 bits. */
#define SLUICE_HELPER_MEM_PC ((1ull << 56) - 1)

/** hook_inst's answers (the values of SLUICE_NEVER/ALWAYS/ONCE in <sluice/filter.h>). */
enum sluice_hook_inst {
    SLUICE_HOOK_NEVER = 0,  /**< emit nothing */
    SLUICE_HOOK_ALWAYS = 1, /**< emit an exec record inline */
    SLUICE_HOOK_ONCE = 2,   /**< record the first run: once_hit, or first_run if the TB allows */
};

/** How a TB's first run ended (first_run_end). */
enum sluice_run_end {
    SLUICE_RUN_DONE = 0,  /**< it left through one of its exits: every instruction ran */
    SLUICE_RUN_NONE = 1,  /**< it left before its first instruction (an exit request) */
    SLUICE_RUN_LEFT = 2,  /**< a longjmp at pc: that instruction started and counts */
    SLUICE_RUN_AGAIN = 3, /**< a longjmp at pc: that instruction did not run, runs next */
};

/** sluice_lift_insn.flags: the instruction ends its TB (translate_insn set is_jmp). */
#define SLUICE_LIFT_ENDS_TB 0x1u

/** An instruction QEMU has just lifted (translator_loop, after translate_insn). */
struct sluice_lift_insn {
    uint64_t pc;       /**< guest virtual address */
    uint32_t length;   /**< bytes (db->pc_next - pc, or the recorded length of a fake insn) */
    uint32_t flags;    /**< SLUICE_LIFT_* bits */
    uint8_t bytes[16]; /**< first min(length, 16) bytes; the rest 0 */
};

/** A TB QEMU has lifted, at its end (translator_loop, after tb_stop). */
struct sluice_lift_block {
    uint32_t n;          /**< instructions, 1..SLUICE_BLOCK_MAX_INSNS */
    uint32_t records;    /**< 1 if it may write records besides EXEC ones (MEM, a Once hit) */
    const uint64_t *pc;  /**< n guest PCs in program order */
    const uint8_t *len;  /**< n lengths in bytes */
    const uint8_t *hook; /**< n hook_inst answers (sluice_hook_inst) */
    /** Accesses recorded inline before the TB's first branch, label or call that may
     * touch guest memory, in program order: 0..SLUICE_BLOCK_MAX_SLOTS. */
    uint32_t n_slots;
    const uint16_t *slot; /**< n_slots slots, as sluice_slot() (record.h) makes them */
    /**
     * 1: the TB has no inline record and no helper that records, some of its
     * instructions are SLUICE_HOOK_ONCE, and only this vCPU runs it, right
     * after this lift. A BLOCK header returned is then not emitted: QEMU
     * hands it to first_run() as the TB is entered, and its Once
     * instructions count as recorded in the descriptor. Anything else
     * returned: QEMU lifts the TB again with once_hit calls.
     */
    uint32_t first_run;
};

/** What QEMU tells the jitter at load. */
struct sluice_host_info {
    uint32_t size;       /**< sizeof(struct sluice_host_info) */
    uint32_t big_endian; /**< guest byte order */
    const char *arch;    /**< QEMU target name, e.g. "x86_64", "aarch64", "mipsel" */
    const char *exe;     /**< guest program path */
    /**
     * What followed the path in `-jitter PATH,OPTIONS` (or QEMU_JITTER):
     * "key=value" items separated by ',' (a ',' inside a value is written
     * ",,"); "" when there were none. The jitter defines the keys.
     */
    const char *args;
    /**
     * Any thread, any time after init returned: ask QEMU to flush its
     * translation cache at its next safe point (every vCPU outside
     * translated code: the first vCPU that leaves it after the call takes
     * the flush; one blocked in a syscall does not hold it up), and to call
     * ops->flushed() there, right after. Several calls before that safe
     * point make one flush. Never blocks, never fails.
     */
    void (*request_flush)(void);
};

/**
 * Entry points of the jitter. Every function pointer is required. None of
 * them may call back into QEMU. Unless stated, they return nothing and never
 * fail: a jitter that cannot keep records counts them as lost.
 */
struct sluice_jitter_ops {
    uint32_t abi_version; /**< SLUICE_JITTER_ABI_VERSION */
    uint32_t size;        /**< sizeof(struct sluice_jitter_ops) */

    /**
     * Main thread, once, before any guest code is translated.
     * @return 0, or a negative errno after printing one line on stderr
     *         (QEMU then exits with status 1).
     */
    int (*init)(const struct sluice_host_info *info);
    /** vCPU, before the thread's first guest instruction: create its ring, fill @p slot. */
    void (*thread_start)(struct sluice_thread_slot *slot, uint32_t tid);
    /**
     * vCPU, from translated code (TB start, or after a label inside a TB) or
     * a memory helper: publish what is written and return once
     * `limit - cursor >= need` bytes (waiting for lossless consumers when the
     * ring is full). @p need <= SLUICE_RESERVE_MAX + 32 (a helper's record
     * plus room for the rest of its TB).
     */
    void (*reserve)(struct sluice_thread_slot *slot, uint64_t need);
    /** vCPU, when the thread leaves translated code for a syscall: publish. */
    void (*publish)(struct sluice_thread_slot *slot);
    /** vCPU, the thread is exiting (exit(2), not the last thread): publish and close its ring. */
    void (*thread_exit)(struct sluice_thread_slot *slot);
    /** Exclusive, the process exits (exit_group, last exit, fatal signal): publish and close all
     * rings. QEMU holds the exclusive section until the process is gone, so no vCPU runs
     * translated code again; a thread outside it that would write a record after this waits
     * in ring_reserve to be ended with the process. */
    void (*process_exit)(int status);
    /**
     * Exclusive, before a syscall that ends the process if it succeeds:
     * execve(2), or a SIGKILL the guest sends its own process. QEMU holds
     * the exclusive section across the syscall, so no other vCPU writes a
     * record between this publish and the process's end; if the syscall
     * fails, QEMU releases it and tracing goes on.
     */
    void (*publish_all)(void);
    /** Exclusive, before fork(2) in the parent: publish all rings. */
    void (*fork_start)(void);
    /**
     * vCPU (the only thread left in a child), after fork(2).
     * In the parent, @p child is 0 and @p slot unchanged. In the child,
     * @p child is 1: forget the parent's rings and give @p slot a new ring for @p tid.
     */
    void (*fork_end)(int child, struct sluice_thread_slot *slot, uint32_t tid);

    /**
     * Lift time (the vCPU translating, mmap_lock held), once per guest
     * instruction lifted, after it is decoded.
     * @return a sluice_hook_inst value; anything else counts as ALWAYS.
     */
    int (*hook_inst)(struct sluice_thread_slot *slot, const struct sluice_lift_insn *insn);
    /**
     * Lift time, once per guest memory access site, as QEMU lifts it (so
     * before hook_inst for the same instruction); @p size is in bytes, 0 for
     * the accesses helpers make for that instruction.
     * @return 1 to record the access, 0 to emit nothing.
     */
    int (*hook_mem)(struct sluice_thread_slot *slot, uint64_t pc, uint32_t size, int is_write);
    /**
     * vCPU, run time, from the code a SLUICE_HOOK_ONCE instruction runs:
     * claim the first hit of @p pc in this process. Thread-safe: exactly one
     * caller per pc gets 1; it then appends the exec record and QEMU
     * invalidates the TB so the re-translation asks hook_inst again.
     * @return 1 for the first hit, 0 otherwise.
     */
    int (*once_hit)(uint64_t pc);
    /**
     * Lift time, once per TB, when it is complete: the word the TB writes
     * at its start, after its capacity check (if it has one).
     * @return a BLOCK header word (record.h): the TB's EXEC records are
     *         dropped and block_at names the word; a BLOCK_SLOTS one: the
     *         headers of its n_slots slot records are dropped as well;
     *         another record word of
     *         one word (a PAD of 1, so records that follow are not read as
     *         the last block's): the EXEC records stay; or 0: no word.
     *         Never fails.
     */
    uint64_t (*lift_block)(struct sluice_thread_slot *slot, const struct sluice_lift_block *b);
    /**
     * vCPU, after every longjmp out of translated code (cpu_exec's
     * cpu_exec_longjmp_cleanup) while the slot has a ring: @p pc is the
     * guest PC QEMU restored, that of the instruction that left. It
     * started, so it counts, unless @p again is 1: then it did not run and
     * is the next QEMU runs (cpu->exception_index is EXCP_ATOMIC:
     * cpu_loop_exit_atomic, it runs alone in cpu_exec_step_atomic; or -1:
     * cpu_loop_exit_noexc, as when a store wrote to the code page of its
     * own TB, accel/tcg/user-exec.c:handle_sigsegv_accerr_write). If a
     * block is in flight (sluice_block_in_flight) the jitter rewrites its
     * `to` (and, left before its last slot, gives the slot records their
     * headers, moving the cursor); then it clears block_at and stores the
     * cursor at `written`, as leaving the TB by an exit op would have.
     */
    void (*tb_exit)(struct sluice_thread_slot *slot, uint64_t pc, int again);
    /**
     * vCPU, cpu_tb_exec, as a TB lifted with `first_run` (its BLOCK header
     * @p word from lift_block) is entered for the first time: claim its
     * Once instructions' pcs (no other thread can have: the process has
     * one vCPU) and append @p word as the block in flight. The run chains
     * to no other TB, so it ends in first_run_end() and nowhere else.
     */
    void (*first_run)(struct sluice_thread_slot *slot, uint64_t word);
    /**
     * vCPU, as that first run ends (@p how: enum sluice_run_end; @p pc as
     * in tb_exit for a longjmp, else 0): cut the block where the run got,
     * as tb_exit does, and give back the claims of the instructions it did
     * not reach. Then no block is in flight and `written` is the cursor.
     * @return 1 if some claims were given back: QEMU then invalidates the
     *         TB, whose next translation asks hook_inst again; else 0.
     */
    int (*first_run_end)(struct sluice_thread_slot *slot, uint64_t pc, int how);
    /**
     * Any thread, mmap_lock held: the guest range [start, start + len)
     * (bytes, page-aligned) is now mapped; @p fd is the file (still open
     * during the call) or -1 for anonymous memory; @p offset is the file
     * offset in bytes. Replaces what was mapped there before.
     */
    void (*mmap)(uint64_t start, uint64_t len, int prot, int flags, int fd, uint64_t offset);
    /** Any thread, mmap_lock held: the guest range [start, start + len) is unmapped. */
    void (*munmap)(uint64_t start, uint64_t len);
    /**
     * Any thread, mmap_lock held (linux-user/mmap.c:target_mprotect): the
     * guest range [start, start + len) (bytes, page-aligned) now has
     * protection @p prot (PROT_* bits, the guest's).
     */
    void (*mprotect)(uint64_t start, uint64_t len, int prot);
    /**
     * Any thread, mmap_lock held (linux-user/mmap.c:target_mremap): the
     * mapping at [old_start, old_start + old_len) now lies at
     * [start, start + len) (bytes; the guest's sizes, not rounded up to
     * pages); @p start may equal @p old_start (grown or shrunk in place).
     */
    void (*mremap)(uint64_t old_start, uint64_t old_len, uint64_t start, uint64_t len);

    /**
     * vCPU, at a guest syscall that names descriptors (close, close_range,
     * dup2/dup3, read, write, fcntl, ...): the jitter's lowest descriptor
     * >= @p from, or -1 if none. The guest's syscall then behaves as if
     * the jitter's descriptors were not open (EBADF; close_range skips them).
     */
    int (*fd_next)(int from);
    /**
     * vCPU, before dup2/dup3 makes @p fd the guest's: if @p fd is one of the
     * jitter's, move it to another number first.
     * @return 0, or a negative errno (no free number: the guest's call then
     *         fails with it).
     */
    int (*fd_claim)(int fd);
    /**
     * Lift time, at the start of every TB: 1 if the jitter records
     * anything now. On 0 QEMU lifts the TB exactly as without sluice: no
     * cursor, no store, none of the hooks above, so its code never writes
     * a record. The answer may change only before the first guest thread
     * starts and in flushed(), so TBs of both kinds never run together.
     */
    int (*instrumenting)(void);
    /**
     * Exclusive, right after a flush host_info.request_flush asked for:
     * no translated block is left, and none is made until this returns.
     * (The jitter switches what its lift-time hooks answer here.)
     */
    void (*flushed)(void);
    /**
     * vCPU, in linux-user/syscall.c:do_syscall before the syscall runs
     * (after QEMU's -strace line, before publish): thread @p slot (NULL
     * ring: not traced) makes syscall @p num with its six argument
     * registers @p args, zero-extended from the guest's width. The
     * thread's records before it are in its ring (no TB is running).
     */
    void (*syscall)(struct sluice_thread_slot *slot, int num, const uint64_t args[6]);
    /**
     * vCPU, in do_syscall after the syscall returned @p ret (as the guest
     * will see it: a negative errno on failure), also for syscalls the
     * jitter answered itself (fd_next). Not called for exit, exit_group
     * and an execve that succeeds.
     */
    void (*syscall_return)(struct sluice_thread_slot *slot, int num, int64_t ret);
};

/** Room a translation block may need, in bytes (sizes TBs; reserve() gets at most this + 32). */
#define SLUICE_RESERVE_MAX (64u * 1024)

/** Name of the symbol the jitter exports. */
#define SLUICE_JITTER_OPS_SYMBOL "sluice_jitter_ops"

/** ELF section of a sluice-patched QEMU that holds its struct sluice_qemu_mark. */
#define SLUICE_QEMU_MARK_SECTION ".sluice_mark"

/** struct sluice_qemu_mark's magic, its terminating NUL included (8 bytes). */
#define SLUICE_QEMU_MARK_MAGIC "sluiceQ"

/**
 * What a sluice-patched QEMU says of itself in its ELF file (section
 * SLUICE_QEMU_MARK_SECTION, linux-user/sluice.c), so that `sluice run`
 * knows it without running it (consumer/precheck.c; a QEMU without the
 * section is asked with `-h` instead). Written by the compiler that built
 * QEMU: host byte order, 256 bytes.
 */
struct sluice_qemu_mark {
    char magic[8];           /**< SLUICE_QEMU_MARK_MAGIC */
    uint32_t abi_version;    /**< the SLUICE_JITTER_ABI_VERSION QEMU was built with */
    char interp_prefix[244]; /**< QEMU_LD_PREFIX's default (QEMU's CONFIG_QEMU_INTERP_PREFIX),
                                  NUL-terminated */
};

/**
 * The jitter keeps its descriptors just below min(RLIMIT_NOFILE's soft
 * limit, SLUICE_FDS_TOP), out of the guest's low numbers. A launcher may
 * grow the descriptor table that far before it execs QEMU, while it has
 * one thread: growing the table of a process with threads (QEMU has its
 * RCU thread before the jitter loads) waits for an RCU grace period. A
 * patched QEMU grows it in a constructor that runs before its RCU thread
 * starts (linux-user/sluice.c sluice_grow_fd_table).
 */
#define SLUICE_FDS_TOP 4096

/**
 * One past the highest number the jitter puts a descriptor at:
 * min(RLIMIT_NOFILE's soft limit, SLUICE_FDS_TOP). Any thread.
 */
static inline long sluice_fds_top(void)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)SLUICE_FDS_TOP) {
        return (long)rl.rlim_cur;
    }
    return SLUICE_FDS_TOP;
}

#endif /* SLUICE_JITTER_ABI_H */
