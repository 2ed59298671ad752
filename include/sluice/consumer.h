/* SPDX-License-Identifier: GPL-2.0-or-later */
/**
 * @file consumer.h
 * @brief libsluice: receive a guest's trace, process it in parallel, get it back in order.
 *
 * The model is Cannoli's (DESIGN.md §1.7): the user gives a struct of
 * callbacks. `exec`, `read`, `write` and `lost` run on worker threads, in
 * parallel, one chunk of one guest thread's records at a time; each may emit
 * zero or one user item of `item_size` bytes (filter-map). `trace` then
 * receives the items of each guest thread strictly in that thread's program
 * order, on one thread, sequentially (never two `trace` calls at once).
 * `thread` is called on the ordering thread too, before a thread's first item
 * and after its last.
 *
 * Memory: the session holds at most 4 × workers chunks (each a span of at
 * most 256 KiB of one ring's records, read in place) and, per chunk, the
 * items made from it that `trace` has not yet received: at most
 * max(SLUICE_CHUNK_ITEMS_BYTES, 32768 × item_size) bytes, 8 MiB for items of
 * up to 256 bytes. So the items take at most
 * 4 × workers × max(SLUICE_CHUNK_ITEMS_BYTES, 32768 × item_size) bytes
 * whatever the guest runs, although a span of BLOCK records may expand to
 * 512 exec events per 8-byte word. A chunk whose events would make more
 * items is processed in slices: its worker pauses between two events (no
 * worker callback of that chunk runs meanwhile), `trace` receives the items
 * so far in their turn, and the worker goes on. Nothing is dropped or
 * reordered; each callback still runs on the thread stated below.
 *
 * Errors: functions returning int return 0 on success and a negative errno on
 * failure, with a message retrievable by sluice_session__error().
 */
#ifndef SLUICE_CONSUMER_H
#define SLUICE_CONSUMER_H

#include <stddef.h>
#include <stdint.h>
#include <sluice/record.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Bytes of user items (item_size each) one chunk holds before `trace` has
 * received them, when item_size is at most 256; for larger items, 32768 of
 * them (one per word of a chunk, so records other than BLOCK never need a
 * pause). See "Memory" above.
 */
#define SLUICE_CHUNK_ITEMS_BYTES (8u << 20)

/** A guest thread, as its ring header describes it. Valid during a callback. */
struct sluice_thread_info {
    uint32_t pid;   /**< guest process id (host pid of its QEMU, in the PID namespace QEMU
                       started in, as `ps` there shows it: also for a process the guest put in
                       a namespace of its own, where it is pid 1) */
    uint32_t tid;   /**< guest thread id (host tid, in the same namespace) */
    uint32_t seq;   /**< ring number within the process (a thread may get a new ring after a failed
                       exec) */
    int big_endian; /**< guest byte order */
    const char *arch; /**< QEMU target name, e.g. "x86_64" */
    const char *comm; /**< guest program name */
};

/**
 * One guest memory access. Its value is the bytes it read or wrote, in the
 * guest's byte order: what a plain load of that size puts in a register
 * (for x86's byte-swapping movbe, memory's bytes, not its register's); an
 * atomic read-modify-write is a load of what memory held, then a store of
 * what it holds after (sluice/record.h, MEM records).
 */
struct sluice_mem {
    uint64_t pc;    /**< guest virtual address of the instruction */
    uint64_t addr;  /**< guest virtual address accessed */
    uint64_t value; /**< value, low `size` bytes (masked; upper bytes zero); low half if size 16 */
    uint64_t value_hi; /**< high 8 bytes when size is 16, else 0 */
    uint32_t size;     /**< bytes: 1, 2, 4, 8 or 16 */
    uint32_t is_write; /**< 1 store, 0 load */
};

/**
 * A change of the guest's mappings (an `mmap` event), as QEMU made it
 * (linux-user/mmap.c: target_mmap, target_munmap, target_mprotect,
 * target_mremap). Kinds are enum sluice_map_kind of <sluice/record.h>.
 */
