/*
 * Copyright (C) ngx_omniroute authors
 *
 * Provider circuit breaker: SPEC R-CB-1 .. R-CB-6.
 */


#include <string.h>

#include "or_test.h"
#include "or_breaker.h"


#define SEC  1000
#define MIN  60000
#define T0   1000000000LL       /* an arbitrary "now" */


typedef struct {
    or_kind_e   kind;
    int         degrade;
    int         open;
    or_msec_t   reset;
    int         gate_n;
    or_msec_t   gate_window;
    or_msec_t   gate_cooldown;
} profile_case_t;


static void conf_for(or_breaker_conf_t *conf, or_kind_e kind);
static void fail_n(or_breaker_conf_t *conf, or_breaker_t *cb, int n,
    or_reason_e reason, or_msec_t now);
static void test_profiles(void);
static void test_overrides(void);
static void test_counts(void);
static void test_lazy_recovery(void);
static void test_probe_backoff(void);
static void test_stale_outcomes(void);
static void test_degraded_recovery(void);
static void test_quiet_period(void);
static void test_window_gate(void);
static void test_conf_check(void);
static void test_stored(void);


static const profile_case_t  profiles[] = {
    { OR_KIND_OAUTH,  5,  8, 60 * SEC, 10, 15 * MIN,  5 * MIN },
    { OR_KIND_APIKEY, 7, 12, 30 * SEC, 15, 30 * MIN, 10 * MIN },
    { OR_KIND_LOCAL,  1,  2, 15 * SEC,  2,  5 * MIN,  1 * MIN }
};


int
main(void)
{
    test_profiles();
    test_overrides();
    test_counts();
    test_lazy_recovery();
    test_probe_backoff();
    test_stale_outcomes();
    test_degraded_recovery();
    test_quiet_period();
    test_window_gate();
    test_conf_check();
    test_stored();

    return or_done();
}


static void
conf_for(or_breaker_conf_t *conf, or_kind_e kind)
{
    or_breaker_conf_init(conf);
    or_breaker_conf_fill(conf, kind);
}


static void
fail_n(or_breaker_conf_t *conf, or_breaker_t *cb, int n, or_reason_e reason,
    or_msec_t now)
{
    int  i;

    for (i = 0; i < n; i++) {
        or_breaker_failure(conf, cb, reason, now, now, NULL);
    }
}


