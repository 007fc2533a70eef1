/*
 * Copyright (C) ngx_omniroute authors
 *
 * The brake on failed client key checks (R-BRAKE-1), per client
 * address, as limit_req counts requests: a leaky bucket of failures that
 * drains at rate per second and holds burst of them beyond the one
 * allowed now.  While the bucket is full, a key check is not made at all
 * (the answer is 429 with how long to wait), so a guess is never
 * compared; a successful check adds nothing, so a client with its key is
 * never slowed by its own requests.
 *
 * Pure: the caller keeps the state (in shared memory) and the time.
 */

#ifndef _OR_BRAKE_H_INCLUDED_
#define _OR_BRAKE_H_INCLUDED_


#include <stdint.h>

#include "or_types.h"


typedef struct {
    uint64_t     excess;    /* failures in the bucket, in 1/1000 */
    or_msec_t    last;      /* when excess was last computed */
} or_brake_t;


/*
 * rate: failures per second drained, in 1/1000 (10r/s is 10000; 0: no
 * brake); burst: failures held beyond the one allowed now.
 */
typedef struct {
    uint64_t     rate;
    uint64_t     burst;
} or_brake_conf_t;


/* 0: a key check may be made now; else milliseconds until one may */
or_msec_t or_brake_wait(const or_brake_conf_t *c, const or_brake_t *b,
    or_msec_t now);

/* a failed check, counted at now */
void or_brake_fail(const or_brake_conf_t *c, or_brake_t *b, or_msec_t now);

/* the bucket is empty at now: its slot may be given to another address */
int or_brake_idle(const or_brake_conf_t *c, const or_brake_t *b,
    or_msec_t now);


#endif /* _OR_BRAKE_H_INCLUDED_ */
