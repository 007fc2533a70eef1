
/*
 * Copyright (C) ngx_omniroute authors
 *
 * Exclusive leases across the nodes of a cluster (R-LEASE-3): with
 * omniroute_redis, the lease lifecycle runs in Redis, one Lua script per
 * call, so that an acquire, a rebinding, a renew, a release or a revoke
 * is atomic for every node: at most one active lease per connection and
 * per owner in the whole cluster.  The request that asked waits for the
 * reply without blocking its worker (ngx_omniroute_lease_remote, see
 * ngx_omniroute_lease_store.h).
 *
 *   every worker   one hiredis async connection of its own, for the
 *                  calls of its requests (the mirror's link lives in
 *                  worker 0 only and never waits for a reply on behalf
 *                  of a request)
 *   worker 0       a subscriber to <prefix>leases:<db>, where every
 *                  script publishes the lease it changed: a message names
 *                  the keys to read again (MGET of the lease's
 *                  connection and owner keys), what they hold is applied
 *                  to the zone by version; and a full load (SCAN + MGET
 *                  of <prefix>lease:*) after each (re)connection and every
 *                  "resync" period: Redis is the authority, a local lease
 *                  it does not have is dropped
 *
 * Redis keys (strings, with a TTL):
 *
 *   <prefix>lease:conn:<connection>    the lease holding a connection;
 *                                      expires with the lease
 *   <prefix>lease:owner:<sha256 hex>   the lease of an owner; kept an
 *                                      hour past its expiry
 *   <prefix>lease:seq                  the last version (30 days)
 *
 * A lease is "1 OWNERHEX KEY CONN GENERATION VERSION ACQUIRED BOUND
 * EXPIRES STATE" (ids have no spaces; STATE 1 active, 2 ended).  Times
 * are Redis's clock (TIME), one clock for every decision; versions are
 * max(now * 1000, last + 1), increasing even if the seq key is lost.
 * Never the owner token: only its hash reaches Redis.
 *
 * What Redis holds is untrusted all the same (issue 23): every line, of a
 * key, a reply or a message, is decoded by or_lease_decode() and checked
 * by or_lease_valid() against Redis's clock as this node knows it (TIME
 * when a connection is made and at each load) and the longest TTL this
 * node grants, then against this node's configuration: a client key of
 * the lease:exclusive scope and one of its connections.  A line that
 * fails is never stored: counted in the mirror's "rejected" counter and
 * logged at most once per log_interval with the number suppressed.  A
 * published line is only a hint of which keys to read: a line that no
 * key holds (a forged PUBLISH) changes nothing, and an ended lease is
 * applied only over a record this node already has.
 *
 * Redis down: lifecycle calls are refused (503: uniqueness cannot be
 * promised), managed requests go on with the zone's copy.  Connecting,
 * AUTH, SELECT, the subscriber, the load's SCAN + MGET, Sentinel and the
 * backoff are the connection machine's (ngx_omniroute_redis_conn.c), the
 * same as the mirror's.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_event.h>
#include <ngx_http.h>

#include "ngx_omniroute_redis_int.h"
#include "ngx_omniroute_keys.h"
#include "ngx_omniroute_lease_store.h"
#include "or_keys.h"


#define NGX_OMNIROUTE_LEASE_TICK      50       /* ms */
#define NGX_OMNIROUTE_LEASE_VALUE_MAX 512
#define NGX_OMNIROUTE_LEASE_ARGS      (14 + NGX_OMNIROUTE_LEASE_CONNS_MAX)

#define NGX_OMNIROUTE_LEASE_UP        NGX_OMNIROUTE_REDIS_M_UP


typedef struct ngx_omniroute_redis_lease_s  ngx_omniroute_redis_lease_t;


/* one call in flight */
typedef struct {
    ngx_queue_t                   queue;        /* pending, oldest first */
    ngx_omniroute_redis_lease_t  *link;
    ngx_omniroute_lease_op_t     *op;
    ngx_omniroute_lease_done_pt   done;         /* NULL: op is ours */
    void                         *data;
    ngx_msec_t                    sent;
    ngx_uint_t                    canceled;
} ngx_omniroute_lease_call_t;


struct ngx_omniroute_redis_lease_s {
    ngx_omniroute_redis_main_conf_t  *rmcf;
    ngx_omniroute_main_conf_t    *omcf;
    ngx_omniroute_keys_conf_t    *kc;
    ngx_omniroute_store_t        *store;
    ngx_shmtx_t                  *lock;
    ngx_log_t                    *log;
    or_msec_t                     skew;         /* Redis's clock - ours */

    ngx_omniroute_redis_machine_t  m;           /* cmd, sub (worker 0) */
    ngx_uint_t                    loader;       /* worker 0 */

    ngx_event_t                   tick;
    ngx_msec_t                    load_at;
    ngx_uint_t                    loading;
    ngx_pool_t                   *load_pool;
    ngx_array_t                   loaded;       /* or_lease_t: active */
    uint64_t                      load_since;   /* versions newer: kept */

    ngx_queue_t                   pending;
    ngx_str_t                     channel;      /* <prefix>leases:<db> */
    ngx_str_t                     seq_key;      /* <prefix>lease:seq */
    ngx_msec_t                    logged_at;

    /* rejected lines: logged at most once per log_interval */
    ngx_msec_t                    rejected_at;
    ngx_uint_t                    rejected_logged;
    ngx_uint_t                    rejected_suppressed;

    ngx_uint_t                    exiting;
};


static ngx_int_t ngx_omniroute_redis_lease_init_process(ngx_cycle_t *cycle);
static void ngx_omniroute_redis_lease_exit_process(ngx_cycle_t *cycle);
static ngx_int_t ngx_omniroute_redis_lease_run(ngx_omniroute_lease_op_t *op,
    ngx_omniroute_lease_done_pt done, void *data, void **handle);
static void ngx_omniroute_redis_lease_cancel(void *handle);

static void ngx_omniroute_redis_lease_probe(ngx_omniroute_redis_conn_t *rc);
static void ngx_omniroute_redis_lease_down(ngx_omniroute_redis_machine_t *m,
    u_char *reason, size_t len);
