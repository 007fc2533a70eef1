/*
 * Copyright (C) ngx_omniroute authors
 *
 * Tiny TAP producer for the src/core unit tests.  Each test binary prints
 * TAP ("ok N - name" / "not ok N - name"), so prove runs it directly.
 */

#ifndef _OR_TEST_H_INCLUDED_
#define _OR_TEST_H_INCLUDED_


#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <inttypes.h>


static int  or_test_n;
static int  or_test_failed;


/*
 * A stream fixture, t/fixtures/streams/NAME (tests run from the tree's
 * top), read whole and NUL-terminated; NULL when it cannot be opened.
 */

static __attribute__((unused)) char *
or_test_fixture(const char *name, size_t *len)
{
    FILE   *f;
    char   *buf, path[512];
    long    n;

    snprintf(path, sizeof(path), "t/fixtures/streams/%s", name);

    f = fopen(path, "rb");
    if (f == NULL) {
        return NULL;
    }

    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);

    buf = malloc(n + 1);
    if (buf == NULL) {
        fclose(f);
        return NULL;
    }

    *len = fread(buf, 1, n, f);
    buf[*len] = '\0';
    fclose(f);

    return buf;
}


#define or_ok(cond, ...)                                                     \
    do {                                                                     \
        int or_c_ = (cond) ? 1 : 0;                                          \
        or_test_n++;                                                         \
        if (!or_c_) {                                                        \
            or_test_failed++;                                                \
        }                                                                    \
        printf("%sok %d - ", or_c_ ? "" : "not ", or_test_n);                \
        printf(__VA_ARGS__);                                                 \
        printf("\n");                                                        \
        if (!or_c_) {                                                        \
            printf("#   failed at %s line %d: %s\n", __FILE__, __LINE__,    \
                   #cond);                                                   \
        }                                                                    \
    } while (0)


#define or_is_int(got, expected, ...)                                        \
    do {                                                                     \
        int64_t or_g_ = (int64_t) (got);                                     \
        int64_t or_e_ = (int64_t) (expected);                                \
        or_ok(or_g_ == or_e_, __VA_ARGS__);                                  \
        if (or_g_ != or_e_) {                                                \
            printf("#   got: %" PRId64 "\n#   expected: %" PRId64 "\n",      \
                   or_g_, or_e_);                                            \
        }                                                                    \
    } while (0)


#define or_is_str(got, expected, ...)                                        \
    do {                                                                     \
        const char *or_g_ = (got);                                           \
        const char *or_e_ = (expected);                                      \
        int or_eq_ = (or_g_ != NULL && or_e_ != NULL)                        \
                     ? strcmp(or_g_, or_e_) == 0 : or_g_ == or_e_;           \
        or_ok(or_eq_, __VA_ARGS__);                                          \
        if (!or_eq_) {                                                       \
            printf("#   got: '%s'\n#   expected: '%s'\n",                    \
                   or_g_ ? or_g_ : "(null)", or_e_ ? or_e_ : "(null)");      \
        }                                                                    \
    } while (0)


#define or_done()                                                            \
    (printf("1..%d\n", or_test_n), or_test_failed ? 1 : 0)


#endif /* _OR_TEST_H_INCLUDED_ */
