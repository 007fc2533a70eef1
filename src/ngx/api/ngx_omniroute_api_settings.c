
/*
 * Copyright (C) ngx_omniroute authors
 *
 * GET / PATCH /api/resilience: the effective resilience settings of every
 * provider and the global ones, each with its source (default, env, conf,
 * runtime; R-CONF-5), and runtime overrides of them, including operator
 * error rules and catch-all defaults (R-CLASS-4).
 *
 * PATCH validates the whole document (types and ranges of the settings
 * rows, the rules between settings as nginx.conf's, the engine's own
 * checks on the resulting settings, rule limits) before anything is
 * written, then writes every record under one lock once room was found
 * for all of them: all or nothing, a full zone included.  null removes a
 * runtime override.  Overrides are records of the state store
 * (ngx_omniroute_settings.h), so they survive a reload and are mirrored
 * like any other state.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute_api.h"


typedef struct {
    ngx_omniroute_settings_override_t  *ov;
    ngx_omniroute_settings_override_t  *old;
} ngx_omniroute_api_merge_t;


/* a row of a PATCH: the settings of a provider, or the global ones */
typedef struct {
    ngx_omniroute_provider_t           *p;          /* NULL: global */
    const char                         *prefix;     /* of its record's */
    ngx_str_t                          *name;       /*   key */
    ngx_uint_t                          touched;    /* settings changed */
    ngx_uint_t                          rules;      /* 0 keep, 1 set,
                                                       2 remove */
    ngx_omniroute_settings_override_t   old;
    ngx_omniroute_settings_override_t   ov;
    ngx_omniroute_rules_override_t     *ro;
    ngx_omniroute_api_merge_t           m;
} ngx_omniroute_api_patch_t;


static json_t *ngx_omniroute_api_provider_settings(
    ngx_omniroute_api_call_t *call, ngx_omniroute_provider_t *p);
static json_t *ngx_omniroute_api_global_json(ngx_omniroute_api_call_t *call);
static ngx_int_t ngx_omniroute_api_table_json(
    ngx_omniroute_setting_desc_t *table, void *base, ngx_uint_t *src,
    json_t *values, json_t *sources);
static json_t *ngx_omniroute_api_value_json(void *base,
    ngx_omniroute_setting_desc_t *d);
static json_t *ngx_omniroute_api_rule_json(const or_oprule_t *rule);
static json_t *ngx_omniroute_api_catchall_json(const or_catchall_t *c);
static ngx_int_t ngx_omniroute_api_patch_row(ngx_omniroute_api_call_t *call,
    ngx_omniroute_api_patch_t *pt, json_t *obj);
static ngx_int_t ngx_omniroute_api_patch_provider(
    ngx_omniroute_api_call_t *call, ngx_omniroute_api_patch_t *pt,
    json_t *obj, const char *where);
static ngx_int_t ngx_omniroute_api_patch_total(ngx_omniroute_api_call_t *call,
    ngx_omniroute_api_patch_t *patch);
static ngx_int_t ngx_omniroute_api_patch_apply(ngx_omniroute_api_call_t *call,
    ngx_omniroute_api_patch_t *patch, ngx_uint_t nrows);
static ngx_int_t ngx_omniroute_api_parse_table(ngx_omniroute_api_call_t *call,
    ngx_omniroute_setting_desc_t *table, json_t *obj, const char *where,
    const char **extra, ngx_omniroute_settings_override_t *ov);
static ngx_int_t ngx_omniroute_api_parse_value(ngx_omniroute_api_call_t *call,
    ngx_omniroute_setting_desc_t *d, ngx_uint_t i, json_t *v,
    const char *where, ngx_omniroute_settings_override_t *ov);
static ngx_int_t ngx_omniroute_api_parse_rules(ngx_omniroute_api_call_t *call,
    json_t *v, const char *where, ngx_omniroute_rules_override_t *ro);
static ngx_int_t ngx_omniroute_api_parse_default(
    ngx_omniroute_api_call_t *call, json_t *v, const char *where,
    ngx_omniroute_settings_override_t *ov);
static ngx_int_t ngx_omniroute_api_conflict(ngx_omniroute_api_call_t *call,
    ngx_omniroute_provider_t *p, ngx_omniroute_settings_conflict_t *c);
static ngx_int_t ngx_omniroute_api_parse_enum(ngx_omniroute_api_call_t *call,
    json_t *v, const char *where, const char *field, ngx_uint_t reason,
    ngx_uint_t *out);
static void ngx_omniroute_api_rule_view(ngx_omniroute_rule_rec_t *rec,
    or_oprule_t *rule);
static ngx_uint_t ngx_omniroute_api_conf_rules(ngx_omniroute_provider_t *p);
static ngx_uint_t ngx_omniroute_api_merge_update(void *value, void *arg,
    or_msec_t *expires);
static ngx_uint_t ngx_omniroute_api_rules_update(void *value, void *arg,
    or_msec_t *expires);
static ngx_uint_t ngx_omniroute_api_rules_delete(void *value, void *arg,
    or_msec_t *expires);
static ngx_int_t ngx_omniroute_api_op(ngx_omniroute_api_call_t *call,
    ngx_omniroute_store_op_t *op, const char *prefix, ngx_str_t *name,
    size_t size, ngx_omniroute_update_pt update, void *arg,
    ngx_uint_t create);
static ngx_uint_t ngx_omniroute_api_ov_empty(
    ngx_omniroute_settings_override_t *ov);
static size_t ngx_omniroute_api_key(u_char *buf, const char *prefix,
    ngx_str_t *name);


static ngx_str_t  ngx_omniroute_api_global = ngx_string("global");

static const char  *ngx_omniroute_api_patch_fields[] = {
    "providers", "global", NULL
};

static const char  *ngx_omniroute_api_provider_extra[] = {
    "error_rules", "error_default", NULL
};

static const char  *ngx_omniroute_api_rule_fields[] = {
    "id", "status", "match", "reason", "scope", "cooldown_ms", NULL
};

