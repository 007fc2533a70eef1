
/*
 * Copyright (C) ngx_omniroute authors
 *
 * Client key budgets across the nodes of a cluster (R-BUDGET-5): with
 * omniroute_redis, worker 0 of each node writes the settled usage of its
 * rules to one Redis counter per rule and window (a hash: each node's
 * count in a field of its name), and reads back the cluster's count (the
 * sum), in one Lua script per sync (every 200 ms; HSET, PEXPIRE to the
 * window's end plus a minute, HVALS).  Redis is the one authority of each
 * window; the other nodes' part of its count is written to the zone,
 * where admission counts it with this node's own usage and reservations
 * (or_budget_remote()).  Reservations stay local: a node's requests in
 * flight are not seen by the others until they settle (the overshoot
 * bound of a cluster is the in-flight excess of all its nodes).
 *
 *   <prefix>budget:<rule>:<limit>:<window>   a hash node -> count, with
 *                                            a TTL
 *
 * Redis down: each node enforces its share of every limit
 * (omniroute_client_key_limit_nodes N: the others are taken to use
 * (N - 1) / N of it, or what they were last known to use, whichever is
 * more); when Redis is back, the usage of the outage is pushed and the
 * counts converge.  What Redis answers is untrusted: an integer in
 * 0 .. 2^53 or the sync is dropped.  Connecting, Sentinel, TLS,
 * AUTH [user], SELECT and the backoff are the connection machine's
 * (ngx_omniroute_redis_conn.c), the same as the mirror's and the leases':
 * a machine of its own, a command connection only (no subscriber).
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_event.h>
#include <ngx_http.h>

#include "ngx_omniroute_redis_int.h"
#include "ngx_omniroute_budget_store.h"


#define NGX_OMNIROUTE_RBUDGET_TICK     200      /* ms: a sync */
#define NGX_OMNIROUTE_RBUDGET_BATCH    256      /* counters per script */
#define NGX_OMNIROUTE_RBUDGET_KEY_MAX  (NGX_OMNIROUTE_REDIS_PREFIX_MAX    \
                                        + NGX_OMNIROUTE_BUDGET_NAME_MAX + 64)


typedef struct ngx_omniroute_rbudget_s  ngx_omniroute_rbudget_t;


/* one counter of a sync in flight */
typedef struct {
    ngx_uint_t                    rule;
    int                           k;
    uint64_t                      window;
    uint64_t                      mine;         /* our used, pushed */
} ngx_omniroute_rbudget_sent_t;


struct ngx_omniroute_rbudget_s {
    ngx_omniroute_redis_main_conf_t  *rmcf;
    ngx_omniroute_budget_conf_t  *bc;
    ngx_log_t                    *log;
    ngx_omniroute_redis_machine_t  m;           /* cmd only */
    ngx_event_t                   tick;
    ngx_msec_t                    sent_at;
    ngx_msec_t                    logged_at;
    ngx_uint_t                    pending;      /* a sync in flight */
    ngx_uint_t                    next;         /* rule to start from */
    ngx_uint_t                    nsent;
    ngx_omniroute_rbudget_sent_t  sent[NGX_OMNIROUTE_RBUDGET_BATCH];
    u_char                       *keys;         /* the batch's key bytes */
    u_char                       *args;
    ngx_uint_t                    exiting;
};


static ngx_int_t ngx_omniroute_rbudget_init_process(ngx_cycle_t *cycle);
static void ngx_omniroute_rbudget_exit_process(ngx_cycle_t *cycle);
static void ngx_omniroute_rbudget_up(ngx_omniroute_redis_machine_t *m);
static void ngx_omniroute_rbudget_down(ngx_omniroute_redis_machine_t *m,
    u_char *reason, size_t len);
static void ngx_omniroute_rbudget_tick(ngx_event_t *ev);
static void ngx_omniroute_rbudget_sync(ngx_omniroute_rbudget_t *link);
static void ngx_omniroute_rbudget_share(ngx_omniroute_rbudget_t *link);
static void ngx_omniroute_rbudget_on_sync(redisAsyncContext *ac, void *r,
    void *data);


