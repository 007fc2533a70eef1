/*
 * Copyright (C) ngx_omniroute authors
 *
 * R-STREAM-1, issue 27: the text-delta shape (or_sse_shape_match()) gives
 * what the full reading gives.  Every fixture of t/fixtures/streams and
 * generated streams (400 Chat deltas, Anthropic text deltas, texts with
 * escapes, \u sequences, control bytes, empty texts, a finish_reason, the
 * usage chunk, an error and a cut chunk between deltas of the same
 * skeleton) are scanned twice, with the shape and with every event read
 * in full, whole, in pieces of 7 bytes and byte by byte, with LF and CRLF
 * line ends: the events must be the same, field by field.
 */


#include <stdlib.h>

#include "or_test.h"
#include "or_sse.h"


#define MAX_EVENTS  2048


typedef struct {
    size_t           n;
    uint64_t         quick;
    or_sse_event_t   ev[MAX_EVENTS];
    char             names[MAX_EVENTS][OR_SSE_NAME_MAX];
} run_t;


static const char  *fixture_files[] = {
    "anthropic-error-after-start.sse", "anthropic-messages.sse",
    "anthropic-refusal.sse", "gemini-stream.sse", "groq-chat.sse",
    "openai-chat-content-filter.sse", "openai-chat-error-after-content.sse",
    "openai-chat-error-after-role.sse",
    "openai-chat-malformed-after-content.sse",
    "openai-chat-malformed-first.sse", "openai-chat-rate-limit-wait.sse",
    "openai-chat-reasoning.sse", "openai-chat.sse",
    "openai-responses-error-event.sse",
    "openai-responses-failed-after-created.sse",
    "openai-responses-huge.sse", "openai-responses-long.sse",
    "openai-responses.sse"
};


#define CHAT_PRE                                                              \
    "data: {\"id\":\"chatcmpl-B9\",\"object\":\"chat.completion.chunk\","    \
    "\"created\":1764570000,\"model\":\"gpt-4o-2024-08-06\","                \
    "\"system_fingerprint\":\"fp_50cad350e4\",\"choices\":[{\"index\":0,"    \
    "\"delta\":{\"content\":"
#define CHAT_POST  "},\"logprobs\":null,\"finish_reason\":null}]}\n\n"

#define ANT_PRE                                                               \
    "event: content_block_delta\n"                                            \
    "data: {\"type\":\"content_block_delta\",\"index\":1,"                   \
    "\"delta\":{\"type\":\"text_delta\",\"text\":"
#define ANT_POST   "}}\n\n"


static void
record(run_t *r, const or_sse_event_t *ev)
{
    if (r->n < MAX_EVENTS) {
        r->ev[r->n] = *ev;
        memcpy(r->names[r->n], ev->name, ev->name_len);
        r->ev[r->n].name = r->names[r->n];
        r->ev[r->n].data = NULL;
        r->ev[r->n].text_at = NULL;
    }

    r->n++;
}


/* piece 0: whole */

static int  batched;      /* scan() with or_sse_feed_run() */


static void
scan(const char *buf, size_t len, size_t piece, int full, run_t *r)
{
    size_t           off, n, k, end;
    or_sse_t        *s;
    or_sse_event_t   ev;

    s = malloc(sizeof(or_sse_t));
    or_sse_init(s);
    s->full = full;
    r->n = 0;

    for (off = 0; off < len; off = end) {
        end = piece ? off + piece : len;
        end = (end > len) ? len : end;
        k = off;

        while (k < end) {
            n = batched ? or_sse_feed_run(s, buf + k, end - k, &ev)
                        : or_sse_feed(s, buf + k, end - k, &ev);
            k += n;

            if (ev.kind != OR_SSE_EV_NONE) {
                record(r, &ev);
            }
        }
    }

    if (or_sse_end(s, &ev)) {
        record(r, &ev);
    }

    r->quick = s->quick;
    free(s);
}


