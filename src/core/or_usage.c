/*
 * Copyright (C) ngx_omniroute authors
 */


#ifndef _GNU_SOURCE
#define _GNU_SOURCE             /* memmem() */
#endif

#include <string.h>

#include "or_usage.h"
#include "or_json.h"
#include "or_run.h"


/* the lexer's states */
enum {
    OR_UL_VALUE = 0,            /* a value is expected */
    OR_UL_VALUE_OR_END,         /* after "[": a value or "]" */
    OR_UL_KEY_START,            /* in an object: a key or "}" */
    OR_UL_KEY,
    OR_UL_KEY_ESC,
    OR_UL_COLON,
    OR_UL_STRING,
    OR_UL_STRING_ESC,
    OR_UL_NUMBER,
    OR_UL_LITERAL,
    OR_UL_AFTER                 /* after a value: "," or a close */
};


/* keys that mean something at their level */
enum {
    OR_UK_OTHER = 0,
    OR_UK_USAGE,                /* level 1: "usage", "usageMetadata" */
    OR_UK_PROMPT,               /* level 2 */
    OR_UK_COMPLETION,
    OR_UK_CACHED,               /* level 2 or 3 */
    OR_UK_REASONING,
    OR_UK_IN_DETAILS,           /* level 2: objects holding level 3 */
    OR_UK_OUT_DETAILS
};


typedef struct {
    const char   *name;
    size_t        len;
    int           level;
    int           parent;       /* the key of the level above (level 3) */
    int           key;
} or_usage_key_t;


/* levels 1 and 3 */
static const or_usage_key_t  or_usage_keys[] = {
    { "usage", 5, 1, 0, OR_UK_USAGE },
    { "usageMetadata", 13, 1, 0, OR_UK_USAGE },

    /* OpenAI chat, OpenAI Responses */
    { "cached_tokens", 13, 3, OR_UK_IN_DETAILS, OR_UK_CACHED },
    { "reasoning_tokens", 16, 3, OR_UK_OUT_DETAILS, OR_UK_REASONING },

    { NULL, 0, 0, 0, 0 }
};


/*
 * Level 2, the usage object's own keys: OpenAI chat, Anthropic messages,
 * OpenAI Responses, Gemini (camelCase).  In order of length: a lookup
 * stops at the first longer name (most keys of a usage object are found
 * or passed over in a few compares).
 */
static const or_usage_key_t  or_usage_keys2[] = {
    { "input_tokens", 12, 2, 0, OR_UK_PROMPT },
    { "prompt_tokens", 13, 2, 0, OR_UK_PROMPT },
    { "output_tokens", 13, 2, 0, OR_UK_COMPLETION },
    { "promptTokenCount", 16, 2, 0, OR_UK_PROMPT },
    { "completion_tokens", 17, 2, 0, OR_UK_COMPLETION },
    { "thoughtsTokenCount", 18, 2, 0, OR_UK_REASONING },
    { "input_tokens_details", 20, 2, 0, OR_UK_IN_DETAILS },
    { "candidatesTokenCount", 20, 2, 0, OR_UK_COMPLETION },
    { "prompt_tokens_details", 21, 2, 0, OR_UK_IN_DETAILS },
    { "output_tokens_details", 21, 2, 0, OR_UK_OUT_DETAILS },
    { "cache_read_input_tokens", 23, 2, 0, OR_UK_CACHED },
    { "cachedContentTokenCount", 23, 2, 0, OR_UK_CACHED },
    { "completion_tokens_details", 25, 2, 0, OR_UK_OUT_DETAILS },

    { NULL, (size_t) -1, 0, 0, 0 }
};


static int or_usage_is_array(const or_usage_t *u, int level);
static int or_usage_key_here(const or_usage_t *u);
static int or_usage_match(const or_usage_t *u);
static void or_usage_open(or_usage_t *u, int array);
static void or_usage_close(or_usage_t *u);
static void or_usage_value_end(or_usage_t *u);
static void or_usage_number_end(or_usage_t *u);
static int or_usage_value_start(or_usage_t *u, char ch);
static size_t or_usage_step(or_usage_t *u, const char *p, const char *last);
static void or_usage_scan(or_usage_t *u, const char *p, size_t len);
static const char *or_usage_skip(const char *p, const char *last, int depth);
static int or_usage_key2(const char *p, size_t n);
static const char *or_usage_number(const char *p, const char *last,
    uint64_t *value);
