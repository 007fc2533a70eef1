/*
 * Copyright (C) ngx_omniroute authors
 *
 * Error classification (R-CLASS-2..6): one failed attempt in, one
 * or_verdict_t out.  Plain data only: no allocation, no locks, no logging;
 * rules are config-time arrays owned by the caller.
 *
 * Order of the pipeline (or_classify()):
 *
 *   1. transport outcome (connect error / reset -> transport, timeout ->
 *      timeout; both count for the breaker and fall over);
 *   2. restatement (R-CLASS-1): operator rules, then built-in ones; the
 *      restated status is what every later step sees;
 *   3. a status below 400 is a success (reason none);
 *   4. upstream retry hint (or_retry_best) -> hint_ms;
 *   5. terminal text detectors (banned / credits exhausted / expired token),
 *      which take precedence over rules for their specific phrases;
 *   6. operator rules, first match wins (status and/or substring, AND);
 *   7. built-in catalog rules of the provider, first match wins (body text
 *      visible only for full-text-allowlisted providers);
 *   8. generic classification by status and body (quota, concurrency
 *      limit, context overflow, ...);
 *   9. the per-provider catch-all default, for 402/403/408/429/5xx when no
 *      rule matched in 6-7 (not for a concurrency-limit 429, R-CD-5);
 *  10. egress-bucketed providers: a 429 quota/rate verdict without a rule
 *      scope gets connection scope (R-CLASS-6).
 *
 * Verdict fields:
 *   cooldown_ms  explicit rule cooldown (exact); catch-all max(default,
 *                hint); concurrency limit 1 s or the hint; generic quota
 *                text 1 h or the hint; otherwise OR_MSEC_NONE: the
 *                cooldown chain decides (R-CD-3: hint first).  Always
 *                OR_MSEC_NONE for terminal reasons.
 *   scope        an honored rule/default scope, or OR_SCOPE_NONE: default
 *                handling (connection cooldown; model lockout derives its
 *                scope from the status, R-ML-2).
 *   rule_id      the classification rule that matched ("catch-all" for
 *                the default), else the restatement rule, else NULL.
 *   restated_status / retry_after_s  from restatement, else 0 / -1.
 *
 * Reasons and fall-over (decisions where the spec is silent):
 *
 *   400  tool-count markers -> tool_limit (fall over: another target
 *        may accept them; also 413/422); context markers ->
 *        context_overflow (no fall-over: the next target would fail the
 *        same); API-key markers -> auth_error;
 *        model-not-found markers -> not_found; capability markers
 *        (issue 25: "assistant message prefill is not supported",
 *        "model does not support", "... is not supported with this
 *        model", "Unsupported parameter", "is not enabled for models/",
 *        OpenRouter's "No endpoints found that support ...", also on a
 *        404) -> capability (fall over, no breaker, no cooldown, nothing
 *        recorded for the connection); else bad_request (no fall-over)
 *   401  auth_error; "token has expired"... -> expired
 *   402  credits_exhausted (terminal)
 *   403  "Request not allowed" -> request_rejected; quota text ->
 *        quota_exhausted; otherwise auth_error (the key lacks permission:
 *        another connection may have it -> fall over, never a breaker
 *        count)
 *   404  not_found (model-level: fall over)
 *   408  timeout;  504 timeout;  500/502/503 and other 5xx server_error
 *   413/422 context markers -> context_overflow, else bad_request
 *   429  quota text (insufficient_quota...) -> quota_exhausted (hint or
 *        1 h); concurrency text -> concurrency_limited (hint or 1 s);
 *        else rate_limit_exceeded (cooldown chain)
 *   other 4xx bad_request;  a status outside 100..599 server_error
 *
 *   fall_over: every reason except none, bad_request, context_overflow.
 *   counts_for_breaker (R-CB-3): transport failures, and 408/500/502/
 *   503/504 when the reason stayed server_error/timeout (a rule that
 *   re-labels a 503 as quota keeps the breaker out of it).
 */

#ifndef _OR_CLASSIFY_H_INCLUDED_
#define _OR_CLASSIFY_H_INCLUDED_


#include "or_types.h"
#include "or_retry_after.h"
#include "or_restate.h"