static ngx_http_module_t  ngx_omniroute_rbudget_module_ctx = {
    NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
};


ngx_module_t  ngx_http_omniroute_redis_budget_module = {
    NGX_MODULE_V1,
    &ngx_omniroute_rbudget_module_ctx,     /* module context */
    NULL,                                  /* module directives */
    NGX_HTTP_MODULE,                       /* module type */
    NULL,                                  /* init master */
    NULL,                                  /* init module */
    ngx_omniroute_rbudget_init_process,    /* init process */
    NULL,                                  /* init thread */
    NULL,                                  /* exit thread */
    ngx_omniroute_rbudget_exit_process,    /* exit process */
    NULL,                                  /* exit master */
    NGX_MODULE_V1_PADDING
};


static ngx_omniroute_rbudget_t  *ngx_omniroute_rbudget_link;


/*
 * KEYS: the counters (hashes: a field per node, its count); ARGV: this
 * node's name, then its count and the TTL (ms) of each: the cluster's
 * counts, the sums.  A node writes its own count, never adds to
 * another's: a retry, a lost reply or a Redis that lost the keys are
 * made good by the next sync.
 */

static const char  ngx_omniroute_rbudget_script[] =
    "local node = ARGV[1]\n"
    "local out = {}\n"
    "for i, key in ipairs(KEYS) do\n"
    "  local mine = ARGV[2 * i]\n"
    "  if tonumber(mine) > 0 then\n"
    "    redis.call('HSET', key, node, mine)\n"
    "    redis.call('PEXPIRE', key, ARGV[2 * i + 1])\n"
    "  end\n"
    "  local sum = 0\n"
    "  for _, v in ipairs(redis.call('HVALS', key)) do\n"
    "    sum = sum + (tonumber(v) or 0)\n"
    "  end\n"
    "  out[i] = sum\n"
    "end\n"
    "return out\n";


static ngx_int_t
ngx_omniroute_rbudget_init_process(ngx_cycle_t *cycle)
{
    ngx_omniroute_rbudget_t          *link;
    ngx_omniroute_main_conf_t        *omcf;
    ngx_omniroute_budget_conf_t      *bc;
    ngx_omniroute_redis_main_conf_t  *rmcf;

    ngx_omniroute_rbudget_link = NULL;

    if ((ngx_process != NGX_PROCESS_WORKER || ngx_worker != 0)
        && ngx_process != NGX_PROCESS_SINGLE)
    {
        return NGX_OK;
    }

    rmcf = ngx_http_cycle_get_module_main_conf(cycle,
                                               ngx_http_omniroute_redis_module);
    omcf = ngx_http_cycle_get_module_main_conf(cycle,
                                               ngx_http_omniroute_module);

    if (rmcf == NULL || rmcf->addr.len == 0 || omcf == NULL) {
        return NGX_OK;
    }

    bc = ngx_omniroute_budget_conf(omcf);

    if (bc == NULL || bc->sh == NULL || bc->rules.nelts == 0) {
        return NGX_OK;
    }

    link = ngx_pcalloc(cycle->pool, sizeof(ngx_omniroute_rbudget_t));
    if (link == NULL) {
        return NGX_ERROR;
    }

    link->keys = ngx_pnalloc(cycle->pool, NGX_OMNIROUTE_RBUDGET_BATCH
                                          * NGX_OMNIROUTE_RBUDGET_KEY_MAX);
    link->args = ngx_pnalloc(cycle->pool,
                             (NGX_OMNIROUTE_RBUDGET_BATCH * 3 + 1)
                             * NGX_INT64_LEN);

    if (rmcf->node.len == 0) {
        return NGX_OK;
    }

    if (link->keys == NULL || link->args == NULL) {
        return NGX_ERROR;
    }

    link->rmcf = rmcf;
    link->bc = bc;
    link->log = cycle->log;

    ngx_omniroute_redis_conn_init(&link->m, rmcf, cycle->log, link,
                                  "budgets");

    link->m.probe = ngx_omniroute_redis_conn_ping;
    link->m.up = ngx_omniroute_rbudget_up;
    link->m.down = ngx_omniroute_rbudget_down;

    link->tick.handler = ngx_omniroute_rbudget_tick;
    link->tick.data = link;
    link->tick.log = cycle->log;
    link->tick.cancelable = 1;

    ngx_omniroute_rbudget_link = link;

    ngx_omniroute_redis_conn_open(&link->m);
    ngx_add_timer(&link->tick, NGX_OMNIROUTE_RBUDGET_TICK);

    return NGX_OK;
}


