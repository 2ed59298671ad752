/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * mem: memory accesses with their values, as a peer of sluice in bench/,
 * through a memory callback per access and qemu_plugin_mem_get_value().
 *
 * Owns: per vCPU, the count of loads and stores (mem_counts). Every
 * instruction gets a memory callback (QEMU_PLUGIN_MEM_RW), called after the
 * access, so a faulting access is never seen; accesses made by a helper
 * (atomics under CF_PARALLEL) reach the callback of the instruction that
 * made them. The callback appends to its vCPU's buffer, as 64-bit words:
 *
 *   addr, value, size | is_store << 8              (size 1, 2, 4 or 8)
 *   addr, value low, value high, 16 | is_store << 8    (16-byte accesses)
 *
 * and peer.h folds those words, in order, into the vCPU's h, in the vCPU
 * thread or, with consumer=on, in the consumer thread. The value is the
 * access's, zero-extended (not sign-extended by the load), in the guest's
 * byte order as a number.
 *
 * Threads: mem_access on the vCPU thread making the access, touching only
 * that vCPU's buffer and counts; tb_trans on the translating thread;
 * vcpu_init on QEMU's vCPU-creating thread; at_exit on the thread ending the
 * program, after QEMU has removed every other callback.
 *
 * Never: block in mem_access except in peer_submit on a full queue; split a
 * record across buffers (a buffer always has room for a whole one).
 *
 * Arguments: out=FILE (default stderr), consumer=on|off (default off).
 * Output, one line per vCPU index that ran:
 *   mem vcpu=<i> loads=<n> stores=<n> h=0x<016 hex>
 */
#include "peer.h"

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

#define MEM_RECORD_MAX 4u /* words of the longest record */

struct mem_counts {
    _Alignas(64) uint64_t loads;
    uint64_t stores;
};

static struct mem_counts mem_counts[PEER_MAX_VCPUS];

static void mem_access(unsigned int vcpu_index, qemu_plugin_meminfo_t info, uint64_t vaddr,
                       void *udata)
{
    struct peer_buf *b = peer_ctx.bufs[vcpu_index];
    qemu_plugin_mem_value v = qemu_plugin_mem_get_value(info);
    uint64_t size = 1ull << qemu_plugin_mem_size_shift(info);
    bool store = qemu_plugin_mem_is_store(info);
    uint64_t *w;

    (void)udata;
    if (b->n + MEM_RECORD_MAX > PEER_BUF_WORDS) {
        b = peer_ctx.bufs[vcpu_index] = peer_submit(b);
    }
    w = b->w + b->n;
    *w++ = vaddr;
    switch (v.type) {
    case QEMU_PLUGIN_MEM_VALUE_U8:
        *w++ = v.data.u8;
        break;
    case QEMU_PLUGIN_MEM_VALUE_U16:
        *w++ = v.data.u16;
        break;
    case QEMU_PLUGIN_MEM_VALUE_U32:
        *w++ = v.data.u32;
        break;
    case QEMU_PLUGIN_MEM_VALUE_U64:
        *w++ = v.data.u64;
        break;
    case QEMU_PLUGIN_MEM_VALUE_U128:
    default:
        *w++ = v.data.u128.low;
        *w++ = v.data.u128.high;
        break;
    }
    *w++ = size | (uint64_t)store << 8;
    b->n = (size_t)(w - b->w);
    if (store) {
        mem_counts[vcpu_index].stores++;
    } else {
        mem_counts[vcpu_index].loads++;
    }
}

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    size_t n = qemu_plugin_tb_n_insns(tb);

    (void)id;
    for (size_t i = 0; i < n; i++) {
        qemu_plugin_register_vcpu_mem_cb(qemu_plugin_tb_get_insn(tb, i), mem_access,
                                         QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_MEM_RW, NULL);
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
    for (unsigned int v = 0; v < PEER_MAX_VCPUS; v++) {
        if (peer_ctx.ran[v]) {
            peer_printf("mem vcpu=%u loads=%" PRIu64 " stores=%" PRIu64 " h=0x%016" PRIx64 "\n", v,
                        mem_counts[v].loads, mem_counts[v].stores, peer_ctx.sums[v].h);
        }
    }
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
                                           char **argv)
{
    (void)info;
    if (peer_parse("mem", true, argc, argv) != 0 || peer_start() != 0) {
        return -1;
    }
    qemu_plugin_register_vcpu_init_cb(id, vcpu_init);
    qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
    qemu_plugin_register_atexit_cb(id, at_exit, NULL);
    return 0;
}
