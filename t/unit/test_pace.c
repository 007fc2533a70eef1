/*
 * Copyright (C) ngx_omniroute authors
 *
 * Pacing vs locking of body-stated retries (R-PACE-1..5) and the
 * tool-limit record (R-TOOL-2..4): or_pace.
 */


#include <string.h>

#include "or_test.h"
#include "or_pace.h"


#define SEC   1000LL
#define T0    1000000000000LL

#define RI    "{\"error\":{\"code\":429,\"status\":\"RESOURCE_EXHAUSTED\"," \
              "\"details\":[{\"@type\":\"type.googleapis.com/google.rpc." \
              "RetryInfo\",\"retryDelay\":\""


static void
test_retry_after(void)
{
    size_t          i;
    or_pace_hint_t  h;

    static const struct {
        const char  *body;
        or_msec_t    ms;
        int          typed;
        const char  *name;
    } cases[] = {
        { RI "20s\"}]}}", 20 * SEC, 1, "typed RetryInfo 20s" },
        { RI "86399s\"}]}}", 86399 * SEC, 1, "typed RetryInfo 86399s" },
        { RI "1.5s\"}]}}", 1500, 1, "typed fraction" },
        { "{\"error\":{\"retryDelay\":\"30s\"}}", 30 * SEC, 0,
          "an untyped retryDelay is prose" },
        { "{\"error\":{\"message\":\"Please try again in 2s.\"}}", 2 * SEC, 0,
          "prose text" },
        { RI "3s\"}],\"message\":\"try again in 9s\"}}", 9 * SEC, 0,
          "the longer prose wins over a shorter typed wait" },
        { RI "90s\"}],\"message\":\"try again in 9s\"}}", 90 * SEC, 1,
          "a longer typed wait stays typed" },
        { "{\"error\":{\"message\":\"rate limited\"}}", OR_MSEC_NONE, 0,
          "no wait stated" },
        { "", OR_MSEC_NONE, 0, "empty body" },
    };

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        or_pace_hint(cases[i].body, strlen(cases[i].body), T0, &h);
        or_is_int(h.ms, cases[i].ms, "hint: %s: ms", cases[i].name);
        or_is_int(h.typed, cases[i].typed, "hint: %s: typed",
                  cases[i].name);
    }

    or_pace_hint(NULL, 0, T0, &h);
    or_is_int(h.ms, OR_MSEC_NONE, "hint: NULL body");
}


static void
test_enabled(void)
{
    size_t  i;

    static const struct {
        int          sw;
        or_kind_e    kind;
        int          autoen;
        int          on;
        const char  *name;
    } cases[] = {
        { -1, OR_KIND_APIKEY, 0, 0, "unset, safety net off" },
        { -1, OR_KIND_APIKEY, 1, 1, "unset apikey, safety net on" },
        { -1, OR_KIND_OAUTH, 1, 0, "unset oauth: the net is for API keys" },
        { -1, OR_KIND_LOCAL, 1, 0, "unset local" },
        { 1, OR_KIND_OAUTH, 0, 1, "pacing=on, any kind" },
        { 0, OR_KIND_APIKEY, 1, 0, "pacing=off opts out of the net" },
    };

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        or_is_int(or_pace_enabled(cases[i].sw, cases[i].kind,
                                  cases[i].autoen),
                  cases[i].on, "enabled: %s", cases[i].name);
    }
}


