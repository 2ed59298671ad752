/* SPDX-License-Identifier: GPL-2.0-or-later */
/**
 * @file precheck.h
 * @brief `sluice run`'s checks before QEMU starts: that the program is a
 *        whole ELF file whose interpreter QEMU will find, that the jitter is
 *        a sluice jitter, and that QEMU is a sluice-patched one.
 *
 * Each of these would otherwise fail inside QEMU, after the trace has begun,
 * with QEMU's message and an empty report. Here they fail first, with one
 * line that names the cause and the fix.
 *
 * Main thread of the `sluice` command, before QEMU is started (precheck_qemu()
 * forks). Errors are returned as a one-line message in a caller buffer @p err
 * of @p errn bytes (the caller prints it and exits 2).
 */
#ifndef SLUICE_PRECHECK_H
#define SLUICE_PRECHECK_H

#include <stddef.h>

/**
 * Check the ELF program at @p path with libelf: its ELF header, its program
 * headers and the file part of every PT_LOAD segment lie inside the file,
 * it is an executable (ET_EXEC or ET_DYN) with a PT_LOAD segment, and its
 * PT_INTERP, if any, is a NUL-terminated path inside the file.
 * @param[out] interp the PT_INTERP path, or "" for a static program
 *             (@p interpn bytes)
 * @return 0, or -1 with a message in @p err naming the file and what is cut
 *         off or malformed.
 */
int precheck_program(const char *path, char *interp, size_t interpn, char *err, size_t errn);

/**
 * Check that @p qemu is a sluice-patched QEMU built for this sluice's jitter
 * ABI: read its struct sluice_qemu_mark (sluice/jitter_abi.h) with libelf;
 * a QEMU without one is run with `-h` (QEMU_* variables removed from its
 * environment, stdin /dev/null, output captured, killed after 10 s) and its
 * usage must list the -jitter option.
 * @param[out] ld_prefix the QEMU_LD_PREFIX default (the mark's, or what
 *             usage shows; "" if none), @p n bytes
 * @return 0, or -1 with a message in @p err (cannot be opened, another
 *         jitter ABI, not patched, did not run, failed or timed out).
 */
int precheck_qemu(const char *qemu, char *ld_prefix, size_t n, char *err, size_t errn);

/**
 * Find the ELF interpreter @p interp of @p prog (a guest of QEMU target
 * @p arch) the way QEMU's path() does: under $QEMU_LD_PREFIX (if set, else
 * under @p default_prefix, QEMU's built-in default) when it is there, else
 * at @p interp itself.
 * @return 0 (found, or @p interp is ""), or -1 with a message in @p err
 *         naming the interpreter and the fix (set QEMU_LD_PREFIX).
 */
int precheck_interp(const char *prog, const char *arch, const char *interp,
                    const char *default_prefix, char *err, size_t errn);

/**
 * Check that @p path is a sluice jitter, without loading it: an ELF shared
 * object of this host's class and machine whose .dynsym defines
 * `sluice_jitter_ops`.
 * @return 0, or -1 with a message in @p err naming the file, the reason and
 *         the fix (set SLUICE_JITTER).
 */
int precheck_jitter(const char *path, char *err, size_t errn);

#endif /* SLUICE_PRECHECK_H */
