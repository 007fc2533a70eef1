/*
 * Copyright (C) ngx_omniroute authors
 */


#include <string.h>

#include "or_lease.h"


static int or_lease_b64_value(int c);
static int or_lease_number(const char *s, size_t len, uint64_t *v);
static char *or_lease_decimal(char *p, uint64_t v);


static const char  or_lease_b64[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";


int
or_lease_active(const or_lease_t *l, or_msec_t now)
{
    return l != NULL && l->state == OR_LEASE_ACTIVE && l->expires_at > now;
}


int
or_lease_of(const or_lease_t *l, const uint8_t *owner)
{
    return l != NULL && l->state != OR_LEASE_NONE
           && memcmp(l->owner, owner, OR_LEASE_HASH_LEN) == 0;
}


or_lease_rc_e
or_lease_check(const or_lease_t *l, const uint8_t *owner, const char *key,
    size_t key_len, uint64_t generation, or_msec_t now)
{
    if (l == NULL || l->state != OR_LEASE_ACTIVE || !or_lease_of(l, owner)
        || l->key_len != key_len || memcmp(l->key, key, key_len) != 0)
    {
        return OR_LEASE_NOT_FOUND;
    }

    if (l->generation != generation) {
        return OR_LEASE_STALE;
    }

    if (l->expires_at <= now) {
        return OR_LEASE_EXPIRED;
    }

    return OR_LEASE_OK;
}


or_lease_rc_e
or_lease_dispatch(const or_lease_t *conn_lease, const uint8_t *owner,
    const char *key, size_t key_len, uint64_t generation, or_msec_t now,
    or_msec_t *retry)
{
    *retry = 0;

    if (owner != NULL) {
        return or_lease_check(conn_lease, owner, key, key_len, generation,
                              now)
               == OR_LEASE_OK ? OR_LEASE_OK : OR_LEASE_LOST;
    }

    if (or_lease_active(conn_lease, now)) {
        *retry = conn_lease->expires_at - now;
        return OR_LEASE_HELD;
    }

    return OR_LEASE_OK;
}


int
or_lease_pick(const or_lease_slot_t *slots, size_t n, const uint8_t *owner,
    or_msec_t now, or_msec_t *retry)
{
    int        pass, own;
    size_t     i;
    or_msec_t  earliest;

    /* pass 0: eligible, own; 1: eligible, free; 2, 3: the same, not */

    for (pass = 0; pass < 4; pass++) {
        for (i = 0; i < n; i++) {
            if ((slots[i].eligible != 0) != (pass < 2)) {
                continue;
            }

            own = owner != NULL && or_lease_active(slots[i].lease, now)
                  && or_lease_of(slots[i].lease, owner);

            if (pass % 2 == 0 ? own
                              : !or_lease_active(slots[i].lease, now))
            {
                *retry = 0;
                return (int) i;
            }
        }
    }

    earliest = -1;

    for (i = 0; i < n; i++) {
        if (or_lease_active(slots[i].lease, now)
            && (earliest < 0 || slots[i].lease->expires_at - now < earliest))
        {
            earliest = slots[i].lease->expires_at - now;
        }
    }

    *retry = earliest < 0 ? 0 : earliest;

    return -1;
}


int
or_lease_bind(or_lease_t *l, const uint8_t *owner, const char *key,
    size_t key_len, const char *conn, size_t conn_len,
    uint64_t prev_generation, or_msec_t acquired_at, or_msec_t now,
    or_msec_t ttl)
{
    uint64_t  version;

    if (key_len == 0 || key_len > OR_LEASE_ID_MAX || conn_len == 0
        || conn_len > OR_LEASE_ID_MAX || prev_generation >= OR_LEASE_GEN_MAX)
    {
        return -1;
    }

    version = l->version;

    memset(l, 0, sizeof(or_lease_t));

    memcpy(l->owner, owner, OR_LEASE_HASH_LEN);
    l->generation = prev_generation + 1;
    l->version = version;
    l->acquired_at = prev_generation ? acquired_at : now;
    l->bound_at = now;
    l->expires_at = or_msec_add(now, ttl);
    l->state = OR_LEASE_ACTIVE;
    l->key_len = (uint16_t) key_len;
    l->conn_len = (uint16_t) conn_len;
    memcpy(l->key, key, key_len);
    memcpy(l->conn, conn, conn_len);

    return 0;
}


void
or_lease_renew(or_lease_t *l, or_msec_t now, or_msec_t ttl)
{
    l->expires_at = or_msec_add(now, ttl);
}


void
or_lease_end(or_lease_t *l)
{
    l->state = OR_LEASE_GONE;
}


void
or_lease_token_encode(const uint8_t *raw, char *out)
{
    char      *p;
    size_t     i;
    uint32_t   v;

    p = out;
    memcpy(p, OR_LEASE_TOKEN_PREFIX, sizeof(OR_LEASE_TOKEN_PREFIX) - 1);
    p += sizeof(OR_LEASE_TOKEN_PREFIX) - 1;

    for (i = 0; i + 3 <= OR_LEASE_TOKEN_RAW; i += 3) {
        v = (uint32_t) raw[i] << 16 | (uint32_t) raw[i + 1] << 8
            | raw[i + 2];
        *p++ = or_lease_b64[v >> 18 & 0x3f];
        *p++ = or_lease_b64[v >> 12 & 0x3f];
        *p++ = or_lease_b64[v >> 6 & 0x3f];
        *p++ = or_lease_b64[v & 0x3f];
    }

    /* 32 = 30 + 2: the last two bytes are three characters */

    v = (uint32_t) raw[i] << 16 | (uint32_t) raw[i + 1] << 8;
    *p++ = or_lease_b64[v >> 18 & 0x3f];
    *p++ = or_lease_b64[v >> 12 & 0x3f];
    *p++ = or_lease_b64[v >> 6 & 0x3f];

    *p = '\0';
}


static int
or_lease_b64_value(int c)
{
    if (c >= 'A' && c <= 'Z') {
        return c - 'A';
    }

    if (c >= 'a' && c <= 'z') {
        return c - 'a' + 26;
    }

    if (c >= '0' && c <= '9') {
        return c - '0' + 52;
    }

    if (c == '-') {
        return 62;
    }

    if (c == '_') {
        return 63;
    }

    return -1;
}


int
or_lease_token_valid(const char *s, size_t len)
{
    int     v;
    size_t  i, plen;

    v = 0;
    plen = sizeof(OR_LEASE_TOKEN_PREFIX) - 1;

    if (len != OR_LEASE_TOKEN_LEN
        || memcmp(s, OR_LEASE_TOKEN_PREFIX, plen) != 0)
    {
        return 0;
    }

    for (i = plen; i < len; i++) {
        v = or_lease_b64_value((unsigned char) s[i]);

        if (v < 0) {
            return 0;
        }
    }

    /* the last character carries 4 bits: its 2 low bits must be 0 */

    return (v & 3) == 0;
}


int
or_lease_parse_generation(const char *s, size_t len, uint64_t *gen)
{
    size_t    i;
    uint64_t  n;

    if (len == 0 || len > 16 || s[0] == '0') {
        return 0;
    }

    n = 0;

    for (i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return 0;
        }

        n = n * 10 + (uint64_t) (s[i] - '0');
    }

    if (n > OR_LEASE_GEN_MAX) {
        return 0;
    }

    *gen = n;

    return 1;
}


