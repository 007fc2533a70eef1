
/*
 * Copyright (C) ngx_omniroute authors
 *
 * Directive handlers: the state zone, providers, connections, models,
 * combos and omniroute_pass.  Names are resolved in init_main_conf, so
 * directives may appear in any order inside http {}; the models' routes
 * are built there too (ngx_omniroute_routes.c).
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute.h"
#include "ngx_omniroute_keys.h"
#include "ngx_omniroute_budget_store.h"


#define NGX_OMNIROUTE_KEY_FILE_MAX    8192
#define NGX_OMNIROUTE_CONN_RESET_MAX  ((int64_t) 30 * 86400 * 1000)


static ngx_int_t ngx_omniroute_zone_add(ngx_conf_t *cf,
    ngx_omniroute_main_conf_t *omcf, ngx_str_t *name, size_t size);
static ngx_int_t ngx_omniroute_parse_url(ngx_conf_t *cf,
    ngx_omniroute_provider_t *p, ngx_str_t *url);
static ngx_int_t ngx_omniroute_parse_auth(ngx_conf_t *cf,
    ngx_omniroute_provider_t *p, ngx_str_t *value);
static ngx_int_t ngx_omniroute_parse_header(ngx_conf_t *cf,
    ngx_omniroute_provider_t *p, ngx_str_t *value);
static ngx_int_t ngx_omniroute_parse_model_caps(ngx_conf_t *cf,
    ngx_omniroute_connection_t *c, ngx_str_t *arg);
static ngx_int_t ngx_omniroute_parse_models(ngx_conf_t *cf,
    ngx_omniroute_connection_t *c, ngx_str_t *arg);
static ngx_int_t ngx_omniroute_parse_org(ngx_conf_t *cf,
    ngx_omniroute_connection_t *c, ngx_str_t *arg);
static ngx_int_t ngx_omniroute_list_item(u_char **pp, u_char *last,
    ngx_str_t *item);
static ngx_int_t ngx_omniroute_valid_name(ngx_str_t *name);
static ngx_int_t ngx_omniroute_valid_token(ngx_str_t *name);
static ngx_int_t ngx_omniroute_valid_model(ngx_str_t *name);
static ngx_int_t ngx_omniroute_build_auth_value(ngx_conf_t *cf,
    ngx_omniroute_provider_t *p, ngx_omniroute_connection_t *c);


char *
ngx_omniroute_zone(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_omniroute_main_conf_t *omcf = conf;

    u_char      *p;
    ssize_t      size;
    ngx_str_t   *value, name, s;

    if (omcf->shm_zone) {
        return "is duplicate";
    }

    value = cf->args->elts;

    if (ngx_strncmp(value[1].data, "zone=", 5) != 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid parameter \"%V\", expected "
                           "\"zone=name:size\"", &value[1]);
        return NGX_CONF_ERROR;
    }

    name.data = value[1].data + 5;
    p = (u_char *) ngx_strchr(name.data, ':');

    if (p == NULL || p == name.data) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid zone \"%V\", expected \"zone=name:size\"",
                           &value[1]);
        return NGX_CONF_ERROR;
    }

    name.len = p - name.data;

    s.data = p + 1;
    s.len = value[1].data + value[1].len - s.data;

    size = ngx_parse_size(&s);

    if (size == NGX_ERROR) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid zone size \"%V\": expected a size "
                           "such as 16m", &value[1]);
        return NGX_CONF_ERROR;
    }

    if (size < (ssize_t) (8 * ngx_pagesize)) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "zone \"%V\" is too small: it must be at least "
                           "%uzk", &value[1], 8 * ngx_pagesize / 1024);
        return NGX_CONF_ERROR;
    }

    if (ngx_omniroute_zone_add(cf, omcf, &name, size) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


/*
 * Without "omniroute_zone" the state lives in a built-in zone: a gateway
 * without shared state would have no breaker, cooldown or lockout at all.
 * Called from postconfiguration, after every init_main_conf: the Redis
 * mirror, which requires a declared zone, still sees none.
 */

ngx_int_t
ngx_omniroute_zone_default(ngx_conf_t *cf)
{
    ngx_str_t                   name = ngx_string(NGX_OMNIROUTE_ZONE_NAME);
    ngx_omniroute_main_conf_t  *omcf;

    omcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_omniroute_module);

    if (omcf->shm_zone) {
        return NGX_OK;
    }

    return ngx_omniroute_zone_add(cf, omcf, &name, NGX_OMNIROUTE_ZONE_SIZE);
}


static ngx_int_t
ngx_omniroute_zone_add(ngx_conf_t *cf, ngx_omniroute_main_conf_t *omcf,
    ngx_str_t *name, size_t size)
{
    omcf->shm_zone = ngx_shared_memory_add(cf, name, size,
                                           &ngx_http_omniroute_module);
    if (omcf->shm_zone == NULL) {
        return NGX_ERROR;
    }

    if (omcf->shm_zone->data) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "zone \"%V\" is already used by another module",
                           name);
        return NGX_ERROR;
    }

    omcf->shm_zone->init = ngx_omniroute_store_init_zone;
    omcf->shm_zone->data = &omcf->store;
    omcf->store.shm_zone = omcf->shm_zone;

    return NGX_OK;
}


