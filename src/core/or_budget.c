/*
 * Copyright (C) ngx_omniroute authors
 *
 * Per-key budgets and rate limits (see or_budget.h).
 */


#include <string.h>

#include "or_budget.h"
#include "or_json.h"


#define OR_BUDGET_MINUTE_MS  ((or_msec_t) 60 * 1000)
#define OR_BUDGET_DAY_MS     ((or_msec_t) 86400 * 1000)
#define OR_BUDGET_LIMIT_MAX  ((uint64_t) 1 << 53)
#define OR_BUDGET_WAIT_MS    1000     /* the concurrency cap's retry */


static const char  *or_budget_names[OR_BUDGET_LIMITS] = {
    "requests_per_minute",
    "input_tokens_per_minute",
    "output_tokens_per_minute",
    "tokens_per_day",
    "tokens_per_month",
    "concurrent"
};


static void or_budget_civil(int64_t days, int64_t *y, int64_t *m);
static int64_t or_budget_days(int64_t y, int64_t m);
static void or_budget_amounts(uint64_t in, uint64_t out, uint64_t *a);
static void or_budget_roll(or_budget_win_t *w, uint64_t id);
static const char *or_budget_members(const char *p, const char *last,
    int top, uint64_t *found, int *seen);
static int or_budget_key(const char *p, const char *end, char *key);
static int or_budget_number(const char *p, const char *end, uint64_t *v);


/* the proleptic Gregorian date of a day number (0: 1970-01-01) */

static void
or_budget_civil(int64_t days, int64_t *y, int64_t *m)
{
    int64_t  z, era, doe, yoe, doy, mp;

    z = days + 719468;
    era = (z >= 0 ? z : z - 146096) / 146097;
    doe = z - era * 146097;
    yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    mp = (5 * doy + 2) / 153;

    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = yoe + era * 400 + (*m <= 2);
}


/* the day number of the first of month m (1..12) of year y */

static int64_t
or_budget_days(int64_t y, int64_t m)
{
    int64_t  era, yoe, doy, doe;

    y -= (m <= 2);
    era = (y >= 0 ? y : y - 399) / 400;
    yoe = y - era * 400;
    doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5;
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;

    return era * 146097 + doe - 719468;
}


uint64_t
or_budget_window(int k, or_msec_t now)
{
    int64_t  y, m;

    if (now < 0) {
        now = 0;
    }

    switch (k) {

    case OR_BUDGET_DAY:
        return (uint64_t) (now / OR_BUDGET_DAY_MS);

    case OR_BUDGET_MONTH:
        or_budget_civil(now / OR_BUDGET_DAY_MS, &y, &m);
        return (uint64_t) (y * 12 + (m - 1));

    default:
        return (uint64_t) (now / OR_BUDGET_MINUTE_MS);
    }
}


or_msec_t
or_budget_window_end(int k, or_msec_t now)
{
    int64_t  y, m;

    if (now < 0) {
        now = 0;
    }

    switch (k) {

    case OR_BUDGET_DAY:
        return (now / OR_BUDGET_DAY_MS + 1) * OR_BUDGET_DAY_MS;

    case OR_BUDGET_MONTH:
        or_budget_civil(now / OR_BUDGET_DAY_MS, &y, &m);

        if (++m > 12) {
            m = 1;
            y++;
        }

        return or_budget_days(y, m) * OR_BUDGET_DAY_MS;

    default:
        return (now / OR_BUDGET_MINUTE_MS + 1) * OR_BUDGET_MINUTE_MS;
    }
}


uint64_t
or_budget_input_estimate(size_t len)
{
    return ((uint64_t) len + OR_BUDGET_BYTES_PER_TOKEN - 1)
           / OR_BUDGET_BYTES_PER_TOKEN;
}


static void
or_budget_amounts(uint64_t in, uint64_t out, uint64_t *a)
{
    a[OR_BUDGET_REQUESTS] = 1;
    a[OR_BUDGET_INPUT] = in;
    a[OR_BUDGET_OUTPUT] = out;
    a[OR_BUDGET_DAY] = or_budget_add(in, out);
    a[OR_BUDGET_MONTH] = a[OR_BUDGET_DAY];
}


static void
or_budget_roll(or_budget_win_t *w, uint64_t id)
{
    if (w->window != id) {
        w->window = id;
        w->used = 0;
        w->reserved = 0;
        w->remote = 0;
        w->pushed = 0;
    }
}


uint64_t
or_budget_used(const or_budget_t *b, int k, or_msec_t now)
{
    if (k < 0 || k >= OR_BUDGET_WINDOWS
        || b->win[k].window != or_budget_window(k, now))
    {
        return 0;
    }

    return b->win[k].used;
}


