/*
 * Copyright (C) ngx_omniroute authors
 *
 * What an event of an LLM API's Server-Sent Events stream is, in the
 * stream's own format (R-STREAM-1, R-REQ-5): OpenAI Chat Completions
 * chunks, OpenAI Responses API events, Anthropic Messages events.  The
 * event and its kinds and formats are what the scanner (or_sse.h) hands
 * the classifier; the classifier reads the event's JSON with a small
 * tolerant member reader over or_json.h's reading primitives.  Plain C,
 * no allocation, total on any input.
 *
 * The commit point of a stream is its first CONTENT event:
 *
 *   format      content (commits)                 not content
 *   Chat        a delta with non-empty content,   the role-only chunk
 *               refusal, reasoning_content /      (content ""), a chunk
 *               reasoning / reasoning_text, or    with only finish_reason,
 *               tool_calls / function_call        the usage-only chunk
 *                                                 (choices: [])
 *   Responses   response.output_text.delta,       response.created /
 *               response.refusal.delta,           in_progress / queued,
 *               reasoning deltas with text,       output_item.added,
 *               *_call*.delta (tool arguments)    content_part.added,
 *                                                 every *.done
 *   Anthropic   text_delta, thinking_delta with   message_start,
 *               text, input_json_delta,           content_block_start of
 *               citations_delta, a                an empty text/thinking
 *               content_block_start of tool_use   block, ping,
 *               (it names the tool) or with       content_block_stop,
 *               text                              message_delta,
 *                                                 signature_delta
 *   any         an event whose data is not JSON   comments (": ping"),
 *               of a known shape (OTHER)          events without data
 *
 * Refusals and filters are content too (they commit, ev->refusal): a
 * Chat finish_reason "content_filter" (or Gemini's SAFETY...), an
 * Anthropic message_delta with stop_reason "refusal"; a Responses
 * response.incomplete for content_filter is terminal and refusal.
 *
 * A malformed event (data that opens a JSON object and is not valid
 * JSON, within the kept bound) is an error event of status 502 with
 * ev->malformed: before content it falls over, after content it ends the
 * stream (issue 25).
 *
 * Error events: Chat/any `data: {"error": ...}` (a top-level "error"
 * member that is not null), Anthropic and Responses `event: error` /
 * `"type":"error"`, Responses `response.failed`.  Terminal events:
 * `data: [DONE]`, `message_stop`, `response.completed`,
 * `response.incomplete`.
 *
 * Progress (restarts the content-stall budget, R-STREAM-3): text, tool
 * and reasoning frames, an empty thinking_delta included (a reasoning
 * model thinking), a signature_delta only when its signature is not
 * empty; never metadata, heartbeats or done events.
 */

#ifndef _OR_SSE_FORMAT_H_INCLUDED_
#define _OR_SSE_FORMAT_H_INCLUDED_


#include "or_types.h"


#define OR_SSE_NAME_MAX        48       /* event: field kept */
#define OR_SSE_DATA_MAX        4096     /* data kept per event */


/* the bytes s[0, l) are the string literal lit */
#define or_sse_is(s, l, lit)                                                  \
    ((l) == sizeof(lit) - 1 && memcmp(s, lit, sizeof(lit) - 1) == 0)


typedef enum {
    OR_SSE_FMT_UNKNOWN = 0,
    OR_SSE_FMT_CHAT,                /* OpenAI Chat Completions chunks */
    OR_SSE_FMT_RESPONSES,           /* OpenAI Responses API */
    OR_SSE_FMT_ANTHROPIC            /* Anthropic Messages */
} or_sse_format_e;


typedef enum {
    OR_SSE_EV_NONE = 0,             /* no complete event yet */
    OR_SSE_EV_HEARTBEAT,            /* comments only, no data, a ping */
    OR_SSE_EV_META,                 /* metadata (not content) */
    OR_SSE_EV_TEXT,                 /* text (or refusal) delta */
    OR_SSE_EV_REASONING,            /* reasoning / thinking frame */
    OR_SSE_EV_TOOL,                 /* tool-call frame */
    OR_SSE_EV_OTHER,                /* not of a known shape: content */
    OR_SSE_EV_ERROR,
    OR_SSE_EV_DONE                  /* the format's terminal event */
} or_sse_kind_e;


