/*
 * Copyright (C) ngx_omniroute authors
 *
 * The start of a conversation; see or_prefix.h.  A small skipping
 * walker: strings (escapes), nesting (one counter: the body was
 * validated), scalars; it never reads past the bound and gives up on
 * anything unexpected.
 */


#include <string.h>

#include "or_prefix.h"


typedef struct {
    const char  *buf;
    size_t       len;           /* bytes it may look at */
} or_walk_t;


static size_t or_walk_ws(const or_walk_t *w, size_t p);
static size_t or_walk_string(const or_walk_t *w, size_t p);
static size_t or_walk_value(const or_walk_t *w, size_t p);
static int or_walk_key_is(const or_walk_t *w, size_t start, size_t end,
    const char *name);
static int or_prefix_walk(const char *buf, size_t len, size_t max_scan,
    size_t max_span, or_prefix_t *out);
static size_t or_walk_array(const or_walk_t *w, size_t p, int *user);
static size_t or_walk_is_user(const or_walk_t *w, size_t p, int *user);


#define OR_WALK_FAIL  ((size_t) -1)


static size_t
or_walk_ws(const or_walk_t *w, size_t p)
{
    while (p < w->len
           && (w->buf[p] == ' ' || w->buf[p] == '\t' || w->buf[p] == '\n'
               || w->buf[p] == '\r'))
    {
        p++;
    }

    return p;
}


/* p at '"': one past the closing quote */

static size_t
or_walk_string(const or_walk_t *w, size_t p)
{
    const char  *q, *end;

    if (p >= w->len || w->buf[p] != '"') {
        return OR_WALK_FAIL;
    }

    end = w->buf + w->len;

    for (q = w->buf + p + 1; q < end; q++) {
        if (*q == '\\') {
            q++;
            continue;
        }

        if (*q == '"') {
            return (size_t) (q - w->buf) + 1;
        }
    }

    return OR_WALK_FAIL;
}


/* p at a value: one past it */

static size_t
or_walk_value(const or_walk_t *w, size_t p)
{
    char    c;
    size_t  depth;

    if (p >= w->len) {
        return OR_WALK_FAIL;
    }

    c = w->buf[p];

    if (c == '"') {
        return or_walk_string(w, p);
    }

    if (c != '{' && c != '[') {
        /* number, true, false, null */

        while (p < w->len) {
            c = w->buf[p];

            if (c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t'
                || c == '\n' || c == '\r')
            {
                return p;
            }

            p++;
        }

        return OR_WALK_FAIL;
    }

    depth = 0;

    while (p < w->len) {
        c = w->buf[p];

        if (c == '"') {
            p = or_walk_string(w, p);

            if (p == OR_WALK_FAIL) {
                return OR_WALK_FAIL;
            }

            continue;
        }

        if (c == '{' || c == '[') {
            depth++;

        } else if (c == '}' || c == ']') {
            if (--depth == 0) {
                return p + 1;
            }
        }

        p++;
    }

    return OR_WALK_FAIL;
}


/* the key span [start, end) (quotes included) is "name", unescaped */

static int
or_walk_key_is(const or_walk_t *w, size_t start, size_t end,
    const char *name)
{
    size_t  n;

    n = strlen(name);

    return end - start == n + 2 && memcmp(w->buf + start + 1, name, n) == 0;
}


/*
 * p at an object: one past it; *user: its top-level "role" is "user"
 */

static size_t
or_walk_is_user(const or_walk_t *w, size_t p, int *user)
{
    size_t  k, v;

    *user = 0;
    p = or_walk_ws(w, p + 1);

    if (p < w->len && w->buf[p] == '}') {
        return p + 1;
    }

    for ( ;; ) {
        k = p;
        p = or_walk_string(w, p);

        if (p == OR_WALK_FAIL) {
            return OR_WALK_FAIL;
        }

        p = or_walk_ws(w, p);

        if (p >= w->len || w->buf[p] != ':') {
            return OR_WALK_FAIL;
        }

        v = or_walk_ws(w, p + 1);
        p = or_walk_value(w, v);

        if (p == OR_WALK_FAIL) {
            return OR_WALK_FAIL;
        }

        if (or_walk_key_is(w, k, or_walk_string(w, k), "role")
            && p - v == sizeof("\"user\"") - 1
            && memcmp(w->buf + v, "\"user\"", p - v) == 0)
        {
            *user = 1;
        }

        p = or_walk_ws(w, p);

        if (p >= w->len) {
            return OR_WALK_FAIL;
        }

        if (w->buf[p] == '}') {
            return p + 1;
        }

        if (w->buf[p] != ',') {
            return OR_WALK_FAIL;
        }

        p = or_walk_ws(w, p + 1);
    }
}


