#!/usr/bin/perl

# The admin API on a two-node cluster (R-CLUSTER-2 with SPEC §12): a
# runtime setting PATCHed on one node, and a breaker reset, reach the other
# node through Redis; a node restarted with an empty zone gets the runtime
# settings back; /metrics shows the Redis link.

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

my $TOKEN = 'cluster-0123456789-abcdef';
$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;

my $na = OmniTest->new;
my $redis = RedisServer->new($na)->start;
my $nb = RedisServer::cluster_node($na, 'b');
my $m = $na->mock('p');

$nb->{ports}{mock_p} = $na->port('mock_p');

for my $n ($na, $nb) {
    $n->write_file('key-a1', "sk-a1~status=503\n");
    $n->write_file('key-b1', "sk-b1\n");
}

sub node_config {
    my ($n, $name) = @_;

    $n->config(<<"EOF");
    omniroute_zone zone=omniroute:1m;
    omniroute_redis ${\ $redis->addr} node=$name prefix=t17: timeout=1s
                    backoff=20ms backoff_max=200ms;

    omniroute_provider alpha url=http://127.0.0.1:%%PORT_mock_p%%/alpha
                       kind=local;
    omniroute_provider beta url=http://127.0.0.1:%%PORT_mock_p%%/beta;

    omniroute_connection a1 provider=alpha key_file=%%TESTDIR%%/key-a1;
    omniroute_connection b1 provider=beta key_file=%%TESTDIR%%/key-b1;

    omniroute_combo smart alpha/m1 beta/m2;

    server {
        listen 127.0.0.1:%%PORT_gw%%;

        location /v1/ {
            omniroute_pass;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
        }

        location / {
            omniroute_api;
            omniroute_api_token env=OMNI_TEST_API_TOKEN;
        }
    }
EOF
}

sub api {
    my ($n, $method, $path, $body) = @_;

    my %h = (Authorization => "Bearer $TOKEN");

    if (defined $body) {
        $body = encode_json($body);
        $h{'Content-Type'} = 'application/json';
    }

    my $r = $n->http($n->port('gw'),
                     OmniTest::request_text($method, $path, $body, %h));
    $r->{json} = eval { decode_json($r->{body}) };
    return $r;
}

sub wait_for {
    my ($cond, $timeout) = @_;
    my $t0 = time;
    while (time - $t0 < ($timeout // 5)) {
        return 1 if $cond->();
        sleep(0.02);
    }
    return 0;
}

sub metric {
    my ($n, $name) = @_;
    my $body = api($n, 'GET', '/metrics')->{body} // '';
    return $body =~ /^\Q$name\E (\S+)$/m ? $1 : undef;
}

sub open_threshold {
    my ($n) = @_;
    my $s = api($n, 'GET', '/api/resilience')->{json};
    my $p = $s->{providers}{alpha};
    return "$p->{breaker}{open_threshold}/$p->{sources}{breaker}{open_threshold}";
}

node_config($na, 'node-a');
node_config($nb, 'node-b');

$na->run($na->port('gw'));
$nb->run($nb->port('gw'));

ok(wait_for(sub {
       (metric($na, 'omniroute_redis_link_state{state="up"}') // 0) == 1
       && (metric($nb, 'omniroute_redis_link_state{state="up"}') // 0) == 1
   }), 'both links up, as /metrics shows');

is(api($na, 'GET', '/api/monitoring/health')->{json}{redis}{state}, 'up',
   'health shows the link');
is(metric($na, 'omniroute_redis_link_state{state="down"}'), 0,
   'one state at a time');
ok(defined metric($na, 'omniroute_redis_published_total'),
   'Redis counters are exported');

# a runtime setting made on A reaches B
my $r = api($na, 'PATCH', '/api/resilience', { providers => { alpha => {
    breaker => { open_threshold => 1 },
    error_rules => [{ status => 418, reason => 'server_error' }] } } });
is($r->{status}, 200, 'PATCH on node A');

ok(wait_for(sub { open_threshold($nb) eq '1/runtime' }),
   'node B sees the runtime value');
is(api($nb, 'GET', '/api/resilience')->{json}{providers}{alpha}{sources}
   {error_rules}, 'runtime', 'and the runtime rules');

ok(metric($na, 'omniroute_redis_published_total') > 0,
   'node A published');
ok(metric($nb, 'omniroute_redis_applied_total') > 0, 'node B applied');

# ... and B's request path uses it: one 503 opens the breaker
$r = $nb->post($nb->port('gw'), '/v1/chat/completions', { model => 'smart' });
is($r->{headers}{'x-omniroute-connection'}, 'b1', 'B: a1 failed over');
is(api($nb, 'GET', '/api/monitoring/health')->{json}{providers}{alpha}
   {state}, 'OPEN', 'B: alpha OPEN after one failure');
ok(wait_for(sub {
       api($na, 'GET', '/api/monitoring/health')->{json}{providers}{alpha}
       {state} eq 'OPEN'
   }), 'A sees the breaker B opened');

# a reset on A closes it on B
$r = api($na, 'POST', '/api/resilience/reset', { provider => 'alpha' });
is_deeply($r->{json}{reset}, ['alpha'], 'reset on A');
ok(wait_for(sub {
       api($nb, 'GET', '/api/monitoring/health')->{json}{providers}{alpha}
       {state} eq 'CLOSED'
   }), 'B sees the reset');

# B restarts with an empty zone: it loads the runtime settings back
$nb->stop;
$nb->run($nb->port('gw'));

ok(wait_for(sub { open_threshold($nb) eq '1/runtime' }),
   'restarted B has the runtime value back from Redis');

# removing the override on B removes it on A
$r = api($nb, 'PATCH', '/api/resilience', { providers => { alpha => {
    breaker => { open_threshold => undef }, error_rules => undef } } });
is($r->{status}, 200, 'PATCH null on node B');
ok(wait_for(sub { open_threshold($na) eq '2/default' }),
   'A is back to the default');

$nb->done;
$na->done;
$redis->stop;

done_testing;
