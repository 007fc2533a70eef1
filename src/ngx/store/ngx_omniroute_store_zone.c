
/*
 * Copyright (C) ngx_omniroute authors
 *
 * The state zone's life: made, adopted after a reload, its records
 * carried into a zone of another size, the most protective first (see
 * ngx_omniroute_store.h).
 */


#include <ngx_config.h>
#include <ngx_core.h>

#include "ngx_omniroute_store_int.h"


#define ngx_omniroute_store_layout()                                         \
    ((uint64_t) NGX_OMNIROUTE_LAYOUT_MAGIC << 32                             \
     | (uint64_t) NGX_OMNIROUTE_LAYOUT_VERSION << 24                         \
     | ((sizeof(ngx_omniroute_sh_t) + sizeof(ngx_omniroute_node_t))          \
        & 0xffffff))


static ngx_int_t ngx_omniroute_store_create(ngx_omniroute_store_t *st,
    ngx_shm_zone_t *shm_zone);
static ngx_int_t ngx_omniroute_store_previous(ngx_shm_zone_t *shm_zone,
    ngx_shm_zone_t **prev);
static ngx_int_t ngx_omniroute_store_carry(ngx_omniroute_store_t *st,
    ngx_shm_zone_t *shm_zone, ngx_shm_zone_t *prev);
static ngx_int_t ngx_omniroute_store_copy(ngx_omniroute_store_t *st,
    ngx_omniroute_node_t *osn);


/*
 * The order in which a reload copies records into a zone of another size:
 * what is most expensive to lose first, so that what does not fit is the
 * client-keyed state.  kept: 1 only terminal states, 0 none, -1 any.
 */
static struct {
    ngx_uint_t                    class;
    ngx_int_t                     table;        /* -1: any */
    ngx_int_t                     kept;
} ngx_omniroute_carry_order[] = {
    { NGX_OMNIROUTE_EC_SETTINGS, -1, -1 },
    { NGX_OMNIROUTE_EC_CONFIG, NGX_OMNIROUTE_T_CONN, 1 },
    { NGX_OMNIROUTE_EC_CONFIG, NGX_OMNIROUTE_T_BREAKER, -1 },
    { NGX_OMNIROUTE_EC_CONFIG, NGX_OMNIROUTE_T_CONN, 0 },
    { NGX_OMNIROUTE_EC_CONFIG, NGX_OMNIROUTE_T_LANE, -1 },
    { NGX_OMNIROUTE_EC_MODEL, NGX_OMNIROUTE_T_LOCKOUT, -1 },
    { NGX_OMNIROUTE_EC_MODEL, NGX_OMNIROUTE_T_REJECTED, -1 },
    { NGX_OMNIROUTE_EC_MODEL, NGX_OMNIROUTE_T_PACE, -1 },
    { NGX_OMNIROUTE_EC_STRATEGY, -1, -1 },
    { NGX_OMNIROUTE_EC_SESSION, -1, -1 }
};


ngx_int_t
ngx_omniroute_store_init_zone(ngx_shm_zone_t *shm_zone, void *data)
{
    ngx_omniroute_store_t  *ost = data;

    ngx_int_t               rc;
    ngx_shm_zone_t         *prev;
    ngx_slab_pool_t        *shpool;
    ngx_omniroute_store_t  *st;

    st = shm_zone->data;
    shpool = (ngx_slab_pool_t *) shm_zone->shm.addr;

    if (ost) {
        /* reload, same name and size: the zone and its state stay */

        if (ost->sh->layout != ngx_omniroute_store_layout()) {
            ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0,
                          "omniroute zone \"%V\" has layout %016xL while "
                          "this module uses %016xL; restart nginx to start "
                          "with an empty zone", &shm_zone->shm.name,
                          ost->sh->layout, ngx_omniroute_store_layout());
            return NGX_ERROR;
        }

        st->sh = ost->sh;
        st->shpool = ost->shpool;
        return NGX_OK;
    }

    st->shpool = shpool;

    if (shm_zone->shm.exists) {
        st->sh = shpool->data;
        return NGX_OK;
    }

    /* a zone of the previous cycle with another name or size, if any */

    rc = ngx_omniroute_store_previous(shm_zone, &prev);

    if (rc == NGX_ERROR) {
        ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0,
                      "omniroute zone \"%V\" of the previous configuration "
                      "has layout %016xL while this module uses %016xL; "
                      "restart nginx to start with an empty zone",
                      &prev->shm.name,
                      ((ngx_omniroute_sh_t *)
                       ((ngx_slab_pool_t *) prev->shm.addr)->data)->layout,
                      ngx_omniroute_store_layout());
        return NGX_ERROR;
    }

    if (ngx_omniroute_store_create(st, shm_zone) != NGX_OK) {
        return NGX_ERROR;
    }

    if (rc == NGX_OK) {
        return ngx_omniroute_store_carry(st, shm_zone, prev);
    }

    return NGX_OK;
}


