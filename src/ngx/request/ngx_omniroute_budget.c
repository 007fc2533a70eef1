
/*
 * Copyright (C) ngx_omniroute authors
 *
 * Per-key budgets and rate limits on the request path (R-BUDGET-1..3).
 * Once the request is checked (its key, model, routes), admission
 * reserves its estimates in the rules of its key (the key's own, and the
 * first rule of the key whose model pattern matches the model the client
 * named): input tokens from the body size (bytes / 4), output tokens
 * from max_tokens (or max_completion_tokens, max_output_tokens,
 * generationConfig.maxOutputTokens), else the rule's output_estimate.
 * A refusal is 429 with Retry-After and a JSON error naming the limit.
 * When the request is freed (a pool cleanup: whatever way it ended,
 * client aborts and internal redirects included), the reservation is
 * settled with the usage of the committed answer or stream (stats.c),
 * the estimate standing in for what the answer did not report (and for
 * the output of a stream that did not finish: an abort mid-stream is
 * charged its reported input and at least its output reservation); a
 * request without a committed 2xx answer releases its tokens.
 *
 * Every response of a limited key carries the rate-limit headers as of
 * its admission: x-ratelimit-{limit,remaining,reset}-{requests,tokens}
 * (OpenAI), anthropic-ratelimit-* on /v1/messages.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute_ctx.h"
#include "ngx_omniroute_budget_store.h"
#include "or_usage.h"


#define NGX_OMNIROUTE_BUDGET_RULES  2   /* the key's, a model's */


struct ngx_omniroute_budget_req_s {
    ngx_omniroute_ctx_t          *ctx;
    ngx_omniroute_budget_conf_t  *bc;
    ngx_omniroute_budget_rule_t  *rules[NGX_OMNIROUTE_BUDGET_RULES];
    or_budget_ticket_t            tickets[NGX_OMNIROUTE_BUDGET_RULES];
    ngx_uint_t                    n;
    uint64_t                      in;           /* the estimates */
    uint64_t                      out;
    int                           refused;      /* OR_BUDGET_NONE: no */
    ngx_uint_t                    refused_rule;
    or_msec_t                     retry;
    or_budget_view_t              requests;     /* for the headers */
    or_budget_view_t              tokens;
    or_budget_view_t              input;
    or_budget_view_t              output;
    or_msec_t                     at;           /* when admitted */
    unsigned                      headers:1;    /* added */
};


static void ngx_omniroute_budget_views(ngx_omniroute_budget_req_t *br,
    or_budget_t *state, or_budget_conf_t *conf, or_msec_t now);
static void ngx_omniroute_budget_tightest(or_budget_view_t *acc,
    or_budget_view_t *v);
static void ngx_omniroute_budget_cleanup(void *data);
static ngx_int_t ngx_omniroute_budget_trio(ngx_http_request_t *r,
    ngx_omniroute_budget_req_t *br, or_budget_view_t *v, const char *stem,
    ngx_uint_t anthropic);
static u_char *ngx_omniroute_budget_duration(u_char *p, or_msec_t ms);
static ngx_uint_t ngx_omniroute_budget_anthropic(ngx_http_request_t *r);


/*
 * NGX_OK: admitted (or no key, no zone); NGX_HTTP_TOO_MANY_REQUESTS
 * with ctx->error_code: refused, ngx_omniroute_budget_refusal() answers.
 */

