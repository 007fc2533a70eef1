
/*
 * Copyright (C) ngx_omniroute authors
 *
 * Admin API endpoints over the runtime state (SPEC §12, R-CB, R-CD, R-ML):
 * provider breakers (health, reset), connection cooldowns and terminal
 * states (list, clear, terminal reset), model lockouts (list, re-enable).
 *
 * Reads take copies from the store and derive the state the way planning
 * does (an expired OPEN breaker reads as HALF_OPEN, an expired cooldown as
 * active: lazy recovery, R-CB-4, R-CD-7).  Writes validate the whole
 * request first and change nothing when any part of it is invalid.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute_api.h"
#include "ngx_omniroute_redis_stats.h"


#define NGX_OMNIROUTE_API_MODEL_MAX  200


typedef struct {
    ngx_str_t                     key;
    ngx_str_t                     provider;
    ngx_str_t                     conn;
    ngx_str_t                     scope;
    ngx_str_t                     model;
    ngx_uint_t                    table;
    or_lockout_t                  lo;
} ngx_omniroute_api_lockout_t;


typedef struct {
    ngx_array_t                  *list;
    ngx_uint_t                    table;
    ngx_uint_t                    error;
} ngx_omniroute_api_visit_t;


typedef struct {
    or_msec_t                     now;
    ngx_uint_t                    terminal;     /* out: skipped */
    ngx_uint_t                    active;       /* out: was active */
    or_terminal_e                 previous;     /* out */
} ngx_omniroute_api_update_t;


static ngx_omniroute_store_t *ngx_omniroute_api_store(
    ngx_omniroute_api_call_t *call);
static void ngx_omniroute_api_breaker_read(ngx_omniroute_api_call_t *call,
    ngx_omniroute_provider_t *p, or_breaker_t *cb);
static void ngx_omniroute_api_conn_read(ngx_omniroute_api_call_t *call,
    ngx_omniroute_connection_t *c, or_conn_state_t *cs);
static json_t *ngx_omniroute_api_breaker_json(ngx_omniroute_api_call_t *call,
    ngx_omniroute_provider_t *p);
static json_t *ngx_omniroute_api_stats_json(ngx_omniroute_api_call_t *call);
static json_t *ngx_omniroute_api_conn_json(ngx_omniroute_api_call_t *call,
    ngx_omniroute_connection_t *c, ngx_array_t *lockouts,
    or_cooldown_view_t *view);
static json_t *ngx_omniroute_api_lane_json(ngx_omniroute_api_call_t *call,
    ngx_omniroute_connection_t *c);
static json_t *ngx_omniroute_api_lockout_json(ngx_omniroute_api_call_t *call,
    ngx_omniroute_api_lockout_t *l, ngx_uint_t full);
static ngx_array_t *ngx_omniroute_api_lockouts_load(
    ngx_omniroute_api_call_t *call);
static void ngx_omniroute_api_lockout_visit(ngx_str_t *key, void *value,
    size_t size, void *arg);
static ngx_int_t ngx_omniroute_api_lockout_parse(ngx_str_t *key,
    ngx_omniroute_api_lockout_t *l);
static ngx_uint_t ngx_omniroute_api_lockout_of(
    ngx_omniroute_api_lockout_t *l, ngx_omniroute_connection_t *c);
static ngx_uint_t ngx_omniroute_api_clear_lockouts(
    ngx_omniroute_api_call_t *call, ngx_array_t *lockouts,
    ngx_omniroute_connection_t *c, ngx_str_t *model);
static ngx_int_t ngx_omniroute_api_provider_arg(
    ngx_omniroute_api_call_t *call, json_t *v, const char *field,
    ngx_omniroute_provider_t **pp);
static ngx_int_t ngx_omniroute_api_connection_arg(
    ngx_omniroute_api_call_t *call, json_t *v, const char *field,
    ngx_omniroute_connection_t **cp);
static ngx_int_t ngx_omniroute_api_query_provider(
    ngx_omniroute_api_call_t *call, const char *name,
    ngx_omniroute_provider_t **pp);

static ngx_uint_t ngx_omniroute_api_breaker_reset_update(void *value,
    void *arg, or_msec_t *expires);
static ngx_uint_t ngx_omniroute_api_cooldown_clear_update(void *value,
    void *arg, or_msec_t *expires);
static ngx_uint_t ngx_omniroute_api_terminal_reset_update(void *value,
    void *arg, or_msec_t *expires);
static ngx_uint_t ngx_omniroute_api_lockout_clear_update(void *value,
    void *arg, or_msec_t *expires);


static const char  *ngx_omniroute_api_reset_fields[] = {
    "provider", NULL
};

static const char  *ngx_omniroute_api_clear_fields[] = {
    "connectionIds", "all", "provider", NULL
};

static const char  *ngx_omniroute_api_terminal_fields[] = {
    "connectionId", NULL
};

static const char  *ngx_omniroute_api_lockout_fields[] = {
    "provider", "connection", "model", NULL
};


/* GET /api/monitoring/health */

ngx_int_t
ngx_omniroute_api_health(ngx_omniroute_api_call_t *call)
{
    int                           bad;
    json_t                       *doc, *providers, *b;
    ngx_uint_t                    i, degraded;
    ngx_omniroute_provider_t     *p;
    ngx_omniroute_redis_stats_t  *rs;

    doc = json_object();
    providers = json_object();

    if (doc == NULL || providers == NULL) {
        json_decref(doc);
        json_decref(providers);
        return NGX_ERROR;
    }

    call->out = doc;

    bad = json_object_set_new(doc, "status", json_string("ok"));
    bad |= json_object_set_new(doc, "time", json_integer(call->now));
    bad |= json_object_set_new(doc, "providers", providers);

    degraded = 0;
    p = call->omcf->providers.elts;

    for (i = 0; i < call->omcf->providers.nelts; i++) {
        b = ngx_omniroute_api_breaker_json(call, &p[i]);
        if (b == NULL) {
            return NGX_ERROR;
        }

        if (ngx_strcmp(json_string_value(json_object_get(b, "state")),
                       "CLOSED") != 0)
        {
            degraded++;
        }

        bad |= json_object_setn_new(providers, (const char *) p[i].name.data,
                                    p[i].name.len, b);
    }

    if (degraded) {
        bad |= json_object_set_new(doc, "status", json_string("degraded"));
    }

    b = ngx_omniroute_api_stats_json(call);
    if (b == NULL) {
        return NGX_ERROR;
    }

    bad |= json_object_set_new(doc, "stats", b);

    rs = ngx_omniroute_redis_stats();

    bad |= json_object_set_new(doc, "redis", json_pack("{s:s}", "state",
                                   ngx_omniroute_redis_state_name(
                                       rs ? rs->state
                                          : NGX_OMNIROUTE_REDIS_DISABLED)));

    return bad ? NGX_ERROR : NGX_OK;
}


