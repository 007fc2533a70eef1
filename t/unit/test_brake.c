/*
 * Copyright (C) ngx_omniroute authors
 *
 * The brake on failed key checks (R-BRAKE-1).
 */


#include "or_test.h"
#include "or_brake.h"


static void
tb_burst(void)
{
    int              i;
    or_brake_t       b = { 0, 0 };
    or_brake_conf_t  c = { 10000, 20 };      /* 10r/s burst=20 */

    for (i = 0; i < 21; i++) {
        or_is_int(or_brake_wait(&c, &b, 1000), 0,
                  "R-BRAKE-1 failure %d of 21 at once: checked", i + 1);
        or_brake_fail(&c, &b, 1000);
    }

    or_is_int(or_brake_wait(&c, &b, 1000), 100,
              "R-BRAKE-1 the 22nd at once: 100 ms to wait");
    or_is_int(or_brake_wait(&c, &b, 1050), 50,
              "R-BRAKE-1 50 ms later: 50 ms to wait");
    or_is_int(or_brake_wait(&c, &b, 1100), 0,
              "R-BRAKE-1 after 1/rate: checked again");

    or_brake_fail(&c, &b, 1100);
    or_is_int(or_brake_wait(&c, &b, 1100), 100,
              "R-BRAKE-1 one failure at the rate refills it");

    or_ok(!or_brake_idle(&c, &b, 1100), "R-BRAKE-1 not idle");
    or_ok(or_brake_idle(&c, &b, 1100 + 2200), "R-BRAKE-1 idle once "
          "drained");
    or_is_int(or_brake_wait(&c, &b, 500), 100,
              "R-BRAKE-1 time going back drains nothing");
}


static void
tb_edges(void)
{
    or_brake_t       b = { 0, 0 };
    or_brake_conf_t  off = { 0, 0 }, slow = { 500, 0 };  /* 30r/m */

    or_brake_fail(&off, &b, 1);
    or_is_int(or_brake_wait(&off, &b, 1), 0, "R-BRAKE-1 rate 0: off");
    or_ok(or_brake_idle(&off, &b, 1), "R-BRAKE-1 rate 0: idle");

    or_is_int(or_brake_wait(&slow, &b, 10), 0,
              "R-BRAKE-1 burst 0: the first is checked");
    or_brake_fail(&slow, &b, 10);
    or_is_int(or_brake_wait(&slow, &b, 10), 2000,
              "R-BRAKE-1 burst 0, 30r/m: 2 s to the next");

    b.last = 0;
    b.excess = 1000;
    or_is_int(or_brake_wait(&slow, &b, (or_msec_t) 1 << 62), 0,
              "R-BRAKE-1 a huge gap drains all, no overflow");
}


int
main(void)
{
    tb_burst();
    tb_edges();

    return or_done();
}