static int
same_event(const or_sse_event_t *a, const or_sse_event_t *b)
{
    return a->kind == b->kind && a->format == b->format
           && a->content == b->content && a->progress == b->progress
           && a->finish == b->finish && a->refusal == b->refusal
           && a->truncated == b->truncated && a->malformed == b->malformed
           && a->usage_only == b->usage_only && a->usage == b->usage
           && a->text_bytes == b->text_bytes && a->status == b->status
           && a->name_len == b->name_len && a->data_len == b->data_len
           && memcmp(a->name, b->name, a->name_len) == 0
           && a->data_total == b->data_total && a->bytes == b->bytes;
}


/* the first event that differs, -1: none */

static long
compare(const run_t *a, const run_t *b)
{
    size_t  i;

    if (a->n != b->n) {
        return (long) (a->n < b->n ? a->n : b->n);
    }

    for (i = 0; i < a->n && i < MAX_EVENTS; i++) {
        if (!same_event(&a->ev[i], &b->ev[i])) {
            return (long) i;
        }
    }

    return -1;
}


/*
 * A run read with or_sse_feed_run() against the same read one event at a
 * time: each of its events stands for ev.events of the other in a row,
 * alike but for text_bytes and bytes, which add up; the first event that
 * differs, -1: none.
 */

static long
compare_batched(const run_t *b, const run_t *one)
{
    size_t          i, j, k;
    or_sse_event_t  sum, alike;

    j = 0;

    for (i = 0; i < b->n && i < MAX_EVENTS; i++) {
        if (b->ev[i].events == 0 || j + b->ev[i].events > one->n) {
            return (long) i;
        }

        sum = one->ev[j];

        for (k = 1; k < b->ev[i].events; k++) {
            /* alike but for the texts and their bytes */
            alike = one->ev[j + k];
            alike.text_bytes = one->ev[j].text_bytes;
            alike.bytes = one->ev[j].bytes;
            alike.data_len = one->ev[j].data_len;
            alike.data_total = one->ev[j].data_total;

            if (!same_event(&alike, &one->ev[j])) {
                return (long) i;
            }

            sum.text_bytes += one->ev[j + k].text_bytes;
            sum.bytes += one->ev[j + k].bytes;

            /* data: the last one's */
            sum.data_len = one->ev[j + k].data_len;
            sum.data_total = one->ev[j + k].data_total;
        }

        if (!same_event(&b->ev[i], &sum)) {
            return (long) i;
        }

        j += b->ev[i].events;
    }

    return (j == one->n && b->n <= MAX_EVENTS) ? -1 : (long) i;
}


static char *
crlf(const char *in, size_t len, size_t *out_len)
{
    char    *out, *o;
    size_t   i;

    out = malloc(len * 2 + 1);
    o = out;

    for (i = 0; i < len; i++) {
        if (in[i] == '\n') {
            *o++ = '\r';
        }

        *o++ = in[i];
    }

    *o = '\0';
    *out_len = o - out;

    return out;
}


static run_t  fast_run, full_run;


/* the stream read with the shape and in full alike; returns events quick */

static uint64_t
check(const char *label, const char *buf, size_t len)
{
    char           *c;
    long            at;
    size_t          i, clen;
    uint64_t        quick;
    static size_t   pieces[] = { 0, 7, 1 };

    quick = 0;

    /* the whole-event path of the scanner reads as the byte scanner */
    scan(buf, len, 0, 1, &fast_run);
    scan(buf, len, 1, 1, &full_run);
    at = compare(&fast_run, &full_run);
    or_ok(at < 0, "R-STREAM-1 %s: whole = byte by byte (first difference "
          "%ld)", label, at);

    for (i = 0; i < sizeof(pieces) / sizeof(pieces[0]); i++) {
        scan(buf, len, pieces[i], 0, &fast_run);
        scan(buf, len, pieces[i], 1, &full_run);
        at = compare(&fast_run, &full_run);
        or_ok(at < 0 && full_run.quick == 0,
              "R-STREAM-1 %s, pieces of %zu: shape = full reading "
              "(%zu events, %llu by shape; first difference %ld)", label,
              pieces[i], full_run.n, (unsigned long long) fast_run.quick,
              at);
        quick = fast_run.quick;

        batched = 1;
        scan(buf, len, pieces[i], 0, &full_run);
        batched = 0;
        at = compare_batched(&full_run, &fast_run);
        or_ok(at < 0 && full_run.quick == fast_run.quick,
              "R-STREAM-1 %s, pieces of %zu: deltas in a row as one = one "
              "by one (%zu events for %zu; first difference %ld)", label,
              pieces[i], full_run.n, fast_run.n, at);
    }

    c = crlf(buf, len, &clen);
    scan(c, clen, 5, 0, &fast_run);
    scan(c, clen, 5, 1, &full_run);
    at = compare(&fast_run, &full_run);
    or_ok(at < 0, "R-STREAM-1 %s, CRLF: shape = full reading (first "
          "difference %ld)", label, at);
    free(c);

    return quick;
}


