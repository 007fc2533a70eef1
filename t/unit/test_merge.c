/*
 * Copyright (C) ngx_omniroute authors
 *
 * Merge properties (R-CD-4, R-CLUSTER-2): random event sequences from a
 * seeded PRNG build states on several "nodes"; the state merges must be
 * commutative, associative and idempotent, duplicate events must be
 * harmless, and a burst of concurrent 429s must step backoff_level once,
 * whichever nodes see which failures and in whatever order they merge.
 */


#include <string.h>

#include "or_test.h"
#include "or_breaker.h"
#include "or_cooldown.h"
#include "or_lockout.h"


#define SEC    1000LL
#define MIN    (60 * SEC)
#define T0     1000000000LL
#define ITERS  20000
#define HOUR_MS  (60 * MIN)


typedef struct {
    uint64_t  s;
} rng_t;


static uint64_t rnd(rng_t *r);
static unsigned rnd_below(rng_t *r, unsigned n);
static or_msec_t rnd_msec(rng_t *r, or_msec_t max);

static void cd_event(rng_t *r, const or_cooldown_conf_t *conf,
    or_conn_state_t *st, or_msec_t *now);
static void cd_state(rng_t *r, const or_cooldown_conf_t *conf,
    const or_conn_state_t *from, or_conn_state_t *st, or_msec_t *now,
    int events);
static void cd_conf(rng_t *r, or_cooldown_conf_t *conf);
static void test_cd_laws(void);
static void test_cd_duplicates(void);
static void test_cd_burst(void);
static void test_cd_rules(void);

static void cb_event(rng_t *r, const or_breaker_conf_t *conf,
    or_breaker_t *cb, or_msec_t *now);
static void cb_state(rng_t *r, const or_breaker_conf_t *conf,
    const or_breaker_t *from, or_breaker_t *cb, or_msec_t *now, int events);
static void test_cb_laws(void);
static void test_cb_rules(void);

static void lo_event(rng_t *r, const or_lockout_conf_t *conf,
    or_lockout_t *lo, or_msec_t *now);
static void lo_state(rng_t *r, const or_lockout_conf_t *conf,
    const or_lockout_t *from, or_lockout_t *lo, or_msec_t *now, int events);
static void conf_lo_default(or_lockout_conf_t *conf);
static void test_lo_laws(void);


static int                coarse;    /* whole-second clock this round */

static const or_reason_e  cd_reasons[] = {
    OR_REASON_RATE_LIMIT_EXCEEDED,
    OR_REASON_RATE_LIMIT_EXCEEDED,
    OR_REASON_RATE_LIMIT_EXCEEDED,
    OR_REASON_QUOTA_EXHAUSTED,
    OR_REASON_CONCURRENCY_LIMITED,
    OR_REASON_AUTH_ERROR,
    OR_REASON_CREDITS_EXHAUSTED,
    OR_REASON_BANNED,
    OR_REASON_EXPIRED,
    OR_REASON_EXPIRED,
    OR_REASON_REQUEST_REJECTED,
    OR_REASON_NOT_FOUND,
    OR_REASON_BAD_REQUEST,
    OR_REASON_SERVER_ERROR,
    OR_REASON_TIMEOUT,
    OR_REASON_TRANSPORT,
    OR_REASON_STREAM_STALL
};


int
main(void)
{
    test_cd_laws();
    test_cd_duplicates();
    test_cd_burst();
    test_cd_rules();
    test_cb_laws();
    test_cb_rules();
    test_lo_laws();

    return or_done();
}


static uint64_t
rnd(rng_t *r)
{
    /* xorshift64* */
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;

    return r->s * 2685821657736338717ULL;
}


static unsigned
rnd_below(rng_t *r, unsigned n)
{
    return (unsigned) (rnd(r) % n);
}


static or_msec_t
rnd_msec(rng_t *r, or_msec_t max)
{
    return (or_msec_t) (rnd(r) % (uint64_t) (max + 1));
}


