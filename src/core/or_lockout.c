/*
 * Copyright (C) ngx_omniroute authors
 *
 * Model lockout; see or_lockout.h.
 */


#include <string.h>

#include "or_lockout.h"


#define OR_LO_SEC  1000LL
#define OR_LO_MIN  (60 * OR_LO_SEC)


static size_t or_model_strip(const char *m, size_t len);
static size_t or_model_digits(const char *m, size_t len);
static int or_model_num(const char *p, size_t n);
static int or_lockout_casecmp(const char *a, const char *b, size_t n);
static char *or_lockout_cpy(char *p, const char *s, size_t n);
static void or_lockout_restart(or_lockout_t *lo);
static void or_lockout_record(or_lockout_t *lo, int status,
    or_reason_e reason, or_scope_e scope, or_msec_t now);


static const int32_t  or_lockout_codes[] = { 403, 404, 429, 502, 503, 504 };


void
or_lockout_conf_init(or_lockout_conf_t *conf)
{
    memset(conf, 0, sizeof(or_lockout_conf_t));

    conf->enabled = OR_UNSET;
    conf->n_codes = OR_UNSET;
    conf->base_ms = OR_MSEC_NONE;
    conf->max_ms = OR_MSEC_NONE;
    conf->max_backoff_steps = OR_UNSET;
    conf->exponential = OR_UNSET;
    conf->window_ms = OR_MSEC_NONE;
}


void
or_lockout_conf_fill(or_lockout_conf_t *conf)
{
    size_t  i;

    if (conf->enabled == OR_UNSET) {
        conf->enabled = 0;
    }

    if (conf->n_codes == OR_UNSET) {
        conf->n_codes = (int32_t) (sizeof(or_lockout_codes)
                                   / sizeof(or_lockout_codes[0]));

        for (i = 0; i < (size_t) conf->n_codes; i++) {
            conf->codes[i] = or_lockout_codes[i];
        }
    }

    if (conf->base_ms == OR_MSEC_NONE) {
        conf->base_ms = 120 * OR_LO_SEC;
    }

    if (conf->max_ms == OR_MSEC_NONE) {
        conf->max_ms = 30 * OR_LO_MIN;
    }

    if (conf->max_backoff_steps == OR_UNSET) {
        conf->max_backoff_steps = 10;
    }

    if (conf->exponential == OR_UNSET) {
        conf->exponential = 1;
    }

    if (conf->window_ms == OR_MSEC_NONE) {
        conf->window_ms = conf->max_ms;
    }
}


void
or_lockout_conf_rejected(or_lockout_conf_t *conf)
{
    or_lockout_conf_init(conf);

    conf->enabled = 1;
    conf->n_codes = 0;
    conf->base_ms = 5 * OR_LO_MIN;
    conf->max_ms = 60 * OR_LO_MIN;
    conf->window_ms = 60 * OR_LO_MIN;

    or_lockout_conf_fill(conf);
}


const char *
or_lockout_conf_check(const or_lockout_conf_t *conf)
{
    int32_t  i;

    if (conf->base_ms <= 0 || conf->base_ms > OR_LOCKOUT_MAX_MS) {
        return "lockout base_cooldown must be positive and at most 30 days";
    }

    if (conf->max_ms < conf->base_ms) {
        return "lockout max_cooldown must be at least base_cooldown";
    }

    if (conf->max_ms > OR_LOCKOUT_MAX_MS) {
        return "lockout max_cooldown must be at most 30 days";
    }

    if (conf->max_backoff_steps < 0
        || conf->max_backoff_steps > OR_LOCKOUT_MAX_STEPS)
    {
        return "lockout max_backoff_steps must be between 0 and 30";
    }

    if (conf->n_codes < 0 || conf->n_codes > OR_LOCKOUT_CODES_MAX) {
        return "lockout error_codes: at most 16 codes";
    }

    for (i = 0; i < conf->n_codes; i++) {
        if (conf->codes[i] < 100 || conf->codes[i] > 599) {
            return "lockout error_codes must be HTTP statuses 100-599";
        }
    }

    if (conf->window_ms < 0 || conf->window_ms > OR_LOCKOUT_MAX_MS) {
        return "lockout escalation window must be between 0 and 30 days";
    }

    return NULL;
}


