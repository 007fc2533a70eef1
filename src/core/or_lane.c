/*
 * Copyright (C) ngx_omniroute authors
 */


#include <string.h>

#include "or_lane.h"


#define OR_LANE_PREFIX  "anthropic-ratelimit-unified-"


static int or_lane_eq_ci(const char *a, size_t alen, const char *b);
static int or_lane_name(const or_header_t *h, const char *suffix);
static void or_lane_trim(const char **p, size_t *len);
static or_msec_t or_lane_at(const char *v, size_t len, or_msec_t now);
static or_msec_t or_lane_secs(const char *v, size_t len);
static or_msec_t or_lane_clamp(or_msec_t v, or_msec_t dflt, or_msec_t lo,
    or_msec_t hi);
static int or_lane_ends(or_lane_slow_e slow, or_lane_end_e *end);
static void or_lane_wait(const or_lane_headers_t *h,
    const or_lane_req_t *req, or_msec_t now, or_lane_verdict_t *v);
static const char *or_lane_next_value(const char *body, const char *end,
    const char *key, size_t klen, const char **pos);
static const char *or_lane_ws(const char *p, const char *end);
static int or_lane_block(const char *body, size_t len, const char *key,
    const char **start, size_t *blen);
static int or_lane_member(const char *body, size_t len, const char *key,
    const char **v, size_t *vlen);


static const char  *or_lane_phases[] = { "none", "active", "ended" };

static const char  *or_lane_ends_names[] = {
    "none", "max_wait", "weekly_limit", "budget_exhausted", "off",
    "ineligible", "extra_usage"
};

static const char  *or_reset_results[] = {
    "none", "reset", "not_limited", "already_used", "not_offered",
    "unavailable", "failed"
};


static int
or_lane_eq_ci(const char *a, size_t alen, const char *b)
{
    size_t         i, blen;
    unsigned char  c;

    blen = strlen(b);

    if (alen != blen) {
        return 0;
    }

    for (i = 0; i < alen; i++) {
        c = (unsigned char) a[i];

        if (c >= 'A' && c <= 'Z') {
            c = (unsigned char) (c | 0x20);
        }

        if (c != (unsigned char) b[i]) {
            return 0;
        }
    }

    return 1;
}


/* "anthropic-ratelimit-unified-" suffix */

static int
or_lane_name(const or_header_t *h, const char *suffix)
{
    size_t  pl;

    pl = sizeof(OR_LANE_PREFIX) - 1;

    if (h->name_len <= pl) {
        return 0;
    }

    return or_lane_eq_ci(h->name, pl, OR_LANE_PREFIX)
           && or_lane_eq_ci(h->name + pl, h->name_len - pl, suffix);
}


static void
or_lane_trim(const char **p, size_t *len)
{
    while (*len && (**p == ' ' || **p == '\t')) {
        (*p)++;
        (*len)--;
    }

    while (*len && ((*p)[*len - 1] == ' ' || (*p)[*len - 1] == '\t')) {
        (*len)--;
    }
}


/*
 * An announced time, absolute: epoch seconds as they are (also in the
 * past: a window that just ended), else whatever or_retry_reset() reads
 * (epoch ms, RFC 3339, HTTP date; past ones are now).
 */

static or_msec_t
or_lane_at(const char *v, size_t len, or_msec_t now)
{
    size_t     i;
    int64_t    s;
    or_msec_t  rel;

    or_lane_trim(&v, &len);

    if (len >= 10 && len <= 11) {
        s = 0;

        for (i = 0; i < len && v[i] >= '0' && v[i] <= '9'; i++) {
            s = s * 10 + (v[i] - '0');
        }

        if (i == len) {
            return (or_msec_t) s * 1000;
        }
    }

    rel = or_retry_reset(v, len, now);

    if (rel == OR_MSEC_NONE) {
        return OR_MSEC_NONE;
    }

    return or_msec_add(now, rel);
}


/* a number of seconds (or a duration); NONE otherwise */

