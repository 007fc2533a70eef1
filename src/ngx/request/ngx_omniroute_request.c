
/*
 * Copyright (C) ngx_omniroute authors
 *
 * The client-facing request: the attempt loop, from the scanned body
 * (handler.c) to the client's answer.  Each attempt is a subrequest to the internal attempt location,
 * which proxies it with the values of the attempt; its body is the
 * client's bytes with only the model value replaced (body.c; see
 * docs/architecture.md).
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute_ctx.h"
#include "or_json.h"


static ngx_int_t ngx_omniroute_start_attempt(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx);
static ngx_int_t ngx_omniroute_attempt_done(ngx_http_request_t *sr,
    void *data, ngx_int_t rc);
static void ngx_omniroute_parent_handler(ngx_http_request_t *r);
static void ngx_omniroute_dispatch(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx);
static void ngx_omniroute_nothing_now(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx);
static ngx_int_t ngx_omniroute_retry_later(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx);
static ngx_int_t ngx_omniroute_early_fail(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, ngx_omniroute_attempt_t *a);
static ngx_int_t ngx_omniroute_timed_out(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, ngx_omniroute_attempt_t *a);
static void ngx_omniroute_queue_retry(ngx_event_t *ev);
static void ngx_omniroute_cooldown_retry(ngx_event_t *ev);
static void ngx_omniroute_attempt_limit(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx);
static void ngx_omniroute_attempt_expired(ngx_event_t *ev);
static ngx_int_t ngx_omniroute_lane(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, ngx_omniroute_attempt_t *a);
static void ngx_omniroute_lane_retry(ngx_event_t *ev);
static void ngx_omniroute_lane_resume(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, ngx_uint_t replay);


/*
 * The model the client named is known (rc: NGX_OK, else the client
 * error of the scan): its routes, the eligible ones, the first attempt.
 * Also the start of a GET passed through to a provider (models.c).
 */

void
ngx_omniroute_serve(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx,
    ngx_int_t rc)
{
    if (rc == NGX_OK) {
        rc = ngx_omniroute_client_key_model(r, ctx);    /* the key's models */
    }

    if (rc == NGX_OK) {
        rc = ngx_omniroute_plan_routes(r, ctx);
    }

    if (rc == NGX_OK) {
        rc = ngx_omniroute_client_key_routes(r, ctx);   /* its connections */
    }

    if (rc == NGX_OK) {
        rc = ngx_omniroute_affinity_key(r, ctx);    /* a session id: 400 */
    }

    if (rc == NGX_OK) {
        rc = ngx_omniroute_budget_admit(r, ctx);    /* the key's limits */
    }

    if (rc != NGX_OK) {
        if (ctx->error_code) {
            ngx_omniroute_count(r, NGX_OMNIROUTE_OUT_CLIENT_ERROR);

            if (rc == NGX_HTTP_TOO_MANY_REQUESTS && ctx->budget) {
                /* a key's limit: its own answer (budget.c) */
                rc = ngx_omniroute_budget_refusal(r, ctx);

            } else {
                rc = ngx_omniroute_send_rejected(r, ctx, rc);
            }
        }

        ngx_http_finalize_request(r, rc);
        return;
    }

    rc = ngx_omniroute_stream_init(r, ctx);

    if (rc == NGX_OK) {
        rc = ngx_omniroute_waits_init(r, ctx);
    }

    if (rc != NGX_OK) {
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }

    /* the global settings in force, and the request's time budget */

    ngx_omniroute_settings_global(
        ngx_http_get_module_main_conf(r, ngx_http_omniroute_module),
        &ctx->global);

    if (ctx->global.request_budget_ms > 0) {
        ctx->deadline = ngx_omniroute_now() + ctx->global.request_budget_ms;
    }

    ngx_omniroute_dispatch(r, ctx);
}


/*
 * Plans and starts the first attempt, or waits: in the queue for a
 * concurrency slot, or for the end of a cooldown (a combo); else answers.
 */

