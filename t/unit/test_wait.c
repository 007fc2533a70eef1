/*
 * Copyright (C) ngx_omniroute authors
 *
 * Waiting instead of failing (or_wait): which exclusions may be waited
 * out, wait or answer and for how long (R-CONC-3), the time limits of an
 * attempt (R-CONC-2, R-REQ-4), re-sending after a timeout, and the FIFO
 * queue of requests waiting for a concurrency slot (R-CONC-1).
 */


#include <string.h>

#include "or_test.h"
#include "or_wait.h"


#define SEC   1000LL
#define T0    1000000000LL

#define TR    OR_WAIT_KIND_TRANSIENT
#define HD    OR_WAIT_KIND_HARD


static void
test_kind(void)
{
    size_t  i;

    static const struct {
        or_exclusion_e  excl;
        or_reason_e     cause;
        or_wait_kind_e  kind;
    } cases[] = {
        { OR_EXCL_CIRCUIT_OPEN, OR_REASON_SERVER_ERROR,
          OR_WAIT_KIND_TRANSIENT },
        { OR_EXCL_CONCURRENCY, OR_REASON_NONE, OR_WAIT_KIND_TRANSIENT },
        { OR_EXCL_PROVIDER_COOLDOWN, OR_REASON_RATE_LIMIT_EXCEEDED,
          OR_WAIT_KIND_TRANSIENT },
        { OR_EXCL_PROVIDER_COOLDOWN, OR_REASON_CONCURRENCY_LIMITED,
          OR_WAIT_KIND_TRANSIENT },
        { OR_EXCL_PROVIDER_COOLDOWN, OR_REASON_SERVER_ERROR,
          OR_WAIT_KIND_TRANSIENT },
        { OR_EXCL_PROVIDER_COOLDOWN, OR_REASON_TIMEOUT,
          OR_WAIT_KIND_TRANSIENT },
        { OR_EXCL_PROVIDER_COOLDOWN, OR_REASON_NONE,
          OR_WAIT_KIND_TRANSIENT },
        { OR_EXCL_PROVIDER_COOLDOWN, OR_REASON_QUOTA_EXHAUSTED,
          OR_WAIT_KIND_HARD },
        { OR_EXCL_PROVIDER_COOLDOWN, OR_REASON_AUTH_ERROR,
          OR_WAIT_KIND_HARD },
        { OR_EXCL_PROVIDER_COOLDOWN, OR_REASON_NOT_FOUND,
          OR_WAIT_KIND_HARD },
        { OR_EXCL_PROVIDER_COOLDOWN, OR_REASON_REQUEST_REJECTED,
          OR_WAIT_KIND_HARD },
        { OR_EXCL_MODEL_LOCKOUT, OR_REASON_RATE_LIMIT_EXCEEDED,
          OR_WAIT_KIND_TRANSIENT },
        { OR_EXCL_MODEL_LOCKOUT, OR_REASON_QUOTA_EXHAUSTED,
          OR_WAIT_KIND_HARD },
        { OR_EXCL_MODEL_LOCKOUT, OR_REASON_NOT_FOUND, OR_WAIT_KIND_HARD },
        { OR_EXCL_TERMINAL, OR_REASON_CREDITS_EXHAUSTED, OR_WAIT_KIND_HARD },
        { OR_EXCL_TERMINAL, OR_REASON_NONE, OR_WAIT_KIND_HARD },
        { OR_EXCL_UNAVAILABLE, OR_REASON_REQUEST_REJECTED,
          OR_WAIT_KIND_HARD },
    };

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        or_is_int(or_wait_kind(cases[i].excl, cases[i].cause),
                  cases[i].kind, "kind: %s caused by %s",
                  or_exclusion_name(cases[i].excl),
                  or_reason_name(cases[i].cause));
    }
}


