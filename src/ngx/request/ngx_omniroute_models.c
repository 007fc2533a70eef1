
/*
 * Copyright (C) ngx_omniroute authors
 *
 * GET <omniroute_pass location>/models: the OpenAI model list of the
 * names clients may ask for (aliases and combos, then every
 * "provider/model" target the configuration names), built once at
 * configuration time; GET .../models/ID answers one of them.  With
 * "omniroute_models pass=PROVIDER" the request goes to that provider's
 * connections instead (with fallback among them, like any request);
 * "omniroute_models off" leaves it to the 405 of every method but POST.
 * A 405 carries Allow.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute_ctx.h"
#include "or_keys.h"


static ngx_int_t ngx_omniroute_models_tail(ngx_http_request_t *r,
    ngx_omniroute_loc_conf_t *lcf, ngx_str_t *id);
static ngx_int_t ngx_omniroute_models_add(ngx_array_t *ids, ngx_str_t *name);
static ngx_uint_t ngx_omniroute_models_limited(ngx_http_request_t *r);
static ngx_uint_t ngx_omniroute_models_conn(ngx_omniroute_auth_t *auth,
    ngx_omniroute_main_conf_t *omcf, ngx_omniroute_connection_t *conn);
static ngx_uint_t ngx_omniroute_models_routable(ngx_omniroute_auth_t *auth,
    ngx_omniroute_main_conf_t *omcf, ngx_str_t *id);
static ngx_uint_t ngx_omniroute_models_allowed(ngx_http_request_t *r,
    ngx_str_t *id);
static ngx_int_t ngx_omniroute_models_of_key(ngx_http_request_t *r,
    ngx_omniroute_main_conf_t *omcf);
static json_t *ngx_omniroute_models_entry(ngx_omniroute_main_conf_t *omcf,
    ngx_str_t *id);
static ngx_int_t ngx_omniroute_models_one(ngx_http_request_t *r,
    ngx_omniroute_main_conf_t *omcf, ngx_str_t *id);
static ngx_int_t ngx_omniroute_models_pass(ngx_http_request_t *r,
    ngx_omniroute_loc_conf_t *lcf);
static ngx_int_t ngx_omniroute_models_send(ngx_http_request_t *r,
    ngx_str_t *text);


ngx_int_t
ngx_omniroute_models_init(ngx_conf_t *cf)
{
    u_char                     *p;
    json_t                     *doc, *data, *entry;
    ngx_str_t                   name, *id;
    ngx_uint_t                  i, j;
    ngx_omniroute_model_t      *m;
    ngx_omniroute_target_t     *t;
    ngx_omniroute_provider_t   *pr;
    ngx_omniroute_main_conf_t  *omcf;

    omcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_omniroute_module);

    omcf->created = ngx_time();

    if (ngx_array_init(&omcf->model_ids, cf->pool,
                       ngx_max(omcf->models.nelts * 2, 4), sizeof(ngx_str_t))
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    m = omcf->models.elts;
    pr = omcf->providers.elts;

    /* aliases and combos in declaration order, then their targets */

    for (i = 0; i < omcf->models.nelts; i++) {
        if (ngx_omniroute_models_add(&omcf->model_ids, &m[i].name)
            != NGX_OK)
        {
            return NGX_ERROR;
        }
    }

    for (i = 0; i < omcf->models.nelts; i++) {
        t = m[i].targets.elts;

        for (j = 0; j < m[i].targets.nelts; j++) {
            if (t[j].provider >= omcf->providers.nelts) {
                continue;
            }

            p = ngx_pnalloc(cf->pool, pr[t[j].provider].name.len + 1
                                      + t[j].model.len);
            if (p == NULL) {
                return NGX_ERROR;
            }

            name.data = p;
            name.len = ngx_sprintf(p, "%V/%V", &pr[t[j].provider].name,
                                   &t[j].model)
                       - p;

            if (ngx_omniroute_models_add(&omcf->model_ids, &name) != NGX_OK) {
                return NGX_ERROR;
            }
        }
    }

    doc = json_object();
    data = json_array();

    if (doc == NULL || data == NULL
        || json_object_set_new(doc, "object", json_string("list")) != 0
        || json_object_set_new(doc, "data", data) != 0)
    {
        json_decref(doc);
        json_decref(data);
        return NGX_ERROR;
    }

    id = omcf->model_ids.elts;

    for (i = 0; i < omcf->model_ids.nelts; i++) {
        entry = ngx_omniroute_models_entry(omcf, &id[i]);

        if (entry == NULL || json_array_append_new(data, entry) != 0) {
            json_decref(doc);
            return NGX_ERROR;
        }
    }

    return ngx_omniroute_json_text(cf->pool, doc, &omcf->models_json);
}


