/*
 * Copyright (C) ngx_omniroute authors
 *
 * libFuzzer target: or_json_scan() on arbitrary bytes, with jansson as a
 * differential oracle.  Aborts when
 *
 *   - a result breaks an invariant of its own (spans inside the input and
 *     of the reported type, a string span decodes, a value span scans on
 *     its own, error_at is the longest valid prefix: the same bytes cut
 *     there scan to the same error);
 *   - jansson (JSON_DECODE_ANY | JSON_ALLOW_NUL) accepts what the scanner
 *     refuses, or parses a top-level object to another model or stream
 *     (compared decoded and as jansson values), or DUP_MODEL disagrees
 *     with the number of top-level "model" keys (counted member by member
 *     with jansson, which itself keeps the last duplicate), or
 *     CASE_VARIANT disagrees with the top-level keys that fold to a
 *     member read but are not it (folded here on their own, from
 *     jansson's decoded keys: ASCII case, U+017F, U+212A, U+0130, U+0131);
 *   - or_name_check() disagrees with a byte-by-byte reading of the
 *     decoded model, or or_name_escape() writes a byte a log line must
 *     not quote, or more than or_name_escaped_len();
 *   - the scanner accepts what jansson refuses for a reason that is not a
 *     deliberate difference: a NUL byte in a key, an integer or real
 *     overflow, an invalid Unicode escape (lone surrogate), the depth
 *     (jansson counts scalars as a level);
 *   - quoting the input and decoding it back is not the identity, or the
 *     quoted input scans as valid exactly when jansson's json_stringn()
 *     refuses it as invalid UTF-8;
 *   - the body edits of or_splice (the model replaced, stream usage asked
 *     for, "background" removed) do not give a valid object that jansson
 *     parses with those members set and every other member unchanged.
 *
 * One jansson bug is tolerated: a raw NUL byte just after a number or a
 * literal is skipped ("[1\0]" is accepted).
 */


#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "or_json.h"
#include "or_name.h"
#include "or_splice.h"


#define FUZZ_FLAGS  (JSON_DECODE_ANY | JSON_ALLOW_NUL)


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
static void fuzz_invariants(const char *buf, size_t size, or_json_rc_e rc,
    const or_json_scan_t *s);
static void fuzz_value(const char *buf, size_t size,
    const or_json_value_t *v);
static void fuzz_prefix(const char *buf, size_t size, or_json_rc_e rc,
    const or_json_scan_t *s);
static void fuzz_oracle(const char *buf, size_t size, or_json_rc_e rc,
    const or_json_scan_t *s);
static int fuzz_deliberate(const json_error_t *err);
static size_t fuzz_ws(const char *buf, size_t size, size_t p);
static json_t *fuzz_next(const char *buf, size_t size, size_t *p);
static size_t fuzz_walk(const char *buf, size_t size, json_t **model,
    json_t **stream, json_t **tools, size_t *variants);
static int fuzz_variant(const char *k, size_t len);
static void fuzz_name(const char *s, size_t len);
static void fuzz_same(const char *buf, const json_t *j,
    const or_json_value_t *v);
static void fuzz_quote(const char *buf, size_t size);
static void fuzz_splice(const char *buf, size_t size, or_json_rc_e rc,
    const or_json_scan_t *s);
static int fuzz_usage_asked(json_t *root);


