/*
 * Copyright (C) ngx_omniroute authors
 *
 * Error classification (R-CLASS-1..6, R-CD-3, R-CD-5, R-CB-3).
 */


#include "or_test.h"
#include "or_classify.h"
#include "or_outcome.h"


#define NOW      ((or_msec_t) 1704067200000)
#define NONE     OR_MSEC_NONE
#define D30      ((or_msec_t) 2592000000)
#define H(n, v)  { n, sizeof(n) - 1, v, sizeof(v) - 1 }


typedef enum {
    C_NULL = 0,
    C_GENERIC,
    C_AGENTROUTER,
    C_OPENCODE,
    C_MINIMAX,
    C_CLOUDFLARE,
    C_OPENROUTER,
    C_OPER,
    C_CATCH,
    C_CATCH_REASON,
    C_CATCH_OP,
    C_NOFULLTEXT,
    C_FULLTEXT,
    C_COUNT
} conf_e;


typedef enum {
    HS_NONE = 0,
    HS_RA20,
    HS_RA3,
    HS_RA600,
    HS_RA86400,
    HS_RA120,
    HS_OC_REQ0,
    HS_MM_ZERO,
    HS_MM_NONZERO,
    HS_MM_SPACED,
    HS_OPENAI_HOT,
    HS_COUNT
} hset_e;


typedef struct {
    conf_e           conf;
    or_transport_e   transport;
    int              status;
    hset_e           hs;
    const char      *body;
    or_reason_e      reason;
    or_scope_e       scope;
    or_msec_t        cooldown;
    or_msec_t        hint;
    int              fall_over;
    int              breaker;
    int              restated;
    int              retry_after;
    const char      *rule_id;
    const char      *name;
} case_t;


static void setup(void);
static void run_case(const case_t *c);
static void test_table(void);
static void test_egress(void);
static void test_validate(void);
static void test_misc(void);
static void test_decode(void);
static void test_capability(void);


static or_class_conf_t  confs[C_COUNT];


static const or_header_t  h_ra20[] = { H("Retry-After", "20") };
static const or_header_t  h_ra3[] = { H("retry-after", "3") };
static const or_header_t  h_ra600[] = { H("Retry-After", "600") };
static const or_header_t  h_ra86400[] = { H("Retry-After", "86400") };
static const or_header_t  h_ra120[] = { H("Retry-After", "120") };
static const or_header_t  h_oc_req0[] = {
    H("x-ratelimit-remaining-requests", "0"),
    H("content-type", "application/json"),
};
static const or_header_t  h_mm_zero[] = {
    H("X-Model-Quota-Remaining", "haiku=0,sonnet=42"),
};
static const or_header_t  h_mm_nonzero[] = {
    H("x-model-quota-remaining", "haiku=10,sonnet=42"),
};
static const or_header_t  h_mm_spaced[] = {
    H("x-model-quota-remaining", "sonnet=1, haiku = 00 "),
};
static const or_header_t  h_openai_hot[] = {
    H("x-ratelimit-remaining-requests", "0"),
    H("x-ratelimit-reset-requests", "1s"),
    H("x-ratelimit-reset-tokens", "6m0s"),
};


static const struct {
    const or_header_t  *h;
    size_t              n;
} hsets[HS_COUNT] = {
    { NULL, 0 },
    { h_ra20, 1 },
    { h_ra3, 1 },
    { h_ra600, 1 },
    { h_ra86400, 1 },
    { h_ra120, 1 },
    { h_oc_req0, 2 },
    { h_mm_zero, 1 },
    { h_mm_nonzero, 1 },
    { h_mm_spaced, 1 },
    { h_openai_hot, 3 },
};


static const or_oprule_t  oper_rules[] = {
    { "op-400-overloaded", 400, "upstream overloaded", 19,
      OR_REASON_SERVER_ERROR, OR_SCOPE_MODEL, 300000 },
    { "op-insufficient", 0, "INSUFFICIENT_QUOTA", 18,
      OR_REASON_QUOTA_EXHAUSTED, OR_SCOPE_CONNECTION, D30 },
    { "op-429-any", 429, NULL, 0,
      OR_REASON_NONE, OR_SCOPE_CONNECTION, NONE },
    { "op-503-maintenance", 503, "maintenance", 11,
      OR_REASON_NONE, OR_SCOPE_PROVIDER, 600000 },
    { "op-402-hour", 402, NULL, 0,
      OR_REASON_NONE, OR_SCOPE_NONE, 3600000 },
    { NULL, 418, "teapot", 6,
      OR_REASON_RATE_LIMIT_EXCEEDED, OR_SCOPE_NONE, NONE },
};

static const or_oprule_t  catch_op_rules[] = {
    { "op-slow-down", 429, "slow down", 9,
      OR_REASON_RATE_LIMIT_EXCEEDED, OR_SCOPE_NONE, 5000 },
};

static const or_rule_t  custom_rules[] = {
    { "t-text", { 429, 0 }, NULL, OR_HDR_NONE, NULL, { NULL },
      { "special quota", NULL }, OR_REASON_QUOTA_EXHAUSTED,
      OR_SCOPE_CONNECTION, 900000, 0 },
    { "t-code", { 429, 0 }, NULL, OR_HDR_NONE, NULL,
      { "tier_exhausted", NULL }, { NULL }, OR_REASON_QUOTA_EXHAUSTED,
      OR_SCOPE_MODEL, 700000, 0 },
    { "t-guard", { 401, 0 }, NULL, OR_HDR_NONE, NULL, { NULL },
      { "guarded", NULL }, OR_REASON_AUTH_ERROR, OR_SCOPE_CONNECTION,
      NONE, 0 },
    { "t-credits", { 402, 0 }, NULL, OR_HDR_NONE, NULL, { NULL },
      { "creditcard", NULL }, OR_REASON_CREDITS_EXHAUSTED,
      OR_SCOPE_CONNECTION, NONE, 0 },
    { "t-header", { 503, 0 }, "x-upstream-state", OR_HDR_PRESENT, NULL,
      { NULL }, { NULL }, OR_REASON_RATE_LIMIT_EXCEEDED, OR_SCOPE_PROVIDER,
      NONE, 0 },
};


#define R(x)   OR_REASON_ ## x
#define S(x)   OR_SCOPE_ ## x
#define TOK    OR_TRANSPORT_OK