/* totals since the zone was created, for the status page */

static json_t *
ngx_omniroute_api_stats_json(ngx_omniroute_api_call_t *call)
{
    int                     bad;
    json_t                 *o, *req, *fb;
    ngx_uint_t              i;
    ngx_omniroute_store_t  *st;
    ngx_omniroute_stats_t  *stats;

    st = ngx_omniroute_api_store(call);
    stats = (st && st->sh) ? &st->sh->stats : NULL;

    o = json_object();
    req = json_object();
    fb = json_object();

    if (o == NULL || req == NULL || fb == NULL) {
        json_decref(o);
        json_decref(req);
        json_decref(fb);
        return NULL;
    }

    bad = json_object_set_new(o, "requests", req);
    bad |= json_object_set_new(o, "fallbacks", fb);

    for (i = 0; i < NGX_OMNIROUTE_OUTCOMES; i++) {
        bad |= json_object_set_new(req, ngx_omniroute_outcome_names[i],
                                   json_integer(ngx_omniroute_api_requests(
                                                    call, i)));
    }

    for (i = 1; i < OR_REASON_COUNT; i++) {
        bad |= json_object_set_new(fb, or_reason_name((or_reason_e) i),
                                   json_integer(stats ? stats->fallbacks[i]
                                                      : 0));
    }

    if (bad) {
        json_decref(o);
        return NULL;
    }

    return o;
}


static json_t *
ngx_omniroute_api_breaker_json(ngx_omniroute_api_call_t *call,
    ngx_omniroute_provider_t *p)
{
    int                          bad;
    json_t                      *o, *conns;
    or_msec_t                    retry;
    ngx_uint_t                   i, total, active, cooling, terminal;
    or_breaker_t                 cb;
    or_conn_state_t              cs;
    or_cooldown_view_t           view;
    ngx_omniroute_settings_t     s;
    ngx_omniroute_connection_t  *c;

    ngx_omniroute_settings_effective(call->omcf, p, &s);
    ngx_omniroute_api_breaker_read(call, p, &cb);

    /* lazy recovery: what planning would see now (R-CB-4, R-CB-5) */
    or_breaker_normalize(&s.breaker, &cb, call->now);
    retry = or_breaker_retry_after(&s.breaker, &cb, call->now);

    total = 0;
    active = 0;
    cooling = 0;
    terminal = 0;

    c = call->omcf->connections.elts;

    for (i = 0; i < call->omcf->connections.nelts; i++) {
        if (c[i].provider_name.len != p->name.len
            || ngx_strncmp(c[i].provider_name.data, p->name.data,
                           p->name.len) != 0)
        {
            continue;
        }

        ngx_omniroute_api_conn_read(call, &c[i], &cs);
        or_cooldown_view(&cs, call->now, &view);

        total++;

        switch (view.status) {
        case OR_CONN_COOLDOWN:
            cooling++;
            break;
        case OR_CONN_TERMINAL:
            terminal++;
            break;
        default:
            active++;
            break;
        }
    }

    o = json_object();
    conns = json_object();

    if (o == NULL || conns == NULL) {
        json_decref(o);
        json_decref(conns);
        return NULL;
    }

    bad = json_object_set_new(o, "kind", json_string(or_kind_name(p->kind)));
    bad |= json_object_set_new(o, "state", json_string(
                         or_breaker_state_name((or_cb_state_e) cb.state)));
    bad |= json_object_set_new(o, "failures", json_integer(cb.failures));
    bad |= json_object_set_new(o, "successes", json_integer(cb.successes));
    bad |= json_object_set_new(o, "open_cycles",
                               json_integer(cb.open_cycles));
    bad |= json_object_set_new(o, "retry_after_ms", json_integer(retry));
    bad |= json_object_set_new(o, "retry_after_s",
                               json_integer((retry + 999) / 1000));
    bad |= json_object_set_new(o, "opened_at",
                               ngx_omniroute_api_time(
                                   cb.state >= OR_CB_OPEN ? cb.opened_at
                                                          : 0));
    bad |= json_object_set_new(o, "open_until",
                               ngx_omniroute_api_time(
                                   cb.state == OR_CB_OPEN ? cb.open_until
                                                          : 0));
    bad |= json_object_set_new(o, "last_failure_at",
                               ngx_omniroute_api_time(cb.last_failure_at));
    bad |= json_object_set_new(o, "last_reason",
                               cb.last_failure_at > 0
                               ? json_string(or_reason_name(
                                     (or_reason_e) cb.last_reason))
                               : json_null());
    bad |= json_object_set_new(o, "degrade_threshold",
                               json_integer(s.breaker.degrade_threshold));
    bad |= json_object_set_new(o, "open_threshold",
                               json_integer(s.breaker.open_threshold));
    bad |= json_object_set_new(o, "reset_timeout_ms",
                               json_integer(s.breaker.reset_ms));
    bad |= json_object_set_new(o, "provider_cooldown_until",
                               ngx_omniroute_api_time(
                                   cb.gate_until > call->now
                                   && s.breaker.gate_enabled > 0
                                   ? cb.gate_until : 0));

    bad |= json_object_set_new(conns, "total", json_integer(total));
    bad |= json_object_set_new(conns, "active", json_integer(active));
    bad |= json_object_set_new(conns, "cooldown", json_integer(cooling));
    bad |= json_object_set_new(conns, "terminal", json_integer(terminal));
    bad |= json_object_set_new(o, "connections", conns);

    if (bad) {
        json_decref(o);
        return NULL;
    }

    return o;
}


