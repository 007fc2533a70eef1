
/*
 * Copyright (C) ngx_omniroute authors
 *
 * Redis mirror: the link state machine (see ngx_omniroute_redis_int.h) on
 * the connection machine (ngx_omniroute_redis_conn.c: connect, AUTH,
 * SELECT, sentinels, the subscriber, backoff).
 *
 * hiredis 0.14 has no timers: connect and reply timeouts are checked by
 * the link's own timer.
 *
 *   DOWN --retry_at--> CONNECTING --both handshakes--> SYNCING
 *   SYNCING --SCAN+MGET merged, missing state pushed--> UP
 *   any --error, EOF, timeout, silent subscriber--> DOWN (backoff with
 *        jitter, doubled up to backoff_max, reset once UP)
 *
 * One timer (interval) drives everything: reads the store's event ring
 * (always: while not publishing it only notes settings versions), sends
 * heartbeats, checks timeouts, paces the push of a full sync, starts a
 * resync (also when the epoch key shows Redis lost the state),
 * reconnects.  It is cancelable, so it never delays a graceful shutdown;
 * exit_process flushes what is queued (bounded) and frees both contexts.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_event.h>
#include <ngx_http.h>

#include <poll.h>

#include "ngx_omniroute_redis_int.h"


static void ngx_omniroute_redis_connect(ngx_omniroute_redis_link_t *link);
static void ngx_omniroute_redis_probe(ngx_omniroute_redis_conn_t *rc);
static void ngx_omniroute_redis_up(ngx_omniroute_redis_machine_t *m);
static void ngx_omniroute_redis_down(ngx_omniroute_redis_machine_t *m,
    u_char *reason, size_t len);
static void ngx_omniroute_redis_on_message(ngx_omniroute_redis_machine_t *m,
    u_char *data, size_t len);
static void ngx_cdecl ngx_omniroute_redis_fail(
    ngx_omniroute_redis_link_t *link, const char *fmt, ...);
static void ngx_cdecl ngx_omniroute_redis_log(
    ngx_omniroute_redis_link_t *link, ngx_uint_t level, const char *fmt,
    ...);
static void ngx_omniroute_redis_vlog(ngx_omniroute_redis_link_t *link,
    ngx_uint_t k, ngx_uint_t level, const char *fmt, va_list args);
static void ngx_cdecl ngx_omniroute_redis_log_record(
    ngx_omniroute_redis_link_t *link, const char *fmt, ...);
static void ngx_omniroute_redis_set_state(ngx_omniroute_redis_link_t *link,
    ngx_uint_t state);
static ngx_int_t ngx_omniroute_redis_command(ngx_omniroute_redis_conn_t *rc,
    redisCallbackFn *fn, void *data, int argc, const char **argv,
    const size_t *argvlen);
static void ngx_omniroute_redis_replied(ngx_omniroute_redis_conn_t *rc);

static void ngx_omniroute_redis_tick(ngx_event_t *ev);
static ngx_int_t ngx_omniroute_redis_watchdog(
    ngx_omniroute_redis_link_t *link);
static void ngx_omniroute_redis_heartbeat(ngx_omniroute_redis_link_t *link);
static void ngx_omniroute_redis_drain(ngx_omniroute_redis_link_t *link,
    ngx_uint_t publish);
static void ngx_omniroute_redis_flush(ngx_omniroute_redis_link_t *link);

static void ngx_omniroute_redis_epoch_learn(ngx_omniroute_redis_link_t *link);
static void ngx_omniroute_redis_epoch_check(ngx_omniroute_redis_link_t *link);
static void ngx_omniroute_redis_on_epoch(redisAsyncContext *ac, void *r,
    void *data);

static void ngx_omniroute_redis_start_sync(ngx_omniroute_redis_link_t *link);
static ngx_int_t ngx_omniroute_redis_load_batch(
    ngx_omniroute_redis_machine_t *m, ngx_str_t *keys, redisReply **values,
    ngx_uint_t n);
static void ngx_omniroute_redis_load_done(ngx_omniroute_redis_machine_t *m);
static void ngx_omniroute_redis_begin_push(ngx_omniroute_redis_link_t *link);
static void ngx_omniroute_redis_push_step(ngx_omniroute_redis_link_t *link);
static void ngx_omniroute_redis_end_sync(ngx_omniroute_redis_link_t *link);
static void ngx_omniroute_redis_collect(ngx_str_t *key, void *value,
    size_t size, void *arg);
static int ngx_libc_cdecl ngx_omniroute_redis_seen_cmp(const void *a,
    const void *b);

static void ngx_omniroute_redis_message(ngx_omniroute_redis_link_t *link,
    u_char *data, size_t len);

static void ngx_omniroute_redis_on_reply(redisAsyncContext *ac, void *r,
    void *data);
static void ngx_omniroute_redis_on_ping(redisAsyncContext *ac, void *r,
    void *data);
static ngx_omniroute_redis_link_t  *ngx_omniroute_redis_link;

/* what an epoch GET is for (its callback's data) */
static u_char  ngx_omniroute_redis_epoch_learning;
static u_char  ngx_omniroute_redis_epoch_checking;


