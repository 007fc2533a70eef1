/*
 * Copyright (C) ngx_omniroute authors
 *
 * R-AFF-1: session pins; R-CLUSTER-2: their merge.
 */


#include "or_test.h"
#include "or_pin.h"


int
main(void)
{
    size_t       len;
    or_pin_t     a, b, c, ab, ba;
    const char  *conn;

    memset(&a, 0, sizeof(a));

    or_ok(or_pin_conn(&a, 1000, &len) == NULL && len == 0,
          "R-AFF-1 an empty pin pins nothing");

    or_is_int(or_pin_set(&a, "c1", 2, 1000, 60000), 1,
              "R-AFF-1 the first success pins the session");
    conn = or_pin_conn(&a, 1000, &len);
    or_ok(conn && len == 2 && memcmp(conn, "c1", 2) == 0,
          "R-AFF-1 the pinned connection");
    or_ok(or_pin_conn(&a, 61000, &len) == NULL,
          "R-AFF-1 the pin ends after the TTL");

    or_is_int(or_pin_set(&a, "c1", 2, 20000, 60000), 0,
              "R-AFF-1 the same connection with more than half the TTL "
              "left: no write");
    or_is_int(or_pin_set(&a, "c1", 2, 40000, 60000), 1,
              "R-AFF-1 less than half left: extended");
    or_is_int(a.until, 100000, "R-AFF-1 to now + TTL");

    or_is_int(or_pin_set(&a, "c2", 2, 41000, 60000), 1,
              "R-AFF-1 served by another connection: re-pinned");
    conn = or_pin_conn(&a, 41000, &len);
    or_ok(conn && memcmp(conn, "c2", 2) == 0, "R-AFF-1 to that one");

    or_is_int(or_pin_set(&a, "c3", 2, 42000, 0), 0, "R-AFF-1 TTL 0: off");

    /* merge: later set_at wins, commutative and idempotent */

    memset(&b, 0, sizeof(b));
    memset(&c, 0, sizeof(c));
    (void) or_pin_set(&b, "x", 1, 5000, 60000);
    (void) or_pin_set(&c, "y", 1, 7000, 60000);

    ab = b;
    (void) or_pin_merge(&ab, &c);
    ba = c;
    (void) or_pin_merge(&ba, &b);
    or_ok(memcmp(&ab, &ba, sizeof(or_pin_t)) == 0,
          "R-CLUSTER-2 pin merge is commutative");
    or_ok(or_pin_conn(&ab, 7000, &len) && ab.conn[0] == 'y',
          "R-CLUSTER-2 the later pinning wins");
    or_is_int(or_pin_merge(&ab, &ab), 0,
              "R-CLUSTER-2 merging a pin with itself changes nothing");

    memset(&b, 0, sizeof(b));
    memset(&c, 0, sizeof(c));
    (void) or_pin_set(&b, "x", 1, 5000, 60000);
    (void) or_pin_set(&c, "y", 1, 5000, 60000);
    ab = b;
    (void) or_pin_merge(&ab, &c);
    ba = c;
    (void) or_pin_merge(&ba, &b);
    or_ok(memcmp(&ab, &ba, sizeof(or_pin_t)) == 0,
          "R-CLUSTER-2 a tie on set_at is broken the same way on both sides");

    return or_done();
}
