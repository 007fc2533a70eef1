
/*
 * Copyright (C) ngx_omniroute authors
 *
 * The state store: one shared-memory zone holding every runtime record
 * (provider breakers, connection cooldowns, model lockouts, strategy
 * state, session pins, runtime settings...), keyed by (table, stable
 * name) so that a reload that reorders directives keeps the state.
 * rbtree + LRU as in limit_req, with one LRU queue per eviction class:
 * when the zone is full, expired records go first, then client-keyed
 * ones (session pins, then strategy state), then model-keyed ones
 * (lockouts, request_rejected); breakers, connection states and usage
 * lanes only
 * when nothing else is left, and runtime settings and terminal states
 * never.  A record never evicts one of a more protective class, and
 * client-keyed records use at most half of the zone.
 *
 * Every change goes through ngx_omniroute_store_update(): under the zone
 * lock the caller's function updates a copy-in-place of the plain value;
 * a change bumps the record's version and, for a table the Redis mirror
 * reads, appends an event (table, key, operation, sequence) to a ring that
 * the mirror publishes.
 *
 * A reload that keeps the zone's name and size adopts it; one that
 * changes them copies every record into the new zone (most protective
 * first).  The zone starts with a layout word; a zone of another layout
 * is refused.
 */


#ifndef _NGX_OMNIROUTE_STORE_H_INCLUDED_
#define _NGX_OMNIROUTE_STORE_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>

#include "or_types.h"
#include "or_lane.h"


/* the built-in zone, when the configuration declares none */
#define NGX_OMNIROUTE_ZONE_NAME      "omniroute"
#define NGX_OMNIROUTE_ZONE_SIZE      (10 * 1024 * 1024)

#define NGX_OMNIROUTE_KEY_MAX        255
#define NGX_OMNIROUTE_EVENT_KEY_MAX  255

/* what an update function returns */
#define NGX_OMNIROUTE_UNCHANGED      0
#define NGX_OMNIROUTE_CHANGED        1
#define NGX_OMNIROUTE_DELETE         2


typedef enum {
    NGX_OMNIROUTE_T_BREAKER = 0,    /* key: provider */
    NGX_OMNIROUTE_T_CONN,           /* key: connection id */
    NGX_OMNIROUTE_T_LOCKOUT,        /* key: provider, connection, model key */
    NGX_OMNIROUTE_T_REJECTED,       /* key: connection, model */
    NGX_OMNIROUTE_T_STRATEGY,       /* key: combo */
    NGX_OMNIROUTE_T_SETTINGS,       /* key: setting group */
    NGX_OMNIROUTE_T_PIN,            /* key: model, session hash */
    NGX_OMNIROUTE_T_LEASE,          /* key: "c:" connection, "o:" owner
                                       hash (ngx_omniroute_lease_store.h) */
    NGX_OMNIROUTE_T_LANE,           /* key: connection id (or_lane.h) */
    NGX_OMNIROUTE_T_PACE,           /* key: "p:" connection (a pause),
                                       "t:" provider "|" model (a tool
                                       limit): or_pace_t */
    NGX_OMNIROUTE_T_COUNT
} ngx_omniroute_table_e;


/* eviction classes, in eviction order: one LRU queue each */
typedef enum {
    NGX_OMNIROUTE_EC_SESSION = 0,   /* session pins: client-keyed */
    NGX_OMNIROUTE_EC_STRATEGY,      /* strategy state: node-local */
    NGX_OMNIROUTE_EC_MODEL,         /* lockout, rejected: model-keyed */
    NGX_OMNIROUTE_EC_CONFIG,        /* breaker, connection: config-keyed */
    NGX_OMNIROUTE_EC_SETTINGS,      /* runtime settings, leases: never
                                       evicted */
    NGX_OMNIROUTE_EC_COUNT
} ngx_omniroute_class_e;


typedef enum {
    NGX_OMNIROUTE_OP_SET = 0,
    NGX_OMNIROUTE_OP_DELETE
} ngx_omniroute_op_e;


/* one state change, for the Redis mirror */
typedef struct {
    uint64_t                      seq;
    or_msec_t                     time;
    uint8_t                       table;
    uint8_t                       op;
    uint8_t                       remote;       /* applied from a peer */
    uint8_t                       key_len;
    u_char                        key[NGX_OMNIROUTE_EVENT_KEY_MAX];
} ngx_omniroute_event_t;


/* how a client request ended, for metrics */
typedef enum {
    NGX_OMNIROUTE_OUT_SUCCESS = 0,      /* a provider answered 1xx-3xx */
    NGX_OMNIROUTE_OUT_PROVIDER_ERROR,   /* the client got a provider error */
    NGX_OMNIROUTE_OUT_UNREACHABLE,      /* 502/504: no provider answered */
    NGX_OMNIROUTE_OUT_COOLING_DOWN,     /* 503 all_targets_cooling_down */
    NGX_OMNIROUTE_OUT_NO_TARGETS,       /* 404 no_executable_targets */
    NGX_OMNIROUTE_OUT_CLIENT_ERROR,     /* 4xx before any dispatch */
    NGX_OMNIROUTE_OUT_COUNT
} ngx_omniroute_outcome_e;


