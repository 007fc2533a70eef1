
/*
 * Copyright (C) ngx_omniroute authors
 *
 * The Claude usage-limit wall of a usage_lane=on connection (R-LANE,
 * docs/resilience.md): the slow header of its attempts while its lane is
 * active, what a failed attempt means for the lane (src/core/or_lane.c
 * decides, the record is in the zone, table "lane", key the connection
 * id), and the session-limit reset tried first on a limit_reset=on
 * connection (R-LANE-7): two internal subrequests to the attempt
 * location, their answers in memory, so that no worker blocks.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute_ctx.h"
#include "or_lane.h"


#define NGX_OMNIROUTE_LANE_HEADERS_MAX  64


typedef struct {
    or_lane_verdict_t            *verdict;
    or_msec_t                     now;
    ngx_uint_t                    changed;
} ngx_omniroute_lane_update_t;


typedef struct {
    or_reset_result_e             result;
    or_msec_t                     next_at;
    or_msec_t                     now;
} ngx_omniroute_lane_reset_t;


/* a request's lane (ctx->lane): made by its first wall, see outcome */
struct ngx_omniroute_lane_req_s {
    ngx_omniroute_candidate_t    *again;        /* the next attempt's */
    ngx_uint_t                    retries;      /* attempts the lane made */
    or_msec_t                     wait_start;   /* first slot_busy */
    ngx_omniroute_candidate_t    *cand;         /* of the reset */
    ngx_omniroute_attempt_t      *held;         /* the wall's attempt */
    ngx_http_request_t           *sr;           /* probe or claim */
    ngx_str_t                     body;         /* its answer */
    ngx_uint_t                    status;
    ngx_omniroute_resume_pt       resume;       /* on with the attempts */
    unsigned                      full:1;       /* reset: no slow header */
    unsigned                      reset_tried:1;
    unsigned                      claim:1;
    unsigned                      done:1;
};


static ngx_omniroute_store_t *ngx_omniroute_lane_store(ngx_http_request_t *r);
static ngx_uint_t ngx_omniroute_lane_apply(void *value, void *arg,
    or_msec_t *expires);
static ngx_uint_t ngx_omniroute_lane_memo(void *value, void *arg,
    or_msec_t *expires);
static void ngx_omniroute_lane_write(ngx_http_request_t *r,
    ngx_omniroute_candidate_t *cand, or_lane_verdict_t *v, or_msec_t now);
static ngx_int_t ngx_omniroute_lane_reset_start(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, ngx_uint_t claim);
static ngx_int_t ngx_omniroute_lane_reset_done(ngx_http_request_t *sr,
    void *data, ngx_int_t rc);
static void ngx_omniroute_lane_reset_handler(ngx_http_request_t *r);
static void ngx_omniroute_lane_reset_expired(ngx_event_t *ev);
static void ngx_omniroute_lane_reset_memo(ngx_http_request_t *r,
    ngx_omniroute_candidate_t *cand, or_reset_result_e result,
    or_msec_t next_at);


static ngx_str_t  ngx_omniroute_lane_header = ngx_string(OR_LANE_HEADER);
static ngx_str_t  ngx_omniroute_lane_value =
    ngx_string(OR_LANE_HEADER_VALUE);


static ngx_omniroute_store_t *
ngx_omniroute_lane_store(ngx_http_request_t *r)
{
    ngx_omniroute_main_conf_t  *omcf;

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);

    return omcf->shm_zone ? &omcf->store : NULL;
}


/*
 * R-LANE-2: the attempt on cand carries "anthropic-usage-limit: slow"
 * while its connection's lane is active (not after a session-limit reset
 * of this request: that one runs at full speed).
 */

