/*
 * Copyright (C) ngx_omniroute authors
 *
 * The SSE scanner: a stream cut into lines, fields and events however its
 * bytes are split into buffers, each event handed to the classifier
 * (or_sse_format.c); see or_sse.h.
 */


#include <string.h>

#include "or_sse.h"
#include "or_run.h"


#define OR_SSE_LINE_FIELD     0     /* the field name, before ':' */
#define OR_SSE_LINE_COMMENT   1
#define OR_SSE_LINE_DATA      2
#define OR_SSE_LINE_EVENT     3
#define OR_SSE_LINE_IGNORE    4     /* id:, retry:, unknown fields */


static size_t or_sse_feed_upto(or_sse_t *s, const char *buf, size_t len,
    or_sse_event_t *ev, size_t max);
static size_t or_sse_wire(or_sse_t *s, const char *buf, const char *last,
    or_sse_event_t *ev, size_t max, int *more);
static inline __attribute__((always_inline)) size_t or_sse_wire_one(
    const or_sse_t *s, const char *buf, const char *last, size_t *text,
    int *more);
static void or_sse_wire_event(or_sse_t *s, const char *buf,
    const char *last, size_t one, size_t count, size_t text,
    or_sse_event_t *ev);
static size_t or_sse_carry(or_sse_t *s, const char *buf, const char *last,
    or_sse_event_t *ev);
static void or_sse_uncarry(or_sse_t *s, size_t n);
static size_t or_sse_scan(or_sse_t *s, const char *buf, const char *last,
    or_sse_event_t *ev);
static size_t or_sse_whole(or_sse_t *s, const char *buf, const char *last,
    or_sse_event_t *ev);
static void or_sse_byte(or_sse_t *s, unsigned char c);
static size_t or_sse_run(or_sse_t *s, const char *p, const char *last);
static int or_sse_eol(or_sse_t *s);
static void or_sse_field(or_sse_t *s);
static void or_sse_data_byte(or_sse_t *s, char c);
static void or_sse_dispatch(or_sse_t *s, or_sse_event_t *ev);


void
or_sse_init(or_sse_t *s)
{
    memset(s, 0, offsetof(or_sse_t, data));
    s->data_len = 0;
    s->data_total = 0;
    s->bytes = 0;
    s->format = OR_SSE_FMT_UNKNOWN;
    s->finished = 0;
    s->events = 0;
    s->quick = 0;
    s->full = 0;
    s->shaped = 0;
    s->shape.prefix = 0;
    s->wire_prefix = 0;
    s->carry = 0;
}


size_t
or_sse_feed(or_sse_t *s, const char *buf, size_t len, or_sse_event_t *ev)
{
    return or_sse_feed_upto(s, buf, len, ev, 1);
}


size_t
or_sse_feed_run(or_sse_t *s, const char *buf, size_t len, or_sse_event_t *ev)
{
    return or_sse_feed_upto(s, buf, len, ev, (size_t) -1);
}


/* max: how many events of the wire shape one ev may stand for */

static size_t
or_sse_feed_upto(or_sse_t *s, const char *buf, size_t len,
    or_sse_event_t *ev, size_t max)
{
    int          more;
    size_t       n;
    const char  *last;

    last = buf + len;

    ev->kind = OR_SSE_EV_NONE;

    if (s->carry) {
        /* a delta of the wire shape begun in an earlier buffer */
        return or_sse_carry(s, buf, last, ev);
    }

    if (s->bytes == 0 && s->line == OR_SSE_LINE_FIELD && !s->cr) {
        /* at an event's start: the common event whole, at once */

        n = or_sse_wire(s, buf, last, ev, max, &more);

        if (n) {
            return n;
        }

        if (more && len < OR_SSE_DATA_MAX) {
            /*
             * The start of a delta of the wire shape that the buffer cuts:
             * kept as it is (the data buffer is free between events) and
             * matched once the rest of it has come.
             */

            memcpy(s->data, buf, len);
            s->carry = len;

            return len;
        }

        n = or_sse_whole(s, buf, last, ev);

        if (n) {
            return n;
        }
    }

    return or_sse_scan(s, buf, last, ev);
}


/* the byte scanner: bytes up to the end of the next event, or all */

