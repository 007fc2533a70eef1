/*
 * Copyright (C) ngx_omniroute authors
 *
 * What an event is, per stream format: the classifiers of Chat
 * Completions chunks, Responses API events and Anthropic Messages events,
 * the status and message of an error event, and the small tolerant reader
 * of the JSON an event carries; see or_sse_format.h.
 */


#ifndef _GNU_SOURCE
#define _GNU_SOURCE             /* memmem() */
#endif

#include <string.h>

#include "or_sse_format.h"
#include "or_json.h"
#include "or_retry_after.h"
#include "or_classify.h"


/* the arrays and objects a value the classifier reads may nest */
#define OR_SJ_NEST            15
#define OR_SSE_MALFORMED_NEST 64        /* deeper is not judged malformed */

/* the top-level members of an event's data the classifier reads */
#define OR_SSE_TOP_TYPE       0
#define OR_SSE_TOP_ERROR      1
#define OR_SSE_TOP_CHOICES    2
#define OR_SSE_TOP_OBJECT     3
#define OR_SSE_TOP_USAGE      4
#define OR_SSE_TOP_N          5

/* the members of a Chat Completions choice and of its delta */
#define OR_SSE_CHOICE_FINISH  0
#define OR_SSE_CHOICE_DELTA   1
#define OR_SSE_CHOICE_N       2

#define OR_SSE_DELTA_CONTENT  0
#define OR_SSE_DELTA_REFUSAL  1
#define OR_SSE_DELTA_RCONTENT 2
#define OR_SSE_DELTA_REASON   3
#define OR_SSE_DELTA_RTEXT    4
#define OR_SSE_DELTA_RDETAILS 5
#define OR_SSE_DELTA_TOOLS    6
#define OR_SSE_DELTA_FUNCTION 7
#define OR_SSE_DELTA_N        8

/* a member or_sj_members() looks for, and its value once found */
typedef struct {
    const char   *key;
    size_t        len;
    const char   *val;
} or_sj_member_t;

#define or_sj_member(lit)  { lit, sizeof(lit) - 1, NULL }


static const char *or_sj_get(const char *p, const char *e, const char *key);
static int or_sj_members_whole(const char *p, const char *e,
    or_sj_member_t *m, size_t n);
static const char *or_sj_members(const char *p, const char *e,
    or_sj_member_t *m, size_t n, int to_end);
static const char *or_sj_after(const char *p, const char *e);
static int or_sj_null(const char *p, const char *e);
static long or_sj_strlen(const char *p, const char *e, int *complete);
static uint32_t or_sse_hex4(const char *q);
static int or_sj_str_is(const char *p, const char *e, const char *lit);
static const char *or_sj_first(const char *p, const char *e);
static const char *or_sj_next(const char *p, const char *e);
static size_t or_sj_decode(const char *p, const char *e, char *out,
    size_t size);
static void or_sse_what(const char *name, size_t name_len,
    const char *data, size_t data_len, size_t data_total,
    or_sse_event_t *ev);
static void or_sse_kind(or_sse_event_t *ev, or_sse_kind_e kind,
    unsigned content, unsigned progress);
static int or_sse_anthropic(const char *type, size_t tlen, const char *p,
    const char *e, or_sse_event_t *ev);
static int or_sse_responses(const char *type, size_t tlen, const char *p,
    const char *e, or_sse_event_t *ev);
static int or_sse_chat(or_sj_member_t *top, const char *e,
    or_sse_event_t *ev);
static int or_sse_refusal_reason(const char *v, const char *e);
static size_t or_sse_text_bytes(const char *v, const char *e,
    const or_sse_event_t *ev, int *nonempty);
static int or_sse_field_number(const char *data, size_t len,
    const char *field);
static int or_sse_suffix(const char *s, size_t len, const char *lit);
static size_t or_sse_path_len(const char *path, size_t len);
static int or_sse_contains(const char *s, size_t len, const char *lit);


typedef struct {
    const char   *type;
    int           status;
} or_sse_type_status_t;


static const or_sse_type_status_t  or_sse_types[] = {
    { "insufficient_quota", 429 },
    { "rate_limit_error", 429 },
    { "rate_limit_exceeded", 429 },
    { "overloaded_error", 529 },
    { "authentication_error", 401 },
    { "permission_error", 403 },
    { "not_found_error", 404 },
    { "invalid_request_error", 400 },
    { "api_error", 500 },
    { "server_error", 500 },
    { NULL, 0 }
};


/*
 * A tolerant reader of the JSON an event carries, over or_json.h's
 * reading primitives (or_json_ws(), or_json_string_end(), or_json_skip()):
 * enough to find a member by name and measure a string.  It never
 * allocates; incomplete or invalid input makes it return NULL (the member
 * is "not there").
 */


/* the value of member key of the object at p, or NULL */

static const char *
or_sj_get(const char *p, const char *e, const char *key)
{
    or_sj_member_t  m;

    m.key = key;
    m.len = strlen(key);

    (void) or_sj_members(p, e, &m, 1, 0);

    return m.val;
}


/*
 * The values of the members named in m of the object at p, in one pass
 * over it: each the first of its name, as or_sj_get() finds it (NULL when
 * absent or past what can be read).  Returns the end of the object when
 * it was read to its '}' (with to_end, even when all were found before
 * it), else NULL.
 */

