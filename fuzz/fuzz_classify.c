/*
 * Copyright (C) ngx_omniroute authors
 *
 * libFuzzer target: restatement + classification (R-CLASS-1..6) on
 * arbitrary responses.  Input layout:
 *
 *   byte 0-1  status (big endian, modulo 700)
 *   byte 2    transport outcome (>= 0xf0: a failure, else OK)
 *   byte 3    provider configuration
 *   rest      header lines "name: value\n" up to an empty line, then body
 *
 * Checks the verdict's invariants and aborts when one is broken; the body
 * also goes through capability memory's readers (or_pace_cap_*).
 */


#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "or_classify.h"
#include "or_pace.h"


#define FUZZ_MAX_HEADERS  16
#define FUZZ_NCONFS       6


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
static void fuzz_setup(void);
static void fuzz_check(const or_response_t *resp, const or_verdict_t *v);
static size_t fuzz_split(const char *s, size_t size, or_header_t *h,
    size_t max, const char **body);


static int              fuzz_ready;
static or_class_conf_t  fuzz_confs[FUZZ_NCONFS];


static const or_oprule_t  fuzz_oprules[] = {
    { "op-400", 400, "overloaded", 10, OR_REASON_SERVER_ERROR,
      OR_SCOPE_MODEL, 300000 },
    { "op-quota", 0, "insufficient_quota", 18, OR_REASON_QUOTA_EXHAUSTED,
      OR_SCOPE_CONNECTION, OR_RULE_MAX_COOLDOWN_MS },
    { "op-429", 429, NULL, 0, OR_REASON_NONE, OR_SCOPE_CONNECTION,
      OR_MSEC_NONE },
    { "op-402", 402, NULL, 0, OR_REASON_NONE, OR_SCOPE_NONE, 3600000 },
};


static const or_restate_rule_t  fuzz_restate[] = {
    { "fuzz-529", { 529, 200, 0 }, 503, { NULL }, { "permanent", NULL },
      -1 },
};


static void
fuzz_setup(void)
{
    static const char  *names[FUZZ_NCONFS] = {
        "openai", "agentrouter", "opencode", "minimax", "openrouter", "acme"
    };
    int                  i;

    for (i = 0; i < FUZZ_NCONFS; i++) {
        or_class_conf_init(&fuzz_confs[i], names[i], strlen(names[i]));
    }

    fuzz_confs[5].oprules = fuzz_oprules;
    fuzz_confs[5].noprules = sizeof(fuzz_oprules) / sizeof(fuzz_oprules[0]);
    fuzz_confs[5].catchall.cooldown_ms = 120000;
    fuzz_confs[5].restate = fuzz_restate;
    fuzz_confs[5].nrestate = 1;

    fuzz_confs[1].catchall.cooldown_ms = 60000;
    fuzz_confs[1].catchall.scope = OR_SCOPE_MODEL;
    fuzz_confs[1].catchall.reason = OR_REASON_RATE_LIMIT_EXCEEDED;

    fuzz_ready = 1;
}


static size_t
fuzz_split(const char *s, size_t size, or_header_t *h, size_t max,
    const char **body)
{
    size_t       n;
    const char  *p, *end, *eol, *colon;

    n = 0;
    p = s;
    end = s + size;

    while (p < end) {
        eol = memchr(p, '\n', end - p);
        if (eol == NULL) {
            eol = end;
        }

        if (eol == p) {
            p++;
            break;
        }

        colon = memchr(p, ':', eol - p);

        if (colon != NULL && n < max) {
            h[n].name = p;
            h[n].name_len = colon - p;
            h[n].value = colon + 1;
            h[n].value_len = eol - colon - 1;
            n++;
        }

        p = eol + (eol < end ? 1 : 0);
    }

    *body = p;

    return n;
}