static or_msec_t
or_lane_secs(const char *v, size_t len)
{
    return or_retry_duration(v, len);
}


static or_msec_t
or_lane_clamp(or_msec_t v, or_msec_t dflt, or_msec_t lo, or_msec_t hi)
{
    if (v == OR_MSEC_NONE) {
        v = dflt;
    }

    if (v < lo) {
        return lo;
    }

    return (v > hi) ? hi : v;
}


void
or_lane_parse(const or_header_t *headers, size_t n, or_msec_t now,
    or_lane_headers_t *out)
{
    size_t              i, len;
    const char         *v;
    const or_header_t  *h;

    memset(out, 0, sizeof(or_lane_headers_t));
    out->reset = OR_MSEC_NONE;
    out->budget_reset = OR_MSEC_NONE;
    out->retry_after = OR_MSEC_NONE;
    out->max_wait = OR_MSEC_NONE;

    for (i = 0; headers && i < n; i++) {
        h = &headers[i];

        if (h->name == NULL || h->value == NULL) {
            continue;
        }

        v = h->value;
        len = h->value_len;
        or_lane_trim(&v, &len);

        if (or_lane_name(h, "status")) {
            out->rejected = or_lane_eq_ci(v, len, "rejected");

        } else if (or_lane_name(h, "slow-offer")) {
            out->offer = or_lane_eq_ci(v, len, "treatment");

        } else if (or_lane_name(h, "overage-in-use")) {
            out->overage = or_lane_eq_ci(v, len, "true");

        } else if (or_lane_name(h, "slow-status")) {

            if (or_lane_eq_ci(v, len, "active")) {
                out->slow = OR_LANE_SLOW_ACTIVE;

            } else if (or_lane_eq_ci(v, len, "not_needed")) {
                out->slow = OR_LANE_SLOW_NOT_NEEDED;

            } else if (or_lane_eq_ci(v, len, "slot_busy")) {
                out->slow = OR_LANE_SLOW_SLOT_BUSY;

            } else if (or_lane_eq_ci(v, len, "weekly_limit")) {
                out->slow = OR_LANE_SLOW_WEEKLY_LIMIT;

            } else if (or_lane_eq_ci(v, len, "budget_exhausted")) {
                out->slow = OR_LANE_SLOW_BUDGET_EXHAUSTED;

            } else if (or_lane_eq_ci(v, len, "off")) {
                out->slow = OR_LANE_SLOW_OFF;

            } else if (or_lane_eq_ci(v, len, "ineligible")) {
                out->slow = OR_LANE_SLOW_INELIGIBLE;

            } else {
                out->slow = OR_LANE_SLOW_OTHER;
            }

        } else if (or_lane_name(h, "reset")) {
            out->reset = or_lane_at(v, len, now);

        } else if (or_lane_name(h, "slow-budget-reset")) {
            out->budget_reset = or_lane_at(v, len, now);

        } else if (or_lane_name(h, "slow-retry-after")) {
            out->retry_after = or_lane_secs(v, len);

        } else if (or_lane_name(h, "slow-max-wait")) {
            out->max_wait = or_lane_secs(v, len);
        }
    }
}


int
or_lane_active(const or_lane_t *l, or_msec_t now)
{
    return l != NULL && l->phase == OR_LANE_PHASE_ACTIVE && now < l->until;
}


int
or_lane_blocked(const or_lane_t *l, or_msec_t now)
{
    return l != NULL && l->phase == OR_LANE_PHASE_ENDED
           && now < l->block_until;
}


static int
or_lane_ends(or_lane_slow_e slow, or_lane_end_e *end)
{
    switch (slow) {

    case OR_LANE_SLOW_WEEKLY_LIMIT:
        *end = OR_LANE_END_WEEKLY_LIMIT;
        return 1;

    case OR_LANE_SLOW_BUDGET_EXHAUSTED:
        *end = OR_LANE_END_BUDGET_EXHAUSTED;
        return 1;

    case OR_LANE_SLOW_OFF:
        *end = OR_LANE_END_OFF;
        return 1;

    case OR_LANE_SLOW_INELIGIBLE:
        *end = OR_LANE_END_INELIGIBLE;
        return 1;

    default:
        return 0;
    }
}


