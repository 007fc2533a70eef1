/*
 * Copyright (C) ngx_omniroute authors
 *
 * Error classification (R-CLASS-2..6).  See or_classify.h for the
 * pipeline, the reason table and the fall-over decisions.
 */


#include <string.h>

#include "or_classify.h"


#define OR_CLASSIFY_6H  ((or_msec_t) 6 * 3600 * 1000)

#define or_classify_nelts(a)  (sizeof(a) / sizeof((a)[0]))


static void or_classify_init(or_verdict_t *v);
static int or_classify_has(const char *const *markers, const char *body,
    size_t len);
static int or_classify_json_has(const char *body, size_t len,
    const char *key, const char *value);
static int or_classify_codes_any(const char *const *codes, size_t max,
    const char *body, size_t len);
static or_reason_e or_classify_terminal(int status, const char *body,
    size_t len);
static or_reason_e or_classify_status(int status, const char *body,
    size_t len, or_msec_t hint, or_msec_t *cooldown);
static int or_classify_header_ok(const or_rule_t *rule,
    const or_response_t *resp);
static int or_classify_zero_item(const char *v, size_t len);
static int or_classify_rule_match(const or_rule_t *rule, int full_text,
    int status, const or_response_t *resp, const char *body, size_t len,
    or_msec_t hint);
static int or_classify_oprule_match(const or_oprule_t *rule, int status,
    const char *body, size_t len);
static void or_classify_apply(or_verdict_t *v, int op_rule,
    int honor_scope, const char *id, or_reason_e reason, or_scope_e scope,
    or_msec_t cooldown, int status, const char *body, size_t len);
static int or_classify_catchall_status(int status);
static int or_classify_breaker(int status, or_reason_e reason);
static or_msec_t or_classify_max(or_msec_t a, or_msec_t b);
static int or_classify_hex4(const char *p, unsigned *cp);


/* generic detectors: ASCII case-insensitive substrings of the body */

static const char  *or_classify_banned_markers[] = {
    "account has been suspended",
    "account is suspended",
    "account has been disabled",
    "account is disabled",
    "account has been deactivated",
    "account_deactivated",
    "organization has been disabled",
    "has been banned",
    "account is banned",
    NULL
};

static const char  *or_classify_credits_markers[] = {
    "credit balance is too low",
    "insufficient credits",
    "insufficient_credits",
    "credits exhausted",
    "out of credits",
    "insufficient balance",
    "insufficient_balance",
    "余额不足",
    NULL
};

static const char  *or_classify_expired_markers[] = {
    "token has expired",
    "token is expired",
    "token expired",
    "expired token",
    "token_expired",
    "expired_token",
    "session has expired",
    NULL
};

static const char  *or_classify_rejected_markers[] = {
    "request not allowed",
    NULL
};

static const char  *or_classify_quota_markers[] = {
    "insufficient_quota",
    "exceeded your current quota",
    "quota exhausted",
    "quota has been exhausted",
    "quota_exhausted",
    "usage limit reached",
    "monthly usage limit",
    "daily usage limit",
    "daily quota",
    "perday",
    "billing_hard_limit",
    "billing hard limit",
    "额度不足",
    NULL
};

/* R-CD-5 */
static const char  *or_classify_concurrency_markers[] = {
    "too many concurrent requests",
    "concurrency limit",
    "concurrency_limit",
    "parallel request limit",
    "并发数过高",
    NULL
};

static const char  *or_classify_context_markers[] = {
    "context length",
    "context_length",
    "maximum context",
    "prompt is too long",
    "context window",
    "input is too long",
    NULL
};

/*
 * R-TOOL-1: the request has more tools than the target accepts (the
 * providers' own words: OpenAI, Gemini, GitHub Copilot, generic);
 * "messages[3].tool_calls: array too long" is not one of them
 */
static const char  *or_classify_tool_markers[] = {
    "'tools': array too long",
    "function declarations can be specified",
    "maximum number of tools",
    "too many tools",
    "number of tools exceeds",
    "tools in your request",
    NULL
};

/*
 * Issue 25: the model does not support something the request uses
 * (prefill, tools, images, a parameter), in the wordings of OpenAI,
 * Anthropic, Gemini and OpenRouter; another target may.
 */
static const char  *or_classify_capability_markers[] = {
    "prefill is not supported",                 /* Anthropic */
    "does not support assistant message prefill",
    "model does not support",                   /* OpenAI, Anthropic */
    "is not supported with this model",         /* OpenAI */
    "is not supported for this model",
    "is not supported by this model",
    "unsupported parameter",                    /* OpenAI */
    "unsupported_parameter",
    "unsupported_value",
    "is not enabled for models/",               /* Gemini */
    "no endpoints found that support",          /* OpenRouter */
    NULL
};

static const char  *or_classify_apikey_markers[] = {
    "api key not valid",
    "api_key_invalid",
    "invalid api key",
    "invalid_api_key",
    "incorrect api key",
    NULL
};

