
/*
 * Copyright (C) ngx_omniroute authors
 *
 * Redis mirror: wire format, TTLs and the merge of remote states into the
 * store (see ngx_omniroute_redis_int.h).
 *
 * Merge rules per table (R-CLUSTER-2):
 *   breaker, conn, lockout, rejected   the engine's lattice merges
 *       (or_breaker_merge, or_cooldown_merge, or_lockout_merge): later
 *       expiry wins, terminal beats transient, counters take the maximum
 *       (no double counting), epochs make resets and deletions
 *       (tombstones) win.  Commutative and idempotent: duplicates and
 *       reordering are harmless.
 *   settings   last writer wins by the origin time of the change, ties
 *       broken by the bytes of the value (a total order, so every node
 *       picks the same winner).
 *   pin        session affinity: the later pinning wins (or_pin_merge).
 *   strategy   not mirrored: cursors and latency windows are per node;
 *       so is any table not listed in ngx_omniroute_redis_mirrored().
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute_redis_int.h"
#include "or_pin.h"
#include "or_breaker.h"
#include "or_cooldown.h"
#include "or_lockout.h"


typedef struct {
    ngx_uint_t                    table;
    u_char                       *src;
    u_char                       *merged;
    size_t                        size;
    ngx_msec_t                    retention;
    ngx_uint_t                    differs;
} ngx_omniroute_redis_merge_t;


typedef struct {
    ngx_str_t                    *key;
    u_char                       *value;
    size_t                        size;
    size_t                        max;
    ngx_uint_t                    found;
} ngx_omniroute_redis_find_t;


static ngx_uint_t ngx_omniroute_redis_merge(void *value, void *arg,
    or_msec_t *expires);
static ngx_uint_t ngx_omniroute_redis_replace(void *value, void *arg,
    or_msec_t *expires);
static void ngx_omniroute_redis_find(ngx_str_t *key, void *value,
    size_t size, void *arg);
static or_msec_t ngx_omniroute_redis_last(ngx_uint_t table, u_char *value,
    or_msec_t now);


static const char  *ngx_omniroute_redis_tables[] = {
    "breaker",
    "conn",
    "lockout",
    "rejected",
    "strategy",
    "settings",
    "pin"
};


/* aligned scratch for remote values (hiredis strings are not aligned) */
static uint64_t  ngx_omniroute_redis_src[NGX_OMNIROUTE_REDIS_VALUE_MAX / 8];


#define NGX_OMNIROUTE_REDIS_NTABLES                                          \
    (sizeof(ngx_omniroute_redis_tables) / sizeof(ngx_omniroute_redis_tables[0]))


const char *
ngx_omniroute_redis_table_name(ngx_uint_t table)
{
    if (table >= NGX_OMNIROUTE_REDIS_NTABLES) {
        return "unknown";
    }

    return ngx_omniroute_redis_tables[table];
}


ngx_int_t
ngx_omniroute_redis_table_of(u_char *name, size_t len)
{
    ngx_uint_t  i;

    for (i = 0; i < NGX_OMNIROUTE_REDIS_NTABLES; i++) {
        if (ngx_strlen(ngx_omniroute_redis_tables[i]) == len
            && ngx_strncmp(ngx_omniroute_redis_tables[i], name, len) == 0)
        {
            return i;
        }
    }

    return NGX_ERROR;
}


/* an allow-list: a table added to the store is node-local until listed */

ngx_uint_t
ngx_omniroute_redis_mirrored(ngx_uint_t table)
{
    switch (table) {

    case NGX_OMNIROUTE_T_BREAKER:
    case NGX_OMNIROUTE_T_CONN:
    case NGX_OMNIROUTE_T_LOCKOUT:
    case NGX_OMNIROUTE_T_REJECTED:
    case NGX_OMNIROUTE_T_SETTINGS:
    case NGX_OMNIROUTE_T_PIN:
        return 1;

    default:
        return 0;
    }
}


/* the value size of a table, 0 when it varies (settings) */

size_t
ngx_omniroute_redis_value_size(ngx_uint_t table)
{
    switch (table) {

    case NGX_OMNIROUTE_T_BREAKER:
        return sizeof(or_breaker_t);

    case NGX_OMNIROUTE_T_CONN:
        return sizeof(or_conn_state_t);

    case NGX_OMNIROUTE_T_LOCKOUT:
    case NGX_OMNIROUTE_T_REJECTED:
        return sizeof(or_lockout_t);

    case NGX_OMNIROUTE_T_PIN:
        return sizeof(or_pin_t);

    default:
        return 0;
    }
}