/*
 * R-LANE-4: the server's slow-retry-after (20 s, clamped to 5..600 s,
 * +-30 % jitter), while the deadline allows: the request's first slot_busy
 * plus slow-max-wait (20 min, clamped to 1 min..6 h), and the request's
 * budget less 5 s.  Past it: the lane ends, and a cool-off of 10 min.
 */

static void
or_lane_wait(const or_lane_headers_t *h, const or_lane_req_t *req,
    or_msec_t now, or_lane_verdict_t *v)
{
    or_msec_t  retry, max_wait, start, deadline, budget;

    retry = or_lane_clamp(h->retry_after, OR_LANE_RETRY_DEFAULT_MS,
                          OR_LANE_RETRY_MIN_MS, OR_LANE_RETRY_MAX_MS);
    max_wait = or_lane_clamp(h->max_wait, OR_LANE_MAX_WAIT_DEFAULT_MS,
                             OR_LANE_MAX_WAIT_MIN_MS,
                             OR_LANE_MAX_WAIT_MAX_MS);

    /* 70 % .. 130 % */
    retry = retry * (100 - OR_LANE_JITTER_PCT
                     + (or_msec_t) (req->rnd % (2 * OR_LANE_JITTER_PCT + 1)))
            / 100;

    start = (req->wait_start == OR_MSEC_NONE || req->wait_start > now)
            ? now : req->wait_start;
    deadline = or_msec_add(start, max_wait);

    if (req->budget_left != OR_MSEC_NONE) {
        budget = req->budget_left - OR_LANE_BUDGET_MARGIN_MS;

        if (budget < 0) {
            budget = 0;
        }

        if (or_msec_add(now, budget) < deadline) {
            deadline = or_msec_add(now, budget);
        }
    }

    if (now >= deadline) {
        v->action = OR_LANE_END;
        v->end = OR_LANE_END_MAX_WAIT;
        v->block_until = now + OR_LANE_COOL_OFF_MS;
        return;
    }

    v->action = OR_LANE_WAIT;
    v->wait_ms = (or_msec_add(now, retry) > deadline) ? deadline - now : retry;
}


void
or_lane_decide(const or_lane_t *l, int status, const or_lane_headers_t *h,
    const or_lane_req_t *req, or_msec_t now, or_lane_verdict_t *v)
{
    or_msec_t     until, cap;
    or_lane_end_e end;

    memset(v, 0, sizeof(or_lane_verdict_t));
    v->action = OR_LANE_PASS;

    if (or_lane_active(l, now) && req->slow_sent) {

        /* R-LANE-3, R-LANE-5: a response in the lane */

        if (h->overage) {
            v->action = OR_LANE_END;
            v->end = OR_LANE_END_EXTRA_USAGE;
            return;
        }

        if (or_lane_ends(h->slow, &end)) {
            v->action = OR_LANE_END;
            v->end = end;

            if (end == OR_LANE_END_BUDGET_EXHAUSTED) {
                until = (h->budget_reset != OR_MSEC_NONE) ? h->budget_reset
                                                          : h->reset;
                cap = now + OR_LANE_SPAN_MAX_MS;

                v->block_until = (until == OR_MSEC_NONE || until > cap)
                                 ? cap : until;
            }

            return;
        }

        if (status == 529 || status == 429) {
            or_lane_wait(h, req, now, v);
        }

        return;
    }

    /* R-LANE-1, R-LANE-2: the wall */

    if (status != 429 || !h->rejected || h->overage) {
        return;
    }

    if (or_lane_ends(h->slow, &end)) {
        v->action = OR_LANE_END;
        v->end = end;

        if (end == OR_LANE_END_BUDGET_EXHAUSTED) {
            until = (h->budget_reset != OR_MSEC_NONE) ? h->budget_reset
                                                      : h->reset;
            cap = now + OR_LANE_SPAN_MAX_MS;

            v->block_until = (until == OR_MSEC_NONE || until > cap)
                             ? cap : until;
        }

        return;
    }

    if (!h->offer || or_lane_blocked(l, now)) {
        return;
    }

    until = (h->reset != OR_MSEC_NONE) ? h->reset : now + OR_LANE_WINDOW_MS;
    until = or_msec_add(until, OR_LANE_GRACE_MS);

    if (until <= now) {
        /* the announced window is over already: not a lane matter */
        return;
    }

    if (until > now + OR_LANE_SPAN_MAX_MS) {
        until = now + OR_LANE_SPAN_MAX_MS;
    }

    if (or_lane_active(l, now) && l->until > until) {
        until = l->until;
    }

    v->action = OR_LANE_ENTER;
    v->until = until;
}


