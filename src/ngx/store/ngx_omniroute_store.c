
/*
 * Copyright (C) ngx_omniroute authors
 *
 * The shared-memory state store (see ngx_omniroute_store.h): records in
 * one rbtree with an LRU per eviction class, reads and updates, the event
 * ring and the counters.  The zone's life (made, adopted after a reload,
 * carried into a zone of another size) is in ngx_omniroute_store_zone.c.
 */


#include <ngx_config.h>
#include <ngx_core.h>

#include "ngx_omniroute_store_int.h"
#include "or_cooldown.h"


#define NGX_OMNIROUTE_EXPIRE_BATCH  2   /* stale records dropped per insert */
#define NGX_OMNIROUTE_EVICT_MAX     16  /* records evicted per class for
                                           one insert */
#define NGX_OMNIROUTE_VICTIM_WALK   64  /* kept records passed over when
                                           looking for one to evict */


/* what an insert has to say, logged once the zone is unlocked */
typedef struct {
    ngx_uint_t                    noted;        /* something to count */
    ngx_uint_t                    table;        /* the record asked for */
    ngx_uint_t                    victim;       /* last protective table */
    ngx_uint_t                    alert;
    ngx_uint_t                    warn;
    ngx_uint_t                    failures;
    ngx_uint_t                    dropped;
    ngx_uint_t                    model;
} ngx_omniroute_report_t;


static ngx_int_t ngx_omniroute_node_cmp(ngx_omniroute_node_t *a,
    ngx_uint_t table, u_char *key, size_t len);
static ngx_uint_t ngx_omniroute_store_readable(ngx_omniroute_store_t *st,
    ngx_uint_t table, ngx_str_t *key);
static ngx_int_t ngx_omniroute_store_get(ngx_omniroute_store_t *st,
    ngx_uint_t table, ngx_str_t *key, uint32_t hash, void *value,
    size_t size, ngx_omniroute_store_cache_t *cache);
static ngx_omniroute_node_t *ngx_omniroute_store_find(
    ngx_omniroute_store_t *st, ngx_uint_t table, ngx_str_t *key,
    uint32_t hash);
static ngx_omniroute_node_t *ngx_omniroute_store_insert(
    ngx_omniroute_store_t *st, ngx_uint_t table, ngx_str_t *key,
    uint32_t hash, size_t size, or_msec_t now, ngx_omniroute_report_t *rep);
static void ngx_omniroute_store_free(ngx_omniroute_store_t *st,
    ngx_omniroute_node_t *sn);
static ngx_omniroute_node_t *ngx_omniroute_store_victim(
    ngx_omniroute_sh_t *sh, ngx_uint_t class);
static void ngx_omniroute_store_evict(ngx_omniroute_store_t *st,
    ngx_omniroute_node_t *sn, ngx_omniroute_report_t *rep);
static ngx_int_t ngx_omniroute_store_budget(ngx_omniroute_store_t *st,
    size_t chunk, ngx_omniroute_report_t *rep);
static void *ngx_omniroute_store_alloc(ngx_omniroute_store_t *st,
    ngx_uint_t table, size_t size, or_msec_t now,
    ngx_omniroute_report_t *rep);
static void ngx_omniroute_store_expire(ngx_omniroute_store_t *st,
    ngx_uint_t n, or_msec_t now);
static void ngx_omniroute_store_owe(ngx_omniroute_sh_t *sh,
    ngx_omniroute_report_t *rep);
static void ngx_omniroute_store_report(ngx_omniroute_store_t *st,
    ngx_omniroute_report_t *rep);
static ngx_int_t ngx_omniroute_store_apply(ngx_omniroute_store_t *st,
    ngx_omniroute_node_t *sn, ngx_uint_t table, ngx_str_t *key,
    ngx_omniroute_update_pt update, void *arg, ngx_uint_t remote,
    ngx_uint_t created, or_msec_t now);
static void ngx_omniroute_store_event(ngx_omniroute_sh_t *sh,
    ngx_uint_t table, ngx_str_t *key, ngx_uint_t op, ngx_uint_t remote,
    or_msec_t now);


/* values up to this size are compared after an update that changed none */
#define NGX_OMNIROUTE_GEN_COPY  512


ngx_omniroute_table_t  ngx_omniroute_store_tables[NGX_OMNIROUTE_T_COUNT] = {

    /* NGX_OMNIROUTE_T_BREAKER */
    { "breaker", NGX_OMNIROUTE_EC_CONFIG, NGX_OMNIROUTE_EC_CONFIG, 1 },

    /* NGX_OMNIROUTE_T_CONN */
    { "connection", NGX_OMNIROUTE_EC_CONFIG, NGX_OMNIROUTE_EC_CONFIG, 1 },

    /* NGX_OMNIROUTE_T_LOCKOUT */
    { "lockout", NGX_OMNIROUTE_EC_MODEL, NGX_OMNIROUTE_EC_MODEL, 1 },

    /* NGX_OMNIROUTE_T_REJECTED */
    { "rejected", NGX_OMNIROUTE_EC_MODEL, NGX_OMNIROUTE_EC_MODEL, 1 },

    /* NGX_OMNIROUTE_T_STRATEGY: node-local, never mirrored */
    { "strategy", NGX_OMNIROUTE_EC_STRATEGY, NGX_OMNIROUTE_EC_STRATEGY, 0 },

    /* NGX_OMNIROUTE_T_SETTINGS */
    { "settings", NGX_OMNIROUTE_EC_SETTINGS, NGX_OMNIROUTE_EC_CONFIG, 1 },

    /* NGX_OMNIROUTE_T_PIN */
    { "session_pin", NGX_OMNIROUTE_EC_SESSION, NGX_OMNIROUTE_EC_STRATEGY, 1 },

    /* NGX_OMNIROUTE_T_LEASE: never evicted; Redis has its own (leases) */
    { "lease", NGX_OMNIROUTE_EC_SETTINGS, NGX_OMNIROUTE_EC_MODEL, 0 },

    /* NGX_OMNIROUTE_T_LANE: protective, like a cooldown (R-LANE-8) */
    { "lane", NGX_OMNIROUTE_EC_CONFIG, NGX_OMNIROUTE_EC_CONFIG, 1 },
    /* NGX_OMNIROUTE_T_PACE: pauses and tool limits, evicted as lockouts */
    { "pace", NGX_OMNIROUTE_EC_MODEL, NGX_OMNIROUTE_EC_MODEL, 1 }
};


