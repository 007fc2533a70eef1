/*
 * Copyright (C) ngx_omniroute authors
 *
 * Retry-hint parsers (R-CD-3, R-CD-5).
 */


#include "or_test.h"
#include "or_retry_after.h"


/* 2024-01-01T00:00:00Z */
#define NOW      ((or_msec_t) 1704067200000)
#define NONE     OR_MSEC_NONE
#define MAX      OR_RETRY_MAX_MS
#define H(n, v)  { n, sizeof(n) - 1, v, sizeof(v) - 1 }


typedef enum {
    F_RETRY_AFTER,
    F_RETRY_AFTER_MS,
    F_DURATION,
    F_RESET,
    F_BODY,
    F_HTTP_DATE,
    F_RFC3339
} fn_e;


typedef struct {
    fn_e          fn;
    const char   *in;
    or_msec_t     expected;
    const char   *name;
} case_t;


static or_msec_t run(fn_e fn, const char *in);
static void test_table(void);
static void test_memcasemem(void);
static void test_headers(void);


static const case_t  cases[] = {

    /* Retry-After: delta seconds */
    { F_RETRY_AFTER, "120", 120000, "R-CD-3 Retry-After 120 -> 120 s" },
    { F_RETRY_AFTER, " 30 ", 30000, "R-CD-3 Retry-After ' 30 ' trimmed" },
    { F_RETRY_AFTER, "0", 0, "R-CD-3 Retry-After 0 -> 0" },
    { F_RETRY_AFTER, "1.5", 1500, "R-CD-3 Retry-After 1.5 -> 1500 ms" },
    { F_RETRY_AFTER, "30s", 30000, "R-CD-3 Retry-After '30s' tolerated" },
    { F_RETRY_AFTER, "-5", NONE, "R-CD-3 Retry-After -5 -> none" },
    { F_RETRY_AFTER, "", NONE, "R-CD-3 Retry-After empty -> none" },
    { F_RETRY_AFTER, "soon", NONE, "R-CD-3 Retry-After 'soon' -> none" },
    { F_RETRY_AFTER, "12abc", NONE, "R-CD-3 Retry-After '12abc' -> none" },
    { F_RETRY_AFTER, "1704067290", MAX,
      "R-CD-3 Retry-After big delta is delta seconds, clamped to 30 d" },
    { F_RETRY_AFTER, "99999999999999999999999999999", MAX,
      "R-CD-3 Retry-After huge -> clamp 30 d, no overflow" },
    { F_RETRY_AFTER, "2592000", 2592000000,
      "R-CD-3 Retry-After exactly 30 d kept" },
    { F_RETRY_AFTER, "2592001", MAX, "R-CD-3 Retry-After 30 d + 1 s clamped" },

    /* Retry-After: HTTP-date, the three formats of RFC 9110 */
    { F_RETRY_AFTER, "Mon, 01 Jan 2024 00:01:00 GMT", 60000,
      "R-CD-3 Retry-After IMF-fixdate +60 s" },
    { F_RETRY_AFTER, "Monday, 01-Jan-24 00:00:30 GMT", 30000,
      "R-CD-3 Retry-After RFC 850 date +30 s" },
    { F_RETRY_AFTER, "Mon Jan  1 00:02:00 2024", 120000,
      "R-CD-3 Retry-After asctime date +120 s" },
    { F_RETRY_AFTER, "Sun, 31 Dec 2023 23:59:00 GMT", 0,
      "R-CD-3 Retry-After date in the past -> 0" },
    { F_RETRY_AFTER, "Fri, 31 Dec 9999 23:59:59 GMT", MAX,
      "R-CD-3 Retry-After year 9999 -> clamp 30 d" },
    { F_HTTP_DATE, "Thu, 29 Feb 2024 00:00:00 GMT", 1709164800000,
      "R-CD-3 HTTP-date leap day 2024-02-29 accepted" },
    { F_RETRY_AFTER, "Wed, 29 Feb 2023 00:00:00 GMT", NONE,
      "R-CD-3 Retry-After 29 Feb 2023 invalid -> none" },
    { F_RETRY_AFTER, "Mon, 32 Jan 2024 00:00:00 GMT", NONE,
      "R-CD-3 Retry-After day 32 -> none" },
    { F_RETRY_AFTER, "Mon, 01 Foo 2024 00:00:00 GMT", NONE,
      "R-CD-3 Retry-After bad month -> none" },
    { F_RETRY_AFTER, "Mon, 01 Jan 2024 24:00:00 GMT", NONE,
      "R-CD-3 Retry-After hour 24 -> none" },
    { F_RETRY_AFTER, "Mon, 01 Jan 2024 00:01:00 GMT trailing", NONE,
      "R-CD-3 Retry-After date with junk -> none" },

    /* retry-after-ms */
    { F_RETRY_AFTER_MS, "1500", 1500, "R-CD-3 retry-after-ms 1500" },
    { F_RETRY_AFTER_MS, "0.2", 1, "R-CD-3 retry-after-ms 0.2 rounds up to 1" },
    { F_RETRY_AFTER_MS, "x", NONE, "R-CD-3 retry-after-ms 'x' -> none" },

    /* durations (x-ratelimit-reset-* style) */
    { F_DURATION, "1m30s", 90000, "R-CD-3 duration 1m30s -> 90 s" },
    { F_DURATION, "1h2m3.5s", 3723500, "R-CD-3 duration 1h2m3.5s" },
    { F_DURATION, "6ms", 6, "R-CD-3 duration 6ms" },
    { F_DURATION, "6m0s", 360000, "R-CD-3 duration 6m0s" },
    { F_DURATION, "0.5s", 500, "R-CD-3 duration 0.5s" },
    { F_DURATION, "20", 20000, "R-CD-3 duration bare 20 -> seconds" },
    { F_DURATION, "1.5", 1500, "R-CD-3 duration bare 1.5 -> 1500 ms" },
    { F_DURATION, "250us", 1, "R-CD-3 duration 250us rounds up to 1 ms" },
    { F_DURATION, "1500000ns", 2, "R-CD-3 duration 1500000ns -> 2 ms" },
    { F_DURATION, "2d", 172800000, "R-CD-3 duration 2d" },
    { F_DURATION, "45d", MAX, "R-CD-3 duration 45d clamped to 30 d" },
    { F_DURATION, "1m30", NONE, "R-CD-3 duration 1m30 (unitless tail) none" },
    { F_DURATION, "1 m", NONE, "R-CD-3 duration with a space is not a header "
      "duration" },
    { F_DURATION, "s", NONE, "R-CD-3 duration 's' -> none" },
    { F_DURATION, "1x", NONE, "R-CD-3 duration unknown unit -> none" },

    /* x-ratelimit-reset-* / anthropic-ratelimit-*-reset values */
    { F_RESET, "1s", 1000, "R-CD-3 x-ratelimit-reset 1s" },
    { F_RESET, "6m0s", 360000, "R-CD-3 x-ratelimit-reset 6m0s" },
    { F_RESET, "6ms", 6, "R-CD-3 x-ratelimit-reset 6ms" },
    { F_RESET, "0.5", 500, "R-CD-3 x-ratelimit-reset 0.5 (seconds)" },
    { F_RESET, "60", 60000, "R-CD-3 x-ratelimit-reset 60 (seconds)" },
    { F_RESET, "1704067290", 90000,
      "R-CD-3 x-ratelimit-reset epoch seconds -> +90 s" },
    { F_RESET, "1704067200.25", 250,
      "R-CD-3 x-ratelimit-reset fractional epoch seconds -> 250 ms" },
    { F_RESET, "1704067200500", 500,
      "R-CD-3 x-ratelimit-reset epoch milliseconds -> 500 ms" },
    { F_RESET, "1704060000", 0,
      "R-CD-3 x-ratelimit-reset epoch in the past -> 0" },
    { F_RESET, "2024-01-01T00:00:30Z", 30000,
      "R-CD-3 anthropic reset RFC 3339 +30 s" },
    { F_RESET, "2024-01-01T01:00:30+01:00", 30000,
      "R-CD-3 anthropic reset RFC 3339 with offset" },
    { F_RESET, "2024-01-01T00:00:00.5Z", 500,
      "R-CD-3 anthropic reset RFC 3339 fractional seconds" },
    { F_RESET, "2023-12-31T00:00:00Z", 0,
      "R-CD-3 anthropic reset in the past -> 0" },
    { F_RESET, "Mon, 01 Jan 2024 00:00:10 GMT", 10000,
      "R-CD-3 reset header as an HTTP-date" },
    { F_RESET, "never", NONE, "R-CD-3 reset 'never' -> none" },

    /* absolute dates */
    { F_HTTP_DATE, "Sun, 06 Nov 1994 08:49:37 GMT", 784111777000,
      "R-CD-3 IMF-fixdate epoch" },
    { F_HTTP_DATE, "Sunday, 06-Nov-94 08:49:37 GMT", 784111777000,
      "R-CD-3 RFC 850 epoch" },
    { F_HTTP_DATE, "Sun Nov  6 08:49:37 1994", 784111777000,
      "R-CD-3 asctime epoch" },
    { F_HTTP_DATE, "Sun, 06 Nov 1994 08:49:37", 784111777000,
      "R-CD-3 IMF-fixdate without zone" },
    { F_HTTP_DATE, "Sun, 06 Nov 1969 08:49:37 GMT", NONE,
      "R-CD-3 date before 1970 -> none" },
    { F_RFC3339, "2024-01-01T00:00:00Z", NOW, "R-CD-3 RFC 3339 epoch" },
    { F_RFC3339, "2024-01-01t00:00:00z", NOW, "R-CD-3 RFC 3339 lowercase" },
    { F_RFC3339, "2024-01-01 00:00:00Z", NOW, "R-CD-3 RFC 3339 space" },
    { F_RFC3339, "2024-01-01T00:00:00.123456Z", NOW + 123,
      "R-CD-3 RFC 3339 microseconds truncated to ms" },
    { F_RFC3339, "2024-13-01T00:00:00Z", NONE, "R-CD-3 RFC 3339 month 13" },
    { F_RFC3339, "2024-01-01T00:00:00+25:00", NONE,
      "R-CD-3 RFC 3339 offset +25:00" },
    { F_RFC3339, "2024-01-01T00:00", NONE, "R-CD-3 RFC 3339 truncated" },

    /* body text */
    { F_BODY, "Rate limit reached. Please try again in 20s.", 20000,
      "R-CD-3 body 'try again in 20s'" },
    { F_BODY, "Please retry after 2 minutes", 120000,
      "R-CD-3 body 'retry after 2 minutes'" },
    { F_BODY, "[429] Monthly usage limit reached. Resets in 3 days. To "
      "continue...", 259200000, "R-CD-3 body 'resets in 3 days'" },
    { F_BODY, "Please try again in 1.5s", 1500,
      "R-CD-3 body 'Please try again in 1.5s'" },
    { F_BODY, "Rate limit on tokens per min. Please try again in 6ms.", 6,
      "R-CD-3 body 'try again in 6ms'" },
    { F_BODY, "please try again in 1m30s", 90000,
      "R-CD-3 body 'try again in 1m30s'" },
    { F_BODY, "Try again in 2 minutes and 30 seconds.", 150000,
      "R-CD-3 body '2 minutes and 30 seconds'" },
    { F_BODY, "retry in 1 hour, 5 minutes", 3900000,
      "R-CD-3 body '1 hour, 5 minutes'" },
    { F_BODY, "TRY AGAIN IN 20S", 20000, "R-CD-3 body is case-insensitive" },
    { F_BODY, "try again in 20s, 5 requests left", 20000,
      "R-CD-3 body stops at a non-unit word" },
    { F_BODY, "Quota resets at 2024-01-01T00:05:00Z.", 300000,
      "R-CD-3 body 'resets at <RFC 3339>'" },
    { F_BODY, "try again in 5s. later: retry after 40s", 40000,
      "R-CD-3 body: the largest of several hints" },
    { F_BODY, "{\"error\":{\"details\":[{\"@type\":\"type.googleapis.com/"
      "google.rpc.RetryInfo\",\"retryDelay\":\"86399s\"}]}}", 86399000,
      "R-CD-3 Google RetryInfo retryDelay 86399s" },
    { F_BODY, "\"retryDelay\": \"1.5s\"", 1500,
      "R-CD-3 Google retryDelay 1.5s" },
    { F_BODY, "{\"message\":\"{\\\"retryDelay\\\":\\\"30s\\\"}\"}", 30000,
      "R-CD-3 Google retryDelay inside escaped JSON" },
    { F_BODY, "\"retryDelay\": \"37s\" ... Please retry in 37.833255s.",
      37834, "R-CD-3 retryDelay and text: largest, rounded up" },
    { F_BODY, "try again in 99999999999999999999999999 days", MAX,
      "R-CD-3 body huge duration clamped to 30 d" },
    { F_BODY, "try again in a moment", NONE, "R-CD-3 body without number" },
    { F_BODY, "try again in 2", NONE, "R-CD-3 body number without unit" },
    { F_BODY, "Please wait 30 seconds before retrying", 30000,
      "R-CD-3 body 'please wait 30 seconds'" },
    { F_BODY, "Too many requests, retry in 2 mins", 120000,
      "R-CD-3 body 'retry in 2 mins'" },
    { F_BODY, "limit resets in 5h", 18000000, "R-CD-3 body 'resets in 5h'" },
    { F_BODY, "no hint here", NONE, "R-CD-3 body without hint" },
    { F_BODY, "try again in ", NONE, "R-CD-3 body truncated after phrase" },
};