int
or_lockout_applies(const or_lockout_conf_t *conf, int status,
    or_scope_e rule_scope)
{
    int32_t  i;

    if (conf->enabled <= 0) {
        return 0;
    }

    switch (rule_scope) {
    case OR_SCOPE_MODEL:
    case OR_SCOPE_BASE_MODEL:
    case OR_SCOPE_QUOTA_FAMILY:
        return 1;

    default:
        break;
    }

    for (i = 0; i < conf->n_codes; i++) {
        if (conf->codes[i] == status) {
            return 1;
        }
    }

    return 0;
}


or_scope_e
or_lockout_scope(int status, or_scope_e rule_scope)
{
    switch (rule_scope) {
    case OR_SCOPE_MODEL:
    case OR_SCOPE_BASE_MODEL:
    case OR_SCOPE_QUOTA_FAMILY:
        return rule_scope;

    default:
        break;
    }

    switch (status) {
    case 402:
    case 403:
    case 429:
        return OR_SCOPE_QUOTA_FAMILY;

    case 404:
        return OR_SCOPE_BASE_MODEL;

    default:
        return OR_SCOPE_MODEL;
    }
}


or_msec_t
or_lockout_cooldown_ms(const or_lockout_conf_t *conf, unsigned failures)
{
    unsigned   exp;
    or_msec_t  d;

    d = conf->base_ms;

    if (conf->exponential > 0 && failures > 1) {
        exp = failures - 1;

        if (exp > (unsigned) conf->max_backoff_steps) {
            exp = (unsigned) conf->max_backoff_steps;
        }

        while (exp-- > 0 && d < conf->max_ms) {
            d *= 2;
        }
    }

    return d < conf->max_ms ? d : conf->max_ms;
}


size_t
or_model_base(const char *model, size_t len)
{
    int     i;
    size_t  n;

    for (i = 0; i < 16; i++) {
        n = or_model_strip(model, len);

        if (n == len) {
            break;
        }

        len = n;
    }

    return len;
}


const char *
or_model_family(const or_family_rule_t *rules, size_t nrules,
    const char *model, size_t len, size_t *flen)
{
    size_t                   i, plen, best;
    const or_family_rule_t  *r, *found;

    found = NULL;
    best = 0;

    for (i = 0; i < nrules; i++) {
        r = &rules[i];

        if (r->prefix == NULL) {
            continue;
        }

        plen = strlen(r->prefix);

        if (plen > 0 && r->prefix[plen - 1] == '*') {
            plen--;
        }

        if (plen == 0 || plen > len || (found != NULL && plen <= best)) {
            continue;
        }

        if (or_lockout_casecmp(r->prefix, model, plen) == 0) {
            found = r;
            best = plen;
        }
    }

    if (found == NULL) {
        return NULL;
    }

    if (found->family != NULL && found->family[0] != '\0') {
        *flen = strlen(found->family);
        return found->family;
    }

    *flen = best;

    return found->prefix;
}


size_t
or_lockout_key(char *buf, size_t size, const char *provider, size_t plen,
    const char *conn, size_t clen, const char *model, size_t mlen,
    or_scope_e scope, const or_family_rule_t *rules, size_t nrules)
{
    char        *p;
    size_t       nlen, tlen;
    const char  *tag, *name;

    name = model;
    nlen = mlen;

    switch (scope) {

    case OR_SCOPE_MODEL:
        tag = "exact";
        break;

    case OR_SCOPE_BASE_MODEL:
        tag = "base";
        nlen = or_model_base(model, mlen);
        break;

    case OR_SCOPE_QUOTA_FAMILY:
        tag = "family";
        name = or_model_family(rules, nrules, model, mlen, &nlen);
        if (name == NULL) {
            name = model;
            nlen = mlen;
        }
        break;

    default:
        return 0;
    }

    tlen = strlen(tag);

    if (mlen == 0 || plen + clen + tlen + nlen + 3 >= size) {
        return 0;
    }

    p = or_lockout_cpy(buf, provider, plen);
    *p++ = ':';
    p = or_lockout_cpy(p, conn, clen);
    *p++ = ':';
    p = or_lockout_cpy(p, tag, tlen);
    *p++ = ':';
    p = or_lockout_cpy(p, name, nlen);
    *p = '\0';

    return (size_t) (p - buf);
}


