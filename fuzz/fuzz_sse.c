/*
 * Copyright (C) ngx_omniroute authors
 *
 * libFuzzer target: the incremental SSE scanner and the stream-format
 * classifier (R-STREAM-1) on arbitrary bytes, split into buffers at
 * arbitrary points (the first input byte seeds the split sizes).  The
 * same input must give the same events whole and split; every byte is
 * consumed exactly once; kept data stays within its bound; statuses are
 * HTTP error statuses; the error messages and in-band error events stay
 * within their buffers and scan back as errors; the stream watch and
 * or_classify_unescape() keep their bounds; or_sse_data_span() on an
 * event's raw bytes finds the data the scanner kept; an event the text
 * shape classified (or_sse_shape_match(), issue 27) is classified alike
 * by the full reading; deltas in a row read as one (or_sse_feed_run())
 * are the same events, bytes and text as read one by one.
 */


#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "or_sse.h"
#include "or_stream.h"
#include "or_classify.h"
#include "or_json.h"


#define FUZZ_MAX_EVENTS  512


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
static void fuzz_malformed(const or_sse_event_t *ev);
static size_t fuzz_scan(const char *s, size_t len, unsigned seed,
    int batched, char *kinds, size_t *bytes, uint64_t *text);
static void fuzz_event(const or_sse_event_t *ev);
static void fuzz_span(const char *raw, size_t len, const or_sse_event_t *ev);
static void fuzz_shape(const or_sse_event_t *ev);


static or_sse_t  fuzz_scanner;


/*
 * The malformed check as the full reading had it (an object not read
 * whole by or_json_skip() at depth 64, OR_SSE_MALFORMED_NEST, to the
 * data's end): the check in the members' pass gives the same verdict
 */

static void
fuzz_malformed(const or_sse_event_t *ev)
{
    int              bad;
    const char      *p, *e, *v;
    or_sse_event_t   full;

    memset(&full, 0, sizeof(full));
    or_sse_classify(ev->name, ev->name_len, ev->data, ev->data_len,
                    ev->data_total, &full);

    e = ev->data + ev->data_len;
    p = or_json_ws(ev->data, e);
    bad = 0;

    if (!full.truncated && p < e && *p == '{') {
        v = or_json_skip(p, e, 64);
        bad = (v == NULL || or_json_ws(v, e) != e);
    }

    if (full.malformed != bad) {
        abort();
    }
}


static void
fuzz_event(const or_sse_event_t *ev)
{
    char             msg[300], out[OR_SSE_ERROR_EVENT_MAX];
    size_t           n;
    or_sse_t        *s;
    or_sse_event_t   back;

    if (ev->data_len > OR_SSE_DATA_MAX || ev->data_len > ev->data_total
        || ev->name_len > OR_SSE_NAME_MAX)
    {
        abort();
    }

    if (ev->truncated != (ev->data_total > ev->data_len)) {
        abort();
    }

    if (ev->kind == OR_SSE_EV_ERROR
        && (ev->status < 400 || ev->status > 599))
    {
        abort();
    }

    if (ev->kind == OR_SSE_EV_NONE || ev->kind > OR_SSE_EV_DONE) {
        abort();
    }

    fuzz_malformed(ev);

    if (ev->data_len == 0) {
        return;
    }

    n = or_sse_error_message(ev->data, ev->data_len, msg, sizeof(msg));

    if (n >= sizeof(msg) || msg[n] != '\0' || strlen(msg) != n) {
        abort();
    }

    n = or_sse_error_event(out, sizeof(out), (or_sse_format_e) (n % 4),
                           ev->status ? ev->status : 502, "fuzz", msg, n,
                           (int) (n % 3) - 1);

    if (n > sizeof(out) || n < 2 || out[n - 1] != '\n' || out[n - 2] != '\n')
    {
        abort();
    }

    s = malloc(sizeof(or_sse_t));
    or_sse_init(s);

    if (or_sse_feed(s, out, n, &back) != n
        || back.kind != OR_SSE_EV_ERROR
        || back.status != (ev->status ? ev->status : 502))
    {
        abort();
    }

    free(s);

    n = or_classify_unescape(ev->data, ev->data_len, msg, sizeof(msg));

    if (n > sizeof(msg) || n > ev->data_len) {
        abort();
    }

    (void) or_classify_quota_text(ev->data, ev->data_len);
}


/* an event of the text shape: the full reading reads it alike */

static void
fuzz_shape(const or_sse_event_t *ev)
{
    or_sse_event_t  full;

    memset(&full, 0, sizeof(full));
    or_sse_classify(ev->name, ev->name_len, ev->data, ev->data_len,
                    ev->data_total, &full);

    if (full.kind != ev->kind || full.format != ev->format
        || full.content != ev->content || full.progress != ev->progress
        || full.finish != ev->finish || full.refusal != ev->refusal
        || full.truncated != ev->truncated || full.malformed != ev->malformed
        || full.usage_only != ev->usage_only || full.usage != ev->usage
        || full.text_bytes != ev->text_bytes || full.status != ev->status)
    {
        abort();
    }
}


/* batched: with or_sse_feed_run(), an event may stand for several */

