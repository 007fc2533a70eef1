
/*
 * Copyright (C) ngx_omniroute authors
 *
 * Session affinity (R-AFF-1): a request naming a session (X-Session-Id,
 * x-codex-session-id or x-omniroute-session, the first present) is sent
 * to the connection pinned for (model, session) while that connection is
 * eligible; the connection that serves it is (re)pinned for
 * omniroute_session_affinity.  Pins live in the shared zone (and Redis);
 * the session id itself is stored only as a SHA-256 prefix.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <openssl/sha.h>

#include "ngx_omniroute_request.h"
#include "or_pin.h"


#define NGX_OMNIROUTE_SESSION_HASH_LEN  16      /* bytes of SHA-256 kept */


typedef struct {
    ngx_omniroute_connection_t   *conn;
    or_msec_t                     now;
    or_msec_t                     ttl;
} ngx_omniroute_pin_arg_t;


static ngx_table_elt_t *ngx_omniroute_session_header(ngx_http_request_t *r);
static ngx_uint_t ngx_omniroute_pin_update(void *value, void *arg,
    or_msec_t *expires);


static ngx_str_t  ngx_omniroute_session_headers[] = {
    ngx_string("x-session-id"),
    ngx_string("x-codex-session-id"),
    ngx_string("x-omniroute-session"),
    ngx_null_string
};


/* the client's session header, by the order of the list above */

static ngx_table_elt_t *
ngx_omniroute_session_header(ngx_http_request_t *r)
{
    ngx_str_t                  *name;
    ngx_table_elt_t            *h;
    ngx_omniroute_list_iter_t   it;

    for (name = ngx_omniroute_session_headers; name->len; name++) {

        ngx_omniroute_list_start(&it, &r->headers_in.headers);

        while ((h = ngx_omniroute_list_next(&it)) != NULL) {

            if (h->key.len == name->len && h->value.len
                && ngx_strncmp(h->lowcase_key, name->data, name->len) == 0)
            {
                return h;
            }
        }
    }

    return NULL;
}


/* ctx->pin_key = "<model>|<hex of SHA-256(session)>", when affinity is on */

ngx_int_t
ngx_omniroute_affinity_key(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx)
{
    u_char            *p, md[SHA256_DIGEST_LENGTH];
    ngx_table_elt_t   *h;

    if (ctx->lcf->session_affinity == 0) {
        return NGX_OK;
    }

    h = ngx_omniroute_session_header(r);
    if (h == NULL) {
        return NGX_OK;
    }

    if (ctx->model.len + 1 + 2 * NGX_OMNIROUTE_SESSION_HASH_LEN
        > NGX_OMNIROUTE_KEY_MAX)
    {
        return NGX_OK;
    }

    (void) SHA256(h->value.data, h->value.len, md);

    p = ngx_pnalloc(r->pool, ctx->model.len + 1
                             + 2 * NGX_OMNIROUTE_SESSION_HASH_LEN);
    if (p == NULL) {
        return NGX_ERROR;
    }

    ctx->pin_key.data = p;

    p = ngx_cpymem(p, ctx->model.data, ctx->model.len);
    *p++ = '|';
    p = ngx_hex_dump(p, md, NGX_OMNIROUTE_SESSION_HASH_LEN);

    ctx->pin_key.len = p - ctx->pin_key.data;

    return NGX_OK;
}


/* the connection the session is pinned to (empty: none, or expired) */

ngx_int_t
ngx_omniroute_affinity_pinned(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx,
    ngx_str_t *conn)
{
    size_t                      len;
    or_pin_t                    pin;
    const char                 *id;
    ngx_omniroute_main_conf_t  *omcf;

    ngx_str_null(conn);

    if (ctx->pin_key.len == 0) {
        return NGX_OK;
    }

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);

    if (omcf->shm_zone == NULL
        || ngx_omniroute_store_read(&omcf->store, NGX_OMNIROUTE_T_PIN,
                                    &ctx->pin_key, &pin, sizeof(or_pin_t))
           != NGX_OK)
    {
        return NGX_OK;
    }

    id = or_pin_conn(&pin, ngx_omniroute_now(), &len);
    if (id == NULL || len == 0) {
        return NGX_OK;
    }

    conn->data = ngx_pnalloc(r->pool, len);
    if (conn->data == NULL) {
        return NGX_ERROR;
    }

    ngx_memcpy(conn->data, id, len);
    conn->len = len;

    return NGX_OK;
}


/* the connection that served the session is (re)pinned */

void
ngx_omniroute_affinity_record(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_attempt_t *a)
{
    ngx_omniroute_pin_arg_t     arg;
    ngx_omniroute_main_conf_t  *omcf;

    if (ctx->pin_key.len == 0) {
        return;
    }

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);

    arg.conn = a->cand->conn;
    arg.now = ngx_omniroute_now();
    arg.ttl = (or_msec_t) ctx->lcf->session_affinity;

    (void) ngx_omniroute_store_update(&omcf->store, NGX_OMNIROUTE_T_PIN,
                                      &ctx->pin_key, sizeof(or_pin_t),
                                      ngx_omniroute_pin_update, &arg, 0);
}


static ngx_uint_t
ngx_omniroute_pin_update(void *value, void *arg, or_msec_t *expires)
{
    ngx_omniroute_pin_arg_t *pa = arg;

    or_pin_t  *pin = value;

    if (!or_pin_set(pin, (const char *) pa->conn->id.data, pa->conn->id.len,
                    pa->now, pa->ttl))
    {
        return NGX_OMNIROUTE_UNCHANGED;
    }

    *expires = pin->until;

    return NGX_OMNIROUTE_CHANGED;
}
