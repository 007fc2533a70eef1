/*
 * Copyright (C) ngx_omniroute authors
 *
 * Waiting instead of failing (R-CONC-1..3, R-REQ-4): the decisions of a
 * request that cannot be dispatched now.  Plain C, no nginx; pure
 * functions over fixed-size structs, time passed in as milliseconds.
 * The glue reads the records, calls these functions, arms its timers and
 * answers.
 *
 * 1. Cooldown-aware wait (R-CONC-3), or_wait_decide().  Each exclusion of
 *    a combo's candidates (before any attempt: every one is excluded; after
 *    the attempts: every one failed with a transient 429 and the re-plan
 *    finds nothing eligible) is an item: its kind and the time until it
 *    ends.  The kind comes from or_wait_kind(exclusion, cause), the cause
 *    being the reason recorded with the state that excludes
 *    (or_wait_cause()):
 *
 *      exclusion          cause                               kind
 *      circuit_open       -                                   transient
 *      provider_cooldown  quota_exhausted, auth_error,        hard
 *                         not_found, credits_exhausted,
 *                         banned, expired, request_rejected,
 *                         bad_request, context_overflow
 *      provider_cooldown  anything else (rate limit, server   transient
 *                         error, timeout, ..., none)
 *      model_lockout      as provider_cooldown, of the        ...
 *                         active lockout that lasts longest
 *      terminal           -                                   hard
 *      unavailable        (request_rejected, minutes)         hard
 *      concurrency        -                                   transient
 *
 *    The decision, with E the earliest end of a transient item (an item
 *    with retry_ms <= 0 counts as 1 ms):
 *
 *      no transient item                         OR_WAIT_NONE: answer as
 *                                                before (503 with the
 *                                                earliest expiry, or 404)
 *      enabled, E <= max_wait_ms, attempts <     OR_WAIT_WAIT, *ms = E
 *      max_attempts, E <= budget_left_ms, and
 *      (no request budget or E <= request_left_ms)
 *      otherwise                                 OR_WAIT_REFUSE, *ms = E:
 *                                                429 rate_limit_error with
 *                                                retry_after / reset_at
 *
 *    *why names the bound that refused ("disabled", "max_wait",
 *    "max_attempts", "budget", "request_budget"), else NULL.
 *
 * 2. Post-dispatch: or_wait_failure_transient() says which failed
 *    attempts may be waited out (a 429 rate limit or concurrency limit;
 *    never quota, auth, not found or a server error).
 *
 * 3. The FIFO queue of requests waiting for a concurrency slot (R-CONC-1):
 *    an or_queue_t per queue key (the model the client named), in the
 *    zone.  A request takes a ticket on entry (or_queue_enter); tickets are
 *    served in order: or_queue_rank() is the number of tickets ahead of one
 *    that still wait, and a waiter may try to take a slot only while its
 *    rank is below the free slots (or_queue_poll_ms() == 0), so a slot that
 *    frees goes to the head.  A waiter that leaves (served, timed out, the
 *    client gone) marks its ticket (or_queue_leave); the head moves past
 *    every marked ticket.  At most OR_QUEUE_RING tickets are outstanding:
 *    beyond that a waiter gets no ticket (or_queue_enter() returns -1) and
 *    counts as behind all of them (rank = or_queue_length()).  A queue
 *    with nobody waiting is idle (or_queue_leave() returns 1) and may be
 *    dropped; a recreated queue has another epoch, and a ticket of an
 *    older epoch is not in it.
 *
 *    A waiter whose process died never leaves: or_queue_expire() passes
 *    a head that has been the head longer than max_age (longer than any
 *    waiter may wait) as if it had left.
 *
 *    or_queue_poll_ms(rank, free): 0 when rank < free or rank == 0 (try
 *    now: the head always may, as a slot may be free on a connection the
 *    estimate does not count); else OR_QUEUE_POLL_MIN_MS x (1 + rank -
 *    free), at most OR_QUEUE_POLL_MAX_MS: the head checks often, waiters
 *    far behind rarely (no polling storm).
 *
 * 4. Time limits (R-CONC-2, R-REQ-4): or_wait_attempt_limit() is how long
 *    an attempt may run before the provider's response header (the
 *    execution bound, cut by the request budget); or_wait_resend() says
 *    whether a timed-out attempt may be re-sent to the next connection.
 */

