
/*
 * Copyright (C) ngx_omniroute authors
 *
 * Dispatch: admission of a candidate (the breaker may have opened, or
 * gone HALF_OPEN with its single probe taken, since planning; a fallback
 * re-reads the connection's cooldown), the in-flight slots of its
 * connection and model (R-CONC-1: max_concurrent and model_caps across
 * workers), the FIFO wait queue of a request whose every eligible
 * connection is at its cap (R-CONC-1/2), and the cooldown-aware wait of a
 * combo whose every target is cooling down (R-CONC-3).
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute_ctx.h"
#include "or_plan.h"


/* past the end of a cooldown, so that it has expired when read again */
#define NGX_OMNIROUTE_WAIT_SLACK    10      /* ms */

#define NGX_OMNIROUTE_QUEUE_ENTER   0
#define NGX_OMNIROUTE_QUEUE_RANK    1
#define NGX_OMNIROUTE_QUEUE_LEAVE   2


typedef struct {
    ngx_omniroute_settings_t     *settings;
    or_msec_t                     now;
    or_cb_admit_e                 admit;
    or_cb_state_e                 stored;       /* before the admission */
    or_cb_state_e                 state;        /* written */
} ngx_omniroute_admit_t;


/*
 * A request's waits (ctx->wait), made by the first: in the queue for a
 * slot, out a cooldown, the lane's slot_busy wait.
 */
struct ngx_omniroute_wait_req_s {
    ngx_event_t                   event;        /* its timer */
    or_msec_t                     until;        /* of the queue wait */
    ngx_uint_t                    queued;       /* counted in sh->queued */
    ngx_str_t                     queue_key;    /* FIFO of this model */
    uint64_t                      queue_epoch;  /* 0: no ticket */
    uint64_t                      queue_ticket;
    or_msec_t                     start;        /* of a cooldown wait */
    or_msec_t                     waited;       /* in cooldown waits */
    or_msec_t                     due;          /* the wait's timer */
    ngx_event_handler_pt          handler;      /* run when it is due */
    unsigned                      waiting:1;    /* out a cooldown */
    unsigned                      keepalive:1;  /* the timer is set for a
                                                   keep-alive */
    u_char                        key[NGX_OMNIROUTE_KEY_MAX];
};


typedef struct {
    ngx_uint_t                    op;           /* NGX_OMNIROUTE_QUEUE_* */
    uint64_t                      epoch;        /* in: ours; out: queue's */
    uint64_t                      ticket;
    uint64_t                      rank;
    uint64_t                      length;
    or_msec_t                     now;
    or_msec_t                     max_age;      /* of a head, see expire */
    int                           rc;           /* of or_queue_enter() */
    ngx_uint_t                    seen;         /* the record exists */
} ngx_omniroute_queue_op_t;


static ngx_uint_t ngx_omniroute_admit_update(void *value, void *arg,
    or_msec_t *expires);
static ngx_int_t ngx_omniroute_slot_take(ngx_atomic_t *c, ngx_uint_t cap);
static void ngx_omniroute_slot_cleanup(void *data);
static void ngx_omniroute_waits_cleanup(void *data);
static ngx_int_t ngx_omniroute_waits_start(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, ngx_event_handler_pt handler);
static void ngx_omniroute_wait_arm(ngx_omniroute_ctx_t *ctx, or_msec_t ms);
static void ngx_omniroute_wait_fire(ngx_event_t *ev);
static ngx_int_t ngx_omniroute_queue_key(ngx_omniroute_ctx_t *ctx,
    ngx_str_t *key, u_char *buf);
static uint64_t ngx_omniroute_queue_free(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx);
static ngx_uint_t ngx_omniroute_queue_update(void *value, void *arg,
    or_msec_t *expires);


/*
 * NGX_OK: the candidate may be dispatched; NGX_DECLINED (with *reason):
 * not now.  Reads only what the decision needs (or_plan_admit_reads()).
 */

