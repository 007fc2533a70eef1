
/*
 * Copyright (C) ngx_omniroute authors
 *
 * omniroute_redis_debug: a test and benchmark handler of the Redis mirror
 * (t/cluster_*.t, bench/cluster.sh).  Built only in a test build
 * (OMNIROUTE_TEST=1 at configure time, "make test-build"; the config file
 * then defines NGX_OMNIROUTE_TEST): a production module does not know the
 * directive.  It can open breakers and lock connections out: never expose
 * it.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <jansson.h>

#include "ngx_omniroute_redis_int.h"
#include "ngx_omniroute_util.h"
#include "or_breaker.h"
#include "or_cooldown.h"
#include "or_lockout.h"


typedef struct {
    json_t                       *list;
    ngx_uint_t                    table;
    or_msec_t                     now;
} ngx_omniroute_redis_dump_t;


typedef struct {
    ngx_uint_t                    table;
    ngx_str_t                     op;
    or_msec_t                     now;
    or_msec_t                     ms;
    ngx_int_t                     n;
    ngx_str_t                     value;
    ngx_msec_t                    retention;
} ngx_omniroute_redis_change_t;


static ngx_int_t ngx_omniroute_redis_debug_handler(ngx_http_request_t *r);
static ngx_uint_t ngx_omniroute_redis_debug_change(void *value, void *arg,
    or_msec_t *expires);
static json_t *ngx_omniroute_redis_record_json(ngx_uint_t table,
    ngx_str_t *key, u_char *value, size_t size, or_msec_t now);
static void ngx_omniroute_redis_dump(ngx_str_t *key, void *value,
    size_t size, void *arg);


/*
 * omniroute_redis_debug: read, list and change store records directly,
 * as the request path would (local changes, published by the mirror).
 * For tests, benchmarks and diagnostics; never expose it.
 *
 *   ?table=T                    list the records of T
 *   ?table=T&key=K              one record
 *   ?table=T&key=K&op=OP...     change it, then show it:
 *     breaker   open (ms, n), reset
 *     conn      cooldown (ms), terminal, success, reset
 *     lockout, rejected   lock (ms, n), decay, clear
 *     settings  set (value)
 *     any       delete
 *   no table: the link's counters.
 */

char *
ngx_omniroute_redis_debug(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_core_loc_conf_t  *clcf;

    clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
    clcf->handler = ngx_omniroute_redis_debug_handler;

    return NGX_CONF_OK;
}


