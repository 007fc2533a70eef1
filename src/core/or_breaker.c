/*
 * Copyright (C) ngx_omniroute authors
 *
 * Provider circuit breaker; see or_breaker.h for the rules.
 */


#include <string.h>

#include "or_breaker.h"


#define OR_BREAKER_SEC  1000
#define OR_BREAKER_MIN  60000


typedef struct {
    int32_t      degrade;
    int32_t      open;
    or_msec_t    reset_ms;
    int32_t      gate_threshold;
    or_msec_t    gate_window_ms;
    or_msec_t    gate_cooldown_ms;
} or_breaker_profile_t;


static or_msec_t or_breaker_mul(or_msec_t base, unsigned factor);
static void or_breaker_close(or_breaker_t *cb);
static void or_breaker_open(const or_breaker_conf_t *conf, or_breaker_t *cb,
    or_msec_t now);
static void or_breaker_ring_clear(or_breaker_t *cb);
static void or_breaker_ring_add(or_breaker_t *cb, or_msec_t t);
static int or_breaker_gate_record(const or_breaker_conf_t *conf,
    or_breaker_t *cb, or_msec_t now);
static int or_breaker_is_clean(const or_breaker_t *cb);


/* R-CB-2 and R-CB-6 profiles, indexed by or_kind_e */
static const or_breaker_profile_t  or_breaker_profiles[OR_KIND_COUNT] = {
    /* degrade, open, reset, gate threshold, gate window, gate cooldown */
    { 5,  8, 60 * OR_BREAKER_SEC,
      10, 15 * OR_BREAKER_MIN, 5 * OR_BREAKER_MIN },        /* oauth */
    { 7, 12, 30 * OR_BREAKER_SEC,
      15, 30 * OR_BREAKER_MIN, 10 * OR_BREAKER_MIN },       /* apikey */
    { 1,  2, 15 * OR_BREAKER_SEC,
      2,  5 * OR_BREAKER_MIN,  1 * OR_BREAKER_MIN }         /* local */
};


static const char  *or_breaker_state_names[] = {
    "CLOSED",
    "DEGRADED",
    "OPEN",
    "HALF_OPEN"
};


void
or_breaker_conf_init(or_breaker_conf_t *conf)
{
    int  i;

    conf->degrade_threshold = OR_UNSET;
    conf->open_threshold = OR_UNSET;
    conf->reset_ms = OR_MSEC_NONE;
    conf->max_backoff_multiplier = OR_UNSET;
    conf->recovery_successes = OR_UNSET;
    conf->probe_timeout_ms = OR_MSEC_NONE;

    for (i = 0; i < OR_REASON_COUNT; i++) {
        conf->cooldown_by_reason[i] = OR_MSEC_NONE;
    }

    conf->gate_enabled = OR_UNSET;
    conf->gate_threshold = OR_UNSET;
    conf->gate_window_ms = OR_MSEC_NONE;
    conf->gate_cooldown_ms = OR_MSEC_NONE;
}


void
or_breaker_conf_fill(or_breaker_conf_t *conf, or_kind_e kind)
{
    const or_breaker_profile_t  *p;

    if ((unsigned) kind >= OR_KIND_COUNT) {
        kind = OR_KIND_APIKEY;
    }

    p = &or_breaker_profiles[kind];

    if (conf->degrade_threshold == OR_UNSET) {
        if (conf->open_threshold == OR_UNSET) {
            conf->degrade_threshold = p->degrade;

        } else {
            /* derived: round(0.6 x open), at least 1 (no int overflow) */
            conf->degrade_threshold =
                (int32_t) (((int64_t) conf->open_threshold * 6 + 5) / 10);
            if (conf->degrade_threshold < 1) {
                conf->degrade_threshold = 1;
            }
        }
    }

    if (conf->open_threshold == OR_UNSET) {
        conf->open_threshold = p->open;
    }

    if (conf->degrade_threshold > conf->open_threshold) {
        conf->degrade_threshold = conf->open_threshold;
    }

    if (conf->reset_ms == OR_MSEC_NONE) {
        conf->reset_ms = p->reset_ms;
    }

    if (conf->max_backoff_multiplier == OR_UNSET) {
        conf->max_backoff_multiplier = OR_BREAKER_DEF_MULT;
    }

    if (conf->recovery_successes == OR_UNSET) {
        conf->recovery_successes = OR_BREAKER_DEF_RECOVERY;
    }

    if (conf->probe_timeout_ms == OR_MSEC_NONE) {
        conf->probe_timeout_ms = conf->reset_ms;
    }

    if (conf->gate_enabled == OR_UNSET) {
        conf->gate_enabled = 0;
    }

    if (conf->gate_threshold == OR_UNSET) {
        conf->gate_threshold = p->gate_threshold;
    }

    if (conf->gate_window_ms == OR_MSEC_NONE) {
        conf->gate_window_ms = p->gate_window_ms;
    }

    if (conf->gate_cooldown_ms == OR_MSEC_NONE) {
        conf->gate_cooldown_ms = p->gate_cooldown_ms;
    }
}


