/*
 * Copyright (C) ngx_omniroute authors
 *
 * Planning decisions (or_plan): exclusion reason and retry from record
 * copies (R-REQ-3, R-REQ-6), admission at dispatch (R-CB-4).  One table
 * row per rule, with the precedence between rules.
 */


#include <string.h>

#include "or_test.h"
#include "or_plan.h"


#define SEC   1000LL
#define T0    1000000000LL      /* "now" of the tables */


/* breaker records (apikey profile: open 12, reset 30 s) */
typedef enum {
    B_NONE = 0,                 /* no record */
    B_CLOSED,
    B_DEGRADED,
    B_OPEN,                     /* OPEN, 30 s left */
    B_LAPSED,                   /* OPEN, hold over: HALF_OPEN, probe free */
    B_PROBING,                  /* HALF_OPEN, probe in flight 5 s more */
    B_GATED,                    /* CLOSED, window gate 60 s more */
    B_COUNT
} breaker_e;

/* breaker settings */
typedef enum {
    BC_APIKEY = 0,
    BC_GATE,                    /* apikey with the window gate on */
    BC_NONE                     /* no settings passed */
} bconf_e;

typedef enum {
    C_NONE = 0,
    C_HEALTHY,
    C_COOLING,                  /* until now + 7 s */
    C_EXPIRED,                  /* cooldown over */
    C_TERMINAL,                 /* banned */
    C_TERMINAL_COOLING,         /* credits exhausted, and a cooldown */
    C_COUNT
} conn_e;

typedef enum {
    L_NONE = 0,
    L_ACTIVE,                   /* until now + 9 s */
    L_LONGER,                   /* until now + 20 s */
    L_EXPIRED,                  /* until now - 1 */
    L_TOMBSTONE,                /* empty, epoch 1 */
    L_COUNT
} lockout_e;


static const or_breaker_t  breakers[B_COUNT] = {
    [B_CLOSED] = { .epoch = 2, .last_failure_at = T0 - 100 * SEC },
    [B_DEGRADED] = { .state = OR_CB_DEGRADED, .failures = 7,
                     .last_failure_at = T0 - SEC,
                     .last_reason = OR_REASON_SERVER_ERROR },
    [B_OPEN] = { .state = OR_CB_OPEN, .failures = 12,
                 .opened_at = T0 - 1, .open_until = T0 + 30 * SEC,
                 .last_failure_at = T0 - 1,
                 .last_reason = OR_REASON_SERVER_ERROR },
    [B_LAPSED] = { .state = OR_CB_OPEN, .failures = 12,
                   .opened_at = T0 - 30 * SEC, .open_until = T0,
                   .last_failure_at = T0 - 30 * SEC,
                   .last_reason = OR_REASON_SERVER_ERROR },
    [B_PROBING] = { .state = OR_CB_HALF_OPEN, .failures = 12,
                    .opened_at = T0 - 60 * SEC, .open_until = T0 - 30 * SEC,
                    .probe_until = T0 + 5 * SEC,
                    .last_failure_at = T0 - 60 * SEC,
                    .last_reason = OR_REASON_SERVER_ERROR },
    [B_GATED] = { .gate_until = T0 + 60 * SEC, .gate_epoch = 1 }
};

static const or_conn_state_t  conns[C_COUNT] = {
    [C_COOLING] = { .until = T0 + 7 * SEC, .mark_at = T0 - SEC,
                    .failures = 1, .backoff_level = 1,
                    .last_error_at = T0 - SEC, .last_status = 429 },
    [C_EXPIRED] = { .until = T0 - 1, .mark_at = T0 - 4 * SEC,
                    .failures = 1, .backoff_level = 1,
                    .last_error_at = T0 - 4 * SEC, .last_status = 503 },
    [C_TERMINAL] = { .terminal = OR_TERMINAL_BANNED,
                     .terminal_at = T0 - SEC, .terminal_status = 403 },
    [C_TERMINAL_COOLING] = { .terminal = OR_TERMINAL_CREDITS_EXHAUSTED,
                             .terminal_at = T0 - SEC,
                             .terminal_status = 402,
                             .until = T0 + 7 * SEC }
};

