/*
 * Copyright (C) ngx_omniroute authors
 *
 * Server-Sent Events of LLM APIs (R-STREAM-1, R-REQ-5): an incremental
 * scanner that cuts a stream into events however its bytes are split
 * into buffers, and a classifier that says what each event is in the
 * stream's own format: OpenAI Chat Completions chunks, OpenAI Responses
 * API events, Anthropic Messages events.  Plain C, no allocation, total
 * on any input; the memory is the or_sse_t itself (a bound on the kept
 * event name and data).
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

#ifndef _OR_SSE_H_INCLUDED_
#define _OR_SSE_H_INCLUDED_


#include "or_types.h"


#define OR_SSE_NAME_MAX        48       /* event: field kept */
#define OR_SSE_DATA_MAX        4096     /* data kept per event */
#define OR_SSE_ERROR_EVENT_MAX 1536     /* or_sse_error_event() output */


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
    unsigned         truncated:1;   /* data longer than OR_SSE_DATA_MAX */
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
} or_sse_event_t;


/* the scanner's state; every field is private except format and counts */
typedef struct {
    unsigned         line;          /* what the current line is */
    unsigned         cr:1;          /* the last byte was a CR */
    unsigned         space:1;       /* a value's first space to skip */
    unsigned         lines:1;       /* the event has a field line */
    size_t           line_len;      /* bytes of the current line */
    size_t           fname_len;
    char             fname[8];
    size_t           data_lines;
    size_t           name_len;
    char             name[OR_SSE_NAME_MAX];
    size_t           data_len;
    size_t           data_total;
    char             data[OR_SSE_DATA_MAX];
    size_t           bytes;         /* of the event in progress */

    or_sse_format_e  format;        /* the first format recognized */
    unsigned         finished:1;    /* Chat: a finish_reason was seen */
    uint64_t         events;        /* events dispatched */
} or_sse_t;


void or_sse_init(or_sse_t *s);

/*
 * Consumes buf[0, len) up to and including the end of the next complete
 * event and returns the number of bytes consumed; ev->kind is
 * OR_SSE_EV_NONE when the bytes ended before an event did (all of them
 * are then consumed and kept as the event in progress).  Lines end with
 * CRLF, LF or CR (a CRLF split across buffers is one line end); a blank
 * line ends an event; ":" lines are comments; data lines are joined by
 * "\n"; one space after "field:" is dropped.
 */
size_t or_sse_feed(or_sse_t *s, const char *buf, size_t len,
    or_sse_event_t *ev);

/*
 * At the end of a stream: the event in progress (an incomplete last line
 * included) is dispatched as if a blank line followed.  Returns 1 and
 * fills ev when it had data, else 0.
 */
int or_sse_end(or_sse_t *s, or_sse_event_t *ev);

/*
 * The data of one complete event from its raw bytes (the ev->bytes that
 * ended with it), when it is a single data line: *start and *len are its
 * value's place in raw, and 1 is returned; 0 for no data line or several
 * (their joined data is not one span of raw).
 */
int or_sse_data_span(const char *raw, size_t len, size_t *start,
    size_t *dlen);

/* bytes of an incomplete event are pending (since the last event) */
size_t or_sse_pending(const or_sse_t *s);

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

/*
 * An in-band terminal error event in the client's format, into buf (of
 * OR_SSE_ERROR_EVENT_MAX bytes, say); returns its length.  A message that
 * does not fit once escaped is cut (at most 512 of its bytes are used,
 * whole UTF-8 sequences only): the event is always complete JSON.
 *
 *   Chat       data: {"error":{"message":M,"type":T,"code":C,
 *              "status":S[,"retry_after":R]}}
 *   Responses  event: error
 *              data: {"type":"error","code":C,"message":M,"param":null,
 *              "status":S[,"retry_after":R],"error":{"type":T,"code":C,
 *              "message":M}}
 *   Anthropic  event: error
 *              data: {"type":"error","error":{"type":T,"message":M},
 *              "status":S[,"retry_after":R]}
 *
 * T from the status (Anthropic: rate_limit_error, overloaded_error,
 * api_error, ...; OpenAI: rate_limit_error, server_error,
 * invalid_request_error, ...); retry_after_s < 0: no retry_after.  The
 * event ends with a blank line; no [DONE] follows it.  message is plain
 * text (escaped here); code a plain token.
 */
size_t or_sse_error_event(char *buf, size_t size, or_sse_format_e fmt,
    int status, const char *code, const char *message, size_t message_len,
    int retry_after_s);

const char *or_sse_kind_name(or_sse_kind_e kind);
const char *or_sse_format_name(or_sse_format_e fmt);


#endif /* _OR_SSE_H_INCLUDED_ */
