/*
 * Copyright (C) ngx_omniroute authors
 *
 * Outcome decisions (or_outcome): which records a failure verdict writes
 * and with which scope (R-ML-2, R-CD-5, R-CD-6, R-CLASS-6, R-CB-3), what
 * a success touches, hold / probe / commit of a response header
 * (R-REQ-5); and the idle predicates of the records (or_breaker_idle,
 * or_cooldown_idle, or_lockout_idle and their "settled" variants) on
 * hand-built records and on records the engine itself produced.
 */


#include <string.h>

#include "or_test.h"
#include "or_outcome.h"
#include "or_breaker.h"
#include "or_cooldown.h"
#include "or_lockout.h"
#include "or_classify.h"


#define SEC   1000LL
#define MIN   (60 * SEC)
#define T0    1000000000LL


#define W_RJ  OR_W_REJECTED
#define W_CN  OR_W_CONN
#define W_SB  OR_W_SIBLINGS
#define W_BR  OR_W_BREAKER
#define W_LO  OR_W_LOCKOUT

#define R(x)  OR_REASON_##x
#define S(x)  OR_SCOPE_##x


typedef enum {
    LO_OFF = 0,                 /* lockout settings, disabled (default) */
    LO_ON,                      /* enabled, default codes 403 404 429
                                   502 503 504 */
    LO_NULL                     /* no settings passed */
} lo_conf_e;


typedef struct {
    const char      *name;
    or_reason_e      reason;
    or_scope_e       rule_scope;
    int              counts;            /* verdict.counts_for_breaker */
    int              status;            /* effective status */
    or_transport_e   transport;
    lo_conf_e        lo;
    int              disable_cooling;
    int              bucketed;
    int              egress_key;
    unsigned         mask;
    or_scope_e       scope;
    int              unless_skip;
} writes_case_t;


