/*
 * Copyright (C) ngx_omniroute authors
 *
 * Connection cooldown and terminal states; see or_cooldown.h.
 */


#include <string.h>

#include "or_cooldown.h"


#define OR_CD_SEC  1000LL
#define OR_CD_MIN  (60 * OR_CD_SEC)


static or_msec_t or_cooldown_ladder(or_msec_t base, unsigned exp,
    or_msec_t cap);
static or_msec_t or_cooldown_pick(const or_cooldown_conf_t *conf,
    const or_verdict_t *v, unsigned exp, or_cd_source_e *src);
static void or_cooldown_record(or_conn_state_t *st, int status,
    or_reason_e reason, or_msec_t now);
static void or_cooldown_terminal(or_conn_state_t *st, or_terminal_e t,
    int status, or_msec_t now);
static void or_cooldown_extend(or_conn_state_t *st, or_msec_t until);
static void or_cooldown_count(or_conn_state_t *st, or_msec_t now);
static int or_cooldown_transient_clean(const or_conn_state_t *st);


static const or_msec_t  or_cooldown_base[OR_KIND_COUNT] = {
    5 * OR_CD_SEC,              /* oauth, R-CD-2 */
    3 * OR_CD_SEC,              /* apikey, R-CD-2 */
    1 * OR_CD_SEC               /* local: chosen here */
};


static const char  *or_terminal_names[] = {
    "none",
    "expired",
    "credits_exhausted",
    "banned"
};


void
or_cooldown_conf_init(or_cooldown_conf_t *conf)
{
    conf->base_ms = OR_MSEC_NONE;
    conf->max_ms = OR_MSEC_NONE;
    conf->max_backoff_steps = OR_UNSET;
    conf->override_ms = OR_MSEC_NONE;
    conf->provider_delay_ms = OR_MSEC_NONE;
    conf->env_default_ms = OR_MSEC_NONE;
    conf->concurrency_ms = OR_MSEC_NONE;
    conf->hint_max_ms = OR_MSEC_NONE;
    conf->expired_retry_max = OR_UNSET;
    conf->rejected_base_ms = OR_MSEC_NONE;
    conf->rejected_max_ms = OR_MSEC_NONE;
    conf->stream_stall_cooldown = OR_UNSET;
}


void
or_cooldown_conf_fill(or_cooldown_conf_t *conf, or_kind_e kind)
{
    if ((unsigned) kind >= OR_KIND_COUNT) {
        kind = OR_KIND_APIKEY;
    }

    if (conf->base_ms == OR_MSEC_NONE) {
        conf->base_ms = or_cooldown_base[kind];
    }

    if (conf->max_ms == OR_MSEC_NONE) {
        conf->max_ms = 30 * OR_CD_MIN;
    }

    if (conf->max_backoff_steps == OR_UNSET) {
        conf->max_backoff_steps = 10;
    }

    /* override_ms, provider_delay_ms, env_default_ms stay "none" */

    if (conf->concurrency_ms == OR_MSEC_NONE) {
        conf->concurrency_ms = 1 * OR_CD_SEC;
    }

    if (conf->hint_max_ms == OR_MSEC_NONE) {
        conf->hint_max_ms = OR_COOLDOWN_MAX_MS;
    }

    if (conf->expired_retry_max == OR_UNSET) {
        conf->expired_retry_max = 3;
    }

    if (conf->rejected_base_ms == OR_MSEC_NONE) {
        conf->rejected_base_ms = 5 * OR_CD_MIN;
    }

    if (conf->rejected_max_ms == OR_MSEC_NONE) {
        conf->rejected_max_ms = 60 * OR_CD_MIN;
    }

    if (conf->stream_stall_cooldown == OR_UNSET) {
        conf->stream_stall_cooldown = 0;
    }
}


