/*
 * Copyright (C) ngx_omniroute authors
 *
 * Model lockout: SPEC R-ML-1 .. R-ML-4 (and the request_rejected profile
 * of R-CD-6).
 */


#include <string.h>

#include "or_test.h"
#include "or_lockout.h"


#define SEC   1000LL
#define MIN   (60 * SEC)
#define HOUR  (60 * MIN)
#define T0    1000000000LL


static void conf_on(or_lockout_conf_t *conf);
static void fail_at(const or_lockout_conf_t *conf, or_lockout_t *lo,
    int status, or_msec_t now, or_lockout_result_t *res);
static const char *key(char *buf, size_t size, int status,
    or_scope_e rule, const char *model);
static void test_defaults(void);
static void test_conf_check(void);
static void test_scope(void);
static void test_base_model(void);
static void test_keys(void);
static void test_ladder(void);
static void test_escalation(void);
static void test_decay(void);
static void test_burst_and_hints(void);
static void test_rejected_profile(void);


static const or_family_rule_t  families[] = {
    { "gpt-5", NULL },
    { "gpt-5-codex*", "codex" },
    { "claude-", "anthropic" }
};


static void test_capped(void);


int
main(void)
{
    test_defaults();
    test_conf_check();
    test_scope();
    test_base_model();
    test_keys();
    test_ladder();
    test_escalation();
    test_decay();
    test_burst_and_hints();
    test_rejected_profile();
    test_capped();

    return or_done();
}


static void
conf_on(or_lockout_conf_t *conf)
{
    or_lockout_conf_init(conf);
    conf->enabled = 1;
    or_lockout_conf_fill(conf);
}


static void
fail_at(const or_lockout_conf_t *conf, or_lockout_t *lo, int status,
    or_msec_t now, or_lockout_result_t *res)
{
    or_verdict_t  v;

    memset(&v, 0, sizeof(v));
    v.reason = OR_REASON_RATE_LIMIT_EXCEEDED;
    v.cooldown_ms = OR_MSEC_NONE;
    v.hint_ms = OR_MSEC_NONE;

    or_lockout_fail(conf, lo, &v, status, or_lockout_scope(status,
                    OR_SCOPE_NONE), now, now, res);
}


static const char *
key(char *buf, size_t size, int status, or_scope_e rule, const char *model)
{
    size_t  n;

    n = or_lockout_key(buf, size, "openai", 6, "acct1", 5, model,
                       strlen(model), or_lockout_scope(status, rule),
                       families, sizeof(families) / sizeof(families[0]));

    return n == 0 ? NULL : buf;
}


static void
test_defaults(void)
{
    size_t             i;
    or_lockout_conf_t  conf;

    static const struct {
        int  status;
        int  applies;
    } codes[] = {
        { 403, 1 }, { 404, 1 }, { 429, 1 }, { 502, 1 }, { 503, 1 },
        { 504, 1 }, { 500, 0 }, { 402, 0 }, { 400, 0 }, { 401, 0 }
    };

    or_lockout_conf_init(&conf);
    or_lockout_conf_fill(&conf);

    or_is_int(conf.enabled, 0, "R-ML-1 model lockout off by default");
    or_is_int(or_lockout_applies(&conf, 429, OR_SCOPE_NONE), 0,
              "R-ML-1 disabled lockout applies to nothing");
    or_is_int(or_lockout_applies(&conf, 429, OR_SCOPE_MODEL), 0,
              "R-ML-1 disabled lockout ignores rule scopes too");
    or_is_int(conf.base_ms, 120 * SEC, "R-ML-3 base_cooldown 120 s");
    or_is_int(conf.max_ms, 30 * MIN, "R-ML-3 max_cooldown 30 min");
    or_is_int(conf.max_backoff_steps, 10, "R-ML-3 max_backoff_steps 10");
    or_is_int(conf.exponential, 1, "R-ML-3 exponential on");
    or_is_int(conf.n_codes, 6, "R-ML-3 six default error_codes");
    or_is_int(conf.window_ms, 30 * MIN,
              "R-ML-4 escalation window defaults to max_cooldown");
    or_ok(or_lockout_conf_check(&conf) == NULL, "R-ML-3 defaults valid");

    conf.enabled = 1;

    for (i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
        or_is_int(or_lockout_applies(&conf, codes[i].status, OR_SCOPE_NONE),
                  codes[i].applies, "R-ML-3 status %d %s a default error "
                  "code", codes[i].status,
                  codes[i].applies ? "is" : "is not");
    }

    or_is_int(or_lockout_applies(&conf, 400, OR_SCOPE_MODEL), 1,
              "R-ML-2 an explicit rule scope applies beyond error_codes");
    or_is_int(or_lockout_applies(&conf, 400, OR_SCOPE_CONNECTION), 0,
              "R-ML-2 a connection rule scope is not a model lockout");
}