void
or_lockout_fail(const or_lockout_conf_t *conf, or_lockout_t *lo,
    const or_verdict_t *v, int status, or_scope_e scope, or_msec_t start,
    or_msec_t now, or_lockout_result_t *res)
{
    unsigned             n;
    or_msec_t            d, hint, anchor;
    or_reason_e          reason;
    or_lockout_t         old;
    or_lockout_result_t  dummy;

    if (res == NULL) {
        res = &dummy;
    }

    old = *lo;

    if (start < 0) {
        start = now;
    }

    reason = (v != NULL) ? v->reason : OR_REASON_NONE;
    hint = (v != NULL && v->hint_ms > 0) ? v->hint_ms : 0;

    if (hint > OR_LOCKOUT_MAX_MS) {
        hint = OR_LOCKOUT_MAX_MS;
    }

    if (lo->mark_at > 0 && start <= lo->mark_at) {
        /* absorbed: in flight when the last counted failure happened */
        n = lo->failures > 0 ? lo->failures : 1;
        anchor = lo->mark_at;
        res->action = OR_LO_ABSORBED;

    } else {
        if (lo->failures > 0
            && now > or_msec_add(lo->until, conf->window_ms))
        {
            or_lockout_restart(lo);     /* outside the escalation window */
        }

        lo->failures = or_count_next(lo->failures);

        n = lo->failures;
        anchor = now;

        if (now > lo->mark_at) {
            lo->mark_at = now;
        }

        res->action = OR_LO_LOCKED;
    }

    if (v != NULL && v->cooldown_ms > 0) {
        d = v->cooldown_ms < OR_LOCKOUT_MAX_MS ? v->cooldown_ms
                                               : OR_LOCKOUT_MAX_MS;

        /* a built-in rule's cooldown never exceeds the lockout's max */
        if (v->lockout_capped && conf->max_ms > 0 && d > conf->max_ms) {
            d = conf->max_ms;
        }

    } else {
        d = or_lockout_cooldown_ms(conf, n);
    }

    if (or_msec_add(anchor, d) > lo->until) {
        lo->until = or_msec_add(anchor, d);
    }

    if (hint > 0 && or_msec_add(now, hint) > lo->until) {
        lo->until = or_msec_add(now, hint);
    }

    or_lockout_record(lo, status, reason, scope, now);

    res->cooldown_ms = d;
    res->until = lo->until;
    res->failures = lo->failures;
    res->changed = !or_lockout_equal(&old, lo);
}


or_lo_decay_e
or_lockout_success(or_lockout_t *lo, or_msec_t start, or_msec_t now)
{
    if (start < 0) {
        start = now;
    }

    if (lo->failures == 0
        || (lo->mark_at > 0 && start <= lo->mark_at)
        || (lo->decay_at > 0 && start <= lo->decay_at))
    {
        return OR_LO_KEPT;
    }

    /* R-ML-4: halve (floor); a decrease needs a new epoch to merge */
    lo->failures /= 2;

    if (lo->failures > 0) {
        lo->epoch = or_count_next(lo->epoch);

        if (now > lo->decay_at) {
            lo->decay_at = now;
        }

        return OR_LO_HALVED;
    }

    or_lockout_restart(lo);

    return OR_LO_DELETED;
}


int
or_lockout_clear(or_lockout_t *lo)
{
    if (lo->failures == 0 && lo->until == 0 && lo->mark_at == 0
        && lo->decay_at == 0)
    {
        return 0;
    }

    or_lockout_restart(lo);

    return 1;
}


int
or_lockout_active(const or_lockout_t *lo, or_msec_t now)
{
    return lo->until > now;
}


