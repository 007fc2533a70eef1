
/*
 * Copyright (C) ngx_omniroute authors
 *
 * Resilience settings and their precedence (see ngx_omniroute_settings.h).
 *
 * Environment defaults (R-ENV, SPEC §13) are read by the master process
 * when the configuration is loaded; see docs/api.md for the names.  An
 * unparsable value is ignored and an out-of-range one clamped, with a
 * warning in the error log.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute.h"


#define NGX_OMNIROUTE_DAY_MS       ((int64_t) 86400 * 1000)
#define NGX_OMNIROUTE_30D_MS       (30 * NGX_OMNIROUTE_DAY_MS)

#define NGX_OMNIROUTE_ENV_NAME_MAX  96

#define ngx_omniroute_sfield(group, f)                                        \
    offsetof(ngx_omniroute_settings_t, group.f)

#define ngx_omniroute_gfield(f)                                               \
    offsetof(ngx_omniroute_global_settings_t, f)


typedef struct {
    ngx_uint_t                    set;
    int64_t                       value;
} ngx_omniroute_env_value_t;


static void ngx_omniroute_settings_read_env(void);
static ngx_int_t ngx_omniroute_env_parse(const char *name,
    ngx_omniroute_setting_desc_t *d, int64_t *out);
static ngx_uint_t ngx_omniroute_settings_unset(void *base,
    ngx_omniroute_setting_desc_t *d);
static void ngx_omniroute_settings_clear(void *base,
    ngx_omniroute_setting_desc_t *d);
static int64_t ngx_omniroute_settings_value(ngx_omniroute_settings_t *s,
    ngx_omniroute_settings_t *filled, ngx_uint_t i);
static const char *ngx_omniroute_settings_parse_codes(
    ngx_omniroute_setting_desc_t *d, void *base, ngx_str_t *text, u_char *buf,
    size_t len);
static size_t ngx_omniroute_settings_key(u_char *buf, const char *prefix,
    ngx_str_t *name);


/*
 * The provider settings (R-CB, R-CD, R-ML, R-ENV).  A row's index is its
 * bit in conf_set, env_set and the override records: append only.
 *
 * group, name: the admin API; conf: the omniroute_provider parameter;
 * env: the environment variable ("*": OAUTH, API_KEY or LOCAL after the
 * provider's kind) and its unit in ms; offset, type, range; at_most: the
 * member of the same group this one may not exceed, and why.
 */