static size_t
or_sse_scan(or_sse_t *s, const char *buf, const char *last,
    or_sse_event_t *ev)
{
    unsigned char  c;
    const char    *p;

    p = buf;

    while (p < last) {

        if (s->line != OR_SSE_LINE_FIELD && !s->space && !s->cr) {
            /* the value of a line, up to its end, at once */

            p += or_sse_run(s, p, last);

            if (p == last) {
                break;
            }
        }

        c = (unsigned char) *p++;
        s->bytes++;

        if (s->cr) {
            s->cr = 0;

            if (c == '\n') {
                /* the LF of a CRLF split across buffers */
                continue;
            }
        }

        if (c != '\r' && c != '\n') {
            or_sse_byte(s, c);
            continue;
        }

        if (c == '\r') {
            if (p < last && *p == '\n') {
                p++;
                s->bytes++;

            } else if (p == last) {
                s->cr = 1;
            }
        }

        if (or_sse_eol(s)) {
            or_sse_dispatch(s, ev);
            return p - buf;
        }
    }

    return last - buf;
}


/*
 * The rest of the carried start of a delta: up to the blank line that
 * ends it (the first LF LF: the wire shape has no blank line before its
 * end and its text no line end), then matched as a whole.  What turns
 * out not to be one, or grows over the data buffer, is handed to the byte
 * scanner as if it had read it when it came.
 */

static size_t
or_sse_carry(or_sse_t *s, const char *buf, const char *last,
    or_sse_event_t *ev)
{
    int          more;
    size_t       n, k, t, old, room;
    const char  *p, *end, *lf;

    old = s->carry;
    room = OR_SSE_DATA_MAX - old;
    end = ((size_t) (last - buf) < room) ? last : buf + room;

    if (s->data[old - 1] == '\n' && buf < end && *buf == '\n') {
        p = buf + 1;

    } else {
        /* memchr: the first LF is nearly always the end (memmem costs more) */
        for (p = buf; ; p = lf + 1) {
            lf = memchr(p, '\n', end - p);

            if (lf == NULL || lf + 1 >= end) {
                p = NULL;
                break;
            }

            if (lf[1] == '\n') {
                p = lf + 2;
                break;
            }
        }
    }

    k = (size_t) ((p ? p : end) - buf);
    t = 0;

    memcpy(s->data + old, buf, k);
    s->carry = old + k;

    n = or_sse_wire_one(s, s->data, s->data + s->carry, &t, &more);

    if (p != NULL && n == s->carry) {
        or_sse_wire_event(s, s->data, s->data + n, n, 1, t, ev);
        s->carry = 0;
        return k;
    }

    if (p == NULL && end == last && more) {
        /* not yet complete */
        return k;
    }

    or_sse_uncarry(s, old);

    return or_sse_scan(s, buf, last, ev);
}


/* the first n carried bytes go to the byte scanner (none ends an event) */

static void
or_sse_uncarry(or_sse_t *s, size_t n)
{
    char            bytes[OR_SSE_DATA_MAX];
    or_sse_event_t  ev;

    /* the scanner keeps data where the carried bytes are */
    memcpy(bytes, s->data, n);
    s->carry = 0;

    (void) or_sse_scan(s, bytes, bytes + n, &ev);
}


int
or_sse_end(or_sse_t *s, or_sse_event_t *ev)
{
    ev->kind = OR_SSE_EV_NONE;

    if (s->carry) {
        or_sse_uncarry(s, s->carry);
    }

    if (s->line_len) {
        (void) or_sse_eol(s);
    }

    if (s->data_lines == 0) {
        /* comments or fields without data: nothing to dispatch */
        return 0;
    }

    or_sse_dispatch(s, ev);

    return 1;
}


int
or_sse_data_span(const char *raw, size_t len, size_t *start, size_t *dlen)
{
    size_t       n, i, lines;
    const char  *p, *last, *eol, *colon, *v;

    p = raw;
    last = raw + len;
    lines = 0;
    *start = 0;
    *dlen = 0;

    while (p < last) {

        /* one line: up to LF, CRLF or CR */

        for (eol = p; eol < last && *eol != '\n' && *eol != '\r'; eol++) {
            /* void */
        }

        n = (size_t) (eol - p);

        if (n == 0) {
            if (lines) {
                break;          /* the blank line that ends the event */
            }

        } else if (*p != ':') {
            colon = memchr(p, ':', n);
            i = colon ? (size_t) (colon - p) : n;

            if (i == 4 && memcmp(p, "data", 4) == 0) {
                v = colon ? colon + 1 : eol;

                if (v < eol && *v == ' ') {
                    v++;
                }

                if (++lines > 1) {
                    return 0;
                }

                *start = (size_t) (v - raw);
                *dlen = (size_t) (eol - v);
            }
        }

        p = eol;

        if (p < last && *p == '\r') {
            p++;
        }

        if (p < last && *p == '\n') {
            p++;
        }
    }

    return lines == 1;
}


