/*
 * Copyright (C) ngx_omniroute authors
 *
 * R-LEASE-2..4: the lease state machine (acquire, rebinding, renew,
 * release, expiry, generations), dispatch checks, the connection an
 * acquire picks, owner token format and the generation parser; lease
 * lines of Redis decoded and checked as untrusted input (issue 23).
 */


#include "or_test.h"
#include "or_lease.h"


#define A42  "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
#define H64  "5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c"                          \
             "5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c"
#define LINE(rest)  "1 " H64 " lk a1 " rest


static int
decodes(const char *s)
{
    or_lease_t  l;

    return or_lease_decode(s, strlen(s), &l) == NULL;
}


static const char *
valid(const char *s, or_msec_t now)
{
    or_lease_t   l;
    const char  *why;

    why = or_lease_decode(s, strlen(s), &l);

    return why ? why : or_lease_valid(&l, now, 3600000);
}


static void
owner_of(uint8_t *o, int c)
{
    memset(o, c, OR_LEASE_HASH_LEN);
}


int
main(void)
{
    int              i;
    char             tok[OR_LEASE_TOKEN_LEN + 1], hex[65];
    uint8_t          raw[OR_LEASE_TOKEN_RAW], a[32], b[32];
    uint64_t         gen;
    or_msec_t        retry;
    or_lease_t       l, m, n, empty;
    or_lease_slot_t  slots[3];

    owner_of(a, 0xaa);
    owner_of(b, 0xbb);
    memset(&l, 0, sizeof(l));
    memset(&empty, 0, sizeof(empty));

    /* acquire */

    or_is_int(or_lease_bind(&l, a, "k1", 2, "c1", 2, 0, 0, 1000, 60000), 0,
              "R-LEASE-2 acquire binds");
    or_is_int(l.generation, 1, "R-LEASE-2 a new owner starts at generation 1");
    or_is_int(l.acquired_at, 1000, "R-LEASE-2 acquired now");
    or_is_int(l.expires_at, 61000, "R-LEASE-2 until now + ttl");
    or_ok(or_lease_active(&l, 60999), "R-LEASE-2 active before its expiry");
    or_ok(!or_lease_active(&l, 61000), "R-LEASE-2 expired at its expiry");
    or_ok(!or_lease_active(&empty, 0), "R-LEASE-2 an empty record is none");
    or_ok(!or_lease_active(NULL, 0), "R-LEASE-2 no record is none");

    /* check */

    or_is_int(or_lease_check(&l, a, "k1", 2, 1, 2000), OR_LEASE_OK,
              "R-LEASE-3 owner, key and generation match");
    or_is_int(or_lease_check(&l, b, "k1", 2, 1, 2000), OR_LEASE_NOT_FOUND,
              "R-LEASE-3 another owner: not found");
    or_is_int(or_lease_check(&l, a, "k2", 2, 1, 2000), OR_LEASE_NOT_FOUND,
              "R-LEASE-3 another key: not found");
    or_is_int(or_lease_check(&l, a, "k", 1, 1, 2000), OR_LEASE_NOT_FOUND,
              "R-LEASE-3 a key that is a prefix: not found");
    or_is_int(or_lease_check(&l, a, "k1", 2, 2, 2000), OR_LEASE_STALE,
              "R-LEASE-3 another generation: stale");
    or_is_int(or_lease_check(&l, a, "k1", 2, 0, 2000), OR_LEASE_STALE,
              "R-LEASE-3 generation 0: stale");
    or_is_int(or_lease_check(&l, a, "k1", 2, 1, 61000), OR_LEASE_EXPIRED,
              "R-LEASE-3 expired");
    or_is_int(or_lease_check(&l, a, "k1", 2, 2, 61000), OR_LEASE_STALE,
              "R-LEASE-3 stale before expired");
    or_is_int(or_lease_check(NULL, a, "k1", 2, 1, 0), OR_LEASE_NOT_FOUND,
              "R-LEASE-3 no record: not found");

    /* renew */

    or_lease_renew(&l, 30000, 60000);
    or_is_int(l.expires_at, 90000, "R-LEASE-2 renew: a later expiry");
    or_is_int(l.generation, 1, "R-LEASE-2 renew keeps the generation");

    /* rebinding */

    m = l;
    or_is_int(or_lease_bind(&m, a, "k1", 2, "c2", 2, m.generation,
                            m.acquired_at, 40000, 60000), 0,
              "R-LEASE-2 a rebinding");
    or_is_int(m.generation, 2, "R-LEASE-2 the generation increments");
    or_is_int(m.acquired_at, 1000, "R-LEASE-2 acquired_at is kept");
    or_is_int(m.bound_at, 40000, "R-LEASE-2 bound now");
    or_ok(m.conn_len == 2 && memcmp(m.conn, "c2", 2) == 0,
          "R-LEASE-2 to the new connection");
    or_is_int(or_lease_check(&m, a, "k1", 2, 1, 41000), OR_LEASE_STALE,
              "R-LEASE-3 the old generation is stale after a rebinding");

    /* release */

    n = m;
    or_lease_end(&n);
    or_ok(!or_lease_active(&n, 41000), "R-LEASE-2 released: not active");
    or_is_int(or_lease_check(&n, a, "k1", 2, 2, 41000), OR_LEASE_NOT_FOUND,
              "R-LEASE-2 released: not found");
    or_ok(or_lease_of(&n, a), "R-LEASE-2 a tombstone still names its owner");

    /* bad input */

    or_is_int(or_lease_bind(&n, a, "", 0, "c1", 2, 0, 0, 0, 1), -1,
              "R-LEASE-2 an empty key id is refused");
    or_is_int(or_lease_bind(&n, a, "k1", 2, "c1", 200, 0, 0, 0, 1), -1,
              "R-LEASE-2 a connection id too long is refused");
    or_is_int(or_lease_bind(&n, a, "k1", 2, "c1", 2, OR_LEASE_GEN_MAX, 0, 0,
                            1), -1,
              "R-LEASE-2 a generation past 2^53-1 is refused");

    /* dispatch */

    or_is_int(or_lease_dispatch(&m, a, "k1", 2, 2, 41000, &retry),
              OR_LEASE_OK, "R-LEASE-3 the owner's own connection");
    or_is_int(or_lease_dispatch(&m, a, "k1", 2, 1, 41000, &retry),
              OR_LEASE_LOST, "R-LEASE-3 a stale generation at dispatch");
    or_is_int(or_lease_dispatch(&m, a, "k2", 2, 2, 41000, &retry),
              OR_LEASE_LOST, "R-LEASE-3 the dispatch binds the key id");
    or_is_int(or_lease_dispatch(&empty, a, "k1", 2, 2, 41000, &retry),
              OR_LEASE_LOST, "R-LEASE-3 a connection no longer leased");
    or_is_int(or_lease_dispatch(&m, NULL, "k1", 2, 0, 41000, &retry),
              OR_LEASE_HELD, "R-LEASE-4 an unmanaged request: held");
    or_is_int(retry, 59000, "R-LEASE-4 until the lease expires");
    or_is_int(or_lease_dispatch(&m, NULL, "k1", 2, 0, 100000, &retry),
              OR_LEASE_OK, "R-LEASE-4 an expired lease holds nothing");
    or_is_int(or_lease_dispatch(&n, NULL, "k1", 2, 0, 41000, &retry),
              OR_LEASE_OK, "R-LEASE-4 a released lease holds nothing");
    or_is_int(or_lease_dispatch(NULL, NULL, "k1", 2, 0, 41000, &retry),
              OR_LEASE_OK, "R-LEASE-4 no record holds nothing");

    /* pick */

    memset(&n, 0, sizeof(n));
    (void) or_lease_bind(&n, b, "k9", 2, "c1", 2, 0, 0, 0, 10000);

    slots[0].lease = &n;                /* another owner's, until 10000 */
    slots[0].eligible = 1;
    slots[1].lease = NULL;              /* free, in cooldown */
    slots[1].eligible = 0;
    slots[2].lease = NULL;              /* free */
    slots[2].eligible = 1;

    or_is_int(or_lease_pick(slots, 3, NULL, 1000, &retry), 2,
              "R-LEASE-3 acquire: the first free eligible connection");
    slots[2].eligible = 0;
    or_is_int(or_lease_pick(slots, 3, NULL, 1000, &retry), 1,
              "R-LEASE-3 none eligible: the first free one");
    slots[1].lease = &n;
    slots[2].lease = &n;
    or_is_int(or_lease_pick(slots, 3, NULL, 1000, &retry), -1,
              "R-LEASE-4 every connection held: none");
    or_is_int(retry, 9000, "R-LEASE-4 retry when the earliest expires");
    or_is_int(or_lease_pick(slots, 3, NULL, 10000, &retry), 0,
              "R-LEASE-4 held ones free up at expiry");
    or_is_int(or_lease_pick(slots, 3, b, 1000, &retry), 0,
              "R-LEASE-2 a rebinding keeps its own eligible connection");

    slots[0].lease = &n;
    slots[0].eligible = 0;              /* own, now in cooldown */
    slots[1].lease = NULL;
    slots[1].eligible = 1;
    or_is_int(or_lease_pick(slots, 3, b, 1000, &retry), 1,
              "R-LEASE-2 a rebinding moves off its ineligible connection");
    slots[1].lease = &l;                /* a's */
    or_is_int(or_lease_pick(slots, 2, b, 1000, &retry), 0,
              "R-LEASE-2 ... unless no other is free");
    or_is_int(or_lease_pick(slots, 0, NULL, 1000, &retry), -1,
              "R-LEASE-4 no connection at all: none");

    /* tokens */

    for (i = 0; i < OR_LEASE_TOKEN_RAW; i++) {
        raw[i] = (uint8_t) (i * 37 + 11);
    }

    or_lease_token_encode(raw, tok);
    or_is_int(strlen(tok), 47, "R-LEASE-2 a token is 47 characters");
    or_ok(memcmp(tok, "vlo_", 4) == 0, "R-LEASE-2 starting with vlo_");
    or_ok(or_lease_token_valid(tok, 47), "R-LEASE-2 an encoded token is valid");

    memset(raw, 0xff, sizeof(raw));
    or_lease_token_encode(raw, tok);
    or_is_str(tok, "vlo_" "__________________________________________" "8",
              "R-LEASE-2 base64url of 32 0xff bytes, no padding");
    or_ok(strchr(tok, '=') == NULL && strchr(tok, '+') == NULL
          && strchr(tok, '/') == NULL, "R-LEASE-2 no +, / or =");
    memset(raw, 0, sizeof(raw));
    or_lease_token_encode(raw, tok);
    or_is_str(tok, "vlo_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
              "R-LEASE-2 base64url of 32 zero bytes");

    or_ok(!or_lease_token_valid(tok, 46), "R-LEASE-2 too short: invalid");
    or_ok(!or_lease_token_valid("vlx_" A42 "A", 47),
          "R-LEASE-2 another prefix: invalid");
    or_ok(!or_lease_token_valid("vlo_" A42 "=", 47),
          "R-LEASE-2 padding: invalid");
    or_ok(!or_lease_token_valid("vlo_" A42 "+", 47),
          "R-LEASE-2 base64 (not url): invalid");
    or_ok(!or_lease_token_valid("vlo_" A42 "B", 47),
          "R-LEASE-2 a non-canonical last character: invalid");
    or_ok(or_lease_token_valid("vlo_" A42 "E", 47),
          "R-LEASE-2 a canonical last character: valid");

    /* generations */

    or_ok(or_lease_parse_generation("1", 1, &gen) && gen == 1,
          "R-LEASE-3 generation 1");
    or_ok(or_lease_parse_generation("9007199254740991", 16, &gen)
          && gen == OR_LEASE_GEN_MAX, "R-LEASE-3 generation 2^53-1");
    or_ok(!or_lease_parse_generation("9007199254740992", 16, &gen),
          "R-LEASE-3 2^53: invalid");
    or_ok(!or_lease_parse_generation("0", 1, &gen), "R-LEASE-3 0: invalid");
    or_ok(!or_lease_parse_generation("01", 2, &gen),
          "R-LEASE-3 a leading zero: invalid");
    or_ok(!or_lease_parse_generation("-1", 2, &gen),
          "R-LEASE-3 a sign: invalid");
    or_ok(!or_lease_parse_generation(" 1", 2, &gen),
          "R-LEASE-3 a space: invalid");
    or_ok(!or_lease_parse_generation("", 0, &gen), "R-LEASE-3 empty: invalid");
    or_ok(!or_lease_parse_generation("12345678901234567", 17, &gen),
          "R-LEASE-3 17 digits: invalid");

    /* hex */

    owner_of(a, 0x5c);
    or_lease_hex(a, hex);
    or_is_int(strlen(hex), 64, "R-LEASE-2 a hash in hex: 64 digits");
    or_ok(hex[0] == '5' && hex[1] == 'c', "R-LEASE-2 lowercase hex");

    /* lease lines of Redis (issue 23): shapes */

    {
    char         out[OR_LEASE_LINE_MAX];
    size_t       len;
    const char  *line;

    line = LINE("2 1700000000000000 1699999990000 1700000000000 "
                "1700000030000 1");

    or_ok(or_lease_decode(line, strlen(line), &l) == NULL,
          "R-LEASE-3 a lease line decodes");
    or_ok(memcmp(l.owner, a, 32) == 0 && l.generation == 2
          && l.version == 1700000000000000ULL && l.acquired_at == 1699999990000
          && l.bound_at == 1700000000000 && l.expires_at == 1700000030000
          && l.state == OR_LEASE_ACTIVE && l.key_len == 2
          && memcmp(l.key, "lk", 2) == 0 && l.conn_len == 2,
          "R-LEASE-3 every field");
    len = or_lease_encode(&l, out);
    or_ok(len == strlen(line) && memcmp(out, line, len) == 0,
          "R-LEASE-3 and it encodes to the same line");
    or_ok(decodes(LINE("1 1 0 0 0 2")), "R-LEASE-3 zeros and an ended lease");

    or_ok(!decodes(LINE("1 1 0 0 0 3")), "R-LEASE-3 state 3: refused");
    or_ok(!decodes(LINE("1 1 0 0 0 0")), "R-LEASE-3 state 0: refused");
    or_ok(!decodes(LINE("1 1 0 0 0 1 ")), "R-LEASE-3 a trailing space");
    or_ok(!decodes(LINE("1 1 0 0 0  1")), "R-LEASE-3 two spaces");
    or_ok(!decodes(LINE("1 1 0 0 0")), "R-LEASE-3 9 fields");
    or_ok(!decodes(LINE("1 1 0 0 0 1 1")), "R-LEASE-3 11 fields");
    or_ok(!decodes(LINE("01 1 0 0 0 1")), "R-LEASE-3 a leading zero");
    or_ok(!decodes(LINE("-1 1 0 0 0 1")), "R-LEASE-3 a sign");
    or_ok(!decodes(LINE("1 9000000000000000000 0 0 0 1")),
          "R-LEASE-3 a version of 19 digits");
    or_ok(!decodes(LINE("1 1e9 0 0 0 1")), "R-LEASE-3 an exponent");
    or_ok(!decodes("2 " H64 " lk a1 1 1 0 0 0 1"),
          "R-LEASE-3 format version 2");
    or_ok(!decodes("1 " "5C5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c"
                   "5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c" " lk a1 1 1 0 0 0 1"),
          "R-LEASE-3 an uppercase owner");
    or_ok(!decodes("1 5c5c lk a1 1 1 0 0 0 1"), "R-LEASE-3 a short owner");
    or_ok(!decodes("1 " H64 " l\x01k a1 1 1 0 0 0 1"),
          "R-LEASE-3 a control byte in a key");
    or_ok(!decodes("1 " H64 " lk "
                   "a123456789012345678901234567890123456789012345678901234567"
                   "890123456 1 1 0 0 0 1"),
          "R-LEASE-3 a connection id of 65 bytes");
    or_ok(!decodes(""), "R-LEASE-3 empty");

    /* ranges, against Redis's clock */

    or_ok(valid(LINE("1 1700000000000000 1700000000000 1700000000000 "
                     "1700003600000 1"), 1700000000000) == NULL,
          "R-LEASE-3 a lease of the longest ttl: valid");
    or_is_str(valid(LINE("1 9000000000000000 1700000000000 1700000000000 "
                         "1700000030000 1"), 1700000000000), "version",
              "R-LEASE-3 a version far ahead of Redis's clock: refused");
    or_ok(valid(LINE("1 1700000029000000 1700000000000 1700000000000 "
                     "1700000030000 1"), 1700000000000) == NULL,
          "R-LEASE-3 a version within the slack: valid");
    or_is_str(valid(LINE("1 1700000000000000 1700000000000 1700000000000 "
                         "1700007200000 1"), 1700000000000), "expires_at",
              "R-LEASE-3 an expiry past the longest ttl: refused");
    or_is_str(valid(LINE("0 1700000000000000 1700000000000 1700000000000 "
                         "1700000030000 1"), 1700000000000), "generation",
              "R-LEASE-3 generation 0: refused");
    or_is_str(valid(LINE("9007199254740992 1700000000000000 1700000000000 "
                         "1700000000000 1700000030000 1"), 1700000000000),
              "generation", "R-LEASE-3 generation 2^53: refused");
    or_is_str(valid(LINE("1 1700000000000000 1700000000001 1700000000000 "
                         "1700000030000 1"), 1700000000000), "times",
              "R-LEASE-3 acquired after bound: refused");
    or_is_str(valid(LINE("1 1700000000000000 1700000000000 1700000000000 "
                         "1690000000000 1"), 1700000000000), "times",
              "R-LEASE-3 expired before bound: refused");
    or_is_str(valid(LINE("1 1700000000000000 1700000100000 1700000100000 "
                         "1700000130000 1"), 1700000000000), "bound_at",
              "R-LEASE-3 bound in the future: refused");
    or_is_str(valid(LINE("1 0 0 0 0 2"), 1700000000000), "version",
              "R-LEASE-3 version 0: refused");
    or_ok(valid(LINE("1 1 0 0 0 2"), INT64_MAX) == NULL,
          "R-LEASE-3 a clock at the end of time saturates");
    }

    return or_done();
}
