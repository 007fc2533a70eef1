/*
 * Copyright (C) ngx_omniroute authors
 *
 * or_splice: edits of a scanned body (stream usage asked for, a member
 * removed with its comma, the model replaced), and or_json_find().
 */


#include <stdlib.h>

#include "or_test.h"
#include "or_splice.h"


#define TS(s)  s, sizeof(s) - 1


typedef struct {
    const char         *doc;
    or_splice_usage_e   usage;
    const char         *out;        /* NULL: unchanged */
    const char         *name;
} ts_usage_t;


typedef struct {
    const char         *doc;
    const char         *out;
    const char         *name;
} ts_remove_t;


static const ts_usage_t  ts_usage[] = {
    { "{\"model\":\"m\",\"stream\":true}", OR_SPLICE_USAGE_ADDED,
      "{\"model\":\"m\",\"stream\":true,"
      "\"stream_options\":{\"include_usage\":true}}",
      "no stream_options: added after \"stream\"" },
    { "{\"stream\" : true ,\n \"model\":\"m\"}", OR_SPLICE_USAGE_ADDED,
      "{\"stream\" : true,\"stream_options\":{\"include_usage\":true} ,\n"
      " \"model\":\"m\"}",
      "no stream_options, \"stream\" first, whitespace kept" },
    { "{\"model\":\"m\",\"stream\":false}", OR_SPLICE_USAGE_NONE, NULL,
      "not a stream" },
    { "{\"model\":\"m\"}", OR_SPLICE_USAGE_NONE, NULL, "no \"stream\"" },
    { "{\"model\":\"m\",\"stream\":\"true\"}", OR_SPLICE_USAGE_NONE, NULL,
      "\"stream\" a string" },
    { "{\"stream\":true,\"stream_options\":{\"include_usage\":true}}",
      OR_SPLICE_USAGE_ASKED, NULL, "asked" },
    { "{\"stream\":true,\"stream_options\":{\"include\\u005fusage\":true}}",
      OR_SPLICE_USAGE_ASKED, NULL, "asked, the key escaped" },
    { "{\"stream\":true,\"stream_options\":{\"include_usage\":false}}",
      OR_SPLICE_USAGE_ADDED,
      "{\"stream\":true,\"stream_options\":{\"include_usage\":true}}",
      "include_usage false: replaced" },
    { "{\"stream\":true,\"stream_options\":{\"include_usage\":null,"
      "\"x\":1}}", OR_SPLICE_USAGE_ADDED,
      "{\"stream\":true,\"stream_options\":{\"include_usage\":true,"
      "\"x\":1}}", "include_usage null: replaced" },
    { "{\"stream\":true,\"stream_options\":{\"include_usage\":true,"
      "\"include_usage\":false}}", OR_SPLICE_USAGE_ADDED,
      "{\"stream\":true,\"stream_options\":{\"include_usage\":true,"
      "\"include_usage\":true}}", "a duplicate: the last one counts" },
    { "{\"stream\":true,\"stream_options\":{}}", OR_SPLICE_USAGE_ADDED,
      "{\"stream\":true,\"stream_options\":{\"include_usage\":true}}",
      "empty stream_options" },
    { "{\"stream\":true,\"stream_options\":{ \n }}", OR_SPLICE_USAGE_ADDED,
      "{\"stream\":true,\"stream_options\":{\"include_usage\":true}}",
      "empty stream_options with whitespace" },
    { "{\"stream\":true,\"stream_options\":{\"a\":{\"include_usage\":true}}}",
      OR_SPLICE_USAGE_ADDED,
      "{\"stream\":true,\"stream_options\":{\"include_usage\":true,"
      "\"a\":{\"include_usage\":true}}}",
      "a nested include_usage is not the member" },
    { "{\"stream_options\":null,\"stream\":true}", OR_SPLICE_USAGE_ADDED,
      "{\"stream_options\":{\"include_usage\":true},\"stream\":true}",
      "stream_options null" },
    { "{\"stream\":true,\"stream_options\":\"x\"}", OR_SPLICE_USAGE_NONE,
      NULL, "stream_options a string: left" },
    { "{\"stream\":true,\"stream_options\":[]}", OR_SPLICE_USAGE_NONE,
      NULL, "stream_options an array: left" },
    { "{\"stream\":true,\"stream_options\":{\"include_usage\":true},"
      "\"stream_options\":{}}", OR_SPLICE_USAGE_ADDED,
      "{\"stream\":true,\"stream_options\":{\"include_usage\":true},"
      "\"stream_options\":{\"include_usage\":true}}",
      "two stream_options: the last one" },
};


