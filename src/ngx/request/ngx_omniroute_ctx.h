
/*
 * Copyright (C) ngx_omniroute authors
 *
 * The request path's shared types and prototypes: the request context
 * (the part every file of src/ngx/request shares; a feature's own state is
 * a struct its file declares), its candidates and attempts, and the
 * functions the files call in one another.  The header of every file of
 * src/ngx/request (and of the module's init), not of request.c alone.
 */


#ifndef _NGX_OMNIROUTE_CTX_H_INCLUDED_
#define _NGX_OMNIROUTE_CTX_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute.h"
#include "ngx_omniroute_keys.h"
#include "or_json.h"
#include "or_splice.h"
#include "or_sse.h"
#include "or_stream.h"
#include "or_wait.h"
#include "or_lease.h"
#include "or_lane.h"


/*
 * The client key of a request and the lease it presents (client_keys.c,
 * lease.c); ctx->auth is NULL when no client key applies.
 */
typedef struct {
    ngx_omniroute_client_key_t   *key;
    ngx_uint_t                    managed;      /* lease headers given */
    u_char                        owner[OR_LEASE_HASH_LEN];
    uint64_t                      generation;
    or_lease_t                    lease;        /* as the check read it */
} ngx_omniroute_auth_t;


/* what a request knows of a provider: each read once per request */
typedef struct ngx_omniroute_provider_state_s
                                  ngx_omniroute_provider_state_t;

struct ngx_omniroute_provider_state_s {
    ngx_omniroute_provider_t     *provider;
    ngx_omniroute_settings_t      settings;     /* in force (runtime) */
    or_breaker_t                  breaker;      /* as planning read it */
    ngx_uint_t                    has_breaker;
    ngx_omniroute_provider_state_t  *next;
};


/*
 * An eligible route of this request: what planning found (the settings in
 * force, which records exist) travels with it to dispatch and outcome.
 */
typedef struct {
    ngx_omniroute_route_t        *route;
    ngx_omniroute_connection_t   *conn;         /* route's, for brevity */
    ngx_omniroute_provider_t     *provider;
    ngx_omniroute_target_t       *target;
    ngx_omniroute_settings_t     *settings;     /* in force (runtime) */
    unsigned                      has_breaker:1;    /* records seen by */
    unsigned                      has_conn:1;       /* planning: only */
    unsigned                      has_lockout:1;    /* these are touched */
    unsigned                      has_rejected:1;   /* on success */
    unsigned                      emergency:1;  /* the emergency target
                                                   (R-EMERG-1) */
} ngx_omniroute_candidate_t;


/*
 * What planning keeps between its steps (plan.c, and plan_memo.c; in the
 * ctx itself: every request plans)
 */
typedef struct {
    ngx_omniroute_provider_state_t
                                 *providers;    /* read so far */
    ngx_uint_t                    scanned;      /* routes planning checked */
    ngx_uint_t                    lazy;         /* routes checked as needed
                                                   (priority order) */
    ngx_uint_t                    excluded;     /* after planning */
    ngx_uint_t                    next;         /* next candidate to try */
    ngx_uint_t                    saw_full;     /* a candidate was at its
                                                   max_concurrent (request.c
                                                   sets it) */
    unsigned                      capped:1;     /* a route has a cap */
    unsigned                      emergency:1;  /* the emergency target
                                                   was planned (R-EMERG-1) */
} ngx_omniroute_plan_req_t;


/*
 * The parts of the ctx that only one file uses, but every request: in
 * the ctx itself (no allocation more), for that file alone.
 */

/* body.c: the edits of every attempt's body, made once it is scanned */
typedef struct {
    or_splice_t                   splice;       /* edits of every attempt's
                                                   body (background) */
    or_splice_usage_e             usage;        /* what a Chat stream asks
                                                   for (ADDED: not usage) */
    ngx_str_t                     sent_model;   /* of quoted_model */
    ngx_str_t                     quoted_model; /* as a JSON string */
} ngx_omniroute_edits_req_t;


/*
 * stream.c: the watch, keep-alives, the client's format, our output
 * buffers (from ngx_omniroute_stream_init())
 */
