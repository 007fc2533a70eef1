/*
 * Copyright (C) ngx_omniroute authors
 *
 * Connection cooldown and terminal states: SPEC R-CD-1 .. R-CD-8 (and the
 * R-CLASS-4 "never shortens, never overwrites terminal" rule).
 */


#include <string.h>

#include "or_test.h"
#include "or_cooldown.h"


#define SEC   1000LL
#define MIN   (60 * SEC)
#define HOUR  (60 * MIN)
#define DAY   (24 * HOUR)
#define T0    1000000000LL


static void conf_for(or_cooldown_conf_t *conf, or_kind_e kind);
static or_verdict_t verdict(or_reason_e reason, or_msec_t cooldown,
    or_msec_t hint);
static void fail(const or_cooldown_conf_t *conf, or_conn_state_t *st,
    or_reason_e reason, int status, or_msec_t now,
    or_cooldown_result_t *res);
static void test_defaults(void);
static void test_backoff_ladder(void);
static void test_fields(void);
static void test_precedence(void);
static void test_provider_delay_bounds(void);
static void test_burst(void);
static void test_concurrency(void);
static void test_terminal(void);
static void test_expired(void);
static void test_rejected(void);
static void test_success(void);
static void test_stream_stall(void);
static void test_explicit(void);
static void test_saturated(void);


int
main(void)
{
    test_defaults();
    test_backoff_ladder();
    test_fields();
    test_precedence();
    test_provider_delay_bounds();
    test_burst();
    test_concurrency();
    test_terminal();
    test_expired();
    test_rejected();
    test_success();
    test_stream_stall();
    test_explicit();
    test_saturated();

    return or_done();
}


static void
conf_for(or_cooldown_conf_t *conf, or_kind_e kind)
{
    or_cooldown_conf_init(conf);
    or_cooldown_conf_fill(conf, kind);
}


static or_verdict_t
verdict(or_reason_e reason, or_msec_t cooldown, or_msec_t hint)
{
    or_verdict_t  v;

    memset(&v, 0, sizeof(v));
    v.reason = reason;
    v.scope = OR_SCOPE_CONNECTION;
    v.cooldown_ms = cooldown;
    v.hint_ms = hint;
    v.fall_over = 1;
    v.retry_after_s = -1;

    return v;
}


/* a sequential failure: the attempt started at "now" */
static void
fail(const or_cooldown_conf_t *conf, or_conn_state_t *st, or_reason_e reason,
    int status, or_msec_t now, or_cooldown_result_t *res)
{
    or_verdict_t  v;

    v = verdict(reason, OR_MSEC_NONE, OR_MSEC_NONE);
    or_cooldown_fail(conf, st, &v, status, now, now, res);
}


static void
test_defaults(void)
{
    or_cooldown_conf_t  conf;

    conf_for(&conf, OR_KIND_OAUTH);
    or_is_int(conf.base_ms, 5 * SEC, "R-CD-2 oauth base cooldown 5 s");
    or_is_int(conf.max_ms, 30 * MIN, "R-CD-2 max cooldown default 30 min");
    or_is_int(conf.max_backoff_steps, 10, "R-CD-2 bounded steps: 10");
    or_is_int(conf.concurrency_ms, 1 * SEC,
              "R-CD-5 concurrency-limit cooldown 1 s");
    or_is_int(conf.expired_retry_max, 3,
              "R-CD-6 expired after 3 bounded retries");
    or_is_int(conf.rejected_max_ms, 1 * HOUR,
              "R-CD-6 request_rejected capped at 1 h");
    or_is_int(conf.stream_stall_cooldown, 0,
              "R-CD-8 stream_stall_cooldown off by default");
    or_ok(or_cooldown_conf_check(&conf) == NULL,
          "R-CD-2 oauth defaults are valid");

    conf_for(&conf, OR_KIND_APIKEY);
    or_is_int(conf.base_ms, 3 * SEC, "R-CD-2 apikey base cooldown 3 s");
    or_ok(or_cooldown_conf_check(&conf) == NULL,
          "R-CD-2 apikey defaults are valid");

    conf_for(&conf, OR_KIND_LOCAL);
    or_is_int(conf.base_ms, 1 * SEC, "R-CD-2 local base cooldown 1 s");

    conf_for(&conf, OR_KIND_APIKEY);
    conf.max_ms = 2 * SEC;
    or_ok(or_cooldown_conf_check(&conf) != NULL,
          "R-CD-2 max cooldown below the base is rejected");

    conf_for(&conf, OR_KIND_APIKEY);
    conf.max_backoff_steps = 31;
    or_ok(or_cooldown_conf_check(&conf) != NULL,
          "R-CD-2 more than 30 backoff steps is rejected");
}