static const ts_remove_t  ts_remove[] = {
    { "{\"background\":true,\"model\":\"m\"}", "{\"model\":\"m\"}",
      "first member" },
    { "{\"model\":\"m\",\"background\":true,\"input\":\"x\"}",
      "{\"model\":\"m\",\"input\":\"x\"}", "middle member" },
    { "{\"model\":\"m\",\"background\":true}", "{\"model\":\"m\"}",
      "last member" },
    { "{\"background\":true}", "{}", "only member" },
    { "{ \"background\" : true }", "{  }", "only member, spaced" },
    { "{\n  \"model\": \"m\",\n  \"background\": true,\n  \"input\": \"x\"\n}",
      "{\n  \"model\": \"m\",\n  \"input\": \"x\"\n}", "pretty, middle" },
    { "{\n  \"model\": \"m\",\n  \"background\": true\n}",
      "{\n  \"model\": \"m\"\n}", "pretty, last" },
    { "{\"model\":\"m\" , \"background\":true }",
      "{\"model\":\"m\"  }", "last, spaces around the comma" },
    { "{\"backgr\\u006fund\":true,\"model\":\"m\"}", "{\"model\":\"m\"}",
      "an escaped key" },
};


static void ts_usage_cases(void);
static void ts_remove_cases(void);
static void ts_combined(void);
static void ts_add(void);
static void ts_find(void);
static void ts_scan_members(void);


static char *
ts_edit(const or_splice_t *sp, const char *doc, size_t len, size_t *out_len)
{
    char    *out;
    size_t   n;

    n = or_splice_len(sp, len);
    out = malloc(n + 1);

    if (out == NULL) {
        abort();
    }

    *out_len = or_splice_apply(sp, doc, len, out);
    out[*out_len] = '\0';

    or_is_int(*out_len, n, "  or_splice_len() is what or_splice_apply() "
              "wrote");

    return out;
}


static void
ts_usage_cases(void)
{
    char               *out;
    size_t              i, len, n;
    or_json_rc_e        rc;
    or_splice_t         sp;
    or_json_scan_t      scan, s2;
    or_json_value_t     iu;
    or_splice_usage_e   u;
    const ts_usage_t   *t;

    for (i = 0; i < sizeof(ts_usage) / sizeof(ts_usage_t); i++) {
        t = &ts_usage[i];
        len = strlen(t->doc);

        rc = or_json_scan(t->doc, len, &scan);
        or_is_int(rc, OR_JSON_OK, "usage: %s: scans", t->name);

        u = or_splice_stream_usage(NULL, t->doc, len, &scan);
        or_is_str(or_splice_usage_name(u), or_splice_usage_name(t->usage),
                  "usage: %s: told without an edit", t->name);

        or_splice_init(&sp);
        u = or_splice_stream_usage(&sp, t->doc, len, &scan);
        or_is_str(or_splice_usage_name(u), or_splice_usage_name(t->usage),
                  "usage: %s", t->name);

        out = ts_edit(&sp, t->doc, len, &n);
        or_is_str(out, t->out ? t->out : t->doc, "usage: %s: the body",
                  t->name);

        if (u == OR_SPLICE_USAGE_ADDED) {
            rc = or_json_scan(out, n, &s2);
            or_is_int(rc, OR_JSON_OK, "usage: %s: still valid", t->name);

            rc = or_json_find(out + s2.stream_options.start,
                              s2.stream_options.end - s2.stream_options.start,
                              TS("include_usage"), &iu);
            or_ok(rc == OR_JSON_OK && iu.type == OR_JSON_TRUE,
                  "usage: %s: now asked", t->name);
            or_is_str(or_splice_usage_name(or_splice_stream_usage(NULL, out,
                                                                  n, &s2)),
                      "asked", "usage: %s: asked once edited", t->name);
        }

        free(out);
    }
}


