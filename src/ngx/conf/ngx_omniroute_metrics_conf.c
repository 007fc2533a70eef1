
/*
 * Copyright (C) ngx_omniroute authors
 *
 * The metrics zone's labels and pairs, laid out from the configuration
 * (see store/ngx_omniroute_metrics_zone.h): a model slot per declared
 * model and combo, one "provider/ *" per provider and "(none)"; the
 * (model, connection) pairs the routes make; the hashes of those names
 * that carry the counters over a reload, and each connection's cost.
 * The store is handed the arrays and sizes and adds the zone.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute.h"


static ngx_int_t ngx_omniroute_mzone_pairs(ngx_conf_t *cf,
    ngx_omniroute_mzone_t *mz, ngx_omniroute_main_conf_t *omcf);


/*
 * Builds the layout of the configuration's metrics and adds the zone (no
 * zone without providers).  Called once the http block is parsed and the
 * routes are built.
 */

ngx_int_t
ngx_omniroute_mzone_add(ngx_conf_t *cf, ngx_omniroute_main_conf_t *omcf)
{
    u_char                      *p;
    ngx_str_t                    none;
    ngx_uint_t                   i;
    ngx_omniroute_mzone_t       *mz;
    ngx_omniroute_model_t       *m;
    ngx_omniroute_provider_t    *pr;
    ngx_omniroute_connection_t  *c;

    if (omcf->providers.nelts == 0) {
        return NGX_OK;
    }

    mz = ngx_pcalloc(cf->pool, sizeof(ngx_omniroute_mzone_t));
    if (mz == NULL) {
        return NGX_ERROR;
    }

    pr = omcf->providers.elts;
    c = omcf->connections.elts;
    m = omcf->models.elts;

    mz->nproviders = omcf->providers.nelts;
    mz->nconns = omcf->connections.nelts;
    mz->ndeclared = omcf->models.nelts;
    mz->nmodels = mz->ndeclared + mz->nproviders + 1;

    /* label values: declared names, "provider/ *", "(none)" */

    mz->model_names = ngx_palloc(cf->pool, mz->nmodels * sizeof(ngx_str_t));
    mz->provider_keys = ngx_palloc(cf->pool,
                                   mz->nproviders * sizeof(uint64_t));
    mz->conn_keys = ngx_palloc(cf->pool, (mz->nconns + 1) * sizeof(uint64_t));
    mz->model_keys = ngx_palloc(cf->pool, mz->nmodels * sizeof(uint64_t));
    mz->cost4 = ngx_palloc(cf->pool, (mz->nconns + 1) * sizeof(uint64_t));

    if (mz->model_names == NULL || mz->provider_keys == NULL
        || mz->conn_keys == NULL || mz->model_keys == NULL
        || mz->cost4 == NULL)
    {
        return NGX_ERROR;
    }

    for (i = 0; i < mz->ndeclared; i++) {
        mz->model_names[i] = m[i].name;
    }

    for (i = 0; i < mz->nproviders; i++) {
        p = ngx_pnalloc(cf->pool, pr[i].name.len + 2);
        if (p == NULL) {
            return NGX_ERROR;
        }

        mz->model_names[mz->ndeclared + i].data = p;
        mz->model_names[mz->ndeclared + i].len =
                                  ngx_sprintf(p, "%V/*", &pr[i].name) - p;

        mz->provider_keys[i] = ngx_omniroute_mzone_key("p", &pr[i].name,
                                                       NULL);
    }

    ngx_str_set(&none, "(none)");
    mz->model_names[mz->nmodels - 1] = none;

    for (i = 0; i < mz->nmodels; i++) {
        mz->model_keys[i] = ngx_omniroute_mzone_key("m", &mz->model_names[i],
                                                    NULL);
    }

    for (i = 0; i < mz->nconns; i++) {
        mz->conn_keys[i] = ngx_omniroute_mzone_key("c", &c[i].id, NULL);
        mz->cost4[i] = (c[i].cost > 0) ? (uint64_t) (c[i].cost * 10000 + 0.5)
                                       : 0;
    }

    if (ngx_omniroute_mzone_pairs(cf, mz, omcf) != NGX_OK) {
        return NGX_ERROR;
    }

    if (ngx_omniroute_mzone_create(cf, mz) != NGX_OK) {
        return NGX_ERROR;
    }

    omcf->mzone = mz;

    return NGX_OK;
}


/*
 * The (model, connection) pairs: one per connection serving a declared
 * model (its routes deduplicated), then one per connection for the
 * "provider/ *" slot of its provider, then, with an emergency target, one
 * per model slot for its connection.
 */

