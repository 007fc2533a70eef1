
/*
 * Copyright (C) ngx_omniroute authors
 *
 * GET /metrics: Prometheus text exposition format 0.0.4 (SPEC §12).
 * Counters come from the zone's atomic stats (never reset, so they count
 * from the first start, across reloads); gauges are derived from the
 * state records at scrape time, with the same lazy normalization as
 * planning (an expired OPEN breaker is HALF_OPEN).  See docs/metrics.md.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute_api.h"
#include "ngx_omniroute_redis_stats.h"
#include "ngx_omniroute_keys.h"
#include "ngx_omniroute_lease_store.h"


#define NGX_OMNIROUTE_METRICS_LINE  2048    /* room kept for one line */


typedef struct {
    u_char                       *start;
    u_char                       *pos;
    u_char                       *end;
    ngx_pool_t                   *pool;
    ngx_uint_t                    error;
} ngx_omniroute_metrics_buf_t;


typedef struct {
    ngx_omniroute_main_conf_t    *omcf;
    ngx_uint_t                   *lockouts;     /* per provider */
    or_msec_t                     now;
} ngx_omniroute_metrics_visit_t;


/* a provider's breaker as the scrape saw it */
typedef struct {
    or_msec_t                       retry;
    ngx_uint_t                      state;
    uint32_t                        failures;
} ngx_omniroute_metrics_breaker_t;


static void ngx_omniroute_metrics_printf(ngx_omniroute_metrics_buf_t *mb,
    const char *fmt, ...);
static void ngx_omniroute_metrics_head(ngx_omniroute_metrics_buf_t *mb,
    const char *name, const char *type, const char *help);
static u_char *ngx_omniroute_metrics_escape(ngx_pool_t *pool, u_char *s,
    size_t len);
static void ngx_omniroute_metrics_lockout(ngx_str_t *key, void *value,
    size_t size, void *arg);
static void ngx_omniroute_metrics_redis(ngx_omniroute_metrics_buf_t *mb);
static void ngx_omniroute_metrics_labelled(ngx_omniroute_metrics_buf_t *mb,
    ngx_omniroute_api_call_t *call);
static void ngx_omniroute_metrics_pairs(ngx_omniroute_metrics_buf_t *mb,
    ngx_omniroute_api_call_t *call, ngx_uint_t what);
static void ngx_omniroute_metrics_hist(ngx_omniroute_metrics_buf_t *mb,
    const char *name, u_char *labels, ngx_omniroute_hist_t *h);
static u_char *ngx_omniroute_metrics_conn_labels(
    ngx_omniroute_metrics_buf_t *mb, ngx_omniroute_main_conf_t *omcf,
    ngx_uint_t ci);
static void ngx_omniroute_metrics_keys(ngx_omniroute_metrics_buf_t *mb,
    ngx_omniroute_main_conf_t *omcf);


const char  *ngx_omniroute_outcome_names[NGX_OMNIROUTE_OUTCOMES] = {
    "success",
    "provider_error",
    "unreachable",
    "cooling_down",
    "no_targets",
    "client_error",
    "queue_full",
    "queue_timeout"
};


/* the histograms' bucket bounds in seconds */
static const char  *ngx_omniroute_hist_le[NGX_OMNIROUTE_HIST_BOUNDS] = {
    "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5",
    "10", "30", "60", "120", "300"
};


#define NGX_OMNIROUTE_M_ATTEMPTS   0
#define NGX_OMNIROUTE_M_FALLBACKS  1
#define NGX_OMNIROUTE_M_TOKENS     2
#define NGX_OMNIROUTE_M_COST       3


static const char  *ngx_omniroute_pace_names[NGX_OMNIROUTE_PACE_EVENTS] = {
    "pause",
    "lockout",
    "queued",
    "queue_timeout",
    "backoff",
    "skip",
    "emergency"
};


static const char  *ngx_omniroute_table_names[NGX_OMNIROUTE_T_COUNT] = {
    "breaker",
    "connection",
    "lockout",
    "rejected",
    "strategy",
    "settings",
    "session_pin",
    "lease",
    "lane",
    "pace"
};


