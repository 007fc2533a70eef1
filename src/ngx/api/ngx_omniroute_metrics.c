
/*
 * Copyright (C) ngx_omniroute authors
 *
 * GET /metrics: Prometheus text exposition format 0.0.4 (SPEC §12).
 * Counters come from the zone's atomic stats (never reset, so they count
 * from the first start, across reloads); gauges are derived from the
 * state records at scrape time, with the same lazy normalization as
 * planning (an expired OPEN breaker is HALF_OPEN).  See docs/metrics.md.
 *
 * Every family is a row of ngx_omniroute_metrics_families: its name,
 * type and help, the function that writes its series, and where their
 * values are.  A scrape reads what several families share (the zone's
 * usage under its lock, each provider's breaker, the active lockouts),
 * then writes the rows in order.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute_api.h"
#include "ngx_omniroute_redis_stats.h"
#include "ngx_omniroute_keys.h"
#include "ngx_omniroute_lease_store.h"
#include "ngx_omniroute_budget_store.h"


#define NGX_OMNIROUTE_METRICS_LINE  2048    /* room kept for one line */


/*
 * Where a family's values are.  The families of the state zone are
 * written without a zone too (all zero); the others only when theirs
 * exists: the link to Redis, client keys, keys with leases, the metrics
 * zone.
 */
#define NGX_OMNIROUTE_MS_STATE      0       /* ngx_omniroute_sh_t */
#define NGX_OMNIROUTE_MS_SCRAPE     1       /* ..._metrics_scrape_t */
#define NGX_OMNIROUTE_MS_REDIS      2       /* ..._redis_stats_t */
#define NGX_OMNIROUTE_MS_KEYS       3       /* ..._keys_sh_t */
#define NGX_OMNIROUTE_MS_LEASES     4       /* ..._keys_sh_t */
#define NGX_OMNIROUTE_MS_LABELLED   5       /* ..._msh_t */
#define NGX_OMNIROUTE_MS_COUNT      6


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


/* what a scrape read before writing the families */
typedef struct {
    ngx_omniroute_api_call_t         *call;
    ngx_omniroute_store_t            *st;
    u_char                           *base[NGX_OMNIROUTE_MS_COUNT];
    ngx_omniroute_metrics_breaker_t  *breakers;     /* per provider */
    ngx_uint_t                       *lockouts;     /* per provider */
    ngx_uint_t                        leases;       /* active */

    /* the zone's usage, read under its lock */
    ngx_atomic_uint_t                 total;
    ngx_atomic_uint_t                 used;
    ngx_atomic_uint_t                 records[NGX_OMNIROUTE_T_COUNT];
    ngx_atomic_uint_t                 evictions;
    ngx_atomic_uint_t                 failures;
} ngx_omniroute_metrics_scrape_t;


/* the series of a family by the values of an enum: name{label="..."} */
typedef struct {
    const char                   *label;
    const char                 *(*name)(ngx_uint_t i);
    ngx_uint_t                    first;
    ngx_uint_t                    last;         /* one past */
} ngx_omniroute_metrics_labels_t;


typedef struct ngx_omniroute_metrics_family_s  ngx_omniroute_metrics_family_t;

typedef void (*ngx_omniroute_metrics_emit_pt)(ngx_omniroute_metrics_buf_t *mb,
    ngx_omniroute_metrics_scrape_t *sc, ngx_omniroute_metrics_family_t *f);

struct ngx_omniroute_metrics_family_s {
    const char                       *name;
    const char                       *type;
    const char                       *help;
    ngx_omniroute_metrics_emit_pt     emit;     /* its series */
    ngx_uint_t                        source;   /* NGX_OMNIROUTE_MS_* */
    size_t                            offset;   /* of its values there */
    ngx_omniroute_metrics_labels_t   *labels;   /* ..._metrics_series() */
};


static ngx_int_t ngx_omniroute_metrics_scrape(
    ngx_omniroute_metrics_scrape_t *sc, ngx_omniroute_api_call_t *call,
    ngx_omniroute_store_t *st, ngx_omniroute_sh_t *sh, ngx_pool_t *pool);
static ngx_int_t ngx_omniroute_metrics_read_breakers(
    ngx_omniroute_metrics_scrape_t *sc, ngx_pool_t *pool);
static ngx_int_t ngx_omniroute_metrics_read_lockouts(
    ngx_omniroute_metrics_scrape_t *sc, ngx_pool_t *pool);
static ngx_atomic_uint_t ngx_omniroute_metrics_value(
    ngx_omniroute_metrics_scrape_t *sc, ngx_omniroute_metrics_family_t *f,
    ngx_uint_t i);
static void ngx_omniroute_metrics_scalar(ngx_omniroute_metrics_buf_t *mb,
    ngx_omniroute_metrics_scrape_t *sc, ngx_omniroute_metrics_family_t *f);
static void ngx_omniroute_metrics_series(ngx_omniroute_metrics_buf_t *mb,
    ngx_omniroute_metrics_scrape_t *sc, ngx_omniroute_metrics_family_t *f);
static void ngx_omniroute_metrics_requests(ngx_omniroute_metrics_buf_t *mb,
    ngx_omniroute_metrics_scrape_t *sc, ngx_omniroute_metrics_family_t *f);
static void ngx_omniroute_metrics_restatements(
    ngx_omniroute_metrics_buf_t *mb, ngx_omniroute_metrics_scrape_t *sc,
    ngx_omniroute_metrics_family_t *f);
static void ngx_omniroute_metrics_breaker_state(
    ngx_omniroute_metrics_buf_t *mb, ngx_omniroute_metrics_scrape_t *sc,
    ngx_omniroute_metrics_family_t *f);
static void ngx_omniroute_metrics_breaker_failures(
    ngx_omniroute_metrics_buf_t *mb, ngx_omniroute_metrics_scrape_t *sc,
    ngx_omniroute_metrics_family_t *f);
static void ngx_omniroute_metrics_breaker_retry(
    ngx_omniroute_metrics_buf_t *mb, ngx_omniroute_metrics_scrape_t *sc,
    ngx_omniroute_metrics_family_t *f);
static void ngx_omniroute_metrics_connections(
    ngx_omniroute_metrics_buf_t *mb, ngx_omniroute_metrics_scrape_t *sc,
    ngx_omniroute_metrics_family_t *f);
static void ngx_omniroute_metrics_lockouts(ngx_omniroute_metrics_buf_t *mb,
    ngx_omniroute_metrics_scrape_t *sc, ngx_omniroute_metrics_family_t *f);
static void ngx_omniroute_metrics_redis_state(
    ngx_omniroute_metrics_buf_t *mb, ngx_omniroute_metrics_scrape_t *sc,
    ngx_omniroute_metrics_family_t *f);
static void ngx_omniroute_metrics_redis_lag(ngx_omniroute_metrics_buf_t *mb,
    ngx_omniroute_metrics_scrape_t *sc, ngx_omniroute_metrics_family_t *f);
static void ngx_omniroute_metrics_key_requests(
    ngx_omniroute_metrics_buf_t *mb, ngx_omniroute_metrics_scrape_t *sc,
    ngx_omniroute_metrics_family_t *f);
static void ngx_omniroute_metrics_leases(ngx_omniroute_metrics_buf_t *mb,
    ngx_omniroute_metrics_scrape_t *sc, ngx_omniroute_metrics_family_t *f);
