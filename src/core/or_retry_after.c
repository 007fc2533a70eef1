/*
 * Copyright (C) ngx_omniroute authors
 *
 * Upstream retry hints (R-CD-3, R-CD-5): Retry-After and its kin.  See
 * or_retry_after.h for the contract.
 *
 * Arithmetic is done on unsigned 64-bit nanoseconds saturated at
 * OR_RETRY_MAX_MS, so no input can overflow; the result is rounded up to
 * whole milliseconds.
 */


#include <string.h>

#include "or_retry_after.h"


#define OR_RETRY_NS_PER_MS   ((uint64_t) 1000000)
#define OR_RETRY_NS_PER_S    ((uint64_t) 1000000000)
#define OR_RETRY_MAX_NS      ((uint64_t) OR_RETRY_MAX_MS * OR_RETRY_NS_PER_MS)
#define OR_RETRY_INT_SAT     ((uint64_t) 100000000000000000)  /* 1e17 */
#define OR_RETRY_FRAC_DEN    ((uint64_t) 1000000000)
#define OR_RETRY_WINDOW      128     /* bytes read after a body phrase */
#define OR_RETRY_EPOCH_S     ((uint64_t) 1000000000)          /* 2001 */
#define OR_RETRY_EPOCH_MS    ((uint64_t) 1000000000000)       /* 2001 */
#define OR_RETRY_RK_BASE     ((uint64_t) 0x100000001b3)
#define OR_RETRY_SHORT_TEXT  256     /* plain scan below this */


typedef struct {
    const char   *name;
    uint64_t      ns;
} or_retry_unit_t;


typedef struct {
    uint64_t      ip;           /* integer part, saturated */
    uint64_t      fnum;         /* fraction numerator */
    uint64_t      fden;         /* fraction denominator, power of 10 */
} or_retry_num_t;


static unsigned or_retry_lc(unsigned char c);
static int or_retry_is_digit(const char *p, const char *end);
static int or_retry_is_alpha(unsigned char c);
static int or_retry_eq_ci(const char *a, const char *b, size_t len);
static const char *or_retry_search_rk(const char *hay, size_t hlen,
    const char *needle, size_t nlen);
static void or_retry_trim(const char **pp, const char **endp);
static const char *or_retry_skip_sp(const char *p, const char *end);
static int or_retry_num(const char **pp, const char *end, or_retry_num_t *n);
static uint64_t or_retry_scale(const or_retry_num_t *n, uint64_t unit);
static uint64_t or_retry_sat_add(uint64_t a, uint64_t b);
static uint64_t or_retry_unit(const char **pp, const char *end);
static int or_retry_dur(const char **pp, const char *end, int words,
    int bare, uint64_t *ns);
static or_msec_t or_retry_ns_to_ms(uint64_t ns);
static or_msec_t or_retry_until(or_msec_t at_ms, or_msec_t now_ms);
static int or_retry_plain_number(const char *p, const char *end,
    or_retry_num_t *n);
static int or_retry_fixed(const char **pp, const char *end, int digits,
    int *out);
static int or_retry_upto(const char **pp, const char *end, int max,
    int *out);
static int or_retry_month(const char **pp, const char *end);
static int or_retry_time(const char **pp, const char *end, int *h, int *m,
    int *s);
static or_msec_t or_retry_epoch_ms(int y, int mo, int d, int h, int mi,
    int s);
static int64_t or_retry_days_from_civil(int64_t y, unsigned m, unsigned d);
static or_msec_t or_retry_scan_http_date(const char **pp, const char *end);
static or_msec_t or_retry_scan_rfc3339(const char **pp, const char *end);
static int or_retry_name_is(const or_header_t *h, const char *name);
static int or_retry_name_prefix(const or_header_t *h, const char *prefix);
static int or_retry_is_zero(const char *v, size_t len);
static int or_retry_pair_zero(const or_header_t *headers, size_t n,
    const char *pre, const char *mid, size_t mid_len, const char *suf);
static or_msec_t or_retry_max(or_msec_t a, or_msec_t b);


static const or_retry_unit_t  or_retry_units[] = {
    { "ns",           1 },
    { "nsec",         1 },
    { "us",           1000 },
    { "usec",         1000 },
    { "ms",           1000000 },
    { "msec",         1000000 },
    { "msecs",        1000000 },
    { "millisecond",  1000000 },
    { "milliseconds", 1000000 },
    { "s",            1000000000 },
    { "sec",          1000000000 },
    { "secs",         1000000000 },
    { "second",       1000000000 },
    { "seconds",      1000000000 },
    { "m",            (uint64_t) 60 * 1000000000 },
    { "min",          (uint64_t) 60 * 1000000000 },
    { "mins",         (uint64_t) 60 * 1000000000 },
    { "minute",       (uint64_t) 60 * 1000000000 },
    { "minutes",      (uint64_t) 60 * 1000000000 },
    { "h",            (uint64_t) 3600 * 1000000000 },
    { "hr",           (uint64_t) 3600 * 1000000000 },
    { "hrs",          (uint64_t) 3600 * 1000000000 },
    { "hour",         (uint64_t) 3600 * 1000000000 },
    { "hours",        (uint64_t) 3600 * 1000000000 },
    { "d",            (uint64_t) 86400 * 1000000000 },
    { "day",          (uint64_t) 86400 * 1000000000 },
    { "days",         (uint64_t) 86400 * 1000000000 },
    { "w",            (uint64_t) 7 * 86400 * 1000000000 },
    { "week",         (uint64_t) 7 * 86400 * 1000000000 },
    { "weeks",        (uint64_t) 7 * 86400 * 1000000000 },
    { NULL,           0 }
};