static void
test_conf_check(void)
{
    or_lockout_conf_t  conf;

    conf_on(&conf);
    conf.max_ms = conf.base_ms - 1;
    or_ok(or_lockout_conf_check(&conf) != NULL,
          "R-ML-3 max_cooldown below base_cooldown is rejected");

    conf_on(&conf);
    conf.max_ms = conf.base_ms;
    or_ok(or_lockout_conf_check(&conf) == NULL,
          "R-ML-3 max_cooldown equal to base_cooldown is accepted");

    conf_on(&conf);
    conf.max_backoff_steps = 31;
    or_ok(or_lockout_conf_check(&conf) != NULL,
          "R-ML-3 max_backoff_steps above 30 is rejected");

    conf_on(&conf);
    conf.n_codes = 1;
    conf.codes[0] = 99;
    or_ok(or_lockout_conf_check(&conf) != NULL,
          "R-ML-3 error code 99 is rejected");

    conf_on(&conf);
    conf.n_codes = 17;
    or_ok(or_lockout_conf_check(&conf) != NULL,
          "R-ML-3 more than 16 error codes is rejected");

    conf_on(&conf);
    conf.base_ms = 0;
    or_ok(or_lockout_conf_check(&conf) != NULL,
          "R-ML-3 zero base_cooldown is rejected");
}


static void
test_scope(void)
{
    size_t  i;

    static const struct {
        int         status;
        or_scope_e  rule;
        or_scope_e  scope;
    } cases[] = {
        { 429, OR_SCOPE_NONE, OR_SCOPE_QUOTA_FAMILY },
        { 403, OR_SCOPE_NONE, OR_SCOPE_QUOTA_FAMILY },
        { 402, OR_SCOPE_NONE, OR_SCOPE_QUOTA_FAMILY },
        { 404, OR_SCOPE_NONE, OR_SCOPE_BASE_MODEL },
        { 500, OR_SCOPE_NONE, OR_SCOPE_MODEL },
        { 502, OR_SCOPE_NONE, OR_SCOPE_MODEL },
        { 503, OR_SCOPE_NONE, OR_SCOPE_MODEL },
        { 504, OR_SCOPE_NONE, OR_SCOPE_MODEL },
        { 429, OR_SCOPE_MODEL, OR_SCOPE_MODEL },
        { 503, OR_SCOPE_QUOTA_FAMILY, OR_SCOPE_QUOTA_FAMILY },
        { 429, OR_SCOPE_BASE_MODEL, OR_SCOPE_BASE_MODEL },
        { 429, OR_SCOPE_CONNECTION, OR_SCOPE_QUOTA_FAMILY }
    };

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        or_is_int(or_lockout_scope(cases[i].status, cases[i].rule),
                  cases[i].scope, "R-ML-2 status %d rule scope %s locks %s",
                  cases[i].status, or_scope_name(cases[i].rule),
                  or_scope_name(cases[i].scope));
    }
}


static void
test_base_model(void)
{
    size_t  i, n;
    char    buf[128];

    static const struct {
        const char  *model;
        const char  *base;
    } cases[] = {
        { "gpt-4o-2024-08-06", "gpt-4o" },
        { "gpt-4o-mini-2024-07-18", "gpt-4o-mini" },
        { "claude-3-5-sonnet-20241022", "claude-3-5-sonnet" },
        { "claude-3-5-sonnet-latest", "claude-3-5-sonnet" },
        { "claude-3-5-sonnet@20240620", "claude-3-5-sonnet" },
        { "gpt-4-0613", "gpt-4" },
        { "mistral-large-2411", "mistral-large" },
        { "gemini-1.5-pro-002", "gemini-1.5-pro" },
        { "llama3:8b", "llama3" },
        { "llama3.1:70b-instruct-q4_K_M", "llama3.1" },
        { "anthropic.claude-3-sonnet-20240229-v1:0",
          "anthropic.claude-3-sonnet" },
        { "o1-2024-12-17", "o1" },
        { "deepseek-chat", "deepseek-chat" },
        { "gpt-5", "gpt-5" },
        { "qwen3-235b-a22b", "qwen3-235b-a22b" },
        { "glm-4.5", "glm-4.5" },
        { "ft:gpt-4o:org:abc", "ft:gpt-4o:org:abc" },
        { "2024-08-06", "2024-08-06" },
        { ":tag", ":tag" },
        { "-latest", "-latest" }
    };

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        n = or_model_base(cases[i].model, strlen(cases[i].model));
        memcpy(buf, cases[i].model, n);
        buf[n] = '\0';
        or_is_str(buf, cases[i].base, "R-ML-2 base model of %s",
                  cases[i].model);
    }

    or_is_int(or_model_base("gpt-4o-2024-08-06xyz", 17), 6,
              "R-ML-2 base model works on a length, not a NUL");
}


