
/*
 * Copyright (C) ngx_omniroute authors
 */


#ifndef _NGX_OMNIROUTE_H_INCLUDED_
#define _NGX_OMNIROUTE_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "or_types.h"
#include "ngx_omniroute_store.h"
#include "ngx_omniroute_metrics_zone.h"
#include "ngx_omniroute_settings.h"
#include "ngx_omniroute_util.h"
#include "or_classify.h"
#include "or_select.h"
#include "or_wait.h"


#define NGX_OMNIROUTE_AUTH_BEARER     0
#define NGX_OMNIROUTE_AUTH_X_API_KEY  1
#define NGX_OMNIROUTE_AUTH_HEADER     2
#define NGX_OMNIROUTE_AUTH_NONE       3

#define NGX_OMNIROUTE_DEFAULT_PASS_URI  "/_omniroute"

/* omniroute_models: GET <location>/models */
#define NGX_OMNIROUTE_MODELS_OFF   0
#define NGX_OMNIROUTE_MODELS_ON    1    /* the configured names */
#define NGX_OMNIROUTE_MODELS_PASS  2    /* one provider's own list */


typedef struct {
    ngx_str_t                     name;
    ngx_str_t                     value;
    ngx_uint_t                    hash;
    u_char                       *lowcase_key;
} ngx_omniroute_header_t;


typedef struct ngx_omniroute_provider_s {
    ngx_str_t                     name;
    ngx_str_t                     url;          /* base URL, no trailing "/" */
    or_kind_e                     kind;
    ngx_uint_t                    auth;         /* NGX_OMNIROUTE_AUTH_* */
    ngx_str_t                     auth_header;  /* header carrying the key */
    u_char                       *auth_lowcase;
    ngx_uint_t                    auth_hash;
    ngx_array_t                   headers;      /* ngx_omniroute_header_t */
    ngx_omniroute_settings_t      settings;     /* default < env < conf */
    ngx_str_t                     catalog;      /* built-in rules to use */
    ngx_array_t                   oprules;      /* or_oprule_t */
    ngx_array_t                   restate;      /* or_restate_rule_t */
    ngx_array_t                   families;     /* or_family_rule_t */
    or_class_conf_t               class_conf;
    ngx_str_t                     file;         /* where it is declared */
    ngx_uint_t                    line;
} ngx_omniroute_provider_t;


/* a concurrency cap of one upstream model on a connection (R-CONC-1) */
typedef struct {
    ngx_str_t                     model;        /* exact upstream model */
    ngx_uint_t                    cap;
} ngx_omniroute_model_cap_t;


typedef struct {
    ngx_str_t                     id;
    uint32_t                      state_hash;   /* of its record (T_CONN) */
    ngx_omniroute_store_cache_t  *state_cache;  /* this worker's copy */
    ngx_str_t                     provider_name;
    ngx_uint_t                    provider;     /* index into providers */
    ngx_str_t                     credential;   /* never logged */
    ngx_str_t                     auth_value;   /* ready header value */
    ngx_int_t                     priority;
    ngx_uint_t                    weight;
    ngx_uint_t                    max_concurrent;   /* 0: unlimited */
    double                        cost;
    ngx_str_t                     egress;       /* shared egress (proxy/IP) */
    ngx_flag_t                    disable_cooling;
    ngx_str_t                     file;         /* where it is declared */
    ngx_uint_t                    line;
    ngx_array_t                   model_caps;   /* ngx_omniroute_model_cap_t */
    ngx_array_t                   models;       /* ngx_str_t: the upstream
                                                   models it may serve;
                                                   empty: any */
    or_msec_t                     rate_limit_reset; /* R-CD-3 override,
                                                       0: none */
    ngx_flag_t                    usage_lane;   /* R-LANE: the slow lane */
    ngx_flag_t                    limit_reset;  /* R-LANE-7: reset first */
    ngx_str_t                     org;          /* organization UUID of
                                                   the reset claim */
    ngx_int_t                     pacing;       /* R-PACE-5: 1 on, 0 off,
                                                   NGX_CONF_UNSET: the
                                                   safety net decides */
} ngx_omniroute_connection_t;


typedef struct {
    ngx_uint_t                    provider;
    ngx_str_t                     model;        /* upstream model name */
} ngx_omniroute_target_t;


/* the lockout scopes a route has a key for (OR_SCOPE_MODEL first) */
#define NGX_OMNIROUTE_LOCKOUT_SCOPES  3


