
/*
 * Copyright (C) ngx_omniroute authors
 *
 * Exclusive leases in the shared zone (see ngx_omniroute_lease_store.h).
 */


#include <ngx_config.h>
#include <ngx_core.h>

#include "ngx_omniroute_lease_store.h"


typedef struct {
    or_lease_t                   *lease;
    or_msec_t                     expires;      /* of the record */
    ngx_uint_t                    newer;        /* only a newer version */
} ngx_omniroute_lease_put_t;


typedef struct {
    ngx_array_t                  *out;
    ngx_omniroute_lease_keep_pt   keep;
    void                         *arg;
    ngx_array_t                  *drop;         /* ngx_str_t keys */
    ngx_pool_t                   *pool;
    or_msec_t                     now;
} ngx_omniroute_lease_walk_t;


static ngx_int_t ngx_omniroute_lease_acquire(ngx_omniroute_store_t *st,
    ngx_omniroute_lease_op_t *op);
static ngx_int_t ngx_omniroute_lease_renew(ngx_omniroute_store_t *st,
    ngx_omniroute_lease_op_t *op);
static ngx_int_t ngx_omniroute_lease_release(ngx_omniroute_store_t *st,
    ngx_omniroute_lease_op_t *op);
static ngx_int_t ngx_omniroute_lease_revoke(ngx_omniroute_store_t *st,
    ngx_omniroute_lease_op_t *op);
static ngx_int_t ngx_omniroute_lease_put(ngx_omniroute_store_t *st,
    or_lease_t *l, ngx_uint_t by_owner, ngx_uint_t newer, or_msec_t now);
static ngx_int_t ngx_omniroute_lease_end(ngx_omniroute_store_t *st,
    or_lease_t *l, uint64_t version, or_msec_t now);
static ngx_uint_t ngx_omniroute_lease_update(void *value, void *arg,
    or_msec_t *expires);
static void ngx_omniroute_lease_collect(ngx_str_t *key, void *value,
    size_t size, void *arg);
static void ngx_omniroute_lease_check_keep(ngx_str_t *key, void *value,
    size_t size, void *arg);


ngx_omniroute_lease_remote_t  *ngx_omniroute_lease_remote;


size_t
ngx_omniroute_lease_key_conn(u_char *buf, u_char *conn, size_t len)
{
    len = ngx_min(len, OR_LEASE_ID_MAX);

    buf[0] = 'c';
    buf[1] = ':';
    ngx_memcpy(buf + 2, conn, len);

    return 2 + len;
}


size_t
ngx_omniroute_lease_key_owner(u_char *buf, u_char *owner)
{
    char  hex[2 * OR_LEASE_HASH_LEN + 1];

    or_lease_hex(owner, hex);

    buf[0] = 'o';
    buf[1] = ':';
    ngx_memcpy(buf + 2, hex, 2 * OR_LEASE_HASH_LEN);

    return 2 + 2 * OR_LEASE_HASH_LEN;
}


ngx_int_t
ngx_omniroute_lease_read_conn(ngx_omniroute_store_t *st, u_char *conn,
    size_t len, or_lease_t *l)
{
    u_char     buf[NGX_OMNIROUTE_LEASE_KEY_MAX];
    ngx_str_t  key;

    if (len == 0 || len > OR_LEASE_ID_MAX) {
        return NGX_DECLINED;
    }

    key.data = buf;
    key.len = ngx_omniroute_lease_key_conn(buf, conn, len);

    return ngx_omniroute_store_read(st, NGX_OMNIROUTE_T_LEASE, &key, l,
                                    sizeof(or_lease_t));
}


ngx_int_t
ngx_omniroute_lease_read_owner(ngx_omniroute_store_t *st, u_char *owner,
    or_lease_t *l)
{
    u_char     buf[NGX_OMNIROUTE_LEASE_KEY_MAX];
    ngx_str_t  key;

    key.data = buf;
    key.len = ngx_omniroute_lease_key_owner(buf, owner);

    return ngx_omniroute_store_read(st, NGX_OMNIROUTE_T_LEASE, &key, l,
                                    sizeof(or_lease_t));
}