static void
test_keys(void)
{
    char  buf[128];

    or_is_str(key(buf, sizeof(buf), 429, OR_SCOPE_NONE, "gpt-5.1-mini"),
              "openai:acct1:family:gpt-5",
              "R-ML-2 429 locks the quota family (gpt-5* of the "
              "connection)");
    or_is_str(key(buf, sizeof(buf), 403, OR_SCOPE_NONE, "gpt-5-codex-mini"),
              "openai:acct1:family:codex",
              "R-ML-2 longest family prefix wins, family name used");
    or_is_str(key(buf, sizeof(buf), 402, OR_SCOPE_NONE, "GPT-5-Pro"),
              "openai:acct1:family:gpt-5",
              "R-ML-2 family prefix match ignores ASCII case");
    or_is_str(key(buf, sizeof(buf), 429, OR_SCOPE_NONE, "o3"),
              "openai:acct1:family:o3",
              "R-ML-2 no family: the model is its own family");
    or_is_str(key(buf, sizeof(buf), 404, OR_SCOPE_NONE, "gpt-4o-2024-08-06"),
              "openai:acct1:base:gpt-4o", "R-ML-2 404 locks the base model");
    or_is_str(key(buf, sizeof(buf), 503, OR_SCOPE_NONE, "gpt-5.1-mini"),
              "openai:acct1:exact:gpt-5.1-mini",
              "R-ML-2 503 locks only the exact tuple");
    or_is_str(key(buf, sizeof(buf), 429, OR_SCOPE_MODEL, "gpt-5.1-mini"),
              "openai:acct1:exact:gpt-5.1-mini",
              "R-ML-2 explicit rule scope wins over the status");
    or_is_str(key(buf, 20, 503, OR_SCOPE_NONE, "gpt-5.1-mini"), NULL,
              "R-ML-1 key does not overflow a small buffer");
    or_is_int(or_lockout_key(buf, sizeof(buf), "p", 1, "c", 1, "m", 1,
                             OR_SCOPE_CONNECTION, NULL, 0), 0,
              "R-ML-1 no lockout key for connection scope");
    or_is_int(or_lockout_key(buf, sizeof(buf), "p", 1, "c", 1, "m", 1,
                             OR_SCOPE_MODEL, NULL, 0), 11,
              "R-ML-1 key length p:c:exact:m");
}


static void
test_ladder(void)
{
    size_t             i;
    or_lockout_conf_t  conf;

    static const struct {
        unsigned   n;
        or_msec_t  ms;
    } cases[] = {
        { 1, 120 * SEC }, { 2, 240 * SEC }, { 3, 480 * SEC },
        { 4, 960 * SEC }, { 5, 30 * MIN }, { 11, 30 * MIN },
        { 1000, 30 * MIN }
    };

    conf_on(&conf);

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        or_is_int(or_lockout_cooldown_ms(&conf, cases[i].n), cases[i].ms,
                  "R-ML-3 failure %u locks %lld ms (120 s x 2^(n-1), max "
                  "30 min)", cases[i].n, (long long) cases[i].ms);
    }

    conf.exponential = 0;
    or_is_int(or_lockout_cooldown_ms(&conf, 6), 120 * SEC,
              "R-ML-3 exponential off: always base_cooldown");

    conf_on(&conf);
    conf.max_ms = HOUR;
    conf.max_backoff_steps = 1;
    or_is_int(or_lockout_cooldown_ms(&conf, 5), 240 * SEC,
              "R-ML-3 max_backoff_steps bounds the growth");
}


