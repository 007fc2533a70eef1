/*
 * Copyright (C) ngx_omniroute authors
 */


#include "or_brake.h"


static uint64_t or_brake_excess(const or_brake_conf_t *c, const or_brake_t *b,
    or_msec_t now);


/* the bucket drained up to now (time going back drains nothing) */

static uint64_t
or_brake_excess(const or_brake_conf_t *c, const or_brake_t *b, or_msec_t now)
{
    uint64_t  ms, drained;

    if (now <= b->last) {
        return b->excess;
    }

    ms = (uint64_t) (now - b->last);

    /* rate is per second in 1/1000: rate * ms / 1000 in 1/1000 */
    if (ms > UINT64_MAX / (c->rate ? c->rate : 1)) {
        return 0;
    }

    drained = c->rate * ms / 1000;

    return (drained >= b->excess) ? 0 : b->excess - drained;
}


or_msec_t
or_brake_wait(const or_brake_conf_t *c, const or_brake_t *b, or_msec_t now)
{
    uint64_t  e, limit;

    if (c->rate == 0) {
        return 0;
    }

    e = or_brake_excess(c, b, now);
    limit = c->burst * 1000;

    if (e <= limit) {
        return 0;
    }

    /* until e drains to the limit, rounded up */
    return (or_msec_t) (((e - limit) * 1000 + c->rate - 1) / c->rate);
}


void
or_brake_fail(const or_brake_conf_t *c, or_brake_t *b, or_msec_t now)
{
    if (c->rate == 0) {
        return;
    }

    b->excess = or_brake_excess(c, b, now) + 1000;

    if (now > b->last) {
        b->last = now;
    }
}


int
or_brake_idle(const or_brake_conf_t *c, const or_brake_t *b, or_msec_t now)
{
    return c->rate == 0 || or_brake_excess(c, b, now) == 0;
}