static void
test_decide(void)
{
    size_t          i;
    or_msec_t       ms;
    or_pace_hint_t  h;

    static const struct {
        int           enabled;
        int           status;
        or_reason_e   reason;
        or_msec_t     hint;
        int           typed;
        or_msec_t     budget;
        or_pace_e     want;
        or_msec_t     ms;
        const char   *name;
    } cases[] = {
        { 1, 429, OR_REASON_RATE_LIMIT_EXCEEDED, 2 * SEC, 0, 30 * SEC,
          OR_PACE_PAUSE, 2 * SEC, "R-PACE-2 a short prose wait paces" },
        { 1, 429, OR_REASON_QUOTA_EXHAUSTED, 20 * SEC, 1, 30 * SEC,
          OR_PACE_PAUSE, 20 * SEC, "R-PACE-2 a short typed wait paces" },
        { 1, 429, OR_REASON_RATE_LIMIT_EXCEEDED, 30 * SEC, 0, 30 * SEC,
          OR_PACE_PAUSE, 30 * SEC, "R-PACE-2 exactly the budget paces" },
        { 1, 429, OR_REASON_QUOTA_EXHAUSTED, 86399 * SEC, 1, 30 * SEC,
          OR_PACE_LOCK, 86399 * SEC, "R-PACE-3 86399s typed: lock" },
        { 1, 429, OR_REASON_QUOTA_EXHAUSTED, 3 * 86400 * SEC, 1, 30 * SEC,
          OR_PACE_LOCK, 86400 * SEC, "R-PACE-3 a lock lasts at most 24 h" },
        { 1, 429, OR_REASON_RATE_LIMIT_EXCEEDED, 120 * SEC, 0, 30 * SEC,
          OR_PACE_NONE, 0, "R-PACE-3 a long prose wait: the usual path" },
        { 0, 429, OR_REASON_RATE_LIMIT_EXCEEDED, 2 * SEC, 0, 30 * SEC,
          OR_PACE_NONE, 0, "pacing off" },
        { 1, 503, OR_REASON_SERVER_ERROR, 2 * SEC, 0, 30 * SEC,
          OR_PACE_NONE, 0, "not a 429" },
        { 1, 429, OR_REASON_AUTH_ERROR, 2 * SEC, 0, 30 * SEC,
          OR_PACE_NONE, 0, "a 429 of another reason" },
        { 1, 429, OR_REASON_CONCURRENCY_LIMITED, 1 * SEC, 0, 30 * SEC,
          OR_PACE_PAUSE, 1 * SEC, "a concurrency limit with a wait paces" },
        { 1, 429, OR_REASON_RATE_LIMIT_EXCEEDED, OR_MSEC_NONE, 0, 30 * SEC,
          OR_PACE_NONE, 0, "no body wait" },
        { 1, 429, OR_REASON_RATE_LIMIT_EXCEEDED, 0, 0, 30 * SEC,
          OR_PACE_NONE, 0, "a wait of 0" },
    };

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        h.ms = cases[i].hint;
        h.typed = cases[i].typed;

        or_is_int(or_pace_decide(cases[i].enabled, cases[i].status,
                                 cases[i].reason, &h, cases[i].budget, &ms),
                  cases[i].want, "decide: %s", cases[i].name);
        or_is_int(ms, cases[i].ms, "decide: %s: ms", cases[i].name);
    }
}


static void
test_admit(void)
{
    or_msec_t  ms;
    or_pace_t  p;

    memset(&p, 0, sizeof(or_pace_t));

    or_is_int(or_pace_admit(NULL, T0, 1000, &ms), OR_PACE_GO,
              "admit: no record");
    or_is_int(or_pace_admit(&p, T0, 1000, &ms), OR_PACE_GO,
              "admit: an empty record");

    or_ok(or_pace_pause(&p, T0, 5 * SEC), "pause: 5 s set");
    or_is_int(p.until, T0 + 5 * SEC, "pause: until");
    or_is_int(p.kind, OR_PACE_KIND_PAUSE, "pause: kind");

    or_is_int(or_pace_admit(&p, T0 + SEC, 30 * SEC, &ms), OR_PACE_WAIT,
              "R-PACE-4 the pause fits the queue time: wait");
    or_is_int(ms, 4 * SEC, "R-PACE-4 wait the 4 s left");
    or_is_int(or_pace_admit(&p, T0 + SEC, 4 * SEC, &ms), OR_PACE_WAIT,
              "R-PACE-4 exactly the queue time left: wait");
    or_is_int(or_pace_admit(&p, T0 + SEC, 3 * SEC, &ms), OR_PACE_TIMEOUT,
              "R-PACE-4 the pause outlasts the caller: at once");
    or_is_int(or_pace_admit(&p, T0 + 5 * SEC, 0, &ms), OR_PACE_GO,
              "admit: the pause is over");

    /* a pause only lengthens within its epoch */

    or_ok(!or_pace_pause(&p, T0 + SEC, 2 * SEC), "pause: a shorter one "
          "changes nothing");
    or_ok(or_pace_pause(&p, T0 + SEC, 9 * SEC), "pause: a longer one");
    or_is_int(p.until, T0 + 10 * SEC, "pause: lengthened");
    or_is_int(p.epoch, 1, "pause: same epoch");

    or_ok(or_pace_pause(&p, T0 + 20 * SEC, SEC), "pause: after the end");
    or_is_int(p.epoch, 2, "pause: a new epoch");
    or_is_int(p.since, T0 + 20 * SEC, "pause: since");
    or_is_int(p.until, T0 + 21 * SEC, "pause: until of the new epoch");

    or_ok(!or_pace_pause(&p, T0, 0), "pause: 0 ms is nothing");
    or_is_int(or_pace_left(&p, T0 + 20 * SEC), SEC, "left");
    or_is_int(or_pace_left(&p, T0 + 22 * SEC), 0, "left: none");
}


