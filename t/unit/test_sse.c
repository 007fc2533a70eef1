/*
 * Copyright (C) ngx_omniroute authors
 *
 * R-STREAM-1, R-REQ-5: the incremental SSE scanner and the classifier of
 * the providers' stream formats, over every fixture of
 * t/fixtures/streams (split at every byte, with LF, CRLF and CR line
 * ends), the error statuses, and the in-band error events.
 */


#define _GNU_SOURCE             /* memmem */
#include <stdlib.h>

#include "or_test.h"
#include "or_sse.h"




typedef struct {
    const char   *file;
    const char   *kinds;        /* one letter per event, see kind_letter */
    or_sse_format_e  format;
    int          first_content; /* index of the commit point, -1: none */
    int          error_status;  /* 0: no error event */
    size_t       text_bytes;
    const char   *usage;        /* 'u' per event that may carry usage */
} fixture_t;


static const fixture_t  fixtures[] = {
    { "anthropic-messages.sse", "MMHRrMMTTMLLLMMD", OR_SSE_FMT_ANTHROPIC,
      3, 0, 25, "uu...uu..u...uuu" },
    { "anthropic-error-after-start.sse", "MMHE", OR_SSE_FMT_ANTHROPIC,
      -1, 529, 0, "uu.u" },
    { "openai-chat.sse", "MTTLLMMD", OR_SSE_FMT_CHAT, 1, 0, 11, ".....uu." },
    { "openai-chat-error-after-role.sse", "ME", OR_SSE_FMT_CHAT, -1, 500,
      0, ".u" },
    { "openai-chat-reasoning.sse", "HMRHRTMD", OR_SSE_FMT_CHAT, 2, 0, 5,
      "......u." },
    { "openai-chat-error-after-content.sse", "MTE", OR_SSE_FMT_CHAT, 1, 500,
      5, "..u" },
    { "openai-responses.sse", "MMMRMMMTTMD", OR_SSE_FMT_RESPONSES, 3, 0, 8,
      "uuu.uuu..uu" },
    { "groq-chat.sse", "MTTMD", OR_SSE_FMT_CHAT, 1, 0, 11, "...u." },
    { "openai-responses-error-event.sse", "MME", OR_SSE_FMT_RESPONSES, -1,
      429, 0, "uuu" },
    { "openai-responses-failed-after-created.sse", "MME",
      OR_SSE_FMT_RESPONSES, -1, 500, 0, "uuu" },
    /* refusals and filters commit (issue 25) */
    { "openai-chat-content-filter.sse", "MMD", OR_SSE_FMT_CHAT, 1, 0, 0,
      ".u." },
    { "anthropic-refusal.sse", "MMD", OR_SSE_FMT_ANTHROPIC, 1, 0, 0,
      "uuu" },
};


typedef struct {
    char          kinds[256];
    size_t        n;
    int           first_content;
    int           error_status;
    size_t        text_bytes;
    size_t        bytes;
    or_sse_format_e  format;
    char          usage[256];   /* 'u': ev->usage, '.': not */
    size_t        usage_missed; /* "usage" in its data, not flagged */
} result_t;


static char
kind_letter(const or_sse_event_t *ev)
{
    switch (ev->kind) {
    case OR_SSE_EV_HEARTBEAT:
        return 'H';
    case OR_SSE_EV_META:
        return 'M';
    case OR_SSE_EV_TEXT:
        return 'T';
    case OR_SSE_EV_REASONING:
        return ev->content ? 'R' : 'r';
    case OR_SSE_EV_TOOL:
        return ev->content ? 'L' : 'l';
    case OR_SSE_EV_OTHER:
        return 'O';
    case OR_SSE_EV_ERROR:
        return 'E';
    case OR_SSE_EV_DONE:
        return 'D';
    default:
        return '?';
    }
}


static void
record(result_t *r, const or_sse_event_t *ev)
{
    if (r->n < sizeof(r->kinds) - 1) {
        r->kinds[r->n] = kind_letter(ev);
    }

    if (ev->content && r->first_content < 0) {
        r->first_content = (int) r->n;
    }

    if (ev->kind == OR_SSE_EV_ERROR && r->error_status == 0) {
        r->error_status = ev->status;
    }

    if (r->n < sizeof(r->usage) - 1) {
        r->usage[r->n] = ev->usage ? 'u' : '.';
    }

    if (!ev->usage && ev->data_len >= 7
        && memmem(ev->data, ev->data_len, "\"usage\"", 7) != NULL)
    {
        r->usage_missed++;
    }

    r->text_bytes += ev->text_bytes;
    r->bytes += ev->bytes;
    r->n++;
    r->kinds[r->n < sizeof(r->kinds) ? r->n : sizeof(r->kinds) - 1] = '\0';
    r->usage[r->n < sizeof(r->usage) ? r->n : sizeof(r->usage) - 1] = '\0';
}


/* scans buf in pieces of step bytes (0: whole) */

static void
scan(const char *buf, size_t len, size_t step, result_t *r)
{
    size_t          off, piece, n;
    or_sse_t       *s;
    or_sse_event_t  ev;

    memset(r, 0, sizeof(result_t));
    r->first_content = -1;

    s = malloc(sizeof(or_sse_t));
    or_sse_init(s);

    off = 0;

    while (off < len) {
        piece = (step == 0 || len - off < step) ? len - off : step;

        while (piece > 0) {
            n = or_sse_feed(s, buf + off, piece, &ev);
            off += n;
            piece -= n;

            if (ev.kind != OR_SSE_EV_NONE) {
                record(r, &ev);
            }
        }
    }

    if (or_sse_end(s, &ev)) {
        record(r, &ev);
    }

    r->bytes += or_sse_pending(s);
    r->format = s->format;

    free(s);
}


