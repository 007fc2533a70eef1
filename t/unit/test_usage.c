/*
 * Copyright (C) ngx_omniroute authors
 *
 * Token usage of non-streamed answers (or_usage): OpenAI chat, Anthropic
 * messages, OpenAI Responses, Gemini; any split of the body; values only
 * at their exact paths; bounded.
 */


#include "or_test.h"
#include "or_usage.h"


static const char  *openai_chat =
    "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion\","
    "\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\","
    "\"content\":\"the \\\"usage\\\": {\\\"prompt_tokens\\\": 99}\"},"
    "\"finish_reason\":\"stop\"}],"
    "\"usage\":{\"prompt_tokens\":19,\"completion_tokens\":10,"
    "\"total_tokens\":29,\"prompt_tokens_details\":{\"cached_tokens\":3,"
    "\"audio_tokens\":0},\"completion_tokens_details\":"
    "{\"reasoning_tokens\":4,\"accepted_prediction_tokens\":0}},"
    "\"system_fingerprint\":null}";

static const char  *anthropic =
    "{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\","
    "\"content\":[{\"type\":\"text\",\"text\":\"hi\"}],"
    "\"stop_reason\":\"end_turn\",\"stop_sequence\":null,"
    "\"usage\":{\"input_tokens\":12,\"cache_creation_input_tokens\":0,"
    "\"cache_read_input_tokens\":7,\"output_tokens\":6}}";

static const char  *responses =
    "{\"id\":\"resp_1\",\"object\":\"response\",\"output\":[{\"type\":"
    "\"message\",\"content\":[{\"type\":\"output_text\",\"text\":\"ok\"}]}],"
    "\"usage\":{\"input_tokens\":36,\"input_tokens_details\":"
    "{\"cached_tokens\":0},\"output_tokens\":87,\"output_tokens_details\":"
    "{\"reasoning_tokens\":64},\"total_tokens\":123}}";

static const char  *gemini =
    "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"x\"}]}}],"
    "\"usageMetadata\":{\"promptTokenCount\":8,\"candidatesTokenCount\":2,"
    "\"totalTokenCount\":12,\"thoughtsTokenCount\":2}}";


static or_usage_t
scan(const char *s, size_t chunk, size_t max)
{
    size_t      len, n;
    or_usage_t  u;

    or_usage_init(&u, max);
    len = strlen(s);

    while (len) {
        n = (chunk && chunk < len) ? chunk : len;
        or_usage_feed(&u, s, n);
        s += n;
        len -= n;
    }

    return u;
}


static int
same(const or_usage_t *a, const or_usage_t *b)
{
    return a->found == b->found && a->seen == b->seen
           && memcmp(a->tokens, b->tokens, sizeof(a->tokens)) == 0;
}


