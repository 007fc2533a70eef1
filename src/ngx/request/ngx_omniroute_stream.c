
/*
 * Copyright (C) ngx_omniroute authors
 *
 * Streamed responses (R-REQ-5, R-STREAM-1..4; see docs/streams.md).  An
 * attempt's 200 event stream is scanned event by event (or_sse): while
 * another attempt is possible it is held until its first content event
 * (the commit point), so that an error event, an end without content or
 * a transport failure before it still falls over; a client held longer
 * than omniroute_stream_keepalive gets the 200 header and SSE comments in
 * the meantime.  After the commit the events pass through as they
 * complete (an incomplete event is held back, so a cut never leaves half
 * an event), and a stream that ends before its terminal event ends the
 * client's stream with an in-band error event in the client's format.
 * The watch (or_stream: first-content deadline, stall budget, throughput
 * watchdog) runs on one timer of the client request and stops an attempt
 * by timing out its upstream read, as proxy_read_timeout would.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute_ctx.h"
#include "or_sse.h"
#include "or_stream.h"
#include "or_classify.h"


#define NGX_OMNIROUTE_KEEPALIVE     ": keep-alive\n\n"
#define NGX_OMNIROUTE_OUT_MIN       4096
#define NGX_OMNIROUTE_HOLD_MIN      4096    /* the hold's first size */


static void ngx_omniroute_stream_cleanup(void *data);
static void ngx_omniroute_stream_tick(ngx_event_t *ev);
static void ngx_omniroute_stream_arm(ngx_omniroute_ctx_t *ctx);
static ngx_int_t ngx_omniroute_stream_abort(ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_attempt_t *a, or_watch_e verdict);
static void ngx_omniroute_stream_stop(ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_attempt_t *a);
static ngx_int_t ngx_omniroute_stream_cut(ngx_omniroute_attempt_t *a);
static ngx_int_t ngx_omniroute_stream_keepalive(ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_attempt_t *a);
static ngx_uint_t ngx_omniroute_stream_silent(ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_attempt_t *a);
static ngx_int_t ngx_omniroute_stream_comment(ngx_omniroute_ctx_t *ctx,
    ngx_http_request_t *w);
static ngx_int_t ngx_omniroute_stream_early_header(ngx_omniroute_ctx_t *ctx);
static ngx_int_t ngx_omniroute_stream_bytes(ngx_http_request_t *sr,
    ngx_omniroute_ctx_t *ctx, ngx_omniroute_attempt_t *a, u_char *p,
    u_char *last, ngx_chain_t ***ll, u_char **stop);
static ngx_int_t ngx_omniroute_stream_pass(ngx_http_request_t *sr,
    ngx_omniroute_ctx_t *ctx, ngx_omniroute_attempt_t *a, ngx_buf_t *b,
    ngx_chain_t ***ll);
static ngx_int_t ngx_omniroute_stream_event(ngx_http_request_t *sr,
    ngx_omniroute_ctx_t *ctx, ngx_omniroute_attempt_t *a, or_sse_event_t *ev,
    u_char *raw);
static u_char *ngx_omniroute_stream_held(ngx_omniroute_attempt_t *a,
    or_sse_event_t *ev);
static ngx_int_t ngx_omniroute_stream_room(ngx_http_request_t *sr,
    ngx_omniroute_ctx_t *ctx, ngx_omniroute_attempt_t *a, size_t n,
    size_t *room);
static void ngx_omniroute_stream_usage(ngx_http_request_t *sr,
    ngx_omniroute_ctx_t *ctx, ngx_omniroute_attempt_t *a, or_sse_event_t *ev,
    u_char *raw);
static ngx_int_t ngx_omniroute_stream_emit(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, u_char *data, size_t len, ngx_chain_t ***ll);
static ngx_int_t ngx_omniroute_stream_flush(ngx_http_request_t *sr,
    ngx_omniroute_ctx_t *ctx, ngx_omniroute_attempt_t *a, ngx_uint_t all,
    ngx_chain_t ***ll);
static ngx_int_t ngx_omniroute_stream_send(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, ngx_chain_t *out);
static void ngx_omniroute_upstream_watch(ngx_http_request_t *sr,
    ngx_omniroute_attempt_t *a);
static void ngx_omniroute_upstream_finalize(ngx_http_request_t *r,
    ngx_int_t rc);


static ngx_http_output_header_filter_pt  ngx_omniroute_next_header;
static ngx_http_output_body_filter_pt    ngx_omniroute_next_body;


void
ngx_omniroute_stream_filters(ngx_http_output_header_filter_pt header,
    ngx_http_output_body_filter_pt body)
{
    ngx_omniroute_next_header = header;
    ngx_omniroute_next_body = body;
}


/* at the start of the client request: its format, the timer */

ngx_int_t
ngx_omniroute_stream_init(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx)
{
    ngx_pool_cleanup_t          *cln;
    ngx_omniroute_stream_req_t  *st;

    st = &ctx->stream;

    st->start = ngx_omniroute_now();
    st->client_format = or_sse_format_of_path((const char *) r->uri.data,
                                              r->uri.len);
    st->client_stream = (ctx->scan.stream.type == OR_JSON_TRUE);

    st->timer.handler = ngx_omniroute_stream_tick;
    st->timer.data = r;
    st->timer.log = r->connection->log;

    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (cln == NULL) {
        return NGX_ERROR;
    }

    cln->handler = ngx_omniroute_stream_cleanup;
    cln->data = st;

    return NGX_OK;
}


static void
ngx_omniroute_stream_cleanup(void *data)
{
    ngx_omniroute_stream_req_t *st = data;

    if (st->timer.timer_set) {
        ngx_del_timer(&st->timer);
    }
}


/* a new attempt: the watch settings in force for its provider */

void
ngx_omniroute_stream_attempt(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_attempt_t *a)
{
    ngx_omniroute_main_conf_t        *omcf;
    ngx_omniroute_global_settings_t   g;

    if (!ctx->stream.globals) {
        omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);
        ngx_omniroute_settings_global(omcf, &g);

        ctx->stream.watchdog = (g.stream_throughput_watchdog > 0);
        ctx->stream.globals = 1;
    }

    ctx->stream.conf = a->cand->settings->stream;

    if (ctx->stream.watchdog) {
        ctx->stream.conf.watchdog = 1;
    }

    or_watch_start(&ctx->stream.watch, &ctx->stream.conf, a->start);

    a->upstream_rc = NGX_OK;

    ngx_omniroute_stream_arm(ctx);
}