#define OR_RULE_MAX_STATUSES           8
#define OR_RULE_MAX_MARKERS            8
#define OR_OPRULES_MAX                 50
#define OR_RULE_MAX_COOLDOWN_MS        ((or_msec_t) 30 * 24 * 3600 * 1000)
#define OR_CATCHALL_MIN_COOLDOWN_MS    ((or_msec_t) 60 * 1000)
#define OR_CATCHALL_MAX_COOLDOWN_MS    OR_RULE_MAX_COOLDOWN_MS
#define OR_CONCURRENCY_COOLDOWN_MS     ((or_msec_t) 1000)
#define OR_QUOTA_COOLDOWN_MS           ((or_msec_t) 3600 * 1000)


/* a header condition of a built-in rule */
typedef enum {
    OR_HDR_NONE = 0,
    OR_HDR_PRESENT,             /* the header exists */
    OR_HDR_EQUALS,              /* trimmed value equals, case-insensitive */
    OR_HDR_ZERO_ITEM            /* "a=0,b=42": some item's value is 0 */
} or_hdr_test_e;


/*
 * A built-in catalog rule.  Conditions are AND-combined; a list matches
 * when any of its entries does; an empty list is no condition.  codes are
 * matched against the structured error (JSON "code"/"type"/"status"
 * string values) and are always visible; text markers are matched against
 * the body and only on full-text-allowlisted providers.
 */
typedef struct {
    const char     *id;
    int             statuses[OR_RULE_MAX_STATUSES];     /* 0 ends */
    const char     *header;                             /* NULL: none */
    or_hdr_test_e   header_test;
    const char     *header_value;                       /* OR_HDR_EQUALS */
    const char     *codes[OR_RULE_MAX_MARKERS];         /* NULL ends */
    const char     *text[OR_RULE_MAX_MARKERS];          /* NULL ends */
    or_reason_e     reason;
    or_scope_e      scope;
    or_msec_t       cooldown_ms;                        /* OR_MSEC_NONE */
    int             cooldown_from_hint;   /* match only with a hint; the
                                             hint is the cooldown */
} or_rule_t;


/*
 * An operator rule (R-CLASS-4): optional status, optional case-insensitive
 * substring of the body (never a regex), AND-combined, at least one set.
 */
typedef struct {
    const char     *id;             /* for logs/metrics; NULL: "operator" */
    int             status;         /* 0: any */
    const char     *match;          /* NULL or empty: any */
    size_t          match_len;
    or_reason_e     reason;         /* OR_REASON_NONE: from the status */
    or_scope_e      scope;          /* OR_SCOPE_NONE: default handling */
    or_msec_t       cooldown_ms;    /* OR_MSEC_NONE: by reason / chain */
} or_oprule_t;


/* the per-provider catch-all default (R-CLASS-4) */
typedef struct {
    or_msec_t       cooldown_ms;    /* OR_MSEC_NONE: no catch-all */
    or_scope_e      scope;          /* OR_SCOPE_NONE: connection */
    or_reason_e     reason;         /* OR_REASON_NONE: from the status */
} or_catchall_t;


/* a built-in provider catalog entry */
typedef struct {
    const char       *name;
    const or_rule_t  *rules;
    size_t            nrules;
    unsigned          full_text:1;        /* text visible to built-in
                                             rules */
    unsigned          honor_scope:1;      /* built-in rule scope honored */
    unsigned          egress_bucketed:1;  /* R-CLASS-6 */
} or_catalog_t;


/* everything the classifier knows about one provider */
typedef struct {
    const or_restate_rule_t  *restate;          /* operator, tried first */
    size_t                    nrestate;
    const or_restate_rule_t  *restate_builtin;
    size_t                    nrestate_builtin;
    const or_rule_t          *rules;            /* built-in catalog */
    size_t                    nrules;
    const or_oprule_t        *oprules;
    size_t                    noprules;
    or_catchall_t             catchall;
    int                       full_text;
    int                       honor_scope;
    int                       egress_bucketed;
} or_class_conf_t;


