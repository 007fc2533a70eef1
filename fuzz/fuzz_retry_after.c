/*
 * Copyright (C) ngx_omniroute authors
 *
 * libFuzzer target: every retry-hint parser (R-CD-3) on arbitrary bytes.
 * The input is used whole as a header value and as a body, and split at
 * '\n' into "name: value" header lines.  Every result must be
 * OR_MSEC_NONE or within [0, OR_RETRY_MAX_MS].
 */


#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "or_retry_after.h"


#define FUZZ_MAX_HEADERS  16


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
static void fuzz_check(or_msec_t v);
static size_t fuzz_headers(const char *s, size_t size, or_header_t *h,
    size_t max);


static void
fuzz_check(or_msec_t v)
{
    if (v != OR_MSEC_NONE && (v < 0 || v > OR_RETRY_MAX_MS)) {
        abort();
    }
}


static size_t
fuzz_headers(const char *s, size_t size, or_header_t *h, size_t max)
{
    size_t       n;
    const char  *p, *end, *eol, *colon;

    n = 0;
    p = s;
    end = s + size;

    while (p < end && n < max) {
        eol = memchr(p, '\n', end - p);
        if (eol == NULL) {
            eol = end;
        }

        colon = memchr(p, ':', eol - p);

        if (colon != NULL) {
            h[n].name = p;
            h[n].name_len = colon - p;
            h[n].value = colon + 1;
            h[n].value_len = eol - colon - 1;
            n++;
        }

        p = eol + (eol < end ? 1 : 0);
    }

    return n;
}


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t        n;
    or_msec_t     now, at;
    const char   *s;
    or_header_t   h[FUZZ_MAX_HEADERS];

    s = (const char *) data;

    now = 1704067200000;

    if (size >= 8) {
        memcpy(&now, data, 8);
    }

    fuzz_check(or_retry_after(s, size, now));
    fuzz_check(or_retry_after(s, size, 1704067200000));
    fuzz_check(or_retry_after_ms(s, size));
    fuzz_check(or_retry_duration(s, size));
    fuzz_check(or_retry_reset(s, size, now));
    fuzz_check(or_retry_reset(s, size, 1704067200000));
    fuzz_check(or_retry_body_text(s, size, now));
    fuzz_check(or_retry_retry_delay(s, size));
    fuzz_check(or_retry_body(s, size, 1704067200000));

    at = or_retry_parse_http_date(s, size);

    if (at != OR_MSEC_NONE && at < 0) {
        abort();
    }

    at = or_retry_parse_rfc3339(s, size);

    if (at != OR_MSEC_NONE && at < 0) {
        abort();
    }

    n = fuzz_headers(s, size, h, FUZZ_MAX_HEADERS);

    fuzz_check(or_retry_headers(h, n, now));
    fuzz_check(or_retry_best(h, n, s, size, 1704067200000));

    (void) or_header_find(h, n, "retry-after", 11);
    (void) or_memcasemem(s, size, "try again in", 12);

    if (size > 4) {
        (void) or_memcasemem(s + 4, size - 4, s, 4);
    }

    return 0;
}