const char *
or_cooldown_conf_check(const or_cooldown_conf_t *conf)
{
    if (conf->base_ms <= 0 || conf->base_ms > OR_COOLDOWN_MAX_MS) {
        return "cooldown base must be positive and at most 30 days";
    }

    if (conf->max_ms < conf->base_ms || conf->max_ms > OR_COOLDOWN_MAX_MS) {
        return "cooldown max must be at least the base and at most 30 days";
    }

    if (conf->max_backoff_steps < 0
        || conf->max_backoff_steps > OR_COOLDOWN_MAX_STEPS)
    {
        return "cooldown max backoff steps must be between 0 and 30";
    }

    if (conf->override_ms != OR_MSEC_NONE
        && (conf->override_ms <= 0 || conf->override_ms > OR_COOLDOWN_MAX_MS))
    {
        return "per-connection rate-limit reset must be positive";
    }

    if (conf->provider_delay_ms != OR_MSEC_NONE
        && (conf->provider_delay_ms < OR_COOLDOWN_RETRY_MIN_MS
            || conf->provider_delay_ms > OR_COOLDOWN_RETRY_MAX_MS))
    {
        return "provider retry delay must be between 1 and 21600 seconds";
    }

    if (conf->env_default_ms != OR_MSEC_NONE
        && (conf->env_default_ms <= 0
            || conf->env_default_ms > OR_COOLDOWN_MAX_MS))
    {
        return "environment rate-limit reset must be positive";
    }

    if (conf->concurrency_ms <= 0 || conf->concurrency_ms > OR_COOLDOWN_MAX_MS)
    {
        return "concurrency-limit cooldown must be positive";
    }

    if (conf->hint_max_ms <= 0 || conf->hint_max_ms > OR_COOLDOWN_MAX_MS) {
        return "retry hint cap must be positive and at most 30 days";
    }

    if (conf->expired_retry_max < 0
        || conf->expired_retry_max > OR_COOLDOWN_EXPIRED_MAX)
    {
        return "expired retry max must be between 0 and 1000";
    }

    if (conf->rejected_base_ms <= 0
        || conf->rejected_max_ms < conf->rejected_base_ms
        || conf->rejected_max_ms > OR_COOLDOWN_MAX_MS)
    {
        return "request-rejected cooldown must be positive, max >= base";
    }

    return NULL;
}


or_msec_t
or_cooldown_backoff_ms(const or_cooldown_conf_t *conf, unsigned level)
{
    if (level > (unsigned) conf->max_backoff_steps) {
        level = (unsigned) conf->max_backoff_steps;
    }

    return or_cooldown_ladder(conf->base_ms, level, conf->max_ms);
}


or_msec_t
or_cooldown_rejected_ms(const or_cooldown_conf_t *conf, unsigned count)
{
    return or_cooldown_ladder(conf->rejected_base_ms,
                              count > 0 ? count - 1 : 0,
                              conf->rejected_max_ms);
}


