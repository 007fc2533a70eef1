
/*
 * Copyright (C) ngx_omniroute authors
 *
 * Redis mirror: wire format (or_wire.h), validation of remote records,
 * TTLs and the merge of remote states into the store (see
 * ngx_omniroute_redis_int.h).
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
 *   lane       the usage-limit lane of a connection: the later change
 *       wins the record (or_lane_merge).
 *   strategy   not mirrored: cursors and latency windows are per node;
 *       so is any table not listed in ngx_omniroute_redis_mirrored().
 *
 * Before a remote record is stored it must name what this node has
 * (ngx_omniroute_redis_known()): a provider, a connection, both for a
 * lockout, a pinned connection.  A record for a name this node does not
 * have is rejected like an invalid one (counted, logged at most once per
 * log_interval), never stored and so never written back: what remote data
 * may occupy in the zone is bounded by this node's configuration.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute_redis_int.h"
#include "ngx_omniroute_settings.h"
#include "or_pin.h"
#include "or_breaker.h"
#include "or_classify.h"
#include "or_cooldown.h"
#include "or_lockout.h"
#include "or_lane.h"
#include "or_pace.h"


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
static const char *ngx_omniroute_redis_check_settings(ngx_str_t *key,
    u_char *value, size_t size);
static const char *ngx_omniroute_redis_check_override(
    ngx_omniroute_setting_desc_t *table,
    ngx_omniroute_settings_override_t *ov);
static const char *ngx_omniroute_redis_check_rules(u_char *value,
    size_t size);
static const char *ngx_omniroute_redis_known(ngx_uint_t table,
    ngx_str_t *key, u_char *value, size_t size);
static ngx_uint_t ngx_omniroute_redis_provider(ngx_omniroute_main_conf_t *omcf,
    u_char *name, size_t len);
static ngx_uint_t ngx_omniroute_redis_connection(
    ngx_omniroute_main_conf_t *omcf, u_char *name, size_t len);


static const char  *ngx_omniroute_redis_tables[] = {
    "breaker",
    "conn",
    "lockout",
    "rejected",
    "strategy",
    "settings",
    "pin",
    "lease",                /* not mirrored: Redis has its own */
    "lane",
    "pace"
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
    case NGX_OMNIROUTE_T_LANE:
    case NGX_OMNIROUTE_T_PACE:
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

    case NGX_OMNIROUTE_T_LANE:
        return sizeof(or_lane_t);

    case NGX_OMNIROUTE_T_PACE:
        return sizeof(or_pace_t);

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

    case NGX_OMNIROUTE_T_LANE:
        last = or_lane_expires((or_lane_t *) value, 0);
        break;

    case NGX_OMNIROUTE_T_PACE:
        last = ngx_max(((or_pace_t *) value)->until,
                       ((or_pace_t *) value)->since);
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
    return or_wire_encode_value(buf, (unsigned) table, value, size, time);
}


ngx_int_t
ngx_omniroute_redis_decode_value(u_char *data, size_t len, ngx_uint_t table,
    u_char **value, size_t *size, or_msec_t *time)
{
    const uint8_t  *v;

    if (or_wire_decode_value(data, len, (unsigned) table, &v, size, time)
        != 0)
    {
        return NGX_ERROR;
    }

    *value = (u_char *) v;

    return NGX_OK;
}


size_t
ngx_omniroute_redis_encode_msg(u_char *buf, ngx_str_t *node, ngx_uint_t op,
    ngx_uint_t table, ngx_str_t *key, u_char *value, size_t size,
    or_msec_t time)
{
    return or_wire_encode_msg(buf, node->data, node->len, (unsigned) op,
                              (unsigned) table, key ? key->data : NULL,
                              key ? key->len : 0, value, size, time);
}


ngx_int_t
ngx_omniroute_redis_decode_msg(u_char *data, size_t len,
    ngx_omniroute_redis_msg_t *msg)
{
    or_wire_msg_t  m;

    if (or_wire_decode_msg(data, len, NGX_OMNIROUTE_T_COUNT, &m) != 0) {
        return NGX_ERROR;
    }

    msg->op = m.op;
    msg->table = m.table;
    msg->node.data = (u_char *) m.node;
    msg->node.len = m.node_len;
    msg->key.data = (u_char *) m.key;
    msg->key.len = m.key_len;
    msg->value = (u_char *) m.value;
    msg->size = m.size;
    msg->time = m.time;

    return NGX_OK;
}


