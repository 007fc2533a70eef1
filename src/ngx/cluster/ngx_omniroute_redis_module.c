
/*
 * Copyright (C) ngx_omniroute authors
 *
 * ngx_http_omniroute_redis_module: mirrors the omniroute state zone to a
 * Redis server so that every node of a cluster shares breakers, cooldowns,
 * lockouts and runtime settings (SPEC R-CLUSTER-2/3, R-CB-7, R-ML-6).
 *
 *   omniroute_redis 127.0.0.1:6379 | unix:/path/redis.sock
 *                   | sentinel=IP:PORT,... master=NAME
 *                   [user=NAME] [password=... | password_file=path] [db=N]
 *                   [tls=on tls_ca=file [tls_cert=file tls_key=file]
 *                    [tls_name=SNI]]
 *                   [prefix=omniroute:] [node=name] [timeout=2s]
 *                   [interval=10ms] [keepalive=1s] [retention=1h]
 *                   [resync=5m] [backoff=100ms] [backoff_max=10s]
 *                   [log_interval=10s] [queue=4096];
 *
 *   omniroute_redis_debug;      (location: inspect and change records;
 *                                test builds only, see
 *                                ngx_omniroute_redis_debug.c)
 *
 * Variables: $omniroute_redis_link (link state), $omniroute_redis_stats
 * (JSON counters).
 *
 * See ngx_omniroute_redis_mirror.c for the link and docs/cluster.md for the
 * guarantees.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <jansson.h>

#include "ngx_omniroute_redis_int.h"

#if (NGX_OMNIROUTE_HIREDIS_SSL)
#include <hiredis/hiredis_ssl.h>
#endif


#define NGX_OMNIROUTE_REDIS_PASSWORD_MAX  1024


static ngx_int_t ngx_omniroute_redis_add_variables(ngx_conf_t *cf);
static void *ngx_omniroute_redis_create_main_conf(ngx_conf_t *cf);
static char *ngx_omniroute_redis_init_main_conf(ngx_conf_t *cf, void *conf);
static char *ngx_omniroute_redis(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static ngx_int_t ngx_omniroute_redis_parse_addr(ngx_conf_t *cf,
    ngx_omniroute_redis_main_conf_t *rmcf, ngx_str_t *addr);
static ngx_int_t ngx_omniroute_redis_parse_host(u_char *p, size_t len,
    ngx_int_t port, ngx_omniroute_redis_addr_t *a);
static char *ngx_omniroute_redis_parse_sentinels(ngx_conf_t *cf,
    ngx_omniroute_redis_main_conf_t *rmcf, ngx_str_t *value);
static char *ngx_omniroute_redis_init_tls(ngx_conf_t *cf,
    ngx_omniroute_redis_main_conf_t *rmcf);
static ngx_int_t ngx_omniroute_redis_init_zone(ngx_shm_zone_t *shm_zone,
    void *data);
static ngx_int_t ngx_omniroute_redis_init_process(ngx_cycle_t *cycle);
static void ngx_omniroute_redis_exit_process(ngx_cycle_t *cycle);

static ngx_int_t ngx_omniroute_redis_link_variable(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);
static ngx_int_t ngx_omniroute_redis_stats_variable(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);



static ngx_command_t  ngx_omniroute_redis_commands[] = {

    { ngx_string("omniroute_redis"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_1MORE,
      ngx_omniroute_redis,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

#if (NGX_OMNIROUTE_TEST)

    { ngx_string("omniroute_redis_debug"),
      NGX_HTTP_LOC_CONF|NGX_CONF_NOARGS,
      ngx_omniroute_redis_debug,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

#endif

      ngx_null_command
};


static ngx_http_module_t  ngx_omniroute_redis_module_ctx = {
    ngx_omniroute_redis_add_variables,     /* preconfiguration */
    NULL,                                  /* postconfiguration */

    ngx_omniroute_redis_create_main_conf,  /* create main configuration */
    ngx_omniroute_redis_init_main_conf,    /* init main configuration */

    NULL,                                  /* create server configuration */
    NULL,                                  /* merge server configuration */

    NULL,                                  /* create location configuration */
    NULL                                   /* merge location configuration */
};