static size_t
put(char *p, const char *s)
{
    size_t  n;

    n = strlen(s);
    memcpy(p, s, n);

    return n;
}


/* Chat deltas around texts, with the events of texts[] in between */

static char *
chat_stream(size_t deltas, const char **between, size_t nb, size_t *len)
{
    char    *buf, *p, text[64];
    size_t   i;

    buf = malloc(deltas * 400 + 65536);
    p = buf;

    p += put(p, "data: {\"id\":\"chatcmpl-B9\",\"object\":"
                "\"chat.completion.chunk\",\"created\":1764570000,\"model\":"
                "\"gpt-4o-2024-08-06\",\"system_fingerprint\":"
                "\"fp_50cad350e4\",\"choices\":[{\"index\":0,\"delta\":"
                "{\"role\":\"assistant\",\"content\":\"\",\"refusal\":null},"
                "\"logprobs\":null,\"finish_reason\":null}]}\n\n");

    for (i = 0; i < deltas; i++) {
        snprintf(text, sizeof(text), "\" word%zu\"", i);
        p += put(p, CHAT_PRE);
        p += put(p, text);
        p += put(p, CHAT_POST);

        if (nb && i % 37 == 5) {
            p += put(p, between[(i / 37) % nb]);
        }
    }

    p += put(p, "data: {\"id\":\"chatcmpl-B9\",\"object\":"
                "\"chat.completion.chunk\",\"created\":1764570000,\"model\":"
                "\"gpt-4o-2024-08-06\",\"system_fingerprint\":"
                "\"fp_50cad350e4\",\"choices\":[{\"index\":0,\"delta\":{},"
                "\"logprobs\":null,\"finish_reason\":\"stop\"}]}\n\n"
                "data: {\"id\":\"chatcmpl-B9\",\"object\":"
                "\"chat.completion.chunk\",\"created\":1764570000,\"model\":"
                "\"gpt-4o-2024-08-06\",\"choices\":[],\"usage\":"
                "{\"prompt_tokens\":9,\"completion_tokens\":400,"
                "\"total_tokens\":409}}\n\n"
                "data: [DONE]\n\n");

    *len = p - buf;

    return buf;
}


static void
test_fixtures(void)
{
    char    *buf;
    size_t   i, len;

    for (i = 0; i < sizeof(fixture_files) / sizeof(fixture_files[0]); i++) {
        buf = or_test_fixture(fixture_files[i], &len);
        or_ok(buf != NULL, "fixture %s read", fixture_files[i]);

        if (buf == NULL) {
            continue;
        }

        (void) check(fixture_files[i], buf, len);
        free(buf);
    }
}


