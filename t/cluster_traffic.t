#!/usr/bin/perl

# R-CLUSTER-2, R-CB-7, R-ML-6, R-CONF-5 (cluster half), end to end with
# real traffic on two nodes (2 workers each) sharing a redis-server:
#   - a breaker opened by failures seen on node A makes node B skip that
#     provider within 100 ms;
#   - a cooldown set on B (429 Retry-After) is honored by A;
#   - a model lockout made on A is honored by B, and its success decay on
#     B reaches A;
#   - an admin breaker reset and a settings PATCH on A take effect on B,
#     a cooldown clear on B on A;
#   - stopping and starting A (not a reload) restores its state.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use Time::HiRes qw(sleep time);
use OmniTest;
use RedisServer;

OmniTest::need(RedisServer::available(), 'redis-server not installed');

my $TOKEN = 'adm-cluster-0123456789-abcdef';
$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;

my $na = OmniTest->new(test_build => 1);
my $redis = RedisServer->new($na)->start;
my $nb = RedisServer::cluster_node($na, 'b');
my $mp = $na->mock('p');
my $ml = $na->mock('lk');

$nb->{ports}{mock_p} = $na->port('mock_p');
$nb->{ports}{mock_lk} = $na->port('mock_lk');

for my $n ($na, $nb) {
    my $name = $n == $na ? 'node-a' : 'node-b';

    $n->write_file('key-f1', "sk-f1~status=503\n");
    $n->write_file('key-g1', "sk-g1\n");
    $n->write_file('key-r1', "sk-r1~status=429,retry=30\n");
    $n->write_file('key-l1', "sk-l1\n");

    $n->config(<<"EOF");
    omniroute_zone zone=omniroute:1m;
    omniroute_redis @{[$redis->addr]} node=$name prefix=t22:;

    omniroute_model_lockout on base=1s max=1m;

    # local profile: 2 provider failures open the breaker; connection
    # cooldowns of a few milliseconds do not interfere
    omniroute_provider flaky url=http://127.0.0.1:%%PORT_mock_p%%/flaky
                       kind=local breaker_reset=30s cooldown_base=1ms
                       cooldown_max=5ms lockout=off;
    omniroute_provider good url=http://127.0.0.1:%%PORT_mock_p%%/good
                       lockout=off;
    omniroute_provider rl url=http://127.0.0.1:%%PORT_mock_p%%/rl
                       lockout=off;
    omniroute_provider lk url=http://127.0.0.1:%%PORT_mock_lk%%/lk
                       quota_family=gpt-5;

    omniroute_connection f1 provider=flaky key_file=%%TESTDIR%%/key-f1;
    omniroute_connection g1 provider=good key_file=%%TESTDIR%%/key-g1;
    omniroute_connection r1 provider=rl key_file=%%TESTDIR%%/key-r1;
    omniroute_connection l1 provider=lk key_file=%%TESTDIR%%/key-l1;

    omniroute_provider pp url=http://127.0.0.1:%%PORT_mock_p%%/pp
                       lockout=off;
    omniroute_connection p1 provider=pp key_file=%%TESTDIR%%/key-g1;
    omniroute_connection p2 provider=pp key_file=%%TESTDIR%%/key-g1;
    omniroute_connection p3 provider=pp key_file=%%TESTDIR%%/key-g1;
    omniroute_combo ppc strategy=round-robin pp/m;

    omniroute_combo chain flaky/m good/m;
    omniroute_combo rlc rl/m good/m;
    omniroute_combo lkc lk/gpt-5-mini good/m;

    omniroute_api_token env=OMNI_TEST_API_TOKEN;

    server {
        listen 127.0.0.1:%%PORT_gw%%;

        location /v1/ {
            omniroute_pass;
            omniroute_session_affinity 1h;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
        }

        location /api/ {
            omniroute_api;
        }

        location /debug {
            omniroute_redis_debug;
        }

        location /link {
            return 200 "\$omniroute_redis_link";
        }
    }
EOF
}

sub gw { $_[0]->port('gw') }

sub chat {
    my ($n, $model) = @_;
    return $n->post(gw($n), '/v1/chat/completions',
                    { model => $model, messages => [] });
}

