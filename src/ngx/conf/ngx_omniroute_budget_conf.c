
/*
 * Copyright (C) ngx_omniroute authors
 *
 * Per-key budgets and rate limits (R-BUDGET-1), see
 * ngx_omniroute_budget_store.h:
 *
 *   omniroute_client_key_limit ID [model=PATTERN]
 *       [requests_per_minute=N] [input_tokens_per_minute=N]
 *       [output_tokens_per_minute=N] [tokens_per_day=N]
 *       [tokens_per_month=N] [concurrent=N] [output_estimate=N];
 *
 *   omniroute_client_key_limit_nodes N;
 *
 * Numbers may end in "k" (x 1000) or "m" (x 1000000).  The key is
 * resolved once the http block is read; one rule per key and model.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute_budget_store.h"


static ngx_omniroute_budget_conf_t *ngx_omniroute_budget_get(ngx_conf_t *cf,
    ngx_omniroute_main_conf_t *omcf);
static ngx_int_t ngx_omniroute_budget_number(ngx_str_t *s, uint64_t *out);


static ngx_omniroute_budget_conf_t *
ngx_omniroute_budget_get(ngx_conf_t *cf, ngx_omniroute_main_conf_t *omcf)
{
    ngx_omniroute_keys_conf_t    *kc;
    ngx_omniroute_budget_conf_t  *bc;

    kc = ngx_omniroute_keys_conf(cf, omcf);
    if (kc == NULL) {
        return NULL;
    }

    if (kc->budget) {
        return kc->budget;
    }

    bc = ngx_pcalloc(cf->pool, sizeof(ngx_omniroute_budget_conf_t));
    if (bc == NULL) {
        return NULL;
    }

    if (ngx_array_init(&bc->rules, cf->pool, 4,
                       sizeof(ngx_omniroute_budget_rule_t))
        != NGX_OK)
    {
        return NULL;
    }

    kc->budget = bc;

    return bc;
}


ngx_omniroute_budget_conf_t *
ngx_omniroute_budget_conf(ngx_omniroute_main_conf_t *omcf)
{
    return omcf->keys ? omcf->keys->budget : NULL;
}


/* N, Nk, Nm: 1 .. 2^53 */

static ngx_int_t
ngx_omniroute_budget_number(ngx_str_t *s, uint64_t *out)
{
    size_t     len;
    uint64_t   scale;
    ngx_int_t  n;

    len = s->len;
    scale = 1;

    if (len > 1 && (s->data[len - 1] == 'k' || s->data[len - 1] == 'K')) {
        scale = 1000;
        len--;

    } else if (len > 1
               && (s->data[len - 1] == 'm' || s->data[len - 1] == 'M'))
    {
        scale = 1000000;
        len--;
    }

    n = ngx_atoi(s->data, len);

    if (n == NGX_ERROR || n == 0
        || (uint64_t) n > (((uint64_t) 1 << 53) / scale))
    {
        return NGX_ERROR;
    }

    *out = (uint64_t) n * scale;

    return or_budget_valid_limit(*out) ? NGX_OK : NGX_ERROR;
}