static void
test_backoff_ladder(void)
{
    size_t              i;
    or_conn_state_t     st;
    or_cooldown_conf_t  conf;

    static const struct {
        or_kind_e  kind;
        unsigned   level;
        or_msec_t  ms;
    } cases[] = {
        { OR_KIND_APIKEY, 0, 3 * SEC },
        { OR_KIND_APIKEY, 1, 6 * SEC },
        { OR_KIND_APIKEY, 2, 12 * SEC },
        { OR_KIND_APIKEY, 3, 24 * SEC },
        { OR_KIND_APIKEY, 8, 768 * SEC },
        { OR_KIND_APIKEY, 9, 1536 * SEC },
        { OR_KIND_APIKEY, 10, 30 * MIN },
        { OR_KIND_APIKEY, 50, 30 * MIN },
        { OR_KIND_OAUTH, 0, 5 * SEC },
        { OR_KIND_OAUTH, 1, 10 * SEC },
        { OR_KIND_OAUTH, 8, 1280 * SEC },
        { OR_KIND_OAUTH, 9, 30 * MIN },
        { OR_KIND_LOCAL, 4, 16 * SEC }
    };

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        conf_for(&conf, cases[i].kind);
        or_is_int(or_cooldown_backoff_ms(&conf, cases[i].level), cases[i].ms,
                  "R-CD-2 %s base x 2^%u capped at 30 min = %lld ms",
                  or_kind_name(cases[i].kind), cases[i].level,
                  (long long) cases[i].ms);
    }

    /* bounded steps: the exponent stops at max_backoff_steps */
    conf_for(&conf, OR_KIND_APIKEY);
    conf.max_backoff_steps = 3;
    or_is_int(or_cooldown_backoff_ms(&conf, 7), 24 * SEC,
              "R-CD-2 steps bounded at 3: level 7 waits base x 8");

    /* sequential failures climb one level each, up to the bound */
    conf_for(&conf, OR_KIND_APIKEY);
    memset(&st, 0, sizeof(st));
    for (i = 0; i < 14; i++) {
        fail(&conf, &st, OR_REASON_SERVER_ERROR, 502,
             T0 + (or_msec_t) i * HOUR, NULL);
    }
    or_is_int(st.backoff_level, 10,
              "R-CD-2 backoff_level bounded by max_backoff_steps");
    or_is_int(st.until, T0 + 13 * HOUR + 30 * MIN,
              "R-CD-2 14th failure waits the 30 min cap");
}


static void
test_fields(void)
{
    or_conn_state_t       st;
    or_cooldown_view_t    view;
    or_cooldown_conf_t    conf;
    or_cooldown_result_t  res;

    conf_for(&conf, OR_KIND_OAUTH);
    memset(&st, 0, sizeof(st));

    or_cooldown_view(&st, T0, &view);
    or_is_str(view.test_status, "active", "R-CD-1 fresh connection active");

    fail(&conf, &st, OR_REASON_SERVER_ERROR, 503, T0, &res);
    or_is_int(res.action, OR_CD_COOLDOWN, "R-CD-1 503 sets a cooldown");
    or_is_int(res.source, OR_CD_SRC_BACKOFF, "R-CD-2 scaled backoff used");
    or_is_int(st.until, T0 + 5 * SEC, "R-CD-1 rate_limited_until = +5 s");
    or_is_int(st.backoff_level, 1, "R-CD-1 backoff_level 1");
    or_is_int(st.failures, 1, "R-CD-1 failure counter 1");
    or_is_int(st.last_status, 503, "R-CD-1 error_code 503");
    or_is_int(st.last_reason, OR_REASON_SERVER_ERROR,
              "R-CD-1 last_error_type server_error");
    or_is_int(st.last_error_at, T0, "R-CD-1 last_error time");

    or_cooldown_view(&st, T0 + 1 * SEC, &view);
    or_is_str(view.test_status, "unavailable",
              "R-CD-1 test_status unavailable during the cooldown");
    or_is_int(view.retry_after, 4 * SEC, "R-CD-1 retry_after 4 s");

    or_ok(!or_cooldown_eligible(&st, T0 + 5 * SEC - 1),
          "R-CD-7 not eligible 1 ms before rate_limited_until");
    or_ok(or_cooldown_eligible(&st, T0 + 5 * SEC),
          "R-CD-7 lazy recovery: eligible at rate_limited_until");
    or_cooldown_view(&st, T0 + 5 * SEC, &view);
    or_is_str(view.test_status, "active",
              "R-CD-7 expired cooldown is ignored by reads");

    fail(&conf, &st, OR_REASON_TIMEOUT, 0, T0 + 6 * SEC, &res);
    or_is_int(st.until, T0 + 6 * SEC + 10 * SEC,
              "R-CD-2 second failure waits base x 2");
    or_is_int(st.backoff_level, 2, "R-CD-2 backoff_level 2");
}


