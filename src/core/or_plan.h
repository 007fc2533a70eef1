/*
 * Copyright (C) ngx_omniroute authors
 *
 * Planning decisions (R-REQ-3, R-REQ-6, R-CB-4) over copies of the shared
 * records: why a candidate is excluded and for how long, and what the
 * dispatch of an attempt must check.  Plain C, no nginx; pure functions.
 * The glue reads each record (a short locked copy out of the store),
 * points the view at those copies, calls these functions and acts on the
 * answer.  Nothing here locks, allocates or logs.
 *
 * The view (or_plan_view_t): pointers at the glue's own copies, never at
 * shared memory; NULL means "no record" (none in the store, or not read).
 *
 *   breaker       the provider's breaker (read once per provider)
 *   breaker_conf  the provider's breaker settings; required with breaker
 *                 (a breaker without settings is treated as no record)
 *   conn          the connection's cooldown/terminal state
 *   lockout[i]    the model lockout records of the candidate, indexed by
 *                 or_plan_lockout_index(scope): [0] exact model
 *                 (OR_SCOPE_MODEL), [1] base model (OR_SCOPE_BASE_MODEL),
 *                 [2] quota family (OR_SCOPE_QUOTA_FAMILY); the keys are
 *                 or_lockout_key() of (provider, connection, model, scope)
 *   lockout_enabled  whether the lockout records count; when 0 they are
 *                 ignored (and need not be read).  The glue sets it when
 *                 it found a record: a lockout that exists is in force
 *                 whether or not the provider's opt-in lockout is on (a
 *                 rule's model scope locks even when it is off)
 *   rejected      the request_rejected record of (provider, connection,
 *                 model), key of OR_SCOPE_MODEL, rejected table
 *
 * Exclusion, or_plan_exclusion(): the first rule that matches wins, in
 * this order (the order of the glue before it moved here):
 *
 *   rule                 when                               *retry_ms
 *   circuit_open         breaker record whose                that wait
 *                        or_breaker_retry_after() > 0: OPEN
 *                        before open_until, HALF_OPEN with
 *                        its probe in flight, or an active
 *                        window gate (HALF_OPEN with a free
 *                        probe is eligible: dispatch takes
 *                        the probe)
 *   terminal             conn record in a terminal state     -1
 *   provider_cooldown    conn record with until > now        until - now
 *   model_lockout        lockout_enabled and any of the      the longest
 *                        three lockout records active        remaining
 *                        (until > now)
 *   unavailable          rejected record active              until - now
 *   none                 nothing excludes                    0
 *
 * Which records the glue marks as "seen by planning" (has_breaker,
 * has_conn, has_lockout, has_rejected, for or_outcome_success_writes()):
 * the ones it found in the store, whatever their content; has_lockout
 * only when lockout_enabled (then: any of the three found).  Reading
 * every record of the view before the call is equivalent to today's
 * lazy reads for every candidate that stays eligible (those read them
 * all anyway); an excluded candidate records no outcome.
 *
 * Admission at dispatch (or_plan_admit_reads(), or_plan_admit()):
 *
 *   1. or_plan_admit_reads(first_attempt, had_breaker) says which records
 *      to read again just before the attempt:
 *        first attempt, no breaker record at plan time   nothing
 *        first attempt, a breaker record at plan time    breaker
 *        a fallback (any attempt after the first)        conn, breaker
 *      (planning an instant ago read the connection of a first attempt;
 *      a fallback's connection may have been cooled since, by a sibling's
 *      failure or another worker, and its provider's breaker may have
 *      opened, by this very request).
 *   2. or_plan_admit(view, first_attempt, now) with those copies:
 *        a fallback whose conn is not eligible (terminal or cooling)
 *                                                  OR_ADMIT_DENY_COOLDOWN
 *        no breaker record                         OR_ADMIT_ALLOW
 *        breaker not HALF_OPEN: eligible           OR_ADMIT_ALLOW
 *                               not eligible       OR_ADMIT_DENY_CIRCUIT
 *        breaker HALF_OPEN                         OR_ADMIT_PROBE
 *      A first attempt ignores view->conn.
 *   3. OR_ADMIT_PROBE: the glue takes the single probe on the live record
 *      with or_breaker_admit() inside a store update (zone locked), as
 *      before: OR_CB_DENY -> denied as circuit_open; OR_CB_ALLOW or
 *      OR_CB_PROBE -> admitted.
 *   or_admit_exclusion() names a denial: provider_cooldown or
 *   circuit_open.
 */

#ifndef _OR_PLAN_H_INCLUDED_
#define _OR_PLAN_H_INCLUDED_


#include "or_types.h"
#include "or_breaker.h"
#include "or_cooldown.h"
#include "or_lockout.h"


#define OR_PLAN_LOCKOUTS          3      /* model, base model, family */

/* index of a lockout scope in or_plan_view_t.lockout[], -1 for others */
#define or_plan_lockout_index(scope)                                         \
    (((scope) >= OR_SCOPE_MODEL && (scope) <= OR_SCOPE_QUOTA_FAMILY)         \
     ? (int) (scope) - (int) OR_SCOPE_MODEL : -1)

/* or_plan_admit_reads() */
#define OR_PLAN_READ_CONN         0x01
#define OR_PLAN_READ_BREAKER      0x02


typedef enum {
    OR_EXCL_NONE = 0,
    OR_EXCL_CIRCUIT_OPEN,
    OR_EXCL_PROVIDER_COOLDOWN,
    OR_EXCL_TERMINAL,
    OR_EXCL_MODEL_LOCKOUT,
    OR_EXCL_UNAVAILABLE,
    OR_EXCL_CONCURRENCY,        /* reserved for the glue (queue, caps) */
    OR_EXCL_COUNT
} or_exclusion_e;


typedef enum {
    OR_ADMIT_ALLOW = 0,
    OR_ADMIT_DENY_COOLDOWN,     /* a fallback's connection cooled since */
    OR_ADMIT_DENY_CIRCUIT,      /* the breaker is not eligible */
    OR_ADMIT_PROBE              /* HALF_OPEN: take the probe, locked */
} or_admit_e;


typedef struct {
    const or_breaker_conf_t  *breaker_conf;
    const or_breaker_t       *breaker;
    const or_conn_state_t    *conn;
    const or_lockout_t       *lockout[OR_PLAN_LOCKOUTS];
    const or_lockout_t       *rejected;
    int                       lockout_enabled;
} or_plan_view_t;


const char *or_exclusion_name(or_exclusion_e e);

void or_plan_view_init(or_plan_view_t *v);

or_exclusion_e or_plan_exclusion(const or_plan_view_t *v, or_msec_t now,
    or_msec_t *retry_ms);

unsigned or_plan_admit_reads(int first_attempt, int had_breaker);
or_admit_e or_plan_admit(const or_plan_view_t *v, int first_attempt,
    or_msec_t now);
or_exclusion_e or_admit_exclusion(or_admit_e admit);


#endif /* _OR_PLAN_H_INCLUDED_ */