static const or_lockout_t  lockouts[L_COUNT] = {
    [L_ACTIVE] = { .failures = 1, .until = T0 + 9 * SEC,
                   .mark_at = T0 - 111 * SEC },
    [L_LONGER] = { .failures = 2, .until = T0 + 20 * SEC,
                   .mark_at = T0 - 100 * SEC },
    [L_EXPIRED] = { .failures = 1, .until = T0 - 1,
                    .mark_at = T0 - 120 * SEC },
    [L_TOMBSTONE] = { .epoch = 1 }
};


typedef struct {
    const char      *name;
    bconf_e          bconf;
    breaker_e        breaker;
    conn_e           conn;
    lockout_e        lockout[OR_PLAN_LOCKOUTS];
    int              enabled;
    lockout_e        rejected;
    or_exclusion_e   excl;
    or_msec_t        retry;
} excl_case_t;


static const excl_case_t  excl_cases[] = {

    /* nothing excludes */
    { "no record at all", BC_APIKEY, B_NONE, C_NONE,
      { L_NONE, L_NONE, L_NONE }, 1, L_NONE, OR_EXCL_NONE, 0 },
    { "every record present and harmless", BC_APIKEY, B_CLOSED, C_HEALTHY,
      { L_EXPIRED, L_TOMBSTONE, L_EXPIRED }, 1, L_EXPIRED,
      OR_EXCL_NONE, 0 },

    /* 1. circuit_open */
    { "breaker OPEN: circuit_open, retry = open_until - now", BC_APIKEY,
      B_OPEN, C_NONE, { L_NONE, L_NONE, L_NONE }, 0, L_NONE,
      OR_EXCL_CIRCUIT_OPEN, 30 * SEC },
    { "breaker OPEN past its hold is HALF_OPEN with a free probe: "
      "eligible", BC_APIKEY, B_LAPSED, C_NONE, { L_NONE, L_NONE, L_NONE },
      0, L_NONE, OR_EXCL_NONE, 0 },
    { "breaker HALF_OPEN, probe in flight: circuit_open until "
      "probe_until", BC_APIKEY, B_PROBING, C_NONE,
      { L_NONE, L_NONE, L_NONE }, 0, L_NONE, OR_EXCL_CIRCUIT_OPEN,
      5 * SEC },
    { "breaker DEGRADED still admits traffic", BC_APIKEY, B_DEGRADED,
      C_NONE, { L_NONE, L_NONE, L_NONE }, 0, L_NONE, OR_EXCL_NONE, 0 },
    { "window gate active, gate on: circuit_open for the gate",
      BC_GATE, B_GATED, C_NONE, { L_NONE, L_NONE, L_NONE }, 0, L_NONE,
      OR_EXCL_CIRCUIT_OPEN, 60 * SEC },
    { "window gate time left but the gate is off: eligible", BC_APIKEY,
      B_GATED, C_NONE, { L_NONE, L_NONE, L_NONE }, 0, L_NONE,
      OR_EXCL_NONE, 0 },
    { "breaker record without settings is no record", BC_NONE, B_OPEN,
      C_NONE, { L_NONE, L_NONE, L_NONE }, 0, L_NONE, OR_EXCL_NONE, 0 },

    /* 2, 3. the connection */
    { "connection cooling: provider_cooldown, retry = until - now",
      BC_APIKEY, B_NONE, C_COOLING, { L_NONE, L_NONE, L_NONE }, 0,
      L_NONE, OR_EXCL_PROVIDER_COOLDOWN, 7 * SEC },
    { "connection cooldown over: eligible (lazy recovery)", BC_APIKEY,
      B_NONE, C_EXPIRED, { L_NONE, L_NONE, L_NONE }, 0, L_NONE,
      OR_EXCL_NONE, 0 },
    { "connection terminal: terminal, retry -1", BC_APIKEY, B_NONE,
      C_TERMINAL, { L_NONE, L_NONE, L_NONE }, 0, L_NONE,
      OR_EXCL_TERMINAL, -1 },
    { "terminal beats a running cooldown of the same connection",
      BC_APIKEY, B_NONE, C_TERMINAL_COOLING, { L_NONE, L_NONE, L_NONE },
      0, L_NONE, OR_EXCL_TERMINAL, -1 },

    /* 4. model lockout */
    { "exact-model lockout active: model_lockout", BC_APIKEY, B_NONE,
      C_NONE, { L_ACTIVE, L_NONE, L_NONE }, 1, L_NONE,
      OR_EXCL_MODEL_LOCKOUT, 9 * SEC },
    { "base-model lockout active: model_lockout", BC_APIKEY, B_NONE,
      C_NONE, { L_NONE, L_ACTIVE, L_NONE }, 1, L_NONE,
      OR_EXCL_MODEL_LOCKOUT, 9 * SEC },
    { "quota-family lockout active: model_lockout", BC_APIKEY, B_NONE,
      C_NONE, { L_NONE, L_NONE, L_ACTIVE }, 1, L_NONE,
      OR_EXCL_MODEL_LOCKOUT, 9 * SEC },
    { "two active lockouts: the longer one's retry", BC_APIKEY, B_NONE,
      C_HEALTHY, { L_ACTIVE, L_EXPIRED, L_LONGER }, 1, L_NONE,
      OR_EXCL_MODEL_LOCKOUT, 20 * SEC },
    { "lockout active but lockout disabled: ignored", BC_APIKEY, B_NONE,
      C_NONE, { L_ACTIVE, L_LONGER, L_ACTIVE }, 0, L_NONE,
      OR_EXCL_NONE, 0 },
    { "expired lockouts and a tombstone: eligible", BC_APIKEY, B_NONE,
      C_NONE, { L_EXPIRED, L_TOMBSTONE, L_EXPIRED }, 1, L_NONE,
      OR_EXCL_NONE, 0 },

    /* 5. request_rejected */
    { "request_rejected active: unavailable", BC_APIKEY, B_NONE, C_NONE,
      { L_NONE, L_NONE, L_NONE }, 0, L_ACTIVE, OR_EXCL_UNAVAILABLE,
      9 * SEC },
    { "request_rejected counts with lockout disabled too", BC_APIKEY,
      B_CLOSED, C_HEALTHY, { L_LONGER, L_NONE, L_NONE }, 0, L_LONGER,
      OR_EXCL_UNAVAILABLE, 20 * SEC },
    { "request_rejected expired: eligible", BC_APIKEY, B_NONE, C_NONE,
      { L_NONE, L_NONE, L_NONE }, 0, L_EXPIRED, OR_EXCL_NONE, 0 },

    /* precedence */
    { "circuit_open before terminal", BC_APIKEY, B_OPEN, C_TERMINAL,
      { L_ACTIVE, L_NONE, L_NONE }, 1, L_ACTIVE, OR_EXCL_CIRCUIT_OPEN,
      30 * SEC },
    { "circuit_open before provider_cooldown", BC_APIKEY, B_PROBING,
      C_COOLING, { L_NONE, L_NONE, L_NONE }, 0, L_NONE,
      OR_EXCL_CIRCUIT_OPEN, 5 * SEC },
    { "a free HALF_OPEN probe does not hide the cooldown", BC_APIKEY,
      B_LAPSED, C_COOLING, { L_NONE, L_NONE, L_NONE }, 0, L_NONE,
      OR_EXCL_PROVIDER_COOLDOWN, 7 * SEC },
    { "provider_cooldown before model_lockout", BC_APIKEY, B_CLOSED,
      C_COOLING, { L_LONGER, L_NONE, L_NONE }, 1, L_NONE,
      OR_EXCL_PROVIDER_COOLDOWN, 7 * SEC },
    { "terminal before request_rejected", BC_APIKEY, B_NONE, C_TERMINAL,
      { L_NONE, L_NONE, L_NONE }, 0, L_LONGER, OR_EXCL_TERMINAL, -1 },
    { "model_lockout before request_rejected", BC_APIKEY, B_NONE,
      C_HEALTHY, { L_NONE, L_ACTIVE, L_NONE }, 1, L_LONGER,
      OR_EXCL_MODEL_LOCKOUT, 9 * SEC },
    { "breaker DEGRADED and connection expired: on to the lockout",
      BC_APIKEY, B_DEGRADED, C_EXPIRED, { L_NONE, L_NONE, L_LONGER }, 1,
      L_NONE, OR_EXCL_MODEL_LOCKOUT, 20 * SEC }
};