struct sluice_map {
    uint32_t kind;      /**< SLUICE_MAP_MMAP, _MUNMAP, _MPROTECT or _MREMAP */
    uint32_t prot;      /**< PROT_READ 1 | PROT_WRITE 2 | PROT_EXEC 4 (mmap, mprotect; mremap: 0) */
    uint64_t start;     /**< guest address of the range (mremap: where it is now) */
    uint64_t len;       /**< bytes, the guest's length rounded up to 4 KiB (whole pages) */
    uint64_t offset;    /**< file offset of `start` (a file's mmap or mremap), else 0 */
    uint64_t base;      /**< its load's base: where the load puts the file's offset 0 (record.h,
                             struct sluice_map_entry) */
    uint64_t old_start; /**< mremap: where the mapping was */
    uint64_t old_len;   /**< mremap: its bytes there */
    uint32_t image;     /**< the file's id in its process (0 the main executable), or
                             SLUICE_MAP_ANON for anonymous memory and non-mapping events */
    uint32_t snapshot;  /**< 1: part of the map at the stream's start, not a change */
    const char *path;   /**< the file's path as the guest's QEMU saw it, or NULL; valid until
                             the stream of the thread it came with ends (its `thread` callback
                             with started 0), so `trace` may still read it */
};

/** The mapping that held an address (sluice_map__at()). */
struct sluice_module {
    uint64_t start;  /**< guest range of the mmap (or mremap) that made it ... */
    uint64_t end;    /**< ... up to here, exclusive (parts may have been unmapped since) */
    uint64_t offset; /**< file offset of the address asked about; 0 for anonymous memory */
    uint64_t base;   /**< its load's base (struct sluice_map); 0 for anonymous */
    uint32_t prot;   /**< PROT_* bits the address had */
    uint32_t image; /**< the file's id in its process (0 the main executable), or SLUICE_MAP_ANON */
    const char *path; /**< the file's path, or NULL for anonymous memory; valid as
                           sluice_map.path is */
};

/**
 * A guest syscall (the `syscall` callback), as QEMU's linux-user
 * do_syscall() made it: entered, then returned with the value the guest
 * gets. Some have no return: exit, exit_group, an execve that succeeds, a
 * sigreturn (it sets every register), and one a signal interrupted that
 * QEMU runs again (SA_RESTART: entered anew after the handler). Numbers
 * are the guest architecture's (its <asm/unistd.h>; mipsel o32 counts from
 * 4000).
 */
struct sluice_syscall {
    uint32_t nr;       /**< syscall number: QEMU's do_syscall's int, so (int32_t)nr is what the
                            guest passed when it passed a negative one (syscall(-1): 0xffffffff) */
    uint32_t returned; /**< 0: entered (args valid), 1: returned (ret valid) */
    uint64_t args[6];  /**< argument registers, zero-extended from the guest's width */
    int64_t ret;       /**< return value, sign-extended: a negative errno on failure */
};

/** A translated block entered at its first instruction (the `block` callback). */
struct sluice_block {
    uint64_t pc;         /**< guest address of its first instruction */
    uint32_t n_insns;    /**< its instructions, 1 to 512 */
    uint32_t bytes;      /**< bytes of guest code it covers: its instructions' lengths summed */
    const uint64_t *pcs; /**< its instructions' guest PCs, in the read-only table: valid during the
                            call, never to be written through (as exec_batch's) */
};

/**
 * Callbacks. Unset (NULL) callbacks are skipped. Worker callbacks return 1
 * when they filled `item` (item_size bytes, uninitialised on entry), else 0.
 * `user` is passed back unchanged.
 */
