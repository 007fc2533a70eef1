/*
 * Copyright (C) ngx_omniroute authors
 *
 * A one-pass JSON body scanner: validates a whole document against RFC
 * 8259 and reports where the top-level "model", "stream",
 * "stream_options", "background" and "tools" members are (key and value
 * as byte spans), without building a tree or allocating anything; it also
 * counts the elements of the top-level "tools" array (tool-limit
 * backoff).  Iterative (the nesting stack is a fixed bit array), total on
 * any input.
 * or_json_find() looks up one member of an object the same way (for an
 * object value the scan reported, such as "stream_options").
 *
 * Beyond the RFC, only a duplicated top-level "model" and a top-level
 * member spelled as one of those but for case ("Model") are refused (the
 * document is otherwise fully validated first).  Everything the RFC allows
 * is accepted, also where jansson refuses: integers beyond int64, 1e400,
 * \u0000, lone surrogate escapes such as \uD800.
 *
 * The primitives of reading JSON without validating it (whitespace, a
 * string's end, a value skipped, a code point's UTF-8) are here too,
 * inline: the scanner's own and those of the tolerant reader of stream
 * events (or_sse_format.c), on its per-event path.
 */

#ifndef _OR_JSON_H_INCLUDED_
#define _OR_JSON_H_INCLUDED_


#include <stddef.h>
#include <stdint.h>

#include "or_run.h"


#define OR_JSON_MAX_DEPTH  2048   /* jansson's own limit */
#define OR_JSON_FIND_MAX   32     /* longest key or_json_find() compares */


typedef enum {
    OR_JSON_OK = 0,
    OR_JSON_EMPTY,          /* only whitespace or nothing */
    OR_JSON_SYNTAX,         /* not valid JSON (RFC 8259); error_at says where */
    OR_JSON_NOT_OBJECT,     /* valid JSON, but the top level is not an object */
    OR_JSON_DUP_MODEL,      /* the top-level "model" member appears twice */
    OR_JSON_TOO_DEEP,       /* nesting deeper than OR_JSON_MAX_DEPTH */
    OR_JSON_CASE_VARIANT    /* a top-level member differs only by case
                               from one the scan reports ("Model") */
} or_json_rc_e;


typedef enum {
    OR_JSON_ABSENT = 0,
    OR_JSON_STRING,
    OR_JSON_NUMBER,
    OR_JSON_TRUE,
    OR_JSON_FALSE,
    OR_JSON_NULL,
    OR_JSON_OBJECT,
    OR_JSON_ARRAY
} or_json_type_e;


typedef struct {
    size_t          start;      /* offset of the value's first byte (the
                                   opening quote for a string) */
    size_t          end;        /* one past its last byte (after the
                                   closing quote) */
    or_json_type_e  type;       /* OR_JSON_ABSENT: no such top-level
                                   member; start and end are then 0 */
    size_t          key;        /* offset of the member's key (its
                                   opening quote); 0 when ABSENT */
    unsigned        escaped:1;  /* a string containing at least one
                                   backslash escape */
    unsigned        dup:1;      /* the member appears more than once */
} or_json_value_t;


typedef struct {
    or_json_value_t  model;     /* top-level "model" (the first one) */
    or_json_value_t  stream;    /* top-level "stream" (the last one) */
    or_json_value_t  stream_options;    /* (the last one) */
    or_json_value_t  background;        /* (the last one) */
    or_json_value_t  tools;             /* (the last one) */
    size_t           tools_count;   /* elements of that "tools" when it
                                       is an array, else 0 (R-TOOL-3) */
    size_t           error_at;  /* SYNTAX/TOO_DEEP/DUP_MODEL: offset of
                                   the problem, else 0 */
    const char      *error;     /* a short static English description
                                   ("unexpected character", "invalid
                                   escape", "invalid UTF-8", ...);
                                   NULL for OK and NOT_OBJECT */
} or_json_scan_t;


/*
 * Scans buf[0, len).  A value span is filled in whatever the outcome, as
 * far as the scan got (a value is only reported once it is complete).
 *
 * error_at:
 *   OR_JSON_SYNTAX     the length of the longest prefix of buf that can
 *                      still begin a valid document, i.e. the offset of
 *                      the first offending byte, or len when the input
 *                      ends too early ("unexpected end of input",
 *                      "unterminated string")
 *   OR_JSON_TOO_DEEP   the offset of the '[' or '{' one level too deep
 *   OR_JSON_DUP_MODEL  the offset of the second "model" key's opening
 *                      quote; returned only when the document is
 *                      otherwise valid (syntax errors take precedence);
 *                      out->model is then the first one
 *   OR_JSON_CASE_VARIANT the offset of the first top-level key that is
 *                      not one of "model", "stream", "stream_options",
 *                      "background", "tools" but folds to one of them
 *                      as a case-insensitive decoder would (ASCII case,
 *                      and U+017F, U+212A, U+0130, U+0131 as s, k, i,
 *                      i): "Model", "STREAM", "\u017Ftream"; returned
 *                      only for an otherwise valid document without a
 *                      duplicated "model"; the spans are those of the
 *                      members spelled exactly
 *
 * Top-level keys are compared decoded ("mod\u0065l" is "model"); keys of
 * nested objects are not compared at all.
 */
or_json_rc_e or_json_scan(const char *buf, size_t len, or_json_scan_t *out);

