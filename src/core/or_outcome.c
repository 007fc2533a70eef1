/*
 * Copyright (C) ngx_omniroute authors
 *
 * Outcome decisions; see or_outcome.h for the rules.
 */


#include <string.h>

#include "or_outcome.h"
#include "or_breaker.h"
#include "or_classify.h"


#define OR_EVENT_STREAM      "text/event-stream"
#define OR_EVENT_STREAM_LEN  (sizeof(OR_EVENT_STREAM) - 1)


int
or_outcome_status(const or_verdict_t *v, int status, or_transport_e transport)
{
    if (transport != OR_TRANSPORT_OK) {
        status = 0;
    }

    if (v != NULL && v->restated_status) {
        status = v->restated_status;
    }

    return status;
}


or_outcome_writes_t
or_outcome_writes(const or_verdict_t *v, int status, or_transport_e transport,
    const or_lockout_conf_t *lockout_conf, int disable_cooling,
    int egress_bucketed, int has_egress_key)
{
    int                  lockout;
    or_reason_e          reason;
    or_scope_e           rule_scope;
    or_outcome_writes_t  w;

    memset(&w, 0, sizeof(or_outcome_writes_t));
    w.scope = OR_SCOPE_NONE;

    reason = (v != NULL) ? v->reason : OR_REASON_NONE;
    rule_scope = (v != NULL) ? v->scope : OR_SCOPE_NONE;

    /* request_rejected counts per connection and model, never bans */

    if (reason == OR_REASON_REQUEST_REJECTED) {
        w.mask = OR_W_REJECTED;
        w.scope = OR_SCOPE_MODEL;
        return w;
    }

    /* R-TOOL-2: the provider/model backs off requests with as many tools */

    if (reason == OR_REASON_TOOL_LIMIT) {
        w.mask = OR_W_TOOLS;
        return w;
    }

    /* issue 25: a capability refusal is the model's, never the connection's */

    if (reason == OR_REASON_CAPABILITY) {
        w.mask = 0;
        return w;
    }

    /*
     * A failure the (opt-in) model lockout takes is the model's, not the
     * connection's; every other one goes to the connection (R-ML-2).
     */

    /*
     * An honored model scope of a rule (R-ML-2, R-CLASS-3: e.g.
     * agentrouter's "no access to this model") locks that model on the
     * connection even with the opt-in lockout off: it never cools the
     * whole connection.
     */

    lockout = (status != 0 && lockout_conf != NULL
               && (or_lockout_applies(lockout_conf, status, rule_scope)
                   || rule_scope == OR_SCOPE_MODEL
                   || rule_scope == OR_SCOPE_BASE_MODEL
                   || rule_scope == OR_SCOPE_QUOTA_FAMILY));

    if (!lockout && !disable_cooling) {
        w.mask |= OR_W_CONN;

        /* the cooldown result may say skip_breaker (R-CD-5) */
        w.breaker_unless_skip = 1;

        /* R-CLASS-6 preconditions; or_egress_siblings() picks them */
        if (egress_bucketed && has_egress_key
            && reason != OR_REASON_NONE
            && !or_classify_is_terminal(reason))
        {
            w.mask |= OR_W_SIBLINGS;
        }
    }

    if (or_breaker_counts_verdict(v, status, transport)) {
        w.mask |= OR_W_BREAKER;
    }

    if (lockout) {
        w.mask |= OR_W_LOCKOUT;
        w.scope = or_lockout_scope(status, rule_scope);
    }

    return w;
}


unsigned
or_outcome_success_writes(int has_breaker, int has_conn, int has_lockout,
    int has_rejected)
{
    unsigned  mask;

    mask = 0;

    if (has_breaker) {
        mask |= OR_W_BREAKER;
    }

    if (has_conn) {
        mask |= OR_W_CONN;
    }

    if (has_lockout) {
        mask |= OR_W_LOCKOUT;
    }

    if (has_rejected) {
        mask |= OR_W_REJECTED;
    }

    return mask;
}


or_hold_e
or_hold_decide(int status, int is_event_stream, int stream_probe,
    int may_continue)
{
    /* every error is held: its body decides (restatement, fallback) */

    if (status >= 400) {
        return OR_HOLD_ERROR;
    }

    /* a stream that may still fall over waits for its first event */

    if (stream_probe && is_event_stream && may_continue) {
        return OR_HOLD_PROBE;
    }

    return OR_HOLD_COMMIT;
}


int
or_hold_is_event_stream(const char *content_type, size_t len)
{
    size_t         i;
    unsigned char  c;

    if (content_type == NULL || len < OR_EVENT_STREAM_LEN) {
        return 0;
    }

    for (i = 0; i < OR_EVENT_STREAM_LEN; i++) {
        c = (unsigned char) content_type[i];

        if (c >= 'A' && c <= 'Z') {
            c |= 0x20;
        }

        if (c != (unsigned char) OR_EVENT_STREAM[i]) {
            return 0;
        }
    }

    return 1;
}
