/*
 * Copyright (C) ngx_omniroute authors
 *
 * Pacing and tool-limit backoff; see or_pace.h for the contract.
 */


#include <string.h>

#include "or_pace.h"
#include "or_retry_after.h"


void
or_pace_hint(const char *body, size_t len, or_msec_t now, or_pace_hint_t *h)
{
    or_msec_t  typed, prose;

    h->ms = OR_MSEC_NONE;
    h->typed = 0;

    if (body == NULL || len == 0) {
        return;
    }

    typed = or_retry_retry_delay(body, len);
    prose = or_retry_body_text(body, len, now);

    if (typed != OR_MSEC_NONE
        && or_memcasemem(body, len, "google.rpc.RetryInfo", 20) == NULL)
    {
        /* an untyped "retryDelay" is read as prose (R-PACE-1) */
        prose = (prose == OR_MSEC_NONE || typed > prose) ? typed : prose;
        typed = OR_MSEC_NONE;
    }

    if (typed != OR_MSEC_NONE && (prose == OR_MSEC_NONE || typed >= prose)) {
        h->ms = typed;
        h->typed = 1;
        return;
    }

    h->ms = prose;
}


int
or_pace_enabled(int conn_switch, or_kind_e kind, int auto_enable)
{
    if (conn_switch == 0 || conn_switch == 1) {
        return conn_switch;
    }

    return auto_enable > 0 && kind == OR_KIND_APIKEY;
}


or_pace_e
or_pace_decide(int enabled, int status, or_reason_e reason,
    const or_pace_hint_t *h, or_msec_t max_wait_ms, or_msec_t *ms)
{
    *ms = 0;

    if (!enabled || status != 429 || h == NULL || h->ms <= 0) {
        return OR_PACE_NONE;
    }

    switch (reason) {

    case OR_REASON_RATE_LIMIT_EXCEEDED:
    case OR_REASON_QUOTA_EXHAUSTED:
    case OR_REASON_CONCURRENCY_LIMITED:
        break;

    default:
        return OR_PACE_NONE;
    }

    if (max_wait_ms > 0 && h->ms <= max_wait_ms) {
        *ms = h->ms;
        return OR_PACE_PAUSE;
    }

    if (h->typed) {
        *ms = h->ms < OR_PACE_LOCK_MAX_MS ? h->ms : OR_PACE_LOCK_MAX_MS;
        return OR_PACE_LOCK;
    }

    return OR_PACE_NONE;
}


or_msec_t
or_pace_left(const or_pace_t *p, or_msec_t now)
{
    if (p == NULL || p->until <= now) {
        return 0;
    }

    return p->until - now;
}


or_pace_admit_e
or_pace_admit(const or_pace_t *p, or_msec_t now, or_msec_t wait_left_ms,
    or_msec_t *ms)
{
    or_msec_t  left;

    *ms = 0;

    if (p == NULL || p->tools != 0) {
        return OR_PACE_GO;
    }

    left = or_pace_left(p, now);

    if (left <= 0) {
        return OR_PACE_GO;
    }

    *ms = left;

    return (left <= wait_left_ms) ? OR_PACE_WAIT : OR_PACE_TIMEOUT;
}


/* an ended record begins a new epoch of kind */

static void
or_pace_begin(or_pace_t *p, or_msec_t now, uint32_t kind)
{
    if (p->until > now && p->kind == kind) {
        return;
    }

    p->epoch = or_count_next(p->epoch);
    p->tools = 0;
    p->until = now;
    p->since = now;
    p->kind = kind;
    p->reserved = 0;
}


/* the record lasts ms more from now, within its epoch's bound */

static void
or_pace_extend(or_pace_t *p, or_msec_t now, or_msec_t ms)
{
    or_msec_t  until;

    if (ms > OR_PACE_MAX_MS) {
        ms = OR_PACE_MAX_MS;
    }

    until = or_msec_add(now, ms);

    if (until > or_msec_add(p->since, OR_PACE_MAX_MS)) {
        /* valid for the peers: at most OR_PACE_MAX_MS in one epoch */
        until = or_msec_add(p->since, OR_PACE_MAX_MS);
    }

    if (until > p->until) {
        p->until = until;
    }
}


int
or_pace_pause(or_pace_t *p, or_msec_t now, or_msec_t ms)
{
    or_pace_t  before;

    if (ms <= 0 || now < 0) {
        return 0;
    }

    before = *p;

    or_pace_begin(p, now, OR_PACE_KIND_PAUSE);
    or_pace_extend(p, now, ms);

    return memcmp(&before, p, sizeof(or_pace_t)) != 0;
}