/*
 * The last member named key[0, key_len) of the object buf[0, len) (keys
 * compared decoded; nested objects not looked into), as or_json_scan()
 * reports a top-level member: out->type OR_JSON_ABSENT when there is
 * none, out->dup when there are several.  Returns what or_json_scan()
 * would for the document (never OR_JSON_DUP_MODEL); a key longer than
 * OR_JSON_FIND_MAX is never found.
 */
or_json_rc_e or_json_find(const char *buf, size_t len, const char *key,
    size_t key_len, or_json_value_t *out);

/*
 * Decodes a string value span (quotes included, as or_json_scan reports
 * it) to UTF-8 into out, which must hold span_len (end - start) bytes;
 * at most span_len - 2 are written.  \u0000 decodes to a NUL
 * byte; a lone surrogate escape (\uD800 not followed by a \uDC00-\uDFFF
 * escape, or a lone \uDC00-\uDFFF) decodes to U+FFFD.  Raw bytes are
 * copied as they are (their UTF-8 is not re-checked).  Returns the
 * decoded length, or -1 when the span is not a quoted string with valid
 * escapes and no raw control character.
 */
long or_json_string_decode(const char *span, size_t span_len, char *out);

/*
 * A raw string as a JSON string literal, quotes included: '"' and '\\'
 * are escaped, control characters < 0x20 become \b \f \n \r \t or
 * \u00XX; every other byte (UTF-8 included) is copied as it is.
 * or_json_quoted_len() is the exact length or_json_quote() writes.
 */
size_t or_json_quoted_len(const char *s, size_t len);
char *or_json_quote(char *dst, const char *s, size_t len);

/*
 * "ok", "empty", "syntax", "not_object", "dup_model", "too_deep",
 * "case_variant"
 */
const char *or_json_rc_name(or_json_rc_e rc);

/* "absent", "string", "number", "true", "false", "null", "object", "array" */
const char *or_json_type_name(or_json_type_e type);


/*
 * Reading JSON without validating it: total on any input, never past
 * last; NULL where a value cannot be read (cut short, or not JSON).
 */

/* past the whitespace at p */

static inline const char *
or_json_ws(const char *p, const char *last)
{
    if (p < last && (unsigned char) *p > ' ') {
        /* the common case: no whitespace */
        return p;
    }

    while (p < last
           && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
    {
        p++;
    }

    return p;
}


/*
 * Past the string at p (at its opening '"'), NULL if it does not end; an
 * escape's byte is never the end, escapes and bytes are not checked.
 */

static inline const char *
or_json_string_end(const char *p, const char *last)
{
    p++;

    for ( ;; ) {
        p = or_run_plain(p, last);

        if (p >= last) {
            return NULL;
        }

        if (*p == '"') {
            return p + 1;
        }

        /* an escape: the byte after the backslash is not the end */
        p += 2;
    }
}


/*
 * Past the value at p (whitespace before it skipped), NULL if it does not
 * end or nests more than depth arrays and objects.  A number or literal
 * is whatever runs up to the next ',', '}', ']' or whitespace.
 */

static inline const char *
or_json_skip(const char *p, const char *last, int depth)
{
    char  open, close;

    p = or_json_ws(p, last);

    if (p >= last) {
        return NULL;
    }

    switch (*p) {

    case '"':
        return or_json_string_end(p, last);

    case '{':
    case '[':
        if (depth <= 0) {
            return NULL;
        }

        open = *p;
        close = (open == '{') ? '}' : ']';
        p = or_json_ws(p + 1, last);

        if (p < last && *p == close) {
            return p + 1;
        }

        for ( ;; ) {
            p = or_json_ws(p, last);

            if (p >= last) {
                return NULL;
            }

            if (open == '{') {
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

                p++;
            }

            p = or_json_skip(p, last, depth - 1);
            if (p == NULL) {
                return NULL;
            }

            p = or_json_ws(p, last);

            if (p >= last) {
                return NULL;
            }

            if (*p == ',') {
                p++;
                continue;
            }

            if (*p == close) {
                return p + 1;
            }

            return NULL;
        }

    default:
        while (p < last && *p != ',' && *p != '}' && *p != ']' && *p != ' '
               && *p != '\t' && *p != '\r' && *p != '\n')
        {
            p++;
        }

        return p;
    }
}


/* the UTF-8 of code point cp (at most U+10FFFF) at d; returns its end */

static inline char *
or_json_utf8_put(char *d, uint32_t cp)
{
    if (cp < 0x80) {
        *d++ = (char) cp;

    } else if (cp < 0x800) {
        *d++ = (char) (0xc0 | (cp >> 6));
        *d++ = (char) (0x80 | (cp & 0x3f));

    } else if (cp < 0x10000) {
        *d++ = (char) (0xe0 | (cp >> 12));
        *d++ = (char) (0x80 | ((cp >> 6) & 0x3f));
        *d++ = (char) (0x80 | (cp & 0x3f));

    } else {
        *d++ = (char) (0xf0 | (cp >> 18));
        *d++ = (char) (0x80 | ((cp >> 12) & 0x3f));
        *d++ = (char) (0x80 | ((cp >> 6) & 0x3f));
        *d++ = (char) (0x80 | (cp & 0x3f));
    }

    return d;
}


#endif /* _OR_JSON_H_INCLUDED_ */