static void ngx_omniroute_redis_lease_message(
    ngx_omniroute_redis_machine_t *m, u_char *data, size_t len);
static void ngx_omniroute_redis_lease_fail(ngx_omniroute_redis_lease_t *link,
    const char *reason);
static void ngx_omniroute_redis_lease_tick(ngx_event_t *ev);
static void ngx_omniroute_redis_lease_scan(ngx_omniroute_redis_lease_t *link);
static void ngx_omniroute_redis_lease_up(ngx_omniroute_redis_machine_t *m);
static ngx_uint_t ngx_omniroute_redis_lease_keep(or_lease_t *l, void *arg);
static ngx_int_t ngx_omniroute_redis_lease_decode(
    ngx_omniroute_redis_lease_t *link, u_char *s, size_t len, or_lease_t *l);
static const char *ngx_omniroute_redis_lease_known(
    ngx_omniroute_redis_lease_t *link, or_lease_t *l);
static void ngx_omniroute_redis_lease_reject(
    ngx_omniroute_redis_lease_t *link, const char *what, const char *why);
static ngx_int_t ngx_omniroute_redis_lease_clock(
    ngx_omniroute_redis_lease_t *link, redisReply *reply);
static void ngx_omniroute_redis_lease_hint(ngx_omniroute_redis_lease_t *link,
    u_char *s, size_t len);

static void ngx_omniroute_redis_lease_on_ready(redisAsyncContext *ac,
    void *r, void *data);
static void ngx_omniroute_redis_lease_on_reply(redisAsyncContext *ac,
    void *r, void *data);
static void ngx_omniroute_redis_lease_on_time(redisAsyncContext *ac,
    void *r, void *data);
static ngx_int_t ngx_omniroute_redis_lease_batch(
    ngx_omniroute_redis_machine_t *m, ngx_str_t *keys, redisReply **values,
    ngx_uint_t n);
static void ngx_omniroute_redis_lease_loaded(ngx_omniroute_redis_machine_t *m);
static void ngx_omniroute_redis_lease_on_hint(redisAsyncContext *ac,
    void *r, void *data);



static ngx_http_module_t  ngx_omniroute_redis_lease_module_ctx = {
    NULL,                                  /* preconfiguration */
    NULL,                                  /* postconfiguration */

    NULL,                                  /* create main configuration */
    NULL,                                  /* init main configuration */

    NULL,                                  /* create server configuration */
    NULL,                                  /* merge server configuration */

    NULL,                                  /* create location configuration */
    NULL                                   /* merge location configuration */
};


/* no directive: it runs the leases of omniroute_redis's server */

ngx_module_t  ngx_http_omniroute_redis_lease_module = {
    NGX_MODULE_V1,
    &ngx_omniroute_redis_lease_module_ctx, /* module context */
    NULL,                                  /* module directives */
    NGX_HTTP_MODULE,                       /* module type */
    NULL,                                  /* init master */
    NULL,                                  /* init module */
    ngx_omniroute_redis_lease_init_process, /* init process */
    NULL,                                  /* init thread */
    NULL,                                  /* exit thread */
    ngx_omniroute_redis_lease_exit_process, /* exit process */
    NULL,                                  /* exit master */
    NGX_MODULE_V1_PADDING
};


static ngx_omniroute_redis_lease_t  *ngx_omniroute_redis_lease_link;

static ngx_omniroute_lease_remote_t  ngx_omniroute_redis_lease_remote = {
    ngx_omniroute_redis_lease_run,
    ngx_omniroute_redis_lease_cancel
};


/*
 * ARGV: 1 prefix, 2 channel, 3 action, 4 owner (hex), 5 key id,
 * 6 generation, 7 ttl, 8 retain, 9 deadline, 10 longest ttl,
 * 11 eligibility ("101..."), 12.. the connections.  Returns {status,
 * lease | retry ms | "", the number of keys that could not be read}.
 *
 * The deadline is Redis's time (as the node knows it, never later than
 * Redis's own) after which the node no longer waits for the answer:
 * a script run later (Redis frozen, then resumed) changes nothing and
 * answers LATE.  What the keys hold is untrusted: a lease line that does
 * not read right (shape, a generation, an expiry past the longest ttl
 * or a version ahead of TIME, both with the slack of
 * OR_LEASE_CLOCK_SLACK) or a key of another type is no lease, and is
 * overwritten by the next lease of its connection; a lease:seq that is
 * not a number or is ahead of TIME is replaced.
 */

