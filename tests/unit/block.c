/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * block.c — unit tests of block decoding (consumer/block.c, the BLOCK
 * expansion in consumer/decode.c): synthetic chunks and tables in memory, the
 * decoded event sequence compared with the one the EXEC records of the
 * same run would give, through exec, exec_batch and counting alone; every
 * invalid block an error at its record, with the table allocated to its
 * exact size so a read past it is an ASan failure; chunks whose events
 * pass the item bound decoded slice by slice (sliced_stream.h), never
 * holding more items than the bound and giving the same sequence.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "block_table.h"
#include "chunk.h"
#include "decode.h"
#include "sliced_stream.h"
#include "sluice/record.h"

/* --- a table in memory ------------------------------------------------------ */

struct table {
    void *mem; /* header + capacity words, exactly */
    uint64_t *data;
    struct sluice_blocks_hdr *hdr;
    uint64_t cap;
    struct block_table bt;
};

static void table_init(struct table *tb, uint64_t cap)
{
    char err[160];

    tb->mem = calloc(1, SLUICE_BLOCKS_HDR_BYTES + cap * 8);
    cr_assert_not_null(tb->mem);
    tb->hdr = tb->mem;
    tb->data = (uint64_t *)((char *)tb->mem + SLUICE_BLOCKS_HDR_BYTES);
    tb->cap = cap;
    tb->hdr->magic = SLUICE_BLOCKS_MAGIC;
    tb->hdr->version = SLUICE_FORMAT_VERSION;
    tb->hdr->hdr_bytes = SLUICE_BLOCKS_HDR_BYTES;
    tb->hdr->capacity_words = cap;
    cr_assert_eq(
        block_table__check(&tb->bt, tb->mem, SLUICE_BLOCKS_HDR_BYTES + cap * 8, err, sizeof(err)),
        0, "%s", err);
}

static void table_fini(struct table *tb)
{
    free(tb->mem);
}

/* Instruction i of block b's PC. */
static uint64_t pc_at(unsigned b, unsigned i)
{
    return 0x400000 + b * 0x10000 + i * 4;
}

/* Append a descriptor of @p n instructions (PCs pc_at(tag, i)); instruction
 * i is recorded unless bit i of @p unrec is set (i < 64). Returns its id. */
static uint64_t table_add(struct table *tb, unsigned tag, unsigned n, uint64_t unrec)
{
    uint64_t id = tb->hdr->used_words, rec = 0;
    uint8_t *bytes;

    cr_assert_leq(id + sluice_block_words(n), tb->cap);
    for (unsigned i = 0; i < n; i++) {
        tb->data[id + 1 + i] = pc_at(tag, i);
    }
    bytes = (uint8_t *)&tb->data[id + 1 + n];
    for (unsigned i = 0; i < n; i++) {
        int r = !(i < 64 && (unrec >> i & 1));

        bytes[i] = 4 | (r ? SLUICE_BLOCK_RECORDED : 0);
        rec += r;
    }
    tb->data[id] = n | rec << 16;
    __atomic_store_n(&tb->hdr->used_words, id + sluice_block_words(n), __ATOMIC_RELEASE);
    return id;
}

/* --- decoding and what it delivered --------------------------------------------- */

enum { E_EXEC = 1, E_READ, E_WRITE, E_LOST };

struct ev {
    uint32_t kind;
    uint64_t pc;
};

#define LOG_MAX 70000

struct log {
    struct ev ev[LOG_MAX];
    size_t n;
    size_t runs; /* exec_batch calls */
    int outside; /* exec_batch got PCs that are not in the table */
    int inside;  /* exec_batch runs pointing into the table (no copy) */
    const struct table *tb;
};

static void log_put(struct log *l, uint32_t kind, uint64_t pc)
{
    cr_assert_lt(l->n, LOG_MAX);
    l->ev[l->n++] = (struct ev){kind, pc};
}

static int on_exec(void *user, const struct sluice_thread_info *t, uint64_t pc, void *item)
{
    (void)t;
    log_put(user, E_EXEC, pc);
    if (item) {
        *(struct ev *)item = (struct ev){E_EXEC, pc};
    }
    return 1;
}

static int on_batch(void *user, const struct sluice_thread_info *t, const uint64_t *pcs, size_t n,
                    void *item)
{
    struct log *l = user;
    const uint64_t *lo = l->tb ? l->tb->data : NULL;

    (void)t;
    (void)item;
    cr_assert(n >= 1 && n <= 1024, "run of %zu", n);
    /* Runs of a block come from the table itself; others from the run buffer. */
    if (lo && pcs >= lo && pcs < lo + l->tb->cap && pcs + n > lo + l->tb->cap) {
        l->outside++;
    }
    l->inside += lo && pcs >= lo && pcs < lo + l->tb->cap;
    for (size_t k = 0; k < n; k++) {
        log_put(l, E_EXEC, pcs[k]);
    }
    l->runs++;
    return 0;
}

static int on_mem(void *user, const struct sluice_thread_info *t, const struct sluice_mem *m,
                  void *item)
{
    (void)t;
    (void)item;
    log_put(user, m->is_write ? E_WRITE : E_READ, m->pc);
    return 0;
}

static int on_lost(void *user, const struct sluice_thread_info *t, uint64_t count, void *item)
{
    (void)t;
    (void)item;
    log_put(user, E_LOST, count);
    return 0;
}

enum mode { M_EXEC, M_BATCH, M_COUNT };

struct result {
    struct log *log;
    struct sluice_counts counts;
    uint64_t records;
    int bad;
    uint64_t bad_at, bad_hdr;
    char why[128];
};

static const struct sluice_thread_info thread = {1, 2, 0, 0, "x86_64", "test"};

/* Decode @p nw words @p w with table @p tb (may be NULL) through @p mode. */
static struct result decode(const uint64_t *w, size_t nw, struct table *tb, enum mode mode)
{
    struct sluice_callbacks cb = {.sz = sizeof(cb)};
    struct chunk_pool pool;
    struct chunk *c;
    struct result r = {0};

    r.log = calloc(1, sizeof(*r.log));
    r.log->tb = tb;
    cb.user = r.log;
    if (mode == M_EXEC) {
        cb.exec = on_exec;
    } else if (mode == M_BATCH) {
        cb.exec_batch = on_batch;
    }
    if (mode != M_COUNT) {
        cb.read = on_mem;
        cb.write = on_mem;
        cb.lost = on_lost;
    }
    chunk_pool__init(&pool, 1, 0);
    c = chunk_pool__get(&pool);
    c->words = w;
    c->len = nw * 8;
    c->at = 0x1000;
    c->blocks = tb ? &tb->bt : NULL;
    r.records = decode_chunk(c, &cb, &thread);
    r.counts = c->counts;
    r.bad = c->bad;
    r.bad_at = c->bad_at;
    r.bad_hdr = c->bad_hdr;
    memcpy(r.why, c->bad_why, sizeof(r.why));
    chunk_pool__put(&pool, c);
    chunk_pool__destroy(&pool);
    return r;
}