static or_msec_t
run(fn_e fn, const char *in)
{
    size_t  len;

    len = strlen(in);

    switch (fn) {

    case F_RETRY_AFTER:
        return or_retry_after(in, len, NOW);

    case F_RETRY_AFTER_MS:
        return or_retry_after_ms(in, len);

    case F_DURATION:
        return or_retry_duration(in, len);

    case F_RESET:
        return or_retry_reset(in, len, NOW);

    case F_BODY:
        return or_retry_body(in, len, NOW);

    case F_HTTP_DATE:
        return or_retry_parse_http_date(in, len);

    default:
        return or_retry_parse_rfc3339(in, len);
    }
}


static void
test_table(void)
{
    size_t  i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        or_is_int(run(cases[i].fn, cases[i].in), cases[i].expected, "%s",
                  cases[i].name);
    }

    or_is_int(MAX, 2592000000LL, "R-CD-3 hint clamp is 30 days");
    or_is_int(or_retry_after(NULL, 5, NOW), NONE,
              "R-CD-3 NULL value -> none");
    or_is_int(or_retry_body(NULL, 10, NOW), NONE, "R-CD-3 NULL body -> none");
    or_is_int(or_retry_after("Mon, 01 Jan 2024 00:01:00 GMT", 29, -1),
              MAX, "R-CD-3 negative now treated as epoch 0, clamped");

    /* not NUL-terminated: the length bounds the parse */
    or_is_int(or_retry_after("1209", 2, NOW), 12000,
              "R-CD-3 value bounded by its length");
    or_is_int(or_retry_body("try again in 20s", 15, NOW), NONE,
              "R-CD-3 body bounded by its length: '20' without unit");
    or_is_int(or_retry_body("try again in 2ms0", 16, NOW), 2,
              "R-CD-3 body bounded by its length (truncated body)");
}