static const char  *or_classify_model_markers[] = {
    "model_not_found",
    "model not found",
    "unknown model",
    "no such model",
    "invalid model",
    NULL
};

/* JSON keys whose string values form the structured error */
static const char  *or_classify_code_keys[] = {
    "code",
    "type",
    "status",
    NULL
};


/*
 * The built-in catalog.  Allowlists are owner decisions: full_text for
 * providers whose rules need body text, honor_scope where a rule's scope
 * is safe to honor, egress_bucketed for IP-bucketed upstreams.
 */

static const or_rule_t  or_classify_agentrouter_rules[] = {

    /* permanent: lock the model only; first, so it wins over quota text */
    { "agentrouter-model-access-denied", { 403, 0 }, NULL, OR_HDR_NONE,
      NULL, { NULL }, { "无权访问模型", NULL },
      OR_REASON_AUTH_ERROR, OR_SCOPE_MODEL, OR_CLASSIFY_6H, 0 },

    /* account-wide temporary quota; raw 400/403 or restated 429 */
    { "agentrouter-user-quota-exhausted", { 400, 403, 429, 0 }, NULL,
      OR_HDR_NONE, NULL, { NULL }, { "额度不足", NULL },
      OR_REASON_QUOTA_EXHAUSTED, OR_SCOPE_CONNECTION, OR_MSEC_NONE, 0 },
};

static const or_rule_t  or_classify_opencode_rules[] = {

    { "opencode-endpoint-unavailable", { 400, 429, 0 }, NULL, OR_HDR_NONE,
      NULL, { NULL }, { "endpoint is unavailable", NULL },
      OR_REASON_SERVER_ERROR, OR_SCOPE_MODEL, 300000, 0 },

    { "opencode-monthly-quota-resets-in", { 429, 0 }, NULL, OR_HDR_NONE,
      NULL, { NULL }, { "monthly usage limit reached", NULL },
      OR_REASON_QUOTA_EXHAUSTED, OR_SCOPE_CONNECTION, OR_MSEC_NONE, 1 },

    { "opencode-quota-exhausted-headers", { 429, 0 },
      "x-ratelimit-remaining-requests", OR_HDR_EQUALS, "0", { NULL },
      { NULL }, OR_REASON_QUOTA_EXHAUSTED, OR_SCOPE_CONNECTION,
      OR_MSEC_NONE, 0 },

    { "opencode-quota-exhausted-headers", { 429, 0 },
      "x-ratelimit-remaining-tokens", OR_HDR_EQUALS, "0", { NULL },
      { NULL }, OR_REASON_QUOTA_EXHAUSTED, OR_SCOPE_CONNECTION,
      OR_MSEC_NONE, 0 },

    { "opencode-quota-exhausted-body", { 429, 0 }, NULL, OR_HDR_NONE, NULL,
      { "organization_quota_exceeded", "account_quota_exceeded",
        "plan_limit_reached", NULL }, { NULL },
      OR_REASON_QUOTA_EXHAUSTED, OR_SCOPE_CONNECTION, OR_MSEC_NONE, 0 },

    { "opencode-400-model-unavailable", { 400, 0 }, NULL, OR_HDR_NONE, NULL,
      { NULL }, { "model is unavailable", NULL },
      OR_REASON_SERVER_ERROR, OR_SCOPE_MODEL, 3600000, 0 },
};

static const or_rule_t  or_classify_minimax_rules[] = {

    /* "x-model-quota-remaining: haiku=0,sonnet=42" */
    { "minimax-per-model-quota", { 429, 0 }, "x-model-quota-remaining",
      OR_HDR_ZERO_ITEM, NULL, { NULL }, { NULL },
      OR_REASON_QUOTA_EXHAUSTED, OR_SCOPE_MODEL, OR_MSEC_NONE, 0 },
};

static const or_rule_t  or_classify_cloudflare_rules[] = {

    { "cloudflare-ai-daily-neuron-allocation", { 429, 0 }, NULL,
      OR_HDR_NONE, NULL, { NULL }, { "daily free allocation", NULL },
      OR_REASON_QUOTA_EXHAUSTED, OR_SCOPE_CONNECTION, OR_MSEC_NONE, 0 },
};

static const or_rule_t  or_classify_openrouter_rules[] = {

    /* per-key credit cap / unaffordable request: a timed cooldown */
    { "openrouter-credit-exhausted-402", { 402, 0 }, NULL, OR_HDR_NONE,
      NULL, { NULL }, { NULL },
      OR_REASON_QUOTA_EXHAUSTED, OR_SCOPE_CONNECTION, 120000, 0 },
};


#define or_classify_catalog_entry(name, rules, ft, hs, eg)                   \
    { name, rules, or_classify_nelts(rules), ft, hs, eg }