static void
test_escalation(void)
{
    or_lockout_t         lo;
    or_lockout_conf_t    conf;
    or_lockout_result_t  res;
    or_msec_t            t;

    conf_on(&conf);
    memset(&lo, 0, sizeof(lo));

    fail_at(&conf, &lo, 429, T0, &res);
    or_is_int(res.action, OR_LO_LOCKED, "R-ML-4 first failure locks");
    or_is_int(lo.until, T0 + 120 * SEC, "R-ML-4 first lockout 120 s");
    or_ok(or_lockout_active(&lo, T0 + 120 * SEC - 1),
          "R-ML-4 locked until expires_at");
    or_ok(!or_lockout_active(&lo, T0 + 120 * SEC),
          "R-ML-4 lazy expiry re-enables the model");
    or_is_int(lo.scope, OR_SCOPE_QUOTA_FAMILY, "R-ML-5 scope recorded");
    or_is_int(lo.reason, OR_REASON_RATE_LIMIT_EXCEEDED,
              "R-ML-5 reason recorded");

    t = lo.until + 10 * MIN;
    fail_at(&conf, &lo, 429, t, &res);
    or_is_int(lo.failures, 2,
              "R-ML-4 failure within the escalation window escalates");
    or_is_int(lo.until, t + 240 * SEC, "R-ML-4 second lockout 240 s");

    t = lo.until + 30 * MIN;
    fail_at(&conf, &lo, 429, t, &res);
    or_is_int(lo.failures, 3, "R-ML-4 window edge still escalates");

    t = lo.until + 30 * MIN + 1;
    fail_at(&conf, &lo, 429, t, &res);
    or_is_int(lo.failures, 1,
              "R-ML-4 failure after the escalation window starts over");
    or_is_int(lo.until, t + 120 * SEC, "R-ML-4 ... at 120 s again");

    or_ok(!or_lockout_evictable(&conf, &lo, lo.until + 30 * MIN),
          "R-ML-4 entry kept while it can still escalate");
    or_ok(or_lockout_evictable(&conf, &lo, lo.until + 30 * MIN + 1),
          "R-ML-4 entry evictable after the escalation window");

    or_is_int(or_lockout_clear(&lo), 1, "R-ML-5 re-enable clears the lock");
    or_ok(!or_lockout_active(&lo, t) && lo.failures == 0,
          "R-ML-5 re-enabled model is eligible");
    or_is_int(or_lockout_clear(&lo), 0, "R-ML-5 re-enable twice is a no-op");
}


static void
test_decay(void)
{
    int                  i;
    or_lockout_t         lo;
    or_lockout_conf_t    conf;
    or_lo_decay_e        d;
    or_msec_t            t;

    conf_on(&conf);
    memset(&lo, 0, sizeof(lo));
    t = T0;

    for (i = 0; i < 5; i++) {
        fail_at(&conf, &lo, 503, t, NULL);
        t = lo.until;
    }

    or_is_int(lo.failures, 5, "R-ML-4 five failures counted");

    d = or_lockout_success(&lo, T0, t + 1);
    or_is_int(d, OR_LO_KEPT,
              "R-ML-4 success of an attempt in flight during the last "
              "failure is stale");

    d = or_lockout_success(&lo, t + 1, t + 2);
    or_is_int(d, OR_LO_HALVED, "R-ML-4 success halves the count");
    or_is_int(lo.failures, 2, "R-ML-4 5 / 2 = 2 (floor)");
    d = or_lockout_success(&lo, t + 2, t + 3);
    or_ok(d == OR_LO_KEPT && lo.failures == 2,
          "R-ML-4 a success in flight during the last halving is stale "
          "(concurrent successes halve once)");
    d = or_lockout_success(&lo, t + 3, t + 4);
    or_is_int(lo.failures, 1, "R-ML-4 2 / 2 = 1");
    or_is_int(d, OR_LO_HALVED, "R-ML-4 count 1: entry stays");
    d = or_lockout_success(&lo, t + 5, t + 6);
    or_is_int(d, OR_LO_DELETED, "R-ML-4 at 0 the lockout is deleted");
    or_ok(lo.failures == 0 && lo.until == 0,
          "R-ML-4 deleted entry is empty");
    or_ok(or_lockout_evictable(&conf, &lo, t + 6),
          "R-ML-4 deleted entry is evictable");
    or_is_int(or_lockout_success(&lo, t + 7, t + 8), OR_LO_KEPT,
              "R-ML-4 success on an empty entry changes nothing");

    /* a success while still locked (another model of the family) */
    memset(&lo, 0, sizeof(lo));
    fail_at(&conf, &lo, 429, T0, NULL);
    or_is_int(or_lockout_success(&lo, T0 + 1, T0 + 2), OR_LO_DELETED,
              "R-ML-4 a single failure decays away on one success");
    or_ok(!or_lockout_active(&lo, T0 + 3),
          "R-ML-4 success decay can re-enable before the timer");
}


