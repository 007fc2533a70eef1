
/*
 * Copyright (C) ngx_omniroute authors
 *
 * Pacing, tool-limit backoff and the emergency fallback: the glue of
 * src/core/or_pace.c.  The records live in the zone (table pace, mirrored
 * like cooldowns):
 *
 *   "p:<connection>"          a paused connection (R-PACE-2): no attempt
 *                             is dispatched to it until the pause ends;
 *                             requests wait in their model's FIFO queue
 *   "t:<provider>|<model>"    a tool limit (R-TOOL-2): requests with at
 *                             least that many tools skip the target
 *   "c:<provider>|<model>"    capability memory (issue 25): some feature
 *                             was refused, until the latest end
 *   "c:<provider>|<model>|<feature>"
 *                             that feature (prefill, tools, images, a
 *                             parameter): requests using it skip the
 *                             target until the record ends
 *
 * What they count: ngx_omniroute_stats_t.pace (docs/metrics.md).
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute_ctx.h"
#include "or_pace.h"


#define NGX_OMNIROUTE_PACE_SLACK    5       /* ms past a pause's end */


typedef struct {
    or_msec_t                     now;
    or_msec_t                     ms;
    size_t                        tools;
    ngx_uint_t                    pause;
    ngx_uint_t                    changed;
} ngx_omniroute_pace_op_t;


static ngx_uint_t ngx_omniroute_pace_update(void *value, void *arg,
    or_msec_t *expires);
static ngx_int_t ngx_omniroute_pace_key(ngx_pool_t *pool, ngx_str_t *key,
    const char *prefix, ngx_str_t *a, ngx_str_t *b);
static ngx_int_t ngx_omniroute_pace_read(ngx_http_request_t *r,
    ngx_omniroute_connection_t *conn, or_pace_t *p);
static ngx_int_t ngx_omniroute_pace_cap_key(ngx_str_t *key, u_char *buf,
    ngx_str_t *provider, ngx_str_t *model, const char *feature);


void
ngx_omniroute_pace_count(ngx_http_request_t *r, ngx_uint_t event)
{
    ngx_omniroute_main_conf_t  *omcf;

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);

    if (omcf->shm_zone && omcf->store.sh) {
        (void) ngx_atomic_fetch_add(&omcf->store.sh->stats.pace[event], 1);
    }
}


/* "p:" conn, or "t:" provider "|" model; NGX_DECLINED: too long */

static ngx_int_t
ngx_omniroute_pace_key(ngx_pool_t *pool, ngx_str_t *key, const char *prefix,
    ngx_str_t *a, ngx_str_t *b)
{
    u_char  *p;
    size_t   len;

    len = 2 + a->len + (b ? 1 + b->len : 0);

    if (len > NGX_OMNIROUTE_KEY_MAX) {
        return NGX_DECLINED;
    }

    p = ngx_pnalloc(pool, len);
    if (p == NULL) {
        return NGX_ERROR;
    }

    key->data = p;
    p = ngx_cpymem(p, prefix, 2);
    p = ngx_cpymem(p, a->data, a->len);

    if (b) {
        *p++ = '|';
        p = ngx_cpymem(p, b->data, b->len);
    }

    key->len = p - key->data;

    return NGX_OK;
}


static ngx_uint_t
ngx_omniroute_pace_enabled(ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_connection_t *conn, ngx_omniroute_provider_t *p)
{
    return or_pace_enabled(conn->pacing == NGX_CONF_UNSET
                           ? -1 : (int) conn->pacing,
                           p->kind, ctx->global.pace_auto_enable);
}


/*
 * R-PACE-1..3: a held 429 whose body states a wait.  NGX_OK: the
 * connection is paused (nothing else is written, the request waits for
 * it in the queue); NGX_DECLINED: the usual writes, with a long typed wait
 * turned into an exact-model lockout of at most 24 h (the verdict's scope
 * and cooldown), no pause.
 */

