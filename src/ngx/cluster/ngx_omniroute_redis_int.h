
/*
 * Copyright (C) ngx_omniroute authors
 *
 * Internals of the Redis mirror (see ngx_omniroute_redis_stats.h), shared by
 * ngx_omniroute_redis_module.c (configuration, process hooks, variables),
 * ngx_omniroute_redis_mirror.c (link state machine, sync),
 * ngx_omniroute_redis_conn.c (the connection machine of the mirror, the
 * leases and the budgets), ngx_omniroute_redis_adapter.c (hiredis on the
 * nginx event loop), ngx_omniroute_redis_budget.c (client key budgets),
 * ngx_omniroute_redis_state.c (wire format, validation, merges) and, in a
 * test build only, ngx_omniroute_redis_debug.c (omniroute_redis_debug).
 *
 * Wire format: src/core/or_wire.h (values and messages);
 *
 *   key      <prefix><table>:<store key>, e.g. "omniroute:breaker:alpha"
 *   epoch    <prefix>epoch: a token set by the first node that finds it
 *            missing; gone or changed means Redis lost the mirror's keys
 *
 * "time" is the origin node's clock when the change was made: it orders
 * last-writer-wins tables (settings) and measures the propagation lag.
 * Everything read from Redis is untrusted: framing is checked by the
 * or_wire decoders, states by the engine's validators (or_*_valid()) and
 * settings records by ngx_omniroute_redis_check(); a bad record is
 * dropped, counted ("rejected") and logged at most once per log_interval.
 */


#ifndef _NGX_OMNIROUTE_REDIS_INT_H_INCLUDED_
#define _NGX_OMNIROUTE_REDIS_INT_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <hiredis/hiredis.h>
#include <hiredis/async.h>
#include <jansson.h>

#include "ngx_omniroute.h"
#include "ngx_omniroute_redis_stats.h"
#include "or_wire.h"


#define NGX_OMNIROUTE_REDIS_VERSION       OR_WIRE_VERSION

#define NGX_OMNIROUTE_REDIS_OP_SET        OR_WIRE_OP_SET
#define NGX_OMNIROUTE_REDIS_OP_DELETE     OR_WIRE_OP_DELETE
#define NGX_OMNIROUTE_REDIS_OP_HEARTBEAT  OR_WIRE_OP_HEARTBEAT

#define NGX_OMNIROUTE_REDIS_VALUE_HDR     OR_WIRE_VALUE_HDR
#define NGX_OMNIROUTE_REDIS_MSG_HDR       OR_WIRE_MSG_HDR
#define NGX_OMNIROUTE_REDIS_VALUE_MAX     OR_WIRE_VALUE_MAX
#define NGX_OMNIROUTE_REDIS_NODE_MAX      64
#define NGX_OMNIROUTE_REDIS_PREFIX_MAX    64
#define NGX_OMNIROUTE_REDIS_TABLE_MAX     16    /* longest table name + ':' */
#define NGX_OMNIROUTE_REDIS_RKEY_MAX                                         \
    (NGX_OMNIROUTE_REDIS_PREFIX_MAX + NGX_OMNIROUTE_REDIS_TABLE_MAX          \
     + NGX_OMNIROUTE_KEY_MAX)
#define NGX_OMNIROUTE_REDIS_MSG_MAX                                          \
    (NGX_OMNIROUTE_REDIS_MSG_HDR + NGX_OMNIROUTE_REDIS_NODE_MAX              \
     + NGX_OMNIROUTE_KEY_MAX + NGX_OMNIROUTE_REDIS_VALUE_MAX)

#define NGX_OMNIROUTE_REDIS_TTL_MAX       (30LL * 86400 * 1000)   /* 30 d */
#define NGX_OMNIROUTE_REDIS_TTL_MIN       (60LL * 1000)           /* 1 min */

/* last-writer-wins versions of settings records kept in the shared zone */
#define NGX_OMNIROUTE_REDIS_VERSIONS      256

/* omniroute_redis_debug's settings records (test build): a string */
#define NGX_OMNIROUTE_REDIS_DEBUG_VALUE   64

#define NGX_OMNIROUTE_REDIS_KEY_LOG       64    /* key bytes in a log */
#define NGX_OMNIROUTE_REDIS_EPOCH_MAX     128   /* epoch token bytes */

