
/*
 * Copyright (C) ngx_omniroute authors
 *
 * What nginx -t can only check once the whole configuration is read, each
 * error reported at the line of the directive it is about (not at the
 * closing "}" of http {}): the attempt location of every omniroute_pass
 * exists in its server, as a request for its URI would find it, and has
 * a content handler of its own (proxy_pass, from omniroute_params).
 * Also the list of servers whose own error pages (a malformed request
 * answered before any location is chosen) are JSON.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute.h"


static ngx_int_t ngx_omniroute_find_static(ngx_http_location_tree_node_t *node,
    ngx_str_t *uri, ngx_http_core_loc_conf_t **found);
static ngx_int_t ngx_omniroute_find_location(ngx_http_core_loc_conf_t **cur,
    ngx_str_t *uri);


/* an error at the line of a directive read earlier */

void
ngx_omniroute_conf_error(ngx_conf_t *cf, ngx_str_t *file, ngx_uint_t line,
    const char *fmt, ...)
{
    u_char   *p, errstr[NGX_MAX_CONF_ERRSTR];
    va_list   args;

    va_start(args, fmt);
    p = ngx_vslprintf(errstr, errstr + NGX_MAX_CONF_ERRSTR, fmt, args);
    va_end(args);

    ngx_log_error(NGX_LOG_EMERG, cf->log, 0, "%*s in %V:%ui",
                  p - errstr, errstr, file, line);
}


/*
 * ngx_conf_set_msec_slot() whose invalid value says what is expected (an
 * affinity's time, 0: off)
 */

char *
ngx_omniroute_conf_set_time(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    char       *rv;
    ngx_str_t  *value;

    rv = ngx_conf_set_msec_slot(cf, cmd, conf);

    if (rv == NGX_CONF_OK || rv == NGX_CONF_ERROR
        || ngx_strcmp(rv, "invalid value") != 0)
    {
        return rv;
    }

    value = cf->args->elts;

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "invalid value \"%V\" of \"%V\": expected a time "
                       "(a number with the unit ms, s, m, h or d, e.g. "
                       "\"30m\"; 0: off)", &value[1], &cmd->name);

    return NGX_CONF_ERROR;
}


/* the current server answers its own errors as JSON */

ngx_int_t
ngx_omniroute_json_server(ngx_conf_t *cf)
{
    ngx_uint_t                  i;
    ngx_http_core_srv_conf_t   *cscf, **s;
    ngx_omniroute_main_conf_t  *omcf;

    omcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_omniroute_module);
    cscf = ngx_http_conf_get_module_srv_conf(cf, ngx_http_core_module);

    s = omcf->json_servers.elts;

    for (i = 0; i < omcf->json_servers.nelts; i++) {
        if (s[i] == cscf) {
            return NGX_OK;
        }
    }

    s = ngx_array_push(&omcf->json_servers);
    if (s == NULL) {
        return NGX_ERROR;
    }

    *s = cscf;

    return NGX_OK;
}


/*
 * Each omniroute_pass's attempt location: the location a subrequest for
 * its URI finds in the same server (static tree, nested locations,
 * regular expressions, as ngx_http_core_find_location() walks them) must
 * exist, be internal and carry a content handler that is not
 * omniroute_pass itself.
 */

