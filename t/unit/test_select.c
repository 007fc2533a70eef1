/*
 * Copyright (C) ngx_omniroute authors
 *
 * Routing strategies (R-ROUTE), session pin (R-AFF-1), the p2c rolling
 * window and the seeded PRNG.
 */


#include "or_test.h"
#include "or_select.h"
#include "or_rand.h"


#define NB  5


static void cand(or_cand_t *c, uint32_t id, int32_t priority);
static const char *ord(const uint32_t *order, int n);
static int is_perm(const uint32_t *order, int n, uint32_t size);
static int pick(or_strategy_e s, const or_cand_t *c, uint32_t n,
    or_select_state_t *st, or_rand_t *rnd, uint32_t *order);

static void test_rand(void);
static void test_parse(void);
static void test_priority(void);
static void test_weighted(void);
static void test_round_robin(void);
static void test_random(void);
static void test_strict_random(void);
static void test_least_used(void);
static void test_fill_first(void);
static void test_p2c(void);
static void test_p2c_window(void);
static void test_cost(void);
static void test_reset_aware(void);
static void test_headroom(void);
static void test_pin(void);
static void test_window(void);
static void test_args(void);
static void test_determinism(void);


static void
cand(or_cand_t *c, uint32_t id, int32_t priority)
{
    memset(c, 0, sizeof(or_cand_t));
    c->id = id;
    c->priority = priority;
    c->weight = 1;
    c->reset_at = OR_MSEC_NONE;
    c->window.mean_latency_ms = OR_MSEC_NONE;
}


/* "i,j,k": the order as candidate indexes; four rotating buffers */

static const char *
ord(const uint32_t *order, int n)
{
    int          i;
    char        *p;
    static int   slot;
    static char  buf[4][1024];

    if (n < 0) {
        return "(error)";
    }

    p = buf[slot++ % 4];
    p[0] = '\0';

    for (i = 0; i < n; i++) {
        sprintf(p + strlen(p), i ? ",%u" : "%u", (unsigned) order[i]);
    }

    return p;
}


static int
is_perm(const uint32_t *order, int n, uint32_t size)
{
    int      i;
    uint8_t  seen[OR_SELECT_MAX];

    if (n != (int) size) {
        return 0;
    }

    memset(seen, 0, sizeof(seen));

    for (i = 0; i < n; i++) {
        if (order[i] >= size || seen[order[i]]) {
            return 0;
        }

        seen[order[i]] = 1;
    }

    return 1;
}


static int
pick(or_strategy_e s, const or_cand_t *c, uint32_t n, or_select_state_t *st,
    or_rand_t *rnd, uint32_t *order)
{
    return or_select_order(s, c, n, 0, 0, st, rnd, order);
}


static void
test_rand(void)
{
    int        i, same, hits[7], in_range, fair;
    uint32_t   v;
    or_rand_t  a, b;

    or_rand_seed(&a, 0);
    or_ok(or_rand_next(&a) == 0xe220a8397b1dcdafULL
          && or_rand_next(&a) == 0x6e789e6aa1b965f4ULL
          && or_rand_next(&a) == 0x06c45d188009454fULL,
          "rand: splitmix64 reference outputs for seed 0");

    or_rand_seed(&a, 12345);
    or_rand_seed(&b, 12345);
    same = 1;

    for (i = 0; i < 1000; i++) {
        same &= or_rand_next(&a) == or_rand_next(&b);
    }

    or_ok(same, "rand: same seed, same 1000 outputs");

    or_rand_seed(&a, 1);
    or_rand_seed(&b, 2);
    or_ok(or_rand_next(&a) != or_rand_next(&b),
          "rand: different seeds differ");

    or_is_int(or_rand_below(&a, 0), 0, "rand: below(0) is 0");
    or_is_int(or_rand_below(&a, 1), 0, "rand: below(1) is 0");

    memset(hits, 0, sizeof(hits));
    in_range = 1;
    or_rand_seed(&a, 99);

    for (i = 0; i < 70000; i++) {
        v = or_rand_below(&a, 7);
        if (v >= 7) {
            in_range = 0;
            break;
        }
        hits[v]++;
    }

    fair = 1;

    for (i = 0; i < 7; i++) {
        fair &= hits[i] > 9700 && hits[i] < 10300;
    }

    or_ok(in_range, "rand: below(7) stays in [0,7)");
    or_ok(fair, "rand: below(7) uniform within 3%% over 70000 draws");
}