typedef struct {
    const char   *name;
    int           first;
    bconf_e       bconf;
    breaker_e     breaker;
    conn_e        conn;
    or_admit_e    admit;
} admit_case_t;


static const admit_case_t  admit_cases[] = {
    { "first attempt, no record read: allowed", 1, BC_APIKEY, B_NONE,
      C_NONE, OR_ADMIT_ALLOW },
    { "first attempt ignores the connection (planning just read it)", 1,
      BC_APIKEY, B_NONE, C_COOLING, OR_ADMIT_ALLOW },
    { "first attempt, breaker CLOSED: allowed", 1, BC_APIKEY, B_CLOSED,
      C_NONE, OR_ADMIT_ALLOW },
    { "first attempt, breaker DEGRADED: allowed", 1, BC_APIKEY,
      B_DEGRADED, C_NONE, OR_ADMIT_ALLOW },
    { "first attempt, breaker opened since planning: denied", 1,
      BC_APIKEY, B_OPEN, C_NONE, OR_ADMIT_DENY_CIRCUIT },
    { "first attempt, window gate active: denied", 1, BC_GATE, B_GATED,
      C_NONE, OR_ADMIT_DENY_CIRCUIT },
    { "first attempt, gate time left but gate off: allowed", 1,
      BC_APIKEY, B_GATED, C_NONE, OR_ADMIT_ALLOW },
    { "HALF_OPEN (lapsed OPEN): take the probe under the lock", 1,
      BC_APIKEY, B_LAPSED, C_NONE, OR_ADMIT_PROBE },
    { "HALF_OPEN with a probe in flight: the live record decides", 1,
      BC_APIKEY, B_PROBING, C_NONE, OR_ADMIT_PROBE },
    { "breaker without settings is no record: allowed", 1, BC_NONE,
      B_OPEN, C_NONE, OR_ADMIT_ALLOW },
    { "fallback, connection cooled since planning: denied", 0, BC_APIKEY,
      B_NONE, C_COOLING, OR_ADMIT_DENY_COOLDOWN },
    { "fallback, connection terminal: denied as cooldown", 0, BC_APIKEY,
      B_NONE, C_TERMINAL, OR_ADMIT_DENY_COOLDOWN },
    { "fallback, connection cooldown over: allowed", 0, BC_APIKEY, B_NONE,
      C_EXPIRED, OR_ADMIT_ALLOW },
    { "fallback, healthy connection, breaker CLOSED: allowed", 0,
      BC_APIKEY, B_CLOSED, C_HEALTHY, OR_ADMIT_ALLOW },
    { "fallback, no connection record, breaker OPEN: denied", 0,
      BC_APIKEY, B_OPEN, C_NONE, OR_ADMIT_DENY_CIRCUIT },
    { "fallback: the connection is checked before the breaker", 0,
      BC_APIKEY, B_OPEN, C_COOLING, OR_ADMIT_DENY_COOLDOWN },
    { "fallback, HALF_OPEN: probe", 0, BC_APIKEY, B_LAPSED, C_HEALTHY,
      OR_ADMIT_PROBE }
};


