
/*
 * Copyright (C) ngx_omniroute authors
 *
 * All that the client gets: the committed or held attempt's status and
 * headers with X-OmniRoute-Connection, X-OmniRoute-Attempts (and
 * X-OmniRoute-Trail with omniroute_attempt_trail, X-OmniRoute-Warning
 * for a background request answered synchronously), the
 * restated status and Retry-After of a held error (R-CLASS-1, R-REQ-6),
 * the gateway's own answers (transport failure, everything cooling down,
 * client errors) and nginx's error pages, all in the OpenAI error shape,
 * {"error":{"message","type","code"}}, which SDKs can parse.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute_ctx.h"
#include "or_sse.h"


static ngx_int_t ngx_omniroute_apply_restatement(ngx_http_request_t *r,
    ngx_omniroute_attempt_t *a);
static ngx_int_t ngx_omniroute_nosniff(ngx_http_request_t *r);
static ngx_int_t ngx_omniroute_send_in_band(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, ngx_uint_t status, json_t *doc);
static json_t *ngx_omniroute_excluded_json(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, or_msec_t *earliest);


/* an attempt count of one digit, as most are, is pointed at here */
static const char  ngx_omniroute_digits[] = "0123456789";


typedef struct {
    ngx_uint_t                    status;
    const char                   *code;
    const char                   *message;
} ngx_omniroute_error_page_t;


static ngx_omniroute_error_page_t  ngx_omniroute_error_pages[] = {
    { 400, "bad_request", "the request could not be parsed" },
    { 401, "unauthorized", "authorization is required" },
    { 403, "forbidden", "access to this resource is denied" },
    { 404, "not_found", "no such resource" },
    { 405, "method_not_allowed", "this method is not allowed here" },
    { 408, "request_timeout", "the request was not received in time" },
    { 411, "length_required", "the request needs a length" },
    { 413, "request_too_large",
      "the request body exceeds client_max_body_size" },
    { 414, "uri_too_long", "the request URI is too long" },
    { 429, "too_many_requests", "too many requests" },
    { 431, "headers_too_large", "the request headers are too large" },
    { 494, "headers_too_large", "the request headers are too large" },
    { 500, "internal_error", "the gateway failed to process the request" },
    { 502, "upstream_unavailable", "the provider could not be reached" },
    { 503, "service_unavailable", "the service is unavailable" },
    { 504, "upstream_timeout", "the provider did not respond in time" },
    { 0, "http_error", "the request failed" }
};


/*
 * The gateway's own JSON answers say X-Content-Type-Options: nosniff, as
 * the admin API's do (issue 25).
 */

static ngx_int_t
ngx_omniroute_nosniff(ngx_http_request_t *r)
{
    ngx_str_t  name, value;

    ngx_str_set(&name, "X-Content-Type-Options");
    ngx_str_set(&value, "nosniff");

    return ngx_omniroute_add_header(r, &name, &value);
}


/*
 * Every answer of the gateway's own: X-Content-Type-Options: nosniff;
 * in-band once the client's stream started.  doc is consumed.
 */