or_msec_t
ngx_omniroute_now(void)
{
    ngx_time_t  *tp;

    tp = ngx_timeofday();

    return (or_msec_t) tp->sec * 1000 + tp->msec;
}


ngx_uint_t
ngx_omniroute_store_mirrored(ngx_uint_t table)
{
    return table < NGX_OMNIROUTE_T_COUNT
           && ngx_omniroute_store_tables[table].mirrored;
}


const char *
ngx_omniroute_store_table_name(ngx_uint_t table)
{
    return table < NGX_OMNIROUTE_T_COUNT
           ? ngx_omniroute_store_tables[table].name : "unknown";
}


/* the table's generation (0: no zone), read without the lock */

ngx_atomic_uint_t
ngx_omniroute_store_gen(ngx_omniroute_store_t *st, ngx_uint_t table)
{
    if (st == NULL || st->sh == NULL || table >= NGX_OMNIROUTE_T_COUNT) {
        return 0;
    }

    /* a word: read whole without the lock */
    return *(volatile ngx_atomic_uint_t *) &st->sh->gen[table];
}


/* a copy of the record's value; NGX_DECLINED when there is none */

ngx_int_t
ngx_omniroute_store_read(ngx_omniroute_store_t *st, ngx_uint_t table,
    ngx_str_t *key, void *value, size_t size)
{
    if (!ngx_omniroute_store_readable(st, table, key)) {
        return NGX_DECLINED;
    }

    return ngx_omniroute_store_get(st, table, key,
                                   ngx_omniroute_store_hash(table, key),
                                   value, size, NULL);
}


/*
 * The same with the key's hash (ngx_omniroute_store_hash()) computed
 * beforehand: the keys configuration knows (a connection's, a route's
 * lockouts) are hashed once, at configuration time.
 */

ngx_int_t
ngx_omniroute_store_read_hashed(ngx_omniroute_store_t *st, ngx_uint_t table,
    ngx_str_t *key, uint32_t hash, void *value, size_t size)
{
    if (!ngx_omniroute_store_readable(st, table, key)) {
        return NGX_DECLINED;
    }

    return ngx_omniroute_store_get(st, table, key, hash, value, size, NULL);
}


/*
 * The same through a worker's copy of the record: while the table has not
 * changed since the copy was read (its generation, read without the lock)
 * and the record has not expired, the copy is the record, and neither the
 * lock nor the tree is needed.  A pool's cooling connections, checked on
 * every request, cost a copy each.  Such a read does not move the record
 * up its LRU queue: the tables read this way are config-keyed (one record
 * per connection), whose class overflows only in a zone too small for the
 * configuration.
 */

ngx_int_t
ngx_omniroute_store_read_cached(ngx_omniroute_store_t *st, ngx_uint_t table,
    ngx_str_t *key, uint32_t hash, ngx_omniroute_store_cache_t *cache,
    void *value, size_t size)
{
    if (!ngx_omniroute_store_readable(st, table, key)) {
        return NGX_DECLINED;
    }

    if (cache == NULL || size > NGX_OMNIROUTE_CACHE_VALUE) {
        return ngx_omniroute_store_get(st, table, key, hash, value, size,
                                       NULL);
    }

    if (cache->gen == ngx_omniroute_store_gen(st, table)
        && (cache->expires == 0 || cache->expires > ngx_omniroute_now()))
    {
        if (cache->rc == NGX_OK) {
            ngx_memcpy(value, cache->value, size);
        }

        return cache->rc;
    }

    return ngx_omniroute_store_get(st, table, key, hash, value, size, cache);
}


/* a read can find something: a known table with records, a key that fits */

static ngx_uint_t
ngx_omniroute_store_readable(ngx_omniroute_store_t *st, ngx_uint_t table,
    ngx_str_t *key)
{
    return table < NGX_OMNIROUTE_T_COUNT
           && !ngx_omniroute_store_empty(st, table)
           && key->len <= NGX_OMNIROUTE_KEY_MAX;
}


/*
 * The copy of a record under the lock, NGX_DECLINED when there is none (or
 * of another size); with cache, the worker's copy is taken at once, with
 * the record's expiry and the table's generation.
 */

static ngx_int_t
ngx_omniroute_store_get(ngx_omniroute_store_t *st, ngx_uint_t table,
    ngx_str_t *key, uint32_t hash, void *value, size_t size,
    ngx_omniroute_store_cache_t *cache)
{
    ngx_int_t              rc;
    ngx_omniroute_node_t  *sn;

    ngx_shmtx_lock(&st->shpool->mutex);

    sn = ngx_omniroute_store_find(st, table, key, hash);

    if (sn && sn->size == ngx_align(size, sizeof(uint64_t))) {
        ngx_memcpy(value, sn->data, size);
        rc = NGX_OK;

    } else {
        sn = NULL;
        rc = NGX_DECLINED;
    }

    if (cache) {
        if (sn) {
            ngx_memcpy(cache->value, sn->data, size);
        }

        cache->expires = sn ? sn->expires : 0;
        cache->rc = rc;
        cache->gen = st->sh->gen[table];
    }

    ngx_shmtx_unlock(&st->shpool->mutex);

    return rc;
}


