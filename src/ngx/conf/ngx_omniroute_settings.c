
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


#define NGX_OMNIROUTE_ALL_KINDS    -1

#define NGX_OMNIROUTE_ENV_INT      0
#define NGX_OMNIROUTE_ENV_MS       1
#define NGX_OMNIROUTE_ENV_SEC      2
#define NGX_OMNIROUTE_ENV_BOOL     3

#define NGX_OMNIROUTE_DAY_MS       ((int64_t) 86400 * 1000)
#define NGX_OMNIROUTE_30D_MS       (30 * NGX_OMNIROUTE_DAY_MS)

/* provider table indexes used below */
#define NGX_OMNIROUTE_F_DEGRADE    0
#define NGX_OMNIROUTE_F_OPEN       1
#define NGX_OMNIROUTE_F_RESET      2
#define NGX_OMNIROUTE_F_MULT       3
#define NGX_OMNIROUTE_F_GATE       6
#define NGX_OMNIROUTE_F_GATE_N     7
#define NGX_OMNIROUTE_F_GATE_WIN   8
#define NGX_OMNIROUTE_F_GATE_CD    9
#define NGX_OMNIROUTE_F_ENV_RESET  14

#define ngx_omniroute_sfield(group, f)                                        \
    offsetof(ngx_omniroute_settings_t, group.f)


typedef struct {
    const char                   *name;
    ngx_int_t                     kind;         /* or ALL_KINDS */
    ngx_uint_t                    field;        /* index in the table */
    ngx_uint_t                    unit;         /* NGX_OMNIROUTE_ENV_* */
} ngx_omniroute_env_t;


typedef struct {
    ngx_uint_t                    set;
    int64_t                       value;
} ngx_omniroute_env_value_t;


static void ngx_omniroute_settings_read_env(void);
static ngx_int_t ngx_omniroute_env_parse(ngx_omniroute_env_t *e,
    ngx_omniroute_setting_desc_t *d, int64_t *out);
static ngx_uint_t ngx_omniroute_settings_unset(void *base,
    ngx_omniroute_setting_desc_t *d);
static void ngx_omniroute_settings_clear(void *base,
    ngx_omniroute_setting_desc_t *d);
static size_t ngx_omniroute_settings_key(u_char *buf, const char *prefix,
    ngx_str_t *name);