static void
test_cause(void)
{
    or_lockout_t     lo[3];
    or_plan_view_t   v;
    or_conn_state_t  cs;

    or_plan_view_init(&v);
    memset(&cs, 0, sizeof(cs));
    cs.until = T0 + 5 * SEC;
    cs.last_reason = OR_REASON_QUOTA_EXHAUSTED;

    or_is_int(or_wait_cause(&v, OR_EXCL_PROVIDER_COOLDOWN, T0),
              OR_REASON_NONE, "cause: no connection record: none");

    v.conn = &cs;
    or_is_int(or_wait_cause(&v, OR_EXCL_PROVIDER_COOLDOWN, T0),
              OR_REASON_QUOTA_EXHAUSTED,
              "cause: the connection's last error");
    or_is_int(or_wait_cause(&v, OR_EXCL_CIRCUIT_OPEN, T0), OR_REASON_NONE,
              "cause: a breaker has none");
    or_is_int(or_wait_cause(&v, OR_EXCL_UNAVAILABLE, T0),
              OR_REASON_REQUEST_REJECTED, "cause: unavailable is a 403");

    memset(lo, 0, sizeof(lo));
    lo[0].failures = 1;
    lo[0].until = T0 + 3 * SEC;
    lo[0].reason = OR_REASON_RATE_LIMIT_EXCEEDED;
    lo[2].failures = 1;
    lo[2].until = T0 + 60 * SEC;
    lo[2].reason = OR_REASON_QUOTA_EXHAUSTED;

    v.lockout[0] = &lo[0];
    v.lockout[2] = &lo[2];
    v.lockout_enabled = 1;

    or_is_int(or_wait_cause(&v, OR_EXCL_MODEL_LOCKOUT, T0),
              OR_REASON_QUOTA_EXHAUSTED,
              "cause: the lockout that lasts longest");

    lo[2].until = T0 - 1;
    or_is_int(or_wait_cause(&v, OR_EXCL_MODEL_LOCKOUT, T0),
              OR_REASON_RATE_LIMIT_EXCEEDED,
              "cause: an expired lockout does not count");
}


static void
test_decide(void)
{
    size_t            i;
    or_msec_t         ms;
    or_wait_e         rc;
    const char       *why;
    or_wait_limits_t  l;


    static const struct {
        const char      *name;
        int              enabled;
        or_msec_t        max_wait, budget_left, request_left;
        unsigned         attempts, max_attempts;
        size_t           n;
        or_wait_item_t   items[3];
        or_wait_e        rc;
        or_msec_t        ms;
        const char      *why;
    } cases[] = {
        { "two targets cooling 2 s and 3 s: wait 2 s", 1, 10 * SEC,
          30 * SEC, OR_MSEC_NONE, 0, 3, 2,
          { { TR, 2 * SEC }, { TR, 3 * SEC } },
          OR_WAIT_WAIT, 2 * SEC, NULL },
        { "only quota and auth: as before", 1, 10 * SEC, 30 * SEC,
          OR_MSEC_NONE, 0, 3, 2,
          { { HD, 3600 * SEC }, { HD, 5 * SEC } },
          OR_WAIT_NONE, 0, NULL },
        { "terminal (no timer) alone: as before", 1, 10 * SEC, 30 * SEC,
          OR_MSEC_NONE, 0, 3, 1, { { HD, -1 } },
          OR_WAIT_NONE, 0, NULL },
        { "quota for 1 h and a 429 for 2 s: wait for the 429", 1,
          10 * SEC, 30 * SEC, OR_MSEC_NONE, 0, 3, 2,
          { { HD, 3600 * SEC }, { TR, 2 * SEC } },
          OR_WAIT_WAIT, 2 * SEC, NULL },
        { "a hard exclusion sooner than the transient one is ignored", 1,
          10 * SEC, 30 * SEC, OR_MSEC_NONE, 0, 3, 2,
          { { HD, 1 * SEC }, { TR, 4 * SEC } },
          OR_WAIT_WAIT, 4 * SEC, NULL },
        { "disabled: 429 with the earliest transient expiry", 0, 10 * SEC,
          30 * SEC, OR_MSEC_NONE, 0, 3, 2,
          { { TR, 2 * SEC }, { HD, 1 * SEC } },
          OR_WAIT_REFUSE, 2 * SEC, "disabled" },
        { "longer than max_wait: 429", 1, 10 * SEC, 30 * SEC,
          OR_MSEC_NONE, 0, 3, 1, { { TR, 60 * SEC } },
          OR_WAIT_REFUSE, 60 * SEC, "max_wait" },
        { "exactly max_wait: wait", 1, 10 * SEC, 30 * SEC, OR_MSEC_NONE,
          0, 3, 1, { { TR, 10 * SEC } },
          OR_WAIT_WAIT, 10 * SEC, NULL },
        { "no attempt left: 429", 1, 10 * SEC, 30 * SEC, OR_MSEC_NONE, 3,
          3, 1, { { TR, 2 * SEC } },
          OR_WAIT_REFUSE, 2 * SEC, "max_attempts" },
        { "the waits' budget is spent: 429", 1, 10 * SEC, 1 * SEC,
          OR_MSEC_NONE, 1, 3, 1, { { TR, 2 * SEC } },
          OR_WAIT_REFUSE, 2 * SEC, "budget" },
        { "the request budget would end first: 429", 1, 10 * SEC, 30 * SEC,
          1500, 1, 3, 1, { { TR, 2 * SEC } },
          OR_WAIT_REFUSE, 2 * SEC, "request_budget" },
        { "within the request budget: wait", 1, 10 * SEC, 30 * SEC,
          5 * SEC, 1, 3, 1, { { TR, 2 * SEC } },
          OR_WAIT_WAIT, 2 * SEC, NULL },
        { "an exclusion already over counts as 1 ms", 1, 10 * SEC, 30 * SEC,
          OR_MSEC_NONE, 0, 3, 2, { { TR, 0 }, { TR, 5 * SEC } },
          OR_WAIT_WAIT, 1, NULL },
        { "nothing excluded: as before", 1, 10 * SEC, 30 * SEC,
          OR_MSEC_NONE, 0, 3, 0, { { TR, 0 } },
          OR_WAIT_NONE, 0, NULL },
    };

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        l.enabled = cases[i].enabled;
        l.max_wait_ms = cases[i].max_wait;
        l.budget_left_ms = cases[i].budget_left;
        l.request_left_ms = cases[i].request_left;
        l.attempts = cases[i].attempts;
        l.max_attempts = cases[i].max_attempts;

        rc = or_wait_decide(&l, cases[i].items, cases[i].n, &ms, &why);

        or_is_int(rc, cases[i].rc, "decide: %s", cases[i].name);
        or_is_int(ms, cases[i].ms, "decide: %s: the time", cases[i].name);
        or_is_str(why, cases[i].why, "decide: %s: why", cases[i].name);
    }
}


