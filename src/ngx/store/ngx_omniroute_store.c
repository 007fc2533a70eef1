
/*
 * Copyright (C) ngx_omniroute authors
 *
 * The shared-memory state store (see ngx_omniroute_store.h).
 */


#include <ngx_config.h>
#include <ngx_core.h>

#include "ngx_omniroute_store.h"


#define NGX_OMNIROUTE_EXPIRE_BATCH  2   /* stale records dropped per insert */
#define NGX_OMNIROUTE_EVICT_MAX     16  /* records evicted for one insert */


typedef struct {
    u_char                        color;
    u_char                        table;
    u_short                       key_len;
    uint32_t                      size;         /* of the value */
    ngx_queue_t                   queue;        /* LRU, most recent first */
    or_msec_t                     expires;      /* 0: no expiry */
    uint64_t                      version;
    u_char                        data[1];      /* value, then key */
} ngx_omniroute_node_t;


static void ngx_omniroute_store_rbtree_insert(ngx_rbtree_node_t *temp,
    ngx_rbtree_node_t *node, ngx_rbtree_node_t *sentinel);
static ngx_int_t ngx_omniroute_node_cmp(ngx_omniroute_node_t *a,
    ngx_uint_t table, u_char *key, size_t len);
static uint32_t ngx_omniroute_store_hash(ngx_uint_t table, ngx_str_t *key);
static ngx_omniroute_node_t *ngx_omniroute_store_lookup(
    ngx_omniroute_sh_t *sh, ngx_uint_t table, ngx_str_t *key,
    uint32_t hash);
static ngx_omniroute_node_t *ngx_omniroute_store_insert(
    ngx_omniroute_store_t *st, ngx_uint_t table, ngx_str_t *key,
    uint32_t hash, size_t size, or_msec_t now);
static void ngx_omniroute_store_free(ngx_omniroute_store_t *st,
    ngx_omniroute_node_t *sn);
static void *ngx_omniroute_store_alloc(ngx_omniroute_store_t *st,
    size_t size, or_msec_t now);
static void ngx_omniroute_store_expire(ngx_omniroute_store_t *st,
    ngx_uint_t n, or_msec_t now);
static ngx_int_t ngx_omniroute_store_apply(ngx_omniroute_store_t *st,
    ngx_omniroute_node_t *sn, ngx_uint_t table, ngx_str_t *key,
    ngx_omniroute_update_pt update, void *arg, ngx_uint_t remote,
    or_msec_t now);
static void ngx_omniroute_store_event(ngx_omniroute_sh_t *sh,
    ngx_uint_t table, ngx_str_t *key, ngx_uint_t op, ngx_uint_t remote,
    or_msec_t now);


#define ngx_omniroute_node_of(n)                                             \
    ((ngx_omniroute_node_t *) &(n)->color)

#define ngx_omniroute_rbnode_of(sn)                                          \
    ((ngx_rbtree_node_t *) ((u_char *) (sn)                                  \
                            - offsetof(ngx_rbtree_node_t, color)))

#define ngx_omniroute_node_key(sn)  ((sn)->data + (sn)->size)


or_msec_t
ngx_omniroute_now(void)
{
    ngx_time_t  *tp;

    tp = ngx_timeofday();

    return (or_msec_t) tp->sec * 1000 + tp->msec;
}


