
/*
 * Copyright (C) ngx_omniroute authors
 *
 * Planning (R-REQ-3, R-REQ-6): the model's routes (built at configuration
 * time) minus those the shared state excludes (provider breaker OPEN,
 * connection cooldown or terminal state, model lockout, request_rejected),
 * in the order of the combo's strategy.  In priority order the routes are
 * checked only as far as the attempts need them, so a model served by
 * many connections plans as fast as one served by a few.  A route whose
 * provider/model refused as many tools is left out (R-TOOL-4); the
 * emergency target comes after every other one (R-EMERG-1).
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute_ctx.h"
#include "or_plan.h"


typedef struct {
    or_strategy_e                 strategy;
    or_cand_t                    *cands;
    uint32_t                      n;
    uint32_t                     *order;
    or_rand_t                    *rnd;
    or_msec_t                     now;
    int                           rc;
} ngx_omniroute_select_t;


static ngx_int_t ngx_omniroute_plan_all(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx);
static ngx_int_t ngx_omniroute_plan_check(ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_route_t *route);
static ngx_omniroute_provider_state_t *ngx_omniroute_plan_provider(
    ngx_omniroute_ctx_t *ctx, ngx_omniroute_provider_t *p);
static ngx_int_t ngx_omniroute_plan_peek(ngx_omniroute_ctx_t *ctx);
static ngx_int_t ngx_omniroute_plan_emergency(ngx_omniroute_ctx_t *ctx);
static ngx_uint_t ngx_omniroute_plan_same_api(ngx_http_request_t *r,
    ngx_omniroute_provider_t *p);
static ngx_int_t ngx_omniroute_order(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, ngx_omniroute_store_t *st);
static void ngx_omniroute_pin_first(ngx_omniroute_ctx_t *ctx,
    ngx_str_t *conn);
static ngx_uint_t ngx_omniroute_select_update(void *value, void *arg,
    or_msec_t *expires);


/*
 * The routes of the model the client named: a declared alias or combo
 * (hash lookup, routes built at configuration time), or "provider/model"
 * for a declared provider (its connections by priority).
 */

