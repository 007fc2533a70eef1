#!/usr/bin/perl

# Redis as production runs it (issue 28): Redis Sentinel.  A master and a
# replica (real redis-server processes), two redis-sentinel processes, two
# nginx nodes (2 workers each) with "omniroute_redis sentinel=...
# master=omni": the nodes ask a sentinel for the master and find it (a
# third one listed is down: the next is asked); a
# failover (SENTINEL FAILOVER) switches the master: both nodes follow
# +switch-master, the mirror and the leases of every worker reconnect to
# the new master, the leases granted before the switch hold there, and
# managed requests go on through it without a failure.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(sleep time);
use OmniTest;
use RedisServer;
use OmniCluster qw(gw server_block wait_for);

OmniTest::need(RedisServer::available(), 'redis-server not installed');
OmniTest::need(RedisServer::sentinel_available(),
               'redis-sentinel not installed');

my $na = OmniTest->new;
my $master = RedisServer->new($na)->start;
my $replica = RedisServer->new($na, name => 'replica',
                               args => [ '--replicaof', '127.0.0.1',
                                         $master->port ])->start;
my @sentinels = map {
    RedisServer->new($na, name => "sentinel$_",
                     sentinel => { master => 'omni',
                                   port => $master->port })->start
} 1 .. 2;
my $nb = RedisServer::cluster_node($na, 'b');
my $m = $na->mock('p');

$nb->{ports}{mock_p} = $na->port('mock_p');

my $LK = 'sk-lease-key-snt-0123456789';

for my $n ($na, $nb) {
    $n->write_file("key-$_", "sk-up-$_\n") for qw(a1 a2);
    $n->write_file('lk', "$LK\n");
}

sub role { my $r = $_[0]->cmd('ROLE'); ref $r ? $r->[0] : '' }

