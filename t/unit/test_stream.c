/*
 * Copyright (C) ngx_omniroute authors
 *
 * R-STREAM-2, R-STREAM-3: the watch over a streamed attempt: the
 * first-content deadline, the content-stall budget, the throughput
 * watchdog (warm-up, rolling window, minimum rate and output, judgement
 * suspended during tool calls and reasoning).
 */


#include "or_test.h"
#include "or_stream.h"


#define T0  1000000


static or_sse_event_t
ev_of(or_sse_kind_e kind, unsigned content, unsigned progress, size_t bytes)
{
    or_sse_event_t  ev;

    memset(&ev, 0, sizeof(ev));
    ev.kind = kind;
    ev.content = content;
    ev.progress = progress;
    ev.text_bytes = bytes;

    return ev;
}


static or_watch_e
check(or_stream_conf_t *c, or_watch_t *w, or_msec_t now, int last,
    or_msec_t *next)
{
    or_msec_t  dummy;

    return or_watch_check(c, w, now, last, next ? next : &dummy);
}


static void
test_conf(void)
{
    or_stream_conf_t  c;

    or_stream_conf_init(&c);
    or_stream_conf_fill(&c);

    or_is_int(c.watchdog, 0, "R-STREAM-2 the watchdog is opt-in");
    or_is_int(c.stall_ms, 60000, "R-STREAM-3 stall budget 60 s");
    or_is_int(c.warmup_ms, 10000, "warm-up 10 s");
    or_is_int(c.window_ms, 30000, "window 30 s");
    or_is_int(c.min_rate, 8, "min rate 8 bytes/s");
    or_is_int(c.min_bytes, 200, "min measurable output 200 bytes");
    or_is_int(c.first_content_ms, OR_MSEC_NONE,
              "the first-content deadline is off");
    or_ok(!or_stream_conf_active(&c), "nothing is active by default");
    or_ok(or_stream_conf_check(&c) == NULL, "the defaults are valid");

    c.window_ms = 10;
    or_ok(or_stream_conf_check(&c) != NULL, "a window below 1 s is refused");
}


static void
test_first_content(void)
{
    or_watch_t        w;
    or_msec_t         next;
    or_stream_conf_t  c;
    or_sse_event_t    e;

    or_stream_conf_init(&c);
    or_stream_conf_fill(&c);
    c.first_content_ms = 3000;

    or_watch_start(&w, &c, T0);

    or_is_int(check(&c, &w, T0 + 100, 0, &next), OR_WATCH_OK,
              "before the deadline: ok");
    or_is_int(next, T0 + 3000, "checked again at the deadline");

    or_watch_header(&w, T0 + 500);
    e = ev_of(OR_SSE_EV_HEARTBEAT, 0, 0, 0);
    or_watch_event(&w, &e, T0 + 1000);
    e = ev_of(OR_SSE_EV_META, 0, 0, 0);
    or_watch_event(&w, &e, T0 + 2000);

    or_is_int(check(&c, &w, T0 + 3000, 0, NULL), OR_WATCH_FIRST_CONTENT,
              "heartbeats and metadata only: the deadline trips");
    or_is_int(check(&c, &w, T0 + 3000, 1, &next), OR_WATCH_OK,
              "never the last candidate");

    e = ev_of(OR_SSE_EV_TEXT, 1, 1, 5);
    or_watch_event(&w, &e, T0 + 2500);
    or_is_int(check(&c, &w, T0 + 9000, 0, &next), OR_WATCH_OK,
              "content came: no deadline");
    or_is_int(next, OR_MSEC_NONE, "nothing pending (watchdog off)");
}