#define NGX_OMNIROUTE_REDIS_BATCH         256   /* events read per pass */
#define NGX_OMNIROUTE_REDIS_SCAN_COUNT    512


typedef struct {
    uint32_t                      hash;         /* crc32 of table + key */
    uint32_t                      len;          /* 0: free slot */
    or_msec_t                     time;
} ngx_omniroute_redis_version_t;


typedef struct {
    ngx_omniroute_redis_stats_t   stats;
    ngx_omniroute_redis_version_t versions[NGX_OMNIROUTE_REDIS_VERSIONS];
} ngx_omniroute_redis_sh_t;


/* an address: a sentinel's, or the master's a sentinel named */
typedef struct {
    u_char                        host[NGX_INET6_ADDRSTRLEN + 1];
    ngx_int_t                     port;
} ngx_omniroute_redis_addr_t;


typedef struct {
    ngx_str_t                     addr;         /* as configured */
    ngx_str_t                     file;         /* where, for nginx -t */
    ngx_uint_t                    line;
    u_char                       *host;         /* NUL-terminated IP */
    ngx_int_t                     port;
    u_char                       *unix_path;    /* NUL-terminated, or NULL */
    ngx_str_t                     user;         /* ACL user, or empty */
    ngx_str_t                     password;     /* never logged */
    ngx_array_t                  *sentinels;    /* ..._redis_addr_t */
    ngx_str_t                     master;       /* the sentinels' name */
    ngx_flag_t                    tls;
    ngx_str_t                     tls_ca;       /* files, for hiredis_ssl */
    ngx_str_t                     tls_cert;
    ngx_str_t                     tls_key;
    ngx_str_t                     tls_name;     /* SNI */
    void                         *ssl;          /* redisSSLContext */
    ngx_int_t                     db;
    ngx_str_t                     prefix;
    ngx_str_t                     node;
    ngx_str_t                     channel;      /* prefix "events:" db */
    ngx_msec_t                    timeout;      /* connect, reply */
    ngx_msec_t                    interval;     /* event ring poll */
    ngx_msec_t                    keepalive;    /* heartbeat period */
    ngx_msec_t                    retention;    /* kept after expiry */
    ngx_msec_t                    resync;       /* full load period; 0 off */
    ngx_msec_t                    backoff_min;
    ngx_msec_t                    backoff_max;
    ngx_msec_t                    log_interval;
    ngx_uint_t                    queue;        /* commands in flight */
    ngx_shm_zone_t               *shm_zone;
    ngx_omniroute_redis_sh_t     *sh;
} ngx_omniroute_redis_main_conf_t;


typedef struct ngx_omniroute_redis_link_s  ngx_omniroute_redis_link_t;
typedef struct ngx_omniroute_redis_machine_s  ngx_omniroute_redis_machine_t;


/*
 * What the hiredis adapter (redis_adapter.c) knows of a connection: the
 * first members of ngx_omniroute_redis_conn_t.
 */
#define NGX_OMNIROUTE_REDIS_IO                                               \
    redisAsyncContext            *ac;                                        \
    ngx_connection_t             *c;                                         \
    ngx_uint_t                    ready;        /* handshake done */

typedef struct {
    NGX_OMNIROUTE_REDIS_IO
} ngx_omniroute_redis_io_t;


/* one hiredis async context wrapped in an nginx connection */
typedef struct {
    NGX_OMNIROUTE_REDIS_IO
    ngx_omniroute_redis_machine_t  *machine;
    void                         *link;         /* the machine's user */
    const char                   *name;
    ngx_uint_t                    pending;      /* replies awaited */
    ngx_msec_t                    progress;     /* last reply, first send */
} ngx_omniroute_redis_conn_t;


/*
 * The connection machine (ngx_omniroute_redis_conn.c), one per user: the
 * mirror (worker 0), the leases (every worker) and the client key budgets
 * (worker 0, no channel).  It asks the sentinels
 * for the master (sentinel=), opens the command connection and, with a
 * channel, the subscriber; does AUTH ([user] password), SELECT and, with
 * sentinels, ROLE; follows +switch-master; on any failure frees them all
 * and retries after a backoff with jitter.  What a user adds:
 *
 *   probe    sends the command connection's last handshake command (PING,
 *            TIME); its reply handler calls ngx_omniroute_redis_conn_ready()
 *            (ngx_omniroute_redis_conn_ping(): a PING, ready on any
 *            reply but an error)
 *   up       both connections are ready (the machine is UP)
 *   down     the machine failed (reason, never a password): called before
 *            the connections are freed; hiredis then answers what is
 *            pending with NULL replies
 *   message  a message on the channel
 */