static ngx_int_t
ngx_omniroute_redis_debug_handler(ngx_http_request_t *r)
{
    u_char                        buf[NGX_OMNIROUTE_REDIS_VALUE_MAX];
    size_t                        size;
    json_t                       *doc;
    ngx_int_t                     rc, table;
    ngx_str_t                     arg, key, op, ms, n;
    ngx_omniroute_main_conf_t    *omcf;
    ngx_omniroute_redis_dump_t    dump;
    ngx_omniroute_redis_link_t    link;
    ngx_omniroute_redis_change_t  ch;

    if (r->method != NGX_HTTP_GET && r->method != NGX_HTTP_POST) {
        return NGX_HTTP_NOT_ALLOWED;
    }

    rc = ngx_http_discard_request_body(r);
    if (rc != NGX_OK) {
        return rc;
    }

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);

    if (omcf == NULL || omcf->store.sh == NULL) {
        return ngx_omniroute_send_json(r, NGX_HTTP_NOT_FOUND,
                   json_pack("{s:s}", "error", "no omniroute_zone"));
    }

    if (ngx_http_arg(r, (u_char *) "table", 5, &arg) != NGX_OK) {
        return ngx_omniroute_send_json(r, NGX_HTTP_OK,
                                             ngx_omniroute_redis_stats_json());
    }

    table = ngx_omniroute_redis_table_of(arg.data, arg.len);

    if (table == NGX_ERROR) {
        return ngx_omniroute_send_json(r, NGX_HTTP_BAD_REQUEST,
                   json_pack("{s:s}", "error", "unknown table"));
    }

    ngx_memzero(&link, sizeof(ngx_omniroute_redis_link_t));
    link.store = &omcf->store;

    if (ngx_http_arg(r, (u_char *) "key", 3, &key) != NGX_OK) {
        dump.list = json_array();
        dump.table = table;
        dump.now = ngx_omniroute_now();

        if (dump.list == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        (void) ngx_omniroute_store_visit(&omcf->store, table,
                                         ngx_omniroute_redis_dump, &dump,
                                         r->pool);

        return ngx_omniroute_send_json(r, NGX_HTTP_OK,
                   json_pack("{s:o}", "records", dump.list));
    }

    if (ngx_http_arg(r, (u_char *) "op", 2, &op) == NGX_OK) {

        ngx_memzero(&ch, sizeof(ngx_omniroute_redis_change_t));
        ch.table = table;
        ch.op = op;
        ch.now = ngx_omniroute_now();
        ch.ms = 60000;
        ch.n = 1;
        ch.retention = 3600 * 1000;

        if (ngx_http_arg(r, (u_char *) "ms", 2, &ms) == NGX_OK) {
            ch.ms = ngx_atoi(ms.data, ms.len);
        }

        if (ngx_http_arg(r, (u_char *) "n", 1, &n) == NGX_OK) {
            ch.n = ngx_atoi(n.data, n.len);
        }

        if (ngx_http_arg(r, (u_char *) "value", 5, &ch.value) != NGX_OK) {
            ngx_str_null(&ch.value);
        }

        if (ch.ms == NGX_ERROR || ch.n == NGX_ERROR
            || ch.value.len > NGX_OMNIROUTE_REDIS_DEBUG_VALUE)
        {
            return ngx_omniroute_send_json(r, NGX_HTTP_BAD_REQUEST,
                       json_pack("{s:s}", "error", "bad ms, n or value"));
        }

        if (op.len == 6 && ngx_strncmp(op.data, "delete", 6) == 0) {
            (void) ngx_omniroute_store_delete(&omcf->store, table, &key, 0);

        } else {
            size = ngx_omniroute_redis_value_size(table);

            if (table == NGX_OMNIROUTE_T_SETTINGS) {
                size = NGX_OMNIROUTE_REDIS_DEBUG_VALUE;

            } else if (size == 0) {
                return ngx_omniroute_send_json(r,
                           NGX_HTTP_BAD_REQUEST,
                           json_pack("{s:s}", "error", "table not changed "
                                     "through omniroute_redis_debug"));
            }

            rc = ngx_omniroute_store_update(&omcf->store, table, &key, size,
                                           ngx_omniroute_redis_debug_change,
                                           &ch, 0);
            if (rc == NGX_ERROR) {
                return ngx_omniroute_send_json(r,
                           NGX_HTTP_INTERNAL_SERVER_ERROR,
                           json_pack("{s:s}", "error", "store update failed"));
            }
        }
    }

    if (ngx_omniroute_redis_read(&link, table, &key, buf, &size, r->pool)
        != NGX_OK)
    {
        return ngx_omniroute_send_json(r, NGX_HTTP_OK,
                   json_pack("{s:b, s:s, s:s#}", "found", 0,
                             "table", ngx_omniroute_redis_table_name(table),
                             "key", key.data, (int) key.len));
    }

    doc = ngx_omniroute_redis_record_json(table, &key, buf, size,
                                          ngx_omniroute_now());

    return ngx_omniroute_send_json(r, NGX_HTTP_OK, doc);
}


