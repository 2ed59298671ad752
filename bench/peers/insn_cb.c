/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * insn_cb: the plainest exact PC trace QEMU's plugin API offers, one
 * callback per executed instruction, as a peer of sluice in bench/.
 *
 * Owns: nothing of its own but the instrumentation; the per-vCPU buffers,
 * sums, out file and consumer are peer.h's. At translation every
 * instruction gets an exec callback (qemu_plugin_register_vcpu_insn_exec_cb)
 * whose udata is its PC; the callback appends the PC to its vCPU's buffer
 * and, when the buffer is full, hands it to peer_submit (folded in the vCPU
 * thread, or by the consumer thread with consumer=on). An exec callback
 * runs before its instruction, so a faulting instruction or the syscall
 * that ends the program is in the trace, as in tests/plugin/reftrace.c.
 *
 * Threads: insn_exec on the vCPU thread that executes the instruction, and
 * it touches only that vCPU's buffer; tb_trans on the translating vCPU
 * thread; vcpu_init on QEMU's vCPU-creating thread; at_exit on the thread
 * that ends the program, after QEMU has removed all other callbacks.
 *
 * Never: block in insn_exec except in peer_submit on a full queue; touch
 * another vCPU's buffer outside at_exit.
 *
 * Arguments: out=FILE (default stderr), consumer=on|off (default off).
 * Output, one line per vCPU index that ran:
 *   pcsum vcpu=<i> n=<pcs> h=0x<016 hex>
 */
#include "peer.h"

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

_Static_assert(sizeof(void *) >= sizeof(uint64_t), "a guest PC travels in a udata pointer");

static void insn_exec(unsigned int vcpu_index, void *udata)
{
    struct peer_buf *b = peer_ctx.bufs[vcpu_index];

    b->w[b->n++] = (uint64_t)(uintptr_t)udata;
    if (b->n == PEER_BUF_WORDS) {
        peer_ctx.bufs[vcpu_index] = peer_submit(b);
    }
}

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    size_t n = qemu_plugin_tb_n_insns(tb);

    (void)id;
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        uintptr_t pc = (uintptr_t)qemu_plugin_insn_vaddr(insn);

        qemu_plugin_register_vcpu_insn_exec_cb(insn, insn_exec, QEMU_PLUGIN_CB_NO_REGS, (void *)pc);
    }
}

static void vcpu_init(qemu_plugin_id_t id, unsigned int vcpu_index)
{
    (void)id;
    peer_vcpu_init(vcpu_index, true);
}

static void at_exit(qemu_plugin_id_t id, void *udata)
{
    (void)id, (void)udata;
    peer_finish();
    peer_print_pcsums();
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
                                           char **argv)
{
    (void)info;
    if (peer_parse("insn_cb", true, argc, argv) != 0 || peer_start() != 0) {
        return -1;
    }
    qemu_plugin_register_vcpu_init_cb(id, vcpu_init);
    qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
    qemu_plugin_register_atexit_cb(id, at_exit, NULL);
    return 0;
}
