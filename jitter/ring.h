/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ring.h — the producer side of a per-thread trace ring (layout: record.h).
 *
 * A ring belongs to one guest thread. Only that thread's vCPU writes records
 * and calls ring_publish()/ring_reserve(); the process-wide paths (exit, exec,
 * fork) call them for other threads only while QEMU holds the exclusive
 * section, when those threads are stopped.
 */
#ifndef SLUICE_JITTER_RING_H
#define SLUICE_JITTER_RING_H

#include <stddef.h>
#include <stdint.h>

#include <sluice/jitter_abi.h>
#include <sluice/record.h>

/* The jitter's descriptors live at or above this number, away from the guest's. */
#define JITTER_FD_MIN 900

struct ring {
    struct sluice_ring_hdr *hdr;     /* header page (shared) */
    uint8_t *data;                   /* first of the two data mappings */
    uint64_t size;                   /* data bytes, a power of two */
    uint64_t head;                   /* published position (our copy of hdr->head) */
    size_t map_bytes;                /* whole mapping: header + 2 * size */
    int fd;                          /* the memfd, close-on-exec */
    struct sluice_thread_slot *slot; /* the vCPU's cursor and limit */
    struct ring *next;               /* the process's list of rings (jitter.c) */
};

/**
 * Create a ring of @p size data bytes (a power of two, >= 4 * SLUICE_RESERVE_MAX,
 * a multiple of the page size) for guest thread @p tid of process @p pid, and
 * point @p slot at it.
 * @return the ring, or NULL with errno set.
 */
struct ring *ring_create(uint64_t size, uint32_t pid, uint32_t tid, uint32_t seq, const char *arch,
                         const char *comm, int big_endian, struct sluice_thread_slot *slot);

/** Unmap and close; the memfd lives on in consumers that hold it. */
void ring_destroy(struct ring *r);

/** Publish everything written up to the slot's cursor (release store of head). */
void ring_publish(struct ring *r);

/**
 * Publish, then make `limit - cursor >= need` bytes writable, waiting for
 * lossless consumers while the ring is full.
 */
void ring_reserve(struct ring *r, uint64_t need);

/** Publish and mark the ring closed: its thread will write no more. */
void ring_close(struct ring *r);

/** Wake the producer waiting on consumer slot @p slot (it left or advanced). */
void ring_wake_producer(struct ring *r, unsigned slot);

#endif /* SLUICE_JITTER_RING_H */