static void
test_failures(void)
{
    int  i;

    for (i = 0; i < OR_REASON_COUNT; i++) {
        or_is_int(or_wait_failure_transient((or_reason_e) i),
                  i == OR_REASON_RATE_LIMIT_EXCEEDED
                  || i == OR_REASON_CONCURRENCY_LIMITED,
                  "post-dispatch: a %s failure %s be waited out",
                  or_reason_name((or_reason_e) i),
                  (i == OR_REASON_RATE_LIMIT_EXCEEDED
                   || i == OR_REASON_CONCURRENCY_LIMITED) ? "may" : "may not");
    }
}


static void
test_limits(void)
{
    int        budget;
    size_t     i;
    or_msec_t  ms;

    static const struct {
        const char  *name;
        or_msec_t    execution, left, ms;
        int          budget;
    } limits[] = {
        { "no request budget: the execution bound", 600 * SEC,
          OR_MSEC_NONE, 600 * SEC, 0 },
        { "a budget beyond it: the execution bound", 60 * SEC, 90 * SEC,
          60 * SEC, 0 },
        { "a budget before it: the budget", 60 * SEC, 5 * SEC, 5 * SEC, 1 },
        { "equal: the budget", 60 * SEC, 60 * SEC, 60 * SEC, 1 },
        { "the budget is over: nothing", 60 * SEC, -5, 0, 1 },
    };

    static const struct {
        const char  *name;
        int          resend, sent, stream, budget_cut, first_byte, rc;
    } resends[] = {
        { "read timeout, non-streamed, resend off: answer 504",
          0, 1, 0, 0, 0, 0 },
        { "read timeout, non-streamed, resend on: next connection",
          1, 1, 0, 0, 0, 1 },
        { "connect or send timeout: never reached it, next connection",
          0, 0, 0, 0, 0, 1 },
        { "a stream without a header: next connection", 0, 1, 1, 0, 0, 1 },
        { "the request budget ended it: never", 1, 1, 1, 1, 0, 0 },
        { "the budget ended it before sending: never", 1, 0, 0, 1, 0, 0 },
        { "issue 25: its first-byte deadline, resend off: next connection",
          0, 1, 0, 0, 1, 1 },
    };

    for (i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
        ms = or_wait_attempt_limit(limits[i].execution, limits[i].left,
                                   &budget);
        or_is_int(ms, limits[i].ms, "attempt limit: %s", limits[i].name);
        or_is_int(budget, limits[i].budget, "attempt limit: %s: by budget",
                  limits[i].name);
    }

    for (i = 0; i < sizeof(resends) / sizeof(resends[0]); i++) {
        or_wait_timeout_t  t;

        t.resend = resends[i].resend;
        t.sent = resends[i].sent;
        t.stream = resends[i].stream;
        t.budget_cut = resends[i].budget_cut;
        t.first_byte = resends[i].first_byte;

        or_is_int(or_wait_resend(&t), resends[i].rc, "resend: %s",
                  resends[i].name);
    }
}