static void
ngx_omniroute_dispatch(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx)
{
    ngx_int_t  rc;

    rc = ngx_omniroute_plan_eligible(r, ctx);

    if (rc == NGX_OK) {
        r->write_event_handler = ngx_omniroute_parent_handler;

        /* others of this model wait for a slot: behind them (FIFO) */
        rc = ngx_omniroute_queue_ahead(r, ctx)
             ? NGX_BUSY : ngx_omniroute_start_attempt(r, ctx);
    }

    if (rc == NGX_BUSY) {
        /* every eligible connection is at its max_concurrent */
        rc = ngx_omniroute_queue_enter(r, ctx, ngx_omniroute_queue_retry);

        if (rc == NGX_DONE) {
            return;
        }

        if (rc == NGX_ABORT) {
            rc = ngx_omniroute_early_fail(r, ctx, NULL);
        }

        ngx_http_finalize_request(r, rc);
        return;
    }

    if (rc == NGX_DECLINED) {
        /* every candidate is excluded by the shared state */
        ngx_omniroute_nothing_now(r, ctx);
        return;
    }

    if (rc != NGX_OK) {
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }
}


/*
 * Every candidate is excluded: a combo waits for the earliest end of a
 * transient exclusion and plans again (R-CONC-3), or answers 429 with it
 * when waiting is not allowed; otherwise 503 all_targets_cooling_down or
 * 404 no_executable_targets, as before.
 */

static void
ngx_omniroute_nothing_now(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx)
{
    or_wait_e  rc;
    ngx_int_t  lrc;
    or_msec_t  ms;

    rc = ngx_omniroute_cooldown_decide(r, ctx, &ms);

    if (rc == OR_WAIT_WAIT) {
        ctx->current = NULL;

        if (ngx_omniroute_cooldown_wait(r, ctx, ngx_omniroute_cooldown_retry,
                                        ms)
            != NGX_OK)
        {
            ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        }

        return;
    }

    ctx->current = NULL;

    if (ctx->early && ctx->attempts.nelts) {
        /*
         * the client's stream started already: an in-band error event of
         * the last failure (before any attempt, the answer below goes
         * in-band: response.c)
         */
        ngx_omniroute_count(r, ctx->last_held
                               ? NGX_OMNIROUTE_OUT_PROVIDER_ERROR
                               : NGX_OMNIROUTE_OUT_UNREACHABLE);
        ngx_http_finalize_request(r, ngx_omniroute_early_fail(r, ctx, NULL));
        return;
    }

    if (ctx->last_held) {
        /* attempts were made (before a wait): the latest provider error */
        ngx_omniroute_count(r, NGX_OMNIROUTE_OUT_PROVIDER_ERROR);
        ngx_http_finalize_request(r,
                                  ngx_omniroute_send_held(r, ctx,
                                                          ctx->last_held));
        return;
    }

    /* exclusive leases held the free ones: their 429 (lease.c) */

    lrc = ngx_omniroute_lease_unavailable(r, ctx);

    if (lrc != NGX_DECLINED) {
        ngx_http_finalize_request(r, lrc);
        return;
    }

    if (rc == OR_WAIT_REFUSE) {
        ngx_http_finalize_request(r,
                                  ngx_omniroute_send_rate_limited(r, ctx, ms));
        return;
    }

    ngx_http_finalize_request(r, ngx_omniroute_send_cooling_down(r, ctx));
}


/*
 * The next candidate the breaker admits (one HALF_OPEN probe) with a free
 * concurrency slot becomes an attempt.  NGX_DECLINED: no candidate left;
 * NGX_BUSY: the ones left are at their max_concurrent.
 */

