/*
 * Copyright (C) ngx_omniroute authors
 *
 * Validation of states from other nodes (or_*_valid(), or_types.h) and
 * the wire decoders (or_wire.h), table-driven: each case patches one
 * field of a valid state (built by the engine's own functions) and names
 * the field the validator must blame, or NULL when the patched state is
 * still valid (the boundaries).  Then: merges and updates of invalid
 * states stay inside the state (run under ASan/UBSan too), and the
 * duration caps the validators rely on.
 */


#include <stddef.h>
#include <string.h>

#include "or_test.h"
#include "or_breaker.h"
#include "or_cooldown.h"
#include "or_lockout.h"
#include "or_pin.h"
#include "or_wire.h"


#define NOW     ((or_msec_t) 1704067200000)    /* 2024-01-01 */
#define DAY     ((or_msec_t) 86400 * 1000)
#define SKEW    OR_VALID_SKEW_MS
#define REL     1                               /* value is NOW + v */
#define ABS     0


/* write v into the field at off (its size: 1, 2, 4 or 8 bytes) */
typedef struct {
    const char   *name;
    size_t        off;
    size_t        len;
    int64_t       v;
    int           rel;
    const char   *why;          /* expected answer; NULL: valid */
} case_t;


#define F(type, field)  offsetof(type, field), sizeof(((type *) 0)->field)


static const case_t  breaker_cases[] = {
    { "ring_len 33", F(or_breaker_t, ring_len), 33, ABS, "ring_len" },
    { "ring_len 255", F(or_breaker_t, ring_len), 255, ABS, "ring_len" },
    { "ring_len 0 with times kept", F(or_breaker_t, ring_len), 0, ABS,
      "ring" },
    { "ring not decreasing", offsetof(or_breaker_t, ring)
      + sizeof(or_msec_t), 8, 0, REL, "ring" },
    { "negative ring time", offsetof(or_breaker_t, ring), 8, -1, ABS,
      "ring" },
    { "ring time 2 days ahead", offsetof(or_breaker_t, ring), 8, 2 * DAY,
      REL, "ring" },
    { "garbage past ring_len", offsetof(or_breaker_t, ring)
      + 31 * sizeof(or_msec_t), 8, 5, ABS, "ring" },
    { "state 4", F(or_breaker_t, state), 4, ABS, "state" },
    { "state 255", F(or_breaker_t, state), 255, ABS, "state" },
    { "last_reason out of range", F(or_breaker_t, last_reason),
      OR_REASON_COUNT, ABS, "last_reason" },
    { "reserved0", F(or_breaker_t, reserved0), 1, ABS, "reserved" },
    { "reserved1", F(or_breaker_t, reserved1), 1, ABS, "reserved" },
    { "negative last_failure_at", F(or_breaker_t, last_failure_at), -1,
      ABS, "last_failure_at" },
    { "INT64_MIN last_failure_at", F(or_breaker_t, last_failure_at),
      INT64_MIN, ABS, "last_failure_at" },
    { "last_failure_at 2 days ahead", F(or_breaker_t, last_failure_at),
      2 * DAY, REL, "last_failure_at" },
    { "last_failure_at one skew ahead", F(or_breaker_t, last_failure_at),
      SKEW, REL, NULL },
    { "negative opened_at", F(or_breaker_t, opened_at), -5, ABS,
      "opened_at" },
    { "open_until INT64_MAX", F(or_breaker_t, open_until), INT64_MAX, ABS,
      "open_until" },
    { "open_until at the longest hold", F(or_breaker_t, open_until),
      SKEW + OR_BREAKER_HOLD_MAX_MS, REL, NULL },
    { "open_until past the longest hold", F(or_breaker_t, open_until),
      SKEW + OR_BREAKER_HOLD_MAX_MS + 1, REL, "open_until" },
    { "negative probe_until", F(or_breaker_t, probe_until), -1, ABS,
      "probe_until" },
    { "gate_until INT64_MAX", F(or_breaker_t, gate_until), INT64_MAX, ABS,
      "gate_until" },
    { "failures UINT32_MAX", F(or_breaker_t, failures), UINT32_MAX, ABS,
      "failures" },
    { "failures at the bound", F(or_breaker_t, failures),
      OR_VALID_COUNT_MAX, ABS, NULL },
    { "failures past the bound", F(or_breaker_t, failures),
      OR_VALID_COUNT_MAX + 1LL, ABS, "failures" },
    { "epoch UINT32_MAX", F(or_breaker_t, epoch), UINT32_MAX, ABS,
      "epoch" },
    { "gate_epoch UINT32_MAX", F(or_breaker_t, gate_epoch), UINT32_MAX,
      ABS, "epoch" },
    { "open_cycles 65535", F(or_breaker_t, open_cycles), 65535, ABS, NULL }
};