static const char  *ngx_omniroute_api_default_fields[] = {
    "cooldown_ms", "scope", "reason", NULL
};


/* GET /api/resilience */

ngx_int_t
ngx_omniroute_api_settings(ngx_omniroute_api_call_t *call)
{
    int                        bad;
    json_t                    *doc, *providers, *o, *limits;
    ngx_uint_t                 i;
    ngx_omniroute_provider_t  *p;

    doc = json_object();
    providers = json_object();
    limits = json_object();

    if (doc == NULL || providers == NULL || limits == NULL) {
        json_decref(doc);
        json_decref(providers);
        json_decref(limits);
        return NGX_ERROR;
    }

    call->out = doc;

    bad = json_object_set_new(doc, "providers", providers);
    bad |= json_object_set_new(doc, "limits", limits);

    p = call->omcf->providers.elts;

    for (i = 0; i < call->omcf->providers.nelts; i++) {
        o = ngx_omniroute_api_provider_settings(call, &p[i]);
        if (o == NULL) {
            return NGX_ERROR;
        }

        bad |= json_object_setn_new(providers, (const char *) p[i].name.data,
                                    p[i].name.len, o);
    }

    o = ngx_omniroute_api_global_json(call);
    if (o == NULL) {
        return NGX_ERROR;
    }

    bad |= json_object_set_new(doc, "global", o);

    bad |= json_object_set_new(limits, "error_rules_max",
                               json_integer(OR_OPRULES_MAX));
    bad |= json_object_set_new(limits, "rule_cooldown_max_ms",
                               json_integer(OR_RULE_MAX_COOLDOWN_MS));
    bad |= json_object_set_new(limits, "default_cooldown_min_ms",
                               json_integer(OR_CATCHALL_MIN_COOLDOWN_MS));
    bad |= json_object_set_new(limits, "match_max_bytes",
                               json_integer(NGX_OMNIROUTE_RULE_MATCH_MAX));

    return bad ? NGX_ERROR : NGX_OK;
}


static json_t *
ngx_omniroute_api_provider_settings(ngx_omniroute_api_call_t *call,
    ngx_omniroute_provider_t *p)
{
    int                                 bad;
    u_char                              buf[NGX_OMNIROUTE_KEY_MAX];
    json_t                             *o, *sources, *rules;
    ngx_str_t                           key;
    ngx_uint_t                          i, src[NGX_OMNIROUTE_SETTINGS_MAX];
    or_class_conf_t                     cc;
    ngx_omniroute_settings_t            s;
    ngx_omniroute_rules_override_t     *ro;
    ngx_omniroute_settings_override_t   ov, *ovp;

    key.data = buf;
    key.len = ngx_omniroute_api_key(buf, "provider:", &p->name);

    ovp = NULL;

    if (ngx_omniroute_settings_read_override(call->omcf, &key, &ov)
        == NGX_OK)
    {
        ovp = &ov;
    }

    ngx_omniroute_settings_effective(call->omcf, p, &s);

    for (i = 0; ngx_omniroute_provider_settings[i].name; i++) {
        src[i] = ngx_omniroute_settings_source(&p->settings, ovp, i);
    }

    if (ngx_omniroute_settings_class(call->omcf, p, call->r->pool, &cc)
        != NGX_OK)
    {
        return NULL;
    }

    o = json_object();
    sources = json_object();
    rules = json_array();

    if (o == NULL || sources == NULL || rules == NULL) {
        json_decref(o);
        json_decref(sources);
        json_decref(rules);
        return NULL;
    }

    bad = json_object_set_new(o, "kind", json_string(or_kind_name(p->kind)));

    if (ngx_omniroute_api_table_json(ngx_omniroute_provider_settings, &s,
                                     src, o, sources)
        != NGX_OK)
    {
        bad = 1;
    }

    for (i = 0; i < cc.noprules; i++) {
        bad |= json_array_append_new(rules,
                                 ngx_omniroute_api_rule_json(&cc.oprules[i]));
    }

    bad |= json_object_set_new(o, "error_rules", rules);
    bad |= json_object_set_new(o, "error_default",
                               ngx_omniroute_api_catchall_json(&cc.catchall));

    ro = ngx_palloc(call->r->pool, sizeof(ngx_omniroute_rules_override_t));
    if (ro == NULL) {
        bad = 1;

    } else if (ngx_omniroute_settings_read_rules(call->omcf, &p->name, ro)
               == NGX_OK
               && ro->set)
    {
        bad |= json_object_set_new(sources, "error_rules",
                                   json_string("runtime"));

    } else {
        bad |= json_object_set_new(sources, "error_rules", json_string(
                             ngx_omniroute_api_conf_rules(p) ? "conf"
                                                             : "default"));
    }

    bad |= json_object_set_new(sources, "error_default", json_string(
                         ovp && ovp->catchall ? "runtime"
                         : p->class_conf.catchall.cooldown_ms != OR_MSEC_NONE
                           ? "conf" : "default"));

    bad |= json_object_set_new(o, "sources", sources);

    if (bad) {
        json_decref(o);
        return NULL;
    }

    return o;
}


static json_t *
ngx_omniroute_api_global_json(ngx_omniroute_api_call_t *call)
{
    int                              bad;
    json_t                          *o, *sources;
    uint64_t                         bit;
    ngx_uint_t                       i, src[NGX_OMNIROUTE_SETTINGS_MAX];
    ngx_omniroute_global_settings_t  g;

    ngx_omniroute_settings_global(call->omcf, &g);

    for (i = 0; ngx_omniroute_global_settings[i].name; i++) {
        bit = (uint64_t) 1 << i;

        src[i] = (g.runtime_set & bit) ? NGX_OMNIROUTE_SRC_RUNTIME
                 : (g.env_set & bit) ? NGX_OMNIROUTE_SRC_ENV
                 : NGX_OMNIROUTE_SRC_DEFAULT;
    }

    o = json_object();
    sources = json_object();

    if (o == NULL || sources == NULL) {
        json_decref(o);
        json_decref(sources);
        return NULL;
    }

    bad = (ngx_omniroute_api_table_json(ngx_omniroute_global_settings, &g,
                                        src, o, sources)
           != NGX_OK);
    bad |= json_object_set_new(o, "sources", sources);

    if (bad) {
        json_decref(o);
        return NULL;
    }

    return o;
}


