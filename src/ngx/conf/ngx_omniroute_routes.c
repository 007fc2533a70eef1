
/*
 * Copyright (C) ngx_omniroute authors
 *
 * A model's routes, built at init_main_conf: its targets resolved (a
 * "provider/model" with a declared provider, or an alias's target), the
 * connections serving each target by ascending priority, with what
 * configuration determines about each route (its caps, lockout keys and
 * their hashes), the emergency route, and the hash that finds a model by
 * its name; and the lookups requests make in them.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute.h"


static ngx_int_t ngx_omniroute_resolve_targets(ngx_conf_t *cf,
    ngx_omniroute_main_conf_t *omcf);
static ngx_int_t ngx_omniroute_init_routes(ngx_conf_t *cf,
    ngx_omniroute_main_conf_t *omcf);
static ngx_int_t ngx_omniroute_init_emergency(ngx_conf_t *cf,
    ngx_omniroute_main_conf_t *omcf);
static ngx_int_t ngx_omniroute_routes_none(ngx_conf_t *cf,
    ngx_omniroute_main_conf_t *omcf, ngx_omniroute_model_t *m);


/*
 * Called by init_main_conf once the connections know their providers:
 * every model's targets and routes, then the emergency route
 */

ngx_int_t
ngx_omniroute_routes_init(ngx_conf_t *cf, ngx_omniroute_main_conf_t *omcf)
{
    if (ngx_omniroute_resolve_targets(cf, omcf) != NGX_OK) {
        return NGX_ERROR;
    }

    if (ngx_omniroute_init_routes(cf, omcf) != NGX_OK) {
        return NGX_ERROR;
    }

    if (omcf->emergency_conn.len
        && ngx_omniroute_init_emergency(cf, omcf) != NGX_OK)
    {
        return NGX_ERROR;
    }

    return NGX_OK;
}


/* the targets of every model and combo, as "provider/model" */

static ngx_int_t
ngx_omniroute_resolve_targets(ngx_conf_t *cf, ngx_omniroute_main_conf_t *omcf)
{
    u_char                  *slash;
    ngx_int_t                pi;
    ngx_str_t                pname;
    ngx_uint_t               i, j, k;
    ngx_omniroute_model_t   *m, *alias;
    ngx_omniroute_target_t  *t, *at;

    m = omcf->models.elts;

    /* pass 1: direct "provider/model" targets */

    for (i = 0; i < omcf->models.nelts; i++) {
        t = m[i].targets.elts;

        for (j = 0; j < m[i].targets.nelts; j++) {
            slash = ngx_strlchr(t[j].model.data,
                                t[j].model.data + t[j].model.len, '/');
            if (slash == NULL) {
                continue;
            }

            pname.data = t[j].model.data;
            pname.len = slash - t[j].model.data;

            pi = ngx_omniroute_provider_lookup(omcf, &pname);
            if (pi == NGX_ERROR) {
                continue;
            }

            if (slash + 1 == t[j].model.data + t[j].model.len) {
                ngx_omniroute_conf_error(cf, &m[i].file, m[i].line,
                                         "target \"%V\" of \"%V\" has an "
                                         "empty model name", &t[j].model,
                                         &m[i].name);
                return NGX_ERROR;
            }

            t[j].provider = pi;
            t[j].model.len -= slash + 1 - t[j].model.data;
            t[j].model.data = slash + 1;
        }
    }

    /* pass 2: combo targets naming an alias take the alias's target */

    for (i = 0; i < omcf->models.nelts; i++) {
        t = m[i].targets.elts;

        for (j = 0; j < m[i].targets.nelts; j++) {
            if (t[j].provider != NGX_CONF_UNSET_UINT) {
                continue;
            }

            alias = ngx_omniroute_find_model(omcf, &t[j].model);

            if (alias == NULL || alias == &m[i] || alias->combo) {
                ngx_omniroute_conf_error(cf, &m[i].file, m[i].line,
                                         "target \"%V\" of \"%V\" is "
                                         "neither \"provider/model\" with a "
                                         "declared provider nor a model "
                                         "alias", &t[j].model, &m[i].name);
                return NGX_ERROR;
            }

            at = alias->targets.elts;

            for (k = 0; k < alias->targets.nelts; k++) {
                if (at[k].provider == NGX_CONF_UNSET_UINT) {
                    ngx_omniroute_conf_error(cf, &m[i].file, m[i].line,
                                             "target \"%V\" of \"%V\" names "
                                             "an alias of an alias",
                                             &t[j].model, &m[i].name);
                    return NGX_ERROR;
                }
            }

            t[j] = at[0];
        }
    }

    return NGX_OK;
}


/* every model's routes, and the hash that finds a model by its name */