const char *
or_breaker_conf_check(const or_breaker_conf_t *conf)
{
    int  i;

    if (conf->open_threshold < 1) {
        return "breaker open threshold must be at least 1";
    }

    if (conf->degrade_threshold < 1
        || conf->degrade_threshold > conf->open_threshold)
    {
        return "breaker degrade threshold must be between 1 and the open "
               "threshold";
    }

    if (conf->reset_ms <= 0) {
        return "breaker reset timeout must be positive";
    }

    if (conf->max_backoff_multiplier < 1
        || conf->max_backoff_multiplier > OR_BREAKER_MAX_MULT)
    {
        return "breaker max_backoff_multiplier must be between 1 and 1024";
    }

    if (conf->recovery_successes < 1) {
        return "breaker recovery successes must be at least 1";
    }

    if (conf->probe_timeout_ms <= 0) {
        return "breaker probe timeout must be positive";
    }

    for (i = 0; i < OR_REASON_COUNT; i++) {
        if (conf->cooldown_by_reason[i] != OR_MSEC_NONE
            && conf->cooldown_by_reason[i] <= 0)
        {
            return "breaker cooldown by kind must be positive";
        }
    }

    if (conf->gate_threshold < 1 || conf->gate_threshold > OR_BREAKER_RING) {
        return "breaker gate threshold must be between 1 and 32";
    }

    if (conf->gate_window_ms <= 0 || conf->gate_cooldown_ms <= 0) {
        return "breaker gate window and cooldown must be positive";
    }

    return NULL;
}


int
or_breaker_counts(int status, or_transport_e transport)
{
    if (transport != OR_TRANSPORT_OK) {
        return 1;
    }

    switch (status) {
    case 408:
    case 500:
    case 502:
    case 503:
    case 504:
        return 1;

    default:
        return 0;
    }
}


int
or_breaker_counts_verdict(const or_verdict_t *v, int status,
    or_transport_e transport)
{
    if (v == NULL) {
        return or_breaker_counts(status, transport);
    }

    /* the classifier is authoritative; concurrency limits never count */
    if (v->reason == OR_REASON_CONCURRENCY_LIMITED) {
        return 0;
    }

    return v->counts_for_breaker ? 1 : 0;
}


or_msec_t
or_breaker_hold_ms(const or_breaker_conf_t *conf, const or_breaker_t *cb,
    unsigned cycles)
{
    unsigned   mult;
    or_msec_t  over;

    if (cb->last_reason < OR_REASON_COUNT) {
        over = conf->cooldown_by_reason[cb->last_reason];
        if (over > 0) {
            return over < OR_BREAKER_HOLD_MAX_MS ? over
                                                 : OR_BREAKER_HOLD_MAX_MS;
        }
    }

    mult = 1;

    while (cycles-- > 0 && mult < (unsigned) conf->max_backoff_multiplier) {
        mult *= 2;
    }

    if (mult > (unsigned) conf->max_backoff_multiplier) {
        mult = (unsigned) conf->max_backoff_multiplier;
    }

    over = or_breaker_mul(conf->reset_ms, mult);

    return over < OR_BREAKER_HOLD_MAX_MS ? over : OR_BREAKER_HOLD_MAX_MS;
}


or_msec_t
or_breaker_quiet_ms(const or_breaker_conf_t *conf, const or_breaker_t *cb)
{
    or_msec_t  over;

    /* R-CB-5: the longest OPEN hold of the last failure kind */
    if (cb->last_reason < OR_REASON_COUNT) {
        over = conf->cooldown_by_reason[cb->last_reason];
        if (over > 0) {
            return over > conf->reset_ms ? over : conf->reset_ms;
        }
    }

    return or_breaker_mul(conf->reset_ms,
                          (unsigned) conf->max_backoff_multiplier);
}