ngx_int_t
ngx_omniroute_pace_failure(ngx_http_request_t *r, ngx_omniroute_attempt_t *a,
    int status)
{
    size_t                      len;
    ngx_str_t                   key;
    or_pace_e                   pe;
    or_msec_t                   ms;
    const char                 *body;
    or_pace_hint_t              h;
    ngx_omniroute_ctx_t        *ctx;
    ngx_omniroute_pace_op_t     op;
    ngx_omniroute_main_conf_t  *omcf;

    ctx = ngx_http_get_module_ctx(r, ngx_http_omniroute_module);
    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);

    if (ctx == NULL || omcf->shm_zone == NULL || status != 429
        || a->state != NGX_OMNIROUTE_ATTEMPT_HELD
        || !ngx_omniroute_pace_enabled(ctx, a->cand->conn, a->cand->provider))
    {
        return NGX_DECLINED;
    }

    if (a->event.len) {
        body = (const char *) a->event.data;
        len = a->event.len;

    } else if (a->body) {
        body = (const char *) a->body->pos;
        len = a->body->last - a->body->pos;

    } else {
        return NGX_DECLINED;
    }

    or_pace_hint(body, len, ngx_omniroute_now(), &h);

    pe = or_pace_decide(1, status, a->verdict.reason, &h,
                        ctx->global.queue_max_wait_ms, &ms);

    switch (pe) {

    case OR_PACE_LOCK:
        /* R-PACE-3: the exact model on this connection, no pause */

        a->verdict.scope = OR_SCOPE_MODEL;
        a->verdict.cooldown_ms = ms;
        a->verdict.hint_ms = OR_MSEC_NONE;
        a->verdict.lockout_capped = 0;

        ngx_omniroute_pace_count(r, NGX_OMNIROUTE_PACE_LOCKOUT);

        ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                      "omniroute: connection \"%V\" asked for %L s "
                      "(RetryInfo), more than the queue wait: model \"%V\" "
                      "locked on it", &a->cand->conn->id,
                      (int64_t) (ms / 1000), &a->cand->target->model);

        return NGX_DECLINED;

    case OR_PACE_PAUSE:
        break;

    default:
        return NGX_DECLINED;
    }

    /* R-PACE-2: the connection pauses for the wait its body stated */

    if (ngx_omniroute_pace_key(r->pool, &key, "p:", &a->cand->conn->id, NULL)
        != NGX_OK)
    {
        return NGX_DECLINED;
    }

    ngx_memzero(&op, sizeof(ngx_omniroute_pace_op_t));
    op.now = ngx_omniroute_now();
    op.ms = ms;
    op.pause = 1;

    if (ngx_omniroute_store_update(&omcf->store, NGX_OMNIROUTE_T_PACE, &key,
                                   sizeof(or_pace_t),
                                   ngx_omniroute_pace_update, &op, 0)
        == NGX_ERROR)
    {
        return NGX_DECLINED;
    }

    a->paced = 1;

    ngx_omniroute_pace_count(r, NGX_OMNIROUTE_PACE_PAUSE);

    ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                  "omniroute: connection \"%V\" paced for %L ms (its 429 "
                  "asked for it)", &a->cand->conn->id, (int64_t) ms);

    return NGX_OK;
}


/* R-TOOL-2: the provider/model backs off requests with as many tools */

void
ngx_omniroute_pace_tools(ngx_http_request_t *r, ngx_omniroute_attempt_t *a)
{
    ngx_str_t                   key;
    ngx_omniroute_ctx_t        *ctx;
    ngx_omniroute_pace_op_t     op;
    ngx_omniroute_main_conf_t  *omcf;

    ctx = ngx_http_get_module_ctx(r, ngx_http_omniroute_module);
    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);

    if (ctx == NULL || omcf->shm_zone == NULL || ctx->scan.tools_count == 0
        || ngx_omniroute_pace_key(r->pool, &key, "t:",
                                  &a->cand->provider->name,
                                  &a->cand->target->model)
           != NGX_OK)
    {
        return;
    }

    ngx_memzero(&op, sizeof(ngx_omniroute_pace_op_t));
    op.now = ngx_omniroute_now();
    op.ms = ctx->global.tool_backoff_ms;
    op.tools = ctx->scan.tools_count;

    (void) ngx_omniroute_store_update(&omcf->store, NGX_OMNIROUTE_T_PACE,
                                      &key, sizeof(or_pace_t),
                                      ngx_omniroute_pace_update, &op, 0);

    ngx_omniroute_pace_count(r, NGX_OMNIROUTE_PACE_TOOL_BACKOFF);

    ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                  "omniroute: \"%V/%V\" refused %uz tools: requests with as "
                  "many skip it for %L s", &a->cand->provider->name,
                  &a->cand->target->model, ctx->scan.tools_count,
                  (int64_t) (op.ms / 1000));
}