static const char  ngx_omniroute_redis_lease_script[] =
    "local P, ch, act, owner, key = ARGV[1], ARGV[2], ARGV[3], ARGV[4], "
    "ARGV[5]\n"
    "local gen, ttl, retain = tonumber(ARGV[6]), tonumber(ARGV[7]), "
    "tonumber(ARGV[8])\n"
    "local deadline, tmax = tonumber(ARGV[9]), tonumber(ARGV[10])\n"
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "if now > deadline then return {'LATE', '', '0'} end\n"
    "local slack, bad = 30000, 0\n"
    "local function get(k)\n"
    "  local v = redis.pcall('GET', k)\n"
    "  if type(v) == 'table' then bad = bad + 1 return nil end\n"
    "  return v\n"
    "end\n"
    "local function num(w)\n"
    "  if not w or #w > 16 or not string.match(w, '^%d+$') then\n"
    "    return nil\n"
    "  end\n"
    "  return tonumber(w)\n"
    "end\n"
    "local function dec(v)\n"
    "  if not v then return nil end\n"
    "  local f = {}\n"
    "  for w in string.gmatch(v, '%S+') do f[#f + 1] = w end\n"
    "  local l = nil\n"
    "  if #f == 10 and f[1] == '1' and #f[2] == 64\n"
    "     and string.match(f[2], '^[0-9a-f]+$') then\n"
    "    l = {owner = f[2], key = f[3], conn = f[4], gen = num(f[5]),\n"
    "         ver = num(f[6]), acq = num(f[7]), bound = num(f[8]),\n"
    "         exp = num(f[9]), state = num(f[10])}\n"
    "    if not (l.gen and l.ver and l.acq and l.bound and l.exp\n"
    "            and l.state) or l.gen < 1\n"
    "       or (l.state ~= 1 and l.state ~= 2)\n"
    "       or l.exp > now + slack + tmax\n"
    "       or l.ver > (now + slack) * 1000 then\n"
    "      l = nil\n"
    "    end\n"
    "  end\n"
    "  if not l then bad = bad + 1 end\n"
    "  return l\n"
    "end\n"
    "local function out(st, v)\n"
    "  return {st, v or '', tostring(bad)}\n"
    "end\n"
    "local function enc(l)\n"
    "  return table.concat({'1', l.owner, l.key, l.conn,\n"
    "    string.format('%.0f', l.gen), string.format('%.0f', l.ver),\n"
    "    string.format('%.0f', l.acq), string.format('%.0f', l.bound),\n"
    "    string.format('%.0f', l.exp), tostring(l.state)}, ' ')\n"
    "end\n"
    "local function version()\n"
    "  local s = get(P .. 'lease:seq')\n"
    "  local last = s and num(s)\n"
    "  if s and (not last or last > (now + slack) * 1000) then\n"
    "    bad = bad + 1\n"
    "    last = nil\n"
    "  end\n"
    "  local v = math.max(now * 1000, (last or 0) + 1)\n"
    "  redis.call('SET', P .. 'lease:seq', string.format('%.0f', v), 'PX',"
    " 2592000000)\n"
    "  return v\n"
    "end\n"
    "local function put(l)\n"
    "  local v = enc(l)\n"
    "  redis.call('SET', P .. 'lease:conn:' .. l.conn, v, 'PX', l.exp - now)\n"
    "  redis.call('SET', P .. 'lease:owner:' .. l.owner, v, 'PX',\n"
    "             l.exp - now + retain)\n"
    "  redis.call('PUBLISH', ch, v)\n"
    "  return v\n"
    "end\n"
    "local function active(l) return l and l.state == 1 and l.exp > now end\n"
    "local function conn_of(c)\n"
    "  return dec(get(P .. 'lease:conn:' .. c))\n"
    "end\n"
    "if act == 'revoke' then\n"
    "  local c = conn_of(ARGV[12])\n"
    "  if not active(c) then return out('NOT_FOUND') end\n"
    "  c.ver = version()\n"
    "  c.state = 2\n"
    "  redis.call('DEL', P .. 'lease:conn:' .. c.conn)\n"
    "  local o = dec(get(P .. 'lease:owner:' .. c.owner))\n"
    "  if o and o.conn == c.conn then\n"
    "    redis.call('DEL', P .. 'lease:owner:' .. c.owner)\n"
    "  end\n"
    "  local v = enc(c)\n"
    "  redis.call('PUBLISH', ch, v)\n"
    "  return out('OK', v)\n"
    "end\n"
    "local prev = nil\n"
    "if act ~= 'acquire' then\n"
    "  prev = dec(get(P .. 'lease:owner:' .. owner))\n"
    "  if not prev or prev.state ~= 1 or prev.key ~= key then\n"
    "    return out('NOT_FOUND')\n"
    "  end\n"
    "  if prev.gen ~= gen then return out('STALE') end\n"
    "  if act ~= 'rebind' and prev.exp <= now then return out('EXPIRED') end\n"
    "end\n"
    "if act == 'renew' or act == 'release' then\n"
    "  local c = conn_of(prev.conn)\n"
    "  local ours = active(c) and c.owner == owner and c.gen == gen\n"
    "  if act == 'renew' then\n"
    "    if not ours then return out('EXPIRED') end\n"
    "    prev.ver = version()\n"
    "    prev.exp = now + ttl\n"
    "    return out('OK', put(prev))\n"
    "  end\n"
    "  prev.ver = version()\n"
    "  prev.state = 2\n"
    "  if c and c.owner == owner then\n"
    "    redis.call('DEL', P .. 'lease:conn:' .. prev.conn)\n"
    "  end\n"
    "  redis.call('DEL', P .. 'lease:owner:' .. owner)\n"
    "  local v = enc(prev)\n"
    "  redis.call('PUBLISH', ch, v)\n"
    "  return out('OK', v)\n"
    "end\n"
    "local rebind = (act == 'rebind')\n"
    "local slots, earliest = {}, -1\n"
    "for i = 12, #ARGV do\n"
    "  local l = conn_of(ARGV[i])\n"
    "  local own = active(l) and rebind and l.owner == owner\n"
    "  if active(l) and not own\n"
    "     and (earliest < 0 or l.exp - now < earliest) then\n"
    "    earliest = l.exp - now\n"
    "  end\n"
    "  slots[#slots + 1] = {conn = ARGV[i], own = own,\n"
    "    free = not active(l),\n"
    "    eligible = string.sub(ARGV[11], i - 11, i - 11) == '1'}\n"
    "end\n"
    "local pick = nil\n"
    "for pass = 0, 3 do\n"
    "  for _, s in ipairs(slots) do\n"
    "    if s.eligible == (pass < 2)\n"
    "       and ((pass % 2 == 0 and s.own) or (pass % 2 == 1 and s.free))\n"
    "    then pick = s break end\n"
    "  end\n"
    "  if pick then break end\n"
    "end\n"
    "if not pick then\n"
    "  return out('CAPACITY', string.format('%.0f', math.max(earliest, 0)))\n"
    "end\n"
    "local l = {owner = owner, key = key, conn = pick.conn,\n"
    "  gen = (rebind and prev.gen or 0) + 1, ver = version(),\n"
    "  acq = rebind and prev.acq or now, bound = now, exp = now + ttl,\n"
    "  state = 1}\n"
    "if rebind and prev.conn ~= l.conn then\n"
    "  local old = conn_of(prev.conn)\n"
    "  if old and old.owner == owner then\n"
    "    redis.call('DEL', P .. 'lease:conn:' .. prev.conn)\n"
    "  end\n"
    "end\n"
    "return out('OK', put(l))\n";


