
/*
 * Copyright (C) ngx_omniroute authors
 *
 * What the metrics count, at the points of the request path where it is
 * known: how client requests ended (the state zone's totals, and per
 * model in the metrics zone), attempts and fallbacks by reason (per
 * model and connection too), restatements by rule, breaker transitions,
 * the attempt, first-byte, first-content and request durations, the
 * per-second ring of the status page, and the token usage of committed
 * non-streamed JSON answers (or_usage, fed by the body filter, counted
 * when the request is logged).  Also the attempt trail (header and
 * variable).  Every label is a configured name: a model the client named
 * but the configuration does not declare is "provider/ *" or "(none)".
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute_ctx.h"
#include "or_usage.h"


/* the scan of a committed answer's body stops after this many bytes */
#define NGX_OMNIROUTE_USAGE_MAX    (8 * 1024 * 1024)


struct ngx_omniroute_stats_req_s {
    or_usage_t                    usage;
    ngx_uint_t                    scanning;     /* the committed answer is
                                                   JSON, or a stream with
                                                   usage events */
    void                         *stream;       /* the attempt whose
                                                   stream events fed it */
    ngx_uint_t                    counted;      /* an outcome was counted */
};


static ngx_int_t ngx_omniroute_stats_log(ngx_http_request_t *r);
static ngx_omniroute_stats_req_t *ngx_omniroute_stats_req(
    ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx);
static ngx_omniroute_mzone_t *ngx_omniroute_mzone(ngx_http_request_t *r);
static ngx_uint_t ngx_omniroute_model_slot(ngx_http_request_t *r,
    ngx_omniroute_mzone_t *mz, ngx_omniroute_ctx_t *ctx);
static ngx_omniroute_mpair_t *ngx_omniroute_pair(ngx_http_request_t *r,
    ngx_omniroute_mzone_t *mz, ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_attempt_t *a);
static ngx_omniroute_mconn_t *ngx_omniroute_mconn(ngx_http_request_t *r,
    ngx_omniroute_mzone_t *mz, ngx_omniroute_attempt_t *a);
static ngx_uint_t ngx_omniroute_is_json(ngx_str_t *type);


ngx_int_t
ngx_omniroute_stats_init(ngx_conf_t *cf)
{
    ngx_http_handler_pt        *h;
    ngx_http_core_main_conf_t  *cmcf;
    ngx_omniroute_main_conf_t  *omcf;

    omcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_omniroute_module);

    if (ngx_omniroute_mzone_add(cf, omcf) != NGX_OK) {
        return NGX_ERROR;
    }

    if (omcf->mzone == NULL) {
        return NGX_OK;
    }

    cmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module);

    h = ngx_array_push(&cmcf->phases[NGX_HTTP_LOG_PHASE].handlers);
    if (h == NULL) {
        return NGX_ERROR;
    }

    *h = ngx_omniroute_stats_log;

    return NGX_OK;
}


static ngx_omniroute_store_t *
ngx_omniroute_stats_store(ngx_http_request_t *r)
{
    ngx_omniroute_main_conf_t  *omcf;

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);

    return (omcf->shm_zone && omcf->store.sh) ? &omcf->store : NULL;
}


static ngx_omniroute_mzone_t *
ngx_omniroute_mzone(ngx_http_request_t *r)
{
    ngx_omniroute_main_conf_t  *omcf;

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);

    return (omcf->mzone && omcf->mzone->sh) ? omcf->mzone : NULL;
}


static ngx_omniroute_stats_req_t *
ngx_omniroute_stats_req(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx)
{
    if (ctx->stats == NULL) {
        ctx->stats = ngx_pcalloc(r->main->pool,
                                 sizeof(ngx_omniroute_stats_req_t));
    }

    return ctx->stats;
}


/* the model label of a request: declared, "provider/ *", or "(none)" */