/*
 * The response header of an attempt that is an event stream (held or
 * committed): the scanner, the upstream's final rc, the watch.
 */

ngx_int_t
ngx_omniroute_stream_header(ngx_http_request_t *sr, ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_attempt_t *a)
{
    a->stream = 1;

    if (ctx->stream.sse == NULL) {
        ctx->stream.sse = ngx_palloc(ctx->request->pool, sizeof(or_sse_t));
        if (ctx->stream.sse == NULL) {
            return NGX_ERROR;
        }
    }

    or_sse_init(ctx->stream.sse);

    if (a->body == NULL) {
        /* grown up to the bound as it needs (ngx_omniroute_stream_room) */
        a->body = ngx_create_temp_buf(sr->pool,
                                      ngx_min(ctx->lcf->error_body_max,
                                              NGX_OMNIROUTE_HOLD_MIN));
        if (a->body == NULL) {
            return NGX_ERROR;
        }
    }

    a->boundary = 0;

    /* every data buffer is scanned */
    sr->filter_need_in_memory = 1;

    or_watch_header(&ctx->stream.watch, ngx_omniroute_now());

    ngx_omniroute_upstream_watch(sr, a);

    ngx_omniroute_stream_arm(ctx);

    return NGX_OK;
}


/* the upstream module's final rc of the attempt will be known */

static void
ngx_omniroute_upstream_watch(ngx_http_request_t *sr,
    ngx_omniroute_attempt_t *a)
{
    if (sr->upstream && sr->upstream->finalize_request
        && sr->upstream->finalize_request != ngx_omniroute_upstream_finalize)
    {
        a->upstream_finalize = sr->upstream->finalize_request;
        sr->upstream->finalize_request = ngx_omniroute_upstream_finalize;
    }
}


/* the upstream module's own end of the attempt: how it ended */

static void
ngx_omniroute_upstream_finalize(ngx_http_request_t *r, ngx_int_t rc)
{
    ngx_uint_t                i;
    ngx_omniroute_ctx_t      *ctx;
    ngx_omniroute_attempt_t  *a;

    ctx = ngx_http_get_module_ctx(r->main, ngx_http_omniroute_module);

    if (ctx == NULL) {
        return;
    }

    a = ctx->attempts.elts;

    for (i = ctx->attempts.nelts; i > 0; i--) {
        if (a[i - 1].sr == r) {
            a[i - 1].upstream_rc = rc;
            a[i - 1].rc_seen = 1;

            ngx_log_debug1(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                           "omniroute stream: upstream finalized: %i", rc);

            if (a[i - 1].upstream_finalize) {
                a[i - 1].upstream_finalize(r, rc);
            }

            return;
        }
    }
}


/*
 * The commit point: the attempt's response becomes the client's (unless
 * the client's 200 header went out already, with keep-alives).  A
 * stream's success is recorded when it ends well (the end of the
 * attempt); any other response's now.
 */

ngx_int_t
ngx_omniroute_commit(ngx_http_request_t *sr, ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_attempt_t *a)
{
    ngx_int_t            rc;
    ngx_http_request_t  *mr;

    mr = sr->main;

    a->state = NGX_OMNIROUTE_ATTEMPT_COMMITTED;

    /* how it ends tells a cut response (R-STREAM-4) */
    ngx_omniroute_upstream_watch(sr, a);

    if (!a->stream) {
        ngx_omniroute_record_success(mr, a);
        ngx_omniroute_count(mr, NGX_OMNIROUTE_OUT_SUCCESS);
    }

    ngx_omniroute_stats_commit(mr, sr, a);
    ngx_omniroute_affinity_record(mr, ctx, a);

    if (ctx->stream.watch.content_at == 0) {
        ctx->stream.watch.content_at = ngx_omniroute_now();
    }

    if (!ctx->early) {
        if (ngx_omniroute_copy_response_headers(mr, sr) != NGX_OK
            || ngx_omniroute_add_route_headers(mr, ctx) != NGX_OK)
        {
            return NGX_ERROR;
        }

        rc = ngx_http_send_header(mr);

        if (rc == NGX_ERROR || rc > NGX_OK) {
            return NGX_ERROR;
        }

    } else {
        ngx_log_debug1(NGX_LOG_DEBUG_HTTP, sr->connection->log, 0,
                       "omniroute stream: \"%V\" continues the client's "
                       "stream", &a->cand->conn->id);
    }

    ngx_omniroute_stream_arm(ctx);

    return ngx_omniroute_next_header(sr);
}


/*
 * The body of an event-stream attempt, held or committed.  NGX_ERROR
 * after an error event before the commit point ends the upstream at once
 * (the attempt is held: the post-subrequest handler turns it into a
 * fallover).
 */