static void result_free(struct result *r)
{
    free(r->log);
}

/* Words of a MEM record (load, 8 bytes) of PC @p pc. */
static unsigned mem(uint64_t *w, uint64_t pc)
{
    w[0] = sluice_mem_hdr(pc, 3, 0);
    w[1] = 0x1000;
    w[2] = 42;
    return 3;
}

/*
 * Decode @p w through exec, exec_batch and counting alone and check each
 * against @p want (@p nwant events): the same sequence, the same counts.
 */
static void expect(const uint64_t *w, size_t nw, struct table *tb, const struct ev *want,
                   size_t nwant)
{
    uint64_t insns = 0, loads = 0;

    for (size_t k = 0; k < nwant; k++) {
        insns += want[k].kind == E_EXEC;
        loads += want[k].kind == E_READ;
    }
    for (int m = M_EXEC; m <= M_COUNT; m++) {
        struct result r = decode(w, nw, tb, (enum mode)m);

        cr_assert_eq(r.bad, 0, "mode %d: bad %d at %llu: %s", m, r.bad,
                     (unsigned long long)r.bad_at, r.why);
        cr_assert_eq(r.counts.insns, insns, "mode %d: %llu insns, want %llu", m,
                     (unsigned long long)r.counts.insns, (unsigned long long)insns);
        cr_assert_eq(r.counts.loads, loads, "mode %d", m);
        cr_assert_eq(r.log->outside, 0, "mode %d: a run beyond the table", m);
        if (m != M_COUNT) {
            cr_assert_eq(r.log->n, nwant, "mode %d: %zu events, want %zu", m, r.log->n, nwant);
            for (size_t k = 0; k < nwant; k++) {
                cr_assert(r.log->ev[k].kind == want[k].kind && r.log->ev[k].pc == want[k].pc,
                          "mode %d event %zu: %u 0x%llx, want %u 0x%llx", m, k, r.log->ev[k].kind,
                          (unsigned long long)r.log->ev[k].pc, want[k].kind,
                          (unsigned long long)want[k].pc);
            }
        } else {
            cr_assert_eq(r.log->n, 0);
        }
        result_free(&r);
    }
}

#define X(b, i)                                                                                    \
    {                                                                                              \
        E_EXEC, pc_at(b, i)                                                                        \
    }
#define R(b, i)                                                                                    \
    {                                                                                              \
        E_READ, pc_at(b, i)                                                                        \
    }

/* --- well-formed blocks ------------------------------------------------------ */

Test(block, full_block)
{
    struct table tb;
    uint64_t w[1];
    const struct ev want[] = {X(1, 0), X(1, 1), X(1, 3), X(1, 4)};

    table_init(&tb, 64);
    w[0] = sluice_block_hdr(table_add(&tb, 1, 5, 1u << 2), 0, 5, 0);
    expect(w, 1, &tb, want, 4);
    table_fini(&tb);
}

Test(block, blocks_back_to_back_and_exec_records_around)
{
    struct table tb;
    uint64_t w[5], a, b;
    const struct ev want[] = {{E_EXEC, 0x10}, X(1, 0), X(1, 1),     X(2, 0),
                              X(2, 1),        X(2, 2), {E_LOST, 3}, {E_EXEC, 0x20}};
    struct result r;

    table_init(&tb, 64);
    a = table_add(&tb, 1, 2, 0);
    b = table_add(&tb, 2, 3, 0);
    w[0] = sluice_exec_hdr(0x10);
    w[1] = sluice_block_hdr(a, 0, 2, 0);
    w[2] = sluice_block_hdr(b, 0, 3, 0);                        /* ends block a */
    w[3] = ((uint64_t)SLUICE_TAG_LOST << SLUICE_TAG_SHIFT) | 3; /* ends block b */
    w[4] = sluice_exec_hdr(0x20);                               /* outside any block */
    expect(w, 5, &tb, want, 8);
    /* Without the LOST record, the EXEC record is block b's, and 0x20 is not in it. */
    w[3] = w[4];
    r = decode(w, 4, &tb, M_EXEC);
    cr_assert_eq(r.bad, CHUNK_BAD_PC);
    result_free(&r);
    table_fini(&tb);
}

/* Counting alone takes a record equal to the one before it at once: its state must be the same. */
Test(block, a_tb_that_loops_on_itself)
{
    struct table tb;
    uint64_t w[8], a, b;
    /* Instruction 2 of block a is not marked: its EXEC record is its event. */
    const struct ev want[] = {X(1, 0), X(1, 1), X(1, 0), X(1, 1), X(1, 0), X(1, 1), X(1, 0),
                              X(1, 1), X(1, 0), X(1, 1), X(1, 2), X(2, 0), X(2, 0)};
    struct result r;

    table_init(&tb, 64);
    a = table_add(&tb, 1, 3, 1u << 2);
    b = table_add(&tb, 2, 1, 0);
    w[0] = w[1] = sluice_block_hdr(a, 0, 3, 0);
    w[2] = sluice_block_hdr(a, 0, 2, 0); /* left early: not a repeat */
    w[3] = w[4] = sluice_block_hdr(a, 0, 3, 0);
    w[5] = sluice_exec_hdr(pc_at(1, 2)); /* checked against block a, as after any record */
    w[6] = w[7] = sluice_block_hdr(b, 0, 1, 0);
    expect(w, 8, &tb, want, sizeof(want) / sizeof(want[0]));
    /* After a repeat, a record that is not in the block is still refused... */
    w[5] = sluice_exec_hdr(pc_at(2, 0));
    r = decode(w, 8, &tb, M_COUNT);
    cr_assert_eq(r.bad, CHUNK_BAD_PC);
    cr_assert_eq(r.bad_at, 0x1000 + 5 * 8);
    result_free(&r);
    /* ...and so is a zero word, though no record came before it. */
    w[0] = 0;
    r = decode(w, 8, &tb, M_COUNT);
    cr_assert_eq(r.bad, CHUNK_BAD_HEADER);
    cr_assert_eq(r.bad_at, 0x1000);
    result_free(&r);
    table_fini(&tb);
}