static ngx_int_t
ngx_omniroute_api_table_json(ngx_omniroute_setting_desc_t *table,
    void *base, ngx_uint_t *src, json_t *values, json_t *sources)
{
    int                            bad;
    json_t                        *g, *sg;
    ngx_uint_t                     i;
    ngx_omniroute_setting_desc_t  *d;

    bad = 0;

    for (i = 0; table[i].name; i++) {
        d = &table[i];

        g = json_object_get(values, d->group);

        if (g == NULL) {
            g = json_object();
            bad |= json_object_set_new(values, d->group, g);
        }

        sg = json_object_get(sources, d->group);

        if (sg == NULL) {
            sg = json_object();
            bad |= json_object_set_new(sources, d->group, sg);
        }

        if (g == NULL || sg == NULL) {
            return NGX_ERROR;
        }

        bad |= json_object_set_new(g, d->name,
                                   ngx_omniroute_api_value_json(base, d));
        bad |= json_object_set_new(sg, d->name, json_string(
                                       ngx_omniroute_source_name(src[i])));
    }

    return bad ? NGX_ERROR : NGX_OK;
}


static json_t *
ngx_omniroute_api_value_json(void *base, ngx_omniroute_setting_desc_t *d)
{
    json_t                    *a;
    int32_t                    i;
    int64_t                    v;
    ngx_omniroute_settings_t  *s;

    v = ngx_omniroute_settings_get(base, d);

    switch (d->type) {

    case NGX_OMNIROUTE_SF_BOOL:
        return json_boolean(v > 0);

    case NGX_OMNIROUTE_SF_MSEC_OPT:
        return (v == OR_MSEC_NONE) ? json_null() : json_integer(v);

    case NGX_OMNIROUTE_SF_CODES:
        s = base;
        a = json_array();

        for (i = 0; a && i < s->lockout.n_codes; i++) {
            if (json_array_append_new(a, json_integer(s->lockout.codes[i]))
                != 0)
            {
                json_decref(a);
                return NULL;
            }
        }

        return a;

    default:
        return json_integer(v);
    }
}


static json_t *
ngx_omniroute_api_rule_json(const or_oprule_t *rule)
{
    return json_pack("{s:s?,s:o,s:s%,s:o,s:o,s:o}",
                     "id", rule->id,
                     "status", rule->status ? json_integer(rule->status)
                                            : json_null(),
                     "match", rule->match ? rule->match : "",
                     rule->match ? rule->match_len : 0,
                     "reason", rule->reason != OR_REASON_NONE
                               ? json_string(or_reason_name(rule->reason))
                               : json_null(),
                     "scope", rule->scope != OR_SCOPE_NONE
                              ? json_string(or_scope_name(rule->scope))
                              : json_null(),
                     "cooldown_ms", rule->cooldown_ms != OR_MSEC_NONE
                                    ? json_integer(rule->cooldown_ms)
                                    : json_null());
}


static json_t *
ngx_omniroute_api_catchall_json(const or_catchall_t *c)
{
    if (c->cooldown_ms == OR_MSEC_NONE) {
        return json_null();
    }

    return json_pack("{s:I,s:s,s:o}",
                     "cooldown_ms", (json_int_t) c->cooldown_ms,
                     "scope", or_scope_name(c->scope != OR_SCOPE_NONE
                                            ? c->scope
                                            : OR_SCOPE_CONNECTION),
                     "reason", c->reason != OR_REASON_NONE
                               ? json_string(or_reason_name(c->reason))
                               : json_null());
}


/*
 * PATCH /api/resilience: a row per provider and one for the global
 * settings; every row the document names is validated (its members by
 * the rows of its settings table), then all are written at once.
 */

ngx_int_t
ngx_omniroute_api_settings_patch(ngx_omniroute_api_call_t *call)
{
    json_t                     *providers, *global, *pv;
    ngx_uint_t                  i, n;
    const char                 *name;
    ngx_omniroute_provider_t   *p;
    ngx_omniroute_api_patch_t  *patch, *pt;

    if (call->body == NULL) {
        return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                      "missing_body",
                                      "expected {\"providers\": {...}, "
                                      "\"global\": {...}}");
    }

    if (ngx_omniroute_api_fields(call, call->body, NULL,
                                 ngx_omniroute_api_patch_fields)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (call->omcf->shm_zone == NULL) {
        return ngx_omniroute_api_fail(call, NGX_HTTP_CONFLICT,
                                      "no_zone",
                                      "runtime settings need an "
                                      "omniroute_zone");
    }

    n = call->omcf->providers.nelts;
    p = call->omcf->providers.elts;

    /* the providers' rows, then the global one */

    patch = ngx_pcalloc(call->r->pool,
                        (n + 1) * sizeof(ngx_omniroute_api_patch_t));
    if (patch == NULL) {
        return NGX_ERROR;
    }

    for (i = 0; i < n; i++) {
        patch[i].p = &p[i];
    }

    /* 1. parse and validate everything */

    providers = json_object_get(call->body, "providers");

    if (providers && !json_is_object(providers)) {
        return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                      "invalid_type",
                                      "\"providers\" must be an object");
    }

    json_object_foreach(providers, name, pv) {

        pt = NULL;

        for (i = 0; i < n; i++) {
            if (p[i].name.len == ngx_strlen(name)
                && ngx_strncmp(p[i].name.data, name, p[i].name.len) == 0)
            {
                pt = &patch[i];
                break;
            }
        }

        if (pt == NULL) {
            return ngx_omniroute_api_fail(call, NGX_HTTP_NOT_FOUND,
                                          "unknown_provider",
                                          "unknown provider \"%*s\"",
                                          ngx_min(ngx_strlen(name), 128),
                                          name);
        }

        if (ngx_omniroute_api_patch_row(call, pt, pv) != NGX_OK) {
            return NGX_ERROR;
        }
    }

    if (ngx_omniroute_api_patch_total(call, patch) != NGX_OK) {
        return NGX_ERROR;
    }

    global = json_object_get(call->body, "global");

    if (global && ngx_omniroute_api_patch_row(call, &patch[n], global)
                  != NGX_OK)
    {
        return NGX_ERROR;
    }

    /* 2. write */

    if (ngx_omniroute_api_patch_apply(call, patch, n + 1) != NGX_OK) {
        return NGX_ERROR;
    }

    return ngx_omniroute_api_settings(call);
}