static void
test_profiles(void)
{
    size_t                  i;
    const char             *k;
    or_breaker_t            cb;
    or_breaker_conf_t       conf;
    or_breaker_result_t     res;
    const profile_case_t   *p;

    for (i = 0; i < sizeof(profiles) / sizeof(profiles[0]); i++) {
        p = &profiles[i];
        k = or_kind_name(p->kind);
        conf_for(&conf, p->kind);

        or_is_int(conf.degrade_threshold, p->degrade,
                  "R-CB-2 %s degrades after %d failures", k, p->degrade);
        or_is_int(conf.open_threshold, p->open,
                  "R-CB-2 %s opens after %d failures", k, p->open);
        or_is_int(conf.reset_ms, p->reset,
                  "R-CB-2 %s reset timeout %lld ms", k,
                  (long long) p->reset);
        or_is_int(conf.gate_enabled, 0, "R-CB-6 %s window gate off by "
                  "default", k);
        or_is_int(conf.gate_threshold, p->gate_n,
                  "R-CB-6 %s gate trips after %d failures", k, p->gate_n);
        or_is_int(conf.gate_window_ms, p->gate_window,
                  "R-CB-6 %s gate window", k);
        or_is_int(conf.gate_cooldown_ms, p->gate_cooldown,
                  "R-CB-6 %s gate cooldown", k);
        or_is_int(conf.max_backoff_multiplier, 16,
                  "R-CB-4 %s max_backoff_multiplier default 16", k);
        or_ok(or_breaker_conf_check(&conf) == NULL,
              "R-CB-2 %s defaults are valid", k);

        memset(&cb, 0, sizeof(cb));
        or_is_int(or_breaker_state(&conf, &cb, T0), OR_CB_CLOSED,
                  "R-CB-1 %s zeroed state is CLOSED", k);

        fail_n(&conf, &cb, p->degrade - 1, OR_REASON_SERVER_ERROR, T0);
        or_is_int(cb.state, OR_CB_CLOSED,
                  "R-CB-2 %s still CLOSED after %d failures", k,
                  p->degrade - 1);

        or_breaker_failure(&conf, &cb, OR_REASON_SERVER_ERROR, T0, T0,
                           &res);
        or_is_int(cb.state, OR_CB_DEGRADED,
                  "R-CB-1 %s DEGRADED at failure %d", k, p->degrade);
        or_ok(res.changed && res.from == OR_CB_CLOSED
              && res.to == OR_CB_DEGRADED,
              "R-CB-1 %s result reports CLOSED -> DEGRADED", k);
        or_ok(or_breaker_eligible(&conf, &cb, T0),
              "R-CB-1 %s DEGRADED still admits traffic", k);

        fail_n(&conf, &cb, p->open - p->degrade - 1, OR_REASON_TIMEOUT, T0);
        or_is_int(cb.state, OR_CB_DEGRADED,
                  "R-CB-2 %s not OPEN after %d failures", k, p->open - 1);

        or_breaker_failure(&conf, &cb, OR_REASON_TRANSPORT, T0, T0, &res);
        or_is_int(cb.state, OR_CB_OPEN,
                  "R-CB-2 %s OPEN after %d failures", k, p->open);
        or_is_int(cb.open_until, T0 + p->reset,
                  "R-CB-2 %s OPEN holds one reset timeout", k);
        or_ok(!or_breaker_eligible(&conf, &cb, T0),
              "R-CB-1 %s OPEN skips the provider", k);
        or_is_int(or_breaker_retry_after(&conf, &cb, T0 + 1000),
                  p->reset - 1000, "R-CB-4 %s retry_after while OPEN", k);
    }
}


static void
test_overrides(void)
{
    or_breaker_t       cb;
    or_breaker_conf_t  conf;

    or_breaker_conf_init(&conf);
    conf.open_threshold = 4;
    conf.reset_ms = 10 * SEC;
    conf.max_backoff_multiplier = 4;
    or_breaker_conf_fill(&conf, OR_KIND_OAUTH);

    or_is_int(conf.open_threshold, 4, "R-CB-2 open threshold overridable");
    or_is_int(conf.degrade_threshold, 2,
              "R-CB-2 degrade threshold derived round(0.6 x 4) = 2");
    or_is_int(conf.reset_ms, 10 * SEC, "R-CB-2 reset timeout overridable");
    or_is_int(conf.probe_timeout_ms, 10 * SEC,
              "R-CB-4 probe timeout defaults to the reset timeout");

    memset(&cb, 0, sizeof(cb));
    fail_n(&conf, &cb, 4, OR_REASON_SERVER_ERROR, T0);
    or_is_int(cb.state, OR_CB_OPEN, "R-CB-2 overridden profile opens at 4");
    or_is_int(cb.open_until, T0 + 10 * SEC,
              "R-CB-2 overridden reset timeout used");

    or_breaker_conf_init(&conf);
    conf.degrade_threshold = 3;
    or_breaker_conf_fill(&conf, OR_KIND_APIKEY);
    or_is_int(conf.degrade_threshold, 3,
              "R-CB-2 degrade threshold overridable");
    or_is_int(conf.open_threshold, 12,
              "R-CB-2 unset open threshold keeps the apikey default");

    /* the derivation reproduces the three profiles */
    or_breaker_conf_init(&conf);
    conf.open_threshold = 8;
    or_breaker_conf_fill(&conf, OR_KIND_LOCAL);
    or_is_int(conf.degrade_threshold, 5, "R-CB-2 derived degrade of 8 is 5");
    or_breaker_conf_init(&conf);
    conf.open_threshold = 12;
    or_breaker_conf_fill(&conf, OR_KIND_LOCAL);
    or_is_int(conf.degrade_threshold, 7,
              "R-CB-2 derived degrade of 12 is 7");
    or_breaker_conf_init(&conf);
    conf.open_threshold = 2;
    or_breaker_conf_fill(&conf, OR_KIND_OAUTH);
    or_is_int(conf.degrade_threshold, 1,
              "R-CB-2 local derived degrade of 2 is 1");
}


