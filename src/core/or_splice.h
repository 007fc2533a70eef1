/*
 * Copyright (C) ngx_omniroute authors
 *
 * Edits of a client's JSON body that keep every other byte: a few
 * replacements of byte ranges, decided from the spans or_json_scan()
 * reported, applied by pointing buffers into the body (nginx) or by
 * copying (or_splice_apply(): tests, fuzzing).  The body is never
 * re-serialized: numbers, escapes, key order and whitespace stay the
 * client's.
 *
 *   the model       the value replaced by the target's upstream model
 *   stream usage    a Chat Completions stream that did not ask for usage
 *                   asks for it: "stream_options":{"include_usage":true}
 *                   is added after "stream", or "include_usage":true
 *                   put into the client's stream_options object (its
 *                   include_usage value replaced when it is not true)
 *   a member        removed with its comma ("background" of the
 *                   Responses API): the object stays valid JSON
 *
 * Edits are kept sorted by position and may not overlap; an insertion (an
 * empty range) at the position where a removal starts goes first.  Plain
 * C, no allocation.
 */

#ifndef _OR_SPLICE_H_INCLUDED_
#define _OR_SPLICE_H_INCLUDED_


#include <stddef.h>

#include "or_json.h"


#define OR_SPLICE_MAX  4


typedef struct {
    size_t        start;        /* bytes [start, end) of the body ... */
    size_t        end;
    const char   *data;         /* ... become data[0, len) */
    size_t        len;
} or_splice_edit_t;


typedef struct {
    or_splice_edit_t  edit[OR_SPLICE_MAX];
    size_t            n;
} or_splice_t;


typedef enum {
    OR_SPLICE_USAGE_NONE = 0,   /* not a stream ("stream" is not true), or
                                   a stream_options that is neither an
                                   object nor null: left as it is */
    OR_SPLICE_USAGE_ASKED,      /* the client asked: include_usage true */
    OR_SPLICE_USAGE_ADDED       /* the edit asks for it; the client did
                                   not (its usage chunk is not its own) */
} or_splice_usage_e;


void or_splice_init(or_splice_t *sp);

/*
 * Adds an edit in order.  -1 when the list is full or the range overlaps
 * another edit's (nothing added), else 0.
 */
int or_splice_add(or_splice_t *sp, size_t start, size_t end,
    const char *data, size_t len);

/*
 * What a stream asks for: sp NULL only tells (ASKED, or ADDED for what
 * would be added); else the edit is added (NONE when it could not be).
 * buf, len and scan: the valid object or_json_scan() reported OK for.
 */
or_splice_usage_e or_splice_stream_usage(or_splice_t *sp, const char *buf,
    size_t len, const or_json_scan_t *scan);

/*
 * Removes the member v (key and value) of the valid object it belongs
 * to, with the comma after it (and the whitespace up to the next key),
 * else the comma before it, else alone ("{}" with its whitespace stays).
 * -1 when v is ABSENT or the edit cannot be added.
 */
int or_splice_remove(or_splice_t *sp, const char *buf, size_t len,
    const or_json_value_t *v);

/* the length of buf[0, len) once edited */
size_t or_splice_len(const or_splice_t *sp, size_t len);

/* the edited body into out (or_splice_len() bytes); returns its length */
size_t or_splice_apply(const or_splice_t *sp, const char *buf, size_t len,
    char *out);

/*
 * A request path whose body may ask for stream usage: a Chat Completions
 * path (".../chat/completions", query excluded)
 */
int or_splice_usage_path(const char *path, size_t len);

const char *or_splice_usage_name(or_splice_usage_e u);


#endif /* _OR_SPLICE_H_INCLUDED_ */
