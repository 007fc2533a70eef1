
/*
 * Copyright (C) ngx_omniroute authors
 *
 * Resilience settings of a provider and their precedence (R-CONF-5):
 * built-in default < environment variable < nginx.conf directive < value
 * persisted at runtime through the admin API.
 *
 * Every setting is described once, by one row of a table
 * (ngx_omniroute_setting_desc_t): its admin API group and name, its
 * omniroute_provider parameter, its environment variable, where the value
 * lives, its type, its range and the other setting it may not exceed.
 * The three readers -- nginx.conf, the environment and the admin API --
 * take names, bounds and cross-field rules from these rows, and
 * ngx_omniroute_settings_check() judges the settings that would result
 * the same way for nginx.conf and for PATCH.
 *
 * Runtime overrides live in the state store, table
 * NGX_OMNIROUTE_T_SETTINGS (so they survive a reload and are mirrored to
 * Redis like any other record):
 *
 *   key "provider:<name>"   ngx_omniroute_settings_override_t
 *   key "rules:<name>"      ngx_omniroute_rules_override_t
 *   key "global"            ngx_omniroute_settings_override_t (fields of
 *                           the global table)
 */


#ifndef _NGX_OMNIROUTE_SETTINGS_H_INCLUDED_
#define _NGX_OMNIROUTE_SETTINGS_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>

#include "or_breaker.h"
#include "or_cooldown.h"
#include "or_lockout.h"
#include "or_classify.h"
#include "or_stream.h"


#define NGX_OMNIROUTE_SETTINGS_MAX      48      /* fields per table */
#define NGX_OMNIROUTE_RULE_ID_MAX       48
#define NGX_OMNIROUTE_RULE_MATCH_MAX    OR_MARKER_MAX_LEN

/* sources of a value, lowest precedence first */
#define NGX_OMNIROUTE_SRC_DEFAULT       0
#define NGX_OMNIROUTE_SRC_ENV           1
#define NGX_OMNIROUTE_SRC_CONF          2
#define NGX_OMNIROUTE_SRC_RUNTIME       3

/* value types */
#define NGX_OMNIROUTE_SF_INT            0       /* int32_t */
#define NGX_OMNIROUTE_SF_BOOL           1       /* int32_t, 0 or 1 */
#define NGX_OMNIROUTE_SF_MSEC           2       /* or_msec_t */
#define NGX_OMNIROUTE_SF_MSEC_OPT       3       /* or_msec_t, 0: none */
#define NGX_OMNIROUTE_SF_CODES          4       /* lockout error codes */


typedef struct {
    or_breaker_conf_t             breaker;
    or_cooldown_conf_t            cooldown;
    or_lockout_conf_t             lockout;
    or_stream_conf_t              stream;       /* R-STREAM-2/3 watch */
    uint64_t                      conf_set;     /* fields set in nginx.conf */
    uint64_t                      env_set;      /* fields from environment */
    ngx_str_t                     conf_file;    /* the directive that set */
    ngx_uint_t                    conf_line;    /*   fields in nginx.conf */
} ngx_omniroute_settings_t;


/*
 * settings that are not per provider (R-ENV): the request queue, the
 * cooldown-aware wait of combos, the request's time budget
 */
typedef struct {
    int32_t                       stream_throughput_watchdog;
    int32_t                       max_queue_depth;
    or_msec_t                     queue_max_wait_ms;
    or_msec_t                     execution_max_wait_ms;
    uint64_t                      env_set;
    uint64_t                      runtime_set;
    int32_t                       combo_wait;   /* R-CONC-3 on/off */
    int32_t                       queue_fail_open;  /* R-CONC-1 */
    or_msec_t                     combo_wait_max_ms;
    or_msec_t                     combo_wait_budget_ms;
    or_msec_t                     request_budget_ms;    /* NONE: none */
    int32_t                       pace_auto_enable;     /* R-PACE-5 */
    int32_t                       emergency_fallback;   /* R-EMERG-2 */
    or_msec_t                     tool_backoff_ms;      /* R-TOOL-2 */
} ngx_omniroute_global_settings_t;


/*
 * One setting.  The row's index is the bit of the setting in conf_set,
 * env_set and the override records (which the zone keeps across reloads
 * and the Redis mirror shares): rows are only ever appended.
 */