ngx_int_t
ngx_omniroute_admit(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_candidate_t *cand, const char **reason)
{
    unsigned                    reads;
    or_admit_e                  verdict;
    or_breaker_t                cb;
    or_plan_view_t              view;
    or_conn_state_t             cs;
    ngx_omniroute_admit_t       adm;
    ngx_omniroute_main_conf_t  *omcf;

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);

    if (omcf->shm_zone == NULL) {
        return NGX_OK;
    }

    reads = or_plan_admit_reads(ctx->attempts.nelts == 0,
                                cand->has_breaker);

    ngx_memzero(&view, sizeof(or_plan_view_t));
    view.breaker_conf = &cand->settings->breaker;

    if ((reads & OR_PLAN_READ_CONN)
        && ngx_omniroute_store_read_cached(&omcf->store,
                                           NGX_OMNIROUTE_T_CONN,
                                           &cand->conn->id,
                                           cand->conn->state_hash,
                                           cand->conn->state_cache, &cs,
                                           sizeof(or_conn_state_t))
           == NGX_OK)
    {
        view.conn = &cs;
    }

    if ((reads & OR_PLAN_READ_BREAKER)
        && ngx_omniroute_store_read(&omcf->store, NGX_OMNIROUTE_T_BREAKER,
                                    &cand->provider->name, &cb,
                                    sizeof(or_breaker_t))
           == NGX_OK)
    {
        view.breaker = &cb;
    }

    adm.now = ngx_omniroute_now();

    verdict = or_plan_admit(&view, ctx->attempts.nelts == 0, adm.now);

    if (verdict == OR_ADMIT_PROBE) {
        /* HALF_OPEN: take the single probe under the zone lock */

        adm.settings = cand->settings;
        adm.admit = OR_CB_ALLOW;
        adm.stored = OR_CB_CLOSED;
        adm.state = OR_CB_CLOSED;

        (void) ngx_omniroute_store_update(&omcf->store,
                                          NGX_OMNIROUTE_T_BREAKER,
                                          &cand->provider->name,
                                          sizeof(or_breaker_t),
                                          ngx_omniroute_admit_update, &adm,
                                          0);

        ngx_omniroute_breaker_changed(r, cand->provider, adm.stored,
                                      adm.state);

        verdict = (adm.admit == OR_CB_DENY) ? OR_ADMIT_DENY_CIRCUIT
                                            : OR_ADMIT_ALLOW;
    }

    switch (verdict) {

    case OR_ADMIT_DENY_COOLDOWN:
        *reason = "provider_cooldown";
        break;

    case OR_ADMIT_DENY_CIRCUIT:
        *reason = "circuit_open";
        break;

    default:
        return NGX_OK;
    }

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "omniroute dispatch: \"%V\" not admitted: %s",
                   &cand->conn->id, *reason);

    return NGX_DECLINED;
}


static ngx_uint_t
ngx_omniroute_admit_update(void *value, void *arg, or_msec_t *expires)
{
    ngx_omniroute_admit_t *adm = arg;

    or_msec_t     retry;
    or_breaker_t  before;

    before = *(or_breaker_t *) value;

    adm->admit = or_breaker_admit(&adm->settings->breaker, value, adm->now,
                                  &retry);

    /* OPEN -> HALF_OPEN by time is written here first: counted after */
    adm->stored = (or_cb_state_e) before.state;
    adm->state = (or_cb_state_e) ((or_breaker_t *) value)->state;

    return ngx_memcmp(&before, value, sizeof(or_breaker_t)) == 0
           ? NGX_OMNIROUTE_UNCHANGED : NGX_OMNIROUTE_CHANGED;
}


/*
 * In-flight attempts per connection, for the strategies that read them
 * and for max_concurrent, and per connection and model for the model's
 * cap (R-CONC-1): a slot is taken at dispatch (compare-and-set below the
 * cap; both caps together, or neither) and held until the attempt is over
 * or the request goes away, whichever comes first.  NGX_OK with
 * counters[0] (connection) and counters[1] (model; NULL: not counted), or
 * NGX_BUSY: a cap is reached.  A request that failed open (its queue wait
 * is over, request_queue.fail_open) is counted past the caps.
 */