struct sluice_callbacks {
    size_t sz; /**< sizeof(struct sluice_callbacks), for forward compatibility */
    void *user;
    size_t item_size; /**< bytes of one user item (0: no items; `trace` is never called) */
    /**
     * Worker thread: one executed instruction at guest virtual address @p pc
     * (an EXEC record, or one instruction of a BLOCK record's block: a
     * block-encoded stream gives the same calls, record.h).
     */
    int (*exec)(void *user, const struct sluice_thread_info *t, uint64_t pc, void *item);
    /** Worker thread: one load. */
    int (*read)(void *user, const struct sluice_thread_info *t, const struct sluice_mem *m,
                void *item);
    /** Worker thread: one store. */
    int (*write)(void *user, const struct sluice_thread_info *t, const struct sluice_mem *m,
                 void *item);
    /**
     * Worker thread: @p count events (executed instructions and memory
     * accesses, as `exec`, `read` and `write` would have had them) were
     * lost at this point of the stream: the producer overwrote them before
     * this lossy consumer took them (sluice_consumer_opts.lossy). Exact.
     */
    int (*lost)(void *user, const struct sluice_thread_info *t, uint64_t count, void *item);
    /** Ordering thread: the thread's stream starts (@p started 1) or has ended (0). */
    void (*thread)(void *user, const struct sluice_thread_info *t, int started);
    /** Ordering thread: the next item of thread @p t, in program order. */
    void (*trace)(void *user, const struct sluice_thread_info *t, void *item);
    /**
     * Worker thread: a message from the filter's bpf_trace_printk, made
     * while QEMU lifted code on thread @p t (so it precedes that code's
     * records): @p len bytes at @p text, not NUL-terminated, at most 1024.
     * @p text points into the shared ring, valid during the call only, and
     * a misbehaving producer could change it meanwhile: copy it before
     * parsing it.
     */
    int (*message)(void *user, const struct sluice_thread_info *t, const char *text, size_t len,
                   void *item);
    /**
     * Worker thread, instead of `exec` when set (`exec` is then never
     * called): a run of @p n executed instructions (1 <= n <= 1024), their
     * guest PCs at @p pcs in program order. A run never spans another record
     * (a memory access, lost events, a message), two chunks or two slices of
     * a chunk (see "Memory" above), so runs and
     * the other callbacks still come in program order within a chunk; how
     * the instructions are cut into runs is otherwise unspecified. @p pcs is
     * valid during the call only: for instructions of a BLOCK record it
     * points into the process's block table, mapped read-only and shared
     * with the producer (a misbehaving one could change it meanwhile), so
     * never write through it. The fastest way to see every PC: one call
     * per run instead of one per instruction.
     */
    int (*exec_batch)(void *user, const struct sluice_thread_info *t, const uint64_t *pcs, size_t n,
                      void *item);
    /**
     * Worker thread, after the last worker callback of a chunk (one span of
     * thread @p t's records, decoded on one worker thread from its first
     * callback to this one): may fill one item, traced after the chunk's
     * other items. With it, `exec` can fold into per-worker-thread state and
     * hand one summary per chunk to `trace`, instead of an item per event.
     */
    int (*chunk_end)(void *user, const struct sluice_thread_info *t, void *item);
    /**
     * Worker thread: thread @p t changed a mapping (mmap, munmap, mprotect,
     * mremap; shmat as an anonymous shared mmap, shmdt as a munmap), here
     * in its stream: after the records of what ran before
     * the syscall, before those of what ran after. At the start of the
     * stream of the first thread a session reads of each process, first a
     * snapshot: one event with `snapshot` set per mapping the process had
     * then (the program and its interpreter as QEMU loaded them included),
     * by address: the map the process's first ring began in when the
     * session reads that ring from its beginning, else the map when the
     * session took the process in (which may lie a little after where the
     * stream carrying it starts). So every change
     * comes exactly once: in the snapshot or as an event (but for a lossy
     * session, whose lost records take their MAP records with them).
     * Other threads' streams do not carry it; sluice_map__at() answers for
     * any event of any thread.
     */
    int (*mmap)(void *user, const struct sluice_thread_info *t, const struct sluice_map *m,
                void *item);
    /**
     * Worker thread: thread @p t entered translated block @p b at its first
     * instruction (record.h: a BLOCK record from 0), before the exec events
     * of its instructions; a block left early (a fault) still covers all
     * @p b->bytes. Block encoding only: a stream of one record per
     * instruction (SLUICE_ENCODING=insn, or a block the full table refused)
     * has none. With a filter, only blocks that recorded something.
     */
    int (*block)(void *user, const struct sluice_thread_info *t, const struct sluice_block *b,
                 void *item);
    /**
     * Worker thread: thread @p t entered a syscall, or it returned (@p sc),
     * at that place in its stream. Only from a guest started with syscall
     * events (`sluice run --syscalls`, jitter option syscalls=1); some have
     * no return (struct sluice_syscall says which). Each counts as an event
     * (and as lost, when a lossy consumer loses it).
     */
    int (*syscall)(void *user, const struct sluice_thread_info *t, const struct sluice_syscall *sc,
                   void *item);
};

