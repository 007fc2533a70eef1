/*
 * Copyright (C) ngx_omniroute authors
 */


#include <stdint.h>
#include <string.h>

#include "or_json.h"

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#include <immintrin.h>
#define OR_JSON_X86  1
#else
#define OR_JSON_X86  0
#endif


/* the longest escaped spelling of a key we compare: all \uXXXX */
#define OR_JSON_KEY_MAX     (2 + 6 * OR_JSON_FIND_MAX)

#define OR_JSON_ONES        0x0101010101010101ULL
#define OR_JSON_HIGH        0x8080808080808080ULL

#define OR_JSON_END         "unexpected end of input"
#define OR_JSON_UNTERM      or_json_unterm
#define OR_JSON_BAD_UTF8    or_json_bad_utf8

#define or_json_min(a, b)  ((a) < (b) ? (a) : (b))

/* or_json_ws() (or_json.h) over the scanner's unsigned bytes */
#define or_json_uws(p, last)                                                 \
    ((const unsigned char *) or_json_ws((const char *) (p),                   \
                                        (const char *) (last)))


typedef enum {
    OR_JSON_M_NONE = 0,
    OR_JSON_M_MODEL,
    OR_JSON_M_STREAM,
    OR_JSON_M_STREAM_OPTIONS,
    OR_JSON_M_BACKGROUND,
    OR_JSON_M_TOOLS,
    OR_JSON_M_FIND,
    OR_JSON_M_VARIANT           /* one of them but for case */
} or_json_member_e;


/* the one key or_json_find() looks for */
typedef struct {
    const char        *key;
    size_t             len;
    or_json_value_t   *out;
} or_json_find_t;


typedef struct {
    const char        *name;
    size_t             len;
    size_t             fold;    /* the most bytes a case variant adds: 1
                                   per 's' and 'i', 2 per 'k' */
} or_json_name_t;


static int or_json_word_special(uint64_t w);
static inline const unsigned char *or_json_string(const unsigned char *p,
    const unsigned char *last, unsigned *escaped, const char **err);
static const unsigned char *or_json_utf8(const unsigned char *p,
    const unsigned char *last, const char **err);
static size_t or_json_utf8_check(const unsigned char *buf, size_t len,
    size_t *lead, const char **err);
static const unsigned char *or_json_string_utf8(const unsigned char *hi,
    const unsigned char *at, const unsigned char *last, const char **err);
static or_json_rc_e or_json_check(const char *buf, size_t len,
    or_json_scan_t *out, or_json_find_t *find);
static or_json_rc_e or_json_scan_text(const char *buf, size_t len,
    or_json_scan_t *out, or_json_find_t *find);
static const unsigned char *or_json_number(const unsigned char *p,
    const unsigned char *last, const char **err);
static const unsigned char *or_json_literal(const unsigned char *p,
    const unsigned char *last, const char *lit, size_t n, const char **err);
static or_json_member_e or_json_member(const unsigned char *key, size_t len,
    unsigned escaped, or_json_find_t *find);
static or_json_member_e or_json_member_variant(const char *k, size_t len);
static int or_json_member_fold(const char *k, size_t len, size_t m);
static int or_json_fold_eq(const char *k, size_t klen, const char *name,
    size_t nlen);
static or_json_type_e or_json_type_of(unsigned char c);
static int or_json_hex4(const unsigned char *p, uint32_t *cp);


/*
 * 1: a byte that stands for itself inside a string: 0x20-0xff but '"'
 * and '\\' (the UTF-8 of a string is checked from its first byte >= 0x80
 * on, when it ends: or_json_string_utf8())
 */
static const unsigned char  or_json_plain[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1
};


/* the short escape of a control character, or 0 for \u00XX */
static const char  or_json_short[32] = {
    0, 0, 0, 0, 0, 0, 0, 0, 'b', 't', 'n', 0, 'f', 'r', 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
};


static const char  or_json_hexdigits[] = "0123456789abcdef";

static const char  or_json_bad_utf8[] = "invalid UTF-8";
static const char  or_json_unterm[] = "unterminated string";


/* the top-level members or_json_scan() reports, by or_json_member_e */
static const or_json_name_t  or_json_names[] = {
    { NULL, 0, 0 },
    { "model", 5, 0 },
    { "stream", 6, 1 },
    { "stream_options", 14, 3 },
    { "background", 10, 2 },
    { "tools", 5, 1 }
};


static const char  *or_json_rc_names[] = {
    "ok", "empty", "syntax", "not_object", "dup_model", "too_deep",
    "case_variant"
};


static const char  *or_json_type_names[] = {
    "absent", "string", "number", "true", "false", "null", "object", "array"
};


/*
 * Whether any of 8 bytes is '"', '\\' or < 0x20 (SWAR: exact as a yes/no
 * answer, whatever the byte order).
 */

static int
or_json_word_special(uint64_t w)
{
    uint64_t  q, b, t;

    q = w ^ (OR_JSON_ONES * '"');
    b = w ^ (OR_JSON_ONES * '\\');

    t = ((q - OR_JSON_ONES) & ~q)
        | ((b - OR_JSON_ONES) & ~b)
        | ((w - OR_JSON_ONES * 0x20) & ~w);

    return (t & OR_JSON_HIGH) != 0;
}


/*
 * Plain string bytes (not '"', '\\' nor < 0x20): the long runs of text
 * in agent bodies.  On x86 16 bytes at a time inline (SSE2 is in every
 * x86-64), and a run longer than that goes on 32 or 64 bytes at a time
 * by what the processor has (asked once).  An unsigned minimum finds the
 * control bytes: min(v, 0x1f) == v for v < 0x20.
 */

#if (OR_JSON_X86)

static inline unsigned
or_json_special16(const unsigned char *p)
{
    __m128i  v;

    v = _mm_loadu_si128((const __m128i *) p);

    return (unsigned) _mm_movemask_epi8(
               _mm_or_si128(
                   _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')),
                                _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))),
                   _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1f)), v)));
}