/* the fixture with its LFs replaced by eol */

static char *
with_eol(const char *in, size_t len, const char *eol, size_t *out_len)
{
    char    *out, *o;
    size_t   i, elen;

    elen = strlen(eol);
    out = malloc(len * elen + 1);
    o = out;

    for (i = 0; i < len; i++) {
        if (in[i] == '\n') {
            memcpy(o, eol, elen);
            o += elen;

        } else {
            *o++ = in[i];
        }
    }

    *o = '\0';
    *out_len = o - out;

    return out;
}


static void
test_fixture(const fixture_t *fx)
{
    int         same;
    char       *buf, *crlf, *cr;
    size_t      len, clen, rlen, step;
    result_t    whole, part;

    buf = or_test_fixture(fx->file, &len);

    or_ok(buf != NULL, "R-STREAM-1 fixture %s read", fx->file);

    if (buf == NULL) {
        return;
    }

    scan(buf, len, 0, &whole);

    or_is_str(whole.kinds, fx->kinds, "R-STREAM-1 %s: the events", fx->file);
    or_is_int(whole.format, fx->format, "R-STREAM-1 %s: format %s",
              fx->file, or_sse_format_name(fx->format));
    or_is_int(whole.first_content, fx->first_content,
              "R-REQ-5 %s: the commit point", fx->file);
    or_is_int(whole.error_status, fx->error_status,
              "R-REQ-5 %s: the error event's status", fx->file);
    or_is_int(whole.text_bytes, fx->text_bytes,
              "R-STREAM-2 %s: text bytes", fx->file);
    or_is_int(whole.bytes, len, "%s: every byte belongs to an event",
              fx->file);
    or_is_str(whole.usage, fx->usage,
              "R-STREAM-2 %s: the events that may carry usage", fx->file);
    or_is_int(whole.usage_missed, 0,
              "R-STREAM-2 %s: every event with a \"usage\" is looked at",
              fx->file);

    /* split at every size: the same events (incremental, R-STREAM-1) */

    same = 1;

    for (step = 1; step < len && same; step++) {
        scan(buf, len, step, &part);

        if (strcmp(part.kinds, whole.kinds) != 0
            || strcmp(part.usage, whole.usage) != 0
            || part.text_bytes != whole.text_bytes
            || part.error_status != whole.error_status
            || part.bytes != len)
        {
            same = 0;
            printf("# step %zu: %s\n", step, part.kinds);
        }
    }

    or_ok(same, "R-STREAM-1 %s: the same events however it is split",
          fx->file);

    crlf = with_eol(buf, len, "\r\n", &clen);
    cr = with_eol(buf, len, "\r", &rlen);

    same = 1;

    for (step = 1; step < clen && same; step++) {
        scan(crlf, clen, step, &part);
        same = (strcmp(part.kinds, whole.kinds) == 0 && part.bytes == clen);
    }

    or_ok(same, "R-STREAM-1 %s: CRLF line ends, split anywhere", fx->file);

    scan(cr, rlen, 0, &part);
    or_is_str(part.kinds, whole.kinds, "R-STREAM-1 %s: CR line ends",
              fx->file);

    scan(cr, rlen, 1, &part);
    or_is_str(part.kinds, whole.kinds,
              "R-STREAM-1 %s: CR line ends byte by byte", fx->file);

    free(crlf);
    free(cr);
    free(buf);
}


static or_sse_kind_e
one(const char *s, or_sse_event_t *ev)
{
    size_t           n, len;
    or_sse_t        *sc;
    static or_sse_t  scanner;      /* ev->data points into it */

    sc = &scanner;
    or_sse_init(sc);

    len = strlen(s);
    ev->kind = OR_SSE_EV_NONE;

    while (len > 0) {
        n = or_sse_feed(sc, s, len, ev);
        s += n;
        len -= n;

        if (ev->kind != OR_SSE_EV_NONE && ev->kind != OR_SSE_EV_HEARTBEAT) {
            break;
        }
    }

    return ev->kind;
}


