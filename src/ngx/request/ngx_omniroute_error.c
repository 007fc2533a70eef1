
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

#include "ngx_omniroute_request.h"


typedef struct {
    ngx_uint_t                    status;
    const char                   *code;
    const char                   *message;
} ngx_omniroute_error_page_t;


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
    ngx_str_t                    text;
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

    if (ngx_omniroute_json_text(r->pool, doc, &text) != NGX_OK) {
        return NGX_ERROR;
    }

    ctx->error_page = ngx_omniroute_text_buf(r, text.data, text.len);
    if (ctx->error_page == NULL) {
        return NGX_ERROR;
    }

    ngx_omniroute_set_json_headers(r, r->headers_out.status,
                                   ctx->error_page->last
                                   - ctx->error_page->pos);

    return NGX_OK;
}