ngx_int_t
ngx_omniroute_acquire_slot(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_candidate_t *cand, ngx_atomic_t **counters)
{
    ngx_atomic_t               *c, *m;
    ngx_omniroute_main_conf_t  *omcf;

    counters[0] = NULL;
    counters[1] = NULL;

    /* R-PACE-2: a paused connection has no free slot (not even failing
     * open: it would only answer 429 again) */

    if (ngx_omniroute_pace_busy(r, ctx, cand) == NGX_BUSY) {
        return NGX_BUSY;
    }

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);

    if (!omcf->track_inflight || omcf->shm_zone == NULL) {
        return NGX_OK;
    }

    c = ngx_omniroute_inflight(&omcf->store, &cand->conn->id);
    if (c == NULL) {
        return NGX_OK;
    }

    if (ngx_omniroute_slot_take(c, ctx->fail_open
                                   ? 0 : cand->conn->max_concurrent)
        != NGX_OK)
    {

        ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                       "omniroute dispatch: \"%V\" at max_concurrent %ui",
                       &cand->conn->id, cand->conn->max_concurrent);
        return NGX_BUSY;
    }

    if (cand->route->model_cap) {
        m = ngx_omniroute_inflight(&omcf->store, &cand->route->cap_key);

        if (m && ngx_omniroute_slot_take(m, ctx->fail_open
                                            ? 0 : cand->route->model_cap)
                 != NGX_OK)
        {
            (void) ngx_atomic_fetch_add(c, -1);

            ngx_log_debug3(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                           "omniroute dispatch: \"%V\" at the cap %ui of "
                           "model \"%V\"", &cand->conn->id,
                           cand->route->model_cap, &cand->target->model);
            return NGX_BUSY;
        }

        counters[1] = m;
    }

    counters[0] = c;

    return NGX_OK;
}


/* one more in flight on counter c, below cap (0: no cap) */

static ngx_int_t
ngx_omniroute_slot_take(ngx_atomic_t *c, ngx_uint_t cap)
{
    ngx_atomic_uint_t  n;

    if (cap == 0) {
        (void) ngx_atomic_fetch_add(c, 1);
        return NGX_OK;
    }

    for ( ;; ) {
        n = *c;

        if (n >= cap) {
            return NGX_BUSY;
        }

        if (ngx_atomic_cmp_set(c, n, n + 1)) {
            return NGX_OK;
        }
    }
}


/* the slots are released when the attempt ends, or with the request */

ngx_int_t
ngx_omniroute_hold_slot(ngx_http_request_t *r, ngx_omniroute_attempt_t *a,
    ngx_atomic_t **counters)
{
    ngx_pool_cleanup_t  *cln;

    if (counters[0] == NULL) {
        return NGX_OK;
    }

    a->inflight = counters[0];
    a->inflight_model = counters[1];

    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (cln == NULL) {
        ngx_omniroute_release_slot(a);
        return NGX_ERROR;
    }

    cln->handler = ngx_omniroute_slot_cleanup;
    cln->data = a;

    return NGX_OK;
}


void
ngx_omniroute_release_slot(ngx_omniroute_attempt_t *a)
{
    if (a->inflight) {
        (void) ngx_atomic_fetch_add(a->inflight, -1);
        a->inflight = NULL;
    }

    if (a->inflight_model) {
        (void) ngx_atomic_fetch_add(a->inflight_model, -1);
        a->inflight_model = NULL;
    }
}


static void
ngx_omniroute_slot_cleanup(void *data)
{
    ngx_omniroute_release_slot(data);
}


/*
 * The request's timers (a wait, the attempt's time limit) and its place
 * in the queue go with the request, whatever ends it.
 */

ngx_int_t
ngx_omniroute_waits_init(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx)
{
    ngx_pool_cleanup_t  *cln;

    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (cln == NULL) {
        return NGX_ERROR;
    }

    cln->handler = ngx_omniroute_waits_cleanup;
    cln->data = ctx;

    ctx->exec.data = r;
    ctx->exec.log = r->connection->log;

    return NGX_OK;
}


static void
ngx_omniroute_waits_cleanup(void *data)
{
    ngx_omniroute_ctx_t *ctx = data;

    ngx_omniroute_queue_leave(ctx);

    if (ctx->wait && ctx->wait->event.timer_set) {
        ngx_del_timer(&ctx->wait->event);
    }

    if (ctx->exec.timer_set) {
        ngx_del_timer(&ctx->exec);
    }
}