Test(block, interleaved_with_mem_records)
{
    struct table tb;
    uint64_t w[32];
    unsigned n = 0;
    const struct ev want[] = {X(1, 0), X(1, 1), R(1, 1), R(1, 1), X(1, 2),
                              R(1, 3), X(1, 4), R(1, 4), X(1, 5)};

    table_init(&tb, 64);
    w[n++] = sluice_block_hdr(table_add(&tb, 1, 6, 1u << 3), 0, 6, 0);
    n += mem(&w[n], pc_at(1, 1)); /* two accesses of one instruction */
    n += mem(&w[n], pc_at(1, 1));
    n += mem(&w[n], pc_at(1, 3)); /* an instruction whose exec is not recorded */
    n += mem(&w[n], pc_at(1, 4));
    expect(w, n, &tb, want, 9);
    table_fini(&tb);
}

Test(block, split_at_a_chunk_boundary)
{
    struct table tb;
    uint64_t w1[8], w2[8], id;
    unsigned n1 = 0, n2 = 0;
    const struct ev want1[] = {X(1, 0), R(1, 0), X(1, 1), X(1, 2)};
    const struct ev want2[] = {X(1, 3), R(1, 3), X(1, 4)};

    table_init(&tb, 64);
    id = table_add(&tb, 1, 5, 0);
    w1[n1++] = sluice_block_hdr(id, 0, 3, 0);
    n1 += mem(&w1[n1], pc_at(1, 0));
    w2[n2++] = sluice_block_hdr(id, 3, 5, 0);
    n2 += mem(&w2[n2], pc_at(1, 3));
    expect(w1, n1, &tb, want1, 4); /* each chunk decodes alone */
    expect(w2, n2, &tb, want2, 3);
    /* A record of the first part's instructions in the second part is not in it. */
    n2 = 1;
    n2 += mem(&w2[n2], pc_at(1, 1));
    struct result r = decode(w2, n2, &tb, M_EXEC);
    cr_assert_eq(r.bad, CHUNK_BAD_PC);
    result_free(&r);
    table_fini(&tb);
}

Test(block, split_inside_an_instruction_continues_it)
{
    struct table tb;
    uint64_t w1[8], w2[12], id;
    unsigned n1 = 0, n2 = 0;
    /* Instruction 2's records fall on both sides of the boundary. */
    const struct ev want1[] = {X(1, 0), X(1, 1), X(1, 2), R(1, 2)};
    const struct ev want2[] = {R(1, 2), X(1, 3), X(1, 4), R(1, 4)};
    const struct ev want3[] = {R(1, 2)};

    table_init(&tb, 64);
    id = table_add(&tb, 1, 5, 0);
    w1[n1++] = sluice_block_hdr(id, 0, 3, 0);
    n1 += mem(&w1[n1], pc_at(1, 2));
    w2[n2++] = sluice_block_hdr(id, 2, 5, 1);
    n2 += mem(&w2[n2], pc_at(1, 2));
    n2 += mem(&w2[n2], pc_at(1, 4));
    expect(w1, n1, &tb, want1, 4);
    expect(w2, n2, &tb, want2, 4);
    /* An empty part that continues delivers nothing; its instruction's records are its own. */
    w2[0] = sluice_block_hdr(id, 2, 2, 1);
    expect(w2, 4, &tb, want3, 1);
    /* Continuing past the descriptor's end is refused. */
    w2[0] = sluice_block_hdr(id, 5, 5, 1);
    struct result r = decode(w2, 1, &tb, M_EXEC);
    cr_assert_eq(r.bad, CHUNK_BAD_BLOCK);
    result_free(&r);
    table_fini(&tb);
}

Test(block, exec_record_inside_a_block)
{
    struct table tb;
    uint64_t w[8];
    unsigned n = 0;
    /* Instruction 2 is a SLUICE_HOOK_ONCE one: not marked, its EXEC record is its event. */
    const struct ev want[] = {X(1, 0), X(1, 1), X(1, 2), R(1, 2), X(1, 3)};

    table_init(&tb, 64);
    w[n++] = sluice_block_hdr(table_add(&tb, 1, 4, 1u << 2), 0, 4, 0);
    w[n++] = sluice_exec_hdr(pc_at(1, 2));
    n += mem(&w[n], pc_at(1, 2));
    expect(w, n, &tb, want, 5);
    table_fini(&tb);
}

Test(block, partial_block)
{
    struct table tb;
    uint64_t w[8];
    unsigned n = 0;
    const struct ev want[] = {X(1, 0), R(1, 1), X(1, 2), {E_LOST, 1}};

    table_init(&tb, 64);
    w[n++] = sluice_block_hdr(table_add(&tb, 1, 6, 1u << 1), 0, 3, 0); /* left at insn 2 */
    n += mem(&w[n], pc_at(1, 1));
    w[n++] = ((uint64_t)SLUICE_TAG_LOST << SLUICE_TAG_SHIFT) | 1;
    expect(w, n, &tb, want, 4);
    /* A record of an instruction past `to` is not in the block. */
    n = 1;
    n += mem(&w[n], pc_at(1, 3));
    struct result r = decode(w, n, &tb, M_COUNT);
    cr_assert_eq(r.bad, CHUNK_BAD_PC);
    result_free(&r);
    table_fini(&tb);
}

Test(block, empty_part)
{
    struct table tb;
    uint64_t w[4], id;
    const struct ev want[] = {X(1, 0), X(1, 1), X(1, 2)};

    table_init(&tb, 64);
    id = table_add(&tb, 1, 3, 0);
    w[0] = sluice_block_hdr(id, 3, 3, 0); /* the boundary fell right after the block */
    w[1] = sluice_block_hdr(id, 0, 0, 0);
    w[2] = sluice_block_hdr(id, 0, 3, 0);
    expect(w, 3, &tb, want, 3);
    table_fini(&tb);
}

Test(block, records_in_a_different_order_are_refused)
{
    struct table tb;
    uint64_t w[8];
    unsigned n = 0;

    table_init(&tb, 64);
    w[n++] = sluice_block_hdr(table_add(&tb, 1, 4, 0), 0, 4, 0);
    n += mem(&w[n], pc_at(1, 2));
    n += mem(&w[n], pc_at(1, 1)); /* an earlier instruction, after a later one */
    struct result r = decode(w, n, &tb, M_EXEC);
    cr_assert_eq(r.bad, CHUNK_BAD_PC);
    cr_assert_eq(r.bad_at, 0x1000 + 4 * 8, "at the second MEM record");
    cr_assert_eq(r.log->n, 4, "instructions 0..2 and the first access, nothing after");
    cr_assert(strstr(r.why, "not in block"), "%s", r.why);
    result_free(&r);
    table_fini(&tb);
}

