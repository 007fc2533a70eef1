
/*
 * Copyright (C) ngx_omniroute authors
 *
 * Resilience configuration: per-provider settings parameters of
 * omniroute_provider, omniroute_model_lockout, and the classification
 * rules (omniroute_error_rule, omniroute_error_default, omniroute_restate)
 * with their limits (R-CLASS-4, R-CLASS-1).  Rules name their provider and
 * are attached to it in ngx_omniroute_rules_init().
 *
 * Settings parameters are the rows of ngx_omniroute_provider_settings
 * (ngx_omniroute_settings.c): names, ranges and the rules between them
 * are the admin API's.  The rules between settings are judged once the
 * provider's kind and the environment are known, in
 * ngx_omniroute_rules_init(), and reported at the directive's line.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute.h"


#define NGX_OMNIROUTE_CONF_ERR_MAX  256


typedef struct {
    ngx_str_t                     param;        /* omniroute_model_lockout */
    const char                   *name;         /* model_lockout member */
} ngx_omniroute_lockout_param_t;


static ngx_int_t ngx_omniroute_parse_msec(ngx_str_t *s, or_msec_t *ms);
static ngx_int_t ngx_omniroute_parse_statuses(ngx_str_t *s, int *out,
    ngx_uint_t max, ngx_uint_t *n);
static ngx_int_t ngx_omniroute_provider_check(ngx_conf_t *cf,
    ngx_omniroute_provider_t *p);
static u_char *ngx_omniroute_conf_conflict(u_char *p, u_char *last,
    ngx_omniroute_settings_t *s, ngx_omniroute_settings_conflict_t *c,
    or_kind_e kind);
static u_char *ngx_omniroute_conf_field(u_char *p, u_char *last,
    ngx_omniroute_settings_t *s, ngx_int_t i, int64_t v, or_kind_e kind);
static ngx_omniroute_rule_conf_t *ngx_omniroute_rule_add(ngx_conf_t *cf,
    ngx_omniroute_main_conf_t *omcf, ngx_uint_t type);
static ngx_int_t ngx_omniroute_reason_scope(ngx_conf_t *cf, ngx_str_t *arg,
    or_reason_e *reason, or_scope_e *scope);


/* parameters of omniroute_model_lockout: rows of the model_lockout group */
static ngx_omniroute_lockout_param_t  ngx_omniroute_lockout_params[] = {
    { ngx_string("base"), "base_cooldown_ms" },
    { ngx_string("max"), "max_cooldown_ms" },
    { ngx_string("steps"), "max_backoff_steps" },
    { ngx_string("exponential"), "exponential" },
    { ngx_string("codes"), "error_codes" },
    { ngx_null_string, NULL }
};


/* a time ("90s", "5m", "1h", bare seconds) in milliseconds */

static ngx_int_t
ngx_omniroute_parse_msec(ngx_str_t *s, or_msec_t *ms)
{
    ngx_msec_int_t  v;

    v = ngx_parse_time(s, 0);

    if (v == (ngx_msec_int_t) NGX_ERROR) {
        return NGX_ERROR;
    }

    *ms = v;

    return NGX_OK;
}


static ngx_int_t
ngx_omniroute_parse_statuses(ngx_str_t *s, int *out, ngx_uint_t max,
    ngx_uint_t *n)
{
    u_char     *p, *last, *comma;
    ngx_int_t   st;

    *n = 0;
    p = s->data;
    last = s->data + s->len;

    while (p < last) {
        comma = ngx_strlchr(p, last, ',');
        if (comma == NULL) {
            comma = last;
        }

        st = ngx_atoi(p, comma - p);

        if (st < 100 || st > 599 || *n >= max) {
            return NGX_ERROR;
        }

        out[(*n)++] = (int) st;
        p = comma + 1;
    }

    return (*n > 0) ? NGX_OK : NGX_ERROR;
}


/*
 * A resilience parameter of omniroute_provider ("breaker_failures=8"):
 * a settings row found by its conf name, or catalog= and quota_family=.
 * NGX_DECLINED: not a resilience parameter.
 */

