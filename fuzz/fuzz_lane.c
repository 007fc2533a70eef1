/*
 * Copyright (C) ngx_omniroute authors
 *
 * libFuzzer target: the usage-limit wall's untrusted input (R-LANE-1..8).
 * The input is split at '\n' into "name: value" response headers and
 * read by or_lane_parse(); every decision on them, from each kind of
 * lane record, must be sane: a wait within its bounds, a lane or block
 * at most 8 days away, and the record it leaves behind valid (a node
 * never writes what its peers reject).  The whole input is also a usage
 * probe's and a reset claim's body.
 *
 * A failed property aborts.
 */


#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "or_lane.h"


#define FUZZ_MAX_HEADERS  16
#define FUZZ_NOW          ((or_msec_t) 1704067200000)


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
static size_t fuzz_headers(const char *s, size_t size, or_header_t *h,
    size_t max);
static void fuzz_one(const or_lane_t *l, int status,
    const or_lane_headers_t *h, const or_lane_req_t *req, or_msec_t now);


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


static void
fuzz_one(const or_lane_t *l, int status, const or_lane_headers_t *h,
    const or_lane_req_t *req, or_msec_t now)
{
    or_lane_t          rec;
    or_lane_verdict_t  v;

    or_lane_decide(l, status, h, req, now, &v);

    switch (v.action) {

    case OR_LANE_PASS:
        break;

    case OR_LANE_ENTER:
        if (v.until <= now || v.until > now + OR_LANE_SPAN_MAX_MS) {
            abort();
        }
        break;

    case OR_LANE_WAIT:
        if (v.wait_ms <= 0
            || v.wait_ms > OR_LANE_RETRY_MAX_MS * 13 / 10)
        {
            abort();
        }

        if (req->budget_left != OR_MSEC_NONE
            && v.wait_ms > req->budget_left - OR_LANE_BUDGET_MARGIN_MS)
        {
            abort();
        }
        break;

    case OR_LANE_END:
        if (v.end == OR_LANE_END_NONE || v.end >= OR_LANE_END_COUNT
            || v.block_until < 0
            || v.block_until > now + OR_LANE_SPAN_MAX_MS)
        {
            abort();
        }
        break;

    default:
        abort();
    }

    if (l == NULL) {
        memset(&rec, 0, sizeof(rec));

    } else {
        rec = *l;
    }

    (void) or_lane_apply(&rec, &v, now);

    if (or_lane_valid(&rec, sizeof(rec), now) != NULL) {
        abort();
    }
}


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int                status;
    size_t             n;
    uint32_t           salt;
    or_msec_t          next;
    or_lane_t          lane;
    const char        *s;
    or_header_t        hdrs[FUZZ_MAX_HEADERS];
    or_lane_req_t      req;
    or_lane_headers_t  h;

    s = (const char *) data;
    salt = 0;

    if (size >= 4) {
        memcpy(&salt, data, 4);
    }

    n = fuzz_headers(s, size, hdrs, FUZZ_MAX_HEADERS);
    or_lane_parse(hdrs, n, FUZZ_NOW, &h);

    if (h.slow > OR_LANE_SLOW_OTHER) {
        abort();
    }

    status = (salt & 1) ? 529 : 429;

    req.slow_sent = (salt >> 1) & 1;
    req.wait_start = (salt & 4) ? FUZZ_NOW - (or_msec_t) (salt >> 8) * 10
                                : OR_MSEC_NONE;
    req.budget_left = (salt & 8) ? (or_msec_t) (salt >> 12) * 10
                                 : OR_MSEC_NONE;
    req.rnd = salt;

    /* no record, an active lane, an ended one, a blocked one */

    fuzz_one(NULL, status, &h, &req, FUZZ_NOW);

    memset(&lane, 0, sizeof(lane));
    lane.changed_at = FUZZ_NOW - 1000;
    lane.entered_at = FUZZ_NOW - 1000;
    lane.phase = OR_LANE_PHASE_ACTIVE;
    lane.until = FUZZ_NOW + 3600 * 1000;
    fuzz_one(&lane, status, &h, &req, FUZZ_NOW);

    lane.phase = OR_LANE_PHASE_ENDED;
    lane.end = OR_LANE_END_MAX_WAIT;
    lane.until = 0;
    lane.ended_at = FUZZ_NOW - 1000;
    lane.block_until = FUZZ_NOW + 60 * 1000;
    fuzz_one(&lane, status, &h, &req, FUZZ_NOW);

    lane.block_until = 0;
    fuzz_one(&lane, status, &h, &req, FUZZ_NOW);

    /* the reset's bodies */

    (void) or_lane_usage_parse(s, size, FUZZ_NOW, &next);

    memset(&lane, 0, sizeof(lane));
    (void) or_lane_reset_record(&lane,
                                or_lane_claim_parse(s, size, FUZZ_NOW, &next),
                                next, FUZZ_NOW);

    if (or_lane_valid(&lane, sizeof(lane), FUZZ_NOW) != NULL) {
        abort();
    }

    return 0;
}
