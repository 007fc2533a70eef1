/*
 * Copyright (C) ngx_omniroute authors
 */


#include <string.h>

#include "or_sse.h"
#include "or_hint.h"


static const char *or_sse_line_end(const char *p, const char *last);
static int or_sse_status(const char *data, size_t len);
static int or_sse_has(const char *data, size_t len, const char *s);
static int or_sse_field_number(const char *data, size_t len,
    const char *field);
static int or_sse_is_error(const char *data, size_t len);


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


static const char *
or_sse_line_end(const char *p, const char *last)
{
    while (p < last && *p != '\n' && *p != '\r') {
        p++;
    }

    return p;
}


static int
or_sse_has(const char *data, size_t len, const char *s)
{
    return or_memcasemem(data, len, s, strlen(s)) != NULL;
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


/* {"error": ...} (OpenAI-compatible) or {"type":"error", ...} */

static int
or_sse_is_error(const char *data, size_t len)
{
    const char  *p, *last;

    p = data;
    last = data + len;

    if (p == last || *p != '{') {
        return 0;
    }

    p++;

    while (p < last && (*p == ' ' || *p == '\t')) {
        p++;
    }

    if ((size_t) (last - p) >= 7 && memcmp(p, "\"error\"", 7) == 0) {
        return 1;
    }

    return or_sse_has(data, len, "\"type\":\"error\"")
           || or_sse_has(data, len, "\"type\": \"error\"");
}


static int
or_sse_status(const char *data, size_t len)
{
    int                          n;
    const or_sse_type_status_t  *t;

    n = or_sse_field_number(data, len, "\"status\"");
    if (n) {
        return n;
    }

    n = or_sse_field_number(data, len, "\"code\"");
    if (n) {
        return n;
    }

    for (t = or_sse_types; t->type; t++) {
        if (or_sse_has(data, len, t->type)) {
            return t->status;
        }
    }

    return 502;
}


or_sse_first_e
or_sse_first_event(const char *buf, size_t len, or_sse_error_t *err)
{
    int          is_error_event;
    size_t       n;
    const char  *p, *last, *eol, *data, *data_end, *v;

    p = buf;
    last = buf + len;

    is_error_event = 0;
    data = NULL;
    data_end = NULL;

    while (p < last) {
        eol = or_sse_line_end(p, last);

        if (eol == last) {
            /* an incomplete line */
            return OR_SSE_MORE;
        }

        n = eol - p;

        /* skip the line terminator: \n, \r or \r\n */

        if (*eol == '\r' && eol + 1 < last && eol[1] == '\n') {
            eol += 2;

        } else if (*eol == '\r' && eol + 1 == last) {
            return OR_SSE_MORE;

        } else {
            eol++;
        }

        if (n == 0) {
            /* a blank line ends an event */

            if (data) {
                if (is_error_event || or_sse_is_error(data, data_end - data))
                {
                    err->data = data;
                    err->data_len = data_end - data;
                    err->status = or_sse_status(data, data_end - data);
                    return OR_SSE_ERROR;
                }

                return OR_SSE_CONTENT;
            }

            /* a comment-only or empty event: a heartbeat */
            is_error_event = 0;
            p = eol;
            continue;
        }

        if (*p == ':') {
            p = eol;
            continue;
        }

        if (n >= 6 && memcmp(p, "event:", 6) == 0) {
            v = p + 6;
            while (v < p + n && *v == ' ') {
                v++;
            }

            is_error_event = ((size_t) (p + n - v) == 5
                              && memcmp(v, "error", 5) == 0);

        } else if (n >= 5 && memcmp(p, "data:", 5) == 0) {
            v = p + 5;
            if (v < p + n && *v == ' ') {
                v++;
            }

            if (data == NULL) {
                data = v;
            }

            data_end = p + n;
        }

        p = eol;
    }

    return OR_SSE_MORE;
}