ngx_module_t  ngx_http_omniroute_redis_module = {
    NGX_MODULE_V1,
    &ngx_omniroute_redis_module_ctx,       /* module context */
    ngx_omniroute_redis_commands,          /* module directives */
    NGX_HTTP_MODULE,                       /* module type */
    NULL,                                  /* init master */
    NULL,                                  /* init module */
    ngx_omniroute_redis_init_process,      /* init process */
    NULL,                                  /* init thread */
    NULL,                                  /* exit thread */
    ngx_omniroute_redis_exit_process,      /* exit process */
    NULL,                                  /* exit master */
    NGX_MODULE_V1_PADDING
};


static ngx_http_variable_t  ngx_omniroute_redis_vars[] = {

    { ngx_string("omniroute_redis_link"), NULL,
      ngx_omniroute_redis_link_variable, 0, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("omniroute_redis_stats"), NULL,
      ngx_omniroute_redis_stats_variable, 0, NGX_HTTP_VAR_NOCACHEABLE, 0 },

      ngx_http_null_variable
};


static const char  *ngx_omniroute_redis_state_names[] = {
    "disabled",
    "connecting",
    "syncing",
    "up",
    "down"
};


ngx_omniroute_redis_stats_t *
ngx_omniroute_redis_stats(void)
{
    ngx_omniroute_redis_main_conf_t  *rmcf;

    rmcf = ngx_http_cycle_get_module_main_conf(ngx_cycle,
                                               ngx_http_omniroute_redis_module);

    if (rmcf == NULL || rmcf->addr.len == 0 || rmcf->sh == NULL) {
        return NULL;
    }

    return &rmcf->sh->stats;
}


const char *
ngx_omniroute_redis_state_name(ngx_uint_t state)
{
    if (state >= NGX_OMNIROUTE_REDIS_STATE_COUNT) {
        return "unknown";
    }

    return ngx_omniroute_redis_state_names[state];
}


static ngx_int_t
ngx_omniroute_redis_add_variables(ngx_conf_t *cf)
{
    ngx_http_variable_t  *var, *v;

    for (v = ngx_omniroute_redis_vars; v->name.len; v++) {
        var = ngx_http_add_variable(cf, &v->name, v->flags);
        if (var == NULL) {
            return NGX_ERROR;
        }

        var->get_handler = v->get_handler;
        var->data = v->data;
    }

    return NGX_OK;
}


static void *
ngx_omniroute_redis_create_main_conf(ngx_conf_t *cf)
{
    ngx_omniroute_redis_main_conf_t  *rmcf;

    rmcf = ngx_pcalloc(cf->pool, sizeof(ngx_omniroute_redis_main_conf_t));
    if (rmcf == NULL) {
        return NULL;
    }

    /*
     * set by ngx_pcalloc():
     *
     *     rmcf->addr = { 0, NULL };
     *     rmcf->host = NULL;
     *     rmcf->unix_path = NULL;
     *     rmcf->password = { 0, NULL };
     *     rmcf->prefix = { 0, NULL };
     *     rmcf->node = { 0, NULL };
     *     rmcf->channel = { 0, NULL };
     *     rmcf->shm_zone = NULL;
     *     rmcf->sh = NULL;
     */

    rmcf->port = NGX_CONF_UNSET;
    rmcf->db = NGX_CONF_UNSET;
    rmcf->timeout = NGX_CONF_UNSET_MSEC;
    rmcf->interval = NGX_CONF_UNSET_MSEC;
    rmcf->keepalive = NGX_CONF_UNSET_MSEC;
    rmcf->retention = NGX_CONF_UNSET_MSEC;
    rmcf->resync = NGX_CONF_UNSET_MSEC;
    rmcf->backoff_min = NGX_CONF_UNSET_MSEC;
    rmcf->backoff_max = NGX_CONF_UNSET_MSEC;
    rmcf->log_interval = NGX_CONF_UNSET_MSEC;
    rmcf->queue = NGX_CONF_UNSET_UINT;

    return rmcf;
}