static ngx_uint_t
ngx_omniroute_redis_debug_change(void *value, void *arg, or_msec_t *expires)
{
    ngx_omniroute_redis_change_t *ch = arg;

    ngx_str_t         *op;
    or_msec_t          now;
    or_breaker_t      *cb;
    or_lockout_t      *lo;
    or_conn_state_t   *cs;

#define ngx_omniroute_redis_op_is(s)                                         \
    (op->len == sizeof(s) - 1 && ngx_strncmp(op->data, s, op->len) == 0)

    op = &ch->op;
    now = ch->now;

    switch (ch->table) {

    case NGX_OMNIROUTE_T_BREAKER:
        cb = value;

        if (ngx_omniroute_redis_op_is("open")) {
            cb->state = OR_CB_OPEN;
            cb->failures += (uint32_t) ch->n;
            cb->last_failure_at = now;
            cb->last_reason = OR_REASON_SERVER_ERROR;
            cb->opened_at = now;
            cb->open_until = now + ch->ms;
            cb->successes = 0;
            return NGX_OMNIROUTE_CHANGED;
        }

        if (ngx_omniroute_redis_op_is("reset")) {
            return or_breaker_reset(cb) ? NGX_OMNIROUTE_CHANGED
                                        : NGX_OMNIROUTE_UNCHANGED;
        }

        break;

    case NGX_OMNIROUTE_T_CONN:
        cs = value;

        if (ngx_omniroute_redis_op_is("cooldown")) {
            cs->until = ngx_max(cs->until, now + ch->ms);
            cs->failures++;
            cs->backoff_level++;
            cs->mark_at = now;
            cs->last_error_at = now;
            cs->last_status = 429;
            cs->last_reason = OR_REASON_RATE_LIMIT_EXCEEDED;
            return NGX_OMNIROUTE_CHANGED;
        }

        if (ngx_omniroute_redis_op_is("terminal")) {
            cs->terminal = OR_TERMINAL_BANNED;
            cs->terminal_at = now;
            cs->terminal_status = 403;
            return NGX_OMNIROUTE_CHANGED;
        }

        if (ngx_omniroute_redis_op_is("success")) {
            return or_cooldown_success(cs, now, now) ? NGX_OMNIROUTE_CHANGED
                                                     : NGX_OMNIROUTE_UNCHANGED;
        }

        if (ngx_omniroute_redis_op_is("reset")) {
            return or_cooldown_reset(cs) ? NGX_OMNIROUTE_CHANGED
                                         : NGX_OMNIROUTE_UNCHANGED;
        }

        break;

    case NGX_OMNIROUTE_T_LOCKOUT:
    case NGX_OMNIROUTE_T_REJECTED:
        lo = value;

        if (ngx_omniroute_redis_op_is("lock")) {
            lo->failures += (uint32_t) ch->n;
            lo->until = now + ch->ms;
            lo->mark_at = now;
            lo->last_failure_at = now;
            lo->last_status = 429;
            lo->reason = OR_REASON_RATE_LIMIT_EXCEEDED;
            lo->scope = OR_SCOPE_MODEL;
            *expires = lo->until + (or_msec_t) ch->retention;
            return NGX_OMNIROUTE_CHANGED;
        }

        if (ngx_omniroute_redis_op_is("decay")) {
            return (or_lockout_success(lo, now, now) != OR_LO_KEPT)
                   ? NGX_OMNIROUTE_CHANGED : NGX_OMNIROUTE_UNCHANGED;
        }

        if (ngx_omniroute_redis_op_is("clear")) {
            return or_lockout_clear(lo) ? NGX_OMNIROUTE_CHANGED
                                        : NGX_OMNIROUTE_UNCHANGED;
        }

        break;

    case NGX_OMNIROUTE_T_SETTINGS:

        if (ngx_omniroute_redis_op_is("set")) {
            if (ngx_strncmp(value, ch->value.data, ch->value.len) == 0
                && ((u_char *) value)[ch->value.len] == '\0')
            {
                return NGX_OMNIROUTE_UNCHANGED;
            }

            ngx_memzero(value, NGX_OMNIROUTE_REDIS_DEBUG_VALUE);
            ngx_memcpy(value, ch->value.data, ch->value.len);
            return NGX_OMNIROUTE_CHANGED;
        }

        break;
    }

#undef ngx_omniroute_redis_op_is

    return NGX_OMNIROUTE_UNCHANGED;
}