ngx_int_t
ngx_omniroute_lease_run(ngx_omniroute_store_t *st, ngx_shmtx_t *lock,
    ngx_omniroute_lease_op_t *op)
{
    ngx_int_t  rc;

    ngx_shmtx_lock(lock);

    switch (op->action) {

    case NGX_OMNIROUTE_LEASE_ACQUIRE:
        rc = ngx_omniroute_lease_acquire(st, op);
        break;

    case NGX_OMNIROUTE_LEASE_RENEW:
        rc = ngx_omniroute_lease_renew(st, op);
        break;

    case NGX_OMNIROUTE_LEASE_RELEASE:
        rc = ngx_omniroute_lease_release(st, op);
        break;

    default: /* NGX_OMNIROUTE_LEASE_REVOKE */
        rc = ngx_omniroute_lease_revoke(st, op);
        break;
    }

    ngx_shmtx_unlock(lock);

    return rc;
}


static ngx_int_t
ngx_omniroute_lease_acquire(ngx_omniroute_store_t *st,
    ngx_omniroute_lease_op_t *op)
{
    int              i;
    uint64_t         version;
    ngx_uint_t       k, n;
    or_lease_t       prev, old;
    or_lease_rc_e    rc;
    or_lease_t       conn_lease[NGX_OMNIROUTE_LEASE_CONNS_MAX];
    or_lease_slot_t  slots[NGX_OMNIROUTE_LEASE_CONNS_MAX];

    n = op->nconns;

    if (n == 0 || n > NGX_OMNIROUTE_LEASE_CONNS_MAX) {
        op->rc = OR_LEASE_CAPACITY;
        op->retry = 0;
        return NGX_OK;
    }

    ngx_memzero(&prev, sizeof(or_lease_t));
    version = 0;

    if (op->rebind) {
        if (ngx_omniroute_lease_read_owner(st, op->owner, &prev) != NGX_OK) {
            op->rc = OR_LEASE_NOT_FOUND;
            return NGX_OK;
        }

        rc = or_lease_check(&prev, op->owner, (const char *) op->key.data,
                            op->key.len, op->generation, op->now);

        if (rc != OR_LEASE_OK && rc != OR_LEASE_EXPIRED) {
            op->rc = rc;
            return NGX_OK;
        }

        version = prev.version;
    }

    for (k = 0; k < n; k++) {
        slots[k].eligible = op->eligible ? op->eligible[k] : 1;
        slots[k].lease = NULL;

        if (ngx_omniroute_lease_read_conn(st, op->conns[k].data,
                                          op->conns[k].len, &conn_lease[k])
            == NGX_OK)
        {
            slots[k].lease = &conn_lease[k];
            version = ngx_max(version, conn_lease[k].version);
        }
    }

    i = or_lease_pick(slots, n, op->rebind ? op->owner : NULL, op->now,
                      &op->retry);

    if (i < 0) {
        op->rc = OR_LEASE_CAPACITY;
        return NGX_OK;
    }

    op->lease.version = version + 1;

    if (or_lease_bind(&op->lease, op->owner, (const char *) op->key.data,
                      op->key.len, (const char *) op->conns[i].data,
                      op->conns[i].len, op->rebind ? prev.generation : 0,
                      prev.acquired_at, op->now, op->ttl)
        != 0)
    {
        return NGX_ERROR;
    }

    if (ngx_omniroute_lease_put(st, &op->lease, 0, 0, op->now) != NGX_OK
        || ngx_omniroute_lease_put(st, &op->lease, 1, 0, op->now) != NGX_OK)
    {
        return NGX_ERROR;
    }

    /* a rebinding that moved: its previous connection is free */

    if (op->rebind
        && (prev.conn_len != op->lease.conn_len
            || ngx_memcmp(prev.conn, op->lease.conn, prev.conn_len) != 0)
        && ngx_omniroute_lease_read_conn(st, (u_char *) prev.conn,
                                         prev.conn_len, &old)
           == NGX_OK
        && or_lease_of(&old, op->owner))
    {
        (void) ngx_omniroute_lease_end(st, &old, op->lease.version,
                                       op->now);
    }

    op->rc = OR_LEASE_OK;

    return NGX_OK;
}


