
/*
 * Copyright (C) ngx_omniroute authors
 *
 * The metrics zone (see ngx_omniroute_metrics_zone.h): the zone of a
 * layout (laid out from the configuration by
 * conf/ngx_omniroute_metrics_conf.c) and its carry-over at a reload,
 * histogram, ring and timeline writers.
 */


#include <ngx_config.h>
#include <ngx_core.h>

#include "ngx_omniroute_metrics_zone.h"


#define NGX_OMNIROUTE_MZONE_PREFIX   "omniroute_metrics:"
#define NGX_OMNIROUTE_MZONE_VERSION  1

#define NGX_OMNIROUTE_FNV_OFFSET     0xcbf29ce484222325ULL
#define NGX_OMNIROUTE_FNV_PRIME      0x100000001b3ULL


typedef struct {
    uint64_t                      key;
    ngx_uint_t                    index;
} ngx_omniroute_mkey_t;


static size_t ngx_omniroute_mzone_layout(ngx_omniroute_mzone_t *mz);
static uint64_t ngx_omniroute_fnv(uint64_t h, const u_char *p, size_t len);
static ngx_omniroute_mzone_t *ngx_omniroute_mzone_previous(ngx_conf_t *cf);
static ngx_int_t ngx_omniroute_mzone_init_zone(ngx_shm_zone_t *shm_zone,
    void *data);
static void ngx_omniroute_mzone_carve(ngx_omniroute_mzone_t *mz,
    ngx_omniroute_msh_t *sh);
static void ngx_omniroute_mzone_carry(ngx_omniroute_mzone_t *mz,
    ngx_omniroute_mzone_t *old, ngx_log_t *log);
static ngx_int_t ngx_omniroute_mzone_copy(uint64_t *keys, ngx_uint_t n,
    uint64_t *okeys, ngx_uint_t on, u_char *to, u_char *from, size_t size,
    ngx_log_t *log);
static int ngx_libc_cdecl ngx_omniroute_mkey_cmp(const void *a,
    const void *b);


/* a tag of the zone's own: the state zone is tagged with the module */
static ngx_uint_t  ngx_omniroute_mzone_tag;


const ngx_msec_t  ngx_omniroute_hist_bounds[NGX_OMNIROUTE_HIST_BOUNDS] = {
    5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000,
    120000, 300000
};


/*
 * The zone of a layout, once the configuration has laid it out: named by
 * the layout's fingerprint, sized by its counts.
 */

ngx_int_t
ngx_omniroute_mzone_create(ngx_conf_t *cf, ngx_omniroute_mzone_t *mz)
{
    size_t           size, pages;
    uint64_t         h;
    ngx_str_t        name;
    ngx_uint_t       i;
    ngx_shm_zone_t  *shm_zone;

    /* the fingerprint of the layout names the zone */

    h = NGX_OMNIROUTE_FNV_OFFSET;
    i = NGX_OMNIROUTE_MZONE_VERSION;
    h = ngx_omniroute_fnv(h, (u_char *) &i, sizeof(ngx_uint_t));
    h = ngx_omniroute_fnv(h, (u_char *) mz->provider_keys,
                          mz->nproviders * sizeof(uint64_t));
    h = ngx_omniroute_fnv(h, (u_char *) mz->conn_keys,
                          mz->nconns * sizeof(uint64_t));
    h = ngx_omniroute_fnv(h, (u_char *) mz->model_keys,
                          mz->nmodels * sizeof(uint64_t));
    h = ngx_omniroute_fnv(h, (u_char *) mz->pair_keys,
                          mz->npairs * sizeof(uint64_t));

    mz->fingerprint = h;

    name.data = ngx_pnalloc(cf->pool, sizeof(NGX_OMNIROUTE_MZONE_PREFIX) + 16);
    if (name.data == NULL) {
        return NGX_ERROR;
    }

    name.len = ngx_sprintf(name.data, NGX_OMNIROUTE_MZONE_PREFIX "%016xL", h)
               - name.data;

    size = ngx_omniroute_mzone_layout(mz);
    pages = (size + ngx_pagesize - 1) / ngx_pagesize;
    size = (pages + 8) * ngx_pagesize
           + ngx_align(pages * 2 * sizeof(ngx_slab_page_t), ngx_pagesize);

    mz->old = ngx_omniroute_mzone_previous(cf);

    shm_zone = ngx_shared_memory_add(cf, &name, size,
                                     &ngx_omniroute_mzone_tag);
    if (shm_zone == NULL) {
        return NGX_ERROR;
    }

    if (shm_zone->data) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "the metrics zone \"%V\" is defined twice "
                           "(one http block only)", &name);
        return NGX_ERROR;
    }

    shm_zone->init = ngx_omniroute_mzone_init_zone;
    shm_zone->data = mz;
    mz->shm_zone = shm_zone;

    ngx_log_debug5(NGX_LOG_DEBUG_HTTP, cf->log, 0,
                   "omniroute metrics zone \"%V\": %uz bytes, %ui models, "
                   "%ui pairs, previous %p", &name, size, mz->nmodels,
                   mz->npairs, mz->old);

    return NGX_OK;
}


