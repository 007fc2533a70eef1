
/*
 * Copyright (C) ngx_omniroute authors
 *
 * Per-key budgets and rate limits in the admin API (R-BUDGET-4,
 * docs/api.md):
 *
 *   GET   /api/keys/budgets[?key=ID]   each rule: its limits in force
 *                                      (and their source), used,
 *                                      reserved, remaining, reset
 *   PATCH /api/keys/budgets   {"key": ID, ["model": PATTERN,]
 *                              "limits": {NAME: N | 0 | null, ...}}
 *                              runtime limits: N, 0 (none), null (back
 *                              to nginx.conf)
 *   POST  /api/keys/budgets/reset   {"key": ID[, "model": PATTERN]} or
 *                              {} (every rule): the windows' usage starts
 *                              over (requests in flight keep their
 *                              reservations)
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute_api.h"
#include "ngx_omniroute_budget_store.h"


static json_t *ngx_omniroute_api_budget_rule(ngx_omniroute_budget_conf_t *bc,
    ngx_omniroute_budget_rule_t *rule, or_msec_t now);
static ngx_omniroute_budget_rule_t *ngx_omniroute_api_budget_find(
    ngx_omniroute_api_call_t *call, ngx_omniroute_budget_conf_t *bc,
    ngx_uint_t *all);


static const char  *ngx_omniroute_api_budget_fields[] = {
    "key", "model", "limits", NULL
};

static const char  *ngx_omniroute_api_budget_reset_fields[] = {
    "key", "model", NULL
};


ngx_int_t
ngx_omniroute_api_budgets(ngx_omniroute_api_call_t *call)
{
    json_t                       *list, *item;
    ngx_str_t                     key;
    ngx_uint_t                    i, has_key, found;
    ngx_omniroute_budget_conf_t  *bc;
    ngx_omniroute_budget_rule_t  *rule;

    bc = ngx_omniroute_budget_conf(call->omcf);
    has_key = (ngx_omniroute_api_arg(call, "key", &key) == NGX_OK);

    list = json_array();
    if (list == NULL) {
        return NGX_ERROR;
    }

    found = 0;

    if (bc && bc->sh) {
        rule = bc->rules.elts;

        ngx_omniroute_budget_lock(bc);

        for (i = 0; i < bc->rules.nelts; i++) {
            if (has_key
                && (rule[i].key_id.len != key.len
                    || ngx_strncmp(rule[i].key_id.data, key.data, key.len)
                       != 0))
            {
                continue;
            }

            found = 1;

            item = ngx_omniroute_api_budget_rule(bc, &rule[i], call->now);

            if (item == NULL || json_array_append_new(list, item) != 0) {
                ngx_omniroute_budget_unlock(bc);
                json_decref(list);
                return NGX_ERROR;
            }
        }

        ngx_omniroute_budget_unlock(bc);
    }

    if (has_key && !found) {
        json_decref(list);
        return ngx_omniroute_api_fail(call, NGX_HTTP_NOT_FOUND, "unknown_key",
                                      "unknown client key \"%V\"", &key);
    }

    call->out = json_pack("{s:I,s:o}", "time", (json_int_t) call->now,
                          "budgets", list);

    return call->out ? NGX_OK : NGX_ERROR;
}


/* one rule, under the zone's lock */

