/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * bpf_vm.c — the filter VM's interpreter (RFC 9669, clang -mcpu=v1..v3).
 *
 * Owns a run's state: registers, the stacks of up to VM_MAX_FRAMES frames,
 * and the table of memory regions the run may touch. Runs on whichever thread
 * calls vm_run() (a vCPU thread at lift time); all state lives in a struct
 * vm_run on that thread's C stack, so concurrent runs share nothing but the
 * immutable program and whatever their helpers share.
 *
 * It must never trust the program: every load, store and atomic goes through
 * mem_ptr(), which only hands out host pointers inside a known region; the
 * instruction budget stops any loop; register indices are masked into a
 * 16-entry file; anything the verifier should have refused ends the run with
 * -EINVAL instead of undefined behaviour. It never allocates, never blocks and
 * calls nothing but the caller's helpers.
 */
#include "bpf_vm.h"

#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <linux/bpf.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Caller's state saved by a bpf-to-bpf call, restored by the callee's exit. */
struct frame {
    size_t ret_pc;     /* slot after the call */
    uint64_t saved[4]; /* caller's r6..r9 */
    uint64_t fp;       /* caller's r10 */
};

struct vm_run {
    const struct vm_prog *prog;
    const struct vm_args *args;
    struct vm_error *err;               /* never NULL while running */
    uint64_t reg[16];                   /* r0..r10; 16 so a 4-bit index can never overflow */
    size_t pc;                          /* current slot */
    uint64_t left;                      /* instructions still allowed */
    unsigned depth;                     /* active frames, 1..VM_MAX_FRAMES */
    struct frame frames[VM_MAX_FRAMES]; /* frames[d]: saved by the call that made frame d */
    unsigned n_regions;
    struct vm_region regions[VM_MAX_REGIONS];
    bool faulted; /* a helper called vm_run_fault() */
    char fault_msg[128];
    /* Frame d's 512 bytes lie just below frame d-1's: the active frames are one span. */
    _Alignas(16) uint8_t stack[VM_MAX_FRAMES * VM_STACK_BYTES];
};

void vm_error_set(struct vm_error *err, size_t insn, const char *fmt, ...)
{
    va_list ap;
    int len = 0;

    if (!err) {
        return;
    }
    err->insn = insn;
    if (insn != SIZE_MAX) {
        len = snprintf(err->msg, sizeof(err->msg), "insn %zu: ", insn);
    }
    va_start(ap, fmt);
    vsnprintf(err->msg + len, sizeof(err->msg) - len, fmt, ap);
    va_end(ap);
}

/* Record why the run stops, blaming the current slot; returns rc. */
#define FAIL(run, rc, ...) (vm_error_set((run)->err, (run)->pc, __VA_ARGS__), (rc))

/* ---- memory ---------------------------------------------------------------- */

/* Is [addr, addr + len) inside [start, start + size)? Overflow-safe; len > 0. */
static bool contains(uint64_t start, uint64_t size, uint64_t addr, uint64_t len)
{
    return addr >= start && addr - start <= size && len <= size - (addr - start);
}

static uint64_t frame_top(const struct vm_run *run, unsigned depth)
{
    return (uint64_t)(uintptr_t)run->stack + (uint64_t)(VM_MAX_FRAMES + 1 - depth) * VM_STACK_BYTES;
}

/* The region holding [addr, addr + len), writable ones first when @write; NULL if none. */
static const struct vm_region *find_region(const struct vm_run *run, uint64_t addr, uint64_t len,
                                           bool write, struct vm_region *scratch)
{
    const struct vm_region *found = NULL;
    unsigned i;

    /* The stacks of every active frame: a callee may use pointers into its callers' stacks. */
    scratch[0] = (struct vm_region){frame_top(run, run->depth) - VM_STACK_BYTES,
                                    (uint64_t)run->depth * VM_STACK_BYTES, true};
    scratch[1] = (struct vm_region){(uint64_t)(uintptr_t)run->args->ctx, run->args->ctx_size,
                                    run->args->ctx_writable};
    for (i = 0; i < 2 + run->n_regions; i++) {
        const struct vm_region *r = i < 2 ? &scratch[i] : &run->regions[i - 2];

        if (r->size && contains(r->start, r->size, addr, len)) {
            if (r->writable || !write) {
                return r;
            }
            found = r;
        }
    }
    return found;
}