ngx_int_t
ngx_omniroute_api_metrics(ngx_omniroute_api_call_t *call)
{
    u_char                         *name;
    ngx_uint_t                      i, j, n[3];
    or_msec_t                       retry;
    or_breaker_t                    cb;
    or_conn_state_t                 cs;
    or_cooldown_view_t              view;
    ngx_omniroute_sh_t             *sh;
    ngx_omniroute_stats_t          *stats;
    ngx_omniroute_store_t          *st;
    ngx_omniroute_settings_t        s;
    ngx_omniroute_provider_t       *p;
    ngx_omniroute_connection_t     *c;
    ngx_omniroute_metrics_buf_t     mb;
    ngx_omniroute_store_usage_t     zu;
    ngx_omniroute_metrics_visit_t   mv;
    ngx_omniroute_metrics_breaker_t *bv;

    mb.pool = call->r->pool;
    mb.start = ngx_pnalloc(mb.pool, 16384);
    if (mb.start == NULL) {
        return NGX_ERROR;
    }

    mb.pos = mb.start;
    mb.end = mb.start + 16384;
    mb.error = 0;

    st = call->omcf->shm_zone ? &call->omcf->store : NULL;
    sh = (st && st->sh) ? st->sh : NULL;
    stats = sh ? &sh->stats : NULL;

    p = call->omcf->providers.elts;
    c = call->omcf->connections.elts;

    /* counters */

    ngx_omniroute_metrics_head(&mb, "omniroute_requests_total", "counter",
                               "Client requests of omniroute_pass "
                               "locations, by outcome.");

    for (i = 0; i < NGX_OMNIROUTE_OUTCOMES; i++) {
        ngx_omniroute_metrics_printf(&mb,
                              "omniroute_requests_total{outcome=\"%s\"} %uA\n",
                              ngx_omniroute_outcome_names[i],
                              ngx_omniroute_api_requests(call, i));
    }

    ngx_omniroute_metrics_head(&mb, "omniroute_attempts_total", "counter",
                               "Upstream attempts, by the classified "
                               "result (reason none: a success).");

    for (i = 0; i < OR_REASON_COUNT; i++) {
        ngx_omniroute_metrics_printf(&mb,
                              "omniroute_attempts_total{reason=\"%s\"} %uA\n",
                              or_reason_name((or_reason_e) i),
                              stats ? stats->attempts[i] : 0);
    }

    ngx_omniroute_metrics_head(&mb, "omniroute_fallbacks_total", "counter",
                               "In-request fallovers to the next "
                               "candidate, by the reason of the failed "
                               "attempt.");

    for (i = 1; i < OR_REASON_COUNT; i++) {
        ngx_omniroute_metrics_printf(&mb,
                             "omniroute_fallbacks_total{reason=\"%s\"} %uA\n",
                             or_reason_name((or_reason_e) i),
                             stats ? stats->fallbacks[i] : 0);
    }

    ngx_omniroute_metrics_head(&mb, "omniroute_restatements_total",
                               "counter",
                               "Upstream error statuses restated, by "
                               "rule.");

    for (i = 0; stats && i < NGX_OMNIROUTE_RULE_SLOTS; i++) {
        if (stats->restatements[i].name[0] == '\0') {
            continue;
        }

        name = ngx_omniroute_metrics_escape(mb.pool,
                              stats->restatements[i].name,
                              ngx_strnlen(stats->restatements[i].name,
                                          NGX_OMNIROUTE_RULE_NAME_MAX));
        if (name == NULL) {
            return NGX_ERROR;
        }

        ngx_omniroute_metrics_printf(&mb,
                             "omniroute_restatements_total{rule=\"%s\"} %uA\n",
                             name, stats->restatements[i].count);
    }

    /* provider breakers: each read once, normalized at scrape time */

    bv = ngx_palloc(mb.pool, (call->omcf->providers.nelts + 1)
                             * sizeof(ngx_omniroute_metrics_breaker_t));
    if (bv == NULL) {
        return NGX_ERROR;
    }

    for (i = 0; i < call->omcf->providers.nelts; i++) {
        ngx_omniroute_settings_effective(call->omcf, &p[i], &s);

        if (ngx_omniroute_store_read(st, NGX_OMNIROUTE_T_BREAKER, &p[i].name,
                                     &cb, sizeof(or_breaker_t))
            != NGX_OK)
        {
            ngx_memzero(&cb, sizeof(or_breaker_t));
        }

        bv[i].retry = or_breaker_retry_after(&s.breaker, &cb, call->now);
        or_breaker_normalize(&s.breaker, &cb, call->now);
        bv[i].state = cb.state;
        bv[i].failures = cb.failures;
    }

    ngx_omniroute_metrics_head(&mb, "omniroute_breaker_state", "gauge",
                               "Circuit breaker state of a provider: 1 for "
                               "the current state, 0 for the others.");

    for (i = 0; i < call->omcf->providers.nelts; i++) {
        for (j = OR_CB_CLOSED; j <= OR_CB_HALF_OPEN; j++) {
            ngx_omniroute_metrics_printf(&mb,
                          "omniroute_breaker_state{provider=\"%V\","
                          "state=\"%s\"} %ui\n", &p[i].name,
                          or_breaker_state_name((or_cb_state_e) j),
                          (ngx_uint_t) (j == bv[i].state));
        }
    }

    ngx_omniroute_metrics_head(&mb, "omniroute_breaker_failures", "gauge",
                               "Provider-level failures the breaker "
                               "currently counts.");

    for (i = 0; i < call->omcf->providers.nelts; i++) {
        ngx_omniroute_metrics_printf(&mb,
                          "omniroute_breaker_failures{provider=\"%V\"} %uD\n",
                          &p[i].name, bv[i].failures);
    }

    ngx_omniroute_metrics_head(&mb, "omniroute_breaker_retry_after_seconds",
                               "gauge",
                               "Seconds until the provider may be tried "
                               "again (0: it may now).");

    for (i = 0; i < call->omcf->providers.nelts; i++) {
        retry = bv[i].retry;

        ngx_omniroute_metrics_printf(&mb,
                          "omniroute_breaker_retry_after_seconds"
                          "{provider=\"%V\"} %L.%03L\n", &p[i].name,
                          (int64_t) (retry / 1000), (int64_t) (retry % 1000));
    }

    /* connections and lockouts */

    ngx_omniroute_metrics_head(&mb, "omniroute_connections", "gauge",
                               "Connections by state: active, cooldown "
                               "(transient) or terminal (banned, expired, "
                               "credits_exhausted).");

    for (i = 0; i < call->omcf->providers.nelts; i++) {
        n[0] = n[1] = n[2] = 0;

        for (j = 0; j < call->omcf->connections.nelts; j++) {
            if (c[j].provider_name.len != p[i].name.len
                || ngx_strncmp(c[j].provider_name.data, p[i].name.data,
                               p[i].name.len) != 0)
            {
                continue;
            }

            if (ngx_omniroute_store_read(st, NGX_OMNIROUTE_T_CONN, &c[j].id,
                                         &cs, sizeof(or_conn_state_t))
                != NGX_OK)
            {
                ngx_memzero(&cs, sizeof(or_conn_state_t));
            }

            or_cooldown_view(&cs, call->now, &view);
            n[view.status]++;
        }

        ngx_omniroute_metrics_printf(&mb,
                   "omniroute_connections{provider=\"%V\",state=\"active\"} "
                   "%ui\n", &p[i].name, n[OR_CONN_ACTIVE]);
        ngx_omniroute_metrics_printf(&mb,
                   "omniroute_connections{provider=\"%V\",state=\"cooldown\"}"
                   " %ui\n", &p[i].name, n[OR_CONN_COOLDOWN]);
        ngx_omniroute_metrics_printf(&mb,
                   "omniroute_connections{provider=\"%V\",state=\"terminal\"}"
                   " %ui\n", &p[i].name, n[OR_CONN_TERMINAL]);
    }

    mv.omcf = call->omcf;
    mv.now = call->now;
    mv.lockouts = ngx_pcalloc(mb.pool, (call->omcf->providers.nelts + 1)
                                       * sizeof(ngx_uint_t));
    if (mv.lockouts == NULL) {
        return NGX_ERROR;
    }

    (void) ngx_omniroute_store_visit(st, NGX_OMNIROUTE_T_LOCKOUT,
                                     ngx_omniroute_metrics_lockout, &mv,
                                     mb.pool);
    (void) ngx_omniroute_store_visit(st, NGX_OMNIROUTE_T_REJECTED,
                                     ngx_omniroute_metrics_lockout, &mv,
                                     mb.pool);

    ngx_omniroute_metrics_head(&mb, "omniroute_lockouts_active", "gauge",
                               "Active model lockouts (including "
                               "request_rejected ones), by provider.");

    for (i = 0; i < call->omcf->providers.nelts; i++) {
        ngx_omniroute_metrics_printf(&mb,
                          "omniroute_lockouts_active{provider=\"%V\"} %ui\n",
                          &p[i].name, mv.lockouts[i]);
    }

    /* the zone */

    ngx_omniroute_store_usage(st, &zu);

    ngx_omniroute_metrics_head(&mb, "omniroute_zone_size_bytes", "gauge",
                               "Size of the omniroute shared memory "
                               "zone.");
    ngx_omniroute_metrics_printf(&mb, "omniroute_zone_size_bytes %uz\n",
                                 zu.size);

    ngx_omniroute_metrics_head(&mb, "omniroute_zone_used_bytes", "gauge",
                               "Bytes of the zone in used pages.");
    ngx_omniroute_metrics_printf(&mb, "omniroute_zone_used_bytes %uz\n",
                                 zu.used);

    ngx_omniroute_metrics_head(&mb, "omniroute_zone_records", "gauge",
                               "State records in the zone, by table.");

    for (i = 0; i < NGX_OMNIROUTE_T_COUNT; i++) {
        ngx_omniroute_metrics_printf(&mb,
                              "omniroute_zone_records{table=\"%s\"} %ui\n",
                              ngx_omniroute_table_names[i], zu.records[i]);
    }

    ngx_omniroute_metrics_head(&mb, "omniroute_queue_depth", "gauge",
                               "Requests waiting for a concurrency slot "
                               "(max_concurrent).");
    ngx_omniroute_metrics_printf(&mb, "omniroute_queue_depth %uA\n",
                                 sh ? sh->queued : 0);

    ngx_omniroute_metrics_head(&mb, "omniroute_zone_evictions_total",
                               "counter",
                               "Records evicted to make room (least "
                               "recently used first).");
    ngx_omniroute_metrics_printf(&mb, "omniroute_zone_evictions_total %ui\n",
                                 zu.evictions);

    ngx_omniroute_metrics_head(&mb, "omniroute_zone_alloc_failures_total",
                               "counter",
                               "State changes lost because the zone had no "
                               "room even after eviction.");
    ngx_omniroute_metrics_printf(&mb,
                                 "omniroute_zone_alloc_failures_total %ui\n",
                                 zu.alloc_failures);

    ngx_omniroute_metrics_head(&mb, "omniroute_zone_events_lost_total",
                               "counter",
                               "State changes overwritten in the event ring "
                               "before the Redis mirror read them.");
    ngx_omniroute_metrics_printf(&mb, "omniroute_zone_events_lost_total %uA\n",
                                 sh ? sh->stats.events_lost : 0);

    /* R-LANE-9: the usage-limit lane */

    ngx_omniroute_metrics_head(&mb, "omniroute_lane_entries_total",
                               "counter",
                               "Usage-limit walls answered by entering the "
                               "low-priority lane (usage_lane=on).");
    ngx_omniroute_metrics_printf(&mb, "omniroute_lane_entries_total %uA\n",
                                 sh ? sh->stats.lane_entries : 0);

    ngx_omniroute_metrics_head(&mb, "omniroute_lane_waits_total", "counter",
                               "slot_busy 429s and 529s of the lane waited "
                               "out.");
    ngx_omniroute_metrics_printf(&mb, "omniroute_lane_waits_total %uA\n",
                                 sh ? sh->stats.lane_waits : 0);

    ngx_omniroute_metrics_head(&mb, "omniroute_lane_ends_total", "counter",
                               "Low-priority lanes ended, by end state.");

    for (i = 1; i < OR_LANE_END_COUNT; i++) {
        ngx_omniroute_metrics_printf(&mb,
                                     "omniroute_lane_ends_total{state=\"%s\"} "
                                     "%uA\n", or_lane_end_name(i),
                                     sh ? sh->stats.lane_ends[i] : 0);
    }

    ngx_omniroute_metrics_head(&mb, "omniroute_limit_resets_total",
                               "counter",
                               "Session-limit reset attempts "
                               "(limit_reset=on), by result.");

    for (i = 1; i < OR_RESET_COUNT; i++) {
        ngx_omniroute_metrics_printf(&mb,
                                     "omniroute_limit_resets_total"
                                     "{result=\"%s\"} %uA\n",
                                     or_reset_result_name(i),
                                     sh ? sh->stats.limit_resets[i] : 0);
    }

    /* R-PACE, R-TOOL, R-EMERG (docs/metrics.md) */

    ngx_omniroute_metrics_head(&mb, "omniroute_pacing_total", "counter",
                               "Pacing of body-stated 429 waits: "
                               "connections paused, long typed waits "
                               "locked, requests that waited a pause or "
                               "were answered at once.");

    for (i = 0; i < 4; i++) {
        ngx_omniroute_metrics_printf(&mb,
                               "omniroute_pacing_total{event=\"%s\"} %uA\n",
                               ngx_omniroute_pace_names[i],
                               sh ? sh->stats.pace[i] : 0);
    }

    ngx_omniroute_metrics_head(&mb, "omniroute_tool_limit_total", "counter",
                               "Tool-limit backoff: provider/models that "
                               "refused a request's tools, and targets "
                               "skipped for it.");

    for (i = NGX_OMNIROUTE_PACE_TOOL_BACKOFF;
         i <= NGX_OMNIROUTE_PACE_TOOL_SKIP; i++)
    {
        ngx_omniroute_metrics_printf(&mb,
                           "omniroute_tool_limit_total{event=\"%s\"} %uA\n",
                           ngx_omniroute_pace_names[i],
                           sh ? sh->stats.pace[i] : 0);
    }

    ngx_omniroute_metrics_head(&mb, "omniroute_emergency_fallback_total",
                               "counter",
                               "Requests planned onto the emergency "
                               "target after every other candidate failed "
                               "or was excluded.");
    ngx_omniroute_metrics_printf(&mb,
                                 "omniroute_emergency_fallback_total %uA\n",
                                 sh ? sh->stats.pace[
                                          NGX_OMNIROUTE_PACE_EMERGENCY]
                                    : 0);

    ngx_omniroute_metrics_redis(&mb);
    ngx_omniroute_metrics_keys(&mb, call->omcf);

    ngx_omniroute_metrics_labelled(&mb, call);

    if (mb.error) {
        return NGX_ERROR;
    }

    return ngx_omniroute_api_text(call, mb.start, mb.pos - mb.start,
                                  "text/plain; version=0.0.4; "
                                  "charset=utf-8");
}


