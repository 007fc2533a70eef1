
/*
 * Copyright (C) ngx_omniroute authors
 *
 * The Redis mirror of the state store (SPEC R-CLUSTER-2/3, DESIGN §3): a
 * module of its own (ngx_http_omniroute_redis_module, directive
 * "omniroute_redis").  Worker 0 of every node owns one link to Redis, two
 * hiredis async connections on the nginx event loop:
 *
 *   command     AUTH, SELECT, SET/DEL of whole states with a TTL, PUBLISH,
 *               SCAN + MGET to load the state, heartbeats;
 *   subscriber  SUBSCRIBE <prefix>events:<db>, remote changes.
 *
 * A timer (interval, 10 ms by default) reads the store's event ring; every
 * local change is written as the whole current value and published with
 * the node name.  Remote changes are merged into the shared zone with the
 * engine's merge functions (or_*_merge), so every worker sees them; a
 * local value that knows more than the remote one is written back.  After
 * every (re)connection, and every "resync" period, the node loads the
 * whole state (SCAN + MGET), merges it, then pushes what Redis lacks.  The
 * request path never waits for Redis.
 *
 * This header is the interface for metrics: the link state and the
 * counters live in a small shared zone of their own, readable by any
 * worker with ngx_omniroute_redis_stats().
 */


#ifndef _NGX_OMNIROUTE_REDIS_STATS_H_INCLUDED_
#define _NGX_OMNIROUTE_REDIS_STATS_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>

#include "or_types.h"


typedef enum {
    NGX_OMNIROUTE_REDIS_DISABLED = 0,   /* no omniroute_redis directive */
    NGX_OMNIROUTE_REDIS_CONNECTING,     /* connecting, authenticating */
    NGX_OMNIROUTE_REDIS_SYNCING,        /* loading and pushing the state */
    NGX_OMNIROUTE_REDIS_UP,             /* mirroring */
    NGX_OMNIROUTE_REDIS_DOWN,           /* waiting to reconnect */
    NGX_OMNIROUTE_REDIS_STATE_COUNT
} ngx_omniroute_redis_state_e;


/*
 * Shared counters; written by the worker that owns the link, read by any
 * worker.  Never reset, except "state", "pending" and "lag_ms" (gauges).
 */
typedef struct {
    ngx_atomic_t                  state;        /* ..._redis_state_e */
    ngx_atomic_t                  state_since;  /* ms since the epoch */
    ngx_atomic_t                  owner;        /* pid holding the link */
    ngx_atomic_t                  connects;     /* links established */
    ngx_atomic_t                  failures;     /* failed or lost links */
    ngx_atomic_t                  syncs;        /* full loads completed */
    ngx_atomic_t                  loaded;       /* records read by loads */
    ngx_atomic_t                  published;    /* state changes written */
    ngx_atomic_t                  received;     /* remote changes read */
    ngx_atomic_t                  applied;      /* ... that changed ours */
    ngx_atomic_t                  write_backs;  /* ours knew more: sent */
    ngx_atomic_t                  overflows;    /* events lost unsent */
    ngx_atomic_t                  errors;       /* error replies, bad data */
    ngx_atomic_t                  pending;      /* commands awaiting reply */
    ngx_atomic_t                  lag_ms;       /* age of the last remote
                                                   change when applied */
    ngx_atomic_t                  rejected;     /* remote records refused
                                                   by validation */
    ngx_atomic_t                  refills;      /* Redis found without the
                                                   mirror's keys, refilled */
    ngx_atomic_t                  lease_log_at; /* ms since the epoch: a
                                                   rejected lease line last
                                                   logged, by any worker */
} ngx_omniroute_redis_stats_t;


/* the counters, or NULL when no omniroute_redis is configured */
ngx_omniroute_redis_stats_t *ngx_omniroute_redis_stats(void);

const char *ngx_omniroute_redis_state_name(ngx_uint_t state);


#endif /* _NGX_OMNIROUTE_REDIS_STATS_H_INCLUDED_ */
