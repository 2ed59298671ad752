/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ring_blocks.c — the producer's handling of a block in flight
 * (jitter/ring.c, jitter/blocks.c): a BLOCK record is never published
 * while its TB may still rewrite it, and a block whose records reach a
 * chunk boundary is cut there into two records of the same id, the second
 * with `cont` when the running instruction has records on both sides
 * (record.h); a TB left early gets its slot records' headers back
 * (ring_tb_exit), and one that QEMU runs again is taken back. The slot is
 * driven as translated code drives it.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "arena.h"
#include "blocks.h"
#include "image.h"
#include "maplog.h"
#include "ring.h"

#define RING_SIZE (4u * SLUICE_CHUNK_BYTES) /* the parts of a cut block stay in it */
#define PC0 0x400000u

static struct sluice_thread_slot slot;
static struct ring *ring;

static void setup(void)
{
    cr_assert_eq(arena_open(), 0);
    cr_assert_eq(blocks_open(1), 0);
    ring = ring_create(RING_SIZE, 1, 2, 0, "x86_64", "blocks", 0, &slot);
    cr_assert_not_null(ring);
}

/* A descriptor of @p n instructions of 4 bytes from PC0, all recorded. */
static uint64_t lift(unsigned n)
{
    uint64_t pc[16];
    uint8_t len[16], hook[16];
    unsigned i;

    for (i = 0; i < n; i++) {
        pc[i] = PC0 + 4 * i;
        len[i] = 4;
        hook[i] = SLUICE_HOOK_ALWAYS;
    }
    return blocks_lift(&(struct sluice_lift_block){.n = n, .pc = pc, .len = len, .hook = hook});
}

/* What a TB does at its start: check, then its BLOCK record. */
static void tb_start(uint64_t hdr)
{
    if ((uint8_t *)slot.limit - (uint8_t *)slot.cursor < 64) {
        slot.block_at = NULL;
        ring_reserve(ring, 64);
    }
    *slot.cursor = hdr;
    slot.block_at = slot.cursor++;
}

/* What a TB that wrote records does before each op that leaves it. */
static void tb_end(void)
{
    *slot.written = (uint64_t)(uintptr_t)slot.cursor;
}

/* A store of instruction @p i, made by a helper (it reserves as it goes). */
static void store(unsigned i)
{
    if ((uint8_t *)slot.limit - (uint8_t *)slot.cursor < 24 + SLUICE_RESERVE_MAX) {
        ring_reserve(ring, 24 + SLUICE_RESERVE_MAX);
    }
    slot.cursor[0] = sluice_mem_hdr(PC0 + 4 * i, 3, 1);
    slot.cursor[1] = 0x1000;
    slot.cursor[2] = i;
    slot.cursor += 3;
}

/* A load of instruction @p i, made by a helper. */
static void load(unsigned i)
{
    store(i);
    slot.cursor[-3] = sluice_mem_hdr(PC0 + 4 * i, 3, 0);
}

static uint64_t at(uint64_t pos)
{
    return ((const uint64_t *)ring->data)[(pos & (RING_SIZE - 1)) / 8];
}

static uint64_t pos_of(const uint64_t *p)
{
    return ring->head +
           (uint64_t)((const uint8_t *)p - (ring->data + (ring->head & (RING_SIZE - 1))));
}

Test(ring_blocks, descriptors_are_shared_and_laid_out, .init = setup)
{
    uint64_t a = lift(3), b = lift(3), c = lift(2), off, bytes;
    const uint64_t *d;

    cr_assert_neq(a, 0);
    cr_assert_eq(a, b, "an equal TB lifted again gets the same id");
    cr_assert_neq(sluice_block_id(a), sluice_block_id(c));
    cr_assert_eq(sluice_block_from(a), 0);
    cr_assert_eq(sluice_block_to(a), 3);
    blocks_where(&off, &bytes);
    cr_assert_eq(ring->hdr->blocks_offset, off);
    cr_assert_eq(ring->hdr->blocks_bytes, bytes);
    d = (const uint64_t *)((const uint8_t *)mmap(NULL, bytes, PROT_READ, MAP_SHARED, arena_fd(),
                                                 (off_t)off) +
                           SLUICE_BLOCKS_HDR_BYTES);
    d += sluice_block_id(a);
    cr_assert_eq(d[0], 3 | 3u << 16);
    cr_assert_eq(d[1], PC0);
    cr_assert_eq(d[3], PC0 + 8);
    cr_assert_eq(((const uint8_t *)&d[4])[2], 4 | SLUICE_BLOCK_RECORDED);
    cr_assert_eq(blocks_index(sluice_block_id(a), 0, 3, PC0 + 4), 1);
    cr_assert_eq(blocks_index(sluice_block_id(a), 2, 3, PC0 + 4), -1);
}