ngx_omniroute_setting_desc_t  ngx_omniroute_provider_settings[] = {

    /* 0 .. 9: provider circuit breaker (R-CB) */
    { "breaker", "degrade_threshold", "breaker_degrade",
      "OMNIROUTE_CIRCUIT_BREAKER_*_DEGRADATION_THRESHOLD", 1,
      ngx_omniroute_sfield(breaker, degrade_threshold),
      NGX_OMNIROUTE_SF_INT, 1, 100000,
      "open_threshold",
      "the degrade threshold must not exceed the open threshold" },
    { "breaker", "open_threshold", "breaker_failures",
      "OMNIROUTE_CIRCUIT_BREAKER_*_THRESHOLD", 1,
      ngx_omniroute_sfield(breaker, open_threshold),
      NGX_OMNIROUTE_SF_INT, 1, 100000, NULL, NULL },
    { "breaker", "reset_timeout_ms", "breaker_reset",
      "OMNIROUTE_CIRCUIT_BREAKER_*_RESET_MS", 1,
      ngx_omniroute_sfield(breaker, reset_ms),
      NGX_OMNIROUTE_SF_MSEC, 1, NGX_OMNIROUTE_30D_MS, NULL, NULL },
    { "breaker", "max_backoff_multiplier", "breaker_max_multiplier",
      "OMNIROUTE_CIRCUIT_BREAKER_MAX_BACKOFF_MULTIPLIER", 1,
      ngx_omniroute_sfield(breaker, max_backoff_multiplier),
      NGX_OMNIROUTE_SF_INT, 1, OR_BREAKER_MAX_MULT, NULL, NULL },
    { "breaker", "recovery_successes", NULL, NULL, 1,
      ngx_omniroute_sfield(breaker, recovery_successes),
      NGX_OMNIROUTE_SF_INT, 1, 100000, NULL, NULL },
    { "breaker", "probe_timeout_ms", NULL, NULL, 1,
      ngx_omniroute_sfield(breaker, probe_timeout_ms),
      NGX_OMNIROUTE_SF_MSEC, 1, NGX_OMNIROUTE_30D_MS, NULL, NULL },
    { "breaker", "provider_cooldown_enabled", "breaker_window_gate",
      "PROVIDER_COOLDOWN_ENABLED", 1,
      ngx_omniroute_sfield(breaker, gate_enabled),
      NGX_OMNIROUTE_SF_BOOL, 0, 1, NULL, NULL },
    { "breaker", "provider_cooldown_failures", NULL,
      "OMNIROUTE_PROVIDER_BREAKER_*_FAILURE_THRESHOLD", 1,
      ngx_omniroute_sfield(breaker, gate_threshold),
      NGX_OMNIROUTE_SF_INT, 1, OR_BREAKER_RING, NULL, NULL },
    { "breaker", "provider_cooldown_window_ms", NULL,
      "OMNIROUTE_PROVIDER_BREAKER_*_FAILURE_WINDOW_MS", 1,
      ngx_omniroute_sfield(breaker, gate_window_ms),
      NGX_OMNIROUTE_SF_MSEC, 1, NGX_OMNIROUTE_30D_MS, NULL, NULL },
    { "breaker", "provider_cooldown_ms", NULL,
      "OMNIROUTE_PROVIDER_BREAKER_*_COOLDOWN_MS", 1,
      ngx_omniroute_sfield(breaker, gate_cooldown_ms),
      NGX_OMNIROUTE_SF_MSEC, 1, NGX_OMNIROUTE_30D_MS, NULL, NULL },

    /* 10 .. 20: connection cooldown (R-CD) */
    { "cooldown", "base_cooldown_ms", "cooldown_base", NULL, 1,
      ngx_omniroute_sfield(cooldown, base_ms),
      NGX_OMNIROUTE_SF_MSEC, 1, NGX_OMNIROUTE_30D_MS,
      "max_cooldown_ms", "cooldown max must be at least the base" },
    { "cooldown", "max_cooldown_ms", "cooldown_max", NULL, 1,
      ngx_omniroute_sfield(cooldown, max_ms),
      NGX_OMNIROUTE_SF_MSEC, 1, NGX_OMNIROUTE_30D_MS, NULL, NULL },
    { "cooldown", "max_backoff_steps", NULL, NULL, 1,
      ngx_omniroute_sfield(cooldown, max_backoff_steps),
      NGX_OMNIROUTE_SF_INT, 0, OR_COOLDOWN_MAX_STEPS, NULL, NULL },
    { "cooldown", "retry_delay_ms", "retry_delay", NULL, 1,
      ngx_omniroute_sfield(cooldown, provider_delay_ms),
      NGX_OMNIROUTE_SF_MSEC_OPT, OR_COOLDOWN_RETRY_MIN_MS,
      OR_COOLDOWN_RETRY_MAX_MS, NULL, NULL },
    { "cooldown", "rate_limit_reset_ms", NULL,
      "OMNIROUTE_ROTATION_RATE_LIMIT_RESET_SECONDS", 1000,
      ngx_omniroute_sfield(cooldown, env_default_ms),
      NGX_OMNIROUTE_SF_MSEC_OPT, 1, NGX_OMNIROUTE_30D_MS, NULL, NULL },
    { "cooldown", "concurrency_cooldown_ms", NULL, NULL, 1,
      ngx_omniroute_sfield(cooldown, concurrency_ms),
      NGX_OMNIROUTE_SF_MSEC, 1, NGX_OMNIROUTE_30D_MS, NULL, NULL },
    { "cooldown", "max_retry_hint_ms", NULL, NULL, 1,
      ngx_omniroute_sfield(cooldown, hint_max_ms),
      NGX_OMNIROUTE_SF_MSEC, 1, NGX_OMNIROUTE_30D_MS, NULL, NULL },
    { "cooldown", "expired_retries", NULL, NULL, 1,
      ngx_omniroute_sfield(cooldown, expired_retry_max),
      NGX_OMNIROUTE_SF_INT, 0, 1000, NULL, NULL },
    { "cooldown", "rejected_base_cooldown_ms", NULL, NULL, 1,
      ngx_omniroute_sfield(cooldown, rejected_base_ms),
      NGX_OMNIROUTE_SF_MSEC, 1, NGX_OMNIROUTE_30D_MS,
      "rejected_max_cooldown_ms",
      "request-rejected cooldown max must be at least its base" },
    { "cooldown", "rejected_max_cooldown_ms", NULL, NULL, 1,
      ngx_omniroute_sfield(cooldown, rejected_max_ms),
      NGX_OMNIROUTE_SF_MSEC, 1, NGX_OMNIROUTE_30D_MS, NULL, NULL },
    { "cooldown", "stream_stall_cooldown", NULL, NULL, 1,
      ngx_omniroute_sfield(cooldown, stream_stall_cooldown),
      NGX_OMNIROUTE_SF_BOOL, 0, 1, NULL, NULL },

    /* 21 .. 27: model lockout (R-ML); see also omniroute_model_lockout */
    { "model_lockout", "enabled", "lockout", NULL, 1,
      ngx_omniroute_sfield(lockout, enabled),
      NGX_OMNIROUTE_SF_BOOL, 0, 1, NULL, NULL },
    { "model_lockout", "error_codes", NULL, NULL, 1,
      ngx_omniroute_sfield(lockout, n_codes),
      NGX_OMNIROUTE_SF_CODES, 100, 599, NULL, NULL },
    { "model_lockout", "base_cooldown_ms", NULL, NULL, 1,
      ngx_omniroute_sfield(lockout, base_ms),
      NGX_OMNIROUTE_SF_MSEC, 1, OR_LOCKOUT_MAX_MS,
      "max_cooldown_ms",
      "lockout max_cooldown must be at least base_cooldown" },
    { "model_lockout", "max_cooldown_ms", NULL, NULL, 1,
      ngx_omniroute_sfield(lockout, max_ms),
      NGX_OMNIROUTE_SF_MSEC, 1, OR_LOCKOUT_MAX_MS, NULL, NULL },
    { "model_lockout", "max_backoff_steps", NULL, NULL, 1,
      ngx_omniroute_sfield(lockout, max_backoff_steps),
      NGX_OMNIROUTE_SF_INT, 0, OR_LOCKOUT_MAX_STEPS, NULL, NULL },
    { "model_lockout", "exponential", NULL, NULL, 1,
      ngx_omniroute_sfield(lockout, exponential),
      NGX_OMNIROUTE_SF_BOOL, 0, 1, NULL, NULL },
    { "model_lockout", "escalation_window_ms", NULL, NULL, 1,
      ngx_omniroute_sfield(lockout, window_ms),
      NGX_OMNIROUTE_SF_MSEC, 0, OR_LOCKOUT_MAX_MS, NULL, NULL },

    /* 28 .. 34: the watch over streams (R-STREAM-2, R-STREAM-3) */
    { "stream", "throughput_watchdog", "stream_watchdog", NULL, 1,
      ngx_omniroute_sfield(stream, watchdog),
      NGX_OMNIROUTE_SF_BOOL, 0, 1, NULL, NULL },
    { "stream", "stall_timeout_ms", "stream_stall", NULL, 1,
      ngx_omniroute_sfield(stream, stall_ms),
      NGX_OMNIROUTE_SF_MSEC, 0, OR_WATCH_MAX_MS, NULL, NULL },
    { "stream", "watchdog_warmup_ms", "stream_warmup", NULL, 1,
      ngx_omniroute_sfield(stream, warmup_ms),
      NGX_OMNIROUTE_SF_MSEC, 0, OR_WATCH_MAX_MS, NULL, NULL },
    { "stream", "watchdog_window_ms", "stream_window", NULL, 1,
      ngx_omniroute_sfield(stream, window_ms),
      NGX_OMNIROUTE_SF_MSEC, 1000, OR_WATCH_MAX_MS, NULL, NULL },
    { "stream", "watchdog_min_rate", "stream_min_rate", NULL, 1,
      ngx_omniroute_sfield(stream, min_rate),
      NGX_OMNIROUTE_SF_INT, 0, 1000000, NULL, NULL },
    { "stream", "watchdog_min_bytes", "stream_min_bytes", NULL, 1,
      ngx_omniroute_sfield(stream, min_bytes),
      NGX_OMNIROUTE_SF_INT, 0, 100000000, NULL, NULL },
    { "stream", "first_content_timeout_ms", "stream_first_content", NULL, 1,
      ngx_omniroute_sfield(stream, first_content_ms),
      NGX_OMNIROUTE_SF_MSEC_OPT, 1, OR_WATCH_MAX_MS, NULL, NULL },

    /* 35: ask Chat Completions streams for their usage (metrics) */
    { "stream", "include_usage", "stream_usage",
      "OMNIROUTE_STREAM_INCLUDE_USAGE", 1,
      ngx_omniroute_sfield(stream, include_usage),
      NGX_OMNIROUTE_SF_BOOL, 0, 1, NULL, NULL },

    /* 36: a silent provider falls over (issue 25) */
    { "request", "first_byte_timeout_ms", "first_byte", NULL, 1,
      ngx_omniroute_sfield(stream, first_byte_ms),
      NGX_OMNIROUTE_SF_MSEC_OPT, 1, OR_WATCH_MAX_MS, NULL, NULL },

    { NULL, NULL, NULL, NULL, 0, 0, 0, 0, 0, NULL, NULL }
};