__attribute__((target("avx512bw")))
static size_t
or_json_plain_run_avx512(const unsigned char *p, size_t n,
    const unsigned char **hi)
{
    size_t     i;
    __m512i    v, quote, bslash, space;
    uint64_t   m;

    quote = _mm512_set1_epi8('"');
    bslash = _mm512_set1_epi8('\\');
    space = _mm512_set1_epi8(0x20);

    for (i = 0; i + 64 <= n; i += 64) {
        v = _mm512_loadu_si512((const void *) (p + i));
        m = _mm512_cmpeq_epi8_mask(v, quote)
            | _mm512_cmpeq_epi8_mask(v, bslash)
            | _mm512_cmplt_epu8_mask(v, space);

        if (*hi == NULL && _mm512_movepi8_mask(v)) {
            *hi = p + i;
        }

        if (m) {
            return i + (size_t) __builtin_ctzll(m);
        }
    }

    return i;
}


__attribute__((target("avx2")))
static size_t
or_json_plain_run_avx2(const unsigned char *p, size_t n,
    const unsigned char **hi)
{
    size_t     i;
    unsigned   m;
    __m256i    v, quote, bslash, ctl;

    quote = _mm256_set1_epi8('"');
    bslash = _mm256_set1_epi8('\\');
    ctl = _mm256_set1_epi8(0x1f);

    for (i = 0; i + 32 <= n; i += 32) {
        v = _mm256_loadu_si256((const __m256i *) (p + i));
        m = (unsigned) _mm256_movemask_epi8(
                _mm256_or_si256(
                    _mm256_or_si256(_mm256_cmpeq_epi8(v, quote),
                                    _mm256_cmpeq_epi8(v, bslash)),
                    _mm256_cmpeq_epi8(_mm256_min_epu8(v, ctl), v)));

        if (*hi == NULL && _mm256_movemask_epi8(v)) {
            *hi = p + i;
        }

        if (m) {
            return i + (size_t) __builtin_ctz(m);
        }
    }

    return i;
}


static size_t
or_json_plain_run_sse2(const unsigned char *p, size_t n,
    const unsigned char **hi)
{
    size_t    i;
    unsigned  m;

    for (i = 0; i + 16 <= n; i += 16) {
        m = or_json_special16(p + i);

        if (*hi == NULL
            && _mm_movemask_epi8(_mm_loadu_si128((const __m128i *) (p + i))))
        {
            *hi = p + i;
        }

        if (m) {
            return i + (size_t) __builtin_ctz(m);
        }
    }

    return i;
}


static size_t or_json_plain_run_first(const unsigned char *p, size_t n,
    const unsigned char **hi);

static size_t (*or_json_plain_run)(const unsigned char *p, size_t n,
    const unsigned char **hi) = or_json_plain_run_first;


static size_t
or_json_plain_run_first(const unsigned char *p, size_t n,
    const unsigned char **hi)
{
    __builtin_cpu_init();

    if (__builtin_cpu_supports("avx512bw")) {
        or_json_plain_run = or_json_plain_run_avx512;

    } else if (__builtin_cpu_supports("avx2")) {
        or_json_plain_run = or_json_plain_run_avx2;

    } else {
        or_json_plain_run = or_json_plain_run_sse2;
    }

    return or_json_plain_run(p, n, hi);
}

#endif


/*
 * A string's body, p just after the opening quote.  Returns the byte
 * after the closing quote, or, with *err set, where it went wrong.  The
 * string's UTF-8 is checked as it ends, from hi on: the start of the
 * first block that held a byte >= 0x80 (everything before it is ASCII).
 */

static inline __attribute__((always_inline)) const unsigned char *
or_json_string(const unsigned char *p, const unsigned char *last,
    unsigned *escaped, const char **err)
{
    int                   i;
    uint64_t              w;
    unsigned              esc;
    unsigned char         c;
    const unsigned char  *hi;
#if (OR_JSON_X86)
    unsigned              m;
    __m128i               v;
#endif

    esc = 0;
    hi = NULL;

    for ( ;; ) {

#if (OR_JSON_X86)

        while (last - p >= 16) {
            v = _mm_loadu_si128((const __m128i *) p);
            m = (unsigned) _mm_movemask_epi8(
                    _mm_or_si128(
                        _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')),
                                     _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))),
                        _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1f)),
                                       v)));

            if (hi == NULL && _mm_movemask_epi8(v)) {
                hi = p;
            }

            if (m) {
                p += __builtin_ctz(m);
                goto special;
            }

            p += 16;

            if (last - p >= 64) {
                /* a long run: wider, if the processor can */
                p += or_json_plain_run(p, (size_t) (last - p), &hi);
            }
        }

#endif

        while (last - p >= 8) {
            memcpy(&w, p, 8);

            if (or_json_word_special(w)) {
                break;
            }

            if (hi == NULL && (w & OR_JSON_HIGH)) {
                hi = p;
            }

            p += 8;
        }

        /* at most 7 plain bytes before a special one, or to the end */

        while (p < last && or_json_plain[*p]) {
            if (hi == NULL && *p >= 0x80) {
                hi = p;
            }

            p++;
        }

        if (p == last) {
            *err = OR_JSON_UNTERM;
            goto failed;
        }

#if (OR_JSON_X86)
    special:
