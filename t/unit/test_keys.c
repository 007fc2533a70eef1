/*
 * Copyright (C) ngx_omniroute authors
 *
 * R-LEASE-1: client keys: the matching rules of their limits (models,
 * connections, paths) and what a client presents.
 */


#include "or_test.h"
#include "or_keys.h"


#define S(s)  { s, sizeof(s) - 1 }


int
main(void)
{
    size_t         len;
    uint8_t        h[32];
    const char    *tok;
    or_keys_str_t  models[] = { S("gpt-4o"), S("openai/*"), S("smart") };
    or_keys_str_t  any[] = { S("*") };
    or_keys_str_t  paths[] = { S("/v1/chat/"), S("/v1/messages") };
    or_keys_str_t  root[] = { S("/") };

    /* names */

    or_ok(or_keys_match_name(models, 3, "gpt-4o", 6), "R-LEASE-1 exact name");
    or_ok(!or_keys_match_name(models, 3, "gpt-4o-mini", 11),
          "R-LEASE-1 an exact name is not a prefix");
    or_ok(!or_keys_match_name(models, 3, "gpt-4", 5),
          "R-LEASE-1 nor a shorter name");
    or_ok(or_keys_match_name(models, 3, "openai/gpt-5", 12),
          "R-LEASE-1 a prefix pattern");
    or_ok(or_keys_match_name(models, 3, "openai/", 7),
          "R-LEASE-1 the prefix itself");
    or_ok(!or_keys_match_name(models, 3, "openaix/gpt", 11),
          "R-LEASE-1 another provider");
    or_ok(!or_keys_match_name(models, 3, "SMART", 5),
          "R-LEASE-1 names are case-sensitive");
    or_ok(or_keys_match_name(any, 1, "whatever", 8), "R-LEASE-1 * allows all");
    or_ok(or_keys_match_name(NULL, 0, "x", 1),
          "R-LEASE-1 no list allows all");

    /* paths */

    or_ok(or_keys_match_path(paths, 2, "/v1/chat/completions", 20),
          "R-LEASE-1 under a prefix ending in /");
    or_ok(!or_keys_match_path(paths, 2, "/v1/chat", 8),
          "R-LEASE-1 a prefix ending in / needs it");
    or_ok(or_keys_match_path(paths, 2, "/v1/messages", 12),
          "R-LEASE-1 the path itself");
    or_ok(or_keys_match_path(paths, 2, "/v1/messages/count_tokens", 25),
          "R-LEASE-1 below it");
    or_ok(!or_keys_match_path(paths, 2, "/v1/messagesX", 13),
          "R-LEASE-1 not a longer segment");
    or_ok(!or_keys_match_path(paths, 2, "/v1/fine_tuning/jobs", 20),
          "R-LEASE-1 another path");
    or_ok(!or_keys_match_path(paths, 2, "/v1/Chat/completions", 20),
          "R-LEASE-1 paths are case-sensitive");
    or_ok(or_keys_match_path(root, 1, "/anything", 9),
          "R-LEASE-1 / allows all");
    or_ok(or_keys_match_path(NULL, 0, "/x", 2), "R-LEASE-1 no list allows all");

    /* bearer */

    or_ok(or_keys_bearer("Bearer sk-abc", 13, &tok, &len)
          && len == 6 && memcmp(tok, "sk-abc", 6) == 0,
          "R-LEASE-1 Bearer TOKEN");
    or_ok(or_keys_bearer("bearer  sk-abc  ", 16, &tok, &len)
          && len == 6 && memcmp(tok, "sk-abc", 6) == 0,
          "R-LEASE-1 scheme in any case, spaces trimmed");
    or_ok(!or_keys_bearer("Bearer ", 7, &tok, &len),
          "R-LEASE-1 an empty token is none");
    or_ok(!or_keys_bearer("Bearer", 6, &tok, &len), "R-LEASE-1 no token");
    or_ok(!or_keys_bearer("Basic dXNlcjpw", 14, &tok, &len),
          "R-LEASE-1 another scheme");
    or_ok(!or_keys_bearer("Bearersk-abc", 12, &tok, &len),
          "R-LEASE-1 the scheme needs a space");

    /* syntax */

    or_ok(or_keys_valid_id("team-a_1.x", 10), "R-LEASE-1 a key id");
    or_ok(!or_keys_valid_id("a b", 3), "R-LEASE-1 no spaces in ids");
    or_ok(!or_keys_valid_id("", 0), "R-LEASE-1 no empty id");
    or_ok(!or_keys_valid_id("a\"", 2), "R-LEASE-1 no quote in ids");
    or_ok(or_keys_valid_pattern("openai/*", 8), "R-LEASE-1 a pattern");
    or_ok(!or_keys_valid_pattern("a*b", 3), "R-LEASE-1 * only at the end");
    or_ok(or_keys_valid_path("/v1/chat/", 9), "R-LEASE-1 a path prefix");
    or_ok(!or_keys_valid_path("v1/chat", 7), "R-LEASE-1 paths start with /");
    or_ok(!or_keys_valid_path("/v1/%2e", 7), "R-LEASE-1 no escapes in paths");
    or_ok(or_keys_valid_secret("0123456789abcdef", 16),
          "R-LEASE-1 a 16-character key");
    or_ok(!or_keys_valid_secret("0123456789abcde", 15),
          "R-LEASE-1 15 characters: too short");
    or_ok(!or_keys_valid_secret("0123456789 abcdef", 17),
          "R-LEASE-1 no spaces in keys");

    or_ok(or_keys_hex32("00112233445566778899AABBCCDDEEFF"
                        "00112233445566778899aabbccddeeff", 64, h)
          && h[0] == 0x00 && h[1] == 0x11 && h[10] == 0xaa && h[31] == 0xff,
          "R-LEASE-1 sha256= in hex, either case");
    or_ok(!or_keys_hex32("0011", 4, h), "R-LEASE-1 hex: 64 digits");
    or_ok(!or_keys_hex32("g0112233445566778899aabbccddeeff"
                         "00112233445566778899aabbccddeeff", 64, h),
          "R-LEASE-1 hex: digits only");

    return or_done();
}
