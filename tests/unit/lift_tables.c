/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Unit tests of the jitter's lift-time tables: the Once set (jitter/once.c)
 * and the image table (jitter/image.c).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "image.h"
#include "once.h"

Test(once, first_claim_wins_then_seen)
{
    cr_assert_not(once_seen(0x401000));
    cr_assert(once_claim(0x401000));
    cr_assert_not(once_claim(0x401000));
    cr_assert(once_seen(0x401000));
    cr_assert_not(once_seen(0x401001));
    cr_assert(once_claim(0), "pc 0 is a pc like any other");
    cr_assert_not(once_claim(0));
}

Test(once, grows_and_keeps_every_pc)
{
    for (uint64_t pc = 1; pc <= 100000; pc++) {
        cr_assert(once_claim(pc * 4));
    }
    for (uint64_t pc = 1; pc <= 100000; pc++) {
        cr_assert(once_seen(pc * 4));
        cr_assert_not(once_claim(pc * 4));
    }
    cr_assert_not(once_seen(6));
}

/*
 * Claims given back (a first run cut short, jitter/first_run.c) win again,
 * and no other pc is lost or found: random claims and give-backs of pcs that
 * share hash chains, checked against a plain array after every step.
 */
Test(once, unclaim_gives_back_exactly_that_pc)
{
    enum { N = 4096 };
    static bool held[N];
    uint64_t seed = 88172645463325252ull;

    for (int step = 0; step < 200000; step++) {
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17; /* xorshift64 */
        unsigned i = (unsigned)(seed % N);
        uint64_t pc = (uint64_t)i * 4096; /* page-aligned pcs: many collide */

        if (seed >> 63) {
            cr_assert_eq(once_claim(pc), !held[i], "step %d pc 0x%llx", step,
                         (unsigned long long)pc);
            held[i] = true;
        } else {
            once_unclaim(pc);
            held[i] = false;
        }
        if (step % 1000 == 0) {
            for (unsigned j = 0; j < N; j++) {
                cr_assert_eq(once_seen((uint64_t)j * 4096), held[j], "step %d pc 0x%llx", step,
                             (unsigned long long)j * 4096);
            }
        }
    }
    once_unclaim(0x7777000); /* never claimed: nothing happens */
    for (unsigned j = 0; j < N; j++) {
        cr_assert_eq(once_seen((uint64_t)j * 4096), held[j]);
    }
}

#define RACERS 4
#define PCS 20000

static void *race(void *arg)
{
    unsigned *wins = arg;

    for (uint64_t pc = 1; pc <= PCS; pc++) {
        *wins += once_claim(0x10000 + pc);
    }
    return NULL;
}

Test(once, exactly_one_winner_per_pc_across_threads)
{
    pthread_t t[RACERS];
    unsigned wins[RACERS] = {0}, total = 0;

    for (int i = 0; i < RACERS; i++) {
        pthread_create(&t[i], NULL, race, &wins[i]);
    }
    for (int i = 0; i < RACERS; i++) {
        pthread_join(t[i], NULL);
        total += wins[i];
    }
    cr_assert_eq(total, PCS);
}

/* An open file to map "from": its inode names the image. */
static int open_file(const char *path)
{
    int fd = open(path, O_RDONLY);

    cr_assert_geq(fd, 0, "open %s", path);
    return fd;
}

Test(image, main_executable_is_id_0_others_count_from_1)
{
    struct sluice_image img;
    const char *path = NULL;
    char real[4096];
    int sh = open_file("/bin/sh"), ls = open_file("/bin/ls");

    cr_assert_eq(image_init("/bin/ls"), 0);
    image_mmap(0x10000, 0x3000, sh, 0);      /* first seen: id 1 */
    image_mmap(0x20000, 0x2000, ls, 0);      /* the main executable */
    image_mmap(0x23000, 0x1000, ls, 0x2000); /* a segment after a gap, as ELF data lies */
    cr_assert_eq(image_of(0x23010, &img, &path), 0);
    cr_assert_eq(img.id, 0);
    cr_assert_eq(img.flags, SLUICE_IMAGE_MAIN);
    cr_assert_eq(img.base, 0x20000, "the lowest mapping of the file");
    cr_assert_eq(img.offset, 0x3010);
    cr_assert_eq(image_of(0x12345, &img, &path), 0);
    cr_assert_eq(img.id, 1);
    cr_assert_eq(img.flags, 0);
    cr_assert_eq(img.base, 0x10000);
    cr_assert_not_null(realpath("/bin/sh", real));
    cr_assert_str_eq(path, real, "the path behind the descriptor");
    cr_assert_eq(image_of(0x13000, &img, NULL), -ENOENT, "one past the end");
    cr_assert_eq(image_of(0xfff, &img, NULL), -ENOENT);
    /* A page of the file mapped again 1 GiB away, the first load still there: a load of its
     * own, based where that mapping puts offset 0; the first load's base stays. */
    image_mmap(0x40022000, 0x1000, ls, 0x2000);
    cr_assert_eq(image_of(0x40022010, &img, NULL), 0);
    cr_assert_eq(img.id, 0);
    cr_assert_eq(img.base, 0x40020000, "a second load's own base");
    cr_assert_eq(img.offset, 0x2010);
    cr_assert_eq(image_of(0x23010, &img, NULL), 0);
    cr_assert_eq(img.base, 0x20000, "the first load's base, unchanged");
    /* ... and 1 MiB below the first load: its own base, and the first load's stays. */
    image_mmap(0x0f000, 0x1000, ls, 0x2000);
    cr_assert_eq(image_of(0x0f010, &img, NULL), 0);
    cr_assert_eq(img.base, 0x0d000, "a page mapped below the load: a load of its own");
    cr_assert_eq(image_of(0x23010, &img, NULL), 0);
    cr_assert_eq(img.base, 0x20000, "the first load's base, unchanged by a mapping below");
    close(sh);
    close(ls);
}

Test(image, unmap_and_anonymous_overlays_punch_holes)
{
    struct sluice_image img;
    int sh = open_file("/bin/sh");

    image_mmap(0x100000, 0x10000, sh, 0);
    image_munmap(0x104000, 0x1000);      /* a hole in the middle */
    image_mmap(0x108000, 0x1000, -1, 0); /* anonymous over part (bss) */
    cr_assert_eq(image_of(0x103fff, &img, NULL), 0);
    cr_assert_eq(image_of(0x104000, &img, NULL), -ENOENT);
    cr_assert_eq(image_of(0x105000, &img, NULL), 0);
    cr_assert_eq(img.base, 0x100000, "both halves are the same image");
    cr_assert_eq(image_of(0x108800, &img, NULL), -ENOENT);
    cr_assert_eq(image_of(0x109000, &img, NULL), 0);
    image_munmap(0x0, 0x200000);
    cr_assert_eq(image_of(0x100000, &img, NULL), -ENOENT);
    cr_assert_eq(image_of(0x10f000, &img, NULL), -ENOENT);
    /* Mapped again later: the same file keeps its id. */
    image_mmap(0x300000, 0x1000, sh, 0);
    cr_assert_eq(image_of(0x300000, &img, NULL), 0);
    close(sh);
}