static void
ngx_omniroute_rbudget_exit_process(ngx_cycle_t *cycle)
{
    ngx_omniroute_rbudget_t  *link;

    link = ngx_omniroute_rbudget_link;

    if (link == NULL) {
        return;
    }

    link->exiting = 1;

    if (link->tick.timer_set) {
        ngx_del_timer(&link->tick);
    }

    /* a sync in flight is answered with a NULL reply by hiredis */

    ngx_omniroute_redis_conn_close(&link->m);

    ngx_omniroute_rbudget_link = NULL;
}


static void
ngx_omniroute_rbudget_up(ngx_omniroute_redis_machine_t *m)
{
    ngx_omniroute_rbudget_t  *link = m->link;

    m->backoff = link->rmcf->backoff_min;

    ngx_log_error(NGX_LOG_NOTICE, link->log, 0,
                  "omniroute redis \"%V\": client key budgets shared",
                  &link->rmcf->addr);

    /* the shares of the outage give way to the cluster's counts */
    ngx_omniroute_rbudget_sync(link);
}


/*
 * Down: the machine frees the connection after this returns (a sync in
 * flight is answered with a NULL reply) and reconnects after a backoff
 * with jitter; meanwhile each node keeps to its share.  Logged at most
 * once per log_interval; the reason never carries a password.
 */

static void
ngx_omniroute_rbudget_down(ngx_omniroute_redis_machine_t *m, u_char *reason,
    size_t len)
{
    ngx_omniroute_rbudget_t  *link = m->link;

    link->pending = 0;

    if (link->exiting) {
        return;
    }

    if (link->logged_at == 0
        || ngx_current_msec - link->logged_at >= link->rmcf->log_interval)
    {
        ngx_log_error(NGX_LOG_ERR, link->log, 0,
                      "omniroute redis \"%V\": client key budgets: %*s; "
                      "each node enforces its share until Redis is back",
                      &link->rmcf->addr, len, reason);
        link->logged_at = ngx_current_msec;
    }

    ngx_omniroute_rbudget_share(link);
}


static void
ngx_omniroute_rbudget_tick(ngx_event_t *ev)
{
    ngx_omniroute_rbudget_t *link = ev->data;

    ngx_msec_t  now;

    if (link->exiting) {
        return;
    }

    now = ngx_current_msec;

    switch (link->m.state) {

    case NGX_OMNIROUTE_REDIS_M_DOWN:
        ngx_omniroute_rbudget_share(link);
        ngx_omniroute_redis_conn_tick(&link->m);
        break;

    case NGX_OMNIROUTE_REDIS_M_CONNECTING:
        ngx_omniroute_redis_conn_tick(&link->m);
        break;

    default: /* UP */

        if (link->pending) {
            if (now - link->sent_at >= link->rmcf->timeout) {
                ngx_omniroute_redis_conn_fail(&link->m, "no reply in time "
                                              "(%M ms)", link->rmcf->timeout);
            }

            break;
        }

        ngx_omniroute_rbudget_sync(link);
        break;
    }

    if (!link->exiting) {
        ngx_add_timer(ev, NGX_OMNIROUTE_RBUDGET_TICK);
    }
}


/*
 * One script over the counters of the rules with limits (from where the
 * last sync stopped, at most a batch): what this node used since its
 * last push, and its count.
 */

