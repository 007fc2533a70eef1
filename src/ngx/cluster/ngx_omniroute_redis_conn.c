
/*
 * Copyright (C) ngx_omniroute authors
 *
 * The Redis connection machine (see ngx_omniroute_redis_int.h): one for
 * the mirror, one for the leases of each worker, one for the client key
 * budgets (worker 0).
 *
 *   DOWN --retry_at--> CONNECTING --handshakes--> UP --failure--> DOWN
 *
 *   CONNECTING, with sentinels: one connection to a sentinel (the next
 *   one after each failure) asks SENTINEL get-master-addr-by-name and
 *   then subscribes to +switch-master; the master it names (an IP
 *   literal and a port, else refused) is where the command connection
 *   and the subscriber go.  The command connection: AUTH, SELECT, ROLE
 *   (with sentinels: a master, else refused), the user's probe.  The
 *   subscriber: AUTH, SUBSCRIBE channel.
 *
 *   +switch-master for our master: the machine fails ("master switched")
 *   and reconnects at once, without waiting for a backoff.
 *
 * Failures double the backoff (equal jitter) up to backoff_max; the user
 * resets it when it considers the link healthy.  Replies are checked for
 * shape before use; nothing logged here carries a password.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_event.h>
#include <ngx_http.h>

#include "ngx_omniroute_redis_int.h"

#if (NGX_OMNIROUTE_HIREDIS_SSL)
#include <hiredis/hiredis_ssl.h>
#endif


static void ngx_omniroute_redis_conn_start(ngx_omniroute_redis_machine_t *m);
static ngx_int_t ngx_omniroute_redis_conn_connect(
    ngx_omniroute_redis_conn_t *rc, ngx_omniroute_redis_addr_t *addr);
static void ngx_omniroute_redis_conn_free(ngx_omniroute_redis_conn_t *rc);
static ngx_int_t ngx_omniroute_redis_conn_auth(ngx_omniroute_redis_conn_t *rc);
static void ngx_omniroute_redis_conn_up(ngx_omniroute_redis_machine_t *m);
static void ngx_omniroute_redis_conn_on_connect(const redisAsyncContext *ac,
    int status);
static void ngx_omniroute_redis_conn_on_disconnect(
    const redisAsyncContext *ac, int status);
static void ngx_omniroute_redis_conn_on_handshake(redisAsyncContext *ac,
    void *r, void *data);
static void ngx_omniroute_redis_conn_on_role(redisAsyncContext *ac, void *r,
    void *data);
static void ngx_omniroute_redis_conn_on_subscribe(redisAsyncContext *ac,
    void *r, void *data);
static void ngx_omniroute_redis_conn_scan(ngx_omniroute_redis_machine_t *m);
static void ngx_omniroute_redis_conn_next(ngx_omniroute_redis_machine_t *m);
static void ngx_omniroute_redis_conn_on_scan(redisAsyncContext *ac, void *r,
    void *data);
static void ngx_omniroute_redis_conn_on_mget(redisAsyncContext *ac, void *r,
    void *data);
static void ngx_omniroute_redis_conn_on_master(redisAsyncContext *ac,
    void *r, void *data);
static void ngx_omniroute_redis_conn_on_switch(redisAsyncContext *ac,
    void *r, void *data);
static void ngx_omniroute_redis_conn_on_pong(redisAsyncContext *ac, void *r,
    void *data);


void
ngx_omniroute_redis_conn_init(ngx_omniroute_redis_machine_t *m,
    ngx_omniroute_redis_main_conf_t *rmcf, ngx_log_t *log, void *link,
    const char *name)
{
    m->rmcf = rmcf;
    m->log = log;
    m->link = link;

    m->cmd.machine = m;
    m->cmd.link = link;
    m->cmd.name = name;
    m->sub.machine = m;
    m->sub.link = link;
    m->sub.name = "subscriber";
    m->sentinel.machine = m;
    m->sentinel.link = link;
    m->sentinel.name = "sentinel";

    m->state = NGX_OMNIROUTE_REDIS_M_DOWN;
    m->backoff = rmcf->backoff_min;

    if (rmcf->host) {
        (void) ngx_cpystrn(m->master.host, rmcf->host,
                           sizeof(m->master.host));
        m->master.port = rmcf->port;
    }

    m->next = (ngx_uint_t) ngx_random();
}


void
ngx_omniroute_redis_conn_open(ngx_omniroute_redis_machine_t *m)
{
    const char                       *argv[3];
    size_t                            argvlen[3];
    ngx_omniroute_redis_addr_t       *s;
    ngx_omniroute_redis_main_conf_t  *rmcf;

    rmcf = m->rmcf;

    m->state = NGX_OMNIROUTE_REDIS_M_CONNECTING;
    m->state_at = ngx_current_msec;
    m->switched = 0;

    if (rmcf->sentinels == NULL) {
        ngx_omniroute_redis_conn_start(m);
        return;
    }

    /* ask a sentinel for the master, then follow its switches */

    s = rmcf->sentinels->elts;
    s = &s[m->next % rmcf->sentinels->nelts];

    if (ngx_omniroute_redis_conn_connect(&m->sentinel, s) != NGX_OK) {
        ngx_omniroute_redis_conn_fail(m, "could not connect to sentinel "
                                      "%s:%i", s->host, s->port);
        return;
    }

    argv[0] = "SENTINEL";
    argvlen[0] = 8;
    argv[1] = "get-master-addr-by-name";
    argvlen[1] = sizeof("get-master-addr-by-name") - 1;
    argv[2] = (const char *) rmcf->master.data;
    argvlen[2] = rmcf->master.len;

    if (ngx_omniroute_redis_conn_send(&m->sentinel,
                                      ngx_omniroute_redis_conn_on_master,
                                      s, 3, argv, argvlen)
        != NGX_OK)
    {
        ngx_omniroute_redis_conn_fail(m, "could not ask sentinel %s:%i",
                                      s->host, s->port);
        return;
    }

    argv[0] = "SUBSCRIBE";
    argvlen[0] = 9;
    argv[1] = "+switch-master";
    argvlen[1] = sizeof("+switch-master") - 1;

    /* a subscription's callback stays registered: not counted */

    if (redisAsyncCommandArgv(m->sentinel.ac,
                              ngx_omniroute_redis_conn_on_switch, NULL, 2,
                              argv, argvlen)
        != REDIS_OK)
    {
        ngx_omniroute_redis_conn_fail(m, "could not subscribe to sentinel "
                                      "%s:%i", s->host, s->port);
    }
}