/* the Redis mirror's link (R-CLUSTER-2/3), when omniroute_redis is set */

static void
ngx_omniroute_metrics_redis(ngx_omniroute_metrics_buf_t *mb)
{
    ngx_uint_t                    i, state;
    ngx_omniroute_redis_stats_t  *st;

    static const struct {
        const char  *name;
        size_t       offset;
        const char  *help;
    } counters[] = {
        { "omniroute_redis_connects_total",
          offsetof(ngx_omniroute_redis_stats_t, connects),
          "Links to Redis established." },
        { "omniroute_redis_link_failures_total",
          offsetof(ngx_omniroute_redis_stats_t, failures),
          "Links to Redis that failed or were lost." },
        { "omniroute_redis_syncs_total",
          offsetof(ngx_omniroute_redis_stats_t, syncs),
          "Full state loads from Redis completed." },
        { "omniroute_redis_loaded_total",
          offsetof(ngx_omniroute_redis_stats_t, loaded),
          "Records read by full loads." },
        { "omniroute_redis_published_total",
          offsetof(ngx_omniroute_redis_stats_t, published),
          "Local state changes written to Redis." },
        { "omniroute_redis_received_total",
          offsetof(ngx_omniroute_redis_stats_t, received),
          "Remote state changes received." },
        { "omniroute_redis_applied_total",
          offsetof(ngx_omniroute_redis_stats_t, applied),
          "Remote state changes that changed the local state." },
        { "omniroute_redis_write_backs_total",
          offsetof(ngx_omniroute_redis_stats_t, write_backs),
          "Local states that knew more than a remote one, sent back." },
        { "omniroute_redis_overflows_total",
          offsetof(ngx_omniroute_redis_stats_t, overflows),
          "Local changes lost from the event ring before being sent." },
        { "omniroute_redis_errors_total",
          offsetof(ngx_omniroute_redis_stats_t, errors),
          "Error replies and undecodable data from Redis." },
        { "omniroute_redis_records_rejected_total",
          offsetof(ngx_omniroute_redis_stats_t, rejected),
          "Remote records dropped as invalid (bad ranges or sizes)." },
        { "omniroute_redis_refills_total",
          offsetof(ngx_omniroute_redis_stats_t, refills),
          "Times Redis had lost the state (flush, restart) and was refilled." }
    };

    st = ngx_omniroute_redis_stats();
    state = st ? st->state : NGX_OMNIROUTE_REDIS_DISABLED;

    ngx_omniroute_metrics_head(mb, "omniroute_redis_link_state", "gauge",
                               "State of this node's link to Redis: 1 for "
                               "the current state.");

    for (i = 0; i < NGX_OMNIROUTE_REDIS_STATE_COUNT; i++) {
        ngx_omniroute_metrics_printf(mb,
                            "omniroute_redis_link_state{state=\"%s\"} %ui\n",
                            ngx_omniroute_redis_state_name(i),
                            (ngx_uint_t) (i == state));
    }

    if (st == NULL) {
        return;
    }

    for (i = 0; i < sizeof(counters) / sizeof(counters[0]); i++) {
        ngx_omniroute_metrics_head(mb, counters[i].name, "counter",
                                   counters[i].help);
        ngx_omniroute_metrics_printf(mb, "%s %uA\n", counters[i].name,
                                     *(ngx_atomic_t *) ((u_char *) st
                                                     + counters[i].offset));
    }

    ngx_omniroute_metrics_head(mb, "omniroute_redis_pending_commands",
                               "gauge",
                               "Commands sent to Redis awaiting a reply.");
    ngx_omniroute_metrics_printf(mb, "omniroute_redis_pending_commands %uA\n",
                                 st->pending);

    ngx_omniroute_metrics_head(mb, "omniroute_redis_lag_seconds", "gauge",
                               "Age of the last remote change when it was "
                               "applied.");
    ngx_omniroute_metrics_printf(mb, "omniroute_redis_lag_seconds %uA.%03uA\n",
                                 st->lag_ms / 1000, st->lag_ms % 1000);
}