Test(block, recorded_bits_past_the_first_byte_word)
{
    struct table tb;
    uint64_t w[16];
    struct ev want[40];
    unsigned n = 0, k = 0;
    uint64_t unrec = 0;

    table_init(&tb, 128);
    for (unsigned i = 0; i < 37; i++) {
        if (i % 3 == 1) {
            unrec |= 1ull << i;
        }
    }
    w[n++] = sluice_block_hdr(table_add(&tb, 1, 37, unrec), 0, 37, 0);
    n += mem(&w[n], pc_at(1, 19)); /* not recorded: 19 % 3 == 1 */
    for (unsigned i = 0; i < 37; i++) {
        if (i % 3 != 1) {
            want[k++] = (struct ev)X(1, i);
        }
        if (i == 19) {
            want[k++] = (struct ev)R(1, 19);
        }
    }
    expect(w, n, &tb, want, k);
    table_fini(&tb);
}

Test(block, largest_block_in_batch_mode_is_one_run_from_the_table)
{
    struct table tb;
    uint64_t w[1];
    struct result r;

    table_init(&tb, 1024);
    w[0] = sluice_block_hdr(table_add(&tb, 1, SLUICE_BLOCK_MAX_INSNS, 0), 0, SLUICE_BLOCK_MAX_INSNS,
                            0);
    r = decode(w, 1, &tb, M_BATCH);
    cr_assert_eq(r.bad, 0);
    cr_assert_eq(r.log->n, SLUICE_BLOCK_MAX_INSNS);
    cr_assert_eq(r.log->runs, 1);
    cr_assert_eq(r.log->inside, 1, "the run is the table's own PCs");
    cr_assert_eq(r.counts.insns, SLUICE_BLOCK_MAX_INSNS);
    cr_assert_eq(r.records, SLUICE_BLOCK_MAX_INSNS, "events: the exec events");
    result_free(&r);
    table_fini(&tb);
}

/* One item per exec event: a chunk of BLOCK words makes far more items than words. */
static int item_exec(void *user, const struct sluice_thread_info *t, uint64_t pc, void *item)
{
    (void)user;
    (void)t;
    *(uint64_t *)item = pc;
    return 1;
}

Test(block, items_grow_past_one_per_word)
{
    struct sluice_callbacks cb = {.sz = sizeof(cb), .item_size = 8, .exec = item_exec};
    struct chunk_pool pool;
    struct table tb;
    uint64_t *w, id;
    size_t nw = 200;
    struct chunk *c;

    table_init(&tb, 1024);
    id = table_add(&tb, 1, SLUICE_BLOCK_MAX_INSNS, 0);
    w = calloc(nw, 8);
    for (size_t i = 0; i < nw; i++) {
        w[i] = sluice_block_hdr(id, 0, SLUICE_BLOCK_MAX_INSNS, 0);
    }
    chunk_pool__init(&pool, 1, cb.item_size);
    c = chunk_pool__get(&pool);
    c->words = w;
    c->len = nw * 8;
    c->blocks = &tb.bt;
    decode_chunk(c, &cb, &thread);
    cr_assert_eq(c->bad, 0);
    cr_assert_eq(c->n_items, nw * SLUICE_BLOCK_MAX_INSNS);
    cr_assert_geq(c->items_cap, c->n_items);
    cr_assert_eq(((uint64_t *)c->items)[c->n_items - 1], pc_at(1, SLUICE_BLOCK_MAX_INSNS - 1));
    chunk_pool__put(&pool, c);
    chunk_pool__destroy(&pool);
    free(w);
    table_fini(&tb);
}

/* --- invalid blocks ------------------------------------------------------------ */

/* Decode @p w in every mode: an error of @p kind at word @p at whose reason has @p why. */
static void expect_bad(const uint64_t *w, size_t nw, struct table *tb, int kind, size_t at,
                       const char *why, size_t events_before)
{
    for (int m = M_EXEC; m <= M_COUNT; m++) {
        struct result r = decode(w, nw, tb, (enum mode)m);

        cr_assert_eq(r.bad, kind, "mode %d: bad %d (%s)", m, r.bad, r.why);
        cr_assert_eq(r.bad_at, 0x1000 + at * 8, "mode %d", m);
        cr_assert_eq(r.bad_hdr, w[at], "mode %d", m);
        cr_assert(strstr(r.why, why), "mode %d: \"%s\" lacks \"%s\"", m, r.why, why);
        if (m != M_COUNT) {
            cr_assert_eq(r.log->n, events_before, "mode %d: %zu events before", m, r.log->n);
        }
        result_free(&r);
    }
}

Test(block, id_past_used_words)
{
    struct table tb;
    uint64_t w[2];

    table_init(&tb, 16);
    table_add(&tb, 1, 3, 0); /* 5 words */
    w[0] = sluice_block_hdr(0, 0, 3, 0);
    w[1] = sluice_block_hdr(5, 0, 1, 0); /* past used_words */
    expect_bad(w, 2, &tb, CHUNK_BAD_BLOCK, 1, "not whole", 3);
    w[1] = sluice_block_hdr(16, 0, 1, 0); /* at the capacity: the word does not exist */
    tb.hdr->used_words = 16;
    expect_bad(w, 2, &tb, CHUNK_BAD_BLOCK, 1, "not whole", 3);
    w[1] = sluice_block_hdr(SLUICE_BLOCK_ID_MASK, 0, 1, 0);
    expect_bad(w, 2, &tb, CHUNK_BAD_BLOCK, 1, "not whole", 3);
    table_fini(&tb);
}

Test(block, descriptor_past_used_words)
{
    struct table tb;
    uint64_t w[1];

    table_init(&tb, 8);
    /* Word 0 says 500 instructions; the table has 8 words, all "used". */
    tb.data[2] = 500 | 500u << 16;
    tb.hdr->used_words = 8;
    w[0] = sluice_block_hdr(2, 0, 500, 0);
    expect_bad(w, 1, &tb, CHUNK_BAD_BLOCK, 0, "not whole", 0);
    table_fini(&tb);
}

Test(block, used_words_past_capacity)
{
    struct table tb;
    uint64_t w[1];

    table_init(&tb, 8);
    table_add(&tb, 1, 2, 0);
    tb.hdr->used_words = 1u << 20;
    w[0] = sluice_block_hdr(0, 0, 2, 0);
    expect_bad(w, 1, &tb, CHUNK_BAD_BLOCK, 0, "capacity", 0);
    table_fini(&tb);
}