static void
test_memcasemem(void)
{
    const char   *hay = "xxHELLO World";
    const char   *zh = "{\"error\":\"用户额度不足\"}";
    static char   big[65536], needle[200];

    or_ok(or_memcasemem(hay, strlen(hay), "hello", 5) == hay + 2,
          "R-CLASS-3 memcasemem is case-insensitive");
    or_ok(or_memcasemem(hay, strlen(hay), "world", 5) == hay + 8,
          "R-CLASS-3 memcasemem finds at the end");
    or_ok(or_memcasemem(hay, strlen(hay), "worlds", 6) == NULL,
          "R-CLASS-3 memcasemem: no match past the end");
    or_ok(or_memcasemem(hay, 6, "hello", 5) == NULL,
          "R-CLASS-3 memcasemem bounded by hay length");
    or_ok(or_memcasemem(zh, strlen(zh), "额度不足", strlen("额度不足"))
          != NULL, "R-CLASS-1 memcasemem matches UTF-8 bytes exactly");
    or_ok(or_memcasemem(hay, strlen(hay), "", 0) == hay,
          "R-CLASS-3 memcasemem empty needle matches at start");
    or_ok(or_memcasemem(NULL, 0, "a", 1) == NULL,
          "R-CLASS-3 memcasemem NULL hay");
    or_ok(or_memcasemem("aaaaaaaaab", 10, "aab", 3) != NULL,
          "R-CLASS-3 memcasemem periodic text");
    or_ok(or_memcasemem("\xc3\xa9X", 3, "\xc3\x89x", 3) == NULL,
          "R-CLASS-3 memcasemem folds ASCII only");

    /* long texts: Horspool, then the linear fallback on periodic text */
    memset(big, 'a', sizeof(big));
    memset(needle, 'a', sizeof(needle));
    needle[99] = 'b';
    or_ok(or_memcasemem(big, sizeof(big), needle, sizeof(needle)) == NULL,
          "R-CLASS-3 memcasemem periodic 64 KiB text, no match");

    big[sizeof(big) - 101] = 'B';
    or_ok(or_memcasemem(big, sizeof(big), needle, sizeof(needle))
          == big + sizeof(big) - 200,
          "R-CLASS-3 memcasemem periodic 64 KiB text, match at the end");

    memset(big, 'x', sizeof(big));
    memcpy(big + 40000, "Try Again In", 12);
    or_ok(or_memcasemem(big, sizeof(big), "try again in", 12) == big + 40000,
          "R-CLASS-3 memcasemem long text, case-insensitive");
    or_ok(or_memcasemem(big, sizeof(big), "try again im", 12) == NULL,
          "R-CLASS-3 memcasemem long text, no match");
    or_ok(or_memcasemem(big, sizeof(big), "x", 1) == big,
          "R-CLASS-3 memcasemem long text, one-byte needle");
}