static ngx_int_t
ngx_omniroute_store_create(ngx_omniroute_store_t *st,
    ngx_shm_zone_t *shm_zone)
{
    size_t               len;
    ngx_uint_t           n;
    ngx_slab_pool_t     *shpool;
    ngx_omniroute_sh_t  *sh;

    shpool = st->shpool;

    sh = ngx_slab_alloc(shpool, sizeof(ngx_omniroute_sh_t));
    if (sh == NULL) {
        return NGX_ERROR;
    }

    ngx_memzero(sh, sizeof(ngx_omniroute_sh_t));

    sh->layout = ngx_omniroute_store_layout();

    ngx_rbtree_init(&sh->rbtree, &sh->sentinel,
                    ngx_omniroute_store_rbtree_insert);

    for (n = 0; n < NGX_OMNIROUTE_EC_COUNT; n++) {
        ngx_queue_init(&sh->lru[n]);
    }

    /* session pins and strategy state: at most half of the zone */

    sh->client_max = shm_zone->shm.size / 2;

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

    for (n = 0; n < NGX_OMNIROUTE_T_COUNT; n++) {
        sh->gen[n] = 1;
    }

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
 * The omniroute zone of the previous cycle when nginx did not hand it
 * over (its name or size changed): during a reload the old cycle
 * (ngx_cycle) and its shared memory are still there.  A zone is ours when
 * its slab pool's data starts with our magic; NGX_ERROR when its layout
 * is another one, NGX_DECLINED when there is none.
 */

static ngx_int_t
ngx_omniroute_store_previous(ngx_shm_zone_t *shm_zone, ngx_shm_zone_t **prev)
{
    u_char              *start, *end;
    ngx_uint_t           i;
    ngx_shm_zone_t      *zone;
    ngx_list_part_t     *part;
    ngx_slab_pool_t     *shpool;
    ngx_omniroute_sh_t  *osh;

    part = (ngx_list_part_t *) &ngx_cycle->shared_memory.part;
    zone = part->elts;

    for (i = 0; /* void */ ; i++) {

        if (i >= part->nelts) {
            if (part->next == NULL) {
                break;
            }

            part = part->next;
            zone = part->elts;
            i = 0;
        }

        start = zone[i].shm.addr;

        if (start == NULL || start == shm_zone->shm.addr
            || zone[i].shm.size < sizeof(ngx_slab_pool_t))
        {
            continue;
        }

        end = start + zone[i].shm.size;
        shpool = (ngx_slab_pool_t *) start;
        osh = shpool->data;

        if ((u_char *) osh < start + sizeof(ngx_slab_pool_t)
            || (u_char *) osh + sizeof(uint64_t) > end
            || ((uintptr_t) osh & (sizeof(uint64_t) - 1)) != 0
            || (osh->layout >> 32) != NGX_OMNIROUTE_LAYOUT_MAGIC)
        {
            continue;
        }

        *prev = &zone[i];

        if (osh->layout != ngx_omniroute_store_layout()) {
            return NGX_ERROR;
        }

        return NGX_OK;
    }

    return NGX_DECLINED;
}


/*
 * Copy every live record of the previous zone into the new one, the most
 * protective first, without evicting anything; then restore the previous
 * LRU order and carry the counters on.  The old workers still run: the
 * previous zone is locked meanwhile.  A runtime setting or a terminal
 * state that does not fit fails the reload: they are never dropped.
 */

static ngx_int_t
ngx_omniroute_store_carry(ngx_omniroute_store_t *st, ngx_shm_zone_t *shm_zone,
    ngx_shm_zone_t *prev)
{
    u_char                *p, *last, text[NGX_OMNIROUTE_T_COUNT * 32];
    uint32_t               hash;
    or_msec_t              now;
    ngx_str_t              key;
    ngx_uint_t             i, c, total, lost, kept_lost;
    ngx_uint_t             carried[NGX_OMNIROUTE_T_COUNT];
    ngx_uint_t             dropped[NGX_OMNIROUTE_T_COUNT];
    ngx_queue_t           *q, *lru;
    ngx_slab_pool_t       *oshpool;
    ngx_omniroute_sh_t    *sh, *osh;
    ngx_omniroute_node_t  *osn;

    oshpool = (ngx_slab_pool_t *) prev->shm.addr;
    osh = oshpool->data;
    sh = st->sh;

    ngx_memzero(carried, sizeof(carried));
    ngx_memzero(dropped, sizeof(dropped));
    kept_lost = 0;

    now = ngx_omniroute_now();

    ngx_shmtx_lock(&oshpool->mutex);

    for (i = 0; i < sizeof(ngx_omniroute_carry_order)
                    / sizeof(ngx_omniroute_carry_order[0]); i++)
    {
        lru = &osh->lru[ngx_omniroute_carry_order[i].class];

        for (q = ngx_queue_head(lru);
             q != ngx_queue_sentinel(lru);
             q = ngx_queue_next(q))
        {
            osn = ngx_queue_data(q, ngx_omniroute_node_t, queue);

            if (osn->table >= NGX_OMNIROUTE_T_COUNT) {
                continue;
            }

            if (ngx_omniroute_carry_order[i].table != -1
                && osn->table != ngx_omniroute_carry_order[i].table)
            {
                continue;
            }

            if (ngx_omniroute_carry_order[i].kept != -1
                && ngx_omniroute_store_kept(osn)
                   != (ngx_uint_t) ngx_omniroute_carry_order[i].kept)
            {
                continue;
            }

            if (osn->expires && osn->expires <= now) {
                /* holds nothing worth keeping */
                continue;
            }

            if (ngx_omniroute_store_copy(st, osn) == NGX_OK) {
                carried[osn->table]++;
                continue;
            }

            dropped[osn->table]++;

            if (ngx_omniroute_store_kept(osn)) {
                kept_lost++;
            }
        }
    }

    /* the previous recency order, least recently used first */

    for (c = 0; c < NGX_OMNIROUTE_EC_COUNT; c++) {
        lru = &osh->lru[c];

        for (q = ngx_queue_last(lru);
             q != ngx_queue_sentinel(lru);
             q = ngx_queue_prev(q))
        {
            osn = ngx_queue_data(q, ngx_omniroute_node_t, queue);

            key.data = ngx_omniroute_node_key(osn);
            key.len = osn->key_len;
            hash = (uint32_t) ngx_omniroute_rbnode_of(osn)->key;

            (void) ngx_omniroute_store_lookup(sh, osn->table, &key, hash);
        }
    }

    sh->stats = osh->stats;
    sh->evictions = osh->evictions;
    sh->alloc_failures = osh->alloc_failures;
    sh->dropped = osh->dropped;
    sh->next_seq = osh->next_seq;

    ngx_shmtx_unlock(&oshpool->mutex);

    if (kept_lost) {
        ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0,
                      "omniroute zone \"%V\" of %uzK cannot hold the %ui "
                      "runtime settings and terminal states of the previous "
                      "zone \"%V\" of %uzK; make it larger",
                      &shm_zone->shm.name, shm_zone->shm.size >> 10,
                      kept_lost, &prev->shm.name, prev->shm.size >> 10);
        return NGX_ERROR;
    }

    total = 0;
    lost = 0;
    p = text;
    last = text + sizeof(text);

    for (i = 0; i < NGX_OMNIROUTE_T_COUNT; i++) {
        total += carried[i];

        if (dropped[i]) {
            p = ngx_slprintf(p, last, "%s%ui %s", lost ? ", " : "",
                             dropped[i], ngx_omniroute_store_tables[i].name);
            lost += dropped[i];
        }
    }

    ngx_log_error(NGX_LOG_NOTICE, shm_zone->shm.log, 0,
                  "omniroute zone \"%V\" of %uzK: %ui records carried over "
                  "from the previous zone \"%V\" of %uzK",
                  &shm_zone->shm.name, shm_zone->shm.size >> 10, total,
                  &prev->shm.name, prev->shm.size >> 10);

    if (lost) {
        ngx_log_error(NGX_LOG_WARN, shm_zone->shm.log, 0,
                      "omniroute zone \"%V\" of %uzK: %ui records of the "
                      "previous zone did not fit and were dropped (%*s)",
                      &shm_zone->shm.name, shm_zone->shm.size >> 10, lost,
                      p - text, text);
    }

    return NGX_OK;
}