static void
test_parse(void)
{
    static const char  *names[] = {
        "priority", "weighted", "round-robin", "random", "strict-random",
        "least-used", "fill-first", "p2c", "cost-optimized", "reset-aware",
        "headroom"
    };

    int  i, ok;

    ok = 1;

    for (i = 0; i < OR_STRATEGY_COUNT; i++) {
        ok &= or_strategy_parse(names[i], strlen(names[i])) == i;
        ok &= strcmp(or_strategy_name((or_strategy_e) i), names[i]) == 0;
    }

    or_ok(ok, "R-ROUTE parse: every canonical name round-trips");

    or_is_int(or_strategy_parse("round-robin", 11), OR_STRATEGY_ROUND_ROBIN,
              "R-ROUTE parse: round-robin");
    or_is_int(or_strategy_parse("round_robin", 11), OR_STRATEGY_ROUND_ROBIN,
              "R-ROUTE parse: round_robin alias");
    or_is_int(or_strategy_parse("cost_optimized", 14),
              OR_STRATEGY_COST_OPTIMIZED, "R-ROUTE parse: cost_optimized");
    or_is_int(or_strategy_parse("p2c;", 3), OR_STRATEGY_P2C,
              "R-ROUTE parse: length-bounded (not NUL-terminated)");
    or_is_int(or_strategy_parse("prio", 4), -1,
              "R-ROUTE parse: prefix is unknown");
    or_is_int(or_strategy_parse("Priority", 8), -1,
              "R-ROUTE parse: case-sensitive");
    or_is_int(or_strategy_parse("round robin", 11), -1,
              "R-ROUTE parse: space is unknown");
    or_is_int(or_strategy_parse("", 0), -1, "R-ROUTE parse: empty");
    or_is_int(or_strategy_parse(NULL, 0), -1, "R-ROUTE parse: NULL");
    or_is_str(or_strategy_name(OR_STRATEGY_COUNT), "unknown",
              "R-ROUTE parse: name of a bad value");
}


static void
test_priority(void)
{
    int        n;
    uint32_t   order[NB];
    or_cand_t  c[NB];

    cand(&c[0], 100, 2);
    cand(&c[1], 101, 1);
    cand(&c[2], 102, 2);
    cand(&c[3], 103, 0);
    cand(&c[4], 104, 1);

    n = pick(OR_STRATEGY_PRIORITY, c, NB, NULL, NULL, order);
    or_is_str(ord(order, n), "3,1,4,0,2",
              "R-ROUTE priority: ascending, stable on ties");

    c[3].in_flight = 50;
    c[3].cost = 99;
    n = pick(OR_STRATEGY_PRIORITY, c, NB, NULL, NULL, order);
    or_is_str(ord(order, n), "3,1,4,0,2",
              "R-ROUTE priority: load and cost do not matter");
}


static void
test_weighted(void)
{
    int                n, i, ok, hits[3];
    char               seq[16];
    uint32_t           order[NB];
    or_cand_t          c[NB];
    or_select_state_t  st;

    /* 3:1 -> a a b a, exactly, forever */

    memset(&st, 0, sizeof(st));
    cand(&c[0], 10, 0);
    cand(&c[1], 20, 0);
    c[0].weight = 3;
    c[1].weight = 1;

    for (i = 0; i < 8; i++) {
        pick(OR_STRATEGY_WEIGHTED, c, 2, &st, NULL, order);
        seq[i] = (char) ('a' + order[0]);
    }

    seq[i] = '\0';
    or_is_str(seq, "aabaaaba", "R-ROUTE weighted: 3:1 smooth sequence");

    memset(&st, 0, sizeof(st));
    memset(hits, 0, sizeof(hits));

    for (i = 0; i < 4000; i++) {
        pick(OR_STRATEGY_WEIGHTED, c, 2, &st, NULL, order);
        hits[order[0]]++;
    }

    or_is_int(hits[0], 3000, "R-ROUTE weighted: 3:1 over 4000 -> 3000");
    or_is_int(hits[1], 1000, "R-ROUTE weighted: 3:1 over 4000 -> 1000");

    /* nginx's documented smooth sequence for 5,1,1 */

    memset(&st, 0, sizeof(st));
    cand(&c[2], 30, 0);
    c[0].weight = 5;
    c[1].weight = 1;
    c[2].weight = 1;

    for (i = 0; i < 14; i++) {
        pick(OR_STRATEGY_WEIGHTED, c, 3, &st, NULL, order);
        seq[i] = (char) ('a' + order[0]);
    }

    seq[i] = '\0';
    or_is_str(seq, "aabacaaaabacaa", "R-ROUTE weighted: 5,1,1 = nginx's "
              "a a b a c a a");

    /* fallover: other weighted ones by current weight, weight 0 last */

    memset(&st, 0, sizeof(st));
    cand(&c[0], 10, 0);
    cand(&c[1], 20, 1);
    cand(&c[2], 30, 1);
    cand(&c[3], 40, 1);
    c[0].weight = 0;
    c[1].weight = 1;
    c[2].weight = 2;
    c[3].weight = 1;

    n = pick(OR_STRATEGY_WEIGHTED, c, 4, &st, NULL, order);
    or_is_str(ord(order, n), "2,1,3,0",
              "R-ROUTE weighted: winner, weighted by current, weight 0 last");
    n = pick(OR_STRATEGY_WEIGHTED, c, 4, &st, NULL, order);
    or_is_str(ord(order, n), "1,3,2,0",
              "R-ROUTE weighted: second round follows current weights");
    or_is_int(st.wrr_n, 3, "R-ROUTE weighted: state keeps 3 weights");

    c[0].weight = 0;
    c[1].weight = 0;
    c[2].weight = 0;
    c[3].weight = 0;
    c[3].priority = -1;
    n = pick(OR_STRATEGY_WEIGHTED, c, 4, &st, NULL, order);
    or_is_str(ord(order, n), "3,0,1,2",
              "R-ROUTE weighted: all weights 0 -> priority order");

    /* a candidate leaving the set: its weight is dropped by id */

    memset(&st, 0, sizeof(st));
    c[0].weight = 1;
    c[1].weight = 1;
    c[2].weight = 1;
    pick(OR_STRATEGY_WEIGHTED, c, 3, &st, NULL, order);
    pick(OR_STRATEGY_WEIGHTED, c + 1, 2, &st, NULL, order);
    or_ok(st.wrr_n == 2 && st.wrr_id[0] == 20 && st.wrr_id[1] == 30,
          "R-ROUTE weighted: weights are kept by id, absent ids dropped");

    /* with a changing set the long-run share still follows weights */

    memset(&st, 0, sizeof(st));
    memset(hits, 0, sizeof(hits));
    c[0].weight = 2;
    c[1].weight = 1;
    c[2].weight = 1;

    for (i = 0; i < 4000; i++) {
        pick(OR_STRATEGY_WEIGHTED, c, 3, &st, NULL, order);
        hits[order[0]]++;
    }

    ok = hits[0] == 2000 && hits[1] == 1000 && hits[2] == 1000;
    or_ok(ok, "R-ROUTE weighted: 2:1:1 over 4000 -> 2000/1000/1000 "
          "(got %d/%d/%d)", hits[0], hits[1], hits[2]);
}