void
or_breaker_normalize(const or_breaker_conf_t *conf, or_breaker_t *cb,
    or_msec_t now)
{
    switch (cb->state) {

    case OR_CB_OPEN:
        if (now >= cb->open_until) {
            cb->state = OR_CB_HALF_OPEN;
        }
        break;

    case OR_CB_DEGRADED:
    case OR_CB_CLOSED:
        if ((cb->failures > 0 || cb->state == OR_CB_DEGRADED)
            && now - cb->last_failure_at >= or_breaker_quiet_ms(conf, cb))
        {
            or_breaker_close(cb);
        }
        break;

    default:
        break;
    }
}


or_cb_state_e
or_breaker_state(const or_breaker_conf_t *conf, const or_breaker_t *cb,
    or_msec_t now)
{
    or_breaker_t  copy;

    copy = *cb;
    or_breaker_normalize(conf, &copy, now);

    return (or_cb_state_e) copy.state;
}


int
or_breaker_eligible(const or_breaker_conf_t *conf, const or_breaker_t *cb,
    or_msec_t now)
{
    return or_breaker_retry_after(conf, cb, now) == 0;
}


or_msec_t
or_breaker_retry_after(const or_breaker_conf_t *conf, const or_breaker_t *cb,
    or_msec_t now)
{
    or_msec_t     wait, gate;
    or_breaker_t  copy;

    copy = *cb;
    or_breaker_normalize(conf, &copy, now);

    switch (copy.state) {

    case OR_CB_OPEN:
        wait = copy.open_until - now;
        break;

    case OR_CB_HALF_OPEN:
        wait = copy.probe_until > now ? copy.probe_until - now : 0;
        break;

    default:
        wait = 0;
        break;
    }

    gate = (conf->gate_enabled > 0 && copy.gate_until > now)
           ? copy.gate_until - now : 0;

    return wait > gate ? wait : gate;
}


or_cb_admit_e
or_breaker_admit(const or_breaker_conf_t *conf, or_breaker_t *cb,
    or_msec_t now, or_msec_t *retry_after)
{
    or_msec_t  wait;

    or_breaker_normalize(conf, cb, now);

    wait = or_breaker_retry_after(conf, cb, now);

    if (retry_after != NULL) {
        *retry_after = wait;
    }

    if (wait > 0) {
        return OR_CB_DENY;
    }

    if (cb->state != OR_CB_HALF_OPEN) {
        return OR_CB_ALLOW;
    }

    /* the single probe; a lost probe frees the slot at probe_until */
    cb->probe_until = or_msec_add(now,
                                  conf->probe_timeout_ms
                                  < OR_BREAKER_HOLD_MAX_MS
                                  ? conf->probe_timeout_ms
                                  : OR_BREAKER_HOLD_MAX_MS);

    return OR_CB_PROBE;
}


void
or_breaker_failure(const or_breaker_conf_t *conf, or_breaker_t *cb,
    or_reason_e reason, or_msec_t start, or_msec_t now,
    or_breaker_result_t *res)
{
    or_breaker_t         old;
    or_breaker_result_t  dummy;

    if (res == NULL) {
        res = &dummy;
    }

    old = *cb;

    if (start < 0) {
        start = now;
    }

    or_breaker_normalize(conf, cb, now);

    res->stored = (or_cb_state_e) old.state;
    res->from = (or_cb_state_e) cb->state;
    res->counted = 0;
    res->gate_tripped = 0;

    if (conf->gate_enabled > 0) {
        res->gate_tripped = or_breaker_gate_record(conf, cb, now);
    }

    switch (cb->state) {

    case OR_CB_OPEN:
    case OR_CB_HALF_OPEN:
        if (start < cb->opened_at) {
            /* in flight when the breaker opened: already accounted for */
            break;
        }

        /* the probe (or a last-resort attempt) failed: re-open, longer */
        if (cb->open_cycles < UINT16_MAX) {
            cb->open_cycles++;
        }

        cb->last_failure_at = now;
        cb->last_reason = (uint8_t) reason;
        or_breaker_open(conf, cb, now);
        res->counted = 1;
        break;

    default:
        cb->failures = or_count_next(cb->failures);
        cb->successes = 0;
        cb->last_failure_at = now;
        cb->last_reason = (uint8_t) reason;
        res->counted = 1;

        if (cb->failures >= (uint32_t) conf->open_threshold) {
            or_breaker_open(conf, cb, now);

        } else if (cb->failures >= (uint32_t) conf->degrade_threshold) {
            cb->state = OR_CB_DEGRADED;
        }

        break;
    }

    res->to = (or_cb_state_e) cb->state;
    res->changed = !or_breaker_equal(&old, cb);
}


