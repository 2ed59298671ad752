/* SPDX-License-Identifier: GPL-2.0-or-later */
/**
 * @file symbolize.h
 * @brief Names and disassembles guest pcs for people: `module!symbol+0xoff`
 *        from the file's ELF symbol tables and DWARF (libdw), the instruction
 *        from the file's bytes (capstone). For `sluice run --tool dump`.
 *
 * A pc is placed by the mapping that held it (sluice_map__at()): its file
 * and file offset, turned into a link-time address with the file's PT_LOAD
 * program headers, the address space `nm`, `objdump -d` and `addr2line -e`
 * use. Files are opened by the path the guest's QEMU saw, once each, as the
 * trace names them; separate debug info is found as libdw finds it
 * (/usr/lib/debug/.build-id).
 */
#ifndef SLUICE_TOOLS_SYMBOLIZE_H
#define SLUICE_TOOLS_SYMBOLIZE_H

#include <stddef.h>
#include <stdint.h>

#include "sluice/consumer.h"

/** What sym_describe() writes. */
enum sym_flags {
    SYM_SYMBOLS = 1, /**< module!symbol+0xoff (else nothing) */
    SYM_DISASM = 2,  /**< the instruction, disassembled */
    SYM_LINES = 4,   /**< file:line from DWARF line info, where the file has it */
};

/**
 * Set up for @p flags (enum sym_flags). Main thread, before the session.
 * Never fails (without memory for the per-thread caches it is only slower).
 */
void sym_init(unsigned flags);

/**
 * Write what is known of @p pc of thread @p t into @p buf, ASCII, at most
 * @p cap bytes (cut short past that), no NUL, no newline:
 *   `ls!main+0x10 (main.c:12)  mov eax, 1`
 * The module is the file's last path component, control characters as '?';
 * `!0x<address>` where no symbol holds the pc (its link-time address);
 * `@0x<file offset>` for a file that is not ELF; `[anon]` for anonymous
 * memory and `[?]` where no mapping is known, both without disassembly (no
 * bytes to read). A pc whose file cannot be opened or read keeps its name,
 * without disassembly; an instruction capstone does not decode (newer than
 * it: aarch64 SVE and LSE atomics for capstone 4; or invalid) prints
 * `.inst 0x<word> (not decoded)`, x86 `(not decoded)`.
 * x86_64 in Intel syntax, a direct branch's target followed by
 * ` <symbol+0xoff>` (`<module!symbol+0xoff>` in another file) where a symbol
 * holds it; riscv64 has no disassembly (capstone 4 has no
 * RISC-V). Any worker thread, any number at once (a lock around libdw and
 * capstone; a per-thread cache of recent pcs in front of it).
 * @return bytes written (0 when @p flags asked for nothing).
 */
size_t sym_describe(const struct sluice_thread_info *t, uint64_t pc, char *buf, size_t cap);

/**
 * Instructions of unknown mapping seen ([?]). Any thread.
 */
uint64_t sym_unknown(void);

/**
 * The file mapped at guest address @p addr of thread @p t's process, as one
 * word: sluice_map__file_at()'s identity folded (0: none known), so two files
 * one path held during the run are told apart. Worker thread, from a worker
 * callback. Needs no sym_init().
 */
uint64_t sym_file_ident(const struct sluice_thread_info *t, uint64_t addr);

/**
 * Whether @p path (a mapping's, as the module map names it) is a memfd's:
 * "/memfd:NAME" (+ " (deleted)", as the kernel names it): code in memory no
 * file holds (a JIT's), not a file that was deleted. Any thread.
 */
int sym_is_memfd(const char *path);

/** Free everything sym_init() and sym_describe() made. Main thread, after the session. */
void sym_fini(void);

#endif /* SLUICE_TOOLS_SYMBOLIZE_H */
