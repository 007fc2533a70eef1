
/*
 * Copyright (C) ngx_omniroute authors
 *
 * Exclusive session leases (R-LEASE-2..4) on the request path:
 *
 *   - the lifecycle endpoint (omniroute_session_leases): POST
 *     {"action":"acquire"|"renew"|"release", ...} authenticated by a
 *     client key with scope lease:exclusive; on the zone alone, or in
 *     Redis (ngx_omniroute_lease_remote) when omniroute_redis is set, the
 *     request then waiting for the reply without blocking the worker;
 *   - a managed request (X-OmniRoute-Lease-Owner and -Generation): its
 *     lease is checked before the body is read (an unknown owner, a
 *     stale generation or an expired lease never reaches a provider) and
 *     its routes are those of the leased connection (client_keys.c);
 *   - dispatch: a managed request's connection must still be its lease's
 *     (the final dispatch binds key id, connection id and generation);
 *     any other request passes over connections held by a lease; when
 *     leases held every candidate left, 429 lease-capacity-unavailable.
 *
 * The owner token is made here (RAND_bytes, 32 bytes, base64url) and
 * sent once, in the answer to the acquire that made it; only its SHA-256
 * is kept, and neither is ever logged.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <openssl/rand.h>

#include "ngx_omniroute_ctx.h"
#include "ngx_omniroute_lease_store.h"
#include "or_plan.h"


#define NGX_OMNIROUTE_LEASE_BODY_MAX  16384
#define NGX_OMNIROUTE_HTTP_GONE       410


typedef struct {
    ngx_http_request_t           *request;
    ngx_omniroute_ctx_t          *ctx;
    ngx_omniroute_lease_op_t      op;
    ngx_str_t                     conns[NGX_OMNIROUTE_LEASE_CONNS_MAX];
    u_char                        eligible[NGX_OMNIROUTE_LEASE_CONNS_MAX];
    char                          token[OR_LEASE_TOKEN_LEN + 1];
    ngx_uint_t                    fresh;        /* a new owner token */
    void                         *handle;       /* of the remote call */
    ngx_uint_t                    pending;
} ngx_omniroute_lease_req_t;


static void ngx_omniroute_lease_body_handler(ngx_http_request_t *r);
static ngx_int_t ngx_omniroute_lease_parse(ngx_omniroute_lease_req_t *lr,
    ngx_str_t *body);
static ngx_int_t ngx_omniroute_lease_connections(
    ngx_omniroute_lease_req_t *lr, json_t *connection);
static ngx_uint_t ngx_omniroute_lease_eligible(
    ngx_omniroute_main_conf_t *omcf, ngx_omniroute_connection_t *conn,
    or_msec_t now);
static ngx_int_t ngx_omniroute_lease_generation(json_t *v, uint64_t *gen);
static void ngx_omniroute_lease_done(void *data,
    ngx_omniroute_lease_op_t *op);
static void ngx_omniroute_lease_cleanup(void *data);
static ngx_int_t ngx_omniroute_lease_answer(ngx_omniroute_lease_req_t *lr);
static ngx_int_t ngx_omniroute_lease_fail(ngx_http_request_t *r,
    ngx_uint_t status, const char *code, const char *message);
static ngx_int_t ngx_omniroute_lease_capacity(ngx_http_request_t *r,
    or_msec_t retry, const char *message);
static json_t *ngx_omniroute_lease_json(or_lease_t *l, or_msec_t now,
    or_msec_t ttl);
static ngx_table_elt_t *ngx_omniroute_lease_header(ngx_http_request_t *r,
    const char *lowcase, size_t len);


/* exclusion reasons at dispatch, recognized by their address */
static const char  ngx_omniroute_lease_held[] = "leased";
static const char  ngx_omniroute_lease_lost[] = "lease_lost";


static const char  *ngx_omniroute_lease_fields[] = {
    "action", "owner", "generation", "ttl_s", "connection", NULL
};


/* the lifecycle endpoint */