static or_breaker_conf_t  bconfs[2];


static void setup(void);
static void view_of(or_plan_view_t *v, bconf_e bconf, breaker_e b,
    conn_e c, const lockout_e *lo, int enabled, lockout_e rej);
static void test_names(void);
static void test_lockout_index(void);
static void test_exclusion(void);
static void test_admit_reads(void);
static void test_admit(void);
static void test_probe_cycle(void);


int
main(void)
{
    setup();

    test_names();
    test_lockout_index();
    test_exclusion();
    test_admit_reads();
    test_admit();
    test_probe_cycle();

    return or_done();
}


static void
setup(void)
{
    or_breaker_conf_init(&bconfs[BC_APIKEY]);
    or_breaker_conf_fill(&bconfs[BC_APIKEY], OR_KIND_APIKEY);

    or_breaker_conf_init(&bconfs[BC_GATE]);
    bconfs[BC_GATE].gate_enabled = 1;
    or_breaker_conf_fill(&bconfs[BC_GATE], OR_KIND_APIKEY);
}


static void
view_of(or_plan_view_t *v, bconf_e bconf, breaker_e b, conn_e c,
    const lockout_e *lo, int enabled, lockout_e rej)
{
    int  i;

    or_plan_view_init(v);

    v->breaker_conf = (bconf == BC_NONE) ? NULL : &bconfs[bconf];
    v->breaker = (b == B_NONE) ? NULL : &breakers[b];
    v->conn = (c == C_NONE) ? NULL : &conns[c];

    for (i = 0; lo != NULL && i < OR_PLAN_LOCKOUTS; i++) {
        v->lockout[i] = (lo[i] == L_NONE) ? NULL : &lockouts[lo[i]];
    }

    v->lockout_enabled = enabled;
    v->rejected = (rej == L_NONE) ? NULL : &lockouts[rej];
}