ngx_int_t
ngx_omniroute_send_own_json(ngx_http_request_t *r, ngx_uint_t status,
    json_t *doc)
{
    ngx_omniroute_ctx_t  *ctx;

    ctx = (r == r->main)
          ? ngx_http_get_module_ctx(r, ngx_http_omniroute_module) : NULL;

    if (ctx && ctx->early) {
        /* the client's stream started (keep-alives): in-band (issue 25) */
        return ngx_omniroute_send_in_band(r, ctx, status, doc);
    }

    if (ngx_omniroute_nosniff(r) != NGX_OK) {
        json_decref(doc);
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return ngx_omniroute_send_json(r, status, doc);
}


/*
 * An answer of the gateway's own after the client's 200 event-stream
 * header went out: its code and message as an in-band error event, with
 * the Retry-After the one writer set (ngx_omniroute_set_retry_after()).
 */

static ngx_int_t
ngx_omniroute_send_in_band(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx,
    ngx_uint_t status, json_t *doc)
{
    ngx_int_t                   rc, retry;
    json_t                     *err;
    const char                 *code, *msg;
    ngx_table_elt_t            *h;
    ngx_omniroute_list_iter_t   it;

    err = json_object_get(doc, "error");
    code = json_string_value(json_object_get(err, "code"));
    msg = json_string_value(json_object_get(err, "message"));

    retry = -1;

    ngx_omniroute_list_start(&it, &r->headers_out.headers);

    while ((h = ngx_omniroute_list_next(&it)) != NULL) {

        if (h->hash != 0
            && h->key.len == sizeof("Retry-After") - 1
            && ngx_strncasecmp(h->key.data, (u_char *) "Retry-After",
                               sizeof("Retry-After") - 1) == 0)
        {
            retry = ngx_atoi(h->value.data, h->value.len);
        }
    }

    code = code ? code : "gateway_error";
    msg = msg ? msg : "the request failed";

    ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                  "omniroute: the request ended after the client's stream "
                  "started, it ends with an error event (%ui %s)",
                  status, code);

    rc = ngx_omniroute_send_error_event(r, ctx, status, code, msg,
                                        ngx_strlen(msg), retry, 0);

    json_decref(doc);

    return rc;
}


ngx_int_t
ngx_omniroute_send_error(ngx_http_request_t *r, ngx_uint_t status,
    const char *type, const char *code, const char *message)
{
    json_t  *doc;

    doc = json_pack("{s:{s:s,s:s,s:s}}", "error", "message", message,
                    "type", type, "code", code);
    if (doc == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return ngx_omniroute_send_own_json(r, status, doc);
}


/*
 * Called by the header filter for a main request whose response is one of
 * nginx's error pages (r->err_status is set) in an omniroute_pass
 * location: the page becomes a JSON error; the body filter sends
 * ctx->error_page in place of the HTML.
 */

ngx_uint_t
ngx_omniroute_json_errors(ngx_http_request_t *r)
{
    ngx_uint_t                  i;
    ngx_http_core_srv_conf_t   *cscf, **s;
    ngx_omniroute_loc_conf_t   *olcf;
    ngx_omniroute_main_conf_t  *omcf;

    olcf = ngx_http_get_module_loc_conf(r, ngx_http_omniroute_module);

    if (olcf->json_errors) {
        return 1;
    }

    /* before a location was chosen (a malformed request) in a server of
     * omniroute_pass or omniroute_api locations */

    cscf = ngx_http_get_module_srv_conf(r, ngx_http_core_module);

    if (cscf == NULL || r->loc_conf != cscf->ctx->loc_conf) {
        return 0;
    }

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);
    s = omcf->json_servers.elts;

    for (i = 0; i < omcf->json_servers.nelts; i++) {
        if (s[i] == cscf) {
            return 1;
        }
    }

    return 0;
}


ngx_int_t
ngx_omniroute_json_error_page(ngx_http_request_t *r)
{
    json_t                      *doc;
    ngx_str_t                    text;
    ngx_uint_t                   status;
    const char                  *type;
    ngx_omniroute_ctx_t         *ctx;
    ngx_omniroute_error_page_t  *ep;

    ctx = ngx_http_get_module_ctx(r, ngx_http_omniroute_module);

    if (ctx == NULL) {
        ctx = ngx_pcalloc(r->pool, sizeof(ngx_omniroute_ctx_t));
        if (ctx == NULL) {
            return NGX_ERROR;
        }

        ngx_http_set_ctx(r, ctx, ngx_http_omniroute_module);
    }

    status = r->headers_out.status;

    /*
     * nginx answers a 494 (a header line or all headers too large) with
     * status 400; it is the one 400 that keeps lingering_close set
     */

    if (status == NGX_HTTP_BAD_REQUEST && r->lingering_close) {
        status = NGX_HTTP_REQUEST_HEADER_TOO_LARGE;
    }

    for (ep = ngx_omniroute_error_pages; ep->status; ep++) {
        if (ep->status == status) {
            break;
        }
    }

    switch (status) {

    case NGX_HTTP_UNAUTHORIZED:
        type = "authentication_error";
        break;

    case NGX_HTTP_FORBIDDEN:
        type = "permission_error";
        break;

    case NGX_HTTP_NOT_FOUND:
        type = "not_found_error";
        break;

    case NGX_HTTP_TOO_MANY_REQUESTS:
        type = "rate_limit_error";
        break;

    default:
        type = (status >= NGX_HTTP_INTERNAL_SERVER_ERROR)
               ? "server_error" : "invalid_request_error";
        break;
    }

    doc = json_pack("{s:{s:s,s:s,s:s}}", "error", "message", ep->message,
                    "type", type, "code", ep->code);
    if (doc == NULL) {
        return NGX_ERROR;
    }

    if (ngx_omniroute_json_text(r->pool, doc, &text) != NGX_OK) {
        return NGX_ERROR;
    }

    ctx->error_page = ngx_omniroute_text_buf(r, text.data, text.len);
    if (ctx->error_page == NULL) {
        return NGX_ERROR;
    }

    ngx_omniroute_set_json_headers(r, r->headers_out.status,
                                   ctx->error_page->last
                                   - ctx->error_page->pos);

    return ngx_omniroute_nosniff(r);
}