#ifndef _OR_WAIT_H_INCLUDED_
#define _OR_WAIT_H_INCLUDED_


#include "or_types.h"
#include "or_plan.h"


#define OR_QUEUE_RING         1024      /* outstanding tickets per queue */
#define OR_QUEUE_POLL_MIN_MS  10
#define OR_QUEUE_POLL_MAX_MS  250


typedef enum {
    OR_WAIT_KIND_TRANSIENT = 0,
    OR_WAIT_KIND_HARD
} or_wait_kind_e;


typedef enum {
    OR_WAIT_NONE = 0,
    OR_WAIT_REFUSE,
    OR_WAIT_WAIT
} or_wait_e;


typedef struct {
    or_wait_kind_e    kind;
    or_msec_t         retry_ms;         /* until it ends; -1: never */
} or_wait_item_t;


typedef struct {
    int               enabled;          /* the setting and the combo */
    or_msec_t         max_wait_ms;      /* the longest single wait */
    or_msec_t         budget_left_ms;   /* of the waits' budget */
    or_msec_t         request_left_ms;  /* of the request budget;
                                           OR_MSEC_NONE: no budget */
    unsigned          attempts;         /* made so far (the usage-limit
                                           lane's retries not counted) */
    unsigned          max_attempts;
} or_wait_limits_t;


/* what the resend decision knows of a timed-out attempt */
typedef struct {
    int               resend;           /* omniroute_resend_after_timeout */
    int               sent;             /* the request reached the
                                           provider in full */
    int               stream;           /* the client asked for a stream */
    int               budget_cut;       /* the request budget ended it */
    int               first_byte;       /* its first-byte deadline ended it
                                           (the operator's choice to fall
                                           over, issue 25) */
} or_wait_timeout_t;


/* the FIFO queue of one key; a plain value in the zone */
typedef struct {
    uint64_t          epoch;            /* nonzero once created */
    uint64_t          head;             /* oldest ticket that may wait */
    uint64_t          tail;             /* the next ticket */
    or_msec_t         head_at;          /* since when it is the head */
    uint32_t          waiting;          /* tickets taken, not left */
    uint32_t          reserved;
    uint8_t           left[OR_QUEUE_RING / 8];  /* bit t % RING: ticket
                                                   t has left */
} or_queue_t;


or_reason_e or_wait_cause(const or_plan_view_t *v, or_exclusion_e e,
    or_msec_t now);
or_wait_kind_e or_wait_kind(or_exclusion_e e, or_reason_e cause);
or_wait_e or_wait_decide(const or_wait_limits_t *l,
    const or_wait_item_t *items, size_t n, or_msec_t *ms, const char **why);
int or_wait_failure_transient(or_reason_e reason);

or_msec_t or_wait_attempt_limit(or_msec_t execution_ms,
    or_msec_t request_left_ms, int *budget);
int or_wait_resend(const or_wait_timeout_t *t);

int or_queue_enter(or_queue_t *q, uint64_t epoch, or_msec_t now,
    uint64_t *ticket);
int or_queue_leave(or_queue_t *q, uint64_t epoch, uint64_t ticket,
    or_msec_t now);
unsigned or_queue_expire(or_queue_t *q, or_msec_t now, or_msec_t max_age);
uint64_t or_queue_rank(const or_queue_t *q, uint64_t epoch,
    uint64_t ticket);
uint64_t or_queue_length(const or_queue_t *q);
or_msec_t or_queue_poll_ms(uint64_t rank, uint64_t free);


#endif /* _OR_WAIT_H_INCLUDED_ */