static void
ngx_omniroute_metrics_head(ngx_omniroute_metrics_buf_t *mb,
    const char *name, const char *type, const char *help)
{
    ngx_omniroute_metrics_printf(mb, "# HELP %s %s\n# TYPE %s %s\n",
                                 name, help, name, type);
}


static void
ngx_omniroute_metrics_printf(ngx_omniroute_metrics_buf_t *mb,
    const char *fmt, ...)
{
    u_char   *p;
    size_t    size;
    va_list   args;

    if (mb->error) {
        return;
    }

    if ((size_t) (mb->end - mb->pos) < NGX_OMNIROUTE_METRICS_LINE) {
        size = (mb->end - mb->start) * 2;

        p = ngx_pnalloc(mb->pool, size);
        if (p == NULL) {
            mb->error = 1;
            return;
        }

        ngx_memcpy(p, mb->start, mb->pos - mb->start);

        mb->pos = p + (mb->pos - mb->start);
        mb->start = p;
        mb->end = p + size;
    }

    va_start(args, fmt);
    mb->pos = ngx_vslprintf(mb->pos, mb->end, fmt, args);
    va_end(args);
}


/* a label value: backslash, double quote and newline escaped, NUL ended */

static u_char *
ngx_omniroute_metrics_escape(ngx_pool_t *pool, u_char *s, size_t len)
{
    u_char  *out, *p;
    size_t   i;

    out = ngx_pnalloc(pool, len * 2 + 1);
    if (out == NULL) {
        return NULL;
    }

    p = out;

    for (i = 0; i < len; i++) {
        if (s[i] == '\\' || s[i] == '"') {
            *p++ = '\\';
            *p++ = s[i];

        } else if (s[i] == '\n') {
            *p++ = '\\';
            *p++ = 'n';

        } else {
            *p++ = s[i];
        }
    }

    *p = '\0';

    return out;
}