static ngx_uint_t
ngx_omniroute_model_slot(ngx_http_request_t *r, ngx_omniroute_mzone_t *mz,
    ngx_omniroute_ctx_t *ctx)
{
    u_char                     *slash;
    ngx_int_t                   pi;
    ngx_str_t                   pname;
    ngx_omniroute_main_conf_t  *omcf;

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);

    if (ctx->entry) {
        return ctx->entry - (ngx_omniroute_model_t *) omcf->models.elts;
    }

    if (ctx->nroutes) {
        return ngx_omniroute_mzone_direct(mz,
                   ctx->routes[0].provider
                   - (ngx_omniroute_provider_t *) omcf->providers.elts);
    }

    slash = ctx->model.len ? ngx_strlchr(ctx->model.data,
                                         ctx->model.data + ctx->model.len,
                                         '/')
                           : NULL;

    if (slash) {
        pname.data = ctx->model.data;
        pname.len = slash - ctx->model.data;

        pi = ngx_omniroute_provider_lookup(omcf, &pname);

        if (pi != NGX_ERROR) {
            return ngx_omniroute_mzone_direct(mz, (ngx_uint_t) pi);
        }
    }

    return ngx_omniroute_mzone_none(mz);
}


static ngx_omniroute_mpair_t *
ngx_omniroute_pair(ngx_http_request_t *r, ngx_omniroute_mzone_t *mz,
    ngx_omniroute_ctx_t *ctx, ngx_omniroute_attempt_t *a)
{
    ngx_uint_t                  m, ri, ci, base;
    ngx_omniroute_main_conf_t  *omcf;

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);

    ci = a->cand->conn
         - (ngx_omniroute_connection_t *) omcf->connections.elts;

    if (ci >= mz->nconns) {
        return NULL;
    }

    if (a->cand->emergency) {
        /* not a route of the model: a pair of its own (R-EMERG-1) */

        if (mz->emergency_pair == NULL) {
            return NULL;
        }

        m = ngx_omniroute_model_slot(r, mz, ctx);

        return (m < mz->nmodels) ? &mz->sh->pairs[mz->emergency_pair[m]]
                                 : NULL;
    }

    if (ctx->entry) {
        m = ctx->entry - (ngx_omniroute_model_t *) omcf->models.elts;

        if (m >= mz->ndeclared) {
            return NULL;
        }

        base = mz->route_base[m];

        if (ctx->routes == ctx->entry->routes.elts) {
            /* the model's own routes: the route's index is its pair's */

            ri = a->cand->route - ctx->routes;

            return (ri < ctx->nroutes)
                   ? &mz->sh->pairs[mz->route_pair[base + ri]] : NULL;
        }

        /*
         * a copy of the routes, narrowed by a client key's connections=
         * or a lease: the pair is the model's on the connection that was
         * attempted (pairs are one per model and connection)
         */

        for (ri = 0; ri < ctx->entry->routes.nelts; ri++) {
            if (mz->pair_conn[mz->route_pair[base + ri]] == ci) {
                return &mz->sh->pairs[mz->route_pair[base + ri]];
            }
        }

        return NULL;
    }

    return &mz->sh->pairs[mz->direct_pair[ci]];
}


static ngx_omniroute_mconn_t *
ngx_omniroute_mconn(ngx_http_request_t *r, ngx_omniroute_mzone_t *mz,
    ngx_omniroute_attempt_t *a)
{
    ngx_uint_t                  ci;
    ngx_omniroute_main_conf_t  *omcf;

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);

    ci = a->cand->conn
         - (ngx_omniroute_connection_t *) omcf->connections.elts;

    return (ci < mz->nconns) ? &mz->sh->conns[ci] : NULL;
}


void
ngx_omniroute_count(ngx_http_request_t *r, ngx_uint_t outcome)
{
    ngx_omniroute_ctx_t        *ctx;
    ngx_omniroute_store_t      *st;
    ngx_omniroute_mzone_t      *mz;
    ngx_omniroute_stats_req_t  *sr;

    st = ngx_omniroute_stats_store(r);

    if (st && outcome < NGX_OMNIROUTE_OUT_COUNT) {
        (void) ngx_atomic_fetch_add(&st->sh->stats.requests[outcome], 1);
    }

    mz = ngx_omniroute_mzone(r);
    ctx = ngx_http_get_module_ctx(r->main, ngx_http_omniroute_module);

    if (mz == NULL || ctx == NULL || outcome >= NGX_OMNIROUTE_OUTCOMES) {
        return;
    }

    (void) ngx_atomic_fetch_add(
              &mz->sh->models[ngx_omniroute_model_slot(r, mz, ctx)]
                             .requests[outcome], 1);

    sr = ngx_omniroute_stats_req(r, ctx);
    if (sr) {
        sr->counted = 1;
    }
}