/* the master is known: the command connection and the subscriber */

static void
ngx_omniroute_redis_conn_start(ngx_omniroute_redis_machine_t *m)
{
    u_char                            db[NGX_INT_T_LEN];
    const char                       *argv[2];
    size_t                            argvlen[2];
    ngx_omniroute_redis_main_conf_t  *rmcf;

    rmcf = m->rmcf;

    if (ngx_omniroute_redis_conn_connect(&m->cmd, &m->master) != NGX_OK
        || (m->channel.len
            && ngx_omniroute_redis_conn_connect(&m->sub, &m->master)
               != NGX_OK))
    {
        ngx_omniroute_redis_conn_fail(m, "could not connect");
        return;
    }

    /* hiredis queues these until the connection is established */

    if (ngx_omniroute_redis_conn_auth(&m->cmd) != NGX_OK
        || (m->channel.len
            && ngx_omniroute_redis_conn_auth(&m->sub) != NGX_OK))
    {
        ngx_omniroute_redis_conn_fail(m, "could not send AUTH");
        return;
    }

    if (rmcf->db) {
        argv[0] = "SELECT";
        argvlen[0] = 6;
        argv[1] = (const char *) db;
        argvlen[1] = ngx_sprintf(db, "%i", rmcf->db) - db;

        if (ngx_omniroute_redis_conn_send(&m->cmd,
                                          ngx_omniroute_redis_conn_on_handshake,
                                          "SELECT", 2, argv, argvlen)
            != NGX_OK)
        {
            ngx_omniroute_redis_conn_fail(m, "could not send SELECT");
            return;
        }
    }

    if (rmcf->sentinels) {
        argv[0] = "ROLE";
        argvlen[0] = 4;

        if (ngx_omniroute_redis_conn_send(&m->cmd,
                                          ngx_omniroute_redis_conn_on_role,
                                          NULL, 1, argv, argvlen)
            != NGX_OK)
        {
            ngx_omniroute_redis_conn_fail(m, "could not send ROLE");
            return;
        }
    }

    m->probe(&m->cmd);

    if (m->state != NGX_OMNIROUTE_REDIS_M_CONNECTING || m->channel.len == 0) {
        return;
    }

    argv[0] = "SUBSCRIBE";
    argvlen[0] = 9;
    argv[1] = (const char *) m->channel.data;
    argvlen[1] = m->channel.len;

    if (redisAsyncCommandArgv(m->sub.ac,
                              ngx_omniroute_redis_conn_on_subscribe, NULL, 2,
                              argv, argvlen)
        != REDIS_OK)
    {
        ngx_omniroute_redis_conn_fail(m, "could not send SUBSCRIBE");
    }
}


