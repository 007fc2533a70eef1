/*
 * Copyright (C) ngx_omniroute authors
 *
 * libFuzzer target: the Redis mirror's untrusted input, as a node sees it.
 *
 *   - The whole input goes through the wire decoders (or_wire.h); a
 *     decoded state of the right size goes to its table's validator.
 *   - Then the input is read as: kind (breaker, conn, lockout, pin,
 *     lane, pace),
 *     "now", three raw states a, b, c, and a stream of local operations.
 *     Every merge of any two of a, b, c must be free of undefined
 *     behaviour (ASan/UBSan), valid or not.
 *   - On valid states: merge(a, a) = a; merge(a, b) = merge(b, a);
 *     associativity; merge(a, b) absorbs a and b; its result is valid and
 *     the merge's "changed" answer is right; the request-path reads
 *     (state, retry_after, eligible, admit...) give sane answers.
 *   - The operation stream (failures, successes, resets... with settings
 *     inside the bounds the configuration enforces) applied to a valid
 *     state keeps it valid: a node never produces what its peers reject;
 *     the laws hold again against b.
 *
 * A failed property aborts with a message on stderr.
 */


#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "or_breaker.h"
#include "or_cooldown.h"
#include "or_lockout.h"
#include "or_pin.h"
#include "or_lane.h"
#include "or_pace.h"
#include "or_wire.h"


#define FUZZ_DAY      ((or_msec_t) 86400 * 1000)
#define FUZZ_NOW_MAX  ((or_msec_t) 1 << 42)         /* year 2109 */
#define FUZZ_OPS_MAX  64

#define FUZZ_BREAKER  0
#define FUZZ_CONN     1
#define FUZZ_LOCKOUT  2
#define FUZZ_PIN      3
#define FUZZ_LANE     4
#define FUZZ_PACE     5
#define FUZZ_KINDS    6


typedef union {
    or_breaker_t      cb;
    or_conn_state_t   cs;
    or_lockout_t      lo;
    or_pin_t          pin;
    or_lane_t         lane;
    or_pace_t         pace;
    uint64_t          align[64];
} fuzz_state_t;


typedef struct {
    const uint8_t    *p;
    const uint8_t    *end;
} fuzz_in_t;


typedef struct {
    or_breaker_conf_t    cb;
    or_cooldown_conf_t   cd;
    or_lockout_conf_t    lo;
} fuzz_conf_t;


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_fail(const char *what, unsigned kind);
static uint64_t fuzz_u64(fuzz_in_t *in, size_t n);
static or_msec_t fuzz_range(fuzz_in_t *in, or_msec_t lo, or_msec_t hi);
static size_t fuzz_size(unsigned kind);
static const char *fuzz_valid(unsigned kind, const fuzz_state_t *s,
    or_msec_t now);
static int fuzz_merge(unsigned kind, fuzz_state_t *dst,
    const fuzz_state_t *src);
static void fuzz_decode(const uint8_t *data, size_t size, or_msec_t now);
static void fuzz_laws(unsigned kind, const fuzz_state_t *a,
    const fuzz_state_t *b, const fuzz_conf_t *conf, or_msec_t now);
static void fuzz_reads(unsigned kind, const fuzz_state_t *s,
    const fuzz_conf_t *conf, or_msec_t now);
static int fuzz_confs(fuzz_in_t *in, fuzz_conf_t *conf);
static void fuzz_verdict(fuzz_in_t *in, or_verdict_t *v);
static or_msec_t fuzz_ops(fuzz_in_t *in, unsigned kind, fuzz_state_t *s,
    const fuzz_conf_t *conf, or_msec_t now);


static const char  *fuzz_kinds[] = { "breaker", "conn", "lockout", "pin",
                                      "lane", "pace" };


#ifdef FUZZ_STATS
extern unsigned long  fz_laws[5], fz_ops[5], fz_valid[5];
#define fuzz_stat(a, k)  a[k]++
#else
#define fuzz_stat(a, k)
#endif


static void
fuzz_fail(const char *what, unsigned kind)
{
    fprintf(stderr, "fuzz_merge: %s: %s\n", fuzz_kinds[kind], what);
    abort();
}


/* n little-endian bytes of the input (zeros once it is used up) */