Test(ring_blocks, a_tb_without_recorded_instructions_ends_the_block_before, .init = setup)
{
    uint64_t pc[2] = {PC0, PC0 + 4};
    uint8_t len[2] = {4, 4}, never[2] = {SLUICE_HOOK_NEVER, SLUICE_HOOK_NEVER};
    struct sluice_lift_block b = {.n = 2, .pc = pc, .len = len, .hook = never};
    uint64_t pad1 = sluice_pad_hdr(1);

    cr_assert_eq(blocks_lift(&b), 0, "no record at all: no word");
    b.records = 1;
    cr_assert_eq(blocks_lift(&b), pad1, "its memory records are not the last block's");
    cr_assert_eq(sluice_rec_words(pad1), 1);
}

Test(ring_blocks, a_tb_with_a_once_instruction_names_its_block, .init = setup)
{
    uint64_t pc[2] = {PC0, PC0 + 4}, hdr;
    uint8_t len[2] = {4, 4}, once[2] = {SLUICE_HOOK_NEVER, SLUICE_HOOK_ONCE};
    struct sluice_lift_block b = {.n = 2, .pc = pc, .len = len, .hook = once};

    cr_assert_eq(blocks_lift(&b), 0, "a TB that writes no record (its Once answered) has no word");
    b.records = 1;
    hdr = blocks_lift(&b);
    cr_assert_eq(sluice_rec_tag(hdr), SLUICE_TAG_BLOCK, "its block, so consumers know it ran");
    cr_assert_eq(sluice_block_from(hdr), 0);
    cr_assert_eq(sluice_block_to(hdr), 2);
    cr_assert_eq(blocks_recorded(sluice_block_id(hdr), 0, 2), 0, "no exec event of its own");
}

Test(ring_blocks, a_block_in_flight_is_not_published, .init = setup)
{
    uint64_t hdr = lift(4), pos;

    tb_start(hdr);
    store(0);
    pos = pos_of(slot.block_at);
    ring_reserve(ring, 64); /* a label's check inside the TB */
    cr_assert_leq(__atomic_load_n(&ring->hdr->head, __ATOMIC_ACQUIRE), pos);
    cr_assert_eq(*slot.block_at, hdr);
    ring_publish_all(ring); /* the thread left translated code */
    cr_assert_null(slot.block_at);
    cr_assert_eq(ring->hdr->head, pos + 8 + 24);
}

/*
 * TBs that write no record leave block_at naming the last block, which is
 * over: a fault in one of them at a pc that block also holds must not cut
 * it, and a helper's reserve must publish it.
 */
Test(ring_blocks, a_block_that_is_over_stays_whole, .init = setup)
{
    uint64_t hdr = lift(4), pos, end;

    tb_start(hdr);
    store(1);
    tb_end();
    pos = pos_of(slot.block_at);
    end = pos_of(slot.cursor);
    cr_assert_not(sluice_block_in_flight(&slot));
    ring_reserve(ring, 64); /* a helper in a TB that writes no record */
    cr_assert_eq(__atomic_load_n(&ring->hdr->head, __ATOMIC_ACQUIRE), end,
                 "the block that is over is published");
    cr_assert_null(slot.block_at);
    ring_tb_exit(ring, PC0 + 4, 0); /* that TB faults at a pc the block holds */
    cr_assert_eq(at(pos), hdr, "the block keeps all 4 instructions");
    cr_assert_eq(ring->hdr->written_addr, (uint64_t)(uintptr_t)slot.cursor);
}