ngx_int_t
ngx_omniroute_redis_mirror_init(ngx_cycle_t *cycle,
    ngx_omniroute_redis_main_conf_t *rmcf, ngx_omniroute_store_t *store)
{
    ngx_omniroute_redis_link_t  *link;

    link = ngx_pcalloc(cycle->pool, sizeof(ngx_omniroute_redis_link_t));
    if (link == NULL) {
        return NGX_ERROR;
    }

    link->rkey = ngx_palloc(cycle->pool, NGX_OMNIROUTE_REDIS_RKEY_MAX);
    link->rvalue = ngx_palloc(cycle->pool, NGX_OMNIROUTE_REDIS_VALUE_HDR
                                           + NGX_OMNIROUTE_REDIS_VALUE_MAX);
    link->msg = ngx_palloc(cycle->pool, NGX_OMNIROUTE_REDIS_MSG_MAX);
    link->local = ngx_palloc(cycle->pool, NGX_OMNIROUTE_REDIS_VALUE_MAX);
    link->merged = ngx_palloc(cycle->pool, NGX_OMNIROUTE_REDIS_VALUE_MAX);
    link->events = ngx_palloc(cycle->pool, NGX_OMNIROUTE_REDIS_BATCH
                                           * sizeof(ngx_omniroute_event_t));
    link->epoch_key.data = ngx_pnalloc(cycle->pool,
                                       rmcf->prefix.len + sizeof("epoch"));

    if (link->rkey == NULL || link->rvalue == NULL || link->msg == NULL
        || link->local == NULL || link->merged == NULL
        || link->events == NULL || link->epoch_key.data == NULL)
    {
        return NGX_ERROR;
    }

    link->epoch_key.len = ngx_sprintf(link->epoch_key.data, "%Vepoch",
                                      &rmcf->prefix)
                          - link->epoch_key.data;

    link->rmcf = rmcf;
    link->store = store;
    link->stats = &rmcf->sh->stats;
    link->log = cycle->log;

    ngx_omniroute_redis_conn_init(&link->m, rmcf, cycle->log, link,
                                  "command");

    link->m.channel = rmcf->channel;
    link->m.probe = ngx_omniroute_redis_probe;
    link->m.up = ngx_omniroute_redis_up;
    link->m.down = ngx_omniroute_redis_down;
    link->m.message = ngx_omniroute_redis_on_message;

    link->tick.handler = ngx_omniroute_redis_tick;
    link->tick.data = link;
    link->tick.log = cycle->log;
    link->tick.cancelable = 1;

    /* history is not replayed: the first sync pushes the whole state */

    link->cursor = ngx_omniroute_store_next_seq(store);

    link->stats->owner = ngx_pid;
    link->state = NGX_OMNIROUTE_REDIS_DOWN;

    ngx_omniroute_redis_link = link;

    ngx_omniroute_redis_connect(link);

    ngx_add_timer(&link->tick, rmcf->interval);

    return NGX_OK;
}


void
ngx_omniroute_redis_mirror_exit(ngx_cycle_t *cycle)
{
    ngx_omniroute_redis_link_t  *link;

    link = ngx_omniroute_redis_link;

    if (link == NULL) {
        return;
    }

    /* the last changes of this worker, best effort and bounded */

    if (link->state == NGX_OMNIROUTE_REDIS_UP && link->draining
        && link->m.cmd.ac && link->m.cmd.ready)
    {
        ngx_omniroute_redis_drain(link, 1);
        ngx_omniroute_redis_flush(link);
    }

    link->exiting = 1;

    if (link->tick.timer_set) {
        ngx_del_timer(&link->tick);
    }

    ngx_omniroute_redis_conn_close(&link->m);

    if (link->sync_pool) {
        ngx_destroy_pool(link->sync_pool);
        link->sync_pool = NULL;
    }

    ngx_omniroute_redis_set_state(link, NGX_OMNIROUTE_REDIS_DOWN);

    ngx_omniroute_redis_link = NULL;
}


/* connection management: the machine (ngx_omniroute_redis_conn.c) */

static void
ngx_omniroute_redis_connect(ngx_omniroute_redis_link_t *link)
{
    ngx_omniroute_redis_set_state(link, NGX_OMNIROUTE_REDIS_CONNECTING);

    ngx_omniroute_redis_conn_open(&link->m);
}


/* the command connection's last handshake command: PING */

static void
ngx_omniroute_redis_probe(ngx_omniroute_redis_conn_t *rc)
{
    const char  *argv[1];
    size_t       argvlen[1];

    argv[0] = "PING";
    argvlen[0] = 4;

    if (ngx_omniroute_redis_command(rc, ngx_omniroute_redis_on_ping, NULL, 1,
                                    argv, argvlen)
        != NGX_OK)
    {
        ngx_omniroute_redis_fail(rc->link, "could not send PING");
    }
}


/* both connections are ready: a full sync */

static void
ngx_omniroute_redis_up(ngx_omniroute_redis_machine_t *m)
{
    ngx_omniroute_redis_link_t  *link = m->link;

    (void) ngx_atomic_fetch_add(&link->stats->connects, 1);
    ngx_omniroute_redis_set_state(link, NGX_OMNIROUTE_REDIS_SYNCING);
    link->sub_seen = ngx_current_msec;
    link->heartbeat_at = ngx_current_msec;
    ngx_omniroute_redis_start_sync(link);
}


static void
ngx_omniroute_redis_on_message(ngx_omniroute_redis_machine_t *m,
    u_char *data, size_t len)
{
    ngx_omniroute_redis_message(m->link, data, len);
}


static void ngx_cdecl
ngx_omniroute_redis_fail(ngx_omniroute_redis_link_t *link, const char *fmt,
    ...)
{
    u_char   *p, buf[NGX_MAX_ERROR_STR];
    va_list   args;

    va_start(args, fmt);
    p = ngx_vslprintf(buf, buf + sizeof(buf), fmt, args);
    va_end(args);

    ngx_omniroute_redis_conn_fail(&link->m, "%*s", (size_t) (p - buf), buf);
}


/* the machine failed: the connections are freed after this returns */

static void
ngx_omniroute_redis_down(ngx_omniroute_redis_machine_t *m, u_char *reason,
    size_t len)
{
    ngx_omniroute_redis_link_t  *link = m->link;

    if (!link->exiting) {
        ngx_omniroute_redis_log(link, NGX_LOG_ERR,
                                "%*s; serving on local state, "
                                "reconnecting", len, reason);
        (void) ngx_atomic_fetch_add(&link->stats->failures, 1);
    }

    ngx_omniroute_redis_set_state(link, NGX_OMNIROUTE_REDIS_DOWN);

    link->draining = 0;
    link->syncing = 0;
    link->pushing = 0;

    if (link->sync_pool) {
        ngx_destroy_pool(link->sync_pool);
        link->sync_pool = NULL;
    }

    link->stats->pending = 0;
}