/*
 * The record of a key under the lock, or NULL; one that expired is freed
 * first (it holds nothing worth keeping any more: a tombstone, a lapsed
 * lockout or pin), so that the table returns to empty and reads go
 * without the lock again.  Peers expire their own copy.
 */

static ngx_omniroute_node_t *
ngx_omniroute_store_find(ngx_omniroute_store_t *st, ngx_uint_t table,
    ngx_str_t *key, uint32_t hash)
{
    ngx_omniroute_node_t  *sn;

    sn = ngx_omniroute_store_lookup(st->sh, table, key, hash);

    if (sn && sn->expires && sn->expires <= ngx_omniroute_now()) {
        ngx_omniroute_store_free(st, sn);
        sn = NULL;
    }

    return sn;
}


/*
 * Find or create the record and let update() change its value in place,
 * under the zone lock.  Returns NGX_OK (changed or deleted), NGX_DECLINED
 * (unchanged) or NGX_ERROR (no room even after eviction: the change is
 * lost, the request goes on).
 */

ngx_int_t
ngx_omniroute_store_update(ngx_omniroute_store_t *st, ngx_uint_t table,
    ngx_str_t *key, size_t size, ngx_omniroute_update_pt update, void *arg,
    ngx_uint_t remote)
{
    uint32_t                hash;
    ngx_int_t               rc;
    or_msec_t               now;
    ngx_omniroute_sh_t     *sh;
    ngx_omniroute_node_t   *sn;
    ngx_omniroute_report_t  rep;

    if (st == NULL || st->sh == NULL || key->len > NGX_OMNIROUTE_KEY_MAX
        || table >= NGX_OMNIROUTE_T_COUNT)
    {
        return NGX_ERROR;
    }

    sh = st->sh;
    now = ngx_omniroute_now();
    hash = ngx_omniroute_store_hash(table, key);

    ngx_memzero(&rep, sizeof(ngx_omniroute_report_t));

    ngx_shmtx_lock(&st->shpool->mutex);

    sn = ngx_omniroute_store_lookup(sh, table, key, hash);

    if (sn && sn->size != ngx_align(size, sizeof(uint64_t))) {
        /* the value's layout changed (module upgrade): start afresh */
        ngx_omniroute_store_free(st, sn);
        sn = NULL;
    }

    if (sn) {
        rc = ngx_omniroute_store_apply(st, sn, table, key, update, arg,
                                       remote, 0, now);

    } else {
        sn = ngx_omniroute_store_insert(st, table, key, hash, size, now,
                                        &rep);

        rc = (sn == NULL) ? NGX_ERROR
                          : ngx_omniroute_store_apply(st, sn, table, key,
                                                      update, arg, remote, 1,
                                                      now);
    }

    if (rep.noted) {
        ngx_omniroute_store_owe(sh, &rep);
    }

    ngx_shmtx_unlock(&st->shpool->mutex);

    if (rep.alert || rep.warn) {
        ngx_omniroute_store_report(st, &rep);
    }

    return rc;
}


/*
 * Like ngx_omniroute_store_update(), but only for a record that exists:
 * success paths touch state without creating any.  NGX_DECLINED when the
 * record does not exist or did not change.
 */

ngx_int_t
ngx_omniroute_store_touch(ngx_omniroute_store_t *st, ngx_uint_t table,
    ngx_str_t *key, size_t size, ngx_omniroute_update_pt update, void *arg)
{
    uint32_t               hash;
    ngx_int_t              rc;
    ngx_omniroute_node_t  *sn;

    if (st == NULL || st->sh == NULL || key->len > NGX_OMNIROUTE_KEY_MAX
        || table >= NGX_OMNIROUTE_T_COUNT)
    {
        return NGX_DECLINED;
    }

    hash = ngx_omniroute_store_hash(table, key);

    ngx_shmtx_lock(&st->shpool->mutex);

    sn = ngx_omniroute_store_lookup(st->sh, table, key, hash);

    if (sn == NULL || sn->size != ngx_align(size, sizeof(uint64_t))) {
        ngx_shmtx_unlock(&st->shpool->mutex);
        return NGX_DECLINED;
    }

    rc = ngx_omniroute_store_apply(st, sn, table, key, update, arg, 0, 0,
                                   ngx_omniroute_now());

    ngx_shmtx_unlock(&st->shpool->mutex);

    return rc;
}


ngx_int_t
ngx_omniroute_store_delete(ngx_omniroute_store_t *st, ngx_uint_t table,
    ngx_str_t *key, ngx_uint_t remote)
{
    uint32_t               hash;
    ngx_int_t              rc;
    ngx_omniroute_node_t  *sn;

    if (st == NULL || st->sh == NULL || key->len > NGX_OMNIROUTE_KEY_MAX
        || table >= NGX_OMNIROUTE_T_COUNT)
    {
        return NGX_DECLINED;
    }

    hash = ngx_omniroute_store_hash(table, key);

    ngx_shmtx_lock(&st->shpool->mutex);

    sn = ngx_omniroute_store_lookup(st->sh, table, key, hash);

    if (sn) {
        ngx_omniroute_store_free(st, sn);
        ngx_omniroute_store_event(st->sh, table, key,
                                  NGX_OMNIROUTE_OP_DELETE, remote,
                                  ngx_omniroute_now());
        rc = NGX_OK;

    } else {
        rc = NGX_DECLINED;
    }

    ngx_shmtx_unlock(&st->shpool->mutex);

    return rc;
}