static ngx_int_t
ngx_omniroute_start_attempt(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx)
{
    or_msec_t                   retry;
    const char                 *reason;
    ngx_atomic_t               *counters[2];
    ngx_http_request_t         *sr;
    ngx_omniroute_attempt_t    *a;
    ngx_uint_t                  lane;
    ngx_omniroute_candidate_t  *cand;

    for ( ;; ) {
        /*
         * the usage-limit lane retries the same connection (R-LANE-2);
         * not counted against omniroute_max_attempts once it has its slot
         */
        cand = ngx_omniroute_lane_next(ctx);
        lane = (cand != NULL);

        if (!lane) {
            cand = ngx_omniroute_plan_next(ctx);
        }

        if (cand == NULL) {
            ngx_log_debug1(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                           "omniroute: no candidate left%s",
                           ctx->plan.saw_full ? ", some at max_concurrent"
                                              : "");

            return ctx->plan.saw_full ? NGX_BUSY : NGX_DECLINED;
        }

        if (ngx_omniroute_admit(r, ctx, cand, &reason) != NGX_OK) {
            if (ngx_omniroute_plan_exclude(ctx, cand->route, reason, 1000,
                                           OR_WAIT_KIND_TRANSIENT)
                != NGX_OK)
            {
                return NGX_ERROR;
            }

            continue;
        }

        /* leases: another's connection, or no longer this lease's */

        if (ngx_omniroute_lease_admit(r, ctx, cand, &reason, &retry)
            != NGX_OK)
        {
            /* hard: a foreign lease answers 429 (lease.c), no combo wait */
            if (ngx_omniroute_plan_exclude(ctx, cand->route, reason, retry,
                                           OR_WAIT_KIND_HARD)
                != NGX_OK)
            {
                return NGX_ERROR;
            }

            continue;
        }

        if (ngx_omniroute_acquire_slot(r, ctx, cand, counters) == NGX_OK) {
            if (lane) {
                ngx_omniroute_lane_retried(ctx);
            }

            break;
        }

        /* at its max_concurrent: the next candidate, else wait */
        ctx->plan.saw_full = 1;
    }

    a = ngx_array_push(&ctx->attempts);
    if (a == NULL) {
        if (counters[0]) {
            (void) ngx_atomic_fetch_add(counters[0], -1);
        }

        if (counters[1]) {
            (void) ngx_atomic_fetch_add(counters[1], -1);
        }

        return NGX_ERROR;
    }

    ngx_memzero(a, sizeof(ngx_omniroute_attempt_t));
    a->cand = cand;
    a->start = ngx_omniroute_now();
    ctx->current = a;

    if (ngx_omniroute_hold_slot(r, a, counters) != NGX_OK
        || ngx_omniroute_attempt_url(r, ctx, cand->provider) != NGX_OK)
    {
        return NGX_ERROR;
    }

    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "omniroute: attempt %ui on \"%V\" (model \"%V\")",
                   ctx->attempts.nelts, &cand->conn->id,
                   &cand->target->model);

    if (cand->emergency && !ctx->emergency_used) {
        /* R-EMERG-1: used, once per request */
        ctx->emergency_used = 1;

        ngx_omniroute_pace_count(r, NGX_OMNIROUTE_PACE_EMERGENCY);

        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                      "omniroute: every candidate of \"%V\" failed or was "
                      "excluded: emergency fallback \"%V/%V\"", &ctx->model,
                      &cand->conn->id, &cand->target->model);
    }

    ctx->ps.handler = ngx_omniroute_attempt_done;
    ctx->ps.data = ctx;

    if (ngx_http_subrequest(r, &ctx->lcf->pass_uri, NULL, &sr, &ctx->ps, 0)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    a->sr = sr;

    sr->method = r->method;
    sr->method_name = r->method_name;

    if (ngx_omniroute_attempt_body(r, ctx, sr, a) != NGX_OK
        || ngx_omniroute_attempt_headers(r, sr, cand) != NGX_OK
        || ngx_omniroute_lane_headers(r, sr, cand) != NGX_OK)
    {
        /*
         * The subrequest is posted already: whatever becomes of it, none
         * of the client's headers (its gateway key) goes upstream.
         */

        sr->headers_in.headers.part.nelts = 0;
        sr->headers_in.headers.part.next = NULL;
        sr->headers_in.headers.last = &sr->headers_in.headers.part;

        return NGX_ERROR;
    }

    /* the watch over its stream (first-content deadline, stall, rate) */
    ngx_omniroute_stream_attempt(r, ctx, a);

    /* the execution limit and the request's budget */
    ngx_omniroute_attempt_limit(r, ctx);

    return NGX_OK;
}


/*
 * R-CONC-2, R-REQ-4: an attempt may run execution_max_wait_ms (cut to what
 * is left of the request budget) before its provider's response header;
 * then the timer ends it as a timeout.
 */