/**
 * Which mapping held guest address @p addr when the event being delivered
 * ran: call it from a worker callback (exec, exec_batch, read, write, mmap)
 * for an address of @p t's process. Exact for the PCs of exec events (the
 * map at the time their block was translated, which cannot change while
 * it runs); for a data address, or an instruction traced one record per
 * instruction (SLUICE_ENCODING=insn), the map as it was when the chunk was
 * read (at most 256 KiB of records later), where no block says better.
 * @return 0 with @p out filled; -ENOENT (nothing mapped there then, or the
 *         process's module log was full when the block was translated: its
 *         jitter said so on stderr);
 *         -EINVAL (not inside a worker callback of this session).
 */
int sluice_map__at(const struct sluice_thread_info *t, uint64_t addr, struct sluice_module *out);

/**
 * Whether the file now at @p path, which the traced guest mapped (a path
 * `sluice_map__at()` gave), is not the file the trace ran: call it from a
 * worker callback before naming code from the file (symbols, disassembly),
 * which would otherwise be another program's. Compared once per file (per
 * process in a live session), on the first call. A trace file session
 * compares with what the recording saw: ELF build-ids (NT_GNU_BUILD_ID)
 * when both files have one, else size and modification time. A live
 * session compares with what the guest mapped, as the newest mapping of
 * @p path in the thread's module log says (record.h, format 10): the
 * same inode, size and modification time.
 * @param[out] why when changed, how (@p n bytes; "it was 1234 bytes when
 *             recorded, 5678 now", "replaced since the guest mapped it:
 *             another file is at that path"); it starts with "gone" when
 *             no file is at the path any more (a live session: "gone
 *             since the guest mapped it: <errno's text>")
 * @return 1 (changed, or gone in a live session), 0 (the same; or the file
 *         cannot be read now in a trace file session; or nothing is
 *         recorded of it: a trace file of version 1, a file already gone
 *         when it was recorded, no mapping of that path), -EINVAL (not
 *         inside a worker callback of this session).
 */
int sluice_file__changed(const struct sluice_thread_info *t, const char *path, char *why, size_t n);

/**
 * The file a mapping was made from, as fstat() saw it in the guest's QEMU
 * when the guest mapped it (the module log entry of its mmap or mremap,
 * record.h format 10). Two mappings of one path with different ids were
 * two different files (a library rebuilt or replaced between two loads).
 */
struct sluice_file_id {
    uint64_t dev;     /**< st_dev (of the machine the guest ran on) */
    uint64_t ino;     /**< st_ino, never 0 */
    uint64_t size;    /**< st_size, bytes */
    int64_t mtime_ns; /**< st_mtim, ns since the Unix epoch */
    int64_t ctime_ns; /**< st_ctim, ns since the Unix epoch (any write sets it; never set back) */
};