ngx_int_t
ngx_omniroute_stream_body(ngx_http_request_t *sr, ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_attempt_t *a, ngx_chain_t *in)
{
    ngx_int_t        rc;
    ngx_buf_t       *b;
    u_char          *stop;
    ngx_uint_t       last, failed, clean;
    ngx_chain_t     *out, **ll, *special, **sll, *cl, *sl;
    or_sse_event_t   ev;

    out = NULL;
    ll = &out;
    special = NULL;
    sll = &special;
    last = 0;
    failed = 0;
    stop = NULL;

    for (cl = in; cl; cl = cl->next) {
        b = cl->buf;

        if (a->state == NGX_OMNIROUTE_ATTEMPT_COMMITTED
            && ngx_buf_in_memory_only(b) && b->last > b->pos
            && a->body->last == a->body->pos
            && or_sse_pending(ctx->stream.sse) == 0)
        {
            /* at an event boundary, nothing held: the buffer itself */

            if (ngx_omniroute_stream_pass(sr, ctx, a, b, &ll) != NGX_OK) {
                return NGX_ERROR;
            }

            if (b->last_buf || b->last_in_chain) {
                last = 1;
            }

            continue;
        }

        if (ngx_buf_in_memory(b) && b->last > b->pos && !failed) {
            /* a buffer also in a file is read whole (proxy_buffering on) */
            rc = ngx_omniroute_stream_bytes(sr, ctx, a, b->pos, b->last, &ll,
                                            b->in_file ? NULL : &stop);

            if (rc == NGX_ERROR) {
                return NGX_ERROR;
            }

            if (rc == NGX_DONE) {
                failed = 1;
            }

            if (rc == NGX_AGAIN && stop < b->last) {
                /*
                 * Committed, at an event boundary: the complete events
                 * held go out, then the rest of the buffer itself.
                 */

                if (ngx_omniroute_stream_flush(sr, ctx, a, 0, &ll) != NGX_OK)
                {
                    return NGX_ERROR;
                }

                b->pos = stop;

                if (ngx_omniroute_stream_pass(sr, ctx, a, b, &ll) != NGX_OK) {
                    return NGX_ERROR;
                }

                if (b->last_buf || b->last_in_chain) {
                    last = 1;
                }

                continue;
            }
        }

        b->pos = b->last;

        if (b->in_file) {
            b->file_pos = b->file_last;
        }

        if (b->last_buf || b->last_in_chain) {
            last = 1;
        }

        if (ngx_buf_special(b)
            && (b->flush || b->sync || b->last_buf || b->last_in_chain))
        {
            /* passed on after the data, once committed */

            sl = ngx_alloc_chain_link(sr->pool);
            if (sl == NULL) {
                return NGX_ERROR;
            }

            sl->buf = b;
            *sll = sl;
            sll = &sl->next;
        }
    }

    *sll = NULL;

    if (failed) {
        /* an error event before the commit point: end the upstream now */
        ngx_omniroute_stream_stop(ctx, a);
        return NGX_OK;
    }

    clean = last && (!a->rc_seen || a->upstream_rc == NGX_OK);

    if (clean && or_sse_end(ctx->stream.sse, &ev)) {
        /* the last event of a stream that ends without its blank line */

        rc = ngx_omniroute_stream_event(sr, ctx, a, &ev,
                                        ngx_omniroute_stream_held(a, &ev));

        if (rc == NGX_DONE) {
            return NGX_OK;
        }

        if (rc == NGX_ERROR) {
            return NGX_ERROR;
        }
    }

    if (last && a->state == NGX_OMNIROUTE_ATTEMPT_PROBING) {
        /*
         * The stream ended before any content and before its terminal
         * event: a failure like a 502 (the held bytes are its body).
         */

        ngx_log_error(NGX_LOG_INFO, sr->connection->log, 0,
                      "omniroute: the stream of \"%V\" ended without "
                      "content", &a->cand->conn->id);

        a->state = NGX_OMNIROUTE_ATTEMPT_HELD;
        a->status = NGX_HTTP_BAD_GATEWAY;
        ngx_omniroute_held(ctx, a);
        sr->header_sent = 1;

        return NGX_OK;
    }

    if (a->state != NGX_OMNIROUTE_ATTEMPT_COMMITTED) {
        return NGX_OK;
    }

    /* complete events go out; at a clean end, every byte */

    if (ngx_omniroute_stream_flush(sr, ctx, a, clean, &ll) != NGX_OK) {
        return NGX_ERROR;
    }

    *ll = special;

    if (out == NULL && in != NULL) {
        return NGX_OK;
    }

    /* a call without data still writes what the client has not taken */
    rc = ngx_omniroute_stream_send(sr, ctx, out);

    if (a->error_event && !last) {
        /*
         * The provider's error event went to the client (the SDK raises
         * on it): the stream is over, whether or not the provider closes.
         */
        ngx_omniroute_stream_stop(ctx, a);
    }

    return rc;
}


/*
 * Bytes of the stream: cut into events, held, and (after the commit
 * point) the complete events queued at *ll.  NGX_DONE: an error event
 * before the commit point (the attempt is now held).  NGX_AGAIN (only
 * with stop): the stream is committed and *stop is the end of an event
 * (the rest can go out as it is).
 */

static ngx_int_t
ngx_omniroute_stream_bytes(ngx_http_request_t *sr, ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_attempt_t *a, u_char *p, u_char *last, ngx_chain_t ***ll,
    u_char **stop)
{
    size_t           n, room;
    ngx_int_t        rc;
    ngx_buf_t       *h;
    or_sse_event_t   ev;

    h = a->body;

    while (p < last) {
        n = or_sse_feed(ctx->stream.sse, (const char *) p, last - p, &ev);

        if (ngx_omniroute_stream_room(sr, ctx, a, n, &room) != NGX_OK) {
            return NGX_ERROR;
        }

        if (n > room) {

            if (a->state == NGX_OMNIROUTE_ATTEMPT_PROBING) {
                /* no content within the bound: committed as it is */

                ngx_log_error(NGX_LOG_INFO, sr->connection->log, 0,
                              "omniroute: no content in the first %uz "
                              "bytes of the stream of \"%V\", committed",
                              ctx->lcf->error_body_max, &a->cand->conn->id);

                if (ngx_omniroute_commit(sr, ctx, a) != NGX_OK) {
                    return NGX_ERROR;
                }
            }

            if (ngx_omniroute_stream_flush(sr, ctx, a, 0, ll) != NGX_OK) {
                return NGX_ERROR;
            }

            if (n > (size_t) (h->end - h->last)) {
                /* one event over the bound: what there is goes out */

                if (ngx_omniroute_stream_flush(sr, ctx, a, 1, ll)
                    != NGX_OK)
                {
                    return NGX_ERROR;
                }

                a->partial = 1;
            }

            if (n > (size_t) (h->end - h->last)) {
                if (ngx_omniroute_stream_emit(sr, ctx, p, n, ll) != NGX_OK) {
                    return NGX_ERROR;
                }

                a->partial = 1;

            } else {
                h->last = ngx_cpymem(h->last, p, n);
            }

        } else {
            h->last = ngx_cpymem(h->last, p, n);
        }

        p += n;

        if (ev.kind == OR_SSE_EV_NONE) {
            continue;
        }

        /* the client's stream is at an event boundary once it goes out */
        a->partial = 0;

        rc = ngx_omniroute_stream_event(sr, ctx, a, &ev,
                                        ngx_omniroute_stream_held(a, &ev));

        if (rc != NGX_OK) {
            return rc;
        }

        if (stop != NULL && a->state == NGX_OMNIROUTE_ATTEMPT_COMMITTED) {
            *stop = p;
            return NGX_AGAIN;
        }
    }

    return NGX_OK;
}