static void
cd_conf(rng_t *r, or_cooldown_conf_t *conf)
{
    or_cooldown_conf_init(conf);

    switch (rnd_below(r, 4)) {
    case 0:
        conf->provider_delay_ms = 30 * SEC;
        break;
    case 1:
        conf->override_ms = 20 * SEC;
        break;
    case 2:
        conf->stream_stall_cooldown = 1;
        conf->max_backoff_steps = 3;
        break;
    default:
        break;
    }

    or_cooldown_conf_fill(conf, (or_kind_e) rnd_below(r, OR_KIND_COUNT));
}


/* one random event at a random later time; starts may lie in the past */
static void
cd_event(rng_t *r, const or_cooldown_conf_t *conf, or_conn_state_t *st,
    or_msec_t *now)
{
    unsigned      k;
    or_msec_t     start;
    or_verdict_t  v;

    if (coarse) {
        /* whole seconds: nodes often record at the very same ms */
        *now += SEC * (or_msec_t) rnd_below(r, 3);
        start = *now - SEC * (or_msec_t) rnd_below(r, 3);

    } else {
        *now += rnd_msec(r, rnd_below(r, 2) ? 3 * SEC : 5 * MIN);
        start = *now - rnd_msec(r, rnd_below(r, 2) ? 200 : 20 * SEC);
    }

    k = rnd_below(r, 100);

    if (k < 12) {
        or_cooldown_success(st, start, *now);
        return;
    }

    if (k < 14) {
        or_cooldown_reset(st);
        return;
    }

    memset(&v, 0, sizeof(v));
    v.reason = cd_reasons[rnd_below(r, sizeof(cd_reasons)
                                       / sizeof(cd_reasons[0]))];
    v.cooldown_ms = rnd_below(r, 5) ? OR_MSEC_NONE : rnd_msec(r, 60 * MIN);
    v.hint_ms = rnd_below(r, 4) ? OR_MSEC_NONE : rnd_msec(r, 10 * MIN);
    v.retry_after_s = -1;

    or_cooldown_fail(conf, st, &v, 400 + (int) rnd_below(r, 200), start,
                     *now, NULL);
}


static void
cd_state(rng_t *r, const or_cooldown_conf_t *conf,
    const or_conn_state_t *from, or_conn_state_t *st, or_msec_t *now,
    int events)
{
    int  i;

    *st = *from;

    for (i = 0; i < events; i++) {
        cd_event(r, conf, st, now);
    }
}


static void
test_cd_laws(void)
{
    int                 i, comm, assoc, idem, absorb, order;
    or_msec_t           t, ta, tb, tc;
    or_conn_state_t     base, a, b, c, x, y, z, zero;
    or_cooldown_conf_t  conf;
    rng_t               r;

    r.s = 0x9e3779b97f4a7c15ULL;
    comm = assoc = idem = absorb = order = 1;
    memset(&zero, 0, sizeof(zero));

    for (i = 0; i < ITERS; i++) {
        coarse = (i & 1);
        cd_conf(&r, &conf);

        /* a shared history, then three nodes diverge */
        t = T0;
        cd_state(&r, &conf, &zero, &base, &t, (int) rnd_below(&r, 12));
        ta = tb = tc = t;
        cd_state(&r, &conf, &base, &a, &ta, (int) rnd_below(&r, 8));
        cd_state(&r, &conf, &base, &b, &tb, (int) rnd_below(&r, 8));
        cd_state(&r, &conf, rnd_below(&r, 4) ? &base : &zero, &c, &tc,
                 (int) rnd_below(&r, 8));

        x = a;
        or_cooldown_merge(&x, &b);
        y = b;
        or_cooldown_merge(&y, &a);
        comm &= or_cooldown_equal(&x, &y);

        x = a;
        or_cooldown_merge(&x, &b);
        or_cooldown_merge(&x, &c);
        y = b;
        or_cooldown_merge(&y, &c);
        z = a;
        or_cooldown_merge(&z, &y);
        assoc &= or_cooldown_equal(&x, &z);

        x = a;
        idem &= (or_cooldown_merge(&x, &a) == 0)
                && or_cooldown_equal(&x, &a);

        x = a;
        or_cooldown_merge(&x, &b);
        y = x;
        or_cooldown_merge(&y, &b);
        or_cooldown_merge(&y, &a);
        absorb &= or_cooldown_equal(&x, &y);

        /* delivery order of three remote states does not matter */
        x = c;
        or_cooldown_merge(&x, &a);
        or_cooldown_merge(&x, &b);
        y = b;
        or_cooldown_merge(&y, &c);
        or_cooldown_merge(&y, &a);
        or_cooldown_merge(&y, &c);
        order &= or_cooldown_equal(&x, &y);
    }

    or_ok(comm, "R-CLUSTER-2 cooldown merge is commutative (%d random "
          "state pairs)", ITERS);
    or_ok(assoc, "R-CLUSTER-2 cooldown merge is associative");
    or_ok(idem, "R-CLUSTER-2 cooldown merge(a, a) == a");
    or_ok(absorb, "R-CLUSTER-2 cooldown re-merging a delivered state "
          "changes nothing");
    or_ok(order, "R-CLUSTER-2 cooldown: any delivery order converges");
}