ngx_int_t
ngx_omniroute_lease_handler(ngx_http_request_t *r)
{
    ngx_int_t             rc;
    ngx_str_t             name, value;
    ngx_omniroute_ctx_t  *ctx;

    if (r != r->main) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ctx = ngx_pcalloc(r->pool, sizeof(ngx_omniroute_ctx_t));
    if (ctx == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ctx->request = r;
    ctx->lcf = ngx_http_get_module_loc_conf(r, ngx_http_omniroute_module);

    ngx_http_set_ctx(r, ctx, ngx_http_omniroute_module);

    rc = ngx_omniroute_client_key_check(r, ctx);
    if (rc != NGX_DECLINED) {
        return rc;
    }

    if (ctx->auth == NULL) {
        /* no key applies here (cannot happen: checked at merge) */
        return ngx_omniroute_auth_reject(r, NGX_HTTP_UNAUTHORIZED,
                                         "invalid_api_key",
                                         "invalid API key");
    }

    if (r->method != NGX_HTTP_POST) {
        ngx_str_set(&name, "Allow");
        ngx_str_set(&value, "POST");

        if (ngx_omniroute_add_header(r, &name, &value) != NGX_OK) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        return ngx_omniroute_auth_reject(r, NGX_HTTP_NOT_ALLOWED,
                                         "method_not_allowed",
                                         "only POST is supported here");
    }

    if (!ctx->auth->key->lease) {
        return ngx_omniroute_auth_reject(r, NGX_HTTP_FORBIDDEN,
                                         "lease_scope_required",
                                         "the key has no scope "
                                         "\"lease:exclusive\"");
    }

    if (r->headers_in.content_length_n > NGX_OMNIROUTE_LEASE_BODY_MAX) {
        return ngx_omniroute_auth_reject(r,
                                         NGX_HTTP_REQUEST_ENTITY_TOO_LARGE,
                                         "request_too_large",
                                         "a lease request is at most 16k");
    }

    r->request_body_in_single_buf = 1;

    rc = ngx_http_read_client_request_body(r,
                                           ngx_omniroute_lease_body_handler);

    if (rc >= NGX_HTTP_SPECIAL_RESPONSE) {
        return rc;
    }

    return NGX_DONE;
}


static void
ngx_omniroute_lease_body_handler(ngx_http_request_t *r)
{
    ngx_int_t                   rc;
    ngx_str_t                   body;
    ngx_http_cleanup_t         *cln;
    ngx_omniroute_ctx_t        *ctx;
    ngx_omniroute_keys_conf_t  *kc;
    ngx_omniroute_main_conf_t  *omcf;
    ngx_omniroute_lease_req_t  *lr;

    ctx = ngx_http_get_module_ctx(r, ngx_http_omniroute_module);
    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);
    kc = omcf->keys;

    rc = ngx_omniroute_body_text(r, NGX_OMNIROUTE_LEASE_BODY_MAX, &body);

    if (rc == NGX_DECLINED) {
        ngx_http_finalize_request(r,
            ngx_omniroute_lease_fail(r, NGX_HTTP_REQUEST_ENTITY_TOO_LARGE,
                                     "request_too_large",
                                     "a lease request is at most 16k"));
        return;
    }

    if (rc != NGX_OK) {
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }

    lr = ngx_pcalloc(r->pool, sizeof(ngx_omniroute_lease_req_t));
    if (lr == NULL) {
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }

    lr->request = r;
    lr->ctx = ctx;
    lr->op.key = ctx->auth->key->id;
    lr->op.conns = lr->conns;
    lr->op.eligible = lr->eligible;
    lr->op.now = ngx_omniroute_now();
    lr->op.ttl = (or_msec_t) kc->lease_ttl;

    /* NGX_DECLINED: valid; anything else: answered */

    rc = ngx_omniroute_lease_parse(lr, &body);

    if (rc != NGX_DECLINED) {
        ngx_http_finalize_request(r, rc);
        return;
    }

    if (ngx_omniroute_lease_remote && ngx_omniroute_lease_remote->run) {

        cln = ngx_http_cleanup_add(r, 0);
        if (cln == NULL) {
            ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
            return;
        }

        rc = ngx_omniroute_lease_remote->run(&lr->op,
                                             ngx_omniroute_lease_done, lr,
                                             &lr->handle);

        if (rc == NGX_DONE) {
            lr->pending = 1;
            cln->handler = ngx_omniroute_lease_cleanup;
            cln->data = lr;
            return;
        }

        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                      "omniroute lease: Redis is not reachable; lease "
                      "requests are refused until it is");

        ngx_http_finalize_request(r,
            ngx_omniroute_lease_fail(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                                     "lease_backend_unavailable",
                                     "leases are shared by the cluster "
                                     "through Redis, which is not "
                                     "reachable now; retry later"));
        return;
    }

    if (ngx_omniroute_lease_run(&omcf->store, &kc->shpool->mutex, &lr->op)
        != NGX_OK)
    {
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }

    ngx_http_finalize_request(r, ngx_omniroute_lease_answer(lr));
}