Test(block, to_past_n_and_from_past_to)
{
    struct table tb;
    uint64_t w[2], id;

    table_init(&tb, 64);
    id = table_add(&tb, 1, 4, 0);
    w[0] = sluice_block_hdr(id, 0, 2, 0);
    w[1] = sluice_block_hdr(id, 0, 5, 0);
    expect_bad(w, 2, &tb, CHUNK_BAD_BLOCK, 1, "instructions 0..5 of a descriptor of 4", 2);
    w[1] = sluice_block_hdr(id, 3, 2, 0);
    expect_bad(w, 2, &tb, CHUNK_BAD_BLOCK, 1, "instructions 3..2", 2);
    w[1] = sluice_block_hdr(id, 0x3ff, 0x3ff, 0);
    expect_bad(w, 2, &tb, CHUNK_BAD_BLOCK, 1, "of a descriptor of 4", 2);
    table_fini(&tb);
}

Test(block, n_zero_and_n_too_big)
{
    struct table tb;
    uint64_t w[1];

    table_init(&tb, 1024);
    tb.hdr->used_words = 1024;
    tb.data[0] = 0;
    w[0] = sluice_block_hdr(0, 0, 0, 0);
    expect_bad(w, 1, &tb, CHUNK_BAD_BLOCK, 0, "has 0 instructions", 0);
    tb.data[0] = 513 | 513u << 16;
    w[0] = sluice_block_hdr(0, 0, 513, 0);
    expect_bad(w, 1, &tb, CHUNK_BAD_BLOCK, 0, "has 513 instructions", 0);
    tb.data[0] = 0xffff;
    expect_bad(w, 1, &tb, CHUNK_BAD_BLOCK, 0, "has 65535 instructions", 0);
    table_fini(&tb);
}

Test(block, pc_not_in_block)
{
    struct table tb;
    uint64_t w[8];
    unsigned n = 0;

    table_init(&tb, 64);
    w[n++] = sluice_block_hdr(table_add(&tb, 1, 3, 0), 0, 3, 0);
    n += mem(&w[n], pc_at(1, 1));
    w[n++] = sluice_exec_hdr(0x999); /* an EXEC record too */
    expect_bad(w, n, &tb, CHUNK_BAD_PC, 4, "PC 0x999 is not in block 0", 3);
    n = 1;
    n += mem(&w[n], 0x999);
    expect_bad(w, n, &tb, CHUNK_BAD_PC, 1, "PC 0x999 is not in block 0 (instructions 0..3 of 3)",
               0);
    table_fini(&tb);
}

Test(block, no_table)
{
    uint64_t w[2] = {sluice_exec_hdr(0x10), sluice_block_hdr(0, 0, 1, 0)};

    expect_bad(w, 2, NULL, CHUNK_BAD_BLOCK, 1, "no block table", 1);
}

Test(block, bad_header_after_a_block_delivers_the_block_first)
{
    struct table tb;
    uint64_t w[2];

    table_init(&tb, 64);
    w[0] = sluice_block_hdr(table_add(&tb, 1, 3, 0), 0, 3, 0);
    w[1] = 0x4400000000000000ull;
    for (int m = M_EXEC; m <= M_COUNT; m++) {
        struct result r = decode(w, 2, &tb, (enum mode)m);

        cr_assert_eq(r.bad, CHUNK_BAD_HEADER);
        cr_assert_eq(r.counts.insns, 3, "the block ran before the bad record");
        result_free(&r);
    }
    table_fini(&tb);
}

/* --- chunks decoded in slices (the item bound) ---------------------------------- */

/* A growable log of events, in callback or item order. */
struct evlog {
    struct sls_ev *ev;
    size_t n, cap;
};

static void evlog_put(struct evlog *l, struct sls_ev e)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 65536;
        l->ev = realloc(l->ev, l->cap * sizeof(*l->ev));
        cr_assert_not_null(l->ev);
    }
    l->ev[l->n++] = e;
}

/* Items of SLICE_ITEM bytes: the bound is then SLUICE_CHUNK_BYTES / 8 items. */
#define SLICE_ITEM 256

static int s_exec(void *user, const struct sluice_thread_info *t, uint64_t pc, void *item)
{
    (void)user;
    (void)t;
    memset(item, 0xa5, SLICE_ITEM); /* ASan: the whole item is inside the area */
    *(struct sls_ev *)item = (struct sls_ev){SLS_EXEC, 0, pc};
    return 1;
}

static int s_batch(void *user, const struct sluice_thread_info *t, const uint64_t *pcs, size_t n,
                   void *item)
{
    (void)t;
    cr_assert(n >= 1 && n <= 1024);
    for (size_t k = 0; k < n; k++) {
        evlog_put(user, (struct sls_ev){SLS_EXEC, 0, pcs[k]});
    }
    memset(item, 0x5a, SLICE_ITEM);
    return 1;
}

static int s_mem(void *user, const struct sluice_thread_info *t, const struct sluice_mem *m,
                 void *item)
{
    (void)t;
    if (user) {
        evlog_put(user, (struct sls_ev){SLS_READ, 0, m->pc});
    }
    *(struct sls_ev *)item = (struct sls_ev){SLS_READ, 0, m->pc};
    return 1;
}

static int s_lost(void *user, const struct sluice_thread_info *t, uint64_t count, void *item)
{
    (void)t;
    if (user) {
        evlog_put(user, (struct sls_ev){SLS_LOST, 0, count});
    }
    *(struct sls_ev *)item = (struct sls_ev){SLS_LOST, 0, count};
    return 1;
}

/* Append a descriptor of SLS_N instructions of sliced_stream.h's @p desc. */
static uint64_t table_add_sls(struct table *tb, int desc)
{
    uint64_t id = tb->hdr->used_words, rec = 0;
    uint8_t *bytes;

    cr_assert_leq(id + sluice_block_words(SLS_N), tb->cap);
    bytes = (uint8_t *)&tb->data[id + 1 + SLS_N];
    for (unsigned i = 0; i < SLS_N; i++) {
        tb->data[id + 1 + i] = sls_pc(desc, i);
        bytes[i] = 4 | (sls_recorded(desc, i) ? SLUICE_BLOCK_RECORDED : 0);
        rec += sls_recorded(desc, i) != 0;
    }
    tb->data[id] = SLS_N | rec << 16;
    __atomic_store_n(&tb->hdr->used_words, id + sluice_block_words(SLS_N), __ATOMIC_RELEASE);
    return id;
}

struct sliced {
    uint64_t *w;
    size_t nw;
    struct evlog want;
    struct sluice_counts counts;
};

