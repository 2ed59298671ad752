/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * marked_qemu.c — a stand-in for a sluice-patched QEMU, for errors.py: it
 * carries the struct sluice_qemu_mark a patched QEMU carries, and no QEMU.
 *
 * `-h` fails loudly, so a sluice that runs it instead of reading the mark is
 * seen to; anything else says "stand-in: started" and exits 3, so a sluice
 * that read the mark and went on to start QEMU is seen to as well.
 * errors.py copies it and changes the copy's ABI word for the mismatch case.
 */
#include <stdio.h>
#include <string.h>

#include <sluice/jitter_abi.h>

__attribute__((used, retain,
               section(SLUICE_QEMU_MARK_SECTION))) static const struct sluice_qemu_mark mark = {
    .magic = SLUICE_QEMU_MARK_MAGIC,
    .abi_version = SLUICE_JITTER_ABI_VERSION,
    .interp_prefix = "/usr/gnemul/qemu-x86_64",
};

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "-h") == 0) {
        fprintf(stderr, "qemu-x86_64: stand-in: -h was run, the mark was not read\n");
        return 1;
    }
    fprintf(stderr, "qemu-x86_64: stand-in: started\n");
    return 3;
}
