
/*
 * Copyright (C) ngx_omniroute authors
 *
 * Redis mirror: the hiredis <-> nginx event adapter (see
 * ngx_omniroute_redis_int.h), after nchan's redis_nginx_adapter.c.
 *
 * Each hiredis async context's socket is wrapped in an nginx connection
 * from ngx_get_connection(); hiredis calls addRead/delRead/addWrite/
 * delWrite when it wants events and our handlers call
 * redisAsyncHandleRead/Write.  hiredis owns the descriptor and closes it
 * in redisFree(), so the cleanup hook only removes the events and timers
 * and returns the connection with fd = -1: closing it here too would close
 * a descriptor number that may already belong to someone else, and
 * nginx would report an "open socket left" for a connection never freed.
 * Reads are drained (epoll is edge-triggered and hiredis reads 16 KiB a
 * call).
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_event.h>
#include <ngx_http.h>

#include <sys/ioctl.h>

#include "ngx_omniroute_redis_int.h"


static void ngx_omniroute_redis_add_read(void *privdata);
static void ngx_omniroute_redis_del_read(void *privdata);
static void ngx_omniroute_redis_add_write(void *privdata);
static void ngx_omniroute_redis_del_write(void *privdata);
static void ngx_omniroute_redis_cleanup(void *privdata);
static void ngx_omniroute_redis_read_handler(ngx_event_t *rev);
static void ngx_omniroute_redis_write_handler(ngx_event_t *wev);


/*
 * Put a new (connecting) context on the event loop as the connection of
 * conn (an ngx_omniroute_redis_conn_t or a lease connection: both begin
 * with NGX_OMNIROUTE_REDIS_IO); hiredis's callbacks get conn as
 * ac->data.  On error the caller frees the context.
 */

ngx_int_t
ngx_omniroute_redis_attach(void *conn, redisAsyncContext *ac, ngx_log_t *log)
{
    ngx_connection_t          *c;
    ngx_omniroute_redis_io_t  *io;

    io = conn;

    c = ngx_get_connection(ac->c.fd, log);
    if (c == NULL) {
        return NGX_ERROR;
    }

    c->data = io;
    c->read->handler = ngx_omniroute_redis_read_handler;
    c->write->handler = ngx_omniroute_redis_write_handler;
    c->read->log = c->log;
    c->write->log = c->log;
    c->number = ngx_atomic_fetch_add(ngx_connection_counter, 1);

    io->ac = ac;
    io->c = c;

    ac->data = conn;
    ac->ev.data = c;
    ac->ev.addRead = ngx_omniroute_redis_add_read;
    ac->ev.delRead = ngx_omniroute_redis_del_read;
    ac->ev.addWrite = ngx_omniroute_redis_add_write;
    ac->ev.delWrite = ngx_omniroute_redis_del_write;
    ac->ev.cleanup = ngx_omniroute_redis_cleanup;

    return NGX_OK;
}


static void
ngx_omniroute_redis_add_read(void *privdata)
{
    ngx_connection_t  *c = privdata;

    if (!c->read->active) {
        if (ngx_add_event(c->read, NGX_READ_EVENT,
                          (ngx_event_flags & NGX_USE_CLEAR_EVENT)
                          ? NGX_CLEAR_EVENT : NGX_LEVEL_EVENT)
            != NGX_OK)
        {
            ngx_log_error(NGX_LOG_ERR, c->log, 0,
                          "omniroute redis: could not add a read event");
        }
    }
}


static void
ngx_omniroute_redis_del_read(void *privdata)
{
    ngx_connection_t  *c = privdata;

    if (c->read->active) {
        (void) ngx_del_event(c->read, NGX_READ_EVENT, 0);
    }
}


static void
ngx_omniroute_redis_add_write(void *privdata)
{
    ngx_connection_t  *c = privdata;

    if (!c->write->active) {
        if (ngx_add_event(c->write, NGX_WRITE_EVENT,
                          (ngx_event_flags & NGX_USE_CLEAR_EVENT)
                          ? NGX_CLEAR_EVENT : NGX_LEVEL_EVENT)
            != NGX_OK)
        {
            ngx_log_error(NGX_LOG_ERR, c->log, 0,
                          "omniroute redis: could not add a write event");
        }
    }
}


static void
ngx_omniroute_redis_del_write(void *privdata)
{
    ngx_connection_t  *c = privdata;

    if (c->write->active) {
        (void) ngx_del_event(c->write, NGX_WRITE_EVENT, 0);
    }
}


/*
 * hiredis is freeing the context and will close the descriptor itself:
 * drop the events, return the connection with fd -1.  May run inside our
 * own read handler; the caller then sees io->c != c.
 */

static void
ngx_omniroute_redis_cleanup(void *privdata)
{
    ngx_connection_t  *c = privdata;

    ngx_omniroute_redis_io_t  *io;

    io = c->data;

    if (c->read->active) {
        (void) ngx_del_event(c->read, NGX_READ_EVENT, 0);
    }

    if (c->write->active) {
        (void) ngx_del_event(c->write, NGX_WRITE_EVENT, 0);
    }

    if (c->read->timer_set) {
        ngx_del_timer(c->read);
    }

    if (c->write->timer_set) {
        ngx_del_timer(c->write);
    }

    if (c->read->posted) {
        ngx_delete_posted_event(c->read);
    }

    if (c->write->posted) {
        ngx_delete_posted_event(c->write);
    }

    ngx_free_connection(c);
    c->fd = (ngx_socket_t) -1;

    io->c = NULL;
    io->ac = NULL;
    io->ready = 0;
}


static void
ngx_omniroute_redis_read_handler(ngx_event_t *rev)
{
    ngx_connection_t  *c = rev->data;

    int                        n;
    ngx_socket_t               fd;
    ngx_omniroute_redis_io_t  *io;

    io = c->data;

    /* edge-triggered: read until the socket is empty */

    for ( ;; ) {
        fd = c->fd;

        redisAsyncHandleRead(io->ac);

        if (io->c != c) {
            return;             /* freed meanwhile */
        }

        if (ioctl(fd, FIONREAD, &n) == -1 || n <= 0) {
            return;
        }
    }
}


static void
ngx_omniroute_redis_write_handler(ngx_event_t *wev)
{
    ngx_connection_t  *c = wev->data;

    ngx_omniroute_redis_io_t  *io;

    io = c->data;

    redisAsyncHandleWrite(io->ac);
}