/* POST /api/resilience/reset  {} | {"provider": NAME} */

ngx_int_t
ngx_omniroute_api_breaker_reset(ngx_omniroute_api_call_t *call)
{
    int                        bad;
    json_t                    *doc, *reset, *unchanged;
    ngx_str_t                 *key;
    ngx_int_t                  rc;
    ngx_uint_t                 i;
    ngx_omniroute_store_t     *st;
    ngx_omniroute_provider_t  *p, *one;

    one = NULL;

    if (call->body) {
        if (ngx_omniroute_api_fields(call, call->body, NULL,
                                     ngx_omniroute_api_reset_fields)
            != NGX_OK)
        {
            return NGX_ERROR;
        }

        if (ngx_omniroute_api_provider_arg(call,
                                           json_object_get(call->body,
                                                           "provider"),
                                           "provider", &one)
            != NGX_OK)
        {
            return NGX_ERROR;
        }
    }

    doc = json_object();
    reset = json_array();
    unchanged = json_array();

    if (doc == NULL || reset == NULL || unchanged == NULL) {
        json_decref(doc);
        json_decref(reset);
        json_decref(unchanged);
        return NGX_ERROR;
    }

    call->out = doc;

    bad = json_object_set_new(doc, "reset", reset);
    bad |= json_object_set_new(doc, "unchanged", unchanged);

    st = ngx_omniroute_api_store(call);
    p = call->omcf->providers.elts;

    for (i = 0; i < call->omcf->providers.nelts; i++) {
        if (one && one != &p[i]) {
            continue;
        }

        key = &p[i].name;

        rc = ngx_omniroute_store_update(st, NGX_OMNIROUTE_T_BREAKER, key,
                                        sizeof(or_breaker_t),
                                        ngx_omniroute_api_breaker_reset_update,
                                        NULL, 0);

        if (rc == NGX_OK) {
            ngx_log_error(NGX_LOG_NOTICE, call->r->connection->log, 0,
                          "omniroute api: breaker of provider \"%V\" reset",
                          key);
        }

        bad |= json_array_append_new(rc == NGX_OK ? reset : unchanged,
                                     ngx_omniroute_api_str(key));
    }

    return bad ? NGX_ERROR : NGX_OK;
}


static ngx_uint_t
ngx_omniroute_api_breaker_reset_update(void *value, void *arg,
    or_msec_t *expires)
{
    return or_breaker_reset(value) ? NGX_OMNIROUTE_CHANGED
                                   : NGX_OMNIROUTE_UNCHANGED;
}


/* GET /api/resilience/cooldowns[?provider=NAME] */

ngx_int_t
ngx_omniroute_api_cooldowns(ngx_omniroute_api_call_t *call)
{
    int                          bad;
    json_t                      *doc, *list, *summary, *o;
    ngx_uint_t                   i, n[3], nlo;
    ngx_array_t                 *lockouts;
    or_conn_state_t              cs;
    or_cooldown_view_t           view;
    ngx_omniroute_provider_t    *one;
    ngx_omniroute_connection_t  *c;

    if (ngx_omniroute_api_query_provider(call, "provider", &one) != NGX_OK) {
        return NGX_ERROR;
    }

    lockouts = ngx_omniroute_api_lockouts_load(call);
    if (lockouts == NULL) {
        return NGX_ERROR;
    }

    doc = json_object();
    list = json_array();
    summary = json_object();

    if (doc == NULL || list == NULL || summary == NULL) {
        json_decref(doc);
        json_decref(list);
        json_decref(summary);
        return NGX_ERROR;
    }

    call->out = doc;

    bad = json_object_set_new(doc, "time", json_integer(call->now));
    bad |= json_object_set_new(doc, "connections", list);
    bad |= json_object_set_new(doc, "summary", summary);

    n[0] = n[1] = n[2] = 0;
    nlo = 0;

    c = call->omcf->connections.elts;

    for (i = 0; i < call->omcf->connections.nelts; i++) {
        if (one
            && (c[i].provider_name.len != one->name.len
                || ngx_strncmp(c[i].provider_name.data, one->name.data,
                               one->name.len) != 0))
        {
            continue;
        }

        ngx_omniroute_api_conn_read(call, &c[i], &cs);
        or_cooldown_view(&cs, call->now, &view);

        n[view.status]++;

        o = ngx_omniroute_api_conn_json(call, &c[i], lockouts, &view);
        if (o == NULL) {
            return NGX_ERROR;
        }

        nlo += json_array_size(json_object_get(o, "lockouts"));

        bad |= json_array_append_new(list, o);
    }

    bad |= json_object_set_new(summary, "total",
                               json_integer(n[0] + n[1] + n[2]));
    bad |= json_object_set_new(summary, "active",
                               json_integer(n[OR_CONN_ACTIVE]));
    bad |= json_object_set_new(summary, "cooldown",
                               json_integer(n[OR_CONN_COOLDOWN]));
    bad |= json_object_set_new(summary, "terminal",
                               json_integer(n[OR_CONN_TERMINAL]));
    bad |= json_object_set_new(summary, "lockouts", json_integer(nlo));

    return bad ? NGX_ERROR : NGX_OK;
}