static const char *
or_sj_members(const char *p, const char *e, or_sj_member_t *m, size_t n,
    int to_end)
{
    size_t       i, left;
    const char  *k, *ke;

    for (i = 0; i < n; i++) {
        m[i].val = NULL;
    }

    if (p == NULL) {
        return NULL;
    }

    p = or_json_ws(p, e);

    if (p >= e || *p != '{') {
        return NULL;
    }

    left = n;
    p = or_json_ws(p + 1, e);

    while (p < e && *p == '"') {
        k = p + 1;
        ke = or_json_string_end(p, e);

        if (ke == NULL) {
            return NULL;
        }

        p = or_json_ws(ke, e);

        if (p >= e || *p != ':') {
            return NULL;
        }

        p = or_json_ws(p + 1, e);

        if (p >= e) {
            return NULL;
        }

        for (i = 0; i < n; i++) {
            if (m[i].val == NULL && (size_t) (ke - 1 - k) == m[i].len
                && *k == *m[i].key && memcmp(k, m[i].key, m[i].len) == 0)
            {
                m[i].val = p;

                if (--left == 0 && !to_end) {
                    return NULL;
                }

                break;
            }
        }

        p = or_json_skip(p, e, OR_SJ_NEST);
        if (p == NULL) {
            return NULL;
        }

        p = or_json_ws(p, e);

        if (p >= e || *p != ',') {
            break;
        }

        p = or_json_ws(p + 1, e);
    }

    return (p < e && *p == '}') ? p + 1 : NULL;
}


/*
 * or_sj_members() to the object's end, that end the data's (e, but for
 * whitespace) and no "," before its "}": 1 then, and the object is what
 * or_json_skip() reads whole at any depth of at least OR_SJ_NEST + 1 (each
 * member's value was, at OR_SJ_NEST) -- the malformed check, in the same
 * pass as the members; m as or_sj_members() fills it.  0: not told (the
 * full check reads the object).
 */

static int
or_sj_members_whole(const char *p, const char *e, or_sj_member_t *m,
    size_t n)
{
    size_t       i;
    const char  *k, *ke;

    for (i = 0; i < n; i++) {
        m[i].val = NULL;
    }

    if (p >= e || *p != '{') {
        return 0;
    }

    p = or_json_ws(p + 1, e);

    if (p < e && *p == '}') {
        return or_json_ws(p + 1, e) == e;
    }

    for ( ;; ) {
        if (p >= e || *p != '"') {
            return 0;
        }

        k = p + 1;
        ke = or_json_string_end(p, e);

        if (ke == NULL) {
            return 0;
        }

        p = or_json_ws(ke, e);

        if (p >= e || *p != ':') {
            return 0;
        }

        p = or_json_ws(p + 1, e);

        if (p >= e) {
            return 0;
        }

        for (i = 0; i < n; i++) {
            if (m[i].val == NULL && (size_t) (ke - 1 - k) == m[i].len
                && *k == *m[i].key && memcmp(k, m[i].key, m[i].len) == 0)
            {
                m[i].val = p;
                break;
            }
        }

        p = or_json_skip(p, e, OR_SJ_NEST);
        if (p == NULL) {
            return 0;
        }

        p = or_json_ws(p, e);

        if (p < e && *p == '}') {
            return or_json_ws(p + 1, e) == e;
        }

        if (p >= e || *p != ',') {
            return 0;
        }

        p = or_json_ws(p + 1, e);
    }
}


static int
or_sj_null(const char *p, const char *e)
{
    return p == NULL
           || ((size_t) (e - p) >= 4 && memcmp(p, "null", 4) == 0);
}


/* the value of 4 hex digits (a \u escape; other bytes count as 0) */

static uint32_t
or_sse_hex4(const char *q)
{
    int       i;
    uint32_t  v;

    v = 0;

    for (i = 0; i < 4; i++, q++) {
        v <<= 4;

        if (*q >= '0' && *q <= '9') {
            v |= *q - '0';

        } else if ((*q | 0x20) >= 'a' && (*q | 0x20) <= 'f') {
            v |= (*q | 0x20) - 'a' + 10;
        }
    }

    return v;
}


/*
 * The UTF-8 byte length of the string at p once decoded, -1 if p is not
 * a string; *complete is 0 when the string is cut by the end of input.
 */

static long
or_sj_strlen(const char *p, const char *e, int *complete)
{
    long          n;
    unsigned      cp, lo;

    *complete = 0;

    if (p == NULL || p >= e || *p != '"') {
        return -1;
    }

    n = 0;
    p++;

    while (p < e) {
        if (*p == '"') {
            *complete = 1;
            return n;
        }

        if (*p != '\\') {
            n++;
            p++;
            continue;
        }

        if (p + 1 >= e) {
            return n;
        }

        if (p[1] != 'u') {
            n++;
            p += 2;
            continue;
        }

        if (e - p < 6) {
            return n;
        }

        cp = or_sse_hex4(p + 2);

        p += 6;

        if (cp >= 0xd800 && cp <= 0xdbff && e - p >= 6 && p[0] == '\\'
            && p[1] == 'u')
        {
            lo = or_sse_hex4(p + 2);

            if (lo >= 0xdc00 && lo <= 0xdfff) {
                p += 6;
                n += 4;
                continue;
            }
        }

        n += (cp < 0x80) ? 1 : (cp < 0x800) ? 2 : 3;
    }

    return n;
}


static int
or_sj_str_is(const char *p, const char *e, const char *lit)
{
    size_t  n;

    n = strlen(lit);

    return p != NULL && (size_t) (e - p) >= n + 2 && *p == '"'
           && memcmp(p + 1, lit, n) == 0 && p[n + 1] == '"';
}


/* the first element of the array at p, NULL if none (or not an array) */

static const char *
or_sj_first(const char *p, const char *e)
{
    if (p == NULL || p >= e || *p != '[') {
        return NULL;
    }

    p = or_json_ws(p + 1, e);

    if (p >= e || *p == ']') {
        return NULL;
    }

    return p;
}


/* the element after the one at p, NULL at the end */

static const char *
or_sj_next(const char *p, const char *e)
{
    p = or_json_skip(p, e, OR_SJ_NEST);

    return (p == NULL) ? NULL : or_sj_after(p, e);
}


/* the element after the end of one (p just past it), NULL at the end */

static const char *
or_sj_after(const char *p, const char *e)
{
    p = or_json_ws(p, e);

    if (p >= e || *p != ',') {
        return NULL;
    }

    p = or_json_ws(p + 1, e);

    return p < e ? p : NULL;
}