/* one attempt's outcome; body need not be NUL-terminated */
typedef struct {
    int                 status;     /* ignored unless transport is OK */
    or_transport_e      transport;
    const or_header_t  *headers;
    size_t              nheaders;
    const char         *body;       /* possibly truncated, binary */
    size_t              body_len;
    or_msec_t           now_ms;
} or_response_t;


/* a connection as seen by the egress-bucketed lock (R-CLASS-6) */
typedef struct {
    const char     *key;            /* egress key (proxy / IP); empty: none */
    size_t          key_len;
    int             disable_cooling;
} or_egress_conn_t;


/* the catalog entry for a provider name (case-insensitive), or NULL */
const or_catalog_t *or_catalog_find(const char *name, size_t len);

/* zero conf, then fill catalog rules, flags and built-in restatement of
 * the named provider; no catch-all, no operator rules */
void or_class_conf_init(or_class_conf_t *conf, const char *name,
    size_t len);

/* conf may be NULL (generic classification only) */
void or_classify(const or_class_conf_t *conf, const or_response_t *resp,
    or_verdict_t *v);

/*
 * R-CLASS-6: which siblings to cool with the failing connection.  status
 * is the upstream status given to or_classify(), v its verdict.  Applies
 * only to egress-bucketed providers, to a (restated) 429 classified
 * quota_exhausted or rate_limit_exceeded, and never when the failing
 * connection has disable_cooling or no egress key.  cool[i] is set to 1
 * for each sibling with the same egress key (bytes), not disable_cooling,
 * and not the failing entry itself (by address), else 0.  Returns the
 * count.  The caller cools them with the verdict's (never terminal)
 * reason and must not shorten a longer cooldown or touch a terminal
 * state.
 */
size_t or_egress_siblings(const or_class_conf_t *conf, int status,
    const or_verdict_t *v, const or_egress_conn_t *failing,
    const or_egress_conn_t *sibs, size_t n, unsigned char *cool);

/* validation for nginx -t and the admin API: NULL or a static message */
const char *or_oprule_validate(const or_oprule_t *rule);
const char *or_oprules_validate(const or_oprule_t *rules, size_t n,
    size_t *bad);
const char *or_catchall_validate(const or_catchall_t *c);

/* reason / scope names -> enum; OR_REASON_COUNT / OR_SCOPE_COUNT if
 * unknown */
or_reason_e or_classify_reason_parse(const char *s, size_t len);
or_scope_e or_classify_scope_parse(const char *s, size_t len);

int or_classify_falls_over(or_reason_e reason);
int or_classify_is_terminal(or_reason_e reason);

/*
 * Markers and rules match the JSON-decoded text: before classification
 * (and restatement) a body with \uXXXX escapes is matched in a copy
 * where they are decoded (bounded: the first OR_CLASSIFY_DECODE_MAX
 * bytes).  or_classify_unescape() writes that copy: \uXXXX (surrogate
 * pairs combined) becomes UTF-8, except code points below 0x20 and the
 * JSON-structural '"' and '\\', which stay escaped; nothing else
 * changes.  Returns the length written (never more than len, at most
 * size).
 */
#define OR_CLASSIFY_DECODE_MAX  16384

size_t or_classify_unescape(const char *in, size_t len, char *out,
    size_t size);

/* quota text (the generic quota markers) in body, escapes decoded */
int or_classify_quota_text(const char *body, size_t len);

/*
 * R-TOOL-1: a 400/413/422 whose text says the request has too many tools
 * ("Invalid 'tools': array too long", "At most 512 function declarations
 * can be specified", "maximum number of tools", "too many tools",
 * "number of tools exceeds", "... tools in your request"), escapes
 * decoded.  or_classify() gives such an answer reason tool_limit (falls
 * over, never a breaker count; it is checked before the context markers
 * and after operator and catalog rules).
 */
int or_classify_tool_limit(int status, const char *body, size_t len);

/*
 * A stream the gateway gave up on (R-STREAM-2/3, R-CD-8): content stall,
 * output too slow, no first content in time: reason stream_stall, falls
 * over, never counts for the breaker, no explicit cooldown (the cooldown
 * engine records it without a cooldown unless stream_stall_cooldown).
 */
void or_classify_stream_stall(or_verdict_t *v);


#endif /* _OR_CLASSIFY_H_INCLUDED_ */