/* a wait starts: the request's wait state (the first), its timer's handler */

static ngx_int_t
ngx_omniroute_waits_start(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx,
    ngx_event_handler_pt handler)
{
    if (ctx->wait == NULL) {
        ctx->wait = ngx_pcalloc(r->pool, sizeof(ngx_omniroute_wait_req_t));
        if (ctx->wait == NULL) {
            return NGX_ERROR;
        }

        ctx->wait->event.data = r;
        ctx->wait->event.log = r->connection->log;
        ctx->wait->event.handler = ngx_omniroute_wait_fire;
    }

    ctx->wait->handler = handler;

    return NGX_OK;
}


/*
 * The wait's timer, ms from now: sooner when a streaming client's
 * keep-alive is due first (issue 25: no wait is silent; docs/streams.md).
 */

static void
ngx_omniroute_wait_arm(ngx_omniroute_ctx_t *ctx, or_msec_t ms)
{
    or_msec_t                  now, ka;
    ngx_omniroute_wait_req_t  *w;

    w = ctx->wait;
    now = ngx_omniroute_now();
    ms = ngx_max(ms, 1);

    w->due = now + ms;
    w->keepalive = 0;

    ka = ngx_omniroute_stream_keepalive_due(ctx);

    if (ka != OR_MSEC_NONE && ka < w->due) {
        w->keepalive = 1;
        ms = ngx_max(ka - now, 1);
    }

    ngx_add_timer(&w->event, (ngx_msec_t) ms);
}


/* the wait's timer: a keep-alive, else the waiter's handler */

static void
ngx_omniroute_wait_fire(ngx_event_t *ev)
{
    or_msec_t                  now;
    ngx_connection_t          *c;
    ngx_http_request_t        *r;
    ngx_omniroute_ctx_t       *ctx;
    ngx_omniroute_wait_req_t  *w;

    r = ev->data;
    c = r->connection;
    ctx = ngx_http_get_module_ctx(r, ngx_http_omniroute_module);
    w = ctx->wait;

    if (!w->keepalive) {
        w->handler(ev);
        return;
    }

    if (ngx_omniroute_stream_wait_keepalive(ctx) == NGX_ERROR) {
        ngx_omniroute_queue_leave(ctx);
        ngx_http_finalize_request(r, NGX_ERROR);
        ngx_http_run_posted_requests(c);
        return;
    }

    now = ngx_omniroute_now();

    ngx_omniroute_wait_arm(ctx, w->due > now ? w->due - now : 1);

    ngx_http_run_posted_requests(c);
}


/* the lane's slot_busy wait: handler after ms */

ngx_int_t
ngx_omniroute_wait_timer(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx,
    ngx_event_handler_pt handler, or_msec_t ms)
{
    if (ngx_omniroute_waits_start(r, ctx, handler) != NGX_OK) {
        return NGX_ERROR;
    }

    r->read_event_handler = ngx_http_test_reading;

    ngx_omniroute_wait_arm(ctx, ms);

    return NGX_OK;
}


/*
 * The FIFO queue of a model (R-CONC-1): an or_queue_t in the zone
 * (strategy table, node-local, key " q:<model>": no combo name starts
 * with a space).  Requests take a ticket when they queue and are served in
 * ticket order by all workers: a waiter tries to take a slot only while
 * fewer tickets ahead of it wait than slots are free (the head always
 * may), so the slot that frees goes to the oldest waiter; waiters far from
 * the head poll less often.  A request that finds others of its model
 * waiting queues behind them instead of taking a slot that freed for the
 * head.
 */

static ngx_int_t
ngx_omniroute_queue_key(ngx_omniroute_ctx_t *ctx, ngx_str_t *key,
    u_char *buf)
{
    u_char  *p;

    if (ctx->model.len + sizeof(" q:") - 1 > NGX_OMNIROUTE_KEY_MAX) {
        return NGX_DECLINED;
    }

    p = ngx_cpymem(buf, " q:", sizeof(" q:") - 1);
    p = ngx_cpymem(p, ctx->model.data, ctx->model.len);

    key->data = buf;
    key->len = p - buf;

    return NGX_OK;
}


/* others of this model wait: a newcomer queues behind them */