void
ngx_omniroute_count_fallback(ngx_http_request_t *r,
    ngx_omniroute_attempt_t *a)
{
    or_reason_e             reason;
    ngx_omniroute_ctx_t    *ctx;
    ngx_omniroute_store_t  *st;
    ngx_omniroute_mzone_t  *mz;
    ngx_omniroute_mpair_t  *pair;

    reason = a->verdict.reason;

    if ((unsigned) reason >= OR_REASON_COUNT) {
        return;
    }

    st = ngx_omniroute_stats_store(r);

    if (st) {
        (void) ngx_atomic_fetch_add(&st->sh->stats.fallbacks[reason], 1);
    }

    mz = ngx_omniroute_mzone(r);
    ctx = ngx_http_get_module_ctx(r->main, ngx_http_omniroute_module);

    if (mz && ctx) {
        pair = ngx_omniroute_pair(r, mz, ctx, a);

        if (pair) {
            (void) ngx_atomic_fetch_add(&pair->fallbacks[reason], 1);
        }
    }
}


/*
 * An attempt's classified result (reason none: a success, counted when
 * it is committed): by reason, by pair, and in the provider's ring with
 * its latency (to the response header for a success, to the failure
 * otherwise).
 */

void
ngx_omniroute_count_attempt(ngx_http_request_t *r,
    ngx_omniroute_attempt_t *a, or_reason_e reason)
{
    or_msec_t                   now;
    ngx_omniroute_ctx_t        *ctx;
    ngx_omniroute_store_t      *st;
    ngx_omniroute_mzone_t      *mz;
    ngx_omniroute_mpair_t      *pair;
    ngx_omniroute_main_conf_t  *omcf;

    if ((unsigned) reason >= OR_REASON_COUNT) {
        return;
    }

    st = ngx_omniroute_stats_store(r);

    if (st) {
        (void) ngx_atomic_fetch_add(&st->sh->stats.attempts[reason], 1);
    }

    mz = ngx_omniroute_mzone(r);
    ctx = ngx_http_get_module_ctx(r->main, ngx_http_omniroute_module);

    if (mz == NULL || ctx == NULL) {
        return;
    }

    pair = ngx_omniroute_pair(r, mz, ctx, a);

    if (pair) {
        (void) ngx_atomic_fetch_add(&pair->attempts[reason], 1);
    }

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);
    now = ngx_omniroute_now();

    ngx_omniroute_mzone_tick(mz, a->cand->provider
                                 - (ngx_omniroute_provider_t *)
                                   omcf->providers.elts,
                             now, reason != OR_REASON_NONE, now - a->start);
}


void
ngx_omniroute_count_restatement(ngx_http_request_t *r, const char *rule)
{
    ngx_omniroute_store_t  *st;

    st = ngx_omniroute_stats_store(r);

    if (st == NULL) {
        return;
    }

    if (rule == NULL) {
        rule = "unnamed";
    }

    ngx_omniroute_store_count_rule(st, rule);
}


/* a breaker changed state (logged by outcome.c) */

void
ngx_omniroute_count_breaker(ngx_http_request_t *r,
    ngx_omniroute_provider_t *p, ngx_uint_t from, ngx_uint_t to)
{
    ngx_omniroute_mzone_t      *mz;
    ngx_omniroute_main_conf_t  *omcf;

    mz = ngx_omniroute_mzone(r);

    if (mz == NULL) {
        return;
    }

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);

    ngx_omniroute_mzone_transition(mz, p - (ngx_omniroute_provider_t *)
                                           omcf->providers.elts,
                                   from, to, ngx_omniroute_now());
}