#define NGX_OMNIROUTE_REDIS_M_DOWN        0
#define NGX_OMNIROUTE_REDIS_M_CONNECTING  1
#define NGX_OMNIROUTE_REDIS_M_UP          2

typedef void (*ngx_omniroute_redis_probe_pt)(ngx_omniroute_redis_conn_t *rc);
typedef void (*ngx_omniroute_redis_up_pt)(ngx_omniroute_redis_machine_t *m);
typedef void (*ngx_omniroute_redis_down_pt)(ngx_omniroute_redis_machine_t *m,
    u_char *reason, size_t len);
typedef void (*ngx_omniroute_redis_message_pt)(
    ngx_omniroute_redis_machine_t *m, u_char *data, size_t len);

/*
 * A keyspace load (ngx_omniroute_redis_conn_load()): SCAN MATCH pattern,
 * then MGET of each batch of keys; batch gets the keys and their values
 * (NULL or not strings: gone since the SCAN) and returns NGX_OK to go on
 * (anything else: it failed the machine); loaded runs after the last
 * batch.  A failure of the machine ends the load without loaded.
 */
typedef ngx_int_t (*ngx_omniroute_redis_batch_pt)(
    ngx_omniroute_redis_machine_t *m, ngx_str_t *keys, redisReply **values,
    ngx_uint_t n);
typedef void (*ngx_omniroute_redis_loaded_pt)(
    ngx_omniroute_redis_machine_t *m);

struct ngx_omniroute_redis_machine_s {
    ngx_omniroute_redis_main_conf_t  *rmcf;
    ngx_log_t                    *log;
    void                         *link;         /* the user */

    ngx_omniroute_redis_conn_t    cmd;
    ngx_omniroute_redis_conn_t    sub;          /* with a channel */
    ngx_omniroute_redis_conn_t    sentinel;     /* with sentinels */
    ngx_str_t                     channel;      /* empty: no subscriber */

    ngx_omniroute_redis_probe_pt  probe;
    ngx_omniroute_redis_up_pt     up;
    ngx_omniroute_redis_down_pt   down;
    ngx_omniroute_redis_message_pt  message;

    ngx_uint_t                    state;
    ngx_msec_t                    state_at;
    ngx_msec_t                    retry_at;
    ngx_msec_t                    backoff;      /* the user resets it */

    /* a keyspace load on cmd */
    ngx_uint_t                    loading;
    ngx_pool_t                   *load_pool;    /* the user's */
    ngx_array_t                   load_keys;    /* ngx_str_t, a batch */
    ngx_str_t                     load_skip;    /* a key not to read */
    ngx_omniroute_redis_batch_pt  batch;
    ngx_omniroute_redis_loaded_pt  loaded;
    u_char                        cursor[32];
    size_t                        pattern_len;
    u_char                        pattern[NGX_OMNIROUTE_REDIS_PREFIX_MAX + 16];

    ngx_omniroute_redis_addr_t    master;       /* where cmd and sub go */
    ngx_uint_t                    next;         /* the sentinel to ask */
    ngx_uint_t                    switched;     /* retry at once */

    ngx_uint_t                    exiting;
};


void ngx_omniroute_redis_conn_init(ngx_omniroute_redis_machine_t *m,
    ngx_omniroute_redis_main_conf_t *rmcf, ngx_log_t *log, void *link,
    const char *name);
void ngx_omniroute_redis_conn_open(ngx_omniroute_redis_machine_t *m);
void ngx_omniroute_redis_conn_tick(ngx_omniroute_redis_machine_t *m);
void ngx_cdecl ngx_omniroute_redis_conn_fail(ngx_omniroute_redis_machine_t *m,
    const char *fmt, ...);