static const or_catalog_t  or_classify_catalog[] = {
    or_classify_catalog_entry("agentrouter", or_classify_agentrouter_rules,
                              1, 1, 0),
    or_classify_catalog_entry("opencode", or_classify_opencode_rules,
                              1, 0, 1),
    or_classify_catalog_entry("opencode-zen", or_classify_opencode_rules,
                              1, 0, 1),
    or_classify_catalog_entry("opencode-go", or_classify_opencode_rules,
                              1, 0, 1),
    or_classify_catalog_entry("opencode-cli", or_classify_opencode_rules,
                              1, 0, 1),
    or_classify_catalog_entry("minimax", or_classify_minimax_rules,
                              0, 0, 0),
    or_classify_catalog_entry("minimax-passthrough",
                              or_classify_minimax_rules, 0, 0, 0),
    or_classify_catalog_entry("cloudflare-ai", or_classify_cloudflare_rules,
                              1, 0, 0),
    or_classify_catalog_entry("openrouter", or_classify_openrouter_rules,
                              0, 0, 0),
};


static void
or_classify_init(or_verdict_t *v)
{
    v->reason = OR_REASON_NONE;
    v->scope = OR_SCOPE_NONE;
    v->cooldown_ms = OR_MSEC_NONE;
    v->hint_ms = OR_MSEC_NONE;
    v->fall_over = 0;
    v->counts_for_breaker = 0;
    v->restated_status = 0;
    v->retry_after_s = -1;
    v->rule_id = NULL;
    v->restate_rule_id = NULL;
    v->lockout_capped = 0;
}


static int
or_classify_has(const char *const *markers, const char *body, size_t len)
{
    return or_markers_any(markers, (size_t) -1, body, len);
}


static or_msec_t
or_classify_max(or_msec_t a, or_msec_t b)
{
    if (a == OR_MSEC_NONE) {
        return b;
    }

    if (b == OR_MSEC_NONE) {
        return a;
    }

    return a > b ? a : b;
}


/*
 * "key": "value" somewhere in the body (case-insensitive value), also
 * with escaped quotes (\"key\":\"value\") for JSON wrapped in a string.
 */

static int
or_classify_json_has(const char *body, size_t len, const char *key,
    const char *value)
{
    size_t       klen, vlen;
    const char  *end, *from, *hit, *p;

    klen = strlen(key);
    vlen = strlen(value);
    end = body + len;
    from = body;

    for ( ;; ) {
        hit = or_memcasemem(from, end - from, key, klen);
        if (hit == NULL) {
            return 0;
        }

        from = hit + 1;

        if (hit == body || hit[-1] != '"') {
            continue;
        }

        p = hit + klen;

        if (p < end && *p == '\\') {
            p++;
        }

        if (p >= end || *p != '"') {
            continue;
        }

        p++;

        while (p < end && (*p == ' ' || *p == '\t' || *p == '\r'
                           || *p == '\n'))
        {
            p++;
        }

        if (p >= end || *p != ':') {
            continue;
        }

        p++;

        while (p < end && (*p == ' ' || *p == '\t' || *p == '\r'
                           || *p == '\n'))
        {
            p++;
        }

        if (p < end && *p == '\\') {
            p++;
        }

        if (p >= end || *p != '"') {
            continue;
        }

        p++;

        if ((size_t) (end - p) <= vlen
            || or_memcasemem(p, vlen, value, vlen) != p)
        {
            continue;
        }

        p += vlen;

        if (*p == '"' || *p == '\\') {
            return 1;
        }
    }
}


static int
or_classify_codes_any(const char *const *codes, size_t max,
    const char *body, size_t len)
{
    size_t  i, k;

    for (i = 0; i < max && codes[i] != NULL; i++) {
        for (k = 0; or_classify_code_keys[k] != NULL; k++) {
            if (or_classify_json_has(body, len, or_classify_code_keys[k],
                                     codes[i]))
            {
                return 1;
            }
        }
    }

    return 0;
}


/* banned / credits exhausted / expired: before any rule */

static or_reason_e
or_classify_terminal(int status, const char *body, size_t len)
{
    if (status < 400 || status > 499 || len == 0) {
        return OR_REASON_NONE;
    }

    if (or_classify_has(or_classify_banned_markers, body, len)) {
        return OR_REASON_BANNED;
    }

    if (or_classify_has(or_classify_credits_markers, body, len)) {
        return OR_REASON_CREDITS_EXHAUSTED;
    }

    if ((status == 401 || status == 403)
        && or_classify_has(or_classify_expired_markers, body, len))
    {
        return OR_REASON_EXPIRED;
    }

    return OR_REASON_NONE;
}


/* generic classification by status and body text */