static const case_t  conn_cases[] = {
    { "terminal 4", F(or_conn_state_t, terminal), 4, ABS, "terminal" },
    { "terminal time without a terminal state",
      F(or_conn_state_t, terminal_at), 5, REL, "terminal" },
    { "terminal status without a terminal state",
      F(or_conn_state_t, terminal_status), 403, ABS, "terminal" },
    { "last_reason out of range", F(or_conn_state_t, last_reason),
      OR_REASON_COUNT, ABS, "last_reason" },
    { "negative last_status", F(or_conn_state_t, last_status), -1, ABS,
      "status" },
    { "last_status 1000", F(or_conn_state_t, last_status), 1000, ABS,
      "status" },
    { "reset_epoch UINT32_MAX", F(or_conn_state_t, reset_epoch),
      UINT32_MAX, ABS, "epoch" },
    { "clear_epoch UINT32_MAX", F(or_conn_state_t, clear_epoch),
      UINT32_MAX, ABS, "epoch" },
    { "failures UINT32_MAX", F(or_conn_state_t, failures), UINT32_MAX,
      ABS, "failures" },
    { "backoff_level 31", F(or_conn_state_t, backoff_level),
      OR_COOLDOWN_MAX_STEPS + 1, ABS, "backoff_level" },
    { "backoff_level 65535", F(or_conn_state_t, backoff_level), 65535,
      ABS, "backoff_level" },
    { "expired_retries at the bound", F(or_conn_state_t, expired_retries),
      OR_COOLDOWN_EXPIRED_MAX + 1, ABS, NULL },
    { "expired_retries past the bound",
      F(or_conn_state_t, expired_retries), OR_COOLDOWN_EXPIRED_MAX + 2,
      ABS, "expired_retries" },
    { "rejected_count 65535", F(or_conn_state_t, rejected_count), 65535,
      ABS, NULL },
    { "negative until", F(or_conn_state_t, until), -1, ABS, "until" },
    { "until at 30 days", F(or_conn_state_t, until),
      SKEW + OR_COOLDOWN_MAX_MS, REL, NULL },
    { "until past 30 days", F(or_conn_state_t, until),
      SKEW + OR_COOLDOWN_MAX_MS + 1, REL, "until" },
    { "until INT64_MAX", F(or_conn_state_t, until), INT64_MAX, ABS,
      "until" },
    { "mark_at 2 days ahead", F(or_conn_state_t, mark_at), 2 * DAY, REL,
      "mark_at" },
    { "INT64_MIN last_error_at", F(or_conn_state_t, last_error_at),
      INT64_MIN, ABS, "last_error_at" }
};


/* on a banned connection */
static const case_t  terminal_cases[] = {
    { "banned", F(or_conn_state_t, terminal), OR_TERMINAL_BANNED, ABS,
      NULL },
    { "negative terminal_at", F(or_conn_state_t, terminal_at), -1, ABS,
      "terminal_at" },
    { "terminal_at 2 days ahead", F(or_conn_state_t, terminal_at),
      2 * DAY, REL, "terminal_at" },
    { "terminal_status 1000", F(or_conn_state_t, terminal_status), 1000,
      ABS, "status" }
};