/**
 * The identity of the file mapped at guest address @p addr of @p t's
 * process, at the same place in the stream as sluice_map__at() answers.
 * Worker thread, from a worker callback (as sluice_map__at()).
 * @return 0 with @p out filled; -ENOENT (nothing mapped there, anonymous
 *         memory, or no identity logged: a file fstat() failed on, a trace
 *         recorded before format 10); -EINVAL (not inside a worker
 *         callback of this session, or @p out NULL).
 */
int sluice_map__file_at(const struct sluice_thread_info *t, uint64_t addr,
                        struct sluice_file_id *out);

/**
 * Whether the file at the path of the mapping that holds @p addr (as
 * sluice_map__at() finds it) is not the file that mapping was made from:
 * sluice_file__changed() for that mapping rather than for its path, so a
 * path that held two files during the run (dlopen, dlclose, a rebuild,
 * dlopen again) is answered for each. A live session compares the file now
 * with the mapping's identity (sluice_map__file_at()); a trace file session
 * says changed when the mapping's file was not the one the recording read
 * (its size or modification time differ from the recorded ones) and is
 * not at the path now, or when the recording could not read the file (it
 * was gone) and the file now is not the mapped one (as live: so another
 * machine's file is said changed), else answers as
 * sluice_file__changed(). Mappings without an identity are
 * answered as sluice_file__changed() of their path. Worker thread, from a
 * worker callback; compared once per mapped file.
 * @param[out] why as sluice_file__changed()'s, or "the guest mapped another
 *             file at that path than the one recorded (...)"
 * @return 1 (changed, or gone in a live session), 0 (the same, anonymous
 *         memory, nothing mapped, or nothing known: as
 *         sluice_file__changed()), -EINVAL (not inside a worker callback
 *         of this session, or @p why NULL with @p n not 0).
 */
int sluice_file__changed_at(const struct sluice_thread_info *t, uint64_t addr, char *why, size_t n);

/** Options; fields added later keep the old behaviour when zero. */
struct sluice_consumer_opts {
    size_t sz;        /**< sizeof(struct sluice_consumer_opts) */
    unsigned workers; /**< worker threads; 0 = number of online CPUs */
    /**
     * 0 (default): lossless, the guest waits for us when a ring is full.
     * 1: lossy: the guest never waits for us; what its producer overwrites
     * before we took it reaches the `lost` callback, at its place in the
     * stream, as an exact count of events. Each span is copied out of the
     * ring before it is decoded (a lossless session decodes in place).
     */
    int lossy;
    /**
     * A trace file to record the session into as it runs (replaced if it
     * exists; layout: sluice/trace_file.h), or NULL. Each span is
     * compressed by its worker and written in stream order with what
     * decoding it needs; sluice_session__open_file() reads it back into
     * the same callbacks. A write that fails (a full disk) stops the
     * recording, not the session: what was written stays readable, and
     * sluice_session__run() then fails with -errno saying so. Past
     * `ulimit -f` the kernel sends SIGXFSZ, which kills unless the process
     * ignores it (the sluice command does); then the write fails (EFBIG).
     * The file must be a regular file (its end is cut back to the last
     * whole frame after a failed write); it is locked (flock) while it is
     * written, and a file another session records into fails the open
     * with -EBUSY. A slow disk slows the session as
     * a slow callback does (lossless: the guest waits).
     */
    const char *record;
    /**
     * sluice_session__open_file() only: deliver just the guest threads
     * whose tids are these @p n_tids (copied), or every thread (NULL). The
     * other threads' chunks are not read, nor the tables only they need. A
     * tid no thread of the file has makes sluice_session__run() fail
     * (-ENOENT, the message naming it and the file's threads) before
     * anything is delivered. A tid reused by a later process selects both.
     * @p n_tids with @p tids NULL: EINVAL from sluice_session__open_file().
     */
    const uint32_t *tids;
    size_t n_tids; /**< entries of @p tids */
    /**
     * sluice_session__open_file() only: an instruction window. Each thread
     * delivers only its instructions numbered @p skip_insns to
     * @p skip_insns + @p count_insns - 1 (its first is 0; @p count_insns 0:
     * to its end) and the events that follow each of them before the next
     * one (memory accesses, syscalls, messages, lost events). A block is
     * delivered (`block`) when its first instruction is. `mmap` events come
     * from the first chunk delivered (after a snapshot of the map as it was
     * where that chunk begins, when chunks were passed over) up to the
     * window's end. Counts are the window's. The file's INDEX finds where
     * each window starts, so the chunks before it are never read nor
     * decompressed; without an INDEX (a recording cut short) each chunk's
     * instructions are first counted on the calling thread. Both 0: no
     * window.
     */
    uint64_t skip_insns;
    uint64_t count_insns;
    /**
     * With @p record: store each span as the ring held it instead of
     * zstd-compressing it (the file is about 6 times larger on full traces,
     * and the workers only checksum it: crc32 runs at several GB/s where
     * zstd's fastest level does well under 1 on records, so a full trace
     * is recorded nearly as fast as it is counted). The file reads the
     * same; a chunk's span is then written before it is released to the
     * producer. 0: compressed (default).
     */
    int record_uncompressed;
};