static void ngx_omniroute_metrics_budget(ngx_omniroute_metrics_buf_t *mb,
    ngx_omniroute_metrics_scrape_t *sc, ngx_omniroute_metrics_family_t *f);
static void ngx_omniroute_metrics_model_requests(
    ngx_omniroute_metrics_buf_t *mb, ngx_omniroute_metrics_scrape_t *sc,
    ngx_omniroute_metrics_family_t *f);
static void ngx_omniroute_metrics_pair_reasons(
    ngx_omniroute_metrics_buf_t *mb, ngx_omniroute_metrics_scrape_t *sc,
    ngx_omniroute_metrics_family_t *f);
static void ngx_omniroute_metrics_tokens(ngx_omniroute_metrics_buf_t *mb,
    ngx_omniroute_metrics_scrape_t *sc, ngx_omniroute_metrics_family_t *f);
static void ngx_omniroute_metrics_cost(ngx_omniroute_metrics_buf_t *mb,
    ngx_omniroute_metrics_scrape_t *sc, ngx_omniroute_metrics_family_t *f);
static void ngx_omniroute_metrics_transitions(
    ngx_omniroute_metrics_buf_t *mb, ngx_omniroute_metrics_scrape_t *sc,
    ngx_omniroute_metrics_family_t *f);
static void ngx_omniroute_metrics_model_hist(ngx_omniroute_metrics_buf_t *mb,
    ngx_omniroute_metrics_scrape_t *sc, ngx_omniroute_metrics_family_t *f);
static void ngx_omniroute_metrics_conn_hist(ngx_omniroute_metrics_buf_t *mb,
    ngx_omniroute_metrics_scrape_t *sc, ngx_omniroute_metrics_family_t *f);
static const char *ngx_omniroute_metrics_reason_name(ngx_uint_t i);
static const char *ngx_omniroute_metrics_table_name(ngx_uint_t i);
static const char *ngx_omniroute_metrics_lane_end_name(ngx_uint_t i);
static const char *ngx_omniroute_metrics_reset_name(ngx_uint_t i);
static const char *ngx_omniroute_metrics_pace_name(ngx_uint_t i);
static const char *ngx_omniroute_metrics_auth_name(ngx_uint_t i);
static void ngx_omniroute_metrics_printf(ngx_omniroute_metrics_buf_t *mb,
    const char *fmt, ...);
static void ngx_omniroute_metrics_head(ngx_omniroute_metrics_buf_t *mb,
    const char *name, const char *type, const char *help);
static u_char *ngx_omniroute_metrics_escape(ngx_pool_t *pool, u_char *s,
    size_t len);
static void ngx_omniroute_metrics_lockout(ngx_str_t *key, void *value,
    size_t size, void *arg);
static void ngx_omniroute_metrics_hist(ngx_omniroute_metrics_buf_t *mb,
    const char *name, u_char *labels, ngx_omniroute_hist_t *h);
static u_char *ngx_omniroute_metrics_conn_labels(
    ngx_omniroute_metrics_buf_t *mb, ngx_omniroute_main_conf_t *omcf,
    ngx_uint_t ci);


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


/* by or_conn_status_e */
static const char  *ngx_omniroute_conn_state_names[] = {
    "active",
    "cooldown",
    "terminal"
};


static const char  *ngx_omniroute_auth_names[NGX_OMNIROUTE_AUTH_REASONS] = {
    "missing_key",
    "invalid_key"
};


static ngx_omniroute_metrics_labels_t  ngx_omniroute_metrics_reasons = {
    "reason", ngx_omniroute_metrics_reason_name, 0, OR_REASON_COUNT
};

/* reason none is no fallover */
static ngx_omniroute_metrics_labels_t  ngx_omniroute_metrics_fallovers = {
    "reason", ngx_omniroute_metrics_reason_name, 1, OR_REASON_COUNT
};

static ngx_omniroute_metrics_labels_t  ngx_omniroute_metrics_tables = {
    "table", ngx_omniroute_metrics_table_name, 0, NGX_OMNIROUTE_T_COUNT
};

static ngx_omniroute_metrics_labels_t  ngx_omniroute_metrics_lane_ends = {
    "state", ngx_omniroute_metrics_lane_end_name, 1, OR_LANE_END_COUNT
};

static ngx_omniroute_metrics_labels_t  ngx_omniroute_metrics_resets = {
    "result", ngx_omniroute_metrics_reset_name, 1, OR_RESET_COUNT
};

static ngx_omniroute_metrics_labels_t  ngx_omniroute_metrics_pacing = {
    "event", ngx_omniroute_metrics_pace_name, NGX_OMNIROUTE_PACE_PAUSE,
    NGX_OMNIROUTE_PACE_TIMEOUT + 1
};

static ngx_omniroute_metrics_labels_t  ngx_omniroute_metrics_tool_limit = {
    "event", ngx_omniroute_metrics_pace_name, NGX_OMNIROUTE_PACE_TOOL_BACKOFF,
    NGX_OMNIROUTE_PACE_TOOL_SKIP + 1
};

static ngx_omniroute_metrics_labels_t  ngx_omniroute_metrics_auth = {
    "reason", ngx_omniroute_metrics_auth_name, 0, NGX_OMNIROUTE_AUTH_REASONS
};


/* a family's offset: in the state zone, the scrape, the link's counters */
#define ngx_omniroute_metrics_stat(field)                                     \
    offsetof(ngx_omniroute_sh_t, stats.field)
#define ngx_omniroute_metrics_scraped(field)                                  \
    offsetof(ngx_omniroute_metrics_scrape_t, field)
#define ngx_omniroute_metrics_redis(field)                                    \
    offsetof(ngx_omniroute_redis_stats_t, field)