ngx_int_t
ngx_omniroute_lane_headers(ngx_http_request_t *r, ngx_http_request_t *sr,
    ngx_omniroute_candidate_t *cand)
{
    or_lane_t                 l;
    ngx_table_elt_t          *h;
    ngx_omniroute_ctx_t      *ctx;
    ngx_omniroute_store_t    *st;

    if (!cand->conn->usage_lane) {
        return NGX_OK;
    }

    ctx = ngx_http_get_module_ctx(r, ngx_http_omniroute_module);
    st = ngx_omniroute_lane_store(r);

    if (ctx == NULL || ctx->current == NULL || st == NULL
        || (ctx->lane && ctx->lane->full)
        || ngx_omniroute_store_read(st, NGX_OMNIROUTE_T_LANE, &cand->conn->id,
                                    &l, sizeof(or_lane_t))
           != NGX_OK
        || !or_lane_active(&l, ngx_omniroute_now()))
    {
        return NGX_OK;
    }

    h = ngx_list_push(&sr->headers_in.headers);
    if (h == NULL) {
        return NGX_ERROR;
    }

    h->hash = ngx_hash_key((u_char *) OR_LANE_HEADER,
                           sizeof(OR_LANE_HEADER) - 1);
    h->key = ngx_omniroute_lane_header;
    h->lowcase_key = ngx_omniroute_lane_header.data;
#if (nginx_version >= 1023000)
    h->next = NULL;
#endif
    h->value = ngx_omniroute_lane_value;

    ctx->current->lane_slow = 1;

    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "omniroute lane: \"%V\" in the slow lane",
                   &cand->conn->id);

    return NGX_OK;
}


/* the connection the lane tries again, once; NULL: none */

ngx_omniroute_candidate_t *
ngx_omniroute_lane_next(ngx_omniroute_ctx_t *ctx)
{
    ngx_omniroute_candidate_t  *cand;

    if (ctx->lane == NULL) {
        return NULL;
    }

    cand = ctx->lane->again;
    ctx->lane->again = NULL;

    return cand;
}


/* it got its slot: an attempt of the lane's, not of max_attempts */

void
ngx_omniroute_lane_retried(ngx_omniroute_ctx_t *ctx)
{
    ctx->lane->retries++;
}


ngx_uint_t
ngx_omniroute_lane_retries(ngx_omniroute_ctx_t *ctx)
{
    return ctx->lane ? ctx->lane->retries : 0;
}


static ngx_uint_t
ngx_omniroute_lane_apply(void *value, void *arg, or_msec_t *expires)
{
    ngx_omniroute_lane_update_t *u = arg;

    if (!or_lane_apply(value, u->verdict, u->now)) {
        return NGX_OMNIROUTE_UNCHANGED;
    }

    u->changed = 1;
    *expires = or_lane_expires(value, u->now);

    return NGX_OMNIROUTE_CHANGED;
}


static void
ngx_omniroute_lane_write(ngx_http_request_t *r,
    ngx_omniroute_candidate_t *cand, or_lane_verdict_t *v, or_msec_t now)
{
    ngx_omniroute_store_t        *st;
    ngx_omniroute_lane_update_t   u;

    st = ngx_omniroute_lane_store(r);

    if (st == NULL) {
        return;
    }

    u.verdict = v;
    u.now = now;
    u.changed = 0;

    (void) ngx_omniroute_store_update(st, NGX_OMNIROUTE_T_LANE,
                                      &cand->conn->id, sizeof(or_lane_t),
                                      ngx_omniroute_lane_apply, &u, 0);

    if (!u.changed) {
        return;
    }

    switch (v->action) {

    case OR_LANE_ENTER:
        (void) ngx_atomic_fetch_add(&st->sh->stats.lane_entries, 1);

        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                      "omniroute: connection \"%V\" hit the usage-limit "
                      "wall, in the low-priority lane for %L s",
                      &cand->conn->id, (int64_t) (v->until - now) / 1000);
        break;

    case OR_LANE_END:
        (void) ngx_atomic_fetch_add(&st->sh->stats.lane_ends[v->end], 1);

        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                      "omniroute: the low-priority lane of connection "
                      "\"%V\" ended: %s", &cand->conn->id,
                      or_lane_end_name(v->end));
        break;

    default:
        break;
    }
}


/*
 * R-LANE-1..7: a failed attempt on a usage_lane=on or limit_reset=on
 * connection.
 * NGX_DECLINED: not (or no longer) a lane matter, the normal path;
 * NGX_OK: the same connection again now (ngx_omniroute_lane_next());
 * NGX_AGAIN: the same connection after *ms; NGX_DONE: a session-limit
 * reset runs first (resume is called when it is over); NGX_ERROR.
 */

