
/*
 * Copyright (C) ngx_omniroute authors
 *
 * Planning (R-REQ-3, R-REQ-6): the candidates of a request minus those the
 * shared state excludes (provider breaker OPEN, connection cooldown or
 * terminal state, model lockout, request_rejected), in the order of the
 * combo's strategy; HALF_OPEN probe admission at dispatch; the 503/404
 * answer with diagnostics when nothing is runnable.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute_request.h"


#define NGX_OMNIROUTE_PLAN_PROVIDERS  16


typedef struct {
    ngx_omniroute_provider_t     *provider;
    or_msec_t                     retry_after;  /* 0: eligible */
    ngx_uint_t                    exists;
} ngx_omniroute_breaker_view_t;


typedef struct {
    or_strategy_e                 strategy;
    or_cand_t                    *cands;
    uint32_t                      n;
    uint32_t                     *order;
    or_rand_t                    *rnd;
    or_msec_t                     now;
    int                           rc;
} ngx_omniroute_select_t;


typedef struct {
    ngx_omniroute_settings_t     *settings;
    or_msec_t                     now;
    or_cb_admit_e                 admit;
} ngx_omniroute_admit_t;


static or_msec_t ngx_omniroute_lockout_retry(ngx_omniroute_store_t *st,
    ngx_uint_t table, ngx_omniroute_candidate_t *cand, or_scope_e scope,
    or_msec_t now, ngx_uint_t *found);
static const char *ngx_omniroute_check(ngx_omniroute_store_t *st,
    ngx_omniroute_candidate_t *cand, ngx_omniroute_settings_t *settings,
    or_msec_t breaker_retry, or_msec_t now, or_msec_t *retry);
static ngx_int_t ngx_omniroute_order(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, ngx_omniroute_store_t *st, or_msec_t now);
static ngx_uint_t ngx_omniroute_select_update(void *value, void *arg,
    or_msec_t *expires);
static ngx_uint_t ngx_omniroute_admit_update(void *value, void *arg,
    or_msec_t *expires);


/*
 * Keeps the eligible candidates (in strategy order) and records why the
 * others were left out.  NGX_DECLINED: none is eligible.
 */

ngx_int_t
ngx_omniroute_plan_eligible(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx)
{
    or_msec_t                      now, retry;
    ngx_uint_t                     i, j, n, nviews;
    const char                    *reason;
    or_breaker_t                   cb;
    ngx_omniroute_store_t         *st;
    ngx_omniroute_settings_t      *settings;
    ngx_omniroute_candidate_t     *cand;
    ngx_omniroute_main_conf_t     *omcf;
    ngx_omniroute_breaker_view_t   views[NGX_OMNIROUTE_PLAN_PROVIDERS], *bv;

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);

    if (ngx_array_init(&ctx->excluded, r->pool, 2,
                       sizeof(ngx_omniroute_excluded_t))
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (omcf->shm_zone == NULL) {
        return NGX_OK;
    }

    st = &omcf->store;
    now = ngx_omniroute_now();

    cand = ctx->candidates.elts;
    nviews = 0;
    n = 0;

    for (i = 0; i < ctx->candidates.nelts; i++) {

        settings = ngx_omniroute_settings_of(r, cand[i].provider);

        /* the provider's breaker, read once per provider */

        bv = NULL;

        for (j = 0; j < nviews; j++) {
            if (views[j].provider == cand[i].provider) {
                bv = &views[j];
                break;
            }
        }

        if (bv == NULL) {
            bv = (nviews < NGX_OMNIROUTE_PLAN_PROVIDERS) ? &views[nviews++]
                                                          : &views[0];
            bv->provider = cand[i].provider;
            bv->retry_after = 0;
            bv->exists = 0;

            if (ngx_omniroute_store_read(st, NGX_OMNIROUTE_T_BREAKER,
                                         &cand[i].provider->name, &cb,
                                         sizeof(or_breaker_t))
                == NGX_OK)
            {
                bv->exists = 1;
                bv->retry_after = or_breaker_retry_after(&settings->breaker,
                                                         &cb, now);
            }
        }

        cand[i].has_breaker = bv->exists;

        reason = ngx_omniroute_check(st, &cand[i], settings,
                                     bv->retry_after, now, &retry);

        if (reason) {
            if (ngx_omniroute_plan_exclude(ctx, &cand[i], reason, retry)
                != NGX_OK)
            {
                return NGX_ERROR;
            }

            continue;
        }

        cand[n++] = cand[i];
    }

    ctx->candidates.nelts = n;

    if (n == 0) {
        return NGX_DECLINED;
    }

    if (ngx_omniroute_order(r, ctx, st, now) != NGX_OK) {
        return NGX_ERROR;
    }

    ngx_omniroute_affinity_apply(r, ctx);

    return NGX_OK;
}


