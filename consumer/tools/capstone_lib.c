/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * tools/capstone_lib.c — loads libcapstone when dump first disassembles
 * (see capstone_lib.h for why it is not linked). Owns the library handle
 * and its function table, kept for the life of the process. Called under
 * symbolize.c's lock; never called unless disassembly was asked for.
 */
#include <dlfcn.h>

#include "capstone_lib.h"
#include "tools.h"

#define STR_(x) #x
#define STR(x) STR_(x)
/* The soname's major is the API's (libcapstone.so.4 for capstone 4.x, .so.5 for 5.x). */
#define CAPSTONE_SONAME "libcapstone.so." STR(CS_API_MAJOR)

static struct capstone_lib lib;
static int state; /* 0 not tried, 1 loaded, -1 failed */

/* @p name of @p handle into *@p fn; 0, or -1 with the failure said. */
static int take(void *handle, const char *name, void **fn)
{
    *fn = dlsym(handle, name);
    if (!*fn) {
        say("sluice: dump: no disassembly: %s has no %s\n", CAPSTONE_SONAME, name);
        return -1;
    }
    return 0;
}

const struct capstone_lib *capstone_lib_get(void)
{
    void *h;

    if (state != 0) {
        return state == 1 ? &lib : NULL;
    }
    state = -1;
    h = dlopen(CAPSTONE_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        say("sluice: dump: no disassembly: %s cannot be loaded (%s)\n", CAPSTONE_SONAME, dlerror());
        return NULL;
    }
    /* (dlsym's void * to a function pointer: POSIX requires it to work) */
    if (take(h, "cs_open", (void **)&lib.open) < 0 ||
        take(h, "cs_option", (void **)&lib.option) < 0 ||
        take(h, "cs_disasm", (void **)&lib.disasm) < 0 ||
        take(h, "cs_free", (void **)&lib.free) < 0 ||
        take(h, "cs_insn_group", (void **)&lib.insn_group) < 0 ||
        take(h, "cs_close", (void **)&lib.close) < 0) {
        dlclose(h);
        return NULL;
    }
    state = 1;
    return &lib;
}