static void
test_counts(void)
{
    size_t        i;
    or_verdict_t  v;

    static const struct {
        int             status;
        or_transport_e  transport;
        int             counts;
    } cases[] = {
        { 408, OR_TRANSPORT_OK, 1 },
        { 500, OR_TRANSPORT_OK, 1 },
        { 502, OR_TRANSPORT_OK, 1 },
        { 503, OR_TRANSPORT_OK, 1 },
        { 504, OR_TRANSPORT_OK, 1 },
        { 0, OR_TRANSPORT_CONNECT_ERROR, 1 },
        { 0, OR_TRANSPORT_RESET, 1 },
        { 0, OR_TRANSPORT_TIMEOUT, 1 },
        { 401, OR_TRANSPORT_OK, 0 },
        { 403, OR_TRANSPORT_OK, 0 },
        { 429, OR_TRANSPORT_OK, 0 },
        { 400, OR_TRANSPORT_OK, 0 },
        { 402, OR_TRANSPORT_OK, 0 },
        { 404, OR_TRANSPORT_OK, 0 },
        { 501, OR_TRANSPORT_OK, 0 },
        { 200, OR_TRANSPORT_OK, 0 }
    };

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        or_is_int(or_breaker_counts(cases[i].status, cases[i].transport),
                  cases[i].counts,
                  "R-CB-3 status %d transport %d %s the breaker",
                  cases[i].status, (int) cases[i].transport,
                  cases[i].counts ? "counts for" : "never counts for");
    }

    memset(&v, 0, sizeof(v));
    v.reason = OR_REASON_SERVER_ERROR;
    v.counts_for_breaker = 0;
    or_is_int(or_breaker_counts_verdict(&v, 503, OR_TRANSPORT_OK), 0,
              "R-CB-3 verdict counts_for_breaker=0 is authoritative");
    v.counts_for_breaker = 1;
    or_is_int(or_breaker_counts_verdict(&v, 503, OR_TRANSPORT_OK), 1,
              "R-CB-3 verdict counts_for_breaker=1 is authoritative");
    v.reason = OR_REASON_CONCURRENCY_LIMITED;
    or_is_int(or_breaker_counts_verdict(&v, 429, OR_TRANSPORT_OK), 0,
              "R-CB-3 concurrency-limit 429 skips the provider breaker");
    or_is_int(or_breaker_counts_verdict(NULL, 504, OR_TRANSPORT_OK), 1,
              "R-CB-3 no verdict: status 504 decides");
}


