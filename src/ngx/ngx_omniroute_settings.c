
/*
 * Copyright (C) ngx_omniroute authors
 *
 * Resilience settings and their precedence (see ngx_omniroute_settings.h).
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute.h"


void
ngx_omniroute_settings_env(or_kind_e kind, ngx_omniroute_settings_t *s)
{
    /* environment defaults (R-ENV): not read yet */
}


const char *
ngx_omniroute_settings_fill(or_kind_e kind, ngx_omniroute_settings_t *s)
{
    const char  *err;

    or_breaker_conf_fill(&s->breaker, kind);
    or_cooldown_conf_fill(&s->cooldown, kind);
    or_lockout_conf_fill(&s->lockout);

    err = or_breaker_conf_check(&s->breaker);
    if (err == NULL) {
        err = or_cooldown_conf_check(&s->cooldown);
    }

    if (err == NULL) {
        err = or_lockout_conf_check(&s->lockout);
    }

    return err;
}


void
ngx_omniroute_settings_effective(ngx_omniroute_main_conf_t *omcf,
    ngx_omniroute_provider_t *p, ngx_omniroute_settings_t *out)
{
    /* runtime overrides (admin API): none yet */

    *out = p->settings;
}