static uint64_t
fuzz_u64(fuzz_in_t *in, size_t n)
{
    size_t    i;
    uint64_t  v;

    v = 0;

    for (i = 0; i < n && in->p < in->end; i++) {
        v |= (uint64_t) *in->p++ << (8 * i);
    }

    return v;
}


static or_msec_t
fuzz_range(fuzz_in_t *in, or_msec_t lo, or_msec_t hi)
{
    return lo + (or_msec_t) (fuzz_u64(in, 8) % (uint64_t) (hi - lo + 1));
}


static size_t
fuzz_size(unsigned kind)
{
    switch (kind) {
    case FUZZ_BREAKER:
        return sizeof(or_breaker_t);
    case FUZZ_CONN:
        return sizeof(or_conn_state_t);
    case FUZZ_LOCKOUT:
        return sizeof(or_lockout_t);
    case FUZZ_LANE:
        return sizeof(or_lane_t);
    case FUZZ_PACE:
        return sizeof(or_pace_t);
    default:
        return sizeof(or_pin_t);
    }
}


static const char *
fuzz_valid(unsigned kind, const fuzz_state_t *s, or_msec_t now)
{
    switch (kind) {
    case FUZZ_BREAKER:
        return or_breaker_valid(&s->cb, sizeof(or_breaker_t), now);
    case FUZZ_CONN:
        return or_cooldown_valid(&s->cs, sizeof(or_conn_state_t), now);
    case FUZZ_LOCKOUT:
        return or_lockout_valid(&s->lo, sizeof(or_lockout_t), now);
    case FUZZ_LANE:
        return or_lane_valid(&s->lane, sizeof(or_lane_t), now);
    case FUZZ_PACE:
        return or_pace_valid(&s->pace, sizeof(or_pace_t), now);
    default:
        return or_pin_valid(&s->pin, sizeof(or_pin_t), now);
    }
}


static int
fuzz_merge(unsigned kind, fuzz_state_t *dst, const fuzz_state_t *src)
{
    switch (kind) {
    case FUZZ_BREAKER:
        return or_breaker_merge(&dst->cb, &src->cb);
    case FUZZ_CONN:
        return or_cooldown_merge(&dst->cs, &src->cs);
    case FUZZ_LOCKOUT:
        return or_lockout_merge(&dst->lo, &src->lo);
    case FUZZ_LANE:
        return or_lane_merge(&dst->lane, &src->lane);
    case FUZZ_PACE:
        return or_pace_merge(&dst->pace, &src->pace);
    default:
        return or_pin_merge(&dst->pin, &src->pin);
    }
}


/* the input as a published message and as a Redis value of each table */

static void
fuzz_decode(const uint8_t *data, size_t size, or_msec_t now)
{
    size_t          n;
    unsigned        kind;
    or_msec_t       time;
    fuzz_state_t    s;
    or_wire_msg_t   m;
    const uint8_t  *v;
    uint8_t         buf[OR_WIRE_VALUE_HDR + sizeof(fuzz_state_t)];

    if (or_wire_decode_msg(data, size, FUZZ_KINDS, &m) == 0) {

        if (m.node + m.node_len > data + size
            || m.key + m.key_len > data + size
            || m.value + m.size != data + size)
        {
            fuzz_fail("message spans", 0);
        }

        if (m.op == OR_WIRE_OP_SET && m.size == fuzz_size(m.table)) {
            memcpy(&s, m.value, m.size);
            (void) fuzz_valid(m.table, &s, now);
        }
    }

    for (kind = 0; kind < FUZZ_KINDS; kind++) {

        if (or_wire_decode_value(data, size, kind, &v, &n, &time) != 0) {
            continue;
        }

        if (v + n != data + size || n == 0 || n > OR_WIRE_VALUE_MAX) {
            fuzz_fail("value span", kind);
        }

        if (n != fuzz_size(kind)) {
            continue;
        }

        memcpy(&s, v, n);

        if (fuzz_valid(kind, &s, now) == NULL) {
            /* what we decode, we encode back to the same bytes */
            if (or_wire_encode_value(buf, kind, &s, n, time) != size
                || memcmp(buf, data, size) != 0)
            {
                fuzz_fail("value round trip", kind);
            }
        }
    }
}