static ngx_int_t
ngx_omniroute_redis_lease_init_process(ngx_cycle_t *cycle)
{
    u_char                           *p;
    ngx_omniroute_keys_conf_t        *kc;
    ngx_omniroute_main_conf_t        *omcf;
    ngx_omniroute_redis_lease_t      *link;
    ngx_omniroute_redis_main_conf_t  *rmcf;

    ngx_omniroute_lease_remote = NULL;

    if (ngx_process != NGX_PROCESS_WORKER
        && ngx_process != NGX_PROCESS_SINGLE)
    {
        return NGX_OK;
    }

    rmcf = ngx_http_cycle_get_module_main_conf(cycle,
                                               ngx_http_omniroute_redis_module);
    omcf = ngx_http_cycle_get_module_main_conf(cycle,
                                               ngx_http_omniroute_module);

    if (rmcf == NULL || rmcf->addr.len == 0 || omcf == NULL
        || omcf->store.sh == NULL)
    {
        return NGX_OK;
    }

    kc = omcf->keys;

    if (kc == NULL || kc->lease_keys == 0 || kc->shpool == NULL) {
        return NGX_OK;
    }

    link = ngx_pcalloc(cycle->pool, sizeof(ngx_omniroute_redis_lease_t));
    if (link == NULL) {
        return NGX_ERROR;
    }

    p = ngx_pnalloc(cycle->pool, rmcf->prefix.len + sizeof("leases:")
                                 + NGX_INT_T_LEN);
    if (p == NULL) {
        return NGX_ERROR;
    }

    link->channel.data = p;
    link->channel.len = ngx_sprintf(p, "%Vleases:%i", &rmcf->prefix, rmcf->db)
                        - p;

    p = ngx_pnalloc(cycle->pool, rmcf->prefix.len + sizeof("lease:seq") - 1);
    if (p == NULL) {
        return NGX_ERROR;
    }

    link->seq_key.data = p;
    link->seq_key.len = ngx_sprintf(p, "%Vlease:seq", &rmcf->prefix) - p;

    link->rmcf = rmcf;
    link->omcf = omcf;
    link->kc = kc;
    link->store = &omcf->store;
    link->lock = &kc->shpool->mutex;
    link->log = cycle->log;
    link->loader = (ngx_worker == 0);

    ngx_omniroute_redis_conn_init(&link->m, rmcf, cycle->log, link,
                                  "leases");

    if (link->loader) {
        link->m.channel = link->channel;
    }

    link->m.probe = ngx_omniroute_redis_lease_probe;
    link->m.up = ngx_omniroute_redis_lease_up;
    link->m.down = ngx_omniroute_redis_lease_down;
    link->m.message = ngx_omniroute_redis_lease_message;

    ngx_queue_init(&link->pending);

    link->tick.handler = ngx_omniroute_redis_lease_tick;
    link->tick.data = link;
    link->tick.log = cycle->log;
    link->tick.cancelable = 1;

    ngx_omniroute_redis_lease_link = link;
    ngx_omniroute_lease_remote = &ngx_omniroute_redis_lease_remote;

    ngx_omniroute_redis_conn_open(&link->m);

    ngx_add_timer(&link->tick, NGX_OMNIROUTE_LEASE_TICK);

    return NGX_OK;
}


static void
ngx_omniroute_redis_lease_exit_process(ngx_cycle_t *cycle)
{
    ngx_omniroute_redis_lease_t  *link;

    link = ngx_omniroute_redis_lease_link;

    if (link == NULL) {
        return;
    }

    link->exiting = 1;
    ngx_omniroute_lease_remote = NULL;

    if (link->tick.timer_set) {
        ngx_del_timer(&link->tick);
    }

    /* pending calls are answered as failed by hiredis */

    ngx_omniroute_redis_conn_close(&link->m);

    if (link->load_pool) {
        ngx_destroy_pool(link->load_pool);
        link->load_pool = NULL;
    }

    ngx_omniroute_redis_lease_link = NULL;
}


/* a lifecycle call from a request (or the admin API, done NULL) */