static void
test_lazy_recovery(void)
{
    or_msec_t          wait;
    or_breaker_t       cb, before;
    or_cb_admit_e      a;
    or_breaker_conf_t  conf;

    conf_for(&conf, OR_KIND_APIKEY);
    memset(&cb, 0, sizeof(cb));
    fail_n(&conf, &cb, 12, OR_REASON_SERVER_ERROR, T0);
    or_is_int(cb.state, OR_CB_OPEN, "R-CB-4 apikey OPEN after 12 failures");

    or_is_int(or_breaker_state(&conf, &cb, T0 + 30 * SEC - 1), OR_CB_OPEN,
              "R-CB-4 still OPEN 1 ms before the 30 s reset timeout");
    before = cb;
    or_is_int(or_breaker_state(&conf, &cb, T0 + 30 * SEC), OR_CB_HALF_OPEN,
              "R-CB-4 a read after 30 s sees HALF_OPEN (no timer)");
    or_ok(or_breaker_equal(&before, &cb),
          "R-CB-4 or_breaker_state() does not modify the stored state");

    or_breaker_normalize(&conf, &cb, T0 + 30 * SEC);
    or_is_int(cb.state, OR_CB_HALF_OPEN,
              "R-CB-4 normalize writes HALF_OPEN into the copy");
    or_ok(or_breaker_eligible(&conf, &cb, T0 + 30 * SEC),
          "R-CB-4 HALF_OPEN without a probe is eligible for planning");

    a = or_breaker_admit(&conf, &cb, T0 + 30 * SEC, &wait);
    or_is_int(a, OR_CB_PROBE, "R-CB-4 HALF_OPEN admits a probe");
    or_is_int(cb.probe_until, T0 + 60 * SEC,
              "R-CB-4 probe deadline is now + probe timeout");

    a = or_breaker_admit(&conf, &cb, T0 + 31 * SEC, &wait);
    or_is_int(a, OR_CB_DENY, "R-CB-4 HALF_OPEN admits a single probe");
    or_is_int(wait, 29 * SEC, "R-CB-4 second caller waits for the probe");
    or_ok(!or_breaker_eligible(&conf, &cb, T0 + 31 * SEC),
          "R-CB-4 probe in flight: not eligible for planning");

    a = or_breaker_admit(&conf, &cb, T0 + 60 * SEC, &wait);
    or_is_int(a, OR_CB_PROBE,
              "R-CB-4 a lost probe frees the slot at its deadline");

    or_breaker_success(&conf, &cb, T0 + 60 * SEC, T0 + 61 * SEC, NULL);
    or_is_int(cb.state, OR_CB_CLOSED, "R-CB-4 probe success -> CLOSED");
    or_is_int(cb.failures, 0, "R-CB-4 CLOSED after probe has no failures");
    or_is_int(cb.epoch, 1, "R-CB-4 returning to CLOSED starts a new epoch");

    a = or_breaker_admit(&conf, &cb, T0 + 61 * SEC, &wait);
    or_is_int(a, OR_CB_ALLOW, "R-CB-4 CLOSED admits normally");
    or_is_int(wait, 0, "R-CB-4 CLOSED has no retry_after");
}


static void
test_probe_backoff(void)
{
    int                i;
    or_msec_t          now, hold;
    or_breaker_t       cb;
    or_cb_admit_e      a;
    or_breaker_conf_t  conf;

    static const int  mult[] = { 1, 2, 4, 8, 16, 16, 16 };

    conf_for(&conf, OR_KIND_OAUTH);
    memset(&cb, 0, sizeof(cb));
    now = T0;
    fail_n(&conf, &cb, 8, OR_REASON_SERVER_ERROR, now);

    for (i = 0; i < (int) (sizeof(mult) / sizeof(mult[0])); i++) {
        hold = 60 * SEC * mult[i];
        or_is_int(cb.open_until - cb.opened_at, hold,
                  "R-CB-4 OPEN cycle %d holds reset x %d (%lld ms)", i,
                  mult[i], (long long) hold);

        now = cb.open_until;
        a = or_breaker_admit(&conf, &cb, now, NULL);
        or_is_int(a, OR_CB_PROBE, "R-CB-4 cycle %d: probe admitted", i);

        or_breaker_failure(&conf, &cb, OR_REASON_SERVER_ERROR, now,
                           now + 10, NULL);
        or_is_int(cb.state, OR_CB_OPEN,
                  "R-CB-4 cycle %d: probe failure -> OPEN again", i);
    }

    or_is_int(or_breaker_hold_ms(&conf, &cb, 100), 16 * 60 * SEC,
              "R-CB-4 hold capped at reset x max_backoff_multiplier");

    conf.max_backoff_multiplier = 3;
    or_is_int(or_breaker_hold_ms(&conf, &cb, 5), 3 * 60 * SEC,
              "R-CB-4 a non-power-of-two multiplier caps exactly");
    conf.max_backoff_multiplier = 16;

    /* success of a probe resets the multiplier */
    now = cb.open_until;
    or_breaker_admit(&conf, &cb, now, NULL);
    or_breaker_success(&conf, &cb, now, now + 5, NULL);
    fail_n(&conf, &cb, 8, OR_REASON_SERVER_ERROR, now + 10);
    or_is_int(cb.open_until - cb.opened_at, 60 * SEC,
              "R-CB-4 after a probe success the next OPEN is one reset");

    /* cooldown_by_kind replaces the hold for that failure kind */
    conf.cooldown_by_reason[OR_REASON_TIMEOUT] = 120 * SEC;
    memset(&cb, 0, sizeof(cb));
    fail_n(&conf, &cb, 8, OR_REASON_TIMEOUT, T0);
    or_is_int(cb.open_until, T0 + 120 * SEC,
              "R-CB-5 cooldown_by_kind sets the OPEN hold of that kind");
}