int
or_pace_tools_fail(or_pace_t *p, size_t ntools, or_msec_t now, or_msec_t ms)
{
    uint32_t   n;
    or_pace_t  before;

    if (ntools == 0 || ms <= 0 || now < 0) {
        return 0;
    }

    n = (ntools > OR_PACE_TOOLS_MAX) ? OR_PACE_TOOLS_MAX : (uint32_t) ntools;

    before = *p;

    or_pace_begin(p, now, OR_PACE_KIND_TOOLS);

    if (p->tools == 0 || n < p->tools) {
        p->tools = n;
    }

    or_pace_extend(p, now, ms);

    return memcmp(&before, p, sizeof(or_pace_t)) != 0;
}


int
or_pace_tools_skip(const or_pace_t *p, size_t ntools, or_msec_t now)
{
    return p != NULL && p->tools > 0 && p->until > now && ntools > 0
           && ntools >= p->tools;
}


int
or_pace_merge(or_pace_t *dst, const or_pace_t *src)
{
    or_pace_t  before;

    if (src->epoch < dst->epoch) {
        return 0;
    }

    if (src->epoch > dst->epoch) {
        if (memcmp(dst, src, sizeof(or_pace_t)) == 0) {
            return 0;
        }

        *dst = *src;
        return 1;
    }

    before = *dst;

    if (src->until > dst->until) {
        dst->until = src->until;
    }

    if (src->since > dst->since) {
        dst->since = src->since;
    }

    if (src->kind > dst->kind) {
        dst->kind = src->kind;
    }

    if (src->tools != 0 && (dst->tools == 0 || src->tools < dst->tools)) {
        dst->tools = src->tools;
    }

    return memcmp(&before, dst, sizeof(or_pace_t)) != 0;
}


int
or_pace_equal(const or_pace_t *a, const or_pace_t *b)
{
    return memcmp(a, b, sizeof(or_pace_t)) == 0;
}


const char *
or_pace_valid(const void *value, size_t size, or_msec_t now)
{
    or_pace_t  p;

    if (value == NULL || size != sizeof(or_pace_t)) {
        return "size";
    }

    memcpy(&p, value, sizeof(or_pace_t));

    if (p.epoch > OR_VALID_COUNT_MAX) {
        return "epoch";
    }

    if (p.tools > OR_PACE_TOOLS_MAX) {
        return "tools";
    }

    if (p.kind > OR_PACE_KIND_TOOLS) {
        return "kind";
    }

    if (p.reserved != 0) {
        return "reserved";
    }

    if (p.since < 0 || p.since > or_msec_add(now, OR_VALID_SKEW_MS)) {
        return "since";
    }

    if (p.until < 0 || p.until > or_msec_add(p.since, OR_PACE_MAX_MS)) {
        return "until";
    }

    return NULL;
}


/* capability memory (issue 25): or_pace.h, 5. */

static const char  *or_pace_cap_params[OR_PACE_CAP_PARAMS + 1] = {
    "temperature", "top_p", "top_k", "presence_penalty",
    "frequency_penalty", "logprobs", "top_logprobs", "logit_bias", "seed",
    "stop", "n", "max_tokens", "max_completion_tokens",
    "parallel_tool_calls", "reasoning_effort", "response_format",
    "thinking", NULL
};

static const char  *or_pace_cap_names[OR_PACE_CAP_PARAM] = {
    NULL, "prefill", "tools", "images"
};


static int
or_pace_lower(int c)
{
    return (c >= 'A' && c <= 'Z') ? c + ('a' - 'A') : c;
}


/* the first place of needle in hay, case-insensitive; NULL: none */

static const char *
or_pace_find(const char *hay, size_t len, const char *needle, int nocase)
{
    size_t  i, j, n;

    n = strlen(needle);

    if (n == 0 || n > len) {
        return NULL;
    }

    for (i = 0; i + n <= len; i++) {
        for (j = 0; j < n; j++) {
            if (nocase ? or_pace_lower((unsigned char) hay[i + j])
                         != (unsigned char) needle[j]
                       : hay[i + j] != needle[j])
            {
                break;
            }
        }

        if (j == n) {
            return hay + i;
        }
    }

    return NULL;
}


/* name quoted ('name', "name", `name`, \"name\") in the refusal */