static void
test_precedence(void)
{
    size_t                i;
    or_verdict_t          v;
    or_conn_state_t       st;
    or_cooldown_conf_t    conf;
    or_cooldown_result_t  res;

    static const struct {
        const char      *name;
        or_reason_e      reason;
        or_msec_t        hint;
        or_msec_t        override;
        or_msec_t        provider;
        or_msec_t        env;
        or_msec_t        expect;
        or_cd_source_e   source;
        unsigned         level;      /* level afterwards, from 4 */
    } cases[] = {
        { "upstream hint beats everything", OR_REASON_RATE_LIMIT_EXCEEDED,
          20 * SEC, 40 * SEC, 60 * SEC, 80 * SEC, 20 * SEC,
          OR_CD_SRC_HINT, 5 },
        { "per-connection override beats provider delay",
          OR_REASON_RATE_LIMIT_EXCEEDED,
          OR_MSEC_NONE, 40 * SEC, 60 * SEC, 80 * SEC, 40 * SEC,
          OR_CD_SRC_OVERRIDE, 5 },
        { "provider retry delay beats env, resets backoff_level",
          OR_REASON_RATE_LIMIT_EXCEEDED,
          OR_MSEC_NONE, OR_MSEC_NONE, 60 * SEC, 80 * SEC, 60 * SEC,
          OR_CD_SRC_PROVIDER, 0 },
        { "environment default beats scaled backoff",
          OR_REASON_RATE_LIMIT_EXCEEDED,
          OR_MSEC_NONE, OR_MSEC_NONE, OR_MSEC_NONE, 80 * SEC, 80 * SEC,
          OR_CD_SRC_ENV, 5 },
        { "scaled backoff last", OR_REASON_RATE_LIMIT_EXCEEDED,
          OR_MSEC_NONE, OR_MSEC_NONE, OR_MSEC_NONE, OR_MSEC_NONE, 48 * SEC,
          OR_CD_SRC_BACKOFF, 5 },
        { "hint of 0 is no hint", OR_REASON_RATE_LIMIT_EXCEEDED,
          0, OR_MSEC_NONE, OR_MSEC_NONE, OR_MSEC_NONE, 48 * SEC,
          OR_CD_SRC_BACKOFF, 5 },
        { "hint capped at 30 days", OR_REASON_RATE_LIMIT_EXCEEDED,
          40 * DAY, OR_MSEC_NONE, OR_MSEC_NONE, OR_MSEC_NONE, 30 * DAY,
          OR_CD_SRC_HINT, 5 },
        { "overrides apply to rate limits only (quota)",
          OR_REASON_QUOTA_EXHAUSTED,
          OR_MSEC_NONE, 40 * SEC, 60 * SEC, 80 * SEC, 48 * SEC,
          OR_CD_SRC_BACKOFF, 5 },
        { "quota_exhausted honors the hint", OR_REASON_QUOTA_EXHAUSTED,
          2 * HOUR, 40 * SEC, 60 * SEC, 80 * SEC, 2 * HOUR,
          OR_CD_SRC_HINT, 5 },
        { "overrides apply to rate limits only (auth)",
          OR_REASON_AUTH_ERROR,
          OR_MSEC_NONE, 40 * SEC, 60 * SEC, 80 * SEC, 48 * SEC,
          OR_CD_SRC_BACKOFF, 5 }
    };

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        conf_for(&conf, OR_KIND_APIKEY);
        conf.override_ms = cases[i].override;
        conf.provider_delay_ms = cases[i].provider;
        conf.env_default_ms = cases[i].env;
        or_ok(or_cooldown_conf_check(&conf) == NULL,
              "R-CD-3 settings valid: %s", cases[i].name);

        memset(&st, 0, sizeof(st));
        st.backoff_level = 4;
        st.mark_at = T0 - HOUR;

        v = verdict(cases[i].reason, OR_MSEC_NONE, cases[i].hint);
        or_cooldown_fail(&conf, &st, &v, 429, T0, T0, &res);

        or_is_int(res.cooldown_ms, cases[i].expect, "R-CD-3 %s",
                  cases[i].name);
        or_is_int(res.source, cases[i].source, "R-CD-3 source: %s",
                  cases[i].name);
        or_is_int(st.until, T0 + cases[i].expect, "R-CD-3 until: %s",
                  cases[i].name);
        or_is_int(st.backoff_level, cases[i].level,
                  "R-CD-3 backoff_level: %s", cases[i].name);
    }
}