static void
ngx_omniroute_metrics_lockout(ngx_str_t *key, void *value, size_t size,
    void *arg)
{
    ngx_omniroute_metrics_visit_t *mv = arg;

    u_char                    *colon;
    ngx_uint_t                 i;
    or_lockout_t               lo;
    ngx_omniroute_provider_t  *p;

    if (size < sizeof(or_lockout_t)) {
        return;
    }

    ngx_memcpy(&lo, value, sizeof(or_lockout_t));

    if (!or_lockout_active(&lo, mv->now)) {
        return;
    }

    colon = ngx_strlchr(key->data, key->data + key->len, ':');
    if (colon == NULL) {
        return;
    }

    p = mv->omcf->providers.elts;

    for (i = 0; i < mv->omcf->providers.nelts; i++) {
        if (p[i].name.len == (size_t) (colon - key->data)
            && ngx_strncmp(p[i].name.data, key->data, p[i].name.len) == 0)
        {
            mv->lockouts[i]++;
            return;
        }
    }
}


/* requests that ended with outcome, from the metrics zone (all models) */

ngx_atomic_uint_t
ngx_omniroute_api_requests(ngx_omniroute_api_call_t *call, ngx_uint_t outcome)
{
    ngx_uint_t              i;
    ngx_atomic_uint_t       n;
    ngx_omniroute_mzone_t  *mz;

    mz = call->omcf->mzone;

    if (mz == NULL || mz->sh == NULL || outcome >= NGX_OMNIROUTE_OUTCOMES) {
        return 0;
    }

    n = 0;

    for (i = 0; i < mz->nmodels; i++) {
        n += mz->sh->models[i].requests[outcome];
    }

    return n;
}