static char *
ngx_omniroute_redis_init_main_conf(ngx_conf_t *cf, void *conf)
{
    ngx_omniroute_redis_main_conf_t *rmcf = conf;

    u_char                     *p;
    ngx_omniroute_main_conf_t  *omcf;

    if (rmcf->addr.len == 0) {
        return NGX_CONF_OK;
    }

    omcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_omniroute_module);

    if (omcf == NULL || omcf->shm_zone == NULL) {
        ngx_omniroute_conf_error(cf, &rmcf->file, rmcf->line,
                                 "\"omniroute_redis\" requires "
                                 "\"omniroute_zone\" (the state it mirrors)");
        return NGX_CONF_ERROR;
    }

    ngx_conf_init_value(rmcf->db, 0);
    ngx_conf_init_msec_value(rmcf->timeout, 2000);
    ngx_conf_init_msec_value(rmcf->interval, 10);
    ngx_conf_init_msec_value(rmcf->keepalive, 1000);
    ngx_conf_init_msec_value(rmcf->retention, 3600 * 1000);
    ngx_conf_init_msec_value(rmcf->resync, 300 * 1000);
    ngx_conf_init_msec_value(rmcf->backoff_min, 100);
    ngx_conf_init_msec_value(rmcf->backoff_max, 10000);
    ngx_conf_init_msec_value(rmcf->log_interval, 10000);
    ngx_conf_init_uint_value(rmcf->queue, 4096);

    if (rmcf->prefix.data == NULL) {
        ngx_str_set(&rmcf->prefix, "omniroute:");
    }

    if (rmcf->backoff_max < rmcf->backoff_min) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"omniroute_redis\" backoff_max must be at least "
                           "backoff");
        return NGX_CONF_ERROR;
    }

    if (rmcf->node.data == NULL) {
        /* unique per start: two instances on one host never collide */

        p = ngx_pnalloc(cf->pool, cf->cycle->hostname.len + 1 + 8);
        if (p == NULL) {
            return NGX_CONF_ERROR;
        }

        rmcf->node.data = p;
        rmcf->node.len = ngx_sprintf(p, "%*s-%08xD",
                                     ngx_min(cf->cycle->hostname.len,
                                             NGX_OMNIROUTE_REDIS_NODE_MAX
                                             - 9),
                                     cf->cycle->hostname.data,
                                     (uint32_t) ngx_random())
                         - p;
    }

    p = ngx_pnalloc(cf->pool, rmcf->prefix.len + sizeof("events:")
                              + NGX_INT_T_LEN);
    if (p == NULL) {
        return NGX_CONF_ERROR;
    }

    rmcf->channel.data = p;
    rmcf->channel.len = ngx_sprintf(p, "%Vevents:%i%Z", &rmcf->prefix,
                                    rmcf->db)
                        - p - 1;

    return NGX_CONF_OK;
}


