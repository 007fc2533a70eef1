#!/usr/bin/perl

# R-BUDGET-5 on a Redis that requires an ACL user (the default user off):
# the budget counters' link is the connection machine's, so it sends
# "AUTH user password" like the mirror and the leases do; two nginx
# nodes (2 workers each) share a limit through it.  A node with a wrong
# password keeps to its share and logs why, never the password.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(sleep time);
use OmniTest;
use RedisServer;

OmniTest::need(RedisServer::available(), 'redis-server not installed');

my $PASSWORD = 'acl-budget-pw-Qm41';
my $WRONG = 'wrong-budget-pw-Xv93';

my $na = OmniTest->new(workers => 2);
my $redis = RedisServer->new($na, user => 'omni', password => $PASSWORD)
            ->start;
my $nb = RedisServer::cluster_node($na, 'b');
my $nc = RedisServer::cluster_node($na, 'c');
my $m = $na->mock('p');

$_->{ports}{mock_p} = $na->port('mock_p') for $nb, $nc;

my $TOKEN = 'budget-acl-0123456789abcdef';
$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;

my $KEY = 'sk-client-acl-0123456789abcdef';

for my $n ($na, $nb, $nc) {
    $n->write_file('key-a', "sk-up-a\n");
    $n->write_file('client-one', "$KEY\n");
    $n->write_file('redis.pw', ($n == $nc ? $WRONG : $PASSWORD) . "\n");
}

for my $n ([$na, 'a'], [$nb, 'b'], [$nc, 'c']) {
    my ($t, $name) = @$n;
    my $addr = $redis->addr;
    $t->config(<<"EOF");
    omniroute_zone zone=omniroute:1m;
    omniroute_redis $addr user=omni password_file=%%TESTDIR%%/redis.pw
                    node=$name prefix=t29a: timeout=1s backoff=20ms
                    backoff_max=200ms log_interval=60s;

    omniroute_provider alpha url=http://127.0.0.1:%%PORT_mock_p%%/alpha;
    omniroute_connection a provider=alpha key_file=%%TESTDIR%%/key-a;
    omniroute_model gpt-4o alpha/gpt-4o;

    omniroute_client_key one file=%%TESTDIR%%/client-one;
    omniroute_client_key_limit one requests_per_minute=6;
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
}

# one UTC minute for the whole test: start early in one
sleep 0.1 while time % 60 >= 30;

$_->run($_->port('gw')) for $na, $nb, $nc;

my ($ga, $gb, $gc) = map { $_->port('gw') } $na, $nb, $nc;

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
    return $doc->{budgets}[0]{limits}{requests_per_minute}{others} // -1;
}

sub wait_for {
    my ($cond, $timeout) = @_;
    my $deadline = time + ($timeout // 10);
    while (time < $deadline) {
        return 1 if $cond->();
        sleep 0.05;
    }
    return 0;
}

# a node with the right password: shared as ACL user "omni"

ok(wait_for(sub { $na->error_log =~ /client key budgets shared/
                  && $nb->error_log =~ /client key budgets shared/ }),
   'both nodes: the budget link is up as ACL user "omni"');

# counts other than the shares of an outage (3 of 6): read from Redis
is(req($ga), 200, 'a: 1 of 6') for 1 .. 2;
ok(wait_for(sub { others($gb) == 2 }), 'b sees the 2 of a');
is(req($gb), 200, 'b: more of 6') for 1 .. 4;
ok(wait_for(sub { others($ga) == 4 }), 'a sees the 4 of b');
is(req($ga), 429, 'a: the 7th of the cluster is refused');
is(req($gb), 429, 'b: so is it there');

my $hkey = 't29a:budget:one:0:' . int(time / 60);
is_deeply({ @{$redis->cmd('HGETALL', $hkey) // []} },
          { a => 2, b => 4 },
          'Redis holds each node\'s count, written as "omni"');

my $clients = $redis->cmd('CLIENT', 'LIST') // '';
unlike($clients, qr/\buser=default\b/, 'no connection as the default user');

# the wrong password: refused, logged, the node keeps to its share

ok(wait_for(sub { $nc->error_log
                  =~ /client key budgets: AUTH failed: WRONGPASS.*each node enforces its share/ }),
   'c: the wrong password is logged by the budget link');
ok(wait_for(sub { others($gc) == 3 }),
   'c: the other node is taken to use its share (6 / 2)');
is(req($gc), 200, "c: 1 of its share of 3") for 1 .. 3;
is(req($gc), 429, 'c: past its share, refused');

my @l = grep { /client key budgets: AUTH failed/ } split /\n/,
        $nc->error_log;
is(scalar(@l), 1, 'c: logged once per log_interval');

for my $n ([$na, 'a'], [$nb, 'b'], [$nc, 'c']) {
    unlike($n->[0]->error_log, qr/\Q$PASSWORD\E|\Q$WRONG\E/,
           "no password in $n->[1]'s log");
}

$nc->done;
$nb->done;
$na->done;
$redis->stop;

done_testing;