static void
test_headers(void)
{
    static const or_header_t  openai_hot[] = {
        H("x-ratelimit-remaining-requests", "0"),
        H("x-ratelimit-reset-requests", "1s"),
        H("x-ratelimit-remaining-tokens", "15000"),
        H("x-ratelimit-reset-tokens", "6m0s"),
    };
    static const or_header_t  openai_cold[] = {
        H("x-ratelimit-reset-requests", "1s"),
        H("x-ratelimit-reset-tokens", "6m0s"),
    };
    static const or_header_t  ra_and_ms[] = {
        H("Retry-After", "1"),
        H("retry-after-ms", "500"),
    };
    static const or_header_t  ra_and_hot[] = {
        H("RETRY-AFTER", "20"),
        H("X-RateLimit-Remaining-Tokens", "0"),
        H("X-RateLimit-Reset-Tokens", "60s"),
        H("x-ratelimit-reset-requests", "6m"),
    };
    static const or_header_t  anthropic[] = {
        H("anthropic-ratelimit-requests-remaining", "0"),
        H("anthropic-ratelimit-requests-reset", "2024-01-01T00:00:42Z"),
        H("anthropic-ratelimit-tokens-remaining", "8000"),
        H("anthropic-ratelimit-tokens-reset", "2024-01-01T00:05:00Z"),
    };
    static const or_header_t  unified[] = {
        H("anthropic-ratelimit-unified-reset", "1704070800"),
    };
    static const or_header_t  ietf[] = {
        H("RateLimit-Reset", "30"),
        H("content-type", "application/json"),
    };
    static const or_header_t  junk[] = {
        H("retry-after", "later"),
        H("x-ratelimit-reset", "??"),
        H("anthropic-ratelimit--reset", "5"),
        { NULL, 3, "1", 1 },
        { "retry-after", 11, NULL, 0 },
    };
    static const char  quota_body[] = "Monthly usage limit reached. "
                                      "Resets in 3 days.";

    or_is_int(or_retry_headers(openai_hot, 4, NOW), 1000,
              "R-CD-3 x-ratelimit-reset of the exhausted limit wins (1s)");
    or_is_int(or_retry_headers(openai_cold, 2, NOW), 360000,
              "R-CD-3 no remaining info: largest x-ratelimit-reset (6m0s)");
    or_is_int(or_retry_headers(ra_and_ms, 2, NOW), 500,
              "R-CD-3 retry-after-ms preferred over Retry-After");
    or_is_int(or_retry_headers(ra_and_hot, 4, NOW), 60000,
              "R-CD-3 Retry-After 20 vs exhausted reset 60s: 60 s; "
              "non-exhausted 6m ignored");
    or_is_int(or_retry_headers(ra_and_hot, 1, NOW), 20000,
              "R-CD-3 Retry-After alone, upper-case name");
    or_is_int(or_retry_headers(anthropic, 4, NOW), 42000,
              "R-CD-3 anthropic-ratelimit-requests-reset (remaining 0)");
    or_is_int(or_retry_headers(anthropic + 2, 2, NOW), 300000,
              "R-CD-3 anthropic-ratelimit-tokens-reset alone");
    or_is_int(or_retry_headers(unified, 1, NOW), 3600000,
              "R-CD-3 anthropic-ratelimit-unified-reset epoch seconds");
    or_is_int(or_retry_headers(ietf, 2, NOW), 30000,
              "R-CD-3 RateLimit-Reset 30");
    or_is_int(or_retry_headers(junk, 5, NOW), NONE,
              "R-CD-3 unparsable hint headers -> none");
    or_is_int(or_retry_headers(NULL, 3, NOW), NONE, "R-CD-3 no headers");

    or_is_int(or_retry_best(ra_and_hot, 1, quota_body, sizeof(quota_body) - 1,
                            NOW),
              259200000, "R-CD-3 best hint: body reset 3 days beats "
              "Retry-After 20");
    or_is_int(or_retry_best(openai_hot, 4, "try again in 100ms", 18, NOW),
              1000, "R-CD-3 best hint: header 1s beats body 100ms");
    or_is_int(or_retry_best(NULL, 0, "nothing", 7, NOW), NONE,
              "R-CD-3 best hint: none");

    or_ok(or_header_find(ietf, 2, "content-TYPE", 12) == &ietf[1],
          "R-CLASS-3 header names compare case-insensitively");
    or_ok(or_header_find(ietf, 2, "content-typ", 11) == NULL,
          "R-CLASS-3 header find needs the full name");
}


