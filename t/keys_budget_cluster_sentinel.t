#!/usr/bin/perl

# R-BUDGET-5 behind Redis Sentinel: a master, a replica, two
# redis-sentinel processes and two nginx nodes (2 workers each) with
# "omniroute_redis sentinel=... master=omni".  The budget counters' link
# asks a sentinel for the master like the mirror does; after a failover
# (SENTINEL FAILOVER) it follows +switch-master to the new master, where
# the nodes' counts go on adding up.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(sleep time);
use OmniTest;
use RedisServer;

OmniTest::need(RedisServer::available(), 'redis-server not installed');
OmniTest::need(RedisServer::sentinel_available(),
               'redis-sentinel not installed');

my $na = OmniTest->new(workers => 2);
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

my $TOKEN = 'budget-snt-0123456789abcdef';
$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;

my $KEY = 'sk-client-snt-0123456789abcdef';

sub wait_for {
    my ($cond, $timeout) = @_;
    my $deadline = time + ($timeout // 10);
    while (time < $deadline) {
        return 1 if $cond->();
        sleep 0.05;
    }
    return 0;
}

sub role { my $r = $_[0]->cmd('ROLE'); ref $r ? $r->[0] : '' }

ok(wait_for(sub { ($replica->cmd('INFO', 'replication') // '')
                  =~ /master_link_status:up/ }),
   'the replica follows the master');
ok(wait_for(sub {
        my $r = $sentinels[0]->cmd('SENTINEL', 'replicas', 'omni');
        ref $r && @$r >= 1 }, 20),
   'the sentinels know the replica');

my $SENTINELS = join ',', map { '127.0.0.1:' . $_->port } @sentinels;

for my $n ([$na, 'a'], [$nb, 'b']) {
    my ($t, $name) = @$n;
    $t->write_file('key-a', "sk-up-a\n");
    $t->write_file('client-one', "$KEY\n");
    $t->config(<<"EOF");
    omniroute_zone zone=omniroute:1m;
    omniroute_redis sentinel=$SENTINELS master=omni node=$name
                    prefix=t29s: timeout=1s backoff=20ms backoff_max=200ms;

    omniroute_provider alpha url=http://127.0.0.1:%%PORT_mock_p%%/alpha;
    omniroute_connection a provider=alpha key_file=%%TESTDIR%%/key-a;
    omniroute_model gpt-4o alpha/gpt-4o;

    omniroute_client_key one file=%%TESTDIR%%/client-one;
    omniroute_client_key_limit one tokens_per_day=100000;

    server {
        listen 127.0.0.1:%%PORT_gw%%;

        location /v1/ {
            omniroute_pass;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
        }

        location /api/ {
            omniroute_api;
            omniroute_api_token env=OMNI_TEST_API_TOKEN;
        }
    }
EOF
}

# one UTC day for the whole test (the mock's answers: 18 tokens each)
sleep 1 while time % 86400 >= 86400 - 120;

my $day = int(time / 86400);
my $hkey = "t29s:budget:one:3:$day";

$na->run($na->port('gw'));
$nb->run($nb->port('gw'));

my ($ga, $gb) = ($na->port('gw'), $nb->port('gw'));

sub req {
    my ($port) = @_;
    return $na->post($port, '/v1/chat/completions', { model => 'gpt-4o' },
                     Authorization => "Bearer $KEY")->{status};
}

sub others {
    my ($port) = @_;
    my $r = $na->get($port, '/api/keys/budgets?key=one',
                     Authorization => "Bearer $TOKEN");
    my $doc = OmniTest::json($r) // {};
    return $doc->{budgets}[0]{limits}{tokens_per_day}{others} // -1;
}

sub counts {
    my ($redis) = @_;
    my $r = $redis->cmd('HGETALL', $hkey);
    return ref $r ? { @$r } : {};
}

ok(wait_for(sub { $na->error_log =~ /client key budgets shared/
                  && $nb->error_log =~ /client key budgets shared/ }),
   'both nodes: the budget link found the master through a sentinel');

is(req($ga), 200, 'a: a request') for 1 .. 2;
ok(wait_for(sub { others($gb) == 36 }), 'b sees the 36 tokens of a');
is(req($gb), 200, 'b: a request');
ok(wait_for(sub { others($ga) == 18 }), 'a sees the 18 of b');
is_deeply(counts($master), { a => 36, b => 18 },
          'the counts are on the master');

# the failover

my $new = $replica->port;

like($sentinels[0]->cmd('SENTINEL', 'FAILOVER', 'omni') // '', qr/OK/,
     'SENTINEL FAILOVER');
ok(wait_for(sub { role($replica) eq 'master' }, 30),
   'the replica is the master now');

for my $n ([$na, 'a'], [$nb, 'b']) {
    ok(wait_for(sub { $n->[0]->error_log
                      =~ /budgets: sentinel: master "omni" switched to 127\.0\.0\.1:$new/ },
                30),
       "$n->[1]: the budget link followed +switch-master");
}

is(req($gb), 200, 'b: a request after the failover');
is(req($gb), 200, 'b: another');
ok(wait_for(sub { counts($replica)->{b} && counts($replica)->{b} == 54 }),
   'b\'s count is written to the new master');
ok(wait_for(sub { others($ga) == 54 }),
   'a reads it there: the counts go on adding up');
is(req($ga), 200, 'a: a request after the failover');
ok(wait_for(sub { others($gb) == 54 }), 'b sees a\'s 54');
is_deeply(counts($replica), { a => 54, b => 54 },
          'the new master holds both nodes\' counts');

$nb->done;
$na->done;
$_->stop for @sentinels;
$replica->stop;
$master->stop;

done_testing();