static const char *or_usage_details(or_usage_t *u, int parent,
    const char *p, const char *last);
static const char *or_usage_object(or_usage_t *u, const char *m,
    const char *p, const char *last);
static const char *or_usage_members(or_usage_t *u, const char *p,
    const char *last);
static const char *or_usage_from(or_usage_t *u, const char *m,
    const char *last);


void
or_usage_init(or_usage_t *u, size_t max)
{
    memset(u, 0, sizeof(or_usage_t));

    u->max = max;
    u->lex = OR_UL_VALUE;
    u->state = OR_USAGE_SCANNING;
}


int
or_usage_found(const or_usage_t *u)
{
    return u->found;
}


const char *
or_usage_kind_name(or_usage_kind_e kind)
{
    static const char  *names[OR_USAGE_KINDS] = {
        "prompt", "completion", "cached", "reasoning"
    };

    return ((unsigned) kind < OR_USAGE_KINDS) ? names[kind] : "unknown";
}


int
or_usage_event(or_usage_t *u, const char *data, size_t len)
{
    size_t       n;
    const char  *p, *q, *key, *last;

    or_usage_init(u, 0);

    if (data == NULL) {
        return 0;
    }

    key = NULL;
    last = data + len;

    /* the candidates: every "usage (one quote: the hits never overlap) */

    for (p = data; p < last; p = q + 1) {
        q = memmem(p, last - p, "\"usage", sizeof("\"usage") - 1);

        if (q == NULL) {
            break;
        }

        n = last - q;

        if ((n > sizeof("\"usage\"") - 1
             && memcmp(q, "\"usage\"", sizeof("\"usage\"") - 1) == 0)
            || (n > sizeof("\"usageMetadata\"") - 1
                && memcmp(q, "\"usageMetadata\"",
                          sizeof("\"usageMetadata\"") - 1) == 0))
        {
            key = q;
        }
    }

    if (key == NULL) {
        return 0;
    }

    /*
     * {"usage": {...} ...: the object's own members end the scan; the
     * lexer's state after that "{" is the reader's at a member's start
     */

    u->fed = 1;
    p = or_usage_from(u, key, last);

    if (u->state == OR_USAGE_SCANNING) {
        or_usage_scan(u, p, last - p);
    }

    return or_usage_found(u);
}


static int
or_usage_is_array(const or_usage_t *u, int level)
{
    return level >= 1 && (u->arrays >> (level - 1)) & 1;
}


/* the key whose value starts at the current level, for levels 1..3 */

static int
or_usage_key_here(const or_usage_t *u)
{
    if (u->depth < 1 || u->depth > 3 || or_usage_is_array(u, u->depth)) {
        return OR_UK_OTHER;
    }

    return u->key[u->depth];
}


/* the key just read, at the current level of an object */

static int
or_usage_match(const or_usage_t *u)
{
    int                    level, parent;
    const or_usage_key_t  *k;

    level = u->depth;

    if (u->klen > OR_USAGE_KEY_MAX || level > 3) {
        return OR_UK_OTHER;
    }

    if (level >= 2 && u->in_usage != 2) {
        return OR_UK_OTHER;
    }

    if (level == 1 && (u->klen == 0 || u->kbuf[0] != 'u')) {
        /* the level of "usage" and "usageMetadata" only */
        return OR_UK_OTHER;
    }

    if (level == 2) {
        return or_usage_key2(u->kbuf, u->klen);
    }

    parent = (level == 3) ? u->key[2] : 0;

    for (k = or_usage_keys; k->name; k++) {
        if (k->len == u->klen && k->level == level && k->parent == parent
            && memcmp(k->name, u->kbuf, u->klen) == 0)
        {
            return k->key;
        }
    }

    return OR_UK_OTHER;
}