static or_reason_e
or_classify_status(int status, const char *body, size_t len,
    or_msec_t hint, or_msec_t *cooldown)
{
    *cooldown = OR_MSEC_NONE;

    switch (status) {

    case 400:
    case 413:
    case 422:
        if (or_classify_has(or_classify_tool_markers, body, len)) {
            return OR_REASON_TOOL_LIMIT;
        }

        if (or_classify_has(or_classify_context_markers, body, len)) {
            return OR_REASON_CONTEXT_OVERFLOW;
        }

        if (or_classify_has(or_classify_capability_markers, body, len)) {
            return OR_REASON_CAPABILITY;
        }

        if (status == 400
            && or_classify_has(or_classify_apikey_markers, body, len))
        {
            return OR_REASON_AUTH_ERROR;
        }

        if (status == 400
            && or_classify_has(or_classify_model_markers, body, len))
        {
            return OR_REASON_NOT_FOUND;
        }

        return OR_REASON_BAD_REQUEST;

    case 401:
        return OR_REASON_AUTH_ERROR;

    case 402:
        return OR_REASON_CREDITS_EXHAUSTED;

    case 403:
        if (or_classify_has(or_classify_rejected_markers, body, len)) {
            return OR_REASON_REQUEST_REJECTED;
        }

        if (or_classify_has(or_classify_quota_markers, body, len)) {
            *cooldown = hint != OR_MSEC_NONE ? hint : OR_QUOTA_COOLDOWN_MS;
            return OR_REASON_QUOTA_EXHAUSTED;
        }

        return OR_REASON_AUTH_ERROR;

    case 404:
        if (or_classify_has(or_classify_capability_markers, body, len)) {
            /* OpenRouter: "No endpoints found that support tool use" */
            return OR_REASON_CAPABILITY;
        }

        return OR_REASON_NOT_FOUND;

    case 408:
    case 504:
        return OR_REASON_TIMEOUT;

    case 429:
        /* a quota body wins over a concurrency body (R-CD-5) */
        if (or_classify_has(or_classify_quota_markers, body, len)) {
            *cooldown = hint != OR_MSEC_NONE ? hint : OR_QUOTA_COOLDOWN_MS;
            return OR_REASON_QUOTA_EXHAUSTED;
        }

        if (or_classify_has(or_classify_concurrency_markers, body, len)) {
            *cooldown = hint != OR_MSEC_NONE
                        ? hint : OR_CONCURRENCY_COOLDOWN_MS;
            return OR_REASON_CONCURRENCY_LIMITED;
        }

        return OR_REASON_RATE_LIMIT_EXCEEDED;

    default:
        break;
    }

    if (status >= 400 && status <= 499) {
        return OR_REASON_BAD_REQUEST;
    }

    return OR_REASON_SERVER_ERROR;
}


/* "a=0,b=42": some item's value is zero */

static int
or_classify_zero_item(const char *v, size_t len)
{
    int          zero;
    const char  *p, *end;

    p = v;
    end = v + len;

    while (p < end) {
        while (p < end && *p != '=' && *p != ',') {
            p++;
        }

        if (p < end && *p == '=') {
            p++;

            while (p < end && *p == ' ') {
                p++;
            }

            zero = 0;

            while (p < end && *p == '0') {
                zero = 1;
                p++;
            }

            while (p < end && *p == ' ') {
                p++;
            }

            if (zero && (p == end || *p == ',')) {
                return 1;
            }

            while (p < end && *p != ',') {
                p++;
            }
        }

        if (p < end) {
            p++;
        }
    }

    return 0;
}


static int
or_classify_header_ok(const or_rule_t *rule, const or_response_t *resp)
{
    size_t              vlen, hlen;
    const char         *v;
    const or_header_t  *h;

    if (rule->header == NULL || rule->header_test == OR_HDR_NONE) {
        return 1;
    }

    h = or_header_find(resp->headers, resp->nheaders, rule->header,
                       strlen(rule->header));

    if (h == NULL || h->value == NULL) {
        return 0;
    }

    v = h->value;
    vlen = h->value_len;

    while (vlen > 0 && (*v == ' ' || *v == '\t')) {
        v++;
        vlen--;
    }

    while (vlen > 0 && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'
                        || v[vlen - 1] == '\r' || v[vlen - 1] == '\n'))
    {
        vlen--;
    }

    switch (rule->header_test) {

    case OR_HDR_PRESENT:
        return 1;

    case OR_HDR_EQUALS:
        if (rule->header_value == NULL) {
            return 0;
        }

        hlen = strlen(rule->header_value);

        return vlen == hlen
               && or_memcasemem(v, vlen, rule->header_value, hlen) == v;

    case OR_HDR_ZERO_ITEM:
        return or_classify_zero_item(v, vlen);

    default:
        return 0;
    }
}


