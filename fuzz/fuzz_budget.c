/*
 * Copyright (C) ngx_omniroute authors
 *
 * libFuzzer target: the output cap of a client body
 * (or_budget_max_tokens) on arbitrary bytes, and the budget counters
 * driven by the bytes.  The cap is read without a crash or a read past
 * the input, a document the scan reads gives the same answer with
 * trailing whitespace; an admission never leaves a window above its
 * limit and every ticket settles to no reservation left.
 */


#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "or_budget.h"


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
static void fuzz_counters(const uint8_t *data, size_t size);


static void
fuzz_counters(const uint8_t *data, size_t size)
{
    int                 k;
    size_t              i;
    uint64_t            taken;
    or_msec_t           now, retry;
    or_budget_t         b;
    or_budget_conf_t    c;
    or_budget_ticket_t  t[8];

    memset(&b, 0, sizeof(b));
    memset(&c, 0, sizeof(c));
    memset(t, 0, sizeof(t));

    for (k = 0; k < OR_BUDGET_LIMITS; k++) {
        c.limit[k] = (size > (size_t) k) ? data[k] % 50 : 0;
    }

    now = (or_msec_t) 1796185800 * 1000;

    for (i = OR_BUDGET_LIMITS; i + 2 < size; i += 3) {
        now += data[i] * 997;

        if ((data[i + 1] & 1) && !t[data[i + 2] % 8].admitted) {
            /* a ticket is reused only once spent */

            if (or_budget_admit(&b, &c, now, data[i + 2] % 40,
                                data[i + 1] % 40, &t[data[i + 2] % 8],
                                &retry)
                != OR_BUDGET_NONE)
            {
                continue;
            }

            /* admitted: no window with a limit is above it */

            for (k = 0; k < OR_BUDGET_WINDOWS; k++) {
                taken = or_budget_add(or_budget_used(&b, k, now),
                                      or_budget_reserved(&b, k, now));

                if (c.limit[k] && taken > c.limit[k]) {
                    abort();
                }
            }

        } else {
            or_budget_settle(&b, &t[data[i + 2] % 8], now, data[i + 1],
                             data[i + 2]);
        }
    }

    for (i = 0; i < 8; i++) {
        or_budget_settle(&b, &t[i], now, 0, 0);
    }

    for (k = 0; k < OR_BUDGET_WINDOWS; k++) {
        if (or_budget_reserved(&b, k, now) != 0) {
            abort();
        }
    }

    if (b.inflight != 0) {
        abort();
    }
}


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char      *copy;
    uint64_t   v1, v2;
    int        r1, r2;

    copy = malloc(size + 2);
    if (copy == NULL) {
        return 0;
    }

    memcpy(copy, data, size);

    v1 = 0;
    v2 = 0;
    r1 = or_budget_max_tokens(copy, size, &v1);

    copy[size] = ' ';
    copy[size + 1] = '\n';
    r2 = or_budget_max_tokens(copy, size + 2, &v2);

    if (r1 && (!r2 || v1 != v2)) {
        abort();
    }

    free(copy);

    fuzz_counters(data, size);

    return 0;
}
