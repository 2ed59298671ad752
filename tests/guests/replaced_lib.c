/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The libraries of the `replaced` guest: built once as is (FIRST) and once
 * with -DSECOND, whose other functions come first, so that FIRST's
 * replaced_sum lies where SECOND has zz_* functions. Built with
 * -nostartfiles: no constructor runs any of it at dlopen().
 */
#ifdef SECOND
/* Local (no PLT between them) and kept, so they fill .text where FIRST has replaced_sum. */
#define ZZ static __attribute__((noinline, used))

ZZ int zz_scale(int x)
{
    return x * 7 + 1;
}

ZZ int zz_twice(int x)
{
    return zz_scale(x) - zz_scale(x - 1) + x * x * x;
}

ZZ int zz_thrice(int x)
{
    return zz_twice(x) + zz_twice(x + 3) - zz_scale(x * 5);
}
#endif

int replaced_sum(int n)
{
    int s = 0;

    for (int i = 0; i < n; i++) {
        s += i * i;
    }
    return s;
}