static void
ts_remove_cases(void)
{
    char               *out;
    size_t              i, len, n;
    or_json_rc_e        rc;
    or_splice_t         sp;
    or_json_scan_t      scan;
    const ts_remove_t  *t;

    for (i = 0; i < sizeof(ts_remove) / sizeof(ts_remove_t); i++) {
        t = &ts_remove[i];
        len = strlen(t->doc);

        rc = or_json_scan(t->doc, len, &scan);
        or_ok(rc == OR_JSON_OK && scan.background.type == OR_JSON_TRUE,
              "remove: %s: found", t->name);

        or_splice_init(&sp);
        or_is_int(or_splice_remove(&sp, t->doc, len, &scan.background), 0,
                  "remove: %s: added", t->name);

        out = ts_edit(&sp, t->doc, len, &n);
        or_is_str(out, t->out, "remove: %s", t->name);

        rc = or_json_scan(out, n, &scan);
        or_ok(rc == OR_JSON_OK && scan.background.type == OR_JSON_ABSENT,
              "remove: %s: valid, no background", t->name);

        free(out);
    }

    or_splice_init(&sp);
    memset(&scan, 0, sizeof(scan));
    or_is_int(or_splice_remove(&sp, TS("{}"), &scan.background), -1,
              "remove: an absent member is refused");
}


static void
ts_combined(void)
{
    char             *out;
    size_t            len, n;
    or_splice_t       sp;
    or_json_scan_t    scan;
    const char       *doc;

    doc = "{\"model\":\"a\",\"stream\":true,\"background\":true}";
    len = strlen(doc);

    or_ok(or_json_scan(doc, len, &scan) == OR_JSON_OK, "combined: scans");

    or_splice_init(&sp);
    or_is_int(or_splice_add(&sp, scan.model.start, scan.model.end,
                            TS("\"upstream-b\"")), 0,
              "combined: the model");
    or_is_int(or_splice_remove(&sp, doc, len, &scan.background), 0,
              "combined: background, the comma before it");
    or_is_str(or_splice_usage_name(or_splice_stream_usage(&sp, doc, len,
                                                          &scan)),
              "added", "combined: usage inserted where the removal starts");
    or_is_int(sp.n, 3, "combined: three edits");

    out = ts_edit(&sp, doc, len, &n);
    or_is_str(out, "{\"model\":\"upstream-b\",\"stream\":true,"
              "\"stream_options\":{\"include_usage\":true}}",
              "combined: the body");
    or_is_int(or_json_scan(out, n, &scan), OR_JSON_OK, "combined: valid");
    free(out);
}


static void
ts_add(void)
{
    or_splice_t  sp;

    or_splice_init(&sp);
    or_is_int(or_splice_add(&sp, 10, 20, TS("x")), 0, "add: a range");
    or_is_int(or_splice_add(&sp, 15, 25, TS("x")), -1, "add: an overlap");
    or_is_int(or_splice_add(&sp, 5, 11, TS("x")), -1,
              "add: an overlap from before");
    or_is_int(or_splice_add(&sp, 15, 15, TS("x")), -1,
              "add: an insertion inside a range");
    or_is_int(or_splice_add(&sp, 10, 10, TS("i")), 0,
              "add: an insertion where a range starts");
    or_is_int(or_splice_add(&sp, 10, 10, TS("j")), -1,
              "add: two insertions at one place");
    or_is_int(or_splice_add(&sp, 20, 20, TS("k")), 0,
              "add: an insertion where a range ends");
    or_is_int(or_splice_add(&sp, 0, 2, TS("y")), 0, "add: before");
    or_is_int(or_splice_add(&sp, 30, 31, TS("z")), -1, "add: full");
    or_is_int(or_splice_add(&sp, 9, 8, TS("z")), -1, "add: backwards");

    or_ok(sp.edit[0].start == 0 && sp.edit[1].start == 10
          && sp.edit[1].end == 10 && sp.edit[2].end == 20
          && sp.edit[3].start == 20 && sp.edit[3].end == 20,
          "add: in order, the insertion first");
}