static void
test_round_robin(void)
{
    int                n, i, ok, hits[4];
    uint32_t           order[NB];
    or_cand_t          c[NB];
    or_select_state_t  st;

    memset(&st, 0, sizeof(st));
    cand(&c[0], 40, 0);
    cand(&c[1], 10, 0);
    cand(&c[2], 30, 0);
    cand(&c[3], 20, 0);

    /* ring by id: 10(1) 20(3) 30(2) 40(0) */

    n = pick(OR_STRATEGY_ROUND_ROBIN, c, 4, &st, NULL, order);
    or_is_str(ord(order, n), "1,3,2,0", "R-ROUTE round-robin: call 1");
    n = pick(OR_STRATEGY_ROUND_ROBIN, c, 4, &st, NULL, order);
    or_is_str(ord(order, n), "3,2,0,1", "R-ROUTE round-robin: call 2");
    n = pick(OR_STRATEGY_ROUND_ROBIN, c, 4, &st, NULL, order);
    or_is_str(ord(order, n), "2,0,1,3", "R-ROUTE round-robin: call 3");
    n = pick(OR_STRATEGY_ROUND_ROBIN, c, 4, &st, NULL, order);
    or_is_str(ord(order, n), "0,1,3,2", "R-ROUTE round-robin: call 4");
    n = pick(OR_STRATEGY_ROUND_ROBIN, c, 4, &st, NULL, order);
    or_is_str(ord(order, n), "1,3,2,0", "R-ROUTE round-robin: wraps");

    /* id 20 drops out (cooldown): ring continues after 10 with 30 */

    n = pick(OR_STRATEGY_ROUND_ROBIN, c, 3, &st, NULL, order);
    or_is_str(ord(order, n), "2,0,1",
              "R-ROUTE round-robin: absent id skipped, ring kept");
    n = pick(OR_STRATEGY_ROUND_ROBIN, c, 4, &st, NULL, order);
    or_is_str(ord(order, n), "0,1,3,2",
              "R-ROUTE round-robin: returning id rejoins its place");

    memset(&st, 0, sizeof(st));
    memset(hits, 0, sizeof(hits));

    for (i = 0; i < 4 * 250; i++) {
        pick(OR_STRATEGY_ROUND_ROBIN, c, 4, &st, NULL, order);
        hits[order[0]]++;
    }

    ok = hits[0] == 250 && hits[1] == 250 && hits[2] == 250
         && hits[3] == 250;
    or_ok(ok, "R-ROUTE round-robin: exactly 250 each over 1000 picks");
    or_is_int(st.picks, 1000, "R-ROUTE round-robin: state counts picks");

    n = pick(OR_STRATEGY_ROUND_ROBIN, c, 4, NULL, NULL, order);
    or_is_str(ord(order, n), "1,3,2,0",
              "R-ROUTE round-robin: without state starts at lowest id");
}


static void
test_random(void)
{
    int        n, i, ok, perm, hits[NB];
    uint32_t   order[NB];
    or_cand_t  c[NB];
    or_rand_t  rnd;

    for (i = 0; i < NB; i++) {
        cand(&c[i], 100 + i, 0);
    }

    c[0].priority = -5;

    /*
     * Seeded orders were checked against an independent model (splitmix64,
     * rejection-sampled below(), Fisher-Yates from the top), not just
     * copied from a run.
     */

    or_rand_seed(&rnd, 42);
    n = pick(OR_STRATEGY_RANDOM, c, NB, NULL, &rnd, order);
    or_is_str(ord(order, n), "1,2,0,4,3", "R-ROUTE random: seed 42 call 1");
    n = pick(OR_STRATEGY_RANDOM, c, NB, NULL, &rnd, order);
    or_is_str(ord(order, n), "3,4,1,2,0", "R-ROUTE random: seed 42 call 2");

    or_rand_seed(&rnd, 7);
    memset(hits, 0, sizeof(hits));
    perm = 1;

    for (i = 0; i < 10000; i++) {
        n = pick(OR_STRATEGY_RANDOM, c, NB, NULL, &rnd, order);
        perm &= is_perm(order, n, NB);
        hits[order[0]]++;
    }

    ok = 1;

    for (i = 0; i < NB; i++) {
        ok &= hits[i] > 1850 && hits[i] < 2150;
    }

    or_ok(perm, "R-ROUTE random: every order is a permutation");
    or_ok(ok, "R-ROUTE random: first pick uniform within 7.5%% over 10000");
}