static ngx_int_t
ngx_omniroute_redis_lease_run(ngx_omniroute_lease_op_t *op,
    ngx_omniroute_lease_done_pt done, void *data, void **handle)
{
    int                               argc;
    u_char                           *p, gen[NGX_INT64_LEN], ttl[NGX_INT64_LEN],
                                      retain[NGX_INT64_LEN],
                                      deadline[NGX_INT64_LEN],
                                      tmax[NGX_INT64_LEN];
    char                              owner[2 * OR_LEASE_HASH_LEN + 1];
    u_char                            elig[NGX_OMNIROUTE_LEASE_CONNS_MAX + 1];
    size_t                            argvlen[NGX_OMNIROUTE_LEASE_ARGS];
    ngx_uint_t                        i;
    const char                       *argv[NGX_OMNIROUTE_LEASE_ARGS];
    ngx_msec_t                        base;
    const char                       *action;
    ngx_omniroute_lease_call_t       *call, *oldest;
    ngx_omniroute_redis_lease_t      *link;

    link = ngx_omniroute_redis_lease_link;

    if (link == NULL || link->m.state != NGX_OMNIROUTE_LEASE_UP
        || link->m.cmd.ac == NULL || op->nconns > NGX_OMNIROUTE_LEASE_CONNS_MAX)
    {
        return NGX_DECLINED;
    }

    switch (op->action) {

    case NGX_OMNIROUTE_LEASE_ACQUIRE:
        action = op->rebind ? "rebind" : "acquire";
        break;

    case NGX_OMNIROUTE_LEASE_RENEW:
        action = "renew";
        break;

    case NGX_OMNIROUTE_LEASE_RELEASE:
        action = "release";
        break;

    default:
        action = "revoke";
        break;
    }

    call = ngx_alloc(sizeof(ngx_omniroute_lease_call_t), link->log);
    if (call == NULL) {
        return NGX_DECLINED;
    }

    call->link = link;
    call->op = op;
    call->done = done;
    call->data = data;
    call->sent = ngx_current_msec;
    call->canceled = 0;

    or_lease_hex(op->owner, owner);

    argv[0] = "EVAL";
    argv[1] = ngx_omniroute_redis_lease_script;
    argv[2] = "0";
    argv[3] = (const char *) link->rmcf->prefix.data;
    argvlen[3] = link->rmcf->prefix.len;
    argv[4] = (const char *) link->channel.data;
    argvlen[4] = link->channel.len;
    argv[5] = action;
    argv[6] = owner;
    argvlen[6] = 2 * OR_LEASE_HASH_LEN;
    argv[7] = (const char *) op->key.data;
    argvlen[7] = op->key.len;

    p = ngx_sprintf(gen, "%uL", op->generation);
    argv[8] = (const char *) gen;
    argvlen[8] = p - gen;

    p = ngx_sprintf(ttl, "%L", (int64_t) op->ttl);
    argv[9] = (const char *) ttl;
    argvlen[9] = p - ttl;

    p = ngx_sprintf(retain, "%L", (int64_t) NGX_OMNIROUTE_LEASE_RETAIN);
    argv[10] = (const char *) retain;
    argvlen[10] = p - retain;

    /*
     * The deadline: the link fails, and every call pending on it is
     * answered 503, "timeout" after the oldest of them was sent (the
     * tick); Redis must not run this one later than a quarter of that
     * before, the time for its answer to come back.  In Redis's clock as
     * this node knows it, which is never ahead of Redis's own (a TIME is
     * read before its reply arrives).
     */

    base = ngx_current_msec;

    if (!ngx_queue_empty(&link->pending)) {
        oldest = ngx_queue_data(ngx_queue_head(&link->pending),
                                ngx_omniroute_lease_call_t, queue);
        base = oldest->sent;
    }

    p = ngx_sprintf(deadline, "%L",
                    (int64_t) (ngx_omniroute_now() + link->skew
                               - (or_msec_t) (ngx_current_msec - base)
                               + link->rmcf->timeout
                               - link->rmcf->timeout / 4));
    argv[11] = (const char *) deadline;
    argvlen[11] = p - deadline;

    p = ngx_sprintf(tmax, "%L", (int64_t) link->kc->lease_ttl_max);
    argv[12] = (const char *) tmax;
    argvlen[12] = p - tmax;

    for (i = 0; i < op->nconns; i++) {
        elig[i] = (op->eligible == NULL || op->eligible[i]) ? '1' : '0';
        argv[14 + i] = (const char *) op->conns[i].data;
        argvlen[14 + i] = op->conns[i].len;
    }

    elig[i] = '\0';
    argv[13] = (const char *) elig;
    argvlen[13] = op->nconns;

    argvlen[0] = 4;
    argvlen[1] = sizeof(ngx_omniroute_redis_lease_script) - 1;
    argvlen[2] = 1;
    argvlen[5] = ngx_strlen(action);

    argc = 14 + (int) op->nconns;

    if (redisAsyncCommandArgv(link->m.cmd.ac,
                              ngx_omniroute_redis_lease_on_reply, call, argc,
                              argv, argvlen)
        != REDIS_OK)
    {
        ngx_free(call);
        return NGX_DECLINED;
    }

    ngx_queue_insert_tail(&link->pending, &call->queue);

    if (handle) {
        *handle = call;
    }

    return NGX_DONE;
}


static void
ngx_omniroute_redis_lease_cancel(void *handle)
{
    ngx_omniroute_lease_call_t  *call = handle;

    if (call) {
        call->canceled = 1;
    }
}


/* the reply of a call: the lease applied to the zone, then the caller */

static void
ngx_omniroute_redis_lease_on_reply(redisAsyncContext *ac, void *r,
    void *data)
{
    redisReply                   *reply = r;
    ngx_omniroute_lease_call_t   *call = data;

    redisReply                   *st, *v, *bad;
    ngx_omniroute_lease_op_t     *op;
    ngx_omniroute_redis_lease_t  *link;

    link = call->link;
    op = call->op;

    ngx_queue_remove(&call->queue);

    op->failed = 1;

    if (reply && reply->type == REDIS_REPLY_ARRAY && reply->elements >= 1
        && (reply->element[0]->type == REDIS_REPLY_STRING
            || reply->element[0]->type == REDIS_REPLY_STATUS))
    {
        st = reply->element[0];
        v = reply->elements > 1 ? reply->element[1] : NULL;
        bad = reply->elements > 2 ? reply->element[2] : NULL;

        if (bad && bad->type == REDIS_REPLY_STRING
            && !(bad->len == 1 && bad->str[0] == '0'))
        {
            /* repaired or passed over by the script: fail closed */
            ngx_omniroute_redis_lease_reject(link, "lease key",
                                             "value or type; taken for no "
                                             "lease");
        }

        {
            op->failed = 0;

            if (st->len == 2 && ngx_strncmp(st->str, "OK", 2) == 0
                && v && v->type == REDIS_REPLY_STRING
                && ngx_omniroute_redis_lease_decode(link, (u_char *) v->str,
                                                    v->len, &op->lease)
                   == NGX_OK)
            {
                op->rc = OR_LEASE_OK;

                /* this node sees it at once, the others by the channel */

                (void) ngx_omniroute_lease_apply(link->store, link->lock,
                                                 &op->lease);

            } else if (st->len == 9
                       && ngx_strncmp(st->str, "NOT_FOUND", 9) == 0)
            {
                op->rc = OR_LEASE_NOT_FOUND;

            } else if (st->len == 5 && ngx_strncmp(st->str, "STALE", 5) == 0)
            {
                op->rc = OR_LEASE_STALE;

            } else if (st->len == 7
                       && ngx_strncmp(st->str, "EXPIRED", 7) == 0)
            {
                op->rc = OR_LEASE_EXPIRED;

            } else if (st->len == 8
                       && ngx_strncmp(st->str, "CAPACITY", 8) == 0)
            {
                op->rc = OR_LEASE_CAPACITY;
                op->retry = (v && v->type == REDIS_REPLY_STRING)
                            ? ngx_atoi((u_char *) v->str, v->len) : 0;

                if (op->retry < 0) {
                    op->retry = 0;
                }

            } else {
                op->failed = 1;
            }
        }

    } else if (reply && reply->type == REDIS_REPLY_ERROR) {
        ngx_log_error(NGX_LOG_ERR, link->log, 0,
                      "omniroute redis lease: error reply: %*s",
                      reply->len, reply->str);
    }

    if (call->done == NULL) {
        ngx_free(op);

    } else if (!call->canceled) {
        call->done(call->data, op);
    }

    ngx_free(call);
}