/*
 * Why the shared state excludes a candidate (NULL: it does not) and for
 * how long (*retry, ms; -1: no timer).  Records which state exists.
 */

static const char *
ngx_omniroute_check(ngx_omniroute_store_t *st,
    ngx_omniroute_candidate_t *cand, ngx_omniroute_settings_t *settings,
    or_msec_t breaker_retry, or_msec_t now, or_msec_t *retry)
{
    ngx_uint_t       found;
    or_conn_state_t  cs;

    if (breaker_retry > 0) {
        *retry = breaker_retry;
        return "circuit_open";
    }

    /* the connection's cooldown or terminal state */

    cand->has_conn = (ngx_omniroute_store_read(st, NGX_OMNIROUTE_T_CONN,
                                               &cand->conn->id, &cs,
                                               sizeof(or_conn_state_t))
                      == NGX_OK);

    if (cand->has_conn && !or_cooldown_eligible(&cs, now)) {
        *retry = or_cooldown_retry_after(&cs, now);
        return (*retry < 0) ? "terminal" : "provider_cooldown";
    }

    /* model lockout (opt-in), scope-aware: any of the three keys */

    found = 0;
    *retry = 0;

    if (settings->lockout.enabled) {
        *retry = ngx_max(*retry,
                         ngx_omniroute_lockout_retry(st,
                             NGX_OMNIROUTE_T_LOCKOUT, cand, OR_SCOPE_MODEL,
                             now, &found));
        *retry = ngx_max(*retry,
                         ngx_omniroute_lockout_retry(st,
                             NGX_OMNIROUTE_T_LOCKOUT, cand,
                             OR_SCOPE_BASE_MODEL, now, &found));
        *retry = ngx_max(*retry,
                         ngx_omniroute_lockout_retry(st,
                             NGX_OMNIROUTE_T_LOCKOUT, cand,
                             OR_SCOPE_QUOTA_FAMILY, now, &found));
    }

    cand->has_lockout = found ? 1 : 0;

    if (*retry > 0) {
        return "model_lockout";
    }

    /* request_rejected for this connection and model */

    found = 0;
    *retry = ngx_omniroute_lockout_retry(st, NGX_OMNIROUTE_T_REJECTED, cand,
                                         OR_SCOPE_MODEL, now, &found);
    cand->has_rejected = found ? 1 : 0;

    return (*retry > 0) ? "unavailable" : NULL;
}


ngx_int_t
ngx_omniroute_plan_exclude(ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_candidate_t *cand, const char *reason, or_msec_t retry_after)
{
    ngx_omniroute_excluded_t  *ex;

    ex = ngx_array_push(&ctx->excluded);
    if (ex == NULL) {
        return NGX_ERROR;
    }

    ex->cand = ngx_palloc(ctx->excluded.pool,
                          sizeof(ngx_omniroute_candidate_t));
    if (ex->cand == NULL) {
        return NGX_ERROR;
    }

    *ex->cand = *cand;
    ex->reason = reason;
    ex->retry_after = retry_after;

    return NGX_OK;
}


static or_msec_t
ngx_omniroute_lockout_retry(ngx_omniroute_store_t *st, ngx_uint_t table,
    ngx_omniroute_candidate_t *cand, or_scope_e scope, or_msec_t now,
    ngx_uint_t *found)
{
    u_char        buf[NGX_OMNIROUTE_KEY_MAX];
    ngx_str_t     key;
    or_lockout_t  lo;

    if (ngx_omniroute_store_empty(st, table)) {
        return 0;
    }

    key.len = ngx_omniroute_candidate_lockout_key(buf, cand, scope);
    key.data = buf;

    if (key.len == 0
        || ngx_omniroute_store_read(st, table, &key, &lo,
                                    sizeof(or_lockout_t))
           != NGX_OK)
    {
        return 0;
    }

    *found = 1;

    if (!or_lockout_active(&lo, now)) {
        return 0;
    }

    return or_lockout_retry_after(&lo, now);
}


