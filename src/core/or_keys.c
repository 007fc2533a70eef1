/*
 * Copyright (C) ngx_omniroute authors
 */


#include <string.h>

#include "or_keys.h"


static int or_keys_hex_digit(int c);


int
or_keys_match_name(const or_keys_str_t *pats, size_t n, const char *name,
    size_t len)
{
    size_t  i, plen;

    if (n == 0) {
        return 1;
    }

    for (i = 0; i < n; i++) {
        plen = pats[i].len;

        if (plen == 0) {
            continue;
        }

        if (pats[i].data[plen - 1] == '*') {
            plen--;

            if (len >= plen && memcmp(pats[i].data, name, plen) == 0) {
                return 1;
            }

            continue;
        }

        if (plen == len && memcmp(pats[i].data, name, len) == 0) {
            return 1;
        }
    }

    return 0;
}


int
or_keys_match_path(const or_keys_str_t *prefixes, size_t n, const char *path,
    size_t len)
{
    size_t  i, plen;

    if (n == 0) {
        return 1;
    }

    for (i = 0; i < n; i++) {
        plen = prefixes[i].len;

        if (plen == 0 || plen > len
            || memcmp(prefixes[i].data, path, plen) != 0)
        {
            continue;
        }

        if (prefixes[i].data[plen - 1] == '/' || plen == len
            || path[plen] == '/')
        {
            return 1;
        }
    }

    return 0;
}


int
or_keys_bearer(const char *value, size_t len, const char **token,
    size_t *token_len)
{
    size_t       i;
    const char  *p, *last;
    static const char  scheme[] = "bearer";

    if (len < sizeof(scheme)) {
        return 0;
    }

    for (i = 0; i < sizeof(scheme) - 1; i++) {
        if ((value[i] | 0x20) != scheme[i]) {
            return 0;
        }
    }

    if (value[i] != ' ' && value[i] != '\t') {
        return 0;
    }

    p = value + i;
    last = value + len;

    while (p < last && (*p == ' ' || *p == '\t')) {
        p++;
    }

    while (last > p && (last[-1] == ' ' || last[-1] == '\t')) {
        last--;
    }

    if (p == last) {
        return 0;
    }

    *token = p;
    *token_len = (size_t) (last - p);

    return 1;
}


int
or_keys_valid_id(const char *s, size_t len)
{
    size_t  i;

    if (len == 0 || len > OR_KEYS_ID_MAX) {
        return 0;
    }

    for (i = 0; i < len; i++) {
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z')
              || (s[i] >= '0' && s[i] <= '9') || s[i] == '-' || s[i] == '_'
              || s[i] == '.'))
        {
            return 0;
        }
    }

    return 1;
}


int
or_keys_valid_pattern(const char *s, size_t len)
{
    size_t  i;

    if (len == 0 || len > 255) {
        return 0;
    }

    for (i = 0; i < len; i++) {
        if (s[i] == '*') {
            if (i != len - 1) {
                return 0;
            }

            continue;
        }

        /* model names may carry "/", ":" and "@" (provider/model:tag) */

        if ((unsigned char) s[i] <= ' ' || (unsigned char) s[i] >= 0x7f
            || s[i] == ',' || s[i] == '"' || s[i] == '\\')
        {
            return 0;
        }
    }

    return 1;
}


int
or_keys_valid_path(const char *s, size_t len)
{
    size_t  i;

    if (len == 0 || len > 255 || s[0] != '/') {
        return 0;
    }

    for (i = 0; i < len; i++) {
        if ((unsigned char) s[i] <= ' ' || (unsigned char) s[i] >= 0x7f
            || s[i] == '?' || s[i] == '#' || s[i] == '*' || s[i] == ','
            || s[i] == '%' || s[i] == '\\')
        {
            return 0;
        }
    }

    return 1;
}


int
or_keys_valid_secret(const char *s, size_t len)
{
    size_t  i;

    if (len < OR_KEYS_SECRET_MIN || len > OR_KEYS_SECRET_MAX) {
        return 0;
    }

    for (i = 0; i < len; i++) {
        if ((unsigned char) s[i] <= ' ' || (unsigned char) s[i] >= 0x7f) {
            return 0;
        }
    }

    return 1;
}


static int
or_keys_hex_digit(int c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }

    c |= 0x20;

    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }

    return -1;
}


int
or_keys_hex32(const char *s, size_t len, uint8_t *out)
{
    int     hi, lo;
    size_t  i;

    if (len != 64) {
        return 0;
    }

    for (i = 0; i < 32; i++) {
        hi = or_keys_hex_digit((unsigned char) s[2 * i]);
        lo = or_keys_hex_digit((unsigned char) s[2 * i + 1]);

        if (hi < 0 || lo < 0) {
            return 0;
        }

        out[i] = (uint8_t) (hi << 4 | lo);
    }

    return 1;
}