/*
 * Remote records are untrusted (a compromised or buggy peer, anyone who
 * can write to Redis): a state is merged only when its table's validator
 * accepts it, and its origin time is a real one (it orders settings and
 * measures the lag).  The answer names the field, never its value.
 */

const char *
ngx_omniroute_redis_check(ngx_uint_t table, ngx_str_t *key, u_char *value,
    size_t size, or_msec_t time, or_msec_t now)
{
    if (time < 0 || time > now + OR_VALID_SKEW_MS) {
        return "origin time";
    }

    switch (table) {

    case NGX_OMNIROUTE_T_BREAKER:
        return or_breaker_valid(value, size, now);

    case NGX_OMNIROUTE_T_CONN:
        return or_cooldown_valid(value, size, now);

    case NGX_OMNIROUTE_T_LOCKOUT:
    case NGX_OMNIROUTE_T_REJECTED:
        return or_lockout_valid(value, size, now);

    case NGX_OMNIROUTE_T_PIN:
        return or_pin_valid(value, size, now);

    case NGX_OMNIROUTE_T_LANE:
        return or_lane_valid(value, size, now);

    case NGX_OMNIROUTE_T_PACE:
        return or_pace_valid(value, size, now);

    case NGX_OMNIROUTE_T_SETTINGS:
        return ngx_omniroute_redis_check_settings(key, value, size);

    default:
        return "table";
    }
}


/*
 * Settings records are what the admin API writes (ngx_omniroute_settings.h):
 * "global" and "provider:<name>" overrides, "rules:<name>" error rules.
 * Each field is checked against the bounds the API enforces, taken from
 * the same descriptor tables, so a record the API could not have written
 * is refused.
 */

static const char *
ngx_omniroute_redis_check_settings(ngx_str_t *key, u_char *value,
    size_t size)
{
    ngx_omniroute_setting_desc_t  *table;

    if (key->len == 6 && ngx_strncmp(key->data, "global", 6) == 0) {
        table = ngx_omniroute_global_settings;

    } else if (key->len > 9 && ngx_strncmp(key->data, "provider:", 9) == 0) {
        table = ngx_omniroute_provider_settings;

    } else if (key->len > 6 && ngx_strncmp(key->data, "rules:", 6) == 0) {
        return ngx_omniroute_redis_check_rules(value, size);

    } else {
#if (NGX_OMNIROUTE_TEST)
        /* omniroute_redis_debug's records: a short string */
        if (size == NGX_OMNIROUTE_REDIS_DEBUG_VALUE
            && ngx_strnlen(value, size) < size)
        {
            return NULL;
        }
#endif
        return "settings key";
    }

    if (size != sizeof(ngx_omniroute_settings_override_t)) {
        return "size";
    }

    return ngx_omniroute_redis_check_override(table,
               (ngx_omniroute_settings_override_t *) value);
}


static const char *
ngx_omniroute_redis_check_override(ngx_omniroute_setting_desc_t *table,
    ngx_omniroute_settings_override_t *ov)
{
    int64_t                        v;
    ngx_int_t                      k;
    ngx_uint_t                     i, n;
    or_catchall_t                  c;
    ngx_omniroute_setting_desc_t  *d;

    for (n = 0; table[n].name; n++) { /* void */ }

    if (n < 64 && (ov->set >> n) != 0) {
        return "unknown setting";
    }

    for (i = 0; i < n; i++) {

        if (!(ov->set & ((uint64_t) 1 << i))) {
            continue;
        }

        d = &table[i];

        if (d->type == NGX_OMNIROUTE_SF_CODES) {

            if (ov->n_codes < 0 || ov->n_codes > OR_LOCKOUT_CODES_MAX) {
                return "error_codes";
            }

            for (k = 0; k < ov->n_codes; k++) {
                if (ov->codes[k] < d->min || ov->codes[k] > d->max) {
                    return "error_codes";
                }
            }

            continue;
        }

        v = ov->value[i];

        if (d->type == NGX_OMNIROUTE_SF_MSEC_OPT && v == 0) {
            continue;
        }

        if (v < d->min || v > d->max) {
            return d->name;
        }
    }

    switch (ov->catchall) {

    case 0:
    case 2:
        break;

    case 1:
        c.cooldown_ms = ov->catchall_cooldown_ms;
        c.reason = (or_reason_e) ov->catchall_reason;
        c.scope = (or_scope_e) ov->catchall_scope;

        if (ov->catchall_reason < 0 || ov->catchall_scope < 0
            || or_catchall_validate(&c) != NULL)
        {
            return "error_default";
        }

        break;

    default:
        return "error_default";
    }

    return NULL;
}