/* Host pointer for an access the run may make, or NULL (with the reason in err). */
static void *mem_ptr(struct vm_run *run, uint64_t addr, unsigned len, bool write)
{
    struct vm_region scratch[2];
    const struct vm_region *r = find_region(run, addr, len, write, scratch);

    if (!r) {
        vm_error_set(run->err, run->pc, "out-of-bounds %s of %u bytes at 0x%" PRIx64,
                     write ? "write" : "read", len, addr);
        return NULL;
    }
    if (write && !r->writable) {
        vm_error_set(run->err, run->pc, "write of %u bytes to read-only memory at 0x%" PRIx64, len,
                     addr);
        return NULL;
    }
    return (void *)(uintptr_t)addr;
}

static uint64_t load(const void *p, unsigned len)
{
    uint8_t v8;
    uint16_t v16;
    uint32_t v32;
    uint64_t v64;

    switch (len) {
    case 1:
        memcpy(&v8, p, 1);
        return v8;
    case 2:
        memcpy(&v16, p, 2);
        return v16;
    case 4:
        memcpy(&v32, p, 4);
        return v32;
    default:
        memcpy(&v64, p, 8);
        return v64;
    }
}

static void store(void *p, unsigned len, uint64_t v)
{
    uint8_t v8 = v;
    uint16_t v16 = v;
    uint32_t v32 = v;

    switch (len) {
    case 1:
        memcpy(p, &v8, 1);
        break;
    case 2:
        memcpy(p, &v16, 2);
        break;
    case 4:
        memcpy(p, &v32, 4);
        break;
    default:
        memcpy(p, &v, 8);
        break;
    }
}

static unsigned size_bytes(uint8_t code)
{
    switch (BPF_SIZE(code)) {
    case BPF_B:
        return 1;
    case BPF_H:
        return 2;
    case BPF_W:
        return 4;
    default:
        return 8;
    }
}

/* ---- ALU ------------------------------------------------------------------- */

/* dst op src on 64 bits; *ok cleared for an unknown op. */
static uint64_t alu64(uint8_t op, uint64_t d, uint64_t s, bool *ok)
{
    switch (op) {
    case BPF_ADD:
        return d + s;
    case BPF_SUB:
        return d - s;
    case BPF_MUL:
        return d * s;
    case BPF_DIV:
        return s ? d / s : 0;
    case BPF_MOD:
        return s ? d % s : d;
    case BPF_OR:
        return d | s;
    case BPF_AND:
        return d & s;
    case BPF_XOR:
        return d ^ s;
    case BPF_LSH:
        return d << (s & 63);
    case BPF_RSH:
        return d >> (s & 63);
    case BPF_ARSH:
        return (uint64_t)((int64_t)d >> (s & 63));
    case BPF_NEG:
        return -d;
    case BPF_MOV:
        return s;
    }
    *ok = false;
    return 0;
}

/* dst op src on 32 bits (the result is zero-extended by the caller). */
static uint32_t alu32(uint8_t op, uint32_t d, uint32_t s, bool *ok)
{
    switch (op) {
    case BPF_ADD:
        return d + s;
    case BPF_SUB:
        return d - s;
    case BPF_MUL:
        return d * s;
    case BPF_DIV:
        return s ? d / s : 0;
    case BPF_MOD:
        return s ? d % s : d;
    case BPF_OR:
        return d | s;
    case BPF_AND:
        return d & s;
    case BPF_XOR:
        return d ^ s;
    case BPF_LSH:
        return d << (s & 31);
    case BPF_RSH:
        return d >> (s & 31);
    case BPF_ARSH:
        return (uint32_t)((int32_t)d >> (s & 31));
    case BPF_NEG:
        return -d;
    case BPF_MOV:
        return s;
    }
    *ok = false;
    return 0;
}

/* BPF_END: to little- (src bit clear) or big-endian, 16/32/64 bits, zero-extended. */
static uint64_t byteswap(uint64_t d, int32_t bits, bool to_be, bool *ok)
{
    switch (bits) {
    case 16:
        return to_be ? htobe16((uint16_t)d) : htole16((uint16_t)d);
    case 32:
        return to_be ? htobe32((uint32_t)d) : htole32((uint32_t)d);
    case 64:
        return to_be ? htobe64(d) : htole64(d);
    }
    *ok = false;
    return 0;
}

