
/*
 * Copyright (C) ngx_omniroute authors
 *
 * The outcome of an attempt: classify it (src/core: restatement, then
 * classification) and write it, exactly once, into the shared state:
 * provider breaker, connection cooldown, model lockout, request_rejected
 * per connection and model; count it for the metrics.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute_ctx.h"
#include "or_outcome.h"
#include "or_classify.h"


#define NGX_OMNIROUTE_HEADERS_MAX      64

/*
 * How long a record a success settled, but which still carries an epoch
 * for the cluster merge (a tombstone), is kept: longer than the mirror's
 * full resync, so that no stale copy outlives it.
 */
#define NGX_OMNIROUTE_TOMBSTONE_MS     (10 * 60 * 1000)


typedef struct {
    ngx_omniroute_settings_t     *settings;
    or_verdict_t                 *verdict;
    int                           status;
    or_scope_e                    scope;
    or_msec_t                     start;
    or_msec_t                     now;
    or_breaker_result_t           breaker;
    or_cooldown_result_t          cooldown;
    or_lockout_result_t           lockout;
    const or_lockout_conf_t      *lockout_conf;
} ngx_omniroute_outcome_t;


static ngx_uint_t ngx_omniroute_breaker_failed(void *value, void *arg,
    or_msec_t *expires);
static ngx_uint_t ngx_omniroute_breaker_succeeded(void *value, void *arg,
    or_msec_t *expires);
static ngx_uint_t ngx_omniroute_conn_failed(void *value, void *arg,
    or_msec_t *expires);
static ngx_uint_t ngx_omniroute_conn_succeeded(void *value, void *arg,
    or_msec_t *expires);
static ngx_uint_t ngx_omniroute_lockout_failed(void *value, void *arg,
    or_msec_t *expires);
static ngx_uint_t ngx_omniroute_lockout_succeeded(void *value, void *arg,
    or_msec_t *expires);
static void ngx_omniroute_lockout_success(ngx_omniroute_store_t *st,
    ngx_uint_t table, ngx_str_t *key, ngx_omniroute_outcome_t *o);
static void ngx_omniroute_cool_siblings(ngx_http_request_t *r,
    ngx_omniroute_store_t *st, ngx_omniroute_candidate_t *cand,
    ngx_omniroute_outcome_t *o);
static void ngx_omniroute_log_breaker(ngx_http_request_t *r,
    ngx_omniroute_candidate_t *cand, or_breaker_result_t *res);


static ngx_omniroute_store_t *
ngx_omniroute_store_of(ngx_http_request_t *r)
{
    ngx_omniroute_main_conf_t  *omcf;

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);

    return omcf->shm_zone ? &omcf->store : NULL;
}


/* restatement and classification of a held or transport-failed attempt */

void
ngx_omniroute_classify(ngx_http_request_t *r, ngx_omniroute_attempt_t *a)
{
    ngx_uint_t                  n;
    or_header_t                 hdrs[NGX_OMNIROUTE_HEADERS_MAX];
    or_response_t               resp;
    or_class_conf_t             cc;
    ngx_table_elt_t            *h;
    ngx_omniroute_list_iter_t   it;
    ngx_omniroute_main_conf_t  *omcf;

    ngx_memzero(&resp, sizeof(or_response_t));

    resp.now_ms = ngx_omniroute_now();

    /* the provider's rules with the runtime ones (admin API) */

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);

    if (ngx_omniroute_settings_class(omcf, a->cand->provider, r->pool, &cc)
        != NGX_OK)
    {
        cc = a->cand->provider->class_conf;
    }

    if (a->stall) {
        /* stopped by the watch (R-STREAM-2/3, R-CD-8) */
        or_classify_stream_stall(&a->verdict);
        return;
    }

    if (a->state == NGX_OMNIROUTE_ATTEMPT_TRANSPORT || a->cut) {
        /* no response, or a stream cut after its commit point */
        resp.transport = a->transport;
        or_classify(&cc, &resp, &a->verdict);
        return;
    }

    n = 0;
    ngx_omniroute_list_start(&it, &a->sr->headers_out.headers);

    while (n < NGX_OMNIROUTE_HEADERS_MAX
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

    resp.status = (int) a->status;
    resp.transport = OR_TRANSPORT_OK;
    resp.headers = hdrs;
    resp.nheaders = n;

    if (a->event.len) {
        resp.body = (const char *) a->event.data;
        resp.body_len = a->event.len;

    } else if (a->body) {
        resp.body = (const char *) a->body->pos;
        resp.body_len = a->body->last - a->body->pos;
    }

    or_classify(&cc, &resp, &a->verdict);

    ngx_log_debug4(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "omniroute classify: %ui -> %s fall_over:%d breaker:%d",
                   a->status, or_reason_name(a->verdict.reason),
                   a->verdict.fall_over, a->verdict.counts_for_breaker);
}