static const char *
ngx_omniroute_redis_check_rules(u_char *value, size_t size)
{
    ngx_uint_t                       i;
    or_oprule_t                      rule;
    ngx_omniroute_rule_rec_t        *rec;
    ngx_omniroute_rules_override_t  *ro;

    if (size != sizeof(ngx_omniroute_rules_override_t)) {
        return "size";
    }

    ro = (ngx_omniroute_rules_override_t *) value;

    if (ro->set > 1 || ro->n > OR_OPRULES_MAX) {
        return "error_rules";
    }

    for (i = 0; i < ro->n; i++) {
        rec = &ro->rule[i];

        if (ngx_strnlen(rec->id, NGX_OMNIROUTE_RULE_ID_MAX)
            == NGX_OMNIROUTE_RULE_ID_MAX
            || rec->match_len > NGX_OMNIROUTE_RULE_MATCH_MAX)
        {
            return "error_rules";
        }

        rule.id = (const char *) rec->id;
        rule.status = rec->status;
        rule.match = rec->match_len ? (const char *) rec->match : NULL;
        rule.match_len = rec->match_len;
        rule.reason = (or_reason_e) rec->reason;
        rule.scope = (or_scope_e) rec->scope;
        rule.cooldown_ms = rec->cooldown_ms;

        if (or_oprule_validate(&rule) != NULL) {
            return "error_rules";
        }
    }

    return NULL;
}


