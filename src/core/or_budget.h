/*
 * Copyright (C) ngx_omniroute authors
 *
 * Per-key budgets and rate limits (R-BUDGET-1..4): the counters of one
 * rule (a client key, or a key and a model) and the decisions on them.
 * Plain C, no nginx; the caller keeps the state (in shared memory, under
 * a lock) and gives the time (milliseconds since the Unix epoch).
 *
 *   windows   fixed UTC windows: the minute (epoch / 60 s), the day
 *             (00:00 UTC) and the calendar month (the 1st, 00:00 UTC);
 *             a window's counters start at zero when it begins.
 *   limits    requests per minute; input and output tokens per minute;
 *             tokens (input + output) per day and per month; requests in
 *             flight.  0: no such limit.
 *   admit     reserves an estimate in every window (input from the body
 *             size, output from max_tokens); refused when one limit
 *             would be passed: which one, and when it may pass (the end
 *             of its window; the concurrency cap: 1 s).  An estimate
 *             larger than a limit is reserved as the limit: it passes
 *             in an empty window, never in a used one.
 *   settle    the real usage replaces the reservation in the window it
 *             was made in; a window that ended since keeps what it had
 *             and what the real usage has beyond the estimate is
 *             charged to the current one.  Release is a settle with no
 *             tokens (the request itself stays counted).
 *
 * The bound: at any time, used + reserved <= limit in each window except
 * for the real usage beyond their estimates of the requests in flight
 * (the overshoot), which is at most the sum of those excesses; with
 * max_tokens on every request, no output overshoot at all.  All
 * arithmetic saturates.
 */

#ifndef _OR_BUDGET_H_INCLUDED_
#define _OR_BUDGET_H_INCLUDED_


#include "or_types.h"


typedef enum {
    OR_BUDGET_REQUESTS = 0,     /* requests per minute */
    OR_BUDGET_INPUT,            /* input tokens per minute */
    OR_BUDGET_OUTPUT,           /* output tokens per minute */
    OR_BUDGET_DAY,              /* tokens per UTC day */
    OR_BUDGET_MONTH,            /* tokens per UTC month */
    OR_BUDGET_WINDOWS,          /* the windowed ones above */
    OR_BUDGET_CONCURRENT = OR_BUDGET_WINDOWS,   /* requests in flight */
    OR_BUDGET_LIMITS
} or_budget_limit_e;

#define OR_BUDGET_NONE      (-1)    /* admitted */

#define OR_BUDGET_BYTES_PER_TOKEN  4    /* input estimate: body bytes / 4 */


typedef struct {
    uint64_t     limit[OR_BUDGET_LIMITS];   /* 0: none */
} or_budget_conf_t;


typedef struct {
    uint64_t     window;        /* its id: minute, day or month number */
    uint64_t     used;          /* settled */
    uint64_t     reserved;      /* estimates of requests in flight */
    uint64_t     remote;        /* the other nodes' usage (a cluster) */
    uint64_t     pushed;        /* of used, what the cluster counted */
} or_budget_win_t;


typedef struct {
    or_budget_win_t  win[OR_BUDGET_WINDOWS];
    uint64_t         inflight;
} or_budget_t;


/* what one admitted request reserved, to settle or release */
typedef struct {
    uint64_t     amount[OR_BUDGET_WINDOWS];
    uint64_t     window[OR_BUDGET_WINDOWS];
    unsigned     admitted:1;
} or_budget_ticket_t;


/* one limit as the client sees it (the rate-limit headers) */
typedef struct {
    uint64_t     limit;         /* 0: not limited */
    uint64_t     remaining;     /* limit - used - reserved, >= 0 */
    or_msec_t    reset;         /* ms until its window ends */
} or_budget_view_t;


/* the window id of limit k at now; the start of the next one (ms) */
uint64_t or_budget_window(int k, or_msec_t now);
or_msec_t or_budget_window_end(int k, or_msec_t now);

/* the input estimate of a body of len bytes */
uint64_t or_budget_input_estimate(size_t len);

/*
 * The output tokens the body caps: the top-level "max_tokens" (Chat,
 * Anthropic), "max_completion_tokens" (Chat), "max_output_tokens"
 * (Responses) or "generationConfig"."maxOutputTokens" (Gemini); keys
 * compared decoded, the last of a name wins, the largest of the names.
 * 1 and *out, or 0 when none is a non-negative integer.
 */
int or_budget_max_tokens(const char *body, size_t len, uint64_t *out);

/* a ticket undone: its reservations and its request taken back */
void or_budget_cancel(or_budget_t *b, or_budget_ticket_t *t);

/*
 * Admits a request with the estimates in, out (tokens) at now:
 * OR_BUDGET_NONE and the ticket filled, or the limit refused and
 * *retry (ms until it may pass); nothing is changed then.
 */
int or_budget_admit(or_budget_t *b, const or_budget_conf_t *c,
    or_msec_t now, uint64_t in, uint64_t out, or_budget_ticket_t *t,
    or_msec_t *retry);

/* the request ended having used in, out tokens: the ticket is spent */
void or_budget_settle(or_budget_t *b, or_budget_ticket_t *t, or_msec_t now,
    uint64_t in, uint64_t out);

/* limit k as seen at now (windows rolled over read as empty) */
void or_budget_view(const or_budget_t *b, const or_budget_conf_t *c, int k,
    or_msec_t now, or_budget_view_t *v);

/* used and reserved of window k at now (0 when it has ended) */
uint64_t or_budget_used(const or_budget_t *b, int k, or_msec_t now);
uint64_t or_budget_reserved(const or_budget_t *b, int k, or_msec_t now);

/* the other nodes' usage of window k at now (a cluster), counted too */
uint64_t or_budget_others(const or_budget_t *b, int k, or_msec_t now);

/*
 * A cluster (R-BUDGET-5): the other nodes' usage of window k as the
 * shared counter told it (total: the cluster's count for the window the
 * id names, mine: our used it includes); ignored when the window is not
 * the current one.  remote counts at admission and in the view.
 */
void or_budget_remote(or_budget_t *b, int k, uint64_t window,
    uint64_t total, uint64_t mine);

/* the name of limit k, as the configuration and the answers spell it */
const char *or_budget_name(int k);

/* 1: a limit value the configuration accepts (1 .. 2^53) */
int or_budget_valid_limit(uint64_t v);

static inline uint64_t
or_budget_add(uint64_t a, uint64_t b)
{
    return (a > UINT64_MAX - b) ? UINT64_MAX : a + b;
}

static inline uint64_t
or_budget_sub(uint64_t a, uint64_t b)
{
    return (a > b) ? a - b : 0;
}


#endif /* _OR_BUDGET_H_INCLUDED_ */
