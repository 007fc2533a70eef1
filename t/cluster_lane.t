#!/usr/bin/perl

# R-LANE-2/5/8 across a cluster: two nodes (2 workers each) sharing a
# redis-server.  The usage-limit lane met on node A (the wall 429 of
# t/lib/WallMock.pm) is a record of table "lane": node B's next request to
# that connection carries "anthropic-usage-limit: slow" from its first
# attempt and B's admin API shows the lane; an end state met on node B
# (weekly_limit) ends the lane on A, where the connection cools down; the
# session-limit reset's memo made on A spares B a probe.
# Forged lane records written into Redis (published, and SET for the full
# loads) are rejected and counted by both nodes, logged without their
# bytes, and lose nothing: the lane goes on, Redis gets the nodes' copy
# back; a valid record in the same layout is taken.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use POSIX ();
use Time::HiRes qw(sleep time);
use OmniTest;
use RedisServer;
use OmniCluster qw(server_block);
use WallMock;

OmniTest::need(RedisServer::available(), 'redis-server not installed');

my $TOKEN = 'adm-cluster-lane-0123456789';
$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;

my $na = OmniTest->new(test_build => 1);
my $redis = RedisServer->new($na)->start;
my $nb = RedisServer::cluster_node($na, 'b');
my $wall = WallMock->new(port => $na->port('mock_wall'),
                         log => $na->dir . '/wall.log');
$wall->start;

my $used = WallMock->new(port => $na->port('mock_used'),
                         log => $na->dir . '/used.log', usage => 'used');
$used->start;

$nb->{ports}{mock_wall} = $na->port('mock_wall');
$nb->{ports}{mock_used} = $na->port('mock_used');

for my $n ($na, $nb) {
    my $name = $n == $na ? 'node-a' : 'node-b';

    # l2's lane answers 200 on A, weekly_limit on B
    my $l2 = $n == $na ? 'reset=3600,on=a' : 'reset=3600,slow=weekly_limit';

    $n->write_file('key', "sk-ant-oat01-secret\n");

    $n->config(<<"EOF");
    omniroute_zone zone=omniroute:1m;
    omniroute_redis @{[$redis->addr]} node=$name prefix=t39: resync=1s
                    log_interval=30s;

    omniroute_provider p1 url=http://127.0.0.1:%%PORT_mock_wall%%/m/reset=3600/v1
                       kind=oauth auth=x-api-key;
    omniroute_provider p2 url=http://127.0.0.1:%%PORT_mock_wall%%/m/$l2/v1
                       kind=oauth auth=x-api-key;
    omniroute_provider p3 url=http://127.0.0.1:%%PORT_mock_wall%%/m/reset=3600,on=3/v1
                       kind=oauth auth=x-api-key;

    omniroute_connection l1 provider=p1 key_file=%%TESTDIR%%/key usage_lane=on;
    omniroute_connection l2 provider=p2 key_file=%%TESTDIR%%/key usage_lane=on;
    omniroute_connection l3 provider=p3 key_file=%%TESTDIR%%/key usage_lane=on;

    # the session-limit reset alone, no reset available (R-LANE-7)
    omniroute_provider p4 url=http://127.0.0.1:%%PORT_mock_used%%/m/reset=3600/v1
                       kind=oauth auth=x-api-key;
    omniroute_connection l4 provider=p4 key_file=%%TESTDIR%%/key
                         limit_reset=on org=0a1b2c3d-0000-4000-8000-aabbcc
                         disable_cooling=on;

    omniroute_api_token env=OMNI_TEST_API_TOKEN;

${\ server_block(debug => 1, api => 'paths')}
EOF
}

sub gw { $_[0]->port('gw') }

sub ask {
    my ($n, $model) = @_;
    return $n->post(gw($n), '/v1/messages',
                    { model => $model, max_tokens => 64,
                      messages => [{ role => 'user', content => 'hi' }] });
}

