/* SPDX-License-Identifier: GPL-2.0-or-later */
/**
 * @file capstone_lib.h
 * @brief The capstone functions `dump` disassembles with, from libcapstone
 *        loaded the first time an instruction is to be disassembled.
 *
 * Why not linked: libcapstone's tables hold some 77 000 pointers the
 * dynamic loader relocates at every start (about 6 ms of CPU here: the
 * largest part of `sluice`'s own start, paid before QEMU starts, by every
 * command, disassembling or not).
 */
#ifndef SLUICE_TOOLS_CAPSTONE_LIB_H
#define SLUICE_TOOLS_CAPSTONE_LIB_H

#include <capstone/capstone.h>

/** The capstone functions used, with capstone's own signatures (capstone.h). */
struct capstone_lib {
    cs_err (*open)(cs_arch arch, cs_mode mode, csh *handle);
    cs_err (*option)(csh handle, cs_opt_type type, size_t value);
    size_t (*disasm)(csh handle, const uint8_t *code, size_t code_size, uint64_t address,
                     size_t count, cs_insn **insn);
    void (*free)(cs_insn *insn, size_t count);
    bool (*insn_group)(csh handle, const cs_insn *insn, unsigned int group_id);
    cs_err (*close)(csh *handle);
};

/**
 * The functions of libcapstone.so.CS_API_MAJOR (the library the headers are
 * of), loaded on the first call; NULL if it cannot be loaded, lacks one, or
 * its cs_version() is of another major version, said once on stderr in one
 * line naming the library (the file loaded, where one was) and the reason.
 * Any thread, one at a time (the caller's lock); the library stays loaded.
 */
const struct capstone_lib *capstone_lib_get(void);

#endif