static ngx_int_t
ngx_omniroute_mzone_pairs(ngx_conf_t *cf, ngx_omniroute_mzone_t *mz,
    ngx_omniroute_main_conf_t *omcf)
{
    ngx_uint_t                   i, j, k, n, first, ci, routes;
    ngx_omniroute_model_t       *m;
    ngx_omniroute_route_t       *rt;
    ngx_omniroute_connection_t  *c;

    m = omcf->models.elts;
    c = omcf->connections.elts;

    routes = 0;

    for (i = 0; i < mz->ndeclared; i++) {
        routes += m[i].routes.nelts;
    }

    n = routes + mz->nconns + 1;

    if (omcf->emergency) {
        n += mz->nmodels;
    }

    mz->route_base = ngx_palloc(cf->pool,
                                (mz->ndeclared + 1) * sizeof(ngx_uint_t));
    mz->route_pair = ngx_palloc(cf->pool, (routes + 1) * sizeof(ngx_uint_t));
    mz->direct_pair = ngx_palloc(cf->pool,
                                 (mz->nconns + 1) * sizeof(ngx_uint_t));
    mz->pair_model = ngx_palloc(cf->pool, n * sizeof(ngx_uint_t));
    mz->pair_conn = ngx_palloc(cf->pool, n * sizeof(ngx_uint_t));
    mz->pair_keys = ngx_palloc(cf->pool, n * sizeof(uint64_t));

    if (omcf->emergency) {
        mz->emergency_pair = ngx_palloc(cf->pool,
                                        mz->nmodels * sizeof(ngx_uint_t));
        if (mz->emergency_pair == NULL) {
            return NGX_ERROR;
        }
    }

    if (mz->route_base == NULL || mz->route_pair == NULL
        || mz->direct_pair == NULL || mz->pair_model == NULL
        || mz->pair_conn == NULL || mz->pair_keys == NULL)
    {
        return NGX_ERROR;
    }

    n = 0;
    routes = 0;

    for (i = 0; i < mz->ndeclared; i++) {
        mz->route_base[i] = routes;
        first = n;
        rt = m[i].routes.elts;

        for (j = 0; j < m[i].routes.nelts; j++) {
            ci = rt[j].conn - c;

            for (k = first; k < n; k++) {
                if (mz->pair_conn[k] == ci) {
                    break;
                }
            }

            if (k == n) {
                mz->pair_model[n] = i;
                mz->pair_conn[n] = ci;
                mz->pair_keys[n] = ngx_omniroute_mzone_key("r", &m[i].name,
                                                           &c[ci].id);
                n++;
            }

            mz->route_pair[routes++] = k;
        }
    }

    for (ci = 0; ci < mz->nconns; ci++) {
        k = ngx_omniroute_mzone_direct(mz, c[ci].provider);

        mz->pair_model[n] = k;
        mz->pair_conn[n] = ci;
        mz->pair_keys[n] = ngx_omniroute_mzone_key("r", &mz->model_names[k],
                                                   &c[ci].id);
        mz->direct_pair[ci] = n++;
    }

    if (omcf->emergency == NULL) {
        mz->npairs = n;
        return NGX_OK;
    }

    /*
     * R-EMERG-1: the emergency target serves any model: one pair per
     * model slot with its connection (the route's pair when the model has
     * one on that connection already)
     */

    ci = omcf->emergency->conn - c;

    for (k = 0; k < mz->nmodels; k++) {
        mz->emergency_pair[k] = NGX_CONF_UNSET_UINT;

        if (k < mz->ndeclared) {
            first = mz->route_base[k];

            for (j = 0; j < m[k].routes.nelts; j++) {
                if (mz->pair_conn[mz->route_pair[first + j]] == ci) {
                    mz->emergency_pair[k] = mz->route_pair[first + j];
                    break;
                }
            }

        } else if (k == ngx_omniroute_mzone_direct(mz, c[ci].provider)) {
            mz->emergency_pair[k] = mz->direct_pair[ci];
        }

        if (mz->emergency_pair[k] != NGX_CONF_UNSET_UINT) {
            continue;
        }

        mz->pair_model[n] = k;
        mz->pair_conn[n] = ci;
        mz->pair_keys[n] = ngx_omniroute_mzone_key("r", &mz->model_names[k],
                                                   &c[ci].id);
        mz->emergency_pair[k] = n++;
    }

    mz->npairs = n;

    return NGX_OK;
}
