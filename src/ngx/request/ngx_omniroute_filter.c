
/*
 * Copyright (C) ngx_omniroute authors
 *
 * Header and body filters that see each attempt's response (a subrequest
 * of the client request).  An error response that may fall over is held:
 * its header is not sent and its body is collected (bounded) instead of
 * being written.  Any other response is committed: its status and headers
 * become the client's and its body streams through untouched.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute_request.h"
#include "or_sse.h"
#include "or_outcome.h"


static ngx_int_t ngx_omniroute_header_filter(ngx_http_request_t *r);
static ngx_int_t ngx_omniroute_body_filter(ngx_http_request_t *r,
    ngx_chain_t *in);
static ngx_int_t ngx_omniroute_commit(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx);
static ngx_int_t ngx_omniroute_error_page_filter(ngx_http_request_t *r,
    ngx_chain_t *in);
static ngx_omniroute_attempt_t *ngx_omniroute_attempt_of(
    ngx_http_request_t *r, ngx_omniroute_ctx_t **pctx);
static ngx_uint_t ngx_omniroute_collect(ngx_omniroute_attempt_t *a,
    ngx_chain_t *in);
static ngx_int_t ngx_omniroute_probe(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, ngx_omniroute_attempt_t *a, ngx_chain_t *in);


static ngx_http_output_header_filter_pt  ngx_http_next_header_filter;
static ngx_http_output_body_filter_pt    ngx_http_next_body_filter;


ngx_int_t
ngx_omniroute_filter_init(ngx_conf_t *cf)
{
    ngx_http_next_header_filter = ngx_http_top_header_filter;
    ngx_http_top_header_filter = ngx_omniroute_header_filter;

    ngx_http_next_body_filter = ngx_http_top_body_filter;
    ngx_http_top_body_filter = ngx_omniroute_body_filter;

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
    stream = or_hold_is_event_stream((const char *) ct->data, ct->len);

    /* may another attempt follow?  asked only when it decides */
    probe = ctx->lcf->stream_probe && stream && a->status < 400
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
        ctx->last_held = a;

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
         * meaningful event (R-REQ-5): an error event there falls over.
         */

        a->state = NGX_OMNIROUTE_ATTEMPT_PROBING;

        a->body = ngx_create_temp_buf(r->pool, ctx->lcf->error_body_max);
        if (a->body == NULL) {
            return NGX_ERROR;
        }

        r->filter_need_in_memory = 1;

        return NGX_OK;

    default:
        return ngx_omniroute_commit(r, ctx);
    }
}


static ngx_int_t
ngx_omniroute_commit(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx)
{
    ngx_int_t                 rc;
    ngx_http_request_t       *mr;
    ngx_omniroute_attempt_t  *a;

    mr = r->main;
    a = ctx->current;

    a->state = NGX_OMNIROUTE_ATTEMPT_COMMITTED;

    ngx_omniroute_record_success(mr, a);
    ngx_omniroute_stats_commit(mr, r, a);
    ngx_omniroute_affinity_record(mr, ctx, a);
    ngx_omniroute_count(mr, NGX_OMNIROUTE_OUT_SUCCESS);

    if (ngx_omniroute_copy_response_headers(mr, r) != NGX_OK
        || ngx_omniroute_add_route_headers(mr, ctx) != NGX_OK)
    {
        return NGX_ERROR;
    }

    rc = ngx_http_send_header(mr);

    if (rc == NGX_ERROR || rc > NGX_OK) {
        return NGX_ERROR;
    }

    return ngx_http_next_header_filter(r);
}


static ngx_int_t
ngx_omniroute_body_filter(ngx_http_request_t *r, ngx_chain_t *in)
{
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
        (void) ngx_omniroute_collect(a, in);
        return NGX_OK;

    case NGX_OMNIROUTE_ATTEMPT_PROBING:
        return ngx_omniroute_probe(r, ctx, a, in);

    default:
        ngx_omniroute_stats_body(r, in);
        return ngx_http_next_body_filter(r, in);
    }
}


/* copy the chain into a->body (bounded) and consume it; 1: last seen */

static ngx_uint_t
ngx_omniroute_collect(ngx_omniroute_attempt_t *a, ngx_chain_t *in)
{
    size_t        n;
    ngx_buf_t    *b, *body;
    ngx_uint_t    last;
    ngx_chain_t  *cl;

    body = a->body;
    last = 0;

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

        if (b->last_buf || b->last_in_chain) {
            last = 1;
        }
    }

    return last;
}


/*
 * A 200 stream before its first meaningful event: an error event turns
 * the attempt into a held failure; anything else commits it, the bytes
 * read so far first.
 */

static ngx_int_t
ngx_omniroute_probe(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_attempt_t *a, ngx_chain_t *in)
{
    off_t            size;
    ngx_buf_t       *b;
    ngx_uint_t       last;
    ngx_chain_t      out, *cl;
    or_sse_error_t   err;
    or_sse_first_e   first;

    size = 0;

    for (cl = in; cl; cl = cl->next) {
        size += ngx_buf_size(cl->buf);
    }

    if (size > a->body->end - a->body->last) {
        /* no event within the bound: commit, held bytes first */
        first = OR_SSE_CONTENT;
        last = 0;
        goto commit;
    }

    last = ngx_omniroute_collect(a, in);
    in = NULL;

    first = or_sse_first_event((const char *) a->body->pos,
                               a->body->last - a->body->pos, &err);

    if (first == OR_SSE_ERROR) {
        a->state = NGX_OMNIROUTE_ATTEMPT_HELD;
        a->status = err.status;
        a->event.data = (u_char *) err.data;
        a->event.len = err.data_len;
        ctx->last_held = a;
        r->header_sent = 1;

        ngx_log_debug1(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                       "omniroute: error event in a 200 stream (%d)",
                       err.status);
        return NGX_OK;
    }

    if (first == OR_SSE_MORE && !last) {
        return NGX_OK;
    }

    ngx_omniroute_stats_first_content(r, a);

commit:

    if (ngx_omniroute_commit(r, ctx) != NGX_OK) {
        return NGX_ERROR;
    }

    if (a->body->last == a->body->pos) {
        return (in == NULL) ? NGX_OK : ngx_http_next_body_filter(r, in);
    }

    b = ngx_calloc_buf(r->pool);
    if (b == NULL) {
        return NGX_ERROR;
    }

    b->pos = a->body->pos;
    b->last = a->body->last;
    b->memory = 1;
    b->flush = 1;

    out.buf = b;
    out.next = in;

    return ngx_http_next_body_filter(r, &out);
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