void
or_lease_hex(const uint8_t *hash, char *out)
{
    size_t  i;

    static const char  hex[] = "0123456789abcdef";

    for (i = 0; i < OR_LEASE_HASH_LEN; i++) {
        out[2 * i] = hex[hash[i] >> 4];
        out[2 * i + 1] = hex[hash[i] & 0xf];
    }

    out[2 * OR_LEASE_HASH_LEN] = '\0';
}


static int
or_lease_number(const char *s, size_t len, uint64_t *v)
{
    size_t    i;
    uint64_t  n;

    if (len == 0 || len > OR_LEASE_NUM_DIGITS || (s[0] == '0' && len > 1)) {
        return 0;
    }

    n = 0;

    for (i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return 0;
        }

        n = n * 10 + (uint64_t) (s[i] - '0');
    }

    *v = n;

    return 1;
}


const char *
or_lease_decode(const char *s, size_t len, or_lease_t *l)
{
    size_t       i, k, n[10];
    uint64_t     v[10];
    const char  *p, *last, *f[10];

    p = s;
    last = s + len;

    for (i = 0; i < 10; i++) {
        if (i > 0) {
            if (p == last || *p != ' ') {
                return "framing";
            }

            p++;
        }

        f[i] = p;

        while (p < last && *p != ' ') {
            p++;
        }

        n[i] = (size_t) (p - f[i]);
    }

    if (p != last) {
        return "framing";
    }

    if (n[0] != 1 || f[0][0] != '1') {
        return "format version";
    }

    memset(l, 0, sizeof(or_lease_t));

    if (n[1] != 2 * OR_LEASE_HASH_LEN) {
        return "owner";
    }

    for (k = 0; k < n[1]; k++) {
        if (!((f[1][k] >= '0' && f[1][k] <= '9')
              || (f[1][k] >= 'a' && f[1][k] <= 'f')))
        {
            return "owner";
        }

        v[0] = (uint64_t) (f[1][k] <= '9' ? f[1][k] - '0'
                                          : f[1][k] - 'a' + 10);
        l->owner[k / 2] |= (uint8_t) (k % 2 ? v[0] : v[0] << 4);
    }

    for (i = 2; i < 4; i++) {
        if (n[i] == 0 || n[i] > OR_LEASE_ID_MAX) {
            return i == 2 ? "key" : "connection";
        }

        for (k = 0; k < n[i]; k++) {
            if (f[i][k] <= ' ' || f[i][k] >= 0x7f) {
                return i == 2 ? "key" : "connection";
            }
        }
    }

    l->key_len = (uint16_t) n[2];
    memcpy(l->key, f[2], n[2]);
    l->conn_len = (uint16_t) n[3];
    memcpy(l->conn, f[3], n[3]);

    for (i = 4; i < 10; i++) {
        if (!or_lease_number(f[i], n[i], &v[i])) {
            return "number";
        }
    }

    if (v[9] != 1 && v[9] != 2) {
        return "state";
    }

    l->generation = v[4];
    l->version = v[5];
    l->acquired_at = (or_msec_t) v[6];
    l->bound_at = (or_msec_t) v[7];
    l->expires_at = (or_msec_t) v[8];
    l->state = v[9] == 1 ? OR_LEASE_ACTIVE : OR_LEASE_GONE;

    return NULL;
}