/*
 * A row's object, parsed onto its record as it is now; nothing is
 * written.  The members are the rows of its settings table, and for a
 * provider error_default and error_rules.
 */

static ngx_int_t
ngx_omniroute_api_patch_row(ngx_omniroute_api_call_t *call,
    ngx_omniroute_api_patch_t *pt, json_t *obj)
{
    u_char                         buf[NGX_OMNIROUTE_KEY_MAX];
    u_char                         where[NGX_OMNIROUTE_KEY_MAX + 32];
    ngx_str_t                      key;
    const char                   **extra;
    ngx_omniroute_setting_desc_t  *table;

    if (pt->p) {
        ngx_snprintf(where, sizeof(where), "providers.%V%Z", &pt->p->name);
        pt->prefix = "provider:";
        pt->name = &pt->p->name;
        table = ngx_omniroute_provider_settings;
        extra = ngx_omniroute_api_provider_extra;

    } else {
        ngx_snprintf(where, sizeof(where), "global%Z");
        pt->prefix = "";
        pt->name = &ngx_omniroute_api_global;
        table = ngx_omniroute_global_settings;
        extra = NULL;
    }

    if (!json_is_object(obj)) {
        return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                      "invalid_type",
                                      "\"%s\" must be an object", where);
    }

    key.data = buf;
    key.len = ngx_omniroute_api_key(buf, pt->prefix, pt->name);

    if (ngx_omniroute_settings_read_override(call->omcf, &key, &pt->old)
        != NGX_OK)
    {
        ngx_memzero(&pt->old, sizeof(ngx_omniroute_settings_override_t));
    }

    pt->ov = pt->old;

    if (ngx_omniroute_api_parse_table(call, table, obj, (const char *) where,
                                      extra, &pt->ov)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (pt->p
        && ngx_omniroute_api_patch_provider(call, pt, obj,
                                            (const char *) where)
           != NGX_OK)
    {
        return NGX_ERROR;
    }

    pt->touched = 1;

    return NGX_OK;
}


/* a provider's error_default and error_rules, and the settings to be */

static ngx_int_t
ngx_omniroute_api_patch_provider(ngx_omniroute_api_call_t *call,
    ngx_omniroute_api_patch_t *pt, json_t *obj, const char *where)
{
    json_t                             *v;
    ngx_omniroute_settings_t            s;
    ngx_omniroute_settings_conflict_t   c;

    v = json_object_get(obj, "error_default");

    if (v && ngx_omniroute_api_parse_default(call, v, where, &pt->ov)
             != NGX_OK)
    {
        return NGX_ERROR;
    }

    v = json_object_get(obj, "error_rules");

    if (v) {
        if (json_is_null(v)) {
            pt->rules = 2;

        } else {
            pt->ro = ngx_pcalloc(call->r->pool,
                                 sizeof(ngx_omniroute_rules_override_t));
            if (pt->ro == NULL) {
                return NGX_ERROR;
            }

            if (ngx_omniroute_api_parse_rules(call, v, where, pt->ro)
                != NGX_OK)
            {
                return NGX_ERROR;
            }

            pt->rules = 1;
        }
    }

    /*
     * the settings that would result, judged as nginx.conf's are: the
     * rules between settings for the overridden ones, then the
     * engine's own checks
     */

    s = pt->p->settings;
    ngx_omniroute_settings_layer(&s, &pt->ov);

    if (ngx_omniroute_settings_check(pt->p->kind, &s, pt->ov.set, &c)
        != NGX_OK)
    {
        return ngx_omniroute_api_conflict(call, pt->p, &c);
    }

    return NGX_OK;
}


/* at most OR_OPRULES_MAX operator rules in total (R-CLASS-4) */

static ngx_int_t
ngx_omniroute_api_patch_total(ngx_omniroute_api_call_t *call,
    ngx_omniroute_api_patch_t *patch)
{
    ngx_uint_t                       i, total;
    ngx_omniroute_provider_t        *p;
    ngx_omniroute_rules_override_t  *cur;

    p = call->omcf->providers.elts;

    /* a provider's rules record as it is now: 16 KiB, not on the stack */

    cur = ngx_palloc(call->r->pool, sizeof(ngx_omniroute_rules_override_t));
    if (cur == NULL) {
        return NGX_ERROR;
    }

    total = 0;

    for (i = 0; i < call->omcf->providers.nelts; i++) {
        if (patch[i].rules == 1) {
            total += patch[i].ro->n;

        } else if (patch[i].rules == 2) {
            total += ngx_omniroute_api_conf_rules(&p[i]);

        } else if (ngx_omniroute_settings_read_rules(call->omcf, &p[i].name,
                                                     cur)
                   == NGX_OK
                   && cur->set)
        {
            total += cur->n;

        } else {
            total += ngx_omniroute_api_conf_rules(&p[i]);
        }
    }

    if (total > OR_OPRULES_MAX) {
        return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                      "too_many_rules",
                                      "at most %d operator error rules in "
                                      "total, this would make %ui",
                                      OR_OPRULES_MAX, total);
    }

    return NGX_OK;
}