/* AUTH password, or AUTH user password (an ACL user, Redis 6) */

static ngx_int_t
ngx_omniroute_redis_conn_auth(ngx_omniroute_redis_conn_t *rc)
{
    int                               n;
    const char                       *argv[3];
    size_t                            argvlen[3];
    ngx_omniroute_redis_main_conf_t  *rmcf;

    rmcf = rc->machine->rmcf;

    if (rmcf->password.len == 0) {
        return NGX_OK;
    }

    n = 0;
    argv[n] = "AUTH";
    argvlen[n++] = 4;

    if (rmcf->user.len) {
        argv[n] = (const char *) rmcf->user.data;
        argvlen[n++] = rmcf->user.len;
    }

    argv[n] = (const char *) rmcf->password.data;
    argvlen[n++] = rmcf->password.len;

    return ngx_omniroute_redis_conn_send(rc,
                                         ngx_omniroute_redis_conn_on_handshake,
                                         "AUTH", n, argv, argvlen);
}


static ngx_int_t
ngx_omniroute_redis_conn_connect(ngx_omniroute_redis_conn_t *rc,
    ngx_omniroute_redis_addr_t *addr)
{
    redisAsyncContext                *ac;
    ngx_omniroute_redis_machine_t    *m;
    ngx_omniroute_redis_main_conf_t  *rmcf;

    m = rc->machine;
    rmcf = m->rmcf;

    rc->pending = 0;
    rc->ready = 0;
    rc->progress = ngx_current_msec;

    if (rmcf->unix_path && rc != &m->sentinel) {
        ac = redisAsyncConnectUnix((const char *) rmcf->unix_path);

    } else {
        ac = redisAsyncConnect((const char *) addr->host, (int) addr->port);
    }

    if (ac == NULL) {
        return NGX_ERROR;
    }

    if (ac->err) {
        ngx_log_debug2(NGX_LOG_DEBUG_HTTP, m->log, 0,
                       "omniroute redis %s connection: %s", rc->name,
                       ac->errstr);
        redisAsyncFree(ac);
        return NGX_ERROR;
    }

#if (NGX_OMNIROUTE_HIREDIS_SSL)

    if (rmcf->ssl && rc != &m->sentinel
        && redisInitiateSSLWithContext(&ac->c, rmcf->ssl) != REDIS_OK)
    {
        ngx_log_error(NGX_LOG_ERR, m->log, 0,
                      "omniroute redis \"%V\": %s connection: TLS: %s",
                      &rmcf->addr, rc->name, ac->c.errstr);
        redisAsyncFree(ac);
        return NGX_ERROR;
    }

#endif

    if (ngx_omniroute_redis_attach(rc, ac, m->log) != NGX_OK) {
        redisAsyncFree(ac);
        return NGX_ERROR;
    }

    /* the connect callback is what asks for the first write event */

    (void) redisAsyncSetDisconnectCallback(ac,
                                       ngx_omniroute_redis_conn_on_disconnect);
    (void) redisAsyncSetConnectCallback(ac,
                                        ngx_omniroute_redis_conn_on_connect);

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, m->log, 0,
                   "omniroute redis %s connection fd:%d", rc->name,
                   rc->c->fd);

    return NGX_OK;
}


/* frees the context now, or when its running callback returns */

static void
ngx_omniroute_redis_conn_free(ngx_omniroute_redis_conn_t *rc)
{
    redisAsyncContext  *ac;

    ac = rc->ac;
    rc->ready = 0;
    rc->pending = 0;

    if (ac == NULL) {
        return;
    }

    redisAsyncFree(ac);
}