typedef struct {
    or_sse_t                     *sse;          /* current attempt's */
    ngx_chain_t                  *free;         /* our output buffers */
    ngx_chain_t                  *busy;
    or_watch_t                    watch;        /* current attempt's */
    or_stream_conf_t              conf;         /* in force for it */
    ngx_event_t                   timer;
    or_msec_t                     start;        /* the request's */
    or_msec_t                     keepalive_at; /* next keep-alive due */
    or_sse_format_e               client_format;
    unsigned                      client_stream:1;  /* "stream": true */
    unsigned                      watchdog:1;   /* the global switch */
    unsigned                      globals:1;    /* read */
} ngx_omniroute_stream_req_t;


/*
 * plan_memo.c: what a request's checks write into its model's memo (most
 * requests planned in priority order write it)
 */
typedef struct {
    ngx_uint_t                    building;     /* the checks write the
                                                   model's memo */
    ngx_uint_t                    n;            /* routes written */
    ngx_atomic_uint_t             conn_gen;     /* the tables' at */
    ngx_atomic_uint_t             breaker_gen;  /* the first check */
    ngx_atomic_uint_t             settings_gen;
    or_msec_t                     until;        /* first cooldown end */
} ngx_omniroute_memo_req_t;


/* a route left out by planning or dispatch, for the 503 diagnostics */
typedef struct {
    ngx_omniroute_route_t        *route;
    const char                   *reason;       /* circuit_open, ... */
    or_msec_t                     retry_after;  /* ms; -1: no timer */
    or_wait_kind_e                kind;         /* may be waited out */
} ngx_omniroute_excluded_t;


/* what ended an attempt before its response header */
#define NGX_OMNIROUTE_CUT_NONE        0
#define NGX_OMNIROUTE_CUT_EXECUTION   1     /* execution_max_wait_ms */
#define NGX_OMNIROUTE_CUT_BUDGET      2     /* request.budget_ms */
#define NGX_OMNIROUTE_CUT_FIRST_BYTE  3     /* the provider's first_byte= */

/* ctx->cap_uses is computed; a route was skipped for it */
#define NGX_OMNIROUTE_CAP_KNOWN       0x80000000
#define NGX_OMNIROUTE_CAP_SKIPPED     0x40000000


typedef enum {
    NGX_OMNIROUTE_ATTEMPT_RUNNING = 0,
    NGX_OMNIROUTE_ATTEMPT_COMMITTED,    /* response streamed to the client */
    NGX_OMNIROUTE_ATTEMPT_HELD,         /* error response held, body read */
    NGX_OMNIROUTE_ATTEMPT_PROBING,      /* 200 stream held until its first
                                           event */
    NGX_OMNIROUTE_ATTEMPT_TRANSPORT     /* no response: connect/timeout */
} ngx_omniroute_attempt_state_e;


typedef void (*ngx_omniroute_finalize_pt)(ngx_http_request_t *r,
    ngx_int_t rc);


typedef struct {
    ngx_http_request_t           *sr;
    ngx_omniroute_candidate_t    *cand;
    ngx_omniroute_attempt_state_e state;
    or_msec_t                     start;
    or_msec_t                     cooled_until; /* outcome.c: the
                                                   connection's cooldown
                                                   just recorded, or 0 */
    or_verdict_t                  verdict;
    or_transport_e                transport;
    ngx_uint_t                    status;       /* provider status or 502/504 */
    ngx_buf_t                    *body;         /* held error body */
    ngx_str_t                     event;        /* error event in a 200
                                                   stream, classified */
    ngx_uint_t                    truncated;    /* held body hit the bound */
    ngx_uint_t                    header_seen;
    ngx_uint_t                    done;
    ngx_atomic_t                 *inflight;     /* counted while running */
    or_msec_t                     end;          /* when it was over */

    /* a streamed response (see ngx_omniroute_stream.c) */
    size_t                        boundary;     /* held bytes that are
                                                   complete events */
    off_t                         sent;         /* body bytes passed (not
                                                   a stream) */
    ngx_int_t                     upstream_rc;  /* the upstream module's
                                                   final rc */
    ngx_omniroute_finalize_pt     upstream_finalize;
    or_watch_e                    watch;        /* why the watch stopped
                                                   it */
    unsigned                      stream:1;     /* an event stream, scanned */
    unsigned                      terminal:1;   /* its terminal event passed */
    unsigned                      malformed:1;  /* a malformed event
                                                   after the commit */
    unsigned                      refusal:1;    /* a refusal or filter
                                                   passed: an answer */
    unsigned                      answered:1;   /* more than heartbeats
                                                   and metadata passed */
    unsigned                      error_event:1;    /* an error event passed
                                                       after the commit */
    unsigned                      partial:1;    /* part of an event passed
                                                   (one event over the
                                                   bound) */
    unsigned                      cut:1;        /* ended incomplete after
                                                   the commit */
    unsigned                      stall:1;      /* stopped by the watch */
    unsigned                      rc_seen:1;
    unsigned                      stop:1;       /* its upstream is to end
                                                   now (an error event) */
    ngx_atomic_t                 *inflight_model;   /* connection|model */
    ngx_uint_t                    limit;        /* NGX_OMNIROUTE_CUT_*: cut by
                                                   the execution limit or
                                                   the budget */
    ngx_uint_t                    body_sent;    /* the request reached the
                                                   provider in full */
    unsigned                      lane_slow:1;  /* carried the slow header
                                                   (lane.c) */
    unsigned                      paced:1;      /* its 429 paused the
                                                   connection (R-PACE-2) */
    unsigned                      usage_asked:1;    /* its body asked for
                                                       stream usage for the
                                                       client: the usage-
                                                       only chunk is not
                                                       passed on */
    unsigned                      strip:1;      /* the event just read in
                                                   place is cut from its
                                                   buffer */
} ngx_omniroute_attempt_t;