ngx_int_t
ngx_omniroute_plan_routes(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx)
{
    u_char                     *msg, *slash;
    ngx_int_t                   pi;
    ngx_str_t                   pname;
    ngx_array_t                 routes;
    ngx_omniroute_target_t     *t;
    ngx_omniroute_main_conf_t  *omcf;

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);

    ctx->entry = ngx_omniroute_model_lookup(omcf, &ctx->model);

    if (ctx->entry) {
        ctx->routes = ctx->entry->routes.elts;
        ctx->nroutes = ctx->entry->routes.nelts;

    } else {
        slash = ngx_strlchr(ctx->model.data, ctx->model.data + ctx->model.len,
                            '/');
        pi = NGX_ERROR;

        if (slash && slash + 1 < ctx->model.data + ctx->model.len) {
            pname.data = ctx->model.data;
            pname.len = slash - ctx->model.data;
            pi = ngx_omniroute_provider_lookup(omcf, &pname);
        }

        if (pi == NGX_ERROR) {
            msg = ngx_pnalloc(r->pool, ctx->model.len + 64);
            if (msg == NULL) {
                return NGX_HTTP_INTERNAL_SERVER_ERROR;
            }

            ngx_sprintf(msg, "the model \"%V\" does not exist%Z",
                        &ctx->model);

            return ngx_omniroute_reject(ctx, NGX_HTTP_NOT_FOUND,
                                        "model_not_found", (char *) msg);
        }

        t = ngx_palloc(r->pool, sizeof(ngx_omniroute_target_t));
        if (t == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        t->provider = pi;
        t->model.data = slash + 1;
        t->model.len = ctx->model.data + ctx->model.len - t->model.data;

        if (ngx_array_init(&routes, r->pool, 4,
                           sizeof(ngx_omniroute_route_t))
            != NGX_OK
            || ngx_omniroute_routes_add(r->pool, &routes, omcf, t) != NGX_OK)
        {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        ctx->routes = routes.elts;
        ctx->nroutes = routes.nelts;
    }

    if (ctx->nroutes == 0) {
        return ngx_omniroute_reject(ctx, NGX_HTTP_NOT_FOUND,
                                    "no_executable_targets",
                                    "no connection serves this model");
    }

    /* a concurrency cap on a route: requests may queue (R-CONC-1) */

    ctx->plan.capped = ctx->entry ? ctx->entry->capped
                                  : ngx_omniroute_routes_capped(ctx->routes,
                                                                ctx->nroutes);

    if (ngx_array_init(&ctx->candidates, r->pool, 4,
                       sizeof(ngx_omniroute_candidate_t *))
        != NGX_OK
        || ngx_array_init(&ctx->excluded, r->pool, 2,
                          sizeof(ngx_omniroute_excluded_t))
           != NGX_OK
        || ngx_array_init(&ctx->attempts, r->pool, 2,
                          sizeof(ngx_omniroute_attempt_t))
           != NGX_OK)
    {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return NGX_OK;
}


/*
 * The eligible candidates and why the others were left out.  A strategy
 * other than priority, and a session pin, need every route checked (they
 * order them all); priority order checks them as the attempts go.
 * NGX_DECLINED: none is eligible.
 */

ngx_int_t
ngx_omniroute_plan_eligible(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx)
{
    ngx_int_t  rc;

    rc = ngx_omniroute_plan_all(r, ctx);

    if (rc == NGX_DECLINED && ctx->attempts.nelts == 0
        && (ctx->cap_uses & NGX_OMNIROUTE_CAP_SKIPPED))
    {
        /*
         * Issue 25: only targets that refused a feature of this request
         * are left: the memory is set aside, they are asked (their
         * refusal is the truthful answer, not a 503)
         */

        ngx_log_debug0(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                       "omniroute plan: only capability refusals left, "
                       "asked anyway");

        ctx->cap_uses = NGX_OMNIROUTE_CAP_KNOWN;
        ngx_omniroute_plan_reset(ctx);

        rc = ngx_omniroute_plan_all(r, ctx);
    }

    return rc;
}


static ngx_int_t
ngx_omniroute_plan_all(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx)
{
    ngx_int_t                   rc;
    ngx_str_t                   pinned;
    ngx_omniroute_main_conf_t  *omcf;

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);

    ngx_str_null(&pinned);

    rc = ngx_omniroute_affinity_pinned(r, ctx, &pinned);
    if (rc == NGX_ERROR) {
        return NGX_ERROR;
    }

    ctx->plan.lazy = (pinned.len == 0
                      && (ctx->entry == NULL
                          || ctx->entry->strategy == OR_STRATEGY_PRIORITY));

    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "omniroute plan: model \"%V\", %ui routes, %s",
                   &ctx->model, ctx->nroutes,
                   ctx->plan.lazy ? "checked as needed" : "all checked");

    if (ctx->plan.lazy) {
        rc = ngx_omniroute_plan_peek(ctx);
        ctx->plan.excluded = ctx->excluded.nelts;
        return rc;
    }

    while (ctx->plan.scanned < ctx->nroutes) {
        if (ngx_omniroute_plan_check(ctx, &ctx->routes[ctx->plan.scanned++])
            == NGX_ERROR)
        {
            return NGX_ERROR;
        }
    }

    ctx->plan.excluded = ctx->excluded.nelts;

    if (ctx->candidates.nelts == 0) {
        /* every route excluded: the emergency target, if any */
        return ngx_omniroute_plan_peek(ctx);
    }

    if (omcf->shm_zone
        && ngx_omniroute_order(r, ctx, &omcf->store) != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (pinned.len) {
        ngx_omniroute_pin_first(ctx, &pinned);
    }

    return NGX_OK;
}


/*
 * Checks one route against the shared state: NGX_OK (a candidate now),
 * NGX_DECLINED (excluded, with its reason), NGX_ERROR.
 */

static ngx_int_t
ngx_omniroute_plan_check(ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_route_t *route)
{
    size_t                           i;
    or_msec_t                        now, retry;
    or_lockout_t                     lockout[NGX_OMNIROUTE_LOCKOUT_SCOPES];
    or_lockout_t                     rejected;
    ngx_uint_t                       excluded;
    or_plan_view_t                   view;
    or_conn_state_t                  cs;
    or_exclusion_e                   excl;
    or_wait_kind_e                   kind;
    ngx_omniroute_store_t           *st;
    ngx_omniroute_candidate_t        c, *cand, **slot;
    ngx_omniroute_main_conf_t       *omcf;
    ngx_omniroute_provider_state_t  *ps;

    omcf = ngx_http_get_module_main_conf(ctx->request,
                                         ngx_http_omniroute_module);

    ps = ngx_omniroute_plan_provider(ctx, route->provider);
    if (ps == NULL) {
        return NGX_ERROR;
    }

    /*
     * Built here and copied to the pool once it is eligible: an excluded
     * route (a pool's cooling connections, passed over on every request)
     * allocates nothing but its exclusion.
     */

    ngx_memzero(&c, sizeof(ngx_omniroute_candidate_t));
    cand = &c;

    cand->route = route;
    cand->conn = route->conn;
    cand->provider = route->provider;
    cand->target = route->target;
    cand->settings = &ps->settings;

    if (omcf->shm_zone) {
        st = &omcf->store;
        now = ngx_omniroute_now();

        ngx_memzero(&view, sizeof(or_plan_view_t));
        view.breaker_conf = &ps->settings.breaker;
        view.lockout_enabled = ps->settings.lockout.enabled;

        if (ps->has_breaker) {
            view.breaker = &ps->breaker;
        }

        if (ngx_omniroute_store_read_cached(st, NGX_OMNIROUTE_T_CONN,
                                            &route->conn->id,
                                            route->conn->state_hash,
                                            route->conn->state_cache, &cs,
                                            sizeof(or_conn_state_t))
            == NGX_OK)
        {
            view.conn = &cs;
        }

        /*
         * The breaker and the connection's state come first in the
         * exclusion's precedence (or_plan_exclusion()): when either
         * excludes the route, its lockouts cannot change the answer and
         * are not read (a pool with cooling connections stays cheap).
         */

        excluded = (view.breaker
                    && or_breaker_retry_after(view.breaker_conf,
                                              view.breaker, now) > 0)
                   || (view.conn && !or_cooldown_eligible(view.conn, now));

        /*
         * A lockout that exists is in force until it expires, whether or
         * not the opt-in lockout is on: "enabled" decides which failures
         * lock a model; a rule's model scope locks one even when it is off
         * (or_outcome_writes()).
         */

        if (!excluded
            && !ngx_omniroute_store_empty(st, NGX_OMNIROUTE_T_LOCKOUT))
        {
            for (i = 0; i < NGX_OMNIROUTE_LOCKOUT_SCOPES; i++) {
                if (route->lockout_key[i].len
                    && ngx_omniroute_store_read_hashed(st,
                                                NGX_OMNIROUTE_T_LOCKOUT,
                                                &route->lockout_key[i],
                                                route->lockout_hash[i],
                                                &lockout[i],
                                                sizeof(or_lockout_t))
                       == NGX_OK)
                {
                    view.lockout[i] = &lockout[i];
                    view.lockout_enabled = 1;
                }
            }
        }

        if (!excluded && route->lockout_key[0].len
            && !ngx_omniroute_store_empty(st, NGX_OMNIROUTE_T_REJECTED)
            && ngx_omniroute_store_read_hashed(st, NGX_OMNIROUTE_T_REJECTED,
                                               &route->lockout_key[0],
                                               route->rejected_hash,
                                               &rejected, sizeof(or_lockout_t))
               == NGX_OK)
        {
            view.rejected = &rejected;
        }

        cand->has_breaker = ps->has_breaker;
        cand->has_conn = (view.conn != NULL);
        cand->has_lockout = (view.lockout[0] || view.lockout[1]
                             || view.lockout[2]);
        cand->has_rejected = (view.rejected != NULL);

        excl = or_plan_exclusion(&view, now, &retry);

        if (excl == OR_EXCL_NONE
            && ngx_omniroute_pace_tools_skip(ctx, route, &retry)
               == NGX_DECLINED)
        {
            /* R-TOOL-4: too many tools for it; fewer would still go */
            ngx_omniroute_memo_end(ctx);

            if (ngx_omniroute_plan_exclude(ctx, route, "tool_limit", retry,
                                           OR_WAIT_KIND_HARD)
                != NGX_OK)
            {
                return NGX_ERROR;
            }

            return NGX_DECLINED;
        }

        if (excl == OR_EXCL_NONE
            && ngx_omniroute_pace_capability_skip(ctx, route, &retry)
               == NGX_DECLINED)
        {
            /* issue 25: it refused a feature this request uses */
            ngx_omniroute_memo_end(ctx);

            if (ngx_omniroute_plan_exclude(ctx, route, "capability", retry,
                                           OR_WAIT_KIND_HARD)
                != NGX_OK)
            {
                return NGX_ERROR;
            }

            return NGX_DECLINED;
        }

        if (excl != OR_EXCL_NONE) {
            ngx_log_debug3(NGX_LOG_DEBUG_HTTP, ctx->request->connection->log,
                           0, "omniroute plan: \"%V\" excluded: %s, "
                           "retry %L ms", &route->conn->id,
                           or_exclusion_name(excl), (int64_t) retry);

            kind = or_wait_kind(excl, or_wait_cause(&view, excl, now));

            if (ngx_omniroute_plan_exclude(ctx, route, or_exclusion_name(excl),
                                           retry, kind)
                != NGX_OK)
            {
                return NGX_ERROR;
            }

            if (view.conn != NULL
                && (excl == OR_EXCL_PROVIDER_COOLDOWN
                    || excl == OR_EXCL_TERMINAL)
                && sizeof(or_conn_state_t) <= NGX_OMNIROUTE_CACHE_VALUE)
            {
                /*
                 * Its connection's state (its provider's breaker, if any,
                 * did not exclude it): for the model's memo, with the
                 * record's expiry as the worker's copy holds it.
                 */
                ngx_omniroute_memo_excluded(ctx, route,
                                            or_exclusion_name(excl), retry,
                                            kind,
                                            route->conn->state_cache->expires,
                                            now);

            } else {
                ngx_omniroute_memo_end(ctx);
            }

            return NGX_DECLINED;
        }
    }

    ngx_omniroute_memo_end(ctx);

    cand = ngx_palloc(ctx->request->pool, sizeof(ngx_omniroute_candidate_t));
    if (cand == NULL) {
        return NGX_ERROR;
    }

    *cand = c;

    if (route->conn->rate_limit_reset) {
        /* R-CD-3: the connection's own reset, after an upstream hint */

        cand->settings = ngx_palloc(ctx->request->pool,
                                    sizeof(ngx_omniroute_settings_t));
        if (cand->settings == NULL) {
            return NGX_ERROR;
        }

        *cand->settings = ps->settings;
        cand->settings->cooldown.override_ms = route->conn->rate_limit_reset;
    }

    slot = ngx_array_push(&ctx->candidates);
    if (slot == NULL) {
        return NGX_ERROR;
    }

    *slot = cand;

    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, ctx->request->connection->log, 0,
                   "omniroute plan: \"%V\" eligible", &route->conn->id);

    return NGX_OK;
}