static void
fuzz_laws(unsigned kind, const fuzz_state_t *a, const fuzz_state_t *b,
    const fuzz_conf_t *conf, or_msec_t now)
{
    int           changed;
    size_t        n;
    fuzz_state_t  x, ab, ba;

    n = fuzz_size(kind);

    fuzz_stat(fz_laws, kind);

    /* idempotent */

    x = *a;

    if (fuzz_merge(kind, &x, a) != 0 || memcmp(&x, a, n) != 0) {
        fuzz_fail("merge(a, a) != a", kind);
    }

    /* commutative, and "changed" tells the truth */

    ab = *a;
    changed = fuzz_merge(kind, &ab, b);

    if (changed != (memcmp(&ab, a, n) != 0)) {
        fuzz_fail("merge(a, b) misreports a change", kind);
    }

    ba = *b;
    (void) fuzz_merge(kind, &ba, a);

    if (memcmp(&ab, &ba, n) != 0) {
        fuzz_fail("merge(a, b) != merge(b, a)", kind);
    }

    /* the join absorbs both sides, and stays valid */

    x = ab;

    if (fuzz_merge(kind, &x, a) != 0 || fuzz_merge(kind, &x, b) != 0
        || memcmp(&x, &ab, n) != 0)
    {
        fuzz_fail("merge(a, b) does not absorb a and b", kind);
    }

    if (fuzz_valid(kind, &ab, now) != NULL) {
        fuzz_fail("merge of valid states is invalid", kind);
    }

    fuzz_reads(kind, &ab, conf, now);
}


/* what the request path reads from a state: sane answers, no UB */

static void
fuzz_reads(unsigned kind, const fuzz_state_t *s, const fuzz_conf_t *conf,
    or_msec_t now)
{
    int                  i;
    size_t               len;
    or_msec_t            t, r, horizon;
    fuzz_state_t         x;
    or_cb_state_e        st;
    or_cb_admit_e        adm;
    or_cooldown_view_t   view;

    horizon = 2 * OR_VALID_SKEW_MS + OR_BREAKER_HOLD_MAX_MS;

    for (i = 0; i < 3; i++) {
        t = now + (i == 0 ? 0 : i == 1 ? 60000 : 40 * FUZZ_DAY);

        switch (kind) {

        case FUZZ_BREAKER:
            st = or_breaker_state(&conf->cb, &s->cb, t);
            r = or_breaker_retry_after(&conf->cb, &s->cb, t);

            if ((unsigned) st > OR_CB_HALF_OPEN || r < 0 || r > horizon
                || or_breaker_eligible(&conf->cb, &s->cb, t) != (r == 0))
            {
                fuzz_fail("breaker reads", kind);
            }

            x = *s;
            adm = or_breaker_admit(&conf->cb, &x.cb, t, &r);

            if ((adm == OR_CB_DENY) != (r > 0)
                || or_breaker_valid(&x.cb, sizeof(or_breaker_t), t) != NULL)
            {
                fuzz_fail("breaker admit", kind);
            }

            (void) or_breaker_quiet_ms(&conf->cb, &s->cb);
            break;

        case FUZZ_CONN:
            r = or_cooldown_retry_after(&s->cs, t);

            if (r != OR_MSEC_NONE && (r < 0 || r > horizon)) {
                fuzz_fail("cooldown retry_after", kind);
            }

            if (or_cooldown_eligible(&s->cs, t) != (r == 0)) {
                fuzz_fail("cooldown eligible", kind);
            }

            or_cooldown_view(&s->cs, t, &view);

            if (view.test_status == NULL) {
                fuzz_fail("cooldown view", kind);
            }

            break;

        case FUZZ_LOCKOUT:
            r = or_lockout_retry_after(&s->lo, t);

            if (r < 0 || r > horizon
                || or_lockout_active(&s->lo, t) != (r > 0))
            {
                fuzz_fail("lockout reads", kind);
            }

            (void) or_lockout_evictable(&conf->lo, &s->lo, t);
            break;

        case FUZZ_LANE:
            if (or_lane_active(&s->lane, t) && or_lane_blocked(&s->lane, t)) {
                fuzz_fail("lane active and blocked", kind);
            }

            if (or_lane_expires(&s->lane, t) <= t) {
                fuzz_fail("lane expires", kind);
            }

            (void) or_lane_reset_due(&s->lane, t);
            break;

        case FUZZ_PACE:
            r = or_pace_left(&s->pace, t);

            if (r < 0 || r > horizon
                || (or_pace_admit(&s->pace, t, r, &r) == OR_PACE_TIMEOUT))
            {
                fuzz_fail("pace reads", kind);
            }

            (void) or_pace_tools_skip(&s->pace, (size_t) (t & 0xfff), t);
            break;

        default:
            if (or_pin_conn(&s->pin, t, &len) != NULL
                && (len == 0 || len > OR_PIN_CONN_MAX))
            {
                fuzz_fail("pin conn", kind);
            }

            break;
        }
    }
}