int
or_lane_apply(or_lane_t *l, const or_lane_verdict_t *v, or_msec_t now)
{
    switch (v->action) {

    case OR_LANE_ENTER:

        if (or_lane_active(l, now)) {
            if (l->until >= v->until) {
                return 0;
            }

        } else {
            l->entered_at = now;
            l->entries++;
        }

        l->phase = OR_LANE_PHASE_ACTIVE;
        l->end = OR_LANE_END_NONE;
        l->until = v->until;
        l->ended_at = 0;
        l->block_until = 0;
        break;

    case OR_LANE_WAIT:
        l->waits++;
        break;

    case OR_LANE_END:

        if (l->phase == OR_LANE_PHASE_ENDED && l->end == v->end
            && l->block_until >= v->block_until)
        {
            return 0;
        }

        l->phase = OR_LANE_PHASE_ENDED;
        l->end = (uint8_t) v->end;
        l->ended_at = now;
        l->until = 0;

        if (v->block_until > l->block_until) {
            l->block_until = v->block_until;
        }

        break;

    default:
        return 0;
    }

    if (now > l->changed_at) {
        l->changed_at = now;

    } else {
        l->changed_at++;
    }

    return 1;
}


/* kept while it means something, and an hour after, for the API */

or_msec_t
or_lane_expires(const or_lane_t *l, or_msec_t now)
{
    or_msec_t  e;

    e = l->changed_at;

    if (l->until > e) {
        e = l->until;
    }

    if (l->block_until > e) {
        e = l->block_until;
    }

    if (l->reset_next_at > e) {
        e = l->reset_next_at;
    }

    e = or_msec_add(e, (or_msec_t) 3600 * 1000);

    return (e > now) ? e : now + 1;
}


int
or_lane_reset_due(const or_lane_t *l, or_msec_t now)
{
    return l == NULL || now >= l->reset_next_at;
}


/*
 * The value of the next member named key (its quoted key matched without
 * regard to case) in [*pos, end), whitespace skipped: NULL when there is
 * none; *pos moves past the key, for the next search.
 */

static const char *
or_lane_next_value(const char *body, const char *end, const char *key,
    size_t klen, const char **pos)
{
    const char  *p, *q;

    for ( ;; ) {
        q = or_memcasemem(*pos, end - *pos, key, klen);

        if (q == NULL) {
            return NULL;
        }

        p = q + klen;
        *pos = p;

        if (q == body || q[-1] != '"' || p >= end || *p != '"') {
            continue;
        }

        p = or_lane_ws(p + 1, end);

        if (p >= end || *p != ':') {
            continue;
        }

        p = or_lane_ws(p + 1, end);

        return (p < end) ? p : NULL;
    }
}


static const char *
or_lane_ws(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r'
                       || *p == '\n'))
    {
        p++;
    }

    return p;
}


/*
 * The span of the object value of the first member named key (a bounded
 * walk: strings skipped with their escapes, braces counted); 0: none.
 */

