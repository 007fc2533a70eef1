/*
 * Copyright (C) ngx_omniroute authors
 *
 * Client gateway keys (R-LEASE-1): the matching rules of a key's limits
 * and the parsing of what a client presents.  Plain C, no nginx; pure
 * functions over (pointer, length) strings.  The glue hashes a presented
 * key (SHA-256) and compares the hashes in constant time; nothing here
 * sees a key's hash or compares secrets.
 *
 *   names   a key's allowed models and connections: an exact name, a
 *           prefix followed by "*" (any name that starts with it), or "*"
 *           alone (anything); an empty list allows anything.
 *   paths   allowed path prefixes, matched on segment boundaries: a
 *           prefix ending in "/" matches what starts with it; any other
 *           prefix matches the path itself and what continues it with
 *           "/" ("/v1/messages" matches "/v1/messages" and
 *           "/v1/messages/count_tokens", never "/v1/messagesX").  The
 *           glue matches the normalized URI (dot segments resolved,
 *           percent-escapes decoded), never the raw request line.
 *   bearer  "Bearer TOKEN": the scheme case-insensitive, spaces around
 *           the token removed; an empty token is none.
 */

#ifndef _OR_KEYS_H_INCLUDED_
#define _OR_KEYS_H_INCLUDED_


#include "or_types.h"


#define OR_KEYS_ID_MAX      63          /* a key id, bytes */
#define OR_KEYS_SECRET_MIN  16          /* a key read from a file */
#define OR_KEYS_SECRET_MAX  4096


typedef struct {
    const char   *data;
    size_t        len;
} or_keys_str_t;


/* 1: name is allowed by the patterns (n == 0: by an empty list) */
int or_keys_match_name(const or_keys_str_t *pats, size_t n, const char *name,
    size_t len);

/* 1: path starts with one of the prefixes (n == 0: any path) */
int or_keys_match_path(const or_keys_str_t *prefixes, size_t n,
    const char *path, size_t len);

/* 1 and the token of an Authorization value "Bearer TOKEN", else 0 */
int or_keys_bearer(const char *value, size_t len, const char **token,
    size_t *token_len);

/* 1: an id of letters, digits, "-", "_" and ".", 1..OR_KEYS_ID_MAX */
int or_keys_valid_id(const char *s, size_t len);

/* 1: a valid name pattern (an id, "prefix*" or "*"; "/" allowed) */
int or_keys_valid_pattern(const char *s, size_t len);

/* 1: a path prefix: starts with "/", printable ASCII, no "?", "#", "*" */
int or_keys_valid_path(const char *s, size_t len);

/* 1: a key text: OR_KEYS_SECRET_MIN..MAX printable ASCII, no spaces */
int or_keys_valid_secret(const char *s, size_t len);

/* 1 and out[32]: 64 hexadecimal digits (either case) */
int or_keys_hex32(const char *s, size_t len, uint8_t *out);


#endif /* _OR_KEYS_H_INCLUDED_ */