ngx_int_t
ngx_omniroute_provider_setting(ngx_conf_t *cf, ngx_omniroute_provider_t *p,
    ngx_str_t *arg)
{
    u_char            *eq, buf[NGX_OMNIROUTE_CONF_ERR_MAX];
    ngx_int_t          i;
    ngx_str_t          name, val;
    const char        *err;
    or_family_rule_t  *fr;

    eq = ngx_strlchr(arg->data, arg->data + arg->len, '=');
    if (eq == NULL) {
        return NGX_DECLINED;
    }

    name.data = arg->data;
    name.len = eq - arg->data;
    val.data = eq + 1;
    val.len = arg->data + arg->len - val.data;

    i = ngx_omniroute_settings_conf_find(&name);

    if (i >= 0) {
        err = ngx_omniroute_settings_parse(
                  &ngx_omniroute_provider_settings[i], &p->settings, &val,
                  buf, sizeof(buf));

        if (err) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid value \"%V\" of \"%V\" of provider "
                               "\"%V\": %s", &val, &name, &p->name, err);
            return NGX_ERROR;
        }

        /* where the rules between settings are reported */
        p->settings.conf_file = cf->conf_file->file.name;
        p->settings.conf_line = cf->conf_file->line;

        return NGX_OK;
    }

    if (name.len == 7 && ngx_strncmp(name.data, "catalog", 7) == 0) {
        p->catalog = val;
        return NGX_OK;
    }

    if (name.len == 12 && ngx_strncmp(name.data, "quota_family", 12) == 0) {
        /* PREFIX or PREFIX:FAMILY; strings from the config are kept */
        if (val.len == 0) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid value \"\" of \"quota_family\" of "
                               "provider \"%V\"", &p->name);
            return NGX_ERROR;
        }

        fr = ngx_array_push(&p->families);
        if (fr == NULL) {
            return NGX_ERROR;
        }

        eq = ngx_strlchr(val.data, val.data + val.len, ':');

        if (eq) {
            *eq = '\0';
            fr->family = (const char *) eq + 1;

        } else {
            fr->family = NULL;
        }

        fr->prefix = (const char *) val.data;
        return NGX_OK;
    }

    return NGX_DECLINED;
}


/*
 * The rules between a provider's settings, once its kind and the
 * environment are known: a contradiction involving a value of
 * omniroute_provider fails (the engine would clamp it silently or refuse
 * it); one between environment variables only is logged and the engine
 * has its way, as with an out-of-range variable.
 */

static ngx_int_t
ngx_omniroute_provider_check(ngx_conf_t *cf, ngx_omniroute_provider_t *p)
{
    u_char                             *b;
    u_char                              buf[NGX_OMNIROUTE_CONF_ERR_MAX];
    ngx_omniroute_settings_t            s;
    ngx_omniroute_settings_conflict_t   c;

    s = p->settings;
    ngx_omniroute_settings_env(p->kind, &s);

    if (ngx_omniroute_settings_check(p->kind, &s, s.conf_set, &c) != NGX_OK
        && c.field >= 0)
    {
        b = ngx_omniroute_conf_conflict(buf, buf + sizeof(buf), &s, &c,
                                        p->kind);

        ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                      "invalid resilience settings of provider \"%V\": %*s "
                      "in %V:%ui", &p->name, (size_t) (b - buf), buf,
                      &s.conf_file, s.conf_line);
        return NGX_ERROR;
    }

    if (ngx_omniroute_settings_check(p->kind, &s, s.env_set, &c) != NGX_OK
        && c.field >= 0)
    {
        b = ngx_omniroute_conf_conflict(buf, buf + sizeof(buf), &s, &c,
                                        p->kind);

        ngx_log_error(NGX_LOG_WARN, cf->log, 0,
                      "omniroute: provider \"%V\": %*s", &p->name,
                      (size_t) (b - buf), buf);
    }

    return NGX_OK;
}


/* "breaker_degrade=10 conflicts with breaker_failures=8: why (it would
 * be 8)" */

