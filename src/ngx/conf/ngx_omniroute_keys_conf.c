
/*
 * Copyright (C) ngx_omniroute authors
 *
 * Client keys (see ngx_omniroute_keys.h):
 *
 *   omniroute_client_key ID sha256=HEX | file=PATH [models=NAME,...]
 *       [connections=ID,...] [paths=/PREFIX,...] [scope=lease:exclusive];
 *   omniroute_client_keys on | off | ID ...;
 *   omniroute_session_leases;
 *   omniroute_lease_ttl TIME [max=TIME];
 *   omniroute_client_key_brake rate=N r/s|r/m [burst=N] | off;
 *
 * A key is kept only as its SHA-256: given so, or read from a file and
 * hashed when the configuration is loaded (the text is wiped from memory
 * right after).  Connection and key names are resolved once the whole
 * http {} block is read.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "ngx_omniroute_keys.h"
#include "ngx_omniroute_lease_store.h"
#include "ngx_omniroute_budget_store.h"


#define NGX_OMNIROUTE_LEASE_TTL       (300 * 1000)
#define NGX_OMNIROUTE_LEASE_TTL_MAX   (3600 * 1000)
#define NGX_OMNIROUTE_LEASE_TTL_LIMIT (30LL * 86400 * 1000)


static ngx_int_t ngx_omniroute_keys_list(ngx_conf_t *cf, ngx_str_t *arg,
    size_t skip, ngx_array_t *list, ngx_uint_t kind);
static ngx_int_t ngx_omniroute_keys_init_zone(ngx_shm_zone_t *shm_zone,
    void *data);
static void ngx_omniroute_keys_slots(ngx_omniroute_keys_conf_t *kc,
    ngx_omniroute_keys_sh_t *sh);


#define NGX_OMNIROUTE_LIST_MODELS  0
#define NGX_OMNIROUTE_LIST_CONNS   1
#define NGX_OMNIROUTE_LIST_PATHS   2


ngx_omniroute_keys_conf_t *
ngx_omniroute_keys_conf(ngx_conf_t *cf, ngx_omniroute_main_conf_t *omcf)
{
    ngx_omniroute_keys_conf_t  *kc;

    if (omcf->keys) {
        return omcf->keys;
    }

    kc = ngx_pcalloc(cf->pool, sizeof(ngx_omniroute_keys_conf_t));
    if (kc == NULL) {
        return NULL;
    }

    /*
     * set by ngx_pcalloc():
     *
     *     kc->lease_keys = 0;
     *     kc->brake = { 0, 0 };
     *     kc->brake_set = 0;
     *     kc->shm_zone = NULL;
     *     kc->sh = NULL;
     *     kc->shpool = NULL;
     *     kc->budget = NULL;
     */

    if (ngx_array_init(&kc->keys, cf->pool, 4,
                       sizeof(ngx_omniroute_client_key_t))
        != NGX_OK)
    {
        return NULL;
    }

    kc->lease_ttl = NGX_CONF_UNSET_MSEC;
    kc->lease_ttl_max = NGX_CONF_UNSET_MSEC;

    omcf->keys = kc;

    return kc;
}


