/*
 * Copyright (C) ngx_omniroute authors
 *
 * The watch over one streamed attempt (R-STREAM-2, R-STREAM-3): a
 * per-attempt deadline for the first content, the content-stall budget
 * and the throughput watchdog.  Plain C, no nginx, no allocation; time in
 * milliseconds passed in.  The glue feeds every event of the attempt's
 * stream (or_sse_event_t) and asks or_watch_check() on a timer; an abort
 * applies to that attempt only (before the commit point it falls over,
 * after it the client's stream ends with an in-band error).
 *
 * Settings (per provider; or_stream_conf_fill() gives the defaults):
 *
 *   watchdog          0     the throughput watchdog and the content-stall
 *                           budget (opt-in; the glue also turns it on when
 *                           the global stream.throughput_watchdog is on,
 *                           env STREAM_THROUGHPUT_WATCHDOG_ENABLED)
 *   stall_ms          60 s  content-stall budget: the longest time
 *                           without output (text, tool-call or reasoning
 *                           frames) from the response header on; each
 *                           reasoning frame restarts it; heartbeats and
 *                           metadata do not, so a turn that only sends
 *                           heartbeats trips it.  0: no budget.
 *   warmup_ms         10 s  after the first text delta, before any rate
 *                           is judged
 *   window_ms         30 s  the rolling window the rate is measured over;
 *                           a full window (after warm-up, and after the
 *                           last tool-call / reasoning phase) is needed
 *                           before a verdict
 *   min_rate          8     bytes of text deltas per second the window
 *                           must reach (UTF-8 bytes, a conservative proxy
 *                           of tokens); 0: no rate watchdog
 *   min_bytes         200   minimum measurable output: the rate is judged
 *                           only once the attempt produced this many text
 *                           bytes in all (a stream of tool calls or
 *                           reasoning with little text is left to the
 *                           stall budget)
 *   first_content_ms  0     per-attempt deadline for the first content
 *                           event, from dispatch (connect and response
 *                           header included); 0: off.  Never applied to
 *                           the last candidate.
 *   include_usage     0     not the watch: a Chat Completions stream
 *                           that did not ask for usage asks for it
 *                           (or_splice_stream_usage()) and the usage-only
 *                           chunk is kept from the client
 *
 * Judgement is suspended while a tool-call or reasoning phase is in
 * flight (the most recent output frame is one): the rate is only judged
 * over text, and a full window must pass after the phase ends.
 *
 * or_watch_check() verdicts, first match wins:
 *
 *   first_content   first_content_ms > 0, no content yet, not the last
 *                   candidate, now - start >= first_content_ms
 *   stall           watchdog, stall_ms > 0, a response header seen,
 *                   now - max(header_at, last progress) >= stall_ms
 *   slow            watchdog, min_rate > 0, text_bytes >= min_bytes, not
 *                   suspended, a full window since max(first text +
 *                   warmup, end of the last tool/reasoning phase), and
 *                   the text bytes of the last window_ms below
 *                   min_rate x window_ms / 1000
 *   ok              *next is the earliest time a verdict may change
 *                   (OR_MSEC_NONE: none pending)
 */

#ifndef _OR_STREAM_H_INCLUDED_
#define _OR_STREAM_H_INCLUDED_


#include "or_types.h"
#include "or_sse.h"


#define OR_WATCH_BUCKETS      16
#define OR_WATCH_MAX_MS       ((or_msec_t) 24 * 3600 * 1000)


typedef struct {
    int32_t      watchdog;          /* OR_UNSET: default (off) */
    or_msec_t    stall_ms;          /* OR_MSEC_NONE: default; 0: off */
    or_msec_t    warmup_ms;
    or_msec_t    window_ms;
    int32_t      min_rate;          /* bytes per second */
    int32_t      min_bytes;
    or_msec_t    first_content_ms;  /* OR_MSEC_NONE / 0: off */
    int32_t      include_usage;     /* ask Chat streams for usage; OR_UNSET:
                                       default (off) */
    or_msec_t    first_byte_ms;     /* an attempt's deadline for its
                                       response header, when another may
                                       follow (issue 25); OR_MSEC_NONE /
                                       0: off */
} or_stream_conf_t;


typedef enum {
    OR_WATCH_OK = 0,
    OR_WATCH_FIRST_CONTENT,
    OR_WATCH_STALL,
    OR_WATCH_SLOW
} or_watch_e;


typedef struct {
    or_msec_t    start;             /* the attempt was dispatched */
    or_msec_t    header_at;         /* its response header; 0: none */
    or_msec_t    content_at;        /* first content event; 0: none */
    or_msec_t    text_at;           /* first text delta; 0: none */
    or_msec_t    progress_at;       /* last output or reasoning frame */
    or_msec_t    resume_at;         /* end of the last tool/reasoning
                                       phase */
    int          suspended;         /* in a tool-call / reasoning phase */
    uint64_t     text_bytes;
    or_msec_t    bucket_ms;         /* window_ms / OR_WATCH_BUCKETS */
    int64_t      bucket_no[OR_WATCH_BUCKETS];
    uint32_t     bucket_bytes[OR_WATCH_BUCKETS];
} or_watch_t;


void or_stream_conf_init(or_stream_conf_t *conf);
void or_stream_conf_fill(or_stream_conf_t *conf);
const char *or_stream_conf_check(const or_stream_conf_t *conf);

/* any part of the watch is on */
int or_stream_conf_active(const or_stream_conf_t *conf);

void or_watch_start(or_watch_t *w, const or_stream_conf_t *conf,
    or_msec_t now);
void or_watch_header(or_watch_t *w, or_msec_t now);
void or_watch_event(or_watch_t *w, const or_sse_event_t *ev, or_msec_t now);
or_watch_e or_watch_check(const or_stream_conf_t *conf, const or_watch_t *w,
    or_msec_t now, int last_candidate, or_msec_t *next);

/* the text bytes counted in the window ending at now */
uint64_t or_watch_window_bytes(const or_watch_t *w, or_msec_t now);

const char *or_watch_name(or_watch_e verdict);


#endif /* _OR_STREAM_H_INCLUDED_ */
