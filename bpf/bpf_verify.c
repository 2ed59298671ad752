/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * bpf_verify.c — the filter VM's verifier: what can be refused before a run.
 *
 * Owns nothing past the call: vm_verify() allocates per-slot scratch arrays,
 * makes five passes over the instruction array and frees them. It may run on
 * any thread (the control thread when a filter is loaded) and shares no state.
 *
 * Passes, each stopping at the first error:
 *   1. lddw pairs: mark every second slot; refuse a truncated or malformed one;
 *   2. each instruction alone: known opcode, registers, reserved fields,
 *      helper IDs, constant r10 offsets; collect bpf-to-bpf call targets;
 *   3. control flow: functions (entry + call targets) end in exit or ja; jumps
 *      land in range, forward, inside their function, never mid-lddw;
 *   4. calls: no recursion, at most VM_MAX_FRAMES frames deep;
 *   5. a forward dataflow of "initialised" bits per register: no register is
 *      read before it is written, r0 is set at every exit. With forward jumps
 *      only, one scan in slot order sees every predecessor first.
 * It proves no bounds for pointers: the interpreter checks every access. It
 * must never read outside the array it was given, however hostile the
 * program, and its recursion is bounded by VM_MAX_FRAMES.
 */
#include "bpf_vm.h"

#include <errno.h>
#include <linux/bpf.h>
#include <stdlib.h>

/* Per-slot flags. */
#define F_LDDW_HI 1 /* second slot of an lddw: not an instruction */
#define F_FUNC 2    /* a function starts here */

/* Per-slot dataflow state: bit r = register r initialised; REACHED = some path gets here. */
#define REACHED 0x8000u
#define REG(r) (1u << (r))
#define ARGS (REG(1) | REG(2) | REG(3) | REG(4) | REG(5))

struct verifier {
    const struct vm_insn *insns;
    size_t n;
    const struct vm_env *env;
    struct vm_error *err;
    uint8_t *flags;   /* F_* per slot */
    uint32_t *fn;     /* function index per slot */
    uint32_t *fstart; /* first slot of each function */
    uint32_t nfn;     /* functions */
    int8_t *height;   /* frames a call to each function needs; 0 unknown, -1 on the path */
    uint16_t *live;   /* dataflow state per slot */
};

#define REJECT(v, pc, ...) (vm_error_set((v)->err, (pc), __VA_ARGS__), -EINVAL)

static bool is_lddw(const struct vm_insn *in)
{
    return in->code == (BPF_LD | BPF_IMM | BPF_DW);
}

static size_t jump_target(size_t pc, const struct vm_insn *in)
{
    return pc + (int64_t)in->off + 1;
}

static bool is_local_call(const struct vm_insn *in)
{
    return in->code == (BPF_JMP | BPF_CALL) && in->src == BPF_PSEUDO_CALL;
}

/* ---- pass 1: lddw pairs ------------------------------------------------------ */

static int pass_lddw(struct verifier *v)
{
    size_t pc;

    for (pc = 0; pc < v->n; pc++) {
        const struct vm_insn *hi;

        if (!is_lddw(&v->insns[pc])) {
            continue;
        }
        if (pc + 1 == v->n) {
            return REJECT(v, pc, "truncated lddw (no second slot)");
        }
        hi = &v->insns[pc + 1];
        if (hi->code || hi->dst || hi->src || hi->off) {
            return REJECT(v, pc, "malformed lddw second slot");
        }
        v->flags[++pc] |= F_LDDW_HI;
    }
    return 0;
}

/* ---- pass 2: each instruction alone ------------------------------------------ */

static bool alu_known(uint8_t code)
{
    uint8_t op = BPF_OP(code);
    bool wide = BPF_CLASS(code) == BPF_ALU64;

    if (op == BPF_NEG) {
        return BPF_SRC(code) == BPF_K;
    }
    if (op == BPF_END) {
        return !wide; /* ALU64 END is v4's bswap */
    }
    return op <= BPF_ARSH; /* ADD .. ARSH: 0x00 .. 0xc0 */
}

static bool jmp_known(uint8_t code)
{
    uint8_t op = BPF_OP(code);
    bool w32 = BPF_CLASS(code) == BPF_JMP32;

    if (op == BPF_JA || op == BPF_CALL || op == BPF_EXIT) {
        return !w32 && BPF_SRC(code) == BPF_K; /* JMP32 JA is v4's gotol */
    }
    return op <= BPF_JSLE;
}

