/*
 * Copyright (C) ngx_omniroute authors
 *
 * Per-key budgets and rate limits (R-BUDGET-1..3).
 */


#include <string.h>

#include "or_test.h"
#include "or_budget.h"


/* 2026-12-02 04:30:00 UTC */
#define T0  ((or_msec_t) 1796185800 * 1000)


static void
tb_windows(void)
{
    or_is_int(or_budget_window_end(OR_BUDGET_REQUESTS, T0 + 15000) - T0,
              60000, "R-BUDGET-1 the minute ends at :00");
    or_is_int(or_budget_window_end(OR_BUDGET_DAY, T0),
              (or_msec_t) 1796256000 * 1000,
              "R-BUDGET-1 the day ends at 00:00 UTC");
    or_is_int(or_budget_window_end(OR_BUDGET_MONTH, T0),
              (or_msec_t) 1798761600 * 1000,
              "R-BUDGET-1 December ends on January 1st 00:00 UTC");
    or_is_int(or_budget_window_end(OR_BUDGET_MONTH,
                                   (or_msec_t) 1709164800 * 1000),
              (or_msec_t) 1709251200 * 1000,
              "R-BUDGET-1 2024-02-29 is in February, March 1st ends it");
    or_is_int(or_budget_window_end(OR_BUDGET_MONTH, 0),
              (or_msec_t) 2678400 * 1000, "R-BUDGET-1 the epoch's month");
    or_ok(or_budget_window(OR_BUDGET_MONTH, (or_msec_t) 1798761600 * 1000)
          == or_budget_window(OR_BUDGET_MONTH, T0) + 1,
          "R-BUDGET-1 the next month is the next window");
    or_ok(or_budget_window(OR_BUDGET_MONTH, -5) == 1970 * 12,
          "R-BUDGET-1 a time before the epoch reads as the epoch");
    or_is_int((int64_t) or_budget_input_estimate(0), 0,
              "R-BUDGET-2 an empty body: no input estimate");
    or_is_int((int64_t) or_budget_input_estimate(401), 101,
              "R-BUDGET-2 input estimate: bytes / 4, rounded up");
}


static void
tb_requests(void)
{
    int                 i, k;
    or_msec_t           retry;
    or_budget_t         b;
    or_budget_conf_t    c;
    or_budget_view_t    v;
    or_budget_ticket_t  t[4];

    memset(&b, 0, sizeof(b));
    memset(&c, 0, sizeof(c));
    memset(t, 0, sizeof(t));
    c.limit[OR_BUDGET_REQUESTS] = 3;

    for (i = 0; i < 3; i++) {
        k = or_budget_admit(&b, &c, T0 + 1000 * i, 10, 10, &t[i], &retry);
        or_is_int(k, OR_BUDGET_NONE, "R-BUDGET-1 request %d of 3 admitted",
                  i + 1);
    }

    or_budget_view(&b, &c, OR_BUDGET_REQUESTS, T0 + 2000, &v);
    or_is_int((int64_t) v.limit, 3, "R-BUDGET-3 the limit seen");
    or_is_int((int64_t) v.remaining, 0, "R-BUDGET-3 none remaining");
    or_is_int(v.reset, 58000, "R-BUDGET-3 reset at the minute's end");

    retry = 0;
    k = or_budget_admit(&b, &c, T0 + 20000, 10, 10, &t[3], &retry);
    or_is_int(k, OR_BUDGET_REQUESTS, "R-BUDGET-1 the 4th: requests/min");
    or_is_int(retry, 40000, "R-BUDGET-1 retry at the minute's end");
    or_ok(!t[3].admitted, "R-BUDGET-1 a refusal reserves nothing");

    or_budget_settle(&b, &t[0], T0 + 21000, 0, 0);
    k = or_budget_admit(&b, &c, T0 + 22000, 10, 10, &t[3], &retry);
    or_is_int(k, OR_BUDGET_REQUESTS,
              "R-BUDGET-1 a released request still counts in its minute");

    k = or_budget_admit(&b, &c, T0 + 60000, 10, 10, &t[3], &retry);
    or_is_int(k, OR_BUDGET_NONE, "R-BUDGET-1 the next minute admits");
    or_is_int((int64_t) b.inflight, 3, "R-BUDGET-1 three in flight");
}