static void
test_stale_outcomes(void)
{
    or_breaker_t         cb, before;
    or_breaker_conf_t    conf;
    or_breaker_result_t  res;

    conf_for(&conf, OR_KIND_APIKEY);
    memset(&cb, 0, sizeof(cb));
    fail_n(&conf, &cb, 12, OR_REASON_SERVER_ERROR, T0);

    before = cb;
    or_breaker_failure(&conf, &cb, OR_REASON_SERVER_ERROR, T0 - 500,
                       T0 + 100, &res);
    or_ok(or_breaker_equal(&before, &cb) && !res.changed && !res.counted,
          "R-CB-4 failure of an attempt started before OPEN is ignored");

    or_breaker_success(&conf, &cb, T0 - 500, T0 + 200, &res);
    or_is_int(cb.state, OR_CB_OPEN,
              "R-CB-4 success of an attempt started before OPEN does not "
              "close");

    or_breaker_success(&conf, &cb, T0 + 40 * SEC, T0 + 41 * SEC, &res);
    or_is_int(cb.state, OR_CB_CLOSED,
              "R-CB-4 success of an attempt started after OPEN closes");
}


static void
test_degraded_recovery(void)
{
    int                  i;
    or_breaker_t         cb;
    or_breaker_conf_t    conf;
    or_breaker_result_t  res;

    conf_for(&conf, OR_KIND_APIKEY);
    or_is_int(conf.recovery_successes, 3,
              "R-CB-5 recovery_successes default 3");

    memset(&cb, 0, sizeof(cb));
    fail_n(&conf, &cb, 9, OR_REASON_SERVER_ERROR, T0);
    or_is_int(cb.state, OR_CB_DEGRADED, "R-CB-5 apikey DEGRADED at 9");

    or_breaker_success(&conf, &cb, T0, T0 + 1, NULL);
    or_breaker_success(&conf, &cb, T0, T0 + 2, NULL);
    or_is_int(cb.state, OR_CB_DEGRADED,
              "R-CB-5 two successes keep DEGRADED");
    or_is_int(cb.failures, 7, "R-CB-5 each success removes one failure");

    or_breaker_failure(&conf, &cb, OR_REASON_SERVER_ERROR, T0, T0 + 3, NULL);
    or_is_int(cb.successes, 0, "R-CB-5 a failure restarts the streak");

    for (i = 0; i < 2; i++) {
        or_breaker_success(&conf, &cb, T0, T0 + 4 + i, NULL);
    }

    or_is_int(cb.state, OR_CB_DEGRADED,
              "R-CB-5 streak of 2 after a failure keeps DEGRADED");
    or_breaker_success(&conf, &cb, T0, T0 + 10, &res);
    or_is_int(cb.state, OR_CB_CLOSED,
              "R-CB-5 DEGRADED -> CLOSED after 3 successes in a row");
    or_ok(res.from == OR_CB_DEGRADED && res.to == OR_CB_CLOSED,
          "R-CB-5 result reports DEGRADED -> CLOSED");
    or_is_int(cb.failures, 0, "R-CB-5 recovery clears failures");

    /* local: one failure degrades, one success recovers (count 0) */
    conf_for(&conf, OR_KIND_LOCAL);
    memset(&cb, 0, sizeof(cb));
    fail_n(&conf, &cb, 1, OR_REASON_TRANSPORT, T0);
    or_is_int(cb.state, OR_CB_DEGRADED, "R-CB-2 local DEGRADED at 1");
    or_breaker_success(&conf, &cb, T0, T0 + 1, NULL);
    or_is_int(cb.state, OR_CB_CLOSED,
              "R-CB-5 DEGRADED -> CLOSED when the failure count reaches 0");

    /* admin "connection test" reset */
    conf_for(&conf, OR_KIND_OAUTH);
    memset(&cb, 0, sizeof(cb));
    fail_n(&conf, &cb, 6, OR_REASON_SERVER_ERROR, T0);
    or_is_int(or_breaker_reset(&cb), 1, "R-CB-5 admin reset changes state");
    or_is_int(cb.state, OR_CB_CLOSED, "R-CB-5 admin reset -> CLOSED");
    or_is_int(or_breaker_reset(&cb), 0,
              "R-CB-5 admin reset of a clean breaker is a no-op");

    /* CLOSED: a success removes one failure (gradual recovery) */
    memset(&cb, 0, sizeof(cb));
    fail_n(&conf, &cb, 4, OR_REASON_SERVER_ERROR, T0);
    or_breaker_success(&conf, &cb, T0, T0 + 1, NULL);
    or_is_int(cb.failures, 3, "R-CB-5 CLOSED success decays the count");
    fail_n(&conf, &cb, 1, OR_REASON_SERVER_ERROR, T0 + 2);
    or_is_int(cb.state, OR_CB_CLOSED,
              "R-CB-2 oauth 4 net failures stay CLOSED");
    fail_n(&conf, &cb, 1, OR_REASON_SERVER_ERROR, T0 + 3);
    or_is_int(cb.state, OR_CB_DEGRADED,
              "R-CB-2 oauth 5 net failures degrade");
}


