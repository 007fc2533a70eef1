
/*
 * Copyright (C) ngx_omniroute authors
 *
 * The client-facing request: omniroute_pass content handler, body read and
 * JSON parse, model resolution, and the attempt loop.  Each attempt is a
 * subrequest to the internal attempt location, which proxies it with the
 * values of the attempt (see DESIGN §2 and docs/architecture.md).
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute_request.h"


#define NGX_OMNIROUTE_SLOT_FULL     ((ngx_atomic_t *) -1)
#define NGX_OMNIROUTE_QUEUE_POLL    25      /* ms between slot checks */


static void ngx_omniroute_body_handler(ngx_http_request_t *r);
static ngx_int_t ngx_omniroute_parse_body(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx);
static ngx_int_t ngx_omniroute_plan(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx);
static ngx_int_t ngx_omniroute_reject(ngx_omniroute_ctx_t *ctx,
    ngx_uint_t status, const char *code, const char *message);
static void ngx_omniroute_json_cleanup(void *data);
static ngx_int_t ngx_omniroute_start_attempt(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx);
static ngx_int_t ngx_omniroute_attempt_body(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, ngx_omniroute_target_t *t);
static ngx_int_t ngx_omniroute_attempt_done(ngx_http_request_t *sr,
    void *data, ngx_int_t rc);
static void ngx_omniroute_parent_handler(ngx_http_request_t *r);
static ngx_atomic_t *ngx_omniroute_acquire_slot(ngx_http_request_t *r,
    ngx_omniroute_candidate_t *cand);
static ngx_int_t ngx_omniroute_hold_slot(ngx_http_request_t *r,
    ngx_omniroute_attempt_t *a, ngx_atomic_t *counter);
static ngx_int_t ngx_omniroute_queue(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx);
static void ngx_omniroute_queue_retry(ngx_event_t *ev);
static void ngx_omniroute_queue_leave(void *data);
static void ngx_omniroute_inflight_done(void *data);
static ngx_int_t ngx_omniroute_send_held(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, ngx_omniroute_attempt_t *a);
static ngx_int_t ngx_omniroute_send_transport_error(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, ngx_omniroute_attempt_t *a);


