
/*
 * Copyright (C) ngx_omniroute authors
 *
 * Session affinity (R-AFF-1): a request naming a session (X-Session-Id,
 * x-codex-session-id or x-omniroute-session, the first present) is sent
 * to the connection pinned for (model, session) while that connection is
 * eligible; the connection that serves it is (re)pinned for
 * omniroute_session_affinity.  Pins live in the shared zone (and Redis);
 * the session id itself is stored only as a SHA-256 prefix.  The session
 * id is a name (R-NAME-1): printable ASCII without spaces, at most
 * OR_NAME_SESSION_MAX bytes, else 400 naming the header.  Pins are the
 * client key's (R-AFF-2): with a key, its id is hashed with the session
 * (or the conversation), so one tenant's session id never steers
 * another's requests.
 *
 * Cache-warm affinity (omniroute_cache_affinity): a request without a
 * session is pinned the same way by its conversation's start, the system
 * prompt and the messages through the first user turn (or_prefix_find(),
 * a bounded walk of the body), which every later turn repeats: one
 * conversation stays on one account, whose provider keeps its prompt
 * cached, while other conversations spread.  Only a SHA-256 prefix of
 * those bytes is kept.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <openssl/sha.h>

#include "ngx_omniroute_ctx.h"
#include "or_name.h"
#include "or_pin.h"
#include "or_prefix.h"


#define NGX_OMNIROUTE_SESSION_HASH_LEN  16      /* bytes of SHA-256 kept */

/* the bounds of the walk for a conversation's start */
#define NGX_OMNIROUTE_PREFIX_SCAN       (1024 * 1024)
#define NGX_OMNIROUTE_PREFIX_SPAN       (64 * 1024)


/* a request's pin (ctx->pin): only with a session or conversation key */
struct ngx_omniroute_pin_req_s {
    ngx_str_t                     key;          /* model|session hash, or
                                                   model#prefix hash */
    ngx_msec_t                    ttl;
};


typedef struct {
    ngx_omniroute_connection_t   *conn;
    or_msec_t                     now;
    or_msec_t                     ttl;
} ngx_omniroute_pin_arg_t;


static ngx_table_elt_t *ngx_omniroute_session_header(ngx_http_request_t *r);
static ngx_int_t ngx_omniroute_session_check(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, ngx_table_elt_t *h);
static void ngx_omniroute_affinity_hash(ngx_omniroute_ctx_t *ctx,
    u_char *data, size_t len, u_char *md);
static ngx_int_t ngx_omniroute_affinity_prefix(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, u_char *md);
static ngx_int_t ngx_omniroute_pin_key(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, u_char sep, u_char *md, ngx_msec_t ttl);
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


/*
 * ctx->pin, its key: "<model>|<hex of SHA-256(session)>" with session
 * affinity and a session header, else "<model>#<hex of the conversation's
 * hash>" with cache affinity; else none
 */

ngx_int_t
ngx_omniroute_affinity_key(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx)
{
    u_char            md[SHA256_DIGEST_LENGTH];
    ngx_int_t         rc;
    ngx_table_elt_t  *h;

    h = ctx->lcf->session_affinity ? ngx_omniroute_session_header(r) : NULL;

    if (h && ngx_omniroute_session_check(r, ctx, h) != NGX_OK) {
        return NGX_HTTP_BAD_REQUEST;
    }

    if (ctx->model.len + 1 + 2 * NGX_OMNIROUTE_SESSION_HASH_LEN
        > NGX_OMNIROUTE_KEY_MAX)
    {
        return NGX_OK;
    }

    if (ctx->lcf->session_affinity) {
        if (h) {
            ngx_omniroute_affinity_hash(ctx, h->value.data, h->value.len,
                                        md);

            return ngx_omniroute_pin_key(r, ctx, '|', md,
                                         ctx->lcf->session_affinity);
        }
    }

    if (ctx->lcf->cache_affinity == 0) {
        return NGX_OK;
    }

    rc = ngx_omniroute_affinity_prefix(r, ctx, md);

    if (rc != NGX_OK) {
        return (rc == NGX_DECLINED) ? NGX_OK : rc;
    }

    return ngx_omniroute_pin_key(r, ctx, '#', md, ctx->lcf->cache_affinity);
}


/* a session id is a name (R-NAME-1); the answer names the header */