void
or_breaker_success(const or_breaker_conf_t *conf, or_breaker_t *cb,
    or_msec_t start, or_msec_t now, or_breaker_result_t *res)
{
    or_breaker_t         old;
    or_breaker_result_t  dummy;

    if (res == NULL) {
        res = &dummy;
    }

    old = *cb;

    if (start < 0) {
        start = now;
    }

    or_breaker_normalize(conf, cb, now);

    res->stored = (or_cb_state_e) old.state;
    res->from = (or_cb_state_e) cb->state;
    res->counted = 0;
    res->gate_tripped = 0;

    /* R-CB-6: a success clears the window */
    if (cb->ring_len > 0) {
        or_breaker_ring_clear(cb);
    }

    switch (cb->state) {

    case OR_CB_OPEN:
    case OR_CB_HALF_OPEN:
        if (start < cb->opened_at) {
            break;
        }

        or_breaker_close(cb);
        res->counted = 1;
        break;

    case OR_CB_DEGRADED:
        if (cb->failures > 0) {
            cb->failures--;
        }

        if (cb->successes < UINT16_MAX) {
            cb->successes++;
        }

        if (cb->failures == 0
            || cb->successes >= (uint32_t) conf->recovery_successes)
        {
            or_breaker_close(cb);
        }

        res->counted = 1;
        break;

    default:
        if (cb->failures > 0) {
            cb->failures--;
            res->counted = 1;
        }
        break;
    }

    res->to = (or_cb_state_e) cb->state;
    res->changed = !or_breaker_equal(&old, cb);
}


int
or_breaker_reset(or_breaker_t *cb)
{
    if (or_breaker_is_clean(cb)) {
        return 0;
    }

    or_breaker_close(cb);
    or_breaker_ring_clear(cb);
    cb->gate_until = 0;

    return 1;
}


const char *
or_breaker_valid(const void *value, size_t size, or_msec_t now)
{
    int                  i;
    or_msec_t            event, expiry;
    const or_breaker_t  *cb;

    if (size != sizeof(or_breaker_t)) {
        return "size";
    }

    cb = value;

    if (now < 0) {
        now = 0;
    }

    event = or_msec_add(now, OR_VALID_SKEW_MS);
    expiry = or_msec_add(event, OR_BREAKER_HOLD_MAX_MS);

    if (cb->state > OR_CB_HALF_OPEN) {
        return "state";
    }

    if (cb->last_reason >= OR_REASON_COUNT) {
        return "last_reason";
    }

    if (cb->reserved0 != 0 || cb->reserved1 != 0) {
        return "reserved";
    }

    if (cb->epoch > OR_VALID_COUNT_MAX || cb->gate_epoch > OR_VALID_COUNT_MAX)
    {
        return "epoch";
    }

    if (cb->failures > OR_VALID_COUNT_MAX) {
        return "failures";
    }

    if (cb->last_failure_at < 0 || cb->last_failure_at > event) {
        return "last_failure_at";
    }

    if (cb->opened_at < 0 || cb->opened_at > event) {
        return "opened_at";
    }

    if (cb->open_until < 0 || cb->open_until > expiry) {
        return "open_until";
    }

    if (cb->probe_until < 0 || cb->probe_until > expiry) {
        return "probe_until";
    }

    if (cb->gate_until < 0 || cb->gate_until > expiry) {
        return "gate_until";
    }

    if (cb->ring_len > OR_BREAKER_RING) {
        return "ring_len";
    }

    for (i = 0; i < OR_BREAKER_RING; i++) {

        if (i >= cb->ring_len) {
            if (cb->ring[i] != 0) {
                return "ring";
            }

            continue;
        }

        if (cb->ring[i] <= 0 || cb->ring[i] > event
            || (i > 0 && cb->ring[i] >= cb->ring[i - 1]))
        {
            return "ring";
        }
    }

    return NULL;
}