/* settings that are not per provider (R-ENV): no nginx.conf parameter */

ngx_omniroute_setting_desc_t  ngx_omniroute_global_settings[] = {

    { "stream", "throughput_watchdog", NULL,
      "STREAM_THROUGHPUT_WATCHDOG_ENABLED", 1,
      ngx_omniroute_gfield(stream_throughput_watchdog),
      NGX_OMNIROUTE_SF_BOOL, 0, 1, NULL, NULL },
    { "request_queue", "max_wait_ms", NULL,
      "RATE_LIMIT_MAX_WAIT_MS", 1,
      ngx_omniroute_gfield(queue_max_wait_ms),
      NGX_OMNIROUTE_SF_MSEC, 1, NGX_OMNIROUTE_DAY_MS, NULL, NULL },
    { "request_queue", "execution_max_wait_ms", NULL,
      "RATE_LIMIT_EXECUTION_MAX_WAIT_MS", 1,
      ngx_omniroute_gfield(execution_max_wait_ms),
      NGX_OMNIROUTE_SF_MSEC, 1, NGX_OMNIROUTE_DAY_MS, NULL, NULL },
    { "request_queue", "max_queue_depth", NULL,
      "RATE_LIMIT_MAX_QUEUE_DEPTH", 1,
      ngx_omniroute_gfield(max_queue_depth),
      NGX_OMNIROUTE_SF_INT, 0, 100000, NULL, NULL },

    /* 4 .. 8: waiting instead of failing (R-CONC-1, R-CONC-3, R-REQ-4) */
    { "combo_wait", "enabled", NULL,
      "OMNIROUTE_COMBO_COOLDOWN_WAIT_ENABLED", 1,
      ngx_omniroute_gfield(combo_wait),
      NGX_OMNIROUTE_SF_BOOL, 0, 1, NULL, NULL },
    { "combo_wait", "max_wait_ms", NULL,
      "OMNIROUTE_COMBO_COOLDOWN_WAIT_MAX_WAIT_MS", 1,
      ngx_omniroute_gfield(combo_wait_max_ms),
      NGX_OMNIROUTE_SF_MSEC, 1, NGX_OMNIROUTE_DAY_MS, NULL, NULL },
    { "combo_wait", "budget_ms", NULL,
      "OMNIROUTE_COMBO_COOLDOWN_WAIT_BUDGET_MS", 1,
      ngx_omniroute_gfield(combo_wait_budget_ms),
      NGX_OMNIROUTE_SF_MSEC, 1, NGX_OMNIROUTE_DAY_MS, NULL, NULL },
    { "request", "budget_ms", NULL,
      "OMNIROUTE_REQUEST_BUDGET_MS", 1,
      ngx_omniroute_gfield(request_budget_ms),
      NGX_OMNIROUTE_SF_MSEC_OPT, 1, NGX_OMNIROUTE_DAY_MS, NULL, NULL },
    { "request_queue", "fail_open", NULL,
      "RATE_LIMIT_QUEUE_FAIL_OPEN", 1,
      ngx_omniroute_gfield(queue_fail_open),
      NGX_OMNIROUTE_SF_BOOL, 0, 1, NULL, NULL },

    /* 10 .. 12: pacing, tool-limit backoff, emergency fallback */
    { "request_queue", "auto_enable", NULL,
      "RATE_LIMIT_AUTO_ENABLE", 1,
      ngx_omniroute_gfield(pace_auto_enable),
      NGX_OMNIROUTE_SF_BOOL, 0, 1, NULL, NULL },
    { "emergency_fallback", "enabled", NULL,
      "OMNIROUTE_EMERGENCY_FALLBACK", 1,
      ngx_omniroute_gfield(emergency_fallback),
      NGX_OMNIROUTE_SF_BOOL, 0, 1, NULL, NULL },
    { "tool_limit", "backoff_ms", NULL,
      "OMNIROUTE_TOOL_LIMIT_BACKOFF_MS", 1,
      ngx_omniroute_gfield(tool_backoff_ms),
      NGX_OMNIROUTE_SF_MSEC, 1, NGX_OMNIROUTE_DAY_MS, NULL, NULL },

    { NULL, NULL, NULL, NULL, 0, 0, 0, 0, 0, NULL, NULL }
};


