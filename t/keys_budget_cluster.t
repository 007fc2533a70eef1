#!/usr/bin/perl

# R-BUDGET-5: client key limits across two nginx nodes (2 workers each)
# and a real redis-server: the nodes' usage adds up in one Redis counter
# per rule and window, so a limit holds for the cluster; while Redis is
# down each node keeps to its share (omniroute_client_key_limit_nodes 2);
# when Redis is back (empty, as after a restart) the counts re-converge.

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

my $na = OmniTest->new(workers => 2);
my $redis = RedisServer->new($na)->start;
my $nb = RedisServer::cluster_node($na, 'b');
my $m = $na->mock('p');

$nb->{ports}{mock_p} = $na->port('mock_p');

my $TOKEN = 'budget-cluster-0123456789abcdef';
$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;

my %KEY = (one => 'sk-client-one-0123456789abcdef',
           two => 'sk-client-two-0123456789abcdef');

for my $n ($na, $nb) {
    $n->write_file('key-a', "sk-up-a\n");
    $n->write_file("client-$_", "$KEY{$_}\n") for keys %KEY;
}

for my $n ([$na, 'a'], [$nb, 'b']) {
    my ($t, $name) = @$n;
    my $addr = $redis->addr;
    $t->config(<<"EOF");
    omniroute_zone zone=omniroute:1m;
    omniroute_redis $addr node=$name prefix=t29: timeout=1s backoff=20ms
                    backoff_max=200ms;

    omniroute_provider alpha url=http://127.0.0.1:%%PORT_mock_p%%/alpha;
    omniroute_connection a provider=alpha key_file=%%TESTDIR%%/key-a;
    omniroute_model gpt-4o alpha/gpt-4o;

    omniroute_client_key one file=%%TESTDIR%%/client-one;
    omniroute_client_key two file=%%TESTDIR%%/client-two;
    omniroute_client_key_limit one requests_per_minute=6;
    omniroute_client_key_limit two requests_per_minute=4;
    omniroute_client_key_limit_nodes 2;

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
    $t->run($t->port('gw'));
}

my ($ga, $gb) = ($na->port('gw'), $nb->port('gw'));

sub req {
    my ($port, $key) = @_;
    return $na->post($port, '/v1/chat/completions', { model => 'gpt-4o' },
                     Authorization => "Bearer $KEY{$key}")->{status};
}

sub rpm {
    my ($port, $key) = @_;
    my $r = $na->get($port, "/api/keys/budgets?key=$key",
                     Authorization => "Bearer $TOKEN");
    my $doc = OmniTest::json($r) // {};
    return $doc->{budgets}[0]{limits}{requests_per_minute} // {};
}

# wait until a node sees the others' usage
sub others_is {
    my ($port, $key, $want) = @_;
    my $deadline = time + 10;
    my $got;
    while (time < $deadline) {
        $got = rpm($port, $key)->{others} // -1;
        return $got if $got == $want;
        sleep 0.05;
    }
    return $got;
}

# one UTC minute for the whole test: start early in one
sleep 0.1 while time % 60 >= 30;

###########################################################################
# the nodes' usage adds up

is(req($ga, 'one'), 200, "a: 1 of 6") for 1 .. 3;
is(others_is($gb, 'one', 3), 3, 'b sees the 3 of a');
is(req($gb, 'one'), 200, "b: more of 6") for 1 .. 3;
is(others_is($ga, 'one', 3), 3, 'a sees the 3 of b');
is(req($ga, 'one'), 429, 'a: the 7th of the cluster is refused');
is(req($gb, 'one'), 429, 'b: so is it there');
is_deeply({ @{$redis->cmd('HGETALL', 't29:budget:one:0:' . int(time / 60))
                 // []} }, { a => 3, b => 3 },
          'Redis holds each node\'s count of the minute');

###########################################################################
# Redis down: each node its share (4 / 2)

$redis->stop;

is(others_is($ga, 'two', 2), 2, 'a: the other node is taken to use its '
   . 'share');
is(others_is($gb, 'two', 2), 2, 'b: so is a');
is(req($ga, 'two'), 200, 'a: 1 of its share of 2');
is(req($gb, 'two'), 200, 'b: 1 of its share of 2');
is(req($gb, 'two'), 200, 'b: 2 of its share of 2');
is(req($gb, 'two'), 429, 'b: past its share, refused');
like($nb->error_log, qr/client key budgets: .*each node enforces its share/,
     'b logged the outage');

###########################################################################
# Redis back (empty): the usage of the outage is pushed, counts converge

$redis->start;

is(others_is($gb, 'two', 1), 1, 'b: the share gives way to a\'s real 1');
is(others_is($ga, 'two', 2), 2, 'a: b\'s real 2');
is_deeply({ @{$redis->cmd('HGETALL', 't29:budget:two:0:' . int(time / 60))
                 // []} }, { a => 1, b => 2 },
          'Redis holds both nodes\' usage again');
is(others_is($ga, 'one', 3), 3, 'the counters lost with Redis are refilled');
is(req($ga, 'two'), 200, 'a: the 4th of the cluster');
is(others_is($gb, 'two', 2), 2, 'b sees it');
is(req($gb, 'two'), 429, 'b: the 5th of the cluster is refused');

$nb->stop;
$na->done;
done_testing;