ngx_int_t
ngx_omniroute_store_init_zone(ngx_shm_zone_t *shm_zone, void *data)
{
    ngx_omniroute_store_t  *ost = data;

    size_t                  len;
    ngx_uint_t              n;
    ngx_slab_pool_t        *shpool;
    ngx_omniroute_sh_t     *sh;
    ngx_omniroute_store_t  *st;

    st = shm_zone->data;
    shpool = (ngx_slab_pool_t *) shm_zone->shm.addr;

    if (ost) {
        /* reload: the state of the previous cycle stays in the zone */
        st->sh = ost->sh;
        st->shpool = ost->shpool;
        return NGX_OK;
    }

    st->shpool = shpool;

    if (shm_zone->shm.exists) {
        st->sh = shpool->data;
        return NGX_OK;
    }

    sh = ngx_slab_alloc(shpool, sizeof(ngx_omniroute_sh_t));
    if (sh == NULL) {
        return NGX_ERROR;
    }

    ngx_memzero(sh, sizeof(ngx_omniroute_sh_t));

    ngx_rbtree_init(&sh->rbtree, &sh->sentinel,
                    ngx_omniroute_store_rbtree_insert);
    ngx_queue_init(&sh->lru);

    /* the event ring takes about 1/32 of the zone */

    n = shm_zone->shm.size / 32 / sizeof(ngx_omniroute_event_t);
    n = ngx_max(n, 16);
    n = ngx_min(n, 4096);

    sh->events = ngx_slab_calloc(shpool, n * sizeof(ngx_omniroute_event_t));
    if (sh->events == NULL) {
        return NGX_ERROR;
    }

    sh->nevents = n;
    sh->next_seq = 1;

    /* in-flight counters: about 1/64 of the zone */

    n = shm_zone->shm.size / 64 / sizeof(ngx_omniroute_inflight_t);
    n = ngx_max(n, 32);
    n = ngx_min(n, NGX_OMNIROUTE_INFLIGHT_MAX);

    sh->inflight = ngx_slab_calloc(shpool,
                                   n * sizeof(ngx_omniroute_inflight_t));
    if (sh->inflight == NULL) {
        return NGX_ERROR;
    }

    sh->ninflight = n;

    st->sh = sh;
    shpool->data = sh;

    len = sizeof(" in omniroute zone \"\"") + shm_zone->shm.name.len;

    shpool->log_ctx = ngx_slab_alloc(shpool, len);
    if (shpool->log_ctx == NULL) {
        return NGX_ERROR;
    }

    ngx_sprintf(shpool->log_ctx, " in omniroute zone \"%V\"%Z",
                &shm_zone->shm.name);

    shpool->log_nomem = 0;

    return NGX_OK;
}


/*
 * The table has no record: read without the lock (a record created at
 * this very moment is as good as one created a moment later).  A healthy
 * system's hot path takes no lock at all.
 */

ngx_uint_t
ngx_omniroute_store_empty(ngx_omniroute_store_t *st, ngx_uint_t table)
{
    if (st == NULL || st->sh == NULL) {
        return 1;
    }

    return *(volatile ngx_uint_t *) &st->sh->records[table] == 0;
}


/* a copy of the record's value; NGX_DECLINED when there is none */

ngx_int_t
ngx_omniroute_store_read(ngx_omniroute_store_t *st, ngx_uint_t table,
    ngx_str_t *key, void *value, size_t size)
{
    uint32_t               hash;
    ngx_int_t              rc;
    ngx_omniroute_node_t  *sn;

    if (ngx_omniroute_store_empty(st, table)
        || key->len > NGX_OMNIROUTE_KEY_MAX)
    {
        return NGX_DECLINED;
    }

    hash = ngx_omniroute_store_hash(table, key);

    ngx_shmtx_lock(&st->shpool->mutex);

    sn = ngx_omniroute_store_lookup(st->sh, table, key, hash);

    if (sn && sn->size == ngx_align(size, sizeof(uint64_t))) {
        ngx_memcpy(value, sn->data, size);
        rc = NGX_OK;

    } else {
        rc = NGX_DECLINED;
    }

    ngx_shmtx_unlock(&st->shpool->mutex);

    return rc;
}


/*
 * Find or create the record and let update() change its value in place,
 * under the zone lock.  Returns NGX_OK (changed), NGX_DECLINED (unchanged)
 * or NGX_ERROR (no room even after eviction: the change is lost, the
 * request goes on).
 */