#endif

        c = *p;

        if (c == '"') {
            *escaped = esc;

            if (hi != NULL) {
                /* the closing quote too: a sequence it cuts is invalid */
                return or_json_string_utf8(hi, p + 1, p + 1, err);
            }

            return p + 1;
        }

        if (c == '\\') {
            esc = 1;

            if (++p == last) {
                *err = OR_JSON_UNTERM;
                goto failed;
            }

            switch (*p) {

            case '"':
            case '\\':
            case '/':
            case 'b':
            case 'f':
            case 'n':
            case 'r':
            case 't':
                p++;
                continue;

            case 'u':
                p++;

                for (i = 0; i < 4; i++, p++) {
                    if (p == last) {
                        *err = OR_JSON_UNTERM;
                        goto failed;
                    }

                    if (!((*p >= '0' && *p <= '9')
                          || ((*p | 0x20) >= 'a' && (*p | 0x20) <= 'f')))
                    {
                        *err = "invalid escape";
                        goto failed;
                    }
                }

                continue;

            default:
                *err = "invalid escape";
                goto failed;
            }
        }

        /* c < 0x20 */

        *err = "control character in string";
        goto failed;
    }

failed:

    if (hi == NULL) {
        /* ASCII before p: no UTF-8 error can come first */
        return p;
    }

    return or_json_string_utf8(hi, p, (last - p > 3) ? p + 3 : last, err);
}


/*
 * The UTF-8 of a string from hi, where the structure ended at "at": at
 * the byte after the closing quote, *err NULL; or at a structural error
 * (*err set), the bytes up to "last" looked at as well, so that a
 * sequence the error cuts is seen whole.  Returns "at", or with *err
 * the UTF-8 error's message where that error comes first: before "at",
 * or at it as the continuation of a sequence begun before (at the very
 * byte the structure refused a lead byte, or at the end of input, the
 * structural error stands).
 */

static const unsigned char *
or_json_string_utf8(const unsigned char *hi, const unsigned char *at,
    const unsigned char *last, const char **err)
{
    size_t        bad, lead;
    const char   *uerr;

    uerr = NULL;
    bad = or_json_utf8_check(hi, (size_t) (last - hi), &lead, &uerr);

    if (uerr == NULL) {
        return at;
    }

    if (*err == NULL) {
        /* a complete string: its bytes end with its closing quote */
        *err = uerr;
        return hi + bad;
    }

    if (hi + bad < at
        || (hi + bad == at && lead != bad && *err != OR_JSON_UNTERM))
    {
        *err = uerr;
        return hi + bad;
    }

    return at;
}


#if (OR_JSON_X86)

/*
 * Whether buf[0, len) is valid UTF-8, 32 bytes at a time (AVX2): the
 * lookup algorithm of Keiser and Lemire ("Validating UTF-8 in less than
 * one instruction per byte", 2021).  Three 16-entry tables, indexed by
 * the high and low nibble of each byte's predecessor and the high nibble
 * of the byte, each give the error classes that pair of nibbles allows;
 * a byte pair is wrong when all three agree.  Bytes that must be the
 * third or fourth of a sequence are then checked to be continuations.
 * ASCII blocks only check that no sequence was left open before them.
 */

#define OR_U8_TOO_SHORT     0x01    /* 11______ 0_______, 11______ 11______ */
#define OR_U8_TOO_LONG      0x02    /* 0_______ 10______ */
#define OR_U8_OVERLONG_3    0x04    /* 11100000 100_____ */
#define OR_U8_TOO_LARGE     0x08    /* 11110100 1001____, ... */
#define OR_U8_SURROGATE     0x10    /* 11101101 101_____ */
#define OR_U8_OVERLONG_2    0x20    /* 1100000_ 10______ */
#define OR_U8_TOO_LARGE_1000  0x40  /* 11110101 1000____, ... */
#define OR_U8_OVERLONG_4    0x40    /* 11110000 1000____ */
#define OR_U8_TWO_CONTS     0x80    /* 10______ 10______ */
#define OR_U8_CARRY  (OR_U8_TOO_SHORT | OR_U8_TOO_LONG | OR_U8_TWO_CONTS)

#define or_u8_table(a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p)          \
    or_u8_set(a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p,                 \
              a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p)

#define or_u8_set(...)  or_u8_bytes((const unsigned char []) { __VA_ARGS__ })


__attribute__((target("avx2")))
static inline __m256i
or_u8_bytes(const unsigned char *v)
{
    return _mm256_loadu_si256((const __m256i *) v);
}


