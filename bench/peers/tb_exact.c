/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * tb_exact: the fastest exact PC trace QEMU's plugin API allows, as a peer
 * of sluice in bench/: one callback per executed TB instead of one per
 * instruction, and one inline store per instruction to tell how much of the
 * TB ran.
 *
 * Owns: the TB descriptors (one per translation: the PCs of its
 * instructions; never freed, since the API does not say when a TB dies);
 * per vCPU, the descriptor of the TB it entered last (tbx_prev) and a
 * scoreboard word (tbx_score, "done"). The buffers, sums, out file and
 * consumer are peer.h's.
 *
 * How it is exact. At translation each instruction i of a TB gets an inline
 * QEMU_PLUGIN_INLINE_STORE_U64 of i + 1 into its vCPU's "done" word, and the
 * TB gets an exec callback (tbx_exec) whose udata is its descriptor. When
 * tbx_exec runs for the next TB, the previous one has stopped, and "done"
 * says how many of its instructions began: tbx_exec appends the previous
 * descriptor's pcs[0 .. done) to the buffer, clears "done" and remembers
 * the new TB. At thread exit and at program exit the last TB is settled the
 * same way. So a TB left early, by a fault, a syscall or a signal, counts
 * only the instructions that began.
 *
 * When the store happens: the API's header and docs do not say. In QEMU's
 * code (10.0: accel/tcg/translator.c, plugin-gen.c) an instruction's inline
 * ops and its exec callbacks are both emitted at plugin_gen_insn_start,
 * before the instruction's own ops, and a TB's exec callbacks at
 * plugin_gen_tb_start, after the TB's exit-request check and before its
 * first instruction. So the store is done before its instruction runs, and
 * "done" counts the instructions that began: the one that faults, or the
 * syscall that ends the program, included. That is exactly the set whose
 * exec callbacks run, so the trace is insn_cb's and tests/plugin/reftrace.c's
 * (check.py compares them, segv guests included). Were the store after its
 * instruction, the instruction ending a TB (a branch, a fault, a syscall)
 * would never reach its store, and tbx_settle would have to take
 * min(done + 1, n) instructions instead of done; nothing else would change.
 * A TB left before its first store (QEMU does not do that today) settles to
 * nothing, since "done" is cleared at each TB entry, not assumed
 * overwritten.
 *
 * Threads: tbx_exec on the vCPU thread entering the TB, touching only that
 * vCPU's state; tb_trans on the translating thread; vcpu_exit on the
 * exiting guest thread; at_exit on the thread ending the program, after
 * QEMU has removed every other callback. tbx_exit_lock orders the last two:
 * a thread leaving while the program exits settles before at_exit, or not
 * at all.
 *
 * Never: keep a scoreboard pointer across callbacks (QEMU moves the
 * scoreboard when it grows for a new vCPU); block in tbx_exec except in
 * peer_submit on a full queue.
 *
 * Arguments: out=FILE (default stderr), consumer=on|off (default off).
 * Output, one line per vCPU index that ran:
 *   pcsum vcpu=<i> n=<pcs> h=0x<016 hex>
 */
#include "peer.h"

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

/* One translation's instructions. */
struct tbx_desc {
    size_t n;
    uint64_t pc[];
};

/* A vCPU's scoreboard entry, a cache line each so vCPUs do not share one. */
struct tbx_score_entry {
    uint64_t done; /* index + 1 of the last instruction begun in the current TB */
    uint64_t pad[7];
};

static struct qemu_plugin_scoreboard *tbx_score;
static qemu_plugin_u64 tbx_done;
static const struct tbx_desc *tbx_prev[PEER_MAX_VCPUS];
static pthread_mutex_t tbx_exit_lock = PTHREAD_MUTEX_INITIALIZER;
static bool tbx_finished; /* under tbx_exit_lock */

static void tbx_append(unsigned int vcpu, const uint64_t *pc, size_t k)
{
    struct peer_buf *b = peer_ctx.bufs[vcpu];

    while (k > 0) {
        size_t m = PEER_BUF_WORDS - b->n;

        if (m > k) {
            m = k;
        }
        memcpy(b->w + b->n, pc, m * sizeof(*pc));
        b->n += m;
        pc += m;
        k -= m;
        if (b->n == PEER_BUF_WORDS) {
            b = peer_ctx.bufs[vcpu] = peer_submit(b);
        }
    }
}

/* Appends the executed prefix of the vCPU's last TB and clears "done". */
static void tbx_settle(unsigned int vcpu)
{
    struct tbx_score_entry *e = qemu_plugin_scoreboard_find(tbx_score, vcpu);
    const struct tbx_desc *d = tbx_prev[vcpu];

    if (d != NULL) {
        if (e->done > d->n) {
            peer_die("vCPU %u: %" PRIu64 " instructions done in a TB of %zu", vcpu, e->done, d->n);
        }
        tbx_append(vcpu, d->pc, (size_t)e->done);
    }
    e->done = 0;
}

static void tbx_exec(unsigned int vcpu_index, void *udata)
{
    tbx_settle(vcpu_index);
    tbx_prev[vcpu_index] = udata;
}

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    size_t n = qemu_plugin_tb_n_insns(tb);
    struct tbx_desc *d = malloc(sizeof(*d) + n * sizeof(d->pc[0]));

    (void)id;
    if (d == NULL) {
        peer_die("out of memory for a TB of %zu instructions", n);
    }
    d->n = n;
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);

        d->pc[i] = qemu_plugin_insn_vaddr(insn);
        qemu_plugin_register_vcpu_insn_exec_inline_per_vcpu(insn, QEMU_PLUGIN_INLINE_STORE_U64,
                                                            tbx_done, i + 1);
    }
    qemu_plugin_register_vcpu_tb_exec_cb(tb, tbx_exec, QEMU_PLUGIN_CB_NO_REGS, d);
}

static void vcpu_init(qemu_plugin_id_t id, unsigned int vcpu_index)
{
    (void)id;
    peer_vcpu_init(vcpu_index, true);
}

/* A guest thread leaves: its last TB is settled now, before the index is reused. */
static void vcpu_exit(qemu_plugin_id_t id, unsigned int vcpu_index)
{
    (void)id;
    pthread_mutex_lock(&tbx_exit_lock);
    if (!tbx_finished && vcpu_index < PEER_MAX_VCPUS) {
        tbx_settle(vcpu_index);
        tbx_prev[vcpu_index] = NULL;
    }
    pthread_mutex_unlock(&tbx_exit_lock);
}

static void at_exit(qemu_plugin_id_t id, void *udata)
{
    (void)id, (void)udata;
    pthread_mutex_lock(&tbx_exit_lock);
    tbx_finished = true;
    pthread_mutex_unlock(&tbx_exit_lock);
    for (unsigned int v = 0; v < PEER_MAX_VCPUS; v++) {
        if (tbx_prev[v] != NULL) {
            tbx_settle(v);
        }
    }
    peer_finish();
    peer_print_pcsums();
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
                                           char **argv)
{
    (void)info;
    if (peer_parse("tb_exact", true, argc, argv) != 0 || peer_start() != 0) {
        return -1;
    }
    tbx_score = qemu_plugin_scoreboard_new(sizeof(struct tbx_score_entry));
    tbx_done = qemu_plugin_scoreboard_u64_in_struct(tbx_score, struct tbx_score_entry, done);
    qemu_plugin_register_vcpu_init_cb(id, vcpu_init);
    qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
    qemu_plugin_register_vcpu_exit_cb(id, vcpu_exit);
    qemu_plugin_register_atexit_cb(id, at_exit, NULL);
    return 0;
}