/*
 * Write the validated rows, all or nothing: every record under one lock,
 * after room for all of them was found; records are merged field by
 * field with concurrent PATCHes.
 */

static ngx_int_t
ngx_omniroute_api_patch_apply(ngx_omniroute_api_call_t *call,
    ngx_omniroute_api_patch_t *patch, ngx_uint_t nrows)
{
    ngx_uint_t                  i, nops;
    ngx_omniroute_store_op_t   *ops;
    ngx_omniroute_api_patch_t  *pt;

    /* a settings record per row, a rules record per provider */

    ops = ngx_pcalloc(call->r->pool,
                      2 * nrows * sizeof(ngx_omniroute_store_op_t));
    if (ops == NULL) {
        return NGX_ERROR;
    }

    nops = 0;

    for (i = 0; i < nrows; i++) {
        pt = &patch[i];

        if (!pt->touched) {
            continue;
        }

        pt->m.ov = &pt->ov;
        pt->m.old = &pt->old;

        if (ngx_omniroute_api_op(call, &ops[nops++], pt->prefix, pt->name,
                                 sizeof(ngx_omniroute_settings_override_t),
                                 ngx_omniroute_api_merge_update, &pt->m, 1)
            != NGX_OK)
        {
            return NGX_ERROR;
        }

        if (pt->rules == 0) {
            continue;
        }

        if (ngx_omniroute_api_op(call, &ops[nops++], "rules:", pt->name,
                                 sizeof(ngx_omniroute_rules_override_t),
                                 pt->rules == 1
                                 ? ngx_omniroute_api_rules_update
                                 : ngx_omniroute_api_rules_delete,
                                 pt->ro, pt->rules == 1)
            != NGX_OK)
        {
            return NGX_ERROR;
        }
    }

    if (ngx_omniroute_store_update_all(&call->omcf->store, ops, nops)
        != NGX_OK)
    {
        return ngx_omniroute_api_fail(call, NGX_HTTP_INSUFFICIENT_STORAGE,
                                      "zone_full",
                                      "the omniroute zone has no room for "
                                      "the settings; nothing was changed");
    }

    for (i = 0; i < nrows; i++) {
        pt = &patch[i];

        if (!pt->touched) {
            continue;
        }

        if (pt->p) {
            ngx_log_error(NGX_LOG_NOTICE, call->r->connection->log, 0,
                          "omniroute api: runtime settings of provider "
                          "\"%V\" changed", &pt->p->name);

        } else {
            ngx_log_error(NGX_LOG_NOTICE, call->r->connection->log, 0,
                          "omniroute api: global runtime settings changed");
        }
    }

    return NGX_OK;
}


/* a store op on the settings record PREFIX NAME; the key from the pool */

static ngx_int_t
ngx_omniroute_api_op(ngx_omniroute_api_call_t *call,
    ngx_omniroute_store_op_t *op, const char *prefix, ngx_str_t *name,
    size_t size, ngx_omniroute_update_pt update, void *arg,
    ngx_uint_t create)
{
    u_char  buf[NGX_OMNIROUTE_KEY_MAX];

    op->key.len = ngx_omniroute_api_key(buf, prefix, name);

    if (op->key.len == 0) {
        return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                      "invalid_request",
                                      "provider name \"%V\" is too long",
                                      name);
    }

    op->key.data = ngx_pnalloc(call->r->pool, op->key.len);
    if (op->key.data == NULL) {
        return NGX_ERROR;
    }

    ngx_memcpy(op->key.data, buf, op->key.len);

    op->table = NGX_OMNIROUTE_T_SETTINGS;
    op->size = size;
    op->update = update;
    op->arg = arg;
    op->create = create;

    return NGX_OK;
}


/* 400 invalid_settings: what ngx_omniroute_settings_check() found */

static ngx_int_t
ngx_omniroute_api_conflict(ngx_omniroute_api_call_t *call,
    ngx_omniroute_provider_t *p, ngx_omniroute_settings_conflict_t *c)
{
    u_char                        *b, *last, buf[256];
    ngx_omniroute_setting_desc_t  *d, *o;

    if (c->field < 0) {
        return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                      "invalid_settings",
                                      "provider \"%V\": %s", &p->name,
                                      c->reason);
    }

    d = &ngx_omniroute_provider_settings[c->field];

    last = buf + sizeof(buf) - 1;
    b = ngx_slprintf(buf, last, "%s.%s %L", d->group, d->name, c->value);

    if (c->other >= 0) {
        o = &ngx_omniroute_provider_settings[c->other];
        b = ngx_slprintf(b, last, " conflicts with %s.%s %L", o->group,
                         o->name, c->other_value);
    }

    b = ngx_slprintf(b, last, ": %s", c->reason);

    if (c->result != c->value) {
        b = ngx_slprintf(b, last, " (it would be %L)", c->result);
    }

    return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                  "invalid_settings", "provider \"%V\": %*s",
                                  &p->name, (size_t) (b - buf), buf);
}


/*
 * Parse {"group": {"name": value}} for a settings table into ov; other
 * members must be listed in extra (parsed by the caller).
 */

static ngx_int_t
ngx_omniroute_api_parse_table(ngx_omniroute_api_call_t *call,
    ngx_omniroute_setting_desc_t *table, json_t *obj, const char *where,
    const char **extra, ngx_omniroute_settings_override_t *ov)
{
    json_t       *g, *v;
    ngx_uint_t    i, known;
    const char   *gname, *name, **e;

    json_object_foreach(obj, gname, g) {

        known = 0;

        for (i = 0; table[i].name; i++) {
            if (ngx_strcmp(table[i].group, gname) == 0) {
                known = 1;
                break;
            }
        }

        if (!known) {
            for (e = extra; e && *e; e++) {
                if (ngx_strcmp(*e, gname) == 0) {
                    break;
                }
            }

            if (e && *e) {
                continue;
            }

            return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                          "unknown_field",
                                          "unknown field \"%s\" in %s",
                                          gname, where);
        }

        if (!json_is_object(g)) {
            return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                          "invalid_type",
                                          "\"%s.%s\" must be an object",
                                          where, gname);
        }

        json_object_foreach(g, name, v) {

            for (i = 0; table[i].name; i++) {
                if (ngx_strcmp(table[i].group, gname) == 0
                    && ngx_strcmp(table[i].name, name) == 0)
                {
                    break;
                }
            }

            if (table[i].name == NULL) {
                return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                              "unknown_field",
                                              "unknown field \"%s\" in "
                                              "%s.%s", name, where, gname);
            }

            if (ngx_omniroute_api_parse_value(call, &table[i], i, v, where,
                                              ov)
                != NGX_OK)
            {
                return NGX_ERROR;
            }
        }
    }

    return NGX_OK;
}