static int
or_lane_block(const char *body, size_t len, const char *key,
    const char **start, size_t *blen)
{
    size_t       klen, i, depth;
    const char  *p, *end, *pos;

    klen = strlen(key);
    end = body + len;
    pos = body;

    for ( ;; ) {
        p = or_lane_next_value(body, end, key, klen, &pos);

        if (p == NULL) {
            return 0;
        }

        if (*p != '{') {
            continue;
        }

        depth = 0;

        for (i = 0; p + i < end; i++) {

            if (p[i] == '"') {
                for (i++; p + i < end && p[i] != '"'; i++) {
                    if (p[i] == '\\') {
                        i++;
                    }
                }

                if (p + i >= end) {
                    return 0;
                }

                continue;
            }

            if (p[i] == '{') {
                depth++;

            } else if (p[i] == '}' && --depth == 0) {
                *start = p;
                *blen = i + 1;
                return 1;
            }
        }

        return 0;
    }
}


/*
 * The value of member key in body (the first one): a string's contents
 * (no unescaping: the values read here are plain words and dates) or a
 * literal's bytes; 0: none.
 */

static int
or_lane_member(const char *body, size_t len, const char *key,
    const char **v, size_t *vlen)
{
    const char  *p, *end, *pos, *s;

    end = body + len;
    pos = body;

    p = or_lane_next_value(body, end, key, strlen(key), &pos);

    if (p == NULL) {
        return 0;
    }

    if (*p == '"') {
        s = ++p;

        while (p < end && *p != '"' && *p != '\\') {
            p++;
        }

        if (p >= end || *p != '"') {
            return 0;
        }

        *v = s;
        *vlen = p - s;
        return 1;
    }

    s = p;

    while (p < end && *p != ',' && *p != '}' && *p != ']' && *p != ' '
           && *p != '\t' && *p != '\r' && *p != '\n')
    {
        p++;
    }

    *v = s;
    *vlen = p - s;

    return *vlen > 0;
}


int
or_lane_usage_parse(const char *body, size_t len, or_msec_t now,
    or_msec_t *next_at)
{
    int          arm, available;
    size_t       blen, vlen;
    const char  *b, *v;

    *next_at = OR_MSEC_NONE;

    if (body == NULL || !or_lane_block(body, len, "juniper_tide", &b, &blen)) {
        return 0;
    }

    arm = or_lane_member(b, blen, "arm", &v, &vlen)
          && or_lane_eq_ci(v, vlen, "reset");
    available = or_lane_member(b, blen, "available", &v, &vlen)
                && or_lane_eq_ci(v, vlen, "true");

    if (or_lane_member(b, blen, "next_available_at", &v, &vlen)) {
        *next_at = or_lane_at(v, vlen, now);
    }

    return arm && available;
}


or_reset_result_e
or_lane_claim_parse(const char *body, size_t len, or_msec_t now,
    or_msec_t *next_at)
{
    size_t       vlen;
    const char  *v;

    *next_at = OR_MSEC_NONE;

    if (body == NULL) {
        return OR_RESET_FAILED;
    }

    if (or_lane_member(body, len, "next_available_at", &v, &vlen)) {
        *next_at = or_lane_at(v, vlen, now);
    }

    if (!or_lane_member(body, len, "result", &v, &vlen)) {
        return OR_RESET_FAILED;
    }

    if (or_lane_eq_ci(v, vlen, "reset")) {
        return OR_RESET_RESET;
    }

    if (or_lane_eq_ci(v, vlen, "not_limited")) {
        return OR_RESET_NOT_LIMITED;
    }

    if (or_lane_eq_ci(v, vlen, "already_used")) {
        return OR_RESET_ALREADY_USED;
    }

    if (or_lane_eq_ci(v, vlen, "not_offered")) {
        return OR_RESET_NOT_OFFERED;
    }

    return OR_RESET_FAILED;
}


/*
 * R-LANE-7: a reset claimed (or not needed) and the offer used or
 * refused are memoised until next_available_at (default one week, at most
 * 8 days); a failure backs off 15 min.
 */