ngx_int_t
ngx_omniroute_redis_apply(ngx_omniroute_redis_link_t *link, ngx_uint_t table,
    ngx_str_t *key, u_char *value, size_t size, or_msec_t time,
    u_char *merged, or_msec_t *merged_time, ngx_uint_t *changed,
    const char **why)
{
    u_char                       *src;
    ngx_int_t                     rc;
    or_msec_t                     local_time;
    ngx_omniroute_redis_merge_t   m;

    *changed = 0;
    *why = NULL;
    *merged_time = time;

    if (!ngx_omniroute_redis_mirrored(table)
        || key->len == 0 || key->len > NGX_OMNIROUTE_KEY_MAX
        || size == 0 || size > NGX_OMNIROUTE_REDIS_VALUE_MAX)
    {
        return NGX_ERROR;
    }

    src = (u_char *) ngx_omniroute_redis_src;
    ngx_memcpy(src, value, size);

    *why = ngx_omniroute_redis_check(table, key, src, size, time,
                                     ngx_omniroute_now());

    if (*why == NULL) {
        *why = ngx_omniroute_redis_known(table, key, src, size);
    }

    if (*why) {
        return NGX_ABORT;
    }

    if (table != NGX_OMNIROUTE_T_SETTINGS) {

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


/*
 * Why a valid remote record names nothing this node has, or NULL: the
 * provider of a breaker, a tool limit, a settings override or its rules;
 * the connection of a state, a lane, a pause, a request_rejected record
 * or a pin; both of a lockout ("provider:connection:scope:name").
 */

static const char *
ngx_omniroute_redis_known(ngx_uint_t table, ngx_str_t *key, u_char *value,
    size_t size)
{
    u_char                     *p, *last, *c;
    or_pin_t                   *pin;
    ngx_omniroute_main_conf_t  *omcf;

    omcf = ngx_http_cycle_get_module_main_conf(ngx_cycle,
                                               ngx_http_omniroute_module);
    if (omcf == NULL) {
        return "name";
    }

    p = key->data;
    last = key->data + key->len;

    switch (table) {

    case NGX_OMNIROUTE_T_BREAKER:
        return ngx_omniroute_redis_provider(omcf, p, key->len)
               ? NULL : "name: no such provider here";

    case NGX_OMNIROUTE_T_CONN:
    case NGX_OMNIROUTE_T_LANE:
        return ngx_omniroute_redis_connection(omcf, p, key->len)
               ? NULL : "name: no such connection here";

    case NGX_OMNIROUTE_T_REJECTED:
        c = ngx_strlchr(p, last, ':');

        return c && ngx_omniroute_redis_connection(omcf, p, c - p)
               ? NULL : "name: no such connection here";

    case NGX_OMNIROUTE_T_LOCKOUT:
        c = ngx_strlchr(p, last, ':');

        if (c == NULL || !ngx_omniroute_redis_provider(omcf, p, c - p)) {
            return "name: no such provider here";
        }

        p = c + 1;
        c = ngx_strlchr(p, last, ':');

        return c && ngx_omniroute_redis_connection(omcf, p, c - p)
               ? NULL : "name: no such connection here";

    case NGX_OMNIROUTE_T_PACE:
        if (key->len > 2 && p[0] == 'p' && p[1] == ':') {
            return ngx_omniroute_redis_connection(omcf, p + 2, key->len - 2)
                   ? NULL : "name: no such connection here";
        }

        if (key->len > 2 && p[0] == 't' && p[1] == ':') {
            c = ngx_strlchr(p + 2, last, '|');

            return c && ngx_omniroute_redis_provider(omcf, p + 2, c - p - 2)
                   ? NULL : "name: no such provider here";
        }

        return "name";

    case NGX_OMNIROUTE_T_PIN:
        pin = (or_pin_t *) value;

        return size == sizeof(or_pin_t)
               && ngx_omniroute_redis_connection(omcf, (u_char *) pin->conn,
                                                 pin->conn_len)
               ? NULL : "name: no such connection here";

    case NGX_OMNIROUTE_T_SETTINGS:
        if (key->len == 6 && ngx_strncmp(p, "global", 6) == 0) {
            return NULL;
        }

        if (key->len > 9 && ngx_strncmp(p, "provider:", 9) == 0) {
            return ngx_omniroute_redis_provider(omcf, p + 9, key->len - 9)
                   ? NULL : "name: no such provider here";
        }

        if (key->len > 6 && ngx_strncmp(p, "rules:", 6) == 0) {
            return ngx_omniroute_redis_provider(omcf, p + 6, key->len - 6)
                   ? NULL : "name: no such provider here";
        }

#if (NGX_OMNIROUTE_TEST)
        /* omniroute_redis_debug's records (as the check lets them by) */
        if (size == NGX_OMNIROUTE_REDIS_DEBUG_VALUE) {
            return NULL;
        }
#endif

        return "name";

    default:
        return "table";
    }
}


static ngx_uint_t
ngx_omniroute_redis_provider(ngx_omniroute_main_conf_t *omcf, u_char *name,
    size_t len)
{
    ngx_uint_t                 i;
    ngx_omniroute_provider_t  *p;

    p = omcf->providers.elts;

    for (i = 0; i < omcf->providers.nelts; i++) {
        if (p[i].name.len == len && ngx_memcmp(p[i].name.data, name, len) == 0)
        {
            return 1;
        }
    }

    return 0;
}


static ngx_uint_t
ngx_omniroute_redis_connection(ngx_omniroute_main_conf_t *omcf, u_char *name,
    size_t len)
{
    ngx_uint_t                   i;
    ngx_omniroute_connection_t  *c;

    c = omcf->connections.elts;

    for (i = 0; i < omcf->connections.nelts; i++) {
        if (c[i].id.len == len && ngx_memcmp(c[i].id.data, name, len) == 0) {
            return 1;
        }
    }

    return 0;
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

    case NGX_OMNIROUTE_T_LANE:
        changed = or_lane_merge(value, (or_lane_t *) m->src);
        equal = (ngx_memcmp(value, m->src, sizeof(or_lane_t)) == 0);

        if (changed) {
            *expires = or_lane_expires(value, ngx_omniroute_now());
        }

        break;

    case NGX_OMNIROUTE_T_PACE:
        changed = or_pace_merge(value, (or_pace_t *) m->src);
        equal = or_pace_equal(value, (or_pace_t *) m->src);

        if (changed) {
            /* as the request path does: gone once it has ended */
            *expires = ((or_pace_t *) value)->until;
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
