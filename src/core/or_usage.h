/*
 * Copyright (C) ngx_omniroute authors
 *
 * Token usage of a non-streamed JSON answer: the top-level "usage" object
 * of OpenAI chat completions (prompt_tokens, completion_tokens,
 * prompt_tokens_details.cached_tokens,
 * completion_tokens_details.reasoning_tokens), Anthropic messages
 * (input_tokens, output_tokens, cache_read_input_tokens) and the OpenAI
 * Responses API (input_tokens, output_tokens,
 * input_tokens_details.cached_tokens,
 * output_tokens_details.reasoning_tokens), and Gemini's "usageMetadata"
 * (promptTokenCount, candidatesTokenCount, cachedContentTokenCount,
 * thoughtsTokenCount; totalTokenCount is their sum and not kept).
 *
 * A bounded scan, no tree: the body is fed in pieces as it passes through
 * (any split, one byte at a time included); the scanner keeps a few words
 * of state (depth, the key at each of the first levels, the number being
 * read) and never looks back.  Values are taken only at their exact paths;
 * anything that is not JSON stops the scan (what was found stays).  Plain
 * C, no allocation; total on any input.
 *
 * The first piece is read member by member without the lexer where the
 * reader can tell what the lexer would (the members before "usage"
 * skipped, the usage object's numbers read in place); the lexer takes
 * over in its state at the member where the reader cannot (same results
 * on any input: t/unit/test_usage.c, fuzz/fuzz_usage.c).
 */

#ifndef _OR_USAGE_H_INCLUDED_
#define _OR_USAGE_H_INCLUDED_


#include "or_types.h"


typedef enum {
    OR_USAGE_PROMPT = 0,        /* prompt_tokens, input_tokens */
    OR_USAGE_COMPLETION,        /* completion_tokens, output_tokens */
    OR_USAGE_CACHED,            /* cached prompt tokens */
    OR_USAGE_REASONING,         /* reasoning tokens of the completion */
    OR_USAGE_KINDS
} or_usage_kind_e;


#define OR_USAGE_KEY_MAX     32         /* longer keys match nothing */
#define OR_USAGE_DEPTH_MAX   64         /* deeper nesting stops the scan */
#define OR_USAGE_VALUE_MAX   ((uint64_t) 1 << 53)    /* larger: capped */


typedef enum {
    OR_USAGE_SCANNING = 0,
    OR_USAGE_COMPLETE,          /* the document ended */
    OR_USAGE_STOPPED            /* not JSON, too deep, or the byte bound */
} or_usage_state_e;


typedef struct {
    uint64_t          tokens[OR_USAGE_KINDS];
    unsigned          seen;         /* bit (1 << kind) per value found */
    unsigned          found;        /* a usage object was read whole */
    or_usage_state_e  state;

    /* the scanner's state: private */
    size_t            max;          /* bytes to look at, 0: no bound */
    size_t            fed;
    uint64_t          arrays;       /* bit d: level d+1 is an array */
    uint64_t          number;
    int               depth;
    int               lex;
    int               key[4];       /* the key at levels 1..3 */
    int               value_key;    /* key of the number being read */
    int               bad_number;
    int               in_usage;     /* the usage object's level, or 0 */
    size_t            klen;
    char              kbuf[OR_USAGE_KEY_MAX];
} or_usage_t;


/* max: how many bytes of the body to look at (0: all) */
void or_usage_init(or_usage_t *u, size_t max);

void or_usage_feed(or_usage_t *u, const char *p, size_t len);

/* a usage object was read whole (its values are in u->tokens) */
int or_usage_found(const or_usage_t *u);

const char *or_usage_kind_name(or_usage_kind_e kind);

/*
 * The usage an event of a stream carries: the data's last top-level-looking
 * "usage" or "usageMetadata" member (Chat's usage chunk, Anthropic's
 * message_start and message_delta, Responses' response.completed,
 * every Gemini chunk) read as if it were the first member of an object,
 * so that its own members end the scan.  The key is found by its quoted
 * name (an event's text cannot hold an unescaped quote).  1: a usage
 * object was read whole into u; 0: none.
 */
int or_usage_event(or_usage_t *u, const char *data, size_t len);


#endif /* _OR_USAGE_H_INCLUDED_ */