static ngx_omniroute_metrics_family_t  ngx_omniroute_metrics_families[] = {

    /* counters */

    { "omniroute_requests_total", "counter",
      "Client requests of omniroute_pass locations, by outcome.",
      ngx_omniroute_metrics_requests, NGX_OMNIROUTE_MS_SCRAPE, 0, NULL },

    { "omniroute_attempts_total", "counter",
      "Upstream attempts, by the classified result (reason none: a "
      "success).",
      ngx_omniroute_metrics_series, NGX_OMNIROUTE_MS_STATE,
      ngx_omniroute_metrics_stat(attempts), &ngx_omniroute_metrics_reasons },

    { "omniroute_fallbacks_total", "counter",
      "In-request fallovers to the next candidate, by the reason of the "
      "failed attempt.",
      ngx_omniroute_metrics_series, NGX_OMNIROUTE_MS_STATE,
      ngx_omniroute_metrics_stat(fallbacks),
      &ngx_omniroute_metrics_fallovers },

    { "omniroute_restatements_total", "counter",
      "Upstream error statuses restated, by rule.",
      ngx_omniroute_metrics_restatements, NGX_OMNIROUTE_MS_STATE, 0, NULL },

    /* provider breakers: each read once, normalized at scrape time */

    { "omniroute_breaker_state", "gauge",
      "Circuit breaker state of a provider: 1 for the current state, 0 for "
      "the others.",
      ngx_omniroute_metrics_breaker_state, NGX_OMNIROUTE_MS_SCRAPE, 0, NULL },

    { "omniroute_breaker_failures", "gauge",
      "Provider-level failures the breaker currently counts.",
      ngx_omniroute_metrics_breaker_failures, NGX_OMNIROUTE_MS_SCRAPE, 0,
      NULL },

    { "omniroute_breaker_retry_after_seconds", "gauge",
      "Seconds until the provider may be tried again (0: it may now).",
      ngx_omniroute_metrics_breaker_retry, NGX_OMNIROUTE_MS_SCRAPE, 0, NULL },

    /* connections and lockouts */

    { "omniroute_connections", "gauge",
      "Connections by state: active, cooldown (transient) or terminal "
      "(banned, expired, credits_exhausted).",
      ngx_omniroute_metrics_connections, NGX_OMNIROUTE_MS_SCRAPE, 0, NULL },

    { "omniroute_lockouts_active", "gauge",
      "Active model lockouts (including request_rejected ones), by "
      "provider.",
      ngx_omniroute_metrics_lockouts, NGX_OMNIROUTE_MS_SCRAPE, 0, NULL },

    /* the zone */

    { "omniroute_zone_size_bytes", "gauge",
      "Size of the omniroute shared memory zone.",
      ngx_omniroute_metrics_scalar, NGX_OMNIROUTE_MS_SCRAPE,
      ngx_omniroute_metrics_scraped(total), NULL },

    { "omniroute_zone_used_bytes", "gauge",
      "Bytes of the zone in used pages.",
      ngx_omniroute_metrics_scalar, NGX_OMNIROUTE_MS_SCRAPE,
      ngx_omniroute_metrics_scraped(used), NULL },

    { "omniroute_zone_records", "gauge",
      "State records in the zone, by table.",
      ngx_omniroute_metrics_series, NGX_OMNIROUTE_MS_SCRAPE,
      ngx_omniroute_metrics_scraped(records), &ngx_omniroute_metrics_tables },

    { "omniroute_queue_depth", "gauge",
      "Requests waiting for a concurrency slot (max_concurrent).",
      ngx_omniroute_metrics_scalar, NGX_OMNIROUTE_MS_STATE,
      offsetof(ngx_omniroute_sh_t, queued), NULL },

    { "omniroute_zone_evictions_total", "counter",
      "Records evicted to make room (least recently used first).",
      ngx_omniroute_metrics_scalar, NGX_OMNIROUTE_MS_SCRAPE,
      ngx_omniroute_metrics_scraped(evictions), NULL },

    { "omniroute_zone_alloc_failures_total", "counter",
      "State changes lost because the zone had no room even after "
      "eviction.",
      ngx_omniroute_metrics_scalar, NGX_OMNIROUTE_MS_SCRAPE,
      ngx_omniroute_metrics_scraped(failures), NULL },

    { "omniroute_zone_events_lost_total", "counter",
      "State changes overwritten in the event ring before the Redis mirror "
      "read them.",
      ngx_omniroute_metrics_scalar, NGX_OMNIROUTE_MS_STATE,
      ngx_omniroute_metrics_stat(events_lost), NULL },

    /* R-LANE-9: the usage-limit lane */

    { "omniroute_lane_entries_total", "counter",
      "Usage-limit walls answered by entering the low-priority lane "
      "(usage_lane=on).",
      ngx_omniroute_metrics_scalar, NGX_OMNIROUTE_MS_STATE,
      ngx_omniroute_metrics_stat(lane_entries), NULL },

    { "omniroute_lane_waits_total", "counter",
      "slot_busy 429s and 529s of the lane waited out.",
      ngx_omniroute_metrics_scalar, NGX_OMNIROUTE_MS_STATE,
      ngx_omniroute_metrics_stat(lane_waits), NULL },

    { "omniroute_lane_ends_total", "counter",
      "Low-priority lanes ended, by end state.",
      ngx_omniroute_metrics_series, NGX_OMNIROUTE_MS_STATE,
      ngx_omniroute_metrics_stat(lane_ends),
      &ngx_omniroute_metrics_lane_ends },

    { "omniroute_limit_resets_total", "counter",
      "Session-limit reset attempts (limit_reset=on), by result.",
      ngx_omniroute_metrics_series, NGX_OMNIROUTE_MS_STATE,
      ngx_omniroute_metrics_stat(limit_resets),
      &ngx_omniroute_metrics_resets },

    /* R-PACE, R-TOOL, R-EMERG (docs/metrics.md) */

    { "omniroute_pacing_total", "counter",
      "Pacing of body-stated 429 waits: connections paused, long typed "
      "waits locked, requests that waited a pause or were answered at "
      "once.",
      ngx_omniroute_metrics_series, NGX_OMNIROUTE_MS_STATE,
      ngx_omniroute_metrics_stat(pace), &ngx_omniroute_metrics_pacing },

    { "omniroute_tool_limit_total", "counter",
      "Tool-limit backoff: provider/models that refused a request's tools, "
      "and targets skipped for it.",
      ngx_omniroute_metrics_series, NGX_OMNIROUTE_MS_STATE,
      ngx_omniroute_metrics_stat(pace), &ngx_omniroute_metrics_tool_limit },

    { "omniroute_emergency_fallback_total", "counter",
      "Requests planned onto the emergency target after every other "
      "candidate failed or was excluded.",
      ngx_omniroute_metrics_scalar, NGX_OMNIROUTE_MS_STATE,
      ngx_omniroute_metrics_stat(pace[NGX_OMNIROUTE_PACE_EMERGENCY]), NULL },

    /* the Redis mirror's link (R-CLUSTER-2/3), when omniroute_redis is set */

    { "omniroute_redis_link_state", "gauge",
      "State of this node's link to Redis: 1 for the current state.",
      ngx_omniroute_metrics_redis_state, NGX_OMNIROUTE_MS_SCRAPE, 0, NULL },

    { "omniroute_redis_connects_total", "counter",
      "Links to Redis established.",
      ngx_omniroute_metrics_scalar, NGX_OMNIROUTE_MS_REDIS,
      ngx_omniroute_metrics_redis(connects), NULL },

    { "omniroute_redis_link_failures_total", "counter",
      "Links to Redis that failed or were lost.",
      ngx_omniroute_metrics_scalar, NGX_OMNIROUTE_MS_REDIS,
      ngx_omniroute_metrics_redis(failures), NULL },

    { "omniroute_redis_syncs_total", "counter",
      "Full state loads from Redis completed.",
      ngx_omniroute_metrics_scalar, NGX_OMNIROUTE_MS_REDIS,
      ngx_omniroute_metrics_redis(syncs), NULL },

    { "omniroute_redis_loaded_total", "counter",
      "Records read by full loads.",
      ngx_omniroute_metrics_scalar, NGX_OMNIROUTE_MS_REDIS,
      ngx_omniroute_metrics_redis(loaded), NULL },

    { "omniroute_redis_published_total", "counter",
      "Local state changes written to Redis.",
      ngx_omniroute_metrics_scalar, NGX_OMNIROUTE_MS_REDIS,
      ngx_omniroute_metrics_redis(published), NULL },

    { "omniroute_redis_received_total", "counter",
      "Remote state changes received.",
      ngx_omniroute_metrics_scalar, NGX_OMNIROUTE_MS_REDIS,
      ngx_omniroute_metrics_redis(received), NULL },

    { "omniroute_redis_applied_total", "counter",
      "Remote state changes that changed the local state.",
      ngx_omniroute_metrics_scalar, NGX_OMNIROUTE_MS_REDIS,
      ngx_omniroute_metrics_redis(applied), NULL },

    { "omniroute_redis_write_backs_total", "counter",
      "Local states that knew more than a remote one, sent back.",
      ngx_omniroute_metrics_scalar, NGX_OMNIROUTE_MS_REDIS,
      ngx_omniroute_metrics_redis(write_backs), NULL },

    { "omniroute_redis_overflows_total", "counter",
      "Local changes lost from the event ring before being sent.",
      ngx_omniroute_metrics_scalar, NGX_OMNIROUTE_MS_REDIS,
      ngx_omniroute_metrics_redis(overflows), NULL },

    { "omniroute_redis_errors_total", "counter",
      "Error replies and undecodable data from Redis.",
      ngx_omniroute_metrics_scalar, NGX_OMNIROUTE_MS_REDIS,
      ngx_omniroute_metrics_redis(errors), NULL },

    { "omniroute_redis_records_rejected_total", "counter",
      "Remote records dropped as invalid (bad ranges or sizes).",
      ngx_omniroute_metrics_scalar, NGX_OMNIROUTE_MS_REDIS,
      ngx_omniroute_metrics_redis(rejected), NULL },

    { "omniroute_redis_refills_total", "counter",
      "Times Redis had lost the state (flush, restart) and was refilled.",
      ngx_omniroute_metrics_scalar, NGX_OMNIROUTE_MS_REDIS,
      ngx_omniroute_metrics_redis(refills), NULL },

    { "omniroute_redis_pending_commands", "gauge",
      "Commands sent to Redis awaiting a reply.",
      ngx_omniroute_metrics_scalar, NGX_OMNIROUTE_MS_REDIS,
      ngx_omniroute_metrics_redis(pending), NULL },

    { "omniroute_redis_lag_seconds", "gauge",
      "Age of the last remote change when it was applied.",
      ngx_omniroute_metrics_redis_lag, NGX_OMNIROUTE_MS_REDIS, 0, NULL },

    /* client keys and leases (conf/ngx_omniroute_keys.h), when keys exist */

    { "omniroute_client_key_requests_total", "counter",
      "Requests authenticated by a client key, by key id and status class.",
      ngx_omniroute_metrics_key_requests, NGX_OMNIROUTE_MS_KEYS, 0, NULL },

    { "omniroute_client_auth_failures_total", "counter",
      "Requests refused for a missing or an invalid client key.",
      ngx_omniroute_metrics_series, NGX_OMNIROUTE_MS_KEYS,
      offsetof(ngx_omniroute_keys_sh_t, auth), &ngx_omniroute_metrics_auth },

    { "omniroute_client_key_brake_rejections_total", "counter",
      "Key checks not made: 429 of the brake on failed checks.",
      ngx_omniroute_metrics_scalar, NGX_OMNIROUTE_MS_KEYS,
      offsetof(ngx_omniroute_keys_sh_t, braked), NULL },

    /* budgets and rate limits (store/ngx_omniroute_budget_store.h) */

    { "omniroute_client_key_budget_admitted_total", "counter",
      "Requests admitted by a client key limit rule (model \"\": the "
      "key's own rule).",
      ngx_omniroute_metrics_budget, NGX_OMNIROUTE_MS_KEYS, 0, NULL },

    { "omniroute_client_key_budget_refusals_total", "counter",
      "Requests refused 429 by a client key limit rule, by limit.",
      ngx_omniroute_metrics_budget, NGX_OMNIROUTE_MS_KEYS, 1, NULL },

    { "omniroute_client_key_budget_tokens_total", "counter",
      "Tokens settled on a client key limit rule (real usage, or the "
      "estimate when the answer reported none), by type.",
      ngx_omniroute_metrics_budget, NGX_OMNIROUTE_MS_KEYS, 2, NULL },

    { "omniroute_client_key_budget_in_flight", "gauge",
      "Admitted requests of a client key limit rule not yet settled.",
      ngx_omniroute_metrics_budget, NGX_OMNIROUTE_MS_KEYS, 3, NULL },

    { "omniroute_client_key_budget_remaining", "gauge",
      "What a configured limit leaves in its current window (limit - used "
      "- reserved; concurrent: slots).",
      ngx_omniroute_metrics_budget, NGX_OMNIROUTE_MS_KEYS, 4, NULL },

    { "omniroute_leases_active", "gauge",
      "Active exclusive session leases.",
      ngx_omniroute_metrics_leases, NGX_OMNIROUTE_MS_LEASES, 0, NULL },

    { "omniroute_lease_capacity_rejections_total", "counter",
      "Answers 429 lease-capacity-unavailable.",
      ngx_omniroute_metrics_scalar, NGX_OMNIROUTE_MS_LEASES,
      offsetof(ngx_omniroute_keys_sh_t, lease_capacity), NULL },

    /*
     * the labelled series of the metrics zone: per model, per connection
     * and per (model, connection) pair, every label a configured name;
     * series per pair appear once they are non-zero, the others are
     * always there
     */

    { "omniroute_model_requests_total", "counter",
      "Client requests by the configured model they named and how they "
      "ended.",
      ngx_omniroute_metrics_model_requests, NGX_OMNIROUTE_MS_LABELLED, 0,
      NULL },

    { "omniroute_connection_attempts_total", "counter",
      "Upstream attempts by provider, connection, model and classified "
      "result (reason none: a success).",
      ngx_omniroute_metrics_pair_reasons, NGX_OMNIROUTE_MS_LABELLED,
      offsetof(ngx_omniroute_mpair_t, attempts), NULL },

    { "omniroute_connection_fallbacks_total", "counter",
      "In-request fallovers by provider, connection and model of the "
      "failed attempt and its reason.",
      ngx_omniroute_metrics_pair_reasons, NGX_OMNIROUTE_MS_LABELLED,
      offsetof(ngx_omniroute_mpair_t, fallbacks), NULL },

    { "omniroute_tokens_total", "counter",
      "Tokens of answers (streamed too) as the provider reported them, by "
      "type (prompt, completion, cached, reasoning).",
      ngx_omniroute_metrics_tokens, NGX_OMNIROUTE_MS_LABELLED, 0, NULL },

    { "omniroute_cost_total", "counter",
      "Prompt and completion tokens priced at the connection's cost= per "
      "million tokens.",
      ngx_omniroute_metrics_cost, NGX_OMNIROUTE_MS_LABELLED, 0, NULL },

    { "omniroute_breaker_transitions_total", "counter",
      "Circuit breaker state changes, by provider and the state entered.",
      ngx_omniroute_metrics_transitions, NGX_OMNIROUTE_MS_LABELLED, 0,
      NULL },

    /* histograms */

    { "omniroute_request_duration_seconds", "histogram",
      "Client request duration, by model, to the last byte sent.",
      ngx_omniroute_metrics_model_hist, NGX_OMNIROUTE_MS_LABELLED, 0, NULL },

    { "omniroute_attempt_duration_seconds", "histogram",
      "Upstream attempt duration, by connection, to the end of its "
      "response.",
      ngx_omniroute_metrics_conn_hist, NGX_OMNIROUTE_MS_LABELLED,
      offsetof(ngx_omniroute_mconn_t, attempt), NULL },

    { "omniroute_attempt_first_byte_seconds", "histogram",
      "Time from the start of an attempt to its response header, by "
      "connection.",
      ngx_omniroute_metrics_conn_hist, NGX_OMNIROUTE_MS_LABELLED,
      offsetof(ngx_omniroute_mconn_t, first_byte), NULL },

    { "omniroute_stream_first_content_seconds", "histogram",
      "Time from the start of an attempt to the first meaningful event of "
      "a probed 200 stream, by connection.",
      ngx_omniroute_metrics_conn_hist, NGX_OMNIROUTE_MS_LABELLED,
      offsetof(ngx_omniroute_mconn_t, first_content), NULL },

    { NULL, NULL, NULL, NULL, 0, 0, NULL }
};


