/*
 * Copyright (C) ngx_omniroute authors
 *
 * libFuzzer target: what a client presents to the gateway's key and
 * lease checks (R-LEASE-1..3), on arbitrary bytes: an Authorization
 * value, an owner token, a generation, a request path and a model name
 * against fixed limits; a lease line from Redis.  Checks: a bearer token
 * lies inside the input, a valid token re-encodes to itself, a parsed
 * generation is in range, a decoded lease line re-encodes to itself and
 * its range check holds for any clock.
 */


#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "or_keys.h"
#include "or_lease.h"


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);


static const or_keys_str_t  fuzz_models[] = {
    { "gpt-4o", 6 }, { "openai/*", 8 }, { "*", 1 }
};

static const or_keys_str_t  fuzz_paths[] = {
    { "/v1/chat/", 9 }, { "/v1/messages", 12 }, { "/", 1 }
};


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int            r;
    char           out[OR_LEASE_TOKEN_LEN + 1];
    size_t         len, i, v;
    uint8_t        raw[OR_LEASE_TOKEN_RAW], hash[32];
    char           line[OR_LEASE_LINE_MAX];
    uint64_t       gen;
    or_msec_t      now;
    or_lease_t     l;
    const char    *s, *tok;

    s = (const char *) data;

    if (or_keys_bearer(s, size, &tok, &len)) {
        if (tok < s || tok + len > s + size || len == 0) {
            abort();
        }
    }

    if (or_lease_token_valid(s, size)) {
        /* decode by hand and re-encode: canonical tokens round-trip */

        memset(raw, 0, sizeof(raw));

        for (i = 4; i < size; i++) {
            v = (size_t) (strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmn"
                                 "opqrstuvwxyz0123456789-_", s[i])
                          - "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmn"
                            "opqrstuvwxyz0123456789-_");

            /* bit offset of this character */
            len = (i - 4) * 6;

            for (r = 0; r < 6; r++) {
                if ((v >> (5 - r)) & 1) {
                    if ((len + r) / 8 >= OR_LEASE_TOKEN_RAW) {
                        abort();        /* a set padding bit */
                    }

                    raw[(len + r) / 8] |= (uint8_t) (0x80 >> ((len + r) % 8));
                }
            }
        }

        or_lease_token_encode(raw, out);

        if (memcmp(out, s, OR_LEASE_TOKEN_LEN) != 0) {
            abort();
        }
    }

    if (or_lease_parse_generation(s, size, &gen)) {
        if (gen == 0 || gen > OR_LEASE_GEN_MAX) {
            abort();
        }
    }

    if (or_lease_decode(s, size, &l) == NULL) {
        len = or_lease_encode(&l, line);

        if (len != size || memcmp(line, s, size) != 0) {
            abort();                    /* decoding is canonical */
        }

        /* the clock and the longest ttl from the line's own digits */

        now = (or_msec_t) (l.bound_at ^ (or_msec_t) l.version);
        (void) or_lease_valid(&l, now, l.expires_at);
        (void) or_lease_valid(&l, INT64_MAX, INT64_MAX);
        (void) or_lease_valid(&l, INT64_MIN, 0);

        if (or_lease_valid(&l, l.bound_at, 0) == NULL
            && (l.generation == 0 || l.generation > OR_LEASE_GEN_MAX
                || l.expires_at > l.bound_at + OR_LEASE_CLOCK_SLACK))
        {
            abort();
        }
    }

    (void) or_keys_match_path(fuzz_paths, 2, s, size);
    (void) or_keys_match_name(fuzz_models, 2, s, size);

    if (!or_keys_match_path(fuzz_paths, 3, s, size) && size && s[0] == '/') {
        abort();                        /* "/" allows every path */
    }

    if (!or_keys_match_name(fuzz_models, 3, s, size)) {
        abort();                        /* "*" allows every name */
    }

    (void) or_keys_valid_id(s, size);
    (void) or_keys_valid_pattern(s, size);
    (void) or_keys_valid_path(s, size);
    (void) or_keys_valid_secret(s, size);
    (void) or_keys_hex32(s, size, hash);

    return 0;
}