/* Iterations of sliced_stream.h while they fit in @p max words. */
static void sliced_build(struct sliced *x, const uint64_t ids[2], size_t max)
{
    uint64_t w[SLS_MAX_WORDS];
    struct sls_ev ev[SLS_MAX_EVENTS];
    unsigned nev, n;

    x->w = calloc(max, 8);
    for (uint64_t k = 0;; k++) {
        n = sls_iter(k, ids, w, ev, &nev);
        if (x->nw + n > max) {
            break;
        }
        memcpy(&x->w[x->nw], w, n * 8);
        x->nw += n;
        for (unsigned e = 0; e < nev; e++) {
            evlog_put(&x->want, ev[e]);
            x->counts.insns += ev[e].kind == SLS_EXEC;
            x->counts.loads += ev[e].kind == SLS_READ;
            x->counts.lost += ev[e].kind == SLS_LOST ? ev[e].pc : 0;
        }
    }
}

struct sliced_result {
    struct evlog got;            /* exec: the items, in order; batch: the callbacks, in order */
    struct sluice_counts counts; /* summed over the slices */
    uint64_t events;
    unsigned slices;
    int bad;
    uint64_t bad_at, bad_hdr;
};

/*
 * Decode @p nw words @p w the way a worker does: slice after slice, each
 * slice's items taken (into r.got for exec) and emptied through the
 * hand-off functions, never holding more than the bound.
 */
static struct sliced_result decode_sliced(const uint64_t *w, size_t nw, struct table *tb, int batch)
{
    struct sluice_callbacks cb = {.sz = sizeof(cb), .item_size = SLICE_ITEM};
    struct sliced_result r = {0};
    struct chunk_pool pool;
    struct chunk *c;

    if (batch) {
        cb.exec_batch = s_batch;
        cb.user = &r.got;
    } else {
        cb.exec = s_exec;
    }
    cb.read = s_mem;
    cb.lost = s_lost;
    chunk_pool__init(&pool, 1, cb.item_size);
    c = chunk_pool__get(&pool);
    cr_assert_eq(c->items_max, SLUICE_CHUNK_BYTES / 8, "8 MiB of 256-byte items");
    cr_assert_eq(chunk_items_max(8), SLUICE_CHUNK_ITEMS_BYTES / 8);
    cr_assert_eq(chunk_items_max(4096), SLUICE_CHUNK_BYTES / 8, "never fewer than one per word");
    c->words = w;
    c->len = nw * 8;
    c->at = 0x1000;
    c->blocks = &tb->bt;
    for (;;) {
        r.events += decode_chunk(c, &cb, &thread);
        r.slices++;
        cr_assert_leq(c->items_cap, c->items_max, "the item area grew past the bound");
        cr_assert_leq(c->n_items, c->items_cap);
        r.counts.insns += c->counts.insns;
        r.counts.loads += c->counts.loads;
        r.counts.lost += c->counts.lost;
        for (size_t k = 0; !batch && k < c->n_items; k++) {
            evlog_put(&r.got, *(struct sls_ev *)(c->items + k * SLICE_ITEM));
        }
        if (!c->partial) {
            break;
        }
        cr_assert_eq(c->bad, 0, "only the last slice may end at a bad record");
        chunk__slice_done(c, 1); /* as the ordering thread would */
        cr_assert_eq(chunk__slice_wait(c), 1);
        cr_assert_eq(c->n_items, 0);
    }
    r.bad = c->bad;
    r.bad_at = c->bad_at;
    r.bad_hdr = c->bad_hdr;
    chunk_pool__put(&pool, c);
    chunk_pool__destroy(&pool);
    return r;
}

static void expect_same(const struct evlog *got, const struct evlog *want, size_t n, int mode)
{
    cr_assert_eq(got->n, n, "mode %d: %zu events, want %zu", mode, got->n, n);
    for (size_t k = 0; k < n; k++) {
        cr_assert(got->ev[k].kind == want->ev[k].kind && got->ev[k].pc == want->ev[k].pc,
                  "mode %d event %zu: %u 0x%llx, want %u 0x%llx", mode, k, got->ev[k].kind,
                  (unsigned long long)got->ev[k].pc, want->ev[k].kind,
                  (unsigned long long)want->ev[k].pc);
    }
}

Test(block, a_chunk_past_the_item_bound_is_decoded_in_slices)
{
    struct table tb;
    uint64_t ids[2];
    struct sliced x = {0};

    table_init(&tb, 2 * sluice_block_words(SLS_N));
    ids[0] = table_add_sls(&tb, 0);
    ids[1] = table_add_sls(&tb, 1);
    sliced_build(&x, ids, SLUICE_CHUNK_BYTES / 8); /* a whole chunk: ~2M events */
    cr_assert_gt(x.want.n, 8 * (SLUICE_CHUNK_BYTES / 8), "far past the bound");
    for (int batch = 0; batch <= 1; batch++) {
        struct sliced_result r = decode_sliced(x.w, x.nw, &tb, batch);

        cr_assert_eq(r.bad, 0, "bad %d at %llu", r.bad, (unsigned long long)r.bad_at);
        cr_assert_gt(r.slices, 8, "mode %d: %u slices", batch, r.slices);
        expect_same(&r.got, &x.want, x.want.n, batch);
        cr_assert_eq(r.counts.insns, x.counts.insns);
        cr_assert_eq(r.counts.loads, x.counts.loads);
        cr_assert_eq(r.counts.lost, x.counts.lost);
        cr_assert_eq(r.events, x.counts.insns + x.counts.loads + x.counts.lost);
        free(r.got.ev);
    }
    free(x.w);
    free(x.want.ev);
    table_fini(&tb);
}

Test(block, a_bad_record_after_slices_is_reported_where_it_is)
{
    struct table tb;
    uint64_t ids[2];
    struct sliced x = {0};
    size_t before;

    table_init(&tb, 2 * sluice_block_words(SLS_N));
    ids[0] = table_add_sls(&tb, 0);
    ids[1] = table_add_sls(&tb, 1);
    sliced_build(&x, ids, 4000);
    before = x.want.n;
    cr_assert_gt(before, 4 * (SLUICE_CHUNK_BYTES / 8));
    /* A block, then an invalid header: the block is delivered first. */
    x.w[x.nw++] = sluice_block_hdr(ids[0], 0, SLS_N, 0);
    x.w[x.nw++] = 0x4400000000000000ull;
    for (unsigned i = 0; i < SLS_N; i++) {
        evlog_put(&x.want, (struct sls_ev){SLS_EXEC, 0, sls_pc(0, i)});
    }
    for (int batch = 0; batch <= 1; batch++) {
        struct sliced_result r = decode_sliced(x.w, x.nw, &tb, batch);

        cr_assert_eq(r.bad, CHUNK_BAD_HEADER);
        cr_assert_eq(r.bad_at, 0x1000 + (x.nw - 1) * 8, "at its own position");
        cr_assert_eq(r.bad_hdr, 0x4400000000000000ull);
        cr_assert_gt(r.slices, batch ? 0u : 4u, "mode %d: %u slices, %zu events", batch, r.slices,
                     r.got.n);
        expect_same(&r.got, &x.want, x.want.n, batch);
        free(r.got.ev);
    }
    /* A load whose PC is not in its block: nothing of that block is delivered. */
    x.nw -= 1;
    x.nw += sls_mem(&x.w[x.nw], 0x999);
    for (int batch = 0; batch <= 1; batch++) {
        struct sliced_result r = decode_sliced(x.w, x.nw, &tb, batch);

        cr_assert_eq(r.bad, CHUNK_BAD_PC);
        cr_assert_eq(r.bad_at, 0x1000 + (x.nw - 3) * 8);
        expect_same(&r.got, &x.want, before, batch);
        free(r.got.ev);
    }
    free(x.w);
    free(x.want.ev);
    table_fini(&tb);
}