/** Per-thread and total counters, filled when a session ends. */
struct sluice_counts {
    uint64_t insns;  /**< exec events: EXEC records, and BLOCK records' recorded instructions */
    uint64_t loads;  /**< MEM records, loads */
    uint64_t stores; /**< MEM records, stores */
    uint64_t lost;   /**< events lost (LOST records: a lossy session's), exact */
};

/** A consumer attached to one traced guest (and the processes it forks). */
struct sluice_session;

/**
 * Attach over the connected control socket @p ctl_fd (SOCK_SEQPACKET; see
 * ctl.h). Sends HELLO; the WELCOME is read by sluice_session__run(), so this
 * may be called before QEMU starts. Takes ownership of @p ctl_fd (it is
 * closed on failure too). @p cb is copied (its first cb->sz bytes); @p opts
 * may be NULL for the defaults. Any thread.
 * @return a session, or NULL with errno set (EINVAL bad arguments, ENOMEM,
 *         send()'s errno if HELLO could not be sent, or the opts->record
 *         file's: EBUSY if another session records into it).
 */
struct sluice_session *sluice_session__new(int ctl_fd, const struct sluice_callbacks *cb,
                                           const struct sluice_consumer_opts *opts);

/**
 * Attach to the traced process @p pid at run time, through the socket it
 * listens on (sluice/ctl.h: `$XDG_RUNTIME_DIR/sluice/<pid>.sock`, else
 * `/tmp/sluice-<uid>/<pid>.sock`; both are tried). As
 * sluice_session__new() otherwise: the WELCOME (or the jitter's refusal,
 * e.g. of a peer of another uid) is read by sluice_session__run(). The
 * stream of each guest thread starts where its producer had last
 * published when the jitter took us in (a record boundary), so it is a
 * contiguous part of that thread's whole stream; threads started later,
 * and processes the guest forks later, come whole. Any thread.
 * @return a session, or NULL with errno set: ENOENT (no such socket: the
 *         process is not traced, or runs with listen=0), ECONNREFUSED (its
 *         socket is stale: the process is gone), or as sluice_session__new().
 */
struct sluice_session *sluice_session__attach(uint32_t pid, const struct sluice_callbacks *cb,
                                              const struct sluice_consumer_opts *opts);

/**
 * A session that reads the trace file @p path (recorded with
 * sluice_consumer_opts.record) instead of a guest: sluice_session__run()
 * delivers its events to @p cb as the recorded session delivered them,
 * in the same per-thread order, with the same counts (LOST events,
 * recovered threads) and sluice_map__at() answers. The file's problems are
 * run's errors, each naming the frame (a chunk, its thread and its byte
 * offset): whatever comes before a damaged or missing chunk is still
 * delivered, and the other threads go on. @p opts: only `workers`, `tids`,
 * `skip_insns` and `count_insns` are used.
 * Any thread.
 * @return a session, or NULL with errno set (EINVAL bad arguments, ENOMEM).
 */