/* the "*" of an environment variable for each provider kind */
static const char  *ngx_omniroute_env_kinds[OR_KIND_COUNT] = {
    "OAUTH",
    "API_KEY",
    "LOCAL"
};


/* environment values of the provider rows, per kind, read once per load */
static ngx_omniroute_env_value_t
    ngx_omniroute_env_values[NGX_OMNIROUTE_SETTINGS_MAX][OR_KIND_COUNT];

static ngx_omniroute_global_settings_t  ngx_omniroute_global_base = {
    0, 0, 30 * 1000, 600 * 1000, 0, 0, 1, 0, 10 * 1000, 30 * 1000,
    OR_MSEC_NONE, 0, 1, 3600 * 1000
};

static void  *ngx_omniroute_env_cycle;


static const char  *ngx_omniroute_source_names[] = {
    "default",
    "env",
    "conf",
    "runtime"
};


void
ngx_omniroute_settings_env(or_kind_e kind, ngx_omniroute_settings_t *s)
{
    ngx_uint_t                     i;
    ngx_omniroute_env_value_t     *e;
    ngx_omniroute_setting_desc_t  *d;

    ngx_omniroute_settings_read_env();

    if ((unsigned) kind >= OR_KIND_COUNT) {
        kind = OR_KIND_APIKEY;
    }

    s->conf_set = 0;
    s->env_set = 0;

    for (i = 0; ngx_omniroute_provider_settings[i].name; i++) {
        d = &ngx_omniroute_provider_settings[i];
        e = &ngx_omniroute_env_values[i][kind];

        if (!ngx_omniroute_settings_unset(s, d)) {
            s->conf_set |= (uint64_t) 1 << i;
            continue;               /* nginx.conf wins */
        }

        if (e->set) {
            ngx_omniroute_settings_set(s, d, e->value);
            s->env_set |= (uint64_t) 1 << i;
        }
    }
}


const char *
ngx_omniroute_settings_fill(or_kind_e kind, ngx_omniroute_settings_t *s)
{
    const char  *err;

    or_breaker_conf_fill(&s->breaker, kind);
    or_cooldown_conf_fill(&s->cooldown, kind);
    or_lockout_conf_fill(&s->lockout);
    or_stream_conf_fill(&s->stream);

    err = or_breaker_conf_check(&s->breaker);
    if (err == NULL) {
        err = or_cooldown_conf_check(&s->cooldown);
    }

    if (err == NULL) {
        err = or_lockout_conf_check(&s->lockout);
    }

    if (err == NULL) {
        err = or_stream_conf_check(&s->stream);
    }

    return err;
}


void
ngx_omniroute_settings_effective(ngx_omniroute_main_conf_t *omcf,
    ngx_omniroute_provider_t *p, ngx_omniroute_settings_t *out)
{
    u_char                             buf[NGX_OMNIROUTE_KEY_MAX];
    ngx_str_t                          key;
    ngx_omniroute_settings_override_t  ov;

    *out = p->settings;

    if (omcf->shm_zone == NULL
        || ngx_omniroute_store_empty(&omcf->store, NGX_OMNIROUTE_T_SETTINGS))
    {
        return;
    }

    key.data = buf;
    key.len = ngx_omniroute_settings_key(buf, "provider:", &p->name);

    if (key.len == 0
        || ngx_omniroute_settings_read_override(omcf, &key, &ov) != NGX_OK)
    {
        return;
    }

    ngx_omniroute_settings_apply(p->kind, out, &ov);
}


ngx_int_t
ngx_omniroute_settings_class(ngx_omniroute_main_conf_t *omcf,
    ngx_omniroute_provider_t *p, ngx_pool_t *pool, or_class_conf_t *out)
{
    u_char                             buf[NGX_OMNIROUTE_KEY_MAX];
    char                              *s;
    ngx_str_t                          key;
    ngx_uint_t                         i;
    or_oprule_t                       *rules;
    ngx_omniroute_rule_rec_t          *rec;
    ngx_omniroute_rules_override_t    *ro;
    ngx_omniroute_settings_override_t  ov;

    *out = p->class_conf;

    key.data = buf;
    key.len = ngx_omniroute_settings_key(buf, "provider:", &p->name);

    if (key.len
        && ngx_omniroute_settings_read_override(omcf, &key, &ov) == NGX_OK)
    {
        if (ov.catchall == 1) {
            out->catchall.cooldown_ms = ov.catchall_cooldown_ms;
            out->catchall.reason = (or_reason_e) ov.catchall_reason;
            out->catchall.scope = (or_scope_e) ov.catchall_scope;

        } else if (ov.catchall == 2) {
            out->catchall.cooldown_ms = OR_MSEC_NONE;
            out->catchall.reason = OR_REASON_NONE;
            out->catchall.scope = OR_SCOPE_NONE;
        }
    }

    ro = ngx_palloc(pool, sizeof(ngx_omniroute_rules_override_t));
    if (ro == NULL) {
        return NGX_ERROR;
    }

    if (ngx_omniroute_settings_read_rules(omcf, &p->name, ro) != NGX_OK
        || !ro->set)
    {
        return NGX_OK;
    }

    rules = NULL;

    if (ro->n) {
        rules = ngx_pcalloc(pool, ro->n * sizeof(or_oprule_t));
        if (rules == NULL) {
            return NGX_ERROR;
        }
    }

    for (i = 0; i < ro->n && i < OR_OPRULES_MAX; i++) {
        rec = &ro->rule[i];

        s = ngx_pnalloc(pool, NGX_OMNIROUTE_RULE_ID_MAX + 1
                              + rec->match_len + 1);
        if (s == NULL) {
            return NGX_ERROR;
        }

        rules[i].id = s;
        s = (char *) ngx_cpystrn((u_char *) s, rec->id,
                                 NGX_OMNIROUTE_RULE_ID_MAX + 1);
        s++;

        rules[i].match = s;
        rules[i].match_len = ngx_min(rec->match_len,
                                     NGX_OMNIROUTE_RULE_MATCH_MAX);
        ngx_memcpy(s, rec->match, rules[i].match_len);
        s[rules[i].match_len] = '\0';

        rules[i].status = rec->status;
        rules[i].reason = (or_reason_e) rec->reason;
        rules[i].scope = (or_scope_e) rec->scope;
        rules[i].cooldown_ms = rec->cooldown_ms;
    }

    out->oprules = rules;
    out->noprules = ro->n;

    return NGX_OK;
}