static int exec_alu(struct vm_run *run, const struct vm_insn *in)
{
    bool wide = BPF_CLASS(in->code) == BPF_ALU64;
    bool x = BPF_SRC(in->code) == BPF_X;
    uint8_t op = BPF_OP(in->code);
    uint64_t d = run->reg[in->dst];
    uint64_t s = x ? run->reg[in->src] : (uint64_t)(int64_t)in->imm;
    bool ok = true;

    if (op == BPF_END && !wide) {
        d = byteswap(d, in->imm, x, &ok);
    } else if (wide) {
        d = alu64(op, d, s, &ok);
    } else {
        d = alu32(op, (uint32_t)d, (uint32_t)s, &ok);
    }
    if (!ok || in->off != 0) {
        return FAIL(run, -EINVAL, "unknown opcode 0x%02x", in->code);
    }
    run->reg[in->dst] = d;
    run->pc++;
    return 0;
}

/* ---- jumps, calls, exit ---------------------------------------------------- */

static bool cond(uint8_t op, uint64_t a, uint64_t b, bool w32, bool *ok)
{
    int64_t sa = w32 ? (int32_t)(uint32_t)a : (int64_t)a;
    int64_t sb = w32 ? (int32_t)(uint32_t)b : (int64_t)b;

    if (w32) {
        a = (uint32_t)a;
        b = (uint32_t)b;
    }
    switch (op) {
    case BPF_JEQ:
        return a == b;
    case BPF_JNE:
        return a != b;
    case BPF_JGT:
        return a > b;
    case BPF_JGE:
        return a >= b;
    case BPF_JLT:
        return a < b;
    case BPF_JLE:
        return a <= b;
    case BPF_JSET:
        return (a & b) != 0;
    case BPF_JSGT:
        return sa > sb;
    case BPF_JSGE:
        return sa >= sb;
    case BPF_JSLT:
        return sa < sb;
    case BPF_JSLE:
        return sa <= sb;
    }
    *ok = false;
    return false;
}

static int call_helper(struct vm_run *run, const struct vm_insn *in)
{
    const struct vm_env *env = run->prog->env;
    uint64_t *r = run->reg;
    vm_helper_fn fn;

    if (in->imm < 0 || (size_t)in->imm >= env->n_helpers || !env->helpers[in->imm]) {
        return FAIL(run, -EINVAL, "unknown helper %" PRId32, in->imm);
    }
    fn = env->helpers[in->imm];
    r[0] = fn(run, r[1], r[2], r[3], r[4], r[5]);
    if (run->faulted) {
        return FAIL(run, -ECANCELED, "helper %" PRId32 ": %s", in->imm, run->fault_msg);
    }
    run->pc++;
    return 0;
}

static int call_local(struct vm_run *run, const struct vm_insn *in)
{
    struct frame *f;
    int64_t target = (int64_t)run->pc + in->imm + 1;

    if (run->depth == VM_MAX_FRAMES) {
        return FAIL(run, -EINVAL, "call depth exceeds %d frames", VM_MAX_FRAMES);
    }
    if (target < 0 || (uint64_t)target >= run->prog->n) {
        return FAIL(run, -EINVAL, "call target %" PRId64 " out of range", target);
    }
    f = &run->frames[run->depth];
    f->ret_pc = run->pc + 1;
    memcpy(f->saved, &run->reg[6], sizeof(f->saved));
    f->fp = run->reg[10];
    run->depth++;
    run->reg[10] = frame_top(run, run->depth);
    memset((void *)(uintptr_t)(run->reg[10] - VM_STACK_BYTES), 0, VM_STACK_BYTES);
    run->pc = (size_t)target;
    return 0;
}

/* Returns 1 when the entry function exits: the run is over. */
static int exit_frame(struct vm_run *run)
{
    const struct frame *f;

    if (run->depth == 1) {
        return 1;
    }
    run->depth--;
    f = &run->frames[run->depth];
    memcpy(&run->reg[6], f->saved, sizeof(f->saved));
    run->reg[10] = f->fp;
    run->pc = f->ret_pc;
    return 0;
}

