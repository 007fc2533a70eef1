
/*
 * Copyright (C) ngx_omniroute authors
 *
 * ngx_http_omniroute_api_module: the "omniroute_api" location handler
 * (SPEC §12).  Routes a request below the configured prefix to an
 * endpoint, checks the bearer token (SHA-256 of both sides compared with
 * CRYPTO_memcmp), reads and parses a JSON body for write methods, runs
 * the endpoint and sends its JSON (or text) answer.  Every error is a
 * JSON document {"error":{"message","type","code"}}.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "ngx_omniroute_api.h"


#define NGX_OMNIROUTE_API_TOKEN_MIN    16
#define NGX_OMNIROUTE_API_TOKEN_MAX    4096


typedef struct {
    ngx_str_t                     path;
    ngx_uint_t                    auth;
    ngx_omniroute_api_handler_pt  get;
    ngx_omniroute_api_handler_pt  post;
    ngx_omniroute_api_handler_pt  patch;
    ngx_omniroute_api_handler_pt  del;
    ngx_str_t                     allow;
} ngx_omniroute_api_endpoint_t;


typedef struct {
    ngx_omniroute_api_handler_pt  handler;
} ngx_omniroute_api_ctx_t;


static void *ngx_omniroute_api_create_loc_conf(ngx_conf_t *cf);
static char *ngx_omniroute_api_merge_loc_conf(ngx_conf_t *cf, void *parent,
    void *child);
static char *ngx_omniroute_api(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_omniroute_api_token(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static ngx_chain_t *ngx_omniroute_api_chain(ngx_http_request_t *r,
    u_char *text, size_t len);
static ngx_int_t ngx_omniroute_api_hash(u_char *data, size_t len,
    u_char *md);
static char *ngx_omniroute_api_check_body_max(ngx_conf_t *cf, void *post,
    void *data);
static ngx_int_t ngx_omniroute_api_handler(ngx_http_request_t *r);
static ngx_omniroute_api_endpoint_t *ngx_omniroute_api_route(
    ngx_http_request_t *r, ngx_omniroute_api_loc_conf_t *alcf);
static ngx_int_t ngx_omniroute_api_authorized(ngx_http_request_t *r,
    ngx_omniroute_api_loc_conf_t *alcf, const char **reason);
static void ngx_omniroute_api_body_handler(ngx_http_request_t *r);
static ngx_int_t ngx_omniroute_api_body(ngx_http_request_t *r,
    ngx_str_t *body);
static ngx_int_t ngx_omniroute_api_answer(ngx_omniroute_api_call_t *call,
    ngx_int_t rc);
static ngx_int_t ngx_omniroute_api_run(ngx_http_request_t *r,
    ngx_omniroute_api_handler_pt handler, ngx_str_t *body);
static ngx_int_t ngx_omniroute_api_error(ngx_http_request_t *r,
    ngx_uint_t status, const char *code, const char *message);
static ngx_int_t ngx_omniroute_api_send(ngx_http_request_t *r,
    ngx_uint_t status, ngx_str_t *type, ngx_chain_t *out);
static const char *ngx_omniroute_api_error_type(ngx_uint_t status);
static void ngx_omniroute_api_redact(ngx_omniroute_main_conf_t *omcf,
    u_char *p, size_t len);


static ngx_conf_post_t  ngx_omniroute_api_body_max_bounds = {
    ngx_omniroute_api_check_body_max
};


static ngx_command_t  ngx_omniroute_api_commands[] = {

    { ngx_string("omniroute_api"),
      NGX_HTTP_LOC_CONF|NGX_CONF_NOARGS|NGX_CONF_TAKE1,
      ngx_omniroute_api,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("omniroute_api_token"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_omniroute_api_token,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("omniroute_api_max_body_size"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_size_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_omniroute_api_loc_conf_t, body_max),
      &ngx_omniroute_api_body_max_bounds },

      ngx_null_command
};


static ngx_http_module_t  ngx_omniroute_api_module_ctx = {
    NULL,                                  /* preconfiguration */
    ngx_omniroute_status_page_init,        /* postconfiguration */

    NULL,                                  /* create main configuration */
    NULL,                                  /* init main configuration */

    NULL,                                  /* create server configuration */
    NULL,                                  /* merge server configuration */

    ngx_omniroute_api_create_loc_conf,     /* create location configuration */
    ngx_omniroute_api_merge_loc_conf       /* merge location configuration */
};


