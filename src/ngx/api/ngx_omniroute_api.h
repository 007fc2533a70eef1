
/*
 * Copyright (C) ngx_omniroute authors
 *
 * The operator surface (SPEC §12, R-API): admin JSON API, Prometheus
 * metrics and the status page, served by the "omniroute_api" location
 * handler of ngx_http_omniroute_api_module.
 */


#ifndef _NGX_OMNIROUTE_API_H_INCLUDED_
#define _NGX_OMNIROUTE_API_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <jansson.h>

#include "ngx_omniroute.h"


#define NGX_OMNIROUTE_API_TOKEN_UNSET  0
#define NGX_OMNIROUTE_API_TOKEN_SET    1
#define NGX_OMNIROUTE_API_TOKEN_OFF    2

#define NGX_OMNIROUTE_API_MESSAGE_MAX  512


typedef struct {
    ngx_flag_t                    enabled;
    ngx_str_t                     prefix;       /* endpoints live below */
    ngx_uint_t                    token_mode;   /* NGX_OMNIROUTE_API_TOKEN_* */
    u_char                        token_hash[32];   /* SHA-256 */
    size_t                        body_max;
    ngx_str_t                     file;         /* of omniroute_api */
    ngx_uint_t                    line;
} ngx_omniroute_api_loc_conf_t;


/* one API call: input, and either a JSON document or a text body out */
typedef struct {
    ngx_http_request_t           *r;
    ngx_omniroute_main_conf_t    *omcf;
    ngx_omniroute_api_loc_conf_t *alcf;
    json_t                       *body;         /* request JSON, or NULL */
    or_msec_t                     now;
    ngx_uint_t                    status;
    json_t                       *out;          /* response document */
    ngx_chain_t                  *text;         /* or a text response */
    ngx_str_t                     content_type;
    ngx_uint_t                    no_redact;    /* static text */
    const char                   *code;         /* error code */
    u_char                        message[NGX_OMNIROUTE_API_MESSAGE_MAX];
} ngx_omniroute_api_call_t;


typedef ngx_int_t (*ngx_omniroute_api_handler_pt)(
    ngx_omniroute_api_call_t *call);


extern ngx_module_t  ngx_http_omniroute_api_module;


/* helpers (ngx_omniroute_api_module.c) */
ngx_int_t ngx_omniroute_api_fail(ngx_omniroute_api_call_t *call,
    ngx_uint_t status, const char *code, const char *fmt, ...);

/* the answer of a handler that returned NGX_DONE: rc as it would have */
void ngx_omniroute_api_finish(ngx_omniroute_api_call_t *call, ngx_int_t rc);
ngx_int_t ngx_omniroute_api_fields(ngx_omniroute_api_call_t *call,
    json_t *obj, const char *where, const char **allowed);
ngx_omniroute_provider_t *ngx_omniroute_api_provider(
    ngx_omniroute_main_conf_t *omcf, const char *name, size_t len);
ngx_omniroute_connection_t *ngx_omniroute_api_connection(
    ngx_omniroute_main_conf_t *omcf, const char *name, size_t len);
json_t *ngx_omniroute_api_str(ngx_str_t *s);
json_t *ngx_omniroute_api_time(or_msec_t t);
ngx_int_t ngx_omniroute_api_arg(ngx_omniroute_api_call_t *call,
    const char *name, ngx_str_t *value);
ngx_int_t ngx_omniroute_api_text(ngx_omniroute_api_call_t *call,
    u_char *data, size_t len, const char *type);

ngx_int_t ngx_omniroute_api_add_header(ngx_http_request_t *r,
    const char *name, ngx_str_t *value);

/* state endpoints (ngx_omniroute_api_state.c) */
ngx_int_t ngx_omniroute_api_health(ngx_omniroute_api_call_t *call);
ngx_int_t ngx_omniroute_api_breaker_reset(ngx_omniroute_api_call_t *call);
ngx_int_t ngx_omniroute_api_cooldowns(ngx_omniroute_api_call_t *call);
ngx_int_t ngx_omniroute_api_cooldowns_clear(ngx_omniroute_api_call_t *call);
ngx_int_t ngx_omniroute_api_terminal_reset(ngx_omniroute_api_call_t *call);
ngx_int_t ngx_omniroute_api_lockouts(ngx_omniroute_api_call_t *call);
ngx_int_t ngx_omniroute_api_lockouts_clear(ngx_omniroute_api_call_t *call);

/* exclusive leases (ngx_omniroute_api_leases.c) */
ngx_int_t ngx_omniroute_api_leases(ngx_omniroute_api_call_t *call);
ngx_int_t ngx_omniroute_api_leases_revoke(ngx_omniroute_api_call_t *call);

/* budgets and rate limits of client keys (ngx_omniroute_api_budget.c) */
ngx_int_t ngx_omniroute_api_budgets(ngx_omniroute_api_call_t *call);
ngx_int_t ngx_omniroute_api_budgets_patch(ngx_omniroute_api_call_t *call);
ngx_int_t ngx_omniroute_api_budgets_reset(ngx_omniroute_api_call_t *call);

/* settings (ngx_omniroute_api_settings.c) */
ngx_int_t ngx_omniroute_api_settings(ngx_omniroute_api_call_t *call);
ngx_int_t ngx_omniroute_api_settings_patch(ngx_omniroute_api_call_t *call);

/* metrics (ngx_omniroute_metrics.c) */
extern const char  *ngx_omniroute_outcome_names[];

ngx_int_t ngx_omniroute_api_metrics(ngx_omniroute_api_call_t *call);
ngx_atomic_uint_t ngx_omniroute_api_requests(ngx_omniroute_api_call_t *call,
    ngx_uint_t outcome);

/* the status page's pictures (ngx_omniroute_api_series.c) */
ngx_int_t ngx_omniroute_api_timeseries(ngx_omniroute_api_call_t *call);

/* status page (ngx_omniroute_status_page.c) */
ngx_int_t ngx_omniroute_status_page_init(ngx_conf_t *cf);
ngx_int_t ngx_omniroute_api_status_page(ngx_omniroute_api_call_t *call);


#endif /* _NGX_OMNIROUTE_API_H_INCLUDED_ */
