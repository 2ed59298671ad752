/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * icount: the floor of the QEMU-plugin peers in bench/, counting executed
 * instructions with an inline add per instruction and tracing nothing.
 *
 * Owns: a scoreboard of one counter per vCPU (icount_score), a cache line
 * each. At translation every instruction gets an inline
 * QEMU_PLUGIN_INLINE_ADD_U64 of 1 on its vCPU's counter; it is done where an
 * exec callback would be called, before the instruction runs, so the count
 * is the number of PCs insn_cb and tb_exact trace. No callback runs while
 * the guest does; the out file is peer.h's.
 *
 * Threads: tb_trans on the translating thread; vcpu_init on QEMU's
 * vCPU-creating thread; at_exit on the thread ending the program, when the
 * other vCPUs no longer run instrumented code.
 *
 * Never: count per TB (a TB left early would be over-counted).
 *
 * Arguments: out=FILE (default stderr). Output, one line per vCPU index
 * that ran:
 *   icount vcpu=<i> n=<instructions>
 */
#include "peer.h"

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

struct icount_entry {
    uint64_t n;
    uint64_t pad[7];
};

static struct qemu_plugin_scoreboard *icount_score;
static qemu_plugin_u64 icount_n;

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    size_t n = qemu_plugin_tb_n_insns(tb);

    (void)id;
    for (size_t i = 0; i < n; i++) {
        qemu_plugin_register_vcpu_insn_exec_inline_per_vcpu(
            qemu_plugin_tb_get_insn(tb, i), QEMU_PLUGIN_INLINE_ADD_U64, icount_n, 1);
    }
}

static void vcpu_init(qemu_plugin_id_t id, unsigned int vcpu_index)
{
    (void)id;
    peer_vcpu_init(vcpu_index, false);
}

static void at_exit(qemu_plugin_id_t id, void *udata)
{
    (void)id, (void)udata;
    for (unsigned int v = 0; v < PEER_MAX_VCPUS; v++) {
        if (peer_ctx.ran[v]) {
            peer_printf("icount vcpu=%u n=%" PRIu64 "\n", v, qemu_plugin_u64_get(icount_n, v));
        }
    }
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
                                           char **argv)
{
    (void)info;
    if (peer_parse("icount", false, argc, argv) != 0 || peer_start() != 0) {
        return -1;
    }
    icount_score = qemu_plugin_scoreboard_new(sizeof(struct icount_entry));
    icount_n = qemu_plugin_scoreboard_u64_in_struct(icount_score, struct icount_entry, n);
    qemu_plugin_register_vcpu_init_cb(id, vcpu_init);
    qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
    qemu_plugin_register_atexit_cb(id, at_exit, NULL);
    return 0;
}