/* body phrases followed by a duration */
static const char  *or_retry_in_phrases[] = {
    "try again in",
    "try again after",
    "retry in",
    "retry after",
    "retrying in",
    "resets in",
    "reset in",
    "reset after",
    "available again in",
    "please wait",
    NULL
};


/* body phrases followed by an absolute date */
static const char  *or_retry_at_phrases[] = {
    "resets at",
    "reset at",
    "try again at",
    "retry at",
    "try again after",
    "available again at",
    NULL
};


static const char  *or_retry_months[] = {
    "jan", "feb", "mar", "apr", "may", "jun",
    "jul", "aug", "sep", "oct", "nov", "dec"
};


static unsigned
or_retry_lc(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') ? (unsigned) (c | 0x20) : c;
}


static int
or_retry_is_digit(const char *p, const char *end)
{
    return p < end && *p >= '0' && *p <= '9';
}


static int
or_retry_is_alpha(unsigned char c)
{
    c = (unsigned char) or_retry_lc(c);

    return c >= 'a' && c <= 'z';
}


static int
or_retry_eq_ci(const char *a, const char *b, size_t len)
{
    size_t  i;

    for (i = 0; i < len; i++) {
        if (or_retry_lc((unsigned char) a[i])
            != or_retry_lc((unsigned char) b[i]))
        {
            return 0;
        }
    }

    return 1;
}


/*
 * Rabin-Karp over case-folded bytes: linear, the fallback that bounds
 * or_memcasemem() on adversarial input.  Unsigned overflow wraps.
 */

static const char *
or_retry_search_rk(const char *hay, size_t hlen, const char *needle,
    size_t nlen)
{
    size_t    i;
    uint64_t  hn, hh, pw;

    if (hlen < nlen) {
        return NULL;
    }

    hn = 0;
    hh = 0;
    pw = 1;

    for (i = 0; i < nlen; i++) {
        hn = hn * OR_RETRY_RK_BASE + or_retry_lc((unsigned char) needle[i]);
        hh = hh * OR_RETRY_RK_BASE + or_retry_lc((unsigned char) hay[i]);

        if (i > 0) {
            pw *= OR_RETRY_RK_BASE;
        }
    }

    for (i = 0; /* void */ ; i++) {

        if (hh == hn && or_retry_eq_ci(hay + i, needle, nlen)) {
            return hay + i;
        }

        if (i + nlen >= hlen) {
            return NULL;
        }

        hh = (hh - or_retry_lc((unsigned char) hay[i]) * pw) * OR_RETRY_RK_BASE
             + or_retry_lc((unsigned char) hay[i + nlen]);
    }
}


/*
 * Short texts: a plain scan.  Long texts: Horspool on folded bytes
 * (sublinear on natural text); when its work exceeds a linear budget
 * (periodic, adversarial text) the rest is searched by Rabin-Karp, so the
 * whole search stays O(hlen + nlen).
 */

const char *
or_memcasemem(const char *hay, size_t hlen, const char *needle, size_t nlen)
{
    size_t    i, j, work, budget;
    unsigned  first, last, c;
    uint16_t  shift[256];

    if (nlen == 0) {
        return hay;
    }

    if (hay == NULL || needle == NULL || hlen < nlen) {
        return NULL;
    }

    if (nlen > 0xffff) {
        return or_retry_search_rk(hay, hlen, needle, nlen);
    }

    if (hlen < OR_RETRY_SHORT_TEXT) {
        first = or_retry_lc((unsigned char) needle[0]);

        /* nlen <= hlen < 256: at most 64 Ki steps */
        for (i = 0; i + nlen <= hlen; i++) {
            if (or_retry_lc((unsigned char) hay[i]) == first
                && or_retry_eq_ci(hay + i, needle, nlen))
            {
                return hay + i;
            }
        }

        return NULL;
    }

    for (c = 0; c < 256; c++) {
        shift[c] = (uint16_t) nlen;
    }

    for (j = 0; j + 1 < nlen; j++) {
        c = or_retry_lc((unsigned char) needle[j]);
        shift[c] = (uint16_t) (nlen - 1 - j);
    }

    last = or_retry_lc((unsigned char) needle[nlen - 1]);
    budget = 4 * hlen + nlen;
    work = 0;
    i = 0;

    while (i + nlen <= hlen) {
        c = or_retry_lc((unsigned char) hay[i + nlen - 1]);

        if (c == last) {
            for (j = 0; j + 1 < nlen; j++) {
                if (or_retry_lc((unsigned char) hay[i + j])
                    != or_retry_lc((unsigned char) needle[j]))
                {
                    break;
                }
            }

            if (j + 1 >= nlen) {
                return hay + i;
            }

            work += j;
        }

        i += shift[c];
        work++;

        if (work > budget) {
            return or_retry_search_rk(hay + i, hlen - i, needle, nlen);
        }
    }

    return NULL;
}