ngx_uint_t
ngx_omniroute_queue_ahead(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx)
{
    u_char                      buf[NGX_OMNIROUTE_KEY_MAX];
    ngx_str_t                   key;
    or_queue_t                  q;
    ngx_omniroute_main_conf_t  *omcf;

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);

    /* a paused connection (R-PACE-2) queues requests as a cap does */

    if (omcf->shm_zone == NULL
        || (!ctx->plan.capped
            && ngx_omniroute_store_empty(&omcf->store, NGX_OMNIROUTE_T_PACE))
        || ngx_omniroute_store_empty(&omcf->store, NGX_OMNIROUTE_T_STRATEGY))
    {
        return 0;
    }

    if (ngx_omniroute_queue_key(ctx, &key, buf) != NGX_OK
        || ngx_omniroute_store_read(&omcf->store, NGX_OMNIROUTE_T_STRATEGY,
                                    &key, &q, sizeof(or_queue_t))
           != NGX_OK)
    {
        return 0;
    }

    if (or_queue_length(&q) == 0) {
        return 0;
    }

    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "omniroute dispatch: %uL of this model already wait",
                   or_queue_length(&q));

    return 1;
}


/*
 * R-CONC-1/2: every eligible connection is at its cap, or others wait
 * before this request: it waits for a slot (handler, on the wait timer) at
 * most the queue wait budget (and what is left of the
 * request budget); a full queue answers 429 at once.  Returns NGX_DONE
 * when queued, NGX_ABORT when not and the client's stream started already
 * (the caller ends it in-band, the outcome is counted), else what to
 * finalize the request with.
 */

ngx_int_t
ngx_omniroute_queue_enter(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx,
    ngx_event_handler_pt handler)
{
    or_msec_t                   now, left;
    ngx_int_t                   rc;
    ngx_atomic_uint_t           n;
    ngx_omniroute_wait_req_t   *w;
    ngx_omniroute_queue_op_t    op;
    ngx_omniroute_main_conf_t  *omcf;

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);

    if (ngx_omniroute_waits_start(r, ctx, handler) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    w = ctx->wait;

    n = ngx_atomic_fetch_add(&omcf->store.sh->queued, 1);

    if (ctx->global.max_queue_depth > 0
        && n >= (ngx_atomic_uint_t) ctx->global.max_queue_depth)
    {
        (void) ngx_atomic_fetch_add(&omcf->store.sh->queued, -1);
        ngx_omniroute_count(r, NGX_OMNIROUTE_OUT_QUEUE_FULL);

        ngx_log_debug0(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                       "omniroute dispatch: queue full");

        if (ctx->early && ctx->attempts.nelts) {
            return NGX_ABORT;
        }

        /* nothing tells when a place frees: a short retry (issue 25) */
        (void) ngx_omniroute_set_retry_after(r, 1000);

        return ngx_omniroute_send_error(r, NGX_HTTP_TOO_MANY_REQUESTS,
                                        "rate_limit_error",
                                        "RATE_LIMIT_QUEUE_FULL",
                                        "the request queue is full");
    }

    w->queued = 1;

    now = ngx_omniroute_now();

    w->until = now + ctx->global.queue_max_wait_ms;

    left = ngx_omniroute_budget_left(ctx);

    if (left != OR_MSEC_NONE && now + left < w->until) {
        w->until = now + left;
    }

    /* R-PACE-4: paused past the caller's queue time: answered now */

    rc = ngx_omniroute_pace_timeout(r, ctx, w->until);

    if (rc != NGX_DECLINED) {
        w->queued = 0;
        (void) ngx_atomic_fetch_add(&omcf->store.sh->queued, -1);
        return rc;
    }

    /* a ticket: its place in the model's queue */

    if (ngx_omniroute_queue_key(ctx, &w->queue_key, w->key) == NGX_OK) {
        ngx_memzero(&op, sizeof(ngx_omniroute_queue_op_t));
        op.op = NGX_OMNIROUTE_QUEUE_ENTER;
        op.epoch = ((uint64_t) now << 16) ^ ((uint64_t) ngx_pid << 40)
                   ^ (uint64_t) ngx_random() ^ 1;
        op.now = now;
        op.max_age = ctx->global.queue_max_wait_ms + 1000;
        op.rc = -1;

        (void) ngx_omniroute_store_update(&omcf->store,
                                          NGX_OMNIROUTE_T_STRATEGY,
                                          &w->queue_key,
                                          sizeof(or_queue_t),
                                          ngx_omniroute_queue_update, &op,
                                          0);

        if (op.seen && op.rc == 0) {
            w->queue_epoch = op.epoch;
            w->queue_ticket = op.ticket;
        }
    }

    /* a client that goes away while waiting ends the request */
    r->read_event_handler = ngx_http_test_reading;

    ngx_omniroute_wait_arm(ctx, OR_QUEUE_POLL_MIN_MS);

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "omniroute dispatch: queued for a concurrency slot, "
                   "ticket %uL (%s)", w->queue_ticket,
                   w->queue_epoch ? "in order" : "no ticket left");

    return NGX_DONE;
}


