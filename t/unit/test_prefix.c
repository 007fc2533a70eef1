/*
 * Copyright (C) ngx_omniroute authors
 *
 * The start of a conversation (or_prefix) for cache-warm affinity: the
 * system prompt and the messages through the first user turn, in the
 * request shapes of Chat Completions, Anthropic Messages and the
 * Responses API; the bounds; bodies that are not what it expects.
 */


#include <string.h>

#include "or_test.h"
#include "or_prefix.h"


static char *
span(const char *buf, or_span_t *s, char *out)
{
    memcpy(out, buf + s->start, s->end - s->start);
    out[s->end - s->start] = '\0';

    return out;
}


static void
test_shapes(void)
{
    int          rc;
    char         sys[512], msg[512];
    size_t       i;
    or_prefix_t  p;

    static const struct {
        const char  *name;
        const char  *body;
        int          rc;
        const char  *system;
        const char  *messages;
        int          complete;
    } cases[] = {
        { "chat completions: system and first user message",
          "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":"
          "\"Be brief.\"},{\"role\":\"user\",\"content\":\"Hi\"},"
          "{\"role\":\"assistant\",\"content\":\"Hello\"},{\"role\":"
          "\"user\",\"content\":\"More\"}],\"stream\":true}",
          1, "",
          "[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":"
          "\"user\",\"content\":\"Hi\"}", 1 },
        { "the second turn has the same prefix",
          "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":"
          "\"Be brief.\"},{\"role\":\"user\",\"content\":\"Hi\"}]}",
          1, "",
          "[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":"
          "\"user\",\"content\":\"Hi\"}", 1 },
        { "role after content, whitespace",
          "{ \"messages\" : [ { \"content\" : [1, {\"x\": \"]\"}], "
          "\"role\" : \"user\" } , {\"role\":\"user\"} ] }",
          1, "",
          "[ { \"content\" : [1, {\"x\": \"]\"}], \"role\" : \"user\" }",
          1 },
        { "anthropic: top-level system after the messages",
          "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],"
          "\"system\":[{\"type\":\"text\",\"text\":\"You are \\\"X\\\"\"}],"
          "\"max_tokens\":5}",
          1, "[{\"type\":\"text\",\"text\":\"You are \\\"X\\\"\"}]",
          "[{\"role\":\"user\",\"content\":\"Hi\"}", 1 },
        { "responses api: instructions and an input string",
          "{\"instructions\":\"Be kind\",\"input\":\"Tell me\"}",
          1, "\"Be kind\"", "\"Tell me\"", 1 },
        { "responses api: input items, a tool call before the user",
          "{\"input\":[{\"type\":\"function_call\",\"name\":\"f\"},"
          "{\"type\":\"message\",\"role\":\"user\",\"content\":\"q\"},"
          "{\"role\":\"user\"}]}",
          1, "",
          "[{\"type\":\"function_call\",\"name\":\"f\"},{\"type\":"
          "\"message\",\"role\":\"user\",\"content\":\"q\"}", 1 },
        { "no user turn: the whole array",
          "{\"messages\":[{\"role\":\"system\",\"content\":\"s\"},1]}",
          1, "", "[{\"role\":\"system\",\"content\":\"s\"},1]", 1 },
        { "an empty array",
          "{\"messages\":[]}", 1, "", "[]", 1 },
        { "a nested \"messages\" is not the top-level one",
          "{\"metadata\":{\"messages\":[{\"role\":\"user\"}]}}",
          0, "", "", 0 },
        { "\"role\":\"user\" nested deeper is not the element's",
          "{\"messages\":[{\"content\":{\"role\":\"user\"}},"
          "{\"role\":\"user\",\"content\":\"x\"}]}",
          1, "",
          "[{\"content\":{\"role\":\"user\"}},{\"role\":\"user\","
          "\"content\":\"x\"}", 1 },
        { "an escaped key is not compared",
          "{\"m\\u0065ssages\":[{\"role\":\"user\"}]}", 0, "", "", 0 },
        { "messages not an array or string",
          "{\"messages\":{\"role\":\"user\"}}", 0, "", "", 0 },
        { "no messages at all", "{\"model\":\"m\"}", 0, "", "", 0 },
        { "not an object", "[{\"messages\":[]}]", 0, "", "", 0 },
        { "empty", "", 0, "", "", 0 },
        { "truncated body", "{\"messages\":[{\"role\":\"user\",\"con",
          1, "", "[{\"role\":\"user\",\"con", 0 },
        { "garbage after a member", "{\"system\":\"s\" x \"messages\":[]}",
          0, "", "", 0 },
    };

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        rc = or_prefix_find(cases[i].body, strlen(cases[i].body), 1 << 20,
                            1 << 16, &p);

        or_is_int(rc, cases[i].rc, "%s: found", cases[i].name);
        or_is_str(span(cases[i].body, &p.system, sys), cases[i].system,
                  "%s: system", cases[i].name);
        or_is_str(span(cases[i].body, &p.messages, msg), cases[i].messages,
                  "%s: messages", cases[i].name);
        or_is_int(p.complete, cases[i].complete, "%s: complete",
                  cases[i].name);
    }
}


static void
test_bounds(void)
{
    char         out[512];
    const char  *body;
    or_prefix_t  p;

    body = "{\"tools\":[1,2,3],\"messages\":[{\"role\":\"user\",\"content\":"
           "\"a long first turn\"}]}";

    or_is_int(or_prefix_find(body, strlen(body), 1 << 20, 20, &p), 1,
              "max_span: found");
    or_is_str(span(body, &p.messages, out), "[{\"role\":\"user\",\"con",
              "max_span: the first 20 bytes of the first turn");
    or_is_int(p.complete, 0, "max_span: not complete");

    or_is_int(or_prefix_find(body, strlen(body), 10, 1 << 16, &p), 0,
              "max_scan: messages beyond the walk are not found");

    or_is_int(or_prefix_find(body, strlen(body), 40, 1 << 16, &p), 1,
              "max_scan inside the messages: found");
    or_is_int(p.messages.end, 40, "max_scan: cut at the bound");
    or_is_int(p.complete, 0, "max_scan: not complete");

    body = "{\"system\":\"0123456789abcdef\",\"messages\":[]}";
    or_is_int(or_prefix_find(body, strlen(body), 1 << 20, 8, &p), 1,
              "a long system prompt: found");
    or_is_str(span(body, &p.system, out), "\"0123456",
              "a long system prompt: its first max_span bytes");
}


int
main(void)
{
    test_shapes();
    test_bounds();

    return or_done();
}