const or_header_t *
or_header_find(const or_header_t *headers, size_t n, const char *name,
    size_t len)
{
    size_t  i;

    if (headers == NULL || name == NULL) {
        return NULL;
    }

    for (i = 0; i < n; i++) {
        if (headers[i].name != NULL
            && headers[i].name_len == len
            && or_retry_eq_ci(headers[i].name, name, len))
        {
            return &headers[i];
        }
    }

    return NULL;
}


static void
or_retry_trim(const char **pp, const char **endp)
{
    const char  *p, *end;

    p = *pp;
    end = *endp;

    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')) {
        p++;
    }

    while (end > p
           && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'
               || end[-1] == '\n'))
    {
        end--;
    }

    *pp = p;
    *endp = end;
}


static const char *
or_retry_skip_sp(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t')) {
        p++;
    }

    return p;
}


/* digits [ "." digits ] or "." digits; saturating */

static int
or_retry_num(const char **pp, const char *end, or_retry_num_t *n)
{
    int          any;
    const char  *p;

    p = *pp;
    any = 0;

    n->ip = 0;
    n->fnum = 0;
    n->fden = 1;

    while (or_retry_is_digit(p, end)) {
        if (n->ip < OR_RETRY_INT_SAT) {
            n->ip = n->ip * 10 + (uint64_t) (*p - '0');
        }

        any = 1;
        p++;
    }

    if (p < end && *p == '.' && or_retry_is_digit(p + 1, end)) {
        p++;

        while (or_retry_is_digit(p, end)) {
            if (n->fden < OR_RETRY_FRAC_DEN) {
                n->fnum = n->fnum * 10 + (uint64_t) (*p - '0');
                n->fden *= 10;
            }

            any = 1;
            p++;
        }
    }

    if (!any) {
        return 0;
    }

    *pp = p;

    return 1;
}


static uint64_t
or_retry_sat_add(uint64_t a, uint64_t b)
{
    if (a >= OR_RETRY_MAX_NS || b >= OR_RETRY_MAX_NS - a) {
        return OR_RETRY_MAX_NS;
    }

    return a + b;
}


/* n * unit nanoseconds, saturated */

static uint64_t
or_retry_scale(const or_retry_num_t *n, uint64_t unit)
{
    uint64_t  ns, frac;

    if (unit != 0 && n->ip > OR_RETRY_MAX_NS / unit) {
        return OR_RETRY_MAX_NS;
    }

    ns = n->ip * unit;

    /* fnum < fden <= 1e9, unit % fden < 1e9: no overflow */
    frac = (unit / n->fden) * n->fnum + ((unit % n->fden) * n->fnum) / n->fden;

    return or_retry_sat_add(ns, frac);
}


/* a unit word at *pp; returns its length in ns, 0 if none */

static uint64_t
or_retry_unit(const char **pp, const char *end)
{
    char          buf[16];
    size_t        n;
    const char   *p;
    unsigned int  i;

    p = *pp;
    n = 0;

    /* "µs": U+00B5 MICRO SIGN */
    if (end - p >= 2
        && (unsigned char) p[0] == 0xc2 && (unsigned char) p[1] == 0xb5)
    {
        buf[n++] = 'u';
        p += 2;
    }

    while (p < end && or_retry_is_alpha((unsigned char) *p)) {
        if (n < sizeof(buf)) {
            buf[n] = (char) or_retry_lc((unsigned char) *p);
        }

        n++;
        p++;
    }

    if (n == 0 || n >= sizeof(buf)) {
        return 0;
    }

    for (i = 0; or_retry_units[i].name != NULL; i++) {
        if (strlen(or_retry_units[i].name) == n
            && memcmp(or_retry_units[i].name, buf, n) == 0)
        {
            *pp = p;
            return or_retry_units[i].ns;
        }
    }

    return 0;
}


/*
 * A duration at *pp: one or more "number unit" components.  words: the
 * body-text form (spaces before units, "," and "and" between components,
 * "2 minutes and 30 seconds").  bare: a lone unitless number is seconds.
 * Advances *pp past what was read; returns 0 when nothing was read.
 */

