
/*
 * Copyright (C) ngx_omniroute authors
 *
 * Module variables.  Subrequests share r->variables with the client
 * request, and the values change from one attempt to the next, so every
 * variable is NOCACHEABLE and reads the client request's context.  No
 * value carries a control byte (R-NAME-1): the client's model is checked
 * where the body is read; a value that would carry one anyway (an
 * operator's name) is not found, so it never splits a header line.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute_ctx.h"
#include "or_name.h"


typedef enum {
    NGX_OMNIROUTE_VAR_UPSTREAM_URL = 0,
    NGX_OMNIROUTE_VAR_CONNECTION,
    NGX_OMNIROUTE_VAR_PROVIDER,
    NGX_OMNIROUTE_VAR_UPSTREAM_MODEL,
    NGX_OMNIROUTE_VAR_MODEL,
    NGX_OMNIROUTE_VAR_ATTEMPTS,
    NGX_OMNIROUTE_VAR_FAILURE_REASON,
    NGX_OMNIROUTE_VAR_BREAKER_STATE,
    NGX_OMNIROUTE_VAR_TRAIL
} ngx_omniroute_var_e;


static ngx_int_t ngx_omniroute_variable(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);
static ngx_omniroute_attempt_t *ngx_omniroute_var_attempt(
    ngx_omniroute_ctx_t *ctx);
static const char *ngx_omniroute_failure_reason(ngx_omniroute_ctx_t *ctx);
static const char *ngx_omniroute_breaker_state(ngx_http_request_t *r,
    ngx_omniroute_candidate_t *cand);


static ngx_http_variable_t  ngx_omniroute_vars[] = {

    { ngx_string("omniroute_upstream_url"), NULL, ngx_omniroute_variable,
      NGX_OMNIROUTE_VAR_UPSTREAM_URL, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("omniroute_connection"), NULL, ngx_omniroute_variable,
      NGX_OMNIROUTE_VAR_CONNECTION, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("omniroute_provider"), NULL, ngx_omniroute_variable,
      NGX_OMNIROUTE_VAR_PROVIDER, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("omniroute_upstream_model"), NULL, ngx_omniroute_variable,
      NGX_OMNIROUTE_VAR_UPSTREAM_MODEL, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("omniroute_model"), NULL, ngx_omniroute_variable,
      NGX_OMNIROUTE_VAR_MODEL, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("omniroute_attempts"), NULL, ngx_omniroute_variable,
      NGX_OMNIROUTE_VAR_ATTEMPTS, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("omniroute_failure_reason"), NULL, ngx_omniroute_variable,
      NGX_OMNIROUTE_VAR_FAILURE_REASON, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("omniroute_breaker_state"), NULL, ngx_omniroute_variable,
      NGX_OMNIROUTE_VAR_BREAKER_STATE, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("omniroute_trail"), NULL, ngx_omniroute_variable,
      NGX_OMNIROUTE_VAR_TRAIL, NGX_HTTP_VAR_NOCACHEABLE, 0 },

      ngx_http_null_variable
};


ngx_int_t
ngx_omniroute_add_variables(ngx_conf_t *cf)
{
    ngx_http_variable_t  *var, *v;

    for (v = ngx_omniroute_vars; v->name.len; v++) {
        var = ngx_http_add_variable(cf, &v->name, v->flags);
        if (var == NULL) {
            return NGX_ERROR;
        }

        var->get_handler = v->get_handler;
        var->data = v->data;
    }

    return NGX_OK;
}


/* the running attempt, else the last one made */

static ngx_omniroute_attempt_t *
ngx_omniroute_var_attempt(ngx_omniroute_ctx_t *ctx)
{
    if (ctx->current) {
        return ctx->current;
    }

    if (ctx->attempts.nelts == 0) {
        return NULL;
    }

    return (ngx_omniroute_attempt_t *) ctx->attempts.elts
           + ctx->attempts.nelts - 1;
}


