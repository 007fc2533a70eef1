
/*
 * Copyright (C) ngx_omniroute authors
 *
 * Resilience settings of a provider and their precedence (R-CONF-5):
 * built-in default < environment variable < nginx.conf directive < value
 * persisted at runtime through the admin API.
 *
 * Every setting the admin API shows or changes is described once in a
 * table (ngx_omniroute_setting_desc_t): JSON group and name, where the
 * value lives in ngx_omniroute_settings_t, its type and its range.
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
} ngx_omniroute_settings_t;


/* settings that are not per provider (R-ENV), for the request queue */
typedef struct {
    int32_t                       stream_throughput_watchdog;
    int32_t                       max_queue_depth;
    or_msec_t                     queue_max_wait_ms;
    or_msec_t                     execution_max_wait_ms;
    uint64_t                      env_set;
    uint64_t                      runtime_set;
} ngx_omniroute_global_settings_t;


typedef struct {
    const char                   *group;        /* JSON object */
    const char                   *name;         /* JSON member */
    size_t                        offset;
    ngx_uint_t                    type;         /* NGX_OMNIROUTE_SF_* */
    int64_t                       min;
    int64_t                       max;
} ngx_omniroute_setting_desc_t;


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


#endif /* _NGX_OMNIROUTE_SETTINGS_H_INCLUDED_ */