/* name, once */

static ngx_int_t
ngx_omniroute_models_add(ngx_array_t *ids, ngx_str_t *name)
{
    ngx_str_t   *id;
    ngx_uint_t   i;

    id = ids->elts;

    for (i = 0; i < ids->nelts; i++) {
        if (id[i].len == name->len
            && ngx_strncmp(id[i].data, name->data, name->len) == 0)
        {
            return NGX_OK;
        }
    }

    id = ngx_array_push(ids);
    if (id == NULL) {
        return NGX_ERROR;
    }

    *id = *name;

    return NGX_OK;
}


static json_t *
ngx_omniroute_models_entry(ngx_omniroute_main_conf_t *omcf, ngx_str_t *id)
{
    return json_pack("{s:s%,s:s,s:I,s:s}",
                     "id", id->data, id->len,
                     "object", "model",
                     "created", (json_int_t) omcf->created,
                     "owned_by", "omniroute");
}


/*
 * NGX_OK with *id (empty for the list) when the URI after the location
 * prefix is /models or /models/ID.
 */

static ngx_int_t
ngx_omniroute_models_tail(ngx_http_request_t *r,
    ngx_omniroute_loc_conf_t *lcf, ngx_str_t *id)
{
    u_char     *p;
    ngx_str_t   tail;

    tail = r->uri;

    if (lcf->prefix.len) {
        if (tail.len < lcf->prefix.len
            || ngx_strncmp(tail.data, lcf->prefix.data, lcf->prefix.len)
               != 0)
        {
            return NGX_DECLINED;
        }

        tail.data += lcf->prefix.len;
        tail.len -= lcf->prefix.len;

    } else {
        /* a regex location: from the first "/models" segment on */

        for (p = tail.data; p + 7 <= tail.data + tail.len; p++) {
            if (ngx_strncmp(p, "/models", 7) == 0
                && (p + 7 == tail.data + tail.len || p[7] == '/'))
            {
                break;
            }
        }

        tail.len -= p - tail.data;
        tail.data = p;
    }

    if (tail.len < 7 || ngx_strncmp(tail.data, "/models", 7) != 0) {
        return NGX_DECLINED;
    }

    id->data = tail.data + 7;
    id->len = tail.len - 7;

    if (id->len == 0 || (id->len == 1 && id->data[0] == '/')) {
        id->len = 0;
        return NGX_OK;
    }

    if (id->data[0] != '/') {
        return NGX_DECLINED;
    }

    id->data++;
    id->len--;

    return NGX_OK;
}


/*
 * A GET or HEAD of the location's model list (or one of its models): a
 * client key's paths= do not apply to it, any key the location admits may
 * list the models it may use (client_keys.c asks).
 */

ngx_uint_t
ngx_omniroute_models_asked(ngx_http_request_t *r,
    ngx_omniroute_loc_conf_t *lcf)
{
    ngx_str_t  id;

    return (r->method & (NGX_HTTP_GET|NGX_HTTP_HEAD))
           && lcf->models != NGX_OMNIROUTE_MODELS_OFF
           && ngx_omniroute_models_tail(r, lcf, &id) == NGX_OK;
}


ngx_int_t
ngx_omniroute_models_handler(ngx_http_request_t *r)
{
    ngx_int_t                   rc, models;
    ngx_str_t                   id, allow, name;
    ngx_omniroute_loc_conf_t   *lcf;
    ngx_omniroute_main_conf_t  *omcf;

    lcf = ngx_http_get_module_loc_conf(r, ngx_http_omniroute_module);
    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);

    models = (lcf->models != NGX_OMNIROUTE_MODELS_OFF
              && ngx_omniroute_models_tail(r, lcf, &id) == NGX_OK);

    rc = ngx_http_discard_request_body(r);
    if (rc != NGX_OK) {
        return rc;
    }

    if (models && (r->method & (NGX_HTTP_GET|NGX_HTTP_HEAD))) {
        ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                       "omniroute models: \"%V\"%s", &id,
                       lcf->models == NGX_OMNIROUTE_MODELS_PASS
                       ? " passed through" : "");

        if (lcf->models == NGX_OMNIROUTE_MODELS_PASS) {
            return ngx_omniroute_models_pass(r, lcf);
        }

        if (id.len) {
            return ngx_omniroute_models_one(r, omcf, &id);
        }

        if (ngx_omniroute_models_limited(r)) {
            return ngx_omniroute_models_of_key(r, omcf);
        }

        return ngx_omniroute_models_send(r, &omcf->models_json);
    }

    if (models) {
        ngx_str_set(&allow, "GET, HEAD, POST");

    } else {
        ngx_str_set(&allow, "POST");
    }

    ngx_str_set(&name, "Allow");

    if (ngx_omniroute_add_header(r, &name, &allow) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    /* answered as JSON by ngx_omniroute_json_error_page() */
    return NGX_HTTP_NOT_ALLOWED;
}