/*
 * The body: {"action", "owner"?, "generation"?, "ttl_s"?, "connection"?}
 * validated as a whole before anything is done.  NGX_DECLINED: valid;
 * else the request was answered (with what to finalize it).
 */

static ngx_int_t
ngx_omniroute_lease_parse(ngx_omniroute_lease_req_t *lr, ngx_str_t *body)
{
    u_char               *msg, raw[OR_LEASE_TOKEN_RAW];
    json_t               *doc, *action, *owner, *gen, *ttl, *conn, *v;
    json_int_t            ttl_s;
    const char           *key, *name, **f;
    json_error_t          err;
    ngx_http_request_t   *r;
    ngx_omniroute_keys_conf_t  *kc;
    ngx_omniroute_main_conf_t  *omcf;

    r = lr->request;
    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);
    kc = omcf->keys;

    if (body->len == 0) {
        return ngx_omniroute_lease_fail(r, NGX_HTTP_BAD_REQUEST,
                                        "invalid_json",
                                        "the request body is empty; "
                                        "expected {\"action\": ...}");
    }

    doc = json_loadb((const char *) body->data, body->len,
                     JSON_REJECT_DUPLICATES, &err);

    if (doc == NULL || !json_is_object(doc)) {
        if (doc) {
            json_decref(doc);
        }

        return ngx_omniroute_lease_fail(r, NGX_HTTP_BAD_REQUEST,
                                        "invalid_json",
                                        "the request body must be a JSON "
                                        "object");
    }

    json_object_foreach(doc, key, v) {
        for (f = ngx_omniroute_lease_fields; *f; f++) {
            if (ngx_strcmp(key, *f) == 0) {
                break;
            }
        }

        if (*f == NULL) {
            msg = ngx_pnalloc(r->pool, 64 + ngx_min(ngx_strlen(key), 64));
            if (msg == NULL) {
                json_decref(doc);
                return NGX_HTTP_INTERNAL_SERVER_ERROR;
            }

            ngx_sprintf(msg, "unknown field \"%*s\"%Z",
                        ngx_min(ngx_strlen(key), 64), key);
            json_decref(doc);

            return ngx_omniroute_lease_fail(r, NGX_HTTP_BAD_REQUEST,
                                            "unknown_field", (char *) msg);
        }
    }

    action = json_object_get(doc, "action");
    owner = json_object_get(doc, "owner");
    gen = json_object_get(doc, "generation");
    ttl = json_object_get(doc, "ttl_s");
    conn = json_object_get(doc, "connection");

    msg = NULL;

    if (action == NULL) {
        msg = (u_char *) "missing field \"action\"";
        goto missing;
    }

    if (!json_is_string(action)) {
        msg = (u_char *) "\"action\" must be a string";
        goto invalid_type;
    }

    name = json_string_value(action);

    if (ngx_strcmp(name, "acquire") == 0) {
        lr->op.action = NGX_OMNIROUTE_LEASE_ACQUIRE;

    } else if (ngx_strcmp(name, "renew") == 0) {
        lr->op.action = NGX_OMNIROUTE_LEASE_RENEW;

    } else if (ngx_strcmp(name, "release") == 0) {
        lr->op.action = NGX_OMNIROUTE_LEASE_RELEASE;

    } else {
        json_decref(doc);
        return ngx_omniroute_lease_fail(r, NGX_HTTP_BAD_REQUEST,
                                        "invalid_action",
                                        "\"action\" must be \"acquire\", "
                                        "\"renew\" or \"release\"");
    }

    if (owner == NULL && lr->op.action != NGX_OMNIROUTE_LEASE_ACQUIRE) {
        msg = (u_char *) "missing field \"owner\"";
        goto missing;
    }

    if (owner) {
        if (!json_is_string(owner)) {
            msg = (u_char *) "\"owner\" must be a string";
            goto invalid_type;
        }

        if (!or_lease_token_valid(json_string_value(owner),
                                  json_string_length(owner)))
        {
            json_decref(doc);
            return ngx_omniroute_lease_fail(r, NGX_HTTP_BAD_REQUEST,
                                            "invalid_owner",
                                            "\"owner\" is not an owner "
                                            "token (\"vlo_\" and 43 "
                                            "base64url characters)");
        }

        if (gen == NULL) {
            msg = (u_char *) "missing field \"generation\" (with "
                             "\"owner\")";
            goto missing;
        }

        if (ngx_omniroute_sha256((u_char *) json_string_value(owner),
                                 json_string_length(owner), lr->op.owner)
            != NGX_OK)
        {
            json_decref(doc);
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        lr->op.rebind = (lr->op.action == NGX_OMNIROUTE_LEASE_ACQUIRE);

    } else if (gen) {
        json_decref(doc);
        return ngx_omniroute_lease_fail(r, NGX_HTTP_BAD_REQUEST,
                                        "invalid_request",
                                        "\"generation\" without \"owner\"");
    }

    if (gen && ngx_omniroute_lease_generation(gen, &lr->op.generation)
               != NGX_OK)
    {
        json_decref(doc);
        return ngx_omniroute_lease_fail(r, NGX_HTTP_BAD_REQUEST,
                                        "invalid_generation",
                                        "\"generation\" must be an integer "
                                        "from 1 to 2^53-1");
    }

    if (ttl) {
        if (lr->op.action == NGX_OMNIROUTE_LEASE_RELEASE) {
            json_decref(doc);
            return ngx_omniroute_lease_fail(r, NGX_HTTP_BAD_REQUEST,
                                            "invalid_request",
                                            "\"ttl_s\" is not a parameter "
                                            "of \"release\"");
        }

        if (!json_is_integer(ttl)) {
            msg = (u_char *) "\"ttl_s\" must be an integer";
            goto invalid_type;
        }

        ttl_s = json_integer_value(ttl);

        if (ttl_s < 1 || ttl_s > (json_int_t) (kc->lease_ttl_max / 1000)) {
            msg = ngx_pnalloc(r->pool, 80);
            if (msg == NULL) {
                json_decref(doc);
                return NGX_HTTP_INTERNAL_SERVER_ERROR;
            }

            ngx_sprintf(msg, "\"ttl_s\" must be between 1 and %M%Z",
                        kc->lease_ttl_max / 1000);
            json_decref(doc);

            return ngx_omniroute_lease_fail(r, NGX_HTTP_BAD_REQUEST,
                                            "out_of_range", (char *) msg);
        }

        lr->op.ttl = (or_msec_t) ttl_s * 1000;
    }

    if (conn && lr->op.action != NGX_OMNIROUTE_LEASE_ACQUIRE) {
        json_decref(doc);
        return ngx_omniroute_lease_fail(r, NGX_HTTP_BAD_REQUEST,
                                        "invalid_request",
                                        "\"connection\" is a parameter of "
                                        "\"acquire\" only");
    }

    if (conn && !json_is_string(conn)) {
        msg = (u_char *) "\"connection\" must be a string";
        goto invalid_type;
    }

    if (lr->op.action == NGX_OMNIROUTE_LEASE_ACQUIRE) {
        if (ngx_omniroute_lease_connections(lr, conn) != NGX_OK) {
            json_decref(doc);
            return ngx_omniroute_lease_fail(r, NGX_HTTP_FORBIDDEN,
                                            "connection_not_allowed",
                                            "the key may not lease this "
                                            "connection");
        }

        if (!lr->op.rebind) {
            /* a new owner: 32 bytes of the CSPRNG */

            if (RAND_bytes(raw, sizeof(raw)) != 1) {
                json_decref(doc);
                ngx_log_error(NGX_LOG_ALERT, r->connection->log, 0,
                              "omniroute lease: RAND_bytes() failed");
                return NGX_HTTP_INTERNAL_SERVER_ERROR;
            }

            or_lease_token_encode(raw, lr->token);
            ngx_explicit_memzero(raw, sizeof(raw));

            if (ngx_omniroute_sha256((u_char *) lr->token,
                                     OR_LEASE_TOKEN_LEN, lr->op.owner)
                != NGX_OK)
            {
                json_decref(doc);
                return NGX_HTTP_INTERNAL_SERVER_ERROR;
            }

            lr->fresh = 1;
        }
    }

    json_decref(doc);

    return NGX_DECLINED;

missing:

    json_decref(doc);
    return ngx_omniroute_lease_fail(r, NGX_HTTP_BAD_REQUEST, "missing_field",
                                    (char *) msg);

invalid_type:

    json_decref(doc);
    return ngx_omniroute_lease_fail(r, NGX_HTTP_BAD_REQUEST, "invalid_type",
                                    (char *) msg);
}