/* the events of ngx_omniroute_stats_t.pace (docs/metrics.md) */
#define NGX_OMNIROUTE_PACE_PAUSE          0   /* a connection paused */
#define NGX_OMNIROUTE_PACE_LOCKOUT        1   /* a long typed wait locked */
#define NGX_OMNIROUTE_PACE_QUEUED         2   /* a request waited a pause */
#define NGX_OMNIROUTE_PACE_TIMEOUT        3   /* answered at once */
#define NGX_OMNIROUTE_PACE_TOOL_BACKOFF   4   /* a tool limit recorded */
#define NGX_OMNIROUTE_PACE_TOOL_SKIP      5   /* a target skipped for it */
#define NGX_OMNIROUTE_PACE_EMERGENCY      6   /* the emergency target tried */
#define NGX_OMNIROUTE_PACE_EVENTS         7

#define NGX_OMNIROUTE_RULE_SLOTS     32
#define NGX_OMNIROUTE_RULE_NAME_MAX  48


typedef struct {
    u_char                        name[NGX_OMNIROUTE_RULE_NAME_MAX];
    ngx_atomic_t                  count;
} ngx_omniroute_rule_count_t;


/* counters for metrics; updated with atomics, never reset */
typedef struct {
    ngx_atomic_t                  requests[NGX_OMNIROUTE_OUT_COUNT];
    ngx_atomic_t                  attempts[OR_REASON_COUNT];  /* none: ok */
    ngx_atomic_t                  fallbacks[OR_REASON_COUNT];
    ngx_omniroute_rule_count_t    restatements[NGX_OMNIROUTE_RULE_SLOTS];
    ngx_atomic_t                  events_lost;  /* overwritten in the ring
                                                   before being read */
    ngx_atomic_t                  lane_entries;     /* R-LANE */
    ngx_atomic_t                  lane_waits;
    ngx_atomic_t                  lane_ends[OR_LANE_END_COUNT];
    ngx_atomic_t                  limit_resets[OR_RESET_COUNT];
    ngx_atomic_t                  pace[NGX_OMNIROUTE_PACE_EVENTS];
                                                /* pacing, tool limits,
                                                   emergency fallback */
} ngx_omniroute_stats_t;


/* node-local in-flight attempts per connection: lock-free, not mirrored */
#define NGX_OMNIROUTE_INFLIGHT_MAX  1024

typedef struct {
    ngx_atomic_t                  hash;         /* 0: free */
    ngx_atomic_t                  count;
} ngx_omniroute_inflight_t;


/*
 * The zone's first word: "OMNR", a version to bump whenever a shared
 * structure changes meaning, and the sizes of the shared header and node
 * (ngx_omniroute_store_zone.c).
 */
#define NGX_OMNIROUTE_LAYOUT_MAGIC    0x4f4d4e52
#define NGX_OMNIROUTE_LAYOUT_VERSION  4


typedef struct {
    uint64_t                      layout;       /* first: checked on reload */
    ngx_rbtree_t                  rbtree;
    ngx_rbtree_node_t             sentinel;
    ngx_queue_t                   lru[NGX_OMNIROUTE_EC_COUNT];
    size_t                        bytes[NGX_OMNIROUTE_EC_COUNT];
    size_t                        client_max;   /* session + strategy bytes */
    ngx_uint_t                    records[NGX_OMNIROUTE_T_COUNT];
    ngx_atomic_uint_t             gen[NGX_OMNIROUTE_T_COUNT];
                                                /* changes of each table:
                                                   a record created,
                                                   changed or freed; from
                                                   1, under the lock */
    ngx_uint_t                    evictions;
    ngx_uint_t                    alloc_failures;
    ngx_uint_t                    dropped;      /* breakers and connection
                                                   states evicted */

    /* what the ALERT and WARN logs (at most one a second) still owe */
    time_t                        alerted;
    time_t                        warned;
    ngx_uint_t                    owed_failures;
    ngx_uint_t                    owed_dropped;
    ngx_uint_t                    owed_model;

    uint64_t                      next_seq;     /* next event sequence */
    ngx_uint_t                    nevents;      /* ring capacity */
    ngx_omniroute_event_t        *events;
    ngx_omniroute_stats_t         stats;
    ngx_omniroute_inflight_t     *inflight;
    ngx_uint_t                    ninflight;    /* slots */
    ngx_atomic_t                  queued;       /* requests waiting for a
                                                   concurrency slot */
} ngx_omniroute_sh_t;


typedef struct {
    ngx_omniroute_sh_t           *sh;
    ngx_slab_pool_t              *shpool;
    ngx_shm_zone_t               *shm_zone;
} ngx_omniroute_store_t;


/*
 * An update function: value points to the record's value (all zero for a
 * record that did not exist).  It may set *expires (absolute ms) after
 * which the record holds nothing worth keeping; 0 keeps it.
 */
typedef ngx_uint_t (*ngx_omniroute_update_pt)(void *value, void *arg,
    or_msec_t *expires);