ngx_int_t
ngx_omniroute_lane_outcome(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_attempt_t *a, or_msec_t *ms, ngx_omniroute_resume_pt resume)
{
    or_msec_t                   now;
    ngx_uint_t                  n, has;
    or_lane_t                   l;
    or_header_t                 hdrs[NGX_OMNIROUTE_LANE_HEADERS_MAX];
    or_lane_req_t               req;
    ngx_table_elt_t            *h;
    or_lane_headers_t           lh;
    or_lane_verdict_t           v;
    ngx_omniroute_store_t      *st;
    ngx_omniroute_list_iter_t   it;

    if ((!a->cand->conn->usage_lane && !a->cand->conn->limit_reset)
        || a->state != NGX_OMNIROUTE_ATTEMPT_HELD
        || a->limit != NGX_OMNIROUTE_CUT_NONE
        || (a->status != 429 && a->status != 529)
        || a->sr == NULL)
    {
        return NGX_DECLINED;
    }

    st = ngx_omniroute_lane_store(r);

    if (st == NULL) {
        return NGX_DECLINED;
    }

    /* the request's first wall: its lane state */

    if (ctx->lane == NULL) {
        ctx->lane = ngx_pcalloc(r->pool, sizeof(ngx_omniroute_lane_req_t));
        if (ctx->lane == NULL) {
            return NGX_ERROR;
        }
    }

    ctx->lane->resume = resume;

    now = ngx_omniroute_now();

    has = (ngx_omniroute_store_read(st, NGX_OMNIROUTE_T_LANE,
                                    &a->cand->conn->id, &l,
                                    sizeof(or_lane_t))
           == NGX_OK);

    /* the provider's headers: untrusted, read by or_lane_parse() */

    n = 0;
    ngx_omniroute_list_start(&it, &a->sr->headers_out.headers);

    while (n < NGX_OMNIROUTE_LANE_HEADERS_MAX
           && (h = ngx_omniroute_list_next(&it)) != NULL)
    {
        if (h->hash == 0) {
            continue;
        }

        hdrs[n].name = (const char *) h->key.data;
        hdrs[n].name_len = h->key.len;
        hdrs[n].value = (const char *) h->value.data;
        hdrs[n].value_len = h->value.len;
        n++;
    }

    or_lane_parse(hdrs, n, now, &lh);

    req.slow_sent = a->lane_slow;
    req.wait_start = ctx->lane->wait_start ? ctx->lane->wait_start
                                           : OR_MSEC_NONE;
    req.budget_left = ngx_omniroute_budget_left(ctx);
    req.rnd = (uint32_t) ngx_random();

    or_lane_decide(has ? &l : NULL, (int) a->status, &lh, &req, now, &v);

    ngx_log_debug4(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "omniroute lane: \"%V\" %ui: action %d, end %s",
                   &a->cand->conn->id, a->status, (int) v.action,
                   or_lane_end_name(v.end));

    /*
     * R-LANE-7: on the wall, the session-limit reset first (before the
     * lane), once per request, memoised in the zone; then this outcome is
     * looked at again (ctx->lane->resume) unless the limit was reset
     */

    if (a->cand->conn->limit_reset && !ctx->lane->reset_tried
        && a->status == 429 && lh.rejected && !lh.overage && !a->lane_slow
        && or_lane_reset_due(has ? &l : NULL, now))
    {
        ctx->lane->reset_tried = 1;
        ctx->lane->cand = a->cand;
        ctx->lane->held = a;

        if (ngx_omniroute_lane_reset_start(r, ctx, 0) == NGX_OK) {
            return NGX_DONE;
        }

        ctx->current = a;
        ngx_omniroute_lane_reset_memo(r, a->cand, OR_RESET_FAILED,
                                      OR_MSEC_NONE);
    }

    if (!a->cand->conn->usage_lane) {
        /* limit_reset=on alone: no lane */
        return NGX_DECLINED;
    }

    switch (v.action) {

    case OR_LANE_ENTER:
        ngx_omniroute_lane_write(r, a->cand, &v, now);
        ngx_omniroute_count_attempt(r, a, a->verdict.reason);
        ctx->lane->again = a->cand;
        ctx->lane->full = 0;

        return NGX_OK;

    case OR_LANE_WAIT:
        ngx_omniroute_lane_write(r, a->cand, &v, now);
        (void) ngx_atomic_fetch_add(&st->sh->stats.lane_waits, 1);
        ngx_omniroute_count_attempt(r, a, a->verdict.reason);

        if (ctx->lane->wait_start == 0) {
            ctx->lane->wait_start = now;
        }

        ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                      "omniroute: the low-priority lane of connection "
                      "\"%V\" is busy, retrying in %L ms",
                      &a->cand->conn->id, (int64_t) v.wait_ms);

        ctx->lane->again = a->cand;
        *ms = v.wait_ms;

        return NGX_AGAIN;

    case OR_LANE_END:
        ngx_omniroute_lane_write(r, a->cand, &v, now);
        return NGX_DECLINED;

    default:
        return NGX_DECLINED;
    }
}


