#!/usr/bin/perl

# Redis re-converges in seconds (issue 12): Redis loses its data while
# both nodes stay connected (FLUSHALL, FLUSHDB) - no reconnection, no
# full load due for 5 minutes.  The nodes notice the epoch key gone
# within a keepalive and push their state back: within 5 s the records
# are in Redis again, and a node started afresh (empty zone) then loads
# the breaker OPEN that the cluster had.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use Time::HiRes qw(sleep time);
use OmniTest;
use RedisServer;
use OmniCluster qw(server_block);

OmniTest::need(RedisServer::available(), 'redis-server not installed');

my $na = OmniTest->new(test_build => 1);
my $redis = RedisServer->new($na)->start;
my $nb = RedisServer::cluster_node($na, 'b');
my $m = $na->mock('p');

$nb->{ports}{mock_p} = $na->port('mock_p');

for my $n ($na, $nb) {
    $n->write_file('key-a1', "sk-a1\n");
}

sub node_config {
    my ($n, $name) = @_;

    $n->config(<<"EOF");
    omniroute_zone zone=omniroute:1m;
    omniroute_redis ${\ $redis->addr} node=$name prefix=t27: timeout=1s
                    backoff=20ms backoff_max=200ms resync=5m keepalive=1s;

    omniroute_provider alpha url=http://127.0.0.1:%%PORT_mock_p%%/alpha;
    omniroute_connection a1 provider=alpha key_file=%%TESTDIR%%/key-a1;

${\ server_block(debug => 1)}
EOF
}

sub gw { $_[0]->port('gw') }

sub rec {
    my ($n, $q) = @_;
    my $r = $n->get(gw($n), "/debug?$q");
    return eval { decode_json($r->{body}) } || { error => $r->{body} };
}

sub stats { rec($_[0], '') }

sub wait_for {
    my ($cond, $timeout) = @_;
    my $t0 = time;
    while (time - $t0 < ($timeout // 5)) {
        return time - $t0 if $cond->();
        sleep(0.02);
    }
    return undef;
}

sub keys_in_redis { join ' ', sort $redis->keys('t27:*') }

node_config($na, 'node-a');
node_config($nb, 'node-b');

$na->run(gw($na));
$nb->run(gw($nb));

ok(defined wait_for(sub { (stats($na)->{state} // '') eq 'up'
                          && (stats($nb)->{state} // '') eq 'up' }),
   'both links up');

ok(defined $redis->cmd('GET', 't27:epoch'), 'the epoch key is set');
cmp_ok($redis->cmd('PTTL', 't27:epoch'), '>', 0, 'with a TTL');

# state on both nodes, shared

rec($na, 'table=breaker&key=alpha&op=open&ms=120000&n=8');
rec($nb, 'table=conn&key=a1&op=cooldown&ms=120000');

ok(defined wait_for(sub { (rec($nb, 'table=breaker&key=alpha')->{state}
                           // '') eq 'OPEN'
                          && rec($na, 'table=conn&key=a1')->{found} }),
   'A\'s breaker and B\'s cooldown are shared');
my $keys = keys_in_redis();
like($keys, qr/t27:breaker:alpha/, 'the breaker is in Redis');
like($keys, qr/t27:conn:a1/, 'so is the cooldown');

my $syncs = stats($na)->{syncs} + stats($nb)->{syncs};
my $connects = stats($na)->{connects} + stats($nb)->{connects};

###########################################################################
# FLUSHALL while both nodes stay connected

is($redis->cmd('FLUSHALL'), 'OK', 'FLUSHALL');
is(keys_in_redis(), '', 'Redis is empty');

my $s = wait_for(sub {
    my $k = keys_in_redis();
    $k =~ /t27:breaker:alpha/ && $k =~ /t27:conn:a1/ && $k =~ /t27:epoch/;
}, 5);
ok(defined $s, 'within 5 s the records are back in Redis'
   . (defined $s ? sprintf(' (%.2f s)', $s) : ''));

is(stats($na)->{connects} + stats($nb)->{connects}, $connects,
   'without a reconnection');
# whichever node finds the epoch key gone first refills it
cmp_ok(stats($na)->{syncs} + stats($nb)->{syncs}, '>', $syncs,
       'by a full sync');
cmp_ok(stats($na)->{refills} + stats($nb)->{refills}, '>=', 1,
       'counted as a refill');
like($na->error_log . $nb->error_log,
     qr/\[warn\].*the state is gone from Redis \(epoch key missing/,
     'and logged');

my $pttl = $redis->cmd('PTTL', 't27:breaker:alpha');
cmp_ok($pttl, '>', 3_600_000, "the breaker key has its TTL again ($pttl)");

# a node started afresh (new zone) gets the breaker OPEN

$nb->stop;
$nb->run(gw($nb));

ok(defined wait_for(sub { (stats($nb)->{state} // '') eq 'up' }),
   'B restarted: link up');
is(rec($nb, 'table=breaker&key=alpha')->{state}, 'OPEN',
   'B, restarted with an empty zone, sees the breaker OPEN');
cmp_ok(rec($nb, 'table=breaker&key=alpha')->{remaining_ms}, '>', 100_000,
       'with the cluster\'s expiry');
ok(rec($nb, 'table=conn&key=a1')->{found}, 'and its own cooldown back');

###########################################################################
# FLUSHDB of the cluster's database, then a write from outside: the epoch
# changed (another token) - the nodes republish too

my ($ra, $rb) = (stats($na)->{refills}, stats($nb)->{refills});

$redis->cmd('FLUSHDB');
$redis->cmd('SET', 't27:epoch', 'someone-else', 'PX', 600000);

$s = wait_for(sub { keys_in_redis() =~ /t27:breaker:alpha/ }, 5);
ok(defined $s, 'a changed epoch also makes the nodes republish'
   . (defined $s ? sprintf(' (%.2f s)', $s) : ''));
ok(defined wait_for(sub { stats($na)->{refills} > $ra
                          && stats($nb)->{refills} > $rb }, 5),
   'each node noticed it on its own');
is($redis->cmd('GET', 't27:epoch'), 'someone-else',
   'and took the epoch it found');

# a quiet Redis: no refill without a reason

($ra, $rb) = (stats($na)->{refills}, stats($nb)->{refills});
sleep(2.5);
is(stats($na)->{refills} . '/' . stats($nb)->{refills}, "$ra/$rb",
   'no refill while Redis keeps its data');

$nb->done;
$na->done;
$redis->stop;

done_testing;
