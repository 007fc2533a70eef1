/*
 * Copyright (C) ngx_omniroute authors
 *
 * Model lockout (SPEC R-ML-1 .. R-ML-4), plain C, no nginx; fixed-size
 * POD state; pure functions of (settings, state copy, event, now in ms).
 *
 * One or_lockout_t per key "provider:connection:<scope>:<name>" built by
 * or_lockout_key():
 *
 *   scope          key                                  from (R-ML-2)
 *   exact model    prov:conn:exact:<model>              other statuses
 *   base model     prov:conn:base:<or_model_base()>     404
 *   quota family   prov:conn:family:<family or model>   429, 403, 402
 *
 * An explicit rule scope (model / base model / quota family) wins over the
 * status: pass verdict.scope as rule_scope (OR_SCOPE_NONE and connection /
 * provider scopes mean "derive from the status").  To plan, check the
 * three keys of (provider, connection, model); the model is locked while
 * any of them is active.
 *
 * Quota family: the per-provider map is a list of {prefix, family}; the
 * longest prefix matching the model (ASCII case-insensitive; a trailing
 * '*' in the prefix is ignored) names the family ("gpt-5" or "gpt-5*"
 * groups every gpt-5... model); family NULL means the prefix itself.  No
 * match: the family is the model name itself.
 *
 * Base model (or_model_base): the model name with version suffixes
 * stripped from the end, repeatedly, never down to an empty name:
 *   ":tag" (llama3:8b, ...-v1:0), "@version" (claude-3-5-sonnet@20240620),
 *   "-latest", "-YYYY-MM-DD" (gpt-4o-2024-08-06), "-YYYYMMDD"
 *   (claude-3-5-sonnet-20241022), a 4-digit "-MMDD" or "-YYMM" (gpt-4-0613,
 *   mistral-large-2411), a 3-digit "-NNN" (gemini-1.5-pro-002) and "-vN" /
 *   "-vN.N" (...-v1).  The base is always a prefix of the name, so the
 *   function returns its length.
 *
 * Cooldown of the n-th failure (R-ML-3, R-ML-4): the verdict's explicit
 * cooldown if any (a built-in rule's, verdict.lockout_capped, at most
 * max), else base x 2^min(n-1, max_backoff_steps) (exponential)
 * or base, capped at max; a longer upstream hint raises it.  A failure
 * later than escalation_window after the previous lockout expired starts
 * over at n = 1.  A success halves the failure count (floor); at 0 the
 * entry is empty (deleted).  Failures of attempts started at or before the
 * last counted failure are absorbed (R-CD-4 applied per model); a success
 * of an attempt started at or before the last counted failure or the last
 * halving is stale (so concurrent successes halve once, and a duplicate
 * success event changes nothing).
 *
 * Merge rule (R-CLUSTER-2), or_lockout_merge(): epoch (bumped by a
 * success decay, an admin re-enable or an escalation restart) - the higher
 * wins wholesale; same epoch: failures, until, mark_at, decay_at take the
 * maximum, (last_failure_at, status, reason, scope) as one tuple.
 * Commutative, associative, idempotent.  The glue must call
 * or_lockout_fail() only when or_lockout_applies() says so.  A deleted entry is an empty state with a
 * higher epoch: publish it (tombstone) before evicting it, so a stale copy
 * elsewhere cannot resurrect the lockout; or_lockout_evictable() says when
 * an entry carries no information any more.
 *
 * Idle records (a store that returns to empty), pure, no change; for
 * the lockout and the request_rejected tables alike:
 *   or_lockout_settled(): 1 when the entry decides nothing an absent (all
 *     zero) one would not: failures 0 (the next failure is n = 1, and a
 *     success has nothing to halve: decay_at no longer matters), until <=
 *     now (not locked), mark_at 0 (no burst whose in-flight failures would
 *     be absorbed at mark_at).  last_failure_at, last_status, reason and
 *     scope are diagnostics and do not count.
 *   or_lockout_idle(): settled, and epoch 0 as well.  The empty entry a
 *     success decay leaves (OR_LO_DELETED) has a new epoch: it is the
 *     tombstone above, settled but not idle.
 *   or_lockout_evictable() is the time-based test (an entry past its
 *   escalation window); for an entry without failures it is until <= now.
 *
 * Validation (or_lockout_valid(), see or_types.h): a state from another
 * node is accepted when its size is sizeof(or_lockout_t), reason and scope
 * are in range, last_status in 0..999, reserved 0, failures and epoch <=
 * OR_VALID_COUNT_MAX, event times (mark_at, last_failure_at, decay_at) in
 * [0, now + OR_VALID_SKEW_MS] and "until" at most OR_LOCKOUT_MAX_MS
 * beyond that.  Time arithmetic saturates, so no input overflows.
 *
 * Defaults (R-ML-3): enabled off, error codes 403 404 429 502 503 504, base
 * 120 s, max 30 min (>= base), max_backoff_steps 10, exponential on.
 * Chosen here: escalation_window = max cooldown (30 min).  The
 * request_rejected profile (R-CD-6, or_lockout_conf_rejected): always on,
 * base 5 min, x2 per rejection, max 1 h, window 1 h.
 */