size_t
or_sse_pending(const or_sse_t *s)
{
    return s->bytes + s->carry;
}


/*
 * The common event, whole in buf from its start: a "data:" line, at most
 * one "event:" line besides, LF line ends, the blank line.  Read at once
 * as the byte scanner would read it; returns the bytes of the event
 * dispatched, 0 when buf does not start with one such event (nothing is
 * consumed, the byte scanner reads it).
 */

static size_t
or_sse_whole(or_sse_t *s, const char *buf, const char *last,
    or_sse_event_t *ev)
{
    size_t       n, name_len, data_len;
    const char  *p, *v, *lf, *name, *data;

    p = buf;
    name = NULL;
    data = NULL;
    name_len = 0;
    data_len = 0;

    for ( ;; ) {

        if (p >= last) {
            return 0;
        }

        if (*p == '\n') {
            if (data == NULL) {
                return 0;
            }

            p++;
            break;
        }

        if (data == NULL && last - p > 5 && memcmp(p, "data:", 5) == 0) {
            v = p + 5;

        } else if (name == NULL && last - p > 6
                   && memcmp(p, "event:", 6) == 0)
        {
            v = p + 6;

        } else {
            return 0;
        }

        lf = memchr(v, '\n', last - v);

        if (lf == NULL || memchr(v, '\r', lf - v) != NULL) {
            return 0;
        }

        if (v < lf && *v == ' ') {
            v++;
        }

        if (*p == 'd') {
            data = v;
            data_len = lf - v;

        } else {
            name = v;
            name_len = lf - v;
        }

        p = lf + 1;
    }

    n = (name_len < OR_SSE_NAME_MAX) ? name_len : OR_SSE_NAME_MAX;

    if (n) {
        memcpy(s->name, name, n);
    }

    s->name_len = n;

    n = (data_len < OR_SSE_DATA_MAX) ? data_len : OR_SSE_DATA_MAX;
    memcpy(s->data, data, n);
    s->data_len = n;
    s->data_total = data_len;
    s->data_lines = 1;
    s->lines = 1;
    s->bytes = p - buf;

    or_sse_dispatch(s, ev);

    if (s->shaped && name_len < OR_SSE_NAME_MAX
        && data + s->shape.prefix + s->shape.suffix <= p - 1
        && (size_t) (p - (data + data_len)) + s->shape.suffix + 1
           + (size_t) (data + s->shape.prefix - buf) <= sizeof(s->wire))
    {
        /* its wire bytes: the next such event is matched on them */

        s->wire_prefix = (data + s->shape.prefix) - buf;
        s->wire_data = data - buf;
        s->wire_suffix = p - (data + data_len - s->shape.suffix);
        s->wire_tail = p - (data + data_len);
        s->wire_format = s->shape.format;
        s->wire_kind = s->shape.kind;
        s->wire_content = s->shape.content;
        s->wire_progress = s->shape.progress;
        s->wire_measured = s->shape.measured;
        s->wire_name_len = name_len;

        if (name_len) {
            memcpy(s->wire_name, name, name_len);
        }

        memcpy(s->wire, buf, s->wire_prefix);
        memcpy(s->wire + s->wire_prefix, data + data_len - s->shape.suffix,
               s->wire_suffix);
    }

    return p - buf;
}


/*
 * Events of the stream's text shape whole in buf, one after another from
 * its start (at most max of them), each byte for byte the wire bytes of
 * the last one read in full but for a text without line ends and \u
 * escapes: what the whole event and the shape would make of each, with
 * the data read in place.  One ev stands for them all (ev->events; its
 * text_bytes their sum, its data the last one's).  Returns their bytes,
 * 0 if buf does not start with one (*more: buf ends within what could
 * still be one).
 */