static const writes_case_t  writes_cases[] = {

    /* R-TOOL-2 tool_limit: only the tool-limit record, never the rest */
    { "tool_limit: the tool-limit record only",
      R(TOOL_LIMIT), S(NONE), 0, 400, OR_TRANSPORT_OK, LO_ON, 0, 0, 0,
      OR_W_TOOLS, S(NONE), 0 },
    { "tool_limit: not even a lockout with a model-scoped rule",
      R(TOOL_LIMIT), S(MODEL), 0, 400, OR_TRANSPORT_OK, LO_ON, 0, 1, 1,
      OR_W_TOOLS, S(NONE), 0 },

    /* request_rejected: only the rejected table, model scope */
    { "request_rejected: rejected table only, model scope",
      R(REQUEST_REJECTED), S(NONE), 0, 403, OR_TRANSPORT_OK, LO_ON, 0, 1, 1,
      W_RJ, S(MODEL), 0 },
    { "request_rejected ignores disable_cooling",
      R(REQUEST_REJECTED), S(NONE), 0, 403, OR_TRANSPORT_OK, LO_OFF, 1, 0,
      0, W_RJ, S(MODEL), 0 },
    { "request_rejected never touches breaker or connection",
      R(REQUEST_REJECTED), S(QUOTA_FAMILY), 1, 503, OR_TRANSPORT_OK, LO_ON,
      0, 0, 0, W_RJ, S(MODEL), 0 },

    /* lockout off: the connection (and the breaker when it counts) */
    { "503 server_error, lockout off: connection and breaker",
      R(SERVER_ERROR), S(NONE), 1, 503, OR_TRANSPORT_OK, LO_OFF, 0, 0, 0,
      W_CN | W_BR, S(NONE), 1 },
    { "429 rate limit, lockout off: connection only",
      R(RATE_LIMIT_EXCEEDED), S(NONE), 0, 429, OR_TRANSPORT_OK, LO_OFF, 0,
      0, 0, W_CN, S(NONE), 1 },
    { "404 not_found, lockout off: connection (the chain ignores it)",
      R(NOT_FOUND), S(NONE), 0, 404, OR_TRANSPORT_OK, LO_OFF, 0, 0, 0,
      W_CN, S(NONE), 1 },
    { "rule scope model, lockout off: still the model's lockout, never "
      "the connection (issue 11)",
      R(QUOTA_EXHAUSTED), S(MODEL), 0, 429, OR_TRANSPORT_OK, LO_OFF, 0, 0,
      0, W_LO, S(MODEL), 0 },
    { "403 no access to the model (rule scope model), lockout off: the "
      "model, not the connection",
      R(AUTH_ERROR), S(MODEL), 0, 403, OR_TRANSPORT_OK, LO_OFF, 0, 0, 0,
      W_LO, S(MODEL), 0 },
    { "no lockout settings: connection",
      R(SERVER_ERROR), S(NONE), 1, 503, OR_TRANSPORT_OK, LO_NULL, 0, 0, 0,
      W_CN | W_BR, S(NONE), 1 },

    /* lockout on: a status it takes is the model's, not the connection's */
    { "503, lockout on: lockout (exact model) and breaker",
      R(SERVER_ERROR), S(NONE), 1, 503, OR_TRANSPORT_OK, LO_ON, 0, 0, 0,
      W_LO | W_BR, S(MODEL), 0 },
    { "502, lockout on: lockout and breaker",
      R(SERVER_ERROR), S(NONE), 1, 502, OR_TRANSPORT_OK, LO_ON, 0, 0, 0,
      W_LO | W_BR, S(MODEL), 0 },
    { "504 timeout, lockout on: lockout and breaker",
      R(TIMEOUT), S(NONE), 1, 504, OR_TRANSPORT_OK, LO_ON, 0, 0, 0,
      W_LO | W_BR, S(MODEL), 0 },
    { "500 (not a lockout code), lockout on: connection and breaker",
      R(SERVER_ERROR), S(NONE), 1, 500, OR_TRANSPORT_OK, LO_ON, 0, 0, 0,
      W_CN | W_BR, S(NONE), 1 },
    { "429, lockout on: lockout, quota family",
      R(RATE_LIMIT_EXCEEDED), S(NONE), 0, 429, OR_TRANSPORT_OK, LO_ON, 0, 0,
      0, W_LO, S(QUOTA_FAMILY), 0 },
    { "403 auth_error, lockout on: lockout, quota family",
      R(AUTH_ERROR), S(NONE), 0, 403, OR_TRANSPORT_OK, LO_ON, 0, 0, 0,
      W_LO, S(QUOTA_FAMILY), 0 },
    { "404, lockout on: lockout, base model",
      R(NOT_FOUND), S(NONE), 0, 404, OR_TRANSPORT_OK, LO_ON, 0, 0, 0,
      W_LO, S(BASE_MODEL), 0 },
    { "402 credits (not a default code), lockout on: connection",
      R(CREDITS_EXHAUSTED), S(NONE), 0, 402, OR_TRANSPORT_OK, LO_ON, 0, 0,
      0, W_CN, S(NONE), 1 },
    { "401 auth_error, lockout on: connection",
      R(AUTH_ERROR), S(NONE), 0, 401, OR_TRANSPORT_OK, LO_ON, 0, 0, 0,
      W_CN, S(NONE), 1 },
    { "lockout takes the status even with disable_cooling",
      R(SERVER_ERROR), S(NONE), 1, 503, OR_TRANSPORT_OK, LO_ON, 1, 0, 0,
      W_LO | W_BR, S(MODEL), 0 },

    /* a rule scope wins over the codes and the status */
    { "rule scope model on a 500: lockout, exact model",
      R(SERVER_ERROR), S(MODEL), 1, 500, OR_TRANSPORT_OK, LO_ON, 0, 0, 0,
      W_LO | W_BR, S(MODEL), 0 },
    { "rule scope base model on a 429: lockout, base model",
      R(RATE_LIMIT_EXCEEDED), S(BASE_MODEL), 0, 429, OR_TRANSPORT_OK, LO_ON,
      0, 0, 0, W_LO, S(BASE_MODEL), 0 },
    { "rule scope quota family on a 503: lockout, quota family",
      R(QUOTA_EXHAUSTED), S(QUOTA_FAMILY), 0, 503, OR_TRANSPORT_OK, LO_ON,
      0, 0, 0, W_LO, S(QUOTA_FAMILY), 0 },
    { "rule scope connection on a 429: the status decides (family)",
      R(RATE_LIMIT_EXCEEDED), S(CONNECTION), 0, 429, OR_TRANSPORT_OK, LO_ON,
      0, 0, 0, W_LO, S(QUOTA_FAMILY), 0 },
    { "rule scope connection on a 401: connection",
      R(AUTH_ERROR), S(CONNECTION), 0, 401, OR_TRANSPORT_OK, LO_ON, 0, 0, 0,
      W_CN, S(NONE), 1 },
    { "rule scope provider on a 500: connection",
      R(SERVER_ERROR), S(PROVIDER), 1, 500, OR_TRANSPORT_OK, LO_ON, 0, 0, 0,
      W_CN | W_BR, S(NONE), 1 },

    /* transport failures: status 0, never a lockout */
    { "connection reset, lockout on: connection and breaker",
      R(TRANSPORT), S(NONE), 1, 0, OR_TRANSPORT_RESET, LO_ON, 0, 0, 0,
      W_CN | W_BR, S(NONE), 1 },
    { "timeout, rule scope model, lockout on: status 0, no lockout",
      R(TIMEOUT), S(MODEL), 1, 0, OR_TRANSPORT_TIMEOUT, LO_ON, 0, 0, 0,
      W_CN | W_BR, S(NONE), 1 },

    /* disable_cooling */
    { "disable_cooling, 503: breaker only, unconditionally",
      R(SERVER_ERROR), S(NONE), 1, 503, OR_TRANSPORT_OK, LO_OFF, 1, 0, 0,
      W_BR, S(NONE), 0 },
    { "disable_cooling, connect error: breaker only",
      R(TRANSPORT), S(NONE), 1, 0, OR_TRANSPORT_CONNECT_ERROR, LO_ON, 1, 0,
      0, W_BR, S(NONE), 0 },
    { "disable_cooling, 429: nothing at all",
      R(RATE_LIMIT_EXCEEDED), S(NONE), 0, 429, OR_TRANSPORT_OK, LO_OFF, 1, 1,
      1, 0, S(NONE), 0 },

    /* the breaker: the verdict decides; a concurrency limit never */
    { "503 relabelled by a rule (counts 0): no breaker",
      R(QUOTA_EXHAUSTED), S(NONE), 0, 503, OR_TRANSPORT_OK, LO_OFF, 0, 0, 0,
      W_CN, S(NONE), 1 },
    { "concurrency limit, even flagged as counting: no breaker",
      R(CONCURRENCY_LIMITED), S(NONE), 1, 429, OR_TRANSPORT_OK, LO_OFF, 0, 0,
      0, W_CN, S(NONE), 1 },

    /* egress siblings (R-CLASS-6): the verdict-only preconditions */
    { "429 rate limit, egress-bucketed, egress key: siblings too",
      R(RATE_LIMIT_EXCEEDED), S(NONE), 0, 429, OR_TRANSPORT_OK, LO_OFF, 0, 1,
      1, W_CN | W_SB, S(NONE), 1 },
    { "429 quota, egress-bucketed, egress key: siblings too",
      R(QUOTA_EXHAUSTED), S(NONE), 0, 429, OR_TRANSPORT_OK, LO_OFF, 0, 1, 1,
      W_CN | W_SB, S(NONE), 1 },
    { "no egress key: no siblings",
      R(RATE_LIMIT_EXCEEDED), S(NONE), 0, 429, OR_TRANSPORT_OK, LO_OFF, 0, 1,
      0, W_CN, S(NONE), 1 },
    { "provider not egress-bucketed: no siblings",
      R(RATE_LIMIT_EXCEEDED), S(NONE), 0, 429, OR_TRANSPORT_OK, LO_OFF, 0, 0,
      1, W_CN, S(NONE), 1 },
    { "lockout takes it: no connection, no siblings",
      R(RATE_LIMIT_EXCEEDED), S(NONE), 0, 429, OR_TRANSPORT_OK, LO_ON, 0, 1,
      1, W_LO, S(QUOTA_FAMILY), 0 },
    { "terminal banned: connection, never siblings",
      R(BANNED), S(NONE), 0, 403, OR_TRANSPORT_OK, LO_OFF, 0, 1, 1,
      W_CN, S(NONE), 1 },
    { "terminal credits exhausted: no siblings",
      R(CREDITS_EXHAUSTED), S(NONE), 0, 402, OR_TRANSPORT_OK, LO_OFF, 0, 1,
      1, W_CN, S(NONE), 1 },
    { "terminal expired: no siblings",
      R(EXPIRED), S(NONE), 0, 401, OR_TRANSPORT_OK, LO_OFF, 0, 1, 1,
      W_CN, S(NONE), 1 },
    { "reason none: no siblings",
      R(NONE), S(NONE), 0, 200, OR_TRANSPORT_OK, LO_OFF, 0, 1, 1,
      W_CN, S(NONE), 1 },
    { "503 on an egress-bucketed provider: siblings asked (none picked)",
      R(SERVER_ERROR), S(NONE), 1, 503, OR_TRANSPORT_OK, LO_OFF, 0, 1, 1,
      W_CN | W_SB | W_BR, S(NONE), 1 }
};