/* the combo's strategy orders the eligible candidates (shared state) */

static ngx_int_t
ngx_omniroute_order(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_store_t *st, or_msec_t now)
{
    uint32_t                    *order, crc;
    or_cand_t                   *oc;
    ngx_atomic_t                *counter;
    or_rand_t                    rnd;
    ngx_uint_t                   i, n;
    ngx_omniroute_select_t       sel;
    ngx_omniroute_candidate_t   *cand, *sorted;

    n = ctx->candidates.nelts;

    if (ctx->entry == NULL || ctx->entry->strategy == OR_STRATEGY_PRIORITY
        || n < 2 || n > OR_SELECT_MAX)
    {
        return NGX_OK;
    }

    cand = ctx->candidates.elts;

    oc = ngx_pcalloc(r->pool, n * sizeof(or_cand_t));
    order = ngx_palloc(r->pool, n * sizeof(uint32_t));
    sorted = ngx_palloc(r->pool, n * sizeof(ngx_omniroute_candidate_t));

    if (oc == NULL || order == NULL || sorted == NULL) {
        return NGX_ERROR;
    }

    for (i = 0; i < n; i++) {
        /* a stable id: target position and connection id */
        ngx_crc32_init(crc);
        ngx_crc32_update(&crc, (u_char *) &cand[i].target->model.len,
                         sizeof(size_t));
        ngx_crc32_update(&crc, cand[i].target->model.data,
                         cand[i].target->model.len);
        ngx_crc32_update(&crc, cand[i].conn->id.data, cand[i].conn->id.len);
        ngx_crc32_final(crc);

        oc[i].id = crc;
        oc[i].priority = (int64_t) cand[i].order;
        oc[i].weight = (uint32_t) cand[i].conn->weight;
        oc[i].max_concurrent = (uint32_t) cand[i].conn->max_concurrent;
        oc[i].cost = cand[i].conn->cost;
        oc[i].reset_at = OR_MSEC_NONE;

        counter = ngx_omniroute_inflight(st, &cand[i].conn->id);
        if (counter) {
            oc[i].in_flight = (uint32_t) *counter;
        }
    }

    or_rand_seed(&rnd, ((uint64_t) ngx_random() << 32) ^ (uint64_t) now
                       ^ (uintptr_t) r);

    sel.strategy = ctx->entry->strategy;
    sel.cands = oc;
    sel.n = (uint32_t) n;
    sel.order = order;
    sel.rnd = &rnd;
    sel.now = now;
    sel.rc = -1;

    if (ngx_omniroute_store_update(st, NGX_OMNIROUTE_T_STRATEGY,
                                   &ctx->entry->name,
                                   sizeof(or_select_state_t),
                                   ngx_omniroute_select_update, &sel, 0)
        == NGX_ERROR
        || sel.rc < 0)
    {
        /* no room for the shared state: a local order still works */
        if (or_select_order(ctx->entry->strategy, oc, (uint32_t) n, now, 0,
                            NULL, &rnd, order)
            < 0)
        {
            return NGX_OK;
        }
    }

    for (i = 0; i < n; i++) {
        sorted[i] = cand[order[i]];
    }

    ngx_memcpy(cand, sorted, n * sizeof(ngx_omniroute_candidate_t));

    return NGX_OK;
}


static ngx_uint_t
ngx_omniroute_select_update(void *value, void *arg, or_msec_t *expires)
{
    ngx_omniroute_select_t *sel = arg;

    sel->rc = or_select_order(sel->strategy, sel->cands, sel->n, sel->now, 0,
                              value, sel->rnd, sel->order);

    return (sel->rc < 0) ? NGX_OMNIROUTE_UNCHANGED : NGX_OMNIROUTE_CHANGED;
}


/*
 * At dispatch: NGX_DECLINED when the provider's breaker is open, or is
 * HALF_OPEN and another request holds its single probe (R-CB-4).
 */

