/*
 * Copyright (C) ngx_omniroute authors
 *
 * Routing strategies (R-ROUTE).  Every strategy writes a full permutation
 * of the candidate indexes; the common tie-break after a strategy's own
 * keys is priority (lower first), then the index in the input array, so
 * equal candidates keep the planner's (config) order.
 *
 *   priority        priority asc.
 *   weighted        smooth weighted round-robin (nginx's algorithm): exact
 *                   long-run shares, deterministic, state shared by
 *                   workers.  Fallover: the other weighted candidates by
 *                   current weight desc (the most "owed" first), then the
 *                   weight-0 ones (fallover only) by priority.
 *   round-robin     candidates in a ring ordered by id; start right after
 *                   the id chosen last time.  A candidate that drops out
 *                   of the eligible set does not disturb the ring.
 *   random          uniform shuffle.
 *   strict-random   deal from a shuffled deck of ids; every candidate
 *                   once per deck before any repeats.  Ids not eligible
 *                   at their turn are skipped; new ids join the next deck.
 *                   Fallover: the rest of the deck, then the others.
 *   least-used      in_flight asc, priority asc, usage asc.
 *   fill-first      stay on the current candidate while it is eligible
 *                   and not full; otherwise take the first not-full one
 *                   in priority order.  Full ones fall over last.
 *   p2c             two distinct candidates drawn at random, the lower
 *                   score wins: in_flight + latency/error penalty (see
 *                   or_select_p2c_penalty()).  Fallover: least-used order.
 *   cost-optimized  cost asc, priority asc.
 *   reset-aware     soonest upcoming reset first; a reset that is unknown
 *                   or already past counts as "no reset known" and goes
 *                   after every known one.
 *   headroom        free slots (max_concurrent - in_flight, unlimited is
 *                   the most) desc, then in_flight asc, priority asc.
 */


#include <string.h>

#include "or_select.h"


typedef int (*or_select_cmp_pt)(const or_cand_t *cands, uint32_t a,
    uint32_t b, const void *data);


static void or_select_identity(uint32_t *order, uint32_t n);
static void or_select_sort(uint32_t *order, uint32_t n,
    const or_cand_t *cands, or_select_cmp_pt cmp, const void *data);
static int or_select_find(const or_cand_t *cands, uint32_t n, uint32_t id);
static void or_select_shuffle(uint32_t *a, uint32_t n, or_rand_t *rnd);
static int or_select_full(const or_cand_t *c);
static void or_select_front(uint32_t *order, uint32_t n, uint32_t x);

static int or_cmp_priority(const or_cand_t *cands, uint32_t a, uint32_t b,
    const void *data);
static int or_cmp_id(const or_cand_t *cands, uint32_t a, uint32_t b,
    const void *data);
static int or_cmp_least_used(const or_cand_t *cands, uint32_t a,
    uint32_t b, const void *data);
static int or_cmp_cost(const or_cand_t *cands, uint32_t a, uint32_t b,
    const void *data);
static int or_cmp_reset(const or_cand_t *cands, uint32_t a, uint32_t b,
    const void *data);
static int or_cmp_headroom(const or_cand_t *cands, uint32_t a, uint32_t b,
    const void *data);
static int or_cmp_full_last(const or_cand_t *cands, uint32_t a, uint32_t b,
    const void *data);
static int or_cmp_weighted(const or_cand_t *cands, uint32_t a, uint32_t b,
    const void *data);

static void or_select_weighted(const or_cand_t *cands, uint32_t n,
    or_select_state_t *st, uint32_t *order);
static void or_select_round_robin(const or_cand_t *cands, uint32_t n,
    or_select_state_t *st, uint32_t *order);
static void or_select_strict_random(const or_cand_t *cands, uint32_t n,
    or_select_state_t *st, or_rand_t *rnd, uint32_t *order);
static void or_select_fill_first(const or_cand_t *cands, uint32_t n,
    or_select_state_t *st, uint32_t *order);
static void or_select_p2c(const or_cand_t *cands, uint32_t n, int weight,
    or_rand_t *rnd, uint32_t *order);
