/*
 * Copyright (C) ngx_omniroute authors
 *
 * Upstream retry hints (R-CD-3, R-CD-5): how long the upstream asks us to
 * wait, read from response headers and from the error body.
 *
 * Every parser is total: any byte sequence is accepted, nothing is
 * allocated, nothing crashes or overflows.  A parser returns a relative
 * delay in milliseconds, or OR_MSEC_NONE when the input carries no usable
 * hint.  Delays are clamped to [0, OR_RETRY_MAX_MS] (30 days); a date in
 * the past yields 0 ("retry now").  Fractions of a millisecond round up,
 * so a hint never tells us to come back early.
 *
 * Strings are (pointer, length) pairs and need not be NUL-terminated.
 */

#ifndef _OR_RETRY_AFTER_H_INCLUDED_
#define _OR_RETRY_AFTER_H_INCLUDED_


#include "or_types.h"


/* the longest delay any hint may ask for: 30 days */
#define OR_RETRY_MAX_MS  ((or_msec_t) 30 * 24 * 60 * 60 * 1000)


/* one response header; names compare ASCII case-insensitively */
typedef struct {
    const char   *name;
    size_t        name_len;
    const char   *value;
    size_t        value_len;
} or_header_t;


/*
 * ASCII case-insensitive search of needle in hay; bytes >= 0x80 compare
 * exactly (so UTF-8 markers such as "额度不足" work).  Linear time
 * (rolling hash, verified).  Returns the first match or NULL; an empty
 * needle matches at hay.
 */
const char *or_memcasemem(const char *hay, size_t hlen, const char *needle,
    size_t nlen);

/* the first header named name (case-insensitive), or NULL */
const or_header_t *or_header_find(const or_header_t *headers, size_t n,
    const char *name, size_t len);

/* absolute dates, as milliseconds since the epoch, or OR_MSEC_NONE */
or_msec_t or_retry_parse_http_date(const char *v, size_t len);
or_msec_t or_retry_parse_rfc3339(const char *v, size_t len);

/*
 * Durations: Go-style "1h2m3.5s", "1m30s", "6ms", "250us", "0.5s", "2d";
 * a bare number ("20", "1.5") is seconds.
 */
or_msec_t or_retry_duration(const char *v, size_t len);

/* Retry-After: delta seconds, or an HTTP-date (IMF-fixdate, RFC 850,
 * asctime) relative to now_ms */
or_msec_t or_retry_after(const char *v, size_t len, or_msec_t now_ms);

/* retry-after-ms: milliseconds */
or_msec_t or_retry_after_ms(const char *v, size_t len);

/*
 * x-ratelimit-reset-*, ratelimit-reset and anthropic-ratelimit-*-reset
 * values: a duration ("6m0s", "1.5", "6ms"), epoch seconds (>= 1e9),
 * epoch milliseconds (>= 1e12), an RFC 3339 timestamp or an HTTP-date.
 */
or_msec_t or_retry_reset(const char *v, size_t len, or_msec_t now_ms);

/*
 * Body text: "try again in 20s", "retry after 2 minutes", "resets in
 * 3 days", "Please try again in 1.5s", "try again in 6ms", "retry in
 * 1m30s", "resets at 2025-01-01T00:00:00Z"...  The largest delay found.
 */
or_msec_t or_retry_body_text(const char *body, size_t len, or_msec_t now_ms);

/* Google RetryInfo: "retryDelay": "86399s" (also inside escaped JSON) */
or_msec_t or_retry_retry_delay(const char *body, size_t len);

/* max(or_retry_retry_delay, or_retry_body_text) */
or_msec_t or_retry_body(const char *body, size_t len, or_msec_t now_ms);

/*
 * Header hint.  retry-after-ms, else Retry-After, is authoritative.  Reset
 * headers count when their paired "remaining" header says 0 (the limit
 * that is actually exhausted); when no Retry-After is present and no
 * remaining header says 0, the largest reset counts.  Result: the largest
 * of those.
 */
or_msec_t or_retry_headers(const or_header_t *headers, size_t n,
    or_msec_t now_ms);

/*
 * The upstream hint of a response: the largest of or_retry_headers() and
 * or_retry_body().  Largest, because a hint is the upstream telling us the
 * earliest moment a retry can succeed: a short generic Retry-After must
 * not cut short a real reset announced in the body ("resets in 3 days").
 */
or_msec_t or_retry_best(const or_header_t *headers, size_t n,
    const char *body, size_t len, or_msec_t now_ms);


/*
 * The one rounding rule of every Retry-After the gateway sends (its own
 * answers and a provider's error it passes on, issue 25): ms rounded up
 * to whole seconds, at least 1, at most OR_RETRY_AFTER_MAX_S (the longest
 * cooldown a rule may set, 30 days); ms of 0 or less (or OR_MSEC_NONE)
 * is 1.
 */
#define OR_RETRY_AFTER_MAX_S  ((int64_t) 30 * 24 * 3600)

int64_t or_retry_after_seconds(or_msec_t ms);

/*
 * How long the client of a provider's error the gateway passes on is
 * told to wait (ms, or OR_MSEC_NONE: no Retry-After).  status is the
 * status it gets (restated or not), restated_s the restatement's
 * Retry-After (-1: none), hint_ms the upstream hint (OR_MSEC_NONE: none),
 * cooled_ms what is left of the cooldown just recorded for the
 * connection (OR_MSEC_NONE or 0: none).  A 429 or 503 gets the longest
 * of the three, so that the value agrees with the state (the gateway does
 * not try the connection again before); another status the restated
 * value, else the hint.
 */
or_msec_t or_retry_after_answer(int status, int restated_s,
    or_msec_t hint_ms, or_msec_t cooled_ms);


#endif /* _OR_RETRY_AFTER_H_INCLUDED_ */