static int exec_jmp(struct vm_run *run, const struct vm_insn *in)
{
    bool w32 = BPF_CLASS(in->code) == BPF_JMP32;
    uint8_t op = BPF_OP(in->code);
    uint64_t b = BPF_SRC(in->code) == BPF_X ? run->reg[in->src] : (uint64_t)(int64_t)in->imm;
    bool ok = true;
    bool taken;

    if (!w32 && op == BPF_JA) {
        run->pc += (int64_t)in->off + 1;
        return 0;
    }
    if (!w32 && op == BPF_CALL) {
        return in->src == BPF_PSEUDO_CALL ? call_local(run, in) : call_helper(run, in);
    }
    if (!w32 && op == BPF_EXIT) {
        return exit_frame(run);
    }
    taken = cond(op, run->reg[in->dst], b, w32, &ok);
    if (!ok) {
        return FAIL(run, -EINVAL, "unknown opcode 0x%02x", in->code);
    }
    run->pc += taken ? (int64_t)in->off + 1 : 1;
    return 0;
}

/* ---- loads and stores -------------------------------------------------------- */

static int exec_ldx(struct vm_run *run, const struct vm_insn *in)
{
    unsigned len = size_bytes(in->code);
    void *p = mem_ptr(run, run->reg[in->src] + (int64_t)in->off, len, false);

    if (!p) {
        return -EFAULT;
    }
    run->reg[in->dst] = load(p, len);
    run->pc++;
    return 0;
}

/* BPF_ST (imm) and BPF_STX|BPF_MEM (src register). */
static int exec_store(struct vm_run *run, const struct vm_insn *in, uint64_t value)
{
    unsigned len = size_bytes(in->code);
    void *p = mem_ptr(run, run->reg[in->dst] + (int64_t)in->off, len, true);

    if (!p) {
        return -EFAULT;
    }
    store(p, len, value);
    run->pc++;
    return 0;
}

/* Sequential semantics: one thread runs a program's accesses to a region at a time. */
static int exec_atomic(struct vm_run *run, const struct vm_insn *in)
{
    unsigned len = size_bytes(in->code);
    void *p = mem_ptr(run, run->reg[in->dst] + (int64_t)in->off, len, true);
    uint64_t *src = &run->reg[in->src];
    uint64_t old, val;
    uint64_t mask = len == 4 ? UINT32_MAX : UINT64_MAX;

    if (!p) {
        return -EFAULT;
    }
    old = load(p, len);
    switch (in->imm & ~BPF_FETCH) {
    case BPF_ADD:
        val = old + *src;
        break;
    case BPF_OR:
        val = old | *src;
        break;
    case BPF_AND:
        val = old & *src;
        break;
    case BPF_XOR:
        val = old ^ *src;
        break;
    case BPF_XCHG & ~BPF_FETCH:
        val = *src;
        break;
    case BPF_CMPXCHG & ~BPF_FETCH:
        val = old == (run->reg[0] & mask) ? *src : old;
        store(p, len, val);
        run->reg[0] = old;
        run->pc++;
        return 0;
    default:
        return FAIL(run, -EINVAL, "unknown atomic operation 0x%02x", (unsigned)in->imm);
    }
    store(p, len, val);
    if (in->imm & BPF_FETCH) {
        *src = old;
    }
    run->pc++;
    return 0;
}

static int exec_lddw(struct vm_run *run, const struct vm_insn *in)
{
    if (in->code != (BPF_LD | BPF_IMM | BPF_DW) || run->pc + 1 >= run->prog->n) {
        return FAIL(run, -EINVAL, "unknown opcode 0x%02x", in->code);
    }
    run->reg[in->dst] = (uint32_t)in[0].imm | (uint64_t)(uint32_t)in[1].imm << 32;
    run->pc += 2;
    return 0;
}

/* ---- the loop ---------------------------------------------------------------- */

/* One instruction: 0 to go on, 1 when the program exited, < 0 on a fault. */
static int step(struct vm_run *run, const struct vm_insn *in)
{
    uint8_t cls = BPF_CLASS(in->code);

    if ((cls == BPF_LDX || cls == BPF_ST) && BPF_MODE(in->code) != BPF_MEM) {
        return FAIL(run, -EINVAL, "unknown opcode 0x%02x", in->code);
    }
    if (cls == BPF_STX && BPF_MODE(in->code) != BPF_MEM && BPF_MODE(in->code) != BPF_ATOMIC) {
        return FAIL(run, -EINVAL, "unknown opcode 0x%02x", in->code);
    }
    switch (cls) {
    case BPF_ALU:
    case BPF_ALU64:
        return exec_alu(run, in);
    case BPF_JMP:
    case BPF_JMP32:
        return exec_jmp(run, in);
    case BPF_LDX:
        return exec_ldx(run, in);
    case BPF_ST:
        return exec_store(run, in, (uint64_t)(int64_t)in->imm);
    case BPF_STX:
        return BPF_MODE(in->code) == BPF_ATOMIC ? exec_atomic(run, in)
                                                : exec_store(run, in, run->reg[in->src]);
    default:
        return exec_lddw(run, in);
    }
}