/*
 * A lease line from Redis (a key, a reply or a message): NGX_OK and *l
 * when it decodes (or_lease_decode()), its range is right for Redis's
 * clock (or_lease_valid()) and it names a lease this node can have;
 * else it is counted and logged (ngx_omniroute_redis_lease_reject()).
 */

static ngx_int_t
ngx_omniroute_redis_lease_decode(ngx_omniroute_redis_lease_t *link, u_char *s,
    size_t len, or_lease_t *l)
{
    const char  *why;

    why = or_lease_decode((const char *) s, len, l);

    if (why == NULL) {
        why = or_lease_valid(l, ngx_omniroute_now() + link->skew,
                             (or_msec_t) link->kc->lease_ttl_max);
    }

    if (why == NULL) {
        why = ngx_omniroute_redis_lease_known(link, l);
    }

    if (why != NULL) {
        ngx_omniroute_redis_lease_reject(link, "lease line", why);
        return NGX_ERROR;
    }

    return NGX_OK;
}


/* a client key of the lease:exclusive scope and one of its connections */

static const char *
ngx_omniroute_redis_lease_known(ngx_omniroute_redis_lease_t *link,
    or_lease_t *l)
{
    ngx_str_t                   *name;
    ngx_uint_t                   i, j;
    ngx_omniroute_client_key_t  *key;
    ngx_omniroute_connection_t  *c;

    key = link->kc->keys.elts;

    for (i = 0; i < link->kc->keys.nelts; i++) {
        if (key[i].lease && key[i].id.len == l->key_len
            && ngx_memcmp(key[i].id.data, l->key, l->key_len) == 0)
        {
            break;
        }
    }

    if (i == link->kc->keys.nelts) {
        return "key: no such lease key here";
    }

    name = key[i].conn_names.elts;

    for (j = 0; j < key[i].conn_names.nelts; j++) {
        if (name[j].len == l->conn_len
            && ngx_memcmp(name[j].data, l->conn, l->conn_len) == 0)
        {
            break;
        }
    }

    if (j == key[i].conn_names.nelts) {
        return "connection: not one of the key's here";
    }

    c = link->omcf->connections.elts;

    for (j = 0; j < link->omcf->connections.nelts; j++) {
        if (c[j].id.len == l->conn_len
            && ngx_memcmp(c[j].id.data, l->conn, l->conn_len) == 0)
        {
            return NULL;
        }
    }

    return "connection: no such connection here";
}


/*
 * Counted in the mirror's "rejected" counter; logged at most once per
 * log_interval, with the number suppressed since; never the line.
 */

static void
ngx_omniroute_redis_lease_reject(ngx_omniroute_redis_lease_t *link,
    const char *what, const char *why)
{
    ngx_msec_t                    now;
    ngx_atomic_uint_t             last, t;
    ngx_omniroute_redis_stats_t  *stats;

    stats = ngx_omniroute_redis_stats();

    if (stats) {
        (void) ngx_atomic_fetch_add(&stats->rejected, 1);
    }

    now = ngx_current_msec;

    if (link->rejected_logged
        && now - link->rejected_at < link->rmcf->log_interval)
    {
        link->rejected_suppressed++;
        return;
    }

    /* one line per log_interval for the node, whichever worker saw it */

    if (stats) {
        last = stats->lease_log_at;
        t = (ngx_atomic_uint_t) ngx_omniroute_now();

        if ((last && t - last < link->rmcf->log_interval)
            || !ngx_atomic_cmp_set(&stats->lease_log_at, last, t))
        {
            link->rejected_suppressed++;
            return;
        }
    }

    ngx_log_error(NGX_LOG_WARN, link->log, 0,
                  "omniroute redis \"%V\": leases: rejected a %s from Redis "
                  "(bad %s); ignored (%ui more such messages suppressed)",
                  &link->rmcf->addr, what, why, link->rejected_suppressed);

    link->rejected_logged = 1;
    link->rejected_at = now;
    link->rejected_suppressed = 0;
}


/* a TIME reply: how far Redis's clock is from ours */

static ngx_int_t
ngx_omniroute_redis_lease_clock(ngx_omniroute_redis_lease_t *link,
    redisReply *reply)
{
    ngx_int_t  sec, usec;

    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2
        || reply->element[0]->type != REDIS_REPLY_STRING
        || reply->element[1]->type != REDIS_REPLY_STRING)
    {
        return NGX_ERROR;
    }

    sec = ngx_atoi((u_char *) reply->element[0]->str,
                   reply->element[0]->len);
    usec = ngx_atoi((u_char *) reply->element[1]->str,
                    reply->element[1]->len);

    if (sec == NGX_ERROR || usec == NGX_ERROR || sec > 1000000000000) {
        return NGX_ERROR;
    }

    link->skew = (or_msec_t) sec * 1000 + usec / 1000 - ngx_omniroute_now();

    return NGX_OK;
}


/*
 * A published line is a hint: once it reads right, the keys of its
 * connection and owner are read again (ngx_omniroute_redis_lease_on_hint)
 * and what Redis holds there is applied; the line itself only for an
 * ended lease that neither key contradicts, over a record of its owner
 * that this node has.
 */