static json_t *
ngx_omniroute_api_budget_rule(ngx_omniroute_budget_conf_t *bc,
    ngx_omniroute_budget_rule_t *rule, or_msec_t now)
{
    int                           k;
    json_t                       *limits, *refused, *one, *doc;
    or_budget_conf_t              conf;
    or_budget_view_t              v;
    ngx_omniroute_budget_slot_t  *slot;

    slot = ngx_omniroute_budget_slot(bc, rule);
    ngx_omniroute_budget_limits(rule, slot, &conf);

    limits = json_object();
    refused = json_object();

    if (limits == NULL || refused == NULL) {
        goto failed;
    }

    for (k = 0; k < OR_BUDGET_LIMITS; k++) {
        or_budget_view(&slot->state, &conf, k, now, &v);

        if (k == OR_BUDGET_CONCURRENT) {
            one = json_pack("{s:I,s:s,s:I}",
                            "limit", (json_int_t) conf.limit[k],
                            "source", (slot->runtime_set & (1u << k))
                                      ? "runtime"
                                      : conf.limit[k] ? "nginx.conf"
                                                      : "default",
                            "in_flight", (json_int_t) slot->state.inflight);

        } else {
            one = json_pack("{s:I,s:s,s:I,s:I,s:I,s:o,s:I}",
                            "limit", (json_int_t) conf.limit[k],
                            "source", (slot->runtime_set & (1u << k))
                                      ? "runtime"
                                      : conf.limit[k] ? "nginx.conf"
                                                      : "default",
                            "used", (json_int_t) or_budget_used(&slot->state,
                                                                k, now),
                            "reserved", (json_int_t) or_budget_reserved(
                                                     &slot->state, k, now),
                            "others", (json_int_t) or_budget_others(
                                                   &slot->state, k, now),
                            "remaining", conf.limit[k]
                                         ? json_integer(v.remaining)
                                         : json_null(),
                            "reset_ms", (json_int_t) v.reset);
        }

        if (one == NULL || json_object_set_new(limits, or_budget_name(k), one)
                           != 0)
        {
            goto failed;
        }

        if (json_object_set_new(refused, or_budget_name(k),
                                json_integer((json_int_t) slot->refused[k]))
            != 0)
        {
            goto failed;
        }
    }

    doc = json_pack("{s:s%,s:o,s:o,s:I,s:I,s:o,s:{s:I,s:I}}",
                    "key", rule->key_id.data, rule->key_id.len,
                    "model", rule->model.len
                             ? json_stringn(rule->model.data, rule->model.len)
                             : json_null(),
                    "limits", limits,
                    "in_flight", (json_int_t) slot->state.inflight,
                    "admitted", (json_int_t) slot->admitted,
                    "refused", refused,
                    "tokens", "input", (json_int_t) slot->tokens[0],
                    "output", (json_int_t) slot->tokens[1]);

    return doc;

failed:

    json_decref(limits);
    json_decref(refused);

    return NULL;
}


/* the rule "key" and "model" of the body name; *all: no key given */

static ngx_omniroute_budget_rule_t *
ngx_omniroute_api_budget_find(ngx_omniroute_api_call_t *call,
    ngx_omniroute_budget_conf_t *bc, ngx_uint_t *all)
{
    json_t                       *jk, *jm;
    size_t                        klen, mlen;
    ngx_uint_t                    i;
    const char                   *kd, *md;
    ngx_omniroute_budget_rule_t  *rule;

    jk = call->body ? json_object_get(call->body, "key") : NULL;
    jm = call->body ? json_object_get(call->body, "model") : NULL;

    *all = 0;

    if (jk == NULL && jm == NULL) {
        *all = 1;
        return NULL;
    }

    if (!json_is_string(jk) || (jm && !json_is_string(jm) && !json_is_null(jm)))
    {
        (void) ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                      "invalid_request",
                                      "\"key\" must be a client key id and "
                                      "\"model\" a model pattern of one of "
                                      "its limits");
        return NULL;
    }

    kd = json_string_value(jk);
    klen = json_string_length(jk);
    md = json_is_string(jm) ? json_string_value(jm) : "";
    mlen = json_is_string(jm) ? json_string_length(jm) : 0;

    rule = bc ? bc->rules.elts : NULL;

    for (i = 0; bc && i < bc->rules.nelts; i++) {
        if (rule[i].key_id.len == klen
            && ngx_strncmp(rule[i].key_id.data, kd, klen) == 0
            && rule[i].model.len == mlen
            && (mlen == 0 || ngx_strncmp(rule[i].model.data, md, mlen) == 0))
        {
            return &rule[i];
        }
    }

    (void) ngx_omniroute_api_fail(call, NGX_HTTP_NOT_FOUND, "unknown_key",
                                  "no client key \"%*s\"%s%*s%s", klen, kd,
                                  mlen ? " with limits for the model \"" : "",
                                  mlen, md, mlen ? "\"" : "");
    return NULL;
}