/* settings within the bounds that nginx.conf and the admin API enforce */

static int
fuzz_confs(fuzz_in_t *in, fuzz_conf_t *conf)
{
    unsigned  f;

    f = (unsigned) fuzz_u64(in, 2);

    or_breaker_conf_init(&conf->cb);

    if (f & 1) {
        conf->cb.open_threshold = (int32_t) fuzz_range(in, 1, 100000);
        conf->cb.degrade_threshold = (f & 2)
            ? (int32_t) fuzz_range(in, 1, 100000) : OR_UNSET;
        /* breaker_reset= has no upper bound in nginx.conf */
        conf->cb.reset_ms = fuzz_range(in, 1, (f & 4) ? 3650 * FUZZ_DAY
                                                      : 30 * FUZZ_DAY);
        conf->cb.max_backoff_multiplier = (int32_t) fuzz_range(in, 1,
                                                      OR_BREAKER_MAX_MULT);
        conf->cb.recovery_successes = (int32_t) fuzz_range(in, 1, 100000);
        conf->cb.gate_enabled = (f >> 3) & 1;
        conf->cb.gate_threshold = (int32_t) fuzz_range(in, 1,
                                                       OR_BREAKER_RING);
        conf->cb.gate_window_ms = fuzz_range(in, 1, 30 * FUZZ_DAY);
        conf->cb.gate_cooldown_ms = fuzz_range(in, 1, 30 * FUZZ_DAY);
    }

    or_breaker_conf_fill(&conf->cb, (or_kind_e) ((f >> 4) % OR_KIND_COUNT));

    if (or_breaker_conf_check(&conf->cb) != NULL) {
        return -1;
    }

    or_cooldown_conf_init(&conf->cd);

    if (f & 64) {
        conf->cd.base_ms = fuzz_range(in, 1, 30 * FUZZ_DAY);
        conf->cd.max_ms = fuzz_range(in, conf->cd.base_ms, 30 * FUZZ_DAY);
        conf->cd.max_backoff_steps = (int32_t) fuzz_range(in, 0,
                                                     OR_COOLDOWN_MAX_STEPS);
        conf->cd.override_ms = (f & 128) ? fuzz_range(in, 1, 30 * FUZZ_DAY)
                                         : OR_MSEC_NONE;
        conf->cd.provider_delay_ms = (f & 256)
            ? fuzz_range(in, OR_COOLDOWN_RETRY_MIN_MS,
                         OR_COOLDOWN_RETRY_MAX_MS)
            : OR_MSEC_NONE;
        conf->cd.concurrency_ms = fuzz_range(in, 1, 30 * FUZZ_DAY);
        conf->cd.hint_max_ms = fuzz_range(in, 1, 30 * FUZZ_DAY);
        conf->cd.expired_retry_max = (int32_t) fuzz_range(in, 0,
                                                   OR_COOLDOWN_EXPIRED_MAX);
        conf->cd.rejected_base_ms = fuzz_range(in, 1, 30 * FUZZ_DAY);
        conf->cd.rejected_max_ms = fuzz_range(in, conf->cd.rejected_base_ms,
                                              30 * FUZZ_DAY);
        conf->cd.stream_stall_cooldown = (f >> 9) & 1;
    }

    or_cooldown_conf_fill(&conf->cd, (or_kind_e) ((f >> 4) % OR_KIND_COUNT));

    if (or_cooldown_conf_check(&conf->cd) != NULL) {
        return -1;
    }

    or_lockout_conf_init(&conf->lo);

    if (f & 1024) {
        conf->lo.base_ms = fuzz_range(in, 1, OR_LOCKOUT_MAX_MS);
        conf->lo.max_ms = fuzz_range(in, conf->lo.base_ms, OR_LOCKOUT_MAX_MS);
        conf->lo.max_backoff_steps = (int32_t) fuzz_range(in, 0,
                                                     OR_LOCKOUT_MAX_STEPS);
        conf->lo.exponential = (f >> 11) & 1;
        conf->lo.window_ms = fuzz_range(in, 0, OR_LOCKOUT_MAX_MS);
    }

    if (f & 4096) {
        or_lockout_conf_rejected(&conf->lo);

    } else {
        conf->lo.enabled = 1;
        or_lockout_conf_fill(&conf->lo);
    }

    return or_lockout_conf_check(&conf->lo) == NULL ? 0 : -1;
}