static ngx_int_t
ngx_omniroute_lease_renew(ngx_omniroute_store_t *st,
    ngx_omniroute_lease_op_t *op)
{
    or_lease_t     l, c;
    or_lease_rc_e  rc;

    if (ngx_omniroute_lease_read_owner(st, op->owner, &l) != NGX_OK) {
        op->rc = OR_LEASE_NOT_FOUND;
        return NGX_OK;
    }

    rc = or_lease_check(&l, op->owner, (const char *) op->key.data,
                        op->key.len, op->generation, op->now);

    if (rc == OR_LEASE_OK
        && (ngx_omniroute_lease_read_conn(st, (u_char *) l.conn, l.conn_len,
                                          &c)
            != NGX_OK
            || or_lease_check(&c, op->owner, (const char *) op->key.data,
                              op->key.len, op->generation, op->now)
               != OR_LEASE_OK))
    {
        /* its connection went to another lease: lost, as if expired */
        rc = OR_LEASE_EXPIRED;
    }

    op->rc = rc;

    if (rc != OR_LEASE_OK) {
        return NGX_OK;
    }

    or_lease_renew(&l, op->now, op->ttl);
    l.version = ngx_max(l.version, c.version) + 1;

    op->lease = l;

    if (ngx_omniroute_lease_put(st, &l, 0, 0, op->now) != NGX_OK
        || ngx_omniroute_lease_put(st, &l, 1, 0, op->now) != NGX_OK)
    {
        return NGX_ERROR;
    }

    return NGX_OK;
}


static ngx_int_t
ngx_omniroute_lease_release(ngx_omniroute_store_t *st,
    ngx_omniroute_lease_op_t *op)
{
    or_lease_t     l, c;
    or_lease_rc_e  rc;

    if (ngx_omniroute_lease_read_owner(st, op->owner, &l) != NGX_OK) {
        op->rc = OR_LEASE_NOT_FOUND;
        return NGX_OK;
    }

    rc = or_lease_check(&l, op->owner, (const char *) op->key.data,
                        op->key.len, op->generation, op->now);

    op->rc = rc;
    op->lease = l;

    if (rc != OR_LEASE_OK) {
        return NGX_OK;
    }

    if (ngx_omniroute_lease_read_conn(st, (u_char *) l.conn, l.conn_len, &c)
        == NGX_OK
        && or_lease_of(&c, op->owner))
    {
        (void) ngx_omniroute_lease_end(st, &c, l.version + 1, op->now);
    }

    return ngx_omniroute_lease_end(st, &l, l.version + 1, op->now);
}


static ngx_int_t
ngx_omniroute_lease_revoke(ngx_omniroute_store_t *st,
    ngx_omniroute_lease_op_t *op)
{
    or_lease_t  c, o;

    if (op->nconns == 0
        || ngx_omniroute_lease_read_conn(st, op->conns[0].data,
                                         op->conns[0].len, &c)
           != NGX_OK
        || !or_lease_active(&c, op->now))
    {
        op->rc = OR_LEASE_NOT_FOUND;
        return NGX_OK;
    }

    op->rc = OR_LEASE_OK;
    op->lease = c;

    if (ngx_omniroute_lease_read_owner(st, c.owner, &o) == NGX_OK
        && o.conn_len == c.conn_len
        && ngx_memcmp(o.conn, c.conn, c.conn_len) == 0)
    {
        (void) ngx_omniroute_lease_end(st, &o, c.version + 1, op->now);
    }

    return ngx_omniroute_lease_end(st, &c, c.version + 1, op->now);
}


