
/*
 * Copyright (C) ngx_omniroute authors
 *
 * The zone of the budgets and rate limits (see
 * ngx_omniroute_budget_store.h): a fixed array of slots, so that a
 * reload keeps the zone (same size) and each rule finds its counters
 * and its runtime limits by name.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute_budget_store.h"


static ngx_int_t ngx_omniroute_budget_init_zone(ngx_shm_zone_t *shm_zone,
    void *data);
static void ngx_omniroute_budget_slots(ngx_omniroute_budget_conf_t *bc,
    ngx_omniroute_budget_sh_t *sh);


ngx_int_t
ngx_omniroute_budget_zone(ngx_conf_t *cf, ngx_omniroute_budget_conf_t *bc)
{
    size_t     size;
    ngx_str_t  zone;

    ngx_str_set(&zone, NGX_OMNIROUTE_BUDGET_ZONE);

    size = ngx_align(sizeof(ngx_omniroute_budget_sh_t), ngx_pagesize)
           + 8 * ngx_pagesize;

    bc->shm_zone = ngx_shared_memory_add(cf, &zone, size,
                                         &ngx_http_omniroute_module);
    if (bc->shm_zone == NULL) {
        return NGX_ERROR;
    }

    if (bc->shm_zone->data) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "zone \"%V\" is already used by another module",
                           &zone);
        return NGX_ERROR;
    }

    bc->shm_zone->init = ngx_omniroute_budget_init_zone;
    bc->shm_zone->data = bc;

    return NGX_OK;
}


static ngx_int_t
ngx_omniroute_budget_init_zone(ngx_shm_zone_t *shm_zone, void *data)
{
    ngx_omniroute_budget_conf_t *obc = data;

    ngx_slab_pool_t              *shpool;
    ngx_omniroute_budget_sh_t    *sh;
    ngx_omniroute_budget_conf_t  *bc;

    bc = shm_zone->data;
    shpool = (ngx_slab_pool_t *) shm_zone->shm.addr;

    if (obc) {
        /* a reload: the counters and runtime limits stay, by name */
        sh = obc->sh;

    } else if (shm_zone->shm.exists) {
        sh = shpool->data;

    } else {
        sh = ngx_slab_calloc(shpool, sizeof(ngx_omniroute_budget_sh_t));
        if (sh == NULL) {
            return NGX_ERROR;
        }

        shpool->data = sh;
    }

    bc->sh = sh;
    bc->shpool = shpool;

    ngx_shmtx_lock(&shpool->mutex);
    ngx_omniroute_budget_slots(bc, sh);
    ngx_shmtx_unlock(&shpool->mutex);

    return NGX_OK;
}


/*
 * Each rule gets the slot of its name, or a free one; slots of rules no
 * longer configured are given to new ones when none is free (their
 * counters and runtime limits start over).
 */

static void
ngx_omniroute_budget_slots(ngx_omniroute_budget_conf_t *bc,
    ngx_omniroute_budget_sh_t *sh)
{
    u_char                        used[NGX_OMNIROUTE_BUDGET_SLOTS / 8];
    ngx_uint_t                    i, j;
    ngx_omniroute_budget_rule_t  *rule;
    ngx_omniroute_budget_slot_t  *s;

    ngx_memzero(used, sizeof(used));

    rule = bc->rules.elts;
    s = sh->slots;

    for (i = 0; i < bc->rules.nelts; i++) {
        rule[i].slot = NGX_OMNIROUTE_BUDGET_SLOTS;

        for (j = 0; j < NGX_OMNIROUTE_BUDGET_SLOTS; j++) {
            if (s[j].name[0] != '\0'
                && ngx_strlen(s[j].name) == rule[i].name.len
                && ngx_strncmp(s[j].name, rule[i].name.data,
                               rule[i].name.len) == 0)
            {
                rule[i].slot = j;
                used[j / 8] |= (u_char) (1 << (j % 8));
                break;
            }
        }
    }

    for (i = 0; i < bc->rules.nelts; i++) {
        if (rule[i].slot < NGX_OMNIROUTE_BUDGET_SLOTS) {
            continue;
        }

        for (j = 0; j < NGX_OMNIROUTE_BUDGET_SLOTS; j++) {
            if (s[j].name[0] == '\0' && !ngx_omniroute_bit(used, j)) {
                break;
            }
        }

        if (j == NGX_OMNIROUTE_BUDGET_SLOTS) {
            for (j = 0; j < NGX_OMNIROUTE_BUDGET_SLOTS; j++) {
                if (!ngx_omniroute_bit(used, j)) {
                    break;
                }
            }
        }

        /* at most NGX_OMNIROUTE_BUDGET_SLOTS rules: one is left */

        ngx_memzero(&s[j], sizeof(ngx_omniroute_budget_slot_t));
        ngx_memcpy(s[j].name, rule[i].name.data, rule[i].name.len);

        rule[i].slot = j;
        used[j / 8] |= (u_char) (1 << (j % 8));
    }
}


void
ngx_omniroute_budget_limits(ngx_omniroute_budget_rule_t *rule,
    ngx_omniroute_budget_slot_t *slot, or_budget_conf_t *out)
{
    int  k;

    *out = rule->conf;

    for (k = 0; k < OR_BUDGET_LIMITS; k++) {
        if (slot->runtime_set & (1u << k)) {
            out->limit[k] = slot->runtime.limit[k];
        }
    }
}


ngx_uint_t
ngx_omniroute_budget_rules(ngx_omniroute_budget_conf_t *bc,
    ngx_omniroute_client_key_t *key, ngx_str_t *model,
    ngx_omniroute_budget_rule_t **rules)
{
    ngx_uint_t                    i, n;
    ngx_omniroute_budget_rule_t  *rule;

    rule = bc->rules.elts;

    if (key->index >= bc->rules.nelts) {
        return 0;
    }

    rules[0] = &rule[key->index];
    n = 1;

    if (model == NULL || model->len == 0) {
        return n;
    }

    /* the model rules follow the keys' own */

    for (i = bc->nkeys; i < bc->rules.nelts; i++) {
        if (rule[i].key != key) {
            continue;
        }

        if (or_keys_match_name(&rule[i].model, 1,
                               (const char *) model->data, model->len))
        {
            rules[n++] = &rule[i];
            break;
        }
    }

    return n;
}
