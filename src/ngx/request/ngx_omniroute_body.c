
/*
 * Copyright (C) ngx_omniroute authors
 *
 * The client's body: scanned once (valid JSON, an object, where its
 * top-level "model" and the values the edits need are; never parsed into
 * a tree), the edits of every attempt's body (the model value, a removed
 * "background", a Chat stream's usage asked for), and each attempt's
 * chain of buffers: the client's bytes with those edits, none copied.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute_ctx.h"
#include "or_json.h"
#include "or_name.h"
#include "or_splice.h"
#include "or_sse.h"
#include "or_sse_format.h"


static ngx_int_t ngx_omniroute_body_edits(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx);
static ngx_int_t ngx_omniroute_body_variant(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx);
static ngx_int_t ngx_omniroute_body_model(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx);


/*
 * One pass over the client's body: valid JSON, an object, and where its
 * top-level "model" value is; nothing else is read or kept.
 */

ngx_int_t
ngx_omniroute_scan_body(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx)
{
    u_char          *p;
    long             n;
    size_t           start, end;
    or_json_rc_e     rc;
    or_json_value_t *m;

    if (ctx->body.len == 0) {
        return ngx_omniroute_reject(ctx, NGX_HTTP_BAD_REQUEST, "invalid_json",
                                    "the request body is empty; expected a "
                                    "JSON object");
    }

    rc = or_json_scan((const char *) ctx->body.data, ctx->body.len,
                      &ctx->scan);

    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "omniroute body: %uz bytes, scan %s at %uz",
                   ctx->body.len, or_json_rc_name(rc), ctx->scan.error_at);

    switch (rc) {

    case OR_JSON_OK:
        break;

    case OR_JSON_EMPTY:
        return ngx_omniroute_reject(ctx, NGX_HTTP_BAD_REQUEST, "invalid_json",
                                    "the request body is empty; expected a "
                                    "JSON object");

    case OR_JSON_NOT_OBJECT:
        return ngx_omniroute_reject(ctx, NGX_HTTP_BAD_REQUEST, "invalid_json",
                                    "the request body must be a JSON "
                                    "object");

    case OR_JSON_CASE_VARIANT:
        return ngx_omniroute_body_variant(r, ctx);

    default:
        p = ngx_pnalloc(r->pool, 200);
        if (p == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        if (rc == OR_JSON_DUP_MODEL) {
            ngx_snprintf(p, 200, "the request body has more than one "
                         "\"model\" (at byte %uz)%Z", ctx->scan.error_at);

        } else {
            ngx_snprintf(p, 200, "the request body is not valid JSON: %s "
                         "(at byte %uz)%Z", ctx->scan.error
                                             ? ctx->scan.error : "error",
                         ctx->scan.error_at);
        }

        return ngx_omniroute_reject(ctx, NGX_HTTP_BAD_REQUEST, "invalid_json",
                                    (char *) p);
    }

    m = &ctx->scan.model;

    if (m->type == OR_JSON_ABSENT
        && or_api_path_model((const char *) r->uri.data, r->uri.len,
                             &start, &end)
        && end > start)
    {
        /*
         * A Gemini native path names the model (".../models/{model}:
         * generateContent"), its body does not: routed by the path's
         * (issue 25); each attempt's URL carries its target's.
         */

        ctx->model.data = r->uri.data + start;
        ctx->model.len = end - start;
        return ngx_omniroute_body_model(r, ctx);
    }

    if (m->type == OR_JSON_ABSENT) {
        return ngx_omniroute_reject(ctx, NGX_HTTP_BAD_REQUEST,
                                    "missing_model",
                                    "the request body has no \"model\"");
    }

    if (m->type != OR_JSON_STRING || m->end - m->start <= 2) {
        return ngx_omniroute_reject(ctx, NGX_HTTP_BAD_REQUEST,
                                    "invalid_model",
                                    "\"model\" must be a non-empty string");
    }

    /* the model's text: in the body itself unless it has escapes */

    if (!m->escaped) {
        ctx->model.data = ctx->body.data + m->start + 1;
        ctx->model.len = m->end - m->start - 2;
        return ngx_omniroute_body_model(r, ctx);
    }

    ctx->model.data = ngx_pnalloc(r->pool, m->end - m->start);
    if (ctx->model.data == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    n = or_json_string_decode((const char *) ctx->body.data + m->start,
                              m->end - m->start, (char *) ctx->model.data);
    if (n <= 0) {
        return ngx_omniroute_reject(ctx, NGX_HTTP_BAD_REQUEST,
                                    "invalid_model",
                                    "\"model\" must be a non-empty string");
    }

    ctx->model.len = (size_t) n;

    return ngx_omniroute_body_model(r, ctx);
}


/*
 * The model is a name (R-NAME-1): it reaches variables, upstream
 * headers, log lines, zone and Redis keys and metric labels; checked
 * here, decoded, once.
 */

static ngx_int_t
ngx_omniroute_body_model(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx)
{
    u_char        *p;
    size_t         at;
    or_name_rc_e   rc;

    rc = or_name_check((const char *) ctx->model.data, ctx->model.len,
                       OR_NAME_MODEL_MAX, &at);

    if (rc == OR_NAME_OK) {
        return ngx_omniroute_body_edits(r, ctx);
    }

    p = ngx_pnalloc(r->pool, 160);
    if (p == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (rc == OR_NAME_TOO_LONG) {
        ngx_snprintf(p, 160, "\"model\" is longer than %d bytes%Z",
                     OR_NAME_MODEL_MAX);

    } else {
        ngx_snprintf(p, 160, "\"model\" has %s at byte %uz (decoded); a "
                     "model name is printable ASCII without spaces%Z",
                     or_name_problem(rc), at);
    }

    ngx_str_null(&ctx->model);

    return ngx_omniroute_reject(ctx, NGX_HTTP_BAD_REQUEST, "invalid_model",
                                (char *) p);
}


/*
 * A top-level member spelled as one the gateway reads but for case
 * ("Model", "STREAM"): a provider decoding keys case-insensitively would
 * read it instead of what was checked (R-NAME-2).  The answer names it,
 * escaped.
 */

static ngx_int_t
ngx_omniroute_body_variant(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx)
{
    u_char      *p, *last;
    long         n;
    size_t       len;
    const char  *k, *end;

    k = (const char *) ctx->body.data + ctx->scan.error_at;
    end = or_json_string_end(k, (const char *) ctx->body.data
                                + ctx->body.len);

    /* the key decoded (its span is valid JSON), at most 64 bytes of it */

    len = (end != NULL) ? (size_t) (end - k) : 2;

    p = ngx_pnalloc(r->pool, len + 4 * 64 + 256);
    if (p == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    n = or_json_string_decode(k, len, (char *) p + 4 * 64 + 256);
    len = (n > 0) ? ngx_min((size_t) n, 64) : 0;
    k = (const char *) p + 4 * 64 + 256;

    last = ngx_cpymem(p, "the request body has a member \"", 31);
    last += or_name_escape((char *) last, 4 * 64, k, len);
    last = ngx_sprintf(last, "\" (at byte %uz) that differs only by case "
                       "from one the gateway reads; send each of "
                       "\"model\", \"stream\", \"stream_options\", "
                       "\"background\", \"tools\" spelled so%Z",
                       ctx->scan.error_at);

    return ngx_omniroute_reject(ctx, NGX_HTTP_BAD_REQUEST, "invalid_member",
                                (char *) p);
}


/*
 * What every attempt's body changes besides the model: the "background":
 * true of a Responses API request is removed (the request is answered
 * synchronously, with a warning); and whether a Chat Completions stream
 * asked for its usage (the attempt decides whether to ask).
 */

static ngx_int_t
ngx_omniroute_body_edits(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx)
{
    const char                 *body;
    or_json_value_t            *bg;
    ngx_omniroute_edits_req_t  *ed;

    ed = &ctx->edits;
    body = (const char *) ctx->body.data;

    or_splice_init(&ed->splice);

    if (or_splice_usage_path((const char *) r->uri.data, r->uri.len)) {
        ed->usage = or_splice_stream_usage(NULL, body, ctx->body.len,
                                           &ctx->scan);
    }

    bg = &ctx->scan.background;

    if (bg->type == OR_JSON_ABSENT
        || or_sse_format_of_path((const char *) r->uri.data, r->uri.len)
           != OR_SSE_FMT_RESPONSES)
    {
        return NGX_OK;
    }

    if (bg->dup) {
        /* which one a provider would take is its own choice */
        return ngx_omniroute_reject(ctx, NGX_HTTP_BAD_REQUEST,
                                    "invalid_background",
                                    "the request body has more than one "
                                    "\"background\"");
    }

    if (bg->type != OR_JSON_TRUE) {
        return NGX_OK;
    }

    if (or_splice_remove(&ed->splice, body, ctx->body.len, bg) != 0) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ctx->background = 1;

    ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                  "omniroute: \"background\": true removed from a "
                  "Responses API request, answered synchronously");

    return NGX_OK;
}


/*
 * The attempt's body: the client's bytes with the edits of or_splice --
 * the model value replaced by the target's upstream model (JSON-quoted)
 * when they differ, the request's own edits (a removed "background"), a
 * Chat stream's usage asked for when the provider's stream.include_usage
 * is on; no byte is copied, the buffers point into the client's body and
 * at the inserted text.
 */

ngx_int_t
ngx_omniroute_attempt_body(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx,
    ngx_http_request_t *sr, ngx_omniroute_attempt_t *a)
{
    u_char                     *base;
    size_t                      len, pos;
    ngx_uint_t                  i, n;
    ngx_str_t                   part[2 * OR_SPLICE_MAX + 1];
    ngx_buf_t                  *b;
    or_splice_t                 sp;
    ngx_chain_t                *cl, **ll;
    or_json_value_t            *m;
    or_splice_edit_t           *e;
    ngx_omniroute_target_t     *t;
    ngx_http_request_body_t    *rb;
    ngx_omniroute_edits_req_t  *ed;

    if (ctx->body.data == NULL) {
        /* a GET passed through (models.c): no body */
        sr->request_body = NULL;
        sr->headers_in.content_length_n = -1;
        return NGX_OK;
    }

    ed = &ctx->edits;
    base = ctx->body.data;
    m = &ctx->scan.model;
    t = a->cand->target;
    sp = ed->splice;

    if (m->type != OR_JSON_ABSENT
        && (t->model.len != ctx->model.len
            || ngx_strncmp(t->model.data, ctx->model.data, t->model.len)
               != 0))
    {
        /* a body without "model" (Gemini native) keeps none */

        if (ed->sent_model.data == NULL
            || ed->sent_model.len != t->model.len
            || ngx_strncmp(ed->sent_model.data, t->model.data,
                           t->model.len)
               != 0)
        {
            /* the upstream model as a JSON string, once per target */

            len = or_json_quoted_len((const char *) t->model.data,
                                     t->model.len);

            ed->quoted_model.data = ngx_pnalloc(r->pool, len);
            if (ed->quoted_model.data == NULL) {
                return NGX_ERROR;
            }

            ed->quoted_model.len =
                (u_char *) or_json_quote((char *) ed->quoted_model.data,
                                         (const char *) t->model.data,
                                         t->model.len)
                - ed->quoted_model.data;

            ed->sent_model = t->model;
        }

        if (or_splice_add(&sp, m->start, m->end,
                          (const char *) ed->quoted_model.data,
                          ed->quoted_model.len)
            != 0)
        {
            return NGX_ERROR;
        }
    }

    if (ed->usage == OR_SPLICE_USAGE_ADDED
        && a->cand->settings->stream.include_usage > 0)
    {
        /* stream.include_usage: the usage chunk is for the metrics */

        a->usage_asked = (or_splice_stream_usage(&sp, (const char *) base,
                                                 ctx->body.len, &ctx->scan)
                          == OR_SPLICE_USAGE_ADDED);
    }

    /* the parts: the body between the edits, and each edit's text */

    n = 0;
    pos = 0;

    for (i = 0; i < sp.n; i++) {
        e = &sp.edit[i];

        part[n].data = base + pos;
        part[n++].len = e->start - pos;

        part[n].data = (u_char *) e->data;
        part[n++].len = e->len;

        pos = e->end;
    }

    part[n].data = base + pos;
    part[n++].len = ctx->body.len - pos;

    rb = ngx_pcalloc(r->pool, sizeof(ngx_http_request_body_t));
    if (rb == NULL) {
        return NGX_ERROR;
    }

    ll = &rb->bufs;
    len = 0;
    b = NULL;

    for (i = 0; i < n; i++) {
        if (part[i].len == 0) {
            continue;
        }

        b = ngx_calloc_buf(r->pool);
        cl = ngx_alloc_chain_link(r->pool);
        if (b == NULL || cl == NULL) {
            return NGX_ERROR;
        }

        b->memory = 1;
        b->start = part[i].data;
        b->pos = part[i].data;
        b->last = part[i].data + part[i].len;
        b->end = b->last;

        cl->buf = b;
        *ll = cl;
        ll = &cl->next;

        len += part[i].len;
    }

    *ll = NULL;

    if (b == NULL) {
        return NGX_ERROR;
    }

    b->last_buf = 1;
    rb->rest = 0;

    sr->request_body = rb;
    sr->headers_in.content_length_n = len;

    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "omniroute: attempt body %uz bytes in %ui parts%s", len,
                   n, a->usage_asked ? ", stream usage asked" : "");

    return NGX_OK;
}