/* decodes the string at p as plain text into out; returns its length */

static size_t
or_sj_decode(const char *p, const char *e, char *out, size_t size)
{
    char        *o, *end, c;
    size_t       i;
    unsigned     cp, lo;
    const char  *q;

    if (size == 0) {
        return 0;
    }

    o = out;
    end = out + size - 1;

    if (p == NULL || p >= e || *p != '"') {
        *o = '\0';
        return 0;
    }

    p++;

    while (p < e && *p != '"' && o < end) {

        if (*p != '\\') {
            c = *p++;
            *o++ = ((unsigned char) c < 0x20) ? ' ' : c;
            continue;
        }

        if (p + 1 >= e) {
            break;
        }

        c = p[1];

        if (c != 'u') {
            p += 2;

            switch (c) {
            case 'n':
            case 'r':
            case 't':
            case 'b':
            case 'f':
                c = ' ';
                break;
            default:
                break;
            }

            *o++ = ((unsigned char) c < 0x20 || c == 0x7f) ? ' ' : c;
            continue;
        }

        if (e - p < 6) {
            break;
        }

        cp = or_sse_hex4(p + 2);

        p += 6;

        if (cp >= 0xd800 && cp <= 0xdbff && e - p >= 6 && p[0] == '\\'
            && p[1] == 'u')
        {
            lo = or_sse_hex4(p + 2);

            if (lo >= 0xdc00 && lo <= 0xdfff) {
                p += 6;
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            }
        }

        if (cp < 0x20) {
            cp = ' ';
        }

        if ((cp >= 0xd800 && cp <= 0xdfff)) {
            cp = 0xfffd;
        }

        if (cp < 0x80) {
            *o++ = (char) cp;
            continue;
        }

        i = (cp < 0x800) ? 2 : (cp < 0x10000) ? 3 : 4;

        if ((size_t) (end - o) < i) {
            break;
        }

        o = or_json_utf8_put(o, cp);
    }

    /* never end inside a UTF-8 sequence (raw bytes cut by the bound) */

    if (o > out && ((unsigned char) o[-1] & 0x80)) {
        q = o;

        while (q > out && ((unsigned char) q[-1] & 0xc0) == 0x80) {
            q--;
        }

        if (q > out && ((unsigned char) q[-1] & 0xc0) == 0xc0) {
            cp = (unsigned char) q[-1];
            i = (cp >= 0xf0) ? 4 : (cp >= 0xe0) ? 3 : 2;

            if ((size_t) (o - q) + 1 < i) {
                o = (char *) q - 1;
            }
        }
    }

    *o = '\0';

    return o - out;
}


static void
or_sse_kind(or_sse_event_t *ev, or_sse_kind_e kind, unsigned content,
    unsigned progress)
{
    ev->kind = kind;
    ev->content = content;
    ev->progress = progress;
}


/*
 * The decoded byte length of the string at v; a string cut by the data
 * bound counts the data that was not kept as well (a conservative proxy
 * for a long delta).  *nonempty: it has text.
 */

static size_t
or_sse_text_bytes(const char *v, const char *e, const or_sse_event_t *ev,
    int *nonempty)
{
    int    complete;
    long   n;

    n = or_sj_strlen(v, e, &complete);

    if (n < 0) {
        *nonempty = 0;
        return 0;
    }

    if (!complete && ev->truncated) {
        n += (long) (ev->data_total - ev->data_len);
    }

    *nonempty = (n > 0);

    return (size_t) n;
}


void
or_sse_classify(const char *name, size_t name_len, const char *data,
    size_t data_len, size_t data_total, or_sse_event_t *ev)
{
    ev->usage = 0;

    or_sse_what(name, name_len, data, data_len, data_total, ev);

    switch (ev->kind) {

    case OR_SSE_EV_TEXT:
    case OR_SSE_EV_REASONING:
    case OR_SSE_EV_TOOL:
    case OR_SSE_EV_META:
        if (ev->format != OR_SSE_FMT_CHAT) {
            /* Anthropic's message_start and message_delta, say */
            ev->usage |= (ev->kind == OR_SSE_EV_META);
        }
        break;

    case OR_SSE_EV_DONE:
        /* Responses' response.completed, not Chat's [DONE] */
        ev->usage |= (ev->format != OR_SSE_FMT_CHAT);
        break;

    case OR_SSE_EV_HEARTBEAT:
    case OR_SSE_EV_NONE:
        break;

    default:
        ev->usage = 1;
    }

    ev->usage |= ev->truncated;
}