static const case_t  cases[] = {

    /* transport outcomes (R-CB-3) */
    { C_GENERIC, OR_TRANSPORT_CONNECT_ERROR, 0, HS_NONE, "",
      R(TRANSPORT), S(NONE), NONE, NONE, 1, 1, 0, -1, NULL,
      "R-CLASS-2 connect error -> transport, counts for breaker" },
    { C_GENERIC, OR_TRANSPORT_RESET, 0, HS_NONE, "",
      R(TRANSPORT), S(NONE), NONE, NONE, 1, 1, 0, -1, NULL,
      "R-CLASS-2 connection reset -> transport" },
    { C_NULL, OR_TRANSPORT_TIMEOUT, 0, HS_NONE, "",
      R(TIMEOUT), S(NONE), NONE, NONE, 1, 1, 0, -1, NULL,
      "R-CLASS-2 transport timeout -> timeout, counts for breaker" },
    { C_GENERIC, TOK, 200, HS_RA20, "ok",
      R(NONE), S(NONE), NONE, NONE, 0, 0, 0, -1, NULL,
      "R-CLASS-2 200 -> success, no hint, no fall-over" },

    /* R-TOOL-1: too many tools for the target: fall over, no breaker */
    { C_GENERIC, TOK, 400, HS_NONE,
      "{\"error\":{\"message\":\"Invalid 'tools': array too long. "
      "Expected an array with maximum length 128, but got an array with "
      "length 217 instead.\",\"type\":\"invalid_request_error\","
      "\"param\":\"tools\",\"code\":\"array_above_max_length\"}}",
      R(TOOL_LIMIT), S(NONE), NONE, NONE, 1, 0, 0, -1, NULL,
      "R-TOOL-1 OpenAI 'tools': array too long -> tool_limit, falls over" },
    { C_GENERIC, TOK, 400, HS_NONE,
      "{\"error\":{\"code\":400,\"message\":\"The GenerateContentRequest "
      "proto is invalid:\\n  * tools[0].function_declarations: "
      "[FIELD_INVALID] At most 512 function declarations can be "
      "specified.\",\"status\":\"INVALID_ARGUMENT\"}}",
      R(TOOL_LIMIT), S(NONE), NONE, NONE, 1, 0, 0, -1, NULL,
      "R-TOOL-1 Gemini 'function declarations' -> tool_limit" },
    { C_GENERIC, TOK, 400, HS_NONE,
      "{\"error\":{\"message\":\"You may not include more than 128 tools "
      "in your request.\"}}",
      R(TOOL_LIMIT), S(NONE), NONE, NONE, 1, 0, 0, -1, NULL,
      "R-TOOL-1 Copilot 'tools in your request' -> tool_limit" },
    { C_GENERIC, TOK, 422, HS_NONE,
      "{\"detail\":\"Maximum number of tools exceeded (64)\"}",
      R(TOOL_LIMIT), S(NONE), NONE, NONE, 1, 0, 0, -1, NULL,
      "R-TOOL-1 422 'maximum number of tools' -> tool_limit" },
    { C_GENERIC, TOK, 400, HS_NONE,
      "{\"error\":{\"type\":\"invalid_request_error\",\"message\":"
      "\"too many tools: 300 > 256\"}}",
      R(TOOL_LIMIT), S(NONE), NONE, NONE, 1, 0, 0, -1, NULL,
      "R-TOOL-1 'too many tools' -> tool_limit" },
    { C_GENERIC, TOK, 400, HS_NONE,
      "Invalid 'messages[3].tool_calls': array too long. Expected an array "
      "with maximum length 128, but got an array with length 129 instead.",
      R(BAD_REQUEST), S(NONE), NONE, NONE, 0, 0, 0, -1, NULL,
      "R-TOOL-1 too many tool_calls in a message is no tool limit" },
    { C_GENERIC, TOK, 429, HS_NONE, "too many tools",
      R(RATE_LIMIT_EXCEEDED), S(NONE), NONE, NONE, 1, 0, 0, -1, NULL,
      "R-TOOL-1 a 429 is never a tool limit" },

    /* 400 (R-CLASS-2) */
    { C_GENERIC, TOK, 400, HS_NONE,
      "This model's maximum context length is 8192 tokens",
      R(CONTEXT_OVERFLOW), S(NONE), NONE, NONE, 0, 0, 0, -1, NULL,
      "R-CLASS-2 400 'maximum context' -> context_overflow, no fall-over" },
    { C_GENERIC, TOK, 400, HS_NONE,
      "prompt is too long: 250000 tokens > 200000 maximum",
      R(CONTEXT_OVERFLOW), S(NONE), NONE, NONE, 0, 0, 0, -1, NULL,
      "R-CLASS-2 400 'prompt is too long' -> context_overflow" },
    { C_GENERIC, TOK, 400, HS_NONE, "input exceeds the Context Length",
      R(CONTEXT_OVERFLOW), S(NONE), NONE, NONE, 0, 0, 0, -1, NULL,
      "R-CLASS-2 400 'context length' -> context_overflow" },
    { C_GENERIC, TOK, 400, HS_NONE, "{\"error\":\"invalid JSON\"}",
      R(BAD_REQUEST), S(NONE), NONE, NONE, 0, 0, 0, -1, NULL,
      "R-CLASS-2 400 -> bad_request, no fall-over" },
    { C_GENERIC, TOK, 400, HS_NONE,
      "{\"error\":{\"message\":\"API key not valid. Please pass a valid API "
      "key.\",\"status\":\"INVALID_ARGUMENT\"}}",
      R(AUTH_ERROR), S(NONE), NONE, NONE, 1, 0, 0, -1, NULL,
      "R-CLASS-2 400 'API key not valid' -> auth_error, fall over" },
    { C_GENERIC, TOK, 400, HS_NONE, "{\"code\":\"model_not_found\"}",
      R(NOT_FOUND), S(NONE), NONE, NONE, 1, 0, 0, -1, NULL,
      "R-CLASS-2 400 model_not_found -> not_found, fall over" },
    { C_GENERIC, TOK, 400, HS_NONE,
      "Your credit balance is too low to access the Anthropic API",
      R(CREDITS_EXHAUSTED), S(NONE), NONE, NONE, 1, 0, 0, -1, NULL,
      "R-CLASS-2 400 'credit balance is too low' -> credits_exhausted" },
    { C_GENERIC, TOK, 400, HS_NONE, "bin\0ary\xff\xfe body",
      R(BAD_REQUEST), S(NONE), NONE, NONE, 0, 0, 0, -1, NULL,
      "R-CLASS-2 400 binary body -> bad_request" },

    /* 401 / 402 / 403 / 404 / 408 */
    { C_GENERIC, TOK, 401, HS_NONE, "invalid x-api-key",
      R(AUTH_ERROR), S(NONE), NONE, NONE, 1, 0, 0, -1, NULL,
      "R-CLASS-2 401 -> auth_error, fall over, no breaker (R-CB-3)" },
    { C_GENERIC, TOK, 401, HS_NONE, "OAuth token has expired",
      R(EXPIRED), S(NONE), NONE, NONE, 1, 0, 0, -1, NULL,
      "R-CLASS-2 401 'token has expired' -> expired" },
    { C_GENERIC, TOK, 402, HS_NONE, "Payment Required",
      R(CREDITS_EXHAUSTED), S(NONE), NONE, NONE, 1, 0, 0, -1, NULL,
      "R-CLASS-2 402 -> credits_exhausted, no cooldown (terminal)" },
    { C_GENERIC, TOK, 403, HS_NONE, "{\"error\":\"Request not allowed\"}",
      R(REQUEST_REJECTED), S(NONE), NONE, NONE, 1, 0, 0, -1, NULL,
      "R-CLASS-2 403 'Request not allowed' -> request_rejected" },
    { C_GENERIC, TOK, 403, HS_NONE, "Forbidden",
      R(AUTH_ERROR), S(NONE), NONE, NONE, 1, 0, 0, -1, NULL,
      "R-CLASS-2 403 without markers -> auth_error, fall over" },
    { C_GENERIC, TOK, 403, HS_NONE, "Your account has been suspended",
      R(BANNED), S(NONE), NONE, NONE, 1, 0, 0, -1, NULL,
      "R-CLASS-2 403 'account has been suspended' -> banned" },
    { C_GENERIC, TOK, 403, HS_NONE, "You exceeded your current quota",
      R(QUOTA_EXHAUSTED), S(NONE), 3600000, NONE, 1, 0, 0, -1, NULL,
      "R-CLASS-2 403 quota text -> quota_exhausted 1 h" },
    { C_GENERIC, TOK, 404, HS_NONE, "{\"error\":\"The model does not exist\"}",
      R(NOT_FOUND), S(NONE), NONE, NONE, 1, 0, 0, -1, NULL,
      "R-CLASS-2 404 -> not_found, fall over" },
    { C_GENERIC, TOK, 408, HS_NONE, "",
      R(TIMEOUT), S(NONE), NONE, NONE, 1, 1, 0, -1, NULL,
      "R-CLASS-2 408 -> timeout, counts for breaker (R-CB-3)" },
    { C_GENERIC, TOK, 413, HS_NONE, "request too large",
      R(BAD_REQUEST), S(NONE), NONE, NONE, 0, 0, 0, -1, NULL,
      "R-CLASS-2 413 -> bad_request" },
    { C_GENERIC, TOK, 422, HS_NONE, "unprocessable",
      R(BAD_REQUEST), S(NONE), NONE, NONE, 0, 0, 0, -1, NULL,
      "R-CLASS-2 422 -> bad_request" },
    { C_GENERIC, TOK, 418, HS_NONE, "teapot",
      R(BAD_REQUEST), S(NONE), NONE, NONE, 0, 0, 0, -1, NULL,
      "R-CLASS-2 other 4xx -> bad_request" },

    /* 429 (R-CLASS-2, R-CD-3, R-CD-5) */
    { C_GENERIC, TOK, 429, HS_RA20, "Rate limit reached",
      R(RATE_LIMIT_EXCEEDED), S(NONE), NONE, 20000, 1, 0, 0, -1, NULL,
      "R-CD-3 429 Retry-After 20 -> rate_limit_exceeded, hint 20 s" },
    { C_GENERIC, TOK, 429, HS_NONE,
      "{\"error\":{\"code\":\"insufficient_quota\",\"message\":\"You "
      "exceeded your current quota\"}}",
      R(QUOTA_EXHAUSTED), S(NONE), 3600000, NONE, 1, 0, 0, -1, NULL,
      "R-CLASS-2 OpenAI insufficient_quota -> quota_exhausted, 1 h" },
    { C_GENERIC, TOK, 429, HS_RA86400, "{\"code\":\"insufficient_quota\"}",
      R(QUOTA_EXHAUSTED), S(NONE), 86400000, 86400000, 1, 0, 0, -1, NULL,
      "R-CD-3 insufficient_quota with Retry-After: the hint wins" },
    { C_GENERIC, TOK, 429, HS_OPENAI_HOT, "Rate limit reached",
      R(RATE_LIMIT_EXCEEDED), S(NONE), NONE, 1000, 1, 0, 0, -1, NULL,
      "R-CD-3 429 x-ratelimit-reset-requests 1s (remaining 0) -> hint" },
    { C_GENERIC, TOK, 429, HS_NONE,
      "{\"error\":{\"code\":429,\"message\":\"Resource has been exhausted\","
      "\"details\":[{\"retryDelay\":\"86399s\"}]}}",
      R(RATE_LIMIT_EXCEEDED), S(NONE), NONE, 86399000, 1, 0, 0, -1, NULL,
      "R-CD-3 Google RetryInfo retryDelay 86399s -> hint" },
    { C_GENERIC, TOK, 429, HS_NONE,
      "Monthly usage limit reached. Resets in 3 days.",
      R(QUOTA_EXHAUSTED), S(NONE), 259200000, 259200000, 1, 0, 0, -1, NULL,
      "R-CD-3 quota text 'resets in 3 days' -> cooldown = hint" },
    { C_GENERIC, TOK, 429, HS_NONE, "Too many concurrent requests",
      R(CONCURRENCY_LIMITED), S(NONE), 1000, NONE, 1, 0, 0, -1, NULL,
      "R-CD-5 'too many concurrent requests' -> concurrency_limited 1 s" },
    { C_GENERIC, TOK, 429, HS_NONE, "Concurrency limit exceeded",
      R(CONCURRENCY_LIMITED), S(NONE), 1000, NONE, 1, 0, 0, -1, NULL,
      "R-CD-5 'concurrency limit' -> concurrency_limited" },
    { C_GENERIC, TOK, 429, HS_NONE, "parallel request limit reached",
      R(CONCURRENCY_LIMITED), S(NONE), 1000, NONE, 1, 0, 0, -1, NULL,
      "R-CD-5 'parallel request limit' -> concurrency_limited" },
    { C_GENERIC, TOK, 429, HS_NONE, "{\"error\":\"并发数过高\"}",
      R(CONCURRENCY_LIMITED), S(NONE), 1000, NONE, 1, 0, 0, -1, NULL,
      "R-CD-5 '并发数过高' -> concurrency_limited" },
    { C_GENERIC, TOK, 429, HS_RA3, "too many concurrent requests",
      R(CONCURRENCY_LIMITED), S(NONE), 3000, 3000, 1, 0, 0, -1, NULL,
      "R-CD-5 concurrency limit with Retry-After 3 -> the hint" },
    { C_GENERIC, TOK, 429, HS_NONE,
      "concurrency limit; insufficient_quota",
      R(QUOTA_EXHAUSTED), S(NONE), 3600000, NONE, 1, 0, 0, -1, NULL,
      "R-CD-5 a quota body wins over a concurrency body" },
    { C_GENERIC, TOK, 429, HS_NONE, "Please try again in 6ms.",
      R(RATE_LIMIT_EXCEEDED), S(NONE), NONE, 6, 1, 0, 0, -1, NULL,
      "R-CD-3 body 'try again in 6ms' -> hint 6 ms" },

    /* 5xx (R-CB-3) */
    { C_GENERIC, TOK, 500, HS_NONE, "",
      R(SERVER_ERROR), S(NONE), NONE, NONE, 1, 1, 0, -1, NULL,
      "R-CB-3 500 -> server_error, counts for breaker" },
    { C_GENERIC, TOK, 502, HS_NONE, "",
      R(SERVER_ERROR), S(NONE), NONE, NONE, 1, 1, 0, -1, NULL,
      "R-CB-3 502 -> server_error, counts for breaker" },
    { C_GENERIC, TOK, 503, HS_RA120, "",
      R(SERVER_ERROR), S(NONE), NONE, 120000, 1, 1, 0, -1, NULL,
      "R-CB-3 503 -> server_error, counts, hint 120 s" },
    { C_GENERIC, TOK, 504, HS_NONE, "",
      R(TIMEOUT), S(NONE), NONE, NONE, 1, 1, 0, -1, NULL,
      "R-CB-3 504 -> timeout, counts for breaker" },
    { C_GENERIC, TOK, 529, HS_NONE, "overloaded",
      R(SERVER_ERROR), S(NONE), NONE, NONE, 1, 0, 0, -1, NULL,
      "R-CB-3 529 -> server_error, does not count" },
    { C_GENERIC, TOK, 501, HS_NONE, "",
      R(SERVER_ERROR), S(NONE), NONE, NONE, 1, 0, 0, -1, NULL,
      "R-CB-3 501 -> server_error, does not count" },
    { C_GENERIC, TOK, 0, HS_NONE, "",
      R(SERVER_ERROR), S(NONE), NONE, NONE, 1, 0, 0, -1, NULL,
      "R-CLASS-2 status 0 -> server_error" },
    { C_NULL, TOK, 700, HS_NONE, "",
      R(SERVER_ERROR), S(NONE), NONE, NONE, 1, 0, 0, -1, NULL,
      "R-CLASS-2 status 700 -> server_error" },

    /* agentrouter: restatement then rules (R-CLASS-1, R-CLASS-3) */
    { C_AGENTROUTER, TOK, 403, HS_NONE,
      "{\"error\":{\"message\":\"用户额度不足\"}}",
      R(QUOTA_EXHAUSTED), S(CONNECTION), NONE, 60000, 1, 0, 429, 60,
      "agentrouter-user-quota-exhausted",
      "R-CLASS-1 agentrouter 403 用户额度不足 -> 429 Retry-After 60, "
      "quota_exhausted connection" },
    { C_AGENTROUTER, TOK, 400, HS_NONE, "额度不足",
      R(QUOTA_EXHAUSTED), S(CONNECTION), NONE, 60000, 1, 0, 429, 60,
      "agentrouter-user-quota-exhausted",
      "R-CLASS-1 agentrouter 400 额度不足 -> 429 Retry-After 60" },
    { C_AGENTROUTER, TOK, 403, HS_NONE, "无权访问模型 gpt-5",
      R(AUTH_ERROR), S(MODEL), 21600000, NONE, 1, 0, 0, -1,
      "agentrouter-model-access-denied",
      "R-CLASS-1 agentrouter 无权访问模型 not restated; auth_error model 6 h" },
    { C_AGENTROUTER, TOK, 403, HS_NONE, "额度不足 无权访问模型",
      R(AUTH_ERROR), S(MODEL), 21600000, NONE, 1, 0, 0, -1,
      "agentrouter-model-access-denied",
      "R-CLASS-1 exclude marker vetoes the restatement" },
    { C_AGENTROUTER, TOK, 403, HS_NONE,
      "{\"error\":{\"message\":\"\\u7528\\u6237\\u989d\\u5ea6"
      "\\u4e0d\\u8db3\",\"type\":\"new_api_error\"}}",
      R(QUOTA_EXHAUSTED), S(CONNECTION), NONE, 60000, 1, 0, 429, 60,
      "agentrouter-user-quota-exhausted",
      "issue 11: JSON-escaped 用户额度不足 is decoded and restated 429" },
    { C_AGENTROUTER, TOK, 403, HS_NONE,
      "{\"error\":{\"message\":\"\\u65e0\\u6743\\u8bbf\\u95ee"
      "\\u6a21\\u578b gpt-5\"}}",
      R(AUTH_ERROR), S(MODEL), 21600000, NONE, 1, 0, 0, -1,
      "agentrouter-model-access-denied",
      "issue 11: escaped 无权访问模型 is matched (model scope), not "
      "restated" },
    { C_GENERIC, TOK, 429, HS_NONE,
      "{\"error\":{\"message\":\"\\u989d\\u5ea6\\u4e0d\\u8db3\"}}",
      R(QUOTA_EXHAUSTED), S(NONE), 3600000, NONE, 1, 0, 0, -1, NULL,
      "issue 11: an escaped quota text in a 429 is quota_exhausted" },
    { C_AGENTROUTER, TOK, 429, HS_NONE, "额度不足",
      R(QUOTA_EXHAUSTED), S(CONNECTION), NONE, NONE, 1, 0, 0, -1,
      "agentrouter-user-quota-exhausted",
      "R-CLASS-3 agentrouter real 429 额度不足 -> rule, no restatement" },
    { C_AGENTROUTER, TOK, 401, HS_NONE, "额度不足",
      R(AUTH_ERROR), S(NONE), NONE, NONE, 1, 0, 0, -1, NULL,
      "R-CLASS-1 agentrouter 401 is neither restated nor ruled" },
    { C_AGENTROUTER, TOK, 403, HS_NONE, "forbidden",
      R(AUTH_ERROR), S(NONE), NONE, NONE, 1, 0, 0, -1, NULL,
      "R-CLASS-3 agentrouter plain 403 -> auth_error" },

    /* opencode: full text, egress-bucketed (R-CLASS-3, R-CLASS-6) */
    { C_OPENCODE, TOK, 429, HS_NONE,
      "[429] Monthly usage limit reached. Resets in 13 days.",
      R(QUOTA_EXHAUSTED), S(CONNECTION), 1123200000, 1123200000, 1, 0, 0,
      -1, "opencode-monthly-quota-resets-in",
      "R-CLASS-3 opencode monthly quota: cooldown = body reset 13 days" },
    { C_OPENCODE, TOK, 429, HS_NONE, "Monthly usage limit reached.",
      R(QUOTA_EXHAUSTED), S(CONNECTION), 3600000, NONE, 1, 0, 0, -1, NULL,
      "R-CLASS-6 opencode quota without reset -> generic 1 h, connection" },
    { C_OPENCODE, TOK, 429, HS_OC_REQ0, "rate limit reached",
      R(QUOTA_EXHAUSTED), S(CONNECTION), NONE, NONE, 1, 0, 0, -1,
      "opencode-quota-exhausted-headers",
      "R-CLASS-3 header rule x-ratelimit-remaining-requests: 0" },
    { C_OPENCODE, TOK, 429, HS_NONE,
      "{\"error\":{\"type\":\"plan_limit_reached\"}}",
      R(QUOTA_EXHAUSTED), S(CONNECTION), NONE, NONE, 1, 0, 0, -1,
      "opencode-quota-exhausted-body",
      "R-CLASS-3 error code/type rule plan_limit_reached" },
    { C_OPENCODE, TOK, 429, HS_NONE, "rate limited",
      R(RATE_LIMIT_EXCEEDED), S(CONNECTION), NONE, NONE, 1, 0, 0, -1, NULL,
      "R-CLASS-6 egress-bucketed 429 rate_limit -> connection scope" },
    { C_OPENCODE, TOK, 429, HS_NONE, "too many concurrent requests",
      R(CONCURRENCY_LIMITED), S(NONE), 1000, NONE, 1, 0, 0, -1, NULL,
      "R-CLASS-6 egress-bucketed concurrency 429 keeps default scope" },
    { C_OPENCODE, TOK, 400, HS_NONE, "endpoint is unavailable",
      R(SERVER_ERROR), S(NONE), 300000, NONE, 1, 0, 0, -1,
      "opencode-endpoint-unavailable",
      "R-CLASS-5 built-in rule on 400; scope not honored for opencode" },

    /* minimax: header rules, no full text */
    { C_MINIMAX, TOK, 429, HS_MM_ZERO, "rate limit exceeded",
      R(QUOTA_EXHAUSTED), S(NONE), NONE, NONE, 1, 0, 0, -1,
      "minimax-per-model-quota",
      "R-CLASS-3 header x-model-quota-remaining haiku=0 -> quota" },
    { C_MINIMAX, TOK, 429, HS_MM_NONZERO, "rate limit exceeded",
      R(RATE_LIMIT_EXCEEDED), S(NONE), NONE, NONE, 1, 0, 0, -1, NULL,
      "R-CLASS-3 header without a zero item -> no rule" },
    { C_MINIMAX, TOK, 429, HS_MM_SPACED, "",
      R(QUOTA_EXHAUSTED), S(NONE), NONE, NONE, 1, 0, 0, -1,
      "minimax-per-model-quota",
      "R-CLASS-3 header zero item with spaces" },

    /* cloudflare-ai, openrouter */
    { C_CLOUDFLARE, TOK, 429, HS_NONE,
      "you have used up your daily free allocation of 10,000 neurons",
      R(QUOTA_EXHAUSTED), S(NONE), NONE, NONE, 1, 0, 0, -1,
      "cloudflare-ai-daily-neuron-allocation",
      "R-CLASS-3 cloudflare-ai daily free allocation -> quota" },
    { C_OPENROUTER, TOK, 402, HS_NONE,
      "This request requires more credits, or fewer max_tokens",
      R(QUOTA_EXHAUSTED), S(NONE), 120000, NONE, 1, 0, 0, -1,
      "openrouter-credit-exhausted-402",
      "R-CLASS-3 openrouter 402 -> quota_exhausted 2 min" },
    { C_OPENROUTER, TOK, 402, HS_NONE,
      "Insufficient credits. Add more using https://openrouter.ai/credits",
      R(CREDITS_EXHAUSTED), S(NONE), NONE, NONE, 1, 0, 0, -1, NULL,
      "R-CLASS-3 credits text detector precedes the provider rule" },

    /* operator rules (R-CLASS-4, R-CLASS-5) */
    { C_OPER, TOK, 400, HS_NONE, "error: Upstream Overloaded",
      R(SERVER_ERROR), S(MODEL), 300000, NONE, 1, 0, 0, -1,
      "op-400-overloaded",
      "R-CLASS-5 operator rule consulted for HTTP 400" },
    { C_OPER, TOK, 500, HS_NONE, "upstream overloaded",
      R(SERVER_ERROR), S(NONE), NONE, NONE, 1, 1, 0, -1, NULL,
      "R-CLASS-4 status AND match: 500 does not match a 400 rule" },
    { C_OPER, TOK, 429, HS_NONE,
      "{\"code\":\"insufficient_quota\"} try again in 20s",
      R(QUOTA_EXHAUSTED), S(CONNECTION), D30, 20000, 1, 0, 0, -1,
      "op-insufficient",
      "R-CLASS-4 first match wins; explicit cooldown 30 d kept exactly" },
    { C_OPER, TOK, 400, HS_NONE, "insufficient_quota",
      R(QUOTA_EXHAUSTED), S(CONNECTION), D30, NONE, 1, 0, 0, -1,
      "op-insufficient",
      "R-CLASS-4 match-only rule, any status, case-insensitive" },
    { C_OPER, TOK, 429, HS_RA20, "slow down",
      R(RATE_LIMIT_EXCEEDED), S(NONE), NONE, 20000, 1, 0, 0, -1,
      "op-429-any",
      "R-CLASS-3 connection scope needs quota_exhausted: not honored" },
    { C_OPER, TOK, 429, HS_NONE, "too many concurrent requests",
      R(CONCURRENCY_LIMITED), S(NONE), 1000, NONE, 1, 0, 0, -1,
      "op-429-any",
      "R-CLASS-4 rule without reason: derived concurrency_limited 1 s" },
    { C_OPER, TOK, 503, HS_NONE, "scheduled maintenance",
      R(SERVER_ERROR), S(PROVIDER), 600000, NONE, 1, 1, 0, -1,
      "op-503-maintenance",
      "R-CLASS-3 operator rule scope provider honored" },
    { C_OPER, TOK, 402, HS_NONE, "payment required",
      R(QUOTA_EXHAUSTED), S(NONE), 3600000, NONE, 1, 0, 0, -1,
      "op-402-hour",
      "R-CLASS-4 402 rule with a cooldown derives quota, not terminal" },
    { C_OPER, TOK, 402, HS_NONE, "credit balance is too low",
      R(CREDITS_EXHAUSTED), S(NONE), NONE, NONE, 1, 0, 0, -1, NULL,
      "R-CLASS-4 credits detector precedes operator rules" },
    { C_OPER, TOK, 418, HS_NONE, "I'm a teapot",
      R(RATE_LIMIT_EXCEEDED), S(NONE), NONE, NONE, 1, 0, 0, -1, "operator",
      "R-CLASS-4 rule without id reports 'operator'" },

    /* catch-all defaults (R-CLASS-4) */
    { C_CATCH, TOK, 429, HS_RA20, "",
      R(RATE_LIMIT_EXCEEDED), S(CONNECTION), 120000, 20000, 1, 0, 0, -1,
      "catch-all",
      "R-CLASS-4 catch-all 429: max(default 2m, hint 20s) = 2m, "
      "scope connection" },
    { C_CATCH, TOK, 429, HS_RA600, "",
      R(RATE_LIMIT_EXCEEDED), S(CONNECTION), 600000, 600000, 1, 0, 0, -1,
      "catch-all", "R-CLASS-4 catch-all: a longer hint wins (10m)" },
    { C_CATCH, TOK, 402, HS_NONE, "",
      R(QUOTA_EXHAUSTED), S(CONNECTION), 120000, NONE, 1, 0, 0, -1,
      "catch-all", "R-CLASS-4 catch-all 402 -> timed quota, not terminal" },
    { C_CATCH, TOK, 403, HS_NONE, "",
      R(AUTH_ERROR), S(CONNECTION), 120000, NONE, 1, 0, 0, -1, "catch-all",
      "R-CLASS-4 catch-all 403" },
    { C_CATCH, TOK, 408, HS_NONE, "",
      R(TIMEOUT), S(CONNECTION), 120000, NONE, 1, 1, 0, -1, "catch-all",
      "R-CLASS-4 catch-all 408" },
    { C_CATCH, TOK, 503, HS_NONE, "",
      R(SERVER_ERROR), S(CONNECTION), 120000, NONE, 1, 1, 0, -1,
      "catch-all", "R-CLASS-4 catch-all 5xx (503)" },
    { C_CATCH, TOK, 599, HS_NONE, "",
      R(SERVER_ERROR), S(CONNECTION), 120000, NONE, 1, 0, 0, -1,
      "catch-all", "R-CLASS-4 catch-all 5xx (599)" },
    { C_CATCH, TOK, 400, HS_NONE, "",
      R(BAD_REQUEST), S(NONE), NONE, NONE, 0, 0, 0, -1, NULL,
      "R-CLASS-4 catch-all never applies to 400" },
    { C_CATCH, TOK, 401, HS_NONE, "",
      R(AUTH_ERROR), S(NONE), NONE, NONE, 1, 0, 0, -1, NULL,
      "R-CLASS-4 catch-all never applies to 401" },
    { C_CATCH, TOK, 404, HS_NONE, "",
      R(NOT_FOUND), S(NONE), NONE, NONE, 1, 0, 0, -1, NULL,
      "R-CLASS-4 catch-all never applies to 404" },
    { C_CATCH, TOK, 429, HS_NONE, "too many concurrent requests",
      R(CONCURRENCY_LIMITED), S(NONE), 1000, NONE, 1, 0, 0, -1, NULL,
      "R-CD-5 catch-all leaves a concurrency-limit 429 at 1 s" },
    { C_CATCH, TOK, 403, HS_NONE, "account has been suspended",
      R(BANNED), S(NONE), NONE, NONE, 1, 0, 0, -1, NULL,
      "R-CLASS-4 catch-all never overrides a terminal detector" },
    { C_CATCH_REASON, TOK, 429, HS_NONE, "",
      R(QUOTA_EXHAUSTED), S(MODEL), 3600000, NONE, 1, 0, 0, -1,
      "catch-all", "R-CLASS-4 catch-all with reason and scope" },
    { C_CATCH_OP, TOK, 429, HS_RA600, "please slow down",
      R(RATE_LIMIT_EXCEEDED), S(NONE), 5000, 600000, 1, 0, 0, -1,
      "op-slow-down",
      "R-CLASS-4 an explicit rule keeps its exact cooldown (5 s)" },
    { C_CATCH_OP, TOK, 429, HS_NONE, "other",
      R(RATE_LIMIT_EXCEEDED), S(CONNECTION), 120000, NONE, 1, 0, 0, -1,
      "catch-all", "R-CLASS-4 no rule matched -> catch-all" },

    /* allowlists (R-CLASS-3) */
    { C_NOFULLTEXT, TOK, 429, HS_NONE, "special quota",
      R(RATE_LIMIT_EXCEEDED), S(NONE), NONE, NONE, 1, 0, 0, -1, NULL,
      "R-CLASS-3 body text invisible to built-in rules off the allowlist" },
    { C_NOFULLTEXT, TOK, 429, HS_NONE,
      "{\"error\":{\"code\": \"tier_exhausted\"}}",
      R(QUOTA_EXHAUSTED), S(NONE), 700000, NONE, 1, 0, 0, -1, "t-code",
      "R-CLASS-3 error code visible; scope not honored off the allowlist" },
    { C_NOFULLTEXT, TOK, 429, HS_NONE,
      "{\"message\":\"{\\\"code\\\":\\\"TIER_EXHAUSTED\\\"}\"}",
      R(QUOTA_EXHAUSTED), S(NONE), 700000, NONE, 1, 0, 0, -1, "t-code",
      "R-CLASS-3 error code inside escaped JSON, case-insensitive" },
    { C_NOFULLTEXT, TOK, 429, HS_NONE, "{\"code\":\"tier_exhausted_x\"}",
      R(RATE_LIMIT_EXCEEDED), S(NONE), NONE, NONE, 1, 0, 0, -1, NULL,
      "R-CLASS-3 error code must match the whole value" },
    { C_NOFULLTEXT, TOK, 503, HS_NONE, "",
      R(SERVER_ERROR), S(NONE), NONE, NONE, 1, 1, 0, -1, NULL,
      "R-CLASS-3 header rule needs its header" },
    { C_FULLTEXT, TOK, 429, HS_NONE, "Special Quota",
      R(QUOTA_EXHAUSTED), S(CONNECTION), 900000, NONE, 1, 0, 0, -1,
      "t-text", "R-CLASS-3 full-text provider: text rule, scope honored" },
    { C_FULLTEXT, TOK, 429, HS_NONE, "{\"type\":\"tier_exhausted\"}",
      R(QUOTA_EXHAUSTED), S(MODEL), 700000, NONE, 1, 0, 0, -1, "t-code",
      "R-CLASS-3 scope-allowlisted provider: model scope honored" },
    { C_FULLTEXT, TOK, 401, HS_NONE, "guarded",
      R(AUTH_ERROR), S(NONE), NONE, NONE, 1, 0, 0, -1, "t-guard",
      "R-CLASS-3 connection scope with auth_error not honored" },
    { C_FULLTEXT, TOK, 402, HS_NONE, "creditcard",
      R(CREDITS_EXHAUSTED), S(NONE), NONE, NONE, 1, 0, 0, -1, "t-credits",
      "R-CLASS-3 connection scope never with credits_exhausted" },
};