/*
 * The queue's timer: NGX_OK when this waiter's turn may have come (try to
 * take a slot), NGX_AGAIN when not yet (the timer is set again, sooner
 * the closer to the head), NGX_DECLINED when the wait budget is over.
 */

ngx_int_t
ngx_omniroute_queue_poll(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx)
{
    or_msec_t                   now, ms;
    uint64_t                    free;
    ngx_omniroute_wait_req_t   *w;
    ngx_omniroute_queue_op_t    op;
    ngx_omniroute_main_conf_t  *omcf;

    w = ctx->wait;
    now = ngx_omniroute_now();

    if (now >= w->until
        || ngx_omniroute_pace_until(r, ctx) > w->until)
    {
        /* out of time, or every route paused past it (R-PACE-4) */
        if (now < w->until) {
            ngx_omniroute_pace_count(r, NGX_OMNIROUTE_PACE_TIMEOUT);
        }

        return NGX_DECLINED;
    }

    if (w->queue_key.len == 0) {
        return NGX_OK;
    }

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);

    ngx_memzero(&op, sizeof(ngx_omniroute_queue_op_t));
    op.op = NGX_OMNIROUTE_QUEUE_RANK;
    op.epoch = w->queue_epoch;
    op.ticket = w->queue_ticket;
    op.now = now;
    op.max_age = ctx->global.queue_max_wait_ms + 1000;

    (void) ngx_omniroute_store_touch(&omcf->store, NGX_OMNIROUTE_T_STRATEGY,
                                     &w->queue_key, sizeof(or_queue_t),
                                     ngx_omniroute_queue_update, &op);

    if (!op.seen) {
        /* no queue (any more): nobody waits before this one */
        op.epoch = 0;
        op.rank = 0;
    }

    if (w->queue_epoch && op.epoch != w->queue_epoch) {
        /* the queue was dropped (evicted): a new ticket, at its end */

        op.op = NGX_OMNIROUTE_QUEUE_ENTER;
        op.epoch = w->queue_epoch;
        op.rc = -1;
        op.seen = 0;
        op.length = 0;

        (void) ngx_omniroute_store_update(&omcf->store,
                                          NGX_OMNIROUTE_T_STRATEGY,
                                          &w->queue_key, sizeof(or_queue_t),
                                          ngx_omniroute_queue_update, &op,
                                          0);

        w->queue_epoch = (op.seen && op.rc == 0) ? op.epoch : 0;
        w->queue_ticket = op.ticket;
        op.rank = (op.rc == 0 && op.length) ? op.length - 1 : op.length;
    }

    free = (op.rank == 0) ? 0 : ngx_omniroute_queue_free(r, ctx);

    ms = or_queue_poll_ms(op.rank, free);

    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "omniroute dispatch: queue rank %uL, %uL free, next in "
                   "%L ms", op.rank, free, (int64_t) ms);

    if (ms == 0) {
        return NGX_OK;
    }

    ngx_omniroute_wait_arm(ctx, ngx_min(ms, w->until - now));

    return NGX_AGAIN;
}


/*
 * Free slots on the model's routes, as far as the caps count them (a
 * route without a cap counts none: the head tries anyway).
 */