static void
test_strict_random(void)
{
    int                n, i, j, perm, decks, first[NB];
    uint32_t           order[NB], deck[3];
    or_cand_t          c[NB], set[3];
    or_rand_t          rnd;
    or_select_state_t  st;

    for (i = 0; i < NB; i++) {
        cand(&c[i], 100 + i, 0);
    }

    memset(&st, 0, sizeof(st));
    or_rand_seed(&rnd, 42);

    n = pick(OR_STRATEGY_STRICT_RANDOM, c, NB, &st, &rnd, order);
    or_is_str(ord(order, n), "1,2,0,4,3",
              "R-ROUTE strict-random: seed 42 deal 1 (the deck)");
    n = pick(OR_STRATEGY_STRICT_RANDOM, c, NB, &st, &rnd, order);
    or_is_str(ord(order, n), "2,0,4,3,1",
              "R-ROUTE strict-random: deal 2, fallover = rest of deck");
    or_is_int(st.deck_pos, 2, "R-ROUTE strict-random: deck position 2");

    /* 1000 deals of 5: every run of 5 deals is a permutation */

    memset(&st, 0, sizeof(st));
    or_rand_seed(&rnd, 9);
    decks = 0;
    perm = 1;

    for (i = 0; i < 200; i++) {
        for (j = 0; j < NB; j++) {
            n = pick(OR_STRATEGY_STRICT_RANDOM, c, NB, &st, &rnd, order);
            perm &= is_perm(order, n, NB);
            first[j] = (int) order[0];
        }

        for (j = 0; j < NB; j++) {
            order[j] = (uint32_t) first[j];
        }

        decks += is_perm(order, NB, NB);
    }

    or_ok(perm, "R-ROUTE strict-random: every order is a permutation");
    or_is_int(decks, 200,
              "R-ROUTE strict-random: 200 decks, each a permutation");

    /* a dealt-out candidate is skipped, a new one waits for next deck */

    memset(&st, 0, sizeof(st));
    or_rand_seed(&rnd, 3);
    pick(OR_STRATEGY_STRICT_RANDOM, c, 3, &st, &rnd, order);
    memcpy(deck, st.deck, sizeof(deck));

    or_ok(c[order[0]].id == deck[0] && c[order[1]].id == deck[1]
          && c[order[2]].id == deck[2],
          "R-ROUTE strict-random: first order is the deck");

    /* drop deck[1] from the eligible set; add id 103 */

    for (i = 0, j = 0; i < 4; i++) {
        if (c[i].id != deck[1]) {
            set[j++] = c[i];
        }
    }

    n = pick(OR_STRATEGY_STRICT_RANDOM, set, 3, &st, &rnd, order);
    or_ok(n == 3 && set[order[0]].id == deck[2],
          "R-ROUTE strict-random: ineligible turn skipped");
    or_is_int(st.deck_len, 3, "R-ROUTE strict-random: same deck");

    n = pick(OR_STRATEGY_STRICT_RANDOM, set, 3, &st, &rnd, order);
    or_ok(st.deck_len == 3 && st.deck_pos == 1,
          "R-ROUTE strict-random: exhausted deck reshuffled from the set");
    or_ok(is_perm(order, n, 3), "R-ROUTE strict-random: new deck order");
}


static void
test_least_used(void)
{
    int        n;
    uint32_t   order[NB];
    or_cand_t  c[NB];

    cand(&c[0], 100, 0);
    cand(&c[1], 101, 2);
    cand(&c[2], 102, 0);
    cand(&c[3], 103, 1);
    cand(&c[4], 104, 1);
    c[0].in_flight = 2;
    c[2].in_flight = 1;
    c[3].usage = 5;
    c[4].usage = 2;

    n = pick(OR_STRATEGY_LEAST_USED, c, NB, NULL, NULL, order);
    or_is_str(ord(order, n), "4,3,1,2,0",
              "R-ROUTE least-used: in_flight, then priority, then usage");

    c[4].in_flight = 9;
    n = pick(OR_STRATEGY_LEAST_USED, c, NB, NULL, NULL, order);
    or_is_str(ord(order, n), "3,1,2,0,4",
              "R-ROUTE least-used: busy one goes last");
}