static int
or_pace_cap_quoted(const char *body, size_t len, const char *name)
{
    size_t       n;
    const char  *p, *end;

    n = strlen(name);
    end = body + len;
    p = body;

    while ((p = or_pace_find(p, end - p, name, 1)) != NULL) {
        if (p > body && p + n < end
            && (p[-1] == '\'' || p[-1] == '"' || p[-1] == '`')
            && (p[n] == '\'' || p[n] == '"' || p[n] == '`'
                || p[n] == '\\'))
        {
            return 1;
        }

        p += n;
    }

    return 0;
}


unsigned
or_pace_cap_feature(const char *body, size_t len)
{
    unsigned  i;

    if (body == NULL || len == 0) {
        return OR_PACE_CAP_NONE;
    }

    if (or_pace_find(body, len, "prefill", 1)) {
        return OR_PACE_CAP_PREFILL;
    }

    if (or_pace_find(body, len, "parameter", 1)
        || or_pace_find(body, len, "unsupported_value", 1)
        || or_pace_find(body, len, "\"param\"", 1))
    {
        for (i = 0; or_pace_cap_params[i]; i++) {
            if (or_pace_cap_quoted(body, len, or_pace_cap_params[i])) {
                return OR_PACE_CAP_PARAM + i;
            }
        }
    }

    if (or_pace_find(body, len, "image", 1)
        || or_pace_find(body, len, "vision", 1))
    {
        return OR_PACE_CAP_IMAGES;
    }

    if (or_pace_find(body, len, "tool", 1)
        || or_pace_find(body, len, "function call", 1))
    {
        return OR_PACE_CAP_TOOLS;
    }

    return OR_PACE_CAP_NONE;
}


/* the value after a key's ':' starts with value (a JSON string) */

static int
or_pace_cap_value(const char *p, const char *end, const char *value)
{
    size_t  n;

    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')) {
        p++;
    }

    if (p == end || *p++ != ':') {
        return 0;
    }

    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')) {
        p++;
    }

    if (value == NULL) {
        return 1;
    }

    n = strlen(value);

    return (size_t) (end - p) >= n && memcmp(p, value, n) == 0;
}


uint32_t
or_pace_cap_uses(const char *body, size_t len, size_t ntools)
{
    char         key[32];
    size_t       n;
    unsigned     i;
    uint32_t     uses;
    const char  *p, *last, *end;

    uses = 0;

    if (ntools > 0) {
        uses |= (uint32_t) 1 << OR_PACE_CAP_TOOLS;
    }

    if (body == NULL || len == 0) {
        return uses;
    }

    end = body + len;

    /* the last "role" key: an assistant turn last is a prefill */

    last = NULL;

    for (p = body; (p = or_pace_find(p, end - p, "\"role\"", 0)) != NULL;
         p += 6)
    {
        if (or_pace_cap_value(p + 6, end, NULL)) {
            last = p + 6;
        }
    }

    if (last && or_pace_cap_value(last, end, "\"assistant\"")) {
        uses |= (uint32_t) 1 << OR_PACE_CAP_PREFILL;
    }

    if (or_pace_find(body, len, "\"image_url\"", 0)
        || or_pace_find(body, len, "\"input_image\"", 0)
        || or_pace_find(body, len, "\"image\"", 0)
        || or_pace_find(body, len, "\"inlineData\"", 0)
        || or_pace_find(body, len, "\"inline_data\"", 0))
    {
        uses |= (uint32_t) 1 << OR_PACE_CAP_IMAGES;
    }

    for (i = 0; or_pace_cap_params[i]; i++) {
        n = strlen(or_pace_cap_params[i]);

        key[0] = '"';
        memcpy(key + 1, or_pace_cap_params[i], n);
        key[n + 1] = '"';
        key[n + 2] = '\0';

        for (p = body; (p = or_pace_find(p, end - p, key, 0)) != NULL;
             p += n + 2)
        {
            if (or_pace_cap_value(p + n + 2, end, NULL)) {
                uses |= (uint32_t) 1 << (OR_PACE_CAP_PARAM + i);
                break;
            }
        }
    }

    return uses;
}


const char *
or_pace_cap_name(unsigned feature)
{
    if (feature >= OR_PACE_CAP_PARAM && feature < OR_PACE_CAP_MAX) {
        return or_pace_cap_params[feature - OR_PACE_CAP_PARAM];
    }

    if (feature > OR_PACE_CAP_NONE && feature < OR_PACE_CAP_PARAM) {
        return or_pace_cap_names[feature];
    }

    return NULL;
}