/*
 * A buffer of a committed stream that starts at an event boundary with
 * nothing held: its events are read in place and the buffer itself goes
 * out (the upstream reuses its memory once the client took it), up to its
 * last complete event; the start of an event after that is held until
 * the event completes (a cut never leaves half an event), unless it is
 * longer than the hold bound.
 */

static ngx_int_t
ngx_omniroute_stream_pass(ngx_http_request_t *sr, ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_attempt_t *a, ngx_buf_t *b, ngx_chain_t ***ll)
{
    size_t           n, tail, room;
    u_char          *p, *q;
    ngx_buf_t       *h;
    ngx_chain_t     *cl;
    or_sse_event_t   ev;

    p = b->pos;
    q = p;

    while (p < b->last) {
        /* deltas of the wire shape in a row: one ev for them all */
        n = or_sse_feed_run(ctx->stream.sse, (const char *) p, b->last - p,
                            &ev);
        p += n;

        if (ev.kind == OR_SSE_EV_NONE) {
            break;
        }

        q = p;
        a->partial = 0;

        if (ngx_omniroute_stream_event(sr, ctx, a, &ev, p - ev.bytes)
            != NGX_OK)
        {
            return NGX_ERROR;
        }

        if (a->strip) {
            /* the usage chunk asked for the metrics: cut from the buffer */
            a->strip = 0;
            ngx_memmove(p - ev.bytes, p, b->last - p);
            b->last -= ev.bytes;
            p -= ev.bytes;
            q = p;
        }
    }

    tail = b->last - q;

    if (tail) {
        if (ngx_omniroute_stream_room(sr, ctx, a, tail, &room) != NGX_OK) {
            return NGX_ERROR;
        }

        h = a->body;

        if (tail <= room) {
            h->last = ngx_cpymem(h->last, q, tail);
            b->last = q;

        } else {
            /* one event over the bound: what there is goes out */
            a->partial = 1;
        }
    }

    if (b->last == b->pos) {
        return NGX_OK;
    }

    cl = ngx_alloc_chain_link(sr->pool);
    if (cl == NULL) {
        return NGX_ERROR;
    }

    cl->buf = b;
    cl->next = NULL;

    **ll = cl;
    *ll = &cl->next;

    return NGX_OK;
}


/*
 * One complete event of the attempt's stream (or a run of deltas of its
 * wire shape, ev->events: what follows from each is the same).
 */

static ngx_int_t
ngx_omniroute_stream_event(ngx_http_request_t *sr, ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_attempt_t *a, or_sse_event_t *ev, u_char *raw)
{
    u_char     *d;
    or_msec_t   now;

    now = ngx_omniroute_now();

    or_watch_event(&ctx->stream.watch, ev, now);

    if (ev->content || ev->refusal || ev->kind == OR_SSE_EV_DONE) {
        /* more than heartbeats and metadata: the deadline is met */
        a->answered = 1;
    }

    if (ev->data_len && ev->usage) {
        /* the token usage a stream reports (metrics) */
        ngx_omniroute_stream_usage(sr, ctx, a, ev, raw);
    }

    ngx_log_debug4(NGX_LOG_DEBUG_HTTP, sr->connection->log, 0,
                   "omniroute stream: %s event (%s)%s, %uz bytes",
                   or_sse_kind_name(ev->kind), or_sse_format_name(ev->format),
                   ev->content ? " content" : "", ev->bytes);

    if (ev->kind == OR_SSE_EV_ERROR && a->event.len == 0) {
        /* kept for the classification */

        d = ngx_pnalloc(sr->pool, ev->data_len + 1);
        if (d == NULL) {
            return NGX_ERROR;
        }

        ngx_memcpy(d, ev->data, ev->data_len);
        d[ev->data_len] = '\0';

        a->event.data = d;
        a->event.len = ev->data_len;
    }

    if (ev->usage_only && a->usage_asked && raw != NULL) {
        /* the usage chunk asked for the metrics: counted, not passed on */

        if (raw >= a->body->start && raw < a->body->end) {
            a->body->last = raw;

        } else {
            a->strip = 1;       /* read in place: the caller cuts it */
        }
    }

    /* everything held so far is complete events */
    a->boundary = a->body->last - a->body->pos;

    if (a->state == NGX_OMNIROUTE_ATTEMPT_PROBING) {

        if (ev->kind == OR_SSE_EV_ERROR) {
            /*
             * An error event before the commit point: held like an error
             * response of the status it stands for, acted on now.
             */

            ngx_log_error(NGX_LOG_INFO, sr->connection->log, 0,
                          "omniroute: error event (%d) in the stream of "
                          "\"%V\" before its first content",
                          ev->status, &a->cand->conn->id);

            a->state = NGX_OMNIROUTE_ATTEMPT_HELD;
            a->status = (ngx_uint_t) ev->status;
            ngx_omniroute_held(ctx, a);
            sr->header_sent = 1;

            return NGX_DONE;
        }

        if (!ev->content && ev->kind != OR_SSE_EV_DONE) {
            /* metadata and heartbeats stay held */
            return NGX_OK;
        }

        ngx_omniroute_stats_first_content(sr, a);

        if (ngx_omniroute_commit(sr, ctx, a) != NGX_OK) {
            return NGX_ERROR;
        }
    }

    if (ev->refusal && !a->refusal) {
        /* refused or filtered: an answer, never a provider failure */
        a->refusal = 1;

        ngx_log_error(NGX_LOG_INFO, sr->connection->log, 0,
                      "omniroute: \"%V\" refused or filtered the answer, "
                      "it is passed on", &a->cand->conn->id);
    }

    if (ev->kind == OR_SSE_EV_DONE) {
        a->terminal = 1;

    } else if (ev->kind == OR_SSE_EV_ERROR && !a->error_event) {
        /* the provider's error went to the client: the attempt failed */
        a->error_event = 1;
        a->malformed = ev->malformed;
        a->status = (ngx_uint_t) ev->status;

        if (ev->malformed) {
            ngx_log_error(NGX_LOG_WARN, sr->connection->log, 0,
                          "omniroute: a malformed event in the stream of "
                          "\"%V\" after its content", &a->cand->conn->id);
        }
    }

    return NGX_OK;
}


