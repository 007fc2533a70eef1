/*
 * Copyright (C) ngx_omniroute authors
 *
 * Provider circuit breaker (SPEC R-CB-1 .. R-CB-6), plain C, no nginx.
 *
 * The state (or_breaker_t) is a fixed-size POD without pointers: it lives
 * in the shared-memory zone and is mirrored to Redis as is.  Every
 * function is pure: it takes the settings, a copy of the state, the event
 * and "now" (milliseconds) and updates that copy.  Nothing locks,
 * allocates or logs; the caller holds the zone lock around "copy, call,
 * write back".
 *
 * States (R-CB-1): CLOSED, DEGRADED, OPEN, HALF_OPEN.
 *
 *   CLOSED/DEGRADED --failures >= open_threshold--> OPEN
 *   CLOSED --failures >= degrade_threshold--> DEGRADED
 *   OPEN --read after open_until (lazy, R-CB-4)--> HALF_OPEN (a result's
 *          "stored" tells an update that it wrote this change: the
 *          place to count it once)
 *   HALF_OPEN --admit--> one probe in flight until probe_until
 *   HALF_OPEN --probe success--> CLOSED
 *   HALF_OPEN --probe failure--> OPEN, hold = reset * 2^cycles, at most
 *                                reset * max_backoff_multiplier
 *   DEGRADED --recovery_successes successes since the last failure (or
 *              the failure count back at 0), admin reset, or a quiet
 *              period (R-CB-5)--> CLOSED
 *
 * Failure counting: every provider-level failure (R-CB-3) adds one; every
 * success while CLOSED or DEGRADED removes one (gradual recovery), so the
 * count tracks failures in excess of successes.  A quiet period of
 * or_breaker_quiet_ms() without any new failure forgets the count and
 * steps a stale DEGRADED back to CLOSED on the next read.
 *
 * Attempt start times: failures and successes carry the start time of the
 * attempt.  While OPEN/HALF_OPEN, an outcome of an attempt that started
 * before the breaker opened is stale (it was in flight when the breaker
 * tripped) and is ignored: it neither re-opens nor closes the breaker.
 *
 * Merge rule (R-CLUSTER-2), or_breaker_merge(): the state is a
 * join-semilattice, so merging is commutative, associative and idempotent
 * and duplicate or reordered deliveries converge:
 *   - "epoch" counts returns to CLOSED (probe success, DEGRADED recovery,
 *     quiet period, admin reset); the higher epoch wins the main fields
 *     wholesale.
 *   - within one epoch the state only moves "up": (open_cycles, state) is
 *     compared as a pair (CLOSED < DEGRADED < OPEN < HALF_OPEN), and
 *     failures, opened_at, open_until, probe_until take the maximum
 *     (later expiry wins; counters never add up twice);
 *     (last_failure_at, last_reason) as a pair.
 *   - the window-gate ring has its own gate_epoch (bumped when a success
 *     or a trip clears it); within one gate epoch the rings are united
 *     (distinct timestamps, newest OR_BREAKER_RING kept) and gate_until
 *     takes the maximum.
 *   Known, deliberate loss: the per-success decrement of "failures" and
 *   the success streak are not monotone, so a merge with a stale copy keeps
 *   the larger failure count (conservative: it can only trip sooner).
 *
 * Idle records (a store that returns to empty): both predicates look at
 * the state as the next read sees it (a copy normalized at now; conf NULL:
 * the stored state as is) and never change the record.
 *   or_breaker_settled(): 1 when the record decides nothing an absent
 *     (all zero) record would not: state CLOSED, failures 0, open_cycles 0
 *     (the next OPEN hold starts at the reset timeout), no failure time in
 *     the window-gate ring, gate_until <= now (checked even while the gate
 *     is off: the setting can be turned on at run time).  In CLOSED,
 *     opened_at, open_until and probe_until are rewritten by the next
 *     trip, and last_failure_at, last_reason and successes are only
 *     diagnostics (the quiet period reads them only with failures or
 *     DEGRADED): they do not count.  A record that is OPEN or HALF_OPEN,
 *     DEGRADED (unless its quiet period is over) or CLOSED with failures
 *     is never settled.
 *   or_breaker_idle(): settled, and epoch and gate_epoch are 0 as well.
 *     A settled record with an epoch is a tombstone for the cluster
 *     merge: it beats stale copies of an older epoch (an OPEN state that
 *     a success closed).  Deleting it loses nothing on this node; with a
 *     mirror, a stale copy arriving later would resurrect there.
 *   So: after a success, idle -> delete; settled but not idle -> delete
 *   on a node-local table, keep a while (publish, then expire) on a
 *   mirrored one.
 *
 * Validation (or_breaker_valid(), see or_types.h): a state from another
 * node is accepted when its size is sizeof(or_breaker_t), state and
 * last_reason are in range, ring_len <= OR_BREAKER_RING with the ring
 * strictly decreasing, positive and zero beyond ring_len, reserved bytes
 * 0, failures and epochs <= OR_VALID_COUNT_MAX, event times
 * (last_failure_at, opened_at, ring) in [0, now + OR_VALID_SKEW_MS] and
 * expiries (open_until, probe_until, gate_until) at most
 * OR_BREAKER_HOLD_MAX_MS beyond that.  Merges never read past the ring
 * whatever ring_len holds.
 *
 * Defaults (R-CB-2, R-CB-6), per provider kind:
 *
 *   kind    degrade  open  reset  gate: failures / window / cooldown
 *   oauth      5       8    60 s        10 / 15 min / 5 min
 *   apikey     7      12    30 s        15 / 30 min / 10 min
 *   local      1       2    15 s         2 /  5 min / 1 min
 *
 * Defaults chosen here where the spec is silent:
 *   max_backoff_multiplier 16 (OPEN hold never exceeds 16 x reset), and
 *   no hold, probe or gate cooldown longer than OR_BREAKER_HOLD_MAX_MS
 *   (365 days) whatever the settings multiply to,
 *   recovery_successes 3, probe_timeout_ms = reset_ms (a lost probe blocks
 *   the provider at most one reset timeout), gate off.
 *   A degrade threshold left unset while the open threshold is set is
 *   derived as round(0.6 x open), at least 1 (gives 5/7/1 for 8/12/2).
 */