/*
 * Errors are logged at most once per log_interval, and so are notices
 * (link up) and rejected records, each on its own budget; the next
 * message says how many were suppressed.  The password never reaches a
 * message.
 */

static void ngx_cdecl
ngx_omniroute_redis_log(ngx_omniroute_redis_link_t *link, ngx_uint_t level,
    const char *fmt, ...)
{
    va_list  args;

    va_start(args, fmt);
    ngx_omniroute_redis_vlog(link, (level >= NGX_LOG_NOTICE) ? 1 : 0, level,
                             fmt, args);
    va_end(args);
}


static void
ngx_omniroute_redis_vlog(ngx_omniroute_redis_link_t *link, ngx_uint_t k,
    ngx_uint_t level, const char *fmt, va_list args)
{
    u_char      *p, *last, buf[NGX_MAX_ERROR_STR];
    ngx_msec_t   now;

    now = ngx_current_msec;

    if (link->logged[k] && now - link->log_at[k] < link->rmcf->log_interval) {
        link->log_suppressed[k]++;
        return;
    }

    last = buf + sizeof(buf);

    p = ngx_vslprintf(buf, last, fmt, args);

    if (link->log_suppressed[k]) {
        p = ngx_slprintf(p, last, " (%ui more such messages suppressed)",
                         link->log_suppressed[k]);
    }

    ngx_log_error(level, link->log, 0, "omniroute redis \"%V\" node \"%V\": "
                  "%*s", &link->rmcf->addr, &link->rmcf->node,
                  (size_t) (p - buf), buf);

    link->logged[k] = 1;
    link->log_at[k] = now;
    link->log_suppressed[k] = 0;
}


static void ngx_cdecl
ngx_omniroute_redis_log_record(ngx_omniroute_redis_link_t *link,
    const char *fmt, ...)
{
    va_list  args;

    va_start(args, fmt);
    ngx_omniroute_redis_vlog(link, 2, NGX_LOG_WARN, fmt, args);
    va_end(args);
}


/*
 * A remote record failed validation (ngx_omniroute_redis_check()): it is
 * dropped, counted and logged with its table, key (escaped, at most 64
 * bytes) and the field found wrong; never a value.
 */

void
ngx_omniroute_redis_reject(ngx_omniroute_redis_link_t *link,
    ngx_uint_t table, ngx_str_t *key, const char *why)
{
    u_char      *p, buf[NGX_OMNIROUTE_REDIS_KEY_LOG * 4 + 3];
    ngx_uint_t   i;

    (void) ngx_atomic_fetch_add(&link->stats->rejected, 1);

    p = buf;

    for (i = 0; i < key->len && i < NGX_OMNIROUTE_REDIS_KEY_LOG; i++) {
        if (key->data[i] < 0x20 || key->data[i] >= 0x7f
            || key->data[i] == '"' || key->data[i] == '\\')
        {
            p = ngx_sprintf(p, "\\x%02xd", key->data[i]);

        } else {
            *p++ = key->data[i];
        }
    }

    if (key->len > NGX_OMNIROUTE_REDIS_KEY_LOG) {
        p = ngx_cpymem(p, "...", 3);
    }

    ngx_omniroute_redis_log_record(link, "rejected an invalid record from "
                                   "Redis: table \"%s\", key \"%*s\" "
                                   "(bad %s); ignored",
                                   ngx_omniroute_redis_table_name(table),
                                   (size_t) (p - buf), buf, why);
}


static void
ngx_omniroute_redis_set_state(ngx_omniroute_redis_link_t *link,
    ngx_uint_t state)
{
    link->state = state;
    link->state_at = ngx_current_msec;

    /* a worker of a previous cycle may still run: the newest one owns it */

    if (link->stats->owner == (ngx_atomic_uint_t) ngx_pid) {
        link->stats->state = state;
        link->stats->state_since = (ngx_atomic_uint_t) ngx_omniroute_now();
    }
}