static void
ngx_omniroute_attempt_limit(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx)
{
    int        budget;
    or_msec_t  ms, fb;

    ms = or_wait_attempt_limit(ctx->global.execution_max_wait_ms,
                               ngx_omniroute_budget_left(ctx), &budget);

    ctx->exec_cut = budget ? NGX_OMNIROUTE_CUT_BUDGET
                           : NGX_OMNIROUTE_CUT_EXECUTION;

    /* the provider's first-byte deadline, when another attempt may follow */

    fb = ctx->current->cand->settings->stream.first_byte_ms;

    if (fb != OR_MSEC_NONE && fb > 0 && fb < ms
        && ngx_omniroute_may_continue(ctx))
    {
        ms = fb;
        ctx->exec_cut = NGX_OMNIROUTE_CUT_FIRST_BYTE;
    }
    ctx->exec.handler = ngx_omniroute_attempt_expired;

    if (ctx->exec.timer_set) {
        ngx_del_timer(&ctx->exec);
    }

    ngx_add_timer(&ctx->exec, (ngx_msec_t) ngx_max(ms, 1));
}


/*
 * The attempt's time is up before its response header: its upstream
 * connection is timed out as proxy_read_timeout would (the proxy module
 * finalizes the subrequest with 504, the post-subrequest handler records
 * it once).  Not connected yet (resolving): a little later.
 */

static void
ngx_omniroute_attempt_expired(ngx_event_t *ev)
{
    ngx_connection_t         *pc;
    ngx_http_request_t       *r;
    ngx_http_upstream_t      *u;
    ngx_omniroute_ctx_t      *ctx;
    ngx_omniroute_attempt_t  *a;

    r = ev->data;
    ctx = ngx_http_get_module_ctx(r, ngx_http_omniroute_module);
    a = ctx->current;

    if (a == NULL || a->done || a->header_seen || a->sr == NULL) {
        return;
    }

    u = a->sr->upstream;

    if (u == NULL || u->peer.connection == NULL) {
        ngx_add_timer(ev, 100);
        return;
    }

    a->limit = ctx->exec_cut;

    ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                  "omniroute: attempt on \"%V\" ended after %L ms: %s",
                  &a->cand->conn->id, (int64_t) (ngx_omniroute_now()
                                                  - a->start),
                  a->limit == NGX_OMNIROUTE_CUT_BUDGET
                  ? "the request budget is spent"
                  : a->limit == NGX_OMNIROUTE_CUT_FIRST_BYTE
                  ? "no response header within its first_byte deadline, "
                    "falling over"
                  : "execution_max_wait_ms reached");

    pc = u->peer.connection;
    pc->read->timedout = 1;
    pc->read->handler(pc->read);
}


/* post-subrequest handler: the attempt is over; the parent decides next */

static ngx_int_t
ngx_omniroute_attempt_done(ngx_http_request_t *sr, void *data, ngx_int_t rc)
{
    ngx_omniroute_ctx_t *ctx = data;

    ngx_omniroute_attempt_t  *a;

    a = ctx->current;

    if (a == NULL || a->sr != sr || a->done) {
        return rc;
    }

    a->done = 1;

    /* the slot and the watch, exactly once per attempt (R-STREAM-4) */
    ngx_omniroute_release_slot(a);
    ngx_omniroute_stats_attempt_end(sr, a);
    ngx_omniroute_stream_done(ctx, a, rc);

    if (ctx->exec.timer_set) {
        ngx_del_timer(&ctx->exec);
    }

    /* the provider got the whole request (a timeout may be a generation) */
    a->body_sent = (sr->upstream && sr->upstream->request_body_sent);

    ngx_log_debug4(NGX_LOG_DEBUG_HTTP, sr->connection->log, 0,
                   "omniroute attempt done: rc:%i state:%d status:%ui "
                   "upstream:%i", rc, a->state, a->status, a->upstream_rc);

    if (sr->connection->error) {
        return rc;
    }

    switch (a->state) {

    case NGX_OMNIROUTE_ATTEMPT_COMMITTED:
        /* how it ended decides the client's end (the parent handler) */

        if (!a->rc_seen && rc != NGX_OK && rc != NGX_AGAIN) {
            a->upstream_rc = rc;
            a->rc_seen = 1;
        }

        return NGX_OK;

    case NGX_OMNIROUTE_ATTEMPT_HELD:
        return NGX_OK;

    default:
        /*
         * No response header (connect error, reset or timeout), or a
         * held stream that ended before its first content (reset, read
         * timeout, stopped by the watch).
         */

        a->state = NGX_OMNIROUTE_ATTEMPT_TRANSPORT;

        if (a->stall || rc == NGX_HTTP_GATEWAY_TIME_OUT
            || (a->rc_seen && a->upstream_rc == NGX_HTTP_GATEWAY_TIME_OUT))
        {
            a->status = NGX_HTTP_GATEWAY_TIME_OUT;
            a->transport = OR_TRANSPORT_TIMEOUT;

        } else {
            a->status = NGX_HTTP_BAD_GATEWAY;
            a->transport = a->header_seen ? OR_TRANSPORT_RESET
                                          : OR_TRANSPORT_CONNECT_ERROR;
        }

        return NGX_OK;
    }
}


