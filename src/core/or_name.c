/*
 * Copyright (C) ngx_omniroute authors
 */


#include <stdint.h>
#include <string.h>

#include "or_name.h"


static const char  or_name_hex[] = "0123456789abcdef";


or_name_rc_e
or_name_check(const char *s, size_t len, size_t max, size_t *at)
{
    size_t          i, n;
    unsigned char   c;

    if (at) {
        *at = 0;
    }

    if (len == 0) {
        return OR_NAME_EMPTY;
    }

    n = (len < max) ? len : max;

    for (i = 0; i < n; i++) {
        c = (unsigned char) s[i];

        if (c > 0x20 && c < 0x7f) {
            continue;
        }

        if (at) {
            *at = i;
        }

        return (c < 0x20 || c == 0x7f) ? OR_NAME_CONTROL
                                       : OR_NAME_NOT_PRINTABLE;
    }

    if (len > max) {
        if (at) {
            *at = max;
        }

        return OR_NAME_TOO_LONG;
    }

    return OR_NAME_OK;
}


/*
 * Eight bytes at a time (a variable's value is read on every request):
 * a word has a byte below 0x20 when one of (w - 0x20 each) & ~w has its
 * high bit, a DEL when one of w ^ 0x7f each is zero; the rest byte by
 * byte.
 */

#define OR_NAME_ONES   0x0101010101010101ULL
#define OR_NAME_HIGHS  0x8080808080808080ULL

int
or_name_has_control(const char *s, size_t len)
{
    size_t          i;
    uint64_t        w, d;
    unsigned char   c;

    for (i = 0; i + 8 <= len; i += 8) {
        memcpy(&w, s + i, 8);
        d = w ^ (OR_NAME_ONES * 0x7f);

        if ((((w - OR_NAME_ONES * 0x20) & ~w)
             | ((d - OR_NAME_ONES) & ~d)) & OR_NAME_HIGHS)
        {
            return 1;
        }
    }

    for ( /* void */ ; i < len; i++) {
        c = (unsigned char) s[i];

        if (c < 0x20 || c == 0x7f) {
            return 1;
        }
    }

    return 0;
}


const char *
or_name_problem(or_name_rc_e rc)
{
    switch (rc) {

    case OR_NAME_OK:
        return "ok";

    case OR_NAME_EMPTY:
        return "empty";

    case OR_NAME_TOO_LONG:
        return "too long";

    case OR_NAME_CONTROL:
        return "a control character";

    case OR_NAME_NOT_PRINTABLE:
        return "a space or a non-ASCII byte";

    default:
        return "unknown";
    }
}


/* a byte a log line quotes as it is */

static int
or_name_plain(unsigned char c)
{
    return c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
}


size_t
or_name_escaped_len(const char *s, size_t len)
{
    size_t  i, n;

    n = 0;

    for (i = 0; i < len; i++) {
        n += or_name_plain((unsigned char) s[i]) ? 1 : 4;
    }

    return n;
}


size_t
or_name_escape(char *dst, size_t size, const char *s, size_t len)
{
    size_t          i, n;
    unsigned char   c;

    n = 0;

    for (i = 0; i < len; i++) {
        c = (unsigned char) s[i];

        if (or_name_plain(c)) {
            if (n + 1 > size) {
                break;
            }

            dst[n++] = (char) c;
            continue;
        }

        if (n + 4 > size) {
            break;
        }

        dst[n++] = '\\';
        dst[n++] = 'x';
        dst[n++] = or_name_hex[c >> 4];
        dst[n++] = or_name_hex[c & 0xf];
    }

    return n;
}