#ifndef _OR_BREAKER_H_INCLUDED_
#define _OR_BREAKER_H_INCLUDED_


#include "or_types.h"


#ifndef OR_UNSET
#define OR_UNSET                  (-1)   /* "not configured" for ints */
#endif

#define OR_BREAKER_RING           32     /* window gate: failure times kept */
#define OR_BREAKER_MAX_MULT       1024   /* upper bound of the setting */

#define OR_BREAKER_DEF_MULT       16

/* the longest OPEN hold, probe or gate cooldown: 365 days */
#define OR_BREAKER_HOLD_MAX_MS    ((or_msec_t) 365 * 86400 * 1000)
#define OR_BREAKER_DEF_RECOVERY   3


typedef enum {
    OR_CB_CLOSED = 0,
    OR_CB_DEGRADED,
    OR_CB_OPEN,
    OR_CB_HALF_OPEN
} or_cb_state_e;


typedef enum {
    OR_CB_DENY = 0,             /* OPEN, probe in flight, or gate active */
    OR_CB_ALLOW,                /* CLOSED or DEGRADED */
    OR_CB_PROBE                 /* HALF_OPEN: this request is the probe */
} or_cb_admit_e;


/* settings; OR_UNSET / OR_MSEC_NONE fields get the kind's default */
typedef struct {
    int32_t      degrade_threshold;
    int32_t      open_threshold;
    or_msec_t    reset_ms;
    int32_t      max_backoff_multiplier;
    int32_t      recovery_successes;
    or_msec_t    probe_timeout_ms;
    or_msec_t    cooldown_by_reason[OR_REASON_COUNT];   /* OPEN hold
                                           override per failure kind */
    int32_t      gate_enabled;              /* R-CB-6, off by default */
    int32_t      gate_threshold;
    or_msec_t    gate_window_ms;
    or_msec_t    gate_cooldown_ms;
} or_breaker_conf_t;