static void
test_stall(void)
{
    or_watch_t        w;
    or_msec_t         next;
    or_stream_conf_t  c;
    or_sse_event_t    e;

    or_stream_conf_init(&c);
    or_stream_conf_fill(&c);
    c.watchdog = 1;
    c.stall_ms = 5000;
    c.min_rate = 0;

    or_watch_start(&w, &c, T0);

    or_is_int(check(&c, &w, T0 + 60000, 0, &next), OR_WATCH_OK,
              "R-STREAM-3 the budget starts with the response header");

    or_watch_header(&w, T0 + 1000);

    e = ev_of(OR_SSE_EV_HEARTBEAT, 0, 0, 0);
    or_watch_event(&w, &e, T0 + 3000);
    or_watch_event(&w, &e, T0 + 5000);

    or_is_int(check(&c, &w, T0 + 5999, 0, &next), OR_WATCH_OK,
              "within the budget");
    or_is_int(next, T0 + 6000, "next check when the budget runs out");
    or_is_int(check(&c, &w, T0 + 6000, 0, NULL), OR_WATCH_STALL,
              "R-STREAM-3 a heartbeat-only turn still trips it");
    or_is_int(check(&c, &w, T0 + 6000, 1, NULL), OR_WATCH_STALL,
              "the stall budget applies to the last candidate too");

    /* reasoning frames restart it */

    or_watch_start(&w, &c, T0);
    or_watch_header(&w, T0);

    e = ev_of(OR_SSE_EV_REASONING, 0, 1, 0);
    or_watch_event(&w, &e, T0 + 4000);
    or_watch_event(&w, &e, T0 + 8000);

    or_is_int(check(&c, &w, T0 + 12000, 0, &next), OR_WATCH_OK,
              "R-STREAM-3 each reasoning frame restarts the budget");
    or_is_int(next, T0 + 13000, "from the last frame");

    e = ev_of(OR_SSE_EV_META, 0, 0, 0);
    or_watch_event(&w, &e, T0 + 12500);
    or_is_int(check(&c, &w, T0 + 13000, 0, NULL), OR_WATCH_STALL,
              "R-STREAM-3 metadata does not restart it");

    /* text after commit */

    or_watch_start(&w, &c, T0);
    or_watch_header(&w, T0);
    e = ev_of(OR_SSE_EV_TEXT, 1, 1, 10);
    or_watch_event(&w, &e, T0 + 1000);
    or_is_int(check(&c, &w, T0 + 5500, 0, NULL), OR_WATCH_OK,
              "output restarts it");
    or_is_int(check(&c, &w, T0 + 6000, 0, NULL), OR_WATCH_STALL,
              "a stall after content trips it");

    c.watchdog = 0;
    or_is_int(check(&c, &w, T0 + 60000, 0, NULL), OR_WATCH_OK,
              "R-STREAM-2 opt-in: off, nothing trips");
}


