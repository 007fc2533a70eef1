/*
 * Copyright (C) ngx_omniroute authors
 *
 * libFuzzer target: the conversation-prefix walker (or_prefix) on
 * arbitrary bytes, whole and with small bounds.  The spans it reports
 * must lie inside the input and the bounds, and a messages span starts
 * with '[' or '"'.
 */


#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "or_prefix.h"


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
static void fuzz_check(const char *buf, size_t len, size_t max_scan,
    size_t max_span, int rc, const or_prefix_t *p);


static void
fuzz_check(const char *buf, size_t len, size_t max_scan, size_t max_span,
    int rc, const or_prefix_t *p)
{
    size_t  bound;

    bound = len < max_scan ? len : max_scan;

    if (p->messages.start > p->messages.end || p->messages.end > bound
        || p->messages.end - p->messages.start > max_span
        || p->system.start > p->system.end || p->system.end > bound
        || p->system.end - p->system.start > max_span)
    {
        abort();
    }

    if (rc != (p->messages.end != 0)) {
        abort();
    }

    if (rc && buf[p->messages.start] != '[' && buf[p->messages.start] != '"')
    {
        abort();
    }
}


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int              rc;
    char            *buf;
    size_t           scan, span;
    or_prefix_t      p;

    buf = malloc(size + 1);
    if (buf == NULL) {
        return 0;
    }

    memcpy(buf, data, size);
    buf[size] = '\0';

    rc = or_prefix_find(buf, size, 1 << 20, 1 << 16, &p);
    fuzz_check(buf, size, 1 << 20, 1 << 16, rc, &p);

    for (scan = 1; scan < 64; scan *= 3) {
        for (span = 1; span < 64; span *= 5) {
            rc = or_prefix_find(buf, size, scan, span, &p);
            fuzz_check(buf, size, scan, span, rc, &p);
        }
    }

    free(buf);

    return 0;
}
