
/*
 * Copyright (C) ngx_omniroute authors
 *
 * Exclusive leases in the admin API (R-LEASE, docs/api.md):
 *
 *   GET    /api/resilience/leases[?key=ID&connection=ID]   active leases
 *   DELETE /api/resilience/leases  {"connection": ID} | {"key": ID}
 *
 * A lease is shown by its connection, key id, generation and times;
 * neither the owner token nor its hash is part of any answer.  A revoked
 * lease ends at once on this node; with Redis the revocation runs in
 * Redis first (atomically, for every node) and the answer waits for it:
 * 503 when Redis does not answer in time, and then nothing was revoked
 * (the script does nothing past its deadline).
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute_api.h"
#include "ngx_omniroute_keys.h"
#include "ngx_omniroute_lease_store.h"


static json_t *ngx_omniroute_api_lease_json(or_lease_t *l, or_msec_t now);
typedef struct {
    ngx_omniroute_api_call_t     *call;
    json_t                       *revoked;
    ngx_uint_t                    waiting;      /* calls in Redis */
    ngx_uint_t                    failed;
} ngx_omniroute_api_revoke_t;


static ngx_int_t ngx_omniroute_api_lease_revoke(
    ngx_omniroute_api_revoke_t *rv, or_lease_t *l);
static void ngx_omniroute_api_lease_revoked(void *data,
    ngx_omniroute_lease_op_t *op);
static ngx_int_t ngx_omniroute_api_lease_end(ngx_omniroute_api_revoke_t *rv,
    ngx_omniroute_lease_op_t *op);
static ngx_int_t ngx_omniroute_api_revoke_answer(
    ngx_omniroute_api_revoke_t *rv);
static ngx_uint_t ngx_omniroute_api_lease_key(ngx_omniroute_main_conf_t *omcf,
    const char *s, size_t len);


static const char  *ngx_omniroute_api_lease_fields[] = {
    "connection", "key", NULL
};