/*
 * The usage of an event (metrics): its data as the scanner kept it, or,
 * for an event longer than that (a response.completed carrying the whole
 * answer), as the attempt's buffer holds it whole (up to
 * omniroute_error_body_buffer_size) when it is one data line; an event
 * that went out in parts is not read.
 */

static void
ngx_omniroute_stream_usage(ngx_http_request_t *sr, ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_attempt_t *a, or_sse_event_t *ev, u_char *raw)
{
    size_t  start, len;

    if (!ev->truncated) {
        ngx_omniroute_stats_event(sr, a, ev->data, ev->data_len);
        return;
    }

    if (raw == NULL
        || !or_sse_data_span((const char *) raw, ev->bytes, &start, &len))
    {
        ngx_log_error(NGX_LOG_INFO, sr->connection->log, 0,
                      "omniroute: an event of %uz bytes in the stream of "
                      "\"%V\" is not read for usage (over the buffer of "
                      "%uz, or in several data lines)", ev->data_total,
                      &a->cand->conn->id, ctx->lcf->error_body_max);
        return;
    }

    ngx_omniroute_stats_event(sr, a, (const char *) raw + start, len);
}


/* the raw bytes of an event held whole in the attempt's buffer, or NULL */

static u_char *
ngx_omniroute_stream_held(ngx_omniroute_attempt_t *a, or_sse_event_t *ev)
{
    size_t      held;
    ngx_buf_t  *h;

    h = a->body;
    held = h->last - h->pos;

    if (held < a->boundary || held - a->boundary != ev->bytes) {
        return NULL;        /* (part of it) went out already */
    }

    return h->last - ev->bytes;
}


/*
 * Room for n more bytes in the attempt's hold: it grows (doubling) up to
 * omniroute_error_body_buffer_size as it needs; most streams hold no more
 * than a few metadata events and the start of an event a buffer cut.
 * *room: what there is then.
 */

static ngx_int_t
ngx_omniroute_stream_room(ngx_http_request_t *sr, ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_attempt_t *a, size_t n, size_t *room)
{
    size_t      size, held;
    u_char     *p;
    ngx_buf_t  *h;

    h = a->body;
    *room = h->end - h->last;

    if (n <= *room || (size_t) (h->end - h->start) >= ctx->lcf->error_body_max)
    {
        return NGX_OK;
    }

    held = h->last - h->pos;
    size = ngx_max(2 * (size_t) (h->end - h->start), held + n);
    size = ngx_min(size, ctx->lcf->error_body_max);

    p = ngx_palloc(sr->pool, size);
    if (p == NULL) {
        return NGX_ERROR;
    }

    ngx_memcpy(p, h->pos, held);
    (void) ngx_pfree(sr->pool, h->start);

    h->start = p;
    h->pos = p;
    h->last = p + held;
    h->end = p + size;

    *room = h->end - h->last;

    return NGX_OK;
}


/* a copy of data at *ll, in one of our buffers */

static ngx_int_t
ngx_omniroute_stream_emit(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx,
    u_char *data, size_t len, ngx_chain_t ***ll)
{
    size_t        size;
    ngx_buf_t    *b;
    ngx_chain_t  *cl;

    if (len == 0) {
        return NGX_OK;
    }

    cl = ngx_chain_get_free_buf(r->main->pool, &ctx->stream.free);
    if (cl == NULL) {
        return NGX_ERROR;
    }

    b = cl->buf;

    if (b->start == NULL || (size_t) (b->end - b->start) < len) {
        size = ngx_max(len, NGX_OMNIROUTE_OUT_MIN);

        b->start = ngx_palloc(r->main->pool, size);
        if (b->start == NULL) {
            return NGX_ERROR;
        }

        b->end = b->start + size;
    }

    b->pos = b->start;
    b->last = ngx_cpymem(b->start, data, len);
    b->temporary = 1;
    b->memory = 0;
    b->flush = 1;
    b->sync = 0;
    b->last_buf = 0;
    b->last_in_chain = 0;
    b->in_file = 0;
    b->tag = (ngx_buf_tag_t) &ngx_http_omniroute_module;

    **ll = cl;
    *ll = &cl->next;
    cl->next = NULL;

    return NGX_OK;
}


/* the complete events held (all: every held byte) go out */

static ngx_int_t
ngx_omniroute_stream_flush(ngx_http_request_t *sr, ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_attempt_t *a, ngx_uint_t all, ngx_chain_t ***ll)
{
    size_t      n, held;
    ngx_buf_t  *h;

    h = a->body;
    held = h->last - h->pos;
    n = all ? held : ngx_min(a->boundary, held);

    if (n == 0) {
        return NGX_OK;
    }

    if (ngx_omniroute_stream_emit(sr, ctx, h->pos, n, ll) != NGX_OK) {
        return NGX_ERROR;
    }

    ngx_memmove(h->pos, h->pos + n, held - n);
    h->last -= n;
    a->boundary = 0;

    return NGX_OK;
}


static ngx_int_t
ngx_omniroute_stream_send(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx,
    ngx_chain_t *out)
{
    ngx_int_t  rc;

    rc = ngx_omniroute_next_body(r, out);

    ngx_chain_update_chains(r->main->pool, &ctx->stream.free,
                            &ctx->stream.busy, &out,
                            (ngx_buf_tag_t) &ngx_http_omniroute_module);

    return rc;
}


/*
 * The timer of the client request: the watch's verdicts, the hold bound,
 * keep-alives.
 */