static size_t
ngx_omniroute_mzone_layout(ngx_omniroute_mzone_t *mz)
{
    return ngx_align(sizeof(ngx_omniroute_msh_t), 64)
           + ngx_align(mz->nproviders * sizeof(ngx_omniroute_mprovider_t), 64)
           + ngx_align(mz->nconns * sizeof(ngx_omniroute_mconn_t), 64)
           + ngx_align(mz->nmodels * sizeof(ngx_omniroute_mmodel_t), 64)
           + ngx_align(mz->npairs * sizeof(ngx_omniroute_mpair_t), 64);
}


static void
ngx_omniroute_mzone_carve(ngx_omniroute_mzone_t *mz, ngx_omniroute_msh_t *sh)
{
    u_char  *p;

    p = (u_char *) sh + ngx_align(sizeof(ngx_omniroute_msh_t), 64);

    sh->providers = (ngx_omniroute_mprovider_t *) p;
    p += ngx_align(mz->nproviders * sizeof(ngx_omniroute_mprovider_t), 64);

    sh->conns = (ngx_omniroute_mconn_t *) p;
    p += ngx_align(mz->nconns * sizeof(ngx_omniroute_mconn_t), 64);

    sh->models = (ngx_omniroute_mmodel_t *) p;
    p += ngx_align(mz->nmodels * sizeof(ngx_omniroute_mmodel_t), 64);

    sh->pairs = (ngx_omniroute_mpair_t *) p;
}


static uint64_t
ngx_omniroute_fnv(uint64_t h, const u_char *p, size_t len)
{
    while (len--) {
        h ^= *p++;
        h *= NGX_OMNIROUTE_FNV_PRIME;
    }

    return h;
}


/* the hash of a label: its kind and one or two names */

uint64_t
ngx_omniroute_mzone_key(const char *kind, ngx_str_t *a, ngx_str_t *b)
{
    uint64_t  h;

    h = ngx_omniroute_fnv(NGX_OMNIROUTE_FNV_OFFSET, (u_char *) kind,
                          ngx_strlen(kind) + 1);
    h = ngx_omniroute_fnv(h, a->data, a->len);

    if (b) {
        h = ngx_omniroute_fnv(h, (u_char *) "", 1);
        h = ngx_omniroute_fnv(h, b->data, b->len);
    }

    return h;
}


/* the metrics zone of the configuration before this one, if any */

static ngx_omniroute_mzone_t *
ngx_omniroute_mzone_previous(ngx_conf_t *cf)
{
    ngx_uint_t        i;
    ngx_cycle_t      *old;
    ngx_shm_zone_t   *zone;
    ngx_list_part_t  *part;

    old = cf->cycle->old_cycle;

    if (old == NULL || old->shared_memory.part.elts == NULL) {
        return NULL;
    }

    part = &old->shared_memory.part;
    zone = part->elts;

    for (i = 0; /* void */ ; i++) {

        if (i >= part->nelts) {
            if (part->next == NULL) {
                return NULL;
            }

            part = part->next;
            zone = part->elts;
            i = 0;
        }

        if (zone[i].tag == &ngx_omniroute_mzone_tag && zone[i].data) {
            return zone[i].data;
        }
    }
}


