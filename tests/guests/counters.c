/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Guest: per-thread counters in a file-backed MAP_SHARED page, the ground
 * truth of the trust e2e test (tests/e2e/trust.py).
 *
 *   counters MODE FILE [N]
 *
 * FILE is created (or truncated) and mapped MAP_SHARED. Its first 64 bytes are
 * a header (struct header); then one counter per thread or child, STRIDE bytes
 * apart. Every increment is one call of bump(), whose `*c = *c + 1` is one
 * store instruction: the final counter values, read from the file after the
 * run, are the number of stores the guest really made to each counter, which
 * the test compares with the stores sluice traced to its address. Counters
 * are unsigned long: a 64-bit counter on mipsel would take two stores.
 *
 * Modes:
 *   exec              6 threads bump forever; a 7th sleeps 100 ms, then execs /bin/true
 *   selfkill N        bump N times, then kill(getpid(), SIGKILL)
 *   selfkill-threads  4 threads bump forever; main sleeps 100 ms, then kill(getpid(), SIGKILL)
 *   exit              6 threads bump forever; main sleeps 100 ms, then exit(0) (exit_group)
 *   abort             the same, then abort(): the process ends by a fatal signal
 *   wait              4 threads bump forever; main prints "ready" and sleeps forever
 *   idle N            4 threads bump N times, then spin outside bump() with no system
 *                     call; once all 4 spin, main prints "ready" and sleeps forever
 *   closefds N        close 3..1023 one by one, close_range(3, ~0U, 0), dup2(0, fd) and
 *                     close for a few fds in 900..1023, printing the results; then 4
 *                     threads and 2 forked children bump N times each
 *   forkthreads N     3 threads bump N times each and block in read(); main forks: the
 *                     child bumps N times, starts a thread that bumps N times, joins it
 *                     and exits 0; the parent prints the child's status, ends its threads
 *                     and exits 0 if the child did (QEMU with plugins aborted that child)
 *   forkrace N        a thread starts and joins threads one after another (each bumps
 *                     counter 0 once) while main forks N children one after another: each
 *                     child starts a thread that bumps counter 1 once, joins it and exits
 *                     0; a child not done in 10 s is killed. Prints the children and how
 *                     many hung, exits 1 if any did (a fork while another thread held
 *                     QEMU's clone_lock left it taken in the child: patch 0042)
 *   forkstorm N       two threads start and join threads one after another (each its own
 *                     counter, 0 and 1) while four threads each fork N children one after
 *                     another: each child starts a thread that bumps counter 2 + the
 *                     forker's index once, joins it and exits 0; a child not done in 10 s
 *                     is killed. Prints the children and how many hung, exits 1 if any
 *                     did (a fork while another thread held a lock of glib's slice
 *                     allocator left it taken in the child: patch 0043)
 *   spawnexit N       N forked children one after another: in each, a thread starts 64
 *                     threads that spin forever while the main thread sleeps 1 ms and calls
 *                     _exit(0), so threads are still starting; the parent prints how many
 *                     exited 0
 *   fullas N          mmap PROT_NONE until the address space is used up but a 48 MiB hole,
 *                     then fork: the child bumps N times, the parent N times, waits and
 *                     prints its status
 *   fdfull            open /dev/null until it fails, print how many and why (flushed),
 *                     then bump forever: a guest that holds every descriptor it may
 *   fdfullexec        the same, but an execve("/nonexistent") that fails comes before
 *                     the print (the jitter's socket file, taken away before an execve,
 *                     must come back without a descriptor the guest left it)
 *   execrace N        N forked children one after another: in each, a thread calls
 *                     execve("/nonexistent") without end while the main thread execs
 *                     /bin/true after 20-26 ms (x86_64: a host program); prints how many
 *                     exited 0 (no socket file of theirs may be left)
 *   pidnest S         unshare(CLONE_NEWPID) and fork, twice: a child and a grandchild,
 *                     each pid 1 of a namespace of its own, nested; the grandchild prints
 *                     "ready" (flushed), all three sleep S seconds, then end
 *   pidns N           three children one after another each unshare(CLONE_NEWPID) and fork
 *                     a grandchild (pid 1 of its own namespace) that bumps counter i N
 *                     times; prints each child's status (every grandchild had pid 1: the
 *                     jitter named its rings and socket so, and sluice refused all but one)
 *   chroot N          chroot() into FILE.jail (made empty), then a forked child bumps
 *                     counter 1 N times while the parent bumps counter 0 N times; the
 *                     parent prints the child's status (a chroot without /proc once left
 *                     QEMU's jitter unable to make the child's ring arena)
 *   lowerfsize N      setrlimit(RLIMIT_FSIZE) to 1 MiB, then 4 threads bump N times each;
 *                     then a forked child bumps N times; the parent prints the child's
 *                     status and exits 0 whatever it is (a parent that does not look)
 *   churn N [S [K [P]]]  N threads one after another (P at a time, default 1, at
 *                     most 16), each bumps its counter K times (default 100); then it
 *                     prints (flushed) and sleeps S seconds (default 0)
 *   threads N         N threads live at once (barrier), each bumps 100 times, barrier,
 *                     exit; main prints the descriptor open("/dev/null") returns
 *   nproc N [K [gate]]  up to N threads at once, made until pthread_create fails
 *                     (RLIMIT_NPROC); each bumps its counter K times (default 100), with
 *                     `gate` only once all are made; joins them, prints how many were made
 *   environ           print argv[0], /proc/self/environ and environ (sorted), then the
 *                     signals ignored and blocked at start
 *   pagecross N       (x86_64, riscv64) call pagecross_fn N times: its first instruction
 *                     crosses a 4 KiB page boundary (see below)
 *   retry N           (x86_64, aarch64) instructions QEMU abandons and runs again: two
 *                     threads call retry_atomic N times each (an atomic add to a misaligned
 *                     word: QEMU leaves the TB with EXCP_ATOMIC and runs it alone); then
 *                     (x86_64) main calls retry_smc, retry_rmw and retry_rep N times each
 *                     (a store, an add to memory and a 16-byte rep movsb into their own
 *                     code page: QEMU leaves the TB it modified and runs the instruction
 *                     again alone); retry_rmw's word must end at N.
 *                     Prints the calls made and the word's final value.
 *   helpers N         (x86_64, aarch64) N times: fill buf_in with 0xaa, helper_in(buf_in),
 *                     then helper_out(buf_out), each one instruction whose stores QEMU
 *                     makes in a helper (fxsave; dc zva). Prints N, both buffers'
 *                     addresses, the span the instruction may write and a bitmap of the
 *                     bytes of buf_in it ever changed.
 *   cas N             (x86_64, aarch64) tries of one thread that fail (a plain store
 *                     changes the word between load and compare-and-swap), then two
 *                     threads add 1 to one word N times each with a compare-and-swap loop
 *                     (cas_inc); prints the adds, the failed tries both threads counted
 *                     and the word's final value
 *   sc N              (aarch64, riscv64, mipsel) the same with load-linked and
 *                     store-conditional (sc_inc)
 *   firstfault        (riscv64, aarch64) first-fault and no-fault vector loads in the middle
 *                     of a buffer; prints the elements each loaded (all: nothing can fault)
 *   remap N           maps the program's page holding leaf() again 1 GiB above it and calls
 *                     leaf() there N times, then N times in place; prints both runs
 *   codefiles N       calls a copy of leaf() N times from a memfd page, then N times from a
 *                     page of FILE.gone, deleted once mapped; prints each run of calls
 *   rmw               atomic read-modify-writes (add, sub, or, and, xor, exchange, signed
 *                     max on aarch64 and riscv64) of an unsigned long and an unsigned int
 *                     beside an idle thread; prints both words' addresses, then each op's
 *                     value before and after as two plain loads saw them
 *   movbe             (x86_64) movbe stores and loads of 2, 4 and 8 bytes; prints the word's
 *                     address and what plain loads saw after each store and the register
 *                     after each load
 *   mopsfault         (aarch64) a MOPS copy (cpyf*) of 300 bytes to 96 bytes before a
 *                     PROT_NONE page; the SIGSEGV handler prints how many bytes arrived
 *                     and exits 3
 *   maps N            mapping changes around code that runs: FILE.code gets 4 pages, each
 *                     starting with a copy of leaf(); the guest maps pages 1-2 of it, calls
 *                     the copy N times (and a second thread N times), mprotects, unmaps,
 *                     maps page 3 at the same address, calls it, mremaps it elsewhere,
 *                     calls it, attaches a System V segment over it (SHM_REMAP; not on
 *                     mipsel, whose SHMLBA the address misses), copies leaf() there and
 *                     calls it, detaches it, copies leaf() to anonymous
 *                     memory and calls it; it prints
 *                     each change ("mmap START LEN PROT OFF", OFF -1 if anonymous;
 *                     "munmap START LEN"; "mprotect START LEN PROT"; "mremap START LEN
 *                     OLD_START OLD_LEN") and each run of calls ("call ADDR N OFF"), all in
 *                     hex but PROT, the ground truth of the module map (trust.py maps)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAGIC 0x535245544e554f43ull /* "COUNTERS" in little-endian bytes */
#define STRIDE 64                   /* one cache line per counter */
#define HEADER 64

/* The file's first 64 bytes; every field is a little-endian uint64. */
struct header {
    uint64_t magic;
    uint64_t addr;   /* guest virtual address of counter 0 */
    uint64_t count;  /* number of counters */
    uint64_t pid;    /* the guest's pid (under QEMU linux-user, QEMU's pid) */
    uint64_t stride; /* bytes from one counter to the next */
    uint64_t width;  /* bytes of one counter (the size of bump's store) */
    uint64_t reserved[2];
};

typedef volatile unsigned long counter_t;

static char *area;
static pthread_barrier_t barrier;
static unsigned long rounds;

/* One store instruction per call; the test traces only this function. */
__attribute__((noipa)) void bump(counter_t *c)
{
    *c = *c + 1;
}

static counter_t *counter(unsigned i)
{
    return (counter_t *)(area + HEADER + (size_t)i * STRIDE);
}

static void die(const char *what)
{
    printf("%s: %s\n", what, strerror(errno));
    fflush(stdout);
    exit(1);
}

/* Creates FILE with n counters, maps it and fills in the header; closes its descriptor. */
static void map_counters(const char *path, unsigned n)
{
    size_t size = HEADER + (size_t)n * STRIDE;
    struct header *h;
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

    if (fd < 0) {
        die("open counters file");
    }
    if (ftruncate(fd, (off_t)size) != 0) {
        die("ftruncate");
    }
    area = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (area == MAP_FAILED) {
        die("mmap");
    }
    close(fd);
    h = (struct header *)area;
    h->addr = (uint64_t)(uintptr_t)counter(0);
    h->count = n;
    h->pid = (uint64_t)getpid();
    h->stride = STRIDE;
    h->width = sizeof(unsigned long);
    h->magic = MAGIC;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static void *bump_forever(void *arg)
{
    counter_t *c = arg;

    for (;;) {
        bump(c);
    }
    return NULL;
}

static void *bump_rounds(void *arg)
{
    counter_t *c = arg;

    for (unsigned long i = 0; i < rounds; i++) {
        bump(c);
    }
    return NULL;
}

static void start(pthread_t *t, void *(*fn)(void *), void *arg)
{
    int rc = pthread_create(t, NULL, fn, arg);

    if (rc != 0) {
        errno = rc;
        die("pthread_create");
    }
}

/* fork(), stdout flushed first (so the child's exit does not write the parent's buffer
 * again); dies if it fails. */
static pid_t fork_flushed(void)
{
    pid_t child;

    fflush(stdout);
    child = fork();
    if (child < 0) {
        die("fork");
    }
    return child;
}

/* A forked child that bumps counter @p i and exits 0; its pid. */
static pid_t fork_bumping(unsigned i)
{
    pid_t child = fork_flushed();

    if (child == 0) {
        bump_rounds((void *)counter(i));
        _exit(0);
    }
    return child;
}

/* Wait for @p child and print how it ended; its wait status. */
static int wait_and_say(pid_t child)
{
    int status;

    if (waitpid(child, &status, 0) != child) {
        die("waitpid");
    }
    printf("child: %s %d\n", WIFSIGNALED(status) ? "signal" : "exit",
           WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    return status;
}

static void start_forever(unsigned n)
{
    pthread_t t;

    for (unsigned i = 0; i < n; i++) {
        start(&t, bump_forever, (void *)counter(i));
    }
}

static void *exec_true(void *arg)
{
    char *argv[] = {"/bin/true", NULL};

    (void)arg;
    sleep_ms(100);
    execv("/bin/true", argv);
    die("execv /bin/true");
    return NULL;
}

static int mode_exec(void)
{
    pthread_t t;

    start_forever(6);
    start(&t, exec_true, NULL);
    pthread_join(t, NULL);
    return 1;
}

static int mode_selfkill(void)
{
    for (unsigned long i = 0; i < rounds; i++) {
        bump(counter(0));
    }
    kill(getpid(), SIGKILL);
    return 1;
}

static int mode_selfkill_threads(void)
{
    start_forever(4);
    sleep_ms(100);
    kill(getpid(), SIGKILL);
    return 1;
}

/* exit() or abort() while the other threads are in translated code, not in a syscall. */
static int mode_exit(int fatal)
{
    start_forever(6);
    sleep_ms(100);
    if (fatal) {
        abort();
    }
    exit(0);
}

static int mode_wait(void)
{
    start_forever(4);
    if (write(1, "ready\n", 6) != 6) {
        return 1;
    }
    for (;;) {
        pause();
    }
}

static int mode_fullas(void)
{
    size_t size = ((size_t)-1 >> 1) + 1; /* half the address space, then halves */
    const size_t hole = 48 << 20;
    void *kept = mmap(NULL, hole, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    pid_t child;

    while (size >= 4096) {
        if (mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0) ==
            MAP_FAILED) {
            size >>= 1;
        }
    }
    /* One hole left: room for QEMU's own allocations, not for two 80 MiB block tables. */
    if (kept == MAP_FAILED || munmap(kept, hole) != 0) {
        die("mmap");
    }
    child = fork_bumping(1);
    bump_rounds((void *)counter(0));
    wait_and_say(child);
    return 0;
}

static int mode_fdfull(int exec_first)
{
    unsigned n = 0;
    int open_err, exec_err = 0;

    while (open("/dev/null", O_RDONLY) >= 0) {
        n++;
    }
    open_err = errno;
    if (exec_first) {
        char *argv[] = {"nonexistent", NULL};

        execve("/nonexistent", argv, environ);
        exec_err = errno;
    }
    printf("full after %u (%s)%s%s\n", n, strerror(open_err), exec_first ? ", execve: " : "",
           exec_first ? strerror(exec_err) : "");
    fflush(stdout);
    for (;;) {
        bump(counter(0));
    }
    return 0;
}

static unsigned idle_threads; /* threads done bumping (idle mode) */

static void *bump_then_spin(void *arg)
{
    volatile unsigned long spins = 0;

    bump_rounds(arg);
    __atomic_fetch_add(&idle_threads, 1, __ATOMIC_RELEASE);
    for (;;) {
        spins++;
    }
    return NULL;
}

static int mode_idle(void)
{
    pthread_t t;

    for (unsigned i = 0; i < 4; i++) {
        start(&t, bump_then_spin, (void *)counter(i));
    }
    while (__atomic_load_n(&idle_threads, __ATOMIC_ACQUIRE) < 4) {
        sleep_ms(10);
    }
    if (write(1, "ready\n", 6) != 6) {
        return 1;
    }
    for (;;) {
        pause();
    }
}

static int forkthreads_pipe[2];

static void *bump_then_block(void *arg)
{
    char byte;

    bump_rounds(arg);
    pthread_barrier_wait(&barrier);
    while (read(forkthreads_pipe[0], &byte, 1) < 0 && errno == EINTR) {
    }
    return NULL;
}

static int mode_forkthreads(void)
{
    pthread_t t[3], ct;
    int status;
    pid_t child;

    if (pipe(forkthreads_pipe) != 0) {
        die("pipe");
    }
    pthread_barrier_init(&barrier, NULL, 4);
    for (unsigned i = 0; i < 3; i++) {
        start(&t[i], bump_then_block, (void *)counter(i));
    }
    pthread_barrier_wait(&barrier); /* all three done bumping, about to block */
    child = fork();
    if (child < 0) {
        die("fork");
    }
    if (child == 0) {
        bump_rounds((void *)counter(3));
        start(&ct, bump_rounds, (void *)counter(4));
        pthread_join(ct, NULL);
        _exit(0);
    }
    status = wait_and_say(child);
    close(forkthreads_pipe[1]); /* the threads' read() returns 0 */
    for (unsigned i = 0; i < 3; i++) {
        pthread_join(t[i], NULL);
    }
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

static volatile int forkrace_stop;

static void *bump_once(void *arg)
{
    bump(arg);
    return NULL;
}

/* Start and join threads one after another until forkrace_stop; each bumps counter
 * @p arg once. */
static void *spawn_threads(void *arg)
{
    pthread_t t;

    while (!forkrace_stop) {
        start(&t, bump_once, arg);
        pthread_join(t, NULL);
    }
    return NULL;
}

/* Whether @p child ended within 10 s (else it is killed and reaped). */
static int reaped_in_time(pid_t child)
{
    int status;

    for (int ms = 0; ms < 10000; ms += 5) {
        pid_t w = waitpid(child, &status, WNOHANG);

        if (w == child) {
            return WIFEXITED(status) && WEXITSTATUS(status) == 0;
        }
        if (w < 0) {
            die("waitpid");
        }
        sleep_ms(5);
    }
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
    return 0;
}

static int mode_forkrace(void)
{
    pthread_t spawner, t;
    unsigned long hung = 0;

    start(&spawner, spawn_threads, (void *)counter(0));
    for (unsigned long i = 0; i < rounds; i++) {
        pid_t child = fork_flushed();

        if (child == 0) {
            start(&t, bump_once, (void *)counter(1));
            pthread_join(t, NULL);
            _exit(0);
        }
        hung += !reaped_in_time(child);
    }
    forkrace_stop = 1;
    pthread_join(spawner, NULL);
    printf("forkrace: %lu children, %lu hung\n", rounds, hung);
    return hung ? 1 : 0;
}

/* One forking thread of forkstorm: @p arg is its index. */
static void *fork_children(void *arg)
{
    unsigned i = (unsigned)(uintptr_t)arg;
    unsigned long hung = 0;
    pthread_t t;

    for (unsigned long k = 0; k < rounds; k++) {
        pid_t child = fork_flushed();

        if (child == 0) {
            start(&t, bump_once, (void *)counter(2 + i));
            pthread_join(t, NULL);
            _exit(0);
        }
        hung += !reaped_in_time(child);
    }
    return (void *)(uintptr_t)hung;
}

static int mode_forkstorm(void)
{
    pthread_t spawner[2], forker[4];
    unsigned long hung = 0;

    for (unsigned i = 0; i < 2; i++) {
        start(&spawner[i], spawn_threads, (void *)counter(i));
    }
    for (unsigned i = 0; i < 4; i++) {
        start(&forker[i], fork_children, (void *)(uintptr_t)i);
    }
    for (unsigned i = 0; i < 4; i++) {
        void *h;

        pthread_join(forker[i], &h);
        hung += (uintptr_t)h;
    }
    forkrace_stop = 1;
    for (unsigned i = 0; i < 2; i++) {
        pthread_join(spawner[i], NULL);
    }
    printf("forkstorm: %lu children, %lu hung\n", 4 * rounds, hung);
    return hung ? 1 : 0;
}

/* execrace: fail execve() without end (the jitter takes the socket file away before each). */
static void *exec_failing(void *arg)
{
    char *argv[] = {"nonexistent", NULL};

    (void)arg;
    for (;;) {
        execve("/nonexistent", argv, environ);
    }
    return NULL;
}

static int mode_execrace(void)
{
    unsigned long ok = 0;

    for (unsigned long i = 0; i < rounds; i++) {
        pid_t child = fork_flushed();

        if (child == 0) {
            char *argv[] = {"true", NULL};
            pthread_t t;

            start(&t, exec_failing, NULL);
            sleep_ms(20 + i % 7);
            execve("/bin/true", argv, environ);
            _exit(127);
        }
        ok += reaped_in_time(child);
    }
    printf("execrace: %lu of %lu children exited 0\n", ok, rounds);
    return ok == rounds ? 0 : 1;
}

static int mode_pidnest(unsigned seconds)
{
    for (int depth = 0; depth < 2; depth++) {
        pid_t child;

        if (unshare(CLONE_NEWPID) != 0) {
            die("unshare(CLONE_NEWPID)");
        }
        child = fork_flushed();
        if (child > 0) {
            int status;

            sleep(seconds);
            waitpid(child, &status, 0);
            return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
        }
    }
    printf("ready\n");
    fflush(stdout);
    sleep(seconds);
    return 0;
}

static void *spin_forever(void *arg)
{
    (void)arg;
    for (;;) {
        __asm__ volatile("");
    }
    return NULL;
}

static void *start_spinners(void *arg)
{
    pthread_t t;

    (void)arg;
    for (unsigned k = 0; k < 64; k++) {
        start(&t, spin_forever, NULL);
    }
    for (;;) {
        pause();
    }
    return NULL;
}

static int mode_spawnexit(void)
{
    unsigned long ok = 0;

    for (unsigned long i = 0; i < rounds; i++) {
        pid_t child = fork_flushed();
        int status;

        if (child == 0) {
            pthread_t t;

            start(&t, start_spinners, NULL);
            sleep_ms(1);
            _exit(0); /* while threads start: some are not running yet */
        }
        if (waitpid(child, &status, 0) != child) {
            die("waitpid");
        }
        ok += WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    printf("spawnexit: %lu of %lu children exited 0\n", ok, rounds);
    return 0;
}

static int mode_lowerfsize(void)
{
    struct rlimit lim = {1 << 20, 1 << 20};
    pthread_t t[4];

    if (setrlimit(RLIMIT_FSIZE, &lim) != 0) {
        die("setrlimit");
    }
    for (unsigned i = 0; i < 4; i++) {
        start(&t[i], bump_rounds, (void *)counter(i));
    }
    for (unsigned i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
    }
    wait_and_say(fork_bumping(4));
    return 0;
}

/* A child that moves its children into a new PID namespace and forks one: pid 1 there. */
static pid_t fork_into_pidns(unsigned i)
{
    pid_t child = fork_flushed();

    if (child == 0) {
        int status;

        if (unshare(CLONE_NEWPID) != 0) {
            die("unshare(CLONE_NEWPID)");
        }
        status = wait_and_say(fork_bumping(i));
        fflush(stdout);
        _exit(WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1);
    }
    return child;
}

static int mode_pidns(void)
{
    int bad = 0;

    for (unsigned i = 0; i < 3; i++) {
        int status = wait_and_say(fork_into_pidns(i));

        bad |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    }
    return bad;
}

static int mode_chroot(const char *file)
{
    char jail[4096];
    pid_t child;

    snprintf(jail, sizeof(jail), "%s.jail", file);
    if ((mkdir(jail, 0700) != 0 && errno != EEXIST) || chroot(jail) != 0 || chdir("/") != 0) {
        die("chroot");
    }
    int status;

    child = fork_bumping(1);
    bump_rounds((void *)counter(0));
    status = wait_and_say(child);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

static int mode_closefds(void)
{
    static const int high[] = {900, 901, 960, 1000, 1023};
    pthread_t t[4];
    pid_t child[2];
    int first = 1;
    long rc;

    printf("closed:");
    for (int fd = 3; fd < 1024; fd++) {
        if (close(fd) == 0) {
            printf(" %d", fd);
            first = 0;
        }
    }
    printf("%s\n", first ? " none" : "");
    errno = 0;
    rc = syscall(SYS_close_range, 3u, ~0u, 0u);
    printf("close_range(3, ~0U, 0) = %ld errno %d\n", rc, rc < 0 ? errno : 0);
    for (unsigned i = 0; i < sizeof(high) / sizeof(high[0]); i++) {
        int d = dup2(0, high[i]);
        int e = d < 0 ? errno : 0;
        int c = close(high[i]);

        printf("dup2(0, %d) = %d errno %d; close = %d\n", high[i], d, e, c);
    }
    fflush(stdout);

    for (unsigned i = 0; i < 4; i++) {
        start(&t[i], bump_rounds, (void *)counter(i));
    }
    for (unsigned i = 0; i < 2; i++) {
        child[i] = fork();
        if (child[i] < 0) {
            die("fork");
        }
        if (child[i] == 0) {
            bump_rounds((void *)counter(4 + i));
            _exit(0);
        }
    }
    for (unsigned i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
    }
    for (unsigned i = 0; i < 2; i++) {
        int status;

        if (waitpid(child[i], &status, 0) != child[i] || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0) {
            printf("child %u failed\n", i);
            return 1;
        }
    }
    printf("done\n");
    return 0;
}

static void *barrier_bump(void *arg)
{
    pthread_barrier_wait(&barrier);
    for (unsigned i = 0; i < 100; i++) {
        bump(arg);
    }
    pthread_barrier_wait(&barrier);
    return NULL;
}

/* How many times each churn thread bumps its counter (churn's K). */
static unsigned long churn_bumps = 100;
/* How many churn threads run at once (churn's P, 1 to 16). */
static unsigned churn_width = 1;

static void *bump_churn(void *arg)
{
    for (unsigned long i = 0; i < churn_bumps; i++) {
        bump(arg);
    }
    return NULL;
}

/* N threads, P at a time (churn_width), each bumping its own counter churn_bumps times;
 * then hold. */
static int mode_churn(unsigned n, unsigned hold)
{
    for (unsigned i = 0; i < n; i += churn_width) {
        pthread_t t[16];
        unsigned k, w = n - i < churn_width ? n - i : churn_width;

        for (k = 0; k < w; k++) {
            int rc = pthread_create(&t[k], NULL, bump_churn, (void *)counter(i + k));

            if (rc != 0) {
                printf("pthread_create %u of %u: %s\n", i + k, n, strerror(rc));
                fflush(stdout);
                _exit(1);
            }
        }
        for (k = 0; k < w; k++) {
            pthread_join(t[k], NULL);
        }
    }
    if (churn_width == 1) {
        printf("%u threads, one after another\n", n);
    } else {
        printf("%u threads, %u at a time\n", n, churn_width);
    }
    fflush(stdout);
    sleep(hold); /* (a test looks at the process meanwhile) */
    return 0;
}

static int mode_threads(unsigned n)
{
    pthread_t *t = calloc(n, sizeof(*t));
    pthread_attr_t attr;

    if (!t) {
        die("calloc");
    }
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    pthread_barrier_init(&barrier, NULL, n);
    for (unsigned i = 0; i < n; i++) {
        int rc = pthread_create(&t[i], &attr, barrier_bump, (void *)counter(i));

        if (rc != 0) {
            printf("pthread_create %u of %u: %s\n", i, n, strerror(rc));
            fflush(stdout);
            _exit(1);
        }
    }
    for (unsigned i = 0; i < n; i++) {
        pthread_join(t[i], NULL);
    }
    printf("%u threads; open(\"/dev/null\") = %d\n", n, open("/dev/null", O_RDONLY));
    return 0;
}

/* nproc with a gate: set once every thread is made; they bump only then, all alive at once. */
static volatile int nproc_go = 1;

static void *bump_when_all_made(void *arg)
{
    while (!nproc_go) {
        usleep(1000);
    }
    return bump_churn(arg);
}

/*
 * nproc N: up to N threads at once, made until pthread_create fails (EAGAIN
 * under RLIMIT_NPROC, which sluice's own threads count against when they
 * run as the guest's user), each bumping its counter churn_bumps times (with
 * @p gate, once all are made); prints how many were made.
 */
static int mode_nproc(unsigned n, int gate)
{
    pthread_t *t = calloc(n, sizeof(*t));
    pthread_attr_t attr;
    unsigned made = 0;
    int rc = 0;

    if (!t) {
        die("calloc");
    }
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    nproc_go = !gate;
    for (; made < n &&
           (rc = pthread_create(&t[made], &attr, bump_when_all_made, (void *)counter(made))) == 0;
         made++) {
    }
    nproc_go = 1;
    for (unsigned i = 0; i < made; i++) {
        pthread_join(t[i], NULL);
    }
    printf("%u threads made (%s)\n", made, rc ? strerror(rc) : "all");
    return 0;
}

static int cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* One variable per line: backslashes and non-printable bytes (a newline in a value) escaped. */
static void print_var(const char *s)
{
    printf("  ");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;

        if (c == '\\' || c < 0x20 || c >= 0x7f) {
            printf("\\x%02x", c);
        } else {
            putchar(c);
        }
    }
    putchar('\n');
}

static int mode_environ(const char *argv0)
{
    extern char **environ;
    static char buf[1 << 16];
    size_t n = 0, len = 0;
    ssize_t r;
    char **v;
    int fd = open("/proc/self/environ", O_RDONLY);

    if (fd < 0) {
        die("open /proc/self/environ");
    }
    while ((r = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0) {
        len += (size_t)r;
    }
    close(fd);
    printf("argv[0]: %s\n", argv0);
    printf("/proc/self/environ:\n");
    for (size_t i = 0; i < len; i += strlen(buf + i) + 1) {
        print_var(buf + i);
    }
    while (environ[n]) {
        n++;
    }
    v = calloc(n + 1, sizeof(*v));
    if (!v) {
        die("calloc");
    }
    memcpy(v, environ, n * sizeof(*v));
    qsort(v, n, sizeof(*v), cmp);
    printf("environ:\n");
    for (size_t i = 0; i < n; i++) {
        print_var(v[i]);
    }
    /* Dispositions and the mask come from whoever started us, through exec:
     * a tracer must not leave its own (sluice ignores SIGPIPE). */
    printf("ignored signals:");
    for (int sig = 1; sig < 32; sig++) {
        struct sigaction sa;

        if (sigaction(sig, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN) {
            printf(" %d", sig);
        }
    }
    printf("\nblocked signals:");
    {
        sigset_t mask;

        sigprocmask(SIG_BLOCK, NULL, &mask);
        for (int sig = 1; sig < 32; sig++) {
            if (sigismember(&mask, sig) == 1) {
                printf(" %d", sig);
            }
        }
    }
    printf("\n");
    return 0;
}

/*
 * pagecross_fn: its first instruction starts 3 bytes (x86_64: a 10-byte
 * movabs) or 2 bytes (riscv64: a 4-byte lui, between compressed ones) before
 * a 4 KiB page boundary. The filler before it is never executed.
 */
#if defined(__x86_64__)
#define HAVE_PAGECROSS 1
__asm__(".pushsection .text.pagecross, \"ax\", @progbits\n"
        ".balign 4096\n"
        ".skip 4093, 0xcc\n"
        ".globl pagecross_fn\n"
        ".type pagecross_fn, @function\n"
        "pagecross_fn:\n"
        "movabs $0x1122334455667788, %rax\n"
        "ret\n"
        ".size pagecross_fn, . - pagecross_fn\n"
        ".popsection\n");
#elif defined(__riscv)
#define HAVE_PAGECROSS 1
__asm__(".pushsection .text.pagecross, \"ax\", @progbits\n"
        ".balign 4096\n"
        ".skip 4094, 0\n"
        ".globl pagecross_fn\n"
        ".type pagecross_fn, @function\n"
        "pagecross_fn:\n"
        ".option push\n"
        ".option norvc\n"
        "lui a0, 0x12345\n"
        ".option pop\n"
        "ret\n"
        ".size pagecross_fn, . - pagecross_fn\n"
        ".popsection\n");
#endif

#ifdef HAVE_PAGECROSS
unsigned long pagecross_fn(void);

static int mode_pagecross(void)
{
    unsigned long sum = 0;

    for (unsigned long i = 0; i < rounds; i++) {
        sum += pagecross_fn() & 1;
        __asm__ volatile("" ::: "memory");
    }
    printf("pagecross %lu calls at %p\n", rounds, (void *)pagecross_fn);
    return sum == 0 ? 0 : 1;
}
#endif

/*
 * retry_atomic(p): one atomic add of 1 to the 8-byte word at p, then return.
 * retry_smc(): one store of a byte to its own 4 KiB page (made writable),
 * then return; retry_rmw(): one add of 1 to a word in that page (a load,
 * then the store that QEMU gives up); retry_rep(src): 16 bytes from src
 * into that page with rep movsb. In a section of their own, so the test
 * traces them alone.
 */
#if defined(__x86_64__)
#define HAVE_RETRY 1
#define HAVE_RETRY_SMC 1
__asm__(".pushsection .text.retry, \"ax\", @progbits\n"
        ".balign 4096\n"
        ".globl retry_atomic\n"
        ".type retry_atomic, @function\n"
        "retry_atomic:\n"
        "lock addq $1, (%rdi)\n"
        "ret\n"
        ".size retry_atomic, . - retry_atomic\n"
        ".balign 4096\n"
        ".globl retry_smc\n"
        ".type retry_smc, @function\n"
        "retry_smc:\n"
        "movb $0x90, retry_smc_byte(%rip)\n"
        "ret\n"
        ".size retry_smc, . - retry_smc\n"
        ".globl retry_rmw\n"
        ".type retry_rmw, @function\n"
        "retry_rmw:\n"
        "addq $1, retry_rmw_word(%rip)\n"
        "ret\n"
        ".size retry_rmw, . - retry_rmw\n"
        ".globl retry_rep\n"
        ".type retry_rep, @function\n"
        "retry_rep:\n"
        "mov %rdi, %rsi\n"
        "lea retry_rep_area(%rip), %rdi\n"
        "mov $16, %ecx\n"
        "rep movsb\n"
        "ret\n"
        ".size retry_rep, . - retry_rep\n"
        "retry_smc_byte: .byte 0x90\n"
        ".balign 8\n"
        ".globl retry_rmw_word\n"
        "retry_rmw_word: .quad 0\n"
        "retry_rep_area: .skip 16\n"
        ".balign 4096\n"
        ".popsection\n");
#elif defined(__aarch64__)
#define HAVE_RETRY 1
__asm__(".pushsection .text.retry, \"ax\", @progbits\n"
        ".arch_extension lse\n"
        ".balign 4096\n"
        ".globl retry_atomic\n"
        ".type retry_atomic, @function\n"
        "retry_atomic:\n"
        "mov x1, #1\n"
        "ldadd x1, x1, [x0]\n"
        "ret\n"
        ".size retry_atomic, . - retry_atomic\n"
        ".popsection\n");
#endif

#ifdef HAVE_RETRY
void retry_atomic(volatile uint64_t *p);
void retry_smc(void);
void retry_rmw(void);
void retry_rep(const void *src);
extern volatile uint64_t retry_rmw_word;

static volatile uint64_t *retry_word;

static void *retry_thread(void *arg)
{
    (void)arg;
    for (unsigned long i = 0; i < rounds; i++) {
        retry_atomic(retry_word);
    }
    return NULL;
}

static int mode_retry(void)
{
    /* 4 bytes into a 16-byte aligned pair of words: misaligned, and within 16 bytes
     * (aarch64 with LSE2 takes it; QEMU still cannot do it atomically as one access). */
    static _Alignas(16) unsigned char buf[32];
    unsigned long smc = 0;
    pthread_t t;

    retry_word = (volatile uint64_t *)(buf + 4);
    /* The thread exists before the first call: QEMU then translates for parallel vCPUs. */
    if (pthread_create(&t, NULL, retry_thread, NULL) != 0) {
        return 1;
    }
    retry_thread(NULL);
    pthread_join(t, NULL);
#ifdef HAVE_RETRY_SMC
    uintptr_t page = (uintptr_t)retry_smc & ~(uintptr_t)4095;

    if (mprotect((void *)page, 4096, PROT_READ | PROT_WRITE | PROT_EXEC) != 0) {
        perror("mprotect");
        return 1;
    }
    static const char src[16] = "0123456789abcdef";

    for (; smc < rounds; smc++) {
        retry_smc();
        retry_rmw();
        retry_rep(src);
    }
    if (retry_rmw_word != rounds) {
        return 1;
    }
#endif
    printf("retry atomic %lu smc %lu word %llu\n", 2 * rounds, smc,
           (unsigned long long)*retry_word);
    return *retry_word == 2 * rounds ? 0 : 1;
}
#endif

/*
 * helper_in(p) and helper_out(p): one instruction that stores through a
 * QEMU helper, then return; a page apart, so a test traces helper_in alone.
 */
#if defined(__x86_64__)
#define HAVE_HELPERS 1
__asm__(".pushsection .text.helpers, \"ax\", @progbits\n"
        ".balign 4096\n"
        ".globl helper_in\n"
        ".type helper_in, @function\n"
        "helper_in:\n"
        "fxsave (%rdi)\n"
        "ret\n"
        ".size helper_in, . - helper_in\n"
        ".balign 4096\n"
        ".globl helper_out\n"
        ".type helper_out, @function\n"
        "helper_out:\n"
        "fxsave (%rdi)\n"
        "ret\n"
        ".size helper_out, . - helper_out\n"
        ".popsection\n");
#elif defined(__aarch64__)
#define HAVE_HELPERS 1
__asm__(".pushsection .text.helpers, \"ax\", @progbits\n"
        ".balign 4096\n"
        ".globl helper_in\n"
        ".type helper_in, @function\n"
        "helper_in:\n"
        "dc zva, x0\n"
        "ret\n"
        ".size helper_in, . - helper_in\n"
        ".balign 4096\n"
        ".globl helper_out\n"
        ".type helper_out, @function\n"
        "helper_out:\n"
        "dc zva, x0\n"
        "ret\n"
        ".size helper_out, . - helper_out\n"
        ".popsection\n");
#endif

#ifdef HAVE_HELPERS
void helper_in(void *p);
void helper_out(void *p);

/* Bytes helper_in's instruction may store at its pointer. */
static size_t helpers_span(void)
{
#if defined(__aarch64__)
    uint64_t dczid;

    __asm__ volatile("mrs %0, dczid_el0" : "=r"(dczid));
    return (size_t)4 << (dczid & 0xf); /* dc zva's block */
#else
    return 512; /* the fxsave area */
#endif
}

static int mode_helpers(void)
{
    static _Alignas(4096) unsigned char buf_in[4096], buf_out[4096];
    static unsigned char changed[4096 / 8];
    size_t span = helpers_span();

    for (unsigned long i = 0; i < rounds; i++) {
        memset(buf_in, 0xaa, span);
        helper_in(buf_in);
        for (size_t j = 0; j < span; j++) {
            if (buf_in[j] != 0xaa) {
                changed[j / 8] |= (unsigned char)(1u << (j % 8));
            }
        }
        helper_out(buf_out);
    }
    /* The bytes that ever changed, one bit each (byte j: bit j % 8 of byte j / 8). */
    printf("helpers %lu in %p out %p span %zu changed ", rounds, (void *)buf_in, (void *)buf_out,
           span);
    for (size_t j = 0; j < span / 8; j++) {
        printf("%02x", changed[j]);
    }
    printf("\n");
    return 0;
}
#endif

#if defined(__aarch64__)
#define HAVE_MOPSFAULT 1
static volatile unsigned char *mops_dst;

/* SIGSEGV from the copy: how many bytes reached the destination, then exit 3. */
static void mops_segv(int sig)
{
    char msg[64];
    int k = 0, len;

    (void)sig;
    while (k < 96 && mops_dst[k] == 0x11) {
        k++;
    }
    len = snprintf(msg, sizeof(msg), "mops copied %d then SIGSEGV\n", k);
    write(1, msg, (size_t)len);
    _exit(3);
}

/*
 * A MOPS copy (cpyfp/cpyfm/cpyfe) of 300 bytes to 96 bytes before a
 * PROT_NONE page: it faults there, and the guest's handler must run.
 */
static int mode_mopsfault(void)
{
    unsigned char *p = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    unsigned char *dst = p + 4000, *src = p;
    long n = 300;

    if (p == MAP_FAILED || mprotect(p + 4096, 4096, PROT_NONE) != 0) {
        return 1;
    }
    memset(src, 0x11, 300);
    memset(dst, 0x22, 96);
    mops_dst = dst;
    signal(SIGSEGV, mops_segv);
    printf("mops dst %p\n", (void *)dst);
    fflush(stdout);
    __asm__ volatile(".arch armv8.8-a\n"
                     ".globl mops_copy\n"
                     "mops_copy:\n"
                     "cpyfp [%0]!, [%1]!, %2!\n"
                     "cpyfm [%0]!, [%1]!, %2!\n"
                     "cpyfe [%0]!, [%1]!, %2!\n"
                     ".globl mops_copy_end\n"
                     "mops_copy_end:\n"
                     : "+r"(dst), "+r"(src), "+r"(n)::"memory");
    printf("no fault\n");
    return 0;
}
#endif

/*
 * cas_inc(p, bump): one compare-and-swap of *p from the value it loaded (a
 * short spin after the load) to that plus 1; returns 1 if it took (x86_64
 * lock cmpxchg, aarch64 cas). With @p bump not 0, a plain store of the
 * loaded value plus bump comes before the compare-and-swap, which then
 * fails in one thread too.
 */
#if defined(__x86_64__)
#define HAVE_CAS 1
__asm__(".pushsection .text.cas, \"ax\", @progbits\n"
        ".balign 64\n"
        ".globl cas_inc\n"
        ".type cas_inc, @function\n"
        "cas_inc:\n"
        "mov (%rdi), %rax\n"
        "lea 1(%rax), %rdx\n"
        "test %rsi, %rsi\n"
        "jz 2f\n"
        "add %rax, %rsi\n"
        "mov %rsi, (%rdi)\n"
        "2: mov $64, %ecx\n" /* a wider window for the other thread to get in */
        "1: dec %ecx\n"
        "jnz 1b\n"
        "lock cmpxchg %rdx, (%rdi)\n"
        "sete %al\n"
        "movzbl %al, %eax\n"
        "ret\n"
        ".size cas_inc, . - cas_inc\n"
        ".popsection\n");
#elif defined(__aarch64__)
#define HAVE_CAS 1
__asm__(".pushsection .text.cas, \"ax\", @progbits\n"
        ".arch_extension lse\n"
        ".balign 64\n"
        ".globl cas_inc\n"
        ".type cas_inc, @function\n"
        "cas_inc:\n"
        "ldr x2, [x0]\n"
        "add x5, x2, x1\n"
        "cbz x1, 2f\n"
        "str x5, [x0]\n"
        "2: add x1, x2, #1\n"
        "mov x3, x2\n"
        "mov w4, #64\n" /* a wider window for the other thread to get in */
        "1: subs w4, w4, #1\n"
        "b.ne 1b\n"
        "cas x3, x1, [x0]\n"
        "cmp x3, x2\n"
        "cset w0, eq\n"
        "ret\n"
        ".size cas_inc, . - cas_inc\n"
        ".popsection\n");
#endif

/*
 * sc_inc(p, bump): load-linked *p, store-conditional it plus 1 (a short spin
 * between); returns 1 if the store-conditional took (aarch64 ldxr/stxr,
 * riscv64 lr.d/sc.d, mipsel ll/sc of a 32-bit word). With @p bump not 0, a
 * plain store of the loaded value plus bump to *p comes between, and the
 * store-conditional fails in one thread too (QEMU compares the value).
 */
#if defined(__aarch64__)
#define HAVE_SC 1
typedef uint64_t sc_word_t;
__asm__(".pushsection .text.sc, \"ax\", @progbits\n"
        ".balign 64\n"
        ".globl sc_inc\n"
        ".type sc_inc, @function\n"
        "sc_inc:\n"
        "mov w4, #64\n"
        "ldxr x2, [x0]\n"
        "add x3, x2, #1\n"
        "cbz x1, 1f\n"
        "add x5, x2, x1\n"
        "str x5, [x0]\n"
        "1: subs w4, w4, #1\n" /* a wider window for the other thread to get in */
        "b.ne 1b\n"
        "stxr w6, x3, [x0]\n"
        "cmp w6, #0\n"
        "cset w0, eq\n"
        "ret\n"
        ".size sc_inc, . - sc_inc\n"
        ".popsection\n");
#elif defined(__riscv) && __riscv_xlen == 64
#define HAVE_SC 1
typedef uint64_t sc_word_t;
__asm__(".pushsection .text.sc, \"ax\", @progbits\n"
        ".balign 64\n"
        ".globl sc_inc\n"
        ".type sc_inc, @function\n"
        "sc_inc:\n"
        "li t4, 64\n"
        "lr.d t0, (a0)\n"
        "addi t1, t0, 1\n"
        "beqz a1, 1f\n"
        "add t2, t0, a1\n"
        "sd t2, 0(a0)\n"
        "1: addi t4, t4, -1\n" /* a wider window for the other thread to get in */
        "bnez t4, 1b\n"
        "sc.d t3, t1, (a0)\n"
        "seqz a0, t3\n"
        "ret\n"
        ".size sc_inc, . - sc_inc\n"
        ".popsection\n");
#elif defined(__mips__)
#define HAVE_SC 1
typedef uint32_t sc_word_t;
__asm__(".pushsection .text.sc, \"ax\", @progbits\n"
        ".set push\n"
        ".set noreorder\n"
        ".balign 64\n"
        ".globl sc_inc\n"
        ".type sc_inc, @function\n"
        "sc_inc:\n"
        "li $t4, 64\n"
        "ll $t0, 0($a0)\n"
        "beqz $a1, 1f\n"
        "addiu $t1, $t0, 1\n" /* delay slot */
        "addu $t2, $t0, $a1\n"
        "sw $t2, 0($a0)\n"
        "1: addiu $t4, $t4, -1\n" /* a wider window for the other thread to get in */
        "bnez $t4, 1b\n"
        "nop\n"
        "sc $t1, 0($a0)\n"
        "jr $ra\n"
        "move $v0, $t1\n" /* delay slot */
        ".size sc_inc, . - sc_inc\n"
        ".set pop\n"
        ".popsection\n");
#endif

/* How many tries of one thread fail on purpose (bump), before the second thread starts. */
#define ONE_THREAD_FAILS 5

#if defined(HAVE_CAS) || defined(HAVE_SC)
/* mode_tries()' one try to add 1 to its word (plus @p bump between load and store), and
 * the word's value. */
static int (*try_add)(unsigned long bump);
static unsigned long (*word_value)(void);
static unsigned long tries_failed[2];

static void *tries_thread(void *arg)
{
    unsigned long *failed = arg;

    for (unsigned long i = 0; i < rounds; i++) {
        while (!try_add(0)) {
            ++*failed;
        }
    }
    return NULL;
}

/*
 * Tries that fail in one thread (each bumps the word by 2), then two threads
 * add 1 to one word N times each with @p add; prints "NAME took failed word".
 */
static int mode_tries(const char *name, int (*add)(unsigned long), unsigned long (*value)(void))
{
    pthread_t t;

    try_add = add;
    word_value = value;
    for (int i = 0; i < ONE_THREAD_FAILS; i++) {
        tries_failed[0] += !try_add(2);
    }
    if (pthread_create(&t, NULL, tries_thread, &tries_failed[1]) != 0) {
        return 1;
    }
    tries_thread(&tries_failed[0]);
    pthread_join(t, NULL);
    printf("%s took %lu failed %lu word %lu\n", name, 2 * rounds, tries_failed[0] + tries_failed[1],
           word_value());
    return word_value() == 2 * rounds + 2 * ONE_THREAD_FAILS ? 0 : 1;
}
#endif

#ifdef HAVE_CAS
int cas_inc(volatile uint64_t *p, uint64_t bump);

static _Alignas(64) volatile uint64_t cas_word;

static int cas_add(unsigned long bump)
{
    return cas_inc(&cas_word, bump);
}

static unsigned long cas_value(void)
{
    return (unsigned long)cas_word;
}
#endif

#ifdef HAVE_SC
int sc_inc(volatile sc_word_t *p, sc_word_t bump);

static _Alignas(64) volatile sc_word_t sc_word;

static int sc_add(unsigned long bump)
{
    return sc_inc(&sc_word, (sc_word_t)bump);
}

static unsigned long sc_value(void)
{
    return (unsigned long)sc_word;
}
#endif

/*
 * rmw_ops(): atomic read-modify-writes of two words (unsigned long, unsigned
 * int), each between two plain loads of its word whose values the guest
 * prints: what memory held before and holds after. An idle second thread
 * exists meanwhile, so QEMU runs them as the parallel helpers do.
 */
static _Alignas(64) volatile unsigned long rmw_long;
static _Alignas(64) volatile unsigned int rmw_int;
static unsigned long rmw_seen[64][2];
static unsigned rmw_n;

#define RMW_SEEN(cell, op)                                                                         \
    do {                                                                                           \
        rmw_seen[rmw_n][0] = (cell);                                                               \
        op;                                                                                        \
        rmw_seen[rmw_n++][1] = (cell);                                                             \
    } while (0)

/* A signed maximum by the architecture's own atomic instruction (aarch64, riscv64). */
static inline void rmw_max(volatile unsigned long *p, long v)
{
#if defined(__aarch64__)
    long old;

    __asm__ volatile(".arch_extension lse\nldsmaxal %1, %0, [%2]"
                     : "=r"(old)
                     : "r"(v), "r"(p)
                     : "memory");
    (void)old;
#elif defined(__riscv)
    long old;

    __asm__ volatile("amomax.d.aqrl %0, %1, (%2)" : "=r"(old) : "r"(v), "r"(p) : "memory");
    (void)old;
#else
    (void)p, (void)v;
#endif
}

__attribute__((noinline)) static unsigned long rmw_ops(void)
{
    volatile unsigned long *l = &rmw_long;
    volatile unsigned int *w = &rmw_int;
    unsigned long sum = 0;

    *l = 100;
    *w = 0xf0;
    RMW_SEEN(*l, __atomic_fetch_add(l, 5, __ATOMIC_SEQ_CST));        /* lock add; ldaddal */
    RMW_SEEN(*l, sum += __atomic_fetch_add(l, 7, __ATOMIC_SEQ_CST)); /* lock xadd */
    RMW_SEEN(*l, __atomic_fetch_sub(l, 1, __ATOMIC_SEQ_CST));
    RMW_SEEN(*l, __atomic_fetch_or(l, 0x0f00, __ATOMIC_SEQ_CST));   /* lock or; ldsetal */
    RMW_SEEN(*l, __atomic_fetch_and(l, ~0xf0ul, __ATOMIC_SEQ_CST)); /* lock and; ldclral */
    RMW_SEEN(*l, __atomic_fetch_xor(l, 0x3333, __ATOMIC_SEQ_CST));  /* lock xor; ldeoral */
    RMW_SEEN(*l, sum += __atomic_add_fetch(l, 3, __ATOMIC_SEQ_CST));
    RMW_SEEN(*l, sum += __atomic_exchange_n(l, 0x1234, __ATOMIC_SEQ_CST));
#if defined(__aarch64__) || defined(__riscv)
    RMW_SEEN(*l, rmw_max(l, 0x5000));
#endif
    RMW_SEEN(*w, __atomic_fetch_add(w, 5, __ATOMIC_SEQ_CST));
    RMW_SEEN(*w, __atomic_fetch_or(w, 0x0f, __ATOMIC_SEQ_CST));
    RMW_SEEN(*w, __atomic_fetch_and(w, 0x3c, __ATOMIC_SEQ_CST));
    RMW_SEEN(*w, sum += __atomic_xor_fetch(w, 0xff, __ATOMIC_SEQ_CST));
    return sum;
}

static int rmw_pipe[2];

static void *rmw_idle(void *arg)
{
    char c;

    (void)arg;
    return read(rmw_pipe[0], &c, 1) < 0 ? NULL : arg;
}

/* rmw_ops() beside an idle thread; prints both words' addresses, then each op's before/after. */
static int mode_rmw(void)
{
    pthread_t t;

    if (pipe(rmw_pipe) != 0 || pthread_create(&t, NULL, rmw_idle, NULL) != 0) {
        return 1;
    }
    rmw_ops();
    if (write(rmw_pipe[1], "x", 1) != 1) {
        return 1;
    }
    pthread_join(t, NULL);
    printf("rmw long %p int %p ops %u\n", (void *)&rmw_long, (void *)&rmw_int, rmw_n);
    for (unsigned i = 0; i < rmw_n; i++) {
        printf("rmw %lx %lx\n", rmw_seen[i][0], rmw_seen[i][1]);
    }
    return 0;
}

#if defined(__x86_64__)
/*
 * movbe_ops(): movbe stores and loads of 2, 4 and 8 bytes, each store then
 * a plain load of its word, each load after a plain store: the trace of a
 * byte-swapping access must say what memory holds, as the plain one does.
 */
static _Alignas(64) volatile uint64_t movbe_cell;

__attribute__((noinline)) static void movbe_ops(uint64_t seen[6])
{
    uint64_t v = 0xabcdef0123456789ull, r;

    movbe_cell = 0;
    __asm__ volatile("movbe %w1, %0" : "=m"(movbe_cell) : "r"((uint16_t)v));
    seen[0] = movbe_cell;
    __asm__ volatile("movbe %k1, %0" : "=m"(movbe_cell) : "r"((uint32_t)v));
    seen[1] = movbe_cell;
    __asm__ volatile("movbe %1, %0" : "=m"(movbe_cell) : "r"(v));
    seen[2] = movbe_cell;
    movbe_cell = 0x1122334455667788ull;
    __asm__ volatile("movbe %1, %w0" : "=r"(r) : "m"(movbe_cell));
    seen[3] = r;
    __asm__ volatile("movbe %1, %k0" : "=r"(r) : "m"(movbe_cell));
    seen[4] = r;
    __asm__ volatile("movbe %1, %0" : "=r"(r) : "m"(movbe_cell));
    seen[5] = r;
}

/* Prints the cell's address and what the guest saw: memory after each store, the register
 * after each load. */
static int mode_movbe(void)
{
    uint64_t seen[6];

    movbe_ops(seen);
    printf("movbe cell %p seen", (void *)&movbe_cell);
    for (unsigned i = 0; i < 6; i++) {
        printf(" %llx", (unsigned long long)seen[i]);
    }
    printf("\n");
    return 0;
}
#endif

/* A leaf function with no data and no call: its bytes run anywhere (mode maps). */
__attribute__((noipa, aligned(64))) unsigned long leaf(unsigned long x)
{
    return x * 3 + 1;
}

typedef unsigned long (*leaf_fn)(unsigned long);

/* Call the copy of leaf() at @p code rounds times; print the run with the file offset @p off. */
static void call_copy(void *code, long off, const char *who)
{
    leaf_fn f = (leaf_fn)code;

    for (unsigned long i = 0; i < rounds; i++) {
        if (f(i) != i * 3 + 1) {
            die("a copy of leaf() computed something else");
        }
    }
    printf("call %lx %lx %lx%s\n", (unsigned long)code, rounds, (unsigned long)off, who);
}

static long maps_thread_off; /* the file offset maps_thread's copy comes from */

static void *maps_thread(void *code)
{
    call_copy(code, maps_thread_off, " thread");
    return NULL;
}

#define LEAF_COPY 256 /* bytes copied: leaf() and what follows it, never run */

static void *must_map(void *at, size_t len, int prot, int flags, int fd, off_t off)
{
    void *p = mmap(at, len, prot, flags, fd, off);

    if (p == MAP_FAILED) {
        die("mmap");
    }
    printf("mmap %lx %lx %d %lx\n", (unsigned long)p, (unsigned long)len, prot,
           fd < 0 ? -1ul : (unsigned long)off);
    return p;
}

static void must_unmap(void *at, size_t len)
{
    if (munmap(at, len) != 0) {
        die("munmap");
    }
    printf("munmap %lx %lx\n", (unsigned long)at, (unsigned long)len);
}

/* Attach a segment of @p len bytes at @p at over what is there, run a copy of leaf(), detach. */
static void shm_over(uint8_t *at, size_t len)
{
    int id = shmget(IPC_PRIVATE, len, IPC_CREAT | 0600);
    uint8_t *p;

    if (id < 0) {
        die("shmget");
    }
    p = shmat(id, at, SHM_REMAP | SHM_EXEC);
    shmctl(id, IPC_RMID, NULL); /* gone once detached */
    if (p == (void *)-1 && errno == EINVAL) {
        printf("shm: not at a multiple of SHMLBA here (mips: 256 KiB)\n");
        return;
    }
    if (p != at) {
        die("shmat");
    }
    printf("mmap %lx %lx %d %lx\n", (unsigned long)at, (unsigned long)len,
           PROT_READ | PROT_WRITE | PROT_EXEC, -1ul);
    memcpy(p, (const void *)leaf, LEAF_COPY);
    __builtin___clear_cache((char *)p, (char *)p + LEAF_COPY);
    call_copy(p, -1, "");
    if (shmdt(p) != 0) {
        die("shmdt");
    }
    printf("munmap %lx %lx\n", (unsigned long)at, (unsigned long)len);
}

static int mode_maps(const char *file)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    char path[4096], *buf = calloc(4, page);
    pthread_t t;
    uint8_t *a, *b, *c;
    int fd;

    snprintf(path, sizeof(path), "%s.code", file);
    fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || !buf) {
        die(path);
    }
    for (int k = 0; k < 4; k++) {
        memcpy(buf + k * page, (const void *)leaf, LEAF_COPY);
    }
    if (write(fd, buf, 4 * page) != (ssize_t)(4 * page)) {
        die("write");
    }
    /* Pages 1-2 of the file, run by this thread and another. */
    a = must_map(NULL, 2 * page, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, (off_t)page);
    call_copy(a, (long)page, "");
    maps_thread_off = (long)page;
    if (pthread_create(&t, NULL, maps_thread, a) != 0) {
        die("pthread_create");
    }
    pthread_join(t, NULL);
    if (mprotect(a + page, page, PROT_READ) != 0) {
        die("mprotect");
    }
    printf("mprotect %lx %lx %d\n", (unsigned long)(a + page), (unsigned long)page, PROT_READ);
    /* The same address, another page of the file: the same code at another offset. */
    must_unmap(a, 2 * page);
    must_map(a, page, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_FIXED, fd, (off_t)(3 * page));
    call_copy(a, (long)(3 * page), "");
    /* Moved over an anonymous mapping. */
    b = must_map(NULL, page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mremap(a, page, page, MREMAP_MAYMOVE | MREMAP_FIXED, b) != b) {
        die("mremap");
    }
    printf("mremap %lx %lx %lx %lx\n", (unsigned long)b, (unsigned long)page, (unsigned long)a,
           (unsigned long)page);
    call_copy(b, (long)(3 * page), "");
    /* A System V segment in its place: anonymous code, no more the file's. */
    shm_over(b, page);
    /* Anonymous code. */
    c = must_map(NULL, page, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1,
                 0);
    memcpy(c, (const void *)leaf, LEAF_COPY);
    __builtin___clear_cache((char *)c, (char *)c + LEAF_COPY);
    call_copy(c, -1, "");
    must_unmap(b, page);
    must_unmap(c, page);
    close(fd);
    free(buf);
    return 0;
}

/* A page of @p fd holding a copy of leaf(), mapped to run (MAP_SHARED for a memfd). */
static uint8_t *leaf_file_page(int fd, int flags)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);

    if (fd < 0 || write(fd, (const void *)leaf, LEAF_COPY) != LEAF_COPY ||
        ftruncate(fd, (off_t)page) != 0) {
        die("a file for leaf()");
    }
    return must_map(NULL, page, PROT_READ | PROT_EXEC, flags, fd, 0);
}

/* The file offset of leaf() in the program, from /proc/self/maps (QEMU's, for the guest). */
static long leaf_file_offset(void)
{
    unsigned long lo, hi, off, at = (unsigned long)leaf;
    char line[512];
    FILE *f = fopen("/proc/self/maps", "r");

    while (f && fgets(line, sizeof(line), f)) {
        if (sscanf(line, "%lx-%lx %*s %lx", &lo, &hi, &off) == 3 && lo <= at && at < hi) {
            fclose(f);
            return (long)(off + (at - lo));
        }
    }
    die("leaf() in /proc/self/maps");
    return -1;
}

/*
 * The program's own page holding leaf() mapped again 1 GiB above it, its first load still
 * there, and leaf() called N times there, then N times in place: a second load of the
 * program (cov: a module of its own, its offsets the file's).
 */
static int mode_remap(void)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    long off = leaf_file_offset(), in_page = off & (long)(page - 1);
    uintptr_t at = ((uintptr_t)leaf & ~(uintptr_t)(page - 1)) + (1ul << 30);
    int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    uint8_t *m;

    if (fd < 0) {
        die("open /proc/self/exe");
    }
    m = must_map((void *)at, page, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_FIXED_NOREPLACE, fd,
                 off - in_page);
    call_copy(m + in_page, off, " again");
    call_copy((void *)leaf, off, " first");
    return 0;
}

/* Code from a memfd (a JIT's way) and from a file deleted once mapped: cov's module map. */
static int mode_codefiles(const char *file)
{
    char path[4096];
    uint8_t *m = leaf_file_page(memfd_create("sluice-jit", MFD_CLOEXEC), MAP_SHARED), *g;

    call_copy(m, 0, " memfd");
    snprintf(path, sizeof(path), "%s.gone", file);
    g = leaf_file_page(open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0700), MAP_PRIVATE);
    unlink(path);
    call_copy(g, 0, " gone");
    return 0;
}

/*
 * firstfault_ops(): first-fault and no-fault vector loads in the middle of a
 * mapped buffer, where nothing can fault: each loads every element, traced
 * or not (riscv64 vle8ff.v, vle32ff.v; aarch64 SVE ldff1b, ldnf1b, and a
 * gather ldff1w). @p n gets the elements each loaded.
 */
#if defined(__riscv) || defined(__aarch64__)
static _Alignas(64) uint8_t ff_buf[1024];
#endif

__attribute__((noinline)) static int firstfault_ops(long n[3])
{
#if defined(__riscv)
    __asm__ volatile(".option push\n.option arch, +v\n"
                     "vsetivli t0, 16, e8, m1, ta, ma\nvle8ff.v v1, (%1)\ncsrr %0, vl\n"
                     ".option pop"
                     : "=r"(n[0])
                     : "r"(ff_buf + 64)
                     : "memory", "t0");
    __asm__ volatile(".option push\n.option arch, +v\n"
                     "vsetivli t0, 4, e32, m1, ta, ma\nvle32ff.v v2, (%1)\ncsrr %0, vl\n"
                     ".option pop"
                     : "=r"(n[1])
                     : "r"(ff_buf + 128)
                     : "memory", "t0");
    return 2;
#elif defined(__aarch64__)
    __asm__ volatile(".arch_extension sve\nptrue p0.b\nsetffr\n"
                     "ldff1b {z0.b}, p0/z, [%1]\nrdffr p1.b\ncntp %0, p0, p1.b"
                     : "=r"(n[0])
                     : "r"(ff_buf + 128)
                     : "memory", "p0", "p1", "v0");
    __asm__ volatile(".arch_extension sve\nptrue p0.b\nsetffr\n"
                     "ldnf1b {z0.b}, p0/z, [%1]\nrdffr p1.b\ncntp %0, p0, p1.b"
                     : "=r"(n[1])
                     : "r"(ff_buf + 256)
                     : "memory", "p0", "p1", "v0");
    __asm__ volatile(".arch_extension sve\nptrue p0.s\nindex z1.s, #0, #1\nsetffr\n"
                     "ldff1w {z0.s}, p0/z, [%1, z1.s, uxtw #2]\nrdffr p1.b\ncntp %0, p0, p1.s"
                     : "=r"(n[2])
                     : "r"(ff_buf + 512)
                     : "memory", "p0", "p1", "v0", "v1");
    return 3;
#else
    (void)n;
    return 0;
#endif
}

/* Prints how many elements each first-fault or no-fault load loaded. */
static int mode_firstfault(void)
{
    long n[3] = {0, 0, 0};
    int k = firstfault_ops(n);

    printf("firstfault");
    for (int i = 0; i < k; i++) {
        printf(" %ld", n[i]);
    }
    printf("\n");
    return 0;
}

static char stdout_buf[1 << 16];

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    unsigned long n = argc > 3 ? strtoul(argv[3], NULL, 0) : 1000;

    /* fully buffered: glibc then never fstat()s stdout (inode, times differ per run) */
    setvbuf(stdout, stdout_buf, _IOFBF, sizeof(stdout_buf));
    if (argc < 3) {
        fprintf(stderr, "usage: counters MODE FILE [N]\n");
        return 2;
    }
    rounds = n;
    if (strcmp(mode, "exec") == 0) {
        map_counters(argv[2], 6);
        return mode_exec();
    } else if (strcmp(mode, "selfkill") == 0) {
        map_counters(argv[2], 1);
        return mode_selfkill();
    } else if (strcmp(mode, "selfkill-threads") == 0) {
        map_counters(argv[2], 4);
        return mode_selfkill_threads();
    } else if (strcmp(mode, "exit") == 0 || strcmp(mode, "abort") == 0) {
        map_counters(argv[2], 6);
        return mode_exit(strcmp(mode, "abort") == 0);
    } else if (strcmp(mode, "wait") == 0) {
        map_counters(argv[2], 4);
        return mode_wait();
    } else if (strcmp(mode, "idle") == 0) {
        map_counters(argv[2], 4);
        return mode_idle();
    } else if (strcmp(mode, "closefds") == 0) {
        map_counters(argv[2], 6);
        return mode_closefds();
    } else if (strcmp(mode, "forkthreads") == 0) {
        map_counters(argv[2], 5);
        return mode_forkthreads();
    } else if (strcmp(mode, "forkrace") == 0) {
        map_counters(argv[2], 2);
        return mode_forkrace();
    } else if (strcmp(mode, "pidns") == 0) {
        map_counters(argv[2], 3);
        return mode_pidns();
    } else if (strcmp(mode, "chroot") == 0) {
        map_counters(argv[2], 2);
        return mode_chroot(argv[2]);
    } else if (strcmp(mode, "forkstorm") == 0) {
        map_counters(argv[2], 6);
        return mode_forkstorm();
    } else if (strcmp(mode, "spawnexit") == 0) {
        map_counters(argv[2], 0);
        return mode_spawnexit();
    } else if (strcmp(mode, "fullas") == 0) {
        map_counters(argv[2], 2);
        return mode_fullas();
    } else if (strcmp(mode, "fdfull") == 0 || strcmp(mode, "fdfullexec") == 0) {
        map_counters(argv[2], 1);
        return mode_fdfull(strcmp(mode, "fdfullexec") == 0);
    } else if (strcmp(mode, "execrace") == 0) {
        map_counters(argv[2], 0);
        return mode_execrace();
    } else if (strcmp(mode, "pidnest") == 0) {
        map_counters(argv[2], 0);
        return mode_pidnest((unsigned)n);
    } else if (strcmp(mode, "lowerfsize") == 0) {
        map_counters(argv[2], 5);
        return mode_lowerfsize();
    } else if (strcmp(mode, "threads") == 0) {
        map_counters(argv[2], (unsigned)n);
        return mode_threads((unsigned)n);
    } else if (strcmp(mode, "nproc") == 0) {
        map_counters(argv[2], (unsigned)n);
        churn_bumps = argc > 4 ? strtoul(argv[4], NULL, 0) : 100;
        return mode_nproc((unsigned)n, argc > 5 && strcmp(argv[5], "gate") == 0);
    } else if (strcmp(mode, "churn") == 0) {
        map_counters(argv[2], (unsigned)n);
        if (argc > 5) {
            churn_bumps = strtoul(argv[5], NULL, 0);
        }
        if (argc > 6) {
            churn_width = (unsigned)strtoul(argv[6], NULL, 0);
            churn_width = churn_width < 1 ? 1 : churn_width > 16 ? 16 : churn_width;
        }
        return mode_churn((unsigned)n, argc > 4 ? (unsigned)strtoul(argv[4], NULL, 0) : 0);
    } else if (strcmp(mode, "maps") == 0) {
        map_counters(argv[2], 0);
        return mode_maps(argv[2]);
    } else if (strcmp(mode, "environ") == 0) {
        map_counters(argv[2], 0);
        return mode_environ(argv[0]);
#ifdef HAVE_PAGECROSS
    } else if (strcmp(mode, "pagecross") == 0) {
        map_counters(argv[2], 0);
        return mode_pagecross();
#endif
#ifdef HAVE_HELPERS
    } else if (strcmp(mode, "helpers") == 0) {
        map_counters(argv[2], 0);
        return mode_helpers();
#endif
    } else if (strcmp(mode, "firstfault") == 0) {
        return mode_firstfault();
    } else if (strcmp(mode, "remap") == 0) {
        map_counters(argv[2], 0);
        return mode_remap();
    } else if (strcmp(mode, "codefiles") == 0) {
        return mode_codefiles(argv[2]);
    } else if (strcmp(mode, "rmw") == 0) {
        return mode_rmw();
#if defined(__x86_64__)
    } else if (strcmp(mode, "movbe") == 0) {
        return mode_movbe();
#endif
#ifdef HAVE_CAS
    } else if (strcmp(mode, "cas") == 0) {
        map_counters(argv[2], 0);
        return mode_tries("cas", cas_add, cas_value);
#endif
#ifdef HAVE_SC
    } else if (strcmp(mode, "sc") == 0) {
        map_counters(argv[2], 0);
        return mode_tries("sc", sc_add, sc_value);
#endif
#ifdef HAVE_MOPSFAULT
    } else if (strcmp(mode, "mopsfault") == 0) {
        map_counters(argv[2], 0);
        return mode_mopsfault();
#endif
#ifdef HAVE_RETRY
    } else if (strcmp(mode, "retry") == 0) {
        map_counters(argv[2], 0);
        return mode_retry();
#endif
    }
    fprintf(stderr, "counters: unknown mode '%s'\n", mode);
    return 2;
}