static json_t *
ngx_omniroute_api_conn_json(ngx_omniroute_api_call_t *call,
    ngx_omniroute_connection_t *c, ngx_array_t *lockouts,
    or_cooldown_view_t *view)
{
    int                           bad;
    json_t                       *o, *list, *lj;
    ngx_uint_t                    i;
    const char                   *status;
    ngx_omniroute_api_lockout_t  *l;

    static const char  *names[] = { "active", "cooldown", "terminal" };

    o = json_object();
    list = json_array();

    if (o == NULL || list == NULL) {
        json_decref(o);
        json_decref(list);
        return NULL;
    }

    status = names[view->status];

    bad = json_object_set_new(o, "id", ngx_omniroute_api_str(&c->id));
    bad |= json_object_set_new(o, "provider",
                               ngx_omniroute_api_str(&c->provider_name));
    bad |= json_object_set_new(o, "status", json_string(status));
    bad |= json_object_set_new(o, "test_status",
                               json_string(view->test_status));
    bad |= json_object_set_new(o, "terminal",
                               view->terminal != OR_TERMINAL_NONE
                               ? json_string(or_terminal_name(view->terminal))
                               : json_null());
    bad |= json_object_set_new(o, "retry_after_ms",
                               view->retry_after >= 0
                               ? json_integer(view->retry_after)
                               : json_null());
    bad |= json_object_set_new(o, "until",
                               ngx_omniroute_api_time(view->until));
    bad |= json_object_set_new(o, "backoff_level",
                               json_integer(view->backoff_level));
    bad |= json_object_set_new(o, "failures", json_integer(view->failures));
    bad |= json_object_set_new(o, "last_error_type",
                               view->last_reason != OR_REASON_NONE
                               ? json_string(or_reason_name(
                                                 view->last_reason))
                               : json_null());
    bad |= json_object_set_new(o, "last_status",
                               view->last_status > 0
                               ? json_integer(view->last_status)
                               : json_null());
    bad |= json_object_set_new(o, "last_error_at",
                               ngx_omniroute_api_time(view->last_error_at));
    bad |= json_object_set_new(o, "lockouts", list);
    bad |= json_object_set_new(o, "lane", ngx_omniroute_api_lane_json(call, c));

    l = lockouts->elts;

    for (i = 0; i < lockouts->nelts; i++) {
        if (!ngx_omniroute_api_lockout_of(&l[i], c)
            || !or_lockout_active(&l[i].lo, call->now))
        {
            continue;
        }

        lj = ngx_omniroute_api_lockout_json(call, &l[i], 0);
        bad |= json_array_append_new(list, lj);
    }

    if (bad) {
        json_decref(o);
        return NULL;
    }

    return o;
}


/*
 * R-LANE-9: the usage-limit lane of a connection, null when it has
 * neither usage_lane=on nor limit_reset=on nor a record.  phase: "none",
 * "active" (requests carry the slow header until "until"), "ended" (why:
 * "end"; no new entry before "blocked_until"); "reset": the memo of the
 * session-limit reset.
 */

static json_t *
ngx_omniroute_api_lane_json(ngx_omniroute_api_call_t *call,
    ngx_omniroute_connection_t *c)
{
    int                     bad;
    json_t                 *o, *reset;
    or_lane_t               l;
    ngx_uint_t              has, phase;
    ngx_omniroute_store_t  *st;

    st = ngx_omniroute_api_store(call);

    has = (st != NULL
           && ngx_omniroute_store_read(st, NGX_OMNIROUTE_T_LANE, &c->id, &l,
                                       sizeof(or_lane_t))
              == NGX_OK);

    if (!has && !c->usage_lane && !c->limit_reset) {
        return json_null();
    }

    if (!has) {
        ngx_memzero(&l, sizeof(or_lane_t));
    }

    phase = l.phase;

    if (phase == OR_LANE_PHASE_ACTIVE && !or_lane_active(&l, call->now)) {
        phase = OR_LANE_PHASE_NONE;     /* over: its reset has passed */
    }

    o = json_object();
    reset = json_object();

    if (o == NULL || reset == NULL) {
        json_decref(o);
        json_decref(reset);
        return NULL;
    }

    bad = json_object_set_new(o, "enabled", json_boolean(c->usage_lane));
    bad |= json_object_set_new(o, "phase",
                               json_string(or_lane_phase_name(phase)));
    bad |= json_object_set_new(o, "until",
                               ngx_omniroute_api_time(
                                   phase == OR_LANE_PHASE_ACTIVE
                                   ? l.until : 0));
    bad |= json_object_set_new(o, "end",
                               l.end != OR_LANE_END_NONE
                               ? json_string(or_lane_end_name(l.end))
                               : json_null());
    bad |= json_object_set_new(o, "ended_at",
                               ngx_omniroute_api_time(l.ended_at));
    bad |= json_object_set_new(o, "blocked_until",
                               ngx_omniroute_api_time(
                                   or_lane_blocked(&l, call->now)
                                   ? l.block_until : 0));
    bad |= json_object_set_new(o, "entered_at",
                               ngx_omniroute_api_time(l.entered_at));
    bad |= json_object_set_new(o, "entries", json_integer(l.entries));
    bad |= json_object_set_new(o, "waits", json_integer(l.waits));

    bad |= json_object_set_new(reset, "enabled",
                               json_boolean(c->limit_reset));
    bad |= json_object_set_new(reset, "result",
                               l.reset_result != OR_RESET_NONE
                               ? json_string(or_reset_result_name(
                                                 l.reset_result))
                               : json_null());
    bad |= json_object_set_new(reset, "reset_at",
                               ngx_omniroute_api_time(l.reset_at));
    bad |= json_object_set_new(reset, "next_at",
                               ngx_omniroute_api_time(l.reset_next_at));
    bad |= json_object_set_new(o, "reset", reset);

    if (bad) {
        json_decref(o);
        return NULL;
    }

    return o;
}


/*
 * POST /api/resilience/cooldowns
 *   {"connectionIds": [ID, ...]} | {"all": true, "provider"?: NAME}
 * -> {"cleared", "unchanged", "skippedTerminal", "lockoutsCleared"}
 */