ngx_module_t  ngx_http_omniroute_api_module = {
    NGX_MODULE_V1,
    &ngx_omniroute_api_module_ctx,         /* module context */
    ngx_omniroute_api_commands,            /* module directives */
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


static ngx_omniroute_api_endpoint_t  ngx_omniroute_api_endpoints[] = {

    { ngx_string("/api/monitoring/health"), 1,
      ngx_omniroute_api_health, NULL, NULL, NULL,
      ngx_string("GET, HEAD") },

    { ngx_string("/api/monitoring/timeseries"), 1,
      ngx_omniroute_api_timeseries, NULL, NULL, NULL,
      ngx_string("GET, HEAD") },

    { ngx_string("/api/resilience"), 1,
      ngx_omniroute_api_settings, NULL, ngx_omniroute_api_settings_patch,
      NULL, ngx_string("GET, HEAD, PATCH") },

    { ngx_string("/api/resilience/reset"), 1,
      NULL, ngx_omniroute_api_breaker_reset, NULL, NULL,
      ngx_string("POST") },

    { ngx_string("/api/resilience/cooldowns"), 1,
      ngx_omniroute_api_cooldowns, ngx_omniroute_api_cooldowns_clear, NULL,
      NULL, ngx_string("GET, HEAD, POST") },

    { ngx_string("/api/resilience/terminal-reset"), 1,
      NULL, ngx_omniroute_api_terminal_reset, NULL, NULL,
      ngx_string("POST") },

    { ngx_string("/api/resilience/model-cooldowns"), 1,
      ngx_omniroute_api_lockouts, NULL, NULL,
      ngx_omniroute_api_lockouts_clear,
      ngx_string("GET, HEAD, DELETE") },

    { ngx_string("/api/resilience/leases"), 1,
      ngx_omniroute_api_leases, NULL, NULL,
      ngx_omniroute_api_leases_revoke,
      ngx_string("GET, HEAD, DELETE") },

    { ngx_string("/api/keys/budgets"), 1,
      ngx_omniroute_api_budgets, NULL, ngx_omniroute_api_budgets_patch,
      NULL, ngx_string("GET, HEAD, PATCH") },

    { ngx_string("/api/keys/budgets/reset"), 1,
      NULL, ngx_omniroute_api_budgets_reset, NULL, NULL,
      ngx_string("POST") },

    { ngx_string("/metrics"), 1,
      ngx_omniroute_api_metrics, NULL, NULL, NULL,
      ngx_string("GET, HEAD") },

    { ngx_string("/status"), 0,
      ngx_omniroute_api_status_page, NULL, NULL, NULL,
      ngx_string("GET, HEAD") },

    { ngx_null_string, 0, NULL, NULL, NULL, NULL, ngx_null_string }
};


static ngx_str_t  ngx_omniroute_api_json_type =
    ngx_string("application/json");


static void *
ngx_omniroute_api_create_loc_conf(ngx_conf_t *cf)
{
    ngx_omniroute_api_loc_conf_t  *alcf;

    alcf = ngx_pcalloc(cf->pool, sizeof(ngx_omniroute_api_loc_conf_t));
    if (alcf == NULL) {
        return NULL;
    }

    /*
     * set by ngx_pcalloc():
     *
     *     alcf->enabled = 0;
     *     alcf->prefix = { 0, NULL };
     *     alcf->token_mode = NGX_OMNIROUTE_API_TOKEN_UNSET;
     *     alcf->token_hash = { 0 };
     */

    alcf->body_max = NGX_CONF_UNSET_SIZE;

    return alcf;
}


static char *
ngx_omniroute_api_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child)
{
    ngx_omniroute_api_loc_conf_t  *prev = parent;
    ngx_omniroute_api_loc_conf_t  *conf = child;

    ngx_conf_merge_size_value(conf->body_max, prev->body_max, 64 * 1024);

    if (conf->token_mode == NGX_OMNIROUTE_API_TOKEN_UNSET) {
        conf->token_mode = prev->token_mode;
        ngx_memcpy(conf->token_hash, prev->token_hash,
                   sizeof(conf->token_hash));
    }

    if (conf->enabled
        && conf->token_mode == NGX_OMNIROUTE_API_TOKEN_UNSET)
    {
        ngx_omniroute_conf_error(cf, &conf->file, conf->line,
                                 "\"omniroute_api\" needs \"omniroute_api_"
                                 "token env=NAME|file=PATH\" (or \"omniroute_"
                                 "api_token off\" to rely on allow/deny "
                                 "alone)");
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


static char *
ngx_omniroute_api(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_omniroute_api_loc_conf_t *alcf = conf;

    ngx_str_t                 *value, prefix;
    ngx_uint_t                 i;
    ngx_http_core_loc_conf_t  *clcf;
    ngx_omniroute_loc_conf_t  *olcf;

    if (alcf->enabled) {
        return "is duplicate";
    }

    value = cf->args->elts;

    ngx_str_null(&prefix);

    if (cf->args->nelts == 2) {
        prefix = value[1];

        if (ngx_strncmp(prefix.data, "prefix=", 7) == 0) {
            prefix.data += 7;
            prefix.len -= 7;
        }

        if (prefix.len == 0 || prefix.data[0] != '/') {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid prefix \"%V\" of \"omniroute_api\": "
                               "must start with \"/\"", &value[1]);
            return NGX_CONF_ERROR;
        }

        for (i = 0; i < prefix.len; i++) {
            if (prefix.data[i] <= ' ' || prefix.data[i] >= 0x7f
                || prefix.data[i] == '"' || prefix.data[i] == '\''
                || prefix.data[i] == '<' || prefix.data[i] == '>'
                || prefix.data[i] == '\\' || prefix.data[i] == '?'
                || prefix.data[i] == '#' || prefix.data[i] == '%')
            {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid prefix \"%V\" of "
                                   "\"omniroute_api\": use letters, digits "
                                   "and \"/-_.~\"", &value[1]);
                return NGX_CONF_ERROR;
            }
        }

        while (prefix.len && prefix.data[prefix.len - 1] == '/') {
            prefix.len--;
        }
    }

    alcf->enabled = 1;
    alcf->prefix = prefix;
    alcf->file = cf->conf_file->file.name;
    alcf->line = cf->conf_file->line;

    clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
    clcf->handler = ngx_omniroute_api_handler;

    /* nginx's own error pages here (deny: 403, ...) are JSON too */

    olcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_omniroute_module);
    olcf->json_errors = 1;

    if (ngx_omniroute_json_server(cf) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


static char *
ngx_omniroute_api_token(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_omniroute_api_loc_conf_t *alcf = conf;

    u_char     *env;
    ngx_str_t  *value, name, token;
    ngx_uint_t  i;

    if (alcf->token_mode != NGX_OMNIROUTE_API_TOKEN_UNSET) {
        return "is duplicate";
    }

    value = cf->args->elts;

    if (value[1].len == 3 && ngx_strncmp(value[1].data, "off", 3) == 0) {
        alcf->token_mode = NGX_OMNIROUTE_API_TOKEN_OFF;
        return NGX_CONF_OK;
    }

    if (ngx_strncmp(value[1].data, "env=", 4) == 0) {
        name.data = value[1].data + 4;
        name.len = value[1].len - 4;

        env = (name.len > 0) ? (u_char *) getenv((char *) name.data) : NULL;

        if (env == NULL || *env == '\0') {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "\"omniroute_api_token\": environment "
                               "variable \"%V\" is not set or empty", &name);
            return NGX_CONF_ERROR;
        }

        token.data = env;
        token.len = ngx_strlen(env);

    } else if (ngx_strncmp(value[1].data, "file=", 5) == 0) {
        name.data = value[1].data + 5;
        name.len = value[1].len - 5;

        /* only the token's hash is kept: the text stays in temp_pool */

        if (ngx_omniroute_read_secret(cf, cf->temp_pool, &name,
                                      NGX_OMNIROUTE_API_TOKEN_MAX,
                                      "\"omniroute_api_token\"", &token)
            != NGX_OK)
        {
            return NGX_CONF_ERROR;
        }

    } else {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid parameter \"%V\" of "
                           "\"omniroute_api_token\": expected env=NAME, "
                           "file=PATH or off", &value[1]);
        return NGX_CONF_ERROR;
    }

    /* the token itself is never written anywhere */

    if (token.len < NGX_OMNIROUTE_API_TOKEN_MIN
        || token.len > NGX_OMNIROUTE_API_TOKEN_MAX)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"omniroute_api_token\" from \"%V\" must be "
                           "16 to 4096 characters long", &value[1]);
        return NGX_CONF_ERROR;
    }

    for (i = 0; i < token.len; i++) {
        if (token.data[i] <= ' ' || token.data[i] >= 0x7f) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "\"omniroute_api_token\" from \"%V\" must be "
                               "printable ASCII without spaces", &value[1]);
            return NGX_CONF_ERROR;
        }
    }

    if (ngx_omniroute_api_hash(token.data, token.len, alcf->token_hash)
        != NGX_OK)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"omniroute_api_token\": SHA-256 failed");
        return NGX_CONF_ERROR;
    }

    alcf->token_mode = NGX_OMNIROUTE_API_TOKEN_SET;

    return NGX_CONF_OK;
}