ngx_int_t
ngx_omniroute_budget_admit(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx)
{
    int                           k;
    u_char                       *msg;
    uint64_t                      cap;
    or_msec_t                     now, retry;
    ngx_uint_t                    i, j;
    or_budget_conf_t              conf;
    ngx_pool_cleanup_t           *cln;
    ngx_omniroute_budget_req_t   *br;
    ngx_omniroute_budget_conf_t  *bc;
    ngx_omniroute_budget_slot_t  *slot;
    ngx_omniroute_main_conf_t    *omcf;

    if (ctx->auth == NULL || ctx->budget || r->method != NGX_HTTP_POST) {
        /* a GET passed through (omniroute_models pass=) is no model's */
        return NGX_OK;
    }

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);
    bc = ngx_omniroute_budget_conf(omcf);

    if (bc == NULL || bc->sh == NULL) {
        return NGX_OK;
    }

    br = ngx_pcalloc(r->pool, sizeof(ngx_omniroute_budget_req_t));
    if (br == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    br->n = ngx_omniroute_budget_rules(bc, ctx->auth->key, &ctx->model,
                                       br->rules);
    if (br->n == 0) {
        return NGX_OK;
    }

    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (cln == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    br->ctx = ctx;
    br->bc = bc;
    br->refused = OR_BUDGET_NONE;
    br->in = or_budget_input_estimate(ctx->body.len);

    if (!or_budget_max_tokens((const char *) ctx->body.data, ctx->body.len,
                              &cap))
    {
        /* the most specific rule's estimate */
        cap = br->rules[br->n - 1]->estimate;
    }

    br->out = cap;

    now = ngx_omniroute_now();
    br->at = now;

    ngx_omniroute_budget_lock(bc);

    for (i = 0; i < br->n; i++) {
        slot = ngx_omniroute_budget_slot(bc, br->rules[i]);
        ngx_omniroute_budget_limits(br->rules[i], slot, &conf);

        k = or_budget_admit(&slot->state, &conf, now, br->in, br->out,
                            &br->tickets[i], &retry);

        if (k != OR_BUDGET_NONE) {
            slot->refused[k]++;

            for (j = 0; j < i; j++) {
                or_budget_cancel(&ngx_omniroute_budget_slot(bc,
                                     br->rules[j])->state, &br->tickets[j]);
                ngx_omniroute_budget_slot(bc, br->rules[j])->admitted--;
            }

            br->refused = k;
            br->refused_rule = i;
            br->retry = retry;
            break;
        }

        slot->admitted++;
    }

    for (i = 0; i < br->n; i++) {
        slot = ngx_omniroute_budget_slot(bc, br->rules[i]);
        ngx_omniroute_budget_limits(br->rules[i], slot, &conf);
        ngx_omniroute_budget_views(br, &slot->state, &conf, now);
    }

    ngx_omniroute_budget_unlock(bc);

    ctx->budget = br;

    if (br->refused == OR_BUDGET_NONE) {
        cln->handler = ngx_omniroute_budget_cleanup;
        cln->data = br;

        return NGX_OK;
    }

    msg = ngx_pnalloc(r->pool, 256 + NGX_OMNIROUTE_BUDGET_NAME_MAX);
    if (msg == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    slot = ngx_omniroute_budget_slot(bc, br->rules[br->refused_rule]);
    ngx_omniroute_budget_limits(br->rules[br->refused_rule], slot, &conf);

    ngx_sprintf(msg, "the key \"%V\" reached its limit %s (%uL)%s%*s%s: "
                "retry in %L s%Z", &ctx->auth->key->id,
                or_budget_name(br->refused), conf.limit[br->refused],
                br->rules[br->refused_rule]->model.len
                ? " for the models \"" : "",
                br->rules[br->refused_rule]->model.len,
                br->rules[br->refused_rule]->model.data,
                br->rules[br->refused_rule]->model.len ? "\"" : "",
                (int64_t) ((br->retry + 999) / 1000));

    ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                  "omniroute: %s", msg);

    return ngx_omniroute_reject(ctx, NGX_HTTP_TOO_MANY_REQUESTS,
                                br->refused == OR_BUDGET_CONCURRENT
                                ? "concurrency_limit_exceeded"
                                : (br->refused == OR_BUDGET_DAY
                                   || br->refused == OR_BUDGET_MONTH)
                                  ? "budget_exceeded"
                                  : "rate_limit_exceeded",
                                (char *) msg);
}


/* the 429 of a refusal: Retry-After, the limit named in the JSON error */

ngx_int_t
ngx_omniroute_budget_refusal(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx)
{
    json_t                      *doc;
    ngx_str_t                    name, value;
    ngx_omniroute_budget_req_t  *br;

    br = ctx->budget;

    if (ngx_omniroute_set_retry_after(r, br->retry) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ngx_str_set(&name, "X-Content-Type-Options");
    ngx_str_set(&value, "nosniff");

    if (ngx_omniroute_add_header(r, &name, &value) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    doc = json_pack("{s:{s:s,s:s,s:s,s:s,s:s%,s:I}}", "error",
                    "message", ctx->error_message,
                    "type", "rate_limit_error",
                    "code", ctx->error_code,
                    "limit", or_budget_name(br->refused),
                    "model", br->rules[br->refused_rule]->model.data
                             ? br->rules[br->refused_rule]->model.data : "",
                    br->rules[br->refused_rule]->model.len,
                    "retry_after_ms", (json_int_t) br->retry);
    if (doc == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return ngx_omniroute_send_json(r, NGX_HTTP_TOO_MANY_REQUESTS, doc);
}


static void
ngx_omniroute_budget_views(ngx_omniroute_budget_req_t *br, or_budget_t *state,
    or_budget_conf_t *conf, or_msec_t now)
{
    int               k;
    or_budget_view_t  v;

    or_budget_view(state, conf, OR_BUDGET_REQUESTS, now, &v);
    ngx_omniroute_budget_tightest(&br->requests, &v);

    or_budget_view(state, conf, OR_BUDGET_INPUT, now, &v);
    ngx_omniroute_budget_tightest(&br->input, &v);

    or_budget_view(state, conf, OR_BUDGET_OUTPUT, now, &v);
    ngx_omniroute_budget_tightest(&br->output, &v);

    for (k = OR_BUDGET_INPUT; k <= OR_BUDGET_MONTH; k++) {
        or_budget_view(state, conf, k, now, &v);
        ngx_omniroute_budget_tightest(&br->tokens, &v);
    }
}


/* the limit with the least remaining (ties: the later reset) */

static void
ngx_omniroute_budget_tightest(or_budget_view_t *acc, or_budget_view_t *v)
{
    if (v->limit == 0) {
        return;
    }

    if (acc->limit == 0 || v->remaining < acc->remaining
        || (v->remaining == acc->remaining && v->reset > acc->reset))
    {
        *acc = *v;
    }
}


/*
 * The request is freed: its reservation settled with the usage of its
 * committed 2xx answer or stream (the estimate for what it did not
 * report), else released.
 */

static void
ngx_omniroute_budget_cleanup(void *data)
{
    ngx_omniroute_budget_req_t *br = data;

    uint64_t                      in, out, tokens[OR_USAGE_KINDS];
    unsigned                      seen;
    or_msec_t                     now;
    ngx_uint_t                    i, done, whole;
    ngx_omniroute_ctx_t          *ctx;
    ngx_omniroute_attempt_t      *a;
    ngx_omniroute_budget_conf_t  *bc;
    ngx_omniroute_budget_slot_t  *slot;

    ctx = br->ctx;
    bc = br->bc;

    done = 0;
    whole = 0;
    a = ctx->attempts.elts;

    for (i = ctx->attempts.nelts; i > 0; i--) {
        if (a[i - 1].state == NGX_OMNIROUTE_ATTEMPT_COMMITTED) {
            done = (a[i - 1].status >= 200 && a[i - 1].status < 300);

            /* a stream cut short (the client went away): unfinished */
            whole = !a[i - 1].stream || a[i - 1].terminal;
            break;
        }
    }

    in = 0;
    out = 0;

    if (done) {
        seen = ngx_omniroute_stats_usage(ctx, tokens);

        in = (seen & (1u << OR_USAGE_PROMPT)) ? tokens[OR_USAGE_PROMPT]
                                               : br->in;
        out = (seen & (1u << OR_USAGE_COMPLETION))
              ? tokens[OR_USAGE_COMPLETION] : br->out;

        if (!whole && out < br->out) {
            /* what it reported so far is not what it used: the estimate */
            out = br->out;
        }
    }

    now = ngx_omniroute_now();

    ngx_omniroute_budget_lock(bc);

    for (i = 0; i < br->n; i++) {
        slot = ngx_omniroute_budget_slot(bc, br->rules[i]);
        or_budget_settle(&slot->state, &br->tickets[i], now, in, out);
        slot->tokens[0] = or_budget_add(slot->tokens[0], in);
        slot->tokens[1] = or_budget_add(slot->tokens[1], out);
    }

    ngx_omniroute_budget_unlock(bc);
}


/*
 * The main request's header filter: the rate-limit headers of its key's
 * limits, once.  OpenAI's reset is a duration ("1m30s"), Anthropic's an
 * RFC 3339 time.
 */

ngx_int_t
ngx_omniroute_budget_headers(ngx_http_request_t *r)
{
    ngx_uint_t                   anthropic;
    ngx_omniroute_ctx_t         *ctx;
    ngx_omniroute_budget_req_t  *br;

    ctx = ngx_http_get_module_ctx(r, ngx_http_omniroute_module);

    if (ctx == NULL || ctx->budget == NULL || ctx->budget->headers) {
        return NGX_OK;
    }

    br = ctx->budget;
    br->headers = 1;

    anthropic = ngx_omniroute_budget_anthropic(r);

    if (ngx_omniroute_budget_trio(r, br, &br->requests, "requests",
                                  anthropic) != NGX_OK
        || ngx_omniroute_budget_trio(r, br, &br->tokens, "tokens",
                                     anthropic) != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (anthropic
        && (ngx_omniroute_budget_trio(r, br, &br->input, "input-tokens", 1)
            != NGX_OK
            || ngx_omniroute_budget_trio(r, br, &br->output,
                                         "output-tokens", 1) != NGX_OK))
    {
        return NGX_ERROR;
    }

    return NGX_OK;
}


/* limit, remaining, reset of one view, in either spelling */

static ngx_int_t
ngx_omniroute_budget_trio(ngx_http_request_t *r,
    ngx_omniroute_budget_req_t *br, or_budget_view_t *v, const char *stem,
    ngx_uint_t anthropic)
{
    u_char     *p;
    ngx_tm_t    tm;
    ngx_str_t   name, value;
    ngx_uint_t  i;
    static const char  *what[] = { "limit", "remaining", "reset" };

    if (v->limit == 0) {
        return NGX_OK;
    }

    for (i = 0; i < 3; i++) {
        name.data = ngx_pnalloc(r->pool, 64);
        value.data = ngx_pnalloc(r->pool, 64);

        if (name.data == NULL || value.data == NULL) {
            return NGX_ERROR;
        }

        p = anthropic
            ? ngx_sprintf(name.data, "anthropic-ratelimit-%s-%s", stem,
                          what[i])
            : ngx_sprintf(name.data, "x-ratelimit-%s-%s", what[i], stem);
        name.len = p - name.data;

        switch (i) {

        case 0:
            p = ngx_sprintf(value.data, "%uL", v->limit);
            break;

        case 1:
            p = ngx_sprintf(value.data, "%uL", v->remaining);
            break;

        default:
            if (anthropic) {
                ngx_gmtime((time_t) ((br->at + v->reset + 999) / 1000), &tm);
                p = ngx_sprintf(value.data, "%4d-%02d-%02dT%02d:%02d:%02dZ",
                                tm.ngx_tm_year, tm.ngx_tm_mon,
                                tm.ngx_tm_mday, tm.ngx_tm_hour,
                                tm.ngx_tm_min, tm.ngx_tm_sec);

            } else {
                p = ngx_omniroute_budget_duration(value.data, v->reset);
            }
        }

        value.len = p - value.data;

        if (ngx_omniroute_add_header(r, &name, &value) != NGX_OK) {
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


/* OpenAI's durations: "250ms", "12s", "1m30s", "26h3m0s" */

static u_char *
ngx_omniroute_budget_duration(u_char *p, or_msec_t ms)
{
    int64_t  s, m, h;

    if (ms < 1000) {
        return ngx_sprintf(p, "%Lms", (int64_t) (ms > 0 ? ms : 0));
    }

    s = (ms + 999) / 1000;
    h = s / 3600;
    m = (s % 3600) / 60;
    s %= 60;

    if (h) {
        return ngx_sprintf(p, "%Lh%Lm%Ls", h, m, s);
    }

    if (m) {
        return ngx_sprintf(p, "%Lm%Ls", m, s);
    }

    return ngx_sprintf(p, "%Ls", s);
}


/* the Anthropic Messages API: a path ending in /v1/messages */

static ngx_uint_t
ngx_omniroute_budget_anthropic(ngx_http_request_t *r)
{
    size_t  n;

    n = sizeof("/v1/messages") - 1;

    return r->uri.len >= n
           && ngx_strncmp(r->uri.data + r->uri.len - n, "/v1/messages", n)
              == 0;
}