/* the main request's write handler, woken when an attempt is finalized */

static void
ngx_omniroute_parent_handler(ngx_http_request_t *r)
{
    ngx_int_t                 rc;
    ngx_omniroute_ctx_t      *ctx;
    ngx_omniroute_attempt_t  *a;

    ctx = ngx_http_get_module_ctx(r, ngx_http_omniroute_module);

    if (ctx == NULL || ctx->current == NULL || !ctx->current->done) {
        return;
    }

    a = ctx->current;

    if (a->state == NGX_OMNIROUTE_ATTEMPT_COMMITTED) {
        /* recorded when it ends: a success, or a cut (R-STREAM-4) */
        ctx->current = NULL;
        rc = ngx_omniroute_stream_end(r, ctx, a);
        ngx_http_finalize_request(r, rc);
        return;
    }

    /* a held error or a transport failure: classify and record it once */

    ngx_omniroute_classify(r, a);

    if (ngx_omniroute_lane(r, ctx, a) == NGX_DONE) {
        return;
    }

    if (a->limit == NGX_OMNIROUTE_CUT_BUDGET) {
        /* the request's time is up; not the connection's fault */
        ngx_omniroute_count_attempt(r, a, a->verdict.reason);

    } else {
        ngx_omniroute_record_failure(r, a);
    }

    if (ngx_omniroute_timed_out(r, ctx, a) == NGX_OK) {
        return;
    }

    if (a->paced && ngx_omniroute_attempts_left(ctx))
    {
        /* R-PACE-2: not a fall-over: it waits for the pause, in order */
        ctx->current = NULL;
        ngx_omniroute_plan_restart(ctx);

        rc = ngx_omniroute_queue_enter(r, ctx, ngx_omniroute_queue_retry);

        if (rc == NGX_ABORT) {
            rc = ngx_omniroute_early_fail(r, ctx, a);
        }

        if (rc != NGX_DONE) {
            ngx_http_finalize_request(r, rc);
        }

        return;
    }

    if (ngx_omniroute_may_fall_over(ctx, a)) {
        ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                       "omniroute: \"%V\" failed (%s), falling over",
                       &a->cand->conn->id, or_reason_name(a->verdict.reason));

        ngx_omniroute_count_fallback(r, a);

        rc = ngx_omniroute_start_attempt(r, ctx);

        if (rc == NGX_OK) {
            return;
        }

        if (rc == NGX_ERROR) {
            ngx_http_finalize_request(r, r->header_sent
                                         ? NGX_ERROR
                                         : NGX_HTTP_INTERNAL_SERVER_ERROR);
            return;
        }

        /* NGX_DECLINED, NGX_BUSY: no candidate admitted; answer with
         * what we have */
    }

    if (ngx_omniroute_retry_later(r, ctx) == NGX_DONE) {
        return;
    }

    ctx->current = NULL;

    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "omniroute: no further attempt, %s to the client",
                   ctx->last_held ? "the held error" : "a transport error");

    if (ctx->early) {
        /* the client's stream started already: an in-band error event */

        ngx_omniroute_count(r, ctx->last_held
                               ? NGX_OMNIROUTE_OUT_PROVIDER_ERROR
                               : NGX_OMNIROUTE_OUT_UNREACHABLE);
        rc = ngx_omniroute_stream_fail(r, ctx,
                                       (ctx->last_held && !a->stall)
                                       ? ctx->last_held : a);

    } else if (ctx->last_held && ctx->last_held->cand->emergency) {
        /*
         * Only the emergency target answered, and failed (issue 25): the
         * request's own candidates are excluded; their state (cooling
         * down, with its Retry-After) is the answer, not its error.
         */

        ctx->last_held = NULL;
        ngx_omniroute_nothing_now(r, ctx);
        return;

    } else if (ctx->last_held) {
        ngx_omniroute_count(r, NGX_OMNIROUTE_OUT_PROVIDER_ERROR);
        rc = ngx_omniroute_send_held(r, ctx, ctx->last_held);

    } else {
        ngx_omniroute_count(r, NGX_OMNIROUTE_OUT_UNREACHABLE);
        rc = a->limit ? ngx_omniroute_send_cut(r, ctx, a)
                    : ngx_omniroute_send_transport_error(r, ctx, a);
    }

    ngx_http_finalize_request(r, rc);
}