static int
or_classify_rule_match(const or_rule_t *rule, int full_text, int status,
    const or_response_t *resp, const char *body, size_t len, or_msec_t hint)
{
    size_t  i;
    int     in;

    if (rule->statuses[0] != 0) {
        in = 0;

        for (i = 0; i < OR_RULE_MAX_STATUSES && rule->statuses[i] != 0; i++)
        {
            if (rule->statuses[i] == status) {
                in = 1;
                break;
            }
        }

        if (!in) {
            return 0;
        }
    }

    if (!or_classify_header_ok(rule, resp)) {
        return 0;
    }

    if (rule->codes[0] != NULL
        && !or_classify_codes_any(rule->codes, OR_RULE_MAX_MARKERS, body,
                                  len))
    {
        return 0;
    }

    if (rule->text[0] != NULL
        && (!full_text
            || !or_markers_any(rule->text, OR_RULE_MAX_MARKERS, body, len)))
    {
        return 0;
    }

    if (rule->cooldown_from_hint && hint == OR_MSEC_NONE) {
        return 0;
    }

    return 1;
}


static int
or_classify_oprule_match(const or_oprule_t *rule, int status,
    const char *body, size_t len)
{
    if (rule->status == 0 && (rule->match == NULL || rule->match_len == 0)) {
        return 0;       /* invalid: matches nothing */
    }

    if (rule->status != 0 && rule->status != status) {
        return 0;
    }

    if (rule->match != NULL && rule->match_len != 0
        && or_memcasemem(body, len, rule->match, rule->match_len) == NULL)
    {
        return 0;
    }

    return 1;
}


static void
or_classify_apply(or_verdict_t *v, int op_rule, int honor_scope,
    const char *id, or_reason_e reason, or_scope_e scope, or_msec_t cooldown,
    int status, const char *body, size_t len)
{
    or_msec_t    dcd;
    or_reason_e  derived;

    if ((unsigned) reason >= OR_REASON_COUNT) {
        reason = OR_REASON_NONE;
    }

    if (reason == OR_REASON_NONE) {
        derived = or_classify_status(status, body, len, v->hint_ms, &dcd);

        if (cooldown == OR_MSEC_NONE) {
            cooldown = dcd;

        } else if (or_classify_is_terminal(derived)) {
            /* a rule with a cooldown never derives a terminal state */
            derived = OR_REASON_QUOTA_EXHAUSTED;
        }

        reason = derived;

    } else if (reason == OR_REASON_CONCURRENCY_LIMITED
               && cooldown == OR_MSEC_NONE)
    {
        cooldown = v->hint_ms != OR_MSEC_NONE
                   ? v->hint_ms : OR_CONCURRENCY_COOLDOWN_MS;
    }

    if (or_classify_is_terminal(reason)) {
        cooldown = OR_MSEC_NONE;
    }

    /*
     * R-CLASS-3: a rule scope is honored for operator rules and for
     * scope-allowlisted providers; a connection scope only with
     * quota_exhausted (never permanent, never credits exhausted).
     */
    if ((unsigned) scope < OR_SCOPE_COUNT
        && scope != OR_SCOPE_NONE
        && (op_rule || honor_scope)
        && (scope != OR_SCOPE_CONNECTION
            || reason == OR_REASON_QUOTA_EXHAUSTED))
    {
        v->scope = scope;
    }

    v->reason = reason;
    v->cooldown_ms = cooldown;
    v->rule_id = id;

    /* a built-in rule's cooldown is a ceiling a model lockout caps */
    v->lockout_capped = !op_rule;
}


static int
or_classify_catchall_status(int status)
{
    return status == 402 || status == 403 || status == 408 || status == 429
           || (status >= 500 && status <= 599);
}


static int
or_classify_breaker(int status, or_reason_e reason)
{
    if (reason != OR_REASON_SERVER_ERROR && reason != OR_REASON_TIMEOUT) {
        return 0;
    }

    return status == 408 || status == 500 || status == 502 || status == 503
           || status == 504;
}


int
or_classify_falls_over(or_reason_e reason)
{
    switch (reason) {

    case OR_REASON_NONE:
    case OR_REASON_BAD_REQUEST:
    case OR_REASON_CONTEXT_OVERFLOW:
        return 0;

    default:
        return (unsigned) reason < OR_REASON_COUNT;
    }
}


int
or_classify_is_terminal(or_reason_e reason)
{
    return reason == OR_REASON_BANNED || reason == OR_REASON_EXPIRED
           || reason == OR_REASON_CREDITS_EXHAUSTED;
}