ngx_int_t
ngx_omniroute_api_metrics(ngx_omniroute_api_call_t *call)
{
    ngx_uint_t                       i;
    ngx_omniroute_sh_t              *sh;
    ngx_omniroute_store_t           *st;
    ngx_omniroute_store_usage_t      zu;
    ngx_omniroute_metrics_buf_t      mb;
    ngx_omniroute_metrics_family_t  *f;
    ngx_omniroute_metrics_scrape_t   sc;

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

    /* the zone */

    ngx_omniroute_store_usage(st, &zu);

    if (ngx_omniroute_metrics_scrape(&sc, call, st, sh, mb.pool) != NGX_OK) {
        return NGX_ERROR;
    }

    sc.total = zu.size;
    sc.used = zu.used;
    sc.evictions = zu.evictions;
    sc.failures = zu.alloc_failures;

    for (i = 0; i < NGX_OMNIROUTE_T_COUNT; i++) {
        sc.records[i] = zu.records[i];
    }

    for (f = ngx_omniroute_metrics_families; f->name; f++) {
        if (sc.base[f->source] == NULL
            && f->source != NGX_OMNIROUTE_MS_STATE)
        {
            continue;
        }

        ngx_omniroute_metrics_head(&mb, f->name, f->type, f->help);
        f->emit(&mb, &sc, f);
    }

    if (mb.error) {
        return NGX_ERROR;
    }

    return ngx_omniroute_api_text(call, mb.start, mb.pos - mb.start,
                                  "text/plain; version=0.0.4; "
                                  "charset=utf-8");
}