/*
 * A connection serving one target of a model, with what configuration
 * determines about it; a model's routes are built once, in the order the
 * requests try them (targets in order, each target's connections by
 * ascending priority, declaration order breaking ties).
 */
typedef struct {
    ngx_omniroute_connection_t   *conn;
    ngx_omniroute_provider_t     *provider;
    ngx_omniroute_target_t       *target;
    ngx_uint_t                    order;        /* declaration order */
    uint32_t                      id;           /* stable, for strategies */
    ngx_str_t                     lockout_key[NGX_OMNIROUTE_LOCKOUT_SCOPES];
                                                /* by scope: model, base
                                                   model, quota family;
                                                   empty: too long */
    uint32_t                      lockout_hash[NGX_OMNIROUTE_LOCKOUT_SCOPES];
                                                /* of those (T_LOCKOUT) */
    uint32_t                      rejected_hash;    /* of lockout_key[0]
                                                       in T_REJECTED */
    ngx_uint_t                    model_cap;    /* in flight of the model
                                                   on the connection; 0:
                                                   none */
    ngx_str_t                     cap_key;      /* "connection|model" */
} ngx_omniroute_route_t;


/*
 * One worker's memo of how planning began for a model checked in priority
 * order: its first routes were all excluded by their connections' states
 * (cooling, terminal), as of the connection, breaker and settings tables'
 * generations; valid until the first of those cooldowns ends.  A request
 * then lists those exclusions without checking the routes again
 * (ngx_omniroute_plan_memo.c).  In configuration memory, of which every
 * worker has its own copy.
 */
typedef struct {
    const char                   *reason;       /* or_exclusion_name() */
    or_msec_t                     until;        /* the cooldown's end;
                                                   OR_MSEC_NONE: terminal */
    or_wait_kind_e                kind;
} ngx_omniroute_memo_entry_t;

typedef struct {
    ngx_atomic_uint_t             conn_gen;     /* 0: nothing memoized */
    ngx_atomic_uint_t             breaker_gen;
    ngx_atomic_uint_t             settings_gen;
    or_msec_t                     valid_until;
    ngx_uint_t                    n;            /* routes [0, n) */
    ngx_omniroute_memo_entry_t   *entries;      /* one per route */
} ngx_omniroute_plan_memo_t;


typedef struct {
    ngx_str_t                     name;
    ngx_uint_t                    combo;        /* 1: combo, 0: alias */
    or_strategy_e                 strategy;
    ngx_flag_t                    wait;         /* combo: cooldown-aware
                                                   wait (R-CONC-3) */
    ngx_array_t                   targets;      /* ngx_omniroute_target_t */
    ngx_array_t                   routes;       /* ngx_omniroute_route_t */
    ngx_uint_t                    capped;       /* a route has a
                                                   concurrency cap */
    ngx_omniroute_plan_memo_t    *memo;         /* this worker's */
    ngx_str_t                     file;         /* where it is declared */
    ngx_uint_t                    line;
} ngx_omniroute_model_t;


/* an omniroute_pass, checked once the locations are known */
typedef struct {
    ngx_http_core_srv_conf_t     *server;
    ngx_http_core_loc_conf_t     *location;
    ngx_str_t                     pass_uri;
    ngx_str_t                     file;
    ngx_uint_t                    line;
} ngx_omniroute_pass_conf_t;


/* an error rule, catch-all default or restatement, until attached */
typedef struct {
    ngx_str_t                     provider;
    ngx_uint_t                    type;         /* rule, default, restate */
    ngx_uint_t                    line;
    ngx_str_t                     file;
    or_oprule_t                   oprule;
    or_catchall_t                 catchall;
    or_restate_rule_t             restate;
} ngx_omniroute_rule_conf_t;


#define NGX_OMNIROUTE_RULE_OPERATOR  0
#define NGX_OMNIROUTE_RULE_DEFAULT   1
#define NGX_OMNIROUTE_RULE_RESTATE   2


