
/*
 * Copyright (C) ngx_omniroute authors
 *
 * Secrets from files (connection credentials, the admin API token, the
 * Redis password), read once when the configuration is loaded.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute.h"


/*
 * The file's text without surrounding whitespace and line ends, at most
 * max bytes, allocated from pool.  A relative path is relative to the
 * directory of nginx.conf.  Errors are logged, naming what the file is
 * for ("key file", ...) and the reason; the secret itself never is.
 */

ngx_int_t
ngx_omniroute_read_secret(ngx_conf_t *cf, ngx_pool_t *pool, ngx_str_t *path,
    size_t max, const char *what, ngx_str_t *secret)
{
    u_char           *p, *last;
    ssize_t           n;
    ngx_str_t         name;
    ngx_file_t        file;
    ngx_file_info_t   fi;

    name = *path;

    if (name.len == 0 || ngx_conf_full_name(cf->cycle, &name, 1) != NGX_OK)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "%s: invalid file name \"%V\"", what, path);
        return NGX_ERROR;
    }

    ngx_memzero(&file, sizeof(ngx_file_t));
    file.name = name;
    file.log = cf->log;

    file.fd = ngx_open_file(name.data, NGX_FILE_RDONLY, NGX_FILE_OPEN, 0);

    if (file.fd == NGX_INVALID_FILE) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, ngx_errno,
                           "%s: cannot open \"%V\"", what, &name);
        return NGX_ERROR;
    }

    if (ngx_fd_info(file.fd, &fi) == NGX_FILE_ERROR
        || ngx_file_size(&fi) > (off_t) max)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "%s \"%V\" is unreadable or larger than %uz "
                           "bytes", what, &name, max);
        (void) ngx_close_file(file.fd);
        return NGX_ERROR;
    }

    p = ngx_pnalloc(pool, ngx_file_size(&fi) + 1);
    if (p == NULL) {
        (void) ngx_close_file(file.fd);
        return NGX_ERROR;
    }

    n = ngx_read_file(&file, p, ngx_file_size(&fi), 0);

    (void) ngx_close_file(file.fd);

    if (n == NGX_ERROR) {
        return NGX_ERROR;
    }

    last = p + n;

    while (p < last && (*p == ' ' || *p == '\t' || *p == CR || *p == LF)) {
        p++;
    }

    while (last > p && (last[-1] == ' ' || last[-1] == '\t'
                        || last[-1] == CR || last[-1] == LF))
    {
        last--;
    }

    if (p == last) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%s \"%V\" is empty",
                           what, &name);
        return NGX_ERROR;
    }

    *last = '\0';

    secret->data = p;
    secret->len = last - p;

    return NGX_OK;
}