static size_t
or_sse_wire(or_sse_t *s, const char *buf, const char *last,
    or_sse_event_t *ev, size_t max, int *more)
{
    int          later;
    size_t       n, one, count, text, t;
    const char  *p;

    *more = 0;

    if (s->wire_prefix == 0 || s->full) {
        return 0;
    }

    p = buf;
    one = 0;
    count = 0;
    text = 0;

    while (count < max) {
        n = or_sse_wire_one(s, p, last, &t, count ? &later : more);

        if (n == 0) {
            break;
        }

        one = n;
        p += n;
        text += t;
        count++;
    }

    if (count == 0) {
        return 0;
    }

    or_sse_wire_event(s, buf, p, one, count, text, ev);

    return p - buf;
}


/* ev for count deltas of the wire shape in [buf, last), the last of one */

static void
or_sse_wire_event(or_sse_t *s, const char *buf, const char *last, size_t one,
    size_t count, size_t text, or_sse_event_t *ev)
{
    memset(ev, 0, sizeof(or_sse_event_t));

    ev->kind = s->wire_kind;
    ev->format = s->wire_format;
    ev->content = s->wire_content;
    ev->progress = s->wire_progress;
    ev->events = count;
    ev->text_bytes = s->wire_measured ? text : 0;
    ev->text_at = (s->wire_measured && count == 1)
                  ? buf + s->wire_prefix - 1 : NULL;
    ev->name = s->wire_name;
    ev->name_len = s->wire_name_len;
    ev->data = last - one + s->wire_data;
    ev->data_len = one - s->wire_data - s->wire_tail;
    ev->data_total = ev->data_len;
    ev->bytes = last - buf;

    if (s->format == OR_SSE_FMT_UNKNOWN) {
        s->format = ev->format;
    }

    s->events += count;
    s->quick += count;
}


/*
 * One event of the wire shape at buf: its bytes and *text the decoded
 * bytes of its text (as or_sse_shape_match() counts them: an escape but
 * \u one byte), 0 if it is not one (*more: not yet, buf ends within what
 * could still be one).  Inlined in the loop over a run.
 */

static inline __attribute__((always_inline)) size_t
or_sse_wire_one(const or_sse_t *s, const char *buf, const char *last,
    size_t *text, int *more)
{
    size_t       n, have;
    const char  *t, *q;

    *more = 0;
    have = last - buf;

    if (have < s->wire_prefix) {
        *more = (memcmp(buf, s->wire, have) == 0);
        return 0;
    }

    if (memcmp(buf, s->wire, s->wire_prefix) != 0) {
        return 0;
    }

    t = buf + s->wire_prefix;
    n = 0;

    for ( ;; ) {
        q = or_run_line_text(t, last);
        n += q - t;

        if (q >= last) {
            *more = 1;
            return 0;
        }

        if (*q == '\n' || *q == '\r') {
            return 0;
        }

        if (*q == '"') {
            break;
        }

        /* an escape: one decoded byte, but \u (read in full) */

        if (last - q < 2) {
            *more = 1;
            return 0;
        }

        if (q[1] == 'u' || q[1] == '\n' || q[1] == '\r') {
            return 0;
        }

        n++;
        t = q + 2;
    }

    if (n == 0) {
        return 0;
    }

    q++;

    if ((size_t) (last - q) < s->wire_suffix) {
        *more = (memcmp(q, s->wire + s->wire_prefix, last - q) == 0);
        return 0;
    }

    if (memcmp(q, s->wire + s->wire_prefix, s->wire_suffix) != 0) {
        return 0;
    }

    q += s->wire_suffix;

    if ((size_t) (q - buf) - s->wire_data - s->wire_tail > OR_SSE_DATA_MAX) {
        /* over the data bound: read in full (truncated) */
        return 0;
    }

    *text = n;

    return q - buf;
}


static void
or_sse_byte(or_sse_t *s, unsigned char c)
{
    switch (s->line) {

    case OR_SSE_LINE_FIELD:
        if (c == ':') {
            if (s->line_len == 0) {
                s->line = OR_SSE_LINE_COMMENT;

            } else {
                or_sse_field(s);
                s->space = 1;
            }

        } else if (s->fname_len < sizeof(s->fname)) {
            s->fname[s->fname_len++] = (char) c;

        } else {
            /* longer than any field we know */
            s->fname_len = sizeof(s->fname);
            s->fname[0] = '\0';
        }

        break;

    case OR_SSE_LINE_DATA:
    case OR_SSE_LINE_EVENT:
        if (s->space) {
            s->space = 0;

            if (c == ' ') {
                break;
            }
        }

        if (s->line == OR_SSE_LINE_DATA) {
            or_sse_data_byte(s, (char) c);

        } else if (s->name_len < OR_SSE_NAME_MAX) {
            s->name[s->name_len++] = (char) c;
        }

        break;

    default:
        break;
    }

    if (s->line_len < (size_t) -1) {
        s->line_len++;
    }
}