/*
 * What this request knows of a provider: the settings in force (runtime
 * overrides included) and its breaker record, each read once.
 */

static ngx_omniroute_provider_state_t *
ngx_omniroute_plan_provider(ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_provider_t *p)
{
    ngx_omniroute_main_conf_t       *omcf;
    ngx_omniroute_provider_state_t  *ps;

    for (ps = ctx->plan.providers; ps; ps = ps->next) {
        if (ps->provider == p) {
            return ps;
        }
    }

    omcf = ngx_http_get_module_main_conf(ctx->request,
                                         ngx_http_omniroute_module);

    ps = ngx_palloc(ctx->request->pool,
                    sizeof(ngx_omniroute_provider_state_t));
    if (ps == NULL) {
        return NULL;
    }

    ps->provider = p;
    ngx_omniroute_settings_effective(omcf, p, &ps->settings);

    ps->has_breaker = (omcf->shm_zone
                       && ngx_omniroute_store_read(&omcf->store,
                                                   NGX_OMNIROUTE_T_BREAKER,
                                                   &p->name, &ps->breaker,
                                                   sizeof(or_breaker_t))
                          == NGX_OK);

    ps->next = ctx->plan.providers;
    ctx->plan.providers = ps;

    return ps;
}


/* the settings in force for provider p during this request */