or_msec_t
or_lockout_retry_after(const or_lockout_t *lo, or_msec_t now)
{
    return lo->until > now ? lo->until - now : 0;
}


int
or_lockout_evictable(const or_lockout_conf_t *conf, const or_lockout_t *lo,
    or_msec_t now)
{
    if (lo->failures == 0) {
        return lo->until <= now;
    }

    /* expired and past the escalation window: nothing left to remember */
    return now > or_msec_add(lo->until, conf->window_ms);
}


const char *
or_lockout_valid(const void *value, size_t size, or_msec_t now)
{
    or_msec_t            event, expiry;
    const or_lockout_t  *lo;

    if (size != sizeof(or_lockout_t)) {
        return "size";
    }

    lo = value;

    if (now < 0) {
        now = 0;
    }

    event = or_msec_add(now, OR_VALID_SKEW_MS);
    expiry = or_msec_add(event, OR_LOCKOUT_MAX_MS);

    if (lo->reason >= OR_REASON_COUNT) {
        return "reason";
    }

    if (lo->scope >= OR_SCOPE_COUNT) {
        return "scope";
    }

    if (lo->last_status < 0 || lo->last_status > 999) {
        return "last_status";
    }

    if (lo->reserved != 0) {
        return "reserved";
    }

    if (lo->epoch > OR_VALID_COUNT_MAX) {
        return "epoch";
    }

    if (lo->failures > OR_VALID_COUNT_MAX) {
        return "failures";
    }

    if (lo->mark_at < 0 || lo->mark_at > event) {
        return "mark_at";
    }

    if (lo->last_failure_at < 0 || lo->last_failure_at > event) {
        return "last_failure_at";
    }

    if (lo->decay_at < 0 || lo->decay_at > event) {
        return "decay_at";
    }

    if (lo->until < 0 || lo->until > expiry) {
        return "until";
    }

    return NULL;
}


int
or_lockout_settled(const or_lockout_t *lo, or_msec_t now)
{
    return lo->failures == 0 && lo->until <= now && lo->mark_at == 0;
}


int
or_lockout_idle(const or_lockout_t *lo, or_msec_t now)
{
    return or_lockout_settled(lo, now) && lo->epoch == 0;
}


int
or_lockout_merge(or_lockout_t *dst, const or_lockout_t *src)
{
    or_lockout_t  old;

    old = *dst;

    if (src->epoch > dst->epoch) {
        *dst = *src;
        dst->reserved = old.reserved;
        return !or_lockout_equal(&old, dst);
    }

    if (src->epoch < dst->epoch) {
        return 0;
    }

    if (src->failures > dst->failures) {
        dst->failures = src->failures;
    }

    if (src->until > dst->until) {
        dst->until = src->until;
    }

    if (src->mark_at > dst->mark_at) {
        dst->mark_at = src->mark_at;
    }

    if (src->decay_at > dst->decay_at) {
        dst->decay_at = src->decay_at;
    }

    if (src->last_failure_at > dst->last_failure_at
        || (src->last_failure_at == dst->last_failure_at
            && (src->last_status > dst->last_status
                || (src->last_status == dst->last_status
                    && (src->reason > dst->reason
                        || (src->reason == dst->reason
                            && src->scope > dst->scope))))))
    {
        dst->last_failure_at = src->last_failure_at;
        dst->last_status = src->last_status;
        dst->reason = src->reason;
        dst->scope = src->scope;
    }

    return !or_lockout_equal(&old, dst);
}


int
or_lockout_equal(const or_lockout_t *a, const or_lockout_t *b)
{
    return a->epoch == b->epoch
           && a->failures == b->failures
           && a->until == b->until
           && a->mark_at == b->mark_at
           && a->last_failure_at == b->last_failure_at
           && a->decay_at == b->decay_at
           && a->last_status == b->last_status
           && a->reason == b->reason
           && a->scope == b->scope;
}