void
ngx_omniroute_record_failure(ngx_http_request_t *r,
    ngx_omniroute_attempt_t *a)
{
    ngx_str_t                   k;
    ngx_uint_t                  skip_breaker;
    or_lockout_conf_t           rejected;
    or_outcome_writes_t         w;
    ngx_omniroute_store_t      *st;
    ngx_omniroute_outcome_t     o;
    ngx_omniroute_candidate_t  *cand;

    cand = a->cand;
    st = ngx_omniroute_store_of(r);

    ngx_omniroute_count_attempt(r, a, a->verdict.reason);

    if (a->verdict.restated_status) {
        ngx_omniroute_count_restatement(r, a->verdict.restate_rule_id);
    }

    if (st == NULL) {
        return;
    }

    ngx_memzero(&o, sizeof(ngx_omniroute_outcome_t));
    o.settings = cand->settings;
    o.verdict = &a->verdict;
    o.status = or_outcome_status(&a->verdict,
                                 (a->state == NGX_OMNIROUTE_ATTEMPT_TRANSPORT
                                  || a->cut || a->stall)
                                 ? 0 : (int) a->status, a->transport);
    o.start = a->start;
    o.now = ngx_omniroute_now();

    /* R-PACE-2/3: a body-stated wait paces, or locks the model */

    if (ngx_omniroute_pace_failure(r, a, o.status) == NGX_OK) {
        return;
    }

    w = or_outcome_writes(&a->verdict, o.status, a->transport,
                          &o.settings->lockout, cand->conn->disable_cooling,
                          cand->provider->class_conf.egress_bucketed,
                          cand->conn->egress.len > 0);

    ngx_log_debug4(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "omniroute outcome: \"%V\" %s status:%d writes:%xd",
                   &cand->conn->id, or_reason_name(a->verdict.reason),
                   o.status, w.mask);

    if (w.mask & OR_W_TOOLS) {
        ngx_omniroute_pace_tools(r, a);
        return;
    }

    if (a->verdict.reason == OR_REASON_CAPABILITY) {
        /* remembered per provider/model and feature, not a failure */
        ngx_omniroute_pace_capability(r, a);
    }

    /* request_rejected counts per connection and model, never bans */

    if (w.mask & OR_W_REJECTED) {
        or_lockout_conf_rejected(&rejected);
        o.lockout_conf = &rejected;
        o.scope = w.scope;

        k = cand->route->lockout_key[0];

        if (k.len) {
            (void) ngx_omniroute_store_update(st, NGX_OMNIROUTE_T_REJECTED,
                                              &k, sizeof(or_lockout_t),
                                              ngx_omniroute_lockout_failed,
                                              &o, 0);
        }
    }

    if (w.mask & OR_W_CONN) {
        k = cand->conn->id;
        (void) ngx_omniroute_store_update(st, NGX_OMNIROUTE_T_CONN, &k,
                                          sizeof(or_conn_state_t),
                                          ngx_omniroute_conn_failed, &o, 0);

        /* what the client is told agrees with it (Retry-After) */
        a->cooled_until = o.cooldown.until;
    }

    skip_breaker = o.cooldown.skip_breaker;

    if (w.mask & OR_W_SIBLINGS) {
        ngx_omniroute_cool_siblings(r, st, cand, &o);
    }

    if ((w.mask & OR_W_BREAKER) && !(w.breaker_unless_skip && skip_breaker))
    {
        k = cand->provider->name;
        (void) ngx_omniroute_store_update(st, NGX_OMNIROUTE_T_BREAKER, &k,
                                          sizeof(or_breaker_t),
                                          ngx_omniroute_breaker_failed, &o,
                                          0);

        ngx_omniroute_log_breaker(r, cand, &o.breaker);
    }

    if (w.mask & OR_W_LOCKOUT) {
        o.lockout_conf = &o.settings->lockout;
        o.scope = w.scope;

        k = cand->route->lockout_key[
                ngx_omniroute_lockout_scope_index(w.scope)];

        if (k.len) {
            (void) ngx_omniroute_store_update(st, NGX_OMNIROUTE_T_LOCKOUT,
                                              &k, sizeof(or_lockout_t),
                                              ngx_omniroute_lockout_failed,
                                              &o, 0);
        }
    }
}