/*
 * Several records changed under one lock, all or nothing.  First every
 * record is found, and created when op->create and missing; found and
 * created records leave the LRU queue meanwhile, so that making room for
 * the next one cannot drop them.  When one cannot be created, those
 * created are freed again and NGX_ERROR returned: nothing changed (records
 * the inserts expired or evicted to make room stay dropped, as for any
 * insert).  Then each op's update function runs as in
 * ngx_omniroute_store_update() (op->create) or ngx_omniroute_store_touch()
 * (a missing record is left alone), and op->rc gets its result.  The keys
 * must be distinct.
 */

ngx_int_t
ngx_omniroute_store_update_all(ngx_omniroute_store_t *st,
    ngx_omniroute_store_op_t *ops, ngx_uint_t n)
{
    uint32_t                   hash;
    or_msec_t                  now;
    ngx_uint_t                 i, created;
    ngx_queue_t                held;
    ngx_omniroute_sh_t        *sh;
    ngx_omniroute_node_t      *sn;
    ngx_omniroute_report_t     rep;
    ngx_omniroute_store_op_t  *op;

    if (st == NULL || st->sh == NULL) {
        return NGX_ERROR;
    }

    for (i = 0; i < n; i++) {
        if (ops[i].key.len > NGX_OMNIROUTE_KEY_MAX) {
            return NGX_ERROR;
        }

        ops[i].node = NULL;
        ops[i].rc = NGX_DECLINED;
    }

    sh = st->sh;
    now = ngx_omniroute_now();
    ngx_queue_init(&held);
    ngx_memzero(&rep, sizeof(ngx_omniroute_report_t));

    ngx_shmtx_lock(&st->shpool->mutex);

    for (i = 0; i < n; i++) {
        op = &ops[i];
        hash = ngx_omniroute_store_hash(op->table, &op->key);

        sn = ngx_omniroute_store_lookup(sh, op->table, &op->key, hash);

        if (sn && sn->size != ngx_align(op->size, sizeof(uint64_t))) {
            if (op->create) {
                /* an old layout, which no reader sees: start afresh */
                ngx_omniroute_store_free(st, sn);
            }

            sn = NULL;
        }

        if (sn == NULL && op->create) {
            sn = ngx_omniroute_store_insert(st, op->table, &op->key, hash,
                                            op->size, now, &rep);

            if (sn == NULL) {
                goto failed;
            }
        }

        if (sn) {
            ngx_queue_remove(&sn->queue);
            ngx_queue_insert_tail(&held, &sn->queue);
            op->node = sn;
        }
    }

    for (i = 0; i < n; i++) {
        op = &ops[i];
        sn = op->node;

        if (sn == NULL) {
            continue;
        }

        ngx_queue_remove(&sn->queue);
        ngx_queue_insert_head(&sh->lru[ngx_omniroute_class_of(sn)],
                              &sn->queue);

        created = (sn->version == 0);

        /* a record created for nothing is freed by apply */
        op->rc = ngx_omniroute_store_apply(st, sn, op->table, &op->key,
                                           op->update, op->arg, 0, created,
                                           now);

        op->node = NULL;
    }

    if (rep.noted) {
        ngx_omniroute_store_owe(sh, &rep);
    }

    ngx_shmtx_unlock(&st->shpool->mutex);

    if (rep.alert || rep.warn) {
        ngx_omniroute_store_report(st, &rep);
    }

    return NGX_OK;

failed:

    for (i = 0; i < n; i++) {
        sn = ops[i].node;

        if (sn == NULL) {
            continue;
        }

        if (sn->version == 0) {
            /* created above */
            ngx_omniroute_store_free(st, sn);

        } else {
            ngx_queue_remove(&sn->queue);
            ngx_queue_insert_head(&sh->lru[ngx_omniroute_class_of(sn)],
                                  &sn->queue);
        }

        ops[i].node = NULL;
    }

    if (rep.noted) {
        ngx_omniroute_store_owe(sh, &rep);
    }

    ngx_shmtx_unlock(&st->shpool->mutex);

    if (rep.alert || rep.warn) {
        ngx_omniroute_store_report(st, &rep);
    }

    return NGX_ERROR;
}


/*
 * Copies of every record of a table, taken under the lock into pool
 * memory, then visited without the lock.  Returns the number visited.
 */

ngx_uint_t
ngx_omniroute_store_visit(ngx_omniroute_store_t *st, ngx_uint_t table,
    ngx_omniroute_visit_pt visit, void *arg, ngx_pool_t *pool)
{
    u_char                *p;
    size_t                 total;
    ngx_str_t              key;
    ngx_uint_t             n, i;
    ngx_queue_t           *q, *lru;
    ngx_omniroute_node_t  *sn, **copies;

    if (st == NULL || st->sh == NULL || table >= NGX_OMNIROUTE_T_COUNT) {
        return 0;
    }

    lru = &st->sh->lru[ngx_omniroute_store_tables[table].class];

    ngx_shmtx_lock(&st->shpool->mutex);

    n = 0;
    total = 0;

    for (q = ngx_queue_head(lru);
         q != ngx_queue_sentinel(lru);
         q = ngx_queue_next(q))
    {
        sn = ngx_queue_data(q, ngx_omniroute_node_t, queue);

        if (sn->table == table) {
            n++;
            total += offsetof(ngx_omniroute_node_t, data) + sn->size
                     + sn->key_len + sizeof(void *);
        }
    }

    copies = (n > 0) ? ngx_palloc(pool, n * sizeof(void *) + total) : NULL;

    if (copies == NULL) {
        ngx_shmtx_unlock(&st->shpool->mutex);
        return 0;
    }

    p = (u_char *) (copies + n);
    i = 0;

    for (q = ngx_queue_head(lru);
         q != ngx_queue_sentinel(lru);
         q = ngx_queue_next(q))
    {
        sn = ngx_queue_data(q, ngx_omniroute_node_t, queue);

        if (sn->table != table) {
            continue;
        }

        p = ngx_align_ptr(p, sizeof(void *));
        copies[i++] = (ngx_omniroute_node_t *) p;

        ngx_memcpy(p, sn, offsetof(ngx_omniroute_node_t, data) + sn->size
                          + sn->key_len);
        p += offsetof(ngx_omniroute_node_t, data) + sn->size + sn->key_len;
    }

    ngx_shmtx_unlock(&st->shpool->mutex);

    for (i = 0; i < n; i++) {
        sn = copies[i];
        key.data = ngx_omniroute_node_key(sn);
        key.len = sn->key_len;
        visit(&key, sn->data, sn->size, arg);
    }

    return n;
}