/*
 * The request's client key limits the list: its models=, its
 * connections= or the connection of the lease it presents.
 */

static ngx_uint_t
ngx_omniroute_models_limited(ngx_http_request_t *r)
{
    ngx_omniroute_ctx_t  *ctx;

    ctx = ngx_http_get_module_ctx(r, ngx_http_omniroute_module);

    return ctx && ctx->auth
           && (ctx->auth->key->models.nelts || ctx->auth->key->conns
               || ctx->auth->managed);
}


/* the request may use this connection (its key's connections=, a lease) */

static ngx_uint_t
ngx_omniroute_models_conn(ngx_omniroute_auth_t *auth,
    ngx_omniroute_main_conf_t *omcf, ngx_omniroute_connection_t *conn)
{
    if (!ngx_omniroute_keys_conn_allowed(auth->key, omcf, conn)) {
        return 0;
    }

    return !auth->managed
           || (conn->id.len == auth->lease.conn_len
               && ngx_memcmp(conn->id.data, auth->lease.conn, conn->id.len)
                  == 0);
}


/*
 * A name of the list has a route the request may take: an alias or combo
 * one of its routes, a "provider/model" one of the provider's connections
 * that serves the model (what planning would find, before any state).
 */

static ngx_uint_t
ngx_omniroute_models_routable(ngx_omniroute_auth_t *auth,
    ngx_omniroute_main_conf_t *omcf, ngx_str_t *id)
{
    u_char                      *slash;
    ngx_int_t                    pi;
    ngx_str_t                    pname, model;
    ngx_uint_t                   i;
    ngx_omniroute_model_t       *m;
    ngx_omniroute_route_t       *rt;
    ngx_omniroute_connection_t  *c;

    m = ngx_omniroute_model_lookup(omcf, id);

    if (m) {
        rt = m->routes.elts;

        for (i = 0; i < m->routes.nelts; i++) {
            if (ngx_omniroute_models_conn(auth, omcf, rt[i].conn)) {
                return 1;
            }
        }

        return 0;
    }

    slash = ngx_strlchr(id->data, id->data + id->len, '/');

    if (slash == NULL) {
        return 0;
    }

    pname.data = id->data;
    pname.len = slash - id->data;
    model.data = slash + 1;
    model.len = id->data + id->len - model.data;

    pi = ngx_omniroute_provider_lookup(omcf, &pname);

    if (pi == NGX_ERROR) {
        return 0;
    }

    c = omcf->connections.elts;

    for (i = 0; i < omcf->connections.nelts; i++) {
        if (c[i].provider == (ngx_uint_t) pi
            && ngx_omniroute_conn_serves(&c[i], &model)
            && ngx_omniroute_models_conn(auth, omcf, &c[i]))
        {
            return 1;
        }
    }

    return 0;
}


static ngx_uint_t
ngx_omniroute_models_allowed(ngx_http_request_t *r, ngx_str_t *id)
{
    ngx_omniroute_ctx_t         *ctx;
    ngx_omniroute_main_conf_t   *omcf;
    ngx_omniroute_client_key_t  *key;

    if (!ngx_omniroute_models_limited(r)) {
        return 1;
    }

    ctx = ngx_http_get_module_ctx(r, ngx_http_omniroute_module);
    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);
    key = ctx->auth->key;

    if (!or_keys_match_name(key->models.elts, key->models.nelts,
                            (const char *) id->data, id->len))
    {
        return 0;
    }

    if (key->conns == NULL && !ctx->auth->managed) {
        return 1;
    }

    return ngx_omniroute_models_routable(ctx->auth, omcf, id);
}