void
ngx_omniroute_redis_conn_tick(ngx_omniroute_redis_machine_t *m)
{
    ngx_msec_t  now;

    if (m->exiting) {
        return;
    }

    now = ngx_current_msec;

    switch (m->state) {

    case NGX_OMNIROUTE_REDIS_M_DOWN:
        if (!ngx_exiting && (ngx_msec_int_t) (now - m->retry_at) >= 0) {
            ngx_omniroute_redis_conn_open(m);
        }

        break;

    case NGX_OMNIROUTE_REDIS_M_CONNECTING:
        if (now - m->state_at >= m->rmcf->timeout) {
            ngx_omniroute_redis_conn_fail(m, "timed out connecting (%M ms)",
                                          m->rmcf->timeout);
        }

        break;

    default:
        break;
    }
}


/*
 * The link is down: the user hears why first, then every context is
 * freed (hiredis answers their pending calls with NULL replies) and a
 * reconnection is due after the backoff (at once after a switch).
 */

void ngx_cdecl
ngx_omniroute_redis_conn_fail(ngx_omniroute_redis_machine_t *m,
    const char *fmt, ...)
{
    u_char      *p, buf[NGX_MAX_ERROR_STR];
    va_list      args;
    ngx_msec_t   delay;

    if (m->state == NGX_OMNIROUTE_REDIS_M_DOWN) {
        return;
    }

    va_start(args, fmt);
    p = ngx_vslprintf(buf, buf + sizeof(buf), fmt, args);
    va_end(args);

    m->state = NGX_OMNIROUTE_REDIS_M_DOWN;
    m->state_at = ngx_current_msec;
    m->loading = 0;

    if (!m->exiting) {
        m->down(m, buf, p - buf);
    }

    ngx_omniroute_redis_conn_free(&m->cmd);
    ngx_omniroute_redis_conn_free(&m->sub);
    ngx_omniroute_redis_conn_free(&m->sentinel);

    m->next++;

    if (m->switched) {
        m->retry_at = ngx_current_msec;
        return;
    }

    /* capped exponential backoff, "equal jitter" */

    delay = m->backoff / 2 + (ngx_msec_t) ngx_random() % (m->backoff / 2 + 1);

    m->retry_at = ngx_current_msec + delay;
    m->backoff = ngx_min(m->backoff * 2, m->rmcf->backoff_max);
}


/* exit_process: everything freed, no callback reaches the user */

void
ngx_omniroute_redis_conn_close(ngx_omniroute_redis_machine_t *m)
{
    m->exiting = 1;
    m->state = NGX_OMNIROUTE_REDIS_M_DOWN;

    ngx_omniroute_redis_conn_free(&m->cmd);
    ngx_omniroute_redis_conn_free(&m->sub);
    ngx_omniroute_redis_conn_free(&m->sentinel);
}


ngx_int_t
ngx_omniroute_redis_conn_send(ngx_omniroute_redis_conn_t *rc,
    redisCallbackFn *fn, void *data, int argc, const char **argv,
    const size_t *argvlen)
{
    if (rc->ac == NULL
        || redisAsyncCommandArgv(rc->ac, fn, data, argc, argv, argvlen)
           != REDIS_OK)
    {
        return NGX_ERROR;
    }

    if (rc->pending++ == 0) {
        rc->progress = ngx_current_msec;
    }

    return NGX_OK;
}


void
ngx_omniroute_redis_conn_replied(ngx_omniroute_redis_conn_t *rc)
{
    if (rc->pending) {
        rc->pending--;
    }

    rc->progress = ngx_current_msec;
}


/* a probe for a user that needs nothing but a server that answers */

void
ngx_omniroute_redis_conn_ping(ngx_omniroute_redis_conn_t *rc)
{
    const char  *argv[1];
    size_t       argvlen[1];

    argv[0] = "PING";
    argvlen[0] = 4;

    if (ngx_omniroute_redis_conn_send(rc, ngx_omniroute_redis_conn_on_pong,
                                      NULL, 1, argv, argvlen)
        != NGX_OK)
    {
        ngx_omniroute_redis_conn_fail(rc->machine, "could not send PING");
    }
}