static bool opcode_known(uint8_t code)
{
    switch (BPF_CLASS(code)) {
    case BPF_ALU:
    case BPF_ALU64:
        return alu_known(code);
    case BPF_JMP:
    case BPF_JMP32:
        return jmp_known(code);
    case BPF_LDX:
    case BPF_ST:
        return BPF_MODE(code) == BPF_MEM;
    case BPF_STX:
        return BPF_MODE(code) == BPF_MEM || (BPF_MODE(code) == BPF_ATOMIC &&
                                             (BPF_SIZE(code) == BPF_W || BPF_SIZE(code) == BPF_DW));
    default:
        return code == (BPF_LD | BPF_IMM | BPF_DW);
    }
}

static unsigned size_bytes(uint8_t code)
{
    static const unsigned bytes[4] = {4, 2, 1, 8}; /* W, H, B, DW */

    return bytes[BPF_SIZE(code) >> 3];
}

/* A constant offset from r10 must stay within the frame's 512 bytes. */
static int check_stack(struct verifier *v, size_t pc, const struct vm_insn *in, uint8_t base)
{
    int len = (int)size_bytes(in->code);

    if (base == 10 && (in->off < -VM_STACK_BYTES || in->off + len > 0)) {
        return REJECT(v, pc, "stack access r10%+d (%d bytes) outside [-%d, 0)", in->off, len,
                      VM_STACK_BYTES);
    }
    return 0;
}

static int check_alu(struct verifier *v, size_t pc, const struct vm_insn *in)
{
    uint8_t op = BPF_OP(in->code);

    if (in->off && (op == BPF_DIV || op == BPF_MOD)) {
        return REJECT(v, pc, "signed division/modulo (off=%d) is BPF v4, not supported", in->off);
    }
    if (in->off && op == BPF_MOV) {
        return REJECT(v, pc, "sign-extending mov (off=%d) is BPF v4, not supported", in->off);
    }
    if (in->off || (BPF_SRC(in->code) == BPF_K && in->src) ||
        (BPF_SRC(in->code) == BPF_X && op != BPF_END && in->imm) || (op == BPF_NEG && in->imm)) {
        return REJECT(v, pc, "reserved field set in opcode 0x%02x", in->code);
    }
    if (op == BPF_END && in->imm != 16 && in->imm != 32 && in->imm != 64) {
        return REJECT(v, pc, "byte swap width %d (must be 16, 32 or 64)", in->imm);
    }
    if ((op == BPF_END || op == BPF_NEG) && in->src) {
        return REJECT(v, pc, "reserved field set in opcode 0x%02x", in->code);
    }
    return 0;
}

static int check_call(struct verifier *v, size_t pc, const struct vm_insn *in)
{
    const struct vm_env *env = v->env;
    int64_t target = (int64_t)pc + in->imm + 1;

    if (in->dst || in->off || in->src > BPF_PSEUDO_CALL) {
        return REJECT(v, pc, "unsupported call (src=%u dst=%u off=%d)", in->src, in->dst, in->off);
    }
    if (in->src == 0) {
        if (in->imm < 0 || (size_t)in->imm >= env->n_helpers || !env->helpers[in->imm]) {
            return REJECT(v, pc, "unknown helper %d", in->imm);
        }
        return 0;
    }
    if (target < 0 || (uint64_t)target >= v->n) {
        return REJECT(v, pc, "call target %lld out of range (program has %zu insns)",
                      (long long)target, v->n);
    }
    if (v->flags[target] & F_LDDW_HI) {
        return REJECT(v, pc, "call target %lld is the second slot of an lddw", (long long)target);
    }
    v->flags[target] |= F_FUNC;
    return 0;
}

static int check_jmp(struct verifier *v, size_t pc, const struct vm_insn *in)
{
    uint8_t op = BPF_OP(in->code);
    bool bad;

    if (op == BPF_CALL) {
        return check_call(v, pc, in);
    }
    if (op == BPF_JA || op == BPF_EXIT) {
        bad = in->dst || in->src || in->imm || (op == BPF_EXIT && in->off);
    } else {
        bad = BPF_SRC(in->code) == BPF_K ? in->src != 0 : in->imm != 0;
    }
    if (bad) {
        return REJECT(v, pc, "reserved field set in opcode 0x%02x", in->code);
    }
    return 0;
}