ngx_omniroute_settings_t *
ngx_omniroute_plan_settings(ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_provider_t *p)
{
    ngx_omniroute_provider_state_t  *ps;

    ps = ngx_omniroute_plan_provider(ctx, p);

    return ps ? &ps->settings : &p->settings;
}


/*
 * Makes sure candidate ctx->plan.next exists, checking further routes in
 * priority order when needed: NGX_OK, NGX_DECLINED (none left), NGX_ERROR.
 */

static ngx_int_t
ngx_omniroute_plan_peek(ngx_omniroute_ctx_t *ctx)
{
    ngx_int_t  rc;

    if (ctx->plan.lazy && ctx->plan.scanned == 0) {
        /* the model's first routes may be known to be excluded */
        ngx_omniroute_memo_start(ctx);
    }

    while (ctx->plan.next >= ctx->candidates.nelts) {

        if (!ctx->plan.lazy || ctx->plan.scanned >= ctx->nroutes) {
            ngx_omniroute_memo_end(ctx);

            /* R-EMERG-1: the last resort, once */
            rc = ngx_omniroute_plan_emergency(ctx);

            if (rc == NGX_OK) {
                continue;
            }

            return (rc == NGX_ERROR) ? NGX_ERROR : NGX_DECLINED;
        }

        rc = ngx_omniroute_plan_check(ctx, &ctx->routes[ctx->plan.scanned++]);

        if (rc == NGX_ERROR) {
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


/* the next candidate to dispatch, or NULL when none is left */

ngx_omniroute_candidate_t *
ngx_omniroute_plan_next(ngx_omniroute_ctx_t *ctx)
{
    if (ngx_omniroute_plan_peek(ctx) != NGX_OK) {
        return NULL;
    }

    return ((ngx_omniroute_candidate_t **)
               ctx->candidates.elts)[ctx->plan.next++];
}


/*
 * A queued request tries again from the first candidate: with every route
 * checked, the planned candidates (admission exclusions are dropped);
 * checked as needed, the routes are checked again from the first.
 */

void
ngx_omniroute_plan_restart(ngx_omniroute_ctx_t *ctx)
{
    ctx->plan.next = 0;
    ctx->plan.saw_full = 0;

    if (ctx->plan.lazy) {
        ctx->plan.scanned = 0;
        ctx->candidates.nelts = 0;
        ctx->excluded.nelts = 0;
        ctx->plan.emergency = 0;
        return;
    }

    ctx->excluded.nelts = ctx->plan.excluded;
}


/*
 * After a cooldown wait the routes are planned afresh: the shared state
 * (breakers, settings included) is read again and the exclusions listed
 * anew.
 */

void
ngx_omniroute_plan_reset(ngx_omniroute_ctx_t *ctx)
{
    ctx->plan.next = 0;
    ctx->plan.saw_full = 0;
    ctx->plan.scanned = 0;
    ctx->candidates.nelts = 0;
    ctx->excluded.nelts = 0;
    ctx->plan.excluded = 0;
    ctx->plan.providers = NULL;
    ctx->plan.emergency = 0;
}


ngx_uint_t
ngx_omniroute_may_fall_over(ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_attempt_t *a)
{
    return a->verdict.fall_over && ngx_omniroute_may_continue(ctx);
}


/*
 * another attempt is possible: a candidate is left, and the attempt limit
 * (retries of the usage-limit lane not counted) and the request budget
 * allow
 */

ngx_uint_t
ngx_omniroute_may_continue(ngx_omniroute_ctx_t *ctx)
{
    return ngx_omniroute_attempts_left(ctx)
           && ngx_omniroute_plan_peek(ctx) == NGX_OK;
}


/*
 * the attempt limit (the usage-limit lane's retries not counted) and the
 * request budget allow another attempt, whichever candidate it would be
 */

ngx_uint_t
ngx_omniroute_attempts_left(ngx_omniroute_ctx_t *ctx)
{
    return ctx->attempts.nelts - ngx_omniroute_lane_retries(ctx)
           < (ngx_uint_t) ctx->lcf->max_attempts
           && (ctx->deadline == 0 || ngx_omniroute_budget_left(ctx) > 0);
}


ngx_int_t
ngx_omniroute_plan_exclude(ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_route_t *route, const char *reason, or_msec_t retry_after,
    or_wait_kind_e kind)
{
    ngx_omniroute_excluded_t  *ex;

    ex = ngx_array_push(&ctx->excluded);
    if (ex == NULL) {
        return NGX_ERROR;
    }

    ex->route = route;
    ex->reason = reason;
    ex->retry_after = retry_after;
    ex->kind = kind;

    return NGX_OK;
}


/* the request's API (its path) is the one the provider serves */

static ngx_uint_t
ngx_omniroute_plan_same_api(ngx_http_request_t *r,
    ngx_omniroute_provider_t *p)
{
    ngx_uint_t               i, anthropic;
    ngx_omniroute_header_t  *h;

    anthropic = 0;
    h = p->headers.elts;

    for (i = 0; i < p->headers.nelts; i++) {
        if (h[i].name.len == sizeof("anthropic-version") - 1
            && ngx_strncasecmp(h[i].name.data, (u_char *) "anthropic-version",
                               h[i].name.len) == 0)
        {
            anthropic = 1;
        }
    }

    return or_api_of_path((const char *) r->uri.data, r->uri.len)
           == or_api_of_provider((const char *) p->url.data, p->url.len,
                                 (int) anthropic);
}


/*
 * R-EMERG-1: the emergency target, once every other candidate of the
 * request failed or was excluded (never because the others are busy: a
 * request at the caps queues).  NGX_OK: it is the next candidate.  No
 * side effect beyond planning: nothing is counted or logged here.
 */

static ngx_int_t
ngx_omniroute_plan_emergency(ngx_omniroute_ctx_t *ctx)
{
    ngx_int_t                   rc;
    ngx_uint_t                  i, n;
    ngx_omniroute_route_t      *e;
    ngx_omniroute_main_conf_t  *omcf;

    omcf = ngx_http_get_module_main_conf(ctx->request,
                                         ngx_http_omniroute_module);
    e = omcf->emergency;

    if (e == NULL || ctx->plan.emergency || ctx->plan.saw_full
        || !ctx->global.emergency_fallback)
    {
        return NGX_DECLINED;
    }

    ctx->plan.emergency = 1;

    /*
     * Only for requests of its API (issue 25): an Anthropic /v1/messages
     * request never gets an OpenAI chat.completion from it.
     */

    if (!ngx_omniroute_plan_same_api(ctx->request, e->provider)) {
        ngx_log_error(NGX_LOG_INFO, ctx->request->connection->log, 0,
                      "omniroute: the emergency fallback \"%V\" serves "
                      "another API than \"%V\", not used",
                      &e->conn->id, &ctx->request->uri);
        return NGX_DECLINED;
    }

    /* a route of the model already: tried (or excluded) as one */

    for (i = 0; i < ctx->nroutes; i++) {
        if (ctx->routes[i].conn == e->conn
            && ctx->routes[i].target->model.len == e->target->model.len
            && ngx_strncmp(ctx->routes[i].target->model.data,
                           e->target->model.data, e->target->model.len)
               == 0)
        {
            return NGX_DECLINED;
        }
    }

    /* a client key's connections and a lease bind the emergency too */

    if (ctx->auth
        && (ctx->auth->managed
            || (ctx->auth->key->conns
                && !ngx_omniroute_keys_conn_allowed(ctx->auth->key, omcf,
                                                    e->conn))))
    {
        return NGX_DECLINED;
    }

    n = ctx->candidates.nelts;

    rc = ngx_omniroute_plan_check(ctx, e);

    if (rc != NGX_OK) {
        return rc;
    }

    if (ctx->candidates.nelts == n) {
        /* excluded by the shared state: listed for the diagnostics */
        return NGX_DECLINED;
    }

    /*
     * Only planned: the check of whether another attempt is possible
     * (plan_peek) comes here while the first attempt still runs; the use
     * is counted and logged when its attempt starts (request.c).
     */

    ((ngx_omniroute_candidate_t **) ctx->candidates.elts)[n]->emergency = 1;

    return NGX_OK;
}


/* the combo's strategy orders the eligible candidates (shared state) */

static ngx_int_t
ngx_omniroute_order(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_store_t *st)
{
    uint32_t                    *order;
    or_cand_t                   *oc;
    or_msec_t                    now;
    ngx_atomic_t                *counter;
    or_rand_t                    rnd;
    ngx_uint_t                   i, n;
    ngx_omniroute_select_t       sel;
    ngx_omniroute_candidate_t  **cand, **sorted;

    n = ctx->candidates.nelts;

    if (ctx->entry == NULL || ctx->entry->strategy == OR_STRATEGY_PRIORITY
        || n < 2 || n > OR_SELECT_MAX)
    {
        return NGX_OK;
    }

    cand = ctx->candidates.elts;
    now = ngx_omniroute_now();

    oc = ngx_pcalloc(r->pool, n * sizeof(or_cand_t));
    order = ngx_palloc(r->pool, n * sizeof(uint32_t));
    sorted = ngx_palloc(r->pool, n * sizeof(ngx_omniroute_candidate_t *));

    if (oc == NULL || order == NULL || sorted == NULL) {
        return NGX_ERROR;
    }

    for (i = 0; i < n; i++) {
        oc[i].id = cand[i]->route->id;
        oc[i].priority = (int64_t) cand[i]->route->order;
        oc[i].weight = (uint32_t) cand[i]->conn->weight;
        oc[i].max_concurrent = (uint32_t) cand[i]->conn->max_concurrent;
        oc[i].cost = cand[i]->conn->cost;
        oc[i].reset_at = OR_MSEC_NONE;

        counter = ngx_omniroute_inflight(st, &cand[i]->conn->id);
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

    ngx_memcpy(cand, sorted, n * sizeof(ngx_omniroute_candidate_t *));

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "omniroute plan: strategy %d puts \"%V\" first",
                   ctx->entry->strategy, &cand[0]->conn->id);

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


/* the pinned connection, when eligible, goes first (R-AFF-1) */

static void
ngx_omniroute_pin_first(ngx_omniroute_ctx_t *ctx, ngx_str_t *conn)
{
    ngx_uint_t                   i;
    ngx_omniroute_candidate_t  **cand, *tmp;

    cand = ctx->candidates.elts;

    for (i = 0; i < ctx->candidates.nelts; i++) {
        if (cand[i]->conn->id.len == conn->len
            && ngx_strncmp(cand[i]->conn->id.data, conn->data, conn->len)
               == 0)
        {
            break;
        }
    }

    if (i == ctx->candidates.nelts) {
        /* no longer eligible: the next success re-pins */
        return;
    }

    tmp = cand[i];

    for ( /* void */ ; i > 0; i--) {
        cand[i] = cand[i - 1];
    }

    cand[0] = tmp;

    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, ctx->request->connection->log, 0,
                   "omniroute plan: session pinned to \"%V\"", conn);
}