struct sluice_session *sluice_session__open_file(const char *path,
                                                 const struct sluice_callbacks *cb,
                                                 const struct sluice_consumer_opts *opts);

/**
 * Detach: make sluice_session__run() return once every ring is read up to
 * where its producer had published when the call was made, and all that
 * was taken is delivered in order (`trace`, then `thread` with started 0);
 * the jitter then frees our slot and its producers stop waiting for us.
 * Rings announced later are not read. Any thread, and async-signal-safe
 * (it stores a flag and writes one byte to a pipe), so a SIGINT handler
 * may call it. Calling it again, or after run returned, does nothing.
 */
void sluice_session__detach(struct sluice_session *s);

/**
 * Whether the session ended by sluice_session__detach() rather than by
 * the end of the trace. Call after sluice_session__run() returned.
 */
int sluice_session__detached(const struct sluice_session *s);

/**
 * Whether the jitter took this live session in (its WELCOME was read). A
 * session that fails after that has a trace to report, even if no guest
 * thread came before it ended (dropped, say); one that fails before was
 * refused or never reached the jitter. 0 for a trace file. Call after
 * sluice_session__run() returned. Any thread.
 */
int sluice_session__welcomed(const struct sluice_session *s);

/**
 * How many pcs the process's filter answered SLUICE_ONCE for had been
 * recorded already, for consumers attached then, when this session was
 * taken in (at least that many: sluice/ctl.h, WELCOME's `once_before`).
 * Their next hits are not recorded, so this session never sees them; 0
 * when no consumer was attached before it (then every pc is recorded at
 * its next hit), and for a trace file. Call after sluice_session__run()
 * returned (0 until its WELCOME was read). Any thread.
 */
uint32_t sluice_session__once_before(const struct sluice_session *s);

/** A traced process, as it describes itself (control message INFO, sluice/ctl.h). */
struct sluice_process_info {
    uint32_t pid;       /**< its pid (QEMU's, which is the guest's) */
    char arch[16];      /**< QEMU target name, NUL-terminated */
    char comm[16];      /**< guest program name, NUL-terminated */
    uint32_t threads;   /**< live guest threads */
    uint32_t consumers; /**< consumers attached */
    uint32_t lossless;  /**< of which lossless */
    uint32_t waiting;   /**< consumers it still waits for before it starts (--wait-attach) */
    uint64_t lost;      /**< events its lossy consumers lost so far, in its live rings */
    /**
     * sluice_process__list(): 0 if it answered; else only pid is set and
     * this says why: -ETIMEDOUT, no answer within 2 s (stopped, or too
     * busy); -EPERM, its socket's directory is not private or another
     * user listens there; -EMFILE/-ENFILE, no descriptor to ask it with;
     * -EACCES/-EPROTO, refused or a wrong answer; another -errno of
     * socket/connect/send/recv.
     */
    int32_t error;
};

/**
 * Ask traced process @p pid what it is, without attaching. Any thread;
 * waits 2 s at most for the answer.
 * @return 0; -ENOENT (no socket), -ECONNREFUSED (stale socket), -ETIMEDOUT
 *         (no answer), -EACCES (refused: another uid), -EPROTO (a wrong
 *         answer), or another -errno of connect/send/recv.
 */
int sluice_process__query(uint32_t pid, struct sluice_process_info *info);

/**
 * This user's traced processes, sorted by pid: up to @p max into @p out.
 * One that cannot be described is listed with its error (see
 * sluice_process_info.error); stale sockets (their process is gone) are
 * skipped, never removed (the jitter replaces a stale one when it binds).
 * Asks every process at once (64 at a time) and gives them 2 s. Any thread.
 * @return how many were found (may exceed @p max).
 */
int sluice_process__list(struct sluice_process_info *out, size_t max);

