
/*
 * Copyright (C) ngx_omniroute authors
 *
 * The metrics zone: a shared-memory zone of its own (beside the state
 * zone, omniroute_zone) holding the labelled counters, histograms and
 * per-second rings of the metrics and the status page.  Its layout is
 * fixed at configuration time (conf/ngx_omniroute_metrics_conf.c) and
 * handed to the store as plain arrays: indexed by configuration order,
 * sized from the number of providers, connections, models and the
 * (model, connection) pairs the routes make, so every label value is a
 * configured name and the cardinality is bounded by the configuration.
 *
 * Writers use atomic increments only (the breaker timeline takes the
 * zone's mutex).  The zone's name carries a fingerprint of its layout
 * ("omniroute_metrics:<hex>"): a reload with the same names finds the
 * same zone and keeps counting in it; a reload that changes them gets a
 * new zone, into which the counters of every name still configured are
 * copied from the previous one (by a hash of the name, so reordering
 * directives keeps them).
 */


#ifndef _NGX_OMNIROUTE_METRICS_ZONE_H_INCLUDED_
#define _NGX_OMNIROUTE_METRICS_ZONE_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>

#include "or_types.h"
#include "or_usage.h"
#include "ngx_omniroute_store.h"


/* how client requests ended: the store's outcomes, then the queue's */
#define NGX_OMNIROUTE_OUT_QUEUE_FULL     NGX_OMNIROUTE_OUT_COUNT
#define NGX_OMNIROUTE_OUT_QUEUE_TIMEOUT  (NGX_OMNIROUTE_OUT_COUNT + 1)
#define NGX_OMNIROUTE_OUTCOMES           (NGX_OMNIROUTE_OUT_COUNT + 2)

#define NGX_OMNIROUTE_HIST_BOUNDS        15     /* finite bucket bounds */
#define NGX_OMNIROUTE_TICKS              300    /* seconds in the rings */
#define NGX_OMNIROUTE_TIMELINE           32     /* breaker changes kept */
#define NGX_OMNIROUTE_CB_STATES          4


/* a histogram: counts per bucket (not cumulative, +Inf last), sum in ms */
typedef struct {
    ngx_atomic_t                  bucket[NGX_OMNIROUTE_HIST_BOUNDS + 1];
    ngx_atomic_t                  sum_ms;
} ngx_omniroute_hist_t;


/* one second of a provider's attempts */
typedef struct {
    ngx_atomic_t                  sec;          /* which second it holds */
    ngx_atomic_t                  attempts;
    ngx_atomic_t                  errors;
    ngx_atomic_t                  ms;           /* latency sum */
} ngx_omniroute_tick_t;


typedef struct {
    or_msec_t                     time;
    uint8_t                       from;
    uint8_t                       to;
} ngx_omniroute_transition_t;


typedef struct {
    ngx_atomic_t                  transitions[NGX_OMNIROUTE_CB_STATES];
    ngx_uint_t                    next;         /* timeline, under lock */
    ngx_omniroute_transition_t    timeline[NGX_OMNIROUTE_TIMELINE];
    ngx_omniroute_tick_t          ticks[NGX_OMNIROUTE_TICKS];
} ngx_omniroute_mprovider_t;


typedef struct {
    ngx_omniroute_hist_t          attempt;      /* whole attempt */
    ngx_omniroute_hist_t          first_byte;   /* to the response header */
    ngx_omniroute_hist_t          first_content;    /* probed streams */
} ngx_omniroute_mconn_t;


typedef struct {
    ngx_atomic_t                  requests[NGX_OMNIROUTE_OUTCOMES];
    ngx_omniroute_hist_t          duration;
} ngx_omniroute_mmodel_t;


/* a (model, connection) pair */
typedef struct {
    ngx_atomic_t                  attempts[OR_REASON_COUNT];
    ngx_atomic_t                  fallbacks[OR_REASON_COUNT];
    ngx_atomic_t                  tokens[OR_USAGE_KINDS];
    ngx_atomic_t                  cost;         /* tokens x cost x 10^4 */
} ngx_omniroute_mpair_t;