static void
fuzz_check(const or_response_t *resp, const or_verdict_t *v)
{
    int  status;

    if ((unsigned) v->reason >= OR_REASON_COUNT
        || (unsigned) v->scope >= OR_SCOPE_COUNT
        || (v->fall_over != 0 && v->fall_over != 1)
        || (v->counts_for_breaker != 0 && v->counts_for_breaker != 1))
    {
        abort();
    }

    if (v->hint_ms != OR_MSEC_NONE
        && (v->hint_ms < 0 || v->hint_ms > OR_RETRY_MAX_MS))
    {
        abort();
    }

    if (v->cooldown_ms != OR_MSEC_NONE
        && (v->cooldown_ms < 0 || v->cooldown_ms > OR_RULE_MAX_COOLDOWN_MS))
    {
        abort();
    }

    if (or_classify_is_terminal(v->reason)
        && (v->cooldown_ms != OR_MSEC_NONE || v->scope != OR_SCOPE_NONE))
    {
        abort();
    }

    /* connection scope: catch-all, guarded quota rule, or egress lock */
    if (v->scope == OR_SCOPE_CONNECTION
        && (v->rule_id == NULL || strcmp(v->rule_id, "catch-all") != 0)
        && v->reason != OR_REASON_QUOTA_EXHAUSTED
        && v->reason != OR_REASON_RATE_LIMIT_EXCEEDED)
    {
        abort();
    }

    if (v->fall_over != or_classify_falls_over(v->reason)) {
        abort();
    }

    if (resp->transport != OR_TRANSPORT_OK) {
        if (!v->counts_for_breaker || !v->fall_over) {
            abort();
        }

        return;
    }

    status = v->restated_status ? v->restated_status : resp->status;

    if (v->counts_for_breaker
        && status != 408 && status != 500 && status != 502
        && status != 503 && status != 504)
    {
        abort();
    }

    if (v->reason == OR_REASON_CONCURRENCY_LIMITED
        && v->counts_for_breaker)
    {
        abort();
    }

    if (v->restated_status == 0 && v->retry_after_s != -1) {
        abort();
    }
}


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int                i;
    size_t             nh, cnt;
    const char        *body;
    or_header_t        h[FUZZ_MAX_HEADERS];
    or_verdict_t       v;
    or_restate_t       rs;
    or_response_t      resp;
    unsigned char      cool[4];
    or_egress_conn_t   conns[4] = {
        { "10.0.0.1", 8, 0 },
        { "10.0.0.1", 8, 0 },
        { "10.0.0.1", 8, 1 },
        { "10.0.0.2", 8, 0 },
    };

    if (!fuzz_ready) {
        fuzz_setup();
    }

    if (size < 4) {
        return 0;
    }

    memset(&resp, 0, sizeof(resp));

    resp.status = ((data[0] << 8) | data[1]) % 700;
    resp.transport = data[2] >= 0xf0 ? (or_transport_e) (1 + data[2] % 3)
                                     : OR_TRANSPORT_OK;
    resp.now_ms = 1704067200000;

    nh = fuzz_split((const char *) data + 4, size - 4, h, FUZZ_MAX_HEADERS,
                    &body);

    resp.headers = h;
    resp.nheaders = nh;
    resp.body = body;
    resp.body_len = (const char *) data + size - body;

    i = data[3] % (FUZZ_NCONFS + 1);

    or_classify(i == FUZZ_NCONFS ? NULL : &fuzz_confs[i], &resp, &v);
    fuzz_check(&resp, &v);

    /* capability memory (issue 25): a refusal's feature, a body's uses */

    if (or_pace_cap_feature(body, resp.body_len) >= OR_PACE_CAP_MAX
        || (or_pace_cap_uses(body, resp.body_len, 0)
            >> OR_PACE_CAP_MAX) != 0)
    {
        abort();
    }

    cnt = or_egress_siblings(i == FUZZ_NCONFS ? NULL : &fuzz_confs[i],
                             resp.status, &v, &conns[0], conns, 4, cool);

    if (cnt > 1 || cool[0] || cool[2] || cool[3] || cnt != cool[1]) {
        abort();
    }

    (void) or_restate_apply(fuzz_restate, 1, resp.status, body,
                            resp.body_len, &rs);

    return 0;
}