static const case_t  lockout_cases[] = {
    { "reason out of range", F(or_lockout_t, reason), OR_REASON_COUNT,
      ABS, "reason" },
    { "scope out of range", F(or_lockout_t, scope), OR_SCOPE_COUNT, ABS,
      "scope" },
    { "negative last_status", F(or_lockout_t, last_status), -429, ABS,
      "last_status" },
    { "reserved", F(or_lockout_t, reserved), 7, ABS, "reserved" },
    { "epoch UINT32_MAX", F(or_lockout_t, epoch), UINT32_MAX, ABS,
      "epoch" },
    { "failures UINT32_MAX", F(or_lockout_t, failures), UINT32_MAX, ABS,
      "failures" },
    { "failures at the bound", F(or_lockout_t, failures),
      OR_VALID_COUNT_MAX, ABS, NULL },
    { "INT64_MAX mark_at (the old overflow)", F(or_lockout_t, mark_at),
      INT64_MAX, ABS, "mark_at" },
    { "negative last_failure_at", F(or_lockout_t, last_failure_at), -1,
      ABS, "last_failure_at" },
    { "decay_at 2 days ahead", F(or_lockout_t, decay_at), 2 * DAY, REL,
      "decay_at" },
    { "until INT64_MAX", F(or_lockout_t, until), INT64_MAX, ABS, "until" },
    { "until at 30 days", F(or_lockout_t, until),
      SKEW + OR_LOCKOUT_MAX_MS, REL, NULL },
    { "until past 30 days", F(or_lockout_t, until),
      SKEW + OR_LOCKOUT_MAX_MS + 1, REL, "until" }
};


static const case_t  pin_cases[] = {
    { "conn_len 0", F(or_pin_t, conn_len), 0, ABS, "conn_len" },
    { "conn_len 129", F(or_pin_t, conn_len), OR_PIN_CONN_MAX + 1, ABS,
      "conn_len" },
    { "conn_len longer than conn", F(or_pin_t, conn_len), 8, ABS, "conn" },
    { "NUL inside conn", offsetof(or_pin_t, conn) + 1, 1, 0, ABS, "conn" },
    { "garbage after conn", offsetof(or_pin_t, conn) + 100, 1, 'x', ABS,
      "conn" },
    { "wrong conn_hash", F(or_pin_t, conn_hash), 12345, ABS, "conn_hash" },
    { "reserved", F(or_pin_t, reserved), 1, ABS, "reserved" },
    { "negative set_at", F(or_pin_t, set_at), -1, ABS, "set_at" },
    { "set_at 2 days ahead", F(or_pin_t, set_at), 2 * DAY, REL, "set_at" },
    { "until before set_at", F(or_pin_t, until), -1, REL, "until" },
    { "until 2 years after set_at", F(or_pin_t, until), 730 * DAY, REL,
      "until" }
};


static void run_cases(const char *what, const void *base, size_t size,
    const case_t *cases, size_t n,
    const char *(*valid)(const void *, size_t, or_msec_t));
static void patch(void *state, const case_t *c);
static void test_breaker(void);
static void test_conn(void);
static void test_lockout(void);
static void test_pin(void);
static void test_invalid_input(void);
static void test_caps(void);
static void test_wire(void);


static void
patch(void *state, const case_t *c)
{
    int64_t   v;
    uint8_t   u8;
    uint16_t  u16;
    uint32_t  u32;

    v = c->rel ? NOW + c->v : c->v;

    switch (c->len) {
    case 1:
        u8 = (uint8_t) v;
        memcpy((uint8_t *) state + c->off, &u8, 1);
        break;
    case 2:
        u16 = (uint16_t) v;
        memcpy((uint8_t *) state + c->off, &u16, 2);
        break;
    case 4:
        u32 = (uint32_t) v;
        memcpy((uint8_t *) state + c->off, &u32, 4);
        break;
    default:
        memcpy((uint8_t *) state + c->off, &v, 8);
        break;
    }
}


static void
run_cases(const char *what, const void *base, size_t size,
    const case_t *cases, size_t n,
    const char *(*valid)(const void *, size_t, or_msec_t))
{
    size_t    i;
    uint64_t  s[64], big[65];

    memcpy(s, base, size);
    or_is_str(valid(s, size, NOW), NULL, "%s: the base state is valid", what);

    memset(s, 0, sizeof(s));

    if (strcmp(what, "pin") == 0) {
        or_is_str(valid(s, size, NOW), "conn_len", "pin: all zero is not "
                  "a pin");

    } else {
        or_is_str(valid(s, size, NOW), NULL, "%s: all zero is valid", what);
    }

    memcpy(s, base, size);
    or_is_str(valid(s, size - 1, NOW), "size", "%s: one byte short", what);
    memset(big, 0, sizeof(big));
    memcpy(big, base, size);
    or_is_str(valid(big, size + 8, NOW), "size", "%s: 8 bytes too many",
              what);
    or_is_str(valid(s, 0, NOW), "size", "%s: empty", what);

    for (i = 0; i < n; i++) {
        memcpy(s, base, size);
        patch(s, &cases[i]);
        or_is_str(valid(s, size, NOW), cases[i].why, "%s: %s", what,
                  cases[i].name);
    }
}