char *
ngx_omniroute_client_key(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_omniroute_main_conf_t *omcf = conf;

    ngx_str_t                  *value, name, secret;
    ngx_uint_t                  i, have_secret, have_conns;
    ngx_omniroute_keys_conf_t  *kc;
    ngx_omniroute_client_key_t *key, *k;

    kc = ngx_omniroute_keys_conf(cf, omcf);
    if (kc == NULL) {
        return NGX_CONF_ERROR;
    }

    value = cf->args->elts;

    if (!or_keys_valid_id((const char *) value[1].data, value[1].len)) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid client key id \"%V\": use 1 to %d "
                           "letters, digits, \"-\", \"_\" or \".\"",
                           &value[1], OR_KEYS_ID_MAX);
        return NGX_CONF_ERROR;
    }

    k = kc->keys.elts;

    for (i = 0; i < kc->keys.nelts; i++) {
        if (k[i].id.len == value[1].len
            && ngx_strncmp(k[i].id.data, value[1].data, value[1].len) == 0)
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "client key \"%V\" is declared twice",
                               &value[1]);
            return NGX_CONF_ERROR;
        }
    }

    if (kc->keys.nelts >= NGX_OMNIROUTE_KEYS_MAX) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "too many client keys: at most %d",
                           NGX_OMNIROUTE_KEYS_MAX);
        return NGX_CONF_ERROR;
    }

    key = ngx_array_push(&kc->keys);
    if (key == NULL) {
        return NGX_CONF_ERROR;
    }

    ngx_memzero(key, sizeof(ngx_omniroute_client_key_t));

    key->id = value[1];
    key->index = kc->keys.nelts - 1;

    if (ngx_array_init(&key->models, cf->pool, 2, sizeof(or_keys_str_t))
        != NGX_OK
        || ngx_array_init(&key->conn_names, cf->pool, 2, sizeof(ngx_str_t))
           != NGX_OK
        || ngx_array_init(&key->paths, cf->pool, 2, sizeof(or_keys_str_t))
           != NGX_OK)
    {
        return NGX_CONF_ERROR;
    }

    have_secret = 0;
    have_conns = 0;

    for (i = 2; i < cf->args->nelts; i++) {

        if (ngx_strncmp(value[i].data, "sha256=", 7) == 0) {
            if (have_secret++) {
                goto duplicate;
            }

            if (!or_keys_hex32((const char *) value[i].data + 7,
                               value[i].len - 7, key->hash))
            {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid \"sha256=\" of client key "
                                   "\"%V\": expected 64 hexadecimal digits "
                                   "(echo -n KEY | sha256sum)", &key->id);
                return NGX_CONF_ERROR;
            }

            continue;
        }

        if (ngx_strncmp(value[i].data, "file=", 5) == 0) {
            if (have_secret++) {
                goto duplicate;
            }

            name.data = value[i].data + 5;
            name.len = value[i].len - 5;

            /* the text stays in temp_pool only until it is hashed */

            if (ngx_omniroute_read_secret(cf, cf->temp_pool, &name,
                                          OR_KEYS_SECRET_MAX,
                                          "client key file", &secret)
                != NGX_OK)
            {
                return NGX_CONF_ERROR;
            }

            if (!or_keys_valid_secret((const char *) secret.data,
                                      secret.len))
            {
                ngx_explicit_memzero(secret.data, secret.len);
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "client key \"%V\" from \"%V\" must be "
                                   "%d to %d printable characters without "
                                   "spaces", &key->id, &name,
                                   OR_KEYS_SECRET_MIN, OR_KEYS_SECRET_MAX);
                return NGX_CONF_ERROR;
            }

            if (ngx_omniroute_sha256(secret.data, secret.len, key->hash)
                != NGX_OK)
            {
                ngx_explicit_memzero(secret.data, secret.len);
                return NGX_CONF_ERROR;
            }

            ngx_explicit_memzero(secret.data, secret.len);

            continue;
        }

        if (ngx_strncmp(value[i].data, "models=", 7) == 0) {
            if (key->models.nelts) {
                goto duplicate;
            }

            if (ngx_omniroute_keys_list(cf, &value[i], 7, &key->models,
                                        NGX_OMNIROUTE_LIST_MODELS)
                != NGX_OK)
            {
                return NGX_CONF_ERROR;
            }

            continue;
        }

        if (ngx_strncmp(value[i].data, "connections=", 12) == 0) {
            if (have_conns++) {
                goto duplicate;
            }

            if (ngx_omniroute_keys_list(cf, &value[i], 12, &key->conn_names,
                                        NGX_OMNIROUTE_LIST_CONNS)
                != NGX_OK)
            {
                return NGX_CONF_ERROR;
            }

            continue;
        }

        if (ngx_strncmp(value[i].data, "paths=", 6) == 0) {
            if (key->paths.nelts) {
                goto duplicate;
            }

            if (ngx_omniroute_keys_list(cf, &value[i], 6, &key->paths,
                                        NGX_OMNIROUTE_LIST_PATHS)
                != NGX_OK)
            {
                return NGX_CONF_ERROR;
            }

            continue;
        }

        if (value[i].len == sizeof("scope=lease:exclusive") - 1
            && ngx_strncmp(value[i].data, "scope=lease:exclusive",
                           value[i].len) == 0)
        {
            if (key->lease) {
                goto duplicate;
            }

            key->lease = 1;
            continue;
        }

        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid parameter \"%V\" of client key \"%V\"%s",
                           &value[i], &key->id,
                           ngx_strncmp(value[i].data, "scope=", 6) == 0
                           ? ": the only scope is \"lease:exclusive\"" : "");
        return NGX_CONF_ERROR;
    }

    if (!have_secret) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "client key \"%V\" needs \"sha256=HEX\" or "
                           "\"file=PATH\"", &key->id);
        return NGX_CONF_ERROR;
    }

    k = kc->keys.elts;

    for (i = 0; i + 1 < kc->keys.nelts; i++) {
        if (CRYPTO_memcmp(k[i].hash, key->hash, 32) == 0) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "client keys \"%V\" and \"%V\" are the same "
                               "key", &k[i].id, &key->id);
            return NGX_CONF_ERROR;
        }
    }

    if (key->lease) {
        if (key->conn_names.nelts == 0) {
            /* R-LEASE-1 */
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "client key \"%V\" with "
                               "\"scope=lease:exclusive\" needs "
                               "\"connections=\": the connections its "
                               "leases may hold", &key->id);
            return NGX_CONF_ERROR;
        }

        if (key->conn_names.nelts > NGX_OMNIROUTE_LEASE_CONNS_MAX) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "client key \"%V\" with "
                               "\"scope=lease:exclusive\" may name at most "
                               "%d connections", &key->id,
                               NGX_OMNIROUTE_LEASE_CONNS_MAX);
            return NGX_CONF_ERROR;
        }

        kc->lease_keys++;
    }

    return NGX_CONF_OK;