Test(ring_blocks, a_fault_after_the_tb_ended_does_not_cut_its_block, .init = setup)
{
    uint64_t hdr = lift(4), pos;

    tb_start(hdr);
    store(1);
    tb_end();
    pos = pos_of(slot.block_at);
    ring_tb_exit(ring, PC0 + 4, 0);
    cr_assert_eq(at(pos), hdr, "the block keeps all 4 instructions");
    cr_assert_null(slot.block_at);
    cr_assert_eq(ring->hdr->written_addr, (uint64_t)(uintptr_t)slot.cursor);
}

Test(ring_blocks, a_block_is_cut_at_a_chunk_boundary, .init = setup)
{
    uint64_t hdr = lift(4), id = sluice_block_id(hdr), first, second;
    unsigned stores = 0;

    tb_start(hdr);
    first = pos_of(slot.block_at);
    store(0);
    /* Instruction 1 stores until its records cross the first boundary. */
    while (pos_of(slot.cursor) < SLUICE_CHUNK_BYTES + 64) {
        store(1);
        stores++;
    }
    second = pos_of(slot.block_at);
    cr_assert_eq(second, SLUICE_CHUNK_BYTES, "the rest starts the next chunk");
    cr_assert_eq(at(first), sluice_block_hdr(id, 0, 2, 0), "first part: 0 and 1");
    cr_assert_eq(at(second), sluice_block_hdr(id, 1, 4, 1), "second part: 1 (cont) to 3");
    cr_assert_eq(sluice_rec_tag(at(second - 8)), SLUICE_TAG_PAD, "or a record ends there");
    cr_assert_gt(stores, 1000);
    cr_assert_eq(ring->hdr->head, SLUICE_CHUNK_BYTES, "the first part is published");
}

Test(ring_blocks, a_cut_before_any_record_keeps_cont, .init = setup)
{
    uint64_t hdr = lift(4), id = sluice_block_id(hdr), first;

    /* Inline records up to just before the first boundary, then a block's record. */
    while (pos_of(slot.cursor) + 24 <= SLUICE_CHUNK_BYTES - 16) {
        slot.cursor[0] = sluice_mem_hdr(PC0, 3, 0);
        slot.cursor += 3;
    }
    ring_publish_all(ring);
    *slot.cursor = sluice_block_hdr(id, 2, 4, 1); /* a part that continues */
    slot.block_at = slot.cursor++;
    first = pos_of(slot.block_at);
    store(3); /* crosses: no record of the block yet before the boundary */
    cr_assert_eq(at(first), sluice_block_hdr(id, 2, 2, 1), "empty first part");
    cr_assert_eq(at(SLUICE_CHUNK_BYTES), sluice_block_hdr(id, 2, 4, 1));
}

/* lift() with slots: loads of 8 bytes by instructions @p insn[0..ns). */
static uint64_t lift_slots(unsigned n, const unsigned *insn, unsigned ns)
{
    uint64_t pc[16];
    uint8_t len[16], hook[16];
    uint16_t slots[8];
    unsigned i;

    for (i = 0; i < n; i++) {
        pc[i] = PC0 + 4 * i;
        len[i] = 4;
        hook[i] = SLUICE_HOOK_ALWAYS;
    }
    for (i = 0; i < ns; i++) {
        slots[i] = sluice_slot(insn[i], 3, 0);
    }
    return blocks_lift(&(struct sluice_lift_block){
        .n = n, .pc = pc, .len = len, .hook = hook, .n_slots = ns, .slot = slots});
}

/* A slot record as translated code writes it (no header): address, value. */
static void slot_load(uint64_t addr)
{
    slot.cursor[0] = addr;
    slot.cursor[1] = addr + 1;
    slot.cursor += 2;
}