static void
setup(void)
{
    static const char  *names[C_COUNT] = {
        "", "openai", "agentrouter", "opencode", "minimax", "cloudflare-ai",
        "openrouter", "acme", "acme", "acme", "acme", "acme", "acme"
    };
    int                  i;

    for (i = 0; i < C_COUNT; i++) {
        or_class_conf_init(&confs[i], names[i], strlen(names[i]));
    }

    confs[C_OPER].oprules = oper_rules;
    confs[C_OPER].noprules = sizeof(oper_rules) / sizeof(oper_rules[0]);

    confs[C_CATCH].catchall.cooldown_ms = 120000;

    confs[C_CATCH_REASON].catchall.cooldown_ms = 3600000;
    confs[C_CATCH_REASON].catchall.reason = OR_REASON_QUOTA_EXHAUSTED;
    confs[C_CATCH_REASON].catchall.scope = OR_SCOPE_MODEL;

    confs[C_CATCH_OP].catchall.cooldown_ms = 120000;
    confs[C_CATCH_OP].oprules = catch_op_rules;
    confs[C_CATCH_OP].noprules = 1;

    confs[C_NOFULLTEXT].rules = custom_rules;
    confs[C_NOFULLTEXT].nrules = sizeof(custom_rules)
                                 / sizeof(custom_rules[0]);

    confs[C_FULLTEXT].rules = custom_rules;
    confs[C_FULLTEXT].nrules = confs[C_NOFULLTEXT].nrules;
    confs[C_FULLTEXT].full_text = 1;
    confs[C_FULLTEXT].honor_scope = 1;
}