static size_t
or_model_strip(const char *m, size_t len)
{
    size_t  i, k, j, colons, ats, cut;

    /* a single ":tag" or "@version" (ft:a:b:c names are left alone) */
    colons = 0;
    ats = 0;
    cut = 0;

    for (i = 0; i < len; i++) {
        if (m[i] == ':') {
            colons++;
            cut = i;

        } else if (m[i] == '@') {
            ats++;
            cut = i;
        }
    }

    if (colons + ats == 1 && cut > 0) {
        return cut;
    }

    if (len > 7 && or_lockout_casecmp(m + len - 7, "-latest", 7) == 0) {
        return len - 7;
    }

    k = or_model_digits(m, len);

    /* -YYYY-MM-DD */
    if (k == 2 && len > 11
        && m[len - 3] == '-' && m[len - 6] == '-' && m[len - 11] == '-'
        && or_model_digits(m, len - 3) == 2
        && or_model_digits(m, len - 6) == 4)
    {
        return len - 11;
    }

    if (k > 0 && len > k + 1 && m[len - k - 1] == '-') {

        if (k == 8
            && (or_model_num(m + len - 8, 2) == 19
                || or_model_num(m + len - 8, 2) == 20))
        {
            return len - 9;         /* -YYYYMMDD */
        }

        if (k == 4) {
            i = (size_t) or_model_num(m + len - 4, 2);
            j = (size_t) or_model_num(m + len - 2, 2);

            if ((i >= 1 && i <= 12 && j >= 1 && j <= 31)
                || (i >= 20 && i <= 39 && j >= 1 && j <= 12))
            {
                return len - 5;     /* -MMDD or -YYMM */
            }
        }

        if (k == 3) {
            return len - 4;         /* -NNN */
        }
    }

    /* -vN, -vN.N */
    j = len;

    while (j > 0 && ((m[j - 1] >= '0' && m[j - 1] <= '9') || m[j - 1] == '.'))
    {
        j--;
    }

    if (j < len && m[j] >= '0' && m[j] <= '9' && j >= 3
        && (m[j - 1] == 'v' || m[j - 1] == 'V') && m[j - 2] == '-')
    {
        return j - 2;
    }

    return len;
}


static size_t
or_model_digits(const char *m, size_t len)
{
    size_t  k;

    k = 0;

    while (k < len && m[len - 1 - k] >= '0' && m[len - 1 - k] <= '9') {
        k++;
    }

    return k;
}


static int
or_model_num(const char *p, size_t n)
{
    int  v;

    v = 0;

    while (n-- > 0) {
        v = v * 10 + (*p++ - '0');
    }

    return v;
}


static int
or_lockout_casecmp(const char *a, const char *b, size_t n)
{
    unsigned char  ca, cb;

    while (n-- > 0) {
        ca = (unsigned char) *a++;
        cb = (unsigned char) *b++;

        if (ca >= 'A' && ca <= 'Z') {
            ca |= 0x20;
        }

        if (cb >= 'A' && cb <= 'Z') {
            cb |= 0x20;
        }

        if (ca != cb) {
            return ca < cb ? -1 : 1;
        }
    }

    return 0;
}


static char *
or_lockout_cpy(char *p, const char *s, size_t n)
{
    if (n > 0) {
        memcpy(p, s, n);
    }

    return p + n;
}


static void
or_lockout_restart(or_lockout_t *lo)
{
    uint32_t  epoch, reserved;

    epoch = or_count_next(lo->epoch);
    reserved = lo->reserved;

    memset(lo, 0, sizeof(or_lockout_t));

    lo->epoch = epoch;
    lo->reserved = reserved;
}


static void
or_lockout_record(or_lockout_t *lo, int status, or_reason_e reason,
    or_scope_e scope, or_msec_t now)
{
    /* the tuple order of the merge, so a replay changes nothing */
    if (now > lo->last_failure_at
        || (now == lo->last_failure_at
            && (status > lo->last_status
                || (status == lo->last_status
                    && ((unsigned) reason > lo->reason
                        || ((unsigned) reason == lo->reason
                            && (unsigned) scope > lo->scope))))))
    {
        lo->last_failure_at = now;
        lo->last_status = (int16_t) status;
        lo->reason = (uint8_t) reason;
        lo->scope = (uint8_t) scope;
    }
}