ngx_int_t
ngx_omniroute_api_cooldowns_clear(ngx_omniroute_api_call_t *call)
{
    int                           bad;
    json_t                       *ids, *all, *prov, *v, *doc, *detail;
    size_t                        idx;
    ngx_int_t                     rc;
    ngx_uint_t                    i, n, cleared, unchanged, skipped, los;
    ngx_uint_t                   *pick;
    const char                   *what;
    ngx_array_t                  *lockouts;
    ngx_omniroute_store_t        *st;
    ngx_omniroute_provider_t     *one;
    ngx_omniroute_connection_t   *c, *conn;
    ngx_omniroute_api_update_t    u;

    if (call->body == NULL) {
        return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                      "missing_body",
                                      "expected {\"connectionIds\": [...]} "
                                      "or {\"all\": true}");
    }

    if (ngx_omniroute_api_fields(call, call->body, NULL,
                                 ngx_omniroute_api_clear_fields)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    ids = json_object_get(call->body, "connectionIds");
    all = json_object_get(call->body, "all");
    prov = json_object_get(call->body, "provider");

    n = call->omcf->connections.nelts;
    c = call->omcf->connections.elts;

    pick = ngx_pcalloc(call->r->pool, (n + 1) * sizeof(ngx_uint_t));
    if (pick == NULL) {
        return NGX_ERROR;
    }

    if (ids && all) {
        return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                      "invalid_request",
                                      "give either \"connectionIds\" or "
                                      "\"all\", not both");
    }

    if (ids) {
        if (prov) {
            return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                          "invalid_request",
                                          "\"provider\" goes with \"all\"");
        }

        if (!json_is_array(ids) || json_array_size(ids) == 0) {
            return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                          "invalid_type",
                                          "\"connectionIds\" must be a "
                                          "non-empty array of strings");
        }

        json_array_foreach(ids, idx, v) {
            if (ngx_omniroute_api_connection_arg(call, v, "connectionIds",
                                                 &conn)
                != NGX_OK)
            {
                return NGX_ERROR;
            }

            pick[conn - c] = 1;
        }

    } else if (all) {
        if (!json_is_true(all)) {
            return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                          "invalid_type",
                                          "\"all\" must be true");
        }

        if (ngx_omniroute_api_provider_arg(call, prov, "provider", &one)
            != NGX_OK)
        {
            return NGX_ERROR;
        }

        for (i = 0; i < n; i++) {
            pick[i] = (one == NULL || c[i].provider == (ngx_uint_t)
                                      (one - (ngx_omniroute_provider_t *)
                                             call->omcf->providers.elts));
        }

    } else {
        return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                      "invalid_request",
                                      "expected {\"connectionIds\": [...]} "
                                      "or {\"all\": true}");
    }

    /* valid: apply */

    lockouts = ngx_omniroute_api_lockouts_load(call);
    if (lockouts == NULL) {
        return NGX_ERROR;
    }

    doc = json_object();
    detail = json_object();

    if (doc == NULL || detail == NULL) {
        json_decref(doc);
        json_decref(detail);
        return NGX_ERROR;
    }

    call->out = doc;

    st = ngx_omniroute_api_store(call);

    cleared = 0;
    unchanged = 0;
    skipped = 0;
    los = 0;
    bad = 0;

    for (i = 0; i < n; i++) {
        if (!pick[i]) {
            continue;
        }

        ngx_memzero(&u, sizeof(ngx_omniroute_api_update_t));
        u.now = call->now;

        rc = ngx_omniroute_store_update(st, NGX_OMNIROUTE_T_CONN, &c[i].id,
                                   sizeof(or_conn_state_t),
                                   ngx_omniroute_api_cooldown_clear_update,
                                   &u, 0);

        if (u.terminal) {
            skipped++;
            what = "skippedTerminal";

        } else {
            los += ngx_omniroute_api_clear_lockouts(call, lockouts, &c[i],
                                                    NULL);

            if (rc == NGX_OK) {
                cleared++;
                what = "cleared";

            } else {
                unchanged++;
                what = "unchanged";
            }
        }

        bad |= json_object_setn_new(detail, (const char *) c[i].id.data,
                                    c[i].id.len, json_string(what));
    }

    bad |= json_object_set_new(doc, "cleared", json_integer(cleared));
    bad |= json_object_set_new(doc, "unchanged", json_integer(unchanged));
    bad |= json_object_set_new(doc, "skippedTerminal", json_integer(skipped));
    bad |= json_object_set_new(doc, "lockoutsCleared", json_integer(los));
    bad |= json_object_set_new(doc, "connections", detail);

    if (cleared || los) {
        ngx_log_error(NGX_LOG_NOTICE, call->r->connection->log, 0,
                      "omniroute api: cooldowns cleared: %ui connection(s), "
                      "%ui lockout(s)", cleared, los);
    }

    return bad ? NGX_ERROR : NGX_OK;
}


static ngx_uint_t
ngx_omniroute_api_cooldown_clear_update(void *value, void *arg,
    or_msec_t *expires)
{
    or_conn_state_t             *cs = value;
    ngx_omniroute_api_update_t  *u = arg;

    /* terminal states are shown, never cleared here (R-CD-6) */
    if (cs->terminal != OR_TERMINAL_NONE) {
        u->terminal = 1;
        return NGX_OMNIROUTE_UNCHANGED;
    }

    return or_cooldown_reset(cs) ? NGX_OMNIROUTE_CHANGED
                                 : NGX_OMNIROUTE_UNCHANGED;
}


/* POST /api/resilience/terminal-reset  {"connectionId": ID} */

