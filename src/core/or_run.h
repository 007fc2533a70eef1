
/*
 * Copyright (C) ngx_omniroute authors
 *
 * The plain bytes of a JSON string's text, the run the readers of answers
 * and events skip at once: from p to the next '"' or '\\' (or last), 16
 * bytes at a time where SSE2 is (every x86-64).  Inline: it is what those
 * readers do most.  The body scanner has its own (it refuses control
 * bytes too, and goes wider on long runs).
 */

#ifndef _OR_RUN_H_INCLUDED_
#define _OR_RUN_H_INCLUDED_


#if (defined(__x86_64__) || defined(__SSE2__)) && defined(__GNUC__)
#include <emmintrin.h>
#define OR_RUN_SSE2  1
#else
#define OR_RUN_SSE2  0
#endif


/* eol: stop at LF and CR too (a constant: the compiler keeps one loop) */

static inline const char *
or_run_until(const char *p, const char *last, int eol)
{
#if (OR_RUN_SSE2)
    unsigned  m;
    __m128i   v, hit;

    while (last - p >= 16) {
        v = _mm_loadu_si128((const __m128i *) p);
        hit = _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')),
                           _mm_cmpeq_epi8(v, _mm_set1_epi8('\\')));

        if (eol) {
            hit = _mm_or_si128(hit,
                      _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('\n')),
                                   _mm_cmpeq_epi8(v, _mm_set1_epi8('\r'))));
        }

        m = (unsigned) _mm_movemask_epi8(hit);

        if (m) {
            return p + __builtin_ctz(m);
        }

        p += 16;
    }
#endif

    while (p < last && *p != '"' && *p != '\\'
           && !(eol && (*p == '\n' || *p == '\r')))
    {
        p++;
    }

    return p;
}


static inline const char *
or_run_plain(const char *p, const char *last)
{
    return or_run_until(p, last, 0);
}


/*
 * The same run within one line of a stream's event: up to the next '"',
 * '\\', LF or CR (or last).
 */

static inline const char *
or_run_line_text(const char *p, const char *last)
{
    return or_run_until(p, last, 1);
}


#endif /* _OR_RUN_H_INCLUDED_ */
