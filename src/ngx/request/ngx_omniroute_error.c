
/*
 * Copyright (C) ngx_omniroute authors
 *
 * Errors in the OpenAI shape, {"error":{"message","type","code"}}: the
 * module's own, and nginx's error pages in omniroute_pass locations (413
 * for a body over client_max_body_size, 400, 408, 500...), which clients
 * and SDKs could not parse as HTML.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute.h"


typedef struct {
    ngx_uint_t                    status;
    const char                   *code;
    const char                   *message;
} ngx_omniroute_error_page_t;


static ngx_buf_t *ngx_omniroute_json_buf(ngx_http_request_t *r,
    json_t *doc);
static void ngx_omniroute_set_json_headers(ngx_http_request_t *r,
    ngx_uint_t status, off_t len);


static ngx_str_t  ngx_omniroute_json_type = ngx_string("application/json");


static ngx_omniroute_error_page_t  ngx_omniroute_error_pages[] = {
    { 400, "bad_request", "the request could not be parsed" },
    { 405, "method_not_allowed", "only POST is supported here" },
    { 408, "request_timeout", "the request was not received in time" },
    { 411, "length_required", "the request needs a length" },
    { 413, "request_too_large",
      "the request body exceeds client_max_body_size" },
    { 414, "uri_too_long", "the request URI is too long" },
    { 494, "headers_too_large", "the request headers are too large" },
    { 500, "internal_error", "the gateway failed to process the request" },
    { 502, "upstream_unavailable", "the provider could not be reached" },
    { 503, "service_unavailable", "the service is unavailable" },
    { 504, "upstream_timeout", "the provider did not respond in time" },
    { 0, "http_error", "the request failed" }
};


ngx_int_t
ngx_omniroute_send_error(ngx_http_request_t *r, ngx_uint_t status,
    const char *type, const char *code, const char *message)
{
    json_t  *doc;

    doc = json_pack("{s:{s:s,s:s,s:s}}", "error", "message", message,
                    "type", type, "code", code);
    if (doc == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return ngx_omniroute_send_json(r, status, doc);
}


/* a JSON document as the response (the reference to doc is taken) */

ngx_int_t
ngx_omniroute_send_json(ngx_http_request_t *r, ngx_uint_t status,
    json_t *doc)
{
    ngx_int_t     rc;
    ngx_buf_t    *b;
    ngx_chain_t   out;

    b = ngx_omniroute_json_buf(r, doc);
    if (b == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ngx_omniroute_set_json_headers(r, status, b->last - b->pos);

    rc = ngx_http_send_header(r);

    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }

    out.buf = b;
    out.next = NULL;

    return ngx_http_output_filter(r, &out);
}


/*
 * Called by the header filter for a main request whose response is one of
 * nginx's error pages (r->err_status is set) in an omniroute_pass
 * location: the page becomes a JSON error; the body filter sends
 * ctx->error_page in place of the HTML.
 */

ngx_int_t
ngx_omniroute_json_error_page(ngx_http_request_t *r)
{
    json_t                      *doc;
    const char                  *type;
    ngx_omniroute_ctx_t         *ctx;
    ngx_omniroute_error_page_t  *ep;

    ctx = ngx_http_get_module_ctx(r, ngx_http_omniroute_module);

    if (ctx == NULL) {
        ctx = ngx_pcalloc(r->pool, sizeof(ngx_omniroute_ctx_t));
        if (ctx == NULL) {
            return NGX_ERROR;
        }

        ngx_http_set_ctx(r, ctx, ngx_http_omniroute_module);
    }

    for (ep = ngx_omniroute_error_pages; ep->status; ep++) {
        if (ep->status == r->headers_out.status) {
            break;
        }
    }

    type = (r->headers_out.status >= NGX_HTTP_INTERNAL_SERVER_ERROR)
           ? "server_error" : "invalid_request_error";

    doc = json_pack("{s:{s:s,s:s,s:s}}", "error", "message", ep->message,
                    "type", type, "code", ep->code);
    if (doc == NULL) {
        return NGX_ERROR;
    }

    ctx->error_page = ngx_omniroute_json_buf(r, doc);
    if (ctx->error_page == NULL) {
        return NGX_ERROR;
    }

    ngx_omniroute_set_json_headers(r, r->headers_out.status,
                                   ctx->error_page->last
                                   - ctx->error_page->pos);

    return NGX_OK;
}


/* the serialized document in a last buffer; the reference is taken */

static ngx_buf_t *
ngx_omniroute_json_buf(ngx_http_request_t *r, json_t *doc)
{
    char       *text;
    size_t      len;
    ngx_buf_t  *b;

    len = json_dumpb(doc, NULL, 0, JSON_COMPACT);

    text = (len > 0) ? ngx_pnalloc(r->pool, len + 1) : NULL;

    if (text == NULL || json_dumpb(doc, text, len, JSON_COMPACT) != len) {
        json_decref(doc);
        return NULL;
    }

    json_decref(doc);

    text[len++] = '\n';

    b = ngx_calloc_buf(r->pool);
    if (b == NULL) {
        return NULL;
    }

    b->pos = (u_char *) text;
    b->last = (u_char *) text + len;
    b->memory = 1;
    b->last_buf = (r == r->main) ? 1 : 0;
    b->last_in_chain = 1;

    return b;
}


static void
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