static void
test_quiet_period(void)
{
    or_msec_t          t;
    or_breaker_t       cb;
    or_breaker_conf_t  conf;

    conf_for(&conf, OR_KIND_OAUTH);
    memset(&cb, 0, sizeof(cb));
    fail_n(&conf, &cb, 5, OR_REASON_SERVER_ERROR, T0);

    or_is_int(or_breaker_quiet_ms(&conf, &cb), 16 * 60 * SEC,
              "R-CB-5 quiet period = reset x max_backoff_multiplier");

    t = T0 + 16 * 60 * SEC;
    or_is_int(or_breaker_state(&conf, &cb, t - 1), OR_CB_DEGRADED,
              "R-CB-5 DEGRADED 1 ms before the quiet period ends");
    or_is_int(or_breaker_state(&conf, &cb, t), OR_CB_CLOSED,
              "R-CB-5 a read steps a stale DEGRADED back to CLOSED");

    /* a new failure restarts the quiet period */
    or_breaker_failure(&conf, &cb, OR_REASON_SERVER_ERROR, t - 10, t - 10,
                       NULL);
    or_is_int(or_breaker_state(&conf, &cb, t), OR_CB_DEGRADED,
              "R-CB-5 a new failure keeps DEGRADED");

    /* cooldown_by_kind: longest hold of the last kind, >= one reset */
    conf.cooldown_by_reason[OR_REASON_TIMEOUT] = 5 * MIN;
    memset(&cb, 0, sizeof(cb));
    fail_n(&conf, &cb, 5, OR_REASON_TIMEOUT, T0);
    or_is_int(or_breaker_quiet_ms(&conf, &cb), 5 * MIN,
              "R-CB-5 quiet period uses cooldown_by_kind of the last kind");
    or_is_int(or_breaker_state(&conf, &cb, T0 + 5 * MIN), OR_CB_CLOSED,
              "R-CB-5 stale DEGRADED after cooldown_by_kind");

    conf.cooldown_by_reason[OR_REASON_TIMEOUT] = 10 * SEC;
    or_is_int(or_breaker_quiet_ms(&conf, &cb), 60 * SEC,
              "R-CB-5 quiet period is at least one reset timeout");

    /* CLOSED failures below the threshold are forgotten too */
    conf_for(&conf, OR_KIND_OAUTH);
    memset(&cb, 0, sizeof(cb));
    fail_n(&conf, &cb, 4, OR_REASON_SERVER_ERROR, T0);
    or_breaker_failure(&conf, &cb, OR_REASON_SERVER_ERROR, T0 + 16 * MIN,
                       T0 + 16 * MIN, NULL);
    or_is_int(cb.failures, 1,
              "R-CB-5 failures older than the quiet period are forgotten");
    or_is_int(cb.state, OR_CB_CLOSED, "R-CB-5 so one new failure stays "
              "CLOSED");
}


