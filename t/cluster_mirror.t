#!/usr/bin/perl

# R-CLUSTER-2, R-CB-7, R-ML-6: two nginx nodes (2 workers each) share
# their state through a real redis-server: every change made on one node
# is visible on the other within 100 ms, merged by the engine's rules;
# keys carry TTLs; a stopped and restarted node gets its state back.
# State is changed through omniroute_redis_debug (the request path's own
# writes are covered by t/cluster_traffic.t).

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

$na->write_file('key-a1', "sk-secret-a1\n");
$nb->write_file('key-a1', "sk-secret-a1\n");

sub node_config {
    my ($n, $name, $addr, $extra) = @_;
    $extra //= '';

    $n->config(<<"EOF");
    omniroute_zone zone=omniroute:1m;
    omniroute_redis $addr node=$name prefix=t20: timeout=1s backoff=20ms
                    backoff_max=200ms $extra;

    omniroute_provider alpha url=http://127.0.0.1:%%PORT_mock_p%%/v1
                       kind=apikey auth=bearer;
    omniroute_connection a1 provider=alpha key_file=%%TESTDIR%%/key-a1;

    # the names the records below are of (a node takes a remote record
    # only for a name it has)
    omniroute_provider beta url=http://127.0.0.1:%%PORT_mock_p%%/v1;
    omniroute_connection a2 provider=alpha key_file=%%TESTDIR%%/key-a1;
    omniroute_connection a3 provider=alpha key_file=%%TESTDIR%%/key-a1;
    omniroute_connection a4 provider=alpha key_file=%%TESTDIR%%/key-a1;
    omniroute_connection gone provider=alpha key_file=%%TESTDIR%%/key-a1;

${\ server_block(debug => 1, link => 1)}
EOF
}

sub gw { $_[0]->port('gw') }

sub rec {
    my ($n, $q) = @_;
    my $r = $n->get(gw($n), "/debug?$q");
    return eval { decode_json($r->{body}) } || { error => $r->{body} };
}