static void
fuzz_invariants(const char *buf, size_t size, or_json_rc_e rc,
    const or_json_scan_t *s)
{
    switch (rc) {

    case OR_JSON_OK:
    case OR_JSON_NOT_OBJECT:
        if (s->error != NULL || s->error_at != 0) {
            abort();
        }

        break;

    case OR_JSON_EMPTY:
    case OR_JSON_SYNTAX:
        if (s->error == NULL || s->error_at > size) {
            abort();
        }

        break;

    case OR_JSON_TOO_DEEP:
        if (s->error == NULL || s->error_at >= size
            || (buf[s->error_at] != '[' && buf[s->error_at] != '{'))
        {
            abort();
        }

        break;

    case OR_JSON_DUP_MODEL:
        if (s->error == NULL || s->error_at >= size
            || buf[s->error_at] != '"' || s->model.type == OR_JSON_ABSENT
            || s->error_at < s->model.end)
        {
            abort();
        }

        break;

    case OR_JSON_CASE_VARIANT:
        if (s->error == NULL || s->error_at >= size
            || buf[s->error_at] != '"')
        {
            abort();
        }

        break;

    default:
        abort();
    }

    if (rc == OR_JSON_NOT_OBJECT || rc == OR_JSON_EMPTY) {
        if (s->model.type != OR_JSON_ABSENT
            || s->stream.type != OR_JSON_ABSENT
            || s->tools.type != OR_JSON_ABSENT || s->tools_count != 0)
        {
            abort();
        }
    }

    if (strcmp(or_json_rc_name(rc), "unknown") == 0) {
        abort();
    }

    fuzz_value(buf, size, &s->model);
    fuzz_value(buf, size, &s->stream);
    fuzz_value(buf, size, &s->tools);
    fuzz_value(buf, size, &s->stream_options);
    fuzz_value(buf, size, &s->background);
}


/* a reported value, checked on its own */

static void
fuzz_value(const char *buf, size_t size, const or_json_value_t *v)
{
    long             n;
    char            *d;
    size_t           len;
    const char      *p;
    or_json_rc_e     rc;
    or_json_scan_t   s;

    if (v->type == OR_JSON_ABSENT) {
        if (v->start != 0 || v->end != 0 || v->key != 0 || v->escaped
            || v->dup)
        {
            abort();
        }

        return;
    }

    if (v->start >= v->end || v->end > size || v->key >= v->start
        || buf[v->key] != '"')
    {
        abort();
    }

    p = buf + v->start;
    len = v->end - v->start;

    switch (v->type) {

    case OR_JSON_STRING:
        if (len < 2 || p[0] != '"' || p[len - 1] != '"'
            || v->escaped != (memchr(p, '\\', len) != NULL))
        {
            abort();
        }

        d = malloc(len);
        if (d == NULL) {
            abort();
        }

        n = or_json_string_decode(p, len, d);
        free(d);

        if (n < 0 || (size_t) n > len - 2) {
            abort();
        }

        break;

    case OR_JSON_NUMBER:
        if (p[0] != '-' && (p[0] < '0' || p[0] > '9')) {
            abort();
        }

        break;

    case OR_JSON_TRUE:
        if (len != 4 || memcmp(p, "true", 4) != 0) {
            abort();
        }

        break;

    case OR_JSON_FALSE:
        if (len != 5 || memcmp(p, "false", 5) != 0) {
            abort();
        }

        break;

    case OR_JSON_NULL:
        if (len != 4 || memcmp(p, "null", 4) != 0) {
            abort();
        }

        break;

    case OR_JSON_OBJECT:
        if (p[0] != '{' || p[len - 1] != '}') {
            abort();
        }

        break;

    case OR_JSON_ARRAY:
        if (p[0] != '[' || p[len - 1] != ']') {
            abort();
        }

        break;

    default:
        abort();
    }

    if (v->type != OR_JSON_STRING && v->escaped) {
        abort();
    }

    /* the span alone is a whole document of that value */

    rc = or_json_scan(p, len, &s);

    if (v->type == OR_JSON_OBJECT) {
        if (rc != OR_JSON_OK && rc != OR_JSON_DUP_MODEL
            && rc != OR_JSON_CASE_VARIANT)
        {
            abort();
        }

    } else if (rc != OR_JSON_NOT_OBJECT) {
        abort();
    }
}


/*
 * error_at is where an online scan stops: the input cut just after it
 * fails at the same offset, and cut at it fails no earlier.
 */