static void
test_provider_delay_bounds(void)
{
    size_t              i;
    or_cooldown_conf_t  conf;

    static const struct {
        or_msec_t  ms;
        int        ok;
    } cases[] = {
        { 999, 0 },
        { 1 * SEC, 1 },
        { 15 * SEC, 1 },
        { 21600 * SEC, 1 },
        { 21601 * SEC, 0 }
    };

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        conf_for(&conf, OR_KIND_APIKEY);
        conf.provider_delay_ms = cases[i].ms;
        or_is_int(or_cooldown_conf_check(&conf) == NULL, cases[i].ok,
                  "R-CD-3 provider retry delay %lld ms is %s",
                  (long long) cases[i].ms,
                  cases[i].ok ? "accepted (1-21600 s)" : "rejected");
    }
}


static void
test_burst(void)
{
    int                   i;
    or_verdict_t          v;
    or_conn_state_t       st, once;
    or_cooldown_conf_t    conf;
    or_cooldown_result_t  res;

    conf_for(&conf, OR_KIND_APIKEY);
    memset(&st, 0, sizeof(st));
    st.backoff_level = 2;
    v = verdict(OR_REASON_RATE_LIMIT_EXCEEDED, OR_MSEC_NONE, OR_MSEC_NONE);

    /* 20 attempts started at T0 .. T0+19, failing at T0+100 .. T0+119 */
    for (i = 0; i < 20; i++) {
        or_cooldown_fail(&conf, &st, &v, 429, T0 + i, T0 + 100 + i, &res);
        if (i == 0) {
            or_is_int(res.action, OR_CD_COOLDOWN,
                      "R-CD-4 first failure of a burst is counted");
        }
    }

    or_is_int(res.action, OR_CD_ABSORBED,
              "R-CD-4 later failures of the burst are absorbed");
    or_is_int(st.backoff_level, 3,
              "R-CD-4 20 concurrent 429s raise backoff_level once");
    or_is_int(st.until, T0 + 100 + 12 * SEC,
              "R-CD-4 20 concurrent 429s extend the cooldown once");
    or_is_int(st.failures, 1, "R-CD-4 the burst counts as one failure");

    /* the same event delivered twice */
    once = st;
    or_cooldown_fail(&conf, &st, &v, 429, T0 + 5, T0 + 105, &res);
    or_ok(or_cooldown_equal(&once, &st) && !res.changed,
          "R-CD-4 a duplicate failure event changes nothing");

    /* an absorbed failure with a longer upstream hint is honored */
    v.hint_ms = 60 * SEC;
    or_cooldown_fail(&conf, &st, &v, 429, T0 + 7, T0 + 130, &res);
    or_is_int(st.until, T0 + 130 + 60 * SEC,
              "R-CD-4 absorbed failure still honors a longer hint");
    or_is_int(st.backoff_level, 3, "R-CD-4 ... without a level step");

    /* an attempt started after the burst was recorded counts again */
    v.hint_ms = OR_MSEC_NONE;
    or_cooldown_fail(&conf, &st, &v, 429, T0 + 70 * SEC, T0 + 71 * SEC,
                     &res);
    or_is_int(st.backoff_level, 4,
              "R-CD-4 a failure started after the cooldown counts");
    or_is_int(st.until, T0 + 71 * SEC + 24 * SEC,
              "R-CD-4 ... and waits base x 2^3");
}


