
/*
 * Copyright (C) ngx_omniroute authors
 *
 * URL and request headers of an attempt: what the provider receives (the
 * client's headers minus its gateway key, session and lease headers and
 * hop-by-hop headers, plus the connection's credential and the
 * provider's fixed headers).
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute_ctx.h"


static ngx_uint_t ngx_omniroute_is_private_header(ngx_table_elt_t *h,
    ngx_omniroute_provider_t *p);


/*
 * The provider URL plus what follows the omniroute_pass location prefix,
 * plus the query string: like proxy_pass with a URI part.  In a Gemini
 * native path (".../models/{model}:streamGenerateContent") the model
 * segment is the target's upstream model (or_api_path_model()): an alias,
 * a combo or a fallover reaches the provider with the model it serves,
 * as the body's "model" does.
 */

ngx_int_t
ngx_omniroute_attempt_url(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_provider_t *p)
{
    u_char     *d;
    size_t      len, start, end;
    ngx_str_t   tail, part[3];
    uintptr_t   escape[3];
    ngx_uint_t  i, n;

    tail = r->uri;

    if (ctx->lcf->prefix.len
        && tail.len >= ctx->lcf->prefix.len
        && ngx_strncmp(tail.data, ctx->lcf->prefix.data, ctx->lcf->prefix.len)
           == 0)
    {
        tail.data += ctx->lcf->prefix.len;
        tail.len -= ctx->lcf->prefix.len;
    }

    part[0] = tail;
    n = 1;

    if (ctx->current != NULL
        && ctx->current->cand != NULL
        && ctx->current->cand->target != NULL
        && ctx->current->cand->target->model.len
        && or_api_path_model((const char *) tail.data, tail.len, &start,
                             &end))
    {
        part[0].len = start;
        part[1] = ctx->current->cand->target->model;
        part[2].data = tail.data + end;
        part[2].len = tail.len - end;
        n = 3;
    }

    len = p->url.len + 1 + (r->args.len ? 1 + r->args.len : 0);

    for (i = 0; i < n; i++) {
        escape[i] = ngx_escape_uri(NULL, part[i].data, part[i].len,
                                   NGX_ESCAPE_URI);
        len += part[i].len + 2 * escape[i];
    }

    d = ngx_pnalloc(r->pool, len);
    if (d == NULL) {
        return NGX_ERROR;
    }

    ctx->upstream_url.data = d;

    d = ngx_cpymem(d, p->url.data, p->url.len);

    if (tail.len == 0 || tail.data[0] != '/') {
        *d++ = '/';
    }

    for (i = 0; i < n; i++) {
        /* most paths have nothing to escape: copied as they are */
        d = escape[i] ? (u_char *) ngx_escape_uri(d, part[i].data,
                                                  part[i].len, NGX_ESCAPE_URI)
                      : ngx_cpymem(d, part[i].data, part[i].len);
    }

    if (r->args.len) {
        *d++ = '?';
        d = ngx_cpymem(d, r->args.data, r->args.len);
    }

    ctx->upstream_url.len = d - ctx->upstream_url.data;

    return NGX_OK;
}


/*
 * The attempt's request headers: the client's, minus its gateway key,
 * session and lease headers and hop-by-hop headers, plus the connection's
 * credential and the provider's fixed headers.
 */

