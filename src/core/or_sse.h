/*
 * Copyright (C) ngx_omniroute authors
 *
 * Server-Sent Events of LLM APIs (R-STREAM-1, R-REQ-5): an incremental
 * scanner that cuts a stream into events however its bytes are split
 * into buffers and has each classified (or_sse.c), and the in-band error
 * event written in the client's format (or_sse_error.c).  What an event
 * is, per stream format, is or_sse_format.h (included).  Plain C, no
 * allocation, total on any input; the memory is the or_sse_t itself (a
 * bound on the kept event name and data).
 */

#ifndef _OR_SSE_H_INCLUDED_
#define _OR_SSE_H_INCLUDED_


#include "or_types.h"
#include "or_sse_format.h"


#define OR_SSE_ERROR_EVENT_MAX 1536     /* or_sse_error_event() output */


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
    uint64_t         quick;         /* of which matched the text shape */
    unsigned         full:1;        /* every event read in full (tests) */
    unsigned         shaped:1;      /* the last event is of the shape */
    or_sse_shape_t   shape;         /* of the text deltas, or_sse_format.h */

    /* the shape's event as it is on the wire: the bytes before its text
     * (its lines' fields included) and after it (the blank line too) */
    size_t           wire_prefix;   /* 0: none */
    size_t           wire_suffix;
    size_t           wire_data;     /* where its data starts */
    size_t           wire_tail;     /* bytes after its data */
    size_t           wire_name_len;
    or_sse_format_e  wire_format;
    or_sse_kind_e    wire_kind;
    unsigned         wire_content:1;
    unsigned         wire_progress:1;
    unsigned         wire_measured:1;
    size_t           carry;         /* bytes of a delta begun, in data */
    char             wire_name[OR_SSE_NAME_MAX];
    char             wire[OR_SSE_SHAPE_MAX + OR_SSE_NAME_MAX + 16];
} or_sse_t;


void or_sse_init(or_sse_t *s);

/*
 * Consumes buf[0, len) up to and including the end of the next complete
 * event and returns the number of bytes consumed (ev->data may point
 * into buf: an event of the stream's text shape whole in it); ev->kind is
 * OR_SSE_EV_NONE when the bytes ended before an event did (all of them
 * are then consumed and kept as the event in progress).  Lines end with
 * CRLF, LF or CR (a CRLF split across buffers is one line end); a blank
 * line ends an event; ":" lines are comments; data lines are joined by
 * "\n"; one space after "field:" is dropped.
 */
size_t or_sse_feed(or_sse_t *s, const char *buf, size_t len,
    or_sse_event_t *ev);

/*
 * The same, but when the events at buf's start are deltas of the
 * stream's wire shape (the bytes of the last delta read in full around
 * another text), as many of them as follow one another are consumed at
 * once: ev stands for them all (ev->events, or_sse_format.h).  What
 * follows the stream's reader after each complete event is the same for
 * each of them but their text bytes, which add up.
 */
size_t or_sse_feed_run(or_sse_t *s, const char *buf, size_t len,
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


#endif /* _OR_SSE_H_INCLUDED_ */
