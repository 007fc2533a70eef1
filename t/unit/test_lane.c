/*
 * Copyright (C) ngx_omniroute authors
 *
 * The Claude usage-limit wall (or_lane): the headers, entering the lane,
 * its waits and their bounds, its end states (R-LANE-1..6), the
 * session-limit reset's parsers and memo (R-LANE-7), validation and
 * merge of the record (R-LANE-8).
 */


#include <string.h>

#include "or_test.h"
#include "or_lane.h"


#define SEC   1000LL
#define MIN   (60 * SEC)
#define HOUR  (60 * MIN)
#define DAY   (24 * HOUR)
#define T0    1700000000000LL          /* 2023-11-14, epoch ms */
#define NONE  OR_MSEC_NONE


/* "name: value\n..." into headers */

static size_t
headers_of(const char *s, or_header_t *h, size_t max)
{
    size_t       n;
    const char  *p, *eol, *colon;

    n = 0;
    p = s;

    while (*p && n < max) {
        eol = strchr(p, '\n');
        if (eol == NULL) {
            eol = p + strlen(p);
        }

        colon = memchr(p, ':', eol - p);

        if (colon) {
            h[n].name = p;
            h[n].name_len = colon - p;
            h[n].value = colon + 1;
            h[n].value_len = eol - colon - 1;
            n++;
        }

        p = *eol ? eol + 1 : eol;
    }

    return n;
}


#define WALL  "anthropic-ratelimit-unified-status: rejected\n"               \
              "anthropic-ratelimit-unified-slow-offer: treatment\n"          \
              "anthropic-ratelimit-unified-reset: 1700007200\n"


static void
test_parse(void)
{
    size_t             n;
    or_header_t        h[16];
    or_lane_headers_t  lh;

    n = headers_of(WALL "Anthropic-RateLimit-Unified-Slow-Status: SLOT_BUSY\n"
                   "anthropic-ratelimit-unified-slow-retry-after: 30\n"
                   "anthropic-ratelimit-unified-slow-max-wait: 600\n"
                   "anthropic-ratelimit-unified-overage-in-use: false\n"
                   "anthropic-ratelimit-unified-slow-budget-reset: "
                   "2023-11-20T00:00:00Z\n", h, 16);
    or_lane_parse(h, n, T0, &lh);

    or_ok(lh.rejected && lh.offer && !lh.overage,
          "parse: rejected, offer, no overage");
    or_is_int(lh.slow, OR_LANE_SLOW_SLOT_BUSY,
              "parse: slow-status, case-insensitive");
    or_is_int(lh.reset, 1700007200LL * 1000, "parse: reset epoch seconds");
    or_is_int(lh.retry_after, 30 * SEC, "parse: slow-retry-after seconds");
    or_is_int(lh.max_wait, 600 * SEC, "parse: slow-max-wait seconds");
    or_is_int(lh.budget_reset, 1700438400LL * 1000,
              "parse: budget reset RFC 3339");

    n = headers_of("anthropic-ratelimit-unified-status: allowed\n"
                   "anthropic-ratelimit-unified-slow-offer: control\n"
                   "anthropic-ratelimit-unified-slow-retry-after: soon\n"
                   "anthropic-ratelimit-unified-slow-status: weird\n"
                   "anthropic-ratelimit-unified-overage-in-use:  true \n",
                   h, 16);
    or_lane_parse(h, n, T0, &lh);

    or_ok(!lh.rejected && !lh.offer && lh.overage,
          "parse: allowed, no offer, overage in use");
    or_is_int(lh.slow, OR_LANE_SLOW_OTHER, "parse: unknown slow-status");
    or_is_int(lh.retry_after, NONE, "parse: bad retry-after: none");
    or_is_int(lh.reset, NONE, "parse: no reset");

    or_lane_parse(NULL, 0, T0, &lh);
    or_ok(!lh.rejected && lh.slow == OR_LANE_SLOW_ABSENT,
          "parse: no headers");
}