__attribute__((target("avx2")))
static int
or_json_utf8_valid_avx2(const unsigned char *buf, size_t len)
{
    size_t    i;
    __m256i   in, prev, shifted, prev1, prev2, prev3, sc, must23, err,
              open, nib, t1h, t1l, t2h, most;
    unsigned char  tail[32];

    t1h = or_u8_table(
        /* 0_______ ________: ASCII first */
        OR_U8_TOO_LONG, OR_U8_TOO_LONG, OR_U8_TOO_LONG, OR_U8_TOO_LONG,
        OR_U8_TOO_LONG, OR_U8_TOO_LONG, OR_U8_TOO_LONG, OR_U8_TOO_LONG,
        /* 10______ ________: a continuation first */
        OR_U8_TWO_CONTS, OR_U8_TWO_CONTS, OR_U8_TWO_CONTS, OR_U8_TWO_CONTS,
        /* 1100____, 1101____: two-byte leads */
        OR_U8_TOO_SHORT | OR_U8_OVERLONG_2,
        OR_U8_TOO_SHORT,
        /* 1110____: three-byte leads */
        OR_U8_TOO_SHORT | OR_U8_OVERLONG_3 | OR_U8_SURROGATE,
        /* 1111____: four-byte leads (and worse) */
        OR_U8_TOO_SHORT | OR_U8_TOO_LARGE | OR_U8_TOO_LARGE_1000
        | OR_U8_OVERLONG_4);

    t1l = or_u8_table(
        /* ____0000 */
        OR_U8_CARRY | OR_U8_OVERLONG_3 | OR_U8_OVERLONG_2 | OR_U8_OVERLONG_4,
        /* ____0001 */
        OR_U8_CARRY | OR_U8_OVERLONG_2,
        /* ____001_ */
        OR_U8_CARRY,
        OR_U8_CARRY,
        /* ____0100 */
        OR_U8_CARRY | OR_U8_TOO_LARGE,
        /* ____0101, ____011_, ____1___ */
        OR_U8_CARRY | OR_U8_TOO_LARGE | OR_U8_TOO_LARGE_1000,
        OR_U8_CARRY | OR_U8_TOO_LARGE | OR_U8_TOO_LARGE_1000,
        OR_U8_CARRY | OR_U8_TOO_LARGE | OR_U8_TOO_LARGE_1000,
        OR_U8_CARRY | OR_U8_TOO_LARGE | OR_U8_TOO_LARGE_1000,
        OR_U8_CARRY | OR_U8_TOO_LARGE | OR_U8_TOO_LARGE_1000,
        OR_U8_CARRY | OR_U8_TOO_LARGE | OR_U8_TOO_LARGE_1000,
        OR_U8_CARRY | OR_U8_TOO_LARGE | OR_U8_TOO_LARGE_1000,
        OR_U8_CARRY | OR_U8_TOO_LARGE | OR_U8_TOO_LARGE_1000,
        /* ____1101 */
        OR_U8_CARRY | OR_U8_TOO_LARGE | OR_U8_TOO_LARGE_1000
        | OR_U8_SURROGATE,
        OR_U8_CARRY | OR_U8_TOO_LARGE | OR_U8_TOO_LARGE_1000,
        OR_U8_CARRY | OR_U8_TOO_LARGE | OR_U8_TOO_LARGE_1000);

    t2h = or_u8_table(
        /* ________ 0_______: ASCII second */
        OR_U8_TOO_SHORT, OR_U8_TOO_SHORT, OR_U8_TOO_SHORT, OR_U8_TOO_SHORT,
        OR_U8_TOO_SHORT, OR_U8_TOO_SHORT, OR_U8_TOO_SHORT, OR_U8_TOO_SHORT,
        /* ________ 1000____ */
        OR_U8_TOO_LONG | OR_U8_OVERLONG_2 | OR_U8_TWO_CONTS
        | OR_U8_OVERLONG_3 | OR_U8_TOO_LARGE_1000 | OR_U8_OVERLONG_4,
        /* ________ 1001____ */
        OR_U8_TOO_LONG | OR_U8_OVERLONG_2 | OR_U8_TWO_CONTS
        | OR_U8_OVERLONG_3 | OR_U8_TOO_LARGE,
        /* ________ 101_____ */
        OR_U8_TOO_LONG | OR_U8_OVERLONG_2 | OR_U8_TWO_CONTS
        | OR_U8_SURROGATE | OR_U8_TOO_LARGE,
        OR_U8_TOO_LONG | OR_U8_OVERLONG_2 | OR_U8_TWO_CONTS
        | OR_U8_SURROGATE | OR_U8_TOO_LARGE,
        /* ________ 11______: a lead second */
        OR_U8_TOO_SHORT, OR_U8_TOO_SHORT, OR_U8_TOO_SHORT, OR_U8_TOO_SHORT);

    /* the largest last three bytes of a block that leave no sequence open */
    most = or_u8_set(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                     0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                     0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                     0xff, 0xff, 0xff, 0xff, 0xff, 0xef, 0xdf, 0xbf);
    nib = _mm256_set1_epi8(0x0f);

    prev = _mm256_setzero_si256();
    err = _mm256_setzero_si256();
    open = _mm256_setzero_si256();

    for (i = 0; i < len; i += 32) {

        if (len - i >= 32) {
            in = _mm256_loadu_si256((const __m256i *) (buf + i));

        } else {
            /* the last bytes, ASCII NULs after them: a sequence cut by
             * the end is then too short */
            memset(tail, 0, sizeof(tail));
            memcpy(tail, buf + i, len - i);
            in = _mm256_loadu_si256((const __m256i *) tail);
        }

        if (_mm256_movemask_epi8(in) == 0) {
            err = _mm256_or_si256(err, open);
            prev = in;
            continue;
        }

        shifted = _mm256_permute2x128_si256(prev, in, 0x21);
        prev1 = _mm256_alignr_epi8(in, shifted, 15);
        prev2 = _mm256_alignr_epi8(in, shifted, 14);
        prev3 = _mm256_alignr_epi8(in, shifted, 13);

        sc = _mm256_and_si256(
                 _mm256_and_si256(
                     _mm256_shuffle_epi8(t1h,
                         _mm256_and_si256(_mm256_srli_epi16(prev1, 4), nib)),
                     _mm256_shuffle_epi8(t1l, _mm256_and_si256(prev1, nib))),
                 _mm256_shuffle_epi8(t2h,
                     _mm256_and_si256(_mm256_srli_epi16(in, 4), nib)));

        /* the third and fourth bytes of a sequence: 0x80 where expected */
        must23 = _mm256_and_si256(
                     _mm256_or_si256(
                         _mm256_subs_epu8(prev2, _mm256_set1_epi8(0x60)),
                         _mm256_subs_epu8(prev3, _mm256_set1_epi8(0x70))),
                     _mm256_set1_epi8((char) 0x80));

        err = _mm256_or_si256(err, _mm256_xor_si256(must23, sc));
        open = _mm256_subs_epu8(in, most);
        prev = in;

        if (!_mm256_testz_si256(err, err)) {
            return 0;
        }
    }

    err = _mm256_or_si256(err, open);

    return _mm256_testz_si256(err, err);
}


static int  or_json_avx2 = -1;

#endif


/*
 * The UTF-8 of buf[0, len): the offset of the first byte that cannot
 * belong to a valid sequence (*err set, *lead the offset of the sequence
 * it breaks), else len.  JSON outside strings is ASCII, so the strings'
 * UTF-8 is checked here for the whole document at once: ASCII goes 16 or
 * 8 bytes at a time, each multi-byte sequence by or_json_utf8().
 */