static bool atomic_known(int32_t imm)
{
    switch (imm & ~BPF_FETCH) {
    case BPF_ADD:
    case BPF_OR:
    case BPF_AND:
    case BPF_XOR:
        return true;
    }
    return imm == BPF_XCHG || imm == BPF_CMPXCHG;
}

static int check_mem(struct verifier *v, size_t pc, const struct vm_insn *in)
{
    uint8_t cls = BPF_CLASS(in->code);
    bool atomic = BPF_MODE(in->code) == BPF_ATOMIC;

    if (atomic && !atomic_known(in->imm)) {
        return REJECT(v, pc, "unknown atomic operation 0x%x", (unsigned)in->imm);
    }
    if (atomic && (in->imm & BPF_FETCH) && in->imm != BPF_CMPXCHG && in->src == 10) {
        return REJECT(v, pc, "r10 is read-only (atomic fetch into it)");
    }
    if ((cls == BPF_ST && in->src) || (cls != BPF_ST && !atomic && in->imm)) {
        return REJECT(v, pc, "reserved field set in opcode 0x%02x", in->code);
    }
    return check_stack(v, pc, in, cls == BPF_LDX ? in->src : in->dst);
}

static bool writes_dst(uint8_t code)
{
    uint8_t cls = BPF_CLASS(code);

    return cls == BPF_ALU || cls == BPF_ALU64 || cls == BPF_LDX || cls == BPF_LD;
}

static int check_insn(struct verifier *v, size_t pc)
{
    const struct vm_insn *in = &v->insns[pc];

    if (!opcode_known(in->code)) {
        return REJECT(v, pc, "unknown opcode 0x%02x", in->code);
    }
    if (in->dst > 10 || in->src > 10) {
        return REJECT(v, pc, "bad register (dst r%u, src r%u; r0..r10 exist)", in->dst, in->src);
    }
    if (in->dst == 10 && writes_dst(in->code)) {
        return REJECT(v, pc, "r10 is read-only (frame pointer)");
    }
    switch (BPF_CLASS(in->code)) {
    case BPF_ALU:
    case BPF_ALU64:
        return check_alu(v, pc, in);
    case BPF_JMP:
    case BPF_JMP32:
        return check_jmp(v, pc, in);
    case BPF_LD:
        if (in->src || in->off) {
            return REJECT(v, pc, "lddw with src=%u off=%d: map references must be resolved first",
                          in->src, in->off);
        }
        return 0;
    default:
        return check_mem(v, pc, in);
    }
}

static int pass_insns(struct verifier *v)
{
    size_t pc;
    int rc;

    v->flags[0] |= F_FUNC;
    for (pc = 0; pc < v->n; pc++) {
        if (!(v->flags[pc] & F_LDDW_HI) && (rc = check_insn(v, pc))) {
            return rc;
        }
    }
    return 0;
}

/* ---- pass 3: control flow ------------------------------------------------------ */

static void index_functions(struct verifier *v)
{
    size_t pc;

    v->nfn = 0;
    for (pc = 0; pc < v->n; pc++) {
        if (v->flags[pc] & F_FUNC) {
            v->fstart[v->nfn++] = pc;
        }
        v->fn[pc] = v->nfn - 1;
    }
}

/* The last slot of every function must be exit or ja: nothing falls off its end. */
static int check_ends(struct verifier *v)
{
    uint32_t f;

    for (f = 0; f < v->nfn; f++) {
        size_t last = (f + 1 < v->nfn ? v->fstart[f + 1] : v->n) - 1;
        uint8_t code = v->insns[last].code;

        if (v->flags[last] & F_LDDW_HI) {
            return REJECT(v, last - 1, "falls off the end of the %s (ends with an lddw)",
                          f ? "function" : "program");
        }
        if (code != (BPF_JMP | BPF_EXIT) && code != (BPF_JMP | BPF_JA)) {
            return REJECT(v, last, "falls off the end of the %s (last insn must be exit or ja)",
                          f ? "function" : "program");
        }
    }
    return 0;
}

