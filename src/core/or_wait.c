/*
 * Copyright (C) ngx_omniroute authors
 *
 * Waiting instead of failing; see or_wait.h for the rules.
 */


#include <string.h>

#include "or_wait.h"


#define or_queue_bit(q, t)                                                   \
    ((q)->left[((t) % OR_QUEUE_RING) / 8] & (1u << ((t) % 8)))


static int or_wait_reason_hard(or_reason_e reason);


static int
or_wait_reason_hard(or_reason_e reason)
{
    switch (reason) {

    case OR_REASON_QUOTA_EXHAUSTED:
    case OR_REASON_AUTH_ERROR:
    case OR_REASON_NOT_FOUND:
    case OR_REASON_CREDITS_EXHAUSTED:
    case OR_REASON_BANNED:
    case OR_REASON_EXPIRED:
    case OR_REASON_REQUEST_REJECTED:
    case OR_REASON_BAD_REQUEST:
    case OR_REASON_CONTEXT_OVERFLOW:
        return 1;

    default:
        return 0;
    }
}


or_reason_e
or_wait_cause(const or_plan_view_t *v, or_exclusion_e e, or_msec_t now)
{
    int           i;
    or_msec_t     r, longest;
    or_reason_e   cause;

    switch (e) {

    case OR_EXCL_PROVIDER_COOLDOWN:
    case OR_EXCL_TERMINAL:
        if (v->conn == NULL) {
            return OR_REASON_NONE;
        }

        return (or_reason_e) v->conn->last_reason;

    case OR_EXCL_MODEL_LOCKOUT:
        cause = OR_REASON_NONE;
        longest = 0;

        for (i = 0; i < OR_PLAN_LOCKOUTS; i++) {
            if (v->lockout[i] == NULL
                || !or_lockout_active(v->lockout[i], now))
            {
                continue;
            }

            r = or_lockout_retry_after(v->lockout[i], now);

            if (r > longest) {
                longest = r;
                cause = (or_reason_e) v->lockout[i]->reason;
            }
        }

        return cause;

    case OR_EXCL_UNAVAILABLE:
        return OR_REASON_REQUEST_REJECTED;

    default:
        return OR_REASON_NONE;
    }
}


or_wait_kind_e
or_wait_kind(or_exclusion_e e, or_reason_e cause)
{
    switch (e) {

    case OR_EXCL_CIRCUIT_OPEN:
    case OR_EXCL_CONCURRENCY:
        return OR_WAIT_KIND_TRANSIENT;

    case OR_EXCL_PROVIDER_COOLDOWN:
    case OR_EXCL_MODEL_LOCKOUT:
        return or_wait_reason_hard(cause) ? OR_WAIT_KIND_HARD
                                          : OR_WAIT_KIND_TRANSIENT;

    default:
        return OR_WAIT_KIND_HARD;
    }
}


or_wait_e
or_wait_decide(const or_wait_limits_t *l, const or_wait_item_t *items,
    size_t n, or_msec_t *ms, const char **why)
{
    size_t     i;
    or_msec_t  e, r;

    *ms = 0;
    *why = NULL;

    e = -1;

    for (i = 0; i < n; i++) {
        if (items[i].kind != OR_WAIT_KIND_TRANSIENT
            || items[i].retry_ms < 0)
        {
            continue;
        }

        r = (items[i].retry_ms > 0) ? items[i].retry_ms : 1;

        if (e < 0 || r < e) {
            e = r;
        }
    }

    if (e < 0) {
        return OR_WAIT_NONE;
    }

    *ms = e;

    if (!l->enabled) {
        *why = "disabled";

    } else if (e > l->max_wait_ms) {
        *why = "max_wait";

    } else if (l->attempts >= l->max_attempts) {
        *why = "max_attempts";

    } else if (e > l->budget_left_ms) {
        *why = "budget";

    } else if (l->request_left_ms != OR_MSEC_NONE
               && e > l->request_left_ms)
    {
        *why = "request_budget";

    } else {
        return OR_WAIT_WAIT;
    }

    return OR_WAIT_REFUSE;
}


int
or_wait_failure_transient(or_reason_e reason)
{
    return reason == OR_REASON_RATE_LIMIT_EXCEEDED
           || reason == OR_REASON_CONCURRENCY_LIMITED;
}


or_msec_t
or_wait_attempt_limit(or_msec_t execution_ms, or_msec_t request_left_ms,
    int *budget)
{
    *budget = 0;

    if (request_left_ms == OR_MSEC_NONE || request_left_ms > execution_ms) {
        return execution_ms;
    }

    *budget = 1;

    return (request_left_ms > 0) ? request_left_ms : 0;
}


int
or_wait_resend(const or_wait_timeout_t *t)
{
    if (t->budget_cut) {
        return 0;
    }

    if (!t->sent || t->stream || t->first_byte) {
        return 1;
    }

    return t->resend;
}


int
or_queue_enter(or_queue_t *q, uint64_t epoch, or_msec_t now,
    uint64_t *ticket)
{
    uint64_t  t;

    if (q->epoch == 0) {
        memset(q, 0, sizeof(or_queue_t));
        q->epoch = epoch;
    }

    if (q->tail - q->head >= OR_QUEUE_RING) {
        return -1;
    }

    if (q->head == q->tail) {
        q->head_at = now;
    }

    t = q->tail++;
    q->left[(t % OR_QUEUE_RING) / 8] &= (uint8_t) ~(1u << (t % 8));
    q->waiting++;

    *ticket = t;

    return 0;
}


int
or_queue_leave(or_queue_t *q, uint64_t epoch, uint64_t ticket,
    or_msec_t now)
{
    uint64_t  t;

    if (q->epoch != epoch || ticket < q->head || ticket >= q->tail
        || or_queue_bit(q, ticket))
    {
        return q->waiting == 0;
    }

    q->left[(ticket % OR_QUEUE_RING) / 8] |= (uint8_t) (1u << (ticket % 8));

    if (q->waiting) {
        q->waiting--;
    }

    if (ticket == q->head) {
        q->head_at = now;
    }

    while (q->head < q->tail && or_queue_bit(q, q->head)) {
        t = q->head++;
        q->left[(t % OR_QUEUE_RING) / 8] &= (uint8_t) ~(1u << (t % 8));
    }

    return q->waiting == 0;
}


unsigned
or_queue_expire(or_queue_t *q, or_msec_t now, or_msec_t max_age)
{
    unsigned  n;

    n = 0;

    while (q->waiting && q->head < q->tail && now - q->head_at > max_age) {
        (void) or_queue_leave(q, q->epoch, q->head, now);
        n++;
    }

    return n;
}


uint64_t
or_queue_rank(const or_queue_t *q, uint64_t epoch, uint64_t ticket)
{
    uint64_t  t, rank;

    if (q->epoch != epoch || ticket >= q->tail) {
        return q->waiting;
    }

    rank = 0;

    for (t = q->head; t < ticket; t++) {
        if (!or_queue_bit(q, t)) {
            rank++;
        }
    }

    return rank;
}


uint64_t
or_queue_length(const or_queue_t *q)
{
    return q->waiting;
}


or_msec_t
or_queue_poll_ms(uint64_t rank, uint64_t free)
{
    uint64_t  behind;

    if (rank < free || rank == 0) {
        return 0;
    }

    behind = rank - free;

    if (behind >= OR_QUEUE_POLL_MAX_MS / OR_QUEUE_POLL_MIN_MS) {
        return OR_QUEUE_POLL_MAX_MS;
    }

    return (or_msec_t) (OR_QUEUE_POLL_MIN_MS * (1 + behind));
}