static size_t
or_json_utf8_check(const unsigned char *buf, size_t len, size_t *lead,
    const char **err)
{
    uint64_t              w;
    const unsigned char  *p, *q, *last;

    p = buf;
    last = buf + len;

#if (OR_JSON_X86)

    if (or_json_avx2 == -1) {
        __builtin_cpu_init();
        or_json_avx2 = __builtin_cpu_supports("avx2") ? 1 : 0;
    }

    if (len >= 16 && or_json_avx2 && or_json_utf8_valid_avx2(buf, len)) {
        return len;
    }

    /* very short, no AVX2, or an error: where it is, byte by byte */

#endif

    while (p < last) {

#if (OR_JSON_X86)
        while (last - p >= 16
               && _mm_movemask_epi8(_mm_loadu_si128((const __m128i *) p))
                  == 0)
        {
            p += 16;
        }
#endif

        while (last - p >= 8) {
            memcpy(&w, p, 8);

            if (w & OR_JSON_HIGH) {
                break;
            }

            p += 8;
        }

        while (p < last && *p < 0x80) {
            p++;
        }

        if (p == last) {
            break;
        }

        q = p;
        p = or_json_utf8(p, last, err);

        if (*err != NULL) {
            *lead = q - buf;
            return p - buf;
        }
    }

    return len;
}


/*
 * One multi-byte UTF-8 sequence at p (*p >= 0x80), per Unicode table 3-7:
 * no overlongs, no surrogates, nothing above U+10FFFF.  On error, points
 * at the first byte that cannot belong to a valid sequence.
 */

static const unsigned char *
or_json_utf8(const unsigned char *p, const unsigned char *last,
    const char **err)
{
    size_t         n, i;
    unsigned char  c, lo, hi;

    c = *p;
    lo = 0x80;
    hi = 0xbf;

    if (c >= 0xc2 && c <= 0xdf) {
        n = 1;

    } else if (c >= 0xe0 && c <= 0xef) {
        n = 2;

        if (c == 0xe0) {
            lo = 0xa0;              /* overlong */

        } else if (c == 0xed) {
            hi = 0x9f;              /* U+D800-U+DFFF */
        }

    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 3;

        if (c == 0xf0) {
            lo = 0x90;              /* overlong */

        } else if (c == 0xf4) {
            hi = 0x8f;              /* above U+10FFFF */
        }

    } else {
        *err = OR_JSON_BAD_UTF8;
        return p;
    }

    p++;

    for (i = 0; i < n; i++, p++) {
        if (p == last) {
            *err = OR_JSON_UNTERM;
            return p;
        }

        if (*p < lo || *p > hi) {
            *err = OR_JSON_BAD_UTF8;
            return p;
        }

        lo = 0x80;
        hi = 0xbf;
    }

    return p;
}


/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */

static const unsigned char *
or_json_number(const unsigned char *p, const unsigned char *last,
    const char **err)
{
    if (*p == '-') {
        p++;
    }

    if (p == last) {
        *err = OR_JSON_END;
        return p;
    }

    if (*p == '0') {
        p++;

        if (p < last && *p >= '0' && *p <= '9') {
            *err = "invalid number";
            return p;
        }

    } else if (*p >= '1' && *p <= '9') {
        do {
            p++;
        } while (p < last && *p >= '0' && *p <= '9');

    } else {
        *err = "invalid number";
        return p;
    }

    if (p < last && *p == '.') {
        if (++p == last) {
            *err = OR_JSON_END;
            return p;
        }

        if (*p < '0' || *p > '9') {
            *err = "invalid number";
            return p;
        }

        do {
            p++;
        } while (p < last && *p >= '0' && *p <= '9');
    }

    if (p < last && (*p == 'e' || *p == 'E')) {
        p++;

        if (p < last && (*p == '+' || *p == '-')) {
            p++;
        }

        if (p == last) {
            *err = OR_JSON_END;
            return p;
        }

        if (*p < '0' || *p > '9') {
            *err = "invalid number";
            return p;
        }

        do {
            p++;
        } while (p < last && *p >= '0' && *p <= '9');
    }

    return p;
}


static const unsigned char *
or_json_literal(const unsigned char *p, const unsigned char *last,
    const char *lit, size_t n, const char **err)
{
    size_t  i;

    for (i = 0; i < n; i++, p++) {
        if (p == last) {
            *err = OR_JSON_END;
            return p;
        }

        if (*p != (unsigned char) lit[i]) {
            *err = "invalid literal";
            return p;
        }
    }

    return p;
}


/*
 * A key at the level looked at (quotes included), compared decoded: with
 * find, only its key; else the members of or_json_names.
 */

static or_json_member_e
or_json_member(const unsigned char *key, size_t len, unsigned escaped,
    or_json_find_t *find)
{
    long         n;
    size_t       i;
    const char  *k;
    char         buf[OR_JSON_KEY_MAX];

    if (escaped) {
        if (len > OR_JSON_KEY_MAX) {
            return OR_JSON_M_NONE;
        }

        n = or_json_string_decode((const char *) key, len, buf);

        if (n < 0) {
            return OR_JSON_M_NONE;
        }

        k = buf;
        len = (size_t) n;

    } else {
        k = (const char *) key + 1;
        len -= 2;
    }

    if (find != NULL) {
        return (len == find->len && memcmp(k, find->key, len) == 0)
               ? OR_JSON_M_FIND : OR_JSON_M_NONE;
    }

    /* the one name of or_json_names of this length (two of 5: by 'm') */

    switch (len) {

    case 5:
        i = (k[0] == 'm') ? OR_JSON_M_MODEL : OR_JSON_M_TOOLS;
        break;

    case 6:
        i = OR_JSON_M_STREAM;
        break;

    case 10:
        i = OR_JSON_M_BACKGROUND;
        break;

    case 14:
        i = OR_JSON_M_STREAM_OPTIONS;
        break;

    default:
        i = OR_JSON_M_NONE;
        break;
    }

    if (i != OR_JSON_M_NONE && len == or_json_names[i].len
        && memcmp(k, or_json_names[i].name, len) == 0)
    {
        return (or_json_member_e) i;
    }

    /* not one of them: one of them but for case? (R-NAME-2) */

    return or_json_member_variant(k, len);
}