ngx_int_t
ngx_omniroute_api_leases(ngx_omniroute_api_call_t *call)
{
    json_t       *list, *item;
    ngx_str_t     key, conn;
    ngx_uint_t    i, has_key, has_conn;
    or_lease_t   *l;
    ngx_array_t   leases;

    has_key = (ngx_omniroute_api_arg(call, "key", &key) == NGX_OK);
    has_conn = (ngx_omniroute_api_arg(call, "connection", &conn) == NGX_OK);

    if (has_conn
        && ngx_omniroute_api_connection(call->omcf, (const char *) conn.data,
                                        conn.len)
           == NULL)
    {
        return ngx_omniroute_api_fail(call, NGX_HTTP_NOT_FOUND,
                                      "unknown_connection",
                                      "unknown connection \"%V\"", &conn);
    }

    if (has_key
        && !ngx_omniroute_api_lease_key(call->omcf, (const char *) key.data,
                                        key.len))
    {
        /* as DELETE answers it */
        return ngx_omniroute_api_fail(call, NGX_HTTP_NOT_FOUND,
                                      "unknown_key",
                                      "unknown client key \"%V\"", &key);
    }

    if (ngx_omniroute_lease_list(&call->omcf->store, call->r->pool, &leases)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    list = json_array();
    if (list == NULL) {
        return NGX_ERROR;
    }

    l = leases.elts;

    for (i = 0; i < leases.nelts; i++) {
        if ((has_key && (l[i].key_len != key.len
                         || ngx_memcmp(l[i].key, key.data, key.len) != 0))
            || (has_conn && (l[i].conn_len != conn.len
                             || ngx_memcmp(l[i].conn, conn.data, conn.len)
                                != 0)))
        {
            continue;
        }

        item = ngx_omniroute_api_lease_json(&l[i], call->now);
        if (item == NULL || json_array_append_new(list, item) != 0) {
            json_decref(list);
            return NGX_ERROR;
        }
    }

    call->out = json_pack("{s:I,s:o,s:I}", "time", (json_int_t) call->now,
                          "leases", list, "count",
                          (json_int_t) json_array_size(list));

    return call->out ? NGX_OK : NGX_ERROR;
}


/* a declared client key's id */

static ngx_uint_t
ngx_omniroute_api_lease_key(ngx_omniroute_main_conf_t *omcf, const char *s,
    size_t len)
{
    ngx_uint_t                   i;
    ngx_omniroute_client_key_t  *key;

    if (omcf->keys == NULL) {
        return 0;
    }

    key = omcf->keys->keys.elts;

    for (i = 0; i < omcf->keys->keys.nelts; i++) {
        if (key[i].id.len == len && ngx_strncmp(key[i].id.data, s, len) == 0)
        {
            return 1;
        }
    }

    return 0;
}


static json_t *
ngx_omniroute_api_lease_json(or_lease_t *l, or_msec_t now)
{
    return json_pack("{s:s%,s:s%,s:I,s:s,s:I,s:I,s:I,s:I}",
                     "connection", l->conn, (size_t) l->conn_len,
                     "key", l->key, (size_t) l->key_len,
                     "generation", (json_int_t) l->generation,
                     "state", "active",
                     "acquired_at", (json_int_t) l->acquired_at,
                     "bound_at", (json_int_t) l->bound_at,
                     "expires_at", (json_int_t) l->expires_at,
                     "expires_in_ms", (json_int_t) (l->expires_at - now));
}


ngx_int_t
ngx_omniroute_api_leases_revoke(ngx_omniroute_api_call_t *call)
{
    json_t                      *jc, *jk;
    size_t                       len;
    ngx_uint_t                   i;
    or_lease_t                  *l;
    const char                  *s;
    ngx_array_t                  leases;
    ngx_omniroute_keys_conf_t   *kc;
    ngx_omniroute_api_revoke_t  *rv;

    if (call->body == NULL) {
        return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                      "missing_body",
                                      "expected {\"connection\": ID} or "
                                      "{\"key\": ID}");
    }

    if (ngx_omniroute_api_fields(call, call->body, NULL,
                                 ngx_omniroute_api_lease_fields)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    jc = json_object_get(call->body, "connection");
    jk = json_object_get(call->body, "key");

    if ((jc == NULL) == (jk == NULL)) {
        return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                      "invalid_request",
                                      "give either \"connection\" or "
                                      "\"key\"");
    }

    if ((jc && !json_is_string(jc)) || (jk && !json_is_string(jk))) {
        return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                      "invalid_type",
                                      "\"%s\" must be a string",
                                      jc ? "connection" : "key");
    }

    s = json_string_value(jc ? jc : jk);
    len = json_string_length(jc ? jc : jk);

    kc = call->omcf->keys;

    if (jc && ngx_omniroute_api_connection(call->omcf, s, len) == NULL) {
        return ngx_omniroute_api_fail(call, NGX_HTTP_NOT_FOUND,
                                      "unknown_connection",
                                      "unknown connection \"%*s\"", len, s);
    }

    if (kc == NULL || kc->shpool == NULL) {
        if (jk) {
            return ngx_omniroute_api_fail(call, NGX_HTTP_NOT_FOUND,
                                          "unknown_key",
                                          "unknown client key \"%*s\"",
                                          len, s);
        }

        call->out = json_pack("{s:i,s:[]}", "revoked", 0, "connections");
        return call->out ? NGX_OK : NGX_ERROR;
    }

    if (jk && !ngx_omniroute_api_lease_key(call->omcf, s, len)) {
        return ngx_omniroute_api_fail(call, NGX_HTTP_NOT_FOUND,
                                      "unknown_key",
                                      "unknown client key \"%*s\"", len, s);
    }

    if (ngx_omniroute_lease_list(&call->omcf->store, call->r->pool, &leases)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    rv = ngx_pcalloc(call->r->pool, sizeof(ngx_omniroute_api_revoke_t));
    if (rv == NULL) {
        return NGX_ERROR;
    }

    rv->call = call;
    rv->revoked = json_array();
    if (rv->revoked == NULL) {
        return NGX_ERROR;
    }

    l = leases.elts;

    for (i = 0; i < leases.nelts; i++) {
        if (jc ? (l[i].conn_len != len || ngx_memcmp(l[i].conn, s, len) != 0)
               : (l[i].key_len != len || ngx_memcmp(l[i].key, s, len) != 0))
        {
            continue;
        }

        if (ngx_omniroute_api_lease_revoke(rv, &l[i]) != NGX_OK) {
            rv->failed++;
        }
    }

    if (rv->waiting) {
        return NGX_DONE;
    }

    return ngx_omniroute_api_revoke_answer(rv);
}


