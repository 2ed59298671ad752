/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * bpf_vm.h — the filter VM: a verifier and an interpreter for the BPF
 * instruction set of RFC 9669 (what clang 14 emits at -mcpu=v1..v3).
 *
 * A program is verified once (vm_prog_init(), which calls vm_verify()), then
 * run any number of times (vm_run()). Runs happen at lift time on the vCPU
 * thread that translates the instruction. Several threads may run the same
 * vm_prog at once: it is immutable after vm_prog_init(), and every run keeps
 * its state (registers, stacks, memory regions) on the C stack of vm_run().
 * Helpers that share data between runs (maps) do their own locking.
 *
 * A hostile or buggy program must never crash the host: the verifier rejects
 * what can be rejected statically, and every load and store is checked at run
 * time against the regions the run may touch (its context, the stacks of its
 * active frames, the caller's extra regions and the regions helpers hand out).
 * Nothing here allocates during a run, blocks or calls anything but helpers.
 *
 * Errors: every function that can fail returns 0 or a negative errno and, when
 * given a struct vm_error, fills it with the instruction index and a message.
 */
#ifndef SLUICE_JITTER_BPF_VM_H
#define SLUICE_JITTER_BPF_VM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** Bytes of stack per frame (r10 points at its top). */
#define VM_STACK_BYTES 512
/** Most frames live at once: the entry function plus 7 nested bpf-to-bpf calls. */
#define VM_MAX_FRAMES 8
/** Most instructions (slots; an lddw takes two) a program may have. */
#define VM_MAX_INSNS 65536
/** Default number of instructions one run may execute before it is stopped. */
#define VM_DEFAULT_BUDGET 1000000u
/** Regions a run can know besides ctx and its stack (caller's + helpers'). */
#define VM_MAX_REGIONS 32
/** Registers r0..r10; r10 is the read-only frame pointer. */
#define VM_NREGS 11

/** One instruction slot, laid out exactly like the kernel's struct bpf_insn. */
struct vm_insn {
    uint8_t code;    /* opcode: class | size/op | mode/source */
    uint8_t dst : 4; /* destination register */
    uint8_t src : 4; /* source register (or pseudo-call / lddw kind) */
    int16_t off;     /* signed offset: jumps (slots), memory (bytes) */
    int32_t imm;     /* signed immediate */
};

_Static_assert(sizeof(struct vm_insn) == 8, "struct vm_insn must match struct bpf_insn");

/** What went wrong, and where. */
struct vm_error {
    /** Index of the offending instruction slot; SIZE_MAX when none is to blame. */
    size_t insn;
    /** "insn 12: jump out of range (target 40, program has 30 insns)"; NUL-terminated. */
    char msg[160];
};

/** A run's state; opaque outside bpf_vm.c. Helpers receive it. */
struct vm_run;

/**
 * A helper, called by `call imm` with r1..r5 as arguments; its return value
 * goes to r0. Runs on the thread that called vm_run(). It must treat every
 * argument as untrusted: a pointer argument is only usable after
 * vm_run_check() accepted it. It may call vm_run_add_region() to hand memory
 * to the program and vm_run_fault() to stop the run.
 */
typedef uint64_t (*vm_helper_fn)(struct vm_run *run, uint64_t r1, uint64_t r2, uint64_t r3,
                                 uint64_t r4, uint64_t r5);

/**
 * What programs may call: helpers[id] for id < n_helpers; a NULL entry is an
 * unknown helper, which the verifier rejects. Borrowed by vm_prog: it must
 * outlive every vm_prog built on it.
 */
struct vm_env {
    const vm_helper_fn *helpers; /* indexed by helper ID (kernel numbering where one fits) */
    size_t n_helpers;            /* entries in helpers */
};

/** A span of host memory a run may touch. */
struct vm_region {
    uint64_t start; /* host address of the first byte */
    uint64_t size;  /* bytes */
    bool writable;  /* stores and atomics allowed */
};

/** A verified program, ready to run. Fill it with vm_prog_init() only. */
struct vm_prog {
    const struct vm_insn *insns; /* borrowed: must outlive the vm_prog */
    size_t n;                    /* slots */
    const struct vm_env *env;    /* borrowed */
    uint64_t budget;             /* instructions per run; VM_DEFAULT_BUDGET by default */
    bool verified;               /* set by vm_prog_init() on success */
};

/** What one run gets to see. */
struct vm_args {
    void *ctx;                       /* passed in r1; may be NULL with ctx_size 0 */
    size_t ctx_size;                 /* bytes of ctx the program may access */
    bool ctx_writable;               /* stores into ctx allowed */
    const struct vm_region *regions; /* extra regions (globals, ...); may be NULL */
    size_t n_regions;                /* at most VM_MAX_REGIONS */
    void *user;                      /* for helpers, through vm_run_user() */
};

/**
 * Check a program statically: size, opcodes, registers, jumps (in range,
 * forward only, never into an lddw's second slot, never out of their
 * function), termination, helper IDs, bpf-to-bpf calls (targets, no
 * recursion, depth), constant stack offsets through r10, and that no register
 * is read before it is written (r0 included, at every exit).
 * Thread-safe; allocates temporary memory (O(n)).
 * @param[in]  insns the program, @p n slots
 * @param[in]  n     number of slots
 * @param[in]  env   the helpers that exist
 * @param[out] err   where to say why, on failure; may be NULL
 * @return 0 if the program is accepted; -EINVAL if rejected (err says why);
 *         -ENOMEM if temporary memory could not be allocated.
 */
int vm_verify(const struct vm_insn *insns, size_t n, const struct vm_env *env,
              struct vm_error *err);

/**
 * Verify @p insns and, if accepted, make @p prog a runnable program over them
 * with the default budget. @p insns and @p env are borrowed, not copied.
 * @param[out] prog  filled on success; marked unverified on failure
 * @param[in]  insns the program, @p n slots
 * @param[in]  n     number of slots
 * @param[in]  env   the helpers that exist
 * @param[out] err   where to say why, on failure; may be NULL
 * @return 0, or what vm_verify() returned.
 */
int vm_prog_init(struct vm_prog *prog, const struct vm_insn *insns, size_t n,
                 const struct vm_env *env, struct vm_error *err);

/**
 * Run @p prog once: r1 = args->ctx, r10 = top of a fresh zeroed 512-byte
 * stack, other registers 0. Thread-safe for distinct runs of the same prog
 * (helpers permitting). Never allocates; uses about 5 KiB of C stack.
 * @param[in]  prog a program accepted by vm_prog_init()
 * @param[in]  args context, extra regions and the helpers' cookie
 * @param[out] ret  r0 at the final exit, on success
 * @param[out] err  where to say why, on failure; may be NULL
 * @return 0 on a normal exit;
 *         -EFAULT on a load/store outside every region or into a read-only one;
 *         -E2BIG when the instruction budget is exhausted;
 *         -ECANCELED when a helper called vm_run_fault();
 *         -EINVAL when @p prog was not verified, @p args is malformed, or an
 *         instruction the verifier should have refused is met.
 */
int vm_run(const struct vm_prog *prog, const struct vm_args *args, uint64_t *ret,
           struct vm_error *err);

/**
 * For helpers: the cookie the caller passed in vm_args.user.
 * @param[in] run the current run
 * @return args->user of the current run.
 */
void *vm_run_user(struct vm_run *run);

/**
 * For helpers: the host pointer behind program address @p addr if
 * [addr, addr + size) lies inside one region the program may access (and that
 * region is writable when @p write is set).
 * @param[in] run   the current run
 * @param[in] addr  address as the program sees it (a register value)
 * @param[in] size  bytes to be accessed; 0 is refused
 * @param[in] write whether the caller will write there
 * @return the pointer, or NULL if the access is not allowed.
 */
void *vm_run_check(struct vm_run *run, uint64_t addr, uint64_t size, bool write);

/**
 * For helpers: let the program access [ptr, ptr + size) until the run ends
 * (e.g. a map value about to be returned). Registering an identical region
 * twice takes one slot.
 * @param[in] run      the current run
 * @param[in] ptr      first byte
 * @param[in] size     bytes; must be > 0
 * @param[in] writable whether stores are allowed
 * @return 0; -ENOSPC if the run already holds VM_MAX_REGIONS regions (the
 *         helper should then fail, e.g. return NULL); -EINVAL if size is 0.
 */
int vm_run_add_region(struct vm_run *run, const void *ptr, uint64_t size, bool writable);

/**
 * For helpers: stop the run once the helper returns; vm_run() then fails with
 * -ECANCELED, blaming the call instruction. The first reason given is kept.
 * @param[in] run    the current run
 * @param[in] reason printf-style format for the reason, then its arguments
 */
void vm_run_fault(struct vm_run *run, const char *reason, ...)
    __attribute__((format(printf, 2, 3)));

/*
 * Shared by bpf_vm.c and bpf_verify.c.
 */

/**
 * Fill @p err (if not NULL) with @p insn and "insn N: " followed by the
 * formatted reason; truncated to fit.
 * @param[out] err   the error to fill; may be NULL
 * @param[in]  insn  the instruction slot to blame, or SIZE_MAX for none
 * @param[in]  fmt   printf-style format for the reason, then its arguments
 */
void vm_error_set(struct vm_error *err, size_t insn, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif /* SLUICE_JITTER_BPF_VM_H */