static void
test_events(void)
{
    or_sse_event_t  ev;

    /* the assertions of the first-event probe, on the scanner */

    or_is_int(one("", &ev), OR_SSE_EV_NONE, "R-REQ-5 empty: need more");
    or_is_int(one("data: {\"id\":1}", &ev), OR_SSE_EV_NONE,
              "R-REQ-5 an event without its blank line: need more");
    or_is_int(one("data: {\"id\":1}\n\n", &ev), OR_SSE_EV_OTHER,
              "R-REQ-5 an event of no known shape");
    or_ok(ev.content, "R-REQ-5 ... is content");
    or_is_int(one(": keepalive\n\n: ping\n\ndata: {\"id\":1}\n\n", &ev),
              OR_SSE_EV_OTHER, "R-STREAM-1 comments and heartbeats skipped");
    or_is_int(one(": keepalive\n\n", &ev), OR_SSE_EV_HEARTBEAT,
              "R-STREAM-1 only a heartbeat");
    or_is_int(one("event: message_start\r\ndata: {\"type\":"
                  "\"message_start\"}\r\n\r\n", &ev), OR_SSE_EV_META,
              "R-STREAM-1 CRLF lines, Anthropic start: metadata");
    or_ok(!ev.content, "R-REQ-5 message_start is not content");

    or_is_int(one("data: {\"error\":{\"message\":\"quota\",\"type\":"
                  "\"insufficient_quota\"}}\n\n", &ev),
              OR_SSE_EV_ERROR, "R-REQ-5 OpenAI-style error event");
    or_is_int(ev.status, 429, "R-REQ-5 insufficient_quota stands for 429");
    or_ok(ev.data_len > 0 && ev.data[0] == '{',
          "R-REQ-5 the error data is the JSON");

    or_is_int(one("event: error\ndata: {\"type\":\"error\",\"error\":"
                  "{\"type\":\"overloaded_error\",\"message\":"
                  "\"Overloaded\"}}\n\n", &ev),
              OR_SSE_EV_ERROR, "R-REQ-5 Anthropic error event");
    or_is_int(ev.status, 529, "R-REQ-5 overloaded_error stands for 529");

    or_is_int(one("data: {\"error\":{\"code\":503,\"message\":\"x\"}}\n\n",
                  &ev), OR_SSE_EV_ERROR,
              "R-REQ-5 error with a numeric code");
    or_is_int(ev.status, 503, "R-REQ-5 the numeric code is the status");

    or_is_int(one("data: {\"error\":\"boom\"}\n\n", &ev), OR_SSE_EV_ERROR,
              "R-REQ-5 bare error string");
    or_is_int(ev.status, 502, "R-REQ-5 unknown error type: 502");

    or_is_int(one("data: {\"choices\":[{\"delta\":{\"content\":"
                  "\"error\"}}]}\n\n", &ev), OR_SSE_EV_TEXT,
              "R-REQ-5 the word error in content is content");
    or_is_int(one("data: [DONE]\n\n", &ev), OR_SSE_EV_DONE,
              "R-REQ-5 [DONE] is the terminal event, not an error");
    or_is_int(one("data: x\r", &ev), OR_SSE_EV_NONE,
              "R-REQ-5 a lone CR at the end: the line ended, not the event");

    /* error shapes */

    or_is_int(one("data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\","
                  "\"choices\":[],\"error\":null}\n\n", &ev),
              OR_SSE_EV_META, "\"error\": null is no error");
    or_is_int(one("data: {\"id\":\"x\",\"choices\":[{\"index\":0,"
                  "\"delta\":{\"content\":\"\"},\"finish_reason\":\"error\"}],"
                  "\"error\":{\"code\":429,\"message\":\"Rate limited\"}}\n\n",
                  &ev), OR_SSE_EV_ERROR,
              "an OpenRouter mid-stream error (error after choices)");
    or_is_int(ev.status, 429, "its code is the status");
    or_is_int(one("data: {\"error\":{\"message\":\"\\u7528\\u6237\\u989d"
                  "\\u5ea6\\u4e0d\\u8db3\",\"type\":\"new_api_error\"}}\n\n",
                  &ev), OR_SSE_EV_ERROR, "an escaped quota message");
    or_is_int(ev.status, 429,
              "issue 11: escaped quota text (用户额度不足) stands for 429");
    or_is_int(one("data: {\"error\":{\"message\":\"用户额度不足\"}}\n\n", &ev),
              OR_SSE_EV_ERROR, "raw quota text");
    or_is_int(ev.status, 429,
              "issue 11: quota text is a 429, never a 502 server error");
    or_is_int(one("event: error\ndata: not json\n\n", &ev), OR_SSE_EV_ERROR,
              "event: error with data that is not JSON");
    or_is_int(one("event: response.failed\ndata: {\"type\":\"response.failed"
                  "\",\"response\":{\"error\":{\"code\":\"rate_limit_exceeded"
                  "\"}}}\n\n", &ev), OR_SSE_EV_ERROR, "response.failed");
    or_is_int(ev.status, 429, "response.failed rate_limit_exceeded: 429");
    or_is_int(one("data: {\"type\":\"error\",\"error\":{\"type\":"
                  "\"rate_limit_error\",\"message\":\"x\"}}\n\n", &ev),
              OR_SSE_EV_ERROR, "Anthropic error without an event name");
    or_is_int(ev.status, 429, "rate_limit_error stands for 429");

    /* content rules */

    or_is_int(one("data: {\"choices\":[{\"delta\":{\"role\":\"assistant\","
                  "\"content\":\"\"}}]}\n\n", &ev), OR_SSE_EV_META,
              "the role-only chunk is metadata");
    or_is_int(one("data: {\"choices\":[{\"delta\":{\"reasoning\":\"hm\"}}]}"
                  "\n\n", &ev), OR_SSE_EV_REASONING,
              "OpenRouter reasoning delta");
    or_ok(ev.content && ev.progress, "is content and progress");
    or_is_int(one("data: {\"choices\":[{\"delta\":{\"refusal\":\"no\"}}]}"
                  "\n\n", &ev), OR_SSE_EV_TEXT, "a refusal delta is text");
    or_is_int(one("data: {\"choices\":[{\"delta\":{},\"finish_reason\":"
                  "\"stop\"}]}\n\n", &ev), OR_SSE_EV_META,
              "a finish_reason chunk is metadata");
    or_ok(ev.finish, "... with finish set");
    or_is_int(one("event: content_block_delta\ndata: {\"type\":"
                  "\"content_block_delta\",\"index\":0,\"delta\":{\"type\":"
                  "\"thinking_delta\",\"thinking\":\"\"}}\n\n", &ev),
              OR_SSE_EV_REASONING, "an empty thinking_delta");
    or_ok(!ev.content && ev.progress,
          "R-STREAM-3 is no content but restarts the stall budget");
    or_is_int(one("event: content_block_delta\ndata: {\"type\":"
                  "\"content_block_delta\",\"index\":0,\"delta\":{\"type\":"
                  "\"signature_delta\",\"signature\":\"\"}}\n\n", &ev),
              OR_SSE_EV_META, "an empty signature is metadata");
    or_ok(!ev.progress, "R-STREAM-3 an empty signature is no progress");
    or_is_int(one("event: content_block_start\ndata: {\"type\":"
                  "\"content_block_start\",\"index\":0,\"content_block\":"
                  "{\"type\":\"text\",\"text\":\"\"}}\n\n", &ev),
              OR_SSE_EV_META, "an empty text block start is metadata");
    or_is_int(one("event: ping\ndata: {\"type\": \"ping\"}\n\n", &ev),
              OR_SSE_EV_HEARTBEAT, "Anthropic ping is a heartbeat");
    or_is_int(one("event: response.function_call_arguments.delta\ndata: "
                  "{\"type\":\"response.function_call_arguments.delta\","
                  "\"delta\":\"{\\\"a\"}\n\n", &ev), OR_SSE_EV_TOOL,
              "Responses tool-call arguments");
    or_ok(ev.content, "are content");
    or_is_int(one("event: response.incomplete\ndata: {\"type\":"
                  "\"response.incomplete\"}\n\n", &ev), OR_SSE_EV_DONE,
              "response.incomplete is terminal");
    or_is_int(one("data: hello\n\n", &ev), OR_SSE_EV_OTHER,
              "data that is not JSON is content");
    or_is_int(one("data: {\"choices\":[{\"delta\":{\"content\":\"h\\u00e9"
                  "\\ud83d\\ude00\"}}]}\n\n", &ev), OR_SSE_EV_TEXT,
              "escaped text");
    or_is_int(ev.text_bytes, 7, "its UTF-8 bytes (1 + 2 + 4)");
    or_is_int(one("data: {\"choices\":\n"
                  "data: [{\"delta\":{\"content\":\"ab\"}}]}\n\n", &ev),
              OR_SSE_EV_TEXT, "data lines are joined");
    or_is_int(one("data\n\n", &ev), OR_SSE_EV_OTHER,
              "a data field without a colon: empty data");
    or_is_int(one("id: 7\nretry: 100\n\n", &ev), OR_SSE_EV_HEARTBEAT,
              "an event without data is no event");
}