duplicate:

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "duplicate parameter \"%V\" of client key \"%V\"",
                       &value[i], &key->id);
    return NGX_CONF_ERROR;
}


/* "a,b,c" after skip bytes of arg: items checked by kind */

static ngx_int_t
ngx_omniroute_keys_list(ngx_conf_t *cf, ngx_str_t *arg, size_t skip,
    ngx_array_t *list, ngx_uint_t kind)
{
    u_char         *p, *last, *comma;
    size_t          len;
    ngx_str_t      *name;
    ngx_uint_t      ok;
    or_keys_str_t  *s;

    p = arg->data + skip;
    last = arg->data + arg->len;

    if (p == last) {
        goto invalid;
    }

    while (p <= last) {
        comma = ngx_strlchr(p, last, ',');
        if (comma == NULL) {
            comma = last;
        }

        len = comma - p;

        switch (kind) {

        case NGX_OMNIROUTE_LIST_MODELS:
            ok = or_keys_valid_pattern((const char *) p, len);
            break;

        case NGX_OMNIROUTE_LIST_CONNS:
            ok = (len > 0 && len <= NGX_OMNIROUTE_KEY_MAX);
            break;

        default: /* NGX_OMNIROUTE_LIST_PATHS */
            ok = or_keys_valid_path((const char *) p, len);
            break;
        }

        if (!ok) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid item \"%*s\" in \"%V\"%s", len, p,
                               arg,
                               kind == NGX_OMNIROUTE_LIST_PATHS
                               ? ": a path prefix starts with \"/\" and has "
                                 "no \"?\", \"#\", \"%\" or \"*\""
                               : "");
            return NGX_ERROR;
        }

        if (kind == NGX_OMNIROUTE_LIST_CONNS) {
            name = ngx_array_push(list);
            if (name == NULL) {
                return NGX_ERROR;
            }

            name->data = p;
            name->len = len;

        } else {
            s = ngx_array_push(list);
            if (s == NULL) {
                return NGX_ERROR;
            }

            s->data = (const char *) p;
            s->len = len;
        }

        p = comma + 1;
    }

    return NGX_OK;

invalid:

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "empty list in \"%V\"", arg);
    return NGX_ERROR;
}