static void
fuzz_prefix(const char *buf, size_t size, or_json_rc_e rc,
    const or_json_scan_t *s)
{
    size_t          k;
    or_json_rc_e    prc;
    or_json_scan_t  ps;

    if (rc != OR_JSON_SYNTAX && rc != OR_JSON_TOO_DEEP) {
        return;
    }

    k = s->error_at;

    if (k < size) {
        prc = or_json_scan(buf, k + 1, &ps);

        if (prc != rc || ps.error_at != k || strcmp(ps.error, s->error) != 0)
        {
            abort();
        }
    }

    if (rc == OR_JSON_TOO_DEEP) {
        return;
    }

    prc = or_json_scan(buf, k, &ps);

    switch (prc) {

    case OR_JSON_SYNTAX:
        if (ps.error_at != k) {
            abort();
        }

        break;

    case OR_JSON_OK:
    case OR_JSON_NOT_OBJECT:
    case OR_JSON_DUP_MODEL:
    case OR_JSON_CASE_VARIANT:
    case OR_JSON_EMPTY:
        break;

    default:
        abort();
    }
}


static int
fuzz_deliberate(const json_error_t *err)
{
    switch (json_error_code(err)) {

    case json_error_null_byte_in_key:
    case json_error_numeric_overflow:
    case json_error_stack_overflow:
        return 1;

    case json_error_invalid_syntax:
        return strncmp(err->text, "invalid Unicode '", 17) == 0;

    default:
        return 0;
    }
}


static size_t
fuzz_ws(const char *buf, size_t size, size_t p)
{
    while (p < size
           && (buf[p] == ' ' || buf[p] == '\t' || buf[p] == '\n'
               || buf[p] == '\r'))
    {
        p++;
    }

    return p;
}


/* one value at *p, parsed by jansson alone; *p moves past it */

static json_t *
fuzz_next(const char *buf, size_t size, size_t *p)
{
    json_t        *j;
    json_error_t   err;

    j = json_loadb(buf + *p, size - *p, FUZZ_FLAGS | JSON_DISABLE_EOF_CHECK,
                   &err);
    if (j == NULL || err.position <= 0) {
        abort();
    }

    *p += err.position;

    return j;
}


/*
 * The top-level members of an object jansson accepted, one by one: the
 * number of "model" keys, the first model, the last stream and the last
 * tools.
 */

static size_t
fuzz_walk(const char *buf, size_t size, json_t **model, json_t **stream,
    json_t **tools, size_t *variants)
{
    size_t   p, n;
    json_t  *key, *val;

    *model = NULL;
    *stream = NULL;
    *tools = NULL;
    *variants = 0;
    n = 0;

    p = fuzz_ws(buf, size, 0);

    if (p == size || buf[p] != '{') {
        abort();
    }

    p = fuzz_ws(buf, size, p + 1);

    if (p < size && buf[p] == '}') {
        return 0;
    }

    for ( ;; ) {
        key = fuzz_next(buf, size, &p);
        if (!json_is_string(key)) {
            abort();
        }

        p = fuzz_ws(buf, size, p);

        if (p == size || buf[p] != ':') {
            abort();
        }

        p = fuzz_ws(buf, size, p + 1);
        val = fuzz_next(buf, size, &p);

        *variants += fuzz_variant(json_string_value(key),
                                  json_string_length(key));

        if (json_string_length(key) == 5
            && memcmp(json_string_value(key), "model", 5) == 0)
        {
            if (n++ == 0) {
                *model = json_incref(val);
            }

        } else if (json_string_length(key) == 6
                   && memcmp(json_string_value(key), "stream", 6) == 0)
        {
            json_decref(*stream);
            *stream = json_incref(val);

        } else if (json_string_length(key) == 5
                   && memcmp(json_string_value(key), "tools", 5) == 0)
        {
            json_decref(*tools);
            *tools = json_incref(val);
        }

        json_decref(key);
        json_decref(val);

        p = fuzz_ws(buf, size, p);

        if (p < size && buf[p] == ',') {
            p = fuzz_ws(buf, size, p + 1);
            continue;
        }

        if (p < size && buf[p] == '}') {
            return n;
        }

        abort();
    }
}


/*
 * A key that folds to one of the members read without being it: folded
 * into a buffer first (each of the four non-ASCII letters to its ASCII
 * one, ASCII to lowercase; anything else kept, so it never matches).
 */