static ngx_int_t
ngx_omniroute_redis_command(ngx_omniroute_redis_conn_t *rc,
    redisCallbackFn *fn, void *data, int argc, const char **argv,
    const size_t *argvlen)
{
    ngx_omniroute_redis_link_t  *link = rc->link;

    if (ngx_omniroute_redis_conn_send(rc, fn, data, argc, argv, argvlen)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (rc == &link->m.cmd) {
        link->stats->pending = rc->pending;
    }

    return NGX_OK;
}


static void
ngx_omniroute_redis_replied(ngx_omniroute_redis_conn_t *rc)
{
    ngx_omniroute_redis_link_t  *link = rc->link;

    ngx_omniroute_redis_conn_replied(rc);

    if (rc == &link->m.cmd) {
        link->stats->pending = rc->pending;
    }
}


/* the timer */

static void
ngx_omniroute_redis_tick(ngx_event_t *ev)
{
    ngx_omniroute_redis_link_t  *link = ev->data;

    ngx_msec_t                        now;
    ngx_omniroute_redis_main_conf_t  *rmcf;

    if (link->exiting) {
        return;
    }

    rmcf = link->rmcf;
    now = ngx_current_msec;

    switch (link->state) {

    case NGX_OMNIROUTE_REDIS_DOWN:
        ngx_omniroute_redis_drain(link, 0);

        if (!ngx_exiting
            && (ngx_msec_int_t) (now - link->m.retry_at) >= 0)
        {
            ngx_omniroute_redis_connect(link);
        }

        break;

    case NGX_OMNIROUTE_REDIS_CONNECTING:
        ngx_omniroute_redis_drain(link, 0);
        ngx_omniroute_redis_conn_tick(&link->m);
        break;

    default: /* SYNCING, UP */

        if (ngx_omniroute_redis_watchdog(link) != NGX_OK) {
            break;
        }

        ngx_omniroute_redis_heartbeat(link);
        ngx_omniroute_redis_drain(link, link->draining);

        if (link->pushing) {
            ngx_omniroute_redis_push_step(link);

        } else if (!link->syncing
                   && (link->dirty
                       || (rmcf->resync
                           && (ngx_msec_int_t) (now - link->resync_at) >= 0)))
        {
            ngx_omniroute_redis_start_sync(link);

        } else if (!link->syncing
                   && (ngx_msec_int_t) (now - link->epoch_at) >= 0)
        {
            ngx_omniroute_redis_epoch_check(link);
        }

        break;
    }

    if (!link->exiting) {
        ngx_add_timer(ev, rmcf->interval);
    }
}


static ngx_int_t
ngx_omniroute_redis_watchdog(ngx_omniroute_redis_link_t *link)
{
    ngx_msec_t                        now;
    ngx_omniroute_redis_conn_t       *rc;
    ngx_omniroute_redis_main_conf_t  *rmcf;

    rmcf = link->rmcf;
    now = ngx_current_msec;

    rc = &link->m.cmd;

    if (rc->pending && now - rc->progress >= rmcf->timeout) {
        ngx_omniroute_redis_fail(link, "no reply for %M ms",
                                 now - rc->progress);
        return NGX_ERROR;
    }

    if (now - link->sub_seen >= rmcf->keepalive + rmcf->timeout) {
        ngx_omniroute_redis_fail(link, "subscriber silent for %M ms",
                                 now - link->sub_seen);
        return NGX_ERROR;
    }

    return NGX_OK;
}


/* a heartbeat: proves both connections alive (we read our own message) */

static void
ngx_omniroute_redis_heartbeat(ngx_omniroute_redis_link_t *link)
{
    size_t                            len;
    const char                       *argv[3];
    size_t                            argvlen[3];
    ngx_omniroute_redis_main_conf_t  *rmcf;

    rmcf = link->rmcf;

    if ((ngx_msec_int_t) (ngx_current_msec - link->heartbeat_at) < 0) {
        return;
    }

    link->heartbeat_at = ngx_current_msec + rmcf->keepalive;

    len = ngx_omniroute_redis_encode_msg(link->msg, &rmcf->node,
                                         NGX_OMNIROUTE_REDIS_OP_HEARTBEAT, 0,
                                         NULL, NULL, 0, ngx_omniroute_now());

    argv[0] = "PUBLISH";
    argvlen[0] = 7;
    argv[1] = (const char *) rmcf->channel.data;
    argvlen[1] = rmcf->channel.len;
    argv[2] = (const char *) link->msg;
    argvlen[2] = len;

    (void) ngx_omniroute_redis_command(&link->m.cmd,
                                       ngx_omniroute_redis_on_reply,
                                       NULL, 3, argv, argvlen);
}


/*
 * Read the store's event ring from the cursor.  publish: write each local
 * change (coalesced per key within a batch) as the current whole value,
 * while fewer than "queue" commands are in flight; events lost from the
 * ring meanwhile are counted and make the next pass a full sync.  Without
 * publish (link not up, or a sync will push everything), only the
 * versions of settings changes are noted.
 */

static void
ngx_omniroute_redis_drain(ngx_omniroute_redis_link_t *link,
    ngx_uint_t publish)
{
    size_t                  size;
    uint64_t                next;
    ngx_str_t               key;
    ngx_uint_t              n, i, j, dup;
    ngx_pool_t             *pool;
    ngx_omniroute_event_t  *ev, *e;

    pool = NULL;

    for ( ;; ) {

        if (publish && link->m.cmd.pending >= link->rmcf->queue) {
            break;
        }

        n = ngx_omniroute_store_events(link->store, link->cursor,
                                       link->events,
                                       NGX_OMNIROUTE_REDIS_BATCH, &next);

        if (n && link->events[0].seq > link->cursor && publish) {
            (void) ngx_atomic_fetch_add(&link->stats->overflows,
                                        link->events[0].seq - link->cursor);
            link->dirty = 1;

            ngx_omniroute_redis_log(link, NGX_LOG_WARN,
                                    "%uL state changes were not sent in "
                                    "time (event ring overflow); "
                                    "resynchronizing",
                                    link->events[0].seq - link->cursor);
        }

        link->cursor = next;

        for (i = 0; i < n; i++) {
            ev = &link->events[i];

            if (ev->remote || !ngx_omniroute_redis_mirrored(ev->table)) {
                continue;
            }

            key.data = ev->key;
            key.len = ev->key_len;

            if (ev->table == NGX_OMNIROUTE_T_SETTINGS
                && ev->op == NGX_OMNIROUTE_OP_SET)
            {
                ngx_omniroute_redis_set_version(link->rmcf, ev->table, &key,
                                                ev->time);
            }

            if (!publish) {
                continue;
            }

            /* a later event of the same key sends the then current value */

            dup = 0;

            for (j = i + 1; j < n; j++) {
                e = &link->events[j];

                if (e->table == ev->table && e->key_len == ev->key_len
                    && !e->remote
                    && ngx_memcmp(e->key, ev->key, ev->key_len) == 0)
                {
                    dup = 1;
                    break;
                }
            }

            if (dup) {
                continue;
            }

            if (ev->op == NGX_OMNIROUTE_OP_DELETE) {
                ngx_omniroute_redis_push(link, ev->table, &key,
                                         NGX_OMNIROUTE_REDIS_OP_DELETE,
                                         NULL, 0, ev->time);
                continue;
            }

            if (ev->table == NGX_OMNIROUTE_T_SETTINGS && pool == NULL) {
                pool = ngx_create_pool(4096, link->log);
                if (pool == NULL) {
                    continue;
                }
            }

            if (ngx_omniroute_redis_read(link, ev->table, &key, link->local,
                                         &size, pool)
                != NGX_OK)
            {
                /* gone since: evicted (no event) or deleted (its event) */
                continue;
            }

            ngx_omniroute_redis_push(link, ev->table, &key,
                                     NGX_OMNIROUTE_REDIS_OP_SET, link->local,
                                     size, ev->time);
        }

        if (n < NGX_OMNIROUTE_REDIS_BATCH) {
            break;
        }
    }

    if (pool) {
        ngx_destroy_pool(pool);
    }
}


/*
 * Queue SET (whole value, TTL) or DEL of the key, and PUBLISH the change
 * with the node name.  Never blocks: hiredis buffers, the event loop
 * writes.
 */

void
ngx_omniroute_redis_push(ngx_omniroute_redis_link_t *link, ngx_uint_t table,
    ngx_str_t *key, ngx_uint_t op, u_char *value, size_t size,
    or_msec_t time)
{
    size_t                            klen, vlen, mlen;
    u_char                            ttl[NGX_INT64_LEN];
    const char                       *argv[5];
    size_t                            argvlen[5];
    ngx_omniroute_redis_main_conf_t  *rmcf;

    rmcf = link->rmcf;

    if (link->m.cmd.ac == NULL || !link->m.cmd.ready
        || size > NGX_OMNIROUTE_REDIS_VALUE_MAX
        || key->len > NGX_OMNIROUTE_KEY_MAX)
    {
        return;
    }

    klen = ngx_omniroute_redis_key(rmcf, link->rkey, table, key);

    if (op == NGX_OMNIROUTE_REDIS_OP_SET) {
        vlen = ngx_omniroute_redis_encode_value(link->rvalue, table, value,
                                                size, time);
        argv[0] = "SET";
        argvlen[0] = 3;
        argv[1] = (const char *) link->rkey;
        argvlen[1] = klen;
        argv[2] = (const char *) link->rvalue;
        argvlen[2] = vlen;
        argv[3] = "PX";
        argvlen[3] = 2;
        argv[4] = (const char *) ttl;
        argvlen[4] = ngx_sprintf(ttl, "%L",
                                 (int64_t) ngx_omniroute_redis_ttl(rmcf,
                                              table, value, size,
                                              ngx_omniroute_now()))
                     - ttl;

        if (ngx_omniroute_redis_command(&link->m.cmd,
                                        ngx_omniroute_redis_on_reply, NULL,
                                        5, argv, argvlen)
            != NGX_OK)
        {
            return;
        }

    } else {
        argv[0] = "DEL";
        argvlen[0] = 3;
        argv[1] = (const char *) link->rkey;
        argvlen[1] = klen;

        if (ngx_omniroute_redis_command(&link->m.cmd,
                                        ngx_omniroute_redis_on_reply, NULL,
                                        2, argv, argvlen)
            != NGX_OK)
        {
            return;
        }

        size = 0;
    }

    mlen = ngx_omniroute_redis_encode_msg(link->msg, &rmcf->node, op, table,
                                          key, value, size, time);

    argv[0] = "PUBLISH";
    argvlen[0] = 7;
    argv[1] = (const char *) rmcf->channel.data;
    argvlen[1] = rmcf->channel.len;
    argv[2] = (const char *) link->msg;
    argvlen[2] = mlen;

    (void) ngx_omniroute_redis_command(&link->m.cmd,
                                       ngx_omniroute_redis_on_reply,
                                       NULL, 3, argv, argvlen);

    (void) ngx_atomic_fetch_add(&link->stats->published, 1);
}


/* at exit: write what is queued, waiting at most ~200 ms */

static void
ngx_omniroute_redis_flush(ngx_omniroute_redis_link_t *link)
{
    int             done;
    ngx_uint_t      i;
    redisContext   *c;
    struct pollfd   pfd;

    c = &link->m.cmd.ac->c;

    for (i = 0; i < 4; i++) {

        done = 0;

        if (redisBufferWrite(c, &done) == REDIS_ERR || done) {
            return;
        }

        pfd.fd = c->fd;
        pfd.events = POLLOUT;
        pfd.revents = 0;

        if (poll(&pfd, 1, 50) <= 0) {
            return;
        }
    }
}


/* full sync */

static void
ngx_omniroute_redis_start_sync(ngx_omniroute_redis_link_t *link)
{
    if (link->sync_pool) {
        ngx_destroy_pool(link->sync_pool);
    }

    link->sync_pool = ngx_create_pool(16384, link->log);
    if (link->sync_pool == NULL) {
        ngx_omniroute_redis_fail(link, "could not allocate the sync pool");
        return;
    }

    if (ngx_array_init(&link->seen, link->sync_pool, 256,
                       sizeof(ngx_omniroute_redis_seen_t))
        != NGX_OK
        || ngx_array_init(&link->push, link->sync_pool, 256,
                          sizeof(ngx_omniroute_redis_record_t))
           != NGX_OK)
    {
        ngx_omniroute_redis_fail(link, "could not allocate the sync pool");
        return;
    }

    link->syncing = 1;
    link->pushing = 0;
    link->loaded = 0;

    /* before the SCAN: a flush from now on changes what we learn here */
    ngx_omniroute_redis_epoch_learn(link);

    if (link->state != NGX_OMNIROUTE_REDIS_DOWN
        && ngx_omniroute_redis_conn_load(&link->m, &link->rmcf->prefix, "*",
                                         NULL, link->sync_pool,
                                         ngx_omniroute_redis_load_batch,
                                         ngx_omniroute_redis_load_done)
           != NGX_OK)
    {
        ngx_omniroute_redis_fail(link, "could not allocate the sync pool");
    }
}


/*
 * The epoch key tells whether Redis still holds what the nodes wrote
 * (docs/cluster.md, "When Redis misbehaves").  Every full sync sets it if
 * it is missing (SET NX, a token of this node and this moment) and reads
 * what it holds; every keepalive the node reads it again.  Gone (FLUSHALL,
 * FLUSHDB, a restart or failover without the data, expiry) or changed
 * (another node found it gone first and set its own) means the records
 * may be gone too: the node runs a full sync, which pushes everything
 * Redis lacks.  Within a keepalive or two, Redis holds the cluster's state
 * again, before a restarting node needs it.
 */

static void
ngx_omniroute_redis_epoch_learn(ngx_omniroute_redis_link_t *link)
{
    u_char                           *p;
    const char                       *argv[6];
    size_t                            argvlen[6];
    u_char                            ttl[NGX_INT64_LEN];
    u_char                            token[NGX_OMNIROUTE_REDIS_EPOCH_MAX];
    ngx_omniroute_redis_main_conf_t  *rmcf;

    rmcf = link->rmcf;

    link->epoch_at = ngx_current_msec + rmcf->keepalive;

    p = ngx_snprintf(token, sizeof(token), "%V:%L:%08xD", &rmcf->node,
                     (int64_t) ngx_omniroute_now(), (uint32_t) ngx_random());

    argv[0] = "SET";
    argvlen[0] = 3;
    argv[1] = (const char *) link->epoch_key.data;
    argvlen[1] = link->epoch_key.len;
    argv[2] = (const char *) token;
    argvlen[2] = p - token;
    argv[3] = "NX";
    argvlen[3] = 2;
    argv[4] = "PX";
    argvlen[4] = 2;
    argv[5] = (const char *) ttl;
    argvlen[5] = ngx_sprintf(ttl, "%L", (int64_t) NGX_OMNIROUTE_REDIS_TTL_MAX)
                 - ttl;

    if (ngx_omniroute_redis_command(&link->m.cmd, ngx_omniroute_redis_on_reply,
                                    NULL, 6, argv, argvlen)
        != NGX_OK)
    {
        return;
    }

    argv[0] = "GET";
    argvlen[0] = 3;

    (void) ngx_omniroute_redis_command(&link->m.cmd,
                                       ngx_omniroute_redis_on_epoch,
                                       &ngx_omniroute_redis_epoch_learning, 2,
                                       argv, argvlen);
}


static void
ngx_omniroute_redis_epoch_check(ngx_omniroute_redis_link_t *link)
{
    const char  *argv[2];
    size_t       argvlen[2];

    link->epoch_at = ngx_current_msec + link->rmcf->keepalive;

    if (!link->epoch_known) {
        /* not learnt yet (a flush right after the SET): learn it now */
        ngx_omniroute_redis_epoch_learn(link);
        return;
    }

    argv[0] = "GET";
    argvlen[0] = 3;
    argv[1] = (const char *) link->epoch_key.data;
    argvlen[1] = link->epoch_key.len;

    (void) ngx_omniroute_redis_command(&link->m.cmd,
                                       ngx_omniroute_redis_on_epoch,
                                       &ngx_omniroute_redis_epoch_checking, 2,
                                       argv, argvlen);
}


static void
ngx_omniroute_redis_on_epoch(redisAsyncContext *ac, void *r, void *data)
{
    redisReply                  *reply = r;
    ngx_omniroute_redis_conn_t  *rc = ac->data;

    ngx_omniroute_redis_link_t  *link;

    ngx_omniroute_redis_replied(rc);

    link = rc->link;

    if (reply == NULL) {
        return;
    }

    if (reply->type == REDIS_REPLY_ERROR) {
        (void) ngx_atomic_fetch_add(&link->stats->errors, 1);
        ngx_omniroute_redis_log(link, NGX_LOG_ERR, "error reply: %*s",
                                reply->len, reply->str);
        return;
    }

    if (reply->type != REDIS_REPLY_NIL
        && (reply->type != REDIS_REPLY_STRING
            || reply->len > NGX_OMNIROUTE_REDIS_EPOCH_MAX))
    {
        (void) ngx_atomic_fetch_add(&link->stats->errors, 1);
        return;
    }

    if (data == &ngx_omniroute_redis_epoch_learning) {

        if (reply->type == REDIS_REPLY_NIL) {
            link->epoch_known = 0;
            return;
        }

        ngx_memcpy(link->epoch, reply->str, reply->len);
        link->epoch_len = reply->len;
        link->epoch_known = 1;
        return;
    }

    /* a check; a sync started since learns anew */

    if (link->syncing || !link->epoch_known) {
        return;
    }

    if (reply->type == REDIS_REPLY_STRING
        && (size_t) reply->len == link->epoch_len
        && ngx_memcmp(reply->str, link->epoch, link->epoch_len) == 0)
    {
        return;
    }

    link->epoch_known = 0;
    link->dirty = 1;

    (void) ngx_atomic_fetch_add(&link->stats->refills, 1);

    ngx_omniroute_redis_log(link, NGX_LOG_WARN,
                            "the state is gone from Redis (epoch key %s: "
                            "flushed, restarted or failed over?); "
                            "republishing",
                            reply->type == REDIS_REPLY_NIL ? "missing"
                                                           : "changed");
}


/* a batch of the full load: merged into the store */

static ngx_int_t
ngx_omniroute_redis_load_batch(ngx_omniroute_redis_machine_t *m,
    ngx_str_t *k, redisReply **values, ngx_uint_t n)
{
    ngx_omniroute_redis_link_t  *link = m->link;

    u_char                           *value, *colon;
    size_t                            i, size, plen;
    ngx_int_t                         table, rv;
    or_msec_t                         time, mtime;
    ngx_str_t                         key;
    ngx_uint_t                        changed;
    const char                       *why;
    redisReply                       *v;
    ngx_omniroute_redis_seen_t       *s;
    ngx_omniroute_redis_main_conf_t  *rmcf;

    rmcf = link->rmcf;

    if (!link->syncing) {
        return NGX_OK;
    }

    plen = rmcf->prefix.len;

    for (i = 0; i < n; i++) {
        v = values[i];

        if (v->type != REDIS_REPLY_STRING) {
            continue;           /* expired since the SCAN */
        }

        colon = (k[i].len > plen)
                ? ngx_strlchr(k[i].data + plen, k[i].data + k[i].len, ':')
                : NULL;

        if (colon == NULL) {
            continue;
        }

        table = ngx_omniroute_redis_table_of(k[i].data + plen,
                                             colon - k[i].data - plen);

        if (table == NGX_ERROR || !ngx_omniroute_redis_mirrored(table)) {
            continue;
        }

        key.data = colon + 1;
        key.len = k[i].data + k[i].len - key.data;

        if (ngx_omniroute_redis_decode_value((u_char *) v->str, v->len,
                                             table, &value, &size, &time)
            != NGX_OK)
        {
            (void) ngx_atomic_fetch_add(&link->stats->errors, 1);
            continue;
        }

        rv = ngx_omniroute_redis_apply(link, table, &key, value, size, time,
                                       link->merged, &mtime, &changed, &why);

        if (rv == NGX_ERROR) {
            (void) ngx_atomic_fetch_add(&link->stats->errors, 1);
            continue;
        }

        if (rv == NGX_ABORT) {
            /* rejected: counted, logged; ours is pushed over it */
            ngx_omniroute_redis_reject(link, table, &key, why);
            continue;
        }

        link->loaded++;
        (void) ngx_atomic_fetch_add(&link->stats->loaded, 1);

        if (changed) {
            (void) ngx_atomic_fetch_add(&link->stats->applied, 1);
        }

        if (rv == NGX_OK) {
            /* Redis has our value: nothing to push unless it changes */

            s = ngx_array_push(&link->seen);
            if (s == NULL) {
                ngx_omniroute_redis_fail(link,
                                         "could not allocate the sync pool");
                return NGX_ERROR;
            }

            s->key = ngx_omniroute_redis_key_hash(table, &key);
            s->crc = ngx_crc32_long(link->merged, size);
        }
    }

    return NGX_OK;
}


static void
ngx_omniroute_redis_load_done(ngx_omniroute_redis_machine_t *m)
{
    ngx_omniroute_redis_link_t  *link = m->link;

    if (link->syncing) {
        ngx_omniroute_redis_begin_push(link);
    }
}


/*
 * Redis's state is merged into ours: from now on every local change is
 * published (the cursor jumps to the present), and every record that
 * Redis lacks or holds older is pushed, a few per tick.
 */

static void
ngx_omniroute_redis_begin_push(ngx_omniroute_redis_link_t *link)
{
    ngx_uint_t  table;

    ngx_omniroute_redis_drain(link, 0);

    link->draining = 1;
    link->dirty = 0;
    link->pushing = 1;
    link->push_next = 0;

    for (table = 0; table < NGX_OMNIROUTE_T_COUNT; table++) {

        if (!ngx_omniroute_redis_mirrored(table)) {
            continue;
        }

        link->visit_table = table;

        (void) ngx_omniroute_store_visit(link->store, table,
                                         ngx_omniroute_redis_collect, link,
                                         link->sync_pool);
    }

    if (link->seen.nelts > 1) {
        ngx_qsort(link->seen.elts, link->seen.nelts,
                  sizeof(ngx_omniroute_redis_seen_t),
                  ngx_omniroute_redis_seen_cmp);
    }

    ngx_omniroute_redis_push_step(link);
}


static void
ngx_omniroute_redis_collect(ngx_str_t *key, void *value, size_t size,
    void *arg)
{
    ngx_omniroute_redis_link_t *link = arg;

    ngx_omniroute_redis_record_t  *rec;

    rec = ngx_array_push(&link->push);
    if (rec == NULL) {
        return;
    }

    rec->table = link->visit_table;
    rec->key = *key;            /* a copy in the sync pool */
}


static int ngx_libc_cdecl
ngx_omniroute_redis_seen_cmp(const void *a, const void *b)
{
    const ngx_omniroute_redis_seen_t  *x = a, *y = b;

    if (x->key != y->key) {
        return (x->key < y->key) ? -1 : 1;
    }

    return (x->crc < y->crc) ? -1 : (x->crc > y->crc);
}


static void
ngx_omniroute_redis_push_step(ngx_omniroute_redis_link_t *link)
{
    size_t                         size;
    uint32_t                       crc;
    uint64_t                       hash;
    or_msec_t                      time;
    ngx_uint_t                     lo, hi, mid, skip;
    ngx_omniroute_redis_seen_t    *seen;
    ngx_omniroute_redis_record_t  *rec;

    seen = link->seen.elts;

    while (link->push_next < link->push.nelts
           && link->m.cmd.pending + 2 <= link->rmcf->queue)
    {
        rec = (ngx_omniroute_redis_record_t *) link->push.elts
              + link->push_next++;

        if (ngx_omniroute_redis_read(link, rec->table, &rec->key, link->local,
                                     &size, link->sync_pool)
            != NGX_OK)
        {
            continue;
        }

        hash = ngx_omniroute_redis_key_hash(rec->table, &rec->key);
        crc = ngx_crc32_long(link->local, size);

        lo = 0;
        hi = link->seen.nelts;
        skip = 0;

        while (lo < hi) {
            mid = lo + (hi - lo) / 2;

            if (seen[mid].key < hash
                || (seen[mid].key == hash && seen[mid].crc < crc))
            {
                lo = mid + 1;

            } else {
                hi = mid;
            }
        }

        if (lo < link->seen.nelts
            && seen[lo].key == hash && seen[lo].crc == crc)
        {
            skip = 1;
        }

        if (skip) {
            continue;
        }

        time = (rec->table == NGX_OMNIROUTE_T_SETTINGS)
               ? ngx_omniroute_redis_version(link->rmcf, rec->table,
                                             &rec->key)
               : ngx_omniroute_now();

        ngx_omniroute_redis_push(link, rec->table, &rec->key,
                                 NGX_OMNIROUTE_REDIS_OP_SET, link->local,
                                 size, time);
    }

    if (link->push_next >= link->push.nelts) {
        ngx_omniroute_redis_end_sync(link);
    }
}


static void
ngx_omniroute_redis_end_sync(ngx_omniroute_redis_link_t *link)
{
    ngx_uint_t  pushed;

    pushed = link->push.nelts;

    ngx_destroy_pool(link->sync_pool);
    link->sync_pool = NULL;
    link->syncing = 0;
    link->pushing = 0;

    (void) ngx_atomic_fetch_add(&link->stats->syncs, 1);

    link->resync_at = ngx_current_msec + link->rmcf->resync;

    if (link->state != NGX_OMNIROUTE_REDIS_SYNCING) {
        return;
    }

    ngx_omniroute_redis_set_state(link, NGX_OMNIROUTE_REDIS_UP);

    link->m.backoff = link->rmcf->backoff_min;

    ngx_omniroute_redis_log(link, NGX_LOG_NOTICE,
                            "link up, %ui records loaded, %ui local records "
                            "checked", link->loaded, pushed);
}


/* remote changes */

static void
ngx_omniroute_redis_message(ngx_omniroute_redis_link_t *link, u_char *data,
    size_t len)
{
    ngx_int_t                         rv;
    or_msec_t                         mtime, lag, now;
    ngx_uint_t                        changed;
    const char                       *why;
    ngx_omniroute_redis_msg_t         msg;
    ngx_omniroute_redis_main_conf_t  *rmcf;

    rmcf = link->rmcf;

    if (ngx_omniroute_redis_decode_msg(data, len, &msg) != NGX_OK) {
        (void) ngx_atomic_fetch_add(&link->stats->errors, 1);
        return;
    }

    link->sub_seen = ngx_current_msec;

    if (msg.node.len == rmcf->node.len
        && ngx_memcmp(msg.node.data, rmcf->node.data, msg.node.len) == 0)
    {
        return;                 /* our own change or heartbeat */
    }

    if (msg.op == NGX_OMNIROUTE_REDIS_OP_HEARTBEAT
        || !ngx_omniroute_redis_mirrored(msg.table))
    {
        return;
    }

    (void) ngx_atomic_fetch_add(&link->stats->received, 1);

    now = ngx_omniroute_now();

    /* an origin time is untrusted too: no overflow, no absurd lag */
    lag = (msg.time >= 0 && msg.time <= now) ? now - msg.time : 0;

    if (msg.op == NGX_OMNIROUTE_REDIS_OP_DELETE) {
        link->stats->lag_ms = (ngx_atomic_uint_t) lag;

        if (ngx_omniroute_store_delete(link->store, msg.table, &msg.key, 1)
            == NGX_OK)
        {
            (void) ngx_atomic_fetch_add(&link->stats->applied, 1);
        }

        return;
    }

    if (msg.table == NGX_OMNIROUTE_T_SETTINGS) {
        /* versions of local changes not read yet: last writer wins */
        ngx_omniroute_redis_drain(link, link->draining);
    }

    rv = ngx_omniroute_redis_apply(link, msg.table, &msg.key, msg.value,
                                   msg.size, msg.time, link->merged, &mtime,
                                   &changed, &why);

    if (rv == NGX_ERROR) {
        (void) ngx_atomic_fetch_add(&link->stats->errors, 1);
        return;
    }

    if (rv == NGX_ABORT) {
        ngx_omniroute_redis_reject(link, msg.table, &msg.key, why);
        return;
    }

    link->stats->lag_ms = (ngx_atomic_uint_t) lag;

    if (changed) {
        (void) ngx_atomic_fetch_add(&link->stats->applied, 1);
    }

    if (rv == NGX_DECLINED && link->draining) {
        /* ours knows more: Redis and the other nodes get the merge */
        ngx_omniroute_redis_push(link, msg.table, &msg.key,
                                 NGX_OMNIROUTE_REDIS_OP_SET, link->merged,
                                 msg.size, mtime);
        (void) ngx_atomic_fetch_add(&link->stats->write_backs, 1);
    }
}


/* hiredis callbacks */

static void
ngx_omniroute_redis_on_reply(redisAsyncContext *ac, void *r, void *data)
{
    redisReply                  *reply = r;
    ngx_omniroute_redis_conn_t  *rc = ac->data;

    ngx_omniroute_redis_link_t  *link = rc->link;

    ngx_omniroute_redis_replied(rc);

    if (reply && reply->type == REDIS_REPLY_ERROR) {
        (void) ngx_atomic_fetch_add(&link->stats->errors, 1);
        ngx_omniroute_redis_log(link, NGX_LOG_ERR, "error reply: %*s",
                                reply->len, reply->str);
    }
}


static void
ngx_omniroute_redis_on_ping(redisAsyncContext *ac, void *r, void *data)
{
    redisReply                  *reply = r;
    ngx_omniroute_redis_conn_t  *rc = ac->data;

    ngx_omniroute_redis_replied(rc);

    if (reply == NULL) {
        return;
    }

    if (reply->type == REDIS_REPLY_ERROR) {
        ngx_omniroute_redis_fail(rc->link, "PING failed: %*s",
                                 ngx_min(reply->len, 256), reply->str);
        return;
    }

    ngx_omniroute_redis_conn_ready(rc);
}