char *
ngx_omniroute_provider(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_omniroute_main_conf_t *omcf = conf;

    ngx_int_t                  rc;
    ngx_str_t                 *value, s;
    ngx_uint_t                 i, have_url;
    ngx_omniroute_provider_t  *p;

    value = cf->args->elts;

    if (ngx_omniroute_valid_name(&value[1]) != NGX_OK) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid provider name \"%V\": use letters, "
                           "digits, \"-\", \"_\" and \".\"", &value[1]);
        return NGX_CONF_ERROR;
    }

    if (ngx_omniroute_provider_lookup(omcf, &value[1]) != NGX_ERROR) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "duplicate provider \"%V\"", &value[1]);
        return NGX_CONF_ERROR;
    }

    p = ngx_array_push(&omcf->providers);
    if (p == NULL) {
        return NGX_CONF_ERROR;
    }

    ngx_memzero(p, sizeof(ngx_omniroute_provider_t));

    p->file = cf->conf_file->file.name;
    p->line = cf->conf_file->line;

    p->name = value[1];
    p->kind = OR_KIND_APIKEY;

    or_breaker_conf_init(&p->settings.breaker);
    or_cooldown_conf_init(&p->settings.cooldown);
    or_lockout_conf_init(&p->settings.lockout);
    or_stream_conf_init(&p->settings.stream);
    p->auth = NGX_OMNIROUTE_AUTH_BEARER;
    ngx_str_set(&p->auth_header, "Authorization");

    if (ngx_array_init(&p->headers, cf->pool, 2,
                       sizeof(ngx_omniroute_header_t))
        != NGX_OK
        || ngx_array_init(&p->oprules, cf->pool, 2, sizeof(or_oprule_t))
           != NGX_OK
        || ngx_array_init(&p->restate, cf->pool, 1,
                          sizeof(or_restate_rule_t))
           != NGX_OK
        || ngx_array_init(&p->families, cf->pool, 1,
                          sizeof(or_family_rule_t))
           != NGX_OK)
    {
        return NGX_CONF_ERROR;
    }

    have_url = 0;

    for (i = 2; i < cf->args->nelts; i++) {

        if (ngx_strncmp(value[i].data, "url=", 4) == 0) {
            s.data = value[i].data + 4;
            s.len = value[i].len - 4;

            if (ngx_omniroute_parse_url(cf, p, &s) != NGX_OK) {
                return NGX_CONF_ERROR;
            }

            have_url = 1;
            continue;
        }

        if (ngx_strncmp(value[i].data, "kind=", 5) == 0) {
            s.data = value[i].data + 5;
            s.len = value[i].len - 5;

            if (s.len == 5 && ngx_strncmp(s.data, "oauth", 5) == 0) {
                p->kind = OR_KIND_OAUTH;

            } else if (s.len == 6 && ngx_strncmp(s.data, "apikey", 6) == 0) {
                p->kind = OR_KIND_APIKEY;

            } else if (s.len == 5 && ngx_strncmp(s.data, "local", 5) == 0) {
                p->kind = OR_KIND_LOCAL;

            } else {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid kind \"%V\" of provider \"%V\": "
                                   "expected oauth, apikey or local",
                                   &s, &p->name);
                return NGX_CONF_ERROR;
            }

            continue;
        }

        if (ngx_strncmp(value[i].data, "auth=", 5) == 0) {
            s.data = value[i].data + 5;
            s.len = value[i].len - 5;

            if (ngx_omniroute_parse_auth(cf, p, &s) != NGX_OK) {
                return NGX_CONF_ERROR;
            }

            continue;
        }

        if (ngx_strncmp(value[i].data, "header=", 7) == 0) {
            s.data = value[i].data + 7;
            s.len = value[i].len - 7;

            if (ngx_omniroute_parse_header(cf, p, &s) != NGX_OK) {
                return NGX_CONF_ERROR;
            }

            continue;
        }

        rc = ngx_omniroute_provider_setting(cf, p, &value[i]);

        if (rc == NGX_OK) {
            continue;
        }

        if (rc == NGX_DECLINED) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid parameter \"%V\" of provider "
                               "\"%V\": unknown parameter", &value[i],
                               &p->name);
        }

        return NGX_CONF_ERROR;
    }

    if (!have_url) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "provider \"%V\" has no \"url=\" parameter",
                           &p->name);
        return NGX_CONF_ERROR;
    }

    if (p->auth_header.len) {
        p->auth_lowcase = ngx_pnalloc(cf->pool, p->auth_header.len);
        if (p->auth_lowcase == NULL) {
            return NGX_CONF_ERROR;
        }

        p->auth_hash = ngx_hash_strlow(p->auth_lowcase, p->auth_header.data,
                                       p->auth_header.len);
    }

    return NGX_CONF_OK;
}


static ngx_int_t
ngx_omniroute_parse_url(ngx_conf_t *cf, ngx_omniroute_provider_t *p,
    ngx_str_t *url)
{
    size_t     skip;
    ngx_url_t  u;

    if (url->len > 7 && ngx_strncasecmp(url->data, (u_char *) "http://", 7)
                        == 0)
    {
        skip = 7;

    } else if (url->len > 8
               && ngx_strncasecmp(url->data, (u_char *) "https://", 8) == 0)
    {
        skip = 8;

    } else {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid url \"%V\" of provider \"%V\": "
                           "expected http:// or https://", url, &p->name);
        return NGX_ERROR;
    }

    ngx_memzero(&u, sizeof(ngx_url_t));

    u.url.data = url->data + skip;
    u.url.len = url->len - skip;
    u.no_resolve = 1;
    u.uri_part = 1;

    if (ngx_parse_url(cf->pool, &u) != NGX_OK) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid url \"%V\" of provider \"%V\": %s",
                           url, &p->name, u.err ? u.err : "bad address");
        return NGX_ERROR;
    }

    if (u.host.len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid url \"%V\" of provider \"%V\": no host",
                           url, &p->name);
        return NGX_ERROR;
    }

    if (ngx_strlchr(url->data, url->data + url->len, '?') != NULL
        || ngx_strlchr(url->data, url->data + url->len, '#') != NULL)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid url \"%V\" of provider \"%V\": "
                           "query strings and fragments are not allowed",
                           url, &p->name);
        return NGX_ERROR;
    }

    p->url = *url;

    while (p->url.len > skip && p->url.data[p->url.len - 1] == '/') {
        p->url.len--;
    }

    return NGX_OK;
}