static or_lockout_conf_t  lo_confs[2];


static void setup(void);
static void verdict_of(or_verdict_t *v, or_reason_e reason,
    or_scope_e scope, int counts);
static void test_status(void);
static void test_writes(void);
static void test_writes_classified(void);
static void test_skip_breaker(void);
static void test_siblings_split(void);
static void test_success_writes(void);
static void test_hold(void);
static void test_event_stream(void);
static void test_breaker_idle(void);
static void test_breaker_idle_sequences(void);
static void test_cooldown_idle(void);
static void test_cooldown_idle_sequences(void);
static void test_lockout_idle(void);
static void test_lockout_idle_sequences(void);


int
main(void)
{
    setup();

    test_status();
    test_writes();
    test_writes_classified();
    test_skip_breaker();
    test_siblings_split();
    test_success_writes();
    test_hold();
    test_event_stream();
    test_breaker_idle();
    test_breaker_idle_sequences();
    test_cooldown_idle();
    test_cooldown_idle_sequences();
    test_lockout_idle();
    test_lockout_idle_sequences();

    return or_done();
}


static void
setup(void)
{
    or_lockout_conf_init(&lo_confs[LO_OFF]);
    or_lockout_conf_fill(&lo_confs[LO_OFF]);

    or_lockout_conf_init(&lo_confs[LO_ON]);
    lo_confs[LO_ON].enabled = 1;
    or_lockout_conf_fill(&lo_confs[LO_ON]);
}


static void
verdict_of(or_verdict_t *v, or_reason_e reason, or_scope_e scope,
    int counts)
{
    memset(v, 0, sizeof(or_verdict_t));
    v->reason = reason;
    v->scope = scope;
    v->cooldown_ms = OR_MSEC_NONE;
    v->hint_ms = OR_MSEC_NONE;
    v->fall_over = 1;
    v->counts_for_breaker = counts;
    v->retry_after_s = -1;
}


static void
test_status(void)
{
    size_t        i;
    or_verdict_t  v;

    static const struct {
        int              status;
        or_transport_e   transport;
        int              restated;
        int              effective;
        const char      *name;
    } cases[] = {
        { 503, OR_TRANSPORT_OK, 0, 503, "upstream status as is" },
        { 503, OR_TRANSPORT_OK, 429, 429, "the restated status wins" },
        { 400, OR_TRANSPORT_OK, 503, 503, "a 400 restated to 503" },
        { 0, OR_TRANSPORT_RESET, 0, 0, "reset: status 0" },
        { 0, OR_TRANSPORT_CONNECT_ERROR, 0, 0, "connect error: status 0" },
        { 200, OR_TRANSPORT_TIMEOUT, 0, 0,
          "timeout: status 0 whatever was seen" }
    };

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        verdict_of(&v, R(SERVER_ERROR), S(NONE), 1);
        v.restated_status = cases[i].restated;

        or_is_int(or_outcome_status(&v, cases[i].status, cases[i].transport),
                  cases[i].effective, "effective status: %s",
                  cases[i].name);
    }

    or_is_int(or_outcome_status(NULL, 502, OR_TRANSPORT_OK), 502,
              "effective status without a verdict");
}


static void
test_writes(void)
{
    size_t                    i;
    or_verdict_t              v;
    or_outcome_writes_t       w;
    const writes_case_t      *c;
    const or_lockout_conf_t  *lc;

    for (i = 0; i < sizeof(writes_cases) / sizeof(writes_cases[0]); i++) {
        c = &writes_cases[i];

        verdict_of(&v, c->reason, c->rule_scope, c->counts);
        lc = (c->lo == LO_NULL) ? NULL : &lo_confs[c->lo];

        w = or_outcome_writes(&v, c->status, c->transport, lc,
                              c->disable_cooling, c->bucketed,
                              c->egress_key);

        or_is_int(w.mask, c->mask, "writes: %s", c->name);
        or_is_str(or_scope_name(w.scope), or_scope_name(c->scope),
                  "scope: %s", c->name);
        or_is_int(w.breaker_unless_skip, c->unless_skip,
                  "breaker unless skip_breaker: %s", c->name);
    }

    /* no verdict: the status alone decides the breaker */

    w = or_outcome_writes(NULL, 503, OR_TRANSPORT_OK, &lo_confs[LO_OFF], 0,
                          1, 1);
    or_is_int(w.mask, W_CN | W_BR,
              "writes: no verdict, 503: connection and breaker");
    w = or_outcome_writes(NULL, 429, OR_TRANSPORT_OK, &lo_confs[LO_OFF], 0,
                          1, 1);
    or_is_int(w.mask, W_CN, "writes: no verdict, 429: connection only");
}


/* real verdicts: the classifier's output through or_outcome_writes() */