/*
 * R-CLASS-6: on an egress-bucketed provider, a 429 quota or rate-limit
 * failure cools every connection sharing the failing one's egress key
 * (never terminal, never shortening a longer cooldown, skipping
 * disable_cooling).
 */

static void
ngx_omniroute_cool_siblings(ngx_http_request_t *r, ngx_omniroute_store_t *st,
    ngx_omniroute_candidate_t *cand, ngx_omniroute_outcome_t *o)
{
    u_char                      *cool;
    ngx_str_t                    k;
    ngx_uint_t                   i, n;
    or_egress_conn_t             failing, *sibs;
    ngx_omniroute_connection_t  *c, **conns;
    ngx_omniroute_main_conf_t   *omcf;

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);
    c = omcf->connections.elts;

    sibs = ngx_palloc(r->pool, omcf->connections.nelts
                               * (sizeof(or_egress_conn_t) + sizeof(void *)
                                  + 1));
    if (sibs == NULL) {
        return;
    }

    conns = (ngx_omniroute_connection_t **) (sibs + omcf->connections.nelts);
    cool = (u_char *) (conns + omcf->connections.nelts);

    n = 0;

    for (i = 0; i < omcf->connections.nelts; i++) {
        if (&c[i] == cand->conn
            || c[i].provider != (ngx_uint_t) (cand->provider
                                               - (ngx_omniroute_provider_t *)
                                                 omcf->providers.elts))
        {
            continue;
        }

        sibs[n].key = (const char *) c[i].egress.data;
        sibs[n].key_len = c[i].egress.len;
        sibs[n].disable_cooling = (int) c[i].disable_cooling;
        conns[n++] = &c[i];
    }

    failing.key = (const char *) cand->conn->egress.data;
    failing.key_len = cand->conn->egress.len;
    failing.disable_cooling = 0;

    if (or_egress_siblings(&cand->provider->class_conf, o->status,
                           o->verdict, &failing, sibs, n, cool)
        == 0)
    {
        return;
    }

    for (i = 0; i < n; i++) {
        if (!cool[i]) {
            continue;
        }

        k = conns[i]->id;
        (void) ngx_omniroute_store_update(st, NGX_OMNIROUTE_T_CONN, &k,
                                          sizeof(or_conn_state_t),
                                          ngx_omniroute_conn_failed, o, 0);

        ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                      "omniroute: connection \"%V\" cooled with \"%V\" "
                      "(egress \"%V\")", &conns[i]->id, &cand->conn->id,
                      &cand->conn->egress);
    }
}