ngx_omniroute_setting_desc_t  ngx_omniroute_provider_settings[] = {

    /* 0 .. 9: provider circuit breaker (R-CB) */
    { "breaker", "degrade_threshold",
      ngx_omniroute_sfield(breaker, degrade_threshold),
      NGX_OMNIROUTE_SF_INT, 1, 100000 },
    { "breaker", "open_threshold",
      ngx_omniroute_sfield(breaker, open_threshold),
      NGX_OMNIROUTE_SF_INT, 1, 100000 },
    { "breaker", "reset_timeout_ms",
      ngx_omniroute_sfield(breaker, reset_ms),
      NGX_OMNIROUTE_SF_MSEC, 1, NGX_OMNIROUTE_30D_MS },
    { "breaker", "max_backoff_multiplier",
      ngx_omniroute_sfield(breaker, max_backoff_multiplier),
      NGX_OMNIROUTE_SF_INT, 1, OR_BREAKER_MAX_MULT },
    { "breaker", "recovery_successes",
      ngx_omniroute_sfield(breaker, recovery_successes),
      NGX_OMNIROUTE_SF_INT, 1, 100000 },
    { "breaker", "probe_timeout_ms",
      ngx_omniroute_sfield(breaker, probe_timeout_ms),
      NGX_OMNIROUTE_SF_MSEC, 1, NGX_OMNIROUTE_30D_MS },
    { "breaker", "provider_cooldown_enabled",
      ngx_omniroute_sfield(breaker, gate_enabled),
      NGX_OMNIROUTE_SF_BOOL, 0, 1 },
    { "breaker", "provider_cooldown_failures",
      ngx_omniroute_sfield(breaker, gate_threshold),
      NGX_OMNIROUTE_SF_INT, 1, OR_BREAKER_RING },
    { "breaker", "provider_cooldown_window_ms",
      ngx_omniroute_sfield(breaker, gate_window_ms),
      NGX_OMNIROUTE_SF_MSEC, 1, NGX_OMNIROUTE_30D_MS },
    { "breaker", "provider_cooldown_ms",
      ngx_omniroute_sfield(breaker, gate_cooldown_ms),
      NGX_OMNIROUTE_SF_MSEC, 1, NGX_OMNIROUTE_30D_MS },

    /* 10 .. 20: connection cooldown (R-CD) */
    { "cooldown", "base_cooldown_ms",
      ngx_omniroute_sfield(cooldown, base_ms),
      NGX_OMNIROUTE_SF_MSEC, 1, NGX_OMNIROUTE_30D_MS },
    { "cooldown", "max_cooldown_ms",
      ngx_omniroute_sfield(cooldown, max_ms),
      NGX_OMNIROUTE_SF_MSEC, 1, NGX_OMNIROUTE_30D_MS },
    { "cooldown", "max_backoff_steps",
      ngx_omniroute_sfield(cooldown, max_backoff_steps),
      NGX_OMNIROUTE_SF_INT, 0, OR_COOLDOWN_MAX_STEPS },
    { "cooldown", "retry_delay_ms",
      ngx_omniroute_sfield(cooldown, provider_delay_ms),
      NGX_OMNIROUTE_SF_MSEC_OPT, OR_COOLDOWN_RETRY_MIN_MS,
      OR_COOLDOWN_RETRY_MAX_MS },
    { "cooldown", "rate_limit_reset_ms",
      ngx_omniroute_sfield(cooldown, env_default_ms),
      NGX_OMNIROUTE_SF_MSEC_OPT, 1, NGX_OMNIROUTE_30D_MS },
    { "cooldown", "concurrency_cooldown_ms",
      ngx_omniroute_sfield(cooldown, concurrency_ms),
      NGX_OMNIROUTE_SF_MSEC, 1, NGX_OMNIROUTE_30D_MS },
    { "cooldown", "max_retry_hint_ms",
      ngx_omniroute_sfield(cooldown, hint_max_ms),
      NGX_OMNIROUTE_SF_MSEC, 1, NGX_OMNIROUTE_30D_MS },
    { "cooldown", "expired_retries",
      ngx_omniroute_sfield(cooldown, expired_retry_max),
      NGX_OMNIROUTE_SF_INT, 0, 1000 },
    { "cooldown", "rejected_base_cooldown_ms",
      ngx_omniroute_sfield(cooldown, rejected_base_ms),
      NGX_OMNIROUTE_SF_MSEC, 1, NGX_OMNIROUTE_30D_MS },
    { "cooldown", "rejected_max_cooldown_ms",
      ngx_omniroute_sfield(cooldown, rejected_max_ms),
      NGX_OMNIROUTE_SF_MSEC, 1, NGX_OMNIROUTE_30D_MS },
    { "cooldown", "stream_stall_cooldown",
      ngx_omniroute_sfield(cooldown, stream_stall_cooldown),
      NGX_OMNIROUTE_SF_BOOL, 0, 1 },

    /* 21 .. 27: model lockout (R-ML) */
    { "model_lockout", "enabled",
      ngx_omniroute_sfield(lockout, enabled),
      NGX_OMNIROUTE_SF_BOOL, 0, 1 },
    { "model_lockout", "error_codes",
      ngx_omniroute_sfield(lockout, n_codes),
      NGX_OMNIROUTE_SF_CODES, 100, 599 },
    { "model_lockout", "base_cooldown_ms",
      ngx_omniroute_sfield(lockout, base_ms),
      NGX_OMNIROUTE_SF_MSEC, 1, OR_LOCKOUT_MAX_MS },
    { "model_lockout", "max_cooldown_ms",
      ngx_omniroute_sfield(lockout, max_ms),
      NGX_OMNIROUTE_SF_MSEC, 1, OR_LOCKOUT_MAX_MS },
    { "model_lockout", "max_backoff_steps",
      ngx_omniroute_sfield(lockout, max_backoff_steps),
      NGX_OMNIROUTE_SF_INT, 0, OR_LOCKOUT_MAX_STEPS },
    { "model_lockout", "exponential",
      ngx_omniroute_sfield(lockout, exponential),
      NGX_OMNIROUTE_SF_BOOL, 0, 1 },
    { "model_lockout", "escalation_window_ms",
      ngx_omniroute_sfield(lockout, window_ms),
      NGX_OMNIROUTE_SF_MSEC, 0, OR_LOCKOUT_MAX_MS },

    /* 28 .. 34: the watch over streams (R-STREAM-2, R-STREAM-3) */
    { "stream", "throughput_watchdog",
      ngx_omniroute_sfield(stream, watchdog),
      NGX_OMNIROUTE_SF_BOOL, 0, 1 },
    { "stream", "stall_timeout_ms",
      ngx_omniroute_sfield(stream, stall_ms),
      NGX_OMNIROUTE_SF_MSEC, 0, OR_WATCH_MAX_MS },
    { "stream", "watchdog_warmup_ms",
      ngx_omniroute_sfield(stream, warmup_ms),
      NGX_OMNIROUTE_SF_MSEC, 0, OR_WATCH_MAX_MS },
    { "stream", "watchdog_window_ms",
      ngx_omniroute_sfield(stream, window_ms),
      NGX_OMNIROUTE_SF_MSEC, 1000, OR_WATCH_MAX_MS },
    { "stream", "watchdog_min_rate",
      ngx_omniroute_sfield(stream, min_rate),
      NGX_OMNIROUTE_SF_INT, 0, 1000000 },
    { "stream", "watchdog_min_bytes",
      ngx_omniroute_sfield(stream, min_bytes),
      NGX_OMNIROUTE_SF_INT, 0, 100000000 },
    { "stream", "first_content_timeout_ms",
      ngx_omniroute_sfield(stream, first_content_ms),
      NGX_OMNIROUTE_SF_MSEC_OPT, 1, OR_WATCH_MAX_MS },

    { NULL, NULL, 0, 0, 0, 0 }
};