static void
or_sse_what(const char *name, size_t name_len, const char *data,
    size_t data_len, size_t data_total, or_sse_event_t *ev)
{
    int              walked;
    size_t           tlen;
    const char      *p, *e, *v, *type;
    or_sj_member_t   top[] = {
        or_sj_member("type"),
        or_sj_member("error"),
        or_sj_member("choices"),
        or_sj_member("object"),
        or_sj_member("usage")
    };

    ev->kind = OR_SSE_EV_OTHER;
    ev->format = OR_SSE_FMT_UNKNOWN;
    ev->content = 0;
    ev->progress = 0;
    ev->finish = 0;
    ev->refusal = 0;
    ev->malformed = 0;
    ev->usage_only = 0;
    ev->text_bytes = 0;
    ev->text_at = NULL;
    ev->status = 0;
    ev->data_total = data_total;
    ev->data_len = data_len;
    ev->truncated = (data_total > data_len);

    p = or_json_ws(data, data + data_len);
    e = data + data_len;

    if ((size_t) (e - p) >= 6 && memcmp(p, "[DONE]", 6) == 0) {
        ev->format = OR_SSE_FMT_CHAT;
        or_sse_kind(ev, OR_SSE_EV_DONE, 0, 0);
        return;
    }

    /* the event's type: its event: name, else the data's "type" */

    type = NULL;
    tlen = 0;

    if (name_len && !or_sse_is(name, name_len, "message")) {
        type = name;
        tlen = name_len;
    }

    if (p < e && *p == '{') {

        walked = 0;

        if (!ev->truncated) {
            /* the members found in the malformed check's pass, if it can */
            walked = or_sj_members_whole(p, e, top, OR_SSE_TOP_N);
            v = walked ? e : or_json_skip(p, e, OR_SSE_MALFORMED_NEST);

            if (v == NULL || or_json_ws(v, e) != e) {
                /* a cut or garbled JSON object: no answer to pass on */
                ev->malformed = 1;
                or_sse_kind(ev, OR_SSE_EV_ERROR, 0, 0);
                ev->status = 502;
                return;
            }
        }

        if (type != NULL) {
            if (or_sse_is(type, tlen, "error")) {
                goto error;
            }

            if (or_sse_anthropic(type, tlen, p, e, ev)
                || or_sse_responses(type, tlen, p, e, ev))
            {
                if (ev->kind == OR_SSE_EV_ERROR) {
                    goto error;
                }

                return;
            }
        }

        /* an unknown or no event name: the data's own "type" */

        if (!walked) {
            (void) or_sj_members(p, e, top, OR_SSE_TOP_N, 0);
        }

        v = top[OR_SSE_TOP_TYPE].val;

        if (v != NULL && *v == '"') {
            type = v + 1;
            v = memchr(type, '"', e - type);
            tlen = (v != NULL) ? (size_t) (v - type) : 0;

            if (or_sse_is(type, tlen, "error")) {
                goto error;
            }

            if (or_sse_anthropic(type, tlen, p, e, ev)
                || or_sse_responses(type, tlen, p, e, ev))
            {
                if (ev->kind == OR_SSE_EV_ERROR) {
                    goto error;
                }

                return;
            }
        }

        /* a top-level "error" member that is not null */

        v = top[OR_SSE_TOP_ERROR].val;

        if (v != NULL && !or_sj_null(v, e)) {
            goto error;
        }

        if (or_sse_chat(top, e, ev)) {
            return;
        }

        /* JSON of no known shape (or cut by the bound): content */
        or_sse_kind(ev, OR_SSE_EV_OTHER, 1, 1);
        return;
    }

    if (type != NULL && or_sse_is(type, tlen, "error")) {
        goto error;
    }

    /* not JSON: a stream of no known format; its events are content */
    or_sse_kind(ev, OR_SSE_EV_OTHER, 1, 1);
    return;

error:

    or_sse_kind(ev, OR_SSE_EV_ERROR, 0, 0);
    ev->status = or_sse_error_status(data, data_len);
}


/* Anthropic Messages events; 0 if type is not one of them */

static int
or_sse_anthropic(const char *type, size_t tlen, const char *p, const char *e,
    or_sse_event_t *ev)
{
    int          nonempty;
    const char  *v, *b;

    if (or_sse_is(type, tlen, "message_delta")) {
        ev->format = OR_SSE_FMT_ANTHROPIC;
        v = or_sj_get(or_sj_get(p, e, "delta"), e, "stop_reason");

        if (or_sse_refusal_reason(v, e)) {
            /* the model declined: an answer, it commits */
            ev->refusal = 1;
            or_sse_kind(ev, OR_SSE_EV_META, 1, 1);
            return 1;
        }

        or_sse_kind(ev, OR_SSE_EV_META, 0, 0);
        return 1;
    }

    if (or_sse_is(type, tlen, "message_start")
        || or_sse_is(type, tlen, "content_block_stop"))
    {
        ev->format = OR_SSE_FMT_ANTHROPIC;
        or_sse_kind(ev, OR_SSE_EV_META, 0, 0);
        return 1;
    }

    if (or_sse_is(type, tlen, "message_stop")) {
        ev->format = OR_SSE_FMT_ANTHROPIC;
        or_sse_kind(ev, OR_SSE_EV_DONE, 0, 0);
        return 1;
    }

    if (or_sse_is(type, tlen, "ping")) {
        ev->format = OR_SSE_FMT_ANTHROPIC;
        or_sse_kind(ev, OR_SSE_EV_HEARTBEAT, 0, 0);
        return 1;
    }

    if (or_sse_is(type, tlen, "content_block_start")) {
        ev->format = OR_SSE_FMT_ANTHROPIC;
        b = or_sj_get(p, e, "content_block");
        v = or_sj_get(b, e, "type");

        if (or_sj_str_is(v, e, "tool_use")
            || or_sj_str_is(v, e, "server_tool_use")
            || or_sj_str_is(v, e, "mcp_tool_use"))
        {
            /* it names the tool: content */
            or_sse_kind(ev, OR_SSE_EV_TOOL, 1, 1);
            return 1;
        }

        if (or_sj_str_is(v, e, "text")) {
            ev->text_bytes = or_sse_text_bytes(or_sj_get(b, e, "text"), e,
                                               ev, &nonempty);
            if (nonempty) {
                or_sse_kind(ev, OR_SSE_EV_TEXT, 1, 1);
                return 1;
            }

        } else if (or_sj_str_is(v, e, "thinking")) {
            (void) or_sse_text_bytes(or_sj_get(b, e, "thinking"), e, ev,
                                     &nonempty);
            if (nonempty) {
                or_sse_kind(ev, OR_SSE_EV_REASONING, 1, 1);
                return 1;
            }

        } else if (or_sj_str_is(v, e, "redacted_thinking")) {
            or_sse_kind(ev, OR_SSE_EV_REASONING, 1, 1);
            return 1;
        }

        or_sse_kind(ev, OR_SSE_EV_META, 0, 0);
        return 1;
    }

    if (!or_sse_is(type, tlen, "content_block_delta")) {
        return 0;
    }

    ev->format = OR_SSE_FMT_ANTHROPIC;
    b = or_sj_get(p, e, "delta");
    v = or_sj_get(b, e, "type");

    if (or_sj_str_is(v, e, "text_delta")) {
        v = or_sj_get(b, e, "text");
        ev->text_bytes = or_sse_text_bytes(v, e, ev, &nonempty);
        ev->text_at = nonempty ? v : NULL;
        or_sse_kind(ev, nonempty ? OR_SSE_EV_TEXT : OR_SSE_EV_META,
                    nonempty, nonempty);
        return 1;
    }

    if (or_sj_str_is(v, e, "thinking_delta")) {
        /* an empty thinking frame still shows the model is thinking */
        (void) or_sse_text_bytes(or_sj_get(b, e, "thinking"), e, ev,
                                 &nonempty);
        or_sse_kind(ev, OR_SSE_EV_REASONING, nonempty, 1);
        return 1;
    }

    if (or_sj_str_is(v, e, "signature_delta")) {
        (void) or_sse_text_bytes(or_sj_get(b, e, "signature"), e, ev,
                                 &nonempty);
        or_sse_kind(ev, nonempty ? OR_SSE_EV_REASONING : OR_SSE_EV_META, 0,
                    nonempty);
        return 1;
    }

    if (or_sj_str_is(v, e, "input_json_delta")) {
        or_sse_kind(ev, OR_SSE_EV_TOOL, 1, 1);
        return 1;
    }

    if (or_sj_str_is(v, e, "citations_delta")) {
        or_sse_kind(ev, OR_SSE_EV_TEXT, 1, 1);
        return 1;
    }

    /* a delta of a kind we do not know: content, to be safe */
    or_sse_kind(ev, OR_SSE_EV_OTHER, 1, 1);
    return 1;
}