static void
test_breaker(void)
{
    int                i;
    or_msec_t          t;
    or_breaker_t       cb;
    or_breaker_conf_t  conf;

    or_breaker_conf_init(&conf);
    conf.gate_enabled = 1;
    or_breaker_conf_fill(&conf, OR_KIND_APIKEY);

    /* OPEN, and three failure times in the gate ring */
    memset(&cb, 0, sizeof(cb));

    for (i = 0, t = NOW - 20000; i < 12; i++, t += 1000) {
        or_breaker_failure(&conf, &cb, OR_REASON_SERVER_ERROR, t, t, NULL);
    }

    or_is_int(cb.state, OR_CB_OPEN, "breaker: base state is OPEN");
    or_ok(cb.ring_len >= 3, "breaker: with a gate ring (%d)", cb.ring_len);

    run_cases("breaker", &cb, sizeof(cb), breaker_cases,
              sizeof(breaker_cases) / sizeof(breaker_cases[0]),
              or_breaker_valid);
}


static void
test_conn(void)
{
    or_verdict_t        v;
    or_conn_state_t     st;
    or_cooldown_conf_t  conf;

    or_cooldown_conf_init(&conf);
    or_cooldown_conf_fill(&conf, OR_KIND_OAUTH);

    memset(&st, 0, sizeof(st));
    memset(&v, 0, sizeof(v));
    v.reason = OR_REASON_RATE_LIMIT_EXCEEDED;
    v.cooldown_ms = OR_MSEC_NONE;
    v.hint_ms = OR_MSEC_NONE;

    or_cooldown_fail(&conf, &st, &v, 429, NOW - 10, NOW - 5, NULL);
    or_cooldown_fail(&conf, &st, &v, 429, NOW - 2, NOW, NULL);

    or_ok(st.until > NOW && st.backoff_level == 2,
          "conn: base state cools down, level 2");

    run_cases("conn", &st, sizeof(st), conn_cases,
              sizeof(conn_cases) / sizeof(conn_cases[0]), or_cooldown_valid);

    v.reason = OR_REASON_BANNED;
    or_cooldown_fail(&conf, &st, &v, 403, NOW, NOW, NULL);
    or_is_int(st.terminal, OR_TERMINAL_BANNED, "conn: then banned");

    run_cases("banned conn", &st, sizeof(st), terminal_cases,
              sizeof(terminal_cases) / sizeof(terminal_cases[0]),
              or_cooldown_valid);
}


static void
test_lockout(void)
{
    or_verdict_t       v;
    or_lockout_t       lo;
    or_lockout_conf_t  conf;

    or_lockout_conf_init(&conf);
    conf.enabled = 1;
    or_lockout_conf_fill(&conf);

    memset(&lo, 0, sizeof(lo));
    memset(&v, 0, sizeof(v));
    v.reason = OR_REASON_QUOTA_EXHAUSTED;
    v.cooldown_ms = OR_MSEC_NONE;

    or_lockout_fail(&conf, &lo, &v, 429, OR_SCOPE_QUOTA_FAMILY, NOW - 9,
                    NOW - 8, NULL);
    or_lockout_fail(&conf, &lo, &v, 429, OR_SCOPE_QUOTA_FAMILY, NOW - 1,
                    NOW, NULL);
    (void) or_lockout_success(&lo, NOW + 1, NOW + 1);

    or_ok(lo.failures == 1 && lo.epoch == 1 && lo.decay_at == NOW + 1,
          "lockout: base state locked, decayed once");

    run_cases("lockout", &lo, sizeof(lo), lockout_cases,
              sizeof(lockout_cases) / sizeof(lockout_cases[0]),
              or_lockout_valid);
}


static void
test_pin(void)
{
    or_pin_t  pin;

    memset(&pin, 0, sizeof(pin));
    or_is_int(or_pin_set(&pin, "oa-1", 4, NOW, 3600000), 1, "pin: set");

    run_cases("pin", &pin, sizeof(pin), pin_cases,
              sizeof(pin_cases) / sizeof(pin_cases[0]), or_pin_valid);
}