static ngx_uint_t
ngx_omniroute_lane_memo(void *value, void *arg, or_msec_t *expires)
{
    ngx_omniroute_lane_reset_t *m = arg;

    if (!or_lane_reset_record(value, m->result, m->next_at, m->now)) {
        return NGX_OMNIROUTE_UNCHANGED;
    }

    *expires = or_lane_expires(value, m->now);

    return NGX_OMNIROUTE_CHANGED;
}


static void
ngx_omniroute_lane_reset_memo(ngx_http_request_t *r,
    ngx_omniroute_candidate_t *cand, or_reset_result_e result,
    or_msec_t next_at)
{
    ngx_omniroute_store_t       *st;
    ngx_omniroute_lane_reset_t   m;

    st = ngx_omniroute_lane_store(r);

    if (st == NULL) {
        return;
    }

    m.result = result;
    m.next_at = next_at;
    m.now = ngx_omniroute_now();

    (void) ngx_omniroute_store_update(st, NGX_OMNIROUTE_T_LANE,
                                      &cand->conn->id, sizeof(or_lane_t),
                                      ngx_omniroute_lane_memo, &m, 0);

    (void) ngx_atomic_fetch_add(&st->sh->stats.limit_resets[result], 1);

    ngx_log_error((result == OR_RESET_FAILED ? NGX_LOG_WARN
                                             : NGX_LOG_NOTICE),
                  r->connection->log, 0,
                  "omniroute: session-limit reset of connection \"%V\": %s",
                  &cand->conn->id, or_reset_result_name(result));
}


/*
 * R-LANE-7: the usage probe (claim 0: GET /api/oauth/usage?at_wall=1&
 * skip_spend=1) or the reset claim (claim 1: POST /api/organizations/
 * <org>/reset_rate_limits {"program":"juniper_tide"}), at the provider's
 * origin, as a subrequest to the attempt location with the connection's
 * credential and the provider's fixed headers (never the client's); the
 * answer is kept in memory (subrequest_output_buffer_size).
 */