static ngx_int_t
ngx_omniroute_mzone_init_zone(ngx_shm_zone_t *shm_zone, void *data)
{
    ngx_omniroute_mzone_t *omz = data;

    size_t                  len;
    ngx_slab_pool_t        *shpool;
    ngx_omniroute_msh_t    *sh;
    ngx_omniroute_mzone_t  *mz;

    mz = shm_zone->data;

    if (omz) {
        /* the zone's name is its layout: the counters go on */

        if (omz->sh == NULL || omz->fingerprint != mz->fingerprint) {
            ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0,
                          "metrics zone \"%V\" has another layout",
                          &shm_zone->shm.name);
            return NGX_ERROR;
        }

        mz->sh = omz->sh;
        mz->shpool = omz->shpool;
        return NGX_OK;
    }

    shpool = (ngx_slab_pool_t *) shm_zone->shm.addr;
    mz->shpool = shpool;

    if (shm_zone->shm.exists) {
        mz->sh = shpool->data;
        return NGX_OK;
    }

    len = ngx_omniroute_mzone_layout(mz);

    sh = ngx_slab_calloc(shpool, len);
    if (sh == NULL) {
        return NGX_ERROR;
    }

    ngx_omniroute_mzone_carve(mz, sh);
    sh->fingerprint = mz->fingerprint;

    shpool->data = sh;
    mz->sh = sh;

    len = sizeof(" in omniroute metrics zone \"\"") + shm_zone->shm.name.len;

    shpool->log_ctx = ngx_slab_alloc(shpool, len);
    if (shpool->log_ctx == NULL) {
        return NGX_ERROR;
    }

    ngx_sprintf(shpool->log_ctx, " in omniroute metrics zone \"%V\"%Z",
                &shm_zone->shm.name);

    if (mz->old && mz->old->sh) {
        ngx_omniroute_mzone_carry(mz, mz->old, shm_zone->shm.log);
    }

    return NGX_OK;
}


/*
 * A reload that changed the names: the counters of every provider,
 * connection, model and pair still configured are copied from the
 * previous zone (still mapped; it is freed once this cycle is up).
 * Increments the old workers make after the copy are not carried.
 */

static void
ngx_omniroute_mzone_carry(ngx_omniroute_mzone_t *mz,
    ngx_omniroute_mzone_t *old, ngx_log_t *log)
{
    ngx_uint_t            n;
    ngx_omniroute_msh_t  *sh, *osh;

    sh = mz->sh;
    osh = old->sh;

    n = ngx_omniroute_mzone_copy(mz->provider_keys, mz->nproviders,
                                 old->provider_keys, old->nproviders,
                                 (u_char *) sh->providers,
                                 (u_char *) osh->providers,
                                 sizeof(ngx_omniroute_mprovider_t), log);
    n += ngx_omniroute_mzone_copy(mz->conn_keys, mz->nconns,
                                  old->conn_keys, old->nconns,
                                  (u_char *) sh->conns, (u_char *) osh->conns,
                                  sizeof(ngx_omniroute_mconn_t), log);
    n += ngx_omniroute_mzone_copy(mz->model_keys, mz->nmodels,
                                  old->model_keys, old->nmodels,
                                  (u_char *) sh->models,
                                  (u_char *) osh->models,
                                  sizeof(ngx_omniroute_mmodel_t), log);
    n += ngx_omniroute_mzone_copy(mz->pair_keys, mz->npairs,
                                  old->pair_keys, old->npairs,
                                  (u_char *) sh->pairs, (u_char *) osh->pairs,
                                  sizeof(ngx_omniroute_mpair_t), log);

    ngx_log_error(NGX_LOG_NOTICE, log, 0,
                  "omniroute: metrics of %ui names carried over to the new "
                  "metrics layout", n);
}


static ngx_int_t
ngx_omniroute_mzone_copy(uint64_t *keys, ngx_uint_t n, uint64_t *okeys,
    ngx_uint_t on, u_char *to, u_char *from, size_t size, ngx_log_t *log)
{
    ngx_uint_t             i, lo, hi, mid, copied;
    ngx_omniroute_mkey_t  *sorted;

    if (n == 0 || on == 0) {
        return 0;
    }

    sorted = ngx_alloc(on * sizeof(ngx_omniroute_mkey_t), log);
    if (sorted == NULL) {
        return 0;
    }

    for (i = 0; i < on; i++) {
        sorted[i].key = okeys[i];
        sorted[i].index = i;
    }

    ngx_qsort(sorted, on, sizeof(ngx_omniroute_mkey_t),
              ngx_omniroute_mkey_cmp);

    copied = 0;

    for (i = 0; i < n; i++) {
        lo = 0;
        hi = on;

        while (lo < hi) {
            mid = lo + (hi - lo) / 2;

            if (sorted[mid].key < keys[i]) {
                lo = mid + 1;

            } else {
                hi = mid;
            }
        }

        if (lo < on && sorted[lo].key == keys[i]) {
            ngx_memcpy(to + i * size, from + sorted[lo].index * size, size);
            copied++;
        }
    }

    ngx_free(sorted);

    return copied;
}