static double or_select_p2c_penalty(const or_cand_t *c,
    const or_cand_t *other, int weight);


static const char  *or_strategy_names[OR_STRATEGY_COUNT] = {
    "priority",
    "weighted",
    "round-robin",
    "random",
    "strict-random",
    "least-used",
    "fill-first",
    "p2c",
    "cost-optimized",
    "reset-aware",
    "headroom"
};


int
or_strategy_parse(const char *name, size_t len)
{
    size_t       i, k;
    const char  *s;

    if (name == NULL) {
        return -1;
    }

    for (k = 0; k < OR_STRATEGY_COUNT; k++) {
        s = or_strategy_names[k];

        if (strlen(s) != len) {
            continue;
        }

        for (i = 0; i < len; i++) {
            if (name[i] != s[i] && !(name[i] == '_' && s[i] == '-')) {
                break;
            }
        }

        if (i == len) {
            return (int) k;
        }
    }

    return -1;
}


const char *
or_strategy_name(or_strategy_e strategy)
{
    if ((unsigned) strategy >= OR_STRATEGY_COUNT) {
        return "unknown";
    }

    return or_strategy_names[strategy];
}


/*
 * Fills order[0..n) with a permutation of 0..n-1 and returns n; returns -1
 * on bad arguments (unknown strategy, n > OR_SELECT_MAX, NULL arrays).
 * state may be NULL: stateful strategies then start from a fresh state
 * and nothing is kept.  rnd may be NULL only for strategies that draw no
 * random numbers; it may be per worker (seeded apart) or shared.  `now`
 * is read by reset-aware only; p2c_weight (clamped to 0-20) by p2c only.
 */

int
or_select_order(or_strategy_e strategy, const or_cand_t *cands, uint32_t n,
    or_msec_t now, int p2c_weight, or_select_state_t *state, or_rand_t *rnd,
    uint32_t *order)
{
    or_select_state_t  scratch, *st;

    if ((unsigned) strategy >= OR_STRATEGY_COUNT || n > OR_SELECT_MAX) {
        return -1;
    }

    if (n == 0) {
        return 0;
    }

    if (cands == NULL || order == NULL) {
        return -1;
    }

    if (rnd == NULL
        && (strategy == OR_STRATEGY_RANDOM
            || strategy == OR_STRATEGY_STRICT_RANDOM
            || strategy == OR_STRATEGY_P2C))
    {
        return -1;
    }

    st = state;

    if (st == NULL) {
        memset(&scratch, 0, sizeof(scratch));
        st = &scratch;
    }

    or_select_identity(order, n);

    switch (strategy) {

    case OR_STRATEGY_PRIORITY:
        or_select_sort(order, n, cands, or_cmp_priority, NULL);
        break;

    case OR_STRATEGY_WEIGHTED:
        or_select_weighted(cands, n, st, order);
        break;

    case OR_STRATEGY_ROUND_ROBIN:
        or_select_round_robin(cands, n, st, order);
        break;

    case OR_STRATEGY_RANDOM:
        or_select_shuffle(order, n, rnd);
        break;

    case OR_STRATEGY_STRICT_RANDOM:
        or_select_strict_random(cands, n, st, rnd, order);
        break;

    case OR_STRATEGY_LEAST_USED:
        or_select_sort(order, n, cands, or_cmp_least_used, NULL);
        break;

    case OR_STRATEGY_FILL_FIRST:
        or_select_fill_first(cands, n, st, order);
        break;

    case OR_STRATEGY_P2C:
        or_select_p2c(cands, n, p2c_weight, rnd, order);
        break;

    case OR_STRATEGY_COST_OPTIMIZED:
        or_select_sort(order, n, cands, or_cmp_cost, NULL);
        break;

    case OR_STRATEGY_RESET_AWARE:
        or_select_sort(order, n, cands, or_cmp_reset, &now);
        break;

    default: /* OR_STRATEGY_HEADROOM */
        or_select_sort(order, n, cands, or_cmp_headroom, NULL);
        break;
    }

    st->picks++;

    return (int) n;
}


