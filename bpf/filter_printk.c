/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * filter_printk.c — bpf_trace_printk's formatter and rate limiter
 * (filter_printk.h).
 *
 * The format comes from an untrusted program: it is parsed here, conversion
 * by conversion, against the kernel's whitelist, and each conversion is
 * handed to snprintf() through a format spec this file builds itself, never
 * the program's text. %s arguments are copied out of program memory one
 * checked byte at a time, bounded. Runs on the thread running the filter,
 * under the filter's lock; never blocks, never allocates.
 */
#include "filter_printk.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* ---- rate limit ------------------------------------------------------------- */

bool printk_admit(struct printk_limit *l, uint64_t now_ns)
{
    /* Full ring: the oldest of the last PRINTK_RATE deliveries must have left the window. */
    if (l->n == PRINTK_RATE && now_ns - l->stamps[l->next] < PRINTK_WINDOW_NS) {
        /* filter_prints_dropped() reads it from any thread, without the filter's lock. */
        __atomic_fetch_add(&l->dropped, 1, __ATOMIC_RELAXED);
        return false;
    }
    l->stamps[l->next] = now_ns;
    l->next = (l->next + 1) % PRINTK_RATE;
    if (l->n < PRINTK_RATE) {
        l->n++;
    }
    return true;
}

/* ---- output buffer ------------------------------------------------------------ */

struct out {
    char *buf;
    size_t size; /* > 0 */
    size_t len;  /* < size; buf[len] == 0 */
};

static void put(struct out *o, const char *s, size_t n)
{
    size_t room = o->size - 1 - o->len;

    if (n > room) {
        n = room;
    }
    memcpy(o->buf + o->len, s, n);
    o->len += n;
    o->buf[o->len] = 0;
}

/* ---- one conversion --------------------------------------------------------------- */

/* A parsed "%[flags][width][l|ll]conv". */
struct conv {
    char spec[16]; /* the host format spec built so far: "%", flags, width */
    size_t spec_len;
    int longs; /* 0, 1 (l) or 2 (ll) */
    char type; /* d i u x X c s p */
};

static bool is_ascii_space(char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r');
}

static bool is_alnum(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static void spec_add(struct conv *c, char ch)
{
    c->spec[c->spec_len++] = ch; /* bounded: 1 + 4 flags + 2 width digits + 2 l + 1 < 16 */
    c->spec[c->spec_len] = 0;
}

/* Parse the conversion after a '%' at *fmt; advances *fmt past it. -EINVAL if not allowed. */
static int parse_conv(const char **fmt, struct conv *c)
{
    const char *p = *fmt;
    unsigned width = 0;

    memset(c, 0, sizeof(*c));
    spec_add(c, '%');
    for (; *p == '0' || *p == '+' || *p == '-' || *p == ' '; p++) {
        if (!memchr(c->spec + 1, *p, c->spec_len - 1)) {
            spec_add(c, *p);
        }
    }
    for (; *p >= '0' && *p <= '9'; p++) {
        width = width * 10 + (unsigned)(*p - '0');
        if (width > PRINTK_WIDTH_MAX) {
            return -EINVAL;
        }
    }
    if (width) {
        c->spec_len +=
            (size_t)snprintf(c->spec + c->spec_len, sizeof(c->spec) - c->spec_len, "%u", width);
    }
    for (; *p == 'l' && c->longs < 2; p++) {
        c->longs++;
    }
    c->type = *p;
    if (!c->type || !strchr("diuxXcsp", c->type) || (c->longs && strchr("csp", c->type))) {
        return -EINVAL;
    }
    /* %p takes no flags or width, and %pK, %px, ... (kernel extensions) are refused. */
    if (c->type == 'p' && (c->spec_len > 1 || is_alnum(p[1]))) {
        return -EINVAL;
    }
    *fmt = p + 1;
    return 0;
}

/* Copy the NUL-terminated string at program address @addr into buf (truncated). */
static int read_string(struct vm_run *run, uint64_t addr, char *buf, size_t size)
{
    size_t i;

    for (i = 0; i + 1 < size; i++) {
        const char *p = vm_run_check(run, addr + i, 1, false);

        if (!p) {
            vm_run_fault(
                run, "bpf_trace_printk: %%s argument 0x%" PRIx64 " is not a readable string", addr);
            return -EFAULT;
        }
        if (!*p) {
            break;
        }
        buf[i] = *p;
    }
    buf[i] = 0;
    return 0;
}

/* Format one conversion of @arg into @o. */
static int emit_conv(struct vm_run *run, struct out *o, struct conv *c, uint64_t arg)
{
    char str[PRINTK_STR_MAX];
    char tmp[PRINTK_STR_MAX + PRINTK_WIDTH_MAX];
    int n;
    bool sign = c->type == 'd' || c->type == 'i';

    if (c->type == 'p') {
        n = snprintf(tmp, sizeof(tmp), "0x%" PRIx64, arg);
    } else if (c->type == 's') {
        if (read_string(run, arg, str, sizeof(str)) < 0) {
            return -EFAULT;
        }
        spec_add(c, 's');
        n = snprintf(tmp, sizeof(tmp), c->spec, str);
    } else if (c->type == 'c') {
        spec_add(c, 'c');
        n = snprintf(tmp, sizeof(tmp), c->spec, (int)(unsigned char)arg);
    } else if (c->longs) {
        spec_add(c, 'l');
        spec_add(c, 'l');
        spec_add(c, c->type);
        n = sign ? snprintf(tmp, sizeof(tmp), c->spec, (long long)arg)
                 : snprintf(tmp, sizeof(tmp), c->spec, (unsigned long long)arg);
    } else {
        spec_add(c, c->type);
        n = sign ? snprintf(tmp, sizeof(tmp), c->spec, (int)(int32_t)(uint32_t)arg)
                 : snprintf(tmp, sizeof(tmp), c->spec, (unsigned)(uint32_t)arg);
    }
    if (n < 0) {
        return -EINVAL;
    }
    put(o, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
    return 0;
}

/* ---- the message ------------------------------------------------------------------ */

int printk_format(struct vm_run *run, const char *fmt, const uint64_t args[PRINTK_MAX_ARGS],
                  char *out, size_t out_size)
{
    struct out o = {out, out_size, 0};
    unsigned used = 0;
    struct conv c;
    int rc;

    out[0] = 0;
    while (*fmt) {
        char ch = *fmt++;

        if ((ch < 0x20 || ch > 0x7e) && !is_ascii_space(ch)) {
            return -EINVAL;
        }
        if (ch != '%') {
            put(&o, &ch, 1);
            continue;
        }
        if (*fmt == '%') {
            put(&o, fmt++, 1);
            continue;
        }
        if (used == PRINTK_MAX_ARGS || parse_conv(&fmt, &c) < 0) {
            return -EINVAL;
        }
        if ((rc = emit_conv(run, &o, &c, args[used++])) < 0) {
            return rc;
        }
    }
    return (int)o.len;
}
