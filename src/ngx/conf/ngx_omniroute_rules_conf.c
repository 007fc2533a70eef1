
/*
 * Copyright (C) ngx_omniroute authors
 *
 * Resilience configuration: per-provider settings parameters of
 * omniroute_provider, omniroute_model_lockout, and the classification
 * rules (omniroute_error_rule, omniroute_error_default, omniroute_restate)
 * with their limits (R-CLASS-4, R-CLASS-1).  Rules name their provider and
 * are attached to it in ngx_omniroute_rules_init().
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute.h"


static ngx_int_t ngx_omniroute_parse_msec(ngx_str_t *s, or_msec_t *ms);
static ngx_int_t ngx_omniroute_parse_flag(ngx_str_t *s, int32_t *flag);
static ngx_int_t ngx_omniroute_parse_statuses(ngx_str_t *s, int *out,
    ngx_uint_t max, ngx_uint_t *n);
static ngx_omniroute_rule_conf_t *ngx_omniroute_rule_add(ngx_conf_t *cf,
    ngx_omniroute_main_conf_t *omcf, ngx_uint_t type);
static ngx_int_t ngx_omniroute_reason_scope(ngx_conf_t *cf, ngx_str_t *arg,
    or_reason_e *reason, or_scope_e *scope);


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
ngx_omniroute_parse_flag(ngx_str_t *s, int32_t *flag)
{
    if (s->len == 2 && ngx_strncmp(s->data, "on", 2) == 0) {
        *flag = 1;
        return NGX_OK;
    }

    if (s->len == 3 && ngx_strncmp(s->data, "off", 3) == 0) {
        *flag = 0;
        return NGX_OK;
    }

    return NGX_ERROR;
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
 * A resilience parameter of omniroute_provider ("breaker_failures=8").
 * NGX_DECLINED: not a resilience parameter.
 */

ngx_int_t
ngx_omniroute_provider_setting(ngx_conf_t *cf, ngx_omniroute_provider_t *p,
    ngx_str_t *arg)
{
    u_char            *eq;
    int32_t            flag;
    ngx_int_t          n;
    ngx_str_t          name, val;
    or_family_rule_t  *fr;

    eq = ngx_strlchr(arg->data, arg->data + arg->len, '=');
    if (eq == NULL) {
        return NGX_DECLINED;
    }

    name.data = arg->data;
    name.len = eq - arg->data;
    val.data = eq + 1;
    val.len = arg->data + arg->len - val.data;

#define ngx_omniroute_is(s)                                                  \
    (name.len == sizeof(s) - 1 && ngx_strncmp(name.data, s, name.len) == 0)

    if (ngx_omniroute_is("catalog")) {
        p->catalog = val;
        return NGX_OK;
    }

    if (ngx_omniroute_is("breaker_failures")
        || ngx_omniroute_is("breaker_degrade")
        || ngx_omniroute_is("breaker_max_multiplier"))
    {
        n = ngx_atoi(val.data, val.len);
        if (n < 1 || n > 100000) {
            goto invalid;
        }

        if (ngx_omniroute_is("breaker_failures")) {
            p->settings.breaker.open_threshold = (int32_t) n;

        } else if (ngx_omniroute_is("breaker_degrade")) {
            p->settings.breaker.degrade_threshold = (int32_t) n;

        } else {
            p->settings.breaker.max_backoff_multiplier = (int32_t) n;
        }

        return NGX_OK;
    }

    if (ngx_omniroute_is("breaker_reset")) {
        if (ngx_omniroute_parse_msec(&val, &p->settings.breaker.reset_ms)
            != NGX_OK || p->settings.breaker.reset_ms == 0)
        {
            goto invalid;
        }

        return NGX_OK;
    }

    if (ngx_omniroute_is("breaker_window_gate")) {
        if (ngx_omniroute_parse_flag(&val, &flag) != NGX_OK) {
            goto invalid;
        }

        p->settings.breaker.gate_enabled = flag;
        return NGX_OK;
    }

    if (ngx_omniroute_is("cooldown_base")) {
        if (ngx_omniroute_parse_msec(&val, &p->settings.cooldown.base_ms)
            != NGX_OK || p->settings.cooldown.base_ms == 0)
        {
            goto invalid;
        }

        return NGX_OK;
    }

    if (ngx_omniroute_is("cooldown_max")) {
        if (ngx_omniroute_parse_msec(&val, &p->settings.cooldown.max_ms)
            != NGX_OK || p->settings.cooldown.max_ms == 0)
        {
            goto invalid;
        }

        return NGX_OK;
    }

    if (ngx_omniroute_is("retry_delay")) {
        if (ngx_omniroute_parse_msec(&val,
                                     &p->settings.cooldown.provider_delay_ms)
            != NGX_OK
            || p->settings.cooldown.provider_delay_ms < 1000
            || p->settings.cooldown.provider_delay_ms > 21600 * 1000)
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid \"retry_delay=%V\" of provider "
                               "\"%V\": must be between 1s and 21600s (6h)",
                               &val, &p->name);
            return NGX_ERROR;
        }

        return NGX_OK;
    }

    if (ngx_omniroute_is("lockout")) {
        if (ngx_omniroute_parse_flag(&val, &flag) != NGX_OK) {
            goto invalid;
        }

        p->settings.lockout.enabled = flag;
        return NGX_OK;
    }

    if (ngx_omniroute_is("quota_family")) {
        /* PREFIX or PREFIX:FAMILY; strings from the config are kept */
        if (val.len == 0) {
            goto invalid;
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

#undef ngx_omniroute_is

    return NGX_DECLINED;

invalid:

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "invalid value \"%V\" of \"%V\" of provider \"%V\"",
                       &val, &name, &p->name);
    return NGX_ERROR;
}