typedef struct {
    or_sse_kind_e    kind;
    or_sse_format_e  format;        /* this event's, or UNKNOWN */
    unsigned         content:1;     /* the commit point */
    unsigned         progress:1;    /* restarts the content-stall budget */
    unsigned         finish:1;      /* Chat: a non-null finish_reason */
    unsigned         refusal:1;     /* a refusal or filter: Chat
                                       finish_reason content_filter (and
                                       Gemini's SAFETY...), Anthropic
                                       stop_reason refusal, Responses
                                       incomplete for content_filter; an
                                       answer, content (it commits) */
    unsigned         truncated:1;   /* data longer than OR_SSE_DATA_MAX */
    unsigned         malformed:1;   /* data that starts as a JSON object
                                       and is not one (cut, garbled): an
                                       ERROR of status 502 (issue 25) */
    unsigned         usage_only:1;  /* Chat: the usage chunk, a "usage"
                                       object and no choice (choices []) */
    unsigned         usage:1;       /* may carry token usage, worth a
                                       look: Chat a top-level "usage"
                                       object or a finish_reason (Groq's
                                       x_groq.usage); Anthropic and
                                       Responses
                                       every event but their text,
                                       reasoning and tool deltas (whose
                                       shapes have none); an error, an
                                       event of no known shape and one
                                       cut by the data bound */
    size_t           text_bytes;    /* UTF-8 bytes of text deltas */
    int              status;        /* OR_SSE_EV_ERROR: HTTP status it
                                       stands for, or_sse_error_status() */
    const char      *name;          /* event: field (may be empty) */
    size_t           name_len;
    const char      *data;          /* the kept data (lines joined by
                                       "\n"); valid until the next feed */
    size_t           data_len;
    size_t           data_total;    /* all data bytes of the event */
    size_t           bytes;         /* raw bytes of the event on the wire
                                       (since the previous event) */
    size_t           events;        /* the events this one stands for:
                                       1, or or_sse_feed_run()'s deltas
                                       of the wire shape (bytes and
                                       text_bytes their sums, data the
                                       last one's) */
    const char      *text_at;       /* TEXT: the one string text_bytes
                                       measured (its '"' in data), NULL
                                       for none or several */
} or_sse_event_t;


/*
 * The shape of a stream's deltas (R-STREAM-1, issue 27): a provider
 * sends its text deltas as one JSON skeleton around the text, the same
 * bytes from one event to the next (Chat: id, created, model, the choice
 * and its delta; Anthropic: the content_block_delta of a text_delta); so
 * too its tool-call argument deltas (Chat "arguments", Anthropic
 * "partial_json") and reasoning deltas (Chat "reasoning_content",
 * "reasoning", "reasoning_text", Anthropic "thinking"), whose strings the
 * reading looks at only for being empty or not.
 * Once a delta has been classified in full, its bytes before and after
 * its text are kept; an event with the same name and the same bytes
 * around a different text (any JSON string: its escapes are read as the
 * full reading reads them) is classified as that delta was, without
 * reading its JSON again: TEXT, the text's decoded length.  Anything
 * else (another skeleton, a finish_reason, usage, an error, an event cut
 * by the data bound) is read in full.  The outcome is the full
 * reading's, byte for byte of the event (t/unit/test_sse.c and
 * fuzz/fuzz_sse.c compare the two).
 */

#define OR_SSE_SHAPE_MAX       512      /* skeleton bytes kept */