/* what the families read: where each source is, breakers, lockouts */

static ngx_int_t
ngx_omniroute_metrics_scrape(ngx_omniroute_metrics_scrape_t *sc,
    ngx_omniroute_api_call_t *call, ngx_omniroute_store_t *st,
    ngx_omniroute_sh_t *sh, ngx_pool_t *pool)
{
    ngx_array_t                 leases;
    ngx_omniroute_mzone_t      *mz;
    ngx_omniroute_keys_conf_t  *kc;

    ngx_memzero(sc, sizeof(ngx_omniroute_metrics_scrape_t));

    sc->call = call;
    sc->st = st;

    sc->base[NGX_OMNIROUTE_MS_STATE] = (u_char *) sh;
    sc->base[NGX_OMNIROUTE_MS_SCRAPE] = (u_char *) sc;
    sc->base[NGX_OMNIROUTE_MS_REDIS] = (u_char *) ngx_omniroute_redis_stats();

    kc = call->omcf->keys;

    if (kc && kc->sh && kc->keys.nelts) {
        sc->base[NGX_OMNIROUTE_MS_KEYS] = (u_char *) kc->sh;

        if (kc->lease_keys) {
            if (ngx_omniroute_lease_list(&call->omcf->store, pool, &leases)
                != NGX_OK)
            {
                return NGX_ERROR;
            }

            sc->leases = leases.nelts;
            sc->base[NGX_OMNIROUTE_MS_LEASES] = (u_char *) kc->sh;
        }
    }

    mz = call->omcf->mzone;

    if (mz && mz->sh) {
        sc->base[NGX_OMNIROUTE_MS_LABELLED] = (u_char *) mz->sh;
    }

    if (ngx_omniroute_metrics_read_breakers(sc, pool) != NGX_OK) {
        return NGX_ERROR;
    }

    return ngx_omniroute_metrics_read_lockouts(sc, pool);
}


/* provider breakers: each read once, normalized at scrape time */

static ngx_int_t
ngx_omniroute_metrics_read_breakers(ngx_omniroute_metrics_scrape_t *sc,
    ngx_pool_t *pool)
{
    ngx_uint_t                        i;
    or_breaker_t                      cb;
    ngx_omniroute_settings_t          s;
    ngx_omniroute_provider_t         *p;
    ngx_omniroute_api_call_t         *call;
    ngx_omniroute_metrics_breaker_t  *bv;

    call = sc->call;
    p = call->omcf->providers.elts;

    bv = ngx_palloc(pool, (call->omcf->providers.nelts + 1)
                          * sizeof(ngx_omniroute_metrics_breaker_t));
    if (bv == NULL) {
        return NGX_ERROR;
    }

    for (i = 0; i < call->omcf->providers.nelts; i++) {
        ngx_omniroute_settings_effective(call->omcf, &p[i], &s);

        if (ngx_omniroute_store_read(sc->st, NGX_OMNIROUTE_T_BREAKER,
                                     &p[i].name, &cb, sizeof(or_breaker_t))
            != NGX_OK)
        {
            ngx_memzero(&cb, sizeof(or_breaker_t));
        }

        bv[i].retry = or_breaker_retry_after(&s.breaker, &cb, call->now);
        or_breaker_normalize(&s.breaker, &cb, call->now);
        bv[i].state = cb.state;
        bv[i].failures = cb.failures;
    }

    sc->breakers = bv;

    return NGX_OK;
}


/* the active lockouts and request_rejected ones, per provider */

static ngx_int_t
ngx_omniroute_metrics_read_lockouts(ngx_omniroute_metrics_scrape_t *sc,
    ngx_pool_t *pool)
{
    ngx_omniroute_metrics_visit_t  mv;

    mv.omcf = sc->call->omcf;
    mv.now = sc->call->now;
    mv.lockouts = ngx_pcalloc(pool, (mv.omcf->providers.nelts + 1)
                                    * sizeof(ngx_uint_t));
    if (mv.lockouts == NULL) {
        return NGX_ERROR;
    }

    (void) ngx_omniroute_store_visit(sc->st, NGX_OMNIROUTE_T_LOCKOUT,
                                     ngx_omniroute_metrics_lockout, &mv,
                                     pool);
    (void) ngx_omniroute_store_visit(sc->st, NGX_OMNIROUTE_T_REJECTED,
                                     ngx_omniroute_metrics_lockout, &mv,
                                     pool);

    sc->lockouts = mv.lockouts;

    return NGX_OK;
}


/* the value i of a family from its source; 0 without a state zone */

static ngx_atomic_uint_t
ngx_omniroute_metrics_value(ngx_omniroute_metrics_scrape_t *sc,
    ngx_omniroute_metrics_family_t *f, ngx_uint_t i)
{
    u_char  *base;

    base = sc->base[f->source];

    if (base == NULL) {
        return 0;
    }

    return ((ngx_atomic_t *) (base + f->offset))[i];
}


/* name value */

static void
ngx_omniroute_metrics_scalar(ngx_omniroute_metrics_buf_t *mb,
    ngx_omniroute_metrics_scrape_t *sc, ngx_omniroute_metrics_family_t *f)
{
    ngx_omniroute_metrics_printf(mb, "%s %uA\n", f->name,
                                 ngx_omniroute_metrics_value(sc, f, 0));
}


/* name{label="..."} value, for the values of the family's enum */

