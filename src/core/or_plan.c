/*
 * Copyright (C) ngx_omniroute authors
 *
 * Planning decisions; see or_plan.h for the rules.
 */


#include <string.h>

#include "or_plan.h"


static const char  *or_exclusion_names[OR_EXCL_COUNT] = {
    "none",
    "circuit_open",
    "provider_cooldown",
    "terminal",
    "model_lockout",
    "unavailable",
    "concurrency"
};


const char *
or_exclusion_name(or_exclusion_e e)
{
    if ((unsigned) e >= OR_EXCL_COUNT) {
        return "unknown";
    }

    return or_exclusion_names[e];
}


void
or_plan_view_init(or_plan_view_t *v)
{
    memset(v, 0, sizeof(or_plan_view_t));
}


or_exclusion_e
or_plan_exclusion(const or_plan_view_t *v, or_msec_t now,
    or_msec_t *retry_ms)
{
    int             i;
    or_msec_t       retry, r;
    or_exclusion_e  e;

    retry = 0;
    e = OR_EXCL_NONE;

    /* the provider's breaker */

    if (v->breaker != NULL && v->breaker_conf != NULL) {
        retry = or_breaker_retry_after(v->breaker_conf, v->breaker, now);

        if (retry > 0) {
            e = OR_EXCL_CIRCUIT_OPEN;
            goto done;
        }

        retry = 0;
    }

    /* the connection's cooldown or terminal state */

    if (v->conn != NULL && !or_cooldown_eligible(v->conn, now)) {
        retry = or_cooldown_retry_after(v->conn, now);
        e = (retry < 0) ? OR_EXCL_TERMINAL : OR_EXCL_PROVIDER_COOLDOWN;
        goto done;
    }

    /* model lockout (opt-in), scope-aware: any of the three keys */

    if (v->lockout_enabled) {
        for (i = 0; i < OR_PLAN_LOCKOUTS; i++) {
            if (v->lockout[i] == NULL
                || !or_lockout_active(v->lockout[i], now))
            {
                continue;
            }

            r = or_lockout_retry_after(v->lockout[i], now);

            if (r > retry) {
                retry = r;
            }
        }

        if (retry > 0) {
            e = OR_EXCL_MODEL_LOCKOUT;
            goto done;
        }
    }

    /* request_rejected for this connection and model */

    if (v->rejected != NULL && or_lockout_active(v->rejected, now)) {
        retry = or_lockout_retry_after(v->rejected, now);

        if (retry > 0) {
            e = OR_EXCL_UNAVAILABLE;
            goto done;
        }
    }

    retry = 0;

done:

    if (retry_ms != NULL) {
        *retry_ms = retry;
    }

    return e;
}


unsigned
or_plan_admit_reads(int first_attempt, int had_breaker)
{
    if (first_attempt) {
        return had_breaker ? OR_PLAN_READ_BREAKER : 0;
    }

    return OR_PLAN_READ_CONN | OR_PLAN_READ_BREAKER;
}


or_admit_e
or_plan_admit(const or_plan_view_t *v, int first_attempt, or_msec_t now)
{
    if (!first_attempt && v->conn != NULL
        && !or_cooldown_eligible(v->conn, now))
    {
        return OR_ADMIT_DENY_COOLDOWN;
    }

    if (v->breaker == NULL || v->breaker_conf == NULL) {
        return OR_ADMIT_ALLOW;
    }

    /* the breaker may have opened since planning (this very request) */

    if (or_breaker_state(v->breaker_conf, v->breaker, now) != OR_CB_HALF_OPEN)
    {
        return or_breaker_eligible(v->breaker_conf, v->breaker, now)
               ? OR_ADMIT_ALLOW : OR_ADMIT_DENY_CIRCUIT;
    }

    return OR_ADMIT_PROBE;
}


or_exclusion_e
or_admit_exclusion(or_admit_e admit)
{
    switch (admit) {

    case OR_ADMIT_DENY_COOLDOWN:
        return OR_EXCL_PROVIDER_COOLDOWN;

    case OR_ADMIT_DENY_CIRCUIT:
        return OR_EXCL_CIRCUIT_OPEN;

    default:
        return OR_EXCL_NONE;
    }
}