static void
run_case(const case_t *c)
{
    or_verdict_t   v;
    or_response_t  resp;

    resp.status = c->status;
    resp.transport = c->transport;
    resp.headers = hsets[c->hs].h;
    resp.nheaders = hsets[c->hs].n;
    resp.body = c->body;
    resp.body_len = strlen(c->body);
    resp.now_ms = NOW;

    /* the binary case carries a NUL: use its real length */
    if (strncmp(c->body, "bin", 3) == 0) {
        resp.body_len = sizeof("bin\0ary\xff\xfe body") - 1;
    }

    or_classify(c->conf == C_NULL ? NULL : &confs[c->conf], &resp, &v);

    or_is_str(or_reason_name(v.reason), or_reason_name(c->reason),
              "%s: reason", c->name);
    or_is_str(or_scope_name(v.scope), or_scope_name(c->scope),
              "%s: scope", c->name);
    or_is_int(v.cooldown_ms, c->cooldown, "%s: cooldown", c->name);
    or_is_int(v.hint_ms, c->hint, "%s: hint", c->name);
    or_is_int(v.fall_over, c->fall_over, "%s: fall_over", c->name);
    or_is_int(v.counts_for_breaker, c->breaker, "%s: counts_for_breaker",
              c->name);
    or_is_int(v.restated_status, c->restated, "%s: restated status",
              c->name);
    or_is_int(v.retry_after_s, c->retry_after, "%s: Retry-After", c->name);
    or_is_str(v.rule_id, c->rule_id, "%s: rule id", c->name);
}


