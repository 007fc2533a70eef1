
/*
 * Copyright (C) ngx_omniroute authors
 *
 * Per-key budgets and rate limits (R-BUDGET-1..4): the rules
 * (omniroute_client_key_limit, conf/ngx_omniroute_budget_conf.c), and
 * their counters in the zone "omniroute_budget", shared by the workers
 * under the zone's mutex (store/ngx_omniroute_budget_store.c).  Every
 * client key has a rule of its own (its limits may be none: its usage is
 * still counted); a rule with model= adds limits for the key and the
 * models the pattern matches.  A slot is found by the rule's name ("ID"
 * or "ID model=PATTERN") and kept across reloads; limits set at runtime
 * (admin API) live in the slot and take precedence over nginx.conf.
 */


#ifndef _NGX_OMNIROUTE_BUDGET_STORE_H_INCLUDED_
#define _NGX_OMNIROUTE_BUDGET_STORE_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute_keys.h"
#include "or_budget.h"


#define NGX_OMNIROUTE_BUDGET_ZONE      "omniroute_budget"
#define NGX_OMNIROUTE_BUDGET_SLOTS     4096     /* rules, and the slots */
#define NGX_OMNIROUTE_BUDGET_MODEL_MAX 128      /* a rule's model pattern */
#define NGX_OMNIROUTE_BUDGET_NAME_MAX  (OR_KEYS_ID_MAX + 8 \
                                        + NGX_OMNIROUTE_BUDGET_MODEL_MAX)
#define NGX_OMNIROUTE_BUDGET_ESTIMATE  4096     /* output tokens reserved
                                                   when a body has no cap */


typedef struct {
    ngx_str_t                     name;         /* "ID" or "ID model=P" */
    ngx_str_t                     key_id;
    ngx_omniroute_client_key_t   *key;          /* resolved at init */
    or_keys_str_t                 model;        /* len 0: the key's rule */
    or_budget_conf_t              conf;         /* nginx.conf's */
    uint64_t                      estimate;     /* output_estimate= */
    ngx_uint_t                    slot;
    ngx_str_t                     file;
    ngx_uint_t                    line;
} ngx_omniroute_budget_rule_t;


typedef struct {
    u_char                        name[NGX_OMNIROUTE_BUDGET_NAME_MAX + 1];
                                                /* "": free */
    or_budget_t                   state;
    or_budget_conf_t              runtime;      /* admin API's */
    uint32_t                      runtime_set;  /* bit k: runtime limit k
                                                   (0 in runtime: none) */
    uint64_t                      admitted;
    uint64_t                      refused[OR_BUDGET_LIMITS];
    uint64_t                      tokens[2];    /* settled, input and
                                                   output, since start */
} ngx_omniroute_budget_slot_t;


typedef struct {
    ngx_omniroute_budget_slot_t   slots[NGX_OMNIROUTE_BUDGET_SLOTS];
} ngx_omniroute_budget_sh_t;


typedef struct ngx_omniroute_budget_conf_s {
    ngx_array_t                   rules;        /* ngx_omniroute_budget_rule_t;
                                                   each key's first */
    ngx_uint_t                    nkeys;        /* model rules from here */
    ngx_uint_t                    nodes;        /* ..._limit_nodes: a
                                                   node's share while
                                                   Redis is down */
    ngx_shm_zone_t               *shm_zone;
    ngx_omniroute_budget_sh_t    *sh;
    ngx_slab_pool_t              *shpool;
} ngx_omniroute_budget_conf_t;


/* omniroute_client_key_limit (conf/ngx_omniroute_budget_conf.c) */
char *ngx_omniroute_client_key_limit(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);

/* omniroute_client_key_limit_nodes N */
char *ngx_omniroute_client_key_limit_nodes(ngx_conf_t *cf,
    ngx_command_t *cmd, void *conf);

/* after ngx_omniroute_keys_init() (conf.c): the rules resolved, the zone */
ngx_int_t ngx_omniroute_budget_init(ngx_conf_t *cf,
    ngx_omniroute_main_conf_t *omcf);

/* the budget configuration, or NULL (no client keys) */
ngx_omniroute_budget_conf_t *ngx_omniroute_budget_conf(
    ngx_omniroute_main_conf_t *omcf);

/* the zone (store/ngx_omniroute_budget_store.c) */
ngx_int_t ngx_omniroute_budget_zone(ngx_conf_t *cf,
    ngx_omniroute_budget_conf_t *bc);

/* the limits in force of a rule: nginx.conf's, then runtime's */
void ngx_omniroute_budget_limits(ngx_omniroute_budget_rule_t *rule,
    ngx_omniroute_budget_slot_t *slot, or_budget_conf_t *out);

/* the rules of a key and a model: its own, and the first model rule */
ngx_uint_t ngx_omniroute_budget_rules(ngx_omniroute_budget_conf_t *bc,
    ngx_omniroute_client_key_t *key, ngx_str_t *model,
    ngx_omniroute_budget_rule_t **rules);

#define ngx_omniroute_budget_lock(bc)    ngx_shmtx_lock(&(bc)->shpool->mutex)
#define ngx_omniroute_budget_unlock(bc)  ngx_shmtx_unlock(&(bc)->shpool->mutex)

#define ngx_omniroute_budget_slot(bc, rule)  (&(bc)->sh->slots[(rule)->slot])


#endif /* _NGX_OMNIROUTE_BUDGET_STORE_H_INCLUDED_ */