static void
test_tools(void)
{
    or_pace_t  p;

    memset(&p, 0, sizeof(or_pace_t));

    or_ok(!or_pace_tools_skip(&p, 200, T0), "tools: no record, no skip");
    or_ok(!or_pace_tools_fail(&p, 0, T0, 3600 * SEC),
          "tools: no tools, no record");

    or_ok(or_pace_tools_fail(&p, 200, T0, 3600 * SEC),
          "R-TOOL-2 200 tools failed");
    or_is_int(p.tools, 200, "tools: the count recorded");
    or_is_int(p.kind, OR_PACE_KIND_TOOLS, "tools: kind");

    or_ok(or_pace_tools_skip(&p, 200, T0 + SEC), "R-TOOL-4 200: skipped");
    or_ok(or_pace_tools_skip(&p, 300, T0 + SEC), "R-TOOL-4 300: skipped");
    or_ok(!or_pace_tools_skip(&p, 5, T0 + SEC), "R-TOOL-4 5: still used");
    or_ok(!or_pace_tools_skip(&p, 0, T0 + SEC),
          "R-TOOL-4 no tools: still used");

    or_ok(or_pace_tools_fail(&p, 150, T0 + SEC, 3600 * SEC),
          "tools: fewer failed");
    or_is_int(p.tools, 150, "tools: the fewest that failed");
    or_ok(!or_pace_tools_fail(&p, 180, T0 + SEC, 3600 * SEC),
          "tools: more failing changes nothing");
    or_ok(or_pace_tools_skip(&p, 160, T0 + 2 * SEC),
          "tools: 160 >= 150 skipped");

    or_ok(!or_pace_tools_skip(&p, 500, T0 + 3602 * SEC),
          "R-TOOL-2 the record expires");
    or_ok(or_pace_tools_fail(&p, 400, T0 + 3700 * SEC, 3600 * SEC),
          "tools: after the expiry");
    or_is_int(p.tools, 400, "tools: a new epoch starts afresh");

    or_ok(or_pace_tools_fail(&p, (size_t) 1 << 30, T0 + 3700 * SEC, SEC)
          || p.tools == 400, "tools: a huge count is bounded");
    or_ok(p.tools <= OR_PACE_TOOLS_MAX, "tools: at most the bound");

    memset(&p, 0, sizeof(or_pace_t));
    or_pace_pause(&p, T0, 10 * SEC);
    or_ok(!or_pace_tools_skip(&p, 1000, T0), "a pause is no tool limit");
}