static void
test_fill_first(void)
{
    int                n;
    uint32_t           order[NB];
    or_cand_t          c[NB], s[2];
    or_select_state_t  st;

    memset(&st, 0, sizeof(st));
    cand(&c[0], 10, 0);
    cand(&c[1], 20, 1);
    cand(&c[2], 30, 2);
    c[0].max_concurrent = 2;
    c[2].max_concurrent = 1;

    n = pick(OR_STRATEGY_FILL_FIRST, c, 3, &st, NULL, order);
    or_is_str(ord(order, n), "0,1,2", "R-ROUTE fill-first: starts on first");
    c[0].in_flight = 1;
    n = pick(OR_STRATEGY_FILL_FIRST, c, 3, &st, NULL, order);
    or_is_str(ord(order, n), "0,1,2",
              "R-ROUTE fill-first: stays while not full");

    c[0].in_flight = 2;
    n = pick(OR_STRATEGY_FILL_FIRST, c, 3, &st, NULL, order);
    or_is_str(ord(order, n), "1,2,0",
              "R-ROUTE fill-first: full -> next, full one last");
    or_is_int(st.ff_id, 20, "R-ROUTE fill-first: current is id 20");

    c[0].in_flight = 0;
    n = pick(OR_STRATEGY_FILL_FIRST, c, 3, &st, NULL, order);
    or_is_str(ord(order, n), "1,0,2",
              "R-ROUTE fill-first: sticks to current when first frees up");

    /* current (id 20) leaves the eligible set */

    s[0] = c[0];
    s[1] = c[2];
    n = pick(OR_STRATEGY_FILL_FIRST, s, 2, &st, NULL, order);
    or_is_str(ord(order, n), "0,1",
              "R-ROUTE fill-first: current gone -> first available");
    or_is_int(st.ff_id, 10, "R-ROUTE fill-first: current is id 10");

    s[0].in_flight = 2;
    s[1].in_flight = 1;
    n = pick(OR_STRATEGY_FILL_FIRST, s, 2, &st, NULL, order);
    or_is_str(ord(order, n), "0,1",
              "R-ROUTE fill-first: all full -> current first");

    s[0].priority = 5;
    n = pick(OR_STRATEGY_FILL_FIRST, s, 2, &st, NULL, order);
    or_is_str(ord(order, n), "0,1",
              "R-ROUTE fill-first: all full keeps current over priority");
    or_is_int(st.ff_id, 10, "R-ROUTE fill-first: all full keeps state");
}