static void
test_slow(void)
{
    int               i;
    or_watch_t        w;
    or_msec_t         next, t;
    or_stream_conf_t  c;
    or_sse_event_t    e;

    or_stream_conf_init(&c);
    or_stream_conf_fill(&c);
    c.watchdog = 1;
    c.stall_ms = 0;
    c.warmup_ms = 2000;
    c.window_ms = 4000;
    c.min_rate = 100;          /* 400 bytes per window */
    c.min_bytes = 50;

    or_watch_start(&w, &c, T0);
    or_watch_header(&w, T0);

    /* 1 s of fast output, then a trickle of 10 bytes a second */

    for (i = 0; i < 10; i++) {
        e = ev_of(OR_SSE_EV_TEXT, 1, 1, 100);
        or_watch_event(&w, &e, T0 + i * 100);
    }

    for (t = T0 + 1000; t <= T0 + 12000; t += 1000) {
        e = ev_of(OR_SSE_EV_TEXT, 1, 1, 10);
        or_watch_event(&w, &e, t);

        if (t == T0 + 5000) {
            or_is_int(check(&c, &w, t, 0, &next), OR_WATCH_OK,
                      "R-STREAM-2 no verdict before warm-up + a window");
            or_is_int(next, T0 + 6000, "the first verdict at 6 s");
        }
    }

    or_is_int(check(&c, &w, T0 + 6000, 0, NULL), OR_WATCH_SLOW,
              "R-STREAM-2 a trickle below the rate trips it (the fast "
              "start is out of the window)");
    or_is_int(check(&c, &w, T0 + 12000, 0, NULL), OR_WATCH_SLOW,
              "R-STREAM-2 and still does later");
    or_is_int(check(&c, &w, T0 + 12000, 1, NULL), OR_WATCH_SLOW,
              "the watchdog applies to the last candidate too");

    /* a healthy rate never trips it */

    or_watch_start(&w, &c, T0);
    or_watch_header(&w, T0);

    i = 0;

    for (t = T0; t <= T0 + 20000; t += 250) {
        e = ev_of(OR_SSE_EV_TEXT, 1, 1, 30);
        or_watch_event(&w, &e, t);
        i += (check(&c, &w, t, 0, NULL) != OR_WATCH_OK);
    }

    or_is_int(i, 0, "R-STREAM-2 120 bytes/s (above 100) never trips it");

    /* heartbeats and metadata do not count as output */

    or_watch_start(&w, &c, T0);
    or_watch_header(&w, T0);

    e = ev_of(OR_SSE_EV_TEXT, 1, 1, 60);
    or_watch_event(&w, &e, T0);

    for (t = T0 + 100; t <= T0 + 8000; t += 100) {
        e = ev_of(OR_SSE_EV_HEARTBEAT, 0, 0, 0);
        or_watch_event(&w, &e, t);
        e = ev_of(OR_SSE_EV_META, 0, 0, 0);
        or_watch_event(&w, &e, t);
    }

    or_is_int(check(&c, &w, T0 + 8000, 0, NULL), OR_WATCH_SLOW,
              "R-STREAM-2 heartbeats and metadata are not progress");

    /* minimum measurable output */

    or_watch_start(&w, &c, T0);
    e = ev_of(OR_SSE_EV_TEXT, 1, 1, 20);
    or_watch_event(&w, &e, T0);
    or_is_int(check(&c, &w, T0 + 20000, 0, &next), OR_WATCH_OK,
              "R-STREAM-2 below the minimum measurable output: no verdict");
    or_ok(next > T0 + 20000, "checked again later");

    /* judgement suspended during tool calls and reasoning */

    or_watch_start(&w, &c, T0);
    e = ev_of(OR_SSE_EV_TEXT, 1, 1, 100);
    or_watch_event(&w, &e, T0);

    e = ev_of(OR_SSE_EV_TOOL, 1, 1, 0);
    or_watch_event(&w, &e, T0 + 1000);

    or_is_int(check(&c, &w, T0 + 30000, 0, &next), OR_WATCH_OK,
              "R-STREAM-2 suspended during a tool call");

    e = ev_of(OR_SSE_EV_TEXT, 1, 1, 1);
    or_watch_event(&w, &e, T0 + 30000);

    or_is_int(check(&c, &w, T0 + 33000, 0, &next), OR_WATCH_OK,
              "R-STREAM-2 a full window after the tool call first");
    or_is_int(next, T0 + 34000, "judged a window after it ended");
    or_is_int(check(&c, &w, T0 + 34000, 0, NULL), OR_WATCH_SLOW,
              "then the slow text trips it");

    e = ev_of(OR_SSE_EV_REASONING, 0, 1, 0);
    or_watch_event(&w, &e, T0 + 34000);
    or_is_int(check(&c, &w, T0 + 40000, 0, NULL), OR_WATCH_OK,
              "R-STREAM-2 suspended during reasoning");

    or_is_int(or_watch_window_bytes(&w, T0 + 90000), 0,
              "old buckets fall out of the window");
}


int
main(void)
{
    test_conf();
    test_first_content();
    test_stall();
    test_slow();

    return or_done();
}