static void
test_names(void)
{
    size_t  i;

    static const struct {
        or_exclusion_e   e;
        const char      *name;
    } names[] = {
        { OR_EXCL_NONE, "none" },
        { OR_EXCL_CIRCUIT_OPEN, "circuit_open" },
        { OR_EXCL_PROVIDER_COOLDOWN, "provider_cooldown" },
        { OR_EXCL_TERMINAL, "terminal" },
        { OR_EXCL_MODEL_LOCKOUT, "model_lockout" },
        { OR_EXCL_UNAVAILABLE, "unavailable" },
        { OR_EXCL_CONCURRENCY, "concurrency" },
        { OR_EXCL_COUNT, "unknown" },
        { (or_exclusion_e) -1, "unknown" }
    };

    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        or_is_str(or_exclusion_name(names[i].e), names[i].name,
                  "exclusion %d is named \"%s\"", (int) names[i].e,
                  names[i].name);
    }

    /* a denial at dispatch is named like the planning exclusion */

    or_is_int(or_admit_exclusion(OR_ADMIT_DENY_COOLDOWN),
              OR_EXCL_PROVIDER_COOLDOWN,
              "admission: cooled connection is provider_cooldown");
    or_is_int(or_admit_exclusion(OR_ADMIT_DENY_CIRCUIT),
              OR_EXCL_CIRCUIT_OPEN, "admission: breaker is circuit_open");
    or_is_int(or_admit_exclusion(OR_ADMIT_ALLOW), OR_EXCL_NONE,
              "admission: allowed excludes nothing");
    or_is_int(or_admit_exclusion(OR_ADMIT_PROBE), OR_EXCL_NONE,
              "admission: a probe excludes nothing (yet)");
}


static void
test_lockout_index(void)
{
    or_is_int(or_plan_lockout_index(OR_SCOPE_MODEL), 0,
              "lockout[0] is the exact model");
    or_is_int(or_plan_lockout_index(OR_SCOPE_BASE_MODEL), 1,
              "lockout[1] is the base model");
    or_is_int(or_plan_lockout_index(OR_SCOPE_QUOTA_FAMILY), 2,
              "lockout[2] is the quota family");
    or_is_int(or_plan_lockout_index(OR_SCOPE_CONNECTION), -1,
              "connection scope has no lockout slot");
    or_is_int(or_plan_lockout_index(OR_SCOPE_NONE), -1,
              "no scope has no lockout slot");
    or_is_int(or_plan_lockout_index(OR_SCOPE_PROVIDER), -1,
              "provider scope has no lockout slot");
}