char *
ngx_omniroute_client_keys(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_omniroute_loc_conf_t *olcf = conf;

    ngx_str_t                 *value, *name;
    ngx_uint_t                 i;
    ngx_omniroute_keys_loc_t  *kl;

    if (olcf->client_keys) {
        return "is duplicate";
    }

    kl = ngx_pcalloc(cf->pool, sizeof(ngx_omniroute_keys_loc_t));
    if (kl == NULL) {
        return NGX_CONF_ERROR;
    }

    if (ngx_array_init(&kl->names, cf->pool, 2, sizeof(ngx_str_t))
        != NGX_OK)
    {
        return NGX_CONF_ERROR;
    }

    kl->file = cf->conf_file->file.name;
    kl->line = cf->conf_file->line;

    value = cf->args->elts;

    if (cf->args->nelts == 2
        && value[1].len == 3 && ngx_strncmp(value[1].data, "off", 3) == 0)
    {
        kl->mode = NGX_OMNIROUTE_KEYS_OFF;
        olcf->client_keys = kl;
        return NGX_CONF_OK;
    }

    kl->mode = NGX_OMNIROUTE_KEYS_ON;

    if (cf->args->nelts == 2
        && value[1].len == 2 && ngx_strncmp(value[1].data, "on", 2) == 0)
    {
        olcf->client_keys = kl;
        return NGX_CONF_OK;
    }

    for (i = 1; i < cf->args->nelts; i++) {
        if (!or_keys_valid_id((const char *) value[i].data, value[i].len)) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid parameter \"%V\": expected on, off "
                               "or client key ids", &value[i]);
            return NGX_CONF_ERROR;
        }

        name = ngx_array_push(&kl->names);
        if (name == NULL) {
            return NGX_CONF_ERROR;
        }

        *name = value[i];
    }

    olcf->client_keys = kl;

    return NGX_CONF_OK;
}


char *
ngx_omniroute_session_leases(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_omniroute_loc_conf_t *olcf = conf;

    ngx_http_core_loc_conf_t  *clcf;

    if (olcf->session_leases) {
        return "is duplicate";
    }

    if (olcf->pass_uri.data) {
        return "cannot be used in an \"omniroute_pass\" location";
    }

    olcf->session_leases = 1;

    clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
    clcf->handler = ngx_omniroute_lease_handler;

    return NGX_CONF_OK;
}


char *
ngx_omniroute_lease_ttl(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_omniroute_main_conf_t *omcf = conf;

    ngx_str_t                  *value, s;
    ngx_msec_t                  ttl, max;
    ngx_omniroute_keys_conf_t  *kc;

    kc = ngx_omniroute_keys_conf(cf, omcf);
    if (kc == NULL) {
        return NGX_CONF_ERROR;
    }

    if (kc->lease_ttl != NGX_CONF_UNSET_MSEC) {
        return "is duplicate";
    }

    value = cf->args->elts;

    ttl = ngx_parse_time(&value[1], 0);
    max = NGX_OMNIROUTE_LEASE_TTL_MAX;

    if (cf->args->nelts == 3) {
        if (ngx_strncmp(value[2].data, "max=", 4) != 0) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid parameter \"%V\"", &value[2]);
            return NGX_CONF_ERROR;
        }

        s.data = value[2].data + 4;
        s.len = value[2].len - 4;

        max = ngx_parse_time(&s, 0);

        if (max == (ngx_msec_t) NGX_ERROR || max < 1000
            || (int64_t) max > NGX_OMNIROUTE_LEASE_TTL_LIMIT)
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid value \"%V\" of \"max\": must be "
                               "between 1s and 30d", &value[2]);
            return NGX_CONF_ERROR;
        }
    }

    if (ttl == (ngx_msec_t) NGX_ERROR || ttl < 1000 || ttl > max) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid lease ttl \"%V\": must be between 1s and "
                           "the maximum (%M ms)", &value[1], max);
        return NGX_CONF_ERROR;
    }

    kc->lease_ttl = ttl;
    kc->lease_ttl_max = max;

    return NGX_CONF_OK;
}


/*
 * omniroute_client_key_brake rate=10r/s [burst=20] | off (R-BRAKE-1):
 * failed key checks per client address, as limit_req counts requests.
 */