/*
 * p at '[': one past the first element whose role is "user" (*user = 1),
 * else one past the array
 */

static size_t
or_walk_array(const or_walk_t *w, size_t p, int *user)
{
    int     is;

    *user = 0;
    p = or_walk_ws(w, p + 1);

    if (p < w->len && w->buf[p] == ']') {
        return p + 1;
    }

    for ( ;; ) {
        if (p >= w->len) {
            return OR_WALK_FAIL;
        }

        if (w->buf[p] == '{') {
            p = or_walk_is_user(w, p, &is);

        } else {
            is = 0;
            p = or_walk_value(w, p);
        }

        if (p == OR_WALK_FAIL) {
            return OR_WALK_FAIL;
        }

        if (is) {
            *user = 1;
            return p;
        }

        p = or_walk_ws(w, p);

        if (p >= w->len) {
            return OR_WALK_FAIL;
        }

        if (w->buf[p] == ']') {
            return p + 1;
        }

        if (w->buf[p] != ',') {
            return OR_WALK_FAIL;
        }

        p = or_walk_ws(w, p + 1);
    }
}


int
or_prefix_find(const char *buf, size_t len, size_t max_scan,
    size_t max_span, or_prefix_t *out)
{
    memset(out, 0, sizeof(or_prefix_t));

    if (!or_prefix_walk(buf, len, max_scan, max_span, out)) {
        memset(out, 0, sizeof(or_prefix_t));
        return 0;
    }

    return 1;
}


static int
or_prefix_walk(const char *buf, size_t len, size_t max_scan,
    size_t max_span, or_prefix_t *out)
{
    int        user;
    size_t     p, k, ke, v, e, cut;
    or_walk_t  w, aw;

    w.buf = buf;
    w.len = (len < max_scan) ? len : max_scan;

    p = or_walk_ws(&w, 0);

    if (p >= w.len || buf[p] != '{') {
        return 0;
    }

    p = or_walk_ws(&w, p + 1);

    while (p < w.len && buf[p] != '}') {
        k = p;
        ke = or_walk_string(&w, k);

        if (ke == OR_WALK_FAIL) {
            goto done;
        }

        p = or_walk_ws(&w, ke);

        if (p >= w.len || buf[p] != ':') {
            goto done;
        }

        v = or_walk_ws(&w, p + 1);

        if (v >= w.len) {
            goto done;
        }

        if (out->messages.end == 0
            && (or_walk_key_is(&w, k, ke, "messages")
                || or_walk_key_is(&w, k, ke, "input")))
        {
            /* the span is bounded by max_span, the walk by max_scan */

            aw = w;
            cut = (v + max_span < w.len) ? v + max_span : w.len;

            if (buf[v] == '[') {
                aw.len = cut;
                e = or_walk_array(&aw, v, &user);
                out->complete = (e != OR_WALK_FAIL);

            } else if (buf[v] == '"') {
                aw.len = cut;
                e = or_walk_string(&aw, v);
                out->complete = (e != OR_WALK_FAIL);

            } else {
                goto done;
            }

            out->messages.start = v;
            out->messages.end = out->complete ? e : cut;

            if (!out->complete) {
                /* the span is cut: the walk cannot go on past it */
                return 1;
            }

            /* on after the whole value, for a "system" after it */

            p = or_walk_value(&w, v);

            if (p == OR_WALK_FAIL) {
                return 1;
            }

        } else {
            e = or_walk_value(&w, v);

            if (e == OR_WALK_FAIL) {
                goto done;
            }

            if (out->system.end == 0
                && (or_walk_key_is(&w, k, ke, "system")
                    || or_walk_key_is(&w, k, ke, "instructions")))
            {
                out->system.start = v;
                out->system.end = (e - v > max_span) ? v + max_span : e;
            }

            p = e;
        }

        p = or_walk_ws(&w, p);

        if (p >= w.len) {
            break;
        }

        if (buf[p] == ',') {
            p = or_walk_ws(&w, p + 1);
            continue;
        }

        if (buf[p] != '}') {
            break;
        }
    }

done:

    return out->messages.end != 0;
}
