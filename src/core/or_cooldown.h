/*
 * Copyright (C) ngx_omniroute authors
 *
 * Connection cooldown and terminal states (SPEC R-CD-1 .. R-CD-8), with
 * the anti-thundering-herd rule (R-CD-4) and the cluster merge
 * (R-CLUSTER-2).  Plain C, no nginx; fixed-size POD state; pure functions
 * of (settings, state copy, event, now in ms).
 *
 * Which failures reach this module: the glue calls or_cooldown_fail() for
 * every failed attempt whose verdict affects the connection (scope
 * connection, or model/family scope when model lockout is off).  A
 * request_rejected verdict with a known model goes to the model lockout
 * table instead, with or_lockout_conf_rejected() (R-CD-6); without a
 * model it lands here.
 *
 * Cooldown duration of a failure, by verdict reason (first match wins):
 *
 *   banned, credits_exhausted    terminal at once
 *   expired                      terminal on the (expired_retry_max + 1)-th
 *                                expired verdict in a row (3 retries with
 *                                backoff first); before that: backoff
 *   concurrency_limited (R-CD-5) explicit > hint > concurrency_ms (1 s);
 *                                backoff_level unchanged, skip_breaker set,
 *                                not counted as a failure
 *   rate_limit_exceeded (R-CD-3) explicit > upstream hint > per-connection
 *                                override > per-provider retry delay
 *                                (resets backoff_level to 0) > environment
 *                                default > scaled backoff
 *   request_rejected             explicit > rejected_base x 2^(n-1), capped
 *                                at rejected_max (1 h); never bans; level
 *                                unchanged
 *   stream_stall (R-CD-8)        error recorded, no cooldown unless
 *                                stream_stall_cooldown is on (then backoff)
 *   not_found, context_overflow,
 *   bad_request, none            no effect unless the verdict carries an
 *                                explicit cooldown (R-CLASS-5 rules)
 *   anything else                explicit > hint > scaled backoff
 *
 *   "explicit" is verdict.cooldown_ms > 0 (rule or catch-all default,
 *   R-CLASS-4), "hint" is verdict.hint_ms > 0 (a hint of 0 is ignored).
 *   Scaled backoff = base x 2^min(level, max_backoff_steps), capped at
 *   max_ms; a counted failure then raises backoff_level by one (bounded by
 *   max_backoff_steps).  Every cooldown only ever extends
 *   rate_limited_until (never shortens a longer one, R-CLASS-4), and no
 *   transient failure touches a terminal state (R-CD-6).
 *
 * Anti-thundering-herd (R-CD-4): mark_at is the time of the last counted
 * failure.  A failure of an attempt that started at or before mark_at was
 * already in flight when that failure was recorded: it is absorbed: no
 * counter or backoff_level change; the cooldown is raised only to what the
 * absorbed failure would have set when anchored at mark_at with the
 * burst's level (or to now + an upstream hint), so a burst of identical
 * failures extends the cooldown once and raises backoff_level once.
 * Terminal verdicts are never absorbed.  Likewise a success of an attempt
 * that started at or before mark_at is stale and clears nothing.  Applying
 * the same failure event twice is the same as applying it once.
 *
 * Merge rule (R-CLUSTER-2), or_cooldown_merge(): the state is a
 * join-semilattice (merge is commutative, associative, idempotent):
 *   1. reset_epoch (operator reset / credential change) - the higher wins
 *      the whole state.
 *   2. same reset_epoch: the terminal part and the transient part merge
 *      independently, so a terminal state beats any transient one:
 *      - terminal: (terminal rank, terminal_at, terminal_status) as one
 *        tuple, larger wins; rank expired < credits_exhausted < banned.
 *      - transient: clear_epoch (bumped by a success that clears) - the
 *        higher wins the transient part; same clear_epoch: rate_limited
 *        _until, mark_at, failures, backoff_level, expired_retries,
 *        rejected_count each take the maximum (later expiry wins; a burst
 *        counted on two nodes is counted once), and (last_error_at,
 *        last_status, last_reason) as one tuple.
 *   Deliberate approximations: concurrent increments of a counter on two
 *   nodes between two syncs count once; a provider retry delay's reset of
 *   backoff_level to 0 can be undone by a stale copy (max wins); a
 *   failure recorded on one node concurrently with a clearing success on
 *   another is dropped.  Ship states, not events, between nodes.
 *
 * Validation (or_cooldown_valid(), see or_types.h): a state from another
 * node is accepted when its size is sizeof(or_conn_state_t), terminal
 * and last_reason are in range (no terminal time or status without a
 * terminal state), statuses in 0..999, failures and epochs <=
 * OR_VALID_COUNT_MAX, backoff_level <= OR_COOLDOWN_MAX_STEPS,
 * expired_retries <= OR_COOLDOWN_EXPIRED_MAX + 1, event times
 * (terminal_at, mark_at, last_error_at) in [0, now + OR_VALID_SKEW_MS]
 * and "until" at most OR_COOLDOWN_MAX_MS beyond that.
 *
 * Reads: or_cooldown_eligible() / or_cooldown_retry_after() /
 * or_cooldown_view() are pure; an expired cooldown is simply ignored, so
 * nothing needs writing back (lazy recovery, R-CD-7).  A NULL verdict is
 * ignored.
 *
 * Idle records (a store that returns to empty), pure, no change:
 *   or_cooldown_settled(): 1 when the record decides nothing an absent
 *     (all zero) record would not and holds no error to show: no terminal
 *     state; no cooldown left (until <= now); mark_at 0 (no burst whose
 *     in-flight attempts are still absorbed, R-CD-4); failures,
 *     backoff_level, expired_retries and rejected_count 0 (the next
 *     backoff, expired retry and rejected step start from scratch); no
 *     last error (last_error_at 0).  That is the transient part as a
 *     clearing success (or_cooldown_success()) leaves it, with an expired
 *     until also accepted.
 *   or_cooldown_idle(): settled, and reset_epoch and clear_epoch are 0 as
 *     well.  A clearing success always bumps clear_epoch, so a record
 *     cleared by a success is settled but not idle: a tombstone for the
 *     cluster merge (it beats stale copies of the cooldown it cleared).
 *   So: settled after a success -> delete on a node-local table; on a
 *   mirrored one only when idle, else keep a while (publish, then
 *   expire).
 *
 * Defaults chosen here where the spec is silent: local base 1 s,
 * max_backoff_steps 10, request_rejected base 5 min (x2 per rejection,
 * 5/10/20/40/60 min), upstream hints capped at 30 days.
 */

