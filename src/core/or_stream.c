/*
 * Copyright (C) ngx_omniroute authors
 *
 * The watch over one streamed attempt; see or_stream.h.
 */


#include <string.h>

#include "or_stream.h"


#define OR_STREAM_STALL_MS     ((or_msec_t) 60 * 1000)
#define OR_STREAM_WARMUP_MS    ((or_msec_t) 10 * 1000)
#define OR_STREAM_WINDOW_MS    ((or_msec_t) 30 * 1000)
#define OR_STREAM_MIN_RATE     8
#define OR_STREAM_MIN_BYTES    200


static or_msec_t or_watch_min(or_msec_t a, or_msec_t b);


void
or_stream_conf_init(or_stream_conf_t *conf)
{
    conf->watchdog = OR_UNSET;
    conf->stall_ms = OR_MSEC_NONE;
    conf->warmup_ms = OR_MSEC_NONE;
    conf->window_ms = OR_MSEC_NONE;
    conf->min_rate = OR_UNSET;
    conf->min_bytes = OR_UNSET;
    conf->first_content_ms = OR_MSEC_NONE;
    conf->include_usage = OR_UNSET;
    conf->first_byte_ms = OR_MSEC_NONE;
}


void
or_stream_conf_fill(or_stream_conf_t *conf)
{
    if (conf->watchdog == OR_UNSET) {
        conf->watchdog = 0;
    }

    if (conf->stall_ms == OR_MSEC_NONE) {
        conf->stall_ms = OR_STREAM_STALL_MS;
    }

    if (conf->warmup_ms == OR_MSEC_NONE) {
        conf->warmup_ms = OR_STREAM_WARMUP_MS;
    }

    if (conf->window_ms == OR_MSEC_NONE) {
        conf->window_ms = OR_STREAM_WINDOW_MS;
    }

    if (conf->min_rate == OR_UNSET) {
        conf->min_rate = OR_STREAM_MIN_RATE;
    }

    if (conf->min_bytes == OR_UNSET) {
        conf->min_bytes = OR_STREAM_MIN_BYTES;
    }

    /* first_content_ms stays OR_MSEC_NONE: off */

    if (conf->include_usage == OR_UNSET) {
        conf->include_usage = 0;
    }
}


const char *
or_stream_conf_check(const or_stream_conf_t *conf)
{
    if (conf->stall_ms < 0 || conf->stall_ms > OR_WATCH_MAX_MS) {
        return "the stream stall budget must be between 0 and 24h";
    }

    if (conf->warmup_ms < 0 || conf->warmup_ms > OR_WATCH_MAX_MS) {
        return "the stream watchdog warm-up must be between 0 and 24h";
    }

    if (conf->window_ms < 1000 || conf->window_ms > OR_WATCH_MAX_MS) {
        return "the stream watchdog window must be between 1s and 24h";
    }

    if (conf->min_rate < 0 || conf->min_bytes < 0) {
        return "the stream watchdog rate and bytes must not be negative";
    }

    if (conf->first_content_ms != OR_MSEC_NONE
        && (conf->first_content_ms < 0
            || conf->first_content_ms > OR_WATCH_MAX_MS))
    {
        return "the first-content deadline must be between 0 and 24h";
    }

    if (conf->first_byte_ms != OR_MSEC_NONE
        && (conf->first_byte_ms < 0 || conf->first_byte_ms > OR_WATCH_MAX_MS))
    {
        return "the first-byte deadline must be between 0 and 24h";
    }

    return NULL;
}


int
or_stream_conf_active(const or_stream_conf_t *conf)
{
    return conf->watchdog > 0 || conf->first_content_ms > 0;
}


void
or_watch_start(or_watch_t *w, const or_stream_conf_t *conf, or_msec_t now)
{
    memset(w, 0, sizeof(or_watch_t));

    w->start = now;
    w->bucket_ms = (conf != NULL && conf->window_ms > 0)
                   ? conf->window_ms / OR_WATCH_BUCKETS : 1000;

    if (w->bucket_ms <= 0) {
        w->bucket_ms = 1;
    }
}


void
or_watch_header(or_watch_t *w, or_msec_t now)
{
    if (w->header_at == 0) {
        w->header_at = now;
    }
}


