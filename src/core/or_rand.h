/*
 * Copyright (C) ngx_omniroute authors
 *
 * A tiny seeded pseudo-random generator (splitmix64) for the routing
 * strategies: deterministic given a seed, so tests can pin exact orders.
 * The state is one plain 64-bit word (fits in shared memory, no pointers).
 * Not for secrets: lease tokens use the CSPRNG (R-LEASE-2).
 */

#ifndef _OR_RAND_H_INCLUDED_
#define _OR_RAND_H_INCLUDED_


#include <stdint.h>


typedef struct {
    uint64_t  state;
} or_rand_t;


void or_rand_seed(or_rand_t *rnd, uint64_t seed);
uint64_t or_rand_next(or_rand_t *rnd);
uint32_t or_rand_below(or_rand_t *rnd, uint32_t bound);


#endif /* _OR_RAND_H_INCLUDED_ */