static void
test_table(void)
{
    size_t  i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        run_case(&cases[i]);
    }
}


static void
test_egress(void)
{
    size_t            n;
    unsigned char     cool[6];
    or_verdict_t      v;
    or_egress_conn_t  conns[6] = {
        { "10.0.0.1", 8, 0 },     /* the failing connection */
        { "10.0.0.1", 8, 0 },     /* same egress: cooled */
        { "10.0.0.2", 8, 0 },     /* other egress */
        { "10.0.0.1", 8, 1 },     /* disable_cooling */
        { "", 0, 0 },             /* unknown egress */
        { "10.0.0.10", 9, 0 },    /* prefix is not a match */
    };

    memset(&v, 0, sizeof(v));
    v.reason = OR_REASON_RATE_LIMIT_EXCEEDED;

    n = or_egress_siblings(&confs[C_OPENCODE], 429, &v, &conns[0], conns, 6,
                           cool);
    or_is_int(n, 1, "R-CLASS-6 429 rate_limit cools one sibling");
    or_ok(cool[0] == 0 && cool[1] == 1 && cool[2] == 0 && cool[3] == 0
          && cool[4] == 0 && cool[5] == 0,
          "R-CLASS-6 same egress key only; skips disable_cooling and self");

    v.reason = OR_REASON_QUOTA_EXHAUSTED;
    n = or_egress_siblings(&confs[C_OPENCODE], 429, &v, &conns[0], conns, 6,
                           cool);
    or_is_int(n, 1, "R-CLASS-6 429 quota_exhausted cools siblings");

    v.reason = OR_REASON_CONCURRENCY_LIMITED;
    n = or_egress_siblings(&confs[C_OPENCODE], 429, &v, &conns[0], conns, 6,
                           cool);
    or_is_int(n, 0, "R-CLASS-6 concurrency_limited cools no sibling");
    or_is_int(cool[1], 0, "R-CLASS-6 flags cleared when nothing is cooled");

    v.reason = OR_REASON_BANNED;
    n = or_egress_siblings(&confs[C_OPENCODE], 429, &v, &conns[0], conns, 6,
                           cool);
    or_is_int(n, 0, "R-CLASS-6 never from a terminal verdict");

    v.reason = OR_REASON_QUOTA_EXHAUSTED;
    n = or_egress_siblings(&confs[C_OPENCODE], 403, &v, &conns[0], conns, 6,
                           cool);
    or_is_int(n, 0, "R-CLASS-6 only for a 429");

    v.restated_status = 429;
    n = or_egress_siblings(&confs[C_OPENCODE], 403, &v, &conns[0], conns, 6,
                           cool);
    or_is_int(n, 1, "R-CLASS-6 a restated 429 counts");
    v.restated_status = 0;

    n = or_egress_siblings(&confs[C_GENERIC], 429, &v, &conns[0], conns, 6,
                           cool);
    or_is_int(n, 0, "R-CLASS-6 providers off the allowlist: no siblings");
    n = or_egress_siblings(&confs[C_AGENTROUTER], 429, &v, &conns[0], conns,
                           6, cool);
    or_is_int(n, 0, "R-CLASS-6 agentrouter is not egress-bucketed");

    n = or_egress_siblings(&confs[C_OPENCODE], 429, &v, &conns[3], conns, 6,
                           cool);
    or_is_int(n, 0, "R-CLASS-6 failing connection with disable_cooling");

    n = or_egress_siblings(&confs[C_OPENCODE], 429, &v, &conns[4], conns, 6,
                           cool);
    or_is_int(n, 0, "R-CLASS-6 failing connection without egress key");

    n = or_egress_siblings(&confs[C_OPENCODE], 429, &v, &conns[1], conns, 6,
                           cool);
    or_ok(n == 1 && cool[0] == 1 && cool[1] == 0,
          "R-CLASS-6 any sibling may be the failing one");

    n = or_egress_siblings(NULL, 429, &v, &conns[0], conns, 6, cool);
    or_is_int(n, 0, "R-CLASS-6 NULL conf");
}