int
or_breaker_settled(const or_breaker_conf_t *conf, const or_breaker_t *cb,
    or_msec_t now)
{
    or_breaker_t  copy;

    copy = *cb;

    if (conf != NULL) {
        or_breaker_normalize(conf, &copy, now);
    }

    return copy.state == OR_CB_CLOSED
           && copy.failures == 0
           && copy.open_cycles == 0
           && copy.ring_len == 0
           && copy.gate_until <= now;
}


int
or_breaker_idle(const or_breaker_conf_t *conf, const or_breaker_t *cb,
    or_msec_t now)
{
    or_breaker_t  copy;

    copy = *cb;

    if (conf != NULL) {
        or_breaker_normalize(conf, &copy, now);
    }

    /* the normalized copy: a quiet close bumps the epoch as well */
    return or_breaker_settled(NULL, &copy, now)
           && copy.epoch == 0
           && copy.gate_epoch == 0;
}


int
or_breaker_merge(or_breaker_t *dst, const or_breaker_t *src)
{
    int           i, j, n, dn, sn;
    or_msec_t     ring[OR_BREAKER_RING], t;
    or_breaker_t  old;

    old = *dst;

    /* main component: epoch, then a monotone join within the epoch */

    if (src->epoch > dst->epoch) {
        dst->epoch = src->epoch;
        dst->last_failure_at = src->last_failure_at;
        dst->last_reason = src->last_reason;
        dst->opened_at = src->opened_at;
        dst->open_until = src->open_until;
        dst->probe_until = src->probe_until;
        dst->failures = src->failures;
        dst->open_cycles = src->open_cycles;
        dst->successes = src->successes;
        dst->state = src->state;

    } else if (src->epoch == dst->epoch) {

        if (src->open_cycles > dst->open_cycles
            || (src->open_cycles == dst->open_cycles
                && src->state > dst->state))
        {
            dst->open_cycles = src->open_cycles;
            dst->state = src->state;
        }

        if (src->last_failure_at > dst->last_failure_at
            || (src->last_failure_at == dst->last_failure_at
                && src->last_reason > dst->last_reason))
        {
            dst->last_failure_at = src->last_failure_at;
            dst->last_reason = src->last_reason;
        }

        if (src->failures > dst->failures) {
            dst->failures = src->failures;
        }

        if (src->successes > dst->successes) {
            dst->successes = src->successes;
        }

        if (src->opened_at > dst->opened_at) {
            dst->opened_at = src->opened_at;
        }

        if (src->open_until > dst->open_until) {
            dst->open_until = src->open_until;
        }

        if (src->probe_until > dst->probe_until) {
            dst->probe_until = src->probe_until;
        }
    }

    /* gate component: gate_epoch, then ring union and later expiry */

    if (src->gate_epoch > dst->gate_epoch) {
        dst->gate_epoch = src->gate_epoch;
        dst->gate_until = src->gate_until;
        dst->ring_len = src->ring_len;
        memcpy(dst->ring, src->ring, sizeof(dst->ring));

    } else if (src->gate_epoch == dst->gate_epoch) {

        if (src->gate_until > dst->gate_until) {
            dst->gate_until = src->gate_until;
        }

        /* never past the ring, whatever an invalid state says */
        dn = dst->ring_len < OR_BREAKER_RING ? dst->ring_len
                                             : OR_BREAKER_RING;
        sn = src->ring_len < OR_BREAKER_RING ? src->ring_len
                                             : OR_BREAKER_RING;

        memset(ring, 0, sizeof(ring));
        i = 0;
        j = 0;
        n = 0;

        while (n < OR_BREAKER_RING && (i < dn || j < sn)) {

            if (j >= sn || (i < dn && dst->ring[i] >= src->ring[j])) {
                t = dst->ring[i++];
                if (j < sn && src->ring[j] == t) {
                    j++;
                }

            } else {
                t = src->ring[j++];
            }

            ring[n++] = t;
        }

        memcpy(dst->ring, ring, sizeof(ring));
        dst->ring_len = (uint8_t) n;
    }

    return !or_breaker_equal(&old, dst);
}