static void
tb_tokens(void)
{
    int                 k;
    or_msec_t           retry;
    or_budget_t         b;
    or_budget_conf_t    c;
    or_budget_view_t    v;
    or_budget_ticket_t  t1, t2, t3;

    memset(&b, 0, sizeof(b));
    memset(&c, 0, sizeof(c));
    memset(&t1, 0, sizeof(t1));
    memset(&t2, 0, sizeof(t2));
    memset(&t3, 0, sizeof(t3));
    c.limit[OR_BUDGET_INPUT] = 1000;
    c.limit[OR_BUDGET_OUTPUT] = 500;

    k = or_budget_admit(&b, &c, T0, 100, 300, &t1, &retry);
    or_is_int(k, OR_BUDGET_NONE, "R-BUDGET-2 300 of 500 output reserved");
    k = or_budget_admit(&b, &c, T0, 100, 300, &t2, &retry);
    or_is_int(k, OR_BUDGET_OUTPUT,
              "R-BUDGET-2 in-flight reservations refuse the next");

    /* the real usage is smaller: the rest is given back */
    or_budget_settle(&b, &t1, T0 + 5000, 80, 50);
    or_is_int((int64_t) or_budget_used(&b, OR_BUDGET_OUTPUT, T0 + 5000), 50,
              "R-BUDGET-2 settled: the real output");
    or_is_int((int64_t) or_budget_reserved(&b, OR_BUDGET_OUTPUT, T0 + 5000),
              0, "R-BUDGET-2 settled: nothing reserved");
    or_is_int((int64_t) or_budget_used(&b, OR_BUDGET_INPUT, T0 + 5000), 80,
              "R-BUDGET-2 the input counted apart");

    k = or_budget_admit(&b, &c, T0 + 6000, 100, 300, &t2, &retry);
    or_is_int(k, OR_BUDGET_NONE, "R-BUDGET-2 then admitted");

    or_budget_view(&b, &c, OR_BUDGET_OUTPUT, T0 + 6000, &v);
    or_is_int((int64_t) v.remaining, 150,
              "R-BUDGET-3 remaining = limit - used - reserved");

    /* an abort releases */
    or_budget_settle(&b, &t2, T0 + 7000, 0, 0);
    or_budget_view(&b, &c, OR_BUDGET_OUTPUT, T0 + 7000, &v);
    or_is_int((int64_t) v.remaining, 450, "R-BUDGET-2 a release gives back");

    /* larger than the limit: passes alone, in an empty window */
    k = or_budget_admit(&b, &c, T0 + 8000, 10, 4000, &t3, &retry);
    or_is_int(k, OR_BUDGET_OUTPUT,
              "R-BUDGET-2 an estimate above the limit waits for an empty "
              "window");
    k = or_budget_admit(&b, &c, T0 + 60000, 10, 4000, &t3, &retry);
    or_is_int(k, OR_BUDGET_NONE, "R-BUDGET-2 ... and passes in one");
    or_is_int((int64_t) t3.amount[OR_BUDGET_OUTPUT], 500,
              "R-BUDGET-2 reserved as the limit");
}


static void
tb_rollover(void)
{
    int                 k;
    or_msec_t           retry;
    or_budget_t         b;
    or_budget_conf_t    c;
    or_budget_ticket_t  t;

    memset(&b, 0, sizeof(b));
    memset(&c, 0, sizeof(c));
    memset(&t, 0, sizeof(t));
    c.limit[OR_BUDGET_DAY] = 10000;

    k = or_budget_admit(&b, &c, T0 + 59000, 100, 100, &t, &retry);
    or_is_int(k, OR_BUDGET_NONE, "R-BUDGET-2 admitted at :59");

    /* settled in the next minute with more than reserved */
    or_budget_settle(&b, &t, T0 + 61000, 150, 300);
    or_is_int((int64_t) or_budget_used(&b, OR_BUDGET_OUTPUT, T0 + 61000),
              200, "R-BUDGET-2 a minute that ended: the excess is now's");
    or_is_int((int64_t) or_budget_reserved(&b, OR_BUDGET_OUTPUT, T0 + 61000),
              0, "R-BUDGET-2 nothing reserved in the new minute");
    or_is_int((int64_t) or_budget_used(&b, OR_BUDGET_DAY, T0 + 61000), 450,
              "R-BUDGET-2 the day (same window) gets the real usage");
    or_is_int((int64_t) b.inflight, 0, "R-BUDGET-2 none in flight");

    or_budget_settle(&b, &t, T0 + 62000, 150, 300);
    or_is_int((int64_t) or_budget_used(&b, OR_BUDGET_DAY, T0 + 62000), 450,
              "R-BUDGET-2 a ticket is spent once");
}