static u_char *
ngx_omniroute_conf_conflict(u_char *p, u_char *last,
    ngx_omniroute_settings_t *s, ngx_omniroute_settings_conflict_t *c,
    or_kind_e kind)
{
    p = ngx_omniroute_conf_field(p, last, s, c->field, c->value, kind);

    if (c->other >= 0) {
        p = ngx_slprintf(p, last, " conflicts with ");
        p = ngx_omniroute_conf_field(p, last, s, c->other, c->other_value,
                                     kind);
    }

    p = ngx_slprintf(p, last, ": %s", c->reason);

    if (c->result != c->value) {
        p = ngx_slprintf(p, last, " (it would be ");
        p = ngx_omniroute_settings_print(p, last,
                                 &ngx_omniroute_provider_settings[c->field],
                                 c->result);
        p = ngx_slprintf(p, last, ")");
    }

    return p;
}


/*
 * A field as an operator knows it: "breaker_degrade=10" (nginx.conf),
 * "OMNIROUTE_..._THRESHOLD=5" (environment), or "breaker_failures=8 (the
 * default)".
 */

static u_char *
ngx_omniroute_conf_field(u_char *p, u_char *last, ngx_omniroute_settings_t *s,
    ngx_int_t i, int64_t v, or_kind_e kind)
{
    u_char                         env[NGX_OMNIROUTE_CONF_ERR_MAX];
    uint64_t                       bit;
    const char                    *name;
    ngx_omniroute_setting_desc_t  *d;

    d = &ngx_omniroute_provider_settings[i];
    bit = (uint64_t) 1 << i;

    if (s->env_set & bit) {
        name = ngx_omniroute_settings_env_name(d, kind, env, sizeof(env));
        p = ngx_slprintf(p, last, "%s=", name);
        return ngx_omniroute_settings_print(p, last, d, v);
    }

    if (d->conf) {
        p = ngx_slprintf(p, last, "%s=", d->conf);

    } else {
        p = ngx_slprintf(p, last, "%s.%s=", d->group, d->name);
    }

    p = ngx_omniroute_settings_print(p, last, d, v);

    if (!(s->conf_set & bit)) {
        p = ngx_slprintf(p, last, " (the %s default)", or_kind_name(kind));
    }

    return p;
}


/*
 * omniroute_model_lockout on|off [base=] [max=] [steps=] [exponential=]
 * [codes=]: the default model lockout settings of every provider, parsed
 * and bounded by the rows of the model_lockout group
 */