/*
 * A refusal before the body is read: the body is discarded, the answer
 * is JSON in the OpenAI shape; a 401 says how to authenticate.
 */

ngx_int_t
ngx_omniroute_auth_reject(ngx_http_request_t *r, ngx_uint_t status,
    const char *code, const char *message)
{
    ngx_int_t                  rc;
    ngx_str_t                  name, value;
    const char                *type;
    ngx_omniroute_loc_conf_t  *olcf;

    rc = ngx_http_discard_request_body(r);
    if (rc != NGX_OK) {
        return rc;
    }

    olcf = ngx_http_get_module_loc_conf(r, ngx_http_omniroute_module);

    if (olcf->pass_uri.len) {
        ngx_omniroute_count(r, NGX_OMNIROUTE_OUT_CLIENT_ERROR);
    }

    if (status == NGX_HTTP_UNAUTHORIZED) {
        ngx_str_set(&name, "WWW-Authenticate");
        ngx_str_set(&value, "Bearer realm=\"omniroute\"");

        if (ngx_omniroute_add_header(r, &name, &value) != NGX_OK) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
    }

    /* as OpenAI answers them (an invalid key too) */

    type = (status == NGX_HTTP_TOO_MANY_REQUESTS) ? "rate_limit_error"
           : (status >= NGX_HTTP_INTERNAL_SERVER_ERROR) ? "server_error"
           : "invalid_request_error";

    return ngx_omniroute_send_error(r, status, type, code, message);
}


/* a client error, answered by the body handler */

ngx_int_t
ngx_omniroute_reject(ngx_omniroute_ctx_t *ctx, ngx_uint_t status,
    const char *code, const char *message)
{
    ctx->error_code = code;
    ctx->error_message = message;

    return status;
}


/*
 * A request refused before planning (ngx_omniroute_reject()): its code
 * and message; 404 no_executable_targets says why in diagnostics, as
 * the answer after planning does (issue 25): no connection serves any
 * target of the model, nothing was excluded.
 */