static void
ngx_omniroute_redis_conn_on_pong(redisAsyncContext *ac, void *r, void *data)
{
    redisReply                  *reply = r;
    ngx_omniroute_redis_conn_t  *rc = ac->data;

    ngx_omniroute_redis_conn_replied(rc);

    if (reply == NULL) {
        return;
    }

    if (reply->type == REDIS_REPLY_ERROR) {
        ngx_omniroute_redis_conn_fail(rc->machine, "PING failed: %*s",
                                      ngx_min(reply->len, 256), reply->str);
        return;
    }

    ngx_omniroute_redis_conn_ready(rc);
}


/* the user's probe succeeded, or the subscriber is subscribed */

void
ngx_omniroute_redis_conn_ready(ngx_omniroute_redis_conn_t *rc)
{
    rc->ready = 1;
    rc->progress = ngx_current_msec;

    ngx_omniroute_redis_conn_up(rc->machine);
}


static void
ngx_omniroute_redis_conn_up(ngx_omniroute_redis_machine_t *m)
{
    if (m->state != NGX_OMNIROUTE_REDIS_M_CONNECTING || !m->cmd.ready
        || (m->channel.len && !m->sub.ready))
    {
        return;
    }

    m->state = NGX_OMNIROUTE_REDIS_M_UP;
    m->state_at = ngx_current_msec;

    m->up(m);
}


/*
 * A keyspace load: SCAN <prefix><match> from cursor 0, COUNT 512, an MGET
 * per batch (the pool, the user's, holds the batch's keys until its
 * reply).
 */

ngx_int_t
ngx_omniroute_redis_conn_load(ngx_omniroute_redis_machine_t *m,
    ngx_str_t *prefix, const char *match, ngx_str_t *skip, ngx_pool_t *pool,
    ngx_omniroute_redis_batch_pt batch, ngx_omniroute_redis_loaded_pt loaded)
{
    u_char  *p;

    if (ngx_array_init(&m->load_keys, pool, 64, sizeof(ngx_str_t))
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    /* the prefix has no glob characters (checked at configuration) */

    p = ngx_cpymem(m->pattern, prefix->data, prefix->len);
    p = ngx_cpystrn(p, (u_char *) match, 16);
    m->pattern_len = p - m->pattern;

    m->load_pool = pool;
    m->load_skip = skip ? *skip : (ngx_str_t) ngx_null_string;
    m->batch = batch;
    m->loaded = loaded;
    m->loading = 1;
    m->cursor[0] = '0';
    m->cursor[1] = '\0';

    ngx_omniroute_redis_conn_scan(m);

    return NGX_OK;
}


static void
ngx_omniroute_redis_conn_scan(ngx_omniroute_redis_machine_t *m)
{
    const char  *argv[6];
    size_t       argvlen[6];
    u_char       count[NGX_INT_T_LEN];

    argv[0] = "SCAN";
    argvlen[0] = 4;
    argv[1] = (const char *) m->cursor;
    argvlen[1] = ngx_strlen(m->cursor);
    argv[2] = "MATCH";
    argvlen[2] = 5;
    argv[3] = (const char *) m->pattern;
    argvlen[3] = m->pattern_len;
    argv[4] = "COUNT";
    argvlen[4] = 5;
    argv[5] = (const char *) count;
    argvlen[5] = ngx_sprintf(count, "%d", NGX_OMNIROUTE_REDIS_SCAN_COUNT)
                 - count;

    if (ngx_omniroute_redis_conn_send(&m->cmd,
                                      ngx_omniroute_redis_conn_on_scan, NULL,
                                      6, argv, argvlen)
        != NGX_OK)
    {
        ngx_omniroute_redis_conn_fail(m, "could not send SCAN");
    }
}


static void
ngx_omniroute_redis_conn_next(ngx_omniroute_redis_machine_t *m)
{
    if (ngx_strcmp(m->cursor, "0") != 0) {
        ngx_omniroute_redis_conn_scan(m);
        return;
    }

    m->loading = 0;
    m->loaded(m);
}


static void
ngx_omniroute_redis_conn_on_scan(redisAsyncContext *ac, void *r, void *data)
{
    redisReply                  *reply = r;
    ngx_omniroute_redis_conn_t  *rc = ac->data;

    size_t                          i, n;
    ngx_str_t                      *k;
    redisReply                     *cur, *keys, *key;
    const char                    **argv;
    size_t                         *argvlen;
    ngx_omniroute_redis_machine_t  *m;

    ngx_omniroute_redis_conn_replied(rc);

    m = rc->machine;

    if (reply == NULL || !m->loading) {
        return;
    }

    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2
        || reply->element[0]->type != REDIS_REPLY_STRING
        || reply->element[0]->len >= sizeof(m->cursor)
        || reply->element[1]->type != REDIS_REPLY_ARRAY)
    {
        ngx_omniroute_redis_conn_fail(m, "SCAN failed: %*s",
                                      reply->type == REDIS_REPLY_ERROR
                                      ? ngx_min(reply->len, 256) : 16,
                                      reply->type == REDIS_REPLY_ERROR
                                      ? reply->str : "unexpected reply");
        return;
    }

    cur = reply->element[0];
    keys = reply->element[1];

    ngx_memcpy(m->cursor, cur->str, cur->len);
    m->cursor[cur->len] = '\0';

    /* the names, for the MGET reply; then MGET them all */

    m->load_keys.nelts = 0;

    argv = ngx_palloc(m->load_pool, (keys->elements + 1) * sizeof(char *));
    argvlen = ngx_palloc(m->load_pool, (keys->elements + 1) * sizeof(size_t));

    if (argv == NULL || argvlen == NULL) {
        ngx_omniroute_redis_conn_fail(m, "no memory for a load");
        return;
    }

    argv[0] = "MGET";
    argvlen[0] = 4;
    n = 1;

    for (i = 0; i < keys->elements; i++) {
        key = keys->element[i];

        if (key->type != REDIS_REPLY_STRING
            || (key->len == m->load_skip.len
                && ngx_memcmp(key->str, m->load_skip.data, key->len) == 0))
        {
            continue;
        }

        k = ngx_array_push(&m->load_keys);
        if (k == NULL) {
            ngx_omniroute_redis_conn_fail(m, "no memory for a load");
            return;
        }

        k->len = key->len;
        k->data = ngx_pnalloc(m->load_pool, k->len);

        if (k->data == NULL) {
            ngx_omniroute_redis_conn_fail(m, "no memory for a load");
            return;
        }

        ngx_memcpy(k->data, key->str, k->len);

        argv[n] = (const char *) k->data;
        argvlen[n++] = k->len;
    }

    if (n == 1) {
        ngx_omniroute_redis_conn_next(m);
        return;
    }

    if (ngx_omniroute_redis_conn_send(&m->cmd,
                                      ngx_omniroute_redis_conn_on_mget, NULL,
                                      (int) n, argv, argvlen)
        != NGX_OK)
    {
        ngx_omniroute_redis_conn_fail(m, "could not send MGET");
    }
}