static char *
ngx_omniroute_redis(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_omniroute_redis_main_conf_t *rmcf = conf;

    u_char      *p;
    ngx_int_t    n;
    ngx_str_t   *value, s, name, path;
    ngx_uint_t   i, j;

    static struct {
        const char  *name;
        size_t       offset;
    } times[] = {
        { "timeout=", offsetof(ngx_omniroute_redis_main_conf_t, timeout) },
        { "interval=", offsetof(ngx_omniroute_redis_main_conf_t, interval) },
        { "keepalive=",
          offsetof(ngx_omniroute_redis_main_conf_t, keepalive) },
        { "retention=",
          offsetof(ngx_omniroute_redis_main_conf_t, retention) },
        { "resync=", offsetof(ngx_omniroute_redis_main_conf_t, resync) },
        { "backoff=",
          offsetof(ngx_omniroute_redis_main_conf_t, backoff_min) },
        { "backoff_max=",
          offsetof(ngx_omniroute_redis_main_conf_t, backoff_max) },
        { "log_interval=",
          offsetof(ngx_omniroute_redis_main_conf_t, log_interval) },
        { NULL, 0 }
    };

    if (rmcf->addr.len) {
        return "is duplicate";
    }

    value = cf->args->elts;

    /* "omniroute_redis sentinel=... master=NAME": no address of its own */

    if (value[1].len > 9 && ngx_strncmp(value[1].data, "sentinel=", 9) == 0) {
        i = 1;

    } else if (ngx_omniroute_redis_parse_addr(cf, rmcf, &value[1]) != NGX_OK)
    {
        return NGX_CONF_ERROR;

    } else {
        i = 2;
    }

    for ( /* void */ ; i < cf->args->nelts; i++) {

        if (ngx_strncmp(value[i].data, "sentinel=", 9) == 0) {

            if (i != 1) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "\"sentinel=\" takes the place of the "
                                   "address: \"omniroute_redis "
                                   "sentinel=IP:PORT,... master=NAME ...\"");
                return NGX_CONF_ERROR;
            }

            if (ngx_omniroute_redis_parse_sentinels(cf, rmcf, &value[i])
                != NGX_CONF_OK)
            {
                return NGX_CONF_ERROR;
            }

            continue;
        }

        if (ngx_strncmp(value[i].data, "master=", 7) == 0
            || ngx_strncmp(value[i].data, "user=", 5) == 0)
        {
            n = (value[i].data[0] == 'm') ? 7 : 5;

            s.data = value[i].data + n;
            s.len = value[i].len - n;

            if (s.len == 0 || s.len > 128) {
                goto invalid;
            }

            for (p = s.data; p < s.data + s.len; p++) {
                if (*p <= ' ' || *p >= 0x7f) {
                    goto invalid;
                }
            }

            if (n == 7) {
                rmcf->master = s;

            } else {
                rmcf->user = s;
            }

            continue;
        }

        if (ngx_strncmp(value[i].data, "tls=", 4) == 0) {

            if (ngx_strcmp(value[i].data, "tls=on") == 0) {
                rmcf->tls = 1;

            } else if (ngx_strcmp(value[i].data, "tls=off") == 0) {
                rmcf->tls = 0;

            } else {
                goto invalid;
            }

            continue;
        }

        if (ngx_strncmp(value[i].data, "tls_ca=", 7) == 0
            || ngx_strncmp(value[i].data, "tls_cert=", 9) == 0
            || ngx_strncmp(value[i].data, "tls_key=", 8) == 0
            || ngx_strncmp(value[i].data, "tls_name=", 9) == 0)
        {
            p = ngx_strlchr(value[i].data, value[i].data + value[i].len, '=');

            s.data = p + 1;
            s.len = value[i].data + value[i].len - s.data;

            if (s.len == 0) {
                goto invalid;
            }

            switch (value[i].data[4]) {
            case 'c':
                path = (value[i].data[5] == 'a') ? rmcf->tls_ca
                                                  : rmcf->tls_cert;
                break;
            case 'k':
                path = rmcf->tls_key;
                break;
            default: /* 'n' */
                path = rmcf->tls_name;
                break;
            }

            if (path.data) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "duplicate parameter \"%V\"", &value[i]);
                return NGX_CONF_ERROR;
            }

            if (value[i].data[4] != 'n'
                && ngx_conf_full_name(cf->cycle, &s, 1) != NGX_OK)
            {
                return NGX_CONF_ERROR;
            }

            switch (value[i].data[4]) {
            case 'c':
                if (value[i].data[5] == 'a') {
                    rmcf->tls_ca = s;

                } else {
                    rmcf->tls_cert = s;
                }

                break;
            case 'k':
                rmcf->tls_key = s;
                break;
            default: /* 'n' */
                rmcf->tls_name = s;
                break;
            }

            continue;
        }

        if (ngx_strncmp(value[i].data, "password=", 9) == 0) {

            if (rmcf->password.data) {
                goto duplicate;
            }

            rmcf->password.data = value[i].data + 9;
            rmcf->password.len = value[i].len - 9;

            if (rmcf->password.len == 0) {
                goto invalid;
            }

            continue;
        }

        if (ngx_strncmp(value[i].data, "password_file=", 14) == 0) {

            if (rmcf->password.data) {
                goto duplicate;
            }

            path.data = value[i].data + 14;
            path.len = value[i].len - 14;

            if (path.len == 0
                || ngx_omniroute_read_secret(cf, cf->pool, &path,
                                             NGX_OMNIROUTE_REDIS_PASSWORD_MAX,
                                             "password file",
                                             &rmcf->password)
                   != NGX_OK)
            {
                return NGX_CONF_ERROR;
            }

            continue;
        }

        if (ngx_strncmp(value[i].data, "db=", 3) == 0) {
            n = ngx_atoi(value[i].data + 3, value[i].len - 3);

            if (n == NGX_ERROR || n > 1000000) {
                goto invalid;
            }

            rmcf->db = n;
            continue;
        }

        if (ngx_strncmp(value[i].data, "prefix=", 7) == 0) {
            s.data = value[i].data + 7;
            s.len = value[i].len - 7;

            if (s.len == 0 || s.len > NGX_OMNIROUTE_REDIS_PREFIX_MAX) {
                goto invalid;
            }

            /* no glob characters: the prefix is a SCAN pattern */

            for (p = s.data; p < s.data + s.len; p++) {
                if (!(isalnum(*p) || ngx_strchr(":_-./{}", *p))) {
                    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                       "invalid parameter \"%V\": letters, "
                                       "digits and \":_-./{}\" only",
                                       &value[i]);
                    return NGX_CONF_ERROR;
                }
            }

            rmcf->prefix = s;
            continue;
        }

        if (ngx_strncmp(value[i].data, "node=", 5) == 0) {
            s.data = value[i].data + 5;
            s.len = value[i].len - 5;

            if (s.len == 0 || s.len > NGX_OMNIROUTE_REDIS_NODE_MAX) {
                goto invalid;
            }

            for (p = s.data; p < s.data + s.len; p++) {
                if (*p <= ' ' || *p >= 0x7f) {
                    goto invalid;
                }
            }

            rmcf->node = s;
            continue;
        }

        if (ngx_strncmp(value[i].data, "queue=", 6) == 0) {
            n = ngx_atoi(value[i].data + 6, value[i].len - 6);

            if (n == NGX_ERROR || n < 16 || n > 1000000) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid parameter \"%V\": must be "
                                   "between 16 and 1000000", &value[i]);
                return NGX_CONF_ERROR;
            }

            rmcf->queue = n;
            continue;
        }

        for (j = 0; times[j].name; j++) {
            n = ngx_strlen(times[j].name);

            if (ngx_strncmp(value[i].data, times[j].name, n) == 0) {
                break;
            }
        }

        if (times[j].name == NULL) {
            goto invalid;
        }

        s.data = value[i].data + n;
        s.len = value[i].len - n;

        n = ngx_parse_time(&s, 0);

        if (n == NGX_ERROR
            || (n == 0 && ngx_strcmp(times[j].name, "resync=") != 0))
        {
            goto invalid;
        }

        *(ngx_msec_t *) ((u_char *) rmcf + times[j].offset) = (ngx_msec_t) n;
    }

    if ((rmcf->sentinels == NULL) != (rmcf->master.len == 0)) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"omniroute_redis\": \"sentinel=\" and "
                           "\"master=\" go together");
        return NGX_CONF_ERROR;
    }

    if (rmcf->user.len && rmcf->password.len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"omniroute_redis\": \"user=\" requires "
                           "\"password_file=\" (or \"password=\")");
        return NGX_CONF_ERROR;
    }

    if (ngx_omniroute_redis_init_tls(cf, rmcf) != NGX_CONF_OK) {
        return NGX_CONF_ERROR;
    }

    if (rmcf->sentinels) {
        /* the name logs give the link */

        p = ngx_pnalloc(cf->pool, sizeof("sentinel:") - 1 + rmcf->master.len);
        if (p == NULL) {
            return NGX_CONF_ERROR;
        }

        rmcf->addr.data = p;
        rmcf->addr.len = ngx_sprintf(p, "sentinel:%V", &rmcf->master) - p;

    } else {
        rmcf->addr = value[1];
    }

    rmcf->file = cf->conf_file->file.name;
    rmcf->line = cf->conf_file->line;

    ngx_str_set(&name, "omniroute_redis");

    rmcf->shm_zone = ngx_shared_memory_add(cf, &name, 8 * ngx_pagesize,
                                           &ngx_http_omniroute_redis_module);
    if (rmcf->shm_zone == NULL) {
        return NGX_CONF_ERROR;
    }

    rmcf->shm_zone->init = ngx_omniroute_redis_init_zone;
    rmcf->shm_zone->data = rmcf;

    return NGX_CONF_OK;

