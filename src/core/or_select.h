/*
 * Copyright (C) ngx_omniroute authors
 *
 * Routing strategies (R-ROUTE) and the session-pin helper (R-AFF-1).
 *
 * The planner hands in the ELIGIBLE candidates (breaker, cooldown,
 * lockout, lease, allowed-model filters already applied, R-REQ-3) and
 * gets back an ORDER: a permutation of candidate indexes, order[0] the
 * preferred one, the rest the in-request fallover order (R-REQ-4).
 *
 * State that all workers share (round-robin position, strict-random deck,
 * fill-first current, smooth weighted round-robin weights) is one
 * fixed-size POD struct, or_select_state_t, without pointers: the caller
 * keeps it in shared memory and holds its lock around or_select_order().
 * Shared state refers to candidates by their `id`, which must be unique
 * within one call and stable across calls (e.g. a hash of the connection
 * name), never by their index in the array.
 *
 * Randomness comes only from the or_rand_t passed in: same seed, same
 * inputs, same order.
 */

#ifndef _OR_SELECT_H_INCLUDED_
#define _OR_SELECT_H_INCLUDED_


#include "or_types.h"
#include "or_rand.h"


#define OR_SELECT_MAX        128        /* candidates per call */

#define OR_WINDOW_SIZE       20         /* samples kept per window */
#define OR_WINDOW_SPAN_MS    (15 * 60 * 1000)
#define OR_P2C_MIN_SAMPLES   3          /* each, before latency counts */
#define OR_P2C_WEIGHT_MAX    20


/*
 * Config names (or_strategy_parse): the canonical name is the one in the
 * comment; the same name with '_' instead of '-' is accepted too.
 */
typedef enum {
    OR_STRATEGY_PRIORITY = 0,           /* "priority" */
    OR_STRATEGY_WEIGHTED,               /* "weighted" */
    OR_STRATEGY_ROUND_ROBIN,            /* "round-robin" */
    OR_STRATEGY_RANDOM,                 /* "random" */
    OR_STRATEGY_STRICT_RANDOM,          /* "strict-random" */
    OR_STRATEGY_LEAST_USED,             /* "least-used" */
    OR_STRATEGY_FILL_FIRST,             /* "fill-first" */
    OR_STRATEGY_P2C,                    /* "p2c" */
    OR_STRATEGY_COST_OPTIMIZED,         /* "cost-optimized" */
    OR_STRATEGY_RESET_AWARE,            /* "reset-aware" */
    OR_STRATEGY_HEADROOM,               /* "headroom" */
    OR_STRATEGY_COUNT
} or_strategy_e;


/* one attempt outcome in a rolling window */
typedef struct {
    or_msec_t  at;                      /* when it was recorded */
    int32_t    latency_ms;              /* time to first byte, -1: none */
    uint32_t   failed;                  /* 1: the attempt failed */
} or_window_sample_t;


/*
 * Rolling window of the last OR_WINDOW_SIZE samples; only those at most
 * OR_WINDOW_SPAN_MS old count.  All-zero bytes are an empty window.
 */
typedef struct {
    or_window_sample_t  samples[OR_WINDOW_SIZE];
    uint32_t            next;           /* slot the next sample goes to */
    uint32_t            count;          /* used slots, <= OR_WINDOW_SIZE */
} or_window_t;


typedef struct {
    uint32_t   samples;                 /* samples in the window at `now` */
    uint32_t   errors;                  /* of which failed */
    uint32_t   timed;                   /* of which carry a latency */
    uint32_t   reserved;
    or_msec_t  mean_latency_ms;         /* over timed ones, or OR_MSEC_NONE */
} or_window_summary_t;


/* what a strategy knows about one eligible candidate */
typedef struct {
    uint32_t             id;            /* stable, unique per call */
    int32_t              priority;      /* lower is preferred */
    uint32_t             weight;        /* weighted; 0: fallover only */
    uint32_t             in_flight;     /* attempts running now */
    uint32_t             max_concurrent;    /* 0: unlimited */
    uint32_t             reserved;
    uint64_t             usage;         /* requests served (tie-break) */
    double               cost;          /* lower is preferred */
    or_msec_t            reset_at;      /* absolute cooldown/quota reset,
                                           or OR_MSEC_NONE: unknown */
    or_window_summary_t  window;        /* latency/error, for p2c */
} or_cand_t;


/* strategy state shared by all workers: plain data, zero = fresh */
typedef struct {
    uint64_t   picks;                   /* calls that chose a candidate */

    uint32_t   rr_last_id;              /* round-robin: last id chosen */
    uint32_t   rr_valid;

    uint32_t   ff_id;                   /* fill-first: current id */
    uint32_t   ff_valid;

    uint32_t   deck_len;                /* strict-random: shuffled ids */
    uint32_t   deck_pos;                /* next deck slot to deal */
    uint32_t   deck[OR_SELECT_MAX];

    uint32_t   wrr_n;                   /* weighted: smooth WRR weights */
    uint32_t   wrr_id[OR_SELECT_MAX];
    int64_t    wrr_current[OR_SELECT_MAX];
} or_select_state_t;


int or_strategy_parse(const char *name, size_t len);
const char *or_strategy_name(or_strategy_e strategy);

int or_select_order(or_strategy_e strategy, const or_cand_t *cands,
    uint32_t n, or_msec_t now, int p2c_weight, or_select_state_t *state,
    or_rand_t *rnd, uint32_t *order);
int or_select_pin(uint32_t *order, uint32_t n, const or_cand_t *cands,
    uint32_t pin_id);

void or_window_init(or_window_t *w);
void or_window_add(or_window_t *w, or_msec_t now, int64_t latency_ms,
    int failed);
void or_window_summarize(const or_window_t *w, or_msec_t now,
    or_window_summary_t *sum);


#endif /* _OR_SELECT_H_INCLUDED_ */