void ngx_omniroute_redis_conn_close(ngx_omniroute_redis_machine_t *m);
void ngx_omniroute_redis_conn_ready(ngx_omniroute_redis_conn_t *rc);
void ngx_omniroute_redis_conn_ping(ngx_omniroute_redis_conn_t *rc);
ngx_int_t ngx_omniroute_redis_conn_send(ngx_omniroute_redis_conn_t *rc,
    redisCallbackFn *fn, void *data, int argc, const char **argv,
    const size_t *argvlen);
void ngx_omniroute_redis_conn_replied(ngx_omniroute_redis_conn_t *rc);
ngx_int_t ngx_omniroute_redis_conn_load(ngx_omniroute_redis_machine_t *m,
    ngx_str_t *prefix, const char *match, ngx_str_t *skip, ngx_pool_t *pool,
    ngx_omniroute_redis_batch_pt batch, ngx_omniroute_redis_loaded_pt loaded);
ngx_int_t ngx_omniroute_redis_conn_addr(u_char *host, size_t len,
    ngx_int_t port, ngx_omniroute_redis_addr_t *addr);


/* a record to push during a full sync (its value is read when sent) */
typedef struct {
    ngx_uint_t                    table;
    ngx_str_t                     key;
} ngx_omniroute_redis_record_t;


/* a record found in Redis by a full load, equal to ours afterwards */
typedef struct {
    uint64_t                      key;          /* table, len, crc32 */
    uint32_t                      crc;          /* of our merged value */
} ngx_omniroute_redis_seen_t;


struct ngx_omniroute_redis_link_s {
    ngx_omniroute_redis_main_conf_t  *rmcf;
    ngx_omniroute_store_t        *store;
    ngx_omniroute_redis_stats_t  *stats;
    ngx_log_t                    *log;

    ngx_omniroute_redis_machine_t  m;           /* cmd, sub */

    ngx_event_t                   tick;

    ngx_uint_t                    state;
    ngx_msec_t                    state_at;     /* ngx_current_msec */
    ngx_msec_t                    heartbeat_at;
    ngx_msec_t                    sub_seen;
    ngx_msec_t                    resync_at;

    uint64_t                      cursor;       /* next event to read */
    ngx_uint_t                    draining;     /* publish local events */
    ngx_uint_t                    dirty;        /* events lost: resync */

    /* full sync: SCAN + MGET + merge, then push what Redis lacks */
    ngx_uint_t                    syncing;
    ngx_uint_t                    pushing;
    ngx_pool_t                   *sync_pool;
    ngx_array_t                   seen;         /* ..._redis_seen_t */
    ngx_uint_t                    loaded;
    ngx_array_t                   push;         /* ..._redis_record_t */
    ngx_uint_t                    push_next;
    ngx_uint_t                    visit_table;

    /* log rate limits: [0] errors, [1] notices, [2] rejected records */
    ngx_msec_t                    log_at[3];
    ngx_uint_t                    logged[3];
    ngx_uint_t                    log_suppressed[3];

    /* the epoch key: gone or changed means Redis lost the state */
    ngx_str_t                     epoch_key;    /* <prefix>epoch */
    ngx_msec_t                    epoch_at;     /* next check */
    ngx_uint_t                    epoch_known;
    size_t                        epoch_len;
    u_char                        epoch[NGX_OMNIROUTE_REDIS_EPOCH_MAX];

    ngx_uint_t                    exiting;

    /* scratch buffers */
    u_char                       *rkey;         /* Redis key */
    u_char                       *rvalue;       /* encoded value */
    u_char                       *msg;          /* encoded message */
    u_char                       *local;        /* a local value, aligned */
    u_char                       *merged;       /* a merged value, aligned */
    ngx_omniroute_event_t        *events;       /* a batch of the ring */
};


extern ngx_module_t  ngx_http_omniroute_redis_module;


/* ngx_omniroute_redis_module.c */
json_t *ngx_omniroute_redis_stats_json(void);