static void
test_decide(void)
{
    size_t             i, n;
    or_lane_t          lane, *l;
    or_header_t        h[16];
    or_lane_req_t      req;
    or_lane_headers_t  lh;
    or_lane_verdict_t  v;

    static const struct {
        const char        *name;
        int                state;       /* 0 none, 1 active, 2 cool-off,
                                           3 budget blocked */
        int                slow_sent;
        int                status;
        const char        *headers;
        or_lane_action_e   action;
        or_lane_end_e      end;
    } cases[] = {
        { "R-LANE-1 a wall 429 with the offer enters", 0, 0, 429, WALL,
          OR_LANE_ENTER, OR_LANE_END_NONE },
        { "R-LANE-1 a burst 429 without unified headers passes", 0, 0, 429,
          "retry-after: 3\n", OR_LANE_PASS, OR_LANE_END_NONE },
        { "R-LANE-1 a wall without the offer passes", 0, 0, 429,
          "anthropic-ratelimit-unified-status: rejected\n",
          OR_LANE_PASS, OR_LANE_END_NONE },
        { "R-LANE-1 not a 429: passes", 0, 0, 503, WALL,
          OR_LANE_PASS, OR_LANE_END_NONE },
        { "R-LANE-1 paid overage in use: passes", 0, 0, 429,
          WALL "anthropic-ratelimit-unified-overage-in-use: true\n",
          OR_LANE_PASS, OR_LANE_END_NONE },
        { "R-LANE-6 the cool-off blocks a new entry", 2, 0, 429, WALL,
          OR_LANE_PASS, OR_LANE_END_NONE },
        { "R-LANE-6 budget_exhausted blocks a new entry", 3, 0, 429, WALL,
          OR_LANE_PASS, OR_LANE_END_NONE },
        { "R-LANE-5 a wall saying weekly_limit ends", 0, 0, 429,
          WALL "anthropic-ratelimit-unified-slow-status: weekly_limit\n",
          OR_LANE_END, OR_LANE_END_WEEKLY_LIMIT },
        { "R-LANE-2 active, a wall without the header: in again", 1, 0, 429,
          WALL, OR_LANE_ENTER, OR_LANE_END_NONE },
        { "R-LANE-4 slot_busy waits", 1, 1, 429,
          WALL "anthropic-ratelimit-unified-slow-status: slot_busy\n",
          OR_LANE_WAIT, OR_LANE_END_NONE },
        { "R-LANE-4 a 529 in the lane waits", 1, 1, 529, "",
          OR_LANE_WAIT, OR_LANE_END_NONE },
        { "R-LANE-4 a 500 in the lane passes", 1, 1, 500, "",
          OR_LANE_PASS, OR_LANE_END_NONE },
        { "R-LANE-5 weekly_limit ends the lane", 1, 1, 429,
          "anthropic-ratelimit-unified-slow-status: weekly_limit\n",
          OR_LANE_END, OR_LANE_END_WEEKLY_LIMIT },
        { "R-LANE-5 budget_exhausted ends the lane", 1, 1, 429,
          "anthropic-ratelimit-unified-slow-status: budget_exhausted\n",
          OR_LANE_END, OR_LANE_END_BUDGET_EXHAUSTED },
        { "R-LANE-5 off ends the lane", 1, 1, 429,
          "anthropic-ratelimit-unified-slow-status: off\n",
          OR_LANE_END, OR_LANE_END_OFF },
        { "R-LANE-5 ineligible ends the lane", 1, 1, 429,
          "anthropic-ratelimit-unified-slow-status: ineligible\n",
          OR_LANE_END, OR_LANE_END_INELIGIBLE },
        { "R-LANE-5 overage in use ends it as extra_usage, any status",
          1, 1, 503,
          "anthropic-ratelimit-unified-slow-status: ineligible\n"
          "anthropic-ratelimit-unified-overage-in-use: true\n",
          OR_LANE_END, OR_LANE_END_EXTRA_USAGE },
    };

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        memset(&lane, 0, sizeof(lane));
        l = &lane;

        switch (cases[i].state) {
        case 0:
            l = NULL;
            break;
        case 1:
            lane.phase = OR_LANE_PHASE_ACTIVE;
            lane.entered_at = T0 - MIN;
            lane.until = T0 + HOUR;
            break;
        case 2:
            lane.phase = OR_LANE_PHASE_ENDED;
            lane.end = OR_LANE_END_MAX_WAIT;
            lane.block_until = T0 + 5 * MIN;
            break;
        default:
            lane.phase = OR_LANE_PHASE_ENDED;
            lane.end = OR_LANE_END_BUDGET_EXHAUSTED;
            lane.block_until = T0 + 3 * DAY;
            break;
        }

        n = headers_of(cases[i].headers, h, 16);
        or_lane_parse(h, n, T0, &lh);

        req.slow_sent = cases[i].slow_sent;
        req.wait_start = NONE;
        req.budget_left = NONE;
        req.rnd = 30;

        or_lane_decide(l, cases[i].status, &lh, &req, T0, &v);

        or_is_int(v.action, cases[i].action, "%s", cases[i].name);
        or_is_int(v.end, cases[i].end, "%s: end state", cases[i].name);
    }

    /* the lane's end: the announced reset plus the grace */

    n = headers_of(WALL, h, 16);
    or_lane_parse(h, n, T0, &lh);
    req.slow_sent = 0;
    or_lane_decide(NULL, 429, &lh, &req, T0, &v);
    or_is_int(v.until, 1700007200LL * 1000 + OR_LANE_GRACE_MS,
              "R-LANE-2 the lane lasts until the reset + 60 s");

    n = headers_of("anthropic-ratelimit-unified-status: rejected\n"
                   "anthropic-ratelimit-unified-slow-offer: treatment\n"
                   "anthropic-ratelimit-unified-reset: 1999999999\n", h, 16);
    or_lane_parse(h, n, T0, &lh);
    or_lane_decide(NULL, 429, &lh, &req, T0, &v);
    or_is_int(v.until, T0 + OR_LANE_SPAN_MAX_MS,
              "R-LANE-2 an announced reset years away: at most 8 days");

    n = headers_of("anthropic-ratelimit-unified-status: rejected\n"
                   "anthropic-ratelimit-unified-slow-offer: treatment\n", h,
                   16);
    or_lane_parse(h, n, T0, &lh);
    or_lane_decide(NULL, 429, &lh, &req, T0, &v);
    or_is_int(v.until, T0 + OR_LANE_WINDOW_MS + OR_LANE_GRACE_MS,
              "R-LANE-2 no reset announced: the 5-hour window");

    n = headers_of("anthropic-ratelimit-unified-status: rejected\n"
                   "anthropic-ratelimit-unified-slow-offer: treatment\n"
                   "anthropic-ratelimit-unified-reset: 1699999950\n", h,
                   16);
    or_lane_parse(h, n, T0, &lh);
    or_lane_decide(NULL, 429, &lh, &req, T0, &v);
    or_is_int(v.until, T0 + 10 * SEC,
              "R-LANE-2 a reset 50 s ago: the rest of the grace");

    n = headers_of("anthropic-ratelimit-unified-status: rejected\n"
                   "anthropic-ratelimit-unified-slow-offer: treatment\n"
                   "anthropic-ratelimit-unified-reset: 1699999900\n", h,
                   16);
    or_lane_parse(h, n, T0, &lh);
    or_lane_decide(NULL, 429, &lh, &req, T0, &v);
    or_is_int(v.action, OR_LANE_PASS,
              "R-LANE-2 a window over with its grace: the normal path");

    /* budget_exhausted: remembered until its reset, at most 8 days */

    memset(&lane, 0, sizeof(lane));
    lane.phase = OR_LANE_PHASE_ACTIVE;
    lane.entered_at = T0 - MIN;
    lane.until = T0 + HOUR;
    req.slow_sent = 1;

    n = headers_of("anthropic-ratelimit-unified-slow-status: budget_exhausted\n"
                   "anthropic-ratelimit-unified-slow-budget-reset: "
                   "1700086400\n", h, 16);
    or_lane_parse(h, n, T0, &lh);
    or_lane_decide(&lane, 429, &lh, &req, T0, &v);
    or_is_int(v.block_until, 1700086400LL * 1000,
              "R-LANE-5 budget_exhausted blocks until its reset");

    n = headers_of("anthropic-ratelimit-unified-slow-status: budget_exhausted\n",
                   h, 16);
    or_lane_parse(h, n, T0, &lh);
    or_lane_decide(&lane, 429, &lh, &req, T0, &v);
    or_is_int(v.block_until, T0 + 8 * DAY,
              "R-LANE-5 budget_exhausted without a reset: 8 days");

    n = headers_of("anthropic-ratelimit-unified-slow-status: off\n", h, 16);
    or_lane_parse(h, n, T0, &lh);
    or_lane_decide(&lane, 429, &lh, &req, T0, &v);
    or_is_int(v.block_until, 0, "R-LANE-5 off: nothing remembered");

    /* the lane is over after its end */

    or_ok(or_lane_active(&lane, T0 + HOUR - 1)
          && !or_lane_active(&lane, T0 + HOUR),
          "R-LANE-2 the header is due until the lane's end only");
}