ngx_int_t
ngx_omniroute_store_update(ngx_omniroute_store_t *st, ngx_uint_t table,
    ngx_str_t *key, size_t size, ngx_omniroute_update_pt update, void *arg,
    ngx_uint_t remote)
{
    uint32_t               hash;
    ngx_int_t              rc;
    or_msec_t              now;
    ngx_uint_t             created;
    ngx_omniroute_sh_t    *sh;
    ngx_omniroute_node_t  *sn;

    if (st == NULL || st->sh == NULL || key->len > NGX_OMNIROUTE_KEY_MAX) {
        return NGX_ERROR;
    }

    sh = st->sh;
    now = ngx_omniroute_now();
    hash = ngx_omniroute_store_hash(table, key);

    ngx_shmtx_lock(&st->shpool->mutex);

    sn = ngx_omniroute_store_lookup(sh, table, key, hash);

    if (sn && sn->size != ngx_align(size, sizeof(uint64_t))) {
        /* the value's layout changed (module upgrade): start afresh */
        ngx_omniroute_store_free(st, sn);
        sn = NULL;
    }

    if (sn == NULL) {
        sn = ngx_omniroute_store_insert(st, table, key, hash, size, now);

        if (sn == NULL) {
            sh->alloc_failures++;
            ngx_shmtx_unlock(&st->shpool->mutex);
            return NGX_ERROR;
        }
    }

    created = (sn->version == 0);

    rc = ngx_omniroute_store_apply(st, sn, table, key, update, arg, remote,
                                   now);

    if (rc == NGX_DECLINED && created) {
        /* created for nothing */
        ngx_omniroute_store_free(st, sn);
    }

    ngx_shmtx_unlock(&st->shpool->mutex);

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

    if (st == NULL || st->sh == NULL || key->len > NGX_OMNIROUTE_KEY_MAX) {
        return NGX_DECLINED;
    }

    hash = ngx_omniroute_store_hash(table, key);

    ngx_shmtx_lock(&st->shpool->mutex);

    sn = ngx_omniroute_store_lookup(st->sh, table, key, hash);

    if (sn == NULL || sn->size != ngx_align(size, sizeof(uint64_t))) {
        ngx_shmtx_unlock(&st->shpool->mutex);
        return NGX_DECLINED;
    }

    rc = ngx_omniroute_store_apply(st, sn, table, key, update, arg, 0,
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

    if (st == NULL || st->sh == NULL || key->len > NGX_OMNIROUTE_KEY_MAX) {
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
                                            op->size, now);

            if (sn == NULL) {
                sh->alloc_failures++;
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
        ngx_queue_insert_head(&sh->lru, &sn->queue);

        created = (sn->version == 0);

        op->rc = ngx_omniroute_store_apply(st, sn, op->table, &op->key,
                                           op->update, op->arg, 0, now);

        if (op->rc == NGX_DECLINED && created) {
            /* created for nothing */
            ngx_omniroute_store_free(st, sn);
        }

        op->node = NULL;
    }

    ngx_shmtx_unlock(&st->shpool->mutex);

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
            ngx_queue_insert_head(&sh->lru, &sn->queue);
        }

        ops[i].node = NULL;
    }

    ngx_shmtx_unlock(&st->shpool->mutex);

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
    ngx_queue_t           *q;
    ngx_omniroute_node_t  *sn, **copies;

    if (st == NULL || st->sh == NULL) {
        return 0;
    }

    ngx_shmtx_lock(&st->shpool->mutex);

    n = 0;
    total = 0;

    for (q = ngx_queue_head(&st->sh->lru);
         q != ngx_queue_sentinel(&st->sh->lru);
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

    for (q = ngx_queue_head(&st->sh->lru);
         q != ngx_queue_sentinel(&st->sh->lru);
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
 * record.  NGX_OK when something changed, else NGX_DECLINED.
 */

static ngx_int_t
ngx_omniroute_store_apply(ngx_omniroute_store_t *st, ngx_omniroute_node_t *sn,
    ngx_uint_t table, ngx_str_t *key, ngx_omniroute_update_pt update,
    void *arg, ngx_uint_t remote, or_msec_t now)
{
    or_msec_t  expires;

    expires = sn->expires;

    switch (update(sn->data, arg, &expires)) {

    case NGX_OMNIROUTE_CHANGED:
        sn->expires = expires;
        sn->version++;
        ngx_omniroute_store_event(st->sh, table, key, NGX_OMNIROUTE_OP_SET,
                                  remote, now);
        return NGX_OK;

    case NGX_OMNIROUTE_DELETE:
        ngx_omniroute_store_free(st, sn);
        ngx_omniroute_store_event(st->sh, table, key,
                                  NGX_OMNIROUTE_OP_DELETE, remote, now);
        return NGX_OK;

    default:
        return NGX_DECLINED;
    }
}


static void
ngx_omniroute_store_event(ngx_omniroute_sh_t *sh, ngx_uint_t table,
    ngx_str_t *key, ngx_uint_t op, ngx_uint_t remote, or_msec_t now)
{
    ngx_omniroute_event_t  *ev;

    ev = &sh->events[sh->next_seq % sh->nevents];

    ev->seq = sh->next_seq++;
    ev->time = now;
    ev->table = (uint8_t) table;
    ev->op = (uint8_t) op;
    ev->remote = remote ? 1 : 0;
    ev->key_len = (uint8_t) ngx_min(key->len, NGX_OMNIROUTE_EVENT_KEY_MAX);
    ngx_memcpy(ev->key, key->data, ev->key_len);
}


static uint32_t
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


static ngx_omniroute_node_t *
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
            ngx_queue_insert_head(&sh->lru, &sn->queue);
            return sn;
        }

        node = (rc < 0) ? node->left : node->right;
    }

    return NULL;
}