/*
 * What validation guards against, without it: merges and updates of
 * hostile states stay inside the state and do not overflow (this binary
 * also runs under ASan/UBSan).
 */

static void
test_invalid_input(void)
{
    int                  i;
    or_verdict_t         v;
    or_breaker_t         a, b, c;
    or_lockout_t         lo;
    or_breaker_conf_t    conf;
    or_lockout_conf_t    lconf;
    or_lockout_result_t  res;

    or_breaker_conf_init(&conf);
    conf.gate_enabled = 1;
    or_breaker_conf_fill(&conf, OR_KIND_APIKEY);

    /* the record: ring_len out of range */
    memset(&a, 0, sizeof(a));
    memset(&b, 0x7f, sizeof(b));
    b.gate_epoch = 0;
    b.ring_len = 255;

    or_ok(or_breaker_valid(&b, sizeof(b), NOW) != NULL,
          "hostile breaker: rejected");

    c = a;
    (void) or_breaker_merge(&c, &b);
    or_ok(c.ring_len <= OR_BREAKER_RING,
          "merge of ring_len 255: the result stays within the ring (%d)",
          c.ring_len);

    c = b;
    (void) or_breaker_merge(&c, &b);
    c.ring_len = 255;

    for (i = 0; i < 40; i++) {
        or_breaker_failure(&conf, &c, OR_REASON_SERVER_ERROR, NOW + i,
                           NOW + i, NULL);
    }

    or_ok(c.ring_len <= OR_BREAKER_RING,
          "failures on ring_len 255: the ring is never written past (%d)",
          c.ring_len);

    /* the lockout overflow: mark_at near INT64_MAX */
    or_lockout_conf_init(&lconf);
    lconf.enabled = 1;
    or_lockout_conf_fill(&lconf);

    memset(&lo, 0, sizeof(lo));
    lo.mark_at = INT64_MAX - 5;
    lo.until = INT64_MAX - 5;
    lo.failures = 3;

    memset(&v, 0, sizeof(v));
    v.reason = OR_REASON_RATE_LIMIT_EXCEEDED;
    v.cooldown_ms = OR_MSEC_NONE;
    v.hint_ms = 1000;

    or_lockout_fail(&lconf, &lo, &v, 429, OR_SCOPE_MODEL, NOW, NOW, &res);
    or_ok(lo.until == INT64_MAX,
          "lockout with mark_at near INT64_MAX: until saturates");
    or_ok(!or_lockout_evictable(&lconf, &lo, NOW),
          "and evictable() does not overflow");

    lo.until = INT64_MAX;
    lo.mark_at = 0;
    or_lockout_fail(&lconf, &lo, &v, 429, OR_SCOPE_MODEL, NOW, NOW, &res);
    or_ok(lo.until == INT64_MAX, "escalation window past INT64_MAX: no "
          "overflow");

    /* counters and epochs saturate at the validators' bound */
    memset(&a, 0, sizeof(a));
    a.epoch = OR_VALID_COUNT_MAX;
    a.state = OR_CB_DEGRADED;
    a.failures = 1;
    a.last_failure_at = NOW;
    (void) or_breaker_reset(&a);
    or_ok(a.epoch == OR_VALID_COUNT_MAX
          && or_breaker_valid(&a, sizeof(a), NOW) == NULL,
          "an epoch at the bound stays valid after a reset");
}