static ngx_uint_t
ngx_omniroute_pace_update(void *value, void *arg, or_msec_t *expires)
{
    ngx_omniroute_pace_op_t *op = arg;

    or_pace_t  *p = value;

    op->changed = op->pause ? or_pace_pause(p, op->now, op->ms)
                            : or_pace_tools_fail(p, op->tools, op->now,
                                                 op->ms);

    if (!op->changed) {
        return NGX_OMNIROUTE_UNCHANGED;
    }

    *expires = p->until;

    return NGX_OMNIROUTE_CHANGED;
}


/*
 * R-TOOL-4 at planning: NGX_DECLINED (with the time left) when the
 * request has at least as many tools as the route's provider/model
 * refused; requests with fewer still use it.
 */

ngx_int_t
ngx_omniroute_pace_tools_skip(ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_route_t *route, or_msec_t *retry)
{
    u_char                      buf[NGX_OMNIROUTE_KEY_MAX];
    or_msec_t                   now;
    ngx_str_t                   key;
    or_pace_t                   p;
    ngx_omniroute_main_conf_t  *omcf;

    omcf = ngx_http_get_module_main_conf(ctx->request,
                                         ngx_http_omniroute_module);

    if (ctx->scan.tools_count == 0 || omcf->shm_zone == NULL
        || ngx_omniroute_store_empty(&omcf->store, NGX_OMNIROUTE_T_PACE)
        || 3 + route->provider->name.len + route->target->model.len
           > NGX_OMNIROUTE_KEY_MAX)
    {
        return NGX_OK;
    }

    key.data = buf;
    key.len = ngx_sprintf(buf, "t:%V|%V", &route->provider->name,
                          &route->target->model)
              - buf;

    if (ngx_omniroute_store_read(&omcf->store, NGX_OMNIROUTE_T_PACE, &key,
                                 &p, sizeof(or_pace_t))
        != NGX_OK)
    {
        return NGX_OK;
    }

    now = ngx_omniroute_now();

    if (!or_pace_tools_skip(&p, ctx->scan.tools_count, now)) {
        return NGX_OK;
    }

    *retry = or_pace_left(&p, now);

    ngx_omniroute_pace_count(ctx->request, NGX_OMNIROUTE_PACE_TOOL_SKIP);

    ngx_log_debug4(NGX_LOG_DEBUG_HTTP, ctx->request->connection->log, 0,
                   "omniroute plan: \"%V\" skipped: %uz tools, its model "
                   "\"%V\" refused %uD", &route->conn->id,
                   ctx->scan.tools_count, &route->target->model, p.tools);

    return NGX_DECLINED;
}


/* the pause record of a connection that paces: NGX_OK when one exists */

static ngx_int_t
ngx_omniroute_pace_read(ngx_http_request_t *r,
    ngx_omniroute_connection_t *conn, or_pace_t *p)
{
    u_char                      buf[NGX_OMNIROUTE_KEY_MAX];
    ngx_str_t                   key;
    ngx_omniroute_main_conf_t  *omcf;

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);

    if (omcf->shm_zone == NULL
        || ngx_omniroute_store_empty(&omcf->store, NGX_OMNIROUTE_T_PACE)
        || conn->pacing == 0
        || 2 + conn->id.len > NGX_OMNIROUTE_KEY_MAX)
    {
        return NGX_DECLINED;
    }

    key.data = buf;
    key.len = ngx_sprintf(buf, "p:%V", &conn->id) - buf;

    return ngx_omniroute_store_read(&omcf->store, NGX_OMNIROUTE_T_PACE, &key,
                                    p, sizeof(or_pace_t));
}


/*
 * R-PACE-2 at dispatch: a paused connection has no free slot until the
 * pause ends (NGX_BUSY), so the request waits in its model's queue.
 */

ngx_int_t
ngx_omniroute_pace_busy(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_candidate_t *cand)
{
    or_msec_t  now, left;
    or_pace_t  p;

    if (ngx_omniroute_pace_read(r, cand->conn, &p) != NGX_OK) {
        return NGX_OK;
    }

    now = ngx_omniroute_now();
    left = or_pace_left(&p, now);

    if (left <= 0) {
        return NGX_OK;
    }

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "omniroute dispatch: \"%V\" paused for %L ms",
                   &cand->conn->id, (int64_t) left);

    return NGX_BUSY;
}


/*
 * R-PACE-4: when every route of the model is paused, the end of the
 * earliest pause (absolute ms), else 0: a caller whose queue time ends
 * before it is answered at once.
 */