static void
test_bound(void)
{
    char            *buf, *p;
    size_t           n, len, total;
    or_sse_t        *s;
    or_sse_event_t   ev;

    /* a text delta far longer than the kept data */

    len = 100000;
    buf = malloc(len + 200);
    p = buf;
    p += sprintf(p, "data: {\"choices\":[{\"delta\":{\"content\":\"");
    memset(p, 'a', len);
    p += len;
    p += sprintf(p, "\"}}]}\n\n");

    s = malloc(sizeof(or_sse_t));
    or_sse_init(s);

    total = p - buf;
    n = or_sse_feed(s, buf, total, &ev);

    or_is_int(n, total, "a long event is consumed whole");
    or_is_int(ev.kind, OR_SSE_EV_TEXT, "a long text delta is text");
    or_ok(ev.truncated && ev.data_len == OR_SSE_DATA_MAX,
          "its data is kept up to the bound");
    or_ok(ev.text_bytes >= len && ev.text_bytes <= len + 10,
          "its text bytes count what was not kept (%zu)", ev.text_bytes);

    /* a long error message still reads as an error */

    p = buf;
    p += sprintf(p, "data: {\"error\":{\"type\":\"overloaded_error\","
                    "\"message\":\"");
    memset(p, 'x', 10000);
    p += 10000;
    p += sprintf(p, "\"}}\n\n");

    or_sse_init(s);
    n = or_sse_feed(s, buf, p - buf, &ev);
    or_is_int(ev.kind, OR_SSE_EV_ERROR, "a long error event is an error");
    or_is_int(ev.status, 529, "with its status");

    free(s);
    free(buf);
}