/*
 * A timeout after the provider got the whole request of a non-streamed
 * generation is not re-sent to the next connection (it may be generating,
 * and billing, still), unless omniroute_resend_after_timeout is on; one
 * the request budget ended is never re-sent.  NGX_OK: answered 504.
 */

static ngx_int_t
ngx_omniroute_timed_out(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_attempt_t *a)
{
    ngx_int_t          rc;
    or_wait_timeout_t  t;

    if (a->state != NGX_OMNIROUTE_ATTEMPT_TRANSPORT
        || a->transport != OR_TRANSPORT_TIMEOUT)
    {
        return NGX_DECLINED;
    }

    t.resend = ctx->lcf->resend_after_timeout;
    t.sent = a->body_sent;
    t.stream = (ctx->scan.stream.type == OR_JSON_TRUE);
    t.budget_cut = (a->limit == NGX_OMNIROUTE_CUT_BUDGET);
    t.first_byte = (a->limit == NGX_OMNIROUTE_CUT_FIRST_BYTE);

    if (or_wait_resend(&t)) {
        return NGX_DECLINED;
    }

    ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                  "omniroute: \"%V\" timed out %s; not sent to another "
                  "connection", &a->cand->conn->id,
                  t.budget_cut ? "at the end of the request budget"
                               : "after it got the whole request");

    ctx->current = NULL;

    ngx_omniroute_count(r, NGX_OMNIROUTE_OUT_UNREACHABLE);

    if (ctx->early) {
        rc = ngx_omniroute_early_fail(r, ctx, a);

    } else {
        rc = a->limit ? ngx_omniroute_send_cut(r, ctx, a)
                    : ngx_omniroute_send_transport_error(r, ctx, a);
    }

    ngx_http_finalize_request(r, rc);

    return NGX_OK;
}


/*
 * The client's 200 header and keep-alives went out before any content
 * (docs/streams.md): whatever ends the request now ends its stream with
 * an in-band error event, of a (else the latest held error, else the
 * latest attempt), never with a second header.
 */

static ngx_int_t
ngx_omniroute_early_fail(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_attempt_t *a)
{
    if (a == NULL) {
        a = ctx->last_held;
    }

    if (a == NULL && ctx->attempts.nelts) {
        a = (ngx_omniroute_attempt_t *) ctx->attempts.elts
            + ctx->attempts.nelts - 1;
    }

    if (a == NULL) {
        /* cannot be: the early header goes out during an attempt */
        return NGX_ERROR;
    }

    return ngx_omniroute_stream_fail(r, ctx, a);
}


/*
 * R-CONC-3 after dispatch: every attempt of a combo failed with a
 * transient 429 and no other candidate is left.  Planned again, a
 * candidate that is eligible by now is tried; when every one is still
 * excluded, the request waits for the earliest end (within the bounds)
 * and plans again.  NGX_DONE: it goes on; NGX_DECLINED: answer now.
 */