static void
ngx_omniroute_redis_dump(ngx_str_t *key, void *value, size_t size, void *arg)
{
    ngx_omniroute_redis_dump_t *dump = arg;

    json_t  *doc;

    doc = ngx_omniroute_redis_record_json(dump->table, key, value, size,
                                          dump->now);
    if (doc) {
        (void) json_array_append_new(dump->list, doc);
    }
}


static json_t *
ngx_omniroute_redis_record_json(ngx_uint_t table, ngx_str_t *key,
    u_char *value, size_t size, or_msec_t now)
{
    json_t           *doc;
    or_breaker_t      cb;
    or_lockout_t      lo;
    or_conn_state_t   cs;

    doc = json_pack("{s:b, s:s, s:s#}", "found", 1,
                    "table", ngx_omniroute_redis_table_name(table),
                    "key", key->data, (int) key->len);
    if (doc == NULL) {
        return NULL;
    }

    switch (table) {

    case NGX_OMNIROUTE_T_BREAKER:
        if (size < sizeof(or_breaker_t)) {
            break;
        }

        ngx_memcpy(&cb, value, sizeof(or_breaker_t));

        (void) json_object_set_new(doc, "state",
                   json_string(or_breaker_state_name(cb.state)));
        (void) json_object_set_new(doc, "epoch", json_integer(cb.epoch));
        (void) json_object_set_new(doc, "failures",
                                   json_integer(cb.failures));
        (void) json_object_set_new(doc, "open_cycles",
                                   json_integer(cb.open_cycles));
        (void) json_object_set_new(doc, "open_until",
                                   json_integer(cb.open_until));
        (void) json_object_set_new(doc, "remaining_ms",
                   json_integer(ngx_max(cb.open_until - now, 0)));
        break;

    case NGX_OMNIROUTE_T_CONN:
        if (size < sizeof(or_conn_state_t)) {
            break;
        }

        ngx_memcpy(&cs, value, sizeof(or_conn_state_t));

        (void) json_object_set_new(doc, "until", json_integer(cs.until));
        (void) json_object_set_new(doc, "remaining_ms",
                   json_integer(ngx_max(cs.until - now, 0)));
        (void) json_object_set_new(doc, "terminal",
                   json_string(or_terminal_name(cs.terminal)));
        (void) json_object_set_new(doc, "failures",
                                   json_integer(cs.failures));
        (void) json_object_set_new(doc, "backoff_level",
                                   json_integer(cs.backoff_level));
        (void) json_object_set_new(doc, "reset_epoch",
                                   json_integer(cs.reset_epoch));
        (void) json_object_set_new(doc, "clear_epoch",
                                   json_integer(cs.clear_epoch));
        break;

    case NGX_OMNIROUTE_T_LOCKOUT:
    case NGX_OMNIROUTE_T_REJECTED:
        if (size < sizeof(or_lockout_t)) {
            break;
        }

        ngx_memcpy(&lo, value, sizeof(or_lockout_t));

        (void) json_object_set_new(doc, "epoch", json_integer(lo.epoch));
        (void) json_object_set_new(doc, "failures",
                                   json_integer(lo.failures));
        (void) json_object_set_new(doc, "until", json_integer(lo.until));
        (void) json_object_set_new(doc, "remaining_ms",
                   json_integer(ngx_max(lo.until - now, 0)));
        (void) json_object_set_new(doc, "active",
                   json_boolean(or_lockout_active(&lo, now)));
        break;

    default:
        (void) json_object_set_new(doc, "size", json_integer(size));

        if (size == NGX_OMNIROUTE_REDIS_DEBUG_VALUE
            && ngx_strnlen(value, size) < size)
        {
            (void) json_object_set_new(doc, "value",
                                       json_string((char *) value));
        }

        break;
    }

    return doc;
}