static void
ngx_omniroute_redis_conn_on_mget(redisAsyncContext *ac, void *r, void *data)
{
    redisReply                  *reply = r;
    ngx_omniroute_redis_conn_t  *rc = ac->data;

    ngx_omniroute_redis_machine_t  *m;

    ngx_omniroute_redis_conn_replied(rc);

    m = rc->machine;

    if (reply == NULL || !m->loading) {
        return;
    }

    if (reply->type != REDIS_REPLY_ARRAY
        || reply->elements != m->load_keys.nelts)
    {
        ngx_omniroute_redis_conn_fail(m, "MGET failed: %*s",
                                      reply->type == REDIS_REPLY_ERROR
                                      ? ngx_min(reply->len, 256) : 16,
                                      reply->type == REDIS_REPLY_ERROR
                                      ? reply->str : "unexpected reply");
        return;
    }

    if (m->batch(m, m->load_keys.elts, reply->element, reply->elements)
        != NGX_OK)
    {
        return;
    }

    if (m->loading) {
        ngx_omniroute_redis_conn_next(m);
    }
}


/*
 * An address from a sentinel (untrusted): an IP literal, no host name (it
 * would be resolved by a blocking call), and a port.
 */

ngx_int_t
ngx_omniroute_redis_conn_addr(u_char *host, size_t len, ngx_int_t port,
    ngx_omniroute_redis_addr_t *addr)
{
#if (NGX_HAVE_INET6)
    u_char  buf[16];
#endif

    if (len == 0 || len > NGX_INET6_ADDRSTRLEN || port < 1 || port > 65535) {
        return NGX_ERROR;
    }

    if (ngx_inet_addr(host, len) == INADDR_NONE) {
#if (NGX_HAVE_INET6)
        if (ngx_inet6_addr(host, len, buf) != NGX_OK) {
            return NGX_ERROR;
        }
#else
        return NGX_ERROR;
#endif
    }

    ngx_memcpy(addr->host, host, len);
    addr->host[len] = '\0';
    addr->port = port;

    return NGX_OK;
}