/*
 * One record of l, by its connection or its owner; the record expires a
 * while after the lease (an owner record is kept longer).  newer: only
 * over an older version.
 */

static ngx_int_t
ngx_omniroute_lease_put(ngx_omniroute_store_t *st, or_lease_t *l,
    ngx_uint_t by_owner, ngx_uint_t newer, or_msec_t now)
{
    u_char                     buf[NGX_OMNIROUTE_LEASE_KEY_MAX];
    ngx_str_t                  key;
    ngx_omniroute_lease_put_t  put;

    key.data = buf;

    if (by_owner) {
        key.len = ngx_omniroute_lease_key_owner(buf, l->owner);

    } else {
        key.len = ngx_omniroute_lease_key_conn(buf, (u_char *) l->conn,
                                               l->conn_len);
    }

    put.lease = l;
    put.newer = newer;

    if (l->state == OR_LEASE_ACTIVE) {
        put.expires = l->expires_at
                      + (by_owner ? NGX_OMNIROUTE_LEASE_RETAIN
                                  : NGX_OMNIROUTE_LEASE_TOMB);

    } else {
        put.expires = now + NGX_OMNIROUTE_LEASE_TOMB;
    }

    if (ngx_omniroute_store_update(st, NGX_OMNIROUTE_T_LEASE, &key,
                                   sizeof(or_lease_t),
                                   ngx_omniroute_lease_update, &put, 0)
        == NGX_ERROR)
    {
        return NGX_ERROR;
    }

    return NGX_OK;
}


/* l ends: a tombstone of version under the key l is found by */

static ngx_int_t
ngx_omniroute_lease_end(ngx_omniroute_store_t *st, or_lease_t *l,
    uint64_t version, or_msec_t now)
{
    or_lease_t  t;
    ngx_int_t   rc;

    t = *l;
    or_lease_end(&t);
    t.version = version;

    rc = ngx_omniroute_lease_put(st, &t, 0, 1, now);

    if (rc == NGX_OK) {
        rc = ngx_omniroute_lease_put(st, &t, 1, 1, now);
    }

    return rc;
}


static ngx_uint_t
ngx_omniroute_lease_update(void *value, void *arg, or_msec_t *expires)
{
    ngx_omniroute_lease_put_t *put = arg;

    or_lease_t  *cur;

    cur = value;

    if (put->newer && cur->state != OR_LEASE_NONE
        && cur->version >= put->lease->version)
    {
        return NGX_OMNIROUTE_UNCHANGED;
    }

    *cur = *put->lease;
    *expires = put->expires;

    return NGX_OMNIROUTE_CHANGED;
}


/*
 * Redis's view of a lease.  A tombstone is written under its connection
 * only while that record is still this owner's (a later lease of the
 * connection has a newer version anyway).
 */

ngx_int_t
ngx_omniroute_lease_apply(ngx_omniroute_store_t *st, ngx_shmtx_t *lock,
    or_lease_t *l)
{
    or_msec_t   now;
    ngx_int_t   rc;
    or_lease_t  o, old;

    now = ngx_omniroute_now();

    ngx_shmtx_lock(lock);

    if (l->state == OR_LEASE_ACTIVE
        && ngx_omniroute_lease_read_owner(st, l->owner, &o) == NGX_OK
        && o.version < l->version
        && (o.conn_len != l->conn_len
            || ngx_memcmp(o.conn, l->conn, l->conn_len) != 0)
        && ngx_omniroute_lease_read_conn(st, (u_char *) o.conn, o.conn_len,
                                         &old)
           == NGX_OK
        && or_lease_of(&old, l->owner) && old.version < l->version)
    {
        /* a rebinding elsewhere: its previous connection is free */
        (void) ngx_omniroute_lease_end(st, &old, l->version, now);
    }

    rc = ngx_omniroute_lease_put(st, l, 1, 1, now);

    if (rc == NGX_OK
        && (l->state == OR_LEASE_ACTIVE
            || (ngx_omniroute_lease_read_conn(st, (u_char *) l->conn,
                                              l->conn_len, &old)
                == NGX_OK
                && or_lease_of(&old, l->owner))))
    {
        rc = ngx_omniroute_lease_put(st, l, 0, 1, now);
    }

    ngx_shmtx_unlock(lock);

    return rc;
}