static void
test_caps(void)
{
    or_pin_t           pin;
    or_breaker_t       cb;
    or_breaker_conf_t  conf;

    /* the derived degrade threshold of a huge open threshold */
    or_breaker_conf_init(&conf);
    conf.open_threshold = INT32_MAX;
    or_breaker_conf_fill(&conf, OR_KIND_APIKEY);
    or_is_int(conf.degrade_threshold, 1288490188,
              "degrade threshold of INT32_MAX: 0.6 x, no int overflow");

    /* holds, probes and pins are capped: a valid state stays valid */
    or_breaker_conf_init(&conf);
    conf.reset_ms = 3650 * DAY;             /* breaker_reset=10y */
    conf.max_backoff_multiplier = OR_BREAKER_MAX_MULT;
    or_breaker_conf_fill(&conf, OR_KIND_APIKEY);

    memset(&cb, 0, sizeof(cb));
    cb.open_cycles = 20;
    or_is_int(or_breaker_hold_ms(&conf, &cb, 20), OR_BREAKER_HOLD_MAX_MS,
              "a 10-year reset x 1024: the hold is capped at 365 days");

    cb.state = OR_CB_HALF_OPEN;
    cb.opened_at = NOW - 1;
    (void) or_breaker_admit(&conf, &cb, NOW, NULL);
    or_is_int(cb.probe_until, NOW + OR_BREAKER_HOLD_MAX_MS,
              "and so is the probe timeout");
    or_is_str(or_breaker_valid(&cb, sizeof(cb), NOW), NULL,
              "the probing breaker is valid");

    memset(&pin, 0, sizeof(pin));
    (void) or_pin_set(&pin, "c", 1, NOW, 1000 * DAY);
    or_is_int(pin.until - pin.set_at, OR_PIN_TTL_MAX_MS,
              "a 1000-day pin TTL is capped at 365 days");
    or_is_str(or_pin_valid(&pin, sizeof(pin), NOW), NULL,
              "and the pin is valid");
}


static void
test_wire(void)
{
    size_t           len, size;
    uint8_t          buf[1024];
    or_msec_t        time;
    or_wire_msg_t    m;
    or_breaker_t     cb;
    const uint8_t   *v;

    memset(&cb, 0, sizeof(cb));
    cb.epoch = 3;

    len = or_wire_encode_value(buf, 0, &cb, sizeof(cb), NOW);
    or_is_int(len, OR_WIRE_VALUE_HDR + sizeof(cb), "value: encoded");
    or_is_int(or_wire_decode_value(buf, len, 0, &v, &size, &time), 0,
              "value: decoded");
    or_ok(size == sizeof(cb) && time == NOW && v == buf + OR_WIRE_VALUE_HDR
          && memcmp(v, &cb, size) == 0, "value: the same state and time");

    or_is_int(or_wire_decode_value(buf, len, 1, &v, &size, &time), -1,
              "value: another table's is refused");
    or_is_int(or_wire_decode_value(buf, len - 1, 0, &v, &size, &time), -1,
              "value: truncated");
    or_is_int(or_wire_decode_value(buf, 15, 0, &v, &size, &time), -1,
              "value: shorter than the header");
    or_is_int(or_wire_decode_value(buf, 16, 0, &v, &size, &time), -1,
              "value: the header alone (size 0)");
    buf[2] = 2;
    or_is_int(or_wire_decode_value(buf, len, 0, &v, &size, &time), -1,
              "value: another version");

    len = or_wire_encode_msg(buf, (const uint8_t *) "node-a", 6,
                             OR_WIRE_OP_SET, 2, (const uint8_t *) "k1", 2,
                             &cb, sizeof(cb), NOW);
    or_is_int(or_wire_decode_msg(buf, len, 7, &m), 0, "message: decoded");
    or_ok(m.op == OR_WIRE_OP_SET && m.table == 2 && m.node_len == 6
          && memcmp(m.node, "node-a", 6) == 0 && m.key_len == 2
          && memcmp(m.key, "k1", 2) == 0 && m.size == sizeof(cb)
          && m.time == NOW && m.value + m.size == buf + len,
          "message: the same fields");

    or_is_int(or_wire_decode_msg(buf, len, 2, &m), -1,
              "message: table out of range");
    or_is_int(or_wire_decode_msg(buf, len - 1, 7, &m), -1,
              "message: truncated");
    or_is_int(or_wire_decode_msg(buf, len + 1, 7, &m), -1,
              "message: a trailing byte");
    buf[3] = 3;
    or_is_int(or_wire_decode_msg(buf, len, 7, &m), -1,
              "message: unknown op");
    buf[3] = OR_WIRE_OP_SET;
    buf[16] = 0xff;
    buf[17] = 0xff;
    buf[18] = 0xff;
    buf[19] = 0xff;
    or_is_int(or_wire_decode_msg(buf, len, 7, &m), -1,
              "message: size 4 GiB");
}


int
main(void)
{
    test_breaker();
    test_conn();
    test_lockout();
    test_pin();
    test_invalid_input();
    test_caps();
    test_wire();

    return or_done();
}