void
ngx_omniroute_settings_global(ngx_omniroute_main_conf_t *omcf,
    ngx_omniroute_global_settings_t *out)
{
    ngx_str_t                          key;
    ngx_omniroute_settings_override_t  ov;

    *out = ngx_omniroute_global_base;

    if (omcf == NULL || omcf->shm_zone == NULL
        || ngx_omniroute_store_empty(&omcf->store, NGX_OMNIROUTE_T_SETTINGS))
    {
        return;
    }

    ngx_str_set(&key, "global");

    if (ngx_omniroute_settings_read_override(omcf, &key, &ov) == NGX_OK) {
        ngx_omniroute_settings_global_apply(out, &ov);
    }
}


/* the source of provider field i */

ngx_uint_t
ngx_omniroute_settings_source(ngx_omniroute_settings_t *s,
    ngx_omniroute_settings_override_t *ov, ngx_uint_t i)
{
    uint64_t  bit;

    bit = (uint64_t) 1 << i;

    if (ov && (ov->set & bit)) {
        return NGX_OMNIROUTE_SRC_RUNTIME;
    }

    if (s->conf_set & bit) {
        return NGX_OMNIROUTE_SRC_CONF;
    }

    if (s->env_set & bit) {
        return NGX_OMNIROUTE_SRC_ENV;
    }

    return NGX_OMNIROUTE_SRC_DEFAULT;
}


const char *
ngx_omniroute_source_name(ngx_uint_t source)
{
    if (source > NGX_OMNIROUTE_SRC_RUNTIME) {
        return "unknown";
    }

    return ngx_omniroute_source_names[source];
}


/*
 * Apply overrides to filled settings: fields that only hold a default are
 * unset again so that values derived from others (degrade threshold from
 * the open threshold, probe timeout from the reset timeout, escalation
 * window from the max cooldown) follow an overridden field; then the
 * overridden fields are set and the defaults filled in again.
 */

void
ngx_omniroute_settings_apply(or_kind_e kind, ngx_omniroute_settings_t *s,
    ngx_omniroute_settings_override_t *ov)
{
    if (ov->set == 0) {
        return;
    }

    ngx_omniroute_settings_layer(s, ov);

    (void) ngx_omniroute_settings_fill(kind, s);
}


void
ngx_omniroute_settings_layer(ngx_omniroute_settings_t *s,
    ngx_omniroute_settings_override_t *ov)
{
    uint64_t                       bit;
    ngx_uint_t                     i;
    ngx_omniroute_setting_desc_t  *d;

    for (i = 0; ngx_omniroute_provider_settings[i].name; i++) {
        d = &ngx_omniroute_provider_settings[i];
        bit = (uint64_t) 1 << i;

        if (ov->set & bit) {
            if (d->type == NGX_OMNIROUTE_SF_CODES) {
                s->lockout.n_codes = ngx_min(ov->n_codes,
                                             OR_LOCKOUT_CODES_MAX);
                ngx_memcpy(s->lockout.codes, ov->codes,
                           sizeof(s->lockout.codes));

            } else {
                ngx_omniroute_settings_set(s, d, ov->value[i]);
            }

        } else if (!(s->conf_set & bit) && !(s->env_set & bit)) {
            ngx_omniroute_settings_clear(s, d);
        }
    }
}


void
ngx_omniroute_settings_global_apply(ngx_omniroute_global_settings_t *g,
    ngx_omniroute_settings_override_t *ov)
{
    ngx_uint_t  i;

    for (i = 0; ngx_omniroute_global_settings[i].name; i++) {
        if (ov->set & ((uint64_t) 1 << i)) {
            ngx_omniroute_settings_set(g, &ngx_omniroute_global_settings[i],
                                       ov->value[i]);
        }
    }

    g->runtime_set = ov->set;
}


int64_t
ngx_omniroute_settings_get(void *base, ngx_omniroute_setting_desc_t *d)
{
    u_char  *p;

    p = (u_char *) base + d->offset;

    switch (d->type) {

    case NGX_OMNIROUTE_SF_MSEC:
    case NGX_OMNIROUTE_SF_MSEC_OPT:
        return *(or_msec_t *) p;

    default:
        return *(int32_t *) p;
    }
}


void
ngx_omniroute_settings_set(void *base, ngx_omniroute_setting_desc_t *d,
    int64_t v)
{
    u_char  *p;

    p = (u_char *) base + d->offset;

    switch (d->type) {

    case NGX_OMNIROUTE_SF_MSEC:
        *(or_msec_t *) p = v;
        break;

    case NGX_OMNIROUTE_SF_MSEC_OPT:
        *(or_msec_t *) p = (v == 0) ? OR_MSEC_NONE : v;
        break;

    case NGX_OMNIROUTE_SF_CODES:
        break;

    default:
        *(int32_t *) p = (int32_t) v;
        break;
    }
}