static void
test_merge_valid(void)
{
    size_t     i, j, k;
    or_pace_t  rec[4], a, b, c, ab, ba, ab_c, a_bc;

    memset(rec, 0, sizeof(rec));

    or_pace_pause(&rec[0], T0, 5 * SEC);
    rec[1] = rec[0];
    or_pace_pause(&rec[1], T0 + SEC, 9 * SEC);
    or_pace_tools_fail(&rec[2], 200, T0, 3600 * SEC);
    rec[3] = rec[2];
    or_pace_tools_fail(&rec[3], 120, T0 + SEC, 3600 * SEC);

    for (i = 0; i < 4; i++) {
        or_ok(or_pace_valid(&rec[i], sizeof(or_pace_t), T0 + 2 * SEC)
              == NULL, "valid: record %zu", i);

        a = rec[i];
        or_ok(!or_pace_merge(&a, &rec[i]), "merge: idempotent %zu", i);
    }

    for (i = 0; i < 4; i++) {
        for (j = 0; j < 4; j++) {
            ab = rec[i];
            or_pace_merge(&ab, &rec[j]);
            ba = rec[j];
            or_pace_merge(&ba, &rec[i]);

            if (!or_pace_equal(&ab, &ba)) {
                or_ok(0, "merge: commutative %zu %zu", i, j);
            }

            for (k = 0; k < 4; k++) {
                ab_c = ab;
                or_pace_merge(&ab_c, &rec[k]);
                b = rec[j];
                or_pace_merge(&b, &rec[k]);
                a_bc = rec[i];
                or_pace_merge(&a_bc, &b);

                if (!or_pace_equal(&ab_c, &a_bc)) {
                    or_ok(0, "merge: associative %zu %zu %zu", i, j, k);
                }

                if (or_pace_valid(&ab_c, sizeof(or_pace_t), T0 + 2 * SEC)) {
                    or_ok(0, "merge: closed under validation");
                }
            }
        }
    }

    or_ok(1, "merge: commutative, associative, closed (4 records)");

    a = rec[1];
    c = rec[0];
    or_ok(or_pace_merge(&c, &a) && c.until == T0 + 10 * SEC,
          "merge: the longer pause of the same epoch wins");

    a = rec[3];
    c = rec[2];
    or_ok(!or_pace_merge(&a, &c) && a.tools == 120,
          "merge: the fewest tools stay");

    /* untrusted input */

    a = rec[0];
    or_ok(or_pace_valid(&a, sizeof(or_pace_t) - 1, T0) != NULL,
          "valid: wrong size");
    or_ok(or_pace_valid(NULL, sizeof(or_pace_t), T0) != NULL, "valid: NULL");
    a.reserved = 1;
    or_is_str(or_pace_valid(&a, sizeof(or_pace_t), T0), "reserved",
              "valid: reserved");
    a = rec[0];
    a.kind = 9;
    or_is_str(or_pace_valid(&a, sizeof(or_pace_t), T0), "kind",
              "valid: kind");
    a = rec[0];
    a.until = a.since + OR_PACE_MAX_MS + 1;
    or_is_str(or_pace_valid(&a, sizeof(or_pace_t), T0), "until",
              "valid: until too far");
    a = rec[0];
    a.since = T0 + 2 * 86400 * SEC;
    a.until = a.since;
    or_is_str(or_pace_valid(&a, sizeof(or_pace_t), T0), "since",
              "valid: since in the future");
    a = rec[0];
    a.since = -1;
    or_is_str(or_pace_valid(&a, sizeof(or_pace_t), T0), "since",
              "valid: negative since");
    a = rec[2];
    a.tools = OR_PACE_TOOLS_MAX + 1;
    or_is_str(or_pace_valid(&a, sizeof(or_pace_t), T0), "tools",
              "valid: tools");
    a = rec[0];
    a.epoch = OR_VALID_COUNT_MAX + 1;
    or_is_str(or_pace_valid(&a, sizeof(or_pace_t), T0), "epoch",
              "valid: epoch");

    /* a pause extended for long stays valid to the peers */

    memset(&a, 0, sizeof(or_pace_t));

    for (i = 0; i < 100; i++) {
        or_pace_pause(&a, T0 + (or_msec_t) i * 3600 * SEC, 3 * 3600 * SEC);
    }

    or_ok(or_pace_valid(&a, sizeof(or_pace_t), T0 + 100 * 3600 * SEC)
          == NULL, "valid: a long-extended pause");
}