/* the attempt's response header arrived (r: the attempt) */

void
ngx_omniroute_stats_header(ngx_http_request_t *r, ngx_omniroute_attempt_t *a)
{
    ngx_omniroute_mzone_t  *mz;
    ngx_omniroute_mconn_t  *mc;

    mz = ngx_omniroute_mzone(r);
    mc = mz ? ngx_omniroute_mconn(r, mz, a) : NULL;

    if (mc) {
        ngx_omniroute_hist_observe(&mc->first_byte,
                                   ngx_omniroute_now() - a->start);
    }
}


/* the stream probe saw the first meaningful event of a 200 stream */

void
ngx_omniroute_stats_first_content(ngx_http_request_t *r,
    ngx_omniroute_attempt_t *a)
{
    ngx_omniroute_mzone_t  *mz;
    ngx_omniroute_mconn_t  *mc;

    mz = ngx_omniroute_mzone(r);
    mc = mz ? ngx_omniroute_mconn(r, mz, a) : NULL;

    if (mc) {
        ngx_omniroute_hist_observe(&mc->first_content,
                                   ngx_omniroute_now() - a->start);
    }
}


/* the attempt's subrequest is over */

void
ngx_omniroute_stats_attempt_end(ngx_http_request_t *r,
    ngx_omniroute_attempt_t *a)
{
    ngx_omniroute_mzone_t  *mz;
    ngx_omniroute_mconn_t  *mc;

    a->end = ngx_omniroute_now();

    mz = ngx_omniroute_mzone(r);
    mc = mz ? ngx_omniroute_mconn(r, mz, a) : NULL;

    if (mc) {
        ngx_omniroute_hist_observe(&mc->attempt, a->end - a->start);
    }
}


/*
 * The attempt sr is committed: a 2xx JSON answer (not a stream) has its
 * body scanned for the usage object as it passes through the body filter.
 */

void
ngx_omniroute_stats_commit(ngx_http_request_t *r, ngx_http_request_t *sr,
    ngx_omniroute_attempt_t *a)
{
    ngx_omniroute_ctx_t        *ctx;
    ngx_omniroute_stats_req_t  *st;

    if (a->status < 200 || a->status >= 300
        || !ngx_omniroute_is_json(&sr->headers_out.content_type)
        || ngx_omniroute_mzone(r) == NULL)
    {
        return;
    }

    ctx = ngx_http_get_module_ctx(r->main, ngx_http_omniroute_module);
    st = ctx ? ngx_omniroute_stats_req(r, ctx) : NULL;

    if (st) {
        or_usage_init(&st->usage, NGX_OMNIROUTE_USAGE_MAX);
        st->scanning = 1;
    }
}


/* body of the committed attempt (r: the attempt), on its way out */

void
ngx_omniroute_stats_body(ngx_http_request_t *r, ngx_chain_t *in)
{
    ngx_chain_t                *cl;
    ngx_omniroute_ctx_t        *ctx;
    ngx_omniroute_stats_req_t  *st;

    ctx = ngx_http_get_module_ctx(r->main, ngx_http_omniroute_module);
    st = ctx ? ctx->stats : NULL;

    if (st == NULL || !st->scanning) {
        return;
    }

    for (cl = in; cl; cl = cl->next) {
        if (st->usage.state != OR_USAGE_SCANNING) {
            return;
        }

        if (ngx_buf_in_memory(cl->buf)) {
            or_usage_feed(&st->usage, (const char *) cl->buf->pos,
                          cl->buf->last - cl->buf->pos);

        } else if (ngx_buf_size(cl->buf)) {
            /* a body in a file is not read again */
            st->scanning = 0;
            return;
        }
    }
}


/*
 * An event of an attempt's stream (r: the attempt): the usage it carries,
 * if any — the usage-only chunk of Chat Completions, Anthropic's
 * message_start (input) and message_delta (output), the Responses API's
 * response.completed, every Gemini chunk's usageMetadata
 * (or_usage_event()); each count keeps the largest value seen, as the
 * formats repeat or grow them.
 */