static void
tb_concurrency(void)
{
    int                 k;
    or_msec_t           retry;
    or_budget_t         b;
    or_budget_conf_t    c;
    or_budget_ticket_t  t1, t2;

    memset(&b, 0, sizeof(b));
    memset(&c, 0, sizeof(c));
    memset(&t1, 0, sizeof(t1));
    memset(&t2, 0, sizeof(t2));
    c.limit[OR_BUDGET_CONCURRENT] = 1;
    c.limit[OR_BUDGET_MONTH] = 1000;

    k = or_budget_admit(&b, &c, T0, 10, 10, &t1, &retry);
    or_is_int(k, OR_BUDGET_NONE, "R-BUDGET-1 one in flight");
    k = or_budget_admit(&b, &c, T0, 10, 10, &t2, &retry);
    or_is_int(k, OR_BUDGET_CONCURRENT, "R-BUDGET-1 the second: concurrent");
    or_is_int(retry, 1000, "R-BUDGET-1 retry in 1 s");
    or_is_str(or_budget_name(k), "concurrent", "R-BUDGET-3 its name");

    or_budget_settle(&b, &t1, T0 + 10, 900, 90);
    k = or_budget_admit(&b, &c, T0 + 20, 10, 10, &t2, &retry);
    or_is_int(k, OR_BUDGET_MONTH, "R-BUDGET-1 then the month's budget");
    or_is_int(retry, or_budget_window_end(OR_BUDGET_MONTH, T0) - T0 - 20,
              "R-BUDGET-1 retry when the month ends");
}


static void
tb_saturate(void)
{
    int                 k;
    or_msec_t           retry;
    or_budget_t         b;
    or_budget_conf_t    c;
    or_budget_ticket_t  t;

    memset(&b, 0, sizeof(b));
    memset(&c, 0, sizeof(c));
    memset(&t, 0, sizeof(t));
    c.limit[OR_BUDGET_DAY] = (uint64_t) 1 << 53;

    or_ok(or_budget_add(UINT64_MAX - 1, 5) == UINT64_MAX,
          "R-BUDGET-2 addition saturates");
    or_ok(or_budget_sub(3, 5) == 0, "R-BUDGET-2 subtraction stops at 0");

    k = or_budget_admit(&b, &c, T0, UINT64_MAX, UINT64_MAX, &t, &retry);
    or_is_int(k, OR_BUDGET_NONE, "R-BUDGET-2 huge estimates: capped");
    or_budget_settle(&b, &t, T0, UINT64_MAX, UINT64_MAX);
    or_ok(or_budget_used(&b, OR_BUDGET_DAY, T0) == UINT64_MAX,
          "R-BUDGET-2 huge usage saturates");

    b.inflight = 0;
    t.admitted = 1;
    or_budget_settle(&b, &t, T0, 0, 0);
    or_is_int((int64_t) b.inflight, 0, "R-BUDGET-2 in flight stops at 0");

    or_ok(!or_budget_valid_limit(0), "R-BUDGET-1 limit 0 refused");
    or_ok(or_budget_valid_limit(1), "R-BUDGET-1 limit 1 accepted");
    or_ok(!or_budget_valid_limit(((uint64_t) 1 << 53) + 1),
          "R-BUDGET-1 limit beyond 2^53 refused");
}


