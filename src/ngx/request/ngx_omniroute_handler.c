
/*
 * Copyright (C) ngx_omniroute authors
 *
 * The content handler of omniroute_pass, where a request enters the
 * gateway: its context, its client key and lease headers before any body
 * work, then GET .../models (models.c) or the body read and scanned
 * (body.c) and the attempt loop (request.c).
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute_ctx.h"


static void ngx_omniroute_body_handler(ngx_http_request_t *r);


/*
 * The content handler of omniroute_pass: the request's context, then its
 * client key and lease headers (client_keys.c, lease.c) before any body
 * work; a POST goes to the gateway once its body is read; GET and HEAD of
 * .../models, and the 405 of any other method, are models.c's.
 */

ngx_int_t
ngx_omniroute_handler(ngx_http_request_t *r)
{
    ngx_int_t             rc;
    ngx_omniroute_ctx_t  *ctx;

    if (r != r->main) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ctx = ngx_pcalloc(r->pool, sizeof(ngx_omniroute_ctx_t));
    if (ctx == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ctx->request = r;
    ctx->lcf = ngx_http_get_module_loc_conf(r, ngx_http_omniroute_module);

    ngx_http_set_ctx(r, ctx, ngx_http_omniroute_module);

    /* the location's model list is open to any key (client_keys.c) */
    ctx->models_get = ngx_omniroute_models_asked(r, ctx->lcf);

    rc = ngx_omniroute_client_key_check(r, ctx);

    if (rc == NGX_DECLINED && ctx->auth) {
        /* a client key applies: the lease headers of a managed request */
        rc = ngx_omniroute_lease_auth(r, ctx);
    }

    if (rc != NGX_DECLINED) {
        return rc;
    }

    if (r->method != NGX_HTTP_POST) {
        return ngx_omniroute_models_handler(r);
    }

    r->request_body_in_single_buf = 1;

    rc = ngx_http_read_client_request_body(r, ngx_omniroute_body_handler);

    if (rc >= NGX_HTTP_SPECIAL_RESPONSE) {
        return rc;
    }

    return NGX_DONE;
}


static void
ngx_omniroute_body_handler(ngx_http_request_t *r)
{
    ngx_omniroute_ctx_t  *ctx;

    ctx = ngx_http_get_module_ctx(r, ngx_http_omniroute_module);

    if (r->request_body == NULL) {
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }

    if (ngx_omniroute_body_text(r, 0, &ctx->body) != NGX_OK) {
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }

    ngx_omniroute_serve(r, ctx, ngx_omniroute_scan_body(r, ctx));
}
