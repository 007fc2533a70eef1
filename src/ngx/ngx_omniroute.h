
/*
 * Copyright (C) ngx_omniroute authors
 */


#ifndef _NGX_OMNIROUTE_H_INCLUDED_
#define _NGX_OMNIROUTE_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <jansson.h>

#include "or_types.h"
#include "ngx_omniroute_store.h"
#include "ngx_omniroute_settings.h"
#include "or_classify.h"
#include "or_select.h"


#define NGX_OMNIROUTE_AUTH_BEARER     0
#define NGX_OMNIROUTE_AUTH_X_API_KEY  1
#define NGX_OMNIROUTE_AUTH_HEADER     2
#define NGX_OMNIROUTE_AUTH_NONE       3

#define NGX_OMNIROUTE_DEFAULT_PASS_URI  "/_omniroute"


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
} ngx_omniroute_provider_t;


typedef struct {
    ngx_str_t                     id;
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
} ngx_omniroute_connection_t;


typedef struct {
    ngx_uint_t                    provider;
    ngx_str_t                     model;        /* upstream model name */
} ngx_omniroute_target_t;


typedef struct {
    ngx_str_t                     name;
    ngx_uint_t                    combo;        /* 1: combo, 0: alias */
    or_strategy_e                 strategy;
    ngx_array_t                   targets;      /* ngx_omniroute_target_t */
} ngx_omniroute_model_t;


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
    ngx_array_t                   rules;        /* error rules, restatements */
    or_lockout_conf_t             lockout;      /* omniroute_model_lockout */
    ngx_shm_zone_t               *shm_zone;
    ngx_omniroute_store_t         store;
    ngx_uint_t                    track_inflight;   /* a strategy needs it */
} ngx_omniroute_main_conf_t;


typedef struct {
    ngx_str_t                     pass_uri;     /* internal attempt location */
    ngx_str_t                     prefix;       /* location prefix to strip */
    ngx_int_t                     max_attempts;
    size_t                        error_body_max;
    ngx_flag_t                    stream_probe;
    ngx_msec_t                    session_affinity;     /* 0: off */
} ngx_omniroute_loc_conf_t;


/* one candidate: a connection serving one target */
typedef struct {
    ngx_omniroute_connection_t   *conn;
    ngx_omniroute_provider_t     *provider;
    ngx_omniroute_target_t       *target;
    ngx_uint_t                    order;        /* position in config order */
    unsigned                      has_breaker:1;    /* records seen by */
    unsigned                      has_conn:1;       /* planning: only */
    unsigned                      has_lockout:1;    /* these are touched */
    unsigned                      has_rejected:1;   /* on success */
} ngx_omniroute_candidate_t;


/* the settings in force for a provider, computed once per request */
typedef struct {
    ngx_omniroute_provider_t     *provider;
    ngx_omniroute_settings_t      settings;
} ngx_omniroute_provider_settings_t;


#define NGX_OMNIROUTE_SETTINGS_CACHE  4


/* a candidate left out by planning, for the 503 diagnostics */
typedef struct {
    ngx_omniroute_candidate_t    *cand;
    const char                   *reason;       /* circuit_open, ... */
    or_msec_t                     retry_after;  /* ms; -1: no timer */
} ngx_omniroute_excluded_t;


typedef enum {
    NGX_OMNIROUTE_ATTEMPT_RUNNING = 0,
    NGX_OMNIROUTE_ATTEMPT_COMMITTED,    /* response streamed to the client */
    NGX_OMNIROUTE_ATTEMPT_HELD,         /* error response held, body read */
    NGX_OMNIROUTE_ATTEMPT_PROBING,      /* 200 stream held until its first
                                           event */
    NGX_OMNIROUTE_ATTEMPT_TRANSPORT     /* no response: connect/timeout */
} ngx_omniroute_attempt_state_e;


typedef struct {
    ngx_http_request_t           *sr;
    ngx_omniroute_candidate_t    *cand;
    ngx_omniroute_attempt_state_e state;
    or_msec_t                     start;
    or_verdict_t                  verdict;
    or_transport_e                transport;
    ngx_uint_t                    status;       /* provider status or 502/504 */
    ngx_buf_t                    *body;         /* held error body */
    ngx_str_t                     event;        /* error event in a 200
                                                   stream, classified */
    ngx_uint_t                    truncated;    /* held body hit the bound */
    ngx_uint_t                    header_seen;
    ngx_uint_t                    done;
    ngx_atomic_t                 *inflight;     /* counted while running */
} ngx_omniroute_attempt_t;


typedef struct {
    ngx_omniroute_loc_conf_t     *lcf;
    ngx_str_t                     body;         /* client body, contiguous */
    ngx_str_t                     model;        /* model the client named */
    json_t                       *json;         /* parsed client body */
    ngx_str_t                     sent_model;   /* model in sent_body */
    ngx_str_t                     sent_body;    /* body with upstream model */
    ngx_omniroute_model_t        *entry;        /* alias or combo, or NULL */
    ngx_array_t                   candidates;   /* ngx_omniroute_candidate_t */
    ngx_array_t                   excluded;     /* ngx_omniroute_excluded_t */
    ngx_uint_t                    next;         /* next candidate to try */
    ngx_array_t                   attempts;     /* ngx_omniroute_attempt_t */
    ngx_omniroute_attempt_t      *current;
    ngx_omniroute_attempt_t      *last_held;    /* latest held error */
    ngx_str_t                     upstream_url; /* of the current attempt */
    ngx_http_post_subrequest_t    ps;
    ngx_buf_t                    *error_page;   /* JSON for an nginx page */
    ngx_omniroute_provider_settings_t
                                  settings[NGX_OMNIROUTE_SETTINGS_CACHE];
    ngx_uint_t                    nsettings;
    ngx_str_t                     pin_key;      /* model|session hash */
    ngx_event_t                   wait;         /* queued for a slot */
    or_msec_t                     wait_until;
    ngx_uint_t                    queued;       /* counted in sh->queued */
    ngx_uint_t                    plan_excluded;    /* after planning */
    ngx_uint_t                    saw_full;     /* a candidate was at its
                                                   max_concurrent */
    const char                   *error_code;   /* client error to answer */
    const char                   *error_message;
} ngx_omniroute_ctx_t;


