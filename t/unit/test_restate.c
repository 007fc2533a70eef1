/*
 * Copyright (C) ngx_omniroute authors
 *
 * Upstream status restatement (R-CLASS-1).
 */


#include "or_test.h"
#include "or_restate.h"


typedef struct {
    int           status;
    const char   *body;
    int           expected_status;
    int           expected_retry_after;
    const char   *expected_id;
    const char   *name;
} case_t;


static void run_cases(const or_restate_rule_t *rules, size_t n,
    const case_t *cases, size_t ncases);
static void test_builtin(void);
static void test_custom(void);
static void test_validate(void);


static const case_t  agentrouter_cases[] = {
    { 403, "{\"error\":{\"message\":\"用户额度不足, 剩余额度: $0.00\"}}",
      429, 60, "agentrouter-quota",
      "R-CLASS-1 agentrouter 403 用户额度不足 -> 429 Retry-After 60" },
    { 400, "{\"error\":\"额度不足\"}", 429, 60, "agentrouter-quota",
      "R-CLASS-1 agentrouter 400 额度不足 -> 429 Retry-After 60" },
    { 403, "额度不足", 429, 60, "agentrouter-quota",
      "R-CLASS-1 agentrouter 403 额度不足 -> 429 Retry-After 60" },
    { 403, "{\"error\":\"无权访问模型 claude-opus\"}", 403, -1, NULL,
      "R-CLASS-1 agentrouter 无权访问模型 is never restated" },
    { 403, "额度不足; 无权访问模型", 403, -1, NULL,
      "R-CLASS-1 exclude marker 无权访问模型 vetoes 额度不足" },
    { 429, "额度不足", 429, -1, NULL,
      "R-CLASS-1 429 is not a from-status: unchanged" },
    { 401, "额度不足", 401, -1, NULL,
      "R-CLASS-1 401 is not a from-status: unchanged" },
    { 500, "额度不足", 500, -1, NULL,
      "R-CLASS-1 500 is not a from-status: unchanged" },
    { 403, "quota exceeded", 403, -1, NULL,
      "R-CLASS-1 English quota text is not an agentrouter marker" },
    { 403, "用户额度不", 403, -1, NULL,
      "R-CLASS-1 body truncated inside the marker: unchanged" },
    { 403, "", 403, -1, NULL, "R-CLASS-1 empty body: unchanged" },
};


static void
run_cases(const or_restate_rule_t *rules, size_t n, const case_t *cases,
    size_t ncases)
{
    int           rc;
    size_t        i;
    or_restate_t  out;

    for (i = 0; i < ncases; i++) {
        rc = or_restate_apply(rules, n, cases[i].status, cases[i].body,
                              strlen(cases[i].body), &out);

        or_is_int(out.status, cases[i].expected_status, "%s: status",
                  cases[i].name);
        or_is_int(out.retry_after_s, cases[i].expected_retry_after,
                  "%s: Retry-After", cases[i].name);
        or_is_str(out.rule_id, cases[i].expected_id, "%s: rule id",
                  cases[i].name);
        or_is_int(rc, cases[i].expected_id != NULL, "%s: return",
                  cases[i].name);
    }
}


static void
test_builtin(void)
{
    size_t                    n;
    char                      body[64];
    or_restate_t              out;
    const or_restate_rule_t  *rules;

    rules = or_restate_builtin("agentrouter", 11, &n);

    or_ok(rules != NULL, "R-CLASS-1 agentrouter has a built-in rule");
    or_is_int(n, 1, "R-CLASS-1 agentrouter: one built-in rule");

    if (rules == NULL) {
        return;
    }

    or_is_str(rules[0].id, "agentrouter-quota", "R-CLASS-1 built-in rule id");
    or_is_int(rules[0].to_status, 429, "R-CLASS-1 built-in to 429");
    or_is_int(rules[0].retry_after_s, 60, "R-CLASS-1 built-in Retry-After 60");
    or_ok(or_restate_rule_validate(&rules[0]) == NULL,
          "R-CLASS-1 built-in rule is valid");

    run_cases(rules, n, agentrouter_cases,
              sizeof(agentrouter_cases) / sizeof(agentrouter_cases[0]));

    or_ok(or_restate_builtin("AgentRouter", 11, &n) == rules && n == 1,
          "R-CLASS-1 provider name is case-insensitive");
    or_ok(or_restate_builtin("openai", 6, &n) == NULL && n == 0,
          "R-CLASS-1 no built-in restatement for openai");
    or_ok(or_restate_builtin("agentrouterx", 11, &n) == rules,
          "R-CLASS-1 provider name bounded by its length");

    /* the body is never touched */
    strcpy(body, "用户额度不足");
    or_restate_apply(rules, n, 403, body, strlen(body), &out);
    or_is_str(body, "用户额度不足", "R-CLASS-1 body untouched");

    /* a NULL body cannot match a text marker */
    or_restate_apply(rules, 1, 403, NULL, 10, &out);
    or_is_int(out.status, 403, "R-CLASS-1 NULL body: unchanged");

    or_restate_apply(NULL, 3, 403, body, strlen(body), &out);
    or_is_int(out.status, 403, "R-CLASS-1 no rules: unchanged");
}