ngx_int_t
ngx_omniroute_check_conf(ngx_conf_t *cf)
{
    ngx_uint_t                  i;
    ngx_http_core_loc_conf_t   *root, *found;
    ngx_omniroute_pass_conf_t  *pc;
    ngx_omniroute_main_conf_t  *omcf;

    omcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_omniroute_module);
    pc = omcf->passes.elts;

    for (i = 0; i < omcf->passes.nelts; i++) {
        root = pc[i].server->ctx->loc_conf[ngx_http_core_module.ctx_index];
        found = root;

        (void) ngx_omniroute_find_location(&found, &pc[i].pass_uri);

        if (found == root) {
            ngx_omniroute_conf_error(cf, &pc[i].file, pc[i].line,
                                     "\"omniroute_pass\" of location \"%V\" "
                                     "names the attempt location \"%V\", "
                                     "which this server does not have: add "
                                     "\"location %V { internal; include "
                                     "omniroute_params; }\"",
                                     &pc[i].location->name, &pc[i].pass_uri,
                                     &pc[i].pass_uri);
            return NGX_ERROR;
        }

        if (found->handler == NULL) {
            ngx_omniroute_conf_error(cf, &pc[i].file, pc[i].line,
                                     "\"omniroute_pass\" of location \"%V\" "
                                     "names the attempt location \"%V\", "
                                     "whose location \"%V\" has no "
                                     "\"proxy_pass\" (include "
                                     "omniroute_params in it)",
                                     &pc[i].location->name, &pc[i].pass_uri,
                                     &found->name);
            return NGX_ERROR;
        }

        if (found->handler == ngx_omniroute_handler) {
            ngx_omniroute_conf_error(cf, &pc[i].file, pc[i].line,
                                     "\"omniroute_pass\" of location \"%V\" "
                                     "names the attempt location \"%V\", "
                                     "which is served by \"omniroute_pass\" "
                                     "of location \"%V\", not by "
                                     "\"proxy_pass\" (declare \"location %V "
                                     "{ internal; include omniroute_params; "
                                     "}\")", &pc[i].location->name,
                                     &pc[i].pass_uri, &found->name,
                                     &pc[i].pass_uri);
            return NGX_ERROR;
        }

        if (!found->internal) {
            /* else a client could reach a provider with the gateway's key */
            ngx_omniroute_conf_error(cf, &pc[i].file, pc[i].line,
                                     "\"omniroute_pass\" of location \"%V\" "
                                     "names the attempt location \"%V\", "
                                     "whose location \"%V\" is not "
                                     "\"internal\" (clients could reach the "
                                     "providers through it with the "
                                     "gateway's credentials): add "
                                     "\"internal;\" to it",
                                     &pc[i].location->name, &pc[i].pass_uri,
                                     &found->name);
            return NGX_ERROR;
        }

        ngx_log_debug3(NGX_LOG_DEBUG_HTTP, cf->log, 0,
                       "omniroute: \"%V\" attempts through \"%V\" "
                       "(location \"%V\")", &pc[i].location->name,
                       &pc[i].pass_uri, &found->name);
    }

    return NGX_OK;
}


static ngx_int_t
ngx_omniroute_find_location(ngx_http_core_loc_conf_t **cur, ngx_str_t *uri)
{
    ngx_int_t                  rc;
    ngx_uint_t                 noregex;
    ngx_http_core_loc_conf_t  *pclcf;
#if (NGX_PCRE)
    ngx_http_core_loc_conf_t **clcfp;
#endif

    pclcf = *cur;
    noregex = 0;

    rc = ngx_omniroute_find_static(pclcf->static_locations, uri, cur);

    if (rc == NGX_AGAIN) {
        noregex = (*cur)->noregex;

        /* nested locations */
        rc = ngx_omniroute_find_location(cur, uri);
    }

    if (rc == NGX_OK || rc == NGX_DONE) {
        return rc;
    }

#if (NGX_PCRE)
    if (noregex == 0 && pclcf->regex_locations) {

        for (clcfp = pclcf->regex_locations; *clcfp; clcfp++) {

            if (ngx_regex_exec((*clcfp)->regex->regex, uri, NULL, 0) >= 0) {
                *cur = *clcfp;
                (void) ngx_omniroute_find_location(cur, uri);
                return NGX_OK;
            }
        }
    }
#endif

    return rc;
}


static ngx_int_t
ngx_omniroute_find_static(ngx_http_location_tree_node_t *node,
    ngx_str_t *uri, ngx_http_core_loc_conf_t **found)
{
    u_char     *p;
    size_t      len, n;
    ngx_int_t   rc, rv;

    len = uri->len;
    p = uri->data;

    rv = NGX_DECLINED;

    for ( ;; ) {

        if (node == NULL) {
            return rv;
        }

        n = (len <= (size_t) node->len) ? len : node->len;

        rc = ngx_filename_cmp(p, node->name, n);

        if (rc != 0) {
            node = (rc < 0) ? node->left : node->right;
            continue;
        }

        if (len > (size_t) node->len) {

            if (node->inclusive) {
                *found = node->inclusive;
                rv = NGX_AGAIN;

                node = node->tree;
                p += n;
                len -= n;

                continue;
            }

            /* exact only */

            node = node->right;

            continue;
        }

        if (len == (size_t) node->len) {

            if (node->exact) {
                *found = node->exact;
                return NGX_OK;
            }

            *found = node->inclusive;
            return NGX_AGAIN;
        }

        /* len < node->len */

        if (len + 1 == (size_t) node->len && node->auto_redirect) {
            *found = (node->exact) ? node->exact : node->inclusive;
            rv = NGX_DONE;
        }

        node = node->left;
    }
}