Test(ring_blocks, a_tb_with_slots_gets_a_block_slots_record, .init = setup)
{
    const unsigned insn[] = {0, 2, 2};
    uint64_t hdr = lift_slots(4, insn, 3), id = sluice_block_id(hdr);
    const uint16_t *s;
    const uint64_t *pcs;
    unsigned ns;

    cr_assert_eq(sluice_rec_tag(hdr), SLUICE_TAG_BLOCK_SLOTS);
    cr_assert_eq(hdr, sluice_block_slots_hdr(id, 4));
    s = blocks_slots(id, &ns, &pcs);
    cr_assert_eq(ns, 3);
    cr_assert(s[0] == sluice_slot(0, 3, 0) && s[1] == sluice_slot(2, 3, 0) &&
              s[2] == sluice_slot(2, 3, 0));
    cr_assert_eq(pcs[2], PC0 + 8);
    cr_assert_eq(lift_slots(4, insn, 3), hdr, "an equal TB, the same descriptor");
    cr_assert_neq(lift_slots(4, insn, 2), hdr, "other slots, another descriptor");
    cr_assert_eq(sluice_rec_tag(lift(4)), SLUICE_TAG_BLOCK, "no slot, a BLOCK record");
    /* Slots out of order (or past the TB) are not described: a BLOCK record, headers kept. */
    cr_assert_eq(sluice_rec_tag(lift_slots(4, (const unsigned[]){2, 1}, 2)), SLUICE_TAG_BLOCK);
    cr_assert_eq(sluice_rec_tag(lift_slots(4, (const unsigned[]){4}, 1)), SLUICE_TAG_BLOCK);
}

Test(ring_blocks, a_tb_left_before_its_last_slot_gets_its_headers_back, .init = setup)
{
    const unsigned insn[] = {0, 2, 3};
    uint64_t hdr = lift_slots(5, insn, 3), id = sluice_block_id(hdr), first;

    tb_start(hdr);
    first = pos_of(slot.block_at);
    slot_load(0x5000); /* instruction 0 */
    slot_load(0x5008); /* instruction 2; instruction 3's load faults */
    ring_tb_exit(ring, PC0 + 12, 0);
    cr_assert_null(slot.block_at);
    cr_assert_eq(at(first), sluice_block_hdr(id, 0, 4, 0), "a BLOCK record, up to 3 included");
    cr_assert_eq(at(first + 8), sluice_mem_hdr(PC0, 3, 0));
    cr_assert_eq(at(first + 16), 0x5000);
    cr_assert_eq(at(first + 24), 0x5001);
    cr_assert_eq(at(first + 32), sluice_mem_hdr(PC0 + 8, 3, 0));
    cr_assert_eq(at(first + 40), 0x5008);
    cr_assert_eq(at(first + 48), 0x5009);
    cr_assert_eq(pos_of(slot.cursor), first + 56, "the cursor moved past the headers");
}

Test(ring_blocks, a_tb_left_after_its_slots_keeps_its_record, .init = setup)
{
    const unsigned insn[] = {1};
    uint64_t hdr = lift_slots(5, insn, 1), id = sluice_block_id(hdr), first;

    tb_start(hdr);
    first = pos_of(slot.block_at);
    slot_load(0x6000);
    store(3); /* a helper's record, with its header, then instruction 3 faults */
    ring_tb_exit(ring, PC0 + 12, 0);
    cr_assert_eq(at(first), (sluice_block_slots_hdr(id, 5) & ~(0x3ffull << 46)) | 4ull << 46,
                 "still BLOCK_SLOTS, to 4");
    cr_assert_eq(sluice_block_to(at(first)), 4);
    cr_assert_eq(at(first + 8), 0x6000, "the slot record stays as it was");
    cr_assert_eq(pos_of(slot.cursor), first + 8 + 16 + 24);
}