static void
ngx_omniroute_metrics_series(ngx_omniroute_metrics_buf_t *mb,
    ngx_omniroute_metrics_scrape_t *sc, ngx_omniroute_metrics_family_t *f)
{
    ngx_uint_t                       i;
    ngx_omniroute_metrics_labels_t  *l;

    l = f->labels;

    for (i = l->first; i < l->last; i++) {
        ngx_omniroute_metrics_printf(mb, "%s{%s=\"%s\"} %uA\n", f->name,
                                     l->label, l->name(i),
                                     ngx_omniroute_metrics_value(sc, f, i));
    }
}


static void
ngx_omniroute_metrics_requests(ngx_omniroute_metrics_buf_t *mb,
    ngx_omniroute_metrics_scrape_t *sc, ngx_omniroute_metrics_family_t *f)
{
    ngx_uint_t  i;

    for (i = 0; i < NGX_OMNIROUTE_OUTCOMES; i++) {
        ngx_omniroute_metrics_printf(mb, "%s{outcome=\"%s\"} %uA\n", f->name,
                                     ngx_omniroute_outcome_names[i],
                                     ngx_omniroute_api_requests(sc->call, i));
    }
}


static void
ngx_omniroute_metrics_restatements(ngx_omniroute_metrics_buf_t *mb,
    ngx_omniroute_metrics_scrape_t *sc, ngx_omniroute_metrics_family_t *f)
{
    u_char                 *name;
    ngx_uint_t              i;
    ngx_omniroute_sh_t     *sh;
    ngx_omniroute_stats_t  *stats;

    sh = (ngx_omniroute_sh_t *) sc->base[NGX_OMNIROUTE_MS_STATE];

    if (sh == NULL) {
        return;
    }

    stats = &sh->stats;

    for (i = 0; i < NGX_OMNIROUTE_RULE_SLOTS; i++) {
        if (stats->restatements[i].name[0] == '\0') {
            continue;
        }

        name = ngx_omniroute_metrics_escape(mb->pool,
                              stats->restatements[i].name,
                              ngx_strnlen(stats->restatements[i].name,
                                          NGX_OMNIROUTE_RULE_NAME_MAX));
        if (name == NULL) {
            mb->error = 1;
            return;
        }

        ngx_omniroute_metrics_printf(mb, "%s{rule=\"%s\"} %uA\n", f->name,
                                     name, stats->restatements[i].count);
    }
}


static void
ngx_omniroute_metrics_breaker_state(ngx_omniroute_metrics_buf_t *mb,
    ngx_omniroute_metrics_scrape_t *sc, ngx_omniroute_metrics_family_t *f)
{
    ngx_uint_t                 i, j;
    ngx_array_t               *providers;
    ngx_omniroute_provider_t  *p;

    providers = &sc->call->omcf->providers;
    p = providers->elts;

    for (i = 0; i < providers->nelts; i++) {
        for (j = OR_CB_CLOSED; j <= OR_CB_HALF_OPEN; j++) {
            ngx_omniroute_metrics_printf(mb,
                          "%s{provider=\"%V\",state=\"%s\"} %ui\n", f->name,
                          &p[i].name, or_breaker_state_name((or_cb_state_e) j),
                          (ngx_uint_t) (j == sc->breakers[i].state));
        }
    }
}


static void
ngx_omniroute_metrics_breaker_failures(ngx_omniroute_metrics_buf_t *mb,
    ngx_omniroute_metrics_scrape_t *sc, ngx_omniroute_metrics_family_t *f)
{
    ngx_uint_t                 i;
    ngx_array_t               *providers;
    ngx_omniroute_provider_t  *p;

    providers = &sc->call->omcf->providers;
    p = providers->elts;

    for (i = 0; i < providers->nelts; i++) {
        ngx_omniroute_metrics_printf(mb, "%s{provider=\"%V\"} %uD\n",
                                     f->name, &p[i].name,
                                     sc->breakers[i].failures);
    }
}


static void
ngx_omniroute_metrics_breaker_retry(ngx_omniroute_metrics_buf_t *mb,
    ngx_omniroute_metrics_scrape_t *sc, ngx_omniroute_metrics_family_t *f)
{
    or_msec_t                  retry;
    ngx_uint_t                 i;
    ngx_array_t               *providers;
    ngx_omniroute_provider_t  *p;

    providers = &sc->call->omcf->providers;
    p = providers->elts;

    for (i = 0; i < providers->nelts; i++) {
        retry = sc->breakers[i].retry;

        ngx_omniroute_metrics_printf(mb, "%s{provider=\"%V\"} %L.%03L\n",
                                     f->name, &p[i].name,
                                     (int64_t) (retry / 1000),
                                     (int64_t) (retry % 1000));
    }
}


static void
ngx_omniroute_metrics_connections(ngx_omniroute_metrics_buf_t *mb,
    ngx_omniroute_metrics_scrape_t *sc, ngx_omniroute_metrics_family_t *f)
{
    ngx_uint_t                   i, j, n[3];
    or_conn_state_t              cs;
    or_cooldown_view_t           view;
    ngx_omniroute_api_call_t    *call;
    ngx_omniroute_provider_t    *p;
    ngx_omniroute_connection_t  *c;

    call = sc->call;
    p = call->omcf->providers.elts;
    c = call->omcf->connections.elts;

    for (i = 0; i < call->omcf->providers.nelts; i++) {
        n[0] = n[1] = n[2] = 0;

        for (j = 0; j < call->omcf->connections.nelts; j++) {
            if (c[j].provider_name.len != p[i].name.len
                || ngx_strncmp(c[j].provider_name.data, p[i].name.data,
                               p[i].name.len) != 0)
            {
                continue;
            }

            if (ngx_omniroute_store_read(sc->st, NGX_OMNIROUTE_T_CONN,
                                         &c[j].id, &cs,
                                         sizeof(or_conn_state_t))
                != NGX_OK)
            {
                ngx_memzero(&cs, sizeof(or_conn_state_t));
            }

            or_cooldown_view(&cs, call->now, &view);
            n[view.status]++;
        }

        for (j = OR_CONN_ACTIVE; j <= OR_CONN_TERMINAL; j++) {
            ngx_omniroute_metrics_printf(mb,
                                  "%s{provider=\"%V\",state=\"%s\"} %ui\n",
                                  f->name, &p[i].name,
                                  ngx_omniroute_conn_state_names[j], n[j]);
        }
    }
}


static void
ngx_omniroute_metrics_lockouts(ngx_omniroute_metrics_buf_t *mb,
    ngx_omniroute_metrics_scrape_t *sc, ngx_omniroute_metrics_family_t *f)
{
    ngx_uint_t                 i;
    ngx_array_t               *providers;
    ngx_omniroute_provider_t  *p;

    providers = &sc->call->omcf->providers;
    p = providers->elts;

    for (i = 0; i < providers->nelts; i++) {
        ngx_omniroute_metrics_printf(mb, "%s{provider=\"%V\"} %ui\n",
                                     f->name, &p[i].name, sc->lockouts[i]);
    }
}


static void
ngx_omniroute_metrics_redis_state(ngx_omniroute_metrics_buf_t *mb,
    ngx_omniroute_metrics_scrape_t *sc, ngx_omniroute_metrics_family_t *f)
{
    ngx_uint_t                    i, state;
    ngx_omniroute_redis_stats_t  *st;

    st = (ngx_omniroute_redis_stats_t *) sc->base[NGX_OMNIROUTE_MS_REDIS];
    state = st ? st->state : NGX_OMNIROUTE_REDIS_DISABLED;

    for (i = 0; i < NGX_OMNIROUTE_REDIS_STATE_COUNT; i++) {
        ngx_omniroute_metrics_printf(mb, "%s{state=\"%s\"} %ui\n", f->name,
                                     ngx_omniroute_redis_state_name(i),
                                     (ngx_uint_t) (i == state));
    }
}