void
or_cooldown_fail(const or_cooldown_conf_t *conf, or_conn_state_t *st,
    const or_verdict_t *v, int status, or_msec_t start, or_msec_t now,
    or_cooldown_result_t *res)
{
    int                   absorbed;
    unsigned              exp, n;
    or_msec_t             d, anchor;
    or_reason_e           reason;
    or_terminal_e         term;
    or_cd_source_e        src;
    or_conn_state_t       old;
    or_cooldown_result_t  dummy;

    if (res == NULL) {
        res = &dummy;
    }

    memset(res, 0, sizeof(or_cooldown_result_t));
    old = *st;

    if (start < 0) {
        start = now;
    }

    if (v == NULL) {
        res->action = OR_CD_IGNORED;
        return;
    }

    reason = v->reason;
    absorbed = (st->mark_at > 0 && start <= st->mark_at);
    exp = absorbed && st->backoff_level > 0 ? st->backoff_level - 1u
                                            : st->backoff_level;
    src = OR_CD_SRC_NONE;
    d = 0;

    switch (reason) {

    case OR_REASON_NONE:
    case OR_REASON_NOT_FOUND:
    case OR_REASON_CONTEXT_OVERFLOW:
    case OR_REASON_BAD_REQUEST:
    case OR_REASON_TOOL_LIMIT:
    case OR_REASON_CAPABILITY:
        if (v->cooldown_ms <= 0) {
            res->action = OR_CD_IGNORED;
            goto done;
        }
        break;

    case OR_REASON_STREAM_STALL:
        if (conf->stream_stall_cooldown <= 0 && v->cooldown_ms <= 0) {
            or_cooldown_record(st, status, reason, now);
            res->action = OR_CD_RECORDED;
            goto done;
        }
        break;

    default:
        break;
    }

    or_cooldown_record(st, status, reason, now);

    /* terminal states (R-CD-6) */

    term = or_terminal_of_reason(reason);

    if (term == OR_TERMINAL_BANNED || term == OR_TERMINAL_CREDITS_EXHAUSTED)
    {
        or_cooldown_terminal(st, term, status, now);
        res->action = OR_CD_TERMINAL;
        goto done;
    }

    if (st->terminal != OR_TERMINAL_NONE) {
        /* never overwritten by a transient state */
        res->action = OR_CD_RECORDED;
        goto done;
    }

    if (reason == OR_REASON_EXPIRED && !absorbed) {
        if (st->expired_retries <= OR_COOLDOWN_EXPIRED_MAX) {
            st->expired_retries++;
        }

        if (st->expired_retries > (unsigned) conf->expired_retry_max) {
            or_cooldown_count(st, now);
            or_cooldown_terminal(st, OR_TERMINAL_EXPIRED, status, now);
            res->action = OR_CD_TERMINAL;
            goto done;
        }
    }

    /* R-CD-5: healthy but busy; not a counted failure */

    if (reason == OR_REASON_CONCURRENCY_LIMITED) {
        if (v->cooldown_ms > 0) {
            d = v->cooldown_ms;
            src = OR_CD_SRC_EXPLICIT;

        } else if (v->hint_ms > 0) {
            d = v->hint_ms < conf->hint_max_ms ? v->hint_ms
                                                : conf->hint_max_ms;
            src = OR_CD_SRC_HINT;

        } else {
            d = conf->concurrency_ms;
            src = OR_CD_SRC_CONCURRENCY;
        }

        if (d > OR_COOLDOWN_MAX_MS) {
            d = OR_COOLDOWN_MAX_MS;
        }

        or_cooldown_extend(st, or_msec_add(now, d));
        res->action = OR_CD_COOLDOWN;
        res->skip_breaker = 1;
        goto done;
    }

    /* the duration, highest precedence first */

    if (reason == OR_REASON_REQUEST_REJECTED) {
        n = st->rejected_count + (absorbed ? 0u : 1u);

        if (v->cooldown_ms > 0) {
            d = v->cooldown_ms;
            src = OR_CD_SRC_EXPLICIT;

        } else {
            d = or_cooldown_rejected_ms(conf, n);
            src = OR_CD_SRC_REJECTED;
        }

    } else if (reason == OR_REASON_RATE_LIMIT_EXCEEDED) {
        d = or_cooldown_pick(conf, v, exp, &src);

    } else {
        /* explicit > hint > backoff; overrides are for rate limits only */
        if (v->cooldown_ms > 0) {
            d = v->cooldown_ms;
            src = OR_CD_SRC_EXPLICIT;

        } else if (v->hint_ms > 0) {
            d = v->hint_ms < conf->hint_max_ms ? v->hint_ms
                                                : conf->hint_max_ms;
            src = OR_CD_SRC_HINT;

        } else {
            d = or_cooldown_backoff_ms(conf, exp);
            src = OR_CD_SRC_BACKOFF;
        }
    }

    if (d > OR_COOLDOWN_MAX_MS) {
        d = OR_COOLDOWN_MAX_MS;
    }

    if (absorbed) {
        /* R-CD-4: the burst was counted at mark_at; no second step */
        anchor = (src == OR_CD_SRC_HINT) ? now : st->mark_at;
        or_cooldown_extend(st, or_msec_add(anchor, d));
        res->action = OR_CD_ABSORBED;
        goto done;
    }

    or_cooldown_extend(st, or_msec_add(now, d));
    or_cooldown_count(st, now);

    if (reason == OR_REASON_REQUEST_REJECTED) {
        if (st->rejected_count < UINT16_MAX) {
            st->rejected_count++;
        }

    } else if (src == OR_CD_SRC_PROVIDER) {
        st->backoff_level = 0;

    } else if (st->backoff_level < (unsigned) conf->max_backoff_steps) {
        st->backoff_level++;
    }

    res->action = OR_CD_COOLDOWN;

done:

    res->source = src;
    res->cooldown_ms = d;
    res->until = st->until;
    res->changed = !or_cooldown_equal(&old, st);
}