static ngx_int_t
ngx_omniroute_lane_reset_start(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, ngx_uint_t claim)
{
    int                         budget;
    u_char                     *p, *d, *last;
    size_t                      len, origin;
    or_msec_t                   ms;
    ngx_buf_t                  *b;
    ngx_str_t                   body, *url;
    ngx_list_t                  headers;
    ngx_chain_t                *cl;
    ngx_table_elt_t            *h;
    ngx_http_request_t         *sr;
    ngx_http_request_body_t    *rb;
    ngx_omniroute_provider_t   *pv;
    ngx_omniroute_candidate_t  *cand;
    ngx_http_post_subrequest_t *ps;

    static ngx_str_t  usage = ngx_string("/api/oauth/usage?at_wall=1"
                                         "&skip_spend=1");
    static ngx_str_t  reset = ngx_string("/reset_rate_limits");
    static ngx_str_t  orgs = ngx_string("/api/organizations/");
    static ngx_str_t  program = ngx_string("{\"program\":\"juniper_tide\"}");
    static ngx_str_t  ct = ngx_string("Content-Type");
    static ngx_str_t  json = ngx_string("application/json");

    cand = ctx->lane->cand;
    pv = cand->provider;
    url = &pv->url;

    /* the origin: scheme://host[:port] of the provider's URL */

    p = ngx_strlcasestrn(url->data, url->data + url->len,
                         (u_char *) "://", 3 - 1);
    if (p == NULL) {
        return NGX_ERROR;
    }

    p += 3;
    last = url->data + url->len;

    while (p < last && *p != '/') {
        p++;
    }

    origin = p - url->data;

    len = origin + (claim ? orgs.len + cand->conn->org.len + reset.len
                          : usage.len);

    d = ngx_pnalloc(r->pool, len);
    if (d == NULL) {
        return NGX_ERROR;
    }

    ctx->upstream_url.data = d;
    d = ngx_cpymem(d, url->data, origin);

    if (claim) {
        d = ngx_cpymem(d, orgs.data, orgs.len);
        d = ngx_cpymem(d, cand->conn->org.data, cand->conn->org.len);
        d = ngx_cpymem(d, reset.data, reset.len);

    } else {
        d = ngx_cpymem(d, usage.data, usage.len);
    }

    ctx->upstream_url.len = d - ctx->upstream_url.data;

    ps = ngx_palloc(r->pool, sizeof(ngx_http_post_subrequest_t));
    if (ps == NULL) {
        return NGX_ERROR;
    }

    ps->handler = ngx_omniroute_lane_reset_done;
    ps->data = ctx;

    /*
     * Everything the subrequest gets is made before it exists: once
     * posted, it would run with what it has, the client's headers
     * included.
     */

    /* a body of its own: the client's is not sent */

    body.len = claim ? program.len : 0;
    body.data = program.data;

    rb = ngx_pcalloc(r->pool, sizeof(ngx_http_request_body_t));
    if (rb == NULL) {
        return NGX_ERROR;
    }

    if (body.len) {
        b = ngx_calloc_buf(r->pool);
        cl = ngx_alloc_chain_link(r->pool);

        if (b == NULL || cl == NULL) {
            return NGX_ERROR;
        }

        b->pos = body.data;
        b->last = body.data + body.len;
        b->memory = 1;
        b->last_buf = 1;

        cl->buf = b;
        cl->next = NULL;
        rb->bufs = cl;
    }

    /* the connection's credential and the provider's fixed headers only */

    if (ngx_list_init(&headers, r->pool, 8, sizeof(ngx_table_elt_t))
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (ngx_omniroute_attempt_credentials(r, &headers, cand) != NGX_OK) {
        return NGX_ERROR;
    }

    if (claim) {
        h = ngx_list_push(&headers);
        if (h == NULL) {
            return NGX_ERROR;
        }

        h->hash = 1;
        h->key = ct;
        h->lowcase_key = (u_char *) "content-type";
#if (nginx_version >= 1023000)
        h->next = NULL;
#endif
        h->value = json;
    }

    ctx->current = NULL;
    ctx->lane->claim = claim;
    ctx->lane->sr = NULL;

    if (ngx_http_subrequest(r, &ctx->lcf->pass_uri, NULL, &sr, ps,
                            NGX_HTTP_SUBREQUEST_IN_MEMORY)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    /* from here on nothing fails */

    ctx->lane->sr = sr;
    r->write_event_handler = ngx_omniroute_lane_reset_handler;

    sr->request_body = rb;
    sr->headers_in.headers = headers;
    sr->headers_in.content_length_n = body.len;

    /* the client's, found in its list by the header parser */
    sr->headers_in.content_length = NULL;
    sr->headers_in.content_type = NULL;
    sr->headers_in.chunked = 0;
    sr->headers_in.authorization = NULL;

    if (claim) {
        sr->method = NGX_HTTP_POST;
        ngx_str_set(&sr->method_name, "POST");

    } else {
        sr->method = NGX_HTTP_GET;
        ngx_str_set(&sr->method_name, "GET");
    }

    /* R-LANE-7: bounded as an attempt is (the request budget included) */

    ms = or_wait_attempt_limit(ctx->global.execution_max_wait_ms,
                               ngx_omniroute_budget_left(ctx), &budget);

    ctx->exec.handler = ngx_omniroute_lane_reset_expired;

    if (ctx->exec.timer_set) {
        ngx_del_timer(&ctx->exec);
    }

    ngx_add_timer(&ctx->exec, (ngx_msec_t) ngx_max(ms, 1));

    ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                  "omniroute: connection \"%V\" hit the usage-limit wall, "
                  "session-limit reset: %s", &cand->conn->id,
                  claim ? "claiming" : "probing");

    return NGX_OK;
}


static ngx_int_t
ngx_omniroute_lane_reset_done(ngx_http_request_t *sr, void *data,
    ngx_int_t rc)
{
    ngx_omniroute_ctx_t *ctx = data;

    if (ctx->lane->sr != sr) {
        return rc;
    }

    if (ctx->exec.timer_set) {
        ngx_del_timer(&ctx->exec);
    }

    /* no answer (connect error, timeout): 0 */
    ctx->lane->status = (rc == NGX_ERROR || rc >= NGX_HTTP_SPECIAL_RESPONSE)
                       ? 0 : sr->headers_out.status;

    ctx->lane->body.len = 0;

    if (sr->out && sr->out->buf) {
        ctx->lane->body.data = sr->out->buf->pos;
        ctx->lane->body.len = sr->out->buf->last - sr->out->buf->pos;
    }

    ctx->lane->done = 1;

    return NGX_OK;
}


/*
 * R-LANE-7: the probe or claim is out of time (execution_max_wait_ms, the
 * request budget): its upstream is timed out as an attempt's is, the
 * post-subrequest handler sees no answer, and the reset counts as failed
 * (its backoff); the request goes on as after any failed reset.
 */

static void
ngx_omniroute_lane_reset_expired(ngx_event_t *ev)
{
    ngx_connection_t     *pc;
    ngx_http_request_t   *r, *sr;
    ngx_http_upstream_t  *u;
    ngx_omniroute_ctx_t  *ctx;

    r = ev->data;
    ctx = ngx_http_get_module_ctx(r, ngx_http_omniroute_module);
    sr = ctx->lane->sr;

    if (sr == NULL || ctx->lane->done) {
        return;
    }

    u = sr->upstream;

    if (u == NULL || u->peer.connection == NULL) {
        /* not connected yet (resolving): a little later */
        ngx_add_timer(ev, 100);
        return;
    }

    ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                  "omniroute: session-limit reset of connection \"%V\": "
                  "the %s got no answer in time",
                  &ctx->lane->cand->conn->id,
                  ctx->lane->claim ? "claim" : "usage probe");

    pc = u->peer.connection;
    pc->read->timedout = 1;
    pc->read->handler(pc->read);
}