static void
test_writes_classified(void)
{
    size_t                i;
    int                   status;
    or_verdict_t          v;
    or_response_t         resp;
    or_class_conf_t       cc;
    or_outcome_writes_t   w;

    static const struct {
        int              status;
        or_transport_e   transport;
        const char      *body;
        lo_conf_e        lo;
        unsigned         mask;
        or_scope_e       scope;
        const char      *name;
    } cases[] = {
        { 503, OR_TRANSPORT_OK, "", LO_OFF, W_CN | W_BR, S(NONE),
          "classified 503" },
        { 503, OR_TRANSPORT_OK, "", LO_ON, W_LO | W_BR, S(MODEL),
          "classified 503, lockout on" },
        { 429, OR_TRANSPORT_OK, "slow down", LO_OFF, W_CN, S(NONE),
          "classified 429" },
        { 429, OR_TRANSPORT_OK, "slow down", LO_ON, W_LO, S(QUOTA_FAMILY),
          "classified 429, lockout on" },
        { 403, OR_TRANSPORT_OK, "Request not allowed", LO_ON, W_RJ,
          S(MODEL), "classified 403 request not allowed" },
        { 402, OR_TRANSPORT_OK, "", LO_OFF, W_CN, S(NONE),
          "classified 402 credits exhausted" },
        { 404, OR_TRANSPORT_OK, "", LO_ON, W_LO, S(BASE_MODEL),
          "classified 404, lockout on" },
        { 0, OR_TRANSPORT_RESET, NULL, LO_ON, W_CN | W_BR, S(NONE),
          "classified reset" },
        { 0, OR_TRANSPORT_TIMEOUT, NULL, LO_ON, W_CN | W_BR, S(NONE),
          "classified timeout" }
    };

    or_class_conf_init(&cc, "generic", 7);

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        memset(&resp, 0, sizeof(resp));
        resp.status = cases[i].status;
        resp.transport = cases[i].transport;
        resp.body = cases[i].body;
        resp.body_len = cases[i].body ? strlen(cases[i].body) : 0;
        resp.now_ms = T0;

        or_classify(&cc, &resp, &v);

        status = or_outcome_status(&v, cases[i].status, cases[i].transport);

        w = or_outcome_writes(&v, status, cases[i].transport,
                              &lo_confs[cases[i].lo], 0, 0, 0);

        or_is_int(w.mask, cases[i].mask, "writes: %s (%s)", cases[i].name,
                  or_reason_name(v.reason));
        or_is_str(or_scope_name(w.scope), or_scope_name(cases[i].scope),
                  "scope: %s", cases[i].name);
    }
}


/*
 * skip_breaker (R-CD-5) only ever comes with a verdict the breaker does
 * not count: for every reason, with counts_for_breaker forced on, a
 * cooldown result with skip_breaker never meets OR_W_BREAKER.
 */

static void
test_skip_breaker(void)
{
    int                   r, bad;
    or_verdict_t          v;
    or_conn_state_t       st;
    or_cooldown_conf_t    conf;
    or_outcome_writes_t   w;
    or_cooldown_result_t  res;

    or_cooldown_conf_init(&conf);
    or_cooldown_conf_fill(&conf, OR_KIND_APIKEY);

    bad = 0;

    for (r = 0; r < OR_REASON_COUNT; r++) {
        verdict_of(&v, (or_reason_e) r, S(NONE), 1);
        memset(&st, 0, sizeof(st));

        w = or_outcome_writes(&v, 503, OR_TRANSPORT_OK, &lo_confs[LO_OFF], 0,
                              0, 0);
        or_cooldown_fail(&conf, &st, &v, 503, T0, T0, &res);

        if (res.skip_breaker && (w.mask & W_BR)) {
            bad++;
        }

        if (r == R(CONCURRENCY_LIMITED)) {
            or_ok(res.skip_breaker && !(w.mask & W_BR),
                  "concurrency limit: skip_breaker set, no breaker write");
        }
    }

    or_is_int(bad, 0, "no reason has skip_breaker together with a "
              "breaker write");
}


/* OR_W_SIBLINGS is the precondition; or_egress_siblings() picks */

static void
test_siblings_split(void)
{
    size_t               n;
    or_verdict_t         v;
    unsigned char        cool[3];
    or_class_conf_t      cc;
    or_egress_conn_t     failing, sibs[3];
    or_outcome_writes_t  w;

    or_class_conf_init(&cc, "generic", 7);
    cc.egress_bucketed = 1;

    failing.key = "proxy-a";
    failing.key_len = 7;
    failing.disable_cooling = 0;

    sibs[0].key = "proxy-a";
    sibs[0].key_len = 7;
    sibs[0].disable_cooling = 0;
    sibs[1].key = "proxy-b";
    sibs[1].key_len = 7;
    sibs[1].disable_cooling = 0;
    sibs[2].key = "proxy-a";
    sibs[2].key_len = 7;
    sibs[2].disable_cooling = 1;

    verdict_of(&v, R(RATE_LIMIT_EXCEEDED), S(NONE), 0);
    w = or_outcome_writes(&v, 429, OR_TRANSPORT_OK, &lo_confs[LO_OFF], 0, 1,
                          1);
    n = or_egress_siblings(&cc, 429, &v, &failing, sibs, 3, cool);
    or_ok((w.mask & W_SB) && n == 1 && cool[0] && !cool[1] && !cool[2],
          "429 rate limit: siblings asked, the same egress key picked");

    verdict_of(&v, R(SERVER_ERROR), S(NONE), 1);
    w = or_outcome_writes(&v, 503, OR_TRANSPORT_OK, &lo_confs[LO_OFF], 0, 1,
                          1);
    n = or_egress_siblings(&cc, 503, &v, &failing, sibs, 3, cool);
    or_ok((w.mask & W_SB) && n == 0,
          "503: siblings asked, or_egress_siblings picks none");
}


static void
test_success_writes(void)
{
    unsigned  i, expect;

    for (i = 0; i < 16; i++) {
        expect = ((i & 1) ? W_BR : 0) | ((i & 2) ? W_CN : 0)
                 | ((i & 4) ? W_LO : 0) | ((i & 8) ? W_RJ : 0);

        or_is_int(or_outcome_success_writes(i & 1, (i & 2) != 0,
                                            (i & 4) != 0, (i & 8) != 0),
                  expect, "success touches what planning saw: breaker %d "
                  "conn %d lockout %d rejected %d", (i & 1) != 0,
                  (i & 2) != 0, (i & 4) != 0, (i & 8) != 0);
    }
}