int
or_cooldown_success(or_conn_state_t *st, or_msec_t start, or_msec_t now)
{
    uint32_t  epoch;

    if (start < 0) {
        start = now;
    }

    if (st->mark_at > 0 && start <= st->mark_at) {
        return 0;               /* in flight during the last failure */
    }

    if (or_cooldown_transient_clean(st)) {
        return 0;
    }

    /* R-CD-7: clear error fields and backoff_level; terminal stays */
    epoch = or_count_next(st->clear_epoch);

    st->clear_epoch = epoch;
    st->until = 0;
    st->mark_at = 0;
    st->last_error_at = 0;
    st->failures = 0;
    st->backoff_level = 0;
    st->expired_retries = 0;
    st->rejected_count = 0;
    st->last_status = 0;
    st->last_reason = OR_REASON_NONE;

    return 1;
}


int
or_cooldown_reset(or_conn_state_t *st)
{
    uint32_t  epoch;

    if (st->terminal == OR_TERMINAL_NONE && or_cooldown_transient_clean(st)) {
        return 0;
    }

    epoch = or_count_next(st->reset_epoch);
    memset(st, 0, sizeof(or_conn_state_t));
    st->reset_epoch = epoch;

    return 1;
}


int
or_cooldown_eligible(const or_conn_state_t *st, or_msec_t now)
{
    return st->terminal == OR_TERMINAL_NONE && st->until <= now;
}


or_msec_t
or_cooldown_retry_after(const or_conn_state_t *st, or_msec_t now)
{
    if (st->terminal != OR_TERMINAL_NONE) {
        return OR_MSEC_NONE;
    }

    return st->until > now ? st->until - now : 0;
}


void
or_cooldown_view(const or_conn_state_t *st, or_msec_t now,
    or_cooldown_view_t *view)
{
    memset(view, 0, sizeof(or_cooldown_view_t));

    view->retry_after = or_cooldown_retry_after(st, now);
    view->until = st->until > now ? st->until : 0;
    view->backoff_level = st->backoff_level;
    view->failures = st->failures;
    view->terminal = (or_terminal_e) st->terminal;
    view->last_reason = (or_reason_e) st->last_reason;
    view->last_status = st->last_status;
    view->last_error_at = st->last_error_at;

    if (st->terminal != OR_TERMINAL_NONE) {
        view->status = OR_CONN_TERMINAL;
        view->test_status = or_terminal_name((or_terminal_e) st->terminal);

    } else if (st->until > now) {
        view->status = OR_CONN_COOLDOWN;
        view->test_status = "unavailable";

    } else {
        view->status = OR_CONN_ACTIVE;
        view->test_status = "active";
    }
}


const char *
or_cooldown_valid(const void *value, size_t size, or_msec_t now)
{
    or_msec_t               event, expiry;
    const or_conn_state_t  *st;

    if (size != sizeof(or_conn_state_t)) {
        return "size";
    }

    st = value;

    if (now < 0) {
        now = 0;
    }

    event = or_msec_add(now, OR_VALID_SKEW_MS);
    expiry = or_msec_add(event, OR_COOLDOWN_MAX_MS);

    if (st->terminal > OR_TERMINAL_BANNED) {
        return "terminal";
    }

    if (st->terminal == OR_TERMINAL_NONE
        && (st->terminal_at != 0 || st->terminal_status != 0))
    {
        return "terminal";
    }

    if (st->last_reason >= OR_REASON_COUNT) {
        return "last_reason";
    }

    if (st->last_status < 0 || st->last_status > 999
        || st->terminal_status < 0 || st->terminal_status > 999)
    {
        return "status";
    }

    if (st->reset_epoch > OR_VALID_COUNT_MAX
        || st->clear_epoch > OR_VALID_COUNT_MAX)
    {
        return "epoch";
    }

    if (st->failures > OR_VALID_COUNT_MAX) {
        return "failures";
    }

    if (st->backoff_level > OR_COOLDOWN_MAX_STEPS) {
        return "backoff_level";
    }

    if (st->expired_retries > OR_COOLDOWN_EXPIRED_MAX + 1) {
        return "expired_retries";
    }

    if (st->terminal_at < 0 || st->terminal_at > event) {
        return "terminal_at";
    }

    if (st->mark_at < 0 || st->mark_at > event) {
        return "mark_at";
    }

    if (st->last_error_at < 0 || st->last_error_at > event) {
        return "last_error_at";
    }

    if (st->until < 0 || st->until > expiry) {
        return "until";
    }

    return NULL;
}


