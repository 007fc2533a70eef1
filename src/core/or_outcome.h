/*
 * Copyright (C) ngx_omniroute authors
 *
 * Outcome decisions: which shared records an attempt's outcome writes,
 * and with which key scope; whether an attempt's response header is held,
 * probed or committed.  Plain C, no nginx; pure functions.  The glue
 * classifies (or_classify), asks here, then runs the engine's update
 * functions inside store updates.
 *
 * A failure, or_outcome_writes() (first match wins):
 *
 *   verdict / status                  writes               scope
 *   reason request_rejected           OR_W_REJECTED only   model
 *                                     (even with
 *                                     disable_cooling)
 *   reason tool_limit                 OR_W_TOOLS only      -
 *                                     (R-TOOL-2: the
 *                                     provider/model, not
 *                                     the connection)
 *   status != 0 and                   OR_W_LOCKOUT, not    or_lockout_scope
 *   or_lockout_applies(lockout_conf,  the connection       (status,
 *   status, v->scope), or v->scope                         v->scope)
 *   is a model scope (model, base
 *   model, quota family: an honored
 *   rule scope, even with the opt-in
 *   lockout off)
 *   otherwise                         OR_W_CONN unless
 *                                     disable_cooling
 *
 *   and, independently of the above (except request_rejected):
 *   OR_W_SIBLINGS  with OR_W_CONN, on an egress_bucketed provider, when
 *                  the failing connection has an egress key and the
 *                  reason is neither none nor terminal; which siblings
 *                  (a 429 quota/rate verdict, same egress key, not
 *                  disable_cooling) or_egress_siblings() decides
 *   OR_W_BREAKER   or_breaker_counts_verdict(v, status, transport); when
 *                  breaker_unless_skip is set (always with OR_W_CONN),
 *                  only if the failing connection's or_cooldown_fail()
 *                  result has skip_breaker == 0 (R-CD-5; a concurrency
 *                  limit never counts for the breaker anyway)
 *
 *   status is the effective status: or_outcome_status() (the restated
 *   status if any, else the upstream one; 0 for a transport failure).
 *   lockout_conf NULL: the lockout never applies.
 *
 *   Order of the writes (as before): OR_W_REJECTED; else OR_W_CONN, then
 *   OR_W_SIBLINGS (each with or_cooldown_fail() and the same verdict and
 *   status), then OR_W_BREAKER (or_breaker_failure()), then OR_W_LOCKOUT
 *   (or_lockout_fail() with the provider's lockout settings on the key of
 *   scope).  OR_W_REJECTED: or_lockout_fail() with
 *   or_lockout_conf_rejected() on the rejected table's key of
 *   OR_SCOPE_MODEL.
 *
 * A committed success, or_outcome_success_writes(): only the records
 * planning saw (a record created since belongs to a failure after this
 * attempt started, which this success could not clear: it is stale to
 * it); 0 means "write nothing" (a healthy system).  OR_W_BREAKER:
 * or_breaker_success(); OR_W_CONN: or_cooldown_success(); OR_W_LOCKOUT:
 * or_lockout_success() on each of the three lockout keys that exists;
 * OR_W_REJECTED: or_lockout_success() on the rejected key.  Every write
 * touches an existing record only (never creates one).
 *
 * The response header of an attempt, or_hold_decide() (first match wins):
 *
 *   status >= 400                               OR_HOLD_ERROR: held; its
 *                                               body decides (restatement,
 *                                               fallback)
 *   stream_probe on, the response is an event   OR_HOLD_PROBE: held until
 *   stream (or_hold_is_event_stream()) and      its first meaningful event
 *   another attempt is possible (may_continue)  (R-REQ-5)
 *   otherwise (any status below 400)            OR_HOLD_COMMIT
 */

#ifndef _OR_OUTCOME_H_INCLUDED_
#define _OR_OUTCOME_H_INCLUDED_


#include "or_types.h"
#include "or_lockout.h"


#define OR_W_REJECTED   0x01    /* request_rejected table */
#define OR_W_CONN       0x02    /* the connection's cooldown state */
#define OR_W_SIBLINGS   0x04    /* egress siblings' cooldown states */
#define OR_W_BREAKER    0x08    /* the provider's breaker */
#define OR_W_LOCKOUT    0x10    /* model lockout table */
#define OR_W_TOOLS      0x20    /* the tool-limit record (or_pace.h) */


typedef enum {
    OR_HOLD_COMMIT = 0,
    OR_HOLD_ERROR,
    OR_HOLD_PROBE
} or_hold_e;


typedef struct {
    unsigned      mask;                 /* OR_W_* */
    or_scope_e    scope;                /* key scope of OR_W_LOCKOUT or
                                           OR_W_REJECTED, else
                                           OR_SCOPE_NONE */
    int           breaker_unless_skip;  /* OR_W_BREAKER only if the
                                           connection's cooldown result
                                           has skip_breaker == 0 */
} or_outcome_writes_t;


int or_outcome_status(const or_verdict_t *v, int status,
    or_transport_e transport);

or_outcome_writes_t or_outcome_writes(const or_verdict_t *v, int status,
    or_transport_e transport, const or_lockout_conf_t *lockout_conf,
    int disable_cooling, int egress_bucketed, int has_egress_key);

unsigned or_outcome_success_writes(int has_breaker, int has_conn,
    int has_lockout, int has_rejected);

or_hold_e or_hold_decide(int status, int is_event_stream, int stream_probe,
    int may_continue);
int or_hold_is_event_stream(const char *content_type, size_t len);


#endif /* _OR_OUTCOME_H_INCLUDED_ */