duplicate:

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "duplicate password in \"omniroute_redis\"");
    return NGX_CONF_ERROR;

invalid:

    if (ngx_strncmp(value[i].data, "password=", 9) == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid parameter \"password=\" (empty)");

    } else {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid parameter \"%V\"", &value[i]);
    }

    return NGX_CONF_ERROR;
}


/*
 * IPv4/IPv6 literal with an optional port (6379), or unix:path.  No host
 * names: hiredis would resolve them with a blocking call on the event
 * loop.
 */

static ngx_int_t
ngx_omniroute_redis_parse_addr(ngx_conf_t *cf,
    ngx_omniroute_redis_main_conf_t *rmcf, ngx_str_t *addr)
{
    size_t                       len;
    ngx_omniroute_redis_addr_t  *a;

    if (addr->len > 5 && ngx_strncmp(addr->data, "unix:", 5) == 0) {
        len = addr->len - 5;

        if (len >= 108) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "unix socket path \"%V\" is too long", addr);
            return NGX_ERROR;
        }

        rmcf->unix_path = ngx_pnalloc(cf->pool, len + 1);
        if (rmcf->unix_path == NULL) {
            return NGX_ERROR;
        }

        ngx_memcpy(rmcf->unix_path, addr->data + 5, len);
        rmcf->unix_path[len] = '\0';

        return NGX_OK;
    }

    a = ngx_pcalloc(cf->pool, sizeof(ngx_omniroute_redis_addr_t));
    if (a == NULL) {
        return NGX_ERROR;
    }

    if (ngx_omniroute_redis_parse_host(addr->data, addr->len, 6379, a)
        != NGX_OK)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid Redis address \"%V\": an IP address with "
                           "an optional port, or \"unix:\" and a path (host "
                           "names are not resolved)", addr);
        return NGX_ERROR;
    }

    rmcf->host = a->host;
    rmcf->port = a->port;

    return NGX_OK;
}


