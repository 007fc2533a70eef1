
/*
 * Copyright (C) ngx_omniroute authors
 *
 * Client keys (R-LEASE-1).  When a location has client keys (declared
 * with omniroute_client_key; omniroute_client_keys off or a list of ids
 * per location), a request must present one as "Authorization: Bearer
 * KEY" (OpenAI SDKs) or "x-api-key: KEY" (Anthropic SDKs): the key is
 * hashed (SHA-256) and compared with every declared hash in constant
 * time; no key or a wrong one is answered 401 before the body is read,
 * and so is an Authorization that is not a Bearer token, even beside an
 * x-api-key (the client meant another scheme; which credential counts
 * would be ours to guess).  Failed checks are braked per client address
 * (omniroute_client_key_brake, R-BRAKE-1): beyond the budget the
 * answer is 429 with Retry-After and the presented key is not compared.
 * Then the key's limits: the location (403 key_not_allowed) and path
 * prefixes (403 path_not_allowed) before the body, its models once the
 * body is scanned (403 model_not_allowed), its connections filter the
 * model's routes (403 connection_not_allowed when none is left).  A key
 * never reaches a provider (headers.c) nor a log: $omniroute_client_key
 * is the key's id, and so are the metrics' labels.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute_ctx.h"


static ngx_table_elt_t *ngx_omniroute_auth_header(ngx_http_request_t *r,
    const char *lowcase, size_t len);
static ngx_int_t ngx_omniroute_client_key_variable(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);
static ngx_int_t ngx_omniroute_client_key_log(ngx_http_request_t *r);
static void ngx_omniroute_client_key_count(ngx_omniroute_main_conf_t *omcf,
    ngx_uint_t reason);
static size_t ngx_omniroute_brake_addr(ngx_http_request_t *r, u_char *addr);
static ngx_omniroute_brake_slot_t *ngx_omniroute_brake_slot(
    ngx_omniroute_keys_conf_t *kc, u_char *addr, size_t len, or_msec_t now,
    ngx_uint_t add);
static ngx_int_t ngx_omniroute_brake_check(ngx_http_request_t *r,
    ngx_omniroute_keys_conf_t *kc);
static void ngx_omniroute_brake_fail(ngx_http_request_t *r,
    ngx_omniroute_keys_conf_t *kc);


static ngx_http_variable_t  ngx_omniroute_client_key_vars[] = {

    { ngx_string("omniroute_client_key"), NULL,
      ngx_omniroute_client_key_variable, 0, NGX_HTTP_VAR_NOCACHEABLE, 0 },

      ngx_http_null_variable
};


/* the request's client key, its location and its paths */