/* a JSON integer, or a decimal string as the header carries it */

static ngx_int_t
ngx_omniroute_lease_generation(json_t *v, uint64_t *gen)
{
    json_int_t  n;

    if (json_is_integer(v)) {
        n = json_integer_value(v);

        if (n < 1 || (uint64_t) n > OR_LEASE_GEN_MAX) {
            return NGX_ERROR;
        }

        *gen = (uint64_t) n;
        return NGX_OK;
    }

    if (json_is_string(v)
        && or_lease_parse_generation(json_string_value(v),
                                     json_string_length(v), gen))
    {
        return NGX_OK;
    }

    return NGX_ERROR;
}


/*
 * The connections an acquire may bind: the one asked for, else the
 * key's, in the order of its "connections=" list; with their eligibility
 * now (breaker, cooldown, terminal state).
 */

static ngx_int_t
ngx_omniroute_lease_connections(ngx_omniroute_lease_req_t *lr,
    json_t *connection)
{
    size_t                       len;
    ngx_str_t                   *name;
    ngx_uint_t                   i, j, n;
    const char                  *want;
    ngx_omniroute_main_conf_t   *omcf;
    ngx_omniroute_client_key_t  *key;
    ngx_omniroute_connection_t  *c;

    omcf = ngx_http_get_module_main_conf(lr->request,
                                         ngx_http_omniroute_module);
    key = lr->ctx->auth->key;
    name = key->conn_names.elts;
    c = omcf->connections.elts;

    want = connection ? json_string_value(connection) : NULL;
    len = connection ? json_string_length(connection) : 0;

    n = 0;

    for (i = 0; i < key->conn_names.nelts; i++) {
        if (want && (name[i].len != len
                     || ngx_strncmp(name[i].data, want, len) != 0))
        {
            continue;
        }

        for (j = 0; j < omcf->connections.nelts; j++) {
            if (c[j].id.len == name[i].len
                && ngx_strncmp(c[j].id.data, name[i].data, name[i].len) == 0)
            {
                break;
            }
        }

        if (j == omcf->connections.nelts) {
            continue;
        }

        lr->conns[n] = c[j].id;
        lr->eligible[n] = (u_char) ngx_omniroute_lease_eligible(omcf, &c[j],
                                                              lr->op.now);
        n++;
    }

    lr->op.nconns = n;

    return n ? NGX_OK : NGX_DECLINED;
}