static void
test_cd_duplicates(void)
{
    int                   i, ok_fail, ok_succ, ok_reset, changed;
    unsigned              k;
    or_msec_t             t, start;
    or_verdict_t          v;
    or_conn_state_t       zero, s, once, twice;
    or_cooldown_conf_t    conf;
    or_cooldown_result_t  res;
    rng_t                 r;

    r.s = 0x243f6a8885a308d3ULL;
    ok_fail = ok_succ = ok_reset = 1;
    changed = 0;
    memset(&zero, 0, sizeof(zero));

    for (i = 0; i < ITERS; i++) {
        coarse = (i & 1);
        cd_conf(&r, &conf);
        t = T0;
        cd_state(&r, &conf, &zero, &s, &t, (int) rnd_below(&r, 15));

        t += rnd_msec(&r, 2 * MIN);
        start = t - rnd_msec(&r, rnd_below(&r, 2) ? 100 : 10 * MIN);

        memset(&v, 0, sizeof(v));
        k = rnd_below(&r, sizeof(cd_reasons) / sizeof(cd_reasons[0]));
        v.reason = cd_reasons[k];
        v.cooldown_ms = rnd_below(&r, 5) ? OR_MSEC_NONE
                                         : rnd_msec(&r, 60 * MIN);
        v.hint_ms = rnd_below(&r, 4) ? OR_MSEC_NONE : rnd_msec(&r, 10 * MIN);

        once = s;
        or_cooldown_fail(&conf, &once, &v, 429, start, t, &res);
        changed += res.changed;
        twice = once;
        or_cooldown_fail(&conf, &twice, &v, 429, start, t, &res);
        ok_fail &= or_cooldown_equal(&once, &twice) && !res.changed;

        once = s;
        or_cooldown_success(&once, start, t);
        twice = once;
        ok_succ &= or_cooldown_success(&twice, start, t) == 0
                   && or_cooldown_equal(&once, &twice);

        once = s;
        or_cooldown_reset(&once);
        twice = once;
        ok_reset &= or_cooldown_reset(&twice) == 0
                    && or_cooldown_equal(&once, &twice);
    }

    or_ok(ok_fail, "R-CD-4 a failure event applied twice == once (%d "
          "random states)", ITERS);
    or_ok(changed > ITERS / 4, "R-CD-4 the generator exercises real "
          "changes (%d of %d)", changed, ITERS);
    or_ok(ok_succ, "R-CD-7 a success event applied twice == once");
    or_ok(ok_reset, "R-CD-6 an operator reset applied twice == once");
}