static void
test_validate(void)
{
    int          i;
    char         longm[300];
    size_t       bad;
    or_oprule_t  r, many[51];
    or_catchall_t  c;
    static const or_oprule_t  ok = {
        "x", 429, "slow", 4, OR_REASON_RATE_LIMIT_EXCEEDED, OR_SCOPE_MODEL,
        60000
    };

    or_ok(or_oprule_validate(&ok) == NULL, "R-CLASS-4 valid operator rule");

    r = ok;
    r.status = 0;
    r.match = NULL;
    or_is_str(or_oprule_validate(&r), "rule needs a status or a match",
              "R-CLASS-4 rule needs status or match");

    r = ok;
    r.match = NULL;
    or_ok(or_oprule_validate(&r) == NULL, "R-CLASS-4 status-only rule ok");

    r = ok;
    r.status = 0;
    or_ok(or_oprule_validate(&r) == NULL, "R-CLASS-4 match-only rule ok");

    r = ok;
    r.status = 99;
    or_is_str(or_oprule_validate(&r), "status must be between 100 and 599",
              "R-CLASS-4 status 99 rejected");

    r = ok;
    r.cooldown_ms = D30;
    or_ok(or_oprule_validate(&r) == NULL, "R-CLASS-4 cooldown 30 d accepted");

    r.cooldown_ms = D30 + 1;
    or_is_str(or_oprule_validate(&r), "cooldown must be between 0 and 30 days",
              "R-CLASS-4 cooldown 30 d + 1 ms rejected");

    r.cooldown_ms = -5;
    or_ok(or_oprule_validate(&r) != NULL, "R-CLASS-4 negative cooldown");

    r.cooldown_ms = 0;
    or_ok(or_oprule_validate(&r) == NULL, "R-CLASS-4 cooldown 0 accepted");

    memset(longm, 'a', sizeof(longm));
    r = ok;
    r.match = longm;
    r.match_len = 256;
    or_ok(or_oprule_validate(&r) == NULL, "R-CLASS-4 256-byte match ok");

    r.match_len = 257;
    or_is_str(or_oprule_validate(&r), "match is longer than 256 bytes",
              "R-CLASS-4 257-byte match rejected");

    r = ok;
    r.reason = OR_REASON_CREDITS_EXHAUSTED;
    or_ok(or_oprule_validate(&r) != NULL,
          "R-CLASS-4 terminal reason with a cooldown rejected");

    r.cooldown_ms = NONE;
    or_ok(or_oprule_validate(&r) == NULL,
          "R-CLASS-4 terminal reason without cooldown accepted");

    r = ok;
    r.reason = OR_REASON_COUNT;
    or_is_str(or_oprule_validate(&r), "unknown reason",
              "R-CLASS-4 unknown reason rejected");

    r = ok;
    r.scope = OR_SCOPE_COUNT;
    or_is_str(or_oprule_validate(&r), "unknown scope",
              "R-CLASS-4 unknown scope rejected");

    for (i = 0; i < 51; i++) {
        many[i] = ok;
    }

    or_ok(or_oprules_validate(many, 50, &bad) == NULL,
          "R-CLASS-4 50 operator rules accepted");
    or_is_str(or_oprules_validate(many, 51, &bad),
              "too many rules (at most 50)", "R-CLASS-4 51 rules rejected");

    many[7].status = 0;
    many[7].match = NULL;
    or_ok(or_oprules_validate(many, 50, &bad) != NULL && bad == 7,
          "R-CLASS-4 the invalid rule's index is reported");

    c.cooldown_ms = 60000;
    c.scope = OR_SCOPE_NONE;
    c.reason = OR_REASON_NONE;
    or_ok(or_catchall_validate(&c) == NULL,
          "R-CLASS-4 catch-all cooldown 1m accepted");

    c.cooldown_ms = 59999;
    or_is_str(or_catchall_validate(&c),
              "default cooldown must be between 1m and 30d",
              "R-CLASS-4 catch-all cooldown below 1m rejected");

    c.cooldown_ms = D30;
    or_ok(or_catchall_validate(&c) == NULL,
          "R-CLASS-4 catch-all cooldown 30d accepted");

    c.cooldown_ms = D30 + 1;
    or_ok(or_catchall_validate(&c) != NULL,
          "R-CLASS-4 catch-all cooldown above 30d rejected");

    c.cooldown_ms = 60000;
    c.reason = OR_REASON_BANNED;
    or_ok(or_catchall_validate(&c) != NULL,
          "R-CLASS-4 catch-all terminal reason rejected");

    c.reason = OR_REASON_NONE;
    c.scope = OR_SCOPE_COUNT;
    or_is_str(or_catchall_validate(&c), "unknown scope",
              "R-CLASS-4 catch-all unknown scope rejected");

    c.cooldown_ms = NONE;
    or_ok(or_catchall_validate(&c) == NULL,
          "R-CLASS-4 no catch-all is valid");
}


