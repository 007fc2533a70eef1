
/*
 * Copyright (C) ngx_omniroute authors
 *
 * Dispatch: admission of a candidate (the breaker may have opened, or
 * gone HALF_OPEN with its single probe taken, since planning; a fallback
 * re-reads the connection's cooldown), the in-flight slot of its
 * connection (R-CONC-1: max_concurrent across workers), and the wait queue
 * of a request whose every eligible connection is at its cap (R-CONC-2).
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute_request.h"
#include "or_plan.h"


#define NGX_OMNIROUTE_QUEUE_POLL    25      /* ms between slot checks */


typedef struct {
    ngx_omniroute_settings_t     *settings;
    or_msec_t                     now;
    or_cb_admit_e                 admit;
} ngx_omniroute_admit_t;


static ngx_uint_t ngx_omniroute_admit_update(void *value, void *arg,
    or_msec_t *expires);
static void ngx_omniroute_slot_cleanup(void *data);


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
        && ngx_omniroute_store_read(&omcf->store, NGX_OMNIROUTE_T_CONN,
                                    &cand->conn->id, &cs,
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

        (void) ngx_omniroute_store_update(&omcf->store,
                                          NGX_OMNIROUTE_T_BREAKER,
                                          &cand->provider->name,
                                          sizeof(or_breaker_t),
                                          ngx_omniroute_admit_update, &adm,
                                          0);

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

    return ngx_memcmp(&before, value, sizeof(or_breaker_t)) == 0
           ? NGX_OMNIROUTE_UNCHANGED : NGX_OMNIROUTE_CHANGED;
}


/*
 * In-flight attempts per connection, for the strategies that read them
 * and for max_concurrent: a slot is taken at dispatch (compare-and-set
 * below the cap) and held until the attempt is over or the request goes
 * away, whichever comes first.  NGX_OK with *counter (NULL: not counted),
 * or NGX_BUSY: the connection is at its cap.
 */

ngx_int_t
ngx_omniroute_acquire_slot(ngx_http_request_t *r,
    ngx_omniroute_candidate_t *cand, ngx_atomic_t **counter)
{
    ngx_atomic_t               *c;
    ngx_atomic_uint_t           n;
    ngx_omniroute_main_conf_t  *omcf;

    *counter = NULL;

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);

    if (!omcf->track_inflight || omcf->shm_zone == NULL) {
        return NGX_OK;
    }

    c = ngx_omniroute_inflight(&omcf->store, &cand->conn->id);
    if (c == NULL) {
        return NGX_OK;
    }

    if (cand->conn->max_concurrent == 0) {
        (void) ngx_atomic_fetch_add(c, 1);
        *counter = c;
        return NGX_OK;
    }

    for ( ;; ) {
        n = *c;

        if (n >= cand->conn->max_concurrent) {
            ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                           "omniroute dispatch: \"%V\" at max_concurrent "
                           "%ui", &cand->conn->id,
                           cand->conn->max_concurrent);
            return NGX_BUSY;
        }

        if (ngx_atomic_cmp_set(c, n, n + 1)) {
            *counter = c;
            return NGX_OK;
        }
    }
}


/* the slot is released when the attempt ends, or with the request */

ngx_int_t
ngx_omniroute_hold_slot(ngx_http_request_t *r, ngx_omniroute_attempt_t *a,
    ngx_atomic_t *counter)
{
    ngx_pool_cleanup_t  *cln;

    if (counter == NULL) {
        return NGX_OK;
    }

    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (cln == NULL) {
        (void) ngx_atomic_fetch_add(counter, -1);
        return NGX_ERROR;
    }

    cln->handler = ngx_omniroute_slot_cleanup;
    cln->data = a;

    a->inflight = counter;

    return NGX_OK;
}


void
ngx_omniroute_release_slot(ngx_omniroute_attempt_t *a)
{
    if (a->inflight) {
        (void) ngx_atomic_fetch_add(a->inflight, -1);
        a->inflight = NULL;
    }
}


static void
ngx_omniroute_slot_cleanup(void *data)
{
    ngx_omniroute_release_slot(data);
}


/*
 * R-CONC-1/2: every eligible connection is at its max_concurrent: the
 * request waits for a slot (ctx->wait, whose handler the caller set, is
 * run every NGX_OMNIROUTE_QUEUE_POLL ms) at most the queue wait budget; a
 * full queue answers 429 at once.  Returns NGX_DONE when queued, else what
 * to finalize the request with.
 */

ngx_int_t
ngx_omniroute_queue_enter(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx)
{
    ngx_atomic_uint_t                 n;
    ngx_pool_cleanup_t               *cln;
    ngx_omniroute_main_conf_t        *omcf;
    ngx_omniroute_global_settings_t   g;

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);
    ngx_omniroute_settings_global(omcf, &g);

    n = ngx_atomic_fetch_add(&omcf->store.sh->queued, 1);

    if (g.max_queue_depth > 0 && n >= (ngx_atomic_uint_t) g.max_queue_depth)
    {
        (void) ngx_atomic_fetch_add(&omcf->store.sh->queued, -1);
        ngx_omniroute_count(r, NGX_OMNIROUTE_OUT_QUEUE_FULL);

        ngx_log_debug0(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                       "omniroute dispatch: queue full");

        return ngx_omniroute_send_error(r, NGX_HTTP_TOO_MANY_REQUESTS,
                                        "rate_limit_error",
                                        "RATE_LIMIT_QUEUE_FULL",
                                        "the request queue is full");
    }

    ctx->queued = 1;

    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (cln == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    cln->handler = ngx_omniroute_queue_leave;
    cln->data = ctx;

    ctx->wait_until = ngx_omniroute_now() + g.queue_max_wait_ms;

    ctx->wait.data = r;
    ctx->wait.log = r->connection->log;

    /* a client that goes away while waiting ends the request */
    r->read_event_handler = ngx_http_test_reading;

    ngx_add_timer(&ctx->wait, NGX_OMNIROUTE_QUEUE_POLL);

    ngx_log_debug0(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "omniroute dispatch: queued for a concurrency slot");

    return NGX_DONE;
}


/* still queued: wait another poll interval, if the budget allows */

ngx_int_t
ngx_omniroute_queue_wait(ngx_omniroute_ctx_t *ctx)
{
    if (ngx_omniroute_now() >= ctx->wait_until) {
        return NGX_DECLINED;
    }

    ngx_add_timer(&ctx->wait, NGX_OMNIROUTE_QUEUE_POLL);

    return NGX_OK;
}


/* out of the queue: the count, the timer (also at request end) */

void
ngx_omniroute_queue_leave(void *data)
{
    ngx_omniroute_ctx_t *ctx = data;

    ngx_omniroute_main_conf_t  *omcf;

    if (!ctx->queued) {
        return;
    }

    ctx->queued = 0;

    if (ctx->wait.timer_set) {
        ngx_del_timer(&ctx->wait);
    }

    omcf = ngx_http_get_module_main_conf(ctx->request,
                                         ngx_http_omniroute_module);

    (void) ngx_atomic_fetch_add(&omcf->store.sh->queued, -1);
}