static void
test_concurrency(void)
{
    or_verdict_t          v;
    or_conn_state_t       st;
    or_cooldown_conf_t    conf;
    or_cooldown_result_t  res;

    conf_for(&conf, OR_KIND_APIKEY);
    memset(&st, 0, sizeof(st));
    st.backoff_level = 3;
    st.failures = 3;

    v = verdict(OR_REASON_CONCURRENCY_LIMITED, OR_MSEC_NONE, OR_MSEC_NONE);
    or_cooldown_fail(&conf, &st, &v, 429, T0, T0, &res);
    or_is_int(res.cooldown_ms, 1 * SEC, "R-CD-5 concurrency limit: 1 s");
    or_is_int(st.until, T0 + 1 * SEC, "R-CD-5 until = now + 1 s");
    or_is_int(st.backoff_level, 3, "R-CD-5 backoff_level unchanged");
    or_is_int(st.failures, 3, "R-CD-5 not counted as a failure");
    or_is_int(res.skip_breaker, 1, "R-CD-5 provider breaker skipped");
    or_is_int(st.last_reason, OR_REASON_CONCURRENCY_LIMITED,
              "R-CD-5 reason concurrency_limited recorded");

    v.hint_ms = 7 * SEC;
    or_cooldown_fail(&conf, &st, &v, 429, T0 + 10, T0 + 10, &res);
    or_is_int(res.cooldown_ms, 7 * SEC, "R-CD-5 upstream hint wins");
    or_is_int(res.source, OR_CD_SRC_HINT, "R-CD-5 source hint");

    st.until = T0 + HOUR;
    v.hint_ms = OR_MSEC_NONE;
    or_cooldown_fail(&conf, &st, &v, 429, T0 + 20, T0 + 20, &res);
    or_is_int(st.until, T0 + HOUR,
              "R-CD-5 1 s never shortens a longer active cooldown");
}