static void
test_misc(void)
{
    int                  i;
    or_verdict_t         v;
    or_response_t        resp;
    or_class_conf_t      conf;
    const or_catalog_t  *cat;
    static const int     fall[OR_REASON_COUNT] = {
        0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1
    };

    for (i = 0; i < OR_REASON_COUNT; i++) {
        or_is_int(or_classify_falls_over((or_reason_e) i), fall[i],
                  "R-CLASS-2 fall_over(%s)", or_reason_name((or_reason_e) i));
    }

    or_ok(or_classify_is_terminal(OR_REASON_BANNED)
          && or_classify_is_terminal(OR_REASON_EXPIRED)
          && or_classify_is_terminal(OR_REASON_CREDITS_EXHAUSTED)
          && !or_classify_is_terminal(OR_REASON_QUOTA_EXHAUSTED)
          && !or_classify_is_terminal(OR_REASON_REQUEST_REJECTED),
          "R-CD-6 terminal reasons: banned, expired, credits_exhausted");

    or_is_int(or_classify_reason_parse("quota_exhausted", 15),
              OR_REASON_QUOTA_EXHAUSTED, "R-CLASS-2 reason name parses");
    or_is_int(or_classify_reason_parse("bogus", 5), OR_REASON_COUNT,
              "R-CLASS-2 unknown reason name");
    or_is_int(or_classify_scope_parse("connection", 10), OR_SCOPE_CONNECTION,
              "R-CLASS-3 scope name parses");
    or_is_int(or_classify_scope_parse("conn", 4), OR_SCOPE_COUNT,
              "R-CLASS-3 unknown scope name");

    cat = or_catalog_find("AgentRouter", 11);
    or_ok(cat != NULL && cat->full_text && cat->honor_scope
          && !cat->egress_bucketed,
          "R-CLASS-3 agentrouter: full-text and scope allowlists");
    cat = or_catalog_find("opencode-go", 11);
    or_ok(cat != NULL && cat->egress_bucketed && !cat->honor_scope,
          "R-CLASS-6 opencode family is egress-bucketed");
    or_ok(or_catalog_find("openai", 6) == NULL,
          "R-CLASS-3 no catalog entry for openai");

    or_class_conf_init(&conf, "agentrouter", 11);
    or_is_int(conf.nrestate_builtin, 1,
              "R-CLASS-1 conf init attaches the built-in restatement");
    or_is_int(conf.catchall.cooldown_ms, NONE,
              "R-CLASS-4 conf init: no catch-all by default");

    /* NULL body with a length, no headers */
    memset(&resp, 0, sizeof(resp));
    resp.status = 429;
    resp.body = NULL;
    resp.body_len = 100;
    resp.now_ms = NOW;
    or_classify(&conf, &resp, &v);
    or_is_str(or_reason_name(v.reason), "rate_limit_exceeded",
              "R-CLASS-2 NULL body is an empty body");

    /* restatement to a success status ends classification */
    {
        static const or_restate_rule_t  ok200[] = {
            { "to-200", { 418, 0 }, 200, { NULL }, { NULL }, -1 }
        };

        conf.restate = ok200;
        conf.nrestate = 1;
        resp.status = 418;
        or_classify(&conf, &resp, &v);
        or_ok(v.reason == OR_REASON_NONE && v.restated_status == 200
              && !v.fall_over,
              "R-CLASS-1 operator restatement runs before built-in ones");
    }

    /* operator rules beyond 50 are ignored */
    {
        static or_oprule_t  rules[51];

        for (i = 0; i < 51; i++) {
            rules[i].id = "late";
            rules[i].status = 451;
            rules[i].reason = OR_REASON_QUOTA_EXHAUSTED;
            rules[i].cooldown_ms = NONE;
        }

        for (i = 0; i < 50; i++) {
            rules[i].status = 452;
        }

        memset(&conf, 0, sizeof(conf));
        conf.oprules = rules;
        conf.noprules = 51;
        resp.status = 451;
        or_classify(&conf, &resp, &v);
        or_ok(v.rule_id == NULL && v.reason == OR_REASON_BAD_REQUEST,
              "R-CLASS-4 at most 50 operator rules are consulted");
    }
}