static void
test_burst_and_hints(void)
{
    int                  i;
    or_verdict_t         v;
    or_lockout_t         lo, once;
    or_lockout_conf_t    conf;
    or_lockout_result_t  res;

    conf_on(&conf);
    memset(&lo, 0, sizeof(lo));
    memset(&v, 0, sizeof(v));
    v.reason = OR_REASON_QUOTA_EXHAUSTED;
    v.cooldown_ms = OR_MSEC_NONE;
    v.hint_ms = OR_MSEC_NONE;

    for (i = 0; i < 10; i++) {
        or_lockout_fail(&conf, &lo, &v, 429, OR_SCOPE_QUOTA_FAMILY, T0 + i,
                        T0 + 100 + i, &res);
    }

    or_is_int(lo.failures, 1,
              "R-CD-4 R-ML-4 10 concurrent failures of a model count once");
    or_is_int(lo.until, T0 + 100 + 120 * SEC,
              "R-CD-4 R-ML-4 ... and lock 120 s from the first");
    or_is_int(res.action, OR_LO_ABSORBED, "R-CD-4 later ones absorbed");

    once = lo;
    or_lockout_fail(&conf, &lo, &v, 429, OR_SCOPE_QUOTA_FAMILY, T0 + 3,
                    T0 + 103, &res);
    or_ok(or_lockout_equal(&once, &lo) && !res.changed,
          "R-CD-4 duplicate lockout event changes nothing");

    v.hint_ms = HOUR;
    or_lockout_fail(&conf, &lo, &v, 429, OR_SCOPE_QUOTA_FAMILY,
                    T0 + 200 * SEC, T0 + 200 * SEC, &res);
    or_is_int(lo.until, T0 + 200 * SEC + HOUR,
              "R-ML-3 a longer upstream hint raises the lockout");

    memset(&lo, 0, sizeof(lo));
    v.hint_ms = OR_MSEC_NONE;
    v.cooldown_ms = 7 * MIN;
    or_lockout_fail(&conf, &lo, &v, 503, OR_SCOPE_MODEL, T0, T0, &res);
    or_is_int(lo.until, T0 + 7 * MIN,
              "R-ML-2 an explicit rule cooldown is used as is");
}


static void
test_rejected_profile(void)
{
    int                  i;
    or_msec_t            t;
    or_verdict_t         v;
    or_lockout_t         lo;
    or_lockout_conf_t    conf;
    or_lockout_result_t  res;

    static const or_msec_t  waits[] = {
        5 * MIN, 10 * MIN, 20 * MIN, 40 * MIN, 60 * MIN, 60 * MIN
    };

    or_lockout_conf_rejected(&conf);
    or_ok(or_lockout_conf_check(&conf) == NULL,
          "R-CD-6 request_rejected profile valid");
    or_is_int(conf.enabled, 1, "R-CD-6 request_rejected lock always on");

    memset(&lo, 0, sizeof(lo));
    memset(&v, 0, sizeof(v));
    v.reason = OR_REASON_REQUEST_REJECTED;
    v.cooldown_ms = OR_MSEC_NONE;
    v.hint_ms = OR_MSEC_NONE;
    t = T0;

    for (i = 0; i < (int) (sizeof(waits) / sizeof(waits[0])); i++) {
        or_lockout_fail(&conf, &lo, &v, 403, OR_SCOPE_MODEL, t, t, &res);
        or_is_int(res.cooldown_ms, waits[i],
                  "R-CD-6 request_rejected on a model %d: %lld ms, max 1 h",
                  i + 1, (long long) waits[i]);
        t = lo.until;
    }
}


/* issue 11: a built-in rule's long cooldown is capped by the lockout max */

static void
test_capped(void)
{
    or_verdict_t         v;
    or_lockout_t         lo;
    or_lockout_conf_t    conf;
    or_lockout_result_t  res;

    or_lockout_conf_init(&conf);
    or_lockout_conf_fill(&conf);       /* off: a rule's scope still locks */

    memset(&lo, 0, sizeof(lo));
    memset(&v, 0, sizeof(v));
    v.reason = OR_REASON_AUTH_ERROR;
    v.scope = OR_SCOPE_MODEL;
    v.cooldown_ms = 6 * HOUR;
    v.hint_ms = OR_MSEC_NONE;
    v.lockout_capped = 1;

    or_lockout_fail(&conf, &lo, &v, 403, OR_SCOPE_MODEL, T0, T0, &res);
    or_is_int(lo.until, T0 + 30 * 60 * SEC,
              "a built-in rule's 6 h is capped at the lockout max (30 min)");

    memset(&lo, 0, sizeof(lo));
    v.lockout_capped = 0;
    or_lockout_fail(&conf, &lo, &v, 403, OR_SCOPE_MODEL, T0, T0, &res);
    or_is_int(lo.until, T0 + 6 * HOUR,
              "R-CLASS-4 an operator rule keeps its exact cooldown");
}