static void
test_exclusion(void)
{
    size_t              i;
    or_msec_t           retry;
    or_exclusion_e      e;
    or_plan_view_t      v;
    const excl_case_t  *c;

    for (i = 0; i < sizeof(excl_cases) / sizeof(excl_cases[0]); i++) {
        c = &excl_cases[i];

        view_of(&v, c->bconf, c->breaker, c->conn, c->lockout, c->enabled,
                c->rejected);

        retry = 12345;
        e = or_plan_exclusion(&v, T0, &retry);

        or_is_str(or_exclusion_name(e), or_exclusion_name(c->excl),
                  "exclusion: %s", c->name);
        or_is_int(retry, c->retry, "retry: %s", c->name);

        or_is_int(or_plan_exclusion(&v, T0, NULL), c->excl,
                  "no retry pointer, same answer: %s", c->name);
    }

    /* the view never changes the records it points at */

    view_of(&v, BC_APIKEY, B_LAPSED, C_COOLING, excl_cases[0].lockout, 1,
            L_NONE);
    (void) or_plan_exclusion(&v, T0, &retry);
    or_is_int(breakers[B_LAPSED].state, OR_CB_OPEN,
              "exclusion normalizes a copy only (lapsed OPEN stays OPEN)");

    /* the retry counts down with now, and ends at the deadline */

    view_of(&v, BC_APIKEY, B_NONE, C_COOLING, NULL, 0, L_NONE);
    or_is_int(or_plan_exclusion(&v, T0 + 6 * SEC, &retry),
              OR_EXCL_PROVIDER_COOLDOWN, "cooldown 1 s before its end");
    or_is_int(retry, SEC, "cooldown retry 1 s before its end");
    or_is_int(or_plan_exclusion(&v, T0 + 7 * SEC, &retry), OR_EXCL_NONE,
              "cooldown at its end: eligible");
    or_is_int(retry, 0, "cooldown at its end: retry 0");

    view_of(&v, BC_APIKEY, B_OPEN, C_NONE, NULL, 0, L_NONE);
    or_is_int(or_plan_exclusion(&v, T0 + 29 * SEC, &retry),
              OR_EXCL_CIRCUIT_OPEN, "OPEN 1 s before its end");
    or_is_int(retry, SEC, "OPEN retry 1 s before its end");
    or_is_int(or_plan_exclusion(&v, T0 + 30 * SEC, &retry), OR_EXCL_NONE,
              "OPEN at its end: HALF_OPEN, eligible for the probe");
}


static void
test_admit_reads(void)
{
    size_t  i;

    static const struct {
        int          first;
        int          had_breaker;
        unsigned     reads;
        const char  *name;
    } cases[] = {
        { 1, 0, 0, "first attempt, no breaker at plan time: no read" },
        { 1, 1, OR_PLAN_READ_BREAKER,
          "first attempt, breaker at plan time: the breaker" },
        { 0, 0, OR_PLAN_READ_CONN | OR_PLAN_READ_BREAKER,
          "fallback: connection and breaker (it may have opened)" },
        { 0, 1, OR_PLAN_READ_CONN | OR_PLAN_READ_BREAKER,
          "fallback with a breaker: connection and breaker" }
    };

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        or_is_int(or_plan_admit_reads(cases[i].first, cases[i].had_breaker),
                  cases[i].reads, "admission reads: %s", cases[i].name);
    }
}


static void
test_admit(void)
{
    size_t               i;
    or_plan_view_t       v;
    const admit_case_t  *c;

    for (i = 0; i < sizeof(admit_cases) / sizeof(admit_cases[0]); i++) {
        c = &admit_cases[i];

        view_of(&v, c->bconf, c->breaker, c->conn, NULL, 0, L_NONE);

        or_is_int(or_plan_admit(&v, c->first, T0), c->admit,
                  "admission: %s", c->name);
    }
}


/*
 * Real breaker transitions through plan, dispatch and outcome: trip,
 * OPEN, lapse, one probe, a second request meanwhile, probe result.
 */