static void
ngx_omniroute_stream_tick(ngx_event_t *ev)
{
    or_msec_t                    now, next;
    or_watch_e                   verdict;
    ngx_connection_t            *c;
    ngx_http_request_t          *r;
    ngx_omniroute_ctx_t         *ctx;
    ngx_omniroute_attempt_t     *a;
    ngx_omniroute_stream_req_t  *st;

    r = ev->data;
    c = r->connection;
    ctx = ngx_http_get_module_ctx(r, ngx_http_omniroute_module);

    a = ctx ? ctx->current : NULL;

    if (a == NULL || a->done || a->sr == NULL) {
        return;
    }

    st = &ctx->stream;
    now = ngx_omniroute_now();

    if (a->stop) {
        a->stop = 0;

        if (a->sr->upstream && a->sr->upstream->peer.connection) {
            (void) ngx_omniroute_stream_cut(a);
            ngx_http_run_posted_requests(c);
            return;
        }
    }

    if (a->state == NGX_OMNIROUTE_ATTEMPT_RUNNING
        || a->state == NGX_OMNIROUTE_ATTEMPT_PROBING
        || (a->state == NGX_OMNIROUTE_ATTEMPT_COMMITTED && a->stream))
    {
        verdict = or_watch_check(&st->conf, &st->watch, now,
                                 !ngx_omniroute_may_continue(ctx), &next);

        if (verdict != OR_WATCH_OK) {
            if (ngx_omniroute_stream_abort(ctx, a, verdict) == NGX_OK) {
                ngx_http_run_posted_requests(c);
                return;
            }
        }
    }

    if (ngx_omniroute_stream_silent(ctx, a)
        && now >= st->watch.header_at
                  + (or_msec_t) ctx->lcf->stream_probe_timeout)
    {
        /*
         * Heartbeats and metadata only, as long as allowed: a stall
         * (docs/streams.md).  Held, it falls over; committed, it ends
         * with an in-band error; recorded a failure either way.
         */

        ngx_log_error(NGX_LOG_INFO, c->log, 0,
                      "omniroute: no content from \"%V\" within %Mms of "
                      "its header, the stream has stalled",
                      &a->cand->conn->id, ctx->lcf->stream_probe_timeout);

        if (ngx_omniroute_stream_abort(ctx, a, OR_WATCH_FIRST_CONTENT)
            == NGX_OK)
        {
            ngx_http_run_posted_requests(c);
            return;
        }
    }

    if (a->state != NGX_OMNIROUTE_ATTEMPT_COMMITTED
        && st->client_stream
        && ctx->lcf->stream_keepalive
        && c->data == a->sr)
    {
        if ((!ctx->early && a->state != NGX_OMNIROUTE_ATTEMPT_HELD
             && now >= st->start + (or_msec_t) ctx->lcf->stream_keepalive)
            || (ctx->early && now >= st->keepalive_at))
        {
            if (ngx_omniroute_stream_keepalive(ctx, a) == NGX_ERROR) {
                ngx_http_finalize_request(r, NGX_ERROR);
                ngx_http_run_posted_requests(c);
                return;
            }
        }
    }

    ngx_omniroute_stream_arm(ctx);

    ngx_http_run_posted_requests(c);
}


/* the timer at the earliest time something is due */

static void
ngx_omniroute_stream_arm(ngx_omniroute_ctx_t *ctx)
{
    or_msec_t                    now, next, at;
    ngx_omniroute_attempt_t     *a;
    ngx_omniroute_stream_req_t  *st;

    a = ctx->current;
    st = &ctx->stream;

    if (a == NULL || a->done || a->stop) {
        return;
    }

    now = ngx_omniroute_now();
    next = OR_MSEC_NONE;

    if (a->state != NGX_OMNIROUTE_ATTEMPT_HELD
        && (a->state != NGX_OMNIROUTE_ATTEMPT_COMMITTED || a->stream))
    {
        if (or_watch_check(&st->conf, &st->watch, now,
                           !ngx_omniroute_may_continue(ctx), &at)
            != OR_WATCH_OK)
        {
            at = now;
        }

        next = at;
    }

    if (ngx_omniroute_stream_silent(ctx, a)) {
        at = st->watch.header_at
             + (or_msec_t) ctx->lcf->stream_probe_timeout;

        if (next == OR_MSEC_NONE || at < next) {
            next = at;
        }
    }

    if (a->state != NGX_OMNIROUTE_ATTEMPT_COMMITTED
        && st->client_stream && ctx->lcf->stream_keepalive
        && (ctx->early || a->state != NGX_OMNIROUTE_ATTEMPT_HELD))
    {
        at = ctx->early ? st->keepalive_at
                        : st->start + (or_msec_t) ctx->lcf->stream_keepalive;

        if (next == OR_MSEC_NONE || at < next) {
            next = at;
        }
    }

    if (next == OR_MSEC_NONE) {
        if (st->timer.timer_set) {
            ngx_del_timer(&st->timer);
        }

        return;
    }

    ngx_add_timer(&st->timer,
                  (ngx_msec_t) (next > now ? next - now : 1));
}


/*
 * The watch stops the attempt (stream_stall): its upstream ends now.
 */

static ngx_int_t
ngx_omniroute_stream_abort(ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_attempt_t *a, or_watch_e verdict)
{
    ngx_http_upstream_t  *u;

    u = a->sr->upstream;

    if (u == NULL || u->peer.connection == NULL) {
        /* nothing to stop yet (resolving): checked again later */
        return NGX_DECLINED;
    }

    a->stall = 1;
    a->watch = verdict;

    ngx_log_error(NGX_LOG_INFO, ctx->request->connection->log, 0,
                  "omniroute: the stream of \"%V\" is stopped (%s): "
                  "stream_stall", &a->cand->conn->id, or_watch_name(verdict));

    return ngx_omniroute_stream_cut(a);
}


/*
 * From the body filter (an error event before the commit point): the
 * upstream ends as soon as the filter returns, without waiting for the
 * provider to close (or for proxy_read_timeout).
 */

static void
ngx_omniroute_stream_stop(ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_attempt_t *a)
{
    ngx_http_upstream_t  *u;

    u = a->sr->upstream;

    if (u == NULL) {
        return;
    }

    if (u->header_sent && !u->buffering) {
        /* ngx_http_upstream_process_non_buffered_request() ends it */
        u->error = 1;
        return;
    }

    /* buffered: stopped from the timer, out of the filter */
    a->stop = 1;
    ngx_add_timer(&ctx->stream.timer, 1);
}