Test(ring_blocks, a_block_with_slots_is_cut_after_them, .init = setup)
{
    const unsigned insn[] = {0, 1};
    uint64_t hdr = lift_slots(4, insn, 2), id = sluice_block_id(hdr), first, second;

    /* Records up to near the first boundary, then the TB: its slots, then a helper's stores. */
    while (pos_of(slot.cursor) + 24 <= SLUICE_CHUNK_BYTES - 256) {
        slot.cursor[0] = sluice_mem_hdr(PC0, 3, 0);
        slot.cursor += 3;
    }
    ring_publish_all(ring);
    tb_start(hdr);
    first = pos_of(slot.block_at);
    slot_load(0x7000);
    slot_load(0x7008);
    while (pos_of(slot.cursor) < SLUICE_CHUNK_BYTES + 64) {
        store(2);
    }
    second = pos_of(slot.block_at);
    cr_assert_eq(second, SLUICE_CHUNK_BYTES);
    cr_assert_eq(sluice_rec_tag(at(first)), SLUICE_TAG_BLOCK_SLOTS, "the first part keeps them");
    /* The helper's first store reserved before writing: the last record is instruction 1's. */
    cr_assert_eq(sluice_block_to(at(first)), 2, "up to the last slot's instruction, included");
    cr_assert_eq(at(first + 8), 0x7000);
    cr_assert_eq(at(first + 24), 0x7008);
    cr_assert_eq(at(second), sluice_block_hdr(id, 1, 4, 1), "the rest: a BLOCK record, cont");
}

/*
 * An instruction QEMU gives up and runs again (EXCP_ATOMIC, a store into
 * its own TB's page): its exec event is taken back when nothing else of it
 * was written, and kept when some record of it was (it did run in part).
 */
Test(ring_blocks, an_instruction_run_again_is_taken_back_from_its_block, .init = setup)
{
    uint64_t hdr = lift(4), id = sluice_block_id(hdr), pos;

    tb_start(hdr);
    store(0);
    pos = pos_of(slot.block_at);
    ring_tb_exit(ring, PC0 + 8, 1); /* instruction 2 gave up before any access */
    cr_assert_eq(at(pos), sluice_block_hdr(id, 0, 2, 0), "instructions 0 and 1 ran");
    tb_start(hdr);
    store(0);
    store(2);
    pos = pos_of(slot.block_at);
    ring_tb_exit(ring, PC0 + 8, 1); /* it gave up after a record of its own */
    cr_assert_eq(at(pos), sluice_block_hdr(id, 0, 3, 0), "instruction 2 stays");
    tb_start(hdr);
    store(0);
    load(2);
    pos = pos_of(slot.block_at);
    ring_tb_exit(ring, PC0 + 8, 1); /* its load was recorded, then its store gave up */
    cr_assert_eq(at(pos), sluice_block_hdr(id, 0, 2, 0), "instruction 2 is taken back");
    cr_assert_eq(pos_of(slot.cursor), pos + 8 + 24, "and its load");
    tb_start(hdr);
    load(2);
    store(2);
    load(2);
    pos = pos_of(slot.block_at);
    ring_tb_exit(ring, PC0 + 8, 1); /* a rep instruction: an iteration was done */
    cr_assert_eq(at(pos), sluice_block_hdr(id, 0, 3, 0), "instruction 2 stays");
    cr_assert_eq(pos_of(slot.cursor), pos + 8 + 48, "with the done iteration's records only");
    tb_start(hdr);
    pos = pos_of(slot.block_at);
    ring_tb_exit(ring, PC0, 1); /* the first gave up */
    cr_assert_eq(at(pos), sluice_block_hdr(id, 0, 0, 0), "nothing ran");
    cr_assert_eq(ring->hdr->written_addr, (uint64_t)(uintptr_t)slot.cursor);
}

Test(ring_blocks, an_instruction_run_again_loses_its_exec_record, .init = setup)
{
    uint64_t *start = slot.cursor;

    *slot.cursor++ = sluice_exec_hdr(PC0);
    store(0);
    *slot.cursor++ = sluice_exec_hdr(PC0 + 4);
    ring_tb_exit(ring, PC0 + 4, 1);
    cr_assert_eq(slot.cursor, start + 4, "the EXEC record of PC0 + 4 is dropped");
    cr_assert_eq(ring->hdr->written_addr, (uint64_t)(uintptr_t)slot.cursor);
    *slot.cursor++ = sluice_exec_hdr(PC0 + 4);
    store(1);
    ring_tb_exit(ring, PC0 + 4, 1);
    cr_assert_eq(slot.cursor, start + 8, "a record of it follows: it stays");
    *slot.cursor++ = sluice_exec_hdr(PC0 + 8);
    load(2);
    ring_tb_exit(ring, PC0 + 8, 1);
    cr_assert_eq(slot.cursor, start + 8, "only a load of it follows: both are dropped");
    *slot.cursor++ = sluice_exec_hdr(PC0 + 8);
    tb_end(); /* its TB was left: the record is another TB's */
    ring_tb_exit(ring, PC0 + 8, 1);
    cr_assert_eq(slot.cursor, start + 9, "written before `written`: it stays");
}