/* a verdict the classifier can give (cooldowns and hints bounded) */

static void
fuzz_verdict(fuzz_in_t *in, or_verdict_t *v)
{
    uint64_t  r;

    memset(v, 0, sizeof(or_verdict_t));

    r = fuzz_u64(in, 2);

    v->reason = (or_reason_e) (r % OR_REASON_COUNT);
    v->scope = (or_scope_e) ((r >> 5) % OR_SCOPE_COUNT);
    v->cooldown_ms = (r & 0x100) ? fuzz_range(in, 0, 30 * FUZZ_DAY)
                                 : OR_MSEC_NONE;
    v->hint_ms = (r & 0x200) ? fuzz_range(in, 0, 30 * FUZZ_DAY)
                             : OR_MSEC_NONE;
    v->fall_over = 1;
    v->counts_for_breaker = (r >> 10) & 1;
    v->retry_after_s = -1;
}


/*
 * Local updates of a valid state, as the request path (and the admin API)
 * makes them; the clock only moves forward.  Returns the last "now".
 */

static or_msec_t
fuzz_ops(fuzz_in_t *in, unsigned kind, fuzz_state_t *s,
    const fuzz_conf_t *conf, or_msec_t now)
{
    int            i, status;
    char           conn[OR_PIN_CONN_MAX];
    size_t         len, k;
    unsigned       op;
    or_msec_t      start;
    or_verdict_t   v;
    or_lane_verdict_t  lv;
    const char    *why;

    for (i = 0; i < FUZZ_OPS_MAX && in->p < in->end; i++) {

        op = (unsigned) fuzz_u64(in, 1);

        /* mostly close together, sometimes far apart */
        now += (op & 0x80) ? fuzz_range(in, 0, 60 * FUZZ_DAY)
                           : fuzz_range(in, 0, 2000);

        start = now - fuzz_range(in, 0, 5000);
        status = (int) fuzz_range(in, 0, 599);

        switch (kind) {

        case FUZZ_BREAKER:
            switch (op % 5) {
            case 0:
            case 1:
                or_breaker_failure(&conf->cb, &s->cb,
                                   (or_reason_e) (op % OR_REASON_COUNT),
                                   start, now, NULL);
                break;
            case 2:
                or_breaker_success(&conf->cb, &s->cb, start, now, NULL);
                break;
            case 3:
                (void) or_breaker_admit(&conf->cb, &s->cb, now, NULL);
                break;
            default:
                (void) or_breaker_reset(&s->cb);
                break;
            }

            break;

        case FUZZ_CONN:
            switch (op % 4) {
            case 0:
            case 1:
                fuzz_verdict(in, &v);
                or_cooldown_fail(&conf->cd, &s->cs, &v, status, start, now,
                                 NULL);
                break;
            case 2:
                (void) or_cooldown_success(&s->cs, start, now);
                break;
            default:
                (void) or_cooldown_reset(&s->cs);
                break;
            }

            break;

        case FUZZ_LOCKOUT:
            switch (op % 4) {
            case 0:
            case 1:
                fuzz_verdict(in, &v);
                or_lockout_fail(&conf->lo, &s->lo, &v, status,
                                or_lockout_scope(status, v.scope), start, now,
                                NULL);
                break;
            case 2:
                (void) or_lockout_success(&s->lo, start, now);
                break;
            default:
                (void) or_lockout_clear(&s->lo);
                break;
            }

            break;

        case FUZZ_LANE:
            memset(&lv, 0, sizeof(lv));

            switch (op % 4) {
            case 0:
                lv.action = OR_LANE_ENTER;
                lv.until = now + fuzz_range(in, 1, OR_LANE_SPAN_MAX_MS);
                (void) or_lane_apply(&s->lane, &lv, now);
                break;
            case 1:
                lv.action = OR_LANE_WAIT;
                (void) or_lane_apply(&s->lane, &lv, now);
                break;
            case 2:
                lv.action = OR_LANE_END;
                lv.end = (or_lane_end_e) fuzz_range(in, 1,
                                                    OR_LANE_END_COUNT - 1);
                lv.block_until = fuzz_range(in, 0, 1)
                                 ? now + fuzz_range(in, 0,
                                                    OR_LANE_SPAN_MAX_MS)
                                 : 0;
                (void) or_lane_apply(&s->lane, &lv, now);
                break;
            default:
                (void) or_lane_reset_record(&s->lane,
                    (or_reset_result_e) fuzz_range(in, 1, OR_RESET_COUNT - 1),
                    fuzz_range(in, 0, 1) ? now + fuzz_range(in, 0, 90 * FUZZ_DAY)
                                         : OR_MSEC_NONE, now);
                break;
            }

            break;

        case FUZZ_PACE:
            if (op & 1) {
                (void) or_pace_pause(&s->pace, now,
                                     fuzz_range(in, 0, 2 * FUZZ_DAY));

            } else {
                (void) or_pace_tools_fail(&s->pace,
                                          (size_t) fuzz_range(in, 0,
                                                              1 << 22),
                                          now,
                                          fuzz_range(in, 0, 2 * FUZZ_DAY));
            }

            break;

        default:
            len = 1 + (size_t) fuzz_range(in, 0, OR_PIN_CONN_MAX - 1);

            for (k = 0; k < len; k++) {
                conn[k] = (char) ('!' + fuzz_u64(in, 1) % 94);
            }

            (void) or_pin_set(&s->pin, conn, len, now,
                              fuzz_range(in, 1, 800 * FUZZ_DAY));
            break;
        }

        fuzz_stat(fz_ops, kind);

        why = fuzz_valid(kind, s, now);

        if (why != NULL) {
            fprintf(stderr, "fuzz_merge: invalid after op %u: %s\n", op, why);
            fuzz_fail("a local update made an invalid state", kind);
        }
    }

    return now;
}


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int           valid[3];
    size_t        n, i, j;
    unsigned      kind;
    or_msec_t     now;
    fuzz_in_t     in;
    fuzz_conf_t   conf;
    fuzz_state_t  s[3], x;

    in.p = data;
    in.end = data + size;

    kind = (unsigned) fuzz_u64(&in, 1) % FUZZ_KINDS;
    now = FUZZ_DAY
          + (or_msec_t) (fuzz_u64(&in, 8) % (uint64_t) FUZZ_NOW_MAX);

    fuzz_decode(data, size, now);

    n = fuzz_size(kind);

    for (i = 0; i < 3; i++) {
        memset(&s[i], 0, sizeof(fuzz_state_t));

        for (j = 0; j < n && in.p < in.end; j++) {
            ((uint8_t *) &s[i])[j] = *in.p++;
        }

        valid[i] = (fuzz_valid(kind, &s[i], now) == NULL);

        if (valid[i]) {
            fuzz_stat(fz_valid, kind);
        }
    }

    /* any two states, valid or not: no UB, no access past a state */

    for (i = 0; i < 3; i++) {
        for (j = 0; j < 3; j++) {
            x = s[i];
            (void) fuzz_merge(kind, &x, &s[j]);
        }
    }

    if (fuzz_confs(&in, &conf) != 0) {
        return 0;
    }

    for (i = 0; i < 3; i++) {
        for (j = 0; j < 3; j++) {
            if (valid[i] && valid[j]) {
                fuzz_laws(kind, &s[i], &s[j], &conf, now);
            }
        }
    }

    if (valid[0] && valid[1] && valid[2]) {
        fuzz_state_t  l, r;

        /* associative */

        l = s[0];
        (void) fuzz_merge(kind, &l, &s[1]);
        (void) fuzz_merge(kind, &l, &s[2]);

        r = s[1];
        (void) fuzz_merge(kind, &r, &s[2]);
        x = s[0];
        (void) fuzz_merge(kind, &x, &r);

        if (memcmp(&l, &x, n) != 0) {
            fuzz_fail("merge is not associative", kind);
        }
    }

    if (valid[0]) {
        x = s[0];
        now = fuzz_ops(&in, kind, &x, &conf, now);

        fuzz_reads(kind, &x, &conf, now);

        if (valid[1] && fuzz_valid(kind, &s[1], now) == NULL) {
            fuzz_laws(kind, &x, &s[1], &conf, now);
        }
    }

    return 0;
}