static void
test_custom(void)
{
    static const or_restate_rule_t  rules[] = {
        { "gw-529", { 529, 0 }, 503, { NULL }, { "permanent", NULL }, -1 },
        { "first", { 400, 0 }, 429, { "alpha", NULL }, { NULL }, 5 },
        { "second", { 400, 0 }, 503, { "alpha", "beta", NULL }, { NULL },
          10 },
        { "vetoed", { 409, 0 }, 429, { "gamma", NULL }, { "delta", NULL },
          1 },
        { "fallback", { 409, 0 }, 503, { "gamma", NULL }, { NULL }, 2 },
        { "sse", { 200, 0 }, 429, { "\"type\":\"rate_limit_error\"", NULL },
          { NULL }, 30 },
    };
    static const case_t  cases[] = {
        { 529, "overloaded", 503, -1, "gw-529",
          "R-CLASS-1 status-only rule 529 -> 503, no Retry-After" },
        { 529, "PERMANENT failure", 529, -1, NULL,
          "R-CLASS-1 exclude marker (case-insensitive) vetoes" },
        { 400, "beta", 503, 10, "second",
          "R-CLASS-1 any text marker matches" },
        { 400, "alpha beta", 429, 5, "first",
          "R-CLASS-1 first matching rule wins" },
        { 400, "ALPHA", 429, 5, "first",
          "R-CLASS-1 text markers are case-insensitive" },
        { 409, "gamma delta", 503, 2, "fallback",
          "R-CLASS-1 a vetoed rule lets the next rule try" },
        { 409, "gamma", 429, 1, "vetoed",
          "R-CLASS-1 without the exclude marker the rule applies" },
        { 200, "event: error\ndata: {\"type\":\"rate_limit_error\"}", 429,
          30, "sse", "R-CLASS-1 error event inside a 200 stream" },
        { 400, "gamma", 400, -1, NULL, "R-CLASS-1 no rule: unchanged" },
    };

    run_cases(rules, sizeof(rules) / sizeof(rules[0]), cases,
              sizeof(cases) / sizeof(cases[0]));
}


static void
test_validate(void)
{
    char                      longm[258];
    or_restate_rule_t         r;
    static const or_restate_rule_t  ok = {
        "ok", { 403, 0 }, 429, { "x", NULL }, { NULL }, 60
    };

    or_ok(or_restate_rule_validate(&ok) == NULL, "R-CLASS-1 valid rule");

    r = ok;
    r.id = NULL;
    or_is_str(or_restate_rule_validate(&r), "restatement rule needs an id",
              "R-CLASS-1 rule without id rejected");

    r = ok;
    r.from_statuses[0] = 0;
    or_is_str(or_restate_rule_validate(&r),
              "restatement rule needs at least one \"from\" status",
              "R-CLASS-1 rule without from-status rejected");

    r = ok;
    r.from_statuses[0] = 99;
    or_is_str(or_restate_rule_validate(&r),
              "\"from\" status must be between 100 and 599",
              "R-CLASS-1 from-status 99 rejected");

    r = ok;
    r.to_status = 600;
    or_is_str(or_restate_rule_validate(&r),
              "\"to\" status must be between 100 and 599",
              "R-CLASS-1 to-status 600 rejected");

    r = ok;
    r.retry_after_s = -2;
    or_is_str(or_restate_rule_validate(&r),
              "retry_after must be between 0 and 30 days",
              "R-CLASS-1 retry_after -2 rejected");

    r = ok;
    r.retry_after_s = 2592000;
    or_ok(or_restate_rule_validate(&r) == NULL,
          "R-CLASS-1 retry_after 30 days accepted");

    r.retry_after_s = 2592001;
    or_ok(or_restate_rule_validate(&r) != NULL,
          "R-CLASS-1 retry_after 30 days + 1 s rejected");

    r = ok;
    r.retry_after_s = -1;
    or_ok(or_restate_rule_validate(&r) == NULL,
          "R-CLASS-1 retry_after -1 (none) accepted");

    r = ok;
    r.text_markers[0] = "";
    or_is_str(or_restate_rule_validate(&r), "empty marker",
              "R-CLASS-1 empty text marker rejected");

    memset(longm, 'a', 257);
    longm[257] = '\0';
    r = ok;
    r.exclude_markers[0] = longm;
    or_is_str(or_restate_rule_validate(&r), "marker is longer than 256 bytes",
              "R-CLASS-1 257-byte exclude marker rejected");

    longm[256] = '\0';
    or_ok(or_restate_rule_validate(&r) == NULL,
          "R-CLASS-1 256-byte marker accepted");
}


int
main(void)
{
    test_builtin();
    test_custom();
    test_validate();

    return or_done();
}
