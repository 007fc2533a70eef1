/*
 * Copyright (C) ngx_omniroute authors
 *
 * The first meaningful event of a Server-Sent Events stream (R-REQ-5,
 * R-STREAM-1): before committing a 200 stream to the client, the module
 * looks at its first event; an error event there (OpenAI-compatible
 * `data: {"error":...}`, Anthropic `event: error`) can still fall over.
 * Comments (":" lines, heartbeats) and events without data are skipped.
 * Plain C, no allocation; total on any input.
 */

#ifndef _OR_SSE_H_INCLUDED_
#define _OR_SSE_H_INCLUDED_


#include "or_types.h"


typedef enum {
    OR_SSE_MORE = 0,            /* no complete meaningful event yet */
    OR_SSE_CONTENT,             /* the first event is not an error */
    OR_SSE_ERROR                /* the first event is an error */
} or_sse_first_e;


typedef struct {
    const char   *data;         /* the error event's data (JSON) */
    size_t        data_len;
    int           status;       /* HTTP status the error stands for */
} or_sse_error_t;


/*
 * Looks at buf (the stream's first len bytes).  OR_SSE_ERROR fills err:
 * data points into buf, status from a numeric "status"/"code" field
 * (400..599), else by error type (rate_limit_error 429, overloaded_error
 * 529, authentication_error 401, permission_error 403, not_found_error
 * 404, invalid_request_error 400, insufficient_quota 429, api_error 500),
 * else 502.
 */
or_sse_first_e or_sse_first_event(const char *buf, size_t len,
    or_sse_error_t *err);


#endif /* _OR_SSE_H_INCLUDED_ */