/*
 * The first byte says which name a case variant could be (no name
 * begins with i or k, so a first byte of 0xc4 or 0xe2 never folds to
 * one); most keys stop there or at the length.  Out of line: the scan's
 * hot loop keeps its registers.
 */

static __attribute__((noinline)) or_json_member_e
or_json_member_variant(const char *k, size_t len)
{
    size_t          i;
    unsigned char   c;

    if (len < 5) {
        /* the shortest names, "model" and "tools" */
        return OR_JSON_M_NONE;
    }

    c = (unsigned char) k[0];

    switch ((c < 0x80) ? (c | 0x20) : c) {

    case 'm':
        i = OR_JSON_M_MODEL;
        break;

    case 's':
    case 0xc5:      /* U+017F, long s */
        if (or_json_member_fold(k, len, OR_JSON_M_STREAM)) {
            return OR_JSON_M_VARIANT;
        }

        i = OR_JSON_M_STREAM_OPTIONS;
        break;

    case 'b':
        i = OR_JSON_M_BACKGROUND;
        break;

    case 't':
        i = OR_JSON_M_TOOLS;
        break;

    default:
        return OR_JSON_M_NONE;
    }

    return or_json_member_fold(k, len, i) ? OR_JSON_M_VARIANT
                                          : OR_JSON_M_NONE;
}


/* k[0, len) is a case variant of the name of member m */

static int
or_json_member_fold(const char *k, size_t len, size_t m)
{
    const or_json_name_t  *n;

    n = &or_json_names[m];

    return len >= n->len && len <= n->len + n->fold
           && or_json_fold_eq(k, len, n->name, n->len);
}


/*
 * k[0, klen) folds to the lowercase ASCII name[0, nlen) as a decoder
 * matching keys case-insensitively would fold it (Go's encoding/json
 * does): ASCII letters of either case, and the four non-ASCII letters
 * whose simple case folding is an ASCII one -- U+017F (long s) as 's',
 * U+212A (Kelvin sign) as 'k', U+0130 and U+0131 (dotted and dotless I)
 * as 'i'.
 */

static int
or_json_fold_eq(const char *k, size_t klen, const char *name, size_t nlen)
{
    size_t          i, j;
    unsigned char   c, f;

    i = 0;

    for (j = 0; j < nlen; j++) {

        if (i >= klen) {
            return 0;
        }

        c = (unsigned char) k[i];

        if (c < 0x80) {
            f = (c >= 'A' && c <= 'Z') ? (unsigned char) (c | 0x20) : c;
            i++;

        } else if (c == 0xc5 && i + 1 < klen
                   && (unsigned char) k[i + 1] == 0xbf)
        {
            f = 's';
            i += 2;

        } else if (c == 0xc4 && i + 1 < klen
                   && ((unsigned char) k[i + 1] == 0xb0
                       || (unsigned char) k[i + 1] == 0xb1))
        {
            f = 'i';
            i += 2;

        } else if (c == 0xe2 && i + 2 < klen
                   && (unsigned char) k[i + 1] == 0x84
                   && (unsigned char) k[i + 2] == 0xaa)
        {
            f = 'k';
            i += 3;

        } else {
            return 0;
        }

        if (f != (unsigned char) name[j]) {
            return 0;
        }
    }

    return i == klen;
}


static or_json_type_e
or_json_type_of(unsigned char c)
{
    switch (c) {

    case '"':
        return OR_JSON_STRING;

    case '{':
        return OR_JSON_OBJECT;

    case '[':
        return OR_JSON_ARRAY;

    case 't':
        return OR_JSON_TRUE;

    case 'f':
        return OR_JSON_FALSE;

    case 'n':
        return OR_JSON_NULL;

    default:
        return OR_JSON_NUMBER;
    }
}


or_json_rc_e
or_json_scan(const char *buf, size_t len, or_json_scan_t *out)
{
    return or_json_check(buf, len, out, NULL);
}


or_json_rc_e
or_json_find(const char *buf, size_t len, const char *key, size_t key_len,
    or_json_value_t *out)
{
    or_json_rc_e    rc;
    or_json_scan_t  scan;
    or_json_find_t  find;

    memset(out, 0, sizeof(or_json_value_t));

    find.key = key;
    find.len = (key_len <= OR_JSON_FIND_MAX) ? key_len : (size_t) -1;
    find.out = out;

    rc = or_json_check(buf, len, &scan, &find);

    if (rc != OR_JSON_OK) {
        /* a value is reported only for a valid object */
        memset(out, 0, sizeof(or_json_value_t));
    }

    return rc;
}


/*
 * The document, its strings' UTF-8 checked as each ends (JSON outside
 * strings is ASCII): the first error, structural or UTF-8, is the
 * answer.  What was found past a UTF-8 error is dropped.
 */

static or_json_rc_e
or_json_check(const char *buf, size_t len, or_json_scan_t *out,
    or_json_find_t *find)
{
    size_t         at;
    or_json_rc_e   rc;

    rc = or_json_scan_text(buf, len, out, find);

    if (rc != OR_JSON_SYNTAX || out->error != OR_JSON_BAD_UTF8) {
        return rc;
    }

    at = out->error_at;

    if (out->model.end > at) {
        memset(&out->model, 0, sizeof(or_json_value_t));
    }

    if (out->stream.end > at) {
        memset(&out->stream, 0, sizeof(or_json_value_t));
    }

    if (out->stream_options.end > at) {
        memset(&out->stream_options, 0, sizeof(or_json_value_t));
    }

    if (out->background.end > at) {
        memset(&out->background, 0, sizeof(or_json_value_t));
    }

    if (out->tools.end > at || out->tools.type == OR_JSON_ABSENT) {
        memset(&out->tools, 0, sizeof(or_json_value_t));
        out->tools_count = 0;
    }

    if (find != NULL && find->out->end > at) {
        memset(find->out, 0, sizeof(or_json_value_t));
    }

    return OR_JSON_SYNTAX;
}