void
or_classify(const or_class_conf_t *conf, const or_response_t *resp,
    or_verdict_t *v)
{
    int                 status;
    size_t              i, len;
    or_msec_t           cooldown;
    or_reason_e         reason;
    const char         *body;
    or_restate_t        rs;
    const or_rule_t    *rule;
    const or_oprule_t  *op;
    char                decoded[OR_CLASSIFY_DECODE_MAX];

    or_classify_init(v);

    if (resp->transport != OR_TRANSPORT_OK) {
        v->reason = resp->transport == OR_TRANSPORT_TIMEOUT
                    ? OR_REASON_TIMEOUT : OR_REASON_TRANSPORT;
        v->fall_over = 1;
        v->counts_for_breaker = 1;
        return;
    }

    body = resp->body;
    len = resp->body_len;

    if (body == NULL) {
        body = "";
        len = 0;
    }

    /* markers match the decoded text of a JSON body ("\u989d...") */

    if (or_memcasemem(body, len, "\\u", 2) != NULL) {
        len = or_classify_unescape(body, len, decoded, sizeof(decoded));
        body = decoded;
    }

    status = resp->status;

    /* R-CLASS-1: restatement first */

    if (conf != NULL
        && (or_restate_apply(conf->restate, conf->nrestate, status, body,
                             len, &rs)
            || or_restate_apply(conf->restate_builtin,
                                conf->nrestate_builtin, status, body, len,
                                &rs)))
    {
        v->restated_status = rs.status;
        v->retry_after_s = rs.retry_after_s;
        v->rule_id = rs.rule_id;
        v->restate_rule_id = rs.rule_id;
        status = rs.status;
    }

    if (status >= 100 && status < 400) {
        return;
    }

    v->hint_ms = or_retry_best(resp->headers, resp->nheaders, body, len,
                               resp->now_ms);

    if (v->retry_after_s >= 0
        && (v->hint_ms == OR_MSEC_NONE
            || v->hint_ms < (or_msec_t) v->retry_after_s * 1000))
    {
        /*
         * The restated Retry-After is a hint like the provider's own: the
         * connection cools for what the client is told (issue 25).
         */
        v->hint_ms = (or_msec_t) v->retry_after_s * 1000;
    }

    reason = or_classify_terminal(status, body, len);

    if (reason != OR_REASON_NONE) {
        v->reason = reason;
        goto done;
    }

    if (conf != NULL) {

        for (i = 0; i < conf->noprules && i < OR_OPRULES_MAX; i++) {
            op = &conf->oprules[i];

            if (or_classify_oprule_match(op, status, body, len)) {
                or_classify_apply(v, 1, 1, op->id ? op->id : "operator",
                                  op->reason, op->scope, op->cooldown_ms,
                                  status, body, len);
                goto done;
            }
        }

        for (i = 0; i < conf->nrules; i++) {
            rule = &conf->rules[i];

            if (or_classify_rule_match(rule, conf->full_text, status, resp,
                                       body, len, v->hint_ms))
            {
                or_classify_apply(v, 0, conf->honor_scope, rule->id,
                                  rule->reason, rule->scope,
                                  rule->cooldown_from_hint
                                  ? v->hint_ms : rule->cooldown_ms,
                                  status, body, len);
                goto done;
            }
        }
    }

    reason = or_classify_status(status, body, len, v->hint_ms, &cooldown);

    v->reason = reason;
    v->cooldown_ms = cooldown;

    /* R-CLASS-4: the catch-all default */

    if (conf != NULL
        && conf->catchall.cooldown_ms != OR_MSEC_NONE
        && or_classify_catchall_status(status)
        && reason != OR_REASON_CONCURRENCY_LIMITED)
    {
        if (conf->catchall.reason != OR_REASON_NONE
            && (unsigned) conf->catchall.reason < OR_REASON_COUNT
            && !or_classify_is_terminal(conf->catchall.reason))
        {
            v->reason = conf->catchall.reason;

        } else if (or_classify_is_terminal(reason)) {
            v->reason = OR_REASON_QUOTA_EXHAUSTED;
        }

        v->scope = (conf->catchall.scope != OR_SCOPE_NONE
                    && (unsigned) conf->catchall.scope < OR_SCOPE_COUNT)
                   ? conf->catchall.scope : OR_SCOPE_CONNECTION;
        v->cooldown_ms = or_classify_max(conf->catchall.cooldown_ms,
                                         v->hint_ms);
        v->rule_id = "catch-all";
    }

done:

    /* R-CLASS-6: an IP-bucketed 429 locks the connection */

    if (conf != NULL && conf->egress_bucketed && status == 429
        && v->scope == OR_SCOPE_NONE
        && (v->reason == OR_REASON_QUOTA_EXHAUSTED
            || v->reason == OR_REASON_RATE_LIMIT_EXCEEDED))
    {
        v->scope = OR_SCOPE_CONNECTION;
    }

    v->fall_over = or_classify_falls_over(v->reason);
    v->counts_for_breaker = or_classify_breaker(status, v->reason);
}


