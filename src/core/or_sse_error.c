/*
 * Copyright (C) ngx_omniroute authors
 *
 * The in-band terminal error event, written in the client's stream format
 * (Chat Completions, Responses, Anthropic Messages); see or_sse.h.
 */


#include <string.h>

#include "or_sse.h"


static char *or_sse_put(char *p, char *end, const char *s, size_t len);
static char *or_sse_puts(char *p, char *end, const char *s);
static char *or_sse_put_json(char *p, char *end, const char *s, size_t len);
static char *or_sse_limit(char *p, char *end, size_t room);
static char *or_sse_put_int(char *p, char *end, int n);
static const char *or_sse_type_of(or_sse_format_e fmt, int status);


static char *
or_sse_put(char *p, char *end, const char *s, size_t len)
{
    if ((size_t) (end - p) < len) {
        len = end - p;
    }

    memcpy(p, s, len);

    return p + len;
}


static char *
or_sse_puts(char *p, char *end, const char *s)
{
    return or_sse_put(p, end, s, strlen(s));
}


/* a JSON string of plain text s */

static char *
or_sse_put_json(char *p, char *end, const char *s, size_t len)
{
    size_t          i, k;
    unsigned char   c;
    static const char  hex[] = "0123456789abcdef";

    if (p < end) {
        *p++ = '"';
    }

    for (i = 0; i < len && end - p > 7; i++) {
        c = (unsigned char) s[i];

        if (c >= 0xc0) {
            /* a sequence goes whole or not at all */
            for (k = 1; k < 4 && i + k < len
                        && ((unsigned char) s[i + k] & 0xc0) == 0x80; k++)
            {
                /* void */
            }

            if (end - p <= (ptrdiff_t) (7 + k)) {
                break;
            }

            while (k-- > 1) {
                *p++ = s[i++];
            }

            *p++ = s[i];
            continue;
        }

        if (c == '"' || c == '\\') {
            *p++ = '\\';
            *p++ = (char) c;

        } else if (c < 0x20 || c == 0x7f) {
            *p++ = '\\';
            *p++ = 'u';
            *p++ = '0';
            *p++ = '0';
            *p++ = hex[c >> 4];
            *p++ = hex[c & 0xf];

        } else {
            *p++ = (char) c;
        }
    }

    if (p < end) {
        *p++ = '"';
    }

    return p;
}


/* the end of a piece of output of at most room bytes from p */

static char *
or_sse_limit(char *p, char *end, size_t room)
{
    return ((size_t) (end - p) > room) ? p + room : end;
}


static char *
or_sse_put_int(char *p, char *end, int n)
{
    char      tmp[16];
    size_t    i;
    unsigned  u;

    i = sizeof(tmp);
    u = (n < 0) ? (unsigned) -n : (unsigned) n;

    do {
        tmp[--i] = (char) ('0' + u % 10);
        u /= 10;
    } while (u && i > 1);

    if (n < 0) {
        tmp[--i] = '-';
    }

    return or_sse_put(p, end, tmp + i, sizeof(tmp) - i);
}


static const char *
or_sse_type_of(or_sse_format_e fmt, int status)
{
    if (fmt == OR_SSE_FMT_ANTHROPIC) {
        switch (status) {
        case 400:
        case 413:
        case 422:
            return "invalid_request_error";
        case 401:
            return "authentication_error";
        case 402:
        case 403:
            return "permission_error";
        case 404:
            return "not_found_error";
        case 429:
            return "rate_limit_error";
        case 503:
        case 529:
            return "overloaded_error";
        default:
            return "api_error";
        }
    }

    switch (status) {
    case 401:
        return "authentication_error";
    case 402:
    case 403:
        return "permission_error";
    case 404:
        return "not_found_error";
    case 429:
        return "rate_limit_error";
    default:
        return (status >= 400 && status < 500) ? "invalid_request_error"
                                               : "server_error";
    }
}


