/*
 * Copyright (C) ngx_omniroute authors
 *
 * R-REQ-5, R-STREAM-1: the first meaningful event of an SSE stream.
 */


#include "or_test.h"
#include "or_sse.h"


static or_sse_first_e
first(const char *s, or_sse_error_t *err)
{
    return or_sse_first_event(s, strlen(s), err);
}


int
main(void)
{
    or_sse_error_t  err;

    memset(&err, 0, sizeof(err));

    or_is_int(first("", &err), OR_SSE_MORE, "R-REQ-5 empty: need more");
    or_is_int(first("data: {\"id\":1}", &err), OR_SSE_MORE,
              "R-REQ-5 an event without its blank line: need more");
    or_is_int(first("data: {\"id\":1}\n\n", &err), OR_SSE_CONTENT,
              "R-REQ-5 a content event");
    or_is_int(first(": keepalive\n\n: ping\n\ndata: {\"id\":1}\n\n", &err),
              OR_SSE_CONTENT, "R-STREAM-1 comments and heartbeats skipped");
    or_is_int(first(": keepalive\n\n", &err), OR_SSE_MORE,
              "R-STREAM-1 only a heartbeat: need more");
    or_is_int(first("event: message_start\r\ndata: {\"type\":"
                    "\"message_start\"}\r\n\r\n", &err),
              OR_SSE_CONTENT, "R-STREAM-1 CRLF lines, Anthropic start");

    or_is_int(first("data: {\"error\":{\"message\":\"quota\",\"type\":"
                    "\"insufficient_quota\"}}\n\n", &err),
              OR_SSE_ERROR, "R-REQ-5 OpenAI-style error event");
    or_is_int(err.status, 429, "R-REQ-5 insufficient_quota stands for 429");
    or_ok(err.data_len > 0 && err.data[0] == '{',
          "R-REQ-5 the error data is the JSON");

    or_is_int(first("event: error\ndata: {\"type\":\"error\",\"error\":"
                    "{\"type\":\"overloaded_error\",\"message\":"
                    "\"Overloaded\"}}\n\n", &err),
              OR_SSE_ERROR, "R-REQ-5 Anthropic error event");
    or_is_int(err.status, 529, "R-REQ-5 overloaded_error stands for 529");

    or_is_int(first("data: {\"error\":{\"code\":503,\"message\":\"x\"}}\n\n",
                    &err),
              OR_SSE_ERROR, "R-REQ-5 error with a numeric code");
    or_is_int(err.status, 503, "R-REQ-5 the numeric code is the status");

    or_is_int(first("data: {\"error\":\"boom\"}\n\n", &err), OR_SSE_ERROR,
              "R-REQ-5 bare error string");
    or_is_int(err.status, 502, "R-REQ-5 unknown error type: 502");

    or_is_int(first("data: {\"choices\":[{\"delta\":{\"content\":"
                    "\"error\"}}]}\n\n", &err),
              OR_SSE_CONTENT, "R-REQ-5 the word error in content is content");
    or_is_int(first("data: [DONE]\n\n", &err), OR_SSE_CONTENT,
              "R-REQ-5 [DONE] is not an error");
    or_is_int(first("data: x\r", &err), OR_SSE_MORE,
              "R-REQ-5 a lone CR at the end: need more");

    return or_done();
}