typedef void (*ngx_omniroute_visit_pt)(ngx_str_t *key, void *value,
    size_t size, void *arg);


/* one record of ngx_omniroute_store_update_all() */
typedef struct {
    ngx_uint_t                    table;
    ngx_str_t                     key;
    size_t                        size;
    ngx_omniroute_update_pt       update;
    void                         *arg;
    ngx_uint_t                    create;       /* 0: only if it exists */
    ngx_int_t                     rc;           /* as store_update() */
    void                         *node;         /* the store's */
} ngx_omniroute_store_op_t;


/*
 * One worker's copy of one record, valid while its table's generation is
 * the one it was read at (ngx_omniroute_store_read_cached()).  Kept in
 * configuration memory, which every worker has a copy of, as the
 * round-robin upstream keeps its peers' current weights.
 */
#define NGX_OMNIROUTE_CACHE_VALUE  64

typedef struct {
    ngx_atomic_uint_t             gen;          /* 0: nothing read yet */
    or_msec_t                     expires;      /* the record's; 0: none */
    ngx_int_t                     rc;           /* NGX_OK: value is it */
    u_char                        value[NGX_OMNIROUTE_CACHE_VALUE];
} ngx_omniroute_store_cache_t;


/* what the zone holds, for metrics (ngx_omniroute_store_usage()) */
typedef struct {
    size_t                        size;         /* of the zone */
    size_t                        used;         /* in used pages */
    ngx_uint_t                    records[NGX_OMNIROUTE_T_COUNT];
    ngx_uint_t                    evictions;
    ngx_uint_t                    alloc_failures;
} ngx_omniroute_store_usage_t;


ngx_int_t ngx_omniroute_store_init_zone(ngx_shm_zone_t *shm_zone,
    void *data);

or_msec_t ngx_omniroute_now(void);

ngx_uint_t ngx_omniroute_store_mirrored(ngx_uint_t table);
const char *ngx_omniroute_store_table_name(ngx_uint_t table);
ngx_atomic_uint_t ngx_omniroute_store_gen(ngx_omniroute_store_t *st,
    ngx_uint_t table);
ngx_int_t ngx_omniroute_store_read(ngx_omniroute_store_t *st,
    ngx_uint_t table, ngx_str_t *key, void *value, size_t size);
uint32_t ngx_omniroute_store_hash(ngx_uint_t table, ngx_str_t *key);
ngx_int_t ngx_omniroute_store_read_hashed(ngx_omniroute_store_t *st,
    ngx_uint_t table, ngx_str_t *key, uint32_t hash, void *value,
    size_t size);
ngx_int_t ngx_omniroute_store_read_cached(ngx_omniroute_store_t *st,
    ngx_uint_t table, ngx_str_t *key, uint32_t hash,
    ngx_omniroute_store_cache_t *cache, void *value, size_t size);
ngx_int_t ngx_omniroute_store_update(ngx_omniroute_store_t *st,
    ngx_uint_t table, ngx_str_t *key, size_t size,
    ngx_omniroute_update_pt update, void *arg, ngx_uint_t remote);
ngx_int_t ngx_omniroute_store_touch(ngx_omniroute_store_t *st,
    ngx_uint_t table, ngx_str_t *key, size_t size,
    ngx_omniroute_update_pt update, void *arg);
ngx_int_t ngx_omniroute_store_delete(ngx_omniroute_store_t *st,
    ngx_uint_t table, ngx_str_t *key, ngx_uint_t remote);
ngx_int_t ngx_omniroute_store_update_all(ngx_omniroute_store_t *st,
    ngx_omniroute_store_op_t *ops, ngx_uint_t n);
ngx_uint_t ngx_omniroute_store_visit(ngx_omniroute_store_t *st,
    ngx_uint_t table, ngx_omniroute_visit_pt visit, void *arg,
    ngx_pool_t *pool);
void ngx_omniroute_store_usage(ngx_omniroute_store_t *st,
    ngx_omniroute_store_usage_t *u);
void ngx_omniroute_store_count_rule(ngx_omniroute_store_t *st,
    const char *rule);
ngx_atomic_t *ngx_omniroute_inflight(ngx_omniroute_store_t *st,
    ngx_str_t *key);
uint64_t ngx_omniroute_store_next_seq(ngx_omniroute_store_t *st);
ngx_uint_t ngx_omniroute_store_events(ngx_omniroute_store_t *st,
    uint64_t from, ngx_omniroute_event_t *out, ngx_uint_t max,
    uint64_t *next);


/*
 * The table has no record: read without the lock (a record created at
 * this very moment is as good as one created a moment later).  A healthy
 * system's hot path takes no lock at all; inline, as it is asked a dozen
 * times per request.
 */

static ngx_inline ngx_uint_t
ngx_omniroute_store_empty(ngx_omniroute_store_t *st, ngx_uint_t table)
{
    if (st == NULL || st->sh == NULL) {
        return 1;
    }

    return *(volatile ngx_uint_t *) &st->sh->records[table] == 0;
}


#endif /* _NGX_OMNIROUTE_STORE_H_INCLUDED_ */