typedef struct {
    size_t           prefix;        /* bytes up to the text's '"'; 0: none */
    size_t           suffix;        /* bytes after its closing '"' */
    size_t           name_len;
    or_sse_format_e  format;
    or_sse_kind_e    kind;          /* TEXT, TOOL or REASONING */
    unsigned         content:1;
    unsigned         progress:1;
    unsigned         measured:1;    /* text_bytes: the string's length */
    char             name[OR_SSE_NAME_MAX];
    char             bytes[OR_SSE_SHAPE_MAX];
} or_sse_shape_t;


/* the shape of ev (classified in full from name and data), if it has one:
 * 1 learned */
int or_sse_shape_learn(or_sse_shape_t *sh, const char *name,
    size_t name_len, const char *data, size_t data_len,
    const or_sse_event_t *ev);

/*
 * 1 and ev filled as or_sse_classify() would fill it when the event is
 * of the shape; 0 otherwise (ev untouched).
 */
int or_sse_shape_match(const or_sse_shape_t *sh, const char *name,
    size_t name_len, const char *data, size_t data_len, size_t data_total,
    or_sse_event_t *ev);


/* what one event is (the scanner calls it on each event) */
void or_sse_classify(const char *name, size_t name_len, const char *data,
    size_t data_len, size_t data_total, or_sse_event_t *ev);

/*
 * The HTTP status an error event (or an error body) stands for: a
 * numeric "status" or "code" (400..599), else quota text
 * (or_classify_quota_text(), JSON escapes decoded) 429, else the error
 * type: insufficient_quota / rate_limit_error / rate_limit_exceeded 429,
 * overloaded_error 529, authentication_error 401, permission_error 403,
 * not_found_error 404, invalid_request_error 400, api_error /
 * server_error 500; else 502.
 */
int or_sse_error_status(const char *data, size_t len);

/*
 * The error's message text, decoded from the JSON (error.message,
 * message, response.error.message, or error as a string) into out (at
 * most size - 1 bytes, NUL-terminated, cut on a UTF-8 boundary); control
 * characters become spaces.  Returns the length (0: none).
 */
size_t or_sse_error_message(const char *data, size_t len, char *out,
    size_t size);

/* the stream format a client asked for, from its request path:
 * ".../messages" Anthropic, ".../responses" Responses, else Chat */
or_sse_format_e or_sse_format_of_path(const char *path, size_t len);


typedef enum {
    OR_API_OPENAI = 0,              /* Chat, Responses, embeddings, ... */
    OR_API_ANTHROPIC,               /* Messages */
    OR_API_GEMINI                   /* generateContent, native */
} or_api_e;

/*
 * The API a client request speaks, from its path: ".../messages" (and
 * ".../messages/count_tokens") Anthropic, a ":generateContent",
 * ":streamGenerateContent" or ":countTokens" method Gemini, else OpenAI.
 */
or_api_e or_api_of_path(const char *path, size_t len);

/*
 * The model segment of a Gemini native path, where the target's upstream
 * model goes in an attempt's URL: in ".../models/{model}:{method}" (the
 * method one of or_api_of_path()'s Gemini ones, a query after "?"
 * ignored) the bytes after the first "/models/" (or a leading "models/")
 * up to the method's ":", as [*start, *end).  1: found; 0: not a Gemini
 * path of that shape (the URL is the client's, unchanged).
 */
int or_api_path_model(const char *path, size_t len, size_t *start,
    size_t *end);

/*
 * The API a provider serves, from its base URL and whether it declares
 * an anthropic-version header: that header, an "anthropic" host
 * (api.anthropic.com) or a path ending in "/anthropic" (the Anthropic
 * endpoints of DeepSeek, MiniMax, Z.ai, ...) Anthropic; the host
 * generativelanguage.googleapis.com without "/openai" in the path
 * Gemini; else OpenAI.  The emergency target serves only requests of
 * its API (issue 25).
 */
or_api_e or_api_of_provider(const char *url, size_t len,
    int anthropic_header);

const char *or_sse_kind_name(or_sse_kind_e kind);
const char *or_sse_format_name(or_sse_format_e fmt);


#endif /* _OR_SSE_FORMAT_H_INCLUDED_ */