/* issue 25: the one rounding rule of the Retry-After the gateway sends */

static void
test_seconds(void)
{
    or_is_int((int) or_retry_after_seconds(1), 1, "1 ms: 1 s");
    or_is_int((int) or_retry_after_seconds(1000), 1, "1000 ms: 1 s");
    or_is_int((int) or_retry_after_seconds(1001), 2, "1001 ms: 2 s (ceil)");
    or_is_int((int) or_retry_after_seconds(2900), 3, "2900 ms: 3 s");
    or_is_int((int) or_retry_after_seconds(0), 1, "0: at least 1");
    or_is_int((int) or_retry_after_seconds(-5), 1, "negative: 1");
    or_is_int((int) or_retry_after_seconds(OR_MSEC_NONE), 1, "none: 1");
    or_ok(or_retry_after_seconds((or_msec_t) 400 * 24 * 3600 * 1000)
          == OR_RETRY_AFTER_MAX_S, "bounded: 30 days");

    or_ok(or_retry_after_answer(503, -1, OR_MSEC_NONE, 3000) == 3000,
          "a provider's 503 without a hint: the cooldown just recorded");
    or_ok(or_retry_after_answer(429, 60, OR_MSEC_NONE, 3000) == 60000,
          "a restated 429: the restatement's, longer than the cooldown");
    or_ok(or_retry_after_answer(429, 60, 60000, 61000) == 61000,
          "... never shorter than the connection's cooldown");
    or_ok(or_retry_after_answer(429, -1, 30000, 30000) == 30000,
          "a 429 with Retry-After 30, cooled 30 s: 30 s");
    or_ok(or_retry_after_answer(429, -1, OR_MSEC_NONE, OR_MSEC_NONE)
          == OR_MSEC_NONE, "nothing known: no Retry-After");
    or_ok(or_retry_after_answer(400, -1, OR_MSEC_NONE, 3000) == OR_MSEC_NONE,
          "a 400: never the cooldown");
    or_ok(or_retry_after_answer(400, -1, 20000, 3000) == 20000,
          "a 400 with a hint: the hint");
}


int
main(void)
{
    test_seconds();
    test_table();
    test_memcasemem();
    test_headers();

    return or_done();
}