char *
ngx_omniroute_model_lockout(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_omniroute_main_conf_t *omcf = conf;

    u_char                             *b, *last;
    u_char                              buf[NGX_OMNIROUTE_CONF_ERR_MAX];
    uint64_t                            mask;
    ngx_int_t                           row;
    ngx_str_t                          *value, v;
    ngx_uint_t                          i;
    const char                         *err;
    ngx_omniroute_settings_t            s;
    ngx_omniroute_lockout_param_t      *lp;
    ngx_omniroute_setting_desc_t       *d;
    ngx_omniroute_settings_conflict_t   c;

    value = cf->args->elts;

    if (omcf->lockout.enabled != OR_UNSET) {
        return "is duplicate";
    }

    /* the rows work on a whole settings struct */

    ngx_memzero(&s, sizeof(ngx_omniroute_settings_t));
    or_breaker_conf_init(&s.breaker);
    or_cooldown_conf_init(&s.cooldown);
    s.lockout = omcf->lockout;

    row = ngx_omniroute_settings_find(ngx_omniroute_provider_settings,
                                      "model_lockout", "enabled");

    if (row < 0
        || ngx_omniroute_settings_parse(&ngx_omniroute_provider_settings[row],
                                        &s, &value[1], buf, sizeof(buf))
           != NULL)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid value \"%V\" of \"omniroute_model_lockout\""
                           ": expected on or off", &value[1]);
        return NGX_CONF_ERROR;
    }

    mask = (uint64_t) 1 << row;

    for (i = 2; i < cf->args->nelts; i++) {

        for (lp = ngx_omniroute_lockout_params; lp->name; lp++) {
            if (value[i].len > lp->param.len
                && value[i].data[lp->param.len] == '='
                && ngx_strncmp(value[i].data, lp->param.data, lp->param.len)
                   == 0)
            {
                break;
            }
        }

        row = (lp->name == NULL) ? -1
              : ngx_omniroute_settings_find(ngx_omniroute_provider_settings,
                                            "model_lockout", lp->name);

        if (row < 0) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid parameter \"%V\" of "
                               "\"omniroute_model_lockout\"", &value[i]);
            return NGX_CONF_ERROR;
        }

        v.data = value[i].data + lp->param.len + 1;
        v.len = value[i].len - lp->param.len - 1;

        err = ngx_omniroute_settings_parse(
                  &ngx_omniroute_provider_settings[row], &s, &v, buf,
                  sizeof(buf));

        if (err) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid value \"%V\" of \"%V\" of "
                               "\"omniroute_model_lockout\": %s", &v,
                               &lp->param, err);
            return NGX_CONF_ERROR;
        }

        mask |= (uint64_t) 1 << row;
    }

    /* the rules between them, against the defaults of what is not set */

    if (ngx_omniroute_settings_check(OR_KIND_APIKEY, &s, mask, &c) != NGX_OK
        && c.field >= 0)
    {
        last = buf + sizeof(buf) - 1;
        b = buf;

        for (i = 0; i < 2; i++) {
            row = (i == 0) ? c.field : c.other;

            if (row < 0) {
                break;
            }

            d = &ngx_omniroute_provider_settings[row];

            for (lp = ngx_omniroute_lockout_params; lp->name; lp++) {
                if (ngx_strcmp(lp->name, d->name) == 0) {
                    break;
                }
            }

            b = ngx_slprintf(b, last, "%s%s=", i ? " conflicts with " : "",
                             lp->name ? (char *) lp->param.data : d->name);
            b = ngx_omniroute_settings_print(b, last, d,
                                             i ? c.other_value : c.value);

            if (!(mask & ((uint64_t) 1 << row))) {
                b = ngx_slprintf(b, last, " (the default)");
            }
        }

        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid \"omniroute_model_lockout\": %*s: %s",
                           (size_t) (b - buf), buf, c.reason);
        return NGX_CONF_ERROR;
    }

    omcf->lockout = s.lockout;

    return NGX_CONF_OK;
}


static ngx_omniroute_rule_conf_t *
ngx_omniroute_rule_add(ngx_conf_t *cf, ngx_omniroute_main_conf_t *omcf,
    ngx_uint_t type)
{
    ngx_str_t                  *value;
    ngx_omniroute_rule_conf_t  *rc;

    value = cf->args->elts;

    rc = ngx_array_push(&omcf->rules);
    if (rc == NULL) {
        return NULL;
    }

    ngx_memzero(rc, sizeof(ngx_omniroute_rule_conf_t));

    rc->provider = value[1];
    rc->type = type;
    rc->file = cf->conf_file->file.name;
    rc->line = cf->conf_file->line;

    rc->oprule.cooldown_ms = OR_MSEC_NONE;
    rc->catchall.cooldown_ms = OR_MSEC_NONE;
    rc->restate.retry_after_s = -1;

    return rc;
}