static void
test_terminal(void)
{
    size_t                i;
    or_verdict_t          v;
    or_conn_state_t       st;
    or_cooldown_view_t    view;
    or_cooldown_conf_t    conf;
    or_cooldown_result_t  res;

    static const struct {
        or_reason_e  reason;
        const char  *name;
    } cases[] = {
        { OR_REASON_BANNED, "banned" },
        { OR_REASON_CREDITS_EXHAUSTED, "credits_exhausted" }
    };

    conf_for(&conf, OR_KIND_OAUTH);

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        memset(&st, 0, sizeof(st));
        fail(&conf, &st, OR_REASON_RATE_LIMIT_EXCEEDED, 429, T0, NULL);
        fail(&conf, &st, cases[i].reason, 403, T0 + 10, &res);

        or_is_int(res.action, OR_CD_TERMINAL, "R-CD-6 %s is terminal",
                  cases[i].name);
        or_cooldown_view(&st, T0 + 20, &view);
        or_is_str(view.test_status, cases[i].name,
                  "R-CD-6 test_status %s", cases[i].name);
        or_is_int(view.retry_after, -1, "R-CD-6 %s has no retry_after",
                  cases[i].name);

        fail(&conf, &st, OR_REASON_RATE_LIMIT_EXCEEDED, 429, T0 + MIN, &res);
        or_is_int(st.terminal, or_terminal_of_reason(cases[i].reason),
                  "R-CD-6 %s not overwritten by a transient cooldown",
                  cases[i].name);
        or_is_int(res.action, OR_CD_RECORDED,
                  "R-CD-6 transient failure on %s only recorded",
                  cases[i].name);

        or_ok(!or_cooldown_eligible(&st, T0 + 365 * DAY),
              "R-CD-6 %s never cleared by time", cases[i].name);
        or_is_int(or_cooldown_success(&st, T0 + 2 * MIN, T0 + 2 * MIN), 1,
                  "R-CD-7 success clears the transient part of %s",
                  cases[i].name);
        or_ok(!or_cooldown_eligible(&st, T0 + 2 * MIN),
              "R-CD-6 %s not cleared by a success", cases[i].name);

        or_is_int(or_cooldown_reset(&st), 1,
                  "R-CD-6 operator reset clears %s", cases[i].name);
        or_ok(or_cooldown_eligible(&st, T0 + 2 * MIN) && st.terminal == 0,
              "R-CD-6 %s eligible after operator reset", cases[i].name);
        or_is_int(or_cooldown_reset(&st), 0,
                  "R-CD-6 reset of a clean connection is a no-op");
    }

    /* terminal states are never absorbed, and banned outranks credits */
    memset(&st, 0, sizeof(st));
    v = verdict(OR_REASON_CREDITS_EXHAUSTED, OR_MSEC_NONE, OR_MSEC_NONE);
    or_cooldown_fail(&conf, &st, &v, 402, T0, T0 + 100, NULL);
    v.reason = OR_REASON_BANNED;
    or_cooldown_fail(&conf, &st, &v, 403, T0, T0 + 200, &res);
    or_is_int(st.terminal, OR_TERMINAL_BANNED,
              "R-CD-6 banned from a burst attempt is never absorbed");
    v.reason = OR_REASON_CREDITS_EXHAUSTED;
    or_cooldown_fail(&conf, &st, &v, 402, T0 + 300, T0 + 300, &res);
    or_is_int(st.terminal, OR_TERMINAL_BANNED,
              "R-CD-6 banned outranks credits_exhausted");
    or_is_str(or_terminal_name(OR_TERMINAL_EXPIRED), "expired",
              "R-CD-6 terminal name expired");

    /* a changed credential clears a terminal state like an admin reset */
    or_is_int(or_cooldown_reset(&st), 1,
              "R-CD-6 changed credential clears banned");
    or_ok(or_cooldown_eligible(&st, T0 + 400) && st.reset_epoch == 1,
          "R-CD-6 new credential: eligible, new reset epoch");

    /* no verdict: nothing happens */
    or_cooldown_fail(&conf, &st, NULL, 500, T0 + 500, T0 + 500, &res);
    or_ok(res.action == OR_CD_IGNORED && !res.changed,
          "R-CD-1 a missing verdict leaves the connection alone");
}


static void
test_expired(void)
{
    int                   i;
    or_conn_state_t       st;
    or_cooldown_conf_t    conf;
    or_cooldown_result_t  res;
    or_msec_t             now;

    static const or_msec_t  waits[] = { 5 * SEC, 10 * SEC, 20 * SEC };

    conf_for(&conf, OR_KIND_OAUTH);
    memset(&st, 0, sizeof(st));
    now = T0;

    for (i = 0; i < 3; i++) {
        fail(&conf, &st, OR_REASON_EXPIRED, 401, now, &res);
        or_is_int(res.action, OR_CD_COOLDOWN,
                  "R-CD-6 expired verdict %d: retry with backoff", i + 1);
        or_is_int(st.until - now, waits[i],
                  "R-CD-6 expired retry %d waits %lld ms", i + 1,
                  (long long) waits[i]);
        now = st.until;
    }

    fail(&conf, &st, OR_REASON_EXPIRED, 401, now, &res);
    or_is_int(res.action, OR_CD_TERMINAL,
              "R-CD-6 4th expired verdict (after 3 retries) is terminal");
    or_is_int(st.terminal, OR_TERMINAL_EXPIRED, "R-CD-6 terminal expired");
    or_ok(!or_cooldown_eligible(&st, now + 365 * DAY),
          "R-CD-6 expired never cleared by time");

    /* a success between expired verdicts restarts the count */
    memset(&st, 0, sizeof(st));
    now = T0;
    for (i = 0; i < 3; i++) {
        fail(&conf, &st, OR_REASON_EXPIRED, 401, now, NULL);
        now = st.until;
    }
    or_cooldown_success(&st, now, now);
    fail(&conf, &st, OR_REASON_EXPIRED, 401, now + 1, &res);
    or_is_int(res.action, OR_CD_COOLDOWN,
              "R-CD-6 a success in between restarts the 3 retries");
    or_is_int(st.expired_retries, 1, "R-CD-6 expired retry count 1");

    /* a burst of expired verdicts counts once */
    memset(&st, 0, sizeof(st));
    for (i = 0; i < 10; i++) {
        or_verdict_t  v;

        v = verdict(OR_REASON_EXPIRED, OR_MSEC_NONE, OR_MSEC_NONE);
        or_cooldown_fail(&conf, &st, &v, 401, T0, T0 + 100 + i, &res);
    }
    or_is_int(st.expired_retries, 1,
              "R-CD-4 a burst of 10 expired verdicts is one retry");
    or_is_int(st.terminal, OR_TERMINAL_NONE,
              "R-CD-6 a burst does not make expired terminal");
}