static int ngx_libc_cdecl
ngx_omniroute_mkey_cmp(const void *a, const void *b)
{
    const ngx_omniroute_mkey_t  *x = a;
    const ngx_omniroute_mkey_t  *y = b;

    return (x->key < y->key) ? -1 : (x->key > y->key);
}


void
ngx_omniroute_hist_observe(ngx_omniroute_hist_t *h, or_msec_t ms)
{
    ngx_uint_t  i;

    if (ms < 0) {
        ms = 0;
    }

    for (i = 0; i < NGX_OMNIROUTE_HIST_BOUNDS; i++) {
        if ((ngx_msec_t) ms <= ngx_omniroute_hist_bounds[i]) {
            break;
        }
    }

    (void) ngx_atomic_fetch_add(&h->bucket[i], 1);
    (void) ngx_atomic_fetch_add(&h->sum_ms, (ngx_atomic_int_t) ms);
}


/*
 * One attempt in the provider's ring of seconds.  The first writer of a
 * new second takes the slot and clears it; a writer racing with it may
 * lose its count (the ring is for pictures, the counters are exact).
 */

void
ngx_omniroute_mzone_tick(ngx_omniroute_mzone_t *mz, ngx_uint_t provider,
    or_msec_t now, ngx_uint_t error, or_msec_t ms)
{
    ngx_atomic_uint_t      sec, seen;
    ngx_omniroute_tick_t  *t;

    if (mz->sh == NULL || provider >= mz->nproviders) {
        return;
    }

    sec = (ngx_atomic_uint_t) (now / 1000);
    t = &mz->sh->providers[provider].ticks[sec % NGX_OMNIROUTE_TICKS];

    seen = t->sec;

    if (seen != sec && ngx_atomic_cmp_set(&t->sec, seen, sec)) {
        t->attempts = 0;
        t->errors = 0;
        t->ms = 0;
    }

    (void) ngx_atomic_fetch_add(&t->attempts, 1);

    if (error) {
        (void) ngx_atomic_fetch_add(&t->errors, 1);
    }

    (void) ngx_atomic_fetch_add(&t->ms, (ngx_atomic_int_t) ngx_max(ms, 0));
}


void
ngx_omniroute_mzone_transition(ngx_omniroute_mzone_t *mz, ngx_uint_t provider,
    ngx_uint_t from, ngx_uint_t to, or_msec_t now)
{
    ngx_omniroute_mprovider_t   *mp;
    ngx_omniroute_transition_t  *tr;

    if (mz->sh == NULL || provider >= mz->nproviders
        || to >= NGX_OMNIROUTE_CB_STATES)
    {
        return;
    }

    mp = &mz->sh->providers[provider];

    (void) ngx_atomic_fetch_add(&mp->transitions[to], 1);

    ngx_shmtx_lock(&mz->shpool->mutex);

    tr = &mp->timeline[mp->next % NGX_OMNIROUTE_TIMELINE];
    tr->time = now;
    tr->from = (uint8_t) from;
    tr->to = (uint8_t) to;
    mp->next++;

    ngx_shmtx_unlock(&mz->shpool->mutex);
}


/*
 * A copy of the provider's breaker timeline (NGX_OMNIROUTE_TIMELINE
 * entries, taken under the lock); returns the count of changes ever
 * written, whose last ones it holds
 */

ngx_uint_t
ngx_omniroute_mzone_timeline(ngx_omniroute_mzone_t *mz, ngx_uint_t provider,
    ngx_omniroute_transition_t *tl)
{
    ngx_uint_t                  next;
    ngx_omniroute_mprovider_t  *mp;

    mp = &mz->sh->providers[provider];

    ngx_shmtx_lock(&mz->shpool->mutex);

    next = mp->next;
    ngx_memcpy(tl, mp->timeline,
               NGX_OMNIROUTE_TIMELINE * sizeof(ngx_omniroute_transition_t));

    ngx_shmtx_unlock(&mz->shpool->mutex);

    return next;
}