static ngx_int_t
ngx_omniroute_api_parse_value(ngx_omniroute_api_call_t *call,
    ngx_omniroute_setting_desc_t *d, ngx_uint_t i, json_t *v,
    const char *where, ngx_omniroute_settings_override_t *ov)
{
    size_t      k, j;
    json_t     *c;
    int64_t     n;
    uint64_t    bit;
    json_int_t  code;

    bit = (uint64_t) 1 << i;

    if (json_is_null(v)) {
        ov->set &= ~bit;
        ov->value[i] = 0;
        return NGX_OK;
    }

    switch (d->type) {

    case NGX_OMNIROUTE_SF_BOOL:
        if (!json_is_boolean(v)) {
            return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                          "invalid_type",
                                          "%s.%s.%s must be true or false",
                                          where, d->group, d->name);
        }

        n = json_is_true(v) ? 1 : 0;
        break;

    case NGX_OMNIROUTE_SF_CODES:
        ngx_memzero(ov->codes, sizeof(ov->codes));

        if (!json_is_array(v) || json_array_size(v) > OR_LOCKOUT_CODES_MAX) {
            return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                          "invalid_type",
                                          "%s.%s.%s must be an array of at "
                                          "most %d HTTP statuses", where,
                                          d->group, d->name,
                                          OR_LOCKOUT_CODES_MAX);
        }

        json_array_foreach(v, k, c) {
            if (!json_is_integer(c)) {
                return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                              "invalid_type",
                                              "%s.%s.%s must hold integers",
                                              where, d->group, d->name);
            }

            code = json_integer_value(c);

            if (code < d->min || code > d->max) {
                return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                              "out_of_range",
                                              "%s.%s.%s: %L is not an HTTP "
                                              "status (100..599)", where,
                                              d->group, d->name,
                                              (int64_t) code);
            }

            for (j = 0; j < k; j++) {
                if (ov->codes[j] == code) {
                    return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                                  "invalid_value",
                                                  "%s.%s.%s: %L is listed "
                                                  "twice", where, d->group,
                                                  d->name, (int64_t) code);
                }
            }

            ov->codes[k] = (int32_t) code;
        }

        ov->n_codes = (int32_t) json_array_size(v);
        ov->set |= bit;
        return NGX_OK;

    default:
        if (!json_is_integer(v)) {
            return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                          "invalid_type",
                                          "%s.%s.%s must be an integer%s",
                                          where, d->group, d->name,
                                          d->type == NGX_OMNIROUTE_SF_INT
                                          ? "" : " (milliseconds)");
        }

        n = json_integer_value(v);

        if (d->type == NGX_OMNIROUTE_SF_MSEC_OPT && n == 0) {
            break;              /* "none" */
        }

        if (n < d->min || n > d->max) {
            return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                          "out_of_range",
                                          "%s.%s.%s: %L is out of range "
                                          "(%L..%L%s)", where, d->group,
                                          d->name, n, d->min, d->max,
                                          d->type == NGX_OMNIROUTE_SF_MSEC_OPT
                                          ? ", or 0 for none" : "");
        }

        break;
    }

    ov->set |= bit;
    ov->value[i] = n;

    return NGX_OK;
}


/* "error_rules": [{id?, status?, match?, reason?, scope?, cooldown_ms?}] */

