
/*
 * Copyright (C) ngx_omniroute authors
 *
 * Client gateway keys (R-LEASE-1): "omniroute_client_key" declarations,
 * kept as SHA-256 hashes with their limits (models, connections, path
 * prefixes, the lease:exclusive scope); "omniroute_client_keys" per
 * location; "omniroute_session_leases" (the lease lifecycle endpoint);
 * "omniroute_lease_ttl"; "omniroute_client_key_brake".  A small zone of
 * its own ("omniroute_keys") holds the per-key request counters, the
 * brake on failed key checks per client address (R-BRAKE-1), and the
 * lock that serializes the lifecycle of leases (see
 * ngx_omniroute_lease_store.h).
 *
 * Shared by request/ (authentication, limits, leases), api/ (leases,
 * metrics) and cluster/ (leases in Redis).
 */


#ifndef _NGX_OMNIROUTE_KEYS_H_INCLUDED_
#define _NGX_OMNIROUTE_KEYS_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute.h"
#include "or_brake.h"
#include "or_keys.h"


#define NGX_OMNIROUTE_KEYS_ZONE       "omniroute_keys"
#define NGX_OMNIROUTE_KEYS_MAX        2048      /* client keys, and the
                                                   counter slots */
#define NGX_OMNIROUTE_KEYS_CLASSES    5         /* 1xx .. 5xx */
#define NGX_OMNIROUTE_BRAKE_SLOTS     4096      /* client addresses with
                                                   failed key checks */
#define NGX_OMNIROUTE_BRAKE_PROBE     8

/* omniroute_client_keys */
#define NGX_OMNIROUTE_KEYS_DEFAULT    0         /* on when keys exist */
#define NGX_OMNIROUTE_KEYS_OFF        1
#define NGX_OMNIROUTE_KEYS_ON         2         /* all keys, or a list */

/* why a request was refused a key, for the metrics */
#define NGX_OMNIROUTE_AUTH_MISSING    0
#define NGX_OMNIROUTE_AUTH_INVALID    1
#define NGX_OMNIROUTE_AUTH_REASONS    2


typedef struct {
    ngx_str_t                     id;
    u_char                        hash[32];     /* SHA-256 of the key */
    ngx_array_t                   models;       /* or_keys_str_t, empty:
                                                   any */
    ngx_array_t                   conn_names;   /* ngx_str_t, as given */
    ngx_array_t                   paths;        /* or_keys_str_t, empty:
                                                   any */
    u_char                       *conns;        /* allowed connections by
                                                   index (bitmap); NULL:
                                                   any */
    ngx_uint_t                    lease;        /* scope=lease:exclusive */
    ngx_uint_t                    index;        /* in the keys array */
    ngx_uint_t                    slot;         /* its counters */
    ngx_uint_t                    line;         /* where declared */
    u_char                       *file;
} ngx_omniroute_client_key_t;


typedef struct {
    u_char                        id[OR_KEYS_ID_MAX + 1];   /* "": free */
    ngx_atomic_t                  requests[NGX_OMNIROUTE_KEYS_CLASSES];
} ngx_omniroute_key_stats_t;


/* the failed key checks of one client address (R-BRAKE-1) */
typedef struct {
    u_char                        addr[16];     /* IPv4 or IPv6 */
    u_char                        len;          /* 0: free */
    or_brake_t                    brake;
} ngx_omniroute_brake_slot_t;


typedef struct {
    ngx_atomic_t                  auth[NGX_OMNIROUTE_AUTH_REASONS];
    ngx_atomic_t                  lease_capacity;   /* 429 answers */
    ngx_atomic_t                  braked;       /* 429 answers of the
                                                   brake */
    ngx_omniroute_key_stats_t     keys[NGX_OMNIROUTE_KEYS_MAX];
    ngx_omniroute_brake_slot_t    brake[NGX_OMNIROUTE_BRAKE_SLOTS];
} ngx_omniroute_keys_sh_t;


typedef struct ngx_omniroute_keys_conf_s {
    ngx_array_t                   keys;         /* ngx_omniroute_client_key_t */
    ngx_uint_t                    lease_keys;   /* keys with the scope */
    ngx_msec_t                    lease_ttl;    /* default */
    ngx_msec_t                    lease_ttl_max;
    or_brake_conf_t               brake;        /* rate 0: off */
    ngx_uint_t                    brake_set;
    ngx_shm_zone_t               *shm_zone;
    ngx_omniroute_keys_sh_t      *sh;
    ngx_slab_pool_t              *shpool;       /* its mutex: the lease
                                                   lifecycle lock */
    struct ngx_omniroute_budget_conf_s
                                 *budget;       /* budgets and rate limits
                                                   (budget_store.h) */
} ngx_omniroute_keys_conf_t;


/* omniroute_client_keys of a location */
typedef struct ngx_omniroute_keys_loc_s {
    ngx_uint_t                    mode;         /* NGX_OMNIROUTE_KEYS_* */
    ngx_array_t                   names;        /* ngx_str_t; empty: all */
    u_char                       *allow;        /* keys by index (bitmap);
                                                   NULL: all */
    ngx_str_t                     file;         /* where the directive */
    ngx_uint_t                    line;         /* is, for nginx -t */
} ngx_omniroute_keys_loc_t;


#define ngx_omniroute_bit(map, i)  ((map)[(i) / 8] & (1 << ((i) % 8)))


/* directives (conf/ngx_omniroute_keys_conf.c) */
char *ngx_omniroute_client_key(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
char *ngx_omniroute_client_keys(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
char *ngx_omniroute_session_leases(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
char *ngx_omniroute_lease_ttl(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
char *ngx_omniroute_client_key_brake(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);

/* the keys' configuration, made by the first directive that needs it */
ngx_omniroute_keys_conf_t *ngx_omniroute_keys_conf(ngx_conf_t *cf,
    ngx_omniroute_main_conf_t *omcf);

/* at the end of init_main_conf: connections resolved, the zone added */
ngx_int_t ngx_omniroute_keys_init(ngx_conf_t *cf,
    ngx_omniroute_main_conf_t *omcf);

/* merge of omniroute_client_keys and checks of omniroute_session_leases */
char *ngx_omniroute_keys_merge(ngx_conf_t *cf,
    ngx_omniroute_loc_conf_t *prev, ngx_omniroute_loc_conf_t *conf);

/* the key whose SHA-256 is hash (constant-time compares), or NULL */
ngx_omniroute_client_key_t *ngx_omniroute_keys_find(
    ngx_omniroute_keys_conf_t *kc, u_char *hash);

/* SHA-256 of data; NGX_OK or NGX_ERROR */
ngx_int_t ngx_omniroute_sha256(u_char *data, size_t len, u_char *md);

ngx_uint_t ngx_omniroute_keys_conn_allowed(ngx_omniroute_client_key_t *key,
    ngx_omniroute_main_conf_t *omcf, ngx_omniroute_connection_t *conn);

/* the lease lifecycle endpoint (request/ngx_omniroute_lease.c) */
ngx_int_t ngx_omniroute_lease_handler(ngx_http_request_t *r);


#endif /* _NGX_OMNIROUTE_KEYS_H_INCLUDED_ */