int
main(void)
{
    size_t       chunk;
    or_usage_t   u, whole;
    char         deep[300];
    int          i, all;

    u = scan(openai_chat, 0, 0);
    or_ok(or_usage_found(&u), "OpenAI chat: usage found");
    or_is_int(u.state, OR_USAGE_COMPLETE, "OpenAI chat: document complete");
    or_is_int(u.tokens[OR_USAGE_PROMPT], 19, "OpenAI chat: prompt_tokens");
    or_is_int(u.tokens[OR_USAGE_COMPLETION], 10,
              "OpenAI chat: completion_tokens");
    or_is_int(u.tokens[OR_USAGE_CACHED], 3,
              "OpenAI chat: prompt_tokens_details.cached_tokens");
    or_is_int(u.tokens[OR_USAGE_REASONING], 4,
              "OpenAI chat: completion_tokens_details.reasoning_tokens");
    or_is_int(u.seen, 0xf, "OpenAI chat: all four seen");

    u = scan(anthropic, 0, 0);
    or_ok(or_usage_found(&u), "Anthropic: usage found");
    or_is_int(u.tokens[OR_USAGE_PROMPT], 12, "Anthropic: input_tokens");
    or_is_int(u.tokens[OR_USAGE_COMPLETION], 6, "Anthropic: output_tokens");
    or_is_int(u.tokens[OR_USAGE_CACHED], 7,
              "Anthropic: cache_read_input_tokens");
    or_ok(!(u.seen & (1u << OR_USAGE_REASONING)),
          "Anthropic: no reasoning tokens given");

    u = scan(responses, 0, 0);
    or_ok(or_usage_found(&u), "Responses: usage found");
    or_is_int(u.tokens[OR_USAGE_PROMPT], 36, "Responses: input_tokens");
    or_is_int(u.tokens[OR_USAGE_COMPLETION], 87, "Responses: output_tokens");
    or_is_int(u.tokens[OR_USAGE_CACHED], 0,
              "Responses: input_tokens_details.cached_tokens");
    or_ok(u.seen & (1u << OR_USAGE_CACHED), "Responses: cached 0 is seen");
    or_is_int(u.tokens[OR_USAGE_REASONING], 64,
              "Responses: output_tokens_details.reasoning_tokens");

    u = scan(gemini, 0, 0);
    or_ok(or_usage_found(&u), "Gemini: usageMetadata found");
    or_is_int(u.tokens[OR_USAGE_PROMPT], 8, "Gemini: promptTokenCount");
    or_is_int(u.tokens[OR_USAGE_COMPLETION], 2,
              "Gemini: candidatesTokenCount");
    or_is_int(u.tokens[OR_USAGE_REASONING], 2, "Gemini: thoughtsTokenCount");

    /* an event of a stream: its last "usage" / "usageMetadata" member */

#define EV(str)  or_usage_event(&u, str, sizeof(str) - 1)

    or_ok(EV("{\"candidates\":[{\"content\":{\"parts\":[{\"text\":"
             "\"hi\"}],\"role\":\"model\"}}],\"usageMetadata\":"
             "{\"promptTokenCount\":11,\"candidatesTokenCount\":5,"
             "\"totalTokenCount\":20,\"cachedContentTokenCount\":3,"
             "\"thoughtsTokenCount\":4},\"modelVersion\":\"gemini-y\"}"),
          "a Gemini chunk's usageMetadata is read");
    or_is_int(u.tokens[OR_USAGE_PROMPT], 11, "event: promptTokenCount");
    or_is_int(u.tokens[OR_USAGE_COMPLETION], 5,
              "event: candidatesTokenCount");
    or_is_int(u.tokens[OR_USAGE_CACHED], 3, "event: cachedContentTokenCount");
    or_is_int(u.tokens[OR_USAGE_REASONING], 4, "event: thoughtsTokenCount");

    or_ok(EV("{\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":"
             "7,\"completion_tokens\":2}}")
          && u.tokens[OR_USAGE_PROMPT] == 7
          && u.tokens[OR_USAGE_COMPLETION] == 2,
          "a Chat usage chunk is read");
    or_ok(!EV("{\"choices\":[{\"delta\":{\"content\":"
              "\"\\\"usageMetadata\\\":{\\\"promptTokenCount\\\":9}\"}}]}"),
          "a key quoted inside text is not one");
    or_ok(!EV("{\"usageMetadataX\":{\"promptTokenCount\":9}}"),
          "a longer key is not one");
    or_ok(!EV("{\"usage\":null}"), "a null usage is none");
    or_ok(!or_usage_event(&u, NULL, 0), "no data");
    or_ok(!EV("\"usage\""), "the key at the end is none");

#undef EV

    /* any split gives the same result */

    whole = scan(openai_chat, 0, 0);
    all = 1;

    for (chunk = 1; chunk < 40; chunk++) {
        u = scan(openai_chat, chunk, 0);
        all &= same(&u, &whole);
        u = scan(anthropic, chunk, 0);
        whole = scan(anthropic, 0, 0);
        all &= same(&u, &whole);
        whole = scan(openai_chat, 0, 0);
    }

    or_ok(all, "any split of the body, one byte at a time included");

    /* only the top-level usage counts */

    u = scan("{\"choices\":[{\"usage\":{\"prompt_tokens\":5}}],"
             "\"x\":{\"usage\":{\"prompt_tokens\":6}}}", 0, 0);
    or_ok(!or_usage_found(&u), "a nested usage object is not the usage");
    or_is_int(u.seen, 0, "and gives no value");

    u = scan("{\"note\":\"\\\"usage\\\":{\\\"prompt_tokens\\\":5}\"}", 0, 0);
    or_ok(!or_usage_found(&u), "usage inside a string is text");

    u = scan("{\"usage\":{\"details\":{\"prompt_tokens\":5},"
             "\"prompt_tokens\":2}}", 0, 0);
    or_is_int(u.tokens[OR_USAGE_PROMPT], 2,
              "prompt_tokens only directly in usage");

    u = scan("{\"usage\":{\"prompt_tokens_details\":{\"reasoning_tokens\":5},"
             "\"completion_tokens_details\":{\"cached_tokens\":6}}}", 0, 0);
    or_is_int(u.seen, 0, "details keys only under their own parent");

    u = scan("{\"usage\":{\"prompt_tokens\":[1,2],\"completion_tokens\":"
             "{\"a\":3}}}", 0, 0);
    or_ok(or_usage_found(&u), "usage with non-number values: found");
    or_is_int(u.seen, 0, "but no value taken from arrays or objects");

    /* numbers */

    u = scan("{\"usage\":{\"prompt_tokens\":-3,\"completion_tokens\":2.5,"
             "\"cached\":1e3}}", 0, 0);
    or_is_int(u.seen, 0, "negative, fractional numbers are not counts");

    u = scan("{\"usage\":{\"prompt_tokens\":99999999999999999999999}}", 0, 0);
    or_ok(u.tokens[OR_USAGE_PROMPT] == OR_USAGE_VALUE_MAX,
          "a huge count is capped at 2^53");

    u = scan("{\"usage\":{\"prompt_tokens\" : 7 , \"completion_tokens\"\n:\t"
             "8\r\n}}", 0, 0);
    or_is_int(u.tokens[OR_USAGE_PROMPT] + u.tokens[OR_USAGE_COMPLETION], 15,
              "whitespace anywhere");

    /* several usage objects: the last one */

    u = scan("{\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1},"
             "\"usage\":{\"prompt_tokens\":4}}", 0, 0);
    or_is_int(u.tokens[OR_USAGE_PROMPT], 4, "a second usage replaces");
    or_is_int(u.seen, 1u << OR_USAGE_PROMPT, "all of the first");

    u = scan("{\"usage\":null,\"id\":1}", 0, 0);
    or_ok(!or_usage_found(&u), "usage null: nothing");
    or_is_int(u.state, OR_USAGE_COMPLETE, "usage null: the document ends");

    u = scan("{\"usa\\u0067e\":{\"prompt_tokens\":5}}", 0, 0);
    or_ok(!or_usage_found(&u), "an escaped key never matches");

    u = scan("{\"usage_tokens_and_a_very_long_key_name_indeed\":"
             "{\"prompt_tokens\":5}}", 0, 0);
    or_ok(!or_usage_found(&u), "a long key matches nothing");

    /* not JSON, unfinished, bounded */

    u = scan("<html>502</html>", 0, 0);
    or_is_int(u.state, OR_USAGE_STOPPED, "HTML stops the scan");
    or_ok(!or_usage_found(&u), "and finds nothing");

    u = scan("{\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":", 0, 0);
    or_ok(!or_usage_found(&u), "an unfinished usage object is not found");
    or_is_int(u.state, OR_USAGE_SCANNING, "still scanning");

    u = scan("{\"usage\":{\"prompt_tokens\":5}} trailing", 0, 0);
    or_ok(or_usage_found(&u), "after the document: found");
    or_is_int(u.state, OR_USAGE_COMPLETE, "and nothing more is read");

    u = scan("{\"id\":1} {\"usage\":{\"prompt_tokens\":5}}", 0, 0);
    or_ok(!or_usage_found(&u), "a second document is not read");

    u = scan(openai_chat, 7, 100);
    or_is_int(u.state, OR_USAGE_STOPPED, "the byte bound stops the scan");
    or_ok(!or_usage_found(&u), "before the usage object");

    u = scan(openai_chat, 7, strlen(openai_chat));
    or_ok(or_usage_found(&u), "a bound of the whole body is enough");

    for (i = 0; i < (int) sizeof(deep) - 1; i++) {
        deep[i] = (i < 150) ? '[' : ']';
    }

    deep[sizeof(deep) - 1] = '\0';

    u = scan(deep, 0, 0);
    or_is_int(u.state, OR_USAGE_STOPPED, "nesting beyond 64 levels stops");

    u = scan("{\"a\":[{\"b\":[1,2,{\"c\":\"d\"}]},[],{}],\"usage\":"
             "{\"output_tokens\":3}}", 0, 0);
    or_is_int(u.tokens[OR_USAGE_COMPLETION], 3,
              "arrays and objects before usage are skipped");

    /*
     * The first piece's members are read without the lexer where they can
     * be: a whole piece must give what byte-by-byte feeding (the lexer
     * alone) gives, state included, wherever the reader hands over.
     */

    {
        static const char  *docs[] = {
            "{\"id\":\"c\",\"choices\":[{\"message\":{\"content\":\"hi\"}}],"
            "\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1,"
            "\"total_tokens\":4}}",
            "{\"usage\":{\"prompt_tokens\":1.5,\"completion_tokens\":2}}",
            "{\"usage\":{\"prompt_tokens\":-1,\"completion_tokens\":2}}",
            "{\"usage\":{\"prompt_tokens\":99999999999999999999}}",
            "{\"usage\":{\"prompt_tokens\":1,},\"x\":1}",
            "{\"usage\":{\"prompt_tokens\":1}, \"usage\":7}",
            "{\"usage\":{\"prompt_tokens\":1},\"usage\":{\"output_tokens\":2}}",
            "{\"usage\":{\"prompt_tokens\":1} x",
            "{\"usage\":{\"prompt_tokens\":1",
            "{\"usage\":{\"pro\\u006dpt_tokens\":1}}",
            "{\"a\":tru,\"usage\":{\"input_tokens\":5}}",
            "{\"a\":1x,\"usage\":{\"input_tokens\":5}}",
            "{\"a\":[1,],\"usage\":{\"input_tokens\":5}}",
            "{\"a\":{\"b\":1,},\"usage\":{\"input_tokens\":5}}",
            "{\"a\":\"\\\"usage\\\":{\",\"usage\":{\"input_tokens\":5}}",
            "{\"usageMetadata\":{\"promptTokenCount\":2}}",
            "{\"usageX\":{\"prompt_tokens\":2}}",
            "{\"a\":1} {\"usage\":{\"prompt_tokens\":2}}",
            " \t{ \"usage\" : { \"prompt_tokens\" : 2 , \"x\" : 3 } } ",
            "{\"usage\":{\"input_tokens_details\":{\"cached_tokens\":4},"
            "\"input_tokens\":6}}",
            "{\"usage\":\"none\",\"b\":2}",
            "{\"usage\":{\"prompt_tokens_details\":{\"cached_tokens\":3},"
            "\"completion_tokens_details\":{\"reasoning_tokens\":2,"
            "\"reasoning_tokens\":5},\"prompt_tokens\":1}}",
            "{\"usage\":{\"prompt_tokens_details\":{\"cached_tokens\":3.0}}}",
            "{\"usage\":{\"prompt_tokens_details\":{\"cached_tokens\":3,}}}",
            "{\"usage\":{\"prompt_tokens_details\":{\"x\":{\"y\":1}}}}",
            "{\"usage\":{\"prompt_tokens\":{\"cached_tokens\":3}}}",
            "{\"usage\":{\"output_tokens_details\":{\"cached_tokens\":3}}}",
            "{\"usage\":{\"input_tokens_details\":{\"cached_tokens\":3} x}}",
            "{\"usage\":{\"input_tokens_details\":{\"cached_tokens\":3}",
            "{}",
            NULL
        };

        or_usage_t   one;
        const char  *d;

        all = 1;

        for (i = 0; docs[i]; i++) {
            d = docs[i];
            u = scan(d, 0, 0);
            one = scan(d, 1, 0);

            if (!same(&u, &one) || u.state != one.state) {
                printf("# whole and byte-by-byte differ: %s\n", d);
                all = 0;
            }
        }

        or_ok(all, "the first piece's reader gives the lexer's verdicts");
    }

    u = scan("{\"id\":\"c\",\"usage\":{\"prompt_tokens\":3,"
             "\"completion_tokens\":1}}", 0, 0);
    or_ok(u.found && u.tokens[OR_USAGE_PROMPT] == 3
          && u.tokens[OR_USAGE_COMPLETION] == 1
          && u.state == OR_USAGE_COMPLETE, "a small answer's usage");

    or_is_str(or_usage_kind_name(OR_USAGE_CACHED), "cached", "kind names");

    return or_done();
}