const char *
ngx_omniroute_settings_parse(ngx_omniroute_setting_desc_t *d, void *base,
    ngx_str_t *text, u_char *buf, size_t len)
{
    u_char          *p, *last;
    int64_t          v;
    ngx_int_t        n;
    ngx_uint_t       neg;
    ngx_msec_int_t   ms;

    last = buf + len - 1;

    switch (d->type) {

    case NGX_OMNIROUTE_SF_BOOL:
        if (text->len == 2 && ngx_strncmp(text->data, "on", 2) == 0) {
            v = 1;

        } else if (text->len == 3 && ngx_strncmp(text->data, "off", 3) == 0) {
            v = 0;

        } else {
            return "expected on or off";
        }

        break;

    case NGX_OMNIROUTE_SF_CODES:
        return ngx_omniroute_settings_parse_codes(d, base, text, buf, len);

    case NGX_OMNIROUTE_SF_MSEC:
    case NGX_OMNIROUTE_SF_MSEC_OPT:
        if (d->type == NGX_OMNIROUTE_SF_MSEC_OPT
            && text->len == 3 && ngx_strncmp(text->data, "off", 3) == 0)
        {
            /* none */
            ngx_omniroute_settings_set(base, d, 0);
            return NULL;
        }

        ms = ngx_parse_time(text, 0);

        if (ms == (ngx_msec_int_t) NGX_ERROR) {
            return "expected a time such as 500ms, 30s, 5m or 1h";
        }

        v = ms;
        break;

    default: /* NGX_OMNIROUTE_SF_INT */
        neg = (text->len > 1 && text->data[0] == '-');

        n = ngx_atoi(text->data + neg, text->len - neg);

        if (n == NGX_ERROR) {
            return "expected a number";
        }

        v = neg ? -n : n;
        break;
    }

    if (v < d->min || v > d->max) {
        p = ngx_slprintf(buf, last, "must be between ");
        p = ngx_omniroute_settings_print(p, last, d, d->min);
        p = ngx_slprintf(p, last, " and ");
        p = ngx_omniroute_settings_print(p, last, d, d->max);
        *p = '\0';

        return (const char *) buf;
    }

    ngx_omniroute_settings_set(base, d, v);

    return NULL;
}


/* "429,503": at most OR_LOCKOUT_CODES_MAX distinct statuses in range */

static const char *
ngx_omniroute_settings_parse_codes(ngx_omniroute_setting_desc_t *d,
    void *base, ngx_str_t *text, u_char *buf, size_t len)
{
    u_char             *p, *last, *comma;
    int32_t             codes[OR_LOCKOUT_CODES_MAX];
    ngx_int_t           st;
    ngx_uint_t          n, i;
    or_lockout_conf_t  *lc;

    n = 0;
    p = text->data;
    last = text->data + text->len;

    while (p < last) {
        comma = ngx_strlchr(p, last, ',');
        if (comma == NULL) {
            comma = last;
        }

        st = ngx_atoi(p, comma - p);

        if (st == NGX_ERROR || st < d->min || st > d->max) {
            *ngx_slprintf(buf, buf + len - 1, "expected HTTP statuses "
                          "(%L..%L) separated by commas", d->min, d->max)
                = '\0';
            return (const char *) buf;
        }

        if (n == OR_LOCKOUT_CODES_MAX) {
            *ngx_slprintf(buf, buf + len - 1, "at most %d statuses",
                          OR_LOCKOUT_CODES_MAX) = '\0';
            return (const char *) buf;
        }

        for (i = 0; i < n; i++) {
            if (codes[i] == st) {
                *ngx_slprintf(buf, buf + len - 1, "%i is listed twice", st)
                    = '\0';
                return (const char *) buf;
            }
        }

        codes[n++] = (int32_t) st;
        p = comma + 1;
    }

    if (n == 0) {
        return "expected HTTP statuses separated by commas";
    }

    lc = (or_lockout_conf_t *) ((u_char *) base + d->offset
                                - offsetof(or_lockout_conf_t, n_codes));

    ngx_memzero(lc->codes, sizeof(lc->codes));
    ngx_memcpy(lc->codes, codes, n * sizeof(int32_t));
    lc->n_codes = (int32_t) n;

    return NULL;
}


ngx_int_t
ngx_omniroute_settings_conf_find(ngx_str_t *name)
{
    ngx_uint_t                     i;
    ngx_omniroute_setting_desc_t  *d;

    for (i = 0; ngx_omniroute_provider_settings[i].name; i++) {
        d = &ngx_omniroute_provider_settings[i];

        if (d->conf
            && ngx_strlen(d->conf) == name->len
            && ngx_strncmp(d->conf, name->data, name->len) == 0)
        {
            return i;
        }
    }

    return -1;
}


ngx_int_t
ngx_omniroute_settings_find(ngx_omniroute_setting_desc_t *table,
    const char *group, const char *name)
{
    ngx_uint_t  i;

    for (i = 0; table[i].name; i++) {
        if (ngx_strcmp(table[i].group, group) == 0
            && ngx_strcmp(table[i].name, name) == 0)
        {
            return i;
        }
    }

    return -1;
}


/*
 * The cross-field rules (at_most) are judged on the values as given, not
 * as filled: the engine would lower a degrade threshold above the open
 * threshold without a word, so the rule must see it first.  A rule
 * counts when one of its two fields belongs to mask: a contradiction
 * between values of other sources was judged when they were set.
 */

ngx_int_t
ngx_omniroute_settings_check(or_kind_e kind, ngx_omniroute_settings_t *s,
    uint64_t mask, ngx_omniroute_settings_conflict_t *c)
{
    uint64_t                       bi, bj;
    ngx_int_t                      j;
    ngx_uint_t                     i;
    const char                    *err;
    ngx_omniroute_settings_t       f;
    ngx_omniroute_setting_desc_t  *d, *t;

    t = ngx_omniroute_provider_settings;

    f = *s;
    err = ngx_omniroute_settings_fill(kind, &f);

    c->field = -1;
    c->other = -1;
    c->value = 0;
    c->other_value = 0;
    c->result = 0;
    c->reason = NULL;

    for (i = 0; t[i].name; i++) {
        d = &t[i];

        if (d->at_most == NULL) {
            continue;
        }

        j = ngx_omniroute_settings_find(t, d->group, d->at_most);
        if (j < 0) {
            continue;
        }

        bi = (uint64_t) 1 << i;
        bj = (uint64_t) 1 << j;

        if (!(mask & (bi | bj))
            || ngx_omniroute_settings_value(s, &f, i)
               <= ngx_omniroute_settings_value(s, &f, j))
        {
            continue;
        }

        /* name the field of mask; the lower one when both are */

        c->field = (mask & bi) ? (ngx_int_t) i : j;
        c->other = (mask & bi) ? j : (ngx_int_t) i;
        c->value = ngx_omniroute_settings_value(s, &f, c->field);
        c->other_value = ngx_omniroute_settings_value(s, &f, c->other);
        c->result = ngx_omniroute_settings_get(&f, &t[c->field]);
        c->reason = d->why;

        return NGX_DECLINED;
    }

    /* a value of mask that filling in the defaults would change */

    for (i = 0; t[i].name; i++) {
        d = &t[i];

        if (!(mask & ((uint64_t) 1 << i))
            || d->type == NGX_OMNIROUTE_SF_CODES
            || ngx_omniroute_settings_unset(s, d)
            || ngx_omniroute_settings_get(&f, d)
               == ngx_omniroute_settings_get(s, d))
        {
            continue;
        }

        c->field = i;
        c->value = ngx_omniroute_settings_get(s, d);
        c->result = ngx_omniroute_settings_get(&f, d);
        c->reason = "it conflicts with the other settings";

        return NGX_DECLINED;
    }

    if (err) {
        c->reason = err;
        return NGX_DECLINED;
    }

    return NGX_OK;
}