/*
 * The bytes of a line's value from p to its end (CR or LF) or to last,
 * taken at once: kept (data, the event name) or skipped (comments and
 * other fields).  Returns how many.
 */

static size_t
or_sse_run(or_sse_t *s, const char *p, const char *last)
{
    size_t       n, room;
    const char  *lf, *cr;

    lf = memchr(p, '\n', last - p);
    cr = memchr(p, '\r', (lf ? lf : last) - p);

    n = (cr ? cr : (lf ? lf : last)) - p;

    if (n == 0) {
        return 0;
    }

    if (s->line == OR_SSE_LINE_DATA) {
        room = OR_SSE_DATA_MAX - s->data_len;
        room = (n < room) ? n : room;

        memcpy(s->data + s->data_len, p, room);
        s->data_len += room;
        s->data_total += n;

    } else if (s->line == OR_SSE_LINE_EVENT) {
        room = OR_SSE_NAME_MAX - s->name_len;
        room = (n < room) ? n : room;

        memcpy(s->name + s->name_len, p, room);
        s->name_len += room;
    }

    s->line_len = (s->line_len + n < s->line_len) ? (size_t) -1
                                                  : s->line_len + n;
    s->bytes += n;

    return n;
}


/* the field name is complete: which kind of line this is */

static void
or_sse_field(or_sse_t *s)
{
    if (or_sse_is(s->fname, s->fname_len, "data")) {
        s->line = OR_SSE_LINE_DATA;

        if (s->data_lines++ > 0) {
            or_sse_data_byte(s, '\n');
        }

    } else if (or_sse_is(s->fname, s->fname_len, "event")) {
        s->line = OR_SSE_LINE_EVENT;
        s->name_len = 0;

    } else {
        s->line = OR_SSE_LINE_IGNORE;
    }
}


static void
or_sse_data_byte(or_sse_t *s, char c)
{
    if (s->data_len < OR_SSE_DATA_MAX) {
        s->data[s->data_len++] = c;
    }

    s->data_total++;
}


/* a line ended; 1: it was blank (the event ends) */

static int
or_sse_eol(or_sse_t *s)
{
    if (s->line_len == 0) {
        return 1;
    }

    if (s->line == OR_SSE_LINE_FIELD) {
        /* a field name without ':' has an empty value */
        or_sse_field(s);
    }

    if (s->line != OR_SSE_LINE_COMMENT) {
        s->lines = 1;
    }

    s->line = OR_SSE_LINE_FIELD;
    s->line_len = 0;
    s->fname_len = 0;
    s->space = 0;

    return 0;
}


static void
or_sse_dispatch(or_sse_t *s, or_sse_event_t *ev)
{
    memset(ev, 0, sizeof(or_sse_event_t));

    ev->events = 1;
    ev->name = s->name;
    ev->name_len = s->name_len;
    ev->data = s->data;
    ev->data_len = s->data_len;
    ev->data_total = s->data_total;
    ev->bytes = s->bytes;

    if (s->data_lines == 0) {
        /* comments only, an empty event, or an event without data */
        ev->kind = OR_SSE_EV_HEARTBEAT;
        s->shaped = 0;

    } else if (!s->full
               && or_sse_shape_match(&s->shape, s->name, s->name_len,
                                     s->data, s->data_len, s->data_total,
                                     ev))
    {
        /* a delta of the stream's skeleton: not read again */
        s->quick++;
        s->shaped = 1;

    } else {
        or_sse_classify(s->name, s->name_len, s->data, s->data_len,
                        s->data_total, ev);

        s->shaped = !s->full
                    && or_sse_shape_learn(&s->shape, s->name, s->name_len,
                                          s->data, s->data_len, ev);
    }

    if (s->format == OR_SSE_FMT_UNKNOWN) {
        s->format = ev->format;
    }

    if (ev->finish) {
        s->finished = 1;
    }

    s->events++;

    s->line = OR_SSE_LINE_FIELD;
    s->line_len = 0;
    s->fname_len = 0;
    s->space = 0;
    s->lines = 0;
    s->data_lines = 0;
    s->name_len = 0;
    s->data_len = 0;
    s->data_total = 0;
    s->bytes = 0;
}