/* in the zone */
typedef struct {
    uint64_t                      fingerprint;
    ngx_omniroute_mprovider_t    *providers;
    ngx_omniroute_mconn_t        *conns;
    ngx_omniroute_mmodel_t       *models;
    ngx_omniroute_mpair_t        *pairs;
} ngx_omniroute_msh_t;


/*
 * In the configuration: the layout (computed by
 * conf/ngx_omniroute_metrics_conf.c) and the zone that holds its counters
 */
typedef struct ngx_omniroute_mzone_s  ngx_omniroute_mzone_t;

struct ngx_omniroute_mzone_s {
    ngx_omniroute_msh_t          *sh;
    ngx_slab_pool_t              *shpool;
    ngx_shm_zone_t               *shm_zone;
    ngx_omniroute_mzone_t        *old;          /* previous cycle's */
    uint64_t                      fingerprint;

    ngx_uint_t                    nproviders;
    ngx_uint_t                    nconns;
    ngx_uint_t                    ndeclared;    /* models and combos */
    ngx_uint_t                    nmodels;      /* slots: declared, one
                                                   "provider/ *" each, and
                                                   "(none)" */
    ngx_uint_t                    npairs;

    ngx_str_t                    *model_names;  /* label per slot */
    ngx_uint_t                   *route_base;   /* per declared model: its
                                                   routes' first entry in
                                                   route_pair */
    ngx_uint_t                   *route_pair;   /* pair of each route */
    ngx_uint_t                   *direct_pair;  /* per connection */
    ngx_uint_t                   *emergency_pair;   /* per model slot: of
                                                       the emergency target,
                                                       or NULL */
    ngx_uint_t                   *pair_model;   /* per pair: model slot */
    ngx_uint_t                   *pair_conn;    /* per pair: connection */
    uint64_t                     *cost4;        /* per connection, x 10^4 */

    uint64_t                     *provider_keys;    /* name hashes, for */
    uint64_t                     *conn_keys;        /* the copy at a */
    uint64_t                     *model_keys;       /* reload */
    uint64_t                     *pair_keys;
};


extern const ngx_msec_t  ngx_omniroute_hist_bounds[NGX_OMNIROUTE_HIST_BOUNDS];


/*
 * Adds the zone of a layout: mz's counts, label names and keys, pairs
 * and costs filled in by the configuration (ngx_omniroute_mzone_add(),
 * conf/ngx_omniroute_metrics_conf.c).  The zone is named by a
 * fingerprint of the keys.
 */
ngx_int_t ngx_omniroute_mzone_create(ngx_conf_t *cf,
    ngx_omniroute_mzone_t *mz);

/* the key of a label, its kind ("p", "c", "m", "r") and one or two names */
uint64_t ngx_omniroute_mzone_key(const char *kind, ngx_str_t *a,
    ngx_str_t *b);

void ngx_omniroute_hist_observe(ngx_omniroute_hist_t *h, or_msec_t ms);
void ngx_omniroute_mzone_tick(ngx_omniroute_mzone_t *mz, ngx_uint_t provider,
    or_msec_t now, ngx_uint_t error, or_msec_t ms);
void ngx_omniroute_mzone_transition(ngx_omniroute_mzone_t *mz,
    ngx_uint_t provider, ngx_uint_t from, ngx_uint_t to, or_msec_t now);
ngx_uint_t ngx_omniroute_mzone_timeline(ngx_omniroute_mzone_t *mz,
    ngx_uint_t provider, ngx_omniroute_transition_t *tl);

/* the model slots without a declared name */
#define ngx_omniroute_mzone_direct(mz, provider)                             \
    ((mz)->ndeclared + (provider))
#define ngx_omniroute_mzone_none(mz)  ((mz)->nmodels - 1)


#endif /* _NGX_OMNIROUTE_METRICS_ZONE_H_INCLUDED_ */