static ngx_uint_t
ngx_omniroute_lease_eligible(ngx_omniroute_main_conf_t *omcf,
    ngx_omniroute_connection_t *conn, or_msec_t now)
{
    or_msec_t                  retry;
    or_breaker_t               cb;
    or_plan_view_t             view;
    or_conn_state_t            cs;
    ngx_omniroute_settings_t   s;
    ngx_omniroute_provider_t  *p;

    p = (ngx_omniroute_provider_t *) omcf->providers.elts + conn->provider;

    ngx_omniroute_settings_effective(omcf, p, &s);

    or_plan_view_init(&view);
    view.breaker_conf = &s.breaker;

    if (ngx_omniroute_store_read(&omcf->store, NGX_OMNIROUTE_T_BREAKER,
                                 &p->name, &cb, sizeof(or_breaker_t))
        == NGX_OK)
    {
        view.breaker = &cb;
    }

    if (ngx_omniroute_store_read_cached(&omcf->store, NGX_OMNIROUTE_T_CONN,
                                        &conn->id, conn->state_hash,
                                        conn->state_cache, &cs,
                                        sizeof(or_conn_state_t))
        == NGX_OK)
    {
        view.conn = &cs;
    }

    return or_plan_exclusion(&view, now, &retry) == OR_EXCL_NONE;
}


/* the remote call answered (or failed) */

static void
ngx_omniroute_lease_done(void *data, ngx_omniroute_lease_op_t *op)
{
    ngx_omniroute_lease_req_t *lr = data;

    ngx_int_t            rc;
    ngx_connection_t    *c;
    ngx_http_request_t  *r;

    r = lr->request;
    c = r->connection;

    lr->pending = 0;

    if (op->failed) {
        rc = ngx_omniroute_lease_fail(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                                      "lease_backend_unavailable",
                                      "Redis did not answer the lease "
                                      "request; retry later");

    } else {
        rc = ngx_omniroute_lease_answer(lr);
    }

    ngx_http_finalize_request(r, rc);
    ngx_http_run_posted_requests(c);
}