static ngx_int_t
ngx_omniroute_api_parse_rules(ngx_omniroute_api_call_t *call, json_t *v,
    const char *where, ngx_omniroute_rules_override_t *ro)
{
    size_t                     k, len;
    json_t                    *r, *f;
    ngx_uint_t                 e;
    const char                *err, *s, **a;
    or_oprule_t                rule;
    ngx_omniroute_rule_rec_t  *rec;

    if (!json_is_array(v)) {
        return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                      "invalid_type",
                                      "%s.error_rules must be an array or "
                                      "null", where);
    }

    if (json_array_size(v) > OR_OPRULES_MAX) {
        return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                      "too_many_rules",
                                      "%s.error_rules: at most %d rules",
                                      where, OR_OPRULES_MAX);
    }

    ro->set = 1;
    ro->n = (uint32_t) json_array_size(v);

    json_array_foreach(v, k, r) {
        rec = &ro->rule[k];

        if (!json_is_object(r)) {
            return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                          "invalid_type",
                                          "%s.error_rules[%uz] must be an "
                                          "object", where, k);
        }

        json_object_foreach(r, s, f) {

            for (a = ngx_omniroute_api_rule_fields; *a; a++) {
                if (ngx_strcmp(*a, s) == 0) {
                    break;
                }
            }

            if (*a == NULL) {
                return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                              "unknown_field",
                                              "unknown field \"%s\" in "
                                              "%s.error_rules[%uz]", s,
                                              where, k);
            }
        }

        rec->cooldown_ms = OR_MSEC_NONE;

        f = json_object_get(r, "id");

        if (f && !json_is_null(f)) {
            if (!json_is_string(f) || json_string_length(f) == 0
                || json_string_length(f) >= NGX_OMNIROUTE_RULE_ID_MAX)
            {
                return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                              "invalid_type",
                                              "%s.error_rules[%uz].id must "
                                              "be a string of 1..47 bytes",
                                              where, k);
            }

            s = json_string_value(f);
            len = json_string_length(f);

            for (e = 0; e < len; e++) {
                if ((u_char) s[e] <= ' ' || (u_char) s[e] >= 0x7f
                    || s[e] == '"' || s[e] == '\\')
                {
                    return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                                  "invalid_value",
                                                  "%s.error_rules[%uz].id: "
                                                  "use printable ASCII "
                                                  "without spaces or "
                                                  "quotes", where, k);
                }
            }

            ngx_memcpy(rec->id, s, len);

        } else {
            ngx_snprintf(rec->id, NGX_OMNIROUTE_RULE_ID_MAX,
                         "operator-%uz%Z", k + 1);
        }

        f = json_object_get(r, "status");

        if (f && !json_is_null(f)) {
            if (!json_is_integer(f)) {
                return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                              "invalid_type",
                                              "%s.error_rules[%uz].status "
                                              "must be an integer", where,
                                              k);
            }

            if (json_integer_value(f) < 100 || json_integer_value(f) > 599) {
                return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                              "out_of_range",
                                              "%s.error_rules[%uz].status "
                                              "must be between 100 and 599",
                                              where, k);
            }

            rec->status = (int32_t) json_integer_value(f);
        }

        f = json_object_get(r, "match");

        if (f && !json_is_null(f)) {
            if (!json_is_string(f)) {
                return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                              "invalid_type",
                                              "%s.error_rules[%uz].match "
                                              "must be a string (a "
                                              "substring, never a regex)",
                                              where, k);
            }

            if (json_string_length(f) > NGX_OMNIROUTE_RULE_MATCH_MAX) {
                return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                              "out_of_range",
                                              "%s.error_rules[%uz].match is "
                                              "longer than %d bytes", where,
                                              k,
                                              NGX_OMNIROUTE_RULE_MATCH_MAX);
            }

            rec->match_len = (uint16_t) json_string_length(f);
            ngx_memcpy(rec->match, json_string_value(f), rec->match_len);
        }

        f = json_object_get(r, "reason");

        if (f && !json_is_null(f)) {
            if (ngx_omniroute_api_parse_enum(call, f, where, "reason", 1, &e)
                != NGX_OK)
            {
                return NGX_ERROR;
            }

            rec->reason = (uint8_t) e;
        }

        f = json_object_get(r, "scope");

        if (f && !json_is_null(f)) {
            if (ngx_omniroute_api_parse_enum(call, f, where, "scope", 0, &e)
                != NGX_OK)
            {
                return NGX_ERROR;
            }

            rec->scope = (uint8_t) e;
        }

        f = json_object_get(r, "cooldown_ms");

        if (f && !json_is_null(f)) {
            if (!json_is_integer(f)) {
                return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                              "invalid_type",
                                              "%s.error_rules[%uz]."
                                              "cooldown_ms must be an "
                                              "integer", where, k);
            }

            if (json_integer_value(f) < 0
                || json_integer_value(f) > OR_RULE_MAX_COOLDOWN_MS)
            {
                return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                              "out_of_range",
                                              "%s.error_rules[%uz]."
                                              "cooldown_ms must be between "
                                              "0 and 30 days (%L ms)", where,
                                              k,
                                              (int64_t)
                                              OR_RULE_MAX_COOLDOWN_MS);
            }

            rec->cooldown_ms = json_integer_value(f);
        }

        ngx_omniroute_api_rule_view(rec, &rule);

        err = or_oprule_validate(&rule);

        if (err) {
            return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                          "invalid_rule",
                                          "%s.error_rules[%uz]: %s", where,
                                          k, err);
        }
    }

    return NGX_OK;
}


/* "error_default": {cooldown_ms, scope?, reason?} | null */

static ngx_int_t
ngx_omniroute_api_parse_default(ngx_omniroute_api_call_t *call, json_t *v,
    const char *where, ngx_omniroute_settings_override_t *ov)
{
    json_t         *f;
    ngx_uint_t      e;
    const char     *err;
    or_catchall_t   c;

    if (json_is_null(v)) {
        ov->catchall = 0;
        return NGX_OK;
    }

    if (!json_is_object(v)) {
        return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                      "invalid_type",
                                      "%s.error_default must be an object "
                                      "or null", where);
    }

    if (ngx_omniroute_api_fields(call, v, "error_default",
                                 ngx_omniroute_api_default_fields)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    f = json_object_get(v, "cooldown_ms");

    if (f == NULL || !json_is_integer(f)) {
        return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                      "invalid_type",
                                      "%s.error_default.cooldown_ms must be "
                                      "an integer (0 turns the default off)",
                                      where);
    }

    c.cooldown_ms = json_integer_value(f);
    c.scope = OR_SCOPE_NONE;
    c.reason = OR_REASON_NONE;

    f = json_object_get(v, "scope");

    if (f && !json_is_null(f)) {
        if (ngx_omniroute_api_parse_enum(call, f, where, "scope", 0, &e)
            != NGX_OK)
        {
            return NGX_ERROR;
        }

        c.scope = (or_scope_e) e;
    }

    f = json_object_get(v, "reason");

    if (f && !json_is_null(f)) {
        if (ngx_omniroute_api_parse_enum(call, f, where, "reason", 1, &e)
            != NGX_OK)
        {
            return NGX_ERROR;
        }

        c.reason = (or_reason_e) e;
    }

    if (c.cooldown_ms == 0) {
        ov->catchall = 2;
        ov->catchall_cooldown_ms = OR_MSEC_NONE;
        ov->catchall_scope = 0;
        ov->catchall_reason = 0;
        return NGX_OK;
    }

    err = or_catchall_validate(&c);

    if (err) {
        return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                      "out_of_range",
                                      "%s.error_default: %s", where, err);
    }

    ov->catchall = 1;
    ov->catchall_cooldown_ms = c.cooldown_ms;
    ov->catchall_scope = c.scope;
    ov->catchall_reason = c.reason;

    return NGX_OK;
}