/* shared state of one provider; all zero is a fresh CLOSED breaker */
typedef struct {
    uint32_t     epoch;
    uint32_t     gate_epoch;
    or_msec_t    last_failure_at;
    or_msec_t    opened_at;
    or_msec_t    open_until;
    or_msec_t    probe_until;       /* HALF_OPEN probe in flight until */
    or_msec_t    gate_until;        /* window gate cooldown until */
    or_msec_t    ring[OR_BREAKER_RING];   /* failure times, newest first */
    uint32_t     failures;
    uint16_t     open_cycles;       /* re-opens within this epoch */
    uint16_t     successes;         /* streak since the last failure */
    uint8_t      state;             /* or_cb_state_e */
    uint8_t      last_reason;       /* or_reason_e of the last failure */
    uint8_t      ring_len;
    uint8_t      reserved0;
    uint32_t     reserved1;
} or_breaker_t;


typedef struct {
    or_cb_state_e  stored;          /* as stored: differs from "from" when
                                       time moved it (OPEN -> HALF_OPEN
                                       after open_until, DEGRADED ->
                                       CLOSED after the quiet period) */
    or_cb_state_e  from;
    or_cb_state_e  to;
    int            counted;         /* the event changed the counters */
    int            gate_tripped;
    int            changed;         /* state differs: write and publish */
} or_breaker_result_t;


void or_breaker_conf_init(or_breaker_conf_t *conf);
void or_breaker_conf_fill(or_breaker_conf_t *conf, or_kind_e kind);
const char *or_breaker_conf_check(const or_breaker_conf_t *conf);

int or_breaker_counts(int status, or_transport_e transport);
int or_breaker_counts_verdict(const or_verdict_t *v, int status,
    or_transport_e transport);

void or_breaker_normalize(const or_breaker_conf_t *conf, or_breaker_t *cb,
    or_msec_t now);
or_cb_state_e or_breaker_state(const or_breaker_conf_t *conf,
    const or_breaker_t *cb, or_msec_t now);
int or_breaker_eligible(const or_breaker_conf_t *conf, const or_breaker_t *cb,
    or_msec_t now);
or_cb_admit_e or_breaker_admit(const or_breaker_conf_t *conf,
    or_breaker_t *cb, or_msec_t now, or_msec_t *retry_after);
or_msec_t or_breaker_retry_after(const or_breaker_conf_t *conf,
    const or_breaker_t *cb, or_msec_t now);

void or_breaker_failure(const or_breaker_conf_t *conf, or_breaker_t *cb,
    or_reason_e reason, or_msec_t start, or_msec_t now,
    or_breaker_result_t *res);
void or_breaker_success(const or_breaker_conf_t *conf, or_breaker_t *cb,
    or_msec_t start, or_msec_t now, or_breaker_result_t *res);
int or_breaker_reset(or_breaker_t *cb);

or_msec_t or_breaker_hold_ms(const or_breaker_conf_t *conf,
    const or_breaker_t *cb, unsigned cycles);
or_msec_t or_breaker_quiet_ms(const or_breaker_conf_t *conf,
    const or_breaker_t *cb);

int or_breaker_settled(const or_breaker_conf_t *conf,
    const or_breaker_t *cb, or_msec_t now);
int or_breaker_idle(const or_breaker_conf_t *conf, const or_breaker_t *cb,
    or_msec_t now);

const char *or_breaker_valid(const void *value, size_t size, or_msec_t now);
int or_breaker_merge(or_breaker_t *dst, const or_breaker_t *src);
int or_breaker_equal(const or_breaker_t *a, const or_breaker_t *b);
const char *or_breaker_state_name(or_cb_state_e state);


#endif /* _OR_BREAKER_H_INCLUDED_ */