static ngx_int_t
ngx_omniroute_parse_auth(ngx_conf_t *cf, ngx_omniroute_provider_t *p,
    ngx_str_t *value)
{
    ngx_str_t  name;

    if (value->len == 6 && ngx_strncmp(value->data, "bearer", 6) == 0) {
        p->auth = NGX_OMNIROUTE_AUTH_BEARER;
        ngx_str_set(&p->auth_header, "Authorization");
        return NGX_OK;
    }

    if (value->len == 9 && ngx_strncmp(value->data, "x-api-key", 9) == 0) {
        p->auth = NGX_OMNIROUTE_AUTH_X_API_KEY;
        ngx_str_set(&p->auth_header, "x-api-key");
        return NGX_OK;
    }

    if (value->len == 4 && ngx_strncmp(value->data, "none", 4) == 0) {
        p->auth = NGX_OMNIROUTE_AUTH_NONE;
        ngx_str_null(&p->auth_header);
        return NGX_OK;
    }

    if (value->len > 7 && ngx_strncmp(value->data, "header:", 7) == 0) {
        name.data = value->data + 7;
        name.len = value->len - 7;

        if (ngx_omniroute_valid_token(&name) != NGX_OK) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid auth header name \"%V\" of provider "
                               "\"%V\": expected a header name token",
                               &name, &p->name);
            return NGX_ERROR;
        }

        p->auth = NGX_OMNIROUTE_AUTH_HEADER;
        p->auth_header = name;
        return NGX_OK;
    }

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "invalid auth \"%V\" of provider \"%V\": expected "
                       "bearer, x-api-key, header:NAME or none",
                       value, &p->name);
    return NGX_ERROR;
}


static ngx_int_t
ngx_omniroute_parse_header(ngx_conf_t *cf, ngx_omniroute_provider_t *p,
    ngx_str_t *value)
{
    u_char                  *colon;
    ngx_uint_t               i;
    ngx_omniroute_header_t  *h;

    colon = ngx_strlchr(value->data, value->data + value->len, ':');

    if (colon == NULL || colon == value->data) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid header \"%V\" of provider \"%V\": "
                           "expected \"header=Name:value\"", value, &p->name);
        return NGX_ERROR;
    }

    h = ngx_array_push(&p->headers);
    if (h == NULL) {
        return NGX_ERROR;
    }

    h->name.data = value->data;
    h->name.len = colon - value->data;
    h->value.data = colon + 1;
    h->value.len = value->data + value->len - h->value.data;

    if (ngx_omniroute_valid_token(&h->name) != NGX_OK) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid header name \"%V\" of provider \"%V\": "
                           "expected a header name token", &h->name,
                           &p->name);
        return NGX_ERROR;
    }

    for (i = 0; i < h->value.len; i++) {
        if (h->value.data[i] == CR || h->value.data[i] == LF
            || h->value.data[i] == '\0')
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid header value in \"%V\" of provider "
                               "\"%V\": no CR, LF or NUL", value, &p->name);
            return NGX_ERROR;
        }
    }

    h->lowcase_key = ngx_pnalloc(cf->pool, h->name.len);
    if (h->lowcase_key == NULL) {
        return NGX_ERROR;
    }

    h->hash = ngx_hash_strlow(h->lowcase_key, h->name.data, h->name.len);

    return NGX_OK;
}