static void
test_hold(void)
{
    size_t  i;

    static const struct {
        int          status;
        int          es;
        int          probe;
        int          cont;
        or_hold_e    hold;
        const char  *name;
    } cases[] = {
        { 500, 0, 0, 0, OR_HOLD_ERROR, "500 is held" },
        { 503, 1, 1, 1, OR_HOLD_ERROR, "a 503 stream is held as an error" },
        { 429, 0, 1, 0, OR_HOLD_ERROR,
          "429 held even when no attempt may follow" },
        { 400, 0, 0, 0, OR_HOLD_ERROR, "400 is held (body decides)" },
        { 404, 0, 0, 0, OR_HOLD_ERROR, "404 is held" },
        { 200, 1, 1, 1, OR_HOLD_PROBE,
          "event stream, probe on, may continue: probe" },
        { 200, 1, 1, 0, OR_HOLD_COMMIT,
          "event stream, probe on, last attempt: commit" },
        { 200, 1, 0, 1, OR_HOLD_COMMIT, "event stream, probe off: commit" },
        { 200, 0, 1, 1, OR_HOLD_COMMIT, "not a stream: commit" },
        { 201, 1, 1, 1, OR_HOLD_PROBE,
          "any status below 400 may be probed (201)" },
        { 399, 1, 1, 1, OR_HOLD_PROBE, "399 stream: probe" },
        { 399, 0, 0, 0, OR_HOLD_COMMIT, "399: commit" },
        { 204, 0, 1, 1, OR_HOLD_COMMIT, "204: commit" }
    };

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        or_is_int(or_hold_decide(cases[i].status, cases[i].es,
                                 cases[i].probe, cases[i].cont),
                  cases[i].hold, "hold: %s", cases[i].name);
    }
}


static void
test_event_stream(void)
{
    size_t  i;

    static const struct {
        const char  *ct;
        int          yes;
    } cases[] = {
        { "text/event-stream", 1 },
        { "text/event-stream; charset=utf-8", 1 },
        { "Text/Event-Stream", 1 },
        { "TEXT/EVENT-STREAM", 1 },
        { "text/event-streams", 1 },    /* a prefix test, as before */
        { "text/event", 0 },
        { "text/event-strean", 0 },
        { "application/json", 0 },
        { " text/event-stream", 0 },
        { "", 0 }
    };

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        or_is_int(or_hold_is_event_stream(cases[i].ct, strlen(cases[i].ct)),
                  cases[i].yes, "event stream: \"%s\"", cases[i].ct);
    }

    or_is_int(or_hold_is_event_stream(NULL, 0), 0, "event stream: none");
    or_is_int(or_hold_is_event_stream("text/event-stream", 16), 0,
              "event stream: the length bounds the test");
}


typedef struct {
    const char     *name;
    or_breaker_t    cb;
    int             gate;           /* gate on in the settings */
    int             no_conf;
    or_msec_t       now;
    int             settled;
    int             idle;
} breaker_idle_case_t;


static void
test_breaker_idle(void)
{
    size_t                       i;
    or_breaker_t                 copy;
    or_breaker_conf_t            conf, gate, *cf;
    const breaker_idle_case_t   *c;

    /* apikey: reset 30 s, quiet period 16 x 30 s = 8 min */

    static const breaker_idle_case_t  cases[] = {
        { "all zero", { .state = OR_CB_CLOSED }, 0, 0, T0, 1, 1 },
        { "CLOSED with last failure time and reason (diagnostics)",
          { .last_failure_at = T0 - SEC,
            .last_reason = OR_REASON_SERVER_ERROR }, 0, 0, T0, 1, 1 },
        { "CLOSED with a failure count",
          { .failures = 1, .last_failure_at = T0 - SEC }, 0, 0, T0, 0, 0 },
        { "CLOSED with failures past the quiet period: forgotten",
          { .failures = 3, .last_failure_at = T0 - 8 * MIN }, 0, 0, T0,
          1, 0 },
        { "CLOSED with failures past the quiet period, no settings: kept",
          { .failures = 3, .last_failure_at = T0 - 8 * MIN }, 0, 1, T0,
          0, 0 },
        { "CLOSED, epoch 3 (a tombstone)", { .epoch = 3 }, 0, 0, T0, 1, 0 },
        { "CLOSED, gate epoch 1 (a tombstone)", { .gate_epoch = 1 }, 0, 0,
          T0, 1, 0 },
        { "CLOSED with open_cycles (next hold would be longer)",
          { .open_cycles = 1 }, 0, 0, T0, 0, 0 },
        { "CLOSED with a failure time in the gate ring",
          { .ring = { T0 - SEC }, .ring_len = 1 }, 1, 0, T0, 0, 0 },
        { "CLOSED, gate active", { .gate_until = T0 + SEC }, 1, 0, T0,
          0, 0 },
        { "CLOSED, gate time left with the gate off: still kept",
          { .gate_until = T0 + SEC }, 0, 0, T0, 0, 0 },
        { "CLOSED, gate over", { .gate_until = T0 }, 1, 0, T0, 1, 1 },
        { "DEGRADED", { .state = OR_CB_DEGRADED, .failures = 7,
                        .last_failure_at = T0 - SEC }, 0, 0, T0, 0, 0 },
        { "DEGRADED past the quiet period: closes on read (new epoch)",
          { .state = OR_CB_DEGRADED, .failures = 7,
            .last_failure_at = T0 - 8 * MIN }, 0, 0, T0, 1, 0 },
        { "OPEN", { .state = OR_CB_OPEN, .opened_at = T0 - SEC,
                    .open_until = T0 + SEC, .failures = 12 }, 0, 0, T0,
          0, 0 },
        { "OPEN past its hold (HALF_OPEN on read)",
          { .state = OR_CB_OPEN, .opened_at = T0 - 30 * SEC,
            .open_until = T0 - 1, .failures = 12 }, 0, 0, T0, 0, 0 },
        { "HALF_OPEN", { .state = OR_CB_HALF_OPEN, .probe_until = T0 + SEC,
                         .failures = 12 }, 0, 0, T0, 0, 0 }
    };

    or_breaker_conf_init(&conf);
    or_breaker_conf_fill(&conf, OR_KIND_APIKEY);
    or_breaker_conf_init(&gate);
    gate.gate_enabled = 1;
    or_breaker_conf_fill(&gate, OR_KIND_APIKEY);

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        c = &cases[i];
        cf = c->no_conf ? NULL : (c->gate ? &gate : &conf);
        copy = c->cb;

        or_is_int(or_breaker_settled(cf, &c->cb, c->now), c->settled,
                  "breaker settled: %s", c->name);
        or_is_int(or_breaker_idle(cf, &c->cb, c->now), c->idle,
                  "breaker idle: %s", c->name);
        or_ok(or_breaker_equal(&copy, &c->cb),
              "breaker idle tests change nothing: %s", c->name);
    }
}