static void
test_wait(void)
{
    size_t             i, n;
    char               buf[512];
    or_lane_t          lane;
    or_header_t        h[16];
    or_lane_req_t      req;
    or_lane_headers_t  lh;
    or_lane_verdict_t  v;

    static const struct {
        const char        *name;
        const char        *retry;       /* header values, NULL: absent */
        const char        *max_wait;
        or_msec_t          waited;      /* since the first slot_busy */
        or_msec_t          budget;      /* NONE: none */
        uint32_t           rnd;         /* jitter: 30 is none */
        or_lane_action_e   action;
        or_msec_t          wait_ms;
    } cases[] = {
        { "R-LANE-4 default retry 20 s", NULL, NULL, 0, NONE, 30,
          OR_LANE_WAIT, 20 * SEC },
        { "R-LANE-4 retry clamped up to 5 s", "1", NULL, 0, NONE, 30,
          OR_LANE_WAIT, 5 * SEC },
        { "R-LANE-4 retry clamped down to 600 s", "9000", "21600", 0, NONE,
          30, OR_LANE_WAIT, 600 * SEC },
        { "R-LANE-4 jitter -30 %", "100", NULL, 0, NONE, 0,
          OR_LANE_WAIT, 70 * SEC },
        { "R-LANE-4 jitter +30 %", "100", NULL, 0, NONE, 60,
          OR_LANE_WAIT, 130 * SEC },
        { "R-LANE-4 the wait is cut at the max-wait deadline", "30", "60",
          50 * SEC, NONE, 30, OR_LANE_WAIT, 10 * SEC },
        { "R-LANE-4 past the max-wait deadline: ends", "30", "60", 60 * SEC,
          NONE, 30, OR_LANE_END, 0 },
        { "R-LANE-4 max-wait clamped up to 1 min", "30", "5", 59 * SEC,
          NONE, 30, OR_LANE_WAIT, 1 * SEC },
        { "R-LANE-4 default max-wait 20 min", "30", NULL, 20 * MIN - SEC,
          NONE, 30, OR_LANE_WAIT, 1 * SEC },
        { "R-LANE-4 max-wait clamped down to 6 h", "30", "99999",
          6 * HOUR, NONE, 30, OR_LANE_END, 0 },
        { "R-LANE-4 the request budget less 5 s bounds the wait", "30",
          NULL, 0, 17 * SEC, 30, OR_LANE_WAIT, 12 * SEC },
        { "R-LANE-4 budget under 5 s: ends", "30", NULL, 0, 4 * SEC, 30,
          OR_LANE_END, 0 },
    };

    memset(&lane, 0, sizeof(lane));
    lane.phase = OR_LANE_PHASE_ACTIVE;
    lane.entered_at = T0 - 10 * HOUR;
    lane.until = T0 + HOUR;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        strcpy(buf, "anthropic-ratelimit-unified-slow-status: slot_busy\n");

        if (cases[i].retry) {
            strcat(buf, "anthropic-ratelimit-unified-slow-retry-after: ");
            strcat(buf, cases[i].retry);
            strcat(buf, "\n");
        }

        if (cases[i].max_wait) {
            strcat(buf, "anthropic-ratelimit-unified-slow-max-wait: ");
            strcat(buf, cases[i].max_wait);
            strcat(buf, "\n");
        }

        n = headers_of(buf, h, 16);
        or_lane_parse(h, n, T0, &lh);

        req.slow_sent = 1;
        req.wait_start = cases[i].waited ? T0 - cases[i].waited : NONE;
        req.budget_left = cases[i].budget;
        req.rnd = cases[i].rnd;

        or_lane_decide(&lane, 429, &lh, &req, T0, &v);

        or_is_int(v.action, cases[i].action, "%s", cases[i].name);

        if (cases[i].action == OR_LANE_WAIT) {
            or_is_int(v.wait_ms, cases[i].wait_ms, "%s: ms", cases[i].name);

        } else {
            or_ok(v.end == OR_LANE_END_MAX_WAIT
                  && v.block_until == T0 + OR_LANE_COOL_OFF_MS,
                  "%s: max_wait, 10-minute cool-off", cases[i].name);
        }
    }
}