static ngx_int_t
ngx_omniroute_api_revoke_answer(ngx_omniroute_api_revoke_t *rv)
{
    ngx_omniroute_api_call_t  *call;

    call = rv->call;

    if (rv->failed) {
        json_decref(rv->revoked);

        return ngx_omniroute_api_fail(call, NGX_HTTP_SERVICE_UNAVAILABLE,
                                      "lease_backend_unavailable",
                                      "Redis did not answer: %ui lease(s) "
                                      "not revoked for the cluster; retry",
                                      rv->failed);
    }

    call->out = json_pack("{s:I,s:o}", "revoked",
                          (json_int_t) json_array_size(rv->revoked),
                          "connections", rv->revoked);

    return call->out ? NGX_OK : NGX_ERROR;
}


/*
 * With Redis the lease ends there first; the answer waits for Redis
 * (ngx_omniroute_api_lease_revoked()).  NGX_OK: revoked here or sent;
 * NGX_DECLINED: Redis is down, nothing revoked.
 */

static ngx_int_t
ngx_omniroute_api_lease_revoke(ngx_omniroute_api_revoke_t *rv,
    or_lease_t *l)
{
    void                      *handle;
    ngx_omniroute_lease_op_t  *op;

    op = ngx_pcalloc(rv->call->r->pool, sizeof(ngx_omniroute_lease_op_t)
                                        + sizeof(ngx_str_t) + l->conn_len);
    if (op == NULL) {
        return NGX_ERROR;
    }

    op->action = NGX_OMNIROUTE_LEASE_REVOKE;
    op->conns = (ngx_str_t *) (op + 1);
    op->conns[0].data = (u_char *) (op->conns + 1);
    op->conns[0].len = l->conn_len;
    ngx_memcpy(op->conns[0].data, l->conn, l->conn_len);
    op->nconns = 1;
    op->now = rv->call->now;
    op->lease = *l;

    if (ngx_omniroute_lease_remote == NULL
        || ngx_omniroute_lease_remote->run == NULL)
    {
        return ngx_omniroute_api_lease_end(rv, op);
    }

    if (ngx_omniroute_lease_remote->run(op, ngx_omniroute_api_lease_revoked,
                                        rv, &handle)
        != NGX_DONE)
    {
        return NGX_DECLINED;
    }

    rv->waiting++;

    return NGX_OK;
}


static void
ngx_omniroute_api_lease_revoked(void *data, ngx_omniroute_lease_op_t *op)
{
    ngx_omniroute_api_revoke_t *rv = data;

    rv->waiting--;

    if (op->failed || ngx_omniroute_api_lease_end(rv, op) != NGX_OK) {
        rv->failed++;
    }

    if (rv->waiting == 0) {
        ngx_omniroute_api_finish(rv->call,
                                 ngx_omniroute_api_revoke_answer(rv));
    }
}


/* the lease ends in the zone too (Redis may not have had it) */

static ngx_int_t
ngx_omniroute_api_lease_end(ngx_omniroute_api_revoke_t *rv,
    ngx_omniroute_lease_op_t *op)
{
    or_lease_t                  l;
    ngx_omniroute_keys_conf_t  *kc;

    kc = rv->call->omcf->keys;
    l = op->lease;

    op->action = NGX_OMNIROUTE_LEASE_REVOKE;
    op->now = ngx_omniroute_now();

    if (ngx_omniroute_lease_run(&rv->call->omcf->store, &kc->shpool->mutex,
                                op)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    json_array_append_new(rv->revoked,
                          json_stringn((char *) op->conns[0].data,
                                       op->conns[0].len));

    ngx_log_error(NGX_LOG_NOTICE, rv->call->r->connection->log, 0,
                  "omniroute api: lease of connection \"%V\" (key \"%*s\", "
                  "generation %uL) revoked", &op->conns[0],
                  (size_t) l.key_len, l.key, l.generation);

    return NGX_OK;
}
