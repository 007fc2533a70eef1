/*
 * Copyright (C) ngx_omniroute authors
 *
 * Client-chosen names (R-NAME-1): a value the client sends that the
 * gateway then uses as a name -- the model of the body (JSON-unescaped),
 * a session header -- may reach a variable, an upstream header, a log
 * line, a shared-zone or Redis key, a metric label.  It is checked once,
 * where it is read: not empty, at most max bytes, visible ASCII only
 * (0x21 .. 0x7e: no space, no control byte, no byte of 0x80 and above).
 * Anything else is refused with 400 by the caller, naming the member or
 * the header.
 *
 * or_name_escape() is for log lines that quote a value the client sent:
 * every byte outside 0x20 .. 0x7e, '"' and '\\' as \xHH, so one quoted
 * value is one line and one token.
 *
 * Total on any input; nothing is allocated.
 */

#ifndef _OR_NAME_H_INCLUDED_
#define _OR_NAME_H_INCLUDED_


#include <stddef.h>


#define OR_NAME_MODEL_MAX    256    /* the model's bytes, decoded */
#define OR_NAME_SESSION_MAX  256    /* a session header's value */


typedef enum {
    OR_NAME_OK = 0,
    OR_NAME_EMPTY,          /* no byte at all */
    OR_NAME_TOO_LONG,       /* more than max bytes */
    OR_NAME_CONTROL,        /* a byte below 0x20, or 0x7f */
    OR_NAME_NOT_PRINTABLE   /* a space, or a byte of 0x80 and above */
} or_name_rc_e;


/*
 * s[0, len) as a name of at most max bytes; *at (when not NULL) is the
 * offset of the first offending byte (max for OR_NAME_TOO_LONG, 0 for
 * OR_NAME_EMPTY and OR_NAME_OK).
 */
or_name_rc_e or_name_check(const char *s, size_t len, size_t max,
    size_t *at);

/* s[0, len) has a byte below 0x20 or 0x7f (a variable must not carry it) */
int or_name_has_control(const char *s, size_t len);

/* "ok", "empty", "too long", "a control character", "a space or ..." */
const char *or_name_problem(or_name_rc_e rc);

/*
 * The bytes of s[0, len) escaped for a log line into dst, at most size
 * bytes written (an escape is never cut); returns the number written.
 * or_name_escaped_len() is what the whole of s takes.
 */
size_t or_name_escaped_len(const char *s, size_t len);
size_t or_name_escape(char *dst, size_t size, const char *s, size_t len);


#endif /* _OR_NAME_H_INCLUDED_ */