ok(wait_for(sub { ($replica->cmd('INFO', 'replication') // '')
                  =~ /master_link_status:up/ }, 10),
   'the replica follows the master');
ok(wait_for(sub {
        my $r = $sentinels[0]->cmd('SENTINEL', 'replicas', 'omni');
        ref $r && @$r >= 1 }, 20),
   'the sentinels know the replica');

# and a sentinel that is down: the next one is asked
my $SENTINELS = join ',', '127.0.0.1:' . $na->port('sentinel_down'),
                          map { '127.0.0.1:' . $_->port } @sentinels;

sub node_config {
    my ($n, $name, $redis_args) = @_;

    $n->config(<<"EOF");
    omniroute_zone zone=omniroute:1m;
    omniroute_redis $redis_args node=$name prefix=t28s: timeout=1s
                    backoff=20ms backoff_max=200ms;

    omniroute_provider alpha url=http://127.0.0.1:%%PORT_mock_p%%/alpha;
    omniroute_connection a1 provider=alpha key_file=%%TESTDIR%%/key-a1;
    omniroute_connection a2 provider=alpha key_file=%%TESTDIR%%/key-a2;

    omniroute_client_key lk file=%%TESTDIR%%/lk connections=a1,a2
                         scope=lease:exclusive;

    omniroute_lease_ttl 60s;

${\ server_block(leases => 1, link => 1)}
EOF
}

sub lease { OmniCluster::lease($_[0], $LK, $_[1]) }
sub infer { OmniCluster::infer($_[0], $LK, $_[1], $_[2]) }
sub leases_up { OmniCluster::lease_up($_[0], $LK, $_[1]) }

sub link_up { $_[0]->get(gw($_[0]), '/link')->{body} eq 'up' }

# configuration errors

for my $case (
    [ "sentinel=$SENTINELS", '"sentinel=" and "master=" go together',
      'sentinel= without master=' ],
    [ $master->addr . ' master=omni', '"sentinel=" and "master=" go together',
      'master= without sentinel=' ],
    [ "sentinel=localhost:26379 master=omni", 'host names are not resolved',
      'a sentinel host name' ],
    [ $master->addr . " sentinel=$SENTINELS master=omni",
      '"sentinel=" takes the place of the address',
      'an address and sentinels' ],
) {
    my ($args, $re, $what) = @$case;
    node_config($na, 'node-a', $args);
    my ($rc, $out) = $na->test_config;
    ok($rc != 0 && $out =~ /\Q$re\E/, "nginx -t refuses $what")
        or diag($out);
}

node_config($na, 'node-a', "sentinel=$SENTINELS master=omni");
node_config($nb, 'node-b', "sentinel=$SENTINELS master=omni");

$na->run(gw($na));
$nb->run(gw($nb));

ok(wait_for(sub { link_up($na) && link_up($nb) }),
   'both mirrors found the master through a sentinel');
ok(leases_up($na) && leases_up($nb), 'both nodes: lease calls reach it');

my $r = lease($na, { action => 'acquire' });
is($r->{status}, 200, 'A: acquire') or diag($r->{body});
my ($OWNER, $CONN) = ($r->{doc}{lease}{owner}, $r->{doc}{lease}{connection});
ok($master->cmd('EXISTS', "t28s:lease:conn:$CONN"),
   'the lease is on the master');
ok(wait_for(sub { $replica->cmd('EXISTS', "t28s:lease:conn:$CONN") }),
   '... and replicated');

# the failover, while a client keeps sending managed requests

my $pid = fork // die "fork: $!";

if ($pid == 0) {
    # the client: until told to stop, one request after another
    my ($n, $fail) = (0, 0);
    my $stop = $na->dir . '/client.stop';
    while (!-e $stop) {
        my $x = infer($n % 2 ? $nb : $na, $OWNER, 1);
        $fail++ if $x->{status} != 200;
        $n++;
    }
    $na->write_file('client.result', "$n $fail\n");
    POSIX::_exit(0);
}

my $old = $master->port;
my $new = $replica->port;

like($sentinels[0]->cmd('SENTINEL', 'FAILOVER', 'omni') // '', qr/OK/,
     'SENTINEL FAILOVER');
ok(wait_for(sub { role($replica) eq 'master' }, 30),
   'the replica is the master now');

for my $n ($na, $nb) {
    my $name = $n == $na ? 'A' : 'B';
    ok(wait_for(sub { $n->error_log =~ /master "omni" switched to 127\.0\.0\.1:$new/ }, 30),
       "node $name: +switch-master followed");
    ok(wait_for(sub { link_up($n) }, 10), "node $name: the mirror is up again");
    ok(leases_up($n, 10), "node $name: lease calls reach the new master");
}

sub subscribers {
    my ($redis, $channel) = @_;
    my $r = $redis->cmd('PUBSUB', 'NUMSUB', $channel);
    return ref $r ? $r->[1] : -1;
}

ok(wait_for(sub { subscribers($replica, 't28s:events:0') == 2
                  && subscribers($replica, 't28s:leases:0') == 2 }),
   'the new master has both mirrors\' and both lease subscribers');
is(subscribers($master, 't28s:events:0')
   + subscribers($master, 't28s:leases:0'), 0, 'the old master none');

$na->write_file('client.stop', '');
waitpid($pid, 0);
my ($sent, $failed) = split ' ', $na->read_file('client.result');
cmp_ok($sent, '>=', 10, "the client sent $sent managed requests");
is($failed, 0, 'none failed during the failover');

$r = lease($nb, { action => 'renew', owner => $OWNER, generation => 1 });
is($r->{status}, 200, 'B: the lease granted before the switch holds on the '
                      . 'new master (renew)') or diag($r->{body});
$r = lease($nb, { action => 'acquire' });
is($r->{status}, 200, 'B: acquire on the new master');
isnt($r->{doc}{lease}{connection}, $CONN, '... the other connection');
ok($replica->cmd('EXISTS', 't28s:lease:conn:' . $r->{doc}{lease}{connection}),
   'written to the new master');

$nb->done;
$na->done;
$_->stop for @sentinels;
$replica->stop;
$master->stop;

done_testing();