typedef struct {
    const char                   *group;        /* admin API: JSON object */
    const char                   *name;         /*   and member */
    const char                   *conf;         /* omniroute_provider
                                                   parameter, or NULL */
    const char                   *env;          /* environment variable, "*"
                                                   for the provider's kind
                                                   (OAUTH, API_KEY, LOCAL),
                                                   or NULL */
    int64_t                       env_unit;     /* ms per unit of the
                                                   variable (1000: seconds),
                                                   else 1 */
    size_t                        offset;
    ngx_uint_t                    type;         /* NGX_OMNIROUTE_SF_* */
    int64_t                       min;
    int64_t                       max;
    const char                   *at_most;      /* member of the same group
                                                   this one may not exceed,
                                                   or NULL */
    const char                   *why;          /* the rule, in words */
} ngx_omniroute_setting_desc_t;


/* what ngx_omniroute_settings_check() found wrong */
typedef struct {
    ngx_int_t                     field;        /* row at fault, -1: the
                                                   engine's own check */
    ngx_int_t                     other;        /* row it conflicts with,
                                                   or -1 */
    int64_t                       value;
    int64_t                       other_value;
    int64_t                       result;       /* the value the engine
                                                   would use instead */
    const char                   *reason;
} ngx_omniroute_settings_conflict_t;


/* a persisted override of a table's fields; a plain value in the store */
typedef struct {
    uint64_t                      set;          /* bit i: field i */
    int64_t                       value[NGX_OMNIROUTE_SETTINGS_MAX];
    int32_t                       n_codes;
    int32_t                       codes[OR_LOCKOUT_CODES_MAX];
    int32_t                       catchall;     /* 0: not overridden,
                                                   1: set, 2: off */
    int32_t                       catchall_reason;
    int32_t                       catchall_scope;
    int32_t                       reserved;
    int64_t                       catchall_cooldown_ms;
} ngx_omniroute_settings_override_t;


typedef struct {
    int64_t                       cooldown_ms;  /* OR_MSEC_NONE: none */
    int32_t                       status;       /* 0: any */
    uint8_t                       reason;
    uint8_t                       scope;
    uint16_t                      match_len;
    u_char                        id[NGX_OMNIROUTE_RULE_ID_MAX];
    u_char                        match[NGX_OMNIROUTE_RULE_MATCH_MAX];
} ngx_omniroute_rule_rec_t;


/* operator error rules of a provider set at runtime (R-CLASS-4) */
typedef struct {
    uint32_t                      set;          /* 0: use nginx.conf's */
    uint32_t                      n;
    ngx_omniroute_rule_rec_t      rule[OR_OPRULES_MAX];
} ngx_omniroute_rules_override_t;


/*
 * Parse a setting from nginx.conf text (a number, a time such as "90s" or
 * "500ms", on|off, or a list of statuses "429,503"), check it against the
 * row's range and store it in base (an ngx_omniroute_settings_t).  NULL,
 * or why not (in buf).
 */
const char *ngx_omniroute_settings_parse(ngx_omniroute_setting_desc_t *d,
    void *base, ngx_str_t *text, u_char *buf, size_t len);

/* the provider row of an omniroute_provider parameter name, or -1 */
ngx_int_t ngx_omniroute_settings_conf_find(ngx_str_t *name);

/* the row of a group and member in a table, or -1 */
ngx_int_t ngx_omniroute_settings_find(ngx_omniroute_setting_desc_t *table,
    const char *group, const char *name);

/*
 * Settings s (fields without a value still unset) with fields mask set by
 * one source: NGX_OK, or NGX_DECLINED and what is wrong in *c -- a value of
 * mask above the one it may not exceed (or below one that may not exceed
 * it), a value of mask that filling in the defaults would change, or the
 * engine's own checks of the filled settings.
 */
ngx_int_t ngx_omniroute_settings_check(or_kind_e kind,
    ngx_omniroute_settings_t *s, uint64_t mask,
    ngx_omniroute_settings_conflict_t *c);

/*
 * Unset the fields of filled settings that only hold a default and set
 * the overridden ones: the settings before ngx_omniroute_settings_fill().
 */
void ngx_omniroute_settings_layer(ngx_omniroute_settings_t *s,
    ngx_omniroute_settings_override_t *ov);

/* a value as nginx.conf writes it: 12, on, 90s, 1500ms */
u_char *ngx_omniroute_settings_print(u_char *p, u_char *last,
    ngx_omniroute_setting_desc_t *d, int64_t v);

/* the environment variable of a row for a kind, into buf (NUL-terminated) */
const char *ngx_omniroute_settings_env_name(ngx_omniroute_setting_desc_t *d,
    or_kind_e kind, u_char *buf, size_t len);


#endif /* _NGX_OMNIROUTE_SETTINGS_H_INCLUDED_ */