typedef struct ngx_omniroute_stats_req_s  ngx_omniroute_stats_req_t;
typedef struct ngx_omniroute_budget_req_s  ngx_omniroute_budget_req_t;
typedef struct ngx_omniroute_lane_req_s  ngx_omniroute_lane_req_t;
typedef struct ngx_omniroute_wait_req_s  ngx_omniroute_wait_req_t;
typedef struct ngx_omniroute_pin_req_s  ngx_omniroute_pin_req_t;
typedef struct ngx_omniroute_ctx_s  ngx_omniroute_ctx_t;

typedef void (*ngx_omniroute_resume_pt)(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, ngx_uint_t replay);


/*
 * The request's context: first what several files share, then each
 * file's own: a struct that file declares, behind a pointer made when the
 * request first needs it; what every request uses (its body's edits, its
 * stream state, the memo it writes) is a struct in the ctx itself, no
 * allocation more; or a field of request.c's.
 */
struct ngx_omniroute_ctx_s {
    ngx_http_request_t           *request;      /* the client's */
    ngx_omniroute_loc_conf_t     *lcf;
    ngx_omniroute_auth_t         *auth;         /* client key (client_keys.c,
                                                   lease.c) */
    ngx_str_t                     body;         /* client body, contiguous */
    ngx_str_t                     model;        /* model the client named */
    or_json_scan_t                scan;         /* where its values are */
    ngx_omniroute_model_t        *entry;        /* alias or combo, or NULL */
    ngx_omniroute_route_t        *routes;       /* in the order tried */
    ngx_uint_t                    nroutes;
    ngx_omniroute_global_settings_t
                                  global;       /* read once per request */
    or_msec_t                     deadline;     /* request budget; 0: none */
    ngx_omniroute_plan_req_t      plan;         /* planning's (plan.c) */
    ngx_array_t                   candidates;   /* ngx_omniroute_candidate_t:
                                                   eligible, in order */
    ngx_array_t                   excluded;     /* ngx_omniroute_excluded_t */
    ngx_array_t                   attempts;     /* ngx_omniroute_attempt_t */
    ngx_omniroute_attempt_t      *current;
    ngx_omniroute_attempt_t      *last_held;    /* latest held error */
    ngx_str_t                     upstream_url; /* of the current attempt */
    ngx_event_t                   exec;         /* the attempt's time limit */
    const char                   *error_code;   /* client error to answer */
    const char                   *error_message;
    ngx_buf_t                    *error_page;   /* JSON for an nginx page */
    unsigned                      early:1;      /* the client's 200 header
                                                   went out before any
                                                   content (stream.c) */
    unsigned                      fail_open:1;  /* dispatch past the caps */
    unsigned                      background:1; /* "background": true
                                                   removed (Responses) */
    unsigned                      models_get:1; /* GET or HEAD of the
                                                   location's model list */