static uint64_t
ngx_omniroute_queue_free(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx)
{
    uint64_t                    free, f, used;
    ngx_uint_t                  i;
    ngx_atomic_t               *c;
    ngx_omniroute_route_t      *rt;
    ngx_omniroute_main_conf_t  *omcf;

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);

    free = 0;

    for (i = 0; i < ctx->nroutes; i++) {
        rt = &ctx->routes[i];

        if (rt->conn->max_concurrent == 0 && rt->model_cap == 0) {
            continue;
        }

        f = NGX_MAX_UINT32_VALUE;

        if (rt->conn->max_concurrent) {
            c = ngx_omniroute_inflight(&omcf->store, &rt->conn->id);
            used = c ? *c : 0;
            f = (used < rt->conn->max_concurrent)
                ? rt->conn->max_concurrent - used : 0;
        }

        if (rt->model_cap) {
            c = ngx_omniroute_inflight(&omcf->store, &rt->cap_key);
            used = c ? *c : 0;
            used = (used < rt->model_cap) ? rt->model_cap - used : 0;
            f = ngx_min(f, used);
        }

        free += f;
    }

    return free;
}


/* a try found no slot after all: the next one soon, if the budget allows */

ngx_int_t
ngx_omniroute_queue_wait(ngx_omniroute_ctx_t *ctx)
{
    or_msec_t                  now, ms;
    ngx_omniroute_wait_req_t  *w;

    w = ctx->wait;
    now = ngx_omniroute_now();

    if (now >= w->until) {
        return NGX_DECLINED;
    }

    /* the head of a paused model's queue tries again at the pause's end */
    ms = ngx_omniroute_pace_poll(ctx->request, ctx, OR_QUEUE_POLL_MIN_MS);

    ngx_omniroute_wait_arm(ctx, ngx_min(ms, w->until - now));

    return NGX_OK;
}


/* out of the queue: the count, the ticket, the timer (also at request end) */

void
ngx_omniroute_queue_leave(void *data)
{
    ngx_omniroute_ctx_t *ctx = data;

    ngx_omniroute_wait_req_t   *w;
    ngx_omniroute_queue_op_t    op;
    ngx_omniroute_main_conf_t  *omcf;

    w = ctx->wait;

    if (w == NULL || !w->queued) {
        return;
    }

    w->queued = 0;

    if (w->event.timer_set) {
        ngx_del_timer(&w->event);
    }

    omcf = ngx_http_get_module_main_conf(ctx->request,
                                         ngx_http_omniroute_module);

    (void) ngx_atomic_fetch_add(&omcf->store.sh->queued, -1);

    if (w->queue_epoch == 0 || w->queue_key.len == 0) {
        return;
    }

    ngx_memzero(&op, sizeof(ngx_omniroute_queue_op_t));
    op.op = NGX_OMNIROUTE_QUEUE_LEAVE;
    op.epoch = w->queue_epoch;
    op.ticket = w->queue_ticket;
    op.now = ngx_omniroute_now();

    (void) ngx_omniroute_store_touch(&omcf->store, NGX_OMNIROUTE_T_STRATEGY,
                                     &w->queue_key, sizeof(or_queue_t),
                                     ngx_omniroute_queue_update, &op);

    w->queue_epoch = 0;
}


static ngx_uint_t
ngx_omniroute_queue_update(void *value, void *arg, or_msec_t *expires)
{
    ngx_omniroute_queue_op_t *op = arg;

    unsigned     expired;
    or_queue_t  *q = value;

    op->seen = 1;

    switch (op->op) {

    case NGX_OMNIROUTE_QUEUE_ENTER:
        op->rc = or_queue_enter(q, op->epoch, op->now, &op->ticket);
        op->epoch = q->epoch;
        op->length = or_queue_length(q);

        if (op->rc != 0) {
            return NGX_OMNIROUTE_UNCHANGED;
        }

        *expires = op->now + 2 * op->max_age;
        return NGX_OMNIROUTE_CHANGED;

    case NGX_OMNIROUTE_QUEUE_RANK:
        expired = or_queue_expire(q, op->now, op->max_age);

        op->rank = (op->epoch == 0) ? or_queue_length(q)
                                    : or_queue_rank(q, op->epoch, op->ticket);
        op->length = or_queue_length(q);
        op->epoch = q->epoch;

        if (expired == 0) {
            return NGX_OMNIROUTE_UNCHANGED;
        }

        if (or_queue_length(q) == 0) {
            return NGX_OMNIROUTE_DELETE;
        }

        *expires = op->now + 2 * op->max_age;
        return NGX_OMNIROUTE_CHANGED;

    default: /* NGX_OMNIROUTE_QUEUE_LEAVE */
        if (or_queue_leave(q, op->epoch, op->ticket, op->now)) {
            return NGX_OMNIROUTE_DELETE;
        }

        return NGX_OMNIROUTE_CHANGED;
    }
}