static int chunk_ends;

static int on_chunk_end(void *user, const struct sluice_thread_info *t, void *item)
{
    struct log *l = user;

    (void)t;
    cr_assert_gt(l->n, 0, "chunk_end comes after the chunk's events");
    *(struct ev *)item = (struct ev){E_LOST, l->n}; /* one summary item */
    chunk_ends++;
    return 1;
}

Test(block, chunk_end_follows_the_last_event_and_makes_the_last_item)
{
    struct sluice_callbacks cb = {.sz = sizeof(cb), .item_size = sizeof(struct ev)};
    struct log *l = calloc(1, sizeof(*l));
    struct chunk_pool pool;
    struct table tb;
    struct chunk *c;
    uint64_t w[8];
    unsigned n = 0;

    table_init(&tb, 64);
    w[n++] = sluice_block_hdr(table_add(&tb, 1, 3, 0), 0, 3, 0);
    n += mem(&w[n], pc_at(1, 1));
    cb.user = l;
    cb.exec = on_exec;
    cb.read = on_mem;
    cb.chunk_end = on_chunk_end;
    chunk_pool__init(&pool, 1, cb.item_size);
    c = chunk_pool__get(&pool);
    c->words = w;
    c->len = n * 8;
    c->blocks = &tb.bt;
    chunk_ends = 0;
    decode_chunk(c, &cb, &thread);
    cr_assert_eq(chunk_ends, 1);
    cr_assert_eq(c->n_items, 4, "three exec items, then the chunk's");
    cr_assert_eq(((struct ev *)c->items)[3].kind, E_LOST);
    cr_assert_eq(((struct ev *)c->items)[3].pc, 4, "after all 4 events of the chunk");
    chunk_pool__put(&pool, c);
    chunk_pool__destroy(&pool);
    table_fini(&tb);
    free(l);
}

/* --- slots (format 5) ------------------------------------------------------------ */

/* table_add() with the @p ns slots @p slots. Returns its id. */
static uint64_t table_add_slots(struct table *tb, unsigned tag, unsigned n, uint64_t unrec,
                                const uint16_t *slots, unsigned ns)
{
    uint64_t id = table_add(tb, tag, n, unrec);
    uint16_t *s = (uint16_t *)&tb->data[id + sluice_block_words(n)];

    cr_assert_leq(id + sluice_block_words(n) + (ns + 3) / 4, tb->cap);
    for (unsigned k = 0; k < ns; k++) {
        s[k] = slots[k];
    }
    tb->data[id] |= (uint64_t)ns << 32;
    __atomic_store_n(&tb->hdr->used_words, id + sluice_block_desc_words(tb->data[id]),
                     __ATOMIC_RELEASE);
    return id;
}

/* A slot record: address @p addr, value @p v (@p hi too for 16 bytes, @p three). */
static unsigned slot_rec(uint64_t *w, uint64_t addr, uint64_t v, int three)
{
    w[0] = addr;
    w[1] = v;
    if (three) {
        w[2] = ~v;
    }
    return three ? 3 : 2;
}

#define W(b, i)                                                                                    \
    {                                                                                              \
        E_WRITE, pc_at(b, i)                                                                       \
    }

Test(block, slot_records_are_their_instructions_accesses)
{
    /* Instruction 1 loads twice, 2 (exec not recorded) once, 4 loads 16 bytes; 5 has a record
     * with a header after the slots. */
    const uint16_t slots[] = {sluice_slot(1, 3, 0), sluice_slot(1, 3, 0), sluice_slot(2, 2, 0),
                              sluice_slot(4, 4, 0)};
    const struct ev want[] = {X(3, 0), X(3, 1), R(3, 1), R(3, 1), R(3, 2),
                              X(3, 3), X(3, 4), R(3, 4), X(3, 5), R(3, 5)};
    struct table tb;
    uint64_t w[32], h[32], id;
    unsigned n = 0, m = 0;

    table_init(&tb, 64);
    id = table_add_slots(&tb, 3, 6, 1u << 2, slots, 4);
    w[n++] = sluice_block_slots_hdr(id, 6);
    n += slot_rec(&w[n], 0x100, 1, 0);
    n += slot_rec(&w[n], 0x108, 2, 0);
    n += slot_rec(&w[n], 0x110, 3, 0);
    n += slot_rec(&w[n], 0x120, 4, 1);
    n += mem(&w[n], pc_at(3, 5));
    expect(w, n, &tb, want, 10);
    /* The same TB as a BLOCK record (left early, or cut): its records keep their headers. */
    h[m++] = sluice_block_hdr(id, 0, 6, 0);
    for (unsigned k = 0; k < 4; k++) {
        m += mem(&h[m], pc_at(3, sluice_slot_insn(slots[k])));
    }
    m += mem(&h[m], pc_at(3, 5));
    expect(h, m, &tb, want, 10);
    table_fini(&tb);
}

static struct sluice_mem seen_mem[8];
static unsigned n_seen_mem;

static int on_slot_mem(void *user, const struct sluice_thread_info *t, const struct sluice_mem *m,
                       void *item)
{
    (void)user;
    (void)t;
    (void)item;
    cr_assert_lt(n_seen_mem, 8);
    seen_mem[n_seen_mem++] = *m;
    return 0;
}