/* hiredis callbacks */

static void
ngx_omniroute_redis_conn_on_connect(const redisAsyncContext *ac, int status)
{
    ngx_omniroute_redis_conn_t  *rc = ac->data;

    if (status == REDIS_OK) {
        rc->progress = ngx_current_msec;
        return;
    }

    /* hiredis frees the context when this returns: do not free it here */

    rc->ac = NULL;

    ngx_omniroute_redis_conn_fail(rc->machine, "%s connection failed: %s",
                                  rc->name, ac->errstr);
}


static void
ngx_omniroute_redis_conn_on_disconnect(const redisAsyncContext *ac,
    int status)
{
    ngx_omniroute_redis_conn_t  *rc = ac->data;

    if (rc->machine->exiting) {
        return;
    }

    ngx_omniroute_redis_conn_fail(rc->machine, "%s connection lost: %s",
                                  rc->name,
                                  (status == REDIS_OK || ac->errstr[0] == '\0')
                                  ? "closed" : ac->errstr);
}


static void
ngx_omniroute_redis_conn_on_handshake(redisAsyncContext *ac, void *r,
    void *data)
{
    redisReply                  *reply = r;
    ngx_omniroute_redis_conn_t  *rc = ac->data;

    ngx_omniroute_redis_conn_replied(rc);

    if (reply == NULL || reply->type != REDIS_REPLY_ERROR) {
        return;
    }

    /* the reply never contains the password */

    ngx_omniroute_redis_conn_fail(rc->machine, "%s failed: %*s",
                                  (char *) data,
                                  ngx_min(reply->len, 256), reply->str);
}


/* with sentinels: the server must be the master (a stale answer is not) */

static void
ngx_omniroute_redis_conn_on_role(redisAsyncContext *ac, void *r, void *data)
{
    redisReply                  *reply = r;
    ngx_omniroute_redis_conn_t  *rc = ac->data;

    redisReply  *role;

    ngx_omniroute_redis_conn_replied(rc);

    if (reply == NULL) {
        return;
    }

    if (reply->type == REDIS_REPLY_ARRAY && reply->elements > 0) {
        role = reply->element[0];

        if (role->type == REDIS_REPLY_STRING && role->len == 6
            && ngx_strncmp(role->str, "master", 6) == 0)
        {
            return;
        }
    }

    ngx_omniroute_redis_conn_fail(rc->machine, "%s:%i is not the master "
                                  "(ROLE)", rc->machine->master.host,
                                  rc->machine->master.port);
}


static void
ngx_omniroute_redis_conn_on_subscribe(redisAsyncContext *ac, void *r,
    void *data)
{
    redisReply                  *reply = r;
    ngx_omniroute_redis_conn_t  *rc = ac->data;

    redisReply                     *type;
    ngx_omniroute_redis_machine_t  *m;

    m = rc->machine;

    if (reply == NULL || reply->type != REDIS_REPLY_ARRAY
        || reply->elements < 3)
    {
        if (reply && reply->type == REDIS_REPLY_ERROR) {
            ngx_omniroute_redis_conn_fail(m, "SUBSCRIBE failed: %*s",
                                          ngx_min(reply->len, 256),
                                          reply->str);
        }

        return;
    }

    type = reply->element[0];

    if (type->type != REDIS_REPLY_STRING) {
        return;
    }

    if (type->len == 7 && ngx_strncmp(type->str, "message", 7) == 0) {

        if (reply->element[2]->type == REDIS_REPLY_STRING) {
            rc->progress = ngx_current_msec;
            m->message(m, (u_char *) reply->element[2]->str,
                       reply->element[2]->len);
        }

        return;
    }

    if (type->len == 9 && ngx_strncmp(type->str, "subscribe", 9) == 0) {
        ngx_omniroute_redis_conn_ready(rc);
    }
}