static void
ngx_omniroute_lease_collect(ngx_str_t *key, void *value, size_t size,
    void *arg)
{
    ngx_omniroute_lease_walk_t *w = arg;

    or_lease_t  *l;

    if (size < sizeof(or_lease_t) || key->len < 2 || key->data[0] != 'c') {
        return;
    }

    if (!or_lease_active((or_lease_t *) value, w->now)) {
        return;
    }

    l = ngx_array_push(w->out);
    if (l == NULL) {
        return;
    }

    ngx_memcpy(l, value, sizeof(or_lease_t));
}


ngx_int_t
ngx_omniroute_lease_list(ngx_omniroute_store_t *st, ngx_pool_t *pool,
    ngx_array_t *out)
{
    ngx_omniroute_lease_walk_t  w;

    if (ngx_array_init(out, pool, 4, sizeof(or_lease_t)) != NGX_OK) {
        return NGX_ERROR;
    }

    if (ngx_omniroute_store_empty(st, NGX_OMNIROUTE_T_LEASE)) {
        return NGX_OK;
    }

    ngx_memzero(&w, sizeof(ngx_omniroute_lease_walk_t));
    w.out = out;
    w.now = ngx_omniroute_now();

    (void) ngx_omniroute_store_visit(st, NGX_OMNIROUTE_T_LEASE,
                                     ngx_omniroute_lease_collect, &w, pool);

    return NGX_OK;
}


static void
ngx_omniroute_lease_check_keep(ngx_str_t *key, void *value, size_t size,
    void *arg)
{
    ngx_omniroute_lease_walk_t *w = arg;

    ngx_str_t   *k;
    or_lease_t   l;

    if (size < sizeof(or_lease_t)) {
        return;
    }

    ngx_memcpy(&l, value, sizeof(or_lease_t));

    if (l.state != OR_LEASE_ACTIVE || w->keep(&l, w->arg)) {
        return;
    }

    k = ngx_array_push(w->drop);
    if (k == NULL) {
        return;
    }

    k->data = ngx_pnalloc(w->pool, key->len);
    if (k->data == NULL) {
        w->drop->nelts--;
        return;
    }

    ngx_memcpy(k->data, key->data, key->len);
    k->len = key->len;
}


ngx_uint_t
ngx_omniroute_lease_sweep(ngx_omniroute_store_t *st, ngx_shmtx_t *lock,
    ngx_omniroute_lease_keep_pt keep, void *arg, ngx_pool_t *pool)
{
    ngx_str_t                   *k;
    ngx_uint_t                   i, n;
    ngx_array_t                  drop;
    ngx_omniroute_lease_walk_t   w;

    if (ngx_omniroute_store_empty(st, NGX_OMNIROUTE_T_LEASE)
        || ngx_array_init(&drop, pool, 4, sizeof(ngx_str_t)) != NGX_OK)
    {
        return 0;
    }

    ngx_memzero(&w, sizeof(ngx_omniroute_lease_walk_t));
    w.keep = keep;
    w.arg = arg;
    w.drop = &drop;
    w.pool = pool;
    w.now = ngx_omniroute_now();

    ngx_shmtx_lock(lock);

    (void) ngx_omniroute_store_visit(st, NGX_OMNIROUTE_T_LEASE,
                                     ngx_omniroute_lease_check_keep, &w,
                                     pool);

    k = drop.elts;
    n = 0;

    for (i = 0; i < drop.nelts; i++) {
        if (ngx_omniroute_store_delete(st, NGX_OMNIROUTE_T_LEASE, &k[i], 0)
            == NGX_OK)
        {
            n++;
        }
    }

    ngx_shmtx_unlock(lock);

    return n;
}
