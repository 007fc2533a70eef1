/*
 * Copyright (C) ngx_omniroute authors
 *
 * Exclusive session leases (R-LEASE-1..4): one managed client session
 * owns one connection.  A lease binds an owner (the SHA-256 of an opaque
 * token "vlo_" + 43 base64url characters of 32 CSPRNG bytes, which only
 * the client knows), the client key that acquired it and a connection,
 * with a generation (a fencing token: every (re)binding increments it)
 * and an expiry.  Plain C, no nginx; the record is a fixed-size POD kept
 * twice in the shared zone (by connection and by owner) and in Redis.
 *
 * Lifecycle:
 *
 *   acquire            a new owner: the first connection of the key's
 *                      allowed ones that no other active lease holds
 *                      (eligible ones first), generation 1
 *   acquire + owner    a rebinding (the same owner, its generation
 *                      given): the owner's current connection if it is
 *                      still its own and eligible, else another free one;
 *                      generation + 1; allowed after expiry too
 *   renew              the same binding, a later expiry
 *   release            the lease ends; its connection is free
 *
 * What a presented (owner, key, generation) gets, or_lease_check():
 * the first rule that matches.
 *
 *   no record, a released one, another owner or key   OR_LEASE_NOT_FOUND
 *   another generation                                 OR_LEASE_STALE
 *   expires_at <= now                                  OR_LEASE_EXPIRED
 *   else                                               OR_LEASE_OK
 *
 * Dispatch, or_lease_dispatch(), with the connection's record: a managed
 * request (its owner given) may use only a connection whose active lease
 * is its own, with its key and generation (else OR_LEASE_LOST); any other
 * request may use a connection that no active lease holds (else
 * OR_LEASE_HELD, *retry the ms until that lease expires).
 *
 * Versions order the changes of one lease record: the zone applies a
 * record from Redis only when its version is newer, so a late message
 * never brings back what a later change removed (a release leaves a
 * tombstone: state OR_LEASE_GONE).
 */

#ifndef _OR_LEASE_H_INCLUDED_
#define _OR_LEASE_H_INCLUDED_


#include "or_types.h"


#define OR_LEASE_ID_MAX        64       /* key and connection ids, bytes */
#define OR_LEASE_HASH_LEN      32       /* SHA-256 of the owner token */
#define OR_LEASE_TOKEN_RAW     32       /* CSPRNG bytes of a token */
#define OR_LEASE_TOKEN_B64     43       /* their base64url, no padding */
#define OR_LEASE_TOKEN_PREFIX  "vlo_"
#define OR_LEASE_TOKEN_LEN     47       /* "vlo_" + 43 */
#define OR_LEASE_GEN_MAX       9007199254740991ULL    /* 2^53 - 1 */

/* a lease line of Redis: 10 fields, the longest of each */
#define OR_LEASE_LINE_MAX      (2 + 2 * OR_LEASE_HASH_LEN + 1             \
                                + 2 * (OR_LEASE_ID_MAX + 1) + 5 * 17 + 1)
#define OR_LEASE_NUM_DIGITS    16       /* OR_LEASE_GEN_MAX has 16 */

/*
 * How far ahead of Redis's clock (as this node knows it) a line's times
 * may be: the error of that knowledge (a reply's transit, drift between
 * two TIME reads); a version is ms * 1000 of the change.
 */
#define OR_LEASE_CLOCK_SLACK   (30 * 1000)


typedef enum {
    OR_LEASE_NONE = 0,                  /* a zeroed record: no lease */
    OR_LEASE_ACTIVE,
    OR_LEASE_GONE                       /* released or revoked */
} or_lease_state_e;


typedef enum {
    OR_LEASE_OK = 0,
    OR_LEASE_NOT_FOUND,
    OR_LEASE_STALE,
    OR_LEASE_EXPIRED,
    OR_LEASE_CAPACITY,                  /* every connection is held */
    OR_LEASE_HELD,                      /* held by another lease */
    OR_LEASE_LOST                       /* no longer this owner's */
} or_lease_rc_e;


typedef struct {
    uint8_t      owner[OR_LEASE_HASH_LEN];
    uint64_t     generation;
    uint64_t     version;
    or_msec_t    acquired_at;           /* first binding of the owner */
    or_msec_t    bound_at;              /* this generation's binding */
    or_msec_t    expires_at;
    uint32_t     state;                 /* or_lease_state_e */
    uint16_t     key_len;
    uint16_t     conn_len;
    char         key[OR_LEASE_ID_MAX];
    char         conn[OR_LEASE_ID_MAX];
} or_lease_t;