ngx_int_t
ngx_omniroute_client_key_check(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx)
{
    u_char                      *msg, md[32];
    size_t                       len;
    ngx_int_t                    rc;
    ngx_str_t                    token;
    const char                  *tok;
    ngx_table_elt_t             *h;
    ngx_omniroute_keys_loc_t    *kl;
    ngx_omniroute_keys_conf_t   *kc;
    ngx_omniroute_main_conf_t   *omcf;
    ngx_omniroute_client_key_t  *key;

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);
    kc = omcf->keys;
    kl = ctx->lcf->client_keys;

    if (kc == NULL || kc->keys.nelts == 0
        || (kl && kl->mode == NGX_OMNIROUTE_KEYS_OFF))
    {
        return NGX_DECLINED;
    }

    ngx_str_null(&token);

    h = r->headers_in.authorization;

    if (h && !or_keys_bearer((const char *) h->value.data, h->value.len,
                             &tok, &len))
    {
        /* Basic, or any scheme but Bearer: refused as documented */
        ngx_omniroute_client_key_count(omcf, NGX_OMNIROUTE_AUTH_INVALID);

        return ngx_omniroute_auth_reject(r, NGX_HTTP_UNAUTHORIZED,
                                         "invalid_api_key",
                                         "the Authorization header is not "
                                         "a Bearer token: send the key as "
                                         "\"Authorization: Bearer KEY\" or "
                                         "\"x-api-key: KEY\" alone");
    }

    if (h) {
        token.data = (u_char *) tok;
        token.len = len;

    } else {
        h = ngx_omniroute_auth_header(r, "x-api-key", 9);

        if (h) {
            token = h->value;

            while (token.len && token.data[token.len - 1] == ' ') {
                token.len--;
            }
        }
    }

    if (token.len == 0) {
        ngx_omniroute_client_key_count(omcf, NGX_OMNIROUTE_AUTH_MISSING);

        return ngx_omniroute_auth_reject(r, NGX_HTTP_UNAUTHORIZED,
                                         "invalid_api_key",
                                         "missing API key: send it as "
                                         "\"Authorization: Bearer KEY\" or "
                                         "\"x-api-key: KEY\"");
    }

    if (kc->brake.rate && kc->sh) {
        rc = ngx_omniroute_brake_check(r, kc);

        if (rc != NGX_DECLINED) {
            return rc;
        }
    }

    key = NULL;

    if (ngx_omniroute_sha256(token.data, token.len, md) == NGX_OK) {
        key = ngx_omniroute_keys_find(kc, md);
    }

    if (key == NULL) {
        ngx_omniroute_client_key_count(omcf, NGX_OMNIROUTE_AUTH_INVALID);

        if (kc->brake.rate && kc->sh) {
            ngx_omniroute_brake_fail(r, kc);
        }

        /* the presented value is never logged */
        ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                      "omniroute: invalid client key");

        return ngx_omniroute_auth_reject(r, NGX_HTTP_UNAUTHORIZED,
                                         "invalid_api_key",
                                         "invalid API key");
    }

    ctx->auth = ngx_pcalloc(r->pool, sizeof(ngx_omniroute_auth_t));
    if (ctx->auth == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ctx->auth->key = key;

    if (kl && kl->allow && !ngx_omniroute_bit(kl->allow, key->index)) {
        msg = ngx_pnalloc(r->pool, key->id.len + 64);
        if (msg == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        ngx_sprintf(msg, "the key \"%V\" may not be used here%Z", &key->id);

        return ngx_omniroute_auth_reject(r, NGX_HTTP_FORBIDDEN,
                                         "key_not_allowed", (char *) msg);
    }

    /*
     * the normalized URI: dot segments resolved, escapes decoded; the
     * location's model list is open to any key (handler.c tells)
     */

    if (!or_keys_match_path(key->paths.elts, key->paths.nelts,
                            (const char *) r->uri.data, r->uri.len)
        && !ctx->models_get)
    {
        msg = ngx_pnalloc(r->pool, key->id.len + r->uri.len + 64);
        if (msg == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        ngx_sprintf(msg, "the key \"%V\" may not use the path \"%V\"%Z",
                    &key->id, &r->uri);

        return ngx_omniroute_auth_reject(r, NGX_HTTP_FORBIDDEN,
                                         "path_not_allowed", (char *) msg);
    }

    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "omniroute: client key \"%V\"", &key->id);

    /* a managed request's lease headers: lease.c, called next */
    return NGX_DECLINED;
}


/* the key's models: the name the client asked for (an alias or combo) */

ngx_int_t
ngx_omniroute_client_key_model(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx)
{
    u_char                      *msg;
    ngx_omniroute_client_key_t  *key;

    if (ctx->auth == NULL || r->method != NGX_HTTP_POST) {
        /* a GET passed through is no model's (omniroute_models pass=) */
        return NGX_OK;
    }

    key = ctx->auth->key;

    if (or_keys_match_name(key->models.elts, key->models.nelts,
                           (const char *) ctx->model.data, ctx->model.len))
    {
        return NGX_OK;
    }

    msg = ngx_pnalloc(r->pool, key->id.len + ctx->model.len + 64);
    if (msg == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ngx_sprintf(msg, "the key \"%V\" may not use the model \"%V\"%Z",
                &key->id, &ctx->model);

    return ngx_omniroute_reject(ctx, NGX_HTTP_FORBIDDEN, "model_not_allowed",
                                (char *) msg);
}


/*
 * The routes this request may take: those on the key's connections; for
 * a managed request, those on the connection its lease holds.
 */

ngx_int_t
ngx_omniroute_client_key_routes(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx)
{
    u_char                      *msg;
    ngx_uint_t                   i, n, ok;
    ngx_omniroute_auth_t        *auth;
    ngx_omniroute_route_t       *routes;
    ngx_omniroute_connection_t  *conn;
    ngx_omniroute_main_conf_t   *omcf;

    auth = ctx->auth;

    if (auth == NULL || (!auth->managed && auth->key->conns == NULL)) {
        return NGX_OK;
    }

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);

    routes = NULL;
    n = 0;

    for (i = 0; i < ctx->nroutes; i++) {
        conn = ctx->routes[i].conn;

        ok = ngx_omniroute_keys_conn_allowed(auth->key, omcf, conn);

        if (ok && auth->managed) {
            ok = (conn->id.len == auth->lease.conn_len
                  && ngx_memcmp(conn->id.data, auth->lease.conn,
                                conn->id.len) == 0);
        }

        if (!ok) {
            if (routes == NULL) {
                /* the first one left out: copy those kept so far */

                routes = ngx_palloc(r->pool, ctx->nroutes
                                             * sizeof(ngx_omniroute_route_t));
                if (routes == NULL) {
                    return NGX_HTTP_INTERNAL_SERVER_ERROR;
                }

                ngx_memcpy(routes, ctx->routes,
                           n * sizeof(ngx_omniroute_route_t));
            }

            continue;
        }

        if (routes) {
            routes[n] = ctx->routes[i];
        }

        n++;
    }

    if (routes == NULL) {
        return NGX_OK;
    }

    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "omniroute: key \"%V\" keeps %ui of %ui routes",
                   &auth->key->id, n, ctx->nroutes);

    if (n == 0) {
        msg = ngx_pnalloc(r->pool, auth->key->id.len + ctx->model.len
                                   + OR_LEASE_ID_MAX + 96);
        if (msg == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        if (auth->managed) {
            ngx_sprintf(msg, "the connection \"%*s\" of the lease does not "
                        "serve the model \"%V\"%Z",
                        (size_t) auth->lease.conn_len, auth->lease.conn,
                        &ctx->model);

            return ngx_omniroute_reject(ctx, NGX_HTTP_CONFLICT,
                                        "lease_connection_mismatch",
                                        (char *) msg);
        }

        ngx_sprintf(msg, "the key \"%V\" may not use any connection that "
                    "serves the model \"%V\"%Z", &auth->key->id,
                    &ctx->model);

        return ngx_omniroute_reject(ctx, NGX_HTTP_FORBIDDEN,
                                    "connection_not_allowed", (char *) msg);
    }

    ctx->routes = routes;
    ctx->nroutes = n;

    return NGX_OK;
}


static ngx_table_elt_t *
ngx_omniroute_auth_header(ngx_http_request_t *r, const char *lowcase,
    size_t len)
{
    ngx_table_elt_t            *h;
    ngx_omniroute_list_iter_t   it;

    ngx_omniroute_list_start(&it, &r->headers_in.headers);

    while ((h = ngx_omniroute_list_next(&it)) != NULL) {
        if (h->hash && h->key.len == len
            && ngx_strncmp(h->lowcase_key, lowcase, len) == 0)
        {
            return h;
        }
    }

    return NULL;
}


ngx_int_t
ngx_omniroute_client_key_add_variables(ngx_conf_t *cf)
{
    ngx_http_variable_t  *var, *v;

    for (v = ngx_omniroute_client_key_vars; v->name.len; v++) {
        var = ngx_http_add_variable(cf, &v->name, v->flags);
        if (var == NULL) {
            return NGX_ERROR;
        }

        var->get_handler = v->get_handler;
        var->data = v->data;
    }

    return NGX_OK;
}


/* $omniroute_client_key: the id of the request's key, never the key */

static ngx_int_t
ngx_omniroute_client_key_variable(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data)
{
    ngx_omniroute_ctx_t  *ctx;

    ctx = ngx_http_get_module_ctx(r->main, ngx_http_omniroute_module);

    if (ctx == NULL || ctx->auth == NULL) {
        v->not_found = 1;
        return NGX_OK;
    }

    v->data = ctx->auth->key->id.data;
    v->len = ctx->auth->key->id.len;
    v->valid = 1;
    v->no_cacheable = 1;
    v->not_found = 0;

    return NGX_OK;
}


/* with client keys, a log phase handler counts each key's requests */

ngx_int_t
ngx_omniroute_client_key_init(ngx_conf_t *cf)
{
    ngx_http_handler_pt        *h;
    ngx_http_core_main_conf_t  *cmcf;
    ngx_omniroute_main_conf_t  *omcf;

    omcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_omniroute_module);

    if (omcf->keys == NULL || omcf->keys->keys.nelts == 0) {
        return NGX_OK;
    }

    cmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module);

    h = ngx_array_push(&cmcf->phases[NGX_HTTP_LOG_PHASE].handlers);
    if (h == NULL) {
        return NGX_ERROR;
    }

    *h = ngx_omniroute_client_key_log;

    return NGX_OK;
}