void
ngx_omniroute_stats_event(ngx_http_request_t *r, ngx_omniroute_attempt_t *a,
    const char *data, size_t len)
{
    size_t                      k;
    or_usage_t                  u;
    ngx_omniroute_ctx_t        *ctx;
    ngx_omniroute_stats_req_t  *st;

    if (len < sizeof("\"usage\":{}") - 1 || ngx_omniroute_mzone(r) == NULL
        || !or_usage_event(&u, data, len))
    {
        return;
    }

    ctx = ngx_http_get_module_ctx(r->main, ngx_http_omniroute_module);
    st = ctx ? ngx_omniroute_stats_req(r, ctx) : NULL;

    if (st == NULL) {
        return;
    }

    if (st->stream != a) {
        /* the attempt's first: a fallover's usage does not carry over */
        or_usage_init(&st->usage, 0);
        st->stream = a;
    }

    for (k = 0; k < OR_USAGE_KINDS; k++) {
        if ((u.seen & (1u << k)) && u.tokens[k] >= st->usage.tokens[k]) {
            st->usage.tokens[k] = u.tokens[k];
            st->usage.seen |= 1u << k;
        }
    }

    st->usage.found = 1;
    st->scanning = 1;
}


static ngx_uint_t
ngx_omniroute_is_json(ngx_str_t *type)
{
    size_t   len;
    u_char  *semi;

    len = type->len;
    semi = ngx_strlchr(type->data, type->data + len, ';');

    if (semi) {
        len = semi - type->data;
    }

    while (len && type->data[len - 1] == ' ') {
        len--;
    }

    /* the providers' spelling compared first, as it is */

    if (len == sizeof("application/json") - 1
        && (ngx_memcmp(type->data, "application/json", len) == 0
            || ngx_strncasecmp(type->data, (u_char *) "application/json", len)
               == 0))
    {
        return 1;
    }

    /* application/vnd.x+json */
    return len > 5
           && ngx_strncasecmp(type->data + len - 5, (u_char *) "+json", 5)
              == 0;
}


/*
 * The token counts of the committed answer (a JSON answer's usage object
 * read whole, or what a stream's events reported), for the key's budget
 * (budget.c): tokens[OR_USAGE_KINDS], a bit per kind seen.
 */

unsigned
ngx_omniroute_stats_usage(ngx_omniroute_ctx_t *ctx, uint64_t *tokens)
{
    size_t                      k;
    ngx_omniroute_stats_req_t  *st;

    st = ctx->stats;

    if (st == NULL || !st->scanning || !or_usage_found(&st->usage)) {
        return 0;
    }

    for (k = 0; k < OR_USAGE_KINDS; k++) {
        tokens[k] = st->usage.tokens[k];
    }

    return st->usage.seen;
}


/*
 * The log phase of a gateway request: its duration by model, and the
 * token usage of its committed answer by pair (and its cost).
 */