/*
 * The latest time a state refers to: it holds nothing after that.  A
 * reset or a tombstone (all times 0, a higher epoch) is news as of now.
 */

static or_msec_t
ngx_omniroute_redis_last(ngx_uint_t table, u_char *value, or_msec_t now)
{
    or_msec_t         last;
    or_breaker_t     *cb;
    or_lockout_t     *lo;
    or_conn_state_t  *cs;

    switch (table) {

    case NGX_OMNIROUTE_T_BREAKER:
        cb = (or_breaker_t *) value;
        last = ngx_max(cb->last_failure_at, cb->opened_at);
        last = ngx_max(last, cb->open_until);
        last = ngx_max(last, cb->probe_until);
        last = ngx_max(last, cb->gate_until);
        break;

    case NGX_OMNIROUTE_T_CONN:
        cs = (or_conn_state_t *) value;
        last = ngx_max(cs->until, cs->mark_at);
        last = ngx_max(last, cs->last_error_at);
        last = ngx_max(last, cs->terminal_at);
        break;

    case NGX_OMNIROUTE_T_LOCKOUT:
    case NGX_OMNIROUTE_T_REJECTED:
        lo = (or_lockout_t *) value;
        last = ngx_max(lo->until, lo->mark_at);
        last = ngx_max(last, lo->last_failure_at);
        last = ngx_max(last, lo->decay_at);
        break;

    case NGX_OMNIROUTE_T_PIN:
        last = ((or_pin_t *) value)->until;
        break;

    default:
        return OR_MSEC_NONE;
    }

    return (last > 0) ? last : now;
}


/*
 * The TTL of a Redis key (ms): the state's last time plus the retention,
 * at least a minute; terminal states and settings, which time does not
 * clear, 30 days (refreshed by every full sync).
 */

or_msec_t
ngx_omniroute_redis_ttl(ngx_omniroute_redis_main_conf_t *rmcf,
    ngx_uint_t table, u_char *value, size_t size, or_msec_t now)
{
    or_msec_t         last, ttl;
    or_conn_state_t  *cs;

    if (table == NGX_OMNIROUTE_T_CONN) {
        cs = (or_conn_state_t *) value;

        if (cs->terminal != OR_TERMINAL_NONE) {
            return NGX_OMNIROUTE_REDIS_TTL_MAX;
        }
    }

    last = ngx_omniroute_redis_last(table, value, now);

    if (last == OR_MSEC_NONE) {
        return NGX_OMNIROUTE_REDIS_TTL_MAX;
    }

    ttl = last + (or_msec_t) rmcf->retention - now;

    if (ttl < NGX_OMNIROUTE_REDIS_TTL_MIN) {
        ttl = NGX_OMNIROUTE_REDIS_TTL_MIN;
    }

    if (ttl > NGX_OMNIROUTE_REDIS_TTL_MAX) {
        ttl = NGX_OMNIROUTE_REDIS_TTL_MAX;
    }

    return ttl;
}


size_t
ngx_omniroute_redis_key(ngx_omniroute_redis_main_conf_t *rmcf, u_char *buf,
    ngx_uint_t table, ngx_str_t *key)
{
    u_char  *p;

    p = ngx_cpymem(buf, rmcf->prefix.data, rmcf->prefix.len);
    p = ngx_sprintf(p, "%s:", ngx_omniroute_redis_table_name(table));
    p = ngx_cpymem(p, key->data, key->len);

    return p - buf;
}


uint64_t
ngx_omniroute_redis_key_hash(ngx_uint_t table, ngx_str_t *key)
{
    return ((uint64_t) table << 56)
           | ((uint64_t) (key->len & 0xffffff) << 32)
           | ngx_crc32_long(key->data, key->len);
}