ngx_int_t
ngx_omniroute_api_terminal_reset(ngx_omniroute_api_call_t *call)
{
    int                          bad;
    json_t                      *doc;
    ngx_int_t                    rc;
    ngx_omniroute_connection_t  *c;
    ngx_omniroute_api_update_t   u;

    if (call->body == NULL) {
        return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                      "missing_body",
                                      "expected {\"connectionId\": ID}");
    }

    if (ngx_omniroute_api_fields(call, call->body, NULL,
                                 ngx_omniroute_api_terminal_fields)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (json_object_get(call->body, "connectionId") == NULL) {
        return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                      "missing_field",
                                      "\"connectionId\" is required");
    }

    if (ngx_omniroute_api_connection_arg(call,
                                         json_object_get(call->body,
                                                         "connectionId"),
                                         "connectionId", &c)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    ngx_memzero(&u, sizeof(ngx_omniroute_api_update_t));
    u.now = call->now;

    rc = ngx_omniroute_store_update(ngx_omniroute_api_store(call),
                                   NGX_OMNIROUTE_T_CONN, &c->id,
                                   sizeof(or_conn_state_t),
                                   ngx_omniroute_api_terminal_reset_update,
                                   &u, 0);

    if (rc == NGX_OK && u.previous != OR_TERMINAL_NONE) {
        ngx_log_error(NGX_LOG_NOTICE, call->r->connection->log, 0,
                      "omniroute api: terminal state \"%s\" of connection "
                      "\"%V\" reset by the operator",
                      or_terminal_name(u.previous), &c->id);
    }

    doc = json_object();
    if (doc == NULL) {
        return NGX_ERROR;
    }

    call->out = doc;

    bad = json_object_set_new(doc, "connectionId",
                              ngx_omniroute_api_str(&c->id));
    bad |= json_object_set_new(doc, "reset", json_boolean(rc == NGX_OK));
    bad |= json_object_set_new(doc, "previous",
                               u.previous != OR_TERMINAL_NONE
                               ? json_string(or_terminal_name(u.previous))
                               : json_null());

    return bad ? NGX_ERROR : NGX_OK;
}


static ngx_uint_t
ngx_omniroute_api_terminal_reset_update(void *value, void *arg,
    or_msec_t *expires)
{
    or_conn_state_t             *cs = value;
    ngx_omniroute_api_update_t  *u = arg;

    u->previous = (or_terminal_e) cs->terminal;

    return or_cooldown_reset(cs) ? NGX_OMNIROUTE_CHANGED
                                 : NGX_OMNIROUTE_UNCHANGED;
}


/* GET /api/resilience/model-cooldowns[?provider=NAME&connection=ID] */

ngx_int_t
ngx_omniroute_api_lockouts(ngx_omniroute_api_call_t *call)
{
    int                           bad;
    json_t                       *doc, *list;
    ngx_str_t                     arg;
    ngx_uint_t                    i;
    ngx_array_t                  *lockouts;
    ngx_omniroute_provider_t     *one;
    ngx_omniroute_connection_t   *conn;
    ngx_omniroute_api_lockout_t  *l;

    if (ngx_omniroute_api_query_provider(call, "provider", &one) != NGX_OK) {
        return NGX_ERROR;
    }

    conn = NULL;

    if (ngx_omniroute_api_arg(call, "connection", &arg) == NGX_OK) {
        conn = ngx_omniroute_api_connection(call->omcf,
                                            (const char *) arg.data,
                                            arg.len);
        if (conn == NULL) {
            return ngx_omniroute_api_fail(call, NGX_HTTP_NOT_FOUND,
                                          "unknown_connection",
                                          "unknown connection \"%V\"",
                                          &arg);
        }
    }

    lockouts = ngx_omniroute_api_lockouts_load(call);
    if (lockouts == NULL) {
        return NGX_ERROR;
    }

    doc = json_object();
    list = json_array();

    if (doc == NULL || list == NULL) {
        json_decref(doc);
        json_decref(list);
        return NGX_ERROR;
    }

    call->out = doc;

    bad = json_object_set_new(doc, "time", json_integer(call->now));
    bad |= json_object_set_new(doc, "lockouts", list);

    l = lockouts->elts;

    for (i = 0; i < lockouts->nelts; i++) {
        if (!or_lockout_active(&l[i].lo, call->now)) {
            continue;
        }

        if (one
            && (l[i].provider.len != one->name.len
                || ngx_strncmp(l[i].provider.data, one->name.data,
                               one->name.len) != 0))
        {
            continue;
        }

        if (conn && !ngx_omniroute_api_lockout_of(&l[i], conn)) {
            continue;
        }

        bad |= json_array_append_new(list,
                                 ngx_omniroute_api_lockout_json(call, &l[i],
                                                                1));
    }

    bad |= json_object_set_new(doc, "count",
                               json_integer(json_array_size(list)));

    return bad ? NGX_ERROR : NGX_OK;
}


/*
 * DELETE /api/resilience/model-cooldowns
 *   {"provider": NAME, "connection": ID, "model": MODEL} -> {"cleared": N}
 *
 * Clears every active lockout of the connection whose name is the model
 * (any scope), or the model's base name (base-model scope).
 */

ngx_int_t
ngx_omniroute_api_lockouts_clear(ngx_omniroute_api_call_t *call)
{
    int                          bad;
    json_t                      *doc, *v;
    ngx_str_t                    model;
    ngx_uint_t                   n;
    ngx_array_t                 *lockouts;
    ngx_omniroute_provider_t    *p;
    ngx_omniroute_connection_t  *c;

    if (call->body == NULL) {
        return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                      "missing_body",
                                      "expected {\"provider\", "
                                      "\"connection\", \"model\"}");
    }

    if (ngx_omniroute_api_fields(call, call->body, NULL,
                                 ngx_omniroute_api_lockout_fields)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (json_object_get(call->body, "provider") == NULL
        || json_object_get(call->body, "connection") == NULL
        || json_object_get(call->body, "model") == NULL)
    {
        return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                      "missing_field",
                                      "\"provider\", \"connection\" and "
                                      "\"model\" are required");
    }

    if (ngx_omniroute_api_provider_arg(call,
                                       json_object_get(call->body,
                                                       "provider"),
                                       "provider", &p)
        != NGX_OK
        || ngx_omniroute_api_connection_arg(call,
                                            json_object_get(call->body,
                                                            "connection"),
                                            "connection", &c)
           != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (c->provider_name.len != p->name.len
        || ngx_strncmp(c->provider_name.data, p->name.data, p->name.len)
           != 0)
    {
        return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                      "invalid_request",
                                      "connection \"%V\" is not a "
                                      "connection of provider \"%V\"",
                                      &c->id, &p->name);
    }

    v = json_object_get(call->body, "model");

    if (!json_is_string(v) || json_string_length(v) == 0
        || json_string_length(v) > NGX_OMNIROUTE_API_MODEL_MAX)
    {
        return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                      "invalid_type",
                                      "\"model\" must be a non-empty "
                                      "string of at most 200 bytes");
    }

    model.data = (u_char *) json_string_value(v);
    model.len = json_string_length(v);

    lockouts = ngx_omniroute_api_lockouts_load(call);
    if (lockouts == NULL) {
        return NGX_ERROR;
    }

    n = ngx_omniroute_api_clear_lockouts(call, lockouts, c, &model);

    if (n) {
        ngx_log_error(NGX_LOG_NOTICE, call->r->connection->log, 0,
                      "omniroute api: %ui model lockout(s) of connection "
                      "\"%V\" re-enabled", n, &c->id);
    }

    doc = json_object();
    if (doc == NULL) {
        return NGX_ERROR;
    }

    call->out = doc;

    bad = json_object_set_new(doc, "cleared", json_integer(n));

    return bad ? NGX_ERROR : NGX_OK;
}