/* IPv4 or [IPv6] literal with an optional port */

static ngx_int_t
ngx_omniroute_redis_parse_host(u_char *p, size_t len, ngx_int_t port,
    ngx_omniroute_redis_addr_t *a)
{
    u_char  *last, *colon, *host;

    last = p + len;

    if (p < last && *p == '[') {
        /* [IPv6]:port */

        colon = ngx_strlchr(p, last, ']');
        if (colon == NULL) {
            return NGX_ERROR;
        }

        host = p + 1;
        len = colon - host;
        p = colon + 1;

        if (p < last) {
            if (*p != ':') {
                return NGX_ERROR;
            }

            port = ngx_atoi(p + 1, last - p - 1);
        }

    } else {
        colon = ngx_strlchr(p, last, ':');
        host = p;

        if (colon) {
            len = colon - p;
            port = ngx_atoi(colon + 1, last - colon - 1);
        }
    }

    return ngx_omniroute_redis_conn_addr(host, len, port, a);
}


/* sentinel=IP:PORT,IP:PORT,... (port 26379 when none is given) */

static char *
ngx_omniroute_redis_parse_sentinels(ngx_conf_t *cf,
    ngx_omniroute_redis_main_conf_t *rmcf, ngx_str_t *value)
{
    u_char                      *p, *last, *comma;
    ngx_omniroute_redis_addr_t  *a;

    if (rmcf->sentinels) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "duplicate parameter \"sentinel=\"");
        return NGX_CONF_ERROR;
    }

    rmcf->sentinels = ngx_array_create(cf->pool, 3,
                                       sizeof(ngx_omniroute_redis_addr_t));
    if (rmcf->sentinels == NULL) {
        return NGX_CONF_ERROR;
    }

    p = value->data + 9;
    last = value->data + value->len;

    while (p < last) {
        comma = ngx_strlchr(p, last, ',');
        if (comma == NULL) {
            comma = last;
        }

        a = ngx_array_push(rmcf->sentinels);
        if (a == NULL) {
            return NGX_CONF_ERROR;
        }

        if (rmcf->sentinels->nelts > 16
            || ngx_omniroute_redis_parse_host(p, comma - p, 26379, a)
               != NGX_OK)
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid parameter \"%V\": at most 16 "
                               "sentinels, each an IP address with an "
                               "optional port (host names are not resolved)",
                               value);
            return NGX_CONF_ERROR;
        }

        p = comma + 1;
    }

    if (rmcf->sentinels->nelts == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid parameter \"%V\"", value);
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