int
or_cooldown_settled(const or_conn_state_t *st, or_msec_t now)
{
    return st->terminal == OR_TERMINAL_NONE
           && st->until <= now
           && st->mark_at == 0
           && st->last_error_at == 0
           && st->failures == 0
           && st->backoff_level == 0
           && st->expired_retries == 0
           && st->rejected_count == 0;
}


int
or_cooldown_idle(const or_conn_state_t *st, or_msec_t now)
{
    return or_cooldown_settled(st, now)
           && st->reset_epoch == 0
           && st->clear_epoch == 0;
}


int
or_cooldown_merge(or_conn_state_t *dst, const or_conn_state_t *src)
{
    or_conn_state_t  old;

    old = *dst;

    if (src->reset_epoch > dst->reset_epoch) {
        *dst = *src;
        return !or_cooldown_equal(&old, dst);
    }

    if (src->reset_epoch < dst->reset_epoch) {
        return 0;
    }

    /* terminal part: one tuple */

    if (src->terminal > dst->terminal
        || (src->terminal == dst->terminal
            && (src->terminal_at > dst->terminal_at
                || (src->terminal_at == dst->terminal_at
                    && src->terminal_status > dst->terminal_status))))
    {
        dst->terminal = src->terminal;
        dst->terminal_at = src->terminal_at;
        dst->terminal_status = src->terminal_status;
    }

    /* transient part */

    if (src->clear_epoch > dst->clear_epoch) {
        dst->clear_epoch = src->clear_epoch;
        dst->until = src->until;
        dst->mark_at = src->mark_at;
        dst->last_error_at = src->last_error_at;
        dst->failures = src->failures;
        dst->backoff_level = src->backoff_level;
        dst->expired_retries = src->expired_retries;
        dst->rejected_count = src->rejected_count;
        dst->last_status = src->last_status;
        dst->last_reason = src->last_reason;

    } else if (src->clear_epoch == dst->clear_epoch) {

        if (src->until > dst->until) {
            dst->until = src->until;
        }

        if (src->mark_at > dst->mark_at) {
            dst->mark_at = src->mark_at;
        }

        if (src->failures > dst->failures) {
            dst->failures = src->failures;
        }

        if (src->backoff_level > dst->backoff_level) {
            dst->backoff_level = src->backoff_level;
        }

        if (src->expired_retries > dst->expired_retries) {
            dst->expired_retries = src->expired_retries;
        }

        if (src->rejected_count > dst->rejected_count) {
            dst->rejected_count = src->rejected_count;
        }

        if (src->last_error_at > dst->last_error_at
            || (src->last_error_at == dst->last_error_at
                && (src->last_status > dst->last_status
                    || (src->last_status == dst->last_status
                        && src->last_reason > dst->last_reason))))
        {
            dst->last_error_at = src->last_error_at;
            dst->last_status = src->last_status;
            dst->last_reason = src->last_reason;
        }
    }

    return !or_cooldown_equal(&old, dst);
}