/**
 * Run until the trace ends (every guest process exited or exec'd and every
 * ring is drained). Blocks the calling thread; starts the worker threads and
 * the ordering thread. Not thread-safe: call once per session.
 * A session of a trace file reads it to its end instead.
 * @return 0; -EPROTO if the jitter refused or spoke another protocol version,
 *         or a ring was malformed (that ring is then skipped to its end, the
 *         others are still drained), or a trace file is damaged or cut short;
 *         -errno from a failed socket, mmap or thread call, or from writing
 *         or reading a trace file; -ECANCELED if the jitter ended a guest
 *         process because it could not trace one of its threads (no ring:
 *         out of memory, say; the other processes' trace is whole), or if
 *         sluice_session__detach() came before the traced process took this
 *         session in (nothing traced; sluice_session__welcomed() is 0);
 *         -EINVAL if called twice. sluice_session__error() says more.
 */
int sluice_session__run(struct sluice_session *s);

/**
 * Whether the recording (sluice_consumer_opts.record) stopped before the
 * session ended: a failed write (a full disk, `ulimit -f`) keeps only the
 * whole frames before it. Call after sluice_session__run() returned.
 * @return 0 if the file holds the whole session (or nothing was recorded),
 *         else the negative errno that stopped it (its one-line message is
 *         among sluice_session__errors()).
 */
int sluice_session__record_error(const struct sluice_session *s);

/**
 * Threads whose producer ended without closing its ring (its process was
 * killed, or a sibling thread's execve ended it): their records written
 * after the last publish were recovered from the ring (see record.h).
 * Call after sluice_session__run() returned.
 * @param[out] bytes if not NULL, the bytes of records so recovered
 * @return the number of such threads (0 when every thread exited).
 */
size_t sluice_session__salvaged(const struct sluice_session *s, uint64_t *bytes);

/**
 * Events decoded so far, all threads together (exec events, as counted in
 * sluice_counts.insns, plus MEM and LOST records), for progress reports.
 * Thread-safe: may be called from any thread while sluice_session__run()
 * runs; the value only grows.
 */
uint64_t sluice_session__events(const struct sluice_session *s);

/** Live figures of a running session, for a status line (sluice_session__progress()). */
struct sluice_progress {
    uint64_t events;  /**< as sluice_session__events() */
    uint64_t lost;    /**< events lost so far, as LOST records delivered said (lossy sessions) */
    uint32_t threads; /**< guest threads whose rings are being read now */
};

/**
 * Live figures into @p out. Thread-safe: may be called from any thread while
 * sluice_session__run() runs; each field is read on its own (they may be a
 * moment apart), events and lost only grow.
 */
void sluice_session__progress(const struct sluice_session *s, struct sluice_progress *out);

/**
 * Counters after sluice_session__run(): totals into @p total, and up to
 * @p max per-thread entries into @p threads / @p infos (may be NULL), in
 * the order the session learnt of the threads' rings.
 * @return the number of guest thread rings seen (may exceed @p max).
 */
size_t sluice_session__counts(const struct sluice_session *s, struct sluice_counts *total,
                              struct sluice_counts *threads, struct sluice_thread_info *infos,
                              size_t max);

/** First error message of the session, or "" (owned by the session). */
const char *sluice_session__error(const struct sluice_session *s);

/**
 * Every distinct error message of the session in the order they came, the
 * first (sluice_session__error()) included: a damaged trace file, say, may
 * stop several threads, each for its own reason. The first 16 are kept.
 * Call after sluice_session__run() returned.
 * @param[out] msgs up to @p max messages (owned by the session)
 * @return how many distinct errors came (may exceed @p max and 16; 0: none).
 */
size_t sluice_session__errors(const struct sluice_session *s, const char **msgs, size_t max);

/** Free the session (after run returned, or instead of running it). NULL is ignored. */
void sluice_session__free(struct sluice_session *s);

#ifdef __cplusplus
}
#endif

#endif /* SLUICE_CONSUMER_H */