/*
 * The list of a limited key: only the names it may ask for and that have
 * a route on a connection it may use.
 */

static ngx_int_t
ngx_omniroute_models_of_key(ngx_http_request_t *r,
    ngx_omniroute_main_conf_t *omcf)
{
    json_t      *doc, *data, *entry;
    ngx_str_t   *ids;
    ngx_uint_t   i;

    doc = json_object();
    data = json_array();

    if (doc == NULL || data == NULL
        || json_object_set_new(doc, "object", json_string("list")) != 0
        || json_object_set_new(doc, "data", data) != 0)
    {
        json_decref(doc);
        json_decref(data);
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ids = omcf->model_ids.elts;

    for (i = 0; i < omcf->model_ids.nelts; i++) {
        if (!ngx_omniroute_models_allowed(r, &ids[i])) {
            continue;
        }

        entry = ngx_omniroute_models_entry(omcf, &ids[i]);

        if (entry == NULL || json_array_append_new(data, entry) != 0) {
            json_decref(doc);
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
    }

    return ngx_omniroute_send_json(r, NGX_HTTP_OK, doc);
}


/* GET .../models/ID: a name clients may ask for, else 404 */

static ngx_int_t
ngx_omniroute_models_one(ngx_http_request_t *r,
    ngx_omniroute_main_conf_t *omcf, ngx_str_t *id)
{
    u_char      *msg, *dst, *src;
    ngx_str_t    name, *ids;
    ngx_uint_t   i;

    /* the id may carry an escaped "/" (provider%2Fmodel) */

    dst = ngx_pnalloc(r->pool, id->len);
    if (dst == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    name.data = dst;
    src = id->data;
    ngx_unescape_uri(&dst, &src, id->len, 0);
    name.len = dst - name.data;

    ids = omcf->model_ids.elts;

    for (i = 0; i < omcf->model_ids.nelts; i++) {
        if (ids[i].len == name.len
            && ngx_strncmp(ids[i].data, name.data, name.len) == 0
            && ngx_omniroute_models_allowed(r, &ids[i]))
        {
            return ngx_omniroute_send_json(r, NGX_HTTP_OK,
                                 ngx_omniroute_models_entry(omcf, &ids[i]));
        }
    }

    msg = ngx_pnalloc(r->pool, name.len + 64);
    if (msg == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ngx_sprintf(msg, "the model \"%V\" does not exist%Z", &name);

    return ngx_omniroute_send_error(r, NGX_HTTP_NOT_FOUND,
                                    "invalid_request_error",
                                    "model_not_found", (char *) msg);
}


/*
 * omniroute_models pass=PROVIDER: the GET goes to the provider's
 * connections as "PROVIDER/models" (no body), with the gateway's
 * credentials, fallback and answers.
 */

static ngx_int_t
ngx_omniroute_models_pass(ngx_http_request_t *r,
    ngx_omniroute_loc_conf_t *lcf)
{
    u_char                     *p;
    ngx_omniroute_ctx_t        *ctx;
    ngx_omniroute_provider_t   *pr;
    ngx_omniroute_main_conf_t  *omcf;

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);
    pr = (ngx_omniroute_provider_t *) omcf->providers.elts
         + lcf->models_provider;

    /* made by the content handler (request.c) */

    ctx = ngx_http_get_module_ctx(r, ngx_http_omniroute_module);

    p = ngx_pnalloc(r->pool, pr->name.len + sizeof("/models") - 1);
    if (p == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ctx->model.data = p;
    ctx->model.len = ngx_sprintf(p, "%V/models", &pr->name) - p;

    /* as after reading a body: the request lives on until finalized */
    r->main->count++;

    ngx_omniroute_serve(r, ctx, NGX_OK);

    return NGX_DONE;
}


/* the list, built at configuration time */

static ngx_int_t
ngx_omniroute_models_send(ngx_http_request_t *r, ngx_str_t *text)
{
    ngx_int_t     rc;
    ngx_buf_t    *b;
    ngx_chain_t   out;

    b = ngx_omniroute_text_buf(r, text->data, text->len);
    if (b == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ngx_omniroute_set_json_headers(r, NGX_HTTP_OK, text->len);

    rc = ngx_http_send_header(r);

    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }

    out.buf = b;
    out.next = NULL;

    return ngx_http_output_filter(r, &out);
}
