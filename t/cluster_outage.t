#!/usr/bin/perl

# R-CLUSTER-3: Redis down, frozen or flapping.  Two nodes (2 workers each)
# keep serving on local state with zero client-visible failures and no
# added latency; the error is logged at most once per log_interval; the
# link state is visible; after Redis returns (empty) both nodes converge,
# including the changes made during the outage; 100 reconnections leak no
# descriptor and leave no "open socket" alert.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use List::Util qw(max);
use POSIX ();
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
    my $name = $n == $na ? 'node-a' : 'node-b';

    $n->config(<<"EOF");
    omniroute_zone zone=omniroute:1m;
    omniroute_redis @{[$redis->addr]} node=$name prefix=t21: timeout=2s
                    keepalive=200ms backoff=20ms backoff_max=300ms
                    log_interval=60s;

    omniroute_provider alpha url=http://127.0.0.1:%%PORT_mock_p%%/v1
                       kind=apikey;
    omniroute_connection a1 provider=alpha key_file=%%TESTDIR%%/key-a1;

    # the names the records below are of (a node takes a remote record
    # only for a name it has)
    omniroute_provider zeta url=http://127.0.0.1:%%PORT_mock_p%%/v1;
    omniroute_connection z1 provider=alpha key_file=%%TESTDIR%%/key-a1;
    omniroute_connection both provider=alpha key_file=%%TESTDIR%%/key-a1;
    omniroute_connection after-thaw provider=alpha
                         key_file=%%TESTDIR%%/key-a1;
    omniroute_connection after-kills provider=alpha
                         key_file=%%TESTDIR%%/key-a1;

${\ server_block(debug => 1, link => 1)}
EOF
}

sub gw { $_[0]->port('gw') }

sub rec {
    my ($n, $q) = @_;
    my $r = $n->get(gw($n), "/debug?$q");
    return eval { decode_json($r->{body}) } || {};
}

sub stats { rec($_[0], '') }