or_msec_t
ngx_omniroute_pace_until(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx)
{
    or_msec_t        now, until, ms;
    or_pace_t        p;
    ngx_uint_t       i;
    or_pace_admit_e  admit;

    until = 0;
    now = ngx_omniroute_now();

    for (i = 0; i < ctx->nroutes; i++) {
        if (ngx_omniroute_pace_read(r, ctx->routes[i].conn, &p) != NGX_OK) {
            return 0;
        }

        admit = or_pace_admit(&p, now, 0, &ms);

        if (admit == OR_PACE_GO) {
            return 0;
        }

        if (until == 0 || now + ms < until) {
            until = now + ms;
        }
    }

    return until;
}


/* the queue's next poll while every route is paused: at its end */

or_msec_t
ngx_omniroute_pace_poll(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx,
    or_msec_t ms)
{
    or_msec_t  until, now;

    until = ngx_omniroute_pace_until(r, ctx);

    if (until == 0) {
        return ms;
    }

    now = ngx_omniroute_now();

    return ngx_max(ms, until - now + NGX_OMNIROUTE_PACE_SLACK);
}


/*
 * R-PACE-4, as a request queues: every route paused past the caller's
 * queue time (wait_until): it is answered now with the queue-timeout code (503
 * SEMAPHORE_TIMEOUT) and Retry-After, instead of after its time ran out.
 * NGX_DECLINED: not so (it waits, counted when for a pause); NGX_ABORT:
 * so, but the client's stream started already (nothing sent).
 */

ngx_int_t
ngx_omniroute_pace_timeout(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx,
    or_msec_t wait_until)
{
    or_msec_t   until, now;

    until = ngx_omniroute_pace_until(r, ctx);

    if (until == 0) {
        return NGX_DECLINED;
    }

    if (until <= wait_until) {
        /* it waits the pause out in the queue */
        ngx_omniroute_pace_count(r, NGX_OMNIROUTE_PACE_QUEUED);
        return NGX_DECLINED;
    }

    now = ngx_omniroute_now();

    ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                  "omniroute: every connection of \"%V\" is paused for "
                  "%L ms, longer than the queue time left: answered now",
                  &ctx->model, (int64_t) (until - now));

    ngx_omniroute_pace_count(r, NGX_OMNIROUTE_PACE_TIMEOUT);
    ngx_omniroute_count(r, NGX_OMNIROUTE_OUT_QUEUE_TIMEOUT);

    if (ctx->early && ctx->attempts.nelts) {
        /* the client's stream started: the caller ends it in-band */
        return NGX_ABORT;
    }

    /* without it on an allocation failure: the answer still goes */
    (void) ngx_omniroute_set_retry_after(r, until - now);

    return ngx_omniroute_send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                                    "rate_limit_error", "SEMAPHORE_TIMEOUT",
                                    "every connection is paused longer than "
                                    "the queue wait budget");
}


/*
 * "c:" provider "|" model ["|" feature] in buf (NGX_OMNIROUTE_KEY_MAX);
 * NGX_DECLINED: too long
 */

static ngx_int_t
ngx_omniroute_pace_cap_key(ngx_str_t *key, u_char *buf, ngx_str_t *provider,
    ngx_str_t *model, const char *feature)
{
    size_t  n;

    n = feature ? 1 + ngx_strlen(feature) : 0;

    if (3 + provider->len + model->len + n > NGX_OMNIROUTE_KEY_MAX) {
        return NGX_DECLINED;
    }

    key->data = buf;
    key->len = ngx_sprintf(buf, "c:%V|%V", provider, model) - buf;

    if (feature) {
        key->len = ngx_sprintf(buf + key->len, "|%s", feature) - buf;
    }

    return NGX_OK;
}


/*
 * Issue 25: a capability refusal is remembered for its provider/model and
 * the feature it names, for tool_limit.backoff_ms: requests that use the
 * feature skip the target meanwhile; others still use it.  A refusal
 * that names no known feature is not remembered.
 */