ngx_omniroute_setting_desc_t  ngx_omniroute_global_settings[] = {

    { "stream", "throughput_watchdog",
      offsetof(ngx_omniroute_global_settings_t, stream_throughput_watchdog),
      NGX_OMNIROUTE_SF_BOOL, 0, 1 },
    { "request_queue", "max_wait_ms",
      offsetof(ngx_omniroute_global_settings_t, queue_max_wait_ms),
      NGX_OMNIROUTE_SF_MSEC, 1, NGX_OMNIROUTE_DAY_MS },
    { "request_queue", "execution_max_wait_ms",
      offsetof(ngx_omniroute_global_settings_t, execution_max_wait_ms),
      NGX_OMNIROUTE_SF_MSEC, 1, NGX_OMNIROUTE_DAY_MS },
    { "request_queue", "max_queue_depth",
      offsetof(ngx_omniroute_global_settings_t, max_queue_depth),
      NGX_OMNIROUTE_SF_INT, 0, 100000 },

    { NULL, NULL, 0, 0, 0, 0 }
};


/* R-ENV (SPEC §13) */
static ngx_omniroute_env_t  ngx_omniroute_provider_env[] = {

    { "OMNIROUTE_PROVIDER_BREAKER_OAUTH_FAILURE_THRESHOLD", OR_KIND_OAUTH,
      NGX_OMNIROUTE_F_GATE_N, NGX_OMNIROUTE_ENV_INT },
    { "OMNIROUTE_PROVIDER_BREAKER_OAUTH_FAILURE_WINDOW_MS", OR_KIND_OAUTH,
      NGX_OMNIROUTE_F_GATE_WIN, NGX_OMNIROUTE_ENV_MS },
    { "OMNIROUTE_PROVIDER_BREAKER_OAUTH_COOLDOWN_MS", OR_KIND_OAUTH,
      NGX_OMNIROUTE_F_GATE_CD, NGX_OMNIROUTE_ENV_MS },
    { "OMNIROUTE_PROVIDER_BREAKER_API_KEY_FAILURE_THRESHOLD", OR_KIND_APIKEY,
      NGX_OMNIROUTE_F_GATE_N, NGX_OMNIROUTE_ENV_INT },
    { "OMNIROUTE_PROVIDER_BREAKER_API_KEY_FAILURE_WINDOW_MS", OR_KIND_APIKEY,
      NGX_OMNIROUTE_F_GATE_WIN, NGX_OMNIROUTE_ENV_MS },
    { "OMNIROUTE_PROVIDER_BREAKER_API_KEY_COOLDOWN_MS", OR_KIND_APIKEY,
      NGX_OMNIROUTE_F_GATE_CD, NGX_OMNIROUTE_ENV_MS },
    { "OMNIROUTE_PROVIDER_BREAKER_LOCAL_FAILURE_THRESHOLD", OR_KIND_LOCAL,
      NGX_OMNIROUTE_F_GATE_N, NGX_OMNIROUTE_ENV_INT },
    { "OMNIROUTE_PROVIDER_BREAKER_LOCAL_FAILURE_WINDOW_MS", OR_KIND_LOCAL,
      NGX_OMNIROUTE_F_GATE_WIN, NGX_OMNIROUTE_ENV_MS },
    { "OMNIROUTE_PROVIDER_BREAKER_LOCAL_COOLDOWN_MS", OR_KIND_LOCAL,
      NGX_OMNIROUTE_F_GATE_CD, NGX_OMNIROUTE_ENV_MS },

    { "OMNIROUTE_CIRCUIT_BREAKER_OAUTH_THRESHOLD", OR_KIND_OAUTH,
      NGX_OMNIROUTE_F_OPEN, NGX_OMNIROUTE_ENV_INT },
    { "OMNIROUTE_CIRCUIT_BREAKER_OAUTH_DEGRADATION_THRESHOLD", OR_KIND_OAUTH,
      NGX_OMNIROUTE_F_DEGRADE, NGX_OMNIROUTE_ENV_INT },
    { "OMNIROUTE_CIRCUIT_BREAKER_OAUTH_RESET_MS", OR_KIND_OAUTH,
      NGX_OMNIROUTE_F_RESET, NGX_OMNIROUTE_ENV_MS },
    { "OMNIROUTE_CIRCUIT_BREAKER_API_KEY_THRESHOLD", OR_KIND_APIKEY,
      NGX_OMNIROUTE_F_OPEN, NGX_OMNIROUTE_ENV_INT },
    { "OMNIROUTE_CIRCUIT_BREAKER_API_KEY_DEGRADATION_THRESHOLD",
      OR_KIND_APIKEY, NGX_OMNIROUTE_F_DEGRADE, NGX_OMNIROUTE_ENV_INT },
    { "OMNIROUTE_CIRCUIT_BREAKER_API_KEY_RESET_MS", OR_KIND_APIKEY,
      NGX_OMNIROUTE_F_RESET, NGX_OMNIROUTE_ENV_MS },
    { "OMNIROUTE_CIRCUIT_BREAKER_LOCAL_THRESHOLD", OR_KIND_LOCAL,
      NGX_OMNIROUTE_F_OPEN, NGX_OMNIROUTE_ENV_INT },
    { "OMNIROUTE_CIRCUIT_BREAKER_LOCAL_DEGRADATION_THRESHOLD", OR_KIND_LOCAL,
      NGX_OMNIROUTE_F_DEGRADE, NGX_OMNIROUTE_ENV_INT },
    { "OMNIROUTE_CIRCUIT_BREAKER_LOCAL_RESET_MS", OR_KIND_LOCAL,
      NGX_OMNIROUTE_F_RESET, NGX_OMNIROUTE_ENV_MS },
    { "OMNIROUTE_CIRCUIT_BREAKER_MAX_BACKOFF_MULTIPLIER",
      NGX_OMNIROUTE_ALL_KINDS, NGX_OMNIROUTE_F_MULT, NGX_OMNIROUTE_ENV_INT },

    { "PROVIDER_COOLDOWN_ENABLED", NGX_OMNIROUTE_ALL_KINDS,
      NGX_OMNIROUTE_F_GATE, NGX_OMNIROUTE_ENV_BOOL },
    { "OMNIROUTE_ROTATION_RATE_LIMIT_RESET_SECONDS", NGX_OMNIROUTE_ALL_KINDS,
      NGX_OMNIROUTE_F_ENV_RESET, NGX_OMNIROUTE_ENV_SEC },

    { NULL, 0, 0, 0 }
};