char *
ngx_omniroute_connection(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_omniroute_main_conf_t *omcf = conf;

    u_char                      *env;
    ngx_str_t                   *value, s, key_env, key_file;
    ngx_int_t                    n;
    ngx_uint_t                   i;
    ngx_msec_int_t               ms;
    ngx_omniroute_connection_t  *c, *cc;

    value = cf->args->elts;

    if (ngx_omniroute_valid_name(&value[1]) != NGX_OK) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid connection id \"%V\": use letters, "
                           "digits, \"-\", \"_\" and \".\"", &value[1]);
        return NGX_CONF_ERROR;
    }

    cc = omcf->connections.elts;
    for (i = 0; i < omcf->connections.nelts; i++) {
        if (cc[i].id.len == value[1].len
            && ngx_strncmp(cc[i].id.data, value[1].data, value[1].len) == 0)
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "duplicate connection \"%V\"", &value[1]);
            return NGX_CONF_ERROR;
        }
    }

    c = ngx_array_push(&omcf->connections);
    if (c == NULL) {
        return NGX_CONF_ERROR;
    }

    ngx_memzero(c, sizeof(ngx_omniroute_connection_t));

    c->file = cf->conf_file->file.name;
    c->line = cf->conf_file->line;

    c->id = value[1];
    c->state_hash = ngx_omniroute_store_hash(NGX_OMNIROUTE_T_CONN, &c->id);

    c->state_cache = ngx_pcalloc(cf->pool,
                                 sizeof(ngx_omniroute_store_cache_t));
    if (c->state_cache == NULL) {
        return NGX_CONF_ERROR;
    }

    c->state_cache->rc = NGX_DECLINED;
    c->priority = 0;
    c->weight = 1;
    c->provider = NGX_CONF_UNSET_UINT;
    c->pacing = NGX_CONF_UNSET;

    ngx_str_null(&key_env);
    ngx_str_null(&key_file);
    for (i = 2; i < cf->args->nelts; i++) {

        if (ngx_strncmp(value[i].data, "provider=", 9) == 0) {
            /* resolved in init_main_conf */
            c->provider_name.data = value[i].data + 9;
            c->provider_name.len = value[i].len - 9;
            continue;
        }

        if (ngx_strncmp(value[i].data, "key_env=", 8) == 0) {
            key_env.data = value[i].data + 8;
            key_env.len = value[i].len - 8;
            continue;
        }

        if (ngx_strncmp(value[i].data, "key_file=", 9) == 0) {
            key_file.data = value[i].data + 9;
            key_file.len = value[i].len - 9;
            continue;
        }

        if (ngx_strncmp(value[i].data, "priority=", 9) == 0) {
            s.data = value[i].data + 9;
            s.len = value[i].len - 9;

            n = ngx_atoi(s.data, s.len);
            if (n == NGX_ERROR || n > 1000000) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid priority \"%V\" of connection "
                                   "\"%V\": expected 0..1000000",
                                   &s, &c->id);
                return NGX_CONF_ERROR;
            }

            c->priority = n;
            continue;
        }

        if (ngx_strncmp(value[i].data, "weight=", 7) == 0) {
            s.data = value[i].data + 7;
            s.len = value[i].len - 7;

            n = ngx_atoi(s.data, s.len);
            if (n == NGX_ERROR || n < 1 || n > 1000) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid weight \"%V\" of connection "
                                   "\"%V\": expected 1..1000", &s, &c->id);
                return NGX_CONF_ERROR;
            }

            c->weight = n;
            continue;
        }

        if (ngx_strncmp(value[i].data, "max_concurrent=", 15) == 0) {
            n = ngx_atoi(value[i].data + 15, value[i].len - 15);
            if (n == NGX_ERROR || n > 100000) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid \"%V\" of connection \"%V\": "
                                   "expected 0..100000", &value[i], &c->id);
                return NGX_CONF_ERROR;
            }

            c->max_concurrent = n;
            continue;
        }

        if (ngx_strncmp(value[i].data, "egress=", 7) == 0) {
            c->egress.data = value[i].data + 7;
            c->egress.len = value[i].len - 7;

            if (c->egress.len == 0) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "empty \"egress=\" of connection \"%V\": "
                                   "expected the key of the connection's "
                                   "egress path (omit it for the default "
                                   "one)", &c->id);
                return NGX_CONF_ERROR;
            }

            continue;
        }

        if (ngx_strncmp(value[i].data, "model_caps=", 11) == 0) {
            if (ngx_omniroute_parse_model_caps(cf, c, &value[i]) != NGX_OK) {
                return NGX_CONF_ERROR;
            }

            continue;
        }

        if (ngx_strncmp(value[i].data, "models=", 7) == 0) {
            if (ngx_omniroute_parse_models(cf, c, &value[i]) != NGX_OK) {
                return NGX_CONF_ERROR;
            }

            continue;
        }

        if (ngx_strncmp(value[i].data, "rate_limit_reset=", 17) == 0) {
            s.data = value[i].data + 17;
            s.len = value[i].len - 17;

            ms = ngx_parse_time(&s, 0);
            if (ms == (ngx_msec_int_t) NGX_ERROR || ms < 1
                || (int64_t) ms > NGX_OMNIROUTE_CONN_RESET_MAX)
            {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid \"%V\" of connection \"%V\": "
                                   "expected a time of 1ms..30d",
                                   &value[i], &c->id);
                return NGX_CONF_ERROR;
            }

            c->rate_limit_reset = (or_msec_t) ms;
            continue;
        }

        if (ngx_strcmp(value[i].data, "usage_lane=on") == 0
            || ngx_strcmp(value[i].data, "usage_lane=off") == 0)
        {
            c->usage_lane = (value[i].data[12] == 'n');
            continue;
        }

        if (ngx_strcmp(value[i].data, "limit_reset=on") == 0
            || ngx_strcmp(value[i].data, "limit_reset=off") == 0)
        {
            c->limit_reset = (value[i].data[13] == 'n');
            continue;
        }

        if (ngx_strncmp(value[i].data, "org=", 4) == 0) {
            if (ngx_omniroute_parse_org(cf, c, &value[i]) != NGX_OK) {
                return NGX_CONF_ERROR;
            }

            continue;
        }

        if (ngx_strcmp(value[i].data, "pacing=on") == 0) {
            c->pacing = 1;
            continue;
        }

        if (ngx_strcmp(value[i].data, "pacing=off") == 0) {
            c->pacing = 0;
            continue;
        }

        if (ngx_strcmp(value[i].data, "disable_cooling=on") == 0) {
            c->disable_cooling = 1;
            continue;
        }

        if (ngx_strcmp(value[i].data, "disable_cooling=off") == 0) {
            c->disable_cooling = 0;
            continue;
        }

        if (ngx_strncmp(value[i].data, "cost=", 5) == 0) {
            n = ngx_atofp(value[i].data + 5, value[i].len - 5, 4);
            if (n == NGX_ERROR) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid \"%V\" of connection \"%V\": "
                                   "expected a number with at most 4 "
                                   "decimals", &value[i], &c->id);
                return NGX_CONF_ERROR;
            }

            c->cost = (double) n / 10000;
            continue;
        }

        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid parameter \"%V\" of connection \"%V\": "
                           "unknown parameter", &value[i], &c->id);
        return NGX_CONF_ERROR;
    }

    if (c->provider_name.len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "connection \"%V\" has no \"provider=\" parameter",
                           &c->id);
        return NGX_CONF_ERROR;
    }

    if (c->limit_reset && c->org.len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "connection \"%V\": \"limit_reset=on\" needs "
                           "\"org=\" (the organization UUID)", &c->id);
        return NGX_CONF_ERROR;
    }

    if (key_env.len && key_file.len) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "connection \"%V\" has both \"key_env=\" and "
                           "\"key_file=\"", &c->id);
        return NGX_CONF_ERROR;
    }

    if (key_env.len) {
        /* config strings are NUL-terminated */
        env = (u_char *) getenv((char *) key_env.data);

        if (env == NULL || *env == '\0') {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "connection \"%V\": environment variable "
                               "\"%V\" is not set or empty",
                               &c->id, &key_env);
            return NGX_CONF_ERROR;
        }

        c->credential.len = ngx_strlen(env);
        c->credential.data = ngx_pnalloc(cf->pool, c->credential.len);
        if (c->credential.data == NULL) {
            return NGX_CONF_ERROR;
        }

        ngx_memcpy(c->credential.data, env, c->credential.len);

    } else if (key_file.len) {
        if (ngx_omniroute_read_secret(cf, cf->pool, &key_file,
                                      NGX_OMNIROUTE_KEY_FILE_MAX, "key file",
                                      &c->credential)
            != NGX_OK)
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "connection \"%V\": cannot use key file "
                               "\"%V\"", &c->id, &key_file);
            return NGX_CONF_ERROR;
        }
    }

    for (i = 0; i < c->credential.len; i++) {
        if (c->credential.data[i] < 0x21 || c->credential.data[i] == 0x7f) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "connection \"%V\": the credential contains "
                               "whitespace or control characters", &c->id);
            return NGX_CONF_ERROR;
        }
    }

    return NGX_CONF_OK;
}