size_t
ngx_omniroute_redis_encode_value(u_char *buf, ngx_uint_t table,
    u_char *value, size_t size, or_msec_t time)
{
    uint32_t  n;

    buf[0] = 'O';
    buf[1] = 'R';
    buf[2] = NGX_OMNIROUTE_REDIS_VERSION;
    buf[3] = (u_char) table;
    n = (uint32_t) size;
    ngx_memcpy(buf + 4, &n, 4);
    ngx_memcpy(buf + 8, &time, 8);
    ngx_memcpy(buf + NGX_OMNIROUTE_REDIS_VALUE_HDR, value, size);

    return NGX_OMNIROUTE_REDIS_VALUE_HDR + size;
}


ngx_int_t
ngx_omniroute_redis_decode_value(u_char *data, size_t len, ngx_uint_t table,
    u_char **value, size_t *size, or_msec_t *time)
{
    uint32_t  n;

    if (len < NGX_OMNIROUTE_REDIS_VALUE_HDR
        || data[0] != 'O' || data[1] != 'R'
        || data[2] != NGX_OMNIROUTE_REDIS_VERSION
        || data[3] != table)
    {
        return NGX_ERROR;
    }

    ngx_memcpy(&n, data + 4, 4);

    if (n != len - NGX_OMNIROUTE_REDIS_VALUE_HDR
        || n == 0 || n > NGX_OMNIROUTE_REDIS_VALUE_MAX)
    {
        return NGX_ERROR;
    }

    ngx_memcpy(time, data + 8, 8);

    *value = data + NGX_OMNIROUTE_REDIS_VALUE_HDR;
    *size = n;

    return NGX_OK;
}


size_t
ngx_omniroute_redis_encode_msg(u_char *buf, ngx_str_t *node, ngx_uint_t op,
    ngx_uint_t table, ngx_str_t *key, u_char *value, size_t size,
    or_msec_t time)
{
    u_char    *p;
    uint32_t   n;

    buf[0] = 'O';
    buf[1] = 'R';
    buf[2] = NGX_OMNIROUTE_REDIS_VERSION;
    buf[3] = (u_char) op;
    buf[4] = (u_char) table;
    buf[5] = (u_char) node->len;
    buf[6] = (u_char) (key ? key->len : 0);
    buf[7] = 0;
    ngx_memcpy(buf + 8, &time, 8);
    n = (uint32_t) size;
    ngx_memcpy(buf + 16, &n, 4);
    ngx_memzero(buf + 20, 4);

    p = buf + NGX_OMNIROUTE_REDIS_MSG_HDR;
    p = ngx_cpymem(p, node->data, node->len);

    if (key) {
        p = ngx_cpymem(p, key->data, key->len);
    }

    if (size) {
        p = ngx_cpymem(p, value, size);
    }

    return p - buf;
}


ngx_int_t
ngx_omniroute_redis_decode_msg(u_char *data, size_t len,
    ngx_omniroute_redis_msg_t *msg)
{
    u_char    *p;
    uint32_t   n;

    if (len < NGX_OMNIROUTE_REDIS_MSG_HDR
        || data[0] != 'O' || data[1] != 'R'
        || data[2] != NGX_OMNIROUTE_REDIS_VERSION
        || data[3] > NGX_OMNIROUTE_REDIS_OP_HEARTBEAT
        || data[4] >= NGX_OMNIROUTE_T_COUNT)
    {
        return NGX_ERROR;
    }

    msg->op = data[3];
    msg->table = data[4];
    msg->node.len = data[5];
    msg->key.len = data[6];
    ngx_memcpy(&msg->time, data + 8, 8);
    ngx_memcpy(&n, data + 16, 4);
    msg->size = n;

    if (msg->size > NGX_OMNIROUTE_REDIS_VALUE_MAX
        || NGX_OMNIROUTE_REDIS_MSG_HDR + msg->node.len + msg->key.len
           + msg->size != len)
    {
        return NGX_ERROR;
    }

    p = data + NGX_OMNIROUTE_REDIS_MSG_HDR;
    msg->node.data = p;
    p += msg->node.len;
    msg->key.data = p;
    p += msg->key.len;
    msg->value = p;

    return NGX_OK;
}


