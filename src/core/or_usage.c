/*
 * Copyright (C) ngx_omniroute authors
 */


#include <string.h>

#include "or_usage.h"
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


static const or_usage_key_t  or_usage_keys[] = {
    { "usage", 5, 1, 0, OR_UK_USAGE },
    { "usageMetadata", 13, 1, 0, OR_UK_USAGE },

    /* OpenAI chat, Anthropic messages, OpenAI Responses */
    { "prompt_tokens", 13, 2, 0, OR_UK_PROMPT },
    { "input_tokens", 12, 2, 0, OR_UK_PROMPT },
    { "completion_tokens", 17, 2, 0, OR_UK_COMPLETION },
    { "output_tokens", 13, 2, 0, OR_UK_COMPLETION },
    { "cache_read_input_tokens", 23, 2, 0, OR_UK_CACHED },
    { "prompt_tokens_details", 21, 2, 0, OR_UK_IN_DETAILS },
    { "input_tokens_details", 20, 2, 0, OR_UK_IN_DETAILS },
    { "completion_tokens_details", 25, 2, 0, OR_UK_OUT_DETAILS },
    { "output_tokens_details", 21, 2, 0, OR_UK_OUT_DETAILS },
    { "cached_tokens", 13, 3, OR_UK_IN_DETAILS, OR_UK_CACHED },
    { "reasoning_tokens", 16, 3, OR_UK_OUT_DETAILS, OR_UK_REASONING },

    /* Gemini */
    { "promptTokenCount", 16, 2, 0, OR_UK_PROMPT },
    { "candidatesTokenCount", 20, 2, 0, OR_UK_COMPLETION },
    { "cachedContentTokenCount", 23, 2, 0, OR_UK_CACHED },
    { "thoughtsTokenCount", 18, 2, 0, OR_UK_REASONING },

    { NULL, 0, 0, 0, 0 }
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

    for (p = data; p < last; p = q + 1) {
        q = memchr(p, '"', last - p);

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

    /* {"usage": {...} ...: the object's own members end the scan */

    or_usage_feed(u, "{", 1);
    or_usage_feed(u, key, last - key);

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


void
or_usage_feed(or_usage_t *u, const char *p, size_t len)
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
