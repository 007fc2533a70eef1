
/*
 * Copyright (C) ngx_omniroute authors
 *
 * Resilience settings of a provider and their precedence (R-CONF-5):
 * built-in default < environment variable < nginx.conf directive < value
 * persisted at runtime through the admin API.
 */


#ifndef _NGX_OMNIROUTE_SETTINGS_H_INCLUDED_
#define _NGX_OMNIROUTE_SETTINGS_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>

#include "or_breaker.h"
#include "or_cooldown.h"
#include "or_lockout.h"


typedef struct {
    or_breaker_conf_t             breaker;
    or_cooldown_conf_t            cooldown;
    or_lockout_conf_t             lockout;
} ngx_omniroute_settings_t;


/* fields still unset take the environment's value (read at startup) */
void ngx_omniroute_settings_env(or_kind_e kind, ngx_omniroute_settings_t *s);

/* unset fields get the kind's defaults; NULL or an error message */
const char *ngx_omniroute_settings_fill(or_kind_e kind,
    ngx_omniroute_settings_t *s);

/*
 * The settings in force for a provider: its configured settings with the
 * runtime overrides applied.
 */
struct ngx_omniroute_main_conf_s;
struct ngx_omniroute_provider_s;

void ngx_omniroute_settings_effective(struct ngx_omniroute_main_conf_s *omcf,
    struct ngx_omniroute_provider_s *p, ngx_omniroute_settings_t *out);


#endif /* _NGX_OMNIROUTE_SETTINGS_H_INCLUDED_ */