int
or_lane_reset_record(or_lane_t *l, or_reset_result_e result,
    or_msec_t next_at, or_msec_t now)
{
    or_msec_t  next;

    if (result <= OR_RESET_NONE || result >= OR_RESET_COUNT) {
        return 0;
    }

    if (result == OR_RESET_FAILED) {
        next = now + OR_LANE_RESET_BACKOFF_MS;

    } else {
        next = (next_at != OR_MSEC_NONE && next_at > now)
               ? next_at : now + OR_LANE_RESET_NEXT_MS;

        if (next > now + OR_LANE_SPAN_MAX_MS) {
            next = now + OR_LANE_SPAN_MAX_MS;
        }
    }

    if (result == OR_RESET_RESET) {
        l->reset_at = now;
    }

    l->reset_result = (uint8_t) result;
    l->reset_next_at = next;

    if (now > l->changed_at) {
        l->changed_at = now;

    } else {
        l->changed_at++;
    }

    return 1;
}


const char *
or_lane_valid(const void *value, size_t size, or_msec_t now)
{
    size_t            i;
    or_msec_t         hi;
    const or_lane_t  *l;

    if (size != sizeof(or_lane_t)) {
        return "size";
    }

    l = value;

    if (now < 0) {
        now = 0;
    }

    hi = or_msec_add(now, OR_VALID_SKEW_MS);

    if (l->phase >= OR_LANE_PHASE_COUNT) {
        return "phase";
    }

    if (l->end >= OR_LANE_END_COUNT
        || (l->phase == OR_LANE_PHASE_ENDED) != (l->end != OR_LANE_END_NONE))
    {
        return "end";
    }

    if (l->reset_result >= OR_RESET_COUNT) {
        return "reset_result";
    }

    for (i = 0; i < sizeof(l->reserved); i++) {
        if (l->reserved[i] != 0) {
            return "reserved";
        }
    }

    if (l->changed_at < 0 || l->changed_at > hi) {
        return "changed_at";
    }

    if (l->entered_at < 0 || l->entered_at > l->changed_at) {
        return "entered_at";
    }

    if (l->ended_at < 0 || l->ended_at > l->changed_at) {
        return "ended_at";
    }

    if (l->reset_at < 0 || l->reset_at > l->changed_at) {
        return "reset_at";
    }

    if (l->until < 0
        || (l->phase == OR_LANE_PHASE_ACTIVE
            && (l->until <= l->entered_at
                || l->until > or_msec_add(l->changed_at,
                                          OR_LANE_SPAN_MAX_MS)))
        || (l->phase != OR_LANE_PHASE_ACTIVE && l->until != 0))
    {
        return "until";
    }

    if (l->block_until < 0
        || l->block_until > or_msec_add(l->changed_at, OR_LANE_SPAN_MAX_MS)
        || (l->phase != OR_LANE_PHASE_ENDED && l->block_until != 0))
    {
        return "block_until";
    }

    if (l->reset_next_at < 0
        || l->reset_next_at > or_msec_add(l->changed_at, OR_LANE_SPAN_MAX_MS))
    {
        return "reset_next_at";
    }

    return NULL;
}


int
or_lane_merge(or_lane_t *dst, const or_lane_t *src)
{
    if (src->changed_at < dst->changed_at) {
        return 0;
    }

    if (src->changed_at == dst->changed_at
        && memcmp(src, dst, sizeof(or_lane_t)) <= 0)
    {
        return 0;
    }

    memcpy(dst, src, sizeof(or_lane_t));

    return 1;
}


const char *
or_lane_phase_name(unsigned phase)
{
    return phase < OR_LANE_PHASE_COUNT ? or_lane_phases[phase] : "unknown";
}


const char *
or_lane_end_name(unsigned end)
{
    return end < OR_LANE_END_COUNT ? or_lane_ends_names[end] : "unknown";
}


const char *
or_reset_result_name(unsigned result)
{
    return result < OR_RESET_COUNT ? or_reset_results[result] : "unknown";
}