static ngx_int_t
ngx_omniroute_stats_log(ngx_http_request_t *r)
{
    ngx_msec_int_t              ms;
    ngx_uint_t                  i, k, ci;
    ngx_time_t                 *tp;
    ngx_omniroute_ctx_t        *ctx;
    ngx_omniroute_mzone_t      *mz;
    ngx_omniroute_mpair_t      *pair;
    ngx_omniroute_attempt_t    *a;
    ngx_omniroute_stats_req_t  *st;
    ngx_omniroute_main_conf_t  *omcf;

    if (r != r->main) {
        return NGX_OK;
    }

    ctx = ngx_http_get_module_ctx(r, ngx_http_omniroute_module);
    mz = ngx_omniroute_mzone(r);

    if (ctx == NULL || ctx->stats == NULL || mz == NULL) {
        return NGX_OK;
    }

    st = ctx->stats;

    if (st->counted) {
        tp = ngx_timeofday();
        ms = (ngx_msec_int_t) ((tp->sec - r->start_sec) * 1000
                               + (tp->msec - r->start_msec));

        ngx_omniroute_hist_observe(
            &mz->sh->models[ngx_omniroute_model_slot(r, mz, ctx)].duration,
            ngx_max(ms, 0));
    }

    if (!st->scanning || !or_usage_found(&st->usage)) {
        return NGX_OK;
    }

    /* the committed attempt is the last one committed */

    a = ctx->attempts.elts;

    for (i = ctx->attempts.nelts; i > 0; i--) {
        if (a[i - 1].state == NGX_OMNIROUTE_ATTEMPT_COMMITTED) {
            break;
        }
    }

    if (i == 0) {
        return NGX_OK;
    }

    pair = ngx_omniroute_pair(r, mz, ctx, &a[i - 1]);

    if (pair == NULL) {
        return NGX_OK;
    }

    for (k = 0; k < OR_USAGE_KINDS; k++) {
        if (st->usage.seen & (1u << k)) {
            (void) ngx_atomic_fetch_add(&pair->tokens[k],
                                  (ngx_atomic_int_t) st->usage.tokens[k]);
        }
    }

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);
    ci = a[i - 1].cand->conn
         - (ngx_omniroute_connection_t *) omcf->connections.elts;

    if (mz->cost4[ci]) {
        (void) ngx_atomic_fetch_add(&pair->cost, (ngx_atomic_int_t)
                                    ((st->usage.tokens[OR_USAGE_PROMPT]
                                      + st->usage.tokens[OR_USAGE_COMPLETION])
                                     * mz->cost4[ci]));
    }

    ngx_log_debug4(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "omniroute usage: \"%V\" prompt:%uL completion:%uL "
                   "cached:%uL", &a[i - 1].cand->conn->id,
                   st->usage.tokens[OR_USAGE_PROMPT],
                   st->usage.tokens[OR_USAGE_COMPLETION],
                   st->usage.tokens[OR_USAGE_CACHED]);

    return NGX_OK;
}


/*
 * The attempt trail: "connection;status-or-reason;duration" per attempt,
 * joined by ", ".  A held error shows the provider's status, a transport
 * failure its reason (transport, timeout); the running (committed)
 * attempt its time so far.
 */

ngx_int_t
ngx_omniroute_stats_trail(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx,
    ngx_str_t *trail)
{
    u_char                   *p, *last;
    size_t                    len;
    or_msec_t                 now, end;
    ngx_uint_t                i;
    ngx_omniroute_attempt_t  *a;

    a = ctx->attempts.elts;
    now = ngx_omniroute_now();

    len = 0;

    for (i = 0; i < ctx->attempts.nelts; i++) {
        len += a[i].cand->conn->id.len + sizeof(";transport;ms, ") - 1
               + NGX_INT64_LEN;
    }

    ngx_str_null(trail);

    if (len == 0) {
        return NGX_OK;
    }

    p = ngx_pnalloc(r->pool, len);
    if (p == NULL) {
        return NGX_ERROR;
    }

    trail->data = p;
    last = p + len;

    for (i = 0; i < ctx->attempts.nelts; i++) {
        if (i) {
            p = ngx_slprintf(p, last, ", ");
        }

        end = a[i].end ? a[i].end : now;

        if (a[i].state == NGX_OMNIROUTE_ATTEMPT_TRANSPORT) {
            p = ngx_slprintf(p, last, "%V;%s;%Lms", &a[i].cand->conn->id,
                             a[i].transport == OR_TRANSPORT_TIMEOUT
                             ? "timeout" : "transport",
                             (int64_t) ngx_max(end - a[i].start, 0));

        } else if (a[i].status) {
            p = ngx_slprintf(p, last, "%V;%ui;%Lms", &a[i].cand->conn->id,
                             a[i].status,
                             (int64_t) ngx_max(end - a[i].start, 0));

        } else {
            p = ngx_slprintf(p, last, "%V;-;%Lms", &a[i].cand->conn->id,
                             (int64_t) ngx_max(end - a[i].start, 0));
        }
    }

    trail->len = p - trail->data;

    return NGX_OK;
}