static ngx_int_t
ngx_omniroute_retry_later(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx)
{
    ngx_int_t                   rc;
    or_msec_t                   ms;
    ngx_uint_t                  i;
    ngx_omniroute_attempt_t    *at;
    ngx_omniroute_candidate_t  *cand;

    if (ctx->entry == NULL || !ctx->entry->combo || !ctx->entry->wait
        || !ctx->global.combo_wait
        || !ngx_omniroute_attempts_left(ctx))
    {
        return NGX_DECLINED;
    }

    at = ctx->attempts.elts;

    for (i = 0; i < ctx->attempts.nelts; i++) {
        if (at[i].state != NGX_OMNIROUTE_ATTEMPT_HELD
            || !or_wait_failure_transient(at[i].verdict.reason))
        {
            return NGX_DECLINED;
        }
    }

    ngx_omniroute_plan_reset(ctx);

    rc = ngx_omniroute_plan_eligible(r, ctx);

    if (rc == NGX_OK) {
        /*
         * eligible at once: a candidate whose cooldown ended meanwhile is
         * tried; one that just answered 429 without cooling down
         * (disable_cooling) is not hammered again
         */

        cand = ((ngx_omniroute_candidate_t **)
                   ctx->candidates.elts)[ctx->plan.next];

        for (i = 0; i < ctx->attempts.nelts; i++) {
            if (at[i].cand->route == cand->route) {
                break;
            }
        }

        rc = (i < ctx->attempts.nelts) ? NGX_DECLINED
                                       : ngx_omniroute_start_attempt(r, ctx);

        if (rc == NGX_OK) {
            return NGX_DONE;
        }
    }

    if (rc == NGX_ERROR) {
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return NGX_DONE;
    }

    if (ngx_omniroute_cooldown_decide(r, ctx, &ms) != OR_WAIT_WAIT) {
        return NGX_DECLINED;
    }

    ctx->current = NULL;

    if (ngx_omniroute_cooldown_wait(r, ctx, ngx_omniroute_cooldown_retry, ms)
        != NGX_OK)
    {
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
    }

    return NGX_DONE;
}


/*
 * A queued request's timer: when its turn may have come, the candidates
 * again from the first; when the queue wait budget is over, 503
 * SEMAPHORE_TIMEOUT, or past the caps with request_queue.fail_open.
 */

static void
ngx_omniroute_queue_retry(ngx_event_t *ev)
{
    ngx_int_t             rc;
    ngx_uint_t            over;
    ngx_connection_t     *c;
    ngx_http_request_t   *r;
    ngx_omniroute_ctx_t  *ctx;

    r = ev->data;
    c = r->connection;
    ctx = ngx_http_get_module_ctx(r, ngx_http_omniroute_module);

    rc = ngx_omniroute_queue_poll(r, ctx);

    if (rc == NGX_AGAIN) {
        return;
    }

    over = (rc == NGX_DECLINED);

    if (!over) {
        ngx_omniroute_plan_restart(ctx);

        rc = ngx_omniroute_start_attempt(r, ctx);

        if (rc == NGX_BUSY) {
            if (ngx_omniroute_queue_wait(ctx) == NGX_OK) {
                return;
            }

            over = 1;
        }
    }

    if (over) {
        /* the queue wait budget is over */

        if (ctx->global.queue_fail_open) {
            ngx_log_error(NGX_LOG_INFO, c->log, 0,
                          "omniroute: no concurrency slot within the queue "
                          "wait budget, dispatched past the caps "
                          "(request_queue.fail_open)");

            ctx->fail_open = 1;
            ngx_omniroute_plan_restart(ctx);
            rc = ngx_omniroute_start_attempt(r, ctx);

        } else {
            rc = NGX_BUSY;
        }
    }

    ngx_omniroute_queue_leave(ctx);

    switch (rc) {

    case NGX_OK:
        break;

    case NGX_BUSY:
        ngx_omniroute_count(r, NGX_OMNIROUTE_OUT_QUEUE_TIMEOUT);

        if (ctx->early && ctx->attempts.nelts) {
            ngx_http_finalize_request(r,
                                      ngx_omniroute_early_fail(r, ctx, NULL));
            break;
        }

        /* nothing tells when a slot frees: a short retry (issue 25) */
        (void) ngx_omniroute_set_retry_after(r, 1000);

        ngx_http_finalize_request(r,
            ngx_omniroute_send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                                     "rate_limit_error", "SEMAPHORE_TIMEOUT",
                                     "no concurrency slot became free "
                                     "within the queue wait budget"));
        break;

    case NGX_DECLINED:
        ngx_omniroute_nothing_now(r, ctx);
        break;

    default:
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        break;
    }

    ngx_http_run_posted_requests(c);
}