ngx_int_t
ngx_omniroute_redis_apply(ngx_omniroute_redis_link_t *link, ngx_uint_t table,
    ngx_str_t *key, u_char *value, size_t size, or_msec_t time,
    u_char *merged, or_msec_t *merged_time, ngx_uint_t *changed)
{
    u_char                       *src;
    ngx_int_t                     rc;
    or_msec_t                     local_time;
    ngx_omniroute_redis_merge_t   m;

    *changed = 0;
    *merged_time = time;

    if (!ngx_omniroute_redis_mirrored(table)
        || key->len == 0 || key->len > NGX_OMNIROUTE_KEY_MAX
        || size == 0 || size > NGX_OMNIROUTE_REDIS_VALUE_MAX)
    {
        return NGX_ERROR;
    }

    src = (u_char *) ngx_omniroute_redis_src;
    ngx_memcpy(src, value, size);

    if (table != NGX_OMNIROUTE_T_SETTINGS) {

        if (size != ngx_omniroute_redis_value_size(table)) {
            return NGX_ERROR;
        }

        m.table = table;
        m.src = src;
        m.merged = merged;
        m.size = size;
        m.retention = link->rmcf->retention;
        m.differs = 0;

        rc = ngx_omniroute_store_update(link->store, table, key, size,
                                        ngx_omniroute_redis_merge, &m, 1);
        if (rc == NGX_ERROR) {
            return NGX_ERROR;
        }

        if (rc == NGX_DECLINED && !m.differs) {
            /* unchanged and equal; also when a bottom value was dropped */
            ngx_memcpy(merged, src, size);
        }

        *changed = (rc == NGX_OK);

        return m.differs ? NGX_DECLINED : NGX_OK;
    }

    /* settings: last writer wins */

    if (size % sizeof(uint64_t)) {
        return NGX_ERROR;
    }

    local_time = ngx_omniroute_redis_version(link->rmcf, table, key);

    if (ngx_omniroute_store_read(link->store, table, key, merged, size)
        == NGX_OK)
    {
        if (ngx_memcmp(merged, src, size) == 0) {
            if (time > local_time) {
                ngx_omniroute_redis_set_version(link->rmcf, table, key, time);
            }

            return NGX_OK;
        }

        if (local_time > time
            || (local_time == time && ngx_memcmp(merged, src, size) > 0))
        {
            *merged_time = local_time;
            return NGX_DECLINED;
        }
    }

    m.table = table;
    m.src = src;
    m.size = size;

    rc = ngx_omniroute_store_update(link->store, table, key, size,
                                    ngx_omniroute_redis_replace, &m, 1);
    if (rc == NGX_ERROR) {
        return NGX_ERROR;
    }

    ngx_memcpy(merged, src, size);
    ngx_omniroute_redis_set_version(link->rmcf, table, key, time);

    *changed = (rc == NGX_OK);

    return NGX_OK;
}


static ngx_uint_t
ngx_omniroute_redis_merge(void *value, void *arg, or_msec_t *expires)
{
    ngx_omniroute_redis_merge_t *m = arg;

    int        changed, equal;
    or_msec_t  e;

    switch (m->table) {

    case NGX_OMNIROUTE_T_BREAKER:
        changed = or_breaker_merge(value, (or_breaker_t *) m->src);
        equal = or_breaker_equal(value, (or_breaker_t *) m->src);
        break;

    case NGX_OMNIROUTE_T_CONN:
        changed = or_cooldown_merge(value, (or_conn_state_t *) m->src);
        equal = or_cooldown_equal(value, (or_conn_state_t *) m->src);
        break;

    case NGX_OMNIROUTE_T_PIN:
        changed = or_pin_merge(value, (or_pin_t *) m->src);
        equal = (ngx_memcmp(value, m->src, sizeof(or_pin_t)) == 0);

        if (changed) {
            *expires = ((or_pin_t *) value)->until;
        }

        break;

    default: /* lockout, rejected */
        changed = or_lockout_merge(value, (or_lockout_t *) m->src);
        equal = or_lockout_equal(value, (or_lockout_t *) m->src);

        if (changed) {
            /* as the request path does: kept a while after it expires */
            e = ngx_omniroute_redis_last(m->table, value,
                                         ngx_omniroute_now())
                + (or_msec_t) m->retention;

            if (*expires == 0 || e > *expires) {
                *expires = e;
            }
        }

        break;
    }

    ngx_memcpy(m->merged, value, m->size);
    m->differs = !equal;

    return changed ? NGX_OMNIROUTE_CHANGED : NGX_OMNIROUTE_UNCHANGED;
}