/*
 * model_caps=MODEL:N,...: at most N attempts of the exact upstream model
 * MODEL in flight on the connection (the last ":" separates, as model
 * names may have one: llama3:8b:2).
 */

/*
 * org=UUID: the organization of a limit_reset=on connection, a path
 * segment of the reset claim (R-LANE-7): hex digits and dashes only.
 */

static ngx_int_t
ngx_omniroute_parse_org(ngx_conf_t *cf, ngx_omniroute_connection_t *c,
    ngx_str_t *arg)
{
    u_char      ch;
    ngx_uint_t  i;

    c->org.data = arg->data + 4;
    c->org.len = arg->len - 4;

    for (i = 0; i < c->org.len; i++) {
        ch = c->org.data[i];

        if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f')
              || (ch >= 'A' && ch <= 'F') || ch == '-'))
        {
            break;
        }
    }

    if (c->org.len == 0 || c->org.len > 64 || i != c->org.len) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid \"%V\" of connection \"%V\": expected "
                           "a UUID (hex digits and dashes)", arg, &c->id);
        return NGX_ERROR;
    }

    return NGX_OK;
}


static ngx_int_t
ngx_omniroute_parse_model_caps(ngx_conf_t *cf, ngx_omniroute_connection_t *c,
    ngx_str_t *arg)
{
    u_char                     *p, *last, *item, *end, *colon;
    ngx_int_t                   n, rc;
    ngx_str_t                   model, it;
    ngx_uint_t                  i;
    ngx_omniroute_model_cap_t  *mc, *old;

    if (c->model_caps.elts == NULL
        && ngx_array_init(&c->model_caps, cf->pool, 4,
                          sizeof(ngx_omniroute_model_cap_t))
           != NGX_OK)
    {
        return NGX_ERROR;
    }

    p = arg->data + sizeof("model_caps=") - 1;
    last = arg->data + arg->len;

    if (p == last) {
        goto invalid;
    }

    while ((rc = ngx_omniroute_list_item(&p, last, &it)) == NGX_OK) {
        item = it.data;
        end = it.data + it.len;

        colon = NULL;

        for (model.data = item; model.data < end; model.data++) {
            if (*model.data == ':') {
                colon = model.data;
            }
        }

        if (colon == NULL || colon == item || colon + 1 == end) {
            goto invalid;
        }

        n = ngx_atoi(colon + 1, end - colon - 1);
        if (n == NGX_ERROR || n < 1 || n > 100000) {
            goto invalid;
        }

        model.data = item;
        model.len = colon - item;

        old = c->model_caps.elts;

        for (i = 0; i < c->model_caps.nelts; i++) {
            if (old[i].model.len == model.len
                && ngx_strncmp(old[i].model.data, model.data, model.len)
                   == 0)
            {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "duplicate model \"%V\" in \"%V\" of "
                                   "connection \"%V\"", &model, arg, &c->id);
                return NGX_ERROR;
            }
        }

        mc = ngx_array_push(&c->model_caps);
        if (mc == NULL) {
            return NGX_ERROR;
        }

        mc->model = model;
        mc->cap = n;
    }

    if (rc == NGX_ERROR) {
        goto invalid;
    }

    return NGX_OK;

invalid:

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "invalid \"%V\" of connection \"%V\": expected "
                       "MODEL:N,... with N 1..100000", arg, &c->id);

    return NGX_ERROR;
}