/* what the zone holds, read under the lock; all 0 without a zone */

void
ngx_omniroute_store_usage(ngx_omniroute_store_t *st,
    ngx_omniroute_store_usage_t *u)
{
    ngx_uint_t           i;
    ngx_omniroute_sh_t  *sh;

    ngx_memzero(u, sizeof(ngx_omniroute_store_usage_t));

    if (st == NULL || st->sh == NULL) {
        return;
    }

    sh = st->sh;

    ngx_shmtx_lock(&st->shpool->mutex);

    u->size = st->shm_zone->shm.size;
    u->used = u->size - st->shpool->pfree * ngx_pagesize;

    for (i = 0; i < NGX_OMNIROUTE_T_COUNT; i++) {
        u->records[i] = sh->records[i];
    }

    u->evictions = sh->evictions;
    u->alloc_failures = sh->alloc_failures;

    ngx_shmtx_unlock(&st->shpool->mutex);
}


/*
 * One more restatement by the rule of this name (its first
 * NGX_OMNIROUTE_RULE_NAME_MAX - 1 bytes): in the slot of that name, or
 * the first free one; not counted once every slot has another name.
 */

void
ngx_omniroute_store_count_rule(ngx_omniroute_store_t *st, const char *rule)
{
    size_t                       len;
    ngx_uint_t                   i;
    ngx_omniroute_rule_count_t  *rc;

    len = ngx_min(ngx_strlen(rule), NGX_OMNIROUTE_RULE_NAME_MAX - 1);

    ngx_shmtx_lock(&st->shpool->mutex);

    for (i = 0; i < NGX_OMNIROUTE_RULE_SLOTS; i++) {
        rc = &st->sh->stats.restatements[i];

        if (rc->name[0] == '\0') {
            ngx_memcpy(rc->name, rule, len);
            rc->name[len] = '\0';
        }

        if (ngx_strncmp(rc->name, rule, len) == 0 && rc->name[len] == '\0')
        {
            rc->count++;
            break;
        }
    }

    ngx_shmtx_unlock(&st->shpool->mutex);
}


/*
 * The in-flight counter of a key (a connection id), shared by the workers
 * and updated with atomics: an open-addressing table of hashes, claimed
 * with compare-and-set and never freed.  NULL when the table is full
 * (counts are then not tracked).
 */

ngx_atomic_t *
ngx_omniroute_inflight(ngx_omniroute_store_t *st, ngx_str_t *key)
{
    uint32_t                   hash;
    ngx_uint_t                 i, slot;
    ngx_omniroute_inflight_t  *t;

    if (st == NULL || st->sh == NULL || st->sh->inflight == NULL) {
        return NULL;
    }

    hash = ngx_crc32_short(key->data, key->len) | 1;
    t = st->sh->inflight;

    for (i = 0; i < st->sh->ninflight; i++) {
        slot = (hash + i) % st->sh->ninflight;

        if (t[slot].hash == hash) {
            return &t[slot].count;
        }

        if (t[slot].hash == 0
            && ngx_atomic_cmp_set(&t[slot].hash, 0, hash))
        {
            return &t[slot].count;
        }

        if (t[slot].hash == hash) {
            return &t[slot].count;
        }
    }

    return NULL;
}


/*
 * The sequence the next event will have: where a reader that does not
 * replay the history starts
 */

uint64_t
ngx_omniroute_store_next_seq(ngx_omniroute_store_t *st)
{
    uint64_t  seq;

    ngx_shmtx_lock(&st->shpool->mutex);
    seq = st->sh->next_seq;
    ngx_shmtx_unlock(&st->shpool->mutex);

    return seq;
}


/*
 * Events with sequence >= from, oldest first, at most max; *next is the
 * sequence to ask for next time.  Events overwritten in the ring before
 * being read are skipped (the reader then reloads the whole state).
 */

ngx_uint_t
ngx_omniroute_store_events(ngx_omniroute_store_t *st, uint64_t from,
    ngx_omniroute_event_t *out, ngx_uint_t max, uint64_t *next)
{
    uint64_t             seq, oldest;
    ngx_uint_t           n;
    ngx_omniroute_sh_t  *sh;

    if (st == NULL || st->sh == NULL) {
        *next = from;
        return 0;
    }

    sh = st->sh;
    n = 0;

    ngx_shmtx_lock(&st->shpool->mutex);

    oldest = (sh->next_seq > sh->nevents) ? sh->next_seq - sh->nevents : 1;

    if (from < oldest) {
        /* overwritten before this reader came back for them */
        (void) ngx_atomic_fetch_add(&sh->stats.events_lost, oldest - from);
    }

    seq = ngx_max(from, oldest);

    while (seq < sh->next_seq && n < max) {
        out[n++] = sh->events[seq % sh->nevents];
        seq++;
    }

    *next = seq;

    ngx_shmtx_unlock(&st->shpool->mutex);

    return n;
}