static void
or_usage_open(or_usage_t *u, int array)
{
    int  key;

    key = or_usage_key_here(u);

    if (u->depth >= OR_USAGE_DEPTH_MAX) {
        u->state = OR_USAGE_STOPPED;
        return;
    }

    u->depth++;

    if (array) {
        u->arrays |= (uint64_t) 1 << (u->depth - 1);
        u->lex = OR_UL_VALUE_OR_END;

    } else {
        u->arrays &= ~((uint64_t) 1 << (u->depth - 1));
        u->lex = OR_UL_KEY_START;
    }

    if (u->depth <= 3) {
        u->key[u->depth] = OR_UK_OTHER;
    }

    if (!array && u->depth == 2 && key == OR_UK_USAGE) {
        /* a (new) usage object: its values replace any before */
        u->in_usage = 2;
        memset(u->tokens, 0, sizeof(u->tokens));
        u->seen = 0;
        u->found = 0;
    }
}


static void
or_usage_close(or_usage_t *u)
{
    if (u->in_usage && u->in_usage == u->depth) {
        u->in_usage = 0;
        u->found = 1;
    }

    u->depth--;

    or_usage_value_end(u);
}


static void
or_usage_value_end(or_usage_t *u)
{
    if (u->depth == 0) {
        u->state = OR_USAGE_COMPLETE;
        return;
    }

    u->lex = OR_UL_AFTER;
}


static void
or_usage_number_end(or_usage_t *u)
{
    int  kind;

    kind = -1;

    switch (u->value_key) {

    case OR_UK_PROMPT:
        kind = OR_USAGE_PROMPT;
        break;

    case OR_UK_COMPLETION:
        kind = OR_USAGE_COMPLETION;
        break;

    case OR_UK_CACHED:
        kind = OR_USAGE_CACHED;
        break;

    case OR_UK_REASONING:
        kind = OR_USAGE_REASONING;
        break;

    default:
        break;
    }

    if (kind >= 0 && !u->bad_number && u->in_usage) {
        u->tokens[kind] = u->number;
        u->seen |= 1u << kind;
    }

    or_usage_value_end(u);
}


/* 1: ch started a value; 0: it cannot */

static int
or_usage_value_start(or_usage_t *u, char ch)
{
    switch (ch) {

    case '{':
        or_usage_open(u, 0);
        return 1;

    case '[':
        or_usage_open(u, 1);
        return 1;

    case '"':
        u->lex = OR_UL_STRING;
        return 1;

    case 't':
    case 'f':
    case 'n':
        u->lex = OR_UL_LITERAL;
        return 1;

    default:
        break;
    }

    if (ch == '-' || (ch >= '0' && ch <= '9')) {
        u->value_key = or_usage_key_here(u);
        u->bad_number = (ch == '-');
        u->number = (ch == '-') ? 0 : (uint64_t) (ch - '0');
        u->lex = OR_UL_NUMBER;
        return 1;
    }

    return 0;
}


/* one byte (or a run of string bytes); returns how many were used */

