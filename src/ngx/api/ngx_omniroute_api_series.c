
/*
 * Copyright (C) ngx_omniroute authors
 *
 * GET /api/monitoring/timeseries: the last minutes of each provider, per
 * second, from the metrics zone's rings (attempts, failed attempts,
 * average latency), and each breaker's recent state changes; what the
 * status page draws.  ?seconds=N (1..300, default 300) shortens it.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute_api.h"


static json_t *ngx_omniroute_api_series_provider(
    ngx_omniroute_mprovider_t *mp, ngx_uint_t seconds, ngx_uint_t now_sec);
static json_t *ngx_omniroute_api_timeline(ngx_omniroute_mzone_t *mz,
    ngx_uint_t i);


ngx_int_t
ngx_omniroute_api_timeseries(ngx_omniroute_api_call_t *call)
{
    json_t                     *doc, *providers, *breakers, *o;
    ngx_int_t                   n;
    ngx_str_t                   arg;
    ngx_uint_t                  i, seconds;
    ngx_omniroute_mzone_t      *mz;
    ngx_omniroute_provider_t   *p;

    seconds = NGX_OMNIROUTE_TICKS;

    if (ngx_omniroute_api_arg(call, "seconds", &arg) == NGX_OK) {
        n = ngx_atoi(arg.data, arg.len);

        if (n < 1 || n > NGX_OMNIROUTE_TICKS) {
            return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                          "out_of_range",
                                          "\"seconds\" must be between 1 "
                                          "and %d", NGX_OMNIROUTE_TICKS);
        }

        seconds = (ngx_uint_t) n;
    }

    mz = call->omcf->mzone;
    p = call->omcf->providers.elts;

    doc = json_object();
    providers = json_object();
    breakers = json_object();

    if (doc == NULL || providers == NULL || breakers == NULL) {
        json_decref(doc);
        json_decref(providers);
        json_decref(breakers);
        return NGX_ERROR;
    }

    call->out = doc;

    if (json_object_set_new(doc, "time", json_integer(call->now)) != 0
        || json_object_set_new(doc, "interval_s", json_integer(1)) != 0
        || json_object_set_new(doc, "seconds", json_integer(seconds)) != 0
        || json_object_set_new(doc, "providers", providers) != 0
        || json_object_set_new(doc, "breakers", breakers) != 0)
    {
        return NGX_ERROR;
    }

    if (mz == NULL || mz->sh == NULL) {
        return NGX_OK;
    }

    for (i = 0; i < mz->nproviders; i++) {
        o = ngx_omniroute_api_series_provider(&mz->sh->providers[i], seconds,
                                              (ngx_uint_t) (call->now / 1000));

        if (o == NULL
            || json_object_setn_new(providers, (const char *) p[i].name.data,
                                    p[i].name.len, o)
               != 0)
        {
            return NGX_ERROR;
        }

        o = ngx_omniroute_api_timeline(mz, i);

        if (o == NULL
            || json_object_setn_new(breakers, (const char *) p[i].name.data,
                                    p[i].name.len, o)
               != 0)
        {
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


/* oldest first, the current second last; a slot of another second is 0 */

static json_t *
ngx_omniroute_api_series_provider(ngx_omniroute_mprovider_t *mp,
    ngx_uint_t seconds, ngx_uint_t now_sec)
{
    json_t                *o, *att, *err, *lat;
    ngx_uint_t             k, sec;
    ngx_atomic_uint_t      a, e, ms;
    ngx_omniroute_tick_t  *t;

    o = json_object();
    att = json_array();
    err = json_array();
    lat = json_array();

    if (o == NULL || att == NULL || err == NULL || lat == NULL
        || json_object_set_new(o, "attempts", att) != 0
        || json_object_set_new(o, "errors", err) != 0
        || json_object_set_new(o, "latency_ms", lat) != 0)
    {
        json_decref(o);
        return NULL;
    }

    for (k = seconds; k > 0; k--) {
        sec = now_sec - (k - 1);
        t = &mp->ticks[sec % NGX_OMNIROUTE_TICKS];

        if (t->sec == sec) {
            a = t->attempts;
            e = t->errors;
            ms = t->ms;

        } else {
            a = 0;
            e = 0;
            ms = 0;
        }

        if (json_array_append_new(att, json_integer(a)) != 0
            || json_array_append_new(err, json_integer(e)) != 0
            || json_array_append_new(lat, a ? json_integer(ms / a)
                                            : json_null())
               != 0)
        {
            json_decref(o);
            return NULL;
        }
    }

    return o;
}


/* the breaker's state changes kept in the zone, oldest first */

static json_t *
ngx_omniroute_api_timeline(ngx_omniroute_mzone_t *mz, ngx_uint_t i)
{
    json_t                      *list, *item;
    ngx_uint_t                   k, n, next;
    ngx_omniroute_transition_t   tl[NGX_OMNIROUTE_TIMELINE];

    next = ngx_omniroute_mzone_timeline(mz, i, tl);

    list = json_array();
    if (list == NULL) {
        return NULL;
    }

    n = ngx_min(next, NGX_OMNIROUTE_TIMELINE);

    for (k = next - n; k < next; k++) {
        item = json_pack("{s:I,s:s,s:s}",
                         "time", (json_int_t) tl[k % NGX_OMNIROUTE_TIMELINE]
                                                 .time,
                         "from", or_breaker_state_name((or_cb_state_e)
                                     tl[k % NGX_OMNIROUTE_TIMELINE].from),
                         "to", or_breaker_state_name((or_cb_state_e)
                                     tl[k % NGX_OMNIROUTE_TIMELINE].to));

        if (item == NULL || json_array_append_new(list, item) != 0) {
            json_decref(list);
            return NULL;
        }
    }

    return list;
}