static char *
or_lease_decimal(char *p, uint64_t v)
{
    char    buf[20];
    size_t  n;

    n = 0;

    do {
        buf[n++] = (char) ('0' + v % 10);
        v /= 10;
    } while (v);

    while (n) {
        *p++ = buf[--n];
    }

    return p;
}


size_t
or_lease_encode(const or_lease_t *l, char *out)
{
    char  *p;

    p = out;
    *p++ = '1';
    *p++ = ' ';
    or_lease_hex(l->owner, p);
    p += 2 * OR_LEASE_HASH_LEN;
    *p++ = ' ';
    memcpy(p, l->key, l->key_len);
    p += l->key_len;
    *p++ = ' ';
    memcpy(p, l->conn, l->conn_len);
    p += l->conn_len;
    *p++ = ' ';
    p = or_lease_decimal(p, l->generation);
    *p++ = ' ';
    p = or_lease_decimal(p, l->version);
    *p++ = ' ';
    p = or_lease_decimal(p, (uint64_t) l->acquired_at);
    *p++ = ' ';
    p = or_lease_decimal(p, (uint64_t) l->bound_at);
    *p++ = ' ';
    p = or_lease_decimal(p, (uint64_t) l->expires_at);
    *p++ = ' ';
    *p++ = l->state == OR_LEASE_ACTIVE ? '1' : '2';

    return (size_t) (p - out);
}


const char *
or_lease_valid(const or_lease_t *l, or_msec_t now, or_msec_t ttl_max)
{
    uint64_t   vmax;
    or_msec_t  ahead;

    ahead = or_msec_add(now, OR_LEASE_CLOCK_SLACK);

    if (l->generation == 0 || l->generation > OR_LEASE_GEN_MAX) {
        return "generation";
    }

    if (l->acquired_at > l->bound_at || l->bound_at > l->expires_at) {
        return "times";
    }

    if (l->bound_at > ahead) {
        return "bound_at";
    }

    if (l->expires_at > or_msec_add(ahead, ttl_max)) {
        return "expires_at";
    }

    /* versions are Redis's microseconds (ms * 1000) of the change */

    vmax = ahead < 0 ? 0
           : (uint64_t) ahead > OR_LEASE_GEN_MAX / 1000 ? OR_LEASE_GEN_MAX
           : (uint64_t) ahead * 1000;

    if (l->version == 0 || l->version > vmax) {
        return "version";
    }

    return NULL;
}