static void
test_cd_burst(void)
{
    int                   i, j, nodes, ok_level, ok_until, ok_fail, ok_nodes;
    unsigned              level, order[20];
    or_msec_t             fail_at[20], start_at[20], first, d, tmax;
    or_verdict_t          v;
    or_conn_state_t       base, st, node[4], merged;
    or_cooldown_conf_t    conf;
    rng_t                 r;

    r.s = 0xb7e151628aed2a6bULL;
    ok_level = ok_until = ok_fail = ok_nodes = 1;

    memset(&v, 0, sizeof(v));
    v.reason = OR_REASON_RATE_LIMIT_EXCEEDED;
    v.cooldown_ms = OR_MSEC_NONE;
    v.hint_ms = OR_MSEC_NONE;

    for (i = 0; i < ITERS / 10; i++) {
        or_cooldown_conf_init(&conf);
        or_cooldown_conf_fill(&conf, (or_kind_e) rnd_below(&r, 3));

        /* a connection with some history: level 0..9, old mark */
        memset(&base, 0, sizeof(base));
        level = rnd_below(&r, 10);
        base.backoff_level = (uint16_t) level;
        base.failures = level;
        base.clear_epoch = rnd_below(&r, 3);
        base.mark_at = level ? T0 - rnd_msec(&r, 10 * MIN) - 1 : 0;
        base.until = base.mark_at ? base.mark_at + SEC : 0;

        /* 20 attempts in flight, all started before the first failure */
        for (j = 0; j < 20; j++) {
            start_at[j] = T0 + rnd_msec(&r, 5 * SEC);
            fail_at[j] = T0 + 5 * SEC + 1 + rnd_msec(&r, 30 * SEC);
            order[j] = (unsigned) j;
        }

        for (j = 19; j > 0; j--) {
            unsigned  k, tmp;

            k = rnd_below(&r, (unsigned) j + 1);
            tmp = order[j];
            order[j] = order[k];
            order[k] = tmp;
        }

        /* one node sees all 20, in random order */
        st = base;
        for (j = 0; j < 20; j++) {
            or_cooldown_fail(&conf, &st, &v, 429, start_at[order[j]],
                             fail_at[order[j]], NULL);
        }

        first = fail_at[order[0]];
        d = or_cooldown_backoff_ms(&conf, level);
        ok_level &= st.backoff_level == level + 1;
        ok_until &= st.until == first + d;
        ok_fail &= st.failures == level + 1;

        /* 2..4 nodes see a random share each, then merge in any order */
        nodes = 2 + (int) rnd_below(&r, 3);
        for (j = 0; j < nodes; j++) {
            node[j] = base;
        }

        tmax = 0;
        for (j = 0; j < 20; j++) {
            int  n;

            n = (int) rnd_below(&r, (unsigned) nodes);
            or_cooldown_fail(&conf, &node[n], &v, 429, start_at[order[j]],
                             fail_at[order[j]], NULL);
            if (fail_at[order[j]] > tmax) {
                tmax = fail_at[order[j]];
            }
        }

        merged = node[rnd_below(&r, (unsigned) nodes)];
        for (j = 0; j < 2 * nodes; j++) {
            or_cooldown_merge(&merged, &node[rnd_below(&r,
                                                       (unsigned) nodes)]);
        }
        for (j = 0; j < nodes; j++) {
            or_cooldown_merge(&merged, &node[j]);
        }

        ok_nodes &= merged.backoff_level == level + 1
                    && merged.failures == level + 1
                    && merged.until <= tmax + d
                    && merged.until >= T0 + 5 * SEC + d;
    }

    or_ok(ok_level, "R-CD-4 20 concurrent 429s started before the cooldown "
          "raise backoff_level by exactly 1 (%d random bursts)", ITERS / 10);
    or_ok(ok_until, "R-CD-4 ... and extend the cooldown once: first "
          "failure + base x 2^level");
    or_ok(ok_fail, "R-CD-4 ... and count one failure");
    or_ok(ok_nodes, "R-CD-4 R-CLUSTER-2 the burst split over 2-4 nodes, "
          "merged in random order, still steps backoff_level once");
}