/*
 * The labelled series of the metrics zone: per model, per connection and
 * per (model, connection) pair, every label a configured name.  Series
 * per pair appear once they are non-zero; the others are always there.
 */

static void
ngx_omniroute_metrics_labelled(ngx_omniroute_metrics_buf_t *mb,
    ngx_omniroute_api_call_t *call)
{
    u_char                     *labels;
    ngx_uint_t                  i, j;
    ngx_omniroute_msh_t        *sh;
    ngx_omniroute_mzone_t      *mz;
    ngx_omniroute_provider_t   *p;

    mz = call->omcf->mzone;

    if (mz == NULL || mz->sh == NULL) {
        return;
    }

    sh = mz->sh;
    p = call->omcf->providers.elts;

    ngx_omniroute_metrics_head(mb, "omniroute_model_requests_total",
                               "counter",
                               "Client requests by the configured model "
                               "they named and how they ended.");

    for (i = 0; i < mz->nmodels; i++) {
        for (j = 0; j < NGX_OMNIROUTE_OUTCOMES; j++) {
            ngx_omniroute_metrics_printf(mb,
                           "omniroute_model_requests_total{model=\"%V\","
                           "outcome=\"%s\"} %uA\n", &mz->model_names[i],
                           ngx_omniroute_outcome_names[j],
                           sh->models[i].requests[j]);
        }
    }

    ngx_omniroute_metrics_head(mb, "omniroute_connection_attempts_total",
                               "counter",
                               "Upstream attempts by provider, connection, "
                               "model and classified result (reason none: "
                               "a success).");
    ngx_omniroute_metrics_pairs(mb, call, NGX_OMNIROUTE_M_ATTEMPTS);

    ngx_omniroute_metrics_head(mb, "omniroute_connection_fallbacks_total",
                               "counter",
                               "In-request fallovers by provider, "
                               "connection and model of the failed attempt "
                               "and its reason.");
    ngx_omniroute_metrics_pairs(mb, call, NGX_OMNIROUTE_M_FALLBACKS);

    ngx_omniroute_metrics_head(mb, "omniroute_tokens_total", "counter",
                               "Tokens of answers (streamed too) as the "
                               "provider reported them, by type (prompt, "
                               "completion, cached, reasoning).");
    ngx_omniroute_metrics_pairs(mb, call, NGX_OMNIROUTE_M_TOKENS);

    ngx_omniroute_metrics_head(mb, "omniroute_cost_total", "counter",
                               "Prompt and completion tokens priced at the "
                               "connection's cost= per million tokens.");
    ngx_omniroute_metrics_pairs(mb, call, NGX_OMNIROUTE_M_COST);

    ngx_omniroute_metrics_head(mb, "omniroute_breaker_transitions_total",
                               "counter",
                               "Circuit breaker state changes, by provider "
                               "and the state entered.");

    for (i = 0; i < mz->nproviders; i++) {
        for (j = OR_CB_CLOSED; j <= OR_CB_HALF_OPEN; j++) {
            ngx_omniroute_metrics_printf(mb,
                          "omniroute_breaker_transitions_total{provider="
                          "\"%V\",state=\"%s\"} %uA\n", &p[i].name,
                          or_breaker_state_name((or_cb_state_e) j),
                          sh->providers[i].transitions[j]);
        }
    }

    /* histograms */

    ngx_omniroute_metrics_head(mb, "omniroute_request_duration_seconds",
                               "histogram",
                               "Client request duration, by model, to the "
                               "last byte sent.");

    for (i = 0; i < mz->nmodels; i++) {
        labels = ngx_pnalloc(mb->pool, mz->model_names[i].len + 16);
        if (labels == NULL) {
            mb->error = 1;
            return;
        }

        ngx_sprintf(labels, "model=\"%V\"%Z", &mz->model_names[i]);

        ngx_omniroute_metrics_hist(mb, "omniroute_request_duration_seconds",
                                   labels, &sh->models[i].duration);
    }

    ngx_omniroute_metrics_head(mb, "omniroute_attempt_duration_seconds",
                               "histogram",
                               "Upstream attempt duration, by connection, "
                               "to the end of its response.");

    for (i = 0; i < mz->nconns; i++) {
        labels = ngx_omniroute_metrics_conn_labels(mb, call->omcf, i);
        ngx_omniroute_metrics_hist(mb, "omniroute_attempt_duration_seconds",
                                   labels, &sh->conns[i].attempt);
    }

    ngx_omniroute_metrics_head(mb, "omniroute_attempt_first_byte_seconds",
                               "histogram",
                               "Time from the start of an attempt to its "
                               "response header, by connection.");

    for (i = 0; i < mz->nconns; i++) {
        labels = ngx_omniroute_metrics_conn_labels(mb, call->omcf, i);
        ngx_omniroute_metrics_hist(mb, "omniroute_attempt_first_byte_seconds",
                                   labels, &sh->conns[i].first_byte);
    }

    ngx_omniroute_metrics_head(mb, "omniroute_stream_first_content_seconds",
                               "histogram",
                               "Time from the start of an attempt to the "
                               "first meaningful event of a probed 200 "
                               "stream, by connection.");

    for (i = 0; i < mz->nconns; i++) {
        labels = ngx_omniroute_metrics_conn_labels(mb, call->omcf, i);
        ngx_omniroute_metrics_hist(mb,
                                   "omniroute_stream_first_content_seconds",
                                   labels, &sh->conns[i].first_content);
    }
}