static ngx_omniroute_env_t  ngx_omniroute_global_env[] = {

    { "STREAM_THROUGHPUT_WATCHDOG_ENABLED", NGX_OMNIROUTE_ALL_KINDS, 0,
      NGX_OMNIROUTE_ENV_BOOL },
    { "RATE_LIMIT_MAX_WAIT_MS", NGX_OMNIROUTE_ALL_KINDS, 1,
      NGX_OMNIROUTE_ENV_MS },
    { "RATE_LIMIT_EXECUTION_MAX_WAIT_MS", NGX_OMNIROUTE_ALL_KINDS, 2,
      NGX_OMNIROUTE_ENV_MS },
    { "RATE_LIMIT_MAX_QUEUE_DEPTH", NGX_OMNIROUTE_ALL_KINDS, 3,
      NGX_OMNIROUTE_ENV_INT },

    { NULL, 0, 0, 0 }
};


static ngx_omniroute_env_value_t
    ngx_omniroute_env_values[sizeof(ngx_omniroute_provider_env)
                             / sizeof(ngx_omniroute_env_t)];

static ngx_omniroute_global_settings_t  ngx_omniroute_global_base = {
    0, 0, 30 * 1000, 600 * 1000, 0, 0
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
    ngx_omniroute_env_t           *e;
    ngx_omniroute_setting_desc_t  *d;

    ngx_omniroute_settings_read_env();

    s->conf_set = 0;
    s->env_set = 0;

    for (i = 0; ngx_omniroute_provider_settings[i].name; i++) {
        d = &ngx_omniroute_provider_settings[i];

        if (!ngx_omniroute_settings_unset(s, d)) {
            s->conf_set |= (uint64_t) 1 << i;
        }
    }

    for (i = 0; ngx_omniroute_provider_env[i].name; i++) {
        e = &ngx_omniroute_provider_env[i];

        if (!ngx_omniroute_env_values[i].set
            || (e->kind != NGX_OMNIROUTE_ALL_KINDS
                && e->kind != (ngx_int_t) kind))
        {
            continue;
        }

        d = &ngx_omniroute_provider_settings[e->field];

        if (!ngx_omniroute_settings_unset(s, d)) {
            continue;               /* nginx.conf wins */
        }

        ngx_omniroute_settings_set(s, d, ngx_omniroute_env_values[i].value);
        s->env_set |= (uint64_t) 1 << e->field;
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
    uint64_t                       bit;
    ngx_uint_t                     i;
    ngx_omniroute_setting_desc_t  *d;

    if (ov->set == 0) {
        return;
    }

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

    (void) ngx_omniroute_settings_fill(kind, s);
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
 * named by "env" directives).
 */

static void
ngx_omniroute_settings_read_env(void)
{
    int64_t                        v;
    ngx_uint_t                     i;
    ngx_omniroute_env_t           *e;
    ngx_omniroute_setting_desc_t  *d;

    if (ngx_omniroute_env_cycle == (void *) ngx_cycle) {
        return;
    }

    ngx_omniroute_env_cycle = (void *) ngx_cycle;

    for (i = 0; ngx_omniroute_provider_env[i].name; i++) {
        e = &ngx_omniroute_provider_env[i];
        d = &ngx_omniroute_provider_settings[e->field];

        ngx_omniroute_env_values[i].set =
                               (ngx_omniroute_env_parse(e, d, &v) == NGX_OK);
        ngx_omniroute_env_values[i].value = v;
    }

    ngx_omniroute_global_base.stream_throughput_watchdog = 0;
    ngx_omniroute_global_base.max_queue_depth = 0;
    ngx_omniroute_global_base.queue_max_wait_ms = 30 * 1000;
    ngx_omniroute_global_base.execution_max_wait_ms = 600 * 1000;
    ngx_omniroute_global_base.env_set = 0;

    for (i = 0; ngx_omniroute_global_env[i].name; i++) {
        e = &ngx_omniroute_global_env[i];
        d = &ngx_omniroute_global_settings[e->field];

        if (ngx_omniroute_env_parse(e, d, &v) == NGX_OK) {
            ngx_omniroute_settings_set(&ngx_omniroute_global_base, d, v);
            ngx_omniroute_global_base.env_set |= (uint64_t) 1 << e->field;
        }
    }
}


static ngx_int_t
ngx_omniroute_env_parse(ngx_omniroute_env_t *e,
    ngx_omniroute_setting_desc_t *d, int64_t *out)
{
    u_char     *p, *last;
    int64_t     v, clamped;
    ngx_uint_t  neg;

    *out = 0;

    p = (u_char *) getenv(e->name);

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

    if (e->unit == NGX_OMNIROUTE_ENV_BOOL) {

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

    if (e->unit == NGX_OMNIROUTE_ENV_SEC) {
        v *= 1000;
    }

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
                      "(%L..%L%s), clamped to %L%s", e->name,
                      e->unit == NGX_OMNIROUTE_ENV_SEC ? d->min / 1000
                                                       : d->min,
                      e->unit == NGX_OMNIROUTE_ENV_SEC ? d->max / 1000
                                                       : d->max,
                      e->unit == NGX_OMNIROUTE_ENV_SEC ? " s" : "",
                      e->unit == NGX_OMNIROUTE_ENV_SEC ? clamped / 1000
                                                       : clamped,
                      e->unit == NGX_OMNIROUTE_ENV_SEC ? " s" : "");
    }

    *out = clamped;

    return NGX_OK;

invalid:

    ngx_log_error(NGX_LOG_WARN, ngx_cycle->log, 0,
                  "omniroute: environment variable %s has an invalid value, "
                  "ignored", e->name);

    return NGX_DECLINED;
}