static int loop(struct vm_run *run)
{
    int rc;

    do {
        if (run->pc >= run->prog->n) {
            return FAIL(run, -EINVAL, "pc out of range (program has %zu insns)", run->prog->n);
        }
        if (run->left-- == 0) {
            return FAIL(run, -E2BIG, "instruction budget (%" PRIu64 ") exhausted",
                        run->prog->budget);
        }
        rc = step(run, &run->prog->insns[run->pc]);
    } while (rc == 0);
    return rc < 0 ? rc : 0;
}

static int check_args(const struct vm_prog *prog, const struct vm_args *args, struct vm_error *err)
{
    if (!prog || !prog->verified) {
        vm_error_set(err, SIZE_MAX, "program not verified");
        return -EINVAL;
    }
    if (!args || args->n_regions > VM_MAX_REGIONS || (args->n_regions && !args->regions) ||
        (args->ctx_size && !args->ctx)) {
        vm_error_set(err, SIZE_MAX, "bad run arguments");
        return -EINVAL;
    }
    return 0;
}

int vm_run(const struct vm_prog *prog, const struct vm_args *args, uint64_t *ret,
           struct vm_error *err)
{
    struct vm_error scratch;
    struct vm_run run;
    int rc = check_args(prog, args, err);

    if (rc) {
        return rc;
    }
    memset(&run, 0, offsetof(struct vm_run, stack));
    memset(run.stack + (VM_MAX_FRAMES - 1) * VM_STACK_BYTES, 0, VM_STACK_BYTES);
    run.prog = prog;
    run.args = args;
    run.err = err ? err : &scratch;
    run.left = prog->budget;
    run.depth = 1;
    run.n_regions = args->n_regions;
    if (args->n_regions) {
        memcpy(run.regions, args->regions, args->n_regions * sizeof(*args->regions));
    }
    run.reg[1] = (uint64_t)(uintptr_t)args->ctx;
    run.reg[10] = frame_top(&run, 1);
    rc = loop(&run);
    if (rc == 0 && ret) {
        *ret = run.reg[0];
    }
    return rc;
}

int vm_prog_init(struct vm_prog *prog, const struct vm_insn *insns, size_t n,
                 const struct vm_env *env, struct vm_error *err)
{
    int rc = vm_verify(insns, n, env, err);

    *prog = (struct vm_prog){insns, n, env, VM_DEFAULT_BUDGET, rc == 0};
    return rc;
}

/* ---- for helpers --------------------------------------------------------------- */

void *vm_run_user(struct vm_run *run)
{
    return run->args->user;
}

void *vm_run_check(struct vm_run *run, uint64_t addr, uint64_t size, bool write)
{
    struct vm_region scratch[2];
    const struct vm_region *r;

    if (size == 0) {
        return NULL;
    }
    r = find_region(run, addr, size, write, scratch);
    return r && (r->writable || !write) ? (void *)(uintptr_t)addr : NULL;
}

int vm_run_add_region(struct vm_run *run, const void *ptr, uint64_t size, bool writable)
{
    struct vm_region r = {(uint64_t)(uintptr_t)ptr, size, writable};
    unsigned i;

    if (size == 0) {
        return -EINVAL;
    }
    for (i = 0; i < run->n_regions; i++) {
        const struct vm_region *o = &run->regions[i];

        if (o->start == r.start && o->size == r.size && o->writable == r.writable) {
            return 0;
        }
    }
    if (run->n_regions == VM_MAX_REGIONS) {
        return -ENOSPC;
    }
    run->regions[run->n_regions++] = r;
    return 0;
}

void vm_run_fault(struct vm_run *run, const char *reason, ...)
{
    va_list ap;

    if (run->faulted) {
        return;
    }
    run->faulted = true;
    va_start(ap, reason);
    vsnprintf(run->fault_msg, sizeof(run->fault_msg), reason, ap);
    va_end(ap);
}
