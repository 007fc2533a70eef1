/*
 * Copyright (C) ngx_omniroute authors
 *
 * The Claude usage-limit wall (R-LANE-1..8, docs/resilience.md): the
 * low-priority lane and the session-limit reset of a connection, plain C.
 *
 * A 429 whose headers say "anthropic-ratelimit-unified-status: rejected"
 * and "anthropic-ratelimit-unified-slow-offer: treatment" is the 5-hour
 * wall of a subscription that may take the slow lane: the same connection
 * is retried at once with "anthropic-usage-limit: slow", and every request
 * to it carries that header until the announced
 * "anthropic-ratelimit-unified-reset" plus a grace of 60 s.  In the lane a
 * "slot_busy" 429 or a 529 waits the server's slow-retry-after (jittered),
 * bounded by its slow-max-wait and the request's own budget; past that
 * deadline the lane ends ("max_wait") and is not accepted again for 10
 * minutes.  The other end states (weekly_limit, budget_exhausted, off,
 * ineligible, paid overage in use) end it and go down the normal
 * cooldown path; budget_exhausted is remembered until its reset (at most
 * 8 days).
 *
 * The state of a connection (or_lane_t) is a fixed-size POD kept in the
 * zone and mirrored through Redis; it also memoises the session-limit
 * reset (when the next probe may be made).  Every parser is total: any
 * byte sequence is accepted, nothing is allocated.
 *
 * Merge rule (R-CLUSTER-2), or_lane_merge(): the later change (changed_at)
 * wins the whole record, equal times the larger bytes: a total order, so
 * the merge is commutative, associative and idempotent.
 *
 * Validation (or_lane_valid()): the size, the phase, end and reset result
 * in range, zero padding, every time in [0, now + OR_VALID_SKEW_MS], an
 * active lane's end, a block or a memoised next reset at most
 * OR_LANE_SPAN_MAX_MS after the last change.
 */

#ifndef _OR_LANE_H_INCLUDED_
#define _OR_LANE_H_INCLUDED_


#include "or_types.h"
#include "or_retry_after.h"


#define OR_LANE_MIN_MS(m)           ((or_msec_t) (m) * 60 * 1000)

#define OR_LANE_GRACE_MS            ((or_msec_t) 60 * 1000)
#define OR_LANE_WINDOW_MS           OR_LANE_MIN_MS(5 * 60)  /* no reset
                                                               announced */
#define OR_LANE_RETRY_DEFAULT_MS    ((or_msec_t) 20 * 1000)
#define OR_LANE_RETRY_MIN_MS        ((or_msec_t) 5 * 1000)
#define OR_LANE_RETRY_MAX_MS        ((or_msec_t) 600 * 1000)
#define OR_LANE_JITTER_PCT          30
#define OR_LANE_MAX_WAIT_DEFAULT_MS OR_LANE_MIN_MS(20)
#define OR_LANE_MAX_WAIT_MIN_MS     OR_LANE_MIN_MS(1)
#define OR_LANE_MAX_WAIT_MAX_MS     OR_LANE_MIN_MS(6 * 60)
#define OR_LANE_BUDGET_MARGIN_MS    ((or_msec_t) 5 * 1000)
#define OR_LANE_COOL_OFF_MS         OR_LANE_MIN_MS(10)
#define OR_LANE_SPAN_MAX_MS         ((or_msec_t) 8 * 86400 * 1000)
#define OR_LANE_RESET_NEXT_MS       ((or_msec_t) 7 * 86400 * 1000)
#define OR_LANE_RESET_BACKOFF_MS    OR_LANE_MIN_MS(15)

#define OR_LANE_HEADER              "anthropic-usage-limit"
#define OR_LANE_HEADER_VALUE        "slow"


typedef enum {
    OR_LANE_PHASE_NONE = 0,     /* no lane (a reset memo only) */
    OR_LANE_PHASE_ACTIVE,       /* requests carry the slow header */
    OR_LANE_PHASE_ENDED,        /* ended; maybe blocked until block_until */
    OR_LANE_PHASE_COUNT
} or_lane_phase_e;


typedef enum {
    OR_LANE_END_NONE = 0,
    OR_LANE_END_MAX_WAIT,           /* slot_busy past the deadline */
    OR_LANE_END_WEEKLY_LIMIT,
    OR_LANE_END_BUDGET_EXHAUSTED,
    OR_LANE_END_OFF,
    OR_LANE_END_INELIGIBLE,
    OR_LANE_END_EXTRA_USAGE,        /* overage-in-use: true */
    OR_LANE_END_COUNT
} or_lane_end_e;


/* anthropic-ratelimit-unified-slow-status */
typedef enum {
    OR_LANE_SLOW_ABSENT = 0,
    OR_LANE_SLOW_ACTIVE,
    OR_LANE_SLOW_NOT_NEEDED,
    OR_LANE_SLOW_SLOT_BUSY,
    OR_LANE_SLOW_WEEKLY_LIMIT,
    OR_LANE_SLOW_BUDGET_EXHAUSTED,
    OR_LANE_SLOW_OFF,
    OR_LANE_SLOW_INELIGIBLE,
    OR_LANE_SLOW_OTHER              /* a value we do not know */
} or_lane_slow_e;


