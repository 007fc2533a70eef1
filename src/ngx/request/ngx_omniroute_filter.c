
/*
 * Copyright (C) ngx_omniroute authors
 *
 * Header and body filters that see each attempt's response (a subrequest
 * of the client request).  An error response that may fall over is held:
 * its header is not sent and its body is collected (bounded) instead of
 * being written.  A 200 event stream is scanned (ngx_omniroute_stream.c):
 * held until its first content event while another attempt is possible,
 * then passed on event by event.  Any other response is committed: its
 * status and headers become the client's and its body passes untouched.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute_ctx.h"
#include "or_outcome.h"


static ngx_int_t ngx_omniroute_header_filter(ngx_http_request_t *r);
static ngx_int_t ngx_omniroute_body_filter(ngx_http_request_t *r,
    ngx_chain_t *in);
static ngx_int_t ngx_omniroute_error_page_filter(ngx_http_request_t *r,
    ngx_chain_t *in);
static ngx_omniroute_attempt_t *ngx_omniroute_attempt_of(
    ngx_http_request_t *r, ngx_omniroute_ctx_t **pctx);
static void ngx_omniroute_collect(ngx_omniroute_attempt_t *a,
    ngx_chain_t *in);


static ngx_http_output_header_filter_pt  ngx_http_next_header_filter;
static ngx_http_output_body_filter_pt    ngx_http_next_body_filter;


ngx_int_t
ngx_omniroute_filter_init(ngx_conf_t *cf)
{
    ngx_http_next_header_filter = ngx_http_top_header_filter;
    ngx_http_top_header_filter = ngx_omniroute_header_filter;

    ngx_http_next_body_filter = ngx_http_top_body_filter;
    ngx_http_top_body_filter = ngx_omniroute_body_filter;

    ngx_omniroute_stream_filters(ngx_http_next_header_filter,
                                 ngx_http_next_body_filter);

    return NGX_OK;
}

/* the running attempt whose subrequest is r, or NULL */

static ngx_omniroute_attempt_t *
ngx_omniroute_attempt_of(ngx_http_request_t *r, ngx_omniroute_ctx_t **pctx)
{
    ngx_omniroute_ctx_t  *ctx;

    if (r == r->main) {
        return NULL;
    }

    ctx = ngx_http_get_module_ctx(r->main, ngx_http_omniroute_module);

    if (ctx == NULL || ctx->current == NULL || ctx->current->sr != r) {
        return NULL;
    }

    if (pctx) {
        *pctx = ctx;
    }

    return ctx->current;
}


static ngx_int_t
ngx_omniroute_header_filter(ngx_http_request_t *r)
{
    ngx_str_t                 *ct;
    or_hold_e                  hold;
    ngx_uint_t                 stream, probe;
    ngx_omniroute_ctx_t       *ctx;
    ngx_omniroute_attempt_t   *a;

    if (r == r->main) {
        if (ngx_omniroute_budget_headers(r) != NGX_OK) {
            return NGX_ERROR;
        }

        if (r->err_status >= NGX_HTTP_BAD_REQUEST
            && ngx_omniroute_json_errors(r)
            && ngx_omniroute_json_error_page(r) != NGX_OK)
        {
            return NGX_ERROR;
        }

        return ngx_http_next_header_filter(r);
    }

    a = ngx_omniroute_attempt_of(r, &ctx);

    if (a == NULL || a->header_seen) {
        return ngx_http_next_header_filter(r);
    }

    a->header_seen = 1;
    a->status = r->headers_out.status;

    ngx_omniroute_stats_header(r, a);

    ct = &r->headers_out.content_type;
    stream = or_hold_is_event_stream((const char *) ct->data, ct->len)
             && a->status < 300;

    /* may another attempt follow?  asked only when it decides */
    probe = ctx->lcf->stream_probe && stream
            && ngx_omniroute_may_continue(ctx);

    hold = or_hold_decide((int) a->status, stream, ctx->lcf->stream_probe,
                          probe);

    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "omniroute filter: \"%V\" answered %ui: %s",
                   &a->cand->conn->id, a->status,
                   hold == OR_HOLD_ERROR ? "held"
                   : hold == OR_HOLD_PROBE ? "probed" : "committed");

    switch (hold) {

    case OR_HOLD_ERROR:
        /* every error is held: its body decides (restatement, fallback) */

        a->state = NGX_OMNIROUTE_ATTEMPT_HELD;
        ngx_omniroute_held(ctx, a);

        a->body = ngx_create_temp_buf(r->pool, ctx->lcf->error_body_max);
        if (a->body == NULL) {
            return NGX_ERROR;
        }

        r->filter_need_in_memory = 1;

        /* nothing of the held response reaches the client request */
        r->header_sent = 1;

        return NGX_OK;

    case OR_HOLD_PROBE:
        /*
         * A 200 stream that may still fall over is held until its first
         * content event (R-REQ-5): an error event, an end without
         * content or a transport failure before it falls over.
         */

        a->state = NGX_OMNIROUTE_ATTEMPT_PROBING;

        return ngx_omniroute_stream_header(r, ctx, a);

    default:
        if (stream && ngx_omniroute_stream_header(r, ctx, a) != NGX_OK) {
            return NGX_ERROR;
        }

        return ngx_omniroute_commit(r, ctx, a);
    }
}