static void
test_breaker_idle_sequences(void)
{
    int                  i;
    or_msec_t            t, ra;
    or_breaker_t         cb;
    or_breaker_conf_t    conf, gate;
    or_breaker_result_t  res;

    or_breaker_conf_init(&conf);
    or_breaker_conf_fill(&conf, OR_KIND_APIKEY);
    or_breaker_conf_init(&gate);
    gate.gate_enabled = 1;
    or_breaker_conf_fill(&gate, OR_KIND_APIKEY);

    /* one failure, one success, never opened: idle */

    memset(&cb, 0, sizeof(cb));
    or_breaker_failure(&conf, &cb, OR_REASON_SERVER_ERROR, T0, T0, &res);
    or_ok(!or_breaker_settled(&conf, &cb, T0),
          "breaker seq: after a failure, not settled");
    or_breaker_success(&conf, &cb, T0 + SEC, T0 + SEC, &res);
    or_ok(or_breaker_settled(&conf, &cb, T0 + SEC)
          && or_breaker_idle(&conf, &cb, T0 + SEC),
          "breaker seq: failure then success (never opened): idle");

    /* fail until open, wait, probe, success */

    memset(&cb, 0, sizeof(cb));

    for (i = 0; i < conf.open_threshold; i++) {
        or_breaker_failure(&conf, &cb, OR_REASON_SERVER_ERROR, T0, T0,
                           &res);
        if (i == conf.degrade_threshold - 1) {
            or_ok(!or_breaker_settled(&conf, &cb, T0),
                  "breaker seq: DEGRADED is not settled");
        }
    }

    or_ok(cb.state == OR_CB_OPEN && !or_breaker_settled(&conf, &cb, T0),
          "breaker seq: OPEN is not settled");

    t = T0 + conf.reset_ms;
    or_ok(!or_breaker_settled(&conf, &cb, t),
          "breaker seq: lapsed OPEN (HALF_OPEN) is not settled");

    or_is_int(or_breaker_admit(&conf, &cb, t, &ra), OR_CB_PROBE,
              "breaker seq: the probe is admitted");
    or_ok(!or_breaker_settled(&conf, &cb, t + 1),
          "breaker seq: probe in flight is not settled");

    /* a success of an attempt started before the trip is stale */
    or_breaker_success(&conf, &cb, T0 - 1, t + 2, &res);
    or_ok(cb.state == OR_CB_HALF_OPEN && !or_breaker_settled(&conf, &cb,
                                                             t + 2),
          "breaker seq: a stale success leaves it not settled");

    or_breaker_success(&conf, &cb, t, t + 3, &res);
    or_is_int(cb.state, OR_CB_CLOSED, "breaker seq: probe success closes");
    or_ok(or_breaker_settled(&conf, &cb, t + 3),
          "breaker seq: probe success: settled (delete when node-local)");
    or_ok(!or_breaker_idle(&conf, &cb, t + 3),
          "breaker seq: probe success: not idle (epoch %u beats a stale "
          "OPEN copy)", cb.epoch);

    /* the probe fails instead */

    memset(&cb, 0, sizeof(cb));

    for (i = 0; i < conf.open_threshold; i++) {
        or_breaker_failure(&conf, &cb, OR_REASON_SERVER_ERROR, T0, T0,
                           &res);
    }

    (void) or_breaker_admit(&conf, &cb, t, &ra);
    or_breaker_failure(&conf, &cb, OR_REASON_SERVER_ERROR, t, t + 3, &res);
    or_ok(cb.state == OR_CB_OPEN && !or_breaker_settled(&conf, &cb, t + 3),
          "breaker seq: probe failure re-opens, not settled");

    /* DEGRADED recovers by successes: closed with a new epoch */

    memset(&cb, 0, sizeof(cb));

    for (i = 0; i < conf.degrade_threshold; i++) {
        or_breaker_failure(&conf, &cb, OR_REASON_SERVER_ERROR, T0, T0,
                           &res);
    }

    for (i = 0; i < conf.recovery_successes - 1; i++) {
        or_breaker_success(&conf, &cb, T0 + SEC, T0 + SEC, &res);
        or_ok(!or_breaker_settled(&conf, &cb, T0 + SEC),
              "breaker seq: DEGRADED after %d successes: not settled",
              i + 1);
    }

    or_breaker_success(&conf, &cb, T0 + SEC, T0 + SEC, &res);
    or_ok(cb.state == OR_CB_CLOSED && or_breaker_settled(&conf, &cb, T0 + SEC)
          && !or_breaker_idle(&conf, &cb, T0 + SEC),
          "breaker seq: DEGRADED recovered: settled, not idle");

    /* the window gate: a failure is in the ring until a success */

    memset(&cb, 0, sizeof(cb));
    or_breaker_failure(&gate, &cb, OR_REASON_SERVER_ERROR, T0, T0, &res);
    or_breaker_failure(&gate, &cb, OR_REASON_SERVER_ERROR, T0, T0, &res);
    or_breaker_success(&gate, &cb, T0 + SEC, T0 + SEC, &res);
    or_ok(cb.failures == 1 && !or_breaker_settled(&gate, &cb, T0 + SEC),
          "breaker seq: gate on, two failures one success: not settled");
    or_breaker_success(&gate, &cb, T0 + 2 * SEC, T0 + 2 * SEC, &res);
    or_ok(or_breaker_settled(&gate, &cb, T0 + 2 * SEC)
          && !or_breaker_idle(&gate, &cb, T0 + 2 * SEC),
          "breaker seq: gate ring cleared by a success: settled, not idle "
          "(gate epoch %u)", cb.gate_epoch);
}