static ngx_int_t
ngx_omniroute_client_key_log(ngx_http_request_t *r)
{
    ngx_uint_t                  status, class;
    ngx_omniroute_ctx_t        *ctx;
    ngx_omniroute_keys_conf_t  *kc;
    ngx_omniroute_main_conf_t  *omcf;

    if (r != r->main) {
        return NGX_OK;
    }

    ctx = ngx_http_get_module_ctx(r, ngx_http_omniroute_module);

    if (ctx == NULL || ctx->auth == NULL) {
        return NGX_OK;
    }

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);
    kc = omcf->keys;

    if (kc == NULL || kc->sh == NULL
        || ctx->auth->key->slot >= NGX_OMNIROUTE_KEYS_MAX)
    {
        return NGX_OK;
    }

    status = r->err_status ? r->err_status : r->headers_out.status;
    class = status / 100;

    if (class < 1 || class > NGX_OMNIROUTE_KEYS_CLASSES) {
        class = 4;          /* no answer: the client went away (499) */
    }

    (void) ngx_atomic_fetch_add(
               &kc->sh->keys[ctx->auth->key->slot].requests[class - 1], 1);

    return NGX_OK;
}


static void
ngx_omniroute_client_key_count(ngx_omniroute_main_conf_t *omcf,
    ngx_uint_t reason)
{
    if (omcf->keys->sh) {
        (void) ngx_atomic_fetch_add(&omcf->keys->sh->auth[reason], 1);
    }
}