ngx_int_t
ngx_omniroute_api_budgets_patch(ngx_omniroute_api_call_t *call)
{
    int                           k;
    json_t                       *limits, *v;
    uint32_t                      set, unset;
    uint64_t                      value[OR_BUDGET_LIMITS];
    ngx_uint_t                    all;
    const char                   *name;
    ngx_omniroute_budget_conf_t  *bc;
    ngx_omniroute_budget_rule_t  *rule;
    ngx_omniroute_budget_slot_t  *slot;

    bc = ngx_omniroute_budget_conf(call->omcf);

    if (call->body == NULL || !json_is_object(call->body)) {
        return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                      "invalid_request",
                                      "expected a JSON object with \"key\" "
                                      "and \"limits\"");
    }

    if (ngx_omniroute_api_fields(call, call->body, "the request",
                                 ngx_omniroute_api_budget_fields)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    all = 0;
    rule = ngx_omniroute_api_budget_find(call, bc, &all);

    if (rule == NULL) {
        if (call->code == NULL) {
            return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                          "invalid_request",
                                          "\"key\" is required");
        }

        return NGX_ERROR;
    }

    limits = json_object_get(call->body, "limits");

    if (!json_is_object(limits) || json_object_size(limits) == 0) {
        return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                      "invalid_request",
                                      "\"limits\" must be an object of "
                                      "limits by name");
    }

    set = 0;
    unset = 0;

    json_object_foreach(limits, name, v) {

        for (k = 0; k < OR_BUDGET_LIMITS; k++) {
            if (ngx_strcmp(name, or_budget_name(k)) == 0) {
                break;
            }
        }

        if (k == OR_BUDGET_LIMITS) {
            return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                          "invalid_request",
                                          "unknown limit \"%s\": "
                                          "requests_per_minute, "
                                          "input_tokens_per_minute, "
                                          "output_tokens_per_minute, "
                                          "tokens_per_day, tokens_per_month "
                                          "or concurrent", name);
        }

        if (json_is_null(v)) {
            unset |= 1u << k;
            continue;
        }

        if (!json_is_integer(v) || json_integer_value(v) < 0
            || (json_integer_value(v) > 0
                && !or_budget_valid_limit((uint64_t) json_integer_value(v))))
        {
            return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                          "invalid_request",
                                          "limit \"%s\" must be an integer "
                                          "from 0 (none) to 2^53, or null "
                                          "(nginx.conf's)", name);
        }

        value[k] = (uint64_t) json_integer_value(v);
        set |= 1u << k;
    }

    /* checked whole: now applied whole */

    slot = ngx_omniroute_budget_slot(bc, rule);

    ngx_omniroute_budget_lock(bc);

    for (k = 0; k < OR_BUDGET_LIMITS; k++) {
        if (set & (1u << k)) {
            slot->runtime.limit[k] = value[k];
            slot->runtime_set |= 1u << k;

        } else if (unset & (1u << k)) {
            slot->runtime.limit[k] = 0;
            slot->runtime_set &= ~(1u << k);
        }
    }

    call->out = ngx_omniroute_api_budget_rule(bc, rule, call->now);

    ngx_omniroute_budget_unlock(bc);

    ngx_log_error(NGX_LOG_NOTICE, call->r->connection->log, 0,
                  "omniroute: runtime limits of client key \"%V\"%s%*s "
                  "changed through the admin API", &rule->key_id,
                  rule->model.len ? " model=" : "", rule->model.len,
                  rule->model.data);

    return call->out ? NGX_OK : NGX_ERROR;
}


ngx_int_t
ngx_omniroute_api_budgets_reset(ngx_omniroute_api_call_t *call)
{
    int                           k;
    ngx_uint_t                    i, all, n;
    ngx_omniroute_budget_conf_t  *bc;
    ngx_omniroute_budget_rule_t  *rule, *rules;
    ngx_omniroute_budget_slot_t  *slot;

    bc = ngx_omniroute_budget_conf(call->omcf);

    if (call->body && !json_is_object(call->body)) {
        return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                      "invalid_request",
                                      "expected a JSON object");
    }

    if (call->body
        && ngx_omniroute_api_fields(call, call->body, "the request",
                                    ngx_omniroute_api_budget_reset_fields)
           != NGX_OK)
    {
        return NGX_ERROR;
    }

    rule = ngx_omniroute_api_budget_find(call, bc, &all);

    if (rule == NULL && !all) {
        return NGX_ERROR;
    }

    n = 0;

    if (bc && bc->sh) {
        rules = bc->rules.elts;

        ngx_omniroute_budget_lock(bc);

        for (i = 0; i < bc->rules.nelts; i++) {
            if (!all && &rules[i] != rule) {
                continue;
            }

            slot = ngx_omniroute_budget_slot(bc, &rules[i]);

            for (k = 0; k < OR_BUDGET_WINDOWS; k++) {
                slot->state.win[k].used = 0;
            }

            n++;
        }

        ngx_omniroute_budget_unlock(bc);
    }

    ngx_log_error(NGX_LOG_NOTICE, call->r->connection->log, 0,
                  "omniroute: usage of %ui client key limit rules reset "
                  "through the admin API", n);

    call->out = json_pack("{s:I}", "reset", (json_int_t) n);

    return call->out ? NGX_OK : NGX_ERROR;
}