    /* each file's own */
    ngx_omniroute_edits_req_t     edits;        /* body.c's */
    ngx_omniroute_memo_req_t      memo;         /* plan_memo.c's */
    ngx_omniroute_pin_req_t      *pin;          /* affinity.c: a session's
                                                   or conversation's */
    ngx_omniroute_wait_req_t     *wait;         /* dispatch.c: queued for
                                                   a slot, waiting out a
                                                   cooldown */
    ngx_omniroute_stream_req_t    stream;       /* stream.c's */
    ngx_omniroute_lane_req_t     *lane;         /* lane.c: the usage-limit
                                                   wall */
    ngx_omniroute_stats_req_t    *stats;        /* stats.c */
    ngx_omniroute_budget_req_t   *budget;       /* budget.c: the key's
                                                   limits, reserved */
    ngx_http_post_subrequest_t    ps;           /* request.c: of every
                                                   attempt */
    ngx_uint_t                    exec_cut;     /* request.c:
                                                   NGX_OMNIROUTE_CUT_* when
                                                   exec fires */
    uint32_t                      cap_uses;     /* pace.c: the capability
                                                   features the body uses
                                                   (or_pace_cap_uses()),
                                                   with CAP_KNOWN */
    unsigned                      emergency_used:1; /* request.c: the
                                                       emergency target got
                                                       an attempt: counted */
};


/*
 * The files of the request path, in the order a request meets them; a
 * file calls only the ones after it (filter.c and variables.c are called
 * by nginx and read what the others computed).
 */

/* handler.c: the content handler of omniroute_pass (ngx_omniroute.h) */

/* request.c: the attempt loop */
void ngx_omniroute_serve(ngx_http_request_t *r, ngx_omniroute_ctx_t *ctx,
    ngx_int_t rc);

/*
 * body.c: the client's body scanned once (NGX_OK, else the client error
 * of the scan), each attempt's body
 */
ngx_int_t ngx_omniroute_scan_body(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx);
ngx_int_t ngx_omniroute_attempt_body(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, ngx_http_request_t *sr,
    ngx_omniroute_attempt_t *a);

/* models.c: GET <location>/models, other methods than POST */
ngx_int_t ngx_omniroute_models_init(ngx_conf_t *cf);
ngx_int_t ngx_omniroute_models_handler(ngx_http_request_t *r);
ngx_uint_t ngx_omniroute_models_asked(ngx_http_request_t *r,
    ngx_omniroute_loc_conf_t *lcf);

/* stream.c: streamed responses: commit point, keep-alives, the watch,
 * in-band errors, the end of a stream */
void ngx_omniroute_stream_filters(ngx_http_output_header_filter_pt header,
    ngx_http_output_body_filter_pt body);
ngx_int_t ngx_omniroute_stream_init(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx);
void ngx_omniroute_stream_attempt(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, ngx_omniroute_attempt_t *a);
ngx_int_t ngx_omniroute_stream_header(ngx_http_request_t *sr,
    ngx_omniroute_ctx_t *ctx, ngx_omniroute_attempt_t *a);
ngx_int_t ngx_omniroute_stream_body(ngx_http_request_t *sr,
    ngx_omniroute_ctx_t *ctx, ngx_omniroute_attempt_t *a, ngx_chain_t *in);
ngx_int_t ngx_omniroute_commit(ngx_http_request_t *sr,
    ngx_omniroute_ctx_t *ctx, ngx_omniroute_attempt_t *a);
ngx_int_t ngx_omniroute_stream_end(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, ngx_omniroute_attempt_t *a);
ngx_int_t ngx_omniroute_stream_fail(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, ngx_omniroute_attempt_t *a);
void ngx_omniroute_stream_done(ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_attempt_t *a, ngx_int_t rc);
or_msec_t ngx_omniroute_stream_keepalive_due(ngx_omniroute_ctx_t *ctx);
ngx_int_t ngx_omniroute_stream_wait_keepalive(ngx_omniroute_ctx_t *ctx);
/*
 * client_keys.c: client keys (R-LEASE-1): the key (401), the location's
 * keys and the key's paths (403) and lease headers, before any body work;
 * the key's models once the body is scanned; its connections (and a
 * lease's) filter the routes.  NGX_DECLINED: go on.
 */