/* issue 25: capability memory, the feature of a refusal and of a body */

static void
test_capability(void)
{
    uint32_t  u;

    static const struct {
        const char  *body;
        const char  *name;
    } refusals[] = {
        { "{\"error\":{\"message\":\"This model does not support "
          "assistant message prefill.\"}}", "prefill" },
        { "{\"error\":{\"message\":\"Unsupported parameter: "
          "'temperature' is not supported with this model.\","
          "\"param\":\"temperature\"}}", "temperature" },
        { "{\"error\":{\"message\":\"Unsupported value: 'top_p'\","
          "\"code\":\"unsupported_value\"}}", "top_p" },
        { "{\"error\":{\"message\":\"No endpoints found that support "
          "tool use.\"}}", "tools" },
        { "{\"error\":{\"message\":\"Function calling is not enabled "
          "for models/gemma-3\"}}", "tools" },
        { "{\"error\":{\"message\":\"This model does not support image "
          "input.\"}}", "images" },
        { "{\"error\":{\"message\":\"vision is not supported\"}}",
          "images" },
        { "{\"error\":{\"message\":\"the model does not support "
          "this\"}}", NULL },
        { "", NULL },
    };

    size_t  i;

    for (i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++) {
        const char  *name;

        name = or_pace_cap_name(or_pace_cap_feature(refusals[i].body,
                                                    strlen(refusals[i].body)));

        or_ok((name == NULL && refusals[i].name == NULL)
              || (name && refusals[i].name
                  && strcmp(name, refusals[i].name) == 0),
              "capability feature %zu: %s", i,
              refusals[i].name ? refusals[i].name : "none");
    }

#define USES(b, t)  or_pace_cap_uses(b, strlen(b), t)
#define BIT(f)      ((uint32_t) 1 << (f))

    u = USES("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},"
             "{\"role\" : \"assistant\",\"content\":\"Sure\"}]}", 0);
    or_ok(u & BIT(OR_PACE_CAP_PREFILL), "uses: an assistant turn last");

    u = USES("{\"messages\":[{\"role\":\"assistant\",\"content\":\"x\"},"
             "{\"role\":\"user\",\"content\":\"say \\\"role\\\": "
             "\\\"assistant\\\"\"}]}", 0);
    or_ok(!(u & BIT(OR_PACE_CAP_PREFILL)),
          "uses: a user turn last (escaped text does not count)");

    or_ok(USES("{}", 2) & BIT(OR_PACE_CAP_TOOLS), "uses: tools counted");
    or_ok(!(USES("{\"x\":\"tools\"}", 0) & BIT(OR_PACE_CAP_TOOLS)),
          "uses: no tools");

    or_ok(USES("{\"content\":[{\"type\":\"image_url\"}]}", 0)
          & BIT(OR_PACE_CAP_IMAGES), "uses: an image_url part");
    or_ok(USES("{\"parts\":[{\"inlineData\":{}}]}", 0)
          & BIT(OR_PACE_CAP_IMAGES), "uses: Gemini inlineData");
    or_ok(!(USES("{\"content\":\"an \\\"image\\\" word\"}", 0)
            & BIT(OR_PACE_CAP_IMAGES)), "uses: the word in text: no");

    or_ok(USES("{\"temperature\" :0.2}", 0) & BIT(OR_PACE_CAP_PARAM),
          "uses: temperature as a key");
    or_ok(!(USES("{\"content\":\"temperature\"}", 0)
            & BIT(OR_PACE_CAP_PARAM)), "uses: temperature as a value: no");

    or_ok(strcmp(or_pace_cap_name(OR_PACE_CAP_PARAM), "temperature") == 0,
          "the first parameter");
    or_ok(or_pace_cap_name(OR_PACE_CAP_MAX) == NULL, "past the list: none");

#undef USES
#undef BIT
}


int
main(void)
{
    test_retry_after();
    test_enabled();
    test_decide();
    test_admit();
    test_tools();
    test_merge_valid();
    test_capability();

    return or_done();
}