char *
ngx_omniroute_client_key_limit(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_omniroute_main_conf_t *omcf = conf;

    int                           k;
    u_char                       *p, *eq;
    size_t                        len;
    uint64_t                      v;
    ngx_str_t                    *value, num;
    ngx_uint_t                    i, nlimits;
    ngx_omniroute_budget_conf_t  *bc;
    ngx_omniroute_budget_rule_t  *rule, *rules;

    bc = ngx_omniroute_budget_get(cf, omcf);
    if (bc == NULL) {
        return NGX_CONF_ERROR;
    }

    value = cf->args->elts;

    if (!or_keys_valid_id((const char *) value[1].data, value[1].len)) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid client key id \"%V\"", &value[1]);
        return NGX_CONF_ERROR;
    }

    if (bc->rules.nelts >= NGX_OMNIROUTE_BUDGET_SLOTS / 2) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "too many client key limits: at most %d",
                           NGX_OMNIROUTE_BUDGET_SLOTS / 2);
        return NGX_CONF_ERROR;
    }

    rule = ngx_array_push(&bc->rules);
    if (rule == NULL) {
        return NGX_CONF_ERROR;
    }

    ngx_memzero(rule, sizeof(ngx_omniroute_budget_rule_t));

    rule->key_id = value[1];
    rule->file = cf->conf_file->file.name;
    rule->line = cf->conf_file->line;

    nlimits = 0;

    for (i = 2; i < cf->args->nelts; i++) {

        if (ngx_strncmp(value[i].data, "model=", 6) == 0) {
            if (rule->model.len) {
                goto duplicate;
            }

            p = value[i].data + 6;
            len = value[i].len - 6;

            if (len > NGX_OMNIROUTE_BUDGET_MODEL_MAX
                || !or_keys_valid_pattern((const char *) p, len))
            {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid \"%V\": a model name, "
                                   "\"prefix*\" or \"*\", at most %d "
                                   "characters", &value[i],
                                   NGX_OMNIROUTE_BUDGET_MODEL_MAX);
                return NGX_CONF_ERROR;
            }

            rule->model.data = (const char *) p;
            rule->model.len = len;
            continue;
        }

        eq = ngx_strlchr(value[i].data, value[i].data + value[i].len, '=');

        if (eq == NULL) {
            goto invalid;
        }

        len = eq - value[i].data;
        num.data = eq + 1;
        num.len = value[i].data + value[i].len - num.data;

        if (len == sizeof("output_estimate") - 1
            && ngx_strncmp(value[i].data, "output_estimate", len) == 0)
        {
            if (rule->estimate) {
                goto duplicate;
            }

            if (ngx_omniroute_budget_number(&num, &rule->estimate)
                != NGX_OK)
            {
                goto number;
            }

            continue;
        }

        for (k = 0; k < OR_BUDGET_LIMITS; k++) {
            if (ngx_strlen(or_budget_name(k)) == len
                && ngx_strncmp(value[i].data, or_budget_name(k), len) == 0)
            {
                break;
            }
        }

        if (k == OR_BUDGET_LIMITS) {
            goto invalid;
        }

        if (rule->conf.limit[k]) {
            goto duplicate;
        }

        if (ngx_omniroute_budget_number(&num, &v) != NGX_OK) {
            goto number;
        }

        rule->conf.limit[k] = v;
        nlimits++;
    }

    if (nlimits == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "client key limit \"%V\" sets no limit: give "
                           "requests_per_minute=, input_tokens_per_minute=, "
                           "output_tokens_per_minute=, tokens_per_day=, "
                           "tokens_per_month= or concurrent=", &value[1]);
        return NGX_CONF_ERROR;
    }

    rules = bc->rules.elts;

    for (i = 0; i + 1 < bc->rules.nelts; i++) {
        if (rules[i].key_id.len == rule->key_id.len
            && ngx_strncmp(rules[i].key_id.data, rule->key_id.data,
                           rule->key_id.len) == 0
            && rules[i].model.len == rule->model.len
            && ngx_strncmp(rules[i].model.data, rule->model.data,
                           rule->model.len) == 0)
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "client key \"%V\" has limits%s%*s twice "
                               "(first in %V:%ui)", &rule->key_id,
                               rule->model.len ? " for model " : "",
                               rule->model.len, rule->model.data,
                               &rules[i].file, rules[i].line);
            return NGX_CONF_ERROR;
        }
    }

    return NGX_CONF_OK;

duplicate:

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "duplicate \"%V\"", &value[i]);
    return NGX_CONF_ERROR;

number:

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "invalid number in \"%V\": expected 1 to 2^53, with "
                       "an optional \"k\" or \"m\"", &value[i]);
    return NGX_CONF_ERROR;

invalid:

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "invalid parameter \"%V\" of client key limit "
                       "\"%V\"", &value[i], &value[1]);
    return NGX_CONF_ERROR;
}


/* the nodes sharing the limits through Redis: a node's share when down */