size_t
or_egress_siblings(const or_class_conf_t *conf, int status,
    const or_verdict_t *v, const or_egress_conn_t *failing,
    const or_egress_conn_t *sibs, size_t n, unsigned char *cool)
{
    size_t                   i, count;
    const or_egress_conn_t  *s;

    if (cool != NULL) {
        for (i = 0; i < n; i++) {
            cool[i] = 0;
        }
    }

    if (conf == NULL || v == NULL || failing == NULL || sibs == NULL
        || cool == NULL || !conf->egress_bucketed)
    {
        return 0;
    }

    if (v->restated_status != 0) {
        status = v->restated_status;
    }

    if (status != 429
        || (v->reason != OR_REASON_QUOTA_EXHAUSTED
            && v->reason != OR_REASON_RATE_LIMIT_EXCEEDED))
    {
        return 0;
    }

    if (failing->disable_cooling || failing->key == NULL
        || failing->key_len == 0)
    {
        return 0;
    }

    count = 0;

    for (i = 0; i < n; i++) {
        s = &sibs[i];

        if (s == failing || s->disable_cooling || s->key == NULL
            || s->key_len != failing->key_len
            || memcmp(s->key, failing->key, s->key_len) != 0)
        {
            continue;
        }

        cool[i] = 1;
        count++;
    }

    return count;
}


const or_catalog_t *
or_catalog_find(const char *name, size_t len)
{
    size_t  i;

    if (name == NULL) {
        return NULL;
    }

    for (i = 0; i < or_classify_nelts(or_classify_catalog); i++) {
        if (strlen(or_classify_catalog[i].name) == len
            && or_memcasemem(name, len, or_classify_catalog[i].name, len)
               == name)
        {
            return &or_classify_catalog[i];
        }
    }

    return NULL;
}


void
or_class_conf_init(or_class_conf_t *conf, const char *name, size_t len)
{
    const or_catalog_t  *cat;

    memset(conf, 0, sizeof(or_class_conf_t));

    conf->catchall.cooldown_ms = OR_MSEC_NONE;
    conf->catchall.scope = OR_SCOPE_NONE;
    conf->catchall.reason = OR_REASON_NONE;

    conf->restate_builtin = or_restate_builtin(name, len,
                                               &conf->nrestate_builtin);

    cat = or_catalog_find(name, len);

    if (cat != NULL) {
        conf->rules = cat->rules;
        conf->nrules = cat->nrules;
        conf->full_text = cat->full_text;
        conf->honor_scope = cat->honor_scope;
        conf->egress_bucketed = cat->egress_bucketed;
    }
}


const char *
or_oprule_validate(const or_oprule_t *rule)
{
    int  has_match;

    has_match = rule->match != NULL && rule->match_len != 0;

    if (rule->status == 0 && !has_match) {
        return "rule needs a status or a match";
    }

    if (rule->status != 0 && (rule->status < 100 || rule->status > 599)) {
        return "status must be between 100 and 599";
    }

    if (has_match && rule->match_len > OR_MARKER_MAX_LEN) {
        return "match is longer than 256 bytes";
    }

    if (rule->cooldown_ms != OR_MSEC_NONE
        && (rule->cooldown_ms < 0
            || rule->cooldown_ms > OR_RULE_MAX_COOLDOWN_MS))
    {
        return "cooldown must be between 0 and 30 days";
    }

    if ((unsigned) rule->reason >= OR_REASON_COUNT) {
        return "unknown reason";
    }

    if ((unsigned) rule->scope >= OR_SCOPE_COUNT) {
        return "unknown scope";
    }

    if (or_classify_is_terminal(rule->reason)
        && rule->cooldown_ms != OR_MSEC_NONE)
    {
        return "a terminal reason (banned, expired, credits_exhausted) "
               "takes no cooldown";
    }

    return NULL;
}


const char *
or_oprules_validate(const or_oprule_t *rules, size_t n, size_t *bad)
{
    size_t       i;
    const char  *err;

    if (bad != NULL) {
        *bad = 0;
    }

    if (n > OR_OPRULES_MAX) {
        if (bad != NULL) {
            *bad = OR_OPRULES_MAX;
        }

        return "too many rules (at most 50)";
    }

    for (i = 0; i < n; i++) {
        err = or_oprule_validate(&rules[i]);

        if (err != NULL) {
            if (bad != NULL) {
                *bad = i;
            }

            return err;
        }
    }

    return NULL;
}


const char *
or_catchall_validate(const or_catchall_t *c)
{
    if (c->cooldown_ms == OR_MSEC_NONE) {
        return NULL;
    }

    if (c->cooldown_ms < OR_CATCHALL_MIN_COOLDOWN_MS
        || c->cooldown_ms > OR_CATCHALL_MAX_COOLDOWN_MS)
    {
        return "default cooldown must be between 1m and 30d";
    }

    if ((unsigned) c->reason >= OR_REASON_COUNT) {
        return "unknown reason";
    }

    if (or_classify_is_terminal(c->reason)) {
        return "a default cannot have a terminal reason "
               "(banned, expired, credits_exhausted)";
    }

    if ((unsigned) c->scope >= OR_SCOPE_COUNT) {
        return "unknown scope";
    }

    return NULL;
}