sub link_state { $_[0]->get(gw($_[0]), '/link')->{body} // '' }

sub wait_for {
    my ($cond, $timeout) = @_;
    my $t0 = time;
    while (time - $t0 < ($timeout // 3)) {
        return (time - $t0) * 1000 if $cond->();
        sleep(0.005);
    }
    return undef;
}

# client traffic to both nodes in a child process, one line per request
my $traffic_log = $na->dir . '/traffic.log';
my $traffic_stop = $na->dir . '/traffic.stop';

sub start_traffic {
    unlink $traffic_stop;
    my $pid = fork;
    die "fork: $!" unless defined $pid;
    return $pid if $pid;

    open my $fh, '>>', $traffic_log or POSIX::_exit(1);
    $fh->autoflush(1);
    my $i = 0;
    until (-e $traffic_stop) {
        my $n = $i++ % 2 ? $nb : $na;
        my $t0 = time;
        my $r = $n->post(gw($n), '/v1/chat/completions',
                         { model => 'alpha/m', messages => [] });
        printf $fh "%d %.1f\n", $r->{status}, (time - $t0) * 1000;
        sleep(0.005);
    }
    close $fh;
    POSIX::_exit(0);        # no destructors: they would stop nginx
}

sub stop_traffic {
    my ($pid) = @_;
    open my $fh, '>', $traffic_stop;
    close $fh;
    waitpid($pid, 0);
    open $fh, '<', $traffic_log or return ();
    my @lines = map { [split] } <$fh>;
    close $fh;
    unlink $traffic_log;
    return @lines;
}

$na->run(gw($na));
$nb->run(gw($nb));

ok(defined wait_for(sub { link_state($na) eq 'up' }, 5), 'A: link up');
ok(defined wait_for(sub { link_state($nb) eq 'up' }, 5), 'B: link up');

###########################################################################
# Redis stopped mid-traffic

my $tp = start_traffic();
sleep(0.5);

$redis->stop;
my $t_down = time;

ok(defined wait_for(sub { link_state($na) eq 'down' }, 3),
   'A: the link is down once Redis is gone');
ok(defined wait_for(sub { link_state($nb) eq 'down' }, 3), 'B: down too');

# changes made during the outage, on each side
rec($na, 'table=breaker&key=zeta&op=open&ms=60000&n=5');
rec($nb, 'table=conn&key=z1&op=cooldown&ms=60000');
rec($na, 'table=conn&key=both&op=cooldown&ms=45000');
rec($nb, 'table=conn&key=both&op=terminal');

sleep(1.5);

is(rec($nb, 'table=breaker&key=zeta')->{found}, JSON::PP::false,
   'while Redis is down, nothing crosses (B does not see zeta yet)');

$redis->start;

ok(defined wait_for(sub { link_state($na) eq 'up' }, 5),
   'A: link up again after Redis returns');
ok(defined wait_for(sub { link_state($nb) eq 'up' }, 5), 'B: up again');

ok(defined wait_for(sub { (rec($nb, 'table=breaker&key=zeta')->{state} // '')
                          eq 'OPEN' }, 3),
   'B gets the breaker A opened during the outage');
ok(defined wait_for(sub { (rec($na, 'table=conn&key=z1')->{remaining_ms} // 0)
                          > 50000 }, 3),
   'A gets the cooldown B set during the outage');

my ($ba, $bb);
ok(defined wait_for(sub {
        $ba = rec($na, 'table=conn&key=both');
        $bb = rec($nb, 'table=conn&key=both');
        ($ba->{terminal} // '') eq 'banned'
        && ($bb->{remaining_ms} // 0) > 40000
    }, 3), 'concurrent changes to one record merge: A has B\'s terminal '
           . 'state, B has A\'s cooldown');
is_deeply([@$ba{qw(terminal until failures)}],
          [@$bb{qw(terminal until failures)}],
          'both nodes converge to the same state');
ok(defined $redis->cmd('GET', 't21:breaker:zeta')
   && defined $redis->cmd('GET', 't21:conn:z1'),
   'the restarted (empty) Redis holds both nodes\' state again');

my @req = stop_traffic($tp);
my @bad = grep { $_->[0] != 200 } @req;
my $max = max map { $_->[1] } @req;
cmp_ok(scalar(@req), '>', 100, scalar(@req) . ' requests during the outage');
is(scalar(@bad), 0, 'zero client-visible failures while Redis was down');
# a request that waited for Redis would take its reply timeout (2 s): half
# of it tells the two apart on a loaded machine too
cmp_ok($max, '<', 1000, "no request waited for Redis (slowest $max ms)");

###########################################################################
# Redis frozen (accepts nothing, answers nothing): timeouts, not hangs

$tp = start_traffic();
sleep(0.2);

$redis->pause;

ok(defined wait_for(sub { link_state($na) eq 'down' }, 6),
   'A: a frozen Redis is detected (reply timeout)');
ok(defined wait_for(sub { link_state($nb) eq 'down' }, 6), 'B: detected');
sleep(0.5);

$redis->resume;

ok(defined wait_for(sub { link_state($na) eq 'up' }, 5), 'A: up after thaw');
ok(defined wait_for(sub { link_state($nb) eq 'up' }, 5), 'B: up after thaw');

@req = stop_traffic($tp);
@bad = grep { $_->[0] != 200 } @req;
$max = max map { $_->[1] } @req;
is(scalar(@bad), 0, 'zero failures while Redis was frozen (' . scalar(@req)
   . ' requests)');
cmp_ok($max, '<', 1000, "none waited for Redis (slowest $max ms)");

rec($na, 'table=conn&key=after-thaw&op=cooldown&ms=30000');
ok(defined wait_for(sub { rec($nb, 'table=conn&key=after-thaw')->{found} }, 2),
   'changes flow again after the thaw');

# the error was logged at most once per log_interval (60 s here)
my $sa = stats($na);
my @err = grep { /\[error\].*omniroute redis/ } split /\n/, $na->error_log;
cmp_ok($sa->{failures}, '>=', 3, "A: $sa->{failures} link failures so far");
cmp_ok(scalar(@err), '<=', 1,
       'but at most one error line per interval (' . scalar(@err) . ')');
like($err[0] // '', qr/serving on local state, reconnecting/,
     'the line says what happens');

###########################################################################
# 100 reconnections: no descriptor leak

my @workers = RedisServer::worker_pids($na);
my $owner = $sa->{owner};
ok((grep { $_ == $owner } @workers), "worker $owner holds A's link");

my %fd0 = map { $_ => RedisServer::fd_count($_) } @workers;
my $c0 = stats($na)->{connects};
my $fails = 0;

for my $i (1 .. 100) {
    my $c = stats($na)->{connects};
    $redis->cmd('CLIENT', 'KILL', 'TYPE', 'pubsub');
    $redis->cmd('CLIENT', 'KILL', 'TYPE', 'normal');
    $fails++ unless defined wait_for(sub {
        my $s = stats($na);
        $s->{connects} > $c && $s->{state} eq 'up' }, 3);
}

is($fails, 0, '100 reconnections, each back up');
cmp_ok(stats($na)->{connects} - $c0, '>=', 100,
       'the link was re-established each time');
ok(defined wait_for(sub { link_state($nb) eq 'up' }, 5), 'B is up too');

my %fd1 = map { $_ => RedisServer::fd_count($_) } @workers;
is_deeply(\%fd1, \%fd0, 'workers\' descriptor counts unchanged: '
          . join(', ', map { "$_: $fd0{$_} -> $fd1{$_}" } sort keys %fd0));

rec($nb, 'table=conn&key=after-kills&op=cooldown&ms=30000');
ok(defined wait_for(sub { rec($na, 'table=conn&key=after-kills')->{found} }, 2),
   'and state still flows');

$nb->done;
$na->done;
$redis->stop;
done_testing;
