
/*
 * Copyright (C) ngx_omniroute authors
 *
 * The memo of a model's first excluded routes (ngx_omniroute_plan_memo_t,
 * one per model and worker): a pool whose first connections cool (50 of
 * 500 at priority 0, say) is planned without checking them again on every
 * request.
 *
 * A request that plans in priority order from the first route writes the
 * memo as it checks: each route that its connection's state excludes (a
 * cooldown or a terminal state; its provider's breaker, if it has a
 * record, did not exclude it) is noted with its reason, the end of its
 * cooldown and its wait kind, until the first route that is eligible or
 * excluded for another reason.  The memo is kept when the connection,
 * breaker and settings tables did not change meanwhile.  A later request
 * uses it while the three are at those generations (no record was
 * written, created or freed since) and before the first of the cooldowns
 * ends: it lists the same exclusions, their retry times counted from now,
 * and checks the routes after them.  That is what checking those routes
 * would find (or_plan_exclusion()): a breaker that did not exclude does
 * not start to without a write (an OPEN one whose time ran out only
 * stays so), and a connection's exclusion is a function of its record and
 * the time.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute.h"
#include "ngx_omniroute_ctx.h"


/*
 * At the start of planning in priority order, before any route is
 * checked: the memoized exclusions are listed and planning goes on after
 * them, or, when the memo does not hold, the checks write it anew.
 */

void
ngx_omniroute_memo_start(ngx_omniroute_ctx_t *ctx)
{
    ngx_atomic_uint_t            conn_gen, breaker_gen, settings_gen;
    ngx_uint_t                   i;
    or_msec_t                    now;
    ngx_omniroute_store_t       *st;
    ngx_omniroute_excluded_t    *ex;
    ngx_omniroute_plan_memo_t   *memo;
    ngx_omniroute_memo_entry_t  *e;
    ngx_omniroute_main_conf_t   *omcf;

    ctx->memo.building = 0;

    if (ctx->entry == NULL || ctx->entry->memo == NULL
        || ctx->routes != ctx->entry->routes.elts
        || ctx->plan.scanned != 0 || ctx->excluded.nelts != 0
        || ctx->candidates.nelts != 0
        || ctx->plan.providers != NULL)
    {
        /*
         * The model's own routes only (not those a client key narrowed),
         * and a request that has read no provider state yet: one planned
         * again after a wait (ngx_omniroute_plan_restart()) goes on with
         * the breakers and settings it read before, which are not the
         * tables' now.
         */
        return;
    }

    omcf = ngx_http_get_module_main_conf(ctx->request,
                                         ngx_http_omniroute_module);

    if (omcf->shm_zone == NULL) {
        return;
    }

    st = &omcf->store;
    memo = ctx->entry->memo;
    now = ngx_omniroute_now();

    conn_gen = ngx_omniroute_store_gen(st, NGX_OMNIROUTE_T_CONN);
    breaker_gen = ngx_omniroute_store_gen(st, NGX_OMNIROUTE_T_BREAKER);
    settings_gen = ngx_omniroute_store_gen(st, NGX_OMNIROUTE_T_SETTINGS);

    if (memo->conn_gen != 0
        && memo->conn_gen == conn_gen
        && memo->breaker_gen == breaker_gen
        && memo->settings_gen == settings_gen
        && now < memo->valid_until
        && memo->n <= ctx->nroutes)
    {
        ex = ngx_array_push_n(&ctx->excluded, memo->n);

        if (ex != NULL) {
            e = memo->entries;

            for (i = 0; i < memo->n; i++) {
                ex[i].route = &ctx->routes[i];
                ex[i].reason = e[i].reason;
                ex[i].retry_after = (e[i].until == OR_MSEC_NONE)
                                    ? OR_MSEC_NONE : e[i].until - now;
                ex[i].kind = e[i].kind;
            }

            ctx->plan.scanned = memo->n;

            ngx_log_debug1(NGX_LOG_DEBUG_HTTP,
                           ctx->request->connection->log, 0,
                           "omniroute plan: %ui routes excluded, as memoized",
                           memo->n);
            return;
        }

        /* no memory: the routes are checked */
    }

    memo->conn_gen = 0;

    ctx->memo.building = 1;
    ctx->memo.n = 0;
    ctx->memo.conn_gen = conn_gen;
    ctx->memo.breaker_gen = breaker_gen;
    ctx->memo.settings_gen = settings_gen;
    ctx->memo.until = INT64_MAX;
}


/*
 * The route just checked was excluded by its connection's state alone:
 * retry is what or_plan_exclusion() gave (OR_MSEC_NONE: terminal),
 * expires the record's expiry (0: none).
 */

void
ngx_omniroute_memo_excluded(ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_route_t *route, const char *reason, or_msec_t retry,
    or_wait_kind_e kind, or_msec_t expires, or_msec_t now)
{
    ngx_omniroute_memo_entry_t  *e;

    if (!ctx->memo.building) {
        return;
    }

    if (ctx->memo.n >= ctx->nroutes || route != &ctx->routes[ctx->memo.n]) {
        /* not the next route in order: the memo ends here */
        ngx_omniroute_memo_end(ctx);
        return;
    }

    e = &ctx->entry->memo->entries[ctx->memo.n++];

    e->reason = reason;
    e->kind = kind;
    e->until = (retry < 0) ? OR_MSEC_NONE : now + retry;

    if (e->until != OR_MSEC_NONE && e->until < ctx->memo.until) {
        ctx->memo.until = e->until;
    }

    if (expires && expires < ctx->memo.until) {
        ctx->memo.until = expires;
    }
}


/*
 * The excluded routes at the start end here (a route is eligible or
 * excluded for another reason, or none is left): the memo is kept when
 * the tables did not change while the routes were checked.
 */

void
ngx_omniroute_memo_end(ngx_omniroute_ctx_t *ctx)
{
    ngx_omniroute_store_t      *st;
    ngx_omniroute_plan_memo_t  *memo;
    ngx_omniroute_main_conf_t  *omcf;

    if (!ctx->memo.building) {
        return;
    }

    ctx->memo.building = 0;

    if (ctx->memo.n == 0) {
        return;
    }

    omcf = ngx_http_get_module_main_conf(ctx->request,
                                         ngx_http_omniroute_module);
    st = &omcf->store;

    if (ngx_omniroute_store_gen(st, NGX_OMNIROUTE_T_CONN)
        != ctx->memo.conn_gen
        || ngx_omniroute_store_gen(st, NGX_OMNIROUTE_T_BREAKER)
           != ctx->memo.breaker_gen
        || ngx_omniroute_store_gen(st, NGX_OMNIROUTE_T_SETTINGS)
           != ctx->memo.settings_gen)
    {
        /* a record changed while they were checked */
        return;
    }

    memo = ctx->entry->memo;

    memo->n = ctx->memo.n;
    memo->valid_until = ctx->memo.until;
    memo->breaker_gen = ctx->memo.breaker_gen;
    memo->settings_gen = ctx->memo.settings_gen;
    memo->conn_gen = ctx->memo.conn_gen;
}