/*
 * Run an update function on a record (zone locked) and act on its answer:
 * a change bumps the version and emits an event, a delete frees the
 * record and emits one too, so that the table can return to empty (and
 * to the lock-free fast path).  A record created for this call that ends
 * up unchanged or deleted is freed without a word: nothing existed.
 * NGX_OK when something changed, else NGX_DECLINED.
 */

static ngx_int_t
ngx_omniroute_store_apply(ngx_omniroute_store_t *st, ngx_omniroute_node_t *sn,
    ngx_uint_t table, ngx_str_t *key, ngx_omniroute_update_pt update,
    void *arg, ngx_uint_t remote, ngx_uint_t created, or_msec_t now)
{
    u_char      before[NGX_OMNIROUTE_GEN_COPY];
    or_msec_t   expires;
    ngx_uint_t  rc;

    expires = sn->expires;

    if (sn->size <= NGX_OMNIROUTE_GEN_COPY) {
        ngx_memcpy(before, sn->data, sn->size);
    }

    rc = update(sn->data, arg, &expires);

    /*
     * The workers' copies of the table are read again after any change of
     * a value, whatever update() says of it (a larger value: after any
     * call).
     */

    if (rc != NGX_OMNIROUTE_UNCHANGED
        || sn->size > NGX_OMNIROUTE_GEN_COPY
        || ngx_memcmp(before, sn->data, sn->size) != 0)
    {
        st->sh->gen[table]++;
    }

    switch (rc) {

    case NGX_OMNIROUTE_CHANGED:
        sn->expires = expires;
        sn->version++;
        ngx_omniroute_store_event(st->sh, table, key, NGX_OMNIROUTE_OP_SET,
                                  remote, now);
        return NGX_OK;

    case NGX_OMNIROUTE_DELETE:
        ngx_omniroute_store_free(st, sn);

        if (created) {
            return NGX_DECLINED;
        }

        ngx_omniroute_store_event(st->sh, table, key,
                                  NGX_OMNIROUTE_OP_DELETE, remote, now);
        return NGX_OK;

    default:
        if (created) {
            ngx_omniroute_store_free(st, sn);
        }

        return NGX_DECLINED;
    }
}


/* an event for the Redis mirror: only for the tables it reads */

static void
ngx_omniroute_store_event(ngx_omniroute_sh_t *sh, ngx_uint_t table,
    ngx_str_t *key, ngx_uint_t op, ngx_uint_t remote, or_msec_t now)
{
    ngx_omniroute_event_t  *ev;

    if (!ngx_omniroute_store_tables[table].mirrored) {
        return;
    }

    ev = &sh->events[sh->next_seq % sh->nevents];

    ev->seq = sh->next_seq++;
    ev->time = now;
    ev->table = (uint8_t) table;
    ev->op = (uint8_t) op;
    ev->remote = remote ? 1 : 0;
    ev->key_len = (uint8_t) ngx_min(key->len, NGX_OMNIROUTE_EVENT_KEY_MAX);
    ngx_memcpy(ev->key, key->data, ev->key_len);
}


/* a record's place in the tree: the crc32 of its table and key */

uint32_t
ngx_omniroute_store_hash(ngx_uint_t table, ngx_str_t *key)
{
    u_char    t;
    uint32_t  crc;

    t = (u_char) table;

    ngx_crc32_init(crc);
    ngx_crc32_update(&crc, &t, 1);
    ngx_crc32_update(&crc, key->data, key->len);
    ngx_crc32_final(crc);

    return crc;
}


static ngx_int_t
ngx_omniroute_node_cmp(ngx_omniroute_node_t *a, ngx_uint_t table, u_char *key,
    size_t len)
{
    if (a->table != table) {
        return (ngx_int_t) a->table - (ngx_int_t) table;
    }

    return ngx_memn2cmp(ngx_omniroute_node_key(a), key, a->key_len, len);
}


ngx_omniroute_node_t *
ngx_omniroute_store_lookup(ngx_omniroute_sh_t *sh, ngx_uint_t table,
    ngx_str_t *key, uint32_t hash)
{
    ngx_int_t              rc;
    ngx_rbtree_node_t     *node, *sentinel;
    ngx_omniroute_node_t  *sn;

    node = sh->rbtree.root;
    sentinel = sh->rbtree.sentinel;

    while (node != sentinel) {

        if (hash < node->key) {
            node = node->left;
            continue;
        }

        if (hash > node->key) {
            node = node->right;
            continue;
        }

        sn = ngx_omniroute_node_of(node);

        rc = ngx_omniroute_node_cmp(sn, table, key->data, key->len);

        if (rc == 0) {
            ngx_queue_remove(&sn->queue);
            ngx_queue_insert_head(&sh->lru[ngx_omniroute_class_of(sn)],
                                  &sn->queue);
            return sn;
        }

        node = (rc < 0) ? node->left : node->right;
    }

    return NULL;
}