static void
test_cd_rules(void)
{
    or_verdict_t        v;
    or_conn_state_t     a, b, x;
    or_cooldown_conf_t  conf;

    or_cooldown_conf_init(&conf);
    or_cooldown_conf_fill(&conf, OR_KIND_APIKEY);
    memset(&v, 0, sizeof(v));
    v.cooldown_ms = OR_MSEC_NONE;
    v.hint_ms = OR_MSEC_NONE;

    /* later expiry wins */
    memset(&a, 0, sizeof(a));
    b = a;
    v.reason = OR_REASON_QUOTA_EXHAUSTED;
    v.hint_ms = 60 * MIN;
    or_cooldown_fail(&conf, &a, &v, 429, T0, T0, NULL);
    v.reason = OR_REASON_RATE_LIMIT_EXCEEDED;
    v.hint_ms = OR_MSEC_NONE;
    or_cooldown_fail(&conf, &b, &v, 429, T0 + 1, T0 + 1, NULL);
    x = b;
    or_cooldown_merge(&x, &a);
    or_is_int(x.until, T0 + 60 * MIN,
              "R-CLUSTER-2 cooldown: the later expiry wins");

    /* terminal beats transient, even a newer one */
    memset(&a, 0, sizeof(a));
    b = a;
    v.reason = OR_REASON_BANNED;
    or_cooldown_fail(&conf, &a, &v, 403, T0, T0, NULL);
    v.reason = OR_REASON_RATE_LIMIT_EXCEEDED;
    or_cooldown_fail(&conf, &b, &v, 429, T0 + MIN, T0 + MIN, NULL);
    or_cooldown_success(&b, T0 + 2 * MIN, T0 + 2 * MIN);
    x = b;
    or_cooldown_merge(&x, &a);
    or_is_int(x.terminal, OR_TERMINAL_BANNED,
              "R-CLUSTER-2 terminal state wins over a transient one");
    or_ok(!or_cooldown_eligible(&x, T0 + 3 * MIN),
          "R-CLUSTER-2 merged terminal connection is not eligible");

    /* an operator reset wins over the stale terminal it cleared */
    x = a;
    or_cooldown_reset(&x);
    or_cooldown_merge(&x, &a);
    or_ok(or_cooldown_eligible(&x, T0 + 3 * MIN) && x.terminal == 0,
          "R-CLUSTER-2 an operator reset propagates over the stale copy");

    /* a clearing success wins over the stale failure it cleared */
    memset(&a, 0, sizeof(a));
    or_cooldown_fail(&conf, &a, &v, 429, T0, T0, NULL);
    b = a;
    or_cooldown_success(&b, T0 + MIN, T0 + MIN);
    x = a;
    or_cooldown_merge(&x, &b);
    or_ok(or_cooldown_equal(&x, &b),
          "R-CLUSTER-2 a success (clear) propagates over the stale copy");
}


static void
cb_event(rng_t *r, const or_breaker_conf_t *conf, or_breaker_t *cb,
    or_msec_t *now)
{
    unsigned   k;
    or_msec_t  start;

    if (coarse) {
        *now += SEC * (or_msec_t) rnd_below(r, 3);
        start = *now - SEC * (or_msec_t) rnd_below(r, 3);

    } else {
        *now += rnd_msec(r, rnd_below(r, 2) ? 2 * SEC : 3 * MIN);
        start = *now - rnd_msec(r, rnd_below(r, 2) ? 100 : 90 * SEC);
    }

    k = rnd_below(r, 100);

    if (k < 50) {
        or_breaker_failure(conf, cb, (or_reason_e) (OR_REASON_SERVER_ERROR
                                                    + rnd_below(r, 3)),
                           start, *now, NULL);

    } else if (k < 75) {
        or_breaker_success(conf, cb, start, *now, NULL);

    } else if (k < 93) {
        or_breaker_admit(conf, cb, *now, NULL);

    } else if (k < 98) {
        or_breaker_normalize(conf, cb, *now);

    } else {
        or_breaker_reset(cb);
    }
}


static void
cb_state(rng_t *r, const or_breaker_conf_t *conf, const or_breaker_t *from,
    or_breaker_t *cb, or_msec_t *now, int events)
{
    int  i;

    *cb = *from;

    for (i = 0; i < events; i++) {
        cb_event(r, conf, cb, now);
    }
}