/*
 * tls=on: the command and subscriber connections (not the sentinels') in
 * TLS, with hiredis_ssl (detected by the "config" script).  The context is
 * made here, so that a bad file fails "nginx -t".
 */

static char *
ngx_omniroute_redis_init_tls(ngx_conf_t *cf,
    ngx_omniroute_redis_main_conf_t *rmcf)
{
#if (NGX_OMNIROUTE_HIREDIS_SSL)
    redisSSLContext       *ssl;
    redisSSLContextError   err;
#endif

    if (!rmcf->tls) {
        if (rmcf->tls_ca.len || rmcf->tls_cert.len || rmcf->tls_key.len
            || rmcf->tls_name.len)
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "\"omniroute_redis\": \"tls_ca=\", "
                               "\"tls_cert=\", \"tls_key=\" and "
                               "\"tls_name=\" require \"tls=on\"");
            return NGX_CONF_ERROR;
        }

        return NGX_CONF_OK;
    }

#if !(NGX_OMNIROUTE_HIREDIS_SSL)

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "\"omniroute_redis\": \"tls=on\" is not available: "
                       "this module was built against a hiredis without "
                       "hiredis_ssl (libhiredis 1.0 or later with its SSL "
                       "library is needed; Debian 12's 0.14 has none)");
    return NGX_CONF_ERROR;

#else

    if (rmcf->unix_path) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"omniroute_redis\": \"tls=on\" needs an IP "
                           "address, not a unix socket");
        return NGX_CONF_ERROR;
    }

    if (rmcf->tls_ca.len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"omniroute_redis\": \"tls=on\" requires "
                           "\"tls_ca=\" (the CA file the server's "
                           "certificate is verified with)");
        return NGX_CONF_ERROR;
    }

    if ((rmcf->tls_cert.len == 0) != (rmcf->tls_key.len == 0)) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"omniroute_redis\": \"tls_cert=\" and "
                           "\"tls_key=\" go together");
        return NGX_CONF_ERROR;
    }

    (void) redisInitOpenSSL();

    err = REDIS_SSL_CTX_NONE;

    ssl = redisCreateSSLContext((const char *) rmcf->tls_ca.data, NULL,
                                rmcf->tls_cert.len
                                ? (const char *) rmcf->tls_cert.data : NULL,
                                rmcf->tls_key.len
                                ? (const char *) rmcf->tls_key.data : NULL,
                                rmcf->tls_name.len
                                ? (const char *) rmcf->tls_name.data : NULL,
                                &err);
    if (ssl == NULL) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"omniroute_redis\": TLS: %s (tls_ca \"%V\"%s)",
                           redisSSLContextGetError(err), &rmcf->tls_ca,
                           rmcf->tls_cert.len ? ", tls_cert, tls_key" : "");
        return NGX_CONF_ERROR;
    }

    rmcf->ssl = ssl;

    return NGX_CONF_OK;

#endif
}


static ngx_int_t
ngx_omniroute_redis_init_zone(ngx_shm_zone_t *shm_zone, void *data)
{
    ngx_omniroute_redis_main_conf_t  *ormcf = data;

    ngx_slab_pool_t                  *shpool;
    ngx_omniroute_redis_sh_t         *sh;
    ngx_omniroute_redis_main_conf_t  *rmcf;

    rmcf = shm_zone->data;

    if (ormcf) {
        /* reload: counters and versions stay */
        rmcf->sh = ormcf->sh;
        return NGX_OK;
    }

    shpool = (ngx_slab_pool_t *) shm_zone->shm.addr;

    if (shm_zone->shm.exists) {
        rmcf->sh = shpool->data;
        return NGX_OK;
    }

    sh = ngx_slab_calloc(shpool, sizeof(ngx_omniroute_redis_sh_t));
    if (sh == NULL) {
        return NGX_ERROR;
    }

    sh->stats.state = NGX_OMNIROUTE_REDIS_DOWN;

    shpool->data = sh;
    rmcf->sh = sh;

    return NGX_OK;
}


/* worker 0 owns the link; the other workers only read the zone */