ngx_int_t ngx_omniroute_client_key_check(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx);
ngx_int_t ngx_omniroute_client_key_model(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx);
ngx_int_t ngx_omniroute_client_key_routes(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx);
ngx_int_t ngx_omniroute_client_key_add_variables(ngx_conf_t *cf);
ngx_int_t ngx_omniroute_client_key_init(ngx_conf_t *cf);
ngx_int_t ngx_omniroute_auth_reject(ngx_http_request_t *r,
    ngx_uint_t status, const char *code, const char *message);

/*
 * budget.c: the key's budgets and rate limits (R-BUDGET-1..3): admission
 * once the request is checked (NGX_OK, or 429 with ctx->error_code), the
 * answer of a refusal, the rate-limit headers (the main request's header
 * filter); the settlement is a cleanup of the request's pool.
 */
ngx_int_t ngx_omniroute_budget_admit(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx);
ngx_int_t ngx_omniroute_budget_refusal(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx);
ngx_int_t ngx_omniroute_budget_headers(ngx_http_request_t *r);

/*
 * lease.c: exclusive leases (R-LEASE-2..4): the lease headers of a
 * managed request (NGX_DECLINED: go on), the dispatch check of each
 * candidate (NGX_DECLINED with a reason and retry: not this one), the
 * answer when leases left nothing (NGX_DECLINED: not a lease matter),
 * and the lifecycle endpoint (ngx_omniroute_lease_handler, keys.h).
 */
ngx_int_t ngx_omniroute_lease_auth(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx);
ngx_int_t ngx_omniroute_lease_admit(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, ngx_omniroute_candidate_t *cand,
    const char **reason, or_msec_t *retry);
ngx_int_t ngx_omniroute_lease_unavailable(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx);

/* plan.c: model and routes, eligibility, strategy order, settings */
ngx_int_t ngx_omniroute_plan_routes(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx);
ngx_int_t ngx_omniroute_plan_eligible(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx);
ngx_omniroute_candidate_t *ngx_omniroute_plan_next(ngx_omniroute_ctx_t *ctx);
void ngx_omniroute_plan_restart(ngx_omniroute_ctx_t *ctx);
ngx_uint_t ngx_omniroute_may_fall_over(ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_attempt_t *a);
ngx_uint_t ngx_omniroute_may_continue(ngx_omniroute_ctx_t *ctx);
ngx_uint_t ngx_omniroute_attempts_left(ngx_omniroute_ctx_t *ctx);
void ngx_omniroute_plan_reset(ngx_omniroute_ctx_t *ctx);
ngx_int_t ngx_omniroute_plan_exclude(ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_route_t *route, const char *reason, or_msec_t retry_after,
    or_wait_kind_e kind);

void ngx_omniroute_memo_start(ngx_omniroute_ctx_t *ctx);
void ngx_omniroute_memo_excluded(ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_route_t *route, const char *reason, or_msec_t retry,
    or_wait_kind_e kind, or_msec_t expires, or_msec_t now);
void ngx_omniroute_memo_end(ngx_omniroute_ctx_t *ctx);
ngx_omniroute_settings_t *ngx_omniroute_plan_settings(
    ngx_omniroute_ctx_t *ctx, ngx_omniroute_provider_t *p);

/* affinity.c: session pins */
ngx_int_t ngx_omniroute_affinity_key(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx);
ngx_int_t ngx_omniroute_affinity_pinned(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, ngx_str_t *conn);
void ngx_omniroute_affinity_record(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, ngx_omniroute_attempt_t *a);

/*
 * dispatch.c: admission, concurrency slots, the FIFO wait queue, the
 * cooldown-aware wait, the lane's slot_busy wait (each wait's timer runs
 * the caller's handler)
 */
ngx_int_t ngx_omniroute_admit(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, ngx_omniroute_candidate_t *cand,
    const char **reason);
ngx_int_t ngx_omniroute_acquire_slot(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, ngx_omniroute_candidate_t *cand,
    ngx_atomic_t **counters);
ngx_int_t ngx_omniroute_hold_slot(ngx_http_request_t *r,
    ngx_omniroute_attempt_t *a, ngx_atomic_t **counters);