static int
or_sse_suffix(const char *s, size_t len, const char *lit)
{
    size_t  n;

    n = strlen(lit);

    return len >= n && memcmp(s + len - n, lit, n) == 0;
}


/* OpenAI Responses API events; 0 if type is not "response.*" */

static int
or_sse_responses(const char *type, size_t tlen, const char *p, const char *e,
    or_sse_event_t *ev)
{
    int      nonempty;
    size_t   n;

    if (tlen < 9 || memcmp(type, "response.", 9) != 0) {
        return 0;
    }

    ev->format = OR_SSE_FMT_RESPONSES;

    if (or_sse_is(type, tlen, "response.completed")
        || or_sse_is(type, tlen, "response.incomplete"))
    {
        ev->refusal = or_sse_refusal_reason(
                          or_sj_get(or_sj_get(or_sj_get(p, e, "response"), e,
                                              "incomplete_details"),
                                    e, "reason"), e);
        or_sse_kind(ev, OR_SSE_EV_DONE, 0, 0);
        return 1;
    }

    if (or_sse_is(type, tlen, "response.failed")
        || or_sse_is(type, tlen, "response.error"))
    {
        or_sse_kind(ev, OR_SSE_EV_ERROR, 0, 0);
        return 1;
    }

    if (or_sse_suffix(type, tlen, ".done")) {
        or_sse_kind(ev, OR_SSE_EV_META, 0, 0);
        return 1;
    }

    if (or_sse_is(type, tlen, "response.output_text.delta")
        || or_sse_is(type, tlen, "response.refusal.delta")
        || or_sse_is(type, tlen, "response.audio.transcript.delta"))
    {
        ev->text_bytes = or_sse_text_bytes(or_sj_get(p, e, "delta"), e, ev,
                                           &nonempty);
        or_sse_kind(ev, nonempty ? OR_SSE_EV_TEXT : OR_SSE_EV_META,
                    nonempty, nonempty);
        return 1;
    }

    if (or_sse_contains(type, tlen, "reasoning")) {
        if (or_sse_suffix(type, tlen, ".delta")) {
            (void) or_sse_text_bytes(or_sj_get(p, e, "delta"), e, ev,
                                     &nonempty);
            or_sse_kind(ev, OR_SSE_EV_REASONING, nonempty, 1);

        } else {
            /* a reasoning part starts: a reasoning frame, not content */
            or_sse_kind(ev, OR_SSE_EV_REASONING, 0, 1);
        }

        return 1;
    }

    if (or_sse_contains(type, tlen, "_call")) {
        n = or_sse_suffix(type, tlen, ".delta");
        or_sse_kind(ev, OR_SSE_EV_TOOL, (unsigned) n, 1);
        return 1;
    }

    /* created, in_progress, queued, output_item.added, ... */
    or_sse_kind(ev, OR_SSE_EV_META, 0, 0);
    return 1;
}


/*
 * The JSON string at v is a finish or stop reason that says the answer was
 * refused or filtered: OpenAI, Azure, OpenRouter and Gemini's OpenAI
 * endpoint "content_filter", Anthropic "refusal", Gemini's own SAFETY,
 * PROHIBITED_CONTENT, BLOCKLIST, SPII, RECITATION, IMAGE_SAFETY (any
 * case).
 */

static int
or_sse_refusal_reason(const char *v, const char *e)
{
    size_t              n, i, k;
    const char         *s;
    static const char  *reasons[] = {
        "content_filter", "refusal", "safety", "prohibited_content",
        "blocklist", "spii", "recitation", "image_safety",
        "content_filtered"
    };

    if (v == NULL || v >= e || *v != '"') {
        return 0;
    }

    s = v + 1;

    for (n = 0; s + n < e && s[n] != '"' && s[n] != '\\'; n++) {
        /* void */
    }

    if (s + n >= e || s[n] != '"') {
        return 0;
    }

    for (i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++) {

        if (strlen(reasons[i]) != n) {
            continue;
        }

        for (k = 0; k < n; k++) {
            if (s[k] != reasons[i][k]
                && !(s[k] >= 'A' && s[k] <= 'Z'
                     && (s[k] | 0x20) == reasons[i][k]))
            {
                break;
            }
        }

        if (k == n) {
            return 1;
        }
    }

    return 0;
}