static void
test_rejected(void)
{
    int                   i;
    or_msec_t             now;
    or_conn_state_t       st;
    or_cooldown_conf_t    conf;
    or_cooldown_result_t  res;

    static const or_msec_t  waits[] = {
        5 * MIN, 10 * MIN, 20 * MIN, 40 * MIN, 60 * MIN, 60 * MIN, 60 * MIN
    };

    conf_for(&conf, OR_KIND_OAUTH);
    memset(&st, 0, sizeof(st));
    st.backoff_level = 2;
    now = T0;

    for (i = 0; i < (int) (sizeof(waits) / sizeof(waits[0])); i++) {
        fail(&conf, &st, OR_REASON_REQUEST_REJECTED, 403, now, &res);
        or_is_int(res.cooldown_ms, waits[i],
                  "R-CD-6 request_rejected %d: growing cooldown %lld ms, "
                  "capped at 1 h", i + 1, (long long) waits[i]);
        now = st.until;
    }

    or_is_int(st.terminal, OR_TERMINAL_NONE,
              "R-CD-6 request_rejected never bans");
    or_is_int(st.rejected_count, 7, "R-CD-6 request_rejected counted");
    or_is_int(st.backoff_level, 2,
              "R-CD-6 request_rejected leaves backoff_level alone");
    or_is_int(or_cooldown_rejected_ms(&conf, 100), 1 * HOUR,
              "R-CD-6 request_rejected ladder capped at 1 h");
}


static void
test_success(void)
{
    or_conn_state_t     st;
    or_cooldown_conf_t  conf;

    conf_for(&conf, OR_KIND_APIKEY);
    memset(&st, 0, sizeof(st));
    fail(&conf, &st, OR_REASON_RATE_LIMIT_EXCEEDED, 429, T0, NULL);
    fail(&conf, &st, OR_REASON_RATE_LIMIT_EXCEEDED, 429, T0 + MIN, NULL);

    or_is_int(or_cooldown_success(&st, T0 + MIN - 1, T0 + 2 * MIN), 0,
              "R-CD-7 success of an attempt in flight during the last "
              "failure clears nothing");
    or_is_int(st.backoff_level, 2, "R-CD-7 ... backoff_level kept");

    or_is_int(or_cooldown_success(&st, T0 + 2 * MIN, T0 + 2 * MIN + 5), 1,
              "R-CD-7 success clears the errors");
    or_is_int(st.backoff_level, 0, "R-CD-7 success clears backoff_level");
    or_is_int(st.until, 0, "R-CD-7 success clears rate_limited_until");
    or_is_int(st.last_status, 0, "R-CD-7 success clears error_code");
    or_is_int(st.last_reason, OR_REASON_NONE,
              "R-CD-7 success clears last_error_type");
    or_is_int(st.failures, 0, "R-CD-7 success clears failure counters");
    or_is_int(st.clear_epoch, 1, "R-CD-7 clearing starts a new epoch");
    or_is_int(or_cooldown_success(&st, T0 + 3 * MIN, T0 + 3 * MIN), 0,
              "R-CD-7 success on a clean connection changes nothing");
}