void
ngx_omniroute_store_rbtree_insert(ngx_rbtree_node_t *temp,
    ngx_rbtree_node_t *node, ngx_rbtree_node_t *sentinel)
{
    ngx_rbtree_node_t     **p;
    ngx_omniroute_node_t   *sn, *snt;

    for ( ;; ) {

        if (node->key < temp->key) {
            p = &temp->left;

        } else if (node->key > temp->key) {
            p = &temp->right;

        } else { /* node->key == temp->key */

            sn = ngx_omniroute_node_of(node);
            snt = ngx_omniroute_node_of(temp);

            p = (ngx_omniroute_node_cmp(snt, sn->table,
                                        ngx_omniroute_node_key(sn),
                                        sn->key_len)
                 < 0)
                ? &temp->left : &temp->right;
        }

        if (*p == sentinel) {
            break;
        }

        temp = *p;
    }

    *p = node;
    node->parent = temp;
    node->left = sentinel;
    node->right = sentinel;
    ngx_rbt_red(node);
}


static ngx_omniroute_node_t *
ngx_omniroute_store_insert(ngx_omniroute_store_t *st, ngx_uint_t table,
    ngx_str_t *key, uint32_t hash, size_t size, or_msec_t now,
    ngx_omniroute_report_t *rep)
{
    size_t                 n, chunk;
    ngx_uint_t             class;
    ngx_rbtree_node_t     *node;
    ngx_omniroute_sh_t    *sh;
    ngx_omniroute_node_t  *sn;

    sh = st->sh;
    class = ngx_omniroute_store_tables[table].class;
    rep->table = table;

    ngx_omniroute_store_expire(st, NGX_OMNIROUTE_EXPIRE_BATCH, now);

    size = ngx_align(size, sizeof(uint64_t));
    n = ngx_omniroute_node_size(size, key->len);
    chunk = ngx_omniroute_store_chunk(n);

    if (class <= NGX_OMNIROUTE_EC_STRATEGY
        && ngx_omniroute_store_budget(st, chunk, rep) != NGX_OK)
    {
        node = NULL;

    } else {
        node = ngx_omniroute_store_alloc(st, table, n, now, rep);
    }

    if (node == NULL) {
        sh->alloc_failures++;
        sh->owed_failures++;
        rep->noted = 1;
        return NULL;
    }

    sn = ngx_omniroute_node_of(node);

    node->key = hash;
    sn->table = (u_char) table;
    sn->key_len = (u_short) key->len;
    sn->size = (uint32_t) size;
    sn->expires = 0;
    sn->version = 0;

    ngx_memzero(sn->data, size);
    ngx_memcpy(ngx_omniroute_node_key(sn), key->data, key->len);

    ngx_rbtree_insert(&sh->rbtree, node);
    ngx_queue_insert_head(&sh->lru[class], &sn->queue);

    sh->records[table]++;
    sh->gen[table]++;
    sh->bytes[class] += chunk;

    return sn;
}


static void
ngx_omniroute_store_free(ngx_omniroute_store_t *st, ngx_omniroute_node_t *sn)
{
    ngx_uint_t           class;
    ngx_omniroute_sh_t  *sh;

    sh = st->sh;
    class = ngx_omniroute_class_of(sn);

    sh->records[sn->table]--;
    sh->gen[sn->table]++;
    sh->bytes[class] -= ngx_omniroute_store_chunk(
                            ngx_omniroute_node_size(sn->size, sn->key_len));

    ngx_queue_remove(&sn->queue);
    ngx_rbtree_delete(&sh->rbtree, ngx_omniroute_rbnode_of(sn));
    ngx_slab_free_locked(st->shpool, ngx_omniroute_rbnode_of(sn));
}


/* what the slab allocator takes for an allocation of this size */

size_t
ngx_omniroute_store_chunk(size_t size)
{
    size_t  chunk;

    if (size > ngx_pagesize / 2) {
        return ngx_align(size, ngx_pagesize);
    }

    for (chunk = 8; chunk < size; chunk <<= 1) { /* void */ }

    return chunk;
}


/* runtime settings and terminal states are never evicted */

ngx_uint_t
ngx_omniroute_store_kept(ngx_omniroute_node_t *sn)
{
    or_conn_state_t  *cs;

    if (sn->table == NGX_OMNIROUTE_T_SETTINGS) {
        return 1;
    }

    if (sn->table != NGX_OMNIROUTE_T_CONN
        || sn->size < sizeof(or_conn_state_t))
    {
        return 0;
    }

    cs = (or_conn_state_t *) sn->data;

    return cs->terminal != OR_TERMINAL_NONE;
}


/* the least recently used record of a class that may be evicted */

static ngx_omniroute_node_t *
ngx_omniroute_store_victim(ngx_omniroute_sh_t *sh, ngx_uint_t class)
{
    ngx_uint_t             n;
    ngx_queue_t           *q, *lru;
    ngx_omniroute_node_t  *sn;

    if (class >= NGX_OMNIROUTE_EC_SETTINGS) {
        return NULL;
    }

    lru = &sh->lru[class];
    n = 0;

    for (q = ngx_queue_last(lru);
         q != ngx_queue_sentinel(lru) && n < NGX_OMNIROUTE_VICTIM_WALK;
         q = ngx_queue_prev(q))
    {
        sn = ngx_queue_data(q, ngx_omniroute_node_t, queue);

        if (!ngx_omniroute_store_kept(sn)) {
            return sn;
        }

        n++;
    }

    return NULL;
}


static void
ngx_omniroute_store_evict(ngx_omniroute_store_t *st, ngx_omniroute_node_t *sn,
    ngx_omniroute_report_t *rep)
{
    ngx_omniroute_sh_t  *sh;

    sh = st->sh;

    switch (ngx_omniroute_class_of(sn)) {

    case NGX_OMNIROUTE_EC_MODEL:
        sh->owed_model++;
        rep->noted = 1;
        break;

    case NGX_OMNIROUTE_EC_CONFIG:
        sh->dropped++;
        sh->owed_dropped++;
        rep->victim = sn->table;
        rep->noted = 1;
        break;

    default: /* client-keyed */
        break;
    }

    sh->evictions++;

    ngx_omniroute_store_free(st, sn);
}