Test(block, a_slot_record_has_its_slots_size_direction_pc_and_masked_value)
{
    const uint16_t slots[] = {sluice_slot(0, 2, 1), sluice_slot(1, 4, 0), sluice_slot(1, 0, 0)};
    struct sluice_callbacks cb = {.sz = sizeof(cb), .read = on_slot_mem, .write = on_slot_mem};
    struct chunk_pool pool;
    struct table tb;
    struct chunk *c;
    uint64_t w[16];
    unsigned n = 0;

    table_init(&tb, 64);
    w[n++] = sluice_block_slots_hdr(table_add_slots(&tb, 4, 2, 0, slots, 3), 2);
    n += slot_rec(&w[n], 0x7000, 0xffffffff12345678ull, 0);
    n += slot_rec(&w[n], 0x7010, 0x1111, 1);
    n += slot_rec(&w[n], 0x7020, 0x4243, 0);
    chunk_pool__init(&pool, 1, 0);
    c = chunk_pool__get(&pool);
    c->words = w;
    c->len = n * 8;
    c->blocks = &tb.bt;
    n_seen_mem = 0;
    cr_assert_eq(decode_chunk(c, &cb, &thread), 2 + 3);
    cr_assert_eq(c->bad, 0, "%s", c->bad_why);
    cr_assert_eq(n_seen_mem, 3);
    cr_assert(seen_mem[0].is_write && seen_mem[0].size == 4 && seen_mem[0].pc == pc_at(4, 0));
    cr_assert_eq(seen_mem[0].addr, 0x7000);
    cr_assert_eq(seen_mem[0].value, 0x12345678, "masked to its 4 bytes");
    cr_assert(!seen_mem[1].is_write && seen_mem[1].size == 16 && seen_mem[1].pc == pc_at(4, 1));
    cr_assert(seen_mem[1].value == 0x1111 && seen_mem[1].value_hi == ~0x1111ull);
    cr_assert(seen_mem[2].size == 1 && seen_mem[2].value == 0x43 && seen_mem[2].addr == 0x7020);
    cr_assert_eq(c->counts.stores, 1);
    cr_assert_eq(c->counts.loads, 2);
    chunk_pool__put(&pool, c);
    chunk_pool__destroy(&pool);
    table_fini(&tb);
}

Test(block, slot_records_that_do_not_fit_or_do_not_belong_are_refused)
{
    const uint16_t slots[] = {sluice_slot(1, 3, 0), sluice_slot(2, 3, 0)};
    struct table tb;
    uint64_t w[8], id, bad;

    table_init(&tb, 128);
    id = table_add_slots(&tb, 5, 3, 0, slots, 2);
    w[0] = sluice_exec_hdr(0x10);
    w[1] = sluice_block_slots_hdr(id, 3);
    slot_rec(&w[2], 0x100, 1, 0);
    slot_rec(&w[4], 0x108, 2, 0);
    expect_bad(w, 5, &tb, CHUNK_BAD_CROSSING, 1, "", 1); /* its second slot is cut off */
    /* A part that ends before its last slot's instruction, or does not start at 0. */
    w[1] = (sluice_block_hdr(id, 0, 2, 0) & SLUICE_PAYLOAD_MASK) | (uint64_t)SLUICE_TAG_BLOCK_SLOTS
                                                                       << SLUICE_TAG_SHIFT;
    expect_bad(w, 6, &tb, CHUNK_BAD_BLOCK, 1, "not all in its instructions 0..2", 1);
    w[1] = (sluice_block_hdr(id, 1, 3, 0) & SLUICE_PAYLOAD_MASK) | (uint64_t)SLUICE_TAG_BLOCK_SLOTS
                                                                       << SLUICE_TAG_SHIFT;
    expect_bad(w, 6, &tb, CHUNK_BAD_BLOCK, 1, "not all in its instructions 1..3", 1);
    /* Descriptors whose slots are not accesses of theirs, in order. */
    bad = table_add_slots(&tb, 6, 3, 0, (const uint16_t[]){sluice_slot(3, 3, 0)}, 1);
    w[1] = sluice_block_slots_hdr(bad, 3);
    expect_bad(w, 4, &tb, CHUNK_BAD_BLOCK, 1, "slot 0 (0x0033)", 1);
    bad = table_add_slots(&tb, 7, 3, 0,
                          (const uint16_t[]){sluice_slot(2, 3, 0), sluice_slot(1, 3, 0)}, 2);
    w[1] = sluice_block_slots_hdr(bad, 3);
    expect_bad(w, 6, &tb, CHUNK_BAD_BLOCK, 1, "slot 1 (0x0013)", 1);
    bad = table_add_slots(&tb, 8, 3, 0, (const uint16_t[]){sluice_slot(0, 3, 0) | 7}, 1);
    w[1] = sluice_block_slots_hdr(bad, 3);
    expect_bad(w, 4, &tb, CHUNK_BAD_BLOCK, 1, "slot 0 (0x0007)", 1);
    table_fini(&tb);
}

Test(block, slot_records_past_the_item_bound_are_decoded_in_slices)
{
    /* 512 recorded instructions with loads at 0, 200 and 511: slices stop among the slots. */
    const uint16_t slots[] = {sluice_slot(0, 3, 0), sluice_slot(200, 3, 0), sluice_slot(511, 3, 0)};
    struct table tb;
    struct sliced x = {0};
    uint64_t id;

    table_init(&tb, 2 * sluice_block_words(SLS_N));
    id = table_add_slots(&tb, 9, SLS_N, 0, slots, 3);
    x.w = calloc(SLUICE_CHUNK_BYTES / 8, 8);
    while (x.nw + 7 <= SLUICE_CHUNK_BYTES / 8) {
        x.w[x.nw++] = sluice_block_slots_hdr(id, SLS_N);
        for (unsigned i = 0, k = 0; i < SLS_N; i++) {
            evlog_put(&x.want, (struct sls_ev){SLS_EXEC, 0, pc_at(9, i)});
            while (k < 3 && sluice_slot_insn(slots[k]) == i) {
                evlog_put(&x.want, (struct sls_ev){SLS_READ, 0, pc_at(9, i)});
                x.nw += slot_rec(&x.w[x.nw], 0x100 + k, k, 0);
                k++;
            }
        }
        x.counts.insns += SLS_N;
        x.counts.loads += 3;
    }
    for (int batch = 0; batch <= 1; batch++) {
        struct sliced_result r = decode_sliced(x.w, x.nw, &tb, batch);

        cr_assert_eq(r.bad, 0, "bad %d at %llu", r.bad, (unsigned long long)r.bad_at);
        cr_assert_gt(r.slices, batch ? 0u : 8u, "mode %d: %u slices", batch, r.slices);
        expect_same(&r.got, &x.want, x.want.n, batch);
        cr_assert_eq(r.counts.insns, x.counts.insns);
        cr_assert_eq(r.counts.loads, x.counts.loads);
        cr_assert_eq(r.events, x.counts.insns + x.counts.loads);
        free(r.got.ev);
    }
    free(x.w);
    free(x.want.ev);
    table_fini(&tb);
}