ngx_int_t
ngx_omniroute_admit(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_candidate_t *cand, const char **reason)
{
    or_breaker_t                cb;
    or_conn_state_t             cs;
    ngx_omniroute_admit_t       adm;
    ngx_omniroute_settings_t   *settings;
    ngx_omniroute_main_conf_t  *omcf;

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);

    /* the first attempt, on a provider that had no breaker record at all
     * when planning an instant ago: nothing to check */

    if (ctx->attempts.nelts == 0 && !cand->has_breaker) {
        return NGX_OK;
    }

    /* a fallback: the connection may have been cooled since planning (by
     * a sibling's failure, or by another worker) */

    if (ctx->attempts.nelts > 0 && omcf->shm_zone
        && ngx_omniroute_store_read(&omcf->store, NGX_OMNIROUTE_T_CONN,
                                    &cand->conn->id, &cs,
                                    sizeof(or_conn_state_t))
           == NGX_OK
        && !or_cooldown_eligible(&cs, ngx_omniroute_now()))
    {
        *reason = "provider_cooldown";
        return NGX_DECLINED;
    }

    *reason = "circuit_open";

    if (omcf->shm_zone == NULL
        || ngx_omniroute_store_read(&omcf->store, NGX_OMNIROUTE_T_BREAKER,
                                    &cand->provider->name, &cb,
                                    sizeof(or_breaker_t))
           != NGX_OK)
    {
        return NGX_OK;
    }

    settings = ngx_omniroute_settings_of(r, cand->provider);

    adm.settings = settings;
    adm.now = ngx_omniroute_now();
    adm.admit = OR_CB_ALLOW;

    /* the breaker may have opened since planning (this very request) */

    if (or_breaker_state(&settings->breaker, &cb, adm.now) != OR_CB_HALF_OPEN)
    {
        return or_breaker_eligible(&settings->breaker, &cb, adm.now)
               ? NGX_OK : NGX_DECLINED;
    }

    (void) ngx_omniroute_store_update(&omcf->store, NGX_OMNIROUTE_T_BREAKER,
                                      &cand->provider->name,
                                      sizeof(or_breaker_t),
                                      ngx_omniroute_admit_update, &adm, 0);

    return (adm.admit == OR_CB_DENY) ? NGX_DECLINED : NGX_OK;
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
 * Nothing runnable (R-REQ-6): 503 all_targets_cooling_down with
 * Retry-After (earliest expiry) when a timer excluded something, else 404
 * no_executable_targets; both with diagnostics.excluded.
 */

ngx_int_t
ngx_omniroute_send_cooling_down(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx)
{
    u_char                    *p, *target;
    size_t                     len;
    json_t                    *doc, *list, *item;
    or_msec_t                  earliest;
    ngx_str_t                  name, value;
    ngx_uint_t                 i, status;
    const char                *code, *msg;
    ngx_omniroute_excluded_t  *ex;

    earliest = -1;
    ex = ctx->excluded.elts;

    list = json_array();
    if (list == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    for (i = 0; i < ctx->excluded.nelts; i++) {

        if (ex[i].retry_after >= 0
            && (earliest < 0 || ex[i].retry_after < earliest))
        {
            earliest = ex[i].retry_after;
        }

        target = ngx_pnalloc(r->pool, ex[i].cand->provider->name.len + 1
                                      + ex[i].cand->target->model.len);
        if (target == NULL) {
            json_decref(list);
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        len = ngx_sprintf(target, "%V/%V", &ex[i].cand->provider->name,
                          &ex[i].cand->target->model)
              - target;

        item = json_pack("{s:s%,s:s%,s:s}",
                         "target", target, len,
                         "connection", ex[i].cand->conn->id.data,
                         ex[i].cand->conn->id.len,
                         "reason", ex[i].reason);
        if (item == NULL) {
            json_decref(list);
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        if (ex[i].retry_after >= 0) {
            json_object_set_new(item, "retry_after_s",
                                json_integer((ex[i].retry_after + 999)
                                             / 1000));
        } else {
            json_object_set_new(item, "retry_after_s", json_null());
        }

        json_array_append_new(list, item);
    }

    if (earliest >= 0) {
        status = NGX_HTTP_SERVICE_UNAVAILABLE;
        code = "all_targets_cooling_down";
        msg = "every target of this model is cooling down; retry later";

        p = ngx_pnalloc(r->pool, NGX_INT64_LEN);
        if (p == NULL) {
            json_decref(list);
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        value.data = p;
        value.len = ngx_sprintf(p, "%L", (int64_t) ngx_max((earliest + 999)
                                                            / 1000, 1))
                    - p;
        ngx_str_set(&name, "Retry-After");

        if (ngx_omniroute_add_header(r, &name, &value) != NGX_OK) {
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

    return ngx_omniroute_send_json(r, status, doc);
}