/*
 * The brake's address of the request (realip's, when it applies): an
 * IPv4 address, the /64 of an IPv6 one (what one client holds), one for
 * every other family.
 */

static size_t
ngx_omniroute_brake_addr(ngx_http_request_t *r, u_char *addr)
{
    struct sockaddr_in   *sin;
#if (NGX_HAVE_INET6)
    struct sockaddr_in6  *sin6;
#endif

    switch (r->connection->sockaddr->sa_family) {

    case AF_INET:
        sin = (struct sockaddr_in *) r->connection->sockaddr;
        ngx_memcpy(addr, &sin->sin_addr, 4);
        return 4;

#if (NGX_HAVE_INET6)
    case AF_INET6:
        sin6 = (struct sockaddr_in6 *) r->connection->sockaddr;

        if (IN6_IS_ADDR_V4MAPPED(&sin6->sin6_addr)) {
            ngx_memcpy(addr, &sin6->sin6_addr.s6_addr[12], 4);
            return 4;
        }

        ngx_memcpy(addr, sin6->sin6_addr.s6_addr, 8);
        return 8;
#endif

    default:
        addr[0] = 0;
        return 1;
    }
}


/*
 * The address's slot, the zone locked: its own, else (add) a free or
 * idle one of its probe sequence, else the least full of them.
 */