void
ngx_omniroute_record_success(ngx_http_request_t *r,
    ngx_omniroute_attempt_t *a)
{
    unsigned                    mask;
    ngx_str_t                   k;
    ngx_uint_t                  i;
    or_lockout_conf_t           rejected;
    ngx_omniroute_store_t      *st;
    ngx_omniroute_outcome_t     o;
    ngx_omniroute_candidate_t  *cand;

    cand = a->cand;
    st = ngx_omniroute_store_of(r);

    ngx_omniroute_count_attempt(r, a, OR_REASON_NONE);

    if (st == NULL) {
        return;
    }

    mask = or_outcome_success_writes(cand->has_breaker, cand->has_conn,
                                     cand->has_lockout, cand->has_rejected);

    if (mask == 0) {
        /* a healthy system writes nothing */
        return;
    }

    ngx_memzero(&o, sizeof(ngx_omniroute_outcome_t));
    o.settings = cand->settings;
    o.start = a->start;
    o.now = ngx_omniroute_now();

    if (mask & OR_W_BREAKER) {
        k = cand->provider->name;
        (void) ngx_omniroute_store_touch(st, NGX_OMNIROUTE_T_BREAKER, &k,
                                         sizeof(or_breaker_t),
                                         ngx_omniroute_breaker_succeeded,
                                         &o);

        ngx_omniroute_log_breaker(r, cand, &o.breaker);
    }

    if (mask & OR_W_CONN) {
        k = cand->conn->id;
        (void) ngx_omniroute_store_touch(st, NGX_OMNIROUTE_T_CONN, &k,
                                         sizeof(or_conn_state_t),
                                         ngx_omniroute_conn_succeeded, &o);
    }

    if (mask & OR_W_LOCKOUT) {
        o.lockout_conf = &o.settings->lockout;

        for (i = 0; i < NGX_OMNIROUTE_LOCKOUT_SCOPES; i++) {
            ngx_omniroute_lockout_success(st, NGX_OMNIROUTE_T_LOCKOUT,
                                          &cand->route->lockout_key[i], &o);
        }
    }

    if (mask & OR_W_REJECTED) {
        or_lockout_conf_rejected(&rejected);
        o.lockout_conf = &rejected;
        ngx_omniroute_lockout_success(st, NGX_OMNIROUTE_T_REJECTED,
                                      &cand->route->lockout_key[0], &o);
    }
}


static void
ngx_omniroute_lockout_success(ngx_omniroute_store_t *st, ngx_uint_t table,
    ngx_str_t *key, ngx_omniroute_outcome_t *o)
{
    ngx_str_t  k;

    k = *key;

    if (k.len) {
        (void) ngx_omniroute_store_touch(st, table, &k, sizeof(or_lockout_t),
                                         ngx_omniroute_lockout_succeeded, o);
    }
}


static ngx_uint_t
ngx_omniroute_breaker_failed(void *value, void *arg, or_msec_t *expires)
{
    ngx_omniroute_outcome_t *o = arg;

    or_breaker_failure(&o->settings->breaker, value, o->verdict->reason,
                       o->start, o->now, &o->breaker);

    if (!o->breaker.changed) {
        return NGX_OMNIROUTE_UNCHANGED;
    }

    *expires = 0;       /* no longer a tombstone */

    return NGX_OMNIROUTE_CHANGED;
}


/*
 * After a success: a record that decides nothing any more is deleted (the
 * store returns to empty, R-redesign 4); one that still carries an epoch
 * for the cluster merge is kept as a tombstone a while.
 */

static ngx_uint_t
ngx_omniroute_breaker_succeeded(void *value, void *arg, or_msec_t *expires)
{
    ngx_omniroute_outcome_t *o = arg;

    or_breaker_success(&o->settings->breaker, value, o->start, o->now,
                       &o->breaker);

    if (or_breaker_idle(&o->settings->breaker, value, o->now)) {
        return NGX_OMNIROUTE_DELETE;
    }

    if (!o->breaker.changed) {
        return NGX_OMNIROUTE_UNCHANGED;
    }

    if (or_breaker_settled(&o->settings->breaker, value, o->now)) {
        *expires = o->now + NGX_OMNIROUTE_TOMBSTONE_MS;
    }

    return NGX_OMNIROUTE_CHANGED;
}


static ngx_uint_t
ngx_omniroute_conn_failed(void *value, void *arg, or_msec_t *expires)
{
    ngx_omniroute_outcome_t *o = arg;

    or_cooldown_fail(&o->settings->cooldown, value, o->verdict, o->status,
                     o->start, o->now, &o->cooldown);

    if (!o->cooldown.changed) {
        return NGX_OMNIROUTE_UNCHANGED;
    }

    *expires = 0;       /* no longer a tombstone */

    return NGX_OMNIROUTE_CHANGED;
}


