/*
 * Copyright (C) ngx_omniroute authors
 *
 * Pacing and tool-limit backoff (R-PACE-1..5, R-TOOL-1..4): decisions and
 * the shared record they write.  Plain C, no nginx; pure functions over a
 * fixed-size record, time passed in as milliseconds.
 *
 * 1. Pacing vs locking, or_pace_decide().  A 429 whose body states its
 *    own wait (R-PACE-1): a Google RetryInfo detail
 *    ("@type": "type.googleapis.com/google.rpc.RetryInfo" with
 *    "retryDelay": "20s": typed) or body text ("try again in 20s", an
 *    untyped "retryDelay": prose).  With W the longest such wait and B
 *    the queue wait budget (request_queue.max_wait_ms):
 *
 *      pacing off for the connection, not a 429,     OR_PACE_NONE: the
 *      reason not rate_limit_exceeded /              usual path (cooldown
 *      quota_exhausted / concurrency_limited,        of the hint, fall
 *      no body wait (or 0)                           over)
 *      0 < W <= B                                    OR_PACE_PAUSE, *ms = W:
 *                                                    the connection pauses
 *                                                    (R-PACE-2)
 *      W > B, typed                                  OR_PACE_LOCK, *ms =
 *                                                    min(W, 24 h): the
 *                                                    model is locked on
 *                                                    the connection, no
 *                                                    pause (R-PACE-3)
 *      W > B, prose                                  OR_PACE_NONE
 *
 * 2. Who paces, or_pace_enabled() (R-PACE-5): the connection's switch
 *    (pacing=on|off) when given; otherwise the safety net: a connection
 *    of an API-key provider paces when request_queue.auto_enable
 *    (RATE_LIMIT_AUTO_ENABLE) is on.
 *
 * 3. Admission of a paused connection, or_pace_admit() (R-PACE-4): with
 *    L the pause left and Q the caller's queue time left:
 *      no record, or L <= 0         OR_PACE_GO
 *      L <= Q                       OR_PACE_WAIT, *ms = L (queue, FIFO)
 *      L > Q                        OR_PACE_TIMEOUT: answered at once with
 *                                   the queue-timeout code, not after Q
 *
 * 4. The record, or_pace_t (one per key: a paused connection, or a
 *    provider/model's tool limit).  A record whose until has passed holds
 *    nothing; the next event begins a new epoch (since = now).  Within an
 *    epoch a pause only ever lengthens (until = max), a tool-limit failure
 *    lowers tools to the fewest tools that failed and lengthens until.
 *    or_pace_tools_skip(): a request with ntools >= tools skips the
 *    provider/model while the record lasts; one with fewer still uses it
 *    (R-TOOL-4).
 *
 *    Merge (R-CLUSTER-2), or_pace_merge(): the higher epoch wins the whole
 *    record; same epoch: until, since and kind take the maximum, tools
 *    the smallest nonzero.  Commutative, associative, idempotent.
 *
 *    Validation (or_pace_valid(), untrusted records from Redis): size
 *    sizeof(or_pace_t), epoch <= OR_VALID_COUNT_MAX, tools <=
 *    OR_PACE_TOOLS_MAX, kind 0..2, since in [0, now + OR_VALID_SKEW_MS],
 *    until in [0, since + OR_PACE_MAX_MS], reserved 0.
 */

/*
 * 5. Capability memory (issue 25).  A `capability` refusal (the model
 *    does not support something the request uses) is remembered per
 *    (provider, model, feature) in a record of its own, an or_pace_t of
 *    kind OR_PACE_KIND_PAUSE whose until is the end of the memory.
 *    or_pace_cap_feature() tells the feature a refusal names, in this
 *    order: prefill ("prefill"); a parameter of OR_PACE_CAP_PARAMS, quoted
 *    in a refusal about a parameter ("unsupported parameter",
 *    "unsupported_value", "parameter"), or as its "param" member; images
 *    ("image", "vision"); tools ("tool", "function call"); else none (not
 *    remembered).  or_pace_cap_uses() the features a request body uses,
 *    as bits (1 << feature): prefill, its last "role" is "assistant";
 *    tools, ntools > 0; images, an "image_url", "input_image", "image",
 *    "inlineData" or "inline_data" string; a parameter, its name as a
 *    key ("temperature":).  or_pace_cap_name() the feature's key part.
 */