/* a connection an acquire may bind: its lease record and eligibility */
typedef struct {
    const or_lease_t  *lease;           /* NULL: none */
    int                eligible;        /* no breaker or cooldown on it */
} or_lease_slot_t;


/* 1: an active lease that has not expired */
int or_lease_active(const or_lease_t *l, or_msec_t now);

/* 1: the record is of this owner (whatever its state) */
int or_lease_of(const or_lease_t *l, const uint8_t *owner);

or_lease_rc_e or_lease_check(const or_lease_t *l, const uint8_t *owner,
    const char *key, size_t key_len, uint64_t generation, or_msec_t now);

/*
 * owner NULL: an unmanaged request; else a managed one with key and
 * generation.  OR_LEASE_OK, OR_LEASE_HELD (*retry set) or OR_LEASE_LOST.
 */
or_lease_rc_e or_lease_dispatch(const or_lease_t *conn_lease,
    const uint8_t *owner, const char *key, size_t key_len,
    uint64_t generation, or_msec_t now, or_msec_t *retry);

/*
 * The slot an acquire binds, in this order: eligible and the owner's own
 * (a rebinding keeps its connection), eligible and free, not eligible
 * and its own, not eligible and free; slot order within each.  -1 when
 * every slot is held by another active lease (*retry: ms until the
 * earliest of them expires).  owner NULL: a new owner.
 */
int or_lease_pick(const or_lease_slot_t *slots, size_t n,
    const uint8_t *owner, or_msec_t now, or_msec_t *retry);

/*
 * (Re)binds: *l becomes the active lease of owner, key and conn with
 * generation prev_generation + 1, bound now until now + ttl;
 * acquired_at is kept for a rebinding (prev_generation > 0).  Returns 0,
 * or -1 for an id too long or a generation past OR_LEASE_GEN_MAX.
 */
int or_lease_bind(or_lease_t *l, const uint8_t *owner, const char *key,
    size_t key_len, const char *conn, size_t conn_len,
    uint64_t prev_generation, or_msec_t acquired_at, or_msec_t now,
    or_msec_t ttl);

void or_lease_renew(or_lease_t *l, or_msec_t now, or_msec_t ttl);

/* the lease ends: a tombstone (its version is the caller's) */
void or_lease_end(or_lease_t *l);

/* "vlo_" + base64url(raw), NUL-terminated: out has OR_LEASE_TOKEN_LEN + 1 */
void or_lease_token_encode(const uint8_t *raw, char *out);

/* 1: "vlo_" + 43 base64url characters encoding 32 bytes (canonical) */
int or_lease_token_valid(const char *s, size_t len);

/* 1 and *gen: decimal 1..OR_LEASE_GEN_MAX, digits only, no leading 0 */
int or_lease_parse_generation(const char *s, size_t len, uint64_t *gen);

/* 64 lowercase hex digits of a hash, NUL-terminated: out has 65 */
void or_lease_hex(const uint8_t *hash, char *out);

/*
 * A lease as Redis keeps and publishes it (R-LEASE-3), one line:
 *
 *   1 OWNERHEX KEY CONN GENERATION VERSION ACQUIRED BOUND EXPIRES STATE
 *
 * single spaces; OWNERHEX 64 lowercase hex digits; KEY and CONN 1 to
 * OR_LEASE_ID_MAX visible ASCII bytes; the numbers decimal, no leading
 * 0, at most OR_LEASE_NUM_DIGITS digits; STATE 1 (active) or 2 (ended).
 * Decoding is canonical: a decoded line encodes to the same bytes.
 *
 * or_lease_decode(): NULL and *l, or the name of the field found wrong.
 * or_lease_encode(): the line of l into out (OR_LEASE_LINE_MAX), its
 * length.
 */
const char *or_lease_decode(const char *s, size_t len, or_lease_t *l);
size_t or_lease_encode(const or_lease_t *l, char *out);

/*
 * Why a decoded lease is out of range for a node that takes now for
 * Redis's clock and ttl_max for the longest lease it grants, or NULL:
 * a generation 1..OR_LEASE_GEN_MAX, acquired <= bound <= expires, a
 * binding and a version not ahead of now (OR_LEASE_CLOCK_SLACK), an
 * expiry within ttl_max of now.
 */
const char *or_lease_valid(const or_lease_t *l, or_msec_t now,
    or_msec_t ttl_max);


#endif /* _OR_LEASE_H_INCLUDED_ */