typedef struct {
    const char       *name;
    or_conn_state_t   st;
    int               settled;
    int               idle;
} conn_idle_case_t;


static void
test_cooldown_idle(void)
{
    size_t                    i;
    or_conn_state_t           copy;
    const conn_idle_case_t   *c;

    static const conn_idle_case_t  cases[] = {
        { "all zero", { .failures = 0 }, 1, 1 },
        { "cooling", { .until = T0 + SEC, .mark_at = T0 - SEC,
                       .failures = 1, .backoff_level = 1,
                       .last_error_at = T0 - SEC }, 0, 0 },
        { "cooldown over, level and mark still there",
          { .until = T0 - SEC, .mark_at = T0 - 4 * SEC, .failures = 1,
            .backoff_level = 1, .last_error_at = T0 - 4 * SEC }, 0, 0 },
        { "only an expired until left", { .until = T0 - 1 }, 1, 1 },
        { "until exactly now", { .until = T0 }, 1, 1 },
        { "until one ms ahead", { .until = T0 + 1 }, 0, 0 },
        { "terminal banned", { .terminal = OR_TERMINAL_BANNED,
                               .terminal_at = T0 - SEC }, 0, 0 },
        { "terminal expired, nothing else",
          { .terminal = OR_TERMINAL_EXPIRED }, 0, 0 },
        { "mark_at only (a burst still absorbed)", { .mark_at = T0 - SEC },
          0, 0 },
        { "failure count only", { .failures = 1 }, 0, 0 },
        { "backoff level only", { .backoff_level = 2 }, 0, 0 },
        { "expired retries only", { .expired_retries = 1 }, 0, 0 },
        { "rejected count only", { .rejected_count = 1 }, 0, 0 },
        { "last error only", { .last_error_at = T0 - SEC,
                               .last_status = 503 }, 0, 0 },
        { "clear epoch (cleared by a success)", { .clear_epoch = 1 }, 1, 0 },
        { "reset epoch (operator reset)", { .reset_epoch = 1 }, 1, 0 }
    };

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        c = &cases[i];
        copy = c->st;

        or_is_int(or_cooldown_settled(&c->st, T0), c->settled,
                  "conn settled: %s", c->name);
        or_is_int(or_cooldown_idle(&c->st, T0), c->idle,
                  "conn idle: %s", c->name);
        or_ok(or_cooldown_equal(&copy, &c->st),
              "conn idle tests change nothing: %s", c->name);
    }
}


static void
test_cooldown_idle_sequences(void)
{
    int                   i;
    or_verdict_t          v;
    or_conn_state_t       st;
    or_cooldown_conf_t    conf;
    or_cooldown_result_t  res;

    or_cooldown_conf_init(&conf);
    or_cooldown_conf_fill(&conf, OR_KIND_APIKEY);

    /* a 503 cools; the cooldown runs out; a success clears */

    memset(&st, 0, sizeof(st));
    verdict_of(&v, R(SERVER_ERROR), S(NONE), 1);
    or_cooldown_fail(&conf, &st, &v, 503, T0, T0, &res);
    or_ok(res.action == OR_CD_COOLDOWN && !or_cooldown_settled(&st, T0),
          "conn seq: cooling after a 503: not settled");
    or_ok(!or_cooldown_settled(&st, T0 + MIN),
          "conn seq: cooldown over, backoff level %u left: not settled",
          st.backoff_level);

    /* stale: the attempt started before the failure was recorded */
    or_is_int(or_cooldown_success(&st, T0 - 1, T0 + MIN), 0,
              "conn seq: a stale success clears nothing");
    or_ok(!or_cooldown_settled(&st, T0 + MIN),
          "conn seq: after a stale success: not settled");

    or_is_int(or_cooldown_success(&st, T0 + MIN, T0 + MIN), 1,
              "conn seq: a later success clears");
    or_ok(or_cooldown_settled(&st, T0 + MIN),
          "conn seq: cleared by a success: settled (delete when "
          "node-local)");
    or_ok(!or_cooldown_idle(&st, T0 + MIN),
          "conn seq: cleared by a success: not idle (clear epoch %u)",
          st.clear_epoch);

    /* a success while the cooldown still runs clears it too */

    memset(&st, 0, sizeof(st));

    for (i = 0; i < 3; i++) {
        or_cooldown_fail(&conf, &st, &v, 503, T0 + i * MIN, T0 + i * MIN,
                         &res);
    }

    or_is_int(or_cooldown_success(&st, T0 + 2 * MIN + 1, T0 + 2 * MIN + 1),
              1, "conn seq: a success during the cooldown clears");
    or_ok(or_cooldown_settled(&st, T0 + 2 * MIN + 1),
          "conn seq: cleared mid-cooldown: settled");

    /* terminal: a success never clears it */

    memset(&st, 0, sizeof(st));
    verdict_of(&v, R(BANNED), S(NONE), 0);
    or_cooldown_fail(&conf, &st, &v, 403, T0, T0, &res);
    (void) or_cooldown_success(&st, T0 + SEC, T0 + SEC);
    or_ok(st.terminal == OR_TERMINAL_BANNED
          && !or_cooldown_settled(&st, T0 + SEC),
          "conn seq: banned, then a success: terminal stays, not settled");

    or_is_int(or_cooldown_reset(&st), 1, "conn seq: an operator reset");
    or_ok(or_cooldown_settled(&st, T0 + SEC) && !or_cooldown_idle(&st,
                                                                 T0 + SEC),
          "conn seq: after a reset: settled, not idle (reset epoch)");

    /* concurrency limit: not counted, yet an error to show */

    memset(&st, 0, sizeof(st));
    verdict_of(&v, R(CONCURRENCY_LIMITED), S(NONE), 0);
    or_cooldown_fail(&conf, &st, &v, 429, T0, T0, &res);
    or_ok(!or_cooldown_settled(&st, T0 + MIN),
          "conn seq: concurrency limit over: last error left, not settled");
    or_is_int(or_cooldown_success(&st, T0 + MIN, T0 + MIN), 1,
              "conn seq: a success clears the concurrency limit");
    or_ok(or_cooldown_settled(&st, T0 + MIN),
          "conn seq: concurrency limit cleared: settled");

    /* an ignored verdict leaves an all-zero record: idle */

    memset(&st, 0, sizeof(st));
    verdict_of(&v, R(BAD_REQUEST), S(NONE), 0);
    or_cooldown_fail(&conf, &st, &v, 400, T0, T0, &res);
    or_ok(res.action == OR_CD_IGNORED && or_cooldown_idle(&st, T0),
          "conn seq: an ignored 400 leaves it idle");
}