static int check_jump(struct verifier *v, size_t pc, const struct vm_insn *in)
{
    int64_t target = (int64_t)pc + in->off + 1;

    if (target < 0 || (uint64_t)target >= v->n) {
        return REJECT(v, pc, "jump out of range (target %lld, program has %zu insns)",
                      (long long)target, v->n);
    }
    if ((size_t)target <= pc) {
        return REJECT(v, pc, "back-edge to insn %lld (loops are not supported)", (long long)target);
    }
    if (v->flags[target] & F_LDDW_HI) {
        return REJECT(v, pc, "jump into the second slot of the lddw at insn %lld",
                      (long long)target - 1);
    }
    if (v->fn[target] != v->fn[pc]) {
        return REJECT(v, pc, "jump to insn %lld leaves its function (which starts at insn %u)",
                      (long long)target, v->fstart[v->fn[pc]]);
    }
    return 0;
}

static bool is_jump(const struct vm_insn *in)
{
    uint8_t op = BPF_OP(in->code);
    uint8_t cls = BPF_CLASS(in->code);

    return (cls == BPF_JMP || cls == BPF_JMP32) && op != BPF_CALL && op != BPF_EXIT;
}

static int pass_flow(struct verifier *v)
{
    size_t pc;
    int rc;

    index_functions(v);
    if ((rc = check_ends(v))) {
        return rc;
    }
    for (pc = 0; pc < v->n; pc++) {
        const struct vm_insn *in = &v->insns[pc];

        if (!(v->flags[pc] & F_LDDW_HI) && is_jump(in) && (rc = check_jump(v, pc, in))) {
            return rc;
        }
    }
    return 0;
}

/* ---- pass 4: calls ----------------------------------------------------------------- */

/* Frames needed by a call to function f made when @p depth frames are live; -EINVAL on error. */
static int frames_for(struct verifier *v, uint32_t f, int depth)
{
    size_t end = f + 1 < v->nfn ? v->fstart[f + 1] : v->n;
    size_t pc;
    int most = 1;

    if (v->height[f] > 0) {
        return v->height[f];
    }
    v->height[f] = -1;
    for (pc = v->fstart[f]; pc < end; pc++) {
        const struct vm_insn *in = &v->insns[pc];
        uint32_t g;
        int h;

        if ((v->flags[pc] & F_LDDW_HI) || !is_local_call(in)) {
            continue;
        }
        g = v->fn[pc + (int64_t)in->imm + 1]; /* in range: checked in pass 2 */
        if (v->height[g] < 0) {
            return REJECT(v, pc, "recursive call to the function at insn %u", v->fstart[g]);
        }
        if (depth + 1 > VM_MAX_FRAMES) {
            return REJECT(v, pc, "call depth exceeds %d frames", VM_MAX_FRAMES);
        }
        if ((h = frames_for(v, g, depth + 1)) < 0) {
            return h;
        }
        if (depth + h > VM_MAX_FRAMES) {
            return REJECT(v, pc, "call depth exceeds %d frames", VM_MAX_FRAMES);
        }
        most = h + 1 > most ? h + 1 : most;
    }
    v->height[f] = (int8_t)most;
    return most;
}

/* ---- pass 5: initialised registers ---------------------------------------------- */

/* Registers an instruction reads. */
static unsigned reads(const struct vm_insn *in)
{
    uint8_t cls = BPF_CLASS(in->code);
    uint8_t op = BPF_OP(in->code);
    unsigned x = BPF_SRC(in->code) == BPF_X ? REG(in->src) : 0;

    switch (cls) {
    case BPF_ALU:
    case BPF_ALU64:
        return op == BPF_MOV ? x : op == BPF_END ? REG(in->dst) : REG(in->dst) | x;
    case BPF_JMP:
    case BPF_JMP32:
        if (op == BPF_EXIT) {
            return REG(0);
        }
        return op == BPF_JA || op == BPF_CALL ? 0 : REG(in->dst) | x;
    case BPF_LDX:
        return REG(in->src);
    case BPF_ST:
        return REG(in->dst);
    case BPF_STX:
        return REG(in->dst) | REG(in->src) |
               (BPF_MODE(in->code) == BPF_ATOMIC && in->imm == BPF_CMPXCHG ? REG(0) : 0);
    default:
        return 0;
    }
}