static void
test_apply(void)
{
    or_lane_t          l;
    or_lane_verdict_t  v;

    memset(&l, 0, sizeof(l));
    memset(&v, 0, sizeof(v));

    v.action = OR_LANE_ENTER;
    v.until = T0 + HOUR;
    or_is_int(or_lane_apply(&l, &v, T0), 1, "apply: enter changes");
    or_ok(l.phase == OR_LANE_PHASE_ACTIVE && l.entries == 1
          && l.entered_at == T0 && l.until == T0 + HOUR,
          "apply: active, one entry");
    or_is_int(or_lane_apply(&l, &v, T0 + 1), 0,
              "apply: entering again changes nothing");
    or_ok(or_lane_valid(&l, sizeof(l), T0) == NULL, "apply: valid (active)");

    v.action = OR_LANE_WAIT;
    (void) or_lane_apply(&l, &v, T0 + 2);
    or_is_int(l.waits, 1, "apply: a wait is counted");

    v.action = OR_LANE_END;
    v.end = OR_LANE_END_MAX_WAIT;
    v.block_until = T0 + OR_LANE_COOL_OFF_MS;
    or_is_int(or_lane_apply(&l, &v, T0 + 3), 1, "apply: end changes");
    or_ok(l.phase == OR_LANE_PHASE_ENDED && l.until == 0
          && l.block_until == T0 + OR_LANE_COOL_OFF_MS,
          "apply: ended, blocked");
    or_ok(or_lane_blocked(&l, T0 + 3) && !or_lane_active(&l, T0 + 3),
          "apply: blocked, no header");
    or_ok(!or_lane_blocked(&l, T0 + OR_LANE_COOL_OFF_MS),
          "apply: the cool-off ends");
    or_ok(or_lane_valid(&l, sizeof(l), T0) == NULL, "apply: valid (ended)");
    or_ok(or_lane_expires(&l, T0) > l.block_until,
          "apply: kept past its block");

    v.action = OR_LANE_ENTER;
    v.until = T0 + 2 * HOUR;
    (void) or_lane_apply(&l, &v, T0 + 20 * MIN);
    or_ok(l.phase == OR_LANE_PHASE_ACTIVE && l.entries == 2
          && l.end == OR_LANE_END_NONE && l.block_until == 0,
          "apply: entered again after the cool-off");
    or_ok(or_lane_valid(&l, sizeof(l), T0 + 20 * MIN) == NULL,
          "apply: valid (again)");
}