static int
or_retry_dur(const char **pp, const char *end, int words, int bare,
    uint64_t *ns)
{
    int             n;
    uint64_t        total, unit;
    const char     *p, *q;
    or_retry_num_t   num;

    p = *pp;
    total = 0;
    n = 0;

    for ( ;; ) {
        q = p;

        if (words) {
            q = or_retry_skip_sp(q, end);

            if (n > 0) {
                if (q < end && *q == ',') {
                    q = or_retry_skip_sp(q + 1, end);
                }

                if (end - q >= 4 && or_retry_eq_ci(q, "and ", 4)) {
                    q = or_retry_skip_sp(q + 4, end);
                }
            }
        }

        if (!or_retry_num(&q, end, &num)) {
            break;
        }

        if (words) {
            q = or_retry_skip_sp(q, end);
        }

        unit = or_retry_unit(&q, end);

        if (unit == 0) {
            if (bare && n == 0
                && (q == end || !or_retry_is_alpha((unsigned char) *q)))
            {
                total = or_retry_scale(&num, OR_RETRY_NS_PER_S);
                p = q;
                n = 1;
            }

            break;
        }

        total = or_retry_sat_add(total, or_retry_scale(&num, unit));
        p = q;
        n++;
    }

    if (n == 0) {
        return 0;
    }

    *pp = p;
    *ns = total;

    return 1;
}


static or_msec_t
or_retry_ns_to_ms(uint64_t ns)
{
    uint64_t  ms;

    if (ns >= OR_RETRY_MAX_NS) {
        return OR_RETRY_MAX_MS;
    }

    ms = ns / OR_RETRY_NS_PER_MS + ((ns % OR_RETRY_NS_PER_MS) ? 1 : 0);

    return (or_msec_t) ms;
}


static or_msec_t
or_retry_until(or_msec_t at_ms, or_msec_t now_ms)
{
    or_msec_t  d;

    if (at_ms == OR_MSEC_NONE) {
        return OR_MSEC_NONE;
    }

    if (now_ms < 0) {
        now_ms = 0;
    }

    /* 0 <= at_ms < 1e17 and now_ms >= 0: no overflow */
    d = at_ms - now_ms;

    if (d < 0) {
        return 0;
    }

    return d > OR_RETRY_MAX_MS ? OR_RETRY_MAX_MS : d;
}


static or_msec_t
or_retry_max(or_msec_t a, or_msec_t b)
{
    if (a == OR_MSEC_NONE) {
        return b;
    }

    if (b == OR_MSEC_NONE) {
        return a;
    }

    return a > b ? a : b;
}


or_msec_t
or_retry_duration(const char *v, size_t len)
{
    uint64_t     ns;
    const char  *p, *end;

    if (v == NULL) {
        return OR_MSEC_NONE;
    }

    p = v;
    end = v + len;
    or_retry_trim(&p, &end);

    if (!or_retry_dur(&p, end, 0, 1, &ns) || p != end) {
        return OR_MSEC_NONE;
    }

    return or_retry_ns_to_ms(ns);
}


/* the whole of [p, end) is a non-negative decimal number */

static int
or_retry_plain_number(const char *p, const char *end, or_retry_num_t *n)
{
    if (!or_retry_num(&p, end, n)) {
        return 0;
    }

    return p == end;
}


or_msec_t
or_retry_after(const char *v, size_t len, or_msec_t now_ms)
{
    uint64_t        ns;
    or_msec_t       at;
    const char     *p, *end;
    or_retry_num_t   num;

    if (v == NULL) {
        return OR_MSEC_NONE;
    }

    p = v;
    end = v + len;
    or_retry_trim(&p, &end);

    /* delta-seconds: never read as an epoch, however large */
    if (or_retry_plain_number(p, end, &num)) {
        return or_retry_ns_to_ms(or_retry_scale(&num, OR_RETRY_NS_PER_S));
    }

    at = or_retry_parse_http_date(p, end - p);

    if (at != OR_MSEC_NONE) {
        return or_retry_until(at, now_ms);
    }

    /* tolerated: a duration with a unit, "30s" */
    if (or_retry_dur(&p, end, 0, 0, &ns) && p == end) {
        return or_retry_ns_to_ms(ns);
    }

    return OR_MSEC_NONE;
}


or_msec_t
or_retry_after_ms(const char *v, size_t len)
{
    const char     *p, *end;
    or_retry_num_t   num;

    if (v == NULL) {
        return OR_MSEC_NONE;
    }

    p = v;
    end = v + len;
    or_retry_trim(&p, &end);

    if (!or_retry_plain_number(p, end, &num)) {
        return OR_MSEC_NONE;
    }

    return or_retry_ns_to_ms(or_retry_scale(&num, OR_RETRY_NS_PER_MS));
}


