#!/usr/bin/perl

# R-CLUSTER-3, R-CONF-6: a password-protected Redis and a non-default
# database (AUTH, SELECT); a wrong password keeps the link down, is
# logged once per interval and never shows the password; a Redis that
# stalls (CLIENT PAUSE) while a burst of changes overflows the store's
# event ring: the loss is counted and logged, nothing blocks, and a
# resynchronization delivers every change.

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

my $PASSWORD = 'redis-pw-Zq81x0';

my $na = OmniTest->new(test_build => 1);
my $redis = RedisServer->new($na, password => $PASSWORD)->start;
my $nb = RedisServer::cluster_node($na, 'b');
my $nc = RedisServer::cluster_node($na, 'c');

$na->write_file('redis.pw', "$PASSWORD\n");

# the names the records below are of (a node takes a remote record only
# for a name it has): provider alpha, connections burst-1 .. burst-400
$_->write_file('key', "sk-key\n") for $na, $nb, $nc;
my $NAMES = "omniroute_provider alpha url=http://127.0.0.1:1/v1;\n"
            . join('', map { "    omniroute_connection burst-$_ "
                             . "provider=alpha key_file=%%TESTDIR%%/key;\n" }
                       1 .. 400);
$nc->write_file('redis.pw', "wrong-$PASSWORD\n");

sub node_config {
    my ($n, $name, $auth) = @_;

    $n->config(<<"EOF");
    omniroute_zone zone=omniroute:1m;
    omniroute_redis @{[$redis->addr]} node=$name prefix=t23: db=3 $auth
                    timeout=2s keepalive=1s backoff=20ms backoff_max=100ms
                    queue=16 log_interval=60s;

    $NAMES

    server {
        listen 127.0.0.1:%%PORT_gw%%;

        location /debug {
            omniroute_redis_debug;
        }

        location /link {
            return 200 "\$omniroute_redis_link";
        }
    }
EOF
}

node_config($na, 'node-a', 'password_file=%%TESTDIR%%/redis.pw');
node_config($nb, 'node-b', "password=$PASSWORD");
node_config($nc, 'node-c', 'password_file=%%TESTDIR%%/redis.pw');

sub gw { $_[0]->port('gw') }

sub rec {
    my ($n, $q) = @_;
    return eval { decode_json($n->get(gw($n), "/debug?$q")->{body}) } || {};
}

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

$na->run(gw($na));
$nb->run(gw($nb));
$nc->run(gw($nc));

ok(defined wait_for(sub { link_state($na) eq 'up' }, 5),
   'A: up with the password from a file');
ok(defined wait_for(sub { link_state($nb) eq 'up' }, 5),
   'B: up with the password in nginx.conf');

rec($na, 'table=breaker&key=alpha&op=open&ms=30000');
ok(defined wait_for(sub { rec($nb, 'table=breaker&key=alpha')->{found} }, 2),
   'changes flow between A and B');
is($redis->cmd_in(3, 'EXISTS', 't23:breaker:alpha'), 1,
   'the state is in database 3');
is($redis->cmd('EXISTS', 't23:breaker:alpha'), 0, 'not in database 0');

# a wrong password: the link stays down, the node serves, nothing leaks

# (between retries it is "connecting" for a moment: wait for "down")
sleep(1);
ok(defined wait_for(sub { link_state($nc) eq 'down' }, 5),
   'C (wrong password): link down');
is(rec($nc, 'table=breaker&key=alpha')->{found}, JSON::PP::false,
   'C gets nothing from the cluster');
my $st = rec($nc, '');
cmp_ok($st->{failures}, '>=', 5, "C keeps retrying ($st->{failures} times)");

$nc->stop;
my @err = grep { /\[error\].*omniroute redis/ } split /\n/, $nc->error_log;
is(scalar(@err), 1, 'one error line for all those failures (log_interval)');
like($err[0] // '', qr/AUTH failed: WRONGPASS/, 'it says AUTH failed');
my @leak = grep { /\Q$PASSWORD\E/ } split /\n/,
    $na->error_log . $nb->error_log . $nc->error_log;
is(scalar(@leak), 0, 'R-CONF-6 no log line holds the password');

###########################################################################
# Redis stalls while A makes more changes than its event ring holds

my $n = 400;
my $paused = $redis->cmd('CLIENT', 'PAUSE', 700, 'ALL');
is($paused, 'OK', 'Redis paused for 700 ms');

my $t0 = time;
for my $i (1 .. $n) {
    rec($na, "table=conn&key=burst-$i&op=cooldown&ms=60000");
}
my $took = (time - $t0) * 1000;
ok($took < 2000, sprintf('%d changes made on A meanwhile, never blocked '
                         . '(%.0f ms)', $n, $took));

ok(defined wait_for(sub {
        my $all = rec($nb, 'table=conn')->{records} // [];
        scalar(grep { $_->{key} =~ /^burst-/ } @$all) == $n }, 10),
   "B ends up with all $n changes");

my $sa = rec($na, '');
cmp_ok($sa->{overflows}, '>', 0,
       "the ring overflow was counted ($sa->{overflows} events)");
cmp_ok($sa->{syncs}, '>=', 2, 'and repaired by a resynchronization');
like($na->error_log,
     qr/\[warn\].*state changes were not sent in time \(event ring/,
     'and logged');
is(link_state($na), 'up', 'A: the link stayed up');

is(scalar($redis->keys('t23:*')), 0, 'database 0 untouched');

$nb->done;
$na->done;
$nc->{started} = 0;
$nc->check_error_log;
$redis->stop;
done_testing;