sub link_state { $_[0]->get(gw($_[0]), '/link')->{body} // '' }

# poll until $cond->() is true; elapsed ms, or undef after $timeout s
sub wait_for {
    my ($cond, $timeout) = @_;
    my $t0 = time;
    while (time - $t0 < ($timeout // 3)) {
        return (time - $t0) * 1000 if $cond->();
        sleep(0.002);
    }
    return undef;
}

sub wait_up {
    my ($n) = @_;
    return wait_for(sub { link_state($n) eq 'up' }, 5);
}

###########################################################################
# configuration errors

$na->config(<<'EOF');
    omniroute_redis 127.0.0.1:6379;
    server { listen 127.0.0.1:%%PORT_gw%%; }
EOF
my ($rc, $out) = $na->test_config;
isnt($rc, 0, 'omniroute_redis without omniroute_zone is rejected');
like($out, qr/"omniroute_redis" requires "omniroute_zone"/,
     'and the message says why');

for my $bad (['localhost:6379', qr/invalid Redis address "localhost:6379"/],
             ['127.0.0.1:99999', qr/invalid Redis address/],
             ['127.0.0.1 prefix=a*', qr/invalid parameter "prefix=a\*"/],
             ['127.0.0.1 timeout=0', qr/invalid parameter "timeout=0"/],
             ['127.0.0.1 bogus=1', qr/invalid parameter "bogus=1"/],
             ['127.0.0.1 password=', qr/invalid parameter "password="/],
             ['127.0.0.1 password_file=/nonexistent/pw',
              qr/password file: cannot open "\/nonexistent\/pw"/])
{
    $na->config(<<"EOF");
    omniroute_zone zone=omniroute:1m;
    omniroute_redis $bad->[0];
    server { listen 127.0.0.1:%%PORT_gw%%; }
EOF
    ($rc, $out) = $na->test_config;
    isnt($rc, 0, "\"$bad->[0]\" is rejected");
    like($out, $bad->[1], "\"$bad->[0]\": the message names the problem");
}

# omniroute_redis_debug exists in the test build only

$na->config(<<'EOF', module => $OmniTest::MODULE);
    omniroute_zone zone=omniroute:1m;
    server {
        listen 127.0.0.1:%%PORT_gw%%;
        location /debug { omniroute_redis_debug; }
    }
EOF
($rc, $out) = $na->test_config;
isnt($rc, 0, 'the production module rejects omniroute_redis_debug');
like($out, qr/unknown directive "omniroute_redis_debug"/,
     'as an unknown directive');

$na->config(<<'EOF');
    omniroute_zone zone=omniroute:1m;
    server {
        listen 127.0.0.1:%%PORT_gw%%;
        location /debug { omniroute_redis_debug; }
    }
EOF
($rc, $out) = $na->test_config;
is($rc, 0, 'the test build knows omniroute_redis_debug') or diag($out);

###########################################################################
# two nodes: A on the unix socket, B over TCP

node_config($na, 'node-a', 'unix:' . $redis->socket_path);
node_config($nb, 'node-b', $redis->addr);

$na->run(gw($na));
$nb->run(gw($nb));

ok(defined wait_up($na), 'node A: link up (unix socket)');
ok(defined wait_up($nb), 'node B: link up (TCP)');

# the request path serves as before
is($na->post(gw($na), '/v1/chat/completions', { model => 'alpha/m' })->{status},
   200, 'a request is served with the mirror on');

# breaker opened on A: B within 100 ms

my $r = rec($na, 'table=breaker&key=alpha&op=open&ms=30000&n=8');
is($r->{state}, 'OPEN', 'A: breaker alpha OPEN');

my $ms = wait_for(sub { (rec($nb, 'table=breaker&key=alpha')->{state} // '')
                        eq 'OPEN' }, 2);
ok(defined $ms && $ms < 100,
   'R-CB-7 B sees the breaker OPEN within 100 ms'
   . (defined $ms ? sprintf(' (%.1f ms)', $ms) : ''));
$r = rec($nb, 'table=breaker&key=alpha');
is($r->{failures}, 8, 'B: with A\'s failure count');
cmp_ok($r->{remaining_ms}, '>', 29000, 'B: and A\'s open_until');

my $pttl = $redis->cmd('PTTL', 't20:breaker:alpha');
ok($pttl > 3_600_000 && $pttl <= 3_630_000,
   "the Redis key has a TTL: state expiry + retention ($pttl ms)");

# cooldown set on B: A honors it

$r = rec($nb, 'table=conn&key=a1&op=cooldown&ms=20000');
cmp_ok($r->{remaining_ms}, '>', 19000, 'B: connection a1 cooling down');

$ms = wait_for(sub { (rec($na, 'table=conn&key=a1')->{remaining_ms} // 0)
                     > 19000 }, 2);
ok(defined $ms && $ms < 100, 'A sees B\'s cooldown within 100 ms'
   . (defined $ms ? sprintf(' (%.1f ms)', $ms) : ''));

# the later expiry wins: a shorter cooldown on A does not shorten it

rec($na, 'table=conn&key=a1&op=cooldown&ms=1000');
sleep(0.2);
cmp_ok(rec($nb, 'table=conn&key=a1')->{remaining_ms}, '>', 18000,
       'a later, shorter cooldown does not shorten the longer one (B)');
cmp_ok(rec($na, 'table=conn&key=a1')->{remaining_ms}, '>', 18000,
       'nor on A');
is(rec($nb, 'table=conn&key=a1')->{failures},
   rec($na, 'table=conn&key=a1')->{failures},
   'both nodes agree on the failure count');

# terminal beats transient, cluster-wide

rec($nb, 'table=conn&key=a2&op=cooldown&ms=5000');
rec($na, 'table=conn&key=a2&op=terminal');
ok(defined wait_for(sub { (rec($nb, 'table=conn&key=a2')->{terminal} // '')
                          eq 'banned' }, 2),
   'a terminal state set on A reaches B');
is($redis->cmd('PTTL', 't20:conn:a2') > 29 * 86400 * 1000 ? 1 : 0, 1,
   'a terminal state is kept 30 days in Redis');

# model lockout and its success decay (R-ML-6)

rec($na, 'table=lockout&key=alpha:a1:exact:gpt-x&op=lock&ms=60000&n=4');
ok(defined wait_for(sub {
        my $x = rec($nb, 'table=lockout&key=alpha:a1:exact:gpt-x');
        ($x->{failures} // 0) == 4 && $x->{active} }, 2),
   'R-ML-6 a lockout on A is active on B');

sleep(0.01);
rec($na, 'table=lockout&key=alpha:a1:exact:gpt-x&op=decay');
ok(defined wait_for(sub {
        (rec($nb, 'table=lockout&key=alpha:a1:exact:gpt-x')->{failures} // 0)
        == 2 }, 2),
   'a success decay on A halves the count on B');

sleep(0.01);
rec($nb, 'table=lockout&key=alpha:a1:exact:gpt-x&op=decay');
sleep(0.01);
rec($nb, 'table=lockout&key=alpha:a1:exact:gpt-x&op=decay');
ok(defined wait_for(sub {
        my $x = rec($na, 'table=lockout&key=alpha:a1:exact:gpt-x');
        ($x->{failures} // 1) == 0 && !$x->{active} }, 2),
   'decayed to 0 on B: the lockout is gone on A too (tombstone)');
my $tomb = rec($na, 'table=lockout&key=alpha:a1:exact:gpt-x');

# a stale copy cannot resurrect it: replay the old value into Redis

is(rec($nb, 'table=lockout&key=alpha:a1:exact:gpt-x')->{epoch},
   $tomb->{epoch}, 'both nodes hold the same tombstone epoch');

# admin reset (epoch) propagates

rec($nb, 'table=breaker&key=alpha&op=reset');
ok(defined wait_for(sub { (rec($na, 'table=breaker&key=alpha')->{state} // '')
                          eq 'CLOSED' }, 2),
   'a breaker reset on B closes it on A');
is(rec($na, 'table=breaker&key=alpha')->{epoch}, 1, 'with the new epoch');

# settings: last writer wins

rec($na, 'table=settings&key=alpha&op=set&value=one');
ok(defined wait_for(sub { (rec($nb, 'table=settings&key=alpha')->{value}
                           // '') eq 'one' }, 2),
   'a settings record written on A reaches B');
sleep(0.01);
rec($nb, 'table=settings&key=alpha&op=set&value=two');
ok(defined wait_for(sub { (rec($na, 'table=settings&key=alpha')->{value}
                           // '') eq 'two' }, 2),
   'a later write on B wins on A');

# deletes propagate

rec($na, 'table=conn&key=gone&op=cooldown&ms=9000');
ok(defined wait_for(sub { rec($nb, 'table=conn&key=gone')->{found} }, 2),
   'a record to delete reached B');
rec($na, 'table=conn&key=gone&op=delete');
ok(defined wait_for(sub { !rec($nb, 'table=conn&key=gone')->{found} }, 2),
   'a delete on A removes the record on B');
ok(!defined $redis->cmd('GET', 't20:conn:gone'), 'and the Redis key');

# every key has a TTL; nothing holds a credential

my @keys = $redis->keys('t20:*');
ok(scalar(@keys) >= 5, 'state keys in Redis: ' . join(' ', sort @keys));
my @no_ttl = grep { $redis->cmd('PTTL', $_) <= 0 } @keys;
is_deeply(\@no_ttl, [], 'every key has a TTL');
my @leak = grep { ($redis->cmd('GET', $_) // '') =~ /sk-secret/ } @keys;
is_deeply(\@leak, [], 'no credential in Redis');

# own messages are not applied back

my $sa = decode_json($na->get(gw($na), '/debug')->{body});
my $sb = decode_json($nb->get(gw($nb), '/debug')->{body});
cmp_ok($sa->{published}, '>=', 6, "A published its changes ($sa->{published})");
cmp_ok($sb->{received}, '>=', 6, "B received them ($sb->{received})");
is($sa->{errors} + $sb->{errors}, 0, 'no error replies, no bad data');

###########################################################################
# reload keeps the link and the state

$na->reload;
ok(defined wait_up($na), 'A: link up after a reload');
is(rec($na, 'table=conn&key=a2')->{terminal}, 'banned',
   'A: state kept across the reload');
rec($nb, 'table=conn&key=a3&op=cooldown&ms=15000');
ok(defined wait_for(sub { rec($na, 'table=conn&key=a3')->{found} }, 2),
   'A (new workers) receives B\'s changes');
rec($na, 'table=conn&key=a4&op=cooldown&ms=15000');
ok(defined wait_for(sub { rec($nb, 'table=conn&key=a4')->{found} }, 2),
   'B receives changes of A\'s new workers');

###########################################################################
# stop A (its shared memory is gone), change state on B, start A again

rec($na, 'table=breaker&key=beta&op=open&ms=40000');
ok(defined wait_for(sub { rec($nb, 'table=breaker&key=beta')->{found} }, 2),
   'A\'s last change reached B before the stop');
$na->stop;

rec($nb, 'table=lockout&key=alpha:a1:family:gpt-5&op=lock&ms=50000&n=2');

$na->run(gw($na));
ok(defined wait_up($na), 'A restarted: link up');

is(rec($na, 'table=breaker&key=beta')->{state}, 'OPEN',
   'R-CB-7 A\'s own breaker is restored from Redis after a restart');
cmp_ok(rec($na, 'table=breaker&key=beta')->{remaining_ms}, '>', 30000,
       'with its expiry');
is(rec($na, 'table=conn&key=a2')->{terminal}, 'banned',
   'the terminal state is restored');
cmp_ok(rec($na, 'table=conn&key=a1')->{remaining_ms}, '>', 10000,
       'B\'s cooldown is restored');
ok(rec($na, 'table=lockout&key=alpha:a1:family:gpt-5')->{active},
   'R-ML-6 a lockout set on B while A was stopped is active on A');
is(rec($na, 'table=lockout&key=alpha:a1:exact:gpt-x')->{epoch},
   $tomb->{epoch}, 'the lockout tombstone is restored (no resurrection)');
is(rec($na, 'table=settings&key=alpha')->{value}, 'two',
   'the settings record is restored');

my $st = decode_json($na->get(gw($na), '/debug')->{body});
cmp_ok($st->{loaded}, '>=', 8, "A loaded the state with SCAN ($st->{loaded} "
       . 'records)');

$nb->done;
$na->done;
$redis->stop;
done_testing;