static void
test_cb_laws(void)
{
    int                i, comm, assoc, idem, absorb, norm;
    or_msec_t          t, ta, tb, tc;
    or_breaker_t       zero, base, a, b, c, x, y, z;
    or_breaker_conf_t  conf;
    rng_t              r;

    r.s = 0x452821e638d01377ULL;
    comm = assoc = idem = absorb = norm = 1;
    memset(&zero, 0, sizeof(zero));

    for (i = 0; i < ITERS; i++) {
        coarse = (i & 1);
        or_breaker_conf_init(&conf);
        conf.gate_enabled = (int32_t) rnd_below(&r, 2);
        or_breaker_conf_fill(&conf, (or_kind_e) rnd_below(&r, 3));

        t = T0;
        cb_state(&r, &conf, &zero, &base, &t, (int) rnd_below(&r, 30));
        ta = tb = tc = t;
        cb_state(&r, &conf, &base, &a, &ta, (int) rnd_below(&r, 15));
        cb_state(&r, &conf, &base, &b, &tb, (int) rnd_below(&r, 15));
        cb_state(&r, &conf, &base, &c, &tc, (int) rnd_below(&r, 15));

        x = a;
        or_breaker_merge(&x, &b);
        y = b;
        or_breaker_merge(&y, &a);
        comm &= or_breaker_equal(&x, &y);

        x = a;
        or_breaker_merge(&x, &b);
        or_breaker_merge(&x, &c);
        y = b;
        or_breaker_merge(&y, &c);
        z = a;
        or_breaker_merge(&z, &y);
        assoc &= or_breaker_equal(&x, &z);

        x = a;
        idem &= or_breaker_merge(&x, &a) == 0 && or_breaker_equal(&x, &a);

        x = a;
        or_breaker_merge(&x, &b);
        y = x;
        or_breaker_merge(&y, &a);
        or_breaker_merge(&y, &b);
        absorb &= or_breaker_equal(&x, &y);

        /* a normalized copy merged with its original is the normalized */
        x = a;
        or_breaker_normalize(&conf, &x, ta + rnd_msec(&r, 30 * MIN));
        y = x;
        or_breaker_merge(&y, &a);
        norm &= or_breaker_equal(&x, &y);
    }

    or_ok(comm, "R-CLUSTER-2 breaker merge is commutative (%d random "
          "state pairs)", ITERS);
    or_ok(assoc, "R-CLUSTER-2 breaker merge is associative");
    or_ok(idem, "R-CLUSTER-2 breaker merge(a, a) == a");
    or_ok(absorb, "R-CLUSTER-2 breaker re-merging a delivered state "
          "changes nothing");
    or_ok(norm, "R-CB-4 R-CLUSTER-2 lazy normalization only moves a state "
          "up: merging the stale copy back is a no-op");
}


static void
test_cb_rules(void)
{
    or_breaker_t       a, b, x;
    or_breaker_conf_t  conf;
    int                i;

    or_breaker_conf_init(&conf);
    or_breaker_conf_fill(&conf, OR_KIND_APIKEY);

    /* node a opened the breaker, node b has not heard of it */
    memset(&a, 0, sizeof(a));
    b = a;
    for (i = 0; i < 12; i++) {
        or_breaker_failure(&conf, &a, OR_REASON_SERVER_ERROR, T0, T0, NULL);
    }
    or_breaker_failure(&conf, &b, OR_REASON_SERVER_ERROR, T0, T0, NULL);
    x = b;
    or_breaker_merge(&x, &a);
    or_is_int(x.state, OR_CB_OPEN,
              "R-CB-7 R-CLUSTER-2 an OPEN breaker propagates");
    or_is_int(x.open_until, T0 + 30 * SEC,
              "R-CLUSTER-2 breaker keeps the OPEN expiry");

    /* the probe of node a closed it; the stale OPEN copy loses */
    or_breaker_admit(&conf, &a, T0 + 30 * SEC, NULL);
    or_breaker_success(&conf, &a, T0 + 30 * SEC, T0 + 31 * SEC, NULL);
    x = a;
    or_breaker_merge(&x, &b);
    or_breaker_merge(&x, &a);
    or_is_int(x.state, OR_CB_CLOSED,
              "R-CLUSTER-2 a probe success (new epoch) beats stale OPEN");

    /* a probe in flight on one node blocks probes on the other */
    memset(&a, 0, sizeof(a));
    for (i = 0; i < 12; i++) {
        or_breaker_failure(&conf, &a, OR_REASON_SERVER_ERROR, T0, T0, NULL);
    }
    b = a;
    or_breaker_admit(&conf, &a, T0 + 30 * SEC, NULL);
    or_breaker_merge(&b, &a);
    or_is_int(or_breaker_admit(&conf, &b, T0 + 31 * SEC, NULL), OR_CB_DENY,
              "R-CB-4 R-CLUSTER-2 a merged probe slot admits one probe");
}