static ngx_omniroute_brake_slot_t *
ngx_omniroute_brake_slot(ngx_omniroute_keys_conf_t *kc, u_char *addr,
    size_t len, or_msec_t now, ngx_uint_t add)
{
    uint32_t                     hash;
    ngx_uint_t                   i;
    ngx_omniroute_brake_slot_t  *s, *free, *least;

    hash = ngx_crc32_short(addr, len);
    free = NULL;
    least = NULL;

    for (i = 0; i < NGX_OMNIROUTE_BRAKE_PROBE; i++) {
        s = &kc->sh->brake[(hash + i) % NGX_OMNIROUTE_BRAKE_SLOTS];

        if (s->len == len && ngx_memcmp(s->addr, addr, len) == 0) {
            return s;
        }

        if (free == NULL
            && (s->len == 0 || or_brake_idle(&kc->brake, &s->brake, now)))
        {
            free = s;
        }

        if (least == NULL || s->brake.excess < least->brake.excess) {
            least = s;
        }
    }

    if (!add) {
        return NULL;
    }

    s = free ? free : least;

    ngx_memcpy(s->addr, addr, len);
    s->len = (u_char) len;
    s->brake.excess = 0;
    s->brake.last = now;

    return s;
}


/*
 * Beyond the budget: 429 with Retry-After, the key is not compared (the
 * answer sent); NGX_DECLINED: the key may be checked.
 */

static ngx_int_t
ngx_omniroute_brake_check(ngx_http_request_t *r,
    ngx_omniroute_keys_conf_t *kc)
{
    u_char                      *p, addr[16];
    size_t                       len;
    ngx_str_t                    name, value;
    or_msec_t                    now, wait;
    ngx_omniroute_brake_slot_t  *s;

    len = ngx_omniroute_brake_addr(r, addr);
    now = ngx_omniroute_now();

    ngx_shmtx_lock(&kc->shpool->mutex);

    s = ngx_omniroute_brake_slot(kc, addr, len, now, 0);
    wait = s ? or_brake_wait(&kc->brake, &s->brake, now) : 0;

    ngx_shmtx_unlock(&kc->shpool->mutex);

    if (wait == 0) {
        return NGX_DECLINED;
    }

    (void) ngx_atomic_fetch_add(&kc->sh->braked, 1);

    ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                  "omniroute: client key checks braked for %V, %M ms",
                  &r->connection->addr_text, (ngx_msec_t) wait);

    p = ngx_pnalloc(r->pool, NGX_TIME_T_LEN);
    if (p == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ngx_str_set(&name, "Retry-After");
    value.data = p;
    value.len = ngx_sprintf(p, "%M", (ngx_msec_t) ((wait + 999) / 1000)) - p;

    if (ngx_omniroute_add_header(r, &name, &value) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return ngx_omniroute_auth_reject(r, NGX_HTTP_TOO_MANY_REQUESTS,
                                     "too_many_key_failures",
                                     "too many failed API key checks from "
                                     "this address; retry later");
}


static void
ngx_omniroute_brake_fail(ngx_http_request_t *r, ngx_omniroute_keys_conf_t *kc)
{
    u_char                      addr[16];
    size_t                      len;
    or_msec_t                   now;
    ngx_omniroute_brake_slot_t *s;

    len = ngx_omniroute_brake_addr(r, addr);
    now = ngx_omniroute_now();

    ngx_shmtx_lock(&kc->shpool->mutex);

    s = ngx_omniroute_brake_slot(kc, addr, len, now, 1);
    or_brake_fail(&kc->brake, &s->brake, now);

    ngx_shmtx_unlock(&kc->shpool->mutex);
}