static ngx_int_t
ngx_omniroute_reason_scope(ngx_conf_t *cf, ngx_str_t *arg,
    or_reason_e *reason, or_scope_e *scope)
{
    u_char      *p, buf[512];
    ngx_uint_t   i;

    if (ngx_strncmp(arg->data, "reason=", 7) == 0) {
        *reason = or_classify_reason_parse((const char *) arg->data + 7,
                                           arg->len - 7);
        if (*reason == OR_REASON_COUNT || *reason == OR_REASON_NONE) {
            p = buf;

            for (i = 0; i < OR_REASON_COUNT; i++) {
                if (i != OR_REASON_NONE) {
                    p = ngx_slprintf(p, buf + sizeof(buf), "%s%s",
                                     p == buf ? "" : ", ",
                                     or_reason_name((or_reason_e) i));
                }
            }

            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "unknown reason in \"%V\": expected %*s",
                               arg, (size_t) (p - buf), buf);
            return NGX_ERROR;
        }

        return NGX_OK;
    }

    if (ngx_strncmp(arg->data, "scope=", 6) == 0) {
        *scope = or_classify_scope_parse((const char *) arg->data + 6,
                                         arg->len - 6);
        if (*scope == OR_SCOPE_COUNT) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "unknown scope in \"%V\": expected "
                               "connection, model, base_model, "
                               "quota_family or provider", arg);
            return NGX_ERROR;
        }

        return NGX_OK;
    }

    return NGX_DECLINED;
}


/*
 * omniroute_error_rule PROVIDER [id=] [status=] [match=] [reason=] [scope=]
 *     [cooldown=];
 * omniroute_error_default PROVIDER cooldown= [scope=] [reason=];
 */

char *
ngx_omniroute_error_rule(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_omniroute_main_conf_t *omcf = conf;

    ngx_int_t                   n, rc;
    ngx_str_t                  *value, v;
    ngx_uint_t                  i, is_default;
    or_reason_e                *reason;
    or_scope_e                 *scope;
    or_msec_t                  *cooldown;
    ngx_omniroute_rule_conf_t  *r;

    value = cf->args->elts;
    is_default = cmd->offset;

    r = ngx_omniroute_rule_add(cf, omcf, is_default
                                         ? NGX_OMNIROUTE_RULE_DEFAULT
                                         : NGX_OMNIROUTE_RULE_OPERATOR);
    if (r == NULL) {
        return NGX_CONF_ERROR;
    }

    if (is_default) {
        reason = &r->catchall.reason;
        scope = &r->catchall.scope;
        cooldown = &r->catchall.cooldown_ms;

    } else {
        reason = &r->oprule.reason;
        scope = &r->oprule.scope;
        cooldown = &r->oprule.cooldown_ms;
    }

    for (i = 2; i < cf->args->nelts; i++) {

        rc = ngx_omniroute_reason_scope(cf, &value[i], reason, scope);

        if (rc == NGX_ERROR) {
            return NGX_CONF_ERROR;
        }

        if (rc == NGX_OK) {
            continue;
        }

        if (ngx_strncmp(value[i].data, "cooldown=", 9) == 0) {
            v.data = value[i].data + 9;
            v.len = value[i].len - 9;

            if (ngx_omniroute_parse_msec(&v, cooldown) != NGX_OK) {
                goto invalid;
            }

            continue;
        }

        if (!is_default && ngx_strncmp(value[i].data, "status=", 7) == 0) {
            n = ngx_atoi(value[i].data + 7, value[i].len - 7);
            if (n < 100 || n > 599) {
                goto range;
            }

            r->oprule.status = (int) n;
            continue;
        }

        if (!is_default && ngx_strncmp(value[i].data, "match=", 6) == 0) {
            r->oprule.match = (const char *) value[i].data + 6;
            r->oprule.match_len = value[i].len - 6;
            continue;
        }

        if (!is_default && ngx_strncmp(value[i].data, "id=", 3) == 0) {
            r->oprule.id = (const char *) value[i].data + 3;
            continue;
        }

        goto invalid;
    }

    return NGX_CONF_OK;

range:

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "invalid parameter \"%V\" of \"%V\": expected an "
                       "HTTP status 100..599", &value[i], &cmd->name);
    return NGX_CONF_ERROR;

invalid:

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "invalid parameter \"%V\" of \"%V\"", &value[i],
                       &cmd->name);
    return NGX_CONF_ERROR;
}


/*
 * omniroute_restate PROVIDER id=ID from=400,403 to=429 [marker=TEXT ...]
 *     [exclude=TEXT ...] [retry_after=SECONDS];
 */