ngx_int_t
ngx_omniroute_handler(ngx_http_request_t *r)
{
    ngx_int_t             rc;
    ngx_omniroute_ctx_t  *ctx;

    if (r != r->main) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (r->method != NGX_HTTP_POST) {
        rc = ngx_http_discard_request_body(r);
        if (rc != NGX_OK) {
            return rc;
        }

        /* answered as JSON by ngx_omniroute_json_error_page() */
        return NGX_HTTP_NOT_ALLOWED;
    }

    ctx = ngx_pcalloc(r->pool, sizeof(ngx_omniroute_ctx_t));
    if (ctx == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ctx->lcf = ngx_http_get_module_loc_conf(r, ngx_http_omniroute_module);

    ngx_http_set_ctx(r, ctx, ngx_http_omniroute_module);

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
    ngx_int_t             rc;
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

    rc = ngx_omniroute_parse_body(r, ctx);

    if (rc == NGX_OK) {
        rc = ngx_omniroute_plan(r, ctx);
    }

    if (rc != NGX_OK) {
        if (ctx->error_code) {
            ngx_omniroute_count(r, NGX_OMNIROUTE_OUT_CLIENT_ERROR);
            rc = ngx_omniroute_send_error(r, rc, "invalid_request_error",
                                          ctx->error_code,
                                          ctx->error_message);
        }

        ngx_http_finalize_request(r, rc);
        return;
    }

    rc = ngx_omniroute_affinity_key(r, ctx);

    if (rc == NGX_OK) {
        rc = ngx_omniroute_plan_eligible(r, ctx);
    }

    if (rc == NGX_OK) {
        r->write_event_handler = ngx_omniroute_parent_handler;
        ctx->plan_excluded = ctx->excluded.nelts;
        rc = ngx_omniroute_start_attempt(r, ctx);
    }

    if (rc == NGX_BUSY) {
        /* every eligible connection is at its max_concurrent */
        rc = ngx_omniroute_queue(r, ctx);

        if (rc == NGX_DONE) {
            return;
        }

        ngx_http_finalize_request(r, rc);
        return;
    }

    if (rc == NGX_DECLINED) {
        /* every candidate is excluded by the shared state */
        ngx_http_finalize_request(r, ngx_omniroute_send_cooling_down(r, ctx));
        return;
    }

    if (rc != NGX_OK) {
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }
}


static ngx_int_t
ngx_omniroute_parse_body(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx)
{
    u_char              *p;
    json_t              *root, *model;
    json_error_t         err;
    ngx_pool_cleanup_t  *cln;

    if (ctx->body.len == 0) {
        return ngx_omniroute_reject(ctx, NGX_HTTP_BAD_REQUEST,
                                        "invalid_json",
                                        "the request body is empty; "
                                        "expected a JSON object");
    }

    root = json_loadb((const char *) ctx->body.data, ctx->body.len,
                      JSON_REJECT_DUPLICATES, &err);

    if (root == NULL) {
        p = ngx_pnalloc(r->pool, 200);
        if (p == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        ngx_snprintf(p, 200, "the request body is not valid JSON: %s "
                     "(at byte %d)%Z", err.text, err.position);

        return ngx_omniroute_reject(ctx, NGX_HTTP_BAD_REQUEST,
                                        "invalid_json", (char *) p);
    }

    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (cln == NULL) {
        json_decref(root);
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    cln->handler = ngx_omniroute_json_cleanup;
    cln->data = root;
    ctx->json = root;

    if (!json_is_object(root)) {
        return ngx_omniroute_reject(ctx, NGX_HTTP_BAD_REQUEST,
                                        "invalid_json",
                                        "the request body must be a JSON "
                                        "object");
    }

    model = json_object_get(root, "model");

    if (model == NULL) {
        return ngx_omniroute_reject(ctx, NGX_HTTP_BAD_REQUEST,
                                        "missing_model",
                                        "the request body has no \"model\"");
    }

    if (!json_is_string(model) || json_string_length(model) == 0) {
        return ngx_omniroute_reject(ctx, NGX_HTTP_BAD_REQUEST,
                                        "invalid_model",
                                        "\"model\" must be a non-empty "
                                        "string");
    }

    /* a pool copy: the JSON string is replaced when the model is rewritten */

    ctx->model.len = json_string_length(model);
    ctx->model.data = ngx_pnalloc(r->pool, ctx->model.len);
    if (ctx->model.data == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ngx_memcpy(ctx->model.data, json_string_value(model), ctx->model.len);

    return NGX_OK;
}


/* a client error, answered by the body handler */

static ngx_int_t
ngx_omniroute_reject(ngx_omniroute_ctx_t *ctx, ngx_uint_t status,
    const char *code, const char *message)
{
    ctx->error_code = code;
    ctx->error_message = message;

    return status;
}


static void
ngx_omniroute_json_cleanup(void *data)
{
    json_decref((json_t *) data);
}


/*
 * Candidates: for each target of the model in order, the provider's
 * connections by ascending priority (declaration order breaks ties).
 */

static ngx_int_t
ngx_omniroute_plan(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx)
{
    u_char                      *msg, *slash;
    ngx_str_t                    pname;
    ngx_uint_t                   i, j, k, l, n;
    ngx_omniroute_model_t       *m, *model;
    ngx_omniroute_target_t      *t, *targets, direct;
    ngx_omniroute_provider_t    *p;
    ngx_omniroute_candidate_t   *cand, tmp;
    ngx_omniroute_connection_t  *c;
    ngx_omniroute_main_conf_t   *omcf;

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);

    model = NULL;
    m = omcf->models.elts;

    for (i = 0; i < omcf->models.nelts; i++) {
        if (m[i].name.len == ctx->model.len
            && ngx_strncmp(m[i].name.data, ctx->model.data, ctx->model.len)
               == 0)
        {
            model = &m[i];
            ctx->entry = model;
            break;
        }
    }

    p = omcf->providers.elts;

    if (model) {
        targets = model->targets.elts;
        n = model->targets.nelts;

    } else {
        /* "provider/model" names a declared provider directly */

        slash = ngx_strlchr(ctx->model.data, ctx->model.data + ctx->model.len,
                            '/');
        n = 0;
        targets = &direct;

        if (slash && slash + 1 < ctx->model.data + ctx->model.len) {
            pname.data = ctx->model.data;
            pname.len = slash - ctx->model.data;

            for (i = 0; i < omcf->providers.nelts; i++) {
                if (p[i].name.len == pname.len
                    && ngx_strncmp(p[i].name.data, pname.data, pname.len)
                       == 0)
                {
                    direct.provider = i;
                    direct.model.data = slash + 1;
                    direct.model.len = ctx->model.data + ctx->model.len
                                       - direct.model.data;
                    n = 1;
                    break;
                }
            }
        }

        if (n == 0) {
            msg = ngx_pnalloc(r->pool, ctx->model.len + 64);
            if (msg == NULL) {
                return NGX_HTTP_INTERNAL_SERVER_ERROR;
            }

            ngx_sprintf(msg, "the model \"%V\" does not exist%Z",
                        &ctx->model);

            return ngx_omniroute_reject(ctx, NGX_HTTP_NOT_FOUND,
                                            "model_not_found", (char *) msg);
        }

        t = ngx_palloc(r->pool, sizeof(ngx_omniroute_target_t));
        if (t == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        *t = direct;
        targets = t;
    }

    if (ngx_array_init(&ctx->candidates, r->pool, 4,
                       sizeof(ngx_omniroute_candidate_t))
        != NGX_OK
        || ngx_array_init(&ctx->attempts, r->pool, 2,
                          sizeof(ngx_omniroute_attempt_t))
           != NGX_OK)
    {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    c = omcf->connections.elts;

    for (i = 0; i < n; i++) {
        t = &targets[i];
        k = ctx->candidates.nelts;

        for (j = 0; j < omcf->connections.nelts; j++) {
            if (c[j].provider != t->provider) {
                continue;
            }

            cand = ngx_array_push(&ctx->candidates);
            if (cand == NULL) {
                return NGX_HTTP_INTERNAL_SERVER_ERROR;
            }

            cand->conn = &c[j];
            cand->provider = &p[t->provider];
            cand->target = t;
            cand->order = ctx->candidates.nelts - 1;
        }

        /* stable insertion sort of this target's connections by priority */

        cand = ctx->candidates.elts;

        for (j = k + 1; j < ctx->candidates.nelts; j++) {
            tmp = cand[j];

            for (l = j; l > k && cand[l - 1].conn->priority
                                 > tmp.conn->priority; l--)
            {
                cand[l] = cand[l - 1];
            }

            cand[l] = tmp;
        }
    }

    if (ctx->candidates.nelts == 0) {
        return ngx_omniroute_reject(ctx, NGX_HTTP_NOT_FOUND,
                                        "no_executable_targets",
                                        "no connection serves this model");
    }

    return NGX_OK;
}


static ngx_int_t
ngx_omniroute_start_attempt(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx)
{
    const char                    *reason;
    ngx_atomic_t                  *counter;
    ngx_http_request_t            *sr;
    ngx_http_request_body_t       *rb;
    ngx_omniroute_attempt_t       *a;
    ngx_omniroute_candidate_t     *cand;

    /*
     * The next candidate the breaker admits (one HALF_OPEN probe) with a
     * free concurrency slot.
     */

    for ( ;; ) {
        if (ctx->next >= ctx->candidates.nelts) {
            return ctx->saw_full ? NGX_BUSY : NGX_DECLINED;
        }

        cand = (ngx_omniroute_candidate_t *) ctx->candidates.elts
               + ctx->next++;

        if (ngx_omniroute_admit(r, ctx, cand, &reason) != NGX_OK) {
            if (ngx_omniroute_plan_exclude(ctx, cand, reason, 1000)
                != NGX_OK)
            {
                return NGX_ERROR;
            }

            continue;
        }

        counter = ngx_omniroute_acquire_slot(r, cand);

        if (counter != NGX_OMNIROUTE_SLOT_FULL) {
            break;
        }

        /* at its max_concurrent: the next candidate, else wait */
        ctx->saw_full = 1;
    }

    if (ngx_omniroute_attempt_body(r, ctx, cand->target) != NGX_OK
        || ngx_omniroute_attempt_url(r, ctx, cand->provider) != NGX_OK)
    {
        return NGX_ERROR;
    }

    a = ngx_array_push(&ctx->attempts);
    if (a == NULL) {
        return NGX_ERROR;
    }

    ngx_memzero(a, sizeof(ngx_omniroute_attempt_t));
    a->cand = cand;
    a->start = ngx_omniroute_now();
    ctx->current = a;

    if (ngx_omniroute_hold_slot(r, a, counter) != NGX_OK) {
        return NGX_ERROR;
    }

    ctx->ps.handler = ngx_omniroute_attempt_done;
    ctx->ps.data = ctx;

    if (ngx_http_subrequest(r, &ctx->lcf->pass_uri, NULL, &sr, &ctx->ps, 0)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    a->sr = sr;

    sr->method = r->method;
    sr->method_name = r->method_name;

    rb = ngx_pcalloc(r->pool, sizeof(ngx_http_request_body_t));
    if (rb == NULL) {
        return NGX_ERROR;
    }

    rb->bufs = ngx_alloc_chain_link(r->pool);
    if (rb->bufs == NULL) {
        return NGX_ERROR;
    }

    rb->bufs->buf = ngx_calloc_buf(r->pool);
    if (rb->bufs->buf == NULL) {
        return NGX_ERROR;
    }

    rb->bufs->next = NULL;
    rb->bufs->buf->memory = 1;
    rb->bufs->buf->last_buf = 1;
    rb->bufs->buf->start = ctx->sent_body.data;
    rb->bufs->buf->pos = ctx->sent_body.data;
    rb->bufs->buf->last = ctx->sent_body.data + ctx->sent_body.len;
    rb->bufs->buf->end = rb->bufs->buf->last;
    rb->rest = 0;

    sr->request_body = rb;

    return ngx_omniroute_attempt_headers(r, sr, cand);
}


/* the client body with the target's upstream model; reused when unchanged */

static ngx_int_t
ngx_omniroute_attempt_body(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_target_t *t)
{
    char    *text;
    size_t   len;

    if (ctx->sent_body.data
        && ctx->sent_model.len == t->model.len
        && ngx_strncmp(ctx->sent_model.data, t->model.data, t->model.len)
           == 0)
    {
        return NGX_OK;
    }

    ctx->sent_model = t->model;

    if (t->model.len == ctx->model.len
        && ngx_strncmp(t->model.data, ctx->model.data, t->model.len) == 0)
    {
        ctx->sent_body = ctx->body;
        return NGX_OK;
    }

    if (json_object_set_new(ctx->json, "model",
                            json_stringn((const char *) t->model.data,
                                         t->model.len))
        != 0)
    {
        return NGX_ERROR;
    }

    len = json_dumpb(ctx->json, NULL, 0, JSON_COMPACT|JSON_PRESERVE_ORDER);
    if (len == 0) {
        return NGX_ERROR;
    }

    text = ngx_pnalloc(r->pool, len);
    if (text == NULL) {
        return NGX_ERROR;
    }

    if (json_dumpb(ctx->json, text, len, JSON_COMPACT|JSON_PRESERVE_ORDER)
        != len)
    {
        return NGX_ERROR;
    }

    ctx->sent_body.data = (u_char *) text;
    ctx->sent_body.len = len;

    return NGX_OK;
}


/* post-subrequest handler: the attempt is over; the parent decides next */

static ngx_int_t
ngx_omniroute_attempt_done(ngx_http_request_t *sr, void *data, ngx_int_t rc)
{
    ngx_omniroute_ctx_t *ctx = data;

    ngx_omniroute_attempt_t  *a;

    a = ctx->current;

    if (a == NULL || a->sr != sr || a->done) {
        return rc;
    }

    a->done = 1;

    ngx_omniroute_inflight_done(a);

    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, sr->connection->log, 0,
                   "omniroute attempt done: rc:%i state:%d status:%ui",
                   rc, a->state, a->status);

    if (sr->connection->error) {
        return rc;
    }

    switch (a->state) {

    case NGX_OMNIROUTE_ATTEMPT_COMMITTED:
        return rc;

    case NGX_OMNIROUTE_ATTEMPT_HELD:
        return NGX_OK;

    default:
        /* no response header: connect error, reset or timeout */
        a->state = NGX_OMNIROUTE_ATTEMPT_TRANSPORT;

        if (rc == NGX_HTTP_GATEWAY_TIME_OUT) {
            a->status = NGX_HTTP_GATEWAY_TIME_OUT;
            a->transport = OR_TRANSPORT_TIMEOUT;

        } else {
            a->status = NGX_HTTP_BAD_GATEWAY;
            a->transport = OR_TRANSPORT_CONNECT_ERROR;
        }

        return NGX_OK;
    }
}


/* the main request's write handler, woken when an attempt is finalized */

static void
ngx_omniroute_parent_handler(ngx_http_request_t *r)
{
    ngx_int_t                 rc;
    ngx_omniroute_ctx_t      *ctx;
    ngx_omniroute_attempt_t  *a;

    ctx = ngx_http_get_module_ctx(r, ngx_http_omniroute_module);

    if (ctx == NULL || ctx->current == NULL || !ctx->current->done) {
        return;
    }

    a = ctx->current;

    if (a->state == NGX_OMNIROUTE_ATTEMPT_COMMITTED) {
        ctx->current = NULL;
        rc = ngx_http_send_special(r, NGX_HTTP_LAST);
        ngx_http_finalize_request(r, rc);
        return;
    }

    /* a held error or a transport failure: classify and record it once */

    ngx_omniroute_classify(r, a);
    ngx_omniroute_record_failure(r, a);

    if (ngx_omniroute_may_fall_over(ctx, a)) {
        ngx_omniroute_count_fallback(r, a->verdict.reason);

        rc = ngx_omniroute_start_attempt(r, ctx);

        if (rc == NGX_OK) {
            return;
        }

        if (rc == NGX_ERROR) {
            ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
            return;
        }

        /* NGX_DECLINED, NGX_BUSY: no candidate admitted; answer with
         * what we have */
    }

    ctx->current = NULL;

    if (ctx->last_held) {
        ngx_omniroute_count(r, NGX_OMNIROUTE_OUT_PROVIDER_ERROR);
        rc = ngx_omniroute_send_held(r, ctx, ctx->last_held);

    } else {
        ngx_omniroute_count(r, NGX_OMNIROUTE_OUT_UNREACHABLE);
        rc = ngx_omniroute_send_transport_error(r, ctx, a);
    }

    ngx_http_finalize_request(r, rc);
}


ngx_uint_t
ngx_omniroute_may_fall_over(ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_attempt_t *a)
{
    return a->verdict.fall_over && ngx_omniroute_may_continue(ctx);
}


/* another attempt is possible: candidates and the attempt limit allow */

ngx_uint_t
ngx_omniroute_may_continue(ngx_omniroute_ctx_t *ctx)
{
    return ctx->next < ctx->candidates.nelts
           && ctx->attempts.nelts < (ngx_uint_t) ctx->lcf->max_attempts;
}


/* every attempt failed: the client gets the latest held provider error */

static ngx_int_t
ngx_omniroute_send_held(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_attempt_t *a)
{
    ngx_int_t     rc;
    ngx_buf_t    *b;
    ngx_chain_t   out;

    if (ngx_omniroute_copy_response_headers(r, a->sr) != NGX_OK
        || ngx_omniroute_apply_restatement(r, a) != NGX_OK
        || ngx_omniroute_add_route_headers(r, ctx) != NGX_OK)
    {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    b = a->body;

    r->headers_out.content_length_n = b ? b->last - b->pos : 0;

    if (b == NULL || b->last == b->pos) {
        r->header_only = 1;
    }

    rc = ngx_http_send_header(r);

    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }

    b->last_buf = 1;
    b->last_in_chain = 1;

    out.buf = b;
    out.next = NULL;

    return ngx_http_output_filter(r, &out);
}


static ngx_int_t
ngx_omniroute_send_transport_error(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, ngx_omniroute_attempt_t *a)
{
    if (ngx_omniroute_add_route_headers(r, ctx) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (a->status == NGX_HTTP_GATEWAY_TIME_OUT) {
        return ngx_omniroute_send_error(r, NGX_HTTP_GATEWAY_TIME_OUT,
                                        "upstream_error", "upstream_timeout",
                                        "the provider did not respond in "
                                        "time");
    }

    return ngx_omniroute_send_error(r, NGX_HTTP_BAD_GATEWAY,
                                    "upstream_error", "upstream_unavailable",
                                    "the provider could not be reached");
}


/*
 * The settings in force for provider p during this request: read once
 * (they may carry runtime overrides from the shared zone).
 */

ngx_omniroute_settings_t *
ngx_omniroute_settings_of(ngx_http_request_t *r, ngx_omniroute_provider_t *p)
{
    ngx_uint_t                          i;
    ngx_omniroute_ctx_t                *ctx;
    ngx_omniroute_main_conf_t          *omcf;
    ngx_omniroute_provider_settings_t  *ps;

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);
    ctx = ngx_http_get_module_ctx(r->main, ngx_http_omniroute_module);

    if (ctx == NULL) {
        return &p->settings;
    }

    for (i = 0; i < ctx->nsettings; i++) {
        if (ctx->settings[i].provider == p) {
            return &ctx->settings[i].settings;
        }
    }

    i = (ctx->nsettings < NGX_OMNIROUTE_SETTINGS_CACHE)
        ? ctx->nsettings++ : NGX_OMNIROUTE_SETTINGS_CACHE - 1;

    ps = &ctx->settings[i];
    ps->provider = p;

    ngx_omniroute_settings_effective(omcf, p, &ps->settings);

    return &ps->settings;
}


/*
 * In-flight attempts per connection, for the strategies that read them
 * and for max_concurrent: a slot is taken at dispatch (compare-and-set
 * below the cap), held until the attempt is over or the request goes away
 * (pool cleanup), whichever comes first.  NULL: not counted;
 * NGX_OMNIROUTE_SLOT_FULL: the connection is at its cap.
 */

static ngx_atomic_t *
ngx_omniroute_acquire_slot(ngx_http_request_t *r,
    ngx_omniroute_candidate_t *cand)
{
    ngx_atomic_t               *counter;
    ngx_atomic_uint_t           n;
    ngx_omniroute_main_conf_t  *omcf;

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);

    if (!omcf->track_inflight || omcf->shm_zone == NULL) {
        return NULL;
    }

    counter = ngx_omniroute_inflight(&omcf->store, &cand->conn->id);
    if (counter == NULL) {
        return NULL;
    }

    if (cand->conn->max_concurrent == 0) {
        (void) ngx_atomic_fetch_add(counter, 1);
        return counter;
    }

    for ( ;; ) {
        n = *counter;

        if (n >= cand->conn->max_concurrent) {
            return NGX_OMNIROUTE_SLOT_FULL;
        }

        if (ngx_atomic_cmp_set(counter, n, n + 1)) {
            return counter;
        }
    }
}


static ngx_int_t
ngx_omniroute_hold_slot(ngx_http_request_t *r, ngx_omniroute_attempt_t *a,
    ngx_atomic_t *counter)
{
    ngx_pool_cleanup_t  *cln;

    if (counter == NULL) {
        return NGX_OK;
    }

    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (cln == NULL) {
        (void) ngx_atomic_fetch_add(counter, -1);
        return NGX_ERROR;
    }

    cln->handler = ngx_omniroute_inflight_done;
    cln->data = a;

    a->inflight = counter;

    return NGX_OK;
}


static void
ngx_omniroute_inflight_done(void *data)
{
    ngx_omniroute_attempt_t *a = data;

    if (a->inflight) {
        (void) ngx_atomic_fetch_add(a->inflight, -1);
        a->inflight = NULL;
    }
}


/*
 * R-CONC-1/2: every eligible connection is at its max_concurrent: the
 * request waits for a slot (checked every NGX_OMNIROUTE_QUEUE_POLL ms) at
 * most the queue wait budget; a full queue answers 429 at once.  Returns
 * NGX_DONE when queued, else what to finalize the request with.
 */

static ngx_int_t
ngx_omniroute_queue(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx)
{
    ngx_atomic_uint_t                 n;
    ngx_pool_cleanup_t               *cln;
    ngx_omniroute_main_conf_t        *omcf;
    ngx_omniroute_global_settings_t   g;

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);
    ngx_omniroute_settings_global(omcf, &g);

    n = ngx_atomic_fetch_add(&omcf->store.sh->queued, 1);

    if (g.max_queue_depth > 0 && n >= (ngx_atomic_uint_t) g.max_queue_depth)
    {
        (void) ngx_atomic_fetch_add(&omcf->store.sh->queued, -1);
        ngx_omniroute_count(r, NGX_OMNIROUTE_OUT_COOLING_DOWN);

        return ngx_omniroute_send_error(r, NGX_HTTP_TOO_MANY_REQUESTS,
                                        "rate_limit_error",
                                        "RATE_LIMIT_QUEUE_FULL",
                                        "the request queue is full");
    }

    ctx->queued = 1;

    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (cln == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    cln->handler = ngx_omniroute_queue_leave;
    cln->data = r;

    ctx->wait_until = ngx_omniroute_now() + g.queue_max_wait_ms;

    ctx->wait.handler = ngx_omniroute_queue_retry;
    ctx->wait.data = r;
    ctx->wait.log = r->connection->log;

    /* a client that goes away while waiting ends the request */
    r->read_event_handler = ngx_http_test_reading;

    ngx_add_timer(&ctx->wait, NGX_OMNIROUTE_QUEUE_POLL);

    ngx_log_debug0(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "omniroute: queued for a concurrency slot");

    return NGX_DONE;
}


static void
ngx_omniroute_queue_retry(ngx_event_t *ev)
{
    ngx_int_t             rc;
    ngx_connection_t     *c;
    ngx_http_request_t   *r;
    ngx_omniroute_ctx_t  *ctx;

    r = ev->data;
    c = r->connection;
    ctx = ngx_http_get_module_ctx(r, ngx_http_omniroute_module);

    /* try the candidates again, from the first */

    ctx->next = 0;
    ctx->saw_full = 0;
    ctx->excluded.nelts = ctx->plan_excluded;

    rc = ngx_omniroute_start_attempt(r, ctx);

    if (rc == NGX_BUSY && ngx_omniroute_now() < ctx->wait_until) {
        ngx_add_timer(&ctx->wait, NGX_OMNIROUTE_QUEUE_POLL);
        return;
    }

    ngx_omniroute_queue_leave(r);

    switch (rc) {

    case NGX_OK:
        break;

    case NGX_BUSY:
        ngx_omniroute_count(r, NGX_OMNIROUTE_OUT_COOLING_DOWN);
        ngx_http_finalize_request(r,
            ngx_omniroute_send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                                     "rate_limit_error", "SEMAPHORE_TIMEOUT",
                                     "no concurrency slot became free "
                                     "within the queue wait budget"));
        break;

    case NGX_DECLINED:
        ngx_http_finalize_request(r, ngx_omniroute_send_cooling_down(r, ctx));
        break;

    default:
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        break;
    }

    ngx_http_run_posted_requests(c);
}


/* out of the queue: the count, the timer (also at request end) */

static void
ngx_omniroute_queue_leave(void *data)
{
    ngx_http_request_t *r = data;

    ngx_omniroute_ctx_t        *ctx;
    ngx_omniroute_main_conf_t  *omcf;

    ctx = ngx_http_get_module_ctx(r, ngx_http_omniroute_module);

    if (ctx == NULL || !ctx->queued) {
        return;
    }

    ctx->queued = 0;

    if (ctx->wait.timer_set) {
        ngx_del_timer(&ctx->wait);
    }

    omcf = ngx_http_get_module_main_conf(r, ngx_http_omniroute_module);

    (void) ngx_atomic_fetch_add(&omcf->store.sh->queued, -1);
}
