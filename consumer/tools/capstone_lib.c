/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * tools/capstone_lib.c — loads libcapstone when dump first disassembles
 * (see capstone_lib.h for why it is not linked). Owns the library handle
 * and its function table, kept for the life of the process. Called under
 * symbolize.c's lock; never called unless disassembly was asked for.
 */
#include <dlfcn.h>
#include <link.h>

#include "capstone_lib.h"
#include "tools.h"

#define STR_(x) #x
#define STR(x) STR_(x)
/* The soname's major is the API's (libcapstone.so.4 for capstone 4.x, .so.5 for 5.x). */
#define CAPSTONE_SONAME "libcapstone.so." STR(CS_API_MAJOR)

static struct capstone_lib lib;
static int state; /* 0 not tried, 1 loaded, -1 failed */

/* The path @p handle was loaded from (LD_LIBRARY_PATH may have chosen it), or the soname. */
static const char *path_of(void *handle)
{
    struct link_map *lm = NULL;

    return dlinfo(handle, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && lm->l_name[0]
               ? lm->l_name
               : CAPSTONE_SONAME;
}

/* @p name of @p handle into *@p fn; 0, or -1 with the failure said. */
static int take(void *handle, const char *name, void **fn)
{
    *fn = dlsym(handle, name);
    if (!*fn) {
        say("sluice: dump: no disassembly: %s has no %s\n", path_of(handle), name);
        return -1;
    }
    return 0;
}

/* Whether @p handle's capstone is of the API its headers here are (cs_insn's layout). */
static int same_api(void *handle)
{
    unsigned (*version)(int *, int *);
    int major = 0, minor = 0;

    if (take(handle, "cs_version", (void **)&version) < 0) {
        return 0;
    }
    version(&major, &minor);
    if (major != CS_API_MAJOR) {
        say("sluice: dump: no disassembly: %s is capstone %d.%d, not %d.x as sluice was built "
            "for\n",
            path_of(handle), major, minor, CS_API_MAJOR);
        return 0;
    }
    return 1;
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
    if (!same_api(h) || take(h, "cs_open", (void **)&lib.open) < 0 ||
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