/*
 * Session pin (R-AFF-1): when the pinned id is among the ordered
 * candidates, move it first and keep the others' relative order.
 * Returns 1 when the pin was found, 0 when it is not eligible (re-pin).
 * Call it on the strategy's order; a caller that already knows the pin
 * is eligible may pass state NULL to or_select_order() so that a pinned
 * request does not use up a round-robin, deck or weighted turn.
 */

int
or_select_pin(uint32_t *order, uint32_t n, const or_cand_t *cands,
    uint32_t pin_id)
{
    uint32_t  k;

    for (k = 0; k < n; k++) {
        if (cands[order[k]].id == pin_id) {
            or_select_front(order, n, order[k]);
            return 1;
        }
    }

    return 0;
}


void
or_window_init(or_window_t *w)
{
    memset(w, 0, sizeof(or_window_t));
}


/*
 * Records one attempt; the oldest sample is overwritten once the window
 * holds OR_WINDOW_SIZE.  latency_ms < 0 means "no latency" (e.g. the
 * connect failed); latencies are clamped to INT32_MAX.
 */

void
or_window_add(or_window_t *w, or_msec_t now, int64_t latency_ms, int failed)
{
    or_window_sample_t  *s;

    if (w->next >= OR_WINDOW_SIZE || w->count > OR_WINDOW_SIZE) {
        or_window_init(w);              /* corrupt: start over */
    }

    s = &w->samples[w->next];

    s->at = now;
    s->latency_ms = latency_ms < 0 ? -1
                    : latency_ms > INT32_MAX ? INT32_MAX
                    : (int32_t) latency_ms;
    s->failed = failed ? 1 : 0;

    w->next = (w->next + 1) % OR_WINDOW_SIZE;

    if (w->count < OR_WINDOW_SIZE) {
        w->count++;
    }
}


/*
 * Summarizes the samples at most OR_WINDOW_SPAN_MS old at `now` (a sample
 * exactly 15 min old still counts; samples stamped in the future, from a
 * worker whose clock ran ahead, count too).  The mean latency is
 * truncated to whole milliseconds.
 */

void
or_window_summarize(const or_window_t *w, or_msec_t now,
    or_window_summary_t *sum)
{
    int64_t                    total;
    uint32_t                   i;
    const or_window_sample_t  *s;

    memset(sum, 0, sizeof(or_window_summary_t));
    sum->mean_latency_ms = OR_MSEC_NONE;

    total = 0;

    for (i = 0; i < OR_WINDOW_SIZE && i < w->count; i++) {
        s = &w->samples[i];

        if (now - s->at > OR_WINDOW_SPAN_MS) {
            continue;
        }

        sum->samples++;
        sum->errors += s->failed ? 1 : 0;

        if (s->latency_ms >= 0) {
            sum->timed++;
            total += s->latency_ms;
        }
    }

    if (sum->timed > 0) {
        sum->mean_latency_ms = total / sum->timed;
    }
}


static void
or_select_identity(uint32_t *order, uint32_t n)
{
    uint32_t  i;

    for (i = 0; i < n; i++) {
        order[i] = i;
    }
}


/* stable insertion sort; equal keys fall back to the input index */

static void
or_select_sort(uint32_t *order, uint32_t n, const or_cand_t *cands,
    or_select_cmp_pt cmp, const void *data)
{
    int       rc;
    uint32_t  i, j, x;

    for (i = 1; i < n; i++) {
        x = order[i];
        j = i;

        while (j > 0) {
            rc = cmp(cands, x, order[j - 1], data);

            if (rc > 0 || (rc == 0 && x > order[j - 1])) {
                break;
            }

            order[j] = order[j - 1];
            j--;
        }

        order[j] = x;
    }
}


static int
or_select_find(const or_cand_t *cands, uint32_t n, uint32_t id)
{
    uint32_t  i;

    for (i = 0; i < n; i++) {
        if (cands[i].id == id) {
            return (int) i;
        }
    }

    return -1;
}


/* Fisher-Yates */