/* a cooldown wait is over: plan afresh and dispatch (R-CONC-3) */

static void
ngx_omniroute_cooldown_retry(ngx_event_t *ev)
{
    ngx_connection_t     *c;
    ngx_http_request_t   *r;
    ngx_omniroute_ctx_t  *ctx;

    r = ev->data;
    c = r->connection;
    ctx = ngx_http_get_module_ctx(r, ngx_http_omniroute_module);

    ngx_omniroute_cooldown_over(ctx);
    ngx_omniroute_plan_reset(ctx);

    ngx_omniroute_dispatch(r, ctx);

    ngx_http_run_posted_requests(c);
}


/*
 * R-LANE: a failed attempt of a usage_lane=on connection may be the
 * usage-limit wall: not recorded as a failure, the same connection is
 * tried again, now or after a slot_busy wait, or after a session-limit
 * reset.  NGX_DONE: it goes on; NGX_DECLINED: the normal path.
 */

static ngx_int_t
ngx_omniroute_lane(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_attempt_t *a)
{
    ngx_int_t  rc;
    or_msec_t  ms;

    rc = ngx_omniroute_lane_outcome(r, ctx, a, &ms,
                                    ngx_omniroute_lane_resume);

    switch (rc) {

    case NGX_OK:
        ngx_omniroute_lane_resume(r, ctx, 0);
        return NGX_DONE;

    case NGX_AGAIN:
        ctx->current = NULL;

        if (ngx_omniroute_wait_timer(r, ctx, ngx_omniroute_lane_retry, ms)
            != NGX_OK)
        {
            ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        }

        return NGX_DONE;

    case NGX_DONE:
        /* a session-limit reset runs (lane.c), then lane_resume */
        return NGX_DONE;

    case NGX_ERROR:
        ctx->current = NULL;
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return NGX_DONE;

    default:
        return NGX_DECLINED;
    }
}


/* a slot_busy wait of the lane is over: the same connection again */

static void
ngx_omniroute_lane_retry(ngx_event_t *ev)
{
    ngx_connection_t     *c;
    ngx_http_request_t   *r;
    ngx_omniroute_ctx_t  *ctx;

    r = ev->data;
    c = r->connection;
    ctx = ngx_http_get_module_ctx(r, ngx_http_omniroute_module);

    ngx_omniroute_lane_resume(r, ctx, 0);

    ngx_http_run_posted_requests(c);
}


/*
 * On with the attempts after the lane's decision: ngx_omniroute_lane_next()
 * first; when
 * it cannot be tried (excluded, busy), the other candidates, else the
 * answer the attempts have.  replay: the held attempt (ctx->current) is
 * looked at again, after a session-limit reset that did not reset.
 */

static void
ngx_omniroute_lane_resume(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx,
    ngx_uint_t replay)
{
    ngx_int_t  rc;

    r->write_event_handler = ngx_omniroute_parent_handler;

    if (replay) {
        ngx_omniroute_parent_handler(r);
        return;
    }

    rc = ngx_omniroute_start_attempt(r, ctx);

    if (rc == NGX_OK) {
        return;
    }

    if (rc == NGX_ERROR) {
        ctx->current = NULL;
        ngx_http_finalize_request(r, r->header_sent
                                     ? NGX_ERROR
                                     : NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }

    ngx_omniroute_nothing_now(r, ctx);
}