sub api {
    my ($n, $method, $path, $body) = @_;
    my %h = (Authorization => "Bearer $TOKEN");
    if (defined $body) {
        $body = encode_json($body);
        $h{'Content-Type'} = 'application/json';
    }
    my $r = $n->http(gw($n), OmniTest::request_text($method, $path, $body,
                                                    %h));
    $r->{json} = eval { decode_json($r->{body}) };
    return $r;
}

sub breaker {
    my ($n, $p) = @_;
    return api($n, 'GET', '/api/monitoring/health')
           ->{json}{providers}{$p}{state} // '';
}

sub rec {
    my ($n, $q) = @_;
    return eval { decode_json($n->get(gw($n), "/debug?$q")->{body}) } || {};
}

sub hits {
    my ($mock, $path) = @_;
    return scalar grep { $_->{path} =~ m{^\Q$path\E} } @{$mock->requests};
}

sub wait_for {
    my ($cond, $timeout) = @_;
    my $t0 = time;
    while (time - $t0 < ($timeout // 3)) {
        return (time - $t0) * 1000 if $cond->();
        sleep(0.002);
    }
    return undef;
}

sub within {
    my ($ms) = @_;
    return defined $ms ? sprintf(' (%.1f ms)', $ms) : ' (never)';
}

$na->run(gw($na));
$nb->run(gw($nb));

for my $n ($na, $nb) {
    ok(defined wait_for(sub { $n->get(gw($n), '/link')->{body} eq 'up' }, 5),
       'link up');
}

###########################################################################
# a breaker opened on A: B skips the provider within 100 ms

my $r;
for (1 .. 2) {
    $r = chat($na, 'chain');
    sleep(0.02);
}
is($r->{status}, 200, 'A: the chain falls over to good');
is(breaker($na, 'flaky'), 'OPEN', 'A: two 503s opened flaky\'s breaker');

my $ms = wait_for(sub { breaker($nb, 'flaky') eq 'OPEN' }, 2);
ok(defined $ms && $ms < 100,
   'B: flaky\'s breaker is OPEN within 100 ms' . within($ms));

my $before = hits($mp, '/flaky');
$r = chat($nb, 'chain');
is($r->{status}, 200, 'B: the chain is served');
is($r->{headers}{'x-omniroute-connection'}, 'g1', 'B: by good');
is($r->{headers}{'x-omniroute-attempts'}, '1', 'B: in one attempt');
is(hits($mp, '/flaky'), $before, 'B never tried flaky');

###########################################################################
# a cooldown set on B (429 Retry-After: 30) is honored by A

$r = chat($nb, 'rlc');
is($r->{headers}{'x-omniroute-attempts'}, '2', 'B: r1 answered 429, good 200');

$ms = wait_for(sub { (rec($na, 'table=conn&key=r1')->{remaining_ms} // 0)
                     > 25000 }, 2);
ok(defined $ms && $ms < 100, 'A: r1 cooling down for B\'s Retry-After'
   . within($ms));

$before = hits($mp, '/rl');
$r = chat($na, 'rlc');
is($r->{headers}{'x-omniroute-connection'}, 'g1', 'A: served by good');
is($r->{headers}{'x-omniroute-attempts'}, '1', 'A: in one attempt');
is(hits($mp, '/rl'), $before, 'A never tried r1');

###########################################################################
# a model lockout made on A is honored by B; its success decay reaches A

$ml->set_behavior('status=429');
$r = chat($na, 'lkc');
$ml->set_behavior(undef);
is($r->{headers}{'x-omniroute-attempts'}, '2', 'A: lk answered 429');

my $lkey = 'lk:l1:family:gpt-5';
is(rec($na, "table=lockout&key=$lkey")->{active}, JSON::PP::true,
   "A: $lkey locked");

$ms = wait_for(sub { rec($nb, "table=lockout&key=$lkey")->{active} }, 2);
ok(defined $ms && $ms < 100, 'R-ML-6 B: the lockout is active within 100 ms'
   . within($ms));

$before = hits($ml, '/lk');
$r = chat($nb, 'lkc');
is($r->{headers}{'x-omniroute-connection'}, 'g1', 'B: served by good');
is(hits($ml, '/lk'), $before, 'B skipped the locked model');

my $epoch = rec($na, "table=lockout&key=$lkey")->{epoch};

sleep(1.1);     # the 1 s lockout expires; the next success decays it

$r = chat($nb, 'lkc');
is($r->{headers}{'x-omniroute-connection'}, 'l1',
   'B: after expiry lk serves again');
is(rec($nb, "table=lockout&key=$lkey")->{failures}, 0,
   'B: the success decayed the count to 0');

$ms = wait_for(sub { my $x = rec($na, "table=lockout&key=$lkey");
                     ($x->{failures} // 1) == 0 && $x->{epoch} > $epoch },
               2);
ok(defined $ms && $ms < 100, 'A: the decay arrives within 100 ms'
   . within($ms));

###########################################################################
# operator actions on one node take effect on the other

$r = api($na, 'POST', '/api/resilience/reset', { provider => 'flaky' });
is_deeply($r->{json}{reset}, ['flaky'], 'A: admin reset of flaky');

$ms = wait_for(sub { breaker($nb, 'flaky') eq 'CLOSED' }, 2);
ok(defined $ms && $ms < 100, 'B: flaky CLOSED within 100 ms' . within($ms));

$before = hits($mp, '/flaky');
chat($nb, 'chain');
is(hits($mp, '/flaky'), $before + 1, 'B: tries flaky again');

$r = api($na, 'PATCH', '/api/resilience',
         { providers => { good => { breaker => { open_threshold => 5 } } } });
is($r->{status}, 200, 'A: PATCH good.breaker.open_threshold = 5');

$ms = wait_for(sub {
        (api($nb, 'GET', '/api/resilience')
         ->{json}{providers}{good}{breaker}{open_threshold} // 0) == 5 }, 2);
ok(defined $ms && $ms < 100, 'R-CONF-5 B: the runtime setting applies within '
   . '100 ms' . within($ms));

sleep(0.01);
$r = api($nb, 'PATCH', '/api/resilience',
         { providers => { good => { breaker => { open_threshold => 6 } } } });
ok(defined wait_for(sub {
        (api($na, 'GET', '/api/resilience')
         ->{json}{providers}{good}{breaker}{open_threshold} // 0) == 6 }, 2),
   'a later PATCH on B wins on A');

$r = api($nb, 'POST', '/api/resilience/cooldowns',
         { connectionIds => ['r1'] });
is($r->{status}, 200, 'B: cooldown of r1 cleared');
ok(defined wait_for(sub { (rec($na, 'table=conn&key=r1')->{remaining_ms} // 1)
                          == 0 }, 2),
   'A: r1 no longer cooling down');

###########################################################################
# A stopped and started (new shared memory): state comes back from Redis

chat($nb, 'rlc');               # r1 cooling down again, from B
for (1 .. 2) {                  # flaky open again, from A
    chat($na, 'chain');
    sleep(0.02);
}
is(breaker($na, 'flaky'), 'OPEN', 'A: flaky open again');
ok(defined wait_for(sub { breaker($nb, 'flaky') eq 'OPEN' }, 2),
   'and B knows');

# R-AFF-1 across nodes: a session pinned on A goes to the same connection
# on B, whose round-robin cursor is its own
sub session_conn {
    my ($n) = @_;
    my $r = $n->post(gw($n), '/v1/chat/completions',
                     { model => 'ppc', messages => [] },
                     'X-Session-Id' => 'cluster-session-1');
    return $r->{headers}{'x-omniroute-connection'} // 'none';
}

my $pinned = session_conn($na);
like($pinned, qr/^p[123]$/, 'a session pinned on A');
sleep(0.2);
my %on_b = map { session_conn($nb) => 1 } 1 .. 6;
is_deeply([keys %on_b], [$pinned],
          'R-AFF-1 B sends the session to the connection pinned on A');

$na->stop;
$na->run(gw($na));
ok(defined wait_for(sub { $na->get(gw($na), '/link')->{body} eq 'up' }, 5),
   'A restarted: link up');

is(breaker($na, 'flaky'), 'OPEN',
   'R-CB-7 A\'s breaker survived the restart (from Redis)');
is(api($na, 'GET', '/api/resilience')
   ->{json}{providers}{good}{breaker}{open_threshold}, 6,
   'the runtime setting survived the restart');

$before = hits($mp, '/rl');
$r = chat($na, 'rlc');
is($r->{headers}{'x-omniroute-connection'}, 'g1',
   'A honors B\'s cooldown after the restart');
is(hits($mp, '/rl'), $before, 'without trying r1');

$nb->done;
$na->done;
$redis->stop;
done_testing;