static void
test_window_gate(void)
{
    int                  i;
    size_t               k;
    or_msec_t            wait, now;
    or_breaker_t         cb;
    or_breaker_conf_t    conf;
    or_breaker_result_t  res;
    const char          *name;

    for (k = 0; k < sizeof(profiles) / sizeof(profiles[0]); k++) {
        name = or_kind_name(profiles[k].kind);

        or_breaker_conf_init(&conf);
        conf.gate_enabled = 1;
        conf.open_threshold = 1000;         /* keep the breaker out */
        conf.degrade_threshold = 1000;
        or_breaker_conf_fill(&conf, profiles[k].kind);

        memset(&cb, 0, sizeof(cb));
        now = T0;

        /* n - 1 failures spread over the window: not cooling down */
        for (i = 0; i < profiles[k].gate_n - 1; i++) {
            or_breaker_failure(&conf, &cb, OR_REASON_SERVER_ERROR, now, now,
                               &res);
            now += profiles[k].gate_window / profiles[k].gate_n;
        }

        or_ok(or_breaker_eligible(&conf, &cb, now),
              "R-CB-6 %s below %d failures is not cooling down", name,
              profiles[k].gate_n);

        or_breaker_failure(&conf, &cb, OR_REASON_SERVER_ERROR, now, now,
                           &res);
        or_ok(res.gate_tripped, "R-CB-6 %s %d failures in the window trip",
              name, profiles[k].gate_n);
        or_ok(or_breaker_admit(&conf, &cb, now, &wait) == OR_CB_DENY,
              "R-CB-6 %s gate denies admission", name);
        or_is_int(wait, profiles[k].gate_cooldown,
                  "R-CB-6 %s gate cools down for %lld ms", name,
                  (long long) profiles[k].gate_cooldown);
        or_ok(or_breaker_eligible(&conf, &cb,
                                  now + profiles[k].gate_cooldown),
              "R-CB-6 %s eligible again after the gate cooldown", name);
        or_is_int(cb.state, OR_CB_CLOSED,
                  "R-CB-6 %s gate is independent of breaker state", name);

        /* n failures, but the first outside the window */
        memset(&cb, 0, sizeof(cb));
        now = T0;
        or_breaker_failure(&conf, &cb, OR_REASON_SERVER_ERROR, now, now,
                           NULL);
        now += profiles[k].gate_window + 1;
        for (i = 0; i < profiles[k].gate_n - 1; i++) {
            or_breaker_failure(&conf, &cb, OR_REASON_SERVER_ERROR, now + i,
                               now + i, &res);
        }
        or_ok(!res.gate_tripped && or_breaker_eligible(&conf, &cb, now + i),
              "R-CB-6 %s failures outside the window do not count", name);

        /* a success clears the window */
        memset(&cb, 0, sizeof(cb));
        now = T0;
        for (i = 0; i < profiles[k].gate_n - 1; i++) {
            or_breaker_failure(&conf, &cb, OR_REASON_SERVER_ERROR, now + i,
                               now + i, NULL);
        }
        or_breaker_success(&conf, &cb, now + 100, now + 100, NULL);
        or_is_int(cb.ring_len, 0, "R-CB-6 %s success clears the window",
                  name);
        or_breaker_failure(&conf, &cb, OR_REASON_SERVER_ERROR, now + 200,
                           now + 200, &res);
        or_ok(!res.gate_tripped || profiles[k].gate_n == 1,
              "R-CB-6 %s after a success one failure does not trip", name);
    }

    /* off by default: 10 oauth failures do not gate */
    or_breaker_conf_init(&conf);
    conf.open_threshold = 1000;
    conf.degrade_threshold = 1000;
    or_breaker_conf_fill(&conf, OR_KIND_OAUTH);
    memset(&cb, 0, sizeof(cb));
    fail_n(&conf, &cb, 10, OR_REASON_SERVER_ERROR, T0);
    or_ok(or_breaker_eligible(&conf, &cb, T0) && cb.gate_until == 0,
          "R-CB-6 window gate is off by default");
}