static void
ts_find(void)
{
    or_json_value_t  v;

    or_is_int(or_json_find(TS("{\"a\":1,\"b\":{\"a\":2},\"a\":[3]}"),
                           TS("a"), &v), OR_JSON_OK, "find: scans");
    or_ok(v.type == OR_JSON_ARRAY && v.start == 23 && v.end == 26
          && v.key == 19 && v.dup, "find: the last, a duplicate");

    or_json_find(TS("{\"b\":{\"a\":2}}"), TS("a"), &v);
    or_is_int(v.type, OR_JSON_ABSENT, "find: a nested key is not found");

    or_is_int(or_json_find(TS("{\"model\":1,\"model\":2}"), TS("x"), &v),
              OR_JSON_OK, "find: a duplicate model is not refused here");

    or_is_int(or_json_find(TS("{\"a\":1"), TS("a"), &v), OR_JSON_SYNTAX,
              "find: invalid");
    or_is_int(v.type, OR_JSON_ABSENT, "find: nothing reported when invalid");

    or_json_find(TS("{\"\\u0061\":true}"), TS("a"), &v);
    or_is_int(v.type, OR_JSON_TRUE, "find: an escaped key");

    or_json_find(TS("{\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\":1}"),
                 TS("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"), &v);
    or_is_int(v.type, OR_JSON_ABSENT, "find: a key over the bound");
}


static void
ts_scan_members(void)
{
    or_json_scan_t  s;
    const char     *doc;

    doc = "{\"background\":false,\"stream_options\":{\"x\":1},"
          "\"background\":true,\"model\":\"m\"}";

    or_is_int(or_json_scan(doc, strlen(doc), &s), OR_JSON_OK, "scan: ok");
    or_ok(s.background.type == OR_JSON_TRUE && s.background.dup
          && s.background.key == 45 && s.background.start == 58,
          "scan: background, the last one, a duplicate");
    or_ok(s.stream_options.type == OR_JSON_OBJECT && !s.stream_options.dup
          && s.stream_options.key == 20 && s.stream_options.start == 37
          && s.stream_options.end == 44, "scan: stream_options");
    or_ok(s.model.key == 63 && !s.model.dup, "scan: the model's key");
    or_ok(s.stream.type == OR_JSON_ABSENT && s.stream.key == 0,
          "scan: no stream");
}


static void
ts_path(void)
{
    or_ok(or_splice_usage_path(TS("/v1/chat/completions")), "path: chat");
    or_ok(or_splice_usage_path(TS("/chat/completions/")),
          "path: chat, a slash after");
    or_ok(or_splice_usage_path(TS("/api/v4/chat/completions?x=1")),
          "path: chat, a query");
    or_ok(!or_splice_usage_path(TS("/v1/responses")), "path: responses");
    or_ok(!or_splice_usage_path(TS("/v1/messages")), "path: messages");
    or_ok(!or_splice_usage_path(TS("/v1/completions")), "path: legacy");
    or_ok(!or_splice_usage_path(TS("/")), "path: /");
}


int
main(void)
{
    ts_path();
    ts_usage_cases();
    ts_remove_cases();
    ts_combined();
    ts_add();
    ts_find();
    ts_scan_members();

    return or_done();
}