static ngx_int_t
ngx_omniroute_api_parse_enum(ngx_omniroute_api_call_t *call, json_t *v,
    const char *where, const char *field, ngx_uint_t reason, ngx_uint_t *out)
{
    ngx_uint_t  e;

    if (!json_is_string(v)) {
        return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                      "invalid_type",
                                      "%s: \"%s\" must be a string", where,
                                      field);
    }

    if (reason) {
        e = or_classify_reason_parse(json_string_value(v),
                                     json_string_length(v));
        if (e == OR_REASON_COUNT || e == OR_REASON_NONE) {
            return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                          "invalid_value",
                                          "%s: unknown reason \"%*s\"",
                                          where,
                                          ngx_min(json_string_length(v), 64),
                                          json_string_value(v));
        }

    } else {
        e = or_classify_scope_parse(json_string_value(v),
                                    json_string_length(v));
        if (e == OR_SCOPE_COUNT || e == OR_SCOPE_NONE) {
            return ngx_omniroute_api_fail(call, NGX_HTTP_BAD_REQUEST,
                                          "invalid_value",
                                          "%s: unknown scope \"%*s\" "
                                          "(connection, model, base_model, "
                                          "quota_family, provider)", where,
                                          ngx_min(json_string_length(v), 64),
                                          json_string_value(v));
        }
    }

    *out = e;

    return NGX_OK;
}


static void
ngx_omniroute_api_rule_view(ngx_omniroute_rule_rec_t *rec, or_oprule_t *rule)
{
    rule->id = (const char *) rec->id;
    rule->status = rec->status;
    rule->match = rec->match_len ? (const char *) rec->match : NULL;
    rule->match_len = rec->match_len;
    rule->reason = (or_reason_e) rec->reason;
    rule->scope = (or_scope_e) rec->scope;
    rule->cooldown_ms = rec->cooldown_ms;
}


static ngx_uint_t
ngx_omniroute_api_conf_rules(ngx_omniroute_provider_t *p)
{
    return p->class_conf.noprules;
}


/* apply the PATCH's changes (old -> ov) onto the record as it is now */

static ngx_uint_t
ngx_omniroute_api_merge_update(void *value, void *arg, or_msec_t *expires)
{
    ngx_omniroute_settings_override_t *cur = value;
    ngx_omniroute_api_merge_t         *m = arg;

    uint64_t                            bit, changed;
    ngx_uint_t                          i;
    ngx_omniroute_settings_override_t   before;

    before = *cur;

    changed = (m->ov->set ^ m->old->set);

    for (i = 0; i < NGX_OMNIROUTE_SETTINGS_MAX; i++) {
        bit = (uint64_t) 1 << i;

        if ((m->ov->set & bit) && m->ov->value[i] != m->old->value[i]) {
            changed |= bit;
        }
    }

    if (m->ov->n_codes != m->old->n_codes
        || ngx_memcmp(m->ov->codes, m->old->codes, sizeof(m->ov->codes))
           != 0)
    {
        cur->n_codes = m->ov->n_codes;
        ngx_memcpy(cur->codes, m->ov->codes, sizeof(cur->codes));
    }

    for (i = 0; i < NGX_OMNIROUTE_SETTINGS_MAX; i++) {
        bit = (uint64_t) 1 << i;

        if (!(changed & bit)) {
            continue;
        }

        if (m->ov->set & bit) {
            cur->set |= bit;
            cur->value[i] = m->ov->value[i];

        } else {
            cur->set &= ~bit;
            cur->value[i] = 0;
        }
    }

    if (m->ov->catchall != m->old->catchall
        || m->ov->catchall_cooldown_ms != m->old->catchall_cooldown_ms
        || m->ov->catchall_scope != m->old->catchall_scope
        || m->ov->catchall_reason != m->old->catchall_reason)
    {
        cur->catchall = m->ov->catchall;
        cur->catchall_cooldown_ms = m->ov->catchall_cooldown_ms;
        cur->catchall_scope = m->ov->catchall_scope;
        cur->catchall_reason = m->ov->catchall_reason;
    }

    if (ngx_omniroute_api_ov_empty(cur)) {
        /* a record created for nothing is dropped by the store */
        return ngx_omniroute_api_ov_empty(&before) ? NGX_OMNIROUTE_UNCHANGED
                                                   : NGX_OMNIROUTE_DELETE;
    }

    if (ngx_memcmp(&before, cur, sizeof(before)) == 0) {
        return NGX_OMNIROUTE_UNCHANGED;
    }

    return NGX_OMNIROUTE_CHANGED;
}


static ngx_uint_t
ngx_omniroute_api_rules_update(void *value, void *arg, or_msec_t *expires)
{
    ngx_omniroute_rules_override_t  *cur = value;
    ngx_omniroute_rules_override_t  *ro = arg;

    if (ngx_memcmp(cur, ro, sizeof(ngx_omniroute_rules_override_t)) == 0) {
        return NGX_OMNIROUTE_UNCHANGED;
    }

    *cur = *ro;

    return NGX_OMNIROUTE_CHANGED;
}


/* error_rules: null -- back to nginx.conf's */

static ngx_uint_t
ngx_omniroute_api_rules_delete(void *value, void *arg, or_msec_t *expires)
{
    return NGX_OMNIROUTE_DELETE;
}


static ngx_uint_t
ngx_omniroute_api_ov_empty(ngx_omniroute_settings_override_t *ov)
{
    return ov->set == 0 && ov->catchall == 0;
}


static size_t
ngx_omniroute_api_key(u_char *buf, const char *prefix, ngx_str_t *name)
{
    size_t  len;

    len = ngx_strlen(prefix);

    if (len + name->len > NGX_OMNIROUTE_KEY_MAX) {
        return 0;
    }

    ngx_memcpy(ngx_cpymem(buf, prefix, len), name->data, name->len);

    return len + name->len;
}
