/*
 * Copyright (C) ngx_omniroute authors
 *
 * libFuzzer target: the token usage scanner (or_usage) on arbitrary
 * bytes.  The body is scanned whole, one byte at a time, and in two
 * pieces split where the first byte says; all three must agree, every
 * count must be within OR_USAGE_VALUE_MAX and only the four kinds may be
 * seen.  With a byte bound the scan must never look further.  Fed whole,
 * the first piece is read by the reader of members (or_usage_members());
 * one byte at a time, by the lexer alone: the comparison is the new
 * reading's against the old.  The same for an event's usage.
 */


#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "or_usage.h"


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
static void fuzz_check(const or_usage_t *u);
static int fuzz_same(const or_usage_t *a, const or_usage_t *b);
static int fuzz_event_ref(or_usage_t *u, const char *data, size_t len);


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


/*
 * or_usage_event() as the lexer alone reads it: "{", then from the last
 * quoted "usage" or "usageMetadata" on, a byte at a time (a piece that is
 * not the first is never read by the first piece's reader)
 */

static int
fuzz_event_ref(or_usage_t *u, const char *data, size_t len)
{
    size_t       i, n;
    const char  *key;

    or_usage_init(u, 0);
    key = NULL;

    for (i = 0; i < len; i++) {
        n = len - i;

        if ((n > 7 && memcmp(data + i, "\"usage\"", 7) == 0)
            || (n > 15 && memcmp(data + i, "\"usageMetadata\"", 15) == 0))
        {
            key = data + i;
        }
    }

    if (key == NULL) {
        return 0;
    }

    or_usage_feed(u, "{", 1);

    for ( /* void */ ; key < data + len; key++) {
        or_usage_feed(u, key, 1);
    }

    return or_usage_found(u);
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

    /* the same as the lexer alone */

    if (fuzz_event_ref(&bytes, s, size) != or_usage_found(&event)
        || bytes.seen != event.seen
        || memcmp(bytes.tokens, event.tokens, sizeof(event.tokens)) != 0)
    {
        abort();
    }

    return 0;
}