ngx_int_t
ngx_omniroute_send_rejected(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx,
    ngx_int_t status)
{
    json_t  *doc;

    if (ngx_strcmp(ctx->error_code, "no_executable_targets") != 0) {
        return ngx_omniroute_send_error(r, status, "invalid_request_error",
                                        ctx->error_code, ctx->error_message);
    }

    doc = json_pack("{s:{s:s,s:s,s:s},s:{s:[],s:i,s:s}}",
                    "error", "message", ctx->error_message,
                    "type", "invalid_request_error", "code", ctx->error_code,
                    "diagnostics", "excluded", "routes", 0,
                    "reason", "no connection is declared for any target of "
                              "this model (omniroute_connection provider=, "
                              "models=)");
    if (doc == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return ngx_omniroute_send_own_json(r, (ngx_uint_t) status, doc);
}


/*
 * The response of attempt sr becomes the client's: status and headers are
 * copied into a fresh list of r (list parts must not be shared).
 */

ngx_int_t
ngx_omniroute_copy_response_headers(ngx_http_request_t *r,
    ngx_http_request_t *sr)
{
    ngx_table_elt_t            *h, *nh;
    ngx_omniroute_list_iter_t   it;

    r->headers_out.status = sr->headers_out.status;
    r->headers_out.status_line = sr->headers_out.status_line;
    r->headers_out.content_type = sr->headers_out.content_type;
    r->headers_out.content_type_len = sr->headers_out.content_type_len;
    r->headers_out.content_type_lowcase = NULL;
    r->headers_out.charset = sr->headers_out.charset;
    r->headers_out.content_length_n = sr->headers_out.content_length_n;
    r->headers_out.content_length = NULL;
    r->headers_out.last_modified_time = -1;
    r->headers_out.last_modified = NULL;

    ngx_omniroute_list_start(&it, &sr->headers_out.headers);

    while ((h = ngx_omniroute_list_next(&it)) != NULL) {

        if (h->hash == 0) {
            continue;
        }

        nh = ngx_list_push(&r->headers_out.headers);
        if (nh == NULL) {
            return NGX_ERROR;
        }

        *nh = *h;
#if (nginx_version >= 1023000)
        nh->next = NULL;
#endif
    }

    return NGX_OK;
}


/*
 * X-OmniRoute-Connection and X-OmniRoute-Attempts on the main response;
 * X-OmniRoute-Warning when the request was changed on its way (a
 * Responses API "background": true answered synchronously)
 */

ngx_int_t
ngx_omniroute_add_route_headers(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx)
{
    u_char                   *p;
    ngx_str_t                 name, value;
    ngx_omniroute_attempt_t  *a;

    if (ctx->background) {
        ngx_str_set(&name, "X-OmniRoute-Warning");
        ngx_str_set(&value, "background-forced-synchronous");

        if (ngx_omniroute_add_header(r, &name, &value) != NGX_OK) {
            return NGX_ERROR;
        }
    }

    if (ctx->attempts.nelts == 0) {
        return NGX_OK;
    }

    a = (ngx_omniroute_attempt_t *) ctx->attempts.elts
        + ctx->attempts.nelts - 1;

    if (ctx->last_held
        && (a->state == NGX_OMNIROUTE_ATTEMPT_TRANSPORT
            || a->state == NGX_OMNIROUTE_ATTEMPT_HELD))
    {
        /* the held error that is the answer (an emergency's is not) */
        a = ctx->last_held;
    }

    ngx_str_set(&name, "X-OmniRoute-Connection");

    if (ngx_omniroute_add_header(r, &name, &a->cand->conn->id) != NGX_OK) {
        return NGX_ERROR;
    }

    if (ctx->attempts.nelts < 10) {
        /* one digit, as most requests have: no formatting, no copy */
        value.data = (u_char *) &ngx_omniroute_digits[ctx->attempts.nelts];
        value.len = 1;

    } else {
        p = ngx_pnalloc(r->pool, NGX_INT_T_LEN);
        if (p == NULL) {
            return NGX_ERROR;
        }

        value.data = p;
        value.len = ngx_sprintf(p, "%ui", ctx->attempts.nelts) - p;
    }

    ngx_str_set(&name, "X-OmniRoute-Attempts");

    if (ngx_omniroute_add_header(r, &name, &value) != NGX_OK) {
        return NGX_ERROR;
    }

    if (!ctx->lcf->attempt_trail) {
        return NGX_OK;
    }

    /* omniroute_attempt_trail: each attempt, its status, its time */

    if (ngx_omniroute_stats_trail(r, ctx, &value) != NGX_OK) {
        return NGX_ERROR;
    }

    ngx_str_set(&name, "X-OmniRoute-Trail");

    return ngx_omniroute_add_header(r, &name, &value);
}


/* every attempt failed: the client gets the latest held provider error */

ngx_int_t
ngx_omniroute_send_held(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_attempt_t *a)
{
    ngx_int_t     rc;
    ngx_buf_t    *b;
    ngx_chain_t   out;

    if (a->event.len) {
        /*
         * An error event of a 200 stream, before its first content: the
         * client gets it as the error response it stands for (restated
         * status, Retry-After), its data as the JSON body.
         */

        r->headers_out.status = a->status;
        r->headers_out.status_line.len = 0;

        if (ngx_omniroute_apply_restatement(r, a) != NGX_OK
            || ngx_omniroute_add_route_headers(r, ctx) != NGX_OK)
        {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        b = ngx_omniroute_text_buf(r, a->event.data, a->event.len);
        if (b == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        ngx_omniroute_set_json_headers(r, r->headers_out.status,
                                       b->last - b->pos);

        rc = ngx_http_send_header(r);

        if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
            return rc;
        }

        out.buf = b;
        out.next = NULL;

        return ngx_http_output_filter(r, &out);
    }

    if (ngx_omniroute_copy_response_headers(r, a->sr) != NGX_OK
        || ngx_omniroute_apply_restatement(r, a) != NGX_OK
        || ngx_omniroute_add_route_headers(r, ctx) != NGX_OK)
    {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    b = a->body;

    r->headers_out.content_length_n = b ? b->last - b->pos : 0;

    if (b == NULL || b->last == b->pos) {
        r->header_only = 1;
    }

    rc = ngx_http_send_header(r);

    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }

    b->last_buf = 1;
    b->last_in_chain = 1;

    out.buf = b;
    out.next = NULL;

    return ngx_http_output_filter(r, &out);
}


ngx_int_t
ngx_omniroute_send_transport_error(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, ngx_omniroute_attempt_t *a)
{
    if (ngx_omniroute_add_route_headers(r, ctx) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (a->status == NGX_HTTP_GATEWAY_TIME_OUT) {
        return ngx_omniroute_send_error(r, NGX_HTTP_GATEWAY_TIME_OUT,
                                        "upstream_error", "upstream_timeout",
                                        "the provider did not respond in "
                                        "time");
    }

    return ngx_omniroute_send_error(r, NGX_HTTP_BAD_GATEWAY,
                                    "upstream_error", "upstream_unavailable",
                                    "the provider could not be reached");
}


/*
 * The held error becomes the client's response: restated status (status
 * line rebuilt) and Retry-After (R-CLASS-1); an upstream retry hint found
 * elsewhere (body text, rate-limit headers) becomes a Retry-After too
 * when the provider sent none (R-REQ-6).
 */

static ngx_int_t
ngx_omniroute_apply_restatement(ngx_http_request_t *r,
    ngx_omniroute_attempt_t *a)
{
    or_msec_t  cooled, now;

    if (a->verdict.restated_status) {
        r->headers_out.status = a->verdict.restated_status;
        r->headers_out.status_line.len = 0;
    }

    /*
     * One Retry-After (issue 25): the restatement's, the upstream hint
     * (its Retry-After, rate-limit headers, body text) and, for a 429 or
     * 503, the cooldown just recorded for the connection: the longest.
     */

    now = ngx_omniroute_now();
    cooled = (a->cooled_until > now) ? a->cooled_until - now : OR_MSEC_NONE;

    return ngx_omniroute_set_retry_after(r,
               or_retry_after_answer((int) r->headers_out.status,
                                     a->verdict.retry_after_s,
                                     a->verdict.hint_ms, cooled));
}


/*
 * Nothing runnable (R-REQ-6): 503 all_targets_cooling_down with
 * Retry-After (earliest expiry) when a timer excluded something, else 404
 * no_executable_targets; both with diagnostics.excluded.
 */

ngx_int_t
ngx_omniroute_send_cooling_down(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx)
{
    json_t      *doc, *list;
    or_msec_t    earliest;
    ngx_uint_t   status;
    const char  *code, *msg;

    /* the attempts made before (the emergency target's): the trail */

    if (ngx_omniroute_add_route_headers(r, ctx) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    list = ngx_omniroute_excluded_json(r, ctx, &earliest);
    if (list == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (earliest >= 0) {
        status = NGX_HTTP_SERVICE_UNAVAILABLE;
        code = "all_targets_cooling_down";
        msg = "every target of this model is cooling down; retry later";

        if (ngx_omniroute_set_retry_after(r, earliest) != NGX_OK) {
            json_decref(list);
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        ngx_omniroute_count(r, NGX_OMNIROUTE_OUT_COOLING_DOWN);

    } else {
        status = NGX_HTTP_NOT_FOUND;
        code = "no_executable_targets";
        msg = "no connection can serve this model";
        ngx_omniroute_count(r, NGX_OMNIROUTE_OUT_NO_TARGETS);
    }

    doc = json_pack("{s:{s:s,s:s,s:s},s:{s:o}}",
                    "error", "message", msg, "type",
                    earliest >= 0 ? "rate_limit_error"
                                  : "invalid_request_error",
                    "code", code, "diagnostics", "excluded", list);
    if (doc == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return ngx_omniroute_send_own_json(r, status, doc);
}


/*
 * R-CONC-3: every target of a combo is in a transient cooldown or lockout
 * and waiting is not allowed (off, too long, no attempt or budget left):
 * 429 rate_limit_error with retry_after (s) and reset_at (ms since the
 * epoch) of the earliest transient expiry, Retry-After, and the
 * diagnostics.
 */

ngx_int_t
ngx_omniroute_send_rate_limited(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, or_msec_t retry)
{
    json_t     *doc, *list;
    or_msec_t   earliest;

    if (ngx_omniroute_add_route_headers(r, ctx) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    list = ngx_omniroute_excluded_json(r, ctx, &earliest);
    if (list == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (ngx_omniroute_set_retry_after(r, retry) != NGX_OK) {
        json_decref(list);
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    /* counted as cooling_down: the request met nothing but cooldowns */
    ngx_omniroute_count(r, NGX_OMNIROUTE_OUT_COOLING_DOWN);

    doc = json_pack("{s:{s:s,s:s,s:s,s:I,s:I},s:{s:o}}",
                    "error",
                    "message", "every target of this combo is rate limited "
                               "for a moment; retry after retry_after "
                               "seconds",
                    "type", "rate_limit_error",
                    "code", "all_targets_rate_limited",
                    "retry_after", (json_int_t) or_retry_after_seconds(retry),
                    "reset_at", (json_int_t) (ngx_omniroute_now() + retry),
                    "diagnostics", "excluded", list);
    if (doc == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return ngx_omniroute_send_own_json(r, NGX_HTTP_TOO_MANY_REQUESTS, doc);
}


/*
 * An attempt the gateway ended before its response header (R-CONC-2,
 * R-REQ-4): 504 RATE_LIMIT_EXECUTION_TIMEOUT after execution_max_wait_ms,
 * 504 request_budget_exceeded at the end of the request budget, 504
 * first_byte_timeout after the provider's first-byte deadline when no
 * other attempt could follow after all.
 */

ngx_int_t
ngx_omniroute_send_cut(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_attempt_t *a)
{
    if (ngx_omniroute_add_route_headers(r, ctx) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (a->limit == NGX_OMNIROUTE_CUT_FIRST_BYTE) {
        return ngx_omniroute_send_error(r, NGX_HTTP_GATEWAY_TIME_OUT,
                                        "timeout_error",
                                        "first_byte_timeout",
                                        "the provider sent no response "
                                        "header within its first-byte "
                                        "deadline");
    }

    if (a->limit == NGX_OMNIROUTE_CUT_BUDGET) {
        return ngx_omniroute_send_error(r, NGX_HTTP_GATEWAY_TIME_OUT,
                                        "timeout_error",
                                        "request_budget_exceeded",
                                        "the request's time budget is "
                                        "spent");
    }

    return ngx_omniroute_send_error(r, NGX_HTTP_GATEWAY_TIME_OUT,
                                    "timeout_error",
                                    "RATE_LIMIT_EXECUTION_TIMEOUT",
                                    "the provider did not answer within "
                                    "the execution time limit");
}


/* diagnostics.excluded, and the earliest expiry of a timer (-1: none) */

static json_t *
ngx_omniroute_excluded_json(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx,
    or_msec_t *earliest)
{
    u_char                    *target;
    size_t                     len;
    json_t                    *list, *item;
    ngx_uint_t                 i;
    ngx_omniroute_excluded_t  *ex;

    *earliest = -1;
    ex = ctx->excluded.elts;

    list = json_array();
    if (list == NULL) {
        return NULL;
    }

    for (i = 0; i < ctx->excluded.nelts; i++) {

        if (ex[i].retry_after >= 0
            && (*earliest < 0 || ex[i].retry_after < *earliest))
        {
            *earliest = ex[i].retry_after;
        }

        target = ngx_pnalloc(r->pool, ex[i].route->provider->name.len + 1
                                      + ex[i].route->target->model.len);
        if (target == NULL) {
            json_decref(list);
            return NULL;
        }

        len = ngx_sprintf(target, "%V/%V", &ex[i].route->provider->name,
                          &ex[i].route->target->model)
              - target;

        item = json_pack("{s:s%,s:s%,s:s}",
                         "target", target, len,
                         "connection", ex[i].route->conn->id.data,
                         ex[i].route->conn->id.len,
                         "reason", ex[i].reason);
        if (item == NULL) {
            json_decref(list);
            return NULL;
        }

        if (ex[i].retry_after >= 0) {
            json_object_set_new(item, "retry_after_s",
                                json_integer(or_retry_after_seconds(
                                                 ex[i].retry_after)));
        } else {
            json_object_set_new(item, "retry_after_s", json_null());
        }

        json_array_append_new(list, item);
    }

    return list;
}


/*
 * The one writer of Retry-After (issue 25): any Retry-After already in
 * the response (a provider's) is replaced by ms, rounded by
 * or_retry_after_seconds(); OR_MSEC_NONE removes it.
 */

ngx_int_t
ngx_omniroute_set_retry_after(ngx_http_request_t *r, or_msec_t ms)
{
    u_char                     *p;
    ngx_str_t                   name, value;
    ngx_table_elt_t            *h;
    ngx_omniroute_list_iter_t   it;

    ngx_omniroute_list_start(&it, &r->headers_out.headers);

    while ((h = ngx_omniroute_list_next(&it)) != NULL) {

        if (h->hash != 0
            && h->key.len == sizeof("Retry-After") - 1
            && ngx_strncasecmp(h->key.data, (u_char *) "Retry-After",
                               sizeof("Retry-After") - 1) == 0)
        {
            h->hash = 0;
        }
    }

    if (ms == OR_MSEC_NONE) {
        return NGX_OK;
    }

    p = ngx_pnalloc(r->pool, NGX_INT64_LEN);
    if (p == NULL) {
        return NGX_ERROR;
    }

    value.data = p;
    value.len = ngx_sprintf(p, "%L", or_retry_after_seconds(ms)) - p;
    ngx_str_set(&name, "Retry-After");

    return ngx_omniroute_add_header(r, &name, &value);
}


/*
 * An in-band error event in the client's stream format and the end of
 * the client's stream (stream.c's cuts and failures, the gateway's own
 * answers once the stream started); prefix: end an event that went out
 * in part first.
 */

ngx_int_t
ngx_omniroute_send_error_event(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, ngx_uint_t status, const char *code,
    const char *message, size_t len, ngx_int_t retry, ngx_uint_t prefix)
{
    size_t        n;
    u_char       *p;
    ngx_buf_t    *b;
    ngx_chain_t   out;

    b = ngx_create_temp_buf(r->pool, OR_SSE_ERROR_EVENT_MAX + 2);
    if (b == NULL) {
        return NGX_ERROR;
    }

    p = b->pos;

    if (prefix) {
        /* the end of an event that went out in part */
        *p++ = '\n';
        *p++ = '\n';
    }

    n = or_sse_error_event((char *) p, OR_SSE_ERROR_EVENT_MAX,
                           ctx->stream.client_format, (int) status, code,
                           message, len, (int) retry);

    b->last = p + n;
    b->last_buf = 1;
    b->last_in_chain = 1;
    b->flush = 1;

    out.buf = b;
    out.next = NULL;

    return ngx_http_output_filter(r, &out);
}