static void
test_p2c(void)
{
    int        n, i, hits[NB];
    uint32_t   order[NB];
    or_cand_t  c[NB];
    or_rand_t  rnd;

    or_rand_seed(&rnd, 1);

    /* two candidates: the pair is always both */

    cand(&c[0], 10, 0);
    cand(&c[1], 20, 0);
    c[0].in_flight = 3;
    c[1].in_flight = 1;
    n = or_select_order(OR_STRATEGY_P2C, c, 2, 0, 0, NULL, &rnd, order);
    or_is_str(ord(order, n), "1,0", "R-ROUTE p2c: fewer in-flight wins");

    /* slow (300 ms) vs fast (100 ms), same load */

    c[0].in_flight = 1;
    c[0].window.samples = 5;
    c[0].window.timed = 5;
    c[0].window.mean_latency_ms = 300;
    c[1].window.samples = 5;
    c[1].window.timed = 5;
    c[1].window.mean_latency_ms = 100;

    n = or_select_order(OR_STRATEGY_P2C, c, 2, 0, 0, NULL, &rnd, order);
    or_is_str(ord(order, n), "0,1",
              "R-ROUTE p2c: weight 0 ignores latency (tie -> index)");
    n = or_select_order(OR_STRATEGY_P2C, c, 2, 0, 10, NULL, &rnd, order);
    or_is_str(ord(order, n), "1,0", "R-ROUTE p2c: weight 10, faster wins");

    c[1].window.samples = 2;
    c[1].window.timed = 2;
    n = or_select_order(OR_STRATEGY_P2C, c, 2, 0, 10, NULL, &rnd, order);
    or_is_str(ord(order, n), "0,1",
              "R-ROUTE p2c: not applied when one has 2 samples");
    c[1].window.samples = 3;
    c[1].window.timed = 3;
    n = or_select_order(OR_STRATEGY_P2C, c, 2, 0, 10, NULL, &rnd, order);
    or_is_str(ord(order, n), "1,0",
              "R-ROUTE p2c: applied when both have >= 3 samples");
    c[0].window.samples = 2;
    c[0].window.timed = 2;
    n = or_select_order(OR_STRATEGY_P2C, c, 2, 0, 10, NULL, &rnd, order);
    or_is_str(ord(order, n), "0,1",
              "R-ROUTE p2c: not applied when the slow one has 2 samples");

    /* latency vs load: slow 150 ms (ratio 0.5), fast 100 ms */

    c[0].window.samples = 5;
    c[0].window.timed = 5;
    c[0].window.mean_latency_ms = 150;
    c[0].in_flight = 0;
    c[1].in_flight = 3;

    n = or_select_order(OR_STRATEGY_P2C, c, 2, 0, 20, NULL, &rnd, order);
    or_is_str(ord(order, n), "1,0",
              "R-ROUTE p2c: weight 20: 0 + 10*0.5 = 5 > 3, fast wins");
    n = or_select_order(OR_STRATEGY_P2C, c, 2, 0, 4, NULL, &rnd, order);
    or_is_str(ord(order, n), "0,1",
              "R-ROUTE p2c: weight 4: 0 + 2*0.5 = 1 < 3, slow wins");

    /* the latency half is capped at 2x slower; weight capped at 20 */

    c[0].window.mean_latency_ms = 1000;
    c[1].in_flight = 11;
    n = or_select_order(OR_STRATEGY_P2C, c, 2, 0, 100, NULL, &rnd, order);
    or_is_str(ord(order, n), "0,1",
              "R-ROUTE p2c: weight 100 acts as 20: 10 < 11");
    c[1].in_flight = 9;
    n = or_select_order(OR_STRATEGY_P2C, c, 2, 0, 20, NULL, &rnd, order);
    or_is_str(ord(order, n), "1,0",
              "R-ROUTE p2c: 10x slower still 10 points: 10 > 9");

    /* error half: 2 of 4 failed -> 10 * 0.5 = 5 points at weight 20 */

    cand(&c[0], 10, 0);
    cand(&c[1], 20, 0);
    c[0].window.samples = 4;
    c[0].window.errors = 2;
    c[1].window.samples = 4;
    c[1].in_flight = 4;
    n = or_select_order(OR_STRATEGY_P2C, c, 2, 0, 20, NULL, &rnd, order);
    or_is_str(ord(order, n), "1,0",
              "R-ROUTE p2c: error rate 50%% = 5 > 4 in flight");
    c[1].in_flight = 6;
    n = or_select_order(OR_STRATEGY_P2C, c, 2, 0, 20, NULL, &rnd, order);
    or_is_str(ord(order, n), "0,1",
              "R-ROUTE p2c: error rate 50%% = 5 < 6 in flight");

    /* equal score: priority */

    c[0].window.errors = 0;
    c[1].in_flight = 0;
    c[0].priority = 3;
    n = or_select_order(OR_STRATEGY_P2C, c, 2, 0, 20, NULL, &rnd, order);
    or_is_str(ord(order, n), "1,0", "R-ROUTE p2c: tie -> priority");

    /* five candidates: seeded pair, fallover in least-used order */

    for (i = 0; i < NB; i++) {
        cand(&c[i], 100 + i, 0);
        c[i].in_flight = (uint32_t) i;
    }

    or_rand_seed(&rnd, 42);
    n = or_select_order(OR_STRATEGY_P2C, c, NB, 0, 0, NULL, &rnd, order);
    or_is_str(ord(order, n), "3,0,1,2,4",
              "R-ROUTE p2c: seed 42 pair (3,4) -> 3, then least-used");

    or_rand_seed(&rnd, 5);
    memset(hits, 0, sizeof(hits));

    for (i = 0; i < 5000; i++) {
        or_select_order(OR_STRATEGY_P2C, c, NB, 0, 0, NULL, &rnd, order);
        hits[order[0]]++;
    }

    or_is_int(hits[4], 0, "R-ROUTE p2c: the most loaded never wins");
    or_ok(hits[0] > 1850 && hits[0] < 2150,
          "R-ROUTE p2c: least loaded wins ~2/5 of pairs (got %d/5000)",
          hits[0]);
    or_ok(hits[3] > 400 && hits[3] < 600,
          "R-ROUTE p2c: 2nd most loaded wins ~1/10 (got %d/5000)", hits[3]);
}


static void
test_p2c_window(void)
{
    int          i, n;
    uint32_t     order[2];
    or_cand_t    c[2];
    or_rand_t    rnd;
    or_window_t  slow, fast;

    or_rand_seed(&rnd, 1);
    or_window_init(&slow);
    or_window_init(&fast);

    /* slow: 3 samples at 400 ms, one of them 16 min old at the end */

    or_window_add(&slow, 0, 400, 0);
    or_window_add(&slow, 120000, 400, 0);
    or_window_add(&slow, 180000, 400, 0);

    for (i = 0; i < 3; i++) {
        or_window_add(&fast, 180000, 100, 0);
    }

    cand(&c[0], 10, 0);
    cand(&c[1], 20, 0);

    or_window_summarize(&slow, 900000, &c[0].window);
    or_window_summarize(&fast, 900000, &c[1].window);
    n = or_select_order(OR_STRATEGY_P2C, c, 2, 0, 10, NULL, &rnd, order);
    or_is_str(ord(order, n), "1,0",
              "R-ROUTE p2c: window with 3 live samples each applies");

    or_window_summarize(&slow, 960000, &c[0].window);
    or_window_summarize(&fast, 960000, &c[1].window);
    or_is_int(c[0].window.samples, 2, "R-ROUTE p2c: one sample expired");
    n = or_select_order(OR_STRATEGY_P2C, c, 2, 0, 10, NULL, &rnd, order);
    or_is_str(ord(order, n), "0,1",
              "R-ROUTE p2c: 2 live samples -> latency not applied");
}