static or_json_rc_e
or_json_scan_text(const char *buf, size_t len, or_json_scan_t *out,
    or_json_find_t *find)
{
    int                   in_object, top_object, model_seen, dup, again,
                          in_tools;
    size_t                depth, dup_at;
    unsigned              escaped;
    const char           *err;
    unsigned char         stack[OR_JSON_MAX_DEPTH / 8];   /* 1: object */
    or_json_value_t      *v;
    or_json_member_e      member;
    const unsigned char  *p, *last, *start, *mstart, *kstart, *mkey;

    memset(out, 0, sizeof(or_json_scan_t));

    if (len == 0) {
        /* buf may be NULL: no arithmetic on it */
        out->error = "empty document";
        return OR_JSON_EMPTY;
    }

    memset(stack, 0, sizeof(stack));

    start = (const unsigned char *) buf;
    last = start + len;

    p = or_json_uws(start, last);

    if (p == last) {
        out->error = "empty document";
        return OR_JSON_EMPTY;
    }

    top_object = (*p == '{');
    in_object = 0;
    depth = 0;
    member = OR_JSON_M_NONE;
    model_seen = 0;
    in_tools = 0;
    dup = 0;
    dup_at = 0;
    escaped = 0;
    mstart = p;
    mkey = p;
    err = NULL;

value:

    /* the first byte of a value, whitespace skipped */

    if (p == last) {
        goto premature;
    }

    if (depth == 1) {
        mstart = p;

    } else if (depth == 2 && in_tools) {
        /* an element of the top-level "tools" array */
        out->tools_count++;
    }

    if (*p == '"') {
        /* most values of an agent's body: before the switch's jump */
        p = or_json_string(p + 1, last, &escaped, &err);

        if (err != NULL) {
            goto syntax;
        }

        goto done_value;
    }

    switch (*p) {

    case '{':
    case '[':
        if (depth == OR_JSON_MAX_DEPTH) {
            out->error_at = p - start;
            out->error = "nesting too deep";
            return OR_JSON_TOO_DEEP;
        }

        in_object = (*p == '{');

        if (depth == 1 && member == OR_JSON_M_TOOLS && !in_object) {
            /* the last "tools" counts, as the last "stream" does */
            in_tools = 1;
            out->tools_count = 0;
        }

        if (in_object) {
            stack[depth >> 3] |= (unsigned char) (1u << (depth & 7));

        } else {
            stack[depth >> 3] &= (unsigned char) ~(1u << (depth & 7));
        }

        depth++;

        p = or_json_uws(p + 1, last);

        if (p < last && *p == (in_object ? '}' : ']')) {
            p++;
            goto close;
        }

        if (in_object) {
            goto key;
        }

        goto value;

    case 't':
        p = or_json_literal(p, last, "true", 4, &err);
        break;

    case 'f':
        p = or_json_literal(p, last, "false", 5, &err);
        break;

    case 'n':
        p = or_json_literal(p, last, "null", 4, &err);
        break;

    case '-':
    case '0': case '1': case '2': case '3': case '4':
    case '5': case '6': case '7': case '8': case '9':
        p = or_json_number(p, last, &err);
        break;

    default:
        err = "unexpected character";
        goto syntax;
    }

    if (err != NULL) {
        goto syntax;
    }

    goto done_value;

close:

    depth--;
    in_object = depth > 0
                && ((stack[(depth - 1) >> 3] >> ((depth - 1) & 7)) & 1);

    if (depth == 1) {
        in_tools = 0;
    }

done_value:

    /* a value ends just before p; at depth 1 it is a top-level member */

    if (depth == 1 && member != OR_JSON_M_NONE) {
        switch (member) {

        case OR_JSON_M_MODEL:
            v = &out->model;
            break;

        case OR_JSON_M_STREAM:
            v = &out->stream;
            break;

        case OR_JSON_M_STREAM_OPTIONS:
            v = &out->stream_options;
            break;

        case OR_JSON_M_BACKGROUND:
            v = &out->background;
            break;

        case OR_JSON_M_TOOLS:
            v = &out->tools;

            if (*mstart != '[') {
                out->tools_count = 0;
            }

            break;

        default:
            v = find->out;
            break;
        }

        again = (v->type != OR_JSON_ABSENT);

        v->key = mkey - start;
        v->start = mstart - start;
        v->end = p - start;
        v->type = or_json_type_of(*mstart);
        v->escaped = (v->type == OR_JSON_STRING) ? escaped : 0;
        v->dup = again;

        member = OR_JSON_M_NONE;
    }

    p = or_json_uws(p, last);

    if (depth == 0) {
        if (p != last) {
            err = "trailing characters";
            goto syntax;
        }

        if (dup) {
            out->error_at = dup_at;
            out->error = "duplicate \"model\"";
            return OR_JSON_DUP_MODEL;
        }

        if (out->error != NULL) {
            /* the first case variant, kept in out (see the key) */
            return OR_JSON_CASE_VARIANT;
        }

        return top_object ? OR_JSON_OK : OR_JSON_NOT_OBJECT;
    }

    if (p == last) {
        goto premature;
    }

    if (*p == ',') {
        p = or_json_uws(p + 1, last);

        if (in_object) {
            goto key;
        }

        if (p < last && *p == ']') {
            err = "trailing comma";
            goto syntax;
        }

        goto value;
    }

    if (*p == (in_object ? '}' : ']')) {
        p++;
        goto close;
    }

    err = in_object ? "expected ',' or '}'" : "expected ',' or ']'";
    goto syntax;

key:

    /* an object's key, whitespace skipped ('{' '}' is handled above) */

    if (p == last) {
        goto premature;
    }

    if (*p != '"') {
        err = (*p == '}') ? "trailing comma" : "expected a string key";
        goto syntax;
    }

    kstart = p;
    p = or_json_string(p + 1, last, &escaped, &err);

    if (err != NULL) {
        goto syntax;
    }

    if (depth == 1) {
        member = or_json_member(kstart, p - kstart, escaped, find);
        mkey = kstart;

        if (member == OR_JSON_M_MODEL) {
            if (model_seen) {
                if (!dup) {
                    dup = 1;
                    dup_at = kstart - start;
                }

                out->model.dup = 1;
                member = OR_JSON_M_NONE;
            }

            model_seen = 1;

        } else if (member == OR_JSON_M_VARIANT) {
            /*
             * Kept in out, not in locals, off the registers of the hot
             * loop: any error met later overwrites both.
             */

            if (out->error == NULL) {
                out->error_at = kstart - start;
                out->error = "a member differs only by case from one read";
            }

            member = OR_JSON_M_NONE;
        }
    }

    p = or_json_uws(p, last);

    if (p == last) {
        goto premature;
    }

    if (*p != ':') {
        err = "expected ':'";
        goto syntax;
    }

    p = or_json_uws(p + 1, last);

    goto value;

premature:

    err = OR_JSON_END;

syntax:

    out->error_at = p - start;
    out->error = err;

    return OR_JSON_SYNTAX;
}