static u_char *
ngx_omniroute_metrics_conn_labels(ngx_omniroute_metrics_buf_t *mb,
    ngx_omniroute_main_conf_t *omcf, ngx_uint_t ci)
{
    u_char                      *labels;
    ngx_omniroute_provider_t    *p;
    ngx_omniroute_connection_t  *c;

    p = omcf->providers.elts;
    c = omcf->connections.elts;

    labels = ngx_pnalloc(mb->pool, p[c[ci].provider].name.len + c[ci].id.len
                                   + 32);
    if (labels == NULL) {
        mb->error = 1;
        return NULL;
    }

    ngx_sprintf(labels, "provider=\"%V\",connection=\"%V\"%Z",
                &p[c[ci].provider].name, &c[ci].id);

    return labels;
}


static void
ngx_omniroute_metrics_pairs(ngx_omniroute_metrics_buf_t *mb,
    ngx_omniroute_api_call_t *call, ngx_uint_t what)
{
    uint64_t                     v;
    ngx_uint_t                   k, j, ci;
    ngx_str_t                   *model;
    const char                  *name;
    ngx_omniroute_mpair_t       *pair;
    ngx_omniroute_mzone_t       *mz;
    ngx_omniroute_provider_t    *p;
    ngx_omniroute_connection_t  *c;

    mz = call->omcf->mzone;
    p = call->omcf->providers.elts;
    c = call->omcf->connections.elts;

    name = (what == NGX_OMNIROUTE_M_ATTEMPTS)
           ? "omniroute_connection_attempts_total"
           : "omniroute_connection_fallbacks_total";

    for (k = 0; k < mz->npairs; k++) {
        pair = &mz->sh->pairs[k];
        ci = mz->pair_conn[k];
        model = &mz->model_names[mz->pair_model[k]];

        switch (what) {

        case NGX_OMNIROUTE_M_TOKENS:
            for (j = 0; j < OR_USAGE_KINDS; j++) {
                if (pair->tokens[j] == 0) {
                    continue;
                }

                ngx_omniroute_metrics_printf(mb,
                        "omniroute_tokens_total{provider=\"%V\","
                        "connection=\"%V\",model=\"%V\",type=\"%s\"} %uA\n",
                        &p[c[ci].provider].name, &c[ci].id, model,
                        or_usage_kind_name((or_usage_kind_e) j),
                        pair->tokens[j]);
            }

            break;

        case NGX_OMNIROUTE_M_COST:
            v = pair->cost;

            if (v == 0) {
                break;
            }

            /* tokens x cost x 10^4 per million tokens: 10^10 a unit */

            ngx_omniroute_metrics_printf(mb,
                        "omniroute_cost_total{provider=\"%V\","
                        "connection=\"%V\",model=\"%V\"} %uL.%010uL\n",
                        &p[c[ci].provider].name, &c[ci].id, model,
                        v / 10000000000ULL, v % 10000000000ULL);
            break;

        default:
            for (j = 0; j < OR_REASON_COUNT; j++) {
                v = (what == NGX_OMNIROUTE_M_ATTEMPTS) ? pair->attempts[j]
                                                       : pair->fallbacks[j];
                if (v == 0) {
                    continue;
                }

                ngx_omniroute_metrics_printf(mb,
                        "%s{provider=\"%V\",connection=\"%V\",model=\"%V\","
                        "reason=\"%s\"} %uL\n", name,
                        &p[c[ci].provider].name, &c[ci].id, model,
                        or_reason_name((or_reason_e) j), v);
            }

            break;
        }
    }
}


