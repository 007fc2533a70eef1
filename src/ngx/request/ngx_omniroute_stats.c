
/*
 * Copyright (C) ngx_omniroute authors
 *
 * The counters the metrics read (atomic, in the shared zone): how client
 * requests ended, attempts and fallbacks by reason, restatements by rule.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute_request.h"


static ngx_omniroute_store_t *
ngx_omniroute_stats_store(ngx_http_request_t *r)
{
    ngx_omniroute_main_conf_t  *omcf;

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);

    return (omcf->shm_zone && omcf->store.sh) ? &omcf->store : NULL;
}


void
ngx_omniroute_count(ngx_http_request_t *r, ngx_uint_t outcome)
{
    ngx_omniroute_store_t  *st;

    st = ngx_omniroute_stats_store(r);

    if (st && outcome < NGX_OMNIROUTE_OUT_COUNT) {
        (void) ngx_atomic_fetch_add(&st->sh->stats.requests[outcome], 1);
    }
}


void
ngx_omniroute_count_fallback(ngx_http_request_t *r, or_reason_e reason)
{
    ngx_omniroute_store_t  *st;

    st = ngx_omniroute_stats_store(r);

    if (st && (unsigned) reason < OR_REASON_COUNT) {
        (void) ngx_atomic_fetch_add(&st->sh->stats.fallbacks[reason], 1);
    }
}


void
ngx_omniroute_count_attempt(ngx_http_request_t *r, or_reason_e reason)
{
    ngx_omniroute_store_t  *st;

    st = ngx_omniroute_stats_store(r);

    if (st && (unsigned) reason < OR_REASON_COUNT) {
        (void) ngx_atomic_fetch_add(&st->sh->stats.attempts[reason], 1);
    }
}


void
ngx_omniroute_count_restatement(ngx_http_request_t *r, const char *rule)
{
    size_t                       len;
    ngx_uint_t                   i;
    ngx_omniroute_store_t       *st;
    ngx_omniroute_rule_count_t  *rc;

    st = ngx_omniroute_stats_store(r);

    if (st == NULL) {
        return;
    }

    if (rule == NULL) {
        rule = "unnamed";
    }

    len = ngx_min(ngx_strlen(rule), NGX_OMNIROUTE_RULE_NAME_MAX - 1);

    ngx_shmtx_lock(&st->shpool->mutex);

    for (i = 0; i < NGX_OMNIROUTE_RULE_SLOTS; i++) {
        rc = &st->sh->stats.restatements[i];

        if (rc->name[0] == '\0') {
            ngx_memcpy(rc->name, rule, len);
            rc->name[len] = '\0';
        }

        if (ngx_strncmp(rc->name, rule, len) == 0 && rc->name[len] == '\0')
        {
            rc->count++;
            break;
        }
    }

    ngx_shmtx_unlock(&st->shpool->mutex);
}
