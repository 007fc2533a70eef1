/*
 * Copyright (C) ngx_omniroute authors
 *
 * Upstream status restatement (R-CLASS-1): some gateways report a
 * temporary quota exhaustion with a non-retryable status (agentrouter:
 * 403/400 "额度不足").  A restatement rule rewrites the status (and adds a
 * Retry-After for the client) before classification runs; the body is
 * never touched.
 *
 * Rules are config-time data owned by the caller; matching allocates
 * nothing.  Markers are NUL-terminated strings matched as ASCII
 * case-insensitive substrings of the body (UTF-8 bytes match exactly).
 */

#ifndef _OR_RESTATE_H_INCLUDED_
#define _OR_RESTATE_H_INCLUDED_


#include "or_types.h"


#define OR_RESTATE_MAX_STATUSES  8
#define OR_RESTATE_MAX_MARKERS   8
#define OR_MARKER_MAX_LEN        256     /* bytes, any marker or match */


typedef struct {
    const char   *id;
    int           from_statuses[OR_RESTATE_MAX_STATUSES];   /* 0 ends */
    int           to_status;
    const char   *text_markers[OR_RESTATE_MAX_MARKERS];     /* NULL ends;
                                                             any one; none:
                                                             status alone */
    const char   *exclude_markers[OR_RESTATE_MAX_MARKERS];  /* NULL ends;
                                                             any one vetoes */
    int           retry_after_s;      /* Retry-After for the client, -1 */
} or_restate_rule_t;


typedef struct {
    int           status;             /* restated, or the original */
    int           retry_after_s;      /* -1: none */
    const char   *rule_id;            /* NULL: not restated */
} or_restate_t;


/*
 * The first rule (in order) whose from_statuses holds status, whose
 * exclude markers are all absent and (if it has text markers) one of
 * whose text markers is present restates.  Returns 1 when restated; out
 * is always filled.
 */
int or_restate_apply(const or_restate_rule_t *rules, size_t n, int status,
    const char *body, size_t len, or_restate_t *out);

/* built-in rules of a provider catalog name ("agentrouter"), or NULL */
const or_restate_rule_t *or_restate_builtin(const char *provider,
    size_t len, size_t *n);

/* NULL when valid, else a static message for nginx -t / the admin API */
const char *or_restate_rule_validate(const or_restate_rule_t *rule);

/* 1 if any of the NULL-terminated markers (at most max) occurs in text */
int or_markers_any(const char *const *markers, size_t max, const char *text,
    size_t len);


#endif /* _OR_RESTATE_H_INCLUDED_ */
