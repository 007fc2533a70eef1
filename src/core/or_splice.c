/*
 * Copyright (C) ngx_omniroute authors
 *
 * Edits of a scanned JSON body; see or_splice.h.
 */


#include <string.h>

#include "or_splice.h"


#define OR_SPLICE_ASK_MEMBER   ",\"stream_options\":{\"include_usage\":true}"
#define OR_SPLICE_ASK_OBJECT   "{\"include_usage\":true}"
#define OR_SPLICE_ASK_FIRST    "\"include_usage\":true,"
#define OR_SPLICE_TRUE         "true"

#define or_splice_str(s)       s, sizeof(s) - 1


static int or_splice_ws(char c);


static const char  *or_splice_usage_names[] = {
    "none", "asked", "added"
};


void
or_splice_init(or_splice_t *sp)
{
    sp->n = 0;
}


int
or_splice_add(or_splice_t *sp, size_t start, size_t end, const char *data,
    size_t len)
{
    size_t             i;
    or_splice_edit_t  *e;

    if (sp->n == OR_SPLICE_MAX || end < start) {
        return -1;
    }

    /*
     * The first edit that goes after this one, by (start, not empty): an
     * insertion goes before a removal or replacement at its position.
     */

    for (i = 0; i < sp->n; i++) {
        e = &sp->edit[i];

        if (e->start > start
            || (e->start == start && e->end > e->start && start == end))
        {
            break;
        }

        if (e->start == start && (e->end > e->start) == (end > start)) {
            return -1;          /* two at one place */
        }
    }

    /* no overlap with the one before, nor with the one after */

    if ((i > 0 && sp->edit[i - 1].end > start)
        || (i < sp->n && end > sp->edit[i].start))
    {
        return -1;
    }

    memmove(&sp->edit[i + 1], &sp->edit[i],
            (sp->n - i) * sizeof(or_splice_edit_t));

    e = &sp->edit[i];
    e->start = start;
    e->end = end;
    e->data = data;
    e->len = len;

    sp->n++;

    return 0;
}


or_splice_usage_e
or_splice_stream_usage(or_splice_t *sp, const char *buf, size_t len,
    const or_json_scan_t *scan)
{
    size_t                  start, end, p, dlen;
    const char             *data;
    or_json_value_t         iu;
    const or_json_value_t  *so;

    if (scan->stream.type != OR_JSON_TRUE) {
        return OR_SPLICE_USAGE_NONE;
    }

    so = &scan->stream_options;

    switch (so->type) {

    case OR_JSON_ABSENT:
        /* "stream":true,"stream_options":{"include_usage":true} */
        start = scan->stream.end;
        end = start;
        data = OR_SPLICE_ASK_MEMBER;
        dlen = sizeof(OR_SPLICE_ASK_MEMBER) - 1;
        break;

    case OR_JSON_NULL:
        start = so->start;
        end = so->end;
        data = OR_SPLICE_ASK_OBJECT;
        dlen = sizeof(OR_SPLICE_ASK_OBJECT) - 1;
        break;

    case OR_JSON_OBJECT:
        if (so->end > len
            || or_json_find(buf + so->start, so->end - so->start,
                            or_splice_str("include_usage"), &iu)
               != OR_JSON_OK)
        {
            return OR_SPLICE_USAGE_NONE;
        }

        if (iu.type == OR_JSON_TRUE) {
            return OR_SPLICE_USAGE_ASKED;
        }

        if (iu.type != OR_JSON_ABSENT) {
            /* false, null, "true", ...: not asked; the last one counts */
            start = so->start + iu.start;
            end = so->start + iu.end;
            data = OR_SPLICE_TRUE;
            dlen = sizeof(OR_SPLICE_TRUE) - 1;
            break;
        }

        for (p = so->start + 1; p < so->end && or_splice_ws(buf[p]); p++) {
            /* void */
        }

        if (p + 1 == so->end) {
            /* {} with or without whitespace */
            start = so->start;
            end = so->end;
            data = OR_SPLICE_ASK_OBJECT;
            dlen = sizeof(OR_SPLICE_ASK_OBJECT) - 1;

        } else {
            start = so->start + 1;
            end = start;
            data = OR_SPLICE_ASK_FIRST;
            dlen = sizeof(OR_SPLICE_ASK_FIRST) - 1;
        }

        break;

    default:
        /* a string, number, array or boolean: the provider's to refuse */
        return OR_SPLICE_USAGE_NONE;
    }

    if (sp != NULL && or_splice_add(sp, start, end, data, dlen) != 0) {
        return OR_SPLICE_USAGE_NONE;
    }

    return OR_SPLICE_USAGE_ADDED;
}


int
or_splice_remove(or_splice_t *sp, const char *buf, size_t len,
    const or_json_value_t *v)
{
    size_t  start, end, p;

    if (v->type == OR_JSON_ABSENT || v->end > len || v->key >= v->start) {
        return -1;
    }

    start = v->key;
    end = v->end;

    for (p = v->end; p < len && or_splice_ws(buf[p]); p++) {
        /* void */
    }

    if (p < len && buf[p] == ',') {
        /* "a":1, "b":2 -> "b":2: the comma and the space up to "b" */

        for (p++; p < len && or_splice_ws(buf[p]); p++) {
            /* void */
        }

        end = p;

    } else {
        /* the last member: the comma before it, if any */

        for (p = v->key; p > 0 && or_splice_ws(buf[p - 1]); p--) {
            /* void */
        }

        if (p > 0 && buf[p - 1] == ',') {
            start = p - 1;
        }
    }

    return or_splice_add(sp, start, end, NULL, 0);
}


size_t
or_splice_len(const or_splice_t *sp, size_t len)
{
    size_t  i;

    for (i = 0; i < sp->n; i++) {
        len = len - (sp->edit[i].end - sp->edit[i].start) + sp->edit[i].len;
    }

    return len;
}


size_t
or_splice_apply(const or_splice_t *sp, const char *buf, size_t len,
    char *out)
{
    char                    *d;
    size_t                   i, pos;
    const or_splice_edit_t  *e;

    d = out;
    pos = 0;

    for (i = 0; i < sp->n; i++) {
        e = &sp->edit[i];

        if (e->start > len || e->end > len || e->start < pos) {
            break;              /* not edits of this body */
        }

        memcpy(d, buf + pos, e->start - pos);
        d += e->start - pos;

        if (e->len) {
            memcpy(d, e->data, e->len);
            d += e->len;
        }

        pos = e->end;
    }

    memcpy(d, buf + pos, len - pos);
    d += len - pos;

    return (size_t) (d - out);
}


int
or_splice_usage_path(const char *path, size_t len)
{
    const char  *q;

    q = memchr(path, '?', len);

    if (q != NULL) {
        len = (size_t) (q - path);
    }

    while (len > 1 && path[len - 1] == '/') {
        len--;
    }

    return len >= sizeof("/chat/completions") - 1
           && memcmp(path + len - (sizeof("/chat/completions") - 1),
                     "/chat/completions", sizeof("/chat/completions") - 1)
              == 0;
}


const char *
or_splice_usage_name(or_splice_usage_e u)
{
    if ((unsigned) u >= sizeof(or_splice_usage_names) / sizeof(char *)) {
        return "unknown";
    }

    return or_splice_usage_names[u];
}


static int
or_splice_ws(char c)
{
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}