/* a Chat Completions chunk; 0 if the event's JSON is not one */

static int
or_sse_chat(or_sj_member_t *top, const char *e, or_sse_event_t *ev)
{
    int              text, tool, reasoning, nonempty, chunk, texts;
    size_t           n;
    const char      *choices, *c, *d, *v, *end, *next, *at;
    or_sj_member_t   choice[] = {
        or_sj_member("finish_reason"),
        or_sj_member("delta")
    };
    or_sj_member_t   delta[] = {
        or_sj_member("content"),
        or_sj_member("refusal"),
        or_sj_member("reasoning_content"),
        or_sj_member("reasoning"),
        or_sj_member("reasoning_text"),
        or_sj_member("reasoning_details"),
        or_sj_member("tool_calls"),
        or_sj_member("function_call")
    };

    choices = top[OR_SSE_TOP_CHOICES].val;
    v = top[OR_SSE_TOP_OBJECT].val;

    chunk = or_sj_str_is(v, e, "chat.completion.chunk");

    d = top[OR_SSE_TOP_USAGE].val;

    ev->usage = (d != NULL && *d == '{');

    if (choices == NULL || *choices != '[') {
        if (!chunk && d == NULL) {
            return 0;
        }

        ev->format = OR_SSE_FMT_CHAT;
        ev->usage_only = (d != NULL && *d == '{');
        or_sse_kind(ev, OR_SSE_EV_META, 0, 0);
        return 1;
    }

    ev->format = OR_SSE_FMT_CHAT;
    ev->usage_only = (d != NULL && *d == '{'
                      && or_sj_first(choices, e) == NULL);

    text = 0;
    tool = 0;
    reasoning = 0;
    texts = 0;
    at = NULL;

    for (c = or_sj_first(choices, e); c != NULL; c = next) {

        /* the next choice from where this one's members ended */

        end = or_sj_members(c, e, choice, OR_SSE_CHOICE_N, 1);
        next = (end != NULL) ? or_sj_after(end, e) : or_sj_next(c, e);

        v = choice[OR_SSE_CHOICE_FINISH].val;

        if (v != NULL && !or_sj_null(v, e)) {
            ev->finish = 1;
            ev->refusal |= or_sse_refusal_reason(v, e);
        }

        d = choice[OR_SSE_CHOICE_DELTA].val;

        if (d == NULL || *d != '{') {
            continue;
        }

        (void) or_sj_members(d, e, delta, OR_SSE_DELTA_N, 0);

        n = or_sse_text_bytes(delta[OR_SSE_DELTA_CONTENT].val, e, ev,
                              &nonempty);
        if (nonempty) {
            text = 1;
            ev->text_bytes += n;
            at = delta[OR_SSE_DELTA_CONTENT].val;
            texts++;
        }

        n = or_sse_text_bytes(delta[OR_SSE_DELTA_REFUSAL].val, e, ev,
                              &nonempty);
        if (nonempty) {
            text = 1;
            ev->text_bytes += n;
            at = delta[OR_SSE_DELTA_REFUSAL].val;
            texts++;
        }

        (void) or_sse_text_bytes(delta[OR_SSE_DELTA_RCONTENT].val, e, ev,
                                 &nonempty);
        reasoning |= nonempty;

        (void) or_sse_text_bytes(delta[OR_SSE_DELTA_REASON].val, e, ev,
                                 &nonempty);
        reasoning |= nonempty;

        (void) or_sse_text_bytes(delta[OR_SSE_DELTA_RTEXT].val, e, ev,
                                 &nonempty);
        reasoning |= nonempty;

        if (or_sj_first(delta[OR_SSE_DELTA_RDETAILS].val, e) != NULL) {
            reasoning = 1;
        }

        if (or_sj_first(delta[OR_SSE_DELTA_TOOLS].val, e) != NULL) {
            tool = 1;
        }

        v = delta[OR_SSE_DELTA_FUNCTION].val;

        if (v != NULL && *v == '{') {
            tool = 1;
        }

        if (ev->truncated && !text && !tool && !reasoning
            && or_json_skip(d, e, OR_SJ_NEST) == NULL)
        {
            /* a delta longer than we keep, of a member not read */
            text = 1;
        }
    }

    /* the last chunk: some carry its usage elsewhere (Groq's x_groq) */
    ev->usage |= ev->finish;

    if (text) {
        ev->text_at = (texts == 1) ? at : NULL;
        or_sse_kind(ev, OR_SSE_EV_TEXT, 1, 1);

    } else if (tool) {
        or_sse_kind(ev, OR_SSE_EV_TOOL, 1, 1);

    } else if (reasoning) {
        or_sse_kind(ev, OR_SSE_EV_REASONING, 1, 1);

    } else if (ev->refusal) {
        /* a filtered answer (finish_reason "content_filter"): it commits */
        or_sse_kind(ev, OR_SSE_EV_META, 1, 1);

    } else {
        or_sse_kind(ev, OR_SSE_EV_META, 0, 0);
    }

    return 1;
}


/*
 * The string at p (its '"'), up to end (past its closing '"'), is read
 * alike by or_json_string_end() and or_sj_strlen(): each "\\u" escape has
 * its four hex digits.
 */

static int
or_sse_shape_escapes(const char *p, const char *end)
{
    int          i;
    const char  *q;

    p++;
    end--;

    while (p < end) {
        q = memchr(p, '\\', end - p);

        if (q == NULL) {
            return 1;
        }

        if (q + 1 < end && q[1] == 'u') {
            if (end - q < 6) {
                return 0;
            }

            for (i = 2; i < 6; i++) {
                if (!((q[i] >= '0' && q[i] <= '9')
                      || ((q[i] | 0x20) >= 'a' && (q[i] | 0x20) <= 'f')))
                {
                    return 0;
                }
            }
        }

        p = q + 2;
    }

    return 1;
}


/*
 * The one string of a tool or reasoning delta the reading looks at only
 * for being empty: the value of the one member of those names in data,
 * or NULL (none, or several).
 */