int
main(void)
{
    setup();
    test_table();
    test_egress();
    test_validate();
    test_misc();
    test_decode();
    test_capability();

    return or_done();
}


/* issue 11: markers match the JSON-decoded text */

static void
test_decode(void)
{
    char             out[64];
    size_t           n;
    or_verdict_t     v;
    or_response_t    resp;
    or_oprule_t      rule;
    or_class_conf_t  conf;

    n = or_classify_unescape("a\\u00e9\\ud83d\\ude00\\u0022\\n", 27, out,
                             sizeof(out));
    out[n] = '\0';
    or_is_str(out, "a\xc3\xa9\xf0\x9f\x98\x80\\u0022\\n",
              "\\uXXXX and surrogate pairs decoded; quote and \\n kept");

    n = or_classify_unescape("\\ud800x", 7, out, sizeof(out));
    out[n] = '\0';
    or_is_str(out, "\\ud800x", "a lone surrogate stays escaped");

    n = or_classify_unescape("\\u7528\\u6237", 12, out, 4);
    or_is_int(n, 3, "the output bound is kept (no partial character)");

    or_ok(or_classify_quota_text("{\"message\":\"\\u989d\\u5ea6\\u4e0d"
                                 "\\u8db3\"}", 38),
          "escaped quota text is quota text");
    or_ok(!or_classify_quota_text("{\"message\":\"busy\"}", 18),
          "other text is not");

    /* operator rules see the decoded text too */

    memset(&rule, 0, sizeof(rule));
    rule.id = "cn";
    rule.match = "服务繁忙";
    rule.match_len = strlen(rule.match);
    rule.reason = OR_REASON_SERVER_ERROR;
    rule.cooldown_ms = 5000;

    memset(&conf, 0, sizeof(conf));
    conf.oprules = &rule;
    conf.noprules = 1;
    conf.catchall.cooldown_ms = NONE;

    memset(&resp, 0, sizeof(resp));
    resp.status = 500;
    resp.body = "{\"error\":\"\\u670d\\u52a1\\u7e41\\u5fd9\"}";
    resp.body_len = strlen(resp.body);
    resp.now_ms = NOW;

    or_classify(&conf, &resp, &v);
    or_is_str(v.rule_id, "cn", "an operator rule matches escaped text");
    or_ok(!v.lockout_capped, "an operator rule's cooldown is exact");

    or_classify_stream_stall(&v);
    or_ok(v.reason == OR_REASON_STREAM_STALL && v.fall_over
          && !v.counts_for_breaker && v.cooldown_ms == NONE,
          "R-CD-8 a stream stall: falls over, no breaker, no cooldown");
}


/* issue 25: capability refusals fall over, never a connection failure */

static void
test_capability(void)
{
    size_t               i;
    or_verdict_t         v;
    or_response_t        resp;
    or_outcome_writes_t  w;

    static const struct {
        int          status;
        const char  *body;
        const char  *name;
    } cases[] = {
        { 400, "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_"
               "error\",\"message\":\"This model does not support assistant "
               "message prefill. The conversation must end with a user "
               "message.\"}}", "Anthropic prefill" },
        { 400, "{\"error\":{\"message\":\"assistant message prefill is not "
               "supported\"}}", "prefill is not supported" },
        { 400, "{\"error\":{\"message\":\"Unsupported parameter: 'temperature'"
               " is not supported with this model.\",\"type\":\"invalid_"
               "request_error\",\"param\":\"temperature\",\"code\":"
               "\"unsupported_parameter\"}}", "OpenAI unsupported parameter" },
        { 400, "{\"error\":{\"message\":\"Invalid content type. image_url is "
               "only supported by certain models. This model does not "
               "support image inputs.\"}}", "OpenAI images" },
        { 400, "{\"error\":{\"code\":400,\"message\":\"Function calling is "
               "not enabled for models/gemma-3-27b-it\",\"status\":"
               "\"INVALID_ARGUMENT\"}}", "Gemini tools" },
        { 404, "{\"error\":{\"message\":\"No endpoints found that support "
               "tool use. To learn more about provider routing, visit: "
               "https://openrouter.ai/docs/provider-routing\",\"code\":404}}",
          "OpenRouter 404 tool use" },
    };

    memset(&resp, 0, sizeof(resp));
    resp.transport = OR_TRANSPORT_OK;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        resp.status = cases[i].status;
        resp.body = cases[i].body;
        resp.body_len = strlen(cases[i].body);

        or_classify(NULL, &resp, &v);

        or_is_int(v.reason, OR_REASON_CAPABILITY, "%s: capability",
                  cases[i].name);
        or_ok(v.fall_over && !v.counts_for_breaker,
              "%s: falls over, no breaker", cases[i].name);

        w = or_outcome_writes(&v, cases[i].status, OR_TRANSPORT_OK, NULL, 0,
                              0, 0);
        or_is_int((int) w.mask, 0, "%s: nothing recorded for the connection",
                  cases[i].name);
    }

    resp.status = 400;
    resp.body = "{\"error\":{\"message\":\"Invalid value for 'messages'\"}}";
    resp.body_len = strlen(resp.body);
    or_classify(NULL, &resp, &v);
    or_is_int(v.reason, OR_REASON_BAD_REQUEST, "another 400: bad_request");

    resp.status = 404;
    resp.body = "{\"error\":{\"message\":\"The model `x` does not exist\"}}";
    resp.body_len = strlen(resp.body);
    or_classify(NULL, &resp, &v);
    or_is_int(v.reason, OR_REASON_NOT_FOUND, "a missing model: not_found");

    or_is_str(or_reason_name(OR_REASON_CAPABILITY), "capability", "its name");
}