/*
 * The next item of a comma-separated list at *pp: NGX_OK (in *item),
 * NGX_DONE at the end, NGX_ERROR for an empty item or a trailing comma.
 */

static ngx_int_t
ngx_omniroute_list_item(u_char **pp, u_char *last, ngx_str_t *item)
{
    u_char  *p;

    p = *pp;

    if (p == last) {
        return NGX_DONE;
    }

    item->data = p;

    while (p < last && *p != ',') {
        p++;
    }

    item->len = p - item->data;

    if (item->len == 0) {
        return NGX_ERROR;
    }

    if (p < last && ++p == last) {
        return NGX_ERROR;
    }

    *pp = p;

    return NGX_OK;
}


/* models=a,b: the upstream models the connection may serve (exact) */

static ngx_int_t
ngx_omniroute_parse_models(ngx_conf_t *cf, ngx_omniroute_connection_t *c,
    ngx_str_t *arg)
{
    u_char     *p, *last;
    ngx_int_t   rc;
    ngx_str_t  *m, it;

    if (c->models.elts == NULL
        && ngx_array_init(&c->models, cf->pool, 4, sizeof(ngx_str_t))
           != NGX_OK)
    {
        return NGX_ERROR;
    }

    p = arg->data + sizeof("models=") - 1;
    last = arg->data + arg->len;

    if (p == last) {
        goto invalid;
    }

    while ((rc = ngx_omniroute_list_item(&p, last, &it)) == NGX_OK) {
        m = ngx_array_push(&c->models);
        if (m == NULL) {
            return NGX_ERROR;
        }

        *m = it;
    }

    if (rc == NGX_ERROR) {
        goto invalid;
    }

    return NGX_OK;

invalid:

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "invalid \"%V\" of connection \"%V\": expected "
                       "a list of upstream models, MODEL,...", arg, &c->id);

    return NGX_ERROR;
}


char *
ngx_omniroute_model(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_omniroute_main_conf_t *omcf = conf;

    int                      st;
    ngx_str_t               *value;
    ngx_uint_t               i;
    ngx_omniroute_model_t   *m;
    ngx_omniroute_target_t  *t;

    value = cf->args->elts;

    if (ngx_omniroute_valid_model(&value[1]) != NGX_OK) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid model name \"%V\" of \"%V\": 1 to 256 "
                           "printable characters without spaces, quotes "
                           "or backslashes", &value[1], &cmd->name);
        return NGX_CONF_ERROR;
    }

    if (ngx_omniroute_find_model(omcf, &value[1]) != NULL) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "duplicate model or combo \"%V\"", &value[1]);
        return NGX_CONF_ERROR;
    }

    m = ngx_array_push(&omcf->models);
    if (m == NULL) {
        return NGX_CONF_ERROR;
    }

    ngx_memzero(m, sizeof(ngx_omniroute_model_t));

    m->file = cf->conf_file->file.name;
    m->line = cf->conf_file->line;

    m->name = value[1];
    m->combo = cmd->offset;
    m->strategy = OR_STRATEGY_PRIORITY;
    m->wait = 1;

    if (ngx_array_init(&m->targets, cf->pool, cf->args->nelts,
                       sizeof(ngx_omniroute_target_t))
        != NGX_OK)
    {
        return NGX_CONF_ERROR;
    }

    for (i = 2; i < cf->args->nelts; i++) {

        if (m->combo && ngx_strcmp(value[i].data, "wait=on") == 0) {
            m->wait = 1;
            continue;
        }

        if (m->combo && ngx_strcmp(value[i].data, "wait=off") == 0) {
            m->wait = 0;
            continue;
        }

        if (m->combo && ngx_strncmp(value[i].data, "wait=", 5) == 0) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid \"%V\" of combo \"%V\": expected "
                               "wait=on or wait=off", &value[i], &m->name);
            return NGX_CONF_ERROR;
        }

        if (m->combo && ngx_strncmp(value[i].data, "strategy=", 9) == 0) {
            st = or_strategy_parse((const char *) value[i].data + 9,
                                   value[i].len - 9);

            if (st < 0) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "unknown strategy \"%s\" of combo "
                                   "\"%V\": expected priority, weighted, "
                                   "round-robin, random, strict-random, "
                                   "least-used, fill-first, p2c, "
                                   "cost-optimized, reset-aware or headroom",
                                   value[i].data + 9, &m->name);
                return NGX_CONF_ERROR;
            }

            m->strategy = st;
            continue;
        }

        t = ngx_array_push(&m->targets);
        if (t == NULL) {
            return NGX_CONF_ERROR;
        }

        /* "provider/model" or an alias; resolved in init_main_conf */
        t->provider = NGX_CONF_UNSET_UINT;
        t->model = value[i];
    }

    if (m->targets.nelts == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "combo \"%V\" has no targets", &m->name);
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