static void
test_generated(void)
{
    char        *buf;
    size_t       len;
    uint64_t     quick;
    static const char  *odd[] = {
        /* same skeleton, texts the full reading reads in its own way */
        CHAT_PRE "\"esc \\\" \\\\ \\n \\u00e9 \\ud83d\\ude00 end\"" CHAT_POST,
        CHAT_PRE "\"bad \\u00zz hex\"" CHAT_POST,
        CHAT_PRE "\"cut \\u00e\"" CHAT_POST,
        CHAT_PRE "\"\"" CHAT_POST,
        CHAT_PRE "\"tab\there \x01 ctl\"" CHAT_POST,
        CHAT_PRE "\"caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xff\"" CHAT_POST,
        CHAT_PRE "\"a\"" "},\"logprobs\":null,\"finish_reason\":\"stop\"}]}"
            "\n\n",
        CHAT_PRE "\"a\",\"refusal\":\"no\"" CHAT_POST,
        CHAT_PRE "\"two\"}},{\"index\":1,\"delta\":{\"content\":\"x\""
            CHAT_POST,
        CHAT_PRE "\"x\"" CHAT_POST "data: {\"error\":{\"message\":\"late\","
            "\"type\":\"server_error\"}}\n\n",
        CHAT_PRE "\" th\n\n",
        CHAT_PRE "\"trailing\"" "},\"logprobs\":null,\"finish_reason\":null}]"
            "\n\n",
        CHAT_PRE "\"garbled\"" "},\"logprobs\":nul,\"finish_reason\":null}]}"
            "\n\n",
        CHAT_PRE "\"multi\"" CHAT_POST "data: {\"x\":1}\ndata: 2\n\n",
        ": keep-alive\n\n",
        "event: message\n" CHAT_PRE "\"named\"" CHAT_POST,
        "event: error\n" CHAT_PRE "\"named\"" CHAT_POST,
    };

    buf = chat_stream(400, NULL, 0, &len);
    quick = check("400 Chat deltas", buf, len);
    or_ok(quick >= 398, "issue 27: 400 Chat deltas, %llu of them by shape",
          (unsigned long long) quick);
    free(buf);

    buf = chat_stream(400, odd, sizeof(odd) / sizeof(odd[0]), &len);
    (void) check("400 Chat deltas with odd events between", buf, len);
    free(buf);
}


static void
test_anthropic(void)
{
    char        *buf, *p, text[64];
    size_t       i, len;
    uint64_t     quick;

    buf = malloc(400 * 300 + 4096);
    p = buf;

    p += put(p, "event: message_start\n"
                "data: {\"type\":\"message_start\",\"message\":{\"id\":"
                "\"msg_1\",\"type\":\"message\",\"role\":\"assistant\","
                "\"content\":[],\"model\":\"claude-sonnet-4-5\","
                "\"stop_reason\":null,\"usage\":{\"input_tokens\":12,"
                "\"output_tokens\":1}}}\n\n"
                "event: content_block_start\n"
                "data: {\"type\":\"content_block_start\",\"index\":1,"
                "\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n");

    for (i = 0; i < 400; i++) {
        snprintf(text, sizeof(text), "\"tok %zu\"", i);
        p += put(p, ANT_PRE);
        p += put(p, text);
        p += put(p, ANT_POST);

        if (i == 100) {
            p += put(p, "event: ping\ndata: {\"type\": \"ping\"}\n\n");
            p += put(p, ANT_PRE "\"\"" ANT_POST);
        }
    }

    p += put(p, "event: content_block_stop\n"
                "data: {\"type\":\"content_block_stop\",\"index\":1}\n\n"
                "event: message_delta\n"
                "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"
                "\"end_turn\"},\"usage\":{\"output_tokens\":400}}\n\n"
                "event: message_stop\n"
                "data: {\"type\":\"message_stop\"}\n\n");
    len = p - buf;

    quick = check("400 Anthropic text deltas", buf, len);
    or_ok(quick >= 398, "issue 27: 400 Anthropic text deltas, %llu of them "
          "by shape", (unsigned long long) quick);
    free(buf);
}


/* N deltas of pre STRING post, with odd events between */