typedef struct ngx_omniroute_main_conf_s {
    ngx_array_t                   providers;    /* ngx_omniroute_provider_t */
    ngx_array_t                   connections;  /* ngx_omniroute_connection_t */
    ngx_array_t                   models;       /* ngx_omniroute_model_t */
    ngx_hash_t                    model_hash;   /* name: model */
    ngx_array_t                   rules;        /* error rules, restatements */
    or_lockout_conf_t             lockout;      /* omniroute_model_lockout */
    ngx_shm_zone_t               *shm_zone;
    ngx_omniroute_store_t         store;
    ngx_uint_t                    track_inflight;   /* a strategy needs it */
    ngx_omniroute_mzone_t        *mzone;        /* the metrics zone */
    ngx_array_t                   model_ids;    /* ngx_str_t: GET /models */
    ngx_str_t                     models_json;  /* its answer */
    time_t                        created;      /* configuration loaded */
    ngx_array_t                   passes;       /* ngx_omniroute_pass_conf_t */
    ngx_array_t                   json_servers; /* ngx_http_core_srv_conf_t *:
                                                   their own errors (400,
                                                   494...) are JSON */

    /* client keys and leases, or NULL (conf/ngx_omniroute_keys_conf.c) */
    struct ngx_omniroute_keys_conf_s  *keys;

    /* omniroute_emergency_fallback (R-EMERG-1): the last-resort route */
    ngx_omniroute_route_t        *emergency;
    ngx_str_t                     emergency_conn;
    ngx_str_t                     emergency_model;
    ngx_str_t                     emergency_file;
    ngx_uint_t                    emergency_line;
} ngx_omniroute_main_conf_t;


typedef struct {
    ngx_str_t                     pass_uri;     /* internal attempt location */
    ngx_str_t                     prefix;       /* location prefix to strip */
    ngx_int_t                     max_attempts;
    size_t                        error_body_max;
    ngx_flag_t                    stream_probe;
    ngx_msec_t                    stream_probe_timeout; /* hold bound */
    ngx_msec_t                    stream_keepalive;     /* 0: off */
    ngx_msec_t                    stream_keepalive_interval;
    ngx_msec_t                    session_affinity;     /* 0: off */
    ngx_flag_t                    attempt_trail;    /* X-OmniRoute-Trail */
    ngx_uint_t                    models;       /* NGX_OMNIROUTE_MODELS_* */
    ngx_str_t                     models_pass;  /* provider name */
    ngx_int_t                     models_provider;  /* its index */
    ngx_str_t                     models_file;  /* where the directive */
    ngx_uint_t                    models_line;  /* is, for errors */
    ngx_uint_t                    json_errors;  /* nginx's error pages as
                                                   JSON (omniroute_pass,
                                                   omniroute_api) */
    ngx_msec_t                    cache_affinity;       /* 0: off */
    ngx_flag_t                    resend_after_timeout;

    /* omniroute_client_keys (NULL: unset), omniroute_session_leases */
    struct ngx_omniroute_keys_loc_s  *client_keys;
    ngx_uint_t                    session_leases;
} ngx_omniroute_loc_conf_t;


extern ngx_module_t  ngx_http_omniroute_module;


