/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * window.c — the worker callbacks of a chunk where an instruction window
 * starts or ends (window.h): each wrapper numbers or places its event and
 * passes it to the tool only inside the window.
 *
 * Thread: the worker decoding the chunk. It must never let an event
 * outside the window through, nor count one.
 */
#include "window.h"

#include <string.h>

/* Whether an event after the last exec event (no exec event yet: at 0) is the window's. */
static int window_has_here(const struct chunk_window *w)
{
    return (w->at > w->from || w->from == 0) && w->at <= w->to;
}

static int window_exec(void *user, const struct sluice_thread_info *t, uint64_t pc, void *item)
{
    struct chunk_window *w = user;
    uint64_t k = w->at++;

    if (k < w->from || k >= w->to) {
        return 0;
    }
    w->delivered.insns++;
    w->events++;
    return w->tool->exec ? w->tool->exec(w->tool->user, t, pc, item) : 0;
}

static int window_exec_batch(void *user, const struct sluice_thread_info *t, const uint64_t *pcs,
                             size_t n, void *item)
{
    struct chunk_window *w = user;
    uint64_t a = w->at, e = w->at + n;

    w->at = e;
    a = a < w->from ? w->from : a;
    e = e > w->to ? w->to : e;
    if (a >= e) {
        return 0;
    }
    w->delivered.insns += e - a;
    w->events += e - a;
    return w->tool->exec_batch(w->tool->user, t, pcs + (a - (w->at - n)), (size_t)(e - a), item);
}

/* A load or a store (the tool's read or write callback, as m->is_write says). */
static int window_mem(void *user, const struct sluice_thread_info *t, const struct sluice_mem *m,
                      void *item)
{
    struct chunk_window *w = user;
    int (*fn)(void *, const struct sluice_thread_info *, const struct sluice_mem *, void *) =
        m->is_write ? w->tool->write : w->tool->read;

    if (!window_has_here(w)) {
        return 0;
    }
    if (m->is_write) {
        w->delivered.stores++;
    } else {
        w->delivered.loads++;
    }
    w->events++;
    return fn ? fn(w->tool->user, t, m, item) : 0;
}

static int window_lost(void *user, const struct sluice_thread_info *t, uint64_t count, void *item)
{
    struct chunk_window *w = user;

    if (!window_has_here(w)) {
        return 0;
    }
    w->delivered.lost += count;
    w->events++;
    return w->tool->lost ? w->tool->lost(w->tool->user, t, count, item) : 0;
}

static int window_message(void *user, const struct sluice_thread_info *t, const char *text,
                          size_t len, void *item)
{
    struct chunk_window *w = user;

    if (!window_has_here(w)) {
        return 0;
    }
    w->events++;
    return w->tool->message ? w->tool->message(w->tool->user, t, text, len, item) : 0;
}

static int window_syscall(void *user, const struct sluice_thread_info *t,
                          const struct sluice_syscall *sc, void *item)
{
    struct chunk_window *w = user;

    if (!window_has_here(w)) {
        return 0;
    }
    w->events++;
    return w->tool->syscall ? w->tool->syscall(w->tool->user, t, sc, item) : 0;
}

/* A mapping change: from the chunk's start to the window's end (the map the window began in). */
static int window_mmap(void *user, const struct sluice_thread_info *t, const struct sluice_map *m,
                       void *item)
{
    struct chunk_window *w = user;

    return w->at <= w->to ? w->tool->mmap(w->tool->user, t, m, item) : 0;
}

/* A block entered: before the exec event of its first instruction, which is number `at`. */
static int window_block(void *user, const struct sluice_thread_info *t,
                        const struct sluice_block *b, void *item)
{
    struct chunk_window *w = user;

    return w->at >= w->from && w->at < w->to ? w->tool->block(w->tool->user, t, b, item) : 0;
}

static int window_chunk_end(void *user, const struct sluice_thread_info *t, void *item)
{
    struct chunk_window *w = user;

    return w->tool->chunk_end(w->tool->user, t, item);
}

void window__start(struct chunk_window *w, const struct sluice_callbacks *tool, uint64_t before,
                   uint64_t from, uint64_t to)
{
    memset(w, 0, sizeof(*w));
    w->tool = tool;
    w->at = before;
    w->from = from;
    w->to = to;
    w->cb.sz = sizeof(w->cb);
    w->cb.user = w;
    w->cb.item_size = tool->item_size;
    /* Every event is counted here, so each kind gets a wrapper whether or not the tool
     * takes it; the instructions through exec_batch if the tool takes runs, else exec. */
    if (tool->exec_batch) {
        w->cb.exec_batch = window_exec_batch;
    } else {
        w->cb.exec = window_exec;
    }
    w->cb.read = window_mem;
    w->cb.write = window_mem;
    w->cb.lost = window_lost;
    w->cb.message = window_message;
    w->cb.syscall = window_syscall;
    /* These count nothing: only where the tool takes them. */
    w->cb.mmap = tool->mmap ? window_mmap : NULL;
    w->cb.block = tool->block ? window_block : NULL;
    w->cb.chunk_end = tool->chunk_end ? window_chunk_end : NULL;
}

void window__take(struct chunk_window *w, struct sluice_counts *counts, uint64_t *events)
{
    *counts = w->delivered;
    *events = w->events;
    memset(&w->delivered, 0, sizeof(w->delivered));
    w->events = 0;
}