/* omniroute_api_max_body_size: 1k..16m, at the directive's line */

static char *
ngx_omniroute_api_check_body_max(ngx_conf_t *cf, void *post, void *data)
{
    size_t     *sp = data;
    ngx_str_t  *value;

    if (*sp >= 1024 && *sp <= 16 * 1024 * 1024) {
        return NGX_CONF_OK;
    }

    value = cf->args->elts;

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "invalid value \"%V\": \"%V\" must be between 1k "
                       "and 16m", &value[1], &value[0]);

    return NGX_CONF_ERROR;
}


static ngx_int_t
ngx_omniroute_api_hash(u_char *data, size_t len, u_char *md)
{
    unsigned int  mdlen;

    mdlen = 32;

    if (EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL) != 1
        || mdlen != 32)
    {
        return NGX_ERROR;
    }

    return NGX_OK;
}


static ngx_int_t
ngx_omniroute_api_handler(ngx_http_request_t *r)
{
    ngx_int_t                      rc;
    const char                    *reason;
    ngx_omniroute_api_ctx_t       *ctx;
    ngx_omniroute_api_endpoint_t  *ep;
    ngx_omniroute_api_loc_conf_t  *alcf;
    ngx_omniroute_api_handler_pt   handler;

    if (r != r->main) {
        return NGX_DECLINED;
    }

    alcf = ngx_http_get_module_loc_conf(r, ngx_http_omniroute_api_module);

    ep = ngx_omniroute_api_route(r, alcf);

    if (ep == NULL || ep->auth) {
        if (ngx_omniroute_api_authorized(r, alcf, &reason) != NGX_OK) {
            rc = ngx_http_discard_request_body(r);
            if (rc != NGX_OK) {
                return rc;
            }

            return ngx_omniroute_api_error(r, NGX_HTTP_UNAUTHORIZED,
                                           "unauthorized", reason);
        }
    }

    if (ep == NULL) {
        rc = ngx_http_discard_request_body(r);
        if (rc != NGX_OK) {
            return rc;
        }

        return ngx_omniroute_api_error(r, NGX_HTTP_NOT_FOUND,
                                       "unknown_endpoint",
                                       "no such API endpoint");
    }

    switch (r->method) {

    case NGX_HTTP_GET:
    case NGX_HTTP_HEAD:
        handler = ep->get;
        break;

    case NGX_HTTP_POST:
        handler = ep->post;
        break;

    case NGX_HTTP_PATCH:
        handler = ep->patch;
        break;

    case NGX_HTTP_DELETE:
        handler = ep->del;
        break;

    default:
        handler = NULL;
        break;
    }

    if (handler == NULL) {
        rc = ngx_http_discard_request_body(r);
        if (rc != NGX_OK) {
            return rc;
        }

        if (ngx_omniroute_api_add_header(r, "Allow", &ep->allow) != NGX_OK) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        return ngx_omniroute_api_error(r, NGX_HTTP_NOT_ALLOWED,
                                       "method_not_allowed",
                                       "method not allowed on this "
                                       "endpoint");
    }

    if (r->method & (NGX_HTTP_GET|NGX_HTTP_HEAD)) {
        rc = ngx_http_discard_request_body(r);
        if (rc != NGX_OK) {
            return rc;
        }

        return ngx_omniroute_api_run(r, handler, NULL);
    }

    if (r->headers_in.content_length_n > (off_t) alcf->body_max) {
        rc = ngx_http_discard_request_body(r);
        if (rc != NGX_OK) {
            return rc;
        }

        return ngx_omniroute_api_error(r, NGX_HTTP_REQUEST_ENTITY_TOO_LARGE,
                                       "body_too_large",
                                       "request body exceeds "
                                       "omniroute_api_max_body_size");
    }

    ctx = ngx_pcalloc(r->pool, sizeof(ngx_omniroute_api_ctx_t));
    if (ctx == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ctx->handler = handler;
    ngx_http_set_ctx(r, ctx, ngx_http_omniroute_api_module);

    rc = ngx_http_read_client_request_body(r, ngx_omniroute_api_body_handler);

    if (rc >= NGX_HTTP_SPECIAL_RESPONSE) {
        return rc;
    }

    return NGX_DONE;
}


static ngx_omniroute_api_endpoint_t *
ngx_omniroute_api_route(ngx_http_request_t *r,
    ngx_omniroute_api_loc_conf_t *alcf)
{
    ngx_str_t                      path;
    ngx_omniroute_api_endpoint_t  *ep;

    path = r->uri;

    if (alcf->prefix.len) {
        if (path.len < alcf->prefix.len
            || ngx_strncmp(path.data, alcf->prefix.data, alcf->prefix.len)
               != 0)
        {
            return NULL;
        }

        path.data += alcf->prefix.len;
        path.len -= alcf->prefix.len;
    }

    if (path.len > 1 && path.data[path.len - 1] == '/') {
        path.len--;
    }

    for (ep = ngx_omniroute_api_endpoints; ep->path.len; ep++) {
        if (ep->path.len == path.len
            && ngx_strncmp(ep->path.data, path.data, path.len) == 0)
        {
            return ep;
        }
    }

    return NULL;
}


static ngx_int_t
ngx_omniroute_api_authorized(ngx_http_request_t *r,
    ngx_omniroute_api_loc_conf_t *alcf, const char **reason)
{
    u_char            md[32];
    ngx_str_t         v;
    ngx_table_elt_t  *h;

    if (alcf->token_mode == NGX_OMNIROUTE_API_TOKEN_OFF) {
        return NGX_OK;
    }

    h = r->headers_in.authorization;

    if (h == NULL) {
        *reason = "missing bearer token";
        return NGX_DECLINED;
    }

    v = h->value;

    if (v.len < 7 || ngx_strncasecmp(v.data, (u_char *) "Bearer ", 7) != 0) {
        *reason = "the Authorization header is not a bearer token";
        return NGX_DECLINED;
    }

    v.data += 7;
    v.len -= 7;

    while (v.len && v.data[0] == ' ') {
        v.data++;
        v.len--;
    }

    while (v.len && v.data[v.len - 1] == ' ') {
        v.len--;
    }

    if (ngx_omniroute_api_hash(v.data, v.len, md) != NGX_OK
        || CRYPTO_memcmp(md, alcf->token_hash, sizeof(md)) != 0)
    {
        ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                      "omniroute api: invalid bearer token");
        *reason = "invalid bearer token";
        return NGX_DECLINED;
    }

    return NGX_OK;
}