or_msec_t
or_retry_reset(const char *v, size_t len, or_msec_t now_ms)
{
    uint64_t        ns;
    or_msec_t       at;
    const char     *p, *end, *q;
    or_retry_num_t   num;

    if (v == NULL) {
        return OR_MSEC_NONE;
    }

    p = v;
    end = v + len;
    or_retry_trim(&p, &end);

    if (or_retry_plain_number(p, end, &num)) {

        if (num.ip >= OR_RETRY_EPOCH_MS) {
            /* epoch milliseconds; ip < 1e17 fits in or_msec_t */
            return or_retry_until((or_msec_t) num.ip, now_ms);
        }

        if (num.ip >= OR_RETRY_EPOCH_S) {
            at = (or_msec_t) num.ip * 1000
                 + (or_msec_t) (num.fnum * 1000 / num.fden);
            return or_retry_until(at, now_ms);
        }

        return or_retry_ns_to_ms(or_retry_scale(&num, OR_RETRY_NS_PER_S));
    }

    q = p;

    if (or_retry_dur(&q, end, 0, 0, &ns) && q == end) {
        return or_retry_ns_to_ms(ns);
    }

    at = or_retry_parse_rfc3339(p, end - p);

    if (at == OR_MSEC_NONE) {
        at = or_retry_parse_http_date(p, end - p);
    }

    return or_retry_until(at, now_ms);
}


/* exactly digits digits */

static int
or_retry_fixed(const char **pp, const char *end, int digits, int *out)
{
    int          v, i;
    const char  *p;

    p = *pp;
    v = 0;

    for (i = 0; i < digits; i++) {
        if (!or_retry_is_digit(p, end)) {
            return 0;
        }

        v = v * 10 + (*p++ - '0');
    }

    *pp = p;
    *out = v;

    return 1;
}


/* 1 to max digits; returns the count */

static int
or_retry_upto(const char **pp, const char *end, int max, int *out)
{
    int          v, n;
    const char  *p;

    p = *pp;
    v = 0;
    n = 0;

    while (n < max && or_retry_is_digit(p, end)) {
        v = v * 10 + (*p++ - '0');
        n++;
    }

    if (n == 0 || or_retry_is_digit(p, end)) {
        return 0;
    }

    *pp = p;
    *out = v;

    return n;
}


/* a three-letter month name, 1..12, or 0 */

static int
or_retry_month(const char **pp, const char *end)
{
    int  i;

    if (end - *pp < 3) {
        return 0;
    }

    for (i = 0; i < 12; i++) {
        if (or_retry_eq_ci(*pp, or_retry_months[i], 3)) {
            *pp += 3;
            return i + 1;
        }
    }

    return 0;
}


static int
or_retry_time(const char **pp, const char *end, int *h, int *m, int *s)
{
    const char  *p;

    p = *pp;

    if (!or_retry_fixed(&p, end, 2, h)
        || p >= end || *p++ != ':'
        || !or_retry_fixed(&p, end, 2, m)
        || p >= end || *p++ != ':'
        || !or_retry_fixed(&p, end, 2, s))
    {
        return 0;
    }

    *pp = p;

    return 1;
}


static int64_t
or_retry_days_from_civil(int64_t y, unsigned m, unsigned d)
{
    int64_t   era;
    unsigned  yoe, doy, doe;

    /* Howard Hinnant's days_from_civil, y >= 0 here */
    y -= m <= 2;
    era = y / 400;
    yoe = (unsigned) (y - era * 400);
    doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;

    return era * 146097 + (int64_t) doe - 719468;
}


/* validated calendar fields -> epoch milliseconds, or OR_MSEC_NONE */

static or_msec_t
or_retry_epoch_ms(int y, int mo, int d, int h, int mi, int s)
{
    int                   mdays;
    int64_t               days;
    static const uint8_t  dim[12] = {
        31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31
    };

    if (y < 1970 || y > 9999 || mo < 1 || mo > 12 || d < 1
        || h > 23 || mi > 59 || s > 60)
    {
        return OR_MSEC_NONE;
    }

    mdays = dim[mo - 1];

    if (mo == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0)) {
        mdays = 29;
    }

    if (d > mdays) {
        return OR_MSEC_NONE;
    }

    days = or_retry_days_from_civil(y, (unsigned) mo, (unsigned) d);

    return (or_msec_t) ((days * 86400 + h * 3600 + mi * 60 + s) * 1000);
}


/*
 * IMF-fixdate  "Sun, 06 Nov 1994 08:49:37 GMT"
 * RFC 850      "Sunday, 06-Nov-94 08:49:37 GMT" (yy < 70: 20yy, else 19yy)
 * asctime      "Sun Nov  6 08:49:37 1994"
 * The weekday is optional and not checked; the zone, when present, must
 * be GMT or UTC.  Advances *pp past the date.
 */

