
/*
 * Copyright (C) ngx_omniroute authors
 *
 * Helpers shared by the three modules (see ngx_omniroute_util.h).
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute_util.h"


static ngx_str_t  ngx_omniroute_json_type = ngx_string("application/json");


/*
 * The request body as one contiguous string (memory and temp file parts);
 * NGX_DECLINED when it is longer than max (0: no limit).  A body in memory
 * is not copied: nginx reads it into one buffer (its parts are runs of it,
 * one after the other), after the part read with the headers, which is
 * moved in front of them when the buffer has room for it
 * (request_body_in_single_buf).
 */

ngx_int_t
ngx_omniroute_body_text(ngx_http_request_t *r, off_t max, ngx_str_t *body)
{
    u_char       *p;
    off_t         len;
    size_t        n;
    ssize_t       got;
    ngx_buf_t    *b, *f, *g, *l;
    ngx_chain_t  *cl, *rest;

    ngx_str_null(body);

    if (r->request_body == NULL || r->request_body->bufs == NULL) {
        return NGX_OK;
    }

    len = 0;

    for (cl = r->request_body->bufs; cl; cl = cl->next) {
        b = cl->buf;
        len += b->in_file ? b->file_last - b->file_pos : b->last - b->pos;
    }

    if (max && len > max) {
        return NGX_DECLINED;
    }

    if (len == 0) {
        return NGX_OK;
    }

    /*
     * f: the first part with bytes; g .. l: the parts after it, if they
     * are one run of memory (each starts where the one before ends)
     */

    f = NULL;
    g = NULL;
    l = NULL;
    rest = NULL;

    for (cl = r->request_body->bufs; cl; cl = cl->next) {
        b = cl->buf;

        if (b->in_file) {
            goto copy;
        }

        if (b->last == b->pos) {
            continue;
        }

        if (f == NULL) {
            f = b;
            continue;
        }

        if (g == NULL) {
            g = b;
            rest = cl;

        } else if (b->pos != l->last) {
            goto copy;
        }

        l = b;
    }

    if (g == NULL) {
        body->data = f->pos;
        body->len = (size_t) len;
        return NGX_OK;
    }

    if (f->last == g->pos) {
        /* all of it one run already */
        body->data = f->pos;
        body->len = (size_t) len;
        return NGX_OK;
    }

    n = f->last - f->pos;

    if ((size_t) (l->end - l->last) >= n) {
        /* the run moves up and the first part goes in front */

        ngx_memmove(g->pos + n, g->pos, l->last - g->pos);
        ngx_memcpy(g->pos, f->pos, n);

        g->last = l->last + n;
        g->end = ngx_max(g->end, l->end);
        f->pos = f->last;

        for (cl = rest->next; cl; cl = cl->next) {
            cl->buf->pos = cl->buf->last;
        }

        body->data = g->pos;
        body->len = (size_t) len;
        return NGX_OK;
    }

copy:

    p = ngx_pnalloc(r->pool, (size_t) len);
    if (p == NULL) {
        return NGX_ERROR;
    }

    body->data = p;

    for (cl = r->request_body->bufs; cl; cl = cl->next) {
        b = cl->buf;

        if (!b->in_file) {
            p = ngx_cpymem(p, b->pos, b->last - b->pos);
            continue;
        }

        got = ngx_read_file(b->file, p, (size_t) (b->file_last - b->file_pos),
                            b->file_pos);
        if (got != (ssize_t) (b->file_last - b->file_pos)) {
            return NGX_ERROR;
        }

        p += got;
    }

    body->len = p - body->data;

    return NGX_OK;
}


void
ngx_omniroute_list_start(ngx_omniroute_list_iter_t *it, ngx_list_t *l)
{
    it->part = &l->part;
    it->i = 0;
}


/* the next element of the list, or NULL */

ngx_table_elt_t *
ngx_omniroute_list_next(ngx_omniroute_list_iter_t *it)
{
    while (it->i >= it->part->nelts) {
        if (it->part->next == NULL) {
            return NULL;
        }

        it->part = it->part->next;
        it->i = 0;
    }

    return (ngx_table_elt_t *) it->part->elts + it->i++;
}


ngx_int_t
ngx_omniroute_add_header(ngx_http_request_t *r, ngx_str_t *name,
    ngx_str_t *value)
{
    ngx_table_elt_t  *h;

    h = ngx_list_push(&r->headers_out.headers);
    if (h == NULL) {
        return NGX_ERROR;
    }

    h->hash = 1;
    h->key = *name;
    h->value = *value;
    h->lowcase_key = NULL;
#if (nginx_version >= 1023000)
    h->next = NULL;
#endif

    return NGX_OK;
}


/* the serialized document and a newline; the reference to doc is taken */

ngx_int_t
ngx_omniroute_json_text(ngx_pool_t *pool, json_t *doc, ngx_str_t *text)
{
    char    *p;
    size_t   len;

    if (doc == NULL) {
        return NGX_ERROR;
    }

    len = json_dumpb(doc, NULL, 0, JSON_COMPACT);

    p = (len > 0) ? ngx_pnalloc(pool, len + 1) : NULL;

    if (p == NULL || json_dumpb(doc, p, len, JSON_COMPACT) != len) {
        json_decref(doc);
        return NGX_ERROR;
    }

    json_decref(doc);

    p[len++] = '\n';

    text->data = (u_char *) p;
    text->len = len;

    return NGX_OK;
}


/* a memory buffer over data, the last one of r's response */

ngx_buf_t *
ngx_omniroute_text_buf(ngx_http_request_t *r, u_char *data, size_t len)
{
    ngx_buf_t  *b;

    b = ngx_calloc_buf(r->pool);
    if (b == NULL) {
        return NULL;
    }

    b->pos = data;
    b->last = data + len;
    b->memory = (len > 0);
    b->last_buf = (r == r->main) ? 1 : 0;
    b->last_in_chain = 1;

    return b;
}


void
ngx_omniroute_set_json_headers(ngx_http_request_t *r, ngx_uint_t status,
    off_t len)
{
    r->headers_out.status = status;
    r->headers_out.status_line.len = 0;
    r->headers_out.content_type = ngx_omniroute_json_type;
    r->headers_out.content_type_len = ngx_omniroute_json_type.len;
    r->headers_out.content_type_lowcase = NULL;
    r->headers_out.charset.len = 0;
    r->headers_out.content_length_n = len;

    if (r->headers_out.content_length) {
        r->headers_out.content_length->hash = 0;
        r->headers_out.content_length = NULL;
    }
}


/* a JSON document as the response (the reference to doc is taken) */

ngx_int_t
ngx_omniroute_send_json(ngx_http_request_t *r, ngx_uint_t status,
    json_t *doc)
{
    ngx_int_t     rc;
    ngx_str_t     text;
    ngx_buf_t    *b;
    ngx_chain_t   out;

    if (ngx_omniroute_json_text(r->pool, doc, &text) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    b = ngx_omniroute_text_buf(r, text.data, text.len);
    if (b == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ngx_omniroute_set_json_headers(r, status, text.len);

    rc = ngx_http_send_header(r);

    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }

    out.buf = b;
    out.next = NULL;

    return ngx_http_output_filter(r, &out);
}