static ngx_int_t
ngx_omniroute_body_filter(ngx_http_request_t *r, ngx_chain_t *in)
{
    ngx_chain_t              *cl;
    ngx_omniroute_ctx_t      *ctx;
    ngx_omniroute_attempt_t  *a;

    if (r == r->main) {
        return ngx_omniroute_error_page_filter(r, in);
    }

    a = ngx_omniroute_attempt_of(r, &ctx);

    if (a == NULL) {
        return ngx_http_next_body_filter(r, in);
    }

    switch (a->state) {

    case NGX_OMNIROUTE_ATTEMPT_HELD:
        ngx_omniroute_collect(a, in);
        return NGX_OK;

    case NGX_OMNIROUTE_ATTEMPT_PROBING:
        return ngx_omniroute_stream_body(r, ctx, a, in);

    case NGX_OMNIROUTE_ATTEMPT_COMMITTED:
        if (a->stream) {
            return ngx_omniroute_stream_body(r, ctx, a, in);
        }

        /* what passed, to tell a cut response (Content-Length) */

        for (cl = in; cl; cl = cl->next) {
            if (!ngx_buf_special(cl->buf)) {
                a->sent += ngx_buf_size(cl->buf);
            }
        }

        ngx_omniroute_stats_body(r, in);

        return ngx_http_next_body_filter(r, in);

    default:
        return ngx_http_next_body_filter(r, in);
    }
}


/* copy the chain into a->body (bounded) and consume it */

static void
ngx_omniroute_collect(ngx_omniroute_attempt_t *a, ngx_chain_t *in)
{
    size_t        n;
    ngx_buf_t    *b, *body;
    ngx_chain_t  *cl;

    body = a->body;

    for (cl = in; cl; cl = cl->next) {
        b = cl->buf;

        if (ngx_buf_in_memory(b)) {
            n = ngx_min((size_t) (b->last - b->pos),
                        (size_t) (body->end - body->last));

            body->last = ngx_cpymem(body->last, b->pos, n);

            if (n < (size_t) (b->last - b->pos)) {
                a->truncated = 1;
            }

            b->pos = b->last;
        }

        if (b->in_file) {
            b->file_pos = b->file_last;
        }
    }
}


/* nginx's HTML error page is swallowed and the JSON error sent instead */

static ngx_int_t
ngx_omniroute_error_page_filter(ngx_http_request_t *r, ngx_chain_t *in)
{
    ngx_uint_t            last;
    ngx_chain_t          *cl, out;
    ngx_omniroute_ctx_t  *ctx;

    ctx = ngx_http_get_module_ctx(r, ngx_http_omniroute_module);

    if (ctx == NULL || ctx->error_page == NULL) {
        return ngx_http_next_body_filter(r, in);
    }

    last = 0;

    for (cl = in; cl; cl = cl->next) {
        cl->buf->pos = cl->buf->last;
        cl->buf->file_pos = cl->buf->file_last;

        if (cl->buf->last_buf) {
            last = 1;
        }
    }

    if (!last) {
        return NGX_OK;
    }

    out.buf = ctx->error_page;
    out.next = NULL;

    ctx->error_page = NULL;

    return ngx_http_next_body_filter(r, &out);
}