static or_msec_t
or_retry_scan_http_date(const char **pp, const char *end)
{
    int          d, mo, y, h, mi, s, n;
    const char  *p, *q;

    p = or_retry_skip_sp(*pp, end);
    q = p;

    /* the weekday, when present, ends with "," or " " */
    while (p < end && or_retry_is_alpha((unsigned char) *p)) {
        p++;
    }

    if (p > q) {
        if (p < end && *p == ',') {
            p++;
        }

        if (p >= end || *p != ' ') {
            return OR_MSEC_NONE;
        }
    }

    p = or_retry_skip_sp(p, end);

    if (or_retry_is_digit(p, end)) {

        if (!or_retry_upto(&p, end, 2, &d)
            || p >= end || (*p != ' ' && *p != '-'))
        {
            return OR_MSEC_NONE;
        }

        p++;
        mo = or_retry_month(&p, end);

        if (mo == 0 || p >= end || (*p != ' ' && *p != '-')) {
            return OR_MSEC_NONE;
        }

        p++;
        n = or_retry_upto(&p, end, 4, &y);

        if (n == 2) {
            y += y < 70 ? 2000 : 1900;

        } else if (n != 4) {
            return OR_MSEC_NONE;
        }

        if (p >= end || *p != ' ') {
            return OR_MSEC_NONE;
        }

        p = or_retry_skip_sp(p, end);

        if (!or_retry_time(&p, end, &h, &mi, &s)) {
            return OR_MSEC_NONE;
        }

        q = or_retry_skip_sp(p, end);

        if (end - q >= 3
            && (or_retry_eq_ci(q, "GMT", 3) || or_retry_eq_ci(q, "UTC", 3)))
        {
            p = q + 3;
        }

    } else {
        /* asctime: the weekday was read, the month follows */
        mo = or_retry_month(&p, end);

        if (mo == 0 || p >= end || *p != ' ') {
            return OR_MSEC_NONE;
        }

        p = or_retry_skip_sp(p, end);

        if (!or_retry_upto(&p, end, 2, &d) || p >= end || *p != ' ') {
            return OR_MSEC_NONE;
        }

        p++;

        if (!or_retry_time(&p, end, &h, &mi, &s)
            || p >= end || *p != ' ')
        {
            return OR_MSEC_NONE;
        }

        p = or_retry_skip_sp(p, end);

        if (or_retry_upto(&p, end, 4, &y) != 4) {
            return OR_MSEC_NONE;
        }
    }

    *pp = p;

    return or_retry_epoch_ms(y, mo, d, h, mi, s);
}


or_msec_t
or_retry_parse_http_date(const char *v, size_t len)
{
    or_msec_t    at;
    const char  *p, *end;

    if (v == NULL) {
        return OR_MSEC_NONE;
    }

    p = v;
    end = v + len;
    or_retry_trim(&p, &end);

    at = or_retry_scan_http_date(&p, end);

    return p == end ? at : OR_MSEC_NONE;
}


/*
 * "2025-01-02T03:04:05Z", "2025-01-02t03:04:05.123+02:00",
 * "2025-01-02 03:04:05Z"; no zone means UTC.  Advances *pp.
 */

static or_msec_t
or_retry_scan_rfc3339(const char **pp, const char *end)
{
    int          y, mo, d, h, mi, s, oh, om, ms, sign, n;
    or_msec_t    at, off;
    const char  *p;

    p = *pp;

    if (!or_retry_fixed(&p, end, 4, &y) || p >= end || *p++ != '-'
        || !or_retry_fixed(&p, end, 2, &mo) || p >= end || *p++ != '-'
        || !or_retry_fixed(&p, end, 2, &d) || p >= end
        || (*p != 'T' && *p != 't' && *p != ' '))
    {
        return OR_MSEC_NONE;
    }

    p++;

    if (!or_retry_time(&p, end, &h, &mi, &s)) {
        return OR_MSEC_NONE;
    }

    ms = 0;

    if (p < end && *p == '.') {
        p++;
        n = 0;

        if (!or_retry_is_digit(p, end)) {
            return OR_MSEC_NONE;
        }

        while (or_retry_is_digit(p, end)) {
            if (n < 3) {
                ms = ms * 10 + (*p - '0');
                n++;
            }

            p++;
        }

        while (n++ < 3) {
            ms *= 10;
        }
    }

    off = 0;

    if (p < end && (*p == 'Z' || *p == 'z')) {
        p++;

    } else if (p < end && (*p == '+' || *p == '-')) {
        sign = *p++ == '-' ? -1 : 1;

        if (!or_retry_fixed(&p, end, 2, &oh) || p >= end || *p++ != ':'
            || !or_retry_fixed(&p, end, 2, &om) || oh > 23 || om > 59)
        {
            return OR_MSEC_NONE;
        }

        off = (or_msec_t) sign * (oh * 3600 + om * 60) * 1000;
    }

    at = or_retry_epoch_ms(y, mo, d, h, mi, s);

    if (at == OR_MSEC_NONE) {
        return OR_MSEC_NONE;
    }

    at = at + ms - off;

    if (at < 0) {
        at = 0;
    }

    *pp = p;

    return at;
}