static void
test_reset(void)
{
    or_msec_t          next;
    or_lane_t          l;

    static const char  usage[] =
        "{\"five_hour\":{\"utilization\":100},"
        "\"juniper_tide\":{\"arm\":\"reset\",\"available\":true,"
        "\"next_available_at\":null,\"note\":\"a } in a string\"}}";
    static const char  used[] =
        "{\"juniper_tide\": {\"arm\": \"reset\", \"available\": false, "
        "\"next_available_at\": \"2023-11-20T00:00:00Z\"}}";
    static const char  control[] =
        "{\"juniper_tide\":{\"arm\":\"control\",\"available\":true}}";
    static const char  elsewhere[] =
        "{\"x\":\"juniper_tide\",\"arm\":\"reset\",\"available\":true}";

    or_is_int(or_lane_usage_parse(usage, sizeof(usage) - 1, T0, &next), 1,
              "R-LANE-7 usage: the reset is offered");
    or_is_int(next, NONE, "R-LANE-7 usage: next_available_at null");
    or_is_int(or_lane_usage_parse(used, sizeof(used) - 1, T0, &next), 0,
              "R-LANE-7 usage: not available");
    or_is_int(next, 1700438400LL * 1000,
              "R-LANE-7 usage: next_available_at read");
    or_is_int(or_lane_usage_parse(control, sizeof(control) - 1, T0, &next),
              0, "R-LANE-7 usage: another arm");
    or_is_int(or_lane_usage_parse(elsewhere, sizeof(elsewhere) - 1, T0,
                                  &next),
              0, "R-LANE-7 usage: the block only");
    or_is_int(or_lane_usage_parse("{\"juniper_tide\":{\"arm\":\"res", 28,
                                  T0, &next),
              0, "R-LANE-7 usage: truncated");

    or_is_int(or_lane_claim_parse("{\"result\":\"reset\"}", 18, T0, &next),
              OR_RESET_RESET, "R-LANE-7 claim: reset");
    or_is_int(or_lane_claim_parse("{\"result\": \"not_limited\"}", 25, T0,
                                  &next),
              OR_RESET_NOT_LIMITED, "R-LANE-7 claim: not_limited");
    or_is_int(or_lane_claim_parse("{\"result\":\"already_used\","
                                  "\"next_available_at\":1700100000}", 57,
                                  T0, &next),
              OR_RESET_ALREADY_USED, "R-LANE-7 claim: already_used");
    or_is_int(next, 1700100000LL * 1000, "R-LANE-7 claim: its next time");
    or_is_int(or_lane_claim_parse("{\"error\":1}", 11, T0, &next),
              OR_RESET_FAILED, "R-LANE-7 claim: no result: failed");

    memset(&l, 0, sizeof(l));
    or_ok(or_lane_reset_due(NULL, T0) && or_lane_reset_due(&l, T0),
          "R-LANE-7 a first probe is due");

    (void) or_lane_reset_record(&l, OR_RESET_FAILED, NONE, T0);
    or_is_int(l.reset_next_at, T0 + 15 * MIN,
              "R-LANE-7 a failure backs off 15 min");
    or_ok(!or_lane_reset_due(&l, T0 + 15 * MIN - 1)
          && or_lane_reset_due(&l, T0 + 15 * MIN),
          "R-LANE-7 due again after the backoff");

    (void) or_lane_reset_record(&l, OR_RESET_RESET, NONE, T0);
    or_ok(l.reset_at == T0 && l.reset_next_at == T0 + 7 * DAY,
          "R-LANE-7 a reset is memoised a week");

    (void) or_lane_reset_record(&l, OR_RESET_NOT_OFFERED, T0 + 2 * DAY, T0);
    or_is_int(l.reset_next_at, T0 + 2 * DAY,
              "R-LANE-7 not_offered: until next_available_at");

    (void) or_lane_reset_record(&l, OR_RESET_ALREADY_USED, T0 + 90 * DAY,
                                T0);
    or_is_int(l.reset_next_at, T0 + 8 * DAY,
              "R-LANE-7 next_available_at at most 8 days away");
    or_ok(or_lane_valid(&l, sizeof(l), T0) == NULL, "R-LANE-7 memo valid");
}