static const char *
or_sse_shape_string(const char *data, size_t len, const or_sse_event_t *ev)
{
    size_t       i, n, k;
    const char  *p, *e, *q, *at;
    static const char  *tool[] = { "\"arguments\":\"", "\"partial_json\":\"" };
    static const char  *reasoning[] = {
        "\"reasoning_content\":\"", "\"reasoning\":\"",
        "\"reasoning_text\":\"", "\"thinking\":\""
    };
    const char  **keys;

    if (ev->kind == OR_SSE_EV_TOOL) {
        keys = tool;
        n = sizeof(tool) / sizeof(tool[0]);

    } else {
        keys = reasoning;
        n = sizeof(reasoning) / sizeof(reasoning[0]);
    }

    at = NULL;
    e = data + len;

    for (i = 0; i < n; i++) {
        k = strlen(keys[i]);

        for (p = data; p < e; p = q + 1) {
            q = memmem(p, e - p, keys[i], k);

            if (q == NULL) {
                break;
            }

            if (at != NULL) {
                return NULL;
            }

            at = q + k - 1;             /* the value's opening '"' */
        }
    }

    return at;
}


int
or_sse_shape_learn(or_sse_shape_t *sh, const char *name, size_t name_len,
    const char *data, size_t data_len, const or_sse_event_t *ev)
{
    int          complete, measured;
    long         n;
    size_t       prefix, suffix;
    const char  *e, *end, *at;

    if (!ev->content || !ev->progress || ev->finish || ev->refusal
        || ev->truncated || ev->malformed || ev->usage || ev->usage_only
        || ev->status != 0 || name_len > OR_SSE_NAME_MAX)
    {
        return 0;
    }

    if (ev->kind == OR_SSE_EV_TEXT) {
        at = ev->text_at;
        measured = 1;

    } else if ((ev->kind == OR_SSE_EV_TOOL || ev->kind == OR_SSE_EV_REASONING)
               && ev->text_bytes == 0)
    {
        at = or_sse_shape_string(data, data_len, ev);
        measured = 0;

    } else {
        return 0;
    }

    if (at == NULL || at < data || at >= data + data_len) {
        return 0;
    }

    e = data + data_len;
    end = or_json_string_end(at, e);

    if (end == NULL || !or_sse_shape_escapes(at, end)) {
        return 0;
    }

    n = or_sj_strlen(at, e, &complete);

    if (!complete || n <= 0 || (measured && (size_t) n != ev->text_bytes)) {
        return 0;
    }

    prefix = (size_t) (at + 1 - data);
    suffix = (size_t) (e - end);

    if (prefix + suffix > OR_SSE_SHAPE_MAX) {
        return 0;
    }

    memcpy(sh->bytes, data, prefix);
    memcpy(sh->bytes + prefix, end, suffix);
    memcpy(sh->name, name, name_len);
    sh->name_len = name_len;
    sh->prefix = prefix;
    sh->suffix = suffix;
    sh->format = ev->format;
    sh->kind = ev->kind;
    sh->content = ev->content;
    sh->progress = ev->progress;
    sh->measured = measured;

    return 1;
}


int
or_sse_shape_match(const or_sse_shape_t *sh, const char *name,
    size_t name_len, const char *data, size_t data_len, size_t data_total,
    or_sse_event_t *ev)
{
    int          complete;
    long         n;
    const char  *e, *v, *end;

    if (sh->prefix == 0 || data_total != data_len
        || data_len <= sh->prefix + sh->suffix
        || name_len != sh->name_len
        || memcmp(data, sh->bytes, sh->prefix) != 0
        || memcmp(name, sh->name, name_len) != 0)
    {
        return 0;
    }

    e = data + data_len;
    v = data + sh->prefix - 1;
    end = or_run_plain(v + 1, e);

    if (end < e && *end == '"') {
        /* no escapes: the text's bytes are its decoded bytes */
        n = end - (v + 1);
        end++;

        if ((size_t) (e - end) != sh->suffix || n <= 0
            || memcmp(end, sh->bytes + sh->prefix, sh->suffix) != 0)
        {
            return 0;
        }

    } else {
        end = or_json_string_end(v, e);

        if (end == NULL || (size_t) (e - end) != sh->suffix
            || memcmp(end, sh->bytes + sh->prefix, sh->suffix) != 0
            || !or_sse_shape_escapes(v, end))
        {
            return 0;
        }

        n = or_sj_strlen(v, e, &complete);

        if (!complete || n <= 0) {
            return 0;
        }
    }

    ev->kind = sh->kind;
    ev->format = sh->format;
    ev->content = sh->content;
    ev->progress = sh->progress;
    ev->finish = 0;
    ev->refusal = 0;
    ev->truncated = 0;
    ev->malformed = 0;
    ev->usage_only = 0;
    ev->usage = 0;
    ev->text_bytes = sh->measured ? (size_t) n : 0;
    ev->text_at = sh->measured ? v : NULL;
    ev->status = 0;
    ev->data_total = data_total;
    ev->data_len = data_len;

    return 1;
}


static int
or_sse_contains(const char *s, size_t len, const char *lit)
{
    return or_memcasemem(s, len, lit, strlen(lit)) != NULL;
}


/* a numeric JSON field "field": NNN anywhere in data, 400..599, else 0 */

static int
or_sse_field_number(const char *data, size_t len, const char *field)
{
    int          n;
    size_t       flen;
    const char  *p, *last;

    flen = strlen(field);
    last = data + len;
    p = data;

    while (p < last) {
        p = or_memcasemem(p, last - p, field, flen);
        if (p == NULL) {
            return 0;
        }

        p += flen;

        while (p < last && (*p == ' ' || *p == ':' || *p == '\t')) {
            p++;
        }

        n = 0;

        while (p < last && *p >= '0' && *p <= '9' && n < 1000) {
            n = n * 10 + (*p - '0');
            p++;
        }

        if (n >= 400 && n <= 599) {
            return n;
        }
    }

    return 0;
}


