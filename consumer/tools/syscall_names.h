/* SPDX-License-Identifier: GPL-2.0-or-later */
/**
 * @file syscall_names.h
 * @brief Guest syscall names by number, per guest architecture: tables
 *        generated at build time (gen_syscalls.py) from the kernel headers
 *        each architecture's C compiler sees (<sys/syscall.h>).
 */
#ifndef SLUICE_TOOLS_SYSCALL_NAMES_H
#define SLUICE_TOOLS_SYSCALL_NAMES_H

#include <stddef.h>
#include <stdint.h>

/** One architecture's names: names[nr - base] for nr in [base, base + n). */
struct syscall_table {
    const char *arch;         /**< QEMU target name; NULL ends the list */
    const char *const *names; /**< entries may be NULL (no syscall has that number) */
    uint32_t base;            /**< the lowest number (4000 on mips o32) */
    uint32_t n;               /**< entries in names */
};

/** The generated tables, ending in one whose arch is NULL. */
extern const struct syscall_table syscall_tables[];

/**
 * The name of syscall @p nr of guest architecture @p arch (a QEMU target
 * name, "x86_64"), or NULL when unknown. Any thread.
 */
static inline const char *syscall_name(const char *arch, uint32_t nr)
{
    const struct syscall_table *t;

    for (t = syscall_tables; t->arch; t++) {
        if (t->arch[0] == arch[0] && __builtin_strcmp(t->arch, arch) == 0) {
            return nr >= t->base && nr - t->base < t->n ? t->names[nr - t->base] : NULL;
        }
    }
    return NULL;
}

#endif /* SLUICE_TOOLS_SYSCALL_NAMES_H */