static void
test_error_events(void)
{
    int              i;
    char             buf[OR_SSE_ERROR_EVENT_MAX], msg[128];
    char             nasty[600];
    size_t           n;
    or_sse_event_t   ev;
    or_sse_t        *s;
    static const or_sse_format_e  fmts[] = {
        OR_SSE_FMT_CHAT, OR_SSE_FMT_RESPONSES, OR_SSE_FMT_ANTHROPIC
    };

    n = or_sse_error_event(buf, sizeof(buf), OR_SSE_FMT_CHAT, 429,
                           "quota_exhausted", "over \"quota\"", 12, 60);
    buf[n] = '\0';
    or_is_str(buf, "data: {\"error\":{\"message\":\"over \\\"quota\\\"\","
              "\"type\":\"rate_limit_error\",\"code\":\"quota_exhausted\","
              "\"status\":429,\"retry_after\":60}}\n\n",
              "the Chat in-band error event");

    n = or_sse_error_event(buf, sizeof(buf), OR_SSE_FMT_ANTHROPIC, 529,
                           "server_error", "Overloaded", 10, -1);
    buf[n] = '\0';
    or_is_str(buf, "event: error\ndata: {\"type\":\"error\",\"error\":"
              "{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"},"
              "\"status\":529}\n\n", "the Anthropic in-band error event");

    n = or_sse_error_event(buf, sizeof(buf), OR_SSE_FMT_RESPONSES, 502,
                           "stream_truncated", "cut", 3, -1);
    buf[n] = '\0';
    or_is_str(buf, "event: error\ndata: {\"type\":\"error\",\"code\":"
              "\"stream_truncated\",\"message\":\"cut\",\"param\":null,"
              "\"status\":502,\"error\":{\"type\":\"server_error\","
              "\"code\":\"stream_truncated\",\"message\":\"cut\"}}\n\n",
              "the Responses in-band error event");

    /* an unknown format gets the Chat shape, whole (found by fuzz_sse) */
    n = or_sse_error_event(buf, sizeof(buf), OR_SSE_FMT_UNKNOWN, 502,
                           "fuzz", "m", 1, 0);
    buf[n] = '\0';
    or_is_str(buf, "data: {\"error\":{\"message\":\"m\","
              "\"type\":\"server_error\",\"code\":\"fuzz\","
              "\"status\":502,\"retry_after\":0}}\n\n",
              "an unknown format's in-band error event is the Chat one, "
              "its JSON closed");

    /* every format's event scans back as an error of its status */

    memset(nasty, 'q', sizeof(nasty));
    nasty[3] = '"';
    nasty[4] = '\n';
    nasty[5] = '\\';

    s = malloc(sizeof(or_sse_t));

    for (i = 0; i < 3; i++) {
        n = or_sse_error_event(buf, sizeof(buf), fmts[i], 503, "x", nasty,
                               sizeof(nasty), 5);
        or_ok(n < sizeof(buf) && buf[n - 1] == '\n' && buf[n - 2] == '\n',
              "%s: a long message fits, the event ends with a blank line",
              or_sse_format_name(fmts[i]));

        or_sse_init(s);
        (void) or_sse_feed(s, buf, n, &ev);
        or_is_int(ev.kind, OR_SSE_EV_ERROR, "%s: it reads as an error",
                  or_sse_format_name(fmts[i]));
        or_is_int(ev.status, 503, "%s: of its status",
                  or_sse_format_name(fmts[i]));
    }

    /*
     * a message that escapes to six times its length (control bytes),
     * and one of 3-byte characters: cut in the message, whole characters
     * only, the event still complete
     */

    memset(nasty, 0x7f, sizeof(nasty));

    for (i = 0; i < 3; i++) {
        n = or_sse_error_event(buf, sizeof(buf), fmts[i], 503, "x", nasty,
                               sizeof(nasty), 5);
        or_sse_init(s);
        or_ok(or_sse_feed(s, buf, n, &ev) == n && ev.kind == OR_SSE_EV_ERROR
              && ev.status == 503,
              "%s: escaped control bytes cut the message, not the event",
              or_sse_format_name(fmts[i]));
    }

    for (n = 0; n + 3 <= sizeof(nasty); n += 3) {
        memcpy(nasty + n, "\xe7\x94\xa8", 3);
    }

    for (i = 0; i < 3; i++) {
        n = or_sse_error_event(buf, 600, fmts[i], 503, "x", nasty,
                               sizeof(nasty) - sizeof(nasty) % 3, 5);
        or_sse_init(s);
        or_ok(or_sse_feed(s, buf, n, &ev) == n && ev.kind == OR_SSE_EV_ERROR
              && ev.status == 503, "%s: a small buffer, a long message",
              or_sse_format_name(fmts[i]));
        or_ok(ev.data_len > 0
              && or_sse_error_message(ev.data, ev.data_len, msg, sizeof(msg))
                 % 3 == 0, "%s: ... cut between characters",
              or_sse_format_name(fmts[i]));
    }

    free(s);

    n = or_sse_error_message("{\"error\":{\"message\":\"\\u7528\\u6237 ok\"}}",
                             43, msg, sizeof(msg));
    or_is_str(msg, "用户 ok", "the error message, decoded");
    n = or_sse_error_message("{\"type\":\"error\",\"code\":\"x\",\"message\":"
                             "\"Rate limit\"}", 48, msg, sizeof(msg));
    or_is_str(msg, "Rate limit", "a Responses error message");
    n = or_sse_error_message("{\"response\":{\"error\":{\"code\":\"s\","
                             "\"message\":\"failed\"}}}", 51, msg,
                             sizeof(msg));
    or_is_str(msg, "failed", "a response.failed message");
    n = or_sse_error_message("{\"error\":\"boom\"}", 16, msg, sizeof(msg));
    or_is_str(msg, "boom", "an error string");
    n = or_sse_error_message("{\"error\":{\"message\":\"\xe7\x94\xa8\xe6\x88"
                             "\xb7\"}}", 26, msg, 6);
    or_is_str(msg, "\xe7\x94\xa8", "cut on a UTF-8 boundary");
    (void) n;

    or_is_int(or_sse_format_of_path("/v1/chat/completions", 20),
              OR_SSE_FMT_CHAT, "chat path");
    or_is_int(or_sse_format_of_path("/v1/messages?beta=true", 22),
              OR_SSE_FMT_ANTHROPIC, "messages path");
    or_is_int(or_sse_format_of_path("/v1/responses/", 14),
              OR_SSE_FMT_RESPONSES, "responses path");
}