or_msec_t
or_retry_parse_rfc3339(const char *v, size_t len)
{
    or_msec_t    at;
    const char  *p, *end;

    if (v == NULL) {
        return OR_MSEC_NONE;
    }

    p = v;
    end = v + len;
    or_retry_trim(&p, &end);

    at = or_retry_scan_rfc3339(&p, end);

    return p == end ? at : OR_MSEC_NONE;
}


or_msec_t
or_retry_body_text(const char *body, size_t len, or_msec_t now_ms)
{
    size_t        plen;
    uint64_t      ns;
    or_msec_t     best, at;
    const char   *end, *hit, *p, *wend, *from;
    unsigned int  i;

    if (body == NULL) {
        return OR_MSEC_NONE;
    }

    best = OR_MSEC_NONE;
    end = body + len;

    for (i = 0; or_retry_in_phrases[i] != NULL; i++) {
        plen = strlen(or_retry_in_phrases[i]);
        from = body;

        for ( ;; ) {
            hit = or_memcasemem(from, end - from, or_retry_in_phrases[i],
                                plen);
            if (hit == NULL) {
                break;
            }

            p = hit + plen;
            from = p;
            wend = (end - p > OR_RETRY_WINDOW) ? p + OR_RETRY_WINDOW : end;

            p = or_retry_skip_sp(p, wend);

            if (p < wend && *p == ':') {
                p++;
            }

            if (or_retry_dur(&p, wend, 1, 0, &ns)) {
                best = or_retry_max(best, or_retry_ns_to_ms(ns));
            }
        }
    }

    for (i = 0; or_retry_at_phrases[i] != NULL; i++) {
        plen = strlen(or_retry_at_phrases[i]);
        from = body;

        for ( ;; ) {
            hit = or_memcasemem(from, end - from, or_retry_at_phrases[i],
                                plen);
            if (hit == NULL) {
                break;
            }

            p = hit + plen;
            from = p;
            wend = (end - p > OR_RETRY_WINDOW) ? p + OR_RETRY_WINDOW : end;

            p = or_retry_skip_sp(p, wend);

            at = or_retry_scan_rfc3339(&p, wend);

            if (at == OR_MSEC_NONE) {
                at = or_retry_scan_http_date(&p, wend);
            }

            best = or_retry_max(best, or_retry_until(at, now_ms));
        }
    }

    return best;
}


or_msec_t
or_retry_retry_delay(const char *body, size_t len)
{
    uint64_t     ns;
    or_msec_t    best;
    const char  *end, *hit, *p, *from, *wend;

    if (body == NULL) {
        return OR_MSEC_NONE;
    }

    best = OR_MSEC_NONE;
    end = body + len;
    from = body;

    for ( ;; ) {
        hit = or_memcasemem(from, end - from, "retryDelay", 10);
        if (hit == NULL) {
            break;
        }

        p = hit + 10;
        from = p;
        wend = (end - p > OR_RETRY_WINDOW) ? p + OR_RETRY_WINDOW : end;

        /* "retryDelay": "86399s", also \"retryDelay\":\"86399s\" */

        if (p < wend && *p == '\\') {
            p++;
        }

        if (p < wend && *p == '"') {
            p++;
        }

        while (p < wend && (*p == ' ' || *p == '\t' || *p == '\r'
                            || *p == '\n'))
        {
            p++;
        }

        if (p >= wend || *p != ':') {
            continue;
        }

        p++;

        while (p < wend && (*p == ' ' || *p == '\t' || *p == '\r'
                            || *p == '\n'))
        {
            p++;
        }

        if (p < wend && *p == '\\') {
            p++;
        }

        if (p < wend && *p == '"') {
            p++;
        }

        if (or_retry_dur(&p, wend, 0, 1, &ns)) {
            best = or_retry_max(best, or_retry_ns_to_ms(ns));
        }
    }

    return best;
}


or_msec_t
or_retry_body(const char *body, size_t len, or_msec_t now_ms)
{
    return or_retry_max(or_retry_retry_delay(body, len),
                        or_retry_body_text(body, len, now_ms));
}


static int
or_retry_name_is(const or_header_t *h, const char *name)
{
    size_t  len;

    len = strlen(name);

    return h->name_len == len && or_retry_eq_ci(h->name, name, len);
}


static int
or_retry_name_prefix(const or_header_t *h, const char *prefix)
{
    size_t  len;

    len = strlen(prefix);

    return h->name_len >= len && or_retry_eq_ci(h->name, prefix, len);
}


/* "0", "00", "0.0" */

static int
or_retry_is_zero(const char *v, size_t len)
{
    int          any;
    const char  *p, *end;

    if (v == NULL) {
        return 0;
    }

    p = v;
    end = v + len;
    or_retry_trim(&p, &end);
    any = 0;

    for ( /* void */ ; p < end; p++) {
        if (*p == '0') {
            any = 1;

        } else if (*p != '.') {
            return 0;
        }
    }

    return any;
}


