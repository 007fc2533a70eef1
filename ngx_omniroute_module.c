
/*
 * Copyright (C) ngx_omniroute authors
 *
 * The module: directives, configuration create/merge and hooks.  Wiring
 * only; the request path lives in src/ngx, the policy in src/core.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute_ctx.h"
#include "ngx_omniroute_keys.h"
#include "ngx_omniroute_budget_store.h"


static ngx_int_t ngx_omniroute_preconfiguration(ngx_conf_t *cf);
static ngx_int_t ngx_omniroute_postconfiguration(ngx_conf_t *cf);
static void *ngx_omniroute_create_main_conf(ngx_conf_t *cf);
static void *ngx_omniroute_create_loc_conf(ngx_conf_t *cf);
static char *ngx_omniroute_merge_loc_conf(ngx_conf_t *cf, void *parent,
    void *child);


/* ngx_conf_num_bounds_t with a message that names the directive */
typedef struct {
    ngx_conf_post_handler_pt      post_handler;
    ngx_int_t                     low;
    ngx_int_t                     high;
} ngx_omniroute_num_bounds_t;


static char *ngx_omniroute_check_num_bounds(ngx_conf_t *cf, void *post,
    void *data);
static char *ngx_omniroute_set_msec_off(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_omniroute_check_size_min(ngx_conf_t *cf, void *post,
    void *data);


static ngx_omniroute_num_bounds_t  ngx_omniroute_attempts_bounds = {
    ngx_omniroute_check_num_bounds, 1, 100
};

static ngx_conf_post_t  ngx_omniroute_error_body_min = {
    ngx_omniroute_check_size_min
};


static ngx_command_t  ngx_omniroute_commands[] = {

    { ngx_string("omniroute_zone"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_omniroute_zone,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("omniroute_provider"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_2MORE,
      ngx_omniroute_provider,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("omniroute_connection"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_2MORE,
      ngx_omniroute_connection,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("omniroute_model"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE2,
      ngx_omniroute_model,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("omniroute_combo"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_2MORE,
      ngx_omniroute_model,
      NGX_HTTP_MAIN_CONF_OFFSET,
      1,
      NULL },

    { ngx_string("omniroute_emergency_fallback"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_omniroute_emergency_fallback,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("omniroute_model_lockout"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_1MORE,
      ngx_omniroute_model_lockout,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("omniroute_error_rule"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_2MORE,
      ngx_omniroute_error_rule,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("omniroute_error_default"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_2MORE,
      ngx_omniroute_error_rule,
      NGX_HTTP_MAIN_CONF_OFFSET,
      1,
      NULL },

    { ngx_string("omniroute_restate"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_2MORE,
      ngx_omniroute_restate,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("omniroute_pass"),
      NGX_HTTP_LOC_CONF|NGX_CONF_NOARGS|NGX_CONF_TAKE1,
      ngx_omniroute_pass,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("omniroute_max_attempts"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_omniroute_loc_conf_t, max_attempts),
      &ngx_omniroute_attempts_bounds },

    { ngx_string("omniroute_error_body_buffer_size"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_size_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_omniroute_loc_conf_t, error_body_max),
      &ngx_omniroute_error_body_min },

    { ngx_string("omniroute_session_affinity"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_omniroute_conf_set_time,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_omniroute_loc_conf_t, session_affinity),
      NULL },

    { ngx_string("omniroute_attempt_trail"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_FLAG,
      ngx_conf_set_flag_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_omniroute_loc_conf_t, attempt_trail),
      NULL },

    { ngx_string("omniroute_models"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_omniroute_models,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("omniroute_cache_affinity"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_omniroute_conf_set_time,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_omniroute_loc_conf_t, cache_affinity),
      NULL },

    { ngx_string("omniroute_resend_after_timeout"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_FLAG,
      ngx_conf_set_flag_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_omniroute_loc_conf_t, resend_after_timeout),
      NULL },

    { ngx_string("omniroute_stream_probe"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_FLAG,
      ngx_conf_set_flag_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_omniroute_loc_conf_t, stream_probe),
      NULL },

    { ngx_string("omniroute_stream_probe_timeout"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_msec_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_omniroute_loc_conf_t, stream_probe_timeout),
      NULL },

    { ngx_string("omniroute_stream_keepalive"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_omniroute_set_msec_off,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_omniroute_loc_conf_t, stream_keepalive),
      NULL },

    { ngx_string("omniroute_stream_keepalive_interval"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_msec_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_omniroute_loc_conf_t, stream_keepalive_interval),
      NULL },

    /* client keys and exclusive leases (conf/ngx_omniroute_keys_conf.c) */

    { ngx_string("omniroute_client_key"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_2MORE,
      ngx_omniroute_client_key,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("omniroute_client_keys"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_1MORE,
      ngx_omniroute_client_keys,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("omniroute_session_leases"),
      NGX_HTTP_LOC_CONF|NGX_CONF_NOARGS,
      ngx_omniroute_session_leases,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("omniroute_lease_ttl"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE12,
      ngx_omniroute_lease_ttl,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("omniroute_client_key_limit"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_2MORE,
      ngx_omniroute_client_key_limit,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("omniroute_client_key_limit_nodes"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_omniroute_client_key_limit_nodes,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("omniroute_client_key_brake"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE12,
      ngx_omniroute_client_key_brake,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

      ngx_null_command
};


static ngx_http_module_t  ngx_omniroute_module_ctx = {
    ngx_omniroute_preconfiguration,        /* preconfiguration */
    ngx_omniroute_postconfiguration,       /* postconfiguration */

    ngx_omniroute_create_main_conf,        /* create main configuration */
    ngx_omniroute_init_main_conf,          /* init main configuration */

    NULL,                                  /* create server configuration */
    NULL,                                  /* merge server configuration */

    ngx_omniroute_create_loc_conf,         /* create location configuration */
    ngx_omniroute_merge_loc_conf           /* merge location configuration */
};


ngx_module_t  ngx_http_omniroute_module = {
    NGX_MODULE_V1,
    &ngx_omniroute_module_ctx,             /* module context */
    ngx_omniroute_commands,                /* module directives */
    NGX_HTTP_MODULE,                       /* module type */
    NULL,                                  /* init master */
    NULL,                                  /* init module */
    NULL,                                  /* init process */
    NULL,                                  /* init thread */
    NULL,                                  /* exit thread */
    NULL,                                  /* exit process */
    NULL,                                  /* exit master */
    NGX_MODULE_V1_PADDING
};


static ngx_int_t
ngx_omniroute_preconfiguration(ngx_conf_t *cf)
{
    if (ngx_omniroute_client_key_add_variables(cf) != NGX_OK) {
        return NGX_ERROR;
    }

    return ngx_omniroute_add_variables(cf);
}


static ngx_int_t
ngx_omniroute_postconfiguration(ngx_conf_t *cf)
{
    if (ngx_omniroute_zone_default(cf) != NGX_OK
        || ngx_omniroute_client_key_init(cf) != NGX_OK
        || ngx_omniroute_check_conf(cf) != NGX_OK
        || ngx_omniroute_filter_init(cf) != NGX_OK
        || ngx_omniroute_models_init(cf) != NGX_OK)
    {
        return NGX_ERROR;
    }

    return ngx_omniroute_stats_init(cf);
}


static void *
ngx_omniroute_create_main_conf(ngx_conf_t *cf)
{
    ngx_omniroute_main_conf_t  *omcf;

    omcf = ngx_pcalloc(cf->pool, sizeof(ngx_omniroute_main_conf_t));
    if (omcf == NULL) {
        return NULL;
    }

    /*
     * set by ngx_pcalloc():
     *
     *     omcf->shm_zone = NULL;
     */

    if (ngx_array_init(&omcf->providers, cf->pool, 4,
                       sizeof(ngx_omniroute_provider_t))
        != NGX_OK
        || ngx_array_init(&omcf->connections, cf->pool, 8,
                          sizeof(ngx_omniroute_connection_t))
           != NGX_OK
        || ngx_array_init(&omcf->models, cf->pool, 8,
                          sizeof(ngx_omniroute_model_t))
           != NGX_OK
        || ngx_array_init(&omcf->rules, cf->pool, 4,
                          sizeof(ngx_omniroute_rule_conf_t))
           != NGX_OK
        || ngx_array_init(&omcf->passes, cf->pool, 2,
                          sizeof(ngx_omniroute_pass_conf_t))
           != NGX_OK
        || ngx_array_init(&omcf->json_servers, cf->pool, 2,
                          sizeof(ngx_http_core_srv_conf_t *))
           != NGX_OK)
    {
        return NULL;
    }

    or_lockout_conf_init(&omcf->lockout);

    return omcf;
}


static void *
ngx_omniroute_create_loc_conf(ngx_conf_t *cf)
{
    ngx_omniroute_loc_conf_t  *olcf;

    olcf = ngx_pcalloc(cf->pool, sizeof(ngx_omniroute_loc_conf_t));
    if (olcf == NULL) {
        return NULL;
    }

    /*
     * set by ngx_pcalloc():
     *
     *     olcf->pass_uri = { 0, NULL };
     *     olcf->prefix = { 0, NULL };
     *     olcf->models_pass = { 0, NULL };
     */

    olcf->max_attempts = NGX_CONF_UNSET;
    olcf->error_body_max = NGX_CONF_UNSET_SIZE;
    olcf->stream_probe = NGX_CONF_UNSET;
    olcf->stream_probe_timeout = NGX_CONF_UNSET_MSEC;
    olcf->stream_keepalive = NGX_CONF_UNSET_MSEC;
    olcf->stream_keepalive_interval = NGX_CONF_UNSET_MSEC;
    olcf->session_affinity = NGX_CONF_UNSET_MSEC;
    olcf->attempt_trail = NGX_CONF_UNSET;
    olcf->models = NGX_CONF_UNSET_UINT;
    olcf->models_provider = NGX_CONF_UNSET;
    olcf->cache_affinity = NGX_CONF_UNSET_MSEC;
    olcf->resend_after_timeout = NGX_CONF_UNSET;

    return olcf;
}


static char *
ngx_omniroute_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child)
{
    ngx_omniroute_loc_conf_t  *prev = parent;
    ngx_omniroute_loc_conf_t  *conf = child;

    ngx_conf_merge_value(conf->max_attempts, prev->max_attempts, 3);
    ngx_conf_merge_size_value(conf->error_body_max, prev->error_body_max,
                              64 * 1024);
    ngx_conf_merge_value(conf->stream_probe, prev->stream_probe, 1);
    ngx_conf_merge_msec_value(conf->stream_probe_timeout,
                              prev->stream_probe_timeout, 60000);
    ngx_conf_merge_msec_value(conf->stream_keepalive,
                              prev->stream_keepalive, 2000);
    ngx_conf_merge_msec_value(conf->stream_keepalive_interval,
                              prev->stream_keepalive_interval, 5000);
    ngx_conf_merge_msec_value(conf->session_affinity, prev->session_affinity,
                              0);
    ngx_conf_merge_value(conf->attempt_trail, prev->attempt_trail, 0);
    ngx_conf_merge_msec_value(conf->cache_affinity, prev->cache_affinity, 0);
    ngx_conf_merge_value(conf->resend_after_timeout,
                         prev->resend_after_timeout, 0);

    if (conf->stream_keepalive_interval < 100) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid value \"%M\": "
                           "\"omniroute_stream_keepalive_interval\" must be "
                           "at least 100ms", conf->stream_keepalive_interval);
        return NGX_CONF_ERROR;
    }

    if (ngx_omniroute_keys_merge(cf, prev, conf) != NGX_CONF_OK) {
        return NGX_CONF_ERROR;
    }

    if (ngx_omniroute_models_merge(cf, prev, conf) != NGX_CONF_OK) {
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


static char *
ngx_omniroute_check_num_bounds(ngx_conf_t *cf, void *post, void *data)
{
    ngx_omniroute_num_bounds_t *bounds = post;

    ngx_int_t  *np = data;
    ngx_str_t  *value;

    if (*np >= bounds->low && *np <= bounds->high) {
        return NGX_CONF_OK;
    }

    value = cf->args->elts;

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "invalid value \"%i\" of \"%V\": must be between %i "
                       "and %i", *np, &value[0], bounds->low, bounds->high);

    return NGX_CONF_ERROR;
}


/* omniroute_error_body_buffer_size: at least 1k, at the directive's line */

static char *
ngx_omniroute_check_size_min(ngx_conf_t *cf, void *post, void *data)
{
    size_t     *sp = data;
    ngx_str_t  *value;

    if (*sp >= 1024) {
        return NGX_CONF_OK;
    }

    value = cf->args->elts;

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "invalid value \"%V\": \"%V\" must be at least 1k",
                       &value[1], &value[0]);

    return NGX_CONF_ERROR;
}


/* a time, or "off" (0) */

static char *
ngx_omniroute_set_msec_off(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    char  *p = conf;

    ngx_str_t   *value;
    ngx_msec_t  *msp;

    msp = (ngx_msec_t *) (p + cmd->offset);

    if (*msp != NGX_CONF_UNSET_MSEC) {
        return "is duplicate";
    }

    value = cf->args->elts;

    if (value[1].len == 3 && ngx_strncmp(value[1].data, "off", 3) == 0) {
        *msp = 0;
        return NGX_CONF_OK;
    }

    return ngx_conf_set_msec_slot(cf, cmd, conf);
}