static void
test_probe_cycle(void)
{
    int                   i;
    or_msec_t             retry, t, ra;
    or_breaker_t          live, copy;
    or_plan_view_t        v;
    or_cb_admit_e         got;
    or_breaker_conf_t    *conf;
    or_breaker_result_t   res;

    conf = &bconfs[BC_APIKEY];
    memset(&live, 0, sizeof(live));

    for (i = 0; i < conf->open_threshold; i++) {
        or_breaker_failure(conf, &live, OR_REASON_SERVER_ERROR, T0, T0,
                           &res);
    }

    or_is_int(live.state, OR_CB_OPEN, "cycle: 12 failures open the breaker");

    or_plan_view_init(&v);
    v.breaker_conf = conf;
    copy = live;
    v.breaker = &copy;

    or_is_int(or_plan_exclusion(&v, T0 + SEC, &retry), OR_EXCL_CIRCUIT_OPEN,
              "cycle: OPEN excludes at plan time");
    or_is_int(retry, conf->reset_ms - SEC, "cycle: retry is the hold left");
    or_is_int(or_plan_admit(&v, 0, T0 + SEC), OR_ADMIT_DENY_CIRCUIT,
              "cycle: OPEN denies a fallback at dispatch");

    t = T0 + conf->reset_ms;

    or_is_int(or_plan_exclusion(&v, t, &retry), OR_EXCL_NONE,
              "cycle: lapsed OPEN is eligible at plan time");
    or_is_int(or_plan_admit(&v, 1, t), OR_ADMIT_PROBE,
              "cycle: dispatch must take the probe");

    /* the glue: or_breaker_admit() on the live record, zone locked */
    got = or_breaker_admit(conf, &live, t, &ra);
    or_is_int(got, OR_CB_PROBE, "cycle: the first request is the probe");
    or_is_int(live.state, OR_CB_HALF_OPEN, "cycle: the record is HALF_OPEN");

    /* a second request planned a moment earlier: its copy said PROBE */
    got = or_breaker_admit(conf, &live, t + 1, &ra);
    or_is_int(got, OR_CB_DENY, "cycle: a second request gets no probe");
    or_is_int(ra, conf->probe_timeout_ms - 1,
              "cycle: the denied one may retry when the probe times out");

    /* a third request plans now: excluded while the probe runs */
    copy = live;
    or_is_int(or_plan_exclusion(&v, t + 2, &retry), OR_EXCL_CIRCUIT_OPEN,
              "cycle: probe in flight excludes at plan time");
    or_is_int(retry, conf->probe_timeout_ms - 2,
              "cycle: retry is the probe's time left");
    or_is_int(or_plan_admit(&v, 1, t + 2), OR_ADMIT_PROBE,
              "cycle: probe in flight: dispatch asks the live record");

    /* the probe fails: OPEN again, twice as long */
    copy = live;
    or_breaker_failure(conf, &copy, OR_REASON_SERVER_ERROR, t, t + 3 * SEC,
                       &res);
    or_is_int(copy.state, OR_CB_OPEN, "cycle: a failed probe re-opens");
    or_is_int(or_plan_exclusion(&v, t + 3 * SEC, &retry),
              OR_EXCL_CIRCUIT_OPEN, "cycle: re-opened excludes");
    or_is_int(retry, 2 * conf->reset_ms,
              "cycle: the second hold is twice the reset timeout");

    /* the probe succeeds instead: CLOSED, allowed, nothing to exclude */
    copy = live;
    or_breaker_success(conf, &copy, t, t + 3 * SEC, &res);
    or_is_int(copy.state, OR_CB_CLOSED, "cycle: a successful probe closes");
    or_is_int(or_plan_exclusion(&v, t + 3 * SEC, &retry), OR_EXCL_NONE,
              "cycle: closed breaker excludes nothing");
    or_is_int(or_plan_admit(&v, 0, t + 3 * SEC), OR_ADMIT_ALLOW,
              "cycle: closed breaker admits a fallback");
}