static size_t
fuzz_scan(const char *s, size_t len, unsigned seed, int batched,
    char *kinds, size_t *bytes, uint64_t *text)
{
    size_t           off, piece, n, k, i;
    uint64_t         quick;
    or_msec_t        now, next;
    or_watch_t       w;
    or_sse_event_t   ev;
    or_stream_conf_t conf;

    or_stream_conf_init(&conf);
    or_stream_conf_fill(&conf);
    conf.watchdog = 1;
    conf.first_content_ms = 1000;
    conf.window_ms = 1000 + seed * 10;

    or_sse_init(&fuzz_scanner);
    or_watch_start(&w, &conf, 1000000);
    or_watch_header(&w, 1000001);

    off = 0;
    k = 0;
    *bytes = 0;
    *text = 0;
    now = 1000000;

    while (off < len) {
        piece = seed ? 1 + (seed * (off + 7)) % 97 : len - off;

        if (piece > len - off) {
            piece = len - off;
        }

        while (piece > 0) {
            quick = fuzz_scanner.quick;
            n = batched ? or_sse_feed_run(&fuzz_scanner, s + off, piece, &ev)
                        : or_sse_feed(&fuzz_scanner, s + off, piece, &ev);

            if (fuzz_scanner.quick != quick && ev.events == 1) {
                fuzz_shape(&ev);
            }

            if (n == 0 || n > piece) {
                abort();
            }

            off += n;
            piece -= n;

            if (ev.kind == OR_SSE_EV_NONE) {
                if (piece != 0) {
                    abort();
                }

                continue;
            }

            if (ev.events == 0 || (!batched && ev.events != 1)
                || (ev.events > 1 && fuzz_scanner.quick - quick != ev.events))
            {
                abort();
            }

            *bytes += ev.bytes;
            *text += ev.text_bytes;
            fuzz_event(&ev);

            if (ev.bytes <= off && ev.events == 1) {
                fuzz_span(s + off - ev.bytes, ev.bytes, &ev);
            }

            now += 37;
            or_watch_event(&w, &ev, now);
            (void) or_watch_check(&conf, &w, now, k & 1, &next);

            if (next != OR_MSEC_NONE && next < 0) {
                abort();
            }

            for (i = 0; i < ev.events; i++) {
                if (k < FUZZ_MAX_EVENTS) {
                    kinds[k] = (char) ('a' + ev.kind) + (ev.content ? 16 : 0);
                }

                k++;
            }
        }
    }

    if (or_sse_end(&fuzz_scanner, &ev)) {
        *bytes += ev.bytes;
        *text += ev.text_bytes;
        fuzz_event(&ev);

        if (k < FUZZ_MAX_EVENTS) {
            kinds[k] = (char) ('a' + ev.kind) + (ev.content ? 16 : 0);
        }

        k++;
    }

    *bytes += or_sse_pending(&fuzz_scanner);

    return k;
}


/*
 * or_sse_data_span() on an event's raw bytes: inside them, and the very
 * data the scanner kept when the event has one data line
 */

static void
fuzz_span(const char *raw, size_t len, const or_sse_event_t *ev)
{
    size_t  start, dlen;

    if (!or_sse_data_span(raw, len, &start, &dlen)) {
        return;
    }

    if (start > len || dlen > len - start) {
        abort();
    }

    if (!ev->truncated
        && (dlen != ev->data_len || memcmp(raw + start, ev->data, dlen) != 0))
    {
        abort();
    }
}


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char          whole[FUZZ_MAX_EVENTS], split[FUZZ_MAX_EVENTS],
                  runs[FUZZ_MAX_EVENTS];
    size_t        n1, n2, n3, b1, b2, b3, ms, me;
    uint64_t      t1, t2, t3;
    unsigned      seed;
    const char   *s;

    if (size < 1) {
        return 0;
    }

    seed = data[0];
    s = (const char *) data + 1;
    size--;

    n1 = fuzz_scan(s, size, 0, 0, whole, &b1, &t1);
    n2 = fuzz_scan(s, size, seed | 1, 0, split, &b2, &t2);

    /*
     * however it is split, deltas in a row read as one or one by one: the
     * same events, every byte counted once, the same text
     */

    n3 = fuzz_scan(s, size, (seed & 2) ? seed | 1 : 0, 1, runs, &b3, &t3);

    if (n1 != n2 || n1 != n3 || b1 != size || b2 != size || b3 != size
        || t1 != t2 || t1 != t3)
    {
        abort();
    }

    if (memcmp(whole, split, n1 < FUZZ_MAX_EVENTS ? n1 : FUZZ_MAX_EVENTS)
        != 0
        || memcmp(whole, runs, n1 < FUZZ_MAX_EVENTS ? n1 : FUZZ_MAX_EVENTS)
           != 0)
    {
        abort();
    }

    (void) or_sse_error_status(s, size);
    (void) or_sse_format_of_path(s, size);

    /* a Gemini path's model segment: within the path, before its query */

    if (or_api_path_model(s, size, &ms, &me)
        && (ms > me || me >= size || s[me] != ':'
            || memchr(s, '?', me) != NULL))
    {
        abort();
    }

    return 0;
}