uint64_t
or_budget_reserved(const or_budget_t *b, int k, or_msec_t now)
{
    if (k < 0 || k >= OR_BUDGET_WINDOWS
        || b->win[k].window != or_budget_window(k, now))
    {
        return 0;
    }

    return b->win[k].reserved;
}


uint64_t
or_budget_others(const or_budget_t *b, int k, or_msec_t now)
{
    if (k < 0 || k >= OR_BUDGET_WINDOWS
        || b->win[k].window != or_budget_window(k, now))
    {
        return 0;
    }

    return b->win[k].remote;
}


void
or_budget_remote(or_budget_t *b, int k, uint64_t window, uint64_t total,
    uint64_t mine)
{
    if (k < 0 || k >= OR_BUDGET_WINDOWS || b->win[k].window != window) {
        return;
    }

    b->win[k].pushed = mine;
    b->win[k].remote = or_budget_sub(total, mine);
}


int
or_budget_admit(or_budget_t *b, const or_budget_conf_t *c, or_msec_t now,
    uint64_t in, uint64_t out, or_budget_ticket_t *t, or_msec_t *retry)
{
    int        k, refused;
    uint64_t   a[OR_BUDGET_WINDOWS], taken, limit;
    or_msec_t  wait, longest;

    or_budget_amounts(in, out, a);

    refused = OR_BUDGET_NONE;
    longest = 0;

    for (k = 0; k < OR_BUDGET_WINDOWS; k++) {
        limit = c->limit[k];

        if (limit == 0) {
            continue;
        }

        if (a[k] > limit) {
            a[k] = limit;
        }

        taken = or_budget_add(or_budget_used(b, k, now),
                              or_budget_reserved(b, k, now));
        taken = or_budget_add(taken, or_budget_others(b, k, now));

        if (or_budget_add(taken, a[k]) > limit) {
            wait = or_budget_window_end(k, now) - now;

            if (refused == OR_BUDGET_NONE || wait > longest) {
                refused = k;
                longest = wait;
            }
        }
    }

    limit = c->limit[OR_BUDGET_CONCURRENT];

    if (limit && b->inflight >= limit && refused == OR_BUDGET_NONE) {
        refused = OR_BUDGET_CONCURRENT;
        longest = OR_BUDGET_WAIT_MS;
    }

    if (refused != OR_BUDGET_NONE) {
        if (retry) {
            *retry = longest;
        }

        return refused;
    }

    for (k = 0; k < OR_BUDGET_WINDOWS; k++) {
        or_budget_roll(&b->win[k], or_budget_window(k, now));
        b->win[k].reserved = or_budget_add(b->win[k].reserved, a[k]);

        t->amount[k] = a[k];
        t->window[k] = b->win[k].window;
    }

    b->inflight = or_budget_add(b->inflight, 1);
    t->admitted = 1;

    return OR_BUDGET_NONE;
}


void
or_budget_settle(or_budget_t *b, or_budget_ticket_t *t, or_msec_t now,
    uint64_t in, uint64_t out)
{
    int               k;
    uint64_t          real[OR_BUDGET_WINDOWS], id;
    or_budget_win_t  *w;

    if (!t->admitted) {
        return;
    }

    or_budget_amounts(in, out, real);

    for (k = 0; k < OR_BUDGET_WINDOWS; k++) {
        w = &b->win[k];
        id = or_budget_window(k, now);

        if (w->window == t->window[k] && id == t->window[k]) {
            /* the window it was reserved in goes on */
            w->reserved = or_budget_sub(w->reserved, t->amount[k]);
            w->used = or_budget_add(w->used, real[k]);
            continue;
        }

        /* that window ended: it keeps the estimate, the excess is now's */

        if (id > w->window) {
            or_budget_roll(w, id);
        }

        if (w->window == id) {
            w->used = or_budget_add(w->used,
                                    or_budget_sub(real[k], t->amount[k]));
        }
    }

    b->inflight = or_budget_sub(b->inflight, 1);
    t->admitted = 0;
}


void
or_budget_view(const or_budget_t *b, const or_budget_conf_t *c, int k,
    or_msec_t now, or_budget_view_t *v)
{
    uint64_t  taken;

    v->limit = 0;
    v->remaining = 0;
    v->reset = 0;

    if (k < 0 || k >= OR_BUDGET_LIMITS) {
        return;
    }

    v->limit = c->limit[k];

    if (k == OR_BUDGET_CONCURRENT) {
        v->remaining = or_budget_sub(v->limit, b->inflight);
        return;
    }

    taken = or_budget_add(or_budget_used(b, k, now),
                          or_budget_reserved(b, k, now));
    taken = or_budget_add(taken, or_budget_others(b, k, now));

    v->remaining = or_budget_sub(v->limit, taken);
    v->reset = or_budget_window_end(k, now) - now;
}


