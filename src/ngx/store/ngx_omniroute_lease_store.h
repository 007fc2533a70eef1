
/*
 * Copyright (C) ngx_omniroute authors
 *
 * Exclusive leases in the shared zone (R-LEASE-2/3): each lease is one
 * or_lease_t kept under two keys of the lease table,
 *
 *   "c:" connection id      which lease holds a connection (dispatch)
 *   "o:" owner hash (hex)   the lease of an owner token (managed requests,
 *                           renew, release)
 *
 * so that both lookups are one read.  The lifecycle (acquire, renew,
 * release, revoke) runs under a lock of its own, the mutex of the
 * "omniroute_keys" zone, held across the reads and writes of both
 * records: at most one active lease per connection and per owner, for
 * every worker.  Reads (dispatch) take only the store's lock.
 *
 * With Redis (cluster/ngx_omniroute_redis_lease.c) the lifecycle runs in
 * Redis, atomically for every node; the zone then holds what Redis
 * said, applied by version (ngx_omniroute_lease_apply()), and a remote
 * backend registered in ngx_omniroute_lease_remote does the calls.
 *
 * Records never hold an owner token, only its SHA-256.  The lease table
 * is of the settings class (never evicted: a lease that disappeared
 * would break exclusivity); its size is bounded by the configuration
 * (a lease holds a connection).  An owner record is kept
 * NGX_OMNIROUTE_LEASE_RETAIN past its expiry (to answer "expired" and
 * keep the generation for a rebinding), a tombstone
 * NGX_OMNIROUTE_LEASE_TOMB.
 */


#ifndef _NGX_OMNIROUTE_LEASE_STORE_H_INCLUDED_
#define _NGX_OMNIROUTE_LEASE_STORE_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>

#include "ngx_omniroute_store.h"
#include "or_lease.h"


#define NGX_OMNIROUTE_LEASE_RETAIN   (3600 * 1000)
#define NGX_OMNIROUTE_LEASE_TOMB     (60 * 1000)

#define NGX_OMNIROUTE_LEASE_KEY_MAX  (2 + 2 * OR_LEASE_HASH_LEN)
#define NGX_OMNIROUTE_LEASE_CONNS_MAX  64   /* connections of a lease key */


typedef enum {
    NGX_OMNIROUTE_LEASE_ACQUIRE = 0,
    NGX_OMNIROUTE_LEASE_RENEW,
    NGX_OMNIROUTE_LEASE_RELEASE,
    NGX_OMNIROUTE_LEASE_REVOKE          /* admin: by connection */
} ngx_omniroute_lease_action_e;


/* one lifecycle call, in and out */
typedef struct {
    ngx_uint_t                    action;
    u_char                        owner[OR_LEASE_HASH_LEN];
    ngx_uint_t                    rebind;       /* acquire, owner given */
    uint64_t                      generation;   /* presented */
    ngx_str_t                     key;          /* client key id */
    ngx_str_t                    *conns;        /* acquire: in order of
                                                   preference; revoke:
                                                   conns[0] */
    u_char                       *eligible;     /* per connection */
    ngx_uint_t                    nconns;
    or_msec_t                     ttl;
    or_msec_t                     now;

    /* the answer */
    or_lease_rc_e                 rc;
    ngx_uint_t                    failed;       /* no answer: backend down */
    or_lease_t                    lease;        /* after the call */
    or_msec_t                     retry;        /* OR_LEASE_CAPACITY */
} ngx_omniroute_lease_op_t;


typedef void (*ngx_omniroute_lease_done_pt)(void *data,
    ngx_omniroute_lease_op_t *op);


/*
 * The backend that runs the lifecycle across nodes, set in each worker
 * by the Redis lease link when omniroute_redis is configured, else NULL.
 * run(): NGX_DONE (done() is called later with op answered or
 * op->failed), or NGX_DECLINED (the backend is down: nothing sent).
 * cancel(): the caller went away; done() is not called.  With done NULL
 * (fire and forget) the backend owns op, allocated with ngx_alloc() in
 * one piece with what it points to, and frees it with ngx_free().
 */
typedef struct {
    ngx_int_t                   (*run)(ngx_omniroute_lease_op_t *op,
                                       ngx_omniroute_lease_done_pt done,
                                       void *data, void **handle);
    void                        (*cancel)(void *handle);
} ngx_omniroute_lease_remote_t;


extern ngx_omniroute_lease_remote_t  *ngx_omniroute_lease_remote;


size_t ngx_omniroute_lease_key_conn(u_char *buf, u_char *conn, size_t len);
size_t ngx_omniroute_lease_key_owner(u_char *buf, u_char *owner);

ngx_int_t ngx_omniroute_lease_read_conn(ngx_omniroute_store_t *st,
    u_char *conn, size_t len, or_lease_t *l);
ngx_int_t ngx_omniroute_lease_read_owner(ngx_omniroute_store_t *st,
    u_char *owner, or_lease_t *l);

/* the lifecycle on the zone alone (no Redis); op->rc is the answer */
ngx_int_t ngx_omniroute_lease_run(ngx_omniroute_store_t *st,
    ngx_shmtx_t *lock, ngx_omniroute_lease_op_t *op);

/*
 * A lease as Redis has it (active, or ended: OR_LEASE_GONE), written to
 * both records when its version is newer than theirs; a rebinding's
 * previous connection is freed.
 */
ngx_int_t ngx_omniroute_lease_apply(ngx_omniroute_store_t *st,
    ngx_shmtx_t *lock, or_lease_t *l);

/* drops every lease not marked by keep() (after a full load) */
typedef ngx_uint_t (*ngx_omniroute_lease_keep_pt)(or_lease_t *l, void *arg);

ngx_uint_t ngx_omniroute_lease_sweep(ngx_omniroute_store_t *st,
    ngx_shmtx_t *lock, ngx_omniroute_lease_keep_pt keep, void *arg,
    ngx_pool_t *pool);

/* copies of the active leases (by connection) into an array of or_lease_t */
ngx_int_t ngx_omniroute_lease_list(ngx_omniroute_store_t *st,
    ngx_pool_t *pool, ngx_array_t *out);


#endif /* _NGX_OMNIROUTE_LEASE_STORE_H_INCLUDED_ */