static void
ngx_omniroute_redis_lease_hint(ngx_omniroute_redis_lease_t *link, u_char *s,
    size_t len)
{
    u_char       *p, kconn[NGX_OMNIROUTE_REDIS_PREFIX_MAX + 16
                           + OR_LEASE_ID_MAX],
                  kowner[NGX_OMNIROUTE_REDIS_PREFIX_MAX + 16
                         + 2 * OR_LEASE_HASH_LEN];
    size_t        argvlen[3];
    or_lease_t   *l;
    const char   *argv[3];

    if (link->m.state != NGX_OMNIROUTE_LEASE_UP || link->m.cmd.ac == NULL) {
        return;                 /* the next load reads every key */
    }

    l = ngx_alloc(sizeof(or_lease_t), link->log);
    if (l == NULL) {
        return;
    }

    if (ngx_omniroute_redis_lease_decode(link, s, len, l) != NGX_OK) {
        ngx_free(l);
        return;
    }

    p = ngx_sprintf(kconn, "%Vlease:conn:", &link->rmcf->prefix);
    p = ngx_cpymem(p, l->conn, l->conn_len);

    argv[0] = "MGET";
    argvlen[0] = 4;
    argv[1] = (const char *) kconn;
    argvlen[1] = p - kconn;

    p = ngx_sprintf(kowner, "%Vlease:owner:", &link->rmcf->prefix);
    or_lease_hex(l->owner, (char *) p);
    p += 2 * OR_LEASE_HASH_LEN;

    argv[2] = (const char *) kowner;
    argvlen[2] = p - kowner;

    if (redisAsyncCommandArgv(link->m.cmd.ac, ngx_omniroute_redis_lease_on_hint,
                              l, 3, argv, argvlen)
        != REDIS_OK)
    {
        ngx_free(l);
    }
}


static void
ngx_omniroute_redis_lease_on_hint(redisAsyncContext *ac, void *r, void *data)
{
    redisReply                  *reply = r;
    or_lease_t                  *msg = data;
    ngx_omniroute_redis_conn_t  *lc = ac->data;

    or_lease_t                    l, o;
    ngx_uint_t                    i, held;
    redisReply                   *v;
    ngx_omniroute_redis_lease_t  *link;

    link = lc->link;

    if (reply == NULL || link->exiting || reply->type != REDIS_REPLY_ARRAY
        || reply->elements != 2)
    {
        ngx_free(msg);
        return;
    }

    held = 0;

    for (i = 0; i < 2; i++) {
        v = reply->element[i];

        if (v->type != REDIS_REPLY_STRING
            || ngx_omniroute_redis_lease_decode(link, (u_char *) v->str,
                                                v->len, &l)
               != NGX_OK)
        {
            continue;
        }

        (void) ngx_omniroute_lease_apply(link->store, link->lock, &l);

        if (l.state == OR_LEASE_ACTIVE
            && ngx_memcmp(l.owner, msg->owner, OR_LEASE_HASH_LEN) == 0)
        {
            held = 1;
        }
    }

    if (msg->state == OR_LEASE_GONE && !held
        && ngx_omniroute_lease_read_owner(link->store, msg->owner, &o)
           == NGX_OK)
    {
        (void) ngx_omniroute_lease_apply(link->store, link->lock, msg);
    }

    ngx_free(msg);
}


/* connection management */

/* the command connection's last handshake command: TIME (Redis's clock) */

static void
ngx_omniroute_redis_lease_probe(ngx_omniroute_redis_conn_t *rc)
{
    const char  *argv[1];
    size_t       argvlen[1];

    argv[0] = "TIME";
    argvlen[0] = 4;

    if (ngx_omniroute_redis_conn_send(rc, ngx_omniroute_redis_lease_on_ready,
                                      NULL, 1, argv, argvlen)
        != NGX_OK)
    {
        ngx_omniroute_redis_lease_fail(rc->link, "could not send TIME");
    }
}


static void
ngx_omniroute_redis_lease_fail(ngx_omniroute_redis_lease_t *link,
    const char *reason)
{
    ngx_omniroute_redis_conn_fail(&link->m, "%s", reason);
}


/*
 * The link is down: both contexts are freed after this returns (their
 * pending calls are answered as failed), a reconnection is due after a
 * backoff with jitter.  Logged at most once per log_interval; never the
 * password.
 */

static void
ngx_omniroute_redis_lease_down(ngx_omniroute_redis_machine_t *m,
    u_char *reason, size_t len)
{
    ngx_omniroute_redis_lease_t  *link = m->link;

    if (link->exiting) {
        return;
    }

    link->loading = 0;

    if (link->logged_at == 0
        || ngx_current_msec - link->logged_at >= link->rmcf->log_interval)
    {
        ngx_log_error(NGX_LOG_ERR, link->log, 0,
                      "omniroute redis \"%V\": leases: %*s; lease requests "
                      "are refused until Redis is back",
                      &link->rmcf->addr, len, reason);
        link->logged_at = ngx_current_msec;
    }

    if (link->load_pool) {
        ngx_destroy_pool(link->load_pool);
        link->load_pool = NULL;
    }
}


static void
ngx_omniroute_redis_lease_message(ngx_omniroute_redis_machine_t *m,
    u_char *data, size_t len)
{
    ngx_omniroute_redis_lease_hint(m->link, data, len);
}


static void
ngx_omniroute_redis_lease_tick(ngx_event_t *ev)
{
    ngx_omniroute_redis_lease_t *link = ev->data;

    ngx_msec_t                   now;
    ngx_queue_t                 *q;
    ngx_omniroute_lease_call_t  *call;

    if (link->exiting) {
        return;
    }

    now = ngx_current_msec;

    switch (link->m.state) {

    case NGX_OMNIROUTE_LEASE_UP:

        if (!ngx_queue_empty(&link->pending)) {
            q = ngx_queue_head(&link->pending);
            call = ngx_queue_data(q, ngx_omniroute_lease_call_t, queue);

            if (now - call->sent >= link->rmcf->timeout) {
                ngx_omniroute_redis_lease_fail(link, "no reply in time");
                break;
            }
        }

        if (link->loader && !link->loading && link->rmcf->resync
            && (ngx_msec_int_t) (now - link->load_at) >= 0)
        {
            ngx_omniroute_redis_lease_scan(link);
        }

        break;

    default: /* DOWN, CONNECTING */
        ngx_omniroute_redis_conn_tick(&link->m);
        break;
    }

    if (!link->exiting) {
        ngx_add_timer(ev, NGX_OMNIROUTE_LEASE_TICK);
    }
}


/* the full load: SCAN <prefix>lease:* and MGET, then the sweep */