/*
 * Records per instruction: a reserve inside an instruction (a label's
 * check, a helper's record) at a chunk boundary must not publish that
 * instruction's EXEC record, which a give-up may still take back; it goes
 * past the boundary with the instruction's records.
 */
Test(ring_blocks, a_running_instruction_is_held_across_a_chunk_boundary, .init = setup)
{
    uint64_t pos;

    while (pos_of(slot.cursor) < SLUICE_CHUNK_BYTES - 40) {
        *slot.cursor++ = sluice_exec_hdr(PC0);
    }
    tb_end(); /* those TBs are over */
    *slot.cursor++ = sluice_exec_hdr(PC0 + 4);
    pos = pos_of(slot.cursor) - 8;
    store(1);
    ring_reserve(ring, 64); /* a label inside instruction 1: past the boundary */
    cr_assert_eq(ring->hdr->head, SLUICE_CHUNK_BYTES, "published up to the boundary");
    cr_assert_eq(sluice_rec_tag(at(pos)), SLUICE_TAG_PAD, "a PAD where the instruction was");
    cr_assert_eq(at(SLUICE_CHUNK_BYTES), sluice_exec_hdr(PC0 + 4), "its EXEC after the boundary");
    cr_assert_eq(at(SLUICE_CHUNK_BYTES + 8), sluice_mem_hdr(PC0 + 4, 3, 1), "then its store");
    cr_assert_eq(pos_of(slot.cursor), SLUICE_CHUNK_BYTES + 32);
    slot.cursor -= 3; /* say the store had not happened: QEMU gives it up */
    ring_tb_exit(ring, PC0 + 4, 1);
    cr_assert_eq(pos_of(slot.cursor), SLUICE_CHUNK_BYTES, "its EXEC is taken back");
}

/* The guest maps @p fd (or anonymous memory, -1) at PC0, after unmapping what was there. */
static void remap(int fd, uint64_t offset)
{
    image_munmap(PC0, 0x2000);
    maplog_munmap(PC0, 0x2000);
    image_mmap(PC0, 0x2000, fd, offset);
    maplog_mmap(PC0, 0x2000, 5, fd >= 0);
}

Test(ring_blocks, a_descriptor_is_reused_for_code_from_the_same_place_only, .init = setup)
{
    char path[] = "/tmp/sluice-ring-blocks-XXXXXX";
    int fd = mkstemp(path);
    uint64_t anon, anon2, file0, file1, file0_again;

    cr_assert_geq(fd, 0);
    cr_assert_eq(ftruncate(fd, 0x4000), 0);
    remap(-1, 0);
    anon = lift(3);
    remap(-1, 0); /* a JIT mapping the same code again: one descriptor, not one per round */
    anon2 = lift(3);
    cr_assert_eq(sluice_block_id(anon2), sluice_block_id(anon));
    remap(fd, 0);
    file0 = lift(3);
    cr_assert_neq(sluice_block_id(file0), sluice_block_id(anon), "from a file now: its own");
    remap(fd, 0x1000);
    file1 = lift(3);
    cr_assert_neq(sluice_block_id(file1), sluice_block_id(file0), "another offset: its own");
    remap(fd, 0);
    file0_again = lift(3);
    cr_assert_eq(sluice_block_id(file0_again), sluice_block_id(file0),
                 "the same file and offset again: the first one's map names it");
    image_munmap(PC0, 0x2000);
    close(fd);
    unlink(path);
}