static int
fuzz_variant(const char *k, size_t len)
{
    size_t                i, n;
    char                  f[64];
    const unsigned char  *u;
    static const char    *names[] = {
        "model", "stream", "stream_options", "background", "tools", NULL
    };
    const char          **name;

    for (name = names; *name; name++) {
        if (len == strlen(*name) && memcmp(k, *name, len) == 0) {
            return 0;
        }
    }

    u = (const unsigned char *) k;
    n = 0;

    for (i = 0; i < len && n < sizeof(f); n++) {
        if (i + 1 < len && u[i] == 0xc5 && u[i + 1] == 0xbf) {
            f[n] = 's';
            i += 2;

        } else if (i + 1 < len && u[i] == 0xc4
                   && (u[i + 1] == 0xb0 || u[i + 1] == 0xb1))
        {
            f[n] = 'i';
            i += 2;

        } else if (i + 2 < len && u[i] == 0xe2 && u[i + 1] == 0x84
                   && u[i + 2] == 0xaa)
        {
            f[n] = 'k';
            i += 3;

        } else {
            f[n] = (u[i] >= 'A' && u[i] <= 'Z') ? (char) (u[i] + 32)
                                                : (char) u[i];
            i++;
        }
    }

    if (i < len) {
        return 0;
    }

    for (name = names; *name; name++) {
        if (n == strlen(*name) && memcmp(f, *name, n) == 0) {
            return 1;
        }
    }

    return 0;
}


/* R-NAME-1: the check and the escape of a decoded value */

static void
fuzz_name(const char *s, size_t len)
{
    size_t          i, at, n, want_at;
    char           *e;
    or_name_rc_e    rc, want;
    unsigned char   c;

    want = (len == 0) ? OR_NAME_EMPTY : OR_NAME_OK;
    want_at = 0;

    for (i = 0; i < len && i < OR_NAME_MODEL_MAX; i++) {
        c = (unsigned char) s[i];

        if (c < 0x20 || c == 0x7f) {
            want = OR_NAME_CONTROL;
            want_at = i;
            break;
        }

        if (c == 0x20 || c >= 0x80) {
            want = OR_NAME_NOT_PRINTABLE;
            want_at = i;
            break;
        }
    }

    if (want == OR_NAME_OK && len > OR_NAME_MODEL_MAX) {
        want = OR_NAME_TOO_LONG;
        want_at = OR_NAME_MODEL_MAX;
    }

    rc = or_name_check(s, len, OR_NAME_MODEL_MAX, &at);

    if (rc != want || at != want_at
        || (rc == OR_NAME_OK && or_name_has_control(s, len)))
    {
        abort();
    }

    n = or_name_escaped_len(s, len);
    e = malloc(n + 1);
    if (e == NULL) {
        abort();
    }

    if (or_name_escape(e, n, s, len) != n) {
        abort();
    }

    for (i = 0; i < n; i++) {
        c = (unsigned char) e[i];

        if (c < 0x20 || c >= 0x7f || c == '"') {
            abort();
        }
    }

    free(e);
}


/* the scanner's value is jansson's, decoded and as a jansson value */

static void
fuzz_same(const char *buf, const json_t *j, const or_json_value_t *v)
{
    long             n;
    char            *d;
    size_t           len;
    json_t          *k;
    json_error_t     err;
    or_json_type_e   t;

    if (j == NULL) {
        if (v->type != OR_JSON_ABSENT) {
            abort();
        }

        return;
    }

    switch (json_typeof(j)) {

    case JSON_OBJECT:
        t = OR_JSON_OBJECT;
        break;

    case JSON_ARRAY:
        t = OR_JSON_ARRAY;
        break;

    case JSON_STRING:
        t = OR_JSON_STRING;
        break;

    case JSON_INTEGER:
    case JSON_REAL:
        t = OR_JSON_NUMBER;
        break;

    case JSON_TRUE:
        t = OR_JSON_TRUE;
        break;

    case JSON_FALSE:
        t = OR_JSON_FALSE;
        break;

    default:
        t = OR_JSON_NULL;
        break;
    }

    if (v->type != t) {
        abort();
    }

    len = v->end - v->start;

    k = json_loadb(buf + v->start, len, FUZZ_FLAGS, &err);
    if (k == NULL || !json_equal((json_t *) j, k)) {
        abort();
    }

    json_decref(k);

    if (t != OR_JSON_STRING) {
        return;
    }

    d = malloc(len);
    if (d == NULL) {
        abort();
    }

    n = or_json_string_decode(buf + v->start, len, d);

    if (n < 0 || (size_t) n != json_string_length(j)
        || memcmp(d, json_string_value(j), n) != 0)
    {
        abort();
    }

    free(d);
}