/* the usage chunk of stream_options.include_usage */

static void
test_usage_only(void)
{
    or_sse_event_t  ev;

    one("data: {\"object\":\"chat.completion.chunk\",\"choices\":[],"
        "\"usage\":{\"prompt_tokens\":1}}\n\n", &ev);
    or_ok(ev.usage_only && ev.kind == OR_SSE_EV_META,
          "usage only: choices [] and usage");

    one("data: {\"object\":\"chat.completion.chunk\","
        "\"usage\":{\"prompt_tokens\":1}}\n\n", &ev);
    or_ok(ev.usage_only, "usage only: no choices, usage");

    one("data: {\"object\":\"chat.completion.chunk\",\"choices\":[{"
        "\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],"
        "\"usage\":{\"prompt_tokens\":1}}\n\n", &ev);
    or_ok(!ev.usage_only && ev.finish,
          "usage only: not with a choice (usage on the last chunk)");

    one("data: {\"object\":\"chat.completion.chunk\",\"choices\":[],"
        "\"usage\":null}\n\n", &ev);
    or_ok(!ev.usage_only, "usage only: not a null usage");

    one("data: {\"object\":\"chat.completion.chunk\",\"choices\":[{"
        "\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\n", &ev);
    or_ok(!ev.usage_only, "usage only: not a content chunk");

    one("event: response.completed\ndata: {\"type\":\"response.completed\","
        "\"response\":{\"usage\":{\"input_tokens\":1}}}\n\n", &ev);
    or_ok(!ev.usage_only, "usage only: Chat only");
    or_ok(ev.usage, "may carry usage: response.completed");
}


/* which events are looked at for token usage (ev->usage) */

static void
test_usage_flag(void)
{
    char            *big;
    size_t           n;
    or_sse_event_t   ev;

    one("data: {\"object\":\"chat.completion.chunk\",\"choices\":[{"
        "\"index\":0,\"delta\":{\"content\":\"x\"}}],"
        "\"usage\":{\"prompt_tokens\":1}}\n\n", &ev);
    or_ok(ev.usage && ev.kind == OR_SSE_EV_TEXT,
          "may carry usage: a Chat content chunk with usage (continuous "
          "usage)");

    one("data: {\"object\":\"chat.completion.chunk\",\"choices\":[{"
        "\"index\":0,\"delta\":{\"content\":\"usage\"}}]}\n\n", &ev);
    or_ok(!ev.usage, "may carry usage: not a Chat chunk without one");

    one("data: {\"object\":\"chat.completion.chunk\",\"choices\":[],"
        "\"usage\":null}\n\n", &ev);
    or_ok(!ev.usage, "may carry usage: not a null usage");

    one("data: [DONE]\n\n", &ev);
    or_ok(!ev.usage, "may carry usage: not [DONE]");

    one("data: {\"object\":\"chat.completion.chunk\",\"choices\":[{"
        "\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],"
        "\"x_groq\":{\"id\":\"req_1\",\"usage\":{\"prompt_tokens\":5,"
        "\"completion_tokens\":2}}}\n\n", &ev);
    or_ok(ev.usage && ev.finish,
          "may carry usage: the finishing chunk (Groq's x_groq.usage)");

    one("event: message_delta\ndata: {\"type\":\"message_delta\","
        "\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":"
        "{\"output_tokens\":9}}\n\n", &ev);
    or_ok(ev.usage, "may carry usage: Anthropic message_delta");

    one("event: content_block_delta\ndata: {\"type\":\"content_block_delta\","
        "\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":"
        "\"\\\"usage\\\"\"}}\n\n", &ev);
    or_ok(!ev.usage && ev.kind == OR_SSE_EV_TEXT,
          "may carry usage: not an Anthropic text delta");

    one("data: {\"candidates\":[{\"content\":{}}],\"usageMetadata\":"
        "{\"promptTokenCount\":3}}\n\n", &ev);
    or_ok(ev.usage, "may carry usage: an event of no known shape");

    one("data: {\"error\":{\"message\":\"boom\"}}\n\n", &ev);
    or_ok(ev.usage, "may carry usage: an error event");

    /* a chunk longer than the kept data: its usage may be past it */

    n = OR_SSE_DATA_MAX + 200;
    big = malloc(n + 200);
    n = (size_t) sprintf(big, "data: {\"object\":\"chat.completion.chunk\","
                         "\"choices\":[{\"index\":0,\"delta\":{\"content\":"
                         "\"");
    memset(big + n, 'a', OR_SSE_DATA_MAX);
    n += OR_SSE_DATA_MAX;
    n += (size_t) sprintf(big + n, "\"}}]}\n\n");
    one(big, &ev);
    or_ok(ev.truncated && ev.usage,
          "may carry usage: an event cut by the data bound");
    free(big);
}


/* members after a skipped value: brackets and quotes inside its strings */

