/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * record.c — unit tests of the record codec in sluice/record.h: tags,
 * payloads, lengths, invalid headers and round trips, with exact values;
 * and of the one parser the shared headers hold (sluice/ctl.h's ring size).
 */
#include <criterion/criterion.h>
#include <stddef.h>
#include <string.h>

#include "sluice/ctl.h"
#include "sluice/record.h"

Test(record, exec_header_round_trip)
{
    uint64_t h = sluice_exec_hdr(0x401000);

    cr_assert_eq(h, 0x0100000000401000ull);
    cr_assert_eq(sluice_rec_tag(h), SLUICE_TAG_EXEC);
    cr_assert_eq(sluice_rec_payload(h), 0x401000);
    cr_assert_eq(sluice_rec_words(h), 1);
}

Test(record, exec_pc_is_masked_to_56_bits)
{
    uint64_t h = sluice_exec_hdr(0xff00123456789abcull);

    cr_assert_eq(sluice_rec_tag(h), SLUICE_TAG_EXEC);
    cr_assert_eq(sluice_rec_payload(h), 0x00123456789abcull);
    cr_assert_eq(sluice_exec_hdr(SLUICE_PAYLOAD_MASK), 0x01ffffffffffffffull);
}

Test(record, mem_tags_encode_size_and_direction)
{
    cr_assert_eq(sluice_mem_tag(0, 0), 0x10);
    cr_assert_eq(sluice_mem_tag(2, 0), 0x12);
    cr_assert_eq(sluice_mem_tag(3, 1), 0x1b);
    cr_assert_eq(sluice_mem_tag(4, 1), 0x1c);
    cr_assert_eq(sluice_mem_tag(4, 7), 0x1c, "any non-zero is_write is a store");
}

Test(record, mem_header_round_trip_all_sizes)
{
    for (unsigned lg = 0; lg <= 4; lg++) {
        for (int w = 0; w <= 1; w++) {
            uint64_t h = sluice_mem_hdr(0x7fff12345678ull, lg, w);
            unsigned tag = sluice_rec_tag(h);

            cr_assert(sluice_tag_is_mem(tag), "lg %u w %d", lg, w);
            cr_assert_eq(tag & 7, lg);
            cr_assert_eq((tag & SLUICE_MEM_WRITE) != 0, w);
            cr_assert_eq(sluice_rec_payload(h), 0x7fff12345678ull);
            cr_assert_eq(sluice_rec_words(h), lg == 4 ? 4u : 3u);
        }
    }
}

Test(record, mem_helper_records_have_pc_zero)
{
    uint64_t h = sluice_mem_hdr(0, 3, 1);

    cr_assert_eq(h, 0x1b00000000000000ull);
    cr_assert_eq(sluice_rec_payload(h), 0);
    cr_assert_eq(sluice_rec_words(h), 3);
}

Test(record, lost_and_pad)
{
    uint64_t lost = ((uint64_t)SLUICE_TAG_LOST << SLUICE_TAG_SHIFT) | 12345;
    uint64_t pad = sluice_pad_hdr(7);

    cr_assert_eq(sluice_rec_tag(lost), SLUICE_TAG_LOST);
    cr_assert_eq(sluice_rec_payload(lost), 12345);
    cr_assert_eq(sluice_rec_words(lost), 1);
    cr_assert_eq(sluice_rec_words(pad), 7);
    cr_assert_eq(sluice_rec_words(1u << 20), 1u << 20, "largest PAD");
}

Test(record, invalid_headers_have_zero_words)
{
    cr_assert_eq(sluice_rec_words(0), 0, "PAD of length 0");
    cr_assert_eq(sluice_rec_words((1u << 20) + 1), 0, "PAD too long");
    cr_assert_eq(sluice_rec_words(0x0300000000000000ull), 0, "tag 3 unknown");
    cr_assert_eq(sluice_rec_words(0x1500000000000000ull), 0, "MEM log2 size 5");
    cr_assert_eq(sluice_rec_words(0x1f00000000000000ull), 0, "MEM store log2 size 7");
    cr_assert_eq(sluice_rec_words(0x2000000000000000ull), 0, "tag 0x20");
    cr_assert_eq(sluice_rec_words(0xff00000000000000ull), 0, "tag 0xff");
    cr_assert_not(sluice_tag_is_mem(0x15));
    cr_assert_not(sluice_tag_is_mem(0x01));
    cr_assert_not(sluice_tag_is_mem(0x24));
}

Test(record, every_tag_classified)
{
    unsigned valid = 0;

    for (unsigned tag = 0; tag < 256; tag++) {
        uint64_t h = ((uint64_t)tag << SLUICE_TAG_SHIFT) | 1;

        valid += sluice_rec_words(h) != 0;
    }
    /* PAD, EXEC, LOST, TEXT, BLOCK, BLOCK_SLOTS, MAP, SYSCALL, SYSRET and 10 MEM tags (5 sizes
     * x load/store). */
    cr_assert_eq(valid, 19);
}

Test(record, syscall_lengths)
{
    cr_assert_eq(sluice_rec_words((uint64_t)SLUICE_TAG_SYSCALL << SLUICE_TAG_SHIFT | 4003), 7,
                 "SYSCALL: header and six arguments");
    cr_assert_eq(sluice_rec_words((uint64_t)SLUICE_TAG_SYSRET << SLUICE_TAG_SHIFT), 2,
                 "SYSRET: header and the value");
}

Test(record, slots)
{
    uint16_t s = sluice_slot(511, 4, 1);
    uint64_t h = sluice_block_slots_hdr(77, 9);

    cr_assert_eq(sluice_slot_insn(s), 511);
    cr_assert_eq(s & 7, 4);
    cr_assert(s & SLUICE_MEM_WRITE);
    cr_assert_eq(sluice_slot_record_words(s), 3, "16 bytes: address and two value words");
    cr_assert_eq(sluice_slot_record_words(sluice_slot(0, 3, 0)), 2);
    cr_assert_eq(sluice_slot(0, 0, 0), 0, "a 1-byte load of instruction 0 is slot 0");
    cr_assert_eq(sluice_rec_tag(h), SLUICE_TAG_BLOCK_SLOTS);
    cr_assert(sluice_tag_is_block(sluice_rec_tag(h)));
    cr_assert_eq(sluice_block_id(h), 77);
    cr_assert_eq(sluice_block_from(h), 0);
    cr_assert_eq(sluice_block_to(h), 9);
    cr_assert(!sluice_block_cont(h));
    cr_assert_eq(sluice_rec_words(h), 1, "its slot records are counted apart");
    /* 9 instructions, 5 slots: 1 + 9 + 2 flag words + 2 slot words + the log position. */
    cr_assert_eq(sluice_block_desc_words(9 | 9u << 16 | 5ull << 32), 15);
    cr_assert_eq(sluice_block_desc_words(9), sluice_block_words(9) + 1);
}

Test(record, block_fields)
{
    uint64_t h = sluice_block_hdr(SLUICE_BLOCK_ID_MASK, 511, SLUICE_BLOCK_MAX_INSNS, 1);

    cr_assert_eq(sluice_rec_tag(h), SLUICE_TAG_BLOCK);
    cr_assert_eq(sluice_rec_words(h), 1);
    cr_assert_eq(sluice_block_id(h), SLUICE_BLOCK_ID_MASK);
    cr_assert_eq(sluice_block_from(h), 511);
    cr_assert_eq(sluice_block_to(h), SLUICE_BLOCK_MAX_INSNS);
    cr_assert(sluice_block_cont(h));
    h = sluice_block_hdr(12345, 0, 7, 0);
    cr_assert_eq(sluice_block_id(h), 12345);
    cr_assert_eq(sluice_block_from(h), 0);
    cr_assert_eq(sluice_block_to(h), 7);
    cr_assert(!sluice_block_cont(h));
    cr_assert_eq(sluice_block_words(1), 3);
    cr_assert_eq(sluice_block_words(8), 10);
    cr_assert_eq(sluice_block_words(9), 12);
    cr_assert_eq(sizeof(struct sluice_blocks_hdr), 64);
    cr_assert_eq(sizeof(struct sluice_map_entry), 104);
}

Test(record, text_lengths)
{
    cr_assert_eq(sluice_rec_words(sluice_text_hdr(1)), 2);
    cr_assert_eq(sluice_rec_words(sluice_text_hdr(8)), 2);
    cr_assert_eq(sluice_rec_words(sluice_text_hdr(9)), 3);
    cr_assert_eq(sluice_rec_words(sluice_text_hdr(SLUICE_TEXT_MAX)), 1 + SLUICE_TEXT_MAX / 8);
    cr_assert_eq(sluice_rec_words(sluice_text_hdr(0)), 0, "an empty message is malformed");
    cr_assert_eq(sluice_rec_words(sluice_text_hdr(SLUICE_TEXT_MAX + 1)), 0);
}

Test(record, header_layout)
{
    cr_assert_eq(SLUICE_RING_MAGIC, 0x4752454349554c53ull);
    cr_assert_eq(memcmp(&(uint64_t){SLUICE_RING_MAGIC}, "SLUICERG", 8), 0);
    cr_assert_eq(offsetof(struct sluice_ring_hdr, head), 128);
    cr_assert_eq(offsetof(struct sluice_ring_hdr, written_addr), 256, "its own cache line");
    cr_assert_eq(offsetof(struct sluice_ring_hdr, slot), 384);
    cr_assert_eq(sizeof(struct sluice_ring_slot), 64);
    /* A consumer's words for a ring are a line of its own tail file. */
    cr_assert_eq(sizeof(struct sluice_ring_tail), 64);
    cr_assert_eq(offsetof(struct sluice_ring_tail, tail_futex), 8);
    cr_assert_eq(offsetof(struct sluice_ring_tail, head_waiting), 12);
    cr_assert_eq(offsetof(struct sluice_ring_tail, done), 16);
    cr_assert_eq(SLUICE_TAIL_BYTES, 64ull << 20);
}

Test(record, ring_bytes_parse)
{
    uint64_t b = 1;

    cr_assert_eq(sluice_ring_bytes_parse(NULL, &b), 0);
    cr_assert_eq(b, SLUICE_RING_BYTES_DEFAULT);
    cr_assert_eq(sluice_ring_bytes_parse("262144", &b), 0);
    cr_assert_eq(b, 256u << 10);
    cr_assert_eq(sluice_ring_bytes_parse("0x100000", &b), 0);
    cr_assert_eq(b, 1u << 20);
    cr_assert_eq(sluice_ring_bytes_parse("4M", &b), 0);
    cr_assert_eq(b, 4u << 20);
    cr_assert_eq(sluice_ring_bytes_parse("512k", &b), 0);
    cr_assert_eq(b, 512u << 10);
    cr_assert_eq(sluice_ring_bytes_parse("1G", &b), 0);
    cr_assert_eq(b, 1u << 30);
    b = 7;
    cr_assert_eq(sluice_ring_bytes_parse("2G", &b), -1, "above 1 GiB");
    cr_assert_eq(sluice_ring_bytes_parse("128K", &b), -1, "below 256 KiB");
    cr_assert_eq(sluice_ring_bytes_parse("3M", &b), -1, "not a power of two");
    cr_assert_eq(sluice_ring_bytes_parse("4MB", &b), -1, "a suffix ends the number");
    cr_assert_eq(sluice_ring_bytes_parse("M", &b), -1, "no digits");
    cr_assert_eq(sluice_ring_bytes_parse("0x4M", &b), -1, "no suffix on hex");
    cr_assert_eq(sluice_ring_bytes_parse("99999999999999999999M", &b), -1, "overflow");
    cr_assert_eq(b, 7, "untouched on error");
}