/* a scripted queue: 'e' enters (ticket k), 'l' leaves ticket k */

static void
test_queue(void)
{
    int          rc;
    size_t       i;
    uint64_t     t, entered, tickets[8];
    or_queue_t   q;

    static const struct {
        char         op;
        int          k;             /* ticket index */
        int          rc;            /* of leave: idle */
        uint64_t     head, waiting;
        uint64_t     rank[8];       /* of tickets 0..4 afterwards */
    } steps[] = {
        { 'e', 0, 0, 0, 1, { 0 } },
        { 'e', 1, 0, 0, 2, { 0, 1 } },
        { 'e', 2, 0, 0, 3, { 0, 1, 2 } },
        { 'e', 3, 0, 0, 4, { 0, 1, 2, 3 } },
        /* a waiter in the middle goes away: those behind move up */
        { 'l', 2, 0, 0, 3, { 0, 1, 0, 2 } },
        /* the head is served: the head moves to ticket 1 */
        { 'l', 0, 0, 1, 2, { 0, 0, 0, 1 } },
        /* ticket 1 is served: the head moves past 2 (left) to 3 */
        { 'l', 1, 0, 3, 1, { 0, 0, 0, 0 } },
        /* leaving twice changes nothing */
        { 'l', 1, 0, 3, 1, { 0, 0, 0, 0 } },
        { 'e', 4, 0, 3, 2, { 0, 0, 0, 0, 1 } },
        { 'l', 3, 0, 4, 1, { 0, 0, 0, 0, 0 } },
        { 'l', 4, 1, 5, 0, { 0, 0, 0, 0, 0 } },
    };

    memset(&q, 0, sizeof(q));
    entered = 0;

    for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        if (steps[i].op == 'e') {
            entered++;
            rc = or_queue_enter(&q, 77, T0 + (or_msec_t) i,
                                &tickets[steps[i].k]);
            or_is_int(rc, 0, "queue step %zu: ticket %d taken", i,
                      steps[i].k);
            or_is_int(tickets[steps[i].k], steps[i].k,
                      "queue step %zu: tickets in arrival order", i);

        } else {
            rc = or_queue_leave(&q, 77, tickets[steps[i].k],
                                T0 + (or_msec_t) i);
            or_is_int(rc, steps[i].rc, "queue step %zu: ticket %d left, "
                      "idle %d", i, steps[i].k, steps[i].rc);
        }

        or_is_int(q.head, steps[i].head, "queue step %zu: head", i);
        or_is_int(or_queue_length(&q), steps[i].waiting,
                  "queue step %zu: waiting", i);

        for (t = 0; t < entered; t++) {
            if (q.head > t || (q.left[(t % OR_QUEUE_RING) / 8]
                               & (1u << (t % 8))))
            {
                continue;       /* gone: its rank means nothing */
            }

            or_is_int(or_queue_rank(&q, 77, tickets[t]), steps[i].rank[t],
                      "queue step %zu: rank of ticket %d", i, (int) t);
        }
    }

    /* another epoch: the ticket is not in it, it counts as behind all */

    memset(&q, 0, sizeof(q));
    (void) or_queue_enter(&q, 5, T0, &t);
    (void) or_queue_enter(&q, 5, T0, &t);
    or_is_int(or_queue_rank(&q, 6, 0), 2,
              "queue: a ticket of another epoch is behind every waiter");
    or_is_int(or_queue_leave(&q, 6, 0, T0), 0,
              "queue: leaving with another epoch changes nothing");
    or_is_int(or_queue_length(&q), 2, "queue: still two waiting");

    /* the ring: at most OR_QUEUE_RING outstanding tickets */

    memset(&q, 0, sizeof(q));

    for (i = 0; i < OR_QUEUE_RING; i++) {
        if (or_queue_enter(&q, 9, T0, &t) != 0) {
            break;
        }
    }

    or_is_int(i, OR_QUEUE_RING, "queue: %d tickets fit", OR_QUEUE_RING);
    or_is_int(or_queue_enter(&q, 9, T0, &t), -1, "queue: one more gets none");

    (void) or_queue_leave(&q, 9, 0, T0);
    or_is_int(or_queue_enter(&q, 9, T0, &t), 0,
              "queue: once the head left, a ticket again");
    or_is_int(t, OR_QUEUE_RING, "queue: ticket %d, in the slot of 0",
              OR_QUEUE_RING);
    or_is_int(or_queue_rank(&q, 9, t), OR_QUEUE_RING - 1,
              "queue: behind the %d others", OR_QUEUE_RING - 1);
    (void) or_queue_leave(&q, 9, 5, T0);
    or_is_int(or_queue_rank(&q, 9, t), OR_QUEUE_RING - 2,
              "queue: wrapped ring, a left ticket is not counted");

    /* a head whose process died: passed once older than max_age */

    memset(&q, 0, sizeof(q));
    (void) or_queue_enter(&q, 3, T0, &t);           /* 0: dies */
    (void) or_queue_enter(&q, 3, T0 + 10, &t);      /* 1 */
    (void) or_queue_enter(&q, 3, T0 + 20, &t);      /* 2 */

    or_is_int(or_queue_expire(&q, T0 + 30 * SEC, 30 * SEC), 0,
              "expire: a head of exactly max_age stays");
    or_is_int(or_queue_expire(&q, T0 + 30 * SEC + 1, 30 * SEC), 1,
              "expire: an older one is passed");
    or_is_int(q.head, 1, "expire: ticket 1 is the head");
    or_is_int(or_queue_rank(&q, 3, 2), 1, "expire: ticket 2 is next");
    or_is_int(or_queue_expire(&q, T0 + 31 * SEC, 30 * SEC), 0,
              "expire: the new head has its own age");
    (void) or_queue_leave(&q, 3, 0, T0 + 31 * SEC);
    or_is_int(or_queue_length(&q), 2,
              "expire: the passed head leaving late changes nothing");
}


static void
test_poll(void)
{
    size_t  i;

    static const struct {
        uint64_t   rank, free;
        or_msec_t  ms;
    } cases[] = {
        { 0, 1, 0 },
        { 1, 2, 0 },
        { 0, 0, 0 },
        { 1, 1, OR_QUEUE_POLL_MIN_MS },
        { 1, 0, 2 * OR_QUEUE_POLL_MIN_MS },
        { 5, 0, 6 * OR_QUEUE_POLL_MIN_MS },
        { 24, 0, 25 * OR_QUEUE_POLL_MIN_MS },
        { 25, 0, OR_QUEUE_POLL_MAX_MS },
        { 100000, 3, OR_QUEUE_POLL_MAX_MS },
    };

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        or_is_int(or_queue_poll_ms(cases[i].rank, cases[i].free),
                  cases[i].ms, "poll: rank %d, %d free",
                  (int) cases[i].rank, (int) cases[i].free);
    }
}


int
main(void)
{
    test_kind();
    test_cause();
    test_decide();
    test_failures();
    test_limits();
    test_queue();
    test_poll();

    return or_done();
}