or_reason_e
or_classify_reason_parse(const char *s, size_t len)
{
    unsigned     i;
    const char  *name;

    for (i = 0; i < OR_REASON_COUNT; i++) {
        name = or_reason_name((or_reason_e) i);

        if (s != NULL && strlen(name) == len && memcmp(name, s, len) == 0) {
            return (or_reason_e) i;
        }
    }

    return OR_REASON_COUNT;
}


or_scope_e
or_classify_scope_parse(const char *s, size_t len)
{
    unsigned     i;
    const char  *name;

    for (i = 0; i < OR_SCOPE_COUNT; i++) {
        name = or_scope_name((or_scope_e) i);

        if (s != NULL && strlen(name) == len && memcmp(name, s, len) == 0) {
            return (or_scope_e) i;
        }
    }

    return OR_SCOPE_COUNT;
}


static int
or_classify_hex4(const char *p, unsigned *cp)
{
    int       i;
    unsigned  c, v;

    v = 0;

    for (i = 0; i < 4; i++) {
        c = (unsigned char) p[i];

        if (c >= '0' && c <= '9') {
            c -= '0';

        } else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') {
            c = (c | 0x20) - 'a' + 10;

        } else {
            return 0;
        }

        v = (v << 4) | c;
    }

    *cp = v;

    return 1;
}


size_t
or_classify_unescape(const char *in, size_t len, char *out, size_t size)
{
    size_t       n, need, i;
    unsigned     cp, lo;
    const char  *p, *end;

    p = in;
    end = in + len;
    n = 0;

    while (p < end && n < size) {

        if (*p != '\\' || end - p < 6 || p[1] != 'u'
            || !or_classify_hex4(p + 2, &cp))
        {
            if (*p == '\\' && end - p >= 2) {
                /* another escape: copied whole, never split */
                if (size - n < 2) {
                    break;
                }

                out[n++] = *p++;
            }

            out[n++] = *p++;
            continue;
        }

        need = 6;

        if (cp >= 0xd800 && cp <= 0xdbff) {
            if (end - p >= 12 && p[6] == '\\' && p[7] == 'u'
                && or_classify_hex4(p + 8, &lo)
                && lo >= 0xdc00 && lo <= 0xdfff)
            {
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                need = 12;

            } else {
                cp = 0;         /* a lone surrogate: kept escaped */
            }

        } else if (cp >= 0xdc00 && cp <= 0xdfff) {
            cp = 0;
        }

        if (cp < 0x20 || cp == '"' || cp == '\\') {
            /* structural or control: stays escaped */
            if (size - n < 6) {
                break;
            }

            for (i = 0; i < 6; i++) {
                out[n++] = *p++;
            }

            continue;
        }

        i = (cp < 0x80) ? 1 : (cp < 0x800) ? 2 : (cp < 0x10000) ? 3 : 4;

        if (size - n < i) {
            break;
        }

        switch (i) {
        case 1:
            out[n++] = (char) cp;
            break;
        case 2:
            out[n++] = (char) (0xc0 | (cp >> 6));
            out[n++] = (char) (0x80 | (cp & 0x3f));
            break;
        case 3:
            out[n++] = (char) (0xe0 | (cp >> 12));
            out[n++] = (char) (0x80 | ((cp >> 6) & 0x3f));
            out[n++] = (char) (0x80 | (cp & 0x3f));
            break;
        default:
            out[n++] = (char) (0xf0 | (cp >> 18));
            out[n++] = (char) (0x80 | ((cp >> 12) & 0x3f));
            out[n++] = (char) (0x80 | ((cp >> 6) & 0x3f));
            out[n++] = (char) (0x80 | (cp & 0x3f));
            break;
        }

        p += need;
    }

    return n;
}


int
or_classify_quota_text(const char *body, size_t len)
{
    char  decoded[OR_CLASSIFY_DECODE_MAX];

    if (body == NULL) {
        return 0;
    }

    if (or_memcasemem(body, len, "\\u", 2) != NULL) {
        len = or_classify_unescape(body, len, decoded, sizeof(decoded));
        body = decoded;
    }

    return or_classify_has(or_classify_quota_markers, body, len);
}


int
or_classify_tool_limit(int status, const char *body, size_t len)
{
    char  decoded[OR_CLASSIFY_DECODE_MAX];

    if (body == NULL || (status != 400 && status != 413 && status != 422)) {
        return 0;
    }

    if (or_memcasemem(body, len, "\\u", 2) != NULL) {
        len = or_classify_unescape(body, len, decoded, sizeof(decoded));
        body = decoded;
    }

    return or_classify_has(or_classify_tool_markers, body, len);
}


void
or_classify_stream_stall(or_verdict_t *v)
{
    or_classify_init(v);

    v->reason = OR_REASON_STREAM_STALL;
    v->fall_over = 1;
    v->counts_for_breaker = 0;
}