/* clear the connection's active lockouts (of one model when given) */

static ngx_uint_t
ngx_omniroute_api_clear_lockouts(ngx_omniroute_api_call_t *call,
    ngx_array_t *lockouts, ngx_omniroute_connection_t *c, ngx_str_t *model)
{
    size_t                        blen;
    ngx_uint_t                    i, n;
    ngx_omniroute_api_update_t    u;
    ngx_omniroute_api_lockout_t  *l;

    l = lockouts->elts;
    n = 0;

    blen = model ? or_model_base((const char *) model->data, model->len) : 0;

    for (i = 0; i < lockouts->nelts; i++) {
        if (!ngx_omniroute_api_lockout_of(&l[i], c)
            || !or_lockout_active(&l[i].lo, call->now))
        {
            continue;
        }

        if (model
            && !(l[i].model.len == model->len
                 && ngx_strncmp(l[i].model.data, model->data, model->len)
                    == 0)
            && !(l[i].scope.len == 4
                 && ngx_strncmp(l[i].scope.data, "base", 4) == 0
                 && l[i].model.len == blen
                 && ngx_strncmp(l[i].model.data, model->data, blen) == 0))
        {
            continue;
        }

        ngx_memzero(&u, sizeof(ngx_omniroute_api_update_t));
        u.now = call->now;

        if (ngx_omniroute_store_update(ngx_omniroute_api_store(call),
                                       l[i].table, &l[i].key,
                                       sizeof(or_lockout_t),
                                       ngx_omniroute_api_lockout_clear_update,
                                       &u, 0)
            == NGX_OK
            && u.active)
        {
            n++;
        }
    }

    return n;
}


static ngx_uint_t
ngx_omniroute_api_lockout_clear_update(void *value, void *arg,
    or_msec_t *expires)
{
    or_lockout_t                *lo = value;
    ngx_omniroute_api_update_t  *u = arg;

    u->active = or_lockout_active(lo, u->now);

    if (!or_lockout_clear(lo)) {
        return NGX_OMNIROUTE_UNCHANGED;
    }

    /*
     * an empty state with a higher epoch (a tombstone for the mirror, see
     * or_lockout.h), kept a minute before it may be evicted
     */

    *expires = u->now + 60 * 1000;

    return NGX_OMNIROUTE_CHANGED;
}


static json_t *
ngx_omniroute_api_lockout_json(ngx_omniroute_api_call_t *call,
    ngx_omniroute_api_lockout_t *l, ngx_uint_t full)
{
    int         bad;
    json_t     *o;
    or_msec_t   retry;

    o = json_object();
    if (o == NULL) {
        return NULL;
    }

    retry = or_lockout_retry_after(&l->lo, call->now);

    bad = 0;

    if (full) {
        bad |= json_object_set_new(o, "provider",
                                   ngx_omniroute_api_str(&l->provider));
        bad |= json_object_set_new(o, "connection",
                                   ngx_omniroute_api_str(&l->conn));
    }

    bad |= json_object_set_new(o, "model", ngx_omniroute_api_str(&l->model));
    bad |= json_object_set_new(o, "scope", ngx_omniroute_api_str(&l->scope));
    bad |= json_object_set_new(o, "reason", json_string(
                         l->table == NGX_OMNIROUTE_T_REJECTED
                         ? "request_rejected"
                         : or_reason_name((or_reason_e) l->lo.reason)));
    bad |= json_object_set_new(o, "status",
                               l->lo.last_status > 0
                               ? json_integer(l->lo.last_status)
                               : json_null());
    bad |= json_object_set_new(o, "failures", json_integer(l->lo.failures));
    bad |= json_object_set_new(o, "expires_at",
                               ngx_omniroute_api_time(l->lo.until));
    bad |= json_object_set_new(o, "retry_after_ms", json_integer(retry));
    bad |= json_object_set_new(o, "retry_after_s",
                               json_integer((retry + 999) / 1000));

    if (bad) {
        json_decref(o);
        return NULL;
    }

    return o;
}


/* every record of the lockout and request-rejected tables */

static ngx_array_t *
ngx_omniroute_api_lockouts_load(ngx_omniroute_api_call_t *call)
{
    ngx_omniroute_store_t      *st;
    ngx_omniroute_api_visit_t   v;

    v.list = ngx_array_create(call->r->pool, 16,
                              sizeof(ngx_omniroute_api_lockout_t));
    if (v.list == NULL) {
        return NULL;
    }

    v.error = 0;

    st = ngx_omniroute_api_store(call);

    v.table = NGX_OMNIROUTE_T_LOCKOUT;
    (void) ngx_omniroute_store_visit(st, v.table,
                                     ngx_omniroute_api_lockout_visit, &v,
                                     call->r->pool);

    v.table = NGX_OMNIROUTE_T_REJECTED;
    (void) ngx_omniroute_store_visit(st, v.table,
                                     ngx_omniroute_api_lockout_visit, &v,
                                     call->r->pool);

    return v.error ? NULL : v.list;
}


