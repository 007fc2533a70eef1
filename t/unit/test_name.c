/*
 * Copyright (C) ngx_omniroute authors
 *
 * Client-chosen names (R-NAME-1): the check and the escape of log lines.
 */


#include <string.h>

#include "or_test.h"
#include "or_name.h"


#define TN(s)  s, sizeof(s) - 1


typedef struct {
    const char     *s;
    size_t          len;
    size_t          max;
    or_name_rc_e    rc;
    size_t          at;
    const char     *name;
} tn_case_t;


static const tn_case_t  tn_cases[] = {
    { TN("gpt-4o"), 256, OR_NAME_OK, 0, "a model" },
    { TN("openai/gpt-4o-mini@2024:x_y.z~!"), 256, OR_NAME_OK, 0,
      "punctuation is fine" },
    { TN(""), 256, OR_NAME_EMPTY, 0, "empty" },
    { TN("m\r\nPOST /x HTTP/1.1"), 256, OR_NAME_CONTROL, 1, "CR LF" },
    { TN("m\0x"), 256, OR_NAME_CONTROL, 1, "NUL" },
    { TN("\x7f"), 256, OR_NAME_CONTROL, 0, "DEL" },
    { TN("a\tb"), 256, OR_NAME_CONTROL, 1, "a tab" },
    { TN("a b"), 256, OR_NAME_NOT_PRINTABLE, 1, "a space" },
    { TN("caf\xc3\xa9"), 256, OR_NAME_NOT_PRINTABLE, 3, "UTF-8" },
    { TN("abcd"), 4, OR_NAME_OK, 0, "exactly max" },
    { TN("abcde"), 4, OR_NAME_TOO_LONG, 4, "one past max" },
    { TN("ab\ncde"), 4, OR_NAME_CONTROL, 2, "a control byte before max" },
    { NULL, 0, 0, 0, 0, NULL }
};


/* every byte at every place of strings of 1 to 19 bytes (eight at a time) */

static void
tn_has_control(void)
{
    int            want, got, bad;
    char           buf[19];
    size_t         len, at, i;
    unsigned int   c;

    bad = 0;

    for (len = 1; len <= sizeof(buf); len++) {
        for (at = 0; at < len; at++) {
            for (c = 0; c < 256; c++) {
                memset(buf, 'a', sizeof(buf));
                buf[(at + 3) % len] = (char) 0xff;
                buf[at] = (char) c;

                want = 0;

                for (i = 0; i < len; i++) {
                    if ((unsigned char) buf[i] < 0x20
                        || (unsigned char) buf[i] == 0x7f)
                    {
                        want = 1;
                    }
                }

                got = or_name_has_control(buf, len);

                if (got != want) {
                    bad++;
                }
            }
        }
    }

    or_is_int(bad, 0, "R-NAME-1 has_control: as a byte loop for every byte"
              " at every place");
}


static void
tn_check(void)
{
    size_t              at;
    const tn_case_t    *t;

    for (t = tn_cases; t->s; t++) {
        at = 99;
        or_is_int(or_name_check(t->s, t->len, t->max, &at), t->rc,
                  "R-NAME-1 check: %s", t->name);
        or_is_int(at, t->at, "R-NAME-1 check: %s: at", t->name);
    }

    or_is_int(or_name_check("x", 1, 1, NULL), OR_NAME_OK,
              "R-NAME-1 check: at may be NULL");
    or_ok(or_name_has_control("a b\xc3\xa9\x7f", 6),
          "R-NAME-1 has_control: DEL after a space and UTF-8");
    or_ok(!or_name_has_control("a b\xc3\xa9", 5),
          "R-NAME-1 has_control: none");
    tn_has_control();
    or_is_str(or_name_problem(OR_NAME_CONTROL), "a control character",
              "R-NAME-1 problem: control");
    or_is_str(or_name_problem((or_name_rc_e) 42), "unknown",
              "R-NAME-1 problem: unknown");
}


static void
tn_escape(void)
{
    char        buf[64];
    size_t      n;
    const char  in[] = "a\r\n\"\\\x7f\xc3\xa9 z";

    n = or_name_escape(buf, sizeof(buf), in, sizeof(in) - 1);
    buf[n] = '\0';

    or_is_str(buf, "a\\x0d\\x0a\\x22\\x5c\\x7f\\xc3\\xa9 z",
              "R-NAME-1 escape: every unsafe byte as \\xHH");
    or_is_int(or_name_escaped_len(in, sizeof(in) - 1), n,
              "R-NAME-1 escape: the length");

    n = or_name_escape(buf, 6, in, sizeof(in) - 1);
    or_is_int(n, 5, "R-NAME-1 escape: an escape is never cut");
    or_ok(memcmp(buf, "a\\x0d", 5) == 0, "R-NAME-1 escape: cut at 6");

    or_is_int(or_name_escape(buf, 0, in, 3), 0,
              "R-NAME-1 escape: no room");
}


int
main(void)
{
    tn_check();
    tn_escape();

    return or_done();
}