static ngx_int_t
ngx_omniroute_session_check(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx,
    ngx_table_elt_t *h)
{
    u_char        *msg;
    size_t         at;
    or_name_rc_e   rc;

    rc = or_name_check((const char *) h->value.data, h->value.len,
                       OR_NAME_SESSION_MAX, &at);

    if (rc == OR_NAME_OK) {
        return NGX_OK;
    }

    msg = ngx_pnalloc(r->pool, h->key.len + 160);
    if (msg == NULL) {
        return NGX_ERROR;
    }

    /* the header's name is nginx's (a token), never the value */

    if (rc == OR_NAME_TOO_LONG) {
        ngx_sprintf(msg, "the header \"%V\" is longer than %d bytes%Z",
                    &h->key, OR_NAME_SESSION_MAX);

    } else {
        ngx_sprintf(msg, "the header \"%V\" has %s at byte %uz; a session "
                    "id is printable ASCII without spaces%Z", &h->key,
                    or_name_problem(rc), at);
    }

    (void) ngx_omniroute_reject(ctx, NGX_HTTP_BAD_REQUEST,
                                "invalid_session_id", (char *) msg);

    return NGX_DECLINED;
}


/*
 * SHA-256 of data, of the client key's id and data when a key applies
 * (R-AFF-2): the pins of two keys never meet.
 */

static void
ngx_omniroute_affinity_hash(ngx_omniroute_ctx_t *ctx, u_char *data,
    size_t len, u_char *md)
{
    u_char      *p, buf[4 + OR_KEYS_ID_MAX + 1 + OR_NAME_SESSION_MAX];
    ngx_str_t   *id;

    id = (ctx->auth != NULL) ? &ctx->auth->key->id : NULL;

    /* data: a checked session id or two digests, never longer */

    if (id == NULL || id->len > OR_KEYS_ID_MAX || len > OR_NAME_SESSION_MAX)
    {
        (void) SHA256(data, len, md);
        return;
    }

    p = ngx_cpymem(buf, "key:", 4);
    p = ngx_cpymem(p, id->data, id->len);
    *p++ = '\0';
    p = ngx_cpymem(p, data, len);

    (void) SHA256(buf, p - buf, md);
}


/*
 * SHA-256 of the conversation's start: of the hashes of the system prompt
 * and of the messages through the first user turn.  NGX_DECLINED: the
 * body has no messages to go by.
 */

static ngx_int_t
ngx_omniroute_affinity_prefix(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx,
    u_char *md)
{
    u_char        parts[2 * SHA256_DIGEST_LENGTH];
    or_prefix_t   p;

    if (!or_prefix_find((const char *) ctx->body.data, ctx->body.len,
                        NGX_OMNIROUTE_PREFIX_SCAN, NGX_OMNIROUTE_PREFIX_SPAN,
                        &p))
    {
        return NGX_DECLINED;
    }

    (void) SHA256(ctx->body.data + p.system.start,
                  p.system.end - p.system.start, parts);
    (void) SHA256(ctx->body.data + p.messages.start,
                  p.messages.end - p.messages.start,
                  parts + SHA256_DIGEST_LENGTH);
    ngx_omniroute_affinity_hash(ctx, parts, sizeof(parts), md);

    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "omniroute affinity: conversation of %uz + %uz bytes%s",
                   p.system.end - p.system.start,
                   p.messages.end - p.messages.start,
                   p.complete ? "" : " (cut)");

    return NGX_OK;
}


/* the pin and its key in one allocation */

static ngx_int_t
ngx_omniroute_pin_key(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx,
    u_char sep, u_char *md, ngx_msec_t ttl)
{
    u_char                   *p;
    ngx_omniroute_pin_req_t  *pin;

    pin = ngx_palloc(r->pool, sizeof(ngx_omniroute_pin_req_t)
                              + ctx->model.len + 1
                              + 2 * NGX_OMNIROUTE_SESSION_HASH_LEN);
    if (pin == NULL) {
        return NGX_ERROR;
    }

    p = (u_char *) (pin + 1);
    pin->key.data = p;

    p = ngx_cpymem(p, ctx->model.data, ctx->model.len);
    *p++ = sep;
    p = ngx_hex_dump(p, md, NGX_OMNIROUTE_SESSION_HASH_LEN);

    pin->key.len = p - pin->key.data;
    pin->ttl = ttl;

    ctx->pin = pin;

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

    if (ctx->pin == NULL) {
        return NGX_OK;
    }

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);

    if (omcf->shm_zone == NULL
        || ngx_omniroute_store_read(&omcf->store, NGX_OMNIROUTE_T_PIN,
                                    &ctx->pin->key, &pin, sizeof(or_pin_t))
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

    if (ctx->pin == NULL) {
        return;
    }

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);

    arg.conn = a->cand->conn;
    arg.now = ngx_omniroute_now();
    arg.ttl = (or_msec_t) ctx->pin->ttl;

    (void) ngx_omniroute_store_update(&omcf->store, NGX_OMNIROUTE_T_PIN,
                                      &ctx->pin->key, sizeof(or_pin_t),
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