static void
ngx_omniroute_rbudget_sync(ngx_omniroute_rbudget_t *link)
{
    int                            k;
    u_char                        *kp, *ap, *p;
    uint64_t                       used;
    or_msec_t                      now, ttl;
    ngx_uint_t                     i, j, n, nrules;
    or_budget_conf_t               conf;
    ngx_omniroute_budget_conf_t   *bc;
    ngx_omniroute_budget_rule_t   *rule;
    ngx_omniroute_budget_slot_t   *slot;
    ngx_omniroute_rbudget_sent_t  *s;

    static const char   *argv[3 + 4 * NGX_OMNIROUTE_RBUDGET_BATCH];
    static size_t        argvlen[3 + 4 * NGX_OMNIROUTE_RBUDGET_BATCH];

    bc = link->bc;
    rule = bc->rules.elts;
    nrules = bc->rules.nelts;
    now = ngx_omniroute_now();

    n = 0;
    kp = link->keys;
    ap = link->args;

    ngx_omniroute_budget_lock(bc);

    for (j = 0; j < nrules && n + OR_BUDGET_WINDOWS
                              <= NGX_OMNIROUTE_RBUDGET_BATCH; j++)
    {
        i = (link->next + j) % nrules;
        slot = ngx_omniroute_budget_slot(bc, &rule[i]);
        ngx_omniroute_budget_limits(&rule[i], slot, &conf);

        for (k = 0; k < OR_BUDGET_WINDOWS; k++) {
            if (conf.limit[k] == 0) {
                continue;
            }

            used = or_budget_used(&slot->state, k, now);

            if (slot->state.win[k].window != or_budget_window(k, now)) {
                /* a window not begun here: read the cluster's count */
                slot->state.win[k].window = or_budget_window(k, now);
                slot->state.win[k].used = 0;
                slot->state.win[k].reserved = 0;
                slot->state.win[k].remote = 0;
                slot->state.win[k].pushed = 0;
            }

            s = &link->sent[n];
            s->rule = i;
            s->k = k;
            s->window = slot->state.win[k].window;
            s->mine = used;

            p = kp;
            kp = ngx_snprintf(kp, NGX_OMNIROUTE_RBUDGET_KEY_MAX,
                              "%Vbudget:%V:%d:%uL", &link->rmcf->prefix,
                              &rule[i].name, k, s->window);
            argv[3 + n] = (const char *) p;
            argvlen[3 + n] = kp - p;

            n++;

            /* the values: after the keys once the batch is complete */

            ttl = or_budget_window_end(k, now) - now + 60000;

            p = ap;
            ap = ngx_sprintf(ap, "%uL", used);
            argv[4 + NGX_OMNIROUTE_RBUDGET_BATCH + 2 * (n - 1)] =
                                                          (const char *) p;
            argvlen[4 + NGX_OMNIROUTE_RBUDGET_BATCH + 2 * (n - 1)] = ap - p;

            p = ap;
            ap = ngx_sprintf(ap, "%L", (int64_t) ttl);
            argv[5 + NGX_OMNIROUTE_RBUDGET_BATCH + 2 * (n - 1)] =
                                                          (const char *) p;
            argvlen[5 + NGX_OMNIROUTE_RBUDGET_BATCH + 2 * (n - 1)] = ap - p;
        }
    }

    ngx_omniroute_budget_unlock(bc);

    link->next = (nrules ? (link->next + j) % nrules : 0);

    if (n == 0) {
        return;
    }

    /* EVAL script numkeys key... node arg...: the args after the keys */

    argv[3 + NGX_OMNIROUTE_RBUDGET_BATCH] =
                                 (const char *) link->rmcf->node.data;
    argvlen[3 + NGX_OMNIROUTE_RBUDGET_BATCH] = link->rmcf->node.len;

    ngx_memmove(&argv[3 + n], &argv[3 + NGX_OMNIROUTE_RBUDGET_BATCH],
                (1 + 2 * n) * sizeof(argv[0]));
    ngx_memmove(&argvlen[3 + n], &argvlen[3 + NGX_OMNIROUTE_RBUDGET_BATCH],
                (1 + 2 * n) * sizeof(argvlen[0]));

    argv[0] = "EVAL";
    argvlen[0] = 4;
    argv[1] = ngx_omniroute_rbudget_script;
    argvlen[1] = sizeof(ngx_omniroute_rbudget_script) - 1;

    p = link->args + NGX_OMNIROUTE_RBUDGET_BATCH * 3 * NGX_INT64_LEN;
    argv[2] = (const char *) p;
    argvlen[2] = ngx_sprintf(p, "%ui", n) - p;

    link->nsent = n;

    if (ngx_omniroute_redis_conn_send(&link->m.cmd,
                                      ngx_omniroute_rbudget_on_sync, NULL,
                                      (int) (4 + 3 * n), argv, argvlen)
        != NGX_OK)
    {
        ngx_omniroute_redis_conn_fail(&link->m, "could not send the sync");
        return;
    }

    link->pending = 1;
    link->sent_at = ngx_current_msec;
}