static void
test_valid_merge(void)
{
    or_lane_t  a, b, ab, ba;

    memset(&a, 0, sizeof(a));
    or_ok(or_lane_valid(&a, sizeof(a), T0) == NULL,
          "R-LANE-8 an empty record is valid");
    or_is_str(or_lane_valid(&a, sizeof(a) - 1, T0), "size",
              "R-LANE-8 size");

    a.phase = 7;
    or_is_str(or_lane_valid(&a, sizeof(a), T0), "phase", "R-LANE-8 phase");

    memset(&a, 0, sizeof(a));
    a.phase = OR_LANE_PHASE_ENDED;
    or_is_str(or_lane_valid(&a, sizeof(a), T0), "end",
              "R-LANE-8 ended without an end state");

    memset(&a, 0, sizeof(a));
    a.reserved[2] = 1;
    or_is_str(or_lane_valid(&a, sizeof(a), T0), "reserved",
              "R-LANE-8 reserved");

    memset(&a, 0, sizeof(a));
    a.changed_at = T0 + 2 * DAY;
    or_is_str(or_lane_valid(&a, sizeof(a), T0), "changed_at",
              "R-LANE-8 a change from the future");

    memset(&a, 0, sizeof(a));
    a.changed_at = T0;
    a.entered_at = T0;
    a.phase = OR_LANE_PHASE_ACTIVE;
    a.until = T0 + 9 * DAY;
    or_is_str(or_lane_valid(&a, sizeof(a), T0), "until",
              "R-LANE-8 a lane ending more than 8 days after its change");

    a.until = T0 + HOUR;
    a.block_until = T0 + HOUR;
    or_is_str(or_lane_valid(&a, sizeof(a), T0), "block_until",
              "R-LANE-8 an active lane is not blocked");

    a.block_until = 0;
    a.reset_next_at = T0 + 30 * DAY;
    or_is_str(or_lane_valid(&a, sizeof(a), T0), "reset_next_at",
              "R-LANE-8 a memo longer than 8 days");

    a.reset_next_at = 0;
    or_ok(or_lane_valid(&a, sizeof(a), T0) == NULL, "R-LANE-8 valid");

    b = a;
    b.changed_at = T0 + 5;
    b.phase = OR_LANE_PHASE_ENDED;
    b.end = OR_LANE_END_OFF;
    b.until = 0;
    b.ended_at = T0 + 5;

    ab = a;
    or_is_int(or_lane_merge(&ab, &b), 1, "R-LANE-8 the later change wins");
    ba = b;
    or_is_int(or_lane_merge(&ba, &a), 0, "R-LANE-8 an older one does not");
    or_ok(memcmp(&ab, &ba, sizeof(ab)) == 0, "R-LANE-8 commutative");
    or_is_int(or_lane_merge(&ab, &ab), 0, "R-LANE-8 idempotent");

    b.changed_at = a.changed_at;
    b.ended_at = a.changed_at;
    ab = a;
    (void) or_lane_merge(&ab, &b);
    ba = b;
    (void) or_lane_merge(&ba, &a);
    or_ok(memcmp(&ab, &ba, sizeof(ab)) == 0,
          "R-LANE-8 a tie is broken the same way on both sides");
}


int
main(void)
{
    test_parse();
    test_decide();
    test_wait();
    test_apply();
    test_reset();
    test_valid_merge();

    return or_done();
}