void ngx_omniroute_release_slot(ngx_omniroute_attempt_t *a);
ngx_int_t ngx_omniroute_waits_init(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx);
ngx_uint_t ngx_omniroute_queue_ahead(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx);
ngx_int_t ngx_omniroute_queue_enter(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, ngx_event_handler_pt handler);
ngx_int_t ngx_omniroute_queue_poll(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx);
ngx_int_t ngx_omniroute_queue_wait(ngx_omniroute_ctx_t *ctx);
void ngx_omniroute_queue_leave(void *data);
or_wait_e ngx_omniroute_cooldown_decide(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, or_msec_t *ms);
ngx_int_t ngx_omniroute_cooldown_wait(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, ngx_event_handler_pt handler, or_msec_t ms);
void ngx_omniroute_cooldown_over(ngx_omniroute_ctx_t *ctx);
ngx_int_t ngx_omniroute_wait_timer(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, ngx_event_handler_pt handler, or_msec_t ms);

/*
 * lane.c: the usage-limit wall (R-LANE): the slow header, a failed
 * attempt's meaning for the lane, the session-limit reset, the connection
 * the lane tries again and the attempts it made
 */
ngx_int_t ngx_omniroute_lane_headers(ngx_http_request_t *r,
    ngx_http_request_t *sr, ngx_omniroute_candidate_t *cand);
ngx_int_t ngx_omniroute_lane_outcome(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, ngx_omniroute_attempt_t *a, or_msec_t *ms,
    ngx_omniroute_resume_pt resume);
ngx_omniroute_candidate_t *ngx_omniroute_lane_next(ngx_omniroute_ctx_t *ctx);
void ngx_omniroute_lane_retried(ngx_omniroute_ctx_t *ctx);
ngx_uint_t ngx_omniroute_lane_retries(ngx_omniroute_ctx_t *ctx);

/* headers.c: an attempt's URL and request headers */
ngx_int_t ngx_omniroute_attempt_url(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, ngx_omniroute_provider_t *p);
ngx_int_t ngx_omniroute_attempt_headers(ngx_http_request_t *r,
    ngx_http_request_t *sr, ngx_omniroute_candidate_t *cand);
ngx_int_t ngx_omniroute_attempt_credentials(ngx_http_request_t *r,
    ngx_list_t *headers, ngx_omniroute_candidate_t *cand);

/* outcome.c: classify an attempt and record it in the shared state;
 * which held error is the answer should no attempt succeed */
void ngx_omniroute_held(ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_attempt_t *a);
void ngx_omniroute_classify(ngx_http_request_t *r, ngx_omniroute_attempt_t *a);
void ngx_omniroute_record_failure(ngx_http_request_t *r,
    ngx_omniroute_attempt_t *a);
void ngx_omniroute_record_success(ngx_http_request_t *r,
    ngx_omniroute_attempt_t *a);
/* a breaker change an update wrote: logged and counted */
void ngx_omniroute_breaker_changed(ngx_http_request_t *r,
    ngx_omniroute_provider_t *p, or_cb_state_e from, or_cb_state_e to);

/*
 * pace.c: pacing (R-PACE), tool-limit backoff (R-TOOL), what the three
 * count (with the emergency fallback, R-EMERG)
 */
ngx_int_t ngx_omniroute_pace_failure(ngx_http_request_t *r,
    ngx_omniroute_attempt_t *a, int status);
void ngx_omniroute_pace_tools(ngx_http_request_t *r,
    ngx_omniroute_attempt_t *a);
ngx_int_t ngx_omniroute_pace_tools_skip(ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_route_t *route, or_msec_t *retry);
void ngx_omniroute_pace_capability(ngx_http_request_t *r,
    ngx_omniroute_attempt_t *a);
ngx_int_t ngx_omniroute_pace_capability_skip(ngx_omniroute_ctx_t *ctx,
    ngx_omniroute_route_t *route, or_msec_t *retry);
ngx_int_t ngx_omniroute_pace_busy(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, ngx_omniroute_candidate_t *cand);
or_msec_t ngx_omniroute_pace_until(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx);
or_msec_t ngx_omniroute_pace_poll(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, or_msec_t ms);
ngx_int_t ngx_omniroute_pace_timeout(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, or_msec_t wait_until);
void ngx_omniroute_pace_count(ngx_http_request_t *r, ngx_uint_t event);