/* what the session-limit reset last found (R-LANE-7) */
typedef enum {
    OR_RESET_NONE = 0,
    OR_RESET_RESET,                 /* claimed: the limit was reset */
    OR_RESET_NOT_LIMITED,
    OR_RESET_ALREADY_USED,
    OR_RESET_NOT_OFFERED,
    OR_RESET_UNAVAILABLE,           /* the probe offered no reset */
    OR_RESET_FAILED,                /* probe or claim failed: backoff */
    OR_RESET_COUNT
} or_reset_result_e;


typedef struct {
    or_msec_t    changed_at;        /* the last change: orders the merge */
    or_msec_t    entered_at;        /* the lane's last entry; 0: never */
    or_msec_t    until;             /* active: the slow header until then */
    or_msec_t    ended_at;          /* ended: when */
    or_msec_t    block_until;       /* no new entry before; 0: none */
    or_msec_t    reset_at;          /* the last reset claim that worked */
    or_msec_t    reset_next_at;     /* no reset probe before; 0: any time */
    uint32_t     entries;           /* lane entries, ever */
    uint32_t     waits;             /* slot_busy waits, ever */
    uint8_t      phase;             /* or_lane_phase_e */
    uint8_t      end;               /* or_lane_end_e: why it ended */
    uint8_t      reset_result;      /* or_reset_result_e */
    uint8_t      reserved[5];
} or_lane_t;


/* the wall's response headers, as or_lane_parse() read them */
typedef struct {
    int              rejected;      /* unified-status: rejected */
    int              offer;         /* unified-slow-offer: treatment */
    int              overage;       /* unified-overage-in-use: true */
    or_lane_slow_e   slow;          /* unified-slow-status */
    or_msec_t        reset;         /* unified-reset, absolute ms; NONE */
    or_msec_t        budget_reset;  /* unified-slow-budget-reset; NONE */
    or_msec_t        retry_after;   /* unified-slow-retry-after ms; NONE */
    or_msec_t        max_wait;      /* unified-slow-max-wait ms; NONE */
} or_lane_headers_t;


typedef enum {
    OR_LANE_PASS = 0,       /* not a lane matter: the normal path */
    OR_LANE_ENTER,          /* accept the offer: the same connection now,
                               with the slow header */
    OR_LANE_WAIT,           /* slot busy: wait wait_ms, then the same
                               connection again */
    OR_LANE_END             /* the lane ends (end); then the normal path */
} or_lane_action_e;


typedef struct {
    or_lane_action_e  action;
    or_lane_end_e     end;          /* END */
    or_msec_t         until;        /* ENTER: the lane lasts until then */
    or_msec_t         wait_ms;      /* WAIT */
    or_msec_t         block_until;  /* END: no new entry before; 0: none */
} or_lane_verdict_t;


/* what a request knows of its own waits in the lane */
typedef struct {
    int              slow_sent;     /* this attempt carried the header */
    or_msec_t        wait_start;    /* its first slot_busy; NONE: none */
    or_msec_t        budget_left;   /* of the request; NONE: no budget */
    uint32_t         rnd;           /* for the jitter */
} or_lane_req_t;


void or_lane_parse(const or_header_t *headers, size_t n, or_msec_t now,
    or_lane_headers_t *out);

/* the slow header is due (an active lane, before its end) */
int or_lane_active(const or_lane_t *l, or_msec_t now);

/* no new lane may be entered now (cool-off, budget_exhausted) */
int or_lane_blocked(const or_lane_t *l, or_msec_t now);

/*
 * R-LANE-2..5: what a failed attempt's response means for the lane of a
 * connection that has it (l: its record, or NULL).
 */
void or_lane_decide(const or_lane_t *l, int status,
    const or_lane_headers_t *h, const or_lane_req_t *req, or_msec_t now,
    or_lane_verdict_t *v);

/* the verdict written into the record; returns 1 when it changed */
int or_lane_apply(or_lane_t *l, const or_lane_verdict_t *v, or_msec_t now);

/* when the record holds nothing worth keeping (absolute ms) */
or_msec_t or_lane_expires(const or_lane_t *l, or_msec_t now);

/*
 * R-LANE-7: the session-limit reset.  A probe is due unless memoised.
 * The usage probe's body: its "juniper_tide" block offers a reset when
 * "arm" is "reset" and "available" is true (1), else 0; the claim's
 * body: its "result".  next_at: a "next_available_at" found (absolute
 * ms), else OR_MSEC_NONE.
 */
int or_lane_reset_due(const or_lane_t *l, or_msec_t now);
int or_lane_usage_parse(const char *body, size_t len, or_msec_t now,
    or_msec_t *next_at);
or_reset_result_e or_lane_claim_parse(const char *body, size_t len,
    or_msec_t now, or_msec_t *next_at);

/* the memo of an outcome of the reset; returns 1 when it changed */
int or_lane_reset_record(or_lane_t *l, or_reset_result_e result,
    or_msec_t next_at, or_msec_t now);

const char *or_lane_valid(const void *value, size_t size, or_msec_t now);
int or_lane_merge(or_lane_t *dst, const or_lane_t *src);

const char *or_lane_phase_name(unsigned phase);
const char *or_lane_end_name(unsigned end);
const char *or_reset_result_name(unsigned result);


#endif /* _OR_LANE_H_INCLUDED_ */