char *
ngx_omniroute_client_key_brake(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf)
{
    ngx_omniroute_main_conf_t *omcf = conf;

    u_char                     *p;
    size_t                      len;
    ngx_int_t                   n, scale;
    ngx_str_t                  *value;
    ngx_uint_t                  i, rate_set;
    ngx_omniroute_keys_conf_t  *kc;

    kc = ngx_omniroute_keys_conf(cf, omcf);
    if (kc == NULL) {
        return NGX_CONF_ERROR;
    }

    if (kc->brake_set) {
        return "is duplicate";
    }

    kc->brake_set = 1;
    value = cf->args->elts;

    if (cf->args->nelts == 2 && ngx_strcmp(value[1].data, "off") == 0) {
        kc->brake.rate = 0;
        kc->brake.burst = 0;
        return NGX_CONF_OK;
    }

    rate_set = 0;
    kc->brake.burst = 0;

    for (i = 1; i < cf->args->nelts; i++) {

        if (ngx_strncmp(value[i].data, "rate=", 5) == 0) {
            p = value[i].data + 5;
            len = value[i].len - 5;
            scale = 1;

            if (len > 3 && ngx_strncmp(p + len - 3, "r/s", 3) == 0) {
                len -= 3;

            } else if (len > 3 && ngx_strncmp(p + len - 3, "r/m", 3) == 0) {
                len -= 3;
                scale = 60;

            } else {
                len = 0;
            }

            n = len ? ngx_atoi(p, len) : NGX_ERROR;

            if (n <= 0 || n > 1000000) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid rate \"%V\": expected "
                                   "rate=Nr/s or rate=Nr/m", &value[i]);
                return NGX_CONF_ERROR;
            }

            kc->brake.rate = (uint64_t) n * 1000 / scale;
            rate_set = 1;
            continue;
        }

        if (ngx_strncmp(value[i].data, "burst=", 6) == 0) {
            n = ngx_atoi(value[i].data + 6, value[i].len - 6);

            if (n < 0 || n > 1000000) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid burst \"%V\"", &value[i]);
                return NGX_CONF_ERROR;
            }

            kc->brake.burst = (uint64_t) n;
            continue;
        }

        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid parameter \"%V\"", &value[i]);
        return NGX_CONF_ERROR;
    }

    if (!rate_set) {
        return "needs rate=";
    }

    return NGX_CONF_OK;
}


/*
 * Names resolved: each key's connections, as a bitmap by the index of
 * the connection; the zone of the counters and the lease lock.
 */

ngx_int_t
ngx_omniroute_keys_init(ngx_conf_t *cf, ngx_omniroute_main_conf_t *omcf)
{
    size_t                       size;
    ngx_str_t                   *name, zone;
    ngx_uint_t                   i, j, k, n;
    ngx_omniroute_keys_conf_t   *kc;
    ngx_omniroute_client_key_t  *key;
    ngx_omniroute_connection_t  *c;

    kc = omcf->keys;

    if (kc == NULL) {
        return NGX_OK;
    }

    if (!kc->brake_set) {
        /* 10r/s burst=20: a client with its key never meets it */
        kc->brake.rate = 10000;
        kc->brake.burst = 20;
    }

    ngx_conf_init_msec_value(kc->lease_ttl, NGX_OMNIROUTE_LEASE_TTL);
    ngx_conf_init_msec_value(kc->lease_ttl_max,
                             ngx_max(NGX_OMNIROUTE_LEASE_TTL_MAX,
                                     kc->lease_ttl));

    if (kc->keys.nelts == 0) {
        /* limits of keys never declared: budget_init's error */
        return NGX_OK;
    }

    key = kc->keys.elts;
    c = omcf->connections.elts;
    n = omcf->connections.nelts;

    for (i = 0; i < kc->keys.nelts; i++) {

        if (key[i].conn_names.nelts == 0) {
            continue;
        }

        key[i].conns = ngx_pcalloc(cf->pool, n / 8 + 1);
        if (key[i].conns == NULL) {
            return NGX_ERROR;
        }

        name = key[i].conn_names.elts;

        for (j = 0; j < key[i].conn_names.nelts; j++) {

            for (k = 0; k < n; k++) {
                if (c[k].id.len == name[j].len
                    && ngx_strncmp(c[k].id.data, name[j].data, name[j].len)
                       == 0)
                {
                    break;
                }
            }

            if (k == n) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "client key \"%V\" names unknown "
                                   "connection \"%V\"", &key[i].id,
                                   &name[j]);
                return NGX_ERROR;
            }

            if (key[i].lease && name[j].len > OR_LEASE_ID_MAX) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "client key \"%V\": connection \"%V\" "
                                   "cannot be leased: its id is longer "
                                   "than %d bytes", &key[i].id, &name[j],
                                   OR_LEASE_ID_MAX);
                return NGX_ERROR;
            }

            key[i].conns[k / 8] |= (u_char) (1 << (k % 8));
        }
    }

    ngx_str_set(&zone, NGX_OMNIROUTE_KEYS_ZONE);

    size = ngx_align(sizeof(ngx_omniroute_keys_sh_t), ngx_pagesize)
           + 8 * ngx_pagesize;

    kc->shm_zone = ngx_shared_memory_add(cf, &zone, size,
                                         &ngx_http_omniroute_module);
    if (kc->shm_zone == NULL) {
        return NGX_ERROR;
    }

    if (kc->shm_zone->data) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "zone \"%V\" is already used by another module",
                           &zone);
        return NGX_ERROR;
    }

    kc->shm_zone->init = ngx_omniroute_keys_init_zone;
    kc->shm_zone->data = kc;

    return NGX_OK;
}