static void
test_skip(void)
{
    or_sse_event_t  ev;

    one("data: {\"object\":\"chat.completion.chunk\",\"x\":[{\"a\":\"]}\\\"[{\"},"
        "[[],{}],\"}\"],\"error\":{\"message\":\"overloaded\"}}\n\n", &ev);
    or_is_int(ev.kind, OR_SSE_EV_ERROR,
              "skip: brackets and an escaped quote in a skipped string");

    one("data: {\"x\":[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]],"
        "\"error\":{\"message\":\"overloaded\"}}\n\n", &ev);
    or_is_int(ev.kind, OR_SSE_EV_OTHER,
              "skip: nesting deeper than the reader goes ends the reading");

    one("data: {\"x\":[[[[1]]]],\"error\":{\"message\":\"overloaded\"}}\n\n",
        &ev);
    or_is_int(ev.kind, OR_SSE_EV_ERROR, "skip: nesting within the bound");
}


static void
test_data_span(void)
{
    size_t       start, len;
    const char  *raw;

#define TSPAN(r, ok, v, name)                                                 \
    raw = r;                                                                  \
    or_is_int(or_sse_data_span(raw, strlen(raw), &start, &len), ok,          \
              "data span: " name);                                            \
    if (ok) {                                                                 \
        or_ok(len == strlen(v) && memcmp(raw + start, v, len) == 0,           \
              "data span: " name ": the value");                              \
    }

    TSPAN("data: {\"a\":1}\n\n", 1, "{\"a\":1}", "one line");
    TSPAN("event: x\r\ndata:{\"a\":1}\r\n\r\n", 1, "{\"a\":1}",
          "CRLF, no space, an event name");
    TSPAN(": ping\n\nid: 7\ndata: v\rretry: 5\r\r", 1, "v",
          "a comment before, CR lines, other fields");
    TSPAN("data: v\n", 1, "v", "the last event without its blank line");
    TSPAN("data\n\n", 1, "", "an empty data line");
    TSPAN("data: a\ndata: b\n\n", 0, "", "two data lines");
    TSPAN("event: x\n\n", 0, "", "no data");
    TSPAN("data: a\n\ndata: b\n\n", 1, "a", "only up to the blank line");

#undef TSPAN
}


/*
 * Refusals and filters are answers (issue 25): each format's refusal or
 * filter commits, content without text, and is marked refusal.
 */

static void
test_refusals(void)
{
    or_sse_event_t  ev;

    or_is_int(one("data: {\"id\":\"c1\",\"object\":\"chat.completion"
                  ".chunk\",\"choices\":[{\"index\":0,\"delta\":{},"
                  "\"finish_reason\":\"content_filter\"}]}\n\n", &ev),
              OR_SSE_EV_META, "a content_filter finish is not text");
    or_ok(ev.content && ev.refusal && ev.finish,
          "... but commits, marked refusal");
    or_is_int((int) ev.text_bytes, 0, "... with no text");

    (void) one("data: {\"choices\":[{\"delta\":{\"content\":\"\"},"
               "\"finish_reason\":\"SAFETY\"}]}\n\n", &ev);
    or_ok(ev.content && ev.refusal, "Gemini SAFETY (any case) too");

    (void) one("data: {\"choices\":[{\"delta\":{},\"finish_reason\":"
               "\"stop\"}]}\n\n", &ev);
    or_ok(!ev.content && !ev.refusal, "a stop finish is no refusal");

    (void) one("data: {\"choices\":[{\"delta\":{},\"finish_reason\":"
               "\"content_filter_x\"}]}\n\n", &ev);
    or_ok(!ev.refusal, "a longer word is none");

    (void) one("event: message_delta\ndata: {\"type\":\"message_delta\","
               "\"delta\":{\"stop_reason\":\"refusal\",\"stop_sequence\":"
               "null},\"usage\":{\"output_tokens\":0}}\n\n", &ev);
    or_ok(ev.kind == OR_SSE_EV_META && ev.content && ev.refusal,
          "Anthropic stop_reason refusal commits");

    (void) one("event: message_delta\ndata: {\"type\":\"message_delta\","
               "\"delta\":{\"stop_reason\":\"end_turn\"}}\n\n", &ev);
    or_ok(!ev.content && !ev.refusal, "end_turn is metadata");

    (void) one("event: response.incomplete\ndata: {\"type\":\"response."
               "incomplete\",\"response\":{\"status\":\"incomplete\","
               "\"incomplete_details\":{\"reason\":\"content_filter\"}}}"
               "\n\n", &ev);
    or_ok(ev.kind == OR_SSE_EV_DONE && ev.refusal,
          "Responses incomplete for content_filter: terminal, refusal");
}


/* a malformed event is an error of status 502 (issue 25) */

static void
test_malformed(void)
{
    or_sse_event_t  ev;

    or_is_int(one("data: {\"id\":\"c1\",\"object\":\"chat.completion."
                  "chunk\",\"choices\":[{\"delta\":{\"content\":\"Hel"
                  "\n\n", &ev), OR_SSE_EV_ERROR, "a cut chunk is an error");
    or_ok(ev.malformed && ev.status == 502, "... malformed, 502");
    or_ok(!ev.content, "... never content");

    (void) one("data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}}"
               "\n\n", &ev);
    or_ok(ev.malformed, "trailing garbage after the object");

    (void) one("data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}"
               "\n\n", &ev);
    or_ok(!ev.malformed && ev.kind == OR_SSE_EV_TEXT, "a whole chunk is text");

    (void) one("data: {\"a\":\n"
               "data: 1}\n\n", &ev);
    or_ok(!ev.malformed, "an object over two data lines is whole");

    (void) one("data: not json at all\n\n", &ev);
    or_ok(!ev.malformed && ev.content,
          "data that is not JSON: a stream of no known format (content)");
}