/* a field as given, or as filled in when it has no value */

static int64_t
ngx_omniroute_settings_value(ngx_omniroute_settings_t *s,
    ngx_omniroute_settings_t *filled, ngx_uint_t i)
{
    ngx_omniroute_setting_desc_t  *d;

    d = &ngx_omniroute_provider_settings[i];

    if (ngx_omniroute_settings_unset(s, d)) {
        return ngx_omniroute_settings_get(filled, d);
    }

    return ngx_omniroute_settings_get(s, d);
}


u_char *
ngx_omniroute_settings_print(u_char *p, u_char *last,
    ngx_omniroute_setting_desc_t *d, int64_t v)
{
    switch (d->type) {

    case NGX_OMNIROUTE_SF_BOOL:
        return ngx_slprintf(p, last, "%s", v ? "on" : "off");

    case NGX_OMNIROUTE_SF_MSEC:
    case NGX_OMNIROUTE_SF_MSEC_OPT:
        if (v == OR_MSEC_NONE) {
            return ngx_slprintf(p, last, "none");
        }

        if (v != 0 && v % NGX_OMNIROUTE_DAY_MS == 0) {
            return ngx_slprintf(p, last, "%Ld", v / NGX_OMNIROUTE_DAY_MS);
        }

        if (v != 0 && v % (3600 * 1000) == 0) {
            return ngx_slprintf(p, last, "%Lh", v / (3600 * 1000));
        }

        if (v != 0 && v % (60 * 1000) == 0) {
            return ngx_slprintf(p, last, "%Lm", v / (60 * 1000));
        }

        if (v != 0 && v % 1000 == 0) {
            return ngx_slprintf(p, last, "%Ls", v / 1000);
        }

        return ngx_slprintf(p, last, "%Lms", v);

    default:
        return ngx_slprintf(p, last, "%L", v);
    }
}


const char *
ngx_omniroute_settings_env_name(ngx_omniroute_setting_desc_t *d,
    or_kind_e kind, u_char *buf, size_t len)
{
    u_char      *p, *last;
    const char  *star;

    if (d->env == NULL) {
        return NULL;
    }

    star = ngx_strchr(d->env, '*');

    if (star == NULL) {
        return d->env;
    }

    if ((unsigned) kind >= OR_KIND_COUNT) {
        kind = OR_KIND_APIKEY;
    }

    last = buf + len - 1;

    p = ngx_slprintf(buf, last, "%*s%s%s", (size_t) (star - d->env), d->env,
                     ngx_omniroute_env_kinds[kind], star + 1);
    *p = '\0';

    return (const char *) buf;
}


ngx_int_t
ngx_omniroute_settings_read_override(ngx_omniroute_main_conf_t *omcf,
    ngx_str_t *key, ngx_omniroute_settings_override_t *ov)
{
    if (omcf == NULL || omcf->shm_zone == NULL) {
        return NGX_DECLINED;
    }

    return ngx_omniroute_store_read(&omcf->store, NGX_OMNIROUTE_T_SETTINGS,
                                    key, ov,
                                    sizeof(ngx_omniroute_settings_override_t));
}


ngx_int_t
ngx_omniroute_settings_read_rules(ngx_omniroute_main_conf_t *omcf,
    ngx_str_t *name, ngx_omniroute_rules_override_t *rules)
{
    u_char     buf[NGX_OMNIROUTE_KEY_MAX];
    ngx_str_t  key;

    if (omcf == NULL || omcf->shm_zone == NULL) {
        return NGX_DECLINED;
    }

    key.data = buf;
    key.len = ngx_omniroute_settings_key(buf, "rules:", name);

    if (key.len == 0) {
        return NGX_DECLINED;
    }

    return ngx_omniroute_store_read(&omcf->store, NGX_OMNIROUTE_T_SETTINGS,
                                    &key, rules,
                                    sizeof(ngx_omniroute_rules_override_t));
}


static size_t
ngx_omniroute_settings_key(u_char *buf, const char *prefix, ngx_str_t *name)
{
    size_t  len;

    len = ngx_strlen(prefix);

    if (len + name->len > NGX_OMNIROUTE_KEY_MAX) {
        return 0;
    }

    ngx_memcpy(ngx_cpymem(buf, prefix, len), name->data, name->len);

    return len + name->len;
}


static ngx_uint_t
ngx_omniroute_settings_unset(void *base, ngx_omniroute_setting_desc_t *d)
{
    switch (d->type) {

    case NGX_OMNIROUTE_SF_MSEC:
    case NGX_OMNIROUTE_SF_MSEC_OPT:
        return ngx_omniroute_settings_get(base, d) == OR_MSEC_NONE;

    default:
        return ngx_omniroute_settings_get(base, d) == OR_UNSET;
    }
}


static void
ngx_omniroute_settings_clear(void *base, ngx_omniroute_setting_desc_t *d)
{
    u_char  *p;

    p = (u_char *) base + d->offset;

    switch (d->type) {

    case NGX_OMNIROUTE_SF_MSEC:
    case NGX_OMNIROUTE_SF_MSEC_OPT:
        *(or_msec_t *) p = OR_MSEC_NONE;
        break;

    default:
        *(int32_t *) p = OR_UNSET;
        break;
    }
}