/* response.c: all that the client gets */
ngx_int_t ngx_omniroute_reject(ngx_omniroute_ctx_t *ctx, ngx_uint_t status,
    const char *code, const char *message);
ngx_int_t ngx_omniroute_copy_response_headers(ngx_http_request_t *r,
    ngx_http_request_t *sr);
ngx_int_t ngx_omniroute_add_route_headers(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx);
ngx_int_t ngx_omniroute_send_held(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, ngx_omniroute_attempt_t *a);
ngx_int_t ngx_omniroute_send_transport_error(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, ngx_omniroute_attempt_t *a);
ngx_int_t ngx_omniroute_send_rejected(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, ngx_int_t status);
ngx_int_t ngx_omniroute_set_retry_after(ngx_http_request_t *r,
    or_msec_t ms);
ngx_int_t ngx_omniroute_send_cooling_down(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx);
ngx_int_t ngx_omniroute_send_rate_limited(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, or_msec_t retry);
ngx_int_t ngx_omniroute_send_cut(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, ngx_omniroute_attempt_t *a);
ngx_int_t ngx_omniroute_send_error(ngx_http_request_t *r, ngx_uint_t status,
    const char *type, const char *code, const char *message);
ngx_int_t ngx_omniroute_send_own_json(ngx_http_request_t *r,
    ngx_uint_t status, json_t *doc);
ngx_int_t ngx_omniroute_send_error_event(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, ngx_uint_t status, const char *code,
    const char *message, size_t len, ngx_int_t retry, ngx_uint_t prefix);
ngx_uint_t ngx_omniroute_json_errors(ngx_http_request_t *r);
ngx_int_t ngx_omniroute_json_error_page(ngx_http_request_t *r);

/* stats.c: the counters of the metrics, the attempt trail */
ngx_int_t ngx_omniroute_stats_init(ngx_conf_t *cf);
void ngx_omniroute_count(ngx_http_request_t *r, ngx_uint_t outcome);
void ngx_omniroute_count_fallback(ngx_http_request_t *r,
    ngx_omniroute_attempt_t *a);
void ngx_omniroute_stats_event(ngx_http_request_t *r,
    ngx_omniroute_attempt_t *a, const char *data, size_t len);
void ngx_omniroute_count_attempt(ngx_http_request_t *r,
    ngx_omniroute_attempt_t *a, or_reason_e reason);
void ngx_omniroute_count_restatement(ngx_http_request_t *r,
    const char *rule);
void ngx_omniroute_count_breaker(ngx_http_request_t *r,
    ngx_omniroute_provider_t *p, ngx_uint_t from, ngx_uint_t to);
void ngx_omniroute_stats_header(ngx_http_request_t *r,
    ngx_omniroute_attempt_t *a);
void ngx_omniroute_stats_first_content(ngx_http_request_t *r,
    ngx_omniroute_attempt_t *a);
void ngx_omniroute_stats_attempt_end(ngx_http_request_t *r,
    ngx_omniroute_attempt_t *a);
void ngx_omniroute_stats_commit(ngx_http_request_t *r, ngx_http_request_t *sr,
    ngx_omniroute_attempt_t *a);
void ngx_omniroute_stats_body(ngx_http_request_t *r, ngx_chain_t *in);
/* the committed answer's token counts: a bit (1 << kind) per one seen */
unsigned ngx_omniroute_stats_usage(ngx_omniroute_ctx_t *ctx,
    uint64_t *tokens);
ngx_int_t ngx_omniroute_stats_trail(ngx_http_request_t *r,
    ngx_omniroute_ctx_t *ctx, ngx_str_t *trail);

/* filter.c: hold, probe or commit each attempt's response */
ngx_int_t ngx_omniroute_filter_init(ngx_conf_t *cf);

/* variables.c */
ngx_int_t ngx_omniroute_add_variables(ngx_conf_t *cf);


/* what is left of the request budget (request.budget_ms), or OR_MSEC_NONE */

static ngx_inline or_msec_t
ngx_omniroute_budget_left(ngx_omniroute_ctx_t *ctx)
{
    if (ctx->deadline == 0) {
        return OR_MSEC_NONE;
    }

    return ngx_max(ctx->deadline - ngx_omniroute_now(), 0);
}


#endif /* _NGX_OMNIROUTE_CTX_H_INCLUDED_ */