/*
 * R-CONC-3, the cooldown-aware wait of a combo: every candidate is
 * excluded (before any attempt), or every attempt failed with a transient
 * 429 and planning again finds nothing eligible.  or_wait_decide() says:
 * wait for the earliest end of a transient exclusion (OR_WAIT_WAIT, *ms),
 * answer 429 with it (OR_WAIT_REFUSE: waiting is off or out of bounds), or
 * answer as before (OR_WAIT_NONE: nothing transient, or not a combo).
 */

or_wait_e
ngx_omniroute_cooldown_decide(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx,
    or_msec_t *ms)
{
    or_wait_e                  rc;
    ngx_uint_t                 i;
    const char                *why;
    or_wait_item_t            *items;
    or_wait_limits_t           l;
    ngx_omniroute_excluded_t  *ex;

    *ms = 0;

    if (ctx->entry == NULL || !ctx->entry->combo
        || ctx->excluded.nelts == 0)
    {
        return OR_WAIT_NONE;
    }

    items = ngx_palloc(r->pool, ctx->excluded.nelts * sizeof(or_wait_item_t));
    if (items == NULL) {
        return OR_WAIT_NONE;
    }

    ex = ctx->excluded.elts;

    for (i = 0; i < ctx->excluded.nelts; i++) {
        items[i].kind = ex[i].kind;
        items[i].retry_ms = ex[i].retry_after;
    }

    l.enabled = ctx->global.combo_wait && ctx->entry->wait;
    l.max_wait_ms = ctx->global.combo_wait_max_ms;
    l.budget_left_ms = ngx_max(ctx->global.combo_wait_budget_ms
                               - (ctx->wait ? ctx->wait->waited : 0), 0);
    l.request_left_ms = ngx_omniroute_budget_left(ctx);
    l.attempts = ctx->attempts.nelts - ngx_omniroute_lane_retries(ctx);
    l.max_attempts = (unsigned) ctx->lcf->max_attempts;

    rc = or_wait_decide(&l, items, ctx->excluded.nelts, ms, &why);

    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "omniroute: every target excluded: %s %L ms%s",
                   rc == OR_WAIT_WAIT ? "wait"
                   : rc == OR_WAIT_REFUSE ? "429, retry after" : "as before",
                   (int64_t) *ms, why ? why : "");

    return rc;
}


/*
 * Waits ms (and a little, so that the state has expired when it is read
 * again), then handler; the client going away ends the wait and the
 * request.
 */

ngx_int_t
ngx_omniroute_cooldown_wait(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx,
    ngx_event_handler_pt handler, or_msec_t ms)
{
    if (ngx_omniroute_waits_start(r, ctx, handler) != NGX_OK) {
        return NGX_ERROR;
    }

    ctx->wait->waiting = 1;
    ctx->wait->start = ngx_omniroute_now();

    r->read_event_handler = ngx_http_test_reading;

    ngx_omniroute_wait_arm(ctx, ms + NGX_OMNIROUTE_WAIT_SLACK);

    ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                  "omniroute: every target of combo \"%V\" is cooling "
                  "down, waiting %L ms", &ctx->entry->name, (int64_t) ms);

    return NGX_OK;
}


/* the wait is over: it counts in the waits' budget */

void
ngx_omniroute_cooldown_over(ngx_omniroute_ctx_t *ctx)
{
    if (ctx->wait == NULL || !ctx->wait->waiting) {
        return;
    }

    ctx->wait->waiting = 0;
    ctx->wait->waited += ngx_omniroute_now() - ctx->wait->start;
}