#if (NGX_OMNIROUTE_TEST)
/* ngx_omniroute_redis_debug.c */
char *ngx_omniroute_redis_debug(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
#endif

/* ngx_omniroute_redis_adapter.c */
ngx_int_t ngx_omniroute_redis_attach(void *conn, redisAsyncContext *ac,
    ngx_log_t *log);

/* ngx_omniroute_redis_mirror.c */
ngx_int_t ngx_omniroute_redis_mirror_init(ngx_cycle_t *cycle,
    ngx_omniroute_redis_main_conf_t *rmcf, ngx_omniroute_store_t *store);
void ngx_omniroute_redis_mirror_exit(ngx_cycle_t *cycle);
void ngx_omniroute_redis_push(ngx_omniroute_redis_link_t *link,
    ngx_uint_t table, ngx_str_t *key, ngx_uint_t op, u_char *value,
    size_t size, or_msec_t time);
void ngx_omniroute_redis_reject(ngx_omniroute_redis_link_t *link,
    ngx_uint_t table, ngx_str_t *key, const char *why);

/* ngx_omniroute_redis_state.c */
const char *ngx_omniroute_redis_table_name(ngx_uint_t table);
ngx_int_t ngx_omniroute_redis_table_of(u_char *name, size_t len);
ngx_uint_t ngx_omniroute_redis_mirrored(ngx_uint_t table);
size_t ngx_omniroute_redis_value_size(ngx_uint_t table);
or_msec_t ngx_omniroute_redis_ttl(ngx_omniroute_redis_main_conf_t *rmcf,
    ngx_uint_t table, u_char *value, size_t size, or_msec_t now);
size_t ngx_omniroute_redis_key(ngx_omniroute_redis_main_conf_t *rmcf,
    u_char *buf, ngx_uint_t table, ngx_str_t *key);
size_t ngx_omniroute_redis_encode_value(u_char *buf, ngx_uint_t table,
    u_char *value, size_t size, or_msec_t time);
ngx_int_t ngx_omniroute_redis_decode_value(u_char *data, size_t len,
    ngx_uint_t table, u_char **value, size_t *size, or_msec_t *time);
size_t ngx_omniroute_redis_encode_msg(u_char *buf, ngx_str_t *node,
    ngx_uint_t op, ngx_uint_t table, ngx_str_t *key, u_char *value,
    size_t size, or_msec_t time);

typedef struct {
    ngx_uint_t                    op;
    ngx_uint_t                    table;
    ngx_str_t                     node;
    ngx_str_t                     key;
    u_char                       *value;
    size_t                        size;
    or_msec_t                     time;
} ngx_omniroute_redis_msg_t;

ngx_int_t ngx_omniroute_redis_decode_msg(u_char *data, size_t len,
    ngx_omniroute_redis_msg_t *msg);

/*
 * Why a remote record (table, key, state of size bytes, aligned, written
 * at its origin's "time") must not be merged, or NULL when it may.
 */
const char *ngx_omniroute_redis_check(ngx_uint_t table, ngx_str_t *key,
    u_char *value, size_t size, or_msec_t time, or_msec_t now);

/*
 * Merge a remote value into the store.  Returns NGX_OK when the merged
 * value equals the remote one, NGX_DECLINED when ours knows more (then
 * *merged holds it: write it back), NGX_ABORT when the record fails
 * ngx_omniroute_redis_check() (*why names the bad field: the caller counts
 * and logs it, ngx_omniroute_redis_reject()), NGX_ERROR on bad data.
 * *changed tells whether our state changed.
 */
ngx_int_t ngx_omniroute_redis_apply(ngx_omniroute_redis_link_t *link,
    ngx_uint_t table, ngx_str_t *key, u_char *value, size_t size,
    or_msec_t time, u_char *merged, or_msec_t *merged_time,
    ngx_uint_t *changed, const char **why);

/* the current value of a local record; NGX_DECLINED when there is none */
ngx_int_t ngx_omniroute_redis_read(ngx_omniroute_redis_link_t *link,
    ngx_uint_t table, ngx_str_t *key, u_char *value, size_t *size,
    ngx_pool_t *pool);

/* last-writer-wins versions (settings) */
or_msec_t ngx_omniroute_redis_version(ngx_omniroute_redis_main_conf_t *rmcf,
    ngx_uint_t table, ngx_str_t *key);
void ngx_omniroute_redis_set_version(ngx_omniroute_redis_main_conf_t *rmcf,
    ngx_uint_t table, ngx_str_t *key, or_msec_t time);

uint64_t ngx_omniroute_redis_key_hash(ngx_uint_t table, ngx_str_t *key);


#endif /* _NGX_OMNIROUTE_REDIS_INT_H_INCLUDED_ */