static void
test_stream_stall(void)
{
    or_conn_state_t       st;
    or_cooldown_conf_t    conf;
    or_cooldown_result_t  res;

    conf_for(&conf, OR_KIND_OAUTH);
    memset(&st, 0, sizeof(st));
    fail(&conf, &st, OR_REASON_STREAM_STALL, 200, T0, &res);
    or_is_int(res.action, OR_CD_RECORDED, "R-CD-8 stream stall recorded");
    or_is_int(st.until, 0, "R-CD-8 stream stall sets no cooldown");
    or_is_int(st.last_reason, OR_REASON_STREAM_STALL,
              "R-CD-8 stream stall error recorded");
    or_ok(or_cooldown_eligible(&st, T0), "R-CD-8 stalled one stays eligible");

    conf.stream_stall_cooldown = 1;
    fail(&conf, &st, OR_REASON_STREAM_STALL, 200, T0 + 10, &res);
    or_is_int(res.action, OR_CD_COOLDOWN,
              "R-CD-8 stream_stall_cooldown on: cooldown");
    or_is_int(st.until, T0 + 10 + 5 * SEC, "R-CD-8 ... of the base 5 s");
}


static void
test_explicit(void)
{
    or_verdict_t          v;
    or_conn_state_t       st;
    or_cooldown_conf_t    conf;
    or_cooldown_result_t  res;

    conf_for(&conf, OR_KIND_APIKEY);
    conf.override_ms = 40 * SEC;

    memset(&st, 0, sizeof(st));
    v = verdict(OR_REASON_RATE_LIMIT_EXCEEDED, 30 * MIN, 20 * SEC);
    or_cooldown_fail(&conf, &st, &v, 429, T0, T0, &res);
    or_is_int(res.cooldown_ms, 30 * MIN,
              "R-CLASS-4 an explicit rule keeps its exact cooldown");
    or_is_int(res.source, OR_CD_SRC_EXPLICIT, "R-CLASS-4 source explicit");

    v = verdict(OR_REASON_QUOTA_EXHAUSTED, 10 * MIN, OR_MSEC_NONE);
    or_cooldown_fail(&conf, &st, &v, 429, T0 + MIN, T0 + MIN, &res);
    or_is_int(st.until, T0 + 30 * MIN,
              "R-CLASS-4 never shortens a longer active cooldown");

    v = verdict(OR_REASON_BANNED, OR_MSEC_NONE, OR_MSEC_NONE);
    or_cooldown_fail(&conf, &st, &v, 403, T0 + 2 * MIN, T0 + 2 * MIN, NULL);
    v = verdict(OR_REASON_QUOTA_EXHAUSTED, 1 * DAY, OR_MSEC_NONE);
    or_cooldown_fail(&conf, &st, &v, 429, T0 + 3 * MIN, T0 + 3 * MIN, &res);
    or_is_int(st.terminal, OR_TERMINAL_BANNED,
              "R-CLASS-4 an explicit cooldown never overwrites a terminal "
              "state");

    memset(&st, 0, sizeof(st));
    v = verdict(OR_REASON_BAD_REQUEST, OR_MSEC_NONE, OR_MSEC_NONE);
    or_cooldown_fail(&conf, &st, &v, 400, T0, T0, &res);
    or_ok(res.action == OR_CD_IGNORED && !res.changed,
          "R-CD-1 a plain 400 does not touch the connection");

    v.cooldown_ms = 5 * MIN;
    or_cooldown_fail(&conf, &st, &v, 400, T0 + 1, T0 + 1, &res);
    or_is_int(st.until, T0 + 1 + 5 * MIN,
              "R-CLASS-5 a rule matching a 400 cools the connection");
}


/*
 * Time arithmetic saturates: a burst mark at the end of time (a record
 * as far ahead as a state may claim) absorbs a failure without a signed
 * overflow (UBSan aborts the ASan build on one), and the cooldown ends
 * at the largest time instead of wrapping into the past.
 */
static void
test_saturated(void)
{
    or_verdict_t          v;
    or_conn_state_t       st;
    or_cooldown_conf_t    conf;
    or_cooldown_result_t  res;

    conf_for(&conf, OR_KIND_APIKEY);
    memset(&st, 0, sizeof(st));
    st.mark_at = INT64_MAX - 5;
    st.until = INT64_MAX - 5;
    v = verdict(OR_REASON_RATE_LIMIT_EXCEEDED, OR_MSEC_NONE, OR_MSEC_NONE);

    or_cooldown_fail(&conf, &st, &v, 429, T0, T0 + 100, &res);
    or_is_int(res.action, OR_CD_ABSORBED,
              "a failure before a mark at the end of time is absorbed");
    or_ok(st.until == INT64_MAX,
          "... and its cooldown saturates at the largest time");
}