/* directives (conf/ngx_omniroute_conf.c) */
char *ngx_omniroute_zone(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
char *ngx_omniroute_conf_set_time(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
ngx_int_t ngx_omniroute_zone_default(ngx_conf_t *cf);
char *ngx_omniroute_provider(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
char *ngx_omniroute_connection(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
char *ngx_omniroute_model(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
char *ngx_omniroute_pass(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
char *ngx_omniroute_models(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
char *ngx_omniroute_models_merge(ngx_conf_t *cf,
    ngx_omniroute_loc_conf_t *prev, ngx_omniroute_loc_conf_t *conf);
char *ngx_omniroute_emergency_fallback(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
char *ngx_omniroute_init_main_conf(ngx_conf_t *cf, void *conf);

/* checks once every location is known (conf/ngx_omniroute_check.c) */
ngx_int_t ngx_omniroute_check_conf(ngx_conf_t *cf);
ngx_int_t ngx_omniroute_json_server(ngx_conf_t *cf);
void ngx_omniroute_conf_error(ngx_conf_t *cf, ngx_str_t *file,
    ngx_uint_t line, const char *fmt, ...);

/* a model's routes and the lookups in them (conf/ngx_omniroute_routes.c) */
ngx_int_t ngx_omniroute_routes_init(ngx_conf_t *cf,
    ngx_omniroute_main_conf_t *omcf);
ngx_uint_t ngx_omniroute_routes_capped(ngx_omniroute_route_t *routes,
    ngx_uint_t n);
ngx_int_t ngx_omniroute_routes_add(ngx_pool_t *pool, ngx_array_t *routes,
    ngx_omniroute_main_conf_t *omcf, ngx_omniroute_target_t *t);
ngx_uint_t ngx_omniroute_conn_serves(ngx_omniroute_connection_t *c,
    ngx_str_t *model);
ngx_omniroute_model_t *ngx_omniroute_model_lookup(
    ngx_omniroute_main_conf_t *omcf, ngx_str_t *name);
ngx_omniroute_model_t *ngx_omniroute_find_model(
    ngx_omniroute_main_conf_t *omcf, ngx_str_t *name);
ngx_int_t ngx_omniroute_provider_lookup(ngx_omniroute_main_conf_t *omcf,
    ngx_str_t *name);
size_t ngx_omniroute_lockout_scope_index(or_scope_e scope);

/*
 * The metrics zone's layout from the configuration, and the zone added
 * (conf/ngx_omniroute_metrics_conf.c); called once the http block is
 * parsed and the routes are built
 */
ngx_int_t ngx_omniroute_mzone_add(ngx_conf_t *cf,
    ngx_omniroute_main_conf_t *omcf);

/* secrets from files (conf/ngx_omniroute_secret.c) */
ngx_int_t ngx_omniroute_read_secret(ngx_conf_t *cf, ngx_pool_t *pool,
    ngx_str_t *path, size_t max, const char *what, ngx_str_t *secret);

/* resilience directives (conf/ngx_omniroute_rules_conf.c) */
char *ngx_omniroute_model_lockout(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
char *ngx_omniroute_error_rule(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
char *ngx_omniroute_restate(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
ngx_int_t ngx_omniroute_provider_setting(ngx_conf_t *cf,
    ngx_omniroute_provider_t *p, ngx_str_t *arg);
ngx_int_t ngx_omniroute_rules_init(ngx_conf_t *cf,
    ngx_omniroute_main_conf_t *omcf);
void ngx_omniroute_class_conf_init(ngx_omniroute_provider_t *p);

/* the content handler of omniroute_pass (request/ngx_omniroute_request.c) */
ngx_int_t ngx_omniroute_handler(ngx_http_request_t *r);

/* settings precedence (conf/ngx_omniroute_settings.c) */

/* fields still unset take the environment's value (read at startup) */
void ngx_omniroute_settings_env(or_kind_e kind, ngx_omniroute_settings_t *s);

/* unset fields get the kind's defaults; NULL or an error message */
const char *ngx_omniroute_settings_fill(or_kind_e kind,
    ngx_omniroute_settings_t *s);

/*
 * The settings in force for a provider: its configured settings with the
 * runtime overrides applied.
 */
void ngx_omniroute_settings_effective(ngx_omniroute_main_conf_t *omcf,
    ngx_omniroute_provider_t *p, ngx_omniroute_settings_t *out);

/*
 * The classifier configuration in force for a provider: the provider's
 * class_conf with the operator rules and catch-all default set at runtime
 * (if any) in place of nginx.conf's.  Rule strings are allocated from
 * pool.  Returns NGX_OK or NGX_ERROR (out is then the configured one).
 */
ngx_int_t ngx_omniroute_settings_class(ngx_omniroute_main_conf_t *omcf,
    ngx_omniroute_provider_t *p, ngx_pool_t *pool,
    or_class_conf_t *out);

/* the global settings in force */
void ngx_omniroute_settings_global(ngx_omniroute_main_conf_t *omcf,
    ngx_omniroute_global_settings_t *out);


/* for the admin API (ngx_omniroute_api_settings.c) */

extern ngx_omniroute_setting_desc_t  ngx_omniroute_provider_settings[];
extern ngx_omniroute_setting_desc_t  ngx_omniroute_global_settings[];

ngx_uint_t ngx_omniroute_settings_source(ngx_omniroute_settings_t *s,
    ngx_omniroute_settings_override_t *ov, ngx_uint_t i);
void ngx_omniroute_settings_apply(or_kind_e kind,
    ngx_omniroute_settings_t *s, ngx_omniroute_settings_override_t *ov);
void ngx_omniroute_settings_global_apply(
    ngx_omniroute_global_settings_t *g,
    ngx_omniroute_settings_override_t *ov);
int64_t ngx_omniroute_settings_get(void *base,
    ngx_omniroute_setting_desc_t *d);
void ngx_omniroute_settings_set(void *base, ngx_omniroute_setting_desc_t *d,
    int64_t v);
ngx_int_t ngx_omniroute_settings_read_override(
    ngx_omniroute_main_conf_t *omcf, ngx_str_t *key,
    ngx_omniroute_settings_override_t *ov);
ngx_int_t ngx_omniroute_settings_read_rules(
    ngx_omniroute_main_conf_t *omcf, ngx_str_t *name,
    ngx_omniroute_rules_override_t *rules);
const char *ngx_omniroute_source_name(ngx_uint_t source);


#endif /* _NGX_OMNIROUTE_H_INCLUDED_ */