static void
lo_event(rng_t *r, const or_lockout_conf_t *conf, or_lockout_t *lo,
    or_msec_t *now)
{
    int           status;
    unsigned      k;
    or_msec_t     start;
    or_verdict_t  v;

    static const int  statuses[] = { 402, 403, 404, 429, 502, 503, 504 };
    static const or_scope_e  scopes[] = {
        OR_SCOPE_NONE, OR_SCOPE_MODEL, OR_SCOPE_BASE_MODEL,
        OR_SCOPE_QUOTA_FAMILY
    };

    if (coarse) {
        *now += SEC * (or_msec_t) rnd_below(r, 3);
        start = *now - SEC * (or_msec_t) rnd_below(r, 3);

    } else {
        *now += rnd_msec(r, rnd_below(r, 2) ? 3 * SEC : 40 * MIN);
        start = *now - rnd_msec(r, rnd_below(r, 2) ? 100 : 5 * MIN);
    }

    k = rnd_below(r, 100);

    if (k < 25) {
        or_lockout_success(lo, start, *now);
        return;
    }

    if (k < 28) {
        or_lockout_clear(lo);
        return;
    }

    memset(&v, 0, sizeof(v));
    v.reason = cd_reasons[rnd_below(r, sizeof(cd_reasons)
                                       / sizeof(cd_reasons[0]))];
    v.cooldown_ms = rnd_below(r, 5) ? OR_MSEC_NONE : rnd_msec(r, 60 * MIN);
    v.hint_ms = rnd_below(r, 4) ? OR_MSEC_NONE : rnd_msec(r, 60 * MIN);
    status = statuses[rnd_below(r, sizeof(statuses) / sizeof(statuses[0]))];

    or_lockout_fail(conf, lo, &v, status,
                    or_lockout_scope(status, scopes[rnd_below(r, 4)]), start,
                    *now, NULL);
}


static void
lo_state(rng_t *r, const or_lockout_conf_t *conf, const or_lockout_t *from,
    or_lockout_t *lo, or_msec_t *now, int events)
{
    int  i;

    *lo = *from;

    for (i = 0; i < events; i++) {
        lo_event(r, conf, lo, now);
    }
}


static void
conf_lo_default(or_lockout_conf_t *conf)
{
    or_lockout_conf_init(conf);
    conf->enabled = 1;
    or_lockout_conf_fill(conf);
}


