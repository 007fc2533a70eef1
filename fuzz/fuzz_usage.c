/*
 * Copyright (C) ngx_omniroute authors
 *
 * libFuzzer target: the token usage scanner (or_usage) on arbitrary
 * bytes.  The body is scanned whole, one byte at a time, and in two
 * pieces split where the first byte says; all three must agree, every
 * count must be within OR_USAGE_VALUE_MAX and only the four kinds may be
 * seen.  With a byte bound the scan must never look further.
 */


#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "or_usage.h"


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
static void fuzz_check(const or_usage_t *u);
static int fuzz_same(const or_usage_t *a, const or_usage_t *b);


static void
fuzz_check(const or_usage_t *u)
{
    int  k;

    if (u->seen & ~((1u << OR_USAGE_KINDS) - 1)) {
        abort();
    }

    for (k = 0; k < OR_USAGE_KINDS; k++) {
        if (u->tokens[k] > OR_USAGE_VALUE_MAX) {
            abort();
        }

        if (!(u->seen & (1u << k)) && u->tokens[k] != 0) {
            abort();
        }
    }

    if (u->depth < 0 || u->depth > OR_USAGE_DEPTH_MAX) {
        abort();
    }
}


static int
fuzz_same(const or_usage_t *a, const or_usage_t *b)
{
    return a->found == b->found && a->seen == b->seen
           && a->state == b->state
           && memcmp(a->tokens, b->tokens, sizeof(a->tokens)) == 0;
}


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t       i, cut, max;
    or_usage_t   whole, bytes, split, bounded, event;
    const char  *s;

    if (size == 0) {
        return 0;
    }

    cut = data[0] % size;
    max = data[0] + 1;
    s = (const char *) data + 1;
    size--;

    if (cut > size) {
        cut = size;
    }

    or_usage_init(&whole, 0);
    or_usage_feed(&whole, s, size);
    fuzz_check(&whole);

    or_usage_init(&bytes, 0);

    for (i = 0; i < size; i++) {
        or_usage_feed(&bytes, s + i, 1);
    }

    fuzz_check(&bytes);

    or_usage_init(&split, 0);
    or_usage_feed(&split, s, cut);
    or_usage_feed(&split, s + cut, size - cut);
    fuzz_check(&split);

    if (!fuzz_same(&whole, &bytes) || !fuzz_same(&whole, &split)) {
        abort();
    }

    or_usage_init(&bounded, max);
    or_usage_feed(&bounded, s, cut);
    or_usage_feed(&bounded, s + cut, size - cut);
    fuzz_check(&bounded);

    if (bounded.fed > max) {
        abort();
    }

    /* an event's usage: found only with a whole object read */

    if (or_usage_event(&event, s, size) != or_usage_found(&event)) {
        abort();
    }

    fuzz_check(&event);

    return 0;
}