static void
ngx_omniroute_redis_lease_scan(ngx_omniroute_redis_lease_t *link)
{
    const char  *argv[1];
    size_t       argvlen[1];

    if (!link->loading) {
        if (link->load_pool) {
            ngx_destroy_pool(link->load_pool);
        }

        link->load_pool = ngx_create_pool(4096, link->log);

        if (link->load_pool == NULL
            || ngx_array_init(&link->loaded, link->load_pool, 8,
                              sizeof(or_lease_t))
               != NGX_OK)
        {
            ngx_omniroute_redis_lease_fail(link, "no memory for a load");
            return;
        }

        link->loading = 1;

        /*
         * Redis's clock first: a lease changed after it has a version
         * of at least its milliseconds * 1000 (kept by the sweep even
         * if the SCAN passed its keys before the change).
         */

        argv[0] = "TIME";
        argvlen[0] = 4;

        if (redisAsyncCommandArgv(link->m.cmd.ac,
                                  ngx_omniroute_redis_lease_on_time, NULL,
                                  1, argv, argvlen)
            != REDIS_OK)
        {
            ngx_omniroute_redis_lease_fail(link, "could not send TIME");
        }

    }
}


static void
ngx_omniroute_redis_lease_on_time(redisAsyncContext *ac, void *r, void *data)
{
    redisReply                  *reply = r;
    ngx_omniroute_redis_conn_t  *lc = ac->data;

    ngx_omniroute_redis_lease_t  *link;

    link = lc->link;

    if (reply == NULL || !link->loading) {
        return;
    }

    if (ngx_omniroute_redis_lease_clock(link, reply) != NGX_OK) {
        ngx_omniroute_redis_lease_fail(link, "TIME failed");
        return;
    }

    link->load_since = (uint64_t) (ngx_omniroute_now() + link->skew) * 1000;

    /* every lease key but lease:seq */

    if (ngx_omniroute_redis_conn_load(&link->m, &link->rmcf->prefix,
                                      "lease:*", &link->seq_key,
                                      link->load_pool,
                                      ngx_omniroute_redis_lease_batch,
                                      ngx_omniroute_redis_lease_loaded)
        != NGX_OK)
    {
        ngx_omniroute_redis_lease_fail(link, "no memory for a load");
    }
}


/* a batch of the load: applied to the zone by version */

static ngx_int_t
ngx_omniroute_redis_lease_batch(ngx_omniroute_redis_machine_t *m,
    ngx_str_t *keys, redisReply **values, ngx_uint_t n)
{
    ngx_omniroute_redis_lease_t  *link = m->link;

    size_t       i;
    or_lease_t   l, *kept;
    redisReply  *v;

    if (!link->loading) {
        return NGX_OK;
    }

    for (i = 0; i < n; i++) {
        v = values[i];

        /* keys expired since the SCAN, or not strings: none */

        if (v->type != REDIS_REPLY_STRING
            || ngx_omniroute_redis_lease_decode(link, (u_char *) v->str,
                                                v->len, &l)
               != NGX_OK)
        {
            continue;
        }

        (void) ngx_omniroute_lease_apply(link->store, link->lock, &l);

        if (l.state == OR_LEASE_ACTIVE) {
            kept = ngx_array_push(&link->loaded);
            if (kept) {
                *kept = l;
            }
        }
    }

    return NGX_OK;
}


static void
ngx_omniroute_redis_lease_loaded(ngx_omniroute_redis_machine_t *m)
{
    ngx_omniroute_redis_lease_t  *link = m->link;

    ngx_uint_t  dropped;

    if (!link->loading) {
        return;
    }

    /* Redis is the authority: what it does not hold is no lease */

    dropped = ngx_omniroute_lease_sweep(link->store, link->lock,
                                        ngx_omniroute_redis_lease_keep, link,
                                        link->load_pool);

    ngx_log_error(NGX_LOG_INFO, link->log, 0,
                  "omniroute redis \"%V\": %ui leases loaded, %ui local ones "
                  "dropped", &link->rmcf->addr, link->loaded.nelts, dropped);

    link->loading = 0;
    link->load_at = ngx_current_msec + link->rmcf->resync;

    ngx_destroy_pool(link->load_pool);
    link->load_pool = NULL;
}


/*
 * After a load: a local lease is kept when Redis holds its owner, or when
 * it changed after the load began (applied meanwhile).
 */

static ngx_uint_t
ngx_omniroute_redis_lease_keep(or_lease_t *l, void *arg)
{
    ngx_omniroute_redis_lease_t *link = arg;

    ngx_uint_t   i;
    or_lease_t  *k;

    if (l->version >= link->load_since) {
        return 1;
    }

    k = link->loaded.elts;

    for (i = 0; i < link->loaded.nelts; i++) {
        if (ngx_memcmp(k[i].owner, l->owner, OR_LEASE_HASH_LEN) == 0) {
            return 1;
        }
    }

    return 0;
}


static void
ngx_omniroute_redis_lease_up(ngx_omniroute_redis_machine_t *m)
{
    ngx_omniroute_redis_lease_t  *link = m->link;

    m->backoff = link->rmcf->backoff_min;

    if (link->logged_at) {
        ngx_log_error(NGX_LOG_NOTICE, link->log, 0,
                      "omniroute redis \"%V\": leases: link up",
                      &link->rmcf->addr);
        link->logged_at = 0;
    }

    if (link->loader) {
        ngx_omniroute_redis_lease_scan(link);
    }
}


/* hiredis callbacks */

static void
ngx_omniroute_redis_lease_on_ready(redisAsyncContext *ac, void *r,
    void *data)
{
    redisReply                  *reply = r;
    ngx_omniroute_redis_conn_t  *rc = ac->data;

    ngx_omniroute_redis_conn_replied(rc);

    if (reply == NULL) {
        return;
    }

    if (reply->type == REDIS_REPLY_ERROR
        || ngx_omniroute_redis_lease_clock(rc->link, reply) != NGX_OK)
    {
        ngx_omniroute_redis_lease_fail(rc->link, "TIME failed");
        return;
    }

    ngx_omniroute_redis_conn_ready(rc);
}