static char *
deltas(const char *head, const char *pre, const char *post, size_t n,
    const char **between, size_t nb, size_t *len)
{
    char    *buf, *p, text[64];
    size_t   i;

    buf = malloc(n * 600 + 65536);
    p = buf;
    p += put(p, head);

    for (i = 0; i < n; i++) {
        /* texts with escapes: \", \n, \t, \\, \/ and \u (read in full) */
        snprintf(text, sizeof(text),
                 (i % 5 == 3) ? "\"{\\\"p\\\": %zu}\""
                 : (i % 7 == 2) ? "\"line\\nnext\\t\\\\ \\/%zu\""
                 : (i % 11 == 4) ? "\"caf\\u00e9 %zu\""
                 : "\" part %zu\"", i);
        p += put(p, pre);
        p += put(p, text);
        p += put(p, post);

        if (nb && i % 23 == 7) {
            p += put(p, between[(i / 23) % nb]);
        }
    }

    p += put(p, "data: [DONE]\n\n");
    *len = p - buf;

    return buf;
}


#define TOOL_PRE                                                              \
    "data: {\"id\":\"chatcmpl-T1\",\"object\":\"chat.completion.chunk\","    \
    "\"created\":1764570000,\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,"  \
    "\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":"
#define TOOL_POST  "}}]},\"logprobs\":null,\"finish_reason\":null}]}\n\n"
#define RSN_PRE                                                               \
    "data: {\"id\":\"gen-1\",\"object\":\"chat.completion.chunk\","          \
    "\"created\":1764570000,\"model\":\"deepseek-r1\",\"choices\":[{"         \
    "\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\","        \
    "\"reasoning_content\":"
#define RSN_POST   "},\"finish_reason\":null}]}\n\n"
#define AJSON_PRE                                                             \
    "event: content_block_delta\n"                                            \
    "data: {\"type\":\"content_block_delta\",\"index\":2,"                   \
    "\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":"
#define THINK_PRE                                                             \
    "event: content_block_delta\n"                                            \
    "data: {\"type\":\"content_block_delta\",\"index\":0,"                   \
    "\"delta\":{\"type\":\"thinking_delta\",\"thinking\":"


static void
test_tools_reasoning(void)
{
    char        *buf;
    size_t       i, len;
    uint64_t     quick;
    static const struct {
        const char  *label, *pre, *post;
    } kinds[] = {
        { "Chat tool-call arguments", TOOL_PRE, TOOL_POST },
        { "Chat reasoning_content", RSN_PRE, RSN_POST },
        { "Anthropic input_json_delta", AJSON_PRE, ANT_POST },
        { "Anthropic thinking_delta", THINK_PRE, ANT_POST },
        { "Chat text with escapes", CHAT_PRE, CHAT_POST },
        { "Anthropic text with escapes", ANT_PRE, ANT_POST },
    };
    static const char  *odd[] = {
        TOOL_PRE "\"\"" TOOL_POST,
        RSN_PRE "\"\"" RSN_POST,
        THINK_PRE "\"\"" ANT_POST,
        AJSON_PRE "\"\"" ANT_POST,
        TOOL_PRE "\"a\",\"arguments\":\"b\"" TOOL_POST,
        RSN_PRE "\"r\",\"reasoning\":\"\"" RSN_POST,
        TOOL_PRE "\"x\\u00zz\"" TOOL_POST,
        CHAT_PRE "\"text between\"" CHAT_POST,
        TOOL_PRE "\"cut",
        "\n\n",
    };

    for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        buf = deltas("", kinds[i].pre, kinds[i].post, 200, NULL, 0, &len);
        quick = check(kinds[i].label, buf, len);
        or_ok(quick >= 198, "issue 27: 200 %s deltas, %llu of them by "
              "shape", kinds[i].label, (unsigned long long) quick);
        free(buf);

        buf = deltas("", kinds[i].pre, kinds[i].post, 200, odd,
                     sizeof(odd) / sizeof(odd[0]), &len);
        (void) check(kinds[i].label, buf, len);
        free(buf);
    }
}


int
main(void)
{
    test_fixtures();
    test_generated();
    test_anthropic();
    test_tools_reasoning();

    return or_done();
}