int
or_sse_error_status(const char *data, size_t len)
{
    int                          n;
    const or_sse_type_status_t  *t;

    if (data == NULL) {
        return 502;
    }

    n = or_sse_field_number(data, len, "\"status\"");
    if (n) {
        return n;
    }

    n = or_sse_field_number(data, len, "\"code\"");
    if (n) {
        return n;
    }

    /* quota text (escapes decoded) is a quota error whatever its type */

    if (or_classify_quota_text(data, len)) {
        return 429;
    }

    for (t = or_sse_types; t->type; t++) {
        if (or_sse_contains(data, len, t->type)) {
            return t->status;
        }
    }

    return 502;
}


size_t
or_sse_error_message(const char *data, size_t len, char *out, size_t size)
{
    const char  *p, *e, *v, *err;

    if (size == 0) {
        return 0;
    }

    out[0] = '\0';

    if (data == NULL) {
        return 0;
    }

    e = data + len;
    p = or_json_ws(data, e);

    err = or_sj_get(p, e, "error");

    if (err != NULL && *err == '"') {
        return or_sj_decode(err, e, out, size);
    }

    v = or_sj_get(err, e, "message");

    if (v == NULL) {
        v = or_sj_get(p, e, "message");
    }

    if (v == NULL) {
        v = or_sj_get(or_sj_get(or_sj_get(p, e, "response"), e, "error"), e,
                      "message");
    }

    if (v == NULL || *v != '"') {
        return 0;
    }

    return or_sj_decode(v, e, out, size);
}


/* a request path's length without its query and trailing slashes */
static size_t
or_sse_path_len(const char *path, size_t len)
{
    const char  *q;

    q = memchr(path, '?', len);

    if (q != NULL) {
        len = q - path;
    }

    while (len > 0 && path[len - 1] == '/') {
        len--;
    }

    return len;
}


or_sse_format_e
or_sse_format_of_path(const char *path, size_t len)
{
    if (path == NULL) {
        return OR_SSE_FMT_CHAT;
    }

    len = or_sse_path_len(path, len);

    if (or_sse_suffix(path, len, "/messages")) {
        return OR_SSE_FMT_ANTHROPIC;
    }

    if (or_sse_suffix(path, len, "/responses")) {
        return OR_SSE_FMT_RESPONSES;
    }

    return OR_SSE_FMT_CHAT;
}


or_api_e
or_api_of_path(const char *path, size_t len)
{
    if (path == NULL) {
        return OR_API_OPENAI;
    }

    len = or_sse_path_len(path, len);

    if (or_sse_suffix(path, len, "/messages")
        || or_sse_suffix(path, len, "/messages/count_tokens"))
    {
        return OR_API_ANTHROPIC;
    }

    if (or_sse_suffix(path, len, ":generateContent")
        || or_sse_suffix(path, len, ":streamGenerateContent")
        || or_sse_suffix(path, len, ":countTokens"))
    {
        return OR_API_GEMINI;
    }

    return OR_API_OPENAI;
}


int
or_api_path_model(const char *path, size_t len, size_t *start, size_t *end)
{
    size_t       i, m, colon;
    const char  *q;

    if (path == NULL || or_api_of_path(path, len) != OR_API_GEMINI) {
        return 0;
    }

    q = memchr(path, '?', len);

    if (q != NULL) {
        len = q - path;
    }

    while (len > 0 && path[len - 1] == '/') {
        len--;
    }

    /* the method's ":" (the last one: a method name has none) */

    for (colon = len; colon > 0 && path[colon - 1] != ':'; colon--) {
        /* void */
    }

    if (colon == 0) {
        return 0;
    }

    colon--;

    if (colon >= 7 && memcmp(path, "models/", 7) == 0) {
        m = 7;

    } else {
        m = 0;

        for (i = 0; i + 8 <= colon; i++) {
            if (memcmp(path + i, "/models/", 8) == 0) {
                m = i + 8;
                break;
            }
        }

        if (m == 0) {
            return 0;
        }
    }

    *start = m;
    *end = colon;

    return 1;
}


or_api_e
or_api_of_provider(const char *url, size_t len, int anthropic_header)
{
    size_t       hlen;
    const char  *host, *path, *p, *e;

    if (anthropic_header) {
        return OR_API_ANTHROPIC;
    }

    if (url == NULL) {
        return OR_API_OPENAI;
    }

    e = url + len;
    p = memchr(url, ':', len);
    host = (p != NULL && e - p >= 3 && p[1] == '/' && p[2] == '/')
           ? p + 3 : url;

    for (path = host; path < e && *path != '/'; path++) {
        /* void */
    }

    hlen = path - host;

    while (e > path && e[-1] == '/') {
        e--;
    }

    if (or_sse_contains(host, hlen, "anthropic")
        || or_sse_suffix(path, e - path, "/anthropic")
        || or_sse_suffix(path, e - path, "/anthropic/v1"))
    {
        return OR_API_ANTHROPIC;
    }

    if (or_sse_contains(host, hlen, "generativelanguage.googleapis.com")
        && !or_sse_contains(path, e - path, "/openai"))
    {
        return OR_API_GEMINI;
    }

    return OR_API_OPENAI;
}


const char *
or_sse_kind_name(or_sse_kind_e kind)
{
    static const char  *names[] = {
        "none", "heartbeat", "meta", "text", "reasoning", "tool", "other",
        "error", "done"
    };

    return ((unsigned) kind < sizeof(names) / sizeof(names[0]))
           ? names[kind] : "unknown";
}


const char *
or_sse_format_name(or_sse_format_e fmt)
{
    static const char  *names[] = {
        "unknown", "chat", "responses", "anthropic"
    };

    return ((unsigned) fmt < sizeof(names) / sizeof(names[0]))
           ? names[fmt] : "unknown";
}
