/*
 * Copyright (C) ngx_omniroute authors
 *
 * Plain types shared by the resilience engine (src/core).  No nginx
 * headers here or anywhere under src/core: the engine is unit-tested and
 * fuzzed on its own.  Time is always passed in explicitly, in milliseconds.
 */

#ifndef _OR_TYPES_H_INCLUDED_
#define _OR_TYPES_H_INCLUDED_


#include <stddef.h>
#include <stdint.h>


typedef int64_t  or_msec_t;     /* absolute or relative milliseconds */


#define OR_MSEC_NONE  ((or_msec_t) -1)   /* "no value" for a time field */

#ifndef OR_UNSET
#define OR_UNSET      (-1)               /* "not configured" for ints */
#endif


/*
 * States received from other nodes are untrusted input: or_*_valid()
 * (or_breaker.h, or_cooldown.h, or_lockout.h, or_pin.h) accept a state
 * only when every field is one this build can produce:
 *   - times are never negative; an event time (a failure, a mark, a
 *     pinning) is at most OR_VALID_SKEW_MS ahead of our clock (a peer's
 *     clock may run ahead), an expiry at most its longest duration beyond
 *     that;
 *   - counters and epochs are at most OR_VALID_COUNT_MAX (one a
 *     millisecond for twelve days);
 *   - enums are in range, lengths within their arrays, reserved bytes 0.
 * The set of valid states is closed under the merges and under every
 * update function, so a node never produces a state its peers reject.
 */
#define OR_VALID_SKEW_MS    ((or_msec_t) 86400 * 1000)      /* 1 day */
#define OR_VALID_COUNT_MAX  ((uint32_t) 1 << 30)


/*
 * The next value of a counter or an epoch: saturated at
 * OR_VALID_COUNT_MAX, so that no update makes a state invalid.
 */
static inline uint32_t
or_count_next(uint32_t n)
{
    return n < OR_VALID_COUNT_MAX ? n + 1 : n;
}


/* a + b for times and durations, saturated instead of overflowing */
static inline or_msec_t
or_msec_add(or_msec_t a, or_msec_t b)
{
    if (b > 0 && a > INT64_MAX - b) {
        return INT64_MAX;
    }

    if (b < 0 && a < INT64_MIN - b) {
        return INT64_MIN;
    }

    return a + b;
}


/* a provider's kind selects its breaker and cooldown profile (R-CB-2) */
typedef enum {
    OR_KIND_OAUTH = 0,
    OR_KIND_APIKEY,
    OR_KIND_LOCAL,
    OR_KIND_COUNT
} or_kind_e;


/* why an attempt failed (R-CLASS-2) */
typedef enum {
    OR_REASON_NONE = 0,                 /* success */
    OR_REASON_RATE_LIMIT_EXCEEDED,
    OR_REASON_QUOTA_EXHAUSTED,
    OR_REASON_CONCURRENCY_LIMITED,
    OR_REASON_AUTH_ERROR,
    OR_REASON_CREDITS_EXHAUSTED,
    OR_REASON_BANNED,
    OR_REASON_EXPIRED,
    OR_REASON_REQUEST_REJECTED,
    OR_REASON_NOT_FOUND,
    OR_REASON_CONTEXT_OVERFLOW,
    OR_REASON_BAD_REQUEST,
    OR_REASON_SERVER_ERROR,
    OR_REASON_TIMEOUT,
    OR_REASON_TRANSPORT,
    OR_REASON_STREAM_STALL,
    OR_REASON_TOOL_LIMIT,               /* too many tools for the target */
    OR_REASON_CAPABILITY,               /* the model lacks a feature the
                                           request uses (issue 25) */
    OR_REASON_COUNT
} or_reason_e;


/* what a failure locks (R-ML-2, R-CLASS-3) */
typedef enum {
    OR_SCOPE_NONE = 0,
    OR_SCOPE_CONNECTION,
    OR_SCOPE_MODEL,             /* exact provider+connection+model tuple */
    OR_SCOPE_BASE_MODEL,
    OR_SCOPE_QUOTA_FAMILY,
    OR_SCOPE_PROVIDER,
    OR_SCOPE_COUNT
} or_scope_e;


/* transport-level outcome of an attempt, before any HTTP status exists */
typedef enum {
    OR_TRANSPORT_OK = 0,
    OR_TRANSPORT_CONNECT_ERROR,
    OR_TRANSPORT_RESET,
    OR_TRANSPORT_TIMEOUT
} or_transport_e;


/* the classifier's verdict on one attempt (R-CLASS-2) */
typedef struct {
    or_reason_e   reason;
    or_scope_e    scope;
    or_msec_t     cooldown_ms;      /* explicit cooldown, or OR_MSEC_NONE:
                                       let the cooldown chain decide */
    or_msec_t     hint_ms;          /* upstream retry hint, or OR_MSEC_NONE */
    int           fall_over;        /* try the next candidate */
    int           counts_for_breaker;
    int           restated_status;  /* status the client sees; 0: unchanged */
    int           retry_after_s;    /* Retry-After to send, or -1 */
    const char   *rule_id;          /* restatement/provider rule that
                                       matched, or NULL */
    const char   *restate_rule_id;  /* the restatement rule, or NULL */
    int           lockout_capped;   /* a built-in rule's cooldown: a model
                                       lockout caps it at its
                                       max_cooldown */
} or_verdict_t;


const char *or_reason_name(or_reason_e reason);
const char *or_kind_name(or_kind_e kind);
const char *or_scope_name(or_scope_e scope);


#endif /* _OR_TYPES_H_INCLUDED_ */