char *
ngx_omniroute_restate(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_omniroute_main_conf_t *omcf = conf;

    ngx_int_t                   n;
    ngx_str_t                  *value, v;
    ngx_uint_t                  i, nm, ne, ns;
    ngx_omniroute_rule_conf_t  *r;

    value = cf->args->elts;

    r = ngx_omniroute_rule_add(cf, omcf, NGX_OMNIROUTE_RULE_RESTATE);
    if (r == NULL) {
        return NGX_CONF_ERROR;
    }

    nm = 0;
    ne = 0;

    for (i = 2; i < cf->args->nelts; i++) {

        if (ngx_strncmp(value[i].data, "id=", 3) == 0) {
            r->restate.id = (const char *) value[i].data + 3;
            continue;
        }

        if (ngx_strncmp(value[i].data, "from=", 5) == 0) {
            v.data = value[i].data + 5;
            v.len = value[i].len - 5;

            if (ngx_omniroute_parse_statuses(&v, r->restate.from_statuses,
                                             OR_RESTATE_MAX_STATUSES - 1, &ns)
                != NGX_OK)
            {
                goto invalid;
            }

            continue;
        }

        if (ngx_strncmp(value[i].data, "to=", 3) == 0) {
            n = ngx_atoi(value[i].data + 3, value[i].len - 3);
            if (n < 100 || n > 599) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid parameter \"%V\" of "
                                   "\"omniroute_restate\": expected an HTTP "
                                   "status 100..599", &value[i]);
                return NGX_CONF_ERROR;
            }

            r->restate.to_status = (int) n;
            continue;
        }

        if (ngx_strncmp(value[i].data, "marker=", 7) == 0) {
            if (nm >= OR_RESTATE_MAX_MARKERS - 1) {
                goto invalid;
            }

            r->restate.text_markers[nm++] = (const char *) value[i].data + 7;
            continue;
        }

        if (ngx_strncmp(value[i].data, "exclude=", 8) == 0) {
            if (ne >= OR_RESTATE_MAX_MARKERS - 1) {
                goto invalid;
            }

            r->restate.exclude_markers[ne++] =
                                          (const char *) value[i].data + 8;
            continue;
        }

        if (ngx_strncmp(value[i].data, "retry_after=", 12) == 0) {
            n = ngx_atoi(value[i].data + 12, value[i].len - 12);
            if (n < 0 || n > 86400) {
                goto invalid;
            }

            r->restate.retry_after_s = (int) n;
            continue;
        }

        goto invalid;
    }

    return NGX_CONF_OK;

invalid:

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "invalid parameter \"%V\" of \"omniroute_restate\"",
                       &value[i]);
    return NGX_CONF_ERROR;
}


/*
 * At init_main_conf: each provider's classifier configuration (its
 * built-in catalog, then the operator's rules, defaults and restatements,
 * validated), and the http-level lockout defaults.
 */