static void
test_conf_check(void)
{
    or_breaker_conf_t  conf;

    conf_for(&conf, OR_KIND_OAUTH);
    conf.degrade_threshold = 9;
    or_ok(or_breaker_conf_check(&conf) != NULL,
          "R-CB-2 degrade threshold above open threshold is rejected");

    conf_for(&conf, OR_KIND_OAUTH);
    conf.max_backoff_multiplier = 0;
    or_ok(or_breaker_conf_check(&conf) != NULL,
          "R-CB-4 max_backoff_multiplier 0 is rejected");

    conf_for(&conf, OR_KIND_OAUTH);
    conf.gate_threshold = 33;
    or_ok(or_breaker_conf_check(&conf) != NULL,
          "R-CB-6 gate threshold above the ring size is rejected");

    conf_for(&conf, OR_KIND_OAUTH);
    conf.reset_ms = 0;
    or_ok(or_breaker_conf_check(&conf) != NULL,
          "R-CB-2 zero reset timeout is rejected");

    or_is_str(or_breaker_state_name(OR_CB_HALF_OPEN), "HALF_OPEN",
              "R-CB-1 state names");
    or_is_str(or_breaker_state_name(OR_CB_DEGRADED), "DEGRADED",
              "R-CB-1 state name DEGRADED");
}


/* a result tells the state as stored from the state time made of it */

static void
test_stored(void)
{
    or_msec_t            now;
    or_breaker_t         cb;
    or_breaker_conf_t    conf;
    or_breaker_result_t  res;

    conf_for(&conf, OR_KIND_LOCAL);
    memset(&cb, 0, sizeof(cb));
    now = 1000000;

    fail_n(&conf, &cb, 2, OR_REASON_SERVER_ERROR, now);
    or_is_int(cb.state, OR_CB_OPEN, "stored: OPEN after 2 local failures");

    or_breaker_failure(&conf, &cb, OR_REASON_SERVER_ERROR, now - 1, now + 10,
                       &res);
    or_ok(res.stored == OR_CB_OPEN && res.from == OR_CB_OPEN,
          "stored: a stale failure while OPEN: stored and from alike");

    now += conf.reset_ms;

    or_breaker_failure(&conf, &cb, OR_REASON_SERVER_ERROR, now, now, &res);
    or_ok(res.stored == OR_CB_OPEN && res.from == OR_CB_HALF_OPEN
          && res.to == OR_CB_OPEN && res.changed,
          "stored: after open_until, OPEN stored, HALF_OPEN read, the "
          "failure re-opens");

    now += or_breaker_hold_ms(&conf, &cb, cb.open_cycles);

    or_breaker_success(&conf, &cb, now, now, &res);
    or_ok(res.stored == OR_CB_OPEN && res.from == OR_CB_HALF_OPEN
          && res.to == OR_CB_CLOSED,
          "stored: a success after the hold: OPEN -> HALF_OPEN -> CLOSED");

    or_breaker_success(&conf, &cb, now, now, &res);
    or_ok(res.stored == OR_CB_CLOSED && res.from == OR_CB_CLOSED,
          "stored: CLOSED stays");
}