static void
ngx_omniroute_metrics_redis_lag(ngx_omniroute_metrics_buf_t *mb,
    ngx_omniroute_metrics_scrape_t *sc, ngx_omniroute_metrics_family_t *f)
{
    ngx_atomic_uint_t             lag;
    ngx_omniroute_redis_stats_t  *st;

    st = (ngx_omniroute_redis_stats_t *) sc->base[NGX_OMNIROUTE_MS_REDIS];
    lag = st->lag_ms;

    ngx_omniroute_metrics_printf(mb, "%s %uA.%03uA\n", f->name,
                                 lag / 1000, lag % 1000);
}


static void
ngx_omniroute_metrics_key_requests(ngx_omniroute_metrics_buf_t *mb,
    ngx_omniroute_metrics_scrape_t *sc, ngx_omniroute_metrics_family_t *f)
{
    ngx_uint_t                   i, j;
    ngx_omniroute_keys_sh_t     *sh;
    ngx_omniroute_keys_conf_t   *kc;
    ngx_omniroute_client_key_t  *key;

    kc = sc->call->omcf->keys;
    sh = (ngx_omniroute_keys_sh_t *) sc->base[NGX_OMNIROUTE_MS_KEYS];
    key = kc->keys.elts;

    for (i = 0; i < kc->keys.nelts; i++) {
        if (key[i].slot >= NGX_OMNIROUTE_KEYS_MAX) {
            continue;
        }

        for (j = 0; j < NGX_OMNIROUTE_KEYS_CLASSES; j++) {
            ngx_omniroute_metrics_printf(mb,
                          "%s{key=\"%V\",status=\"%uixx\"} %uA\n", f->name,
                          &key[i].id, j + 1,
                          sh->keys[key[i].slot].requests[j]);
        }
    }
}


/*
 * The budget families (f->offset: which one), per rule of
 * omniroute_client_key_limit; each slot read under the zone's lock.
 */

static void
ngx_omniroute_metrics_budget(ngx_omniroute_metrics_buf_t *mb,
    ngx_omniroute_metrics_scrape_t *sc, ngx_omniroute_metrics_family_t *f)
{
    int                           k;
    ngx_uint_t                    i;
    or_budget_conf_t              conf;
    or_budget_view_t              v[OR_BUDGET_LIMITS];
    ngx_omniroute_budget_conf_t  *bc;
    ngx_omniroute_budget_rule_t  *rule;
    ngx_omniroute_budget_slot_t   slot;

    bc = ngx_omniroute_budget_conf(sc->call->omcf);

    if (bc == NULL || bc->sh == NULL) {
        return;
    }

    rule = bc->rules.elts;

    for (i = 0; i < bc->rules.nelts; i++) {

        ngx_omniroute_budget_lock(bc);

        slot = *ngx_omniroute_budget_slot(bc, &rule[i]);
        ngx_omniroute_budget_limits(&rule[i], &slot, &conf);

        for (k = 0; k < OR_BUDGET_LIMITS; k++) {
            or_budget_view(&slot.state, &conf, k, sc->call->now, &v[k]);
        }

        ngx_omniroute_budget_unlock(bc);

        switch (f->offset) {

        case 0:
            ngx_omniroute_metrics_printf(mb,
                          "%s{key=\"%V\",model=\"%*s\"} %uL\n", f->name,
                          &rule[i].key_id, rule[i].model.len,
                          rule[i].model.data, slot.admitted);
            break;

        case 1:
            for (k = 0; k < OR_BUDGET_LIMITS; k++) {
                ngx_omniroute_metrics_printf(mb,
                          "%s{key=\"%V\",model=\"%*s\",limit=\"%s\"} %uL\n",
                          f->name, &rule[i].key_id, rule[i].model.len,
                          rule[i].model.data, or_budget_name(k),
                          slot.refused[k]);
            }

            break;

        case 2:
            ngx_omniroute_metrics_printf(mb,
                          "%s{key=\"%V\",model=\"%*s\",type=\"input\"} %uL\n"
                          "%s{key=\"%V\",model=\"%*s\",type=\"output\"} %uL\n",
                          f->name, &rule[i].key_id, rule[i].model.len,
                          rule[i].model.data, slot.tokens[0],
                          f->name, &rule[i].key_id, rule[i].model.len,
                          rule[i].model.data, slot.tokens[1]);
            break;

        case 3:
            ngx_omniroute_metrics_printf(mb,
                          "%s{key=\"%V\",model=\"%*s\"} %uL\n", f->name,
                          &rule[i].key_id, rule[i].model.len,
                          rule[i].model.data, slot.state.inflight);
            break;

        default:
            for (k = 0; k < OR_BUDGET_LIMITS; k++) {
                if (v[k].limit == 0) {
                    continue;
                }

                ngx_omniroute_metrics_printf(mb,
                          "%s{key=\"%V\",model=\"%*s\",limit=\"%s\"} %uL\n",
                          f->name, &rule[i].key_id, rule[i].model.len,
                          rule[i].model.data, or_budget_name(k),
                          v[k].remaining);
            }
        }
    }
}


static void
ngx_omniroute_metrics_leases(ngx_omniroute_metrics_buf_t *mb,
    ngx_omniroute_metrics_scrape_t *sc, ngx_omniroute_metrics_family_t *f)
{
    ngx_omniroute_metrics_printf(mb, "%s %ui\n", f->name, sc->leases);
}


static void
ngx_omniroute_metrics_model_requests(ngx_omniroute_metrics_buf_t *mb,
    ngx_omniroute_metrics_scrape_t *sc, ngx_omniroute_metrics_family_t *f)
{
    ngx_uint_t              i, j;
    ngx_omniroute_msh_t    *sh;
    ngx_omniroute_mzone_t  *mz;

    mz = sc->call->omcf->mzone;
    sh = (ngx_omniroute_msh_t *) sc->base[NGX_OMNIROUTE_MS_LABELLED];

    for (i = 0; i < mz->nmodels; i++) {
        for (j = 0; j < NGX_OMNIROUTE_OUTCOMES; j++) {
            ngx_omniroute_metrics_printf(mb,
                           "%s{model=\"%V\",outcome=\"%s\"} %uA\n", f->name,
                           &mz->model_names[i],
                           ngx_omniroute_outcome_names[j],
                           sh->models[i].requests[j]);
        }
    }
}


/* per (model, connection) pair and reason: attempts or fallbacks */

static void
ngx_omniroute_metrics_pair_reasons(ngx_omniroute_metrics_buf_t *mb,
    ngx_omniroute_metrics_scrape_t *sc, ngx_omniroute_metrics_family_t *f)
{
    uint64_t                     v;
    ngx_uint_t                   k, j, ci;
    ngx_str_t                   *model;
    ngx_atomic_t                *reasons;
    ngx_omniroute_msh_t         *sh;
    ngx_omniroute_mzone_t       *mz;
    ngx_omniroute_provider_t    *p;
    ngx_omniroute_connection_t  *c;

    mz = sc->call->omcf->mzone;
    sh = (ngx_omniroute_msh_t *) sc->base[NGX_OMNIROUTE_MS_LABELLED];
    p = sc->call->omcf->providers.elts;
    c = sc->call->omcf->connections.elts;

    for (k = 0; k < mz->npairs; k++) {
        reasons = (ngx_atomic_t *) ((u_char *) &sh->pairs[k] + f->offset);
        ci = mz->pair_conn[k];
        model = &mz->model_names[mz->pair_model[k]];

        for (j = 0; j < OR_REASON_COUNT; j++) {
            v = reasons[j];

            if (v == 0) {
                continue;
            }

            ngx_omniroute_metrics_printf(mb,
                    "%s{provider=\"%V\",connection=\"%V\",model=\"%V\","
                    "reason=\"%s\"} %uL\n", f->name,
                    &p[c[ci].provider].name, &c[ci].id, model,
                    or_reason_name((or_reason_e) j), v);
        }
    }
}