static void
ngx_omniroute_api_lockout_visit(ngx_str_t *key, void *value, size_t size,
    void *arg)
{
    ngx_omniroute_api_visit_t *v = arg;

    ngx_omniroute_api_lockout_t  *l;

    if (size < sizeof(or_lockout_t)) {
        return;
    }

    l = ngx_array_push(v->list);
    if (l == NULL) {
        v->error = 1;
        return;
    }

    if (ngx_omniroute_api_lockout_parse(key, l) != NGX_OK) {
        v->list->nelts--;
        return;
    }

    l->table = v->table;
    ngx_memcpy(&l->lo, value, sizeof(or_lockout_t));
}


/* "provider:connection:scope:model" (or_lockout_key()) */

static ngx_int_t
ngx_omniroute_api_lockout_parse(ngx_str_t *key,
    ngx_omniroute_api_lockout_t *l)
{
    u_char     *p, *last, *c1, *c2, *c3;

    p = key->data;
    last = key->data + key->len;

    c1 = ngx_strlchr(p, last, ':');
    c2 = c1 ? ngx_strlchr(c1 + 1, last, ':') : NULL;
    c3 = c2 ? ngx_strlchr(c2 + 1, last, ':') : NULL;

    if (c3 == NULL || c3 + 1 == last) {
        return NGX_DECLINED;
    }

    l->key = *key;

    l->provider.data = p;
    l->provider.len = c1 - p;
    l->conn.data = c1 + 1;
    l->conn.len = c2 - c1 - 1;
    l->scope.data = c2 + 1;
    l->scope.len = c3 - c2 - 1;
    l->model.data = c3 + 1;
    l->model.len = last - c3 - 1;

    return NGX_OK;
}


static ngx_uint_t
ngx_omniroute_api_lockout_of(ngx_omniroute_api_lockout_t *l,
    ngx_omniroute_connection_t *c)
{
    return l->conn.len == c->id.len
           && ngx_strncmp(l->conn.data, c->id.data, c->id.len) == 0
           && l->provider.len == c->provider_name.len
           && ngx_strncmp(l->provider.data, c->provider_name.data,
                          l->provider.len) == 0;
}


static ngx_omniroute_store_t *
ngx_omniroute_api_store(ngx_omniroute_api_call_t *call)
{
    return call->omcf->shm_zone ? &call->omcf->store : NULL;
}


static void
ngx_omniroute_api_breaker_read(ngx_omniroute_api_call_t *call,
    ngx_omniroute_provider_t *p, or_breaker_t *cb)
{
    if (ngx_omniroute_store_read(ngx_omniroute_api_store(call),
                                 NGX_OMNIROUTE_T_BREAKER, &p->name, cb,
                                 sizeof(or_breaker_t))
        != NGX_OK)
    {
        ngx_memzero(cb, sizeof(or_breaker_t));
    }
}


static void
ngx_omniroute_api_conn_read(ngx_omniroute_api_call_t *call,
    ngx_omniroute_connection_t *c, or_conn_state_t *cs)
{
    if (ngx_omniroute_store_read(ngx_omniroute_api_store(call),
                                 NGX_OMNIROUTE_T_CONN, &c->id, cs,
                                 sizeof(or_conn_state_t))
        != NGX_OK)
    {
        ngx_memzero(cs, sizeof(or_conn_state_t));
    }
}


/* v: NULL (absent: *pp = NULL) or the name of a configured provider */

static ngx_int_t
ngx_omniroute_api_provider_arg(ngx_omniroute_api_call_t *call, json_t *v,
    const char *field, ngx_omniroute_provider_t **pp)
{
    *pp = NULL;

    if (v == NULL) {
        return NGX_OK;
    }

    if (!json_is_string(v)) {
        return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                      "invalid_type",
                                      "\"%s\" must be a string", field);
    }

    *pp = ngx_omniroute_api_provider(call->omcf, json_string_value(v),
                                     json_string_length(v));

    if (*pp == NULL) {
        return ngx_omniroute_api_fail(call, NGX_HTTP_NOT_FOUND,
                                      "unknown_provider",
                                      "unknown provider \"%*s\"",
                                      ngx_min(json_string_length(v), 128),
                                      json_string_value(v));
    }

    return NGX_OK;
}


static ngx_int_t
ngx_omniroute_api_connection_arg(ngx_omniroute_api_call_t *call, json_t *v,
    const char *field, ngx_omniroute_connection_t **cp)
{
    if (!json_is_string(v)) {
        return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                      "invalid_type",
                                      "\"%s\" must hold connection ids "
                                      "(strings)", field);
    }

    *cp = ngx_omniroute_api_connection(call->omcf, json_string_value(v),
                                       json_string_length(v));

    if (*cp == NULL) {
        return ngx_omniroute_api_fail(call, NGX_HTTP_NOT_FOUND,
                                      "unknown_connection",
                                      "unknown connection \"%*s\"",
                                      ngx_min(json_string_length(v), 128),
                                      json_string_value(v));
    }

    return NGX_OK;
}


static ngx_int_t
ngx_omniroute_api_query_provider(ngx_omniroute_api_call_t *call,
    const char *name, ngx_omniroute_provider_t **pp)
{
    ngx_str_t  arg;

    *pp = NULL;

    if (ngx_omniroute_api_arg(call, name, &arg) != NGX_OK) {
        return NGX_OK;
    }

    *pp = ngx_omniroute_api_provider(call->omcf, (const char *) arg.data,
                                     arg.len);

    if (*pp == NULL) {
        return ngx_omniroute_api_fail(call, NGX_HTTP_NOT_FOUND,
                                      "unknown_provider",
                                      "unknown provider \"%V\"", &arg);
    }

    return NGX_OK;
}