static ngx_uint_t
ngx_omniroute_conn_succeeded(void *value, void *arg, or_msec_t *expires)
{
    ngx_omniroute_outcome_t *o = arg;

    ngx_uint_t  changed;

    changed = or_cooldown_success(value, o->start, o->now);

    if (or_cooldown_idle(value, o->now)) {
        return NGX_OMNIROUTE_DELETE;
    }

    if (!changed) {
        return NGX_OMNIROUTE_UNCHANGED;
    }

    if (or_cooldown_settled(value, o->now)) {
        *expires = o->now + NGX_OMNIROUTE_TOMBSTONE_MS;
    }

    return NGX_OMNIROUTE_CHANGED;
}


static ngx_uint_t
ngx_omniroute_lockout_failed(void *value, void *arg, or_msec_t *expires)
{
    ngx_omniroute_outcome_t *o = arg;

    or_lockout_t  *lo = value;

    or_lockout_fail(o->lockout_conf, lo, o->verdict, o->status, o->scope,
                    o->start, o->now, &o->lockout);

    if (!o->lockout.changed) {
        return NGX_OMNIROUTE_UNCHANGED;
    }

    *expires = lo->until + o->lockout_conf->window_ms;

    return NGX_OMNIROUTE_CHANGED;
}


static ngx_uint_t
ngx_omniroute_lockout_succeeded(void *value, void *arg, or_msec_t *expires)
{
    ngx_omniroute_outcome_t *o = arg;

    or_lockout_t  *lo = value;

    switch (or_lockout_success(lo, o->start, o->now)) {

    case OR_LO_DELETED:
        if (or_lockout_idle(lo, o->now)) {
            return NGX_OMNIROUTE_DELETE;
        }

        /* an empty, newer state: kept until it expires (a tombstone) */
        *expires = o->now + o->lockout_conf->window_ms;
        return NGX_OMNIROUTE_CHANGED;

    case OR_LO_HALVED:
        return NGX_OMNIROUTE_CHANGED;

    default:
        return NGX_OMNIROUTE_UNCHANGED;
    }
}


/*
 * An update wrote the breaker's change: the change time made on reading
 * it (it is written, so counted once, by the update that saw it first
 * under the zone lock), then the event's.
 */

static void
ngx_omniroute_log_breaker(ngx_http_request_t *r,
    ngx_omniroute_candidate_t *cand, or_breaker_result_t *res)
{
    ngx_omniroute_breaker_changed(r, cand->provider, res->stored, res->from);
    ngx_omniroute_breaker_changed(r, cand->provider, res->from, res->to);
}


void
ngx_omniroute_breaker_changed(ngx_http_request_t *r,
    ngx_omniroute_provider_t *p, or_cb_state_e from, or_cb_state_e to)
{
    ngx_uint_t  level;

    if (from == to) {
        return;
    }

    ngx_omniroute_count_breaker(r, p, from, to);

    level = (to == OR_CB_OPEN) ? NGX_LOG_WARN : NGX_LOG_NOTICE;

    ngx_log_error(level, r->connection->log, 0,
                  "omniroute: circuit breaker of provider \"%V\" %s -> %s",
                  &p->name, or_breaker_state_name(from),
                  or_breaker_state_name(to));
}


/*
 * A held error becomes the answer should no attempt succeed, unless it is
 * the emergency target's (issue 25): its error (a 404 for a model the
 * client did not ask for, say) never hides a real one of the request's
 * own candidates, such as their 429 or 503 with its Retry-After.  The
 * attempt trail shows both.
 */

void
ngx_omniroute_held(ngx_omniroute_ctx_t *ctx, ngx_omniroute_attempt_t *a)
{
    if (a->cand->emergency && ctx->last_held != NULL
        && !ctx->last_held->cand->emergency)
    {
        return;
    }

    ctx->last_held = a;
}