static void
ngx_omniroute_lease_cleanup(void *data)
{
    ngx_omniroute_lease_req_t *lr = data;

    if (lr->pending && ngx_omniroute_lease_remote
        && ngx_omniroute_lease_remote->cancel)
    {
        lr->pending = 0;
        ngx_omniroute_lease_remote->cancel(lr->handle);
    }
}


static ngx_int_t
ngx_omniroute_lease_answer(ngx_omniroute_lease_req_t *lr)
{
    json_t                    *doc, *lease;
    ngx_uint_t                 level;
    const char                *what;
    ngx_http_request_t        *r;
    ngx_omniroute_lease_op_t  *op;

    r = lr->request;
    op = &lr->op;

    switch (op->rc) {

    case OR_LEASE_OK:
        break;

    case OR_LEASE_NOT_FOUND:
        return ngx_omniroute_lease_fail(r, NGX_HTTP_NOT_FOUND,
                                        "lease_not_found",
                                        "no lease of this key has this "
                                        "owner");

    case OR_LEASE_STALE:
        return ngx_omniroute_lease_fail(r, NGX_HTTP_CONFLICT,
                                        "lease_generation_mismatch",
                                        "the generation is not the lease's "
                                        "current one");

    case OR_LEASE_EXPIRED:
        return ngx_omniroute_lease_fail(r, NGX_OMNIROUTE_HTTP_GONE,
                                        "lease_expired",
                                        "the lease has expired; acquire it "
                                        "again");

    case OR_LEASE_CAPACITY:
        return ngx_omniroute_lease_capacity(r, op->retry,
                                            "every connection this key may "
                                            "lease is held by another "
                                            "lease");

    default:
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    switch (op->action) {

    case NGX_OMNIROUTE_LEASE_ACQUIRE:
        what = lr->fresh ? "acquired" : "rebound";
        break;

    case NGX_OMNIROUTE_LEASE_RENEW:
        what = "renewed";
        break;

    default:
        what = "released";
        break;
    }

    /* the key id, connection and generation; never the owner */

    level = (op->action == NGX_OMNIROUTE_LEASE_RENEW) ? NGX_LOG_INFO
                                                      : NGX_LOG_NOTICE;

    ngx_log_error(level, r->connection->log, 0,
                  "omniroute lease %s: key \"%V\", connection \"%*s\", "
                  "generation %uL", what, &op->key,
                  (size_t) op->lease.conn_len, op->lease.conn,
                  op->lease.generation);

    /* acquire and renew: the TTL granted, exactly (R-LEASE-2) */
    lease = ngx_omniroute_lease_json(&op->lease, op->now,
                                     (op->action == NGX_OMNIROUTE_LEASE_RELEASE)
                                     ? OR_MSEC_NONE : op->ttl);
    if (lease == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (op->action == NGX_OMNIROUTE_LEASE_RELEASE) {
        json_object_set_new(lease, "state", json_string("released"));

    } else if (lr->fresh) {
        /* the only time the token is ever sent */
        json_object_set_new(lease, "owner", json_string(lr->token));
    }

    doc = json_pack("{s:o}", "lease", lease);

    ngx_explicit_memzero(lr->token, sizeof(lr->token));

    if (doc == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return ngx_omniroute_send_json(r, NGX_HTTP_OK, doc);
}


static json_t *
ngx_omniroute_lease_json(or_lease_t *l, or_msec_t now, or_msec_t ttl)
{
    if (ttl == OR_MSEC_NONE) {
        /* what is left, never more than the lease has */
        ttl = (l->expires_at > now) ? l->expires_at - now : 0;
    }

    return json_pack("{s:I,s:s%,s:s%,s:s,s:I,s:I,s:I,s:I}",
                     "generation", (json_int_t) l->generation,
                     "connection", l->conn, (size_t) l->conn_len,
                     "key", l->key, (size_t) l->key_len,
                     "state", or_lease_active(l, now) ? "active" : "ended",
                     "acquired_at", (json_int_t) l->acquired_at,
                     "bound_at", (json_int_t) l->bound_at,
                     "expires_at", (json_int_t) l->expires_at,
                     "ttl_s", (json_int_t) (ttl / 1000));
}


static ngx_int_t
ngx_omniroute_lease_fail(ngx_http_request_t *r, ngx_uint_t status,
    const char *code, const char *message)
{
    return ngx_omniroute_send_error(r, status,
                                    status >= NGX_HTTP_INTERNAL_SERVER_ERROR
                                    ? "server_error"
                                    : "invalid_request_error",
                                    code, message);
}


/*
 * R-LEASE-4: 429, waiting for capacity, a Retry-After bounded by the
 * longest lease, written by the one writer (issue 25)
 */

static ngx_int_t
ngx_omniroute_lease_capacity(ngx_http_request_t *r, or_msec_t retry,
    const char *message)
{
    json_t                     *doc;
    int64_t                     seconds;
    or_msec_t                   max;
    ngx_omniroute_keys_conf_t  *kc;
    ngx_omniroute_main_conf_t  *omcf;

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);
    kc = omcf->keys;

    if (kc && kc->sh) {
        (void) ngx_atomic_fetch_add(&kc->sh->lease_capacity, 1);
    }

    max = kc ? (or_msec_t) kc->lease_ttl_max : 3600 * 1000;

    if (retry < 0) {
        retry = 0;

    } else if (max >= 1000 && retry > max) {
        retry = max;
    }

    seconds = or_retry_after_seconds(retry);

    if (ngx_omniroute_set_retry_after(r, retry) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    doc = json_pack("{s:{s:s,s:s,s:s},s:s,s:I}",
                    "error", "message", message, "type", "rate_limit_error",
                    "code", "lease-capacity-unavailable",
                    "state", "waiting-for-capacity",
                    "retry_after_s", (json_int_t) seconds);
    if (doc == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return ngx_omniroute_send_own_json(r, NGX_HTTP_TOO_MANY_REQUESTS, doc);
}


/*
 * A managed request: both lease headers, well formed, of a key with the
 * scope, naming an active lease of this key with this generation.  All
 * checked before the body is read.
 */

ngx_int_t
ngx_omniroute_lease_auth(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx)
{
    ngx_table_elt_t            *ho, *hg;
    or_lease_rc_e               rc;
    ngx_omniroute_auth_t       *auth;
    ngx_omniroute_main_conf_t  *omcf;

    ho = ngx_omniroute_lease_header(r, "x-omniroute-lease-owner",
                                    sizeof("x-omniroute-lease-owner") - 1);
    hg = ngx_omniroute_lease_header(r, "x-omniroute-lease-generation",
                                    sizeof("x-omniroute-lease-generation")
                                    - 1);

    if (ho == NULL && hg == NULL) {
        return NGX_DECLINED;
    }

    auth = ctx->auth;

    if (ho == NULL || hg == NULL) {
        return ngx_omniroute_auth_reject(r, NGX_HTTP_BAD_REQUEST,
                                         "invalid_lease_headers",
                                         "a managed request sends both "
                                         "X-OmniRoute-Lease-Owner and "
                                         "X-OmniRoute-Lease-Generation");
    }

    if (!auth->key->lease) {
        return ngx_omniroute_auth_reject(r, NGX_HTTP_FORBIDDEN,
                                         "lease_scope_required",
                                         "the key has no scope "
                                         "\"lease:exclusive\"");
    }

    if (!or_lease_token_valid((const char *) ho->value.data, ho->value.len)
        || !or_lease_parse_generation((const char *) hg->value.data,
                                      hg->value.len, &auth->generation))
    {
        return ngx_omniroute_auth_reject(r, NGX_HTTP_BAD_REQUEST,
                                         "invalid_lease_headers",
                                         "X-OmniRoute-Lease-Owner must be an "
                                         "owner token and "
                                         "X-OmniRoute-Lease-Generation a "
                                         "positive integer");
    }

    if (ngx_omniroute_sha256(ho->value.data, ho->value.len, auth->owner)
        != NGX_OK)
    {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);

    if (ngx_omniroute_lease_read_owner(&omcf->store, auth->owner,
                                       &auth->lease)
        != NGX_OK)
    {
        rc = OR_LEASE_NOT_FOUND;

    } else {
        rc = or_lease_check(&auth->lease, auth->owner,
                            (const char *) auth->key->id.data,
                            auth->key->id.len, auth->generation,
                            ngx_omniroute_now());
    }

    switch (rc) {

    case OR_LEASE_OK:
        break;

    case OR_LEASE_STALE:
        return ngx_omniroute_auth_reject(r, NGX_HTTP_CONFLICT,
                                         "lease_generation_mismatch",
                                         "the lease generation is stale");

    case OR_LEASE_EXPIRED:
        return ngx_omniroute_auth_reject(r, NGX_OMNIROUTE_HTTP_GONE,
                                         "lease_expired",
                                         "the lease has expired");

    default:
        return ngx_omniroute_auth_reject(r, NGX_HTTP_NOT_FOUND,
                                         "lease_not_found",
                                         "no lease of this key has this "
                                         "owner");
    }

    auth->managed = 1;

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "omniroute lease: managed request on \"%*s\"",
                   (size_t) auth->lease.conn_len, auth->lease.conn);

    return NGX_DECLINED;
}


/*
 * At dispatch: NGX_OK, or NGX_DECLINED with the exclusion's reason and
 * retry (ms; -1: no timer).
 */

ngx_int_t
ngx_omniroute_lease_admit(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_candidate_t *cand, const char **reason, or_msec_t *retry)
{
    or_lease_t                  l;
    or_lease_rc_e               rc;
    ngx_omniroute_auth_t       *auth;
    ngx_omniroute_store_t      *st;
    ngx_omniroute_main_conf_t  *omcf;

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);
    st = &omcf->store;
    auth = ctx->auth;

    if ((auth == NULL || !auth->managed)
        && ngx_omniroute_store_empty(st, NGX_OMNIROUTE_T_LEASE))
    {
        return NGX_OK;
    }

    if (auth && auth->managed) {
        rc = (ngx_omniroute_lease_read_conn(st, cand->conn->id.data,
                                            cand->conn->id.len, &l)
              == NGX_OK)
             ? or_lease_dispatch(&l, auth->owner,
                                 (const char *) auth->key->id.data,
                                 auth->key->id.len, auth->generation,
                                 ngx_omniroute_now(), retry)
             : OR_LEASE_LOST;

    } else {
        rc = (ngx_omniroute_lease_read_conn(st, cand->conn->id.data,
                                            cand->conn->id.len, &l)
              == NGX_OK)
             ? or_lease_dispatch(&l, NULL, NULL, 0, 0, ngx_omniroute_now(),
                                 retry)
             : OR_LEASE_OK;
    }

    switch (rc) {

    case OR_LEASE_OK:
        return NGX_OK;

    case OR_LEASE_HELD:
        *reason = ngx_omniroute_lease_held;
        break;

    default: /* OR_LEASE_LOST */
        *reason = ngx_omniroute_lease_lost;
        *retry = -1;
        break;
    }

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "omniroute lease: \"%V\" not dispatched: %s",
                   &cand->conn->id, *reason);

    return NGX_DECLINED;
}


/*
 * Nothing was dispatched: when leases left candidates out, the answer is
 * theirs (a managed request's lease lost: 409; connections held by other
 * leases: 429 lease-capacity-unavailable); else NGX_DECLINED, and the
 * usual 503/404.
 */

ngx_int_t
ngx_omniroute_lease_unavailable(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx)
{
    or_msec_t                  earliest;
    ngx_uint_t                 i, held, lost;
    ngx_omniroute_excluded_t  *ex;

    held = 0;
    lost = 0;
    earliest = -1;
    ex = ctx->excluded.elts;

    for (i = 0; i < ctx->excluded.nelts; i++) {
        if (ex[i].reason == ngx_omniroute_lease_lost) {
            lost++;

        } else if (ex[i].reason == ngx_omniroute_lease_held) {
            held++;

            if (earliest < 0 || ex[i].retry_after < earliest) {
                earliest = ex[i].retry_after;
            }
        }
    }

    if (lost) {
        ngx_omniroute_count(r, NGX_OMNIROUTE_OUT_CLIENT_ERROR);

        return ngx_omniroute_lease_fail(r, NGX_HTTP_CONFLICT, "lease_lost",
                                        "the lease no longer holds its "
                                        "connection (rebound, released, "
                                        "revoked or expired)");
    }

    if (held == 0) {
        return NGX_DECLINED;
    }

    ngx_omniroute_count(r, NGX_OMNIROUTE_OUT_COOLING_DOWN);

    return ngx_omniroute_lease_capacity(r, earliest,
                                        "every free connection of this "
                                        "model is held by an exclusive "
                                        "lease");
}


static ngx_table_elt_t *
ngx_omniroute_lease_header(ngx_http_request_t *r, const char *lowcase,
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
