/* SPDX-License-Identifier: GPL-2.0-or-later */
/**
 * @file window.h
 * @brief An instruction window of a trace file session
 *        (sluice_consumer_opts.skip_insns and count_insns): the worker
 *        callbacks of one chunk, wrapped so that only the events of its
 *        thread's instructions [from, to) reach the tool, and counted.
 *
 * Used only on the chunks where a window starts or ends (file_source.c
 * skips the chunks outside it and decodes the ones inside it plainly): the
 * wrappers make decode_chunk() call back per event. One chunk's window
 * runs on the worker that decodes the chunk, like the chunk itself.
 *
 * Which events are the window's: the exec events numbered from..to-1 in
 * the thread's stream (0 is its first), and the other events that follow
 * one of those before the next exec event (its memory accesses, a syscall,
 * a message, lost events); with from 0, also those before the first exec
 * event. A block is entered in the window when its first instruction is.
 * Mapping changes come from the chunk's start up to the window's end: the
 * tool's map then holds what the thread saw when the window began.
 */
#ifndef SLUICE_WINDOW_H
#define SLUICE_WINDOW_H

#include <stdint.h>

#include "sluice/consumer.h"

/** One chunk's window. Fields are private. */
struct chunk_window {
    struct sluice_callbacks cb;          /* the wrappers decode_chunk() calls (user: this) */
    const struct sluice_callbacks *tool; /* the tool's */
    uint64_t at;                         /* the thread's exec events before the next one */
    uint64_t from, to;                   /* the window: exec events [from, to) */
    struct sluice_counts delivered;      /* what reached the tool since window__take() */
    uint64_t events;                     /* ... as decode_chunk() counts events */
};

/**
 * Wrap @p tool's worker callbacks in @p w for a chunk whose first exec
 * event is the thread's @p before-th (0-based), for the window
 * [@p from, @p to) (@p to UINT64_MAX: to the end). Then pass &w->cb to
 * decode_chunk(). The worker holding the chunk.
 */
void window__start(struct chunk_window *w, const struct sluice_callbacks *tool, uint64_t before,
                   uint64_t from, uint64_t to);

/**
 * After a decode_chunk() call with @p w: put the counts of what reached
 * the tool in @p counts (replacing the decoder's, which counted every
 * record) and the events in @p events, and start counting anew (for the
 * next slice of the chunk).
 */
void window__take(struct chunk_window *w, struct sluice_counts *counts, uint64_t *events);

#endif /* SLUICE_WINDOW_H */