typedef struct {
    const char     *name;
    or_lockout_t    lo;
    int             settled;
    int             idle;
} lockout_idle_case_t;


static void
test_lockout_idle(void)
{
    size_t                       i;
    or_lockout_t                 copy;
    const lockout_idle_case_t   *c;

    static const lockout_idle_case_t  cases[] = {
        { "all zero", { .failures = 0 }, 1, 1 },
        { "locked", { .failures = 1, .until = T0 + SEC,
                      .mark_at = T0 - SEC }, 0, 0 },
        { "lock over, failure count left (escalation)",
          { .failures = 1, .until = T0 - SEC, .mark_at = T0 - 3 * MIN },
          0, 0 },
        { "until ahead without failures", { .until = T0 + SEC }, 0, 0 },
        { "until past, nothing else", { .until = T0 - SEC }, 1, 1 },
        { "mark_at only", { .mark_at = T0 - SEC }, 0, 0 },
        { "decay_at only (nothing to halve)", { .decay_at = T0 - SEC },
          1, 1 },
        { "diagnostics only", { .last_failure_at = T0 - SEC,
                                .last_status = 429,
                                .reason = OR_REASON_RATE_LIMIT_EXCEEDED,
                                .scope = OR_SCOPE_QUOTA_FAMILY }, 1, 1 },
        { "tombstone (empty, epoch 2)", { .epoch = 2 }, 1, 0 }
    };

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        c = &cases[i];
        copy = c->lo;

        or_is_int(or_lockout_settled(&c->lo, T0), c->settled,
                  "lockout settled: %s", c->name);
        or_is_int(or_lockout_idle(&c->lo, T0), c->idle,
                  "lockout idle: %s", c->name);
        or_ok(or_lockout_equal(&copy, &c->lo),
              "lockout idle tests change nothing: %s", c->name);
    }
}


static void
test_lockout_idle_sequences(void)
{
    or_verdict_t         v;
    or_lockout_t         lo;
    or_lockout_conf_t    rej;
    or_lockout_result_t  res;

    verdict_of(&v, R(RATE_LIMIT_EXCEEDED), S(NONE), 0);

    /* one failure, a success after it: decays to empty (tombstone) */

    memset(&lo, 0, sizeof(lo));
    or_lockout_fail(&lo_confs[LO_ON], &lo, &v, 429, S(QUOTA_FAMILY), T0, T0,
                    &res);
    or_ok(res.action == OR_LO_LOCKED && !or_lockout_settled(&lo, T0),
          "lockout seq: locked: not settled");
    or_ok(!or_lockout_settled(&lo, T0 + 3 * MIN),
          "lockout seq: lock over, failure count left: not settled");
    or_is_int(or_lockout_success(&lo, T0, T0 + 3 * MIN), OR_LO_KEPT,
              "lockout seq: a success started at the failure is stale");
    or_is_int(or_lockout_success(&lo, T0 + 1, T0 + 3 * MIN), OR_LO_DELETED,
              "lockout seq: a later success empties it");
    or_ok(or_lockout_settled(&lo, T0 + 3 * MIN)
          && !or_lockout_idle(&lo, T0 + 3 * MIN),
          "lockout seq: emptied by a success: settled, not idle (epoch %u)",
          lo.epoch);
    or_ok(or_lockout_evictable(&lo_confs[LO_ON], &lo, T0 + 3 * MIN),
          "lockout seq: the emptied entry is evictable too");

    /* two failures: the first success halves, the second empties */

    memset(&lo, 0, sizeof(lo));
    or_lockout_fail(&lo_confs[LO_ON], &lo, &v, 429, S(QUOTA_FAMILY), T0, T0,
                    &res);
    or_lockout_fail(&lo_confs[LO_ON], &lo, &v, 429, S(QUOTA_FAMILY),
                    T0 + 3 * MIN, T0 + 3 * MIN, &res);
    or_is_int(lo.failures, 2, "lockout seq: two counted failures");
    or_is_int(or_lockout_success(&lo, T0 + 10 * MIN, T0 + 10 * MIN),
              OR_LO_HALVED, "lockout seq: a success halves");
    or_ok(!or_lockout_settled(&lo, T0 + 10 * MIN),
          "lockout seq: halved: not settled");
    or_is_int(or_lockout_success(&lo, T0 + 11 * MIN, T0 + 11 * MIN),
              OR_LO_DELETED, "lockout seq: the next success empties it");
    or_ok(or_lockout_settled(&lo, T0 + 11 * MIN),
          "lockout seq: emptied: settled");

    /* the request_rejected profile, same struct and predicates */

    or_lockout_conf_rejected(&rej);
    verdict_of(&v, R(REQUEST_REJECTED), S(NONE), 0);
    memset(&lo, 0, sizeof(lo));
    or_lockout_fail(&rej, &lo, &v, 403, S(MODEL), T0, T0, &res);
    or_ok(!or_lockout_settled(&lo, T0 + MIN),
          "rejected seq: rejected: not settled");
    or_is_int(or_lockout_success(&lo, T0 + MIN, T0 + MIN), OR_LO_DELETED,
              "rejected seq: a success empties it");
    or_ok(or_lockout_settled(&lo, T0 + MIN)
          && !or_lockout_idle(&lo, T0 + MIN),
          "rejected seq: emptied: settled, not idle");
}