static void
ngx_omniroute_metrics_tokens(ngx_omniroute_metrics_buf_t *mb,
    ngx_omniroute_metrics_scrape_t *sc, ngx_omniroute_metrics_family_t *f)
{
    ngx_uint_t                   k, j, ci;
    ngx_str_t                   *model;
    ngx_omniroute_msh_t         *sh;
    ngx_omniroute_mpair_t       *pair;
    ngx_omniroute_mzone_t       *mz;
    ngx_omniroute_provider_t    *p;
    ngx_omniroute_connection_t  *c;

    mz = sc->call->omcf->mzone;
    sh = (ngx_omniroute_msh_t *) sc->base[NGX_OMNIROUTE_MS_LABELLED];
    p = sc->call->omcf->providers.elts;
    c = sc->call->omcf->connections.elts;

    for (k = 0; k < mz->npairs; k++) {
        pair = &sh->pairs[k];
        ci = mz->pair_conn[k];
        model = &mz->model_names[mz->pair_model[k]];

        for (j = 0; j < OR_USAGE_KINDS; j++) {
            if (pair->tokens[j] == 0) {
                continue;
            }

            ngx_omniroute_metrics_printf(mb,
                    "%s{provider=\"%V\",connection=\"%V\",model=\"%V\","
                    "type=\"%s\"} %uA\n", f->name,
                    &p[c[ci].provider].name, &c[ci].id, model,
                    or_usage_kind_name((or_usage_kind_e) j),
                    pair->tokens[j]);
        }
    }
}


static void
ngx_omniroute_metrics_cost(ngx_omniroute_metrics_buf_t *mb,
    ngx_omniroute_metrics_scrape_t *sc, ngx_omniroute_metrics_family_t *f)
{
    uint64_t                     v;
    ngx_uint_t                   k, ci;
    ngx_str_t                   *model;
    ngx_omniroute_msh_t         *sh;
    ngx_omniroute_mzone_t       *mz;
    ngx_omniroute_provider_t    *p;
    ngx_omniroute_connection_t  *c;

    mz = sc->call->omcf->mzone;
    sh = (ngx_omniroute_msh_t *) sc->base[NGX_OMNIROUTE_MS_LABELLED];
    p = sc->call->omcf->providers.elts;
    c = sc->call->omcf->connections.elts;

    for (k = 0; k < mz->npairs; k++) {
        v = sh->pairs[k].cost;

        if (v == 0) {
            continue;
        }

        ci = mz->pair_conn[k];
        model = &mz->model_names[mz->pair_model[k]];

        /* tokens x cost x 10^4 per million tokens: 10^10 a unit */

        ngx_omniroute_metrics_printf(mb,
                    "%s{provider=\"%V\",connection=\"%V\",model=\"%V\"} "
                    "%uL.%010uL\n", f->name,
                    &p[c[ci].provider].name, &c[ci].id, model,
                    v / 10000000000ULL, v % 10000000000ULL);
    }
}


static void
ngx_omniroute_metrics_transitions(ngx_omniroute_metrics_buf_t *mb,
    ngx_omniroute_metrics_scrape_t *sc, ngx_omniroute_metrics_family_t *f)
{
    ngx_uint_t                 i, j;
    ngx_omniroute_msh_t       *sh;
    ngx_omniroute_mzone_t     *mz;
    ngx_omniroute_provider_t  *p;

    mz = sc->call->omcf->mzone;
    sh = (ngx_omniroute_msh_t *) sc->base[NGX_OMNIROUTE_MS_LABELLED];
    p = sc->call->omcf->providers.elts;

    for (i = 0; i < mz->nproviders; i++) {
        for (j = OR_CB_CLOSED; j <= OR_CB_HALF_OPEN; j++) {
            ngx_omniroute_metrics_printf(mb,
                          "%s{provider=\"%V\",state=\"%s\"} %uA\n", f->name,
                          &p[i].name, or_breaker_state_name((or_cb_state_e) j),
                          sh->providers[i].transitions[j]);
        }
    }
}


static void
ngx_omniroute_metrics_model_hist(ngx_omniroute_metrics_buf_t *mb,
    ngx_omniroute_metrics_scrape_t *sc, ngx_omniroute_metrics_family_t *f)
{
    u_char                 *labels;
    ngx_uint_t              i;
    ngx_omniroute_msh_t    *sh;
    ngx_omniroute_mzone_t  *mz;

    mz = sc->call->omcf->mzone;
    sh = (ngx_omniroute_msh_t *) sc->base[NGX_OMNIROUTE_MS_LABELLED];

    for (i = 0; i < mz->nmodels; i++) {
        labels = ngx_pnalloc(mb->pool, mz->model_names[i].len + 16);
        if (labels == NULL) {
            mb->error = 1;
            return;
        }

        ngx_sprintf(labels, "model=\"%V\"%Z", &mz->model_names[i]);

        ngx_omniroute_metrics_hist(mb, f->name, labels,
                                   &sh->models[i].duration);
    }
}


/* a histogram per connection, at the family's offset in its record */

static void
ngx_omniroute_metrics_conn_hist(ngx_omniroute_metrics_buf_t *mb,
    ngx_omniroute_metrics_scrape_t *sc, ngx_omniroute_metrics_family_t *f)
{
    u_char                 *labels;
    ngx_uint_t              i;
    ngx_omniroute_msh_t    *sh;
    ngx_omniroute_mzone_t  *mz;

    mz = sc->call->omcf->mzone;
    sh = (ngx_omniroute_msh_t *) sc->base[NGX_OMNIROUTE_MS_LABELLED];

    for (i = 0; i < mz->nconns; i++) {
        labels = ngx_omniroute_metrics_conn_labels(mb, sc->call->omcf, i);
        ngx_omniroute_metrics_hist(mb, f->name, labels,
                                   (ngx_omniroute_hist_t *)
                                   ((u_char *) &sh->conns[i] + f->offset));
    }
}


static const char *
ngx_omniroute_metrics_reason_name(ngx_uint_t i)
{
    return or_reason_name((or_reason_e) i);
}


static const char *
ngx_omniroute_metrics_table_name(ngx_uint_t i)
{
    return ngx_omniroute_table_names[i];
}


static const char *
ngx_omniroute_metrics_lane_end_name(ngx_uint_t i)
{
    return or_lane_end_name((unsigned) i);
}


static const char *
ngx_omniroute_metrics_reset_name(ngx_uint_t i)
{
    return or_reset_result_name((unsigned) i);
}


static const char *
ngx_omniroute_metrics_pace_name(ngx_uint_t i)
{
    return ngx_omniroute_pace_names[i];
}


static const char *
ngx_omniroute_metrics_auth_name(ngx_uint_t i)
{
    return ngx_omniroute_auth_names[i];
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