char *
ngx_omniroute_client_key_limit_nodes(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf)
{
    ngx_omniroute_main_conf_t *omcf = conf;

    ngx_int_t                     n;
    ngx_str_t                    *value;
    ngx_omniroute_budget_conf_t  *bc;

    bc = ngx_omniroute_budget_get(cf, omcf);
    if (bc == NULL) {
        return NGX_CONF_ERROR;
    }

    if (bc->nodes) {
        return "is duplicate";
    }

    value = cf->args->elts;
    n = ngx_atoi(value[1].data, value[1].len);

    if (n < 1 || n > 1000) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid number of nodes \"%V\": 1 to 1000",
                           &value[1]);
        return NGX_CONF_ERROR;
    }

    bc->nodes = (ngx_uint_t) n;

    return NGX_CONF_OK;
}


/*
 * Every key gets its rule first (rules[key->index]): the one declared
 * without model=, or one with no limits; then the model rules, each
 * with its key.  Names for the slots; the zone.
 */

ngx_int_t
ngx_omniroute_budget_init(ngx_conf_t *cf, ngx_omniroute_main_conf_t *omcf)
{
    u_char                       *p;
    ngx_uint_t                    i, j, nkeys;
    ngx_array_t                   rules;
    ngx_omniroute_keys_conf_t    *kc;
    ngx_omniroute_budget_conf_t  *bc;
    ngx_omniroute_client_key_t   *key;
    ngx_omniroute_budget_rule_t  *declared, *rule, *all;

    kc = omcf->keys;

    if (kc == NULL || kc->keys.nelts == 0) {
        if (kc && kc->budget && kc->budget->rules.nelts) {
            declared = kc->budget->rules.elts;
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "client key limit in %V:%ui names \"%V\" "
                               "but no \"omniroute_client_key\" is "
                               "declared", &declared[0].file,
                               declared[0].line, &declared[0].key_id);
            return NGX_ERROR;
        }

        return NGX_OK;
    }

    bc = ngx_omniroute_budget_get(cf, omcf);
    if (bc == NULL) {
        return NGX_ERROR;
    }

    key = kc->keys.elts;
    nkeys = kc->keys.nelts;
    declared = bc->rules.elts;

    if (ngx_array_init(&rules, cf->pool, nkeys + bc->rules.nelts,
                       sizeof(ngx_omniroute_budget_rule_t))
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    for (i = 0; i < nkeys; i++) {
        rule = ngx_array_push(&rules);
        if (rule == NULL) {
            return NGX_ERROR;
        }

        ngx_memzero(rule, sizeof(ngx_omniroute_budget_rule_t));
        rule->key_id = key[i].id;
        rule->name = key[i].id;
    }

    all = rules.elts;

    for (i = 0; i < bc->rules.nelts; i++) {

        for (j = 0; j < nkeys; j++) {
            if (key[j].id.len == declared[i].key_id.len
                && ngx_strncmp(key[j].id.data, declared[i].key_id.data,
                               key[j].id.len) == 0)
            {
                break;
            }
        }

        if (j == nkeys) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "client key limit in %V:%ui names unknown "
                               "client key \"%V\"", &declared[i].file,
                               declared[i].line, &declared[i].key_id);
            return NGX_ERROR;
        }

        if (declared[i].model.len == 0) {
            rule = &all[j];
            *rule = declared[i];
            rule->name = key[j].id;

        } else {
            rule = ngx_array_push(&rules);
            if (rule == NULL) {
                return NGX_ERROR;
            }

            all = rules.elts;
            *rule = declared[i];

            p = ngx_pnalloc(cf->pool, NGX_OMNIROUTE_BUDGET_NAME_MAX);
            if (p == NULL) {
                return NGX_ERROR;
            }

            rule->name.data = p;
            rule->name.len = ngx_snprintf(p, NGX_OMNIROUTE_BUDGET_NAME_MAX,
                                          "%V model=%*s", &key[j].id,
                                          rule->model.len, rule->model.data)
                             - p;
        }

        rule->key = &key[j];
    }

    for (i = 0; i < nkeys; i++) {
        all[i].key = &key[i];
    }

    for (i = 0; i < rules.nelts; i++) {
        if (all[i].estimate == 0) {
            all[i].estimate = NGX_OMNIROUTE_BUDGET_ESTIMATE;
        }
    }

    bc->rules = rules;
    bc->nkeys = nkeys;

    return ngx_omniroute_budget_zone(cf, bc);
}