/*
 * Redis is down: each node keeps to its share of every limit (the others
 * are taken to use (N - 1) / N of it, or what they were last known to
 * use if that is more).
 */

static void
ngx_omniroute_rbudget_share(ngx_omniroute_rbudget_t *link)
{
    int                           k;
    uint64_t                      others, n;
    or_msec_t                     now;
    ngx_uint_t                    i;
    or_budget_conf_t              conf;
    or_budget_win_t              *w;
    ngx_omniroute_budget_conf_t  *bc;
    ngx_omniroute_budget_rule_t  *rule;
    ngx_omniroute_budget_slot_t  *slot;

    bc = link->bc;
    n = bc->nodes;

    if (n <= 1) {
        return;
    }

    rule = bc->rules.elts;
    now = ngx_omniroute_now();

    ngx_omniroute_budget_lock(bc);

    for (i = 0; i < bc->rules.nelts; i++) {
        slot = ngx_omniroute_budget_slot(bc, &rule[i]);
        ngx_omniroute_budget_limits(&rule[i], slot, &conf);

        for (k = 0; k < OR_BUDGET_WINDOWS; k++) {
            if (conf.limit[k] == 0) {
                continue;
            }

            w = &slot->state.win[k];

            if (w->window != or_budget_window(k, now)) {
                w->window = or_budget_window(k, now);
                w->used = 0;
                w->reserved = 0;
                w->remote = 0;
                w->pushed = 0;
            }

            others = conf.limit[k] - conf.limit[k] / n;

            if (w->remote < others) {
                w->remote = others;
            }
        }
    }

    ngx_omniroute_budget_unlock(bc);
}


/* the cluster's counts, checked, into the zone */

static void
ngx_omniroute_rbudget_on_sync(redisAsyncContext *ac, void *r, void *data)
{
    redisReply                    *reply = r;
    ngx_omniroute_redis_conn_t    *rc = ac->data;

    ngx_uint_t                     i;
    ngx_omniroute_rbudget_t       *link;
    ngx_omniroute_budget_conf_t   *bc;
    ngx_omniroute_budget_rule_t   *rule;
    ngx_omniroute_budget_slot_t   *slot;
    ngx_omniroute_rbudget_sent_t  *s;

    ngx_omniroute_redis_conn_replied(rc);

    if (reply == NULL) {
        return;
    }

    link = rc->link;
    link->pending = 0;

    if (reply->type == REDIS_REPLY_ERROR) {
        ngx_omniroute_redis_conn_fail(&link->m, "the sync script failed: %*s",
                                      ngx_min(reply->len, 256), reply->str);
        return;
    }

    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != link->nsent) {
        ngx_omniroute_redis_conn_fail(&link->m, "an unexpected reply");
        return;
    }

    for (i = 0; i < link->nsent; i++) {
        if (reply->element[i]->type != REDIS_REPLY_INTEGER
            || reply->element[i]->integer < 0
            || reply->element[i]->integer > ((long long) 1 << 53))
        {
            ngx_omniroute_redis_conn_fail(&link->m, "a count out of range");
            return;
        }
    }

    bc = link->bc;
    rule = bc->rules.elts;

    ngx_omniroute_budget_lock(bc);

    for (i = 0; i < link->nsent; i++) {
        s = &link->sent[i];

        if (s->rule >= bc->rules.nelts) {
            continue;
        }

        slot = ngx_omniroute_budget_slot(bc, &rule[s->rule]);

        or_budget_remote(&slot->state, s->k, s->window,
                         (uint64_t) reply->element[i]->integer, s->mine);
    }

    ngx_omniroute_budget_unlock(bc);
}