#ifndef _OR_PACE_H_INCLUDED_
#define _OR_PACE_H_INCLUDED_


#include "or_types.h"


#define OR_PACE_LOCK_MAX_MS   ((or_msec_t) 24 * 3600 * 1000)    /* 24 h */
#define OR_PACE_MAX_MS        ((or_msec_t) 24 * 3600 * 1000)    /* record */
#define OR_PACE_TOOLS_MAX     ((uint32_t) 1 << 20)

#define OR_PACE_KIND_PAUSE    1
#define OR_PACE_KIND_TOOLS    2


typedef enum {
    OR_PACE_NONE = 0,
    OR_PACE_PAUSE,
    OR_PACE_LOCK
} or_pace_e;


/* the features of capability memory: bits of or_pace_cap_uses() */
#define OR_PACE_CAP_NONE      0
#define OR_PACE_CAP_PREFILL   1
#define OR_PACE_CAP_TOOLS     2
#define OR_PACE_CAP_IMAGES    3
#define OR_PACE_CAP_PARAM     4         /* + the index in the list */
#define OR_PACE_CAP_PARAMS    17        /* parameters remembered */
#define OR_PACE_CAP_MAX       (OR_PACE_CAP_PARAM + OR_PACE_CAP_PARAMS)


typedef enum {
    OR_PACE_GO = 0,
    OR_PACE_WAIT,
    OR_PACE_TIMEOUT
} or_pace_admit_e;


/* a body-stated wait: the longest, and whether it was a typed RetryInfo */
typedef struct {
    or_msec_t     ms;               /* OR_MSEC_NONE: none */
    int           typed;
} or_pace_hint_t;


/* the shared record; all zero is "nothing" */
typedef struct {
    uint32_t      epoch;
    uint32_t      tools;            /* tool limit: fewest tools that
                                       failed; 0: not a tool limit */
    or_msec_t     until;
    or_msec_t     since;            /* when this epoch began */
    uint32_t      kind;             /* OR_PACE_KIND_* of the epoch */
    uint32_t      reserved;
} or_pace_t;


void or_pace_hint(const char *body, size_t len, or_msec_t now,
    or_pace_hint_t *h);
int or_pace_enabled(int conn_switch, or_kind_e kind, int auto_enable);
or_pace_e or_pace_decide(int enabled, int status, or_reason_e reason,
    const or_pace_hint_t *h, or_msec_t max_wait_ms, or_msec_t *ms);
or_pace_admit_e or_pace_admit(const or_pace_t *p, or_msec_t now,
    or_msec_t wait_left_ms, or_msec_t *ms);

int or_pace_pause(or_pace_t *p, or_msec_t now, or_msec_t ms);
int or_pace_tools_fail(or_pace_t *p, size_t ntools, or_msec_t now,
    or_msec_t ms);
int or_pace_tools_skip(const or_pace_t *p, size_t ntools, or_msec_t now);
or_msec_t or_pace_left(const or_pace_t *p, or_msec_t now);

int or_pace_merge(or_pace_t *dst, const or_pace_t *src);
int or_pace_equal(const or_pace_t *a, const or_pace_t *b);
const char *or_pace_valid(const void *value, size_t size, or_msec_t now);

unsigned or_pace_cap_feature(const char *body, size_t len);
uint32_t or_pace_cap_uses(const char *body, size_t len, size_t ntools);
const char *or_pace_cap_name(unsigned feature);


#endif /* _OR_PACE_H_INCLUDED_ */