/*
 * The parent's write handler while a probe or claim runs: when it is
 * over, the next step (the claim), or the memo and on with the attempts
 * (ctx->lane->resume: at full speed after a reset, else in the lane).
 */

static void
ngx_omniroute_lane_reset_handler(ngx_http_request_t *r)
{
    or_msec_t                   next_at;
    ngx_uint_t                  ok;
    or_reset_result_e           result;
    ngx_omniroute_ctx_t        *ctx;
    ngx_omniroute_candidate_t  *cand;

    ctx = ngx_http_get_module_ctx(r, ngx_http_omniroute_module);

    if (ctx == NULL || ctx->lane == NULL || !ctx->lane->done) {
        return;
    }

    ctx->lane->done = 0;
    ctx->lane->sr = NULL;
    cand = ctx->lane->cand;

    ok = (ctx->lane->status >= 200 && ctx->lane->status < 300);

    if (!ctx->lane->claim) {

        if (ok && or_lane_usage_parse((char *) ctx->lane->body.data,
                                      ctx->lane->body.len,
                                      ngx_omniroute_now(), &next_at))
        {
            if (ngx_omniroute_lane_reset_start(r, ctx, 1) == NGX_OK) {
                return;
            }

            result = OR_RESET_FAILED;

        } else {
            result = ok ? OR_RESET_UNAVAILABLE : OR_RESET_FAILED;

            if (ok) {
                (void) or_lane_usage_parse((char *) ctx->lane->body.data,
                                           ctx->lane->body.len,
                                           ngx_omniroute_now(), &next_at);
            }
        }

    } else {
        result = ok ? or_lane_claim_parse((char *) ctx->lane->body.data,
                                          ctx->lane->body.len,
                                          ngx_omniroute_now(), &next_at)
                    : OR_RESET_FAILED;
    }

    if (result == OR_RESET_FAILED) {
        next_at = OR_MSEC_NONE;
    }

    ngx_omniroute_lane_reset_memo(r, cand, result, next_at);

    if (result == OR_RESET_RESET || result == OR_RESET_NOT_LIMITED) {
        /* the same connection at full speed: no lane, no failure */
        ngx_omniroute_count_attempt(r, ctx->lane->held,
                                    ctx->lane->held->verdict.reason);
        ctx->lane->full = 1;
        ctx->lane->again = cand;
        ctx->lane->resume(r, ctx, 0);
        return;
    }

    /* no reset: the wall's outcome again (the lane, else the normal path) */
    ctx->current = ctx->lane->held;
    ctx->lane->resume(r, ctx, 1);
}