static void
fuzz_oracle(const char *buf, size_t size, or_json_rc_e rc,
    const or_json_scan_t *s)
{
    size_t         n, variants;
    json_t        *root, *model, *stream, *tools;
    json_error_t   err;

    root = json_loadb(buf, size, FUZZ_FLAGS, &err);

    if (root == NULL) {
        if ((rc == OR_JSON_OK || rc == OR_JSON_NOT_OBJECT
             || rc == OR_JSON_DUP_MODEL || rc == OR_JSON_CASE_VARIANT)
            && !fuzz_deliberate(&err))
        {
            abort();
        }

        return;
    }

    /* jansson's bug: a NUL byte after a number or literal is skipped */

    if (rc == OR_JSON_SYNTAX && s->error_at < size
        && buf[s->error_at] == '\0')
    {
        json_decref(root);
        return;
    }

    if (!json_is_object(root)) {
        if (rc != OR_JSON_NOT_OBJECT) {
            abort();
        }

        json_decref(root);
        return;
    }

    if (rc != OR_JSON_OK && rc != OR_JSON_DUP_MODEL
        && rc != OR_JSON_CASE_VARIANT)
    {
        abort();
    }

    n = fuzz_walk(buf, size, &model, &stream, &tools, &variants);

    if ((n >= 2) != (rc == OR_JSON_DUP_MODEL)) {
        abort();
    }

    /* R-NAME-2: a duplicated model takes precedence */

    if ((n < 2 && variants > 0) != (rc == OR_JSON_CASE_VARIANT)) {
        abort();
    }

    if (json_is_string(model)) {
        fuzz_name(json_string_value(model), json_string_length(model));
    }

    /* jansson keeps the last duplicate; the walk has the first */

    if (n == 1 && !json_equal(model, json_object_get(root, "model"))) {
        abort();
    }

    fuzz_same(buf, model, &s->model);
    fuzz_same(buf, stream, &s->stream);
    fuzz_same(buf, tools, &s->tools);

    /* R-TOOL-3: the elements of the last top-level "tools" array */

    if (s->tools_count != (json_is_array(tools) ? json_array_size(tools) : 0))
    {
        abort();
    }

    /* jansson keeps the last duplicate, as the scanner does here */
    fuzz_same(buf, json_object_get(root, "stream_options"),
              &s->stream_options);
    fuzz_same(buf, json_object_get(root, "background"), &s->background);

    json_decref(model);
    json_decref(stream);
    json_decref(tools);
    json_decref(root);
}


static void
fuzz_quote(const char *buf, size_t size)
{
    long             n;
    char            *q, *d, *e;
    size_t           qlen;
    json_t          *j;
    or_json_rc_e     rc;
    or_json_scan_t   s;

    qlen = or_json_quoted_len(buf, size);

    q = malloc(qlen);
    d = malloc(qlen);
    if (q == NULL || d == NULL) {
        abort();
    }

    e = or_json_quote(q, buf, size);

    if ((size_t) (e - q) != qlen) {
        abort();
    }

    n = or_json_string_decode(q, qlen, d);

    if (n < 0 || (size_t) n != size || memcmp(d, buf, size) != 0) {
        abort();
    }

    /* valid exactly when the input is valid UTF-8 */

    rc = or_json_scan(q, qlen, &s);
    j = json_stringn(buf, size);

    if (rc == OR_JSON_NOT_OBJECT) {
        if (j == NULL) {
            abort();
        }

    } else if (rc != OR_JSON_SYNTAX || j != NULL
               || strcmp(s.error, "invalid UTF-8") != 0)
    {
        abort();
    }

    json_decref(j);
    free(q);
    free(d);
}


/* stream_options.include_usage is true */

static int
fuzz_usage_asked(json_t *root)
{
    json_t  *so;

    so = json_object_get(root, "stream_options");

    return json_is_object(so)
           && json_is_true(json_object_get(so, "include_usage"));
}