/*
 * Ends the attempt's upstream from outside its own handlers, the way the
 * upstream module would: a non-buffered response after its header as an
 * upstream error (no log line of its own), anything else as a read
 * timeout (proxy_read_timeout's path).  The post-subrequest handler then
 * sees the end.
 */

static ngx_int_t
ngx_omniroute_stream_cut(ngx_omniroute_attempt_t *a)
{
    ngx_connection_t     *pc;
    ngx_http_upstream_t  *u;

    u = a->sr->upstream;
    pc = u->peer.connection;

    if (u->header_sent && !u->buffering && a->sr->write_event_handler) {
        u->error = 1;
        a->sr->write_event_handler(a->sr);
        return NGX_OK;
    }

    if (pc->read->timer_set) {
        ngx_del_timer(pc->read);
    }

    pc->read->timedout = 1;
    pc->read->delayed = 0;
    pc->write->timedout = 1;

    pc->read->handler(pc->read);

    return NGX_OK;
}


/*
 * A stream whose first-content deadline runs: its header came, nothing
 * but heartbeats and metadata since (held, or committed as the last
 * candidate or past the byte bound).
 */

static ngx_uint_t
ngx_omniroute_stream_silent(ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_attempt_t *a)
{
    return a->stream && !a->answered && ctx->lcf->stream_probe_timeout
           && (a->state == NGX_OMNIROUTE_ATTEMPT_PROBING
               || a->state == NGX_OMNIROUTE_ATTEMPT_COMMITTED);
}


/* a comment line to the client while nothing else may go out */

static ngx_int_t
ngx_omniroute_stream_keepalive(ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_attempt_t *a)
{
    return ngx_omniroute_stream_comment(ctx, a->sr);
}


/*
 * When the next keep-alive of a waiting request is due (dispatch.c's
 * waits: no attempt runs), OR_MSEC_NONE: none (not a streaming client,
 * keep-alives off).
 */

or_msec_t
ngx_omniroute_stream_keepalive_due(ngx_omniroute_ctx_t *ctx)
{
    ngx_omniroute_stream_req_t  *st;

    st = &ctx->stream;

    if (!st->client_stream || !ctx->lcf->stream_keepalive
        || ctx->request->connection->data != ctx->request)
    {
        return OR_MSEC_NONE;
    }

    return ctx->early ? st->keepalive_at
                      : st->start + (or_msec_t) ctx->lcf->stream_keepalive;
}


/* a keep-alive of a waiting request: on the client request itself */

ngx_int_t
ngx_omniroute_stream_wait_keepalive(ngx_omniroute_ctx_t *ctx)
{
    return ngx_omniroute_stream_comment(ctx, ctx->request);
}


static ngx_int_t
ngx_omniroute_stream_comment(ngx_omniroute_ctx_t *ctx, ngx_http_request_t *w)
{
    ngx_chain_t  *out, **ll;

    if (!ctx->early && ngx_omniroute_stream_early_header(ctx) != NGX_OK) {
        return NGX_ERROR;
    }

    out = NULL;
    ll = &out;

    if (ngx_omniroute_stream_emit(w, ctx,
                                  (u_char *) NGX_OMNIROUTE_KEEPALIVE,
                                  sizeof(NGX_OMNIROUTE_KEEPALIVE) - 1, &ll)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    ctx->stream.keepalive_at = ngx_omniroute_now()
                        + (or_msec_t) ctx->lcf->stream_keepalive_interval;

    ngx_log_debug0(NGX_LOG_DEBUG_HTTP, ctx->request->connection->log, 0,
                   "omniroute stream: keep-alive");

    return ngx_omniroute_stream_send(w, ctx, out);
}


/*
 * The client's 200 event-stream header, before any attempt reached its
 * commit point (falling over stays possible: nothing else went out).
 */

static ngx_int_t
ngx_omniroute_stream_early_header(ngx_omniroute_ctx_t *ctx)
{
    ngx_int_t            rc;
    ngx_str_t            name, value;
    ngx_http_request_t  *r;

    r = ctx->request;

    r->headers_out.status = NGX_HTTP_OK;
    r->headers_out.status_line.len = 0;
    ngx_str_set(&r->headers_out.content_type, "text/event-stream");
    r->headers_out.content_type_len = r->headers_out.content_type.len;
    r->headers_out.content_type_lowcase = NULL;
    r->headers_out.content_length_n = -1;
    r->headers_out.content_length = NULL;

    ngx_str_set(&name, "Cache-Control");
    ngx_str_set(&value, "no-cache");

    if (ngx_omniroute_add_header(r, &name, &value) != NGX_OK) {
        return NGX_ERROR;
    }

    ngx_str_set(&name, "X-Accel-Buffering");
    ngx_str_set(&value, "no");

    if (ngx_omniroute_add_header(r, &name, &value) != NGX_OK) {
        return NGX_ERROR;
    }

    ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                  "omniroute: no content after %Mms, the client's stream "
                  "starts with keep-alives", ctx->lcf->stream_keepalive);

    ctx->early = 1;

    rc = ngx_http_send_header(r);

    if (rc == NGX_ERROR || rc > NGX_OK) {
        return NGX_ERROR;
    }

    return NGX_OK;
}


/*
 * The post-subrequest handler's part: the watch of a finished attempt is
 * over (the next attempt restarts it).
 */

void
ngx_omniroute_stream_done(ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_attempt_t *a, ngx_int_t rc)
{
    if (ctx->stream.timer.timer_set) {
        ngx_del_timer(&ctx->stream.timer);
    }

    if (a->stall) {
        a->transport = OR_TRANSPORT_TIMEOUT;
    }
}


/*
 * The end of the committed attempt (R-STREAM-2..4): a stream that ended
 * well is recorded a success and ends; a cut one (upstream reset, read
 * timeout, stopped by the watch, an end without the format's terminal
 * event) is recorded a failure and ends with an in-band error event and
 * no [DONE]; a response that is not a stream and was cut closes the
 * client connection.  Returns what to finalize the client request with.
 */