/* omniroute_model_lockout on|off [base=] [max=] [steps=] [exponential=]
 * [codes=]: the default model lockout settings of every provider */

char *
ngx_omniroute_model_lockout(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_omniroute_main_conf_t *omcf = conf;

    ngx_str_t           *value, v;
    ngx_int_t            n;
    ngx_uint_t           i, nc;
    or_lockout_conf_t   *lc;

    value = cf->args->elts;
    lc = &omcf->lockout;

    if (lc->enabled != OR_UNSET) {
        return "is duplicate";
    }

    if (ngx_omniroute_parse_flag(&value[1], &lc->enabled) != NGX_OK) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid value \"%V\" of \"omniroute_model_lockout\""
                           ": expected on or off", &value[1]);
        return NGX_CONF_ERROR;
    }

    for (i = 2; i < cf->args->nelts; i++) {

        if (ngx_strncmp(value[i].data, "base=", 5) == 0) {
            v.data = value[i].data + 5;
            v.len = value[i].len - 5;

            if (ngx_omniroute_parse_msec(&v, &lc->base_ms) != NGX_OK
                || lc->base_ms == 0)
            {
                goto invalid;
            }

            continue;
        }

        if (ngx_strncmp(value[i].data, "max=", 4) == 0) {
            v.data = value[i].data + 4;
            v.len = value[i].len - 4;

            if (ngx_omniroute_parse_msec(&v, &lc->max_ms) != NGX_OK
                || lc->max_ms == 0)
            {
                goto invalid;
            }

            continue;
        }

        if (ngx_strncmp(value[i].data, "steps=", 6) == 0) {
            n = ngx_atoi(value[i].data + 6, value[i].len - 6);
            if (n < 0 || n > OR_LOCKOUT_MAX_STEPS) {
                goto invalid;
            }

            lc->max_backoff_steps = (int32_t) n;
            continue;
        }

        if (ngx_strncmp(value[i].data, "exponential=", 12) == 0) {
            v.data = value[i].data + 12;
            v.len = value[i].len - 12;

            if (ngx_omniroute_parse_flag(&v, &lc->exponential) != NGX_OK) {
                goto invalid;
            }

            continue;
        }

        if (ngx_strncmp(value[i].data, "codes=", 6) == 0) {
            v.data = value[i].data + 6;
            v.len = value[i].len - 6;

            if (ngx_omniroute_parse_statuses(&v, lc->codes,
                                             OR_LOCKOUT_CODES_MAX, &nc)
                != NGX_OK)
            {
                goto invalid;
            }

            lc->n_codes = (int32_t) nc;
            continue;
        }

        goto invalid;
    }

    return NGX_CONF_OK;

invalid:

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "invalid parameter \"%V\" of "
                       "\"omniroute_model_lockout\"", &value[i]);
    return NGX_CONF_ERROR;
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
    if (ngx_strncmp(arg->data, "reason=", 7) == 0) {
        *reason = or_classify_reason_parse((const char *) arg->data + 7,
                                           arg->len - 7);
        if (*reason == OR_REASON_COUNT || *reason == OR_REASON_NONE) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "unknown reason in \"%V\"", arg);
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
                goto invalid;
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
                goto invalid;
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
    ngx_uint_t                  i, j;
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
            ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                          "provider \"%V\" has more than %d "
                          "omniroute_error_rule rules", &p[j].name,
                          OR_OPRULES_MAX);
            return NGX_ERROR;
        }

        p[j].class_conf.oprules = p[j].oprules.elts;
        p[j].class_conf.noprules = p[j].oprules.nelts;
        p[j].class_conf.restate = p[j].restate.elts;
        p[j].class_conf.nrestate = p[j].restate.nelts;

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