static ngx_int_t
ngx_omniroute_keys_init_zone(ngx_shm_zone_t *shm_zone, void *data)
{
    ngx_omniroute_keys_conf_t *okc = data;

    ngx_slab_pool_t            *shpool;
    ngx_omniroute_keys_sh_t    *sh;
    ngx_omniroute_keys_conf_t  *kc;

    kc = shm_zone->data;
    shpool = (ngx_slab_pool_t *) shm_zone->shm.addr;

    if (okc) {
        /* a reload: the counters stay, by key id */
        sh = okc->sh;

    } else if (shm_zone->shm.exists) {
        sh = shpool->data;

    } else {
        sh = ngx_slab_calloc(shpool, sizeof(ngx_omniroute_keys_sh_t));
        if (sh == NULL) {
            return NGX_ERROR;
        }

        shpool->data = sh;
    }

    kc->sh = sh;
    kc->shpool = shpool;

    ngx_omniroute_keys_slots(kc, sh);

    return NGX_OK;
}


/*
 * Each key gets the counter slot of its id, or a free one; slots of ids
 * no longer configured are reused when none is free.
 */

static void
ngx_omniroute_keys_slots(ngx_omniroute_keys_conf_t *kc,
    ngx_omniroute_keys_sh_t *sh)
{
    u_char                       used[NGX_OMNIROUTE_KEYS_MAX / 8];
    ngx_uint_t                   i, j;
    ngx_omniroute_key_stats_t   *ks;
    ngx_omniroute_client_key_t  *key;

    ngx_memzero(used, sizeof(used));

    key = kc->keys.elts;
    ks = sh->keys;

    for (i = 0; i < kc->keys.nelts; i++) {
        key[i].slot = NGX_OMNIROUTE_KEYS_MAX;

        for (j = 0; j < NGX_OMNIROUTE_KEYS_MAX; j++) {
            if (ngx_strlen(ks[j].id) == key[i].id.len
                && ngx_strncmp(ks[j].id, key[i].id.data, key[i].id.len) == 0)
            {
                key[i].slot = j;
                used[j / 8] |= (u_char) (1 << (j % 8));
                break;
            }
        }
    }

    for (i = 0; i < kc->keys.nelts; i++) {
        if (key[i].slot < NGX_OMNIROUTE_KEYS_MAX) {
            continue;
        }

        /* a free slot first, else one of a key no longer configured */

        for (j = 0; j < NGX_OMNIROUTE_KEYS_MAX; j++) {
            if (ks[j].id[0] == '\0' && !ngx_omniroute_bit(used, j)) {
                break;
            }
        }

        if (j == NGX_OMNIROUTE_KEYS_MAX) {
            for (j = 0; j < NGX_OMNIROUTE_KEYS_MAX; j++) {
                if (!ngx_omniroute_bit(used, j)) {
                    break;
                }
            }
        }

        ngx_memzero(&ks[j], sizeof(ngx_omniroute_key_stats_t));
        ngx_memcpy(ks[j].id, key[i].id.data, key[i].id.len);

        key[i].slot = j;
        used[j / 8] |= (u_char) (1 << (j % 8));
    }
}