/* State after an instruction, from the state before it. */
static unsigned transfer(const struct vm_insn *in, unsigned s)
{
    uint8_t cls = BPF_CLASS(in->code);

    if (writes_dst(in->code)) {
        return s | REG(in->dst);
    }
    if ((cls == BPF_JMP) && BPF_OP(in->code) == BPF_CALL) {
        return (s & ~ARGS) | REG(0);
    }
    if (cls == BPF_STX && BPF_MODE(in->code) == BPF_ATOMIC) {
        return in->imm == BPF_CMPXCHG ? s : (in->imm & BPF_FETCH) ? s | REG(in->src) : s;
    }
    return s;
}

static void merge(struct verifier *v, size_t to, unsigned s)
{
    v->live[to] = (v->live[to] & REACHED) ? (v->live[to] & (s | REACHED)) : (s | REACHED);
}

static int check_reads(struct verifier *v, size_t pc, const struct vm_insn *in, unsigned s)
{
    unsigned missing = reads(in) & ~s;
    unsigned r;

    if (!missing) {
        return 0;
    }
    if (in->code == (BPF_JMP | BPF_EXIT)) {
        return REJECT(v, pc, "r0 is not set on every path to this exit");
    }
    for (r = 0; !(missing & REG(r)); r++) {
    }
    return REJECT(v, pc, "reads r%u before it is written", r);
}

static int pass_init(struct verifier *v)
{
    uint32_t f;
    size_t pc;
    int rc;

    for (f = 0; f < v->nfn; f++) {
        v->live[v->fstart[f]] = REACHED | REG(10) | (f ? ARGS : REG(1));
    }
    for (pc = 0; pc < v->n; pc++) {
        const struct vm_insn *in = &v->insns[pc];
        unsigned s = v->live[pc] & ~REACHED;
        unsigned out;

        if ((v->flags[pc] & F_LDDW_HI) || !(v->live[pc] & REACHED)) {
            continue;
        }
        if ((rc = check_reads(v, pc, in, s))) {
            return rc;
        }
        out = transfer(in, s);
        if (is_jump(in)) {
            merge(v, jump_target(pc, in), out);
        }
        if (in->code != (BPF_JMP | BPF_EXIT) && in->code != (BPF_JMP | BPF_JA)) {
            merge(v, pc + (is_lddw(in) ? 2 : 1), out);
        }
    }
    return 0;
}

/* ---- entry ------------------------------------------------------------------------ */

static int alloc_scratch(struct verifier *v)
{
    v->flags = calloc(v->n, sizeof(*v->flags));
    v->fn = calloc(v->n, sizeof(*v->fn));
    v->fstart = calloc(v->n, sizeof(*v->fstart));
    v->height = calloc(v->n, sizeof(*v->height));
    v->live = calloc(v->n, sizeof(*v->live));
    return v->flags && v->fn && v->fstart && v->height && v->live ? 0 : -ENOMEM;
}

static void free_scratch(struct verifier *v)
{
    free(v->flags);
    free(v->fn);
    free(v->fstart);
    free(v->height);
    free(v->live);
}

static int run_passes(struct verifier *v)
{
    int rc;

    if ((rc = pass_lddw(v)) || (rc = pass_insns(v)) || (rc = pass_flow(v))) {
        return rc;
    }
    if ((rc = frames_for(v, 0, 1)) < 0) {
        return rc;
    }
    return pass_init(v);
}

int vm_verify(const struct vm_insn *insns, size_t n, const struct vm_env *env, struct vm_error *err)
{
    struct verifier v = {.insns = insns, .n = n, .env = env, .err = err};
    int rc;

    if (!insns || n == 0) {
        return REJECT(&v, SIZE_MAX, "empty program");
    }
    if (n > VM_MAX_INSNS) {
        return REJECT(&v, SIZE_MAX, "program has %zu insns (at most %d)", n, VM_MAX_INSNS);
    }
    if (!env) {
        return REJECT(&v, SIZE_MAX, "no helper environment");
    }
    if (alloc_scratch(&v)) {
        free_scratch(&v);
        vm_error_set(err, SIZE_MAX, "out of memory");
        return -ENOMEM;
    }
    rc = run_passes(&v);
    free_scratch(&v);
    return rc;
}