static void
ngx_omniroute_metrics_hist(ngx_omniroute_metrics_buf_t *mb,
    const char *name, u_char *labels, ngx_omniroute_hist_t *h)
{
    ngx_uint_t         i;
    ngx_atomic_uint_t  n, sum;

    if (labels == NULL) {
        return;
    }

    n = 0;

    for (i = 0; i < NGX_OMNIROUTE_HIST_BOUNDS; i++) {
        n += h->bucket[i];

        ngx_omniroute_metrics_printf(mb, "%s_bucket{%s,le=\"%s\"} %uA\n",
                                     name, labels, ngx_omniroute_hist_le[i],
                                     n);
    }

    n += h->bucket[NGX_OMNIROUTE_HIST_BOUNDS];
    sum = h->sum_ms;

    ngx_omniroute_metrics_printf(mb, "%s_bucket{%s,le=\"+Inf\"} %uA\n",
                                 name, labels, n);
    ngx_omniroute_metrics_printf(mb, "%s_sum{%s} %uA.%03uA\n", name, labels,
                                 sum / 1000, sum % 1000);
    ngx_omniroute_metrics_printf(mb, "%s_count{%s} %uA\n", name, labels, n);
}


/* client keys and leases (conf/ngx_omniroute_keys.h), when keys exist */

static void
ngx_omniroute_metrics_keys(ngx_omniroute_metrics_buf_t *mb,
    ngx_omniroute_main_conf_t *omcf)
{
    ngx_uint_t                   i, j;
    ngx_array_t                  leases;
    ngx_omniroute_keys_sh_t     *sh;
    ngx_omniroute_keys_conf_t   *kc;
    ngx_omniroute_client_key_t  *key;

    kc = omcf->keys;

    if (kc == NULL || kc->sh == NULL || kc->keys.nelts == 0) {
        return;
    }

    sh = kc->sh;
    key = kc->keys.elts;

    ngx_omniroute_metrics_head(mb, "omniroute_client_key_requests_total",
                               "counter",
                               "Requests authenticated by a client key, by "
                               "key id and status class.");

    for (i = 0; i < kc->keys.nelts; i++) {
        if (key[i].slot >= NGX_OMNIROUTE_KEYS_MAX) {
            continue;
        }

        for (j = 0; j < NGX_OMNIROUTE_KEYS_CLASSES; j++) {
            ngx_omniroute_metrics_printf(mb,
                          "omniroute_client_key_requests_total{key=\"%V\","
                          "status=\"%uixx\"} %uA\n", &key[i].id, j + 1,
                          sh->keys[key[i].slot].requests[j]);
        }
    }

    ngx_omniroute_metrics_head(mb, "omniroute_client_auth_failures_total",
                               "counter",
                               "Requests refused for a missing or an "
                               "invalid client key.");
    ngx_omniroute_metrics_printf(mb,
                  "omniroute_client_auth_failures_total{reason=\"missing_key\"}"
                  " %uA\n", sh->auth[NGX_OMNIROUTE_AUTH_MISSING]);
    ngx_omniroute_metrics_printf(mb,
                  "omniroute_client_auth_failures_total{reason=\"invalid_key\"}"
                  " %uA\n", sh->auth[NGX_OMNIROUTE_AUTH_INVALID]);

    if (kc->lease_keys == 0) {
        return;
    }

    if (ngx_omniroute_lease_list(&omcf->store, mb->pool, &leases)
        != NGX_OK)
    {
        mb->error = 1;
        return;
    }

    ngx_omniroute_metrics_head(mb, "omniroute_leases_active", "gauge",
                               "Active exclusive session leases.");
    ngx_omniroute_metrics_printf(mb, "omniroute_leases_active %ui\n",
                                 leases.nelts);

    ngx_omniroute_metrics_head(mb, "omniroute_lease_capacity_rejections_total",
                               "counter",
                               "Answers 429 lease-capacity-unavailable.");
    ngx_omniroute_metrics_printf(mb,
                                 "omniroute_lease_capacity_rejections_total "
                                 "%uA\n", sh->lease_capacity);
}
