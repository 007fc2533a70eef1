
/*
 * Copyright (C) ngx_omniroute authors
 *
 * Small helpers shared by the gateway, the admin API and the Redis mirror:
 * a request body as one string, walking a header list, adding a response
 * header, sending a JSON document.
 */


#ifndef _NGX_OMNIROUTE_UTIL_H_INCLUDED_
#define _NGX_OMNIROUTE_UTIL_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <jansson.h>


/* walking an ngx_list_t of headers */
typedef struct {
    ngx_list_part_t              *part;
    ngx_uint_t                    i;
} ngx_omniroute_list_iter_t;


ngx_int_t ngx_omniroute_body_text(ngx_http_request_t *r, off_t max,
    ngx_str_t *body);

void ngx_omniroute_list_start(ngx_omniroute_list_iter_t *it, ngx_list_t *l);
ngx_table_elt_t *ngx_omniroute_list_next(ngx_omniroute_list_iter_t *it);

ngx_int_t ngx_omniroute_add_header(ngx_http_request_t *r, ngx_str_t *name,
    ngx_str_t *value);

ngx_int_t ngx_omniroute_json_text(ngx_pool_t *pool, json_t *doc,
    ngx_str_t *text);
ngx_buf_t *ngx_omniroute_text_buf(ngx_http_request_t *r, u_char *data,
    size_t len);
void ngx_omniroute_set_json_headers(ngx_http_request_t *r, ngx_uint_t status,
    off_t len);
ngx_int_t ngx_omniroute_send_json(ngx_http_request_t *r, ngx_uint_t status,
    json_t *doc);


#endif /* _NGX_OMNIROUTE_UTIL_H_INCLUDED_ */