const char *
or_budget_name(int k)
{
    if (k < 0 || k >= OR_BUDGET_LIMITS) {
        return "none";
    }

    return or_budget_names[k];
}


int
or_budget_valid_limit(uint64_t v)
{
    return v >= 1 && v <= OR_BUDGET_LIMIT_MAX;
}


void
or_budget_cancel(or_budget_t *b, or_budget_ticket_t *t)
{
    int  k;

    if (!t->admitted) {
        return;
    }

    for (k = 0; k < OR_BUDGET_WINDOWS; k++) {
        if (b->win[k].window == t->window[k]) {
            b->win[k].reserved = or_budget_sub(b->win[k].reserved,
                                               t->amount[k]);
        }
    }

    b->inflight = or_budget_sub(b->inflight, 1);
    t->admitted = 0;
}


int
or_budget_max_tokens(const char *body, size_t len, uint64_t *out)
{
    int          seen;
    uint64_t     found;
    const char  *p, *last;

    p = body;
    last = body + len;
    found = 0;
    seen = 0;

    p = or_json_ws(p, last);

    if (p >= last || *p != '{') {
        return 0;
    }

    (void) or_budget_members(p, last, 1, &found, &seen);

    if (seen) {
        *out = found;
    }

    return seen;
}


/*
 * The members of the object at p: the caps of the top level (top), or
 * of "generationConfig"; the largest found.  Past the object, or NULL.
 */

static const char *
or_budget_members(const char *p, const char *last, int top, uint64_t *found,
    int *seen)
{
    int          k, got;
    char         key[OR_JSON_FIND_MAX + 1];
    uint64_t     v, caps[4];
    const char  *kend, *vstart;

    memset(caps, 0, sizeof(caps));
    got = 0;

    p = or_json_ws(p + 1, last);

    if (p < last && *p == '}') {
        return p + 1;
    }

    for ( ;; ) {
        p = or_json_ws(p, last);

        if (p >= last || *p != '"') {
            return NULL;
        }

        kend = or_json_string_end(p, last);
        if (kend == NULL) {
            return NULL;
        }

        k = or_budget_key(p, kend, key);

        p = or_json_ws(kend, last);

        if (p >= last || *p != ':') {
            return NULL;
        }

        vstart = or_json_ws(p + 1, last);

        if (top && k == 3 && vstart < last && *vstart == '{') {
            /* "generationConfig": its maxOutputTokens */
            p = or_budget_members(vstart, last, 0, found, seen);

        } else {
            p = or_json_skip(vstart, last, OR_JSON_MAX_DEPTH);

            if (p && k >= 0 && k != 3 && (top ? k < 3 : k == 4)
                && or_budget_number(vstart, p, &v))
            {
                /* the last of a name wins */
                caps[k == 4 ? 0 : k] = v;
                got |= 1 << (k == 4 ? 0 : k);

            } else if (p && k >= 0 && (top ? k < 3 : k == 4)) {
                got &= ~(1 << (k == 4 ? 0 : k));
            }
        }

        if (p == NULL) {
            return NULL;
        }

        p = or_json_ws(p, last);

        if (p >= last) {
            return NULL;
        }

        if (*p == ',') {
            p++;
            continue;
        }

        if (*p != '}') {
            return NULL;
        }

        break;
    }

    for (k = 0; k < 3; k++) {
        if ((got & (1 << k)) && (!*seen || caps[k] > *found)) {
            *found = caps[k];
            *seen = 1;
        }
    }

    return p + 1;
}


/*
 * 0 "max_tokens", 1 "max_completion_tokens", 2 "max_output_tokens",
 * 3 "generationConfig", 4 "maxOutputTokens"; -1 any other
 */

static int
or_budget_key(const char *p, const char *end, char *key)
{
    int          i;
    long         n;
    static const char  *names[] = {
        "max_tokens", "max_completion_tokens", "max_output_tokens",
        "generationConfig", "maxOutputTokens"
    };

    if ((size_t) (end - p) > OR_JSON_FIND_MAX + 1) {
        return -1;
    }

    n = or_json_string_decode(p, end - p, key);

    if (n < 0) {
        return -1;
    }

    for (i = 0; i < 5; i++) {
        if ((size_t) n == strlen(names[i]) && memcmp(key, names[i], n) == 0)
        {
            return i;
        }
    }

    return -1;
}


/* a non-negative integer (an exponent or a fraction: not one) */

static int
or_budget_number(const char *p, const char *end, uint64_t *v)
{
    uint64_t  n;

    if (p >= end) {
        return 0;
    }

    n = 0;

    for ( /* void */ ; p < end; p++) {
        if (*p < '0' || *p > '9') {
            return 0;
        }

        n = (n > ((uint64_t) 1 << 53)) ? n : n * 10 + (uint64_t) (*p - '0');
    }

    *v = n;

    return 1;
}