/* one record into the new zone (not yet shared), or NGX_DECLINED */

static ngx_int_t
ngx_omniroute_store_copy(ngx_omniroute_store_t *st, ngx_omniroute_node_t *osn)
{
    size_t                 n, chunk;
    ngx_uint_t             class;
    ngx_rbtree_node_t     *node;
    ngx_omniroute_sh_t    *sh;
    ngx_omniroute_node_t  *sn;

    sh = st->sh;
    class = ngx_omniroute_class_of(osn);

    n = ngx_omniroute_node_size(osn->size, osn->key_len);
    chunk = ngx_omniroute_store_chunk(n);

    if (class <= NGX_OMNIROUTE_EC_STRATEGY
        && sh->bytes[NGX_OMNIROUTE_EC_SESSION]
           + sh->bytes[NGX_OMNIROUTE_EC_STRATEGY] + chunk > sh->client_max)
    {
        return NGX_DECLINED;
    }

    node = ngx_slab_alloc_locked(st->shpool, n);
    if (node == NULL) {
        return NGX_DECLINED;
    }

    sn = ngx_omniroute_node_of(node);

    ngx_memcpy(sn, osn, offsetof(ngx_omniroute_node_t, data) + osn->size
                        + osn->key_len);

    node->key = ngx_omniroute_rbnode_of(osn)->key;

    ngx_rbtree_insert(&sh->rbtree, node);
    ngx_queue_insert_tail(&sh->lru[class], &sn->queue);

    sh->records[sn->table]++;
    sh->gen[sn->table]++;
    sh->bytes[class] += chunk;

    return NGX_OK;
}