static void
or_select_shuffle(uint32_t *a, uint32_t n, or_rand_t *rnd)
{
    uint32_t  i, j, t;

    for (i = n; i > 1; i--) {
        j = or_rand_below(rnd, i);
        t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}


static int
or_select_full(const or_cand_t *c)
{
    return c->max_concurrent != 0 && c->in_flight >= c->max_concurrent;
}


/* moves candidate x to order[0], the others keep their relative order */

static void
or_select_front(uint32_t *order, uint32_t n, uint32_t x)
{
    uint32_t  k;

    for (k = 0; k < n && order[k] != x; k++) { /* void */ }

    if (k == n) {
        return;
    }

    memmove(&order[1], &order[0], k * sizeof(uint32_t));
    order[0] = x;
}


static int
or_cmp_priority(const or_cand_t *cands, uint32_t a, uint32_t b,
    const void *data)
{
    if (cands[a].priority != cands[b].priority) {
        return cands[a].priority < cands[b].priority ? -1 : 1;
    }

    return 0;
}


static int
or_cmp_id(const or_cand_t *cands, uint32_t a, uint32_t b, const void *data)
{
    if (cands[a].id != cands[b].id) {
        return cands[a].id < cands[b].id ? -1 : 1;
    }

    return 0;
}


static int
or_cmp_least_used(const or_cand_t *cands, uint32_t a, uint32_t b,
    const void *data)
{
    int  rc;

    if (cands[a].in_flight != cands[b].in_flight) {
        return cands[a].in_flight < cands[b].in_flight ? -1 : 1;
    }

    rc = or_cmp_priority(cands, a, b, NULL);
    if (rc != 0) {
        return rc;
    }

    if (cands[a].usage != cands[b].usage) {
        return cands[a].usage < cands[b].usage ? -1 : 1;
    }

    return 0;
}


static int
or_cmp_cost(const or_cand_t *cands, uint32_t a, uint32_t b,
    const void *data)
{
    if (cands[a].cost < cands[b].cost) {
        return -1;
    }

    if (cands[a].cost > cands[b].cost) {
        return 1;
    }

    return or_cmp_priority(cands, a, b, NULL);
}


static int
or_cmp_reset(const or_cand_t *cands, uint32_t a, uint32_t b,
    const void *data)
{
    int        ka, kb;
    or_msec_t  now, ra, rb;

    now = *(const or_msec_t *) data;
    ra = cands[a].reset_at;
    rb = cands[b].reset_at;

    ka = ra != OR_MSEC_NONE && ra > now;
    kb = rb != OR_MSEC_NONE && rb > now;

    if (ka != kb) {
        return ka ? -1 : 1;
    }

    if (ka && ra != rb) {
        return ra < rb ? -1 : 1;
    }

    return or_cmp_priority(cands, a, b, NULL);
}


static int
or_cmp_headroom(const or_cand_t *cands, uint32_t a, uint32_t b,
    const void *data)
{
    int64_t           fa, fb;
    const or_cand_t  *ca, *cb;

    ca = &cands[a];
    cb = &cands[b];

    fa = ca->max_concurrent == 0 ? INT64_MAX
         : (int64_t) ca->max_concurrent - (int64_t) ca->in_flight;
    fb = cb->max_concurrent == 0 ? INT64_MAX
         : (int64_t) cb->max_concurrent - (int64_t) cb->in_flight;

    fa = fa < 0 ? 0 : fa;
    fb = fb < 0 ? 0 : fb;

    if (fa != fb) {
        return fa > fb ? -1 : 1;
    }

    if (ca->in_flight != cb->in_flight) {
        return ca->in_flight < cb->in_flight ? -1 : 1;
    }

    return or_cmp_priority(cands, a, b, NULL);
}


static int
or_cmp_full_last(const or_cand_t *cands, uint32_t a, uint32_t b,
    const void *data)
{
    int  fa, fb;

    fa = or_select_full(&cands[a]);
    fb = or_select_full(&cands[b]);

    if (fa != fb) {
        return fa ? 1 : -1;
    }

    return or_cmp_priority(cands, a, b, NULL);
}


/* data: the current weights after this round, indexed like cands */

static int
or_cmp_weighted(const or_cand_t *cands, uint32_t a, uint32_t b,
    const void *data)
{
    const int64_t  *cur;

    cur = data;

    if ((cands[a].weight == 0) != (cands[b].weight == 0)) {
        return cands[a].weight == 0 ? 1 : -1;
    }

    if (cands[a].weight != 0) {
        if (cur[a] != cur[b]) {
            return cur[a] > cur[b] ? -1 : 1;
        }

        if (cands[a].weight != cands[b].weight) {
            return cands[a].weight > cands[b].weight ? -1 : 1;
        }
    }

    return or_cmp_priority(cands, a, b, NULL);
}


/*
 * Smooth weighted round-robin, as ngx_http_upstream_get_peer(): every
 * weighted candidate's current weight grows by its weight, the largest
 * (first on ties) wins and gives back the sum of the weights.  Over any
 * run of sum(weights) calls with a fixed set, each candidate is chosen
 * exactly `weight` times.  The weights are kept by id in the state;
 * candidates absent from this call are dropped (they restart at 0).
 * Weight 0 means "fallover only"; with no weighted candidate at all the
 * order is plain priority.
 */

static void
or_select_weighted(const or_cand_t *cands, uint32_t n, or_select_state_t *st,
    uint32_t *order)
{
    int       best;
    int64_t   total, cur[OR_SELECT_MAX];
    uint32_t  i, k, m;

    best = -1;
    total = 0;

    if (st->wrr_n > OR_SELECT_MAX) {
        st->wrr_n = 0;
    }

    for (i = 0; i < n; i++) {
        cur[i] = 0;

        if (cands[i].weight == 0) {
            continue;
        }

        for (k = 0; k < st->wrr_n; k++) {
            if (st->wrr_id[k] == cands[i].id) {
                cur[i] = st->wrr_current[k];
                break;
            }
        }

        cur[i] += cands[i].weight;
        total += cands[i].weight;

        if (best < 0 || cur[i] > cur[best]) {
            best = (int) i;
        }
    }

    if (best < 0) {
        or_select_sort(order, n, cands, or_cmp_priority, NULL);
        return;
    }

    cur[best] -= total;

    m = 0;

    for (i = 0; i < n; i++) {
        if (cands[i].weight != 0) {
            st->wrr_id[m] = cands[i].id;
            st->wrr_current[m] = cur[i];
            m++;
        }
    }

    st->wrr_n = m;

    order[0] = (uint32_t) best;
    order[best] = 0;

    or_select_sort(order + 1, n - 1, cands, or_cmp_weighted, cur);
}


static void
or_select_round_robin(const or_cand_t *cands, uint32_t n,
    or_select_state_t *st, uint32_t *order)
{
    uint32_t  i, start, ring[OR_SELECT_MAX];

    or_select_identity(ring, n);
    or_select_sort(ring, n, cands, or_cmp_id, NULL);

    start = 0;

    if (st->rr_valid) {
        for (i = 0; i < n; i++) {
            if (cands[ring[i]].id > st->rr_last_id) {
                start = i;
                break;
            }
        }
    }

    for (i = 0; i < n; i++) {
        order[i] = ring[(start + i) % n];
    }

    st->rr_last_id = cands[order[0]].id;
    st->rr_valid = 1;
}


static void
or_select_strict_random(const or_cand_t *cands, uint32_t n,
    or_select_state_t *st, or_rand_t *rnd, uint32_t *order)
{
    int       k, pick;
    uint8_t   used[OR_SELECT_MAX];
    uint32_t  i, m, p;

    if (st->deck_len > OR_SELECT_MAX || st->deck_pos > st->deck_len) {
        st->deck_len = 0;
        st->deck_pos = 0;
    }

    pick = -1;

    while (st->deck_pos < st->deck_len) {
        pick = or_select_find(cands, n, st->deck[st->deck_pos++]);

        if (pick >= 0) {
            break;
        }
    }

    if (pick < 0) {
        /* a new deck: the eligible candidates, shuffled */

        or_select_identity(order, n);
        or_select_shuffle(order, n, rnd);

        for (i = 0; i < n; i++) {
            st->deck[i] = cands[order[i]].id;
        }

        st->deck_len = n;
        st->deck_pos = 1;
        pick = (int) order[0];
    }

    memset(used, 0, n);

    order[0] = (uint32_t) pick;
    used[pick] = 1;
    m = 1;

    for (p = st->deck_pos; p < st->deck_len; p++) {
        k = or_select_find(cands, n, st->deck[p]);

        if (k >= 0 && !used[k]) {
            order[m++] = (uint32_t) k;
            used[k] = 1;
        }
    }

    for (i = 0; i < n; i++) {
        if (!used[i]) {
            order[m++] = i;
        }
    }
}


static void
or_select_fill_first(const or_cand_t *cands, uint32_t n,
    or_select_state_t *st, uint32_t *order)
{
    int  cur;

    or_select_sort(order, n, cands, or_cmp_full_last, NULL);

    cur = st->ff_valid ? or_select_find(cands, n, st->ff_id) : -1;

    if (cur >= 0 && !or_select_full(&cands[cur])) {
        or_select_front(order, n, (uint32_t) cur);

    } else if (or_select_full(&cands[order[0]])) {
        /* all full: nothing to move on to; the current one stays first */

        if (cur >= 0) {
            or_select_front(order, n, (uint32_t) cur);
        }

        return;
    }

    st->ff_id = cands[order[0]].id;
    st->ff_valid = 1;
}


/*
 * The p2c latency/error component (R-ROUTE, guide §2 "Optional latency
 * signal"): up to `weight` (0-20) points on top of in_flight.  Half come
 * from latency relative to the faster of the pair (twice as slow or
 * worse: the full half), half from the window's error rate.  Zero unless
 * both candidates have at least OR_P2C_MIN_SAMPLES samples; the latency
 * half also needs a mean latency on both sides.
 */

static double
or_select_p2c_penalty(const or_cand_t *c, const or_cand_t *other, int weight)
{
    double     half, pen, ratio;
    or_msec_t  mine, theirs, fast;

    if (weight <= 0
        || c->window.samples < OR_P2C_MIN_SAMPLES
        || other->window.samples < OR_P2C_MIN_SAMPLES)
    {
        return 0.0;
    }

    if (weight > OR_P2C_WEIGHT_MAX) {
        weight = OR_P2C_WEIGHT_MAX;
    }

    half = weight / 2.0;
    pen = 0.0;

    mine = c->window.mean_latency_ms;
    theirs = other->window.mean_latency_ms;

    if (mine != OR_MSEC_NONE && theirs != OR_MSEC_NONE && mine > theirs) {
        fast = theirs > 0 ? theirs : 1;
        ratio = (double) (mine - theirs) / (double) fast;
        pen += half * (ratio > 1.0 ? 1.0 : ratio);
    }

    pen += half * (double) c->window.errors / (double) c->window.samples;

    return pen;
}


static void
or_select_p2c(const or_cand_t *cands, uint32_t n, int weight,
    or_rand_t *rnd, uint32_t *order)
{
    double    sa, sb;
    uint32_t  a, b, win;

    if (n < 2) {
        return;
    }

    a = or_rand_below(rnd, n);
    b = or_rand_below(rnd, n - 1);

    if (b >= a) {
        b++;
    }

    sa = cands[a].in_flight
         + or_select_p2c_penalty(&cands[a], &cands[b], weight);
    sb = cands[b].in_flight
         + or_select_p2c_penalty(&cands[b], &cands[a], weight);

    if (sa != sb) {
        win = sa < sb ? a : b;

    } else if (cands[a].priority != cands[b].priority) {
        win = cands[a].priority < cands[b].priority ? a : b;

    } else {
        win = a < b ? a : b;
    }

    or_select_sort(order, n, cands, or_cmp_least_used, NULL);
    or_select_front(order, n, win);
}
