/*
 * Copyright (C) ngx_omniroute authors
 *
 * splitmix64 (Steele, Lea, Flood 2014; public-domain reference by
 * S. Vigna): a 64-bit counter stepped by the golden-ratio increment and
 * passed through a bijective mixer.  Every seed gives a full-period
 * sequence of 2^64 outputs.
 */


#include "or_rand.h"


#define OR_RAND_GAMMA  0x9e3779b97f4a7c15ULL


void
or_rand_seed(or_rand_t *rnd, uint64_t seed)
{
    rnd->state = seed;
}


uint64_t
or_rand_next(or_rand_t *rnd)
{
    uint64_t  z;

    rnd->state += OR_RAND_GAMMA;

    z = rnd->state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;

    return z ^ (z >> 31);
}


/*
 * A uniform integer in [0, bound); 0 when bound is 0.  Rejection sampling
 * removes the modulo bias: outputs below 2^64 mod bound are redrawn.
 */

uint32_t
or_rand_below(or_rand_t *rnd, uint32_t bound)
{
    uint64_t  r, threshold;

    if (bound == 0) {
        return 0;
    }

    threshold = (0 - (uint64_t) bound) % bound;

    for ( ;; ) {
        r = or_rand_next(rnd);

        if (r >= threshold) {
            return (uint32_t) (r % bound);
        }
    }
}