static void
test_cost(void)
{
    int        n;
    uint32_t   order[NB];
    or_cand_t  c[NB];

    cand(&c[0], 100, 1);
    cand(&c[1], 101, 3);
    cand(&c[2], 102, 0);
    cand(&c[3], 103, 0);
    c[0].cost = 0.5;
    c[1].cost = 0.1;
    c[2].cost = 0.5;
    c[3].cost = 0.2;

    n = pick(OR_STRATEGY_COST_OPTIMIZED, c, 4, NULL, NULL, order);
    or_is_str(ord(order, n), "1,3,2,0",
              "R-ROUTE cost-optimized: cheapest first, tie -> priority");
}


static void
test_reset_aware(void)
{
    int        n;
    uint32_t   order[NB];
    or_cand_t  c[NB];

    cand(&c[0], 100, 0);
    cand(&c[1], 101, 0);
    cand(&c[2], 102, 1);
    cand(&c[3], 103, 0);
    cand(&c[4], 104, 0);
    c[1].reset_at = 5000;
    c[2].reset_at = 2000;
    c[3].reset_at = 500;
    c[4].reset_at = 2000;

    n = or_select_order(OR_STRATEGY_RESET_AWARE, c, NB, 1000, 0, NULL, NULL,
                        order);
    or_is_str(ord(order, n), "4,2,1,0,3",
              "R-ROUTE reset-aware: soonest reset first, unknown/past last");

    n = or_select_order(OR_STRATEGY_RESET_AWARE, c, NB, 3000, 0, NULL, NULL,
                        order);
    or_is_str(ord(order, n), "1,0,3,4,2",
              "R-ROUTE reset-aware: resets that passed count as unknown");
}


static void
test_headroom(void)
{
    int        n;
    uint32_t   order[NB];
    or_cand_t  c[NB];

    cand(&c[0], 100, 0);
    cand(&c[1], 101, 0);
    cand(&c[2], 102, 0);
    cand(&c[3], 103, 0);
    cand(&c[4], 104, 0);
    c[0].in_flight = 5;
    c[1].max_concurrent = 4;
    c[1].in_flight = 1;
    c[2].max_concurrent = 10;
    c[2].in_flight = 8;
    c[3].max_concurrent = 4;
    c[3].in_flight = 3;
    c[4].in_flight = 2;

    n = pick(OR_STRATEGY_HEADROOM, c, NB, NULL, NULL, order);
    or_is_str(ord(order, n), "4,0,1,2,3",
              "R-ROUTE headroom: unlimited first, then most free slots");

    c[1].in_flight = 4;
    c[3].max_concurrent = 2;    /* over the cap: 0 free, not -1 */
    c[3].in_flight = 3;
    n = pick(OR_STRATEGY_HEADROOM, c, NB, NULL, NULL, order);
    or_is_str(ord(order, n), "4,0,2,3,1",
              "R-ROUTE headroom: full ones last, fewer in flight first");
}


static void
test_pin(void)
{
    int        n;
    uint32_t   order[NB];
    or_cand_t  c[NB];

    cand(&c[0], 100, 2);
    cand(&c[1], 101, 1);
    cand(&c[2], 102, 2);
    cand(&c[3], 103, 0);
    cand(&c[4], 104, 1);

    n = pick(OR_STRATEGY_PRIORITY, c, NB, NULL, NULL, order);
    or_is_int(or_select_pin(order, NB, c, 100), 1,
              "R-AFF-1 pin: eligible pin found");
    or_is_str(ord(order, n), "0,3,1,4,2",
              "R-AFF-1 pin: pinned first, rest keeps strategy order");

    or_is_int(or_select_pin(order, NB, c, 999), 0,
              "R-AFF-1 pin: ineligible pin not found (re-pin)");
    or_is_str(ord(order, n), "0,3,1,4,2", "R-AFF-1 pin: order unchanged");

    or_is_int(or_select_pin(order, NB, c, 100), 1,
              "R-AFF-1 pin: already first");
    or_is_str(ord(order, n), "0,3,1,4,2", "R-AFF-1 pin: still unchanged");

    or_is_int(or_select_pin(order, NB, c, 102), 1,
              "R-AFF-1 pin: last one");
    or_is_str(ord(order, n), "2,0,3,1,4", "R-AFF-1 pin: last moved first");
}