static size_t
or_usage_step(or_usage_t *u, const char *p, const char *last)
{
    char         ch;
    size_t       n;
    const char  *q;

    ch = *p;

    switch (u->lex) {

    case OR_UL_STRING:
        /* a run of plain string bytes at once */
        q = or_run_plain(p, last);

        if (q > p) {
            if (q < last && *q == '"') {
                /* and the closing quote, in the same step */
                or_usage_value_end(u);
                q++;
            }

            return q - p;
        }

        if (ch == '\\') {
            u->lex = OR_UL_STRING_ESC;

        } else {
            or_usage_value_end(u);
        }

        return 1;

    case OR_UL_STRING_ESC:
        u->lex = OR_UL_STRING;
        return 1;

    case OR_UL_KEY:
        /* a run of key bytes at once, and what ends it; keys that matter
         * are short and have no escapes */
        q = or_run_plain(p, last);
        n = q - p;

        if (u->klen + n <= OR_USAGE_KEY_MAX) {
            memcpy(u->kbuf + u->klen, p, n);
            u->klen += n;

        } else {
            u->klen = OR_USAGE_KEY_MAX + 1;
        }

        if (q == last) {
            return n;
        }

        if (*q == '\\') {
            u->klen = OR_USAGE_KEY_MAX + 1;
            u->lex = OR_UL_KEY_ESC;
            return n + 1;
        }

        if (u->depth <= 3) {
            u->key[u->depth] = or_usage_match(u);
        }

        u->lex = OR_UL_COLON;
        return n + 1;

    case OR_UL_KEY_ESC:
        u->lex = OR_UL_KEY;
        return 1;

    case OR_UL_NUMBER:
        if (ch >= '0' && ch <= '9') {
            for (q = p; q < last && *q >= '0' && *q <= '9'; q++) {
                if (u->number < OR_USAGE_VALUE_MAX) {
                    u->number = u->number * 10 + (uint64_t) (*q - '0');

                    if (u->number > OR_USAGE_VALUE_MAX) {
                        u->number = OR_USAGE_VALUE_MAX;
                    }
                }
            }

            return q - p;
        }

        if (ch == '.' || ch == 'e' || ch == 'E' || ch == '+' || ch == '-') {
            u->bad_number = 1;
            return 1;
        }

        /* the number ended; this byte is read again after it */
        or_usage_number_end(u);
        return 0;

    case OR_UL_LITERAL:
        if (ch >= 'a' && ch <= 'z') {
            for (q = p + 1; q < last && *q >= 'a' && *q <= 'z'; q++) {
                /* void */
            }

            return q - p;
        }

        or_usage_value_end(u);
        return 0;

    default:
        break;
    }

    if (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r') {
        for (q = p + 1;
             q < last && (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r');
             q++)
        {
            /* void */
        }

        return q - p;
    }

    switch (u->lex) {

    case OR_UL_VALUE_OR_END:
        if (ch == ']') {
            or_usage_close(u);
            return 1;
        }

        /* fall through */

    case OR_UL_VALUE:
        if (!or_usage_value_start(u, ch)) {
            u->state = OR_USAGE_STOPPED;
        }

        return 1;

    case OR_UL_KEY_START:
        if (ch == '"') {
            u->klen = 0;
            u->lex = OR_UL_KEY;

        } else if (ch == '}') {
            or_usage_close(u);

        } else {
            u->state = OR_USAGE_STOPPED;
        }

        return 1;

    case OR_UL_COLON:
        if (ch == ':') {
            u->lex = OR_UL_VALUE;

        } else {
            u->state = OR_USAGE_STOPPED;
        }

        return 1;

    default: /* OR_UL_AFTER */
        if (ch == ',') {
            u->lex = or_usage_is_array(u, u->depth) ? OR_UL_VALUE
                                                     : OR_UL_KEY_START;

        } else if (ch == '}' && !or_usage_is_array(u, u->depth)) {
            or_usage_close(u);

        } else if (ch == ']' && or_usage_is_array(u, u->depth)) {
            or_usage_close(u);

        } else {
            u->state = OR_USAGE_STOPPED;
        }

        return 1;
    }
}


/*
 * The scan proper: the lexer byte by byte (runs at once), any split.
 */

static void
or_usage_scan(or_usage_t *u, const char *p, size_t len)
{
    int          bounded;
    const char  *last;

    if (u->state != OR_USAGE_SCANNING || len == 0) {
        return;
    }

    bounded = 0;

    if (u->max && len > u->max - u->fed) {
        len = u->max - u->fed;
        bounded = 1;
    }

    u->fed += len;
    last = p + len;

    while (p < last && u->state == OR_USAGE_SCANNING) {
        p += or_usage_step(u, p, last);
    }

    if (bounded && u->state == OR_USAGE_SCANNING) {
        u->state = OR_USAGE_STOPPED;
    }
}


/*
 * The answer's first piece: its top-level members before the first one
 * named "usage" or "usageMetadata" skipped by a reader that accepts
 * exactly what the lexer accepts (or_usage_skip()), without the lexer's
 * steps; the lexer is then put in the state it would have at that member's
 * start (after the object's "{" or a ","), and reads on from there: the
 * usage object, and anything the reader could not tell (a member cut short
 * by the piece's end, anything the lexer would stop at), with the same
 * verdict as ever.
 */

/* past the value at p as the lexer reads it (depth: its level), or NULL */

static const char *
or_usage_skip(const char *p, const char *last, int depth)
{
    char  ch;

    p = or_json_ws(p, last);

    if (p >= last) {
        return NULL;
    }

    ch = *p;

    switch (ch) {

    case '"':
        return or_json_string_end(p, last);

    case '{':
        if (depth >= OR_USAGE_DEPTH_MAX) {
            return NULL;
        }

        for (p++; ; p++) {
            /* a key or "}" (after "," too, as the lexer has it) */
            p = or_json_ws(p, last);

            if (p >= last) {
                return NULL;
            }

            if (*p == '}') {
                return p + 1;
            }

            if (*p != '"') {
                return NULL;
            }

            p = or_json_string_end(p, last);

            if (p == NULL) {
                return NULL;
            }

            p = or_json_ws(p, last);

            if (p >= last || *p != ':') {
                return NULL;
            }

            p = or_usage_skip(p + 1, last, depth + 1);

            if (p == NULL) {
                return NULL;
            }

            p = or_json_ws(p, last);

            if (p >= last) {
                return NULL;
            }

            if (*p == '}') {
                return p + 1;
            }

            if (*p != ',') {
                return NULL;
            }
        }

    case '[':
        if (depth >= OR_USAGE_DEPTH_MAX) {
            return NULL;
        }

        p = or_json_ws(p + 1, last);

        if (p < last && *p == ']') {
            return p + 1;
        }

        for ( ;; ) {
            p = or_usage_skip(p, last, depth + 1);

            if (p == NULL) {
                return NULL;
            }

            p = or_json_ws(p, last);

            if (p >= last) {
                return NULL;
            }

            if (*p == ']') {
                return p + 1;
            }

            if (*p != ',') {
                return NULL;
            }

            p++;
        }

    case 't':
    case 'f':
    case 'n':
        for (p++; p < last && *p >= 'a' && *p <= 'z'; p++) {
            /* void */
        }

        return p;

    default:
        break;
    }

    if (ch != '-' && (ch < '0' || ch > '9')) {
        return NULL;
    }

    for (p++; p < last; p++) {
        ch = *p;

        if (!((ch >= '0' && ch <= '9') || ch == '.' || ch == 'e'
              || ch == 'E' || ch == '+' || ch == '-'))
        {
            break;
        }
    }

    return p;
}


/* the key of the usage object's level (2) at p, n bytes, no escapes */

static int
or_usage_key2(const char *p, size_t n)
{
    const or_usage_key_t  *k;

    /* the end's length, (size_t) -1, stops the loop */

    for (k = or_usage_keys2; k->len <= n; k++) {
        if (k->len == n && memcmp(k->name, p, n) == 0) {
            return k->key;
        }
    }

    return OR_UK_OTHER;
}


/*
 * A number the lexer keeps (digits only, capped as it caps them) and what
 * ends its member: past the number, at the "," or "}" after it; NULL for
 * anything else.
 */

static const char *
or_usage_number(const char *p, const char *last, uint64_t *value)
{
    uint64_t  number;

    if (p >= last || *p < '0' || *p > '9') {
        return NULL;
    }

    number = 0;

    for ( /* void */ ; p < last && *p >= '0' && *p <= '9'; p++) {
        if (number < OR_USAGE_VALUE_MAX) {
            number = number * 10 + (uint64_t) (*p - '0');

            if (number > OR_USAGE_VALUE_MAX) {
                number = OR_USAGE_VALUE_MAX;
            }
        }
    }

    if (p >= last || *p == '.' || *p == 'e' || *p == 'E' || *p == '+'
        || *p == '-')
    {
        return NULL;
    }

    p = or_json_ws(p, last);

    if (p >= last || (*p != ',' && *p != '}')) {
        return NULL;
    }

    *value = number;

    return p;
}


/*
 * The object (p past its "{") of a usage member named parent: members of
 * numbers only, those of level 3 under their parent kept (cached_tokens,
 * reasoning_tokens), all at once when it closed and its member ended;
 * returns the "," or "}" after it, NULL for anything else (u untouched).
 */

static const char *
or_usage_details(or_usage_t *u, int parent, const char *p, const char *last)
{
    int                    key;
    size_t                 n;
    unsigned               seen;
    uint64_t               number, tokens[OR_USAGE_KINDS];
    const char            *q;
    const or_usage_key_t  *k;

    seen = 0;
    tokens[OR_USAGE_CACHED] = 0;
    tokens[OR_USAGE_REASONING] = 0;

    for ( ;; ) {
        p = or_json_ws(p, last);

        if (p >= last) {
            return NULL;
        }

        if (*p == '}') {
            break;
        }

        if (*p != '"') {
            return NULL;
        }

        q = or_run_plain(p + 1, last);

        if (q >= last || *q != '"') {
            return NULL;
        }

        n = q - (p + 1);
        key = OR_UK_OTHER;

        for (k = or_usage_keys; k->name; k++) {
            if (k->len == n && k->level == 3 && k->parent == parent
                && memcmp(k->name, p + 1, n) == 0)
            {
                key = k->key;
                break;
            }
        }

        p = or_json_ws(q + 1, last);

        if (p >= last || *p != ':') {
            return NULL;
        }

        p = or_usage_number(or_json_ws(p + 1, last), last, &number);

        if (p == NULL) {
            return NULL;
        }

        if (key == OR_UK_CACHED) {
            tokens[OR_USAGE_CACHED] = number;
            seen |= 1u << OR_USAGE_CACHED;

        } else if (key == OR_UK_REASONING) {
            tokens[OR_USAGE_REASONING] = number;
            seen |= 1u << OR_USAGE_REASONING;
        }

        if (*p == '}') {
            break;
        }

        p++;
    }

    /* its member's end in the usage object */

    p = or_json_ws(p + 1, last);

    if (p >= last || (*p != ',' && *p != '}')) {
        return NULL;
    }

    if (seen & (1u << OR_USAGE_CACHED)) {
        u->tokens[OR_USAGE_CACHED] = tokens[OR_USAGE_CACHED];
    }

    if (seen & (1u << OR_USAGE_REASONING)) {
        u->tokens[OR_USAGE_REASONING] = tokens[OR_USAGE_REASONING];
    }

    u->seen |= seen;

    return p;
}


/*
 * A top-level usage member, m its start, p past its key: its object's
 * numbers and details objects read in place; anything else (a deeper
 * object, a number the lexer does not keep, a piece's end) goes to the
 * lexer, put in its state at the start of the member it is in.
 */

static const char *
or_usage_object(or_usage_t *u, const char *m, const char *p,
    const char *last)
{
    int          key, kind;
    size_t       n;
    uint64_t     number;
    const char  *q;

    p = or_json_ws(p, last);

    if (p >= last || *p != ':') {
        goto level1;
    }

    p = or_json_ws(p + 1, last);

    if (p >= last || *p != '{') {
        goto level1;
    }

    /* a (new) usage object: its values replace any before */

    memset(u->tokens, 0, sizeof(u->tokens));
    u->seen = 0;
    u->found = 0;

    for (m = p + 1; ; m = p + 1) {
        p = or_json_ws(m, last);

        if (p >= last) {
            goto level2;
        }

        if (*p == '}') {
            break;
        }

        if (*p != '"') {
            goto level2;
        }

        q = or_run_plain(p + 1, last);

        if (q >= last || *q != '"') {
            goto level2;
        }

        n = q - (p + 1);
        key = (n <= OR_USAGE_KEY_MAX) ? or_usage_key2(p + 1, n)
                                      : OR_UK_OTHER;

        p = or_json_ws(q + 1, last);

        if (p >= last || *p != ':') {
            goto level2;
        }

        p = or_json_ws(p + 1, last);

        if (p < last && *p == '{') {
            /* a details object: its numbers at level 3 */
            q = or_usage_details(u, key, p + 1, last);

            if (q == NULL) {
                goto level2;
            }

            p = q;

            if (*p == '}') {
                break;
            }

            continue;
        }

        q = or_usage_number(p, last, &number);

        if (q == NULL) {
            goto level2;
        }

        kind = -1;

        switch (key) {
        case OR_UK_PROMPT:
            kind = OR_USAGE_PROMPT;
            break;
        case OR_UK_COMPLETION:
            kind = OR_USAGE_COMPLETION;
            break;
        case OR_UK_CACHED:
            kind = OR_USAGE_CACHED;
            break;
        case OR_UK_REASONING:
            kind = OR_USAGE_REASONING;
            break;
        default:
            break;
        }

        if (kind >= 0) {
            u->tokens[kind] = number;
            u->seen |= 1u << kind;
        }

        p = q;

        if (*p == '}') {
            break;
        }
    }

    /* the object closed */

    u->found = 1;

    q = or_json_ws(p + 1, last);

    if (q < last && *q == '}') {
        /* and the document with it, as the lexer would end it */
        u->state = OR_USAGE_COMPLETE;
        return q + 1;
    }

    /* the lexer after a value at level 1 */

    u->depth = 1;
    u->arrays = 0;
    u->key[1] = OR_UK_USAGE;
    u->lex = OR_UL_AFTER;

    return p + 1;

level2:

    /* the lexer's state at a member's start in the usage object */

    u->depth = 2;
    u->arrays = 0;
    u->key[1] = OR_UK_USAGE;
    u->key[2] = OR_UK_OTHER;
    u->in_usage = 2;
    u->lex = OR_UL_KEY_START;

    return m;

level1:

    u->depth = 1;
    u->arrays = 0;
    u->key[1] = OR_UK_OTHER;
    u->lex = OR_UL_KEY_START;

    return m;
}


/* where the lexer goes on (u in its state there), NULL: at p */

static const char *
or_usage_members(or_usage_t *u, const char *p, const char *last)
{
    p = or_json_ws(p, last);

    if (p >= last || *p != '{') {
        return NULL;
    }

    return or_usage_from(u, p + 1, last);
}


/* the top-level object's members from m (after its "{" or a ",") */

static const char *
or_usage_from(or_usage_t *u, const char *m, const char *last)
{
    size_t       n;
    const char  *p, *q;

    for ( ;; m = p + 1) {
        /* m: a member's start, after "{" or "," */

        p = or_json_ws(m, last);

        if (p >= last || *p != '"') {
            break;
        }

        q = or_run_plain(p + 1, last);
        n = q - (p + 1);

        if (q < last && *q == '"' && n >= sizeof("usage") - 1
            && memcmp(p + 1, "usage", sizeof("usage") - 1) == 0
            && (n == sizeof("usage") - 1
                || (n == sizeof("usageMetadata") - 1
                    && memcmp(p + 1, "usageMetadata", n) == 0)))
        {
            return or_usage_object(u, m, q + 1, last);
        }

        /* past the key: read already, but where it has an escape */
        p = (q < last && *q == '"') ? q + 1 : or_usage_skip(p, last, 1);

        if (p == NULL) {
            break;
        }

        p = or_json_ws(p, last);

        if (p >= last || *p != ':') {
            break;
        }

        p = or_usage_skip(p + 1, last, 1);

        if (p == NULL) {
            break;
        }

        p = or_json_ws(p, last);

        if (p < last && *p == '}') {
            /* the document ended without a usage member */
            u->state = OR_USAGE_COMPLETE;
            return p + 1;
        }

        if (p >= last || *p != ',') {
            break;
        }
    }

    /* the lexer's state after the object's "{" or a "," at level 1 */

    u->depth = 1;
    u->arrays = 0;
    u->key[1] = OR_UK_OTHER;
    u->lex = OR_UL_KEY_START;

    return m;
}


void
or_usage_feed(or_usage_t *u, const char *p, size_t len)
{
    const char  *m;

    if (u->state != OR_USAGE_SCANNING || len == 0) {
        return;
    }

    if (u->fed == 0 && u->lex == OR_UL_VALUE
        && (u->max == 0 || len <= u->max))
    {
        m = or_usage_members(u, p, p + len);

        if (m) {
            u->fed = m - p;
            len -= m - p;
            p = m;

            if (u->state != OR_USAGE_SCANNING) {
                u->fed += len;
                return;
            }
        }
    }

    or_usage_scan(u, p, len);
}