static ngx_int_t
ngx_omniroute_init_routes(ngx_conf_t *cf, ngx_omniroute_main_conf_t *omcf)
{
    ngx_uint_t              i, j;
    ngx_hash_key_t         *hk;
    ngx_hash_init_t         hash;
    ngx_array_t             keys;
    ngx_omniroute_model_t  *m;
    ngx_omniroute_target_t *t;

    m = omcf->models.elts;

    if (ngx_array_init(&keys, cf->temp_pool, ngx_max(omcf->models.nelts, 1),
                       sizeof(ngx_hash_key_t))
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    for (i = 0; i < omcf->models.nelts; i++) {
        t = m[i].targets.elts;

        if (ngx_array_init(&m[i].routes, cf->pool, 4,
                           sizeof(ngx_omniroute_route_t))
            != NGX_OK)
        {
            return NGX_ERROR;
        }

        for (j = 0; j < m[i].targets.nelts; j++) {
            if (ngx_omniroute_routes_add(cf->pool, &m[i].routes, omcf, &t[j])
                != NGX_OK)
            {
                return NGX_ERROR;
            }
        }

        if (m[i].routes.nelts == 0
            && ngx_omniroute_routes_none(cf, omcf, &m[i]) != NGX_OK)
        {
            return NGX_ERROR;
        }

        m[i].capped = ngx_omniroute_routes_capped(m[i].routes.elts,
                                                  m[i].routes.nelts);

        m[i].memo = ngx_pcalloc(cf->pool, sizeof(ngx_omniroute_plan_memo_t));
        if (m[i].memo == NULL) {
            return NGX_ERROR;
        }

        m[i].memo->entries = ngx_pcalloc(cf->pool,
                                 ngx_max(m[i].routes.nelts, 1)
                                 * sizeof(ngx_omniroute_memo_entry_t));
        if (m[i].memo->entries == NULL) {
            return NGX_ERROR;
        }

        hk = ngx_array_push(&keys);
        if (hk == NULL) {
            return NGX_ERROR;
        }

        hk->key = m[i].name;
        hk->key_hash = ngx_hash_key(m[i].name.data, m[i].name.len);
        hk->value = &m[i];
    }

    hash.hash = &omcf->model_hash;
    hash.key = ngx_hash_key;
    hash.max_size = 4096;
    hash.bucket_size = ngx_align(64, ngx_cacheline_size);
    hash.name = "omniroute_models_hash";
    hash.pool = cf->pool;
    hash.temp_pool = NULL;

    return ngx_hash_init(&hash, keys.elts, keys.nelts);
}


/* the route of omniroute_emergency_fallback (R-EMERG-1) */

static ngx_int_t
ngx_omniroute_init_emergency(ngx_conf_t *cf, ngx_omniroute_main_conf_t *omcf)
{
    ngx_uint_t                   i;
    ngx_array_t                  routes;
    ngx_omniroute_route_t       *rt;
    ngx_omniroute_target_t      *t;
    ngx_omniroute_connection_t  *c;

    c = omcf->connections.elts;

    for (i = 0; i < omcf->connections.nelts; i++) {
        if (c[i].id.len == omcf->emergency_conn.len
            && ngx_strncmp(c[i].id.data, omcf->emergency_conn.data,
                           c[i].id.len)
               == 0)
        {
            break;
        }
    }

    if (i == omcf->connections.nelts) {
        ngx_omniroute_conf_error(cf, &omcf->emergency_file,
                                 omcf->emergency_line,
                                 "\"omniroute_emergency_fallback\" names "
                                 "unknown connection \"%V\"",
                                 &omcf->emergency_conn);
        return NGX_ERROR;
    }

    t = ngx_palloc(cf->pool, sizeof(ngx_omniroute_target_t));
    if (t == NULL) {
        return NGX_ERROR;
    }

    t->provider = c[i].provider;
    t->model = omcf->emergency_model;

    if (ngx_array_init(&routes, cf->pool, 4, sizeof(ngx_omniroute_route_t))
        != NGX_OK
        || ngx_omniroute_routes_add(cf->pool, &routes, omcf, t) != NGX_OK)
    {
        return NGX_ERROR;
    }

    rt = routes.elts;

    for (i = 0; i < routes.nelts; i++) {
        if (rt[i].conn->id.len == omcf->emergency_conn.len
            && ngx_strncmp(rt[i].conn->id.data, omcf->emergency_conn.data,
                           omcf->emergency_conn.len)
               == 0)
        {
            omcf->emergency = &rt[i];
            return NGX_OK;
        }
    }

    ngx_omniroute_conf_error(cf, &omcf->emergency_file, omcf->emergency_line,
                             "connection \"%V\" of \"omniroute_emergency_"
                             "fallback\" may not serve model \"%V\" "
                             "(its \"models=\")", &omcf->emergency_conn,
                             &omcf->emergency_model);

    return NGX_ERROR;
}


/* whether a route has a concurrency cap: requests may queue (R-CONC-1) */

ngx_uint_t
ngx_omniroute_routes_capped(ngx_omniroute_route_t *routes, ngx_uint_t n)
{
    ngx_uint_t  i;

    for (i = 0; i < n; i++) {
        if (routes[i].conn->max_concurrent || routes[i].model_cap) {
            return 1;
        }
    }

    return 0;
}


/*
 * The routes of target t appended to routes: the provider's connections
 * by ascending priority, declaration order breaking ties (stable).  Used
 * at configuration time for the declared models and per request for a
 * "provider/model" name.
 */

ngx_int_t
ngx_omniroute_routes_add(ngx_pool_t *pool, ngx_array_t *routes,
    ngx_omniroute_main_conf_t *omcf, ngx_omniroute_target_t *t)
{
    u_char                       buf[NGX_OMNIROUTE_KEY_MAX];
    size_t                       len;
    uint32_t                     crc;
    ngx_uint_t                   i, j, first;
    ngx_omniroute_route_t       *rt, tmp;
    ngx_omniroute_provider_t    *p;
    ngx_omniroute_model_cap_t   *mc;
    ngx_omniroute_connection_t  *c;
    static or_scope_e            scopes[NGX_OMNIROUTE_LOCKOUT_SCOPES] = {
                                     OR_SCOPE_MODEL, OR_SCOPE_BASE_MODEL,
                                     OR_SCOPE_QUOTA_FAMILY };

    p = (ngx_omniroute_provider_t *) omcf->providers.elts + t->provider;
    c = omcf->connections.elts;
    first = routes->nelts;

    for (i = 0; i < omcf->connections.nelts; i++) {
        if (c[i].provider != t->provider
            || !ngx_omniroute_conn_serves(&c[i], &t->model))
        {
            /* another provider's, or not allowed this model: no route */
            continue;
        }

        rt = ngx_array_push(routes);
        if (rt == NULL) {
            return NGX_ERROR;
        }

        rt->conn = &c[i];
        rt->provider = p;
        rt->target = t;
        rt->order = routes->nelts - 1;

        rt->model_cap = 0;
        ngx_str_null(&rt->cap_key);

        mc = c[i].model_caps.elts;

        for (j = 0; j < c[i].model_caps.nelts; j++) {
            if (mc[j].model.len != t->model.len
                || ngx_strncmp(mc[j].model.data, t->model.data,
                               t->model.len)
                   != 0)
            {
                continue;
            }

            rt->model_cap = mc[j].cap;

            rt->cap_key.len = c[i].id.len + 1 + t->model.len;
            rt->cap_key.data = ngx_pnalloc(pool, rt->cap_key.len);
            if (rt->cap_key.data == NULL) {
                return NGX_ERROR;
            }

            ngx_sprintf(rt->cap_key.data, "%V|%V", &c[i].id, &t->model);
            break;
        }

        /* a stable id: target model and connection id */
        ngx_crc32_init(crc);
        ngx_crc32_update(&crc, (u_char *) &t->model.len, sizeof(size_t));
        ngx_crc32_update(&crc, t->model.data, t->model.len);
        ngx_crc32_update(&crc, c[i].id.data, c[i].id.len);
        ngx_crc32_final(crc);
        rt->id = crc;

        for (j = 0; j < NGX_OMNIROUTE_LOCKOUT_SCOPES; j++) {
            len = or_lockout_key((char *) buf, NGX_OMNIROUTE_KEY_MAX,
                                 (const char *) p->name.data, p->name.len,
                                 (const char *) c[i].id.data, c[i].id.len,
                                 (const char *) t->model.data, t->model.len,
                                 scopes[j], p->families.elts,
                                 p->families.nelts);

            rt->lockout_key[j].len = len;
            rt->lockout_key[j].data = NULL;

            if (len) {
                rt->lockout_key[j].data = ngx_pnalloc(pool, len);
                if (rt->lockout_key[j].data == NULL) {
                    return NGX_ERROR;
                }

                ngx_memcpy(rt->lockout_key[j].data, buf, len);
            }

            rt->lockout_hash[j] = ngx_omniroute_store_hash(
                                      NGX_OMNIROUTE_T_LOCKOUT,
                                      &rt->lockout_key[j]);
        }

        rt->rejected_hash = ngx_omniroute_store_hash(NGX_OMNIROUTE_T_REJECTED,
                                                     &rt->lockout_key[0]);
    }

    /* stable insertion sort of this target's connections by priority */

    rt = routes->elts;

    for (i = first + 1; i < routes->nelts; i++) {
        tmp = rt[i];

        for (j = i; j > first && rt[j - 1].conn->priority
                                 > tmp.conn->priority; j--)
        {
            rt[j] = rt[j - 1];
        }

        rt[j] = tmp;
    }

    return NGX_OK;
}


/*
 * A model or combo no connection may serve would answer every request
 * with 404 no_executable_targets: an error at its line, saying why (its
 * first target's provider has no connection, or their models= lists
 * leave it out).
 */

static ngx_int_t
ngx_omniroute_routes_none(ngx_conf_t *cf, ngx_omniroute_main_conf_t *omcf,
    ngx_omniroute_model_t *m)
{
    ngx_uint_t                   i, n;
    ngx_omniroute_target_t      *t;
    ngx_omniroute_provider_t    *p;
    ngx_omniroute_connection_t  *c;

    t = m->targets.elts;
    p = (ngx_omniroute_provider_t *) omcf->providers.elts + t[0].provider;
    c = omcf->connections.elts;
    n = 0;

    for (i = 0; i < omcf->connections.nelts; i++) {
        n += (c[i].provider == t[0].provider);
    }

    if (n == 0) {
        ngx_omniroute_conf_error(cf, &m->file, m->line,
                                 "%s \"%V\" has no route: provider \"%V\" "
                                 "of its target \"%V/%V\" has no "
                                 "connection (declare \"omniroute_connection "
                                 "NAME provider=%V ...\")",
                                 m->combo ? "combo" : "model", &m->name,
                                 &p->name, &p->name, &t[0].model, &p->name);
        return NGX_ERROR;
    }

    ngx_omniroute_conf_error(cf, &m->file, m->line,
                             "%s \"%V\" has no route: no connection may "
                             "serve its target%s (the \"models=\" of the "
                             "%ui connection%s of provider \"%V\" leave "
                             "out \"%V\")",
                             m->combo ? "combo" : "model", &m->name,
                             m->targets.nelts > 1 ? "s" : "", n,
                             n > 1 ? "s" : "", &p->name, &t[0].model);
    return NGX_ERROR;
}


/* the connection may serve this upstream model (its models= list) */

ngx_uint_t
ngx_omniroute_conn_serves(ngx_omniroute_connection_t *c, ngx_str_t *model)
{
    ngx_str_t   *m;
    ngx_uint_t   i;

    if (c->models.nelts == 0) {
        return 1;
    }

    m = c->models.elts;

    for (i = 0; i < c->models.nelts; i++) {
        if (m[i].len == model->len
            && ngx_strncmp(m[i].data, model->data, model->len) == 0)
        {
            return 1;
        }
    }

    return 0;
}



/* index into a route's lockout_key[] of a lockout scope */

size_t
ngx_omniroute_lockout_scope_index(or_scope_e scope)
{
    switch (scope) {

    case OR_SCOPE_BASE_MODEL:
        return 1;

    case OR_SCOPE_QUOTA_FAMILY:
        return 2;

    default:
        return 0;
    }
}


/* a declared model or combo by name (after configuration), or NULL */

ngx_omniroute_model_t *
ngx_omniroute_model_lookup(ngx_omniroute_main_conf_t *omcf, ngx_str_t *name)
{
    return ngx_hash_find(&omcf->model_hash,
                         ngx_hash_key(name->data, name->len),
                         name->data, name->len);
}


/*
 * A declared model or combo by name, or NULL; while configuring, before
 * init_main_conf builds the hash of ngx_omniroute_model_lookup()
 */

ngx_omniroute_model_t *
ngx_omniroute_find_model(ngx_omniroute_main_conf_t *omcf, ngx_str_t *name)
{
    ngx_uint_t              i;
    ngx_omniroute_model_t  *m;

    m = omcf->models.elts;

    for (i = 0; i < omcf->models.nelts; i++) {
        if (m[i].name.len == name->len
            && ngx_strncmp(m[i].name.data, name->data, name->len) == 0)
        {
            return &m[i];
        }
    }

    return NULL;
}


/* a declared provider's index by name, or NGX_ERROR */

ngx_int_t
ngx_omniroute_provider_lookup(ngx_omniroute_main_conf_t *omcf,
    ngx_str_t *name)
{
    ngx_uint_t                 i;
    ngx_omniroute_provider_t  *p;

    p = omcf->providers.elts;

    for (i = 0; i < omcf->providers.nelts; i++) {
        if (p[i].name.len == name->len
            && ngx_strncmp(p[i].name.data, name->data, name->len) == 0)
        {
            return i;
        }
    }

    return NGX_ERROR;
}