/*
 * Session pins and strategy state together stay within their budget
 * (half of the zone): a new one evicts the least recently used pin, then
 * strategy record, never anything else.
 */

static ngx_int_t
ngx_omniroute_store_budget(ngx_omniroute_store_t *st, size_t chunk,
    ngx_omniroute_report_t *rep)
{
    ngx_uint_t             i;
    ngx_omniroute_sh_t    *sh;
    ngx_omniroute_node_t  *sn;

    sh = st->sh;

    for (i = 0; i < NGX_OMNIROUTE_EVICT_MAX; i++) {

        if (sh->bytes[NGX_OMNIROUTE_EC_SESSION]
            + sh->bytes[NGX_OMNIROUTE_EC_STRATEGY] + chunk
            <= sh->client_max)
        {
            return NGX_OK;
        }

        sn = ngx_omniroute_store_victim(sh, NGX_OMNIROUTE_EC_SESSION);

        if (sn == NULL) {
            sn = ngx_omniroute_store_victim(sh, NGX_OMNIROUTE_EC_STRATEGY);

            if (sn == NULL) {
                return NGX_DECLINED;
            }
        }

        ngx_omniroute_store_evict(st, sn, rep);
    }

    return NGX_DECLINED;
}


/*
 * Allocate; when the zone is full, drop expired records, then evict the
 * least recently used ones class by class, the least protective first and
 * never of a class above what the table may evict: a pin never pushes out
 * a lockout, a lockout never a breaker.  NULL when nothing is left to
 * evict (the new record is refused).
 */

static void *
ngx_omniroute_store_alloc(ngx_omniroute_store_t *st, ngx_uint_t table,
    size_t size, or_msec_t now, ngx_omniroute_report_t *rep)
{
    void                  *p;
    ngx_uint_t             i, class;
    ngx_omniroute_node_t  *sn;

    p = ngx_slab_alloc_locked(st->shpool, size);
    if (p) {
        return p;
    }

    ngx_omniroute_store_expire(st, NGX_OMNIROUTE_EVICT_MAX, now);

    for (class = 0;
         class <= ngx_omniroute_store_tables[table].evicts;
         class++)
    {

        for (i = 0; i < NGX_OMNIROUTE_EVICT_MAX; i++) {

            p = ngx_slab_alloc_locked(st->shpool, size);
            if (p) {
                return p;
            }

            sn = ngx_omniroute_store_victim(st->sh, class);
            if (sn == NULL) {
                break;
            }

            ngx_omniroute_store_evict(st, sn, rep);
        }
    }

    return ngx_slab_alloc_locked(st->shpool, size);
}


/*
 * Drop up to n expired records from the least recently used end of each
 * class's queue.
 */

static void
ngx_omniroute_store_expire(ngx_omniroute_store_t *st, ngx_uint_t n,
    or_msec_t now)
{
    ngx_uint_t             i, class;
    ngx_queue_t           *q, *lru;
    ngx_omniroute_node_t  *sn;

    for (class = 0; class < NGX_OMNIROUTE_EC_COUNT; class++) {
        lru = &st->sh->lru[class];

        for (i = 0; i < n && !ngx_queue_empty(lru); i++) {

            q = ngx_queue_last(lru);
            sn = ngx_queue_data(q, ngx_omniroute_node_t, queue);

            if (sn->expires == 0 || sn->expires > now) {
                break;
            }

            ngx_omniroute_store_free(st, sn);
        }
    }
}


/*
 * Zone locked: decide whether the counts owed to the log are said now
 * (at most one ALERT and one WARN a second for all workers).
 */

static void
ngx_omniroute_store_owe(ngx_omniroute_sh_t *sh, ngx_omniroute_report_t *rep)
{
    time_t  now;

    now = ngx_time();

    if ((sh->owed_failures || sh->owed_dropped) && sh->alerted != now) {
        sh->alerted = now;
        rep->alert = 1;
        rep->failures = sh->owed_failures;
        rep->dropped = sh->owed_dropped;
        sh->owed_failures = 0;
        sh->owed_dropped = 0;
    }

    if (sh->owed_model && sh->warned != now) {
        sh->warned = now;
        rep->warn = 1;
        rep->model = sh->owed_model;
        sh->owed_model = 0;
    }
}


/* zone unlocked: say it */

static void
ngx_omniroute_store_report(ngx_omniroute_store_t *st,
    ngx_omniroute_report_t *rep)
{
    u_char  *ctx;

    ctx = st->shpool->log_ctx;

    if (rep->alert && rep->failures) {
        ngx_log_error(NGX_LOG_ALERT, ngx_cycle->log, 0,
                      "could not allocate %s record%s: %ui new records "
                      "refused and %ui breaker or connection records "
                      "evicted since the last report",
                      ngx_omniroute_store_tables[rep->table].name, ctx,
                      rep->failures, rep->dropped);

    } else if (rep->alert) {
        ngx_log_error(NGX_LOG_ALERT, ngx_cycle->log, 0,
                      "could not allocate %s record%s without evicting "
                      "%s state: %ui breaker or connection records evicted "
                      "since the last report",
                      ngx_omniroute_store_tables[rep->table].name, ctx,
                      ngx_omniroute_store_tables[rep->victim].name,
                      rep->dropped);
    }

    if (rep->warn) {
        ngx_log_error(NGX_LOG_WARN, ngx_cycle->log, 0,
                      "%ui model lockout or request_rejected records "
                      "evicted to make room%s",
                      rep->model, ctx);
    }
}