static ngx_int_t
ngx_omniroute_variable(ngx_http_request_t *r, ngx_http_variable_value_t *v,
    uintptr_t data)
{
    u_char                   *p;
    ngx_str_t                 s;
    const char               *name;
    ngx_omniroute_ctx_t      *ctx;
    ngx_omniroute_attempt_t  *a;

    ctx = ngx_http_get_module_ctx(r->main, ngx_http_omniroute_module);

    if (ctx == NULL) {
        v->not_found = 1;
        return NGX_OK;
    }

    a = ngx_omniroute_var_attempt(ctx);

    ngx_str_null(&s);

    switch (data) {

    case NGX_OMNIROUTE_VAR_UPSTREAM_URL:
        s = ctx->upstream_url;
        break;

    case NGX_OMNIROUTE_VAR_CONNECTION:
        if (a) {
            s = a->cand->conn->id;
        }
        break;

    case NGX_OMNIROUTE_VAR_PROVIDER:
        if (a) {
            s = a->cand->provider->name;
        }
        break;

    case NGX_OMNIROUTE_VAR_UPSTREAM_MODEL:
        if (a) {
            s = a->cand->target->model;
        }
        break;

    case NGX_OMNIROUTE_VAR_MODEL:
        s = ctx->model;
        break;

    case NGX_OMNIROUTE_VAR_FAILURE_REASON:
        name = ngx_omniroute_failure_reason(ctx);
        if (name) {
            s.data = (u_char *) name;
            s.len = ngx_strlen(name);
        }
        break;

    case NGX_OMNIROUTE_VAR_BREAKER_STATE:
        name = a ? ngx_omniroute_breaker_state(r, a->cand) : NULL;
        if (name) {
            s.data = (u_char *) name;
            s.len = ngx_strlen(name);
        }
        break;

    case NGX_OMNIROUTE_VAR_TRAIL:
        if (ctx->attempts.nelts
            && ngx_omniroute_stats_trail(r, ctx, &s) != NGX_OK)
        {
            return NGX_ERROR;
        }
        break;

    default: /* NGX_OMNIROUTE_VAR_ATTEMPTS */
        p = ngx_pnalloc(r->pool, NGX_INT_T_LEN);
        if (p == NULL) {
            return NGX_ERROR;
        }

        s.data = p;
        s.len = ngx_sprintf(p, "%ui", ctx->attempts.nelts) - p;
        break;
    }

    if (s.data == NULL || or_name_has_control((const char *) s.data, s.len))
    {
        v->not_found = 1;
        return NGX_OK;
    }

    v->data = s.data;
    v->len = s.len;
    v->valid = 1;
    v->no_cacheable = 1;
    v->not_found = 0;

    return NGX_OK;
}


/* the reason of the latest failed attempt, or NULL */

static const char *
ngx_omniroute_failure_reason(ngx_omniroute_ctx_t *ctx)
{
    ngx_uint_t                i;
    ngx_omniroute_attempt_t  *a;

    a = ctx->attempts.elts;

    for (i = ctx->attempts.nelts; i > 0; i--) {
        if (a[i - 1].verdict.reason != OR_REASON_NONE) {
            return or_reason_name(a[i - 1].verdict.reason);
        }
    }

    return NULL;
}


/* the provider's breaker state now ("closed" when it has no record) */

static const char *
ngx_omniroute_breaker_state(ngx_http_request_t *r,
    ngx_omniroute_candidate_t *cand)
{
    or_breaker_t                cb;
    ngx_omniroute_main_conf_t  *omcf;

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);

    if (omcf->shm_zone == NULL
        || ngx_omniroute_store_read(&omcf->store, NGX_OMNIROUTE_T_BREAKER,
                                    &cand->provider->name, &cb,
                                    sizeof(or_breaker_t))
           != NGX_OK)
    {
        return "closed";
    }

    switch (or_breaker_state(&cand->settings->breaker, &cb,
                             ngx_omniroute_now()))
    {

    case OR_CB_DEGRADED:
        return "degraded";

    case OR_CB_OPEN:
        return "open";

    case OR_CB_HALF_OPEN:
        return "half_open";

    default:
        return "closed";
    }
}