char *
ngx_omniroute_pass(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_omniroute_loc_conf_t *olcf = conf;

    ngx_str_t                  *value;
    ngx_http_core_loc_conf_t   *clcf;
    ngx_omniroute_pass_conf_t  *pc;
    ngx_omniroute_main_conf_t  *omcf;

    if (olcf->pass_uri.data) {
        return "is duplicate";
    }

    value = cf->args->elts;

    if (cf->args->nelts == 2) {
        if (value[1].len < 2 || value[1].data[0] != '/') {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid attempt location \"%V\": expected "
                               "an internal location URI such as "
                               "\"/_omniroute\"", &value[1]);
            return NGX_CONF_ERROR;
        }

        olcf->pass_uri = value[1];

    } else {
        ngx_str_set(&olcf->pass_uri, NGX_OMNIROUTE_DEFAULT_PASS_URI);
    }

    clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);

    clcf->handler = ngx_omniroute_handler;
    olcf->json_errors = 1;

    /* the attempt location is checked once all locations are known */

    omcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_omniroute_module);

    pc = ngx_array_push(&omcf->passes);
    if (pc == NULL) {
        return NGX_CONF_ERROR;
    }

    pc->server = ngx_http_conf_get_module_srv_conf(cf, ngx_http_core_module);
    pc->location = clcf;
    pc->pass_uri = olcf->pass_uri;
    pc->file = cf->conf_file->file.name;
    pc->line = cf->conf_file->line;

    if (ngx_omniroute_json_server(cf) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

#if (NGX_PCRE)
    if (clcf->regex == NULL)
#endif
    {
        olcf->prefix = clcf->name;

        while (olcf->prefix.len
               && olcf->prefix.data[olcf->prefix.len - 1] == '/')
        {
            olcf->prefix.len--;
        }
    }

    return NGX_CONF_OK;
}


/* omniroute_models on | off | pass=PROVIDER */

char *
ngx_omniroute_models(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_omniroute_loc_conf_t *olcf = conf;

    ngx_str_t  *value;

    if (olcf->models != NGX_CONF_UNSET_UINT) {
        return "is duplicate";
    }

    value = cf->args->elts;

    if (ngx_strcmp(value[1].data, "on") == 0) {
        olcf->models = NGX_OMNIROUTE_MODELS_ON;

    } else if (ngx_strcmp(value[1].data, "off") == 0) {
        olcf->models = NGX_OMNIROUTE_MODELS_OFF;

    } else if (ngx_strncmp(value[1].data, "pass=", 5) == 0
               && value[1].len > 5)
    {
        olcf->models = NGX_OMNIROUTE_MODELS_PASS;
        olcf->models_pass.data = value[1].data + 5;
        olcf->models_pass.len = value[1].len - 5;

        /* the provider may be declared later: resolved at merge */
        olcf->models_file = cf->conf_file->file.name;
        olcf->models_line = cf->conf_file->line;

    } else {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid value \"%V\" of \"omniroute_models\": "
                           "expected on, off or pass=PROVIDER", &value[1]);
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


char *
ngx_omniroute_models_merge(ngx_conf_t *cf, ngx_omniroute_loc_conf_t *prev,
    ngx_omniroute_loc_conf_t *conf)
{
    ngx_int_t                   pi;
    ngx_omniroute_main_conf_t  *omcf;

    if (conf->models == NGX_CONF_UNSET_UINT) {
        conf->models = (prev->models == NGX_CONF_UNSET_UINT)
                       ? NGX_OMNIROUTE_MODELS_ON : prev->models;
        conf->models_pass = prev->models_pass;
        conf->models_provider = prev->models_provider;
        conf->models_file = prev->models_file;
        conf->models_line = prev->models_line;
    }

    if (conf->models != NGX_OMNIROUTE_MODELS_PASS
        || conf->models_provider != NGX_CONF_UNSET)
    {
        return NGX_CONF_OK;
    }

    omcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_omniroute_module);

    pi = ngx_omniroute_provider_lookup(omcf, &conf->models_pass);

    if (pi == NGX_ERROR) {
        ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                      "invalid value \"pass=%V\" of \"omniroute_models\": "
                      "no provider \"%V\" is declared in %V:%ui",
                      &conf->models_pass, &conf->models_pass,
                      &conf->models_file, conf->models_line);
        return NGX_CONF_ERROR;
    }

    conf->models_provider = pi;

    return NGX_CONF_OK;
}