ngx_int_t
ngx_omniroute_attempt_headers(ngx_http_request_t *r, ngx_http_request_t *sr,
    ngx_omniroute_candidate_t *cand)
{
    ngx_table_elt_t           *h, *nh;
    ngx_omniroute_provider_t  *p;
    ngx_omniroute_list_iter_t  it;

    p = cand->provider;

    if (ngx_list_init(&sr->headers_in.headers, r->pool, 20,
                      sizeof(ngx_table_elt_t))
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    ngx_omniroute_list_start(&it, &r->headers_in.headers);

    while ((h = ngx_omniroute_list_next(&it)) != NULL) {

        if (h->hash == 0
            || ngx_omniroute_is_private_header(h, p))
        {
            continue;
        }

        nh = ngx_list_push(&sr->headers_in.headers);
        if (nh == NULL) {
            return NGX_ERROR;
        }

        *nh = *h;
#if (nginx_version >= 1023000)
        nh->next = NULL;
#endif
    }

    if (ngx_omniroute_attempt_credentials(r, &sr->headers_in.headers, cand)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    /* content_length_n is the attempt body's (request.c) */
    sr->headers_in.content_length = NULL;
    sr->headers_in.chunked = 0;
    sr->headers_in.authorization = NULL;

    return NGX_OK;
}


/* the connection's credential and the provider's fixed headers */

ngx_int_t
ngx_omniroute_attempt_credentials(ngx_http_request_t *r, ngx_list_t *headers,
    ngx_omniroute_candidate_t *cand)
{
    ngx_uint_t                 i;
    ngx_table_elt_t           *nh;
    ngx_omniroute_header_t    *ph;
    ngx_omniroute_provider_t  *p;

    p = cand->provider;

    if (p->auth != NGX_OMNIROUTE_AUTH_NONE) {
        nh = ngx_list_push(headers);
        if (nh == NULL) {
            return NGX_ERROR;
        }

        nh->hash = p->auth_hash;
        nh->key = p->auth_header;
        nh->lowcase_key = p->auth_lowcase;
#if (nginx_version >= 1023000)
        nh->next = NULL;
#endif
        nh->value = cand->conn->auth_value;
    }

    ph = p->headers.elts;

    for (i = 0; i < p->headers.nelts; i++) {
        nh = ngx_list_push(headers);
        if (nh == NULL) {
            return NGX_ERROR;
        }

        nh->hash = ph[i].hash;
        nh->key = ph[i].name;
        nh->lowcase_key = ph[i].lowcase_key;
#if (nginx_version >= 1023000)
        nh->next = NULL;
#endif
        nh->value = ph[i].value;
    }

    return NGX_OK;
}


#define ngx_omniroute_hdr_is(h, s)                                           \
    ((h)->key.len == sizeof(s) - 1                                           \
     && ngx_memcmp((h)->lowcase_key, s, sizeof(s) - 1) == 0)


static ngx_uint_t
ngx_omniroute_is_private_header(ngx_table_elt_t *h,
    ngx_omniroute_provider_t *p)
{
    ngx_uint_t               i;
    ngx_omniroute_header_t  *ph;

    if (h->key.len >= sizeof("x-omniroute-") - 1
        && ngx_memcmp(h->lowcase_key, "x-omniroute-",
                      sizeof("x-omniroute-") - 1) == 0)
    {
        /* x-omniroute-session, X-OmniRoute-Lease-* and the like */
        return 1;
    }

    if (ngx_omniroute_hdr_is(h, "authorization")
        || ngx_omniroute_hdr_is(h, "proxy-authorization")
        || ngx_omniroute_hdr_is(h, "x-api-key")
        || ngx_omniroute_hdr_is(h, "x-session-id")
        || ngx_omniroute_hdr_is(h, "x-codex-session-id")
        || ngx_omniroute_hdr_is(h, "content-length")
        || ngx_omniroute_hdr_is(h, "transfer-encoding")
        || ngx_omniroute_hdr_is(h, "accept-encoding")
        || ngx_omniroute_hdr_is(h, "cookie"))
    {
        return 1;
    }

    if (p->auth_header.len == h->key.len
        && ngx_memcmp(h->lowcase_key, p->auth_lowcase, h->key.len) == 0)
    {
        return 1;
    }

    ph = p->headers.elts;

    for (i = 0; i < p->headers.nelts; i++) {
        if (ph[i].name.len == h->key.len
            && ngx_memcmp(h->lowcase_key, ph[i].lowcase_key, h->key.len)
               == 0)
        {
            return 1;
        }
    }

    return 0;
}