void
ngx_omniroute_pace_capability(ngx_http_request_t *r,
    ngx_omniroute_attempt_t *a)
{
    u_char                      buf[NGX_OMNIROUTE_KEY_MAX];
    size_t                      len;
    u_char                     *body;
    unsigned                    f;
    ngx_str_t                   key;
    const char                 *name;
    ngx_omniroute_ctx_t        *ctx;
    ngx_omniroute_pace_op_t     op;
    ngx_omniroute_main_conf_t  *omcf;

    ctx = ngx_http_get_module_ctx(r, ngx_http_omniroute_module);
    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);

    if (ctx == NULL || omcf->shm_zone == NULL) {
        return;
    }

    if (a->event.len) {
        body = a->event.data;
        len = a->event.len;

    } else if (a->body) {
        body = a->body->pos;
        len = a->body->last - a->body->pos;

    } else {
        return;
    }

    f = or_pace_cap_feature((const char *) body, len);
    name = or_pace_cap_name(f);

    if (name == NULL) {
        ngx_log_debug1(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                       "omniroute: the capability refusal of \"%V\" names "
                       "no known feature: not remembered",
                       &a->cand->conn->id);
        return;
    }

    ngx_memzero(&op, sizeof(ngx_omniroute_pace_op_t));
    op.now = ngx_omniroute_now();
    op.ms = ctx->global.tool_backoff_ms;
    op.pause = 1;

    /* the feature's record, then the provider/model's summary */

    if (ngx_omniroute_pace_cap_key(&key, buf, &a->cand->provider->name,
                                   &a->cand->target->model, name)
        != NGX_OK)
    {
        return;
    }

    (void) ngx_omniroute_store_update(&omcf->store, NGX_OMNIROUTE_T_PACE,
                                      &key, sizeof(or_pace_t),
                                      ngx_omniroute_pace_update, &op, 0);

    (void) ngx_omniroute_pace_cap_key(&key, buf, &a->cand->provider->name,
                                      &a->cand->target->model, NULL);

    (void) ngx_omniroute_store_update(&omcf->store, NGX_OMNIROUTE_T_PACE,
                                      &key, sizeof(or_pace_t),
                                      ngx_omniroute_pace_update, &op, 0);

    ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                  "omniroute: \"%V/%V\" does not support %s: requests "
                  "using it skip it for %L s", &a->cand->provider->name,
                  &a->cand->target->model, name, (int64_t) (op.ms / 1000));
}


/*
 * At planning: NGX_DECLINED (with the time left and the feature) when the
 * route's provider/model refused a feature this request uses.
 */

ngx_int_t
ngx_omniroute_pace_capability_skip(ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_route_t *route, or_msec_t *retry)
{
    u_char                      buf[NGX_OMNIROUTE_KEY_MAX];
    unsigned                    f;
    or_msec_t                   now, left;
    ngx_str_t                   key;
    or_pace_t                   p;
    ngx_omniroute_main_conf_t  *omcf;

    omcf = ngx_http_get_module_main_conf(ctx->request,
                                         ngx_http_omniroute_module);

    if (omcf->shm_zone == NULL
        || ngx_omniroute_store_empty(&omcf->store, NGX_OMNIROUTE_T_PACE)
        || ngx_omniroute_pace_cap_key(&key, buf, &route->provider->name,
                                      &route->target->model, NULL)
           != NGX_OK
        || ngx_omniroute_store_read(&omcf->store, NGX_OMNIROUTE_T_PACE,
                                    &key, &p, sizeof(or_pace_t))
           != NGX_OK)
    {
        return NGX_OK;
    }

    now = ngx_omniroute_now();

    if (or_pace_left(&p, now) <= 0) {
        return NGX_OK;
    }

    /* this provider/model refused something: what does the body use? */

    if (!(ctx->cap_uses & NGX_OMNIROUTE_CAP_KNOWN)) {
        ctx->cap_uses = NGX_OMNIROUTE_CAP_KNOWN
                        | or_pace_cap_uses((const char *) ctx->body.data,
                                           ctx->body.len,
                                           ctx->scan.tools_count);
    }

    for (f = OR_PACE_CAP_PREFILL; f < OR_PACE_CAP_MAX; f++) {

        if (!(ctx->cap_uses & ((uint32_t) 1 << f))
            || ngx_omniroute_pace_cap_key(&key, buf, &route->provider->name,
                                          &route->target->model,
                                          or_pace_cap_name(f))
               != NGX_OK
            || ngx_omniroute_store_read(&omcf->store, NGX_OMNIROUTE_T_PACE,
                                        &key, &p, sizeof(or_pace_t))
               != NGX_OK)
        {
            continue;
        }

        left = or_pace_left(&p, now);

        if (left <= 0) {
            continue;
        }

        *retry = left;
        ctx->cap_uses |= NGX_OMNIROUTE_CAP_SKIPPED;

        ngx_log_debug3(NGX_LOG_DEBUG_HTTP, ctx->request->connection->log, 0,
                       "omniroute plan: \"%V\" skipped: its model \"%V\" "
                       "does not support %s", &route->conn->id,
                       &route->target->model, or_pace_cap_name(f));

        return NGX_DECLINED;
    }

    return NGX_OK;
}