#ifndef _OR_COOLDOWN_H_INCLUDED_
#define _OR_COOLDOWN_H_INCLUDED_


#include "or_types.h"


#ifndef OR_UNSET
#define OR_UNSET                  (-1)   /* "not configured" for ints */
#endif

#define OR_COOLDOWN_MAX_MS        (30LL * 86400 * 1000)     /* 30 days */
#define OR_COOLDOWN_MAX_STEPS     30
#define OR_COOLDOWN_EXPIRED_MAX   1000      /* expired_retry_max bound */
#define OR_COOLDOWN_RETRY_MIN_MS  1000LL                    /* 1 s */
#define OR_COOLDOWN_RETRY_MAX_MS  (21600LL * 1000)          /* 6 h */


typedef enum {
    OR_TERMINAL_NONE = 0,
    OR_TERMINAL_EXPIRED,
    OR_TERMINAL_CREDITS_EXHAUSTED,
    OR_TERMINAL_BANNED
} or_terminal_e;


typedef enum {
    OR_CD_IGNORED = 0,          /* no effect on the connection */
    OR_CD_RECORDED,             /* error recorded, no cooldown */
    OR_CD_COOLDOWN,             /* cooldown set or extended */
    OR_CD_ABSORBED,             /* part of an already counted burst */
    OR_CD_TERMINAL              /* terminal state set */
} or_cd_action_e;


typedef enum {
    OR_CD_SRC_NONE = 0,
    OR_CD_SRC_EXPLICIT,         /* verdict.cooldown_ms */
    OR_CD_SRC_HINT,             /* upstream retry hint */
    OR_CD_SRC_OVERRIDE,         /* per-connection override */
    OR_CD_SRC_PROVIDER,         /* per-provider retry delay */
    OR_CD_SRC_ENV,              /* environment default */
    OR_CD_SRC_BACKOFF,          /* base x 2^level */
    OR_CD_SRC_CONCURRENCY,      /* concurrency_ms */
    OR_CD_SRC_REJECTED          /* request_rejected ladder */
} or_cd_source_e;


typedef enum {
    OR_CONN_ACTIVE = 0,
    OR_CONN_COOLDOWN,
    OR_CONN_TERMINAL
} or_conn_status_e;