ngx_int_t
ngx_omniroute_stream_end(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_attempt_t *a)
{
    off_t             len;
    size_t            n;
    ngx_uint_t        complete, status;
    const char       *code, *msg;
    or_sse_format_e   fmt;
    u_char            text[256];

    if (!a->stream) {
        len = a->sr->headers_out.content_length_n;

        if ((a->rc_seen && a->upstream_rc != NGX_OK
             && a->upstream_rc != NGX_DONE)
            || (len >= 0 && a->sent < len))
        {
            ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                          "omniroute: the response of \"%V\" was cut after "
                          "%O of %O bytes, the client connection is closed",
                          &a->cand->conn->id, a->sent, len);

            r->keepalive = 0;
            return NGX_ERROR;
        }

        return ngx_http_send_special(r, NGX_HTTP_LAST);
    }

    fmt = ctx->stream.sse ? ctx->stream.sse->format : OR_SSE_FMT_UNKNOWN;

    /*
     * A refusal or filter is the whole answer: what follows it (the
     * terminal event, the end of the body) may be missing or cut.
     */

    complete = !a->stall && !a->malformed
               && (a->refusal
                   || ((!a->rc_seen || a->upstream_rc == NGX_OK)
                       && (a->terminal
                           || (fmt == OR_SSE_FMT_UNKNOWN && a->answered)
                           || (fmt == OR_SSE_FMT_CHAT
                               && ctx->stream.sse->finished))));

    if (a->error_event && !a->stall && !a->malformed) {
        /*
         * The provider's own error event went out: it ends the stream (its
         * upstream was closed after it).
         */

        ngx_omniroute_classify(r, a);
        ngx_omniroute_record_failure(r, a);
        ngx_omniroute_count(r, NGX_OMNIROUTE_OUT_PROVIDER_ERROR);

        return ngx_http_send_special(r, NGX_HTTP_LAST);
    }

    if (complete) {
        ngx_omniroute_record_success(r, a);
        ngx_omniroute_count(r, NGX_OMNIROUTE_OUT_SUCCESS);

        return ngx_http_send_special(r, NGX_HTTP_LAST);
    }

    a->cut = 1;

    if (a->stall) {
        a->transport = OR_TRANSPORT_TIMEOUT;
        status = NGX_HTTP_GATEWAY_TIME_OUT;
        code = "stream_stall";
        msg = "the provider's stream stalled";

    } else if (a->malformed) {
        /* a failure like a 502 (issue 25), not a cut of the transport */
        a->cut = 0;
        status = NGX_HTTP_BAD_GATEWAY;
        code = "stream_malformed";
        msg = "the provider sent a malformed event";

    } else if (a->upstream_rc == NGX_HTTP_GATEWAY_TIME_OUT) {
        a->transport = OR_TRANSPORT_TIMEOUT;
        status = NGX_HTTP_GATEWAY_TIME_OUT;
        code = "stream_truncated";
        msg = "the provider's stream timed out";

    } else {
        a->transport = OR_TRANSPORT_RESET;
        status = NGX_HTTP_BAD_GATEWAY;
        code = "stream_truncated";
        msg = a->rc_seen && a->upstream_rc != NGX_OK
              ? "the provider's stream was cut"
              : "the provider's stream ended before its end event";
    }

    n = ngx_snprintf(text, sizeof(text), "%s (connection \"%V\"); the "
                     "answer is incomplete", msg, &a->cand->conn->id)
        - text;

    ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                  "omniroute: %s after the commit (connection \"%V\", "
                  "upstream rc %i), the client gets an error event",
                  msg, &a->cand->conn->id, a->upstream_rc);

    ngx_omniroute_classify(r, a);
    ngx_omniroute_record_failure(r, a);
    ngx_omniroute_count(r, NGX_OMNIROUTE_OUT_PROVIDER_ERROR);

    return ngx_omniroute_send_error_event(r, ctx, status, code,
                                          (const char *) text, n, -1,
                                          a->partial);
}


/*
 * Every attempt failed after the client's stream started (keep-alives):
 * the last failure as an in-band error event in the client's format,
 * with its (restated) status and retry hint.
 */

ngx_int_t
ngx_omniroute_stream_fail(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_attempt_t *a)
{
    size_t        n;
    or_msec_t     ms, now;
    ngx_int_t     retry;
    ngx_uint_t    status;
    const char   *code;
    u_char        text[300];

    n = 0;

    if (a->stall) {
        status = NGX_HTTP_GATEWAY_TIME_OUT;
        code = "stream_stall";

    } else if (a->state == NGX_OMNIROUTE_ATTEMPT_TRANSPORT) {
        status = (a->transport == OR_TRANSPORT_TIMEOUT)
                 ? NGX_HTTP_GATEWAY_TIME_OUT : NGX_HTTP_BAD_GATEWAY;
        code = (a->transport == OR_TRANSPORT_TIMEOUT) ? "upstream_timeout"
                                                      : "upstream_unavailable";

    } else {
        status = a->verdict.restated_status ? a->verdict.restated_status
                                            : (int) a->status;
        code = or_reason_name(a->verdict.reason);

        if (a->event.len) {
            n = or_sse_error_message((const char *) a->event.data,
                                     a->event.len, (char *) text,
                                     sizeof(text));

        } else if (a->body && a->body->last > a->body->pos) {
            n = or_sse_error_message((const char *) a->body->pos,
                                     a->body->last - a->body->pos,
                                     (char *) text, sizeof(text));
        }
    }

    if (n == 0) {
        n = ngx_snprintf(text, sizeof(text), "every attempt failed; the "
                         "last one (connection \"%V\"): %s",
                         &a->cand->conn->id,
                         or_reason_name(a->verdict.reason))
            - text;
    }

    /* the same value as the Retry-After of the HTTP answer (issue 25) */

    now = ngx_omniroute_now();
    ms = or_retry_after_answer((int) status, a->verdict.retry_after_s,
                               a->verdict.hint_ms,
                               (a->cooled_until > now)
                               ? a->cooled_until - now : OR_MSEC_NONE);

    retry = (ms == OR_MSEC_NONE) ? -1
                                 : (ngx_int_t) or_retry_after_seconds(ms);

    ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                  "omniroute: every attempt failed after the client's "
                  "stream started, it ends with an error event (%ui %s)",
                  status, code);

    return ngx_omniroute_send_error_event(r, ctx, status, code,
                                          (const char *) text, n, retry, 0);
}