static void
test_lo_laws(void)
{
    int                i, comm, assoc, idem, absorb, dup, dupok;
    or_msec_t          t, ta, tb, tc, start;
    or_verdict_t       v;
    or_lockout_t       zero, base, a, b, c, x, y, z;
    or_lockout_conf_t  conf;
    rng_t              r;

    r.s = 0x13198a2e03707344ULL;
    comm = assoc = idem = absorb = dup = dupok = 1;
    memset(&zero, 0, sizeof(zero));

    for (i = 0; i < ITERS; i++) {
        coarse = (i & 1);

        if (rnd_below(&r, 2)) {
            or_lockout_conf_rejected(&conf);

        } else {
            conf_lo_default(&conf);
            conf.exponential = (int32_t) rnd_below(&r, 2);
        }

        t = T0;
        lo_state(&r, &conf, &zero, &base, &t, (int) rnd_below(&r, 12));
        ta = tb = tc = t;
        lo_state(&r, &conf, &base, &a, &ta, (int) rnd_below(&r, 8));
        lo_state(&r, &conf, &base, &b, &tb, (int) rnd_below(&r, 8));
        lo_state(&r, &conf, rnd_below(&r, 4) ? &base : &zero, &c, &tc,
                 (int) rnd_below(&r, 8));

        x = a;
        or_lockout_merge(&x, &b);
        y = b;
        or_lockout_merge(&y, &a);
        comm &= or_lockout_equal(&x, &y);

        x = a;
        or_lockout_merge(&x, &b);
        or_lockout_merge(&x, &c);
        y = b;
        or_lockout_merge(&y, &c);
        z = a;
        or_lockout_merge(&z, &y);
        assoc &= or_lockout_equal(&x, &z);

        x = a;
        idem &= or_lockout_merge(&x, &a) == 0 && or_lockout_equal(&x, &a);

        x = a;
        or_lockout_merge(&x, &b);
        y = x;
        or_lockout_merge(&y, &b);
        or_lockout_merge(&y, &a);
        absorb &= or_lockout_equal(&x, &y);

        /* a duplicate failure event */
        memset(&v, 0, sizeof(v));
        v.reason = OR_REASON_RATE_LIMIT_EXCEEDED;
        v.cooldown_ms = OR_MSEC_NONE;
        v.hint_ms = rnd_below(&r, 3) ? OR_MSEC_NONE : rnd_msec(&r, HOUR_MS);
        t = ta + rnd_msec(&r, 40 * MIN);
        start = t - rnd_msec(&r, rnd_below(&r, 2) ? 100 : 5 * MIN);
        x = a;
        or_lockout_fail(&conf, &x, &v, 429, OR_SCOPE_QUOTA_FAMILY, start, t,
                        NULL);
        y = x;
        or_lockout_fail(&conf, &y, &v, 429, OR_SCOPE_QUOTA_FAMILY, start, t,
                        NULL);
        dup &= or_lockout_equal(&x, &y);

        x = a;
        or_lockout_success(&x, start, t);
        y = x;
        dupok &= or_lockout_success(&y, start, t) == OR_LO_KEPT
                 && or_lockout_equal(&x, &y);
    }

    or_ok(comm, "R-ML-6 R-CLUSTER-2 lockout merge is commutative (%d "
          "random state pairs)", ITERS);
    or_ok(assoc, "R-CLUSTER-2 lockout merge is associative");
    or_ok(idem, "R-CLUSTER-2 lockout merge(a, a) == a");
    or_ok(absorb, "R-CLUSTER-2 lockout re-merging a delivered state "
          "changes nothing");
    or_ok(dup, "R-ML-4 a lockout failure event applied twice == once");
    or_ok(dupok, "R-ML-4 a success (decay) event applied twice == once");

    /* a decay and a deletion propagate over the stale copy */
    conf_lo_default(&conf);
    memset(&a, 0, sizeof(a));
    t = T0;
    for (i = 0; i < 5; i++) {
        or_lockout_fail(&conf, &a, NULL, 503, OR_SCOPE_MODEL, t, t, NULL);
        t = a.until;
    }
    b = a;
    or_lockout_success(&b, t, t + 1);
    x = a;
    or_lockout_merge(&x, &b);
    or_ok(or_lockout_equal(&x, &b) && x.failures == 2,
          "R-ML-4 R-CLUSTER-2 a success decay propagates over the stale "
          "copy");
    c = b;
    or_lockout_success(&c, t + 2, t + 3);
    or_lockout_success(&c, t + 4, t + 5);
    x = a;
    or_lockout_merge(&x, &c);
    or_lockout_merge(&x, &b);
    or_ok(or_lockout_equal(&x, &c) && !or_lockout_active(&x, t + 6),
          "R-ML-4 R-CLUSTER-2 a deleted lockout (tombstone) beats stale "
          "copies");
}