void
or_watch_event(or_watch_t *w, const or_sse_event_t *ev, or_msec_t now)
{
    int64_t   no;
    unsigned  i;

    if (ev->content && w->content_at == 0) {
        w->content_at = now;
    }

    if (!ev->progress) {
        /* heartbeats, metadata, done and error events are no progress */
        return;
    }

    w->progress_at = now;

    switch (ev->kind) {

    case OR_SSE_EV_TOOL:
    case OR_SSE_EV_REASONING:
        w->suspended = 1;
        return;

    case OR_SSE_EV_TEXT:
    case OR_SSE_EV_OTHER:
        break;

    default:
        return;
    }

    if (w->suspended) {
        w->suspended = 0;
        w->resume_at = now;
    }

    if (ev->kind != OR_SSE_EV_TEXT || ev->text_bytes == 0) {
        return;
    }

    if (w->text_at == 0) {
        w->text_at = now;
    }

    w->text_bytes += ev->text_bytes;

    no = now / w->bucket_ms;
    i = (unsigned) (no % OR_WATCH_BUCKETS);

    if (w->bucket_no[i] != no) {
        w->bucket_no[i] = no;
        w->bucket_bytes[i] = 0;
    }

    if (w->bucket_bytes[i] > UINT32_MAX - ev->text_bytes) {
        w->bucket_bytes[i] = UINT32_MAX;

    } else {
        w->bucket_bytes[i] += (uint32_t) ev->text_bytes;
    }
}


uint64_t
or_watch_window_bytes(const or_watch_t *w, or_msec_t now)
{
    int64_t   no;
    unsigned  i;
    uint64_t  sum;

    if (w->bucket_ms <= 0) {
        return 0;
    }

    no = now / w->bucket_ms;
    sum = 0;

    for (i = 0; i < OR_WATCH_BUCKETS; i++) {
        if (w->bucket_no[i] > no - OR_WATCH_BUCKETS
            && w->bucket_no[i] <= no)
        {
            sum += w->bucket_bytes[i];
        }
    }

    return sum;
}


static or_msec_t
or_watch_min(or_msec_t a, or_msec_t b)
{
    if (a == OR_MSEC_NONE) {
        return b;
    }

    if (b == OR_MSEC_NONE) {
        return a;
    }

    return a < b ? a : b;
}


or_watch_e
or_watch_check(const or_stream_conf_t *conf, const or_watch_t *w,
    or_msec_t now, int last_candidate, or_msec_t *next)
{
    or_msec_t  at, from, ref;

    *next = OR_MSEC_NONE;

    /* the first-content deadline, never on the last candidate */

    if (conf->first_content_ms > 0 && w->content_at == 0 && !last_candidate)
    {
        at = or_msec_add(w->start, conf->first_content_ms);

        if (now >= at) {
            return OR_WATCH_FIRST_CONTENT;
        }

        *next = or_watch_min(*next, at);
    }

    if (conf->watchdog <= 0) {
        return OR_WATCH_OK;
    }

    /* R-STREAM-3: the content-stall budget */

    if (conf->stall_ms > 0 && w->header_at != 0) {
        ref = w->progress_at > w->header_at ? w->progress_at : w->header_at;
        at = ref + conf->stall_ms;

        if (now >= at) {
            return OR_WATCH_STALL;
        }

        *next = or_watch_min(*next, at);
    }

    /* R-STREAM-2: the throughput watchdog */

    if (conf->min_rate <= 0 || w->text_at == 0) {
        return OR_WATCH_OK;
    }

    if (w->suspended) {
        /* judged again once text resumes (an event, not a time) */
        return OR_WATCH_OK;
    }

    from = or_msec_add(w->text_at, conf->warmup_ms);

    if (w->resume_at > from) {
        from = w->resume_at;
    }

    at = from + conf->window_ms;

    if (now < at) {
        *next = or_watch_min(*next, at);
        return OR_WATCH_OK;
    }

    if (w->text_bytes < (uint64_t) conf->min_bytes) {
        /* too little output to measure a rate: checked again later */
        *next = or_watch_min(*next, or_msec_add(now, w->bucket_ms));
        return OR_WATCH_OK;
    }

    if (or_watch_window_bytes(w, now) * 1000
        < (uint64_t) conf->min_rate * (uint64_t) conf->window_ms)
    {
        return OR_WATCH_SLOW;
    }

    *next = or_watch_min(*next, or_msec_add(now, w->bucket_ms));

    return OR_WATCH_OK;
}


const char *
or_watch_name(or_watch_e verdict)
{
    switch (verdict) {
    case OR_WATCH_FIRST_CONTENT:
        return "first_content";
    case OR_WATCH_STALL:
        return "stall";
    case OR_WATCH_SLOW:
        return "slow";
    default:
        return "ok";
    }
}