/* settings of one connection; OR_UNSET / OR_MSEC_NONE get the default */
typedef struct {
    or_msec_t    base_ms;             /* oauth 5 s, apikey 3 s, local 1 s */
    or_msec_t    max_ms;              /* 30 min */
    int32_t      max_backoff_steps;   /* 10 */
    or_msec_t    override_ms;         /* per-connection rate-limit reset */
    or_msec_t    provider_delay_ms;   /* per-provider, 1 s .. 21600 s */
    or_msec_t    env_default_ms;      /* OMNIROUTE_ROTATION_RATE_LIMIT_
                                         RESET_SECONDS */
    or_msec_t    concurrency_ms;      /* 1 s */
    or_msec_t    hint_max_ms;         /* 30 days */
    int32_t      expired_retry_max;   /* 3 */
    or_msec_t    rejected_base_ms;    /* 5 min */
    or_msec_t    rejected_max_ms;     /* 1 h */
    int32_t      stream_stall_cooldown;   /* off */
} or_cooldown_conf_t;


/* shared state of one connection (R-CD-1); all zero is a healthy one */
typedef struct {
    uint32_t     reset_epoch;         /* operator reset, credential change */
    uint32_t     clear_epoch;         /* success that cleared errors */
    or_msec_t    terminal_at;
    or_msec_t    until;               /* rate_limited_until */
    or_msec_t    mark_at;             /* last counted failure (R-CD-4) */
    or_msec_t    last_error_at;
    uint32_t     failures;            /* counted failures since a clear */
    uint16_t     backoff_level;
    uint16_t     expired_retries;
    uint16_t     rejected_count;
    int16_t      last_status;         /* error_code */
    int16_t      terminal_status;
    uint8_t      terminal;            /* or_terminal_e */
    uint8_t      last_reason;         /* last_error_type, or_reason_e */
} or_conn_state_t;


typedef struct {
    or_cd_action_e   action;
    or_cd_source_e   source;
    or_msec_t        cooldown_ms;     /* duration chosen for this event */
    or_msec_t        until;           /* rate_limited_until afterwards */
    int              skip_breaker;    /* R-CD-5 */
    int              changed;         /* state differs: write and publish */
} or_cooldown_result_t;


typedef struct {
    or_conn_status_e  status;
    const char       *test_status;    /* "active", "unavailable", or the
                                         terminal state's name */
    or_msec_t         retry_after;    /* ms; 0 eligible; -1 terminal */
    or_msec_t         until;          /* 0 when no cooldown is active */
    unsigned          backoff_level;
    unsigned          failures;
    or_terminal_e     terminal;
    or_reason_e       last_reason;
    int               last_status;
    or_msec_t         last_error_at;
} or_cooldown_view_t;


void or_cooldown_conf_init(or_cooldown_conf_t *conf);
void or_cooldown_conf_fill(or_cooldown_conf_t *conf, or_kind_e kind);
const char *or_cooldown_conf_check(const or_cooldown_conf_t *conf);

or_msec_t or_cooldown_backoff_ms(const or_cooldown_conf_t *conf,
    unsigned level);
or_msec_t or_cooldown_rejected_ms(const or_cooldown_conf_t *conf,
    unsigned count);

void or_cooldown_fail(const or_cooldown_conf_t *conf, or_conn_state_t *st,
    const or_verdict_t *v, int status, or_msec_t start, or_msec_t now,
    or_cooldown_result_t *res);
int or_cooldown_success(or_conn_state_t *st, or_msec_t start,
    or_msec_t now);
int or_cooldown_reset(or_conn_state_t *st);

int or_cooldown_eligible(const or_conn_state_t *st, or_msec_t now);
or_msec_t or_cooldown_retry_after(const or_conn_state_t *st, or_msec_t now);
void or_cooldown_view(const or_conn_state_t *st, or_msec_t now,
    or_cooldown_view_t *view);

int or_cooldown_settled(const or_conn_state_t *st, or_msec_t now);
int or_cooldown_idle(const or_conn_state_t *st, or_msec_t now);

const char *or_cooldown_valid(const void *value, size_t size,
    or_msec_t now);
int or_cooldown_merge(or_conn_state_t *dst, const or_conn_state_t *src);
int or_cooldown_equal(const or_conn_state_t *a, const or_conn_state_t *b);

const char *or_terminal_name(or_terminal_e terminal);
or_terminal_e or_terminal_of_reason(or_reason_e reason);


#endif /* _OR_COOLDOWN_H_INCLUDED_ */