static void
ngx_omniroute_api_body_handler(ngx_http_request_t *r)
{
    ngx_int_t                 rc;
    ngx_str_t                 body;
    ngx_omniroute_api_ctx_t  *ctx;

    ctx = ngx_http_get_module_ctx(r, ngx_http_omniroute_api_module);

    rc = ngx_omniroute_api_body(r, &body);

    if (rc == NGX_DECLINED) {
        rc = ngx_omniroute_api_error(r, NGX_HTTP_REQUEST_ENTITY_TOO_LARGE,
                                     "body_too_large",
                                     "request body exceeds "
                                     "omniroute_api_max_body_size");

    } else if (rc == NGX_OK) {
        rc = ngx_omniroute_api_run(r, ctx->handler, &body);

    } else {
        rc = NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ngx_http_finalize_request(r, rc);
}


/* the request body as one piece; NGX_DECLINED when it is too large */

static ngx_int_t
ngx_omniroute_api_body(ngx_http_request_t *r, ngx_str_t *body)
{
    ngx_omniroute_api_loc_conf_t  *alcf;

    alcf = ngx_http_get_module_loc_conf(r, ngx_http_omniroute_api_module);

    return ngx_omniroute_body_text(r, (off_t) alcf->body_max, body);
}


static ngx_int_t
ngx_omniroute_api_run(ngx_http_request_t *r,
    ngx_omniroute_api_handler_pt handler, ngx_str_t *body)
{
    ngx_int_t                   rc;
    json_error_t                err;
    ngx_omniroute_api_call_t   *call;

    call = ngx_pcalloc(r->pool, sizeof(ngx_omniroute_api_call_t));
    if (call == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    call->r = r;
    call->omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);
    call->alcf = ngx_http_get_module_loc_conf(r,
                                              ngx_http_omniroute_api_module);
    call->now = ngx_omniroute_now();
    call->status = NGX_HTTP_OK;

    if (body && body->len) {
        call->body = json_loadb((const char *) body->data, body->len,
                                JSON_REJECT_DUPLICATES, &err);

        if (call->body == NULL) {
            (void) ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                          "invalid_json",
                                          "malformed JSON at line %d "
                                          "column %d: %s", err.line,
                                          err.column, err.text);
            return ngx_omniroute_api_answer(call, NGX_ERROR);
        }

        if (!json_is_object(call->body)) {
            (void) ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                          "invalid_json",
                                          "the body must be a JSON object");
            return ngx_omniroute_api_answer(call, NGX_ERROR);
        }
    }

    rc = handler(call);

    if (rc == NGX_DONE) {
        /* answered later, by ngx_omniroute_api_finish() */
        r->main->count++;
        return NGX_DONE;
    }

    return ngx_omniroute_api_answer(call, rc);
}