/* SENTINEL get-master-addr-by-name: [ip, port], or nil */

static void
ngx_omniroute_redis_conn_on_master(redisAsyncContext *ac, void *r,
    void *data)
{
    redisReply                  *reply = r;
    ngx_omniroute_redis_conn_t  *rc = ac->data;
    ngx_omniroute_redis_addr_t  *s = data;

    ngx_int_t                       port;
    redisReply                     *host, *p;
    ngx_omniroute_redis_machine_t  *m;

    ngx_omniroute_redis_conn_replied(rc);

    m = rc->machine;

    if (reply == NULL || m->state != NGX_OMNIROUTE_REDIS_M_CONNECTING) {
        return;
    }

    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2
        || reply->element[0]->type != REDIS_REPLY_STRING
        || reply->element[1]->type != REDIS_REPLY_STRING)
    {
        ngx_omniroute_redis_conn_fail(m, "sentinel %s:%i knows no master "
                                      "\"%V\"", s->host, s->port,
                                      &m->rmcf->master);
        return;
    }

    host = reply->element[0];
    p = reply->element[1];
    port = ngx_atoi((u_char *) p->str, p->len);

    if (ngx_omniroute_redis_conn_addr((u_char *) host->str, host->len, port,
                                      &m->master)
        != NGX_OK)
    {
        ngx_omniroute_redis_conn_fail(m, "sentinel %s:%i named an invalid "
                                      "master address (an IP address and a "
                                      "port are required)", s->host,
                                      s->port);
        return;
    }

    rc->ready = 1;

    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, m->log, 0,
                   "omniroute redis %s: master %s:%i", m->cmd.name,
                   m->master.host, m->master.port);

    ngx_omniroute_redis_conn_start(m);
}


/*
 * +switch-master "<name> <old ip> <old port> <new ip> <new port>": for our
 * master, reconnect at once (the next sentinel is asked where it is now).
 */

static void
ngx_omniroute_redis_conn_on_switch(redisAsyncContext *ac, void *r,
    void *data)
{
    redisReply                  *reply = r;
    ngx_omniroute_redis_conn_t  *rc = ac->data;

    u_char                         *s, *last, *f[5];
    size_t                          len[5];
    ngx_uint_t                      n;
    redisReply                     *type, *msg;
    ngx_omniroute_redis_machine_t  *m;

    m = rc->machine;

    if (reply == NULL || reply->type != REDIS_REPLY_ARRAY
        || reply->elements < 3
        || reply->element[0]->type != REDIS_REPLY_STRING
        || reply->element[2]->type != REDIS_REPLY_STRING)
    {
        if (reply && reply->type == REDIS_REPLY_ERROR) {
            ngx_omniroute_redis_conn_fail(m, "sentinel SUBSCRIBE failed: "
                                          "%*s", ngx_min(reply->len, 256),
                                          reply->str);
        }

        return;
    }

    type = reply->element[0];
    msg = reply->element[2];

    if (type->len != 7 || ngx_strncmp(type->str, "message", 7) != 0) {
        return;
    }

    s = (u_char *) msg->str;
    last = s + msg->len;

    for (n = 0; n < 5 && s < last; n++) {
        f[n] = s;

        while (s < last && *s != ' ') {
            s++;
        }

        len[n] = s - f[n];

        if (s < last) {
            s++;
        }
    }

    if (n != 5 || len[0] != m->rmcf->master.len
        || ngx_memcmp(f[0], m->rmcf->master.data, len[0]) != 0)
    {
        return;                 /* another master, or not a switch */
    }

    if (m->state == NGX_OMNIROUTE_REDIS_M_DOWN) {
        return;
    }

    ngx_log_error(NGX_LOG_NOTICE, m->log, 0,
                  "omniroute redis \"%V\": %s: sentinel: master \"%V\" "
                  "switched to %*s:%*s", &m->rmcf->addr, m->cmd.name,
                  &m->rmcf->master, ngx_min(len[3], NGX_INET6_ADDRSTRLEN),
                  f[3], ngx_min(len[4], 5), f[4]);

    m->switched = 1;

    ngx_omniroute_redis_conn_fail(m, "master \"%V\" switched",
                                  &m->rmcf->master);
}
