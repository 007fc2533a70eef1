/*
 * Copyright (C) ngx_omniroute authors
 *
 * The start of a conversation in a chat request body, for cache-warm
 * affinity (R-AFF-1 without a session header): follow-up turns of one
 * conversation repeat its system prompt and first user turn byte for
 * byte, so a hash of those bytes names the conversation and keeps it on
 * the connection whose provider-side prompt cache is warm.
 *
 * or_prefix_find() walks the top-level members of a JSON object body
 * (valid JSON is expected, as or_json_scan() checks it first; any input is
 * safe) and reports two spans, offsets into buf:
 *
 *   system     the value of the first top-level "system" (Anthropic
 *              Messages) or "instructions" (Responses API) member;
 *              empty when there is none
 *   messages   the top-level "messages" (Chat Completions, Anthropic) or
 *              "input" (Responses API) value: from its '[' through the
 *              end of its first element whose "role" is "user" (the
 *              system and developer messages before it included); the
 *              whole array when no element is a user turn; a string
 *              "input" as it is
 *
 * Bounded: the walk stops after max_scan bytes of the body, and a span
 * longer than max_span is cut to its first max_span bytes (complete is 0
 * then): a prefix of the first turn still names the conversation.
 * Returns 1 when messages was found, else 0 (no affinity).
 */

#ifndef _OR_PREFIX_H_INCLUDED_
#define _OR_PREFIX_H_INCLUDED_


#include <stddef.h>


typedef struct {
    size_t      start;
    size_t      end;            /* one past; start == end: none */
} or_span_t;


typedef struct {
    or_span_t   system;
    or_span_t   messages;
    int         complete;       /* the first user turn ends in the span */
} or_prefix_t;


int or_prefix_find(const char *buf, size_t len, size_t max_scan,
    size_t max_span, or_prefix_t *out);


#endif /* _OR_PREFIX_H_INCLUDED_ */