void
ngx_omniroute_api_finish(ngx_omniroute_api_call_t *call, ngx_int_t rc)
{
    ngx_http_finalize_request(call->r, ngx_omniroute_api_answer(call, rc));
}


static ngx_int_t
ngx_omniroute_api_answer(ngx_omniroute_api_call_t *call, ngx_int_t rc)
{
    json_t                     *doc;
    ngx_str_t                   text;
    ngx_chain_t                *out;
    ngx_http_request_t         *r;

    r = call->r;

    if (rc != NGX_OK) {
        goto failed;
    }

    if (call->body) {
        json_decref(call->body);
        call->body = NULL;
    }

    if (call->text) {
        if (!call->text->buf->in_file && !call->no_redact) {
            ngx_omniroute_api_redact(call->omcf, call->text->buf->pos,
                                     call->text->buf->last
                                     - call->text->buf->pos);
        }

        return ngx_omniroute_api_send(r, call->status, &call->content_type,
                                      call->text);
    }

    if (call->out == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    doc = call->out;
    call->out = NULL;

    if (ngx_omniroute_json_text(r->pool, doc, &text) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ngx_omniroute_api_redact(call->omcf, text.data, text.len);

    out = ngx_omniroute_api_chain(r, text.data, text.len);
    if (out == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return ngx_omniroute_api_send(r, call->status,
                                  &ngx_omniroute_api_json_type, out);

failed:

    if (call->body) {
        json_decref(call->body);
    }

    if (call->out) {
        json_decref(call->out);
    }

    if (call->code == NULL) {
        return ngx_omniroute_api_error(r, NGX_HTTP_INTERNAL_SERVER_ERROR,
                                       "internal_error",
                                       "the request could not be completed");
    }

    return ngx_omniroute_api_error(r, call->status, call->code,
                                   (const char *) call->message);
}


static ngx_int_t
ngx_omniroute_api_error(ngx_http_request_t *r, ngx_uint_t status,
    const char *code, const char *message)
{
    json_t       *doc;
    ngx_str_t     v, text;
    ngx_chain_t  *out;

    doc = json_pack("{s:{s:s,s:s,s:s}}", "error", "message", message,
                    "type", ngx_omniroute_api_error_type(status),
                    "code", code);
    if (ngx_omniroute_json_text(r->pool, doc, &text) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (status == NGX_HTTP_UNAUTHORIZED) {
        ngx_str_set(&v, "Bearer realm=\"omniroute\"");

        if (ngx_omniroute_api_add_header(r, "WWW-Authenticate", &v)
            != NGX_OK)
        {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
    }

    out = ngx_omniroute_api_chain(r, text.data, text.len);
    if (out == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return ngx_omniroute_api_send(r, status, &ngx_omniroute_api_json_type,
                                  out);
}


static ngx_int_t
ngx_omniroute_api_send(ngx_http_request_t *r, ngx_uint_t status,
    ngx_str_t *type, ngx_chain_t *out)
{
    off_t         len;
    ngx_int_t     rc;
    ngx_str_t     v;
    ngx_chain_t  *cl;

    len = 0;

    for (cl = out; cl; cl = cl->next) {
        len += ngx_buf_size(cl->buf);
    }

    r->headers_out.status = status;
    r->headers_out.content_length_n = len;
    r->headers_out.content_type = *type;
    r->headers_out.content_type_len = type->len;
    r->headers_out.content_type_lowcase = NULL;

    ngx_str_set(&v, "no-store");

    if (ngx_omniroute_api_add_header(r, "Cache-Control", &v) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ngx_str_set(&v, "nosniff");

    if (ngx_omniroute_api_add_header(r, "X-Content-Type-Options", &v)
        != NGX_OK)
    {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    rc = ngx_http_send_header(r);

    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }

    return ngx_http_output_filter(r, out);
}


/* a response header with a static name */

ngx_int_t
ngx_omniroute_api_add_header(ngx_http_request_t *r, const char *name,
    ngx_str_t *value)
{
    ngx_str_t  key;

    key.data = (u_char *) name;
    key.len = ngx_strlen(name);

    return ngx_omniroute_add_header(r, &key, value);
}


static const char *
ngx_omniroute_api_error_type(ngx_uint_t status)
{
    switch (status) {

    case NGX_HTTP_UNAUTHORIZED:
        return "authentication_error";

    case NGX_HTTP_NOT_FOUND:
        return "not_found_error";

    default:
        return (status >= NGX_HTTP_INTERNAL_SERVER_ERROR)
               ? "server_error" : "invalid_request_error";
    }
}


/*
 * Record an error for the call; the message is formatted with nginx's
 * ngx_vslprintf() and reduced to printable ASCII (it may quote client
 * input).  Returns NGX_ERROR so that endpoints can "return fail(...)".
 */

ngx_int_t
ngx_omniroute_api_fail(ngx_omniroute_api_call_t *call, ngx_uint_t status,
    const char *code, const char *fmt, ...)
{
    u_char   *p, *last;
    va_list   args;

    va_start(args, fmt);
    last = ngx_vslprintf(call->message,
                         call->message + NGX_OMNIROUTE_API_MESSAGE_MAX - 1,
                         fmt, args);
    va_end(args);

    *last = '\0';

    for (p = call->message; p < last; p++) {
        if (*p < ' ' || *p >= 0x7f) {
            *p = '?';
        }
    }

    ngx_omniroute_api_redact(call->omcf, call->message,
                             last - call->message);

    call->status = status;
    call->code = code;

    return NGX_ERROR;
}


/*
 * A last line of defence for R-CONF-6: any configured credential (8 bytes
 * or longer) found in an answer, e.g. quoted back from a client's request
 * in an error message, is overwritten with "*" (same length, so JSON stays
 * valid and lengths stay right).
 */

static void
ngx_omniroute_api_redact(ngx_omniroute_main_conf_t *omcf, u_char *p,
    size_t len)
{
    u_char                      *hit, *end;
    ngx_uint_t                   i;
    ngx_omniroute_connection_t  *c;

    if (omcf == NULL) {
        return;
    }

    c = omcf->connections.elts;
    end = p + len;

    for (i = 0; i < omcf->connections.nelts; i++) {
        if (c[i].credential.len < 8) {
            continue;
        }

        hit = p;

        for ( ;; ) {
            hit = memmem(hit, end - hit, c[i].credential.data,
                         c[i].credential.len);
            if (hit == NULL) {
                break;
            }

            ngx_memset(hit, '*', c[i].credential.len);
            hit += c[i].credential.len;
        }
    }
}


/* unknown members of obj are an error naming the first one */

ngx_int_t
ngx_omniroute_api_fields(ngx_omniroute_api_call_t *call, json_t *obj,
    const char *where, const char **allowed)
{
    json_t       *v;
    const char   *key, **a;

    json_object_foreach(obj, key, v) {

        for (a = allowed; *a; a++) {
            if (ngx_strcmp(key, *a) == 0) {
                break;
            }
        }

        if (*a == NULL) {
            return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                          "unknown_field",
                                          "unknown field \"%s\"%s%s",
                                          key, where ? " in " : "",
                                          where ? where : "");
        }
    }

    return NGX_OK;
}


ngx_omniroute_provider_t *
ngx_omniroute_api_provider(ngx_omniroute_main_conf_t *omcf,
    const char *name, size_t len)
{
    ngx_uint_t                 i;
    ngx_omniroute_provider_t  *p;

    p = omcf->providers.elts;

    for (i = 0; i < omcf->providers.nelts; i++) {
        if (p[i].name.len == len
            && ngx_strncmp(p[i].name.data, name, len) == 0)
        {
            return &p[i];
        }
    }

    return NULL;
}


ngx_omniroute_connection_t *
ngx_omniroute_api_connection(ngx_omniroute_main_conf_t *omcf,
    const char *name, size_t len)
{
    ngx_uint_t                   i;
    ngx_omniroute_connection_t  *c;

    c = omcf->connections.elts;

    for (i = 0; i < omcf->connections.nelts; i++) {
        if (c[i].id.len == len && ngx_strncmp(c[i].id.data, name, len) == 0)
        {
            return &c[i];
        }
    }

    return NULL;
}


json_t *
ngx_omniroute_api_str(ngx_str_t *s)
{
    return json_stringn((const char *) s->data, s->len);
}


/* an absolute time in ms as an integer, or null for "none" */

json_t *
ngx_omniroute_api_time(or_msec_t t)
{
    return (t > 0) ? json_integer(t) : json_null();
}


/* a query argument, unescaped; NGX_DECLINED when absent */

ngx_int_t
ngx_omniroute_api_arg(ngx_omniroute_api_call_t *call, const char *name,
    ngx_str_t *value)
{
    u_char     *dst, *src;
    ngx_str_t   raw;

    if (ngx_http_arg(call->r, (u_char *) name, ngx_strlen(name), &raw)
        != NGX_OK)
    {
        return NGX_DECLINED;
    }

    dst = ngx_pnalloc(call->r->pool, raw.len + 1);
    if (dst == NULL) {
        return NGX_ERROR;
    }

    value->data = dst;
    src = raw.data;

    ngx_unescape_uri(&dst, &src, raw.len, 0);

    value->len = dst - value->data;

    return NGX_OK;
}


/* a text response of static or pool memory */

ngx_int_t
ngx_omniroute_api_text(ngx_omniroute_api_call_t *call, u_char *data,
    size_t len, const char *type)
{
    ngx_buf_t    *b;
    ngx_chain_t  *out;

    b = ngx_calloc_buf(call->r->pool);
    out = ngx_alloc_chain_link(call->r->pool);

    if (b == NULL || out == NULL) {
        return NGX_ERROR;
    }

    b->pos = data;
    b->last = data + len;
    b->memory = 1;
    b->last_buf = 1;
    b->last_in_chain = 1;

    out->buf = b;
    out->next = NULL;

    call->text = out;
    call->content_type.data = (u_char *) type;
    call->content_type.len = ngx_strlen(type);

    return NGX_OK;
}


/* text as the response body: one last buffer */

static ngx_chain_t *
ngx_omniroute_api_chain(ngx_http_request_t *r, u_char *text, size_t len)
{
    ngx_buf_t    *b;
    ngx_chain_t  *out;

    b = ngx_calloc_buf(r->pool);
    out = ngx_alloc_chain_link(r->pool);

    if (b == NULL || out == NULL) {
        return NULL;
    }

    b->pos = text;
    b->last = text + len;
    b->memory = 1;
    b->last_buf = 1;
    b->last_in_chain = 1;

    out->buf = b;
    out->next = NULL;

    return out;
}
