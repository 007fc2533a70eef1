/*
 * Copyright (C) ngx_omniroute authors
 *
 * Session affinity (R-AFF-1): a session key pins a connection for a TTL;
 * the pin is honored while the connection stays eligible, otherwise the
 * session is re-pinned to the connection that served it.  The state is a
 * fixed-size POD (shared memory, Redis); pure functions of (state, now).
 *
 * Merge rule (R-CLUSTER-2), or_pin_merge(): the later pinning (set_at)
 * wins the whole pin; equal set_at: the larger connection hash, then the
 * later expiry, then the larger bytes (a total order: two different pins
 * never tie).  Commutative, associative, idempotent.
 *
 * Validation (or_pin_valid(), see or_types.h): a pin from another node is
 * accepted when its size is sizeof(or_pin_t), conn_len is 1..128 with no
 * NUL inside and only zeros after it, conn_hash is the hash of conn,
 * reserved is 0, set_at is in [0, now + OR_VALID_SKEW_MS] and until is
 * after set_at by at most OR_PIN_TTL_MAX_MS (or_pin_set() caps the TTL).
 */

#ifndef _OR_PIN_H_INCLUDED_
#define _OR_PIN_H_INCLUDED_


#include "or_types.h"


#define OR_PIN_CONN_MAX    128
#define OR_PIN_TTL_MAX_MS  ((or_msec_t) 365 * 86400 * 1000)


typedef struct {
    or_msec_t    set_at;            /* when the session was (re)pinned */
    or_msec_t    until;             /* the pin holds until then */
    uint32_t     conn_hash;
    uint16_t     conn_len;
    uint16_t     reserved;
    char         conn[OR_PIN_CONN_MAX];     /* connection id */
} or_pin_t;


/* the pinned connection while the pin holds, else NULL (*len set) */
const char *or_pin_conn(const or_pin_t *pin, or_msec_t now, size_t *len);

/*
 * Served by conn at now: pin (or re-pin) it for ttl.  A pin to the same
 * connection is only extended once less than half of ttl is left, so a
 * busy session does not rewrite its pin on every request.  Returns 1 when
 * the state changed.
 */
int or_pin_set(or_pin_t *pin, const char *conn, size_t len, or_msec_t now,
    or_msec_t ttl);

const char *or_pin_valid(const void *value, size_t size, or_msec_t now);
int or_pin_merge(or_pin_t *dst, const or_pin_t *src);


#endif /* _OR_PIN_H_INCLUDED_ */