char *
ngx_omniroute_init_main_conf(ngx_conf_t *cf, void *conf)
{
    ngx_omniroute_main_conf_t *omcf = conf;

    ngx_int_t                    pi;
    const char                  *err;
    ngx_uint_t                   i;
    ngx_omniroute_model_t       *m;
    ngx_omniroute_provider_t    *p;
    ngx_omniroute_connection_t  *c;

    p = omcf->providers.elts;
    c = omcf->connections.elts;

    for (i = 0; i < omcf->providers.nelts; i++) {
        ngx_omniroute_class_conf_init(&p[i]);
    }

    if (ngx_omniroute_rules_init(cf, omcf) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    for (i = 0; i < omcf->providers.nelts; i++) {
        ngx_omniroute_settings_env(p[i].kind, &p[i].settings);

        err = ngx_omniroute_settings_fill(p[i].kind, &p[i].settings);
        if (err) {
            ngx_omniroute_conf_error(cf, &p[i].file, p[i].line,
                                     "invalid resilience settings of "
                                     "provider \"%V\": %s", &p[i].name, err);
            return NGX_CONF_ERROR;
        }
    }

    for (i = 0; i < omcf->connections.nelts; i++) {
        pi = ngx_omniroute_provider_lookup(omcf, &c[i].provider_name);

        if (pi == NGX_ERROR) {
            ngx_omniroute_conf_error(cf, &c[i].file, c[i].line,
                                     "connection \"%V\" names unknown "
                                     "provider \"%V\" in \"provider=%V\" of "
                                     "\"omniroute_connection\"", &c[i].id,
                                     &c[i].provider_name,
                                     &c[i].provider_name);
            return NGX_CONF_ERROR;
        }

        c[i].provider = pi;

        if (p[pi].auth != NGX_OMNIROUTE_AUTH_NONE
            && c[i].credential.len == 0)
        {
            ngx_omniroute_conf_error(cf, &c[i].file, c[i].line,
                                     "connection \"%V\" needs \"key_env=\" "
                                     "or \"key_file=\": provider \"%V\" "
                                     "sends a credential (auth=none sends "
                                     "none)", &c[i].id, &p[pi].name);
            return NGX_CONF_ERROR;
        }

        if (ngx_omniroute_build_auth_value(cf, &p[pi], &c[i]) != NGX_OK) {
            return NGX_CONF_ERROR;
        }
    }

    m = omcf->models.elts;

    /* in-flight counts are kept when a combo's strategy reads them, or
     * a connection has a concurrency cap */

    for (i = 0; i < omcf->connections.nelts; i++) {
        if (c[i].max_concurrent || c[i].model_caps.nelts) {
            omcf->track_inflight = 1;
        }
    }

    for (i = 0; i < omcf->models.nelts; i++) {
        switch (m[i].strategy) {

        case OR_STRATEGY_LEAST_USED:
        case OR_STRATEGY_P2C:
        case OR_STRATEGY_HEADROOM:
        case OR_STRATEGY_FILL_FIRST:
            omcf->track_inflight = 1;
            break;

        default:
            break;
        }
    }

    /* the models' targets and routes, the emergency route (routes.c) */

    if (ngx_omniroute_routes_init(cf, omcf) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    /* client keys: their connections, their zone (keys_conf.c) */

    if (ngx_omniroute_keys_init(cf, omcf) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    /* their budgets and rate limits (budget_conf.c, R-BUDGET-1) */

    if (ngx_omniroute_budget_init(cf, omcf) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


/*
 * omniroute_emergency_fallback <connection>/<model>; (R-EMERG-1): the
 * last-resort target, one route, tried only when every candidate of a
 * request failed or was excluded.  The connection id has no "/" (see
 * ngx_omniroute_valid_name()); the model is the upstream model, sent as
 * it is (it may contain "/" itself).
 */

char *
ngx_omniroute_emergency_fallback(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf)
{
    ngx_omniroute_main_conf_t *omcf = conf;

    u_char     *slash;
    ngx_str_t  *value;

    if (omcf->emergency_conn.len) {
        return "is duplicate";
    }

    value = cf->args->elts;

    slash = ngx_strlchr(value[1].data, value[1].data + value[1].len, '/');

    if (slash == NULL || slash == value[1].data
        || slash + 1 == value[1].data + value[1].len)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid \"%V\" of \"omniroute_emergency_"
                           "fallback\": expected <connection>/<model>",
                           &value[1]);
        return NGX_CONF_ERROR;
    }

    omcf->emergency_conn.data = value[1].data;
    omcf->emergency_conn.len = slash - value[1].data;
    omcf->emergency_model.data = slash + 1;
    omcf->emergency_model.len = value[1].data + value[1].len - slash - 1;
    omcf->emergency_file = cf->conf_file->file.name;
    omcf->emergency_line = cf->conf_file->line;

    return NGX_CONF_OK;
}


static ngx_int_t
ngx_omniroute_build_auth_value(ngx_conf_t *cf, ngx_omniroute_provider_t *p,
    ngx_omniroute_connection_t *c)
{
    u_char  *d;

    switch (p->auth) {

    case NGX_OMNIROUTE_AUTH_BEARER:
        c->auth_value.len = sizeof("Bearer ") - 1 + c->credential.len;
        c->auth_value.data = ngx_pnalloc(cf->pool, c->auth_value.len);
        if (c->auth_value.data == NULL) {
            return NGX_ERROR;
        }

        d = ngx_cpymem(c->auth_value.data, "Bearer ", sizeof("Bearer ") - 1);
        ngx_memcpy(d, c->credential.data, c->credential.len);
        break;

    case NGX_OMNIROUTE_AUTH_NONE:
        ngx_str_null(&c->auth_value);
        break;

    default: /* x-api-key, named header: the bare credential */
        c->auth_value = c->credential;
        break;
    }

    return NGX_OK;
}


static ngx_int_t
ngx_omniroute_valid_name(ngx_str_t *name)
{
    u_char      ch;
    ngx_uint_t  i;

    if (name->len == 0 || name->len > 128) {
        return NGX_ERROR;
    }

    for (i = 0; i < name->len; i++) {
        ch = name->data[i];

        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')
            || (ch >= '0' && ch <= '9') || ch == '-' || ch == '_'
            || ch == '.')
        {
            continue;
        }

        return NGX_ERROR;
    }

    return NGX_OK;
}


static ngx_int_t
ngx_omniroute_valid_token(ngx_str_t *name)
{
    u_char      ch;
    ngx_uint_t  i;

    if (name->len == 0 || name->len > 256) {
        return NGX_ERROR;
    }

    for (i = 0; i < name->len; i++) {
        ch = name->data[i];

        if (ch <= 0x20 || ch >= 0x7f || ch == '"' || ch == ':'
            || ch == '(' || ch == ')' || ch == ',' || ch == ';'
            || ch == '<' || ch == '>' || ch == '@' || ch == '['
            || ch == ']' || ch == '{' || ch == '}' || ch == '\\'
            || ch == '=' || ch == '?')
        {
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


static ngx_int_t
ngx_omniroute_valid_model(ngx_str_t *name)
{
    u_char      ch;
    ngx_uint_t  i;

    if (name->len == 0 || name->len > 256) {
        return NGX_ERROR;
    }

    for (i = 0; i < name->len; i++) {
        ch = name->data[i];

        if (ch <= 0x20 || ch >= 0x7f || ch == '"' || ch == '\\') {
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}