static int
or_json_hex4(const unsigned char *p, uint32_t *cp)
{
    int            i;
    uint32_t       v;
    unsigned char  c;

    v = 0;

    for (i = 0; i < 4; i++) {
        c = p[i];

        if (c >= '0' && c <= '9') {
            v = (v << 4) | (uint32_t) (c - '0');

        } else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') {
            v = (v << 4) | (uint32_t) ((c | 0x20) - 'a' + 10);

        } else {
            return -1;
        }
    }

    *cp = v;

    return 0;
}


long
or_json_string_decode(const char *span, size_t span_len, char *out)
{
    uint32_t              cp, lo;
    unsigned char        *d;
    unsigned char         c;
    const unsigned char  *p, *last;

    if (span == NULL || span_len < 2
        || span[0] != '"' || span[span_len - 1] != '"')
    {
        return -1;
    }

    p = (const unsigned char *) span + 1;
    last = (const unsigned char *) span + span_len - 1;
    d = (unsigned char *) out;

    while (p < last) {
        c = *p++;

        if (c != '\\') {
            if (c == '"' || c < 0x20) {
                return -1;
            }

            *d++ = c;
            continue;
        }

        /* a backslash just before the closing quote escapes it */

        if (p == last) {
            return -1;
        }

        switch (*p++) {

        case '"':
            *d++ = '"';
            break;

        case '\\':
            *d++ = '\\';
            break;

        case '/':
            *d++ = '/';
            break;

        case 'b':
            *d++ = '\b';
            break;

        case 'f':
            *d++ = '\f';
            break;

        case 'n':
            *d++ = '\n';
            break;

        case 'r':
            *d++ = '\r';
            break;

        case 't':
            *d++ = '\t';
            break;

        case 'u':
            if (last - p < 4 || or_json_hex4(p, &cp) != 0) {
                return -1;
            }

            p += 4;

            if (cp >= 0xd800 && cp <= 0xdbff) {
                if (last - p >= 6 && p[0] == '\\' && p[1] == 'u'
                    && or_json_hex4(p + 2, &lo) == 0
                    && lo >= 0xdc00 && lo <= 0xdfff)
                {
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                    p += 6;

                } else {
                    cp = 0xfffd;    /* a lone high surrogate */
                }

            } else if (cp >= 0xdc00 && cp <= 0xdfff) {
                cp = 0xfffd;        /* a lone low surrogate */
            }

            d = (unsigned char *) or_json_utf8_put((char *) d, cp);
            break;

        default:
            return -1;
        }
    }

    return (long) (d - (unsigned char *) out);
}


size_t
or_json_quoted_len(const char *s, size_t len)
{
    size_t         n, i;
    unsigned char  c;

    n = 2;

    for (i = 0; i < len; i++) {
        c = (unsigned char) s[i];

        if (c == '"' || c == '\\') {
            n += 2;

        } else if (c < 0x20) {
            n += or_json_short[c] ? 2 : 6;

        } else {
            n++;
        }
    }

    return n;
}


char *
or_json_quote(char *dst, const char *s, size_t len)
{
    size_t         i;
    unsigned char  c;

    *dst++ = '"';

    for (i = 0; i < len; i++) {
        c = (unsigned char) s[i];

        if (c == '"' || c == '\\') {
            *dst++ = '\\';
            *dst++ = (char) c;

        } else if (c < 0x20) {
            *dst++ = '\\';

            if (or_json_short[c]) {
                *dst++ = or_json_short[c];

            } else {
                *dst++ = 'u';
                *dst++ = '0';
                *dst++ = '0';
                *dst++ = or_json_hexdigits[c >> 4];
                *dst++ = or_json_hexdigits[c & 0xf];
            }

        } else {
            *dst++ = (char) c;
        }
    }

    *dst++ = '"';

    return dst;
}


const char *
or_json_rc_name(or_json_rc_e rc)
{
    if ((unsigned) rc >= sizeof(or_json_rc_names) / sizeof(char *)) {
        return "unknown";
    }

    return or_json_rc_names[rc];
}


const char *
or_json_type_name(or_json_type_e type)
{
    if ((unsigned) type >= sizeof(or_json_type_names) / sizeof(char *)) {
        return "unknown";
    }

    return or_json_type_names[type];
}
