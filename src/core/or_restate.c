/*
 * Copyright (C) ngx_omniroute authors
 *
 * Upstream status restatement (R-CLASS-1).  See or_restate.h.
 */


#include <string.h>

#include "or_retry_after.h"
#include "or_restate.h"


#define OR_RESTATE_MAX_RETRY_AFTER_S  (30 * 24 * 60 * 60)


static int or_restate_status_in(const int *statuses, size_t max, int status);
static const char *or_restate_markers_validate(const char *const *markers,
    size_t max);


/*
 * agentrouter.org reports a temporary quota exhaustion as 403
 * (sometimes 400) with "用户额度不足" / "额度不足".
 * "无权访问模型" (no access to the model) is permanent and never
 * restated.
 */
static const or_restate_rule_t  or_restate_agentrouter[] = {
    {
        "agentrouter-quota",
        { 400, 403, 0 },
        429,
        { "用户额度不足", "额度不足", NULL },
        { "无权访问模型", NULL },
        60
    }
};


typedef struct {
    const char               *provider;
    const or_restate_rule_t  *rules;
    size_t                    n;
} or_restate_builtin_t;


static const or_restate_builtin_t  or_restate_builtins[] = {
    { "agentrouter", or_restate_agentrouter,
      sizeof(or_restate_agentrouter) / sizeof(or_restate_agentrouter[0]) },
    { NULL, NULL, 0 }
};


static int
or_restate_status_in(const int *statuses, size_t max, int status)
{
    size_t  i;

    for (i = 0; i < max && statuses[i] != 0; i++) {
        if (statuses[i] == status) {
            return 1;
        }
    }

    return 0;
}


int
or_markers_any(const char *const *markers, size_t max, const char *text,
    size_t len)
{
    size_t  i, mlen;

    if (markers == NULL || text == NULL) {
        return 0;
    }

    for (i = 0; i < max && markers[i] != NULL; i++) {
        mlen = strlen(markers[i]);

        if (mlen != 0 && or_memcasemem(text, len, markers[i], mlen) != NULL) {
            return 1;
        }
    }

    return 0;
}


int
or_restate_apply(const or_restate_rule_t *rules, size_t n, int status,
    const char *body, size_t len, or_restate_t *out)
{
    size_t                    i;
    const or_restate_rule_t  *r;

    out->status = status;
    out->retry_after_s = -1;
    out->rule_id = NULL;

    if (rules == NULL) {
        return 0;
    }

    if (body == NULL) {
        len = 0;
    }

    for (i = 0; i < n; i++) {
        r = &rules[i];

        if (!or_restate_status_in(r->from_statuses, OR_RESTATE_MAX_STATUSES,
                                  status))
        {
            continue;
        }

        if (or_markers_any(r->exclude_markers, OR_RESTATE_MAX_MARKERS,
                           body, len))
        {
            continue;
        }

        if (r->text_markers[0] != NULL
            && !or_markers_any(r->text_markers, OR_RESTATE_MAX_MARKERS,
                               body, len))
        {
            continue;
        }

        out->status = r->to_status;
        out->retry_after_s = r->retry_after_s;
        out->rule_id = r->id;

        return 1;
    }

    return 0;
}


const or_restate_rule_t *
or_restate_builtin(const char *provider, size_t len, size_t *n)
{
    size_t  i;

    *n = 0;

    if (provider == NULL) {
        return NULL;
    }

    for (i = 0; or_restate_builtins[i].provider != NULL; i++) {
        if (strlen(or_restate_builtins[i].provider) == len
            && or_memcasemem(provider, len, or_restate_builtins[i].provider,
                             len) == provider)
        {
            *n = or_restate_builtins[i].n;
            return or_restate_builtins[i].rules;
        }
    }

    return NULL;
}


static const char *
or_restate_markers_validate(const char *const *markers, size_t max)
{
    size_t  i, len;

    for (i = 0; i < max && markers[i] != NULL; i++) {
        len = strlen(markers[i]);

        if (len == 0) {
            return "empty marker";
        }

        if (len > OR_MARKER_MAX_LEN) {
            return "marker is longer than 256 bytes";
        }
    }

    return NULL;
}


const char *
or_restate_rule_validate(const or_restate_rule_t *rule)
{
    size_t       i;
    const char  *err;

    if (rule->id == NULL || rule->id[0] == '\0') {
        return "restatement rule needs an id";
    }

    if (rule->from_statuses[0] == 0) {
        return "restatement rule needs at least one \"from\" status";
    }

    for (i = 0; i < OR_RESTATE_MAX_STATUSES && rule->from_statuses[i] != 0;
         i++)
    {
        if (rule->from_statuses[i] < 100 || rule->from_statuses[i] > 599) {
            return "\"from\" status must be between 100 and 599";
        }
    }

    if (rule->to_status < 100 || rule->to_status > 599) {
        return "\"to\" status must be between 100 and 599";
    }

    if (rule->retry_after_s < -1
        || rule->retry_after_s > OR_RESTATE_MAX_RETRY_AFTER_S)
    {
        return "retry_after must be between 0 and 30 days";
    }

    err = or_restate_markers_validate(rule->text_markers,
                                      OR_RESTATE_MAX_MARKERS);
    if (err != NULL) {
        return err;
    }

    return or_restate_markers_validate(rule->exclude_markers,
                                       OR_RESTATE_MAX_MARKERS);
}