static ngx_int_t
ngx_omniroute_redis_init_process(ngx_cycle_t *cycle)
{
    ngx_omniroute_main_conf_t        *omcf;
    ngx_omniroute_redis_main_conf_t  *rmcf;

    if ((ngx_process != NGX_PROCESS_WORKER
         && ngx_process != NGX_PROCESS_SINGLE)
        || ngx_worker != 0)
    {
        return NGX_OK;
    }

    rmcf = ngx_http_cycle_get_module_main_conf(cycle,
                                               ngx_http_omniroute_redis_module);

    if (rmcf == NULL || rmcf->addr.len == 0 || rmcf->sh == NULL) {
        return NGX_OK;
    }

    omcf = ngx_http_cycle_get_module_main_conf(cycle,
                                               ngx_http_omniroute_module);

    if (omcf == NULL || omcf->store.sh == NULL) {
        return NGX_OK;
    }

    if (ngx_omniroute_redis_mirror_init(cycle, rmcf, &omcf->store) != NGX_OK) {
        /* serving goes on without the mirror */
        ngx_log_error(NGX_LOG_ERR, cycle->log, 0,
                      "omniroute redis: could not start the link");
    }

    return NGX_OK;
}


static void
ngx_omniroute_redis_exit_process(ngx_cycle_t *cycle)
{
    ngx_omniroute_redis_mirror_exit(cycle);
}


/* variables */

static ngx_int_t
ngx_omniroute_redis_link_variable(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data)
{
    const char                   *name;
    ngx_omniroute_redis_stats_t  *stats;

    stats = ngx_omniroute_redis_stats();

    name = ngx_omniroute_redis_state_name(stats
                                          ? stats->state
                                          : NGX_OMNIROUTE_REDIS_DISABLED);

    v->data = (u_char *) name;
    v->len = ngx_strlen(name);
    v->valid = 1;
    v->no_cacheable = 1;
    v->not_found = 0;

    return NGX_OK;
}


static ngx_int_t
ngx_omniroute_redis_stats_variable(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data)
{
    char    *s;
    json_t  *doc;

    doc = ngx_omniroute_redis_stats_json();
    if (doc == NULL) {
        return NGX_ERROR;
    }

    s = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);

    if (s == NULL) {
        return NGX_ERROR;
    }

    v->len = ngx_strlen(s);
    v->data = ngx_pnalloc(r->pool, v->len);

    if (v->data == NULL) {
        free(s);
        return NGX_ERROR;
    }

    ngx_memcpy(v->data, s, v->len);
    free(s);

    v->valid = 1;
    v->no_cacheable = 1;
    v->not_found = 0;

    return NGX_OK;
}


json_t *
ngx_omniroute_redis_stats_json(void)
{
    json_t                           *doc;
    ngx_omniroute_redis_stats_t      *st;
    ngx_omniroute_redis_main_conf_t  *rmcf;

    st = ngx_omniroute_redis_stats();

    if (st == NULL) {
        return json_pack("{s:s}", "state", "disabled");
    }

    rmcf = ngx_http_cycle_get_module_main_conf(ngx_cycle,
                                               ngx_http_omniroute_redis_module);

    doc = json_pack("{s:s, s:s#, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I,"
                    " s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
                    "state", ngx_omniroute_redis_state_name(st->state),
                    "node", rmcf->node.data, (int) rmcf->node.len,
                    "state_since", (json_int_t) st->state_since,
                    "owner", (json_int_t) st->owner,
                    "connects", (json_int_t) st->connects,
                    "failures", (json_int_t) st->failures,
                    "syncs", (json_int_t) st->syncs,
                    "loaded", (json_int_t) st->loaded,
                    "published", (json_int_t) st->published,
                    "received", (json_int_t) st->received,
                    "applied", (json_int_t) st->applied,
                    "write_backs", (json_int_t) st->write_backs,
                    "overflows", (json_int_t) st->overflows,
                    "errors", (json_int_t) st->errors,
                    "pending", (json_int_t) st->pending,
                    "lag_ms", (json_int_t) st->lag_ms,
                    "rejected", (json_int_t) st->rejected,
                    "refills", (json_int_t) st->refills);

    return doc;
}
