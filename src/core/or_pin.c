/*
 * Copyright (C) ngx_omniroute authors
 */


#include <string.h>

#include "or_pin.h"


static uint32_t or_pin_hash(const char *s, size_t len);


/* FNV-1a: a tie-breaker, not a security measure */

static uint32_t
or_pin_hash(const char *s, size_t len)
{
    size_t    i;
    uint32_t  h;

    h = 2166136261u;

    for (i = 0; i < len; i++) {
        h ^= (unsigned char) s[i];
        h *= 16777619u;
    }

    return h;
}


const char *
or_pin_conn(const or_pin_t *pin, or_msec_t now, size_t *len)
{
    if (pin->conn_len == 0 || pin->conn_len > OR_PIN_CONN_MAX
        || pin->until <= now)
    {
        *len = 0;
        return NULL;
    }

    *len = pin->conn_len;

    return pin->conn;
}


int
or_pin_set(or_pin_t *pin, const char *conn, size_t len, or_msec_t now,
    or_msec_t ttl)
{
    if (len == 0 || len > OR_PIN_CONN_MAX || ttl <= 0) {
        return 0;
    }

    if (ttl > OR_PIN_TTL_MAX_MS) {
        ttl = OR_PIN_TTL_MAX_MS;
    }

    if (pin->conn_len == len && memcmp(pin->conn, conn, len) == 0
        && pin->until > now && pin->until - now > ttl / 2)
    {
        return 0;
    }

    memset(pin, 0, sizeof(or_pin_t));

    pin->set_at = now;
    pin->until = or_msec_add(now, ttl);
    pin->conn_len = (uint16_t) len;
    pin->conn_hash = or_pin_hash(conn, len);
    memcpy(pin->conn, conn, len);

    return 1;
}


const char *
or_pin_valid(const void *value, size_t size, or_msec_t now)
{
    size_t           i;
    const or_pin_t  *pin;

    if (size != sizeof(or_pin_t)) {
        return "size";
    }

    pin = value;

    if (now < 0) {
        now = 0;
    }

    if (pin->conn_len == 0 || pin->conn_len > OR_PIN_CONN_MAX) {
        return "conn_len";
    }

    for (i = 0; i < OR_PIN_CONN_MAX; i++) {
        if ((i < pin->conn_len) != (pin->conn[i] != '\0')) {
            return "conn";
        }
    }

    if (pin->conn_hash != or_pin_hash(pin->conn, pin->conn_len)) {
        return "conn_hash";
    }

    if (pin->reserved != 0) {
        return "reserved";
    }

    if (pin->set_at < 0 || pin->set_at > or_msec_add(now, OR_VALID_SKEW_MS)) {
        return "set_at";
    }

    if (pin->until <= pin->set_at
        || pin->until - pin->set_at > OR_PIN_TTL_MAX_MS)
    {
        return "until";
    }

    return NULL;
}


int
or_pin_merge(or_pin_t *dst, const or_pin_t *src)
{
    int  take;

    if (src->set_at != dst->set_at) {
        take = src->set_at > dst->set_at;

    } else if (src->conn_hash != dst->conn_hash) {
        take = src->conn_hash > dst->conn_hash;

    } else if (src->until != dst->until) {
        take = src->until > dst->until;

    } else {
        /* a hash collision: any total order will do */
        take = memcmp(src, dst, sizeof(or_pin_t)) > 0;
    }

    if (!take) {
        return 0;
    }

    *dst = *src;

    return 1;
}