static ngx_uint_t
ngx_omniroute_redis_replace(void *value, void *arg, or_msec_t *expires)
{
    ngx_omniroute_redis_merge_t *m = arg;

    if (ngx_memcmp(value, m->src, m->size) == 0) {
        return NGX_OMNIROUTE_UNCHANGED;
    }

    ngx_memcpy(value, m->src, m->size);

    return NGX_OMNIROUTE_CHANGED;
}


/*
 * The current value of a local record into value (room for
 * NGX_OMNIROUTE_REDIS_VALUE_MAX bytes); settings records have no fixed
 * size and are looked up by a visit of their (small) table.
 */

ngx_int_t
ngx_omniroute_redis_read(ngx_omniroute_redis_link_t *link, ngx_uint_t table,
    ngx_str_t *key, u_char *value, size_t *size, ngx_pool_t *pool)
{
    size_t                      n;
    ngx_omniroute_redis_find_t  f;

    n = ngx_omniroute_redis_value_size(table);

    if (n) {
        *size = n;
        return ngx_omniroute_store_read(link->store, table, key, value, n);
    }

    f.key = key;
    f.value = value;
    f.size = 0;
    f.max = NGX_OMNIROUTE_REDIS_VALUE_MAX;
    f.found = 0;

    (void) ngx_omniroute_store_visit(link->store, table,
                                     ngx_omniroute_redis_find, &f, pool);

    if (!f.found) {
        return NGX_DECLINED;
    }

    *size = f.size;

    return NGX_OK;
}


static void
ngx_omniroute_redis_find(ngx_str_t *key, void *value, size_t size, void *arg)
{
    ngx_omniroute_redis_find_t *f = arg;

    if (f->found
        || key->len != f->key->len
        || ngx_memcmp(key->data, f->key->data, key->len) != 0
        || size > f->max)
    {
        return;
    }

    ngx_memcpy(f->value, value, size);
    f->size = size;
    f->found = 1;
}


/*
 * Last-writer-wins versions, in the mirror's own shared zone so that they
 * survive a reload; 0 when unknown.
 */

or_msec_t
ngx_omniroute_redis_version(ngx_omniroute_redis_main_conf_t *rmcf,
    ngx_uint_t table, ngx_str_t *key)
{
    uint32_t                        hash;
    or_msec_t                       time;
    ngx_uint_t                      i;
    ngx_slab_pool_t                *shpool;
    ngx_omniroute_redis_version_t  *v;

    if (rmcf->sh == NULL) {
        return 0;
    }

    hash = (uint32_t) ngx_omniroute_redis_key_hash(table, key)
           ^ (uint32_t) table;
    shpool = (ngx_slab_pool_t *) rmcf->shm_zone->shm.addr;
    v = rmcf->sh->versions;
    time = 0;

    ngx_shmtx_lock(&shpool->mutex);

    for (i = 0; i < NGX_OMNIROUTE_REDIS_VERSIONS; i++) {
        if (v[i].len == key->len + 1 && v[i].hash == hash) {
            time = v[i].time;
            break;
        }
    }

    ngx_shmtx_unlock(&shpool->mutex);

    return time;
}


void
ngx_omniroute_redis_set_version(ngx_omniroute_redis_main_conf_t *rmcf,
    ngx_uint_t table, ngx_str_t *key, or_msec_t time)
{
    uint32_t                        hash;
    ngx_uint_t                      i, oldest;
    ngx_slab_pool_t                *shpool;
    ngx_omniroute_redis_version_t  *v;

    if (rmcf->sh == NULL) {
        return;
    }

    hash = (uint32_t) ngx_omniroute_redis_key_hash(table, key)
           ^ (uint32_t) table;
    shpool = (ngx_slab_pool_t *) rmcf->shm_zone->shm.addr;
    v = rmcf->sh->versions;
    oldest = 0;

    ngx_shmtx_lock(&shpool->mutex);

    for (i = 0; i < NGX_OMNIROUTE_REDIS_VERSIONS; i++) {

        if (v[i].len == key->len + 1 && v[i].hash == hash) {
            oldest = i;
            break;
        }

        if (v[i].len == 0) {
            oldest = i;
            continue;
        }

        if (v[oldest].len != 0 && v[i].time < v[oldest].time) {
            oldest = i;
        }
    }

    v[oldest].hash = hash;
    v[oldest].len = (uint32_t) key->len + 1;
    v[oldest].time = time;

    ngx_shmtx_unlock(&shpool->mutex);
}
