
/*
 * Copyright (C) ngx_omniroute authors
 *
 * The request path's scanners alone, without nginx: time per document of
 * the body scanner (or_json_scan), the usage reader of a non-streamed
 * answer (or_usage_feed) and the SSE reader (or_sse_feed over a whole
 * stream), best of ROUNDS rounds, each long enough to be timed.  What a
 * module/plain ratio of bench/run.sh cannot show: which part of the
 * module's own time a change moved.
 *
 *   core json|usage|sse FILE...
 */


#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "or_json.h"
#include "or_sse.h"
#include "or_usage.h"


#define CORE_ROUNDS     7
#define CORE_BYTES      (64 * 1024 * 1024)   /* scanned per round */


static double core_now(void);
static void core_run(const char *kind, const char *name, const char *buf,
    size_t len);


static or_sse_t  core_sse;


static double
core_now(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);

    return (double) ts.tv_sec * 1e9 + (double) ts.tv_nsec;
}


static void
core_run(const char *kind, const char *name, const char *buf, size_t len)
{
    int              r;
    long             i, n, sink;
    double           t, best;
    size_t           off, used;
    or_usage_t       u;
    or_sse_event_t   ev;
    or_json_scan_t   scan;

    n = CORE_BYTES / (long) (len + 256) + 1;
    best = 0;
    sink = 0;

    for (r = 0; r < CORE_ROUNDS; r++) {
        t = core_now();

        for (i = 0; i < n; i++) {
            switch (kind[0]) {

            case 'j':
                sink += or_json_scan(buf, len, &scan);
                break;

            case 'u':
                or_usage_init(&u, 0);
                or_usage_feed(&u, buf, len);
                sink += u.found;
                break;

            default:
                or_sse_init(&core_sse);

                for (off = 0; off < len; off += used) {
                    used = or_sse_feed(&core_sse, buf + off, len - off, &ev);
                    sink += ev.kind;
                }

                break;
            }
        }

        t = (core_now() - t) / (double) n;

        if (r == 0 || t < best) {
            best = t;
        }
    }

    /* sink: so that nothing is optimized away */
    printf("%-6s %-44s %8zu B %9.0f ns %7.2f B/ns%s\n", kind, name, len, best,
           (double) len / best, (sink == -1) ? " " : "");
}


int
main(int argc, char **argv)
{
    int      i;
    long     size;
    char    *buf;
    FILE    *f;

    if (argc < 3 || strchr("jus", argv[1][0]) == NULL) {
        fprintf(stderr, "usage: core json|usage|sse FILE...\n");
        return 2;
    }

    for (i = 2; i < argc; i++) {
        f = fopen(argv[i], "rb");

        if (f == NULL || fseek(f, 0, SEEK_END) != 0
            || (size = ftell(f)) <= 0 || fseek(f, 0, SEEK_SET) != 0)
        {
            fprintf(stderr, "core: cannot read %s\n", argv[i]);
            return 1;
        }

        buf = malloc((size_t) size);

        if (buf == NULL || fread(buf, 1, (size_t) size, f) != (size_t) size) {
            fprintf(stderr, "core: cannot read %s\n", argv[i]);
            return 1;
        }

        fclose(f);

        core_run(argv[1], strrchr(argv[i], '/') ? strrchr(argv[i], '/') + 1
                                                : argv[i],
                 buf, (size_t) size);

        free(buf);
    }

    return 0;
}