/* the API of a request path and of a provider (the emergency target) */

static void
test_api(void)
{
#define PATH(s)  or_api_of_path(s, sizeof(s) - 1)
#define PROV(s, h)  or_api_of_provider(s, sizeof(s) - 1, h)

    or_is_int(PATH("/v1/messages"), OR_API_ANTHROPIC, "/v1/messages");
    or_is_int(PATH("/v1/messages/?beta=true"), OR_API_ANTHROPIC,
              "/v1/messages/?beta=true");
    or_is_int(PATH("/v1/messages/count_tokens"), OR_API_ANTHROPIC,
              "count_tokens");
    or_is_int(PATH("/v1/chat/completions"), OR_API_OPENAI, "chat");
    or_is_int(PATH("/v1/responses"), OR_API_OPENAI, "responses");
    or_is_int(PATH("/v1beta/models/gemini-2.5-pro:streamGenerateContent"
                   "?alt=sse"), OR_API_GEMINI, "streamGenerateContent");
    or_is_int(PATH("/v1beta/models/gemini-2.5-pro:generateContent"),
              OR_API_GEMINI, "generateContent");
    or_is_int(or_api_of_path(NULL, 0), OR_API_OPENAI, "no path");

    or_is_int(PROV("https://api.anthropic.com/v1", 0), OR_API_ANTHROPIC,
              "api.anthropic.com");
    or_is_int(PROV("https://api.deepseek.com/anthropic", 0), OR_API_ANTHROPIC,
              "DeepSeek's /anthropic");
    or_is_int(PROV("https://api.z.ai/api/anthropic/", 0), OR_API_ANTHROPIC,
              "Z.ai's /api/anthropic/");
    or_is_int(PROV("http://127.0.0.1:8080/v1", 1), OR_API_ANTHROPIC,
              "an anthropic-version header");
    or_is_int(PROV("https://openrouter.ai/api/v1", 0), OR_API_OPENAI,
              "OpenRouter");
    or_is_int(PROV("http://127.0.0.1:11434/v1", 0), OR_API_OPENAI,
              "a local server");
    or_is_int(PROV("https://generativelanguage.googleapis.com/v1beta", 0),
              OR_API_GEMINI, "Gemini native");
    or_is_int(PROV("https://generativelanguage.googleapis.com/v1beta/openai",
                   0), OR_API_OPENAI, "Gemini's OpenAI endpoint");
    or_is_int(PROV("https://example.com/v1/anthropicish", 0), OR_API_OPENAI,
              "a path merely containing the word");

#undef PATH
#undef PROV
}


/* the model segment of a Gemini native path (an attempt's URL) */

static void
test_api_path_model(void)
{
    size_t       s, e;
    const char  *p;

#define SPAN(str, want, name)                                                 \
    do {                                                                      \
        p = str;                                                              \
        s = e = 0;                                                            \
        or_ok(or_api_path_model(p, strlen(p), &s, &e) == 1                    \
              && e - s == strlen(want)                                        \
              && memcmp(p + s, want, e - s) == 0, name);                      \
    } while (0)

#define NONE(str, name)                                                       \
    do {                                                                      \
        p = str;                                                              \
        or_ok(or_api_path_model(p, strlen(p), &s, &e) == 0, name);            \
    } while (0)

    SPAN("/v1beta/models/gemini-x:streamGenerateContent", "gemini-x",
         "streamGenerateContent");
    SPAN("/v1beta/models/gemini-x:streamGenerateContent?alt=sse",
         "gemini-x", "a query is not part of it");
    SPAN("/v1beta/models/gemini-2.5-pro:generateContent", "gemini-2.5-pro",
         "generateContent");
    SPAN("/v1/models/gemini-x:countTokens", "gemini-x", "countTokens");
    SPAN("/v1beta/models/gemini-x:generateContent/", "gemini-x",
         "a trailing slash");
    SPAN("models/gemini-x:generateContent", "gemini-x", "no leading slash");
    SPAN("/v1beta/models/google/gemini-x:generateContent", "google/gemini-x",
         "a provider-prefixed model keeps its slash");
    SPAN("/v1beta/models/llama3:8b:generateContent", "llama3:8b",
         "the method's colon is the last one");
    SPAN("/v1beta/models/:generateContent", "", "an empty model");
    SPAN("/gw/v1beta/models/models/x:generateContent", "models/x",
         "the first /models/");

    NONE("/v1/chat/completions", "not Gemini");
    NONE("/v1/messages", "Anthropic");
    NONE("/v1beta/gemini-x:generateContent", "no /models/");
    NONE("/v1beta/tunedModels/t1:generateContent", "a tuned model");
    NONE("/v1beta/models:generateContent", "no model segment");
    NONE(":generateContent", "the method alone");
    or_ok(or_api_path_model(NULL, 0, &s, &e) == 0, "no path");

#undef SPAN
#undef NONE
}


int
main(void)
{
    size_t  i;

    for (i = 0; i < sizeof(fixtures) / sizeof(fixtures[0]); i++) {
        test_fixture(&fixtures[i]);
    }

    test_events();
    test_bound();
    test_error_events();
    test_usage_only();
    test_usage_flag();
    test_skip();
    test_data_span();
    test_refusals();
    test_api();
    test_api_path_model();
    test_malformed();

    return or_done();
}