int
or_breaker_equal(const or_breaker_t *a, const or_breaker_t *b)
{
    return a->epoch == b->epoch
           && a->gate_epoch == b->gate_epoch
           && a->last_failure_at == b->last_failure_at
           && a->opened_at == b->opened_at
           && a->open_until == b->open_until
           && a->probe_until == b->probe_until
           && a->gate_until == b->gate_until
           && memcmp(a->ring, b->ring, sizeof(a->ring)) == 0
           && a->failures == b->failures
           && a->open_cycles == b->open_cycles
           && a->successes == b->successes
           && a->state == b->state
           && a->last_reason == b->last_reason
           && a->ring_len == b->ring_len;
}


const char *
or_breaker_state_name(or_cb_state_e state)
{
    if ((unsigned) state > OR_CB_HALF_OPEN) {
        return "unknown";
    }

    return or_breaker_state_names[state];
}


static or_msec_t
or_breaker_mul(or_msec_t base, unsigned factor)
{
    /* settings are bounded by or_breaker_conf_check(); stay safe anyway */
    if (base > 0 && (or_msec_t) factor > INT64_MAX / base) {
        return INT64_MAX / 2;
    }

    return base * (or_msec_t) factor;
}


static void
or_breaker_close(or_breaker_t *cb)
{
    cb->epoch = or_count_next(cb->epoch);
    cb->state = OR_CB_CLOSED;
    cb->failures = 0;
    cb->successes = 0;
    cb->open_cycles = 0;
    cb->opened_at = 0;
    cb->open_until = 0;
    cb->probe_until = 0;
}


static void
or_breaker_open(const or_breaker_conf_t *conf, or_breaker_t *cb,
    or_msec_t now)
{
    cb->state = OR_CB_OPEN;
    cb->successes = 0;
    cb->opened_at = now;
    cb->open_until = or_msec_add(now,
                                 or_breaker_hold_ms(conf, cb, cb->open_cycles));
    cb->probe_until = 0;
}


static void
or_breaker_ring_clear(or_breaker_t *cb)
{
    cb->gate_epoch = or_count_next(cb->gate_epoch);
    cb->ring_len = 0;
    memset(cb->ring, 0, sizeof(cb->ring));
}


static void
or_breaker_ring_add(or_breaker_t *cb, or_msec_t t)
{
    int  i, n;

    n = cb->ring_len < OR_BREAKER_RING ? cb->ring_len : OR_BREAKER_RING;

    for (i = 0; i < n; i++) {
        if (cb->ring[i] == t) {
            return;
        }

        if (cb->ring[i] < t) {
            break;
        }
    }

    if (i == OR_BREAKER_RING) {
        return;                 /* older than everything kept */
    }

    if (n == OR_BREAKER_RING) {
        n--;                    /* drop the oldest */
    }

    memmove(&cb->ring[i + 1], &cb->ring[i], (n - i) * sizeof(or_msec_t));
    cb->ring[i] = t;
    cb->ring_len = (uint8_t) (n + 1);
}


static int
or_breaker_gate_record(const or_breaker_conf_t *conf, or_breaker_t *cb,
    or_msec_t now)
{
    int        i, count;
    or_msec_t  until;

    or_breaker_ring_add(cb, now);

    count = 0;

    for (i = 0; i < cb->ring_len && i < OR_BREAKER_RING; i++) {
        if (cb->ring[i] >= now - conf->gate_window_ms) {
            count++;
        }
    }

    if (count < conf->gate_threshold) {
        return 0;
    }

    until = or_msec_add(now, conf->gate_cooldown_ms < OR_BREAKER_HOLD_MAX_MS
                             ? conf->gate_cooldown_ms
                             : OR_BREAKER_HOLD_MAX_MS);

    or_breaker_ring_clear(cb);

    if (until > cb->gate_until) {
        cb->gate_until = until;
    }

    return 1;
}


static int
or_breaker_is_clean(const or_breaker_t *cb)
{
    return cb->state == OR_CB_CLOSED
           && cb->failures == 0
           && cb->successes == 0
           && cb->open_cycles == 0
           && cb->opened_at == 0
           && cb->open_until == 0
           && cb->probe_until == 0
           && cb->ring_len == 0
           && cb->gate_until == 0;
}