#ifndef _OR_LOCKOUT_H_INCLUDED_
#define _OR_LOCKOUT_H_INCLUDED_


#include "or_types.h"


#ifndef OR_UNSET
#define OR_UNSET                  (-1)   /* "not configured" for ints */
#endif

#define OR_LOCKOUT_CODES_MAX      16
#define OR_LOCKOUT_MAX_MS         (30LL * 86400 * 1000)     /* 30 days */
#define OR_LOCKOUT_MAX_STEPS      30


typedef enum {
    OR_LO_IGNORED = 0,
    OR_LO_LOCKED,               /* counted failure, lockout set/extended */
    OR_LO_ABSORBED              /* part of an already counted burst */
} or_lo_action_e;


typedef enum {
    OR_LO_KEPT = 0,             /* success changed nothing */
    OR_LO_HALVED,               /* failure count halved, entry stays */
    OR_LO_DELETED               /* count reached 0: entry is empty */
} or_lo_decay_e;


typedef struct {
    const char   *prefix;
    const char   *family;       /* NULL: the prefix names the family */
} or_family_rule_t;


/* settings; OR_UNSET / OR_MSEC_NONE fields get the default */
typedef struct {
    int32_t      enabled;
    int32_t      n_codes;
    int32_t      codes[OR_LOCKOUT_CODES_MAX];
    or_msec_t    base_ms;
    or_msec_t    max_ms;
    int32_t      max_backoff_steps;
    int32_t      exponential;
    or_msec_t    window_ms;         /* escalation window after expiry */
} or_lockout_conf_t;


/* shared state of one lockout key; all zero is "not locked" */
typedef struct {
    uint32_t     epoch;
    uint32_t     failures;
    or_msec_t    until;             /* expires_at */
    or_msec_t    mark_at;           /* last counted failure */
    or_msec_t    last_failure_at;
    or_msec_t    decay_at;          /* last success that halved */
    int16_t      last_status;
    uint8_t      reason;            /* or_reason_e */
    uint8_t      scope;             /* or_scope_e */
    uint32_t     reserved;
} or_lockout_t;


typedef struct {
    or_lo_action_e  action;
    or_msec_t       cooldown_ms;
    or_msec_t       until;
    unsigned        failures;
    int             changed;
} or_lockout_result_t;


void or_lockout_conf_init(or_lockout_conf_t *conf);
void or_lockout_conf_fill(or_lockout_conf_t *conf);
void or_lockout_conf_rejected(or_lockout_conf_t *conf);
const char *or_lockout_conf_check(const or_lockout_conf_t *conf);

int or_lockout_applies(const or_lockout_conf_t *conf, int status,
    or_scope_e rule_scope);
or_scope_e or_lockout_scope(int status, or_scope_e rule_scope);
or_msec_t or_lockout_cooldown_ms(const or_lockout_conf_t *conf,
    unsigned failures);

size_t or_model_base(const char *model, size_t len);
const char *or_model_family(const or_family_rule_t *rules, size_t nrules,
    const char *model, size_t len, size_t *flen);
size_t or_lockout_key(char *buf, size_t size, const char *provider,
    size_t plen, const char *conn, size_t clen, const char *model,
    size_t mlen, or_scope_e scope, const or_family_rule_t *rules,
    size_t nrules);

void or_lockout_fail(const or_lockout_conf_t *conf, or_lockout_t *lo,
    const or_verdict_t *v, int status, or_scope_e scope, or_msec_t start,
    or_msec_t now, or_lockout_result_t *res);
or_lo_decay_e or_lockout_success(or_lockout_t *lo, or_msec_t start,
    or_msec_t now);
int or_lockout_clear(or_lockout_t *lo);

int or_lockout_active(const or_lockout_t *lo, or_msec_t now);
or_msec_t or_lockout_retry_after(const or_lockout_t *lo, or_msec_t now);
int or_lockout_evictable(const or_lockout_conf_t *conf,
    const or_lockout_t *lo, or_msec_t now);

int or_lockout_settled(const or_lockout_t *lo, or_msec_t now);
int or_lockout_idle(const or_lockout_t *lo, or_msec_t now);

const char *or_lockout_valid(const void *value, size_t size, or_msec_t now);
int or_lockout_merge(or_lockout_t *dst, const or_lockout_t *src);
int or_lockout_equal(const or_lockout_t *a, const or_lockout_t *b);


#endif /* _OR_LOCKOUT_H_INCLUDED_ */