size_t
or_sse_error_event(char *buf, size_t size, or_sse_format_e fmt, int status,
    const char *code, const char *message, size_t message_len,
    int retry_after_s)
{
    char        *p, *end;
    size_t       room, fixed;
    const char  *type;

    if (buf == NULL || size < 2) {
        return 0;
    }

    if (message == NULL) {
        message = "";
        message_len = 0;
    }

    if (message_len > 512) {
        message_len = 512;

        /* not inside a UTF-8 sequence */
        while (message_len > 0
               && ((unsigned char) message[message_len] & 0xc0) == 0x80)
        {
            message_len--;
        }
    }

    if (code == NULL) {
        code = "error";
    }

    p = buf;
    end = buf + size - 2;       /* room for the blank line */
    type = or_sse_type_of(fmt, status);

    /*
     * What the message may take once escaped (up to 6 bytes a byte), so
     * that the rest of the event still fits: the event is cut short in
     * its message, never in its JSON.  The Responses event holds it twice.
     */

    fixed = 200 + 2 * (strlen(code) + strlen(type));
    room = (size - 2 > fixed) ? (size - 2 - fixed) : 0;

    if (fmt == OR_SSE_FMT_RESPONSES) {
        room /= 2;
    }

    switch (fmt) {

    case OR_SSE_FMT_ANTHROPIC:
        p = or_sse_puts(p, end, "event: error\ndata: {\"type\":\"error\","
                                "\"error\":{\"type\":\"");
        p = or_sse_puts(p, end, type);
        p = or_sse_puts(p, end, "\",\"message\":");
        p = or_sse_put_json(p, or_sse_limit(p, end, room), message,
                                message_len);
        p = or_sse_puts(p, end, "},\"status\":");
        p = or_sse_put_int(p, end, status);
        break;

    case OR_SSE_FMT_RESPONSES:
        p = or_sse_puts(p, end, "event: error\ndata: {\"type\":\"error\","
                                "\"code\":\"");
        p = or_sse_puts(p, end, code);
        p = or_sse_puts(p, end, "\",\"message\":");
        p = or_sse_put_json(p, or_sse_limit(p, end, room), message,
                                message_len);
        p = or_sse_puts(p, end, ",\"param\":null,\"status\":");
        p = or_sse_put_int(p, end, status);
        break;

    default:
        p = or_sse_puts(p, end, "data: {\"error\":{\"message\":");
        p = or_sse_put_json(p, or_sse_limit(p, end, room), message,
                                message_len);
        p = or_sse_puts(p, end, ",\"type\":\"");
        p = or_sse_puts(p, end, type);
        p = or_sse_puts(p, end, "\",\"code\":\"");
        p = or_sse_puts(p, end, code);
        p = or_sse_puts(p, end, "\",\"status\":");
        p = or_sse_put_int(p, end, status);
        break;
    }

    if (retry_after_s >= 0) {
        p = or_sse_puts(p, end, ",\"retry_after\":");
        p = or_sse_put_int(p, end, retry_after_s);
    }

    if (fmt == OR_SSE_FMT_RESPONSES) {
        p = or_sse_puts(p, end, ",\"error\":{\"type\":\"");
        p = or_sse_puts(p, end, type);
        p = or_sse_puts(p, end, "\",\"code\":\"");
        p = or_sse_puts(p, end, code);
        p = or_sse_puts(p, end, "\",\"message\":");
        p = or_sse_put_json(p, or_sse_limit(p, end, room), message,
                                message_len);
        p = or_sse_puts(p, end, "}");
    }

    /* the Chat shape (also the one of an unknown format) nests twice */
    p = or_sse_puts(p, end, (fmt == OR_SSE_FMT_ANTHROPIC
                             || fmt == OR_SSE_FMT_RESPONSES) ? "}" : "}}");

    *p++ = '\n';
    *p++ = '\n';

    return p - buf;
}