sub api {
    my ($n, $method, $path) = @_;
    my $r = $n->http(gw($n), OmniTest::request_text($method, $path, undef,
                     Authorization => "Bearer $TOKEN"));
    $r->{json} = eval { decode_json($r->{body}) };
    return $r;
}

sub conn_of {
    my ($n, $id) = @_;
    my ($c) = grep { $_->{id} eq $id }
              @{api($n, 'GET', '/api/resilience/cooldowns')->{json}
                {connections} // []};
    return $c // {};
}

sub lane_of { conn_of(@_)->{lane} // {} }

sub stats {
    my ($n) = @_;
    return eval { decode_json($n->get(gw($n), '/debug')->{body}) } || {};
}

sub metric {
    my ($n, $name) = @_;
    my $body = api($n, 'GET', '/metrics')->{body} // '';
    return $body =~ /^\Q$name\E (\S+)$/m ? $1 : undef;
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

sub within { defined $_[0] ? sprintf(' (%.1f ms)', $_[0]) : ' (never)' }

sub slow { ($_[0]{headers}{'anthropic-usage-limit'} // '') eq 'slow' }

sub reqs {
    my ($re) = @_;
    return [grep { $_->{path} =~ $re } @{$wall->requests}];
}

# the wire format (src/core/or_wire.h) and or_lane_t (src/core/or_lane.h),
# x86-64 layouts; table "lane" is 8

my $LANE = 8;

sub value {
    my ($state, $time) = @_;
    return pack('a2CCVq<', 'OR', 1, $LANE, length $state,
                $time // int(time * 1000)) . $state;
}

sub message {
    my ($key, $state) = @_;
    my $node = 'evil';
    return pack('a2CCCCCCq<VV', 'OR', 1, 0, $LANE, length $node,
                length $key, 0, int(time * 1000), length $state, 0)
           . $node . $key . $state;
}

# changed_at entered_at until ended_at block_until reset_at reset_next_at
# entries waits phase end reset_result reserved[5]
sub lane {
    my (%f) = @_;
    return pack('q<7VVCCCa5', map({ $f{$_} // 0 } qw(changed_at entered_at
                until ended_at block_until reset_at reset_next_at entries
                waits phase end reset_result)), $f{reserved} // "\0" x 5);
}

# redis-cli -x: the last argument (the value, the message) from stdin
sub cli { return $redis->cli_x(@_); }

###########################################################################

$na->run(gw($na));
$nb->run(gw($nb));

ok(defined wait_for(sub { (stats($na)->{state} // '') eq 'up'
                          && (stats($nb)->{state} // '') eq 'up' }, 5),
   'both links up');

# R-LANE-2: A meets the wall and enters the lane

my $r = ask($na, 'p1/claude');
is($r->{status}, 200, 'A: the wall 429 did not reach the client');
is($r->{headers}{'x-omniroute-connection'}, 'l1', 'A: served by l1');
my $seen = reqs(qr{^/m/reset=3600/});
ok(@$seen == 2 && !slow($seen->[0]) && slow($seen->[1]),
   'A: the wall, then the retry in the lane');

my $la = lane_of($na, 'l1');
is($la->{phase}, 'active', 'A: the lane is active');

# R-LANE-8: B gets the record

my $ms = wait_for(sub { (lane_of($nb, 'l1')->{phase} // '') eq 'active' });
ok(defined $ms && $ms < 100,
   'B: the admin API shows the lane within 100 ms' . within($ms));
my $lb = lane_of($nb, 'l1');
is($lb->{until}, $la->{until}, 'B: the same end as on A');
is($lb->{entries}, 1, 'B: one entry (A\'s)');
ok(abs($lb->{until} / 1000 - (time + 3600 + 60)) < 5,
   'B: until the announced reset + 60 s');
is(conn_of($nb, 'l1')->{status}, 'active', 'B: l1 is not cooling down');
my $pttl = $redis->cmd('PTTL', 't39:lane:l1') // -1;
ok(abs($pttl / 1000 - (3660 + 3600 + 3600)) < 10,
   "R-CLUSTER-3 the key lasts the lane + 1 h + retention ($pttl ms)");

# B's request carries the slow header from its first attempt: no wall

$wall->clear;
$r = ask($nb, 'p1/claude');
is($r->{status}, 200, 'B: answered');
is($r->{headers}{'x-omniroute-connection'}, 'l1', 'B: by l1');
$seen = reqs(qr{^/m/reset=3600/});
is(scalar @$seen, 1, 'B: one attempt, no wall on the way');
ok(@$seen && slow($seen->[0]),
   'B: the first attempt carried anthropic-usage-limit: slow');
is($seen->[0]{headers}{'x-api-key'}, 'sk-ant-oat01-secret',
   'B: with the connection\'s credential');
is(lane_of($nb, 'l1')->{entries}, 1, 'B: no new entry');

# R-LANE-5: an end state met on B ends the lane on A

$r = ask($na, 'p2/claude');
is($r->{status}, 200, 'A: l2 enters the lane');
ok(defined wait_for(sub { (lane_of($nb, 'l2')->{phase} // '') eq 'active' }),
   'B: knows l2\'s lane');

$wall->clear;
$r = ask($nb, 'p2/claude');
is($r->{status}, 429, 'B: l2\'s lane says weekly_limit: the 429 reaches the '
   . 'client');
$seen = reqs(qr{^/m/reset=3600,slow=weekly_limit/});
ok(@$seen == 1 && slow($seen->[0]), 'B: its one attempt was in the lane');
is(lane_of($nb, 'l2')->{end}, 'weekly_limit', 'B: the lane ended');

$ms = wait_for(sub { (lane_of($na, 'l2')->{end} // '') eq 'weekly_limit' });
ok(defined $ms && $ms < 100,
   'A: the end state arrives within 100 ms' . within($ms));
$la = lane_of($na, 'l2');
is($la->{phase}, 'ended', 'A: the lane of l2 ended');
ok(defined wait_for(sub { (conn_of($na, 'l2')->{status} // '') eq 'cooldown' }),
   'A: l2 cools down (B\'s 429)');

$wall->clear;
$r = ask($na, 'p2/claude');
isnt($r->{status}, 200, 'A: l2 not served (' . $r->{status} . ')');
is(scalar @{$wall->requests}, 0, 'A: no attempt on l2, no slow header sent');

# R-LANE-7: the reset memo is shared: the probe made on A is not made
# again on B before next_available_at

$r = ask($na, 'p4/claude');
is($r->{status}, 429, 'A: l4\'s wall, no reset available: the 429');
is_deeply([map { "$_->{method} $_->{path}" } @{$used->requests}],
          ['POST /m/reset=3600/v1/messages',
           'GET /api/oauth/usage?at_wall=1&skip_spend=1'],
          'A: the wall, then the usage probe');

$ms = wait_for(sub { ((lane_of($nb, 'l4')->{reset} // {})->{result} // '')
                     eq 'unavailable' });
ok(defined $ms && $ms < 100, 'B: the memo arrives within 100 ms'
   . within($ms));
ok(abs(lane_of($nb, 'l4')->{reset}{next_at} / 1000 - (time + 2 * 86400)) < 5,
   'B: memoised until next_available_at');

$used->clear;
$r = ask($nb, 'p4/claude');
is($r->{status}, 429, 'B: l4\'s wall: the 429');
is_deeply([map { "$_->{method} $_->{path}" } @{$used->requests}],
          ['POST /m/reset=3600/v1/messages'],
          'B: no second probe (A\'s memo)');

###########################################################################
# forged lane records in Redis

my $good = $redis->cmd('GET', 't39:lane:l1') // '';
is(length $good, 16 + 72, 'the lane value in Redis has the size the test '
   . 'assumes');
my $good_state = substr($good, 16);
my $rej0 = { map { ($_ => stats($_)->{rejected} // 0) } $na, $nb };
$la = lane_of($na, 'l1');
my $now = int(time * 1000);

# published: l1 ended with an end state out of range (it would win: later)
cli(message('l1', lane(changed_at => $now + 1000, entered_at => $now - 5000,
                       ended_at => $now + 1000, phase => 2, end => 99,
                       entries => 1)),
    'PUBLISH', 't39:events:0');

ok(defined wait_for(sub { (stats($na)->{rejected} // 0) > $rej0->{$na}
                          && (stats($nb)->{rejected} // 0) > $rej0->{$nb} }),
   'both nodes reject the published lane with a bad end');

# SET: an active lane that lasts 9 days (more than the 8 the engine allows)
is(cli(value(lane(changed_at => $now + 1000, entered_at => $now,
                  until => $now + 9 * 86400_000, phase => 1, entries => 5)),
       'SET', 't39:lane:l1'), 'OK', 'SET a 9-day lane for l1');

# the first full load to read it rejects it and pushes its own copy over
# it, so the other node may never see it
ok(defined wait_for(sub { (stats($na)->{rejected} // 0)
                          + (stats($nb)->{rejected} // 0)
                          >= $rej0->{$na} + $rej0->{$nb} + 3 }, 5),
   'and, at a node\'s next full load, the SET one')
    or diag(encode_json([stats($na), stats($nb)]));

ok(defined wait_for(sub { substr($redis->cmd('GET', 't39:lane:l1') // '', 16)
                          eq $good_state }, 5),
   'Redis holds the nodes\' own lane of l1 again');

for my $n ($na, $nb) {
    my $name = $n == $na ? 'A' : 'B';
    my $got = stats($n)->{rejected};
    cmp_ok($got, '>', $rej0->{$n}, "$name: rejected counted ($got)");
    is(metric($n, 'omniroute_redis_records_rejected_total'), $got,
       "$name: omniroute_redis_records_rejected_total counts them");
}
is(stats($na)->{errors}, 0, 'rejected, not errors');

for my $n ($na, $nb) {
    my $name = $n == $na ? 'A' : 'B';
    my $l = lane_of($n, 'l1');
    is_deeply([@$l{qw(phase until entries end)}],
              [@$la{qw(phase until entries end)}],
              "$name: the lane of l1 is unchanged");
}

my @lines = grep { /rejected an invalid record/ } split /\n/, $na->error_log;
like($lines[0] // '',
     qr/\[warn\].*table "lane", key "l1" \(bad end\); ignored/,
     'the rejection is logged with table, key and field');

$wall->clear;
$r = ask($nb, 'p1/claude');
is($r->{status}, 200, 'B: l1 still serves');
$seen = $wall->requests;
ok(@$seen == 1 && slow($seen->[0]), 'B: still in the lane from the first '
   . 'attempt');

# control: a valid record in the same layout is taken (l3's lane ended: off)

$now = int(time * 1000);
cli(message('l3', lane(changed_at => $now, entered_at => $now - 60_000,
                       ended_at => $now, phase => 2, end => 4,
                       entries => 1)),
    'PUBLISH', 't39:events:0');
ok(defined wait_for(sub { (lane_of($na, 'l3')->{end} // '') eq 'off'
                          && (lane_of($nb, 'l3')->{end} // '') eq 'off' }),
   'control: a valid published lane is applied by both nodes');

unlike($na->read_file('logs/error.log') . $nb->read_file('logs/error.log'),
       qr/sk-ant-oat01-secret/, 'the credential is never logged');
unlike(join('', map { $redis->cmd('GET', $_) // '' } $redis->keys('t39:*')),
       qr/sk-ant-oat01-secret/, 'nor sent to Redis');

$wall->stop;
$used->stop;
$nb->done;
$na->done;
$redis->stop;
done_testing;