int
or_cooldown_equal(const or_conn_state_t *a, const or_conn_state_t *b)
{
    return a->reset_epoch == b->reset_epoch
           && a->clear_epoch == b->clear_epoch
           && a->terminal_at == b->terminal_at
           && a->until == b->until
           && a->mark_at == b->mark_at
           && a->last_error_at == b->last_error_at
           && a->failures == b->failures
           && a->backoff_level == b->backoff_level
           && a->expired_retries == b->expired_retries
           && a->rejected_count == b->rejected_count
           && a->last_status == b->last_status
           && a->terminal_status == b->terminal_status
           && a->terminal == b->terminal
           && a->last_reason == b->last_reason;
}


const char *
or_terminal_name(or_terminal_e terminal)
{
    if ((unsigned) terminal > OR_TERMINAL_BANNED) {
        return "unknown";
    }

    return or_terminal_names[terminal];
}


or_terminal_e
or_terminal_of_reason(or_reason_e reason)
{
    switch (reason) {

    case OR_REASON_BANNED:
        return OR_TERMINAL_BANNED;

    case OR_REASON_CREDITS_EXHAUSTED:
        return OR_TERMINAL_CREDITS_EXHAUSTED;

    case OR_REASON_EXPIRED:
        return OR_TERMINAL_EXPIRED;

    default:
        return OR_TERMINAL_NONE;
    }
}


static or_msec_t
or_cooldown_ladder(or_msec_t base, unsigned exp, or_msec_t cap)
{
    or_msec_t  d;

    d = base;

    while (exp-- > 0 && d < cap) {
        d *= 2;
    }

    return d < cap ? d : cap;
}


static or_msec_t
or_cooldown_pick(const or_cooldown_conf_t *conf, const or_verdict_t *v,
    unsigned exp, or_cd_source_e *src)
{
    /* R-CD-3 precedence chain, after an explicit rule cooldown */

    if (v->cooldown_ms > 0) {
        *src = OR_CD_SRC_EXPLICIT;
        return v->cooldown_ms;
    }

    if (v->hint_ms > 0) {
        *src = OR_CD_SRC_HINT;
        return v->hint_ms < conf->hint_max_ms ? v->hint_ms : conf->hint_max_ms;
    }

    if (conf->override_ms > 0) {
        *src = OR_CD_SRC_OVERRIDE;
        return conf->override_ms;
    }

    if (conf->provider_delay_ms > 0) {
        *src = OR_CD_SRC_PROVIDER;
        return conf->provider_delay_ms;
    }

    if (conf->env_default_ms > 0) {
        *src = OR_CD_SRC_ENV;
        return conf->env_default_ms;
    }

    *src = OR_CD_SRC_BACKOFF;

    return or_cooldown_backoff_ms(conf, exp);
}


static void
or_cooldown_record(or_conn_state_t *st, int status, or_reason_e reason,
    or_msec_t now)
{
    /* the same tuple order as the merge, so a replay changes nothing */
    if (now > st->last_error_at
        || (now == st->last_error_at
            && (status > st->last_status
                || (status == st->last_status
                    && (unsigned) reason > st->last_reason))))
    {
        st->last_error_at = now;
        st->last_status = (int16_t) status;
        st->last_reason = (uint8_t) reason;
    }
}


static void
or_cooldown_terminal(or_conn_state_t *st, or_terminal_e t, int status,
    or_msec_t now)
{
    if ((unsigned) t > st->terminal
        || ((unsigned) t == st->terminal && now > st->terminal_at))
    {
        st->terminal = (uint8_t) t;
        st->terminal_at = now;
        st->terminal_status = (int16_t) status;
    }
}


static void
or_cooldown_extend(or_conn_state_t *st, or_msec_t until)
{
    if (until > st->until) {
        st->until = until;
    }
}


static void
or_cooldown_count(or_conn_state_t *st, or_msec_t now)
{
    if (now > st->mark_at) {
        st->mark_at = now;
    }

    st->failures = or_count_next(st->failures);
}


static int
or_cooldown_transient_clean(const or_conn_state_t *st)
{
    return st->until == 0
           && st->mark_at == 0
           && st->last_error_at == 0
           && st->failures == 0
           && st->backoff_level == 0
           && st->expired_retries == 0
           && st->rejected_count == 0;
}