/*
 * Called from the gateway's merge_loc_conf: omniroute_client_keys is
 * inherited; a list of ids is resolved (once, where it was set); a lease
 * endpoint needs keys with the lease scope.
 */

char *
ngx_omniroute_keys_merge(ngx_conf_t *cf, ngx_omniroute_loc_conf_t *prev,
    ngx_omniroute_loc_conf_t *conf)
{
    ngx_str_t                   *name;
    ngx_uint_t                   i, j, nkeys;
    ngx_omniroute_keys_loc_t    *kl;
    ngx_omniroute_keys_conf_t   *kc;
    ngx_omniroute_main_conf_t   *omcf;
    ngx_omniroute_client_key_t  *key;

    if (conf->client_keys == NULL) {
        conf->client_keys = prev->client_keys;
    }

    omcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_omniroute_module);
    kc = omcf->keys;
    nkeys = kc ? kc->keys.nelts : 0;
    kl = conf->client_keys;

    if (kl && kl->mode == NGX_OMNIROUTE_KEYS_ON && nkeys == 0) {
        ngx_omniroute_conf_error(cf, &kl->file, kl->line,
                                 "\"omniroute_client_keys\" is on but no "
                                 "\"omniroute_client_key\" is declared");
        return NGX_CONF_ERROR;
    }

    if (kl && kl->names.nelts && kl->allow == NULL) {
        kl->allow = ngx_pcalloc(cf->pool, nkeys / 8 + 1);
        if (kl->allow == NULL) {
            return NGX_CONF_ERROR;
        }

        name = kl->names.elts;
        key = kc->keys.elts;

        for (i = 0; i < kl->names.nelts; i++) {
            for (j = 0; j < nkeys; j++) {
                if (key[j].id.len == name[i].len
                    && ngx_strncmp(key[j].id.data, name[i].data, name[i].len)
                       == 0)
                {
                    break;
                }
            }

            if (j == nkeys) {
                ngx_omniroute_conf_error(cf, &kl->file, kl->line,
                                         "\"omniroute_client_keys\" names "
                                         "unknown client key \"%V\"",
                                         &name[i]);
                return NGX_CONF_ERROR;
            }

            kl->allow[j / 8] |= (u_char) (1 << (j % 8));
        }
    }

    if (conf->session_leases) {
        if (conf->pass_uri.data) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "\"omniroute_session_leases\" cannot be used "
                               "in an \"omniroute_pass\" location");
            return NGX_CONF_ERROR;
        }

        if (kc == NULL || kc->lease_keys == 0) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "\"omniroute_session_leases\" needs an "
                               "\"omniroute_client_key\" with "
                               "\"scope=lease:exclusive\"");
            return NGX_CONF_ERROR;
        }

        if (kl && kl->mode == NGX_OMNIROUTE_KEYS_OFF) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "\"omniroute_session_leases\" cannot be used "
                               "with \"omniroute_client_keys off\": leases "
                               "belong to client keys");
            return NGX_CONF_ERROR;
        }
    }

    return NGX_CONF_OK;
}


ngx_omniroute_client_key_t *
ngx_omniroute_keys_find(ngx_omniroute_keys_conf_t *kc, u_char *hash)
{
    ngx_uint_t                   i;
    ngx_omniroute_client_key_t  *key, *found;

    found = NULL;
    key = kc->keys.elts;

    /* every key is compared: the time does not depend on which matched */

    for (i = 0; i < kc->keys.nelts; i++) {
        if (CRYPTO_memcmp(key[i].hash, hash, 32) == 0) {
            found = &key[i];
        }
    }

    return found;
}


ngx_int_t
ngx_omniroute_sha256(u_char *data, size_t len, u_char *md)
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


ngx_uint_t
ngx_omniroute_keys_conn_allowed(ngx_omniroute_client_key_t *key,
    ngx_omniroute_main_conf_t *omcf, ngx_omniroute_connection_t *conn)
{
    ngx_uint_t  i;

    if (key == NULL || key->conns == NULL) {
        return 1;
    }

    i = conn - (ngx_omniroute_connection_t *) omcf->connections.elts;

    if (i >= omcf->connections.nelts) {
        return 0;
    }

    return ngx_omniroute_bit(key->conns, i) ? 1 : 0;
}