static void
test_window(void)
{
    int                  i;
    or_window_t          w;
    or_window_summary_t  s;

    or_window_init(&w);
    or_window_summarize(&w, 1000, &s);
    or_ok(s.samples == 0 && s.errors == 0
          && s.mean_latency_ms == OR_MSEC_NONE,
          "R-ROUTE window: empty");

    /* 25 samples: latency 10*i, even i failed; only the last 20 stay */

    for (i = 1; i <= 25; i++) {
        or_window_add(&w, 1000 + i, 10 * i, i % 2 == 0);
    }

    or_window_summarize(&w, 2000, &s);
    or_is_int(s.samples, 20, "R-ROUTE window: keeps at most 20");
    or_is_int(s.errors, 10, "R-ROUTE window: errors among the last 20");
    or_is_int(s.mean_latency_ms, 155,
              "R-ROUTE window: mean of samples 6..25 (60..250 ms)");

    /* age: exactly 15 min counts, 15 min + 1 ms does not */

    or_window_init(&w);
    or_window_add(&w, 0, 100, 1);
    or_window_add(&w, 60000, 200, 0);
    or_window_add(&w, 120000, -1, 1);

    or_window_summarize(&w, 900000, &s);
    or_ok(s.samples == 3 && s.errors == 2 && s.timed == 2
          && s.mean_latency_ms == 150,
          "R-ROUTE window: sample exactly 15 min old still counts");

    or_window_summarize(&w, 900001, &s);
    or_ok(s.samples == 2 && s.errors == 1 && s.timed == 1
          && s.mean_latency_ms == 200,
          "R-ROUTE window: sample older than 15 min forgotten");

    or_window_summarize(&w, 1020001, &s);
    or_ok(s.samples == 0 && s.timed == 0
          && s.mean_latency_ms == OR_MSEC_NONE,
          "R-ROUTE window: all forgotten after 15 min of silence");

    /* a fresh sample overwrites the oldest slot only */

    for (i = 0; i < 20; i++) {
        or_window_add(&w, 2000000, 50, 0);
    }

    or_window_add(&w, 2000001, 1050, 0);
    or_window_summarize(&w, 2000001, &s);
    or_ok(s.samples == 20 && s.mean_latency_ms == 100,
          "R-ROUTE window: 21st sample replaces the oldest");
    or_is_int(sizeof(or_window_t) <= 328, 1,
              "R-ROUTE window: small fixed-size POD");
}


static void
test_args(void)
{
    int                s, ok;
    uint32_t           order[NB];
    or_cand_t          c[NB];
    or_rand_t          rnd;
    or_select_state_t  st;

    cand(&c[0], 7, 0);
    memset(&st, 0, sizeof(st));
    or_rand_seed(&rnd, 1);
    ok = 1;

    for (s = 0; s < OR_STRATEGY_COUNT; s++) {
        order[0] = 99;
        ok &= or_select_order((or_strategy_e) s, c, 1, 0, 0, &st, &rnd,
                              order) == 1
              && order[0] == 0;
    }

    or_ok(ok, "R-ROUTE: one candidate -> [0] for every strategy");
    or_is_int(or_select_order(OR_STRATEGY_PRIORITY, c, 0, 0, 0, NULL, NULL,
                              order), 0, "R-ROUTE: no candidates -> 0");
    or_is_int(or_select_order(OR_STRATEGY_COUNT, c, 1, 0, 0, NULL, NULL,
                              order), -1, "R-ROUTE: bad strategy -> -1");
    or_is_int(or_select_order(OR_STRATEGY_PRIORITY, c, OR_SELECT_MAX + 1, 0,
                              0, NULL, NULL, order), -1,
              "R-ROUTE: too many candidates -> -1");
    or_is_int(or_select_order(OR_STRATEGY_RANDOM, c, 1, 0, 0, NULL, NULL,
                              order), -1,
              "R-ROUTE: random without a generator -> -1");
}


/* every strategy: same seed + same state -> same 200 orders */

static void
test_determinism(void)
{
    int                s, i, k, n1, n2, same, perm;
    uint32_t           o1[NB], o2[NB];
    or_cand_t          c[NB];
    or_rand_t          r1, r2;
    or_select_state_t  s1, s2;

    for (s = 0; s < OR_STRATEGY_COUNT; s++) {
        for (i = 0; i < NB; i++) {
            cand(&c[i], 200 + 7 * i, i % 3);
            c[i].weight = (uint32_t) (i + 1);
            c[i].max_concurrent = (uint32_t) (i % 2 ? 4 : 0);
            c[i].cost = (double) ((i * 3) % 5);
            c[i].reset_at = i % 2 ? 10000 + i : OR_MSEC_NONE;
            c[i].window.samples = 5;
            c[i].window.timed = 5;
            c[i].window.mean_latency_ms = 100 + 50 * i;
        }

        memset(&s1, 0, sizeof(s1));
        memset(&s2, 0, sizeof(s2));
        or_rand_seed(&r1, 2024);
        or_rand_seed(&r2, 2024);
        same = 1;
        perm = 1;

        for (i = 0; i < 200; i++) {
            c[i % NB].in_flight = (uint32_t) ((i * 7) % 5);
            n1 = or_select_order((or_strategy_e) s, c, NB, 5000, 10, &s1,
                                 &r1, o1);
            n2 = or_select_order((or_strategy_e) s, c, NB, 5000, 10, &s2,
                                 &r2, o2);
            perm &= is_perm(o1, n1, NB);

            for (k = 0; k < NB; k++) {
                same &= n1 == n2 && o1[k] == o2[k];
            }
        }

        or_ok(same && memcmp(&s1, &s2, sizeof(s1)) == 0,
              "R-ROUTE %s: deterministic given seed and state",
              or_strategy_name((or_strategy_e) s));
        or_ok(perm, "R-ROUTE %s: always a permutation",
              or_strategy_name((or_strategy_e) s));
    }
}


int
main(void)
{
    test_rand();
    test_parse();
    test_priority();
    test_weighted();
    test_round_robin();
    test_random();
    test_strict_random();
    test_least_used();
    test_fill_first();
    test_p2c();
    test_p2c_window();
    test_cost();
    test_reset_aware();
    test_headroom();
    test_pin();
    test_window();
    test_args();
    test_determinism();

    return or_done();
}