/* a header named pre + mid + suf whose value is zero exists */

static int
or_retry_pair_zero(const or_header_t *headers, size_t n, const char *pre,
    const char *mid, size_t mid_len, const char *suf)
{
    size_t              i, plen, slen;
    const or_header_t  *h;

    plen = strlen(pre);
    slen = strlen(suf);

    for (i = 0; i < n; i++) {
        h = &headers[i];

        if (h->name == NULL
            || h->name_len != plen + mid_len + slen
            || !or_retry_eq_ci(h->name, pre, plen)
            || !or_retry_eq_ci(h->name + plen, mid, mid_len)
            || !or_retry_eq_ci(h->name + plen + mid_len, suf, slen))
        {
            continue;
        }

        if (or_retry_is_zero(h->value, h->value_len)) {
            return 1;
        }
    }

    return 0;
}


or_msec_t
or_retry_headers(const or_header_t *headers, size_t n, or_msec_t now_ms)
{
    int                 exhausted;
    size_t              i;
    or_msec_t           ra, ra_ms, hint, all, hot;
    const or_header_t  *h;

    if (headers == NULL) {
        return OR_MSEC_NONE;
    }

    ra = OR_MSEC_NONE;
    ra_ms = OR_MSEC_NONE;
    all = OR_MSEC_NONE;
    hot = OR_MSEC_NONE;

    for (i = 0; i < n; i++) {
        h = &headers[i];

        if (h->name == NULL || h->value == NULL) {
            continue;
        }

        if (or_retry_name_is(h, "retry-after")) {
            ra = or_retry_max(ra, or_retry_after(h->value, h->value_len,
                                                 now_ms));
            continue;
        }

        if (or_retry_name_is(h, "retry-after-ms")) {
            ra_ms = or_retry_max(ra_ms, or_retry_after_ms(h->value,
                                                          h->value_len));
            continue;
        }

        if (or_retry_name_prefix(h, "x-ratelimit-reset")) {
            exhausted = or_retry_pair_zero(headers, n, "x-ratelimit-remaining",
                                           h->name + 17, h->name_len - 17, "");

        } else if (or_retry_name_is(h, "ratelimit-reset")) {
            exhausted = or_retry_pair_zero(headers, n, "ratelimit-remaining",
                                           "", 0, "");

        } else if (h->name_len > 26
                   && or_retry_name_prefix(h, "anthropic-ratelimit-")
                   && or_retry_eq_ci(h->name + h->name_len - 6, "-reset", 6))
        {
            exhausted = or_retry_pair_zero(headers, n, "anthropic-ratelimit-",
                                           h->name + 20, h->name_len - 26,
                                           "-remaining");

        } else {
            continue;
        }

        hint = or_retry_reset(h->value, h->value_len, now_ms);

        all = or_retry_max(all, hint);

        if (exhausted) {
            hot = or_retry_max(hot, hint);
        }
    }

    if (ra_ms != OR_MSEC_NONE) {
        ra = ra_ms;
    }

    if (ra != OR_MSEC_NONE) {
        return or_retry_max(ra, hot);
    }

    return hot != OR_MSEC_NONE ? hot : all;
}


or_msec_t
or_retry_best(const or_header_t *headers, size_t n, const char *body,
    size_t len, or_msec_t now_ms)
{
    return or_retry_max(or_retry_headers(headers, n, now_ms),
                        or_retry_body(body, len, now_ms));
}


int64_t
or_retry_after_seconds(or_msec_t ms)
{
    if (ms <= 0 || ms == OR_MSEC_NONE) {
        return 1;
    }

    if (ms >= OR_RETRY_AFTER_MAX_S * 1000) {
        return OR_RETRY_AFTER_MAX_S;
    }

    return (ms + 999) / 1000;
}


or_msec_t
or_retry_after_answer(int status, int restated_s, or_msec_t hint_ms,
    or_msec_t cooled_ms)
{
    or_msec_t  ms;

    ms = OR_MSEC_NONE;

    if (restated_s >= 0) {
        ms = (or_msec_t) restated_s * 1000;

    } else if (hint_ms != OR_MSEC_NONE && hint_ms > 0) {
        ms = hint_ms;
    }

    if (status != 429 && status != 503) {
        return ms;
    }

    /* the longest of the three */

    if (hint_ms != OR_MSEC_NONE && hint_ms > 0
        && (ms == OR_MSEC_NONE || hint_ms > ms))
    {
        ms = hint_ms;
    }

    if (cooled_ms != OR_MSEC_NONE && cooled_ms > 0
        && (ms == OR_MSEC_NONE || cooled_ms > ms))
    {
        ms = cooled_ms;
    }

    return ms;
}