extern ngx_module_t  ngx_http_omniroute_module;


/* directives (ngx_omniroute_conf.c) */
char *ngx_omniroute_zone(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
char *ngx_omniroute_provider(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
char *ngx_omniroute_connection(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
char *ngx_omniroute_model(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
char *ngx_omniroute_pass(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
char *ngx_omniroute_init_main_conf(ngx_conf_t *cf, void *conf);

/* secrets from files (ngx_omniroute_secret.c) */
ngx_int_t ngx_omniroute_read_secret(ngx_conf_t *cf, ngx_pool_t *pool,
    ngx_str_t *path, size_t max, const char *what, ngx_str_t *secret);

/* resilience directives (ngx_omniroute_rules_conf.c) */
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

/* request path (ngx_omniroute_request.c) */
ngx_int_t ngx_omniroute_handler(ngx_http_request_t *r);

/* walking an ngx_list_t of headers */
typedef struct {
    ngx_list_part_t              *part;
    ngx_uint_t                    i;
} ngx_omniroute_list_iter_t;


/* attempt and response headers (ngx_omniroute_headers.c) */
void ngx_omniroute_list_start(ngx_omniroute_list_iter_t *it, ngx_list_t *l);
ngx_table_elt_t *ngx_omniroute_list_next(ngx_omniroute_list_iter_t *it);
ngx_int_t ngx_omniroute_attempt_url(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, ngx_omniroute_provider_t *p);
ngx_int_t ngx_omniroute_attempt_headers(ngx_http_request_t *r,
    ngx_http_request_t *sr, ngx_omniroute_candidate_t *cand);
ngx_int_t ngx_omniroute_add_header(ngx_http_request_t *r, ngx_str_t *name,
    ngx_str_t *value);
ngx_int_t ngx_omniroute_copy_response_headers(ngx_http_request_t *r,
    ngx_http_request_t *sr);
ngx_int_t ngx_omniroute_add_route_headers(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx);

/* the attempt loop (ngx_omniroute_request.c) */
ngx_int_t ngx_omniroute_body_text(ngx_http_request_t *r, off_t max,
    ngx_str_t *body);
ngx_uint_t ngx_omniroute_may_fall_over(ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_attempt_t *a);
ngx_uint_t ngx_omniroute_may_continue(ngx_omniroute_ctx_t *ctx);
ngx_omniroute_settings_t *ngx_omniroute_settings_of(ngx_http_request_t *r,
    ngx_omniroute_provider_t *p);

/* JSON errors (ngx_omniroute_error.c) */
ngx_int_t ngx_omniroute_json_error_page(ngx_http_request_t *r);
ngx_int_t ngx_omniroute_send_error(ngx_http_request_t *r, ngx_uint_t status,
    const char *type, const char *code, const char *message);
ngx_int_t ngx_omniroute_send_json(ngx_http_request_t *r, ngx_uint_t status,
    json_t *doc);

/* planning (ngx_omniroute_plan.c) */
ngx_int_t ngx_omniroute_plan_eligible(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx);
ngx_int_t ngx_omniroute_admit(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, ngx_omniroute_candidate_t *cand,
    const char **reason);
ngx_int_t ngx_omniroute_plan_exclude(ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_candidate_t *cand, const char *reason,
    or_msec_t retry_after);
ngx_int_t ngx_omniroute_send_cooling_down(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx);

/* session affinity (ngx_omniroute_affinity.c) */
ngx_int_t ngx_omniroute_affinity_key(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx);
void ngx_omniroute_affinity_apply(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx);
void ngx_omniroute_affinity_record(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, ngx_omniroute_attempt_t *a);

/* outcomes (ngx_omniroute_outcome.c) */
void ngx_omniroute_classify(ngx_http_request_t *r, ngx_omniroute_attempt_t *a);
void ngx_omniroute_record_failure(ngx_http_request_t *r,
    ngx_omniroute_attempt_t *a);
void ngx_omniroute_record_success(ngx_http_request_t *r,
    ngx_omniroute_attempt_t *a);
void ngx_omniroute_count(ngx_http_request_t *r, ngx_uint_t outcome);
void ngx_omniroute_count_fallback(ngx_http_request_t *r, or_reason_e reason);
ngx_int_t ngx_omniroute_apply_restatement(ngx_http_request_t *r,
    ngx_omniroute_attempt_t *a);
size_t ngx_omniroute_candidate_lockout_key(u_char *buf,
    ngx_omniroute_candidate_t *cand, or_scope_e scope);

/* attempt filters (ngx_omniroute_filter.c) */
ngx_int_t ngx_omniroute_filter_init(ngx_conf_t *cf);
ngx_omniroute_attempt_t *ngx_omniroute_attempt_of(ngx_http_request_t *r,
    ngx_omniroute_ctx_t **pctx);

/* variables (ngx_omniroute_variables.c) */
ngx_int_t ngx_omniroute_add_variables(ngx_conf_t *cf);


#endif /* _NGX_OMNIROUTE_H_INCLUDED_ */