static void
tb_max_tokens(void)
{
    uint64_t     v;
    const char  *s;

#define MT(body)  or_budget_max_tokens(body, strlen(body), &v)

    v = 0;
    or_ok(MT("{\"model\":\"m\",\"max_tokens\":512}") && v == 512,
          "R-BUDGET-2 max_tokens");
    or_ok(MT("{\"max_completion_tokens\": 70 , \"x\":[1,{\"max_tokens\":9}]}")
          && v == 70, "R-BUDGET-2 max_completion_tokens; nested ignored");
    or_ok(MT("{\"max_output_tokens\":3,\"max_tokens\":8}") && v == 8,
          "R-BUDGET-2 the largest of the names");
    or_ok(MT("{\"max_tokens\":3,\"max_tokens\":5}") && v == 5,
          "R-BUDGET-2 the last of a name wins");
    or_ok(MT("{\"generationConfig\":{\"temperature\":1,"
             "\"maxOutputTokens\":256},\"contents\":[]}") && v == 256,
          "R-BUDGET-2 Gemini generationConfig.maxOutputTokens");
    or_ok(MT("{\"max_\\u0074okens\":44}") && v == 44,
          "R-BUDGET-2 an escaped key is compared decoded");
    or_ok(!MT("{\"max_tokens\":1.5}"), "R-BUDGET-2 a fraction: none");
    or_ok(!MT("{\"max_tokens\":-1}"), "R-BUDGET-2 negative: none");
    or_ok(!MT("{\"max_tokens\":\"9\"}"), "R-BUDGET-2 a string: none");
    or_ok(!MT("{\"max_tokens\":9,\"max_tokens\":null}"),
          "R-BUDGET-2 the last one null: none");
    or_ok(!MT("[1]"), "R-BUDGET-2 not an object: none");
    or_ok(!MT("{\"max_tokens\":12"), "R-BUDGET-2 cut short: none");
    or_ok(!MT(""), "R-BUDGET-2 empty: none");
    or_ok(MT("{\"max_tokens\":99999999999999999999999}")
          && v > ((uint64_t) 1 << 53) && v < ((uint64_t) 1 << 60),
          "R-BUDGET-2 a huge value saturates");

    s = "{\"max_tokens\":7}";
    or_ok(!or_budget_max_tokens(s, 5, &v), "R-BUDGET-2 a prefix: none");

#undef MT
}


static void
tb_cancel(void)
{
    or_msec_t           retry;
    or_budget_t         b;
    or_budget_conf_t    c;
    or_budget_ticket_t  t;

    memset(&b, 0, sizeof(b));
    memset(&c, 0, sizeof(c));
    memset(&t, 0, sizeof(t));
    c.limit[OR_BUDGET_REQUESTS] = 1;

    or_is_int(or_budget_admit(&b, &c, T0, 5, 5, &t, &retry), OR_BUDGET_NONE,
              "R-BUDGET-1 admitted by the key's rule");
    or_budget_cancel(&b, &t);
    or_is_int(or_budget_admit(&b, &c, T0, 5, 5, &t, &retry), OR_BUDGET_NONE,
              "R-BUDGET-1 a cancelled ticket (the model's rule refused) "
              "counts nothing");
    or_is_int((int64_t) b.inflight, 1, "R-BUDGET-1 one in flight");
}


static void
tb_remote(void)
{
    int                 k;
    or_msec_t           retry;
    or_budget_t         b;
    or_budget_conf_t    c;
    or_budget_ticket_t  t;

    memset(&b, 0, sizeof(b));
    memset(&c, 0, sizeof(c));
    memset(&t, 0, sizeof(t));
    c.limit[OR_BUDGET_REQUESTS] = 4;

    or_is_int(or_budget_admit(&b, &c, T0, 1, 1, &t, &retry), OR_BUDGET_NONE,
              "R-BUDGET-5 one here");
    or_budget_settle(&b, &t, T0, 1, 1);

    or_budget_remote(&b, OR_BUDGET_REQUESTS,
                     or_budget_window(OR_BUDGET_REQUESTS, T0), 4, 1);
    or_is_int((int64_t) or_budget_others(&b, OR_BUDGET_REQUESTS, T0), 3,
              "R-BUDGET-5 three elsewhere");
    k = or_budget_admit(&b, &c, T0 + 10, 1, 1, &t, &retry);
    or_is_int(k, OR_BUDGET_REQUESTS, "R-BUDGET-5 the cluster's count "
              "refuses");

    or_budget_remote(&b, OR_BUDGET_REQUESTS, 1, 0, 0);
    or_is_int((int64_t) or_budget_others(&b, OR_BUDGET_REQUESTS, T0), 3,
              "R-BUDGET-5 another window's count is ignored");
    or_is_int((int64_t) or_budget_others(&b, OR_BUDGET_REQUESTS,
                                         T0 + 60000), 0,
              "R-BUDGET-5 the next minute starts over");
    or_budget_remote(&b, OR_BUDGET_REQUESTS,
                     or_budget_window(OR_BUDGET_REQUESTS, T0), 0, 1);
    or_is_int((int64_t) or_budget_others(&b, OR_BUDGET_REQUESTS, T0), 0,
              "R-BUDGET-5 a total below ours: none elsewhere");
}


int
main(void)
{
    tb_remote();
    tb_max_tokens();
    tb_cancel();
    tb_windows();
    tb_requests();
    tb_tokens();
    tb_rollover();
    tb_concurrency();
    tb_saturate();

    return or_done();
}