static void
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
    ngx_str_t *key, uint32_t hash, size_t size, or_msec_t now)
{
    size_t                 n;
    ngx_rbtree_node_t     *node;
    ngx_omniroute_node_t  *sn;

    ngx_omniroute_store_expire(st, NGX_OMNIROUTE_EXPIRE_BATCH, now);

    size = ngx_align(size, sizeof(uint64_t));

    n = offsetof(ngx_rbtree_node_t, color)
        + offsetof(ngx_omniroute_node_t, data) + size + key->len;

    node = ngx_omniroute_store_alloc(st, n, now);
    if (node == NULL) {
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

    ngx_rbtree_insert(&st->sh->rbtree, node);
    ngx_queue_insert_head(&st->sh->lru, &sn->queue);

    st->sh->records[table]++;

    return sn;
}


static void
ngx_omniroute_store_free(ngx_omniroute_store_t *st, ngx_omniroute_node_t *sn)
{
    st->sh->records[sn->table]--;

    ngx_queue_remove(&sn->queue);
    ngx_rbtree_delete(&st->sh->rbtree, ngx_omniroute_rbnode_of(sn));
    ngx_slab_free_locked(st->shpool, ngx_omniroute_rbnode_of(sn));
}


/*
 * Allocate; when the zone is full, drop expired records from the LRU end,
 * then the least recently used ones, so a request never fails for space.
 */

static void *
ngx_omniroute_store_alloc(ngx_omniroute_store_t *st, size_t size,
    or_msec_t now)
{
    void                  *p;
    ngx_uint_t             i;
    ngx_queue_t           *q;
    ngx_omniroute_node_t  *sn;

    p = ngx_slab_alloc_locked(st->shpool, size);
    if (p) {
        return p;
    }

    ngx_omniroute_store_expire(st, NGX_OMNIROUTE_EVICT_MAX, now);

    for (i = 0; i < NGX_OMNIROUTE_EVICT_MAX; i++) {

        p = ngx_slab_alloc_locked(st->shpool, size);
        if (p) {
            return p;
        }

        /* the least recently used record; runtime settings are kept */

        for (q = ngx_queue_last(&st->sh->lru);
             q != ngx_queue_sentinel(&st->sh->lru);
             q = ngx_queue_prev(q))
        {
            sn = ngx_queue_data(q, ngx_omniroute_node_t, queue);

            if (sn->table != NGX_OMNIROUTE_T_SETTINGS) {
                break;
            }
        }

        if (q == ngx_queue_sentinel(&st->sh->lru)) {
            break;
        }

        ngx_omniroute_store_free(st, sn);
        st->sh->evictions++;
    }

    return ngx_slab_alloc_locked(st->shpool, size);
}


/* drop up to n expired records from the least recently used end */

static void
ngx_omniroute_store_expire(ngx_omniroute_store_t *st, ngx_uint_t n,
    or_msec_t now)
{
    ngx_queue_t           *q;
    ngx_omniroute_node_t  *sn;

    while (n-- && !ngx_queue_empty(&st->sh->lru)) {

        q = ngx_queue_last(&st->sh->lru);
        sn = ngx_queue_data(q, ngx_omniroute_node_t, queue);

        if (sn->expires == 0 || sn->expires > now) {
            return;
        }

        ngx_omniroute_store_free(st, sn);
    }
}