static void
fuzz_splice(const char *buf, size_t size, or_json_rc_e rc,
    const or_json_scan_t *s)
{
    char               *out;
    size_t              n, expect;
    json_t             *root, *edited, *v;
    const char         *key;
    or_splice_t         sp;
    json_error_t        err;
    or_json_scan_t      s2;
    or_splice_usage_e   u, told;

    if (rc != OR_JSON_OK) {
        return;
    }

    or_splice_init(&sp);

    if (s->model.type == OR_JSON_STRING
        && or_splice_add(&sp, s->model.start, s->model.end, "\"fz\"", 4)
           != 0)
    {
        abort();
    }

    told = or_splice_stream_usage(NULL, buf, size, s);
    u = or_splice_stream_usage(&sp, buf, size, s);

    if (u != told) {
        abort();
    }

    if (s->background.type != OR_JSON_ABSENT
        && or_splice_remove(&sp, buf, size, &s->background) != 0)
    {
        abort();
    }

    n = or_splice_len(&sp, size);

    out = malloc(n + 1);
    if (out == NULL) {
        abort();
    }

    if (or_splice_apply(&sp, buf, size, out) != n) {
        abort();
    }

    /* the scanner's view of the edited body */

    if (or_json_scan(out, n, &s2) != OR_JSON_OK
        || (s->model.type == OR_JSON_STRING
            && (s2.model.end - s2.model.start != 4
                || memcmp(out + s2.model.start, "\"fz\"", 4) != 0))
        || (u != OR_SPLICE_USAGE_NONE
            && or_splice_stream_usage(NULL, out, n, &s2)
               != OR_SPLICE_USAGE_ASKED)
        || (s->background.type != OR_JSON_ABSENT && !s->background.dup
            && s2.background.type != OR_JSON_ABSENT))
    {
        abort();
    }

    /* jansson's: the edited members set, every other one unchanged */

    root = json_loadb(buf, size, FUZZ_FLAGS, &err);

    if (root == NULL) {
        free(out);
        return;             /* a deliberate difference (fuzz_oracle) */
    }

    edited = json_loadb(out, n, FUZZ_FLAGS, &err);

    if (edited == NULL || !json_is_object(edited)) {
        abort();
    }

    v = json_object_get(edited, "model");

    if (s->model.type == OR_JSON_STRING
        && (!json_is_string(v) || strcmp(json_string_value(v), "fz") != 0))
    {
        abort();
    }

    if ((u == OR_SPLICE_USAGE_ASKED && !fuzz_usage_asked(root))
        || (u != OR_SPLICE_USAGE_NONE && !fuzz_usage_asked(edited))
        || (u == OR_SPLICE_USAGE_NONE && fuzz_usage_asked(root) != 0
            && json_is_true(json_object_get(root, "stream"))))
    {
        abort();
    }

    if (s->background.type != OR_JSON_ABSENT && !s->background.dup
        && json_object_get(edited, "background") != NULL)
    {
        abort();
    }

    expect = json_object_size(root);

    if (s->background.type != OR_JSON_ABSENT && !s->background.dup) {
        expect--;
    }

    if (u == OR_SPLICE_USAGE_ADDED
        && s->stream_options.type == OR_JSON_ABSENT)
    {
        expect++;
    }

    if (json_object_size(edited) != expect) {
        abort();
    }

    json_object_foreach(root, key, v) {
        if (strcmp(key, "model") == 0 || strcmp(key, "stream_options") == 0
            || strcmp(key, "background") == 0)
        {
            continue;
        }

        if (!json_equal(v, json_object_get(edited, key))) {
            abort();
        }
    }

    json_decref(root);
    json_decref(edited);
    free(out);
}


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char      *buf;
    or_json_rc_e     rc;
    or_json_scan_t   s;

    buf = (const char *) data;

    rc = or_json_scan(buf, size, &s);

    fuzz_invariants(buf, size, rc, &s);
    fuzz_prefix(buf, size, rc, &s);
    fuzz_oracle(buf, size, rc, &s);
    fuzz_quote(buf, size);
    fuzz_splice(buf, size, rc, &s);

    return 0;
}