/*
 * Environment defaults, read once per configuration load by the master
 * (which keeps its whole environment; workers keep only the variables
 * named by "env" directives).  The bounds are the rows'.
 */

static void
ngx_omniroute_settings_read_env(void)
{
    u_char                         buf[NGX_OMNIROUTE_ENV_NAME_MAX];
    int64_t                        v;
    ngx_uint_t                     i, k;
    const char                    *name;
    ngx_omniroute_env_value_t     *e;
    ngx_omniroute_setting_desc_t  *d;

    if (ngx_omniroute_env_cycle == (void *) ngx_cycle) {
        return;
    }

    ngx_omniroute_env_cycle = (void *) ngx_cycle;

    ngx_memzero(ngx_omniroute_env_values, sizeof(ngx_omniroute_env_values));

    for (i = 0; ngx_omniroute_provider_settings[i].name; i++) {
        d = &ngx_omniroute_provider_settings[i];

        if (d->env == NULL) {
            continue;
        }

        for (k = 0; k < OR_KIND_COUNT; k++) {
            e = &ngx_omniroute_env_values[i][k];

            if (k > 0 && ngx_strchr(d->env, '*') == NULL) {
                *e = ngx_omniroute_env_values[i][0];   /* every kind */
                continue;
            }

            name = ngx_omniroute_settings_env_name(d, (or_kind_e) k, buf,
                                                   sizeof(buf));

            e->set = (ngx_omniroute_env_parse(name, d, &v) == NGX_OK);
            e->value = v;
        }
    }

    ngx_omniroute_global_base.stream_throughput_watchdog = 0;
    ngx_omniroute_global_base.max_queue_depth = 0;
    ngx_omniroute_global_base.queue_max_wait_ms = 30 * 1000;
    ngx_omniroute_global_base.execution_max_wait_ms = 600 * 1000;
    ngx_omniroute_global_base.combo_wait = 1;
    ngx_omniroute_global_base.queue_fail_open = 0;
    ngx_omniroute_global_base.combo_wait_max_ms = 10 * 1000;
    ngx_omniroute_global_base.combo_wait_budget_ms = 30 * 1000;
    ngx_omniroute_global_base.request_budget_ms = OR_MSEC_NONE;
    ngx_omniroute_global_base.pace_auto_enable = 0;
    ngx_omniroute_global_base.emergency_fallback = 1;
    ngx_omniroute_global_base.tool_backoff_ms = 3600 * 1000;
    ngx_omniroute_global_base.env_set = 0;

    for (i = 0; ngx_omniroute_global_settings[i].name; i++) {
        d = &ngx_omniroute_global_settings[i];

        if (d->env
            && ngx_omniroute_env_parse(d->env, d, &v) == NGX_OK)
        {
            ngx_omniroute_settings_set(&ngx_omniroute_global_base, d, v);
            ngx_omniroute_global_base.env_set |= (uint64_t) 1 << i;
        }
    }
}


static ngx_int_t
ngx_omniroute_env_parse(const char *name, ngx_omniroute_setting_desc_t *d,
    int64_t *out)
{
    u_char      *p, *last;
    int64_t      v, clamped, unit;
    ngx_uint_t   neg;
    const char  *suffix;

    *out = 0;

    p = (u_char *) getenv(name);

    if (p == NULL) {
        return NGX_DECLINED;
    }

    last = p + ngx_strlen(p);

    while (p < last && (*p == ' ' || *p == '\t')) {
        p++;
    }

    while (last > p && (last[-1] == ' ' || last[-1] == '\t'
                        || last[-1] == '\r' || last[-1] == '\n'))
    {
        last--;
    }

    if (p == last) {
        return NGX_DECLINED;
    }

    if (d->type == NGX_OMNIROUTE_SF_BOOL) {

        if ((last - p == 4 && ngx_strncasecmp(p, (u_char *) "true", 4) == 0)
            || (last - p == 1 && *p == '1')
            || (last - p == 2 && ngx_strncasecmp(p, (u_char *) "on", 2) == 0)
            || (last - p == 3 && ngx_strncasecmp(p, (u_char *) "yes", 3)
                                 == 0))
        {
            *out = 1;
            return NGX_OK;
        }

        if ((last - p == 5 && ngx_strncasecmp(p, (u_char *) "false", 5)
                              == 0)
            || (last - p == 1 && *p == '0')
            || (last - p == 3 && ngx_strncasecmp(p, (u_char *) "off", 3)
                                 == 0)
            || (last - p == 2 && ngx_strncasecmp(p, (u_char *) "no", 2) == 0))
        {
            *out = 0;
            return NGX_OK;
        }

        goto invalid;
    }

    if (d->type == NGX_OMNIROUTE_SF_CODES) {
        goto invalid;               /* no such variable */
    }

    neg = 0;

    if (*p == '-') {
        neg = 1;
        p++;
    }

    if (p == last || last - p > 15) {
        goto invalid;
    }

    v = 0;

    while (p < last) {
        if (*p < '0' || *p > '9') {
            goto invalid;
        }

        v = v * 10 + (*p++ - '0');
    }

    if (neg) {
        v = -v;
    }

    unit = (d->env_unit > 1) ? d->env_unit : 1;
    suffix = (unit == 1000) ? " s" : "";

    v *= unit;

    clamped = v;

    if (clamped < d->min) {
        clamped = d->min;
    }

    if (clamped > d->max) {
        clamped = d->max;
    }

    if (clamped != v) {
        ngx_log_error(NGX_LOG_WARN, ngx_cycle->log, 0,
                      "omniroute: environment variable %s is out of range "
                      "(%L..%L%s), clamped to %L%s", name, d->min / unit,
                      d->max / unit, suffix, clamped / unit, suffix);
    }

    *out = clamped;

    return NGX_OK;

invalid:

    ngx_log_error(NGX_LOG_WARN, ngx_cycle->log, 0,
                  "omniroute: environment variable %s has an invalid value, "
                  "ignored", name);

    return NGX_DECLINED;
}