ngx_int_t
ngx_omniroute_rules_init(ngx_conf_t *cf, ngx_omniroute_main_conf_t *omcf)
{
    size_t                      bad;
    ngx_uint_t                  i, j, n;
    const char                 *err;
    or_oprule_t                *op;
    or_restate_rule_t          *rs;
    or_lockout_conf_t          *lc;
    ngx_omniroute_provider_t   *p;
    ngx_omniroute_rule_conf_t  *r;

    p = omcf->providers.elts;
    r = omcf->rules.elts;

    for (i = 0; i < omcf->rules.nelts; i++) {

        for (j = 0; j < omcf->providers.nelts; j++) {
            if (p[j].name.len == r[i].provider.len
                && ngx_strncmp(p[j].name.data, r[i].provider.data,
                               r[i].provider.len) == 0)
            {
                break;
            }
        }

        if (j == omcf->providers.nelts) {
            ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                          "a rule names unknown provider \"%V\" in %V:%ui",
                          &r[i].provider, &r[i].file, r[i].line);
            return NGX_ERROR;
        }

        switch (r[i].type) {

        case NGX_OMNIROUTE_RULE_OPERATOR:
            err = or_oprule_validate(&r[i].oprule);
            if (err) {
                goto failed;
            }

            op = ngx_array_push(&p[j].oprules);
            if (op == NULL) {
                return NGX_ERROR;
            }

            *op = r[i].oprule;
            break;

        case NGX_OMNIROUTE_RULE_DEFAULT:
            if (p[j].class_conf.catchall.cooldown_ms != OR_MSEC_NONE) {
                err = "is a second omniroute_error_default";
                goto failed;
            }

            err = or_catchall_validate(&r[i].catchall);
            if (err) {
                goto failed;
            }

            p[j].class_conf.catchall = r[i].catchall;
            break;

        default: /* NGX_OMNIROUTE_RULE_RESTATE */
            err = or_restate_rule_validate(&r[i].restate);
            if (err) {
                goto failed;
            }

            rs = ngx_array_push(&p[j].restate);
            if (rs == NULL) {
                return NGX_ERROR;
            }

            *rs = r[i].restate;
            break;
        }

        continue;

    failed:

        ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                      "invalid rule for provider \"%V\" in %V:%ui: %s",
                      &r[i].provider, &r[i].file, r[i].line, err);
        return NGX_ERROR;
    }

    for (j = 0; j < omcf->providers.nelts; j++) {

        if (or_oprules_validate(p[j].oprules.elts, p[j].oprules.nelts, &bad)
            != NULL)
        {
            /* at the first rule too many */

            for (i = 0, n = 0; i < omcf->rules.nelts; i++) {
                if (r[i].type == NGX_OMNIROUTE_RULE_OPERATOR
                    && r[i].provider.len == p[j].name.len
                    && ngx_strncmp(r[i].provider.data, p[j].name.data,
                                   p[j].name.len) == 0
                    && ++n > OR_OPRULES_MAX)
                {
                    break;
                }
            }

            if (i == omcf->rules.nelts) {
                i--;    /* not the count (checked rule by rule above) */
            }

            ngx_omniroute_conf_error(cf, &r[i].file, r[i].line,
                                     "provider \"%V\" has more than %d "
                                     "omniroute_error_rule rules",
                                     &p[j].name, OR_OPRULES_MAX);
            return NGX_ERROR;
        }

        p[j].class_conf.oprules = p[j].oprules.elts;
        p[j].class_conf.noprules = p[j].oprules.nelts;
        p[j].class_conf.restate = p[j].restate.elts;
        p[j].class_conf.nrestate = p[j].restate.nelts;

        /* before the http-level lockout settings: only its own count */

        if (ngx_omniroute_provider_check(cf, &p[j]) != NGX_OK) {
            return NGX_ERROR;
        }

        /* http-level lockout settings for what the provider left unset */

        lc = &p[j].settings.lockout;

        if (lc->enabled == OR_UNSET) {
            lc->enabled = omcf->lockout.enabled;
        }

        if (lc->base_ms == OR_MSEC_NONE) {
            lc->base_ms = omcf->lockout.base_ms;
        }

        if (lc->max_ms == OR_MSEC_NONE) {
            lc->max_ms = omcf->lockout.max_ms;
        }

        if (lc->max_backoff_steps == OR_UNSET) {
            lc->max_backoff_steps = omcf->lockout.max_backoff_steps;
        }

        if (lc->exponential == OR_UNSET) {
            lc->exponential = omcf->lockout.exponential;
        }

        if (lc->n_codes == OR_UNSET) {
            lc->n_codes = omcf->lockout.n_codes;
            ngx_memcpy(lc->codes, omcf->lockout.codes, sizeof(lc->codes));
        }
    }

    return NGX_OK;
}


/* the classifier configuration of a provider, before its rules */

void
ngx_omniroute_class_conf_init(ngx_omniroute_provider_t *p)
{
    ngx_str_t  *name;

    name = p->catalog.len ? &p->catalog : &p->name;

    or_class_conf_init(&p->class_conf, (const char *) name->data, name->len);

    p->class_conf.catchall.cooldown_ms = OR_MSEC_NONE;
}
